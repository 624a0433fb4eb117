# Dense and sparse helpers of the sampler; see _cogaps_chisq.pyx.
cdef void _transpose(const double* src, Py_ssize_t n, Py_ssize_t m, double* dst,
                     int n_threads) noexcept nogil
