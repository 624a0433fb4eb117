"""The CoGAPS Gibbs sampler in the atomic domain (000_f0854fe1e49e50a3, section 1).

Orientation: the data X is (n_samples, n_features) and X ~ N(W Ht^T, sigma^2), with W the
patterns (CoGAPS's P) and Ht = H^T the amplitudes (CoGAPS's A). Each matrix has its own
atomic domain. A half-iteration updates one matrix with the other one fixed; it sees the
data through "rows": for W the rows of X, for Ht the rows of X^T. Everything a proposal on
row r needs is in that row of the residual R = X - W Ht^T (in the matching orientation), of
the precision 1 / sigma^2, and in the fixed matrix, stored transposed (K x n_cols) so that a
pattern's column is contiguous.

Notation (derivations in doc/cogaps.rst): for a change delta of element (r, q),
    s  = sum_c O[c, q]^2 prec[r, c]             (000_f0854..., 1.2.1, without the 1/2)
    smu = sum_c O[c, q] R[r, c] prec[r, c]
    log-likelihood change = delta * smu - s * delta^2 / 2.
Both are multiplied by the annealing temperature during calibration (section 1.4).
"""

import numpy as np

from cython.parallel cimport prange
from libc.math cimport sqrt, log, log1p, exp, expm1, fmax
from libc.stdint cimport uint64_t, int64_t
from libc.stdlib cimport malloc, free, calloc, realloc
from libc.string cimport memcpy

from ._utils._rng cimport (Rng, rng_seed, rng_spawn, rng_uniform, rng_below,
                           rng_poisson)
from ._utils._truncnorm cimport truncnorm_sample
from ._utils._atomic_domain cimport (AtomicDomain, domain_init, domain_free,
                                     domain_insert, domain_erase, domain_random_atom,
                                     domain_random_free_position)

cdef enum:
    BIRTH = 0
    DEATH = 1
    MOVE = 2
    EXCHANGE = 3

# Below this many entries a parallel transpose costs more than it saves (thread wake-up).
cdef enum:
    PARALLEL_MIN_ENTRIES = 262144

cdef enum:
    REJECT = 0
    APPLY = 1
    KILL = 2


cdef struct Half:
    AtomicDomain* dom
    double* M            # n_rows x K, the matrix being updated
    const double* Ot     # K x n_cols, the fixed matrix transposed
    double* R            # n_rows x n_cols, residual in this orientation
    const double* prec   # n_rows x n_cols, 1 / sigma^2
    Py_ssize_t n_rows
    Py_ssize_t n_cols
    Py_ssize_t K
    double alpha
    double lam           # rate of the exponential prior on an atom's mass
    double cap           # largest mass a Gibbs draw may give (max_gibbs_mass / lam)
    double loglik_change # untempered log-likelihood change of the applied proposals
    # sparse-data model (000_f0854..., section 3): no residual, no dense precision
    bint sparse
    const int64_t* indptr  # CSR of the data in this orientation
    const int64_t* indices
    const double* wx       # per stored entry: x / sigma^2
    const double* wd       # per stored entry: 1 / sigma^2 - 1 / sigma0^2
    const double* O        # n_cols x K, the fixed matrix in its natural layout
    double* Z1             # K: sum_c O[c, k]^2 (lookup table, section 3.2)
    double* Z2             # K x K: O^T O
    double w0              # 1 / sigma0^2, the precision of every zero
    Py_ssize_t work        # rough cost of evaluating one proposal
    # proposal queue (000_f0854..., section 2): marks of rows and atoms used by the batch
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
    Rng rng              # the proposal's own stream for its evaluation
    int outcome
    double value         # birth/death: new mass; exchange: mass moved to atom1
    double dloglik       # untempered log-likelihood change if applied


cdef inline void _locate(const Half* h, uint64_t pos, Py_ssize_t* r, Py_ssize_t* q) noexcept nogil:
    cdef uint64_t b = pos // h.dom.bin_length
    r[0] = <Py_ssize_t>(b // <uint64_t>h.K)
    q[0] = <Py_ssize_t>(b % <uint64_t>h.K)


cdef inline void _element_stats(const Half* h, Py_ssize_t r, Py_ssize_t q,
                                double* s, double* smu) noexcept nogil:
    """s and smu of element (r, q) (000_f0854..., 1.2.1)."""
    if h.sparse:
        _sparse_stats(h, r, q, -1, s, smu)
        return
    _weighted_sums(h.Ot + q * h.n_cols, NULL, h.R + r * h.n_cols, h.prec + r * h.n_cols,
                   h.n_cols, s, smu)


cdef inline void _weighted_sums(const double* o1, const double* o2, const double* res,
                                const double* w, Py_ssize_t n, double* s,
                                double* smu) noexcept nogil:
    """s = sum d^2 w and smu = sum d w res with d = o1 (- o2 when given).

    Four interleaved partial sums keep the floating-point units busy (the order of the
    additions is fixed, so the result does not depend on anything but the inputs)."""
    cdef double s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0
    cdef double m0 = 0.0, m1 = 0.0, m2 = 0.0, m3 = 0.0
    cdef double d0, d1, d2, d3
    cdef Py_ssize_t c = 0
    if o2 == NULL:
        while c + 4 <= n:
            d0 = o1[c] * w[c]
            d1 = o1[c + 1] * w[c + 1]
            d2 = o1[c + 2] * w[c + 2]
            d3 = o1[c + 3] * w[c + 3]
            s0 += d0 * o1[c]
            s1 += d1 * o1[c + 1]
            s2 += d2 * o1[c + 2]
            s3 += d3 * o1[c + 3]
            m0 += d0 * res[c]
            m1 += d1 * res[c + 1]
            m2 += d2 * res[c + 2]
            m3 += d3 * res[c + 3]
            c += 4
        while c < n:
            d0 = o1[c] * w[c]
            s0 += d0 * o1[c]
            m0 += d0 * res[c]
            c += 1
    else:
        while c + 4 <= n:
            d0 = o1[c] - o2[c]
            d1 = o1[c + 1] - o2[c + 1]
            d2 = o1[c + 2] - o2[c + 2]
            d3 = o1[c + 3] - o2[c + 3]
            s0 += d0 * d0 * w[c]
            s1 += d1 * d1 * w[c + 1]
            s2 += d2 * d2 * w[c + 2]
            s3 += d3 * d3 * w[c + 3]
            m0 += d0 * w[c] * res[c]
            m1 += d1 * w[c + 1] * res[c + 1]
            m2 += d2 * w[c + 2] * res[c + 2]
            m3 += d3 * w[c + 3] * res[c + 3]
            c += 4
        while c < n:
            d0 = o1[c] - o2[c]
            s0 += d0 * d0 * w[c]
            m0 += d0 * w[c] * res[c]
            c += 1
    s[0] = (s0 + s1) + (s2 + s3)
    smu[0] = (m0 + m1) + (m2 + m3)


cdef inline void _same_row_stats(const Half* h, Py_ssize_t r, Py_ssize_t q_plus,
                                 Py_ssize_t q_minus, double* s, double* smu) noexcept nogil:
    """s and smu for +delta at (r, q_plus) with -delta at (r, q_minus) (1.2.2, r1 = r2)."""
    if h.sparse:
        _sparse_stats(h, r, q_plus, q_minus, s, smu)
        return
    _weighted_sums(h.Ot + q_plus * h.n_cols, h.Ot + q_minus * h.n_cols, h.R + r * h.n_cols,
                   h.prec + r * h.n_cols, h.n_cols, s, smu)


cdef void _sparse_stats(const Half* h, Py_ssize_t r, Py_ssize_t q_plus, Py_ssize_t q_minus,
                        double* s, double* smu) noexcept nogil:
    """s and smu of the direction +e_{q_plus} (- e_{q_minus} when q_minus >= 0) in row r,
    from the lookup tables and the stored entries of the row only (000_f0854..., 3.1).

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
    cdef double zz = h.Z1[q_plus], zm = 0.0, d, ap, acc_s, acc_m
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
        acc_s += d * d * h.wd[idx]
        acc_m += d * (h.wx[idx] - h.wd[idx] * ap)
    s[0] = acc_s
    smu[0] = acc_m


cdef void _lookup_tables(Half* h) noexcept nogil:
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


cdef inline double _prior_mass(const Half* h, Rng* rng) noexcept nogil:
    """A mass from the exponential prior truncated at the Gibbs cap (flat likelihood)."""
    return -log1p(rng_uniform(rng) * expm1(-h.lam * h.cap)) / h.lam


cdef inline double _gibbs_mass(const Half* h, Rng* rng, double s, double smu,
                               double tau) noexcept nogil:
    """Mass from the conditional posterior of a new atom: exponential prior times the
    tempered Gaussian likelihood, TN((tau smu - lam) / (tau s), 1 / sqrt(tau s)) on
    [0, cap] (000_f0854..., 4.2; see doc/cogaps.rst for the derivation)."""
    if not (s * tau > 0.0):
        return _prior_mass(h, rng)
    return truncnorm_sample(rng, (tau * smu - h.lam) / (tau * s), 1.0 / sqrt(tau * s),
                            0.0, h.cap)


cdef inline double death_probability(double n_atoms, double alpha, double n_bins,
                                     double length) noexcept nogil:
    """P(death | birth-or-death) with n atoms: n L / (n L + alpha n_bins (L - n))."""
    return n_atoms / (n_atoms + alpha * n_bins * (1.0 - n_atoms / length))


cdef int _choose_kind(const Half* h, Rng* master, int64_t n_low, int64_t n_high) noexcept nogil:
    """The update type (Algorithm 2) when the atom count lies in [n_low, n_high]; -1 when
    that range leaves the birth/death choice undecided (section 2.3). The death
    probability increases with the count, so comparing u with both ends decides it
    whenever possible. With fewer than 2 atoms the update is a birth."""
    cdef AtomicDomain* d = h.dom
    cdef double u
    if n_high < 2:
        return BIRTH
    if n_low < 2:
        return -1
    u = rng_uniform(master)
    if u < 0.5:
        u = rng_uniform(master)
        if u < death_probability(<double>n_low, h.alpha, <double>d.n_bins, <double>d.length):
            return DEATH
        if u >= death_probability(<double>n_high, h.alpha, <double>d.n_bins, <double>d.length):
            return BIRTH
        return -1
    if u < 0.75:
        return MOVE
    return EXCHANGE


cdef void _fill(const Half* h, Rng* master, Proposal* p) noexcept nogil:
    """Choose the atoms or positions an update of kind ``p.kind`` touches (section 1.3)."""
    cdef AtomicDomain* d = h.dom
    cdef int64_t left, right
    cdef uint64_t lo, hi
    p.atom1 = -1
    p.atom2 = -1
    if p.kind == BIRTH:
        p.pos = domain_random_free_position(d, master)
        _locate(h, p.pos, &p.r1, &p.q1)
        p.r2 = p.r1
    elif p.kind == DEATH:
        p.atom1 = domain_random_atom(d, master)
        _locate(h, d.pos[p.atom1], &p.r1, &p.q1)
        p.r2 = p.r1
    elif p.kind == MOVE:
        p.atom1 = domain_random_atom(d, master)
        left = d.prev[p.atom1]
        right = d.next[p.atom1]
        lo = d.pos[left] + 1 if left >= 0 else 0
        hi = d.pos[right] - 1 if right >= 0 else d.length - 1
        p.pos = lo + rng_below(master, hi - lo + 1)
        _locate(h, d.pos[p.atom1], &p.r1, &p.q1)
        _locate(h, p.pos, &p.r2, &p.q2)
    else:
        p.atom1 = domain_random_atom(d, master)
        p.atom2 = d.next[p.atom1] if d.next[p.atom1] >= 0 else d.first
        _locate(h, d.pos[p.atom1], &p.r1, &p.q1)
        _locate(h, d.pos[p.atom2], &p.r2, &p.q2)


cdef void _propose(Half* h, Rng* master, Proposal* p) noexcept nogil:
    """A proposal of the sequential chain, with its own stream for the evaluation."""
    p.kind = _choose_kind(h, master, h.dom.n_atoms, h.dom.n_atoms)
    _fill(h, master, p)
    rng_spawn(master, &p.rng)


cdef void _evaluate(const Half* h, Proposal* p, double tau) noexcept nogil:
    """Decide a proposal from the current state and its own stream; change nothing."""
    cdef double s, smu, x, x0, x1, x2, dl
    p.outcome = REJECT
    p.dloglik = 0.0
    if p.kind == BIRTH:
        _element_stats(h, p.r1, p.q1, &s, &smu)
        x = _gibbs_mass(h, &p.rng, s, smu, tau)
        if x > 0.0:
            p.value = x
            p.dloglik = x * smu - 0.5 * s * x * x
            p.outcome = APPLY
    elif p.kind == DEATH:
        # Remove the atom (mass x0), re-sample a mass x for it, and keep it with
        # probability min(1, exp(tau (x smu' - s x^2 / 2))), smu' with x0 removed
        # (000_f0854..., 1.3.2 and 4.3).
        x0 = h.dom.mass[p.atom1]
        _element_stats(h, p.r1, p.q1, &s, &smu)
        smu = smu + x0 * s
        x = _gibbs_mass(h, &p.rng, s, smu, tau)
        dl = x * smu - 0.5 * s * x * x
        if x > 0.0 and rng_uniform(&p.rng) < _exp_clipped(tau * dl):
            p.value = x
            p.outcome = APPLY
            # relative to the current state: change x - x0
            p.dloglik = dl - (x0 * smu - 0.5 * s * x0 * x0)
        else:
            p.outcome = KILL
            p.dloglik = -(x0 * smu - 0.5 * s * x0 * x0)
    elif p.kind == MOVE:
        if p.r1 == p.r2 and p.q1 == p.q2:
            p.outcome = APPLY
            return
        # moving mass x from (r1, q1) to (r2, q2): +x at 2, -x at 1 (1.3.3)
        x = h.dom.mass[p.atom1]
        _pair_stats(h, p, &s, &smu)
        smu = -smu  # +x at (r2, q2) and -x at (r1, q1)
        dl = x * smu - 0.5 * s * x * x
        if rng_uniform(&p.rng) < _exp_clipped(tau * dl):
            p.outcome = APPLY
            p.dloglik = dl
    else:
        if p.r1 == p.r2 and p.q1 == p.q2:
            return
        # exchange: +delta at atom1, -delta at atom2, delta in [-x1, x2] (1.3.4); the
        # exponential prior of the two masses is constant because their sum is.
        x1 = h.dom.mass[p.atom1]
        x2 = h.dom.mass[p.atom2]
        _pair_stats(h, p, &s, &smu)
        if s * tau > 0.0:
            x = truncnorm_sample(&p.rng, smu / s, 1.0 / sqrt(tau * s), -x1, x2)
        else:
            x = -x1 + (x1 + x2) * rng_uniform(&p.rng)
        p.value = x
        p.dloglik = x * smu - 0.5 * s * x * x
        p.outcome = APPLY


cdef inline double _exp_clipped(double v) noexcept nogil:
    if v >= 0.0:
        return 1.0
    if v < -700.0:
        return 0.0
    return exp(v)


cdef inline void _change_element(Half* h, Py_ssize_t r, Py_ssize_t q, double delta) noexcept nogil:
    """M[r, q] += delta, and the residual row follows: R[r, :] -= delta * O[:, q]."""
    cdef double* m = h.M + r * h.K + q
    cdef const double* o = h.Ot + q * h.n_cols
    cdef double* res = h.R + r * h.n_cols
    cdef Py_ssize_t c
    m[0] += delta
    if m[0] < 0.0:  # round-off after the last atom of a bin leaves
        m[0] = 0.0
    if h.sparse:
        return
    for c in range(h.n_cols):
        res[c] -= delta * o[c]


cdef void _apply_matrix(Half* h, const Proposal* p) noexcept nogil:
    """The matrix and residual part of a decided proposal: touches only its own rows, so
    the proposals of a batch apply it in parallel. Call before :func:`_apply_domain`."""
    cdef double x0
    if p.outcome == REJECT:
        return
    if p.kind == BIRTH:
        _change_element(h, p.r1, p.q1, p.value)
    elif p.kind == DEATH:
        x0 = h.dom.mass[p.atom1]
        _change_element(h, p.r1, p.q1, -x0 if p.outcome == KILL else p.value - x0)
    elif p.kind == MOVE:
        if p.r1 != p.r2 or p.q1 != p.q2:
            x0 = h.dom.mass[p.atom1]
            _change_element(h, p.r1, p.q1, -x0)
            _change_element(h, p.r2, p.q2, x0)
    else:
        _change_element(h, p.r1, p.q1, p.value)
        _change_element(h, p.r2, p.q2, -p.value)


cdef int _apply_domain(Half* h, const Proposal* p) noexcept nogil:
    """The atomic-domain part of a decided proposal, in proposal order; -1 only when
    memory runs out."""
    cdef AtomicDomain* d = h.dom
    if p.outcome == REJECT:
        return 0
    h.loglik_change += p.dloglik
    if p.kind == BIRTH:
        if domain_insert(d, p.pos, p.value) < 0:
            return -1
    elif p.kind == DEATH:
        if p.outcome == KILL:
            domain_erase(d, p.atom1)
        else:
            d.mass[p.atom1] = p.value
    elif p.kind == MOVE:
        d.pos[p.atom1] = p.pos
    else:
        d.mass[p.atom1] = fmax(d.mass[p.atom1] + p.value, 0.0)
        d.mass[p.atom2] = fmax(d.mass[p.atom2] - p.value, 0.0)
    return 0


cdef int64_t _sequential_half(Half* h, Rng* master, double tau) noexcept nogil:
    """Poisson(max(n_atoms, 10)) updates of one matrix, one after the other (Algorithm 1).

    Returns the number of proposals, or -1 when memory ran out.
    """
    cdef Proposal p
    cdef int64_t t, n_prop = rng_poisson(master, fmax(<double>h.dom.n_atoms, 10.0))
    for t in range(n_prop):
        _propose(h, master, &p)
        _evaluate(h, &p, tau)
        _apply_matrix(h, &p)
        if _apply_domain(h, &p) != 0:
            return -1
    return n_prop


# ---------------------------------------------------------------------------------------
# The asynchronous chain (000_f0854..., section 2): proposals are drawn one after the other
# from the state at the start of a batch and queued while they are independent of every
# queued proposal; the batch is then evaluated in parallel (each proposal with its own
# stream, touching only its own rows) and its atomic-domain changes applied in order.
# Batch formation is sequential and every evaluation is a function of the batch-start
# state and the proposal's own stream, so the chain is the same for any thread count.

cdef enum:
    MAX_BATCH = 1024
    # Below this much work (proposals x row length) a batch is evaluated on one thread:
    # waking the team would cost more than it saves.
    PARALLEL_MIN_WORK = 16384


cdef inline bint _between(uint64_t lo, uint64_t hi, bint wraps, uint64_t pos) noexcept nogil:
    """Whether ``pos`` lies strictly inside the open interval (lo, hi) of the domain, which
    wraps around the end when ``wraps``."""
    if wraps:
        return pos > lo or pos < hi
    return lo < pos < hi


cdef void _interval(const Half* h, const Proposal* p, uint64_t* lo, uint64_t* hi,
                    bint* wraps) noexcept nogil:
    """The stretch of the domain whose atoms a move or an exchange depends on: between the
    moved atom's neighbours, or between the two exchanged atoms."""
    cdef AtomicDomain* d = h.dom
    cdef int64_t left, right
    wraps[0] = False
    if p.kind == MOVE:
        left = d.prev[p.atom1]
        right = d.next[p.atom1]
        lo[0] = d.pos[left] if left >= 0 else 0
        hi[0] = d.pos[right] if right >= 0 else d.length
    else:
        lo[0] = d.pos[p.atom1]
        hi[0] = d.pos[p.atom2]
        wraps[0] = hi[0] <= lo[0]


cdef bint _conflicts(const Half* h, const Proposal* p, const Proposal* batch,
                     Py_ssize_t nb) noexcept nogil:
    """Whether proposal ``p`` depends on a queued one (section 2.1 and 2.2)."""
    cdef AtomicDomain* d = h.dom
    cdef int64_t stamp = h.batch_id
    cdef uint64_t lo, hi
    cdef bint wraps
    cdef Py_ssize_t b
    # the same row of the matrix being updated
    if h.row_mark[p.r1] == stamp or h.row_mark[p.r2] == stamp:
        return True
    # an atom taking part in a queued proposal
    if p.atom1 >= 0 and h.atom_mark[p.atom1] == stamp:
        return True
    if p.atom2 >= 0 and h.atom_mark[p.atom2] == stamp:
        return True
    if p.kind == MOVE:
        if d.prev[p.atom1] >= 0 and h.atom_mark[d.prev[p.atom1]] == stamp:
            return True
        if d.next[p.atom1] >= 0 and h.atom_mark[d.next[p.atom1]] == stamp:
            return True
    if p.kind == BIRTH:
        # a birth inside the stretch a queued move or exchange depends on
        for b in range(nb):
            if batch[b].kind == MOVE or batch[b].kind == EXCHANGE:
                _interval(h, &batch[b], &lo, &hi, &wraps)
                if _between(lo, hi, wraps, p.pos):
                    return True
            elif batch[b].kind == BIRTH and batch[b].pos == p.pos:
                return True
    elif p.kind == MOVE or p.kind == EXCHANGE:
        _interval(h, p, &lo, &hi, &wraps)
        for b in range(nb):
            if batch[b].kind == BIRTH and _between(lo, hi, wraps, batch[b].pos):
                return True
    return False


cdef void _mark(Half* h, const Proposal* p) noexcept nogil:
    cdef AtomicDomain* d = h.dom
    cdef int64_t stamp = h.batch_id
    h.row_mark[p.r1] = stamp
    h.row_mark[p.r2] = stamp
    if p.atom1 >= 0:
        h.atom_mark[p.atom1] = stamp
    if p.atom2 >= 0:
        h.atom_mark[p.atom2] = stamp
    if p.kind == MOVE:
        if d.prev[p.atom1] >= 0:
            h.atom_mark[d.prev[p.atom1]] = stamp
        if d.next[p.atom1] >= 0:
            h.atom_mark[d.next[p.atom1]] = stamp


cdef Py_ssize_t _fill_batch(Half* h, Rng* master, Proposal* batch,
                            Py_ssize_t max_size) noexcept nogil:
    """Queue proposals until the first conflict or ``max_size``; returns the batch size
    (>= 1: the first proposal of a batch cannot conflict).

    The proposal that conflicts is not thrown away: the master generator is put back to
    where it was before that proposal, so the next batch makes it again, with the same
    random numbers, from the updated state. Discarding it instead would bias the chain:
    an undecided birth/death draw u lies between the death probabilities of the two ends
    of the count range, and re-using it against the exact count gives death with exactly
    the sequential probability, while a fresh draw would favour births; likewise atoms of
    rows already in the batch would be chosen less often than the others."""
    cdef Py_ssize_t nb = 0
    cdef int64_t n = h.dom.n_atoms, births = 0, deaths = 0
    cdef int kind
    cdef Proposal* p
    cdef Rng before
    h.batch_id += 1
    while nb < max_size:
        p = &batch[nb]
        before = master[0]
        # after the queue, the count lies in [n - deaths, n + births] (section 2.3)
        kind = _choose_kind(h, master, n - deaths, n + births)
        if kind < 0:
            master[0] = before
            break
        p.kind = kind
        _fill(h, master, p)
        if _conflicts(h, p, batch, nb):
            master[0] = before
            break
        _mark(h, p)
        rng_spawn(master, &p.rng)
        if kind == BIRTH:
            births += 1
        elif kind == DEATH:
            deaths += 1
        nb += 1
    return nb


cdef int64_t _queued_half(Half* h, Proposal* batch, Rng* master, double tau,
                          int n_threads) noexcept nogil:
    """Poisson(max(n_atoms, 10)) updates of one matrix through the proposal queue.

    Returns the number of updates, or -1 when memory ran out.
    """
    cdef int64_t done = 0, n_prop = rng_poisson(master, fmax(<double>h.dom.n_atoms, 10.0))
    cdef Py_ssize_t nb, b
    cdef int threads
    while done < n_prop:
        if _ensure_atom_marks(h) != 0:
            return -1
        nb = _fill_batch(h, master, batch, min(<int64_t>MAX_BATCH, n_prop - done))
        threads = n_threads if nb * h.work >= PARALLEL_MIN_WORK else 1
        if threads > 1:
            for b in prange(nb, schedule='static', num_threads=threads):
                _evaluate(h, &batch[b], tau)
                _apply_matrix(h, &batch[b])
        else:
            for b in range(nb):
                _evaluate(h, &batch[b], tau)
                _apply_matrix(h, &batch[b])
        for b in range(nb):
            if _apply_domain(h, &batch[b]) != 0:
                return -1
        done += nb
        h.n_batches += 1
        h.n_queued += nb
    return n_prop


cdef int _ensure_atom_marks(Half* h) noexcept nogil:
    """Room in ``atom_mark`` for every atom id the domain has handed out."""
    cdef int64_t size = h.dom.capacity, i
    cdef int64_t* grown
    if h.atom_mark_size >= size:
        return 0
    grown = <int64_t*>realloc(h.atom_mark, size * sizeof(int64_t))
    if grown == NULL:
        return -1
    for i in range(h.atom_mark_size, size):
        grown[i] = 0
    h.atom_mark = grown
    h.atom_mark_size = size
    return 0


# ---------------------------------------------------------------------------------------
# Dense helpers, parallel over rows (each output element is written by one thread, in a
# fixed order, so results do not depend on the number of threads).

cdef void _transpose(const double* src, Py_ssize_t n, Py_ssize_t m, double* dst,
                     int n_threads) noexcept nogil:
    """dst (m x n) = src (n x m)^T, by 32 x 32 tiles."""
    cdef Py_ssize_t ib, jb, i, j, i_end, j_end, n_blocks = (n + 31) // 32
    for ib in prange(n_blocks, schedule='static', num_threads=n_threads):
        i_end = min(ib * 32 + 32, n)
        jb = 0
        while jb < m:
            j_end = min(jb + 32, m)
            for i in range(ib * 32, i_end):
                for j in range(jb, j_end):
                    dst[j * n + i] = src[i * m + j]
            jb = jb + 32


def residual(const double[:, ::1] X, const double[:, ::1] W, const double[:, ::1] Ht,
             int n_threads=1):
    """R = X - W Ht^T, computed row by row (deterministic for any thread count).

    Parameters
    ----------
    X : ndarray of shape (n_samples, n_features)
    W : ndarray of shape (n_samples, n_components)
    Ht : ndarray of shape (n_features, n_components)
    n_threads : int, default=1

    Returns
    -------
    R : ndarray of shape (n_samples, n_features)
    """
    cdef Py_ssize_t n = X.shape[0], m = X.shape[1], K = W.shape[1], i, j, k
    cdef double acc
    out = np.empty((n, m), dtype=np.float64)
    cdef double[:, ::1] R = out
    with nogil:
        for i in prange(n, schedule='static', num_threads=n_threads):
            for j in range(m):
                acc = X[i, j]
                for k in range(K):
                    acc = acc - W[i, k] * Ht[j, k]
                R[i, j] = acc
    return out


def fit_chi_square(const double[:, ::1] X, const double[:, ::1] prec,
                   const double[:, ::1] W, const double[:, ::1] Ht, int n_threads=1):
    """Chi-square of W Ht^T against X, row by row, without storing the product.

    Parameters
    ----------
    X : ndarray of shape (n_samples, n_features)
    prec : ndarray of shape (n_samples, n_features)
        Precisions, 1 / sigma**2.
    W : ndarray of shape (n_samples, n_components)
    Ht : ndarray of shape (n_features, n_components)
    n_threads : int, default=1

    Returns
    -------
    chisq : float
    """
    cdef Py_ssize_t n = X.shape[0], m = X.shape[1], K = W.shape[1], i, j, k
    cdef double acc, r
    partial = np.zeros(n, dtype=np.float64)
    cdef double[::1] part = partial
    with nogil:
        for i in prange(n, schedule='static', num_threads=n_threads):
            acc = 0.0
            for j in range(m):
                r = X[i, j]
                for k in range(K):
                    r = r - W[i, k] * Ht[j, k]
                acc = acc + r * r * prec[i, j]
            part[i] = acc
    cdef double total = 0.0
    for i in range(n):
        total += part[i]
    return total


def chi_square(const double[:, ::1] R, const double[:, ::1] prec, int n_threads=1):
    """Sum of R**2 * prec, with per-row partial sums added in row order.

    Parameters
    ----------
    R : ndarray of shape (n, m)
        Residuals.
    prec : ndarray of shape (n, m)
        Precisions, 1 / sigma**2.
    n_threads : int, default=1

    Returns
    -------
    chisq : float
    """
    cdef Py_ssize_t n = R.shape[0], m = R.shape[1], i, j
    partial = np.zeros(n, dtype=np.float64)
    cdef double[::1] part = partial
    cdef double acc
    with nogil:
        for i in prange(n, schedule='static', num_threads=n_threads):
            acc = 0.0
            for j in range(m):
                acc = acc + R[i, j] * R[i, j] * prec[i, j]
            part[i] = acc
    cdef double total = 0.0
    for i in range(n):
        total += part[i]
    return total


# ---------------------------------------------------------------------------------------
# The sampler of a fit.

cdef void _half_init(Half* h, AtomicDomain* dom, double* M, Py_ssize_t n_rows,
                     Py_ssize_t n_cols, Py_ssize_t K, double alpha, double lam,
                     double max_mass) noexcept nogil:
    """A dense half-iteration over ``M`` (n_rows x K) with no data bound yet and an empty
    proposal queue (``row_mark`` unallocated: the sequential chain needs none)."""
    h.dom = dom
    h.M = M
    h.n_rows = n_rows
    h.n_cols = n_cols
    h.K = K
    h.alpha = alpha
    h.lam = lam
    h.cap = max_mass / lam
    h.loglik_change = 0.0
    h.sparse = False
    h.Ot = NULL
    h.R = NULL
    h.prec = NULL
    h.O = NULL
    h.row_mark = NULL
    h.atom_mark = NULL
    h.atom_mark_size = 0
    h.batch_id = 0
    h.n_batches = 0
    h.n_queued = 0
    h.work = n_cols


cdef class GibbsSampler:
    """State of one CoGAPS chain: both atomic domains, both matrices, the residual in both
    orientations and the master generator.

    Parameters
    ----------
    R : ndarray of shape (n_samples, n_features)
        The residual X - W Ht^T of the starting matrices (X itself for a fresh chain).
    prec : ndarray of shape (n_samples, n_features)
        Precisions 1 / uncertainty**2.
    W : ndarray of shape (n_samples, n_components)
        Starting patterns (zeros for a fresh chain; the sum of the atoms otherwise).
    Ht : ndarray of shape (n_features, n_components)
        Starting amplitudes.
    alpha_w, alpha_h : float
        Sparsity of each matrix.
    lam_w, lam_h : float
        Rates of the exponential mass priors.
    max_mass_w, max_mass_h : float
        Gibbs mass caps, in units of 1 / lam.
    seed : int
        Seed of the master generator (ignored when ``state`` is given).
    state : dict or None
        Atoms and generator state from :meth:`get_state`, to continue a chain.
    fixed : {None, "W", "H"}, default=None
        The matrix held fixed at its starting value (CoGAPS's ``whichMatrixFixed``): its
        half-iterations are skipped, its domain stays empty, and neither matrix is
        rescaled when samples are accumulated.
    """
    cdef AtomicDomain dom_w
    cdef AtomicDomain dom_h
    cdef Half half_w
    cdef Half half_h
    cdef Rng rng
    cdef Proposal* batch
    cdef object W_arr, Ht_arr, R_arr, Rt_arr, prec_arr, prect_arr, Wt_arr, Htt_arr
    cdef object sparse_rows, sparse_cols, tables
    cdef readonly bint is_sparse
    cdef readonly bint fixed_w, fixed_h
    cdef double sigma0
    cdef object sum_w, sq_w, sum_h, sq_h
    cdef public Py_ssize_t n_accumulated
    cdef Py_ssize_t n, m, K
    cdef double lam_w, lam_h

    def __cinit__(self):
        domain_init(&self.dom_w, 1, 16)
        domain_init(&self.dom_h, 1, 16)
        self.half_w.row_mark = NULL
        self.half_w.atom_mark = NULL
        self.half_h.row_mark = NULL
        self.half_h.atom_mark = NULL
        self.batch = <Proposal*>malloc(MAX_BATCH * sizeof(Proposal))
        if self.batch == NULL:
            raise MemoryError("could not allocate the proposal queue")

    def __dealloc__(self):
        domain_free(&self.dom_w)
        domain_free(&self.dom_h)
        free(self.half_w.row_mark)
        free(self.half_w.atom_mark)
        free(self.half_h.row_mark)
        free(self.half_h.atom_mark)
        free(self.batch)

    def __init__(self, R, prec, W, Ht, double alpha_w, double alpha_h, double lam_w,
                 double lam_h, double max_mass_w, double max_mass_h, uint64_t seed=0,
                 state=None, sparse_data=None, fixed=None):
        if fixed not in (None, "W", "H"):
            raise ValueError(f"fixed must be None, 'W' or 'H'; got {fixed!r}.")
        self.fixed_w = fixed == "W"
        self.fixed_h = fixed == "H"
        self.n, self.K = W.shape
        self.m = Ht.shape[0]
        self.is_sparse = sparse_data is not None
        self.W_arr = np.array(W, dtype=np.float64, order="C")
        self.Ht_arr = np.array(Ht, dtype=np.float64, order="C")
        self.lam_w = lam_w
        self.lam_h = lam_h
        self.reset_accumulators()
        domain_free(&self.dom_w)
        domain_free(&self.dom_h)
        if (domain_init(&self.dom_w, <uint64_t>(self.n * self.K), 1024) != 0
                or domain_init(&self.dom_h, <uint64_t>(self.m * self.K), 1024) != 0):
            raise MemoryError("could not allocate the atomic domains")
        if self.is_sparse:
            rows, cols, self.sigma0 = sparse_data
            self.sparse_rows = _sparse_orientation(rows, self.sigma0)
            self.sparse_cols = _sparse_orientation(cols, self.sigma0)
            self.tables = [np.zeros(self.K), np.zeros((self.K, self.K)),
                           np.zeros(self.K), np.zeros((self.K, self.K))]
            self._bind(&self.half_w, &self.dom_w, self.W_arr, self.m, alpha_w, lam_w, max_mass_w)
            self._bind(&self.half_h, &self.dom_h, self.Ht_arr, self.n, alpha_h, lam_h, max_mass_h)
            self._bind_sparse(&self.half_w, self.sparse_rows, self.Ht_arr, self.tables[0],
                              self.tables[1])
            self._bind_sparse(&self.half_h, self.sparse_cols, self.W_arr, self.tables[2],
                              self.tables[3])
        else:
            self.R_arr = np.array(R, dtype=np.float64, order="C")
            self.Rt_arr = np.empty((self.m, self.n), dtype=np.float64)
            self.prec_arr = np.ascontiguousarray(prec, dtype=np.float64)
            self.prect_arr = np.ascontiguousarray(self.prec_arr.T)
            self.Wt_arr = np.empty((self.K, self.n), dtype=np.float64)
            self.Htt_arr = np.empty((self.K, self.m), dtype=np.float64)
            self._bind(&self.half_w, &self.dom_w, self.W_arr, self.m, alpha_w, lam_w, max_mass_w)
            self._bind(&self.half_h, &self.dom_h, self.Ht_arr, self.n, alpha_h, lam_h, max_mass_h)
            self._bind_dense(&self.half_w, self.Htt_arr, self.R_arr, self.prec_arr)
            self._bind_dense(&self.half_h, self.Wt_arr, self.Rt_arr, self.prect_arr)
            # a fixed matrix never changes: its transpose is made once, and the residual
            # stays in the orientation of the free matrix
            if self.fixed_h:
                self.Htt_arr[...] = self.Ht_arr.T
            elif self.fixed_w:
                self.Wt_arr[...] = self.W_arr.T
                self.Rt_arr[...] = self.R_arr.T
        if state is None:
            rng_seed(&self.rng, seed)
        else:
            self._restore(state)

    cdef void _bind(self, Half* h, AtomicDomain* dom, M, Py_ssize_t n_cols, double alpha,
                    double lam, double max_mass) except *:
        cdef double[:, ::1] m_v = M
        free(h.row_mark)
        _half_init(h, dom, &m_v[0, 0], m_v.shape[0], n_cols, m_v.shape[1], alpha, lam, max_mass)
        h.row_mark = <int64_t*>calloc(h.n_rows, sizeof(int64_t))
        if h.row_mark == NULL:
            raise MemoryError("could not allocate the proposal queue")

    cdef void _bind_dense(self, Half* h, Ot, R, prec) except *:
        cdef double[:, ::1] o_v = Ot
        cdef double[:, ::1] r_v = R
        cdef double[:, ::1] p_v = prec
        h.Ot = &o_v[0, 0]
        h.R = &r_v[0, 0]
        h.prec = &p_v[0, 0]

    cdef void _bind_sparse(self, Half* h, data, O, Z1, Z2) except *:
        cdef const int64_t[::1] indptr = data[0]
        cdef const int64_t[::1] indices = data[1]
        cdef const double[::1] wx = data[2]
        cdef const double[::1] wd = data[3]
        cdef double[:, ::1] o_v = O
        cdef double[::1] z1 = Z1
        cdef double[:, ::1] z2 = Z2
        h.sparse = True
        h.indptr = &indptr[0]
        h.indices = &indices[0] if indices.shape[0] else NULL
        h.wx = &wx[0] if wx.shape[0] else NULL
        h.wd = &wd[0] if wd.shape[0] else NULL
        h.O = &o_v[0, 0]
        h.Z1 = &z1[0]
        h.Z2 = &z2[0, 0]
        h.w0 = 1.0 / (self.sigma0 * self.sigma0)
        # cost of one proposal: the stored entries of a row, K operations each
        h.work = h.K * (indices.shape[0] // max(h.n_rows, 1) + h.K)

    def iterate(self, double tau, int n_threads=1):
        """One iteration: updates of the amplitudes Ht, then of the patterns W.

        Parameters
        ----------
        tau : float
            Annealing temperature in (0, 1].
        n_threads : int, default=1
            Threads for the dense transposes.

        Returns
        -------
        n_proposals_h, n_proposals_w : int
            Number of updates made on each matrix.
        loglik_change : float
            Untempered change of the Gaussian log-likelihood over the iteration.
        """
        cdef int64_t nh = 0, nw = 0
        self.half_h.loglik_change = 0.0
        self.half_w.loglik_change = 0.0
        if self.is_sparse:
            with nogil:
                if not self.fixed_h:
                    _lookup_tables(&self.half_h)
                    nh = _queued_half(&self.half_h, self.batch, &self.rng, tau, n_threads)
                if nh >= 0 and not self.fixed_w:
                    _lookup_tables(&self.half_w)
                    nw = _queued_half(&self.half_w, self.batch, &self.rng, tau, n_threads)
        else:
            nh, nw = self._dense_iteration(tau, n_threads)
        if nh < 0 or nw < 0:
            raise MemoryError("the atomic domain could not grow")
        return nh, nw, self.half_h.loglik_change + self.half_w.loglik_change

    cdef tuple _dense_iteration(self, double tau, int n_threads):
        cdef int64_t nh = 0, nw = 0
        cdef double[:, ::1] R = self.R_arr
        cdef double[:, ::1] Rt = self.Rt_arr
        cdef double[:, ::1] W = self.W_arr
        cdef double[:, ::1] Ht = self.Ht_arr
        cdef double[:, ::1] Wt = self.Wt_arr
        cdef double[:, ::1] Htt = self.Htt_arr
        cdef int transpose_threads = n_threads if self.n * self.m >= PARALLEL_MIN_ENTRIES else 1
        if self.fixed_h:
            with nogil:
                nw = _queued_half(&self.half_w, self.batch, &self.rng, tau, n_threads)
            return nh, nw
        if self.fixed_w:
            with nogil:
                nh = _queued_half(&self.half_h, self.batch, &self.rng, tau, n_threads)
            return nh, nw
        with nogil:
            _transpose(&R[0, 0], self.n, self.m, &Rt[0, 0], transpose_threads)
            _transpose(&W[0, 0], self.n, self.K, &Wt[0, 0], 1)
            nh = _queued_half(&self.half_h, self.batch, &self.rng, tau, n_threads)
            if nh >= 0:
                _transpose(&Rt[0, 0], self.m, self.n, &R[0, 0], transpose_threads)
                _transpose(&Ht[0, 0], self.m, self.K, &Htt[0, 0], 1)
                nw = _queued_half(&self.half_w, self.batch, &self.rng, tau, n_threads)
        return nh, nw

    def chi_square(self, int n_threads=1):
        """Chi-square of the chain's current state.

        Parameters
        ----------
        n_threads : int, default=1

        Returns
        -------
        chisq : float
        """
        if self.is_sparse:
            return sparse_chi_square(self.sparse_rows, self.W_arr, self.Ht_arr, self.sigma0,
                                     n_threads)
        if self.fixed_w:
            # the residual lives in the amplitudes' orientation
            return chi_square(self.Rt_arr, self.prect_arr, n_threads)
        return chi_square(self.R_arr, self.prec_arr, n_threads)

    def reset_accumulators(self):
        """Forget the accumulated posterior sums."""
        self.sum_w = np.zeros((self.n, self.K))
        self.sq_w = np.zeros((self.n, self.K))
        self.sum_h = np.zeros((self.m, self.K))
        self.sq_h = np.zeros((self.m, self.K))
        self.n_accumulated = 0

    def accumulate(self):
        """Add the current sample to the posterior sums, each pattern (column of W)
        scaled to maximum 1 and the amplitudes scaled by the same factor, as CoGAPS does.

        With a fixed matrix nothing is rescaled: the fixed matrix keeps its values and the
        free one is accumulated as sampled (as in :func:`sample_fixed_rows`)."""
        cdef double[:, ::1] W = self.W_arr
        cdef double[:, ::1] Ht = self.Ht_arr
        cdef double[:, ::1] sw = self.sum_w
        cdef double[:, ::1] qw = self.sq_w
        cdef double[:, ::1] sh = self.sum_h
        cdef double[:, ::1] qh = self.sq_h
        cdef Py_ssize_t i, j, k
        cdef double scale, v
        cdef bint rescale = not (self.fixed_w or self.fixed_h)
        with nogil:
            for k in range(self.K):
                scale = 0.0
                if rescale:
                    for i in range(self.n):
                        if W[i, k] > scale:
                            scale = W[i, k]
                if scale <= 0.0:
                    scale = 1.0
                for i in range(self.n):
                    v = W[i, k] / scale
                    sw[i, k] += v
                    qw[i, k] += v * v
                for j in range(self.m):
                    v = Ht[j, k] * scale
                    sh[j, k] += v
                    qh[j, k] += v * v
        self.n_accumulated += 1

    def posterior(self):
        """Posterior means and standard deviations of W and Ht from the accumulated sums.

        Returns
        -------
        W_mean, W_std, Ht_mean, Ht_std : ndarrays
        """
        n = max(self.n_accumulated, 1)
        w_mean = self.sum_w / n
        h_mean = self.sum_h / n
        w_std = np.sqrt(np.maximum(self.sq_w / n - w_mean**2, 0.0))
        h_std = np.sqrt(np.maximum(self.sq_h / n - h_mean**2, 0.0))
        return w_mean, w_std, h_mean, h_std

    @property
    def W(self):
        """Current patterns (a copy)."""
        return self.W_arr.copy()

    @property
    def Ht(self):
        """Current amplitudes (a copy)."""
        return self.Ht_arr.copy()


    @property
    def queue_statistics(self):
        """Batches and queued proposals so far, for the amplitudes and the patterns:
        ``((n_batches_h, n_proposals_h), (n_batches_w, n_proposals_w))``."""
        return ((self.half_h.n_batches, self.half_h.n_queued),
                (self.half_w.n_batches, self.half_w.n_queued))

    @property
    def n_atoms(self):
        """Number of atoms in the domains of W and of Ht."""
        return self.dom_w.n_atoms, self.dom_h.n_atoms

    def get_state(self):
        """Everything needed to continue the chain, as numpy arrays.

        Atoms are listed in the order of the domain's unsorted array, which the uniform
        choice of an atom indexes, so a restored chain makes the same choices.
        """
        return {
            "sparse": bool(self.is_sparse),
            "fixed": "W" if self.fixed_w else ("H" if self.fixed_h else None),
            "rng": self._rng_state(),
            "W": self.W_arr.copy(),
            "Ht": self.Ht_arr.copy(),
            "atoms_w": _domain_atoms(&self.dom_w),
            "atoms_h": _domain_atoms(&self.dom_h),
            "sums": (self.sum_w.copy(), self.sq_w.copy(), self.sum_h.copy(),
                     self.sq_h.copy(), self.n_accumulated),
        }

    cdef object _rng_state(self):
        return np.array([self.rng.s0, self.rng.s1, self.rng.s2, self.rng.s3], dtype=np.uint64)

    cdef void _restore(self, state) except *:
        rng = np.asarray(state["rng"], dtype=np.uint64)
        self.rng.s0 = rng[0]
        self.rng.s1 = rng[1]
        self.rng.s2 = rng[2]
        self.rng.s3 = rng[3]
        _domain_load(&self.dom_w, state["atoms_w"][0], state["atoms_w"][1])
        _domain_load(&self.dom_h, state["atoms_h"][0], state["atoms_h"][1])
        sw, qw, sh, qh, n_acc = state["sums"]
        self.sum_w[...] = sw
        self.sq_w[...] = qw
        self.sum_h[...] = sh
        self.sq_h[...] = qh
        self.n_accumulated = n_acc


def _sparse_orientation(csr, double sigma0):
    """Arrays of the sparse model for one orientation of the data (a CSR matrix): row
    pointers, column indices, and per stored entry x / sigma^2 and 1 / sigma^2 - 1 / sigma0^2
    with sigma = max(sigma0 x, sigma0), the default uncertainty."""
    x = np.asarray(csr.data, dtype=np.float64)
    sd = np.maximum(sigma0 * x, sigma0)
    w = 1.0 / (sd * sd)
    return (np.asarray(csr.indptr, dtype=np.int64), np.asarray(csr.indices, dtype=np.int64),
            w * x, w - 1.0 / (sigma0 * sigma0))


def sparse_chi_square(data, const double[:, ::1] W, const double[:, ::1] Ht, double sigma0,
                      int n_threads=1):
    """Chi-square of W Ht^T against sparse data under the sparse model (section 3).

    sum_ij w_ij (x_ij - ap_ij)^2 = w0 sum_i W_i^T (Ht^T Ht) W_i
    + sum_{stored ij} [w_ij (x_ij - ap_ij)^2 - w0 ap_ij^2].

    Parameters
    ----------
    data : tuple
        The row orientation from ``_sparse_orientation``.
    W : ndarray of shape (n_samples, n_components)
    Ht : ndarray of shape (n_features, n_components)
    sigma0 : float
    n_threads : int, default=1

    Returns
    -------
    chisq : float
    """
    cdef const int64_t[::1] indptr = data[0]
    cdef const int64_t[::1] indices = data[1]
    cdef const double[::1] wx = data[2]
    cdef const double[::1] wd = data[3]
    cdef Py_ssize_t n = W.shape[0], K = W.shape[1], i, k, l, idx, j
    cdef double w0 = 1.0 / (sigma0 * sigma0), acc, ap, w, x, quad
    Z2_arr = np.asarray(Ht).T @ np.asarray(Ht)
    cdef const double[:, ::1] Z2 = np.ascontiguousarray(Z2_arr)
    partial = np.zeros(n, dtype=np.float64)
    cdef double[::1] part = partial
    with nogil:
        for i in prange(n, schedule='static', num_threads=n_threads):
            quad = 0.0
            for k in range(K):
                for l in range(K):
                    quad = quad + W[i, k] * Z2[k, l] * W[i, l]
            acc = w0 * quad
            for idx in range(indptr[i], indptr[i + 1]):
                j = indices[idx]
                ap = 0.0
                for k in range(K):
                    ap = ap + W[i, k] * Ht[j, k]
                w = wd[idx] + w0
                x = wx[idx] / w
                acc = acc + w * (x - ap) * (x - ap) - w0 * ap * ap
            part[i] = acc
    cdef double total = 0.0
    for i in range(n):
        total += part[i]
    return total


cdef object _domain_atoms(AtomicDomain* d):
    pos = np.empty(d.n_atoms, dtype=np.uint64)
    mass = np.empty(d.n_atoms, dtype=np.float64)
    cdef uint64_t[::1] p = pos
    cdef double[::1] m = mass
    cdef int64_t i
    for i in range(d.n_atoms):
        p[i] = d.pos[d.order[i]]
        m[i] = d.mass[d.order[i]]
    return pos, mass


cdef void _domain_load(AtomicDomain* d, positions, masses) except *:
    cdef const uint64_t[::1] p = np.ascontiguousarray(positions, dtype=np.uint64)
    cdef const double[::1] m = np.ascontiguousarray(masses, dtype=np.float64)
    cdef int64_t i
    for i in range(p.shape[0]):
        if domain_insert(d, p[i], m[i]) < 0:
            raise MemoryError("could not rebuild the atomic domain")


# ---------------------------------------------------------------------------------------
# Fixed-matrix mode: the amplitudes are fixed and each row of new data gets its own chain
# for its patterns (CoGAPS's fixed-matrix mode). Rows are independent, so they run in
# parallel; each row's generator is seeded from random_state and the row's own content.

def sample_fixed_rows(const double[:, ::1] X, const double[:, ::1] prec,
                      const double[:, ::1] Ht, double alpha, double lam, double max_mass,
                      Py_ssize_t n_iter, const uint64_t[::1] seeds, int n_threads=1):
    """Sample the patterns of each row of X with the amplitudes Ht held fixed.

    Parameters
    ----------
    X : ndarray of shape (n_rows, n_features)
    prec : ndarray of shape (n_rows, n_features)
        Precisions 1 / uncertainty**2.
    Ht : ndarray of shape (n_features, n_components)
        The fixed amplitudes.
    alpha, lam, max_mass : float
        Sparsity, prior rate and Gibbs mass cap of the patterns.
    n_iter : int
        Iterations of each phase (calibration, then sampling).
    seeds : ndarray of uint64, shape (n_rows,)
        One seed per row.
    n_threads : int, default=1

    Returns
    -------
    W_mean, W_std : ndarrays of shape (n_rows, n_components)
        Posterior mean and standard deviation of each row's patterns.
    """
    cdef Py_ssize_t n = X.shape[0], m = X.shape[1], K = Ht.shape[1], i
    Htt_arr = np.ascontiguousarray(np.asarray(Ht).T)
    cdef const double[:, ::1] Htt = Htt_arr
    mean_arr = np.zeros((n, K))
    std_arr = np.zeros((n, K))
    cdef double[:, ::1] mean = mean_arr
    cdef double[:, ::1] std = std_arr
    cdef int failed = 0
    with nogil:
        for i in prange(n, schedule='dynamic', num_threads=n_threads):
            if _sample_one_row(&X[i, 0], &prec[i, 0], &Htt[0, 0], m, K, alpha, lam,
                               max_mass, n_iter, seeds[i], &mean[i, 0], &std[i, 0]) != 0:
                failed = 1
    if failed:
        raise MemoryError("could not allocate a row's atomic domain")
    return mean_arr, std_arr


cdef int _sample_one_row(const double* x, const double* prec, const double* Htt,
                         Py_ssize_t m, Py_ssize_t K, double alpha, double lam,
                         double max_mass, Py_ssize_t n_iter, uint64_t seed,
                         double* mean, double* std) noexcept nogil:
    cdef AtomicDomain dom
    cdef Half h
    cdef Rng rng
    cdef Py_ssize_t it, k
    cdef int status = 0
    cdef double tau
    cdef double* row = <double*>malloc(m * sizeof(double))
    cdef double* w = <double*>calloc(K, sizeof(double))
    cdef double* sq = <double*>calloc(K, sizeof(double))
    if row == NULL or w == NULL or sq == NULL or domain_init(&dom, <uint64_t>K, 64) != 0:
        free(row); free(w); free(sq)
        return -1
    memcpy(row, x, m * sizeof(double))
    _half_init(&h, &dom, w, 1, m, K, alpha, lam, max_mass)
    h.Ot = Htt
    h.R = row
    h.prec = prec
    rng_seed(&rng, seed)
    for k in range(K):
        mean[k] = 0.0
    for it in range(2 * n_iter):
        tau = 1.0 if it >= n_iter else fmin1(2.0 * (it + 1) / n_iter)
        if _sequential_half(&h, &rng, tau) < 0:
            status = -1
            break
        if it >= n_iter:
            for k in range(K):
                mean[k] += w[k]
                sq[k] += w[k] * w[k]
    for k in range(K):
        mean[k] /= n_iter
        std[k] = sqrt(fmax(sq[k] / n_iter - mean[k] * mean[k], 0.0))
    domain_free(&dom)
    free(row); free(w); free(sq)
    return status


cdef inline double fmin1(double v) noexcept nogil:
    return v if v < 1.0 else 1.0
