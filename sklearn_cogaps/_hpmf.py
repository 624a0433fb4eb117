"""Hierarchical Poisson matrix factorisation with empirical-Bayes Gamma priors.

Sarkar (2021), "Hierarchical PMF" (001_6bd102d6d256898f): VBEM (Cemgil 2009), one-dimensional
Newton-Raphson, the pathwise-gradient ELBO, and alternating Poisson regression for new rows.
"""

import warnings
from numbers import Integral, Real

import numpy as np
from scipy import sparse
from scipy.special import digamma, gammaln, polygamma

from sklearn.base import (
    BaseEstimator,
    ClassNamePrefixFeaturesOutMixin,
    TransformerMixin,
    _fit_context,
)
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils import check_random_state
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import check_is_fitted

from ._base import (
    COUNTS_ADVICE,
    DataInFitMixin,
    NonNegativeFactorisationMixin,
    check_ignored_y,
    draw_seeds,
    validate_input,
    warn_unused_parameters,
    warn_warm_start_ignored,
)
from ._progress import Progress
from ._utils._adam import Adam
from ._utils._openmp_helpers import kernel_threads
from . import _hpmf_fast as _fast

__all__ = ["HierarchicalPMF"]

# Bounds of the learned prior shapes: the empirical-Bayes shape equation has no finite root
# when every posterior mean of a component is equal.
_SHAPE_MIN, _SHAPE_MAX = 1e-6, 1e8
# Smallest posterior shape the gradient solvers may reach (the pathwise gradient of a Gamma
# sample is unstable at tiny shapes).
_ALPHA_MIN = 1e-3
# Alternating Poisson regression of new rows: relative change of the shapes at convergence.
_TRANSFORM_TOL = 1e-10
_TRANSFORM_MAX_ITER = 5000
# VBEM iterations of init="vbem".
_N_INIT_VBEM = 50
# KL-NMF iterations of init="nmf" (from scikit-learn's NNDSVDa start). Measured: from 5, the
# fits end within 3-13 nats of those from 50 on small simulated sets and higher on an
# 8000 x 1500 one, while 50 cost twice a 100-iteration VBEM fit on 20000 x 5000 counts.
_N_INIT_NMF = 5
# What replaces the peers' hyperpriors on the prior rates (their a', b', c', d').
_LEARNED_RATES = (
    "learn_prior='rate' (the prior rates are learned by empirical Bayes, without a hyperprior)"
)
# Monte Carlo samples for the estimate of the exact ELBO reported after every fit.
_N_EVAL_SAMPLES = 16


# ---------------------------------------------------------------------------------------------
# Data and model pieces shared by the solvers
# ---------------------------------------------------------------------------------------------

class _Counts:
    """X stored twice, CSR for the row passes and CSC for the column passes, zeros dropped."""

    def __init__(self, X):
        Xr = X if sparse.issparse(X) and X.format == "csr" else sparse.csr_matrix(X)
        # a canonical CSR matrix without stored zeros is used as it is, without a copy
        if not Xr.has_canonical_format or not np.all(Xr.data != 0):
            # a CSR made from a CSR shares its arrays (as views): copy before working in place
            shared = Xr is X or (sparse.issparse(X) and np.shares_memory(Xr.data, X.data))
            Xr = Xr.copy() if shared else Xr
            Xr.sum_duplicates()
            Xr.eliminate_zeros()
        self.shape = Xr.shape
        index_dtype = np.int32 if max(Xr.nnz, *Xr.shape) < 2**31 - 1 else np.int64
        self.r = _compressed(Xr, index_dtype)
        self.c = _compressed(Xr.tocsc(), index_dtype)
        self.row_sums = np.asarray(Xr.sum(axis=1)).ravel()
        # sum of ln Gamma(x + 1) in chunks: no temporary the size of X
        self.log_factorial = float(sum(
            gammaln(Xr.data[a:a + 2**20] + 1.0).sum() for a in range(0, Xr.nnz, 2**20)))
        self.nnz = Xr.nnz

    def row_log_factorials(self):
        indptr, _, data = self.r
        per_entry = gammaln(data + 1.0)
        rows = np.repeat(np.arange(self.shape[0]), np.diff(indptr))
        return np.bincount(rows, weights=per_entry, minlength=self.shape[0])


def _compressed(M, index_dtype):
    return (
        np.ascontiguousarray(M.indptr, dtype=index_dtype),
        np.ascontiguousarray(M.indices, dtype=index_dtype),
        np.ascontiguousarray(M.data, dtype=np.float64),
    )


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
        # 001_6bd102d6d256898f: E[l] = alpha / beta, E[ln l] = psi(alpha) - ln beta
        self.mean = self.alpha / self.beta
        self.elog = np.ascontiguousarray(digamma(self.alpha) - np.log(self.beta))

    def neg_kl_rows(self):
        """-KL(q(l_i) || prior) of each row: the prior terms of the ELBO (001_6bd102d6d256898f)."""
        a, b, al, be = self.a, self.b, self.alpha, self.beta
        return np.sum(
            (a - al) * self.elog - (b - be) * self.mean + a * np.log(b) - al * np.log(be)
            - gammaln(a) + gammaln(al), axis=1,
        )

    def neg_kl(self):
        """-KL(q || prior), summed over the rows."""
        return float(np.sum(self.neg_kl_rows()))

    def row_objective(self, xlogt_rows, other):
        """The terms of the augmented ELBO that involve each row of this side."""
        return xlogt_rows - self.mean @ other.mean.sum(axis=0) + self.neg_kl_rows()

    def update_prior(self, learn):
        """Empirical Bayes: the Gamma prior maximising the ELBO given q.

        The rate is closed form, b = a / mean_i E[l_ik] (001_6bd102d6d256898f); the shape
        solves ln a - psi(a) = ln mean E[l] - mean E[ln l] (the profile of the ELBO in a,
        concave), by Newton's method, halving a whenever a step would leave (0, inf).
        """
        if learn == "none":
            return
        m = self.mean.mean(axis=0)
        if learn == "both":
            c = self.elog.mean(axis=0)
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


def _pass(compressed, major, minor, n_threads, kk=-1):
    """One pass over the stored entries of X (CSR: major = L; CSC: major = F).

    ``major`` and ``minor`` are the E[ln] of the two sides (or log samples of them). Returns
    the expected counts sum_j E[z_ijk] of the major side, sum_ij x ln t_ij, and the Newton
    curvature sum_j x pi (1 - pi) of component ``kk`` (if kk >= 0).
    """
    z, xlogt, h = _pass_rows(compressed, major, minor, n_threads, kk)
    return z, float(np.sum(xlogt)), h


def _pass_rows(compressed, major, minor, n_threads, kk=-1):
    """As :func:`_pass`, with sum_j x_ij ln t_ij for each major index i."""
    n, K = major.shape
    z = np.empty((n, K))
    xlogt = np.empty(n)
    h = np.empty(n if kk >= 0 else 0)
    _fast.expected_counts(*compressed, major, minor, z, xlogt, h, kk, n_threads)
    return z, xlogt, h


def _augmented_elbo(xlogt, counts, L, F):
    """The ELBO of the augmented model, with q(z) at its optimum (001_6bd102d6d256898f).

    sum_ij [x ln t_ij - E l_i . E f_j - ln Gamma(x + 1)] - KL(q(L) || p(L)) - KL(q(F) || p(F));
    the sum of E l_i . E f_j over all entries is sum_k (sum_i E l_ik)(sum_j E f_jk).
    """
    cross = float(L.mean.sum(axis=0) @ F.mean.sum(axis=0))
    return xlogt - cross - counts.log_factorial + L.neg_kl() + F.neg_kl()


def _exact_elbo_estimate(counts, L, F, rng, n_samples, n_threads):
    """Monte Carlo estimate of the ELBO of the original model (001_6bd102d6d256898f, eq. 32).

    E[sum_ij x ln (l_i . f_j)] is averaged over ``n_samples`` draws of q; every other term is
    exact.
    """
    total = 0.0
    for _ in range(n_samples):
        lL, _, lF, _ = _sample(L, F, rng, n_threads, want_grad=False)
        total += _pass(counts.r, lL, lF, n_threads)[1]
    return _augmented_elbo(total / n_samples, counts, L, F)


def _sample(L, F, rng, n_threads, want_grad=True):
    """Log samples of q(L) and q(F), and their derivatives in the shapes (one stream a row)."""
    out = []
    for side in (L, F):
        seeds = draw_seeds(rng, side.alpha.shape[0])
        log_sample = np.empty_like(side.alpha)
        dlog = np.empty_like(side.alpha) if want_grad else np.empty((0, 0))
        _fast.sample_log_gamma(side.alpha, np.log(side.beta), seeds, log_sample, dlog,
                               want_grad, n_threads)
        out += [log_sample, dlog]
    return out


# ---------------------------------------------------------------------------------------------
# Solvers: each does one iteration and returns
# ---------------------------------------------------------------------------------------------

def _vbem_step(counts, L, F, z_l, learn, n_threads):
    """Cemgil's coordinate updates (001_6bd102d6d256898f, Alg. 1 of Cemgil 2009).

    ``z_l`` holds sum_j E[z_ijk] of the current state (from the pass that also evaluated the
    ELBO). q(L), then q(F) with the new L, then the priors; each step maximises the augmented
    ELBO in its block, so the bound never decreases.
    """
    L.alpha = L.a + z_l
    L.beta = L.b + F.mean.sum(axis=0)
    L.refresh()
    z_f, _, _ = _pass(counts.c, F.elog, L.elog, n_threads)
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
    for S, other, compressed in ((L, F, counts.r), (F, L, counts.c)):
        for k in range(K):
            for update, by_row in ((_newton_side, True), (_newton_rate, False)):
                z, xl, h = _pass_rows(compressed, S.elog, other.elog, n_threads, k)
                before = S.row_objective(xl, other)
                old_alpha, old_beta = S.alpha[:, k].copy(), S.beta[k]
                update(z, h, k, S, float(other.mean[:, k].sum()))
                S.refresh()
                xl = _pass_rows(compressed, S.elog, other.elog, n_threads)[1]
                after = S.row_objective(xl, other)
                if by_row:
                    worse = after < before
                    if np.any(worse):
                        # where Newton fails, try the coordinate-ascent value a + Z instead
                        S.alpha[worse, k] = S.a[k] + z[worse, k]
                        S.refresh()
                        xl = _pass_rows(compressed, S.elog, other.elog, n_threads)[1]
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
    g_be = (-z.sum(axis=0) / be + al.sum(axis=0) * other_total / be**2
            - np.sum(a / be - al * b / be**2, axis=0))
    return g_al * al, g_be * be


def _snapshot(L, F):
    """Copies of the variational parameters and priors of both sides."""
    return tuple((S.alpha.copy(), S.beta.copy(), S.a.copy(), S.b.copy()) for S in (L, F))


def _restore(snapshot):
    """The two sides of a :func:`_snapshot`."""
    return tuple(_Side(*side) for side in snapshot)


# What to do instead of passing data as the second positional argument.
_NO_SIDE_INPUT = "fit the counts alone, call fit(X): HierarchicalPMF takes no per-entry side input"


def _pathwise_step(counts, L, F, rng, opt, params, n_mc, learn, n_threads):
    """One Adam step on the Monte Carlo gradient of the exact ELBO; returns its estimate."""
    grads = [np.zeros_like(q) for q in params]
    xlog = 0.0
    for _ in range(n_mc):
        lL, dL, lF, dF = _sample(L, F, rng, n_threads)
        z_l, xl, _ = _pass(counts.r, lL, lF, n_threads)
        z_f, _, _ = _pass(counts.c, lF, lL, n_threads)
        xlog += xl
        for i, g in enumerate(_pathwise_grads(L, z_l, dL, F.mean.sum(axis=0))
                              + _pathwise_grads(F, z_f, dF, L.mean.sum(axis=0))):
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


# ---------------------------------------------------------------------------------------------
# The estimator
# ---------------------------------------------------------------------------------------------

class HierarchicalPMF(
    DataInFitMixin,
    NonNegativeFactorisationMixin,
    ClassNamePrefixFeaturesOutMixin,
    TransformerMixin,
    BaseEstimator,
):
    """Hierarchical Poisson matrix factorisation with empirical-Bayes Gamma priors.

    The model of Sarkar (2021) for counts X of shape (n_samples, n_features)::

        x_ij ~ Poisson((L F')_ij),  l_ik ~ Gamma(a_lk, b_lk),  f_jk ~ Gamma(a_fk, b_fk)

    (shape, rate), with a variational posterior q(l_ik) = Gamma(alpha_lik, beta_lk),
    q(f_jk) = Gamma(alpha_fjk, beta_fk), and the prior hyperparameters of each component
    learned by empirical Bayes. X is approximated by ``transform(X) @ components_``, the
    posterior means of L and F'. Every sweep costs O(nnz K): only the stored entries of X are
    visited.

    Read more in the :ref:`User Guide <hpmf>`.

    Parameters
    ----------
    n_components : int, default=10
        Number of components K.
    solver : {"vbem", "newton", "pathwise"}, default="vbem"
        ``"vbem"``: Cemgil's coordinate updates of the augmented ELBO (q(z) multinomial).
        ``"newton"``: one-dimensional Newton-Raphson updates, with analytic first and second
        derivatives, of the same augmented ELBO. ``"pathwise"``: Adam on a Monte Carlo
        estimate of the exact ELBO of the original model, with reparameterised Gamma samples
        (a tighter bound, stochastic). See the user guide for the bounds.
    max_iter : int, default=1000
        Maximum number of iterations (sweeps; Adam steps for ``"pathwise"``).
    tol : float, default=1e-6
        Stop when the relative change of the ELBO between iterations is at most ``tol``. For
        ``"pathwise"``, the change between the means of consecutive windows of 100 estimates.
    init : {"auto", "random", "nmf", "vbem"}, default="auto"
        How the variational parameters start: ``"random"`` draws posterior means around the
        scale of the data; ``"nmf"`` starts from 5 iterations of scikit-learn's
        Kullback-Leibler NMF (from its NNDSVDa start); ``"vbem"`` runs 50 VBEM iterations
        from ``"random"`` (the paper's start for its Newton and gradient solvers).
        ``"auto"`` is ``"nmf"``: from random starts the fit can end at a far worse optimum
        (on simulated single-cell counts, by thousands of nats on some seeds, and by 15% of
        the ELBO on an 8000 x 1500 matrix), while the NMF start was above every random start
        measured (see the user guide). Ignored when ``warm_start`` continues a previous fit.
    prior_shape : float, default=1.0
        Initial (or fixed) shape a of every Gamma prior.
    prior_rate : float or None, default=None
        Initial (or fixed) rate b of every Gamma prior. None sets it so that the prior means
        of L and F give the mean of X: b = a / sqrt(mean(X) / K).
    learn_prior : {"both", "rate", "none"}, default="both"
        Which prior hyperparameters empirical Bayes learns: shapes and rates, rates only,
        or none (fixed at ``prior_shape`` and ``prior_rate``).
    learning_rate : float, default=0.05
        Adam's step size (``"pathwise"`` only; another value with another solver warns that
        it is ignored).
    n_mc_samples : int, default=1
        Monte Carlo samples per gradient (``"pathwise"`` only; likewise).
    random_state : int, RandomState instance or None, default=None
        Seeds the initialisation and the Monte Carlo draws.
    verbose : int, default=0
        0: silent; 1: a progress line (iteration, ELBO, time elapsed and left) about every
        tenth of ``max_iter``; 2: a line after every iteration.
    warm_start : bool, default=False
        Continue from the previous fit's variational parameters and learned priors (the
        hyperparameters ``learn_prior`` does not learn are those of ``prior_shape`` and
        ``prior_rate`` as they are set now). On data of another shape or another
        ``n_components``, the fit starts anew with a ``UserWarning``.

    Attributes
    ----------
    components_ : ndarray of shape (n_components, n_features)
        Posterior mean E[F]'.
    components_log_ : ndarray of shape (n_components, n_features)
        Posterior E[ln F]'.
    components_shape_ : ndarray of shape (n_components, n_features)
        Posterior shapes alpha_f' of q(F).
    components_rate_ : ndarray of shape (n_components,)
        Posterior rates beta_f of q(F) (shared by the entries of a component).
    loadings_ : ndarray of shape (n_samples, n_components)
        Posterior mean E[L] of the training rows.
    loadings_log_ : ndarray of shape (n_samples, n_components)
        Posterior E[ln L].
    loadings_shape_ : ndarray of shape (n_samples, n_components)
        Posterior shapes alpha_l of q(L).
    loadings_rate_ : ndarray of shape (n_components,)
        Posterior rates beta_l of q(L).
    prior_loadings_shape_, prior_loadings_rate_ : ndarray of shape (n_components,)
        The learned Gamma prior of L.
    prior_components_shape_, prior_components_rate_ : ndarray of shape (n_components,)
        The learned Gamma prior of F.
    lower_bound_ : float
        The final value of the bound the solver maximises (for ``"pathwise"``, the mean of
        the last 100 estimates).
    lower_bounds_ : ndarray of shape (``n_iter_``,)
        Its trace: the value after every iteration of the last fit.
    augmented_lower_bound_ : float
        The ELBO of the augmented model (exact, deterministic) at the fitted q.
    exact_lower_bound_ : float
        A Monte Carlo estimate (16 draws) of the ELBO of the original model at the fitted q;
        at least ``augmented_lower_bound_`` up to Monte Carlo error.
    n_iter_ : int
        Number of iterations run by the last call to ``fit``.
    n_features_in_ : int
        Number of features seen during fit.
    feature_names_in_ : ndarray of shape (n_features,)
        Names of features seen during fit, when X has string column names.

    See Also
    --------
    sklearn.decomposition.NMF : Maximum-likelihood Poisson factorisation with
        ``beta_loss="kullback-leibler"``.

    References
    ----------
    A. Sarkar, "Hierarchical PMF", 2021 (VBEM with empirical-Bayes priors, Newton-Raphson,
    pathwise gradient, alternating Poisson regression).

    A. T. Cemgil, "Bayesian inference for nonnegative matrix factorisation models",
    Computational Intelligence and Neuroscience, 2009.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_cogaps import HierarchicalPMF
    >>> rng = np.random.default_rng(0)
    >>> X = rng.poisson(rng.gamma(1.0, 1.0, (30, 2)) @ rng.gamma(1.0, 1.0, (2, 20)))
    >>> model = HierarchicalPMF(n_components=2, random_state=0).fit(X)
    >>> model.transform(X).shape
    (30, 2)
    >>> bool(np.all(np.diff(model.lower_bounds_) > -1e-6 * abs(model.lower_bound_)))
    True
    """

    _fit_advice = "HierarchicalPMF(n_components=K).fit(X)"

    _peer_parameters = {
        "k": ("hpfrec", "n_components=K"),
        "nfactors": ("scHPF", "n_components=K"),
        "maxiter": ("hpfrec", "max_iter=N"),
        "random_seed": ("hpfrec", "random_state=seed"),
        "a": ("hpfrec and scHPF", "prior_shape=a (one shape for both factors)"),
        "c": ("hpfrec and scHPF", "prior_shape=c (one shape for both factors)"),
        **dict.fromkeys(["a_prime", "b_prime", "c_prime", "d_prime"], ("hpfrec", _LEARNED_RATES)),
        **dict.fromkeys(["ap", "bp", "cp", "dp"], ("scHPF", _LEARNED_RATES)),
        "stop_thr": ("hpfrec", "tol=... (on the relative change of the ELBO)"),
        "epsilon": ("scHPF", "tol=... (on the relative change of the ELBO)"),
        "ncores": ("hpfrec", "threadpoolctl.threadpool_limits(n) around fit, or OMP_NUM_THREADS"),
    }

    _negative_input_advice = COUNTS_ADVICE

    _parameter_constraints: dict = {
        "n_components": [Interval(Integral, 1, None, closed="left")],
        "solver": [StrOptions({"vbem", "newton", "pathwise"})],
        "max_iter": [Interval(Integral, 1, None, closed="left")],
        "tol": [Interval(Real, 0, None, closed="left")],
        "init": [StrOptions({"auto", "random", "nmf", "vbem"})],
        "prior_shape": [Interval(Real, 0, None, closed="neither")],
        "prior_rate": [Interval(Real, 0, None, closed="neither"), None],
        "learn_prior": [StrOptions({"both", "rate", "none"})],
        "learning_rate": [Interval(Real, 0, None, closed="neither")],
        "n_mc_samples": [Interval(Integral, 1, None, closed="left")],
        "random_state": ["random_state"],
        "verbose": ["verbose"],
        "warm_start": ["boolean"],
    }

    def __init__(
        self,
        n_components=10,
        *,
        solver="vbem",
        max_iter=1000,
        tol=1e-6,
        init="auto",
        prior_shape=1.0,
        prior_rate=None,
        learn_prior="both",
        learning_rate=0.05,
        n_mc_samples=1,
        random_state=None,
        verbose=0,
        warm_start=False,
    ):
        self.n_components = n_components
        self.solver = solver
        self.max_iter = max_iter
        self.tol = tol
        self.init = init
        self.prior_shape = prior_shape
        self.prior_rate = prior_rate
        self.learn_prior = learn_prior
        self.learning_rate = learning_rate
        self.n_mc_samples = n_mc_samples
        self.random_state = random_state
        self.verbose = verbose
        self.warm_start = warm_start

    # -- validation --------------------------------------------------------------------------

    def _validate_counts(self, X, reset):
        X = validate_input(
            self, X, accept_sparse=("csr", "csc"), dtype=np.float64,
            ensure_non_negative=True, reset=reset,
        )
        data = X.data if sparse.issparse(X) else X
        if reset and not np.any(data > 0):
            raise ValueError(
                f"X of shape {X.shape} contains only zeros: a Poisson factorisation needs at "
                "least one positive count. Remove empty data before fitting."
            )
        if np.any(data != np.floor(data)):
            warnings.warn(
                "X contains non-integer values; HierarchicalPMF models counts. The fit uses "
                "the Poisson likelihood extended to real x >= 0 by Gamma(x + 1), which stays "
                "well defined. Round X to silence this warning.",
                UserWarning,
            )
        return X

    # -- fitting -----------------------------------------------------------------------------

    def _initialise(self, counts, rng, n_threads):
        init = self.init
        if init == "auto":
            init = "nmf"
        L, F = self._start(counts, rng, "nmf" if init == "nmf" else "random")
        if init == "vbem":
            # 001_6bd102d6d256898f: "To initialize all methods, run 50 epochs of VBEM."
            for _ in range(_N_INIT_VBEM):
                z_l = _pass(counts.r, L.elog, F.elog, n_threads)[0]
                _vbem_step(counts, L, F, z_l, self.learn_prior, n_threads)
        return L, F

    def _scale(self, counts):
        """sqrt(mean(X) / K): the prior mean of L and F whose product gives mean(X)."""
        n, p = counts.shape
        return np.sqrt(counts.row_sums.sum() / (n * p) / self.n_components)

    def _prior_start(self, counts):
        """The starting (or fixed) prior shapes and rates, one per component."""
        a0 = float(self.prior_shape)
        b0 = float(self.prior_rate) if self.prior_rate is not None else a0 / self._scale(counts)
        return np.full(self.n_components, a0), np.full(self.n_components, b0)

    def _start(self, counts, rng, init):
        n, p = counts.shape
        K = self.n_components
        scale = self._scale(counts)
        a, b = self._prior_start(counts)
        if init == "nmf":
            from sklearn.decomposition import NMF

            X = sparse.csr_matrix((counts.r[2], counts.r[1], counts.r[0]), shape=(n, p))
            nmf = NMF(K, beta_loss="kullback-leibler", solver="mu", init="nndsvda",
                      max_iter=_N_INIT_NMF, random_state=rng.randint(2**31 - 1))
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", ConvergenceWarning)
                W = nmf.fit_transform(X)
            H = nmf.components_.T
            eps = 1e-3 * scale
            W = W + eps
            H = H + eps
            d = np.sqrt(H.sum(0) / W.sum(0))
            W, H = W * d, H / d
            # the VBEM fixed point at the NMF solution: alpha = a + W sum_j H, beta = b + sum_j H
            L = _Side(a + W * H.sum(0), b + H.sum(0), a, b)
            F = _Side(a + H * W.sum(0), b + W.sum(0), a, b)
        else:
            L = _Side(0.5 + rng.uniform(size=(n, K)), np.full(K, 1.0 / scale), a, b)
            F = _Side(0.5 + rng.uniform(size=(p, K)), np.full(K, 1.0 / scale), a, b)
        return L, F

    def _warm_state(self, counts):
        n, p = counts.shape
        if not self.warm_start or not hasattr(self, "components_"):
            return None
        previous = (self.loadings_shape_.shape[0], *self.components_.shape[::-1])
        if previous != (n, p, self.n_components):
            warn_warm_start_ignored(
                self, f"X has shape {(n, p)} and n_components={self.n_components}, the "
                f"previous fit had {previous[:2]} and {previous[2]}"
            )
            return None
        L = _Side(self.loadings_shape_, self.loadings_rate_,
                  self.prior_loadings_shape_, self.prior_loadings_rate_)
        F = _Side(self.components_shape_.T, self.components_rate_,
                  self.prior_components_shape_, self.prior_components_rate_)
        # What learn_prior does not learn is fixed at prior_shape and prior_rate as they are
        # now, not as they were in the previous fit (set_params may have changed them).
        a, b = self._prior_start(counts)
        for side in (L, F):
            if self.learn_prior != "both":
                side.a = a.copy()
            if self.learn_prior == "none":
                side.b = b.copy()
        return L, F

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y=None):
        """Fit the model to the counts X.

        Parameters
        ----------
        X : {array-like, sparse matrix, AnnData} of shape (n_samples, n_features)
            Non-negative counts; CSR and CSC matrices are used without densifying. An AnnData
            contributes its ``.X``.
        y : Ignored
            Not used, present for API consistency. A second positional array of the shape
            of X is refused.

        Returns
        -------
        self : HierarchicalPMF
            The fitted estimator.
        """
        check_ignored_y(self, y, X, advice=_NO_SIDE_INPUT)
        X = self._validate_counts(X, reset=True)
        if self.solver != "pathwise":
            warn_unused_parameters(self, ("learning_rate", "n_mc_samples"),
                                   "with solver='pathwise'", "Set solver='pathwise'")
        counts = _Counts(X)
        rng = check_random_state(self.random_state)
        n_threads = kernel_threads(2 * counts.nnz * self.n_components)
        state = self._warm_state(counts)
        L, F = state if state is not None else self._initialise(counts, rng, n_threads)
        learn = self.learn_prior
        trace = []
        converged = interrupted = False
        progress = Progress(self, self.max_iter, objective="ELBO")
        if self.solver == "pathwise":
            trace, n_iter, converged, lower_bound, interrupted = self._fit_pathwise(
                counts, L, F, rng, n_threads, progress)
        else:
            n_iter = 0
            saved = None  # the state after the last complete iteration, with its trace
            try:
                while True:
                    z_l, xlogt, _ = _pass(counts.r, L.elog, F.elog, n_threads)
                    trace.append(_augmented_elbo(xlogt, counts, L, F))
                    saved = (_snapshot(L, F), len(trace))
                    progress(n_iter, trace[-1])
                    if n_iter > 0 and abs(trace[-1] - trace[-2]) <= self.tol * abs(trace[-1]):
                        converged = True
                        break
                    if n_iter == self.max_iter:
                        break
                    if self.solver == "vbem":
                        _vbem_step(counts, L, F, z_l, learn, n_threads)
                    else:
                        _newton_step(counts, L, F, learn, n_threads)
                    n_iter += 1
            except KeyboardInterrupt:
                if saved is None:
                    raise  # nothing evaluated yet: the estimator is left as it was
                (L, F), n_kept = _restore(saved[0]), saved[1]
                trace, n_iter, interrupted = trace[:n_kept], n_kept - 1, True
                progress.interrupted(n_iter, stacklevel=4)
            lower_bound = trace[-1]
        if not converged and not interrupted:
            warnings.warn(
                f"HierarchicalPMF ({self.solver}) stopped at max_iter={self.max_iter} before "
                f"the relative change of the ELBO reached tol={self.tol}; increase max_iter.",
                ConvergenceWarning,
            )
        xlogt = _pass(counts.r, L.elog, F.elog, n_threads)[1]
        self.augmented_lower_bound_ = float(_augmented_elbo(xlogt, counts, L, F))
        self.exact_lower_bound_ = float(
            _exact_elbo_estimate(counts, L, F, rng, _N_EVAL_SAMPLES, n_threads))
        self.lower_bound_ = float(lower_bound)
        # trace[0] is the starting point: the trace holds the value after each iteration
        self.lower_bounds_ = np.asarray(trace[1:], dtype=np.float64)
        self.n_iter_ = int(n_iter)
        self.loadings_shape_, self.loadings_rate_ = L.alpha, L.beta
        self.loadings_, self.loadings_log_ = L.mean, L.elog
        self.components_shape_ = np.ascontiguousarray(F.alpha.T)
        self.components_rate_ = F.beta
        self.components_ = np.ascontiguousarray(F.mean.T)
        self.components_log_ = np.ascontiguousarray(F.elog.T)
        self.prior_loadings_shape_, self.prior_loadings_rate_ = L.a, L.b
        self.prior_components_shape_, self.prior_components_rate_ = F.a, F.b
        return self

    def _fit_pathwise(self, counts, L, F, rng, n_threads, progress):
        """Adam on the Monte Carlo gradient of the exact ELBO, in (ln alpha, ln beta).

        The fitted q is the exponential moving average (weight 1/50) of the iterates, which
        removes most of Adam's step noise (Polyak-Ruppert averaging). Stops after
        ``max_iter`` steps or when the means of two consecutive windows of 100 estimates
        differ by at most ``tol`` relatively.
        """
        params = [np.log(L.alpha), np.log(L.beta), np.log(F.alpha), np.log(F.beta)]
        average = [q.copy() for q in params]
        opt = Adam([q.shape for q in params], self.learning_rate)
        window, decay = 100, 1.0 - 1.0 / 50.0
        trace = [_exact_elbo_estimate(counts, L, F, rng, 1, n_threads)]
        converged = interrupted = False
        n_iter = 0
        saved = (average, len(trace))  # the averages of the complete steps, with their trace
        try:
            for n_iter in range(1, self.max_iter + 1):
                trace.append(_pathwise_step(counts, L, F, rng, opt, params,
                                            self.n_mc_samples, self.learn_prior, n_threads))
                # new arrays, never updated in place, so that `saved` stays complete
                average = [decay * m + (1.0 - decay) * q for q, m in zip(params, average)]
                saved = (average, len(trace))
                progress(n_iter, trace[-1])
                if n_iter >= 2 * window and n_iter % window == 0:
                    new = np.mean(trace[-window:])
                    old = np.mean(trace[-2 * window:-window])
                    if abs(new - old) <= self.tol * abs(new):
                        converged = True
                        break
        except KeyboardInterrupt:
            average, n_kept = saved
            trace, n_iter, interrupted = trace[:n_kept], n_kept - 1, True
            progress.interrupted(n_iter, stacklevel=5)
        for S, la, lb in ((L, average[0], average[1]), (F, average[2], average[3])):
            S.alpha, S.beta = np.exp(la), np.exp(lb)
            S.refresh()
            S.update_prior(self.learn_prior)
        lower_bound = float(np.mean(trace[-max(min(window, len(trace) - 1), 1):]))
        return trace, n_iter, converged, lower_bound, interrupted

    # -- new rows ----------------------------------------------------------------------------

    def _regress_rows(self, X):
        """Alternating Poisson regression of each row on q(F): shapes, rate, sum x ln t."""
        counts = _Counts(X)
        n = counts.shape[0]
        a = self.prior_loadings_shape_
        beta = self.prior_loadings_rate_ + self.components_.sum(axis=1)
        K = a.shape[0]
        alpha = np.ascontiguousarray(a + counts.row_sums[:, None] / K)
        xlogt = np.empty(n)
        n_iter = np.empty(n, dtype=np.intc)
        _fast.transform_rows(
            *counts.r, np.ascontiguousarray(self.components_log_.T), a, np.log(beta),
            alpha, xlogt, n_iter, _TRANSFORM_MAX_ITER, _TRANSFORM_TOL,
            kernel_threads(40 * counts.nnz * K),
        )
        return counts, alpha, beta, xlogt

    def transform(self, X):
        """Posterior mean loadings of new rows, with the factors fixed.

        Each row is fitted on its own by alternating Poisson regression (the paper's per-row
        subproblem, with q(F) and the learned prior of L fixed): deterministic and
        independent of the other rows.

        Parameters
        ----------
        X : {array-like, sparse matrix, AnnData} of shape (n_samples, n_features)
            Non-negative counts.

        Returns
        -------
        W : ndarray of shape (n_samples, n_components)
            Posterior means E[l_i] of the rows.
        """
        check_is_fitted(self)
        X = self._validate_counts(X, reset=False)
        _, alpha, beta, _ = self._regress_rows(X)
        return alpha / beta

    def score(self, X, y=None):
        """Average per-row ELBO of X, with the factors and priors fixed.

        Each row gets its q(l_i) from :meth:`transform`; the score is the mean over rows of
        sum_j [x ln t_ij - E l_i . E f_j - ln Gamma(x + 1)] - KL(q(l_i) || p(l_i)), so higher
        is better and models with different ``n_components`` compare (``GridSearchCV``).

        Parameters
        ----------
        X : {array-like, sparse matrix, AnnData} of shape (n_samples, n_features)
            Non-negative counts.
        y : Ignored
            Not used, present for API consistency. A second positional array of the shape
            of X is refused.

        Returns
        -------
        score : float
            The ELBO per sample.
        """
        check_is_fitted(self)
        check_ignored_y(self, y, X, method="score", advice=_NO_SIDE_INPUT.replace("fit", "score"))
        X = self._validate_counts(X, reset=False)
        counts, alpha, beta, xlogt = self._regress_rows(X)
        L = _Side(alpha, beta, self.prior_loadings_shape_, self.prior_loadings_rate_)
        cross = float(np.sum(L.mean @ self.components_.sum(axis=1)))
        total = float(np.sum(xlogt)) - cross - counts.log_factorial + L.neg_kl()
        return total / max(counts.shape[0], 1)
