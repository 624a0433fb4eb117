"""The one-standard-error rule as a ``refit`` callable."""

import functools
import warnings

import numpy as np
import pytest
from sklearn.exceptions import ConvergenceWarning
from sklearn.model_selection import GridSearchCV, KFold
from sklearn.pipeline import make_pipeline

from sklearn_cogaps import CoGAPS, HierarchicalPMF, WeightedBackgroundPMF, one_standard_error
from sklearn_cogaps.datasets import make_patterns, make_single_cell


def _results(mean, std, values, n_splits=4, param="n_components", metric="score"):
    out = {
        f"mean_test_{metric}": np.asarray(mean, dtype=float),
        f"std_test_{metric}": np.asarray(std, dtype=float),
        f"param_{param}": np.ma.masked_array(values, mask=False, dtype=object),
    }
    for i in range(n_splits):
        out[f"split{i}_test_{metric}"] = np.zeros(len(mean))
    return out


def test_the_smallest_model_within_one_standard_error_of_the_best():
    # best: K = 6 (-10.0, standard error 4 / sqrt(4) = 2); K = 3 (-11.5) is within, K = 2 not
    columns = ([-30, -12.5, -11.5, -10.5, -10.0], [1, 1, 1, 1, 4], [1, 2, 3, 4, 6])
    assert one_standard_error(_results(*columns)) == 2
    # the order of the candidates does not matter
    order = [4, 2, 0, 3, 1]
    shuffled = _results(*(np.asarray(c)[order] for c in columns))
    assert order[one_standard_error(shuffled)] == 2
    # with no spread, the best itself
    assert one_standard_error(_results([-3, -2, -1], [0, 0, 0], [1, 2, 3])) == 2


def test_the_standard_error_is_that_of_the_sample_standard_deviation():
    # two folds scoring -1 and -3 for K = 3: scikit-learn's std_test_score is 1 (divided by
    # n_splits), the rule's standard error sqrt(2) / sqrt(2) = 1 (sample standard deviation);
    # K = 2 at 0.9 below the best is within it, not within 1 / sqrt(2)
    splits = np.array([[-9.0, -9.0], [-2.9, -2.9], [-1.0, -3.0]])
    out = _results(splits.mean(axis=1), splits.std(axis=1), [1, 2, 3], n_splits=2)
    assert one_standard_error(out) == 1
    se = np.std(splits[2], ddof=1) / np.sqrt(2)
    out = _results(splits.mean(axis=1) + [0, 0.9 - se - 1e-9, 0], splits.std(axis=1), [1, 2, 3],
                   n_splits=2)  # fmt: skip
    assert one_standard_error(out) == 2
    # one fold: no standard error, the best
    assert one_standard_error(_results([-2.0, -1.0], [0.0, 0.0], [1, 2], n_splits=1)) == 1


def test_ties_failed_fits_metrics_and_other_parameters():
    # two candidates of the same size (another parameter differs): the better score
    assert one_standard_error(_results([-5, -1.2, -1.1, -1.0], [0, 0, 0, 0.4], [1, 2, 2, 3])) == 2
    # a failed fit (NaN) is never chosen, nor taken as the best
    assert one_standard_error(_results([np.nan, -2, -1], [np.nan, 0, 0.1], [1, 2, 3])) == 2
    multi = _results([-9, -1.05, -1], [0, 0, 0.2], [1, 2, 3], metric="loglik")
    assert one_standard_error(multi, metric="loglik") == 1
    with pytest.raises(ValueError, match="metric= one of these names"):
        one_standard_error(multi)
    pipe = _results([-9, -1.05, -1], [0, 0, 0.2], [1, 2, 3], param="model__n_components")
    assert one_standard_error(pipe, param="model__n_components") == 1
    with pytest.raises(ValueError, match="compares the candidates by 'n_components'"):
        one_standard_error(pipe)
    with pytest.raises(ValueError, match=r"values cannot be ordered: \['1.0', 'None'\]"):
        one_standard_error(_results([-1, -1], [0, 0], [None, 1.0]))
    with pytest.raises(ValueError, match="each fit, or its scoring on the held-out fold"):
        one_standard_error(_results([np.nan, np.nan], [0, 0], [1, 2]))


@pytest.mark.parametrize("Estimator", [HierarchicalPMF, WeightedBackgroundPMF])
def test_a_search_over_the_number_of_components_picks_the_simulated_one(Estimator):
    """On counts made of 3 programs the held-out score plateaus from K = 3; the rule picks
    3, in a pipeline too."""
    X = make_single_cell(n_samples=150, n_features=80, n_components=3, random_state=0)[0]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        search = GridSearchCV(
            make_pipeline(Estimator(max_iter=60, random_state=0)),
            {f"{Estimator.__name__.lower()}__n_components": [1, 2, 3, 4, 6]},
            cv=KFold(3, shuffle=True, random_state=0),
            refit=functools.partial(
                one_standard_error, param=f"{Estimator.__name__.lower()}__n_components"
            ),
        ).fit(X)
    assert search.best_params_ == {f"{Estimator.__name__.lower()}__n_components": 3}


@pytest.mark.parametrize("seed", [0, 1])
def test_cogaps_with_its_defaults_picks_the_simulated_number_of_patterns(seed):
    """The search of issue "CoGAPS: the converged answer...": CoGAPS with its defaults on
    make_patterns(40, 200, 3) scores a plateau from K = 3 on, and the rule picks 3."""
    X, _, _ = make_patterns(n_samples=40, n_features=200, n_components=3, random_state=seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        search = GridSearchCV(
            CoGAPS(random_state=0),
            {"n_components": [2, 3, 4, 6, 8]},
            cv=KFold(3, shuffle=True, random_state=0),
            refit=one_standard_error,
        ).fit(X)
    mean = search.cv_results_["mean_test_score"]
    std = search.cv_results_["std_test_score"]
    assert mean[0] < mean[1:].min() - 10 * std[1:].max()  # K = 2 misses a pattern
    assert np.all(mean[1:] >= mean[1:].max() - std[1:].max())  # the plateau from K = 3
    assert search.best_params_ == {"n_components": 3}
