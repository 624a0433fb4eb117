"""The API every estimator shares: positional side inputs, AnnData input, interruptions,
progress lines, shared attribute names, deprecations."""

import pickle
import re
import warnings

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal
from scipy import sparse
from sklearn.base import clone
from sklearn.exceptions import ConvergenceWarning, NotFittedError
from sklearn.linear_model import LogisticRegression, Ridge
from sklearn.model_selection import GridSearchCV, cross_validate
from sklearn.pipeline import make_pipeline
from sklearn.utils._param_validation import InvalidParameterError

from sklearn_cogaps import (
    CoGAPS,
    ExtremeDeconvolution,
    FitInterruptedWarning,
    HierarchicalPMF,
    MaxMarginMF,
    WeightedBackgroundPMF,
    _m3f,
    holdout_ratings,
    neg_nmae_scorer,
)
from sklearn_cogaps._poisson import _hpmf, _wbpmf_updates
from sklearn_cogaps._xd import _init as _xd_init

from _shared import COUNTS, POINTS, RATINGS, VARIANCES


def _m3f_model(**params):
    return MaxMarginMF(
        **{"n_components": 2, "max_iter": 10, "burn_in": 2, "random_state": 0, **params}
    )


def _factorisations():
    return [
        CoGAPS(n_components=2, max_iter=10, random_state=0),
        HierarchicalPMF(n_components=2, max_iter=10, random_state=0),
        WeightedBackgroundPMF(n_components=2, max_iter=5, tol=0.0, random_state=0),
    ]


def _factors(model):
    """The fitted matrix over the features (items for MaxMarginMF)."""
    return model.components_


def _quiet(fit, *args, **kwargs):
    """Call without the warnings of the short fits of these tests (interruptions excepted)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        warnings.filterwarnings("ignore", message=".*(collapsed|no responsibility|decreased)")
        return fit(*args, **kwargs)


# ---------------------------------------------------------------- positional side inputs


def test_cogaps_refuses_the_uncertainty_as_second_positional_argument():
    U = np.maximum(0.1 * COUNTS, 0.1)
    with pytest.raises(ValueError, match=re.escape("fit(X, uncertainty=U)")):
        CoGAPS(n_components=2, max_iter=5).fit(COUNTS, U)
    model = CoGAPS(n_components=2, max_iter=5, random_state=0).fit(COUNTS, uncertainty=U)
    with pytest.raises(ValueError, match=re.escape("score(X, uncertainty=U)")):
        model.score(COUNTS, U)


@pytest.mark.parametrize("noise", [VARIANCES, VARIANCES[:, :, None] * np.eye(2)])
def test_extreme_deconvolution_refuses_the_noise_as_second_positional_argument(noise):
    """astroML's XDGMM.fit(X, Xerr): covariances (n, d, d), or variances of X's shape."""
    xd = ExtremeDeconvolution(n_components=2, max_iter=5, random_state=0)
    with pytest.raises(ValueError, match=re.escape("fit(X, X_cov=Xerr)")):
        xd.fit(POINTS, noise)
    with pytest.raises(ValueError, match=re.escape("partial_fit(X, X_cov=Xerr)")):
        xd.partial_fit(POINTS, noise)
    _quiet(xd.fit, POINTS, X_cov=noise)
    with pytest.raises(ValueError, match=re.escape("score(X, X_cov=Xerr)")):
        xd.score(POINTS, noise)


@pytest.mark.parametrize("estimator", _factorisations()[1:], ids=lambda e: type(e).__name__)
def test_poisson_factorisations_refuse_an_array_of_the_shape_of_X(estimator):
    with pytest.raises(ValueError, match=r"does not use y.*call fit\(X\)"):
        estimator.fit(COUNTS, COUNTS)
    _quiet(estimator.fit, COUNTS)
    with pytest.raises(ValueError, match=r"call score\(X\)"):
        estimator.score(COUNTS, np.ones((COUNTS.shape[0], COUNTS.shape[1], 2)))


@pytest.mark.parametrize(
    "cls, advice",
    [
        (CoGAPS, "fit(X, uncertainty=U)"),
        (HierarchicalPMF, "fit(X)"),
        (WeightedBackgroundPMF, "fit(X)"),
        (ExtremeDeconvolution, "fit(X, X_cov=Xerr)"),
        (MaxMarginMF, "MaxMarginMF(n_components=K).fit(R)"),
    ],
    ids=lambda v: getattr(v, "__name__", ""),
)
def test_data_given_to_the_constructor_is_refused_with_the_call_to_write(cls, advice):
    """R's CoGAPS(data, uncertainty) and the like: the error says where the data go."""
    import pandas as pd

    U = np.maximum(0.1 * COUNTS, 0.1)
    for args in [
        (COUNTS,),
        (COUNTS, U),
        (2, U),
        (COUNTS.tolist(),),
        (sparse.csr_matrix(COUNTS),),
        (pd.DataFrame(COUNTS),),
    ]:
        with pytest.raises(
            TypeError, match=r"takes its parameters, not data.*" + re.escape(advice)
        ):
            cls(*args)
    # parameters, clones and pickles are untouched
    model = cls(2)
    assert model.n_components == 2 and clone(model).n_components == 2
    assert pickle.loads(pickle.dumps(model)).get_params() == model.get_params()


@pytest.mark.parametrize(
    "call, match",
    [
        (
            lambda: CoGAPS(nPatterns=3),
            r"no parameter 'nPatterns' \(R CoGAPS's name, given 3\); "
            r"write n_components=",
        ),
        (lambda: CoGAPS(nIterations=5000, seed=1), "write max_iter="),
        (lambda: CoGAPS(nThreads=4), "OMP_NUM_THREADS or threadpoolctl"),
        (lambda: CoGAPS(whichMatrixFixed="A"), r"fit\(X, fixed_components=H\) for 'A'"),
        (lambda: HierarchicalPMF(k=5), r"'k' \(hpfrec's name, given 5\); write n_components="),
        (lambda: HierarchicalPMF(nfactors=5), "scHPF's name"),
        (lambda: HierarchicalPMF(K=5), r"'K' \(R ebpmf's name, given 5\); write n_components="),
        (lambda: HierarchicalPMF(check_every=10), "tested against tol after every iteration"),
        (lambda: WeightedBackgroundPMF(reindex=True), r"triplets_to_matrix\(df\)"),
        (lambda: WeightedBackgroundPMF(K=4), r"'K' \(R ebpmf's name, given 4\)"),
        (lambda: WeightedBackgroundPMF(k=4), r"'k' \(hpfrec's name, given 4\); write n_comp"),
        (lambda: WeightedBackgroundPMF(nfactors=4), r"'nfactors' \(scHPF's name, given 4\)"),
        (lambda: WeightedBackgroundPMF(ebpm_fn="point_gamma"), "prior_loadings=... and "),
        (lambda: CoGAPS(messages=True), "write verbose=1"),
        (lambda: CoGAPS(transposeData=True), r"fit\(X.T\)"),
        (lambda: CoGAPS(checkpointInterval=250), "checkpoint_every=N"),
        (lambda: CoGAPS(BPPARAM=None), "n_jobs="),
        (
            lambda: HierarchicalPMF(a=0.3),
            r"'a' \(hpfrec and scHPF's name, given 0.3\); write "
            "prior_shape=a",
        ),
        (lambda: HierarchicalPMF(b_prime=1.0), "learn_prior='rate'"),
        (lambda: HierarchicalPMF(stop_thr=1e-3), "write tol="),
        (
            lambda: ExtremeDeconvolution(n_iter=50),
            r"astroML's XDGMM's name, given 50\); write "
            "max_iter=N",
        ),
        (lambda: ExtremeDeconvolution(xcovar=1), r"precisions_init=np.linalg.inv\(xcovar\)"),
        # astroML's XDGMM(n_components, n_iter), positionally
        (
            lambda: ExtremeDeconvolution(3, 100),
            r"takes 1 positional parameter \(n_components\).*max_iter=N",
        ),
        (lambda: CoGAPS(3, 100), r"CoGAPS\(n_components, <parameter>=<value>\)"),
        (lambda: MaxMarginMF(k=5), r"'k' \(hpfrec's name, given 5\); write n_components="),
        (lambda: MaxMarginMF(n_factors=5), "surprise's name"),
        (lambda: MaxMarginMF(iterations=5), r"implicit's name.*write max_iter="),
        (lambda: WeightedBackgroundPMF(pm_func="x"), r"'pm_func' \(R ebpmf's name"),
        (lambda: WeightedBackgroundPMF(seed=1), r"write random_state=seed"),
    ],
)
def test_a_peer_s_parameter_name_says_ours(call, match):
    """The spellings of R CoGAPS, hpfrec, scHPF and R ebpmf get our name, not Python's bare
    'unexpected keyword argument'; other unknown names keep Python's error."""
    with pytest.raises(TypeError, match=match):
        call()
    with pytest.raises(TypeError, match="unexpected keyword argument 'bogus'"):
        CoGAPS(bogus=1)


def test_a_peer_s_parameter_name_does_not_echo_a_large_value():
    """R's geneNames of 20,000 genes gave a message of 189,032 characters."""
    with pytest.raises(TypeError, match=r"'geneNames' \(R CoGAPS's name, given \['g0', ") as e:
        CoGAPS(3, geneNames=[f"g{i}" for i in range(20000)])
    assert len(str(e.value)) < 300
    with pytest.raises(TypeError, match=r"'uncertainty'") as e:
        CoGAPS(3, uncertainty=np.ones((500, 500)))
    assert len(str(e.value)) < 300


@pytest.mark.parametrize("estimator", _factorisations(), ids=lambda e: type(e).__name__)
def test_a_table_of_user_item_count_triplets_is_refused(estimator):
    """hpfrec's HPF.fit takes (UserId, ItemId, Count) rows; here it would be a 3-feature X."""
    import pandas as pd

    rng = np.random.RandomState(0)
    triplets = pd.DataFrame(
        {
            "UserId": rng.randint(0, 9, 50),
            "ItemId": rng.randint(0, 7, 50),
            "Count": rng.randint(1, 5, 50),
        }
    )
    advice = r"triplets_to_matrix\(df\['UserId'\], df\['ItemId'\], df\['Count'\]\)"
    with pytest.raises(ValueError, match="triplets.*" + advice):
        estimator.fit(triplets)
    with pytest.raises(ValueError, match="triplets"):
        estimator.fit(triplets.rename(columns={"UserId": "user", "ItemId": "item"}))
    # the names of MovieLens, surprise and the Million Song Dataset, timestamps included
    for names in (["userId", "movieId", "rating", "timestamp"], ["uid", "iid", "r"],
                  ["user_id", "song_id", "play_count"]):  # fmt: skip
        table = pd.DataFrame({n: triplets.iloc[:, min(j, 2)] for j, n in enumerate(names)})
        advice = rf"df\['{names[0]}'\], df\['{names[1]}'\], df\['{names[2]}'\]"
        with pytest.raises(ValueError, match=rf"{len(names)} features.*{advice}"):
            estimator.fit(table)
    # other names: the values tell, as an array's do (a warning)
    many = pd.DataFrame(
        {"a": rng.randint(0, 40, 300), "b": rng.randint(0, 60, 300), "c": rng.randint(1, 5, 300)}
    )
    with pytest.warns(UserWarning, match="look like \\(user, item\\) ids"):
        _quiet(estimator.fit, many)
    # an implicit-feedback log, one (user, item) pair per row: no values to name
    pairs = triplets.drop(columns="Count").drop_duplicates()
    advice = r"\(user, item\) pairs.*triplets_to_matrix\(df\['UserId'\], df\['ItemId'\]\)\."
    with pytest.raises(ValueError, match=advice):
        estimator.fit(pairs)
    with pytest.raises(ValueError, match=r"pairs.*df\['user'\], df\['item'\]\)\."):
        estimator.fit(
            pairs.rename(columns={"UserId": "user", "ItemId": "item"}).assign(timestamp=0)
        )
    with pytest.warns(UserWarning, match=r"X has 2 columns.*\(user, item\) pairs\?"):
        _quiet(estimator.fit, many[["a", "b"]])


def test_a_table_of_user_item_rating_triplets_is_refused_by_maxmarginmf():
    """A long ratings table would otherwise be a 3-item matrix with the ids as ratings."""
    import pandas as pd

    rng = np.random.RandomState(0)
    triplets = pd.DataFrame(
        {
            "user": rng.randint(0, 9, 50),
            "item": rng.randint(0, 7, 50),
            "rating": rng.randint(1, 6, 50),
        }
    )
    with pytest.raises(ValueError, match=r"rating\) triplets.*df\['item'\], df\['rating'\]\)"):
        MaxMarginMF(n_components=2, max_iter=2, burn_in=0).fit(triplets)


@pytest.mark.parametrize(
    "estimator, X",
    [(e, COUNTS) for e in _factorisations()]
    + [(ExtremeDeconvolution(n_components=2, max_iter=5, random_state=0), POINTS)],
    ids=lambda e: type(e).__name__ if not isinstance(e, np.ndarray) else "",
)
def test_targets_are_ignored_and_other_values_refused(estimator, X):
    n = X.shape[0]
    reference = _quiet(estimator.fit, X)
    expected = reference.score(X)
    labels = np.arange(n) % 2
    # a 1-d target and 2-d targets of another width are ignored, as sklearn's tools pass them
    for y in (labels, labels.tolist(), np.c_[labels, labels, labels]):
        assert _quiet(estimator.fit, X, y).score(X, y) == pytest.approx(expected)
    # a scalar, a target of the wrong length or an array of X's shape are refused
    for y in (1.0, labels[:-1], X.copy(), sparse.csr_matrix(X)):
        with pytest.raises(ValueError, match="does not use y"):
            estimator.fit(X, y)


def test_max_margin_mf_refuses_side_inputs_and_traces_held_out_ratings_in_fit():
    model = _m3f_model()
    for y in (
        1.0,
        np.ones(RATINGS.shape[0] - 1),
        np.ones(RATINGS.shape + (2,)),
        np.ones((RATINGS.shape[0], 3)),
    ):
        with pytest.raises(ValueError, match=r"held-out ratings.*fit\(X_train, y=X_test\)"):
            model.fit(RATINGS, y)
    labels = np.arange(RATINGS.shape[0]) % 2
    expected = model.fit(RATINGS).loadings_
    # a target, or held-out ratings of X's shape (which GridSearchCV passes on to the
    # scorer), leave the fit unchanged; the held-out ratings are traced
    held_out = np.where(np.isnan(RATINGS), 3.0, np.nan)
    for y in (labels, held_out):
        assert_array_equal(model.fit(RATINGS, y).loadings_, expected)
    assert np.all(np.isfinite(model.held_out_nmae_))
    assert np.isfinite(neg_nmae_scorer(model, RATINGS, held_out))
    # score(X, X_test) scores them as neg_nmae_scorer does (it refused them, and a search
    # with scoring=None scored every fold NaN and kept its first candidate)
    assert model.score(RATINGS, held_out) == neg_nmae_scorer(model, RATINGS, held_out)
    with pytest.raises(ValueError, match=r"pass them as y of the shape of X"):
        model.score(RATINGS, np.ones((RATINGS.shape[0] - 1, RATINGS.shape[1])))
    X_train, X_test = holdout_ratings(RATINGS, 1, random_state=0)
    search = GridSearchCV(clone(model), {"n_components": [1, 2]}, cv=2)
    by_default = _quiet(search.fit, X_train, X_test).cv_results_["mean_test_score"]
    search.set_params(scoring=neg_nmae_scorer)
    by_scorer = _quiet(search.fit, X_train, X_test).cv_results_["mean_test_score"]
    assert np.all(np.isfinite(by_default))
    assert_array_equal(by_default, by_scorer)


def test_pipelines_and_cross_validation_pass_targets_through():
    labels = (COUNTS[:, 0] > np.median(COUNTS[:, 0])).astype(int)
    pipe = make_pipeline(
        HierarchicalPMF(n_components=2, max_iter=10, random_state=0), LogisticRegression()
    )
    _quiet(pipe.fit, COUNTS, labels)
    result = _quiet(
        cross_validate, CoGAPS(n_components=2, max_iter=5, random_state=0), COUNTS, labels, cv=2
    )
    assert np.all(np.isfinite(result["test_score"]))
    # multi-output targets of a later regressor: not of X's shape, ignored
    _quiet(
        make_pipeline(WeightedBackgroundPMF(n_components=2, max_iter=3), Ridge()).fit,
        COUNTS,
        np.c_[labels, 1 - labels],
    )


# ---------------------------------------------------------------- AnnData input


def _all_estimators():
    return _factorisations() + [ExtremeDeconvolution(n_components=2, max_iter=5, random_state=0)]


@pytest.mark.parametrize("estimator", _all_estimators(), ids=lambda e: type(e).__name__)
def test_anndata_input_is_its_X_with_var_names_as_feature_names(estimator, tmp_path):
    anndata = pytest.importorskip("anndata")
    X = POINTS if isinstance(estimator, ExtremeDeconvolution) else COUNTS
    genes = [f"gene{j}" for j in range(X.shape[1])]
    adata = anndata.AnnData(X.copy(), var={"name": genes})
    adata.var_names = genes
    plain = _quiet(clone(estimator).fit, X)
    expected = plain.score(X)
    fitted = _quiet(estimator.fit, adata)
    assert list(fitted.feature_names_in_) == genes
    assert fitted.score(adata) == pytest.approx(expected)
    if hasattr(fitted, "transform"):
        assert_allclose(fitted.transform(adata), plain.transform(X))
        assert list(fitted.get_feature_names_out())[0].endswith("0")
    # a backed file is read from disk: dense and sparse
    dense_only = isinstance(estimator, ExtremeDeconvolution)
    for stored in (X,) if dense_only else (X, sparse.csr_matrix(X)):
        path = tmp_path / "data.h5ad"
        anndata.AnnData(stored, var=adata.var).write_h5ad(path)
        backed = anndata.read_h5ad(path, backed="r")
        assert _quiet(estimator.fit, backed).score(backed) == pytest.approx(expected)
        backed.file.close()
    # variables in another order are refused
    with pytest.raises(ValueError, match="var_names differ"):
        fitted.score(adata[:, genes[::-1]])


def test_max_margin_mf_takes_an_anndata(tmp_path):
    anndata = pytest.importorskip("anndata")
    items = [f"item{j}" for j in range(RATINGS.shape[1])]
    adata = anndata.AnnData(sparse.csr_matrix(np.nan_to_num(RATINGS)))
    adata.var_names = items
    plain = _m3f_model().fit(RATINGS)
    fitted = _m3f_model().fit(adata)
    assert list(fitted.feature_names_in_) == items
    assert_array_equal(fitted.loadings_, plain.loadings_)
    assert fitted.score(adata) == pytest.approx(plain.score(RATINGS))
    assert_array_equal(
        fitted.predict_ratings(adata, observed=adata).toarray(),
        np.nan_to_num(plain.predict_ratings(RATINGS, observed=RATINGS)),
    )
    path = tmp_path / "ratings.h5ad"
    adata.write_h5ad(path)
    backed = anndata.read_h5ad(path, backed="r")
    assert_array_equal(_m3f_model().fit(backed).loadings_, plain.loadings_)
    backed.file.close()
    with pytest.raises(ValueError, match="var_names differ"):
        fitted.score(adata[:, items[::-1]])


def test_cogaps_markers_name_the_genes_of_an_anndata():
    anndata = pytest.importorskip("anndata")
    adata = anndata.AnnData(COUNTS.copy())
    adata.var_names = [f"g{j}" for j in range(COUNTS.shape[1])]
    model = CoGAPS(n_components=2, max_iter=20, random_state=0).fit(adata)
    markers, _, _ = model.pattern_markers()
    # every gene with some amplitude, by name (a short chain leaves some genes at 0)
    detected = adata.var_names[model.components_.max(axis=0) > 0]
    assert len(detected) > 0
    assert sorted(np.concatenate(markers)) == sorted(detected)


def test_a_layer_is_passed_as_a_matrix():
    anndata = pytest.importorskip("anndata")
    adata = anndata.AnnData(np.log1p(COUNTS), layers={"counts": sparse.csr_matrix(COUNTS)})
    model = HierarchicalPMF(n_components=2, max_iter=10, random_state=0)
    a = _quiet(model.fit, adata.layers["counts"]).components_
    assert_array_equal(a, _quiet(model.fit, COUNTS).components_)


# ---------------------------------------------------------------- interruptions


def _interrupt_on_call(monkeypatch, owner, name, call):
    """Make ``owner.name`` raise KeyboardInterrupt on its ``call``-th call (1-based)."""
    original = getattr(owner, name)
    calls = []

    def wrapper(*args, **kwargs):
        calls.append(1)
        if len(calls) == call:
            raise KeyboardInterrupt
        return original(*args, **kwargs)

    monkeypatch.setattr(owner, name, wrapper)
    return original


CASES = {
    "hpmf_vbem": (
        HierarchicalPMF(2, max_iter=50, tol=0.0, random_state=0),
        COUNTS,
        _hpmf,
        "_vbem_step",
        4,
        3,
    ),
    "hpmf_newton": (
        HierarchicalPMF(2, solver="newton", max_iter=50, tol=0.0, random_state=0),
        COUNTS,
        _hpmf,
        "_newton_step",
        3,
        2,
    ),
    "hpmf_pathwise": (
        HierarchicalPMF(2, solver="pathwise", max_iter=50, tol=0.0, random_state=0),
        COUNTS,
        _hpmf,
        "_pathwise_step",
        6,
        5,
    ),
    # WBPMF solves 2 K = 4 EBPM problems per iteration: call 14 is in iteration 4
    "wbpmf": (
        WeightedBackgroundPMF(2, max_iter=50, tol=0.0, random_state=0),
        COUNTS,
        _wbpmf_updates,
        "_solve",
        14,
        3,
    ),
    "xd_em": (
        ExtremeDeconvolution(2, max_iter=50, tol=0.0, random_state=0),
        POINTS,
        ExtremeDeconvolution,
        "_m_step",
        2,
        1,
    ),
    # 80 points in minibatches of 20: 4 steps per epoch, call 11 is in epoch 3
    "xd_minibatch": (
        ExtremeDeconvolution(
            2, solver="minibatch_em", batch_size=20, max_iter=50, tol=0.0, random_state=0
        ),
        POINTS,
        ExtremeDeconvolution,
        "_stochastic_step",
        11,
        2,
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_an_interrupted_fit_keeps_its_last_complete_iteration(case, monkeypatch):
    estimator, X, owner, name, call, complete = CASES[case]
    original = _interrupt_on_call(monkeypatch, owner, name, call)
    with pytest.warns(FitInterruptedWarning, match=f"interrupted after {complete} of 50"):
        est = _quiet(estimator.fit, X)
    assert est.n_iter_ == complete and not est.converged_
    assert isinstance(est.objective_history_, np.ndarray) and est.objective_history_.shape == (
        complete,
    )
    monkeypatch.setattr(owner, name, original)
    # exactly the fit that stops there
    short = _quiet(estimator.__class__(**{**estimator.get_params(), "max_iter": complete}).fit, X)
    assert_array_equal(est.objective_history_, short.objective_history_)
    if isinstance(est, ExtremeDeconvolution):
        assert_array_equal(est.means_, short.means_)
        assert est.predict(X).shape == (X.shape[0],)
    else:
        assert_array_equal(est.components_, short.components_)
        assert_array_equal(est.loadings_, short.loadings_)
        assert est.transform(X).shape == (X.shape[0], 2)


@pytest.mark.parametrize(
    "estimator, X, owner, name",
    [
        (WeightedBackgroundPMF(2, max_iter=5, random_state=0), COUNTS, _wbpmf_updates, "_solve"),
        (ExtremeDeconvolution(2, max_iter=5, random_state=0), POINTS, _xd_init, "KMeans"),
        (HierarchicalPMF(2, max_iter=5, random_state=0), COUNTS, _hpmf, "_pass"),
    ],
    ids=["wbpmf", "xd", "hpmf"],
)
def test_an_interrupt_before_anything_is_complete_leaves_the_estimator_unfitted(
    estimator, X, owner, name, monkeypatch
):
    _interrupt_on_call(monkeypatch, owner, name, 1)
    with pytest.raises(KeyboardInterrupt):
        estimator.fit(X)
    with pytest.raises(NotFittedError):
        estimator.score(X)


@pytest.mark.parametrize("failure", [RuntimeError, KeyboardInterrupt])
@pytest.mark.parametrize(
    "estimator", _all_estimators() + [_m3f_model()], ids=lambda e: type(e).__name__
)
def test_a_refit_that_fails_leaves_the_previous_fit_whole(estimator, failure, monkeypatch):
    """A refit that raises after validating its data (a chunk that cannot be read, Ctrl-C
    in the start) must not leave the new data's n_features_in_ and feature names beside
    the old fit: transform would then take rows of another width, or names in another
    order, without a word. Every attribute is the object it was."""
    pd = pytest.importorskip("pandas")
    X = {ExtremeDeconvolution: POINTS, MaxMarginMF: RATINGS}.get(type(estimator), COUNTS)
    names = [f"f{j}" for j in range(X.shape[1])]
    model = _quiet(clone(estimator).fit, pd.DataFrame(X, columns=names))
    before = dict(model.__dict__)
    wider = pd.DataFrame(np.hstack([X, X]), columns=names + [f"g{j}" for j in names])

    def fail(*args, **kwargs):
        raise failure

    monkeypatch.setattr(type(model), "_initialise", fail)
    with pytest.raises(failure):
        _quiet(model.fit, wider)
    assert model.__dict__.keys() == before.keys()
    assert all(model.__dict__[key] is value for key, value in before.items())
    with pytest.raises(ValueError, match="feature names"):
        _quiet(model.score, pd.DataFrame(X, columns=names[::-1]))


@pytest.mark.parametrize(
    "estimator", _all_estimators() + [_m3f_model()], ids=lambda e: type(e).__name__
)
def test_an_interrupt_inside_a_snapshot_keeps_the_history_of_the_state_kept(estimator, monkeypatch):
    """Ctrl-C while the fit copies an iteration's state (MaxMarginMF's deep copy caught one
    interrupt in seven there) kept the previous iteration's state but this iteration's
    objective: n_iter_ and objective_history_ one ahead of the state and its own traces."""
    X = {ExtremeDeconvolution: POINTS, MaxMarginMF: RATINGS}.get(type(estimator), COUNTS)
    model = clone(estimator).set_params(max_iter=50)
    if isinstance(model, MaxMarginMF):
        model.set_params(burn_in=0)
    elif not isinstance(model, CoGAPS):
        model.set_params(tol=0.0)
    # call 1 is the start's snapshot: call 3 is iteration 2's, so 1 iteration is kept
    original = _interrupt_on_call(monkeypatch, type(model), "_snapshot", 3)
    with pytest.warns(FitInterruptedWarning, match=r"interrupted after 1 of (50|100) "):
        _quiet(model.fit, X)
    assert model.n_iter_ == 1 and model.objective_history_.shape == (1,)
    for name in ("n_features_history_", "n_atoms_history_"):
        if hasattr(model, name):
            assert len(getattr(model, name)) == 1
    monkeypatch.setattr(type(model), "_snapshot", original)
    whole = _quiet(clone(model).fit, X)  # the same fit, not interrupted
    assert_array_equal(model.objective_history_, whole.objective_history_[:1])


@pytest.mark.parametrize(
    "estimator", _all_estimators() + [_m3f_model(burn_in=0)], ids=lambda e: type(e).__name__
)
def test_an_interrupt_in_the_first_iteration_keeps_no_fit(estimator, monkeypatch):
    """The start alone is no fit: HierarchicalPMF, ExtremeDeconvolution and CoGAPS kept it
    as a fit of 0 iterations (CoGAPS's loadings_ its NMF start), WeightedBackgroundPMF let
    the KeyboardInterrupt through, as the conventions say."""
    X = {ExtremeDeconvolution: POINTS, MaxMarginMF: RATINGS}.get(type(estimator), COUNTS)
    model = clone(estimator)
    _interrupt_on_call(monkeypatch, type(model), "_iterate", 1)
    with pytest.raises(KeyboardInterrupt):
        _quiet(model.fit, X)
    with pytest.raises(NotFittedError):
        _quiet(model.score, X)


def test_an_interrupted_max_margin_mf_keeps_its_last_complete_iteration(monkeypatch):
    model = _m3f_model(max_iter=50)
    original = _interrupt_on_call(monkeypatch, _m3f.MaxMarginMF, "_sweep", 6)
    with pytest.warns(FitInterruptedWarning, match="interrupted after 5 of 50"):
        model.fit(RATINGS)
    assert model.n_iter_ == 5 and model.objective_history_.shape == (5,)
    assert model.n_features_history_.shape == (5,)
    monkeypatch.setattr(_m3f.MaxMarginMF, "_sweep", original)
    short = _m3f_model(max_iter=5).fit(RATINGS)
    assert_array_equal(model.objective_history_, short.objective_history_)
    assert_array_equal(model.loadings_, short.loadings_)
    assert_array_equal(model.predict_ratings(RATINGS), short.predict_ratings(RATINGS))
    # interrupted before any running mean (during burn-in): unfitted
    fresh = _m3f_model(max_iter=50, burn_in=5)
    _interrupt_on_call(monkeypatch, _m3f.MaxMarginMF, "_sweep", 3)
    with pytest.raises(KeyboardInterrupt):
        fresh.fit(RATINGS)
    with pytest.raises(NotFittedError):
        fresh.score(RATINGS)


def test_an_interrupted_partial_fit_leaves_the_estimator_as_it_was(monkeypatch):
    xd = ExtremeDeconvolution(2, random_state=0).partial_fit(POINTS)
    means, history = xd.means_.copy(), xd.objective_history_.copy()
    _interrupt_on_call(monkeypatch, ExtremeDeconvolution, "_estep", 1)
    with pytest.raises(KeyboardInterrupt):
        xd.partial_fit(POINTS)
    assert_array_equal(xd.means_, means)
    assert_array_equal(xd.objective_history_, history)


# ---------------------------------------------------------------- progress lines


@pytest.mark.parametrize("estimator", _all_estimators(), ids=lambda e: type(e).__name__)
def test_verbose_prints_one_kind_of_progress_line(estimator, capsys):
    X = POINTS if isinstance(estimator, ExtremeDeconvolution) else COUNTS
    est = (
        estimator.set_params(max_iter=20, tol=0.0)
        # a sampler's tol is a precision, not a stopping test on the objective
        if "tol" in estimator.get_params() and estimator._stops_early
        else (estimator.set_params(max_iter=10))
    )
    name = type(est).__name__
    pattern = re.compile(rf"^\[{name}\] iteration +(\d+)/(\d+)  .* elapsed \S+  ETA \S+$")
    # and a last line that says how the fit ended
    last = re.compile(
        rf"^\[{name}\] (converged|reached max_iter|done|done, not converged) after "
        rf"(\d+) iterations in \S+, {re.escape(type(est)._objective_name)} \S+$"
    )
    # verbose=2: a line after every iteration; 1: about every tenth of the iterations
    for verbose, expect in ((0, 0), (2, None), (1, 10)):
        _quiet(est.set_params(verbose=verbose).fit, X)
        lines = [line for line in capsys.readouterr().out.splitlines() if line]
        if expect == 0:
            assert lines == []
            continue
        final = last.match(lines.pop())
        assert final and int(final.group(2)) == est.n_iter_, final
        assert all(pattern.match(line) for line in lines), lines
        if not expect:
            assert len(lines) == est.n_iter_
            continue
        total = int(pattern.match(lines[0]).group(2))
        every = -(-total // 10)
        due = [i for i in range(1, est.n_iter_ + 1) if i % every == 0 or i == total]
        assert len(lines) == len(due) <= expect


def test_the_last_line_of_a_fit_with_held_out_data_says_which_iteration_it_kept(capsys):
    """It read "reached max_iter after 1 iterations" for a fit that ran more: n_iter_ is the
    iteration kept, the best held-out score."""
    rng = np.random.default_rng(0)
    X, X_val = rng.poisson(2.0, (40, 12)).astype(float), rng.poisson(2.0, (40, 12)).astype(float)
    est = _quiet(HierarchicalPMF(6, max_iter=60, tol=0.0, verbose=1, random_state=0).fit, X,
                 X_val=X_val)  # fmt: skip
    last = capsys.readouterr().out.splitlines()[-1]
    kept = r"\(iteration (\d+) kept, the best held-out score\)"
    match = re.match(rf"^\[HierarchicalPMF\] \S+ [^(]*{kept} after (\d+) iterations in ", last)
    assert match, last
    assert int(match.group(1)) == est.n_iter_ < int(match.group(2))


def test_max_margin_mf_prints_the_shared_progress_line(capsys):
    pattern = re.compile(
        r"^\[MaxMarginMF\] iteration +(\d+)/20  max-margin objective \S+  \d+ "
        r"features  elapsed \S+  ETA \S+$"
    )
    for verbose, n_lines in ((0, 0), (1, 10), (2, 20)):
        _m3f_model(max_iter=20, verbose=verbose).fit(RATINGS)
        lines = [line for line in capsys.readouterr().out.splitlines() if line]
        if verbose:
            assert re.match(r"^\[MaxMarginMF\] done after 20 iterations in ", lines.pop())
        assert len(lines) == n_lines and all(pattern.match(line) for line in lines), lines


# ---------------------------------------------------------------- names and attributes


@pytest.mark.parametrize("estimator", _factorisations(), ids=lambda e: type(e).__name__)
def test_loadings_are_the_per_sample_factors_of_the_training_data(estimator):
    if isinstance(estimator, CoGAPS):
        estimator.set_params(max_iter=300)
    est = _quiet(estimator.fit, COUNTS)
    assert est.loadings_.shape == (COUNTS.shape[0], 2)
    assert_allclose(est.inverse_transform(est.loadings_), est.loadings_ @ est.components_)
    # close to what transform gives for the same rows
    W = est.transform(COUNTS)
    assert np.corrcoef(W.ravel(), est.loadings_.ravel())[0, 1] > 0.9
    assert est.n_iter_ >= 1
    with pytest.raises(ValueError, match="n_components=2"):
        est.inverse_transform(np.ones((3, 3)))


def test_traces_are_arrays_with_one_value_per_iteration():
    for est, X in [
        (HierarchicalPMF(2, max_iter=7, tol=0.0, random_state=0), COUNTS),
        (WeightedBackgroundPMF(2, max_iter=7, tol=0.0), COUNTS),
        (ExtremeDeconvolution(2, max_iter=7, tol=0.0, random_state=0), POINTS),
    ]:
        _quiet(est.fit, X)
        assert isinstance(est.objective_history_, np.ndarray)
        assert est.objective_history_.shape == (est.n_iter_,)
        assert 1 <= est.n_iter_ <= 7
        assert est.lower_bound_ == pytest.approx(est.objective_history_[-1], rel=1e-12)
    xd = ExtremeDeconvolution(2, random_state=0).partial_fit(POINTS).partial_fit(POINTS)
    assert isinstance(xd.objective_history_, np.ndarray) and xd.objective_history_.shape == (2,)
    cogaps = CoGAPS(2, max_iter=6, random_state=0).fit(COUNTS)
    assert cogaps.n_iter_ == 12 and cogaps.objective_history_.shape == (12,)


@pytest.mark.parametrize("solver", ["sequential", "simultaneous"])
def test_weighted_background_pmf_warm_start_continues_the_fit(solver):
    # simultaneous: the screening's cycle continues (iteration 5 of the long fit is screened)
    long = WeightedBackgroundPMF(2, solver=solver, max_iter=8, tol=0.0, random_state=0)
    long.fit(COUNTS)
    warm = WeightedBackgroundPMF(
        2, solver=solver, max_iter=4, tol=0.0, random_state=0, warm_start=True
    )
    warm.fit(COUNTS)
    warm.fit(COUNTS)
    assert warm.n_iter_ == 4
    assert_allclose(warm.objective_history_, long.objective_history_[4:], rtol=1e-10)
    assert_allclose(warm.components_, long.components_, rtol=1e-8)
    # another shape or prior family starts anew, and says so
    cold = WeightedBackgroundPMF(2, solver=solver, max_iter=4, tol=0.0, random_state=0)
    cold.fit(COUNTS)
    with pytest.warns(UserWarning, match=r"warm_start=True, but the prior families"):
        warm.set_params(prior_components="gamma").fit(COUNTS)
    assert_array_equal(
        warm.components_, cold.set_params(prior_components="gamma").fit(COUNTS).components_
    )


@pytest.mark.parametrize(
    "estimator, X",
    [(e, COUNTS) for e in _factorisations()] + [(_m3f_model(), RATINGS)],
    ids=lambda v: type(v).__name__ if hasattr(v, "fit") else "",
)
def test_warm_start_that_cannot_continue_says_so(estimator, X):
    """A warm start on data of another shape starts anew: never in silence."""
    warm = clone(estimator).set_params(warm_start=True)
    _quiet(warm.fit, X)
    with warnings.catch_warnings():
        # the same shape continues quietly
        warnings.filterwarnings("error", message=".*warm_start", category=UserWarning)
        _quiet(warm.fit, X)
    with pytest.warns(UserWarning, match=r"warm_start=True, but X has .*starts a new one"):
        _quiet(warm.fit, X[:-3])
    fresh = _quiet(clone(estimator).fit, X[:-3])
    assert_allclose(_factors(warm), _factors(fresh))


def test_deprecated_cogaps_names_still_work_with_a_future_warning():
    new = CoGAPS(2, max_iter=10, atom_density_W=0.05, random_state=0).fit(COUNTS)
    with pytest.warns(FutureWarning, match="'alpha_W' was renamed 'atom_density_W'"):
        old = CoGAPS(2, max_iter=10, alpha_W=0.05, random_state=0).fit(COUNTS)
    assert_array_equal(old.components_, new.components_)
    with pytest.warns(FutureWarning, match="'alpha_H' was renamed 'atom_density_H'"):
        CoGAPS(2, max_iter=2, alpha_H=0.05, random_state=0).fit(COUNTS)
    with pytest.warns(FutureWarning, match="'patterns_' was renamed 'loadings_'"):
        assert_array_equal(new.patterns_, new.loadings_)
    with pytest.warns(FutureWarning, match="'patterns_std_' was renamed 'loadings_std_'"):
        assert_array_equal(new.patterns_std_, new.loadings_std_)
    with pytest.raises(InvalidParameterError, match="alpha_W"):
        CoGAPS(alpha_W=-1.0).fit(COUNTS)


def test_a_new_name_set_after_its_old_one_wins():
    """GridSearchCV over solver on an estimator made with method=...: set_params(solver=...)
    unsets method, so the candidate at the default solver fits that solver."""
    grid = GridSearchCV(
        ExtremeDeconvolution(2, method="sgd", max_iter=5, random_state=0),
        {"solver": ["em", "sgd"]}, cv=2,
    )  # fmt: skip
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        grid.fit(POINTS)
    em, sgd = grid.cv_results_["mean_test_score"]
    assert em != sgd  # both candidates fitted SGD before
    xd = ExtremeDeconvolution(2, method="sgd").set_params(solver="em")
    assert xd.get_params()["method"] == "deprecated" and xd.solver == "em"
    # both given at once: the old rule (both set to different values is an error)
    xd = ExtremeDeconvolution(2).set_params(method="sgd", solver="minibatch_em")
    with pytest.raises(ValueError, match="are both set"):
        xd.fit(POINTS)


def test_partial_fit_validates_its_parameters_at_every_call():
    xd = ExtremeDeconvolution(2, random_state=0).partial_fit(POINTS)
    xd.set_params(step_exponent=2.0)
    with pytest.raises(InvalidParameterError, match="step_exponent"):
        xd.partial_fit(POINTS)


@pytest.mark.parametrize("estimator", _factorisations(), ids=lambda e: type(e).__name__)
def test_a_non_numeric_column_is_named(estimator):
    pd = pytest.importorskip("pandas")
    df = pd.DataFrame(np.asarray(COUNTS, dtype=float)).add_prefix("g")
    df["cell_type"] = "T"
    with pytest.raises(ValueError, match=r"1 non-numeric column\(s\) \(\['cell_type'\]\).*"
                       r"X.drop\(columns=\['cell_type'\]\)"):  # fmt: skip
        clone(estimator).fit(df)
    # numbers held in object columns are numbers
    _quiet(clone(estimator).fit, df.drop(columns="cell_type").astype(object))


@pytest.mark.parametrize(
    "estimator", [*_factorisations(), ExtremeDeconvolution(2)], ids=lambda e: type(e).__name__
)
def test_a_1d_x_is_refused_without_printing_every_value(estimator):
    """scikit-learn's message printed the whole array (thousands of values) before its
    advice."""
    x = np.arange(1000, dtype=float) % 7
    expected = r"got 1D array instead \(1000 values\)\. Reshape your data: np\.reshape\(X, "
    with pytest.raises(ValueError, match=expected + r"\(-1, 1\)\) for 1000 samples") as refused:
        clone(estimator).fit(x)
    assert len(str(refused.value)) < 300


@pytest.mark.parametrize(
    "estimator, advice",
    [
        (CoGAPS(2, max_iter=5), "drop StandardScaler or use MaxAbsScaler"),
        (HierarchicalPMF(2, max_iter=5), "pass the raw counts"),
        (WeightedBackgroundPMF(2, max_iter=5), "pass the raw counts"),
    ],
)
def test_negative_input_says_what_to_pass_instead(estimator, advice):
    """A standardised matrix (the habit of a Pipeline with StandardScaler) is refused with
    scikit-learn's sentence first and what to pass instead, in fit and after it."""
    from sklearn.preprocessing import StandardScaler

    pipeline = make_pipeline(StandardScaler(), clone(estimator))
    with pytest.raises(ValueError, match=rf"^Negative values in data passed to X.*{advice}"):
        pipeline.fit(COUNTS)
    # the first negative entry is named, in a dense and a sparse X
    X = np.array(COUNTS, dtype=float)
    X[3, 2], X[4, 0] = -2.0, -1.0
    for data in (X, sparse.csr_matrix(X)):
        with pytest.raises(ValueError, match=r"\(the first at row 3, column 2: -2\)\. "):
            clone(estimator).fit(data)
    fitted = _quiet(clone(estimator).fit, COUNTS)
    with pytest.raises(ValueError, match=advice):
        fitted.transform(-COUNTS)


@pytest.mark.parametrize("estimator", _factorisations(), ids=lambda e: type(e).__name__)
def test_reconstruction_err_is_nmf_s_for_the_model_s_loss(estimator):
    est = _quiet(clone(estimator).fit, COUNTS)
    mean = est.loadings_ @ est.components_
    if isinstance(est, CoGAPS):  # Frobenius, NMF's default
        expected = np.linalg.norm(COUNTS - mean)
    else:  # the Poisson deviance, NMF's beta_loss="kullback-leibler"
        x = COUNTS
        kl = np.sum(np.where(x > 0, x * np.log(np.where(x > 0, x, 1) / mean), 0) - x + mean)
        expected = np.sqrt(2 * kl)
    assert_allclose(est.reconstruction_err_, expected, rtol=1e-10)
    sparse_fit = _quiet(clone(estimator).fit, sparse.csr_matrix(COUNTS))
    assert_allclose(sparse_fit.reconstruction_err_, expected, rtol=1e-10)


@pytest.mark.parametrize("estimator", _factorisations(), ids=lambda e: type(e).__name__)
def test_inverse_transform_keeps_the_pandas_output(estimator):
    pd = pytest.importorskip("pandas")
    frame = pd.DataFrame(COUNTS, columns=[f"g{j}" for j in range(15)],
                         index=[f"c{i}" for i in range(24)])  # fmt: skip
    est = _quiet(clone(estimator).set_output(transform="pandas").fit, frame)
    W = _quiet(est.transform, frame)
    back = est.inverse_transform(W)
    assert isinstance(back, pd.DataFrame)
    assert list(back.columns) == list(frame.columns) and list(back.index) == list(frame.index)
    assert_allclose(back.to_numpy(), W.to_numpy() @ est.components_)
    plain = est.set_output(transform="default")
    assert isinstance(plain.inverse_transform(W.to_numpy()), np.ndarray)


@pytest.mark.parametrize(
    "estimator, advice",
    [
        (CoGAPS(2, max_iter=5), r"large standard deviation: U = default_uncertainty"),
        (HierarchicalPMF(2), r"no missing counts.*np.nan_to_num\(X\)"),
        (WeightedBackgroundPMF(2), r"no missing counts.*np.nan_to_num\(X\)"),
    ],
    ids=lambda v: type(v).__name__ if hasattr(v, "fit") else "",
)
def test_nan_gets_advice_for_the_model_not_for_supervised_learning(estimator, advice):
    X = COUNTS.copy()
    X[0, 0] = np.nan
    for data in (X, sparse.csr_matrix(X)):
        message = r"Input X contains NaN \(the first at row 0, column 0: nan\)\. .*" + advice
        with pytest.raises(ValueError, match=message) as info:
            estimator.fit(data)
        assert "supervised" not in str(info.value)
    fitted = _quiet(clone(estimator).fit, COUNTS)
    with pytest.raises(ValueError, match=advice):
        fitted.transform(X)


@pytest.mark.parametrize(
    "estimator",
    [HierarchicalPMF(2, max_iter=20, random_state=0), WeightedBackgroundPMF(2, random_state=0)],
    ids=lambda e: type(e).__name__,
)
def test_float32_counts_give_float32_factors_computed_in_float64(estimator):
    X32 = COUNTS.astype(np.float32)
    one = _quiet(clone(estimator).fit, X32)
    ref = _quiet(clone(estimator).fit, X32.astype(np.float64))
    for name in ("loadings_", "components_"):
        assert getattr(one, name).dtype == np.float32
        assert_array_equal(getattr(one, name), getattr(ref, name).astype(np.float32))
    for data in (X32, sparse.csr_matrix(X32)):
        W = one.transform(data)
        assert W.dtype == np.float32
        assert_array_equal(W, ref.transform(X32.astype(np.float64)).astype(np.float32))
    assert one.transform(X32.astype(np.float64)).dtype == np.float64
    assert one.inverse_transform(W).dtype == np.float32
    assert _quiet(clone(estimator).fit_transform, X32).dtype == np.float32
    # pandas' nullable Float32 is float32 data too
    pd = pytest.importorskip("pandas")
    frame = pd.DataFrame(X32).astype("Float32")
    assert_array_equal(one.transform(frame), one.transform(X32))
    assert one.transform(frame).dtype == np.float32


@pytest.mark.parametrize("estimator", _all_estimators(), ids=lambda e: type(e).__name__)
def test_an_integral_float_for_an_int_says_what_to_write(estimator):
    """R's habit max_iter=1e4 gives a float: the refusal says to write the int."""
    X = POINTS if isinstance(estimator, ExtremeDeconvolution) else COUNTS
    est = clone(estimator).set_params(max_iter=1e2)
    with pytest.raises(InvalidParameterError, match=r"must be an int.*Write max_iter=100:"):
        est.fit(X)
    # a float that is no int gets scikit-learn's message alone
    with pytest.raises(InvalidParameterError) as caught:
        clone(estimator).set_params(max_iter=2.5).fit(X)
    assert "Write" not in str(caught.value)


def test_an_integral_float_for_an_int_says_what_to_write_maxmarginmf():
    with pytest.raises(InvalidParameterError, match=r"must be an int.*Write max_iter=50:"):
        _m3f_model(max_iter=50.0).fit(RATINGS)


@pytest.mark.parametrize(
    "Estimator",
    [CoGAPS, HierarchicalPMF, WeightedBackgroundPMF, ExtremeDeconvolution, MaxMarginMF],
)
def test_a_bool_for_a_number_is_refused(Estimator):
    # a bool is an int to Python: n_components=True (a boolean grid) fitted one component
    # or failed inside numpy
    from sklearn.utils._param_validation import InvalidParameterError

    with pytest.raises(InvalidParameterError, match="'n_components' parameter of .* must be a "
                       "number, not a bool; got True"):  # fmt: skip
        Estimator(n_components=True).fit(np.ones((6, 5)))
