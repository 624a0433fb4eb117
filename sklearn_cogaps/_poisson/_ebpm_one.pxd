# The point-gamma-mixture marginal and posterior of one observation, as the EBPM solvers
# (_ebpm_fast.pyx) and the compiled regression of new rows (_wbpmf_fast.pyx) compute them:
# one implementation, inline, nogil, no allocation (Wang, EBPMF-WBG, section 4).

from libc.math cimport exp, log, log1p, INFINITY

from .._utils._special cimport digamma_minus_log, lgamma

# Above this shape, lgamma(y + a) - lgamma(a) is taken from Stirling's series: the two
# logarithms of the Gamma function are of order a log a and their difference of order
# y log a, so the direct difference loses all its digits when a is large (a fitted Gamma prior
# that collapses to a point mass reaches a ~ 1e16; its marginal, its KL and the ELBO were then
# off by thousands of nats). At 1e7 the direct difference is still good to about 1e-8 and the
# series' first neglected term, y / (120 a^4), is below 1e-29.


cdef inline double lgamma_ratio(double y, double a, double lgamma_a) noexcept nogil:
    """lgamma(y + a) - lgamma(a), ``lgamma_a = lgamma(a)``: directly, or for large ``a``
    by the difference of Stirling's series, (a - 1/2) log1p(y/a) + y log(a + y) - y
    - y / (12 a (a + y)), which has no cancellation."""
    if a < 1e7:
        return lgamma(y + a) - lgamma_a
    return (a - 0.5) * log1p(y / a) + y * log(a + y) - y - y / (12.0 * a * (a + y))


cdef inline double component_loglik_one(double y, double s, double log_s, double lgy, double a,
                                        double b, double log_b,
                                        double lgamma_a) noexcept nogil:
    """log p(y | Gamma(a, b), s), the negative-binomial marginal ``lgamma(y + a) - lgamma(a)
    - lgamma(y + 1) - a log1p(s / b) - y log1p(b / s)``; ``lgy = lgamma(y + 1)``, ``log_s``
    and ``log_b`` the logs of s and b (``log_s`` is read only where y > 0).

    One log1p per entry instead of two: the larger of the ratios' log1p comes from the
    smaller's, ``log1p(b / s) = log1p(s / b) + log b - log s``, which keeps the accuracy of
    log1p where either ratio is small (s and b span 1e-16 .. 1e3 in the priors' grids)."""
    cdef double v = lgamma_ratio(y, a, lgamma_a) - lgy, l
    if y <= 0:
        return v - a * log1p(s / b)
    if s <= b:
        l = log1p(s / b)
        return v - a * l - y * (l + (log_b - log_s))
    l = log1p(b / s)
    return v - a * (l + (log_s - log_b)) - y * l


cdef inline void mixture_posterior_one(double y, double s, double log_pi0, const double* log_w,
                                       const double* shape, const double* rate,
                                       const double* ll, Py_ssize_t M, double* mean,
                                       double* mean_log, double* log_lik) noexcept nogil:
    """Posterior mean, E[log] and log p(y) under ``pi0 delta_0 + sum_m w_m Gamma(a_m, b_m)``,
    ``ll`` the components' marginals; an observation no component explains gets 0, -inf and
    -inf. One exponential per component: the posterior weights ``e_m / sum(e)`` with ``e_m
    = exp(log w_m + ll_m - max)`` give the marginal and both moments in one pass."""
    cdef Py_ssize_t m
    cdef double l0 = log_pi0 if y == 0 else -INFINITY, mx = l0, e, e0, total, pm = 0.0, pl = 0.0
    cdef double a_post, b_post
    for m in range(M):
        if log_w[m] + ll[m] > mx:
            mx = log_w[m] + ll[m]
    if mx == -INFINITY:  # impossible observation: no component explains it
        mean[0] = 0.0
        mean_log[0] = -INFINITY
        log_lik[0] = -INFINITY
        return
    e0 = exp(l0 - mx)
    total = e0
    for m in range(M):
        e = exp(log_w[m] + ll[m] - mx)
        if e > 0:
            total = total + e
            a_post = shape[m] + y
            b_post = rate[m] + s
            pm = pm + e * (a_post / b_post)
            pl = pl + e * digamma_minus_log(a_post, b_post)
    mean[0] = pm / total
    mean_log[0] = -INFINITY if e0 / total > 0 else pl / total
    log_lik[0] = mx + log(total)
