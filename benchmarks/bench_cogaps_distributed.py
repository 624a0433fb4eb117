"""CoGAPS's distributed mode on a Dask LocalCluster against a plain fit, on a simulated sparse
single-cell matrix.

The data come from ``sklearn_cogaps.datasets.make_single_cell`` (cells x genes Poisson
counts of ``--n-components`` gene programs; ``--depth 0.1`` gives about 94% zeros) and are
written to disk as a sparse .npz first. Each fit then runs in a fresh Python process, so
that the peak memory (VmHWM) of that process belongs to the fit alone:

* ``plain``: ``CoGAPS(K).fit(X)`` in one process (the sparse-data model, as X is sparse);
* ``distributed``: ``CoGAPS(K, distributed="single-cell", n_sets=4)`` with joblib's
  ``dask`` backend on a ``LocalCluster`` of ``--workers`` worker processes with one thread
  each; the peak memory of the client process and of every worker process is reported.

Both report wall time, CPU time (for the distributed fit, of the client and of the whole worker
processes), peak memory (VmHWM, with the resident memory before the fit beside it) and the
correlation of each true program with its matched fitted one, for the cells (``W``) and for
the genes (``H``). The plain fit uses ``--threads`` OpenMP threads (default: the usable CPUs),
the distributed one ``--workers`` single-thread workers (default: the usable CPUs, at most
``--n-sets``), so on a 2-core machine both use 2 cores.

    python benchmarks/bench_cogaps_distributed.py                      # 50000 x 2000, 200 it.
    python benchmarks/bench_cogaps_distributed.py --n-samples 5000 --n-features 500

200 iterations per phase recover the 5 programs at r > 0.96 (W) on a 12,500-cell subset. The
full size should take about 6 to 7 minutes on 2 quiet cores, estimated from single-thread CPU
times: a plain chain of 200 iterations per phase costs 40 CPU s on 12,500 x 2,000, and a
chain's cost grows slightly faster than the number of cells (x 5.1 from 12,500 to 50,000
cells at 50 iterations), so about 220 s for the plain fit, 4 x (40 + 20) s for the two phases
of the subsets on 2 workers (120 s), and about 40 s for the data and the process starts.
On a loaded machine OpenMP's spinning waits can make the plain fit's threads many times slower
(``OMP_WAIT_POLICY=passive`` helps); measure on a quiet one.

Needs ``dask[distributed]`` (``pip install "sklearn_cogaps[distributed]"``).
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from _memory import peak_rss_mb, rss_mb

HERE = Path(__file__).resolve().parent


def make_data(args, workdir):
    from scipy import sparse

    from sklearn_cogaps.datasets import make_single_cell

    X, W, H = make_single_cell(
        args.n_samples,
        args.n_features,
        args.n_components,
        depth=args.depth,
        random_state=args.seed,
    )
    sparse.save_npz(workdir / "X.npz", X, compressed=False)
    np.save(workdir / "W.npy", W)
    np.save(workdir / "H.npy", H)
    return X


def recovery(workdir, model):
    from sklearn_cogaps import match_components

    W = np.load(workdir / "W.npy")
    H = np.load(workdir / "H.npy")
    k = min(W.shape[1], model.loadings_.shape[1])
    # match the true programs to fitted ones (a distributed fit may have another count)
    if model.loadings_.shape[1] >= W.shape[1]:
        _, corr_w = match_components(W, model.loadings_)
        _, corr_h = match_components(H, model.components_, axis=0)
    else:
        _, corr_w = match_components(model.loadings_, W)
        _, corr_h = match_components(model.components_, H, axis=0)
    return {
        "matched": int(k),
        "corr_W": corr_w.round(3).tolist(),
        "corr_H": corr_h.round(3).tolist(),
    }


def run_one(kind, workdir, args):
    """One fit in this (fresh) process; prints one JSON line."""
    from scipy import sparse

    from sklearn_cogaps import CoGAPS

    X = sparse.load_npz(workdir / "X.npz").tocsr()
    params = dict(n_components=args.n_components, max_iter=args.max_iter, random_state=args.seed)
    out = {
        "kind": kind,
        "data_mb": round((X.data.nbytes + X.indices.nbytes + X.indptr.nbytes) / 2**20, 1),
    }
    # resident memory before the fit: the interpreter, the imports and (client) the loaded X
    out["base_mb"] = round(rss_mb(), 1)
    if kind == "plain":
        from threadpoolctl import threadpool_limits

        cpu, wall = time.process_time(), time.perf_counter()
        with threadpool_limits(limits=args.threads, user_api="openmp"):
            model = CoGAPS(**params).fit(X)
        out["wall_s"] = round(time.perf_counter() - wall, 2)
        out["cpu_s"] = round(time.process_time() - cpu, 2)
        out["peak_mb"] = round(peak_rss_mb(), 1)
    else:
        import joblib
        from distributed import Client, LocalCluster

        with (
            LocalCluster(
                n_workers=args.workers,
                threads_per_worker=1,
                processes=True,
                host="127.0.0.1",
                dashboard_address=None,
            ) as cluster,
            Client(cluster) as client,
        ):
            client.wait_for_workers(args.workers)
            # the workers' memory before any task: interpreter, Dask and the package imported
            client.run(_import_package)
            out["worker_base_mb"] = [round(v, 1) for v in client.run(rss_mb).values()]
            worker_cpu = client.run(time.process_time)
            cpu, wall = time.process_time(), time.perf_counter()
            with joblib.parallel_config(backend="dask"):
                model = CoGAPS(distributed="single-cell", n_sets=args.n_sets, **params).fit(X)
            out["wall_s"] = round(time.perf_counter() - wall, 2)
            out["client_cpu_s"] = round(time.process_time() - cpu, 2)
            after = client.run(time.process_time)
            out["worker_cpu_s"] = round(sum(after[w] - worker_cpu[w] for w in after), 2)
            workers = client.run(peak_rss_mb)
            out["worker_peak_mb"] = [round(v, 1) for v in workers.values()]
        out["client_peak_mb"] = round(peak_rss_mb(), 1)
        out["n_components_"] = int(model.n_components_)
        out["pattern_clusters_"] = model.pattern_clusters_.tolist()
    out["chisq"] = float(model.chisq_)
    out.update(recovery(workdir, model))
    print(json.dumps(out), flush=True)


def _import_package():
    import sklearn_cogaps  # noqa: F401


def launch(kind, workdir, args):
    cmd = [sys.executable, str(Path(__file__).resolve()), "--run", kind, "--workdir", str(workdir)]
    for name in (
        "n_samples",
        "n_features",
        "n_components",
        "max_iter",
        "n_sets",
        "workers",
        "seed",
        "threads",
    ):
        cmd += [f"--{name.replace('_', '-')}", str(getattr(args, name))]
    cmd += ["--depth", str(args.depth)]
    env = dict(
        os.environ, PYTHONPATH=os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")])
    )
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    if done.returncode != 0:
        sys.stderr.write(done.stderr)
        raise SystemExit(f"{kind} fit failed (exit status {done.returncode})")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n-samples", type=int, default=50000)
    parser.add_argument("--n-features", type=int, default=2000)
    parser.add_argument("--n-components", type=int, default=5)
    parser.add_argument("--depth", type=float, default=0.1)
    parser.add_argument("--max-iter", type=int, default=200, help="iterations of each phase")
    parser.add_argument("--n-sets", type=int, default=4)
    parser.add_argument(
        "--workers",
        type=int,
        default=None,
        help="Dask worker processes (default: the usable CPUs, at most --n-sets)",
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--threads",
        type=int,
        default=None,
        help="OpenMP threads of the plain fit (default: the usable CPUs, as many as the workers "
        "of the distributed fit on a machine of that size)",
    )
    parser.add_argument("--only", choices=["plain", "distributed"])
    parser.add_argument("--run", choices=["plain", "distributed"], help=argparse.SUPPRESS)
    parser.add_argument("--workdir", help=argparse.SUPPRESS)
    args = parser.parse_args()
    n_cpus = len(os.sched_getaffinity(0))
    if args.workers is None:
        args.workers = max(1, min(args.n_sets, n_cpus))
    if args.threads is None:
        args.threads = n_cpus
    if args.run:
        run_one(args.run, Path(args.workdir), args)
        return

    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        start = time.perf_counter()
        X = make_data(args, workdir)
        zeros = 1.0 - X.nnz / (X.shape[0] * X.shape[1])
        print(
            f"data: {X.shape[0]} cells x {X.shape[1]} genes, {100 * zeros:.1f}% zeros, "
            f"{X.nnz} non-zeros; K={args.n_components}, {args.max_iter} iterations per phase; "
            f"plain fit on {args.threads} threads, {args.n_sets} sets on {args.workers} Dask "
            "workers of 1 thread "
            f"(made in {time.perf_counter() - start:.1f} s)",
            flush=True,
        )
        kinds = [args.only] if args.only else ["plain", "distributed"]
        results = [launch(kind, workdir, args) for kind in kinds]

    print()
    print(
        f"{'fit':<13} {'wall s':>8} {'CPU s':>8}  {'peak MB (before the fit)':<44} "
        f"{'K':>3}  corr W (min/mean)  corr H (min/mean)"
    )
    for r in results:
        if r["kind"] == "plain":
            mem = f"{r['peak_mb']:.0f} ({r['base_mb']:.0f})"
            cpu = r["cpu_s"]
            k = args.n_components
        else:
            mem = f"client {r['client_peak_mb']:.0f} ({r['base_mb']:.0f}); workers " + ", ".join(
                f"{p:.0f} ({b:.0f})" for p, b in zip(r["worker_peak_mb"], r["worker_base_mb"])
            )
            cpu = r["client_cpu_s"] + r["worker_cpu_s"]
            k = r["n_components_"]
        cw, ch = np.array(r["corr_W"]), np.array(r["corr_H"])
        name = "plain" if r["kind"] == "plain" else f"dist. {args.n_sets} sets"
        print(
            f"{name:<13} {r['wall_s']:8.1f} {cpu:8.1f}  {mem:<44} {k:>3}  "
            f"{cw.min():.3f} / {cw.mean():.3f}      {ch.min():.3f} / {ch.mean():.3f}"
        )
    print(
        f"\nCSR data: {results[0]['data_mb']} MB. Peak MB is each process's VmHWM: its whole "
        "resident peak, including the interpreter and imports, and for the plain fit and the "
        "client the loaded X; in brackets the resident memory before the fit (for a worker: "
        "with Dask and the package imported, before any task). CPU s of the distributed fit is "
        "the client's plus the workers' (whole worker processes, Dask's own work included)."
    )
    for r in results:
        if r["kind"] == "distributed":
            print(
                f"consensus patterns: {r['n_components_']}; phase-1 pattern clusters: "
                f"{r['pattern_clusters_']}"
            )
    print(
        f"whole run (data, both fits, process and cluster starts): "
        f"{time.perf_counter() - start:.0f} s"
    )


if __name__ == "__main__":
    main()
