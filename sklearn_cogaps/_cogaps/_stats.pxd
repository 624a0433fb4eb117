# The model's data structures and per-proposal statistics of the CoGAPS Gibbs sampler
# (Sherman, Gao & Fertig 2019, sections 1.1-1.2 and 3.1-3.2), shared by the proposals, the queue
# and the sampler. Everything here is inline: it is the inner loop of every proposal.
#
# Orientation: the data X is (n_samples, n_features) and X ~ N(W Ht^T, sigma^2), with W the
# patterns (CoGAPS's P) and Ht = H^T the amplitudes (CoGAPS's A). Each matrix has its own
# atomic domain. A half-iteration updates one matrix with the other one fixed; it sees the
# data through "rows": for W the rows of X, for Ht the rows of X^T. Everything a proposal on
# row r needs is in that row of the residual R = X - W Ht^T (in the matching orientation), of
# the precision 1 / sigma^2, and in the fixed matrix, stored transposed (K x n_cols) so that a
# pattern's column is contiguous. The residual and the precision are stored in double, or in
# float when the data come in float32 (half the bytes read per proposal); the statistics
# are formed in double either way (_row_sums.h).
#
# Notation (derivations in doc/cogaps.rst): for a change delta of element (r, q),
#     s  = sum_c O[c, q]^2 prec[r, c]             (Sherman, Gao & Fertig 2019, section 1.2.1, without the 1/2)
#     smu = sum_c O[c, q] R[r, c] prec[r, c]
#     log-likelihood change = delta * smu - s * delta^2 / 2.
# Both are multiplied by the annealing temperature during calibration (section 1.4).

from libc.math cimport fmax
from libc.stdint cimport uint64_t, int64_t, int32_t

from .._utils._rng cimport Rng
from ._atomic_domain cimport (
    AtomicDomain, ELEMENT_COLUMN_BITS, ELEMENT_COLUMN_MASK, domain_element,
)
from ._row_sums cimport cg_row_sums_f64, cg_row_sums_f32

cdef enum:
    BIRTH = 0
    DEATH = 1
    MOVE = 2
    EXCHANGE = 3

cdef enum:
    REJECT = 0
    APPLY = 1
    KILL = 2

# Failures of a half-iteration are returned instead of a count, as the shared failure
# codes of _utils/_status.pxd (FAIL_NO_MEMORY, FAIL_NOT_FINITE), and raised by the caller.


cdef struct Half:
    AtomicDomain* dom
    double* M            # n_rows x K, the matrix being updated
    const double* Ot     # K x n_cols, the fixed matrix transposed
    void* R              # n_rows x n_cols, residual in this orientation (double or float)
    const void* prec     # n_rows x n_cols, 1 / sigma^2, of the residual's type
    bint f32             # R and prec hold floats (else doubles)
    Py_ssize_t n_rows
    Py_ssize_t n_cols
    Py_ssize_t row_stride  # values between the starts of two rows of R and of prec
    Py_ssize_t K
    double alpha
    double lam           # rate of the exponential prior on an atom's mass
    double cap           # largest mass a Gibbs draw may give (max_gibbs_mass / lam)
    bint reversible      # reversible-jump birth/death (doc/testing.rst) instead of CoGAPS's
    # the count the proposals of a half-iteration follow instead of its atom count, once
    # set (0: the atom count); see _n_proposals
    int64_t count_base
    double loglik_change # untempered log-likelihood change of the applied proposals
    # sparse-data model (Sherman, Gao & Fertig 2019, section 3): no residual, no dense precision
    bint sparse
    const int64_t* indptr  # CSR of the data in this orientation (32-bit column indices)
    const int32_t* indices
    const double* x        # the stored values; their weights are computed on the fly
    double sigma0          # standard deviation of a zero, relative one of a non-zero
    bint poisson           # uncertainty max(sqrt(x), 1) instead (then sigma0 = 1)
    const double* O        # n_cols x K, the fixed matrix in its natural layout
    double* Z1             # K: sum_c O[c, k]^2 (lookup table, section 3.2)
    double* Z2             # K x K: O^T O
    double w0              # 1 / sigma0^2, the precision of every zero
    Py_ssize_t work        # rough cost of evaluating one proposal
    # proposal queue (Sherman, Gao & Fertig 2019, section 2): marks of rows and atoms used by the batch
    int64_t* row_mark
    int64_t* atom_mark
    int64_t atom_mark_size
    int64_t batch_id
    int64_t n_batches
    int64_t n_queued


cdef struct Proposal:
    int kind
    int64_t atom1
    int64_t atom2
    uint64_t pos         # birth position, or destination of a move
    Py_ssize_t r1
    Py_ssize_t q1
    Py_ssize_t r2
    Py_ssize_t q2
    uint64_t seed        # the master's draw its own stream is seeded from (_evaluate)
    Rng rng              # the proposal's own stream for its evaluation
    # what the evaluation needs of the batch-start domain, read when the proposal is made,
    # so that evaluating it never reads the domain (which the queue updates meanwhile):
    # the masses of atom1 and atom2, and whether atom1 is the last atom of its bin
    # (reversible moves only)
    double mass1
    double mass2
    bint last_in_bin
    int outcome
    double value         # birth/death: new mass; exchange: mass moved to atom1
    double dloglik       # untempered log-likelihood change if applied
    # reversible birth/death: accepted when log_u < log_accept + the count's term, decided
    # once the atom count before the proposal is known (_decide_birth_death)
    double log_accept
    double log_u
    # queued move or exchange: the stretch of the domain it depends on (_queue)
    uint64_t lo
    uint64_t hi
    bint wraps
    # 1 once evaluated and applied to the matrix (_queue, release store)
    int64_t evaluated


# slots of KindCache: a power of two, wider than the range an atom count spans in a
# half-iteration
cdef enum:
    KIND_CACHE_SLOTS = 256


cdef struct KindCache:
    # death probabilities by atom count (_choose_kind), count n in slot n % KIND_CACHE_SLOTS;
    # count[slot] = -1 when the slot is empty. Within a half-iteration the probability
    # depends on the count alone, and every batch moves the ends of its count range with
    # each birth and death it queues: computing each count's probability once saves two
    # divisions for most birth/death choices, with the same bits.
    int64_t count[KIND_CACHE_SLOTS]
    double p_death[KIND_CACHE_SLOTS]


cdef inline void _unpack(uint64_t e, Py_ssize_t* r, Py_ssize_t* q) noexcept nogil:
    """Row and column of an element packed by ``domain_element``."""
    r[0] = <Py_ssize_t>(e >> ELEMENT_COLUMN_BITS)
    q[0] = <Py_ssize_t>(e & ELEMENT_COLUMN_MASK)


cdef inline void _locate(const Half* h, uint64_t pos, Py_ssize_t* r, Py_ssize_t* q) noexcept nogil:
    """Row and column of the matrix element whose bin holds ``pos``."""
    _unpack(domain_element(h.dom, pos), r, q)


cdef inline void _locate_atom(const Half* h, int64_t atom, Py_ssize_t* r, Py_ssize_t* q) noexcept nogil:
    """:func:`_locate` of a live atom, from the element the domain keeps for it."""
    _unpack(h.dom.elem[atom], r, q)


cdef inline void _element_stats(const Half* h, Py_ssize_t r, Py_ssize_t q,
                                double* s, double* smu) noexcept nogil:
    """s and smu of element (r, q) (Sherman, Gao & Fertig 2019, section 1.2.1)."""
    if h.sparse:
        _sparse_stats(h, r, q, -1, s, smu)
        return
    _dense_sums(h, r, h.Ot + q * h.n_cols, NULL, s, smu)


cdef inline void _dense_sums(const Half* h, Py_ssize_t r, const double* o1, const double* o2,
                             double* s, double* smu) noexcept nogil:
    """s = sum_c d_c^2 prec[r, c] and smu = sum_c d_c prec[r, c] R[r, c] with d = o1 (- o2
    when given), for either storage type of R and prec.

    Vectorised in _row_sums.h: four partial sums in a fixed order (partial j takes the
    columns j mod 4), the same bits from the scalar, SSE2 and AVX kernels, so the result
    depends on the inputs only, never on the machine or the number of threads."""
    cdef Py_ssize_t off = r * h.row_stride
    if h.f32:
        cg_row_sums_f32(o1, o2, <const float*>h.R + off, <const float*>h.prec + off,
                        h.n_cols, s, smu)
    else:
        cg_row_sums_f64(o1, o2, <const double*>h.R + off, <const double*>h.prec + off,
                        h.n_cols, s, smu)


cdef inline void _same_row_stats(const Half* h, Py_ssize_t r, Py_ssize_t q_plus,
                                 Py_ssize_t q_minus, double* s, double* smu) noexcept nogil:
    """s and smu for +delta at (r, q_plus) with -delta at (r, q_minus) (1.2.2, r1 = r2)."""
    if h.sparse:
        _sparse_stats(h, r, q_plus, q_minus, s, smu)
        return
    _dense_sums(h, r, h.Ot + q_plus * h.n_cols, h.Ot + q_minus * h.n_cols, s, smu)


cdef inline void _sparse_stats(const Half* h, Py_ssize_t r, Py_ssize_t q_plus, Py_ssize_t q_minus,
                        double* s, double* smu) noexcept nogil:
    """s and smu of the direction +e_{q_plus} (- e_{q_minus} when q_minus >= 0) in row r,
    from the lookup tables and the stored entries of the row only (Sherman, Gao & Fertig 2019, section 3.1).

    With sigma = sigma0 on every zero, w = 1 / sigma^2 and d_c = O[c, q+] - O[c, q-]:
        s   = w0 sum_c d_c^2 + sum_{c stored} (w_c - w0) d_c^2
        smu = sum_c w_c d_c (x_c - ap_c)
            = -w0 sum_k M[r, k] (Z2[q+, k] - Z2[q-, k])
              + sum_{c stored} d_c (w_c x_c - (w_c - w0) ap_c),
    where ap_c = sum_k M[r, k] O[c, k] is computed on the fly (the product is never
    stored) and sum_c d_c^2 = Z1[q+] + Z1[q-] - 2 Z2[q+, q-].
    """
    cdef Py_ssize_t K = h.K, k, idx, c
    cdef const double* m = h.M + r * K
    cdef const double* o
    cdef double zz = h.Z1[q_plus], zm = 0.0, d, ap, acc_s, acc_m, wx, wd
    for k in range(K):
        zm += m[k] * h.Z2[q_plus * K + k]
    if q_minus >= 0:
        zz += h.Z1[q_minus] - 2.0 * h.Z2[q_plus * K + q_minus]
        for k in range(K):
            zm -= m[k] * h.Z2[q_minus * K + k]
    acc_s = h.w0 * zz
    acc_m = -h.w0 * zm
    for idx in range(h.indptr[r], h.indptr[r + 1]):
        c = h.indices[idx]
        o = h.O + c * K
        d = o[q_plus] - o[q_minus] if q_minus >= 0 else o[q_plus]
        ap = 0.0
        for k in range(K):
            ap += m[k] * o[k]
        _entry_weights(h.x[idx], h.sigma0, h.w0, h.poisson, &wx, &wd)
        acc_s += d * d * wd
        acc_m += d * (wx - wd * ap)
    s[0] = acc_s
    smu[0] = acc_m


cdef inline void _entry_weights(double x, double sigma0, double w0, bint poisson,
                                double* wx, double* wd) noexcept nogil:
    """The weights of a stored entry x of the sparse model: wx = x / sigma^2 and
    wd = 1 / sigma^2 - w0, with sigma = max(sigma0 x, sigma0) (the default uncertainty) or,
    for counts, sigma = max(sqrt(x), 1) (sigma0 = 1), and w0 = 1 / sigma0^2. Computed when
    needed rather than stored: two arrays of the size of the data in each orientation would
    be most of the model's memory."""
    cdef double w = _entry_precision(x, sigma0, poisson)
    wx[0] = w * x
    wd[0] = w - w0


cdef inline double _entry_precision(double x, double sigma0, bint poisson) noexcept nogil:
    """1 / sigma^2 of a stored entry x of the sparse model (see _entry_weights)."""
    cdef double sd
    if poisson:
        return 1.0 / fmax(x, 1.0)
    sd = fmax(sigma0 * x, sigma0)
    return 1.0 / (sd * sd)


cdef inline void _lookup_tables(Half* h) noexcept nogil:
    """Z1 = column sums of O^2 and Z2 = O^T O for the fixed matrix (section 3.2)."""
    cdef Py_ssize_t K = h.K, c, k, l
    cdef const double* o
    for k in range(K * K):
        h.Z2[k] = 0.0
    for c in range(h.n_cols):
        o = h.O + c * K
        for k in range(K):
            for l in range(k, K):
                h.Z2[k * K + l] += o[k] * o[l]
    for k in range(K):
        h.Z1[k] = h.Z2[k * K + k]
        for l in range(k + 1, K):
            h.Z2[l * K + k] = h.Z2[k * K + l]


cdef inline void _pair_stats(const Half* h, const Proposal* p, double* s, double* smu) noexcept nogil:
    """s and smu for +delta at (r1, q1) with -delta at (r2, q2) (1.2.2)."""
    cdef double s1, m1, s2, m2
    if p.r1 == p.r2:
        _same_row_stats(h, p.r1, p.q1, p.q2, s, smu)
        return
    _element_stats(h, p.r1, p.q1, &s1, &m1)
    _element_stats(h, p.r2, p.q2, &s2, &m2)
    s[0] = s1 + s2
    smu[0] = m1 - m2
