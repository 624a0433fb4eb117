"""What partial_fit does alike in both Poisson models: steps that do not depend on the
threads or on how a batch is read, and ``total_samples=None`` counting the rows given so
far."""

import warnings

import numpy as np
import pytest
from numpy.testing import assert_array_equal
from threadpoolctl import threadpool_limits

import sklearn_cogaps._utils._blocks as blocks_module
from sklearn_cogaps import HierarchicalPMF, WeightedBackgroundPMF
from sklearn_cogaps._utils import _openmp_helpers

from _shared import gamma_poisson_counts, partial_fit_epochs

# each model's fitted attributes of the features, which a step changes
MODELS = [
    (HierarchicalPMF, ("components_shape_", "components_rate_", "prior_loadings_shape_",
                       "prior_loadings_rate_", "prior_components_shape_")),
    (WeightedBackgroundPMF, ("components_", "w_", "f0_", "components_mean_",
                             "kl_components_")),
]  # fmt: skip


@pytest.mark.parametrize("Model, names", MODELS)
def test_the_steps_do_not_depend_on_the_threads(monkeypatch, Model, names):
    monkeypatch.setattr(_openmp_helpers, "MIN_WORK_PER_THREAD", 1)
    X = gamma_poisson_counts(240, 60, 3, 3)
    kw = dict(n_components=3, random_state=2, total_samples=240)
    with threadpool_limits(1, user_api="openmp"):
        one = partial_fit_epochs(Model(**kw), X, 2, 80)
    with threadpool_limits(2, user_api="openmp"):
        two = partial_fit_epochs(Model(**kw), X, 2, 80)
    for name in (*names, "objective_history_"):
        assert_array_equal(getattr(two, name), getattr(one, name), err_msg=name)


@pytest.mark.parametrize("Model, names", MODELS)
def test_a_batch_read_by_blocks_gives_the_in_memory_step(tmp_path, monkeypatch, Model, names):
    h5py = pytest.importorskip("h5py")
    monkeypatch.setattr(blocks_module, "BLOCK_ENTRIES", 1000)
    X = gamma_poisson_counts(200, 70, 3, 4)
    first, second = X[:120], X[120:]
    kw = dict(n_components=3, random_state=0, total_samples=400)
    ref = Model(**kw).partial_fit(first).partial_fit(second)
    with h5py.File(tmp_path / "x.h5", "w") as f:
        f["a"], f["b"] = first.toarray(), second.toarray()
    with h5py.File(tmp_path / "x.h5", "r") as f:
        est = Model(**kw).partial_fit(f["a"]).partial_fit(f["b"])
    for name in (*names, "objective_history_"):
        assert_array_equal(getattr(est, name), getattr(ref, name), err_msg=name)


@pytest.mark.parametrize("Model, names", MODELS)
def test_total_samples_none_counts_the_rows_given_so_far(Model, names):
    X = gamma_poisson_counts(200, 50, 2, 6)
    kw = dict(n_components=2, random_state=0)
    auto = Model(**kw).partial_fit(X[:100]).partial_fit(X[100:])
    # the first batch stands for its own 100 rows, the second for the 200 seen
    ref = Model(total_samples=100, **kw).partial_fit(X[:100])
    ref.set_params(total_samples=200).partial_fit(X[100:])
    assert_array_equal(getattr(auto, names[0]), getattr(ref, names[0]))
    other = Model(total_samples=200, **kw).partial_fit(X[:100]).partial_fit(X[100:])
    assert not np.array_equal(getattr(other, names[0]), getattr(auto, names[0]))


@pytest.mark.parametrize("Model, names", MODELS)
def test_a_small_batch_after_large_ones_warns(Model, names):
    X = gamma_poisson_counts(230, 50, 2, 8)
    model = Model(n_components=2, random_state=0, total_samples=230)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        model.partial_fit(X[:100]).partial_fit(X[100:200])
        model.partial_fit(X[200:220])  # a fifth of the mean: no warning
    with pytest.warns(UserWarning, match="batch of 5 rows is under a tenth of the 73 rows"):
        model.partial_fit(X[220:225])
