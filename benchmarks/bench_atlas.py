"""The Poisson models and ExtremeDeconvolution at atlas and survey scale: data read from disk
a block of rows at a time, and on a dask.distributed LocalCluster.

    python benchmarks/bench_atlas.py                      # both parts below
    python benchmarks/bench_atlas.py --part cells         # 200,000 cells x 20,000 genes
    python benchmarks/bench_atlas.py --part cells --models wbpmf
    python benchmarks/bench_atlas.py --part cells --models wbpmf-sim  # solver="simultaneous"
    python benchmarks/bench_atlas.py --cells 50000        # a smaller atlas
    python benchmarks/bench_atlas.py --part survey        # 10^7 points, d = 5
    python benchmarks/bench_atlas.py --skip-cluster

A simulated UMI count matrix (K = 10 gene programs with heavy-tailed gene weights, Dirichlet
usages, a Gamma-Poisson library size of about 1,500 UMIs a cell) is written to an .h5ad in the temporary directory block by block:
the whole matrix is never in memory, here or in the fits. Then, for HierarchicalPMF and
WeightedBackgroundPMF (``--models``; ``--max-iter`` and ``--wbpmf-iter`` iterations), each
in its own process:

1. ``backed``: ``Model(10, max_iter=ITER).fit(read_h5ad(path, backed="r"))``: the
   wall time of the whole fit (start included), the time of each iteration, and the
   peak resident memory (VmHWM, reset after the imports) against the file's size and the
   counts' size as an in-memory CSR matrix (float64 data, int32 indices), and the peak of
   the anonymous memory (RssAnon, sampled: without the pages of mapped files, such as
   WeightedBackgroundPMF's file of denominators, which the system can reclaim).
2. ``subset``: the first ``--subset`` cells in a second file, fitted from the backed file and
   in memory: the largest difference of their fitted arrays (0: the same bits).
3. ``cluster``: the same fit of the whole file on a LocalCluster of 2 worker processes (one
   thread each), X read by ``anndata.experimental.read_elem_lazy`` in chunks of rows: wall
   time, the client's peak memory, and the largest difference from the backed fit.

Nothing else may run during the timings. The cluster's workers keep the counts twice (row
chunks and column blocks, as an in-memory fit keeps CSR and CSC): the 2 workers hold about
two CSR copies between them.

ExtremeDeconvolution at survey scale (``--part survey``; ``--part all``, the default, runs
both): ``--stars`` points (10^7 by default) of d = 5 coordinates from a mixture of 4
Gaussians, each seen through its own full 5 x 5 noise covariance, one coordinate missing for
a tenth of them, written to zarr arrays in the temporary directory a chunk of 250,000 points
at a time. Each in its own process:

4. ``xd-local``: ``ExtremeDeconvolution(4, max_iter=ITER, tol=0)`` batch EM on
   ``dask.array.from_zarr`` of the points and their covariances, read a block at a time:
   wall time (start included: the check of every covariance and the k-means start on
   100,000 points), time per EM iteration (median), peak resident memory against the data's
   size.
5. ``xd-cluster``: the same fit on a LocalCluster of 2 worker processes (one thread each),
   which keep the points between iterations: times, the client's and the workers' peak
   memory, the largest difference from the local fit.
6. ``xd-online``: online EM, one epoch: ``partial_fit`` of the Dask arrays (their chunks
   are the minibatches), and ``fit(solver="minibatch_em", batch_size=10_000, max_iter=1)``
   streaming the blocks; time and memory, and the mean log-likelihood of the first
   10^6 points under each fit and under batch EM's.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np
from _memory import AnonymousPeak, peak_rss_mb, reset_peak

K_TRUE = 10
CELLS_PER_BLOCK = 5000
STARS_PER_CHUNK = 250_000


def simulate(path, n_cells, n_genes, seed=0):
    """Write simulated counts to ``path`` (an .h5ad with CSR ``X``), block by block."""
    import anndata as ad
    import h5py
    from scipy import sparse

    rng = np.random.default_rng(seed)
    # programs: each gene's weight in each program, sparse and heavy-tailed
    programs = rng.gamma(0.1, 1.0, (K_TRUE, n_genes))
    programs /= programs.sum(axis=1, keepdims=True)
    ad.AnnData(
        obs={"cell": np.arange(n_cells).astype(str)},
        var={"gene": np.arange(n_genes).astype(str)},
    ).write_h5ad(path)
    with h5py.File(path, "a") as f:
        g = f.create_group("X")
        g.attrs.update({"encoding-type": "csr_matrix", "encoding-version": "0.1.0",
                        "shape": np.array([n_cells, n_genes])})  # fmt: skip
        data = g.create_dataset("data", (0,), np.float32, maxshape=(None,), chunks=(2**20,))
        indices = g.create_dataset("indices", (0,), np.int32, maxshape=(None,), chunks=(2**20,))
        indptr = [np.zeros(1, dtype=np.int64)]
        cdf = np.cumsum(programs, axis=1)
        for a in range(0, n_cells, CELLS_PER_BLOCK):
            b = min(a + CELLS_PER_BLOCK, n_cells)
            usage = rng.dirichlet(np.full(K_TRUE, 0.3), size=b - a)
            # Poisson counts given the cell's total are multinomial: draw each cell's UMIs
            # (about 1,500) over its programs, then each UMI's gene from its program
            umis = rng.poisson(rng.gamma(4.0, 1500 / 4.0, size=b - a))
            per_program = rng.multinomial(umis, usage)
            cells, genes = [], []
            for k in range(K_TRUE):
                cells.append(np.repeat(np.arange(b - a), per_program[:, k]))
                draws = rng.random(per_program[:, k].sum()) * cdf[k, -1]
                genes.append(np.minimum(np.searchsorted(cdf[k], draws), n_genes - 1))
            cells, genes = np.concatenate(cells), np.concatenate(genes)
            block = sparse.csr_matrix(
                (np.ones(cells.size, dtype=np.float32), (cells, genes)), shape=(b - a, n_genes)
            )
            block.sum_duplicates()
            n = data.shape[0]
            data.resize((n + block.nnz,))
            indices.resize((n + block.nnz,))
            data[n:], indices[n:] = block.data, block.indices
            indptr.append(block.indptr[1:].astype(np.int64) + n)
        g.create_dataset("indptr", data=np.concatenate(indptr))
    return int(np.concatenate(indptr)[-1])


def _timed(cls):
    """A subclass of the estimator ``cls`` that records when each iteration ends."""

    class Timed(cls):
        def _iterate(self, state, iteration):
            value = super()._iterate(state, iteration)
            self._stamps.append(time.perf_counter())
            return value

    return Timed


def _fitted(est):
    return {name: getattr(est, name) for name in ("loadings_", "components_", "lower_bound_")}


def _max_diff(a, b):
    return max(float(np.max(np.abs(np.asarray(a[k]) - np.asarray(b[k])))) for k in a)


def _model(name):
    import sklearn_cogaps

    return getattr(sklearn_cogaps, {"hpmf": "HierarchicalPMF", "wbpmf": "WeightedBackgroundPMF",
                                    "wbpmf-sim": "WeightedBackgroundPMF"}[name])  # fmt: skip


# the parameters of each model key beyond K, max_iter and random_state
_PARAMS = {
    "hpmf": {},
    "wbpmf": {"solver": "sequential"},
    "wbpmf-sim": {"solver": "simultaneous"},  # the default on these counts
}


def run_backed(path, max_iter, out, model):
    import anndata as ad

    Timed = _timed(_model(model))
    adata = ad.read_h5ad(path, backed="r")
    base = reset_peak()
    est = Timed(10, max_iter=max_iter, random_state=0, **_PARAMS[model])
    est._stamps = []
    with warnings.catch_warnings(), AnonymousPeak() as anonymous:
        warnings.simplefilter("ignore")
        t0 = time.perf_counter()
        est.fit(adata)
        seconds = time.perf_counter() - t0
    per_iter = np.diff(est._stamps)
    np.savez(out, **_fitted(est))
    print(json.dumps(dict(seconds=seconds, per_iter=float(np.median(per_iter)),
                          start=est._stamps[0] - t0 - float(np.median(per_iter)),
                          peak=peak_rss_mb() - base,
                          anonymous=anonymous.peak - anonymous.base)))  # fmt: skip


def run_subset(path, model):
    import anndata as ad

    cls = _model(model)
    adata = ad.read_h5ad(path, backed="r")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        max_iter = 20 if model == "hpmf" else 5  # an iteration of the second is 12 sweeps
        backed = cls(10, max_iter=max_iter, random_state=0, **_PARAMS[model]).fit(adata)
        memory = cls(10, max_iter=max_iter, random_state=0, **_PARAMS[model]).fit(
            adata.to_memory().X
        )
    print(json.dumps(dict(diff=_max_diff(_fitted(backed), _fitted(memory)))))


def run_cluster(path, max_iter, rows, reference, model):
    import distributed
    import h5py
    from anndata.experimental import read_elem_lazy

    with (
        distributed.LocalCluster(n_workers=2, processes=True, threads_per_worker=1,
                                 host="127.0.0.1", dashboard_address=None) as cluster,
        distributed.Client(cluster) as client,
        h5py.File(path, "r") as f,
    ):  # fmt: skip
        X = read_elem_lazy(f["X"], chunks=(rows, f["X"].attrs["shape"][1]))
        base = reset_peak()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            t0 = time.perf_counter()
            est = _model(model)(10, max_iter=max_iter, random_state=0, **_PARAMS[model]).fit(X)
            seconds = time.perf_counter() - t0
        peak = peak_rss_mb() - base
        workers = sum(client.run(_worker_peak).values())
    ref = dict(np.load(reference))
    print(json.dumps(dict(seconds=seconds, peak=peak, workers=workers,
                          diff=_max_diff(_fitted(est), ref))))  # fmt: skip


def simulate_survey(path, n, seed=0):
    """Write ``n`` noisy 5-d points and their noise covariances to zarr arrays in ``path``."""
    import zarr

    d = 5
    rng = np.random.default_rng(seed)
    means = rng.normal(scale=3.0, size=(4, d))
    factors = rng.normal(scale=0.6, size=(4, d, d))
    covs = factors @ np.swapaxes(factors, 1, 2) + 0.1 * np.eye(d)
    chols = np.linalg.cholesky(covs)
    weights = np.array([0.4, 0.3, 0.2, 0.1])
    X = zarr.open_array(str(path / "X"), mode="w", shape=(n, d), chunks=(STARS_PER_CHUNK, d),
                        dtype="f8")  # fmt: skip
    S = zarr.open_array(str(path / "S"), mode="w", shape=(n, d, d),
                        chunks=(STARS_PER_CHUNK, d, d), dtype="f8")  # fmt: skip
    for a in range(0, n, STARS_PER_CHUNK):
        m = min(STARS_PER_CHUNK, n - a)
        comp = rng.choice(4, size=m, p=weights)
        v = means[comp] + np.einsum("nij,nj->ni", chols[comp], rng.normal(size=(m, d)))
        noise = rng.normal(scale=0.3, size=(m, d, d))
        cov = noise @ np.swapaxes(noise, 1, 2) / d + np.eye(d) * rng.uniform(0.05, 0.5, (m, 1, 1))
        x = v + np.einsum("nij,nj->ni", np.linalg.cholesky(cov), rng.normal(size=(m, d)))
        x[rng.random(m) < 0.1, 4] = np.nan  # a coordinate not measured for a tenth
        X[a : a + m], S[a : a + m] = x, cov


def _survey_arrays(path):
    import dask.array as da

    return da.from_zarr(str(Path(path) / "X")), da.from_zarr(str(Path(path) / "S"))


def _xd_fitted(est):
    return {name: getattr(est, name) for name in ("weights_", "means_", "covariances_",
                                                  "objective_history_")}  # fmt: skip


def _xd_fit(X, S, max_iter):
    from sklearn_cogaps import ExtremeDeconvolution

    est = _timed(ExtremeDeconvolution)(4, max_iter=max_iter, tol=0.0, random_state=0)
    est._stamps = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t0 = time.perf_counter()
        est.fit(X, X_cov=S)
        seconds = time.perf_counter() - t0
    per_iter = float(np.median(np.diff(est._stamps)))
    return est, dict(seconds=seconds, per_iter=per_iter,
                     start=est._stamps[0] - t0 - per_iter)  # fmt: skip


def run_xd_local(path, max_iter, out):
    X, S = _survey_arrays(path)
    base = reset_peak()
    est, r = _xd_fit(X, S, max_iter)
    np.savez(out, **_xd_fitted(est))
    print(json.dumps(dict(r, peak=peak_rss_mb() - base)))


def _worker_peak():
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024.0
    return float("nan")


def run_xd_cluster(path, max_iter, reference):
    import distributed

    with (
        distributed.LocalCluster(n_workers=2, processes=True, threads_per_worker=1,
                                 host="127.0.0.1", dashboard_address=None) as cluster,
        distributed.Client(cluster) as client,
    ):  # fmt: skip
        X, S = _survey_arrays(path)
        base = reset_peak()
        est, r = _xd_fit(X, S, max_iter)
        peak = peak_rss_mb() - base
        workers = sum(client.run(_worker_peak).values())
    ref = dict(np.load(reference))
    print(json.dumps(dict(r, peak=peak, workers=workers, diff=_max_diff(_xd_fitted(est), ref))))


def run_xd_online(path, reference):
    from sklearn_cogaps import ExtremeDeconvolution

    X, S = _survey_arrays(path)
    first = (X[:1_000_000].compute(), S[:1_000_000].compute())
    batch = ExtremeDeconvolution(4)
    batch._set_params([np.load(reference)[k] for k in ("weights_", "means_", "covariances_")],
                      np.float64)  # fmt: skip
    batch.n_features_in_ = 5
    scores = {"batch": batch.score(first[0], X_cov=first[1])}
    result = {}
    base = reset_peak()
    t0 = time.perf_counter()
    est = ExtremeDeconvolution(4, random_state=0).partial_fit(X, X_cov=S)
    result["partial_fit"] = time.perf_counter() - t0
    scores["partial_fit"] = est.score(first[0], X_cov=first[1])
    t0 = time.perf_counter()
    est = ExtremeDeconvolution(4, solver="minibatch_em", batch_size=10_000, max_iter=1,
                               random_state=0).fit(X, X_cov=S)  # fmt: skip
    result["minibatch_em"] = time.perf_counter() - t0
    scores["minibatch_em"] = est.score(first[0], X_cov=first[1])
    print(json.dumps(dict(result, scores=scores, peak=peak_rss_mb() - base)))


def survey(args):
    tmp = Path(tempfile.gettempdir())
    path = tmp / f"sklearn_cogaps_survey_{args.stars}.zarr"
    if not (path / "S").exists():
        t0 = time.perf_counter()
        simulate_survey(path, args.stars)
        print(f"wrote {path} in {time.perf_counter() - t0:.0f} s")
    data_mb = args.stars * (5 + 25) * 8 / 2**20
    print(f"{args.stars:,} points x 5 coordinates with full noise covariances: {data_mb:,.0f} "
          f"MB in memory (float64), chunks of {STARS_PER_CHUNK:,} points")  # fmt: skip
    reference = tmp / "sklearn_cogaps_survey_fit.npz"
    r = _spawn("--xd-local", path, args.xd_iter, reference)
    print(f"batch EM from zarr, {args.xd_iter} iterations: {r['seconds']:.1f} s (start "
          f"{r['start']:.1f} s), {r['per_iter']:.2f} s per iteration (median), peak "
          f"{r['peak']:,.0f} MB = {r['peak'] / data_mb:.3f} x the data")  # fmt: skip
    if not args.skip_cluster:
        r = _spawn("--xd-cluster", path, args.xd_iter, reference)
        print(f"batch EM on a LocalCluster (2 workers, 1 thread each): {r['seconds']:.1f} s "
              f"(start {r['start']:.1f} s), {r['per_iter']:.2f} s per iteration, client peak "
              f"{r['peak']:,.0f} MB, workers' peaks {r['workers']:,.0f} MB in all, largest "
              f"difference from the local fit {r['diff']:.3g}")  # fmt: skip
    r = _spawn("--xd-online", path, reference)
    print(f"online EM, one epoch: partial_fit over the chunks {r['partial_fit']:.1f} s, "
          f"minibatch_em (batches of 10,000) {r['minibatch_em']:.1f} s, peak {r['peak']:,.0f} "
          f"MB; mean log-likelihood of the first 10^6 points: " + ", ".join(
              f"{k} {v:.5f}" for k, v in r["scores"].items()))  # fmt: skip


def _spawn(*args):
    env = dict(os.environ, OMP_NUM_THREADS="2", OPENBLAS_NUM_THREADS="1")
    out = subprocess.run([sys.executable, __file__, *map(str, args)], capture_output=True,
                         text=True, env=env)  # fmt: skip
    lines = [ln for ln in out.stdout.splitlines() if ln.startswith("{")]
    if out.returncode != 0 or not lines:
        raise SystemExit(f"{args[0]} failed:\n{out.stderr[-2000:]}")
    return json.loads(lines[-1])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cells", type=int, default=200_000)
    parser.add_argument("--genes", type=int, default=20_000)
    parser.add_argument("--subset", type=int, default=20_000)
    parser.add_argument("--max-iter", type=int, default=10)
    parser.add_argument("--skip-cluster", action="store_true")
    parser.add_argument("--part", choices=["cells", "survey", "all"], default="all")
    parser.add_argument("--models", default="hpmf,wbpmf", help="of the cells part")
    parser.add_argument("--wbpmf-iter", type=int, default=3)
    parser.add_argument("--stars", type=int, default=10_000_000)
    parser.add_argument("--xd-iter", type=int, default=5)
    args = parser.parse_args()
    if args.part in ("cells", "all"):
        cells(args)
    if args.part in ("survey", "all"):
        survey(args)


def cells(args):
    tmp = Path(tempfile.gettempdir())
    path = tmp / f"sklearn_cogaps_atlas_{args.cells}x{args.genes}.h5ad"
    if not path.exists():
        t0 = time.perf_counter()
        nnz = simulate(path, args.cells, args.genes)
        print(f"wrote {path} ({nnz:,} stored counts) in {time.perf_counter() - t0:.0f} s")
    import h5py

    with h5py.File(path, "r") as f:
        nnz = int(f["X/indptr"][-1])
    file_mb = path.stat().st_size / 2**20
    csr_mb = (12 * nnz + 8 * (args.cells + 1)) / 2**20
    print(f"{args.cells:,} cells x {args.genes:,} genes, {nnz:,} stored counts "
          f"({nnz / args.cells / args.genes:.2%}); file {file_mb:,.0f} MB, "
          f"in-memory CSR (float64) {csr_mb:,.0f} MB")  # fmt: skip
    subset = tmp / f"sklearn_cogaps_atlas_{args.subset}x{args.genes}.h5ad"
    if not subset.exists():
        simulate(subset, args.subset, args.genes)
    for model in args.models.split(","):
        name = _model(model).__name__
        name += "".join(f" ({k}={v!r})" for k, v in _PARAMS[model].items())
        max_iter = args.max_iter if model == "hpmf" else args.wbpmf_iter
        r = _spawn("--subset-run", subset, model)
        print(f"{name}, subset of {args.subset:,} cells: backed fit vs in-memory fit, largest "
              f"difference of loadings_, components_, lower_bound_: {r['diff']:.3g}")  # fmt: skip
        reference = tmp / f"sklearn_cogaps_atlas_backed_{model}.npz"
        r = _spawn("--backed-run", path, max_iter, reference, model)
        print(f"{name}, backed fit, {max_iter} iterations: {r['seconds']:.1f} s (start "
              f"{r['start']:.1f} s), {r['per_iter']:.2f} s per iteration (median), peak "
              f"{r['peak']:,.0f} MB above the process = {r['peak'] / file_mb:.2f} x the file, "
              f"{r['peak'] / csr_mb:.2f} x the in-memory CSR; anonymous memory (without "
              f"mapped files) {r['anonymous']:,.0f} MB")  # fmt: skip
        if not args.skip_cluster:
            rows = max(1, 2**22 * args.cells // max(nnz, 1))
            r = _spawn("--cluster-run", path, max_iter, rows, reference, model)
            print(f"{name}, LocalCluster (2 worker processes, 1 thread each), chunks of "
                  f"{rows:,} rows: {r['seconds']:.1f} s, client peak {r['peak']:,.0f} MB, "
                  f"workers' peaks {r['workers']:,.0f} MB in all, largest difference from the "
                  f"backed fit {r['diff']:.3g}")  # fmt: skip


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--backed-run":
        run_backed(sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5])
    elif len(sys.argv) > 1 and sys.argv[1] == "--subset-run":
        run_subset(sys.argv[2], sys.argv[3])
    elif len(sys.argv) > 1 and sys.argv[1] == "--cluster-run":
        run_cluster(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5], sys.argv[6])
    elif len(sys.argv) > 1 and sys.argv[1] == "--xd-local":
        run_xd_local(sys.argv[2], int(sys.argv[3]), sys.argv[4])
    elif len(sys.argv) > 1 and sys.argv[1] == "--xd-cluster":
        run_xd_cluster(sys.argv[2], int(sys.argv[3]), sys.argv[4])
    elif len(sys.argv) > 1 and sys.argv[1] == "--xd-online":
        run_xd_online(sys.argv[2], sys.argv[3])
    else:
        main()
