"""Batch EM of extreme deconvolution (Bovy, Hogg & Roweis 2011, section 3.1), with the
conjugate prior on the covariances of section 3.3 when ``w > 0``."""

import copy

import numpy as np

from .._utils._warnings import warn

__all__ = ["EMRun", "floor_eigenvalues", "m_step", "penalty", "regularised", "renormalise"]


def floor_eigenvalues(covs, floor):
    """The symmetric matrices ``covs`` (K, d, d) with every eigenvalue raised to at least
    ``floor``: the covariance nearest to each within ``V >= floor * I``, and the maximiser
    of the M-step's objective under that constraint (its objective depends on V through
    ``log|V| + tr(V^-1 C)``, which separates over C's eigenvectors). A component whose
    eigenvalues are all above the floor is returned unchanged, to the bit."""
    covs = np.array(covs, dtype=np.float64)
    evals, evecs = np.linalg.eigh(covs)
    low = evals.min(axis=1) < floor
    if low.any():
        clipped = np.maximum(evals[low], floor)
        covs[low] = (evecs[low] * clipped[:, None, :]) @ np.swapaxes(evecs[low], 1, 2)
        covs[low] = 0.5 * (covs[low] + np.swapaxes(covs[low], 1, 2))
    return covs


def regularised(covs, reg_covar, noisy):
    """The covariances an update ends with, ``reg_covar`` applied.

    Without noise (a Gaussian mixture), ``reg_covar`` is added to the diagonal, as
    :class:`~sklearn.mixture.GaussianMixture` does. With noise it is a floor on the
    eigenvalues: the deconvolved variances of a component much narrower than the noise
    move by a small fraction of their distance to EM's fixed point per iteration (Bovy,
    Hogg & Roweis 2011, section 3.1: the update of V_j averages V_j - V_j T^-1 V_j with the
    scatter of the b_ij), so a constant added at every update moves that fixed point by
    many times itself (a width of 0.0079 under noise of 0.02 was fitted 0.0096 with 1e-6
    added). The floor leaves every variance above it where the likelihood puts it."""
    d = covs.shape[-1]
    if noisy:
        return floor_eigenvalues(covs, reg_covar)
    return covs + reg_covar * np.eye(d)


def m_step(stats, params, fixed, warned, w, reg_covar, noisy=False):
    """Bovy et al. (2011) M-step from the statistics centred on the current means."""
    q, s1, A, _ = stats
    weights, means, covs = params
    fixed_w, fixed_m, fixed_c = fixed
    K, d = means.shape
    alive = q > 10 * np.finfo(float).eps * max(q.sum(), 1e-300)
    dead = tuple(np.flatnonzero(~alive & ~(fixed_m & fixed_c)))
    if dead and dead not in warned:
        warned.add(dead)  # once per collapse, not at every iteration
        warn(
            f"Components {list(dead)} have no responsibility left; their parameters are "
            f"kept. Fewer components, or other initial parameters, may fit better.",
            RuntimeWarning,
        )
    qa = np.where(alive, q, 1.0)
    shift = np.where((alive & ~fixed_m)[:, None], s1 / qa[:, None], 0.0)
    new_means = means + shift
    # sum_i q_ij [(b_ij - m_new)(b_ij - m_new)^T + B_ij]
    #   = A_j + q_j V_j - q_j shift shift^T   (A is centred on the old mean).
    C = A + qa[:, None, None] * covs - qa[:, None, None] * shift[:, :, None] * shift[:, None, :]
    if w > 0:
        new_covs = (C + w * np.eye(d)) / (qa + 1)[:, None, None]
    else:
        new_covs = C / qa[:, None, None]
    new_covs = regularised(0.5 * (new_covs + np.swapaxes(new_covs, 1, 2)), reg_covar, noisy)
    keep_c = fixed_c | ~alive
    new_covs[keep_c] = covs[keep_c]
    new_weights = renormalise(q, weights, fixed_w)
    return new_weights, new_means, new_covs


def penalty(covs, fixed_cov, w):
    """Log of the covariance prior of Bovy et al. (w > 0): -log|V|/2 - w tr(V^-1)/2."""
    if w <= 0:
        return 0.0
    total = 0.0
    for j in np.flatnonzero(~fixed_cov):
        L = np.linalg.cholesky(covs[j])
        Linv = np.linalg.inv(L)
        total += -np.log(np.diag(L)).sum() - 0.5 * w * np.sum(Linv**2)
    return total


def renormalise(q, weights, fixed_w):
    """Mixture weights from responsibilities, the fixed ones held (Bovy et al. 2011)."""
    free = ~fixed_w
    new = weights.astype(np.float64).copy()
    if free.any():
        mass = 1.0 - weights[fixed_w].sum()
        qf = q[free]
        new[free] = mass * qf / qf.sum() if qf.sum() > 0 else weights[free]
    return new


class EMRun:
    """The state of a run of batch EM: its parameters, their E-step statistics and its
    objective, the mean log-likelihood per unit of weight plus the covariance prior.

    Each iteration replaces the arrays instead of changing them, so a shallow copy keeps a
    complete iteration.
    """

    def __init__(self, problem, params, fixed):
        self.problem, self.params, self.fixed = problem, params, fixed
        self.stats = self.objective = None
        self.warned = set()  # the collapses already reported

    @property
    def loglik(self):
        """Mean log-likelihood per unit of weight at ``params``."""
        return self.stats[3] / self.problem.total

    def start(self, est):
        p = self.problem
        self.stats = est._estep(p.data, self.params, p.n_threads)
        self.objective = (self.stats[3] + est._penalty(self.params[2], self.fixed[2])) / p.total
        return self.objective

    def iterate(self, est, iteration):
        """An M-step and the E-step after it; None (the parameters unchanged) when the
        objective fell by more than round-off."""
        p = self.problem
        new = est._m_step(self.stats, self.params, self.fixed, self.warned)
        new_stats = est._estep(p.data, new, p.n_threads)
        new_obj = (new_stats[3] + est._penalty(new[2], self.fixed[2])) / p.total
        change = new_obj - self.objective
        if change < -p.roundoff * max(1.0, abs(self.objective)):
            warn(
                f"The EM objective decreased by {-change:.3g} at iteration {iteration}; "
                f"stopping with the previous parameters.",
                RuntimeWarning,
            )
            return None
        self.params, self.stats, self.objective = new, new_stats, new_obj
        return self.loglik

    def monitored(self, value):
        return self.objective

    def snapshot(self):
        return copy.copy(self)

    def finish(self, est):
        return self.objective
