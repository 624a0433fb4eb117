"""Inputs that once gave a wrong answer without a word now raise or warn, with a message
that says what to do (each test is the call that used to pass quietly)."""

import re
import warnings

import numpy as np
import pytest
from sklearn.datasets import load_digits
from sklearn.exceptions import ConvergenceWarning

from sklearn_cogaps import (
    CoGAPS,
    ExtremeDeconvolution,
    HierarchicalPMF,
    MaxMarginMF,
    WeightedBackgroundPMF,
)

from _shared import local_cluster


def _counts(shape, seed=0):
    return np.random.default_rng(seed).poisson(2.0, shape).astype(np.float64)


@pytest.mark.parametrize("Estimator", [HierarchicalPMF, WeightedBackgroundPMF])
def test_counts_too_large_for_the_updates_are_refused(Estimator):
    X = _counts((30, 20))
    X[0, 0] = 1e300
    with pytest.raises(ValueError, match=r"sums to 1e\+300.*Rescale X"):
        Estimator(3).fit(X)


def test_cogaps_refuses_data_of_zeros():
    with pytest.raises(ValueError, match="only zeros.*Remove empty data"):
        CoGAPS(3).fit(np.zeros((30, 20)))


def test_cogaps_advises_the_poisson_uncertainty_for_counts():
    X = load_digits().data[:60]
    with pytest.warns(UserWarning, match="whole numbers up to 16.*uncertainty='poisson'"):
        CoGAPS(3, max_iter=5).fit(X)
    # the advice is for the default only, and only for counts beyond 0 and 1
    rng = np.random.default_rng(0)
    quiet = [
        (X, {"uncertainty": "relative"}),
        (X, {"uncertainty": "poisson"}),
        (X + rng.uniform(0, 0.01, X.shape), {}),
        ((X > 8).astype(np.float64), {}),
    ]
    for data, kwargs in quiet:
        with warnings.catch_warnings():
            warnings.simplefilter("error", UserWarning)
            warnings.simplefilter("ignore", ConvergenceWarning)
            CoGAPS(3, max_iter=5).fit(data, **kwargs)


def _ratings(seed=0):
    rng = np.random.default_rng(seed)
    R = np.full((20, 15), np.nan)
    for i in range(20):
        R[i, rng.choice(15, 8, replace=False)] = rng.integers(1, 6, 8)
    return R


def test_a_stray_fraction_among_star_ratings_is_refused():
    R = _ratings()
    j = np.flatnonzero(~np.isnan(R[4]))[0]
    R[4, j] = 3.7
    with pytest.raises(ValueError, match=rf"\(3.7; the first at row 4, column {j}\).*np.round"):
        MaxMarginMF(3, max_iter=20, burn_in=5, random_state=0).fit(R)
    # a scale with half stars is a scale: its fractions are many
    half = _ratings() / 2
    est = MaxMarginMF(3, max_iter=20, burn_in=5, random_state=0).fit(half)
    assert 2.5 in est.levels_ and 0.5 in est.levels_


@pytest.mark.parametrize("Estimator", [HierarchicalPMF, WeightedBackgroundPMF])
def test_more_components_than_features_fit_with_the_defaults(Estimator):
    X = _counts((30, 10), seed=1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        warnings.simplefilter("ignore", ConvergenceWarning)
        est = Estimator(n_components=15, random_state=0).fit(X)
    assert np.all(np.isfinite(est.loadings_)) and np.all(np.isfinite(est.components_))
    assert est.transform(X).shape == (30, 15)


@pytest.mark.parametrize("name", ["HierarchicalPMF", "WeightedBackgroundPMF", "CoGAPS",
                                  "ExtremeDeconvolution", "MaxMarginMF"])  # fmt: skip
def test_a_masked_array_is_refused_rather_than_read_under_its_mask(name):
    """numpy's conversions read the values under a mask: every estimator would have fitted
    what the mask hides, without a word."""
    import sklearn_cogaps

    X = _counts((40, 8)).astype(float) + 1.0
    mask = np.zeros(X.shape, dtype=bool)
    mask[5, 3] = mask[7, 1] = True
    # advice that runs on integer arrays too (their filled(np.nan) raises)
    advice = {
        "ExtremeDeconvolution": r"X\.astype\(float\)\.filled\(np\.nan\)",
        "MaxMarginMF": r"X\.astype\(float\)\.filled\(np\.nan\)",
        "HierarchicalPMF": r"X\.filled\(0\)",
        "WeightedBackgroundPMF": r"X\.filled\(0\)",
        "CoGAPS": r"np\.ma\.getmaskarray\(X\)",
    }
    estimator = getattr(sklearn_cogaps, name)(2, max_iter=2, random_state=0)
    with pytest.raises(ValueError, match="masked array with 2 masked entries; " + name
                       + r" would read the values under the mask\..*"
                       + advice.get(name, "")):  # fmt: skip
        estimator.fit(np.ma.masked_array(X, mask))
    # a masked array without masked entries is its data
    if name == "HierarchicalPMF":
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            plain = estimator.fit(X).components_
            assert np.array_equal(estimator.fit(np.ma.masked_array(X)).components_, plain)


def _side_input_calls():
    """(name of the masked input, call taking the masked array) for every side input."""
    from sklearn_cogaps import ExtremeDeconvolution, rating_mae

    X = _counts((30, 10)) + 1.0
    U = np.maximum(0.1 * X, 0.1)
    cogaps = CoGAPS(2, max_iter=3, random_state=0).fit(X, uncertainty=U)
    Y = np.random.default_rng(0).normal(size=(30, 2))
    xd = ExtremeDeconvolution(2, max_iter=3, random_state=0).fit(Y)
    ratings = np.where(X > 3, np.minimum(X, 5.0), np.nan)
    return [
        ("uncertainty", lambda m: CoGAPS(2, max_iter=3).fit(X, uncertainty=m(U))),
        ("uncertainty", lambda m: cogaps.transform(X, uncertainty=m(U))),
        ("uncertainty", lambda m: cogaps.score(X, uncertainty=m(U))),
        ("fixed_components",
         lambda m: CoGAPS(2, max_iter=3).fit(X, fixed_components=m(np.ones((2, 10))))),
        ("X_cov", lambda m: ExtremeDeconvolution(2, max_iter=3).fit(Y, X_cov=m(0.1 + 0 * Y))),
        ("X_cov", lambda m: xd.score_samples(Y, X_cov=m(0.1 + 0 * Y))),
        ("projection",
         lambda m: ExtremeDeconvolution(2, max_iter=3).fit(Y, projection=m(np.eye(2)))),
        ("sample_weight",
         lambda m: ExtremeDeconvolution(2, max_iter=3).fit(Y, sample_weight=m(np.ones(30)))),
        ("means_init",
         lambda m: ExtremeDeconvolution(2, max_iter=3, means_init=m(Y[:2])).fit(Y)),
        ("W", lambda m: WeightedBackgroundPMF(2, max_iter=2, init="custom").fit(
            X, W=m(np.ones((30, 2))), H=np.ones((2, 10)))),
        ("X_true", lambda m: rating_mae(m(np.nan_to_num(ratings)), np.nan_to_num(ratings))),
    ]  # fmt: skip


def test_masked_side_inputs_are_refused_rather_than_read_under_their_mask():
    """The uncertainty, noise, projection, weights, starts and fixed matrices were read
    under their mask, as X was before it was refused."""

    def masked(a):
        mask = np.zeros(np.shape(a), dtype=bool)
        mask.flat[0] = True
        return np.ma.masked_array(a, mask)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        for name, call in _side_input_calls():
            with pytest.raises(ValueError, match=rf"^{name} is a masked array with 1 masked"):
                call(masked)
            call(np.ma.masked_array)  # without masked entries: its data, no error


def test_masked_and_misdeclared_dask_chunks_are_refused():
    da = pytest.importorskip("dask.array")
    dask = pytest.importorskip("dask")
    from sklearn_cogaps import ExtremeDeconvolution

    X = _counts((60, 8)).astype(float)
    mask = np.zeros(X.shape, dtype=bool)
    mask[45, 2] = True
    masked = da.ma.masked_array(da.from_array(X, chunks=(20, -1)), da.from_array(mask, (20, -1)))
    with pytest.raises(ValueError, match=r"1 masked entry \(in the block from row 0\)"):
        HierarchicalPMF(2, max_iter=2).fit(masked)
    with pytest.raises(ValueError, match=r"1 masked entry \(in the block from row 40\).*nan"):
        ExtremeDeconvolution(2, max_iter=2).fit(masked)
    # chunks whose real rows differ from the declared ones, with the right total: read
    # together, each chunk is still checked against its own size
    parts = [dask.delayed(lambda i=i: X[20 * i : 20 * (i + 1)])() for i in range(3)]
    declared = {1: 18, 2: 22}
    lying = da.concatenate([da.from_delayed(p, shape=(declared.get(i, 20), 8), dtype=float)
                            for i, p in enumerate(parts)])  # fmt: skip
    with pytest.raises(ValueError, match=r"Chunk 1 \(rows 20 to 38\) of X has shape \(20, 8\)"):
        HierarchicalPMF(2, max_iter=2).fit(lying)
    with pytest.raises(ValueError, match=r"Chunk 1 \(points 20 to 38\) of X has shape \(20, 8\)"):
        ExtremeDeconvolution(2, max_iter=2).fit(lying)
    # on a cluster, where the workers read the chunks, a lying chunk is named by its index
    # (the first to fail: chunk 2 lies too)
    on_cluster = r"Chunk (1 \({} 20 to 38\)|2 \({} 38 to 60\)) of X has shape \(20, 8\)"
    noise = da.from_array(np.ones((60, 8)), chunks=(20, -1))
    short = da.concatenate([noise[:20], noise[20:40].map_blocks(lambda b: b[:-1]), noise[40:]])
    Xd = da.from_array(X, chunks=(20, -1))
    with pytest.raises(ValueError, match=r"Chunk 1 \(points 20 to 40\) of X_cov has shape"):
        ExtremeDeconvolution(2, max_iter=2).fit(Xd, X_cov=short)
    with local_cluster(2):
        with pytest.raises(ValueError, match=on_cluster.format("rows", "rows")):
            HierarchicalPMF(2, max_iter=2).fit(lying)
        with pytest.raises(ValueError, match=on_cluster.format("points", "points")):
            ExtremeDeconvolution(2, max_iter=2).fit(lying)
        with pytest.raises(ValueError, match=r"Chunk 1 \(points 20 to 40\) of X_cov has shape"):
            ExtremeDeconvolution(2, max_iter=2).fit(Xd, X_cov=short)


def test_nan_and_infinity_are_named_by_their_place():
    from scipy import sparse

    from sklearn_cogaps import ExtremeDeconvolution

    X = _counts((200, 8)).astype(float)
    X[105, 4] = np.nan
    where = r"\(the first at row 105, column 4: nan\)\. A Poisson factorisation"
    sources = [X, sparse.csr_matrix(X)]
    da = pytest.importorskip("dask.array")
    sources.append(da.from_array(X, chunks=(50, -1)))  # the row in the whole data
    for source in sources:
        with pytest.raises(ValueError, match=r"Input X contains NaN " + where):
            HierarchicalPMF(2, max_iter=2).fit(source)
    X[105, 4] = np.inf
    with pytest.raises(ValueError, match=r"infinity .*\(the first at row 105, column 4: inf\)"):
        ExtremeDeconvolution(2, max_iter=2).fit(X)


def test_hpmf_priors_stalled_at_a_strong_start_are_not_called_converged():
    from sklearn_cogaps.datasets import make_single_cell

    X = make_single_cell(300, 200, 4, random_state=0)[0]
    # prior_shape=1e6 with learned priors once stopped at its second iteration, converged_
    # True, at an ELBO of -1.02e5 where the default start reaches -4.05e4
    with pytest.warns(ConvergenceWarning, match=r"stopped near its start.*prior_shape=1e\+06.*"
                      r"prior_shape=1 \(the default"):  # fmt: skip
        stalled = HierarchicalPMF(4, prior_shape=1e6, random_state=0).fit(X)
    assert not stalled.converged_
    # the same priors kept on purpose, or a start that learns, say nothing
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        kept = HierarchicalPMF(4, prior_shape=1e6, learn_prior="none", random_state=0).fit(X)
        learned = HierarchicalPMF(4, prior_shape=1e3, random_state=0).fit(X)
        default = HierarchicalPMF(8, random_state=0).fit(X)  # unused components' weak priors
    assert kept.converged_ and learned.converged_ and default.converged_
    assert learned.score(X) > stalled.score(X) + 100


@pytest.mark.parametrize("dense", [False, True])
@pytest.mark.parametrize("Estimator", [HierarchicalPMF, WeightedBackgroundPMF])
def test_held_out_interactions_as_x_val_warn(Estimator, dense):
    """A split of the interactions (hpfrec's val_set) as X_val: every entry of its rows is
    scored, the training counts as held-out zeros, and early stopping kept iteration 1.
    Dense matrices (a pivot table's) warn as sparse ones do."""
    from scipy import sparse

    from sklearn_cogaps import holdout_ratings, thin_counts

    rng = np.random.default_rng(0)
    rates = rng.gamma(0.5, 1.0, (80, 3)) @ rng.gamma(0.5, 1.0, (3, 40))
    X = sparse.csr_matrix(rng.poisson(rates).astype(np.float64))
    X_train, X_val = holdout_ratings(X, 3, random_state=0)
    if dense:
        X_train, X_val = X_train.toarray(), X_val.toarray()
    with pytest.warns(UserWarning, match=r"X_val has no count where X has one.*thin_counts"):
        Estimator(3, max_iter=5, random_state=0).fit(X_train, X_val=X_val)
    X_train, X_val = thin_counts(X.toarray() if dense else X, 0.2, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        warnings.simplefilter("ignore", ConvergenceWarning)
        Estimator(3, max_iter=5, random_state=0).fit(X_train, X_val=X_val)


def test_nmae_of_a_shorter_scale_under_the_default_levels_warns():
    from sklearn_cogaps import rating_nmae

    # a 1..4 scale was normalised by the E_L of 1..5 (1.6 instead of 1.25) without a word
    with pytest.warns(UserWarning, match=r"run from 1 to 4.*levels=range\(1, 5\)"):
        assert rating_nmae([1.0, 2.0, 3.0, 4.0], [2.0, 2.0, 3.0, 3.0]) == 0.3125
    assert rating_nmae([1.0, 2.0, 3.0, 4.0], [2.0, 2.0, 3.0, 3.0], levels=range(1, 5)) == 0.4
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        rating_nmae([1.0, 5.0], [2.0, 5.0])
        rating_nmae([2.0, 4.0], [2.0, 5.0], levels=range(1, 6))


def test_cogaps_sparse_model_refuses_values_its_sums_cannot_hold():
    """X * 5e6 overflowed the sparse model's start and blamed a saved state; at 1e5 its
    chi-square was 4e-9 of the dense model's, without a word. The zeros' terms are the whole
    matrix's minus the stored entries', which keep no digit when the weights span 1e12."""
    from scipy import sparse

    from sklearn_cogaps.datasets import make_patterns

    X = make_patterns(20, 50, 3, random_state=0)[0]
    X[X < 2] = 0.0
    with pytest.raises(ValueError, match=r"largest value, 1\.6e\+06.*log1p\(X\)"):
        CoGAPS(3, max_iter=5, sparse_optimization=True).fit(sparse.csr_matrix(X * 1e5))
    # poisson weights span only the values themselves; at 1e4 the two models agree
    CoGAPS(3, max_iter=5, random_state=0).fit(sparse.csr_matrix(X * 1e5), uncertainty="poisson")
    scaled = X * 1e4
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        dense = CoGAPS(3, max_iter=50, random_state=0).fit(scaled)
        stored = CoGAPS(3, max_iter=50, random_state=0).fit(sparse.csr_matrix(scaled))
    assert stored.chisq_ == pytest.approx(dense.chisq_, rel=1e-3)


def test_max_margin_mf_refuses_an_ibp_that_expects_too_many_features():
    from _shared import RATINGS

    # alpha=1e6 ended in a MemoryError that advised fewer threads; 1e4 ran for minutes
    with pytest.raises(ValueError, match=r"alpha=1e\+06 .*3\.99e\+06 features for N = 30.*1 to 10"):
        MaxMarginMF(prior="ibp", alpha=1e6, max_iter=3, burn_in=0).fit(RATINGS)


def test_a_stable_pathwise_fit_is_not_called_diverged():
    """Its objective is one Monte Carlo estimate per step: the last against the best of a
    thousand read a stable fit as diverged, with advice to lower learning_rate."""
    rng = np.random.RandomState(0)
    X = rng.poisson(rng.gamma(1.0, 1.0, (24, 2)) @ rng.gamma(1.0, 1.0, (2, 15))).astype(float)
    with pytest.warns(ConvergenceWarning) as caught:
        HierarchicalPMF(2, solver="pathwise", max_iter=300, random_state=2).fit(X)
    message = str(caught[0].message)
    assert "diverged" not in message and "last two windows" in message
    with pytest.warns(ConvergenceWarning, match="diverged.*lower learning_rate"):
        HierarchicalPMF(2, solver="pathwise", learning_rate=10.0, max_iter=300,
                        random_state=0).fit(X)  # fmt: skip


def test_parameters_the_solver_does_not_read_warn():
    """ExtremeDeconvolution's batch_size, learning_rate and split_merge and MaxMarginMF's
    alpha were dropped without a word where the solver or prior does not read them (a grid
    over them fitted the same model each time); HierarchicalPMF already warned."""
    from sklearn_cogaps import ExtremeDeconvolution

    from _shared import RATINGS

    X = np.random.default_rng(0).normal(size=(80, 2))
    for params, name in ((dict(learning_rate=0.1), "learning_rate=0.1 is used only with "
                          "solver='sgd'"), (dict(batch_size=10), "batch_size=10"),
                         (dict(solver="sgd", split_merge=1), "split_merge=1")):  # fmt: skip
        with pytest.warns(UserWarning, match=name):
            _quiet_fit(ExtremeDeconvolution(2, max_iter=5, random_state=0, **params), X)
    with pytest.warns(UserWarning, match=r"alpha=2\.0 is used only with prior='ibp'"):
        _quiet_fit(MaxMarginMF(3, alpha=2.0, max_iter=6, burn_in=2, random_state=0), RATINGS)


def test_parameters_this_fit_does_not_read_warn():
    """CoGAPS's checkpoint_every and checkpoint_minutes without checkpoint_path, its
    snapshot_phase without snapshots, and the Poisson models' n_iter_no_change without
    held-out counts and total_samples in fit were dropped without a word."""
    X = _counts((20, 30))
    unread = [
        (dict(checkpoint_every=10), "checkpoint_every=10 is used only with checkpoint_path"),
        (dict(checkpoint_minutes=1.0), "checkpoint_minutes"),
        (dict(snapshot_phase="all"), "used only with n_snapshots > 0"),
    ]
    for params, name in unread:
        with pytest.warns(UserWarning, match=name):
            _quiet_fit(CoGAPS(2, max_iter=4, random_state=0, **params), X)
    for Estimator in (HierarchicalPMF, WeightedBackgroundPMF):
        with pytest.warns(UserWarning, match=r"n_iter_no_change=5 is used only with held-out"):
            _quiet_fit(Estimator(2, max_iter=3, n_iter_no_change=5), X)
        with pytest.warns(UserWarning, match=r"total_samples=10 is used only by partial_fit"):
            _quiet_fit(Estimator(2, max_iter=3, total_samples=10), X)
        with warnings.catch_warnings():  # where they are read, no warning
            warnings.simplefilter("error", UserWarning)
            warnings.simplefilter("ignore", ConvergenceWarning)
            Estimator(2, total_samples=40).partial_fit(X)
            Estimator(2, max_iter=3, n_iter_no_change=5).fit(X, X_val=X[::-1])
            # fit continuing a stream of partial_fit: the documented route, which set it
            stream = Estimator(2, random_state=0, total_samples=40)
            stream.partial_fit(X[:10]).partial_fit(X[10:])
            stream.set_params(warm_start=True, max_iter=3).fit(X)


def _quiet_fit(estimator, X):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return estimator.fit(X)


def test_a_coordinate_no_point_observes_is_warned_about():
    """A column of X all NaN, or a direction of v outside every projection: the fitted
    mean and variance there were the start's, without a word."""
    from sklearn_cogaps import ExtremeDeconvolution

    Y = np.random.default_rng(0).normal(size=(60, 2))
    Y[:, 1] = np.nan
    with pytest.warns(UserWarning, match=r"1 coordinate\(s\) of v are observed by no point.*\[1\]"):
        _fit_quietly(ExtremeDeconvolution(2, max_iter=3, random_state=0), Y)
    flat = np.random.default_rng(0).normal(size=(60, 2))
    with pytest.warns(UserWarning, match=r"observed by no point.*\[2\]"):
        _fit_quietly(ExtremeDeconvolution(2, max_iter=3, random_state=0), flat,
                     projection=np.eye(2, 3))  # fmt: skip
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        _fit_quietly(ExtremeDeconvolution(2, max_iter=3, random_state=0), flat)


def _fit_quietly(estimator, X, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return estimator.fit(X, **kwargs)


def test_noise_beyond_float32_is_refused_for_float32_points():
    """Variances that float32 cannot hold (1e99 for a coordinate not measured) became
    infinite: the likelihood -inf, the fit never converging, without an error."""
    from sklearn_cogaps import ExtremeDeconvolution

    Y = np.random.default_rng(0).normal(size=(60, 2))
    V = np.full_like(Y, 0.1)
    V[:5, 1] = 1e99
    with pytest.raises(ValueError, match=r"above the largest float32.*float64.*NaN in X"):
        ExtremeDeconvolution(2, max_iter=3).fit(Y.astype(np.float32), X_cov=V)
    with pytest.raises(ValueError, match="projection has entries of magnitude 1e\\+39"):
        ExtremeDeconvolution(2, max_iter=3).fit(
            Y.astype(np.float32), projection=np.array([[1.0, 1e39], [0.0, 1.0]])
        )
    assert np.isfinite(_fit_quietly(ExtremeDeconvolution(2, max_iter=3, random_state=0), Y,
                                    X_cov=V).lower_bound_)  # fmt: skip


def test_a_non_symmetric_starting_precision_is_refused():
    """It was inverted as given: the covariance held fixed was neither the matrix given
    nor its symmetric part."""
    from sklearn_cogaps import ExtremeDeconvolution

    Y = np.random.default_rng(0).normal(size=(60, 2))
    upper = np.array([[[1.0, 0.5], [0.0, 1.0]]] * 2)
    with pytest.raises(ValueError, match=r"symmetric.*0.5 \* \(P \+ P.transpose\(0, 2, 1\)\)"):
        ExtremeDeconvolution(2, precisions_init=upper, fixed_covariances=True).fit(Y)
    sym = 0.5 * (upper + upper.transpose(0, 2, 1))
    start = ExtremeDeconvolution(2, max_iter=3, precisions_init=sym, fixed_covariances=True,
                                 random_state=0)  # fmt: skip
    fitted = _fit_quietly(start, Y)
    assert np.allclose(fitted.precisions_, sym)


def test_a_row_with_negative_zeros_gets_the_chain_of_the_same_row_with_zeros():
    """Row chains were seeded from the row's bytes: -0.0 (np.round(-0.3)) gave another
    chain than 0.0, and another transform."""
    from scipy import sparse

    X = _counts((20, 12))
    model = CoGAPS(2, max_iter=20, random_state=0).fit(X)
    negative = X.copy()
    negative[X == 0] = -0.0
    assert np.signbit(negative).any()
    assert np.array_equal(model.transform(negative), model.transform(X))
    signed = sparse.csr_matrix(X)
    signed.data[0] = -0.0  # a stored -0.0
    unsigned = sparse.csr_matrix(X)
    unsigned.data[0] = 0.0
    assert np.array_equal(model.transform(signed), model.transform(unsigned))


def test_sampling_after_set_params_draws_from_the_fitted_mixture():
    from sklearn_cogaps import ExtremeDeconvolution

    Y = np.random.default_rng(0).normal(size=(60, 2))
    xd = _fit_quietly(ExtremeDeconvolution(2, max_iter=3, random_state=0), Y)
    points, labels = xd.set_params(n_components=3).sample(50)
    assert points.shape == (50, 2) and set(labels) <= {0, 1}


def test_maxmarginmf_names_the_input_at_fault_and_refuses_non_finite_thresholds():
    """Errors in the held-out y or in observed said "X"; a NaN threshold_mean said the
    hinge statistics overflowed."""
    from scipy import sparse

    rng = np.random.default_rng(0)
    R = sparse.random(20, 15, density=0.5, random_state=0, format="csr")
    R.data = rng.integers(1, 6, R.nnz).astype(float)
    model = MaxMarginMF(2, max_iter=4, burn_in=1, random_state=0)
    held = np.full(R.shape, np.nan)
    held[0, 0] = np.inf
    with pytest.raises(ValueError, match="^Input y contains infinity"):
        model.fit(R, y=held)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model.fit(R)
    with pytest.raises(ValueError, match="^observed has 14 features"):
        model.predict_ratings(R, observed=R[:, :14])
    with pytest.raises(ValueError, match=r"threshold_mean must be n_levels - 1 = 4 finite"):
        MaxMarginMF(2, max_iter=2, burn_in=0, threshold_mean=[np.nan, 0, 1, 2]).fit(R)


def test_whole_counts_stored_in_parts_are_not_called_fractions():
    """A CSR whose duplicate entries add up to whole counts warned about non-integer
    counts: the check read the parts before the fit added them."""
    from scipy import sparse

    X = _counts((20, 6))
    whole = sparse.csr_matrix(X)
    # every stored count as two halves at the same column
    indices = np.repeat(whole.indices, 2)
    data = np.repeat(whole.data / 2.0, 2)
    parts = sparse.csr_matrix((data, indices, 2 * whole.indptr), shape=X.shape)
    assert not parts.has_canonical_format and np.array_equal(parts.toarray(), X)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        warnings.filterwarnings("error", message=".*non-integer")
        HierarchicalPMF(2, max_iter=3, random_state=0).fit(parts)
    with pytest.warns(UserWarning, match="non-integer"):
        _fit_quietly(HierarchicalPMF(2, max_iter=3, random_state=0), X + 0.5)


def test_pandas_missing_values_in_side_inputs_are_named():
    """pd.NA in a nullable column failed inside numpy (float() argument must be ... not
    'NAType'); it is now NaN, which the checks name, and accepted where NaN is."""
    pd = pytest.importorskip("pandas")
    from sklearn_cogaps import ExtremeDeconvolution

    X = _counts((20, 6)) + 1.0
    U = pd.DataFrame(np.maximum(0.1 * X, 0.1)).astype("Float64")
    U.iloc[2, 3] = pd.NA
    with pytest.raises(ValueError, match="'uncertainty' contains NaN"):
        CoGAPS(2, max_iter=3).fit(X, uncertainty=U)
    Y = np.random.default_rng(0).normal(size=(40, 2))
    Y[3, 1] = np.nan
    V = pd.DataFrame(np.where(np.isnan(Y), np.nan, 0.1)).astype("Float64")
    assert pd.isna(V.iloc[3, 1])
    with_na = _fit_quietly(ExtremeDeconvolution(2, max_iter=5, random_state=0), Y, X_cov=V)
    with_nan = _fit_quietly(ExtremeDeconvolution(2, max_iter=5, random_state=0), Y,
                            X_cov=np.where(np.isnan(Y), np.nan, 0.1))  # fmt: skip
    assert np.array_equal(with_na.means_, with_nan.means_)
    P = pd.DataFrame(np.eye(2)).astype("Float64")
    P.iloc[0, 1] = pd.NA
    with pytest.raises(ValueError, match="projection must be finite"):
        ExtremeDeconvolution(2, max_iter=3).fit(np.nan_to_num(Y), projection=P)


def test_complex_data_and_a_masked_point_to_condition_on_say_what_to_pass():
    from sklearn_cogaps import ExtremeDeconvolution

    with pytest.raises(ValueError, match=r"Complex data not supported: X is complex128.*X.real"):
        HierarchicalPMF(2).fit(_counts((10, 4)) + 0j)
    Y = np.random.default_rng(0).normal(size=(50, 2))
    xd = _fit_quietly(ExtremeDeconvolution(2, max_iter=3, random_state=0), Y)
    with pytest.raises(ValueError, match=r"masked array.*X.filled\(np.nan\)"):
        xd.condition(np.ma.masked_array([1.0, 2.0], [False, True]))
    # joblib's n_jobs=0 has no meaning: refused with the parameter's name
    with pytest.raises(ValueError, match="'n_jobs' parameter of CoGAPS"):
        CoGAPS(2, n_jobs=0).fit(_counts((10, 4)))


def test_complex_side_inputs_are_refused_as_a_complex_x_is():
    # numpy cast them with a ComplexWarning only, dropping the imaginary parts
    from sklearn_cogaps import ExtremeDeconvolution, holdout_ratings, triplets_to_matrix

    pd = pytest.importorskip("pandas")
    X = _counts((10, 4)) + 1.0
    for uncertainty in (0.1 * X + 0j, pd.DataFrame(0.1 * X + 0j)):
        with pytest.raises(ValueError, match=r"uncertainty is complex.*np.real\(uncertainty\)"):
            CoGAPS(2, max_iter=3).fit(X, uncertainty=uncertainty)
    with pytest.raises(ValueError, match=r"values is complex.*np.abs\(values\)"):
        triplets_to_matrix([0, 1], [0, 1], [1 + 1j, 2])
    for ratings in (np.array([[1, 2], [3, 4]]) + 0j, pd.DataFrame([[1, 2], [3, 4j]])):
        with pytest.raises(ValueError, match="X is complex"):
            holdout_ratings(ratings)
    Y = np.random.default_rng(0).normal(size=(20, 2))
    with pytest.raises(ValueError, match="X_cov is complex"):
        ExtremeDeconvolution(1, max_iter=3).fit(Y, X_cov=np.full((20, 2), 0.1 + 0j))
    # a nullable pandas column is still read, its NA as NaN
    matrix, _, _ = triplets_to_matrix([0, 1], [0, 1], pd.Series([1, 2], dtype="Int64"))
    assert matrix.toarray().tolist() == [[1.0, 0.0], [0.0, 2.0]]


def test_reversible_rows_of_one_pattern_warn_that_they_do_not_mix():
    """With one pattern a row's chain has one element: the reversible moves change it only
    by whole atoms, and on precise data transform's results depended on the seed by
    several posterior standard deviations, without a word. The advice runs as written."""
    rng = np.random.default_rng(0)
    X = rng.gamma(2.0, 1.0, (8, 5))
    model = CoGAPS(1, solver="reversible", max_iter=30, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model.fit(X)
        for method in (model.transform, model.score):
            with pytest.warns(UserWarning, match=r"one pattern, the per-row chains .* "
                              r"fixed_components=model.components_"):  # fmt: skip
                method(X[:3])
        X_new = X[:3]
        CoGAPS(1, solver="reversible").set_params(max_iter=30).fit(
            X_new, fixed_components=model.components_
        )
        # two patterns mix through their exchanges: no warning
        two = CoGAPS(2, solver="reversible", max_iter=30, random_state=0).fit(X)
        warnings.simplefilter("error", UserWarning)
        two.transform(X[:3])


def test_a_transposed_fixed_matrix_is_told_so():
    X = _counts((20, 8)) + 1.0
    H = np.random.default_rng(0).gamma(2.0, 1.0, (2, 8))
    with pytest.raises(
        ValueError, match=r"got \(8, 2\)\. It looks transposed: pass fixed_components.T"
    ):
        CoGAPS(2, max_iter=3).fit(X, fixed_components=H.T)
    with pytest.raises(ValueError, match="Set n_components to the number of components"):
        CoGAPS(3, max_iter=3).fit(X, fixed_components=H)


@pytest.mark.parametrize(
    "make",
    [lambda: HierarchicalPMF(2, max_iter=20, random_state=0),
     lambda: WeightedBackgroundPMF(2, max_iter=5, random_state=0),
     lambda: CoGAPS(2, max_iter=20, random_state=0)],
    ids=["HierarchicalPMF", "WeightedBackgroundPMF", "CoGAPS"],
)  # fmt: skip
@pytest.mark.parametrize("dtype, parts", [(np.uint8, (200, 100)), (np.int16, (30000, 30000))])
def test_duplicate_entries_of_a_small_integer_coo_are_added_without_wrapping(make, dtype, parts):
    """A COO matrix's duplicates were added in its own dtype: 200 + 100 in uint8 read as 44,
    30000 + 30000 in int16 as a negative count."""
    from scipy import sparse

    X = _counts((12, 8))
    X[0, 0] = sum(parts)
    C = sparse.coo_matrix(X)
    first = (C.row == 0) & (C.col == 0)
    values = np.r_[np.where(first, parts[0], C.data), parts[1]].astype(dtype)
    D = sparse.coo_matrix((values, (np.r_[C.row, 0], np.r_[C.col, 0])), shape=X.shape)
    a, b = make().fit(D), make().fit(X)
    np.testing.assert_allclose(a.components_, b.components_, rtol=1e-12, atol=1e-12)


def test_xd_on_points_far_below_unit_scale_warns_that_reg_covar_dominates():
    """At 1e-8 the covariances were reg_covar's 1e-6 exactly, in silence; at 1e-3 twice the
    components' own. A constant coordinate beside others (what reg_covar is for) and data of
    unit scale do not warn."""
    rng = np.random.RandomState(0)
    X = np.vstack([rng.randn(200, 2), rng.randn(200, 2) + 4])
    for scale in (1e-8, 1e-3):
        with pytest.warns(UserWarning, match=r"reg_covar=1e-06 is added.*reg_covar=\d"):
            ExtremeDeconvolution(2, random_state=0).fit(X * scale)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ExtremeDeconvolution(2, random_state=0).fit(X)
        ExtremeDeconvolution(2, random_state=0).fit(np.c_[X, np.full(400, 3.0)])
        ExtremeDeconvolution(2, random_state=0, reg_covar=0.0).fit(X * 1e-3)


def test_xd_deconvolved_widths_below_the_noise_are_not_widened_by_reg_covar():
    """Added at every update, reg_covar=1e-6 moved the fixed point of EM for a component
    narrower than the noise by many times itself (width 0.0096 for the likelihood's 0.0079,
    with a lower likelihood, in silence); with noise it is a floor on the eigenvalues. At
    the floor, a fit says so (a width of 1e-4 in units where reg_covar is 1e-6 is 1e-3)."""
    rng = np.random.default_rng(0)
    n = 3000
    v = np.column_stack([rng.normal(0, 1.0, n), rng.normal(0.5, 0.008, n)])
    var = np.column_stack([np.full(n, 0.05**2), np.full(n, 0.02**2)])
    X = v + rng.normal(size=v.shape) * np.sqrt(var)
    fits = []
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for reg_covar in (1e-6, 0.0):
            fits.append(ExtremeDeconvolution(1, reg_covar=reg_covar, max_iter=3000, tol=1e-10,
                                             random_state=0).fit(X, X_cov=var))  # fmt: skip
    widths = [np.sqrt(f.covariances_[0, 1, 1]) for f in fits]
    assert abs(widths[0] - 0.00793) < 1e-5
    np.testing.assert_allclose(widths[0], widths[1], rtol=1e-7)
    np.testing.assert_allclose(fits[0].lower_bound_, fits[1].lower_bound_, rtol=1e-12)
    # a width far below the floor: reported as the floor, with a warning that says what to do
    tiny = np.column_stack([v[:, 0], rng.normal(2e-3, 1e-4, n)])
    var = np.column_stack([np.full(n, 0.05**2), np.full(n, 1e-4**2)])
    X = tiny + rng.normal(size=v.shape) * np.sqrt(var)
    with pytest.warns(UserWarning, match=r"components \[0\] are at the floor reg_covar=1e-06"
                      r".*Set reg_covar lower \(0 when every point has noise"):  # fmt: skip
        at_floor = ExtremeDeconvolution(1, random_state=0).fit(X, X_cov=var)
    assert np.isclose(at_floor.covariances_[0, 1, 1], 1e-6, rtol=1e-6)
    free = ExtremeDeconvolution(1, random_state=0, reg_covar=0.0).fit(X, X_cov=var)
    assert abs(np.sqrt(free.covariances_[0, 1, 1]) - 1e-4) < 2e-5
    # the stochastic solvers and partial_fit say so too
    for solver, at in (("sgd", r"near \(Adam nears it\)"), ("minibatch_em", "at")):
        model = ExtremeDeconvolution(1, solver=solver, max_iter=5, random_state=0)
        with pytest.warns(UserWarning, match=rf"\[0\] are {at} the floor"):
            model.fit(X, X_cov=var)
    with pytest.warns(UserWarning, match=r"\[0\] are at the floor"):
        ExtremeDeconvolution(1, random_state=0).partial_fit(X, X_cov=var)
    # along a direction that is no coordinate, beside a wide one (std 100): the covariance
    # rebuilt from its clipped eigenvalues is off the floor by round-off, and still warns
    Q = np.array([[1.0, 1.0], [1.0, -1.0]]) / np.sqrt(2)
    for seed in range(4):
        r = np.random.default_rng(seed)
        u = np.column_stack([r.normal(0, 100.0, 2000), r.normal(0, 1e-4, 2000)]) @ Q.T
        cov = np.broadcast_to(Q @ np.diag([0.05**2, 1e-4**2]) @ Q.T, (2000, 2, 2))
        Xr = u + np.einsum("nij,nj->ni", np.linalg.cholesky(cov), r.normal(size=(2000, 2)))
        with pytest.warns(UserWarning, match="the floor"):
            ExtremeDeconvolution(1, random_state=0).fit(Xr, X_cov=cov)
    # a covariance held fixed below the floor is the user's: kept, and no warning
    held = np.diag([1.0, 1e-8])
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        warnings.simplefilter("ignore", ConvergenceWarning)
        fixed = ExtremeDeconvolution(1, fixed_covariances=True, weights_init=[1.0],
                                     means_init=[[0.0, 2e-3]], max_iter=5,
                                     precisions_init=np.linalg.inv(held)[None])  # fmt: skip
        fixed.fit(X, X_cov=var)
    np.testing.assert_allclose(fixed.covariances_[0], held, rtol=1e-12)


def test_xd_floors_incomplete_points_and_starts_below_the_floor():
    """Incomplete points without noise carry posterior covariances too: reg_covar added at
    every update moved the variance of a coordinate missing from 95% of the points by
    reg_covar / 0.05, and EM stopped early on a falling objective. From a start below the
    floor (precisions_init, or a warm start after raising reg_covar) EM stopped at once,
    returning covariances below the floor with n_iter_ = 0."""
    rng = np.random.default_rng(0)
    n = 4000
    v = rng.multivariate_normal([0, 0], [[1.0, 0.0], [0.0, 0.02]], n)
    X = v.copy()
    X[rng.random(n) < 0.95, 1] = np.nan
    fits = []
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for reg_covar in (1e-3, 0.0):
            fits.append(ExtremeDeconvolution(1, reg_covar=reg_covar, tol=1e-12,
                                             max_iter=5000).fit(X))  # fmt: skip
    # (added, it ended at 0.01747 after 11 iterations; its fixed point was 0.03706)
    assert fits[0].converged_
    np.testing.assert_allclose(fits[0].covariances_, fits[1].covariances_, rtol=1e-6)
    assert abs(fits[1].covariances_[0, 1, 1] - 0.017735) < 1e-5
    # a constant coordinate beside incomplete ones, what reg_covar is for, is floored
    # without a warning (the floor warning is of deconvolved widths, with X_cov)
    constant = np.column_stack([X, np.full(n, 3.0)])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ExtremeDeconvolution(1, max_iter=1000).fit(constant)
    # complete points without noise are a Gaussian mixture: reg_covar is added, as there
    complete = ExtremeDeconvolution(1, reg_covar=1e-3, max_iter=3).fit(v)
    np.testing.assert_allclose(complete.covariances_[0], np.cov(v.T, bias=True) + 1e-3 * np.eye(2),
                               rtol=1e-9)  # fmt: skip
    # a start below the floor: floored first, then EM rises to the constrained optimum
    var = np.column_stack([np.full(n, 0.05**2), np.full(n, 0.05**2)])
    noisy = np.column_stack([v[:, 0], rng.normal(0.0, 0.01, n)])
    noisy = noisy + rng.normal(size=noisy.shape) * np.sqrt(var)
    free = ExtremeDeconvolution(1, reg_covar=0.0, max_iter=50).fit(noisy, X_cov=var)
    assert np.linalg.eigvalsh(free.covariances_[0])[0] < 0.02
    floor = 0.05
    given = ExtremeDeconvolution(1, reg_covar=floor, max_iter=500, tol=1e-10,
                                 precisions_init=free.precisions_)  # fmt: skip
    warm = free.set_params(reg_covar=floor, warm_start=True)
    for model in (given, warm):
        with pytest.warns(UserWarning, match=r"\[0\] are at the floor reg_covar=0.05"):
            model.fit(noisy, X_cov=var)
        assert model.n_iter_ >= 1 and model.converged_
        np.testing.assert_allclose(np.linalg.eigvalsh(model.covariances_[0])[0], floor,
                                   rtol=1e-9)  # fmt: skip


def test_an_em_stopped_by_a_fall_of_its_objective_says_so_not_to_raise_max_iter():
    """EM that stops because an iteration lowered its objective (reg_covar dominating data
    of small units) kept the start, n_iter_ = 0, and its ConvergenceWarning said that
    max_iter=100 iterations had not converged and to raise max_iter."""
    rng = np.random.default_rng(1)
    v = np.where(rng.random((2000, 1)) < 0.3, [-2.0, 0.0], [2.0, 1.0])
    v = v + rng.normal(size=(2000, 2))
    var = rng.uniform(0.1, 1.0, (2000, 2))
    X = v + rng.normal(size=(2000, 2)) * np.sqrt(var)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        # without noise reg_covar is added at every update (with noise, a floor)
        est = ExtremeDeconvolution(2, random_state=0).fit(X * 1e-3)
    messages = {w.category: str(w.message) for w in caught}
    assert "decreased" in messages[RuntimeWarning] and est.n_iter_ == 0
    assert not est.converged_
    assert re.search(r"stopped after 0 of max_iter=100 iterations: the next one lowered .* "
                     r"would not help", messages[ConvergenceWarning])  # fmt: skip
    assert "Increase max_iter" not in messages[ConvergenceWarning]


def test_inputs_of_the_helpers_that_gave_answers_or_internal_errors():
    """An error sweep: helpers read a table of triplets as a matrix, values under a mask,
    zeros and -1 codes as ratings, a gene-set table by its columns; others failed inside
    numpy (datetime columns, cv_results as a DataFrame, sparse amplitudes)."""
    pd = pytest.importorskip("pandas")
    from scipy import sparse

    from sklearn_cogaps import (
        gene_set_statistic,
        holdout_ratings,
        one_standard_error,
        pattern_markers,
        triplets_to_matrix,
    )

    rng = np.random.default_rng(0)
    table = pd.DataFrame({"userId": rng.integers(1, 26, 80), "movieId": rng.integers(1, 40, 80),
                          "rating": rng.integers(1, 6, 80)})  # fmt: skip
    with pytest.raises(ValueError, match=r"triplets .*holdout_ratings splits the matrix"):
        holdout_ratings(table)
    R = np.ma.masked_equal(rng.integers(0, 6, (20, 15)), 0)
    with pytest.raises(ValueError, match=r"holdout_ratings would read.*X\.astype\(float\)"
                       r"\.filled"):  # fmt: skip
        holdout_ratings(R)
    # the advice names the input that is masked
    with pytest.raises(ValueError, match=r"y is a masked array.*pass y\.astype\(float\)"):
        MaxMarginMF(2, max_iter=3, burn_in=1).fit(R.astype(float).filled(np.nan), y=R)
    holdout_ratings(R.astype(float).filled(np.nan))  # the advice runs
    for shape in ((5,), (2, 3, 4)):
        with pytest.raises(ValueError, match="2-d.*triplets_to_matrix"):
            holdout_ratings(np.ones(shape))
    # a 0 beside star ratings may be a level; a -1 below 1..10 a code for "not rated"
    with pytest.warns(UserWarning, match=r"3 \(user, item\) pair\(s\) have a value of 0.*"
                      r"np\.asarray\(values\) \+ 1"):  # fmt: skip
        X, _, _ = triplets_to_matrix([0, 0, 0, 1, 1, 1, 2, 2, 2], list("abc") * 3,
                                     [0, 5, 3, 0, 4, 5, 1, 0, 2])  # fmt: skip
    assert X.nnz == 6
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        triplets_to_matrix([0, 0, 1], ["a", "b", "a"], [0, 7.5, 120])  # counts: no warning
        # counts declared as such
        triplets_to_matrix([0, 0, 1, 1], list("abab"), [0, 1, 2, 3], aggregate="sum")
    coded = rng.integers(1, 11, (30, 12)).astype(float)
    coded[rng.random(coded.shape) < 0.1] = -1
    with pytest.warns(UserWarning, match=r"rating\(s\) of -1, below the levels 1 to 10.*"
                      r"np\.where\(X == -1, np\.nan, X\)"):  # fmt: skip
        MaxMarginMF(2, max_iter=3, burn_in=1, random_state=0).fit(coded)
    # msigdbr's long table of gene sets
    long = pd.DataFrame(
        {
            "gs_cat": "H",
            "gs_subcat": "",
            "gs_name": ["A", "A", "B"],
            "gene_symbol": ["g0", "g1", "g2"],
        }
    )  # msigdbr's order of columns
    H = rng.gamma(1.0, 1.0, (2, 5))
    with pytest.raises(TypeError, match=r"df\.groupby\('gs_name'\)\['gene_symbol'\]"):
        gene_set_statistic(H, H, long, feature_names=[f"g{j}" for j in range(5)])
    # a date beside the counts
    counts = pd.DataFrame(rng.poisson(2, (20, 4)), columns=list("abcd"))
    counts["sampled_on"] = pd.Timestamp("2024-01-01")
    with pytest.raises(ValueError, match=r"1 non-numeric column\(s\) \(\['sampled_on'\]\)"):
        HierarchicalPMF(2, max_iter=3).fit(counts)
    # the results of a search, read as a DataFrame
    results = {"param_n_components": np.ma.masked_array([1, 2, 3]),
               "mean_test_score": np.array([-3.0, -1.0, -0.95]),
               "std_test_score": np.array([0.1, 0.1, 0.1]),
               "split0_test_score": np.zeros(3), "split1_test_score": np.zeros(3)}  # fmt: skip
    assert one_standard_error(pd.DataFrame(results)) == one_standard_error(results) == 1
    # a candidate without the parameter is NaN in a DataFrame, masked in the dict: refused
    unset = dict(results, param_n_components=np.ma.masked_array([1, 2, 3], [True, False, False]))
    for given in (unset, pd.DataFrame(unset)):
        with pytest.raises(ValueError, match="which not every candidate sets"):
            one_standard_error(given)
    # a parameter set to None is set (None stays None in the DataFrame, NaN is unset)
    none = dict(results, param_n_components=np.ma.masked_array([None, 1, 2], [False] * 3))
    assert one_standard_error(pd.DataFrame(none)) == one_standard_error(none)
    with pytest.raises(TypeError, match=r"Pass search\.cv_results_"):
        one_standard_error([1, 2])
    with pytest.raises(TypeError, match=r"amplitudes is a sparse matrix; pass "
                       r"amplitudes\.toarray\(\)"):  # fmt: skip
        pattern_markers(sparse.csr_matrix(H.T), np.ones((3, 2)))
    with pytest.raises(ValueError, match="non-negative with a positive largest value"):
        pattern_markers(H.T, np.ones((3, 2)), weights=[0.5, -2])
    # masked counts: advice that runs
    masked = np.ma.masked_less(rng.gamma(2.0, 1.0, (20, 15)), 0.3)
    with pytest.raises(ValueError, match=r"X\.filled\(0\)"):
        HierarchicalPMF(2, max_iter=3).fit(np.round(masked))
    with pytest.raises(ValueError, match=r"np\.ma\.getmaskarray\(X\).*X\.filled\(0\) with "
                       r"uncertainty=U, to fit or to transform"):  # fmt: skip
        CoGAPS(2, max_iter=3).fit(masked)
