# The E-step of extreme deconvolution (Bovy, Hogg & Roweis 2011), one sweep per call.
#
# For a point x_i with observed coordinates o (the NaN entries of x_i are dropped, which is
# the same as deleting those rows of its projection R_i), noise S_i and component j
# (alpha_j, m_j, V_j):
#     T_ij = R_o V_j R_o^T + S_oo,            L L^T = T_ij (Cholesky),
#     z    = L^-1 (x_o - R_o m_j),           chi2 = z^T z,
#     log q_ij = log alpha_j - (n_o log 2pi + log|T_ij| + chi2) / 2,
#     W    = L^-1 R_o V_j,
#     b_ij - m_j = W^T z                     (= V_j R^T T^-1 (x - R m_j)),
#     B_ij = V_j - W^T W                     (= V_j - V_j R^T T^-1 R V_j).
# The sums returned per chunk of points are, with r_ij the responsibilities and s_i the
# sample weights,
#     q_j  = sum_i s_i r_ij,
#     s1_j = sum_i s_i r_ij (b_ij - m_j),
#     A_j  = sum_i s_i r_ij [(b_ij - m_j)(b_ij - m_j)^T - W^T W]   (lower triangle),
# so that sum_i s_i r_ij [(b_ij - m_j)(b_ij - m_j)^T + B_ij] = A_j + q_j V_j: the statistics
# are centred on the current means, which keeps them free of cancellation (see the user guide).
#
# Every chunk of points writes its own slot of the outputs; the caller adds the slots in a
# fixed order, so the result does not depend on the number of threads. Likewise every chunk
# (or point) records its own status: its thread's scratch missing, or a T_ij that is not
# positive definite. The kernels return the statuses and the caller raises for the first
# failure after the parallel region, whichever thread met it (_utils/_status.pxd).

from cython.parallel cimport parallel, prange
from libc.math cimport exp, log, sqrt, isnan, INFINITY
from libc.stdlib cimport malloc, free

import numpy as np

from .._utils._logsumexp cimport responsibilities
from .._utils._status cimport (FAIL_NOT_POSITIVE_DEFINITE, SITE_XD_ESTEP, SITE_XD_LOG_PROB,
                              item_status)

ctypedef fused floating:
    float
    double

cdef double LOG_2PI = 1.8378770664093453


cdef inline Py_ssize_t _cholesky(floating* T, Py_ssize_t n) noexcept nogil:
    """In-place lower Cholesky factor of the n x n row-major T; returns 0, or the failing row + 1."""
    cdef Py_ssize_t a, b, k
    cdef floating s
    for a in range(n):
        for b in range(a + 1):
            s = T[a * n + b]
            for k in range(b):
                s = s - T[a * n + k] * T[b * n + k]
            if a == b:
                if not (s > 0):
                    return a + 1
                T[a * n + a] = sqrt(s)
            else:
                T[a * n + b] = s / T[b * n + b]
    return 0


cdef inline void _forward(const floating* L, floating* y, Py_ssize_t n, Py_ssize_t ncol,
                          Py_ssize_t ld) noexcept nogil:
    """Solve L Y = Y in place for the n x ncol row-major block Y (leading dimension ld)."""
    cdef Py_ssize_t a, k, c
    cdef floating s
    for c in range(ncol):
        for a in range(n):
            s = y[a * ld + c]
            for k in range(a):
                s = s - L[a * n + k] * y[k * ld + c]
            y[a * ld + c] = s / L[a * n + a]


cdef inline void _gram(const floating* W, Py_ssize_t n_o, Py_ssize_t d,
                       floating* M) noexcept nogil:
    """The lower triangle of W^T W for the n_o x d row-major W: M (d, d) row-major."""
    cdef Py_ssize_t a, b, c
    cdef floating s
    for c in range(d):
        for b in range(c + 1):
            s = 0
            for a in range(n_o):
                s = s + W[a * d + c] * W[a * d + b]
            M[c * d + b] = s


def shared_grams(const floating[::1] Wsh, Py_ssize_t K, Py_ssize_t p, Py_ssize_t d):
    """W_j^T W_j of the shared factors L^-1 R V_j (no noise, a shared projection): the same
    for every complete point, so computed once per component, by the loop `_point` uses for
    the others (the same bits)."""
    out = np.zeros(K * d * d, dtype=np.asarray(Wsh).dtype)
    cdef floating[::1] M = out
    cdef Py_ssize_t j
    if K * d:
        for j in range(K):
            _gram(&Wsh[j * p * d], p, d, &M[j * d * d])
    return out


cdef inline floating* _alloc_scratch(const floating* like, Py_ssize_t p, Py_ssize_t d,
                                     Py_ssize_t K) noexcept nogil:
    """Scratch of one thread: T (p, p), P (p, d), z (p), then the slots of `_results`."""
    return <floating*> malloc(sizeof(floating) * (p * p + p * d + p + K + K * d + K * d * d + 4))


cdef inline floating* _results(floating* buf, Py_ssize_t p, Py_ssize_t d) noexcept nogil:
    """Where the scratch holds the results: log-density (K), then b - m (K, d), W^T W (K, d, d)."""
    return buf + p * p + p * d + p


cdef Py_ssize_t _point(
    const floating* x, Py_ssize_t p, Py_ssize_t d, Py_ssize_t K,
    int noise_mode, const floating* Snoise,
    const floating* R,
    const floating* logw, const floating* means, const floating* covs,
    const floating* RV, const floating* RVR, const floating* Rm,
    const floating* Lsh, const floating* Wsh, int shared_gram,
    int want, Py_ssize_t* obs, floating* buf,
) noexcept nogil:
    """Log-densities (and, if want, b - m and W^T W) of one point under every component.

    R is NULL for a projection shared by all points (then RV, RVR, Rm hold R V_j, R V_j R^T
    and R m_j); Lsh and Wsh are not NULL when, without noise and with a shared projection,
    the Cholesky factor of R V_j R^T and L^-1 R V_j are the same for every complete point;
    ``shared_gram`` then says that the caller has their W^T W (`shared_grams`), which is not
    computed again. ``buf`` is the scratch of `_alloc_scratch`; the results are left in its log-density, b - m
    and W^T W slots (`_results`). Returns the number of observed coordinates, or -(j + 1) when
    T_ij is not positive definite.
    """
    cdef Py_ssize_t n_o = 0, a, b, c, k, j, fail
    cdef floating* T = buf
    cdef floating* P = T + p * p
    cdef floating* z = P + p * d
    cdef floating* logp
    cdef floating* delta
    cdef floating* M
    logp = _results(buf, p, d)
    delta = logp + K
    M = delta + K * d
    cdef const floating* V
    cdef const floating* L
    cdef const floating* W
    cdef floating s, logdet, chi2
    for a in range(p):
        if not isnan(x[a]):
            obs[n_o] = a
            n_o += 1
    for j in range(K):
        V = covs + j * d * d
        if Lsh != NULL and n_o == p:
            # No noise, shared projection, complete point: the factor is the component's.
            L = Lsh + j * p * p
            W = Wsh + j * p * d
            for a in range(p):
                z[a] = x[a] - Rm[j * p + a]
        else:
            # P = R_o V_j and T = P R_o^T + S_oo (lower triangle), y = x_o - R_o m_j in z.
            if R == NULL:
                for a in range(n_o):
                    for c in range(d):
                        P[a * d + c] = RV[(j * p + obs[a]) * d + c]
                    for b in range(a + 1):
                        T[a * n_o + b] = RVR[(j * p + obs[a]) * p + obs[b]]
                    z[a] = x[obs[a]] - Rm[j * p + obs[a]]
            else:
                for a in range(n_o):
                    for c in range(d):
                        s = 0
                        for k in range(d):
                            s = s + R[obs[a] * d + k] * V[k * d + c]
                        P[a * d + c] = s
                    for b in range(a + 1):
                        s = 0
                        for k in range(d):
                            s = s + P[a * d + k] * R[obs[b] * d + k]
                        T[a * n_o + b] = s
                    s = x[obs[a]]
                    for k in range(d):
                        s = s - R[obs[a] * d + k] * means[j * d + k]
                    z[a] = s
            if noise_mode == 1:
                for a in range(n_o):
                    T[a * n_o + a] = T[a * n_o + a] + Snoise[obs[a]]
            elif noise_mode == 2:
                for a in range(n_o):
                    for b in range(a + 1):
                        T[a * n_o + b] = T[a * n_o + b] + Snoise[obs[a] * p + obs[b]]
            fail = _cholesky(T, n_o)
            if fail:
                return -(j + 1)
            L = T
            W = P
            if want:
                _forward(L, P, n_o, d, d)
        # chi2 and log-determinant.
        _forward(L, z, n_o, 1, 1)
        chi2 = 0
        logdet = 0
        for a in range(n_o):
            chi2 = chi2 + z[a] * z[a]
            logdet = logdet + log(L[a * n_o + a])
        logp[j] = logw[j] - 0.5 * (n_o * LOG_2PI + 2 * logdet + chi2)
        if want:
            for c in range(d):
                s = 0
                for a in range(n_o):
                    s = s + W[a * d + c] * z[a]
                delta[j * d + c] = s
            if not (shared_gram and Lsh != NULL and n_o == p):
                _gram(W, n_o, d, M + j * d * d)
    return n_o


cdef inline const floating* _noise_ptr(int noise_mode, const floating[:, ::1] Sdiag,
                                       const floating[:, :, ::1] Sfull, Py_ssize_t i) noexcept nogil:
    if noise_mode == 1:
        return &Sdiag[i, 0]
    if noise_mode == 2:
        return &Sfull[i, 0, 0]
    return NULL


cdef inline const floating* _opt(const floating[::1] a) noexcept nogil:
    if a.shape[0] == 0:
        return NULL
    return &a[0]


def estep_stats(
    const floating[:, ::1] X,
    int noise_mode,
    const floating[:, ::1] Sdiag,
    const floating[:, :, ::1] Sfull,
    const floating[:, :, ::1] Rproj,
    const floating[::1] sample_weight,
    const floating[::1] logw,
    const floating[:, ::1] means,
    const floating[:, :, ::1] covs,
    const floating[::1] RV,
    const floating[::1] RVR,
    const floating[::1] Rm,
    const floating[::1] Lsh,
    const floating[::1] Wsh,
    const floating[::1] Msh,
    double[:, ::1] q_out,
    double[:, :, ::1] s1_out,
    double[:, :, :, ::1] A_out,
    double[::1] ll_out,
    Py_ssize_t[::1] fail_out,
    const Py_ssize_t[::1] starts,
    int n_threads,
):
    """Sufficient statistics of one E-step, per chunk of points.

    Parameters
    ----------
    X : ndarray of shape (n, p)
        Observations; NaN marks a missing coordinate.
    noise_mode : int
        0 no noise, 1 diagonal (``Sdiag`` of shape (n, p)), 2 full (``Sfull`` (n, p, p)).
    Sdiag, Sfull : ndarray
        The noise; the unused one may be of any shape.
    Rproj : ndarray of shape (n, p, d) or (0, 0, 0)
        Per-point projections; empty when the projection is shared (then ``RV``, ``RVR``,
        ``Rm`` hold R V_j, R V_j R^T and R m_j, flattened).
    sample_weight, logw, means, covs : ndarray
        Weights of the points, log mixture weights, means (K, d) and covariances (K, d, d).
    Lsh, Wsh, Msh : ndarray
        Empty, or (without noise and with a shared projection) the flattened Cholesky
        factors of R V_j R^T, L^-1 R V_j and the lower triangles of W_j^T W_j.
    q_out, s1_out, A_out, ll_out, fail_out : ndarray
        Zeroed outputs with one slot per chunk: q (n_chunks, K), s1 (n_chunks, K, d),
        A (n_chunks, K, d, d) lower triangles, weighted log-likelihood (n_chunks,), and
        ``-1`` or ``i * K + j`` of a point and component whose T_ij is not positive definite.
    starts : ndarray of shape (n_chunks + 1,)
        The first point of every chunk and one past the last point of the last, increasing.
    n_threads : int
        OpenMP threads.

    Returns
    -------
    status : ndarray of int, shape (n_chunks,)
        0, or the failure code of the chunk (_utils/_status.pxd).
    """
    cdef Py_ssize_t n = X.shape[0], p = X.shape[1], K = means.shape[0], d = means.shape[1]
    cdef Py_ssize_t n_chunks = q_out.shape[0]
    cdef Py_ssize_t ch, i, j, a, b, start, stop, n_o
    cdef int per_point = Rproj.shape[0] > 0
    cdef const floating* Lp = _opt(Lsh)
    cdef const floating* Wp = _opt(Wsh)
    cdef const floating* Mp = _opt(Msh)
    cdef const floating* RVp = _opt(RV)
    cdef const floating* RVRp = _opt(RVR)
    cdef const floating* Rmp = _opt(Rm)
    cdef Py_ssize_t* obs
    cdef floating* buf
    cdef floating* logp
    cdef floating* delta
    cdef floating* M
    cdef const floating* Mi
    cdef double* r
    cdef double lse, wr
    status_arr = np.zeros(n_chunks, dtype=np.intc)
    cdef int[::1] status = status_arr
    with nogil, parallel(num_threads=n_threads):
        obs = <Py_ssize_t*> malloc(sizeof(Py_ssize_t) * (p + 1))
        buf = _alloc_scratch(&means[0, 0], p, d, K)
        r = <double*> malloc(sizeof(double) * (K + 1))
        logp = _results(buf, p, d)
        delta = logp + K
        M = delta + K * d
        for ch in prange(n_chunks, schedule='static'):
            status[ch] = item_status(SITE_XD_ESTEP, ch, obs != NULL and buf != NULL and r != NULL)
            if status[ch] != 0:
                continue
            start = starts[ch]
            stop = starts[ch + 1]
            for i in range(start, stop):
                n_o = _point(&X[i, 0], p, d, K, noise_mode, _noise_ptr(noise_mode, Sdiag, Sfull, i),
                             &Rproj[i, 0, 0] if per_point else NULL,
                             &logw[0], &means[0, 0], &covs[0, 0, 0], RVp, RVRp, Rmp, Lp, Wp,
                             Mp != NULL, 1, obs, buf)
                if n_o < 0:
                    if fail_out[ch] < 0:
                        fail_out[ch] = i * K + (-n_o - 1)
                        status[ch] = FAIL_NOT_POSITIVE_DEFINITE
                    continue
                lse = responsibilities(logp, r, K)
                Mi = Mp if (Mp != NULL and Lp != NULL and n_o == p) else M
                ll_out[ch] = ll_out[ch] + sample_weight[i] * lse
                for j in range(K):
                    wr = sample_weight[i] * r[j]
                    if wr == 0:
                        continue
                    q_out[ch, j] = q_out[ch, j] + wr
                    for a in range(d):
                        s1_out[ch, j, a] = s1_out[ch, j, a] + wr * delta[j * d + a]
                        for b in range(a + 1):
                            A_out[ch, j, a, b] = A_out[ch, j, a, b] + wr * (
                                delta[j * d + a] * delta[j * d + b] - Mi[(j * d + a) * d + b])
        free(obs)
        free(buf)
        free(r)
    return status_arr


def log_prob(
    const floating[:, ::1] X,
    int noise_mode,
    const floating[:, ::1] Sdiag,
    const floating[:, :, ::1] Sfull,
    const floating[:, :, ::1] Rproj,
    const floating[::1] logw,
    const floating[:, ::1] means,
    const floating[:, :, ::1] covs,
    const floating[::1] RV,
    const floating[::1] RVR,
    const floating[::1] Rm,
    const floating[::1] Lsh,
    const floating[::1] Wsh,
    const floating[::1] Msh,
    floating[:, ::1] logp_out,
    floating[:, ::1] post_mean,
    floating[:, :, ::1] post_cov,
    Py_ssize_t[::1] fail_out,
    int n_threads,
):
    """log alpha_j + log N(x_i | R_i m_j, T_ij) for every point and component.

    With ``post_mean`` of shape (n, d) (not (0, 0)), also the posterior of v_i: its mean
    sum_j r_ij b_ij and covariance sum_j r_ij [B_ij + (b_ij - mean)(b_ij - mean)^T].
    ``fail_out`` (one slot per point) receives the failing component or stays -1.
    The other arguments are those of `estep_stats`. Returns the status of every point
    (0, or its failure code).
    """
    cdef Py_ssize_t n = X.shape[0], p = X.shape[1], K = means.shape[0], d = means.shape[1]
    cdef Py_ssize_t i, j, a, b, n_o
    cdef int per_point = Rproj.shape[0] > 0
    cdef int want = post_mean.shape[0] > 0
    cdef const floating* Lp = _opt(Lsh)
    cdef const floating* Wp = _opt(Wsh)
    cdef const floating* Mp = _opt(Msh)
    cdef const floating* RVp = _opt(RV)
    cdef const floating* RVRp = _opt(RVR)
    cdef const floating* Rmp = _opt(Rm)
    cdef Py_ssize_t* obs
    cdef floating* buf
    cdef floating* logp
    cdef floating* delta
    cdef floating* M
    cdef double* r
    cdef double* mu
    status_arr = np.zeros(n, dtype=np.intc)
    cdef int[::1] status = status_arr
    with nogil, parallel(num_threads=n_threads):
        obs = <Py_ssize_t*> malloc(sizeof(Py_ssize_t) * (p + 1))
        buf = _alloc_scratch(&means[0, 0], p, d, K)
        r = <double*> malloc(sizeof(double) * (K + d + 1))
        mu = r + K
        logp = _results(buf, p, d)
        delta = logp + K
        M = delta + K * d
        for i in prange(n, schedule='static'):
            status[i] = item_status(SITE_XD_LOG_PROB, i, obs != NULL and buf != NULL and r != NULL)
            if status[i] != 0:
                continue
            n_o = _point(&X[i, 0], p, d, K, noise_mode, _noise_ptr(noise_mode, Sdiag, Sfull, i),
                         &Rproj[i, 0, 0] if per_point else NULL,
                         &logw[0], &means[0, 0], &covs[0, 0, 0], RVp, RVRp, Rmp, Lp, Wp,
                         Mp != NULL, want, obs, buf)
            if n_o < 0:
                fail_out[i] = -n_o - 1
                status[i] = FAIL_NOT_POSITIVE_DEFINITE
                continue
            for j in range(K):
                logp_out[i, j] = logp[j]
            if want:
                responsibilities(logp, r, K)
                _posterior(r, delta, Mp if (Mp != NULL and Lp != NULL and n_o == p) else M,
                           &means[0, 0], &covs[0, 0, 0], K, d, mu,
                           &post_mean[i, 0], &post_cov[i, 0, 0])
        free(obs)
        free(buf)
        free(r)
    return status_arr


cdef void _posterior(const double* r, const floating* delta, const floating* M,
                     const floating* means, const floating* covs, Py_ssize_t K, Py_ssize_t d,
                     double* mu, floating* mean_out, floating* cov_out) noexcept nogil:
    """Mean and covariance of the mixture posterior of v for one point."""
    cdef Py_ssize_t j, a, b
    cdef double s, da, db
    for a in range(d):
        s = 0
        for j in range(K):
            s = s + r[j] * (means[j * d + a] + delta[j * d + a])
        mu[a] = s
        mean_out[a] = <floating> s
    for a in range(d):
        for b in range(a + 1):
            s = 0
            for j in range(K):
                if r[j] == 0:
                    continue
                da = means[j * d + a] + delta[j * d + a] - mu[a]
                db = means[j * d + b] + delta[j * d + b] - mu[b]
                s = s + r[j] * (covs[(j * d + a) * d + b] - M[(j * d + a) * d + b] + da * db)
            cov_out[a * d + b] = <floating> s
            cov_out[b * d + a] = <floating> s
