"""Held-out scores that are finite on ordinary data and select the number of components."""

import warnings

import numpy as np
import pytest
from sklearn import config_context
from sklearn.datasets import load_digits
from sklearn.exceptions import ConvergenceWarning
from sklearn.model_selection import GridSearchCV, KFold

from sklearn_cogaps import ExtremeDeconvolution, HierarchicalPMF, WeightedBackgroundPMF
from sklearn_cogaps.datasets import make_background_counts


@pytest.fixture(autouse=True)
def _quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        yield


def test_wbpmf_score_is_finite_on_features_unseen_in_training():
    X = load_digits().data[:400]
    search = GridSearchCV(
        WeightedBackgroundPMF(max_iter=10, random_state=0),
        {"n_components": [2, 4]},
        cv=KFold(3, shuffle=True, random_state=0),
        return_train_score=True,
    ).fit(X)
    scores = np.column_stack([search.cv_results_[f"split{i}_test_score"] for i in range(3)])
    assert np.all(np.isfinite(scores)), scores
    # Held-out rows score like training rows: within a few percent per row.
    train = search.cv_results_["mean_train_score"]
    assert np.all(scores > 1.05 * train[:, None]), (scores, train)


def test_wbpmf_unseen_feature_gets_a_positive_background():
    X = load_digits().data[:300]
    unseen = X.sum(axis=0) == 0
    assert unseen.any()
    model = WeightedBackgroundPMF(n_components=3, max_iter=10, random_state=0).fit(X)
    assert np.all(model.f0_ > 0)
    assert np.all(np.isfinite(model.components_mean_log_))
    # Far below the scale of the features that have counts.
    assert model.f0_[unseen].max() < 0.1 * np.median(model.f0_[~unseen])
    # A held-out row with a count on an unseen feature scores finite, and lower than
    # the same row without that count.
    row = X[:1].copy()
    j = np.flatnonzero(unseen)[0]
    with_count = row.copy()
    with_count[0, j] = 3.0
    assert np.isfinite(model.score(with_count))
    assert model.score(with_count) < model.score(row)


def _grid_choice(estimator, X, grid, **fit_params):
    search = GridSearchCV(
        estimator, {"n_components": grid}, cv=KFold(3, shuffle=True, random_state=0)
    ).fit(X, **fit_params)
    return search.best_params_["n_components"], search.cv_results_["mean_test_score"]


def test_hpmf_score_selects_the_number_of_components():
    rng = np.random.default_rng(1)
    L = rng.gamma(1.0, 1.0, size=(90, 3))
    F = rng.gamma(1.0, 1.0, size=(120, 3))
    X = rng.poisson(L @ F.T).astype(np.float64)
    best, scores = _grid_choice(HierarchicalPMF(max_iter=200, random_state=0), X, [1, 2, 3, 5])
    assert best == 3, scores


def test_wbpmf_score_selects_the_number_of_components():
    X = make_background_counts(
        n_samples=150, n_features=120, n_components=3, signal=20.0, random_state=0
    )[0]
    best, scores = _grid_choice(WeightedBackgroundPMF(max_iter=50, random_state=0), X, [1, 2, 3, 5])
    assert best == 3, scores


def _xd_clusters(n=300, seed=0):
    rng = np.random.RandomState(seed)
    centres = np.array([[-4.0, 0.0], [4.0, 0.0], [0.0, 5.0]])
    v = centres[rng.randint(0, 3, n)] + rng.normal(size=(n, 2))
    noise = rng.uniform(0.2, 1.5, size=(n, 2))
    return v + rng.normal(size=v.shape) * np.sqrt(noise), noise


def test_xd_score_and_bic_select_the_number_of_components():
    X, noise = _xd_clusters()
    # The noise of the held-out points goes to score with metadata routing.
    with config_context(enable_metadata_routing=True):
        xd = (
            ExtremeDeconvolution(random_state=0, max_iter=200, tol=1e-6)
            .set_fit_request(X_cov=True)
            .set_score_request(X_cov=True)
        )
        best, scores = _grid_choice(xd, X, [1, 2, 3, 5], X_cov=noise)
    assert best == 3, scores
    bic = [
        ExtremeDeconvolution(k, random_state=0, max_iter=200, tol=1e-6)
        .fit(X, X_cov=noise)
        .bic(X, X_cov=noise)
        for k in [1, 2, 3, 4, 5]
    ]
    assert np.argmin(bic) == 2, bic
