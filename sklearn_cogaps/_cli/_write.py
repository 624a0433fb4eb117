"""Writing the results of the command line: .npz, CSV/TSV tables, and the AnnData copy."""

import csv
from pathlib import Path

import numpy as np

from ._read import _import_anndata, _kind

__all__ = ["OUTPUT_FORMATS", "chain_status", "write_h5ad", "write_results"]

OUTPUT_FORMATS = ".npz, .csv, .tsv"


def _pattern_names(k):
    return np.array([f"Pattern_{i + 1}" for i in range(k)], dtype=str)


def _write_table(path, values, row_names, col_names, sep, index_label):
    with open(path, "w", newline="") as f:
        writer = csv.writer(f, delimiter=sep)
        writer.writerow([index_label, *col_names])
        for name, row in zip(row_names, values):
            writer.writerow([name, *(repr(float(v)) for v in row)])


def chain_status(model):
    """How far the chain of a CoGAPS fit started by ``fit`` went.

    Parameters
    ----------
    model : CoGAPS
        A fitted estimator (not continued with ``warm_start``).

    Returns
    -------
    status : dict
        ``complete`` (bool: both phases ran all ``max_iter`` iterations, or the phases of
        several chains ended; False after an interruption), ``calibration`` and
        ``sampling`` (iterations run in each phase) and ``status`` (``"complete"`` or
        ``"partial"``).
    """
    n_iter, n = int(model.n_iter_), int(model.max_iter)
    calibration = getattr(model, "_n_calibration_iter", None)
    if getattr(model, "rhat_", None) is not None and calibration is not None:
        # several chains run their phases, which the diagnostics may end before max_iter
        # (tol), unless Ctrl-C stopped them (the chains completed, or the last round, kept)
        complete = getattr(model, "_chains_complete", True)
        return {"status": "complete" if complete else "partial", "complete": complete,
                "calibration": int(calibration), "sampling": n_iter - int(calibration)}  # fmt: skip
    complete = n_iter >= 2 * n
    return {
        "status": "complete" if complete else "partial",
        "complete": complete,
        "calibration": min(n_iter, n),
        "sampling": max(n_iter - n, 0),
    }


def write_results(path, model, sample_names=None, feature_names=None):
    """Write a fitted :class:`~sklearn_cogaps.CoGAPS` to ``.npz`` or to CSV/TSV tables.

    The trace labels the calibration iterations (the first ``max_iter``, or as many as the
    diagnostics of several chains ran with ``tol``) as such, which is right for a chain
    started by ``fit`` (not one continued with ``warm_start``). A chain that stopped
    early (interrupted) is written as it is and marked partial: ``complete`` is False in the
    ``.npz`` archive, ``status`` is ``partial`` in the ``OUT_status`` table.

    Parameters
    ----------
    path : str or path-like
        ``OUT.npz`` writes one archive; ``OUT.csv`` or ``OUT.tsv`` writes the tables
        ``OUT_patterns``, ``OUT_patterns_std``, ``OUT_amplitudes``, ``OUT_amplitudes_std``
        (features in rows), ``OUT_trace`` and ``OUT_status`` (whether the chain is complete,
        the iterations of each phase, the chi-square, the uncertainty model) with that
        extension.
    model : CoGAPS
        A fitted estimator.
    sample_names, feature_names : array-like of str, default=None
        Names of the rows and columns of the fitted data.

    Returns
    -------
    written : list of pathlib.Path
        The files written.
    """
    path = Path(path)
    kind = _kind(path, (".npz", ".csv", ".tsv"), "the output")
    K = model.components_.shape[0]
    patterns = _pattern_names(K)
    n_iter = model.n_iter_
    status = chain_status(model)
    if kind == ".npz":
        arrays = {
            "patterns": model.loadings_,
            "patterns_std": model.loadings_std_,
            "amplitudes": model.components_,
            "amplitudes_std": model.components_std_,
            "chisq_history": model.objective_history_,
            "n_atoms_history": model.n_atoms_history_,
            "chisq": np.float64(model.chisq_),
            "lambda": np.array([model.lambda_W_, model.lambda_H_]),
            "pattern_names": patterns,
            "complete": np.bool_(status["complete"]),
            # converged_: a run that ran into a cap, or whose chains disagree, is complete
            # but not converged
            "converged": np.bool_(getattr(model, "converged_", True)),
            "n_calibration": np.int64(status["calibration"]),
            "n_sampling": np.int64(status["sampling"]),
            "uncertainty_model": np.str_(model.uncertainty_model_),
        }
        rhat = getattr(model, "rhat_", None)
        if rhat is not None:
            arrays["n_chains"] = np.int64(model.chain_loadings_.shape[0])
            # several chains: their diagnostics, in the file's names of W and H
            for name, key in (("chisq", "chisq"), ("patterns", "loadings"),
                              ("amplitudes", "components")):  # fmt: skip
                arrays[f"rhat_{name}"] = np.asarray(rhat[key])
                arrays[f"ess_bulk_{name}"] = np.asarray(model.ess_bulk_[key])
            # each chain's own means, which the pooled ones are not when the chains
            # disagree (the fit's warning then points to them)
            arrays["chain_patterns"] = model.chain_loadings_
            arrays["chain_amplitudes"] = model.chain_components_
        if getattr(model, "n_snapshots", 0):
            # the kept states (--n-snapshots), in the file's names of W and H
            arrays["patterns_snapshots"] = model.loadings_snapshots_
            arrays["amplitudes_snapshots"] = model.components_snapshots_
            arrays["snapshot_iterations"] = model.snapshot_iterations_
            if getattr(model, "snapshot_chains_", None) is not None:
                arrays["snapshot_chains"] = model.snapshot_chains_
        if sample_names is not None:
            arrays["sample_names"] = np.asarray(sample_names, dtype=str)
        if feature_names is not None:
            arrays["feature_names"] = np.asarray(feature_names, dtype=str)
        # to the file named: numpy adds ".npz" to a name that ends otherwise (R.NPZ)
        with open(path, "wb") as f:
            np.savez_compressed(f, **arrays)
        return [path]

    sep = "," if kind == ".csv" else "\t"
    prefix = str(path)[: -len(kind)]
    samples = (
        sample_names
        if sample_names is not None
        else [f"sample_{i}" for i in range(model.loadings_.shape[0])]
    )
    features = (
        feature_names
        if feature_names is not None
        else [f"feature_{j}" for j in range(model.components_.shape[1])]
    )
    written = []
    for name, values, rows, label in [
        ("patterns", model.loadings_, samples, "sample"),
        ("patterns_std", model.loadings_std_, samples, "sample"),
        ("amplitudes", model.components_.T, features, "feature"),
        ("amplitudes_std", model.components_std_.T, features, "feature"),
    ]:
        out = Path(f"{prefix}_{name}{kind}")
        _write_table(out, values, rows, patterns, sep, label)
        written.append(out)
    n_calibration = chain_status(model)["calibration"]
    phase = ["calibration" if i < n_calibration else "sampling" for i in range(n_iter)]
    out = Path(f"{prefix}_trace{kind}")
    with open(out, "w", newline="") as f:
        writer = csv.writer(f, delimiter=sep)
        writer.writerow(["iteration", "phase", "chisq", "atoms_W", "atoms_H"])
        for i in range(n_iter):
            atoms = model.n_atoms_history_[i]
            writer.writerow(
                [
                    i + 1,
                    phase[i],
                    repr(float(model.objective_history_[i])),
                    int(atoms[0]),
                    int(atoms[1]),
                ]
            )
    written.append(out)
    out = Path(f"{prefix}_status{kind}")
    with open(out, "w", newline="") as f:
        writer = csv.writer(f, delimiter=sep)
        writer.writerow(["key", "value"])
        writer.writerow(["status", status["status"]])
        writer.writerow(["calibration_iterations", status["calibration"]])
        writer.writerow(["sampling_iterations", status["sampling"]])
        writer.writerow(["max_iter", model.max_iter])
        writer.writerow(["uncertainty_model", model.uncertainty_model_])
        writer.writerow(["chisq", repr(float(model.chisq_))])
    written.append(out)
    return written


def write_h5ad(path, source, model, layer=None):
    """Copy an ``.h5ad`` file and add a CoGAPS fit of its matrix to the copy.

    Only the results are written into the copy (with anndata's element writer), so the
    matrix is never loaded: ``obsm["X_cogaps"]`` and ``obsm["X_cogaps_std"]`` (patterns
    and their standard deviations, one row per cell), ``varm["cogaps_components"]`` and
    ``varm["cogaps_components_std"]`` (amplitudes, one row per gene) and ``uns["cogaps"]``
    (the parameters, the chi-square trace and whether the chain is complete).

    Parameters
    ----------
    path : str or path-like
        The new ``.h5ad`` file.
    source : str or path-like
        The ``.h5ad`` file that was fitted (cells × genes, not transposed).
    model : CoGAPS
        The estimator fitted to ``source``'s ``X`` (or ``layer``).
    layer : str, default=None
        The layer that was fitted, recorded in ``uns["cogaps"]["layer"]``.

    Returns
    -------
    written : list of pathlib.Path
        The file written.
    """
    import shutil

    import h5py

    from ..anndata import anndata_results

    _import_anndata(source)  # a clear message when anndata is missing
    try:
        from anndata.io import write_elem
    except ImportError:  # anndata < 0.11
        from anndata.experimental import write_elem
    path = Path(path)  # the command line refused the input's own path before the fit
    obsm, varm, uns = anndata_results(model, "cogaps")
    uns.update(chain_status(model))
    uns["layer"] = "X" if layer is None else layer
    shutil.copyfile(source, path)
    with h5py.File(path, "r+") as f:
        for group, items in (("obsm", obsm), ("varm", varm), ("uns", {"cogaps": uns})):
            g = f.require_group(group)
            for name, value in items.items():
                if name in g:
                    del g[name]
                write_elem(g, name, value)
    return [path]
