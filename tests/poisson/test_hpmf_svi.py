"""HierarchicalPMF.partial_fit: stochastic variational inference over batches of rows
(Hoffman et al. 2013). A converged fit is its fixed point when the batches are scaled to
the data's rows; epochs of batches reach the batch fit's held-out score; the steps do not
depend on the threads or on how a batch is read; what the model no longer keeps is refused
with a message that says what to do."""

import re
import warnings

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal
from scipy import sparse
from sklearn.base import clone
from sklearn.exceptions import ConvergenceWarning

import sklearn_cogaps._poisson._hpmf as hpmf_module
from sklearn_cogaps import HierarchicalPMF

from _shared import gamma_poisson_counts, partial_fit_epochs


def _programs(n, p=120, K=3, seed=0):
    """Counts of K well separated programs (each row mostly one program), and the
    programs."""
    rng = np.random.default_rng(seed)
    F = rng.gamma(0.3, 3.0, (p, K))
    L = rng.gamma(0.5, 4.0, (n, K))
    return sparse.csr_matrix(rng.poisson(L @ F.T).astype(np.float64)), F


@pytest.fixture(scope="module")
def converged():
    X, _ = _programs(300)
    est = HierarchicalPMF(3, tol=1e-13, max_iter=5000, random_state=0).fit(X)
    assert est.converged_
    return X, est


def test_a_converged_fit_is_a_fixed_point_of_steps_scaled_to_its_rows(converged):
    X, fit = converged
    n = X.shape[0]
    # the batch is the data, scaled to its n rows: every row's local optimum is its fitted
    # q(l_i) (up to the fit's convergence: VBEM's is linear, the rows within 1e-6 here),
    # and the global step's target is the fit's own q(F)
    est = clone(fit).set_params(total_samples=n)
    est.__dict__.update({k: v for k, v in fit.__dict__.items() if k.endswith("_")})
    est.partial_fit(X)
    assert_allclose(est.components_shape_, fit.components_shape_, rtol=1e-4)
    assert_allclose(est.components_rate_, fit.components_rate_, rtol=1e-4)
    assert_allclose(est.prior_loadings_shape_, fit.prior_loadings_shape_, rtol=1e-4)
    assert_allclose(est.prior_components_rate_, fit.prior_components_rate_, rtol=1e-4)
    # the batch's bound per row is that of the fitted rows with q(F) fixed
    assert est.lower_bound_ == pytest.approx(fit.score(X), rel=1e-9)
    assert not hasattr(est, "loadings_")
    # scaled to twice the rows (as total_samples=None would after this fit), the step moves
    # q(F): the scale is what makes the fixed point
    twice = clone(fit).set_params(total_samples=2 * n)
    twice.__dict__.update({k: v for k, v in fit.__dict__.items() if k.endswith("_")})
    twice.partial_fit(X)
    assert np.max(np.abs(twice.components_shape_ / fit.components_shape_ - 1)) > 0.05


def test_epochs_of_batches_reach_the_held_out_score_of_the_batch_fit():
    X, F = _programs(1500, seed=1)
    rng = np.random.default_rng(5)
    held = sparse.csr_matrix(rng.poisson(rng.gamma(0.5, 4.0, (300, 3)) @ F.T).astype(float))
    full = HierarchicalPMF(3, random_state=0).fit(X)
    est = HierarchicalPMF(3, random_state=0, total_samples=X.shape[0])
    after_one = partial_fit_epochs(est, X, 1, 150).score(held)
    after_six = partial_fit_epochs(est, X, 5, 150, seed=1).score(held)
    assert est.n_iter_ == 60
    # the steps shrink as (t + 2) ** -0.6: the gap to the batch fit closes slowly
    target = full.score(held)
    assert target - after_six < 0.4 * (target - after_one)
    assert after_six == pytest.approx(target, rel=4e-3)
    # each batch's bound per row, before its step, rises with the epochs
    history = est.objective_history_
    assert np.mean(history[-10:]) > np.mean(history[:10])


def test_partial_fit_after_fit_continues_it_and_fit_after_partial_fit_keeps_rows(converged):
    X, fit = converged
    est = clone(fit)
    est.__dict__.update({k: v for k, v in fit.__dict__.items() if k.endswith("_")})
    est.partial_fit(X[:50])
    # the fit's 300 rows count as six batches of 50: the step is (6 + 2) ** -0.6
    assert est.n_iter_ == 1 and est.objective_history_.shape == (1,)
    assert est._svi_state[:2] == (7, 350)
    for method, call in [
        ("loading_scores", lambda: est.loading_scores()),
        ("component_scores", lambda: est.component_scores()),
        ("score_pairs", lambda: est.score_pairs([0], [1])),
        ("recommend", lambda: est.recommend(X[:2], users=[0, 1])),
    ]:
        with pytest.raises(ValueError, match="keeps no training rows") as info:
            call()
        assert "partial_fit" in str(info.value), method
    assert est.recommend(X[:2])[0].shape == (2, 10)  # new rows are fitted as before
    with pytest.raises(AttributeError, match="no attribute 'loadings_': .*transform"):
        _ = est.loadings_
    assert not hasattr(est, "reconstruction_err_") and not hasattr(est, "no_such_")
    # a warm fit continues from the model, its rows starting at their optimum
    warm = clone(est).set_params(warm_start=True, max_iter=5)
    warm.__dict__.update({k: v for k, v in est.__dict__.items() if k.endswith("_")})
    warm._svi_state = est._svi_state
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        warm.fit(X)
    assert warm.loadings_.shape == (300, 3) and not hasattr(warm, "_svi_state")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        fresh = clone(warm).set_params(warm_start=False, max_iter=1).fit(X)
    assert warm.objective_history_[0] > fresh.objective_history_[0]


def test_changed_components_and_side_inputs_are_refused():
    X = gamma_poisson_counts(60, 30, 2, 7)
    est = HierarchicalPMF(2, random_state=0).partial_fit(X)
    est.set_params(n_components=3)
    with pytest.raises(ValueError, match="call fit to start one"):
        est.partial_fit(X)
    est.set_params(n_components=2, step_exponent=1.5)
    with pytest.raises(ValueError, match="step_exponent"):
        est.partial_fit(X)
    with pytest.raises(ValueError, match=r"partial_fit\(X\)"):
        HierarchicalPMF(2).partial_fit(X, X.toarray())
    with pytest.raises(ValueError, match="X has 29 features"):
        HierarchicalPMF(2, random_state=0).partial_fit(X).partial_fit(X[:, :29])
    with pytest.raises(TypeError, match=r"partial_fit\(X\[rows\]\).*total_samples"):
        HierarchicalPMF(2, users_per_batch=100)
    with pytest.raises(TypeError, match=r"HierarchicalPMF\(total_samples=nusers\)"):
        HierarchicalPMF(2).partial_fit(X, nusers=60)
    with pytest.raises(TypeError, match="unexpected keyword argument 'bogus'"):
        HierarchicalPMF(2).partial_fit(X, bogus=1)
    with pytest.raises(TypeError, match=r"write total_samples=nusers"):
        HierarchicalPMF(2, nusers=60)
    # a long value is shortened in the message
    with pytest.raises(TypeError, match=re.escape("given array([ 0,  1..., 57, 58, 59]))")):
        HierarchicalPMF(2).partial_fit(X, users_in_batch=np.arange(60))
    with pytest.raises(ValueError, match="total_samples=10 is smaller than this batch of 60"):
        HierarchicalPMF(2, total_samples=10).partial_fit(X)


def test_the_model_keeps_its_dtype_and_a_cluster_gives_the_in_memory_step():
    X = gamma_poisson_counts(120, 40, 2, 9)
    est = HierarchicalPMF(2, random_state=0, total_samples=240).partial_fit(X.astype(np.float32))
    est.partial_fit(X)
    assert est.components_.dtype == np.float32
    da = pytest.importorskip("dask.array")
    from _shared import local_cluster

    kw = dict(n_components=2, random_state=0, total_samples=240)
    ref = HierarchicalPMF(**kw).partial_fit(X[:60]).partial_fit(X[60:])
    dense = X.toarray()
    with local_cluster(2):
        on = HierarchicalPMF(**kw).partial_fit(da.from_array(dense[:60], chunks=(25, -1)))
        on.partial_fit(da.from_array(dense[60:], chunks=(25, -1)))
    for name in ("components_shape_", "components_rate_", "prior_loadings_shape_",
                 "objective_history_"):  # fmt: skip
        assert_array_equal(getattr(on, name), getattr(ref, name), err_msg=name)


def test_an_interrupted_step_leaves_the_estimator_as_it_was(monkeypatch):
    X = gamma_poisson_counts(60, 30, 2, 8)
    dense = X.toarray()
    est = HierarchicalPMF(2, random_state=0).partial_fit(dense)
    assert_array_equal(dense, X.toarray())  # the input is not changed
    shape, history = est.components_shape_.copy(), est.objective_history_.copy()

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(hpmf_module, "svi_step", interrupted)
    with pytest.raises(KeyboardInterrupt):
        est.partial_fit(X)
    assert_array_equal(est.components_shape_, shape)
    assert_array_equal(est.objective_history_, history)
