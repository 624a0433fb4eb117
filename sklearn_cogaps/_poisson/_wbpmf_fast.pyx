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
from libc.math cimport exp, fabs, log, sqrt, isfinite, INFINITY
from libc.stdlib cimport free, malloc

import numpy as np

from .._utils._logsumexp cimport log_sum_exp_pair
from .._utils._special cimport lgamma
from ._ebpm_one cimport component_loglik_one, mixture_posterior_one
from .._utils._status cimport (FAIL_NOT_FINITE, SITE_WBPMF_BOUND, SITE_WBPMF_COUNTS,
                              SITE_WBPMF_DATA_TERM, SITE_WBPMF_ROWS, item_status)
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


def data_term_counts(
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
    double[::1] D,
    double[::1] row_sums,
    double[:, ::1] col_partial,
    const intp_t[::1] starts,
    int n_threads,
):
    """:func:`data_term`, :func:`denominators` and :func:`topic_counts` of topic 0 in one
    sweep, with the same bits as the three.

    The bound that ends an iteration and the first topic of the next read the same
    ``B_ij``: the updates of l0 and f0 between them leave ``zeta_ijk`` unchanged (eq. 3.11),
    so the sweep that takes ``log B_ij`` for the ELBO (eq. 3.20) also stores ``D_ij`` and
    makes topic 0's expected counts (eqs. 3.11-3.12). ``row_terms``, ``D`` and ``row_sums``
    are overwritten; ``col_partial`` must be zero on entry (see :func:`topic_counts`).
    """
    cdef intp_t K = U.shape[1]
    cdef intp_t n_chunks = col_partial.shape[0]
    cdef intp_t c, i, ptr, j, lo, hi
    cdef double z, acc, term, dot, mu_i
    cdef const double* Ub
    cdef const double* Vb
    cdef const double* lub
    cdef const double* lvb
    cdef const double* x
    cdef const double* mvp
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
            row_terms[i] = 0.0
        return
    Ub = &U[0, 0]
    Vb = &V[0, 0]
    lub = &lu[0, 0]
    lvb = &lv[0, 0]
    x = &data[0]
    mvp = &mv[0]
    ind = &indices[0]
    Dp = &D[0]
    for c in prange(n_chunks, nogil=True, schedule="static", num_threads=n_threads):
        status[c] = item_status(SITE_WBPMF_BOUND, c, True)
        if status[c] != 0:
            continue
        lo = starts[c]
        hi = starts[c + 1]
        colp = &col_partial[c, 0]
        for i in range(lo, hi):
            acc = 0.0
            term = 0.0
            mu_i = mu[i]
            u = Ub + i * K
            for ptr in range(indptr[i], indptr[i + 1]):
                j = ind[ptr]
                v = Vb + j * K
                dot = _scaled_dot(u, v, K)
                Dp[ptr] = dot
                if dot > TINY:
                    term = term + x[ptr] * (mu_i + mvp[j] + log(dot))
                else:
                    term = term + x[ptr] * log_sum_exp_pair(lub + i * K, lvb + j * K, K)
                z = _expected_count(x[ptr], dot, u, v, lub + i * K, lvb + j * K, 0, K)
                acc = acc + z
                colp[j] += z
            row_terms[i] = term
            row_sums[i] = acc
            if not (isfinite(acc) and isfinite(term)):
                status[c] = FAIL_NOT_FINITE
    raise_for_status(status_arr, "The data term", item="chunk", advice=_ADVICE)


cdef struct _RowModel:
    # what the regression of new rows holds fixed: the features (stabilised exponentials V,
    # their logs lv and row maxima mv, n_features x K), log w, colw_k = w_k sum_j f0_j E[f_jk],
    # and the loadings' prior g_L (per component: log mass at 0, and n_mix Gamma components
    # in rows of m_max)
    const double* V
    const double* lv
    const double* mv
    const double* logw
    const double* colw
    const double* log_pi0
    const double* log_weights
    const double* shape
    const double* rate
    const double* lgamma_shape
    const double* log_rate
    const intp_t* n_mix
    intp_t m_max
    intp_t K


cdef struct _RowScratch:
    double* lu      # K: log w_k + E[log l_ik]
    double* U       # K: exp(lu - mu)
    double* old     # K: l0 E[l] before the sweep
    double* ll      # m_max + 1: the components' marginals
    double* D       # nnz: sum_k U_k V_jk at the row's entries
    double* th0     # K + 1: (E[log l], log l0) of SQUAREM's t0
    double* th1     # K + 1: ... of t1
    double* pt      # K + 1: the extrapolated point
    double* keep    # 3 K + 1: the state t2 (E[l], E[log l], kl, l0), for the fallback
    double* Vt      # K x nnz: the row's features, V_jk for its entries j, topic by topic


cdef inline intp_t _scratch_size(intp_t K, intp_t m_max, intp_t max_nnz) noexcept nogil:
    """Doubles of a row's scratch (_RowScratch, laid out in _regress_row)."""
    return 9 * K + 5 + m_max + max_nnz * (K + 1)


cdef inline void _row_denominators(const double* U, const double* Vt, intp_t K, intp_t nnz,
                                   double* D) noexcept nogil:
    """``D_q = sum_k U_k Vt[k, q]``, each sum in the order of k (as _scaled_dot makes it)."""
    cdef intp_t k, q
    for q in range(nnz):
        D[q] = 0.0
    for k in range(K):
        for q in range(nnz):
            D[q] = D[q] + U[k] * Vt[k * nnz + q]


cdef double _sweep_row(const idx_t* ind, const double* x, intp_t nnz, double x_row,
                       const _RowModel* m, double* l0, double* El, double* Elogl, double* kl,
                       _RowScratch* w, double* rel) noexcept nogil:
    """One sweep of a row's coordinate ascent (the map that SQUAREM extrapolates): for
    k = 1..K the row's expected counts ``y_k = sum_j X_ij zeta_ijk`` (eq. 3.11-3.12, with
    the row's current loadings), then ``q(l_k)`` as the posterior of ``y_k ~ Poisson(s
    l_k)``, ``s = colw_k l0``, under the fixed prior ``g_L,k``; then ``l0`` (eq. 3.16).
    Reads ``E[log l]`` and ``l0``; writes ``E[l]``, ``E[log l]``, ``kl`` (``E_q[log p(y_k |
    s l_k)] - log p(y_k)``, the KL of q(l_k) from g_L,k) and ``l0``. Leaves ``w.lu`` and
    ``w.D`` at the new loadings and returns their shift mu; ``rel`` receives the largest
    change of ``l0 E[l_k]`` relative to the largest ``l0 E[l_k]``."""
    cdef intp_t K = m.K, mm = m.m_max
    cdef intp_t a, k, q, j
    cdef double mu, top, y, s, log_s, mean, mean_log, lp, v, u_new, du, t, d_new, den
    cdef double change = 0.0, scale = 0.0
    cdef double* lu = w.lu
    cdef double* U = w.U
    cdef double* D = w.D
    cdef const double* V = m.V
    cdef const double* Vt = w.Vt
    for a in range(K):
        w.old[a] = l0[0] * El[a]
    # The row's exponentials and its denominators D_j = sum_a U_a V_ja, made from the
    # loadings at the start of the sweep; within the sweep only U_k changes after topic
    # k's update, so D_j follows by one term, recomputed whole where that term would cancel
    # more than 4 bits of D_j.
    mu = _row_exponentials(m.logw, Elogl, K, lu, U)
    _row_denominators(U, Vt, K, nnz, D)
    for k in range(K):
        y = 0.0
        for q in range(nnz):
            j = ind[q]
            if D[q] > TINY:
                y = y + x[q] * (U[k] * Vt[k * nnz + q] / D[q])
            else:
                y = y + x[q] * _zeta(U, V + j * K, lu, m.lv + j * K, k, K)
        s = m.colw[k] * l0[0]
        log_s = log(s) if y > 0 else 0.0
        # The marginals without lgamma(y + 1): common to the components and to log p(y),
        # it cancels from the posterior and from the KL.
        for a in range(m.n_mix[k]):
            w.ll[a] = component_loglik_one(y, s, log_s, 0.0, m.shape[k * mm + a],
                                           m.rate[k * mm + a], m.log_rate[k * mm + a],
                                           m.lgamma_shape[k * mm + a])
        mean = 0.0
        mean_log = 0.0
        lp = 0.0
        mixture_posterior_one(y, s, m.log_pi0[k], m.log_weights + k * mm, m.shape + k * mm,
                              m.rate + k * mm, w.ll, m.n_mix[k], &mean, &mean_log, &lp)
        El[k] = mean
        Elogl[k] = mean_log
        # E_q[log p(y | s l)] - log p(y): the KL of q(l_k) (eq. 4.6)
        v = -s * mean
        if y > 0:
            v = v + y * (log_s + mean_log)
        kl[k] = v - lp
        # topic k's new exponential; the row is restabilised if its maximum moves by more
        # than e^30 (U_k stays far from overflow and underflow)
        lu[k] = m.logw[k] + mean_log
        top = -INFINITY
        for a in range(K):
            if lu[a] > top:
                top = lu[a]
        if isfinite(top) and fabs(top - mu) > 30.0:
            mu = _row_exponentials(m.logw, Elogl, K, lu, U)
            _row_denominators(U, Vt, K, nnz, D)
            continue
        u_new = exp(lu[k] - mu)
        du = u_new - U[k]
        U[k] = u_new
        if du != 0.0:
            for q in range(nnz):
                j = ind[q]
                t = du * Vt[k * nnz + q]
                d_new = D[q] + t
                if d_new > TINY and D[q] + fabs(t) <= 16.0 * d_new:
                    D[q] = d_new
                else:
                    D[q] = _scaled_dot(U, V + j * K, K)
    den = 0.0
    for a in range(K):
        den = den + El[a] * m.colw[a]
    l0[0] = x_row / den if x_row > 0 else 0.0
    for a in range(K):
        v = l0[0] * El[a]
        if fabs(v - w.old[a]) > change:
            change = fabs(v - w.old[a])
        if fabs(v) > scale:
            scale = fabs(v)
    if change == 0.0:
        rel[0] = 0.0
    elif scale > 0.0:
        rel[0] = change / scale
    else:
        rel[0] = INFINITY
    return mu


cdef double _row_bound(const idx_t* ind, const double* x, intp_t nnz, double x_row,
                       const _RowModel* m, double l0, const double* El, const double* kl,
                       const _RowScratch* w, double mu) noexcept nogil:
    """The row's ELBO at the state a sweep left (its ``w.lu``, ``w.D`` and shift ``mu``),
    less the terms the regression holds fixed (``sum_j X_ij log f0_j`` and ``-log X_ij!``):
    ``sum_j X_ij log B_ij + X_i. log l0 - l0 sum_k E[l_k] colw_k - sum_k KL(q(l_k) || g_k)``
    (eq. 3.20 for one row)."""
    cdef intp_t K = m.K, q, j, a
    cdef double b = 0.0, t
    for q in range(nnz):
        j = ind[q]
        if w.D[q] > TINY:
            t = mu + m.mv[j] + log(w.D[q])
        else:
            t = log_sum_exp_pair(w.lu, m.lv + j * K, K)
        b = b + x[q] * t
    for a in range(K):
        b = b - l0 * El[a] * m.colw[a] - kl[a]
    if x_row > 0:
        b = b + x_row * log(l0)
    return b


cdef inline void _coordinates(const double* Elogl, double l0, intp_t K, double* th) noexcept nogil:
    """The point SQUAREM moves: (E[log l_1..K], log l0)."""
    cdef intp_t a
    for a in range(K):
        th[a] = Elogl[a]
    th[K] = log(l0)


# Extrapolate only once a plain sweep changes the loadings by less than this (relative):
# from a start far from every fixed point (loadings of 1e-20, say) the first sweeps are not
# yet the linear convergence SQUAREM models, and an early jump can land in the basin of
# another fixed point, a lower one.
cdef double _EXTRAPOLATE_BELOW = 1e-2


cdef int _regress_row(const idx_t* ind, const double* x, intp_t nnz, double x_row,
                      const _RowModel* m, double* l0, double* El, double* Elogl, double* kl,
                      double* buf, int max_iter, double tol, bint extrapolate) noexcept nogil:
    """Iterate a row's sweeps to convergence, extrapolated by SQUAREM (Varadhan & Roland
    2008, scheme S3, steps of length at least 1), as HierarchicalPMF's new rows are.

    The sweeps converge linearly, slowly where topics overlap (hundreds of sweeps to a
    relative change of 1e-8 on ``make_sc``). Two sweeps t0 -> t1 -> t2 of the point (E[log
    l], log l0) give r = t1 - t0 and v = t2 - 2 t1 + t0; the point t0 - 2 s r + s^2 v, s =
    -|r| / |v|, is taken through one more sweep and kept only if the row's bound there is at
    least the bound at t2, else t2 is (their section 5's global safeguard): the bound never
    decreases. A coordinate that is not finite in one of t0, t1, t2 (a topic switched off)
    takes t2's value. The iteration stops when a plain sweep changes no ``l0 E[l_k]`` by
    more than ``tol`` of the largest, as without the extrapolation, or after ``max_iter``
    sweeps; returns the number of sweeps. ``buf`` is scratch of ``_scratch_size`` doubles.
    Without ``extrapolate``, the plain sweeps (for the tests of the map itself)."""
    cdef intp_t K = m.K, a, q
    cdef int it = 0
    cdef double rel, mu, b2, sr, sv, step, r, u
    cdef _RowScratch scratch
    cdef _RowScratch* w = &scratch
    scratch.lu = buf
    scratch.U = buf + K
    scratch.old = buf + 2 * K
    scratch.th0 = buf + 3 * K
    scratch.th1 = buf + 4 * K + 1
    scratch.pt = buf + 5 * K + 2
    scratch.keep = buf + 6 * K + 3
    scratch.ll = buf + 9 * K + 4
    scratch.D = buf + 9 * K + 5 + m.m_max
    scratch.Vt = scratch.D + nnz
    # the row's features, read by every sweep in the order of its entries
    for a in range(K):
        for q in range(nnz):
            scratch.Vt[a * nnz + q] = m.V[ind[q] * K + a]
    while it < max_iter:
        _coordinates(Elogl, l0[0], K, w.th0)
        _sweep_row(ind, x, nnz, x_row, m, l0, El, Elogl, kl, w, &rel)
        it = it + 1
        if rel <= tol or it >= max_iter:
            break
        _coordinates(Elogl, l0[0], K, w.th1)
        mu = _sweep_row(ind, x, nnz, x_row, m, l0, El, Elogl, kl, w, &rel)
        it = it + 1
        if rel <= tol or it >= max_iter:
            break
        if not (extrapolate and x_row > 0) or rel > _EXTRAPOLATE_BELOW:
            continue
        # t2 is the current state; the step from the three points
        sr = 0.0
        sv = 0.0
        for a in range(K + 1):
            u = Elogl[a] if a < K else log(l0[0])
            if isfinite(w.th0[a]) and isfinite(w.th1[a]) and isfinite(u):
                r = w.th1[a] - w.th0[a]
                sr = sr + r * r
                r = u - 2.0 * w.th1[a] + w.th0[a]
                sv = sv + r * r
        step = -sqrt(sr / sv) if sv > 0.0 else -1.0
        if not isfinite(step) or step > -1.0:
            continue  # the extrapolation is t2 itself
        for a in range(K + 1):
            u = Elogl[a] if a < K else log(l0[0])
            if isfinite(w.th0[a]) and isfinite(w.th1[a]) and isfinite(u):
                w.pt[a] = (w.th0[a] - 2.0 * step * (w.th1[a] - w.th0[a])
                           + step * step * (u - 2.0 * w.th1[a] + w.th0[a]))
            else:
                w.pt[a] = u
        b2 = _row_bound(ind, x, nnz, x_row, m, l0[0], El, kl, w, mu)
        for a in range(K):
            w.keep[a] = El[a]
            w.keep[K + a] = Elogl[a]
            w.keep[2 * K + a] = kl[a]
            Elogl[a] = w.pt[a]
        w.keep[3 * K] = l0[0]
        l0[0] = exp(w.pt[K])
        mu = _sweep_row(ind, x, nnz, x_row, m, l0, El, Elogl, kl, w, &rel)
        it = it + 1
        if not (_row_bound(ind, x, nnz, x_row, m, l0[0], El, kl, w, mu) >= b2):
            for a in range(K):
                El[a] = w.keep[a]
                Elogl[a] = w.keep[K + a]
                kl[a] = w.keep[2 * K + a]
            l0[0] = w.keep[3 * K]
    return it


def regress_rows(
    const idx_t[::1] indptr,
    const idx_t[::1] indices,
    const double[::1] data,
    const double[:, ::1] V,
    const double[:, ::1] lv,
    const double[::1] mv,
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
    bint extrapolate=True,
):
    """Coordinate ascent on ``l0_i`` and ``q(l_i)`` of every row, the features held fixed,
    extrapolated by SQUAREM (:func:`_regress_row`; plain sweeps without ``extrapolate``).

    ``V``, ``lv`` and ``mv`` are the features' stabilised exponentials, E[log f] and the
    latter's row maxima; ``logw`` and ``colw`` hold ``log w_k`` and ``w_k sum_j f0_j
    E[f_jk]``; the prior ``g_L,k`` is ``n_mix[k]`` Gamma components of positive weight (the
    first of each row of ``log_weights``, ``shape``, ``rate``, ``lgamma_shape``,
    ``log_rate``) and the atom ``log_pi0[k]``. ``l0``, ``El``, ``Elogl`` hold the start on
    entry and the result on exit; ``kl`` receives ``E_q[log p(y_ik | l_ik)] - log p(y_ik)``.
    Rows are independent: a row's result does not depend on the other rows or on the
    number of threads. Returns the number of sweeps of each row.
    """
    cdef intp_t n = indptr.shape[0] - 1
    cdef intp_t K = V.shape[1]
    cdef intp_t i, lo, nnz
    cdef intp_t max_nnz = 0
    cdef _RowModel model
    cdef double* buf
    status_arr = np.zeros(n, dtype=np.intc)
    cdef int[::1] status = status_arr
    sweeps_arr = np.zeros(n, dtype=np.intc)
    cdef int[::1] sweeps = sweeps_arr
    if n == 0:
        return sweeps_arr
    for i in range(n):
        if indptr[i + 1] - indptr[i] > max_nnz:
            max_nnz = indptr[i + 1] - indptr[i]
    model.K = K
    model.m_max = shape.shape[1]
    model.V = &V[0, 0] if V.shape[0] > 0 else NULL
    model.lv = &lv[0, 0] if lv.shape[0] > 0 else NULL
    model.mv = &mv[0] if mv.shape[0] > 0 else NULL
    model.logw = &logw[0]
    model.colw = &colw[0]
    model.log_pi0 = &log_pi0[0]
    model.log_weights = &log_weights[0, 0]
    model.shape = &shape[0, 0]
    model.rate = &rate[0, 0]
    model.lgamma_shape = &lgamma_shape[0, 0]
    model.log_rate = &log_rate[0, 0]
    model.n_mix = &n_mix[0]
    with nogil, parallel(num_threads=n_threads):
        buf = <double*> malloc(sizeof(double) * _scratch_size(K, model.m_max, max_nnz))
        for i in prange(n, schedule="dynamic"):
            status[i] = item_status(SITE_WBPMF_ROWS, i, buf != NULL)
            if status[i] != 0:
                continue
            lo = indptr[i]
            nnz = indptr[i + 1] - lo
            sweeps[i] = _regress_row(&indices[lo] if nnz > 0 else NULL,
                                     &data[lo] if nnz > 0 else NULL, nnz, x_rows[i], &model,
                                     &l0[i], &El[i, 0], &Elogl[i, 0], &kl[i, 0], buf,
                                     max_iter, tol, extrapolate)
            if not isfinite(l0[i]):
                status[i] = FAIL_NOT_FINITE
        free(buf)
    raise_for_status(status_arr, "The regression of new rows", item="row", advice=_ADVICE)
    return sweeps_arr
