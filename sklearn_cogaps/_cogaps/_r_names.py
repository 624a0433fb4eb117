"""R CoGAPS's parameter names, and what to write here instead: a user who calls
``CoGAPS(nPatterns=3)`` or ``CoGAPS(seed=1)`` gets a ``TypeError`` that says it (see
``DataInFitMixin``)."""

__all__ = ["R_ATTRIBUTES", "R_PARAMETERS"]

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

#: The names of R CoGAPS's and PyCoGAPS's results and functions, read on a fitted model:
#: ``{name: (whose, what to write instead)}`` (their A, genes x patterns, is our
#: ``components_.T``; their P, samples x patterns, our ``loadings_``).
R_ATTRIBUTES = {
    name: ("R CoGAPS's and PyCoGAPS", instead)
    for name, instead in {
        **dict.fromkeys(
            ["featureLoadings", "Amean", "getFeatureLoadings", "getAmplitudeMatrix"],
            "components_.T (genes x patterns)",
        ),
        **dict.fromkeys(
            ["sampleFactors", "Pmean", "getSampleFactors", "getPatternMatrix"],
            "loadings_ (samples x patterns)",
        ),
        # R's loadingStdDev is that of the genes' amplitudes, not of our loadings_
        **dict.fromkeys(
            ["loadingStdDev", "Asd"], "components_std_.T (the genes' amplitudes' deviations)"
        ),
        **dict.fromkeys(
            ["factorStdDev", "Psd"], "loadings_std_ (the samples' patterns' deviations)"
        ),
        "patternMarkers": 'pattern_markers(threshold="all") (axis="samples" for R\'s axis=2)',
        "calcZ": "z_scores()",
        "calcCoGAPSStat": "sklearn_cogaps.gene_set_statistic(model.components_, "
        "model.components_std_, sets, feature_names=genes), with genes = "
        "model.feature_names_in_ after a fit to a DataFrame or an AnnData (without "
        "feature_names, the sets hold column indices)",
        "getPatternGeneSet": "sklearn_cogaps.marker_overrepresentation(model.components_, "
        "model.loadings_, sets, feature_names=genes), with genes = model.feature_names_in_ "
        "as for calcCoGAPSStat: R's method='overrepresentation' (its default "
        "method='enrichment', fgsea on the amplitudes, is not offered: gene_set_statistic "
        "tests each set by its members' mean z-score)",
        **dict.fromkeys(
            ["calcGeneGSStat", "computeGeneGSProb"],
            "nothing per gene: sklearn_cogaps.gene_set_statistic(...) tests each set as "
            "calcCoGAPSStat does (doc/cogaps_gene_sets.rst)",
        ),
        "getVersion": "sklearn_cogaps.__version__",
        "getOriginalParameters": "get_params()",
        "projectR": "transform(X_new) for data of the fitted genes; for data of other genes, "
        "a fit on the genes both have with the amplitudes fixed: keep = "
        "np.isin(model.feature_names_in_, X_new.columns); CoGAPS(model.n_components)"
        ".fit(X_new[model.feature_names_in_[keep]], fixed_components=model.components_[:, "
        "keep]).loadings_",
        "plotPatterns": "sklearn_cogaps.plotting.plot_patterns(model, x=time_points)",
        "binaryA": "model.z_scores()[1].T > 3 (genes x patterns, R's default threshold=3; "
        "draw it with matplotlib's imshow)",
        "reconstructGene": "model.loadings_ @ model.components_ (samples x genes)",
        "plotResiduals": "(X - model.loadings_ @ model.components_) / uncertainty, drawn "
        "with matplotlib's imshow",
        "plotPatternMarkers": "sklearn_cogaps.plotting.plot_markers(model, X=X)",
        "getClusteredPatterns": "subset_patterns_ with pattern_clusters_ (distributed fits)",
        "getUnmatchedPatterns": "subset_patterns_ where pattern_clusters_ is -1 (distributed fits)",
        "getCorrelationToMeanPattern": "consensus_correlation_ (distributed fits)",
        "getSubsets": "subsets_ (distributed fits)",
        **dict.fromkeys(["getMeanChiSq", "meanChiSq"], "chisq_"),
    }.items()
}
