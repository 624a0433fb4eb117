"""HierarchicalPMF's stochastic variational inference (partial_fit) against its batch fit and
hpfrec's stochastic fit, on make_sc.

    python benchmarks/hpmf_svi.py [--epochs 4] [--batch 1000] [--backed]

A fifth of every count is held out by binomial thinning (``X_val = Binomial(X, 0.2)``, the
fits see ``X - X_val``), and every model is scored by the Poisson log-likelihood per entry of
the held-out counts of the first 4,000 rows under ``W @ H`` (for our models, W of those rows
by ``transform`` of their training counts, the same for the batch and the stochastic fits;
for hpfrec, its fitted ``Theta``). Wall seconds on 2 threads, start included, the scoring
excluded; everything runs in this process, the methods one after the other, once:

- HierarchicalPMF, batch VBEM: fits of 10, 30 and 100 iterations;
- HierarchicalPMF, ``partial_fit`` on batches of ``--batch`` rows, ``total_samples`` the
  rows, a new random order every epoch: the score after each epoch;
- hpfrec, ``users_per_batch=--batch`` (stochastic, users' batches only) and full batch, the
  same numbers of epochs / iterations.

With ``--backed`` the training counts are also written to an ``.h5ad`` in a temporary
folder and read back backed: a batch fit of 3 iterations from the file (read by blocks)
against one epoch of ``partial_fit`` on row slices of the file, to show what a pass over
the file costs each way. Needs anndata.
"""

import argparse
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np
from bench_hpmf import _triplets, load
from scipy import sparse

N_SCORED = 4000


def heldout_split(X, seed=0):
    rng = np.random.default_rng(seed)
    X = sparse.csr_matrix(X)
    val = X.copy()
    val.data = rng.binomial(X.data.astype(np.int64), 0.2).astype(np.float64)
    train = X - val
    train.eliminate_zeros()
    val.eliminate_zeros()
    return sparse.csr_matrix(train), sparse.csr_matrix(val)


def loglik_per_entry(W, H, val):
    """Poisson log-likelihood per row of ``val`` (rows x features) under ``W @ H``."""
    from scipy.special import gammaln

    M = np.asarray(W, dtype=np.float64) @ np.asarray(H, dtype=np.float64)
    V = val.toarray()
    with np.errstate(divide="ignore"):
        ll = np.where(V > 0, V * np.log(M), 0.0) - M - gammaln(V + 1.0)
    return float(ll.sum() / V.shape[0])


def ours_score(est, train, val):
    W = est.transform(train[:N_SCORED])
    return loglik_per_entry(W, est.components_, val[:N_SCORED])


def row(name, seconds, score):
    print(f"{name:<46} {seconds:9.2f} {score:14.3f}", flush=True)


def run_batch(train, val, K, iterations):
    from sklearn_cogaps import HierarchicalPMF

    for it in iterations:
        t0 = time.perf_counter()
        est = HierarchicalPMF(K, max_iter=it, tol=0, random_state=0).fit(train)
        row(f"HierarchicalPMF batch, {it} iterations", time.perf_counter() - t0,
            ours_score(est, train, val))  # fmt: skip


def run_svi(train, val, K, epochs, batch):
    from sklearn_cogaps import HierarchicalPMF

    n = train.shape[0]
    est = HierarchicalPMF(K, random_state=0, total_samples=n)
    elapsed = 0.0
    for e in range(epochs):
        order = np.random.default_rng(e).permutation(n)
        t0 = time.perf_counter()
        for a in range(0, n, batch):
            est.partial_fit(train[np.sort(order[a : a + batch])])
        elapsed += time.perf_counter() - t0
        row(f"HierarchicalPMF partial_fit, epoch {e + 1}", elapsed, ours_score(est, train, val))


def run_hpfrec(train, val, K, epochs, batch):
    from hpfrec import HPF

    df = _triplets(train, ("UserId", "ItemId", "Count"))
    for label, kw in (("stochastic", dict(users_per_batch=batch)), ("batch", {})):
        for it in sorted({1, epochs} if label == "stochastic" else {10, 30}):
            t0 = time.perf_counter()
            est = HPF(k=K, ncores=2, maxiter=it, stop_crit="maxiter", check_every=min(10, it),
                      reindex=False, verbose=False, random_seed=0, **kw)  # fmt: skip
            est.fit(df)
            seconds = time.perf_counter() - t0
            score = loglik_per_entry(est.Theta[:N_SCORED], np.asarray(est.Beta).T,
                                     val[:N_SCORED])  # fmt: skip
            row(f"hpfrec {label}, {it} {'epochs' if kw else 'iterations'}", seconds, score)


def run_backed(train, K, batch):
    import anndata as ad

    from sklearn_cogaps import HierarchicalPMF

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "train.h5ad"
        ad.AnnData(train).write_h5ad(path)
        backed = ad.read_h5ad(path, backed="r")
        n = train.shape[0]
        t0 = time.perf_counter()
        HierarchicalPMF(K, max_iter=3, tol=0, random_state=0).fit(backed)
        print(f"{'backed file: batch fit, 3 iterations':<46} {time.perf_counter() - t0:9.2f}")
        est = HierarchicalPMF(K, random_state=0, total_samples=n)
        t0 = time.perf_counter()
        for a in range(0, n, batch):
            est.partial_fit(backed[a : a + batch].X)
        print(f"{'backed file: partial_fit, one epoch':<46} {time.perf_counter() - t0:9.2f}")
        backed.file.close()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--batch", type=int, default=1000)
    parser.add_argument("--backed", action="store_true")
    args = parser.parse_args()
    X, K = load("sc")
    train, val = heldout_split(X)
    print(f"make_sc {X.shape}, {train.nnz} training counts, K = {K}; held-out score of the "
          f"first {N_SCORED} rows (log-likelihood per row)")  # fmt: skip
    print(f"{'method':<46} {'seconds':>9} {'held-out':>14}")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        run_batch(train, val, K, (10, 30, 100))
        run_svi(train, val, K, args.epochs, args.batch)
        try:
            run_hpfrec(train, val, K, args.epochs, args.batch)
        except ImportError:
            print("hpfrec is not installed: pip install hpfrec", file=sys.stderr)
        if args.backed:
            run_backed(train, K, args.batch)


if __name__ == "__main__":
    main()
