"""Checks of the estimators' inputs: the data, the side inputs given beside it, and the
habits of other tools (a target where a side input belongs, a table of triplets)."""

import re
import warnings

import numpy as np
from scipy import sparse
from sklearn.utils.validation import check_array, validate_data

from ._anndata import is_anndata, unwrap_anndata, warn_if_fitted_on_a_layer
from ._arrays import unique_rows
from ._warnings import warn

__all__ = [
    "as_float_array",
    "axis_labels",
    "canonical_csr",
    "check_ignored_y",
    "check_not_triplets",
    "check_side_labels",
    "data_dtype",
    "dense_matrix",
    "is_data",
    "label_mismatch",
    "shape_of",
    "unversioned_ensembl",
    "validate_input",
]

# ENSEMBL ids carry an unstable version after a dot (ENSG00000186092.6), which gene lists
# and gene-set collections often drop
_ENSEMBL_VERSION = re.compile(r"^(ENS[A-Z]*\d+)\.\d+$")


def unversioned_ensembl(name):
    """An ENSEMBL id without its version (ENSG00000186092.6 -> ENSG00000186092); other
    names unchanged."""
    return _ENSEMBL_VERSION.sub(r"\1", name) if isinstance(name, str) else name


def _record_anndata_fit(estimator, X):
    """What a fit keeps of an AnnData beside its genes: its cells, which
    ``fit_anndata(refit=False)`` checks; a fit to other data forgets them, and the layer
    that fit_anndata(layer=...) records after its fit."""
    estimator.__dict__.pop("_anndata_layer", None)
    if is_anndata(X):
        estimator._anndata_cells = np.asarray(X.obs_names, dtype=object)
    else:
        estimator.__dict__.pop("_anndata_cells", None)


def validate_input(estimator, X, *, reset, check=validate_data, row_offset=0, **kwargs):
    """``validate_data`` that also takes an AnnData, whose ``var_names`` are feature names.

    Parameters
    ----------
    estimator : estimator instance
        The estimator the data are validated for.
    X : {array-like, sparse matrix, AnnData} of shape (n_samples, n_features)
        The input.
    reset : bool
        True in ``fit``: record ``n_features_in_`` (and ``feature_names_in_``); False
        elsewhere: check them.
    check : callable, default=validate_data
        The validation function, ``validate_data`` or ``check_array`` (which then gets no
        ``estimator`` and no ``reset``).
    row_offset : int, default=0
        The place of X's first row in the whole data (a block of an out-of-core X), for
        the messages that name a row.
    **kwargs : dict
        Passed to ``check``.

    Returns
    -------
    X : {ndarray, sparse matrix}
        The validated data.
    """
    if getattr(estimator, "_refuses_triplets", False):
        check_not_triplets(estimator, X)
    check_not_complex(X, kwargs.get("input_name", "X"))
    check_numeric_columns(X, kwargs.get("input_name", "X"))
    check_not_masked(X, kwargs.get("input_name", "X"), estimator)
    if reset:
        _record_anndata_fit(estimator, X)
    adata = X if is_anndata(X) else None
    X, names = unwrap_anndata(X)
    if sparse.issparse(X) and X.format == "coo" and X.dtype != np.float64:
        # converting a COO matrix sums its duplicate entries in its own dtype, where a small
        # integer type wraps around (uint8: 200 + 100 = 44): convert to float64 first
        X = X.astype(np.float64)
    # validate_data calls its input X whatever it is (held-out ratings, observed ones): its
    # messages are given the input's name
    name = kwargs.get("input_name", "X") if check is check_array else kwargs.pop("input_name", "X")
    try:
        if check is check_array:
            # the messages name the estimator, as validate_data's do
            return check_array(X, estimator=estimator, **kwargs)
        if names is None:
            return validate_data(estimator, X, reset=reset, **kwargs)
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="X does not have valid feature names")
            X = validate_data(estimator, X, reset=reset, **kwargs)
    except ValueError as error:
        message = str(error)
        if name != "X":
            message = re.sub(r"\bX\b", name, message)
        advice = getattr(estimator, "_negative_input_advice", None)
        # scikit-learn's own sentence stays first: its checks look for it
        if advice and message.startswith("Negative values in data passed to"):
            where = _first_entry(X, lambda a: a < 0, row_offset)
            raise ValueError(f"{message.rstrip('.')}{where}. {advice}") from None
        first_line = message.split("\n")[0]
        if first_line.startswith("Expected 2D array, got 1D array instead"):
            # scikit-learn's message prints every value of the array (thousands of them);
            # its "Reshape your data" stays, which its checks look for
            n = int(np.size(X))
            raise ValueError(
                f"Expected 2D array, got 1D array instead ({n} values). Reshape your data: "
                f"np.reshape({name}, (-1, 1)) for {n} samples of one feature or "
                f"np.reshape({name}, (1, -1)) for one sample of {n} features."
            ) from None
        advice = getattr(estimator, "_missing_value_advice", None)
        # scikit-learn's advice after it is for supervised learning; ours replaces it
        if advice and "contains NaN" in first_line:
            where = _first_entry(X, np.isnan, row_offset)
            raise ValueError(f"{first_line.rstrip('.')}{where}. {advice}") from None
        if "contains infinity" in first_line:
            where = _first_entry(X, np.isinf, row_offset)
            if where:
                raise ValueError(f"{first_line.rstrip('.')}{where}.") from None
        if name != "X":
            raise ValueError(message) from None
        raise
    if reset:
        estimator.feature_names_in_ = names
    else:
        fitted = getattr(estimator, "feature_names_in_", None)
        if fitted is not None and not np.array_equal(fitted, names):
            raise ValueError(
                f"The AnnData's var_names differ from the feature names seen in fit "
                f"({len(fitted)} names, first {list(fitted[:3])}); got {len(names)} names, "
                f"first {list(names[:3])}. Select the fitted variables, for example "
                f"adata[:, {type(estimator).__name__.lower()}.feature_names_in_]."
            )
        if adata is not None:
            warn_if_fitted_on_a_layer(estimator, adata)
    return X


def _first_entry(X, test, row_offset=0):
    """`` (the first at row i, column j: value)`` for the first entry of X in row order
    where ``test`` holds (``test`` maps an array to a boolean array: negative, NaN...), or
    "" when it cannot be found (X is read again only on an error's path)."""
    try:
        if sparse.issparse(X):
            coo = sparse.coo_matrix(X)
            found = np.flatnonzero(test(coo.data))
            if not found.size:
                return ""
            order = np.lexsort((coo.col[found], coo.row[found]))[0]
            i, j = coo.row[found[order]], coo.col[found[order]]
            value = coo.data[found[order]]
        else:
            A = np.asarray(X)
            i, j = np.argwhere(test(A))[0]
            value = A[i, j]
    except (TypeError, ValueError, IndexError):
        return ""
    return f" (the first at row {int(i) + row_offset}, column {int(j)}: {value:g})"


def check_not_complex(X, input_name="X"):
    """Refuse complex data with what to pass (scikit-learn's message prints the array)."""
    dtype = getattr(X, "dtype", None)
    if dtype is not None and not hasattr(X, "columns") and np.dtype(dtype).kind == "c":
        raise ValueError(  # scikit-learn's sentence first: its checks look for it
            f"Complex data not supported: {input_name} is {np.dtype(dtype).name}; the models "
            f"take real data. Pass {input_name}.real, or np.abs({input_name}) for magnitudes."
        )


def as_float_array(value, input_name="a side input"):
    """A side input as a float64 array, pandas' missing values (``pd.NA`` of its nullable
    dtypes) as NaN, which the callers' checks then name; other values as numpy reads them.
    Complex values are refused, as in X (numpy would drop their imaginary part with a
    ComplexWarning only)."""
    if not hasattr(value, "dtype") and not hasattr(value, "dtypes"):
        value = np.asarray(value)  # a list
    # a DataFrame's columns each have theirs
    dtypes = list(value.dtypes) if hasattr(value, "columns") else [value.dtype]
    if any(isinstance(d, np.dtype) and d.kind == "c" for d in dtypes):
        raise ValueError(
            f"Complex data not supported: {input_name} is complex; the models take real "
            f"values. Pass its real part, np.real({input_name}), or its magnitude, "
            f"np.abs({input_name})."
        )
    if hasattr(value, "to_numpy") and not sparse.issparse(value):
        try:
            return value.to_numpy(dtype=np.float64, na_value=np.nan)
        except (TypeError, ValueError):
            pass
    return np.asarray(value, dtype=np.float64)


def check_not_masked(X, input_name="X", estimator=None, first_row=None, advice=None, who=None):
    """Refuse a numpy masked array with masked entries: numpy's conversions read the values
    under the mask, so a fit would use what the mask hides, without a word. The advice
    follows the estimator's reading of missing entries (``_masked_advice``, else its
    ``_missing_value_advice``)."""
    if not np.ma.isMaskedArray(X):
        return
    mask = np.ma.getmaskarray(X)
    if not mask.any():
        return
    place = "" if first_row is None else f" (in the block from row {first_row})"
    name = who or (type(estimator).__name__ if estimator is not None else "the model")
    advice = advice or getattr(estimator, "_masked_advice", None) or getattr(
        estimator, "_missing_value_advice", None
    ) or (f"Fill them first, {input_name}.filled(value), or pass {input_name}.data to use "
          "the values under the mask.")  # fmt: skip
    count = int(mask.sum())
    advice = advice.replace("{X}", input_name)  # the estimators' advice names the input
    raise ValueError(
        f"{input_name} is a masked array with {count} masked "
        f"{'entry' if count == 1 else 'entries'}{place}; "
        f"{name} would read the values under the mask. {advice}"
    )


def check_numeric_columns(X, input_name="X"):
    """Refuse a DataFrame with non-numeric columns (a cell type beside the counts), which
    would otherwise fail with "could not convert string to float" and no column named."""
    dtypes = getattr(X, "dtypes", None)
    if dtypes is None or not hasattr(X, "columns") or not hasattr(dtypes, "items"):
        return
    # datetimes and durations convert to numbers, but are annotations, not features
    other = [column for column, dtype in dtypes.items()
             if getattr(dtype, "kind", "O") in "mM"
             or getattr(dtype, "kind", "O") not in "biuf" and not _numbers(X[column])]  # fmt: skip
    if other:
        shown = other[:5]
        raise ValueError(
            f"{input_name} has {len(other)} non-numeric column(s) ({shown}"
            f"{', ...' if len(other) > 5 else ''}): every column is read as a feature. Drop "
            f"them, for example {input_name}.drop(columns={shown}), and keep them aside (an "
            "AnnData's obs holds such annotations)."
        )


def _numbers(column):
    """Whether a column of another dtype (object, category) holds numbers only."""
    try:
        np.asarray(column, dtype=np.float64)
    except (TypeError, ValueError):
        return False
    return True


# Column names (lower case, without "_", "-" or spaces) of the users and of the items in the
# tables of hpfrec, surprise, implicit's and LightFM's examples, MovieLens, Last.fm, the
# Million Song Dataset, Book-Crossing and Amazon reviews.
_USER_COLUMNS = {"user", "userid", "uid", "users", "customer", "customerid", "reviewerid"}
_ITEM_COLUMNS = {
    "item", "itemid", "iid", "items", "movie", "movieid", "song", "songid", "track",
    "trackid", "artist", "artistid", "product", "productid", "book", "bookid", "isbn",
    "asin",
}  # fmt: skip


def check_not_triplets(
    estimator, X, value="Count", source="hpfrec's HPF.fit", who=None, does="factorises"
):
    """Refuse a long table of (user, item, value) triplets, the input of hpfrec's ``HPF.fit``
    (counts) or of rating libraries (ratings).

    Fitted as it is, it would be read as a matrix of three features (user number, item
    number, value), with no error. ``value`` names the value column in the advice,
    ``source`` the tool whose input such a table is, ``who`` what reads the matrix (the
    estimator's class name by default) and ``does`` what it does with it.
    """
    who = type(estimator).__name__ if who is None else who
    columns = getattr(X, "columns", None)
    if columns is None:
        _warn_if_triplet_array(who, X, value, does)
        return
    key = {c: "".join(str(c).lower().replace("-", " ").replace("_", " ").split()) for c in columns}
    user = next((c for c in columns if key[c] in _USER_COLUMNS), None)
    item = next((c for c in columns if key[c] in _ITEM_COLUMNS), None)
    # a table of triplets has a few columns (a timestamp, a review); a matrix has many
    if user is None or item is None or len(columns) > 6:
        if hasattr(X, "to_numpy") and len(columns) in (2, 3, 4):
            # unnamed, or named otherwise: the same test of the values as an array's
            try:
                values = X.to_numpy(dtype=np.float64)
            except (TypeError, ValueError):
                return
            _warn_if_triplet_array(who, values, value, does)
        return
    rest = [c for c in columns if c not in (user, item)]
    values = next((c for c in rest if key[c] not in ("timestamp", "time", "date")), None)
    if values is not None:
        table, last = f"(user, item, {value.lower()}) triplets", f", df[{values!r}]"
    else:  # (user, item) pairs, one per interaction, perhaps with their times
        table, last = "(user, item) pairs", _pair_values(value)
    raise ValueError(
        f"X looks like a table of {table} (columns {list(columns)}), as {source} takes; "
        f"{who} {does} the matrix itself, users x items, and "
        f"would read the table as {len(columns)} features. Build the matrix with its "
        "labels: X, user_labels, item_labels = "
        f"sklearn_cogaps.triplets_to_matrix(df[{user!r}], df[{item!r}]{last})."
    )


def _pair_values(value):
    """The values argument of the advice for a table of (user, item) pairs: none for
    interactions (each counts 1), the ratings for a model of ratings."""
    return "" if value == "Count" else ", ratings"


def _warn_if_triplet_array(who, X, value, does="factorises"):
    """Warn when an array of three columns looks like (user, item, value) triplets, which
    hpfrec's ``HPF.fit`` also takes as a numpy array: ids in the first two columns (whole
    numbers, each repeated) whose pairs are nearly all distinct, as a matrix's rows of
    counts seldom are."""
    if not isinstance(X, (np.ndarray, list, tuple)):
        return
    try:
        shape = np.shape(X)  # before any copy: every fit and transform of an array comes here
    except ValueError:  # a ragged list, which validation refuses next
        return
    if len(shape) != 2 or shape[1] not in (2, 3, 4) or shape[0] < 20:
        return  # (user, item), (user, item, value) or (user, item, value, timestamp)
    try:
        ids = np.asarray(X, dtype=np.float64)[:, :2]
    except (TypeError, ValueError):
        return
    if not np.all(np.isfinite(ids)):
        return
    if ids.min() < 0 or np.any(ids != np.round(ids)):
        return
    n = shape[0]
    repeated = all(np.unique(ids[:, j]).size <= n / 2 for j in (0, 1))
    if repeated and unique_rows(ids)[0].shape[0] >= 0.9 * n:
        if shape[1] == 2:  # one row per interaction, as implicit-feedback logs are
            table, last = "(user, item) pairs", _pair_values(value)
        else:
            table, last = f"(user, item, {value.lower()}) triplets, as hpfrec takes", ", X[:, 2]"
        warn(
            f"X has {shape[1]} columns and {n} rows whose first two look like (user, item) "
            f"ids, each repeated and nearly every pair distinct: a table of {table}? "
            f"{who} {does} the users x items matrix itself and "
            f"reads X as {shape[1]} features. Build it with its labels: X, user_labels, "
            f"item_labels = sklearn_cogaps.triplets_to_matrix(X[:, 0], X[:, 1]{last}).",
            UserWarning,
        )


def data_dtype(X):
    """The floating dtype results on ``X`` take: float32 for float32 data (an array, a sparse
    matrix, an AnnData's ``.X``, a DataFrame of float32 columns), else float64. The estimators
    compute in float64 and give float32 data float32 results, as scikit-learn's NMF does."""
    X = getattr(X, "X", X) if is_anndata(X) else X
    dtypes = getattr(X, "dtypes", None)
    if dtypes is not None and not hasattr(X, "dtype"):  # a DataFrame
        return np.float32 if len(dtypes) and all(map(_is_float32, dtypes)) else np.float64
    return np.float32 if _is_float32(getattr(X, "dtype", None)) else np.float64


def _is_float32(dtype):
    """A numpy float32, or pandas' nullable ``Float32`` (whose ``numpy_dtype`` is float32)."""
    return dtype == np.float32 or getattr(dtype, "numpy_dtype", None) == np.float32


def shape_of(obj):
    shape = getattr(obj, "shape", None)
    if shape is None:
        try:
            shape = np.asarray(obj).shape
        except (TypeError, ValueError):  # ragged sequences: not an array of X's shape
            shape = (len(obj),) if hasattr(obj, "__len__") else ()
    return tuple(shape)


def label_mismatch(of_x, of_side):
    """How a side input's labels on one axis differ from X's, or None when they may be used.

    Side inputs are matched to X by position. Equal labels, labels of another length (left
    to the shape checks) and labels that share nothing with X's (a numbered index) mean
    positions: None. Otherwise ``"in another order"`` (the same labels) or ``"in part"``.

    Parameters
    ----------
    of_x, of_side : sequence or None
        The labels of X and of the side input on the same axis (None: no labels).

    Returns
    -------
    mismatch : str or None
    """
    if of_x is None or of_side is None or len(of_x) != len(of_side):
        return None
    a, b = [str(v) for v in of_x], [str(v) for v in of_side]
    if a == b or not set(a) & set(b):
        return None
    return "in another order" if set(a) == set(b) else "in part"


def first_difference(of_side, of_x):
    """Where two lists of labels of one length first differ, for a message: the position
    and both labels (the first few labels of each may well be equal)."""
    a, b = [str(v) for v in of_side], [str(v) for v in of_x]
    i = next((i for i, (u, v) in enumerate(zip(a, b)) if u != v), 0)
    return f"at position {i}, {a[i]!r} against {b[i]!r}"


def axis_labels(obj, axis):
    """The labels of ``obj`` on ``axis`` ("column" or "row"): a DataFrame's columns or
    index, a Series' index, an AnnData's var_names or obs_names; None for anything else
    (a list's ``index`` is a method, not labels)."""
    for name in ("columns", "var_names") if axis == "column" else ("index", "obs_names"):
        labels = getattr(obj, name, None)
        if labels is not None and not callable(labels):
            return labels
    return None


def _named_by_anndata(obj, labels):
    """Whether ``labels`` are the names AnnData gives itself ("0", "1", ... in order, as
    ``AnnData(array)`` makes them): positions, not names."""
    return is_anndata(obj) and all(str(v) == str(i) for i, v in enumerate(labels))


def check_side_labels(X, name, value, axes=("column", "row")):
    """Refuse a labelled side input whose rows or columns are X's in another order.

    Side inputs become arrays, matched to X by position: a DataFrame of standard deviations
    (or of fixed amplitudes) with its genes or samples in another order would pair each
    entry of X with another entry's value. Labels that share nothing with X's (a DataFrame
    with a default index) mean positions.

    Parameters
    ----------
    X : object
        The data as given (a DataFrame or an AnnData carries labels).
    name : str
        The side input's name, for the message.
    value : object
        The side input as given.
    axes : tuple of {"column", "row"}, default=("column", "row")
        Which of its labels are X's: its columns are X's columns (features), its rows X's
        rows (samples).
    """
    if not (hasattr(value, "columns") or is_anndata(value)):
        # a Series: a value per row of X (sample_weight)
        axes = tuple(axis for axis in axes if axis == "row")
    for axis in axes:
        of_x, of_v = axis_labels(X, axis), axis_labels(value, axis)
        how = label_mismatch(of_x, of_v)
        if how is None or (
            # AnnData's own numbering beside other names (a subset's '10', '11', ...) is
            # positions; the same numbers in another order are a reordering all the same
            how == "in part" and (_named_by_anndata(X, of_x) or _named_by_anndata(value, of_v))
        ):
            continue
        of_x, of_v = np.asarray(of_x, dtype=object), np.asarray(of_v, dtype=object)
        # pandas selects rows with .loc[rows] and columns with .loc[:, columns]
        # X's labels under the names of X's type; the side input selected as its type is
        rows, columns = (
            ("X.obs_names", "X.var_names") if is_anndata(X) else ("X.index", "X.columns")
        )
        if is_anndata(value):  # AnnData selects by names (str; integers are positions)
            if not is_anndata(X):
                rows, columns = f"{rows}.astype(str)", f"{columns}.astype(str)"
            align = {
                ("column", "row"): f"{name}[{rows}, {columns}]",
                ("row",): f"{name}[{rows}]",
                ("column",): f"{name}[:, {columns}]",
            }[tuple(sorted(axes))]
        else:  # pandas selects rows with .loc[rows] and columns with .loc[:, columns]
            align = {
                ("column", "row"): f"{name}.loc[{rows}, {columns}]",
                ("row",): f"{name}.loc[{rows}]",
                ("column",): f"{name}.loc[:, {columns}]",
            }[tuple(sorted(axes))]
        raise ValueError(
            f"The {axis} labels of '{name}' are the {axis} labels of X {how} (the first "
            f"that differs {first_difference(of_v, of_x)}); entries are matched by "
            f"position, so values would be paired with the wrong entries of X. Align it "
            f"first: {align}."
        )


def check_ignored_y(estimator, y, X, *, method="fit", advice):
    """Refuse a second positional argument that is not a ``y`` the estimator may ignore.

    The estimators are unsupervised, so ``y`` is ignored, and scikit-learn's tools
    (``Pipeline``, ``cross_validate``) pass a target along positionally: a 1-d ``y`` of length
    n_samples, or 2-d targets (n_samples, n_targets) for a later step, are accepted and
    ignored. Anything else in that place is a side input given without its keyword (as in
    R's ``CoGAPS(data, uncertainty)`` or astroML's ``XDGMM.fit(X, Xerr)``): an array of the
    shape of X, an array of three or more dimensions, a scalar, or an array whose length is
    not n_samples. It raises an error that says which keyword to use.

    Parameters
    ----------
    estimator : estimator instance
        The estimator whose method was called.
    y : object
        The value received as ``y``.
    X : {array-like, sparse matrix, AnnData}
        The data of the same call.
    method : str, default="fit"
        The method's name, for the message.
    advice : str
        What to do instead, for the message (for example ``"pass the standard deviations by
        keyword: fit(X, uncertainty=U)"``).
    """
    if y is None:
        return
    if isinstance(y, dict) or type(y).__name__ in ("CoParams", "CogapsParams", "GapsParameters"):
        # PyCoGAPS's CoGAPS(adata, params) and R's CoGAPS(data, params)
        raise TypeError(
            f"{type(estimator).__name__}.{method} takes the data; its parameters (a dict or "
            f"a params object, as in PyCoGAPS's CoGAPS(adata, params)) go to the "
            f"constructor under their names here: {type(estimator).__name__}(**parameters)"
            f".{method}(X)."
        )
    x_shape = shape_of(X)
    y_shape = shape_of(y)
    n = x_shape[0] if x_shape else None
    if len(y_shape) == 1 and y_shape[0] == n:
        return
    if len(y_shape) == 2 and y_shape[0] == n and y_shape != x_shape:
        return
    if y_shape == x_shape:
        # the shape of a side input of X's entries given without its keyword (R's
        # CoGAPS(data, uncertainty)); a Pipeline's target of X's shape is refused with it
        what = (
            f" has the shape of X, {x_shape}, as a side input of X's entries given "
            "without its keyword has (a target of that shape for a later step of a "
            "Pipeline cannot be told apart from one, and is refused too)"
        )
    else:
        what = (
            f", of shape {y_shape}, is not a target of n_samples = {n} rows that it could "
            f"ignore (X has shape {x_shape})"
        )
    raise ValueError(
        f"{type(estimator).__name__}.{method} does not use y, and its second positional "
        f"argument{what}; it would be dropped silently. To {advice}."
    )


def is_data(value):
    """Whether a constructor argument is a data set rather than a parameter value."""
    if is_anndata(value) or sparse.issparse(value) or hasattr(value, "iloc"):
        return True
    try:
        return np.ndim(value) >= 1
    except (TypeError, ValueError):  # ragged sequences
        return isinstance(value, (list, tuple))


def canonical_csr(X):
    """X as a float64 CSR matrix with sorted indices, no duplicates and no stored zeros.

    The caller's arrays are shared when they already have that form (they are then only
    read) and copied otherwise, so the caller's matrix is never modified and may be
    read-only or memory-mapped.
    """
    if not sparse.issparse(X):
        return sparse.csr_matrix(X, dtype=np.float64)
    if X.format == "coo" and X.dtype != np.float64:
        X = X.astype(np.float64)  # its duplicates summed in float64 (see validate_input)
    csr = X.tocsr()  # converts other formats (new arrays); a CSR matrix comes back as is
    # a new matrix object on the same arrays: the checks below cache flags on it, not on X
    view = sparse.csr_matrix((csr.data, csr.indices, csr.indptr), shape=csr.shape, copy=False)
    if view.dtype == np.float64 and view.has_canonical_format and np.all(view.data != 0):
        return view
    if view.dtype != np.float64:
        view = view.astype(np.float64)  # a copy
    elif X.format == "csr":  # shares the caller's arrays
        view = view.copy()
    view.sum_duplicates()
    view.eliminate_zeros()
    return view


def out_of_core_features(estimator, X, n_features, reset, check=True):
    """What ``validate_input`` does with the features of an X read by blocks: in ``fit``
    (``reset``), record ``n_features_in_`` and the AnnData's ``var_names`` as
    ``feature_names_in_``; elsewhere, when ``check``, refuse another number of features or
    other names."""
    names = np.asarray(X.var_names, dtype=object) if is_anndata(X) else None
    name = type(estimator).__name__
    if reset:
        _record_anndata_fit(estimator, X)
        estimator.n_features_in_ = n_features
        if names is None:
            estimator.__dict__.pop("feature_names_in_", None)
        else:
            estimator.feature_names_in_ = names
        return
    if not check:
        return
    if n_features != estimator.n_features_in_:
        raise ValueError(
            f"X has {n_features} features, but {name} is expecting "
            f"{estimator.n_features_in_} features as input."
        )
    fitted = getattr(estimator, "feature_names_in_", None)
    if names is not None and fitted is not None and not np.array_equal(names, fitted):
        raise ValueError(
            "The AnnData's var_names differ from the feature names seen in fit; "
            f"select them: adata[:, {name.lower()}.feature_names_in_]."
        )


def dense_matrix(value, name, *, non_negative=False, what="a 2-d array", ndim=2):
    """``value`` as a float64 array of ``ndim`` dimensions (any with None), finite (and
    non-negative), else a ``ValueError`` that names it; a sparse matrix is refused with the
    call that densifies it.

    For the helper functions' matrices (fitted factors, their deviations), which small
    sizes make dense and whose NaN would otherwise come out as a number (a correlation of
    0, the most significant p-value).
    """
    if sparse.issparse(value):
        raise ValueError(f"{name} must be dense; got a sparse matrix. Pass {name}.toarray().")
    array = np.asarray(value, dtype=np.float64)
    if ndim is not None and array.ndim != ndim:
        raise ValueError(f"{name} must be {what}; got an array of shape {array.shape}.")
    if not np.all(np.isfinite(array)):
        raise ValueError(f"{name} must be finite; got NaN or infinite values.")
    if non_negative and np.any(array < 0):
        raise ValueError(f"{name} must be non-negative; got negative values.")
    return array
