# The updates of an atomic domain (000_f0854fe1e49e50a3, section 1.3); see _cogaps_proposals.pyx.
from libc.stdint cimport int64_t

from ._utils._rng cimport Rng
from ._utils._atomic_domain cimport AtomicDomain
from ._cogaps_stats cimport Half, Proposal, KindCache

cdef void _half_init(Half* h, AtomicDomain* dom, double* M, Py_ssize_t n_rows,
                     Py_ssize_t n_cols, Py_ssize_t K, double alpha, double lam,
                     double max_mass) noexcept nogil
cdef int _choose_kind(const Half* h, Rng* master, int64_t n_low, int64_t n_high,
                      KindCache* cache) noexcept nogil
cdef void _fill(const Half* h, Rng* master, Proposal* p) noexcept nogil
cdef void _evaluate(const Half* h, Proposal* p, double tau) noexcept nogil
cdef void _decide_birth_death(const Half* h, Proposal* p, int64_t n) noexcept nogil
cdef void _apply_matrix(Half* h, const Proposal* p) noexcept nogil
cdef int _apply_domain(Half* h, const Proposal* p) noexcept nogil
cdef int64_t _sequential_half(Half* h, Rng* master, double tau) noexcept nogil
