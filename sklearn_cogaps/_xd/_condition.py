"""A Gaussian mixture conditioned on some of its coordinates: the mixture of the others,
given measured values with their own noise (XDGMM's ``condition``; Bovy, Hogg & Roweis 2011
use it to predict unmeasured quantities from the deconvolved density)."""

from collections.abc import Mapping

import numpy as np
from scipy.special import logsumexp

from .._utils._validation import check_not_masked

__all__ = ["condition_mixture", "given_values"]


def _labels(obj):
    """The labels of a pandas Series (its index) or of a one-row DataFrame (its columns),
    as strings; None for anything else, or labels that are not all strings."""
    if hasattr(obj, "columns") and hasattr(obj, "iloc"):
        labels = list(obj.columns)
    elif hasattr(obj, "index") and hasattr(obj, "iloc") and getattr(obj, "ndim", 0) == 1:
        labels = list(obj.index)
    else:
        return None
    return labels if labels and all(isinstance(x, str) for x in labels) else None


def _from_mapping(what, mapping, names):
    """A dict of feature name -> value (XDGMM's ``X_dict``, ``Xerr_dict``) as a vector in
    the order of the fitted names: NaN (to predict) for the values not given, 0 for their
    variances (not read)."""
    if names is None:
        raise ValueError(
            f"{what} given as a dict of feature name -> value needs the feature names: fit "
            "on a pandas DataFrame, or pass an array with NaN for the coordinates to "
            "predict, e.g. np.array([1.2, np.nan, 0.3])."
        )
    known = set(names)
    unknown = [key for key in mapping if key not in known]
    if unknown:
        raise ValueError(
            f"{what} names features not seen in fit: {unknown}; the features are {list(names)}."
        )
    pairs = {key: v for key, v in mapping.items() if np.ndim(v) != 0}
    if pairs:
        key, v = next(iter(pairs.items()))
        raise ValueError(
            f"{what} gives {key!r}: {v!r}, not one number (XDGMM's X_dict pairs of a value "
            "and its error): give the values in X and their noise variances in X_cov, both "
            f"by name, e.g. condition({{{key!r}: value}}, X_cov={{{key!r}: error**2}}) for "
            "a standard error."
        )
    fill = np.nan if what == "X" else 0.0
    return np.array([float(mapping[n]) if n in mapping else fill for n in names])


def aligned_by_name(values, value_cov, names):
    """``values`` and ``value_cov`` in the order of the fitted feature ``names``, where they
    are labelled (pandas): a Series of values or of variances is read by its labels, as a
    labelled vector, not by position (a point written as ``pd.Series({"z": 1.0, "r": nan,
    "g": nan})`` would otherwise condition on the first feature); a DataFrame must have the
    fitted names in their order, as every method of a scikit-learn estimator requires. A
    dict gives the known values by name (XDGMM's ``X_dict``); the others are predicted."""
    out = []
    for what, obj in (("X", values), ("X_cov", value_cov)):
        if isinstance(obj, Mapping):
            out.append(_from_mapping(what, obj, names))
            continue
        labels = _labels(obj)
        if labels is None or names is None:
            out.append(obj)
            continue
        missing = [n for n in names if n not in labels]
        extra = [x for x in labels if x not in set(names)]
        if missing or extra or len(labels) != len(names):
            raise ValueError(
                f"The labels of {what} must be the feature names seen in fit, "
                f"{list(names)}; missing: {missing}, unknown: {extra}. Give every feature, "
                "with NaN for those to predict."
            )
        if hasattr(obj, "columns"):
            rows = list(obj.index)
            square = obj.shape[0] == len(names) and all(isinstance(x, str) for x in rows)
            if list(obj.columns) != list(names) or (square and rows != list(names)):
                fix = f"{what}.loc[names, names]" if square else f"{what}[names]"
                raise ValueError(
                    f"The columns (and, for a covariance, the rows) of {what} must be the "
                    f"feature names in the order seen in fit, names = {list(names)}; got "
                    f"{labels}. Write {fix}."
                )
            out.append(obj.to_numpy())
            continue
        out.append(obj[list(names)].to_numpy())
    return out[0], out[1]


def given_values(values, value_cov, n_dims):
    """The values to condition on (NaN for the coordinates left free) and the covariance of
    their noise, checked: ``(known, values, cov)`` with ``known`` a boolean mask."""
    check_not_masked(
        values, "X", advice="Mark the coordinates to predict with NaN: X.filled(np.nan)."
    )
    check_not_masked(value_cov, "X_cov")
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
        if kk.size == 0:  # nothing given: the noise of no value, the mixture unconditioned
            return known, x, cov
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
