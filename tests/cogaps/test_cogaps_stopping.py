"""CoGAPS's phases ended by the diagnostics of several chains (``tol``): the calibration
once the chains' chi-squares agree, the sampling once the pooled posterior means are
precise, ``max_iter`` a cap; the same phases and bits on every joblib backend."""

import re
import warnings

import numpy as np
import pytest
from joblib import parallel_config
from sklearn.exceptions import ConvergenceWarning

from sklearn_cogaps import CoGAPS, FitInterruptedWarning
from sklearn_cogaps._cli._write import chain_status
from sklearn_cogaps._cogaps._chains import calibration_agrees, unconverged_chains_message
from sklearn_cogaps._utils._diagnostics import rhat_threshold
from sklearn_cogaps.datasets import make_patterns


@pytest.fixture(scope="module")
def fixed_problem():
    """Patterns sampled against known amplitudes: a posterior the chains agree on soon."""
    X, W, H = make_patterns(n_samples=20, n_features=60, n_components=2, random_state=0)
    return X, W, H


# chains run to the cap (tol=0.01 is never met) in rounds of 50 iterations, for the tests
# that interrupt them
INTERRUPTED = dict(max_iter=500, n_chains=2, tol=0.01, random_state=0, n_jobs=1)


@pytest.fixture(scope="module")
def interrupted_reference(fixed_problem):
    """The uninterrupted fit that the interrupted ones are compared with."""
    X, _, H = fixed_problem
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return CoGAPS(2, **INTERRUPTED).fit(X, fixed_components=H)


def _fit(X, H, **params):
    model = CoGAPS(2, max_iter=2000, n_chains=2, tol=0.2, random_state=0, **params)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return model.fit(X, fixed_components=H)


def test_the_phases_end_by_the_diagnostics(fixed_problem):
    X, W, H = fixed_problem
    model = CoGAPS(2, max_iter=10000, n_chains=4, n_snapshots=200, tol=0.1, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        model.fit(X, fixed_components=H)
    calibration = model.n_calibration_iter_
    assert model.converged_
    assert calibration < 10000 and model.n_iter_ < calibration + 10000
    histories = model.chain_objective_histories_
    assert histories.shape == (4, model.n_iter_)
    # the calibration ended at the first look where the chains agreed
    assert calibration_agrees(histories, calibration, 0)
    every = 1000  # max(50, max_iter // 10)
    assert calibration % every == 0 and model.n_iter_ % every == 0
    assert calibration == every or not calibration_agrees(histories, calibration - every, 0)
    # the pooled means are precise to tol (ESS of at least 1 / tol**2 = 100) and the
    # chains agree on every entry: R-hat at most 1.01 for the chi-square, and for the
    # entries what chains of independent draws exceed in 5% of fits
    n_moving = np.isfinite(model.rhat_["loadings"]).sum()  # H is fixed
    entries = rhat_threshold(4, model._draws["loadings"].shape[1], n_moving)
    for name, threshold in (("chisq", 1.01), ("loadings", entries)):
        assert np.nanmin(np.atleast_1d(model.ess_bulk_[name])) >= 100, name
        assert np.nanmax(np.atleast_1d(model.rhat_[name])) <= threshold, name
    assert model._draws["chisq"].shape == (4, model.n_iter_ - calibration)
    # the same posterior as chains run to shorter fixed lengths
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        full = CoGAPS(2, max_iter=2000, n_chains=2, random_state=0)
        full.fit(X, fixed_components=H)
    assert np.corrcoef(model.loadings_.ravel(), full.loadings_.ravel())[0, 1] > 0.99
    status = chain_status(model)
    assert status["complete"] and status["calibration"] == calibration
    assert status["sampling"] == model.n_iter_ - calibration


def test_the_same_phases_and_bits_on_every_backend(fixed_problem):
    X, _, H = fixed_problem
    reference = _fit(X, H)
    for backend, n_jobs in (("threading", 2), ("loky", 2), ("sequential", 1)):
        with parallel_config(backend=backend):
            model = _fit(X, H, n_jobs=n_jobs)
        assert model.n_iter_ == reference.n_iter_, backend
        np.testing.assert_array_equal(model.loadings_, reference.loadings_)
        np.testing.assert_array_equal(model.chain_objective_histories_,
                                      reference.chain_objective_histories_)  # fmt: skip


def test_ctrl_c_keeps_the_last_complete_round(monkeypatch, fixed_problem, interrupted_reference):
    """Ctrl-C during a round of the sampling keeps every chain at the end of the round
    before, as the uninterrupted fit had them then; during the calibration there is no
    posterior to keep, and the KeyboardInterrupt propagates."""
    from _shared import interrupt_cogaps_at

    X, _, H = fixed_problem
    params, reference = INTERRUPTED, interrupted_reference
    calibration = reference.n_calibration_iter_
    assert reference.n_iter_ == calibration + 500  # tol=0.01 is never met: the cap
    # the rounds are of 50 iterations, every chain in turn; stop the first chain 10
    # iterations into the third round of the sampling
    original = interrupt_cogaps_at(monkeypatch, 2 * (calibration + 100) + 10)
    with pytest.warns(FitInterruptedWarning, match=rf"after {calibration} calibration and 100 "):
        kept = CoGAPS(2, **params).fit(X, fixed_components=H)
    assert kept.n_iter_ == calibration + 100 and kept.n_calibration_iter_ == calibration
    assert not kept.converged_
    np.testing.assert_array_equal(
        kept.chain_objective_histories_, reference.chain_objective_histories_[:, : kept.n_iter_]
    )
    assert kept._draws["chisq"].shape == (2, 100)
    monkeypatch.setattr("sklearn_cogaps._cogaps._chain.GibbsSampler", original)
    interrupt_cogaps_at(monkeypatch, 2 * calibration - 10)
    with pytest.raises(KeyboardInterrupt):
        CoGAPS(2, **params).fit(X, fixed_components=H)


def test_ctrl_c_in_a_rounds_diagnostics_keeps_the_round(
    monkeypatch, fixed_problem, interrupted_reference
):
    """Ctrl-C while the diagnostics of a sampling round run (seconds at single-cell size)
    keeps the chains at the end of that round, which is complete; it propagated, and the
    fit was lost."""
    from sklearn_cogaps._cogaps import _chains

    X, _, H = fixed_problem
    params, reference = INTERRUPTED, interrupted_reference
    calibration = reference.n_calibration_iter_
    looks = []

    def interrupted(*args):
        looks.append(1)
        if len(looks) == 2:  # the second round of the sampling
            raise KeyboardInterrupt
        return False

    monkeypatch.setattr(_chains, "means_are_precise", interrupted)
    with pytest.warns(FitInterruptedWarning, match=rf"after {calibration} calibration and 100 "):
        kept = CoGAPS(2, **params).fit(X, fixed_components=H)
    assert kept.n_iter_ == calibration + 100 and not kept.converged_
    np.testing.assert_array_equal(
        kept.chain_objective_histories_, reference.chain_objective_histories_[:, : kept.n_iter_]
    )


def test_chains_that_never_agree_run_to_the_caps_and_warn():
    X, _, _ = make_patterns(n_samples=40, n_features=200, n_components=3, random_state=0)
    # a loose tol asks few effective draws, not less agreement
    model = CoGAPS(3, max_iter=500, n_chains=4, tol=0.5, random_state=0)
    with pytest.warns(ConvergenceWarning, match="ran into max_iter.*R-hat") as caught:
        model.fit(X)
    assert model.n_iter_ == model.n_calibration_iter_ + 500
    assert not model.converged_
    # the warning names the tests that failed only: the ESS test (1 / 0.5**2 = 4) passed
    least = min(np.nanmin(np.atleast_1d(v)) for v in model.ess_bulk_.values())
    message = str(caught[-1].message)
    assert ("the smallest bulk ESS" in message) == (least < 4), (least, message)


@pytest.mark.parametrize("seed, max_iter", [(3, 500), (4, 500), (0, 200)])
def test_a_fit_that_stops_passes_the_tests_its_warning_reads(seed, max_iter):
    """With a loose tol the sampling stopped on a chi-square whose tail ESS the
    ConvergenceWarning refuses (below 100 per chain), converged_ True and no warning; a fit
    without tol on those draws would have warned."""
    X, _, _ = make_patterns(n_samples=20, n_features=60, n_components=3, random_state=0)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = CoGAPS(1, max_iter=max_iter, n_chains=4, random_state=seed, n_snapshots=100,
                       tol=0.5).fit(X)  # fmt: skip
    warned = [str(w.message) for w in caught if issubclass(w.category, ConvergenceWarning)]
    assert bool(warned) != model.converged_
    if warned:  # a reason for each test that failed, none empty
        assert not re.search(r"sampling iterations\s*[.;]", warned[-1]), warned[-1]
    if model.converged_:
        assert unconverged_chains_message(model) is None
        assert min(model.ess_bulk_["chisq"], model.ess_tail_["chisq"]) >= 400


def test_a_tol_the_draws_cannot_meet_is_said_at_the_start(fixed_problem):
    X, _, H = fixed_problem
    model = CoGAPS(2, max_iter=100, n_chains=2, tol=0.01, random_state=0)
    with pytest.warns(UserWarning, match=r"bulk ESS of 10000 .* 2 chains x 100 draws"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            model.fit(X, fixed_components=H)


def test_tol_needs_several_chains(fixed_problem):
    X = fixed_problem[0]
    with pytest.raises(ValueError, match="n_chains=4"):
        CoGAPS(2, max_iter=10, tol=0.1).fit(X)


def test_command_line_tol(fixed_problem, tmp_path, capsys):
    from sklearn_cogaps._cli._run import main

    X = fixed_problem[0]
    np.save(tmp_path / "x.npy", X)
    base = [str(tmp_path / "x.npy"), "-k", "2", "--max-iter", "300", "--seed", "0"]
    with pytest.raises(SystemExit):
        main([*base, "--tol", "0.3"])
    assert "--n-chains" in capsys.readouterr().err
    out_file = tmp_path / "out.npz"
    status = main([*base, "--tol", "0.3", "--n-chains", "2", "-o", str(out_file)])
    out = capsys.readouterr().out
    assert status == 0 and "chains     2" in out
    with np.load(out_file) as r:
        assert bool(r["complete"])
