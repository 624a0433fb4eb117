# The point-gamma-mixture marginal and posterior of one observation, as the EBPM solvers
# (_ebpm_fast.pyx) and the compiled regression of new rows (_wbpmf_fast.pyx) compute them:
# one implementation, inline, nogil, no allocation (Wang, EBPMF-WBG, section 4).

from libc.math cimport exp, log, log1p, INFINITY

from .._utils._logsumexp cimport log_add_exp, log_sum_exp_pair
from .._utils._special cimport digamma, lgamma


cdef inline double component_loglik_one(double y, double s, double lgy, double a, double b,
                                        double lgamma_a) noexcept nogil:
    """log p(y | Gamma(a, b), s), the negative-binomial marginal; ``lgy = lgamma(y + 1)``."""
    cdef double v = lgamma(y + a) - lgamma_a - lgy - a * log1p(s / b)
    if y > 0:
        v = v - y * log1p(b / s)
    return v


cdef inline void mixture_posterior_one(double y, double s, double log_pi0, const double* log_w,
                                       const double* shape, const double* rate,
                                       const double* ll, Py_ssize_t M, double* mean,
                                       double* mean_log, double* log_lik) noexcept nogil:
    """Posterior mean, E[log] and log p(y) under ``pi0 delta_0 + sum_m w_m Gamma(a_m, b_m)``,
    ``ll`` the components' marginals; an observation no component explains gets 0, -inf and
    -inf."""
    cdef Py_ssize_t m
    cdef double l0 = log_pi0 if y == 0 else -INFINITY, mx = l0, lp, p, pm = 0.0, pl = 0.0
    cdef double a_post, b_post
    for m in range(M):
        if log_w[m] + ll[m] > mx:
            mx = log_w[m] + ll[m]
    if mx == -INFINITY:  # impossible observation: no component explains it
        mean[0] = 0.0
        mean_log[0] = -INFINITY
        log_lik[0] = -INFINITY
        return
    # log of the marginal: the atom at zero and the Gamma components
    lp = log_add_exp(l0, log_sum_exp_pair(log_w, ll, M))
    for m in range(M):
        p = exp(log_w[m] + ll[m] - lp)
        if p > 0:
            a_post = shape[m] + y
            b_post = rate[m] + s
            pm = pm + p * a_post / b_post
            pl = pl + p * (digamma(a_post) - log(b_post))
    mean[0] = pm
    mean_log[0] = -INFINITY if exp(l0 - lp) > 0 else pl
    log_lik[0] = lp
