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
    MaxMarginMF,
    WeightedBackgroundPMF,
)
from sklearn_cogaps._m3f import _fast as _m3f_fast
from sklearn_cogaps._poisson._ebpm import ebpm
from sklearn_cogaps._utils import _openmp_helpers
from sklearn_cogaps._utils._status import (
    CODES,
    SITES,
    NonFiniteError,
    _set_fault_for_tests,
    raise_for_status,
)

RNG = np.random.default_rng(0)
COUNTS = RNG.poisson(3.0, size=(24, 30)).astype(float)
POINTS = RNG.normal(size=(600, 2))  # 2 chunks of points in the E-step
# 24 users rate 30 items on 1..5, about 60 % of the pairs, every user and item at least once
RATINGS = np.where(RNG.uniform(size=(24, 30)) < 0.6, RNG.integers(1, 6, size=(24, 30)), np.nan)
RATINGS[np.arange(24), np.arange(24)] = 3.0
RATINGS[np.arange(6), np.arange(24, 30)] = 4.0


def _cogaps():
    return CoGAPS(n_components=2, max_iter=4, random_state=0).fit(COUNTS)


def _hpmf(**kw):
    return HierarchicalPMF(n_components=2, max_iter=3, tol=0.0, random_state=0, **kw)


def _wbpmf():
    return WeightedBackgroundPMF(n_components=2, max_iter=2, tol=0.0, random_state=0)


def _xd():
    return ExtremeDeconvolution(n_components=2, max_iter=2, tol=0.0, random_state=0)


def _m3f(prior="gaussian"):
    return MaxMarginMF(
        n_components=2, prior=prior, max_new_features=2, max_iter=2, burn_in=1, random_state=0
    )


def _rate_new_users(fitted):
    return fitted.predict_ratings(RATINGS, observed=RATINGS)


# site -> (what runs it, how its items are named, how many items it has)
RUNS = {
    "cogaps_rows": (lambda fitted: fitted.transform(COUNTS), _cogaps, "row", 24),
    "hpmf_counts": (lambda est: est.fit(COUNTS), _hpmf, "index", 24),
    "hpmf_transform": (
        lambda fitted: fitted.transform(COUNTS),
        lambda: _hpmf().fit(COUNTS),
        "row",
        24,
    ),
    "hpmf_sample": (lambda est: est.fit(COUNTS), lambda: _hpmf(solver="pathwise"), "index", 24),
    "wbpmf_counts": (lambda est: est.fit(COUNTS), _wbpmf, "chunk", 24),
    # the fit's bound: the sweep that also makes the next iteration's first topic
    "wbpmf_bound": (lambda est: est.fit(COUNTS), _wbpmf, "chunk", 24),
    # the bound of new rows (score)
    "wbpmf_data_term": (
        lambda fitted: fitted.score(COUNTS),
        lambda: _wbpmf().fit(COUNTS),
        "row",
        24,
    ),
    "ebpm_posterior": (
        lambda _: ebpm(COUNTS[0], np.ones(30), "gamma_mixture"),
        lambda: None,
        "observation",
        30,
    ),
    "xd_estep": (lambda est: est.fit(POINTS), _xd, "chunk", 2),
    "xd_log_prob": (
        lambda fitted: fitted.score_samples(POINTS),
        lambda: _xd().fit(POINTS),
        "point",
        600,
    ),
    "m3f_rows": (lambda est: est.fit(RATINGS), _m3f, "user", 24),
    "m3f_users": (lambda est: est.fit(RATINGS), _m3f, "user", 24),
    "m3f_items": (lambda est: est.fit(RATINGS), lambda: _m3f("ibp"), "item", 30),
    "m3f_features": (lambda est: est.fit(RATINGS), lambda: _m3f("ibp"), "user", 24),
    "m3f_new_user_features": (_rate_new_users, lambda: _m3f("ibp").fit(RATINGS), "user", 24),
    "wbpmf_rows": (
        lambda fitted: fitted.transform(COUNTS),
        lambda: _wbpmf().fit(COUNTS),
        "row",
        24,
    ),
}
# The loops that both priors run, each tested above with one prior, here with the other.
OTHER_PRIOR = {
    "m3f_rows": (lambda est: est.fit(RATINGS), lambda: _m3f("ibp"), "user", 24),
    "m3f_items": (lambda est: est.fit(RATINGS), _m3f, "item", 30),
    "m3f_users": (_rate_new_users, lambda: _m3f().fit(RATINGS), "user", 24),
}


@pytest.fixture
def fault():
    """Set a fault for one test, always turned off afterwards."""
    previous = _set_fault_for_tests()
    yield _set_fault_for_tests
    _set_fault_for_tests(*previous)


@pytest.fixture
def every_thread(monkeypatch):
    """Let every kernel use every thread allowed, even on these small problems."""
    monkeypatch.setattr(_openmp_helpers, "MIN_WORK_PER_THREAD", 1)


def test_every_site_is_tested():
    assert set(RUNS) == set(SITES)


def test_the_hook_is_off_by_default():
    # a fresh interpreter state: no site, no item
    assert _set_fault_for_tests() == (None, -1, "no_memory")


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
@pytest.mark.parametrize("site", sorted(RUNS))
@pytest.mark.parametrize("n_threads", [1, 2])
@pytest.mark.parametrize(("where", "code"), [("non-last", "no_memory"), ("last", "not_finite")])
def test_a_failing_item_reaches_the_caller(site, n_threads, where, code, fault, every_thread):
    """With two threads and a static schedule, the first item is met by the first thread
    and the last by the second, so both threads' failures are seen (the CoGAPS rows are
    scheduled dynamically: any thread may meet either)."""
    _fail_and_recover(RUNS[site], site, n_threads, where, code, fault)


@pytest.mark.parametrize("site", sorted(OTHER_PRIOR))
@pytest.mark.parametrize(("where", "code"), [("non-last", "no_memory"), ("last", "not_finite")])
def test_a_failing_m3f_item_reaches_the_caller_with_the_other_prior(
    site, where, code, fault, every_thread
):
    _fail_and_recover(OTHER_PRIOR[site], site, 2, where, code, fault)


def _fail_and_recover(run_spec, site, n_threads, where, code, fault):
    run, make, item, n_items = run_spec
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
def test_a_real_non_positive_definite_precision_is_reported(every_thread):
    # negative augmentation statistics make P = I + sum cv2 v v' indefinite: the Cholesky
    # factorisation of the rows that have them fails, whichever thread factorises them
    R = sparse.csr_matrix(np.nan_to_num(RATINGS))
    indptr, indices = R.indptr.astype(np.intc), R.indices.astype(np.intc)
    entry = np.arange(R.nnz, dtype=np.intc)
    other = np.ones((30, 2))
    cv1 = np.zeros(R.nnz)
    cv2 = np.full(R.nnz, 0.1)
    bad = slice(indptr[20], indptr[21])
    cv2[bad] = -10.0
    out = np.zeros((24, 2))
    seeds = np.arange(24, dtype=np.uint64)
    with threadpool_limits(2, user_api="openmp"):
        with pytest.raises(
            ValueError,
            match=r"The draw of the user factors of 1 user\(s\) "
            r"\(first: user 20\) met a covariance that is "
            r"not positive definite\. The hinge",
        ):
            _m3f_fast.sample_factors(
                indptr, indices, entry, cv1, cv2, other, 1.0, out, seeds, 2, "user"
            )
        cv2[bad] = np.nan
        with pytest.raises(ValueError, match=r"of 1 user\(s\) \(first: user 20\)"):
            _m3f_fast.sample_factors(
                indptr, indices, entry, cv1, cv2, other, 1.0, out, seeds, 2, "user"
            )


@pytest.mark.parametrize("prior", ["gaussian", "ibp"])
def test_an_overflowing_fit_of_max_margin_mf_raises(prior):
    # with a hinge weight this large the augmentation statistics (C^2 / 4 ...) overflow, and
    # the fit says so instead of returning NaN
    with pytest.raises(
        NonFiniteError,
        match="The threshold and augmentation pass of 24 "
        r"user\(s\) \(first: user 0\) met a value that "
        "is not finite. The hinge statistics",
    ):
        _m3f(prior).set_params(C=1e200).fit(RATINGS)
    with pytest.raises(ValueError, match="The threshold scale must be below 1.34e"):
        _m3f(prior).set_params(margin=1e306).fit(RATINGS)


def test_no_fault_gives_the_same_bits_for_one_and_two_threads(every_thread):
    results = []
    for n in (1, 2):
        with threadpool_limits(n, user_api="openmp"):
            results.append(_hpmf().fit(COUNTS).components_)
    assert_array_equal(*results)
