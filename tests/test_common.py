"""scikit-learn's estimator checks, for every estimator of the package (fast settings)."""

from sklearn.utils.estimator_checks import parametrize_with_checks

from sklearn_cogaps import CoGAPS

ESTIMATORS = [
    CoGAPS(n_components=2, max_iter=15, random_state=0),
    CoGAPS(n_components=2, max_iter=15, random_state=0, sparse_optimization=True),
]


@parametrize_with_checks(ESTIMATORS)
def test_sklearn_compatible_estimator(estimator, check):
    check(estimator)
