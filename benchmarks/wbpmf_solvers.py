"""WeightedBackgroundPMF: the sequential topic updates of Algorithm 3.1 against the
simultaneous ones, with HierarchicalPMF's iteration beside them.

For each data set and solver, in one process, alternated (sequential, simultaneous,
HierarchicalPMF, then again): the time of a fit with ``max_iter=1`` (the start and one
iteration) and of a fit with ``max_iter=1 + n``; an iteration's time is their difference
over ``n``. The ELBO traces of the longer fits say how many iterations the simultaneous
solver needs to reach the sequential solver's bound at a few iterations, and in what time,
start included. Data: ``load_digits`` (K = 10), the R reference run's counts shipped with
the tests (K = 5) and ``make_sc`` (20000 x 5000, K = 10, from the shared benchmark
matrices). Default threads (2 on this machine).

    python benchmarks/wbpmf_solvers.py                      # all three, 3 repeats
    python benchmarks/wbpmf_solvers.py --data sc --repeat 5 --n-iter 30
    python benchmarks/wbpmf_solvers.py --fixed-points       # the prior families' ends

``--fixed-points``: both solvers from the same start on ``make_background_counts(150, 300,
2, weight=0.3, signal=5.0)``, seeds 0 to 7, ``max_iter=300``, for each prior family (both
sides): the final ELBO and iterations of each, their difference and the smallest
correlation of the matched topics. No times.

The machine must be quiet for the times to mean anything.
"""

import argparse
import statistics
import time
import warnings

import numpy as np
from wbpmf_start import COMPONENTS, load

N_ITER = {"digits": 100, "r": 100, "sc": 30}


def timed(make, X, n):
    t0 = time.perf_counter()
    make(1).fit(X)
    one = time.perf_counter() - t0
    t0 = time.perf_counter()
    model = make(1 + n).fit(X)
    return one, (time.perf_counter() - t0 - one) / n, model


def fixed_points(families=("gamma", "point_gamma", "gamma_mixture", "exponential_mixture")):
    from sklearn_cogaps import WeightedBackgroundPMF, match_components
    from sklearn_cogaps.datasets import make_background_counts

    warnings.simplefilter("ignore")
    print("make_background_counts(150, 300, 2, weight=0.3, signal=5.0), K = 2, max_iter=300")
    print(f"{'prior':20} {'seed':>4} {'sequential (it)':>22} {'simultaneous (it)':>22} "
          f"{'difference':>10} {'min corr':>8}")  # fmt: skip
    for family in families:
        for seed in range(8):
            X = make_background_counts(150, 300, 2, weight=0.3, signal=5.0,
                                       random_state=seed)[0]  # fmt: skip
            a, b = (
                WeightedBackgroundPMF(2, solver=solver, prior_loadings=family,
                                      prior_components=family, random_state=0,
                                      max_iter=300).fit(X)
                for solver in ("sequential", "simultaneous")
            )  # fmt: skip
            corr = match_components(a.components_.T, b.components_.T)[1].min()
            print(f"{family:20} {seed:4d} {a.lower_bound_:16.1f} ({a.n_iter_:3d}) "
                  f"{b.lower_bound_:16.1f} ({b.n_iter_:3d}) "
                  f"{b.lower_bound_ - a.lower_bound_:+10.1f} {corr:8.3f}")  # fmt: skip


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fixed-points", action="store_true")
    ap.add_argument("--data", nargs="+", default=["digits", "r", "sc"])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--n-iter", type=int, default=None)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    if args.fixed_points:
        fixed_points()
        return
    from sklearn_cogaps import HierarchicalPMF, WeightedBackgroundPMF

    warnings.simplefilter("ignore")
    for name in args.data:
        X, K = load(name), COMPONENTS[name]
        n = args.n_iter or N_ITER[name]
        makers = {
            solver: (lambda m, s=solver, K=K: WeightedBackgroundPMF(
                K, solver=s, max_iter=m, tol=0.0, random_state=args.seed))
            for solver in ("sequential", "simultaneous")
        }  # fmt: skip
        makers["HierarchicalPMF"] = lambda m, K=K: HierarchicalPMF(
            K, max_iter=m, tol=0.0, random_state=args.seed
        )
        times = {key: [] for key in makers}
        traces = {}
        for _ in range(args.repeat):
            for key, make in makers.items():
                one, per_iter, model = timed(make, X, n)
                times[key].append((one, per_iter))
                traces[key] = np.asarray(model.objective_history_)
        print(f"\n{name}: {X.shape[0]} x {X.shape[1]}, K = {K}, {n} iterations after the "
              f"first, medians of {args.repeat}")  # fmt: skip
        print(f"{'':16} {'start + 1 it (s)':>17} {'iteration (s)':>14} {'/ HPMF':>7}")
        hpmf = statistics.median(t[1] for t in times["HierarchicalPMF"])
        med = {}
        for key, ts in times.items():
            one = statistics.median(t[0] for t in ts)
            per = statistics.median(t[1] for t in ts)
            med[key] = (one, per)
            print(f"{key:16} {one:17.3f} {per:14.4f} {per / hpmf:7.2f}")
        seq, sim = traces["sequential"], traces["simultaneous"]
        print(f"ELBO after {n + 1} iterations: sequential {seq[-1]:.1f}, simultaneous "
              f"{sim[-1]:.1f}")  # fmt: skip
        print(
            "sequential's ELBO at iteration i: first iteration of the simultaneous solver "
            "that reaches it, and the whole fits' times (start included)"
        )
        for i in sorted({max(2, (n + 1) // 4), (n + 1) // 2, n + 1}):
            reached = np.flatnonzero(sim >= seq[i - 1])
            j = int(reached[0]) + 1 if reached.size else None
            t_seq = med["sequential"][0] + (i - 1) * med["sequential"][1]
            t_sim = (med["simultaneous"][0] + (j - 1) * med["simultaneous"][1]
                     if j else float("nan"))  # fmt: skip
            print(f"  i = {i:4d}: simultaneous at {j}, {t_seq:.2f} s against {t_sim:.2f} s")


if __name__ == "__main__":
    main()
