"""WeightedBackgroundPMF against HierarchicalPMF on ``load_digits``: whole fits and transforms.

    python benchmarks/poisson_digits.py [--repeats 5]

The first 1257 digits are fitted (K = 10, the defaults otherwise, ``random_state`` 0 to
``repeats - 1``) and the other 540 transformed; the two estimators alternate in one process.
Printed: median seconds of each step and WeightedBackgroundPMF's ratio to HierarchicalPMF.
"""

import argparse
import time
import warnings

import numpy as np
from sklearn.datasets import load_digits
from sklearn.exceptions import ConvergenceWarning

from sklearn_cogaps import HierarchicalPMF, WeightedBackgroundPMF


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    warnings.simplefilter("ignore", ConvergenceWarning)
    X = load_digits().data
    train, new = X[:1257], X[1257:]
    times = {name: {"fit": [], "transform": []} for name in ("hpmf", "wbpmf")}
    for seed in range(args.repeats):
        for name, Estimator in (("hpmf", HierarchicalPMF), ("wbpmf", WeightedBackgroundPMF)):
            started = time.perf_counter()
            est = Estimator(10, random_state=seed).fit(train)
            times[name]["fit"].append(time.perf_counter() - started)
            started = time.perf_counter()
            est.transform(new)
            times[name]["transform"].append(time.perf_counter() - started)
    print(f"load_digits: fit 1257 x 64, transform 540, K = 10, {args.repeats} seeds (medians)")
    print(f"{'step':<10} {'HierarchicalPMF':>16} {'WeightedBackgroundPMF':>22} {'ratio':>6}")
    for step in ("fit", "transform"):
        h = np.median(times["hpmf"][step])
        w = np.median(times["wbpmf"][step])
        print(f"{step:<10} {h:15.2f}s {w:21.2f}s {w / h:6.2f}")


if __name__ == "__main__":
    main()
