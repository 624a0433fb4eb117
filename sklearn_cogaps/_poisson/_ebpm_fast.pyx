"""Compiled parts of the EBPM solvers: the point-gamma-mixture likelihoods and posteriors.

One pass per observation, independent of the others, so any number of threads gives the
same bits. The likelihoods may be NaN or infinite at the extreme hyperparameters an optimiser
tries, and are returned as they are; a posterior that is NaN records it in the observation's
status slot and is raised after the parallel loop whichever thread met it
(_utils/_status.pxd).
"""

from cython.parallel cimport prange
from libc.math cimport exp, log, log1p, isnan, INFINITY

import numpy as np

ctypedef Py_ssize_t intp_t

from .._utils._logsumexp cimport log_add_exp, log_sum_exp_pair
from .._utils._special cimport digamma as _digamma, lgamma as _lgamma
from .._utils._status cimport FAIL_NOT_FINITE, SITE_EBPM_POSTERIOR, item_status
from .._utils._status import raise_for_status


def _digamma_for_tests(const double[::1] x, double[::1] out):
    """psi of each entry, as the kernels compute it."""
    cdef intp_t i
    for i in range(x.shape[0]):
        out[i] = _digamma(x[i])


def component_loglik(
    const double[::1] y,
    const double[::1] s,
    const double[::1] shape,
    const double[::1] rate,
    const double[::1] lgamma_shape,
    double[:, ::1] out,
    int n_threads,
):
    """log p(y_i | Gamma(shape_m, rate_m), s_i), the negative-binomial marginal, (n, m).

    ``lgamma(y + a) - lgamma(a) - lgamma(y + 1) - a log1p(s / b) - y log1p(b / s)``, the last
    term 0 where ``y = 0``; ``lgamma_shape`` holds ``lgamma(a_m)``.
    """
    cdef intp_t n = y.shape[0], M = shape.shape[0], i, m
    cdef double yi, si, lgy, a, b, v
    for i in prange(n, nogil=True, schedule="static", num_threads=n_threads):
        yi = y[i]
        si = s[i]
        lgy = _lgamma(yi + 1.0)
        for m in range(M):
            a = shape[m]
            b = rate[m]
            v = _lgamma(yi + a) - lgamma_shape[m] - lgy - a * log1p(si / b)
            if yi > 0:
                v = v - yi * log1p(b / si)
            out[i, m] = v


cdef inline void _posterior_one(double yi, double si, double l0, double mx,
                                const double* log_w, const double* shape,
                                const double* rate, const double* lli, intp_t M,
                                double* mean, double* mean_log, double* log_lik) noexcept nogil:
    cdef intp_t m
    cdef double lp, p, pm = 0.0, pl = 0.0, a_post, b_post
    # log of the marginal: the atom at zero and the Gamma components
    lp = log_add_exp(l0, log_sum_exp_pair(log_w, lli, M))
    for m in range(M):
        p = exp(log_w[m] + lli[m] - lp)
        if p > 0:
            a_post = shape[m] + yi
            b_post = rate[m] + si
            pm = pm + p * a_post / b_post
            pl = pl + p * (_digamma(a_post) - log(b_post))
    mean[0] = pm
    mean_log[0] = -INFINITY if exp(l0 - lp) > 0 else pl
    log_lik[0] = lp


def mixture_posterior(
    const double[::1] y,
    const double[::1] s,
    double log_pi0,
    const double[::1] log_w,
    const double[::1] shape,
    const double[::1] rate,
    const double[:, ::1] ll,
    double[::1] mean,
    double[::1] mean_log,
    double[::1] log_lik,
    int n_threads,
):
    """Posterior mean, E[log] and log p(y_i) under ``pi0 delta_0 + sum_m w_m Gamma(a_m, b_m)``.

    ``ll`` holds :func:`component_loglik`; ``log_pi0`` and ``log_w`` may be ``-inf``.
    """
    cdef intp_t n = y.shape[0], M = shape.shape[0], i, m
    cdef double yi, si, mx, l0
    status_arr = np.zeros(n, dtype=np.intc)
    cdef int[::1] status = status_arr
    for i in prange(n, nogil=True, schedule="static", num_threads=n_threads):
        status[i] = item_status(SITE_EBPM_POSTERIOR, i, True)
        if status[i] != 0:
            continue
        yi = y[i]
        si = s[i]
        l0 = log_pi0 if yi == 0 else -INFINITY
        mx = l0
        for m in range(M):
            if log_w[m] + ll[i, m] > mx:
                mx = log_w[m] + ll[i, m]
        if mx == -INFINITY:  # impossible observation: no component explains it
            mean[i] = 0.0
            mean_log[i] = -INFINITY
            log_lik[i] = -INFINITY
        else:
            _posterior_one(yi, si, l0, mx, &log_w[0], &shape[0], &rate[0], &ll[i, 0], M,
                           &mean[i], &mean_log[i], &log_lik[i])
            if isnan(mean[i]) or isnan(log_lik[i]):
                status[i] = FAIL_NOT_FINITE
    raise_for_status(status_arr, "The posterior", item="observation", advice={
        FAIL_NOT_FINITE: (
            "The posterior mean or the marginal likelihood is NaN: the prior's parameters or "
            "the counts are outside double precision. Rescale the counts or the size factors."
        ),
    })
