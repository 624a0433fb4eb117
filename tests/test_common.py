"""scikit-learn's estimator checks, for every estimator of the package: with its defaults, and
with fast settings for each of its paths."""

import warnings

from sklearn.exceptions import ConvergenceWarning
from sklearn.utils.estimator_checks import parametrize_with_checks

from sklearn_cogaps import (
    CoGAPS,
    ExtremeDeconvolution,
    HierarchicalPMF,
    MaxMarginMF,
    WeightedBackgroundPMF,
)

ESTIMATORS = [
    CoGAPS(n_components=2, max_iter=15, random_state=0),
    CoGAPS(n_components=2, max_iter=15, random_state=0, sparse_optimization=True),
    CoGAPS(n_components=2, max_iter=15, random_state=0, distributed="genome-wide", n_sets=2),
    CoGAPS(n_components=2, max_iter=15, random_state=0, distributed="single-cell", n_sets=2),
    HierarchicalPMF(n_components=2, max_iter=30, random_state=0),
    WeightedBackgroundPMF(n_components=2, max_iter=5, tol=1e-4),
    ExtremeDeconvolution(n_components=1, max_iter=20, tol=1e-4, w=1e-3),
    ExtremeDeconvolution(n_components=2, max_iter=20, tol=1e-4, w=1e-3, random_state=0),
    MaxMarginMF(n_components=2, max_iter=4, burn_in=1, random_state=0),
    # iPM3F; the checks' continuous data have hundreds of rating levels, for which every user
    # takes the most new features allowed per sweep: one keeps the feature count small
    MaxMarginMF(
        n_components=2, prior="ibp", max_new_features=1, max_iter=4, burn_in=1, random_state=0
    ),
    # Built with their defaults, as a user first writes them (more components than the
    # checks' small data have features, for the factorisations).
    HierarchicalPMF(),
    WeightedBackgroundPMF(),
    ExtremeDeconvolution(),
    CoGAPS(),
    MaxMarginMF(),
]


@parametrize_with_checks(ESTIMATORS)
def test_sklearn_compatible_estimator(estimator, check):
    with warnings.catch_warnings():
        # the fast settings stop the optimisers early on purpose
        warnings.simplefilter("ignore", ConvergenceWarning)
        check(estimator)
