"""Recommendations from a fitted factorisation of a users x items matrix: the score of
(user, item) pairs, each user's best items not yet seen, and the matrix built from a table
of (user, item, value) triplets with its labels kept."""

import functools
import numbers

import numpy as np
from scipy import sparse
from sklearn.utils.validation import check_is_fitted

from ._habits import peer_arguments
from ._validation import as_float_array, axis_labels, is_anndata
from ._warnings import warn

__all__ = ["IMPLICIT_ATTRIBUTES", "RecommenderMixin", "label_indices", "triplets_to_matrix"]

# Users scored at once by recommend: a block of scores is this many rows x n_items.
_BLOCK_USERS = 1024


def _missing(label):
    """Whether a label is a missing value: None, a float NaN, pandas' NA or NaT."""
    if label is None:
        return True
    if isinstance(label, (float, np.floating)):
        return label != label
    return type(label).__name__ in ("NAType", "NaTType")


def _labels(values, name):
    """The labels of the triplets' users or items as an array, missing ones refused: a NaN
    id once became a user or an item like the others (the most recommended item of a table
    with 5% of its item ids lost in a join)."""
    labels = np.asarray(values).ravel()
    one = name[:-1] if name.endswith("s") else name
    given = None
    if labels.dtype.kind == "f":
        missing = np.isnan(labels)
    elif labels.dtype.kind == "O" or (labels.dtype.kind in "US"
                                      and not isinstance(values, np.ndarray)):  # fmt: skip
        # a list of strings and NaN (or numbers) becomes strings, 'nan' (or '1') among them:
        # read the values given
        given = labels if labels.dtype.kind == "O" else np.asarray(values, dtype=object).ravel()
        missing = np.fromiter(map(_missing, given), dtype=bool, count=given.size)
    else:
        missing = np.zeros(labels.size, dtype=bool)
    if missing.any():
        raise ValueError(
            f"{int(missing.sum())} of the {labels.size} {one} ids are missing (NaN or None), "
            f"the first at position {int(np.argmax(missing))}: a missing id is no {one}. "
            "Drop those triplets first, e.g. df.dropna(subset=[...])."
        )
    if given is not None:
        # 1 and "1" would be one user once numpy made them strings
        kinds = sorted({"str" if isinstance(label, str) else type(label).__name__
                        for label in given})  # fmt: skip
        if len(kinds) > 1 and "str" in kinds:
            raise ValueError(
                f"The {one} ids mix {' and '.join(kinds)} values, which do not sort together: "
                "make them one type, e.g. df[...].astype(str)."
            )
    return labels


def _like_stars(values):
    """Whether values look like star ratings: whole numbers from 1 to 10, at least three
    distinct ones."""
    if values.size == 0 or not np.all(values == np.round(values)):
        return False
    levels = np.unique(values)
    return bool(levels.size >= 3 and levels[0] >= 1 and levels[-1] <= 10)


def _ratings_summed(values, repeated):
    """Whether summing repeated pairs turned what look like star ratings into a longer
    scale."""
    return repeated and _like_stars(values)


def label_indices(labels, ids, *, name="ids"):
    """The positions of ``ids`` among sorted ``labels``, unknown ids refused.

    The rows or columns of a matrix of :func:`triplets_to_matrix` that given users or items
    are.

    Parameters
    ----------
    labels : array-like of shape (n_labels,)
        The sorted labels :func:`triplets_to_matrix` returned (``user_labels`` or
        ``item_labels``).
    ids : array-like of shape (n_ids,)
        Labels to find.
    name : str, default="ids"
        What the ids are, for the error message.

    Returns
    -------
    indices : ndarray of int64 of shape (n_ids,)
        ``labels[indices] == ids``.

    Raises
    ------
    ValueError
        If an id is not among the labels (a user or item the fit never saw), naming it:
        ``np.searchsorted`` would quietly return a neighbour's position.

    Examples
    --------
    >>> from sklearn_cogaps import label_indices
    >>> label_indices(["ann", "bob", "cy"], ["cy", "ann"]).tolist()
    [2, 0]
    """
    labels = np.asarray(labels).ravel()
    ids = _labels(ids, name)
    if labels.size and np.any(labels[1:] < labels[:-1]):
        raise ValueError(
            "labels must be sorted, as triplets_to_matrix returns them; got unsorted labels."
        )
    if labels.size and np.any(labels[1:] == labels[:-1]):
        # searchsorted finds the first of two equal labels: the second's row stays empty
        twice = labels[1:][labels[1:] == labels[:-1]][:1].tolist()[0]
        raise ValueError(
            f"labels must be distinct, as triplets_to_matrix returns them; {twice!r} is "
            "there twice. Pass np.unique(labels)."
        )
    if labels.size == 0:
        found, unknown = np.zeros(ids.size, dtype=np.int64), np.ones(ids.size, dtype=bool)
    else:
        found = np.minimum(np.searchsorted(labels, ids), labels.size - 1)
        unknown = np.asarray(labels[found] != ids, dtype=bool)
    if unknown.any():
        first = ids[unknown][:3].tolist()
        # a column the model has, without a training entry, is rated or scored by it
        for_items = (
            "build the training matrix with every item's label, "
            "triplets_to_matrix(..., item_labels=np.unique(all_items)), so that the fit has "
            "a column for each"
        )
        for_users = (
            "score new users as new rows: recommend(X_new, n), predict_ratings(pairs, "
            "observed=X_new) (MaxMarginMF) or transform(X_new) (the Poisson factorisations)"
        )
        if name == "items":
            other = f"or {for_items}"
        elif name == "users":
            other = f"or {for_users}"
        else:
            other = f"or, for users, {for_users}; for items, {for_items}"
        raise ValueError(
            f"{int(unknown.sum())} of the {ids.size} {name} are not among the labels (e.g. "
            f"{first}): the fit never saw them. Keep the known ones, known = np.isin(ids, "
            f"labels), {other}."
        )
    return found.astype(np.int64)


def triplets_to_matrix(
    users, items=None, values=None, *, aggregate=None, user_labels=None, item_labels=None
):
    """Build the users x items matrix of a table of (user, item, value) triplets.

    The input of hpfrec's ``HPF.fit`` or of a rating library's loader, made into the matrix
    the estimators factorise, with the user and item labels kept: row ``i`` is user
    ``user_labels[i]`` and column ``j`` item ``item_labels[j]``.

    Parameters
    ----------
    users : array-like of shape (n_triplets,)
        The user of each triplet: any labels (numbers, strings); missing ones (NaN, None)
        are refused.
    items : array-like of shape (n_triplets,), default=None
        The item of each triplet. Required: None (a table given alone, as hpfrec's
        ``fit`` takes it) is refused with the call to write.
    values : array-like of shape (n_triplets,), default=None
        The count or rating of each triplet; None means 1 (an interaction). Values of 0 are
        not stored: they are no interaction.
    aggregate : {"sum", "last", "error"} or None, default=None
        What a pair given more than once becomes: the sum of its values (counts: plays,
        purchases, UMIs), the last one given (a rating updated later), or an error (ratings
        that should be unique). None sums, and warns when the values summed look like star
        ratings (whole numbers from 1 to 10), which a sum would take off their scale.
    user_labels, item_labels : array-like, default=None
        The labels of an earlier call (a training matrix), sorted as it returns them: the
        rows or columns are then these, in this order, and a triplet of another user or
        item is refused, so that a held-out matrix lines up with the fitted one (unsorted
        labels are refused). None: the sorted labels of the triplets.

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
    if aggregate not in (None, "sum", "last", "error"):
        raise ValueError(f"aggregate must be 'sum', 'last' or 'error'; got {aggregate!r}.")
    if items is None:
        # hpfrec's HPF.fit takes the whole table
        columns = list(getattr(users, "columns", []))
        names = (columns + ["UserId", "ItemId", "Count"])[:3] if len(columns) >= 3 else None
        written = ", ".join(f"df[{c!r}]" for c in names or ["UserId", "ItemId", "Count"])
        raise TypeError(
            "triplets_to_matrix takes the triplets' columns, not the table"
            + (f" (columns {columns})" if columns else "")
            + f": triplets_to_matrix({written})."
        )
    users = _labels(users, "users")
    items = _labels(items, "items")
    if values is None:
        values = np.ones(users.shape[0])
    values = as_float_array(values, "values").ravel()
    if not users.shape == items.shape == values.shape:
        raise ValueError(
            f"users, items and values must have one entry per triplet; got {users.shape[0]}, "
            f"{items.shape[0]} and {values.shape[0]}."
        )
    if not np.all(np.isfinite(values)):
        raise ValueError("values must be finite: drop the triplets without a value.")
    if user_labels is None:
        user_labels, rows = np.unique(users, return_inverse=True)
    else:
        user_labels = np.asarray(user_labels).ravel()
        rows = label_indices(user_labels, users, name="users")
    if item_labels is None:
        item_labels, cols = np.unique(items, return_inverse=True)
    else:
        item_labels = np.asarray(item_labels).ravel()
        cols = label_indices(item_labels, items, name="items")
    shape = (user_labels.shape[0], item_labels.shape[0])
    pair = rows.astype(np.int64) * shape[1] + cols
    if aggregate in ("last", "error"):
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
    if aggregate is None and _ratings_summed(values, X.nnz < pair.size):
        warn(
            f"{pair.size - X.nnz} triplet(s) repeat a (user, item) pair and their values, whole "
            f"numbers from {values.min():g} to {values.max():g} like star ratings, were added "
            f"(the largest is now {X.data.max():g}). For ratings pass aggregate='last' (a "
            "rating updated later) or 'error'; for counts pass aggregate='sum', which adds "
            "them without this warning.",
            UserWarning,
        )
    n_zeros = int(np.sum(X.data == 0))
    rated = X.data[X.data != 0]
    if n_zeros and aggregate != "sum" and _like_stars(rated):
        # a 0 is no interaction, but beside whole numbers up to 10 it may be a rating
        warn(
            f"{n_zeros} (user, item) pair(s) have a value of 0, which is not stored (no "
            f"interaction), beside whole numbers from {rated.min():g} to {rated.max():g} "
            "like star ratings. If 0 is a level of the scale (0 to 10 stars), shift the "
            "ratings to 1..L first: triplets_to_matrix(users, items, np.asarray(values) + 1); "
            "for counts pass aggregate='sum', which drops them without this warning.",
            UserWarning,
        )
    X.eliminate_zeros()
    return X, user_labels, item_labels


#: implicit's names of the factors and of what they give, for every recommender here: the
#: ``_peer_methods`` of the estimators include them.
IMPLICIT_ATTRIBUTES = {
    "user_factors": ("implicit", "loadings_ (n_users x K)"),
    "item_factors": ("implicit", "components_.T (n_items x K)"),
    "similar_items": (
        "implicit",
        "sklearn.metrics.pairwise.cosine_similarity(model.components_.T) for the items' "
        "similarities by their factors",
    ),
    "similar_users": (
        "implicit",
        "sklearn.metrics.pairwise.cosine_similarity(model.loadings_) for the users'",
    ),
}


# The recommender libraries' names of recommend's arguments.
_PEER_RECOMMEND_ARGUMENTS = {
    "N": ("implicit's", "n"),
    "filter_already_liked_items": ("implicit's", "filter_seen"),
    "exclude_seen": ("hpfrec's", "filter_seen"),
    "user_items": ("implicit's", None),
    "userid": ("implicit's", "users"),
    "user": ("hpfrec's", "users"),
    "items_pool": ("hpfrec's", "items"),
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


def _positions(labels):
    """Whether row labels are positions: 0, 1, ... in order (a default index, AnnData's
    own names)."""
    return all(str(v) == str(i) for i, v in enumerate(labels))


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

    @peer_arguments(
        {"user": ("hpfrec's", "users"), "item": ("hpfrec's", "items")},
        example="score_pairs(users=rows, items=cols)",
    )
    def score_pairs(self, users, items):
        """Score (user, item) pairs of the training users (hpfrec's ``predict``).

        Parameters
        ----------
        users : array-like of int of shape (n_pairs,)
            Training users: row indices of the fitted matrix, not hpfrec's user IDs. With
            the labels of :func:`triplets_to_matrix`, the rows of IDs ``ids`` are
            ``label_indices(user_labels, ids)``, which refuses IDs the fit never saw.
        items : array-like of int of shape (n_pairs,)
            Items: column indices of the fitted matrix (``label_indices(item_labels,
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

    def _unranked_reason(self):
        """Why :meth:`recommend` ranks no item for a user whose factors are all 0."""
        return (
            f"have zero loadings: {type(self).__name__} expects no count of any item for "
            "them and ranks none (a row without counts has no ranking under this model)"
        )

    @peer_arguments(
        _PEER_RECOMMEND_ARGUMENTS,
        example="recommend(X[rows], n=..., users=rows, filter_seen=..., items=...)",
    )
    @_implicit_order
    def recommend(self, X, n=10, *, users=None, filter_seen=True, items=None):
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
        items : array-like of int, default=None
            Rank only these items (column indices; hpfrec's ``items_pool``, implicit's
            ``items``). None: every item.

        Returns
        -------
        items : ndarray of shape (n_users, n)
            Item indices, best first; -1 where a user has fewer than ``n`` items left
            (or none ranked). -1 is no item: Python would read it as the last one, so name
            them only where found, ``np.where(items >= 0, feature_names_in_[items], None)``
            (or ``item_labels`` of :func:`triplets_to_matrix`).
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
            U = self._loadings_of(users, X.shape[0], given)
        V = np.asarray(self.components_, dtype=np.float64)
        n_items = V.shape[1]
        outside = None
        if items is not None:
            pool = np.unique(self._indices(items, n_items, "items", "items"))
            if pool.size == 0:
                raise ValueError("items must name at least one item to rank (or be None).")
            outside = np.ones(n_items, dtype=bool)
            outside[pool] = False
            n_items = pool.size
        # a user with zero loadings has every score 0: the model ranks no item for it (a
        # WeightedBackgroundPMF row without counts has a background of 0)
        unranked = ~np.any(U != 0, axis=1)
        if unranked.any():
            first = np.flatnonzero(unranked)[:5].tolist()
            more = ", ..." if unranked.sum() > 5 else ""
            warn(
                f"{int(unranked.sum())} user(s) (rows {first}{more}) "
                f"{self._unranked_reason()}; their items are -1 and their scores NaN.",
                UserWarning,
            )
        width = min(int(n), n_items)
        ranked = np.full((U.shape[0], int(n)), -1, dtype=np.int64)
        scores = np.full((U.shape[0], int(n)), np.nan)
        for start in range(0, U.shape[0], _BLOCK_USERS):
            stop = min(start + _BLOCK_USERS, U.shape[0])
            S = U[start:stop] @ V
            if outside is not None:
                S[:, outside] = -np.inf
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
            ranked[start:stop, :width] = np.where(found, best, -1)
            scores[start:stop, :width] = np.where(found, top, np.nan)
        return ranked, scores

    def _loadings_of(self, users, n_rows, given=None):
        """The fitted loadings (float64) of the training rows ``users``, one per row of X
        (``given``: X as given, whose row labels are checked against the training rows')."""
        loadings = self._training_loadings(
            "leave users=None, and the rows of X are fitted as new rows."
        )
        users = self._indices(users, loadings.shape[0], "users", "training users")
        if users.shape[0] != n_rows:
            raise ValueError(
                f"users must name the training user of each row of X: got {users.shape[0]} "
                f"users for {n_rows} rows."
            )
        self._check_row_labels(given, users)
        return np.asarray(loadings, dtype=np.float64)[users]

    def _keep_row_labels(self, X):
        """Keep the row labels of the training data (a DataFrame's index, an AnnData's
        obs_names) unless they are positions, for :meth:`_check_row_labels`."""
        labels = axis_labels(X, "row")
        if labels is not None and not _positions(labels):
            self._row_labels = np.asarray(labels, dtype=object)
        else:
            self.__dict__.pop("_row_labels", None)

    def _check_row_labels(self, given, users=None):
        """Refuse rows of X labelled as other training rows than ``users`` (None: all of
        them, in order). ``users`` are positions: hpfrec's habit of user IDs, or a
        DataFrame of the training data's index selected by label, would score each row with
        another user's factors. Labels shared with no training row mean positions."""
        trained = getattr(self, "_row_labels", None)
        labels = axis_labels(given, "row")
        if trained is None or labels is None:
            return
        expected = trained if users is None else trained[users]
        got, want = [str(v) for v in labels], [str(v) for v in expected]
        if len(got) != len(want) or got == want:
            return
        known = {str(v) for v in trained}
        if not set(got) & known:
            return  # labels of their own: positions
        first = next(i for i, (a, b) in enumerate(zip(got, want)) if a != b)
        anndata = is_anndata(given)
        where = "obs_names" if anndata else "index"
        if _positions(labels):
            # a default index (0, 1, ...) is positions, as at fit, unless those numbers are
            # training labels at other places (a shuffled 0..n-1 index): then X may be the
            # training rows in order (reset_index) or rows taken by label (sort_index, .loc),
            # and neither can be told from the other
            if users is not None and got != [str(int(u)) for u in users]:
                return  # positions beside users that are not these numbers
            if not set(got) <= known:
                return
            raise ValueError(
                f"The rows of X are labelled 0, 1, ..., which are also labels of the "
                f"training rows, at other places (training row {first} is labelled "
                f"{want[first]!r}): they may be positions or those labels. If X's rows are "
                f"the training rows {'named by users ' if users is not None else ''}in the "
                "training order, pass X.to_numpy(); if they are labelled by the training "
                f"data's {where}, name their training rows, "
                f"users=training_X.{where}.get_indexer(X.{where})."
            )
        if users is None:
            select = "X[training_X.obs_names]" if anndata else "X.loc[training_X.index]"
            raise ValueError(
                f"The rows of X are the training rows in another order: row {first} is "
                f"labelled {got[first]!r}, training row {first} {want[first]!r}. Give them in "
                f"the training order ({select}), or name each row's training "
                f"row with users=training_X.{where}.get_indexer(X.{where})."
            )
        raise ValueError(
            f"users are positions of the training rows, not labels: row {first} of X is "
            f"labelled {got[first]!r}, but users[{first}] = {int(users[first])} is the "
            f"training row labelled {want[first]!r}. Pass the positions of X's rows, "
            f"users=training_X.{where}.get_indexer(X.{where}) (label_indices(labels, ids) "
            "for the labels of triplets_to_matrix)."
        )

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
                "with the labels triplets_to_matrix returns: label_indices(labels, x)."
            )
        if idx.size and (idx.min() < 0 or idx.max() >= size):
            raise ValueError(f"{name} must be indices of the {what}, 0 to {size - 1}.")
        return idx.astype(np.int64)
