# Exact sampling from a normal distribution truncated to [a, b], including intervals that
# lie tens of standard deviations (or more) in a tail. With standardised bounds
# alpha = (a - mu) / sigma and beta = (b - mu) / sigma, four exact rejection samplers cover
# every case (Robert 1995, "Simulation of truncated normal variables"):
#   * interval straddling 0, wide: plain normal draws, accepted inside [alpha, beta];
#   * interval straddling 0, narrow: uniform proposal, accepted with exp(-z^2 / 2);
#   * interval in one tail, narrow relative to 1/alpha: uniform proposal, accepted with
#     exp((alpha^2 - z^2) / 2);
#   * interval in one tail otherwise: translated exponential with the optimal rate
#     lam = (alpha + sqrt(alpha^2 + 4)) / 2, accepted with exp(-(z - lam)^2 / 2), z <= beta.
# Every branch accepts with probability above about 0.35, so no loop runs long. Tail
# draws are computed as an offset from the near bound, which keeps full precision when the
# mean is far away, and the result is always a finite number inside [a, b].
from libc.math cimport sqrt, exp, log1p, expm1, isfinite
from ._rng cimport Rng, rng_uniform, rng_normal, rng_exponential


cdef inline double _tail_offset(Rng* r, double alpha, double beta) noexcept nogil:
    """z - alpha for z a standard normal truncated to [alpha, beta], 0 <= alpha < beta."""
    cdef double e, lam, width = beta - alpha
    if alpha > 1e8:
        # So far out that exp(-e^2 / 2) differs from 1 by under 1e-16 where the density
        # lives: the tail is an exponential of rate alpha, truncated at beta.
        return -log1p(rng_uniform(r) * expm1(-alpha * width)) / alpha
    if alpha * width < 1.0 and width < 2.5:
        while True:
            e = width * rng_uniform(r)
            if rng_uniform(r) <= exp(-0.5 * e * (2.0 * alpha + e)):
                return e
    lam = 0.5 * (alpha + sqrt(alpha * alpha + 4.0))
    while True:
        e = rng_exponential(r) / lam
        if e > width:
            continue
        # accept with exp(-(z - lam)^2 / 2) where z = alpha + e
        if rng_uniform(r) <= exp(-0.5 * (alpha + e - lam) * (alpha + e - lam)):
            return e


cdef inline double _central_sample(Rng* r, double alpha, double beta) noexcept nogil:
    """Standard normal truncated to [alpha, beta] with alpha < 0 < beta."""
    cdef double z, width = beta - alpha
    if width < 2.5:
        while True:
            z = alpha + width * rng_uniform(r)
            if rng_uniform(r) <= exp(-0.5 * z * z):
                return z
    while True:
        z = rng_normal(r)
        if alpha <= z <= beta:
            return z


cdef inline double truncnorm_sample(Rng* r, double mu, double sigma,
                                    double a, double b) noexcept nogil:
    """One draw of N(mu, sigma^2) truncated to [a, b] (a may be -inf, b may be +inf).

    Degenerate parameters never produce NaN: a non-positive or non-finite sigma, or a
    non-finite mean, returns the point of [a, b] nearest to mu (a if mu is NaN).
    """
    cdef double alpha, beta, x
    if not (b > a):
        return a
    if not (sigma > 0.0) or not isfinite(sigma) or not isfinite(mu):
        if mu != mu:
            return a if isfinite(a) else (b if isfinite(b) else 0.0)
        return a if mu < a else (b if mu > b else mu)
    alpha = (a - mu) / sigma
    beta = (b - mu) / sigma
    if alpha >= 0.0:
        x = a + sigma * _tail_offset(r, alpha, beta) if isfinite(alpha) else a
    elif beta <= 0.0:
        x = b - sigma * _tail_offset(r, -beta, -alpha) if isfinite(beta) else b
    else:
        x = mu + sigma * _central_sample(r, alpha, beta)
    # Round-off at the bounds only.
    if x < a:
        return a
    if x > b:
        return b
    return x
