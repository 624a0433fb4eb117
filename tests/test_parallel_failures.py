"""A failure inside a parallel loop reaches the caller as one exception, whichever thread
met it: every kernel with a prange that can fail records a status per item and raises after
the loop. A test-only hook forces a chosen item of a chosen loop to fail."""

import numpy as np
import pytest
from numpy.testing import assert_array_equal
from scipy import sparse
from threadpoolctl import threadpool_limits

from sklearn_cogaps import (
    CoGAPS,
    ExtremeDeconvolution,
    HierarchicalPMF,
    WeightedBackgroundPMF,
)
from sklearn_cogaps._ebpm import ebpm
from sklearn_cogaps._utils import _openmp_helpers
from sklearn_cogaps._utils._status import (
    CODES,
    SITES,
    NonFiniteError,
    _set_fault,
    raise_for_status,
)

RNG = np.random.default_rng(0)
COUNTS = RNG.poisson(3.0, size=(24, 30)).astype(float)
POINTS = RNG.normal(size=(600, 2))  # 2 chunks of points in the E-step


def _cogaps():
    return CoGAPS(n_components=2, max_iter=4, random_state=0).fit(COUNTS)


def _hpmf(**kw):
    return HierarchicalPMF(n_components=2, max_iter=3, tol=0.0, random_state=0, **kw)


def _wbpmf():
    return WeightedBackgroundPMF(n_components=2, max_iter=2, tol=0.0, random_state=0)


def _xd():
    return ExtremeDeconvolution(n_components=2, max_iter=2, tol=0.0, random_state=0)


# site -> (what runs it, how its items are named, how many items it has)
RUNS = {
    "cogaps_rows": (lambda fitted: fitted.transform(COUNTS), _cogaps, "row", 24),
    "hpmf_counts": (lambda est: est.fit(COUNTS), _hpmf, "index", 24),
    "hpmf_transform": (lambda fitted: fitted.transform(COUNTS),
                       lambda: _hpmf().fit(COUNTS), "row", 24),
    "hpmf_sample": (lambda est: est.fit(COUNTS), lambda: _hpmf(solver="pathwise"),
                    "index", 24),
    "wbpmf_counts": (lambda est: est.fit(COUNTS), _wbpmf, "chunk", 24),
    "wbpmf_data_term": (lambda est: est.fit(COUNTS), _wbpmf, "row", 24),
    "ebpm_posterior": (lambda _: ebpm(COUNTS[0], np.ones(30), "gamma_mixture"),
                       lambda: None, "observation", 30),
    "xd_estep": (lambda est: est.fit(POINTS), _xd, "chunk", 2),
    "xd_log_prob": (lambda fitted: fitted.score_samples(POINTS),
                    lambda: _xd().fit(POINTS), "point", 600),
}


@pytest.fixture
def fault():
    """Set a fault for one test, always turned off afterwards."""
    previous = _set_fault()
    yield _set_fault
    _set_fault(*previous)


@pytest.fixture
def every_thread(monkeypatch):
    """Let every kernel use every thread allowed, even on these small problems."""
    monkeypatch.setattr(_openmp_helpers, "MIN_WORK_PER_THREAD", 1)


def test_every_site_is_tested():
    assert set(RUNS) == set(SITES)


def test_the_hook_is_off_by_default():
    # a fresh interpreter state: no site, no item
    assert _set_fault() == (None, -1, "no_memory")


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
@pytest.mark.parametrize("site", sorted(RUNS))
@pytest.mark.parametrize("n_threads", [1, 2])
@pytest.mark.parametrize(("where", "code"), [("non-last", "no_memory"), ("last", "not_finite")])
def test_a_failing_item_reaches_the_caller(site, n_threads, where, code, fault, every_thread):
    """With two threads and a static schedule, the first item is met by the first thread
    and the last by the second, so both threads' failures are seen (the CoGAPS rows are
    scheduled dynamically: any thread may meet either)."""
    run, make, item, n_items = RUNS[site]
    target = make()
    index = 0 if where == "non-last" else n_items - 1
    error = MemoryError if code == "no_memory" else NonFiniteError
    with threadpool_limits(n_threads, user_api="openmp"):
        fault(site, index, code)
        with pytest.raises(error, match=rf"of 1 {item}\(s\) \(first: {item} {index}\)"):
            run(target)
        fault(None)
        run(target)  # the same call succeeds once the fault is gone


def test_the_first_of_several_failures_is_named(fault, every_thread):
    status = np.array([0, 0, -2, 0, -1, -2], dtype=np.intc)
    with pytest.raises(NonFiniteError, match=r"of 3 row\(s\) \(first: row 2\)"):
        raise_for_status(status, "The pass")
    raise_for_status(np.array([0, 3, 0]), "The pass")  # counts >= 0 are successes
    with pytest.raises(MemoryError, match="^The pass could not allocate"):
        raise_for_status(-1, "The pass", item=None)
    with pytest.raises(KeyError, match="custom"):
        raise_for_status(status, "The pass", advice={-2: lambda i: KeyError(f"custom {i}")})


def test_a_non_finite_failure_is_a_value_error_too():
    assert issubclass(NonFiniteError, ValueError)
    assert issubclass(NonFiniteError, FloatingPointError)


def test_the_hook_refuses_unknown_names(fault):
    with pytest.raises(ValueError, match="site must be None or one of"):
        fault("nowhere", 0)
    with pytest.raises(ValueError, match="code must be one of"):
        fault("hpmf_counts", 0, "bad luck")
    assert set(CODES) == {"no_memory", "not_finite", "not_positive_definite"}


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_a_cholesky_failure_of_one_point_names_the_point_and_component(fault, every_thread):
    est = _xd().fit(POINTS)
    fault("xd_log_prob", 5, "not_positive_definite")
    with pytest.raises(ValueError, match="not positive definite"):
        est.score_samples(POINTS)


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_no_fault_gives_the_same_bits_for_one_and_two_threads(every_thread):
    results = []
    for n in (1, 2):
        with threadpool_limits(n, user_api="openmp"):
            results.append(_hpmf().fit(COUNTS).components_)
    assert_array_equal(*results)
