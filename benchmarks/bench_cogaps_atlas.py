"""CoGAPS at single-cell scale: a sparse log-count matrix of pycogaps#77's shape (10,000
cells x 16,000 genes, K = 20), ours beside the C++ CoGAPS on this machine.

    python benchmarks/bench_cogaps_atlas.py --peer-python /path/to/venv/bin/python
    python benchmarks/bench_cogaps_atlas.py --cells 2000 --genes 3200 --iter 200 --chains 2

The data: ``make_single_cell(cells, genes, K, depth=0.4)`` (counts of gene programs, about
7.5% non-zero entries, the density of droplet UMI data after gene filtering), ``log1p``, a
CSR matrix, so both programs use CoGAPS 3's sparse-data model (its
``sparseOptimization``). The matrix is written once to ``--cache`` and every measurement
runs in a fresh process that reads it, so that its peak memory (VmHWM, reset after the data
are loaded: the fit's own memory, the data not included) and its time belong to the fit
alone.

1. **Prefix, same iterations.** ``--prefix`` iterations per phase from the empty atomic
   domain, ours (``init="empty"``) and the C++ CoGAPS (asynchronous sampler, sparse
   optimisation, R's defaults otherwise), alternated ``--repeat`` times on ``--threads``
   threads; medians of the wall seconds of the fit. Both chains gain atoms at the same
   bounded rate, so the prefix compares the two programs at the same atom counts.
2. **Ours to the answer.** A fit with the NMF start (``init="nmf"``) and ``--iter``
   iterations per phase: the start's seconds, the seconds per iteration at the start's atom
   count and at the end, the chi-square trace, peak memory. With ``--chains C``, C chains
   in parallel (one thread each) and their diagnostics (split R-hat of the chi-square and
   the largest over the matrices' entries; bulk ESS of the chi-square), on threads of one
   process so that the peak memory covers every chain; with ``--tol``, the phases end by
   those diagnostics and ``--iter`` caps each. With ``--checkpoint FILE`` the chains keep
   their state in FILE (every ``--checkpoint-minutes``, 10 by default), and the same
   command started again resumes from it; the times are then those of the last part
   (``resumed_at`` says after which iteration it began). A run of hours is best started
   as the worker itself, whose rounds' lines then reach the terminal::

       python benchmarks/bench_cogaps_atlas.py --worker ours --data \\
           /tmp/cogaps_atlas_10000x16000_k20.npz --k 20 --max-iter 2000 --init nmf \\
           --chains 2 --tol 0.1 --checkpoint atlas.ckpt

The C++ CoGAPS must be built by the user (see ``bench_cogaps.py``); without
``--peer-python`` part 1 runs ours alone. pycogaps#77 reports 9.5 hours for 10,000
iterations of this shape in 8 sets on 12 CPUs.
"""

import argparse
import contextlib
import io
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
DEPTH = 0.4
REPORTED_HOURS = 9.5  # pycogaps#77: 10,000 iterations, 8 sets on 12 CPUs


def make_data(path, cells, genes, K, seed=0):
    """The sparse log counts (cells x genes), saved as .npz."""
    from scipy import sparse

    from sklearn_cogaps.datasets import make_single_cell

    X = make_single_cell(cells, genes, K, depth=DEPTH, random_state=seed)[0].tocsr()
    X.data = np.log1p(X.data)
    sparse.save_npz(path, X, compressed=False)
    return X.nnz


def _load(path):
    from scipy import sparse

    return sparse.load_npz(path).tocsr()


def _peak_after(reset):
    sys.path.insert(0, str(HERE))
    from _memory import peak_rss_mb, reset_peak

    if reset:
        return reset_peak()
    return peak_rss_mb()


def worker_ours(args):
    import joblib
    from threadpoolctl import threadpool_limits

    from sklearn_cogaps import CoGAPS

    X = _load(args.data)
    base = _peak_after(True)
    several = args.chains > 1
    model = CoGAPS(
        args.k,
        max_iter=args.max_iter,
        init=args.init,
        random_state=args.seed,
        # one chain: a line per iteration, read below; several: a line per round
        verbose=(1 if args.checkpoint else 0) if several else 2,
        n_chains=args.chains,
        n_jobs=args.chains if several else None,
        tol=args.tol if several else None,
        checkpoint_path=args.checkpoint,
        checkpoint_minutes=args.checkpoint_minutes,
    )
    log = io.StringIO()
    threads = 1 if several else args.threads
    # several chains run on threads of this process (the sampler releases the GIL), so
    # that the peak memory measured here covers all of them; their rounds' lines go to the
    # terminal, so that a run resumed from a checkpoint shows how far each part got
    output = contextlib.nullcontext() if several else contextlib.redirect_stdout(log)
    backend = joblib.parallel_config(backend="threading")
    with threadpool_limits(limits=threads, user_api="openmp"), output, backend:
        wall0 = time.perf_counter()
        model.fit(X)
        wall = time.perf_counter() - wall0
    peak = _peak_after(False) - base
    # the progress lines: elapsed seconds and atoms after every iteration
    lines = re.findall(r"iteration (\d+)/\d+ .*atoms W (\d+) H (\d+)\s+elapsed ([\d.]+)s",
                       log.getvalue())  # fmt: skip
    out = {
        "wall": wall,
        "peak_mb": peak,
        "chisq": float(model.chisq_),
        "history": [float(v) for v in model.objective_history_],
        "elapsed": [float(e) for *_, e in lines],
        "atoms": [int(w) + int(h) for _, w, h, _ in lines],
        "resumed_at": int(getattr(model, "_resumed_at", 0)),
    }
    if args.chains > 1:
        out["rhat_chisq"] = float(model.rhat_["chisq"])
        out["rhat_max"] = float(max(np.nanmax(model.rhat_["loadings"]),
                                    np.nanmax(model.rhat_["components"])))  # fmt: skip
        out["ess_chisq"] = float(model.ess_bulk_["chisq"])
        out["n_iter"] = int(model.n_iter_)
        out["n_calibration"] = int(model.n_calibration_iter_)
    print(json.dumps(out))


def worker_peer(args):
    import pycogaps

    # numpy only (the C++ CoGAPS's environment has no scipy): the saved CSR's arrays
    with np.load(args.data) as saved:
        data, indices, indptr = saved["data"], saved["indices"], saved["indptr"]
        cells, genes = saved["shape"]
    D = np.zeros((genes, cells), dtype=np.float32)  # genes x cells, as it reads
    rows = np.repeat(np.arange(cells), np.diff(indptr))
    D[indices, rows] = data
    del data, indices, indptr, rows
    matrix = pycogaps.Matrix(D)
    del D
    base = _peak_after(True)
    params = pycogaps.GapsParameters(matrix)
    params.nPatterns = args.k
    params.nIterations = args.max_iter
    params.seed = args.seed
    params.maxThreads = args.threads
    params.asynchronousUpdates = True
    params.useSparseOptimization = True
    params.outputFrequency = 500
    params.printMessages = False
    params.checkpointInterval = 0
    wall0 = time.perf_counter()
    result = pycogaps.runCogapsFromMatrix(matrix, params, pycogaps.Matrix())
    wall = time.perf_counter() - wall0
    print(json.dumps({"wall": wall, "peak_mb": _peak_after(False) - base,
                      "chisq": float(result.meanChiSq)}))  # fmt: skip


def run(python, which, args, max_iter, init="empty", chains=1):
    cmd = [python, str(Path(__file__).resolve()), "--worker", which, "--data", str(args.data),
           "--k", str(args.k), "--max-iter", str(max_iter), "--init", init, "--seed",
           str(args.seed), "--threads", str(args.threads), "--chains", str(chains)]  # fmt: skip
    if args.tol is not None:
        cmd += ["--tol", str(args.tol)]
    if args.checkpoint is not None and init == "nmf":  # part 2
        cmd += ["--checkpoint", str(args.checkpoint.resolve()), "--checkpoint-minutes",
                str(args.checkpoint_minutes)]  # fmt: skip
    env = dict(os.environ, OMP_NUM_THREADS=str(args.threads))
    with tempfile.TemporaryDirectory() as scratch:
        done = subprocess.run(cmd, env=env, cwd=scratch, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"{which} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cells", type=int, default=10_000)
    parser.add_argument("--genes", type=int, default=16_000)
    parser.add_argument("--k", type=int, default=20)
    parser.add_argument("--prefix", type=int, default=20)
    parser.add_argument("--iter", type=int, default=50)
    parser.add_argument("--chains", type=int, default=1)
    parser.add_argument("--tol", type=float, default=None)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--peer-python")
    parser.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()))
    parser.add_argument("--checkpoint", type=Path,
                        help="part 2 keeps its chains' state in this file and resumes from it")  # fmt: skip
    parser.add_argument("--checkpoint-minutes", type=float, default=10.0)
    # worker mode
    parser.add_argument("--worker", choices=("ours", "peer"))
    parser.add_argument("--data", type=Path)
    parser.add_argument("--max-iter", type=int)
    parser.add_argument("--init", default="empty")
    args = parser.parse_args()
    if args.worker == "ours":
        return worker_ours(args)
    if args.worker == "peer":
        return worker_peer(args)

    args.data = args.cache / f"cogaps_atlas_{args.cells}x{args.genes}_k{args.k}.npz"
    if not args.data.exists():
        nnz = make_data(args.data, args.cells, args.genes, args.k)
    else:
        nnz = _load(args.data).nnz
    density = nnz / (args.cells * args.genes)
    print(f"{args.cells} cells x {args.genes} genes, K = {args.k}: {nnz:,} non-zeros "
          f"({100 * density:.1f}%), log1p; {args.threads} threads")  # fmt: skip

    print(f"\n1. {args.prefix} + {args.prefix} iterations from the empty domain "
          f"(wall s of the fit, medians of {args.repeat})")  # fmt: skip
    ours, peer = [], []
    for _ in range(args.repeat):
        ours.append(run(sys.executable, "ours", args, args.prefix))
        if args.peer_python:
            peer.append(run(args.peer_python, "peer", args, args.prefix))
    o = float(np.median([r["wall"] for r in ours]))
    print(f"   ours   {o:8.2f} s  peak {ours[0]['peak_mb']:7.0f} MB  atoms at the end "
          f"{ours[0]['atoms'][-1]:,}")  # fmt: skip
    if peer:
        p = float(np.median([r["wall"] for r in peer]))
        print(f"   C++    {p:8.2f} s  peak {peer[0]['peak_mb']:7.0f} MB   C++ / ours {p / o:.2f}")

    print(f"\n2. ours, init='nmf', {args.iter} + {args.iter} iterations")
    fit = run(sys.executable, "ours", args, args.iter, init="nmf", chains=args.chains)
    if args.chains == 1:
        el = np.asarray(fit["elapsed"])
        per = np.diff(el)
        start = fit["wall"] - (el[-1] - el[0]) - (per[0] if per.size else 0.0)
        q = max(1, per.size // 10)
        print(f"   whole fit {fit['wall']:.1f} s; start and first iteration {start:.1f} s; "
              f"s per iteration: first tenth {np.mean(per[:q]):.2f}, last tenth "
              f"{np.mean(per[-q:]):.2f}; atoms {fit['atoms'][0]:,} -> {fit['atoms'][-1]:,}; "
              f"peak {fit['peak_mb']:.0f} MB")  # fmt: skip
        hist = np.asarray(fit["history"])
        marks = sorted({1, 5, 10, len(hist) // 4, len(hist) // 2, len(hist)} - {0})
        print("   chi-square of the state at iteration " + ", ".join(
            f"{i}: {hist[i - 1]:.6g}" for i in marks if i <= len(hist)))  # fmt: skip
        print(f"   chi-square of the posterior mean {fit['chisq']:.6g}")
        hours = np.mean(per[-q:]) * 2 * 10_000 / 3600
        print(f"   10,000 + 10,000 iterations at the last rate: {hours:.1f} h on this machine "
              f"(pycogaps#77: {REPORTED_HOURS} h for its run on 12 CPUs)")  # fmt: skip
    else:
        print(f"   {args.chains} chains in parallel (tol={args.tol}): {fit['wall']:.1f} s, "
              f"{fit['n_calibration']} calibration + {fit['n_iter'] - fit['n_calibration']} "
              f"sampling iterations, peak {fit['peak_mb']:.0f} MB; R-hat chi-square "
              f"{fit['rhat_chisq']:.3f}, largest R-hat of an entry {fit['rhat_max']:.3f}, bulk "
              f"ESS of the chi-square {fit['ess_chisq']:.0f}; pooled chi-square "
              f"{fit['chisq']:.6g}")  # fmt: skip


if __name__ == "__main__":
    main()
