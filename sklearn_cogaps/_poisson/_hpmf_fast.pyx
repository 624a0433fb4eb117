# Compiled sweeps of HierarchicalPMF (Sarkar 2021).
#
# Every quantity that involves the counts X is a sum over its stored entries: x_ij / t_ij is
# zero where x_ij is zero. A pass walks a compressed matrix (CSR for the rows, CSC for the
# columns) and, for each major index i, sums over its stored entries. One pass costs
# O(nnz K) time and no memory beyond its outputs. Each major index writes only its own
# outputs, and scalar sums are returned per major index and added by the caller in a fixed
# order, so the results are bit-identical for any number of threads. Every pass records a
# status per major index (its thread's scratch missing, or a non-finite sum) and raises
# after the parallel region, whichever thread failed (_utils/_status.pxd).
from cython.parallel cimport prange, parallel

from .._utils._logsumexp cimport shifted_exp_pair
from libc.math cimport exp, log, sqrt, fabs, cbrt, isfinite, NAN
from libc.stdlib cimport malloc, free
from libc.stdint cimport uint64_t

import numpy as np

from .._utils._rng cimport Rng, rng_seed, rng_uniform, rng_gamma
from .._utils._special cimport digamma, trigamma, tetragamma, lgamma
from .._utils._status cimport (FAIL_NOT_FINITE, SITE_HPMF_COUNTS, SITE_HPMF_TRANSFORM,
                              SITE_HPMF_SAMPLE, item_status)
from .._utils._status import raise_for_status

# What to do when a pass fails, for the shared messages of _utils/_status.pyx.
_ADVICE = {
    FAIL_NOT_FINITE: (
        "A sum over the counts is NaN or infinite: the counts are too large for double "
        "precision. Rescale X (for example divide it by its largest entry and round)."
    ),
}


ctypedef fused idx_t:
    int
    long long


# Below this, the max-shifted sum of exponentials is recomputed by log-sum-exp.
cdef double TINY = 1e-250


# ---------------------------------------------------------------------------------------------
# Special functions (nogil, from _utils/_special.pxd), exposed for the tests.
# ---------------------------------------------------------------------------------------------

def _special_for_tests(double[::1] x, int which):
    """digamma (0), trigamma (1) or tetragamma (2) of each x, as the kernels compute them."""
    out = np.empty(x.shape[0])
    cdef double[::1] o = out
    cdef Py_ssize_t i
    for i in range(x.shape[0]):
        if which == 0:
            o[i] = digamma(x[i])
        elif which == 1:
            o[i] = trigamma(x[i])
        else:
            o[i] = tetragamma(x[i])
    return out


# ---------------------------------------------------------------------------------------------
# The expected-count pass
# ---------------------------------------------------------------------------------------------

cdef inline bint _weights(
    const double* er_i, const double* ec_j, const double* elog_r_i, const double* elog_c_j,
    Py_ssize_t K, double* w, double* shift,
) noexcept nogil:
    """Fill w[:K] with weights proportional to the responsibilities pi_ijk and w[K] with
    their sum. True when they are exp(E ln r_ik - mr_i + E ln c_jk - mc_j) (the row's and
    the column's max-shifted exponentials); False when that sum underflowed and they were
    made by log-sum-exp instead, shifted by ``shift``."""
    cdef Py_ssize_t k
    cdef double s = 0.0
    for k in range(K):
        w[k] = er_i[k] * ec_j[k]
        s += w[k]
    if s > TINY:
        w[K] = s
        return True
    shift[0] = shifted_exp_pair(elog_r_i, elog_c_j, w, K)
    s = 0.0
    for k in range(K):
        s += w[k]
    w[K] = s
    return False


cdef inline double _entry(
    Py_ssize_t i, Py_ssize_t j, double x, Py_ssize_t K,
    const double[:, ::1] elog_r, const double[:, ::1] elog_c,
    const double[:, ::1] er, const double[:, ::1] ec,
    const double[::1] mr, const double[::1] mc, double* w,
) noexcept nogil:
    """Fill w with exp(E ln r_ik + E ln c_jk - shift) and return ln t_ij - shift + ln(sum w).

    Returns the log of the normaliser t_ij = sum_k exp(E ln r_ik + E ln c_jk) and leaves in w
    weights proportional to the responsibilities pi_ijk, whose sum is exp(ln t_ij - shift).
    The sum of the max-shifted exponentials is used unless it underflows, then log-sum-exp.
    """
    cdef double mx = 0.0
    if _weights(&er[i, 0], &ec[j, 0], &elog_r[i, 0], &elog_c[j, 0], K, w, &mx):
        return log(w[K]) + mr[i] + mc[j]
    return mx + log(w[K])


def expected_counts(
    const idx_t[::1] indptr, const idx_t[::1] indices, const double[::1] data,
    const double[:, ::1] elog_r, const double[:, ::1] elog_c,
    double[:, ::1] z, double[::1] xlogt, double[::1] h, Py_ssize_t kk, int n_threads,
    bint accumulate=False, bint want_log=True,
):
    """One pass over the stored entries along the major axis of a compressed matrix.

    For every major index i (a row for CSR, a column for CSC) this writes

    * ``z[i, k] = sum_j x_ij pi_ijk``, the expected counts E[sum_j z_ijk] of the VBEM update
      (Sarkar 2021, the sums of E[z_ijk] after plugging in pi);
    * ``xlogt[i] = sum_j x_ij ln t_ij`` with t_ij = sum_k exp(E ln r_ik + E ln c_jk), the data
      term of the ELBO;
    * if ``kk >= 0``, ``h[i] = sum_j x_ij pi_ijk (1 - pi_ijk)`` for k = kk, the curvature term
      of the Newton solver.

    ``elog_r`` (n_major, K) and ``elog_c`` (n_minor, K) are E[ln] of the factors on each side.

    With ``accumulate``, the sums continue from the values in ``z``, ``xlogt`` and ``h``: a
    pass over the CSC copies of consecutive blocks of rows then makes, for every column, the
    additions of one pass over the whole matrix in the same order (equal to the bit).

    Without ``want_log``, ``xlogt`` is set to NaN and no logarithm is taken: a pass whose
    caller needs only the expected counts (the column pass of an iteration, the KL-NMF
    start) then costs about half as much, since one logarithm per entry costs about as much
    as the rest of the entry's work. ``z`` and ``h`` are the same to the bit either way.
    """
    cdef Py_ssize_t n = indptr.shape[0] - 1
    cdef Py_ssize_t K = elog_r.shape[1]
    cdef Py_ssize_t i, k, p
    cdef double x, lt, c, acc, pk, hh, shift
    cdef double* w
    mr_arr = np.max(elog_r, axis=1) if n > 0 else np.zeros(0)
    mc_arr = np.max(elog_c, axis=1) if elog_c.shape[0] > 0 else np.zeros(0)
    er_arr = np.exp(np.asarray(elog_r) - mr_arr[:, None])
    ec_arr = np.exp(np.asarray(elog_c) - mc_arr[:, None])
    cdef const double[::1] mr = mr_arr
    cdef const double[::1] mc = mc_arr
    cdef const double[:, ::1] er = er_arr
    cdef const double[:, ::1] ec = ec_arr
    status_arr = np.zeros(n, dtype=np.intc)
    cdef int[::1] status = status_arr
    with nogil, parallel(num_threads=n_threads):
        w = <double*> malloc((K + 1) * sizeof(double))
        for i in prange(n, schedule='static'):
            status[i] = item_status(SITE_HPMF_COUNTS, i, w != NULL)
            if status[i] != 0:
                continue
            if accumulate:
                acc = xlogt[i] if want_log else 0.0
                hh = h[i] if kk >= 0 else 0.0
            else:
                for k in range(K):
                    z[i, k] = 0.0
                acc = 0.0
                hh = 0.0
            for p in range(indptr[i], indptr[i + 1]):
                x = data[p]
                if want_log:
                    lt = _entry(i, indices[p], x, K, elog_r, elog_c, er, ec, mr, mc, w)
                    acc = acc + x * lt
                else:
                    shift = 0.0
                    _weights(&er[i, 0], &ec[indices[p], 0], &elog_r[i, 0],
                             &elog_c[indices[p], 0], K, w, &shift)
                    # an impossible entry (every weight 0) makes this infinite, as its log
                    acc = acc + x / w[K]
                c = x / w[K]
                for k in range(K):
                    z[i, k] += c * w[k]
                if kk >= 0:
                    pk = w[kk] / w[K]
                    hh = hh + x * pk * (1.0 - pk)
            xlogt[i] = acc if want_log else NAN
            if not isfinite(acc):
                status[i] = FAIL_NOT_FINITE
            if kk >= 0:
                h[i] = hh
        free(w)
    raise_for_status(status_arr, "The expected-count pass", item="index", advice=_ADVICE)


def sampled_data_term(
    const idx_t[::1] indptr, const idx_t[::1] indices, const double[::1] data,
    const double[:, :, ::1] log_r, const double[:, :, ::1] log_c, double[::1] xlogt,
    int n_threads,
):
    """``xlogt[i] = sum_s sum_j x_ij ln t_sij`` over a group of up to 4 draws of q, one pass.

    ``t_sij = sum_k exp(log_r[s, i, k] + log_c[s, j, k])`` for the draws ``log_r`` (S, n_major,
    K) and ``log_c`` (S, n_minor, K), S <= 4: the Monte Carlo term of the exact ELBO (Sarkar
    2021, eq. 32). An entry's draws share the loads of its indices and their K-term sums run
    side by side (four independent chains of additions instead of one); their logs are
    taken as the log of their product (one logarithm instead of S) while that product is a
    normal double, each on its own otherwise.
    """
    cdef Py_ssize_t S = log_r.shape[0], n = indptr.shape[0] - 1, K = log_r.shape[2]
    cdef Py_ssize_t i, j, k, p, s
    cdef double x, acc, prod, shift, lt, v0, v1, v2, v3
    cdef const double *a0
    cdef const double *a1
    cdef const double *a2
    cdef const double *a3
    cdef const double *b0
    cdef const double *b1
    cdef const double *b2
    cdef const double *b3
    cdef double* w
    if not 1 <= S <= 4:
        raise ValueError(f"sampled_data_term takes 1 to 4 draws; got {S}.")
    mr_arr = np.max(log_r, axis=2) if n > 0 and K > 0 else np.zeros((S, n))
    mc_arr = (np.max(log_c, axis=2) if log_c.shape[1] > 0 and K > 0
              else np.zeros((S, log_c.shape[1])))
    # draws beyond S repeat the last one: their sums are computed and not used
    last = [min(s_, S - 1) for s_ in range(4)]
    er_arr = np.exp(np.asarray(log_r)[last] - mr_arr[last][:, :, None])
    ec_arr = np.exp(np.asarray(log_c)[last] - mc_arr[last][:, :, None])
    cdef const double[:, ::1] mr = mr_arr
    cdef const double[:, ::1] mc = mc_arr
    cdef const double[:, :, ::1] er = er_arr
    cdef const double[:, :, ::1] ec = ec_arr
    status_arr = np.zeros(n, dtype=np.intc)
    cdef int[::1] status = status_arr
    if K == 0:
        status_arr[:] = FAIL_NOT_FINITE
    with nogil, parallel(num_threads=n_threads):
        # K weights for log-sum-exp, then the S normalisers of one entry
        w = <double*> malloc((K + 4) * sizeof(double))
        for i in prange(n, schedule='static'):
            status[i] = item_status(SITE_HPMF_SAMPLE, i, w != NULL) if K > 0 else status[i]
            if status[i] != 0:
                continue
            a0 = &er[0, i, 0]
            a1 = &er[1, i, 0]
            a2 = &er[2, i, 0]
            a3 = &er[3, i, 0]
            acc = 0.0
            for p in range(indptr[i], indptr[i + 1]):
                x = data[p]
                j = indices[p]
                b0 = &ec[0, j, 0]
                b1 = &ec[1, j, 0]
                b2 = &ec[2, j, 0]
                b3 = &ec[3, j, 0]
                v0 = 0.0
                v1 = 0.0
                v2 = 0.0
                v3 = 0.0
                for k in range(K):
                    v0 = v0 + a0[k] * b0[k]
                    v1 = v1 + a1[k] * b1[k]
                    v2 = v2 + a2[k] * b2[k]
                    v3 = v3 + a3[k] * b3[k]
                w[K] = v0
                w[K + 1] = v1
                w[K + 2] = v2
                w[K + 3] = v3
                prod = 1.0
                shift = 0.0
                for s in range(S):
                    if w[K + s] > TINY:
                        shift = shift + mr[s, i] + mc[s, j]
                    else:
                        # the shifted terms underflow: this draw's log by log-sum-exp
                        shift = shift + shifted_exp_pair(&log_r[s, i, 0], &log_c[s, j, 0], w, K)
                        v0 = 0.0
                        for k in range(K):
                            v0 = v0 + w[k]
                        w[K + s] = v0
                    prod = prod * w[K + s]
                if prod > 1e-300:
                    lt = log(prod) + shift
                else:
                    lt = shift
                    for s in range(S):
                        lt = lt + log(w[K + s])
                acc = acc + x * lt
            xlogt[i] = acc
            if not isfinite(acc):
                status[i] = FAIL_NOT_FINITE
        free(w)
    raise_for_status(status_arr, "The sampled data term", item="index", advice=_ADVICE)


def row_entry_sums(
    const idx_t[::1] indptr, const double[::1] data, double[::1] log_factorial,
    double[::1] xlogx, int n_threads,
):
    """Per major index i: ``sum_j ln Gamma(x_ij + 1)`` and ``sum_j x_ij ln x_ij`` over its
    stored entries (all positive), in their order.

    The constants of the ELBO and of ``reconstruction_err_``; their totals are sums over the
    rows, so they do not depend on how the rows are cut into blocks.
    """
    cdef Py_ssize_t n = indptr.shape[0] - 1
    cdef Py_ssize_t i, p
    cdef double a, b, x
    with nogil, parallel(num_threads=n_threads):
        for i in prange(n, schedule='static'):
            a = 0.0
            b = 0.0
            for p in range(indptr[i], indptr[i + 1]):
                x = data[p]
                a = a + lgamma(x + 1.0)
                b = b + x * log(x)
            log_factorial[i] = a
            xlogx[i] = b


def sparse_dense_product(
    const idx_t[::1] indptr, const idx_t[::1] indices, const double[::1] data,
    const double[:, ::1] Q, double[:, ::1] out, int n_threads, bint accumulate=False,
):
    """``out = X @ Q`` for the compressed X (CSR: X; CSC: X.T), a major index a thread.

    Each row of ``out`` is summed in the order of its stored entries, whatever the number of
    threads; with ``accumulate`` the sums continue from ``out`` (``out += X @ Q``, as one
    product over consecutive blocks of rows of X.T, to the bit).
    """
    cdef Py_ssize_t n = indptr.shape[0] - 1, m = Q.shape[1]
    cdef Py_ssize_t i, k, p
    cdef double x
    cdef double* acc
    cdef const double* q
    if n == 0 or m == 0:
        return
    status_arr = np.zeros(n, dtype=np.intc)
    cdef int[::1] status = status_arr
    with nogil, parallel(num_threads=n_threads):
        # a row's sums in a buffer of the thread's own, which cannot alias Q
        acc = <double*> malloc(m * sizeof(double))
        for i in prange(n, schedule='static'):
            status[i] = item_status(SITE_HPMF_COUNTS, i, acc != NULL)
            if status[i] != 0:
                continue
            for k in range(m):
                acc[k] = out[i, k] if accumulate else 0.0
            for p in range(indptr[i], indptr[i + 1]):
                x = data[p]
                q = &Q[indices[p], 0]
                for k in range(m):
                    acc[k] = acc[k] + x * q[k]
            for k in range(m):
                out[i, k] = acc[k]
        free(acc)
    raise_for_status(status_arr, "The product by the counts", item="index", advice=_ADVICE)


cdef double _row_map(
    const idx_t[::1] indptr, const idx_t[::1] indices, const double[::1] data, Py_ssize_t i,
    const double[:, ::1] elog_f, const double[:, ::1] ec, const double[::1] mc,
    const double* a, const double* log_beta, Py_ssize_t K, const double* alpha,
    double* out, double* xlogt, double* w, double* zr, double* el, double* e,
) noexcept nogil:
    """One step of row i's fixed point from the shapes ``alpha``: q(z_ij.) <- Multinomial(
    x_ij, pi_ij.), then ``out`` <- a + sum_j E[z_ij.]; writes sum_j x_ij ln t_ij at
    ``alpha`` and returns the largest relative change of the shapes."""
    cdef Py_ssize_t k, p, j
    cdef double x, lt, c, acc, mx, s, v, delta, mi
    # E[ln l_ik] and its max-shifted exponential for the current shapes
    mi = -1e308
    for k in range(K):
        el[k] = digamma(alpha[k]) - log_beta[k]
        if el[k] > mi:
            mi = el[k]
    for k in range(K):
        e[k] = exp(el[k] - mi)
        zr[k] = 0.0
    acc = 0.0
    for p in range(indptr[i], indptr[i + 1]):
        x = data[p]
        j = indices[p]
        s = 0.0
        for k in range(K):
            w[k] = e[k] * ec[j, k]
            s = s + w[k]
        if s > TINY:
            lt = log(s) + mi + mc[j]
        else:
            mx = shifted_exp_pair(el, &elog_f[j, 0], w, K)
            s = 0.0
            for k in range(K):
                s = s + w[k]
            lt = mx + log(s)
        acc = acc + x * lt
        c = x / s
        for k in range(K):
            zr[k] = zr[k] + c * w[k]
    xlogt[0] = acc
    delta = 0.0
    for k in range(K):
        v = a[k] + zr[k]
        s = fabs(v - alpha[k]) / v
        if s > delta:
            delta = s
        out[k] = v
    return delta


cdef int _regress_row(
    const idx_t[::1] indptr, const idx_t[::1] indices, const double[::1] data, Py_ssize_t i,
    const double[:, ::1] elog_f, const double[:, ::1] ec, const double[::1] mc,
    const double* a, const double* b, const double* beta, const double* log_beta,
    Py_ssize_t K, double* alpha, double* xlogt, int max_iter, double tol, double* w,
    double* zr, double* el, double* e, double* t1, double* t2, double* r,
) noexcept nogil:
    """Iterate row i's shapes ``alpha`` to a fixed point; write sum_j x_ij ln t_ij at it.

    The fixed point of q(z_ij.) <- Multinomial(x_ij, pi_ij.) and q(l_ik) <- Gamma(a_k +
    sum_j E[z_ijk], beta_k) (Sarkar 2021, the per-row subproblem) converges linearly, and
    slowly where components overlap: hundreds of steps to a relative change of 1e-10. Its
    steps are extrapolated by SQUAREM (Varadhan & Roland 2008, "Simple and globally
    convergent methods for accelerating the convergence of any EM algorithm", scheme S3,
    steps of length at least 1): two steps t0 -> t1 -> t2 give r = t1 - t0 and v = t2 - 2 t1
    + t0, the point t0 - 2 s r + s^2 v with s = -|r| / |v| is taken through one more step,
    and kept only if the row's bound there is at least the bound at t0, else t2 is (the
    global safeguard of their section 5), so the bound never decreases. The iteration stops
    when a plain step changes no shape by more than ``tol`` (relative), as without the
    extrapolation; returns the number of steps (passes over the row).
    """
    cdef Py_ssize_t k
    cdef int it = 0
    cdef double delta, sr, sv, step, x0, xp, u
    cdef bint feasible
    while True:
        # t0 = alpha -> t1; the bound at t0 from its xlogt
        delta = _row_map(indptr, indices, data, i, elog_f, ec, mc, a, log_beta, K, alpha, t1,
                         &x0, w, zr, el, e)
        it = it + 1
        if delta <= tol or it >= max_iter:
            break
        delta = _row_map(indptr, indices, data, i, elog_f, ec, mc, a, log_beta, K, t1, t2,
                         xlogt, w, zr, el, e)
        it = it + 1
        if delta <= tol or it >= max_iter:
            for k in range(K):
                t1[k] = t2[k]
            break
        sr = 0.0
        sv = 0.0
        for k in range(K):
            u = t2[k] - 2.0 * t1[k] + alpha[k]
            sr = sr + (t1[k] - alpha[k]) * (t1[k] - alpha[k])
            sv = sv + u * u
        step = -sqrt(sr / sv) if sv > 0.0 else -1.0
        if step > -1.0 or not isfinite(step):
            step = -1.0
        if step == -1.0:  # the extrapolation is t2 itself
            for k in range(K):
                alpha[k] = t2[k]
            continue
        # the extrapolated point in r (t1 is kept for the fallback to t2). A component
        # pushed to its prior's shape is switched off, a fixed point the iteration cannot
        # leave, which the plain steps need not reach: while the point takes a component
        # below half its excess over the prior at t2, the step is shortened towards the
        # plain one (Varadhan & Roland's backtracking into the map's range, section 6).
        # Without this, 3 of 150 training rows of a simulation ended at a lower bound.
        while True:
            feasible = True
            for k in range(K):
                u = t2[k] - 2.0 * t1[k] + alpha[k]
                r[k] = alpha[k] - 2.0 * step * (t1[k] - alpha[k]) + step * step * u
                if not r[k] - a[k] >= 0.5 * (t2[k] - a[k]):
                    feasible = False
            if feasible or step == -1.0:
                break
            step = 0.5 * (step - 1.0)
            if step > -1.01:
                step = -1.0
        if step == -1.0:
            for k in range(K):
                alpha[k] = t2[k]
            continue
        # the bound at t0 (x0) and at the extrapolated point (xp, from its step)
        delta = _row_map(indptr, indices, data, i, elog_f, ec, mc, a, log_beta, K, r, t1, &xp,
                         w, zr, el, e)
        it = it + 1
        if (_row_bound(r, xp, a, b, beta, log_beta, K)
                >= _row_bound(alpha, x0, a, b, beta, log_beta, K)):
            for k in range(K):
                alpha[k] = t1[k]
        else:
            for k in range(K):
                alpha[k] = t2[k]
        if it >= max_iter:
            for k in range(K):
                t1[k] = alpha[k]
            break
    # the shapes after the last plain step, and sum_j x_ij ln t_ij there
    for k in range(K):
        alpha[k] = t1[k]
    _row_map(indptr, indices, data, i, elog_f, ec, mc, a, log_beta, K, alpha, t2, xlogt, w, zr,
             el, e)
    return it


cdef double _row_bound(
    const double* alpha, double xlogt, const double* a, const double* b, const double* beta,
    const double* log_beta, Py_ssize_t K,
) noexcept nogil:
    """Row i's ELBO without its constant -sum_j ln Gamma(x_ij + 1): sum_j x_ij ln t_ij
    - sum_k E[l_ik] sum_j E[f_jk] - KL(q(l_i.) || p(l_i.)), with q(l_ik) = Gamma(alpha_k,
    beta_k) and beta_k = b_k + sum_j E[f_jk]."""
    cdef Py_ssize_t k
    cdef double v = xlogt, al
    for k in range(K):
        al = alpha[k]
        v -= al / beta[k] * (beta[k] - b[k])
        v -= ((al - a[k]) * digamma(al) - lgamma(al) + lgamma(a[k])
              + a[k] * (log_beta[k] - log(b[k])) + al * (b[k] - beta[k]) / beta[k])
    return v


def transform_rows(
    const idx_t[::1] indptr, const idx_t[::1] indices, const double[::1] data,
    const double[:, ::1] elog_f, const double[::1] a, const double[::1] b,
    const double[::1] beta, double[:, ::1] alpha, double[::1] xlogt, int[::1] n_iter,
    int max_iter, double tol, double search_share, int n_threads,
):
    """Alternating Poisson regression of each row on fixed q(F) (Sarkar 2021, the per-row
    subproblem), at the best of the fixed points it finds.

    Each row iterates from the shapes in ``alpha`` to a fixed point. The per-row bound has
    several: a component that holds a small share of a row's counts can be switched off
    (its shape at the prior's, the counts explained by the others) for a higher bound, and
    the iteration cannot leave either state by itself. So every component that holds at
    most ``search_share`` of the row's counts is tried switched off, the iteration run again
    from there, and the result kept if its bound is higher; rounds repeat until none is
    kept. ``alpha`` holds the starting shapes on entry and the fitted shapes on exit;
    ``xlogt[i]`` is sum_j x_ij ln t_ij at them; ``n_iter[i]`` counts all iterations of the
    row. ``beta = b + sum_j E[f_j.]`` is fixed. The rows are independent: row i's result
    does not depend on the other rows or on the number of threads.
    """
    cdef Py_ssize_t n = indptr.shape[0] - 1
    cdef Py_ssize_t K = elog_f.shape[1]
    cdef Py_ssize_t i, k, q, p
    cdef int it, rounds
    cdef bint kept
    cdef double total, bound, trial, xl
    cdef double* w
    cdef double* zr
    cdef double* el
    cdef double* e
    cdef double* saved
    cdef double* t1
    cdef double* t2
    cdef double* r
    log_beta_arr = np.log(np.asarray(beta))
    cdef const double[::1] log_beta = log_beta_arr
    mc_arr = np.max(elog_f, axis=1) if elog_f.shape[0] > 0 else np.zeros(0)
    ec_arr = np.exp(np.asarray(elog_f) - mc_arr[:, None])
    cdef const double[::1] mc = mc_arr
    cdef const double[:, ::1] ec = ec_arr
    status_arr = np.zeros(n, dtype=np.intc)
    cdef int[::1] status = status_arr
    with nogil, parallel(num_threads=n_threads):
        w = <double*> malloc((K + 1) * sizeof(double))
        zr = <double*> malloc(K * sizeof(double))
        el = <double*> malloc(K * sizeof(double))
        e = <double*> malloc(K * sizeof(double))
        saved = <double*> malloc(K * sizeof(double))
        t1 = <double*> malloc(3 * K * sizeof(double))
        t2 = t1 + K
        r = t1 + 2 * K
        for i in prange(n, schedule='dynamic'):
            status[i] = item_status(SITE_HPMF_TRANSFORM, i, w != NULL and zr != NULL
                                    and el != NULL and e != NULL and saved != NULL
                                    and t1 != NULL)
            if status[i] != 0:
                continue
            it = _regress_row(indptr, indices, data, i, elog_f, ec, mc, &a[0], &b[0], &beta[0],
                              &log_beta[0], K, &alpha[i, 0], &xlogt[i], max_iter, tol, w, zr,
                              el, e, t1, t2, r)
            bound = _row_bound(&alpha[i, 0], xlogt[i], &a[0], &b[0], &beta[0],
                               &log_beta[0], K)
            total = 0.0
            for p in range(indptr[i], indptr[i + 1]):
                total = total + data[p]
            rounds = 0
            kept = True
            while kept and rounds < K and isfinite(bound):
                kept = False
                rounds = rounds + 1
                for k in range(K):
                    # a component already off (or holding the whole row) is not tried
                    if not (1e-3 < alpha[i, k] - a[k] <= search_share * total):
                        continue
                    for q in range(K):
                        saved[q] = alpha[i, q]
                    alpha[i, k] = a[k]
                    xl = 0.0  # assigned in the loop, so private to each thread
                    it = it + _regress_row(indptr, indices, data, i, elog_f, ec, mc, &a[0],
                                           &b[0], &beta[0], &log_beta[0], K, &alpha[i, 0],
                                           &xl, max_iter, tol, w, zr, el, e, t1, t2, r)
                    trial = _row_bound(&alpha[i, 0], xl, &a[0], &b[0], &beta[0],
                                       &log_beta[0], K)
                    if trial > bound + 1e-9 * fabs(bound):
                        bound = trial
                        xlogt[i] = xl
                        kept = True
                    else:
                        for q in range(K):
                            alpha[i, q] = saved[q]
            n_iter[i] = it
            if not isfinite(xlogt[i]):
                status[i] = FAIL_NOT_FINITE
        free(w)
        free(zr)
        free(el)
        free(e)
        free(saved)
        free(t1)
    raise_for_status(status_arr, "The transform", item="row", advice=_ADVICE)


# ---------------------------------------------------------------------------------------------
# Pathwise (reparameterised) gradients of Gamma samples
# ---------------------------------------------------------------------------------------------

cdef inline double dlog_gamma_dshape(double eps, double alpha) noexcept nogil:
    """d ln(eps) / d alpha for eps ~ Gamma(alpha, 1), at a fixed value of its CDF.

    This is the reparameterisation gradient whatever sampler drew eps. Implicit differentiation of the CDF P(alpha, eps) = u gives
    d eps / d alpha = -(dP/dalpha) / p(eps; alpha). With the series
    P(alpha, x) = x^alpha e^-x sum_n x^n / Gamma(alpha + n + 1), the common factor cancels:
    d ln eps / d alpha = -sum_n c_n (ln x - psi(alpha + n + 1)),
    c_0 = 1 / alpha, c_n = c_{n-1} x / (alpha + n) (derivation in doc/hpmf.rst).
    In the far upper tail, and for very large shapes, the Wilson-Hilferty transform
    eps = alpha (1 - 1/(9 alpha) + z / (3 sqrt(alpha)))^3 is differentiated at fixed z.
    """
    cdef double lx, c, s, psi, term, u, du, z, sa
    cdef int n, nmax
    if eps <= 0.0:
        return 1.0 / alpha
    sa = sqrt(alpha)
    if alpha < 1e4 and eps < alpha + 6.0 * sa + 10.0:
        lx = log(eps)
        nmax = <int>(eps - alpha + 12.0 * sqrt(eps + 1.0) + 40.0)
        if nmax < 40:
            nmax = 40
        c = 1.0 / alpha
        psi = digamma(alpha + 1.0)
        s = c * (lx - psi)
        for n in range(1, nmax):
            c = c * eps / (alpha + n)
            psi = psi + 1.0 / (alpha + n)
            term = c * (lx - psi)
            s = s + term
            if n > eps - alpha and fabs(term) < 1e-17 * fabs(s):
                break
        return -s
    u = cbrt(eps / alpha)
    z = (u - 1.0 + 1.0 / (9.0 * alpha)) * 3.0 * sa
    du = 1.0 / (9.0 * alpha * alpha) - z / (6.0 * alpha * sa)
    return 1.0 / alpha + 3.0 * du / u


def _dlog_gamma_dshape_for_tests(const double[::1] eps, const double[::1] alpha):
    """d ln(eps) / d alpha of Gamma(alpha, 1) samples (reparameterisation gradient)."""
    out = np.empty(eps.shape[0])
    cdef double[::1] o = out
    cdef Py_ssize_t i
    for i in range(eps.shape[0]):
        o[i] = dlog_gamma_dshape(eps[i], alpha[i])
    return out


def sample_log_gamma(
    const double[:, ::1] alpha, const double[::1] log_rate, const uint64_t[::1] seeds,
    double[:, ::1] log_sample, double[:, ::1] dlog_dalpha, bint want_grad, int n_threads,
):
    """Draw ln l_ik for l_ik ~ Gamma(alpha_ik, rate_k), and d ln l_ik / d alpha_ik if asked.

    Row i draws from its own stream seeded by ``seeds[i]``. Shapes below one use
    Gamma(alpha) = Gamma(alpha + 1) U^(1/alpha) in log space, so tiny shapes never underflow.
    """
    cdef Py_ssize_t n = alpha.shape[0], K = alpha.shape[1]
    cdef Py_ssize_t i, k
    cdef Rng* r
    status_arr = np.zeros(n, dtype=np.intc)
    cdef int[::1] status = status_arr
    with nogil, parallel(num_threads=n_threads):
        r = <Rng*> malloc(sizeof(Rng))
        for i in prange(n, schedule='static'):
            status[i] = item_status(SITE_HPMF_SAMPLE, i, r != NULL)
            if status[i] == 0:
                _draw_row(r, seeds[i], i, K, alpha, log_rate, log_sample, dlog_dalpha,
                          want_grad)
        free(r)
    raise_for_status(status_arr, "The Gamma draws", item="index", advice=_ADVICE)


cdef inline void _draw_row(
    Rng* r, uint64_t seed, Py_ssize_t i, Py_ssize_t K, const double[:, ::1] alpha,
    const double[::1] log_rate, double[:, ::1] log_sample, double[:, ::1] dlog_dalpha,
    bint want_grad,
) noexcept nogil:
    cdef Py_ssize_t k
    cdef double g, lg, al
    rng_seed(r, seed)
    for k in range(K):
        al = alpha[i, k]
        if al < 1.0:
            g = rng_gamma(r, al + 1.0)
            lg = log(g) + log(rng_uniform(r)) / al
            # d ln eps / d alpha of eps = g U^(1/alpha): chain through g's shape, plus
            # -ln(U) / alpha^2 = (ln g - ln eps) / alpha
            if want_grad:
                dlog_dalpha[i, k] = dlog_gamma_dshape(g, al + 1.0) + (log(g) - lg) / al
        else:
            g = rng_gamma(r, al)
            lg = log(g)
            if want_grad:
                dlog_dalpha[i, k] = dlog_gamma_dshape(g, al)
        log_sample[i, k] = lg - log_rate[k]
