"""HierarchicalPMF on counts read a block of rows at a time: a backed AnnData, a Dask array,
an HDF5 or zarr dataset. The fit equals the in-memory fit to the bit, never holds X whole,
and refuses sources it cannot read by rows."""

import tracemalloc
import warnings

import numpy as np
import pytest
from numpy.testing import assert_array_equal

import sklearn_cogaps._utils._blocks as blocks_module
from sklearn_cogaps import HierarchicalPMF
from sklearn_cogaps._utils._blocks import RowBlocks

from _shared import gamma_poisson_counts, local_cluster, ran_on_every_worker

ad = pytest.importorskip("anndata")
h5py = pytest.importorskip("h5py")

FITTED = (
    "loadings_shape_",
    "loadings_rate_",
    "components_shape_",
    "components_rate_",
    "prior_loadings_shape_",
    "prior_components_rate_",
    "lower_bound_",
    "exact_lower_bound_",
    "augmented_lower_bound_",
    "objective_history_",
    "reconstruction_err_",
)


def _counts(n=400, p=90, K=4, seed=0):
    return gamma_poisson_counts(n, p, K, seed)


@pytest.fixture
def small_blocks(monkeypatch):
    """Blocks of about 1000 stored counts: many blocks on small data."""
    monkeypatch.setattr(blocks_module, "BLOCK_ENTRIES", 1000)


@pytest.fixture
def backed(tmp_path):
    X = _counts()
    adata = ad.AnnData(X)
    adata.var_names = [f"g{j}" for j in range(X.shape[1])]
    path = tmp_path / "counts.h5ad"
    adata.write_h5ad(path)
    backed = ad.read_h5ad(path, backed="r")
    yield X, backed
    backed.file.close()


def _assert_same_fit(est, ref):
    for name in FITTED:
        assert_array_equal(getattr(est, name), getattr(ref, name), err_msg=name)


@pytest.mark.parametrize("solver", ["vbem", "newton", "pathwise"])
def test_backed_anndata_fit_equals_the_in_memory_fit(backed, small_blocks, solver):
    X, adata = backed
    kw = dict(n_components=4, max_iter=15, solver=solver, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = HierarchicalPMF(**kw).fit(X)
        est = HierarchicalPMF(**kw).fit(adata)
    assert len(RowBlocks(adata).bounds) > 10
    _assert_same_fit(est, ref)
    assert_array_equal(est.feature_names_in_, adata.var_names)
    assert_array_equal(est.transform(adata), ref.transform(X))
    assert est.score(adata) == ref.score(X)


def test_dask_array_fit_and_transform_equal_the_in_memory_ones():
    da = pytest.importorskip("dask.array")
    X = _counts(seed=1)
    kw = dict(n_components=3, max_iter=20, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = HierarchicalPMF(**kw).fit(X)
        for chunks in [(37, -1), (400, -1)]:
            est = HierarchicalPMF(**kw).fit(da.from_array(X, chunks=chunks))
            _assert_same_fit(est, ref)
        dense = da.from_array(X.toarray(), chunks=(64, -1))
        est = HierarchicalPMF(**kw, new_rows="conditional_mean").fit(dense)
        ref_cm = HierarchicalPMF(**kw, new_rows="conditional_mean").fit(X)
    assert_array_equal(est.transform(dense), ref_cm.transform(X))
    assert not hasattr(est, "feature_names_in_")


def test_small_dask_chunks_are_read_together(small_blocks, monkeypatch):
    """Without a cluster, consecutive chunks are read in one computation, up to a block's
    values at their dense size; the fit is the in-memory one whatever the grouping."""
    import dask

    da = pytest.importorskip("dask.array")
    X = _counts(n=120, p=30, seed=4)
    Xd = da.from_array(X.toarray(), chunks=(7, -1))  # 18 chunks: 17 of 7 rows and one of 1
    blocks = RowBlocks(Xd, group_chunks=True)
    # 1000 values a block: 33 rows of 30 features, four chunks of 7 rows
    assert [b - a for a, b in blocks.bounds] == [28, 28, 28, 28, 8]
    assert blocks.chunk_groups[0] == [0, 1, 2, 3] and blocks.chunk_index is None
    assert RowBlocks(Xd).chunk_index == list(range(18))  # ungrouped by default
    computations = []  # the number of chunks of every computation
    compute = dask.compute

    def counted(*arrays, **kwargs):
        computations.append(len(arrays))
        return compute(*arrays, **kwargs)

    monkeypatch.setattr(dask, "compute", counted)
    kw = dict(n_components=2, max_iter=3, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est = HierarchicalPMF(**kw).fit(Xd)
        ref = HierarchicalPMF(**kw).fit(X)
    _assert_same_fit(est, ref)
    # the fit's reads were the groups': four chunks, and the last two
    assert set(computations) == {4, 2} and computations.count(2) * 4 == computations.count(4)
    # a filter's empty chunks are left out of the groups
    kept = Xd[da.from_array(np.arange(120) // 7 != 2, chunks=7)]
    kept.compute_chunk_sizes()
    grouped = RowBlocks(kept, group_chunks=True)
    assert 2 not in grouped.chunk_groups[0] and sum(b - a for a, b in grouped.bounds) == 113


def test_merge_groups_reach_the_least_size_in_order():
    from sklearn_cogaps._poisson._dask_counts import merge_groups

    assert merge_groups([1] * 7, 3) == [range(0, 3), range(3, 7)]
    assert merge_groups([5, 1, 1, 4, 9], 5) == [range(0, 1), range(1, 4), range(4, 5)]
    assert merge_groups([1, 1], 5) == [range(0, 2)]  # too small for a group: one block
    assert merge_groups([2, 3], 0) == [range(0, 1), range(1, 2)]  # 0: every block alone
    assert merge_groups([], 5) == []


def test_tiny_dask_chunks_are_merged_on_a_cluster():
    """Chunks of one row are merged into blocks before the passes (one task per block and
    pass): the fit is still the in-memory one to the bit, and the blocks cover the rows in
    order."""
    da = pytest.importorskip("dask.array")
    from sklearn_cogaps._poisson._dask_counts import DaskCounts

    X = _counts(n=150, p=30, seed=7)
    Xd = da.from_array(X, chunks=(1, -1))
    kw = dict(n_components=2, max_iter=3, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = HierarchicalPMF(**kw).fit(X)
        with local_cluster(2) as client:
            counts = DaskCounts(RowBlocks(Xd), client)
            # two workers: blocks of about a quarter of the counts each
            assert 2 <= len(counts.rows) <= 5
            bounds = np.array(counts.row_bounds)
            assert bounds[0, 0] == 0 and bounds[-1, 1] == 150
            assert_array_equal(bounds[1:, 0], bounds[:-1, 1])
            assert_array_equal(counts.row_sums, np.asarray(X.sum(axis=1)).ravel())
            est = HierarchicalPMF(**kw).fit(Xd)
    _assert_same_fit(est, ref)


def test_dense_hdf5_and_zarr_datasets_are_read_by_blocks(tmp_path, small_blocks):
    X = _counts(n=150, seed=2)
    kw = dict(n_components=3, max_iter=10, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = HierarchicalPMF(**kw).fit(X)
        with h5py.File(tmp_path / "x.h5", "w") as f:
            f["x"] = X.toarray()
        with h5py.File(tmp_path / "x.h5", "r") as f:
            _assert_same_fit(HierarchicalPMF(**kw).fit(f["x"]), ref)
        zarr = pytest.importorskip("zarr")
        z = zarr.open(str(tmp_path / "x.zarr"), mode="w", shape=X.shape, chunks=(16, 90))
        z[:] = X.toarray()
        _assert_same_fit(HierarchicalPMF(**kw).fit(z), ref)


def test_a_backed_anndata_is_never_loaded_whole(backed, small_blocks, monkeypatch):
    X, adata = backed
    read = []
    original = RowBlocks.read

    def recording(self, index):
        block = original(self, index)
        read.append(block.nnz)
        return block

    monkeypatch.setattr(RowBlocks, "read", recording)
    monkeypatch.setattr(type(adata.X), "to_memory", lambda *a, **k: pytest.fail("loaded whole"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        HierarchicalPMF(3, max_iter=3, random_state=0).fit(adata)
    longest_row = np.diff(X.indptr).max()
    assert read and max(read) <= 1000 + longest_row < X.nnz / 5


def test_memory_of_a_backed_fit_is_bounded_by_a_block_and_the_model(tmp_path, monkeypatch):
    # 8000 x 300 counts, 720 k stored (8.6 MB as CSR); blocks of 2**14 entries
    monkeypatch.setattr(blocks_module, "BLOCK_ENTRIES", 2**14)
    X = _counts(n=8000, p=300, K=3, seed=3)
    path = tmp_path / "big.h5ad"
    ad.AnnData(X).write_h5ad(path)
    csr_bytes = X.data.nbytes + X.indices.nbytes + X.indptr.nbytes
    del X
    adata = ad.read_h5ad(path, backed="r")
    est = HierarchicalPMF(3, max_iter=2, random_state=0)
    tracemalloc.start()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            est.fit(adata)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
        adata.file.close()
    # the model: a few (8000 + 300) x 3 arrays; an in-memory fit holds the counts twice
    assert peak < 0.5 * csr_bytes, (peak, csr_bytes)


def test_a_view_of_a_backed_anndata_and_the_group_of_its_matrix(backed, small_blocks):
    """A view of a backed AnnData holds its subset in memory: it is fitted as such (and so
    a search over the backed AnnData works); the HDF5 group of the matrix is read by rows."""
    from sklearn.model_selection import GridSearchCV

    X, adata = backed
    kw = dict(n_components=3, max_iter=10, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _assert_same_fit(HierarchicalPMF(**kw).fit(adata[:150]), HierarchicalPMF(**kw).fit(X[:150]))
        search = GridSearchCV(HierarchicalPMF(max_iter=5), {"n_components": [2, 3]}, cv=2)
        assert np.all(np.isfinite(search.fit(adata).cv_results_["mean_test_score"]))
        _assert_same_fit(HierarchicalPMF(**kw).fit(adata.file["X"]), HierarchicalPMF(**kw).fit(X))


def test_float32_counts_in_a_sparse_group_give_float32_results(tmp_path):
    X = _counts(n=40, seed=6).astype(np.float32)
    adata = ad.AnnData(X)
    adata.layers["counts"] = X
    adata.write_h5ad(tmp_path / "f32.h5ad")
    backed = ad.read_h5ad(tmp_path / "f32.h5ad", backed="r")
    try:
        group = backed.file["layers/counts"]
        est = HierarchicalPMF(2, max_iter=3, tol=0.0).fit(group)
        assert est.components_.dtype == np.float32
        assert est.transform(group).dtype == np.float32
    finally:
        backed.file.close()


def test_sources_that_cannot_be_read_by_rows_are_refused(tmp_path):
    da = pytest.importorskip("dask.array")
    X = _counts(n=60, seed=4)
    filtered = da.from_array(X.toarray(), chunks=(20, -1))
    filtered = filtered[filtered.sum(axis=1) > 0]
    with pytest.raises(ValueError, match=r"unknown chunk sizes.*X.compute_chunk_sizes\(\)"):
        HierarchicalPMF(2).fit(filtered)
    with pytest.raises(ValueError, match=r"chunks along its columns.*X.rechunk\(\{1: -1\}\)"):
        HierarchicalPMF(2).fit(da.from_array(X.toarray(), chunks=(30, 45)))
    adata = ad.AnnData(X.tocsc())
    adata.write_h5ad(tmp_path / "csc.h5ad")
    backed = ad.read_h5ad(tmp_path / "csc.h5ad", backed="r")
    try:
        with pytest.raises(ValueError, match=r"stored as CSC.*Write the counts as CSR"):
            HierarchicalPMF(2).fit(backed)
    finally:
        backed.file.close()
    # an empty source is named by its whole shape (not by a block's)
    with pytest.raises(ValueError, match=r"0 feature\(s\) \(shape=\(40, 0\)\)"):
        HierarchicalPMF(2).fit(da.zeros((40, 0), chunks=(20, -1)))
    # a dataset of a closed file: h5py's own error names no cause
    with h5py.File(tmp_path / "x.h5", "w") as f:
        closed = f.create_dataset("X", data=X.toarray())
    with pytest.raises(ValueError, match=r"file that has been closed.*h5py.File\(path\)"):
        HierarchicalPMF(2).fit(closed)
    # a file or group that holds the matrix, not the matrix: numpy's error named 'X'
    with h5py.File(tmp_path / "x.h5", "r") as f:
        with pytest.raises(ValueError, match=r"h5py file that holds X, not a matrix.*f\['X'\]"):
            HierarchicalPMF(2).fit(f)
    # complex data, read by blocks, were cast with numpy's warnings (their imaginary parts
    # lost); in memory they are refused
    complex_counts = X.toarray() + 1j
    with h5py.File(tmp_path / "c.h5", "w") as f:
        f["X"] = complex_counts
        for source in (f["X"], da.from_array(complex_counts, chunks=(20, -1))):
            with pytest.raises(ValueError, match="Complex data not supported.*real part"):
                HierarchicalPMF(2).fit(source)


def test_blocks_are_checked_as_in_memory_data_are(tmp_path):
    da = pytest.importorskip("dask.array")
    X = _counts(n=60, seed=5).toarray()
    X[45, 3] = -1.0
    # the message names the entry by its place in the whole data, not in its block
    message = (r"Negative values in data passed to X in HierarchicalPMF \(the first at row "
               r"45, column 3: -1\)\. The model")  # fmt: skip
    with pytest.raises(ValueError, match=message):
        HierarchicalPMF(2).fit(da.from_array(X, chunks=(20, -1)))
    X[45, 3] = np.nan
    with pytest.raises(ValueError, match="Input X contains NaN"):
        HierarchicalPMF(2).fit(da.from_array(X, chunks=(20, -1)))
    with pytest.raises(ValueError, match="contains only zeros"):
        HierarchicalPMF(2).fit(da.zeros((40, 10), chunks=(20, -1)))
    X[45, 3] = 0.5
    with pytest.warns(UserWarning, match="non-integer values"):
        HierarchicalPMF(2, max_iter=2).fit(da.from_array(X, chunks=(20, -1)))
    est = HierarchicalPMF(2, max_iter=2).fit(np.round(X))
    with pytest.raises(ValueError, match="X has 5 features"):
        est.transform(da.from_array(X[:, :5], chunks=(20, -1)))
    # the methods that read the counts in memory say how to load the rows, rather than
    # failing inside numpy on a sparse Dask array or loading the whole source
    for method in (est.poisson_loglik, est.recommend):
        with pytest.raises(ValueError, match=r"in memory.*X\[rows\].compute\(\)"):
            method(da.from_array(np.round(X), chunks=(20, -1)))


def test_local_cluster_fit_equals_the_in_memory_fit():
    """On a LocalCluster of worker processes the passes run where the chunks live, and the
    fit and transform are the in-memory ones to the bit, for one worker as for two."""
    da = pytest.importorskip("dask.array")
    X = _counts(n=300, seed=6)
    kw = dict(n_components=3, max_iter=10, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = HierarchicalPMF(**kw).fit(X)
        for n_workers in (2, 1):
            with local_cluster(n_workers) as client:
                est = HierarchicalPMF(**kw).fit(da.from_array(X, chunks=(47, -1)))
                _assert_same_fit(est, ref)
                W = est.transform(da.from_array(X, chunks=(120, -1)))
                # every worker ran passes
                assert ran_on_every_worker(client, "sklearn_cogaps._poisson._dask_counts")
            assert_array_equal(W, ref.transform(X))
