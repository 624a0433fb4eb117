"""Time CoGAPS fits on the shared benchmark matrices, beside the C++ CoGAPS's figures.

The matrices come from ``shared/bench/cogaps_data.py`` (genes x samples, as CoGAPS reads
them; we fit their transpose). Each configuration runs in a fresh Python process with one
OpenMP thread (``OMP_NUM_THREADS=1`` and ``threadpool_limits(1)``), so that its peak memory
(VmHWM) is its own. Times are CPU seconds of the whole fit (``time.process_time``)
and wall seconds; the C++ figures are CPU seconds for the whole run on one thread, measured
on this kind of machine (the C++ CoGAPS is not installable here from any registry, so it
cannot be run side by side). The machine is shared: timings are noisy.

    python benchmarks/bench_cogaps.py                  # small and medium
    python benchmarks/bench_cogaps.py --configs small  # one configuration
    python benchmarks/bench_cogaps.py --configs small medium wide --repeat 3
"""

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import time
from pathlib import Path

# name: (K, iterations per phase, C++ sequential s, C++ asynchronous s, C++ peak MB)
CONFIGS = {
    "small": (3, 2000, 3.4, 3.8, None),
    "medium": (5, 500, 20.5, 23.2, 73.0),
    # from shared/reference/cogaps.md: wall seconds of a quiet run, one thread
    "wide": (10, 100, 10.75, 11.4, None),
}
DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared" / "bench" / "cogaps_data.py"


def _load_data_module(path):
    spec = importlib.util.spec_from_file_location("cogaps_data", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _planted_patterns(data_module, name):
    """The noise-free patterns of a benchmark matrix (samples x K), as cogaps_data builds them."""
    import numpy as np

    _, n_samples, K, _ = data_module.CONFIGS[name]
    t = np.linspace(0.0, 1.0, n_samples)
    centres = np.linspace(0.1, 0.9, K)
    return np.exp(-0.5 * ((t[:, None] - centres[None, :]) / (0.6 / K)) ** 2)


def worker(name, data_path, seed):
    """Fit one configuration in this process and print a JSON line of measurements."""
    import numpy as np
    from threadpoolctl import threadpool_limits
    from _memory import peak_rss_mb

    from sklearn_cogaps import CoGAPS, effective_n_threads, match_components

    data = _load_data_module(data_path)
    D = data.make(name)
    X = np.ascontiguousarray(D.T)
    K, n_iter, *_ = CONFIGS[name]
    rss_before = peak_rss_mb()
    model = CoGAPS(n_components=K, max_iter=n_iter, random_state=seed)
    with threadpool_limits(limits=1, user_api="openmp"):
        threads = effective_n_threads()
        cpu0, wall0 = time.process_time(), time.perf_counter()
        model.fit(X)
        cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    rss_after = peak_rss_mb()
    atoms = model.n_atoms_history_.astype(float)
    # Each half-iteration makes Poisson(max(n_atoms, 10)) proposals, n_atoms counted at its
    # start: the expected number of proposals from the recorded atom counts.
    start = np.vstack([[0.0, 0.0], atoms[:-1]])
    proposals = float(np.maximum(start, 10.0).sum())
    _, corr = match_components(_planted_patterns(data, name), model.loadings_)
    print(
        json.dumps(
            {
                "name": name,
                "shape": list(X.shape),
                "K": K,
                "n_iter": int(model.n_iter_),
                "threads": int(threads),
                "cpu": cpu,
                "wall": wall,
                "proposals": proposals,
                "rss_peak_mb": rss_after,
                "rss_fit_mb": rss_after - rss_before,
                "chisq_per_entry": model.chisq_ / X.size,
                "min_corr": float(corr.min()),
                "atoms": [int(a) for a in model.n_atoms_history_[-1]],
            }
        )
    )


def run(name, data_path, seed):
    env = dict(os.environ, OMP_NUM_THREADS="1")
    cmd = [
        sys.executable,
        __file__,
        "--worker",
        name,
        "--data",
        str(data_path),
        "--seed",
        str(seed),
    ]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"configuration {name} failed:\n{done.stderr}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--configs",
        nargs="+",
        choices=sorted(CONFIGS),
        default=["small", "medium"],
        help="configurations to run (default: small medium)",
    )
    parser.add_argument(
        "--repeat", type=int, default=1, help="runs per configuration; the fastest CPU time is kept"
    )
    parser.add_argument("--seed", type=int, default=0, help="random_state of the fits")
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="path of cogaps_data.py")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        worker(args.worker, args.data, args.seed)
        return 0
    if not args.data.is_file():
        parser.error(
            f"cannot find the benchmark data module {args.data}; pass --data PATH/cogaps_data.py"
        )

    print(
        f"CoGAPS on shared/bench/cogaps_data.py, one thread, fresh process per run, best CPU of {args.repeat}"
    )
    print(
        "ratio = ours / C++ CPU seconds (below 1: faster than the C++ CoGAPS); the machine is shared, so timings are noisy\n"
    )
    header = (
        f"{'config':<7} {'X (n x m)':>11} {'K':>3} {'iter':>10} {'CPU s':>7} {'wall s':>7} "
        f"{'ms/iter':>8} {'iter/s':>7} {'Mprop/s':>8} {'peak MB':>8} {'fit MB':>7} "
        f"{'C++ seq':>8} {'ratio':>6} {'C++ async':>9} {'ratio':>6} {'C++ MB':>7} {'chi2/n':>7} {'min r':>6}"
    )
    print(header)
    print("-" * len(header))
    for name in args.configs:
        runs = [run(name, args.data, args.seed) for _ in range(max(1, args.repeat))]
        r = min(runs, key=lambda m: m["cpu"])
        _, n_iter_phase, seq, asy, mb = CONFIGS[name]
        shape = f"{r['shape'][0]}x{r['shape'][1]}"
        iters = f"2x{n_iter_phase}"
        print(
            f"{name:<7} {shape:>11} {r['K']:>3} {iters:>10} {r['cpu']:7.2f} {r['wall']:7.2f} "
            f"{1000 * r['cpu'] / r['n_iter']:8.3f} {r['n_iter'] / r['cpu']:7.0f} "
            f"{r['proposals'] / r['cpu'] / 1e6:8.2f} {r['rss_peak_mb']:8.1f} {r['rss_fit_mb']:7.1f} "
            f"{seq:8.2f} {r['cpu'] / seq:6.2f} {asy:9.2f} {r['cpu'] / asy:6.2f} "
            f"{(f'{mb:.0f}' if mb else '-'):>7} {r['chisq_per_entry']:7.3f} {r['min_corr']:6.3f}",
            flush=True,
        )
    print(
        "\nms/iter, iter/s and Mprop/s are per CPU second. "
        "Mprop/s: millions of proposals per CPU second, the proposal count estimated from the atom counts "
        "(each half-iteration makes Poisson(max(atoms, 10)) proposals)."
    )
    print(
        "peak MB: the process's peak resident memory (Python, numpy, scikit-learn included); fit MB: its "
        "growth during the fit. chi2/n: chi-square of the posterior mean per entry; min r: smallest "
        "correlation of a planted pattern with its matched fitted pattern. 'wide' C++ figures are wall seconds."
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
