"""WeightedBackgroundPMF on counts read a block of rows at a time (a backed AnnData, a Dask
array, an HDF5 or zarr dataset) and on a dask.distributed cluster: the fit, transform and
score equal the in-memory ones to the bit, the denominators are not kept in memory, and a
new row is fitted the same whatever rows come with it."""

import warnings

import numpy as np
import pytest
from numpy.testing import assert_array_equal
from scipy import sparse

import sklearn_cogaps._utils._blocks as blocks_module
from sklearn_cogaps import WeightedBackgroundPMF
from sklearn_cogaps._poisson import _wbpmf_blocks

from _shared import gamma_poisson_counts, local_cluster, ran_on_every_worker

da = pytest.importorskip("dask.array", reason="dask is an optional extra")

FITTED = (
    "w_",
    "l0_",
    "f0_",
    "loadings_",
    "loadings_mean_",
    "loadings_mean_log_",
    "components_",
    "components_mean_",
    "kl_loadings_",
    "kl_components_",
    "lower_bound_",
    "objective_history_",
    "reconstruction_err_",
)


def _counts(n=500, p=80, K=4, seed=0):
    X = gamma_poisson_counts(n, p, K, seed).toarray()
    X[:, 7] = 0.0  # a feature without counts: its background is the empirical-Bayes one
    return sparse.csr_matrix(X)


def _fit(X, X_val=None, **kw):
    kw = dict(dict(n_components=3, max_iter=6, random_state=0), **kw)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return WeightedBackgroundPMF(**kw).fit(X, X_val=X_val)


def _assert_same_fit(est, ref):
    for name in FITTED:
        assert_array_equal(getattr(est, name), getattr(ref, name), err_msg=name)
    for name in ("pi0", "weights", "shape", "rate"):
        assert_array_equal(est.prior_loadings_[name], ref.prior_loadings_[name], err_msg=name)


@pytest.mark.parametrize("rows", [500, 37, 160])
@pytest.mark.parametrize("prior", ["gamma_mixture", "point_gamma"])
def test_dask_fit_equals_the_in_memory_fit(rows, prior):
    """One chunk; chunks smaller than the sweeps' 32 chunks of rows (37 rows); larger and not
    aligned with them (160): the same bits, transform and score too."""
    X = _counts()
    ref = _fit(X, prior_loadings=prior)
    Xd = da.from_array(X.toarray(), chunks=(rows, -1))
    est = _fit(Xd, prior_loadings=prior)
    _assert_same_fit(est, ref)
    new = _counts(n=90, seed=1)
    assert_array_equal(est.transform(da.from_array(new.toarray(), chunks=(rows, -1))),
                       ref.transform(new))  # fmt: skip
    assert est.score(da.from_array(new.toarray(), chunks=(rows, -1))) == ref.score(new)


def test_auto_reads_the_size_of_counts_read_by_blocks(monkeypatch):
    """solver="auto" and the start's length read the stored counts of a Dask array (counted
    by the blocks' check) as of a matrix in memory: large counts give the in-memory fit."""
    from sklearn_cogaps._poisson import _wbpmf

    X = _counts()
    monkeypatch.setattr(_wbpmf, "_LARGE_NNZ", X.nnz)
    ref = _fit(X, solver="simultaneous")
    est = _fit(da.from_array(X.toarray(), chunks=(160, -1)), solver="auto")
    _assert_same_fit(est, ref)
    monkeypatch.setattr(_wbpmf, "_LARGE_NNZ", X.nnz + 1)
    assert not np.array_equal(_fit(X, solver="simultaneous").components_, ref.components_)


def test_backed_anndata_and_hdf5_zarr_datasets(tmp_path, monkeypatch):
    ad = pytest.importorskip("anndata")
    h5py = pytest.importorskip("h5py")
    monkeypatch.setattr(blocks_module, "BLOCK_ENTRIES", 700)
    X = _counts(seed=2)
    ref = _fit(X, n_init=2)
    ad.AnnData(X).write_h5ad(tmp_path / "x.h5ad")
    adata = ad.read_h5ad(tmp_path / "x.h5ad", backed="r")
    try:
        est = _fit(adata, n_init=2)
        _assert_same_fit(est, ref)
        assert_array_equal(est.transform(adata), ref.transform(X))
    finally:
        adata.file.close()
    with h5py.File(tmp_path / "x.h5", "w") as f:
        f["x"] = X.toarray()
    with h5py.File(tmp_path / "x.h5", "r") as f:
        _assert_same_fit(_fit(f["x"], n_init=2), ref)
    zarr = pytest.importorskip("zarr")
    z = zarr.open(str(tmp_path / "x.zarr"), mode="w", shape=X.shape, chunks=(50, 80))
    z[:] = X.toarray()
    _assert_same_fit(_fit(z, n_init=2), ref)


def test_the_denominators_live_in_a_temporary_file(monkeypatch):
    """One float64 per stored count, in a file mapped in memory and removed after the fit."""
    made = []
    original = _wbpmf_blocks._LocalParts.__init__

    def recording(self, *args):
        original(self, *args)
        made.append((self._dir.name, self.D))

    monkeypatch.setattr(_wbpmf_blocks._LocalParts, "__init__", recording)
    X = _counts(seed=3)
    _fit(da.from_array(X.toarray(), chunks=(120, -1)))
    ((folder, D),) = made
    assert isinstance(D, np.memmap) and D.shape == (X.nnz,)
    import os

    assert not os.path.exists(folder)


def test_a_new_row_is_fitted_the_same_in_any_batch():
    """transform(X)[i] does not depend on the other rows of X (their number changes the
    matrix products' kernels, which a row's sums no longer use)."""
    est = _fit(_counts(seed=4))
    new = _counts(n=60, seed=5)
    whole = est.transform(new)
    for i in (0, 17, 59):
        assert_array_equal(est.transform(new[i : i + 1]), whole[i : i + 1])
    assert_array_equal(est.transform(new[::-1]), whole[::-1])


def test_blocks_are_checked_as_in_memory_counts_are():
    X = _counts(n=200).toarray()
    X[150, 3] = -1.0
    with pytest.raises(ValueError, match="Negative values"):
        _fit(da.from_array(X, chunks=(50, -1)))
    est = _fit(_counts(n=200))
    X[150, 3] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        est.transform(da.from_array(X, chunks=(50, -1)))
    with pytest.raises(ValueError, match="X has 79 features"):
        est.transform(da.from_array(X[:, :79], chunks=(50, -1)))
    with pytest.raises(ValueError, match="only zeros"):
        _fit(da.zeros((100, 80), chunks=(50, -1)))


def test_local_cluster_fit_equals_the_in_memory_fit():
    """On a LocalCluster of worker processes the sweeps run where the parts are and the
    denominators stay beside them: the in-memory fit to the bit, for one worker as for
    two."""
    X = _counts(n=300, seed=6)
    ref = _fit(X)
    for n_workers in (2, 1):
        with local_cluster(n_workers) as client:
            est = _fit(da.from_array(X.toarray(), chunks=(47, -1)))
            _assert_same_fit(est, ref)
            # every worker held parts
            assert ran_on_every_worker(client, "sklearn_cogaps._poisson._wbpmf_blocks")
    # a filter's empty chunk is no block on the cluster either
    dense = X.toarray()
    dense[94:141, 0] = 1000.0  # the third chunk whole
    Xd = da.from_array(dense, chunks=(47, -1))
    kept = Xd[Xd[:, 0] < 1000.0]
    kept.compute_chunk_sizes()
    with local_cluster(2):
        est = _fit(kept)
    _assert_same_fit(est, _fit(sparse.csr_matrix(np.delete(dense, np.s_[94:141], axis=0))))


def test_the_cluster_holds_the_counts_twice_during_the_sweeps(monkeypatch):
    """The start's column blocks (its KL-NMF passes over the columns) are released before
    the sweeps' parts are gathered: the workers then hold the row chunks and the parts."""
    import sklearn_cogaps._poisson._wbpmf as wbpmf_module
    from sklearn_cogaps._poisson._dask_counts import DaskCounts

    released, at_parts = [], []
    release = DaskCounts.release_columns

    def spy_release(counts):
        released.append(counts.columns is not None)
        release(counts)

    class SpySweeper(wbpmf_module.BlockSweeper):
        def __init__(self, counts, n_threads):
            at_parts.append(counts.columns)
            super().__init__(counts, n_threads)

    monkeypatch.setattr(DaskCounts, "release_columns", spy_release)
    monkeypatch.setattr(wbpmf_module, "BlockSweeper", SpySweeper)
    X = _counts(n=120, seed=3)
    with local_cluster(1):
        est = _fit(da.from_array(X.toarray(), chunks=(40, -1)))
    assert released[0] and not any(released[1:])  # the start made them; released once
    assert at_parts == [None]
    _assert_same_fit(est, _fit(X))


def test_memory_of_a_backed_fit_is_a_part_and_the_model(tmp_path, monkeypatch):
    """The numpy allocations of a fit from a backed file: a part (a thirty-second of the
    rows here) and arrays of the model's size (the EBPM solves hold a few arrays of n_samples
    x the prior's grid), about half of an in-memory fit's, which holds the counts' CSC copy
    and the denominators besides; the denominators are in a mapped file, not allocated."""
    import tracemalloc

    ad = pytest.importorskip("anndata")
    monkeypatch.setattr(blocks_module, "BLOCK_ENTRIES", 2**14)
    X = gamma_poisson_counts(5000, 300, 3, seed=8)  # 450 k stored counts, 6.2 MB as CSR
    ad.AnnData(X).write_h5ad(tmp_path / "big.h5ad")
    csr_bytes = X.data.nbytes + X.indices.nbytes + X.indptr.nbytes
    adata = ad.read_h5ad(tmp_path / "big.h5ad", backed="r")
    peaks = []
    try:
        for data in (adata, X):
            tracemalloc.start()
            try:
                _fit(data, max_iter=2)
                peaks.append(tracemalloc.get_traced_memory()[1])
            finally:
                tracemalloc.stop()
    finally:
        adata.file.close()
    backed, in_memory = peaks  # measured: 0.66 and 1.28 times the CSR size (8000 rows)
    assert backed < 0.8 * csr_bytes and backed < 0.6 * in_memory, (backed, in_memory, csr_bytes)


def test_empty_chunks_and_held_out_counts_of_any_source(tmp_path):
    """A filter of a Dask array's rows leaves empty chunks (after compute_chunk_sizes): they
    are no blocks. Held-out counts may be read from the sources X is read from (here the
    group of a sparse layer in an .h5ad), into memory."""
    ad = pytest.importorskip("anndata")
    X = _counts(n=300, seed=9)
    dense = X.toarray()
    dense[100:200, 0] = 1000.0  # the rows the filter drops: the second chunk whole
    Xd = da.from_array(dense, chunks=(100, -1))
    kept = Xd[Xd[:, 0] < 1000.0]
    kept.compute_chunk_sizes()
    assert 0 in kept.chunks[0]
    memory = sparse.csr_matrix(np.delete(dense, np.s_[100:200], axis=0))
    _assert_same_fit(_fit(kept), _fit(memory))
    held = sparse.csr_matrix(np.ones_like(memory.toarray()))
    ad.AnnData(memory, layers={"val": held}).write_h5ad(tmp_path / "v.h5ad")
    backed = ad.read_h5ad(tmp_path / "v.h5ad", backed="r")
    try:
        est = _fit(backed, X_val=backed.file["layers/val"])
    finally:
        backed.file.close()
    assert_array_equal(est.validation_scores_, _fit(memory, X_val=held).validation_scores_)
