"""The state of a Gibbs M3F / iPM3F chain (Xu, Zhu & Zhang 2013): the sampled factors,
thresholds and augmentation variables, and the running sums of the samples after burn-in.
The conditionals are sampled in ``_fast.pyx``."""

import numpy as np
from sklearn.utils.validation import check_is_fitted

from .._utils._openmp_helpers import kernel_threads
from . import _fast
from ._ratings import _Ratings, _row_seeds, _step_seeds, check_levels

# The work estimates of the sweeps (stored entries times n_components^2, ...) count about
# five floating-point operations per unit. Results do not depend on the thread count.
OPS_PER_WORK_UNIT = 5


class _Chain:
    """Sampled state: factors (U, or binary Z), item factors V, thresholds, augmentation.

    Also the per-entry statistics of the last augmentation draw (``cv1``, ``cv2``), the
    threshold prior (``rho``, ``varsigma``) and, for the IBP, the identity of each feature.
    """

    def __init__(self, U, V, theta, ilam, rho, varsigma):
        self.U, self.V, self.theta, self.ilam = U, V, theta, ilam
        self.rho, self.varsigma = rho, varsigma
        self.cv1 = self.cv2 = None
        self.ids = np.arange(U.shape[1])
        self.n_born = U.shape[1]


def _snapshot(chain):
    """Copies of the sampled state of ``chain``, to restore after an interruption."""
    return (
        chain.U.copy(),
        chain.V.copy(),
        chain.theta.copy(),
        chain.ilam.copy(),
        chain.ids.copy(),
        chain.n_born,
    )


def _ibp_log_prior(Z, alpha):
    """ln P([Z]) of the IBP (Griffiths & Ghahramani 2011, eq. 15) without its
    ``-sum_h ln K_h!`` over the groups of identical columns: a trace of the chain (the
    objective), which the samplers' conditionals do not use."""
    from scipy.special import gammaln

    N, K = Z.shape
    m = Z.sum(axis=0)
    H = np.sum(1.0 / np.arange(1, N + 1))
    return float(
        K * np.log(alpha) - alpha * H + np.sum(gammaln(N - m + 1) + gammaln(m) - gammaln(N + 1))
    )


class _RunningSums:
    """Sums of the samples after burn-in, by feature identity (features come and go in iPM3F)."""

    def __init__(self, shape, L):
        N, M = shape
        self.N, self.M = N, M
        self.sum_theta = np.zeros((N, L - 1))
        self.sum_u = np.zeros((N, 0))
        self.sum_v = np.zeros((M, 0))
        self.n_present = np.zeros(0)
        self.ids = np.zeros(0, dtype=np.intp)
        self.count = 0

    def add(self, chain, ids):
        new = np.setdiff1d(ids, self.ids)
        if new.size:
            self.ids = np.concatenate([self.ids, new])
            self.sum_u = np.hstack([self.sum_u, np.zeros((self.N, new.size))])
            self.sum_v = np.hstack([self.sum_v, np.zeros((self.M, new.size))])
            self.n_present = np.concatenate([self.n_present, np.zeros(new.size)])
        where = {int(f): c for c, f in enumerate(self.ids)}
        cols = np.array([where[int(f)] for f in ids], dtype=np.intp)
        self.sum_u[:, cols] += chain.U
        self.sum_v[:, cols] += chain.V
        self.n_present[cols] += 1
        self.sum_theta += chain.theta
        self.count += 1

    def means(self, prior):
        U = self.sum_u / self.count
        V = self.sum_v / np.maximum(self.n_present, 1)
        if prior == "ibp":
            keep = U.sum(axis=0) > 0
            U, V = U[:, keep], V[:, keep]
        return np.ascontiguousarray(U), np.ascontiguousarray(V), self.sum_theta / self.count


def sample_new_users(est, R):
    """Running means of the factors and thresholds of new users, V fixed (strong
    generalisation): a chain per user, seeded from ``random_state`` and the user's ratings."""
    check_is_fitted(est)
    if est.max_iter <= est.burn_in:
        raise ValueError(
            f"Rating new users runs a chain of max_iter={est.max_iter} iterations "
            f"averaged after burn_in={est.burn_in}: no sample would be averaged. Set "
            "max_iter above burn_in (set_params) before predicting or scoring new users."
        )
    check_levels(R, est.levels_, "observed")
    L = est.n_levels_
    rho = est.threshold_mean_
    data = _Ratings(R, est.levels_)
    N = R.shape[0]
    K = est.n_components_
    V = np.ascontiguousarray(est.components_.T)
    row_seeds = _row_seeds(R, est._transform_seed, est.levels_)
    Ur = np.zeros((N, K))
    # the model of the fit, whose posterior V and the thresholds are (a prior, C, margin
    # or factor_scale set after the fit is the next fit's)
    model = est._fitted_model_params()
    prior = model["prior"]
    if prior == "ibp":
        m = est.loadings_.sum(axis=0)
        n_fit = est.loadings_.shape[0]
        p = np.clip(m / (n_fit + 1.0), 1e-12, 1 - 1e-12)
        prior_logit = np.log(p) - np.log1p(-p)
        Ur = (np.tile(p, (N, 1)) > 0.5).astype(np.float64)
    chain = _Chain(
        Ur, V, np.tile(rho, (N, 1)), np.zeros((data.nnz, L - 1)), rho, est.threshold_scale_
    )
    prec = 1.0 / model["factor_scale"] ** 2
    nt = kernel_threads(OPS_PER_WORK_UNIT * data.nnz * max(K, 1) ** 2)
    est._row_pass(data, chain, _step_seeds(row_seeds, 0, 0), False, nt, model)
    sum_u = np.zeros((N, K))
    sum_t = np.zeros((N, L - 1))
    count = 0
    for it in range(1, est.max_iter + 1):
        if prior == "gaussian":
            _fast.sample_factors(
                data.indptr,
                data.indices,
                data.entry,
                chain.cv1,
                chain.cv2,
                V,
                prec,
                chain.U,
                _step_seeds(row_seeds, it, 1),
                nt,
            )
        else:
            _fast.sample_binary_fixed(
                data.indptr,
                data.indices,
                chain.cv1,
                chain.cv2,
                chain.U,
                V,
                prior_logit,
                np.empty(data.nnz),
                _step_seeds(row_seeds, it, 1),
                nt,
            )
        est._row_pass(data, chain, _step_seeds(row_seeds, it, 0), True, nt, model)
        if it > est.burn_in:
            sum_u += chain.U
            sum_t += chain.theta
            count += 1
    return sum_u / count, sum_t / count
