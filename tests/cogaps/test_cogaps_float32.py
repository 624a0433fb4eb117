"""CoGAPS on float32 data: the residual and precisions stored in float32, sums in float64.

The float32 chain is its own chain (its residual is rounded), so it is compared with the
float64 one statistically, and with itself for threads, parallel paths and warm starts,
bit for bit. The published GIST result in float32 is tested in test_cogaps.py.
"""

import pickle

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal
from scipy import sparse
from threadpoolctl import threadpool_limits

from sklearn_cogaps import CoGAPS, match_components
from sklearn_cogaps._cogaps._chisq import fit_chi_square, residual
from sklearn_cogaps._cogaps._sampler import GibbsSampler
from sklearn_cogaps._cogaps._uncertainty import precision as _precision
from sklearn_cogaps.datasets import make_patterns

from _shared import every_path_parallel

# Short chains, compared with each other bit for bit or with the float64 chain of the same
# length: whether they have converged is not what these tests are about.
pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")


@pytest.fixture(scope="module")
def data():
    X, W, H = make_patterns(n_samples=30, n_features=80, n_components=3, random_state=3)
    return X.astype(np.float32), W, H


def _fit(X, n_threads=1, **kwargs):
    fit_kwargs = {k: kwargs.pop(k) for k in ("fixed_components", "fixed_patterns") if k in kwargs}
    est = CoGAPS(n_components=3, max_iter=40, random_state=0, **kwargs)
    with threadpool_limits(n_threads, user_api="openmp"):
        est.fit(X, **fit_kwargs)
        W = est.transform(X[:5])
    return est, W


def _outputs(est, W):
    return (
        est.loadings_,
        est.loadings_std_,
        est.components_,
        est.components_std_,
        est.objective_history_,
        np.array([est.chisq_]),
        W,
    )


@pytest.mark.parametrize("fixed", [None, "fixed_components", "fixed_patterns", "reversible"])
def test_float32_chain_is_the_same_for_threads_and_parallel_paths(data, fixed):
    X, W, H = data
    if fixed == "reversible":  # the other birth and death reads the same statistics
        kwargs = {"solver": "reversible"}
    else:
        kwargs = {} if fixed is None else {fixed: H if fixed == "fixed_components" else W}
    runs = [_fit(X, 1, **kwargs), _fit(X, 2, **kwargs)]
    with every_path_parallel():
        runs.append(_fit(X, 2, **kwargs))
    est, Wt = runs[0]
    for name in ("loadings_", "loadings_std_", "components_", "components_std_"):
        assert getattr(est, name).dtype == np.float32, name
    assert Wt.dtype == np.float32
    for other in runs[1:]:
        for a, b in zip(_outputs(*runs[0]), _outputs(*other)):
            assert_array_equal(a, b)


def test_float32_fit_agrees_with_float64_on_the_same_values(data):
    X, _, _ = data
    e32, w32 = _fit(X)
    e64, w64 = _fit(X.astype(np.float64))
    assert e64.components_.dtype == np.float64
    # two chains: the float32 one rounds its residual, so they are compared statistically
    assert abs(e32.chisq_ - e64.chisq_) <= 0.02 * e64.chisq_, (e32.chisq_, e64.chisq_)
    _, corr = match_components(e64.loadings_, e32.loadings_.astype(np.float64))
    assert np.all(corr > 0.99), corr
    # the uncertainty is rounded to float32 precisions, the same for both chains' score
    assert np.isfinite(e32.score(X))
    np.testing.assert_allclose(w32, w64, rtol=0.05, atol=0.05 * float(w64.max()))


def test_float32_residual_stays_within_rounding_of_the_exact_one(data):
    """The residual is recomputed in float64 at every iteration and rounded once, so the
    chi-square of the stored residual stays within float32 rounding of the exact one."""
    X, _, _ = data
    X = np.ascontiguousarray(np.vstack([X] * 4))  # more rows, more updates per iteration
    prec = _precision(np.maximum(0.1 * X.astype(np.float64), 0.1), np.float32)
    n, m = X.shape
    sampler = GibbsSampler(
        X.copy(),
        prec,
        np.zeros((n, 3)),
        np.zeros((m, 3)),
        0.01,
        0.01,
        0.5,
        0.5,
        100.0,
        100.0,
        7,
        X=X,
    )
    assert sampler.f32
    worst = 0.0
    for it in range(60):
        sampler.iterate(min(1.0, (it + 1) / 30))
        exact = fit_chi_square(X.astype(np.float64), prec.astype(np.float64), sampler.W, sampler.Ht)
        worst = max(worst, abs(sampler.chi_square() - exact) / exact)
    assert worst < 1e-4, worst


def test_float32_warm_start_is_the_uninterrupted_chain(data):
    """The float32 residual is a function of X and the matrices at every iteration start,
    so a chain stopped, saved and continued from its state is the chain run in one go."""
    X, _, _ = data
    prec = _precision(np.maximum(0.1 * X.astype(np.float64), 0.1), np.float32)
    n, m = X.shape
    args = (0.01, 0.01, 0.5, 0.5, 100.0, 100.0, 11)
    one = GibbsSampler(X.copy(), prec, np.zeros((n, 3)), np.zeros((m, 3)), *args, X=X)
    two = GibbsSampler(X.copy(), prec, np.zeros((n, 3)), np.zeros((m, 3)), *args, X=X)
    for _ in range(20):
        one.iterate(1.0)
    for _ in range(10):
        two.iterate(1.0)
    state = pickle.loads(pickle.dumps(two.get_state()))
    three = GibbsSampler(
        residual(X, state["W"], state["Ht"]), prec, state["W"], state["Ht"], *args, state=state, X=X
    )
    for _ in range(10):
        three.iterate(1.0)
    assert_array_equal(one.W, three.W)
    assert_array_equal(one.Ht, three.Ht)
    # and through the estimator, with a pickle between the fits
    est = CoGAPS(n_components=3, max_iter=20, random_state=0, warm_start=True).fit(X)
    restored = pickle.loads(pickle.dumps(est))
    est.fit(X)
    restored.fit(X)
    assert est.components_.dtype == np.float32
    assert_array_equal(est.components_, restored.components_)
    assert_array_equal(est.objective_history_, restored.objective_history_)


def test_float32_transform_is_row_wise(data):
    X, _, _ = data
    est, _ = _fit(X)
    all_rows = est.transform(X)
    assert all_rows.dtype == np.float32
    assert_array_equal(est.transform(X[[3]]), all_rows[[3]])
    assert_array_equal(est.transform(X[::-1])[::-1], all_rows)
    # a float64 batch on a float32 fit returns float64
    assert est.transform(X.astype(np.float64)).dtype == np.float64
    # and the reconstruction keeps the factors' precision, as scikit-learn's NMF does
    assert est.inverse_transform(all_rows).dtype == np.float32
    assert est.inverse_transform(all_rows.astype(np.float64)).dtype == np.float64
    assert_allclose(est.inverse_transform(all_rows), all_rows @ est.components_, rtol=1e-6)


def test_sparse_model_returns_float32_from_its_float64_computation(data):
    X, _, _ = data
    X = X.copy()
    X[X < np.quantile(X, 0.5)] = 0
    e32 = CoGAPS(n_components=3, max_iter=30, random_state=0).fit(sparse.csr_matrix(X))
    e64 = CoGAPS(n_components=3, max_iter=30, random_state=0).fit(
        sparse.csr_matrix(X.astype(np.float64))
    )
    assert e32.components_.dtype == np.float32
    assert_array_equal(e32.components_, e64.components_.astype(np.float32))
    assert e32.transform(sparse.csr_matrix(X)).dtype == np.float32


def test_float32_refuses_precisions_outside_its_range(data):
    X, _, _ = data
    with pytest.raises(ValueError, match="outside the normal range of float32.*X.astype"):
        CoGAPS(n_components=3, max_iter=5).fit(X, uncertainty=np.full(X.shape, 1e-25))
    # the same uncertainty is fine in float64
    CoGAPS(n_components=3, max_iter=5).fit(
        X.astype(np.float64), uncertainty=np.full(X.shape, 1e-25)
    )
