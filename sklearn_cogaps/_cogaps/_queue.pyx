"""The asynchronous chain (Sherman, Gao & Fertig 2019, section 2): proposals are drawn one after
the other from the state at the start of a batch and queued while they are independent of
every queued proposal; the other threads evaluate each queued proposal while the batch is
still being formed (each proposal with its own stream, touching only its own rows), and its
atomic-domain changes are applied in order. Batch formation is sequential and every
evaluation is a function of the batch-start state and the proposal's own stream, so the
chain is the same for any thread count.
"""

from cython.parallel cimport prange, parallel, threadid
from libc.stdint cimport uint64_t, int64_t
from libc.stdlib cimport realloc
from libc.string cimport memset

import numpy as np

from .._utils._rng cimport Rng, rng_next, rng_seed
from ._atomic_domain cimport AtomicDomain, DomainForTests
from .._utils._status cimport FAIL_NO_MEMORY
from ._stats cimport Half, Proposal, KindCache, BIRTH, DEATH, MOVE, EXCHANGE, REJECT, KILL
from ._proposals cimport (_n_proposals, _choose_kind, _empty_kind_cache, _fill, _evaluate,
                                 _decide_birth_death, _apply_matrix, _apply_domain)

cdef extern from *:
    """
    /* Publication of a batch's proposals, from the thread that forms them to the threads
       that evaluate them while the rest of the batch is being formed (_formed_while_evaluated):
       a release store of the number of proposals formed, acquire loads of it, a counter
       that deals the proposals out. Without the GNU atomics (CG_HAVE_ATOMICS 0) the queue
       forms each batch before evaluating it, and these are never called. */
    #include <stdint.h>
    #if defined(__GNUC__) || defined(__clang__)
    #define CG_HAVE_ATOMICS 1
    static inline void cg_store_release(int64_t* p, int64_t v)
    { __atomic_store_n(p, v, __ATOMIC_RELEASE); }
    static inline int64_t cg_load_acquire(const int64_t* p)
    { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }
    static inline int64_t cg_fetch_add(int64_t* p, int64_t v)
    { return __atomic_fetch_add(p, v, __ATOMIC_RELAXED); }
    /* Take the counter's value and add 1 if it is below `limit`; -1 otherwise. */
    static inline int64_t cg_take_below(int64_t* p, int64_t limit)
    {
        int64_t t = __atomic_load_n(p, __ATOMIC_RELAXED);
        while (t < limit) {
            if (__atomic_compare_exchange_n(p, &t, t + 1, 1, __ATOMIC_RELAXED,
                                            __ATOMIC_RELAXED))
                return t;
        }
        return -1;
    }
    /* A short wait spins (64 pauses, a microsecond or two); a longer one gives the core
       away at every turn, so that a thread waiting for another that the system has
       descheduled (more threads than cores) does not hold on to the core that thread
       needs (measured in doc/cogaps_scale.rst). */
    #if defined(__x86_64__) || defined(__i386__)
    #define cg_cpu_relax() __builtin_ia32_pause()
    #else
    #define cg_cpu_relax() ((void)0)
    #endif
    #if defined(__unix__) || defined(__APPLE__)
    #include <sched.h>
    #define cg_give_way() sched_yield()
    #else
    #define cg_give_way() ((void)0)
    #endif
    static inline void cg_spin_pause(int64_t* spins)
    {
        if (++*spins < 64)
            cg_cpu_relax();
        else
            cg_give_way();
    }
    #else
    #define CG_HAVE_ATOMICS 0
    static inline void cg_store_release(int64_t* p, int64_t v) { *p = v; }
    static inline int64_t cg_load_acquire(const int64_t* p) { return *p; }
    static inline int64_t cg_fetch_add(int64_t* p, int64_t v)
    { int64_t old = *p; *p += v; return old; }
    static inline int64_t cg_take_below(int64_t* p, int64_t limit)
    { return *p < limit ? (*p)++ : -1; }
    static inline void cg_spin_pause(int64_t* spins) { (void)spins; }
    #endif
    """
    enum: CG_HAVE_ATOMICS
    void cg_store_release(int64_t* p, int64_t v) noexcept nogil
    int64_t cg_load_acquire(const int64_t* p) noexcept nogil
    int64_t cg_fetch_add(int64_t* p, int64_t v) noexcept nogil
    int64_t cg_take_below(int64_t* p, int64_t limit) noexcept nogil
    void cg_spin_pause(int64_t* spins) noexcept nogil


cdef struct Publication:
    # the proposals of a half-iteration, numbered across its batches; each counter on its
    # own cache line: the forming thread writes `formed` while the others take proposals
    # from `taken`
    int64_t formed       # proposals formed so far (release store)
    char _pad1[56]
    int64_t taken        # proposals handed out for evaluation (fetch-add)
    char _pad2[56]
    int64_t first        # number of the current batch's first proposal
    int64_t finished     # 1 once the half-iteration is over: no proposal will follow
    char _pad3[48]
    int status           # the first failure of the forming thread, else 0


# Work thresholds of the parallel paths, settable for tests (_set_parallel_thresholds_for_tests):
# below PARALLEL_MIN_WORK (proposals x cost of one) a batch is evaluated on one thread, and
# below PARALLEL_MIN_ENTRIES a dense transpose runs on one thread; waking the team would
# cost more than it saves.
cdef Py_ssize_t PARALLEL_MIN_WORK = 16384
cdef Py_ssize_t PARALLEL_MIN_ENTRIES = 262144


cdef Py_ssize_t parallel_min_entries() noexcept nogil:
    return PARALLEL_MIN_ENTRIES


def _set_parallel_thresholds_for_tests(min_work=None, min_entries=None):
    """Set the work above which batches and transposes run in parallel.

    For tests: 0 sends every batch and every transpose to the parallel path, so that small
    problems exercise it. The chain does not depend on the thresholds.

    Parameters
    ----------
    min_work : int or None, default=None
        Smallest batch work (proposals times the cost of one) evaluated in parallel; None
        leaves it unchanged.
    min_entries : int or None, default=None
        Smallest residual (entries) transposed in parallel; None leaves it unchanged.

    Returns
    -------
    previous : tuple of int
        The values before the call, ``(min_work, min_entries)``, to restore them.
    """
    global PARALLEL_MIN_WORK, PARALLEL_MIN_ENTRIES
    previous = (PARALLEL_MIN_WORK, PARALLEL_MIN_ENTRIES)
    for name, value in (("min_work", min_work), ("min_entries", min_entries)):
        if value is not None and (int(value) != value or value < 0):
            raise ValueError(f"{name} must be a non-negative integer; got {value!r}.")
    if min_work is not None:
        PARALLEL_MIN_WORK = min_work
    if min_entries is not None:
        PARALLEL_MIN_ENTRIES = min_entries
    return previous


cdef inline bint _between(uint64_t lo, uint64_t hi, bint wraps, uint64_t pos) noexcept nogil:
    """Whether ``pos`` lies strictly inside the open interval (lo, hi) of the domain, which
    wraps around the end when ``wraps``."""
    if wraps:
        return pos > lo or pos < hi
    return lo < pos < hi


cdef inline void _interval(const Half* h, Proposal* p) noexcept nogil:
    """The stretch of the domain whose atoms a move or an exchange depends on, stored in
    ``p.lo``, ``p.hi`` and ``p.wraps``: between the moved atom's neighbours, or between the
    two exchanged atoms."""
    cdef AtomicDomain* d = h.dom
    cdef int64_t left, right
    p.wraps = False
    if p.kind == MOVE:
        left = d.prev[p.atom1]
        right = d.next[p.atom1]
        p.lo = d.pos[left] if left >= 0 else 0
        p.hi = d.pos[right] if right >= 0 else d.length
    else:
        p.lo = d.pos[p.atom1]
        p.hi = d.pos[p.atom2]
        p.wraps = p.hi <= p.lo


cdef struct Queued:
    # what later proposals of the batch are checked against, in compact arrays (a scan
    # over them reads a few cache lines where one over the proposals would read them all):
    # the positions of the queued births and the stretches of the queued moves and
    # exchanges
    Py_ssize_t n_births
    uint64_t birth_pos[MAX_BATCH]
    Py_ssize_t n_spans
    uint64_t span_lo[MAX_BATCH]
    uint64_t span_hi[MAX_BATCH]
    bint span_wraps[MAX_BATCH]


cdef bint _conflicts(const Half* h, Proposal* p, const Queued* queued) noexcept nogil:
    """Whether proposal ``p`` depends on a queued one (section 2.1 and 2.2). The stretch of
    a move or an exchange is stored in ``p`` on the way, for the births that follow it in
    the batch."""
    cdef AtomicDomain* d = h.dom
    cdef int64_t stamp = h.batch_id
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
        # a birth inside the stretch a queued move or exchange depends on, or on a queued
        # birth's position
        for b in range(queued.n_spans):
            if _between(queued.span_lo[b], queued.span_hi[b], queued.span_wraps[b], p.pos):
                return True
        for b in range(queued.n_births):
            if queued.birth_pos[b] == p.pos:
                return True
    elif p.kind == MOVE or p.kind == EXCHANGE:
        _interval(h, p)
        for b in range(queued.n_births):
            if _between(p.lo, p.hi, p.wraps, queued.birth_pos[b]):
                return True
    return False


cdef void _queue(Queued* queued, const Proposal* p) noexcept nogil:
    """Record a queued proposal for the checks of the later ones."""
    if p.kind == BIRTH:
        queued.birth_pos[queued.n_births] = p.pos
        queued.n_births += 1
    elif p.kind == MOVE or p.kind == EXCHANGE:
        queued.span_lo[queued.n_spans] = p.lo
        queued.span_hi[queued.n_spans] = p.hi
        queued.span_wraps[queued.n_spans] = p.wraps
        queued.n_spans += 1


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


cdef Py_ssize_t _fill_batch(Half* h, Rng* master, Proposal* batch, Queued* queued,
                            Py_ssize_t max_size, KindCache* cache,
                            Publication* pub) noexcept nogil:
    """Queue proposals until the first conflict or ``max_size``; returns the batch size
    (>= 1: the first proposal of a batch cannot conflict). With ``pub``, every proposal is
    published as soon as it is complete.

    The proposal that conflicts is not thrown away: the master generator is put back to
    where it was before that proposal, so the next batch makes it again, with the same
    random numbers, from the updated state. Discarding it instead would bias the chain:
    an undecided birth/death draw u lies between the death probabilities of the two ends
    of the count range, and re-using it against the exact count gives death with exactly
    the sequential probability, while a fresh draw would favour births; likewise atoms of
    rows already in the batch would be chosen less often than the others. That last holds
    only while the batch leaves the atom count as it was: after a birth or a death the same
    number picks its atom among another count, in effect a fresh choice, so under the
    default moves (which queue a death, move or exchange after a birth or a death) the
    atoms of the batch's rows are chosen slightly less often than in the sequential chain
    (a difference below 0.4% in the atom counts and means of the chains measured, within
    their errors).

    Under the reversible moves, a death, move or exchange is not queued after a birth or a
    death: it chooses its atom uniformly among the atoms of the batch's start, while one
    after the other it would choose among the atoms of its own turn (a newborn included, a
    killed atom excluded), and the reversible acceptance counts on that choice. A birth's
    free position needs no such rule: one that lands on a queued birth's position conflicts
    and is drawn again from the updated state with the same numbers, which continues the
    rejection loop of the free-position draw."""
    cdef Py_ssize_t nb = 0
    cdef int64_t n = h.dom.n_atoms, deaths = 0
    cdef int kind
    cdef Proposal* p
    cdef Rng before
    queued.n_births = 0
    queued.n_spans = 0
    h.batch_id += 1
    while nb < max_size:
        p = &batch[nb]
        before = master[0]
        # after the queue, the count lies in [n - deaths, n + queued births] (section 2.3)
        kind = _choose_kind(h, master, n - deaths, n + queued.n_births, cache)
        if kind < 0:
            master[0] = before
            break
        p.kind = kind
        _fill(h, master, p)
        if _conflicts(h, p, queued) or (h.reversible and kind != BIRTH
                                        and queued.n_births + deaths > 0):
            master[0] = before
            break
        _mark(h, p)
        _queue(queued, p)
        p.seed = rng_next(master)
        if kind == DEATH:
            deaths += 1
        nb += 1
        if pub != NULL:
            p.evaluated = 0
            cg_store_release(&pub.formed, pub.first + nb)
    return nb


cdef inline void _evaluate_taken(Half* h, Proposal* batch, Publication* pub, int64_t number,
                                 double tau) noexcept nogil:
    """Evaluate proposal ``number`` of the half-iteration (published) and apply it to the
    matrix, then flag it. It belongs to the batch being formed or applied, since the
    forming thread starts the next batch only once every proposal of this one is flagged;
    so ``pub.first``, written before the batch's first proposal was published, is its
    batch's first number."""
    cdef Proposal* p = &batch[number - pub.first]
    _evaluate(h, p, tau)
    _apply_matrix(h, p)
    cg_store_release(&p.evaluated, 1)


cdef void _evaluate_stream(Half* h, Proposal* batch, Publication* pub,
                           double tau) noexcept nogil:
    """On the threads that do not form: take the half-iteration's proposals one at a time,
    wait until each is published, evaluate it; return once the half-iteration is over."""
    cdef int64_t number, spins
    while True:
        number = cg_fetch_add(&pub.taken, 1)
        spins = 0
        while number >= cg_load_acquire(&pub.formed):
            if cg_load_acquire(&pub.finished):
                # `formed` is final once `finished` is seen
                if number >= cg_load_acquire(&pub.formed):
                    return
                break
            cg_spin_pause(&spins)
        _evaluate_taken(h, batch, pub, number, tau)


cdef int _apply_in_order(Half* h, Proposal* batch, Py_ssize_t nb, Publication* pub,
                         double tau) noexcept nogil:
    """On the forming thread, once a batch of ``nb`` proposals is complete: apply them to
    the domain in proposal order, each as soon as it is evaluated, and evaluate the ones
    still untaken meanwhile (never one of a later batch, which it has yet to form).
    Returns the first failure of ``_apply_domain``, else 0."""
    cdef int64_t b = 0, number, spins = 0
    cdef int status
    while b < nb:
        if cg_load_acquire(&batch[b].evaluated):
            status = _apply_domain(h, &batch[b])
            if status != 0:
                return status
            b += 1
            continue
        number = cg_take_below(&pub.taken, pub.first + nb)
        if number >= 0:
            _evaluate_taken(h, batch, pub, number, tau)
        else:
            cg_spin_pause(&spins)  # the others are finishing the last proposals
    return 0


cdef int _form_and_apply(Half* h, Proposal* batch, Rng* master, double tau, int64_t n_prop,
                         Publication* pub, Queued* queued, KindCache* cache) noexcept nogil:
    """The forming thread's part of :func:`_formed_while_evaluated`: form each batch,
    publishing its proposals, then apply it in order; announce the end. Returns the first
    failure, else 0."""
    cdef int64_t done = 0
    cdef Py_ssize_t nb
    cdef int status = 0
    _empty_kind_cache(cache)
    while done < n_prop and status == 0:
        status = _ensure_atom_marks(h)
        if status != 0:
            break
        pub.first = done
        nb = _fill_batch(h, master, batch, queued, min(<int64_t>MAX_BATCH, n_prop - done),
                         cache, pub)
        status = _apply_in_order(h, batch, nb, pub, tau)
        done += nb
        h.n_batches += 1
        h.n_queued += nb
    cg_store_release(&pub.finished, 1)
    return status


cdef int64_t _formed_while_evaluated(Half* h, Proposal* batch, Rng* master, double tau,
                                     int threads, int64_t n_prop) noexcept nogil:
    """The ``n_prop`` updates of a half-iteration on several threads: one thread forms the
    batches one after the other and the others evaluate each proposal as soon as it is
    queued; once a batch is complete, the forming thread applies it to the domain in order
    as its proposals are evaluated, and evaluates the rest with the others, before it
    forms the next. One parallel region serves the whole half-iteration. Returns
    ``n_prop``, or the first failure of ``_apply_domain``.

    Evaluating a proposal reads only what it carries of the batch-start domain (its atoms'
    masses, ``_fill``) and its own rows of the matrix and the residual, and writes only
    those rows; the forming thread reads the domain, writes the marks and then updates
    the domain, never those rows. So each batch evaluates exactly as if it had been formed
    first, and is applied in the same order: the chain is the one of one thread. Formation
    and the domain updates are the serial part of the queue; overlapping them with the
    evaluations is what lets more threads pay off when forming a proposal costs a fair
    part of evaluating one (doc/cogaps_scale.rst)."""
    cdef Publication pub
    cdef Queued queued
    cdef KindCache cache
    pub.formed = 0
    pub.taken = 0
    pub.first = 0
    pub.finished = 0
    pub.status = 0
    with parallel(num_threads=threads):
        if threadid() == 0:
            pub.status = _form_and_apply(h, batch, master, tau, n_prop, &pub, &queued, &cache)
        else:
            _evaluate_stream(h, batch, &pub, tau)
    return pub.status if pub.status != 0 else n_prop


cdef int64_t _queued_half(Half* h, Proposal* batch, Rng* master, double tau,
                          int n_threads) noexcept nogil:
    """Poisson(max(n_atoms, 10)) updates of one matrix through the proposal queue: on
    several threads when the batches hold enough work (:func:`_formed_while_evaluated`),
    else each batch formed, then evaluated.

    Returns the number of updates, or the (negative) failure: FAIL_NO_MEMORY, or that of
    ``_apply_domain``.
    """
    cdef int64_t done = 0, n_prop = _n_proposals(h, master), size
    cdef Py_ssize_t nb, b
    cdef int threads, status
    cdef Queued queued
    cdef KindCache cache
    if (CG_HAVE_ATOMICS and n_threads > 1 and not h.reversible
            and _expected_batch(h, n_prop) * h.work >= PARALLEL_MIN_WORK):
        return _formed_while_evaluated(h, batch, master, tau, n_threads, n_prop)
    _empty_kind_cache(&cache)
    while done < n_prop:
        if _ensure_atom_marks(h) != 0:
            return FAIL_NO_MEMORY
        size = min(<int64_t>MAX_BATCH, n_prop - done)
        nb = _fill_batch(h, master, batch, &queued, size, &cache, NULL)
        threads = n_threads if nb * h.work >= PARALLEL_MIN_WORK else 1
        if h.reversible:
            _reversible_batch(h, batch, nb, tau, threads)
        elif threads > 1:
            # dealt one proposal at a time: their costs differ (one row or two, nothing
            # to apply when rejected)
            for b in prange(nb, schedule='dynamic', num_threads=threads):
                _evaluate(h, &batch[b], tau)
                _apply_matrix(h, &batch[b])
        if threads > 1 or h.reversible:
            for b in range(nb):
                # in proposal order, after the parallel region: any failing proposal of
                # the batch is seen here, whichever thread evaluated it
                status = _apply_domain(h, &batch[b])
                if status != 0:
                    return status
        else:
            # one pass: evaluating a proposal reads none of the domain the ones before
            # it change (it carries what it needs of it, _fill)
            for b in range(nb):
                _evaluate(h, &batch[b], tau)
                _apply_matrix(h, &batch[b])
                status = _apply_domain(h, &batch[b])
                if status != 0:
                    return status
        done += nb
        h.n_batches += 1
        h.n_queued += nb
    return n_prop


cdef void _reversible_batch(Half* h, Proposal* batch, Py_ssize_t nb, double tau,
                            int threads) noexcept nogil:
    """Evaluate and apply a batch under the reversible birth/death. A birth's or death's
    acceptance depends on the atom count just before it, which the earlier births and
    deaths of the batch change: the batch is evaluated in parallel, its births and deaths
    are then decided in proposal order with the running count (cheap: the evaluation left
    one comparison each), and the matrix changes are applied in parallel. Every outcome is
    the one the same proposals would have, one after the other."""
    cdef Py_ssize_t b
    cdef int64_t n = h.dom.n_atoms
    if threads > 1:
        for b in prange(nb, schedule='dynamic', num_threads=threads):
            _evaluate(h, &batch[b], tau)
    else:
        for b in range(nb):
            _evaluate(h, &batch[b], tau)
    for b in range(nb):
        _decide_birth_death(h, &batch[b], n)
        if batch[b].outcome != REJECT:
            if batch[b].kind == BIRTH:
                n += 1
            elif batch[b].kind == DEATH and batch[b].outcome == KILL:
                n -= 1
    if threads > 1:
        for b in prange(nb, schedule='dynamic', num_threads=threads):
            _apply_matrix(h, &batch[b])
    else:
        for b in range(nb):
            _apply_matrix(h, &batch[b])


cdef inline int64_t _expected_batch(const Half* h, int64_t size) noexcept nogil:
    """The size the next batch is likely to have, before it is formed: the mean of this
    matrix's batches so far, at most ``size``. It only chooses the threads; the chain
    does not depend on it."""
    cdef int64_t mean = h.n_queued // h.n_batches if h.n_batches > 0 else 1
    return mean if mean < size else size


cdef int _ensure_atom_marks(Half* h) noexcept nogil:
    """Room in ``atom_mark`` for every atom id the domain has handed out."""
    cdef int64_t size = h.dom.capacity, i
    cdef int64_t* grown
    if h.atom_mark_size >= size:
        return 0
    grown = <int64_t*>realloc(h.atom_mark, size * sizeof(int64_t))
    if grown == NULL:
        return FAIL_NO_MEMORY
    for i in range(h.atom_mark_size, size):
        grown[i] = 0
    h.atom_mark = grown
    h.atom_mark_size = size
    return 0


def _fill_for_tests(DomainForTests dom, str kind, uint64_t seed, Py_ssize_t n):
    """What ``n`` proposals of one kind (``"move"`` or ``"exchange"``) drawn from the
    domain's state choose, with the master stream seeded by ``seed``: arrays of the first
    atom, the second atom (-1 for a move) and the position (a move's destination).

    For tests: the ranges are exact integer bounds (a move lands strictly between the
    atom's neighbours, an exchange pairs an atom with its right neighbour, the last with
    the first), which no statistical test of the chain can see off by one in 2**64.
    """
    cdef Half h
    cdef Proposal p
    cdef Rng master
    cdef Py_ssize_t t
    if kind not in ("move", "exchange"):
        raise ValueError(f"kind must be 'move' or 'exchange'; got {kind!r}")
    if dom.d.n_atoms == 0:
        raise ValueError("the domain has no atom to propose a change of")
    memset(&h, 0, sizeof(Half))
    h.dom = &dom.d
    rng_seed(&master, seed)
    atom1 = np.empty(n, dtype=np.int64)
    atom2 = np.empty(n, dtype=np.int64)
    pos = np.zeros(n, dtype=np.uint64)
    cdef int64_t[::1] a1 = atom1, a2 = atom2
    cdef uint64_t[::1] ps = pos
    for t in range(n):
        memset(&p, 0, sizeof(Proposal))
        p.kind = MOVE if kind == "move" else EXCHANGE
        _fill(&h, &master, &p)
        a1[t] = p.atom1
        a2[t] = p.atom2
        if p.kind == MOVE:
            ps[t] = p.pos
    return atom1, atom2, pos
