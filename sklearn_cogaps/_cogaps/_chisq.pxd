# Dense and sparse helpers of the sampler; see _chisq.pyx.
from cython cimport floating

cdef void _transpose(const floating* src, Py_ssize_t n, Py_ssize_t m, Py_ssize_t lds,
                     floating* dst, Py_ssize_t ldd, int n_threads) noexcept nogil
cdef void _residual_rows(const floating* X, const double* M, const double* Ot,
                        Py_ssize_t n_rows, Py_ssize_t n_cols, Py_ssize_t K, floating* R,
                        Py_ssize_t ldr, double* buf, int n_threads) noexcept nogil
