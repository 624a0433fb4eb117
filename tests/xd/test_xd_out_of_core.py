"""ExtremeDeconvolution on observations read a block of points at a time: a Dask array, an
HDF5 or zarr dataset, with their noise, projections and weights. Batch EM equals the
in-memory fit to the bit, for any chunks and on a cluster of any size; partial_fit takes a
Dask array's chunks as its minibatches; the sources are never loaded whole, and chunks that
cannot be read together are refused."""

import tracemalloc
import warnings

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal

import sklearn_cogaps._utils._blocks as blocks_module
import sklearn_cogaps._xd._blocks as xd_blocks
from sklearn_cogaps import ExtremeDeconvolution

from _shared import local_cluster, ran_on_every_worker

da = pytest.importorskip("dask.array", reason="dask is an optional extra")

FITTED = (
    "weights_",
    "means_",
    "covariances_",
    "precisions_cholesky_",
    "lower_bound_",
    "objective_history_",
    "n_iter_",
)


def _points(n=3000, p=3, seed=0):
    """Two clusters seen through diagonal and full noise, a tenth of a coordinate missing."""
    rng = np.random.default_rng(seed)
    v = rng.normal(size=(n, p)) * 0.5 + np.where(rng.random((n, 1)) < 0.4, -2.0, 2.0)
    var = rng.uniform(0.1, 1.0, size=(n, p))
    full = np.einsum("ni,ij->nij", var, np.eye(p))
    full[:, 0, 1] = full[:, 1, 0] = 0.05
    X = v + rng.normal(size=v.shape) * np.sqrt(var)
    X[::10, 1] = np.nan
    return X, var, full, rng.uniform(0.5, 2.0, n)


def _fit(X, **fit_kw):
    kw = dict(n_components=3, random_state=0, max_iter=25, tol=0.0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return ExtremeDeconvolution(**kw).fit(X, **fit_kw)


def _assert_same_fit(est, ref):
    for name in FITTED:
        assert_array_equal(getattr(est, name), getattr(ref, name), err_msg=name)


def _dask(value, rows):
    if value is None or np.ndim(value) == 2 and value.shape[0] != rows[1]:
        return value
    chunks = (rows[0],) + tuple(-1 for _ in range(np.ndim(value) - 1))
    return da.from_array(value, chunks=chunks)


@pytest.mark.parametrize("chunk", [97, 700, 3000])
@pytest.mark.parametrize("inputs", ["diag", "full_weights", "projection", "per_point", "float32"])
def test_dask_fit_equals_the_in_memory_fit(chunk, inputs):
    """Chunks smaller than the E-step's (97 points), larger and not aligned with them (700),
    or one chunk: the same bits, the predictions too."""
    X, var, full, w = _points()
    rng = np.random.default_rng(1)
    R = np.array([[1.0, 0.5, 0.0], [0.0, 1.0, 0.2], [0.3, 0.2, 1.0], [0.1, 0.0, 0.4]])
    fit_kw = {
        "diag": dict(X_cov=var),
        "full_weights": dict(X_cov=full, sample_weight=w),
        "projection": dict(X_cov=np.full((3000, 4), 0.09), projection=R),
        "per_point": dict(
            X_cov=np.full((3000, 4), 0.09), projection=R + rng.normal(scale=0.05, size=(3000, 4, 3))
        ),
        "float32": dict(X_cov=var.astype(np.float32)),
    }[inputs]
    if inputs in ("projection", "per_point"):
        X = np.nan_to_num(X) @ R.T + rng.normal(size=(3000, 4)) * 0.3
    if inputs == "float32":
        X = X.astype(np.float32)
    ref = _fit(X, **fit_kw)
    lazy = {k: _dask(v, (chunk, 3000)) for k, v in fit_kw.items()}
    Xd = da.from_array(X, chunks=(chunk, -1))
    est = _fit(Xd, **lazy)
    _assert_same_fit(est, ref)
    assert est.means_.dtype == ref.means_.dtype
    side = {k: v for k, v in lazy.items() if k != "sample_weight"}
    plain = {k: v for k, v in fit_kw.items() if k != "sample_weight"}
    assert_array_equal(est.score_samples(Xd, **side), ref.score_samples(X, **plain))
    assert_array_equal(est.predict(Xd, **side), ref.predict(X, **plain))
    for a, b in zip(est.deconvolve(Xd, **side), ref.deconvolve(X, **plain)):
        assert_array_equal(a, b)


def test_hdf5_and_zarr_datasets_are_read_by_blocks(tmp_path, monkeypatch):
    h5py = pytest.importorskip("h5py")
    monkeypatch.setattr(blocks_module, "BLOCK_ENTRIES", 2000)  # blocks of 333 points
    X, var, full, _ = _points(seed=2)
    ref = _fit(X, X_cov=full)
    with h5py.File(tmp_path / "x.h5", "w") as f:
        f["x"], f["s"] = X, full
    with h5py.File(tmp_path / "x.h5", "r") as f:
        _assert_same_fit(_fit(f["x"], X_cov=f["s"]), ref)
        assert _fit(f["x"], X_cov=full).score(f["x"], X_cov=f["s"]) == ref.score(X, X_cov=full)
    zarr = pytest.importorskip("zarr")
    z = zarr.open(str(tmp_path / "x.zarr"), mode="w", shape=X.shape, chunks=(100, 3))
    z[:] = X
    _assert_same_fit(_fit(z, X_cov=full), ref)


def test_split_and_merge_reads_the_blocks_too():
    X, var, _, _ = _points(seed=3)
    kw = dict(n_components=4, random_state=0, split_merge=2, tol=1e-4)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = ExtremeDeconvolution(**kw).fit(X, X_cov=var)
        est = ExtremeDeconvolution(**kw).fit(
            da.from_array(X, chunks=(450, -1)), X_cov=da.from_array(var, chunks=(450, -1))
        )
    _assert_same_fit(est, ref)


def test_partial_fit_steps_over_the_chunks_of_a_dask_array():
    """Each chunk is a minibatch: the same as partial_fit on every chunk in memory."""
    X, var, _, _ = _points(seed=4)
    ref = ExtremeDeconvolution(n_components=3, random_state=0)
    for start in range(0, 3000, 400):
        ref.partial_fit(X[start : start + 400], X_cov=var[start : start + 400])
    est = ExtremeDeconvolution(n_components=3, random_state=0).partial_fit(
        da.from_array(X, chunks=(400, -1)), X_cov=da.from_array(var, chunks=(400, -1))
    )
    assert est.n_iter_ == ref.n_iter_ == 8
    for name in ("weights_", "means_", "covariances_", "objective_history_"):
        assert_array_equal(getattr(est, name), getattr(ref, name), err_msg=name)
    # and it continues: a second pass over the chunks
    more = dict(X_cov=da.from_array(var, chunks=(1000, -1)))
    est.partial_fit(da.from_array(X, chunks=(1000, -1)), **more)
    assert est.n_iter_ == 11


def test_stochastic_solvers_stream_the_chunks():
    """One chunk: the in-memory epochs. Several: the chunks in a random order, their points
    shuffled within; the fit reaches the in-memory one's likelihood."""
    X, var, _, _ = _points(n=6000, seed=5)
    kw = dict(n_components=2, random_state=0, solver="minibatch_em", batch_size=200, max_iter=8)
    ref = ExtremeDeconvolution(**kw).fit(X, X_cov=var)
    one = ExtremeDeconvolution(**kw).fit(
        da.from_array(X, chunks=(6000, -1)), X_cov=da.from_array(var, chunks=(6000, -1))
    )
    _assert_same_fit(one, ref)
    several = ExtremeDeconvolution(**kw).fit(
        da.from_array(X, chunks=(700, -1)), X_cov=da.from_array(var, chunks=(700, -1))
    )
    assert not np.array_equal(several.means_, ref.means_)
    assert abs(several.lower_bound_ - ref.lower_bound_) < 2e-3
    order = np.argsort(several.means_[:, 0])
    assert_allclose(several.means_[order], ref.means_[np.argsort(ref.means_[:, 0])], atol=0.05)


def test_sources_are_read_a_block_at_a_time(tmp_path, monkeypatch):
    """The dataset is never sliced whole, and the fit's memory is a block's and the
    model's, not the data's (the start drawn from 2000 points)."""
    h5py = pytest.importorskip("h5py")
    monkeypatch.setattr(blocks_module, "BLOCK_ENTRIES", 2**13)
    monkeypatch.setattr(xd_blocks, "START_POINTS", 2000)
    X, var, full, _ = _points(n=60000, seed=6)
    with h5py.File(tmp_path / "x.h5", "w") as f:
        f["x"], f["s"] = X, full
    data_bytes = X.nbytes + full.nbytes  # 1.4 MB + 4.3 MB
    rows = []
    original = xd_blocks.ObservationBlocks._read_X

    def recording(self, index):
        a, b = self.blocks.bounds[index]
        rows.append(b - a)
        return original(self, index)

    monkeypatch.setattr(xd_blocks.ObservationBlocks, "_read_X", recording)
    est = ExtremeDeconvolution(3, random_state=0, max_iter=3)
    with h5py.File(tmp_path / "x.h5", "r") as f:
        tracemalloc.start()
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                est.fit(f["x"], X_cov=f["s"])
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
    assert rows and max(rows) <= 2**13 // 12 + 1
    assert peak < 0.25 * data_bytes, (peak, data_bytes)


@pytest.mark.parametrize("start_points", [500, 5000])
def test_the_first_start_is_read_with_the_checks(monkeypatch, start_points):
    """Before the first E-step the source is read once: the first start's points (500 of the
    3000 drawn, or all of them) are taken in the pass that checks the data. The fit is the
    one whose start reads its points in a pass of its own, with n_init=2 too (the second
    start reads its own)."""
    monkeypatch.setattr(xd_blocks, "START_POINTS", start_points)
    X, var, _, _ = _points()
    Xd = da.from_array(X, chunks=(400, -1))
    one_pass = len(xd_blocks.ObservationBlocks(Xd, var, None, None, summarise=False).blocks)
    reads, before_em = [], []
    read_X, estep = xd_blocks.ObservationBlocks._read_X, xd_blocks.ObservationBlocks.estep

    def recording(self, index):
        reads.append(index)
        return read_X(self, index)

    def first_estep(self, *args):
        if not before_em:
            before_em.append(len(reads))
        return estep(self, *args)

    monkeypatch.setattr(xd_blocks.ObservationBlocks, "_read_X", recording)
    monkeypatch.setattr(xd_blocks.ObservationBlocks, "estep", first_estep)
    one = _fit(Xd, X_cov=var)
    assert before_em == [one_pass]
    two = ExtremeDeconvolution(3, random_state=0, max_iter=5, tol=0.0, n_init=2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        two.fit(Xd, X_cov=var)
    read = ExtremeDeconvolution._read_observations

    def own_pass(self, *args, start_rng=None, **kwargs):
        return read(self, *args, **kwargs)

    monkeypatch.setattr(ExtremeDeconvolution, "_read_observations", own_pass)
    _assert_same_fit(one, _fit(Xd, X_cov=var))
    ref = ExtremeDeconvolution(3, random_state=0, max_iter=5, tol=0.0, n_init=2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref.fit(Xd, X_cov=var)
    _assert_same_fit(two, ref)


@pytest.mark.parametrize("n_init", [1, 2])
def test_a_start_of_a_sample_of_the_points_is_the_in_memory_one(monkeypatch, n_init):
    """Above START_POINTS points the start is computed from a sample of them, in memory as
    out of core: the fits are one (the in-memory start used every point, and the fits
    parted: other components' order, 67% of the labels)."""
    monkeypatch.setattr(xd_blocks, "START_POINTS", 500)
    X, var, _, _ = _points()
    kw = dict(n_components=3, random_state=0, max_iter=5, tol=0.0, n_init=n_init)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        memory = ExtremeDeconvolution(**kw).fit(X, X_cov=var)
        blocks = ExtremeDeconvolution(**kw).fit(da.from_array(X, chunks=(400, -1)), X_cov=var)
    _assert_same_fit(memory, blocks)
    # the sample is another start than all the points
    monkeypatch.setattr(xd_blocks, "START_POINTS", 10**6)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        whole = ExtremeDeconvolution(**kw).fit(X, X_cov=var)
    assert not np.array_equal(whole.means_, memory.means_)


def test_the_start_sample_keeps_no_permutation_of_every_point():
    # a billion stars' start draws its 100,000 points without an array of a billion
    import tracemalloc

    tracemalloc.start()
    try:
        index = xd_blocks.start_index(10**9, np.random.RandomState(0))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert index.size == xd_blocks.START_POINTS == np.unique(index).size
    assert index[-1] < 10**9 and peak < 20 * 2**20


def test_inputs_that_cannot_be_read_by_blocks_are_refused():
    X, var, full, w = _points(n=600)
    Xd = da.from_array(X, chunks=(200, -1))
    with pytest.raises(ValueError, match=r"X_cov.rechunk\(\{0: X.chunks\[0\]\}\)"):
        _fit(Xd, X_cov=da.from_array(full, chunks=(300, -1, -1)))
    with pytest.raises(ValueError, match=r"sample_weight.rechunk"):
        _fit(Xd, sample_weight=da.from_array(w, chunks=150))
    with pytest.raises(ValueError, match=r"rechunk\(\{1: -1, 2: -1\}\)"):
        _fit(Xd, X_cov=da.from_array(full, chunks=(200, 2, 3)))
    with pytest.raises(ValueError, match=r"X.rechunk\(\{1: -1\}\)"):
        _fit(da.from_array(X, chunks=(200, 2)))
    with pytest.raises(
        ValueError, match=r"X_cov must have shape .* = \(600, 3\) .*; got \(599, 3\)"
    ):
        _fit(Xd, X_cov=var[:599])
    with pytest.raises(ValueError, match=r"= \(600, 3, 3\) for covariances; got \(600, 2\)"):
        _fit(Xd, X_cov=var[:, :2])  # the whole data's shape, not a block's
    with pytest.raises(ValueError, match=r"X must be 2-D with at least one feature"):
        _fit(Xd[:, 0])
    with pytest.raises(ValueError, match="compute_chunk_sizes"):
        _fit(Xd[Xd[:, 0] > -100])
    sparse = pytest.importorskip("scipy.sparse")
    with pytest.raises(TypeError, match="dense observations"):
        _fit(da.from_array(X, chunks=(200, -1)).map_blocks(sparse.csr_matrix))


def test_blocks_are_checked_as_in_memory_points_are():
    """Every block is checked once; errors name the point by its place in the data."""
    X, var, full, _ = _points(n=600)
    bad = X.copy()
    bad[450, 2] = np.inf
    with pytest.raises(ValueError, match="point 450"):
        _fit(da.from_array(bad, chunks=(200, -1)))
    neg = var.copy()
    neg[321, 0] = -1.0
    with pytest.raises(ValueError, match="row 321"):
        _fit(da.from_array(X, chunks=(200, -1)), X_cov=da.from_array(neg, chunks=(200, -1)))
    asym = full.copy()
    asym[530, 0, 2] = 0.3
    with pytest.raises(ValueError, match="point 530 is not symmetric"):
        _fit(da.from_array(X, chunks=(200, -1)), X_cov=da.from_array(asym, chunks=(200, -1, -1)))
    with pytest.raises(ValueError, match="positive sum"):
        _fit(da.from_array(X, chunks=(200, -1)), sample_weight=da.zeros(600, chunks=200))
    est = _fit(X, X_cov=var)
    with pytest.raises(ValueError, match="X has 2 features, but ExtremeDeconvolution is"):
        est.score(da.from_array(X[:, :2], chunks=(200, -1)), X_cov=var[:, :2])


def _filtered(X, var):
    """X and its variances as Dask arrays whose filter of the rows (after
    compute_chunk_sizes) left an empty chunk, and the rows kept."""
    X = X.copy()
    X[600:1200, 0] = 50.0  # the second chunk whole
    keep = ~(X[:, 0] == 50.0)
    Xd, Vd = da.from_array(X, chunks=(600, -1)), da.from_array(var, chunks=(600, -1))
    mask = Xd[:, 0] != 50.0
    Xf, Vf = Xd[mask], Vd[mask]
    Xf.compute_chunk_sizes()
    Vf.compute_chunk_sizes()
    assert 0 in Xf.chunks[0]
    return Xf, Vf, keep


def test_empty_chunks_are_no_blocks():
    X, var, _, _ = _points(seed=8)
    Xf, Vf, keep = _filtered(X, var)
    _assert_same_fit(_fit(Xf, X_cov=Vf), _fit(X[keep], X_cov=var[keep]))


def test_local_cluster_fit_equals_the_in_memory_fit():
    """On a LocalCluster of worker processes the parts stay where they were made and their
    statistics are computed there: the fit is the in-memory one to the bit, for one worker
    as for two."""
    X, var, full, w = _points(n=2000, seed=7)
    ref = _fit(X, X_cov=full, sample_weight=w)
    for n_workers in (2, 1):
        with local_cluster(n_workers) as client:
            Xd = da.from_array(X, chunks=(300, -1))
            Sd = da.from_array(full, chunks=(300, -1, -1))
            est = _fit(Xd, X_cov=Sd, sample_weight=da.from_array(w, chunks=300))
            _assert_same_fit(est, ref)
            proba = est.predict_proba(Xd, X_cov=Sd)
            # every worker held parts
            assert ran_on_every_worker(client, "sklearn_cogaps._xd._blocks")
        assert_array_equal(proba, ref.predict_proba(X, X_cov=full))
    Xf, Vf, keep = _filtered(X, var)
    with local_cluster(2):
        _assert_same_fit(_fit(Xf, X_cov=Vf), _fit(X[keep], X_cov=var[keep]))
