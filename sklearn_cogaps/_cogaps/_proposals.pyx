"""The four updates of an atomic domain and their evaluation (Sherman, Gao & Fertig 2019,
section 1.3 and the Gibbs steps of section 4): choosing an update, choosing the atoms it
touches, deciding it from the current state and the proposal's own stream, and applying it
to the matrix, the residual and the domain. ``_sequential_half`` is the plain chain
(Algorithm 1); the queued chain of section 2 is in ``_queue``. The updates every
proposal runs are inline, in ``_proposals.pxd``, so that they are compiled into the
queue's and the sampler's loops rather than called across modules; this module holds the
rest.

Two birth/death pairs: CoGAPS's (the default, as in the C++ CoGAPS: a birth always keeps its
Gibbs-drawn mass, a death re-draws the mass and keeps the atom with the likelihood ratio),
and a reversible-jump pair (``Half.reversible``) whose stationary law is the posterior under
the compound Poisson-exponential prior; doc/testing.rst derives both.
"""

from libc.math cimport sqrt, log, exp, erf, erfc
from libc.stdint cimport uint64_t, int64_t

from .._utils._rng cimport Rng, rng_next
from ._stats cimport Half, Proposal, KindCache


cdef void _half_init(Half* h, AtomicDomain* dom, double* M, Py_ssize_t n_rows,
                     Py_ssize_t n_cols, Py_ssize_t K, double alpha, double lam,
                     double max_mass) noexcept nogil:
    """A dense half-iteration over ``M`` (n_rows x K) with no data bound yet and an empty
    proposal queue (``row_mark`` unallocated: the sequential chain needs none)."""
    h.dom = dom
    h.M = M
    h.n_rows = n_rows
    h.n_cols = n_cols
    h.row_stride = n_cols
    h.K = K
    h.alpha = alpha
    h.lam = lam
    h.cap = max_mass / lam
    h.reversible = False
    h.count_base = 0
    h.loglik_change = 0.0
    h.sparse = False
    h.Ot = NULL
    h.R = NULL
    h.prec = NULL
    h.f32 = False
    h.O = NULL
    h.row_mark = NULL
    h.atom_mark = NULL
    h.atom_mark_size = 0
    h.batch_id = 0
    h.n_batches = 0
    h.n_queued = 0
    h.work = n_cols


cdef inline double _erfcx(double x) noexcept nogil:
    """exp(x^2) erfc(x) for x >= 0, without underflow: past x = 26, where erfc underflows,
    the asymptotic series to the x^-6 term (relative error below 1e-10 there)."""
    cdef double r
    if x < 26.0:
        return exp(x * x) * erfc(x)
    r = 0.5 / (x * x)
    return (1.0 - r * (1.0 - 3.0 * r * (1.0 - 5.0 * r))) / (x * 1.7724538509055160273)


cdef double _log_gauss_integral(double a, double b, double cap) noexcept nogil:
    """log of the integral of exp(b x - a x^2 / 2) over [0, cap], for a >= 0.

    With sd = 1 / sqrt(a), mu = b / a and the standardised bounds lo = -mu / sd and
    hi = (cap - mu) / sd, the integral is sd sqrt(2 pi) exp(lo^2 / 2) (Phi(hi) - Phi(lo)),
    written with erfcx in the tails so that bounds tens of standard deviations out keep
    full relative precision."""
    cdef double sd, mu, lo, hi, base
    if not (a > 0.0):
        if b == 0.0:
            return log(cap)
        if b < 0.0:
            return log(-expm1(b * cap)) - log(-b)
        return b * cap + log(-expm1(-b * cap)) - log(b)
    sd = 1.0 / sqrt(a)
    mu = b / a
    lo = -mu / sd
    hi = (cap - mu) / sd
    base = log(sd) + 0.91893853320467274178  # log(sd sqrt(2 pi))
    if lo >= 0.0:
        return base + log(0.5 * _erfcx(lo * 0.70710678118654752440)) + log1p(
            -exp(-0.5 * (hi - lo) * (hi + lo)) * _erfcx(hi * 0.70710678118654752440)
            / _erfcx(lo * 0.70710678118654752440))
    if hi <= 0.0:
        return base + 0.5 * (lo - hi) * (lo + hi) + log(
            0.5 * _erfcx(-hi * 0.70710678118654752440)) + log1p(
            -exp(-0.5 * (lo - hi) * (lo + hi)) * _erfcx(-lo * 0.70710678118654752440)
            / _erfcx(-hi * 0.70710678118654752440))
    return base + 0.5 * lo * lo + log(0.5 * (erf(hi * 0.70710678118654752440)
                                             - erf(lo * 0.70710678118654752440)))


def _log_gauss_integral_for_tests(double a, double b, double cap):
    """log of the integral of exp(b x - a x^2 / 2) over [0, cap] (a >= 0), for tests."""
    return _log_gauss_integral(a, b, cap)


cdef void _propose(Half* h, Rng* master, Proposal* p, KindCache* cache) noexcept nogil:
    """A proposal of the sequential chain, with the seed of its own stream."""
    p.kind = _choose_kind(h, master, h.dom.n_atoms, h.dom.n_atoms, cache)
    _fill(h, master, p)
    p.seed = rng_next(master)


cdef int64_t _sequential_half(Half* h, Rng* master, double tau) noexcept nogil:
    """Poisson(max(n_atoms, 10)) updates of one matrix, one after the other (Algorithm 1).

    Returns the number of proposals, or the (negative) failure of ``_apply_domain``.
    """
    cdef Proposal p
    cdef KindCache cache
    cdef int status
    cdef int64_t t, n_prop = _n_proposals(h, master)
    _empty_kind_cache(&cache)
    for t in range(n_prop):
        _propose(h, master, &p, &cache)
        _evaluate(h, &p, tau)
        _decide_birth_death(h, &p, h.dom.n_atoms)
        _apply_matrix(h, &p)
        status = _apply_domain(h, &p)
        if status != 0:
            return status
    return n_prop
