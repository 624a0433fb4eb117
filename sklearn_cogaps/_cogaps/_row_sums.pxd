# The weighted row sums of a CoGAPS proposal (s and s mu) and the residual row updates,
# vectorised with the same bits on every machine, for a residual and a precision stored in
# double (_f64) or in float (_f32): see _row_sums.h.

cdef extern from "_row_sums.h" nogil:
    void cg_row_sums_f64(const double* o1, const double* o2, const double* res,
                         const double* w, Py_ssize_t n, double* s, double* smu)
    void cg_row_sums_f32(const double* o1, const double* o2, const float* res,
                         const float* w, Py_ssize_t n, double* s, double* smu)
    void cg_residual_update_f64(double* res, const double* o, double delta, Py_ssize_t n)
    void cg_residual_update_f32(float* res, const double* o, double delta, Py_ssize_t n)
    void cg_residual_row_f64(const double* x, const double* m, const double* Ot,
                             Py_ssize_t K, Py_ssize_t n, double* res, double* buf)
    void cg_residual_row_f32(const float* x, const double* m, const double* Ot,
                             Py_ssize_t K, Py_ssize_t n, float* res, double* buf)
