"""p-values of MaxMarginMF's sampler tests over repeated seeds.

Runs the six comparisons of ``tests/m3f/test_m3f.py`` with the stationary law of the Gibbs
sampler (the final states of many chains, or one long chain, against a posterior or prior
known in closed form, by quadrature or by exact enumeration) for seeds 0 to ``--seeds`` - 1;
the CI runs them with seed 0 only. Then the same for wrong samplers, which must be
rejected: the chains run with 1.1 or 1.3 times the C of the posterior they are compared
with. Run from the repository root::

    python benchmarks/m3f_sampler_pvalues.py --seeds 20

Each seed's p-values go to stderr as they come; stdout gets a table with, for each
p-value, the smallest of the seeds, how many are below 0.05 and a Kolmogorov-Smirnov test
of their uniformity. Under the null each p-value is uniform on [0, 1] (discrete for the
chi-square and binomial tests), so about 5 % of them fall below 0.05.
"""

import argparse
import sys
from pathlib import Path

import numpy as np
from scipy import stats

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "m3f"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from test_m3f import (  # noqa: E402
    coupled_users_pvalues,
    exact_posterior_pvalues,
    ibp_chain_pvalues,
    ibp_prior_pvalues,
    ibp_row_step_pvalues,
    ibp_shared_and_own_pvalues,
)

COMPARISONS = {
    "one rating per chain": exact_posterior_pvalues,
    "coupled users": coupled_users_pvalues,
    "IBP row step": ibp_row_step_pvalues,
    "IBP prior": ibp_prior_pvalues,
    "IBP chain": ibp_chain_pvalues,
    "IBP shared and own features": ibp_shared_and_own_pvalues,
}
# sampler run with factor * C, posterior at C: must be rejected
WRONG = {
    "one rating per chain, sampler C x1.3": lambda seed: exact_posterior_pvalues(seed, 1.3),
    "coupled users, sampler C x1.1": lambda seed: coupled_users_pvalues(seed, 1.1),
    "coupled users, sampler C x1.3": lambda seed: coupled_users_pvalues(seed, 1.3),
}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=20)
    args = parser.parse_args()
    results = {}
    for seed in range(args.seeds):
        line = []
        for comparison, pvalues in {**COMPARISONS, **WRONG}.items():
            for name, p in pvalues(seed).items():
                results.setdefault(f"{comparison}: {name}", []).append(float(p))
                line.append(f"{comparison}: {name} {p:.3g}")
        print(f"seed {seed}  " + "  ".join(line), file=sys.stderr, flush=True)
    width = max(map(len, results))
    print(f"{'p-value':<{width}} {'min p':>9} {'p<0.05':>7} {'KS uniform p':>13}")
    for name, ps in results.items():
        ps = np.array(ps)
        print(
            f"{name:<{width}} {ps.min():9.2g} {np.sum(ps < 0.05):4d}/{ps.size:<2d} "
            f"{stats.kstest(ps, 'uniform').pvalue:13.2g}"
        )


if __name__ == "__main__":
    main()
