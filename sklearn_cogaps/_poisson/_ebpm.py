"""Empirical Bayes Poisson means (EBPM): the prior solvers of WeightedBackgroundPMF.

The problem (Wang, EBPMF-WBG, section 4): observations ``y_i ~ Poisson(s_i lambda_i)``
with known exposures ``s_i``, ``lambda_i ~ g`` i.i.d.; fit ``g`` in a family by maximising
the marginal log-likelihood ``sum_i log p(y_i | g)``, then return the posterior
``p(lambda_i | y_i, g)`` through its mean and ``E[log lambda_i]``.

Every family here is represented by one data structure, a *point-gamma mixture*

    g = pi0 * delta_0 + sum_m weights_m * Gamma(shape_m, rate_m),

(``pi0 + sum(weights) = 1``) so the posterior, the marginal likelihood and the KL term are
computed by one function whatever the family:

- ``"gamma_mixture"``: fixed grid of Gamma(a, a) components (mean 1), weights fitted by a
  sequential quadratic programming solver of the convex mixture problem (mix-SQP);
- ``"gamma"``: one Gamma(a, b), both fitted;
- ``"point_gamma"``: ``pi0 * delta_0 + (1 - pi0) Gamma(a, b)``, the three fitted jointly;
- ``"exponential_mixture"``: Exp components (Gamma with shape 1) on a geometric grid of
  scales chosen from the data, weights fitted by mix-SQP.

The counts ``y`` may be non-integer (expected counts of a variational algorithm); the
Poisson "likelihood" is then ``(s lambda)^y exp(-s lambda) / Gamma(y + 1)``.
"""

import numpy as np
from scipy.optimize import minimize
from scipy.special import digamma, gammaln

from .._utils._openmp_helpers import kernel_threads
from ._ebpm_fast import component_loglik, mixture_posterior
from ._mixsqp import mixsqp_solve

__all__ = [
    "DEFAULT_GAMMA_GRID",
    "EBPM_FAMILIES",
    "ebpm",
    "ebpm_exponential_mixture",
    "ebpm_gamma",
    "ebpm_gamma_mixture",
    "ebpm_point_gamma",
    "ebpm_posterior",
    "ebpm_kl",
    "ebpm_mixture_near",
    "mixsqp",
]

EBPM_FAMILIES = ("gamma_mixture", "gamma", "point_gamma", "exponential_mixture")

# The shape (= rate) grid of the R package ebpmf.alpha's default gamma-mixture prior
# ("bg_prior"): 34 components of mean 1, from nearly a point mass at 0 (1e-16) to nearly
# a point mass at 1 (1000). The values are R's, to the last bit (R's seq() gives
# 0.060000000000000005 where 0.06 is typed).
DEFAULT_GAMMA_GRID = np.array(
    [0.01, 0.02, 0.03, 0.04, 0.05, 0.060000000000000005, 0.06999999999999999, 0.08, 0.09]
    + [0.09999999999999999, 0.2, 0.30000000000000004, 0.4, 0.5, 0.6000000000000001, 0.7]
    + [0.8, 0.9, 1.0, 3.0, 5.0, 7.0, 9.0, 11.0, 13.0, 15.0, 20.0, 50.0, 75.0, 100.0, 200.0]
    + [1000.0, 1e-08, 1e-16]
)

_LOG_BOUND = 40.0  # |log shape|, |log rate| stay below this in the parametric fits


class EBPMResult:
    """The solution of one EBPM problem.

    Attributes
    ----------
    pi0 : float
        Prior mass of the point at zero.
    weights : ndarray of shape (n_mix,)
        Prior weights of the Gamma components.
    shape, rate : ndarray of shape (n_mix,)
        Shapes and rates of the Gamma components.
    mean : ndarray of shape (n,)
        Posterior means ``E[lambda_i | y_i]``.
    mean_log : ndarray of shape (n,)
        Posterior ``E[log lambda_i | y_i]`` (``-inf`` where the posterior has an atom at 0).
    log_likelihood : float
        The maximised marginal log-likelihood ``sum_i log p(y_i | g)``.
    kl : float
        ``KL(q || g)`` of the posterior ``q`` to the prior (section 4, eq. 4.6).
    """

    def __init__(self, pi0, weights, shape, rate, mean, mean_log, log_likelihood, kl):
        self.pi0 = float(pi0)
        self.weights = weights
        self.shape = shape
        self.rate = rate
        self.mean = mean
        self.mean_log = mean_log
        self.log_likelihood = float(log_likelihood)
        self.kl = float(kl)

    def __repr__(self):
        return (
            f"EBPMResult(pi0={self.pi0:.4g}, n_mix={self.weights.size}, "
            f"log_likelihood={self.log_likelihood:.6g}, kl={self.kl:.6g})"
        )


# Operations per observation and component of the grid in the kernels (a log-gamma and two
# log1p, or an exponential and a digamma), for the thread count; observations are
# independent, so any thread count gives the same bits.
_OPS_PER_COMPONENT = 60


def _component_loglik(y, s, shape, rate):
    """log NB marginal of each observation under each Gamma component, shape (n, n_mix).

    ``p(y | a, b, s) = Gamma(y + a) / (Gamma(a) Gamma(y + 1)) (b / (b + s))^a (s / (b + s))^y``.
    """
    out = np.empty((y.size, shape.size))
    shape = np.ascontiguousarray(shape, dtype=np.float64)
    rate = np.ascontiguousarray(rate, dtype=np.float64)
    with np.errstate(divide="ignore"):
        log_rate = np.log(rate)
    component_loglik(
        np.ascontiguousarray(y, dtype=np.float64),
        np.ascontiguousarray(s, dtype=np.float64),
        shape,
        rate,
        gammaln(shape),
        log_rate,
        out,
        kernel_threads(_OPS_PER_COMPONENT * y.size * max(shape.size, 1)),
    )
    return out


def ebpm_posterior(y, s, pi0, weights, shape, rate):
    """Posterior moments and marginal log-likelihood under a fixed point-gamma mixture prior.

    Parameters
    ----------
    y : ndarray of shape (n,)
        Non-negative (possibly non-integer) counts.
    s : ndarray of shape (n,)
        Non-negative exposures; ``y_i`` must be 0 where ``s_i`` is 0.
    pi0 : float
        Prior mass at zero.
    weights, shape, rate : ndarray of shape (n_mix,)
        Weights, shapes and rates of the Gamma components of the prior.

    Returns
    -------
    mean : ndarray of shape (n,)
        ``E[lambda_i | y_i]``.
    mean_log : ndarray of shape (n,)
        ``E[log lambda_i | y_i]``, ``-inf`` where the posterior keeps mass at 0.
    log_likelihood : float
        ``sum_i log p(y_i)``.
    """
    mean, mean_log, lp = _posterior_rows(y, s, pi0, weights, shape, rate)
    return mean, mean_log, float(np.sum(lp))


def _posterior_rows(y, s, pi0, weights, shape, rate, ll=None):
    """Posterior mean, E[log] and log p(y_i) of each observation.

    ``ll`` may pass the component log-likelihoods already computed.
    """
    y = np.ascontiguousarray(y, dtype=np.float64)
    s = np.ascontiguousarray(s, dtype=np.float64)
    shape = np.ascontiguousarray(shape, dtype=np.float64)
    rate = np.ascontiguousarray(rate, dtype=np.float64)
    # A component of weight 0 adds exactly 0 to every sum of the posterior: leave it out
    # (mix-SQP's weights are sparse, a few of the grid's 34), with the same bits.
    kept = np.asarray(weights) > 0
    if not kept.all():
        weights, shape, rate = np.asarray(weights)[kept], shape[kept], rate[kept]
        if ll is not None:
            ll = np.ascontiguousarray(ll[:, kept])
    if ll is None:
        ll = _component_loglik(y, s, shape, rate)
    with np.errstate(divide="ignore"):
        log_pi0 = float(np.log(pi0))
        log_w = np.log(np.ascontiguousarray(weights, dtype=np.float64))
    mean = np.empty(y.size)
    mean_log = np.empty(y.size)
    lp = np.empty(y.size)
    mixture_posterior(
        y,
        s,
        log_pi0,
        log_w,
        shape,
        rate,
        ll,
        mean,
        mean_log,
        lp,
        kernel_threads(_OPS_PER_COMPONENT * y.size * max(shape.size, 1)),
    )
    return mean, mean_log, lp


def ebpm_kl(y, s, mean, mean_log, log_likelihood):
    """``KL(q || g)`` from the posterior moments and the marginal log-likelihood.

    Wang, EBPMF-WBG, eq. 4.6: ``-KL = log p(y) - sum_i E_q[log p(y_i | lambda_i)]``, with
    ``E_q[log p(y | lambda)] = y log s + y E[log lambda] - s E[lambda] - log Gamma(y + 1)``
    (the terms in ``y`` vanish where ``y = 0``).

    Parameters
    ----------
    y, s : ndarray of shape (n,)
        Counts and exposures.
    mean, mean_log : ndarray of shape (n,)
        Posterior ``E[lambda]`` and ``E[log lambda]``.
    log_likelihood : float
        ``log p(y | g)``.

    Returns
    -------
    kl : float
        Non-negative up to round-off.
    """
    return float(np.sum(_expected_loglik_rows(y, s, mean, mean_log)) - log_likelihood)


def _expected_loglik_rows(y, s, mean, mean_log):
    """E_q[log p(y_i | lambda_i)] of each observation."""
    pos = y > 0
    out = -s * mean
    out[pos] += y[pos] * (np.log(s[pos]) + mean_log[pos]) - gammaln(y[pos] + 1.0)
    return out


def _result(y, s, pi0, weights, shape, rate, ll=None):
    mean, mean_log, lp = _posterior_rows(y, s, pi0, weights, shape, rate, ll)
    ll = float(np.sum(lp))
    kl = ebpm_kl(y, s, mean, mean_log, ll)
    return EBPMResult(pi0, weights, shape, rate, mean, mean_log, ll, kl)


# --------------------------------------------------------------------------- mix-SQP
def mixsqp(L, x0=None, tol=1e-10, max_iter=500):
    """Maximum-likelihood mixture weights by sequential quadratic programming (mix-SQP).

    Solves ``max_x (1/n) sum_i log((L x)_i)`` over the probability simplex, a convex
    problem, through the equivalent problem ``min f(x) = -(1/n) sum_i log((L x)_i) +
    sum_j x_j`` over ``x >= 0``, whose solution lies on the simplex (Kim, Carbonetto,
    Stephens & Anitescu 2020). Each iteration solves the quadratic model of ``f`` under
    ``x >= 0`` with an active-set method and takes a backtracking line search step. It
    stops when the KKT conditions hold to ``tol``: ``grad_j >= -tol`` for all ``j`` and
    ``|grad_j| <= tol`` wherever ``x_j > 0`` (compiled: ``_mixsqp``).

    Parameters
    ----------
    L : ndarray of shape (n, m)
        Non-negative likelihoods (each row may be scaled by a positive constant).
    x0 : ndarray of shape (m,) or None
        Starting weights (non-negative); None starts from the uniform weights.
    tol : float, default=1e-10
        Tolerance on the KKT conditions.
    max_iter : int, default=500
        Maximum number of SQP iterations.

    Returns
    -------
    x : ndarray of shape (m,)
        The weights, non-negative and summing to 1.
    kkt : float
        The KKT residual at ``x``.
    """
    L = np.ascontiguousarray(L, dtype=np.float64)
    m = L.shape[1]
    x = np.full(m, 1.0 / m) if x0 is None else np.array(x0, dtype=np.float64)
    if x.sum() <= 0 or np.any(L @ x <= 0):
        x = np.full(m, 1.0 / m)
    x /= x.sum()
    # a pass over L is a few operations per entry and a logarithm per row; the chunks'
    # sums are added in a fixed order, so the threads change only the speed
    kkt = mixsqp_solve(L, x, float(tol), int(max_iter), kernel_threads(4 * L.size))
    return x, kkt


def _fit_mixture(y, s, shape, rate, w_init, tol):
    """Mixture weights by mix-SQP, and the component log-likelihoods."""
    ll = _component_loglik(y, s, shape, rate)
    # the likelihoods scaled per observation, made in place (one temporary of ll's size)
    L = ll - np.max(ll, axis=1, keepdims=True)
    np.exp(L, out=L)
    w, _ = mixsqp(L, x0=w_init, tol=tol)
    return w, ll


def near_components(weights, shape, rate):
    """The components of a mixture's grid next to those of positive weight: each component
    in the support and its neighbours in the order of the components' means, then
    variances (the gamma mixture's concentrations, the exponential mixture's scales)."""
    mean = shape / rate
    order = np.lexsort((mean / rate, mean))
    rank = np.empty_like(order)
    rank[order] = np.arange(order.size)
    near = np.zeros(order.size, dtype=bool)
    for r in rank[weights > 0]:
        near[order[max(r - 1, 0) : r + 2]] = True
    return np.flatnonzero(near)


def ebpm_mixture_near(y, s, prior, tol=1e-10):
    """EBPM with a mixture prior whose weights may move only onto the components next to
    the support of ``prior``'s (:func:`near_components`), the others kept at 0.

    The weights maximise the marginal likelihood over that face of the simplex, which holds
    ``prior``'s weights, so the likelihood is at least theirs: a step of the coordinate
    ascent, not its solution. Only the face's likelihoods are computed (about five columns
    of the 34 of the default gamma grid, the solve's cost), and the posterior reads them
    alone, as it reads only the components of positive weight.

    Parameters
    ----------
    y, s : ndarray of shape (n,)
        Counts and exposures.
    prior : tuple (pi0, weights, shape, rate)
        The previous prior: its grid and its weights (pi0 is 0 for the mixtures).
    tol : float, default=1e-10
        KKT tolerance of the weight solver on the face.

    Returns
    -------
    result : EBPMResult
        With the whole grid's weights (0 off the face) and its shapes and rates.
    """
    y, s = _check_ys(y, s)
    _, weights, shape, rate = (np.asarray(v, dtype=np.float64) for v in prior)
    near = near_components(weights, shape, rate)
    w, ll = _fit_mixture(y, s, shape[near], rate[near], weights[near], tol)
    res = _result(y, s, 0.0, w, shape[near], rate[near], ll)
    res.weights = np.zeros(shape.size)
    res.weights[near] = w
    res.shape, res.rate = shape.copy(), rate.copy()
    return res


def ebpm_gamma_mixture(y, s, grid=None, weights_init=None, tol=1e-10):
    """EBPM with a mixture of Gamma(a, a) priors (mean 1) on a fixed grid of ``a``.

    The weights maximise the marginal log-likelihood, a convex problem solved to its KKT
    conditions by :func:`mixsqp`.

    Parameters
    ----------
    y : array-like of shape (n,)
        Non-negative counts (may be non-integer).
    s : array-like of shape (n,)
        Non-negative exposures.
    grid : array-like of shape (m,) or None
        Shapes (= rates) of the components; None uses the R package ebpmf.alpha's 34-value
        grid ``DEFAULT_GAMMA_GRID``.
    weights_init : array-like of shape (m,) or None
        Warm start of the weights (the solution does not depend on it).
    tol : float, default=1e-10
        KKT tolerance of the weight solver.

    Returns
    -------
    result : EBPMResult
        Fitted prior, posterior moments, marginal log-likelihood and KL.
    """
    y, s = _check_ys(y, s)
    a = DEFAULT_GAMMA_GRID.copy() if grid is None else np.asarray(grid, dtype=np.float64)
    w, ll = _fit_mixture(y, s, a, a, weights_init, tol)
    return _result(y, s, 0.0, w, a, a.copy(), ll)


def _exponential_grid(y, s, ratio):
    pos = (y > 0) & (s > 0)
    if not pos.any():
        sm = s[s > 0].mean() if np.any(s > 0) else 1.0
        return np.array([1.0 / sm])
    r = y[pos] / s[pos]
    lo, hi = r.min(), r.max()
    n = int(np.ceil(np.log(hi / lo) / np.log(ratio))) + 1 if hi > lo else 1
    return lo * ratio ** np.arange(n + 1) / ratio


def ebpm_exponential_mixture(y, s, scales=None, ratio=2.0, weights_init=None, tol=1e-10):
    """EBPM with a mixture of exponential priors on a geometric grid of scales.

    Parameters
    ----------
    y : array-like of shape (n,)
        Non-negative counts (may be non-integer).
    s : array-like of shape (n,)
        Non-negative exposures.
    scales : array-like of shape (m,) or None
        Means of the exponential components. None builds the grid
        ``theta_l = r_min * ratio**(l - 1)``, ``l = 0, ..., L`` with ``r_min``, ``r_max``
        the smallest and largest ``y_i / s_i`` over ``y_i > 0``, ``L`` the first power
        covering ``r_max``.
    ratio : float, default=2.0
        Ratio of consecutive scales of the automatic grid.
    weights_init : array-like of shape (m,) or None
        Warm start of the weights (used only if its size matches the grid).
    tol : float, default=1e-10
        KKT tolerance of the weight solver.

    Returns
    -------
    result : EBPMResult
        Fitted prior, posterior moments, marginal log-likelihood and KL.
    """
    y, s = _check_ys(y, s)
    if scales is None:
        scales = _exponential_grid(y, s, ratio)
    scales = np.asarray(scales, dtype=np.float64)
    shape = np.ones_like(scales)
    rate = 1.0 / scales
    if weights_init is not None and np.size(weights_init) != scales.size:
        weights_init = None
    w, ll = _fit_mixture(y, s, shape, rate, weights_init, tol)
    return _result(y, s, 0.0, w, shape, rate, ll)


def _point_gamma_objective(params, y, s, zero, fit_pi0):
    """Negative mean marginal log-likelihood of point-gamma and its gradient."""
    n = y.size
    if fit_pi0:
        pi0, la, lb = params
    else:
        pi0, (la, lb) = 0.0, params
    a, b = np.exp(la), np.exp(lb)
    with np.errstate(divide="ignore", invalid="ignore"):
        lg = _component_loglik(y, s, np.array([a]), np.array([b]))[:, 0]
    # d/da and d/db of the Gamma component's log marginal.
    da = _digamma_ratio(y, a) - np.log1p(s / b)
    db = a / b - (a + y) / (b + s)
    if pi0 > 0:
        # Mixture with the spike where y = 0; the spike has likelihood 0 where y > 0.
        lp = np.where(zero, np.logaddexp(np.log(pi0), np.log1p(-pi0) + lg), np.log1p(-pi0) + lg)
        resp = np.exp(np.log1p(-pi0) + lg - lp)  # posterior weight of the Gamma part
    else:
        lp = lg
        resp = np.ones(n)
    val = -np.sum(lp) / n
    g_la = -np.sum(resp * da) * a / n
    g_lb = -np.sum(resp * db) * b / n
    if not fit_pi0:
        return val, np.array([g_la, g_lb])
    # d/dpi0 log p_i = (1[y=0] - p_gamma_i) / p_i, made at the zeros only: elsewhere p_i
    # can underflow, and the quotient overflowed there before np.where discarded it
    d_pi = np.full(n, -1.0 / (1.0 - pi0))
    with np.errstate(divide="ignore", invalid="ignore"):
        d_pi[zero] = (1.0 - np.exp(lg[zero])) / np.exp(lp[zero])
    return val, np.array([-np.sum(d_pi) / n, g_la, g_lb])


def _digamma_ratio(y, a):
    """psi(y + a) - psi(a), for large ``a`` from the asymptotic series of psi, log1p(y/a) +
    y / (2 a (a + y)): the direct difference of two numbers near log a loses the digits of
    their difference, about y / a (the gradient of a prior collapsing to a point mass)."""
    if a < 1e7:
        return digamma(y + a) - digamma(a)
    return np.log1p(y / a) + y / (2.0 * a * (a + y))


def _moment_start(y, s):
    r = y / np.where(s > 0, s, 1.0)
    m = max(np.mean(r), 1e-8)
    v = np.var(r)
    a = np.clip(m * m / v if v > 0 else 1.0, 1e-3, 1e3)
    return a, a / m


def _fit_point_gamma(y, s, init, fit_pi0):
    zero = y == 0
    fit_pi0 = fit_pi0 and bool(zero.any())
    if init is None:
        a, b = _moment_start(y, s)
        pi0 = 0.5 * zero.mean() if fit_pi0 else 0.0
    else:
        pi0, a, b = init
        pi0 = min(max(pi0, 0.0), 1.0 - 1e-6) if fit_pi0 else 0.0
    la = np.clip(np.log(a), -_LOG_BOUND + 1, _LOG_BOUND - 1)
    lb = np.clip(np.log(b), -_LOG_BOUND + 1, _LOG_BOUND - 1)
    bounds = [(-_LOG_BOUND, _LOG_BOUND)] * 2
    x0 = [la, lb]
    if fit_pi0:
        bounds = [(0.0, 1.0 - 1e-12)] + bounds
        x0 = [pi0] + x0
    best = None
    for start in [x0] if init is None else [x0, None]:
        if start is None:  # second start from the moments, in case the warm start is poor
            a0, b0 = _moment_start(y, s)
            start = ([0.5 * zero.mean()] if fit_pi0 else []) + [np.log(a0), np.log(b0)]
        res = minimize(
            _point_gamma_objective,
            np.array(start, dtype=np.float64),
            args=(y, s, zero, fit_pi0),
            jac=True,
            method="L-BFGS-B",
            bounds=bounds,
            options={"maxiter": 2000, "ftol": 1e-15, "gtol": 1e-11},
        )
        if best is None or res.fun < best.fun:
            best = res
    if fit_pi0:
        pi0, la, lb = best.x
    else:
        pi0, (la, lb) = 0.0, best.x
    return float(pi0), float(np.exp(la)), float(np.exp(lb))


def ebpm_point_gamma(y, s, init=None):
    """EBPM with the point-gamma prior ``pi0 delta_0 + (1 - pi0) Gamma(a, rate b)``.

    ``pi0``, ``a`` and ``b`` maximise the marginal log-likelihood jointly (bounded
    quasi-Newton). Where no ``y_i`` is exactly 0 the spike cannot explain any observation
    and its maximum-likelihood mass is 0, so the fit is that of :func:`ebpm_gamma`.

    Parameters
    ----------
    y : array-like of shape (n,)
        Non-negative counts (may be non-integer).
    s : array-like of shape (n,)
        Non-negative exposures.
    init : tuple (pi0, a, b) or None
        Warm start; None starts from the moments of ``y / s``.

    Returns
    -------
    result : EBPMResult
        Fitted prior, posterior moments, marginal log-likelihood and KL.
    """
    y, s = _check_ys(y, s)
    pi0, a, b = _fit_point_gamma(y, s, init, fit_pi0=True)
    return _result(y, s, pi0, np.array([1.0 - pi0]), np.array([a]), np.array([b]))


def ebpm_gamma(y, s, init=None):
    """EBPM with a Gamma(a, rate b) prior, ``a`` and ``b`` fitted by maximum marginal likelihood.

    The posterior of each ``lambda_i`` is Gamma(a + y_i, b + s_i), so ``E[log lambda_i] =
    psi(a + y_i) - log(b + s_i)`` is finite, also where ``y_i = 0``.

    Parameters
    ----------
    y : array-like of shape (n,)
        Non-negative counts (may be non-integer).
    s : array-like of shape (n,)
        Non-negative exposures.
    init : tuple (a, b) or None
        Warm start; None starts from the moments of ``y / s``.

    Returns
    -------
    result : EBPMResult
        Fitted prior, posterior moments, marginal log-likelihood and KL.
    """
    y, s = _check_ys(y, s)
    init = None if init is None else (0.0, init[0], init[1])
    _, a, b = _fit_point_gamma(y, s, init, fit_pi0=False)
    return _result(y, s, 0.0, np.array([1.0]), np.array([a]), np.array([b]))


def ebpm(y, s, family, prior=None):
    """Solve one EBPM problem in the named family, warm-started from ``prior``.

    Parameters
    ----------
    y, s : ndarray of shape (n,)
        Counts and exposures.
    family : {"gamma_mixture", "gamma", "point_gamma", "exponential_mixture"}
        The prior family.
    prior : tuple (pi0, weights, shape, rate) or None
        The previous prior of the same family, used as warm start (and, for
        ``"gamma_mixture"``, as the grid).

    Returns
    -------
    result : EBPMResult
    """
    if family == "gamma_mixture":
        if prior is None:
            return ebpm_gamma_mixture(y, s)
        return ebpm_gamma_mixture(y, s, grid=prior[2], weights_init=prior[1])
    if family == "gamma":
        return ebpm_gamma(y, s, init=None if prior is None else (prior[2][0], prior[3][0]))
    if family == "point_gamma":
        init = None if prior is None else (prior[0], prior[2][0], prior[3][0])
        return ebpm_point_gamma(y, s, init=init)
    if family == "exponential_mixture":
        return ebpm_exponential_mixture(y, s, weights_init=None if prior is None else prior[1])
    raise ValueError(f"Unknown EBPM family {family!r}; expected one of {EBPM_FAMILIES}.")


def _check_ys(y, s):
    y = np.asarray(y, dtype=np.float64).ravel()
    s = np.asarray(s, dtype=np.float64).ravel()
    if y.shape != s.shape:
        raise ValueError(f"y and s must have the same length; got {y.size} and {s.size}.")
    if np.any(~np.isfinite(y)) or np.any(y < 0) or np.any(~np.isfinite(s)) or np.any(s < 0):
        raise ValueError("y and s must be finite and non-negative.")
    if np.any((s == 0) & (y > 0)):
        raise ValueError("y must be 0 wherever the exposure s is 0 (its likelihood is 0).")
    return y, s
