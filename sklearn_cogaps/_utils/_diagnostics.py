"""Convergence diagnostics of Markov chains: rank-normalised split R-hat, bulk and tail
effective sample sizes (Vehtari, Gelman, Simpson, Carpenter & Bürkner 2021, "Rank-
normalization, folding, and localization: an improved R-hat for assessing convergence of
MCMC", Bayesian Analysis 16(2)), computed as ArviZ computes them, for many quantities at
once.

Draws are arrays of shape ``(n_chains, n_draws, *shape)``; every function returns an array
of ``shape`` (a float for scalar quantities). A quantity that is constant over all its draws
(an element of a matrix that the atomic prior keeps at zero) has no spread to compare: its
R-hat is NaN and its effective sample size the number of draws, as in ArviZ.
"""

import numpy as np
from scipy import stats
from scipy.stats import mstats

__all__ = ["ess_bulk", "ess_tail", "rhat"]

# Vehtari et al. (2021), section 4.3: a chain is trusted when R-hat < 1.01 and the bulk and
# tail effective sample sizes exceed 100 per chain.
RHAT_THRESHOLD = 1.01
MIN_ESS_PER_CHAIN = 100


def _as_draws(draws):
    x = np.asarray(draws, dtype=np.float64)
    if x.ndim < 2:
        raise ValueError(
            f"draws must have shape (n_chains, n_draws, ...); got shape {x.shape}. Pass one "
            "chain as draws[None]."
        )
    return x.reshape(x.shape[0], x.shape[1], -1), x.shape[2:]


def _finish(values, shape):
    values = values.reshape(shape)
    return float(values) if values.ndim == 0 else values


def _split(x):
    """Each chain's first and last halves as two chains (the middle draw of an odd count
    left out), section 4.1: a chain that drifts then disagrees with itself."""
    half = x.shape[1] // 2
    return np.concatenate([x[:, :half], x[:, x.shape[1] - half :]], axis=0)


def _z_scale(x):
    """Rank normalisation (section 4.2): the ranks of all draws of a quantity, pooled over
    chains (ties averaged), through the normal quantile function at (r - 3/8) / (S + 1/4)."""
    m, n, q = x.shape
    ranks = stats.rankdata(x.reshape(m * n, q), axis=0)
    return stats.norm.ppf((ranks - 0.375) / (m * n + 0.25)).reshape(m, n, q)


def _rhat_basic(x):
    """Gelman-Rubin R-hat of chains (m, n, q): sqrt of the pooled over the within-chain
    variance estimate."""
    n = x.shape[1]
    within = np.var(x, axis=1, ddof=1).mean(axis=0)
    between = n * np.var(x.mean(axis=1), axis=0, ddof=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.sqrt((between / within + n - 1) / n)


def _constant(x):
    """Quantities whose every draw is the same number. Only exactly: draws that differ by
    less than the float resolution (an amplitude of 1.8e-18 in one chain and 0 in the
    others) still rank apart, and the rank-normalised diagnostics see them as ArviZ does."""
    return x.max(axis=(0, 1)) == x.min(axis=(0, 1))


def _evaluate(draws, compute, constant):
    """``compute`` of (n_chains, n_draws, q) draws, reshaped back; NaN with fewer than 4
    draws per chain, ``constant`` (or the number of draws, for None) where a quantity never
    changes."""
    x, shape = _as_draws(draws)
    if x.shape[1] < 4:
        return _finish(np.full(x.shape[2], np.nan), shape)
    out = compute(x)
    out[_constant(x)] = x.shape[0] * x.shape[1] if constant is None else constant
    return _finish(out, shape)


def _rank_rhat(x):
    split = _split(x)
    bulk = _rhat_basic(_z_scale(split))
    folded = np.abs(split - np.median(split.reshape(-1, split.shape[2]), axis=0))
    out = np.fmax(bulk, _rhat_basic(_z_scale(folded)))
    out[~np.all(np.isfinite(x), axis=(0, 1))] = np.nan
    return out


def rhat(draws):
    """Rank-normalised split R-hat: the larger of the bulk R-hat (of the rank-normalised
    draws) and the tail R-hat (of the rank-normalised distance to the median), section 4.3.

    Parameters
    ----------
    draws : array-like of shape (n_chains, n_draws, ...)
        At least 4 draws per chain.

    Returns
    -------
    rhat : float or ndarray
        1 for chains that agree; above 1.01 they do not yet.
    """
    return _evaluate(draws, _rank_rhat, np.nan)


def _autocovariance(x):
    """Each chain's autocovariances at lags 0..n-1 (divided by n), by FFT: (m, n, q)."""
    n = x.shape[1]
    centred = x - x.mean(axis=1, keepdims=True)
    size = 1 << int(np.ceil(np.log2(2 * n)))
    spectrum = np.fft.rfft(centred, n=size, axis=1)
    return np.fft.irfft(spectrum * np.conj(spectrum), n=size, axis=1)[:, :n] / n


def _ess(x):
    """Effective sample size of chains (m, n, q), section 3.2: the autocorrelations combined
    over chains, summed in pairs up to the first non-positive pair (Geyer's initial positive
    sequence) and made monotone (Geyer's initial monotone sequence)."""
    m, n, q = x.shape
    acov = _autocovariance(x)
    within = acov[:, 0].mean(axis=0) * n / (n - 1.0)
    var_plus = within * (n - 1.0) / n
    if m > 1:
        var_plus = var_plus + np.var(x.mean(axis=1), axis=0, ddof=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        rho = 1.0 - (within - acov.mean(axis=0)) / var_plus  # (n, q)
    rho[0] = 1.0
    n_pairs = max((n - 3) // 2, 0)  # the pairs after the first that the sequence may use
    pairs = rho[: 2 * (n_pairs + 1)].reshape(n_pairs + 1, 2, q).sum(axis=1)  # (J + 1, q)
    # the last pair read: the first non-positive one after a positive run, or the last
    if n_pairs == 0:
        last = np.zeros(q, dtype=np.intp)
    else:
        nonpositive = pairs[1:] <= 0
        last = np.where(nonpositive.any(axis=0), nonpositive.argmax(axis=0) + 1, n_pairs)
        last = np.where(pairs[0] > 0, last, 0)
    monotone = np.minimum.accumulate(pairs, axis=0)
    kept = np.arange(n_pairs + 1)[:, None] < last[None, :]
    tau = -1.0 + 2.0 * np.sum(np.where(kept, monotone, 0.0), axis=0)
    # the first autocorrelation of the last pair read counts once, when positive or when its
    # pair was (Geyer's truncation as ArviZ implements it)
    cols = np.arange(q)
    even = rho[2 * last, cols]
    read = last > 0
    counted = np.where(read & ((pairs[last, cols] >= 0) | (even > 0)), even, 0.0)
    counted = np.where(read, counted, 1.0)  # no pair read: the lag-0 term alone
    tau = tau + counted
    total = m * n
    tau = np.maximum(tau, 1.0 / np.log10(total))
    ess = total / tau
    ess[np.any(np.isnan(rho), axis=0)] = np.nan
    ess[_constant(x)] = total
    return ess


def ess_bulk(draws):
    """Bulk effective sample size: of the rank-normalised split chains (section 4.3), how
    many independent draws estimate the centre of the posterior as well as these.

    Parameters
    ----------
    draws : array-like of shape (n_chains, n_draws, ...)
        The chains' draws of each quantity.

    Returns
    -------
    ess : float or ndarray
        Between 0 and about n_chains * n_draws (more for anticorrelated chains).
    """
    return _evaluate(draws, lambda x: _ess(_z_scale(_split(x))), None)


def _tail_ess(x):
    pooled = x.reshape(-1, x.shape[2])
    lows = []
    for prob in (0.05, 0.95):
        # R's type-7 quantile as scipy's mquantiles computes it (ArviZ's): where it falls
        # on a draw, another rounding of the same value would move that draw's indicator
        level = np.asarray(mstats.mquantiles(pooled, [prob], alphap=1, betap=1, axis=0))
        below = (x <= level.reshape(1, 1, -1)).astype(np.float64)
        lows.append(_ess(_split(below)))
    return np.fmin(*lows)


def ess_tail(draws):
    """Tail effective sample size: the smaller of those of the 5% and 95% quantiles (of the
    split chains' indicators of lying below them), section 4.3.

    Parameters
    ----------
    draws : array-like of shape (n_chains, n_draws, ...)
        Draws of the quantities whose tails the chains estimate.

    Returns
    -------
    ess : float or ndarray
        The effective number of draws behind the 5% and 95% quantiles.
    """
    return _evaluate(draws, _tail_ess, None)
