"""p-values of the CoGAPS sampler's statistical tests over repeated seeds.

Runs the comparisons of ``tests/cogaps/test_cogaps_sampler_stats.py`` (the package's chains
against the documented transition kernel written in numpy) for ``--seeds`` different seeds
and prints the p-values of each comparison, their minimum, the fraction below 0.05 and a
Kolmogorov-Smirnov test of their uniformity; then the same for chains given a prior rate
1.5 times too large, which must be rejected; and, from ``tests/cogaps/test_cogaps_posterior.py``,
the reversible chain (``solver="reversible"``) against the posterior computed by
quadrature. Run from the repository root::

    python benchmarks/cogaps_sampler_pvalues.py --seeds 20

For the comparisons with the kernel it also prints the largest |z| of Stouffer's pooled
z-scores over the seeds and their Bonferroni p-value: one seed detects a large bias, the
pooled z a small systematic one. The line "reference vs twice its burn-in" compares the
reference chains with chains of the same kernel run twice as long before averaging, which
checks that the reference's burn-in (``BURN_IN`` of the tests) suffices.
"""

import argparse
import sys
from pathlib import Path

import numpy as np
from scipy import stats

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "cogaps"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from test_cogaps_posterior import (  # noqa: E402
    ALPHA,
    QuadraturePosterior,
    compare_with_quadrature,
    continuous_cdf,
    fit_chains,
    problem,
    sparse_problem,
)
from test_cogaps_sampler_stats import (  # noqa: E402
    BURN_IN,
    N_ITER,
    ReferenceChain,
    compare,
    one_row,
    queued_chains,
    sequential_chains,
    several_rows,
)


def quadrature_problems():
    """(name, chain arguments, model, posterior, CDF of its continuous part or None)."""
    out = []
    for name, (X, prec, H, lam), model, upper in (
        ("dense, K=1", problem(1), "dense", 6.0),
        ("dense, K=2", problem(2), "dense", 6.0),
        ("sparse, K=1", sparse_problem(), "sparse", 1.0),
    ):
        post = QuadraturePosterior(X[0], prec[0], H, ALPHA, lam, upper=upper)
        cdf = continuous_cdf(X[0], prec[0], H[0], ALPHA, lam, upper) if H.shape[0] == 1 else None
        out.append((name, (X, prec, H, ALPHA, lam), model, post, cdf))
    return out


def pooled(zs):
    """Stouffer's z of every moment over the seeds and its Bonferroni p-value. Each seed's
    z-scores come from independent chains, so under the null their sum over S seeds divided
    by sqrt(S) is standard normal: a bias too small for one seed to show grows with S."""
    z = np.sum(zs, axis=0) / np.sqrt(len(zs))
    return z, min(1.0, z.size * 2.0 * stats.norm.sf(np.abs(z).max()))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument(
        "--only-quadrature",
        action="store_true",
        help="run only the comparisons with the posterior by quadrature",
    )
    args = parser.parse_args()
    results, zscores = {}, {}

    def record(name, p, z=None):
        results.setdefault(name, []).append(p)
        if z is not None:
            zscores.setdefault(name, []).append(z)

    quadrature = quadrature_problems()
    for seed in range(args.seeds):
        for name, chain_args, model, post, cdf in quadrature:
            samples = fit_chains(*chain_args, True, 150, 600, 20, seed=3000 + seed, model=model)
            p = compare_with_quadrature(samples, post, cdf)[0]
            record(f"reversible vs quadrature, {name}", p)
        if not args.only_quadrature:
            for K in (1, 2):
                X, prec, H, lam = one_row(K)
                ref = ReferenceChain(X, prec, H, lam, n_chains=400, seed=1000 + seed).run(
                    N_ITER, BURN_IN
                )
                record(
                    f"sequential, K={K}",
                    *compare(sequential_chains(X, prec, H, lam, 400, N_ITER, seed=seed), ref),
                )
                wrong = sequential_chains(X, prec, H, 1.5 * lam, 400, N_ITER, seed=seed)
                record(f"sequential, K={K}, prior rate x1.5", *compare(wrong, ref))
            X, prec, H, lam = several_rows()
            ref = ReferenceChain(X, prec, H, lam, n_chains=400, seed=2000 + seed).run(
                N_ITER, BURN_IN
            )
            for model in ("dense", "sparse"):
                chains = queued_chains(X, prec, H, lam, 100, N_ITER, seed=seed, model=model)
                record(f"queued, {model}", *compare(chains, ref))
            # is the reference itself past its burn-in? the same kernel, twice the burn-in
            longer = ReferenceChain(X, prec, H, lam, n_chains=400, seed=4000 + seed).run(
                N_ITER, 2 * BURN_IN
            )
            record("reference vs twice its burn-in", *compare(ref, longer))
        line = "  ".join(f"{name}: {ps[-1]:.3g}" for name, ps in results.items())
        print(f"seed {seed}  {line}", file=sys.stderr, flush=True)
    print(
        f"{'comparison':<42} {'min p':>8} {'p<0.05':>7} {'KS uniform p':>13} "
        f"{'max |pooled z|':>15} {'pooled p':>9}"
    )
    for name, ps in results.items():
        ps = np.array(ps)
        tail = ""
        if name in zscores:
            z, p = pooled(zscores[name])
            tail = f" {np.abs(z).max():15.2f} {p:9.2g}"
        print(
            f"{name:<42} {ps.min():8.2g} {np.mean(ps < 0.05):7.2f} "
            f"{stats.kstest(ps, 'uniform').pvalue:13.2g}{tail}"
        )


if __name__ == "__main__":
    main()
