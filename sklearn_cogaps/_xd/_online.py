"""The stochastic methods of extreme deconvolution (Ritchie & Murray 2019): minibatch online
EM with Cappe's step sizes, and Adam on the log-likelihood."""

import copy

import numpy as np

from .._utils._adam import Adam
from ._em import regularised, renormalise

__all__ = ["AdamState", "OnlineEMState", "StochasticRun"]


class OnlineEMState:
    """Minibatch online EM (Ritchie & Murray 2019, sec. minibatch EM) with Cappe's schedule.

    Holds qhat_j (the running sum of responsibilities, in units of one minibatch), the means
    and the unregularised covariances V_j, and the step count t.
    """

    def __init__(self, params, batch_weight, t=0, reg_covar=0.0):
        weights, means, covs = params
        self.reg_covar = reg_covar
        self.weights = np.asarray(weights, dtype=np.float64).copy()
        self.qhat = self.weights * batch_weight
        self.means = np.asarray(means, dtype=np.float64).copy()
        self.covs = np.asarray(covs, dtype=np.float64).copy()
        self.reg_covs = self.covs.copy()
        self.t = t

    def params(self):
        return self.weights, self.means, self.reg_covs

    def to_arrays(self):
        return dict(weights=self.weights, qhat=self.qhat, means=self.means, covs=self.covs,
                    reg_covs=self.reg_covs, t=np.array(self.t))  # fmt: skip

    @classmethod
    def from_arrays(cls, a, reg_covar=0.0):
        s = cls((a["weights"], a["means"], a["covs"]), 1.0, int(a["t"]), reg_covar)
        s.qhat, s.reg_covs = a["qhat"].copy(), a["reg_covs"].copy()
        return s

    def step(self, stats, fixed, kappa, w, batch_fraction, noisy=False):
        """One online-EM update from the minibatch statistics (centred on the current means).

        The covariance update is the paper's recentred convex combination, written so that
        every term is positive semi-definite (derivation in the user guide):
        V_t = a1 [V_{t-1} + (m_{t-1} - m_t)(.)^T] + a2 [V_b + (m_b - m_t)(.)^T],
        a1 = (1 - lam) qhat_{t-1} / qhat_t, a2 = lam q_b / qhat_t.
        """
        q, s1, A, _ = stats
        fixed_w, fixed_m, fixed_c = fixed
        lam = (self.t + 2.0) ** (-kappa)
        self.t += 1
        qhat = (1 - lam) * self.qhat + lam * q
        ok = (qhat > 0) & (q >= 0)
        qb = np.where(q > 0, q, 1.0)
        dbar = s1 / qb[:, None]  # m_b - m_{t-1}
        # V_b: the minibatch's own covariance of v about its mean m_b.
        Vb = self.reg_covs + A / qb[:, None, None] - dbar[:, :, None] * dbar[:, None, :]
        Vb = np.where((q > 0)[:, None, None], Vb, 0.0)
        qh = np.where(ok, qhat, 1.0)
        a1 = (1 - lam) * self.qhat / qh
        a2 = lam * q / qh
        shift = np.where((ok & ~fixed_m)[:, None], (lam * s1) / qh[:, None], 0.0)  # m_t - m_{t-1}
        e1 = -shift
        e2 = dbar - shift
        covs = a1[:, None, None] * (self.covs + e1[:, :, None] * e1[:, None, :]) + a2[
            :, None, None
        ] * (Vb + e2[:, :, None] * e2[:, None, :])
        covs = 0.5 * (covs + np.swapaxes(covs, 1, 2))
        upd_c = ok & ~fixed_c
        self.covs = np.where(upd_c[:, None, None], covs, self.covs)
        self.means = self.means + shift
        self.qhat = np.where(ok, qhat, self.qhat)
        self.weights = renormalise(self.qhat, self.weights, fixed_w)
        d = self.means.shape[1]
        if w > 0:
            # The prior of Bovy et al., with the weight of this minibatch's share of the data.
            rho = batch_fraction * self.qhat.sum() / max(q.sum(), 1e-300)
            reg = (self.qhat[:, None, None] * self.covs + rho * w * np.eye(d)) / (
                self.qhat + rho)[:, None, None]  # fmt: skip
            reg = regularised(reg, self.reg_covar, noisy)
            self.reg_covs = np.where(upd_c[:, None, None], reg, self.reg_covs)
        else:
            self.reg_covs = np.where(
                upd_c[:, None, None], regularised(self.covs, self.reg_covar, noisy), self.reg_covs
            )


def _less_regulariser(covs, reg_covar):
    """``covs - reg_covar I``, each positive definite: a start below ``reg_covar`` in some
    direction (a user's ``precisions_init``) starts there at ``reg_covar`` plus a trace of
    it, the least that ``L L^T + reg_covar I`` can be."""
    if reg_covar <= 0:
        return covs
    inner = covs - reg_covar * np.eye(covs.shape[-1])
    try:
        np.linalg.cholesky(inner)
        return inner
    except np.linalg.LinAlgError:
        evals, evecs = np.linalg.eigh(inner)
        evals = np.maximum(evals, 1e-9 * reg_covar)
        return (evecs * evals[:, None, :]) @ np.swapaxes(evecs, 1, 2)


class AdamState:
    """Adam on (z, m, L~): weights softmax(z), V = L L^T with log-diagonal (Ritchie & Murray 2019).

    The gradients are analytic, from the E-step statistics (Fisher's identity):
    d/dm_j = V_j^-1 s1_j, d/dV_j = V_j^-1 A_j V_j^-1 / 2, d/dz_j = q_j - alpha_j sum_k q_k.
    """

    def __init__(self, params, fixed, reg_covar=0.0):
        weights, means, covs = params
        self.reg_covar = reg_covar
        self.fixed_w = fixed[0]
        self.fixed_c = np.asarray(fixed[2], dtype=bool)
        self.weights0 = np.asarray(weights, dtype=np.float64)
        self.z = np.log(np.maximum(self.weights0, 1e-300))
        self.means = np.asarray(means, dtype=np.float64).copy()
        # the covariances held fixed are returned as given, not through their factors
        self.covs0 = np.asarray(covs, dtype=np.float64).copy()
        # V = L L^T + reg_covar I: the factors are those of the start less the regulariser,
        # which params() adds back (factored whole, every start would gain reg_covar)
        L = np.linalg.cholesky(_less_regulariser(self.covs0, reg_covar))
        self.d = means.shape[1]
        self.tril = np.tril_indices(self.d)
        Lt = L.copy()
        idx = np.arange(self.d)
        Lt[:, idx, idx] = np.log(L[:, idx, idx])
        self.Lt = Lt[:, self.tril[0], self.tril[1]]
        self.adam = None

    def _L(self):
        K = self.means.shape[0]
        L = np.zeros((K, self.d, self.d))
        L[:, self.tril[0], self.tril[1]] = self.Lt
        idx = np.arange(self.d)
        L[:, idx, idx] = np.exp(L[:, idx, idx])
        return L

    def _weights(self):
        free = ~self.fixed_w
        w = self.weights0.copy()
        if free.any():
            zf = self.z[free]
            e = np.exp(zf - zf.max())
            w[free] = (1.0 - self.weights0[self.fixed_w].sum()) * e / e.sum()
        return w

    def _covariances(self, L):
        """V = L L^T + reg_covar I, the covariances held fixed as given."""
        covs = L @ np.swapaxes(L, 1, 2) + self.reg_covar * np.eye(self.d)
        covs[self.fixed_c] = self.covs0[self.fixed_c]
        return covs

    def params(self):
        return self._weights(), self.means, self._covariances(self._L())

    def step(self, stats, fixed, lr, w, batch_weight, total):
        q, s1, A, _ = stats
        fixed_w, fixed_m, fixed_c = fixed
        L = self._L()
        K, d = self.means.shape
        weights = self._weights()
        free = ~fixed_w
        gz = np.zeros(K)
        if free.any():
            soft = weights[free] / max(weights[free].sum(), 1e-300)
            gz[free] = q[free] - q[free].sum() * soft
        gm = np.empty((K, d))
        gL = np.empty((K, d, d))
        covs = self._covariances(L)
        for j in range(K):
            # V = L L^T + reg_covar I: dV/dL is that of L L^T.
            Vinv = np.linalg.inv(covs[j])
            gm[j] = Vinv @ s1[j]
            gV = 0.5 * Vinv @ A[j] @ Vinv
            if w > 0:
                # Prior of Bovy et al., its share for this minibatch.
                gV += (batch_weight / total) * (-0.5 * Vinv + 0.5 * w * Vinv @ Vinv)
            gL[j] = 2.0 * gV @ L[j]
        idx = np.arange(d)
        gL[:, idx, idx] *= L[:, idx, idx]
        gLt = gL[:, self.tril[0], self.tril[1]]
        gm[fixed_m] = 0.0
        gLt[fixed_c] = 0.0
        grads = [g / batch_weight for g in (gz, gm, gLt)]
        params = [self.z, self.means, self.Lt]
        if self.adam is None:
            self.adam = Adam([a.shape for a in params], lr)
        self.adam.step(params, grads)  # ascent on the log-likelihood


class StochasticRun:
    """The state of a run of a stochastic method: its optimiser (:class:`OnlineEMState` or
    :class:`AdamState`), which passes over the data in shuffled minibatches, an epoch per
    iteration."""

    def __init__(self, problem, optimiser, fixed):
        self.problem, self.optimiser, self.fixed = problem, optimiser, fixed
        self.params = self.objective = self.loglik = None

    def start(self, est):
        return None

    def iterate(self, est, epoch):
        p = self.problem
        ll_sum = 0.0
        for batch in p.data.minibatches(p.rng, est.batch_size):
            ll_sum += est._stochastic_step(self.optimiser, batch, self.fixed, p.n_threads, p.total)
        return ll_sum / p.total

    def monitored(self, value):
        return value

    def snapshot(self):
        kept = copy.copy(self)
        kept.optimiser = copy.deepcopy(self.optimiser)
        return kept

    def finish(self, est):
        """The parameters of the run and their objective on all the data."""
        p = self.problem
        self.params = self.optimiser.params()
        stats = est._estep(p.data, self.params, p.n_threads)
        self.objective = (stats[3] + est._penalty(self.params[2], self.fixed[2])) / p.total
        self.loglik = stats[3] / p.total
        return self.objective
