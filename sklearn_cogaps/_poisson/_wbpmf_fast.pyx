"""O(nnz) sweeps of WeightedBackgroundPMF over the non-zeros of a CSR matrix.

``B_ijk = exp(lu_ik + lv_jk)`` with ``lu_ik = log w_k + E[log l_ik]`` and ``lv_jk = E[log f_jk]``
(Wang, EBPMF-WBG, eq. 3.7). The fit's sweeps recompute ``B_ij = sum_k B_ijk`` at every
non-zero from the current factors; the regression of new rows, which changes one topic of a
row at a time, makes it at the start of each sweep of the row and carries it through the
sweep by the one term that changed (recomputed whole where that term would cancel). It is
stabilised as in section 5 of the paper, with the maxima taken per row and per column: ``U_ik
= exp(lu_ik - mu_i)`` and ``V_jk = exp(lv_jk - mv_j)`` (``mu_i = max_k lu_ik``, ``mv_j = max_k
lv_jk``), so
``B_ij = exp(mu_i + mv_j) sum_k U_ik V_jk`` is a sum of positive terms below 1, computed
without exponentials. Where that sum is tiny (the row's and the column's maxima sit on
different components), the entry falls back to the per-entry log-sum-exp of eqs. 5.1-5.4.

Rows are split into a fixed number of chunks, independent of the thread count; each chunk
writes its own partial column sums and partial objective, added afterwards in chunk order,
so the results are bit-identical for any number of threads. A chunk or row whose sum is not
finite records it in its own status slot, raised after the parallel loop whichever thread
met it (_utils/_status.pxd).
"""

from cython.parallel cimport parallel, prange
from libc.math cimport exp, fabs, log, isfinite, INFINITY
from libc.stdlib cimport free, malloc

import numpy as np

from .._utils._logsumexp cimport log_sum_exp_pair
from .._utils._special cimport lgamma
from ._ebpm_one cimport component_loglik_one, mixture_posterior_one
from .._utils._status cimport (FAIL_NOT_FINITE, SITE_WBPMF_COUNTS, SITE_WBPMF_DATA_TERM,
                              SITE_WBPMF_ROWS, item_status)
from .._utils._status import raise_for_status

# What to do when a sweep fails, for the shared messages of _utils/_status.pyx.
_ADVICE = {
    FAIL_NOT_FINITE: (
        "A sum over the counts is NaN or infinite: the counts are too large for double "
        "precision. Rescale X (for example divide it by its largest entry and round)."
    ),
}

ctypedef Py_ssize_t intp_t

# The CSR's own index type (32-bit for most matrices): its arrays are read without a copy.
ctypedef fused idx_t:
    int
    long long

# Below this, sum_k U_ik V_jk is recomputed in log space (terms lost to underflow are then
# below 1e-200 of the largest).
cdef double TINY = 1e-100


cdef inline double _scaled_dot(const double* u, const double* v, intp_t K) noexcept nogil:
    cdef double dot = 0.0
    cdef intp_t k
    for k in range(K):
        dot = dot + u[k] * v[k]
    return dot


cdef inline double _log_b(const double* u, const double* v, const double* lu,
                          const double* lv, double mu, double mv, intp_t K) noexcept nogil:
    """log B_ij."""
    cdef double dot = _scaled_dot(u, v, K)
    if dot > TINY:
        return mu + mv + log(dot)
    return log_sum_exp_pair(lu, lv, K)


cdef inline double _zeta(const double* u, const double* v, const double* lu,
                         const double* lv, intp_t k, intp_t K) noexcept nogil:
    """zeta_ijk = B_ijk / B_ij (eq. 3.11), 0 where B_ij = 0."""
    cdef double dot = _scaled_dot(u, v, K), lse
    if dot > TINY:
        return u[k] * v[k] / dot
    lse = log_sum_exp_pair(lu, lv, K)
    if lse == -INFINITY:
        return 0.0
    return exp(lu[k] + lv[k] - lse)


cdef inline double _row_exponentials(const double* logw, const double* elogl, intp_t K,
                                     double* lu, double* U) noexcept nogil:
    """A row's ``lu_ik = log w_k + E[log l_ik]`` and ``U_ik = exp(lu_ik - mu_i)``; returns
    ``mu_i = max_k lu_ik`` (0 where every lu_ik is -inf)."""
    cdef double mu = -INFINITY
    cdef intp_t a
    for a in range(K):
        lu[a] = logw[a] + elogl[a]
        if lu[a] > mu:
            mu = lu[a]
    if not isfinite(mu):
        mu = 0.0
    for a in range(K):
        U[a] = exp(lu[a] - mu)
    return mu


def denominators(
    const idx_t[::1] indptr,
    const idx_t[::1] indices,
    const double[:, ::1] U,
    const double[:, ::1] V,
    double[::1] D,
    int n_threads,
):
    """``D[ptr] = sum_k U_ik V_jk`` at every stored entry (``B_ij`` without its scales)."""
    cdef intp_t n = indptr.shape[0] - 1
    cdef intp_t K = U.shape[1]
    cdef intp_t i, ptr
    cdef const double* Ub
    cdef const double* Vb
    cdef const idx_t* ind
    cdef double* Dp
    if D.shape[0] == 0 or K == 0:
        return
    Ub = &U[0, 0]
    Vb = &V[0, 0]
    ind = &indices[0]
    Dp = &D[0]
    for i in prange(n, nogil=True, schedule="static", num_threads=n_threads):
        for ptr in range(indptr[i], indptr[i + 1]):
            Dp[ptr] = _scaled_dot(Ub + i * K, Vb + ind[ptr] * K, K)


cdef inline double _follow(double D, double old, double new, const double* u,
                          const double* v, intp_t K) noexcept nogil:
    """``D_ij`` after one topic's term changed from ``old`` to ``new``: by that term, or
    whole where it would cancel more than 4 bits of ``D_ij``."""
    cdef double d = D + (new - old)
    if d > TINY and D + old + new <= 16.0 * d:
        return d
    return _scaled_dot(u, v, K)


cdef inline double _expected_count(double x, double D, const double* u, const double* v,
                                   const double* lu, const double* lv, intp_t k,
                                   intp_t K) noexcept nogil:
    """E[Z_ijk] = X_ij U_ik V_jk / D_ij, the log-space zeta where D_ij is tiny."""
    if D > TINY:
        return x * (u[k] * v[k] / D)
    return x * _zeta(u, v, lu, lv, k, K)


def topic_counts(
    const idx_t[::1] indptr,
    const idx_t[::1] indices,
    const double[::1] data,
    const double[:, ::1] U,
    const double[:, ::1] V,
    const double[:, ::1] lu,
    const double[:, ::1] lv,
    double[::1] D,
    intp_t k,
    double[::1] row_sums,
    double[:, ::1] col_partial,
    intp_t changed,
    const double[::1] u_old,
    const double[::1] v_old,
    const unsigned char[::1] row_new,
    const unsigned char[::1] col_new,
    const intp_t[::1] starts,
    int n_threads,
):
    """Row sums and per-chunk column sums of ``E[Z_ijk] = X_ij U_ik V_jk / D_ij`` for one
    ``k`` (the log-space zeta where ``D_ij`` is tiny).

    When ``changed >= 0``, topic ``changed``'s exponentials went from ``u_old``, ``v_old``
    to ``U[:, changed]``, ``V[:, changed]`` since ``D`` was made: each ``D_ij`` first follows
    (one term, or whole where the row or the column was restabilised, ``row_new``,
    ``col_new``), in the same pass. ``row_sums`` (n_samples,) is overwritten;
    ``col_partial`` (n_chunks, n_features) must be zero on entry and receives each chunk's
    column sums (sum over axis 0 for the total); chunk ``c`` is the rows ``starts[c]`` to
    ``starts[c + 1]``.

    The sweep is bound by its instructions, not by memory (it runs twice as fast on two
    threads as on one): the arrays are read through pointers set once, and the test of
    which path a row takes is made once per row, not once per entry.
    """
    cdef intp_t K = U.shape[1]
    cdef intp_t n_chunks = col_partial.shape[0]
    cdef intp_t c, i, ptr, j, lo, hi
    cdef double z, acc, ut_old, ut_new
    cdef const double* Ub
    cdef const double* Vb
    cdef const double* lub
    cdef const double* lvb
    cdef const double* x
    cdef const idx_t* ind
    cdef double* Dp
    cdef double* colp
    cdef const double* u
    cdef const double* v
    status_arr = np.zeros(n_chunks, dtype=np.intc)
    cdef int[::1] status = status_arr
    if data.shape[0] == 0 or K == 0:
        for i in range(row_sums.shape[0]):
            row_sums[i] = 0.0
        return
    Ub = &U[0, 0]
    Vb = &V[0, 0]
    lub = &lu[0, 0]
    lvb = &lv[0, 0]
    x = &data[0]
    ind = &indices[0]
    Dp = &D[0]
    for c in prange(n_chunks, nogil=True, schedule="static", num_threads=n_threads):
        status[c] = item_status(SITE_WBPMF_COUNTS, c, True)
        if status[c] != 0:
            continue
        lo = starts[c]
        hi = starts[c + 1]
        colp = &col_partial[c, 0]
        for i in range(lo, hi):
            acc = 0.0
            u = Ub + i * K
            if changed < 0:
                for ptr in range(indptr[i], indptr[i + 1]):
                    j = ind[ptr]
                    z = _expected_count(x[ptr], Dp[ptr], u, Vb + j * K, lub + i * K,
                                        lvb + j * K, k, K)
                    acc = acc + z
                    colp[j] += z
            elif row_new[i]:
                for ptr in range(indptr[i], indptr[i + 1]):
                    j = ind[ptr]
                    v = Vb + j * K
                    Dp[ptr] = _scaled_dot(u, v, K)
                    z = _expected_count(x[ptr], Dp[ptr], u, v, lub + i * K, lvb + j * K, k, K)
                    acc = acc + z
                    colp[j] += z
            else:
                ut_old = u_old[i]
                ut_new = u[changed]
                for ptr in range(indptr[i], indptr[i + 1]):
                    j = ind[ptr]
                    v = Vb + j * K
                    if col_new[j]:
                        Dp[ptr] = _scaled_dot(u, v, K)
                    else:
                        Dp[ptr] = _follow(Dp[ptr], ut_old * v_old[j], ut_new * v[changed], u,
                                          v, K)
                    z = _expected_count(x[ptr], Dp[ptr], u, v, lub + i * K, lvb + j * K, k, K)
                    acc = acc + z
                    colp[j] += z
            row_sums[i] = acc
            if not isfinite(acc):
                status[c] = FAIL_NOT_FINITE
    raise_for_status(status_arr, "The expected-count sweep", item="chunk", advice=_ADVICE)


def row_expected_counts(
    const idx_t[::1] indptr,
    const idx_t[::1] indices,
    const double[::1] data,
    const double[::1] logw,
    const double[:, ::1] Elogl,
    const double[:, ::1] V,
    const double[:, ::1] lv,
    double[:, ::1] out,
    int n_threads,
):
    """``out[i, k] = sum_j E[Z_ijk]`` for every k in one sweep (each B_ij made once), as
    :func:`topic_counts` makes the rows' sums of one k."""
    cdef intp_t n = indptr.shape[0] - 1
    cdef intp_t K = V.shape[1]
    cdef intp_t i, ptr, j, k
    cdef double dot, x
    cdef double* lu
    cdef double* U
    status_arr = np.zeros(n, dtype=np.intc)
    cdef int[::1] status = status_arr
    with nogil, parallel(num_threads=n_threads):
        lu = <double*> malloc(sizeof(double) * 2 * K)
        U = lu + K
        for i in prange(n, schedule="static"):
            status[i] = item_status(SITE_WBPMF_COUNTS, i, lu != NULL)
            if status[i] != 0:
                continue
            _row_exponentials(&logw[0], &Elogl[i, 0], K, lu, U)
            for k in range(K):
                out[i, k] = 0.0
            for ptr in range(indptr[i], indptr[i + 1]):
                j = indices[ptr]
                dot = _scaled_dot(U, &V[j, 0], K)
                if dot > TINY:
                    x = data[ptr] / dot
                    for k in range(K):
                        out[i, k] += x * (U[k] * V[j, k])
                else:
                    for k in range(K):
                        out[i, k] += data[ptr] * _zeta(U, &V[j, 0], lu, &lv[j, 0], k, K)
            for k in range(K):
                if not isfinite(out[i, k]):
                    status[i] = FAIL_NOT_FINITE
        free(lu)
    raise_for_status(status_arr, "The expected-count sweep", item="row", advice=_ADVICE)


def data_term(
    const idx_t[::1] indptr,
    const idx_t[::1] indices,
    const double[::1] data,
    const double[:, ::1] U,
    const double[:, ::1] V,
    const double[:, ::1] lu,
    const double[:, ::1] lv,
    const double[::1] mu,
    const double[::1] mv,
    double[::1] row_terms,
    int n_threads,
):
    """Per-row ``sum_j X_ij log B_ij`` over the non-zeros (the sparse part of eq. 3.20)."""
    cdef intp_t n = indptr.shape[0] - 1
    cdef intp_t K = U.shape[1]
    cdef intp_t i, ptr, j
    cdef double acc, mu_i
    cdef const double* Ub
    cdef const double* Vb
    cdef const double* lub
    cdef const double* lvb
    cdef const double* x
    cdef const double* mvp
    cdef const idx_t* ind
    status_arr = np.zeros(n, dtype=np.intc)
    cdef int[::1] status = status_arr
    if data.shape[0] == 0 or K == 0:
        for i in range(n):
            row_terms[i] = 0.0
        return
    Ub = &U[0, 0]
    Vb = &V[0, 0]
    lub = &lu[0, 0]
    lvb = &lv[0, 0]
    x = &data[0]
    mvp = &mv[0]
    ind = &indices[0]
    for i in prange(n, nogil=True, schedule="static", num_threads=n_threads):
        status[i] = item_status(SITE_WBPMF_DATA_TERM, i, True)
        if status[i] != 0:
            continue
        acc = 0.0
        mu_i = mu[i]
        for ptr in range(indptr[i], indptr[i + 1]):
            j = ind[ptr]
            acc = acc + x[ptr] * _log_b(Ub + i * K, Vb + j * K, lub + i * K, lvb + j * K,
                                        mu_i, mvp[j], K)
        row_terms[i] = acc
        if not isfinite(acc):
            status[i] = FAIL_NOT_FINITE
    raise_for_status(status_arr, "The data term", item="row", advice=_ADVICE)


def regress_rows(
    const idx_t[::1] indptr,
    const idx_t[::1] indices,
    const double[::1] data,
    const double[:, ::1] V,
    const double[:, ::1] lv,
    const double[::1] logw,
    const double[::1] colw,
    const double[::1] log_pi0,
    const double[:, ::1] log_weights,
    const double[:, ::1] shape,
    const double[:, ::1] rate,
    const double[:, ::1] lgamma_shape,
    const double[:, ::1] log_rate,
    const intp_t[::1] n_mix,
    const double[::1] x_rows,
    double[::1] l0,
    double[:, ::1] El,
    double[:, ::1] Elogl,
    double[:, ::1] kl,
    int max_iter,
    double tol,
    int n_threads,
):
    """Coordinate ascent on ``l0_i`` and ``q(l_i)`` of every row, the features held fixed.

    For each row, in turn for k = 1..K: the row's expected counts ``y_ik = sum_j X_ij
    zeta_ijk`` (eq. 3.11-3.12, with the row's current loadings), then ``q(l_ik)`` as the
    posterior of ``y_ik ~ Poisson(s l_ik)``, ``s = colw_k l0_i``, under the fixed prior
    ``g_L,k`` (``n_mix[k]`` Gamma components of positive weight, the first of each row of
    ``log_weights``, ``shape``, ``rate``, ``lgamma_shape``, ``log_rate``, and the atom ``log_pi0[k]``); then
    ``l0_i`` (eq. 3.16). Until ``max_i |l0 E[l_i] - previous| <= tol max_i |l0 E[l_i]|`` or
    ``max_iter`` sweeps. ``V`` and ``lv`` are the features' stabilised exponentials and
    E[log f]; ``logw`` and ``colw`` hold ``log w_k`` and ``w_k sum_j f0_j E[f_jk]``. ``l0``,
    ``El``, ``Elogl`` hold the start on entry and the result on exit; ``kl`` receives
    ``E_q[log p(y_ik | l_ik)] - log p(y_ik)``. Rows are independent: a row's result does not
    depend on the other rows or on the number of threads.
    """
    cdef intp_t n = indptr.shape[0] - 1
    cdef intp_t K = V.shape[1]
    cdef intp_t i, k, a, q, j, lo, nnz, it
    cdef intp_t max_nnz = 0
    cdef double mu, top, y, s, log_s, m, ml, lp, change, scale, v, den, u_new, du, t, d_new
    cdef double* lu
    cdef double* U
    cdef double* old
    cdef double* ll
    cdef double* D
    cdef intp_t m_max = shape.shape[1]
    status_arr = np.zeros(n, dtype=np.intc)
    cdef int[::1] status = status_arr
    for i in range(n):
        if indptr[i + 1] - indptr[i] > max_nnz:
            max_nnz = indptr[i + 1] - indptr[i]
    with nogil, parallel(num_threads=n_threads):
        lu = <double*> malloc(sizeof(double) * (3 * K + m_max + 1 + max_nnz))
        U = lu + K
        old = U + K
        ll = old + K
        D = ll + m_max + 1
        for i in prange(n, schedule="dynamic"):
            status[i] = item_status(SITE_WBPMF_ROWS, i, lu != NULL)
            if status[i] != 0:
                continue
            lo = indptr[i]
            nnz = indptr[i + 1] - lo
            for it in range(max_iter):
                for a in range(K):
                    old[a] = l0[i] * El[i, a]
                # The row's exponentials and its denominators D_j = sum_a U_a V_ja, made from
                # the loadings at the start of every sweep; within the sweep only U_k changes
                # after topic k's update, so D_j follows by one term, recomputed whole where
                # that term would cancel more than 4 bits of D_j.
                mu = _row_exponentials(&logw[0], &Elogl[i, 0], K, lu, U)
                for q in range(nnz):
                    D[q] = _scaled_dot(U, &V[indices[lo + q], 0], K)
                for k in range(K):
                    y = 0.0
                    for q in range(nnz):
                        j = indices[lo + q]
                        if D[q] > TINY:
                            y = y + data[lo + q] * (U[k] * V[j, k] / D[q])
                        else:
                            y = y + data[lo + q] * _zeta(U, &V[j, 0], lu, &lv[j, 0], k, K)
                    s = colw[k] * l0[i]
                    log_s = log(s) if y > 0 else 0.0
                    # The marginals without lgamma(y + 1): common to the components and to
                    # log p(y), it cancels from the posterior and from the KL.
                    for a in range(n_mix[k]):
                        ll[a] = component_loglik_one(y, s, log_s, 0.0, shape[k, a], rate[k, a],
                                                     log_rate[k, a], lgamma_shape[k, a])
                    m = 0.0  # assigned in the loop, so private to each thread (as ml and lp)
                    ml = 0.0
                    lp = 0.0
                    mixture_posterior_one(y, s, log_pi0[k], &log_weights[k, 0], &shape[k, 0],
                                          &rate[k, 0], ll, n_mix[k], &m, &ml, &lp)
                    El[i, k] = m
                    Elogl[i, k] = ml
                    # E_q[log p(y | s l)] - log p(y): the KL of q(l_ik) (eq. 4.6)
                    v = -s * m
                    if y > 0:
                        v = v + y * (log_s + ml)
                    kl[i, k] = v - lp
                    # topic k's new exponential; the row is restabilised if its maximum moves
                    # by more than e^30 (U_k stays far from overflow and underflow)
                    lu[k] = logw[k] + ml
                    top = -INFINITY
                    for a in range(K):
                        if lu[a] > top:
                            top = lu[a]
                    if isfinite(top) and fabs(top - mu) > 30.0:
                        mu = _row_exponentials(&logw[0], &Elogl[i, 0], K, lu, U)
                        for q in range(nnz):
                            D[q] = _scaled_dot(U, &V[indices[lo + q], 0], K)
                        continue
                    u_new = exp(lu[k] - mu)
                    du = u_new - U[k]
                    U[k] = u_new
                    if du != 0.0:
                        for q in range(nnz):
                            j = indices[lo + q]
                            t = du * V[j, k]
                            d_new = D[q] + t
                            if d_new > TINY and D[q] + fabs(t) <= 16.0 * d_new:
                                D[q] = d_new
                            else:
                                D[q] = _scaled_dot(U, &V[j, 0], K)
                den = 0.0
                for a in range(K):
                    den = den + El[i, a] * colw[a]
                l0[i] = x_rows[i] / den if x_rows[i] > 0 else 0.0
                change = 0.0
                scale = 0.0
                for a in range(K):
                    v = l0[i] * El[i, a]
                    if fabs(v - old[a]) > change:
                        change = fabs(v - old[a])
                    if fabs(v) > scale:
                        scale = fabs(v)
                if change <= tol * scale:
                    break
            if not isfinite(l0[i]):
                status[i] = FAIL_NOT_FINITE
        free(lu)
    raise_for_status(status_arr, "The regression of new rows", item="row", advice=_ADVICE)
