"""Dense and sparse helpers of the sampler: the residual, chi-squares and transposes,
parallel over rows (each output element is written by one thread, and per-row partial sums
are added in row order, so results do not depend on the number of threads); and the
per-entry arrays of the sparse-data model (000_f0854fe1e49e50a3, section 3).

The data, residual and precision are double or float (``floating``, the storage type of a
float32 fit); matrices, products and sums are double in both cases.
"""

import numpy as np

from cython cimport floating
from cython.parallel cimport prange, threadid
from libc.math cimport fmax
from libc.stdint cimport int64_t, int32_t

from ._row_sums cimport cg_residual_row_f64, cg_residual_row_f32
from ._cogaps_stats cimport _entry_precision



cdef extern from "_transpose.h" nogil:
    enum: CG_TILE_ROWS
    void cg_transpose_rows_f64(const double* src, Py_ssize_t n, Py_ssize_t m, double* dst,
                               Py_ssize_t i0, Py_ssize_t i1)
    void cg_transpose_rows_f32(const float* src, Py_ssize_t n, Py_ssize_t m, float* dst,
                               Py_ssize_t i0, Py_ssize_t i1)


cdef void _transpose(const floating* src, Py_ssize_t n, Py_ssize_t m, floating* dst,
                     int n_threads) noexcept nogil:
    """dst (m x n) = src (n x m)^T, by tiles (_transpose.h); the threads take blocks of
    rows of src, so each element of dst is written by one thread. On one thread without
    entering a parallel region (small residuals are transposed twice per iteration)."""
    cdef Py_ssize_t ib, n_blocks = (n + CG_TILE_ROWS - 1) // CG_TILE_ROWS
    if n_threads <= 1:
        _transpose_rows(src, n, m, dst, 0, n)
        return
    for ib in prange(n_blocks, schedule='static', num_threads=n_threads):
        _transpose_rows(src, n, m, dst, ib * CG_TILE_ROWS,
                        min(ib * CG_TILE_ROWS + CG_TILE_ROWS, n))


cdef inline void _transpose_rows(const floating* src, Py_ssize_t n, Py_ssize_t m,
                                 floating* dst, Py_ssize_t i0, Py_ssize_t i1) noexcept nogil:
    if floating is float:
        cg_transpose_rows_f32(src, n, m, dst, i0, i1)
    else:
        cg_transpose_rows_f64(src, n, m, dst, i0, i1)


def aligned_empty(shape, dtype):
    """An uninitialised C-contiguous array whose first element lies on a 64-byte boundary
    (a cache line), so that a transpose into it can use streaming stores (_transpose.h).

    Parameters
    ----------
    shape : tuple of int
    dtype : dtype

    Returns
    -------
    out : ndarray of the shape and dtype, a view of a slightly larger buffer
    """
    dtype = np.dtype(dtype)
    size = int(np.prod(shape)) * dtype.itemsize
    raw = np.empty(size + 64, dtype=np.uint8)
    start = (-raw.ctypes.data) % 64
    return raw[start:start + size].view(dtype).reshape(shape)


def transpose(const floating[:, ::1] src, int n_threads=1):
    """The transpose of ``src`` by the sampler's kernel, for tests and benchmarks.

    Parameters
    ----------
    src : ndarray of shape (n, m), float64 or float32, C-contiguous
    n_threads : int, default=1

    Returns
    -------
    dst : ndarray of shape (m, n), of src's dtype, C-contiguous
    """
    dst_arr = aligned_empty((src.shape[1], src.shape[0]), np.asarray(src).dtype)
    cdef floating[:, ::1] dst = dst_arr
    if src.shape[0] and src.shape[1]:
        with nogil:
            _transpose(&src[0, 0], src.shape[0], src.shape[1], &dst[0, 0], n_threads)
    return dst_arr


cdef void _residual_rows(const floating* X, const double* M, const double* Ot,
                        Py_ssize_t n_rows, Py_ssize_t n_cols, Py_ssize_t K, floating* R,
                        double* buf, int n_threads) noexcept nogil:
    """R = X - M O^T (all n_rows x n_cols; M is n_rows x K and Ot = O^T is K x n_cols), row
    by row: each entry x - m_0 o_0 - m_1 o_1 - ... in double, rounded once when stored
    (_row_sums.h). ``buf`` holds n_threads x n_cols doubles of scratch."""
    cdef Py_ssize_t i
    for i in prange(n_rows, schedule='static', num_threads=n_threads):
        if floating is float:
            cg_residual_row_f32(X + i * n_cols, M + i * K, Ot, K, n_cols, R + i * n_cols,
                                buf + threadid() * n_cols)
        else:
            cg_residual_row_f64(X + i * n_cols, M + i * K, Ot, K, n_cols, R + i * n_cols,
                                buf + threadid() * n_cols)


def residual(const floating[:, ::1] X, const double[:, ::1] W, const double[:, ::1] Ht,
             int n_threads=1):
    """R = X - W Ht^T, computed row by row (deterministic for any thread count), in X's
    type: each entry formed in double and rounded once.

    Parameters
    ----------
    X : ndarray of shape (n_samples, n_features), float64 or float32
    W : ndarray of shape (n_samples, n_components)
    Ht : ndarray of shape (n_features, n_components)
    n_threads : int, default=1

    Returns
    -------
    R : ndarray of shape (n_samples, n_features), of X's dtype
    """
    cdef Py_ssize_t n = X.shape[0], m = X.shape[1], K = W.shape[1]
    out = np.empty((n, m), dtype=np.float32 if floating is float else np.float64)
    if n == 0 or m == 0:
        return out
    Htt_arr = np.ascontiguousarray(np.asarray(Ht).T)
    buf_arr = np.empty((max(n_threads, 1), m))
    cdef floating[:, ::1] R = out
    cdef const double[:, ::1] Htt = Htt_arr
    cdef double[:, ::1] buf = buf_arr
    cdef const double* w_p = &W[0, 0] if K else NULL
    cdef const double* h_p = &Htt[0, 0] if K else NULL
    with nogil:
        _residual_rows(&X[0, 0], w_p, h_p, n, m, K, &R[0, 0], &buf[0, 0], n_threads)
    return out


def fit_chi_square(const floating[:, ::1] X, const floating[:, ::1] prec,
                   const double[:, ::1] W, const double[:, ::1] Ht, int n_threads=1):
    """Chi-square of W Ht^T against X, row by row, without storing the product.

    Parameters
    ----------
    X : ndarray of shape (n_samples, n_features), float64 or float32
    prec : ndarray of shape (n_samples, n_features), of X's dtype
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


def chi_square(const floating[:, ::1] R, const floating[:, ::1] prec, int n_threads=1):
    """Sum of R**2 * prec, with per-row partial sums added in row order.

    Parameters
    ----------
    R : ndarray of shape (n, m), float64 or float32
        Residuals.
    prec : ndarray of shape (n, m), of R's dtype
        Precisions, 1 / sigma**2.
    n_threads : int, default=1

    Returns
    -------
    chisq : float
    """
    cdef Py_ssize_t n = R.shape[0], m = R.shape[1], i, j
    partial = np.zeros(n, dtype=np.float64)
    cdef double[::1] part = partial
    cdef double acc, r
    with nogil:
        for i in prange(n, schedule='static', num_threads=n_threads):
            acc = 0.0
            for j in range(m):
                r = R[i, j]
                acc = acc + r * r * prec[i, j]
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
