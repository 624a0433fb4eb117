"""Time of the Poisson models' start and iteration on ``make_sc`` (20000 x 5000, K = 10).

For HierarchicalPMF and WeightedBackgroundPMF: a whole fit with ``max_iter=1`` (the start,
one iteration and the fit's end), and the time of one iteration, from warm fits of 3 and 13
iterations (their difference over 10: what a fit's length adds, without its fixed costs).
Every repeat is a fresh process; with ``--other-python`` the processes alternate between this
environment and another one (for example a build of an earlier commit), so that both see the
same load, and the table compares their medians.

    python benchmarks/poisson_iteration.py --repeats 3
    python benchmarks/poisson_iteration.py --repeats 3 --other-python /path/to/venv/bin/python

The machine must be quiet for the figures to mean anything.
"""

import argparse
import json
import statistics
import subprocess
import sys
import time
import warnings
from pathlib import Path

from _shared_data import import_bench

FIGURES = ["wbpmf_fit1", "wbpmf_iter", "hpmf_fit1", "hpmf_iter"]


def measure():
    import_bench()
    from counts_data import make_sc
    from sklearn.exceptions import ConvergenceWarning

    from sklearn_cogaps import HierarchicalPMF, WeightedBackgroundPMF

    warnings.simplefilter("ignore", ConvergenceWarning)
    X = make_sc()[0].tocsr()
    out = {}
    for name, cls in [("wbpmf", WeightedBackgroundPMF), ("hpmf", HierarchicalPMF)]:
        t0 = time.perf_counter()
        cls(10, max_iter=1, random_state=0, tol=0.0).fit(X)
        out[name + "_fit1"] = time.perf_counter() - t0
        times = {}
        for n_iter in (3, 13):
            model = cls(10, max_iter=1, random_state=0, warm_start=True, tol=0.0).fit(X)
            model.set_params(max_iter=n_iter)
            t0 = time.perf_counter()
            model.fit(X)
            times[n_iter] = time.perf_counter() - t0
        out[name + "_iter"] = (times[13] - times[3]) / 10
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--other-python", help="Python of a second environment, run alternately")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        print(json.dumps(measure()))
        return
    pythons = {"this": sys.executable}
    if args.other_python:
        pythons["other"] = args.other_python
    runs = {name: [] for name in pythons}
    for _ in range(args.repeats):
        for name, python in pythons.items():
            cmd = [python, str(Path(__file__).resolve()), "--worker"]
            res = subprocess.run(cmd, capture_output=True, text=True, check=True)
            runs[name].append(json.loads(res.stdout.strip().splitlines()[-1]))
    print(f"make_sc 20000 x 5000, K = 10; seconds, medians of {args.repeats} fresh processes")
    print(f"{'':8s}" + "".join(f"{f:>12s}" for f in FIGURES))
    medians = {}
    for name, results in runs.items():
        medians[name] = {f: statistics.median(r[f] for r in results) for f in FIGURES}
        print(f"{name:8s}" + "".join(f"{medians[name][f]:12.3f}" for f in FIGURES))
    if "other" in medians:
        ratio = "".join(f"{medians['this'][f] / medians['other'][f]:12.2f}" for f in FIGURES)
        print(f"{'ratio':8s}{ratio}   (this / other)")
    for name in medians:
        wb, hp = medians[name]["wbpmf_iter"], medians[name]["hpmf_iter"]
        print(f"{name}: WeightedBackgroundPMF's iteration is {wb / hp:.2f} x HierarchicalPMF's")


if __name__ == "__main__":
    main()
