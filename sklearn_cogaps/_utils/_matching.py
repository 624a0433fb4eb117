"""Matching the components of two factorisations, whose order is arbitrary."""

import numpy as np
from scipy.optimize import linear_sum_assignment

from ._validation import dense_matrix

__all__ = ["match_components"]


def match_components(reference, estimate, axis=None):
    """Pair each reference factor with a distinct estimated factor by correlation.

    The assignment maximises the total Pearson correlation (Hungarian algorithm), as is
    usual when comparing factorisations, whose components come in arbitrary order.

    Parameters
    ----------
    reference : array-like of shape (n, k_ref) if axis=1, (k_ref, n) if axis=0
        The factors to find, for example the true patterns.
    estimate : array-like of shape (n, k_est) if axis=1, (k_est, n) if axis=0
        The fitted factors, with ``k_est >= k_ref``.
    axis : {0, 1} or None, default=None
        The axis along which the factors are stacked: 1 when each column is a factor (as
        in ``loadings_``), 0 when each row is (as in ``components_``). None means 1, and
        refuses factors stacked in rows (more columns than rows in ``estimate``), which
        would be read as many short factors: pass the axis for those.

    Returns
    -------
    order : ndarray of shape (k_ref,)
        ``order[i]`` is the estimated factor matched to reference factor ``i``.
    correlation : ndarray of shape (k_ref,)
        The correlation of each matched pair (NaN-free: a constant factor has 0).
    """
    if axis not in (0, 1, None):
        raise ValueError(f"axis must be 0 (factors in rows) or 1 (in columns); got {axis!r}.")
    what = "a 2-d array (n, k) or, with axis=0, (k, n); a single factor as x.reshape(-1, 1)"
    ref = dense_matrix(reference, "reference", what=what)
    est = dense_matrix(estimate, "estimate", what=what)
    if axis is None:
        if est.shape[1] > est.shape[0]:
            # components_ (n_components, n_features): its features would be matched as
            # factors, without an error
            raise ValueError(
                f"estimate has more columns ({est.shape[1]}) than rows ({est.shape[0]}), as "
                "components_ has one factor per row: pass axis=0 to match its rows (or "
                "axis=1 to match its columns as factors)."
            )
        axis = 1
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
    corr = _unit_columns(ref).T @ _unit_columns(est)
    rows, cols = linear_sum_assignment(-corr)
    order = np.empty(ref.shape[1], dtype=np.intp)
    order[rows] = cols
    return order, corr[np.arange(ref.shape[1]), order]


def _unit_columns(A):
    """The columns of A centred and of unit norm (a constant column: 0), each first scaled
    by its largest magnitude: the squares of values near 1e-200 or 1e160 under- or
    overflow, and their correlations came out as 0 (the identity order, without a word)."""
    centred = A - A.mean(axis=0)
    largest = np.abs(centred).max(axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        scaled = centred / largest
        unit = scaled / np.linalg.norm(scaled, axis=0)
    return np.nan_to_num(unit, nan=0.0, posinf=0.0, neginf=0.0)
