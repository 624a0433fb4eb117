"""WeightedBackgroundPMF.partial_fit: stochastic variational inference over batches of rows.
The first call is the fit's start and first iteration on its batch; a converged fit is
nearly a fixed point of a step on its own rows scaled to them; epochs of batches reach the
batch fit's held-out score; the steps do not depend on the threads or on how a batch is
read; what the model no longer keeps is refused with a message that says what to do."""

import warnings

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal
from scipy import sparse
from sklearn.exceptions import ConvergenceWarning

from sklearn_cogaps import WeightedBackgroundPMF

from _shared import gamma_poisson_counts, partial_fit_epochs

GLOBALS = ("components_", "w_", "f0_", "components_mean_", "kl_components_")


def _programs(n, p=150, K=3, seed=0):
    """Counts of K programs over a background, and the programs."""
    rng = np.random.default_rng(seed)
    F = rng.gamma(0.4, 2.0, (p, K))
    L = rng.gamma(0.5, 1.0, (n, K))
    return sparse.csr_matrix(rng.poisson(L @ F.T).astype(np.float64)), F


def _fit(X, **params):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return WeightedBackgroundPMF(**params).fit(X)


def test_the_first_call_is_the_fits_start_and_first_iteration():
    X = gamma_poisson_counts(200, 60, 3, 1)
    first = WeightedBackgroundPMF(3, random_state=0).partial_fit(X)
    one = _fit(X, n_components=3, max_iter=1, random_state=0)
    for name in GLOBALS:
        assert_array_equal(getattr(first, name), getattr(one, name), err_msg=name)
    for key in ("pi0", "weights"):
        assert_array_equal(first.prior_loadings_[key], one.prior_loadings_[key])
    # the bound is the batch's ELBO per row with the features fixed, as score sums it: the
    # fit's ELBO less the factors' KL
    bound = (one.lower_bound_ + one.kl_components_.sum()) / X.shape[0]
    assert first.lower_bound_ == pytest.approx(bound, rel=1e-9)
    assert first.n_iter_ == 1 and not first.converged_
    # a later call's bound is score(batch) of the model before its step, with the rows of
    # the local step (a few sweeps) where score fits them as transform does
    batch = gamma_poisson_counts(150, 60, 3, 2)
    before = first.score(batch)
    first.set_params(total_samples=350).partial_fit(batch)
    assert first.lower_bound_ == pytest.approx(before, rel=1e-3)


def test_a_converged_fit_is_nearly_a_fixed_point_of_a_step_on_its_rows():
    X, _ = _programs(400)
    # 500 iterations: the ELBO still rises by 0.006 an iteration (the fit is slow to settle)
    kw = dict(n_components=3, max_iter=500, tol=0.0, random_state=0)
    fit = _fit(X, **kw)
    # the batch is the data, scaled to its rows: the local step finds (nearly) the fitted
    # rows, and the averages are the fit's own, so the globals barely move
    est = _fit(X, **kw)
    est.set_params(total_samples=X.shape[0]).partial_fit(X)
    scale = fit.components_.max()
    assert np.abs(est.components_ - fit.components_).max() < 0.02 * scale
    assert_allclose(est.w_, fit.w_, rtol=0.01)
    # scaled to ten times the rows the step moves them: the scale makes the fixed point
    ten = _fit(X, **kw)
    ten.set_params(total_samples=10 * X.shape[0]).partial_fit(X)
    moved = np.abs(ten.components_mean_ - fit.components_mean_).max()
    assert moved > 5 * np.abs(est.components_mean_ - fit.components_mean_).max()


def test_epochs_of_batches_reach_the_held_out_score_of_the_batch_fit():
    X, F = _programs(1500, seed=1)
    rng = np.random.default_rng(5)
    held = sparse.csr_matrix(rng.poisson(rng.gamma(0.5, 1.0, (300, 3)) @ F.T).astype(float))
    target = _fit(X, n_components=3, random_state=0).score(held)
    est = WeightedBackgroundPMF(3, random_state=0, total_samples=X.shape[0])
    after_one = partial_fit_epochs(est, X, 1, 250).score(held)
    after_four = partial_fit_epochs(est, X, 3, 250, seed=1).score(held)
    assert est.n_iter_ == 24
    # the steps shrink as (t + 2) ** -0.6: the gap to the batch fit closes slowly
    assert abs(target - after_four) < 0.75 * abs(target - after_one)
    assert after_four == pytest.approx(target, rel=2e-3)
    history = est.objective_history_
    assert np.mean(history[-6:]) > np.mean(history[:6])


def test_a_column_first_seen_in_a_later_batch():
    """A feature without counts so far has a background of 0 in the model's own state;
    counts there in a later batch (after partial_fit or after fit) give it one."""
    X = gamma_poisson_counts(300, 40, 3, 1).toarray()
    first, later = X[:150].copy(), X[150:]
    first[:, 5] = 0
    streamed = WeightedBackgroundPMF(3, random_state=0, total_samples=300).partial_fit(first)
    fitted = _fit(first, n_components=3, max_iter=20, random_state=0)
    for model in (streamed, fitted):
        before = model.f0_[5]
        model.partial_fit(later)
        assert np.all(np.isfinite(model.components_)) and model.f0_[5] > before
        assert np.isfinite(model.score(later))
    # and a warm fit of all the rows after a stream that had not seen it
    warm = WeightedBackgroundPMF(3, random_state=0, warm_start=True, max_iter=3)
    warm.partial_fit(first)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        warm.fit(X)
    assert np.all(np.isfinite(warm.components_)) and warm.loadings_.shape == (300, 3)


def test_the_prior_families_do_not_change_in_a_stream():
    X = gamma_poisson_counts(120, 40, 2, 7)
    est = WeightedBackgroundPMF(2, random_state=0).partial_fit(X)
    est.set_params(prior_loadings="gamma")
    with pytest.raises(ValueError, match="partial_fit continues the fitted priors"):
        est.partial_fit(X)
    est.set_params(prior_loadings="gamma_mixture", prior_components="exponential_mixture")
    with pytest.raises(ValueError, match="prior families are"):
        est.partial_fit(X)


def test_what_partial_fit_refuses_and_what_it_no_longer_keeps():
    X = gamma_poisson_counts(120, 40, 2, 7)
    est = WeightedBackgroundPMF(2, random_state=0).partial_fit(X)
    for name in ("loadings_", "l0_", "loadings_mean_", "reconstruction_err_"):
        with pytest.raises(AttributeError, match="keeps no training rows.*transform"):
            getattr(est, name)
    with pytest.raises(ValueError, match="keeps no training rows.*loading_scores\\(X\\)"):
        est.loading_scores()
    assert est.loading_scores(X[:3]).shape == (3, 2)
    assert est.transform(X).shape == (120, 2)
    with pytest.raises(ValueError, match="total_samples=50 is smaller than this batch of 120"):
        WeightedBackgroundPMF(2, total_samples=50).partial_fit(X)
    with pytest.raises(ValueError, match="n_components=3, but the model being updated has 2"):
        est.set_params(n_components=3).partial_fit(X)
    # hpfrec's and scHPF's habits, as HierarchicalPMF answers them
    with pytest.raises(TypeError, match=r"WeightedBackgroundPMF\(total_samples=nusers\)"):
        est.partial_fit(X, nusers=4000)
    for name, advice in [("random_seed", "random_state=seed"), ("users_per_batch",
                         "partial_fit"), ("a", "prior_loadings=")]:  # fmt: skip
        with pytest.raises(TypeError, match=advice):
            WeightedBackgroundPMF(2, **{name: 1})
    with pytest.raises(ValueError, match="starts the model on its first batch from KL-NMF"):
        WeightedBackgroundPMF(2, init="custom").partial_fit(X)
    with pytest.raises(ValueError, match="expecting 40 features"):
        est.set_params(n_components=2).partial_fit(X[:, :30])
    # a warm fit after partial_fit starts its rows at their local step and continues the
    # model; its ELBO does not decrease
    warm = WeightedBackgroundPMF(2, random_state=0).partial_fit(X)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)  # not started anew
        warnings.simplefilter("ignore", ConvergenceWarning)
        warm.set_params(warm_start=True, max_iter=5).fit(X)
    assert warm.loadings_.shape == (120, 2)
    assert np.all(np.diff(warm.objective_history_) > -1e-6 * abs(warm.lower_bound_))
    # a fit after partial_fit keeps its rows again
    refit = _fit(X, n_components=2, max_iter=5, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        est.set_params(max_iter=5).fit(X)
    assert_array_equal(est.loadings_, refit.loadings_)
