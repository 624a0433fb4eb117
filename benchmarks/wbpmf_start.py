"""WeightedBackgroundPMF: the length of the KL-NMF start against the fit it leads to.

For 50 (the default, as R's ebpmf) and 10 KL-NMF iterations: the ELBO after the start and
after a number of iterations of the fit, the time of the start (a fit with ``max_iter=1``)
and of an iteration, on ``load_digits`` (K = 10), the R reference run's counts shipped with
the tests (K = 5) and ``make_sc`` (K = 10, from the shared benchmark matrices). A shorter
start saves passes over the counts; the table says what it costs the fit.

    python benchmarks/wbpmf_start.py                 # all three, three seeds (make_sc: one)
    python benchmarks/wbpmf_start.py --data digits r --seeds 0

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
CHECKPOINTS = {"digits": (1, 10, 100, 400), "r": (1, 10, 100, 400), "sc": (1, 10, 30, 60)}
COMPONENTS = {"digits": 10, "r": 5, "sc": 10}


def load(name):
    if name == "digits":
        from sklearn.datasets import load_digits

        return load_digits().data
    if name == "r":
        path = Path(__file__).resolve().parents[1] / "tests/poisson/data/ebpmf_wbg/X.mtx.gz"
        return sparse.csr_matrix(io.mmread(path))
    from _shared_data import import_bench

    import_bench()
    from counts_data import make_sc

    return make_sc()[0].tocsr()


def run(X, K, n_start, seed, n_iter):
    from sklearn_cogaps import WeightedBackgroundPMF
    from sklearn_cogaps._poisson import _wbpmf

    _wbpmf._N_INIT_NMF = n_start
    t0 = time.perf_counter()
    WeightedBackgroundPMF(K, max_iter=1, random_state=seed, tol=0.0).fit(X)
    start = time.perf_counter() - t0
    t0 = time.perf_counter()
    model = WeightedBackgroundPMF(K, max_iter=n_iter, random_state=seed, tol=0.0).fit(X)
    total = time.perf_counter() - t0
    return model.objective_history_, start, (total - start) / (n_iter - 1)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", nargs="+", default=["digits", "r", "sc"], choices=list(COMPONENTS))
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    args = ap.parse_args()
    from sklearn.exceptions import ConvergenceWarning

    warnings.simplefilter("ignore", ConvergenceWarning)
    print(f"{'data':8s}{'start':>7s}{'seeds':>7s}{'start s':>10s}{'s / iter':>10s}  ELBO at "
          "the iterations shown (medians)")  # fmt: skip
    for name in args.data:
        X = load(name)
        seeds = args.seeds[:1] if name == "sc" else args.seeds
        marks = CHECKPOINTS[name]
        for n_start in LENGTHS:
            elbos, starts, iters = [], [], []
            for seed in seeds:
                history, start, per_iter = run(X, COMPONENTS[name], n_start, seed, marks[-1])
                elbos.append([history[i - 1] for i in marks])
                starts.append(start)
                iters.append(per_iter)
            medians = np.median(np.array(elbos), axis=0)
            cells = "  ".join(f"@{i}: {v:,.1f}" for i, v in zip(marks, medians))
            print(f"{name:8s}{n_start:7d}{len(seeds):7d}{statistics.median(starts):10.2f}"
                  f"{statistics.median(iters):10.3f}  {cells}", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
