# Special functions usable without the GIL, shared by the Poisson factorisations.
# Polygamma functions: the recurrence psi(x) = psi(x + 1) - 1 / x up to x >= 10, then the
# asymptotic series (Abramowitz & Stegun 6.3.18, 6.4.12), accurate to about 1e-15 there.
from libc.math cimport log

cdef extern from "math.h" nogil:
    double lgamma_r(double x, int* sign)  # reentrant lgamma (glibc, POSIX)


cdef inline double lgamma(double x) noexcept nogil:
    """log |Gamma(x)|, safe to call from several threads at once."""
    cdef int sign
    return lgamma_r(x, &sign)


cdef inline double digamma(double x) noexcept nogil:
    """psi(x) for x > 0."""
    cdef double r = 0.0, f
    while x < 10.0:
        r -= 1.0 / x
        x += 1.0
    f = 1.0 / (x * x)
    return r + log(x) - 0.5 / x - f * (1.0 / 12.0 - f * (1.0 / 120.0 - f * (1.0 / 252.0 - f * (
        1.0 / 240.0 - f * (1.0 / 132.0 - f * (691.0 / 32760.0))))))


cdef inline double digamma_minus_log(double x, double b) noexcept nogil:
    """psi(x) - log(b) for x, b > 0 with one logarithm (the E[log] of a Gamma(x, b))."""
    cdef double r = 0.0, f
    while x < 10.0:
        r -= 1.0 / x
        x += 1.0
    f = 1.0 / (x * x)
    return r + log(x / b) - 0.5 / x - f * (1.0 / 12.0 - f * (1.0 / 120.0 - f * (1.0 / 252.0 - f * (
        1.0 / 240.0 - f * (1.0 / 132.0 - f * (691.0 / 32760.0))))))


cdef inline double trigamma(double x) noexcept nogil:
    """psi'(x) for x > 0."""
    cdef double r = 0.0, f
    while x < 10.0:
        r += 1.0 / (x * x)
        x += 1.0
    f = 1.0 / (x * x)
    return r + 1.0 / x + 0.5 * f + (1.0 / x) * f * (1.0 / 6.0 - f * (1.0 / 30.0 - f * (
        1.0 / 42.0 - f * (1.0 / 30.0 - f * (5.0 / 66.0)))))


cdef inline double tetragamma(double x) noexcept nogil:
    """psi''(x) for x > 0: psi''(x) = psi''(x + 1) - 2 / x^3, then the series of
    -1/x^2 - 1/x^3 - ..."""
    cdef double r = 0.0, f
    while x < 10.0:
        r -= 2.0 / (x * x * x)
        x += 1.0
    f = 1.0 / (x * x)
    return r - f * (1.0 + 1.0 / x + f * (0.5 - f * (1.0 / 6.0 - f * (1.0 / 6.0 - f * (
        3.0 / 10.0 - f * (5.0 / 6.0))))))
