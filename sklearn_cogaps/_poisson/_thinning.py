"""Held-out counts by binomial thinning: each count split in two independent Poisson parts,
a share for training and the rest for scoring, with the same means up to the share."""

import numpy as np
from scipy import sparse
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_array

from .._utils._seeding import check_seed

__all__ = ["thin_counts"]


def thin_counts(X, fraction=0.2, *, random_state=None):
    """Split counts into training and held-out counts by binomial thinning.

    Each count ``x`` gives ``v ~ Binomial(x, fraction)`` held-out and ``x - v`` training
    counts. Under a Poisson model of mean ``mu`` the two are independent Poisson counts of
    means ``fraction * mu`` and ``(1 - fraction) * mu``: every entry is held out in part,
    which is what early stopping with ``X_val`` and ``poisson_loglik`` score (a split of the
    interactions instead leaves the training counts as held-out zeros).

    Parameters
    ----------
    X : {array-like, sparse matrix} of shape (n_samples, n_features)
        Non-negative whole-number counts, of any numeric dtype.
    fraction : float, default=0.2
        The expected share of each count held out, in (0, 1).
    random_state : int, RandomState instance or None, default=None
        Seeds the binomial draws: one per non-zero count, row by row, so that the same
        counts give the same split dense or sparse.

    Returns
    -------
    X_train, X_held : ndarray or sparse CSR of shape (n_samples, n_features)
        Float64 counts that sum to X, sparse (CSR, a matrix or an array as X is, without
        stored zeros) when X is.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_cogaps import thin_counts
    >>> X = np.array([[10, 0], [3, 7]])
    >>> X_train, X_held = thin_counts(X, 0.5, random_state=0)
    >>> bool(np.all(X_train + X_held == X))
    True
    """
    if isinstance(fraction, bool) or not 0.0 < float(fraction) < 1.0:
        raise ValueError(f"fraction must be in (0, 1); got {fraction!r}.")
    rng = check_random_state(check_seed(random_state))
    X = check_array(X, accept_sparse=("csr", "csc", "coo"), dtype=np.float64,
                    input_name="X")  # fmt: skip
    if sparse.issparse(X):
        # the counts are the sums of duplicate entries (COO's 0.5 + 0.5 is a count of 1)
        X = X.tocsr(copy=True)
        X.sum_duplicates()
        # a stored 0 would take a draw (numpy's binomial draws for n = 0 too), moving every
        # draw after it away from the dense matrix's
        X.eliminate_zeros()
    values = X.data if sparse.issparse(X) else X
    if values.size and (values.min() < 0 or np.any(values != np.round(values))):
        raise ValueError(
            "thin_counts splits whole-number counts; X has negative or fractional values. "
            "For other data hold out entries instead (holdout_ratings)."
        )
    if values.size and values.max() >= 2.0**62:
        raise ValueError("X has counts beyond 2**62, which binomial draws cannot take.")
    if sparse.issparse(X):
        held = X.copy()
        held.data = rng.binomial(X.data.astype(np.int64), fraction).astype(np.float64)
        train = X.copy()
        train.data = X.data - held.data
        held.eliminate_zeros()
        train.eliminate_zeros()
        return train, held
    # one draw per non-zero count in the order of the rows, as the CSR's: the same counts
    # give the same split dense or sparse
    nonzero = X != 0
    held = np.zeros_like(X)
    held[nonzero] = rng.binomial(X[nonzero].astype(np.int64), fraction)
    return X - held, held
