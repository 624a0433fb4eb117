# Exact sampler of the inverse Gaussian distribution IG(mean, shape), usable without the GIL:
# Michael, Schucany & Haas (1976), "Generating random variates using transformations with
# multiple roots", The American Statistician 30(2). A chi-square(1) draw y = nu^2 gives the
# smaller root x of the transformation; x is kept with probability mean / (mean + x), else
# mean^2 / x is returned.
from libc.math cimport sqrt, isinf
from ._rng cimport Rng, rng_normal, rng_uniform


cdef inline double rng_invgauss(Rng* r, double mean, double shape) noexcept nogil:
    """IG(mean, shape) with density sqrt(shape / (2 pi x^3)) exp(-shape (x - mean)^2 / (2 mean^2 x)).

    ``mean`` may be +inf: the limit is the Levy distribution with scale ``shape`` (the
    distribution of shape / nu^2), which is sampled exactly by the same transformation.
    """
    cdef double nu = rng_normal(r)
    cdef double y = nu * nu
    cdef double w, s, t, x
    if y < 1e-300:
        # nu = 0 has probability zero; its root is x = mean
        return mean
    # The textbook root mean + mean^2 y / (2 shape) - mean / (2 shape) sqrt(4 mean shape y
    # + mean^2 y^2) cancels catastrophically when mean y / shape is large. Both forms below
    # are the same root written without a difference of nearly equal numbers.
    t = shape / (mean * y)          # 0 when mean is infinite
    if t >= 1.0:
        w = 1.0 / t                 # = mean y / shape <= 1
        s = sqrt(w * w + 4.0 * w)
        x = 4.0 * mean * w / ((s + w) * (s + w))
    else:
        s = 1.0 + sqrt(1.0 + 4.0 * t)
        x = 4.0 * shape / (y * s * s)
    if isinf(mean) or rng_uniform(r) * (mean + x) <= mean:
        return x
    return mean * (mean / x)
