"""What the estimators share: input checks, seeding, thread counts, matching factors."""

import functools
import hashlib
import inspect
import warnings

import numpy as np
from scipy import sparse
from scipy.optimize import linear_sum_assignment
from sklearn.utils.validation import check_array, check_is_fitted, validate_data

from ._utils._openmp_helpers import effective_n_threads

__all__ = [
    "COUNTS_ADVICE",
    "DataInFitMixin",
    "NonNegativeFactorisationMixin",
    "check_ignored_y",
    "draw_seeds",
    "effective_n_threads",
    "load_matrix",
    "match_components",
    "unwrap_anndata",
    "validate_input",
]


#: What a count model's error on negative input adds (``_negative_input_advice``).
COUNTS_ADVICE = (
    "The model is for counts: pass the raw counts, before normalising, centring or "
    "log-transforming them."
)


def _is_anndata(obj):
    """Whether ``obj`` looks like an ``anndata.AnnData`` (duck-typed: anndata is optional)."""
    module = type(obj).__module__ or ""
    return (
        module.split(".")[0] == "anndata"
        and hasattr(obj, "X")
        and hasattr(obj, "var_names")
        and hasattr(obj, "obs_names")
    )


def _index_by_obs_names(method):
    """``method`` (``transform`` or ``fit_transform``) whose pandas output, for an AnnData
    input, is indexed by the AnnData's ``obs_names``: scikit-learn's ``set_output`` takes
    the index of a DataFrame input only, and would number the cells 0, 1, ..."""
    if getattr(method, "_indexes_by_obs_names", False):
        return method

    @functools.wraps(method)
    def wrapped(self, X, *args, **kwargs):
        out = method(self, X, *args, **kwargs)
        if _is_anndata(X) and hasattr(out, "columns") and len(out) == len(X.obs_names):
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
    if not _is_anndata(X):
        return X, None
    names = np.asarray(X.var_names, dtype=object)
    matrix = X.X
    if matrix is None:
        raise ValueError(
            f"The AnnData of shape {X.shape} has no .X; pass one of its layers instead, for "
            f"example adata.layers[{next(iter(X.layers.keys()), 'counts')!r}]."
        )
    return load_matrix(matrix), names


def _warn_if_fitted_on_a_layer(estimator, adata):
    """Warn when an AnnData's ``.X`` is read by a model that fit_anndata fitted on one of
    its layers (raw counts in a layer, normalised values in ``.X``, is the usual layout)."""
    layer = getattr(estimator, "_anndata_layer", None)
    if layer is None or layer not in adata.layers:
        return
    warnings.warn(
        f"This {type(estimator).__name__} was fitted on the layer {layer!r} (fit_anndata), "
        f"but an AnnData passed here is read through its .X, which may be on another "
        f"scale. Pass adata.layers[{layer!r}] to use the fitted layer.",
        UserWarning,
        stacklevel=4,
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


def validate_input(estimator, X, *, reset, check=validate_data, **kwargs):
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
    **kwargs : dict
        Passed to ``check``.

    Returns
    -------
    X : {ndarray, sparse matrix}
        The validated data.
    """
    if isinstance(estimator, NonNegativeFactorisationMixin):
        _check_not_triplets(estimator, X)
    if reset:
        # fit_anndata(layer=...) records the layer after its fit; a plain fit forgets it
        estimator.__dict__.pop("_anndata_layer", None)
    adata = X if _is_anndata(X) else None
    X, names = unwrap_anndata(X)
    try:
        if check is check_array:
            return check_array(X, **kwargs)
        if names is None:
            return validate_data(estimator, X, reset=reset, **kwargs)
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="X does not have valid feature names")
            X = validate_data(estimator, X, reset=reset, **kwargs)
    except ValueError as error:
        advice = getattr(estimator, "_negative_input_advice", None)
        # scikit-learn's own sentence stays first: its checks look for it
        if advice and str(error).startswith("Negative values in data passed to"):
            raise ValueError(f"{error} {advice}") from None
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
            _warn_if_fitted_on_a_layer(estimator, adata)
    return X


# column names of a long table of (user, item, count) triplets, lower case without "_"
_TRIPLET_COLUMNS = ({"userid", "itemid"}, {"user", "item"})


def _check_not_triplets(estimator, X, value="Count", source="hpfrec's HPF.fit"):
    """Refuse a long table of (user, item, value) triplets, the input of hpfrec's ``HPF.fit``
    (counts) or of rating libraries (ratings).

    Fitted as it is, it would be read as a matrix of three features (user number, item
    number, value), with no error. ``value`` names the value column in the advice and
    ``source`` the tool whose input such a table is.
    """
    columns = getattr(X, "columns", None)
    if columns is None:
        return
    names = {str(c).lower().replace("_", "") for c in columns}
    if not any(pair <= names for pair in _TRIPLET_COLUMNS):
        return
    raise ValueError(
        f"X looks like a table of (user, item, {value.lower()}) triplets (columns "
        f"{list(columns)}), as {source} takes; {type(estimator).__name__} factorises the "
        "matrix itself, users x items, and would read the triplets as three features. Build "
        "the matrix: users, items = pd.factorize(df['UserId'])[0], "
        f"pd.factorize(df['ItemId'])[0]; X = scipy.sparse.csr_matrix((df['{value}'], "
        "(users, items)))."
    )


def _shape(obj):
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
    if not hasattr(value, "columns") or not hasattr(value, "index"):
        return
    labels = {
        "column": (getattr(X, "columns", getattr(X, "var_names", None)), value.columns),
        "row": (getattr(X, "index", getattr(X, "obs_names", None)), value.index),
    }
    for axis in axes:
        of_x, of_v = labels[axis]
        how = label_mismatch(of_x, of_v)
        if how is None:
            continue
        of_x, of_v = np.asarray(of_x, dtype=object), np.asarray(of_v, dtype=object)
        # pandas selects rows with .loc[rows] and columns with .loc[:, columns]
        align = {
            ("column", "row"): f"{name}.loc[X.index, X.columns]",
            ("row",): f"{name}.loc[X.index]",
            ("column",): f"{name}.loc[:, X.columns]",
        }[tuple(sorted(axes))]
        raise ValueError(
            f"The {axis} labels of '{name}' are the {axis} labels of X {how} (first "
            f"{of_v[:3].tolist()} against {of_x[:3].tolist()}); entries are matched by "
            f"position, so values would be paired with the wrong entries of X. Align it "
            f"first: {align} (for an AnnData, adata.obs_names for X.index and "
            "adata.var_names for X.columns)."
        )


def warn_warm_start_ignored(estimator, reason):
    """Say that ``warm_start=True`` could not continue the previous fit, which is replaced.

    Parameters
    ----------
    estimator : estimator instance
        The estimator being fitted with ``warm_start=True`` after an earlier fit.
    reason : str
        Why the earlier fit cannot be continued (for example ``"X has 30 rows, the
        previous fit had 40"``).
    """
    warnings.warn(
        f"warm_start=True, but {reason}: {type(estimator).__name__} cannot continue the "
        "previous fit and starts a new one. To continue it, fit the previous fit's data "
        "with its settings; or set warm_start=False to start anew without this warning.",
        UserWarning,
        stacklevel=3,
    )


def fingerprint(*parts):
    """A short digest of strings and arrays (their dtypes, shapes and values).

    A warm start keeps one of the data its chain sampled, and continues the chain only on
    data with the same fingerprint.

    Parameters
    ----------
    *parts : str or array-like
        What to digest, in order.

    Returns
    -------
    digest : str
        32 hexadecimal digits.
    """
    digest = hashlib.blake2b(digest_size=16)
    for part in parts:
        if isinstance(part, str):
            digest.update(part.encode())
            continue
        array = np.ascontiguousarray(part)
        digest.update(f"{array.dtype.str}{array.shape}".encode())
        digest.update(array.tobytes())
    return digest.hexdigest()


def warn_unused_parameters(estimator, names, used_when, advice, note="", stacklevel=4):
    """Warn about parameters set away from their defaults that this fit does not read.

    scikit-learn warns so about ``l1_ratio`` without an elastic-net penalty: a value that
    changes nothing would otherwise be dropped silently (a grid over it would fit the same
    model every time).

    Parameters
    ----------
    estimator : estimator instance
        The estimator being fitted.
    names : sequence of str
        Parameters the current settings do not read.
    used_when : str
        When they are read, for the message (for example ``"with solver='pathwise'"``).
    advice : str
        What to set to use them, for the message.
    note : str, default=""
        A sentence added to the message (for example what to use instead).
    stacklevel : int, default=4
        As for :func:`warnings.warn`; 4 names the caller of ``fit`` when ``fit`` calls
        this function (past scikit-learn's ``_fit_context`` wrapper).
    """
    defaults = inspect.signature(type(estimator).__init__).parameters
    changed = [
        f"{name}={getattr(estimator, name)!r}"
        for name in names
        if not _is_default(getattr(estimator, name), defaults[name].default)
    ]
    if not changed:
        return
    one = len(changed) == 1
    warnings.warn(
        f"{', '.join(changed)} {'is' if one else 'are'} used only {used_when}, and this "
        f"fit ignores {'it' if one else 'them'}. {advice}, or leave "
        f"{', '.join(c.split('=')[0] for c in changed)} at "
        f"{'its default' if one else 'their defaults'}.{' ' + note if note else ''}",
        UserWarning,
        stacklevel=stacklevel,
    )


def _is_default(value, default):
    """Whether a parameter holds its default (a list or an array never does)."""
    if default is None:
        return value is None
    return not isinstance(value, (list, tuple, np.ndarray)) and value == default


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
    x_shape = _shape(X)
    y_shape = _shape(y)
    n = x_shape[0] if x_shape else None
    if len(y_shape) == 1 and y_shape[0] == n:
        return
    if len(y_shape) == 2 and y_shape[0] == n and y_shape != x_shape:
        return
    raise ValueError(
        f"{type(estimator).__name__}.{method} does not use y, and its second positional "
        f"argument, of shape {y_shape}, is not a target of length n_samples = {n} that it "
        f"could ignore (X has shape {x_shape}); it would be dropped silently. To {advice}."
    )


def _is_data(value):
    """Whether a constructor argument is a data set rather than a parameter value."""
    if _is_anndata(value) or sparse.issparse(value) or hasattr(value, "iloc"):
        return True
    try:
        return np.ndim(value) >= 1
    except (TypeError, ValueError):  # ragged sequences
        return isinstance(value, (list, tuple))


class DataInFitMixin:
    """Refuse data given to the constructor, as in R's ``CoGAPS(data, uncertainty)``.

    The estimators take their parameters in the constructor and their data in ``fit``.
    Data passed positionally to the constructor would otherwise become ``n_components``
    (failing later with a message about an integer parameter) or meet Python's bare
    ``TypeError`` about positional arguments. A class using it sets ``_fit_advice``, the
    call to write instead, and ``_peer_parameters``, the peers' names of its parameters
    (``CoGAPS(nPatterns=3)``), which get a ``TypeError`` with ours rather than Python's bare
    "unexpected keyword argument". Put it left of ``BaseEstimator``.
    """

    _fit_advice = "Estimator(n_components=K).fit(X)"
    #: The peers' spellings of parameters this estimator names otherwise:
    #: ``{name: (whose spelling, what to write instead)}``.
    _peer_parameters = {}

    def __new__(cls, *args, **kwargs):
        for position, value in enumerate(args):
            if _is_data(value):
                raise TypeError(
                    f"{cls.__name__}() takes its parameters, not data: positional argument "
                    f"{position + 1} is a data set of shape {_shape(value)}. Create the "
                    f"estimator, then give it the data: {cls._fit_advice}."
                )
        for name, value in kwargs.items():
            if name in cls._peer_parameters:
                whose, instead = cls._peer_parameters[name]
                raise TypeError(
                    f"{cls.__name__}() has no parameter {name!r} ({whose}'s name, given "
                    f"{value!r}); write {instead}."
                )
        return super().__new__(cls)


class NonNegativeFactorisationMixin:
    """What the non-negative factorisation transformers share.

    Their output features are the components (``X ≈ transform(X) @ components_``), they take
    non-negative dense or sparse input, and they compute in float64. Put it left of
    ``ClassNamePrefixFeaturesOutMixin, TransformerMixin, BaseEstimator``.
    """

    #: What to do instead, appended to scikit-learn's error on negative input.
    _negative_input_advice = (
        "The model is for non-negative data: pass the values before centring or "
        "standardising (in a Pipeline, drop StandardScaler or use MinMaxScaler), or "
        "shift them by their minimum."
    )

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)  # scikit-learn's set_output wraps transform here
        for name in ("transform", "fit_transform"):
            if hasattr(cls, name):
                setattr(cls, name, _index_by_obs_names(getattr(cls, name)))

    def __sklearn_is_fitted__(self):
        # not n_features_in_, which validation sets before a fit can fail or be interrupted
        return hasattr(self, "components_")

    def inverse_transform(self, X):
        """Data reconstructed from per-sample factors: ``X @ components_``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_components)
            Per-sample factors, as returned by :meth:`transform`.

        Returns
        -------
        X_original : ndarray of shape (n_samples, n_features)
            The reconstruction of the data (the posterior mean of its expectation).
        """
        check_is_fitted(self)
        # float32 factors of a float32 fit stay float32, as scikit-learn's NMF keeps them
        W = check_array(X, dtype=[np.float64, np.float32])
        if W.shape[1] != self.components_.shape[0]:
            raise ValueError(
                f"inverse_transform expects per-sample factors of shape (n_samples, "
                f"n_components={self.components_.shape[0]}); got {W.shape}. Pass the output "
                f"of transform."
            )
        return W @ self.components_.astype(np.result_type(W, self.components_), copy=False)

    @property
    def _n_features_out(self):
        """Number of transformed output features."""
        return self.components_.shape[0]

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.positive_only = True
        tags.input_tags.sparse = True
        tags.transformer_tags.preserves_dtype = ["float64"]
        return tags


def draw_seeds(rng, size=None):
    """Draw 64-bit seeds for the nogil generators from a numpy ``RandomState``.

    Parameters
    ----------
    rng : numpy.random.RandomState
        The generator made once per fit by ``check_random_state(random_state)``.
    size : int or None, default=None
        Number of seeds; None gives one Python int.

    Returns
    -------
    seeds : int or ndarray of uint64
        Uniform over the 64-bit integers.
    """
    n = 1 if size is None else size
    hi = rng.randint(0, 2**32, size=n, dtype=np.uint64)
    lo = rng.randint(0, 2**32, size=n, dtype=np.uint64)
    seeds = (hi << np.uint64(32)) | lo
    return int(seeds[0]) if size is None else seeds


def match_components(reference, estimate, axis=1):
    """Pair each reference factor with a distinct estimated factor by correlation.

    The assignment maximises the total Pearson correlation (Hungarian algorithm), as is
    usual when comparing factorisations, whose components come in arbitrary order.

    Parameters
    ----------
    reference : array-like of shape (n, k_ref) if axis=1, (k_ref, n) if axis=0
        The factors to find, for example the true patterns.
    estimate : array-like of shape (n, k_est) if axis=1, (k_est, n) if axis=0
        The fitted factors, with ``k_est >= k_ref``.
    axis : {0, 1}, default=1
        The axis along which the factors are stacked: 1 when each column is a factor.

    Returns
    -------
    order : ndarray of shape (k_ref,)
        ``order[i]`` is the estimated factor matched to reference factor ``i``.
    correlation : ndarray of shape (k_ref,)
        The correlation of each matched pair (NaN-free: a constant factor has 0).
    """
    ref = np.asarray(reference, dtype=float)
    est = np.asarray(estimate, dtype=float)
    if axis == 0:
        ref, est = ref.T, est.T
    if ref.shape[0] != est.shape[0]:
        raise ValueError(
            f"reference and estimate must have the same length along the factors; got "
            f"{ref.shape[0]} and {est.shape[0]}."
        )
    if est.shape[1] < ref.shape[1]:
        raise ValueError(
            f"estimate has {est.shape[1]} factors, fewer than the {ref.shape[1]} of reference."
        )
    ref_c = ref - ref.mean(axis=0)
    est_c = est - est.mean(axis=0)
    ref_n = np.linalg.norm(ref_c, axis=0)
    est_n = np.linalg.norm(est_c, axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        corr = (ref_c.T @ est_c) / np.outer(ref_n, est_n)
    corr = np.nan_to_num(corr, nan=0.0)
    rows, cols = linear_sum_assignment(-corr)
    order = np.empty(ref.shape[1], dtype=np.intp)
    order[rows] = cols
    return order, corr[np.arange(ref.shape[1]), order]
