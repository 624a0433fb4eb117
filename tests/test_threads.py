"""One thread policy: OpenMP's limit, threadpoolctl, the container's CPU quota, the work."""

import numpy as np
import pytest
from threadpoolctl import threadpool_limits

from sklearn_cogaps._utils import _openmp_helpers
from sklearn_cogaps._utils._openmp_helpers import (
    MIN_WORK_PER_THREAD,
    cgroup_cpu_limit,
    effective_n_threads,
    kernel_threads,
)


def _write(root, rel, text):
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


@pytest.mark.parametrize(
    "files, expected",
    [
        ({"cpu.max": "150000 100000\n"}, 1.5),
        ({"cpu.max": "max 100000\n"}, None),
        ({"cpu.max": "garbage\n"}, None),
        ({"cpu/cpu.cfs_quota_us": "200000\n", "cpu/cpu.cfs_period_us": "100000\n"}, 2.0),
        ({"cpu/cpu.cfs_quota_us": "-1\n", "cpu/cpu.cfs_period_us": "100000\n"}, None),
        ({"cpu/cpu.cfs_quota_us": "50000\n"}, None),  # no period: no quota known
        ({}, None),
    ],
)
def test_cgroup_quota_parsing(tmp_path, files, expected):
    for rel, text in files.items():
        _write(tmp_path, rel, text)
    assert cgroup_cpu_limit(str(tmp_path)) == expected


def test_v2_is_read_before_v1(tmp_path):
    _write(tmp_path, "cpu.max", "300000 100000")
    _write(tmp_path, "cpu/cpu.cfs_quota_us", "100000")
    _write(tmp_path, "cpu/cpu.cfs_period_us", "100000")
    assert cgroup_cpu_limit(str(tmp_path)) == 3.0


def test_quota_caps_the_threads(monkeypatch):
    monkeypatch.setattr(_openmp_helpers, "_container_cpus", lambda: 1)
    assert effective_n_threads() == 1
    assert kernel_threads(10**12) == 1


def test_threadpoolctl_and_work_size():
    with threadpool_limits(1, user_api="openmp"):
        assert effective_n_threads() == 1
        assert kernel_threads(10**12) == 1
    assert kernel_threads(0) == 1
    assert kernel_threads(MIN_WORK_PER_THREAD - 1, 8) == 1
    assert kernel_threads(3 * MIN_WORK_PER_THREAD, 8) == 3
    assert kernel_threads(100 * MIN_WORK_PER_THREAD, 2) == 2


def test_reconstruction_error_does_not_depend_on_blas_threads():
    """The divergence of scikit-learn's NMF sums its dot products in BLAS, in an order that
    follows BLAS's thread count: reconstruction_err_ moved in its last bit between
    OPENBLAS_NUM_THREADS=1 and 2 (or OMP_NUM_THREADS, which OpenBLAS also reads)."""
    from sklearn_cogaps import CoGAPS
    from sklearn_cogaps.datasets import make_patterns

    X = make_patterns(150, 600, 5, random_state=0)[0]
    model = CoGAPS(5, max_iter=5, random_state=0).fit(X)
    errors = set()
    for n in (1, 2):
        with threadpool_limits(n, user_api="blas"):
            model._set_reconstruction_err(X)
        errors.add(model.reconstruction_err_)
    assert len(errors) == 1


def test_cogaps_nmf_start_does_not_depend_on_blas_threads(monkeypatch):
    """The start's weighted NMF reduces over the rows and the columns of X in BLAS: its
    factors, then the chain's, moved in their last bits between OMP_NUM_THREADS=1 and 2,
    which OpenBLAS also reads. The start now runs on one BLAS thread, whatever the limit
    around the fit."""
    from sklearn_cogaps import CoGAPS
    from sklearn_cogaps._cogaps import _chain
    from sklearn_cogaps.datasets import make_patterns

    X = make_patterns(n_samples=200, n_features=2000, n_components=5, random_state=0)[0]
    seen, starts = [], []
    original = _chain.nmf_start

    def recording(*args):
        seen.append(threadpool_info_blas())
        starts.append(original(*args))
        return starts[-1]

    monkeypatch.setattr(_chain, "nmf_start", recording)
    for n in (2, 1):
        with threadpool_limits(n, user_api="blas"):
            CoGAPS(5, max_iter=1, random_state=0).fit(X)
    assert seen == [1, 1] or not any(seen)  # no BLAS library found: nothing to limit
    np.testing.assert_array_equal(starts[0][0], starts[1][0])


def threadpool_info_blas():
    """The number of threads of the BLAS libraries loaded (their largest), or 0."""
    from threadpoolctl import threadpool_info

    return max((p["num_threads"] for p in threadpool_info() if p["user_api"] == "blas"),
               default=0)  # fmt: skip
