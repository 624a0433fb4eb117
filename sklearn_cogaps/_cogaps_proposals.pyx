"""The four updates of an atomic domain and their evaluation (000_f0854fe1e49e50a3,
section 1.3 and the Gibbs steps of section 4): choosing an update, choosing the atoms it
touches, deciding it from the current state and the proposal's own stream, and applying it
to the matrix, the residual and the domain. ``_sequential_half`` is the plain chain
(Algorithm 1); the queued chain of section 2 is in ``_cogaps_queue``.
"""

from libc.math cimport sqrt, log1p, exp, expm1, fmax, isfinite
from libc.stdint cimport uint64_t, int64_t

from ._utils._rng cimport Rng, rng_spawn, rng_uniform, rng_below, rng_poisson
from ._utils._truncnorm cimport truncnorm_sample
from ._utils._atomic_domain cimport (AtomicDomain, domain_insert, domain_erase,
                                     domain_random_atom, domain_random_free_position)
from ._utils._status cimport FAIL_NO_MEMORY, FAIL_NOT_FINITE
from ._cogaps_stats cimport (Half, Proposal, BIRTH, DEATH, MOVE, EXCHANGE, REJECT, APPLY,
                             KILL, _locate, _element_stats,
                             _pair_stats)


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
    """The atomic-domain part of a decided proposal, in proposal order; FAIL_NO_MEMORY when
    memory runs out, FAIL_NOT_FINITE when the proposal's statistics were not finite (data or
    uncertainty too extreme for double precision), else 0."""
    cdef AtomicDomain* d = h.dom
    if p.outcome == REJECT:
        return 0
    if not isfinite(p.dloglik):
        return FAIL_NOT_FINITE
    h.loglik_change += p.dloglik
    if p.kind == BIRTH:
        if domain_insert(d, p.pos, p.value) < 0:
            return FAIL_NO_MEMORY
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

    Returns the number of proposals, or the (negative) failure of ``_apply_domain``.
    """
    cdef Proposal p
    cdef int status
    cdef int64_t t, n_prop = rng_poisson(master, fmax(<double>h.dom.n_atoms, 10.0))
    for t in range(n_prop):
        _propose(h, master, &p)
        _evaluate(h, &p, tau)
        _apply_matrix(h, &p)
        status = _apply_domain(h, &p)
        if status != 0:
            return status
    return n_prop
