"""Several chains of one CoGAPS fit, and the convergence diagnostics: R-hat and effective
sample sizes equal to ArviZ's, pooled posteriors, results independent of the joblib backend
and the number of workers, and the ConvergenceWarning they drive."""

import tracemalloc
import warnings

import numpy as np
import pytest
from joblib import parallel_config
from sklearn.exceptions import ConvergenceWarning

from sklearn_cogaps import CoGAPS, FitInterruptedWarning, default_uncertainty
from sklearn_cogaps._utils._diagnostics import ess_bulk, ess_tail, rhat, rhat_threshold
from sklearn_cogaps.datasets import make_patterns


def _ar1(rng, n_chains, n_draws, phi, shift=0.0):
    x = np.zeros((n_chains, n_draws))
    e = rng.normal(size=(n_chains, n_draws))
    for t in range(1, n_draws):
        x[:, t] = phi * x[:, t - 1] + e[:, t]
    return x + shift * np.arange(n_chains)[:, None]


@pytest.fixture(scope="module")
def fitted():
    X, _, _ = make_patterns(n_samples=20, n_features=40, n_components=2, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model = CoGAPS(2, max_iter=200, n_chains=3, random_state=0, n_jobs=1).fit(X)
    return X, model


def test_diagnostics_equal_arviz():
    az = pytest.importorskip("arviz")
    rng = np.random.default_rng(0)
    cases = [
        _ar1(rng, m, n, phi, shift)
        for m in (2, 4)
        for n in (4, 5, 9, 50, 101)
        for phi in (-0.9, 0.0, 0.6, 0.99)
        for shift in (0.0, 1.0)
    ]
    for x in cases:
        np.testing.assert_allclose(rhat(x), float(az.rhat(x, method="rank")), rtol=1e-10)
        np.testing.assert_allclose(ess_bulk(x), float(az.ess(x, method="bulk")), rtol=1e-10)
        np.testing.assert_allclose(ess_tail(x), float(az.ess(x, method="tail")), rtol=1e-10)
    # many quantities at once, as the fits compute them
    x = rng.normal(size=(4, 60, 3, 5)).cumsum(axis=1)
    expected = az.rhat(az.convert_to_dataset({"x": x}))["x"].values
    np.testing.assert_allclose(rhat(x), expected, rtol=1e-10)
    expected = az.ess(az.convert_to_dataset({"x": x}), method="tail")["x"].values
    np.testing.assert_allclose(ess_tail(x), expected, rtol=1e-10)
    # an amplitude left at 1e-18 in one chain and at exactly 0 in the others is not
    # constant: its draws rank apart (it was R-hat NaN and an ESS of every draw here)
    tiny = np.zeros((3, 100))
    tiny[0] = rng.uniform(0.0, 1.8e-18, 100)
    np.testing.assert_allclose(rhat(tiny), float(az.rhat(tiny, method="rank")), rtol=1e-10)
    np.testing.assert_allclose(ess_bulk(tiny), float(az.ess(tiny, method="bulk")), rtol=1e-10)
    assert rhat(tiny) > 2.0


def test_diagnostics_in_blocks_of_quantities(monkeypatch):
    """Many quantities are taken a block at a time: each gets the bits of a whole-array pass
    whatever its block, and the temporaries are those of a block (the draws of every entry
    of W and H at single-cell size are hundreds of megabytes; their ranks, normal scores and
    spectra were ten times that)."""
    from sklearn_cogaps._utils import _diagnostics

    rng = np.random.default_rng(3)
    x = rng.normal(size=(2, 60, 301)).cumsum(axis=1)
    x[:, :, 5] = 0.0  # constant
    x[x < -3] = 0.0  # ties at zero, as the atomic prior makes them
    x[0, 7, 11] = np.nan
    whole = [f(x) for f in (rhat, ess_bulk, ess_tail)]
    for block in (8, 100, 7001):
        monkeypatch.setattr(_diagnostics, "_BLOCK_DRAWS", block)
        for f, expected in zip((rhat, ess_bulk, ess_tail), whole):
            assert np.array_equal(f(x), expected, equal_nan=True)
    monkeypatch.setattr(_diagnostics, "_BLOCK_DRAWS", 1 << 16)  # blocks of 0.5 MB
    draws = rng.gamma(0.3, size=(2, 100, 20000))  # 32 MB
    tracemalloc.start()
    try:
        for f in (rhat, ess_bulk, ess_tail):
            f(draws)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 0.25 * draws.nbytes  # about 13 blocks' worth; whole-array passes took 12×


def test_diagnostics_of_a_fit_equal_arviz_on_its_draws(fitted):
    pytest.importorskip("arviz")
    import arviz as az

    _, model = fitted
    idata = model.to_inference_data()
    assert idata.posterior["loadings"].shape == (3, 100, 20, 2)
    for name in ("loadings", "components"):
        ours, theirs = model.rhat_[name], az.rhat(idata.posterior)[name].values
        assert np.array_equal(np.isnan(ours), np.isnan(theirs))  # entries kept at 0
        np.testing.assert_allclose(ours[~np.isnan(ours)], theirs[~np.isnan(theirs)], rtol=1e-10)
        theirs = az.ess(idata.posterior, method="bulk")[name].values
        np.testing.assert_allclose(model.ess_bulk_[name], theirs, rtol=1e-10)
    # the chi-square's diagnostics read every sampling iteration, not only the draws
    sampling = model.chain_objective_histories_[:, model.n_calibration_iter_ :]
    chisq = az.convert_to_dataset({"chisq": sampling})
    assert model.rhat_["chisq"] == pytest.approx(float(az.rhat(chisq)["chisq"]), rel=1e-10)
    # the groups' draws are the same states, named by their iteration
    stats = idata.sample_stats["chisq"]
    assert stats.shape == (3, 100)
    its = idata.posterior["draw"].values
    np.testing.assert_array_equal(stats["draw"], its)
    assert model.n_calibration_iter_ < its[0] and its[-1] == model.n_iter_
    assert np.all(np.diff(its) > 0)
    X, W, H = fitted[0], idata.posterior["loadings"].values, idata.posterior["components"].values
    S = default_uncertainty(X)
    for c in (0, 2):
        for d in (0, 57, 99):
            state = float(np.sum(((X - W[c, d] @ H[c, d]) / S) ** 2))
            assert stats.values[c, d] == pytest.approx(state, rel=1e-8)


def test_diagnostics_without_arviz():
    """What the diagnostics mean, on chains of known behaviour."""
    rng = np.random.default_rng(1)
    iid = rng.normal(size=(4, 2000))
    assert rhat(iid) < 1.01
    assert 0.8 * 8000 < ess_bulk(iid) < 1.2 * 8000
    assert rhat(iid + np.arange(4)[:, None]) > 1.5  # chains at different places
    drift = iid + np.linspace(0, 3, 2000)  # each chain drifts: the split halves disagree
    assert rhat(drift) > 1.1
    ar = _ar1(rng, 4, 20000, 0.9)  # integrated autocorrelation time (1 + phi) / (1 - phi) = 19
    assert ess_bulk(ar) == pytest.approx(80000 / 19, rel=0.15)
    constant = np.zeros((3, 50, 2))
    assert np.all(np.isnan(rhat(constant)))
    assert np.all(ess_bulk(constant) == 150) and np.all(ess_tail(constant) == 150)
    assert np.isnan(rhat(iid[:, :3]))  # fewer than 4 draws: no estimate
    with pytest.raises(ValueError, match=r"draws\[None\]"):
        rhat(np.arange(10.0))


def test_pooled_posterior_and_attributes(fitted):
    X, model = fitted
    np.testing.assert_allclose(model.loadings_, model.chain_loadings_.mean(axis=0))
    np.testing.assert_allclose(model.components_, model.chain_components_.mean(axis=0))
    # the pooled standard deviation is that of all the chains' draws together: at least the
    # spread of the chain means
    spread = model.chain_loadings_.std(axis=0)
    assert np.all(model.loadings_std_ >= spread - 1e-12)
    assert model.objective_history_.shape == (400,)
    assert model.chain_objective_histories_.shape == (3, 400)
    np.testing.assert_array_equal(model.objective_history_, model.chain_objective_histories_[0])
    assert model.n_iter_ == 400
    assert model.rhat_["loadings"].shape == (20, 2) and model.rhat_["components"].shape == (2, 40)
    assert isinstance(model.rhat_["chisq"], float)
    assert model.loadings_snapshots_.shape == (0, 20, 2)  # none asked for

    # the chains' patterns are matched to the first chain's before pooling: no other order
    # of a chain's two patterns correlates better with the first chain's
    def both(c, order):
        return np.vstack([model.chain_loadings_[c][:, order], model.chain_components_[c][order].T])

    for c in range(1, 3):
        kept = sum(np.corrcoef(both(0, [0, 1])[:, k], both(c, [0, 1])[:, k])[0, 1] for k in (0, 1))
        swapped = sum(
            np.corrcoef(both(0, [0, 1])[:, k], both(c, [1, 0])[:, k])[0, 1] for k in (0, 1)
        )
        assert kept > swapped
    assert model.transform(X).shape == (20, 2)


def test_chains_are_matched_whatever_order_their_patterns_come_in():
    from sklearn_cogaps._cogaps._chains import _aligned

    rng = np.random.default_rng(0)
    W, H = rng.gamma(1.0, size=(30, 3)), rng.gamma(1.0, size=(3, 50))
    chains = []
    for order in ([0, 1, 2], [2, 0, 1], [1, 2, 0]):
        noise = 1 + 0.05 * rng.normal(size=(30, 3))
        chains.append({
            "loadings_": W[:, order] * noise[:, order], "loadings_std_": np.ones((30, 3)),
            "components_": H[order], "components_std_": np.ones((3, 50)),
            "loadings_snapshots_": np.stack([W[:, order]] * 2),
            "components_snapshots_": np.stack([H[order]] * 2),
        })  # fmt: skip
    for chain in _aligned(chains):
        np.testing.assert_array_equal(chain["components_"], H)
        np.testing.assert_array_equal(chain["components_snapshots_"][1], H)
        np.testing.assert_array_equal(chain["loadings_snapshots_"][0], W)


def test_chains_do_not_depend_on_the_backend_or_the_workers(fitted):
    X, model = fitted
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        with parallel_config(backend="threading"):
            threads = CoGAPS(2, max_iter=200, n_chains=3, random_state=0, n_jobs=2).fit(X)
        processes = CoGAPS(2, max_iter=200, n_chains=3, random_state=0, n_jobs=2).fit(X)
    for other in (threads, processes):
        for name in ("loadings_", "components_std_", "chisq_", "chain_objective_histories_"):
            np.testing.assert_array_equal(getattr(other, name), getattr(model, name))
        assert other.rhat_["chisq"] == model.rhat_["chisq"]


def test_the_chains_do_not_repeat_the_fits_warnings():
    """Each chain is a fit of its own: its warnings about the inputs and the parameters,
    given once by the fit of all the chains, were given again by every chain (and printed
    by every worker process, whatever the caller's filters)."""
    counts = np.random.default_rng(0).poisson(5, (40, 15)).astype(float)
    model = CoGAPS(3, max_iter=10, n_chains=3, n_jobs=2, random_state=0, checkpoint_minutes=5)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with parallel_config(backend="threading"):  # the workers' warnings are caught here
            model.fit(counts)
    messages = [str(w.message) for w in caught if w.category is not ConvergenceWarning]
    assert sum("like counts" in m for m in messages) == 1
    assert sum("checkpoint_minutes=5 is used only" in m for m in messages) == 1
    assert len(messages) == 2, messages


def test_the_warning_follows_the_diagnostics():
    X, _, _ = make_patterns(n_samples=20, n_features=40, n_components=2, random_state=0)
    with pytest.warns(ConvergenceWarning, match=r"3 chains do not agree yet: R-hat"):
        model = CoGAPS(2, max_iter=100, n_chains=3, random_state=0).fit(X)
    assert not model.converged_
    # a one-pattern model mixes fast: its chi-square has converged by the diagnostics
    X1, _, _ = make_patterns(n_samples=15, n_features=30, n_components=1, random_state=0)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = CoGAPS(1, max_iter=1500, n_chains=4, random_state=0).fit(X1)
    assert model.rhat_["chisq"] < 1.01
    assert model.ess_bulk_["chisq"] > 400 and model.ess_tail_["chisq"] > 400
    messages = [str(w.message) for w in caught if issubclass(w.category, ConvergenceWarning)]
    assert all("chi-square" not in m for m in messages)


@pytest.mark.parametrize("n_chains, n_draws, n_entries", [(4, 100, 60), (2, 100, 1500)])
def test_the_entries_rhat_threshold_passes_agreeing_chains(n_chains, n_draws, n_entries):
    """Over many entries the largest R-hat of chains of independent draws from one law
    exceeds 1.01 by chance (1.02 over 60 entries of 4 chains x 100 draws); the threshold of
    that many entries and draws is exceeded by chance in about 5% of such fits."""
    rng = np.random.default_rng(0)
    threshold = rhat_threshold(n_chains, n_draws, n_entries)
    largest = np.array([np.nanmax(rhat(rng.standard_normal((n_chains, n_draws, n_entries))))
                        for _ in range(60)])  # fmt: skip
    assert np.mean(largest > 1.01) > 0.9  # the fixed threshold fails agreeing chains
    assert np.mean(largest > threshold) <= 0.15, (threshold, np.sort(largest)[-10:])
    # and still fails chains that sit apart: one chain shifted by a standard deviation
    draws = rng.standard_normal((n_chains, n_draws, n_entries))
    draws[0, :, :5] += 1.0
    assert np.nanmax(rhat(draws)) > threshold
    # one quantity with many draws: Vehtari et al.'s 1.01
    assert rhat_threshold(2, 2000) == 1.01 and rhat_threshold(4, 100) > 1.01


def test_too_few_draws_for_the_entries_say_so():
    """With 8 draws per chain over 158 entries, chains that agree reach an R-hat of 2.2 by
    chance, above what chains apart reach (about 1.5 to 1.8): the threshold cannot judge
    them, and the warning says to raise n_snapshots instead of passing every entry."""
    X, _, _ = make_patterns(n_samples=20, n_features=60, n_components=2, random_state=0)
    with pytest.warns(ConvergenceWarning, match=r"8 draws per chain cannot show .*n_snapshots"):
        model = CoGAPS(2, max_iter=3000, n_chains=2, n_snapshots=8, random_state=0).fit(X)
    assert not model.converged_
    assert rhat_threshold(2, 10, 720) > 1.15 >= rhat_threshold(2, 100, 520_000 // 5)


def test_well_mixed_chains_of_many_entries_do_not_warn():
    """A one-pattern model's 60 entries from 4 chains x 100 draws spread over the sampling:
    the fit warned that the chains did not agree (largest R-hat 1.016 to 1.028, bulk ESS
    at least 303 of 400) at every max_iter, which raising could not change."""
    X, _, _ = make_patterns(n_samples=20, n_features=40, n_components=1, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        model = CoGAPS(1, max_iter=2000, n_chains=4, random_state=0).fit(X)
    largest = max(np.nanmax(model.rhat_["loadings"]), np.nanmax(model.rhat_["components"]))
    assert 1.01 < largest <= rhat_threshold(4, 100, 60)


def test_snapshots_of_every_chain_and_what_is_refused(fitted, tmp_path):
    X, _ = fitted
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model = CoGAPS(2, max_iter=60, n_chains=2, n_snapshots=10, random_state=0).fit(X)
    assert model.loadings_snapshots_.shape == (20, 20, 2)
    np.testing.assert_array_equal(model.snapshot_chains_, np.repeat([0, 1], 10))
    for kwargs, match in [
        ({"warm_start": True}, "warm_start is for one chain"),
        ({"distributed": "genome-wide", "n_sets": 2}, "one chain per set"),
    ]:
        with pytest.raises(ValueError, match=match):
            CoGAPS(2, max_iter=20, n_chains=2, **kwargs).fit(X)
    # one chain after several: the several chains' attributes go
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model.set_params(n_chains=1).fit(X)
    assert not hasattr(model, "rhat_") and not hasattr(model, "chain_loadings_")
    with pytest.raises(ValueError, match="n_chains > 1, or with n_snapshots > 0"):
        CoGAPS(2, max_iter=20, random_state=0).fit(X).to_inference_data()


def test_chains_on_a_dask_cluster_equal_the_local_fit(fitted):
    """On a LocalCluster of worker processes, the chains are the local chains."""
    distributed = pytest.importorskip("distributed", reason="dask[distributed] is an extra")
    X, model = fitted
    with (
        distributed.LocalCluster(n_workers=2, processes=True, threads_per_worker=1,
                                 host="127.0.0.1", dashboard_address=None) as cluster,
        distributed.Client(cluster) as client,
    ):  # fmt: skip
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            with parallel_config(backend="dask"):
                on_dask = CoGAPS(2, max_iter=200, n_chains=3, random_state=0).fit(X)
        ran = client.run(lambda: "sklearn_cogaps._cogaps._chains" in __import__("sys").modules)
        assert any(ran.values()), ran  # the chains ran on the cluster's worker processes
    for name in ("loadings_", "components_", "loadings_std_", "chain_objective_histories_"):
        np.testing.assert_array_equal(getattr(on_dask, name), getattr(model, name))
    np.testing.assert_array_equal(on_dask.rhat_["components"], model.rhat_["components"])


def test_ctrl_c_stops_every_chain(monkeypatch, fitted):
    """Ctrl-C in the first chain stops the fit of all of them (KeyboardInterrupt): no chain
    had completed, so there is nothing to pool, and no chain warns of its own."""
    from _shared import interrupt_cogaps_at

    X, _ = fitted
    interrupt_cogaps_at(monkeypatch, 150)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no FitInterruptedWarning from the chain
        with pytest.raises(KeyboardInterrupt):
            CoGAPS(2, max_iter=200, n_chains=3, random_state=0, n_jobs=1).fit(X)


@pytest.mark.parametrize("completed", [1, 2])
def test_ctrl_c_keeps_the_chains_completed(monkeypatch, fitted, completed):
    """Ctrl-C in a later chain (one worker: the chains one after the other) keeps the chains
    completed before it, pooled, with their diagnostics: the same chains as in the
    uninterrupted fit, and a FitInterruptedWarning instead of the ConvergenceWarning."""
    from _shared import interrupt_cogaps_at

    X, model = fitted
    # each chain iterates 2 * max_iter times; stop the next one halfway
    interrupt_cogaps_at(monkeypatch, 400 * completed + 150)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        kept = CoGAPS(2, max_iter=200, n_chains=3, random_state=0, n_jobs=1).fit(X)
    categories = {w.category for w in caught}
    assert FitInterruptedWarning in categories and ConvergenceWarning not in categories
    message = next(str(w.message) for w in caught if w.category is FitInterruptedWarning)
    assert f"pools the {completed} of 3 chains completed" in message
    assert not kept.converged_ and kept.n_iter_ == 400
    for name in ("chain_objective_histories_", "chain_loadings_", "chain_components_"):
        np.testing.assert_array_equal(getattr(kept, name), getattr(model, name)[:completed])
    np.testing.assert_allclose(kept.loadings_, model.chain_loadings_[:completed].mean(axis=0))
    assert kept._draws["chisq"].shape == (completed, 200)
    assert np.isfinite(kept.rhat_["chisq"])
    assert kept.transform(X).shape == (20, 2)


def test_fixed_matrix_and_calibration_snapshots_with_several_chains(fitted):
    X, _ = fitted
    H = np.abs(np.random.default_rng(0).normal(size=(2, 40)))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model = CoGAPS(2, max_iter=60, n_chains=3, random_state=0).fit(X, fixed_components=H)
    np.testing.assert_array_equal(model.components_, H)
    assert not model.components_std_.any()
    with pytest.raises(ValueError, match="snapshot_phase must be 'sampling'"):
        CoGAPS(2, max_iter=20, n_chains=2, n_snapshots=5, snapshot_phase="all").fit(X)


def test_chains_in_different_modes_are_not_averaged_quietly():
    """GIST with R's uncertainty: the chains settle in different modes, and the mean of
    their means fits worse than each; the warning says so and which means to use."""
    from sklearn_cogaps.datasets import load_gist

    gist = load_gist()
    model = CoGAPS(3, max_iter=100, n_chains=4, random_state=0)
    with pytest.warns(ConvergenceWarning, match="different modes"):
        model.fit(gist.data, uncertainty=gist.r_uncertainty)
    assert model.chisq_ > 1.1 * model._chain_chisq.max()


def test_diagnostics_in_one_pass_equal_each_function():
    from sklearn_cogaps._utils._diagnostics import diagnostics

    rng = np.random.default_rng(5)
    x = rng.normal(size=(3, 41, 60)).cumsum(axis=1)
    x[x < -2] = 0.0
    x[:, :, 3] = 1.0
    r, bulk, tail = diagnostics(x)
    assert np.array_equal(r, rhat(x), equal_nan=True)
    assert np.array_equal(bulk, ess_bulk(x)) and np.array_equal(tail, ess_tail(x))
    assert all(np.array_equal(a, b, equal_nan=True)
               for a, b in zip(diagnostics(x, tail=False), (r, bulk)))  # fmt: skip


def test_ctrl_c_during_the_final_diagnostics_keeps_the_chains(monkeypatch):
    """The chains are complete when their diagnostics run (tens of seconds at single-cell
    size): Ctrl-C there keeps the pooled fit, with the diagnostics unknown, where it lost
    every chain."""
    from sklearn_cogaps._cogaps import _chains

    X, _, _ = make_patterns(n_samples=15, n_features=30, n_components=2, random_state=0)
    params = dict(max_iter=60, n_chains=2, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        reference = CoGAPS(2, **params).fit(X)

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(_chains, "diagnostics", interrupted)
    with pytest.warns(FitInterruptedWarning, match="were not computed"):
        kept = CoGAPS(2, **params).fit(X)
    np.testing.assert_array_equal(kept.loadings_, reference.loadings_)
    np.testing.assert_array_equal(kept.components_, reference.components_)
    assert not kept.converged_
    assert np.isnan(kept.rhat_["chisq"]) and np.isnan(kept.ess_bulk_["loadings"]).all()
    assert kept.rhat_["components"].shape == reference.rhat_["components"].shape
