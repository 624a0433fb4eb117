# A small counter-free generator usable without the GIL: xoshiro256** (Blackman & Vigna),
# seeded through splitmix64. Every unit of work (a proposal, a row, a chunk) gets its own
# generator derived from a parent stream, so results never depend on the thread count.
from libc.stdint cimport uint64_t
from libc.math cimport log, sqrt, exp, floor, fabs, M_PI

from ._ziggurat cimport cg_zig_r, cg_zig_inv_r, cg_zig_k, cg_zig_w, cg_zig_f


cdef struct Rng:
    uint64_t s0
    uint64_t s1
    uint64_t s2
    uint64_t s3


cdef inline uint64_t _rotl(uint64_t x, int k) noexcept nogil:
    return (x << k) | (x >> (64 - k))


cdef inline uint64_t splitmix64(uint64_t* state) noexcept nogil:
    state[0] += <uint64_t>0x9E3779B97F4A7C15
    cdef uint64_t z = state[0]
    z = (z ^ (z >> 30)) * <uint64_t>0xBF58476D1CE4E5B9
    z = (z ^ (z >> 27)) * <uint64_t>0x94D049BB133111EB
    return z ^ (z >> 31)


cdef inline void rng_seed(Rng* r, uint64_t seed) noexcept nogil:
    cdef uint64_t sm = seed
    r.s0 = splitmix64(&sm)
    r.s1 = splitmix64(&sm)
    r.s2 = splitmix64(&sm)
    r.s3 = splitmix64(&sm)


cdef inline uint64_t rng_next(Rng* r) noexcept nogil:
    cdef uint64_t result = _rotl(r.s1 * 5, 7) * 9
    cdef uint64_t t = r.s1 << 17
    r.s2 ^= r.s0
    r.s3 ^= r.s1
    r.s1 ^= r.s2
    r.s0 ^= r.s3
    r.s2 ^= t
    r.s3 = _rotl(r.s3, 45)
    return result


cdef inline double rng_uniform(Rng* r) noexcept nogil:
    """Uniform on the open interval (0, 1): 53 random bits, centred in their cell."""
    return (<double>(rng_next(r) >> 11) + 0.5) * (1.0 / 9007199254740992.0)


cdef inline uint64_t rng_below(Rng* r, uint64_t n) noexcept nogil:
    """Uniform integer in [0, n), without modulo bias; n must be positive.

    Draws below ``threshold = 2**64 mod n`` are rejected. The threshold is less than n, so
    it is only computed (a 64-bit division) for a draw below n, which for the small n of
    most calls almost never happens; the draws and the result are those of the plain
    rule."""
    cdef uint64_t threshold
    cdef uint64_t x = rng_next(r)
    if x < n:
        threshold = (<uint64_t>0 - n) % n
        while x < threshold:
            x = rng_next(r)
    return x % n


cdef extern from *:
    """
    #include <stdint.h>
    /* The high 64 bits of the 128-bit product a b. */
    static inline uint64_t cg_mulhi64(uint64_t a, uint64_t b)
    {
    #if defined(__SIZEOF_INT128__)
        return (uint64_t)(((unsigned __int128)a * b) >> 64);
    #else
        uint64_t a0 = a & 0xFFFFFFFFu, a1 = a >> 32, b0 = b & 0xFFFFFFFFu, b1 = b >> 32;
        uint64_t p00 = a0 * b0, p01 = a0 * b1, p10 = a1 * b0, p11 = a1 * b1;
        uint64_t mid = (p00 >> 32) + (p01 & 0xFFFFFFFFu) + (p10 & 0xFFFFFFFFu);
        return p11 + (p01 >> 32) + (p10 >> 32) + (mid >> 32);
    #endif
    }
    """
    uint64_t cg_mulhi64(uint64_t a, uint64_t b) noexcept nogil


cdef struct Divisor:
    # x // d by a multiplication: magic = (2**64 - 1) // d, made once per divisor
    uint64_t d
    uint64_t magic


cdef inline void divisor_init(Divisor* v, uint64_t d) noexcept nogil:
    """Prepare exact division by ``d`` (> 0): one 64-bit division here, none per use."""
    v.d = d
    v.magic = <uint64_t>0xFFFFFFFFFFFFFFFF // d


cdef inline uint64_t divisor_div(const Divisor* v, uint64_t x, uint64_t* rem) noexcept nogil:
    """x // d, and x % d in ``rem``, exactly. With m = (2**64 - 1) // d, the high word of
    x m is x / d minus less than 2, never more: at most two corrections. They are made
    without a branch (a comparison's 0 or 1 times d), whose outcome, random from one call
    to the next, the processor would guess wrong about half the time."""
    cdef uint64_t q = cg_mulhi64(x, v.magic)
    cdef uint64_t r = x - q * v.d
    cdef uint64_t c = <uint64_t>(r >= v.d)
    r -= c * v.d
    q += c
    c = <uint64_t>(r >= v.d)
    rem[0] = r - c * v.d
    return q + c


cdef inline uint64_t rng_below_by(Rng* r, const Divisor* v, uint64_t threshold) noexcept nogil:
    """:func:`rng_below` for a prepared divisor ``v`` and its ``threshold``
    ``(2**64 - v.d) % v.d``: the same draws and the same result, without division."""
    cdef uint64_t rem
    cdef uint64_t x = rng_next(r)
    while x < threshold:
        x = rng_next(r)
    divisor_div(v, x, &rem)
    return rem


cdef inline double rng_normal(Rng* r) noexcept nogil:
    """Standard normal by the 256-layer ziggurat (Marsaglia & Tsang 2000; the tables and
    their construction in _ziggurat.pxd and tools/ziggurat_tables.py). One 64-bit draw
    gives the layer (8 bits), the sign (1 bit) and a 52-bit abscissa; about 99% of draws
    lie under the curve without evaluating it, the rest take the wedge test or the tail."""
    cdef uint64_t bits, m
    cdef Py_ssize_t layer
    cdef double x, t, y
    while True:
        bits = rng_next(r)
        layer = <Py_ssize_t>(bits & 0xFF)
        m = (bits >> 9) & <uint64_t>0x000FFFFFFFFFFFFF
        x = <double>m * cg_zig_w[layer]
        if m >= cg_zig_k[layer]:
            if layer == 0:
                # beyond r: the tail by Marsaglia's (1964) exponential rejection
                while True:
                    t = -log(rng_uniform(r)) * cg_zig_inv_r
                    y = -log(rng_uniform(r))
                    if y + y > t * t:
                        break
                x = cg_zig_r + t
            else:
                # the wedge of layer i, between the heights f(x_i) and f(x_{i-1})
                y = cg_zig_f[layer] + rng_uniform(r) * (cg_zig_f[layer - 1] - cg_zig_f[layer])
                if not (y < exp(-0.5 * x * x)):
                    continue
        return -x if (bits >> 8) & 1 else x


cdef inline double rng_exponential(Rng* r) noexcept nogil:
    """Standard exponential (rate 1)."""
    return -log(rng_uniform(r))


cdef inline double rng_gamma(Rng* r, double shape) noexcept nogil:
    """Gamma(shape, 1) by Marsaglia & Tsang (2000); shape < 1 by the boosting identity."""
    cdef double d, c, x, v, u
    if shape <= 0.0:
        return 0.0
    if shape < 1.0:
        u = rng_uniform(r)
        return rng_gamma(r, shape + 1.0) * exp(log(u) / shape)
    d = shape - 1.0 / 3.0
    c = 1.0 / sqrt(9.0 * d)
    while True:
        x = rng_normal(r)
        v = 1.0 + c * x
        if v <= 0.0:
            continue
        v = v * v * v
        u = rng_uniform(r)
        if u < 1.0 - 0.0331 * x * x * x * x:
            return d * v
        if log(u) < 0.5 * x * x + d * (1.0 - v + log(v)):
            return d * v


cdef inline double _log_factorial(double k) noexcept nogil:
    # Stirling's series; exact table for small k.
    cdef double[10] table = [0.0, 0.0, 0.6931471805599453, 1.791759469228055,
                             3.1780538303479458, 4.787491742782046, 6.579251212010101,
                             8.525161361065415, 10.60460290274525, 12.801827480081469]
    cdef double k1
    if k < 10.0:
        return table[<int>k]
    k1 = k + 1.0
    return ((k1 - 0.5) * log(k1) - k1 + 0.5 * log(2.0 * M_PI)
            + 1.0 / (12.0 * k1) - 1.0 / (360.0 * k1 * k1 * k1))


cdef inline long rng_poisson(Rng* r, double lam) noexcept nogil:
    """Poisson(lam): multiplication for lam < 10, else Hormann's PTRS (1993)."""
    cdef double p, limit, slam, loglam, b, a, inv_alpha, vr, u, v, us, k
    cdef long n
    if lam <= 0.0:
        return 0
    if lam < 10.0:
        limit = exp(-lam)
        n = 0
        p = rng_uniform(r)
        while p > limit:
            n += 1
            p *= rng_uniform(r)
        return n
    slam = sqrt(lam)
    loglam = log(lam)
    b = 0.931 + 2.53 * slam
    a = -0.059 + 0.02483 * b
    inv_alpha = 1.1239 + 1.1328 / (b - 3.4)
    vr = 0.9277 - 3.6224 / (b - 2.0)
    while True:
        u = rng_uniform(r) - 0.5
        v = rng_uniform(r)
        us = 0.5 - fabs(u)
        k = floor((2.0 * a / us + b) * u + lam + 0.43)
        if us >= 0.07 and v <= vr:
            return <long>k
        if k < 0.0 or (us < 0.013 and v > us):
            continue
        if (log(v) + log(inv_alpha) - log(a / (us * us) + b)
                <= -lam + k * loglam - _log_factorial(k)):
            return <long>k
