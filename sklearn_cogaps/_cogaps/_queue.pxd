# The proposal queue of the asynchronous chain (Sherman, Gao & Fertig 2019, section 2); see
# _queue.pyx.
from libc.stdint cimport int64_t

from .._utils._rng cimport Rng
from ._stats cimport Half, Proposal

cdef enum:
    MAX_BATCH = 1024

cdef Py_ssize_t parallel_min_entries() noexcept nogil
cdef int64_t _queued_half(Half* h, Proposal* batch, Rng* master, double tau,
                          int n_threads) noexcept nogil
