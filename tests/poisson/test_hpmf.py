"""HierarchicalPMF: VBEM, Newton and pathwise solvers, transform, input handling."""

import pickle
import warnings

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal
from scipy import sparse, stats
from scipy.special import digamma as special_digamma
from scipy.special import gammaln, logsumexp, polygamma
from sklearn.exceptions import ConvergenceWarning
from sklearn.model_selection import GridSearchCV
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import FunctionTransformer
from threadpoolctl import threadpool_limits

from sklearn_cogaps import HierarchicalPMF, match_components, thin_counts
from sklearn_cogaps._poisson._hpmf_fast import (
    _dlog_gamma_dshape_for_tests as dlog_gamma_dshape_array,
)
from sklearn_cogaps._poisson._hpmf_fast import (
    _special_for_tests as special,
)
from sklearn_cogaps._poisson._hpmf_fast import (
    sample_log_gamma,
    transform_rows,
)
from sklearn_cogaps._utils import _openmp_helpers
from sklearn_cogaps.datasets import make_single_cell


def make_paper_example():
    """The simulated example of Sarkar (2021): 200 x 300, K = 3, Gamma(1, 1) factors."""
    rng = np.random.default_rng(1)
    l = rng.gamma(1.0, 1.0, size=(200, 3))
    f = rng.gamma(1.0, 1.0, size=(300, 3))
    return rng.poisson(l @ f.T).astype(np.float64), l, f


@pytest.fixture(scope="module")
def example():
    return make_paper_example()


@pytest.fixture(scope="module")
def vbem_fit(example):
    X, _, _ = example
    return HierarchicalPMF(3, tol=1e-9, max_iter=3000, random_state=0).fit(sparse.csr_matrix(X))


@pytest.mark.parametrize("which", [0, 1, 2])
def test_polygamma_kernels_match_scipy(which):
    x = np.concatenate([np.geomspace(1e-6, 1e5, 200), [0.5, 1.0, 5.999, 6.0, 6.001]])
    assert_allclose(special(x, which), polygamma(which, x), rtol=1e-12, atol=1e-13)


@pytest.mark.parametrize("alpha", [0.05, 0.7, 1.0, 3.0, 40.0, 900.0])
def test_gamma_reparameterisation_gradient_matches_quantile_derivative(alpha):
    # d ln(eps)/d alpha at a fixed CDF value u equals the derivative of ln(ppf(u; alpha))
    u = np.array([1e-6, 0.01, 0.2, 0.5, 0.8, 0.99, 1 - 1e-7])
    eps = stats.gamma.ppf(u, alpha)
    h = 1e-6 * alpha
    fd = (np.log(stats.gamma.ppf(u, alpha + h)) - np.log(stats.gamma.ppf(u, alpha - h))) / (2 * h)
    got = dlog_gamma_dshape_array(eps, np.full(u.size, alpha))
    assert_allclose(got, fd, rtol=2e-4, atol=1e-8)


@pytest.mark.parametrize("alpha", [0.05, 0.4, 2.5, 30.0])
def test_gamma_samples_and_their_gradients_are_unbiased(alpha):
    # samples follow Gamma(alpha, rate); E[d eps / d alpha] = d E[eps] / d alpha and
    # E[d eps^2 / d alpha] = d E[eps^2] / d alpha, also through the boosting of shapes < 1
    n, rate = 40000, 2.0
    log_eps = np.empty((n, 1))
    dlog = np.empty((n, 1))
    seeds = np.arange(1, n + 1, dtype=np.uint64) * np.uint64(2654435761)
    sample_log_gamma(
        np.full((n, 1), alpha), np.array([np.log(rate)]), seeds, log_eps, dlog, True, 1
    )
    eps = np.exp(log_eps[:, 0])
    assert stats.kstest(eps, stats.gamma(alpha, scale=1 / rate).cdf).pvalue > 1e-3
    d1 = eps * dlog[:, 0]
    d2 = 2 * eps**2 * dlog[:, 0]
    assert abs(d1.mean() - 1 / rate) < 4 * d1.std() / np.sqrt(n)
    assert abs(d2.mean() - (2 * alpha + 1) / rate**2) < 4 * d2.std() / np.sqrt(n)


def test_vbem_elbo_never_decreases(vbem_fit):
    lb = vbem_fit.objective_history_
    assert lb.size == vbem_fit.n_iter_
    assert np.all(np.diff(lb) >= -1e-10 * np.abs(lb[1:]))
    assert vbem_fit.lower_bound_ == lb[-1]
    assert vbem_fit.lower_bound_ == pytest.approx(vbem_fit.augmented_lower_bound_)
    # the exact ELBO is the tighter bound (up to Monte Carlo error)
    assert vbem_fit.exact_lower_bound_ > vbem_fit.augmented_lower_bound_


def test_recovers_the_paper_example(example, vbem_fit):
    X, l, f = example
    _, corr_f = match_components(f, vbem_fit.components_.T)
    _, corr_l = match_components(l, vbem_fit.loadings_)
    assert np.all(corr_f > 0.95), corr_f
    assert np.all(corr_l > 0.95), corr_l
    mean = vbem_fit.loadings_ @ vbem_fit.components_
    assert np.corrcoef(mean.ravel(), (l @ f.T).ravel())[0, 1] > 0.98
    # the fitted means explain the counts as well as the true means do
    truth = np.corrcoef((l @ f.T).ravel(), X.ravel())[0, 1]
    assert np.corrcoef(mean.ravel(), X.ravel())[0, 1] > truth - 0.01
    # posterior means on the scale of the data: totals match
    assert mean.sum() == pytest.approx(X.sum(), rel=0.02)
    # the learned priors are close to the Gamma(1, 1) that generated the data (up to the
    # scale exchange between L and F)
    assert np.all((vbem_fit.prior_loadings_shape_ > 0.5) & (vbem_fit.prior_loadings_shape_ < 2))


def test_random_start_reaches_the_same_optimum_on_the_paper_example(example, vbem_fit):
    X, _, f = example
    est = HierarchicalPMF(3, init="random", tol=1e-8, max_iter=2000, random_state=0).fit(X)
    _, corr = match_components(f, est.components_.T)
    assert np.all(corr > 0.95), corr
    assert est.lower_bound_ == pytest.approx(vbem_fit.lower_bound_, rel=1e-3)
    assert np.all(np.diff(est.objective_history_) >= -1e-10 * np.abs(est.objective_history_[1:]))


def test_the_default_start_avoids_the_poor_optima_of_random_starts():
    from sklearn_cogaps.datasets import make_single_cell

    X, _, _ = make_single_cell(300, 80, 4, depth=2.0, random_state=1)
    random = [
        HierarchicalPMF(4, init="random", random_state=seed).fit(X).lower_bound_
        for seed in range(4)
    ]
    default = [HierarchicalPMF(4, random_state=seed).fit(X).lower_bound_ for seed in range(2)]
    # a random start of this data set ends thousands of nats below the others
    assert max(random) - min(random) > 1000
    assert min(default) >= max(random)


def test_transform_reproduces_the_fitted_loadings(example, vbem_fit):
    X, _, _ = example
    W = vbem_fit.transform(X)
    assert_allclose(W, vbem_fit.loadings_, rtol=2e-2)
    assert np.median(np.abs(W / vbem_fit.loadings_ - 1)) < 1e-3
    # row by row: a subset gives the same rows
    assert_array_equal(vbem_fit.transform(X[10:20]), W[10:20])
    assert_allclose(vbem_fit.inverse_transform(W), W @ vbem_fit.components_)
    assert vbem_fit.get_feature_names_out().tolist() == [
        "hierarchicalpmf0",
        "hierarchicalpmf1",
        "hierarchicalpmf2",
    ]


def _row_bounds(est, X, shape, rate):
    """Each row's ELBO (without -sum ln x!) at q(l_i) = Gamma(shape_i, rate), q(F) fixed."""
    a, b = est.prior_loadings_shape_, est.prior_loadings_rate_
    rate = np.broadcast_to(rate, shape.shape)
    elog = special_digamma(shape) - np.log(rate)
    lt = logsumexp(elog[:, :, None] + est.components_log_[None], axis=1)
    kl = ((shape - a) * special_digamma(shape) - gammaln(shape) + gammaln(a)
          + a * (np.log(rate) - np.log(b)) + shape * (b - rate) / rate)  # fmt: skip
    return (X * lt).sum(1) - (shape / rate) @ est.components_.sum(1) - kl.sum(1)


@pytest.fixture(scope="module")
def several_fixed_points():
    """Counts whose rows' bounds have several fixed points, and their fit (K = 5)."""
    rng = np.random.default_rng(0)
    n, p, K = 150, 300, 5
    L = rng.gamma(0.3, 1 / 0.3 * 2, (n, K))
    F = rng.gamma(0.3, 1 / 0.3, (p, K)) * rng.gamma(2, 0.5, (p, 1))
    X = rng.poisson(L @ F.T * 0.5).astype(np.float64)
    est = HierarchicalPMF(K, random_state=0).fit(X)
    return X, est


def test_transform_reaches_the_fitted_rows_optimum(several_fixed_points):
    # The per-row bound has several fixed points (a component that holds a few counts of a
    # row switched on or off). From its uniform start alone, the regression of the training
    # rows ends below the fit's own rows in several of them; with the search it does not.
    X, est = several_fixed_points
    n, K = X.shape[0], est.n_components
    rate = est.prior_loadings_rate_ + est.components_.sum(1)
    fitted = _row_bounds(est, X, est.loadings_shape_, est.loadings_rate_)
    searched = _row_bounds(est, X, est.transform(X) * rate, rate)
    assert np.all(searched >= fitted - 1e-9 * np.abs(fitted))
    # the same regression without the search (search_share=0), from the same start
    counts = sparse.csr_matrix(X)
    shape = np.ascontiguousarray(est.prior_loadings_shape_ + X.sum(1)[:, None] / K)
    transform_rows(counts.indptr, counts.indices, counts.data,
                   np.ascontiguousarray(est.components_log_.T), est.prior_loadings_shape_,
                   est.prior_loadings_rate_, rate, shape, np.empty(n),
                   np.empty(n, dtype=np.intc), 5000, 1e-10, 0.0, 1)  # fmt: skip
    uniform = _row_bounds(est, X, shape, rate)
    assert np.sum(uniform < fitted - 1e-6) >= 3
    assert np.all(searched >= uniform - 1e-9 * np.abs(uniform))


def test_extrapolated_row_regression_reaches_the_plain_fixed_point_in_fewer_steps(
    several_fixed_points,
):
    # transform's row regression extrapolates its steps (SQUAREM); the plain steps, iterated
    # far past the stopping rule, give the same fixed point from the same start, in at least
    # twice as many steps. A wrong extrapolation (sign, length) or safeguard moves the rows
    # or costs steps (a plain row needs 46 to 1541 steps here, 3.8 times as many in all).
    X, est = several_fixed_points
    K = est.n_components
    a, b = est.prior_loadings_shape_, est.prior_loadings_rate_
    rate = b + est.components_.sum(1)
    X = X[:60]
    n = X.shape[0]
    start = a + X.sum(1)[:, None] / K
    counts = sparse.csr_matrix(X)
    shape, n_iter = np.ascontiguousarray(start.copy()), np.empty(n, dtype=np.intc)
    transform_rows(counts.indptr, counts.indices, counts.data,
                   np.ascontiguousarray(est.components_log_.T), a, b, rate, shape,
                   np.empty(n), n_iter, 5000, 1e-10, 0.0, 1)  # fmt: skip
    plain, steps = start.copy(), np.zeros(n, dtype=int)
    active = np.arange(n)  # the rows still moving by more than 1e-13
    for _ in range(20000):
        lt = special_digamma(plain[active]) - np.log(rate)
        log_pi = lt[:, :, None] + est.components_log_[None]
        pi = np.exp(log_pi - logsumexp(log_pi, axis=1, keepdims=True))
        new = a + np.einsum("ij,ikj->ik", X[active], pi)
        change = np.max(np.abs(new - plain[active]) / new, axis=1)
        steps[active] += change > 1e-10
        plain[active] = new
        active = active[change > 1e-13]
        if active.size == 0:
            break
    assert_allclose(shape, plain, rtol=1e-7)
    assert np.sum(n_iter) <= np.sum(steps) / 2, (np.sum(n_iter), np.sum(steps))


def test_dense_and_sparse_input_give_the_same_fit(example):
    X = example[0][:60, :80]
    kw = dict(n_components=3, max_iter=40, random_state=3)
    ref = HierarchicalPMF(**kw).fit(X)
    csc64 = sparse.csc_matrix(X)
    csc64.indices = csc64.indices.astype(np.int64)
    csc64.indptr = csc64.indptr.astype(np.int64)
    for Xs in (sparse.csr_matrix(X), csc64, sparse.csr_array(X.astype(np.int32))):
        est = HierarchicalPMF(**kw).fit(Xs)
        assert_allclose(est.components_, ref.components_, rtol=1e-12)
        assert_allclose(est.objective_history_, ref.objective_history_, rtol=1e-12)
        assert_allclose(est.transform(Xs), ref.transform(X), rtol=1e-12)


@pytest.mark.parametrize("solver", ["vbem", "newton", "pathwise"])
def test_same_seed_same_result_for_any_thread_count(example, solver, monkeypatch):
    # small problems run on one thread by default; force the parallel kernels here
    monkeypatch.setattr(_openmp_helpers, "MIN_WORK_PER_THREAD", 1)
    X = sparse.csr_matrix(example[0][:80, :100])
    kw = dict(
        n_components=3,
        solver=solver,
        max_iter=3 if solver == "newton" else 20,
        init="random",
        random_state=7,
    )
    with threadpool_limits(1, user_api="openmp"):
        one = HierarchicalPMF(**kw).fit(X)
    with threadpool_limits(2, user_api="openmp"):
        two = HierarchicalPMF(**kw).fit(X)
    again = HierarchicalPMF(**kw).fit(X)
    for est in (two, again):
        assert_array_equal(est.components_, one.components_)
        assert_array_equal(est.loadings_shape_, one.loadings_shape_)
        assert_array_equal(est.objective_history_, one.objective_history_)
        assert est.exact_lower_bound_ == one.exact_lower_bound_
    with threadpool_limits(1, user_api="openmp"):
        W1 = one.transform(X)
    assert_array_equal(W1, one.transform(X))


def test_bad_input_gets_a_clear_error():
    est = HierarchicalPMF(2)
    with pytest.raises(ValueError, match="Negative values"):
        est.fit(np.array([[1.0, -1.0], [2.0, 0.0]]))
    with pytest.raises(ValueError, match="NaN"):
        est.fit(np.array([[1.0, np.nan], [2.0, 0.0]]))
    with pytest.raises(ValueError, match="only zeros"):
        est.fit(sparse.csr_matrix((5, 4)))
    with pytest.raises(ValueError, match="only zeros"):
        est.fit(np.zeros((5, 4)))
    with pytest.raises(ValueError, match="solver"):
        HierarchicalPMF(solver="sgd").fit(np.ones((3, 3)))
    with pytest.warns(UserWarning, match="non-integer"):
        HierarchicalPMF(2, max_iter=5).fit(np.full((4, 3), 0.5))
    fitted = HierarchicalPMF(2, max_iter=5, random_state=0).fit(np.ones((4, 3)))
    with pytest.raises(ValueError, match="n_components=2"):
        fitted.inverse_transform(np.ones((2, 3)))


def test_tiny_shapes_and_empty_rows_stay_finite():
    rng = np.random.default_rng(0)
    X = rng.poisson(0.05, size=(40, 30)).astype(float)
    X[:5] = 0.0
    X[:, :3] = 0.0
    X[7, 9] = 500.0
    est = HierarchicalPMF(4, prior_shape=1e-3, max_iter=200, random_state=0).fit(X)
    for name in ("components_", "loadings_", "loadings_log_", "objective_history_"):
        assert np.all(np.isfinite(getattr(est, name))), name
    assert np.all(np.isfinite(est.transform(X)))
    assert np.isfinite(est.score(X))


def test_fixed_priors_are_kept(example):
    X = example[0][:50, :60]
    est = HierarchicalPMF(
        2, learn_prior="none", prior_shape=0.7, prior_rate=2.0, max_iter=50, random_state=0
    )
    with pytest.warns(ConvergenceWarning):
        est.fit(X)
    assert_array_equal(est.prior_loadings_shape_, 0.7)
    assert_array_equal(est.prior_components_rate_, 2.0)
    rate_only = HierarchicalPMF(
        2, learn_prior="rate", prior_shape=0.7, max_iter=30, random_state=0
    ).fit(X)
    assert_array_equal(rate_only.prior_loadings_shape_, 0.7)
    assert np.all(np.diff(rate_only.objective_history_) >= -1e-10 * np.abs(rate_only.lower_bound_))


def test_warm_start_reads_the_fixed_priors_as_set_now(example):
    X = example[0][:50, :60]
    est = HierarchicalPMF(
        2,
        learn_prior="none",
        prior_shape=0.7,
        prior_rate=2.0,
        max_iter=5,
        random_state=0,
        warm_start=True,
    )
    with pytest.warns(ConvergenceWarning):
        est.fit(X)
    est.set_params(prior_shape=1.5, prior_rate=0.5)
    with pytest.warns(ConvergenceWarning):
        est.fit(X)
    assert_array_equal(est.prior_loadings_shape_, 1.5)
    assert_array_equal(est.prior_components_rate_, 0.5)
    # learn_prior="rate": the shapes are fixed at the new prior_shape, the rates learned
    est.set_params(learn_prior="rate", prior_shape=0.9)
    with pytest.warns(ConvergenceWarning):
        est.fit(X)
    assert_array_equal(est.prior_components_shape_, 0.9)
    assert not np.allclose(est.prior_components_rate_, 0.5)


@pytest.mark.parametrize(
    "params",
    [dict(learning_rate=0.1), dict(n_mc_samples=4), dict(learning_rate=0.1, n_mc_samples=4)],
)
@pytest.mark.parametrize("solver", ["vbem", "newton"])
def test_pathwise_parameters_with_another_solver_warn(example, solver, params):
    X = example[0][:30, :40]
    est = HierarchicalPMF(2, solver=solver, max_iter=300, random_state=0, **params)
    with pytest.warns(UserWarning, match="used only with solver='pathwise'") as record:
        est.fit(X)
    message = " ".join(str(w.message) for w in record if "pathwise" in str(w.message))
    for name in params:
        assert f"{name}=" in message
    # the same fit as with the defaults: the values were not read
    plain = HierarchicalPMF(2, solver=solver, max_iter=300, random_state=0).fit(X)
    assert_array_equal(est.components_, plain.components_)


@pytest.mark.parametrize("solver", ["vbem", "newton"])
def test_warm_start_leaves_the_previous_arrays_alone(example, solver):
    X = example[0][:50, :60]
    est = HierarchicalPMF(2, solver=solver, max_iter=5, random_state=0, warm_start=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        est.fit(X)
        kept = est.loadings_shape_
        before = kept.copy()
        est.fit(X)
    assert_array_equal(kept, before)  # the refit wrote new arrays, not into the kept ones
    assert est.loadings_shape_ is not kept


def test_warm_start_continues_and_pickles(example):
    X = example[0][:50, :60]
    est = HierarchicalPMF(2, max_iter=10, random_state=0, warm_start=True).fit(X)
    first = est.lower_bound_
    est.fit(X)
    assert est.objective_history_[0] >= first - 1e-10 * abs(first)
    assert est.lower_bound_ >= first
    back = pickle.loads(pickle.dumps(est))
    assert_array_equal(back.transform(X), est.transform(X))


def test_score_in_pipeline_and_grid_search(example):
    X = example[0][:60, :80]
    pipe = make_pipeline(FunctionTransformer(), HierarchicalPMF(max_iter=100, random_state=0))
    grid = GridSearchCV(pipe, {"hierarchicalpmf__n_components": [1, 3]}, cv=2).fit(X)
    assert grid.best_params_["hierarchicalpmf__n_components"] == 3
    assert np.isfinite(grid.best_score_)


def test_three_solvers_reach_the_same_elbo(example, vbem_fit):
    X = sparse.csr_matrix(example[0])
    newton = HierarchicalPMF(3, solver="newton", tol=1e-7, max_iter=150, random_state=0).fit(X)
    pathwise = HierarchicalPMF(3, solver="pathwise", max_iter=1000, random_state=0)
    with pytest.warns(ConvergenceWarning):
        pathwise.fit(X)
    # Newton climbs the same augmented bound as VBEM, never down
    lb = newton.objective_history_
    assert np.all(np.diff(lb) >= -1e-10 * np.abs(lb[1:]))
    ref = vbem_fit.augmented_lower_bound_
    for est in (newton, pathwise):
        assert est.augmented_lower_bound_ == pytest.approx(ref, rel=0.01)
    # the exact ELBO (Monte Carlo), which the pathwise solver maximises
    exact = [est.exact_lower_bound_ for est in (vbem_fit, newton, pathwise)]
    assert max(exact) - min(exact) < 0.01 * abs(max(exact)), exact
    assert pathwise.lower_bound_ == pytest.approx(exact[2], rel=0.01)
    for est in (newton, pathwise):
        _, corr = match_components(example[2], est.components_.T)
        assert np.all(corr > 0.95), corr


def test_held_out_counts_stop_the_fit_at_its_best_iteration():
    rng = np.random.default_rng(0)
    X = rng.poisson(rng.gamma(0.5, 2.0, (300, 5)) @ rng.gamma(0.5, 2.0, (5, 200)))
    # a binomial thinning: the held-out counts of the same rows
    X_fit, X_val = thin_counts(X, 0.2, random_state=0)
    kw = dict(n_components=20, random_state=0, tol=1e-9, max_iter=500)
    est = HierarchicalPMF(n_iter_no_change=3, **kw).fit(X_fit, X_val=X_val)
    scores = est.validation_scores_
    # it stopped early, three iterations past its best, and went back to the best
    assert est.n_iter_ < 100 and est.converged_
    assert scores.shape == (est.n_iter_,) and scores.argmax() == est.n_iter_ - 1
    rows = np.arange(300)
    depth = X_val.sum() / X_fit.sum()  # the held-out counts' means: the fit's times depth
    assert_allclose(est.poisson_loglik(X_val, users=rows, depth=depth), scores[-1], rtol=1e-12)
    # the kept fit is the plain fit stopped at that iteration, to the bit
    plain = HierarchicalPMF(**{**kw, "max_iter": est.n_iter_, "tol": 0.0}).fit(X_fit)
    assert plain.validation_scores_ is None
    assert_array_equal(plain.loadings_shape_, est.loadings_shape_)
    assert_array_equal(plain.components_, est.components_)
    assert_array_equal(plain.objective_history_, est.objective_history_)
    # a patience longer than the held-out score's dips reaches a better held-out fit
    patient = HierarchicalPMF(**kw).fit(X_fit, X_val=X_val)
    assert patient.validation_scores_[-1] > scores[-1]
    with pytest.raises(ValueError, match=r"X_val must hold counts of the rows of X"):
        HierarchicalPMF(2).fit(X_fit, X_val=X_val[:10])
    with pytest.raises(TypeError, match=r"stop_crit.*X_val=held_out_counts"):
        HierarchicalPMF(stop_crit="val-llk")


def test_a_diverging_fit_says_so_and_not_to_raise_max_iter():
    # learning_rate=10 took the pathwise ELBO estimates to 1e69; the warning advised more
    # iterations
    X = make_single_cell(100, 40, 3, random_state=0)[0]
    with pytest.warns(ConvergenceWarning, match=r"diverged: its ELBO went from .* To fit, "
                      "lower learning_rate"):  # fmt: skip
        HierarchicalPMF(3, solver="pathwise", learning_rate=10, max_iter=50, random_state=0).fit(X)
    # VBEM takes no step: one count of 2**62 beside counts of a few loses the bound's
    # precision, and the advice was to lower the learning_rate that VBEM does not read
    rng = np.random.default_rng(2)
    L = rng.gamma(0.3, 1 / rng.gamma(5, 0.2, 600)[:, None], (600, 4))
    F = rng.gamma(0.3, 1 / rng.gamma(5, 0.4, 200)[:, None], (200, 4))
    Y = sparse.csr_matrix(rng.poisson(L @ F.T).astype(np.int64))
    Y.data[0] = 2**62
    with pytest.warns(ConvergenceWarning, match=r"diverged: .* To fit, look for counts far "
                      "larger than the others") as caught:  # fmt: skip
        HierarchicalPMF(4, max_iter=5, random_state=0).fit(Y)
    assert not any("learning_rate" in str(w.message) for w in caught)
