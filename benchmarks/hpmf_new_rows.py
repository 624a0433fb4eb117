"""HierarchicalPMF's regression of new rows: its search among fixed points against its start
alone, on the training rows of simulated fits, each row's bound set against the fit's own.

    python benchmarks/hpmf_new_rows.py
    python benchmarks/hpmf_new_rows.py --overfit

For each simulation (cells x genes counts from Gamma(0.3) loadings and factors, K = 5) the
fit's rows are iterated to their fixed point with q(F) fixed (the reference), and the
training rows are regressed from transform's start twice: without the search
(``search_share=0``) and with it (transform's default). Printed: the rows that end below the
reference (and by how much at worst), the rows the search raises, the median time of
three runs of each on one thread, and whether two threads give the same bits.

``--overfit``: more components than the data have. Counts of 3 programs, 120 x 80
(``rng.poisson(rng.gamma(0.5, 2.0, (120, 3)) @ rng.gamma(0.3, 3.0, (80, 3)).T)`` with
``numpy.random.default_rng(seed)``, seeds 0 to 11, as the held-out tests of
``tests/poisson/test_counts.py`` with 120 rows), fitted with ``HierarchicalPMF(K,
random_state=0)`` for K = 2, 4, 6 and 8. Each training row's bound after ``transform`` is
set against the bound of the fit's own row (``loadings_shape_``, ``loadings_rate_``, not
iterated further). Printed per K: the rows of the 12 fits that end more than 1e-6 nats below
the fit's row, and the largest gap, for ``transform`` (search share a tenth), for the start
alone (share 0) and for a search that tries components of up to a quarter of the row
switched off (share 0.25, the compiled regression called with that share from
``transform``'s start, as the first table's columns are).
"""

import argparse
import time
import warnings

import numpy as np
from scipy import sparse
from scipy.special import digamma, gammaln, logsumexp

from sklearn_cogaps import HierarchicalPMF
from sklearn_cogaps._poisson import _hpmf_fast
from sklearn_cogaps._poisson._hpmf_updates import _TRANSFORM_SEARCH_SHARE

K = 5


def simulate(seed, n, p):
    rng = np.random.default_rng(seed)
    L = rng.gamma(0.3, 1 / 0.3 * 2, (n, K))
    F = rng.gamma(0.3, 1 / 0.3, (p, K)) * rng.gamma(2, 0.5, (p, 1))
    return rng.poisson(L @ F.T * 0.5).astype(np.float64)


def row_bounds(est, X, shape, rate):
    """Each row's ELBO (without -sum ln x!) at q(l_i) = Gamma(shape_i, rate)."""
    a, b = est.prior_loadings_shape_, est.prior_loadings_rate_
    rate = np.broadcast_to(rate, shape.shape)
    elog = digamma(shape) - np.log(rate)
    lt = logsumexp(elog[:, :, None] + est.components_log_[None], axis=1)
    kl = ((shape - a) * digamma(shape) - gammaln(shape) + gammaln(a)
          + a * (np.log(rate) - np.log(b)) + shape * (b - rate) / rate)  # fmt: skip
    return (X * lt).sum(1) - (shape / rate) @ est.components_.sum(1) - kl.sum(1)


def regress(est, X, start, share, threads):
    counts = sparse.csr_matrix(X)
    rate = est.prior_loadings_rate_ + est.components_.sum(1)
    shape = np.array(start, dtype=np.float64, order="C")  # a copy: the kernel writes it
    n = X.shape[0]
    t = time.perf_counter()
    _hpmf_fast.transform_rows(counts.indptr, counts.indices, counts.data,
                              np.ascontiguousarray(est.components_log_.T),
                              est.prior_loadings_shape_, est.prior_loadings_rate_, rate,
                              shape, np.empty(n), np.empty(n, dtype=np.intc), 5000, 1e-10,
                              share, threads)  # fmt: skip
    return shape, row_bounds(est, X, shape, rate), time.perf_counter() - t


def below(bounds, reference):
    """The rows below the reference bounds, and the largest gap."""
    gap = bounds - reference
    worse = gap < -1e-6
    return f"{worse.sum()} ({gap.min():.2f} nats)" if worse.any() else "0"


def simulate_programs(seed, n=120, p=80, k=3):
    """Counts of ``k`` programs, n x p (the --overfit simulation)."""
    rng = np.random.default_rng(seed)
    return rng.poisson(rng.gamma(0.5, 2.0, (n, k)) @ rng.gamma(0.3, 3.0, (p, k)).T).astype(float)


def overfit(seeds=range(12), components=(2, 4, 6, 8)):
    """Rows whose transform ends below the fit's own row, with K above the data's 3."""
    shares = {"transform (1/10)": None, "start alone (0)": 0.0, "search share 1/4": 0.25}
    print(f"training rows ending below the fit's own: 120 x 80 counts of 3 programs, "
          f"{len(seeds)} seeds, HierarchicalPMF(K, random_state=0)")  # fmt: skip
    print("| K | rows | " + " | ".join(shares) + " |")
    print("|---|---|" + "---|" * len(shares))
    for K in components:
        gaps = {name: [] for name in shares}
        for seed in seeds:
            X = simulate_programs(seed)
            est = HierarchicalPMF(K, random_state=0).fit(X)
            rate = est.prior_loadings_rate_ + est.components_.sum(1)
            own = row_bounds(est, X, est.loadings_shape_, est.loadings_rate_)
            start = est.prior_loadings_shape_ + X.sum(1)[:, None] / K
            for name, share in shares.items():
                if share is None:
                    shape = est.transform(X) * rate
                    # transform is the compiled regression with its default share
                    check, _, _ = regress(est, X, start, _TRANSFORM_SEARCH_SHARE, 1)
                    np.testing.assert_allclose(check, shape, rtol=1e-12)
                else:
                    shape, _, _ = regress(est, X, start, share, 1)
                gaps[name].append(row_bounds(est, X, shape, rate) - own)
        n_rows = sum(len(g) for g in gaps[next(iter(shares))])
        cells = [below(np.concatenate(g), 0.0) for g in gaps.values()]
        print(f"| {K} | {n_rows} | " + " | ".join(cells) + " |")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--overfit", action="store_true",
                        help="3 programs fitted with K = 2 to 8: transform of the training rows "
                             "against the fit's own rows")  # fmt: skip
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    if args.overfit:
        overfit()
        return
    print(
        "| n x p | seed | below the fit: start alone | below the fit: search | raised by "
        "the search | 1-thread time: alone, search (ratio) | 2 threads identical |"
    )
    print("|---|---|---|---|---|---|---|")
    for n, p in ((300, 1000), (200, 400), (150, 300)):
        for seed in range(4):
            X = simulate(seed, n, p)
            est = HierarchicalPMF(K, random_state=0).fit(X)
            rate = est.prior_loadings_rate_ + est.components_.sum(1)
            _, ref, _ = regress(est, X, est.loadings_shape_ * rate / est.loadings_rate_, 0.0, 2)
            start = est.prior_loadings_shape_ + X.sum(1)[:, None] / K
            times = {}
            for share in (0.0, _TRANSFORM_SEARCH_SHARE):
                times[share] = np.median([regress(est, X, start, share, 1)[2] for _ in range(3)])
            _, alone, _ = regress(est, X, start, 0.0, 1)
            s1, searched, _ = regress(est, X, start, _TRANSFORM_SEARCH_SHARE, 1)
            s2, _, _ = regress(est, X, start, _TRANSFORM_SEARCH_SHARE, 2)
            t0, t1 = times[0.0], times[_TRANSFORM_SEARCH_SHARE]

            print(f"| {n} x {p} | {seed} | {below(alone, ref)} | {below(searched, ref)} | "
                  f"{(searched > alone + 1e-6).sum()} | {t0:.3f} s, {t1:.3f} s ({t1 / t0:.2f}x) | "
                  f"{np.array_equal(s1, s2)} |")  # fmt: skip


if __name__ == "__main__":
    main()
