"""WeightedBackgroundPMF's ``transform`` of the training rows against the fit's own rows: how
many rows its search among fixed points leaves below, with and without the search topic by
topic, and with wider searches.

    python benchmarks/wbpmf_training_rows.py
    python benchmarks/wbpmf_training_rows.py --plain-sweeps
    python benchmarks/wbpmf_training_rows.py --seeds 0 1 --components 5

Counts of 3 programs, 120 x 80 (``rng.poisson(rng.gamma(0.5, 2.0, (120, 3)) @
rng.gamma(0.3, 3.0, (80, 3)).T)`` with ``numpy.random.default_rng(seed)``, as
``benchmarks/hpmf_new_rows.py --overfit``), fitted with ``WeightedBackgroundPMF(K,
random_state=0, max_iter=300)``. The reference of a row is one plain sweep of the row fit
(``_wbpmf_fast.regress_rows``, the fit's features and priors held fixed) started from the
fit's own ``q(l_i)`` (``loadings_mean_`` and ``loadings_mean_log_``): the sweep gives the
row's background and KL in the row fit's terms and does not lower the fit's row. Each
training row's bound after the row fit of ``transform`` (``_fit_rows``) is set against it.
Printed per K and in total: the rows more than 1e-6 nats below the reference, and the
largest gap, for

- ``transform`` as it is: the topics holding at most a quarter of the row's expected counts
  (``_wbpmf._SEARCH_SHARE = 0.25``, not the largest) tried switched off, one by one;
- without the topic-by-topic search (``_SEARCH_SHARE`` set to 0);
- every topic but the largest tried switched off (``_SEARCH_SHARE`` set to 1);
- every topic tried switched off, the largest too (``_SEARCH_SHARE`` set to 1 and
  ``_wbpmf._SEARCH_LARGEST`` to True).

Then the row furthest below its reference: the fit's ``loadings_`` and ``transform``'s.

``--plain-sweeps``: the row fit as it was before its sweeps were extrapolated, plain sweeps
to the estimator's ``tol``, at most its ``max_iter`` (the defaults of the private
``WeightedBackgroundPMF._sweep_rows`` replaced for the run; the reference is unchanged).
"""

import argparse
import warnings

import numpy as np
from scipy import sparse

from sklearn_cogaps import WeightedBackgroundPMF
from sklearn_cogaps._poisson import _wbpmf
from sklearn_cogaps._poisson._wbpmf_fast import regress_rows
from sklearn_cogaps._poisson._wbpmf_updates import _stabilised, _Sweeper

VARIANTS = {
    "transform (share 1/4)": _wbpmf._SEARCH_SHARE,
    "no topic-by-topic search": 0.0,
    "every topic but the largest": 1.0,
    "every topic": "every",
}


def simulate(seed, n=120, p=80, k=3):
    rng = np.random.default_rng(seed)
    return rng.poisson(rng.gamma(0.5, 2.0, (n, k)) @ rng.gamma(0.3, 3.0, (p, k)).T).astype(float)


def one_sweep_from_fit(model, X):
    """Each row's bound after one plain sweep of the row fit from the fit's own q(l_i)."""
    sweeper = _Sweeper(X, 1)
    x_rows = np.asarray(X.sum(axis=1)).ravel()
    Ef, Elogf = model._feature_moments()
    colw = model.w_ * (model.f0_ @ Ef)
    El = np.array(model.loadings_mean_, dtype=np.float64, order="C")
    Elogl = np.array(model.loadings_mean_log_, dtype=np.float64, order="C")
    kl = np.zeros_like(El)
    l0 = x_rows / (El @ colw)
    V, mv = _stabilised(Elogf)
    with np.errstate(divide="ignore"):
        logw = np.log(model.w_)
    regress_rows(sweeper.indptr, sweeper.indices, sweeper.data, V, Elogf, mv, logw, colw,
                 *model._loadings_prior_arrays(), x_rows, l0, El, Elogl, kl, 1, 0.0, 1,
                 False)  # fmt: skip
    return model._row_elbo(sweeper, x_rows, l0, El, Elogl, kl)


def use_plain_sweeps():
    """Make transform's row fit sweep as before its extrapolation: plain sweeps to the
    estimator's ``tol``, at most ``max_iter`` of them, where no other limit is given."""
    sweep_rows = WeightedBackgroundPMF._sweep_rows

    def plain(self, sweeper, x_rows, El, tol=None, max_iter=None, extrapolate=True):
        tol = self.tol if tol is None else tol
        max_iter = self.max_iter if max_iter is None else max_iter
        return sweep_rows(self, sweeper, x_rows, El, tol, max_iter, extrapolate=False)

    WeightedBackgroundPMF._sweep_rows = plain


def bounds(model, X, variant):
    """Each row's bound after transform's row fit in one of the ``VARIANTS``, and the rows'
    loadings (``transform``'s output)."""
    default = _wbpmf._SEARCH_SHARE
    try:
        _wbpmf._SEARCH_SHARE = 1.0 if variant == "every" else variant
        _wbpmf._SEARCH_LARGEST = variant == "every"
        sweeper, x_rows, l0, El, Elogl, kl = model._fit_rows(X)
    finally:
        _wbpmf._SEARCH_SHARE = default
        _wbpmf._SEARCH_LARGEST = False
    return model._row_elbo(sweeper, x_rows, l0, El, Elogl, kl), l0[:, None] * El


def below(gaps):
    gaps = np.concatenate(gaps)
    worse = gaps < -1e-6
    return f"{worse.sum()} ({gaps.min():.1f} nats)" if worse.any() else "0"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=list(range(6)))
    parser.add_argument("--components", type=int, nargs="+", default=[2, 3, 5])
    parser.add_argument("--max-iter", type=int, default=300)
    parser.add_argument("--plain-sweeps", action="store_true",
                        help="the row fit's former sweeps: plain, to the estimator's tol and "
                             "max_iter")  # fmt: skip
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    if args.plain_sweeps:
        use_plain_sweeps()
    print(f"training rows ending below one sweep from the fit's own: 120 x 80 counts of 3 "
          f"programs, seeds {args.seeds}, WeightedBackgroundPMF(K, random_state=0, "
          f"max_iter={args.max_iter}); row fit: "
          f"{'plain sweeps to tol, max_iter' if args.plain_sweeps else 'as transform'}")  # fmt: skip
    print("| K | rows | " + " | ".join(VARIANTS) + " |")
    print("|---|---|" + "---|" * len(VARIANTS))
    total = {name: [] for name in VARIANTS}
    n_total = 0
    worst = (0.0, None)
    for K in args.components:
        gaps = {name: [] for name in VARIANTS}
        for seed in args.seeds:
            X = sparse.csr_matrix(simulate(seed))
            model = WeightedBackgroundPMF(K, random_state=0, max_iter=args.max_iter).fit(X)
            reference = one_sweep_from_fit(model, X)
            for name, variant in VARIANTS.items():
                bound, W = bounds(model, X, variant)
                gap = bound - reference
                gaps[name].append(gap)
                i = int(np.argmin(gap))
                if name.startswith("transform") and gap[i] < worst[0]:
                    worst = (gap[i], (K, seed, i, model.loadings_[i], W[i]))
        for name in VARIANTS:
            total[name] += gaps[name]
        n_rows = sum(g.size for g in gaps[next(iter(VARIANTS))])
        n_total += n_rows
        print(f"| {K} | {n_rows} | " + " | ".join(below(g) for g in gaps.values()) + " |")
    print(f"| all | {n_total} | " + " | ".join(below(g) for g in total.values()) + " |")
    if worst[1] is not None:
        K, seed, i, fitted, W = worst[1]
        with np.printoptions(precision=3):
            print(f"\nfurthest below ({worst[0]:.2f} nats): K = {K}, seed {seed}, row {i}\n"
                  f"  the fit's loadings_: {fitted}\n  transform:           {W}")  # fmt: skip


if __name__ == "__main__":
    main()
