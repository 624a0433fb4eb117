"""Run an estimator on an AnnData object and write its results back, as scanpy's tools do.

An AnnData holds cells × genes, which is scikit-learn's samples × features: the per-sample
factor goes to ``obsm``, the components (one column per component, a row per gene) to
``varm`` and the statistics of the fit to ``uns``. Needs the ``anndata`` package:
``pip install "sklearn_cogaps[anndata]"``.
"""

import inspect
import numbers
import warnings

import numpy as np
from scipy import sparse
from sklearn.utils.validation import check_is_fitted

from ._utils._anndata import load_matrix, missing_x_message
from ._utils._validation import label_mismatch

__all__ = ["fit_anndata", "read_anndata_matrix", "anndata_results"]


def _check_anndata(adata):
    try:
        import anndata
    except ImportError:
        raise ImportError(
            "sklearn_cogaps.anndata needs the anndata package, which is not installed: "
            'pip install "sklearn_cogaps[anndata]" (or pip install anndata).'
        ) from None
    if not isinstance(adata, anndata.AnnData):
        raise TypeError(f"adata must be an anndata.AnnData; got {type(adata).__name__}.")


def read_anndata_matrix(adata, layer=None):
    """The data matrix of an AnnData: ``.X`` or a layer, loaded in memory.

    Parameters
    ----------
    adata : anndata.AnnData
        The data, cells × genes (samples × features). It may be opened ``backed``: the
        matrix is then read from the file, and nothing else is.
    layer : str, default=None
        Name of a layer in ``adata.layers``; None reads ``adata.X``.

    Returns
    -------
    X : ndarray or scipy.sparse.csr_matrix of shape (n_obs, n_vars)
        The matrix; sparse storage stays sparse.

    Examples
    --------
    >>> import numpy as np
    >>> import anndata
    >>> from sklearn_cogaps.anndata import read_anndata_matrix
    >>> adata = anndata.AnnData(np.ones((3, 2)), layers={"counts": np.zeros((3, 2))})
    >>> read_anndata_matrix(adata, layer="counts").sum()
    np.float64(0.0)
    """
    _check_anndata(adata)
    if layer is None:
        M = adata.X
        if M is None:
            raise ValueError("adata.X is empty (None); name a layer with layer=....")
    else:
        if layer not in adata.layers:
            raise KeyError(
                f"adata has no layer {layer!r}; its layers are {sorted(adata.layers.keys())}."
            )
        M = adata.layers[layer]
    M = load_matrix(M)  # a backed matrix is read from its file
    if sparse.issparse(M):
        return sparse.csr_matrix(M)
    return np.asarray(M)


def _storable(value):
    """A parameter value that an .h5ad file can store: numbers, strings and booleans as they
    are, anything else (None, a RandomState, an array) as its repr."""
    if isinstance(value, (bool, np.bool_, str)):
        return value
    if isinstance(value, numbers.Number):
        return value
    return repr(value)


def anndata_results(estimator, key, *, loadings=None):
    """The results of a fitted factorisation, as AnnData's ``obsm``, ``varm`` and ``uns``.

    Parameters
    ----------
    estimator : estimator
        A fitted :class:`~sklearn_cogaps.CoGAPS`, :class:`~sklearn_cogaps.HierarchicalPMF` or
        :class:`~sklearn_cogaps.WeightedBackgroundPMF`.
    key : str
        Prefix of the names: ``obsm["X_<key>"]``, ``varm["<key>_components"]``,
        ``uns["<key>"]``.
    loadings : ndarray of shape (n_obs, n_components), default=None
        The per-sample factor to store; None stores the estimator's ``loadings_`` (a model
        updated by ``partial_fit`` has none: pass ``transform`` of the rows).

    Returns
    -------
    obsm : dict of str to ndarray of shape (n_obs, n_components)
        ``X_<key>``, the per-sample factor (CoGAPS's patterns, the Poisson factorisations'
        loadings), and ``X_<key>_std`` when the estimator has its posterior standard
        deviation.
    varm : dict of str to ndarray of shape (n_vars, n_components)
        ``<key>_components`` (``components_.T``) and ``<key>_components_std`` when the
        estimator has it.
    uns : dict
        ``estimator`` (the class name), ``params`` (the constructor parameters; values an
        .h5ad cannot store are kept as their repr), ``n_iter``, the per-iteration trace
        ``objective_history`` and its name ``trace_name``, and
        the final ``chisq`` or ``lower_bound`` when the estimator has them, ``converged``
        (``converged_``), and CoGAPS's ``uncertainty_model`` (``uncertainty_model_``),
        ``n_calibration_iter`` (the calibration's length: the trace's sampling phase starts
        there), ``complete`` and ``status`` (``"partial"`` after Ctrl-C) and, with several
        chains, ``n_chains`` (those pooled), ``rhat_chisq`` and
        ``ess_bulk_chisq``; after :func:`fit_anndata`, ``layer``, the matrix it fitted
        (``"X"`` or the layer's name).

    Examples
    --------
    >>> from sklearn_cogaps import CoGAPS
    >>> from sklearn_cogaps.anndata import anndata_results
    >>> from sklearn_cogaps.datasets import make_patterns
    >>> X, _, _ = make_patterns(n_samples=10, n_features=20, n_components=2, random_state=0)
    >>> obsm, varm, uns = anndata_results(
    ...     CoGAPS(n_components=2, max_iter=20, random_state=0).fit(X), "cogaps")
    >>> obsm["X_cogaps"].shape, varm["cogaps_components"].shape
    ((10, 2), (20, 2))
    """
    check_is_fitted(estimator)
    if loadings is None and not hasattr(estimator, "loadings_"):
        raise TypeError(
            f"anndata_results stores a factorisation's per-sample and per-feature factors; "
            f"{type(estimator).__name__} has none (no loadings_). Store what it predicts "
            "yourself, for example adata.obs['component'] = estimator.predict(adata.X)."
        )
    obsm = {f"X_{key}": np.asarray(estimator.loadings_ if loadings is None else loadings)}
    varm = {f"{key}_components": np.ascontiguousarray(np.asarray(estimator.components_).T)}
    std = getattr(estimator, "loadings_std_", None)
    if std is not None:
        obsm[f"X_{key}_std"] = np.asarray(std)
    std = getattr(estimator, "components_std_", None)
    if std is not None:
        varm[f"{key}_components_std"] = np.ascontiguousarray(np.asarray(std).T)
    uns = {
        "estimator": type(estimator).__name__,
        "params": {
            name: _storable(value) for name, value in estimator.get_params(deep=False).items()
        },
        "n_iter": int(estimator.n_iter_),
        "objective_history": np.asarray(estimator.objective_history_, dtype=np.float64),
        "trace_name": type(estimator)._objective_name,
    }
    for name in ("chisq_", "lower_bound_"):
        value = getattr(estimator, name, None)
        if value is not None:
            uns[name[:-1]] = float(value)
    if hasattr(estimator, "uncertainty_model_"):
        # the chi-square depends on it, and it is a fit parameter, not in params
        uns["uncertainty_model"] = str(estimator.uncertainty_model_)
    converged = getattr(estimator, "converged_", None)
    if converged is not None:
        uns["converged"] = bool(converged)
    # CoGAPS: where the trace's sampling phase starts (tol may end the calibration early),
    # and whether Ctrl-C stopped the chain (or chains) before the end, as the command line
    # records it
    calibration = getattr(estimator, "n_calibration_iter_", None)
    if calibration is not None:
        from ._cli._write import chain_status

        status = chain_status(estimator)
        uns["n_calibration_iter"] = int(calibration)
        uns["complete"], uns["status"] = bool(status["complete"]), status["status"]
    if "_anndata_layer" in estimator.__dict__:
        # raw counts in a layer and normalised values in .X are the usual layout: the
        # stored results say which of them they describe
        layer = estimator._anndata_layer
        uns["layer"] = "X" if layer is None else str(layer)
    rhat = getattr(estimator, "rhat_", None)
    if rhat is not None:  # several chains: the diagnostics of the chi-square
        uns["n_chains"] = int(estimator.chain_loadings_.shape[0])
        uns["rhat_chisq"] = float(rhat["chisq"])
        uns["ess_bulk_chisq"] = float(estimator.ess_bulk_["chisq"])
    return obsm, varm, uns


def _with_layer(adata, layer):
    """An AnnData whose ``.X`` is ``adata.layers[layer]`` (in memory), with the same names."""
    import anndata
    import pandas as pd

    return anndata.AnnData(
        X=read_anndata_matrix(adata, layer),
        obs=pd.DataFrame(index=adata.obs_names),
        var=pd.DataFrame(index=adata.var_names),
    )


def _check_fitted_labels(fitted, present, kind, axis_name, advice, positions=False):
    """Refuse to store a fit's per-gene or per-cell results under labels other than those
    fitted, in their order (``fitted`` None: the fit knows none). With ``positions``, names
    0, 1, ... in order (AnnData's own) on either side are positions, unless the other side
    holds the same numbers in another order."""
    if fitted is None:
        return
    fitted, present = [str(v) for v in fitted], [str(v) for v in present]
    if fitted == present:
        return
    if positions:
        numbered = [str(i) for i in range(len(present))]
        if (present == numbered and not set(fitted) <= set(numbered)) or (
            fitted == numbered and not set(present) & set(numbered)
        ):
            return
    how = {
        "in another order": f"the same {kind} in another order",
        "in part": f"partly other {kind}",
    }.get(label_mismatch(fitted, present), f"other {kind}")
    i = next((i for i, (a, b) in enumerate(zip(present, fitted)) if a != b), None)
    where = (
        f" (at position {i}, adata has {present[i]!r} where the fit had {fitted[i]!r})"
        if i is not None and len(present) == len(fitted)
        else ""
    )
    raise ValueError(
        f"The estimator was fitted to {how} than adata.{axis_name}{where}; its results would "
        f"be stored under the wrong {kind}. {advice}, or use refit=True."
    )


def _check_fitted_genes(estimator, adata):
    """Per-gene results under the fitted genes (``feature_names_in_``), in their order."""
    _check_fitted_labels(getattr(estimator, "feature_names_in_", None), adata.var_names,
                         "genes", "var_names",
                         "Store them in adata[:, estimator.feature_names_in_]")  # fmt: skip


def _check_fitted_cells(estimator, adata):
    """Per-cell results (the fit's own loadings) under the fitted cells, in their order:
    sorted by cluster after the fit, or another AnnData of the same shape, each cell would
    get another's factors. The cells are known when the fit was to an AnnData (or had row
    labels of its own)."""
    fitted = getattr(estimator, "_anndata_cells", None)
    if fitted is None:
        fitted = getattr(estimator, "_row_labels", None)
    _check_fitted_labels(fitted, adata.obs_names, "cells", "obs_names",
                         "Store them in the AnnData it was fitted to, in its order "
                         "(adata[fitted_adata.obs_names])", positions=True)  # fmt: skip


# scanpy's options of its own embeddings (sc.pp.pca, sc.tl.*), which users pass here by
# habit: none of this package's fit methods takes them, and the fit would end in a bare
# "unexpected keyword argument"
_SCANPY_OPTIONS = {
    "use_raw": (
        "fit_anndata reads adata.X or adata.layers[layer]. To fit adata.raw, fit an AnnData "
        "of it: raw = adata.raw.to_adata(); fit_anndata(raw, model); then "
        "adata.obsm['X_{key}'] = raw.obsm['X_{key}'] (raw's genes are not adata's, so its "
        "per-gene results stay in raw.varm)"
    ),
    "n_comps": "the number of factors is the estimator's: {cls}(n_components=...)",
    "random_state": "seed the estimator: {cls}(random_state=...)",
    "inplace": (
        "fit_anndata stores the results in adata (copy=False, the default) or in a copy it "
        "returns (copy=True)"
    ),
    "use_highly_variable": (
        "select the genes first: fit_anndata(adata[:, adata.var['highly_variable']].copy(), model)"
    ),
    "mask_var": ("select the genes first: fit_anndata(adata[:, mask].copy(), model)"),
}


def _refuse_scanpy_options(estimator, fit_params, key):
    """A TypeError that says what to write for scanpy's option names in ``fit_params``."""
    try:
        accepted = inspect.signature(estimator.fit).parameters
    except (TypeError, ValueError):  # pragma: no cover - a fit without a signature
        return
    for name, advice in _SCANPY_OPTIONS.items():
        if name in fit_params and name not in accepted:
            advice = advice.format(cls=type(estimator).__name__, key=key)
            raise TypeError(f"fit_anndata has no option {name!r} (scanpy's): {advice}.")


def fit_anndata(
    adata, estimator, *, layer=None, key_added=None, copy=False, refit=True, **fit_params
):
    """Fit a factorisation estimator to an AnnData and store its results in it.

    The scanpy-style entry point for single-cell data: cells are samples and genes are
    features, exactly scikit-learn's orientation (R CoGAPS reads the transpose). After the
    fit, ``adata.obsm["X_<key>"]`` holds the per-cell factor (CoGAPS's patterns),
    ``adata.varm["<key>_components"]`` the per-gene amplitudes (``components_.T``) and
    ``adata.uns["<key>"]`` the statistics of the fit (see :func:`anndata_results`).

    Parameters
    ----------
    adata : anndata.AnnData
        Cells × genes. ``.X`` or the layer may be dense or sparse. A backed AnnData's ``.X``
        is read a block of cells at a time by the Poisson factorisations; the results are
        stored in memory (write a backed file's with ``adata.write()``).
    estimator : estimator
        An unfitted (or, with ``refit=False``, fitted) :class:`~sklearn_cogaps.CoGAPS`,
        :class:`~sklearn_cogaps.HierarchicalPMF` or
        :class:`~sklearn_cogaps.WeightedBackgroundPMF`. It is fitted in place.
    layer : str, default=None
        Fit ``adata.layers[layer]`` instead of ``adata.X`` (for example raw ``"counts"``
        for the Poisson factorisations). The layer is read into memory, also from a backed
        AnnData; to fit a backed layer a block at a time, fit the estimator on the file's
        group of it: ``estimator.fit(adata.file["layers/counts"])``.
    key_added : str, default=None
        Prefix of the stored names; the estimator's class name in lower case (``"cogaps"``,
        ``"hierarchicalpmf"``, ...) by default.
    copy : bool, default=False
        Store the results in a copy of ``adata`` and return it, leaving ``adata`` alone.
    refit : bool, default=True
        Fit the estimator; False stores the results of an estimator already fitted to this
        matrix (its number of samples and features must match).
    **fit_params
        Passed to ``estimator.fit``, for example ``uncertainty=adata.layers["sigma"]`` for
        CoGAPS (an array of standard deviations needs a dense ``.X`` or layer: a sparse one
        is fitted with the sparse-data model, whose uncertainty is a named one,
        ``uncertainty="poisson"``).

    Returns
    -------
    adata : anndata.AnnData or None
        The copy with the results when ``copy=True``, else None (``adata`` is updated).

    Examples
    --------
    >>> import anndata
    >>> from sklearn_cogaps import CoGAPS
    >>> from sklearn_cogaps.anndata import fit_anndata
    >>> from sklearn_cogaps.datasets import make_patterns
    >>> X, _, _ = make_patterns(n_samples=10, n_features=20, n_components=2, random_state=0)
    >>> adata = anndata.AnnData(X)
    >>> model = CoGAPS(n_components=2, max_iter=20, random_state=0)
    >>> fit_anndata(adata, model)
    >>> adata.obsm["X_cogaps"].shape, adata.varm["cogaps_components"].shape
    ((10, 2), (20, 2))
    >>> adata.uns["cogaps"]["n_iter"]
    40
    """
    _check_anndata(adata)
    if not isinstance(refit, (bool, np.bool_)):
        # a string such as "no" would count as True, and fit
        raise TypeError(f"refit must be True or False; got {refit!r}.")
    if isinstance(estimator, type):
        raise TypeError(
            f"estimator must be an estimator object, not the class {estimator.__name__}: "
            f"write fit_anndata(adata, {estimator.__name__}(n_components=...))."
        )
    if not hasattr(estimator, "fit"):
        raise TypeError(f"estimator must be a scikit-learn estimator; got {estimator!r}.")
    if copy and getattr(adata, "isbacked", False):
        # refused before the fit, which would otherwise run and then fail at the copy
        raise ValueError(
            "adata is backed (read with backed='r'): anndata copies a backed AnnData only to "
            "a new file. Pass copy=False to store the results in adata itself, or load it "
            "first with adata.to_memory()."
        )
    if getattr(adata, "isbacked", False) and getattr(adata, "is_view", False):
        # refused before the fit: anndata stores nothing in a view of a backed file
        raise ValueError(
            "adata is a view of a backed AnnData (a subset of a file read with backed='r'), "
            "which anndata cannot store results in. Load the subset first, "
            "adata_subset.to_memory(), and fit that."
        )
    if not hasattr(estimator, "transform"):
        raise TypeError(
            f"{type(estimator).__name__} is not a factorisation (it has no transform); "
            "fit_anndata stores per-cell factors and per-gene components."
        )
    if not any(c.__module__.startswith("sklearn_cogaps.") for c in type(estimator).__mro__):
        # a Pipeline or scikit-learn's NMF would receive the AnnData itself
        raise TypeError(
            f"fit_anndata fits this package's estimators (CoGAPS, HierarchicalPMF, "
            f"WeightedBackgroundPMF), which read an AnnData; {type(estimator).__name__} "
            "does not. Fit it on the matrix, estimator.fit(adata.X), and store its results "
            "in adata.obsm yourself."
        )
    if refit and layer is None and adata.X is None:
        raise ValueError(missing_x_message(adata, "fit_anndata(adata, model, layer={layer!r})"))
    key = type(estimator).__name__.lower() if key_added is None else str(key_added)
    _refuse_scanpy_options(estimator, fit_params, key)
    if not refit and fit_params:
        raise TypeError(
            f"fit_anndata(refit=False) does not fit, so it cannot use {sorted(fit_params)}; "
            "pass them with refit=True, or fit the estimator with them first."
        )
    if refit:
        # fitted as an AnnData, as fit(adata) is: labelled side inputs (an uncertainty or a
        # fixed matrix as a DataFrame) are checked against obs_names and var_names, and the
        # gene names are recorded, so that transform and score refuse an AnnData whose genes
        # are not these, in this order; a layer is fitted in an AnnData with the same names
        caught = []
        try:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                estimator.fit(adata if layer is None else _with_layer(adata, layer),
                              **fit_params)  # fmt: skip
        finally:  # the fit's warnings, also when it fails
            for w in caught:
                message = str(w.message)
                if layer is None and "non-integer values" in message:
                    # scanpy's .X is often normalised, the counts kept in a layer
                    message += (" If adata.X is normalised, fit the raw counts instead: "
                                "fit_anndata(adata, model, layer='counts').")  # fmt: skip
                warnings.warn_explicit(message, w.category, w.filename, w.lineno)
        # so that transform(adata) can say that it reads .X, not this layer
        estimator._anndata_layer = layer
    check_is_fitted(estimator)
    factors = getattr(estimator, "loadings_", None)
    if factors is None and "_svi_state" in estimator.__dict__:
        # a model updated by partial_fit keeps no rows: the cells' factors are transform's
        factors = estimator.transform(adata if layer is None else _with_layer(adata, layer))
    elif factors is None:
        factors = estimator.loadings_  # the estimator's own message
    if factors.shape[0] != adata.n_obs or estimator.components_.shape[1] != adata.n_vars:
        raise ValueError(
            f"the estimator was fitted to {factors.shape[0]} samples x "
            f"{estimator.components_.shape[1]} features; adata has {adata.n_obs} x "
            f"{adata.n_vars}. Use refit=True."
        )
    _check_fitted_genes(estimator, adata)
    if not refit and "_svi_state" not in estimator.__dict__:
        _check_fitted_cells(estimator, adata)
    obsm, varm, uns = anndata_results(estimator, key, loadings=factors)
    target = adata.copy() if copy else adata
    # an earlier fit under the same key may have stored what this one has not (standard
    # deviations): removed, so that every entry under the key is this fit's
    for mapping, names in (
        (target.obsm, (f"X_{key}", f"X_{key}_std")),
        (target.varm, (f"{key}_components", f"{key}_components_std")),
    ):
        for name in names:
            if name in mapping:
                del mapping[name]
    for name, value in obsm.items():
        target.obsm[name] = value
    for name, value in varm.items():
        target.varm[name] = value
    target.uns[key] = uns
    return target if copy else None
