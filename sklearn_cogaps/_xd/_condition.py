"""A Gaussian mixture conditioned on some of its coordinates: the mixture of the others,
given measured values with their own noise (XDGMM's ``condition``; Bovy, Hogg & Roweis 2011
use it to predict unmeasured quantities from the deconvolved density)."""

import numpy as np
from scipy.special import logsumexp

__all__ = ["condition_mixture", "given_values"]


def given_values(values, value_cov, n_dims):
    """The values to condition on (NaN for the coordinates left free) and the covariance of
    their noise, checked: ``(known, values, cov)`` with ``known`` a boolean mask."""
    x = np.asarray(values, dtype=np.float64)
    if x.ndim == 2 and x.shape[0] == 1:
        x = x[0]
    if x.shape != (n_dims,):
        raise ValueError(
            f"condition takes one point of {n_dims} values, NaN where a coordinate is to be "
            f"predicted; got an array of shape {np.shape(values)}. For many points at once, "
            "deconvolve(X) gives each point's conditional mean and covariance."
        )
    known = ~np.isnan(x)
    if not np.all(np.isfinite(x[known])):
        raise ValueError("The values to condition on must be finite (NaN marks a free one).")
    if known.all():
        raise ValueError(
            "Every coordinate has a value: mark the ones to predict with NaN, e.g. "
            "x = np.array([1.2, np.nan, 0.3]) to predict the second from the others."
        )
    if value_cov is None:
        cov = np.zeros((n_dims, n_dims))
    else:
        c = np.asarray(value_cov, dtype=np.float64)
        if c.ndim == 2 and c.shape[0] == 1 and c.shape[1] == n_dims:
            c = c[0]
        if c.shape == (n_dims,):
            cov = np.diag(np.where(known, c, 0.0))
        elif c.shape == (n_dims, n_dims):
            cov = c
        else:
            raise ValueError(
                f"X_cov must be the variances of the {n_dims} values, shape ({n_dims},), or "
                f"their covariance, ({n_dims}, {n_dims}); got shape {c.shape}."
            )
        kk = cov[np.ix_(known, known)]
        if not np.all(np.isfinite(kk)) or not np.allclose(kk, kk.T):
            raise ValueError("X_cov of the given values must be finite and symmetric.")
        if np.any(np.linalg.eigvalsh(kk) < -1e-12 * max(1.0, np.abs(kk).max())):
            raise ValueError("X_cov of the given values must be positive semi-definite.")
    return known, x, cov


def condition_mixture(weights, means, covs, known, x, noise):
    """The mixture of the free coordinates given ``x[known]`` measured with noise ``noise``.

    Each component j splits into the known block b and the free block a; with
    S = V_bb + noise_bb, its conditional is N(m_a + V_ab S^-1 (x_b - m_b),
    V_aa - V_ab S^-1 V_ba), and its weight becomes proportional to
    alpha_j N(x_b | m_b, S): the Gaussian identities behind Bovy et al. (2011), section 2,
    applied to the deconvolved components.

    Returns
    -------
    weights, means, covs : ndarray
        The conditional mixture, over the free coordinates.
    """
    free = ~known
    K = weights.shape[0]
    out_means = np.empty((K, int(free.sum())))
    out_covs = np.empty((K, int(free.sum()), int(free.sum())))
    log_w = np.empty(K)
    noise_bb = noise[np.ix_(known, known)]
    diff_all = x[known][None, :] - means[:, known]
    for j in range(K):
        V = covs[j]
        S = V[np.ix_(known, known)] + noise_bb
        L = np.linalg.cholesky(0.5 * (S + S.T))
        V_ab = V[np.ix_(free, known)]
        # gain G = V_ab S^-1 through the Cholesky factor (two triangular solves)
        G = np.linalg.solve(L.T, np.linalg.solve(L, V_ab.T)).T
        out_means[j] = means[j, free] + G @ diff_all[j]
        C = V[np.ix_(free, free)] - G @ V_ab.T
        out_covs[j] = 0.5 * (C + C.T)
        z = np.linalg.solve(L, diff_all[j])
        log_w[j] = (np.log(weights[j]) - 0.5 * z @ z - np.sum(np.log(np.diag(L)))
                    - 0.5 * known.sum() * np.log(2 * np.pi))  # fmt: skip
    return np.exp(log_w - logsumexp(log_w)), out_means, out_covs
