"""R CoGAPS's parameter names, and what to write here instead: a user who calls
``CoGAPS(nPatterns=3)`` or ``CoGAPS(seed=1)`` gets a ``TypeError`` that says it (see
``DataInFitMixin``)."""

__all__ = ["R_PARAMETERS"]

#: ``{R's name: ("R CoGAPS", what to write instead)}``.
R_PARAMETERS = {
    name: ("R CoGAPS", instead)
    for name, instead in {
        "nPatterns": "n_components=K",
        "nIterations": "max_iter=N (iterations of each phase, as nIterations)",
        "seed": "random_state=seed",
        "alphaA": "atom_density_H=... (its A is our H)",
        "alphaP": "atom_density_W=... (its P is our W)",
        "maxGibbsMassA": "max_gibbs_mass_H=...",
        "maxGibbsMassP": "max_gibbs_mass_W=...",
        "sparseOptimization": "sparse_optimization=True",
        "nSets": "n_sets=...",
        "minNS": "min_ns=...",
        "maxNS": "max_ns=...",
        "explicitSets": "explicit_sets=...",
        "singleCell": 'distributed="single-cell"',
        "nThreads": "nothing here: the fit uses OpenMP's threads, limited by "
        "OMP_NUM_THREADS or threadpoolctl.threadpool_limits(n, user_api='openmp')",
        "uncertainty": "CoGAPS(...).fit(X, uncertainty=U)",
        "messages": "verbose=1",
        "outputFrequency": "verbose=1 (a progress line about every tenth of max_iter)",
        "transposeData": "fit(X.T): X here is samples x features, R's data genes x samples",
        **dict.fromkeys(
            ["geneNames", "sampleNames"],
            "fit(df) with a pandas DataFrame (or an AnnData) that carries the names",
        ),
        **dict.fromkeys(
            ["subsetIndices", "subsetDim"],
            "fit(X[:, genes]) for subsetDim=1 or fit(X[samples]) for subsetDim=2; for "
            "the subsets of distributed mode, explicit_sets=...",
        ),
        "checkpointInterval": "checkpoint_every=N (iterations), with checkpoint_path=...",
        **dict.fromkeys(
            ["checkpointOutFile", "checkpointInFile"],
            "checkpoint_path=... (one file: written during the fit, and resumed from when "
            "a fit starts while it exists)",
        ),
        "nSnapshots": "n_snapshots=N (the states are loadings_snapshots_ and "
        "components_snapshots_)",
        "snapshotPhase": 'snapshot_phase="sampling", "calibration" (R\'s "equilibration") or "all"',
        "asynchronousUpdates": "nothing: the chain is always the asynchronous one, with "
        "the same result for any number of threads",
        "BPPARAM": "n_jobs=... in distributed mode, or joblib.parallel_config(backend=...)",
        "params": "CoGAPS(**parameters), with our names for the CogapsParams slots "
        "(n_components=, max_iter=, random_state=, ...)",
        **dict.fromkeys(
            ["fixedPatterns", "whichMatrixFixed"],
            "CoGAPS(...).fit(X, fixed_components=H) for 'A' (whichMatrixFixed), or "
            "fit(X, fixed_patterns=W) for 'P'",
        ),
    }.items()
}
