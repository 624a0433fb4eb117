"""AnnData as an input: its matrix, its names, and pandas output indexed by its cells.

anndata is optional: an AnnData is recognised by its module and attributes, never imported.
"""

import functools

import numpy as np
from scipy import sparse

from ._warnings import warn

__all__ = [
    "index_by_obs_names",
    "is_anndata",
    "load_matrix",
    "missing_x_message",
    "unwrap_anndata",
    "warn_if_fitted_on_a_layer",
]


def is_anndata(obj):
    """Whether ``obj`` looks like an ``anndata.AnnData`` (duck-typed: anndata is optional)."""
    module = type(obj).__module__ or ""
    return (
        module.split(".")[0] == "anndata"
        and hasattr(obj, "X")
        and hasattr(obj, "var_names")
        and hasattr(obj, "obs_names")
    )


def index_by_obs_names(method):
    """``method`` (``transform`` or ``fit_transform``) whose pandas output, for an AnnData
    input, is indexed by the AnnData's ``obs_names``: scikit-learn's ``set_output`` takes
    the index of a DataFrame input only, and would number the cells 0, 1, ..."""
    if getattr(method, "_indexes_by_obs_names", False):
        return method

    @functools.wraps(method)
    def wrapped(self, X, *args, **kwargs):
        out = method(self, X, *args, **kwargs)
        if is_anndata(X) and hasattr(out, "columns") and len(out) == len(X.obs_names):
            out.index = X.obs_names.copy()
        return out

    wrapped._indexes_by_obs_names = True
    return wrapped


def unwrap_anndata(X):
    """The data matrix of an AnnData, and its variable names; other inputs pass through.

    An AnnData contributes its ``.X`` (samples are its observations, features its
    variables), read by :func:`load_matrix`. To use a layer, pass it directly, for example
    ``fit(adata.layers["counts"])``, or use :func:`sklearn_cogaps.anndata.fit_anndata`.

    Parameters
    ----------
    X : object
        An ``anndata.AnnData`` or any other input.

    Returns
    -------
    X : object
        The data matrix of the AnnData, or the input itself.
    feature_names : ndarray of str or None
        The AnnData's ``var_names``, or None for other inputs.
    """
    if not is_anndata(X):
        return X, None
    names = np.asarray(X.var_names, dtype=object)
    if not X.var_names.is_unique:
        # as scikit-learn refuses a DataFrame's duplicate columns: a feature named twice
        # cannot be matched by name at transform
        counts = X.var_names.value_counts()
        repeated = counts[counts > 1]
        shown = ", ".join(f"{name!r} {n} times" for name, n in repeated.iloc[:3].items())
        raise ValueError(
            f"The AnnData's var_names repeat {len(repeated)} name(s) ({shown}): features "
            "are matched by name, so they must be unique. Call adata.var_names_make_unique() "
            "first."
        )
    matrix = X.X
    if matrix is None:
        raise ValueError(missing_x_message(X, "adata.layers[{layer!r}]"))
    return load_matrix(matrix), names


def missing_x_message(adata, layer_advice):
    """What to write for an AnnData without ``.X``: one of its layers, named in
    ``layer_advice`` (``"adata.layers[{layer!r}]"`` or ``"layer={layer!r}"``), or, when it
    has none, the matrix to set."""
    layers = list(adata.layers.keys())
    if not layers:
        return (
            f"The AnnData of shape {adata.shape} has no .X and no layers: there is no matrix "
            "to fit. Set one first, adata.X = counts (cells x genes)."
        )
    named = ", ".join(repr(name) for name in layers[:5]) + (", ..." if len(layers) > 5 else "")
    return (
        f"The AnnData of shape {adata.shape} has no .X; fit one of its layers ({named}) "
        f"instead: {layer_advice.format(layer=layers[0])}."
    )


def warn_if_fitted_on_a_layer(estimator, adata):
    """Warn when an AnnData's ``.X`` is read by a model that fit_anndata fitted on one of
    its layers (raw counts in a layer, normalised values in ``.X``, is the usual layout)."""
    layer = getattr(estimator, "_anndata_layer", None)
    if layer is None or layer not in adata.layers:
        return
    warn(
        f"This {type(estimator).__name__} was fitted on the layer {layer!r} (fit_anndata), "
        f"but an AnnData passed here is read through its .X, which may be on another "
        f"scale. To use the fitted layer, pass it with the fitted genes selected by name, "
        f"adata[:, model.feature_names_in_].layers[{layer!r}] (a layer alone carries no "
        "gene names to check).",
        UserWarning,
    )


def load_matrix(matrix):
    """A matrix of an AnnData (``.X`` or a layer), in memory: read from the file if backed.

    Parameters
    ----------
    matrix : object
        A numpy array, a scipy sparse matrix, an array view, or a backed matrix (an HDF5 or
        zarr dataset, or anndata's backed CSR/CSC dataset).

    Returns
    -------
    matrix : ndarray or scipy sparse matrix
        The values; sparse storage stays sparse.
    """
    if hasattr(matrix, "to_memory"):
        # a backed sparse matrix: read as a scipy matrix (anndata's backed CSR/CSC datasets)
        return matrix.to_memory()
    if isinstance(matrix, np.ndarray) or sparse.issparse(matrix):
        return matrix
    if type(matrix).__module__.split(".")[0] in ("h5py", "zarr"):
        # a backed dense matrix: an HDF5 or zarr dataset, read whole
        return np.asarray(matrix[...])
    return np.asarray(matrix)
