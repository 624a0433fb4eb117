"""WeightedBackgroundPMF: ELBO, invariances, recovery, parity with the R implementation."""

import pickle
import warnings
from pathlib import Path

import numpy as np
import pytest
from numpy.testing import assert_array_equal
from scipy import io, sparse
from scipy.special import gammaln, xlogy
from sklearn.exceptions import ConvergenceWarning
from threadpoolctl import threadpool_limits

from sklearn_cogaps import FitInterruptedWarning, WeightedBackgroundPMF, match_components
from sklearn_cogaps._poisson import _wbpmf, _wbpmf_updates
from sklearn_cogaps._poisson._ebpm import _expected_loglik_rows, _posterior_rows
from sklearn_cogaps._poisson._wbpmf_fast import row_expected_counts
from sklearn_cogaps._utils import _openmp_helpers
from sklearn_cogaps.datasets import make_background_counts

# the R ebpmf run (its files gzipped; README.md there says how it was made)
FIXTURE = Path(__file__).parent / "data" / "ebpmf_wbg"
FAMILIES = ["gamma_mixture", "gamma", "point_gamma", "exponential_mixture"]


@pytest.fixture(scope="module")
def data():
    return make_background_counts(200, 150, 3, weight=0.1, random_state=0)


def _fit(X, **kw):
    kw.setdefault("n_components", 3)
    kw.setdefault("random_state", 0)
    kw.setdefault("tol", 0.0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return WeightedBackgroundPMF(**kw).fit(X)


@pytest.mark.parametrize("family", FAMILIES)
def test_elbo_never_decreases(data, family):
    X = data[0]
    model = _fit(X, prior_loadings=family, prior_components=family, max_iter=25)
    elbo = model.objective_history_
    assert np.all(np.isfinite(elbo))
    assert np.all(np.diff(elbo) >= -1e-9 * np.abs(elbo[1:]))
    assert model.lower_bound_ == elbo[-1]
    assert np.all(model.kl_loadings_ >= -1e-6) and np.all(model.kl_components_ >= -1e-6)


def test_topics_are_recovered():
    """Sparse topics are recovered on the data scale.

    Only the products l0_i l_ik and f0_j f_jk are identified (a row's scale can move
    between l0_i and its loadings), so the comparison is on that scale.
    """
    X, L, F, l0, f0 = make_background_counts(
        200,
        150,
        3,
        weight=0.2,
        baseline=0.05,
        frac_samples=0.2,
        frac_features=0.2,
        random_state=1,
    )
    model = _fit(X, max_iter=60)
    _, corr_f = match_components(f0[:, None] * F, model.components_.T)
    _, corr_l = match_components(l0[:, None] * L, model.transform(X))
    assert np.all(corr_f > 0.9), corr_f
    assert np.all(corr_l > 0.9), corr_l
    # The topics are not the background: each matched topic loads on its own features.
    order, _ = match_components(F, model.components_.T)
    top = np.argsort(-model.components_[order], axis=1)[:, :10]
    for k in range(3):
        assert np.mean(F[top[k], k] > 1.0) >= 0.9


def test_dense_and_sparse_agree(data):
    X = data[0]
    rng = np.random.RandomState(0)
    W = rng.uniform(0.1, 1.0, (X.shape[0], 3))
    H = rng.uniform(0.1, 1.0, (3, X.shape[1]))
    kw = dict(n_components=3, init="custom", max_iter=8, tol=0.0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        a = WeightedBackgroundPMF(**kw).fit(X, W=W, H=H)
        b = WeightedBackgroundPMF(**kw).fit(X.toarray(), W=W, H=H)
        c = WeightedBackgroundPMF(**kw).fit(X.tocsc(), W=W, H=H)
    np.testing.assert_array_equal(a.objective_history_, b.objective_history_)
    np.testing.assert_array_equal(a.components_, b.components_)
    np.testing.assert_array_equal(a.components_, c.components_)
    np.testing.assert_allclose(a.transform(X), b.transform(X.toarray()), rtol=1e-12)


def test_same_result_for_any_number_of_threads(data, monkeypatch):
    monkeypatch.setattr(_openmp_helpers, "MIN_WORK_PER_THREAD", 1)  # every thread, even here
    X = data[0]
    with threadpool_limits(1, user_api="openmp"):
        one = _fit(X, max_iter=6)
        t1 = one.transform(X)
    two = _fit(X, max_iter=6)
    np.testing.assert_array_equal(one.objective_history_, two.objective_history_)
    np.testing.assert_array_equal(one.components_, two.components_)
    np.testing.assert_array_equal(one.loadings_mean_log_, two.loadings_mean_log_)
    np.testing.assert_array_equal(t1, two.transform(X))


def test_same_seed_same_result(data):
    X = data[0]
    a, b = _fit(X, max_iter=5), _fit(X, max_iter=5)
    np.testing.assert_array_equal(a.components_, b.components_)


def test_elbo_is_the_r_elbo_at_the_r_solution():
    """Our ELBO evaluated at the R run's final parameters equals the R run's final ELBO."""
    X = io.mmread(FIXTURE / "X.mtx.gz").tocsr().astype(np.float64)
    ld = lambda name: np.loadtxt(FIXTURE / f"{name}.gz", delimiter=",")  # noqa: E731
    w, l0, f0 = ld("w.csv"), ld("l0.csv"), ld("f0.csv")
    El, Ef, Elogl, Elogf = ld("El.csv"), ld("Ef.csv"), ld("Elogl.csv"), ld("Elogf.csv")
    kl = ld("kl_per_k.csv")
    sweeper = _wbpmf_updates._Sweeper(X, 1)
    x_rows = np.asarray(X.sum(axis=1)).ravel()
    x_cols = np.asarray(X.sum(axis=0)).ravel()
    const = np.sum(gammaln(X.data + 1.0))
    elbo = (
        _wbpmf_updates.elbo(sweeper, x_rows, x_cols, const, w, l0, f0, El, Ef, Elogl, Elogf)
        - kl.sum()
    )
    r_trace = np.loadtxt(FIXTURE / "trace_elbo_kl.csv.gz", delimiter=",")
    assert elbo == pytest.approx(r_trace[-1, 1], rel=1e-10)


def test_parity_with_r_ebpmf_wbg():
    """From the R run's initial factors, 100 iterations reach at least R's final ELBO - 0.01%."""
    X = io.mmread(FIXTURE / "X.mtx.gz").tocsr().astype(np.float64)
    W = np.loadtxt(FIXTURE / "init_L.csv.gz", delimiter=",")
    H = np.loadtxt(FIXTURE / "init_F.csv.gz", delimiter=",").T
    grid = np.loadtxt(FIXTURE / "prior_grid_shape_eq_rate.csv.gz")
    np.testing.assert_array_equal(grid, _wbpmf_updates.DEFAULT_GAMMA_GRID)
    r_trace = np.loadtxt(FIXTURE / "trace_elbo_kl.csv.gz", delimiter=",")
    r_final = r_trace[-1, 1]
    model = WeightedBackgroundPMF(5, init="custom", solver="sequential", max_iter=100, tol=0.0)
    model.fit(X, W=W, H=H)
    assert model.n_iter_ == 100
    assert model.lower_bound_ >= r_final - 1e-4 * abs(r_final)
    assert np.all(np.diff(model.objective_history_) >= -1e-9 * abs(r_final))
    # The first iteration starts from the same state: the ELBOs are close.
    assert model.objective_history_[0] == pytest.approx(r_trace[0, 1], rel=1e-3)


def test_transform_is_row_separable_and_fits_training_rows(data):
    X = data[0]
    model = _fit(X, max_iter=30)
    T = model.transform(X)
    assert T.shape == (X.shape[0], 3) and np.all(T >= 0)
    # Rows are independent: a subset, reordered, gives the same rows.
    idx = np.arange(X.shape[0])[::-3]
    np.testing.assert_allclose(model.transform(X[idx]), T[idx], rtol=1e-12, atol=0)
    # Close to the fitted training loadings.
    train = model.l0_[:, None] * model.loadings_mean_
    for k in range(3):
        assert np.corrcoef(T[:, k], train[:, k])[0, 1] > 0.95
    # X ~ transform(X) @ components_: row and column sums match those of X.
    mean = T @ model.components_
    np.testing.assert_allclose(mean.sum(axis=1), np.asarray(X.sum(axis=1)).ravel(), rtol=1e-6)


def test_score_prefers_model_data(data):
    X = data[0]
    model = _fit(X, max_iter=30)
    rng = np.random.RandomState(1)
    shuffled = X.toarray()
    for j in range(shuffled.shape[1]):
        rng.shuffle(shuffled[:, j])  # keeps each column's counts, breaks the topics
    s_train = model.score(X)
    assert np.isfinite(s_train)
    assert s_train > model.score(shuffled)


def test_float32_pickle_and_read_only(data):
    X = data[0]
    model = _fit(X, max_iter=5)
    X32 = X.astype(np.float32)
    np.testing.assert_allclose(model.transform(X32), model.transform(X), rtol=1e-6)
    clone = pickle.loads(pickle.dumps(model))
    np.testing.assert_array_equal(clone.transform(X), model.transform(X))
    Xd = X.toarray()
    Xd.setflags(write=False)
    np.testing.assert_allclose(model.transform(Xd), model.transform(X))


def test_convergence_warning_and_tol_stop(data):
    X = data[0]
    with pytest.warns(ConvergenceWarning, match="max_iter=2"):
        WeightedBackgroundPMF(3, max_iter=2, random_state=0).fit(X)
    model = WeightedBackgroundPMF(3, max_iter=500, tol=1e-3, random_state=0).fit(X)
    assert 2 <= model.n_iter_ < 500
    gain = np.diff(model.objective_history_[-2:])[0]
    assert gain <= 1e-3 * abs(model.objective_history_[-2])


def test_errors(data):
    X = data[0]
    with pytest.raises(ValueError, match="init='custom' needs"):
        WeightedBackgroundPMF(3, init="custom").fit(X)
    with pytest.raises(ValueError, match=r"W must have shape"):
        WeightedBackgroundPMF(3, init="custom").fit(X, W=np.ones((5, 3)), H=np.ones((3, 150)))
    with pytest.raises(ValueError, match=r"H must have shape"):
        WeightedBackgroundPMF(3, init="custom").fit(X, W=np.ones((200, 3)), H=np.ones((2, 150)))
    with pytest.raises(ValueError, match="non-negative"):
        WeightedBackgroundPMF(3, init="custom").fit(X, W=-np.ones((200, 3)), H=np.ones((3, 150)))
    with pytest.raises(ValueError, match=r"W must be dense.*W.toarray\(\)"):
        WeightedBackgroundPMF(3, init="custom").fit(
            X, W=sparse.csr_matrix(np.ones((200, 3))), H=np.ones((3, 150))
        )
    with pytest.raises(ValueError, match="only with init='custom'"):
        WeightedBackgroundPMF(3).fit(X, W=np.ones((200, 3)), H=np.ones((3, 150)))
    pd = pytest.importorskip("pandas")
    genes = [f"g{j}" for j in range(X.shape[1])]
    frame = pd.DataFrame(X.toarray() if sparse.issparse(X) else X, columns=genes)
    H = pd.DataFrame(np.ones((3, 150)), columns=genes[::-1])  # the genes in another order
    with pytest.raises(ValueError, match=r"column labels of 'H'.*H.loc\[:, X.columns\]"):
        WeightedBackgroundPMF(3, init="custom").fit(frame, W=np.ones((200, 3)), H=H)
    with pytest.raises(ValueError, match="no positive entry"):
        WeightedBackgroundPMF(3).fit(sparse.csr_matrix((10, 5)))
    with pytest.raises(ValueError, match="prior_loadings"):
        WeightedBackgroundPMF(3, prior_loadings="normal").fit(X)


# ------------------------------------------------------------------- transform's row fit
@pytest.fixture(scope="module")
def multimodal():
    """Counts on which transform's row fit has several local optima under the default priors."""
    rng = np.random.default_rng(1)
    X = rng.poisson(rng.gamma(1, 1, (40, 3)) @ rng.gamma(1, 1, (3, 25)) * 2).astype(float)
    return X, _fit(X, max_iter=200, tol=1e-10)


def _row_elbos(model, X, l0, El, Elogl, kl):
    """Each row's ELBO as score sums it (without log X!), at a state of transform's rows."""
    X = sparse.csr_matrix(X)
    rows, _ = _wbpmf_updates.elbo_rows(
        _wbpmf_updates._Sweeper(X, 1),
        np.asarray(X.sum(axis=1)).ravel(),
        np.asarray(X.sum(axis=0)).ravel(),
        model.w_,
        l0,
        model.f0_,
        El,
        np.ascontiguousarray(model.components_mean_.T),
        Elogl,
        np.ascontiguousarray(model.components_mean_log_.T),
    )
    return rows - kl.sum(axis=1)


def _dense_expected_counts(X, lu, lv, axis=1):
    """sum_j X_ij zeta_ijk of every row and topic (``axis=1``; ``axis=0``: sum_i of every
    column), from the dense (n, p, K) array of log B_ijk."""
    log_b = lu[:, None, :] + lv[None, :, :]
    top = np.max(log_b, axis=2, keepdims=True)
    top = np.where(np.isfinite(top), top, 0.0)
    b = np.exp(log_b - top)
    total = b.sum(axis=2, keepdims=True)
    zeta = np.divide(b, total, out=np.zeros_like(b), where=total > 0)
    spec = "ij,ijk->ik" if axis == 1 else "ij,ijk->jk"
    return np.einsum(spec, np.asarray(sparse.csr_matrix(X).todense()), zeta)


def _ascent_from(model, X, El, Elogl, n_sweeps=300, return_loadings=False):
    """Each row's ELBO after coordinate ascent on its l0 and q(l) from ``El``, ``Elogl``.

    A plain re-implementation of transform's row update (no stopping rule), to find the
    local optimum that a given start leads to; every expected count is made from scratch.
    """
    X = sparse.csr_matrix(X)
    x_rows = np.asarray(X.sum(axis=1)).ravel()
    g = model.prior_loadings_
    colw = model.w_ * (model.f0_ @ np.ascontiguousarray(model.components_mean_.T))
    lv = np.ascontiguousarray(model.components_mean_log_.T)
    El, Elogl, kl = El.copy(), Elogl.copy(), np.zeros_like(El)
    for _ in range(n_sweeps):
        l0 = x_rows / (El @ colw)
        for k in range(El.shape[1]):
            y = _dense_expected_counts(X, np.log(model.w_) + Elogl, lv)[:, k]
            s = colw[k] * l0
            El[:, k], Elogl[:, k], lp = _posterior_rows(
                y, s, g["pi0"][k], g["weights"][k], g["shape"][k], g["rate"][k]
            )
            kl[:, k] = _expected_loglik_rows(y, s, El[:, k], Elogl[:, k]) - lp
    elbos = _row_elbos(model, X, x_rows / (El @ colw), El, Elogl, kl)
    return (elbos, x_rows / (El @ colw), El) if return_loadings else elbos


@pytest.mark.parametrize("start", ["ones", "switched_off", "dominant", "tiny"])
def test_compiled_row_sweeps_equal_the_plain_ascent(multimodal, start):
    """transform's compiled sweeps carry each row's denominators B_ij through a sweep by the
    one topic that changed; after the same number of sweeps they give what recomputing every
    B_ij gives. The starts reach every branch: topics switched off (E[l_ik] = 0, no term in
    B_ij), a topic holding all but 1e-12 of B_ij that then shrinks (the one-term update
    would cancel 40 bits: B_ij is recomputed), and loadings of 1e-20 whose first update
    lifts a topic about e^46 above the row's old maximum (the row is restabilised)."""
    X, model = multimodal
    n_sweeps = 40
    X = sparse.csr_matrix(X)
    El = np.ones((X.shape[0], model.n_components))
    if start == "switched_off":
        El[::2, 0] = 0.0
        El[1::3, 2] = 0.0
    elif start == "dominant":
        El[:, 0] = 1e12
    elif start == "tiny":
        El[:] = 1e-20
    with np.errstate(divide="ignore"):
        Elogl = np.log(El)
    expected, l0_ref, El_ref = _ascent_from(model, X, El, Elogl, n_sweeps, return_loadings=True)
    sweeper = _wbpmf_updates._Sweeper(X, 1)
    x_rows = np.asarray(X.sum(axis=1)).ravel()
    l0, El_c, Elogl_c, kl = model._sweep_rows(
        sweeper, x_rows, El, tol=0.0, max_iter=n_sweeps, extrapolate=False
    )
    np.testing.assert_allclose(l0[:, None] * El_c, l0_ref[:, None] * El_ref, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(_row_elbos(model, X, l0, El_c, Elogl_c, kl), expected, rtol=1e-10)


@pytest.mark.parametrize("start", ["ones", "switched_off", "ml"])
def test_extrapolated_row_sweeps_reach_the_plain_ascents_fixed_point(multimodal, start):
    """SQUAREM's extrapolated sweeps (``regress_rows``) end where thousands of plain sweeps
    end, in far fewer sweeps: each row's bound at least the plain ascent's (less round-off)
    and its loadings the same, from transform's starts (topics on, switched off, and the
    maximum-likelihood loadings). From loadings of 1e-20 they can end at another fixed
    point (doc/wbpmf.rst), which transform's search compares with the others."""
    X, model = multimodal
    X = sparse.csr_matrix(X)
    El = np.ones((X.shape[0], model.n_components))
    if start == "switched_off":
        El[::2, 0] = 0.0
    elif start == "ml":
        El = model._ml_start(_wbpmf_updates._Sweeper(X, 1))
    sweeper = _wbpmf_updates._Sweeper(X, 1)
    x_rows = np.asarray(X.sum(axis=1)).ravel()
    plain, plain_sweeps = _counted_sweeps(model, sweeper, x_rows, El, extrapolate=False)
    fast, fast_sweeps = _counted_sweeps(model, sweeper, x_rows, El)
    bound_plain = model._row_elbo(sweeper, x_rows, *plain)
    bound_fast = model._row_elbo(sweeper, x_rows, *fast)
    assert np.all(bound_fast >= bound_plain - 1e-9 * np.abs(bound_plain))
    np.testing.assert_allclose(
        fast[0][:, None] * fast[1], plain[0][:, None] * plain[1], rtol=1e-6, atol=1e-9
    )
    assert np.all(plain_sweeps < 20000)
    assert np.mean(fast_sweeps) < 0.5 * np.mean(plain_sweeps)


def _counted_sweeps(model, sweeper, x_rows, El, **kwargs):
    """The rows' fit to a relative change of 1e-13, and the number of sweeps of each row."""
    counts = {}
    original = _wbpmf.regress_rows

    def counted(*args):
        counts["n"] = original(*args)
        return counts["n"]

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(_wbpmf, "regress_rows", counted)
        fit = model._sweep_rows(sweeper, x_rows, El, tol=1e-13, max_iter=20000, **kwargs)
    return fit, counts["n"]


def test_row_expected_counts_equal_the_dense_sums(multimodal):
    X, model = multimodal
    X = sparse.csr_matrix(X)
    sweeper = _wbpmf_updates._Sweeper(X, 1)
    rng = np.random.default_rng(0)
    logl = np.log(rng.gamma(1.0, 1.0, (X.shape[0], model.n_components)))
    logl[::3, 1] = -np.inf
    lv = np.ascontiguousarray(model.components_mean_log_.T)
    logw = np.log(model.w_)
    V, _ = _wbpmf_updates._stabilised(lv)
    out = np.empty_like(logl)
    row_expected_counts(sweeper.indptr, sweeper.indices, sweeper.data, logw, logl, V, lv, out, 1)
    np.testing.assert_allclose(out, _dense_expected_counts(X, logw + logl, lv), rtol=1e-12)


def test_transform_reaches_the_fitted_rows_optimum(multimodal):
    """transform(X_train) does at least as well, row by row, as the fit's own rows.

    From E[l] = 1 alone, 10 of these 40 rows settled at a worse optimum (by up to 7 nats)
    than the one next to the fitted loadings.
    """
    X, model = multimodal
    _, _, l0, El, Elogl, kl = model._fit_rows(sparse.csr_matrix(X))
    chosen = _row_elbos(model, X, l0, El, Elogl, kl)
    fitted = _ascent_from(model, X, model.loadings_mean_, model.loadings_mean_log_)
    assert np.all(chosen >= fitted - 0.05), np.round(fitted - chosen, 2)
    np.testing.assert_allclose(model.transform(X), l0[:, None] * El)
    # score is the same row fit: its total is the sum of the rows' ELBOs.
    x_cols = X.sum(axis=0)
    const = np.sum(x_cols * np.log(model.f0_)) - np.sum(gammaln(X + 1.0))
    assert model.score(X) == pytest.approx((chosen.sum() + const) / X.shape[0], rel=1e-12)


@pytest.mark.parametrize("share", [0.25, 0.0])
def test_transform_finds_the_rows_where_a_topic_of_a_few_counts_is_off(
    multimodal, share, monkeypatch
):
    """From a start of 10 KL-NMF iterations the fit of ``multimodal`` leaves one topic off
    in many rows, where transform's starts keep it at 3 to 9 counts of about 100 (2 to 5
    nats lower); the search topic by topic finds the fit's optimum in every row. Without
    it (share 0), at least 5 rows stay below."""
    from sklearn_cogaps._poisson import _wbpmf

    X = multimodal[0]
    monkeypatch.setattr(_wbpmf, "_N_INIT_NMF", 10)
    model = _fit(X, max_iter=200, tol=1e-10)
    monkeypatch.setattr(_wbpmf, "_SEARCH_SHARE", share)
    _, _, l0, El, Elogl, kl = model._fit_rows(sparse.csr_matrix(X))
    chosen = _row_elbos(model, X, l0, El, Elogl, kl)
    fitted = _ascent_from(model, X, model.loadings_mean_, model.loadings_mean_log_)
    if share:
        assert np.all(chosen >= fitted - 0.05), np.round(fitted - chosen, 2)
    else:
        assert np.sum(chosen < fitted - 1.0) >= 5


def test_transform_is_at_least_the_all_ones_start(multimodal):
    """Per row, the kept solution is no worse than the one reached from E[l] = 1, and
    better on rows where that start leads to a poor optimum."""
    X, model = multimodal
    _, _, l0, El, Elogl, kl = model._fit_rows(sparse.csr_matrix(X))
    chosen = _row_elbos(model, X, l0, El, Elogl, kl)
    ones = _ascent_from(model, X, np.ones_like(El), np.zeros_like(El))
    # (0.01: along flat directions the rows are still creeping after max_iter sweeps)
    assert np.all(chosen >= ones - 0.01), np.round(ones - chosen, 4)
    assert np.sum(chosen > ones + 1.0) >= 3


def test_denominators_follow_topic_updates():
    """The fit makes B_ij once per iteration and carries it through the topics' updates by
    one term: after any sequence of updates (a topic switched off, one that held nearly all
    of B_ij and shrinks, shifts that restabilise rows and columns) it equals B_ij made anew,
    and so do the expected counts."""
    rng = np.random.default_rng(3)
    X = sparse.random(50, 30, density=0.4, random_state=4, format="csr")
    X.data = np.ceil(10 * X.data)
    K = 4
    sweeper = _wbpmf_updates._Sweeper(X, 1)
    rows = _wbpmf_updates._Exponentials(rng.normal(size=(50, K)))
    cols = _wbpmf_updates._Exponentials(rng.normal(size=(30, K)))
    D = sweeper.denominators(rows, cols)
    changes = [
        (0, rng.normal(size=50), rng.normal(size=30)),
        (1, np.where(np.arange(50) % 3 == 0, -np.inf, rng.normal(size=50)), rng.normal(size=30)),
        (2, np.full(50, 25.0), rng.normal(size=30)),  # holds all but e^-25 of every B_ij
        (2, rng.normal(size=50), rng.normal(size=30)),  # ... and shrinks back: cancellation
        (3, rng.normal(size=50) + 60.0, rng.normal(size=30) - 45.0),  # restabilised
        (3, rng.normal(size=50) - 80.0, rng.normal(size=30)),  # back down: restabilised again
        (0, rng.normal(size=50), np.full(30, -np.inf)),
    ]
    restabilised = 0
    for step, (k, new_rows, new_cols) in enumerate(changes):
        u_old = rows.set(k, new_rows)
        v_old = cols.set(k, new_cols)
        restabilised += int(rows.moved.sum() + cols.moved.sum())
        dense = _dense_expected_counts(X, rows.logs, cols.logs)
        t = step % K
        y_rows, y_cols = sweeper.topic_counts(rows, cols, D, t, (k, u_old, v_old))
        np.testing.assert_allclose(D, sweeper.denominators(rows, cols), rtol=1e-13)
        np.testing.assert_allclose(y_rows, dense[:, t], rtol=1e-12, atol=1e-300)
        dense_cols = _dense_expected_counts(X, rows.logs, cols.logs, axis=0)
        np.testing.assert_allclose(y_cols, dense_cols[:, t], rtol=1e-12, atol=1e-300)
        for t in range(K):
            y_rows, _ = sweeper.topic_counts(rows, cols, D, t)
            np.testing.assert_allclose(y_rows, dense[:, t], rtol=1e-12, atol=1e-300)
    assert restabilised > 0


@pytest.mark.parametrize("n_threads", [1, 2])
def test_the_bound_sweep_makes_the_next_first_topic_to_the_bit(n_threads):
    """The sweep of the bound (``data_term_counts``) gives the data term, the denominators
    and topic 0's expected counts with the bits of the three separate sweeps, including the
    entries whose B_ij underflows (log-space path) and rows without counts; a fit whose
    iterations reuse it equals one that makes them anew."""
    rng = np.random.default_rng(5)
    X = sparse.random(300, 40, density=0.3, random_state=6, format="csr")
    X.data = np.ceil(10 * X.data)
    X = X.tolil()
    X[7, :] = 0  # a row without counts
    X = X.tocsr()
    K = 4
    lu = rng.normal(size=(300, K))
    lv = rng.normal(size=(40, K))
    lu[:50, 0], lu[:50, 1:] = 300.0, -300.0  # these rows' maxima on topic 0 ...
    lv[:10, 0], lv[:10, 1:] = -400.0, 200.0  # ... these columns' on the others: B_ij tiny
    lu[60, 2] = -np.inf
    sweeper = _wbpmf_updates._Sweeper(X, n_threads)
    rows, cols = _wbpmf_updates._Exponentials(lu), _wbpmf_updates._Exponentials(lv)
    terms, D, (y_rows, y_cols) = sweeper.data_term_counts(rows, cols)
    D_ref = sweeper.denominators(rows, cols)
    assert np.sum(D_ref < 1e-100) > 0
    np.testing.assert_array_equal(D, D_ref)
    np.testing.assert_array_equal(terms, sweeper.data_term(lu, lv))
    ref_rows, ref_cols = sweeper.topic_counts(rows, cols, D_ref, 0)
    np.testing.assert_array_equal(y_rows, ref_rows)
    np.testing.assert_array_equal(y_cols, ref_cols)

    fused = _fit(X, max_iter=6)

    class Unfused(_wbpmf_updates._Sweeper):
        data_term_counts = property(lambda self: None)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(_wbpmf, "_Sweeper", Unfused)
        unfused = _fit(X, max_iter=6)
    for name in ("components_", "loadings_", "objective_history_", "w_"):
        np.testing.assert_array_equal(getattr(fused, name), getattr(unfused, name))


@pytest.mark.parametrize(
    "prior_loadings, prior_components, K",
    [("gamma", "gamma", 6), ("point_gamma", "gamma_mixture", 6)],
)
def test_a_spare_topic_whose_prior_collapses_keeps_a_valid_bound(
    prior_loadings, prior_components, K
):
    """With more topics than the data hold, a spare topic's fitted Gamma prior collapses to
    a point mass (shape ~1e16). Its KL came out at -142,948 and the ELBO positive, above
    the saturated log-likelihood, which no bound of count data can be; the ELBO also fell."""
    rng = np.random.default_rng(0)
    L, F = rng.gamma(0.5, 2, (500, 3)), rng.gamma(0.3, 3, (300, 3))
    l0, f0 = rng.gamma(5, 0.2, 500), rng.gamma(2, 0.5, 300)
    X = rng.poisson(0.3 * (l0[:, None] * L) @ (f0[:, None] * F).T)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        m = WeightedBackgroundPMF(
            K,
            prior_loadings=prior_loadings,
            prior_components=prior_components,
            random_state=0,
            max_iter=60,
        ).fit(X)
    saturated = float(np.sum(xlogy(X, X) - X - gammaln(X + 1.0)))
    assert m.lower_bound_ < saturated
    assert m.kl_loadings_.min() > -1e-6 and m.kl_components_.min() > -1e-6
    history = np.asarray(m.objective_history_)
    # a topic of weight 0 has log w = -inf by design: no raw numpy warning about it
    assert not [w for w in caught if "encountered in" in str(w.message)]
    assert np.all(np.diff(history) >= -1e-8 * np.abs(history[1:]))


def test_r_ebpmf_results_and_init_from_a_fit_say_ours():
    X = np.random.default_rng(0).poisson(1.0, (40, 25))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = WeightedBackgroundPMF(2, max_iter=5, random_state=0).fit(X)
    for name, ours in [("l0", "l0_"), ("f0", "f0_"), ("w", "w_"), ("ELBO", "lower_bound_"),
                       ("qg", "loadings_mean_"), ("KL", "kl_loadings_"),
                       ("EL", "loadings_mean_"), ("EF", r"components_mean_\.T")]:  # fmt: skip
        with pytest.raises(AttributeError, match=rf"\(R ebpmf's\); write .*{ours}"):
            getattr(model, name)
    with pytest.raises(ValueError, match=r"not a fit .*warm_start=True"):
        WeightedBackgroundPMF(2, init=model).fit(X)
    for family, closest in [("point_exponential", "'point_gamma'"), ("two_gamma",
                            "'gamma_mixture'"), ("gamma_mixture_single_scale",
                            "'gamma_mixture'"), ("mle_pm", "'gamma'")]:  # fmt: skip
        for name in ("prior_loadings", "prior_components"):
            with pytest.raises(ValueError, match=rf"{name}='{family}' is a prior family of "
                               rf"R's ebpm .* the closest it has is {closest}"):  # fmt: skip
                WeightedBackgroundPMF(2, **{name: family}).fit(X)
    for name, ours in [("Kmax", "n_components=K"), ("fix_g", "always fitted"),
                       ("init_tol", "KL-NMF iterations")]:  # fmt: skip
        with pytest.raises(TypeError, match=rf"'{name}' \(R ebpmf's name.*{ours}"):
            WeightedBackgroundPMF(**{name: 1})
    # R's function names as priors, its init and its lower-case elbo
    for family in ("gamma_mixture", "gamma", "point_gamma", "exponential_mixture"):
        with pytest.raises(ValueError, match=rf"'ebpm_{family}' is R ebpm's function; write "
                           rf"prior_components='{family}'\."):  # fmt: skip
            WeightedBackgroundPMF(2, prior_components=f"ebpm_{family}").fit(X)
    # also under prior_components' former name, advised under the new one
    with pytest.raises(ValueError, match=r"prior_factors='ebpm_gamma' is R ebpm's function; "
                       r"write prior_components='gamma'\."):  # fmt: skip
        WeightedBackgroundPMF(2, prior_factors="ebpm_gamma").fit(X)
    with pytest.raises(ValueError, match=r"point_exponential' is a prior family of R's ebpm"):
        WeightedBackgroundPMF(2, prior_loadings="ebpm_point_exponential").fit(X)
    with pytest.raises(ValueError, match=r"init='fasttopics' .*; write init='nmf'"):
        WeightedBackgroundPMF(2, init="fasttopics").fit(X)
    with pytest.raises(AttributeError, match=r"'elbo' \(R ebpmf's\); write objective_history_"):
        _ = model.elbo


@pytest.mark.parametrize("solver", ["sequential", "simultaneous"])
def test_a_warm_start_continues_to_the_bit_with_features_without_counts(solver, monkeypatch):
    """A fit of n iterations continued by m is the fit of n + m, also when some features
    have no count (their fitted scales are the empirical-Bayes ones, not the state the fit
    continues from) and after an interruption (the screening's place is kept)."""
    X = make_background_counts(200, 150, 3, weight=0.1, random_state=0)[0]
    assert np.any(np.asarray(X.sum(axis=0)).ravel() == 0)
    names = ("w_", "l0_", "f0_", "loadings_", "components_", "kl_loadings_", "kl_components_")

    def bits(model):
        return [getattr(model, name).tobytes() for name in names]

    def make(**kw):
        return WeightedBackgroundPMF(3, solver=solver, random_state=0, tol=0.0, **kw)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        full = make(max_iter=8).fit(X)
        for first in (4, 2):
            warm = make(max_iter=first, warm_start=True).fit(X)
            warm.set_params(max_iter=8 - first).fit(X)
            assert bits(warm) == bits(full)
            assert_array_equal(warm.objective_history_, full.objective_history_[first:])
        iterate = WeightedBackgroundPMF._iterate

        def interrupted(self, state, iteration):
            if iteration == 5:
                raise KeyboardInterrupt
            return iterate(self, state, iteration)

        monkeypatch.setattr(WeightedBackgroundPMF, "_iterate", interrupted)
        warm = make(max_iter=8, warm_start=True)
        with pytest.warns(FitInterruptedWarning, match="interrupted after 4 of 8"):
            warm.fit(X)
        monkeypatch.setattr(WeightedBackgroundPMF, "_iterate", iterate)
        assert warm.n_iter_ == 4
        warm.set_params(max_iter=4).fit(X)
        assert bits(warm) == bits(full)


@pytest.mark.parametrize("solver", ["sequential", "simultaneous"])
def test_a_warm_start_stops_on_tol_where_the_longer_fit_stops(solver):
    """tol tests a warm start's first iteration against the bound the previous fit ended
    on, as the fit of n + m iterations tests it against the one before: a fit that tol
    ends after n iterations, split anywhere, ends after n with the same bits."""
    X = make_background_counts(200, 150, 3, weight=0.1, random_state=0)[0]

    def make(**kw):
        return WeightedBackgroundPMF(3, solver=solver, random_state=0, tol=1e-4, **kw)

    full = make(max_iter=100).fit(X)
    n = full.n_iter_
    assert full.converged_ and n > 3
    for first in (n - 1, n - 2):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            warm = make(max_iter=first, warm_start=True).fit(X)
        warm.set_params(max_iter=100).fit(X)
        assert warm.converged_ and first + warm.n_iter_ == n
        assert_array_equal(warm.loadings_, full.loadings_)
        assert_array_equal(warm.objective_history_, full.objective_history_[first:])


@pytest.mark.parametrize("source", ["memory", "dask"])
@pytest.mark.parametrize("empty", ["row", "column"])
def test_a_warm_start_on_counts_where_the_previous_fit_had_none_starts_anew(empty, source):
    """Rows and columns without counts have background 0 in the fit's state: counts there
    on a warm start (fit on thinned counts, then on all of them) failed inside the EBPM
    solver with "y must be 0 wherever the exposure s is 0"."""
    X = np.random.default_rng(0).poisson(1.0, size=(50, 30)).astype(float)
    if source == "dask":
        da = pytest.importorskip("dask.array")
        given = da.from_array(X, chunks=(20, -1))
    else:
        given = X
    A = X.copy()
    if empty == "row":
        A[0] = 0
    else:
        A[:, 0] = 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model = WeightedBackgroundPMF(2, max_iter=5, random_state=0).fit(A)
        with pytest.warns(UserWarning, match=rf"counts in .* that had none in the previous "
                          rf"fit \(the first: {empty} 0\).*starts a new one"):  # fmt: skip
            model.set_params(warm_start=True).fit(given)
        new = WeightedBackgroundPMF(2, max_iter=5, random_state=0).fit(X)
    assert_array_equal(model.components_, new.components_)


def test_a_warm_start_interrupted_before_its_first_iteration_leaves_the_model(monkeypatch):
    """With one component the features' moments are views of the fitted attributes: the
    warm start's state of the features without counts must not be written into them."""
    X = make_background_counts(200, 150, 3, weight=0.1, random_state=0)[0]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model = WeightedBackgroundPMF(1, max_iter=3, tol=0.0, random_state=0, warm_start=True)
        model.fit(X)
    before = {name: np.copy(value) for name, value in vars(model).items() if name.endswith("_")
              and isinstance(value, np.ndarray)}  # fmt: skip

    def interrupted(self, state, iteration):
        raise KeyboardInterrupt

    monkeypatch.setattr(WeightedBackgroundPMF, "_iterate", interrupted)
    with pytest.raises(KeyboardInterrupt):
        model.fit(X)
    for name, value in before.items():
        assert_array_equal(getattr(model, name), value, err_msg=name)
