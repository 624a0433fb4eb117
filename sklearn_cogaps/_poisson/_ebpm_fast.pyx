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

from .._utils._special cimport digamma as _digamma, lgamma as _lgamma
from ._ebpm_one cimport component_loglik_one, mixture_posterior_one
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
    const double[::1] log_rate,
    double[:, ::1] out,
    int n_threads,
):
    """log p(y_i | Gamma(shape_m, rate_m), s_i), the negative-binomial marginal, (n, m).

    ``lgamma(y + a) - lgamma(a) - lgamma(y + 1) - a log1p(s / b) - y log1p(b / s)``, the last
    term 0 where ``y = 0``; ``lgamma_shape`` and ``log_rate`` hold ``lgamma(a_m)`` and
    ``log(b_m)``.
    """
    cdef intp_t n = y.shape[0], M = shape.shape[0], i, m
    cdef double lgy, log_s
    for i in prange(n, nogil=True, schedule="static", num_threads=n_threads):
        lgy = _lgamma(y[i] + 1.0)
        log_s = log(s[i]) if y[i] > 0 else 0.0
        for m in range(M):
            out[i, m] = component_loglik_one(y[i], s[i], log_s, lgy, shape[m], rate[m],
                                             log_rate[m], lgamma_shape[m])


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
    cdef intp_t n = y.shape[0], M = shape.shape[0], i
    status_arr = np.zeros(n, dtype=np.intc)
    cdef int[::1] status = status_arr
    for i in prange(n, nogil=True, schedule="static", num_threads=n_threads):
        status[i] = item_status(SITE_EBPM_POSTERIOR, i, True)
        if status[i] != 0:
            continue
        mixture_posterior_one(y[i], s[i], log_pi0, &log_w[0] if M else NULL,
                              &shape[0] if M else NULL, &rate[0] if M else NULL,
                              &ll[i, 0] if M else NULL, M, &mean[i], &mean_log[i], &log_lik[i])
        if isnan(mean[i]) or isnan(log_lik[i]):
            status[i] = FAIL_NOT_FINITE
    raise_for_status(status_arr, "The posterior", item="observation", advice={
        FAIL_NOT_FINITE: (
            "The posterior mean or the marginal likelihood is NaN: the prior's parameters or "
            "the counts are outside double precision. Rescale the counts or the size factors."
        ),
    })
