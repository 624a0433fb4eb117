"""What several test files share: where the fixtures are, and forcing parallel paths.

Shared fixtures (real data and peer runs):

The ``shared`` folder is looked for in ``SKC_SHARED`` first, then beside the repository
and in every directory above it, so the tests find it from a checkout at any depth below
the directory that holds it.
"""

import contextlib
import os
from pathlib import Path


def shared_fixture(name):
    """The folder ``shared/fixtures/<name>``, wherever ``shared`` is.

    Parameters
    ----------
    name : str
        The fixture's folder under ``shared/fixtures``.

    Returns
    -------
    path : pathlib.Path
        The first existing folder among ``$SKC_SHARED/fixtures/<name>`` and
        ``<parent>/shared/fixtures/<name>`` for every parent of this file; if none exists,
        the place beside the repository, so that a test reading it fails with the path it
        looked at.
    """
    places = []
    if os.environ.get("SKC_SHARED"):
        places.append(Path(os.environ["SKC_SHARED"]))
    here = Path(__file__).resolve()
    places += [parent / "shared" for parent in here.parents]
    for shared in places:
        if (shared / "fixtures" / name).is_dir():
            return shared / "fixtures" / name
    return here.parents[1].parent / "shared" / "fixtures" / name


@contextlib.contextmanager
def every_path_parallel():
    """Send every CoGAPS batch and transpose, and every kernel call sized by
    ``kernel_threads``, to its parallel path however small the work: the thresholds choose
    the path, never the result, and the tests check that on small problems."""
    from sklearn_cogaps._cogaps._queue import _set_parallel_thresholds
    from sklearn_cogaps._utils import _openmp_helpers

    previous = _set_parallel_thresholds(min_work=0, min_entries=0)
    per_thread = _openmp_helpers.MIN_WORK_PER_THREAD
    _openmp_helpers.MIN_WORK_PER_THREAD = 1
    try:
        yield
    finally:
        _openmp_helpers.MIN_WORK_PER_THREAD = per_thread
        _set_parallel_thresholds(*previous)
