"""WeightedBackgroundPMF: the length of the KL-NMF start against the fit it leads to.

For 50 (the default, as R's ebpmf) and 10 KL-NMF iterations: the ELBO after the start and
after a number of iterations of the fit, the time of the start (a fit with ``max_iter=1``)
and of an iteration, on ``load_digits`` (K = 10), the R reference run's counts shipped with
the tests (K = 5) and ``make_sc`` (K = 10, from the shared benchmark matrices). A shorter
start saves passes over the counts; the table says what it costs the fit.

    python benchmarks/wbpmf_start.py                 # all three, three seeds (make_sc: one)
    python benchmarks/wbpmf_start.py --data digits r --seeds 0
    python benchmarks/wbpmf_start.py --data sc --solver simultaneous --lengths 50 20 10
    python benchmarks/wbpmf_start.py --equal-time --data sc atlas --lengths 50 10 5

``--equal-time``: the ELBO of fits of ``--n-iter`` iterations (the default solver, ``tol=0``)
from each start length, read at a quarter, half, three quarters and the whole of the time
of the shortest of them, start included: the large counts of ``make_sc`` and ``atlas``, the
first 10,000 cells of ``bench_atlas.py``'s simulation (12.6 M stored counts, written to the
temporary directory at first use).

The machine must be quiet for the times to mean anything.
"""

import argparse
import statistics
import time
import warnings
from pathlib import Path

import numpy as np
from scipy import io, sparse

LENGTHS = (50, 10)
CHECKPOINTS = {"digits": (1, 10, 100, 400), "r": (1, 10, 100, 400), "sc": (1, 10, 30, 60),
               "atlas": (1, 10, 30, 60)}  # fmt: skip
COMPONENTS = {"digits": 10, "r": 5, "sc": 10, "atlas": 10}


def load(name):
    if name == "digits":
        from sklearn.datasets import load_digits

        return load_digits().data
    if name == "r":
        path = Path(__file__).resolve().parents[1] / "tests/poisson/data/ebpmf_wbg/X.mtx.gz"
        return sparse.csr_matrix(io.mmread(path))
    if name == "atlas":
        import tempfile

        import anndata as ad
        from bench_atlas import simulate

        path = Path(tempfile.gettempdir()) / "sklearn_cogaps_atlas_10000x20000.h5ad"
        if not path.exists():
            simulate(path, 10_000, 20_000)
        return ad.read_h5ad(path).X.astype(np.float64).tocsr()
    from _shared_data import import_bench

    import_bench()
    from counts_data import make_sc

    return make_sc()[0].tocsr()


def run(X, K, n_start, seed, n_iter, solver="sequential"):
    from sklearn_cogaps import WeightedBackgroundPMF
    from sklearn_cogaps._poisson import _wbpmf

    _wbpmf._N_INIT_NMF = _wbpmf._N_INIT_NMF_LARGE = n_start
    t0 = time.perf_counter()
    WeightedBackgroundPMF(K, solver=solver, max_iter=1, random_state=seed, tol=0.0).fit(X)
    start = time.perf_counter() - t0
    t0 = time.perf_counter()
    model = WeightedBackgroundPMF(K, solver=solver, max_iter=n_iter, random_state=seed, tol=0.0)
    model.fit(X)
    total = time.perf_counter() - t0
    return model.objective_history_, start, (total - start) / (n_iter - 1)


def equal_time(X, K, lengths, n_iter):
    """Each start length's fit, its ELBO read at fractions of the shortest fit's time."""
    from bench_atlas import _timed

    from sklearn_cogaps import WeightedBackgroundPMF
    from sklearn_cogaps._poisson import _wbpmf

    _Timed = _timed(WeightedBackgroundPMF)
    traces = {}
    for n_start in lengths:
        _wbpmf._N_INIT_NMF = _wbpmf._N_INIT_NMF_LARGE = n_start
        model = _Timed(K, max_iter=n_iter, tol=0.0, random_state=0)
        model._stamps = []
        t0 = time.perf_counter()
        model.fit(X)
        seconds = np.array(model._stamps) - t0
        traces[n_start] = seconds, model.objective_history_
        print(
            f"  start {n_start:3d}: first iteration done at {seconds[0]:.2f} s, "
            f"{np.median(np.diff(seconds)):.3f} s per iteration, {n_iter} in "
            f"{seconds[-1]:.1f} s, ELBO {model.objective_history_[-1]:,.1f}",
            flush=True,
        )
    shortest = min(seconds[-1] for seconds, _ in traces.values())
    for fraction in (0.25, 0.5, 0.75, 1.0):
        at = fraction * shortest
        cells = []
        for n_start, (seconds, history) in traces.items():
            i = np.searchsorted(seconds, at, side="right") - 1
            cells.append(f"{n_start}: {history[i]:,.1f} (it {i + 1})" if i >= 0 else "-")
        print(f"  at {at:6.1f} s   " + "   ".join(cells), flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", nargs="+", default=["digits", "r", "sc"], choices=list(COMPONENTS))
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--solver", default="sequential", choices=["sequential", "simultaneous"])
    ap.add_argument("--lengths", type=int, nargs="+", default=list(LENGTHS))
    ap.add_argument("--equal-time", action="store_true")
    ap.add_argument("--n-iter", type=int, default=200)
    args = ap.parse_args()
    from sklearn.exceptions import ConvergenceWarning

    warnings.simplefilter("ignore", ConvergenceWarning)
    if args.equal_time:
        for name in args.data:
            X = load(name)
            print(f"{name}: {X.shape[0]} x {X.shape[1]}, {X.nnz:,} stored counts, "
                  f"K = {COMPONENTS[name]}", flush=True)  # fmt: skip
            equal_time(X, COMPONENTS[name], args.lengths, args.n_iter)
        return
    print(f"{'data':8s}{'start':>7s}{'seeds':>7s}{'start s':>10s}{'s / iter':>10s}  ELBO at "
          "the iterations shown (medians)")  # fmt: skip
    for name in args.data:
        X = load(name)
        seeds = args.seeds[:1] if name == "sc" else args.seeds
        marks = CHECKPOINTS[name]
        for n_start in args.lengths:
            elbos, starts, iters = [], [], []
            for seed in seeds:
                history, start, per_iter = run(
                    X, COMPONENTS[name], n_start, seed, marks[-1], args.solver
                )
                elbos.append([history[i - 1] for i in marks])
                starts.append(start)
                iters.append(per_iter)
            medians = np.median(np.array(elbos), axis=0)
            cells = "  ".join(f"@{i}: {v:,.1f}" for i, v in zip(marks, medians))
            print(f"{name:8s}{n_start:7d}{len(seeds):7d}{statistics.median(starts):10.2f}"
                  f"{statistics.median(iters):10.3f}  {cells}", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
