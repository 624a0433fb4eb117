# OpenMP entry points that exist whether or not the compiler has OpenMP: without it,
# the package runs every kernel on one thread.
cdef extern from *:
    """
    #ifdef _OPENMP
    #include <omp.h>
    #define SKC_OPENMP_ENABLED 1
    #else
    #define SKC_OPENMP_ENABLED 0
    static int omp_get_max_threads(void) { return 1; }
    static int omp_get_thread_num(void) { return 0; }
    static void omp_set_num_threads(int n) { (void)n; }
    #endif
    """
    int SKC_OPENMP_ENABLED
    int omp_get_max_threads() noexcept nogil
    int omp_get_thread_num() noexcept nogil
    void omp_set_num_threads(int n) noexcept nogil
