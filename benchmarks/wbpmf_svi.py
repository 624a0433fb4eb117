"""WeightedBackgroundPMF's stochastic variational inference (partial_fit) against its batch
fit, on make_sc.

    python benchmarks/wbpmf_svi.py [--epochs 3] [--batch 2000] [--iterations 10 30]

A fifth of every count is held out by binomial thinning (as ``benchmarks/hpmf_svi.py``
does), and every model is scored by the Poisson log-likelihood per row of the held-out
counts of the first 4,000 rows under ``W @ components_``, W of those rows by ``transform``
of their training counts. Wall seconds on 2 threads, start included, the scoring excluded;
the methods run one after the other in this process, once:

- the batch fit (Algorithm 3.1) of each ``--iterations``;
- ``partial_fit`` on batches of ``--batch`` rows, ``total_samples`` the rows, a new random
  order every epoch: the score after each epoch.

R's ebpmf has no stochastic fit: the comparison is with the batch fit.
"""

import argparse
import time
import warnings

import numpy as np
from bench_hpmf import load
from hpmf_svi import N_SCORED, heldout_split, loglik_per_entry


def _score(model, train, val):
    W = model.transform(train[:N_SCORED])
    return loglik_per_entry(W, model.components_, val[:N_SCORED])


def main(argv=None):
    from sklearn.exceptions import ConvergenceWarning

    from sklearn_cogaps import WeightedBackgroundPMF

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch", type=int, default=2000)
    parser.add_argument(
        "--solver",
        default="sequential",
        choices=["sequential", "simultaneous"],
        help="the batch fit's solver (the guide's figures: sequential)",
    )
    parser.add_argument("--iterations", type=int, nargs="+", default=[10, 30])
    args = parser.parse_args(argv)
    X, K = load("sc")
    train, val = heldout_split(X)
    n = train.shape[0]
    print(f"make_sc: {n} x {train.shape[1]}, {train.nnz:,} training counts, K = {K}")
    print(f"{'method':<44} {'seconds':>8} {'held-out loglik per row':>24}")
    warnings.simplefilter("ignore", ConvergenceWarning)
    for n_iter in args.iterations:
        start = time.perf_counter()
        model = WeightedBackgroundPMF(K, solver=args.solver, max_iter=n_iter, tol=0.0,
                                      random_state=0).fit(train)  # fmt: skip
        seconds = time.perf_counter() - start
        print(f"{f'batch fit, {n_iter} iterations':<44} {seconds:8.1f} "
              f"{_score(model, train, val):24.4f}", flush=True)  # fmt: skip
    model = WeightedBackgroundPMF(K, random_state=0, total_samples=n)
    rng = np.random.default_rng(0)
    seconds = 0.0
    for epoch in range(1, args.epochs + 1):
        order = rng.permutation(n)
        start = time.perf_counter()
        for a in range(0, n, args.batch):
            model.partial_fit(train[np.sort(order[a : a + args.batch])])
        seconds += time.perf_counter() - start
        label = f"partial_fit, batches of {args.batch}, epoch {epoch}"
        print(f"{label:<44} {seconds:8.1f} {_score(model, train, val):24.4f}", flush=True)


if __name__ == "__main__":
    main()
