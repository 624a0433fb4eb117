"""ExtremeDeconvolution: batch EM, minibatch EM, SGD, split-and-merge and the sklearn API."""

import pickle
import warnings

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal
from sklearn.exceptions import ConvergenceWarning
from sklearn.mixture import GaussianMixture
from threadpoolctl import threadpool_limits

from sklearn_cogaps import ExtremeDeconvolution, effective_n_threads
from sklearn_cogaps._utils._arrays import unique_rows
from sklearn_cogaps._xd._data import validate_observations
from sklearn_cogaps._xd._split_merge import split_merge_candidates


def _mixture(d=2, seed=0):
    rng = np.random.RandomState(seed)
    weights = np.array([0.5, 0.3, 0.2])
    means = rng.uniform(-4, 4, size=(3, d))
    A = rng.normal(size=(3, d, d)) * 0.5
    covs = A @ np.swapaxes(A, 1, 2) + 0.2 * np.eye(d)
    return weights, means, covs


def _draw(model, n, seed=0, noise=(0.2, 2.0), full=True):
    """Points of the mixture with heteroscedastic Gaussian noise (full or diagonal)."""
    weights, means, covs = model
    rng = np.random.RandomState(seed + 1)
    d = means.shape[1]
    z = rng.choice(len(weights), size=n, p=weights)
    v = means[z] + np.einsum("nij,nj->ni", np.linalg.cholesky(covs)[z], rng.normal(size=(n, d)))
    sd = rng.uniform(*noise, size=(n, d))
    if full:
        q, _ = np.linalg.qr(rng.normal(size=(n, d, d)))
        S = np.einsum("nij,nj,nkj->nik", q, sd**2, q)
    else:
        S = sd**2
    L = np.linalg.cholesky(S if full else S[:, :, None] * np.eye(d))
    x = v + np.einsum("nij,nj->ni", L, rng.normal(size=(n, d)))
    return x, S, v, z


def _init(model):
    weights, means, covs = model
    return dict(weights_init=weights, means_init=means, precisions_init=np.linalg.inv(covs))


# ---------------------------------------------------------------- the sklearn API


# ---------------------------------------------------------------- batch EM


def test_no_noise_equals_gaussian_mixture():
    model = _mixture(d=3)
    X, _, _, _ = _draw(model, 600)
    gm = GaussianMixture(3, reg_covar=1e-6, max_iter=5, tol=0.0, random_state=0, **_init(model))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        gm.fit(X)
        xd = ExtremeDeconvolution(3, max_iter=5, tol=0.0, **_init(model)).fit(X)
    assert xd.n_iter_ == 5
    assert_allclose(xd.weights_, gm.weights_, rtol=1e-10)
    assert_allclose(xd.means_, gm.means_, rtol=1e-10, atol=1e-12)
    assert_allclose(xd.covariances_, gm.covariances_, rtol=1e-9, atol=1e-12)
    assert_allclose(xd.precisions_cholesky_, gm.precisions_cholesky_, rtol=1e-8, atol=1e-10)
    assert_allclose(xd.score_samples(X), gm.score_samples(X), rtol=1e-12)
    assert_allclose(xd.predict_proba(X), gm.predict_proba(X), atol=1e-12)
    assert_allclose(xd.score(X), gm.score(X), rtol=1e-12)
    assert_allclose(xd.bic(X), gm.bic(X), rtol=1e-12)
    assert_allclose(xd.aic(X), gm.aic(X), rtol=1e-12)


@pytest.mark.parametrize("full", [True, False])
def test_em_never_decreases_the_likelihood(full):
    model = _mixture(d=3, seed=1)
    X, S, v, _ = _draw(model, 800, seed=1, full=full)
    R = np.eye(3) + 0.3 * np.random.RandomState(2).normal(size=(800, 3, 3))
    X = X - v + np.einsum("nij,nj->ni", R, v)  # x_i = R_i v_i + noise
    X[::7, 1] = np.nan
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        warnings.simplefilter("ignore", ConvergenceWarning)
        xd = ExtremeDeconvolution(3, max_iter=60, tol=0.0, **_init(model)).fit(
            X, X_cov=S, projection=R
        )
    steps = np.diff(xd.objective_history_)
    assert steps.min() > -1e-10
    assert xd.objective_history_[-1] - xd.objective_history_[0] > 0.01


def test_recovers_covariances_that_a_plain_mixture_inflates():
    model = _mixture(d=2, seed=3)
    X, S, _, z = _draw(model, 4000, seed=3, noise=(0.5, 1.5))
    xd = ExtremeDeconvolution(3, random_state=0, **_init(model)).fit(X, X_cov=S)
    gm = GaussianMixture(3, random_state=0, **_init(model)).fit(X)
    assert xd.converged_
    for est in (xd, gm):
        order = np.argsort(est.means_[:, 0])
        est.order = order
    true = model[2][np.argsort(model[1][:, 0])]
    err_xd = np.abs(np.linalg.det(xd.covariances_[xd.order]) / np.linalg.det(true) - 1)
    ratio_gm = np.linalg.det(gm.covariances_[gm.order]) / np.linalg.det(true)
    assert np.all(err_xd < 0.3), err_xd
    assert np.all(ratio_gm > 1.8), ratio_gm
    assert_allclose(xd.means_[xd.order], model[1][np.argsort(model[1][:, 0])], atol=0.2)


def test_missing_values_equal_an_explicit_projection():
    """NaN-dropping equals a projection whose dropped row is zero, with x = 0 and unit noise:
    that coordinate then adds the constant log N(0 | 0, 1) to every point and nothing else."""
    model = _mixture(d=3, seed=4)
    X, S, _, _ = _draw(model, 1500, seed=4)
    rng = np.random.RandomState(5)
    drop = rng.rand(1500) < 0.3
    col = rng.randint(0, 3, size=1500)
    X_nan = X.copy()
    X_nan[drop, col[drop]] = np.nan
    X_zero, S_unit = X.copy(), S.copy()
    R = np.repeat(np.eye(3)[None], 1500, axis=0)
    for i in np.flatnonzero(drop):
        X_zero[i, col[i]] = 0.0
        S_unit[i, col[i], :] = S_unit[i, :, col[i]] = 0.0
        S_unit[i, col[i], col[i]] = 1.0
        R[i, col[i], :] = 0.0
    kw = dict(n_components=3, tol=1e-8, random_state=0, **_init(model))
    a = ExtremeDeconvolution(**kw).fit(X_nan, X_cov=S)
    b = ExtremeDeconvolution(**kw).fit(X_zero, X_cov=S_unit, projection=R)
    assert a.n_iter_ == b.n_iter_
    assert_allclose(a.means_, b.means_, rtol=1e-9, atol=1e-10)
    assert_allclose(a.covariances_, b.covariances_, rtol=1e-9, atol=1e-10)
    const = -0.5 * np.log(2 * np.pi) * drop
    assert_allclose(
        a.score_samples(X_nan, X_cov=S) + const,
        b.score_samples(X_zero, X_cov=S_unit, projection=R),
        rtol=1e-10,
    )
    # A shared rectangular projection gives the same scores for the points it describes.
    rows = drop & (col == 1)
    keep = [0, 2]
    assert_allclose(
        a.score_samples(X_nan[rows], X_cov=S[rows]),
        a.score_samples(
            X[rows][:, keep], X_cov=S[rows][:, keep][:, :, keep], projection=np.eye(3)[keep]
        ),  # fmt: skip
        rtol=1e-10,
    )


def test_thread_count_does_not_change_the_result():
    model = _mixture(d=3, seed=6)
    # Large enough for the kernels to start two threads (they use one for small sweeps).
    X, S, _, _ = _draw(model, 20000, seed=6)
    X[::5, 0] = np.nan
    kw = dict(n_components=3, max_iter=10, tol=0.0, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        with threadpool_limits(1, user_api="openmp"):
            assert effective_n_threads() == 1
            one = ExtremeDeconvolution(**kw).fit(X, X_cov=S)
            p1 = one.predict_proba(X, X_cov=S)
        with threadpool_limits(2, user_api="openmp"):
            two = ExtremeDeconvolution(**kw).fit(X, X_cov=S)
            p2 = two.predict_proba(X, X_cov=S)
    assert_array_equal(one.means_, two.means_)
    assert_array_equal(one.covariances_, two.covariances_)
    assert_array_equal(one.objective_history_, two.objective_history_)
    assert_array_equal(p1, p2)


def test_float32_agrees_with_float64():
    model = _mixture(d=3, seed=7)
    X, S, _, _ = _draw(model, 2000, seed=7, full=False)
    kw = dict(n_components=3, tol=1e-7, random_state=0, **_init(model))
    a = ExtremeDeconvolution(**kw).fit(X, X_cov=S)
    b = ExtremeDeconvolution(**kw).fit(X.astype(np.float32), X_cov=S.astype(np.float32))
    assert b.means_.dtype == np.float32 and b.covariances_.dtype == np.float32
    assert_allclose(b.means_, a.means_, atol=2e-3)
    assert_allclose(b.covariances_, a.covariances_, atol=5e-3)
    assert abs(b.lower_bound_ - a.lower_bound_) < 1e-4
    # the criteria add the points' float32 log-likelihoods in float64: Python floats, as
    # score's mean, each the sum of the float64 values of those terms
    X32, S32 = X.astype(np.float32), S.astype(np.float32)
    terms = b.score_samples(X32, X_cov=S32).astype(np.float64)
    for name in ("aic", "bic", "score"):
        assert type(getattr(b, name)(X32, X_cov=S32)) is float, name
    assert b.aic(X32, X_cov=S32) == -2 * terms.sum() + 2 * b._n_parameters()


def test_sample_weight_equals_repeated_points():
    model = _mixture(d=2, seed=8)
    X, S, _, _ = _draw(model, 300, seed=8)
    counts = np.random.RandomState(9).randint(0, 4, size=300)
    kw = dict(n_components=3, max_iter=8, tol=0.0, **_init(model))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        a = ExtremeDeconvolution(**kw).fit(X, X_cov=S, sample_weight=counts)
        b = ExtremeDeconvolution(**kw).fit(np.repeat(X, counts, 0), X_cov=np.repeat(S, counts, 0))
    assert_allclose(a.means_, b.means_, rtol=1e-9)
    assert_allclose(a.covariances_, b.covariances_, rtol=1e-9)


def test_the_default_start_sees_each_distinct_point_once_with_its_weight():
    # The start works on the distinct points in lexicographic order (np.unique's order,
    # found without its structured comparison), so a point of integer weight w, w copies
    # of it and any order of the rows give the same start.
    rng = np.random.RandomState(12)
    V = rng.randint(-2, 3, size=(200, 3)).astype(float)
    V[::7] = rng.normal(size=V[::7].shape)
    unique, inverse = unique_rows(V)
    expected, expected_inverse = np.unique(V, axis=0, return_inverse=True)
    assert_array_equal(unique, expected)
    assert_array_equal(inverse, expected_inverse.ravel())

    model = _mixture(d=2, seed=8)
    X, S, _, _ = _draw(model, 200, seed=12)
    counts = rng.randint(0, 4, size=200)
    order = rng.permutation(int(counts.sum()))
    kw = dict(n_components=3, max_iter=3, tol=0.0, random_state=0)
    # missing coordinates start at their weighted mean (they started at the mean over the
    # rows, which differs: 0.019 apart after one step on a trial's data)
    X_missing = np.where(rng.uniform(size=X.shape) < 0.15, np.nan, X)
    for data in (X, X_missing):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            a = ExtremeDeconvolution(**kw).fit(data, X_cov=S, sample_weight=counts)
            b = ExtremeDeconvolution(**kw).fit(
                np.repeat(data, counts, 0)[order], X_cov=np.repeat(S, counts, 0)[order]
            )
        assert_allclose(a.means_, b.means_, rtol=1e-9)
        assert_allclose(a.covariances_, b.covariances_, rtol=1e-9)


@pytest.mark.parametrize("solver", ["minibatch_em", "sgd"])
def test_every_solver_starts_at_the_given_covariances_and_keeps_the_fixed_ones(solver):
    # The stochastic solvers parametrise V = L L^T + reg_covar I: factoring the start whole
    # added reg_covar to every start, and to the covariances held fixed.
    rng = np.random.RandomState(13)
    X = rng.normal(size=(200, 2)) + np.repeat([[3.0, 0.0], [-3.0, 0.0]], 100, axis=0)
    covs = np.array([np.eye(2) * 0.7, [[0.9, 0.2], [0.2, 0.6]]])
    kw = dict(weights_init=[0.5, 0.5], means_init=[[3.0, 0.0], [-3.0, 0.0]],
              precisions_init=np.linalg.inv(covs), reg_covar=0.5, batch_size=50)  # fmt: skip
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        em = ExtremeDeconvolution(2, max_iter=0, **kw).fit(X)
        start = ExtremeDeconvolution(2, solver=solver, max_iter=0, **kw).fit(X)
        held = ExtremeDeconvolution(2, solver=solver, max_iter=3, fixed_covariances=[False, True],
                                    **kw).fit(X)  # fmt: skip
    assert_allclose(em.covariances_, covs, rtol=1e-12)
    assert_allclose(start.covariances_, em.covariances_, rtol=1e-12)
    assert_array_equal(held.covariances_[1], em.covariances_[1])
    assert not np.allclose(held.covariances_[0], em.covariances_[0])  # the free one moved


def test_regulariser_and_fixed_parameters():
    rng = np.random.RandomState(10)
    X = rng.normal(size=(50, 2)) * [1.0, 3.0]
    w = 2.5
    xd = ExtremeDeconvolution(1, w=w, reg_covar=0.0, tol=1e-12, max_iter=5).fit(X)
    centred = X - X.mean(0)
    assert_allclose(xd.means_[0], X.mean(0), rtol=1e-12)
    # Bovy et al.: V = (sum_i (x_i - m)(x_i - m)^T + w I) / (n + 1).
    assert_allclose(xd.covariances_[0], (centred.T @ centred + w * np.eye(2)) / 51, rtol=1e-10)

    model = _mixture(d=2, seed=11)
    X, S, _, _ = _draw(model, 1000, seed=11)
    init = _init(model)
    init["means_init"] = init["means_init"] + 0.5
    xd = ExtremeDeconvolution(
        3, fixed_means=[True, False, False], fixed_weights=[False, True, False],
        fixed_covariances=[False, False, True], tol=1e-4, **init,
    ).fit(X, X_cov=S)  # fmt: skip
    assert_array_equal(xd.means_[0], init["means_init"][0])
    assert xd.weights_[1] == init["weights_init"][1]
    assert_allclose(xd.weights_.sum(), 1.0)
    assert_allclose(xd.covariances_[2], np.linalg.inv(init["precisions_init"][2]), rtol=1e-12)
    assert not np.allclose(xd.means_[1], init["means_init"][1])
    assert xd._n_parameters() == 1 + 2 * 2 + 3 * 2


def test_deconvolve_is_the_gaussian_posterior():
    rng = np.random.RandomState(12)
    m, V = np.array([1.0, -1.0, 0.5]), np.diag([2.0, 1.0, 0.5])
    R = rng.normal(size=(2, 3))
    X = rng.normal(size=(5, 2))
    S = np.repeat(np.diag([0.3, 0.7])[None], 5, axis=0)
    xd = ExtremeDeconvolution(1, max_iter=0, weights_init=[1.0], means_init=m[None],
                              precisions_init=np.linalg.inv(V)[None])  # fmt: skip
    xd.fit(X, X_cov=S, projection=R)
    mean, cov = xd.deconvolve(X, X_cov=S, projection=R)
    T = R @ V @ R.T + S[0]
    K = V @ R.T @ np.linalg.inv(T)
    assert_allclose(mean, m + (X - R @ m) @ K.T, rtol=1e-10)
    assert_allclose(cov, np.broadcast_to(V - K @ R @ V, (5, 3, 3)), rtol=1e-10, atol=1e-12)


def test_sample_is_reproducible_and_follows_the_mixture():
    model = _mixture(d=2, seed=13)
    xd = ExtremeDeconvolution(3, max_iter=0, random_state=3, **_init(model))
    xd.fit(_draw(model, 100, seed=13)[0])
    a, la = xd.sample(20000)
    b, lb = xd.sample(20000)
    assert_array_equal(a, b)
    assert_allclose(np.bincount(la) / 20000, model[0], atol=0.02)
    assert_allclose(a[la == 0].mean(0), model[1][0], atol=0.05)


def test_pickle_round_trip():
    model = _mixture(d=2, seed=14)
    X, S, _, _ = _draw(model, 300, seed=14)
    xd = ExtremeDeconvolution(3, tol=1e-4, random_state=0).fit(X, X_cov=S)
    again = pickle.loads(pickle.dumps(xd))
    assert_array_equal(again.score_samples(X, X_cov=S), xd.score_samples(X, X_cov=S))


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(X_cov=-np.ones((20, 2))), "non-negative"),
        (dict(X_cov=np.ones((20, 3))), "X_cov must have shape"),
        (dict(X_cov=np.repeat(np.array([[1.0, 2.0], [2.0, 1.0]])[None], 20, 0)), "positive semi"),
        (dict(X_cov=np.repeat(np.array([[1.0, 0.5], [0.0, 1.0]])[None], 20, 0)), "symmetric"),
        (dict(projection=np.ones((20, 3, 2))), "projection must have shape"),
        (dict(projection=np.ones(5)), "projection must have shape"),
        (dict(projection=np.full((2, 2), np.nan)), "projection must be finite"),
    ],
)
def test_bad_input_raises_clear_errors(kwargs, match):
    X = np.random.RandomState(0).normal(size=(20, 2))
    with pytest.raises(ValueError, match=match):
        ExtremeDeconvolution(2).fit(X, **kwargs)


def test_too_few_samples_for_the_components_say_what_to_do():
    X = np.random.RandomState(0).normal(size=(4, 2))
    for start in ("fit", "partial_fit"):
        with pytest.raises(ValueError, match=r"n_samples = 4: .*at least 6 samples, or lower n_"):
            getattr(ExtremeDeconvolution(6), start)(X)


def test_bad_parameters_raise_clear_errors():
    X = np.random.RandomState(0).normal(size=(20, 2))
    with pytest.raises(ValueError, match="means_init must be given"):
        ExtremeDeconvolution(2, fixed_means=True).fit(X)
    with pytest.raises(ValueError, match="precisions_init must hold"):
        ExtremeDeconvolution(1, precisions_init=-np.eye(2)[None]).fit(X)
    with pytest.raises(ValueError, match="weights_init must be"):
        ExtremeDeconvolution(2, weights_init=[0.9, 0.9]).fit(X)
    with pytest.raises(ValueError, match="fixed_means must be"):
        ExtremeDeconvolution(2, fixed_means=[True, False, True]).fit(X)
    # [0, 1] is a mask to numpy and a list of components to a reader
    with pytest.raises(ValueError, match=r"must be booleans.*np.isin\(np.arange\(2\), idx\)"):
        ExtremeDeconvolution(2, fixed_means=[0, 1], means_init=X[:2]).fit(X)
    with pytest.raises(ValueError, match=r"got \[-0.5, 1.5\] summing to 1"):
        ExtremeDeconvolution(2, weights_init=[-0.5, 1.5]).fit(X)
    xd = ExtremeDeconvolution(1).fit(X)
    with pytest.raises(ValueError, match="expecting 2 features"):
        xd.score(X[:, :1])
    # A noise-free collapse names the component and says what to change.
    with pytest.raises(
        ValueError, match="component 0 is not positive definite.*Increase reg_covar"
    ):
        ExtremeDeconvolution(1, reg_covar=0.0).fit(np.ones((20, 2)))
    # The default regulariser fits constant data.
    xd = ExtremeDeconvolution(1).fit(np.ones((20, 2)))
    assert_allclose(xd.covariances_[0], 1e-6 * np.eye(2), atol=1e-20)
    # A singular projection without noise: the failing point is named.
    S = np.zeros((20, 2))
    S[1:] = 1.0
    R = np.repeat(np.eye(2)[None], 20, axis=0)
    R[0, 1] = 0.0
    with pytest.raises(ValueError, match="of point 0 under component 0"):
        ExtremeDeconvolution(1).fit(X, X_cov=S, projection=R)


# ---------------------------------------------------------------- stochastic methods


@pytest.fixture(scope="module")
def large():
    """100,000 points in 2-d with diagonal heteroscedastic noise, and the batch-EM optimum."""
    model = _mixture(d=2, seed=20)
    X, S, _, _ = _draw(model, 100_000, seed=20, full=False)
    em = ExtremeDeconvolution(3, tol=1e-5, **_init(model)).fit(X, X_cov=S)
    return X, S, em


@pytest.mark.parametrize("method", ["minibatch_em", "sgd"])
def test_stochastic_methods_reach_the_batch_optimum(large, method):
    X, S, em = large
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        xd = ExtremeDeconvolution(3, solver=method, max_iter=3, batch_size=1000, random_state=0)
        xd.fit(X, X_cov=S)
    assert xd.n_iter_ == 3 and len(xd.objective_history_) == 3
    assert abs(xd.lower_bound_ - xd.score(X, X_cov=S)) < 1e-10
    assert em.lower_bound_ - xd.lower_bound_ < 0.05


def test_partial_fit_streams_to_the_batch_optimum(large):
    X, S, em = large
    xd = ExtremeDeconvolution(3, random_state=0)
    for _ in range(2):
        for start in range(0, 100_000, 2000):
            xd.partial_fit(X[start : start + 2000], X_cov=S[start : start + 2000])
    assert xd.n_iter_ == 100
    assert em.lower_bound_ - xd.score(X, X_cov=S) < 0.05


@pytest.mark.parametrize("method", ["minibatch_em", "sgd"])
def test_stochastic_float32_agrees_with_float64(method):
    model = _mixture(d=3, seed=21)
    X, S, _, _ = _draw(model, 5000, seed=21)
    # Means far from the origin relative to the spread: the case the stable update is for.
    X = X + 1000.0
    init = _init(model)
    init["means_init"] = init["means_init"] + 1000.0
    kw = dict(n_components=3, solver=method, max_iter=3, batch_size=500, random_state=0, **init)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        a = ExtremeDeconvolution(**kw).fit(X, X_cov=S)
        b = ExtremeDeconvolution(**kw).fit(X.astype(np.float32), X_cov=S.astype(np.float32))
    assert b.covariances_.dtype == np.float32
    assert np.all(np.linalg.eigvalsh(b.covariances_.astype(float)) > 0)
    assert_allclose(b.covariances_, a.covariances_, rtol=0.02, atol=0.02)
    assert abs(a.lower_bound_ - b.lower_bound_) < 1e-3


# ---------------------------------------------------------------- split and merge, warm start


def test_split_merge_escapes_a_local_optimum():
    rng = np.random.RandomState(0)
    centres = np.array([[-6.0, 0.0], [0.0, 0.0], [6.0, 0.0]])
    v = np.vstack([rng.normal(size=(400, 2)) * 0.7 + c for c in centres])
    S = rng.uniform(0.1, 0.5, size=(1200, 2))
    X = v + rng.normal(size=v.shape) * np.sqrt(S)
    # Two components start on the left cluster, one spans the other two.
    covs = np.array([np.eye(2) * 0.5, np.eye(2) * 0.5, np.diag([10.0, 0.5])])
    init = dict(weights_init=[1 / 6, 1 / 6, 2 / 3], means_init=[[-6.5, 0], [-5.5, 0], [3, 0]],
                precisions_init=np.linalg.inv(covs))  # fmt: skip
    stuck = ExtremeDeconvolution(3, **init).fit(X, X_cov=S)
    xd = ExtremeDeconvolution(3, split_merge=2, **init).fit(X, X_cov=S)
    assert xd.lower_bound_ > stuck.lower_bound_ + 0.3
    assert_allclose(np.sort(xd.means_[:, 0]), centres[:, 0], atol=0.15)
    assert xd.n_iter_ > stuck.n_iter_
    assert np.all(np.diff(xd.objective_history_[: stuck.n_iter_]) > -1e-10)


def test_labelled_noise_must_follow_the_labels_of_x():
    pd = pytest.importorskip("pandas")
    rng = np.random.RandomState(0)
    X = pd.DataFrame(
        rng.normal(size=(60, 2)), columns=["a", "b"], index=[f"star{i}" for i in range(60)]
    )
    noise = pd.DataFrame(rng.uniform(0.1, 0.5, size=(60, 2)), columns=["a", "b"], index=X.index)
    ExtremeDeconvolution(n_components=1, random_state=0).fit(X, X_cov=noise)
    with pytest.raises(ValueError, match=r"column labels of 'X_cov'.*loc\[X.index, X.columns\]"):
        ExtremeDeconvolution(n_components=1).fit(X, X_cov=noise[["b", "a"]])
    with pytest.raises(ValueError, match="row labels of 'X_cov'"):
        ExtremeDeconvolution(n_components=1).fit(X, X_cov=noise.iloc[::-1])
    # a Series of weights is a value per row: matched by label, in X's order
    weight = pd.Series(np.r_[np.full(30, 5.0), np.ones(30)], index=X.index)
    ExtremeDeconvolution(n_components=1, random_state=0).fit(X, sample_weight=weight)
    with pytest.raises(ValueError, match=r"row labels of 'sample_weight'.*loc\[X.index\]"):
        ExtremeDeconvolution(n_components=1).fit(X, sample_weight=weight.iloc[::-1])
    ExtremeDeconvolution(n_components=1, random_state=0).fit(X.values, sample_weight=weight)


def test_split_merge_splits_the_component_on_two_clusters_not_the_noisiest():
    # Two components share the left cluster, one spans two tight clusters above, and the
    # right cluster is seen through noise four times its own variance. The component on
    # two clusters is the one that is not Gaussian about its points; the noisy one is, and
    # a criterion that ranks by noise level spent the first attempt on it.
    rng = np.random.RandomState(14)
    m = 300
    centres = np.array([[-10, 0], [10, 0], [0, 8], [0, 12]])
    v = rng.normal(size=(4 * m, 2)) * np.repeat([1.0, 1.0, 0.5, 0.5], m)[:, None]
    v += np.repeat(centres, m, axis=0)
    S = np.repeat([1e-4, 4.0, 1e-4, 1e-4], m)[:, None] * np.ones((1, 2))
    X = v + rng.normal(size=v.shape) * np.sqrt(S)
    covs = np.array([np.eye(2), np.eye(2), np.eye(2), np.diag([0.25, 4.25])])
    init = dict(weights_init=np.full(4, 0.25), means_init=[[-10.5, 0], [-9.5, 0], [10, 0], [0, 10]],
                precisions_init=np.linalg.inv(covs), tol=1e-8, max_iter=300)  # fmt: skip
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        stuck = ExtremeDeconvolution(4, **init).fit(X, X_cov=S)
        data = validate_observations(stuck, X, S, None, None, reset=False)
        params = (stuck.weights_, stuck.means_, stuck.covariances_)
        first = split_merge_candidates(stuck, data, params, np.ones(4, dtype=bool))[0]
        moved = ExtremeDeconvolution(4, split_merge=1, **init).fit(X, X_cov=S)
    assert sorted(first[:2]) == [0, 1]  # the two components of the left cluster merge
    assert_allclose(stuck.means_[first[2]], [0, 10], atol=0.3)  # the one on two clusters
    assert moved.lower_bound_ > stuck.lower_bound_ + 0.2
    centres = moved.means_[np.argsort(moved.means_[:, 0] + moved.means_[:, 1] / 100)]
    assert_allclose(centres, [[-10, 0], [0, 8], [0, 12], [10, 0]], atol=0.3)


def test_warm_start_continues_from_the_previous_fit():
    model = _mixture(d=2, seed=30)
    X, S, _, _ = _draw(model, 1000, seed=30)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        xd = ExtremeDeconvolution(3, max_iter=5, tol=0.0, warm_start=True, random_state=0)
        xd.fit(X, X_cov=S)
        first = xd.objective_history_[-1]
        xd.fit(X, X_cov=S)
        ten = ExtremeDeconvolution(3, max_iter=10, tol=0.0, random_state=0).fit(X, X_cov=S)
    assert xd.objective_history_[0] >= first - 1e-12
    assert_allclose(xd.means_, ten.means_, rtol=1e-12)


def test_warm_start_on_another_dimension_or_k_starts_anew_with_a_warning():
    rng = np.random.RandomState(0)
    X = np.vstack([rng.normal(-3, 1, (100, 2)), rng.normal(3, 1, (100, 2))])
    X3 = np.c_[X, rng.normal(size=200)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        fresh3 = ExtremeDeconvolution(2, random_state=0).fit(X3)
        fresh_k3 = ExtremeDeconvolution(3, random_state=0).fit(X)
        xd = ExtremeDeconvolution(2, warm_start=True, random_state=0).fit(X)
        with pytest.warns(
            UserWarning, match="dimension 3 and n_components=2, the previous fit had 2 and 2"
        ):
            xd.fit(X3)
        assert_allclose(xd.means_, fresh3.means_)
        assert xd.score(X3) == pytest.approx(fresh3.score(X3))
        xd.set_params(n_components=3)
        with pytest.warns(UserWarning, match="cannot continue the previous fit"):
            xd.fit(X)
        assert_allclose(xd.means_, fresh_k3.means_)
    # partial_fit continues the fitted mixture: another K is refused, not broadcast
    xd.set_params(n_components=2)
    with pytest.raises(ValueError, match="n_components=2, but the model being updated has 3"):
        xd.partial_fit(X)


def test_warm_start_holds_the_fixed_components_at_their_initial_values():
    rng = np.random.RandomState(1)
    X = np.vstack([rng.normal(-3, 1, (100, 2)), rng.normal(3, 1, (100, 2))])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        xd = ExtremeDeconvolution(2, warm_start=True, random_state=0).fit(X)
        xd.set_params(means_init=[[-10.0, 0.0], [10.0, 0.0]], fixed_means=[True, False])
        xd.fit(X)
    # the fixed mean where means_init puts it, not where the previous fit left it; the
    # free component continues from its previous values
    assert_array_equal(xd.means_[0], [-10.0, 0.0])
    assert np.all(xd.means_[1] != [10.0, 0.0])
    assert abs(xd.weights_.sum() - 1) < 1e-12
    assert np.all(np.diff(xd.objective_history_) > -1e-10)


def test_partial_fit_after_fit_counts_the_fitted_data():
    rng = np.random.RandomState(0)
    X = rng.normal(size=(5000, 2)) + np.where(rng.rand(5000, 1) < 0.5, -3.0, 3.0)
    S = np.full((5000, 2), 0.1)
    xd = ExtremeDeconvolution(2, random_state=0).fit(X, X_cov=S)
    before, means = xd.score(X, X_cov=S), xd.means_.copy()
    xd.partial_fit(X[:5], X_cov=S[:5])  # five of the fitted points
    # one minibatch of 5 points after 5000: a step of (1000 + 2) ** -0.6, about 1.6%
    assert np.abs(xd.means_ - means).max() < 0.1
    assert xd.score(X, X_cov=S) > before - 0.01
    assert xd.n_iter_ == 1 and xd.objective_history_.shape == (1,)
    xd.partial_fit(X[5:10], X_cov=S[5:10])
    assert xd.n_iter_ == 2 and xd.objective_history_.shape == (2,)


def test_points_without_an_observed_coordinate_are_named():
    """A point whose every coordinate is NaN carries nothing; its log-likelihood of 0 counts
    in score's mean, so fit and score say how many there are and how to drop them."""
    X = np.random.default_rng(0).normal(size=(60, 2))
    X[[7, 30]] = np.nan
    message = r"2 point\(s\) with no observed coordinate.*point 7.*X\[~np.isnan\(X\).all"
    with pytest.warns(UserWarning, match=message):
        model = ExtremeDeconvolution(2, max_iter=5, random_state=0).fit(X)
    with pytest.warns(UserWarning, match=message):
        assert model.score_samples(X)[7] == 0.0
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        model.score(X[~np.isnan(X).all(axis=1)])


def test_noise_of_missing_coordinates_is_ignored():
    model = _mixture(d=2, seed=31)
    X, S, _, _ = _draw(model, 400, seed=31)
    X[::3, 1] = np.nan
    S_nan = S.copy()
    S_nan[::3, 1, :] = np.nan
    S_nan[::3, :, 1] = np.nan
    kw = dict(n_components=3, max_iter=5, tol=0.0, **_init(model))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        a = ExtremeDeconvolution(**kw).fit(X, X_cov=S)
        b = ExtremeDeconvolution(**kw).fit(X, X_cov=S_nan)
    assert_array_equal(a.covariances_, b.covariances_)
    with pytest.raises(ValueError, match="point 1 has non-finite"):
        ExtremeDeconvolution(3).fit(
            X, X_cov=np.where(np.arange(400)[:, None, None] == 1, np.nan, S)
        )


def test_fast_paths_agree_with_the_general_kernel():
    """Diagonal noise == the same noise as full matrices; a shared projection == the same
    projection given per point; no noise == the per-point path with explicit zero noise."""
    model = _mixture(d=3, seed=32)
    X, var, _, _ = _draw(model, 600, seed=32, full=False)
    X[::4, 2] = np.nan
    R = np.random.RandomState(33).normal(size=(3, 3)) + 2 * np.eye(3)
    kw = dict(n_components=3, max_iter=4, tol=0.0, **_init(model))
    full = var[:, :, None] * np.eye(3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        a = ExtremeDeconvolution(**kw).fit(X, X_cov=var, projection=R)
        b = ExtremeDeconvolution(**kw).fit(X, X_cov=full, projection=np.repeat(R[None], 600, 0))
        # reg_covar=0: given X_cov (zeros here), reg_covar is a floor, not an addition
        c = ExtremeDeconvolution(**kw, reg_covar=0).fit(X)
        e = ExtremeDeconvolution(**kw, reg_covar=0).fit(
            X, X_cov=np.zeros_like(full), projection=np.repeat(np.eye(3)[None], 600, 0)
        )
    assert_allclose(a.covariances_, b.covariances_, rtol=1e-10, atol=1e-12)
    assert_allclose(a.score_samples(X, X_cov=var, projection=R),
                    b.score_samples(X, X_cov=full, projection=np.repeat(R[None], 600, 0)),
                    rtol=1e-11)  # fmt: skip
    assert_allclose(c.covariances_, e.covariances_, rtol=1e-10, atol=1e-12)
    assert_allclose(c.objective_history_, e.objective_history_, rtol=1e-12)
    # the posterior of complete points reads the shared W^T W of each component
    shared = c.deconvolve(X)
    per_point = c.deconvolve(X, X_cov=np.zeros_like(full), projection=np.eye(3))
    for got, expected in zip(shared, per_point):
        assert_allclose(got, expected, rtol=1e-10, atol=1e-12)


def test_n_init_keeps_the_best_start():
    model = _mixture(d=2, seed=34)
    X, S, _, _ = _draw(model, 500, seed=34)
    runs = [ExtremeDeconvolution(3, init_params="random", tol=1e-4, random_state=s).fit(X, X_cov=S)
            for s in range(3)]  # fmt: skip
    best = ExtremeDeconvolution(3, init_params="random", tol=1e-4, n_init=3, random_state=0)
    best.fit(X, X_cov=S)
    assert best.lower_bound_ >= runs[0].lower_bound_ - 1e-12
    assert np.isfinite(best.lower_bound_) and best.converged_


def test_minibatch_em_with_projections_and_missing_values():
    model = _mixture(d=3, seed=35)
    X, S, v, _ = _draw(model, 6000, seed=35)
    R = np.eye(3) + 0.3 * np.random.RandomState(36).normal(size=(6000, 3, 3))
    X = X - v + np.einsum("nij,nj->ni", R, v)
    X[::5, 0] = np.nan
    em = ExtremeDeconvolution(3, tol=1e-5, **_init(model)).fit(X, X_cov=S, projection=R)
    xd = ExtremeDeconvolution(3, solver="minibatch_em", max_iter=4, batch_size=500,
                              random_state=0, **_init(model))  # fmt: skip
    xd.fit(X, X_cov=S, projection=R)
    assert em.lower_bound_ - xd.lower_bound_ < 0.05
    mean, cov = xd.deconvolve(X[:5], X_cov=S[:5], projection=R[:5])
    assert mean.shape == (5, 3) and np.all(np.linalg.eigvalsh(cov) > 0)


@pytest.mark.parametrize("shape", [(2, 3), (3, 2)])
def test_a_rectangular_identity_projection_is_a_projection(shape):
    """np.eye(p, d) with p != d maps v (d) to x (p): the fit is d-dimensional and scores
    with its own projection; only the square identity means the points are v."""
    rng = np.random.RandomState(0)
    p, d = shape
    v = rng.normal(size=(300, d)) * np.arange(1.0, d + 1.0) + 1.0
    R = np.eye(p, d)
    X = v @ R.T + 0.1 * rng.normal(size=(300, p))
    S = np.full((300, p), 0.01)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        xd = ExtremeDeconvolution(1, random_state=0).fit(X, X_cov=S, projection=R)
        per_point = ExtremeDeconvolution(1, random_state=0).fit(
            X, X_cov=S, projection=np.broadcast_to(R, (300, p, d))
        )
    assert xd.means_.shape == (1, d)
    assert np.isfinite(xd.score(X, X_cov=S, projection=R))
    assert_allclose(xd.means_, per_point.means_, rtol=1e-10, atol=1e-12)


def test_points_without_the_projection_of_a_projected_fit_warn():
    """A model fitted to projected points lives in the space of v: points given without a
    projection are taken as v itself, which every method that reads observations says,
    unless the projection is given (the identity included)."""
    rng = np.random.RandomState(0)
    v = np.vstack([rng.normal(-3, 0.5, (60, 2)), rng.normal(3, 0.5, (60, 2))])
    R = np.array([[2.0, 0.5], [-0.3, 1.5]])
    X = v @ R.T
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        xd = ExtremeDeconvolution(n_components=2, max_iter=30, random_state=0)
        xd.fit(X, projection=R)
        plain = ExtremeDeconvolution(n_components=2, max_iter=30, random_state=0).fit(v)
    for method in (
        "score",
        "score_samples",
        "bic",
        "aic",
        "predict",
        "predict_proba",
        "deconvolve",
    ):
        with pytest.warns(
            UserWarning, match=rf"fitted with projection, but {method} got no projection"
        ):
            getattr(xd, method)(X)
    # the scores differ: the warning is about a real difference
    assert xd.score(X, projection=R) > xd._log_likelihoods(X, None, None).mean() + 1.0
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=".*fitted with projection")
        xd.score(X, projection=R)
        xd.predict(v, projection=np.eye(2))
        plain.score(v)
    # a projection to fewer coordinates: points of v, given without one, are read as v
    # with the warning, as with a square projection; others are refused with the advice
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        one = ExtremeDeconvolution(n_components=2, max_iter=30, random_state=0)
        one.fit(v @ R[:1].T, projection=R[:1])
    with pytest.warns(UserWarning, match="fitted with projection, but score got no projection"):
        assert one.score(v) == one.score(v, projection=np.eye(2))
    with pytest.raises(ValueError, match="must have the fitted dimension 2; got 3 features"):
        one.score(np.ones((4, 3)), projection=None)


def test_noise_variances_given_as_y_are_named():
    """astroML's fit(X, Xerr) habit with one variance per point gives a 1-d y of length
    n_samples, which scikit-learn's tools also pass along as a target: non-negative values
    that are not integers are named, labels are not; beside points of one coordinate they
    are refused (a warning let the fit drop the noise: component widths of 1.27 and 1.16
    for a truth of 0.5)."""
    rng = np.random.RandomState(0)
    var = rng.uniform(0.5, 2.0, 200)
    x = (
        np.concatenate([rng.normal(-3, 1, 100), rng.normal(3, 1, 100)])
        + rng.normal(size=200) * np.sqrt(var)
    )[:, None]
    xy = np.c_[x, rng.normal(size=200)]
    xd = ExtremeDeconvolution(n_components=2, max_iter=20, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        with pytest.warns(UserWarning, match=r"fit ignores y.*X_cov=np.repeat"):
            xd.fit(xy, var)
        with pytest.warns(UserWarning, match=r"score ignores y"):
            xd.score(xy, var)
        with pytest.warns(UserWarning, match=r"partial_fit ignores y"):
            ExtremeDeconvolution(n_components=2, random_state=0).partial_fit(xy, var)
        fitted = ExtremeDeconvolution(n_components=2, max_iter=20, random_state=0).fit(x)
        for method, call in [
            ("fit", lambda: xd.fit(x, var)),
            ("score", lambda: fitted.score(x, var)),
            ("partial_fit", lambda: ExtremeDeconvolution(2).partial_fit(x, var)),
        ]:
            with pytest.raises(ValueError, match=rf"X of one coordinate .* Pass it by keyword: "
                               rf"{method}\(X, X_cov=np\.asarray\(y\)\[:, None\]\)"):  # fmt: skip
                call()
        warnings.filterwarnings("error", message=".*ignores y")
        xd.fit(x, np.repeat([0.0, 1.0], 100))  # labels
        xd.fit(x, rng.normal(size=200))  # a target with negative values
        xd.fit(x, var, X_cov=var[:, None])  # the noise is given
    with pytest.raises(ValueError, match=r"score\(X, X_cov=Xerr\)") as refused:
        fitted.score(x, var[:, None])
    assert "sample_weight" not in str(refused.value)  # score takes none


def test_scoring_without_the_noise_of_a_noisy_fit_warns_and_routing_passes_it():
    """GridSearchCV and cross_validate score held-out points without their X_cov unless it
    is routed to score: a model fitted to noisy points says so instead of scoring them as
    noise-free points."""
    import sklearn
    from sklearn.model_selection import KFold, cross_validate

    rng = np.random.RandomState(0)
    X = np.vstack([rng.normal(-3, 0.3, (40, 2)), rng.normal(3, 0.3, (40, 2))])
    var = rng.uniform(0.5, 2.0, X.shape)
    X = X + rng.normal(size=X.shape) * np.sqrt(var)
    noisy = ExtremeDeconvolution(n_components=2, max_iter=20, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        noisy.fit(X, X_cov=var)
        plain = ExtremeDeconvolution(n_components=2, max_iter=20, random_state=0).fit(X)
    methods = ("score", "bic", "aic", "score_samples", "predict", "predict_proba", "deconvolve")
    for method in methods:
        with pytest.warns(UserWarning, match=rf"fitted with X_cov, but {method} got no X_cov"):
            getattr(noisy, method)(X)
    # a batch without noise after batches with it would update the mixture as noise-free
    online = ExtremeDeconvolution(n_components=2, random_state=0).partial_fit(X, X_cov=var)
    with pytest.warns(UserWarning, match=r"fitted with X_cov, but partial_fit got no X_cov"):
        online.partial_fit(X)
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=".*fitted with X_cov")
        for method in methods:
            getattr(noisy, method)(X, X_cov=var)
            getattr(noisy, method)(X, X_cov=np.zeros_like(X))
            getattr(plain, method)(X)
        with sklearn.config_context(enable_metadata_routing=True):
            est = ExtremeDeconvolution(n_components=2, max_iter=20, random_state=0)
            est.set_fit_request(X_cov=True).set_score_request(X_cov=True)
            warnings.simplefilter("ignore", ConvergenceWarning)
            cv = KFold(2, shuffle=True, random_state=0)
            routed = cross_validate(est, X, params={"X_cov": var}, cv=cv)["test_score"]
    for score, (train, test) in zip(routed, cv.split(X)):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            fold = ExtremeDeconvolution(n_components=2, max_iter=20, random_state=0)
            fold.fit(X[train], X_cov=var[train])
        assert score == pytest.approx(fold.score(X[test], X_cov=var[test]))


def _log_mixture_density(points, weights, means, covs):
    from scipy.stats import multivariate_normal

    dens = [w * multivariate_normal(m, c).pdf(points) for w, m, c in zip(weights, means, covs)]
    return np.log(np.sum(dens, axis=0))


@pytest.mark.parametrize("noise", [None, "variances", "covariance"])
def test_condition_is_the_joint_density_over_the_marginal(noise):
    # a fitted 3-component mixture in 3-D, conditioned on coordinates 0 and 2 measured with
    # noise: its density must be log p(a, x_b) - log p(x_b) of the mixture whose known
    # block carries that noise, computed here from scipy's normal densities
    model = _mixture(d=3, seed=4)
    x, S, _, _ = _draw(model, 600, seed=4)
    xd = ExtremeDeconvolution(3, random_state=0).fit(x, X_cov=S)
    given = np.array([xd.means_[0, 0] + 0.3, np.nan, xd.means_[1, 2] - 0.2])
    cov = {"variances": np.array([0.3, 9.0, 0.1]),
           "covariance": np.array([[0.3, 5.0, 0.05], [5.0, 9.0, 5.0], [0.05, 5.0, 0.1]]),
           None: None}[noise]  # fmt: skip
    conditional = xd.condition(given, cov)
    assert conditional.n_features_in_ == 1 and conditional.means_.shape == (3, 1)
    noise_cov = np.zeros((3, 3))
    if cov is not None:
        noise_cov = np.diag(cov) if cov.ndim == 1 else cov.copy()
        noise_cov[1, :] = noise_cov[:, 1] = 0.0  # the free coordinate's entries are unused
    covs = xd.covariances_ + noise_cov
    grid = np.linspace(-8, 8, 41)
    joint = np.column_stack([np.full(41, given[0]), grid, np.full(41, given[2])])
    marginal = _log_mixture_density(given[[0, 2]][None], xd.weights_, xd.means_[:, [0, 2]],
                                    covs[:, [0, 2]][:, :, [0, 2]])  # fmt: skip
    expected = _log_mixture_density(joint, xd.weights_, xd.means_, covs) - marginal
    assert_allclose(conditional.score_samples(grid[:, None]), expected, rtol=1e-8, atol=1e-10)
    # sampling the conditional gives its mean
    draws, _ = conditional.set_params(random_state=1).sample(20000)
    mean = conditional.weights_ @ conditional.means_[:, 0]
    sd = np.sqrt(conditional.weights_ @ (conditional.covariances_[:, 0, 0]
                                         + (conditional.means_[:, 0] - mean) ** 2))  # fmt: skip
    assert abs(draws.mean() - mean) < 4 * sd / np.sqrt(20000)


def test_condition_keeps_names_and_refuses_what_it_cannot_read():
    pd = pytest.importorskip("pandas")
    model = _mixture(d=3, seed=1)
    v = _draw(model, 300, seed=1)[2]
    frame = pd.DataFrame(v, columns=["mag_g", "mag_r", "redshift"])
    xd = ExtremeDeconvolution(2, random_state=0).fit(frame)
    z = xd.condition([20.1, 19.5, np.nan])
    assert list(z.feature_names_in_) == ["redshift"]
    assert z.sample(3)[0].shape == (3, 1)
    with pytest.raises(ValueError, match="mark the ones to predict with NaN"):
        xd.condition([1.0, 2.0, 3.0])
    with pytest.raises(ValueError, match="one point of 3 values"):
        xd.condition(np.ones((2, 3)))
    with pytest.raises(ValueError, match=r"shape \(3,\), or their covariance"):
        xd.condition([1.0, np.nan, 3.0], np.ones(2))
    # nothing given: the mixture itself, with or without the noise of no value
    free = xd.condition([np.nan] * 3, X_cov=np.zeros(3))
    assert_allclose(free.means_, xd.means_)
    assert_allclose(free.means_, xd.condition([np.nan] * 3).means_)
    # a sparse side input is refused with the call that densifies it
    sparse = pytest.importorskip("scipy.sparse")
    with pytest.raises(ValueError, match=r"X_cov must be dense .* Pass X_cov.toarray\(\)"):
        ExtremeDeconvolution(2).fit(v, X_cov=sparse.csr_matrix(np.ones(v.shape)))


def test_condition_reads_a_labelled_point_by_its_labels():
    """A pandas Series is a labelled vector: its values are taken by name, not by position
    (reordered, it used to condition on the wrong features); a DataFrame must have the
    fitted names in order, as scikit-learn requires of every method."""
    pd = pytest.importorskip("pandas")
    model = _mixture(d=3, seed=1)
    v = _draw(model, 300, seed=1)[2]
    names = ["mag_g", "mag_r", "redshift"]
    xd = ExtremeDeconvolution(2, random_state=0).fit(pd.DataFrame(v, columns=names))
    point = pd.Series({"redshift": 0.4, "mag_r": np.nan, "mag_g": np.nan})
    noise = pd.Series({"mag_g": 0.0, "redshift": 0.01, "mag_r": 0.0})
    by_name = xd.condition(point, X_cov=noise)
    by_position = xd.condition([np.nan, np.nan, 0.4], X_cov=[0.0, 0.0, 0.01])
    assert list(by_name.feature_names_in_) == ["mag_g", "mag_r"]
    assert_array_equal(by_name.means_, by_position.means_)
    assert_array_equal(by_name.covariances_, by_position.covariances_)
    cov = pd.DataFrame(np.diag([0.0, 0.0, 0.01]), index=names, columns=names)
    assert_array_equal(xd.condition(point, X_cov=cov).means_, by_position.means_)
    with pytest.raises(ValueError, match=r"missing: \['mag_g'\]"):
        xd.condition(point.drop("mag_g"))
    with pytest.raises(ValueError, match=r"Write X\[names\]"):
        xd.condition(pd.DataFrame([[0.4, np.nan, np.nan]], columns=names[::-1]))
    with pytest.raises(ValueError, match=r"Write X_cov.loc\[names, names\]"):
        xd.condition(point, X_cov=cov.loc[names[::-1], names[::-1]])


def test_condition_takes_the_measured_values_by_name_from_a_dict():
    """XDGMM's X_dict and Xerr_dict: the values given by name, the others predicted."""
    pd = pytest.importorskip("pandas")
    model = _mixture(d=3, seed=1)
    v = _draw(model, 300, seed=1)[2]
    names = ["mag_g", "mag_r", "redshift"]
    xd = ExtremeDeconvolution(2, random_state=0).fit(pd.DataFrame(v, columns=names))
    by_dict = xd.condition({"redshift": 0.4}, X_cov={"redshift": 0.01})
    by_position = xd.condition([np.nan, np.nan, 0.4], X_cov=[0.0, 0.0, 0.01])
    assert list(by_dict.feature_names_in_) == ["mag_g", "mag_r"]
    assert_array_equal(by_dict.means_, by_position.means_)
    assert_array_equal(by_dict.covariances_, by_position.covariances_)
    with pytest.raises(ValueError, match=r"features not seen in fit: \['z'\]"):
        xd.condition({"z": 0.4})
    with pytest.raises(ValueError, match=r"'redshift': \(0.4, 0.1\), not one number .*"
                       r"X_cov=\{'redshift': error\*\*2\}"):  # fmt: skip
        xd.condition({"redshift": (0.4, 0.1)})
    unnamed = ExtremeDeconvolution(2, random_state=0).fit(v)
    with pytest.raises(ValueError, match="needs the feature names: fit on a pandas DataFrame"):
        unnamed.condition({"redshift": 0.4})


def test_a_square_noise_array_that_could_be_a_shared_covariance_is_refused():
    """With as many points as coordinates, X_cov of shape (p, p) could be each point's
    variances or one covariance for all: read as variances, a shared covariance gave a
    wrong answer without a word."""
    from scipy.special import logsumexp
    from scipy.stats import multivariate_normal

    model = _mixture(d=3, seed=2)
    x = _draw(model, 200, seed=2)[0]
    xd = ExtremeDeconvolution(2, random_state=0).fit(x)
    C = np.array([[1.0, 0.8, 0.0], [0.8, 1.0, 0.0], [0.0, 0.0, 0.5]])
    with pytest.raises(ValueError, match=r"ambiguous.*np.broadcast_to\(X_cov, \(3, 3, 3\)\)"):
        xd.score_samples(x[:3], X_cov=C)
    with pytest.raises(ValueError, match="ambiguous"):
        ExtremeDeconvolution(1).fit(x[:3], X_cov=C)
    shared = xd.score_samples(x[:3], X_cov=np.broadcast_to(C, (3, 3, 3)))
    direct = [logsumexp([np.log(w) + multivariate_normal.logpdf(p, m, V + C)
                         for w, m, V in zip(xd.weights_, xd.means_, xd.covariances_)])
              for p in x[:3]]  # fmt: skip
    assert_allclose(shared, direct, rtol=1e-10)
    # another number of points: the advice for a shared covariance
    with pytest.raises(
        ValueError, match=r"shared by every point, pass np.broadcast_to\(X_cov, \(2, 3, 3\)\)"
    ):
        xd.score_samples(x[:2], X_cov=C)
    # variances of as many points as coordinates, written unambiguously
    V = np.full((3, 3), 0.2)
    assert_allclose(xd.score_samples(x[:3], X_cov=V[:, :, None] * np.eye(3)),
                    xd.score_samples(x[:4], X_cov=np.full((4, 3), 0.2))[:3])  # fmt: skip


def test_astroml_habits_say_what_to_write():
    model = _mixture(d=2, seed=3)
    x, S, _, _ = _draw(model, 200, seed=3)
    xd = ExtremeDeconvolution(2, random_state=0).fit(x, X_cov=S)
    with pytest.raises(TypeError, match=r"takes X_cov=, not Xerr=.*fit\(X, X_cov=...\)"):
        ExtremeDeconvolution(2).fit(x, Xerr=S)
    with pytest.raises(TypeError, match=r"takes X_cov=, not ycovar= \(extreme-deconvolution's"):
        ExtremeDeconvolution(2).fit(x, ycovar=S)
    with pytest.raises(TypeError, match="takes sample_weight=, not weight="):
        ExtremeDeconvolution(2).fit(x, X_cov=S, weight=np.ones(len(x)))
    for method in ("score_samples", "predict", "predict_proba", "predict_log_proba",
                   "deconvolve", "bic", "aic"):  # fmt: skip
        with pytest.raises(TypeError, match=rf"write {method}\(X, X_cov=Xerr\)"):
            getattr(xd, method)(x, S)
    with pytest.raises(TypeError, match=r"that value as its first argument, not X_input="):
        xd.condition(X_input=[0.1, np.nan])
    with pytest.raises(TypeError, match="takes X_cov=, not Xerr_input="):
        xd.condition([0.1, np.nan], Xerr_input=[0.1, 0.0])
    for name, match in [
        ("logL", r"score\(X, X_cov=Xerr\)"),
        ("logprob_a", r"predict_log_proba\(X, X_cov=Xerr\) \+ score_samples"),
        ("mu", "means_"),
        ("V", "covariances_"),
        ("alpha", "weights_"),
        ("bic_test", r"bic\(X, X_cov=Xerr\)"),
        ("save_model", r"joblib.dump"),
        ("weights", r"\(xdgmm's\); write weights_"),
        ("labels", r"write feature_names_in_"),
    ]:
        with pytest.raises(AttributeError, match=match):
            getattr(xd, name)
    for name, match in [
        ("mu", r"means_init=mu"),
        ("V", r"precisions_init=np.linalg.inv\(V\)"),
        ("weights", r"weights_init=weights"),
        ("filename", r"joblib.load"),
        ("labels", r"pandas DataFrame"),
        ("covariance_type", r"GaussianMixture's name.*full covariance"),
    ]:
        with pytest.raises(TypeError, match=match):
            ExtremeDeconvolution(2, **{name: None})
    with pytest.raises(ValueError, match="one here. Drop it"):
        ExtremeDeconvolution(2, method="Bovy").fit(x, X_cov=S)
    # the advice for logprob_a is astroML's per-component log(alpha_j N_j), finite also
    # for points so far from a component that predict_proba underflows to 0 there
    from scipy.stats import multivariate_normal

    far = np.vstack([x[:5], xd.means_[0] + 400.0 * np.sqrt(np.diag(xd.covariances_[0]))])
    far_cov = np.concatenate([S[:5], 0.01 * np.eye(2)[None]])
    per_component = (xd.predict_log_proba(far, X_cov=far_cov)
                     + xd.score_samples(far, X_cov=far_cov)[:, None])  # fmt: skip
    direct = np.array([[np.log(w) + multivariate_normal.logpdf(p, m, V + c)
                        for w, m, V in zip(xd.weights_, xd.means_, xd.covariances_)]
                       for p, c in zip(far, far_cov)])  # fmt: skip
    assert np.isfinite(per_component).all()
    assert (xd.predict_proba(far, X_cov=far_cov) == 0).any()
    assert_allclose(per_component, direct, rtol=1e-10)
    assert_allclose(np.exp(xd.predict_log_proba(x, X_cov=S)), xd.predict_proba(x, X_cov=S))
    # XDGMM's names of condition's arguments, and astroML's shape of draws
    with pytest.raises(TypeError, match="first argument, not X_dict= \\(XDGMM's name\\)"):
        xd.condition(X_dict={"a": 0.1})
    with pytest.raises(TypeError, match="takes X_cov=, not Xerr_dict="):
        xd.condition([0.1, np.nan], Xerr_dict={"a": 0.1})
    with pytest.raises(TypeError, match=r"sample\(6\) and X.reshape\(2, 3, -1\)"):
        xd.sample((2, 3))
    with pytest.raises(TypeError, match=r"sample\(6\) and X.reshape\(2, 3, -1\)"):
        xd.sample(size=(2, 3))
    # the methods keep their signatures (scikit-learn's metadata routing reads them)
    import inspect

    assert "X_cov" in inspect.signature(ExtremeDeconvolution.fit).parameters


def test_missing_coordinates_written_as_infinite_variances_are_sent_to_nan():
    model = _mixture(d=2, seed=4)
    x, S, _, _ = _draw(model, 100, seed=4)
    V = np.abs(np.diagonal(S, axis1=1, axis2=2)).copy()
    V[:10, 1] = np.inf
    with pytest.raises(ValueError, match="not measured is NaN in X"):
        ExtremeDeconvolution(2).fit(x, X_cov=V)
    full = np.stack([np.diag(v) for v in V])
    with pytest.raises(ValueError, match="not measured is NaN in X"):
        ExtremeDeconvolution(2).fit(x, X_cov=full)


def test_sample_draws_independently_from_a_generator_given_to_the_call():
    model = _mixture(d=2, seed=5)
    x = _draw(model, 300, seed=5)[2]
    xd = ExtremeDeconvolution(2, random_state=0).fit(x)
    # scikit-learn's convention: an integer random_state repeats the draws
    assert_array_equal(xd.sample(4)[0], xd.sample(4)[0])
    rng = np.random.default_rng(1)
    first, second = xd.sample(4, random_state=rng)[0], xd.sample(4, random_state=rng)[0]
    assert not np.array_equal(first, second)
    assert_array_equal(xd.sample(4, random_state=7)[0], xd.sample(4, random_state=7)[0])
    with pytest.raises(TypeError, match=r"must be an integer; got 1.5. Write sample\(1\)"):
        xd.sample(1.5)
    with pytest.raises(TypeError, match=r"astroML's size: write sample\(10\)"):
        xd.sample(size=10)


def test_fit_predict_is_fit_then_predict():
    model = _mixture(seed=2)
    x, S, _, _ = _draw(model, 300, seed=2)
    labels = ExtremeDeconvolution(3, random_state=0).fit_predict(x, X_cov=S)
    xd = ExtremeDeconvolution(3, random_state=0).fit(x, X_cov=S)
    assert_array_equal(labels, xd.predict(x, X_cov=S))


def test_a_batch_larger_than_the_data_and_tiny_weights_change_nothing():
    """A minibatch of more points than the data is a pass over all of them, and a uniform
    rescaling of the weights (even to 1e-20) gives the same fit: the weights are relative.
    Before, the online statistics started with the weight of batch_size points, so a batch
    of 10**9 left the fit at its start, and the start's one-point shrinkage ignored points
    of tiny weight (both components at the overall mean)."""
    rng = np.random.default_rng(0)
    X = np.vstack([rng.normal(0, 1, (100, 2)), rng.normal(5, 1, (100, 2))])
    kw = dict(n_components=2, solver="minibatch_em", max_iter=100, random_state=0)
    whole = ExtremeDeconvolution(batch_size=200, **kw).fit(X)
    huge = ExtremeDeconvolution(batch_size=10**9, **kw).fit(X)
    assert_array_equal(huge.means_, whole.means_)
    plain = ExtremeDeconvolution(2, random_state=0).fit(X)
    for w in (1e-20, 1e-10, 0.5):
        weighted = ExtremeDeconvolution(2, random_state=0).fit(X, sample_weight=np.full(200, w))
        assert_allclose(weighted.means_, plain.means_, atol=1e-12)
    assert np.abs(plain.means_[0] - plain.means_[1]).max() > 4


@pytest.mark.parametrize("solver", ["em", "minibatch_em", "sgd"])
def test_every_solver_warns_when_max_iter_comes_before_tol(solver):
    rng = np.random.default_rng(0)
    X = np.vstack([rng.normal(0, 1, (100, 2)), rng.normal(5, 1, (100, 2))])
    est = ExtremeDeconvolution(2, solver=solver, max_iter=1, batch_size=50, random_state=0)
    with pytest.warns(ConvergenceWarning, match="did not converge in max_iter=1"):
        est.fit(X)
    assert not est.converged_
