"""ExtremeDeconvolution against scikit-learn's GaussianMixture on 64-dimensional data.

    python benchmarks/xd_high_dim.py [--repeats 5]

``load_digits`` (1797 points, d = 64), K = 10, full covariances, ``random_state`` 0 to
``repeats - 1``, the two estimators alternating in one process (whole fits: the start
included). Without noise XD is GaussianMixture's model; its E-step then factors each
component once (every point shares T_j = V_j) and, since W_j^T W_j is shared too, computes
it once per component. A third column fits the same points with a diagonal noise of
variance 0.5 on every pixel (``X_cov``): a Cholesky factor per point and component.
Printed: the median time of each, their ratio, and the median iterations.
"""

import argparse
import time
import warnings

import numpy as np
from sklearn.datasets import load_digits
from sklearn.exceptions import ConvergenceWarning
from sklearn.mixture import GaussianMixture

from sklearn_cogaps import ExtremeDeconvolution


def timed(est, fit):
    """Seconds of a whole fit, and its iterations."""
    started = time.perf_counter()
    est = fit(est)
    return time.perf_counter() - started, est.n_iter_


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    warnings.simplefilter("ignore", ConvergenceWarning)
    X = load_digits().data
    noise = np.full_like(X, 0.5)

    def plain(est):
        return est.fit(X)

    def noisy(est):
        return est.fit(X, X_cov=noise)

    rows = {"GaussianMixture": [], "XD, no noise": [], "XD, noise 0.5": []}
    for seed in range(args.repeats):
        rows["GaussianMixture"].append(timed(GaussianMixture(10, random_state=seed), plain))
        rows["XD, no noise"].append(timed(ExtremeDeconvolution(10, random_state=seed), plain))
        rows["XD, noise 0.5"].append(timed(ExtremeDeconvolution(10, random_state=seed), noisy))
    reference = np.median([t for t, _ in rows["GaussianMixture"]])
    print(f"load_digits {X.shape[0]} x {X.shape[1]}, K = 10, {args.repeats} seeds (medians)")
    print(f"{'fit':<18} {'time':>8} {'/ GMM':>7} {'iterations':>11}")
    for name, runs in rows.items():
        t = np.median([t for t, _ in runs])
        it = np.median([i for _, i in runs])
        print(f"{name:<18} {t:7.2f}s {t / reference:7.2f} {it:11.0f}")


if __name__ == "__main__":
    main()
