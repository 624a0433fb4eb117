"""Iterations and wall time to CoGAPS's converged answer from the empty domain and from the
NMF start (``init="nmf"``), same seeds.

    python benchmarks/cogaps_start.py [--seeds 3] [--reference-iter 5000]
    python benchmarks/cogaps_start.py --data small sparse --reference-iter 2000 \
        --reference-seeds 2 --grid 50 100 200 500 1000

For each data set, the converged answer is a chain from the empty domain with
``--reference-iter`` iterations per phase (seed 0; with ``--reference-seeds N``, the lowest
chi-square of seeds 0 to N - 1, since a long chain can stay in a worse mode). A fit reaches it when its chi-square is
within 1% of the reference's and its patterns correlate at least 0.99 with the reference's
(matched by correlation). For each start, the table gives the smallest ``max_iter`` of the
grid at which every seed reaches it, and the median wall time of those fits (start
included; 2 threads, the machine otherwise quiet), with the median chi-square and worst
correlation at every ``max_iter`` below.

Data sets: GIST (``load_gist``, K = 3, its published uncertainty); ``make_patterns(40,
200, 3)`` (smooth patterns along ordered samples); a time course of our own (24 time
points, an early transient, a late rise and a decay, 400 genes with sparse amplitudes,
Gaussian noise of 10%); sparse single-cell-like data (``make_single_cell(600, 300, 5)``,
log1p, the sparse-data model). With ``--data``, also the timing matrices of
``bench_cogaps.py`` (``shared/bench/cogaps_data.py``: ``small`` 50 x 1000, K = 3;
``medium`` 200 x 5000, K = 5; ``wide`` 500 x 5000, K = 10; ``sparse`` 1000 x 20000 with 96%
zeros, K = 5, as a CSR matrix, so the sparse-data model), default uncertainty.
"""

import argparse
import time
import warnings

import numpy as np
from scipy import sparse

from sklearn_cogaps import CoGAPS, match_components
from sklearn_cogaps.datasets import load_gist, make_patterns, make_single_cell

BUILT_IN = ("gist", "patterns", "time-course", "single-cell")
SHARED = ("small", "medium", "wide", "sparse")
SHARED_K = {"small": 3, "medium": 5, "wide": 10, "sparse": 5}

GRID = (50, 100, 200, 500, 1000, 2000)


def time_course(random_state=0):
    """24 time points (hours 0-48), three response shapes, 400 genes."""
    rng = np.random.RandomState(random_state)
    t = np.linspace(0.0, 48.0, 24)
    W = np.column_stack([
        np.exp(-0.5 * ((t - 4.0) / 3.0) ** 2),  # early transient
        1.0 / (1.0 + np.exp(-(t - 24.0) / 4.0)),  # late rise
        np.exp(-t / 12.0),  # decay
    ])  # fmt: skip
    H = rng.gamma(1.0, 2.0, (3, 400)) * (rng.uniform(size=(3, 400)) < 0.4)
    clean = W @ H
    return np.maximum(clean + 0.1 * clean * rng.normal(size=clean.shape), 0.0)


def datasets(names):
    """(title, X, fit keywords, K) of each data set named."""
    out = []
    for name in names:
        if name == "gist":
            gist = load_gist()
            out.append(("GIST", gist.data, {"uncertainty": gist.uncertainty}, 3))
        elif name == "patterns":
            X = make_patterns(40, 200, 3, random_state=0)[0]
            out.append(("make_patterns(40, 200, 3)", X, {}, 3))
        elif name == "time-course":
            out.append(("time course (24 x 400)", time_course(), {}, 3))
        elif name == "single-cell":
            X = make_single_cell(n_samples=600, n_features=300, n_components=5, random_state=0)[0]
            X = sparse.csr_matrix(np.log1p(X.toarray() if sparse.issparse(X) else X))
            out.append(("single-cell, sparse (600 x 300)", X, {}, 5))
        else:
            from _shared_data import import_bench

            import_bench()
            import cogaps_data

            X = np.ascontiguousarray(cogaps_data.make(name).T)
            if name == "sparse":
                X = sparse.csr_matrix(X)
            title = f"shared bench '{name}' ({X.shape[0]} x {X.shape[1]})"
            out.append((title, X, {}, SHARED_K[name]))
    return out


def fit(X, kwargs, K, max_iter, seed, init):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        started = time.perf_counter()
        model = CoGAPS(K, max_iter=max_iter, random_state=seed, init=init).fit(X, **kwargs)
        return model, time.perf_counter() - started


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--reference-iter", type=int, default=5000)
    parser.add_argument("--reference-seeds", type=int, default=1)
    parser.add_argument("--data", nargs="+", choices=BUILT_IN + SHARED, default=BUILT_IN)
    parser.add_argument("--grid", nargs="+", type=int, default=GRID)
    args = parser.parse_args()
    for name, X, kwargs, K in datasets(args.data):
        # a long chain can stay in a worse mode (two flat patterns on 'sparse'): the
        # reference is the lowest chi-square of --reference-seeds chains
        chains = [fit(X, kwargs, K, args.reference_iter, s, "empty")[0]
                  for s in range(args.reference_seeds)]  # fmt: skip
        reference = min(chains, key=lambda m: m.chisq_)
        print(f"\n{name}: reference {args.reference_iter} + {args.reference_iter} iterations "
              f"from the empty domain, chi-square {reference.chisq_:.6g} (of "
              f"{', '.join(f'{m.chisq_:.6g}' for m in chains)})")  # fmt: skip
        print(f"{'start':<8} {'max_iter':>8} {'chi-square (median)':>20} {'worst corr':>11} "
              f"{'all reached':>12} {'wall s':>8}")  # fmt: skip
        for init in ("empty", "nmf"):
            reached = None
            for max_iter in args.grid:
                rows = [fit(X, kwargs, K, max_iter, seed, init) for seed in range(args.seeds)]
                chisq = [m.chisq_ for m, _ in rows]
                corr = [
                    match_components(reference.loadings_, m.loadings_)[1].min() for m, _ in rows
                ]
                ok = all(abs(c - reference.chisq_) <= 0.01 * reference.chisq_ and r >= 0.99
                         for c, r in zip(chisq, corr))  # fmt: skip
                wall = float(np.median([t for _, t in rows]))
                print(f"{init:<8} {max_iter:>8} {np.median(chisq):>20.6g} {min(corr):>11.3f} "
                      f"{'yes' if ok else 'no':>12} {wall:>8.2f}")  # fmt: skip
                if ok and reached is None:
                    reached = (max_iter, wall)
            verdict = "not within the grid" if reached is None else (
                f"at max_iter={reached[0]} ({reached[1]:.2f} s)")  # fmt: skip
            print(f"  {init}: the converged answer {verdict}")


if __name__ == "__main__":
    main()
