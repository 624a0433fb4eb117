"""Ratings as MaxMarginMF reads them: the observed entries of a users x items matrix on L
ordered levels, their validation, the split of held-out ratings, and the per-row seeds of
the chains of new users."""

from numbers import Integral

import numpy as np
from scipy import sparse

from .._utils._seeding import check_seed, fingerprint, keyed_digest_seeds, stream_seeds
from .._utils._validation import (
    as_float_array,
    check_not_masked,
    check_not_triplets,
    check_numeric_columns,
)
from .._utils._warnings import warn

__all__ = ["check_levels", "holdout_ratings", "infer_levels"]

# More levels than this, inferred from X, are more likely continuous values than stars.
_MANY_LEVELS = 20
# Inferred integer levels 1..max beyond this are refused (a wrong entry, or not ratings).
_MAX_LEVELS = 1000
# Whole-number ratings with fewer fractional ones than this share are stars with stray
# entries: each stray value would become an ordered level of its own.
_STRAY_SHARE = 0.05


def _ratings_digest(R, levels):
    """The fingerprint of the ratings CSR ``R`` (its pattern and rating levels, whatever
    the index dtypes, and the same for the same levels in float32 or float64), to tell
    whether a warm start is given the ratings of its chain."""
    return fingerprint(
        np.asarray(R.shape, dtype=np.int64),
        R.indptr.astype(np.int64),
        R.indices.astype(np.int64),
        level_codes(R.data, levels)[0].astype(np.int64),
    )


def _levels_text(levels):
    """The rating levels for a message: ``1..5`` for 1..L, else the values."""
    if np.array_equal(levels, np.arange(1.0, levels.size + 1.0)):
        return f"1..{levels.size}"
    return ", ".join(f"{v:g}" for v in levels)


def _as_ratings_csr(X, name="X"):
    """CSR matrix of the observed entries of X: stored entries of a sparse X, non-NaN of a dense.

    Stored NaNs of a sparse matrix are missing; stored zeros and duplicates are errors.
    """
    if sparse.issparse(X):
        # a COO matrix's duplicates are counted on its pairs: converting it sums them
        n_duplicates = 0
        if X.format == "coo":
            pairs = X.row.astype(np.int64) * X.shape[1] + X.col.astype(np.int64)
            n_duplicates = pairs.size - np.unique(pairs).size
        # an owned copy: sorting, summing duplicates and dropping NaNs work in place, and a
        # CSR made from a CSR shares the caller's arrays (views, so not ``is``-identical)
        M = X.tocsr(copy=True)
        if not M.has_sorted_indices:
            M.sort_indices()
        n_before = M.nnz
        M.sum_duplicates()
        n_duplicates += n_before - M.nnz
        if n_duplicates:
            raise ValueError(
                f"{name} has {n_duplicates} duplicate stored entries (the same user and "
                "item more than once); keep one rating per pair."
            )
        if np.any(M.data == 0):
            raise ValueError(
                f"{name} has {int(np.sum(M.data == 0))} stored zeros. In a sparse ratings "
                "matrix every stored entry is a rating and 0 is not a rating level; call "
                f"{name}.eliminate_zeros() if the zeros mean 'not rated'. If 0 is a level "
                "of the scale (ratings of 0 to 10), shift the ratings to 1..L (X.data += 1 on "
                "a copy), or pass dense arrays with NaN where no rating is."
            )
        if np.any(np.isnan(M.data)):
            M.data[np.isnan(M.data)] = 0.0
            M.eliminate_zeros()
        return M
    # a DataFrame of nullable ratings (Int64, Float64): pd.NA is a missing rating
    X = as_float_array(X, "X")
    observed = ~np.isnan(X)
    n_zeros = int(np.sum(X == 0))
    if n_zeros:
        # a dense matrix often holds 0 for "not rated": fitted as ratings they would become
        # a level 0 and predictions of it (scikit-learn's checks give integer data with 0,
        # so this warns rather than refuses)
        warn(
            f"{name} has {n_zeros} zeros, read as ratings of 0. In a dense ratings matrix a "
            f"missing rating is NaN; if 0 means 'not rated', pass np.where({name} == 0, "
            f"np.nan, {name}) or a sparse matrix of the ratings. A scale that starts at 0 "
            "can be shifted to 1..L, which silences this warning.",
            UserWarning,
        )
    rows, cols = np.nonzero(observed)
    return sparse.csr_matrix((X[rows, cols], (rows, cols)), shape=X.shape)


def _level_spread(levels):
    """E|l_a - l_b| for two independent uniform draws from the levels (E_L of the NMAE)."""
    values = np.asarray(levels, dtype=np.float64).ravel()
    if values.size < 2 or np.unique(values).size != values.size or not np.all(np.isfinite(values)):
        raise ValueError(
            f"levels must be two or more distinct rating levels; got {levels!r} (for example "
            "MaxMarginMF.levels_, or (1, 2, 3, 4, 5))."
        )
    return float(np.abs(values[:, None] - values[None, :]).mean())


def holdout_ratings(X, n_per_user=1, *, min_ratings=None, random_state=None):
    """Split a ratings matrix into training and held-out ratings, ``n_per_user`` per user.

    The usual protocol of collaborative filtering ("weak generalisation"): every user with
    at least ``min_ratings`` ratings gives ``n_per_user`` of them, chosen uniformly at
    random, to the held-out matrix; the others stay in the training matrix. Items are not
    protected: an item whose only ratings are held out has none in training, and
    :class:`MaxMarginMF` then rates it from its factors' prior and the users' thresholds
    (a new item), as the protocol scores it.

    Parameters
    ----------
    X : {array-like, sparse matrix} of shape (n_users, n_items)
        Ratings: the stored entries of a sparse matrix, the non-NaN entries of a dense one.
    n_per_user : int, default=1
        Ratings held out per user.
    min_ratings : int or None, default=None
        Users with fewer ratings keep all of them; must exceed ``n_per_user``. None means
        ``n_per_user + 1``.
    random_state : int, RandomState instance or None, default=None
        Seed of the choice; the same seed gives the same split.

    Returns
    -------
    X_train : scipy.sparse.csr_matrix of shape (n_users, n_items)
        The training ratings.
    X_test : scipy.sparse.csr_matrix of shape (n_users, n_items)
        The held-out ratings; ``X_train + X_test`` has the ratings of X.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_cogaps import holdout_ratings
    >>> X = np.array([[1, 2, np.nan], [3, 4, 5.0]])
    >>> train, test = holdout_ratings(X, random_state=0)
    >>> test.getnnz(axis=1).tolist(), train.getnnz(axis=1).tolist()
    ([1, 1], [1, 2])
    """
    for name, value in (("n_per_user", n_per_user), ("min_ratings", min_ratings)):
        if value is not None and (
            isinstance(value, (bool, np.bool_)) or not isinstance(value, (Integral, np.integer))
        ):
            raise ValueError(f"{name} must be an integer (a number of ratings); got {value!r}.")
    if min_ratings is None:
        min_ratings = n_per_user + 1
    if n_per_user < 1 or min_ratings <= n_per_user:
        raise ValueError(
            f"n_per_user must be at least 1 and below min_ratings; got n_per_user="
            f"{n_per_user}, min_ratings={min_ratings}."
        )
    # the checks of MaxMarginMF's fit: a table of triplets, values under a mask, a shape
    # that is no users x items matrix
    check_not_triplets(None, X, value="Rating", source="a rating library's loader",
                       who="holdout_ratings", does="splits")  # fmt: skip
    check_not_masked(X, "X", advice="NaN is a missing rating: pass "
                     "X.astype(float).filled(np.nan).", who="holdout_ratings")  # fmt: skip
    if not sparse.issparse(X) and np.ndim(X) != 2:
        raise ValueError(
            f"X must be the users x items matrix of ratings (2-d); got shape {np.shape(X)}. "
            "Build it from (user, item, rating) triplets with "
            "triplets_to_matrix(users, items, ratings)."
        )
    check_numeric_columns(X)
    R = _as_ratings_csr(X)
    if np.any(R.data == 0):
        raise ValueError(
            "X has ratings of 0, which the sparse matrices holdout_ratings returns cannot "
            "hold (a stored 0 is not a rating there). Shift the scale to start at 1 "
            "(holdout_ratings(X + 1)), or pass np.where(X == 0, np.nan, X) if 0 means "
            "'not rated'."
        )
    rng = check_seed(random_state)
    counts = np.diff(R.indptr)
    held = np.zeros(R.nnz, dtype=bool)
    for i in np.flatnonzero(counts >= min_ratings):
        pick = rng.choice(counts[i], size=n_per_user, replace=False)
        held[R.indptr[i] + pick] = True
    rows = np.repeat(np.arange(R.shape[0]), counts)
    train = sparse.csr_matrix((R.data[~held], (rows[~held], R.indices[~held])), shape=R.shape)
    test = sparse.csr_matrix((R.data[held], (rows[held], R.indices[held])), shape=R.shape)
    return train, test


def _row_seeds(R, base, levels):
    """One 64-bit seed per row from ``base`` and the row's items and rating levels only:
    the levels' codes, not the values, so that the same ratings on another scale (1..5 or
    0.5..2.5) or in float32 give the same seeds."""
    codes = level_codes(R.data, levels)[0].astype(np.int64)

    def rows():
        for i in range(R.shape[0]):
            a, b = R.indptr[i], R.indptr[i + 1]
            yield (
                np.ascontiguousarray(R.indices[a:b], dtype=np.int64).tobytes(),
                codes[a:b].tobytes(),
            )

    return keyed_digest_seeds(base, rows())


def _step_seeds(row_seeds, it, step):
    """Seeds of iteration ``it`` and step ``step`` (0 or 1) from fixed per-row seeds."""
    return stream_seeds(row_seeds, 2 * it + step)


class _Ratings:
    """Ratings as level codes 1..L in CSR order, with the CSC view of the same entries."""

    def __init__(self, R, levels):
        if R.nnz >= 2**31 - 1:
            raise ValueError(f"X has {R.nnz} ratings; at most 2**31 - 2 are supported.")
        self.shape = R.shape
        self.indptr = R.indptr.astype(np.intc)
        self.indices = R.indices.astype(np.intc)
        self.level = (level_codes(R.data, levels)[0] + 1).astype(np.intc)
        self.entry = np.arange(R.nnz, dtype=np.intc)
        C = sparse.csr_matrix(
            (np.arange(R.nnz, dtype=np.float64) + 1.0, R.indices, R.indptr), shape=R.shape
        ).tocsc()
        self.c_indptr = C.indptr.astype(np.intc)
        self.c_indices = C.indices.astype(np.intc)
        self.c_entry = (C.data - 1.0).astype(np.intc)
        self.nnz = R.nnz


def _check_held_out(R, R_held):
    """Held-out ratings must hold some pairs and none that the training ratings hold."""
    if R_held.nnz == 0:
        raise ValueError(
            "y holds no rating. Pass held-out ratings of the users of X (e.g. the second "
            "matrix of holdout_ratings), or no y."
        )
    ones = [
        sparse.csr_matrix((np.ones(M.nnz), M.indices, M.indptr), shape=M.shape) for M in (R, R_held)
    ]
    both = int(ones[0].multiply(ones[1]).sum())
    if both:
        raise ValueError(
            f"y holds {both} ratings at (user, item) pairs that X also rates; held-out "
            "ratings must be pairs the fit does not see (use holdout_ratings to split)."
        )


def _pattern_csr(X):
    """The pairs of X (stored entries, or non-NaN dense entries) as a sorted CSR matrix."""
    if sparse.issparse(X):
        P = sparse.csr_matrix(X, copy=True)
        P.sort_indices()
        P.sum_duplicates()
        return P
    rows, cols = np.nonzero(~np.isnan(X))
    return sparse.csr_matrix((np.ones(rows.size), (rows, cols)), shape=X.shape)


def infer_levels(R, n_levels):
    """The rating levels of the ratings ``R``: 1..``n_levels``, 1..max for positive integers,
    else the distinct values."""
    values = R.data
    if n_levels is not None:
        levels = np.arange(1.0, n_levels + 1.0)
    elif np.all(values == np.round(values)) and values.min() >= 1:
        top = values.max()
        if top > _MAX_LEVELS:  # before allocating 1..top
            raise ValueError(
                f"X has a rating of {top:g}: as levels 1..max that makes {top:g} ordered "
                f"classes, each with a threshold per user. Ratings are a few levels "
                f"(stars); look for a wrong entry, or map the values to 1..L and pass "
                f"n_levels=L."
            )
        levels = np.arange(1.0, top + 1.0)
    else:
        _check_strays(R)
        levels = np.unique(values)
        _warn_negative_code(values, levels)
    if levels.size < 2:
        raise ValueError(
            f"X has a single rating level ({levels[0]:g}); an ordinal model needs at "
            "least two. Pass n_levels if the scale has more levels than X shows."
        )
    if n_levels is None and levels.size > _MANY_LEVELS:
        warn(
            f"X has {levels.size} rating levels ({levels[0]:g} to {levels[-1]:g}); each "
            f"is an ordered class with one threshold per user, which suits a few levels "
            f"(stars), not continuous values or counts. If these are ratings on a scale "
            f"of that many levels, map them to 1..L and pass n_levels=L to say so; else "
            f"bin them (or use another model).",
            UserWarning,
        )
    return levels


def _warn_negative_code(values, levels):
    """Warn of one negative value below a scale of whole numbers from 1, with no 0 between:
    a code for 'seen, not rated' (the Anime dataset's -1), which as a level would be the
    worst rating."""
    negative = levels[levels < 0]
    rest = levels[levels >= 0]
    if negative.size != 1 or rest.size < 2 or rest.min() < 1:
        return
    if not np.all(rest == np.round(rest)):
        return
    code = float(negative[0])
    count = int(np.sum(values == code))
    warn(
        f"X has {count} rating(s) of {code:g}, below the levels {rest.min():g} to "
        f"{rest.max():g} with no level between: a code for 'not rated'? As a level it is "
        f"the worst rating. If it means no rating, pass np.where(X == {code:g}, np.nan, X) "
        "(or leave those pairs out of a sparse matrix).",
        UserWarning,
    )


def _check_strays(R):
    """Refuse a few fractional ratings among whole-number ones (a typo, an average, a
    half-star where the scale has none): inferred as levels, each would become an ordered
    class of its own between two stars, with a threshold per user."""
    fractional = R.data != np.round(R.data)
    n_stray = int(np.count_nonzero(fractional))
    if n_stray == 0 or n_stray > _STRAY_SHARE * R.data.size:
        return
    first = int(np.flatnonzero(fractional)[0])
    row = int(np.searchsorted(R.indptr, first, side="right") - 1)
    col = int(R.indices[first])
    strays = np.unique(R.data[fractional])
    shown = ", ".join(f"{v:g}" for v in strays[:5]) + (", ..." if strays.size > 5 else "")
    raise ValueError(
        f"X has {n_stray} rating(s) that are not whole numbers ({shown}; the first at row "
        f"{row}, column {col}) among {R.data.size - n_stray} whole-number ratings. As "
        "levels each would be an ordered class of its own between two stars. Correct or "
        "round them (np.round(X)); if the scale really has these levels, map the ratings "
        "to 1..L in order and pass n_levels=L."
    )


# A rating within this relative distance of a level is that level: the same scale read in
# float32 and in float64 (0.1 is 0.10000000149 in float32) must give the same codes.
_LEVEL_RTOL = 2.0**-20


def level_codes(values, levels):
    """The index of each value's level (0-based; ``levels`` sorted) and whether it is one:
    the nearest level, within ``_LEVEL_RTOL`` of it."""
    values = np.asarray(values, dtype=np.float64)
    hi = np.clip(np.searchsorted(levels, values), 0, levels.size - 1)
    lo = np.maximum(hi - 1, 0)
    idx = np.where(np.abs(values - levels[lo]) < np.abs(values - levels[hi]), lo, hi)
    nearest = levels[idx]
    ok = np.abs(values - nearest) <= _LEVEL_RTOL * np.maximum(np.abs(nearest), 1.0)
    return idx, ok


def check_levels(R, levels, name):
    """Level codes must exist for every rating of R."""
    ok = level_codes(R.data, levels)[1]
    if not np.all(ok):
        bad = np.unique(R.data[~ok])[:5]
        lv = (
            f"the integers 1..{levels.size}"
            if np.array_equal(levels, np.arange(1.0, levels.size + 1.0))
            else f"{levels.tolist()}"
        )
        zero = (
            " A dense matrix marks a missing rating with NaN, not 0: pass "
            f"np.where({name} == 0, np.nan, {name}) or a sparse matrix."
            if np.any(bad == 0)
            else ""
        )
        raise ValueError(
            f"{name} has ratings that are not rating levels: {bad.tolist()}. The levels "
            f"are {lv}; ratings must be among them (set n_levels, or map the ratings "
            f"to the levels first).{zero}"
        )
