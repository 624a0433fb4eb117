"""Dense and sparse helpers of the sampler: the residual, chi-squares and transposes,
parallel over rows (each output element is written by one thread, and per-row partial sums
are added in row order, so results do not depend on the number of threads); and the
per-entry arrays of the sparse-data model (000_f0854fe1e49e50a3, section 3).
"""

import numpy as np

from cython.parallel cimport prange
from libc.math cimport fmax
from libc.stdint cimport int64_t, int32_t

from ._cogaps_stats cimport _entry_precision


cdef void _transpose(const double* src, Py_ssize_t n, Py_ssize_t m, double* dst,
                     int n_threads) noexcept nogil:
    """dst (m x n) = src (n x m)^T, by 32 x 32 tiles."""
    cdef Py_ssize_t ib, jb, i, j, i_end, j_end, n_blocks = (n + 31) // 32
    for ib in prange(n_blocks, schedule='static', num_threads=n_threads):
        i_end = min(ib * 32 + 32, n)
        jb = 0
        while jb < m:
            j_end = min(jb + 32, m)
            for i in range(ib * 32, i_end):
                for j in range(jb, j_end):
                    dst[j * n + i] = src[i * m + j]
            jb = jb + 32


def residual(const double[:, ::1] X, const double[:, ::1] W, const double[:, ::1] Ht,
             int n_threads=1):
    """R = X - W Ht^T, computed row by row (deterministic for any thread count).

    Parameters
    ----------
    X : ndarray of shape (n_samples, n_features)
    W : ndarray of shape (n_samples, n_components)
    Ht : ndarray of shape (n_features, n_components)
    n_threads : int, default=1

    Returns
    -------
    R : ndarray of shape (n_samples, n_features)
    """
    cdef Py_ssize_t n = X.shape[0], m = X.shape[1], K = W.shape[1], i, j, k
    cdef double acc
    out = np.empty((n, m), dtype=np.float64)
    cdef double[:, ::1] R = out
    with nogil:
        for i in prange(n, schedule='static', num_threads=n_threads):
            for j in range(m):
                acc = X[i, j]
                for k in range(K):
                    acc = acc - W[i, k] * Ht[j, k]
                R[i, j] = acc
    return out


def fit_chi_square(const double[:, ::1] X, const double[:, ::1] prec,
                   const double[:, ::1] W, const double[:, ::1] Ht, int n_threads=1):
    """Chi-square of W Ht^T against X, row by row, without storing the product.

    Parameters
    ----------
    X : ndarray of shape (n_samples, n_features)
    prec : ndarray of shape (n_samples, n_features)
        Precisions, 1 / sigma**2.
    W : ndarray of shape (n_samples, n_components)
    Ht : ndarray of shape (n_features, n_components)
    n_threads : int, default=1

    Returns
    -------
    chisq : float
    """
    cdef Py_ssize_t n = X.shape[0], m = X.shape[1], K = W.shape[1], i, j, k
    cdef double acc, r
    partial = np.zeros(n, dtype=np.float64)
    cdef double[::1] part = partial
    with nogil:
        for i in prange(n, schedule='static', num_threads=n_threads):
            acc = 0.0
            for j in range(m):
                r = X[i, j]
                for k in range(K):
                    r = r - W[i, k] * Ht[j, k]
                acc = acc + r * r * prec[i, j]
            part[i] = acc
    cdef double total = 0.0
    for i in range(n):
        total += part[i]
    return total


def chi_square(const double[:, ::1] R, const double[:, ::1] prec, int n_threads=1):
    """Sum of R**2 * prec, with per-row partial sums added in row order.

    Parameters
    ----------
    R : ndarray of shape (n, m)
        Residuals.
    prec : ndarray of shape (n, m)
        Precisions, 1 / sigma**2.
    n_threads : int, default=1

    Returns
    -------
    chisq : float
    """
    cdef Py_ssize_t n = R.shape[0], m = R.shape[1], i, j
    partial = np.zeros(n, dtype=np.float64)
    cdef double[::1] part = partial
    cdef double acc
    with nogil:
        for i in prange(n, schedule='static', num_threads=n_threads):
            acc = 0.0
            for j in range(m):
                acc = acc + R[i, j] * R[i, j] * prec[i, j]
            part[i] = acc
    cdef double total = 0.0
    for i in range(n):
        total += part[i]
    return total


def _sparse_orientation(csr):
    """The arrays of the sparse model for one orientation of the data, a canonical CSR
    matrix (sorted indices, no duplicates, no explicit zeros): row pointers (int64), column
    indices (int32) and the stored values (float64). Nothing is copied when the matrix
    already holds these types; the weights of the entries are computed when needed.
    """
    if max(csr.shape) > np.iinfo(np.int32).max:
        raise ValueError(
            f"The sparse-data model indexes rows and columns with 32-bit integers; a matrix "
            f"of shape {csr.shape} needs more. Split the data, or use dense input."
        )
    return (np.asarray(csr.indptr, dtype=np.int64), np.asarray(csr.indices, dtype=np.int32),
            np.asarray(csr.data, dtype=np.float64))


def sparse_chi_square(data, const double[:, ::1] W, const double[:, ::1] Ht, double sigma0,
                      int n_threads=1, bint poisson=False):
    """Chi-square of W Ht^T against sparse data under the sparse model (section 3).

    sum_ij w_ij (x_ij - ap_ij)^2 = w0 sum_i W_i^T (Ht^T Ht) W_i
    + sum_{stored ij} [w_ij (x_ij - ap_ij)^2 - w0 ap_ij^2].

    Parameters
    ----------
    data : tuple
        The row orientation from ``_sparse_orientation``.
    W : ndarray of shape (n_samples, n_components)
    Ht : ndarray of shape (n_features, n_components)
    sigma0 : float
        Standard deviation of a zero, relative one of a non-zero.
    n_threads : int, default=1
    poisson : bool, default=False
        Standard deviation ``max(sqrt(x), 1)`` of a non-zero instead (with sigma0 = 1).

    Returns
    -------
    chisq : float
    """
    cdef const int64_t[::1] indptr = data[0]
    cdef const int32_t[::1] indices = data[1]
    cdef const double[::1] values = data[2]
    cdef Py_ssize_t n = W.shape[0], K = W.shape[1], i, k, l, idx, j
    cdef double w0 = 1.0 / (sigma0 * sigma0), acc, ap, w, x, quad
    Z2_arr = np.asarray(Ht).T @ np.asarray(Ht)
    cdef const double[:, ::1] Z2 = np.ascontiguousarray(Z2_arr)
    partial = np.zeros(n, dtype=np.float64)
    cdef double[::1] part = partial
    with nogil:
        for i in prange(n, schedule='static', num_threads=n_threads):
            quad = 0.0
            for k in range(K):
                for l in range(K):
                    quad = quad + W[i, k] * Z2[k, l] * W[i, l]
            acc = w0 * quad
            for idx in range(indptr[i], indptr[i + 1]):
                j = indices[idx]
                ap = 0.0
                for k in range(K):
                    ap = ap + W[i, k] * Ht[j, k]
                x = values[idx]
                w = _entry_precision(x, sigma0, poisson)
                acc = acc + w * (x - ap) * (x - ap) - w0 * ap * ap
            part[i] = acc
    cdef double total = 0.0
    for i in range(n):
        total += part[i]
    return total
