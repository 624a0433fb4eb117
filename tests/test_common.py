"""scikit-learn's estimator checks, for every estimator of the package (fast settings)."""

from sklearn.utils.estimator_checks import parametrize_with_checks

import warnings

from sklearn.exceptions import ConvergenceWarning

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
    HierarchicalPMF(n_components=2, max_iter=30, random_state=0),
    WeightedBackgroundPMF(n_components=2, max_iter=5, tol=1e-4),
    ExtremeDeconvolution(n_components=1, max_iter=20, tol=1e-4, w=1e-3),
    ExtremeDeconvolution(n_components=2, max_iter=20, tol=1e-4, w=1e-3, random_state=0),
    MaxMarginMF(n_components=2, max_iter=4, burn_in=1, random_state=0),
]


def expected_failed_checks(estimator):
    """Checks that fail for a reason a scikit-learn maintainer accepts."""
    if isinstance(estimator, ExtremeDeconvolution) and estimator.n_components > 1:
        return {
            "check_sample_weight_equivalence_on_dense_data": (
                "the k-means initialisation draws its centres from the rows, so repeated rows "
                "and integer weights start EM from different mixtures (as for KMeans itself)"
            )
        }
    return {}


@parametrize_with_checks(ESTIMATORS, expected_failed_checks=expected_failed_checks)
def test_sklearn_compatible_estimator(estimator, check):
    with warnings.catch_warnings():
        # the fast settings stop the optimisers early on purpose
        warnings.simplefilter("ignore", ConvergenceWarning)
        check(estimator)
