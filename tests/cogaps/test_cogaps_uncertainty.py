"""CoGAPS's named uncertainties: "relative" (the default, max(0.1 x, 0.1)) and "poisson"
(max(sqrt(x), 1)) for counts, in every method and mode, dense and sparse."""

import warnings

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal
from scipy import sparse
from sklearn.datasets import load_digits

from sklearn_cogaps import CoGAPS
from sklearn_cogaps._cli import main
from sklearn_cogaps.datasets import make_patterns, make_single_cell

POISSON = "poisson"


def _sigma(X):
    return np.maximum(np.sqrt(X), 1.0)


@pytest.fixture(scope="module")
def counts():
    X, _, _ = make_single_cell(n_samples=40, n_features=50, n_components=3, random_state=0)
    return X.toarray() if sparse.issparse(X) else np.asarray(X, dtype=np.float64)


def _model(**kw):
    return CoGAPS(**{"n_components": 3, "max_iter": 40, "random_state": 0, **kw})


def _relative_error(model, X):
    return np.linalg.norm(X - model.loadings_ @ model.components_) / np.linalg.norm(X)


@pytest.mark.parametrize("seed", [0, 1])
def test_poisson_uncertainty_fits_digit_counts_better(seed):
    """On pixel counts, the relative uncertainty weighs a count of 1 a hundred times more than
    a count of 10 and spends components on isolated pixels; the Poisson one does not.
    (300 digits, 100 + 100 iterations: relative error 0.68 / 0.64 against 0.54 / 0.53.)"""
    X = load_digits().data[:300]
    errors = {}
    for uncertainty in ("relative", POISSON):
        model = CoGAPS(n_components=10, max_iter=100, random_state=seed)
        errors[uncertainty] = _relative_error(model.fit(X, uncertainty=uncertainty), X)
    assert errors[POISSON] < errors["relative"] - 0.05
    assert errors[POISSON] < 0.6


def test_named_poisson_is_the_array_it_names(counts):
    X = counts
    named = _model().fit(X, uncertainty=POISSON)
    given = _model().fit(X, uncertainty=_sigma(X))
    assert_array_equal(named.components_, given.components_)
    assert_array_equal(named.loadings_, given.loadings_)
    assert named.chisq_ == given.chisq_
    assert named.uncertainty_model_ == POISSON and given.uncertainty_model_ == "array"
    # transform and score use the fitted model when given none
    assert_array_equal(named.transform(X), given.transform(X, uncertainty=_sigma(X)))
    assert named.score(X) == given.score(X, uncertainty=_sigma(X))
    # after an array, None means the default relative model
    assert_array_equal(given.transform(X), given.transform(X, uncertainty="relative"))


def test_relative_is_the_default(counts):
    X = counts
    default = _model().fit(X)
    named = _model().fit(X, uncertainty="relative")
    assert default.uncertainty_model_ == "relative"
    assert_array_equal(default.components_, named.components_)
    assert default.chisq_ == named.chisq_


def test_sparse_model_with_poisson_uncertainty(counts):
    X = counts
    csr = sparse.csr_matrix(X)
    a = _model().fit(csr, uncertainty=POISSON)
    b = _model(sparse_optimization=True).fit(X, uncertainty=POISSON)
    assert_array_equal(a.components_, b.components_)
    # the chi-square is the dense model's, from the stored entries only
    expected = np.sum(((X - a.loadings_ @ a.components_) / _sigma(X)) ** 2)
    assert_allclose(a.chisq_, expected, rtol=1e-12)
    # the chain is a different one from the relative model's
    assert not np.array_equal(a.components_, _model().fit(csr).components_)
    # sparse rows are sampled from their stored entries, as the dense rows with the array
    assert_allclose(a.transform(csr), a.transform(X, uncertainty=_sigma(X)), atol=1e-12)
    assert_array_equal(a.transform(csr), a.transform(csr, uncertainty=POISSON))
    assert_allclose(a.score(csr), a.score(X, uncertainty=_sigma(X)), rtol=1e-12)


def test_fixed_matrix_fit_with_poisson_uncertainty(counts):
    X = counts
    H = _model().fit(X, uncertainty=POISSON).components_
    named = _model().fit(X, uncertainty=POISSON, fixed_components=H)
    given = _model().fit(X, uncertainty=_sigma(X), fixed_components=H)
    assert_array_equal(named.loadings_, given.loadings_)
    sparse_fit = _model().fit(sparse.csr_matrix(X), uncertainty=POISSON, fixed_components=H)
    assert_array_equal(sparse_fit.components_, H)
    expected = np.sum(((X - sparse_fit.loadings_ @ H) / _sigma(X)) ** 2)
    assert_allclose(sparse_fit.chisq_, expected, rtol=1e-12)


@pytest.mark.parametrize("mode", ["single-cell", "genome-wide"])
def test_distributed_fit_with_poisson_uncertainty(counts, mode):
    X = counts
    named = _model(distributed=mode, n_sets=2).fit(X, uncertainty=POISSON)
    given = _model(distributed=mode, n_sets=2).fit(X, uncertainty=_sigma(X))
    assert_array_equal(named.components_, given.components_)
    assert_array_equal(named.loadings_, given.loadings_)
    assert named.uncertainty_model_ == POISSON


def test_uncertainty_errors(counts):
    X = counts
    with pytest.raises(ValueError, match="'uncertainty' must be 'relative', 'poisson'.*'sqrt'"):
        _model().fit(X, uncertainty="sqrt")
    with pytest.raises(ValueError, match="takes uncertainty='relative'.*or 'poisson'"):
        _model().fit(sparse.csr_matrix(X), uncertainty=_sigma(X))
    fitted = _model(max_iter=5).fit(X)
    with pytest.raises(ValueError, match="'uncertainty' must be 'relative', 'poisson'"):
        fitted.transform(X, uncertainty="counts")


def test_positional_uncertainty_still_names_the_keyword(counts):
    """R and C++ CoGAPS take the uncertainty as the second argument; here that is y."""
    X = counts
    for method, U in (("fit", _sigma(X)), ("fit", POISSON)):
        with pytest.raises(ValueError, match=r"uncertainty=U"):
            getattr(_model(max_iter=5), method)(X, U)
    fitted = _model(max_iter=5).fit(X)
    with pytest.raises(ValueError, match=r"score\(X, uncertainty=U\)"):
        fitted.score(X, _sigma(X))


@pytest.mark.parametrize("suffix", [".npy", ".mtx"])
def test_command_line_poisson_uncertainty(counts, suffix, tmp_path, capsys):
    from scipy import io as sio

    X = counts
    path = tmp_path / f"x{suffix}"
    if suffix == ".npy":
        np.save(path, X)
    else:
        sio.mmwrite(path, sparse.coo_matrix(X), precision=17)
    argv = [
        path,
        "-k",
        "3",
        "--max-iter",
        "15",
        "--seed",
        "0",
        "--uncertainty",
        POISSON,
        "-o",
        tmp_path / "out.npz",
    ]
    assert main([str(a) for a in argv]) == 0
    out = capsys.readouterr().out
    assert "uncertainty max(sqrt(x), 1)" in out
    expected = CoGAPS(n_components=3, max_iter=15, random_state=0).fit(
        sparse.csr_matrix(X) if suffix == ".mtx" else X, uncertainty=POISSON
    )
    with np.load(tmp_path / "out.npz") as r:
        assert_array_equal(r["amplitudes"], expected.components_)
        assert float(r["chisq"]) == expected.chisq_


def test_a_labelled_uncertainty_in_another_order_is_refused():
    """A DataFrame of standard deviations is matched to X by position: genes or samples in
    another order would pair each entry with another's sigma."""
    pd = pytest.importorskip("pandas", reason="labelled uncertainty tables are DataFrames")
    rng = np.random.RandomState(0)
    X = pd.DataFrame(
        rng.poisson(3.0, (8, 6)).astype(float),
        index=[f"s{i}" for i in range(8)],
        columns=[f"g{j}" for j in range(6)],
    )
    U = np.maximum(0.1 * X, 0.1)
    model = CoGAPS(n_components=2, max_iter=3, random_state=0)
    for bad, match in [
        (U[U.columns[::-1]], "column labels.*in another order"),
        (U.iloc[::-1], "row labels.*in another order"),
        (U.rename(columns={"g0": "g9"}), "column labels.*in part"),
    ]:
        with pytest.raises(ValueError, match=match + r".*uncertainty\.loc\[X\.index, X\.columns\]"):
            model.fit(X, uncertainty=bad)
    # fixed amplitudes of the same genes in another order (a previous fit's components_)
    H = pd.DataFrame(rng.uniform(size=(2, 6)), columns=X.columns)
    with pytest.raises(ValueError, match="column labels of 'fixed_components'.*another order"):
        model.fit(X, fixed_components=H[H.columns[::-1]])
    P = pd.DataFrame(rng.uniform(size=(8, 2)), index=X.index)
    with pytest.raises(ValueError, match="row labels of 'fixed_patterns'.*another order"):
        model.fit(X, fixed_patterns=P.iloc[::-1])
    model.fit(X, uncertainty=U)
    with pytest.raises(ValueError, match="column labels"):
        model.transform(X, uncertainty=U[U.columns[::-1]])
    with pytest.raises(ValueError, match="row labels"):
        model.score(X, uncertainty=U.iloc[::-1])
    # labels that share nothing with X's (a default index) mean positions
    positional = pd.DataFrame(U.to_numpy())
    assert model.score(X, uncertainty=positional) == model.score(X, uncertainty=U)


def test_a_sample_without_effective_data_is_warned_about():
    """Missing values as the NaN message advises (0 with a huge uncertainty) over a whole
    sample leave its pattern free; the scaling of each pattern to a maximum of 1 then takes
    the maximum there and shrinks the other samples' patterns: the fit says so."""
    from sklearn_cogaps import default_uncertainty

    X, _, _ = make_patterns(n_samples=30, n_features=60, n_components=2, random_state=0)
    U = default_uncertainty(X)
    U[4] = 1e6 * X.max()
    X = X.copy()
    X[4] = 0.0
    with pytest.warns(UserWarning, match=r"Samples 4 \(1 of 30\) have no effective data"):
        CoGAPS(2, max_iter=20, random_state=0).fit(X, uncertainty=U)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        CoGAPS(2, max_iter=20, random_state=0).fit(X[:4], uncertainty=U[:4])
    assert not [w for w in caught if "effective data" in str(w.message)]


def test_a_zero_standard_deviation_is_refused_where_it_is():
    X = make_patterns(12, 20, 2, random_state=0)[0]
    U = np.maximum(0.1 * X, 0.1)
    U[3, 7] = 0.0
    U[5, 2] = 0.0
    with pytest.raises(ValueError, match=r"2 entries are not, the smallest 0\.0 at row 3, colu"):
        CoGAPS(2, max_iter=5, random_state=0).fit(X, uncertainty=U)
