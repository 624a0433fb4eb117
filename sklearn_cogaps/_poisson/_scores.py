"""Scores of rows and features that do not depend on a row's or a feature's total: scHPF's
cell and gene scores (Levitin et al. 2019, "De novo gene signature identification from
single-cell RNA-seq with hierarchical Poisson factorization").

scHPF's model gives every cell a capacity ``xi_i`` (the rate of its loadings' prior) and
every gene one, ``eta_j``; a score is the posterior mean of a loading times that of its
capacity, so that a large cell or a highly expressed gene does not rank first in every
factor. HierarchicalPMF's prior has no per-row or per-feature rate: the capacities are
computed here from the fitted means, as scHPF's own update of ``q(xi)`` and ``q(eta)`` would
set them, with scHPF's hyperparameters (``a' = c' = 1``; ``b'``, ``d'`` the ratio of mean to
variance of the row and column totals, ``d'`` at least ``b'/1000``).

The product of the two factor matrices is unchanged when a component's loadings are
multiplied by ``s_k`` and its feature weights divided by it, and the learned priors of
HierarchicalPMF follow such a rescaling, so the scale of each component is arbitrary. The
capacities, however, sum over components, so scores need each component on scHPF's scale.
That scale is the one at which scHPF's bound is stationary in ``s_k``: its terms in ``s_k``
are ``(n a_k - p c_k) log s_k - s_k sum_i xi_i L_ik - (1/s_k) sum_j eta_j F_jk``, whose
maximum is the positive root of a quadratic. The scales and the capacities are solved
together by coordinate ascent (each step raises that bound), so the scores are the same
whatever the fit's own scale.
"""

import numpy as np

__all__ = ["capacity_rate", "hierarchical_scores", "row_scores"]

# scHPF's shapes of the capacities' priors (its a' and c').
_CAPACITY_SHAPE = 1.0
# scHPF clips d' at b' / 1000.
_RATE_CLIP = 1000.0
# Coordinate ascent on the scales: stop at this relative change, or this many rounds.
_TOL = 1e-12
_MAX_ROUNDS = 10_000


def capacity_rate(totals):
    """scHPF's empirical rate of a capacity prior: ``a'`` times mean over variance of the
    totals (of the rows, for ``b'``; of the columns, for ``d'``)."""
    totals = np.asarray(totals, dtype=np.float64)
    variance = float(np.var(totals))
    mean = float(np.mean(totals))
    # all totals equal: no spread to learn a rate from; the mean's inverse has the units
    return _CAPACITY_SHAPE * (mean / variance if variance > 0 else 1.0 / max(mean, 1e-300))


def _capacities(L, F, scale, shape_l, shape_f, rate_l, rate_f):
    xi = (_CAPACITY_SHAPE + shape_l.sum()) / (rate_l + L @ scale)
    eta = (_CAPACITY_SHAPE + shape_f.sum()) / (rate_f + F @ (1.0 / scale))
    return xi, eta


def hierarchical_scores(L, F, shape_l, shape_f, *, rate_l=None, rate_f=None):
    """scHPF's cell and gene scores of a fit, on scHPF's scale of the components.

    Parameters
    ----------
    L : ndarray of shape (n_samples, n_components)
        Posterior means of the loadings.
    F : ndarray of shape (n_features, n_components)
        Posterior means of the feature weights (``components_.T``).
    shape_l, shape_f : ndarray of shape (n_components,)
        The shapes of the Gamma priors of the loadings and of the feature weights (scHPF's
        ``a`` and ``c``).
    rate_l, rate_f : float, default=None
        scHPF's ``b'`` and ``d'``; by default from the totals of the fitted mean
        ``L @ F.T`` (:func:`capacity_rate`), ``d'`` clipped at ``b'/1000`` as scHPF does.

    Returns
    -------
    row_scores : ndarray of shape (n_samples, n_components)
        ``s_k E[L_ik] E[xi_i]``: scHPF's cell scores.
    feature_scores : ndarray of shape (n_features, n_components)
        ``E[F_jk] E[eta_j] / s_k``: scHPF's gene scores.
    scale : ndarray of shape (n_components,)
        The scales ``s_k`` that put the components on scHPF's scale.
    rates : tuple of float
        ``(b', d')``, to score new rows on the same capacities' prior.
    """
    L = np.asarray(L, dtype=np.float64)
    F = np.asarray(F, dtype=np.float64)
    shape_l = np.broadcast_to(np.asarray(shape_l, dtype=np.float64), L.shape[1:])
    shape_f = np.broadcast_to(np.asarray(shape_f, dtype=np.float64), L.shape[1:])
    if rate_l is None:
        rate_l = capacity_rate(L @ F.sum(axis=0))
    if rate_f is None:
        rate_f = max(capacity_rate(F @ L.sum(axis=0)), rate_l / _RATE_CLIP)
    n, p = L.shape[0], F.shape[0]
    pull = n * shape_l - p * shape_f
    alive = (L.sum(axis=0) > 0) & (F.sum(axis=0) > 0)
    scale = np.ones(L.shape[1])
    # a start at the balance of the two sums, then coordinate ascent
    scale[alive] = np.sqrt(F[:, alive].sum(axis=0) / L[:, alive].sum(axis=0))
    for _ in range(_MAX_ROUNDS):
        xi, eta = _capacities(L, F, scale, shape_l, shape_f, rate_l, rate_f)
        A = xi @ L[:, alive]
        B = eta @ F[:, alive]
        m = pull[alive]
        # the positive root of A s^2 - m s - B, written to avoid cancellation when m < 0
        root = np.sqrt(m * m + 4.0 * A * B)
        new = np.where(m >= 0, (m + root) / (2.0 * A), 2.0 * B / (root - m))
        change = np.max(np.abs(new / scale[alive] - 1.0), initial=0.0)
        scale[alive] = new
        if change <= _TOL:
            break
    xi, eta = _capacities(L, F, scale, shape_l, shape_f, rate_l, rate_f)
    row_scores = L * scale * xi[:, None]
    feature_scores = F / scale * eta[:, None]
    return row_scores, feature_scores, scale, (float(rate_l), float(rate_f))


def row_scores(L, scale, shape_l, rate_l):
    """Cell scores of new rows, with the components' scales and ``b'`` of the fit."""
    L = np.asarray(L, dtype=np.float64)
    xi = (_CAPACITY_SHAPE + np.sum(shape_l)) / (rate_l + L @ scale)
    return L * scale * xi[:, None]
