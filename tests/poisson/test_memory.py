"""A sparse fit of HierarchicalPMF or WeightedBackgroundPMF holds the model's copies of the
counts, not more."""

import tracemalloc
import warnings

import numpy as np
from scipy import sparse

from sklearn_cogaps import HierarchicalPMF, WeightedBackgroundPMF


def _counts(nnz):
    rng = np.random.default_rng(0)
    n, p = 20_000, 5000
    rows = np.sort(rng.integers(0, n, nnz))
    X = sparse.csr_matrix(
        (rng.poisson(2.0, nnz) + 1.0, (rows, rng.integers(0, p, nnz))), shape=(n, p)
    )
    X.sum_duplicates()
    return X, X.data.nbytes + X.indices.nbytes + X.indptr.nbytes


def _peak(estimator, X):
    """numpy's arrays are traced by tracemalloc: the peak of the fit's allocations, exact and
    independent of how the system pages memory in."""
    tracemalloc.start()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            estimator.fit(X)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_sparse_fit_peaks_below_1_6_times_the_csr_size_above_the_data():
    X, size = _counts(6_000_000)
    peak = _peak(HierarchicalPMF(5, max_iter=3, random_state=0), X)
    # the CSC copy of the passes over columns is one CSR size; the start, the passes and the
    # bound add arrays of the rows' and columns' size, not of the counts' (300 counts a row,
    # as single-cell data after gene filtering). Measured 1.24, while the CSC copy is made
    # (2.07 with scikit-learn's start, which copies X, and the temporaries of the size of
    # the counts that the integer check and reconstruction_err_ made).
    assert peak / size <= 1.6, peak / size


def test_wbpmf_sparse_fit_peaks_below_1_4_times_the_csr_size_above_the_data():
    """The caller's canonical CSR is read in place, with its own 32-bit indices (it was
    copied, and its indices widened to 64 bits), the log X! constant is summed in chunks,
    and the mixture weights' likelihoods are scaled in place. Measured 1.19 on these 150
    counts a row (3.01 before), the per-entry denominators of the sweeps being 0.67."""
    X, size = _counts(3_000_000)
    peak = _peak(WeightedBackgroundPMF(5, solver="sequential", max_iter=2, random_state=0), X)
    assert peak / size <= 1.4, peak / size


def test_wbpmf_simultaneous_fit_peaks_below_2_times_the_csr_size_above_the_data():
    """solver="simultaneous" (the default on these 3 M counts) keeps a CSC copy of the
    counts, one CSR size, and no per-entry denominators; the rest is arrays of the rows'
    size times the grid's 34 components, in the solves of the priors (two at a time on two
    threads). Measured 1.78 on two threads and 1.49 on one, on these 150 counts a row."""
    X, size = _counts(3_000_000)
    estimator = WeightedBackgroundPMF(5, max_iter=2, random_state=0)
    peak = _peak(estimator, X)
    assert estimator.solver_ == "simultaneous"
    assert peak / size <= 2.0, peak / size
