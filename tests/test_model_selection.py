"""Held-out scores that are finite on ordinary data and select the number of components."""

import warnings

import numpy as np
import pytest
from sklearn.datasets import load_digits
from sklearn.exceptions import ConvergenceWarning
from sklearn.model_selection import GridSearchCV, KFold

from sklearn_cogaps import WeightedBackgroundPMF


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
    scores = np.column_stack(
        [search.cv_results_[f"split{i}_test_score"] for i in range(3)]
    )
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
    assert np.all(np.isfinite(model.factors_mean_log_))
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
