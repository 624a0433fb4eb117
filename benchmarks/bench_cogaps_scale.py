"""CoGAPS at scale: threads, the sparse-data model, and the C++ CoGAPS's figures.

Every matrix comes from ../shared/bench/cogaps_data.py (genes x samples; we fit its
transpose). Each measurement runs in a fresh Python process so that peak memory
(VmHWM) and CPU time belong to that fit alone; the data are written to disk first
(dense .npy, or sparse .npz for the sparse path) so the fit's process holds only what a
user would.

    python benchmarks/bench_cogaps_scale.py                 # everything (about 10 minutes)
    python benchmarks/bench_cogaps_scale.py --only threads  # one table

The C++ CoGAPS cannot be installed here from any registry; its figures below were measured
on this kind of machine (CPU seconds, one thread) and are quoted by the project's issues.
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
from _memory import peak_rss_mb, reset_peak
from _shared_data import import_bench, shared_dir

HERE = Path(__file__).resolve().parent
# the shared benchmark generators, in shared/bench beside the repository (from any checkout
# below the directory that holds shared/)
BENCH = shared_dir() / "bench"

# name: (matrix, K, iterations per phase)
CONFIGS = {
    "wide": ("wide", 10, 100),
    "medium": ("medium", 5, 500),
    "sparse": ("sparse", 5, 20),
    "sc2000": ("sc2000", 5, 20),
}
# C++ CoGAPS, CPU seconds on one thread (and peak MB where measured)
CPP = {
    ("medium", "dense"): {"sequential": 20.5, "asynchronous": 23.2, "peak_mb": 73},
    ("sparse", "dense"): {"sequential": 21.9, "peak_mb": 804},
    ("sparse", "sparse"): {"sequential": 7.1, "peak_mb": 363},
    ("wide", "dense"): {
        "sequential": 10.75,
        "asynchronous": 11.4,
        "asynchronous_2_threads_wall": 6.9,
    },
}


def load_generator():
    import_bench()
    import cogaps_data

    # a single-cell-sized matrix with 90% zeros, made by the same recipe as the others
    cogaps_data.CONFIGS.setdefault("sc2000", (20000, 2000, 5, 0.9))
    return cogaps_data


def write_data(name, path, workdir):
    cogaps_data = load_generator()
    X = cogaps_data.make(name).T  # samples x genes
    if path == "sparse":
        from scipy import sparse

        target = Path(workdir) / f"{name}.npz"
        if not target.exists():
            sparse.save_npz(target, sparse.csr_matrix(X))
    else:
        target = Path(workdir) / f"{name}.npy"
        if not target.exists():
            np.save(target, X)
    return target


def run_one(args):
    """In a fresh process: load, fit, print one JSON line."""
    from threadpoolctl import threadpool_limits

    from sklearn_cogaps import CoGAPS

    if args.run.endswith(".npz"):
        from scipy import sparse

        X = sparse.load_npz(args.run)
    else:
        X = np.load(args.run)
    if hasattr(X, "indices"):
        data_mb = (X.data.nbytes + X.indices.nbytes + X.indptr.nbytes) / 2**20
    else:
        data_mb = X.nbytes / 2**20
    # the C++ CoGAPS's start, as the quoted C++ figures
    model = CoGAPS(n_components=args.k, max_iter=args.iters, random_state=0, init="empty")
    # the fit's own peak: VmHWM reset to the resident memory with the data loaded
    loaded_mb = reset_peak()
    with threadpool_limits(args.threads, user_api="openmp"):
        cpu0, wall0 = time.process_time(), time.perf_counter()
        model.fit(X)
        cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    atoms = model.n_atoms_history_.sum(axis=1)
    print(
        json.dumps(
            {
                "cpu": cpu,
                "wall": wall,
                "iters": int(model.n_iter_),
                "proposals": float(np.maximum(atoms, 20).sum()),
                "peak_mb": peak_rss_mb(),
                "above_data_mb": peak_rss_mb() - loaded_mb,
                "data_mb": data_mb,
                "chisq": float(model.chisq_),
            }
        )
    )


def measure(config, path, threads, workdir):
    name, k, iters = CONFIGS[config]
    data = write_data(name, path, workdir)
    env = dict(os.environ, OMP_NUM_THREADS=str(threads))
    out = subprocess.run(
        [
            sys.executable,
            __file__,
            "--run",
            str(data),
            "--k",
            str(k),
            "--iters",
            str(iters),
            "--threads",
            str(threads),
        ],
        check=True,
        capture_output=True,
        text=True,
        env=env,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def table(rows, header):
    widths = [max(len(str(r[i])) for r in rows + [header]) for i in range(len(header))]
    line = "  ".join(h.ljust(w) for h, w in zip(header, widths))
    print(line)
    print("-" * len(line))
    for r in rows:
        print("  ".join(str(c).ljust(w) for c, w in zip(r, widths)))
    print()


def threads_table(workdir):
    rows = []
    base = None
    for t in (1, 2):
        r = measure("wide", "dense", t, workdir)
        per_iter = r["wall"] / r["iters"]
        base = base or per_iter
        rows.append(
            [
                "wide 5000x500 K=10, 100+100",
                t,
                f"{1000 * per_iter:.1f}",
                f"{base / per_iter:.2f}x",
                f"{r['cpu']:.1f}",
                f"{r['wall']:.1f}",
                f"{CPP[('wide', 'dense')]['sequential'] / r['wall']:.2f}x",
            ]
        )
    print(
        "Threads: wall time per iteration (speed-up against 1 thread); C++ sequential 10.75 s, "
        "asynchronous 11.4 s (1 thread), 6.9 s (2 threads)"
    )
    table(
        rows,
        ["matrix", "threads", "ms/iter", "speed-up", "cpu s", "wall s", "C++ seq / ours (wall)"],
    )


def paths_table(workdir, configs=("sparse", "sc2000")):
    rows = []
    for config in configs:
        for path in ("dense", "sparse"):
            r = measure(config, path, 1, workdir)
            cpp = CPP.get((config, path))
            rows.append(
                [
                    config,
                    path,
                    f"{r['cpu']:.1f}",
                    f"{r['peak_mb']:.0f}",
                    f"{r['above_data_mb']:.0f}",
                    f"{r['above_data_mb'] / r['data_mb']:.2f}x",
                    f"{r['chisq']:.4g}",
                    f"{cpp['sequential']:.1f}" if cpp else "-",
                    f"{cpp['sequential'] / r['cpu']:.2f}x" if cpp else "-",
                    f"{cpp['peak_mb']}" if cpp else "-",
                ]
            )
    print(
        "Dense against sparse model, 1 thread, 20 iterations per phase (sparse: 20000x1000, 97% "
        "zeros; sc2000: 20000x2000, 90% zeros), K=5"
    )
    print(
        "peak MB: the process's; fit MB: the fit's peak above the loaded data (VmHWM reset after "
        "loading), also as a multiple of the input's size (dense array or CSR arrays)"
    )
    table(
        rows,
        [
            "matrix",
            "model",
            "cpu s",
            "peak MB",
            "fit MB",
            "fit / input",
            "chi-square",
            "C++ cpu s",
            "C++ / ours",
            "C++ peak MB",
        ],
    )


def peer_table(workdir):
    r = measure("medium", "dense", 1, workdir)
    cpp = CPP[("medium", "dense")]
    print("medium 5000x200, K=5, 500 iterations per phase, 1 thread")
    table(
        [
            [
                "medium",
                f"{r['cpu']:.1f}",
                f"{r['peak_mb']:.0f}",
                f"{r['proposals'] / r['cpu']:.3g}",
                f"{cpp['sequential'] / r['cpu']:.2f}x",
                f"{cpp['asynchronous'] / r['cpu']:.2f}x",
            ]
        ],
        ["matrix", "cpu s", "peak MB", "proposals/s", "C++ seq / ours", "C++ async / ours"],
    )


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=["threads", "paths", "peer"])
    parser.add_argument("--run")
    parser.add_argument("--k", type=int)
    parser.add_argument("--iters", type=int)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    if args.run:
        run_one(args)
        return
    with tempfile.TemporaryDirectory() as workdir:
        if args.only in (None, "peer"):
            peer_table(workdir)
        if args.only in (None, "threads"):
            threads_table(workdir)
        if args.only in (None, "paths"):
            paths_table(workdir)


if __name__ == "__main__":
    main()
