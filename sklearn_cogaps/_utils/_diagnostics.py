"""Convergence diagnostics of Markov chains: rank-normalised split R-hat, bulk and tail
effective sample sizes (Vehtari, Gelman, Simpson, Carpenter & Bürkner 2021, "Rank-
normalization, folding, and localization: an improved R-hat for assessing convergence of
MCMC", Bayesian Analysis 16(2)), computed as ArviZ computes them, for many quantities at
once.

Draws are arrays of shape ``(n_chains, n_draws, *shape)``; every function returns an array
of ``shape`` (a float for scalar quantities). A quantity that is constant over all its draws
(an element of a matrix that the atomic prior keeps at zero) has no spread to compare: its
R-hat is NaN and its effective sample size the number of draws, as in ArviZ.

The quantities are independent of each other, so they are taken a block at a time: the
temporaries (ranks, normal scores, spectra) are those of a block, not of every entry of the
fitted matrices, whose draws at single-cell size are already hundreds of megabytes. Every
quantity gets the same bits whatever the block it falls in.
"""

import numpy as np
from scipy.special import ndtri
from scipy.stats import f as f_distribution

__all__ = ["diagnostics", "ess_bulk", "ess_tail", "rhat", "rhat_threshold"]

# Vehtari et al. (2021), section 4.3: a chain is trusted when R-hat < 1.01 and the bulk and
# tail effective sample sizes exceed 100 per chain.
RHAT_THRESHOLD = 1.01
MIN_ESS_PER_CHAIN = 100
# The chance that chains of independent draws from one law fail rhat_threshold.
RHAT_FALSE_ALARM = 0.05
# Above this, rhat_threshold would pass chains that sit apart: the rank-normalised R-hat of
# a chain far from the others stays near 1.5 to 1.8 with 2 to 4 chains, and one 2 standard
# deviations off near 1.3, so too few draws for that many quantities cannot say that
# chains agree.
RHAT_LIMIT = 1.15


def rhat_threshold(n_chains, n_draws, n_quantities=1):
    """The largest R-hat that says chains agree on ``n_quantities`` quantities at once from
    ``n_draws`` draws per chain: ``RHAT_THRESHOLD``, or more where chains of independent
    draws from one law would exceed it by chance.

    Vehtari et al. (2021) ask R-hat < 1.01 of each quantity of interest. Over thousands of
    quantities from a hundred draws per chain, the largest R-hat of chains that agree
    exceeds 1.01 by chance alone (1.02 over 60 quantities of 4 chains x 100 independent
    draws), and no number of iterations changes that while the draws are the same number.
    For independent normal draws the squared split R-hat of a quantity is ``(n - 1) / n +
    F / n``, ``F`` of the F distribution with ``m - 1`` and ``m (n - 1)`` degrees of freedom
    (``m`` split chains of ``n`` draws; the bulk and the folded R-hat, two tests per
    quantity); the threshold is the quantile that all quantities pass with probability
    ``1 - RHAT_FALSE_ALARM`` (Bonferroni), never below ``RHAT_THRESHOLD``. Draws closer
    together than the chain's autocorrelation time have a larger R-hat and fail it: their
    chains need more iterations between draws. A threshold above ``RHAT_LIMIT`` says that
    the draws are too few to judge that many quantities: chains apart would pass it.

    Parameters
    ----------
    n_chains, n_draws : int
        Chains, and draws of each (at least 4).
    n_quantities : int, default=1
        The quantities that must all pass.

    Returns
    -------
    threshold : float
    """
    m, n = 2 * n_chains, n_draws // 2
    if n < 2 or n_quantities < 1:
        return RHAT_THRESHOLD
    q = f_distribution.isf(RHAT_FALSE_ALARM / (2 * n_quantities), m - 1, m * (n - 1))
    return max(RHAT_THRESHOLD, float(np.sqrt((n - 1) / n + q / n)))


# Draws per block of quantities (chains x draws x quantities): the temporaries of a block are
# about twenty times this many doubles.
_BLOCK_DRAWS = 1 << 19


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


def _average_ranks(x):
    """Ranks 1..S of each column of ``x`` (S, q), ties given the mean of their ranks, NaN
    for a column holding a NaN (scipy's ``rankdata``, exactly: the ranks are halves).
    Sorted as rows of the transpose, each column's draws contiguous."""
    S, q = x.shape
    rows = np.ascontiguousarray(x.T)
    order = np.argsort(rows, axis=1)
    ordered = np.take_along_axis(rows, order, axis=1)
    starts = np.ones((q, S), dtype=bool)
    starts[:, 1:] = ordered[:, 1:] != ordered[:, :-1]
    ends = np.ones((q, S), dtype=bool)
    ends[:, :-1] = starts[:, 1:]
    position = np.broadcast_to(np.arange(S), (q, S))
    # each draw's tie group: the positions of its first and last member in sorted order
    first = np.maximum.accumulate(np.where(starts, position, 0), axis=1)
    last = np.minimum.accumulate(np.where(ends, position, S - 1)[:, ::-1], axis=1)[:, ::-1]
    ranks = np.empty((q, S))
    np.put_along_axis(ranks, order, (first + last) / 2.0 + 1.0, axis=1)
    ranks[np.isnan(rows).any(axis=1)] = np.nan
    # C order, as the reductions that follow sum in the order of the memory they read
    return np.ascontiguousarray(ranks.T)


def _z_scale(x):
    """Rank normalisation (section 4.2): the ranks of all draws of a quantity, pooled over
    chains (ties averaged), through the normal quantile function at (r - 3/8) / (S + 1/4)."""
    m, n, q = x.shape
    ranks = _average_ranks(x.reshape(m * n, q))
    return ndtri((ranks - 0.375) / (m * n + 0.25)).reshape(m, n, q)


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
    changes. ``compute`` may return a tuple of arrays, with a tuple of ``constant``."""
    x, shape = _as_draws(draws)
    m, n, q = x.shape
    several = isinstance(constant, tuple)
    constants = constant if several else (constant,)
    if n < 4:
        outs = [_finish(np.full(q, np.nan), shape) for _ in constants]
        return tuple(outs) if several else outs[0]
    # blocks of at least two quantities: numpy sums a lone column's draws pairwise, several
    # columns' draws in order, and every quantity keeps the bits of a whole-array pass
    n_blocks = max(1, min(q // 2, -(-m * n * q // _BLOCK_DRAWS)))
    outs = [np.empty(q) for _ in constants]
    for block in np.array_split(np.arange(q), n_blocks):
        part = x[:, :, block[0] : block[-1] + 1]
        values = compute(part)
        for out, value in zip(outs, values if several else (values,)):
            out[block[0] : block[-1] + 1] = value
    fixed = _constant(x)
    for out, value in zip(outs, constants):
        out[fixed] = m * n if value is None else value
    outs = [_finish(out, shape) for out in outs]
    return tuple(outs) if several else outs[0]


def _rank_rhat(x, z=None):
    """``z``: the rank-normalised split chains, when already computed."""
    split = _split(x)
    bulk = _rhat_basic(_z_scale(split) if z is None else z)
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
    # the power spectrum as a real array: numpy's complex product may fuse its multiply-adds
    # in vector loops and not in scalar ones, which left imaginary parts of 1e-17 or exactly
    # 0 by the quantity's place in memory, and the autocovariances' last bits with them
    power = spectrum.real**2 + spectrum.imag**2
    return np.fft.irfft(power, n=size, axis=1)[:, :n] / n


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


def _type7_quantile(ordered, prob):
    """R's type-7 quantile of each column of the sorted draws (S, q), with the arithmetic of
    scipy's ``mquantiles(alphap=1, betap=1)`` (ArviZ's): where the quantile falls on a draw,
    another rounding of the same value would move that draw's indicator."""
    S = ordered.shape[0]
    p = np.array([prob])
    aleph = S * p + (1.0 + p * (1.0 - 1.0 - 1.0))
    k = np.floor(aleph.clip(1, S - 1)).astype(int)
    gamma = (aleph - k).clip(0, 1)
    return (1.0 - gamma) * ordered[k[0] - 1] + gamma * ordered[k[0]]


def diagnostics(draws, tail=True):
    """:func:`rhat`, :func:`ess_bulk` and, with ``tail``, :func:`ess_tail` of the same
    draws in one pass over their blocks, each with the bits of its own function: the
    rank-normalised split chains serve the bulk R-hat and the bulk ESS alike.

    Parameters
    ----------
    draws : array-like of shape (n_chains, n_draws, ...)
        At least 4 draws per chain.
    tail : bool, default=True
        Whether to compute the tail effective sample size too.

    Returns
    -------
    rhat, ess_bulk[, ess_tail] : float or ndarray
    """

    def compute(x):
        z = _z_scale(_split(x))
        values = (_rank_rhat(x, z), _ess(z))
        return values + (_tail_ess(x),) if tail else values

    return _evaluate(draws, compute, (np.nan, None, None) if tail else (np.nan, None))


def _tail_ess(x):
    ordered = np.sort(x.reshape(-1, x.shape[2]), axis=0)
    lows = []
    for prob in (0.05, 0.95):
        level = _type7_quantile(ordered, prob)
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
