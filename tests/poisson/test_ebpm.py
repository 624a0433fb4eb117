"""The EBPM prior solvers: brute-force integration, optimality of the fitted priors, KL."""

from pathlib import Path

import numpy as np
import pytest
from scipy import integrate, stats
from scipy.special import gammaln

from sklearn_cogaps._poisson._ebpm import (
    DEFAULT_GAMMA_GRID,
    _component_loglik,
    ebpm,
    ebpm_exponential_mixture,
    ebpm_gamma,
    ebpm_gamma_mixture,
    ebpm_kl,
    ebpm_mixture_near,
    ebpm_point_gamma,
    ebpm_posterior,
    mixsqp,
    near_components,
)

FAMILIES = ["gamma_mixture", "gamma", "point_gamma", "exponential_mixture"]


def _data(n=60, seed=0, zeros=True, integer=True):
    rng = np.random.default_rng(seed)
    lam = np.where(rng.random(n) < 0.3, 0.0 if zeros else 0.05, rng.gamma(2.0, 1.5, n))
    s = rng.uniform(0.5, 2.0, n)
    y = rng.poisson(s * lam).astype(float)
    if not integer:
        y = y + rng.uniform(0.0, 0.5, n) * (y > 0)
    return y, s


def _brute_force(y, s, res):
    """p(y_i), E[lambda_i], E[log lambda_i] by quadrature over each Gamma component."""
    out = []
    for yi, si in zip(y, s):

        def lik(lam, yi=yi, si=si):
            return np.exp(yi * np.log(si * lam) - si * lam - gammaln(yi + 1.0))

        p, m1, ml = res.pi0 * (yi == 0), 0.0, 0.0
        for wm, a, b in zip(res.weights, res.shape, res.rate):
            if wm == 0:
                continue
            dens = stats.gamma(a, scale=1.0 / b).pdf
            # Split the range at the posterior mode region so quad sees the mass.
            hi = (a + yi) / (b + si) * 50 + 50.0 / (b + si)
            pts = [(a + yi) / (b + si)]
            kw = dict(points=pts, limit=200, epsabs=0, epsrel=1e-11)
            p_m = integrate.quad(lambda t: lik(t) * dens(t), 0, hi, **kw)[0]
            m_m = integrate.quad(lambda t: t * lik(t) * dens(t), 0, hi, **kw)[0]
            l_m = integrate.quad(lambda t: np.log(t) * lik(t) * dens(t), 0, hi, **kw)[0]
            p += wm * p_m
            m1 += wm * m_m
            ml += wm * l_m
        out.append((p, m1 / p, ml / p if res.pi0 * (yi == 0) == 0 else -np.inf))
    return np.array(out)


@pytest.mark.parametrize("family", FAMILIES)
def test_posterior_matches_numerical_integration(family):
    y, s = _data(n=12, seed=1, integer=family != "point_gamma")
    if family == "point_gamma":
        y[:3] = 0.0
    res = ebpm(y, s, family)
    # Keep the components with weight for the quadrature (others do not matter).
    bf = _brute_force(y, s, res)
    assert res.log_likelihood == pytest.approx(np.sum(np.log(bf[:, 0])), rel=1e-7)
    np.testing.assert_allclose(res.mean, bf[:, 1], rtol=1e-6)
    finite = np.isfinite(bf[:, 2])
    np.testing.assert_allclose(res.mean_log[finite], bf[finite, 2], rtol=1e-6, atol=1e-8)
    assert np.all(np.isneginf(res.mean_log[~finite]))


def test_posterior_spike_and_zero_exposure():
    y = np.array([0.0, 0.0, 3.0])
    s = np.array([1.0, 0.0, 2.0])
    mean, mean_log, ll = ebpm_posterior(
        y, s, 0.3, np.array([0.7]), np.array([2.0]), np.array([1.0])
    )
    # Zero exposure: the posterior is the prior.
    assert mean[1] == pytest.approx(0.7 * 2.0)
    assert np.isneginf(mean_log[0]) and np.isneginf(mean_log[1])
    assert np.isfinite(mean_log[2])
    # Gamma prior alone: E[log] finite where y = 0 (no atom at zero).
    _, ml, _ = ebpm_posterior(y, s, 0.0, np.array([1.0]), np.array([2.0]), np.array([1.0]))
    assert np.all(np.isfinite(ml))


def _loglik(y, s, pi0, weights, shape, rate):
    return ebpm_posterior(y, s, pi0, weights, shape, rate)[2]


@pytest.mark.parametrize("family", ["gamma_mixture", "exponential_mixture"])
def test_mixture_weights_are_optimal(family):
    y, s = _data(n=300, seed=2, zeros=False, integer=False)
    res = ebpm(y, s, family)
    ll0 = res.log_likelihood
    # KKT: the directional derivative towards every vertex of the simplex is <= 0.
    Lc = np.exp(
        np.array(
            [
                [
                    _loglik(
                        np.array([yi]),
                        np.array([si]),
                        0.0,
                        np.array([1.0]),
                        np.array([a]),
                        np.array([b]),
                    )
                    for a, b in zip(res.shape, res.rate)
                ]
                for yi, si in zip(y, s)
            ]
        )
    )
    grad = Lc.T @ (1.0 / (Lc @ res.weights))  # d ll / d w_m
    n = y.size
    assert np.all(grad <= n * (1 + 1e-7))
    assert np.allclose(grad[res.weights > 1e-6], n, rtol=1e-6)
    # No nearby prior is better: move mass between pairs of components.
    rng = np.random.default_rng(0)
    for _ in range(30):
        d = rng.normal(size=res.weights.size)
        d -= d.mean()
        step = 1e-3
        w = res.weights + step * d
        if np.any(w < 0):
            w = np.maximum(w, 0.0)
        w /= w.sum()
        assert _loglik(y, s, 0.0, w, res.shape, res.rate) <= ll0 + 1e-9 * abs(ll0)


def test_mixsqp_matches_em_run_to_convergence():
    y, s = _data(n=200, seed=3, zeros=False, integer=False)
    a = DEFAULT_GAMMA_GRID
    L = np.exp(
        np.array(
            [
                [
                    _loglik(
                        np.array([yi]),
                        np.array([si]),
                        0.0,
                        np.array([1.0]),
                        np.array([g]),
                        np.array([g]),
                    )
                    for g in a
                ]
                for yi, si in zip(y, s)
            ]
        )
    )
    x, kkt = mixsqp(L)
    assert kkt <= 1e-8
    w = np.full(a.size, 1.0 / a.size)
    for _ in range(20000):
        w = w * (L.T @ (1.0 / (L @ w))) / y.size
    obj = lambda z: np.sum(np.log(L @ z))
    assert obj(x) >= obj(w) - 1e-8
    assert obj(x) - obj(w) < 1e-3
    assert x.sum() == pytest.approx(1.0)
    assert np.all(x >= 0)


def test_mixsqp_warm_start_gives_same_solution():
    y, s = _data(n=200, seed=4, zeros=False, integer=False)
    r1 = ebpm_gamma_mixture(y, s)
    r2 = ebpm_gamma_mixture(y, s, weights_init=np.eye(DEFAULT_GAMMA_GRID.size)[5])
    assert r2.log_likelihood == pytest.approx(r1.log_likelihood, rel=1e-10)


def test_the_components_near_the_support_are_its_neighbours_in_the_grids_order():
    """The gamma grid (mean 1) in the order of its variances 1/a, the exponential grid in
    the order of its scales; the grid's own order is not theirs (1e-8 and 1e-16 at its
    end)."""
    a = DEFAULT_GAMMA_GRID
    w = np.zeros(a.size)
    w[[list(a).index(1.0), list(a).index(1e-16)]] = 0.5
    assert set(a[near_components(w, a, a)]) == {3.0, 1.0, 0.9, 1e-8, 1e-16}
    w = np.zeros(a.size)
    w[list(a).index(1000.0)] = 1.0
    assert set(a[near_components(w, a, a)]) == {1000.0, 200.0}
    scales = np.array([4.0, 1.0, 8.0, 2.0])
    near = near_components(np.array([0.0, 0.0, 0.0, 1.0]), np.ones(4), 1 / scales)
    assert list(near) == [0, 1, 3]  # scales 4, 1 and 2 around 2


@pytest.mark.parametrize("family", ["gamma_mixture", "exponential_mixture"])
def test_a_solve_near_the_support_raises_the_likelihood_and_keeps_an_optimum(family):
    """From weights off the optimum, the screened solve moves them only next to their
    support and never lowers the marginal likelihood; from the whole grid's optimum it
    gives that optimum back (its support is its own neighbourhood)."""
    y, s = _data(n=300, seed=5, zeros=False, integer=False)
    full = ebpm(y, s, family)
    m = full.weights.size
    prior = (0.0, np.eye(m)[m // 2], full.shape, full.rate)
    start = ebpm_posterior(y, s, 0.0, *prior[1:])[2]
    near = ebpm_mixture_near(y, s, prior)
    kept = near_components(prior[1], full.shape, full.rate)
    assert np.all(near.weights[np.setdiff1d(np.arange(m), kept)] == 0)
    assert near.weights.sum() == pytest.approx(1.0)
    assert start <= near.log_likelihood <= full.log_likelihood + 1e-9
    again = ebpm_mixture_near(y, s, (0.0, full.weights, full.shape, full.rate))
    assert again.log_likelihood == pytest.approx(full.log_likelihood, rel=1e-10)
    np.testing.assert_allclose(again.mean, full.mean, rtol=1e-6)
    assert again.kl == pytest.approx(full.kl, rel=1e-6, abs=1e-8)


@pytest.mark.parametrize("family", ["gamma", "point_gamma"])
def test_parametric_prior_is_local_maximum(family):
    y, s = _data(n=200, seed=5)
    res = ebpm(y, s, family)
    ll0 = res.log_likelihood
    a, b, pi0 = res.shape[0], res.rate[0], res.pi0
    if family == "point_gamma":
        assert 0.05 < pi0 < 0.6  # the data have 30% true zeros
    for da in (-1e-3, 0.0, 1e-3):
        for db in (-1e-3, 0.0, 1e-3):
            for dp in (-1e-3, 0.0, 1e-3) if family == "point_gamma" else (0.0,):
                p = min(max(pi0 + dp, 0.0), 1.0)
                ll = _loglik(
                    y, s, p, np.array([1 - p]), np.array([a * (1 + da)]), np.array([b * (1 + db)])
                )
                assert ll <= ll0 + 1e-8 * abs(ll0)


def test_gamma_recovers_true_prior_and_point_gamma_reduces_to_gamma():
    rng = np.random.default_rng(6)
    n = 5000
    s = rng.uniform(0.5, 3.0, n)
    y = rng.poisson(s * rng.gamma(3.0, 1.0 / 2.0, n)).astype(float)
    res = ebpm_gamma(y, s)
    assert res.shape[0] == pytest.approx(3.0, rel=0.2)
    assert res.rate[0] == pytest.approx(2.0, rel=0.2)
    # Without exact zeros the spike cannot help: point-gamma is the gamma fit.
    y2 = y + 0.5
    r_g, r_pg = ebpm_gamma(y2, s), ebpm_point_gamma(y2, s)
    assert r_pg.pi0 == 0.0
    assert r_pg.log_likelihood == pytest.approx(r_g.log_likelihood, rel=1e-9)


def test_gamma_kl_matches_closed_form():
    y, s = _data(n=50, seed=7)
    res = ebpm_gamma(y, s)
    a, b = res.shape[0], res.rate[0]
    c, d = a + y, b + s
    # KL(Gamma(c, d) || Gamma(a, b)), summed over observations.
    from scipy.special import digamma

    kl = np.sum(
        (c - a) * digamma(c)
        - gammaln(c)
        + gammaln(a)
        + a * (np.log(d) - np.log(b))
        + c * (b - d) / d
    )
    assert res.kl == pytest.approx(kl, rel=1e-8)
    assert ebpm_kl(y, s, res.mean, res.mean_log, res.log_likelihood) == pytest.approx(res.kl)


@pytest.mark.parametrize("family", FAMILIES)
def test_kl_non_negative_and_mean_log_finite_without_atom(family):
    y, s = _data(n=100, seed=8, zeros=False, integer=False)
    y = y + 0.1  # no exact zero: no posterior atom at 0 in any family
    res = ebpm(y, s, family)
    assert res.kl >= -1e-8
    assert np.all(np.isfinite(res.mean_log))
    assert np.all(res.mean > 0)


def test_exponential_grid_covers_the_data():
    y, s = _data(n=100, seed=9, zeros=False)
    res = ebpm_exponential_mixture(y, s)
    scales = 1.0 / res.rate
    r = y[y > 0] / s[y > 0]
    assert scales.min() <= r.min() and scales.max() >= r.max()
    assert np.all(res.shape == 1.0)


def test_invalid_inputs():
    with pytest.raises(ValueError, match="same length"):
        ebpm_gamma(np.ones(3), np.ones(4))
    with pytest.raises(ValueError, match="non-negative"):
        ebpm_gamma(np.array([-1.0]), np.ones(1))
    with pytest.raises(ValueError, match="exposure s is 0"):
        ebpm_gamma(np.array([1.0]), np.zeros(1))
    with pytest.raises(ValueError, match="Unknown EBPM family"):
        ebpm(np.ones(2), np.ones(2), "lognormal")


def test_compiled_digamma_matches_scipy():
    from scipy.special import digamma as sp_digamma

    from sklearn_cogaps._poisson._ebpm_fast import _digamma_for_tests as digamma

    x = np.concatenate([[1e-16, 1e-8, 1e-3], np.geomspace(0.01, 1e6, 400), [9.999, 10.0, 10.001]])
    out = np.empty_like(x)
    digamma(x, out)
    np.testing.assert_allclose(out, sp_digamma(x), rtol=2e-15, atol=2e-15)


def test_same_bits_for_any_number_of_threads():
    from threadpoolctl import threadpool_limits

    y, s = _data(n=6000, seed=10, zeros=False, integer=False)  # large enough to use threads
    with threadpool_limits(1, user_api="openmp"):
        one = ebpm_gamma_mixture(y, s)
    two = ebpm_gamma_mixture(y, s)
    np.testing.assert_array_equal(one.weights, two.weights)
    np.testing.assert_array_equal(one.mean_log, two.mean_log)
    assert one.log_likelihood == two.log_likelihood


def test_mixsqp_converges_where_the_objective_changes_below_a_plain_sums_error():
    """Near its optimum the line search compares values of f that differ by 1e-15 relative;
    with a plain sum of the logarithms this problem stalled at a KKT residual of 1e-7 until
    max_iter (tests/data/mixsqp/README.md)."""
    case = np.load(Path(__file__).parents[1] / "data" / "mixsqp" / "near_optimum_stall.npz")
    ll = _component_loglik(case["y"], case["s"], DEFAULT_GAMMA_GRID, DEFAULT_GAMMA_GRID)
    L = np.exp(ll - ll.max(axis=1, keepdims=True))
    x, kkt = mixsqp(L, x0=case["x0"], max_iter=10)
    assert kkt <= 1e-10
    assert x.sum() == pytest.approx(1.0)


def test_mixsqp_of_many_rows_is_the_same_on_any_number_of_threads():
    """The passes over 30,000 rows run in 14 chunks whose sums are added in order: one
    thread, two and three give the same bits, and the solution is optimal (KKT), above
    EM's iterates."""
    from sklearn_cogaps._poisson._mixsqp import mixsqp_solve

    y, s = _data(n=30000, seed=6, zeros=False, integer=False)
    ll = _component_loglik(y, s, DEFAULT_GAMMA_GRID, DEFAULT_GAMMA_GRID)
    L = np.exp(ll - ll.max(axis=1, keepdims=True))
    solutions = []
    for n_threads in (1, 2, 3):
        x = np.full(L.shape[1], 1.0 / L.shape[1])
        kkt = mixsqp_solve(L, x, 1e-10, 500, n_threads)
        solutions.append((x, kkt))
    for x, kkt in solutions[1:]:
        np.testing.assert_array_equal(x, solutions[0][0])
        assert kkt == solutions[0][1]
    x, kkt = solutions[0]
    assert kkt <= 1e-8
    w = np.full(L.shape[1], 1.0 / L.shape[1])
    for _ in range(300):
        w = w * (L.T @ (1.0 / (L @ w))) / L.shape[0]
    obj = lambda z: np.sum(np.log(L @ z))
    assert obj(x) >= obj(w) - 1e-8 * abs(obj(w))


def test_marginal_of_a_collapsed_gamma_is_the_poisson_likelihood():
    """A Gamma(a, a / mu) prior with a huge shape is a point mass at mu: its marginal is
    Poisson(s mu). lgamma(y + a) - lgamma(a) taken directly lost every digit there (a fitted
    prior reached a ~ 1e16, and the KL of its topic came out at -142,948)."""
    from scipy.stats import poisson

    y = np.array([0.0, 1.0, 3.0, 7.5, 40.0])
    s = np.array([0.5, 1.0, 2.0, 3.0, 30.0])
    mu = 1.3
    for a in (1e9, 1e12, 1e16):
        ll = _component_loglik(y, s, np.array([a]), np.array([a / mu]))[:, 0]
        expected = y * np.log(s * mu) - s * mu - gammaln(y + 1.0)
        np.testing.assert_allclose(ll, expected, rtol=1e-6, atol=1e-6)
    ll = _component_loglik(
        np.array([3.0]), np.array([2.0]), np.array([1e16]), np.array([1e16 / mu])
    )
    assert ll[0] == pytest.approx(poisson.logpmf(3, 2.0 * mu), rel=1e-9)
    # below the switch the direct difference is used, and both agree across it
    for a in (9.9e6, 1.01e7):
        ll = _component_loglik(y, s, np.array([a]), np.array([a / mu]))[:, 0]
        direct = gammaln(y + a) - gammaln(a) - gammaln(y + 1) - a * np.log1p(s * mu / a)
        direct -= y * np.log1p(a / (mu * s))
        np.testing.assert_allclose(ll, direct, rtol=1e-7, atol=1e-7)
