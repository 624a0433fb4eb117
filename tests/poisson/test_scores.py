"""scHPF's cell and gene scores: ``loading_scores`` and ``component_scores``."""

import warnings

import numpy as np
import pytest
from numpy.testing import assert_allclose
from scipy import sparse
from sklearn.exceptions import ConvergenceWarning

from sklearn_cogaps import HierarchicalPMF, WeightedBackgroundPMF
from sklearn_cogaps._poisson._scores import hierarchical_scores

K = 4
N_SPECIFIC = 20


def _specific_and_abundant(seed=1, n=300):
    """Counts whose components each have 20 genes of their own, beside 20 abundant genes
    that every component expresses six times more: the abundant genes top every
    component's weights, the specific ones its scores."""
    rng = np.random.default_rng(seed)
    weights = np.zeros((K, K * N_SPECIFIC + 20))
    for k in range(K):
        weights[k, k * N_SPECIFIC : (k + 1) * N_SPECIFIC] = rng.gamma(2.0, 1.0, N_SPECIFIC)
    weights[:, K * N_SPECIFIC :] = 6 * rng.gamma(2.0, 1.0, (K, 20))
    depth = rng.gamma(4.0, 0.5, n)
    loadings = rng.dirichlet(np.full(K, 0.3), n) * depth[:, None]
    return rng.poisson(loadings @ weights)


def _specific_share(scores):
    """Per component, the share of its top 20 features that are specific genes."""
    return np.array(
        [np.isin(np.argsort(-row)[:N_SPECIFIC], np.arange(K * N_SPECIFIC)).mean() for row in scores]
    )


@pytest.fixture(scope="module")
def counts():
    return _specific_and_abundant()


@pytest.fixture(scope="module")
def hpmf(counts):
    return HierarchicalPMF(K, random_state=0).fit(counts)


def test_gene_scores_rank_specific_genes_first(hpmf):
    # by components_, the abundant genes fill most of each component's top 20
    assert _specific_share(hpmf.components_).max() <= 0.3
    assert _specific_share(hpmf.component_scores()).min() >= 0.9


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_weighted_background_scores_are_its_relative_factors(counts):
    model = WeightedBackgroundPMF(K, random_state=0, max_iter=100).fit(counts)
    scores = model.component_scores()
    assert_allclose(scores, model.components_mean_)
    assert _specific_share(scores).mean() >= 0.6 > _specific_share(model.components_).max()
    # cell scores: each topic's share of the row's expected counts
    shares = model.loading_scores()
    expected = model.loadings_ * model.components_.sum(axis=1)
    assert_allclose(shares, expected / expected.sum(axis=1, keepdims=True))
    assert_allclose(shares.sum(axis=1), 1.0)
    new = model.transform(counts[:20]) * model.components_.sum(axis=1)
    assert_allclose(model.loading_scores(counts[:20]), new / new.sum(axis=1, keepdims=True))


def test_scores_do_not_depend_on_the_scale_of_a_component(hpmf):
    L, F = hpmf.loadings_, hpmf.components_.T
    rows, features, scale, _ = hierarchical_scores(
        L, F, hpmf.prior_loadings_shape_, hpmf.prior_components_shape_
    )
    s = np.array([1.0, 1e-3, 7.0, 1e4])
    rows2, features2, scale2, _ = hierarchical_scores(
        L * s, F / s, hpmf.prior_loadings_shape_, hpmf.prior_components_shape_
    )
    assert_allclose(rows2, rows, rtol=1e-10)
    assert_allclose(features2, features, rtol=1e-10)
    assert_allclose(scale2 * s, scale, rtol=1e-10)


def test_scales_and_capacities_are_schpf_fixed_point():
    # at the returned scales, scHPF's update of q(xi), q(eta) is a fixed point and its bound
    # is stationary in each component's scale
    rng = np.random.default_rng(3)
    L, F = rng.gamma(0.3, 2.0, (50, 3)), rng.gamma(0.3, 5.0, (40, 3))
    a, c = np.full(3, 0.3), np.full(3, 0.3)
    rows, features, s, (bp, dp) = hierarchical_scores(L, F, a, c)
    xi = (1 + a.sum()) / (bp + L @ s)
    eta = (1 + c.sum()) / (dp + F @ (1 / s))
    assert_allclose(rows, L * s * xi[:, None])
    assert_allclose(features, F / s * eta[:, None])
    gradient = (50 * a - 40 * c) / s - xi @ L + (eta @ F) / s**2
    assert_allclose(gradient * s, 0, atol=1e-9 * np.abs(xi @ L * s).max())
    totals_r, totals_c = (L @ F.T).sum(1), (L @ F.T).sum(0)
    assert_allclose(bp, totals_r.mean() / totals_r.var())
    assert_allclose(dp, max(totals_c.mean() / totals_c.var(), bp / 1000))


def test_cell_scores_divide_out_depth(hpmf, counts):
    # one composition at two depths: the loadings differ tenfold, the scores much less
    rng = np.random.default_rng(0)
    mean = np.array([0.7, 0.3, 0, 0]) @ hpmf.components_
    rows = np.vstack([rng.poisson(300 * mean / mean.sum()), rng.poisson(3000 * mean / mean.sum())])
    loadings, scores = hpmf.transform(rows), hpmf.loading_scores(rows)
    assert loadings[1].sum() / loadings[0].sum() > 8
    assert scores[1].sum() / scores[0].sum() < 1.5
    # new rows share the training rows' scales: a row's scores are its loadings times s_k
    # times one capacity per row
    _, _, scale, _ = hpmf._hierarchical_scores()
    ratio = scores / (loadings * scale)
    assert_allclose(ratio, ratio[:, :1] * np.ones(K), rtol=1e-12)


@pytest.mark.parametrize(
    "name, advice",
    [("cell_score", "loading_scores()"), ("gene_score", "component_scores().T")],
)
def test_schpf_names_say_what_to_call(hpmf, name, advice):
    with pytest.raises(AttributeError, match=advice.replace("(", r"\(").replace(")", r"\)")):
        getattr(hpmf, name)()


def test_scores_of_an_unfitted_model_refuse():
    from sklearn.exceptions import NotFittedError

    for est in (HierarchicalPMF(2), WeightedBackgroundPMF(2)):
        with pytest.raises(NotFittedError):
            est.loading_scores()
        with pytest.raises(NotFittedError):
            est.component_scores()


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
@pytest.mark.parametrize("Estimator", [HierarchicalPMF, WeightedBackgroundPMF])
def test_float32_counts_give_float32_scores(counts, Estimator):
    model = Estimator(K, random_state=0, max_iter=20).fit(counts.astype(np.float32))
    assert model.loading_scores().dtype == np.float32
    assert model.loading_scores(counts[:5].astype(np.float32)).dtype == np.float32
    assert model.component_scores().dtype == np.float32
    assert model.loading_scores(counts[:5]).dtype == np.float64  # as transform


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_scores_of_rows_and_features_without_counts_warn(counts):
    # genes never detected get scores above detected genes (their capacity is large where
    # their weight is small), which the warning says; scHPF's prep drops them
    X = counts.astype(float)
    X[:, :5] = 0
    X[:3] = 0
    X[:, 7] = 0
    model = HierarchicalPMF(K, random_state=0, max_iter=50).fit(X)
    with pytest.warns(UserWarning, match=r"6 features .* no count \(0, 1, 2, 3, 4, \.\.\.\)"):
        gene_scores = model.component_scores()
    ranks = np.argsort(np.argsort(-gene_scores, axis=1), axis=1)
    assert ranks[:, :5].max() < 50  # above half of the detected genes in every component
    with pytest.warns(UserWarning, match=r"3 rows .* no count \(0, 1, 2\)"):
        model.loading_scores()
    with warnings.catch_warnings():  # new rows' scores, and a model without empty lines
        warnings.simplefilter("error", UserWarning)
        warnings.simplefilter("ignore", ConvergenceWarning)
        model.loading_scores(counts[:4])
        model.fit(counts).component_scores()
        model.loading_scores()
    da = pytest.importorskip("dask.array")
    for out_of_core in (sparse.csr_matrix(X), da.from_array(X, chunks=(70, 100))):
        model = HierarchicalPMF(K, random_state=0, max_iter=2).fit(out_of_core)
        with pytest.warns(UserWarning, match=r"6 features .* \(0, 1, 2, 3, 4, \.\.\.\)"):
            model.component_scores()
