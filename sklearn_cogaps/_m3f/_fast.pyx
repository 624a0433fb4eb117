# Compiled sweeps of MaxMarginMF: Gibbs max-margin matrix factorisation of ordinal ratings
# (Xu, Zhu & Zhang, ICML 2013, and its appendix; doc/m3f.rst derives every
# conditional).
#
# Notation (doc/m3f.rst): c = C / 2; for an observed rating y of user i on item j and a level
# r = 1..L-1, T = +1 if y <= r else -1, zeta = margin - T (theta_ir - x_ij) and il = 1 / lambda.
# Given the augmentation variables, the log pseudo-likelihood of a score x is the quadratic
# -(cv2 / 2) x^2 - cv1 x + const with
#     cv1 = c sum_r T + c^2 sum_r (margin T - theta_ir) il_r,    cv2 = c^2 sum_r il_r.
#
# One call = one sweep. Every major index (a row or a column) draws from its own stream,
# seeded from ``seeds[index]``, and writes only its own outputs; per-row sums are returned per
# row and added by the caller in a fixed order. The results are therefore bit-identical for
# any number of threads.
#
# Every loop records a status per row (its thread's scratch missing, a non-finite statistic, a
# Cholesky factorisation with a non-positive pivot) and raises after the loop for the first
# row that failed, whichever thread met it (_utils/_status.pxd).
from cython.parallel cimport prange, parallel
from libc.math cimport log, log1p, sqrt, exp, fabs, lgamma, isfinite
from libc.stdlib cimport malloc, free
from libc.stdint cimport uint64_t

import numpy as np

from .._utils._rng cimport Rng, rng_seed, rng_uniform, rng_normal
from .._utils._invgauss cimport rng_invgauss
from .._utils._status cimport (FAIL_NOT_FINITE, FAIL_NOT_POSITIVE_DEFINITE, SITE_M3F_ROWS,
                              SITE_M3F_USERS, SITE_M3F_ITEMS, SITE_M3F_FEATURES,
                              SITE_M3F_NEW_USER_FEATURES, item_status)
from .._utils._status import raise_for_status

# What to do when a sweep fails, for the shared messages of _utils/_status.pyx. In exact
# arithmetic every statistic is finite and every precision matrix positive definite, so a
# failure means that the parameters or the rating scale overflow double precision.
_ADVICE_TEXT = (
    "The hinge statistics overflow double precision: lower C, margin, factor_scale or "
    "threshold_scale (or threshold_mean), or use fewer rating levels."
)
_ADVICE = {FAIL_NOT_FINITE: _ADVICE_TEXT, FAIL_NOT_POSITIVE_DEFINITE: _ADVICE_TEXT}


# ---------------------------------------------------------------------------------------------
# Test access to the nogil building blocks
# ---------------------------------------------------------------------------------------------

def _invgauss_for_tests(Py_ssize_t size, double mean, double shape, uint64_t seed):
    """``size`` draws of IG(mean, shape) from one stream (``mean`` may be inf)."""
    cdef Rng r
    cdef Py_ssize_t i
    out = np.empty(size)
    cdef double[::1] o = out
    rng_seed(&r, seed)
    for i in range(size):
        o[i] = rng_invgauss(&r, mean, shape)
    return out


cdef inline double cs_logdet(double a, double b, double k) noexcept nogil:
    """ln det X_k for X_k = (a - b) I + b 1 1' (k x k): appendix eq. 31, (a-b)^(k-1) (k b + a - b)."""
    if k == 0.0:
        return 0.0
    return (k - 1.0) * log(a - b) + log(k * b + a - b)


cdef inline double cs_quad(double a, double b, double k) noexcept nogil:
    """1' X_k^-1 1 = k / (k b + a - b): appendix eq. 33."""
    return k / (k * b + a - b)


def _compound_symmetric_for_tests(double a, double b, int k):
    """(ln det X_k, 1' X_k^-1 1) of X_k = (a - b) I + b 1 1', as the kernels compute them."""
    return cs_logdet(a, b, k), cs_quad(a, b, k)


def _new_feature_log_probs_for_tests(const double[::1] cv1, const double[::1] cv2, const double[::1] x,
                          double alpha, Py_ssize_t n_rows, double sigma, int kappa):
    """Unnormalised ln P(k new features), k = 0..kappa, of one row (see ``_new_feature_logp``)."""
    out = np.empty(kappa + 1)
    cdef double[::1] o = out
    _new_feature_logp(&cv1[0], &cv2[0], &x[0], cv1.shape[0], alpha, n_rows, sigma, kappa, &o[0])
    return out


# ---------------------------------------------------------------------------------------------
# Row pass: thresholds, then augmentation variables
# ---------------------------------------------------------------------------------------------

def row_pass(
    const int[::1] indptr, const int[::1] indices, const int[::1] level,
    const double[:, ::1] U, const double[:, ::1] V,
    double[:, ::1] theta, const double[::1] rho, double theta_prec,
    double[:, ::1] ilam, double[::1] x, double[::1] cv1, double[::1] cv2, double[::1] hinge,
    const uint64_t[::1] seeds, double C, double margin, bint update_theta, int n_threads,
):
    """For every row i (a user): its scores, then theta_i, then the augmentation variables.

    * ``x[p] = U_i . V_j`` for each stored entry p = (i, j) of the CSR matrix;
    * if ``update_theta``, theta_ir ~ N(mean, 1 / prec) for r = 1..L-1 (doc/m3f.rst) with
      prec = 1/s^2 + c^2 sum_j il_jr and
      mean = [rho_r / s^2 + c sum_j T_jr + c^2 sum_j (margin T_jr + x_ij) il_jr] / prec,
      where ``ilam`` holds the current il;
    * il_jr ~ IG(1 / (c |zeta_jr|), 1) (Polson & Scott 2011; an infinite mean at zeta = 0);
    * ``cv1[p]``, ``cv2[p]`` as in the header, and ``hinge[i] = sum_jr max(0, zeta_jr)`` at
      the new thresholds (before the augmentation draws).

    ``level`` holds the ratings as 1..L; ``theta`` and ``ilam`` have L - 1 columns.
    """
    cdef Py_ssize_t n = indptr.shape[0] - 1
    cdef Py_ssize_t K = U.shape[1]
    cdef Py_ssize_t R = theta.shape[1]
    cdef Py_ssize_t i, p, r, k, j
    cdef double c = 0.5 * C, c2 = 0.25 * C * C
    cdef double s, prec, lin, T, zeta, il, h, s1, s2, th
    cdef bint finite
    cdef Rng* rng
    status_arr = np.zeros(n, dtype=np.intc)
    cdef int[::1] status = status_arr
    with nogil, parallel(num_threads=n_threads):
        rng = <Rng*> malloc(sizeof(Rng))
        for i in prange(n, schedule='static'):
            status[i] = item_status(SITE_M3F_ROWS, i, rng != NULL)
            if status[i] != 0:
                continue
            rng_seed(rng, seeds[i])
            finite = True
            for p in range(indptr[i], indptr[i + 1]):
                j = indices[p]
                s = 0.0
                for k in range(K):
                    s = s + U[i, k] * V[j, k]
                x[p] = s
                finite = finite and isfinite(s)
            if update_theta:
                for r in range(R):
                    prec = theta_prec
                    lin = rho[r] * theta_prec
                    for p in range(indptr[i], indptr[i + 1]):
                        T = 1.0 if level[p] <= r + 1 else -1.0
                        il = ilam[p, r]
                        prec = prec + c2 * il
                        lin = lin + c * T + c2 * (margin * T + x[p]) * il
                    theta[i, r] = lin / prec + rng_normal(rng) / sqrt(prec)
                    finite = finite and isfinite(theta[i, r])
            h = 0.0
            for p in range(indptr[i], indptr[i + 1]):
                s1 = 0.0
                s2 = 0.0
                for r in range(R):
                    T = 1.0 if level[p] <= r + 1 else -1.0
                    th = theta[i, r]
                    zeta = margin - T * (th - x[p])
                    if zeta > 0.0:
                        h = h + zeta
                    il = rng_invgauss(rng, 1.0 / (c * fabs(zeta)), 1.0)
                    ilam[p, r] = il
                    s1 = s1 + c * T + c2 * (margin * T - th) * il
                    s2 = s2 + c2 * il
                cv1[p] = s1
                cv2[p] = s2
                finite = finite and isfinite(s1) and isfinite(s2)
            hinge[i] = h
            if not (finite and isfinite(h)):
                status[i] = FAIL_NOT_FINITE
        free(rng)
    raise_for_status(status_arr, "The threshold and augmentation pass", item="user",
                     advice=_ADVICE)


# ---------------------------------------------------------------------------------------------
# Gaussian factors: U_i given V, or V_j given U (or Z)
# ---------------------------------------------------------------------------------------------

cdef inline int _gaussian_row(
    Py_ssize_t start, Py_ssize_t stop, const int* minor, const int* entry,
    const double* cv1, const double* cv2, const double[:, ::1] other, double prior_prec,
    Py_ssize_t K, double* P, double* z, double* out, Rng* rng,
) noexcept nogil:
    """Draw one factor row from N(P^-1 h, P^-1) and write it to ``out``; returns 0, or
    FAIL_NOT_POSITIVE_DEFINITE at a pivot that is not positive and finite (``out`` is then
    left as it was) or FAIL_NOT_FINITE when the draw is not finite.

    P = prior_prec I + sum_p cv2_p v_p v_p' and h = -sum_p cv1_p v_p over the stored entries
    p of the row, v_p the other side's factor row. Only the lower triangle of P is
    accumulated, each entry as a symmetric rank-1 update over contiguous memory. With
    P = L L' (Cholesky, in place), the draw is L'^-1 (L^-1 h + eps), eps ~ N(0, I).
    """
    cdef Py_ssize_t p, a, b, kk, e
    cdef double w, g, wa, s, d
    cdef const double* v
    cdef double* row
    for a in range(K):
        z[a] = 0.0
        row = P + a * K
        for b in range(a):
            row[b] = 0.0
        row[a] = prior_prec
    for p in range(start, stop):
        e = entry[p]
        w = cv2[e]
        g = cv1[e]
        v = &other[minor[p], 0]
        for a in range(K):
            wa = w * v[a]
            z[a] -= g * v[a]
            row = P + a * K
            for b in range(a + 1):
                row[b] += wa * v[b]
    # Cholesky P = L L', L in the lower triangle of P
    for a in range(K):
        row = P + a * K
        for b in range(a + 1):
            s = row[b]
            for kk in range(b):
                s -= row[kk] * P[b * K + kk]
            if a == b:
                if not (s > 0.0 and isfinite(s)):
                    return FAIL_NOT_POSITIVE_DEFINITE
                row[a] = sqrt(s)
            else:
                row[b] = s / P[b * K + b]
    # forward: L y = h; then y + eps
    for a in range(K):
        row = P + a * K
        s = z[a]
        for kk in range(a):
            s -= row[kk] * z[kk]
        z[a] = s / row[a]
    for a in range(K):
        z[a] += rng_normal(rng)
    # backward: L' u = y + eps
    a = K - 1
    while a >= 0:
        s = z[a]
        for kk in range(a + 1, K):
            s -= P[kk * K + a] * out[kk]
        out[a] = s / P[a * K + a]
        a -= 1
    for a in range(K):
        if not isfinite(out[a]):
            return FAIL_NOT_FINITE
    return 0


def sample_factors(
    const int[::1] indptr, const int[::1] minor, const int[::1] entry,
    const double[::1] cv1, const double[::1] cv2, const double[:, ::1] other,
    double prior_prec, double[:, ::1] out, const uint64_t[::1] seeds, int n_threads,
    str side="user",
):
    """Gibbs step of one side's factors (rows of ``out``), the other side fixed.

    ``indptr``/``minor`` is the compressed matrix along this side (CSR for users, CSC for
    items); ``entry[p]`` is the position in ``cv1``/``cv2`` (CSR order) of its p-th stored
    entry. Row m of ``out`` ~ N(P_m^-1 h_m, P_m^-1) with P_m = prior_prec I
    + sum cv2 v v' and h_m = -sum cv1 v (doc/m3f.rst); rows are independent given the
    other side, so they are drawn in parallel, each from its own stream. ``side`` ("user" or
    "item") names the rows in the error raised when one fails.
    """
    cdef Py_ssize_t n = indptr.shape[0] - 1
    cdef Py_ssize_t K = other.shape[1]
    cdef Py_ssize_t m
    cdef double* P
    cdef double* z
    cdef Rng* rng
    cdef int site
    if side == "user":
        site = SITE_M3F_USERS
    elif side == "item":
        site = SITE_M3F_ITEMS
    else:
        raise ValueError(f"side must be 'user' or 'item'; got {side!r}.")
    if K == 0:
        return
    status_arr = np.zeros(n, dtype=np.intc)
    cdef int[::1] status = status_arr
    with nogil, parallel(num_threads=n_threads):
        P = <double*> malloc(K * K * sizeof(double))
        z = <double*> malloc(K * sizeof(double))
        rng = <Rng*> malloc(sizeof(Rng))
        for m in prange(n, schedule='static'):
            status[m] = item_status(site, m, P != NULL and z != NULL and rng != NULL)
            if status[m] != 0:
                continue
            rng_seed(rng, seeds[m])
            status[m] = _gaussian_row(indptr[m], indptr[m + 1], &minor[0], &entry[0], &cv1[0],
                                      &cv2[0], other, prior_prec, K, P, z, &out[m, 0], rng)
        free(P)
        free(z)
        free(rng)
    raise_for_status(status_arr, f"The draw of the {side} factors", item=side, advice=_ADVICE)


# ---------------------------------------------------------------------------------------------
# Binary features under the Indian buffet process (Gibbs iPM3F)
# ---------------------------------------------------------------------------------------------

cdef inline double _flip_delta(
    Py_ssize_t start, Py_ssize_t stop, const int* indices, const double* cv1,
    const double* cv2, const double* x, const double[:, ::1] V, Py_ssize_t k, double zik,
) noexcept nogil:
    """ln p(ratings | Z_ik = 1) - ln p(ratings | Z_ik = 0), the rest fixed (doc/m3f.rst).

    With x the current scores, -sum_j V_jk [cv1_j + cv2_j (x_ij + (1/2 - Z_ik) V_jk)].
    """
    cdef Py_ssize_t p
    cdef double v, d = 0.0
    for p in range(start, stop):
        v = V[indices[p], k]
        d -= v * (cv1[p] + cv2[p] * (x[p] + (0.5 - zik) * v))
    return d


cdef inline bint _bernoulli_logit(Rng* rng, double logit) noexcept nogil:
    """True with probability 1 / (1 + exp(-logit)), without overflow."""
    cdef double u = rng_uniform(rng)
    if logit >= 0.0:
        return u * (1.0 + exp(-logit)) < 1.0
    return u * (1.0 + exp(logit)) < exp(logit)


cdef void _new_feature_logp(
    const double* cv1, const double* cv2, const double* x, Py_ssize_t n_entries,
    double alpha, Py_ssize_t n_rows, double sigma, int kappa, double* logp,
) noexcept nogil:
    """ln P(k new features) + const for k = 0..kappa, in O(n_entries kappa) (appendix A).

    The new columns of V are integrated out: for each rated item, the k new entries have
    prior N(0, sigma^2 I) and enter the score through their sum s, with log pseudo-likelihood
    -(b/2) s^2 - g s, b = cv2, g = cv1 + cv2 x. The integral is
    sigma^-k det(X_k)^-1/2 exp(g^2 1' X_k^-1 1 / 2) with X_k = I / sigma^2 + b 1 1'
    (a = 1/sigma^2 + b), so by eqs. 31 and 33 each item adds
    -1/2 ln(1 + k b sigma^2) + g^2 k / (2 (k b + 1/sigma^2)); the prior adds
    k ln(alpha / N) - ln k! (Poisson(alpha / N)). Logs are summed, never determinants.
    """
    cdef Py_ssize_t p
    cdef int k
    cdef double b, g, s2 = sigma * sigma, lr = log(alpha / <double> n_rows), acc
    for k in range(kappa + 1):
        acc = k * lr - lgamma(k + 1.0)
        if k > 0:
            for p in range(n_entries):
                b = cv2[p]
                g = cv1[p] + cv2[p] * x[p]
                # -k ln sigma - 1/2 ln det X_k = -1/2 ln(1 + k b sigma^2) (eq. 31)
                acc += -0.5 * log1p(k * b * s2) + 0.5 * g * g * k / (k * b + 1.0 / s2)
        logp[k] = acc


def sample_ibp_rows(
    const int[::1] indptr, const int[::1] indices, const double[::1] cv1,
    const double[::1] cv2, double[:, ::1] Z, double[:, ::1] V, int[::1] counts,
    double[::1] x, int n_features, Py_ssize_t start, const uint64_t[::1] seeds,
    double alpha, double sigma, int kappa,
):
    """One Gibbs sweep over the rows of the binary matrix Z, from row ``start`` on.

    For each row i, in order (the IBP couples the rows through the feature counts, so the
    sweep is sequential): the features other rows have by their Bernoulli conditionals,
    with prior odds m_-ik / (N - m_-ik) (Griffiths & Ghahramani 2011), the
    features only row i has in place; then those are dropped together, and the number of
    new features k in 0..kappa is drawn from ``_new_feature_logp`` and their
    columns of V from their conditional: on the row's items N(-g / (k b + 1/sigma^2) 1,
    X_k^-1) (eq. 32), elsewhere N(0, sigma^2 I). ``Z`` and ``V`` have a capacity of columns;
    the sweep stops before a row that could overflow it and returns (next row, n_features)
    so that the caller can grow the arrays and continue. ``counts`` holds m_k, ``x`` (CSR
    order) is scratch for the scores.
    """
    cdef Py_ssize_t N = indptr.shape[0] - 1
    cdef Py_ssize_t M = V.shape[0]
    cdef Py_ssize_t cap = Z.shape[1]
    cdef Py_ssize_t i, p, k, t, j, a, b_, K = n_features
    cdef double zik, mk, logit, total, mx, u, b, g, mean, gam, s, s2 = sigma * sigma
    cdef double* logp
    cdef double* eps
    cdef int knew, failed = 0
    cdef Rng rng
    status_arr = np.zeros(N, dtype=np.intc)
    cdef int[::1] status = status_arr
    logp = <double*> malloc((kappa + 1) * sizeof(double))
    eps = <double*> malloc((kappa + 1) * sizeof(double))
    i = start
    with nogil:
        while i < N:
            if K + kappa > cap:
                break
            status[i] = item_status(SITE_M3F_FEATURES, i, logp != NULL and eps != NULL)
            if status[i] != 0:
                break
            rng_seed(&rng, seeds[i])
            a = indptr[i]
            b_ = indptr[i + 1]
            for p in range(a, b_):
                j = indices[p]
                s = 0.0
                for k in range(K):
                    if Z[i, k] != 0.0:
                        s += V[j, k]
                x[p] = s
            for k in range(K):
                zik = Z[i, k]
                mk = counts[k] - zik
                if mk <= 0.0:
                    # a feature of row i alone: left in place (it is in the scores these
                    # Bernoulli conditionals read), then redrawn with the others below
                    continue
                logit = (log(mk) - log(<double> N - mk)
                         + _flip_delta(a, b_, &indices[0], &cv1[0], &cv2[0], &x[0], V, k, zik))
                if not isfinite(logit):
                    failed = 1
                    break
                if _bernoulli_logit(&rng, logit):
                    if zik == 0.0:
                        Z[i, k] = 1.0
                        counts[k] += 1
                        for p in range(a, b_):
                            x[p] += V[indices[p], k]
                elif zik != 0.0:
                    Z[i, k] = 0.0
                    counts[k] -= 1
                    for p in range(a, b_):
                        x[p] -= V[indices[p], k]
            if failed:
                status[i] = FAIL_NOT_FINITE
                break
            # the features of row i alone, dropped together once the shared ones are drawn,
            # and redrawn as new features from their conditional given those. Dropped in the
            # loop above, the Bernoulli draws after the first of them read the scores without
            # it, a state the chain is not in: the split between shared and own features
            # was biased (two users, each rating one item: E[own] 1.071 for the exact 1.118)
            for k in range(K):
                if Z[i, k] != 0.0 and counts[k] == 1:
                    Z[i, k] = 0.0
                    counts[k] = 0
                    for p in range(a, b_):
                        x[p] -= V[indices[p], k]
            # number of new features
            _new_feature_logp(&cv1[a], &cv2[a], &x[a], b_ - a, alpha, N, sigma, kappa, logp)
            mx = logp[0]
            for t in range(1, kappa + 1):
                if logp[t] > mx:
                    mx = logp[t]
            total = 0.0
            for t in range(kappa + 1):
                logp[t] = exp(logp[t] - mx)
                total += logp[t]
            if not isfinite(total):
                # a log-probability that is NaN or infinite (every one -inf included)
                status[i] = FAIL_NOT_FINITE
                break
            u = rng_uniform(&rng) * total
            knew = 0
            while knew < kappa and u >= logp[knew]:
                u -= logp[knew]
                knew += 1
            if knew > 0:
                for j in range(M):
                    for t in range(knew):
                        V[j, K + t] = sigma * rng_normal(&rng)
                for t in range(knew):
                    Z[i, K + t] = 1.0
                    counts[K + t] = 1
                # eq. 32: X_k^-1 = sigma^2 (I - q 1 1'), q = b sigma^2 / (1 + k b sigma^2);
                # v = mean 1 + sigma (eps - gam 1 1'eps) has that covariance for
                # gam = (1 - 1 / sqrt(1 + k b sigma^2)) / k.
                for p in range(a, b_):
                    j = indices[p]
                    b = cv2[p]
                    g = cv1[p] + cv2[p] * x[p]
                    mean = -g / (knew * b + 1.0 / s2)
                    gam = (1.0 - 1.0 / sqrt(1.0 + knew * b * s2)) / knew
                    s = 0.0
                    for t in range(knew):
                        eps[t] = rng_normal(&rng)
                        s += eps[t]
                    for t in range(knew):
                        V[j, K + t] = mean + sigma * (eps[t] - gam * s)
                        x[p] += V[j, K + t]
                K += knew
            i += 1
    free(logp)
    free(eps)
    raise_for_status(status_arr, "The feature sweep", item="user", advice=_ADVICE)
    return i, K


def sample_binary_fixed(
    const int[::1] indptr, const int[::1] indices, const double[::1] cv1,
    const double[::1] cv2, double[:, ::1] Z, const double[:, ::1] V,
    const double[::1] prior_logit, double[::1] x, const uint64_t[::1] seeds, int n_threads,
):
    """Gibbs sweep over binary rows with a fixed set of features (new users of iPM3F).

    Each Z_ik by its Bernoulli conditional with prior log odds ``prior_logit[k]`` and the
    likelihood ratio of ``_flip_delta``; the rows are independent, so they run in parallel.
    """
    cdef Py_ssize_t N = indptr.shape[0] - 1
    cdef Py_ssize_t K = V.shape[1]
    cdef Py_ssize_t i, p, k, a, b_
    cdef double s, zik, logit
    cdef Rng* rng
    status_arr = np.zeros(N, dtype=np.intc)
    cdef int[::1] status = status_arr
    with nogil, parallel(num_threads=n_threads):
        rng = <Rng*> malloc(sizeof(Rng))
        for i in prange(N, schedule='static'):
            status[i] = item_status(SITE_M3F_NEW_USER_FEATURES, i, rng != NULL)
            if status[i] != 0:
                continue
            rng_seed(rng, seeds[i])
            a = indptr[i]
            b_ = indptr[i + 1]
            for p in range(a, b_):
                s = 0.0
                for k in range(K):
                    if Z[i, k] != 0.0:
                        s = s + V[indices[p], k]
                x[p] = s
            for k in range(K):
                zik = Z[i, k]
                logit = prior_logit[k] + _flip_delta(a, b_, &indices[0], &cv1[0], &cv2[0],
                                                     &x[0], V, k, zik)
                if not isfinite(logit):
                    status[i] = FAIL_NOT_FINITE
                    break
                if _bernoulli_logit(rng, logit) != (zik != 0.0):
                    Z[i, k] = 1.0 - zik
                    for p in range(a, b_):
                        x[p] = x[p] + (1.0 - 2.0 * zik) * V[indices[p], k]
        free(rng)
    raise_for_status(status_arr, "The feature draw of new users", item="user", advice=_ADVICE)
