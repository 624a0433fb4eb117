"""Choosing the number of CoGAPS patterns by grid search, and how long the chains must run.

On ``make_patterns(n_samples=40, n_features=200, n_components=3, random_state=S)`` for each
``S`` of ``--data-seeds`` and each ``N`` of ``--max-iter``, this script runs
``GridSearchCV(CoGAPS(max_iter=N, random_state=0), {"n_components": [2, 3, 4, 6, 8]}, cv=...)``
with two kinds of folds: ``cv=3`` (contiguous folds, what an integer gives) and
``KFold(3, shuffle=True, random_state=0)``; it prints the mean test scores, the chosen K and
the number of ``ConvergenceWarning``s the fits raised. The samples of ``make_patterns`` are
ordered along the patterns' axis, so a contiguous fold holds out one end of that axis.
Then, on the training sets of the contiguous folds of the first data seed, it prints the
chi-square of the posterior mean (``chisq_``) of ours and, with ``--peer-python``, of the
C++ CoGAPS (its ``meanChiSq``, sequential sampler, one thread) for K = 3 and 8, two seeds
each: whether a chain of ``N`` iterations has converged is a property of CoGAPS's sampler,
which both programs run, not of the score. Run from the repository root::

    python benchmarks/cogaps_k_selection.py --peer-python /path/to/venv/bin/python

``--peer-python`` is the Python of an environment where the C++ CoGAPS's binding
``pycogaps`` is importable (``benchmarks/bench_cogaps.py`` says how to build it). The C++
CoGAPS gives the same chain for seeds 0 and 1, so both programs use seeds 1 and 2.
"""

import argparse
import json
import subprocess
import sys
import tempfile
import warnings
from pathlib import Path

import numpy as np
from sklearn.exceptions import ConvergenceWarning
from sklearn.model_selection import GridSearchCV, KFold

from sklearn_cogaps import CoGAPS
from sklearn_cogaps.datasets import make_patterns

CANDIDATES = [2, 3, 4, 6, 8]
SEEDS = (1, 2)

PEER_FIT = """
import json, sys
import numpy as np
import pycogaps
X = np.load(sys.argv[1])
K, n_iter, seed = (int(a) for a in sys.argv[2:5])
matrix = pycogaps.Matrix(np.ascontiguousarray(X.T, dtype=np.float32))  # genes x samples
params = pycogaps.GapsParameters(matrix)
params.nPatterns, params.nIterations, params.seed = K, n_iter, seed
params.maxThreads, params.asynchronousUpdates = 1, False
params.outputFrequency, params.printMessages, params.checkpointInterval = n_iter, False, 0
print(json.dumps(float(pycogaps.runCogapsFromMatrix(matrix, params, pycogaps.Matrix()).meanChiSq)))
"""


def grid_search(X, max_iter, cv, init):
    """Mean test scores, the chosen K and the number of convergence warnings."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ConvergenceWarning)
        search = GridSearchCV(
            CoGAPS(max_iter=max_iter, random_state=0, init=init),
            {"n_components": CANDIDATES},
            cv=cv,
        ).fit(X)
    n_warnings = sum(issubclass(w.category, ConvergenceWarning) for w in caught)
    return search.cv_results_["mean_test_score"], search.best_params_["n_components"], n_warnings


def peer_chisq(peer, X, K, max_iter, seed):
    with tempfile.TemporaryDirectory() as scratch:
        path = Path(scratch) / "X.npy"
        np.save(path, X)
        done = subprocess.run(
            [peer, "-c", PEER_FIT, str(path), str(K), str(max_iter), str(seed)],
            cwd=scratch,
            capture_output=True,
            text=True,
            check=False,
        )
    if done.returncode != 0:
        raise RuntimeError(f"the C++ CoGAPS failed:\n{done.stderr}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--max-iter", nargs="+", type=int, default=[300, 1000])
    parser.add_argument(
        "--init",
        choices=("nmf", "empty"),
        default="empty",
        help="the searched estimator's start (default: 'empty', as the guide's tables; the "
        "chains compared with the C++ CoGAPS always start empty, as it does)",
    )
    parser.add_argument("--peer-python", help="Python where the C++ CoGAPS's `pycogaps` imports")
    parser.add_argument(
        "--data-seeds",
        nargs="+",
        type=int,
        default=[0, 1, 2],
        help="random_state of make_patterns (default: 0 1 2)",
    )
    args = parser.parse_args(argv)
    folds = {"cv=3": 3, "shuffled": KFold(3, shuffle=True, random_state=0)}

    print(
        "GridSearchCV(CoGAPS(max_iter=N, random_state=0)) on make_patterns(40, 200, 3, "
        "random_state=S): mean test scores"
    )
    print(
        f"{'N':>5} {'S':>3} {'folds':>9}  "
        + "  ".join(f"{'K=' + str(k):>8}" for k in CANDIDATES)
        + f"  {'chosen':>6}  {'warnings':>8}"
    )
    for max_iter in args.max_iter:
        for data_seed in args.data_seeds:
            X, _, _ = make_patterns(
                n_samples=40, n_features=200, n_components=3, random_state=data_seed
            )
            for name, cv in folds.items():
                scores, best, n_warnings = grid_search(X, max_iter, cv, args.init)
                print(
                    f"{max_iter:>5} {data_seed:>3} {name:>9}  "
                    + "  ".join(f"{s:8.1f}" for s in scores)
                    + f"  {best:>6}  {n_warnings:>8}",
                    flush=True,
                )

    X, _, _ = make_patterns(
        n_samples=40, n_features=200, n_components=3, random_state=args.data_seeds[0]
    )
    print(
        f"\nchisq_ of the fit on each contiguous split's training set (S={args.data_seeds[0]}; 3 splits x "
        "seeds 1, 2): median [all]"
    )
    for max_iter in args.max_iter:
        for K in (3, 8):
            ours, theirs = [], []
            for train, _ in KFold(3).split(X):
                for seed in SEEDS:
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore", ConvergenceWarning)
                        # the C++ CoGAPS's start, so that the chains compare run for run
                        model = CoGAPS(
                            n_components=K, max_iter=max_iter, random_state=seed, init="empty"
                        )
                        ours.append(model.fit(X[train]).chisq_)
                    if args.peer_python:
                        theirs.append(peer_chisq(args.peer_python, X[train], K, max_iter, seed))
            line = f"N {max_iter:>5}  K {K}:  ours {np.median(ours):8.0f} {np.round(ours).astype(int).tolist()}"
            if theirs:
                line += f"  C++ {np.median(theirs):8.0f} {np.round(theirs).astype(int).tolist()}"
            print(line, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
