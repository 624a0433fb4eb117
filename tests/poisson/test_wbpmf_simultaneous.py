"""WeightedBackgroundPMF(solver="simultaneous"): every topic updated from one q(Z) per
iteration. The iteration is checked against the same updates written with the sequential
solver's own sweeps and against dense sums; the bound still never falls; the bits do not
depend on the threads or on how the counts are stored; the fit reaches the sequential
solver's neighbourhood."""

import warnings

import numpy as np
import pytest
from scipy import sparse
from sklearn.exceptions import ConvergenceWarning
from threadpoolctl import threadpool_limits

from sklearn_cogaps import WeightedBackgroundPMF, match_components
from sklearn_cogaps._poisson import _wbpmf, _wbpmf_updates
from sklearn_cogaps._poisson._hpmf_updates import _Counts
from sklearn_cogaps._utils import _openmp_helpers
from sklearn_cogaps.datasets import make_background_counts

FAMILIES = ["gamma_mixture", "gamma", "point_gamma", "exponential_mixture"]
FITTED = ("w_", "l0_", "f0_", "loadings_", "loadings_mean_log_", "components_",
          "components_mean_", "kl_loadings_", "kl_components_", "objective_history_")  # fmt: skip


@pytest.fixture(scope="module")
def data():
    return make_background_counts(200, 150, 3, weight=0.1, random_state=0)[0]


def _fit(X, **kw):
    kw = dict(dict(n_components=3, random_state=0, tol=0.0, solver="simultaneous"), **kw)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return WeightedBackgroundPMF(**kw).fit(X)


def _state(X, K, seed, families=("gamma_mixture", "point_gamma")):
    """A state of the fit after three sequential iterations from its start."""
    rng = np.random.default_rng(seed)
    L, F = rng.gamma(1.0, 1.0, (X.shape[0], K)), rng.gamma(1.0, 1.0, (X.shape[1], K))
    state = _wbpmf_updates.FitState.start(L, F, *families)
    sweeper = _wbpmf_updates._Sweeper(X, 1)
    x_rows, x_cols = np.asarray(X.sum(axis=1)).ravel(), np.asarray(X.sum(axis=0)).ravel()
    for _ in range(3):
        _wbpmf_updates.iterate(state, sweeper, x_rows, x_cols, 0.0, *families)
    return state, sweeper, x_rows, x_cols


def _reference_iteration(state, sweeper, x_rows, x_cols):
    """The block update written with the sequential solver's sweeps: the denominators of
    the iteration's start, every topic's expected counts from them alone."""
    s_ = state
    K = s_.w.size
    rows, cols = _wbpmf_updates._exponentials(s_)
    D = sweeper.denominators(rows, cols)
    counts = [sweeper.topic_counts(rows, cols, D, k) for k in range(K)]
    s_.y_cols = np.empty_like(s_.Ef)
    for k in range(K):
        _wbpmf_updates._update_topic(s_, k, *counts[k], "gamma_mixture", "point_gamma")
    _wbpmf_updates._update_background(s_, x_rows, x_cols)
    value = _wbpmf_updates.elbo(sweeper, x_rows, x_cols, 0.0, s_.w, s_.l0, s_.f0, s_.El,
                                s_.Ef, s_.Elogl, s_.Elogf)  # fmt: skip
    return value - (s_.kl_L.sum() + s_.kl_F.sum()), counts


def test_an_iteration_is_the_block_update_of_the_sequential_sweeps():
    """Same expected counts as the sequential solver's sweeps and as dense sums of x_ij
    phi_ijk (to round-off: other orders of summation), the same updates after them, and a
    bound equal to the one the sequential sweeps evaluate."""
    X = sparse.random(120, 50, density=0.3, random_state=1, format="csr")
    X.data = np.ceil(8 * X.data)
    K = 4
    state, sweeper, x_rows, x_cols = _state(X, K, 0)
    ref_state, _, _, _ = _state(X, K, 0)
    # dense expected counts of every topic from the state's responsibilities
    lu, lv = _wbpmf_updates._topic_logs(state)
    logits = lu[:, None, :] + lv[None, :, :]
    phi = np.exp(logits - logits.max(axis=2, keepdims=True))
    phi /= phi.sum(axis=2, keepdims=True)
    xphi = X.toarray()[:, :, None] * phi
    value, ahead = _wbpmf_updates.iterate_simultaneous(
        state, _Counts(X), None, x_rows, x_cols, 0.0, "gamma_mixture", "point_gamma", 2
    )
    ref_value, counts = _reference_iteration(ref_state, sweeper, x_rows, x_cols)
    for k in range(K):
        np.testing.assert_allclose(counts[k][0], xphi[:, :, k].sum(axis=1), rtol=1e-12)
        np.testing.assert_allclose(counts[k][1], xphi[:, :, k].sum(axis=0), rtol=1e-12)
    np.testing.assert_allclose(state.y_cols, ref_state.y_cols, rtol=1e-12)
    # the point-gamma solver stops at its tolerance: round-off in its input moves its
    # answer by a few 1e-9
    for name in ("w", "l0", "f0", "El", "Ef", "Elogl", "Elogf", "kl_L", "kl_F"):
        np.testing.assert_allclose(getattr(state, name), getattr(ref_state, name),
                                   rtol=1e-7, atol=1e-9, err_msg=name)  # fmt: skip
    np.testing.assert_allclose(value, ref_value, rtol=1e-10)
    # what it reads ahead: the next iteration's rows' expected counts from the new factors
    lu, lv = _wbpmf_updates._topic_logs(state)
    np.testing.assert_array_equal(ahead[0], lu)
    rows, cols = _wbpmf_updates._exponentials(state)
    D = sweeper.denominators(rows, cols)
    for k in range(K):
        np.testing.assert_allclose(ahead[2][:, k], sweeper.topic_counts(rows, cols, D, k)[0],
                                   rtol=1e-12)  # fmt: skip


@pytest.mark.parametrize("prior", ["gamma_mixture", "point_gamma"])
def test_topics_solved_at_once_give_the_bits_of_one_after_the_other(prior):
    """The topics' EBPM solves on a pool of threads: the state of one at a time, to the
    bit, whatever the pool's size (each solve reads its own topic only; the stores are in
    order)."""
    X = sparse.random(150, 60, density=0.3, random_state=3, format="csr")
    X.data = np.ceil(8 * X.data)
    x_rows, x_cols = np.asarray(X.sum(axis=1)).ravel(), np.asarray(X.sum(axis=0)).ravel()
    out = []
    for solve_threads in (1, 2, 5):
        state, _, _, _ = _state(X, 5, 2, (prior, prior))
        ahead = None
        for _ in range(3):
            value, ahead = _wbpmf_updates.iterate_simultaneous(
                state, _Counts(X), ahead, x_rows, x_cols, 0.0, prior, prior, 1, solve_threads
            )
        out.append((value, state))
    for value, state in out[1:]:
        assert value == out[0][0]
        for name in ("w", "l0", "f0", "El", "Ef", "Elogl", "Elogf", "kl_L", "kl_F", "y_cols"):
            np.testing.assert_array_equal(getattr(state, name), getattr(out[0][1], name))


def test_the_pools_workers_take_the_callers_thread_share_and_numpy_settings(monkeypatch):
    """A thread the pool starts has OpenMP's and numpy's defaults: each worker limits its
    kernels to its share of the caller's threads and solves under the caller's
    ``np.errstate``."""
    import threading

    X = sparse.random(120, 50, density=0.3, random_state=1, format="csr")
    X.data = np.ceil(8 * X.data)
    x_rows, x_cols = np.asarray(X.sum(axis=1)).ravel(), np.asarray(X.sum(axis=0)).ravel()
    seen = []
    solution = _wbpmf_updates._topic_solution

    def recording(*args):
        seen.append((threading.current_thread() is threading.main_thread(),
                     _openmp_helpers.effective_n_threads(), np.geterr()["over"]))  # fmt: skip
        return solution(*args)

    monkeypatch.setattr(_wbpmf_updates, "_topic_solution", recording)
    state, _, _, _ = _state(X, 4, 0)
    with np.errstate(over="raise"):
        _wbpmf_updates.iterate_simultaneous(
            state, _Counts(X), None, x_rows, x_cols, 0.0, "gamma_mixture", "point_gamma", 2, 2
        )
    assert len(seen) == 4
    assert not any(main for main, _, _ in seen)  # every topic on the pool
    assert all(n == 1 for _, n, _ in seen)  # a share of 2 // 2 threads each
    assert all(over == "raise" for _, _, over in seen)


def test_the_pool_is_for_large_counts_with_the_mixture_priors():
    """Solves of small counts, or of the gamma families (mostly Python), run one at a
    time: a pool cost more than it saved there."""
    small = _wbpmf._Problem(sparse.random(200, 150, density=0.1, format="csr"), None, None,
                            2, ("gamma_mixture", "gamma_mixture"))  # fmt: skip
    assert small.solve_threads(10) == 1
    big = sparse.random(8000, 4000, density=1e-4, format="csr", random_state=0)
    for families, expected in [(("gamma_mixture", "exponential_mixture"), 2),
                               (("point_gamma", "gamma_mixture"), 1),
                               (("gamma", "gamma"), 1)]:  # fmt: skip
        assert _wbpmf._Problem(big, None, None, 2, families).solve_threads(10) == expected
    assert _wbpmf._Problem(big, None, None, 2, ("gamma_mixture",) * 2).solve_threads(1) == 1


@pytest.mark.parametrize("family", FAMILIES)
def test_the_bound_never_falls(data, family):
    model = _fit(data, prior_loadings=family, prior_components=family, max_iter=25)
    elbo = model.objective_history_
    assert np.all(np.isfinite(elbo))
    assert np.all(np.diff(elbo) >= -1e-9 * np.abs(elbo[1:]))
    assert np.all(model.kl_loadings_ >= -1e-6) and np.all(model.kl_components_ >= -1e-6)


def test_same_bits_for_any_number_of_threads_and_with_or_without_reading_ahead(data, monkeypatch):
    monkeypatch.setattr(_openmp_helpers, "MIN_WORK_PER_THREAD", 1)  # every thread, even here
    with threadpool_limits(1, user_api="openmp"):
        one = _fit(data, max_iter=6)
    two = _fit(data, max_iter=6)
    # the bound's pass takes a logarithm per entry: its expected counts are those of a pass
    # without, to the bit, so the iterations that make theirs anew give the same fit
    original = _wbpmf_updates.iterate_simultaneous

    def forgetful(state, counts, ahead, *args):
        return original(state, counts, None, *args)

    monkeypatch.setattr(_wbpmf, "iterate_simultaneous", forgetful)
    anew = _fit(data, max_iter=6)
    for name in FITTED:
        np.testing.assert_array_equal(getattr(one, name), getattr(two, name), err_msg=name)
        np.testing.assert_array_equal(getattr(one, name), getattr(anew, name), err_msg=name)
    np.testing.assert_array_equal(one.transform(data), two.transform(data))


def test_dense_sparse_and_out_of_core_counts_give_the_same_bits(data):
    ref = _fit(data, max_iter=5)
    for X in (data.toarray(), data.tocsc()):
        est = _fit(X, max_iter=5)
        for name in FITTED:
            np.testing.assert_array_equal(getattr(est, name), getattr(ref, name), err_msg=name)
    da = pytest.importorskip("dask.array", reason="dask is an optional extra")
    for rows in (200, 37):
        est = _fit(da.from_array(data.toarray(), chunks=(rows, -1)), max_iter=5)
        for name in FITTED:
            np.testing.assert_array_equal(getattr(est, name), getattr(ref, name), err_msg=name)


def test_counts_read_by_blocks_or_on_a_cluster_make_no_sweeps(data, monkeypatch):
    """The simultaneous solver's passes are the counts' own, in memory, by blocks and on
    a LocalCluster of worker processes: no sweeper and its denominators (their parts
    would hold the counts a further time on a cluster), the in-memory fit to the bit."""
    da = pytest.importorskip("dask.array", reason="dask is an optional extra")
    pytest.importorskip("distributed", reason="dask.distributed is an optional extra")
    from _shared import local_cluster

    ref = _fit(data, max_iter=4)

    def refused(*args, **kwargs):
        raise AssertionError("a sweeper was made")

    monkeypatch.setattr(_wbpmf, "BlockSweeper", refused)
    X = da.from_array(data.toarray(), chunks=(47, -1))
    est = _fit(X, max_iter=4)
    with local_cluster(2):
        on_cluster = _fit(X, max_iter=4)
    for name in FITTED:
        np.testing.assert_array_equal(getattr(est, name), getattr(ref, name), err_msg=name)
        np.testing.assert_array_equal(getattr(on_cluster, name), getattr(ref, name),
                                      err_msg=name)  # fmt: skip


def test_it_reaches_the_sequential_solvers_neighbourhood():
    """Both solvers from the same start, run to a fixed point: bounds within 1e-4 of each
    other, the same topics."""
    X, L, F, l0, f0 = make_background_counts(200, 150, 3, weight=0.2, baseline=0.05,
                                              frac_samples=0.2, frac_features=0.2,
                                              random_state=1)  # fmt: skip
    a = _fit(X, max_iter=300, tol=1e-9, solver="sequential")
    b = _fit(X, max_iter=300, tol=1e-9)
    assert abs(a.lower_bound_ - b.lower_bound_) <= 1e-4 * abs(a.lower_bound_)
    _, corr = match_components(a.components_.T, b.components_.T)
    assert np.all(corr > 0.99), corr
    _, corr = match_components(f0[:, None] * F, b.components_.T)
    assert np.all(corr > 0.9), corr


def _near_flags(monkeypatch):
    """Record whether each iteration of the fits that follow is screened."""
    flags = []
    original = _wbpmf_updates.iterate_simultaneous

    def recording(*args):
        flags.append(args[-1])
        return original(*args)

    monkeypatch.setattr(_wbpmf, "iterate_simultaneous", recording)
    return flags


def test_screened_iterations_between_iterations_over_the_whole_grid(data, monkeypatch):
    """With a grid prior the first iteration is over the whole grid, then at most
    _SCREENED_RUN screened ones between two over it, and the fit stops only after one
    over it; without a grid prior no iteration is screened."""
    flags = _near_flags(monkeypatch)
    model = _fit(data, max_iter=500, tol=3e-6)
    assert model.converged_ and len(flags) == model.n_iter_ > 2 * _wbpmf._SCREENED_RUN
    assert not flags[0] and not flags[-1] and sum(flags) > len(flags) // 2
    runs = "".join("s" if f else "." for f in flags).split(".")
    assert max(len(r) for r in runs) == _wbpmf._SCREENED_RUN
    del flags[:]
    _fit(data, max_iter=15, prior_loadings="point_gamma", prior_components="gamma")
    assert flags == [False] * 15
    monkeypatch.setattr(_wbpmf, "_SCREENED_RUN", None)
    del flags[:]
    _fit(data, max_iter=15)
    assert flags == [False] * 15


@pytest.mark.parametrize("family", ["gamma_mixture", "exponential_mixture"])
def test_screened_and_whole_grid_fits_reach_the_same_fixed_point(monkeypatch, family):
    """Run to a fixed point with and without the screened iterations: bounds within 1e-5
    of each other, the same topics."""
    X = make_background_counts(200, 150, 3, weight=0.2, baseline=0.05, frac_samples=0.2,
                               frac_features=0.2, random_state=1)[0]  # fmt: skip
    kw = dict(max_iter=400, tol=1e-9, prior_loadings=family, prior_components=family)
    screened = _fit(X, **kw)
    monkeypatch.setattr(_wbpmf, "_SCREENED_RUN", None)
    whole = _fit(X, **kw)
    assert abs(screened.lower_bound_ - whole.lower_bound_) <= 1e-5 * abs(whole.lower_bound_)
    _, corr = match_components(screened.components_.T, whole.components_.T)
    assert np.all(corr > 0.999), corr


def test_warm_start_and_several_starts(data):
    """A warm continuation and n_init read nothing ahead from another run."""
    full = _fit(data, max_iter=8)
    part = _fit(data, max_iter=4)
    first = part.lower_bound_
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        part.set_params(warm_start=True).fit(data)
    history = part.objective_history_
    assert history[0] >= first and np.all(np.diff(history) >= 0)
    np.testing.assert_allclose(part.lower_bound_, full.lower_bound_, rtol=1e-5)
    best = _fit(data, max_iter=4, n_init=2)
    assert best.lower_bound_ >= _fit(data, max_iter=4).lower_bound_


def _bits(model):
    return [getattr(model, name).tobytes() for name in FITTED]


@pytest.mark.parametrize("dense", [False, True], ids=["csr", "dense"])
def test_auto_takes_the_simultaneous_solver_and_the_short_start_on_large_counts(
    data, monkeypatch, dense
):
    """solver="auto" is the simultaneous solver from _LARGE_NNZ stored counts with both
    priors mixtures, the sequential one below it or with a gamma family; init="nmf" starts
    from _N_INIT_NMF_LARGE KL-NMF iterations from the same size, whatever the solver."""
    X = data.toarray() if dense else data
    stored = np.count_nonzero(data.toarray())
    kw = dict(max_iter=4)
    monkeypatch.setattr(_wbpmf, "_LARGE_NNZ", stored + 1)  # small counts
    small = _fit(X, solver="auto", **kw)
    assert _bits(small) == _bits(_fit(X, solver="sequential", **kw))
    monkeypatch.setattr(_wbpmf, "_LARGE_NNZ", stored)  # large counts
    large = _fit(X, solver="auto", **kw)
    assert _bits(large) == _bits(_fit(X, solver="simultaneous", **kw))
    assert _bits(large) != _bits(small)
    assert (small.solver_, large.solver_) == ("sequential", "simultaneous")
    families = dict(prior_loadings="gamma_mixture", prior_components="gamma")
    assert _bits(_fit(X, solver="auto", **families, **kw)) == _bits(
        _fit(X, solver="sequential", **families, **kw)
    )
    # the short start is the simultaneous solver's on large counts: the sequential solver
    # keeps R's 50 KL-NMF iterations whatever the size
    assert _bits(_fit(X, solver="sequential", **kw)) == _bits(small)
    monkeypatch.setattr(_wbpmf, "_LARGE_NNZ", stored + 1)
    monkeypatch.setattr(_wbpmf, "_N_INIT_NMF", _wbpmf._N_INIT_NMF_LARGE)
    assert _bits(_fit(X, solver="simultaneous", **kw)) == _bits(large)
