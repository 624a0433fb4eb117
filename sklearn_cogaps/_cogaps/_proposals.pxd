# The updates of an atomic domain (Sherman, Gao & Fertig 2019, section 1.3 and the Gibbs steps of
# section 4); see _proposals.pyx. The functions every proposal runs are defined here,
# inline, so that the queue (_queue) and the sequential chain compile them into their
# own loops instead of calling across modules for each of the millions of proposals of a fit.
from libc.math cimport sqrt, log, log1p, exp, expm1, isfinite
from libc.stdint cimport uint64_t, int64_t

from .._utils._rng cimport Rng, rng_seed, rng_uniform, rng_below, rng_poisson
from .._utils._truncnorm cimport truncnorm_sample
from ._atomic_domain cimport (AtomicDomain, domain_insert, domain_erase, domain_move,
                                     domain_random_atom, domain_random_free_position)
from .._utils._status cimport FAIL_NO_MEMORY, FAIL_NOT_FINITE
from ._row_sums cimport cg_residual_update_f64, cg_residual_update_f32
from ._stats cimport (Half, Proposal, KindCache, KIND_CACHE_SLOTS, BIRTH, DEATH, MOVE,
                             EXCHANGE, REJECT, APPLY, KILL, _locate, _locate_atom, _element_stats,
                             _pair_stats)

cdef void _half_init(Half* h, AtomicDomain* dom, double* M, Py_ssize_t n_rows,
                     Py_ssize_t n_cols, Py_ssize_t K, double alpha, double lam,
                     double max_mass) noexcept nogil
cdef double _log_gauss_integral(double a, double b, double cap) noexcept nogil
cdef int64_t _sequential_half(Half* h, Rng* master, double tau) noexcept nogil


cdef inline int64_t _n_proposals(const Half* h, Rng* master) noexcept nogil:
    """The number of updates of a half-iteration: Poisson(max(n_atoms, 10)) (Algorithm 1
    takes Poisson(n_atoms); the floor of 10 is the C++ CoGAPS's), or Poisson(count_base)
    once that is set.

    Each update leaves the target invariant, but a number of updates that depends on the
    state at the start of the half-iteration makes the recorded states a state-dependent
    subsample of the update-by-update chain, whose law is not the target's. The reversible
    chain's sampling phase therefore fixes the count (``count_base``, set when sampling
    starts: _freeze_count) and is exact; CoGAPS's moves keep the C++ CoGAPS's rule."""
    cdef double n = <double>(h.count_base if h.count_base > 0 else h.dom.n_atoms)
    return rng_poisson(master, n if n > 10.0 else 10.0)


cdef inline void _freeze_count(Half* h) noexcept nogil:
    """Fix the reversible chain's number of updates per half-iteration at the present atom
    count (at least 10), for the rest of the chain (_n_proposals); no-op otherwise."""
    if h.reversible and h.count_base == 0:
        h.count_base = h.dom.n_atoms if h.dom.n_atoms > 10 else 10


cdef inline double _prior_mass(const Half* h, Rng* rng) noexcept nogil:
    """A mass from the exponential prior truncated at the Gibbs cap (flat likelihood)."""
    return -log1p(rng_uniform(rng) * expm1(-h.lam * h.cap)) / h.lam


cdef inline double _gibbs_mass(const Half* h, Rng* rng, double s, double smu,
                               double tau) noexcept nogil:
    """Mass from the conditional posterior of a new atom: exponential prior times the
    tempered Gaussian likelihood, TN((tau smu - lam) / (tau s), 1 / sqrt(tau s)) on
    [0, cap] (Sherman, Gao & Fertig 2019, section 4.2; see doc/cogaps.rst for the derivation)."""
    if not (s * tau > 0.0):
        return _prior_mass(h, rng)
    return truncnorm_sample(rng, (tau * smu - h.lam) / (tau * s), 1.0 / sqrt(tau * s),
                            0.0, h.cap)


cdef inline double death_probability(double n_atoms, double alpha, double n_bins,
                                     double length) noexcept nogil:
    """P(death | birth-or-death) with n atoms: n L / (n L + alpha n_bins (L - n))."""
    return n_atoms / (n_atoms + alpha * n_bins * (1.0 - n_atoms / length))


cdef inline double _birth_choice(const Half* h, double n) noexcept nogil:
    """P(the update is a birth) with n atoms, under the reversible moves."""
    if n < 1.0:
        return 1.0
    return 0.5 * (1.0 - death_probability(n, h.alpha, <double>h.dom.n_bins,
                                          <double>h.dom.length))


cdef inline double _death_choice(const Half* h, double n) noexcept nogil:
    """P(the update is a death) with n atoms, under the reversible moves."""
    if n < 1.0:
        return 0.0
    return 0.5 * death_probability(n, h.alpha, <double>h.dom.n_bins, <double>h.dom.length)


cdef inline double _log_birth_count(const Half* h, int64_t n) noexcept nogil:
    """The count's part of the log acceptance of a reversible birth from n atoms,
    log(alpha B q_d(n + 1) / (q_b(n) (n + 1))): the Poisson(alpha B) prior ratio of the
    count times the ratio of the probabilities of choosing the reverse death (kind, then
    one of n + 1 atoms) and the birth (kind, then one of the L - n free positions, which
    cancels the prior's 1 / (L - n)); see doc/testing.rst."""
    cdef double m = <double>n
    return (log(h.alpha * <double>h.dom.n_bins) + log(_death_choice(h, m + 1.0))
            - log(_birth_choice(h, m)) - log(m + 1.0))


cdef inline double _log_birth_evidence(const Half* h, double s, double smu,
                                       double tau) noexcept nogil:
    """log E_p[rho(x) 1{x <= cap}]: the mean, under the Exp(lam) prior of a new atom's
    mass, of its tempered likelihood ratio rho(x) = exp(tau (x smu - s x^2 / 2)), with the
    mass limited to the Gibbs cap. It is the normaliser of the Gibbs mass proposal, so the
    reversible birth's acceptance does not depend on the mass drawn (doc/testing.rst)."""
    return log(h.lam) + _log_gauss_integral(tau * s, tau * smu - h.lam, h.cap)


cdef inline void _empty_kind_cache(KindCache* cache) noexcept nogil:
    """Mark every slot of ``cache`` empty (at the start of a half-iteration)."""
    cdef Py_ssize_t slot
    for slot in range(KIND_CACHE_SLOTS):
        cache.count[slot] = -1


cdef inline double _cached_death_probability(const Half* h, KindCache* cache,
                                             int64_t n) noexcept nogil:
    """death_probability with n atoms, computed once per count while ``cache`` lives."""
    cdef Py_ssize_t slot = n & (KIND_CACHE_SLOTS - 1)
    if cache.count[slot] != n:
        cache.count[slot] = n
        cache.p_death[slot] = death_probability(<double>n, h.alpha, <double>h.dom.n_bins,
                                                <double>h.dom.length)
    return cache.p_death[slot]


cdef inline int _choose_kind(const Half* h, Rng* master, int64_t n_low, int64_t n_high,
                      KindCache* cache) noexcept nogil:
    """The update type (Algorithm 2) when the atom count lies in [n_low, n_high]; -1 when
    that range leaves the birth/death choice undecided (section 2.3). The death
    probability increases with the count, so comparing u with both ends decides it
    whenever possible. With fewer than 2 atoms the update is a birth (CoGAPS's rule); under
    the reversible moves only an empty domain forces a birth, so that the last atom can
    die and every count keeps its reverse move.

    ``cache`` keeps the death probabilities of the counts seen in this half-iteration
    (the caller empties it, ``_empty_kind_cache``, when the half-iteration starts)."""
    cdef double u
    cdef int64_t forced = 1 if h.reversible else 2
    if n_high < forced:
        return BIRTH
    if n_low < forced:
        return -1
    u = rng_uniform(master)
    if u < 0.5:
        u = rng_uniform(master)
        if u < _cached_death_probability(h, cache, n_low):
            return DEATH
        if u >= _cached_death_probability(h, cache, n_high):
            return BIRTH
        return -1
    if u < 0.75:
        return MOVE
    return EXCHANGE


cdef inline void _fill(const Half* h, Rng* master, Proposal* p) noexcept nogil:
    """Choose the atoms or positions an update of kind ``p.kind`` touches (section 1.3)."""
    cdef AtomicDomain* d = h.dom
    cdef int64_t left, right
    cdef uint64_t lo, hi
    p.atom1 = -1
    p.atom2 = -1
    p.last_in_bin = False
    if p.kind == BIRTH:
        p.pos = domain_random_free_position(d, master)
        _locate(h, p.pos, &p.r1, &p.q1)
        p.r2 = p.r1
        return
    p.atom1 = domain_random_atom(d, master)
    p.mass1 = d.mass[p.atom1]
    if p.kind == DEATH:
        _locate_atom(h, p.atom1, &p.r1, &p.q1)
        p.r2 = p.r1
    elif p.kind == MOVE:
        left = d.prev[p.atom1]
        right = d.next[p.atom1]
        lo = d.pos[left] + 1 if left >= 0 else 0
        hi = d.pos[right] - 1 if right >= 0 else d.length - 1
        p.pos = lo + rng_below(master, hi - lo + 1)
        _locate_atom(h, p.atom1, &p.r1, &p.q1)
        _locate(h, p.pos, &p.r2, &p.q2)
    else:
        p.atom2 = d.next[p.atom1] if d.next[p.atom1] >= 0 else d.first
        p.mass2 = d.mass[p.atom2]
        _locate_atom(h, p.atom1, &p.r1, &p.q1)
        _locate_atom(h, p.atom2, &p.r2, &p.q2)
    if h.reversible and p.kind != EXCHANGE:
        p.last_in_bin = _last_in_bin(d, p.atom1)


cdef inline void _evaluate(const Half* h, Proposal* p, double tau) noexcept nogil:
    """Decide a proposal from the current state and its own stream; change nothing. The
    stream is seeded here from ``p.seed``, the master's draw taken when the proposal was
    made: on the thread that evaluates it, off the serial path."""
    cdef double s, smu, x, x0, x1, x2, dl
    rng_seed(&p.rng, p.seed)
    p.outcome = REJECT
    p.dloglik = 0.0
    if p.kind == BIRTH:
        _element_stats(h, p.r1, p.q1, &s, &smu)
        x = _gibbs_mass(h, &p.rng, s, smu, tau)
        if h.reversible:
            # decided by _decide_birth_death once the count is known
            p.value = x
            p.dloglik = x * smu - 0.5 * s * x * x
            p.log_accept = _log_birth_evidence(h, s, smu, tau)
            p.log_u = log(rng_uniform(&p.rng))
            p.outcome = APPLY if x > 0.0 else REJECT
            return
        if x > 0.0:
            p.value = x
            p.dloglik = x * smu - 0.5 * s * x * x
            p.outcome = APPLY
    elif p.kind == DEATH and h.reversible:
        # the reverse of a birth: with the atom removed, accept with the inverse of that
        # birth's acceptance; a mass beyond the cap has no reverse birth and stays
        x0 = p.mass1
        _element_stats(h, p.r1, p.q1, &s, &smu)
        smu = smu + x0 * s
        if x0 > h.cap:
            return
        p.dloglik = -(x0 * smu - 0.5 * s * x0 * x0)
        p.log_accept = -_log_birth_evidence(h, s, smu, tau)
        p.log_u = log(rng_uniform(&p.rng))
        p.outcome = KILL
    elif p.kind == DEATH:
        # Remove the atom (mass x0), re-sample a mass x for it, and keep it with
        # probability min(1, exp(tau (x smu' - s x^2 / 2))), smu' with x0 removed
        # (Sherman, Gao & Fertig 2019, section 1.3.2 and 4.3).
        x0 = p.mass1
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
        x = p.mass1
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
        x1 = p.mass1
        x2 = p.mass2
        _pair_stats(h, p, &s, &smu)
        if s * tau > 0.0:
            x = truncnorm_sample(&p.rng, smu / s, 1.0 / sqrt(tau * s), -x1, x2)
        else:
            x = -x1 + (x1 + x2) * rng_uniform(&p.rng)
        p.value = x
        p.dloglik = x * smu - 0.5 * s * x * x
        p.outcome = APPLY


cdef inline void _decide_birth_death(const Half* h, Proposal* p, int64_t n) noexcept nogil:
    """Accept or reject an evaluated reversible birth or death, given the atom count ``n``
    just before it (the count's term of the acceptance; the rest is ``p.log_accept``).
    Nothing for other proposals or the default moves."""
    cdef double t
    if not h.reversible or p.outcome == REJECT or (p.kind != BIRTH and p.kind != DEATH):
        return
    if p.kind == BIRTH:
        t = p.log_accept + _log_birth_count(h, n)
    else:
        t = p.log_accept - _log_birth_count(h, n - 1)
    if t != t:
        # statistics that were not finite: _apply_domain reports it
        p.dloglik = t
        return
    if not (p.log_u < t):
        p.outcome = REJECT
        p.dloglik = 0.0


cdef inline double _exp_clipped(double v) noexcept nogil:
    if v >= 0.0:
        return 1.0
    if v < -700.0:
        return 0.0
    return exp(v)


cdef inline double _non_negative(double v) noexcept nogil:
    """max(v, 0), 0 for NaN, as fmax(v, 0.0) but without a call into libm."""
    return v if v > 0.0 else 0.0


cdef inline void _change_element(Half* h, Py_ssize_t r, Py_ssize_t q, double delta) noexcept nogil:
    """M[r, q] += delta, and the residual row follows: R[r, :] -= delta * O[:, q]."""
    cdef double* m = h.M + r * h.K + q
    cdef const double* o = h.Ot + q * h.n_cols
    cdef Py_ssize_t off = r * h.row_stride
    m[0] += delta
    if m[0] < 0.0:  # round-off after the last atom of a bin leaves
        m[0] = 0.0
    if h.sparse:
        return
    # formed in double, rounded once to the residual's storage type (_row_sums.h)
    if h.f32:
        cg_residual_update_f32(<float*>h.R + off, o, delta, h.n_cols)
    else:
        cg_residual_update_f64(<double*>h.R + off, o, delta, h.n_cols)


cdef inline bint _last_in_bin(const AtomicDomain* d, int64_t a) noexcept nogil:
    """Whether atom ``a`` is the only atom of its bin (neither neighbour shares it)."""
    cdef int64_t left = d.prev[a], right = d.next[a]
    cdef uint64_t b = d.pos[a] // d.bin_length
    return ((left < 0 or d.pos[left] // d.bin_length != b)
            and (right < 0 or d.pos[right] // d.bin_length != b))


cdef inline double _leaving(const Half* h, const Proposal* p) noexcept nogil:
    """The change of element (r1, q1) when atom1 leaves it: minus its mass, or, under the
    reversible moves, minus the element itself when atom1 is the last atom of its bin, so
    that an empty bin gives an element exactly 0 (the posterior's point mass at zero)
    rather than the round-off of the masses that came and went. The bin's atoms are those
    of the batch-start domain (``p.last_in_bin``); no other proposal of the batch touches
    this row."""
    if p.last_in_bin:
        return -h.M[p.r1 * h.K + p.q1]
    return -p.mass1


cdef inline void _apply_matrix(Half* h, const Proposal* p) noexcept nogil:
    """The matrix and residual part of a decided proposal: touches only its own rows, so
    the proposals of a batch apply it in parallel. Call before :func:`_apply_domain`."""
    if p.outcome == REJECT:
        return
    if p.kind == BIRTH:
        _change_element(h, p.r1, p.q1, p.value)
    elif p.kind == DEATH:
        _change_element(h, p.r1, p.q1,
                        _leaving(h, p) if p.outcome == KILL else p.value - p.mass1)
    elif p.kind == MOVE:
        if p.r1 != p.r2 or p.q1 != p.q2:
            _change_element(h, p.r1, p.q1, _leaving(h, p))
            _change_element(h, p.r2, p.q2, p.mass1)
    else:
        _change_element(h, p.r1, p.q1, p.value)
        _change_element(h, p.r2, p.q2, -p.value)


cdef inline int _apply_domain(Half* h, const Proposal* p) noexcept nogil:
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
        domain_move(d, p.atom1, p.pos)
    else:
        d.mass[p.atom1] = _non_negative(d.mass[p.atom1] + p.value)
        d.mass[p.atom2] = _non_negative(d.mass[p.atom2] - p.value)
    return 0
