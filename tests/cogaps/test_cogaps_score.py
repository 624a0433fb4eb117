"""CoGAPS.score: a held-out criterion under which a grid search finds the number of patterns."""

import warnings

import numpy as np
import pytest
from numpy.testing import assert_allclose
from scipy import sparse
from sklearn.exceptions import ConvergenceWarning
from sklearn.model_selection import GridSearchCV, KFold

from sklearn_cogaps import CoGAPS
from sklearn_cogaps.datasets import make_patterns


@pytest.mark.parametrize(
    "seed, sparse_optimization, random_state",
    [(0, False, 0), (2, False, 1), (0, True, 2), (1, False, 1)],
)
def test_grid_search_selects_the_true_number_of_patterns(seed, sparse_optimization, random_state):
    # Shuffled folds, as the CoGAPS guide advises: make_patterns orders its samples along
    # the patterns' time course, so contiguous folds train on one stretch of it and score
    # on another, where a pattern can be fitted in a form that does not carry over (with
    # cv=3, some chains then prefer 3 or 4 patterns on these data).
    X, _, _ = make_patterns(n_samples=30, n_features=60, n_components=2, random_state=seed)
    search = GridSearchCV(
        CoGAPS(max_iter=1000, random_state=random_state, sparse_optimization=sparse_optimization),
        {"n_components": [1, 2, 3, 4]},
        cv=KFold(3, shuffle=True, random_state=0),
    ).fit(X)
    scores = search.cv_results_["mean_test_score"]
    assert search.best_params_ == {"n_components": 2}, scores
    # one pattern too few is far worse; extra patterns cost a little (noise fitted)
    assert scores[0] < scores[1] - 100
    assert scores[2] < scores[1] and scores[3] < scores[1]


@pytest.fixture(scope="module")
def fitted():
    X, _, _ = make_patterns(n_samples=20, n_features=40, n_components=2, random_state=1)
    model = CoGAPS(n_components=2, max_iter=100, random_state=0).fit(X)
    return model, X


def test_score_is_reproducible_and_row_wise(fitted):
    model, X = fitted
    total = model.score(X) * len(X)
    assert model.score(X) * len(X) == total
    # each row's held-out fits depend on the row alone: any split of the rows, any order
    parts = model.score(X[:7]) * 7 + model.score(X[7:][::-1]) * (len(X) - 7)
    assert_allclose(parts, total, rtol=1e-12)
    one = model.score(X[[3]])
    assert_allclose(
        model.score(np.vstack([X[[3]], X[:2]])) * 3 - model.score(X[:2]) * 2, one, rtol=1e-10
    )
    # another random_state splits and samples differently
    other = CoGAPS(n_components=2, max_iter=100, random_state=1).fit(X)
    assert other.score(X) != model.score(X)


def test_score_with_uncertainty_and_sparse_input(fitted):
    model, X = fitted
    default = model.score(X)
    assert model.score(sparse.csr_matrix(X)) == default
    assert model.score(X, uncertainty=np.maximum(0.1 * X, 0.1)) == default
    wider = model.score(X, uncertainty=np.maximum(0.3 * X, 0.3))
    assert np.isfinite(wider) and wider != default
    assert model.score(sparse.csr_matrix(X), uncertainty=np.maximum(0.3 * X, 0.3)) == wider


def test_score_folds_are_balanced_and_reproducible(fitted):
    """Every entry of a row is in exactly one fold; folds have equal sizes."""
    from sklearn_cogaps._cogaps._rows import SCORE_FOLDS as _SCORE_FOLDS
    from sklearn_cogaps._cogaps._rows import _entry_folds, row_seeds

    model, X = fitted
    folds = _entry_folds(row_seeds(model, X[:1]), X.shape[1], _SCORE_FOLDS)
    assert np.all(np.bincount(folds[0], minlength=_SCORE_FOLDS) == X.shape[1] // _SCORE_FOLDS)
    assert np.array_equal(folds, _entry_folds(row_seeds(model, X[:1]), X.shape[1], _SCORE_FOLDS))


def test_score_needs_samples(fitted):
    model, X = fitted
    with pytest.raises(ValueError, match="sample"):
        model.score(X[:0])


def test_an_unconverged_chain_warns_and_a_converged_one_does_not():
    # with max_iter=300 the K = 3 chain from the empty domain is still gaining atoms while
    # it samples (its chi-square falls by about 65% of its first level), a quietly
    # misleading fit for a search over K
    X, _, _ = make_patterns(n_samples=40, n_features=200, n_components=3, random_state=0)
    with pytest.warns(ConvergenceWarning, match=r"fell by \d+% during the sampling phase"):
        CoGAPS(n_components=3, max_iter=300, random_state=0, init="empty").fit(X)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        model = CoGAPS(n_components=2, max_iter=1000, random_state=0).fit(X)
    sampling = model.objective_history_[-1000:]
    assert abs(sampling[:250].mean() - sampling[-250:].mean()) < 0.05 * sampling[-250:].mean()


def test_scoring_without_the_uncertainty_array_of_the_fit_warns_and_routing_passes_it():
    """GridSearchCV and cross_validate call score(X_test) without the fit's uncertainty
    unless it is routed: the score then says that it uses the relative model instead."""
    import sklearn
    from sklearn.model_selection import KFold, cross_validate

    rng = np.random.RandomState(0)
    X = rng.poisson(4.0, (12, 8)).astype(float)
    U = np.maximum(np.sqrt(X), 1.0)
    model = CoGAPS(n_components=2, max_iter=5, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model.fit(X, uncertainty=U)
        with pytest.warns(UserWarning, match="fitted with an uncertainty array.*set_score_request"):
            model.score(X)
        warnings.filterwarnings("error", message=".*fitted with an uncertainty array")
        model.score(X, uncertainty=U)
        CoGAPS(n_components=2, max_iter=5, random_state=0).fit(X).score(X)
        cv = KFold(2, shuffle=True, random_state=0)
        with sklearn.config_context(enable_metadata_routing=True):
            est = CoGAPS(n_components=2, max_iter=5, random_state=0)
            est.set_fit_request(uncertainty=True).set_score_request(uncertainty=True)
            routed = cross_validate(est, X, params={"uncertainty": U}, cv=cv)["test_score"]
        for score, (train, test) in zip(routed, cv.split(X)):
            fold = CoGAPS(n_components=2, max_iter=5, random_state=0)
            fold.fit(X[train], uncertainty=U[train])
            assert score == pytest.approx(fold.score(X[test], uncertainty=U[test]))


def test_transform_without_the_uncertainty_array_of_the_fit_warns_and_routing_passes_it():
    """A Pipeline calls transform(X) without the fit's uncertainty unless it is routed: the
    patterns are then sampled under the relative model, and transform says so."""
    import sklearn
    from sklearn.linear_model import Ridge
    from sklearn.pipeline import make_pipeline

    rng = np.random.RandomState(0)
    X = rng.poisson(4.0, (12, 8)).astype(float)
    U = np.full_like(X, 0.5)
    y = rng.normal(size=12)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model = CoGAPS(n_components=2, max_iter=5, random_state=0).fit(X, uncertainty=U)
        with pytest.warns(UserWarning, match="transform got no uncertainty.*set_transform_request"):
            model.transform(X)
        warnings.filterwarnings("error", message=".*fitted with an uncertainty array")
        with_u = model.transform(X, uncertainty=U)
        with sklearn.config_context(enable_metadata_routing=True):
            est = CoGAPS(n_components=2, max_iter=5, random_state=0)
            est.set_fit_request(uncertainty=True).set_transform_request(uncertainty=True)
            pipe = make_pipeline(est, Ridge().set_fit_request(sample_weight=False))
            pipe.fit(X, y, uncertainty=U)
            pipe.predict(X, uncertainty=U)
        np.testing.assert_array_equal(pipe[0].transform(X, uncertainty=U), with_u)


def test_scoring_rows_of_few_entries_warns():
    """With fewer than twice n_components entries seen by each fold's fit, the held-out
    entries are predicted mostly by the prior (scores of -1e9 on one feature): score says
    so, and not with ten features for three patterns."""
    X, _, _ = make_patterns(n_samples=30, n_features=40, n_components=3, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        for n_features, warns in [(1, True), (5, True), (10, False)]:
            model = CoGAPS(3, max_iter=20, random_state=0).fit(X[:, :n_features])
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                model.score(X[:, :n_features])
            said = [w for w in caught if "fewer than twice n_components=3" in str(w.message)]
            assert bool(said) == warns, n_features
