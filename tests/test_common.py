"""scikit-learn's estimator checks, for every estimator of the package (fast settings)."""

from sklearn.utils.estimator_checks import parametrize_with_checks

from sklearn_cogaps import CoGAPS, HierarchicalPMF, WeightedBackgroundPMF

ESTIMATORS = [
    CoGAPS(n_components=2, max_iter=15, random_state=0),
    CoGAPS(n_components=2, max_iter=15, random_state=0, sparse_optimization=True),
    HierarchicalPMF(n_components=2, max_iter=30, random_state=0),
    WeightedBackgroundPMF(n_components=2, max_iter=5, tol=1e-4),
]


@parametrize_with_checks(ESTIMATORS)
def test_sklearn_compatible_estimator(estimator, check):
    check(estimator)
