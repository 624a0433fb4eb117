"""p-values of the CoGAPS sampler's statistical tests over repeated seeds.

Runs the comparisons of ``tests/test_cogaps_sampler_stats.py`` (the package's chains
against the documented transition kernel written in numpy) for ``--seeds`` different seeds
and prints the p-values of each comparison, their minimum, the fraction below 0.05 and a
Kolmogorov-Smirnov test of their uniformity; then the same for chains given a prior rate
1.5 times too large, which must be rejected; and, from ``tests/test_cogaps_posterior.py``,
the reversible chain (``birth_death="reversible"``) against the posterior computed by
quadrature. Run from the repository root::

    python benchmarks/cogaps_sampler_pvalues.py --seeds 20
"""

import argparse
import sys
from pathlib import Path

import numpy as np
from scipy import stats

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from test_cogaps_sampler_stats import (  # noqa: E402
    N_ITER,
    ReferenceChain,
    compare,
    one_row,
    queued_chains,
    sequential_chains,
    several_rows,
)
from test_cogaps_posterior import (  # noqa: E402
    ALPHA,
    QuadraturePosterior,
    compare_with_quadrature,
    continuous_cdf,
    fit_chains,
    problem,
    sparse_problem,
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


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--only-quadrature", action="store_true",
                        help="run only the comparisons with the posterior by quadrature")
    args = parser.parse_args()
    results = {}
    quadrature = quadrature_problems()
    for seed in range(args.seeds):
        for name, chain_args, model, post, cdf in quadrature:
            samples = fit_chains(*chain_args, True, 150, 600, 20, seed=3000 + seed, model=model)
            p = compare_with_quadrature(samples, post, cdf)[0]
            results.setdefault(f"reversible vs quadrature, {name}", []).append(p)
        if not args.only_quadrature:
            for K in (1, 2):
                problem = one_row(K)
                ref = ReferenceChain(*problem, n_chains=400, seed=1000 + seed).run(N_ITER, 60)
                X, prec, H, lam = problem
                p, _ = compare(sequential_chains(X, prec, H, lam, 400, N_ITER, seed=seed), ref)
                results.setdefault(f"sequential, K={K}", []).append(p)
                p, _ = compare(sequential_chains(X, prec, H, 1.5 * lam, 400, N_ITER, seed=seed), ref)
                results.setdefault(f"sequential, K={K}, prior rate x1.5", []).append(p)
            X, prec, H, lam = several_rows()
            ref = ReferenceChain(X, prec, H, lam, n_chains=400, seed=2000 + seed).run(N_ITER, 60)
            for model in ("dense", "sparse"):
                chains = queued_chains(X, prec, H, lam, 100, N_ITER, seed=seed, model=model)
                results.setdefault(f"queued, {model}", []).append(compare(chains, ref)[0])
        line = "  ".join(f"{name}: {ps[-1]:.3g}" for name, ps in results.items())
        print(f"seed {seed}  {line}", file=sys.stderr, flush=True)
    print(f"{'comparison':<42} {'min p':>8} {'p<0.05':>7} {'KS uniform p':>13}")
    for name, ps in results.items():
        ps = np.array(ps)
        print(f"{name:<42} {ps.min():8.2g} {np.mean(ps < 0.05):7.2f} "
              f"{stats.kstest(ps, 'uniform').pvalue:13.2g}")


if __name__ == "__main__":
    main()
