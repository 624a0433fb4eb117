"""The error measures of rating predictions: MAE and the normalised MAE of Marlin (2004),
and the scorers that give them to scikit-learn's model selection."""

import numpy as np

from .._utils._validation import check_not_masked
from .._utils._warnings import warn
from ._ratings import _as_ratings_csr, _level_spread, level_codes

# the measures, then the scorers that give them to scikit-learn's model selection
__all__ = [
    "rating_mae",
    "rating_nmae",
    "rating_rmse",
    "neg_mae_scorer",
    "neg_nmae_scorer",
    "neg_rmse_scorer",
]


def _paired_vectors(y_true, y_pred):
    """Two vectors of ratings of the same pairs (scikit-learn's ``mean_absolute_error``
    habit): the pairs where ``y_true`` is not NaN."""
    t = np.asarray(y_true, dtype=np.float64)
    p = np.asarray(y_pred, dtype=np.float64)
    if t.shape != p.shape:
        raise ValueError(
            f"X_true and X_pred must rate the same pairs; got vectors of {t.size} and "
            f"{p.size} ratings."
        )
    rated = ~np.isnan(t)
    if not rated.any():
        raise ValueError("X_true holds no rating: there is nothing to score.")
    if not np.all(np.isfinite(t[rated])) or not np.all(np.isfinite(p[rated])):
        raise ValueError("The ratings must be finite (NaN in X_true marks a pair not rated).")
    return t[rated], p[rated]


def _paired_values(X_true, X_pred):
    check_not_masked(X_true, "X_true")
    check_not_masked(X_pred, "X_pred")
    one_d = [
        not hasattr(X, "tocsr") and np.ndim(X) == 1 for X in (X_true, X_pred)
    ]  # fmt: skip
    if all(one_d):
        return _paired_vectors(X_true, X_pred)
    T = _as_ratings_csr(X_true, "X_true")
    P = _as_ratings_csr(X_pred, "X_pred")
    if (
        T.shape != P.shape
        or T.nnz != P.nnz
        or not (np.array_equal(T.indptr, P.indptr) and np.array_equal(T.indices, P.indices))
    ):
        raise ValueError(
            "X_true and X_pred must hold ratings at the same (user, item) pairs; got "
            f"{T.nnz} and {P.nnz} entries in shapes {T.shape} and {P.shape}."
        )
    if T.nnz == 0:
        raise ValueError("X_true holds no rating: there is nothing to score.")
    return T.data, P.data


def rating_mae(X_true, X_pred):
    """Mean absolute error over the rated pairs.

    Parameters
    ----------
    X_true : {array-like, sparse matrix} of shape (n_users, n_items) or (n_pairs,)
        True ratings (stored entries, or non-NaN entries of a dense array); or a vector of
        ratings, as scikit-learn's ``mean_absolute_error`` takes them.
    X_pred : {array-like, sparse matrix} of shape (n_users, n_items) or (n_pairs,)
        Predicted ratings at the same pairs, e.g. from :meth:`MaxMarginMF.predict_ratings`.

    Returns
    -------
    mae : float
        The mean of ``|true - predicted|`` over the pairs.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_cogaps import rating_mae
    >>> rating_mae(np.array([[1.0, np.nan, 3.0]]), np.array([[2.0, np.nan, 3.0]]))
    0.5
    """
    t, p = _paired_values(X_true, X_pred)
    return float(np.mean(np.abs(t - p)))


def rating_rmse(X_true, X_pred):
    """Root mean squared error over the rated pairs (surprise's ``accuracy.rmse``).

    The model predicts rating levels, whole steps of the scale, so its RMSE can exceed
    that of a model predicting real values whose MAE it beats.

    Parameters
    ----------
    X_true : {array-like, sparse matrix} of shape (n_users, n_items) or (n_pairs,)
        True ratings, as :func:`rating_mae` takes them.
    X_pred : {array-like, sparse matrix} of shape (n_users, n_items) or (n_pairs,)
        Predicted ratings at the same pairs.

    Returns
    -------
    rmse : float
        The square root of the mean of ``(true - predicted) ** 2`` over the pairs.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_cogaps import rating_rmse
    >>> rating_rmse(np.array([[1.0, np.nan, 3.0]]), np.array([[3.0, np.nan, 3.0]]))
    1.4142135623730951
    """
    t, p = _paired_values(X_true, X_pred)
    return float(np.sqrt(np.mean((t - p) ** 2)))


def rating_nmae(X_true, X_pred, levels=None):
    """Normalised mean absolute error, MAE / E_L (Marlin 2004).

    E_L is the MAE of predictions drawn uniformly from the rating levels: 1.6 for five
    levels 1..5 (1.944 for six), so that the NMAE of scales of different lengths compare.

    Parameters
    ----------
    X_true : {array-like, sparse matrix} of shape (n_users, n_items) or (n_pairs,)
        True ratings, as in :func:`rating_mae`.
    X_pred : {array-like, sparse matrix} of shape (n_users, n_items) or (n_pairs,)
        Predicted ratings at the same pairs.
    levels : array-like or None, default=None
        The rating levels, e.g. ``MaxMarginMF.levels_``. A true rating that is not one of
        them is an error: E_L is that of the scale the levels describe, and the default
        scale would misnormalise the errors of any other. None: 1 to 5 stars, with a
        warning when the true ratings do not reach both 1 and 5 (a scale of 1 to 4 stars
        has another E_L).

    Returns
    -------
    nmae : float
        MAE / E_L with E_L = mean ``|l_a - l_b|`` over all pairs of levels.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_cogaps import rating_nmae
    >>> rating_nmae(np.array([[1.0, 5.0]]), np.array([[2.0, 5.0]]))
    0.3125
    """
    default = levels is None
    levels = (1, 2, 3, 4, 5) if default else levels
    spread = _level_spread(levels)
    t, p = _paired_values(X_true, X_pred)
    values = np.asarray(levels, dtype=np.float64).ravel()
    if default and t.size and not (np.any(t == 1.0) and np.any(t == 5.0)):
        warn(
            f"X_true's ratings run from {t.min():g} to {t.max():g}, and the NMAE is normalised "
            "by E_L of the default scale 1 to 5 stars. If the scale is another, pass its "
            "levels (levels=MaxMarginMF.levels_, or e.g. levels=range(1, 5)); to keep 1 to "
            "5, pass levels=range(1, 6).",
            UserWarning,
        )
    # a level read in float32 is the same level in float64 (ratings._LEVEL_RTOL)
    outside = np.unique(t[~level_codes(t, np.sort(values))[1]])
    if outside.size:
        shown = ", ".join(f"{v:g}" for v in outside[:5]) + (", ..." if outside.size > 5 else "")
        raise ValueError(
            f"X_true has ratings that are not among levels={tuple(values.tolist())}: {shown}. "
            "Pass the levels of the rating scale, e.g. levels=MaxMarginMF.levels_ or "
            "levels=range(1, 11) for ratings 1 to 10."
        )
    return float(np.mean(np.abs(t - p))) / spread


def neg_nmae_scorer(estimator, X, y):
    """Scorer for ``GridSearchCV``: -NMAE of the held-out ratings y given the ratings X.

    The users of the rows of X are rated as new users from their ratings in X (the item
    factors fixed) and scored at the stored entries of y, which the fit never saw. Use it
    with the matrices of :func:`holdout_ratings`:
    ``GridSearchCV(MaxMarginMF(), {"C": [...]}, scoring=neg_nmae_scorer).fit(X_train, X_test)``.

    Parameters
    ----------
    estimator : MaxMarginMF
        A fitted estimator.
    X : {array-like, sparse matrix} of shape (n_users, n_items)
        Observed ratings of the users.
    y : {array-like, sparse matrix} of shape (n_users, n_items)
        Held-out ratings of the same users.

    Returns
    -------
    score : float
        Minus the NMAE (higher is better).
    """
    # a held-out rating of a level no training rating had belongs to the scale all the same
    levels = np.union1d(estimator.levels_, _as_ratings_csr(y, "y").data)
    return -rating_nmae(y, estimator.predict_ratings(y, observed=X), levels)


_SCORER_DOC = """Scorer for ``GridSearchCV``: -{name} of the held-out ratings y given the ratings X.

    As :func:`neg_nmae_scorer`, for :func:`{measure}` (in rating units).

    Parameters
    ----------
    estimator : MaxMarginMF
        A fitted estimator.
    X : {{array-like, sparse matrix}} of shape (n_users, n_items)
        Observed ratings of the users.
    y : {{array-like, sparse matrix}} of shape (n_users, n_items)
        Held-out ratings of the same users.

    Returns
    -------
    score : float
        Minus the {name} (higher is better).
    """


def neg_mae_scorer(estimator, X, y):  # its docstring: _SCORER_DOC, below
    return -rating_mae(y, estimator.predict_ratings(y, observed=X))


def neg_rmse_scorer(estimator, X, y):
    return -rating_rmse(y, estimator.predict_ratings(y, observed=X))


neg_mae_scorer.__doc__ = _SCORER_DOC.format(name="MAE", measure="rating_mae")
neg_rmse_scorer.__doc__ = _SCORER_DOC.format(name="RMSE", measure="rating_rmse")


def _held_out_nmae(R_held, chain, sums, prior, levels):
    """NMAE of the held-out ratings from the running means (the current sample before any)."""
    if sums.count:
        U, V, theta = sums.means(prior)
    else:
        U, V, theta = chain.U, chain.V, chain.theta
    rows = np.repeat(np.arange(R_held.shape[0]), np.diff(R_held.indptr))
    x = np.einsum("pk,pk->p", U[rows], V[R_held.indices])
    pred = levels[np.sum(x[:, None] >= theta[rows], axis=1)]
    return float(np.mean(np.abs(pred - R_held.data))) / _level_spread(levels)
