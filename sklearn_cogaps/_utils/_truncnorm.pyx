"""Python access to the truncated-normal sampler, for tests."""

import numpy as np

from libc.stdint cimport uint64_t
from ._rng cimport Rng, rng_seed
from ._truncnorm cimport truncnorm_sample


def _truncnorm_for_tests(double mean, double sd, double lower, double upper,
                     Py_ssize_t size, uint64_t seed):
    """Draw from N(mean, sd**2) truncated to [lower, upper].

    Parameters
    ----------
    mean, sd : float
        Location and scale of the untruncated normal.
    lower, upper : float
        Bounds of the interval; ``-inf`` and ``inf`` are allowed.
    size : int
        Number of draws.
    seed : int
        Seed of the stream (64 bits).

    Returns
    -------
    values : ndarray of shape (size,)
        The draws, all inside ``[lower, upper]``.
    """
    cdef Rng r
    cdef Py_ssize_t i
    out = np.empty(size, dtype=np.float64)
    cdef double[::1] o = out
    rng_seed(&r, seed)
    with nogil:
        for i in range(size):
            o[i] = truncnorm_sample(&r, mean, sd, lower, upper)
    return out
