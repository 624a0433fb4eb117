"""How many OpenMP threads the kernels may use: one policy for every kernel."""

import math
import os
from functools import lru_cache

from ._openmp_helpers cimport SKC_OPENMP_ENABLED, omp_get_max_threads, omp_set_num_threads

# A thread is worth waking for this much work (in floating-point operations, roughly):
# below it, starting and joining the threads costs more than the sweep. Results never
# depend on the thread count, only the speed does.
MIN_WORK_PER_THREAD = 1_000_000


def openmp_enabled():
    """Whether the package was compiled with OpenMP.

    Returns
    -------
    enabled : bool
        True when the compiled kernels can run on several threads.
    """
    return bool(SKC_OPENMP_ENABLED)


def cgroup_cpu_limit(root="/sys/fs/cgroup"):
    """The CPU quota of the container, in CPUs, from its cgroup files.

    Reads cgroups v2 (``cpu.max``: ``"<quota> <period>"`` or ``"max <period>"``) and then
    v1 (``cpu/cpu.cfs_quota_us`` and ``cpu/cpu.cfs_period_us``, quota -1 for none).

    Parameters
    ----------
    root : str, default="/sys/fs/cgroup"
        The cgroup mount point.

    Returns
    -------
    limit : float or None
        ``quota / period``, or None when there is no quota (or no readable file).
    """
    def read(path):
        try:
            with open(path) as f:
                return f.read().split()
        except (OSError, ValueError):
            return None

    fields = read(os.path.join(root, "cpu.max"))
    if fields and len(fields) == 2:
        if fields[0] == "max":
            return None
        try:
            quota, period = float(fields[0]), float(fields[1])
        except ValueError:
            return None
        return quota / period if quota > 0 and period > 0 else None
    quota = read(os.path.join(root, "cpu", "cpu.cfs_quota_us"))
    period = read(os.path.join(root, "cpu", "cpu.cfs_period_us"))
    if quota and period:
        try:
            q, p = float(quota[0]), float(period[0])
        except ValueError:
            return None
        return q / p if q > 0 and p > 0 else None
    return None


@lru_cache(maxsize=1)
def _container_cpus():
    limit = cgroup_cpu_limit()
    return None if limit is None else max(1, math.ceil(limit))


def effective_n_threads():
    """Number of OpenMP threads a kernel started now may use.

    OpenMP's maximum for the calling thread, so it follows ``OMP_NUM_THREADS`` and
    ``threadpoolctl.threadpool_limits(..., user_api="openmp")``, capped by the CPU quota
    of the container (cgroups v1 or v2), rounded up. It is 1 when the package was built
    without OpenMP.

    Returns
    -------
    n_threads : int
        At least 1.
    """
    n = max(1, int(omp_get_max_threads()))
    cpus = _container_cpus()
    return n if cpus is None else min(n, cpus)


def limit_this_thread(n_threads):
    """Set OpenMP's limit of the calling thread (its ``nthreads-var``): the kernels that
    thread starts use at most ``n_threads`` threads. Other threads keep theirs; a thread
    that Python starts does not inherit the limit ``threadpoolctl`` set in another, so a
    pool's worker sets its own share with this. Nothing without OpenMP.

    Parameters
    ----------
    n_threads : int
        At least 1.
    """
    omp_set_num_threads(max(1, int(n_threads)))


def kernel_threads(work, n_threads=None):
    """Threads for one kernel call of ``work`` floating-point operations (roughly).

    One thread per ``MIN_WORK_PER_THREAD`` operations, at most ``n_threads``
    (:func:`effective_n_threads` when None), at least 1. Every kernel of the package
    gives the same bits for any thread count, so this decides only the speed.

    Parameters
    ----------
    work : int or float
        Estimated operations of the call.
    n_threads : int or None, default=None
        The cap; None for :func:`effective_n_threads`.

    Returns
    -------
    n_threads : int
        At least 1.
    """
    cap = effective_n_threads() if n_threads is None else max(1, int(n_threads))
    return int(max(1, min(cap, work // MIN_WORK_PER_THREAD)))
