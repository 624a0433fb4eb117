"""Hierarchical Poisson matrix factorisation: the variational family, its ELBO and the
updates of the three solvers (Sarkar 2021).

The model: ``x_ij ~ Poisson((L F')_ij)`` with Gamma priors on ``l_ik`` and ``f_jk`` whose
hyperparameters are learned by empirical Bayes; ``q(l_ik) = Gamma(alpha_ik, beta_k)``.
Sarkar (2021) derives the augmented ELBO (section 3, "Methods", with the multinomial
``q(z)`` of Cemgil 2009), Cemgil's coordinate updates (VBEM), one-dimensional
Newton-Raphson updates of the same bound, and the pathwise gradient of the exact ELBO (eq.
32). Every pass over the data (``_hpmf_fast``) visits only the stored counts.
"""

import functools

import numpy as np
from scipy import sparse
from scipy.special import digamma, gammaln, polygamma

from .._utils._openmp_helpers import kernel_threads
from .._utils._seeding import draw_seeds
from .._utils._validation import canonical_csr
from . import _hpmf_fast as _fast
from ._block_counts import compressed, entry_sums, row_entry_sums

# Bounds of the learned prior shapes: the empirical-Bayes shape equation has no finite root
# when every posterior mean of a component is equal.
_SHAPE_MIN, _SHAPE_MAX = 1e-6, 1e8
# Draws of q whose data terms share one pass over the counts in the Monte Carlo ELBO: its
# memory is this many copies of the factors.
_DRAWS_A_PASS = 4
# Smallest posterior shape the gradient solvers may reach (the pathwise gradient of a Gamma
# sample is unstable at tiny shapes).
_ALPHA_MIN = 1e-3


# ---------------------------------------------------------------------------------------------
# Data and model pieces shared by the solvers
# ---------------------------------------------------------------------------------------------


class _Counts:
    """X stored twice, CSR for the row passes and CSC for the column passes, zeros dropped.

    The CSC copy and the constant ``sum ln Gamma(x + 1)`` are made on first use: the rows of
    ``transform`` need neither."""

    def __init__(self, X):
        # a canonical CSR matrix without stored zeros is used as it is, without a copy
        Xr = canonical_csr(X)
        self.shape = Xr.shape
        self.r = compressed(Xr)
        self.row_sums = np.asarray(Xr.sum(axis=1)).ravel()
        self.nnz = Xr.nnz

    @functools.cached_property
    def c(self):
        """The CSC copy, from the CSR one."""
        indptr, indices, data = self.r
        Xr = sparse.csr_matrix((data, indices, indptr), shape=self.shape)
        return compressed(Xr.tocsc())

    @functools.cached_property
    def column_nnz(self):
        """Each column's number of stored (positive) counts."""
        return np.bincount(self.r[1], minlength=self.shape[1])

    @functools.cached_property
    def _entry_sums(self):
        return entry_sums(*row_entry_sums(self.r), self.row_sums)

    @property
    def log_factorial(self):
        """``sum ln Gamma(x + 1)`` over the stored counts."""
        return self._entry_sums[0]

    @property
    def xlogx(self):
        """``sum x ln x`` over the stored counts."""
        return self._entry_sums[1]

    @property
    def total(self):
        """``sum x`` over the stored counts."""
        return self._entry_sums[2]


class _Side:
    """q(l_ik) = Gamma(alpha_ik, beta_k) with its Gamma(a_k, b_k) prior (one side: L or F)."""

    def __init__(self, alpha, beta, a, b):
        # copies: the solvers write into them, and a warm start passes the fitted arrays
        self.alpha = np.array(alpha, dtype=np.float64, order="C")
        self.beta = np.asarray(beta, dtype=np.float64).copy()
        self.a = np.asarray(a, dtype=np.float64).copy()
        self.b = np.asarray(b, dtype=np.float64).copy()
        self.refresh()

    def refresh(self):
        # Sarkar (2021): E[l] = alpha / beta, E[ln l] = psi(alpha) - ln beta
        self.mean = self.alpha / self.beta
        self.elog = np.ascontiguousarray(digamma(self.alpha) - np.log(self.beta))

    def neg_kl_rows(self):
        """-KL(q(l_i) || prior) of each row: the prior terms of the ELBO (Sarkar 2021)."""
        a, b, al, be = self.a, self.b, self.alpha, self.beta
        return np.sum(
            (a - al) * self.elog
            - (b - be) * self.mean
            + a * np.log(b)
            - al * np.log(be)
            - gammaln(a)
            + gammaln(al),
            axis=1,
        )

    def neg_kl(self):
        """-KL(q || prior), summed over the rows."""
        return float(np.sum(self.neg_kl_rows()))

    def row_objective(self, xlogt_rows, other):
        """The terms of the augmented ELBO that involve each row of this side."""
        return xlogt_rows - self.mean @ other.mean.sum(axis=0) + self.neg_kl_rows()

    def update_prior(self, learn):
        """Empirical Bayes: the Gamma prior maximising the ELBO given q.

        The rate is closed form, b = a / mean_i E[l_ik] (Sarkar 2021); the shape
        solves ln a - psi(a) = ln mean E[l] - mean E[ln l] (the profile of the ELBO in a,
        concave), by Newton's method, halving a whenever a step would leave (0, inf).
        """
        if learn == "none":
            return
        self.prior_from_means(self.mean.mean(axis=0), self.elog.mean(axis=0), learn)

    def prior_from_means(self, m, c, learn):
        """The empirical-Bayes prior from the means over rows of E[l] (``m``) and of E[ln l]
        (``c``): :meth:`update_prior` for moments averaged elsewhere (stochastic
        variational inference keeps them as running averages over its batches)."""
        if learn == "none":
            return
        if learn == "both":
            self.a = _solve_shape(np.log(m) - c, self.a)
        self.b = self.a / m


def _solve_shape(s, a0):
    """Root of ln a - psi(a) = s for each entry of s (s > 0), clipped to the shape bounds."""
    big = s <= 1.0 / (2.0 * _SHAPE_MAX)
    s = np.where(big, 1.0, s)
    # Start from the closed-form approximation of the root (Minka, "Estimating a gamma
    # distribution", 2002), within a few percent everywhere: Newton then needs a few steps,
    # where the previous value can be far from the new root.
    start = (3.0 - s + np.sqrt((s - 3.0) ** 2 + 24.0 * s)) / (12.0 * s)
    a = np.clip(np.where(np.isfinite(start) & (start > 0), start, a0), _SHAPE_MIN, _SHAPE_MAX)
    for _ in range(100):
        g = np.log(a) - digamma(a) - s
        gp = 1.0 / a - polygamma(1, a)
        step = g / gp
        new = a - step
        bad = ~(new > 0)
        while np.any(bad):
            new = np.where(bad, a / 2.0, new)
            bad = ~(new > 0)
        # Converged, or the residual is at the round-off of ln a (for large a, ln a - psi(a)
        # ~ 1/(2a) cancels and the relative step never reaches 1e-12).
        done = (np.abs(new - a) <= 1e-12 * a) | (
            np.abs(g) <= 4 * np.finfo(float).eps * np.maximum(1.0, np.abs(np.log(a)))
        )
        a = np.clip(new, _SHAPE_MIN, _SHAPE_MAX)
        if np.all(done):
            break
    return np.where(big, _SHAPE_MAX, a)


def _pass(compressed, major, minor, n_threads, kk=-1, want_log=True):
    """One pass over the stored entries of X (CSR: major = L; CSC: major = F).

    ``major`` and ``minor`` are the E[ln] of the two sides (or log samples of them). Returns
    the expected counts sum_j E[z_ijk] of the major side, sum_ij x ln t_ij (NaN without
    ``want_log``: the pass then takes no logarithm, and costs about half as much), and the
    Newton curvature sum_j x pi (1 - pi) of component ``kk`` (if kk >= 0).
    """
    z, xlogt, h = _pass_rows(compressed, major, minor, n_threads, kk, want_log)
    return z, float(np.sum(xlogt)), h


def _pass_rows(compressed, major, minor, n_threads, kk=-1, want_log=True):
    """As :func:`_pass`, with sum_j x_ij ln t_ij for each major index i. ``compressed`` is
    ``(indptr, indices, data)``, or a pass over blocks (``BlockCounts.r`` or ``.c``)."""
    if not isinstance(compressed, tuple):
        return compressed.expected_counts(major, minor, n_threads, kk, want_log)
    n, K = major.shape
    z = np.empty((n, K))
    xlogt = np.empty(n)
    h = np.empty(n if kk >= 0 else 0)
    _fast.expected_counts(*compressed, major, minor, z, xlogt, h, kk, n_threads, False, want_log)
    return z, xlogt, h


def _augmented_elbo(xlogt, counts, L, F):
    """The ELBO of the augmented model, with q(z) at its optimum (Sarkar 2021).

    sum_ij [x ln t_ij - E l_i . E f_j - ln Gamma(x + 1)] - KL(q(L) || p(L)) - KL(q(F) || p(F));
    the sum of E l_i . E f_j over all entries is sum_k (sum_i E l_ik)(sum_j E f_jk).
    """
    cross = float(L.mean.sum(axis=0) @ F.mean.sum(axis=0))
    return xlogt - cross - counts.log_factorial + L.neg_kl() + F.neg_kl()


def _exact_elbo_estimate(counts, L, F, rng, n_samples, n_threads):
    """Monte Carlo estimate of the ELBO of the original model (Sarkar 2021, eq. 32).

    E[sum_ij x ln (l_i . f_j)] is averaged over ``n_samples`` draws of q; every other term is
    exact.
    """
    total = 0.0
    xlogt = np.empty(counts.shape[0])
    for first in range(0, n_samples, _DRAWS_A_PASS):
        draws = [
            _sample(L, F, rng, n_threads, want_grad=False)
            for _ in range(min(_DRAWS_A_PASS, n_samples - first))
        ]
        log_l = np.stack([d[0] for d in draws])
        log_f = np.stack([d[2] for d in draws])
        if isinstance(counts.r, tuple):
            _fast.sampled_data_term(*counts.r, log_l, log_f, xlogt, n_threads)
        else:
            counts.r.sampled_data_term(log_l, log_f, xlogt, n_threads)
        total += float(np.sum(xlogt))
    return _augmented_elbo(total / n_samples, counts, L, F)


def _sample(L, F, rng, n_threads, want_grad=True):
    """Log samples of q(L) and q(F), and their derivatives in the shapes (one stream a row)."""
    out = []
    for side in (L, F):
        seeds = draw_seeds(rng, side.alpha.shape[0])
        log_sample = np.empty_like(side.alpha)
        dlog = np.empty_like(side.alpha) if want_grad else np.empty((0, 0))
        _fast.sample_log_gamma(
            side.alpha, np.log(side.beta), seeds, log_sample, dlog, want_grad, n_threads
        )
        out += [log_sample, dlog]
    return out


# ---------------------------------------------------------------------------------------------
# Solvers: each does one iteration and returns
# ---------------------------------------------------------------------------------------------


def _vbem_step(counts, L, F, z_l, learn, n_threads):
    """Cemgil's coordinate updates (Sarkar 2021; Algorithm 1 of Cemgil 2009).

    ``z_l`` holds sum_j E[z_ijk] of the current state (from the pass that also evaluated the
    ELBO). q(L), then q(F) with the new L, then the priors; each step maximises the augmented
    ELBO in its block, so the bound never decreases.
    """
    L.alpha = L.a + z_l
    L.beta = L.b + F.mean.sum(axis=0)
    L.refresh()
    z_f, _, _ = _pass(counts.c, F.elog, L.elog, n_threads, want_log=False)
    F.alpha = F.a + z_f
    F.beta = F.b + L.mean.sum(axis=0)
    F.refresh()
    L.update_prior(learn)
    F.update_prior(learn)


def _newton_log_step(value, g, d2, fallback):
    """One Newton-Raphson step on theta = ln(value), given d/dvalue and d2/dvalue2.

    d/dtheta = v g and d2/dtheta2 = v^2 d2 + v g. Newton steps in the log are scale-free
    (from far below the optimum a step in the value itself only doubles it). Steps are
    limited to a factor of 10; where the bound is not concave in theta the fixed point
    ``fallback`` is taken instead.
    """
    gt = value * g
    ht = value * value * d2 + gt
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        step = np.clip(-gt / ht, -np.log(10.0), np.log(10.0))
        new = np.where(ht < 0, value * np.exp(step), fallback)
    return np.where(np.isfinite(new) & (new > 0), new, fallback)


def _newton_side(z, h, k, S, other_total):
    """Newton step on each alpha_ik, k fixed (all rows at once: the ELBO separates over rows).

    Analytic derivatives of the augmented ELBO with q(z) at its optimum (doc/hpmf.rst):
    d/d alpha = psi'(alpha)(Z + a - alpha) - (B + b - beta) / beta,
    d2/d alpha2 = psi''(alpha)(Z + a - alpha) - psi'(alpha) + psi'(alpha)^2 H,
    with Z = sum_j x pi, H = sum_j x pi (1 - pi), B = sum_j E[f_jk].
    """
    al = S.alpha[:, k]
    be = S.beta[k]
    a, b = S.a[k], S.b[k]
    zk = z[:, k]
    t1 = polygamma(1, al)
    t2 = polygamma(2, al)
    g = t1 * (zk + a - al) - (other_total + b - be) / be
    d2 = t2 * (zk + a - al) - t1 + t1 * t1 * h
    S.alpha[:, k] = np.maximum(_newton_log_step(al, g, d2, a + zk), _ALPHA_MIN)


def _newton_rate(z, h, k, S, other_total):
    """Newton step on beta_k (doc/hpmf.rst):
    d/d beta = sum_i [alpha (B + b) / beta^2 - (a + Z) / beta],
    d2/d beta2 = sum_i [-2 alpha (B + b) / beta^3 + (a + Z + H) / beta^2].
    """
    al = S.alpha[:, k]
    be = S.beta[k]
    a, b = S.a[k], S.b[k]
    zk = z[:, k]
    c = other_total + b
    g = np.sum(al * c / be**2 - (a + zk) / be)
    d2 = np.sum(-2.0 * al * c / be**3 + (a + zk + h) / be**2)
    fallback = c * al.sum() / np.sum(a + zk)
    S.beta[k] = float(_newton_log_step(be, g, d2, fallback))


def _newton_step(counts, L, F, learn, n_threads):
    """One sweep of one-dimensional Newton-Raphson updates over every variational parameter.

    For each side and component k: a Newton step on every alpha_ik (rows in parallel), then
    on beta_k. Each step is checked against the augmented ELBO (per row for alpha, in total
    for beta) and undone where it would lower the bound, so the sweep never decreases it;
    the priors then take their empirical-Bayes values.
    """
    K = L.alpha.shape[1]
    for S, other, axis in ((L, F, counts.r), (F, L, counts.c)):
        for k in range(K):
            for update, by_row in ((_newton_side, True), (_newton_rate, False)):
                z, xl, h = _pass_rows(axis, S.elog, other.elog, n_threads, k)
                before = S.row_objective(xl, other)
                old_alpha, old_beta = S.alpha[:, k].copy(), S.beta[k]
                update(z, h, k, S, float(other.mean[:, k].sum()))
                S.refresh()
                xl = _pass_rows(axis, S.elog, other.elog, n_threads)[1]
                after = S.row_objective(xl, other)
                if by_row:
                    worse = after < before
                    if np.any(worse):
                        # where Newton fails, try the coordinate-ascent value a + Z instead
                        S.alpha[worse, k] = S.a[k] + z[worse, k]
                        S.refresh()
                        xl = _pass_rows(axis, S.elog, other.elog, n_threads)[1]
                        worse &= S.row_objective(xl, other) < before
                        S.alpha[worse, k] = old_alpha[worse]
                        S.refresh()
                elif np.sum(after) < np.sum(before):
                    S.beta[k] = old_beta
                    S.refresh()
    L.update_prior(learn)
    F.update_prior(learn)


def _pathwise_grads(S, z, dlog, other_total):
    """Gradient of the exact ELBO in (ln alpha, ln beta) for one side (doc/hpmf.rst).

    Monte Carlo part: d/d alpha_ik of sum_j x ln lambda_ij is Z_ik d ln l_ik / d alpha_ik, and
    d ln l_ik / d beta_k = -1 / beta_k. Exact parts: -sum_ij E[l] E[f] and -KL(q || prior).
    """
    al, be, a, b = S.alpha, S.beta, S.a, S.b
    g_al = z * dlog - other_total / be - ((al - a) * polygamma(1, al) + (b - be) / be)
    g_be = (
        -z.sum(axis=0) / be
        + al.sum(axis=0) * other_total / be**2
        - np.sum(a / be - al * b / be**2, axis=0)
    )
    return g_al * al, g_be * be


def _pathwise_step(counts, L, F, rng, opt, params, n_mc, learn, n_threads):
    """One Adam step on the Monte Carlo gradient of the exact ELBO; returns its estimate."""
    grads = [np.zeros_like(q) for q in params]
    xlog = 0.0
    for _ in range(n_mc):
        lL, dL, lF, dF = _sample(L, F, rng, n_threads)
        z_l, xl, _ = _pass(counts.r, lL, lF, n_threads)
        z_f, _, _ = _pass(counts.c, lF, lL, n_threads, want_log=False)
        xlog += xl
        for i, g in enumerate(
            _pathwise_grads(L, z_l, dL, F.mean.sum(axis=0))
            + _pathwise_grads(F, z_f, dF, L.mean.sum(axis=0))
        ):
            grads[i] += g / n_mc
    estimate = _augmented_elbo(xlog / n_mc, counts, L, F)
    opt.step(params, grads)
    for S, la, lb in ((L, params[0], params[1]), (F, params[2], params[3])):
        np.maximum(la, np.log(_ALPHA_MIN), out=la)
        S.alpha = np.exp(la)
        S.beta = np.exp(lb)
        S.refresh()
        S.update_prior(learn)
    return estimate


def _snapshot(L, F):
    """Copies of the variational parameters and priors of both sides."""
    return tuple((S.alpha.copy(), S.beta.copy(), S.a.copy(), S.b.copy()) for S in (L, F))


def _restore(snapshot):
    """The two sides of a :func:`_snapshot`."""
    return tuple(_Side(*side) for side in snapshot)


# Alternating Poisson regression of new rows: relative change of the shapes at convergence.
_TRANSFORM_TOL = 1e-10
_TRANSFORM_MAX_ITER = 5000
# Components that hold at most this share of a row's counts are tried switched off: on the
# simulations of doc/hpmf.rst ("New rows") the components that a better fixed point switches
# off held at most 3% of their row.
_TRANSFORM_SEARCH_SHARE = 0.1


def regress_rows(counts, prior_shape, prior_rate, components, components_log, *,
                 tol=_TRANSFORM_TOL, search_share=_TRANSFORM_SEARCH_SHARE):  # fmt: skip
    """Alternating Poisson regression of each row on a fixed q(F) (Sarkar 2021, the per-row
    subproblem): the rows' posterior shapes, their rate, and sum_j x_ij ln t_ij of each row.

    Parameters
    ----------
    counts : _Counts
        The rows.
    prior_shape, prior_rate : ndarray of shape (n_components,)
        The learned Gamma prior of L.
    components, components_log : ndarray of shape (n_components, n_features)
        E[F]' and E[ln F]' of the fit.
    tol : float
        A row stops at this relative change of its shapes.
    search_share : float
        Components holding at most this share of a row's counts are tried switched off.
    """
    n = counts.shape[0]
    a = prior_shape
    beta = prior_rate + components.sum(axis=1)
    K = a.shape[0]
    alpha = np.ascontiguousarray(a + counts.row_sums[:, None] / K)
    xlogt = np.empty(n)
    n_iter = np.empty(n, dtype=np.intc)
    args = (
        np.ascontiguousarray(components_log.T),
        a,
        prior_rate,
        beta,
        alpha,
        xlogt,
        n_iter,
        _TRANSFORM_MAX_ITER,
        tol,
        search_share,
        kernel_threads(40 * counts.nnz * K),
    )
    if isinstance(counts.r, tuple):
        _fast.transform_rows(*counts.r, *args)
    else:
        counts.r.transform_rows(*args)
    return alpha, beta, xlogt


# ---------------------------------------------------------------------------------------------
# Stochastic variational inference (partial_fit)
# ---------------------------------------------------------------------------------------------


# The local step of stochastic variational inference: each row to this relative change of
# its shapes, without transform's search among fixed points (the fit's own rows follow one
# fixed point too). On make_sc the held-out score after three epochs is the same to 1e-6
# relative as with transform's rows, at a quarter of the time (doc/hpmf.rst).
_SVI_LOCAL_TOL = 1e-6


def svi_step(counts, prior, F, row_means, rho, n_rows, learn, n_threads):
    """One step of stochastic variational inference on a batch of rows (Hoffman, Blei, Wang
    and Paisley 2013, "Stochastic variational inference", Algorithm 1), in place on ``F``.

    The local step fits each row's q(l_i) with q(F) and the prior of L fixed: a fixed point
    of the rows' part of the bound, by the alternating Poisson regression of new rows
    (:func:`regress_rows`, to ``_SVI_LOCAL_TOL``), where VBEM would take one coordinate
    step. The global step moves
    q(F)'s parameters a share ``rho`` of the way to the VBEM update of a data set of
    ``n_rows`` rows made of copies of the batch: Gamma parameters are natural parameters up
    to constants, so the step along the natural gradient is this blend (section 2.4 there).
    The prior of L is learned from running averages of the rows' E[l] and E[ln l], blended
    with the same ``rho`` (a stochastic approximation of its empirical-Bayes moments); that
    of F from q(F), as in the batch fit.

    Parameters
    ----------
    counts : _Counts, BlockCounts or DaskCounts
        The batch.
    prior : tuple of ndarray of shape (n_components,)
        The shapes and rates of the prior of L.
    F : _Side
        q(F) and its prior, updated in place.
    row_means : ndarray of shape (2, n_components)
        The running averages of E[l] and E[ln l] over rows.
    rho : float
        The step size, in (0, 1].
    n_rows : float
        The number of rows the batch stands for.

    Returns
    -------
    prior : tuple of ndarray
        The new prior of L.
    row_means : ndarray of shape (2, n_components)
        The new running averages.
    bound : float
        The batch's bound per row before the global step (its rows' part of the ELBO with
        q(F) fixed, :meth:`HierarchicalPMF.score` of the batch).
    """
    a, b = prior
    n_batch = counts.shape[0]
    components = np.ascontiguousarray(F.mean.T)
    alpha, beta, xlogt = regress_rows(counts, a, b, components, np.ascontiguousarray(F.elog.T),
                                      tol=_SVI_LOCAL_TOL, search_share=0.0)  # fmt: skip
    L = _Side(alpha, beta, a, b)
    cross = float(np.sum(L.mean @ components.sum(axis=1)))
    bound = (float(np.sum(xlogt)) - cross - counts.log_factorial + L.neg_kl()) / n_batch
    z_f = _pass(counts.c, F.elog, L.elog, n_threads, want_log=False)[0]
    scale = n_rows / n_batch
    F.alpha = (1.0 - rho) * F.alpha + rho * (F.a + scale * z_f)
    F.beta = (1.0 - rho) * F.beta + rho * (F.b + scale * L.mean.sum(axis=0))
    F.refresh()
    row_means = (1.0 - rho) * row_means + rho * np.stack([L.mean.mean(axis=0), L.elog.mean(axis=0)])
    L.prior_from_means(row_means[0], row_means[1], learn)
    F.update_prior(learn)
    return (L.a, L.b), row_means, bound
