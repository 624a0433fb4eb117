# Log-sum-exp and responsibilities, with the maximum subtracted: the one implementation that
# the kernels cimport (inline, nogil, no allocation).

from libc.math cimport exp, log, INFINITY

ctypedef fused real:
    float
    double


cdef inline double max_pair_sum(const double* a, const double* b, Py_ssize_t n) noexcept nogil:
    """max_k (a_k + b_k); -inf if every term is (or n is 0). NaN terms are passed over."""
    cdef double m = -INFINITY, t
    cdef Py_ssize_t k
    for k in range(n):
        t = a[k] + b[k]
        if t > m:
            m = t
    return m


cdef inline double log_sum_exp_pair(const double* a, const double* b, Py_ssize_t n) noexcept nogil:
    """log sum_k exp(a_k + b_k); -inf if every term is."""
    cdef double m = max_pair_sum(a, b, n), acc = 0.0
    cdef Py_ssize_t k
    if m == -INFINITY:
        return -INFINITY
    for k in range(n):
        acc = acc + exp(a[k] + b[k] - m)
    return m + log(acc)


cdef inline double shifted_exp_pair(const double* a, const double* b, double* w,
                                    Py_ssize_t n) noexcept nogil:
    """w_k = exp(a_k + b_k - m) with m = max_k (a_k + b_k); returns m (-inf and w = 0 if every
    term is -inf). The caller has log sum_k exp(a_k + b_k) = m + log(sum_k w_k)."""
    cdef double m = max_pair_sum(a, b, n)
    cdef Py_ssize_t k
    if m == -INFINITY:
        for k in range(n):
            w[k] = 0.0
        return m
    for k in range(n):
        w[k] = exp(a[k] + b[k] - m)
    return m


cdef inline double responsibilities(const real* logp, double* r, Py_ssize_t n) noexcept nogil:
    """r_k = exp(logp_k - lse), returns lse = log sum_k exp(logp_k) (-inf and r = 0 if every
    logp_k is -inf)."""
    cdef double m = -INFINITY, tot = 0.0
    cdef Py_ssize_t k
    for k in range(n):
        if logp[k] > m:
            m = logp[k]
    if m == -INFINITY:
        for k in range(n):
            r[k] = 0.0
        return m
    for k in range(n):
        r[k] = exp(logp[k] - m)
        tot = tot + r[k]
    for k in range(n):
        r[k] = r[k] / tot
    return m + log(tot)


cdef inline double log_add_exp(double a, double b) noexcept nogil:
    """log(exp(a) + exp(b)) with the maximum subtracted."""
    cdef double m = a if a > b else b
    if m == -INFINITY:
        return -INFINITY
    return m + log(exp(a - m) + exp(b - m))
