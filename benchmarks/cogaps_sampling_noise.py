"""Where the chi-square of CoGAPS's posterior mean after a short sampling phase comes from.

The chi-square of the posterior mean (``chisq_``) falls with the number of sampling
iterations even from a chain that has long converged: the mean of a few hundred states of
a slowly mixing chain keeps Monte Carlo noise, and noise in the means raises the chi-square
of their product. This script says which matrix carries it. On GIST (``load_gist``, K = 3,
its published uncertainty) it runs one chain of ``--iter`` + ``--iter`` iterations
(default init, seed ``--seed``) that keeps every sampling state, and for windows
of ``--windows`` consecutive states prints the medians over the windows of

- chi2(W_w, H_w): both means from the window, what a fit of that many sampling iterations
  reports;
- chi2(W_all, H_w): the patterns' mean from every state, the amplitudes' from the window;
- chi2(W_w, H_all): the reverse;

then the same fit with the patterns held at the published ones (``fit(X,
fixed_patterns=...)``, ``--windows[0]`` iterations per phase), and the bulk effective sample
size (median over the entries) of each matrix in its first ``--windows[0]`` states.
Run from the repository root::

    python benchmarks/cogaps_sampling_noise.py [--seed 0] [--iter 4000] [--windows 500 1000 2000]

No timing: the figures do not depend on the machine.
"""

import argparse
import warnings

import numpy as np

from sklearn_cogaps import CoGAPS
from sklearn_cogaps._utils._diagnostics import ess_bulk
from sklearn_cogaps.datasets import load_gist


def chi_square(X, S, W, H):
    return float(np.sum(((X - W @ H) / S) ** 2))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--iter", type=int, default=4000)
    parser.add_argument("--windows", type=int, nargs="+", default=[500, 1000, 2000])
    args = parser.parse_args()
    gist = load_gist()
    X, S = gist.data, gist.uncertainty
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = CoGAPS(3, max_iter=args.iter, random_state=args.seed, n_snapshots=args.iter)
        model.fit(X, uncertainty=S)
    W_all = np.asarray(model.loadings_snapshots_)
    H_all = np.asarray(model.components_snapshots_)
    W_mean, H_mean = W_all.mean(axis=0), H_all.mean(axis=0)
    print(
        f"GIST, K = 3, seed {args.seed}: {args.iter} + {args.iter} iterations, "
        f"chi-square of the mean of every state {chi_square(X, S, W_mean, H_mean):.1f}"
    )
    print(f"{'window':>7} {'chi2(W_w, H_w)':>15} {'chi2(W_all, H_w)':>17} {'chi2(W_w, H_all)':>17}")
    for w in args.windows:
        rows = []
        for start in range(0, W_all.shape[0] - w + 1, w):
            W_w = W_all[start : start + w].mean(axis=0)
            H_w = H_all[start : start + w].mean(axis=0)
            rows.append(
                (
                    chi_square(X, S, W_w, H_w),
                    chi_square(X, S, W_mean, H_w),
                    chi_square(X, S, W_w, H_mean),
                )
            )
        a, b, c = np.median(np.array(rows), axis=0)
        print(f"{w:>7} {a:>15.1f} {b:>17.1f} {c:>17.1f}   ({len(rows)} windows)")
    first = args.windows[0]
    ess_w = np.nanmedian(ess_bulk(W_all[None, :first]))
    ess_h = np.nanmedian(ess_bulk(H_all[None, :first]))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fixed = CoGAPS(3, max_iter=first, random_state=args.seed, n_snapshots=first)
        fixed.fit(X, uncertainty=S, fixed_patterns=gist.published_patterns)
    ess_fixed = np.nanmedian(ess_bulk(np.asarray(fixed.components_snapshots_)[None]))
    print(
        f"bulk ESS in the first {first} sampling states (median over the entries): patterns "
        f"{ess_w:.0f}, amplitudes {ess_h:.0f}"
    )
    print(
        f"patterns held at the published ones, {first} + {first} iterations: chi-square "
        f"{fixed.chisq_:.1f}, bulk ESS of the amplitudes {ess_fixed:.0f}"
    )


if __name__ == "__main__":
    main()
