"""What the Poisson factorisations share: the Poisson log-likelihood of held-out counts
(hpfrec's eval_llk, scHPF's mean_negative_pois_llh), and several starts (n_init)."""

import warnings

import numpy as np
import pytest
from numpy.testing import assert_allclose
from scipy import sparse, stats
from sklearn.exceptions import ConvergenceWarning

from sklearn_cogaps import HierarchicalPMF, WeightedBackgroundPMF


@pytest.fixture(scope="module", params=[HierarchicalPMF, WeightedBackgroundPMF])
def thinned(request):
    rng = np.random.default_rng(0)
    X = rng.poisson(rng.gamma(0.5, 2.0, (120, 3)) @ rng.gamma(0.5, 2.0, (3, 60)))
    A = rng.binomial(X, 0.5)  # binomial thinning: two independent halves of the counts
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        est = request.param(3, random_state=0).fit(X[:100])
    return est, X, A, X - A


def test_the_loglik_of_training_rows_is_scipy_s(thinned):
    est, X, _, _ = thinned
    terms = stats.poisson.logpmf(X[:100], est.loadings_ @ est.components_)
    rows = np.arange(100)
    assert_allclose(est.poisson_loglik(X[:100], users=rows), terms.mean(), rtol=1e-12)
    assert_allclose(est.poisson_loglik(X[:100], users=rows, average=None), terms.sum(),
                    rtol=1e-12)  # fmt: skip
    nonzero = X[:100] > 0
    scored = est.poisson_loglik(sparse.csr_matrix(X[:100]), users=rows, average="nonzero")
    assert_allclose(scored, terms[nonzero].mean(), rtol=1e-12)
    # hpfrec's eval_llk sums over the given triplets (the stored counts): what its refusal
    # says to write gives that sum
    with pytest.raises(AttributeError) as refused:
        _ = est.eval_llk
    advice = "poisson_loglik(X_held, users=np.arange(X_held.shape[0]), average='nonzero') * "
    assert advice + "X_held.nnz" in str(refused.value)
    assert_allclose(scored * nonzero.sum(), terms[nonzero].sum(), rtol=1e-12)


def test_held_out_rows_are_scored_on_one_half_fitted_on_the_other(thinned):
    est, _, A, B = thinned
    new_A, new_B = A[100:], B[100:]
    W = est.transform(new_A)
    expected = stats.poisson.logpmf(new_B, W @ est.components_).mean()
    assert_allclose(est.poisson_loglik(new_B, fit_on=new_A), expected, rtol=1e-12)
    # fitted on the counts scored, the rows see their own noise and score higher
    assert est.poisson_loglik(new_B) > est.poisson_loglik(new_B, fit_on=new_A)


def test_the_loglik_refuses_what_it_cannot_read(thinned):
    est, X, A, B = thinned
    with pytest.raises(ValueError, match="average must be"):
        est.poisson_loglik(X[:5], average="mean")
    for depth in (0, -0.25, np.inf, np.nan, True, "0.25"):
        with pytest.raises(ValueError, match=r"depth must be a positive number .*thin_counts"):
            est.poisson_loglik(X[:5], depth=depth)
    with pytest.raises(ValueError, match="not both"):
        est.poisson_loglik(X[:5], users=np.arange(5), fit_on=A[:5])
    with pytest.raises(ValueError, match="fit_on must hold the rows of X"):
        est.poisson_loglik(B[:5], fit_on=A[:6])
    with pytest.raises(AttributeError, match=r"eval_llk.*poisson_loglik"):
        _ = est.eval_llk
    with pytest.raises(AttributeError, match=r"project.*scHPF.*transform\(X_new\)"):
        _ = est.project


def test_weighted_background_stops_on_held_out_counts_at_its_best_iteration():
    rng = np.random.default_rng(0)
    X = rng.poisson(rng.gamma(0.5, 2.0, (300, 5)) @ rng.gamma(0.5, 2.0, (5, 200)))
    X_val = rng.binomial(X, 0.2)
    kw = dict(n_components=10, random_state=0, max_iter=300)
    est = WeightedBackgroundPMF(**kw).fit(X - X_val, X_val=X_val)
    scores = est.validation_scores_
    assert est.n_iter_ < 300 and scores.argmax() == est.n_iter_ - 1
    # scored at their depth: the fit's means estimate the training counts'
    depth = X_val.sum() / (X - X_val).sum()
    assert depth == pytest.approx(0.25, rel=0.02)
    assert_allclose(est.poisson_loglik(X_val, users=np.arange(300), depth=depth), scores[-1],
                    rtol=1e-12)  # fmt: skip
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        plain = WeightedBackgroundPMF(**{**kw, "max_iter": est.n_iter_, "tol": 0.0}).fit(X - X_val)
    assert plain.validation_scores_ is None
    assert_allclose(plain.components_, est.components_, rtol=0, atol=0)


def test_held_out_counts_in_a_column_without_training_counts_are_scored():
    # The background of a column without a training count is 0 during the fit: a held-out
    # count there scored -inf at every iteration, and the fit stopped at its first one.
    rng = np.random.default_rng(0)
    X = rng.poisson(rng.gamma(0.5, 2.0, (150, 3)) @ rng.gamma(0.3, 3.0, (80, 3)).T)
    X_val = np.random.default_rng(0).binomial(X, 0.2)
    assert np.any(((X - X_val).sum(axis=0) == 0) & (X_val.sum(axis=0) > 0))
    est = WeightedBackgroundPMF(3, random_state=0, max_iter=300).fit(X - X_val, X_val=X_val)
    assert np.all(np.isfinite(est.validation_scores_)) and est.n_iter_ > 1
    assert est.validation_scores_.argmax() == est.n_iter_ - 1
    depth = X_val.sum() / (X - X_val).sum()
    assert_allclose(est.poisson_loglik(X_val, users=np.arange(150), depth=depth),
                    est.validation_scores_[-1], rtol=1e-12)  # fmt: skip


def test_held_out_counts_in_a_row_without_training_counts_are_left_out_with_a_warning():
    # A row without a training count has background 0: its held-out counts would score
    # -inf at every iteration and stop the fit at its first one.
    rng = np.random.default_rng(0)
    X = rng.poisson(rng.gamma(0.5, 2.0, (150, 3)) @ rng.gamma(0.3, 3.0, (80, 3)).T)
    X_val = np.random.default_rng(0).binomial(X, 0.2)
    X_val[7] = 0
    X_val[7, :3] = 1
    X[7] = X_val[7]  # row 7: all its counts held out
    with pytest.warns(UserWarning, match=r"1 row\(s\) of X_val hold counts where X has none "
                      r"\(the first: row 7\)"):  # fmt: skip
        est = WeightedBackgroundPMF(3, random_state=0, max_iter=300).fit(X - X_val, X_val=X_val)
    assert np.all(np.isfinite(est.validation_scores_)) and est.n_iter_ > 1
    kept = X_val.copy()
    kept[7] = 0
    depth = kept.sum() / (X - X_val).sum()
    assert_allclose(est.poisson_loglik(kept, users=np.arange(150), depth=depth),
                    est.validation_scores_[-1], rtol=1e-12)  # fmt: skip


@pytest.mark.parametrize("Estimator", [HierarchicalPMF, WeightedBackgroundPMF])
def test_held_out_counts_with_labels_must_be_aligned_with_x(Estimator):
    pd = pytest.importorskip("pandas")
    rng = np.random.default_rng(0)
    X = pd.DataFrame(rng.poisson(2, (30, 12)).astype(float), columns=[f"g{j}" for j in range(12)])
    X_val = X * 0 + rng.poisson(0.5, X.shape)
    est = Estimator(2, max_iter=3, tol=0.0)
    with pytest.raises(ValueError, match=r"column labels of 'X_val' are the column labels of X"):
        est.fit(X, X_val=X_val[X.columns[::-1]])
    with pytest.raises(ValueError, match=r"row labels of 'X_val' are the row labels of X"):
        est.fit(X, X_val=X_val.iloc[::-1])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        est.fit(X, X_val=X_val)  # aligned: accepted
    # poisson_loglik(fit_on=...): other counts of the same rows, matched by position
    est.poisson_loglik(X_val, fit_on=X)
    with pytest.raises(ValueError, match=r"row labels of 'fit_on' are the row labels of X"):
        est.poisson_loglik(X_val, fit_on=X.iloc[::-1])
    # an AnnData's names are its labels: genes or cells in another order are refused too
    ad = pytest.importorskip("anndata")
    adata, held = ad.AnnData(X), ad.AnnData(X_val)
    with pytest.raises(ValueError, match=r"column labels of 'X_val' .* in another order .*"
                       r"Align it first: X_val\[X\.obs_names, X\.var_names\]"):  # fmt: skip
        est.fit(adata, X_val=held[:, X.columns[::-1]])
    with pytest.raises(ValueError, match=r"row labels of 'X_val' are the row labels of X"):
        est.fit(adata, X_val=held[held.obs_names[::-1]])
    with pytest.raises(ValueError, match=r"Align it first: X_val\.loc\[X\.obs_names, "):
        est.fit(adata, X_val=X_val[X.columns[::-1]])
    # AnnData's own numbering ('0', '1', ...) beside a subset's names is positions
    names = pd.DataFrame(index=[str(i) for i in range(10, 30)])
    subset = ad.AnnData(X.iloc[10:].to_numpy(), obs=names)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        est.fit(subset, X_val=ad.AnnData(X_val.iloc[10:].to_numpy()))
        est.fit(X.iloc[10:], X_val=ad.AnnData(X_val.iloc[10:].to_numpy()))


@pytest.mark.parametrize("Estimator", [HierarchicalPMF, WeightedBackgroundPMF])
def test_held_out_counts_are_refused_by_their_own_name(Estimator):
    rng = np.random.default_rng(0)
    X = rng.poisson(2, (30, 12)).astype(float)
    est = Estimator(2, max_iter=3, tol=0.0)
    with pytest.raises(ValueError, match=r"passed to X_val in .*The model is for counts"):
        est.fit(X, X_val=-X)
    with pytest.raises(ValueError, match=r"Input X_val contains NaN \(the first at row 0, "
                       r"column 2: nan\)\. A Poisson"):  # fmt: skip
        est.fit(X, X_val=np.where(X > 3, np.nan, X))
    with pytest.raises(ValueError, match=r"X_val sums to .*Rescale X_val"):
        est.fit(X, X_val=np.full_like(X, 1e300))
    with pytest.raises(ValueError, match=r"X_val holds no positive count.*thin_counts"):
        est.fit(X, X_val=np.zeros_like(X))
    # the held-out counts of an AnnData's rows may be a plain array, without a warning
    anndata = pytest.importorskip("anndata")
    adata = anndata.AnnData(X)
    adata.var_names = [f"g{j}" for j in range(12)]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        warnings.simplefilter("ignore", ConvergenceWarning)
        est.fit(adata, X_val=X)


@pytest.mark.parametrize("Estimator", [HierarchicalPMF, WeightedBackgroundPMF])
def test_n_init_runs_from_different_starts(Estimator, monkeypatch):
    # NNDSVDa does not depend on its seed: the later starts must not repeat the first fit
    from sklearn_cogaps._base import IterativeMixin

    objectives = []
    better = IterativeMixin._better

    def record(self, run, best):
        objectives.extend([best.objective, run.objective])
        return better(self, run, best)

    monkeypatch.setattr(IterativeMixin, "_better", record)
    X = np.random.default_rng(0).poisson(2.0, (60, 30))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        Estimator(3, n_init=3, max_iter=20, random_state=0).fit(X)
    assert len(set(objectives)) == 3


def test_a_user_the_model_expects_nothing_of_gets_no_ranking():
    # WeightedBackgroundPMF gives a row without counts a background of 0: every score is 0,
    # and the "top" items were the first ones, with scores 0
    rng = np.random.default_rng(0)
    X = rng.poisson(rng.gamma(0.5, 2.0, (60, 3)) @ rng.gamma(0.5, 2.0, (3, 20)))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        est = WeightedBackgroundPMF(3, random_state=0).fit(X)
    with pytest.warns(UserWarning, match=r"1 user\(s\) \(rows \[0\]\) have zero loadings"):
        items, scores = est.recommend(np.vstack([np.zeros(20), X[0]]), 3)
    assert np.all(items[0] == -1) and np.all(np.isnan(scores[0]))
    assert np.all(items[1] >= 0) and np.all(scores[1] > 0)


@pytest.mark.parametrize("Estimator", [HierarchicalPMF, WeightedBackgroundPMF])
def test_fractional_counts_are_warned_about_by_both_models(Estimator):
    X = np.random.default_rng(0).poisson(2, (30, 12)) + 0.5
    with pytest.warns(UserWarning, match="non-integer values"):
        est = Estimator(2, max_iter=2, tol=0.0).fit(X)
    # new rows too, in memory and read by blocks: one warning for all the blocks
    with pytest.warns(UserWarning, match="non-integer values"):
        est.transform(X)
    da = pytest.importorskip("dask.array")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        est.transform(da.from_array(X, chunks=(10, -1)))
    assert sum("non-integer" in str(w.message) for w in caught) == 1


def test_thin_counts_splits_every_count():
    from sklearn_cogaps import thin_counts

    rng = np.random.default_rng(0)
    X = rng.poisson(3.0, (200, 50)).astype(np.float32)
    train, held = thin_counts(X, 0.2, random_state=0)
    assert train.dtype == held.dtype == np.float64
    assert np.array_equal(train + held, X) and train.min() >= 0 and held.min() >= 0
    assert held.sum() / X.sum() == pytest.approx(0.2, abs=0.01)
    # sparse counts (and a dense matrix in either order) give the same draws, as CSR
    # without stored zeros
    assert np.mean(X == 0) > 0.04
    strain, sheld = thin_counts(sparse.csc_matrix(X), 0.2, random_state=0)
    assert sparse.isspmatrix_csr(sheld) and np.all(sheld.data > 0)
    assert np.array_equal(sheld.toarray(), held) and np.array_equal(strain.toarray(), train)
    assert np.array_equal(thin_counts(np.asfortranarray(X), 0.2, random_state=0)[1], held)
    # stored zeros take no draw: the same counts as the dense matrix's
    S = sparse.csr_matrix(X)
    S.data[::3] = 0
    assert np.array_equal(thin_counts(S, 0.2, random_state=0)[1].toarray(),
                          thin_counts(S.toarray(), 0.2, random_state=0)[1])  # fmt: skip
    # the counts of a COO are the sums of its duplicates: 0.5 + 0.5 is a count of 1
    C = sparse.coo_matrix(([0.5, 0.5, 3.0], ([0, 0, 1], [0, 0, 1])), shape=(2, 2))
    ctrain, cheld = thin_counts(C, 0.5, random_state=0)
    assert np.array_equal((ctrain + cheld).toarray(), [[1.0, 0.0], [0.0, 3.0]])
    assert np.array_equal(thin_counts(X, 0.2, random_state=0)[1], held)
    with pytest.raises(ValueError, match="whole-number counts.*holdout_ratings"):
        thin_counts(X + 0.5)
    with pytest.raises(ValueError, match=r"fraction must be in \(0, 1\)"):
        thin_counts(X, 1.0)
