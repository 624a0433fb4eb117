"""Dense and sparse helpers of the sampler: the residual, chi-squares and transposes,
parallel over rows (each output element is written by one thread, and per-row partial sums
are added in row order, so results do not depend on the number of threads); and the
per-entry arrays of the sparse-data model (Sherman, Gao & Fertig 2019, section 3).

The data, residual and precision are double or float (``floating``, the storage type of a
float32 fit); matrices, products and sums are double in both cases.
"""

import numpy as np

from cython cimport floating
from cython.parallel cimport prange, threadid
from libc.math cimport fmax
from libc.stdint cimport int64_t, int32_t

from ._row_sums cimport cg_residual_row_f64, cg_residual_row_f32
from ._stats cimport _entry_precision



cdef extern from "_transpose.h" nogil:
    enum: CG_TILE_ROWS
    enum: CG_STREAM_MIN_BYTES
    void cg_transpose_rows_f64(const double* src, Py_ssize_t n, Py_ssize_t m, Py_ssize_t lds,
                               double* dst, Py_ssize_t ldd, Py_ssize_t i0, Py_ssize_t i1)
    void cg_transpose_rows_f32(const float* src, Py_ssize_t n, Py_ssize_t m, Py_ssize_t lds,
                               float* dst, Py_ssize_t ldd, Py_ssize_t i0, Py_ssize_t i1)


cdef void _transpose(const floating* src, Py_ssize_t n, Py_ssize_t m, Py_ssize_t lds,
                     floating* dst, Py_ssize_t ldd, int n_threads) noexcept nogil:
    """dst (m x n) = src (n x m)^T, by tiles (_transpose.h), where consecutive rows start
    ``lds`` values apart in src and ``ldd`` in dst; the threads take blocks of rows of
    src, so each element of dst is written by one thread. On one thread without entering
    a parallel region (small residuals are transposed twice per iteration)."""
    cdef Py_ssize_t ib, n_blocks = (n + CG_TILE_ROWS - 1) // CG_TILE_ROWS
    if n_threads <= 1:
        _transpose_rows(src, n, m, lds, dst, ldd, 0, n)
        return
    for ib in prange(n_blocks, schedule='static', num_threads=n_threads):
        _transpose_rows(src, n, m, lds, dst, ldd, ib * CG_TILE_ROWS,
                        min(ib * CG_TILE_ROWS + CG_TILE_ROWS, n))


cdef inline void _transpose_rows(const floating* src, Py_ssize_t n, Py_ssize_t m,
                                 Py_ssize_t lds, floating* dst, Py_ssize_t ldd,
                                 Py_ssize_t i0, Py_ssize_t i1) noexcept nogil:
    if floating is float:
        cg_transpose_rows_f32(src, n, m, lds, dst, ldd, i0, i1)
    else:
        cg_transpose_rows_f64(src, n, m, lds, dst, ldd, i0, i1)


def residual_row_stride(n_rows, n_cols, itemsize):
    """The number of values between the starts of consecutive rows of a dense residual
    or precision matrix of the sampler: ``n_cols``, or a little more for a matrix that
    its transposes stream through memory (at least ``CG_STREAM_MIN_BYTES``) with rows
    of at least 256 bytes.

    A transpose writes (or reads) a few values in each of hundreds of consecutive rows
    of one matrix. Rows that do not start on a cache line share their first and last
    lines with their neighbours, so the stores write partial lines; and rows whose
    starts fall at nearly the same place modulo 4 KB compete for the same cache sets.
    Both slow a transpose down severalfold (the measurements are in
    doc/cogaps_scale.rst, "Rows padded for the transposes"). So the rows of a large
    matrix start a multiple of 64 bytes apart, the stride at least 128 bytes away from a
    multiple of 4 KB and its multiples by 2 to 8 at least 64 bytes away: at most three
    lines beyond the row's own. Shorter rows are left as they are: padding them moves
    more bytes than it saves.

    Parameters
    ----------
    n_rows, n_cols : int
        Shape of the matrix.
    itemsize : int
        Bytes per value (8 or 4).

    Returns
    -------
    stride : int
        Values from the start of a row to the start of the next, at least ``n_cols``.
    """
    if n_rows * n_cols * itemsize < CG_STREAM_MIN_BYTES or n_cols * itemsize < 256:
        return n_cols
    line, page = 64, 4096
    stride = -(-n_cols * itemsize // line) * line
    while any(min((k * stride) % page, page - (k * stride) % page) < (128 if k == 1 else 64)
              for k in range(1, 9)):
        stride += line
    return stride // itemsize


def padded_empty(shape, dtype):
    """A zeroed matrix of ``shape`` whose rows start ``residual_row_stride`` values apart,
    the first on a 64-byte boundary (a cache line), so that a transpose into it can use
    streaming stores (_transpose.h).

    Parameters
    ----------
    shape : tuple of two ints
    dtype : dtype

    Returns
    -------
    out : ndarray of the shape and dtype, the view of the first ``shape[1]`` columns of a
        larger zeroed buffer (C-contiguous when no padding is needed)
    """
    n_rows, n_cols = shape
    stride = residual_row_stride(n_rows, n_cols, np.dtype(dtype).itemsize)
    return aligned_empty((n_rows, stride), dtype, zeroed=True)[:, :n_cols]


def aligned_empty(shape, dtype, zeroed=False):
    """An uninitialised C-contiguous array whose first element lies on a 64-byte boundary
    (a cache line), so that a transpose into it can use streaming stores (_transpose.h).

    Parameters
    ----------
    shape : tuple of int
    dtype : dtype
    zeroed : bool, default=False
        Fill it with zeros (which the system does as the pages are first touched).

    Returns
    -------
    out : ndarray of the shape and dtype, a view of a slightly larger buffer
    """
    dtype = np.dtype(dtype)
    size = int(np.prod(shape)) * dtype.itemsize
    raw = (np.zeros if zeroed else np.empty)(size + 64, dtype=np.uint8)
    start = (-raw.ctypes.data) % 64
    return raw[start:start + size].view(dtype).reshape(shape)


def transpose(const floating[:, :] src, int n_threads=1, bint padded=False):
    """The transpose of ``src`` by the sampler's kernel, for tests and benchmarks.

    Parameters
    ----------
    src : ndarray of shape (n, m), float64 or float32
        Its rows contiguous, possibly further apart than their length (as
        :func:`padded_empty` lays them out).
    n_threads : int, default=1
    padded : bool, default=False
        Lay the result out as :func:`padded_empty` does, as the sampler keeps its
        residuals; else C-contiguous.

    Returns
    -------
    dst : ndarray of shape (m, n), of src's dtype
    """
    cdef Py_ssize_t n = src.shape[0], m = src.shape[1]
    dtype = np.asarray(src).dtype
    if n and m and src.strides[1] != dtype.itemsize:
        raise ValueError("the rows of src must be contiguous")
    dst_arr = (padded_empty if padded else aligned_empty)((m, n), dtype)
    cdef floating[:, :] dst = dst_arr
    if n and m:
        with nogil:
            _transpose(&src[0, 0], n, m, src.strides[0] // sizeof(floating), &dst[0, 0],
                       dst.strides[0] // sizeof(floating), n_threads)
    return dst_arr


cdef void _residual_rows(const floating* X, const double* M, const double* Ot,
                        Py_ssize_t n_rows, Py_ssize_t n_cols, Py_ssize_t K, floating* R,
                        Py_ssize_t ldr, double* buf, int n_threads) noexcept nogil:
    """R = X - M O^T (all n_rows x n_cols; M is n_rows x K and Ot = O^T is K x n_cols), row
    by row: each entry x - m_0 o_0 - m_1 o_1 - ... in double, rounded once when stored
    (_row_sums.h). The rows of R start ``ldr`` values apart (those of X are contiguous).
    ``buf`` holds n_threads x n_cols doubles of scratch."""
    cdef Py_ssize_t i
    for i in prange(n_rows, schedule='static', num_threads=n_threads):
        if floating is float:
            cg_residual_row_f32(X + i * n_cols, M + i * K, Ot, K, n_cols, R + i * ldr,
                                buf + threadid() * n_cols)
        else:
            cg_residual_row_f64(X + i * n_cols, M + i * K, Ot, K, n_cols, R + i * ldr,
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
        _residual_rows(&X[0, 0], w_p, h_p, n, m, K, &R[0, 0], m, &buf[0, 0], n_threads)
    return out


def fit_chi_square(const floating[:, ::1] X, const floating[:, :] prec,
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


def chi_square(const floating[:, :] R, const floating[:, :] prec, int n_threads=1):
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


def weighted_gradient_parts(data, const double[::1] wx, const double[::1] excess,
                            const double[:, ::1] A, const double[:, ::1] B, double[:, ::1] down,
                            double[:, ::1] up, int n_threads=1):
    """The stored entries' parts of the weighted NMF start's gradient in ``A`` (Lee & Seung's
    multiplicative updates under the sparse model's weights, Sherman, Gao & Fertig 2019,
    section 3), in one pass over the orientation ``data`` whose rows are A's:
    ``down[r] = sum_c wx[rc] B[c]`` and ``up[r] = sum_c excess[rc] (A[r] . B[c]) B[c]``.

    A thread owns whole rows and adds a row's entries in their stored order, so the sums do
    not depend on the number of threads; the product at an entry is formed where it is used
    (no array of the nnz products, no sparse matrix built per update)."""
    cdef const int64_t[::1] indptr = data[0]
    cdef const int32_t[::1] indices = data[1]
    cdef Py_ssize_t n = A.shape[0], K = A.shape[1], r, k, idx, c
    cdef double ap, a, e
    with nogil:
        for r in prange(n, schedule='static', num_threads=n_threads):
            for k in range(K):
                down[r, k] = 0.0
                up[r, k] = 0.0
            for idx in range(indptr[r], indptr[r + 1]):
                c = indices[idx]
                ap = 0.0
                for k in range(K):
                    ap = ap + A[r, k] * B[c, k]
                a = wx[idx]
                e = excess[idx] * ap
                for k in range(K):
                    down[r, k] = down[r, k] + a * B[c, k]
                    up[r, k] = up[r, k] + e * B[c, k]
