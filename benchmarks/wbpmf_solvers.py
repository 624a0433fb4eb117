"""WeightedBackgroundPMF: the sequential topic updates of Algorithm 3.1 against the
simultaneous ones (with its screened iterations, and with every iteration over the whole
grid of the mixture prior: "whole grid"), with HierarchicalPMF's iteration beside them.

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

``--solve-parts``: the time of each part of the EBPM solves of one iteration on make_sc
(one thread). ``--screening``: the simultaneous solver's ELBO after 1,000 and 3,000
iterations (``tol=0``) on the digits and the R fixture, with every iteration over the
whole grid, with the default screened iterations and with a full iteration every fifth.

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


def solve_parts(n_iter=11):
    """The parts of the EBPM solves of make_sc's iteration ``n_iter`` (K = 10), on one
    thread: the grid's likelihoods, their scaling, mix-SQP and the posteriors."""
    from threadpoolctl import threadpool_limits

    from sklearn_cogaps import WeightedBackgroundPMF
    from sklearn_cogaps._poisson import _ebpm, _wbpmf

    X, calls = load("sc"), []
    fit_mixture = _ebpm._fit_mixture

    def recording(y, s, shape, rate, w_init, tol):
        # the weights' row is a view of the prior, which the solution overwrites after
        calls.append((y.copy(), s.copy(), shape.copy(), rate.copy(),
                      None if w_init is None else np.array(w_init), tol))  # fmt: skip
        return fit_mixture(y, s, shape, rate, w_init, tol)

    _ebpm._fit_mixture, _wbpmf._SCREENED_RUN = recording, None  # every solve on the grid
    WeightedBackgroundPMF(10, solver="simultaneous", max_iter=n_iter, tol=0.0,
                          random_state=0).fit(X)  # fmt: skip
    _ebpm._fit_mixture = fit_mixture
    parts = dict.fromkeys(("likelihoods", "scaling", "mix-SQP", "posteriors"), 0.0)
    with threadpool_limits(1):
        for y, s, shape, rate, w_init, tol in calls[-20:]:  # the last iteration's 2K
            t0 = time.perf_counter()
            ll = _ebpm._component_loglik(y, s, shape, rate)
            t1 = time.perf_counter()
            L = np.exp(ll - ll.max(axis=1, keepdims=True))
            t2 = time.perf_counter()
            w, _ = _ebpm.mixsqp(L, x0=w_init, tol=tol)
            t3 = time.perf_counter()
            _ebpm._result(y, s, 0.0, w, shape, rate.copy(), ll)
            t4 = time.perf_counter()
            for key, dt in zip(parts, (t1 - t0, t2 - t1, t3 - t2, t4 - t3)):
                parts[key] += dt
    print(f"make_sc, K = 10: the 20 EBPM solves of iteration {n_iter} over the whole grid, "
          "one thread")  # fmt: skip
    for key, value in parts.items():
        print(f"  {key:12} {value:.3f} s")
    print(f"  {'total':12} {sum(parts.values()):.3f} s")


def screening(names, n_iter=3000, marks=(1000, 3000)):
    """The simultaneous solver's ELBO after long runs (tol=0): every iteration over
    the whole grid, a full one every tenth (the default) and every fifth. No times."""
    from sklearn_cogaps import WeightedBackgroundPMF
    from sklearn_cogaps._poisson import _wbpmf

    default = _wbpmf._SCREENED_RUN
    for name in names:
        X, K = load(name), COMPONENTS[name]
        for run, label in ((None, "whole grid"), (default, "default"), (4, "every fifth")):
            _wbpmf._SCREENED_RUN = run
            model = WeightedBackgroundPMF(K, solver="simultaneous", max_iter=n_iter,
                                          tol=0.0, random_state=0).fit(X)  # fmt: skip
            trace = model.objective_history_
            at = ", ".join(f"{trace[i - 1]:.1f} at {i}" for i in marks if i <= trace.size)
            print(f"{name:7} {label:12} {at} ({model.n_iter_} iterations)")
        _wbpmf._SCREENED_RUN = default


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fixed-points", action="store_true")
    ap.add_argument("--solve-parts", action="store_true")
    ap.add_argument("--screening", action="store_true")
    ap.add_argument("--data", nargs="+", default=["digits", "r", "sc"])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--n-iter", type=int, default=None)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    if args.fixed_points:
        fixed_points()
        return
    if args.solve_parts:
        solve_parts()
        return
    if args.screening:
        warnings.simplefilter("ignore")
        screening([name for name in args.data if name != "sc"])
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
        makers["whole grid"] = lambda m, K=K: _WholeGrid(
            WeightedBackgroundPMF(
                K, solver="simultaneous", max_iter=m, tol=0.0, random_state=args.seed
            )
        )
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
        print(f"ELBO after {n + 1} iterations: " + ", ".join(
            f"{key} {traces[key][-1]:.1f}" for key in ("sequential", "simultaneous",
                                                       "whole grid")))  # fmt: skip
        for reference in ("sequential", "whole grid"):
            _reached(reference, traces, med, n)


class _WholeGrid:
    """solver="simultaneous" with every iteration over the whole grid of the mixture priors
    (no screened iterations)."""

    def __init__(self, model):
        self.model = model

    def fit(self, X):
        from sklearn_cogaps._poisson import _wbpmf

        saved, _wbpmf._SCREENED_RUN = _wbpmf._SCREENED_RUN, None
        try:
            return self.model.fit(X)
        finally:
            _wbpmf._SCREENED_RUN = saved


def _reached(reference, traces, med, n):
    """Where the simultaneous solver first reaches the reference's ELBO at a few of its
    iterations, and both whole fits' times there (start included)."""
    ref, sim = traces[reference], traces["simultaneous"]
    print(f"{reference}'s ELBO at iteration i: first iteration of the simultaneous solver "
          "that reaches it, and the whole fits' times (start included)")  # fmt: skip
    for i in sorted({max(2, (n + 1) // 4), (n + 1) // 2, n + 1}):
        reached = np.flatnonzero(sim >= ref[i - 1])
        j = int(reached[0]) + 1 if reached.size else None
        t_ref = med[reference][0] + (i - 1) * med[reference][1]
        t_sim = (med["simultaneous"][0] + (j - 1) * med["simultaneous"][1]
                 if j else float("nan"))  # fmt: skip
        print(f"  i = {i:4d}: simultaneous at {j}, {t_ref:.2f} s against {t_sim:.2f} s")


if __name__ == "__main__":
    main()
