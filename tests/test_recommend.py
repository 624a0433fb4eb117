"""Recommendations: scores of (user, item) pairs, each user's best unseen items, and the
matrix of a table of (user, item, value) triplets (hpfrec's predict, topN and its input)."""

import warnings

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal
from scipy import sparse
from sklearn.exceptions import ConvergenceWarning

from sklearn_cogaps import (
    HierarchicalPMF,
    MaxMarginMF,
    WeightedBackgroundPMF,
    triplets_to_matrix,
)

from _shared import RATINGS


def _interactions(seed=0):
    rng = np.random.default_rng(seed)
    rates = rng.gamma(0.5, 1.0, (50, 3)) @ rng.gamma(0.5, 1.0, (3, 30))
    return sparse.csr_matrix(rng.poisson(rates).astype(np.float64))


def _brute_force(scores, seen, n):
    """The n best unseen items of each row by a full sort (-1 and NaN when too few)."""
    items = np.full((scores.shape[0], n), -1)
    best = np.full((scores.shape[0], n), np.nan)
    for i, row in enumerate(scores):
        unseen = np.setdiff1d(np.arange(row.size), seen[i].indices)
        order = unseen[np.lexsort((unseen, -row[unseen]))][:n]
        items[i, : order.size] = order
        best[i, : order.size] = row[order]
    return items, best


@pytest.fixture(scope="module", params=[HierarchicalPMF, WeightedBackgroundPMF])
def fitted(request):
    X = _interactions()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return request.param(3, random_state=0).fit(X), X


def test_scores_of_pairs_are_the_expected_counts(fitted):
    est, X = fitted
    users, items = np.array([0, 4, 4, 49]), np.array([3, 0, 29, 7])
    mean = est.loadings_ @ est.components_
    assert_allclose(est.score_pairs(users, items), mean[users, items], rtol=1e-12)
    with pytest.raises(ValueError, match="integer indices of the training users"):
        est.score_pairs(["u1"], [0])
    with pytest.raises(ValueError, match="indices of the items, 0 to 29"):
        est.score_pairs([0], [30])
    with pytest.raises(ValueError, match="must pair up"):
        est.score_pairs([0, 1], [0])
    assert est.score_pairs([], []).shape == (0,)  # no pairs: no scores


@pytest.mark.parametrize("n", [1, 5, 30, 40])
def test_recommend_gives_the_best_unseen_items_of_training_users(fitted, n):
    est, X = fitted
    users = np.array([7, 0, 31, 7])
    items, scores = est.recommend(X[users], n=n, users=users)
    expected_items, expected = _brute_force((est.loadings_ @ est.components_)[users], X[users], n)
    assert items.shape == scores.shape == (4, n)
    assert_array_equal(items, expected_items)
    assert_allclose(scores, expected, rtol=1e-12)
    # every seen item stays out; without the filter, the best of all items
    assert not any(np.isin(items[i], X[u].indices).any() for i, u in enumerate(users))
    every, _ = est.recommend(X[users], n=n, users=users, filter_seen=False)
    assert_array_equal(every, _brute_force((est.loadings_ @ est.components_)[users],
                                           sparse.csr_matrix(X[users].shape), n)[0])  # fmt: skip


def test_recommend_fits_new_users_from_their_rows(fitted):
    est, X = fitted
    new = _interactions(seed=5)[:6]
    items, scores = est.recommend(new, n=4)
    expected_items, expected = _brute_force(est.transform(new) @ est.components_, new, 4)
    assert_array_equal(items, expected_items)
    assert_allclose(scores, expected, rtol=1e-12)


@pytest.mark.parametrize("model", [HierarchicalPMF, WeightedBackgroundPMF])
def test_recommend_to_an_anndata_keeps_its_feature_names(model):
    """New users given as an AnnData are fitted from it as given: transform checks its
    var_names against the fit's, without a warning that they were lost."""
    ad = pytest.importorskip("anndata")
    adata = ad.AnnData(_interactions())
    adata.var_names = [f"item{j}" for j in range(30)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        est = model(3, max_iter=5, random_state=0).fit(adata)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        items, _ = est.recommend(adata[:4], n=3)
    assert_array_equal(items, est.recommend(adata[:4].X, n=3)[0])


def test_recommend_ranks_only_the_items_of_a_pool(fitted):
    """hpfrec's items_pool (implicit's items): the best unseen items among the pool's."""
    est, X = fitted
    users = np.array([7, 0, 31])
    pool = np.array([29, 3, 3, 11, 0, 17, 8, 21])
    scores = (est.loadings_ @ est.components_)[users]
    outside = np.setdiff1d(np.arange(30), pool)
    # the items outside the pool as if seen: the brute force leaves them out
    seen = sparse.csr_matrix(X[users].toarray() + np.isin(np.arange(30), outside))
    for n in (1, 3, 8):
        items, best = est.recommend(X[users], n=n, users=users, items=pool)
        expected_items, expected = _brute_force(scores, seen, n)
        assert_array_equal(items, expected_items)
        assert_allclose(best, expected, rtol=1e-12)
        assert np.isin(items[items >= 0], pool).all()
    every, _ = est.recommend(X[users], n=3, users=users, filter_seen=False, items=pool)
    pool_only = sparse.csr_matrix(np.broadcast_to(np.isin(np.arange(30), outside), (3, 30)))
    assert_array_equal(every, _brute_force(scores, pool_only, 3)[0])
    with pytest.raises(ValueError, match="at least one item"):
        est.recommend(X[users], n=3, users=users, items=[])
    with pytest.raises(ValueError, match="indices of the items, 0 to 29"):
        est.recommend(X[users], n=3, users=users, items=[30])
    with pytest.raises(TypeError, match="items=, not items_pool="):
        est.recommend(X[users], n=3, users=users, items_pool=pool)


def test_recommend_refuses_what_it_cannot_read(fitted):
    est, X = fitted
    with pytest.raises(ValueError, match="n must be a positive integer"):
        est.recommend(X[:2], n=0)
    with pytest.raises(ValueError, match="training user of each row"):
        est.recommend(X[:2], users=[0])


def test_implicit_and_hpfrec_calls_of_recommend_say_what_to_write(fitted):
    est, X = fitted
    with pytest.raises(TypeError, match=r"users' rows of the matrix first.*users=\[user\]"):
        est.recommend(0, X[0])  # implicit's recommend(userid, user_items)
    with pytest.raises(TypeError, match="takes n=, not N="):
        est.recommend(X[:2], N=3, users=[0, 1])
    with pytest.raises(TypeError, match="filter_seen=, not filter_already_liked_items="):
        est.recommend(X[:2], 3, users=[0, 1], filter_already_liked_items=True)
    with pytest.raises(TypeError, match="filter_seen=, not exclude_seen="):
        est.recommend(X[:2], 3, users=[0, 1], exclude_seen=True)
    with pytest.raises(ValueError, match="number of items; the users' rows come first"):
        est.recommend(X[:2], X[:2])


def test_max_margin_mf_rates_chosen_training_users():
    """surprise's predict(uid, iid) for some training users: their rows with users=."""
    est = MaxMarginMF(2, max_iter=20, burn_in=5, random_state=0).fit(RATINGS)
    all_users = est.predict_ratings(RATINGS)
    some = est.predict_ratings(RATINGS[[4, 1]], users=[4, 1])
    assert_array_equal(some, all_users[[4, 1]])
    with pytest.raises(ValueError, match=r"Pass users=rows to rate some of them"):
        est.predict_ratings(RATINGS[:2])
    with pytest.raises(ValueError, match="pass one of them"):
        est.predict_ratings(RATINGS[:2], observed=RATINGS[:2], users=[0, 1])
    with pytest.raises(AttributeError, match=r"predict_ratings\(X\[rows\], users=rows\)"):
        _ = est.predict


def test_peers_method_names_say_what_to_call(fitted):
    est, _ = fitted
    with pytest.raises(AttributeError, match=r"'topN' \(hpfrec's\); write recommend"):
        _ = est.topN
    with pytest.raises(AttributeError, match="write score_pairs"):
        _ = est.predict
    assert not hasattr(est, "predict")  # scikit-learn reads it as a transformer still


def test_max_margin_mf_recommends_by_the_score_its_ratings_cut():
    est = MaxMarginMF(2, max_iter=20, burn_in=5, random_state=0).fit(RATINGS)
    R = sparse.csr_matrix(np.nan_to_num(RATINGS))  # the observed ratings' pattern
    users = np.arange(5)
    items, scores = est.recommend(RATINGS[:5], n=3, users=users)
    expected_items, expected = _brute_force((est.loadings_ @ est.components_)[users], R[:5], 3)
    assert_array_equal(items, expected_items)
    assert_allclose(scores, expected, rtol=1e-12)
    # a user's predicted ratings do not decrease down its list
    pairs = np.full(RATINGS.shape, np.nan)
    for i in users:
        pairs[i, items[i]] = 1.0
    ratings = est.predict_ratings(pairs)
    for i in users:
        assert np.all(np.diff(ratings[i, items[i]]) <= 0)
    new_items, _ = est.recommend(RATINGS[:3], n=3)  # as new users, each from its own chain
    assert new_items.shape == (3, 3) and np.all(new_items >= 0)
    # a new user without a rating has the Gaussian prior's factors, of mean 0: the mean of
    # the chain's draws ranked items by noise (the worst rated first on MovieLens with one
    # seed, the best with another); it ranks none, and says what to do
    cold = RATINGS[:3].copy()
    cold[1] = np.nan
    with pytest.warns(UserWarning, match=r"rows \[1\]\) have no rating: under "
                      r"prior='gaussian' .* ranks none.*prior='ibp'"):  # fmt: skip
        cold_items, cold_scores = est.recommend(cold, n=3)
    assert_array_equal(cold_items[1], -1)
    assert np.isnan(cold_scores[1]).all()
    assert_array_equal(cold_items[[0, 2]], new_items[[0, 2]])
    # under the IBP a new user takes the training users' features by their frequency
    ibp = MaxMarginMF(2, prior="ibp", max_iter=20, burn_in=5, random_state=0).fit(RATINGS)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        assert np.all(ibp.recommend(cold, n=3)[0] >= 0)
    with pytest.raises(AttributeError, match="predict_ratings"):
        _ = est.predict
    # 0 for "not rated" in a dense matrix would mark every item seen: refused, for training
    # users as for new ones
    zeros = np.nan_to_num(RATINGS[:2])
    for users in (np.arange(2), None):
        with pytest.raises(ValueError, match=r"not rating levels: \[0\.0\].*NaN, not 0"):
            with pytest.warns(UserWarning, match="zeros"):
                est.recommend(zeros, n=3, users=users)


def test_triplets_make_the_matrix_with_its_labels():
    users = ["u2", "u1", "u2", "u3", "u2"]
    items = [10, 20, 10, 30, 20]
    X, user_labels, item_labels = triplets_to_matrix(users, items, [1, 2, 3, 4, 5], aggregate="sum")
    assert user_labels.tolist() == ["u1", "u2", "u3"] and item_labels.tolist() == [10, 20, 30]
    assert_array_equal(X.toarray(), [[0, 2, 0], [4, 5, 0], [0, 0, 4]])
    last, _, _ = triplets_to_matrix(users, items, [1, 2, 3, 4, 5], aggregate="last")
    assert last[1, 0] == 3
    with pytest.raises(ValueError, match=r"1 \(user, item\) pairs are given more than once"):
        triplets_to_matrix(users, items, [1, 2, 3, 4, 5], aggregate="error")
    ones, _, _ = triplets_to_matrix(users, items)
    assert ones[1, 0] == 2  # an interaction counted twice
    with pytest.raises(ValueError, match="one entry per triplet"):
        triplets_to_matrix(users, items[:-1])
    pd = pytest.importorskip("pandas")
    table = pd.DataFrame({"UserId": users, "ItemId": items, "Count": [1, 2, 3, 4, 5]})
    with pytest.raises(ValueError, match="triplets_to_matrix"):
        HierarchicalPMF(2).fit(table)
    X2, _, _ = triplets_to_matrix(table["UserId"], table["ItemId"], table["Count"], aggregate="sum")
    assert_array_equal(X2.toarray(), X.toarray())
    # hpfrec's habit: the whole table
    with pytest.raises(TypeError, match=r"columns \['UserId', 'ItemId', 'Count'\].*df\['ItemId'\]"):
        triplets_to_matrix(table)


def test_triplets_with_missing_or_unsortable_ids_are_refused():
    """A NaN id was a user or an item like the others (the most recommended item of a table
    that lost 5% of its item ids in a join); mixed types failed inside numpy's sort."""
    pd = pytest.importorskip("pandas")
    for users in (
        [1.0, 2.0, np.nan],
        ["a", "b", np.nan],  # numpy would make this list the strings 'a', 'b', 'nan'
        pd.Series(["a", None, "b"]),
        pd.Series(["a", pd.NA, "b"], dtype="string"),
    ):
        with pytest.raises(ValueError, match=r"1 of the 3 user ids are missing.*dropna"):
            triplets_to_matrix(users, ["x", "y", "z"])
    with pytest.raises(ValueError, match=r"1 of the 2 item ids are missing"):
        triplets_to_matrix(["a", "b"], [10.0, np.nan])
    with pytest.raises(ValueError, match=r"item ids mix int and str.*astype\(str\)"):
        triplets_to_matrix(["a", "b"], np.array([1, "x"], dtype=object))
    # as a list, numpy made 1 and "1" the one user "1" (its rating of 3 overwritten)
    with pytest.raises(ValueError, match=r"user ids mix int and str"):
        triplets_to_matrix([1, "1", 2], ["x", "x", "x"], [3.0, 4.0, 5.0], aggregate="last")
    # numpy's strings are strings
    assert triplets_to_matrix([np.str_("a"), "b"], ["x", "y"])[1].tolist() == ["a", "b"]
    # a user truly named "nan" is a label like any other
    assert triplets_to_matrix(["a", "nan"], ["x", "y"])[1].tolist() == ["a", "nan"]
    # the refusal of the whole table names its own columns
    table = pd.DataFrame({"userID": [1], "itemID": [2], "rating": [3]})
    with pytest.raises(TypeError, match=r"df\['userID'\], df\['itemID'\], df\['rating'\]"):
        triplets_to_matrix(table)


def test_summed_ratings_warn_and_zeros_are_no_interaction():
    users, items = ["a", "b", "a", "c"], ["x", "x", "x", "y"]
    with pytest.warns(UserWarning, match=r"1 triplet\(s\) repeat.*1 to 5.*now 9.*aggregate='last'"):
        X, _, _ = triplets_to_matrix(users, items, [5, 3, 4, 1])
    assert X[0, 0] == 9
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        triplets_to_matrix(users, items, [5, 3, 4, 1], aggregate="sum")  # counts, said so
        triplets_to_matrix(users, items)  # interactions
        triplets_to_matrix(users, items, [50, 3, 40, 1])  # counts beyond a star scale
    X, _, _ = triplets_to_matrix(["a", "b"], ["x", "y"], [0, 2])
    assert X.nnz == 1  # a count of 0 is not stored, so recommend does not take it as seen


def test_ids_become_indices_only_when_the_fit_saw_them(fitted):
    """np.searchsorted, which the docs once advised, gives a neighbour's position for an ID
    the fit never saw, and its pair was scored with another user's factors."""
    from sklearn_cogaps import label_indices

    users = np.array([1000, 1007, 1014])
    assert label_indices(users, [1014, 1000]).tolist() == [2, 0]
    with pytest.raises(ValueError, match=r"1 of the 2 users are not among the labels.*1008"
                       r".*score new users as new rows: recommend\(X_new, n\)"):  # fmt: skip
        label_indices(users, [1000, 1008], name="users")
    with pytest.raises(ValueError, match="must be sorted"):
        label_indices(users[::-1], [1000])
    # a label twice gave an extra row that no triplet reaches
    with pytest.raises(ValueError, match=r"must be distinct.*1007 is there twice"):
        triplets_to_matrix([1000, 1007], [1, 1], user_labels=[1000, 1007, 1007])
    # a held-out matrix on the training labels lines up with the fitted one
    X, u, i = triplets_to_matrix(["a", "b", "c"], ["x", "y", "z"])
    held, hu, hi = triplets_to_matrix(["c"], ["x"], user_labels=u, item_labels=i)
    assert held.shape == X.shape and held[2, 0] == 1 and hu is not None
    # an item: new rows would not help, a column for every item would
    with pytest.raises(ValueError, match=r"1 of the 1 items are not among the labels.*"
                       r"item_labels=np\.unique\(all_items\)"):  # fmt: skip
        triplets_to_matrix(["c"], ["w"], user_labels=u, item_labels=i)


def test_a_numpy_table_of_triplets_given_to_fit_warns():
    """hpfrec's fit also takes the triplets as a numpy array, which was read as a matrix of
    three features with only a ConvergenceWarning."""
    rng = np.random.default_rng(0)
    pairs = np.unique(np.c_[rng.integers(0, 50, 500), rng.integers(0, 40, 500)], axis=0)[:300]
    table = np.c_[pairs, rng.poisson(3, len(pairs)) + 1].astype(np.float64)
    with pytest.warns(UserWarning, match=r"X has 3 columns.*triplets_to_matrix\(X\[:, 0\]"):
        HierarchicalPMF(2, max_iter=3).fit(table)
    # a log of (user, item) interactions, one per row, was two features
    advice = r"X has 2 columns.*pairs\?.*triplets_to_matrix\(X\[:, 0\], X\[:, 1\]\)\."
    with pytest.warns(UserWarning, match=advice):
        HierarchicalPMF(2, max_iter=3).fit(pairs.astype(np.float64))
    with pytest.warns(UserWarning, match=r"X\[:, 0\], X\[:, 1\], ratings\)\."):
        MaxMarginMF(2, max_iter=3, burn_in=1).fit(pairs.astype(np.float64))
    # three features of counts are a matrix like any other
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        warnings.simplefilter("ignore", ConvergenceWarning)
        for mean in (2.0, 50.0):
            for n_features in (2, 3):
                X = rng.poisson(mean, (500, n_features)).astype(np.float64)
                HierarchicalPMF(2, max_iter=3).fit(X)


def test_implicit_surprise_and_hpfrec_names_say_what_to_write(fitted):
    model, _ = fitted
    for name, says in (("Theta", "loadings_"), ("Beta", "components_.T"),
                       ("user_factors", "loadings_"), ("item_factors", "components_.T"),
                       ("similar_items", "sklearn.metrics.pairwise.cosine")):  # fmt: skip
        with pytest.raises(AttributeError, match=rf"'{name}' \(\w+'s\); write {says}"):
            getattr(model, name)
    with pytest.raises(TypeError, match=r"takes users=, not user= \(hpfrec's"):
        model.score_pairs(user=[0], item=[1])
    with pytest.raises(TypeError, match=r"takes X_val=, not val_set="):
        HierarchicalPMF(2).fit(_interactions(), val_set=_interactions())
    for Estimator, name, says in ((HierarchicalPMF, "factors", "n_components"),
                                  (WeightedBackgroundPMF, "iterations", "max_iter"),
                                  (MaxMarginMF, "seed", "random_state"),
                                  (MaxMarginMF, "lr_all", "no learning rate"),
                                  (MaxMarginMF, "reg_all", "C \\(the hinge")):  # fmt: skip
        with pytest.raises(TypeError, match=rf"no parameter '{name}'.*{says}"):
            Estimator(**{name: 1})
    with pytest.raises(AttributeError, match=r"'test' \(surprise's\); write rating_mae"):
        _ = MaxMarginMF().test
    # scHPF's model (HierarchicalPMF's) and run options
    scores = [("mean_negative_pois_llh", r"-poisson_loglik\(X, users=np\.arange")]
    if isinstance(model, HierarchicalPMF):
        scores += [("theta", "loadings_"), ("beta", r"components_\.T"),
                   ("xi", "nothing per cell"), ("eta", "nothing per cell"),
                   ("loss", "objective_history_")]  # fmt: skip
    for name, says in scores:
        with pytest.raises(AttributeError, match=rf"'{name}' \(scHPF's\); write {says}"):
            getattr(model, name)
    with pytest.raises(TypeError, match=r"'a' .*write prior_shape=a, learn_prior='rate'"):
        HierarchicalPMF(a=0.3)
    for name in ("min_iter", "better_than_n_ago", "dtype"):
        with pytest.raises(TypeError, match=rf"no parameter '{name}' \(scHPF's name"):
            HierarchicalPMF(**{name: 1})


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
@pytest.mark.parametrize("Estimator", [HierarchicalPMF, WeightedBackgroundPMF])
def test_users_named_by_label_instead_of_position_are_refused(Estimator):
    # a pivot table's index holds hpfrec's user IDs: users=ID would take another user's
    # factors, found by the labels of X's rows
    pd = pytest.importorskip("pandas")
    X = _interactions().toarray()
    P = pd.DataFrame(X, index=np.arange(X.shape[0]) * 10 + 3)  # IDs 3, 13, 23, ...
    model = Estimator(3, random_state=0, max_iter=10).fit(P)
    with pytest.raises(ValueError, match=r"labelled '13', but users\[0\] = 13 .* '133'"):
        model.recommend(P.loc[[13]], 3, users=[13])
    with pytest.raises(ValueError, match=r"users are positions"):
        model.poisson_loglik(P.loc[[13, 23]], users=[13, 23])
    by_position = model.recommend(P.iloc[[1, 2]], 3, users=[1, 2])
    for got, want in zip(by_position, model.recommend(X[[1, 2]], 3, users=[1, 2])):
        assert_array_equal(got, want)
    # labels of their own (a new frame's 0, 1, ...) and arrays are positions
    model.recommend(pd.DataFrame(X[[13]]), 3, users=[13])
    # a default index (0, 1, ...) is positions, also beside IDs 1..n that it overlaps
    ids = Estimator(3, random_state=0, max_iter=10).fit(pd.DataFrame(X, index=np.arange(1, 51)))
    for got, want in zip(
        ids.recommend(pd.DataFrame(X[[4, 5]]), 3, users=[4, 5]),
        ids.recommend(X[[4, 5]], 3, users=[4, 5]),
    ):
        assert_array_equal(got, want)
    # a shuffled 0..n-1 index is labels: rows taken by them, or users given as them, are
    # refused (each row would get another user's factors)
    shuffled = pd.DataFrame(X).sample(frac=1, random_state=0)
    ids = Estimator(3, random_state=0, max_iter=10).fit(shuffled)
    with pytest.raises(ValueError, match=r"may be positions or those labels.*to_numpy"):
        ids.recommend(shuffled.loc[[0, 1, 2]], 3, users=[0, 1, 2])
    ids.recommend(shuffled.iloc[[0, 1, 2]], 3, users=[0, 1, 2])
    # a model fitted on positions keeps no labels to check
    plain = Estimator(3, random_state=0, max_iter=10).fit(pd.DataFrame(X))
    plain.recommend(P.loc[[13]], 3, users=[13])


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_training_users_in_another_order_are_refused_by_predict_ratings():
    pd = pytest.importorskip("pandas")
    users = [f"u{i}" for i in range(RATINGS.shape[0])]
    frame = pd.DataFrame(RATINGS, index=users)
    model = MaxMarginMF(2, max_iter=6, burn_in=2, random_state=0).fit(frame)
    with pytest.raises(ValueError, match=r"another order: row 0 is labelled 'u1'"):
        model.predict_ratings(frame.iloc[[1, 0, *range(2, len(users))]])
    shuffled = pd.DataFrame(RATINGS).sample(frac=1, random_state=0)
    shuffled_model = MaxMarginMF(2, max_iter=6, burn_in=2, random_state=0).fit(shuffled)
    with pytest.raises(ValueError, match=r"may be positions or those labels"):
        shuffled_model.predict_ratings(shuffled.sort_index())
    # a default index beside labels of other names is positions, whatever the users
    for got, want in zip(
        model.predict_ratings(pd.DataFrame(RATINGS[:3]), users=[0, 1, 2]),
        model.predict_ratings(RATINGS[:3], users=[0, 1, 2]),
    ):
        assert_array_equal(got, want)
    # every training row under a default index: positions, in the training order
    assert_array_equal(model.predict_ratings(pd.DataFrame(RATINGS)), model.predict_ratings(RATINGS))
    with pytest.raises(ValueError, match=r"users\[0\] = 0 is the training row labelled 'u0'"):
        model.predict_ratings(frame.iloc[[3]], users=[0])
    assert_array_equal(
        model.predict_ratings(frame.iloc[[3]], users=[3]),
        model.predict_ratings(RATINGS[[3]], users=[3]),
    )
