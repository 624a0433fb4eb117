"""What several test files share: forcing the parallel paths."""

import contextlib


@contextlib.contextmanager
def every_path_parallel():
    """Send every CoGAPS batch and transpose, and every kernel call sized by
    ``kernel_threads``, to its parallel path however small the work: the thresholds choose
    the path, never the result, and the tests check that on small problems."""
    from sklearn_cogaps._cogaps._queue import _set_parallel_thresholds_for_tests
    from sklearn_cogaps._utils import _openmp_helpers

    previous = _set_parallel_thresholds_for_tests(min_work=0, min_entries=0)
    per_thread = _openmp_helpers.MIN_WORK_PER_THREAD
    _openmp_helpers.MIN_WORK_PER_THREAD = 1
    try:
        yield
    finally:
        _openmp_helpers.MIN_WORK_PER_THREAD = per_thread
        _set_parallel_thresholds_for_tests(*previous)
