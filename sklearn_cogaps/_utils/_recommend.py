"""Recommendations from a fitted factorisation of a users x items matrix: the score of
(user, item) pairs, each user's best items not yet seen, and the matrix built from a table
of (user, item, value) triplets with its labels kept."""

import functools
import numbers

import numpy as np
from scipy import sparse
from sklearn.utils.validation import check_is_fitted

from ._habits import peer_arguments
from ._warnings import warn

__all__ = ["RecommenderMixin", "triplets_to_matrix"]

# Users scored at once by recommend: a block of scores is this many rows x n_items.
_BLOCK_USERS = 1024


def triplets_to_matrix(users, items=None, values=None, *, aggregate="sum"):
    """Build the users x items matrix of a table of (user, item, value) triplets.

    The input of hpfrec's ``HPF.fit`` or of a rating library's loader, made into the matrix
    the estimators factorise, with the user and item labels kept: row ``i`` is user
    ``user_labels[i]`` and column ``j`` item ``item_labels[j]``.

    Parameters
    ----------
    users : array-like of shape (n_triplets,)
        The user of each triplet: any labels (numbers, strings).
    items : array-like of shape (n_triplets,)
        The item of each triplet (required: None is refused with the call to write).
    values : array-like of shape (n_triplets,), default=None
        The count or rating of each triplet; None means 1 (an interaction).
    aggregate : {"sum", "last", "error"}, default="sum"
        What a pair given more than once becomes: the sum of its values (counts: plays,
        purchases, UMIs), the last one given (a rating updated later), or an error (ratings
        that should be unique).

    Returns
    -------
    X : scipy.sparse.csr_matrix of shape (n_users, n_items)
        The values at their pairs; other entries are not stored.
    user_labels : ndarray of shape (n_users,)
        The label of each row, sorted.
    item_labels : ndarray of shape (n_items,)
        The label of each column, sorted.

    Examples
    --------
    >>> from sklearn_cogaps import triplets_to_matrix
    >>> X, users, items = triplets_to_matrix(["ann", "bob", "ann"], ["x", "y", "x"], [1, 2, 3])
    >>> X.toarray().tolist(), users.tolist(), items.tolist()
    ([[4.0, 0.0], [0.0, 2.0]], ['ann', 'bob'], ['x', 'y'])
    """
    if aggregate not in ("sum", "last", "error"):
        raise ValueError(f"aggregate must be 'sum', 'last' or 'error'; got {aggregate!r}.")
    if items is None:
        # hpfrec's HPF.fit takes the whole table
        columns = list(getattr(users, "columns", []))
        raise TypeError(
            "triplets_to_matrix takes the triplets' columns, not the table"
            + (f" (columns {columns})" if columns else "")
            + ": triplets_to_matrix(df['UserId'], df['ItemId'], df['Count'])."
        )
    users = np.asarray(users).ravel()
    items = np.asarray(items).ravel()
    if values is None:
        values = np.ones(users.shape[0])
    values = np.asarray(values, dtype=np.float64).ravel()
    if not users.shape == items.shape == values.shape:
        raise ValueError(
            f"users, items and values must have one entry per triplet; got {users.shape[0]}, "
            f"{items.shape[0]} and {values.shape[0]}."
        )
    if not np.all(np.isfinite(values)):
        raise ValueError("values must be finite: drop the triplets without a value.")
    user_labels, rows = np.unique(users, return_inverse=True)
    item_labels, cols = np.unique(items, return_inverse=True)
    shape = (user_labels.shape[0], item_labels.shape[0])
    pair = rows.astype(np.int64) * shape[1] + cols
    if aggregate != "sum":
        # the last triplet of each pair: unique over the reversed order
        _, first_of_reversed, counts = np.unique(pair[::-1], return_index=True, return_counts=True)
        if aggregate == "error" and np.any(counts > 1):
            twice = pair[::-1][first_of_reversed[counts > 1][0]]
            raise ValueError(
                f"{int(np.sum(counts > 1))} (user, item) pairs are given more than once, e.g. "
                f"({user_labels[twice // shape[1]]!r}, {item_labels[twice % shape[1]]!r}); "
                "pass aggregate='sum' to add them or 'last' to keep the last one."
            )
        keep = pair.shape[0] - 1 - first_of_reversed
        rows, cols, values = rows[keep], cols[keep], values[keep]
    X = sparse.csr_matrix((values, (rows, cols)), shape=shape)
    X.sum_duplicates()
    return X, user_labels, item_labels


# The recommender libraries' names of recommend's arguments.
_PEER_RECOMMEND_ARGUMENTS = {
    "N": ("implicit's", "n"),
    "filter_already_liked_items": ("implicit's", "filter_seen"),
    "exclude_seen": ("hpfrec's", "filter_seen"),
    "user_items": ("implicit's", None),
    "userid": ("implicit's", "users"),
    "user": ("hpfrec's", "users"),
}


def _implicit_order(method):
    """Refuse implicit's order ``recommend(userid, user_items, N)`` with what to write."""

    @functools.wraps(method)
    def recommend(self, *args, **kwargs):
        first = args[0] if args else kwargs.get("X")
        if isinstance(first, (numbers.Integral, np.integer)) and not isinstance(first, bool):
            raise TypeError(
                "recommend() takes the users' rows of the matrix first, then n: write "
                "recommend(X[[user]], n=N, users=[user]) for a training user (implicit's "
                "recommend(userid, user_items, N)), or recommend(X_new, n=N) for new users."
            )
        return method(self, *args, **kwargs)

    return recommend


class RecommenderMixin:
    """Scores of (user, item) pairs and top-n recommendations (hpfrec's ``predict`` and
    ``topN``), for an estimator of a users x items matrix.

    The score of a pair is ``loadings_[user] @ components_[:, item]``: the expected count
    of the Poisson factorisations, the latent score of MaxMarginMF (its predicted rating is
    this score cut by the user's thresholds, so both rank a user's items alike). A class
    using it implements ``_recommend_input(X)``, which validates the rows of X and returns
    them with the CSR pattern of their seen items, and ``_new_user_factors(X, given)``, the
    factors of users that the fit has not seen (from the validated rows, or the input as
    given, whose feature names ``transform`` checks).
    """

    def score_pairs(self, users, items):
        """Score (user, item) pairs of the training users (hpfrec's ``predict``).

        Parameters
        ----------
        users : array-like of int of shape (n_pairs,)
            Training users: row indices of the fitted matrix, not hpfrec's user IDs. With
            the labels of :func:`triplets_to_matrix` (sorted), the rows of IDs ``ids`` are
            ``np.searchsorted(user_labels, ids)``.
        items : array-like of int of shape (n_pairs,)
            Items: column indices of the fitted matrix (``np.searchsorted(item_labels,
            ids)``).

        Returns
        -------
        scores : ndarray of shape (n_pairs,)
            ``loadings_[user] @ components_[:, item]`` for each pair.
        """
        check_is_fitted(self)
        loadings = self._training_loadings(
            "fit the users' rows, U = transform(X_users), and score a pair as "
            "U[i] @ components_[:, item]."
        )
        users = self._indices(users, loadings.shape[0], "users", "training users")
        items = self._indices(items, self.components_.shape[1], "items", "items")
        if users.shape != items.shape:
            raise ValueError(
                f"users and items must pair up: got {users.shape[0]} users and "
                f"{items.shape[0]} items."
            )
        U = np.asarray(loadings, dtype=np.float64)[users]
        V = np.asarray(self.components_, dtype=np.float64).T[items]
        return np.einsum("pk,pk->p", U, V)

    @peer_arguments(
        _PEER_RECOMMEND_ARGUMENTS, example="recommend(X[rows], n=..., users=rows, filter_seen=...)"
    )
    @_implicit_order
    def recommend(self, X, n=10, *, users=None, filter_seen=True):
        """The best ``n`` items of each user, by score (hpfrec's ``topN``).

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_users, n_items)
            The users' rows of the users x items matrix: their stored (non-zero, or for
            ratings non-NaN) entries are the items they have seen.
        n : int, default=10
            Number of items per user.
        users : array-like of int of shape (n_users,), default=None
            The training users the rows of X are (their fitted factors are used). None: the
            rows are new users, whose factors are fitted from X first (hpfrec's
            ``topN_cold``): ``transform`` for the Poisson factorisations, the chain of
            ``predict_ratings(..., observed=X)`` for MaxMarginMF.
        filter_seen : bool, default=True
            Leave out the items each user has seen.

        Returns
        -------
        items : ndarray of shape (n_users, n)
            Item indices, best first; -1 where a user has fewer than ``n`` items left.
            ``feature_names_in_[items]`` names them when the fit had feature names.
        scores : ndarray of shape (n_users, n)
            Their scores (NaN at -1).
        """
        check_is_fitted(self)
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
            hint = ""
            if sparse.issparse(n) or np.ndim(n) > 0:
                hint = (
                    " The second argument is the number of items; the users' rows come "
                    "first: recommend(X[rows], n=N, users=rows)."
                )
            raise ValueError(f"n must be a positive integer; got {n!r}.{hint}")
        given, (X, seen) = X, self._recommend_input(X)
        if users is None:
            U = np.asarray(self._new_user_factors(X, given), dtype=np.float64)
        else:
            U = self._loadings_of(users, X.shape[0])
        V = np.asarray(self.components_, dtype=np.float64)
        # a user with zero loadings has every score 0: the model ranks no item for it (a
        # WeightedBackgroundPMF row without counts has a background of 0)
        unranked = ~np.any(U != 0, axis=1)
        if unranked.any():
            first = np.flatnonzero(unranked)[:5].tolist()
            more = ", ..." if unranked.sum() > 5 else ""
            warn(
                f"{int(unranked.sum())} user(s) (rows {first}{more}) have zero loadings: "
                f"{type(self).__name__} expects no count of any item for them and ranks "
                "none; their items are -1 and their scores NaN. A row without counts has no "
                "ranking under this model.",
                UserWarning,
            )
        n_items = V.shape[1]
        width = min(int(n), n_items)
        items = np.full((U.shape[0], int(n)), -1, dtype=np.int64)
        scores = np.full((U.shape[0], int(n)), np.nan)
        for start in range(0, U.shape[0], _BLOCK_USERS):
            stop = min(start + _BLOCK_USERS, U.shape[0])
            S = U[start:stop] @ V
            if filter_seen:
                block = seen[start:stop]
                S[
                    np.repeat(np.arange(stop - start), np.diff(block.indptr)), block.indices
                ] = -np.inf
            best = np.argpartition(-S, width - 1, axis=1)[:, :width]
            rows = np.arange(stop - start)[:, None]
            # best first; equal scores by item index, so the order is reproducible
            order = np.lexsort((best, -S[rows, best]), axis=1)
            best = best[rows, order]
            top = S[rows, best]
            found = np.isfinite(top) & ~unranked[start:stop, None]
            items[start:stop, :width] = np.where(found, best, -1)
            scores[start:stop, :width] = np.where(found, top, np.nan)
        return items, scores

    def _loadings_of(self, users, n_rows):
        """The fitted loadings (float64) of the training rows ``users``, one per row of X."""
        loadings = self._training_loadings(
            "leave users=None, and the rows of X are fitted as new rows."
        )
        users = self._indices(users, loadings.shape[0], "users", "training users")
        if users.shape[0] != n_rows:
            raise ValueError(
                f"users must name the training user of each row of X: got {users.shape[0]} "
                f"users for {n_rows} rows."
            )
        return np.asarray(loadings, dtype=np.float64)[users]

    def _training_loadings(self, advice):
        """``loadings_``, or an error that says what to do when the model keeps no training
        rows (a HierarchicalPMF updated by ``partial_fit``)."""
        loadings = getattr(self, "loadings_", None)
        if loadings is None:
            raise ValueError(
                f"This {type(self).__name__} was last updated by partial_fit, which keeps no "
                f"training rows (no loadings_): {advice}"
            )
        return loadings

    @staticmethod
    def _indices(values, size, name, what):
        idx = np.asarray(values)
        if idx.ndim == 0:
            idx = idx.reshape(1)
        if idx.ndim == 1 and idx.size == 0:
            return np.empty(0, dtype=np.int64)  # no pairs (``[]`` is read as float64)
        if idx.ndim != 1 or not np.issubdtype(idx.dtype, np.integer):
            raise ValueError(
                f"{name} must be integer indices of the {what} (0 to {size - 1}); got "
                f"{np.asarray(values).dtype} of shape {np.shape(values)}. Map labels to indices "
                "with the labels triplets_to_matrix returns, e.g. np.searchsorted(labels, x)."
            )
        if idx.size and (idx.min() < 0 or idx.max() >= size):
            raise ValueError(f"{name} must be indices of the {what}, 0 to {size - 1}.")
        return idx.astype(np.int64)
