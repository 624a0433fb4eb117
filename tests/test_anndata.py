"""fit_anndata: an estimator run on a real AnnData, its results written back as scanpy does."""

import sys
import warnings

import numpy as np
import pytest
from numpy.testing import assert_array_equal
from scipy import sparse
from sklearn.exceptions import ConvergenceWarning

anndata = pytest.importorskip("anndata", reason="the AnnData helper needs anndata")
import pandas as pd  # noqa: E402  (a dependency of anndata)

from sklearn_cogaps import (  # noqa: E402
    CoGAPS,
    ExtremeDeconvolution,
    HierarchicalPMF,
    WeightedBackgroundPMF,
)
from sklearn_cogaps.anndata import fit_anndata, read_anndata_matrix  # noqa: E402
from sklearn_cogaps.datasets import make_patterns  # noqa: E402


@pytest.fixture(scope="module")
def expression():
    X, _, _ = make_patterns(n_samples=20, n_features=30, n_components=2, random_state=0)
    return X


def _adata(X, **kwargs):
    return anndata.AnnData(
        X,
        obs=pd.DataFrame(index=[f"cell{i}" for i in range(X.shape[0])]),
        var=pd.DataFrame(index=[f"gene{j}" for j in range(X.shape[1])]),
        **kwargs,
    )


def test_cogaps_results_in_obsm_varm_uns_and_through_h5ad(expression, tmp_path):
    adata = _adata(expression)
    model = CoGAPS(n_components=2, max_iter=30, random_state=0)
    assert fit_anndata(adata, model) is None
    expected = CoGAPS(n_components=2, max_iter=30, random_state=0).fit(expression)
    assert_array_equal(adata.obsm["X_cogaps"], expected.loadings_)
    assert_array_equal(adata.obsm["X_cogaps_std"], expected.loadings_std_)
    assert_array_equal(adata.varm["cogaps_components"], expected.components_.T)
    assert_array_equal(adata.varm["cogaps_components_std"], expected.components_std_.T)
    uns = adata.uns["cogaps"]
    assert (
        uns["estimator"] == "CoGAPS" and uns["n_iter"] == 60 and uns["trace_name"] == "chi-square"
    )
    assert_array_equal(uns["objective_history"], expected.objective_history_)
    assert uns["chisq"] == expected.chisq_ and uns["uncertainty_model"] == "relative"
    assert uns["params"]["n_components"] == 2 and uns["params"]["random_state"] == 0
    assert uns["n_calibration_iter"] == 30 and uns["converged"] == expected.converged_
    assert uns["complete"] and uns["status"] == "complete"
    assert "rhat_chisq" not in uns
    assert_array_equal(model.components_, expected.components_)  # fitted in place
    # the results survive a round trip through an .h5ad file
    adata.write_h5ad(tmp_path / "a.h5ad")
    back = anndata.read_h5ad(tmp_path / "a.h5ad")
    assert_array_equal(back.obsm["X_cogaps"], expected.loadings_)
    assert_array_equal(back.uns["cogaps"]["objective_history"], expected.objective_history_)
    assert back.uns["cogaps"]["params"]["sparse_optimization"] == np.False_


def test_several_chains_stopped_by_tol_record_their_phases(expression):
    """The calibration that the diagnostics ended (not max_iter) and the chains' R-hat."""
    adata = _adata(expression)
    model = CoGAPS(n_components=2, max_iter=1000, n_chains=2, tol=0.5, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        fit_anndata(adata, model)
    uns = adata.uns["cogaps"]
    assert uns["n_calibration_iter"] == model.n_calibration_iter_ < 1000
    assert uns["n_iter"] == model.n_iter_ and uns["n_chains"] == 2
    assert uns["rhat_chisq"] == model.rhat_["chisq"]
    assert uns["ess_bulk_chisq"] == model.ess_bulk_["chisq"]


def test_a_sparse_layer_a_key_and_a_copy(expression):
    counts = np.round(expression * 3)
    adata = _adata(np.zeros_like(expression), layers={"counts": sparse.csr_matrix(counts)})
    model = HierarchicalPMF(n_components=2, max_iter=30, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        out = fit_anndata(adata, model, layer="counts", key_added="hpf", copy=True)
        expected = HierarchicalPMF(n_components=2, max_iter=30, random_state=0).fit(
            sparse.csr_matrix(counts)
        )
    assert out is not adata and "X_hpf" not in adata.obsm and "hpf" not in adata.uns
    assert_array_equal(out.obsm["X_hpf"], expected.loadings_)
    assert_array_equal(out.varm["hpf_components"], expected.components_.T)
    uns = out.uns["hpf"]
    assert uns["trace_name"] == "ELBO" and uns["estimator"] == "HierarchicalPMF"
    assert_array_equal(uns["objective_history"], np.asarray(expected.objective_history_))
    assert uns["lower_bound"] == expected.lower_bound_
    assert "X_hpf_std" not in out.obsm  # no posterior standard deviation to store
    assert uns["layer"] == "counts"  # which matrix the results describe
    # transform(adata) reads .X, not the fitted layer: said, not done in silence
    with pytest.warns(UserWarning, match="fitted on the layer 'counts'"):
        model.transform(out)
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=".*fitted on the layer")
        warnings.filterwarnings("ignore", message="X does not have valid feature names")
        model.transform(out.layers["counts"])


def test_scanpy_options_are_answered_with_what_to_write(expression):
    adata = _adata(expression)
    adata.raw = adata
    model = CoGAPS(n_components=2, max_iter=5, random_state=0)
    for name, value, advice in (
        (
            "use_raw",
            True,
            r"fit_anndata reads adata.X.* raw = adata.raw.to_adata\(\); "
            r"fit_anndata\(raw, model\).*'X_cogaps'",
        ),
        ("n_comps", 2, r"the number of factors is .*: CoGAPS\(n_components=...\)"),
        ("inplace", False, r"fit_anndata stores the results in adata .* \(copy=True\)"),
        (
            "use_highly_variable",
            True,
            r"select the genes first: fit_anndata\(adata\[:, adata.var\['highly_variable'\]\]",
        ),
    ):
        with pytest.raises(TypeError, match=f"no option '{name}' \\(scanpy's\\): {advice}"):
            fit_anndata(adata, model, **{name: value})
    assert not hasattr(model, "components_") and "cogaps" not in adata.uns
    # the results of a fit to .X say so
    fit_anndata(adata, model)
    assert adata.uns["cogaps"]["layer"] == "X"


def test_a_key_reused_by_another_fit_keeps_nothing_of_the_first(expression):
    adata = _adata(expression)
    fit_anndata(adata, CoGAPS(n_components=3, max_iter=20, random_state=0), key_added="nmf")
    assert adata.obsm["X_nmf_std"].shape == (20, 3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        fit_anndata(
            adata, HierarchicalPMF(n_components=2, max_iter=10, random_state=0), key_added="nmf"
        )
    assert adata.obsm["X_nmf"].shape == (20, 2)
    assert "X_nmf_std" not in adata.obsm and "nmf_components_std" not in adata.varm


def test_weighted_background_and_fit_params(expression):
    counts = np.round(expression * 3)
    adata = _adata(counts)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        fit_anndata(adata, WeightedBackgroundPMF(n_components=2, max_iter=10, random_state=0))
    key = "weightedbackgroundpmf"
    assert adata.obsm[f"X_{key}"].shape == (20, 2)
    assert adata.varm[f"{key}_components"].shape == (30, 2)
    # keyword arguments reach fit: CoGAPS with its uncertainty from a layer
    sigma = np.maximum(0.2 * expression, 0.3)
    adata = _adata(expression, layers={"sigma": sigma})
    fit_anndata(
        adata,
        CoGAPS(n_components=2, max_iter=10, random_state=1),
        uncertainty=adata.layers["sigma"],
    )
    expected = CoGAPS(n_components=2, max_iter=10, random_state=1).fit(
        expression, uncertainty=sigma
    )
    assert adata.uns["cogaps"]["chisq"] == expected.chisq_


def test_results_of_a_fitted_estimator_without_refitting(expression):
    model = CoGAPS(n_components=2, max_iter=10, random_state=0).fit(expression)
    adata = _adata(expression)
    fit_anndata(adata, model, refit=False, key_added="mine")
    assert_array_equal(adata.obsm["X_mine"], model.loadings_)
    with pytest.raises(ValueError, match="fitted to 20 samples x 30 features; adata has 5"):
        fit_anndata(_adata(expression[:5]), model, refit=False)
    # a model fitted with gene names stores its results under those genes only
    named = _adata(expression)
    reversed_genes = named[:, named.var_names[::-1]].copy()
    by_name = CoGAPS(n_components=2, max_iter=10, random_state=0).fit(reversed_genes)
    with pytest.raises(ValueError, match="the same genes in another order than adata.var_names"):
        fit_anndata(named, by_name, refit=False)
    fit_anndata(reversed_genes, by_name, refit=False)
    assert_array_equal(reversed_genes.varm["cogaps_components"], by_name.components_.T)
    with pytest.raises(TypeError, match=r"refit=False\) does not fit, so it cannot use"):
        fit_anndata(adata, model, refit=False, uncertainty="poisson")
    # and its results under its cells: sorted by cluster after the fit, or another AnnData
    # of the same shape, each cell would get another's patterns
    by_cells = CoGAPS(n_components=2, max_iter=10, random_state=0).fit(named)
    with pytest.raises(ValueError, match="the same cells in another order than adata.obs_n"):
        fit_anndata(named[::-1].copy(), by_cells, refit=False)
    other = named.copy()
    other.obs_names = [f"other{i}" for i in range(other.n_obs)]
    with pytest.raises(ValueError, match="fitted to other cells than adata.obs_names"):
        fit_anndata(other, by_cells, refit=False)
    fit_anndata(named, by_cells, refit=False)  # its own cells
    # AnnData's own names (0, 1, ...) are positions beside names given after the fit
    plain = named.copy()
    plain.obs_names = [str(i) for i in range(plain.n_obs)]
    numbered = CoGAPS(n_components=2, max_iter=10, random_state=0).fit(plain)
    fit_anndata(named, numbered, refit=False)
    fit_anndata(plain, by_cells, refit=False)
    with pytest.raises(ValueError, match="same cells in another order"):
        fit_anndata(plain[::-1].copy(), numbered, refit=False)
    # a later fit to a plain matrix forgets them
    by_cells.fit(expression)
    fit_anndata(other, by_cells, refit=False)


def test_explicit_sets_of_repeated_cell_names_are_refused(expression):
    # anndata.concat keeps each batch's barcodes: a name says neither row
    a, b = _adata(expression), _adata(expression)
    both = anndata.concat([a, b])
    model = CoGAPS(n_components=2, max_iter=10, random_state=0, distributed="single-cell",
                   explicit_sets=[a.obs_names[:10], a.obs_names[10:]])  # fmt: skip
    with pytest.raises(ValueError, match=r"20 names of X's samples repeat .*index_unique"):
        fit_anndata(both, model)


def test_backed_files_are_read_without_loading_the_rest(expression, tmp_path):
    path = tmp_path / "b.h5ad"
    _adata(expression, layers={"s": sparse.csr_matrix(expression)}).write_h5ad(path)
    backed = anndata.read_h5ad(path, backed="r")
    try:
        assert_array_equal(read_anndata_matrix(backed), expression)
        S = read_anndata_matrix(backed, "s")
        assert sparse.isspmatrix_csr(S) or isinstance(S, sparse.csr_array)
        assert_array_equal(S.toarray(), expression)
    finally:
        backed.file.close()


def test_errors_say_what_to_do(expression, monkeypatch):
    adata = _adata(expression)
    with pytest.raises(KeyError, match="no layer 'counts'; its layers are"):
        fit_anndata(adata, CoGAPS(), layer="counts")
    with pytest.raises(TypeError, match="must be an anndata.AnnData; got ndarray"):
        fit_anndata(expression, CoGAPS())
    with pytest.raises(TypeError, match="not a factorisation"):
        fit_anndata(adata, ExtremeDeconvolution(n_components=2, tol=1e-2, random_state=0))
    with pytest.raises(TypeError, match="must be a scikit-learn estimator"):
        fit_anndata(adata, "CoGAPS")
    # a Pipeline or scikit-learn's NMF would receive the AnnData (numpy failed on it)
    from sklearn.decomposition import NMF
    from sklearn.pipeline import make_pipeline

    for other in (NMF(2), make_pipeline(CoGAPS(n_components=2))):
        with pytest.raises(TypeError, match=r"does not\. Fit it on the matrix"):
            fit_anndata(adata, other)
    monkeypatch.setitem(sys.modules, "anndata", None)
    with pytest.raises(ImportError, match=r"pip install \"sklearn_cogaps\[anndata\]\""):
        fit_anndata(adata, CoGAPS())


def test_the_fitted_estimator_knows_the_genes_and_refuses_them_reordered(expression):
    """As after fit(adata): an AnnData whose genes are in another order is refused, not
    transformed position by position; the markers are named."""
    adata = _adata(expression, layers={"counts": np.round(expression * 3)})
    for layer in (None, "counts"):
        model = CoGAPS(n_components=2, max_iter=5, random_state=0)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            fit_anndata(adata, model, layer=layer)
        assert_array_equal(model.feature_names_in_, adata.var_names)
        assert str(model.pattern_markers()[0][0][0]).startswith("gene")
        reordered = adata[:, adata.var_names[::-1]].copy()
        with pytest.raises(ValueError, match="var_names differ"):
            model.transform(reordered)


def test_labelled_side_inputs_are_checked_against_the_cells_and_genes(expression):
    """As fit(adata) does: an uncertainty or a fixed matrix given as a DataFrame whose
    labels are in another order is refused, from .X and from a layer alike, and one in
    the AnnData's order is used as it is."""
    adata = _adata(expression, layers={"counts": np.round(expression * 3)})
    rng = np.random.RandomState(0)
    U = pd.DataFrame(
        rng.uniform(0.1, 2, expression.shape), index=adata.obs_names, columns=adata.var_names
    )
    H = pd.DataFrame(
        rng.uniform(0, 1, (2, expression.shape[1])), index=["p0", "p1"], columns=adata.var_names
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        for layer in (None, "counts"):
            with pytest.raises(ValueError, match="another order"):
                fit_anndata(
                    adata, CoGAPS(2, max_iter=5), layer=layer, uncertainty=U.iloc[::-1, ::-1]
                )
            with pytest.raises(ValueError, match="another order"):
                fit_anndata(
                    adata,
                    CoGAPS(2, max_iter=5),
                    layer=layer,
                    fixed_components=H[adata.var_names[::-1]],
                )
            model = CoGAPS(2, max_iter=5, random_state=0)
            fit_anndata(adata, model, layer=layer, fixed_components=H)
            assert_array_equal(model.components_, H.to_numpy())


@pytest.mark.parametrize(
    "make",
    [
        lambda: CoGAPS(2, max_iter=20, random_state=0),
        lambda: HierarchicalPMF(2, max_iter=20, random_state=0),
        lambda: WeightedBackgroundPMF(2, max_iter=20, random_state=0),
    ],
)
def test_pandas_output_is_indexed_by_the_cells(expression, make):
    """``set_output(transform="pandas")`` on an AnnData keeps the cell names, as it keeps a
    DataFrame's index, in fit_transform and transform; the values are the array output's."""
    adata = _adata(expression)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model = make().set_output(transform="pandas")
        scores = model.fit_transform(adata)
        subset = model.transform(adata[3:7])
        plain = make().fit(adata)
        assert_array_equal(scores.to_numpy(), plain.transform(adata))
    assert list(scores.index) == list(adata.obs_names)
    assert list(subset.index) == list(adata.obs_names[3:7])
    assert list(scores.columns) == list(model.get_feature_names_out())
    assert list(adata.obs_names) == [f"cell{i}" for i in range(expression.shape[0])]


def test_anndata_results_of_an_estimator_without_factors_says_so():
    from sklearn_cogaps import ExtremeDeconvolution
    from sklearn_cogaps.anndata import anndata_results

    from _shared import POINTS

    xd = ExtremeDeconvolution(2, max_iter=5, random_state=0).fit(POINTS)
    with pytest.raises(TypeError, match=r"ExtremeDeconvolution has none.*predict"):
        anndata_results(xd, "xd")


def test_poisson_loglik_of_an_anndata_keeps_its_gene_names():
    """The rows' loadings of poisson_loglik(adata) come from the AnnData as given: no warning
    that X lost the feature names the model was fitted with."""
    rng = np.random.default_rng(0)
    counts = rng.poisson(rng.gamma(0.5, 2.0, (40, 2)) @ rng.gamma(0.5, 2.0, (2, 25)))
    adata = _adata(counts.astype(float))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model = HierarchicalPMF(2, max_iter=20, random_state=0).fit(adata)
        warnings.simplefilter("error", UserWarning)
        value = model.poisson_loglik(adata)
    assert value == model.poisson_loglik(counts.astype(float))


def test_a_streamed_model_a_class_and_a_backed_copy(expression, tmp_path):
    """A model updated by partial_fit (no rows) stores transform's factors; the class
    instead of an estimator, and copy=True of a backed AnnData, are refused before any
    fit, with what to write."""
    counts = np.round(expression * 3)
    adata = _adata(counts)
    streamed = WeightedBackgroundPMF(2, random_state=0, total_samples=20)
    streamed.partial_fit(counts[:10]).partial_fit(counts[10:])
    fit_anndata(adata, streamed, refit=False)
    assert_array_equal(adata.obsm["X_weightedbackgroundpmf"], streamed.transform(counts))
    with pytest.raises(
        TypeError, match=r"not the class CoGAPS: write fit_anndata\(adata, CoGAPS\("
    ):
        fit_anndata(adata, CoGAPS)
    adata.write_h5ad(tmp_path / "a.h5ad")
    backed = anndata.read_h5ad(tmp_path / "a.h5ad", backed="r")
    try:
        model = CoGAPS(n_components=2, max_iter=5)
        with pytest.raises(ValueError, match="adata is backed.*copy=False"):
            fit_anndata(backed, model, copy=True)
        assert not hasattr(model, "components_")  # refused before the fit
    finally:
        backed.file.close()


def test_an_interrupted_cogaps_fit_is_marked_partial(expression, monkeypatch):
    from sklearn_cogaps import FitInterruptedWarning

    from _shared import interrupt_cogaps_at

    interrupt_cogaps_at(monkeypatch, 41)  # 30 calibration and 10 sampling iterations done
    adata = _adata(expression)
    with pytest.warns(FitInterruptedWarning):
        fit_anndata(adata, CoGAPS(n_components=2, max_iter=30, random_state=0))
    uns = adata.uns["cogaps"]
    assert not uns["complete"] and uns["status"] == "partial" and uns["n_iter"] == 40


def test_normalised_counts_get_the_layer_advice(expression):
    adata = _adata(np.log1p(np.round(expression * 3)))
    model = WeightedBackgroundPMF(n_components=2, max_iter=3, random_state=0)
    with pytest.warns(UserWarning, match=r"non-integer.*layer='counts'"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            fit_anndata(adata, model)


def test_duplicate_var_names_are_refused():
    """A DataFrame's duplicate columns were refused and an AnnData's duplicate var_names
    accepted, as feature names that transform could not match."""
    X = np.random.default_rng(0).poisson(2.0, (30, 4)).astype(np.float64)
    adata = anndata.AnnData(X)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # anndata's own warning about the names
        adata.var_names = ["a", "b", "a", "c"]
    with pytest.raises(
        ValueError, match=r"repeat 1 name\(s\) \('a' 2 times\).*var_names_make_unique"
    ):
        HierarchicalPMF(2, max_iter=3).fit(adata)


def test_extreme_deconvolution_conditions_on_an_anndata_point():
    rng = np.random.default_rng(0)
    xd = ExtremeDeconvolution(2, random_state=0).fit(rng.normal(size=(80, 2)))
    given = xd.condition(anndata.AnnData(np.array([[np.nan, 1.0]])))
    assert_array_equal(given.means_, xd.condition(np.array([np.nan, 1.0])).means_)


def test_an_anndata_as_cogaps_uncertainty_says_what_to_pass():
    X = make_patterns(n_samples=20, n_features=30, n_components=2, random_state=0)[0]
    with pytest.raises(TypeError, match=r"'uncertainty' is an AnnData.*adata\.layers\['sigma'\]"):
        CoGAPS(2, max_iter=5).fit(X, uncertainty=anndata.AnnData(0.1 + X))


def test_a_view_of_a_backed_anndata_is_refused_before_the_fit(expression, tmp_path):
    _adata(expression).write_h5ad(tmp_path / "v.h5ad")
    backed = anndata.read_h5ad(tmp_path / "v.h5ad", backed="r")
    model = CoGAPS(n_components=2, max_iter=5, random_state=0)
    with pytest.raises(ValueError, match=r"view of a backed AnnData.*to_memory\(\)"):
        fit_anndata(backed[:10], model)
    assert not hasattr(model, "components_")  # refused before the fit
    fit_anndata(backed[:10].to_memory(), model)
    backed.file.close()


def test_an_anndata_without_x_and_a_refit_that_is_not_a_bool(expression):
    # a layer-only AnnData (X=None) is told which layer to fit, by the call it was made to
    adata = _adata(expression)
    adata.layers["counts"] = expression
    adata.X = None
    model = CoGAPS(n_components=2, max_iter=5, random_state=0)
    with pytest.raises(ValueError, match=r"fit_anndata\(adata, model, layer='counts'\)"):
        fit_anndata(adata, model)
    with pytest.raises(ValueError, match=r"instead: adata.layers\['counts'\]"):
        model.fit(adata)
    fit_anndata(adata, model, layer="counts")  # the advice, as written
    # with no layer either, there is no layer to name
    empty = _adata(expression)
    empty.X = None
    with pytest.raises(ValueError, match=r"no .X and no layers.*adata.X = counts"):
        fit_anndata(empty, CoGAPS(n_components=2, max_iter=5))
    # refit="no" was truthy, and fitted
    with pytest.raises(TypeError, match="refit must be True or False; got 'no'"):
        fit_anndata(_adata(expression), CoGAPS(n_components=2, max_iter=5), refit="no")
