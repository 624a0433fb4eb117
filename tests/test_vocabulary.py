"""One vocabulary across the estimators (doc/conventions.rst): the shared attribute and
parameter names, the old names that keep working for one release, estimators pickled under
the old names, the class signatures, and ``n_init``."""

import inspect
import pickle
import warnings

import numpy as np
import pytest
from numpy.testing import assert_array_equal
from sklearn.exceptions import ConvergenceWarning

from sklearn_cogaps import (
    CoGAPS,
    ExtremeDeconvolution,
    HierarchicalPMF,
    MaxMarginMF,
    WeightedBackgroundPMF,
)

from _shared import COUNTS, POINTS, RATINGS

ESTIMATORS = [
    (CoGAPS(n_components=2, max_iter=10, random_state=0), COUNTS),
    (HierarchicalPMF(n_components=2, max_iter=10, random_state=0), COUNTS),
    (WeightedBackgroundPMF(n_components=2, max_iter=5, random_state=0), COUNTS),
    (ExtremeDeconvolution(n_components=2, max_iter=5, random_state=0), POINTS),
    (MaxMarginMF(n_components=2, max_iter=6, burn_in=2, random_state=0), RATINGS),
]
IDS = [type(e).__name__ for e, _ in ESTIMATORS]


def _fit(estimator, X, **params):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return estimator.set_params(**params).fit(X)


@pytest.mark.parametrize("estimator, X", ESTIMATORS, ids=IDS)
def test_every_estimator_has_the_shared_names(estimator, X):
    with warnings.catch_warnings():
        warnings.simplefilter("error", FutureWarning)  # the new names never warn
        est = _fit(estimator, X)
        assert est.objective_history_.shape == (est.n_iter_,)
        assert isinstance(est.converged_, bool) and isinstance(est.n_iter_, int)
        if not isinstance(est, ExtremeDeconvolution):  # a density has no factors
            assert est.loadings_.shape == (X.shape[0], 2)
            assert est.components_.shape == (2, X.shape[1])
    assert inspect.signature(type(est)).parameters.keys() == (
        dict(inspect.signature(type(est).__init__).parameters).keys() - {"self"}
    )


@pytest.mark.parametrize(
    "estimator, X, old, new, transposed",
    [
        (ESTIMATORS[0][0], COUNTS, "chisq_history_", "objective_history_", False),
        (ESTIMATORS[0][0], COUNTS, "patterns_", "loadings_", False),
        (ESTIMATORS[1][0], COUNTS, "lower_bounds_", "objective_history_", False),
        (ESTIMATORS[2][0], COUNTS, "lower_bounds_", "objective_history_", False),
        (ESTIMATORS[2][0], COUNTS, "factors_mean_", "components_mean_", True),
        (ESTIMATORS[2][0], COUNTS, "factors_mean_log_", "components_mean_log_", True),
        (ESTIMATORS[2][0], COUNTS, "prior_factors_", "prior_components_", False),
        (ESTIMATORS[2][0], COUNTS, "kl_factors_", "kl_components_", False),
        (ESTIMATORS[3][0], POINTS, "lower_bounds_", "objective_history_", False),
        (ESTIMATORS[4][0], RATINGS, "objective_", "objective_history_", False),
        (ESTIMATORS[4][0], RATINGS, "user_factors_", "loadings_", False),
        (ESTIMATORS[4][0], RATINGS, "item_factors_", "components_", True),
        (ESTIMATORS[4][0], RATINGS, "n_features_trace_", "n_features_history_", False),
    ],
    ids=lambda v: v if isinstance(v, str) else None,
)
def test_old_attribute_names_warn_and_read_the_new_ones(estimator, X, old, new, transposed):
    est = _fit(estimator, X)
    with pytest.warns(FutureWarning, match=f"'{old}' was renamed '{new}'"):
        value = getattr(est, old)
    expected = getattr(est, new)
    if transposed:
        expected = expected.T
    if isinstance(expected, dict):
        assert value is expected
    else:
        assert_array_equal(value, expected)
    # an attribute that never existed is still an AttributeError, without a warning
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(AttributeError, match="has no attribute 'no_such_'"):
            est.no_such_  # noqa: B018


@pytest.mark.parametrize(
    "estimator, X, old, new, value",
    [
        (ESTIMATORS[0][0], COUNTS, "birth_death", "solver", "reversible"),
        (ESTIMATORS[0][0], COUNTS, "alpha_W", "atom_density_W", 0.05),
        (ESTIMATORS[2][0], COUNTS, "prior_factors", "prior_components", "gamma"),
        (ESTIMATORS[3][0], POINTS, "method", "solver", "minibatch_em"),
    ],
    ids=lambda v: v if isinstance(v, str) else None,
)
def test_old_parameter_names_warn_and_fit_what_the_new_ones_fit(estimator, X, old, new, value):
    from sklearn.base import clone

    expected = _fit(clone(estimator), X, **{new: value})
    with pytest.warns(FutureWarning, match=f"'{old}' was renamed '{new}'.*{new}={value!r}"):
        got = _fit(clone(estimator), X, **{old: value})
    assert_array_equal(got.objective_history_, expected.objective_history_)
    # both names at once, with different values: which one is meant?
    bad = {"alpha_W": 0.5, "prior_factors": "point_gamma", "method": "sgd"}.get(old)
    if bad is not None:  # (CoGAPS's solver has no third value)
        with pytest.raises(ValueError, match=f"{old}=.* and {new}=.* are both set"):
            _fit(clone(estimator), X, **{old: value, new: bad})


def test_verbose_interval_is_deprecated_and_still_honoured(capsys):
    xd = ExtremeDeconvolution(2, max_iter=100, verbose=1, random_state=0)
    with pytest.warns(FutureWarning, match="verbose_interval is deprecated"):
        _fit(xd, POINTS, verbose_interval=1)
    lines = [line for line in capsys.readouterr().out.splitlines() if "] iteration" in line]
    assert len(lines) == xd.n_iter_ < 10  # every iteration, not every tenth of max_iter


@pytest.mark.parametrize("estimator, X", ESTIMATORS, ids=IDS)
def test_estimators_pickled_under_the_old_names_load_under_the_new_ones(estimator, X):
    est = _fit(estimator, X)
    state = dict(est.__getstate__())
    renamed = type(est)._renamed_attributes
    # the state an estimator of release 0.1 pickled: its attributes under the old names
    for old, (new, transposed) in renamed.items():
        if new in state:
            value = state.pop(new)
            state[old] = value.T if transposed else value
    for old, new in type(est)._renamed_parameters.items():
        state[old] = state.pop(new)
    blob = pickle.dumps(est)
    loaded = pickle.loads(blob)
    loaded.__dict__.clear()
    loaded.__setstate__(state)
    with warnings.catch_warnings():
        warnings.simplefilter("error", FutureWarning)
        assert_array_equal(loaded.objective_history_, est.objective_history_)
        assert loaded.get_params() == est.get_params()
        if hasattr(est, "loadings_"):
            assert_array_equal(loaded.loadings_, est.loadings_)
            assert_array_equal(loaded.components_, est.components_)


@pytest.mark.parametrize("cls", [HierarchicalPMF, WeightedBackgroundPMF])
def test_n_init_keeps_the_best_of_several_starts(cls):
    one = _fit(cls(n_components=3, max_iter=15, random_state=0), COUNTS)
    default = _fit(cls(n_components=3, max_iter=15, random_state=0, n_init=1), COUNTS)
    assert_array_equal(one.components_, default.components_)
    best = _fit(cls(n_components=3, max_iter=15, random_state=0, n_init=3), COUNTS)
    # the first start is the single fit's; the best of three is at least as good
    assert best.lower_bound_ >= one.lower_bound_
    assert np.isfinite(best.lower_bound_) and best.objective_history_.size == best.n_iter_


@pytest.mark.parametrize(
    "estimator, X",
    [
        (HierarchicalPMF(n_components=2, max_iter=500, tol=1e-5, random_state=0), COUNTS),
        (WeightedBackgroundPMF(n_components=2, max_iter=500, tol=1e-5, random_state=0), COUNTS),
        (ExtremeDeconvolution(n_components=2, max_iter=500, tol=1e-5, random_state=0), POINTS),
    ],
    ids=["HierarchicalPMF", "WeightedBackgroundPMF", "ExtremeDeconvolution"],
)
def test_tol_is_the_same_test_in_every_optimiser(estimator, X):
    """The fit stops at the first iteration that changes the objective f by at most
    tol * max(|f|, 1), and not before."""
    est = _fit(estimator, X)
    h = est.objective_history_
    assert est.converged_ and est.n_iter_ == h.size < est.max_iter

    def met(i):
        return abs(h[i] - h[i - 1]) <= est.tol * max(abs(h[i - 1]), 1.0)

    assert met(h.size - 1)
    assert not any(met(i) for i in range(1, h.size - 1))


def test_tol_zero_stops_only_at_a_fixed_point():
    """With tol=0 the fit stops only when an iteration leaves the objective exactly as it
    was (a change of round-off does not stop it), without a ConvergenceWarning."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        xd = ExtremeDeconvolution(2, max_iter=40, tol=0.0, random_state=0).fit(POINTS)
    changes = np.diff(xd.objective_history_)
    assert np.all(changes[:-1] != 0)
    assert xd.converged_ == (changes[-1] == 0) and (xd.converged_ or xd.n_iter_ == 40)
