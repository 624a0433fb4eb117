"""Inputs that once gave a wrong answer without a word now raise or warn, with a message
that says what to do (each test is the call that used to pass quietly)."""

import warnings

import numpy as np
import pytest
from sklearn.datasets import load_digits
from sklearn.exceptions import ConvergenceWarning

from sklearn_cogaps import CoGAPS, HierarchicalPMF, MaxMarginMF, WeightedBackgroundPMF


def _counts(shape, seed=0):
    return np.random.default_rng(seed).poisson(2.0, shape).astype(np.float64)


@pytest.mark.parametrize("Estimator", [HierarchicalPMF, WeightedBackgroundPMF])
def test_counts_too_large_for_the_updates_are_refused(Estimator):
    X = _counts((30, 20))
    X[0, 0] = 1e300
    with pytest.raises(ValueError, match=r"sums to 1e\+300.*Rescale X"):
        Estimator(3).fit(X)


def test_cogaps_refuses_data_of_zeros():
    with pytest.raises(ValueError, match="only zeros.*Remove empty data"):
        CoGAPS(3).fit(np.zeros((30, 20)))


def test_cogaps_advises_the_poisson_uncertainty_for_counts():
    X = load_digits().data[:60]
    with pytest.warns(UserWarning, match="whole numbers up to 16.*uncertainty='poisson'"):
        CoGAPS(3, max_iter=5).fit(X)
    # the advice is for the default only, and only for counts beyond 0 and 1
    rng = np.random.default_rng(0)
    quiet = [
        (X, {"uncertainty": "relative"}),
        (X, {"uncertainty": "poisson"}),
        (X + rng.uniform(0, 0.01, X.shape), {}),
        ((X > 8).astype(np.float64), {}),
    ]
    for data, kwargs in quiet:
        with warnings.catch_warnings():
            warnings.simplefilter("error", UserWarning)
            warnings.simplefilter("ignore", ConvergenceWarning)
            CoGAPS(3, max_iter=5).fit(data, **kwargs)


def _ratings(seed=0):
    rng = np.random.default_rng(seed)
    R = np.full((20, 15), np.nan)
    for i in range(20):
        R[i, rng.choice(15, 8, replace=False)] = rng.integers(1, 6, 8)
    return R


def test_a_stray_fraction_among_star_ratings_is_refused():
    R = _ratings()
    j = np.flatnonzero(~np.isnan(R[4]))[0]
    R[4, j] = 3.7
    with pytest.raises(ValueError, match=rf"\(3.7; the first at row 4, column {j}\).*np.round"):
        MaxMarginMF(3, max_iter=20, burn_in=5, random_state=0).fit(R)
    # a scale with half stars is a scale: its fractions are many
    half = _ratings() / 2
    est = MaxMarginMF(3, max_iter=20, burn_in=5, random_state=0).fit(half)
    assert 2.5 in est.levels_ and 0.5 in est.levels_


@pytest.mark.parametrize("Estimator", [HierarchicalPMF, WeightedBackgroundPMF])
def test_more_components_than_features_fit_with_the_defaults(Estimator):
    X = _counts((30, 10), seed=1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        warnings.simplefilter("ignore", ConvergenceWarning)
        est = Estimator(n_components=15, random_state=0).fit(X)
    assert np.all(np.isfinite(est.loadings_)) and np.all(np.isfinite(est.components_))
    assert est.transform(X).shape == (30, 15)
