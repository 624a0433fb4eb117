"""How many OpenMP threads the kernels may use."""

from ._openmp_helpers cimport SKC_OPENMP_ENABLED, omp_get_max_threads


def openmp_enabled():
    """Whether the package was compiled with OpenMP.

    Returns
    -------
    enabled : bool
        True when the compiled kernels can run on several threads.
    """
    return bool(SKC_OPENMP_ENABLED)


def effective_n_threads():
    """Number of OpenMP threads a kernel started now would use.

    This is OpenMP's maximum for the calling thread, so it follows ``OMP_NUM_THREADS``
    and ``threadpoolctl.threadpool_limits(..., user_api="openmp")``. It is 1 when the
    package was built without OpenMP.

    Returns
    -------
    n_threads : int
        At least 1.
    """
    return max(1, int(omp_get_max_threads()))
