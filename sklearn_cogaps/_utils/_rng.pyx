"""Python access to the nogil generator, for tests and for seeding from ``random_state``."""

import numpy as np

from libc.stdint cimport uint64_t
from ._rng cimport (Rng, rng_seed, rng_uniform, rng_normal, rng_exponential,
                    rng_gamma, rng_poisson, rng_below)


def draw(str distribution, Py_ssize_t size, uint64_t seed, double param=1.0):
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
