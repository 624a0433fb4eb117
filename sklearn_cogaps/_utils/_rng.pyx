"""Python access to the nogil generator, for tests and for seeding from ``random_state``."""

import numpy as np

from libc.stdint cimport uint64_t
from ._rng cimport (Rng, rng_seed, rng_uniform, rng_normal, rng_exponential,
                    rng_gamma, rng_poisson, rng_below, rng_below_by, Divisor, divisor_init,
                    divisor_div)


def _draw_for_tests(str distribution, Py_ssize_t size, uint64_t seed, double param=1.0):
    """Draw ``size`` values from one of the package's nogil samplers.

    Parameters
    ----------
    distribution : {"uniform", "normal", "exponential", "gamma", "poisson", "below"}
        Which sampler; ``param`` is the Gamma shape, the Poisson mean, or the bound of
        the uniform integer.
    size : int
        Number of draws.
    seed : int
        Seed of the stream (64 bits).
    param : float, default=1.0
        The distribution's parameter where it has one.

    Returns
    -------
    values : ndarray of shape (size,)
        The draws, float64 (int64 for "poisson" and "below").
    """
    cdef Rng r
    cdef Py_ssize_t i
    rng_seed(&r, seed)
    if distribution in ("poisson", "below"):
        ints = np.empty(size, dtype=np.int64)
        for i in range(size):
            if distribution == "poisson":
                ints[i] = rng_poisson(&r, param)
            else:
                ints[i] = <long>rng_below(&r, <uint64_t>param)
        return ints
    out = np.empty(size, dtype=np.float64)
    cdef double[::1] o = out
    for i in range(size):
        if distribution == "uniform":
            o[i] = rng_uniform(&r)
        elif distribution == "normal":
            o[i] = rng_normal(&r)
        elif distribution == "exponential":
            o[i] = rng_exponential(&r)
        elif distribution == "gamma":
            o[i] = rng_gamma(&r, param)
        else:
            raise ValueError(f"unknown distribution {distribution!r}")
    return out


def _divide_for_tests(const uint64_t[::1] x, uint64_t d):
    """Quotients and remainders of ``x`` by ``d`` (> 0) through the prepared division of
    the sampler (``Divisor``), for tests against exact integer division.

    Parameters
    ----------
    x : ndarray of uint64
        Dividends.
    d : int
        Divisor, 1 to 2**64 - 1.

    Returns
    -------
    quotient, remainder : ndarrays of uint64
    """
    cdef Divisor v
    cdef Py_ssize_t i
    cdef uint64_t rem
    divisor_init(&v, d)
    q = np.empty(x.shape[0], dtype=np.uint64)
    r = np.empty(x.shape[0], dtype=np.uint64)
    cdef uint64_t[::1] qv = q
    cdef uint64_t[::1] rv = r
    for i in range(x.shape[0]):
        qv[i] = divisor_div(&v, x[i], &rem)
        rv[i] = rem
    return q, r


def _below_by_for_tests(Py_ssize_t size, uint64_t seed, uint64_t n):
    """``size`` draws of ``rng_below_by`` with a divisor prepared for ``n``, for tests
    against the plain ``_draw_for_tests("below", ...)`` of the same stream.

    Parameters
    ----------
    size : int
    seed : int
    n : int
        Bound of the uniform integer, 1 to 2**64 - 1.

    Returns
    -------
    values : ndarray of uint64
    """
    cdef Rng r
    cdef Divisor v
    cdef Py_ssize_t i
    rng_seed(&r, seed)
    divisor_init(&v, n)
    out = np.empty(size, dtype=np.uint64)
    cdef uint64_t[::1] o = out
    for i in range(size):
        o[i] = rng_below_by(&r, &v, (<uint64_t>0 - n) % n)
    return out
