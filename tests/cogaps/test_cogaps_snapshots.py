"""CoGAPS's snapshots of the chain (R's ``nSnapshots`` and ``snapshotPhase``)."""

import warnings

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal
from sklearn.exceptions import ConvergenceWarning

from sklearn_cogaps import CoGAPS, FitInterruptedWarning
from sklearn_cogaps._cogaps._chain import snapshot_plan
from sklearn_cogaps.datasets import make_patterns

from _shared import interrupt_cogaps_at

pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")

FITTED = ("loadings_", "loadings_std_", "components_", "components_std_", "objective_history_")


@pytest.fixture(scope="module")
def X():
    return make_patterns(n_samples=20, n_features=60, n_components=2, random_state=0)[0]


@pytest.mark.parametrize(
    "n_snapshots, phase, expected",
    [
        (4, "sampling", [125, 150, 175, 200]),
        (4, "calibration", [25, 50, 75, 100]),
        (2, "all", [50, 100, 150, 200]),
        (3, "sampling", [133, 166, 199]),  # R: every floor(100 / 3) iterations
        (0, "all", []),
        (150, "sampling", list(range(101, 201))),  # a phase shorter: every iteration
        (4, "equilibration", [25, 50, 75, 100]),  # R's name of the calibration
    ],
)
def test_plan_takes_r_cogaps_iterations(n_snapshots, phase, expected):
    plan = snapshot_plan([False] * 100 + [True] * 100, n_snapshots, phase)
    assert sorted(plan) == expected


def test_snapshots_of_every_sampling_iteration_average_to_the_posterior_mean(X):
    model = CoGAPS(2, max_iter=50, random_state=0, n_snapshots=50).fit(X)
    assert_array_equal(model.snapshot_iterations_, np.arange(51, 101))
    # the samples averaged are the snapshots: each pattern scaled to a maximum of 1
    assert_allclose(model.loadings_snapshots_.max(axis=1), 1.0)
    assert_allclose(model.loadings_snapshots_.mean(axis=0), model.loadings_, rtol=1e-12)
    assert_allclose(model.components_snapshots_.mean(axis=0), model.components_, rtol=1e-12)
    assert_allclose(model.loadings_snapshots_.std(axis=0), model.loadings_std_, atol=1e-12)


def test_snapshots_do_not_change_the_chain(X):
    plain = CoGAPS(2, max_iter=40, random_state=1).fit(X)
    shots = CoGAPS(2, max_iter=40, random_state=1, n_snapshots=5, snapshot_phase="all").fit(X)
    for name in FITTED:
        assert_array_equal(getattr(shots, name), getattr(plain, name))
    assert plain.loadings_snapshots_.shape == (0, 20, 2)
    assert plain.components_snapshots_.shape == (0, 2, 60)
    assert shots.loadings_snapshots_.shape == (10, 20, 2)
    assert shots.components_snapshots_.shape == (10, 2, 60)
    # a calibration snapshot is a state of the chain: its product fits X roughly
    assert np.all(np.isfinite(shots.loadings_snapshots_))


def test_warm_start_appends_snapshots_with_the_chain_counting(X):
    model = CoGAPS(2, max_iter=30, random_state=0, n_snapshots=3, warm_start=True).fit(X)
    first = model.loadings_snapshots_.copy()
    model.fit(X)
    assert_array_equal(model.snapshot_iterations_, [40, 50, 60, 70, 80, 90])
    assert_array_equal(model.loadings_snapshots_[:3], first)


def test_an_interruption_keeps_the_snapshots_of_completed_iterations(X, monkeypatch):
    interrupt_cogaps_at(monkeypatch, 36)
    with pytest.warns(FitInterruptedWarning):
        model = CoGAPS(2, max_iter=20, random_state=0, n_snapshots=4, snapshot_phase="all").fit(X)
    assert_array_equal(model.snapshot_iterations_, [5, 10, 15, 20, 25, 30, 35])
    assert model.loadings_snapshots_.shape[0] == 7


def test_fixed_matrix_snapshots_are_not_rescaled(X):
    H = make_patterns(n_samples=20, n_features=60, n_components=2, random_state=0)[2]
    model = CoGAPS(2, max_iter=20, random_state=0, n_snapshots=2).fit(X, fixed_components=H)
    for shot in model.components_snapshots_:
        assert_array_equal(shot, H)


def test_float32_data_give_float32_snapshots(X):
    model = CoGAPS(2, max_iter=20, random_state=0, n_snapshots=2).fit(X.astype(np.float32))
    assert model.loadings_snapshots_.dtype == np.float32
    assert model.components_snapshots_.dtype == np.float32


def test_distributed_fit_refuses_snapshots(X):
    with pytest.raises(ValueError, match="n_snapshots=0"):
        CoGAPS(2, max_iter=20, distributed="genome-wide", n_sets=2, n_snapshots=2).fit(X)


@pytest.mark.parametrize(
    "name, advice", [("nSnapshots", "n_snapshots="), ("snapshotPhase", "snapshot_phase=")]
)
def test_r_names_say_what_to_write(name, advice):
    with pytest.raises(TypeError, match=advice):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            CoGAPS(**{name: 2})
