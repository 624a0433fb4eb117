# The weighted row sums of a CoGAPS proposal (s and s mu), vectorised with the same bits on
# every machine: see _row_sums.h.

cdef extern from "_row_sums.h" nogil:
    void cg_row_sums(const double* o1, const double* o2, const double* res, const double* w,
                     Py_ssize_t n, double* s, double* smu)
