"""What several test files share: small data sets of each kind, forcing the parallel
paths, and a LocalCluster of worker processes."""

import contextlib

import numpy as np

_RNG = np.random.RandomState(0)
#: Counts of two components, 24 samples x 15 features.
COUNTS = _RNG.poisson(_RNG.gamma(1.0, 2.0, (24, 2)) @ _RNG.gamma(1.0, 1.0, (2, 15))).astype(float)
#: Two clusters of 40 points in 2-D, and noise variances for them.
POINTS = np.vstack([_RNG.normal(-2, 0.5, (40, 2)), _RNG.normal(2, 0.5, (40, 2))])
VARIANCES = _RNG.uniform(0.1, 0.5, POINTS.shape)
#: Ratings 1..5 of 30 users and 20 items, about half observed (NaN elsewhere).
RATINGS = np.where(
    _RNG.uniform(size=(30, 20)) < 0.5, np.nan, _RNG.randint(1, 6, (30, 20)).astype(float)
)


def gamma_poisson_counts(n, p, K, seed):
    """Poisson counts of ``K`` Gamma-distributed programs, as a CSR matrix of floats."""
    from scipy import sparse

    rng = np.random.default_rng(seed)
    mean = rng.gamma(0.3, 2.0, (n, K)) @ rng.gamma(0.3, 2.0, (K, p))
    return sparse.csr_matrix(rng.poisson(mean).astype(np.float64))


def partial_fit_epochs(est, X, n_epochs, batch, seed=0):
    """``est.partial_fit`` on the rows of X in batches of ``batch`` rows, in a new random
    order every epoch."""
    n = X.shape[0]
    rng = np.random.default_rng(seed)
    for _ in range(n_epochs):
        order = rng.permutation(n)
        for a in range(0, n, batch):
            est.partial_fit(X[np.sort(order[a : a + batch])])
    return est


@contextlib.contextmanager
def local_cluster(n_workers):
    """A ``distributed.Client`` of a LocalCluster of ``n_workers`` worker processes with one
    thread each (the test is skipped without dask[distributed])."""
    import pytest

    distributed = pytest.importorskip("distributed", reason="dask[distributed] is an extra")
    with (
        distributed.LocalCluster(n_workers=n_workers, processes=True, threads_per_worker=1,
                                 host="127.0.0.1", dashboard_address=None) as cluster,
        distributed.Client(cluster) as client,
    ):  # fmt: skip
        # the cluster's start returns before every worker has registered with the
        # scheduler, and what is sized by the workers (a fit's blocks) counts them
        client.wait_for_workers(n_workers, timeout=120)
        yield client


def ran_on_every_worker(client, module):
    """Whether every worker of ``client`` imported ``module`` (it ran tasks of it)."""
    ran = client.run(lambda: module in __import__("sys").modules)
    return all(ran.values())


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


def interrupt_cogaps_at(monkeypatch, call):
    """Make CoGAPS's chain raise KeyboardInterrupt (Ctrl-C) at its ``call``-th iteration,
    after ``call - 1`` completed ones; returns the sampler class to restore."""
    from sklearn_cogaps._cogaps import _chain

    original = _chain.GibbsSampler

    class InterruptedSampler(original):
        calls = 0

        def iterate(self, tau, n_threads=1):
            InterruptedSampler.calls += 1
            if InterruptedSampler.calls == call:
                raise KeyboardInterrupt
            return super().iterate(tau, n_threads)

    monkeypatch.setattr(_chain, "GibbsSampler", InterruptedSampler)
    return original
