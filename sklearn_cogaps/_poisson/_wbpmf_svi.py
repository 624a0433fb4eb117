"""Stochastic variational inference for the weighted-background model (``partial_fit``).

Every global quantity of Algorithm 3.1 (Wang, eqs. 3.14-3.18) is a function of sums over
rows: the factors' EBPM problem of topic ``k`` reads the columns' expected counts
``Y_jk = sum_i E[Z_ijk]`` and the exposure ``T_k = sum_i l0_i E[l_ik]``; the weight ``w_k``
reads ``sum_j Y_jk`` and ``T_k``; the column background ``f0`` reads the columns' totals
``x_j``. A batch of rows gives an estimate of each sum, its own sums times the number of
rows it stands for, and the model keeps their running averages, blended with the step
``rho`` (Hoffman, Blei, Wang & Paisley 2013, "Stochastic variational inference", section
2.4; for statistics that are not natural parameters, the stochastic approximation of
online EM, Cappe & Moulines 2009). The globals are then the batch algorithm's updates of
these averages. The prior of the loadings, which the batch fit estimates from all rows,
moves a step ``rho`` towards the EBPM estimate from the batch's rows.
"""

import numpy as np

from ._wbpmf_updates import _Exponentials, _prior_k, _solve, _store, safe_divide

__all__ = ["ColumnStatistics", "batch_statistics", "global_step"]


class ColumnStatistics:
    """The running averages of the sums over rows that the globals read.

    Attributes
    ----------
    Y : ndarray of shape (n_features, n_components)
        The columns' expected counts per topic, ``sum_i E[Z_ijk]``.
    T : ndarray of shape (n_components,)
        ``sum_i l0_i E[l_ik]``.
    x : ndarray of shape (n_features,)
        The columns' totals.
    """

    def __init__(self, Y, T, x):
        self.Y, self.T, self.x = Y, T, x

    def blend(self, other, rho):
        """``(1 - rho) self + rho other``, a new object."""
        return ColumnStatistics(
            (1.0 - rho) * self.Y + rho * other.Y,
            (1.0 - rho) * self.T + rho * other.T,
            (1.0 - rho) * self.x + rho * other.x,
        )

    def scaled(self, factor):
        return ColumnStatistics(factor * self.Y, factor * self.T, factor * self.x)


def batch_statistics(sweeper, w, l0, El, Elogl, Elogf):
    """The batch's sums over its rows, and its rows' expected counts per topic (n, K).

    The expected counts are the fit's (``_Sweeper.topic_counts``) with the rows' fitted
    ``q(l)`` and the model's ``q(f)``."""
    K = w.size
    with np.errstate(divide="ignore"):
        rows = _Exponentials(np.log(w)[None, :] + Elogl)
    cols = _Exponentials(Elogf)
    D = sweeper.denominators(rows, cols)
    Y = np.empty((sweeper.p, K))
    Z = np.empty((sweeper.n, K))
    for k in range(K):
        Z[:, k], Y[:, k] = sweeper.topic_counts(rows, cols, D, k)
    x = np.zeros(sweeper.p)
    np.add.at(x, sweeper.indices, sweeper.data)  # the columns' totals, row after row
    return ColumnStatistics(Y, l0 @ El, x), Z


def global_step(stats, Z, l0, state, rho, families):
    """The globals of the running averages ``stats``, and the prior of the loadings a step
    ``rho`` towards the batch's estimate (``Z``, ``l0``: the batch rows' expected counts per
    topic and backgrounds). ``state`` holds ``w``, ``f0``, ``Ef``, ``Elogf``, ``gL``,
    ``gF``, ``kl_F`` and is updated in place, topic after topic as Algorithm 3.1 orders
    them."""
    prior_loadings, prior_components = families
    K = state.w.size
    # a column seen for the first time (its background 0 so far) gets its background from
    # its total before the factors' problems read it: an exposure of 0 with counts would
    # have likelihood 0
    new = (state.f0 <= 0) & (stats.x > 0)
    if new.any():
        state.f0 = state.f0.copy()
        state.f0[new] = safe_divide(stats.x[new], state.Ef[new] @ (state.w * stats.T))
    # g_L,k: the EBPM estimate from the batch's rows (eq. 3.13) under the global state, a
    # step rho of the way. The local step read the fitted attributes instead, whose features
    # unseen so far carry their empirical-Bayes background (f0 = 0 here): the exposures
    # differ by a fraction of a percent where such features are
    for k in range(K):
        s = np.dot(state.f0, state.Ef[:, k]) * state.w[k] * l0
        res = _solve(Z[:, k], s, prior_loadings, _prior_k(state.gL, k))
        state.gL = _blend_prior(state.gL, k, res, rho)
    for k in range(K):
        # q_F,k and g_F,k (eq. 3.14) from the averaged statistics
        s = stats.T[k] * state.w[k] * state.f0
        res = _solve(stats.Y[:, k], s, prior_components, _prior_k(state.gF, k))
        state.Ef[:, k], state.Elogf[:, k], state.kl_F[k] = res.mean, res.mean_log, res.kl
        state.gF = _store(state.gF, k, res, K)
        # w_k (eq. 3.18): the topic's expected counts over its expected rate
        den = stats.T[k] * np.dot(state.f0, state.Ef[:, k])
        state.w[k] = stats.Y[:, k].sum() / den if den > 0 else 0.0
    # the column background (eq. 3.17), from the averaged totals
    state.f0 = safe_divide(stats.x, state.Ef @ (state.w * stats.T))


def _blend_prior(prior, k, res, rho):
    """Component ``k`` of a stacked prior ``(pi0, weights, shape, rate)`` moved a step
    ``rho`` towards the EBPM result ``res``. The mixture families share their grid, so their
    weights blend into a mixture of the same grid; the parametric ones blend their
    parameters."""
    pi0, weights, shape, rate = (np.array(a, dtype=np.float64) for a in prior)
    pi0[k] = (1.0 - rho) * pi0[k] + rho * res.pi0
    weights[k] = (1.0 - rho) * weights[k] + rho * np.asarray(res.weights)
    shape[k] = (1.0 - rho) * shape[k] + rho * np.asarray(res.shape)
    rate[k] = (1.0 - rho) * rate[k] + rho * np.asarray(res.rate)
    return pi0, weights, shape, rate
