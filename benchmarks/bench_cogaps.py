"""Time CoGAPS fits on the shared benchmark matrices, side by side with the C++ CoGAPS.

The matrices come from ``shared/bench/cogaps_data.py`` (genes x samples, as CoGAPS reads
them; we fit their transpose) and the GIST example data set from ``shared/fixtures/gist``
(default uncertainty, as the R package's example runs). Every run is a fresh Python process
with a fixed number of OpenMP threads (``OMP_NUM_THREADS`` and ``threadpool_limits``); the
runs of ours and of the C++ CoGAPS alternate (ours, C++, ours, C++, ...) so that both see the
same load on a shared machine. The tables give medians over the repeats of the CPU seconds
and the wall seconds of the fit alone (data generation and imports excluded), and the ratio
``C++ / ours`` (above 1: ours is faster): on CPU seconds with one thread, on wall seconds
with more (CPU seconds then count every thread).

The C++ CoGAPS is found through ``--peer-python``, the Python of an environment where its
Python binding (``pycogaps``) is importable. It is not installable from a registry: a user
builds it from FertigLab's repositories on GitHub: clone ``FertigLab/pycogaps``, fill its
``src/CoGAPS`` folder from ``FertigLab/CoGAPS`` at the commit the submodule pins, and in a
separate virtual environment install ``pybind11``, ``numpy`` and the header-only
``boost-headers`` package; in pycogaps' ``setup.py`` add the Boost include folder, add
``-fopenmp -O3 -DBOOST_MATH_PROMOTE_DOUBLE_POLICY=0`` to the compile arguments and
``-fopenmp -O3`` to the link arguments, and run ``pip install --no-build-isolation .``.
The C++ runs use the asynchronous sampler (``asynchronousUpdates``, as ours), the default
uncertainty, chi-square records every 500 iterations and no checkpoint files (the R
defaults). Without ``--peer-python`` the script runs ours and prints the C++ figures quoted
from a quiet run of this kind of machine instead.

    python benchmarks/bench_cogaps.py                                # gist small medium
    python benchmarks/bench_cogaps.py --configs wide --threads 1 2   # wide, 1 and 2 threads
    python benchmarks/bench_cogaps.py --peer-python /path/to/venv/bin/python --repeat 5
    python benchmarks/bench_cogaps.py --configs medium wide --dtype float32    # ours in float32

With ``--dtype float32`` ours is given the data in float32 and fits in float32 (residual
and precisions stored in single precision, sums in double); the C++ CoGAPS always stores
and computes in single precision, whatever this option says.

The machine must be quiet for the figures to mean anything: timings of a loaded machine are
noisy, wall seconds most of all.
"""

import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _shared_data import shared_dir  # noqa: E402

# name: (K, iterations per phase, quoted C++ asynchronous seconds on 1 and 2 threads)
# The quoted figures are CPU seconds on one thread and wall seconds on two, from a quiet
# side-by-side run of this script's method on a 2-core AMD EPYC (Zen) machine.
CONFIGS = {
    "gist": (3, 5000, {1: 5.05}),
    "small": (3, 2000, {1: 3.93}),
    "medium": (5, 500, {1: 20.5}),
    "wide": (10, 100, {1: 10.8, 2: 7.15}),
}
SHARED = shared_dir()
DEFAULT_DATA = SHARED / "bench" / "cogaps_data.py"
DEFAULT_GIST = SHARED / "fixtures" / "gist"


def _load_data_module(path):
    spec = importlib.util.spec_from_file_location("cogaps_data", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _load(name, data_path, gist_path):
    """The data (genes x samples, float64) and its planted patterns (samples x K, or the
    published GIST patterns)."""
    import numpy as np

    if name == "gist":
        D = np.loadtxt(
            gist_path / "GIST_matrix.csv", delimiter=",", skiprows=1, usecols=range(1, 10)
        )
        P = np.loadtxt(
            gist_path / "GIST_result_Pmean.csv", delimiter=",", skiprows=1, usecols=(1, 2, 3)
        )
        return D, P
    data = _load_data_module(data_path)
    D = data.make(name)
    _, n_samples, K, _ = data.CONFIGS[name]
    t = np.linspace(0.0, 1.0, n_samples)
    centres = np.linspace(0.1, 0.9, K)
    P = np.exp(-0.5 * ((t[:, None] - centres[None, :]) / (0.6 / K)) ** 2)
    return D, P


def _worst_correlation(P_true, P_fit):
    """Smallest correlation of a reference pattern with its matched fitted pattern, matched
    greedily (the most correlated pair first). numpy only: the C++ CoGAPS's environment
    needs nothing more."""
    import numpy as np

    K = P_true.shape[1]
    C = np.nan_to_num(np.corrcoef(P_true.T, P_fit.T)[:K, K:])
    free = np.ones_like(C, dtype=bool)
    worst = 1.0
    for _ in range(min(C.shape)):
        i, j = np.unravel_index(np.argmax(np.where(free, C, -np.inf)), C.shape)
        worst = min(worst, float(C[i, j]))
        free[i, :] = False
        free[:, j] = False
    return worst


def worker_ours(name, data_path, gist_path, seed, threads, dtype="float64"):
    """Fit one configuration with sklearn_cogaps in this process, with the data in
    ``dtype``; print a JSON line."""
    import numpy as np
    from threadpoolctl import threadpool_limits

    from sklearn_cogaps import CoGAPS

    D, P_true = _load(name, data_path, gist_path)
    X = np.ascontiguousarray(D.T, dtype=dtype)
    K, n_iter, _ = CONFIGS[name]
    # the C++ CoGAPS's start: both chains gain atoms at the same rate, so an iteration
    # costs the same work in both programs
    model = CoGAPS(n_components=K, max_iter=n_iter, random_state=seed, init="empty")
    with threadpool_limits(limits=threads, user_api="openmp"):
        cpu0, wall0 = time.process_time(), time.perf_counter()
        model.fit(X)
        cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    atoms = model.n_atoms_history_.astype(float)
    # Each half-iteration makes Poisson(max(n_atoms, 10)) proposals, n_atoms counted at its
    # start: the expected number of proposals from the recorded atom counts.
    start = np.maximum(np.vstack([[0.0, 0.0], atoms[:-1]]), 10.0)
    proposals = float(start.sum())
    # A proposal on W reads a row of n_features residuals and precisions, one on H a row of
    # n_samples (a move or exchange between two rows reads two: a lower bound).
    row_entries = float(start[:, 0].sum() * X.shape[1] + start[:, 1].sum() * X.shape[0])
    print(
        json.dumps(
            {
                "cpu": cpu,
                "wall": wall,
                "proposals": proposals,
                "row_entries": row_entries,
                "bytes_per_entry": 2 * X.itemsize,
                "chisq": float(model.chisq_),
                "min_corr": _worst_correlation(P_true, model.loadings_),
            }
        )
    )


def worker_peer(name, data_path, gist_path, seed, threads):
    """Fit one configuration with the C++ CoGAPS (``pycogaps``) in this process."""
    import numpy as np
    import pycogaps

    D, P_true = _load(name, data_path, gist_path)
    K, n_iter, _ = CONFIGS[name]
    matrix = pycogaps.Matrix(np.ascontiguousarray(D, dtype=np.float32))
    params = pycogaps.GapsParameters(matrix)
    params.nPatterns = K
    params.nIterations = n_iter
    params.seed = seed
    params.maxThreads = threads
    params.asynchronousUpdates = True
    params.outputFrequency = 500
    params.printMessages = False
    params.checkpointInterval = 0  # no checkpoint files: the fit alone is timed
    cpu0, wall0 = time.process_time(), time.perf_counter()
    result = pycogaps.runCogapsFromMatrix(matrix, params, pycogaps.Matrix())
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    # the binding's buffer export of a Matrix is unusable: read it element by element
    Pmean = result.Pmean
    P_fit = np.array(
        [[pycogaps.getElement(Pmean.getCol(k), i) for k in range(K)] for i in range(Pmean.nRow())]
    )
    print(
        json.dumps(
            {
                "cpu": cpu,
                "wall": wall,
                "chisq": float(result.meanChiSq),
                "min_corr": _worst_correlation(P_true, P_fit),
            }
        )
    )


def run(python, which, name, args, threads):
    env = dict(os.environ, OMP_NUM_THREADS=str(threads))
    cmd = [
        python,
        str(Path(__file__).resolve()),
        "--worker",
        which,
        name,
        "--data",
        str(args.data.resolve()),
        "--gist",
        str(args.gist.resolve()),
        "--seed",
        str(args.seed),
        "--threads",
        str(threads),
        "--dtype",
        args.dtype,
    ]
    with tempfile.TemporaryDirectory() as scratch:  # whatever a run writes stays out of the way
        done = subprocess.run(
            cmd, env=env, cwd=scratch, capture_output=True, text=True, check=False
        )
    if done.returncode != 0:
        raise RuntimeError(f"{which} run of {name} on {threads} thread(s) failed:\n{done.stderr}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def bandwidth():
    """STREAM-like figures of this machine with numpy on one thread, in GB/s: the read rate
    of ``a.sum()`` and the rate of ``np.add(a, b, out=c)`` (two reads and a write), on
    arrays that fit in the caches (256 KB each) and on arrays that do not (128 MB each)."""
    import numpy as np

    rows = []
    for label, n in (("in cache", 1 << 15), ("in memory", 1 << 24)):
        a, b, c = np.ones(n), np.ones(n), np.empty(n)
        reps = max(3, (1 << 26) // n)
        best_read = best_add = float("inf")
        for _ in range(reps):
            t = time.perf_counter()
            a.sum()
            best_read = min(best_read, time.perf_counter() - t)
            t = time.perf_counter()
            np.add(a, b, out=c)
            best_add = min(best_add, time.perf_counter() - t)
        rows.append((label, 8 * n / best_read / 1e9, 24 * n / best_add / 1e9))
    return rows


def _timed_reads(n, reps, barrier, results):
    """One process of :func:`shared_bandwidth`: the best read rate of its own array, each
    read started together with the other processes'."""
    import numpy as np

    a = np.ones(n)
    best = float("inf")
    for _ in range(reps):
        barrier.wait()
        t = time.perf_counter()
        a.sum()
        best = min(best, time.perf_counter() - t)
    results.put(8 * n / best / 1e9)


def shared_bandwidth(processes=2, n=1 << 24, reps=10):
    """GB/s read by ``processes`` processes at once, each summing its own 128 MB array
    with numpy (one thread each), started together: what the cores share of the memory
    bandwidth, hence the most a memory-bound fit can gain from that many threads."""
    import multiprocessing

    ctx = multiprocessing.get_context()
    barrier, results = ctx.Barrier(processes), ctx.Queue()
    workers = [
        ctx.Process(target=_timed_reads, args=(n, reps, barrier, results)) for _ in range(processes)
    ]
    for w in workers:
        w.start()
    rates = [results.get() for _ in workers]
    for w in workers:
        w.join()
    return rates


def _median(runs, key):
    return statistics.median(r[key] for r in runs)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--configs",
        nargs="+",
        choices=list(CONFIGS),
        default=["gist", "small", "medium"],
        help="configurations to run (default: gist small medium)",
    )
    parser.add_argument(
        "--threads", nargs="+", type=int, default=[1], help="OpenMP thread counts (default: 1)"
    )
    parser.add_argument(
        "--repeat", type=int, default=3, help="runs of each program; medians are shown"
    )
    parser.add_argument("--seed", type=int, default=1, help="seed of both programs")
    parser.add_argument(
        "--peer-python",
        help="Python of an environment where the C++ CoGAPS's binding `pycogaps` is installed",
    )
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="path of cogaps_data.py")
    parser.add_argument(
        "--gist", type=Path, default=DEFAULT_GIST, help="folder of the GIST fixture"
    )
    parser.add_argument(
        "--bandwidth", action="store_true", help="first measure this machine's memory bandwidth"
    )
    parser.add_argument(
        "--dtype",
        choices=["float64", "float32"],
        default="float64",
        help="dtype of the data given to ours (default: float64); the C++ CoGAPS always "
        "computes in float32",
    )
    parser.add_argument("--worker", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        which, name = args.worker
        if which == "ours":
            worker_ours(name, args.data, args.gist, args.seed, args.threads[0], args.dtype)
        else:
            worker_peer(name, args.data, args.gist, args.seed, args.threads[0])
        return 0
    if not args.data.is_file():
        parser.error(
            f"cannot find the benchmark data module {args.data}; pass --data PATH/cogaps_data.py"
        )
    if "gist" in args.configs and not (args.gist / "GIST_matrix.csv").is_file():
        parser.error(f"cannot find GIST_matrix.csv in {args.gist}; pass --gist FOLDER")
    if any(t < 1 for t in args.threads):
        parser.error(f"--threads must be positive, got {args.threads}")
    peer = args.peer_python
    if peer is not None:
        probe = subprocess.run([peer, "-c", "import pycogaps"], capture_output=True, text=True)
        if probe.returncode != 0:
            parser.error(f"`import pycogaps` fails with --peer-python {peer}:\n{probe.stderr}")

    if args.bandwidth:
        print("numpy on one thread, best of repeats: read = a.sum(), add = np.add(a, b, out=c)")
        rows = bandwidth()
        for label, read, add in rows:
            print(f"  {label:<10} read {read:6.1f} GB/s   add {add:6.1f} GB/s")
        rates = shared_bandwidth(2)
        alone = rows[-1][1]
        print(
            f"  two processes reading at once, in memory: {' and '.join(f'{r:.1f}' for r in rates)} "
            f"GB/s, {sum(rates):.1f} in all ({sum(rates) / alone:.2f} times one alone): the most "
            "two threads can gain on a fit whose rows come from memory"
        )
        print()
    source = "run side by side" if peer else "quoted (pass --peer-python to run it)"
    print(
        f"CoGAPS, ours vs the C++ CoGAPS ({source}); fresh process per run, median of {args.repeat}"
    )
    print(
        "time: CPU s of the fit on 1 thread, wall s on more; ratio = C++ / ours (above 1: ours faster)"
    )
    print(f"ours: data in {args.dtype}; the C++ CoGAPS always stores and computes in float32\n")
    header = (
        f"{'config':<7} {'thr':>3} {'ours CPU':>8} {'ours wall':>9} {'Mprop/s':>7} {'GB/s':>6} {'chi2':>10} {'min r':>6} "
        f"{'C++ CPU':>8} {'C++ wall':>8} {'chi2':>10} {'min r':>6} {'C++/ours':>8}"
    )
    print(header)
    print("-" * len(header))
    for name in args.configs:
        for threads in args.threads:
            ours, theirs = [], []
            for _ in range(max(1, args.repeat)):
                ours.append(run(sys.executable, "ours", name, args, threads))
                if peer:
                    theirs.append(run(peer, "peer", name, args, threads))
            key = "cpu" if threads == 1 else "wall"
            o_cpu, o_wall = _median(ours, "cpu"), _median(ours, "wall")
            line = (
                f"{name:<7} {threads:>3} {o_cpu:8.2f} {o_wall:9.2f} "
                f"{_median(ours, 'proposals') / o_cpu / 1e6:7.2f} "
                f"{_median(ours, 'bytes_per_entry') * _median(ours, 'row_entries') / o_cpu / 1e9:6.1f} "
                f"{_median(ours, 'chisq'):10.1f} {_median(ours, 'min_corr'):6.3f} "
            )
            if theirs:
                c_cpu, c_wall = _median(theirs, "cpu"), _median(theirs, "wall")
                c_time = c_cpu if threads == 1 else c_wall
                line += (
                    f"{c_cpu:8.2f} {c_wall:8.2f} {_median(theirs, 'chisq'):10.1f} "
                    f"{_median(theirs, 'min_corr'):6.3f} "
                )
            else:
                c_time = CONFIGS[name][2].get(threads)
                quoted = f"{c_time:.2f}q" if c_time else "-"
                line += f"{quoted if threads == 1 else '-':>8} {quoted if threads > 1 else '-':>8} {'-':>10} {'-':>6} "
            o_time = o_cpu if key == "cpu" else o_wall
            line += f"{c_time / o_time:8.2f}" if c_time else f"{'-':>8}"
            print(line, flush=True)
    print(
        "\nMprop/s: millions of proposals per CPU second (estimated from the atom counts: each "
        "half-iteration makes Poisson(max(atoms, 10)) proposals). GB/s: bytes of residual and precision "
        "rows the proposals read per CPU second (16 per entry of a row in float64, 8 in float32, one row "
        "per proposal: a lower bound), to compare with the memory bandwidth (--bandwidth). chi2: chi-square of the posterior means "
        "(the C++ CoGAPS accumulates it in single precision). min r: smallest correlation of a planted "
        "(for gist: published) pattern with its matched fitted pattern. q: quoted, not measured here."
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
