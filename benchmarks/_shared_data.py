"""Where the benchmarks find the shared benchmark material (matrices, scoring functions and
peers' reference runs): the folder named by ``SKC_SHARED``, else a folder named ``shared``
beside the repository or above it. The package, its tests and its documentation never read
it; the benchmarks compare with peers on exactly those matrices."""

import os
import sys
from pathlib import Path


def shared_dir():
    """The shared folder: the first of ``SKC_SHARED`` and the folders named ``shared`` beside
    the repository or above it that holds ``bench/``; where it would be, if none does."""
    here = Path(__file__).resolve()
    places = [Path(os.environ["SKC_SHARED"])] if os.environ.get("SKC_SHARED") else []
    places += [parent / "shared" for parent in here.parents]
    for place in places:
        if (place / "bench").is_dir():
            return place
    return here.parents[2] / "shared"


def import_bench():
    """Put ``shared/bench`` on the import path (its modules build the matrices); a
    SystemExit that says how to give the folder when there is none."""
    bench = shared_dir() / "bench"
    if not bench.is_dir():
        raise SystemExit(
            "the benchmarks read the shared benchmark matrices (a folder 'shared' with "
            "'bench/' inside), which is neither in SKC_SHARED nor beside the repository; "
            "set SKC_SHARED."
        )
    if str(bench) not in sys.path:
        sys.path.insert(0, str(bench))
    return bench
