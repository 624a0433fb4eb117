"""CoGAPS never modifies its inputs, and accepts read-only and memory-mapped ones.

Every input form (dense, CSR, CSC, COO, read-only, memory-mapped, sparse matrices with
explicit zeros, unsorted or duplicate indices) gives the result of a canonical copy, and the
caller's object is bit-for-bit the same afterwards.
"""

import copy
import warnings

import numpy as np
import pytest
from numpy.testing import assert_array_equal
from scipy import sparse
from sklearn.exceptions import ConvergenceWarning

from sklearn_cogaps import CoGAPS
from sklearn_cogaps.datasets import make_patterns

K = 2
FAST = dict(n_components=K, max_iter=15, random_state=0)


def snapshot(obj):
    """Everything about an input that a method could change: its arrays' bytes, dtypes,
    shapes and flags, and for a sparse matrix its format and shape."""
    if sparse.issparse(obj):
        names = ("data", "row", "col") if obj.format == "coo" else ("data", "indices", "indptr")
        arrays = {name: getattr(obj, name) for name in names}
        head = (obj.format, obj.shape)
    else:
        arrays = {"array": obj}
        head = (type(obj).__name__, obj.shape)
    return head, {
        name: (a.dtype, a.shape, a.strides, a.tobytes(), _flags(a)) for name, a in arrays.items()
    }


def _flags(a):
    f = a.flags
    return (f.writeable, f.c_contiguous, f.f_contiguous, f.owndata, f.aligned)


def assert_unchanged(obj, before):
    head, arrays = snapshot(obj)
    assert head == before[0]
    for name, (dtype, shape, strides, data, flags) in before[1].items():
        now = arrays[name]
        assert now[0] == dtype and now[1] == shape and now[2] == strides, name
        assert now[3] == data, f"{name} was modified"
        assert now[4] == flags, f"flags of {name} changed"


def read_only(obj):
    obj = copy.deepcopy(obj)
    arrays = (
        [obj]
        if not sparse.issparse(obj)
        else (
            [obj.data, obj.row, obj.col]
            if obj.format == "coo"
            else [obj.data, obj.indices, obj.indptr]
        )
    )
    for a in arrays:
        a.setflags(write=False)
    return obj


@pytest.fixture(scope="module")
def dense():
    rng = np.random.RandomState(0)
    X = rng.poisson(1.5, size=(12, 9)).astype(np.float64)
    X[0, :3] = 0.0
    return X


def sparse_variants(dense, tmp_path):
    """(name, caller's matrix) pairs whose canonical form is ``csr_matrix(dense)``."""
    csr = sparse.csr_matrix(dense)
    yield "csr", csr.copy()
    yield "csc", sparse.csc_matrix(dense)
    yield "coo", sparse.coo_matrix(dense)
    yield "csr_array", sparse.csr_array(dense)
    yield "read-only csr", read_only(csr)
    yield "read-only coo", read_only(sparse.coo_matrix(dense))
    # an explicit zero stored among the non-zeros
    rows, cols = np.nonzero(dense)
    values = dense[rows, cols]
    explicit = sparse.csr_matrix(
        (np.r_[values, 0.0], (np.r_[rows, 1], np.r_[cols, 8])), shape=dense.shape
    )
    explicit = sparse.csr_matrix((explicit.data, explicit.indices, explicit.indptr), dense.shape)
    yield "explicit zero", explicit
    yield "read-only explicit zero", read_only(explicit)
    # unsorted column indices within rows
    unsorted = csr.copy()
    for i in range(unsorted.shape[0]):
        lo, hi = unsorted.indptr[i], unsorted.indptr[i + 1]
        unsorted.indices[lo:hi] = unsorted.indices[lo:hi][::-1]
        unsorted.data[lo:hi] = unsorted.data[lo:hi][::-1]
    unsorted = sparse.csr_matrix((unsorted.data, unsorted.indices, unsorted.indptr), dense.shape)
    assert not unsorted.has_sorted_indices
    yield "unsorted", unsorted
    # the first stored value split into two duplicate entries (exact halves)
    data = np.r_[csr.data[0] / 2, csr.data[0] / 2, csr.data[1:]]
    indices = np.r_[csr.indices[0], csr.indices]
    indptr = csr.indptr + np.r_[0, np.ones(len(csr.indptr) - 1, dtype=csr.indptr.dtype)]
    dup = sparse.csr_matrix((data, indices, indptr), shape=dense.shape)
    assert dup.nnz == csr.nnz + 1 and not dup.has_canonical_format
    yield "duplicates", dup
    coo = dup.tocoo()
    yield "duplicates coo", sparse.coo_matrix((coo.data, (coo.row, coo.col)), dense.shape)
    # memory-mapped arrays, read-only
    parts = {}
    for name in ("data", "indices", "indptr"):
        path = tmp_path / f"{name}.npy"
        np.save(path, getattr(csr, name))
        parts[name] = np.load(path, mmap_mode="r")
    yield (
        "memory-mapped csr",
        sparse.csr_matrix((parts["data"], parts["indices"], parts["indptr"]), shape=dense.shape),
    )


def dense_variants(dense, tmp_path):
    """Layouts of ``dense``, in its dtype (float32 data are fitted in float32)."""
    yield "ndarray", dense.copy()
    yield "fortran", np.asfortranarray(dense)
    yield "read-only", read_only(dense)
    path = tmp_path / "X.npy"
    np.save(path, dense)
    yield "np.load mmap", np.load(path, mmap_mode="r")
    raw = np.memmap(tmp_path / "X.dat", dtype=dense.dtype, mode="w+", shape=dense.shape)
    raw[:] = dense
    raw.flush()
    yield "np.memmap", np.memmap(tmp_path / "X.dat", dtype=dense.dtype, mode="r", shape=dense.shape)


def results(model, X, uncertainty=None):
    """Everything the methods return, for one input."""
    kw = {} if uncertainty is None else {"uncertainty": uncertainty}
    model.fit(X, **kw)
    W = model.transform(X, **kw)
    return {
        "components_": model.components_,
        "components_std_": model.components_std_,
        "loadings_": model.loadings_,
        "chisq_": model.chisq_,
        "lambda_W_": model.lambda_W_,
        "transform": W,
        "score": model.score(X, **kw),
        "inverse_transform": model.inverse_transform(W),
        "markers": model.pattern_markers()[1],
    }


def assert_same_results(got, expected, name):
    for key, value in expected.items():
        assert_array_equal(got[key], value, err_msg=f"{name}: {key}")


def test_sparse_inputs_unchanged_and_equivalent(dense, tmp_path):
    expected = results(CoGAPS(**FAST), sparse.csr_matrix(dense))
    for name, X in sparse_variants(dense, tmp_path):
        before = snapshot(X)
        got = results(CoGAPS(**FAST), X)
        assert_unchanged(X, before)
        assert_same_results(got, expected, name)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_dense_inputs_unchanged_and_equivalent(dense, tmp_path, dtype):
    dense = dense.astype(dtype)
    expected = results(CoGAPS(**FAST), dense.copy())
    assert expected["components_"].dtype == dtype and expected["transform"].dtype == dtype
    for name, X in dense_variants(dense, tmp_path):
        before = snapshot(X)
        got = results(CoGAPS(**FAST), X)
        assert_unchanged(X, before)
        assert_same_results(got, expected, name)


def test_dask_arrays_are_fitted_as_the_arrays_they_compute_to(dense):
    # dense chunks as an ndarray, CSR chunks as a CSR matrix (numpy read them as one object)
    da = pytest.importorskip("dask.array")
    lazy = da.from_array(dense, chunks=(7, -1))
    for X, expected in (
        (lazy, dense),
        (lazy.map_blocks(sparse.csr_matrix, dtype=dense.dtype), sparse.csr_matrix(dense)),
    ):
        assert_same_results(results(CoGAPS(**FAST), X), results(CoGAPS(**FAST), expected), "dask")


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_sparse_model_on_dense_inputs(dense, tmp_path, dtype):
    """sparse_optimization=True on dense input runs the model of a sparse X (in float64,
    with the attributes in the data's dtype)."""
    dense = dense.astype(dtype)
    expected = results(CoGAPS(sparse_optimization=True, **FAST), sparse.csr_matrix(dense))
    for name, X in dense_variants(dense, tmp_path):
        before = snapshot(X)
        got = results(CoGAPS(sparse_optimization=True, **FAST), X)
        assert_unchanged(X, before)
        assert_same_results(got, expected, name)


def test_uncertainty_unchanged(dense, tmp_path):
    u = np.maximum(0.2 * dense, 0.3)
    expected = results(CoGAPS(**FAST), dense, u)
    path = tmp_path / "u.npy"
    np.save(path, u)
    for name, unc in [
        ("read-only", read_only(u)),
        ("mmap", np.load(path, mmap_mode="r")),
        ("sparse", sparse.csr_matrix(u)),
    ]:
        before = snapshot(unc)
        X = read_only(dense)
        got = results(CoGAPS(**FAST), X, unc)
        assert_unchanged(unc, before)
        assert_same_results(got, expected, name)


def test_warm_start_with_read_only_sparse(dense):
    X = read_only(sparse.csr_matrix(dense))
    before = snapshot(X)
    model = CoGAPS(warm_start=True, **FAST).fit(X)
    model.fit(X)
    assert model.n_iter_ == FAST["max_iter"]  # this fit's iterations
    assert model.objective_history_.shape == (3 * FAST["max_iter"],)
    assert_unchanged(X, before)


def test_canonical_form_does_not_copy_canonical_input(dense):
    """A canonical CSR matrix is used in place (memory): no copy of its arrays."""
    from sklearn_cogaps._cogaps._chain import canonical_csr as _canonical_csr

    X = sparse.csr_matrix(dense)
    rows = _canonical_csr(X)
    for name in ("data", "indices", "indptr"):
        assert np.shares_memory(getattr(rows, name), getattr(X, name))
    X.data[0] = 0.0
    before = snapshot(X)
    rows = _canonical_csr(X)
    assert rows.nnz == X.nnz - 1 and not np.shares_memory(rows.data, X.data)
    assert_unchanged(X, before)


@pytest.mark.parametrize("sparse_input", [False, True])
def test_huge_values_are_refused(dense, sparse_input):
    X = dense.copy()
    X[0, 0] = 1e300
    X = sparse.csr_matrix(X) if sparse_input else X
    with pytest.raises(ValueError, match="values up to 1e\\+300.*Rescale X"):
        CoGAPS(**FAST).fit(X)
    model = CoGAPS(**FAST).fit(dense)
    with pytest.raises(ValueError, match="Rescale X"):
        model.transform(X)
    with pytest.raises(ValueError, match="Rescale X"):
        model.score(X)


@pytest.mark.parametrize("value", [1e-300, 1e300])
def test_extreme_uncertainty_is_refused(dense, value):
    u = np.maximum(0.1 * dense, 0.1)
    u[0, 0] = value
    with pytest.raises(ValueError, match="uncertainty' spans"):
        CoGAPS(**FAST).fit(dense, uncertainty=u)


def test_overflowing_scaled_values_are_refused(dense):
    """Each of X and the uncertainty in range, their ratio too large to square."""
    X = dense * 1e140
    u = np.full_like(dense, 1e-140)
    with pytest.raises(ValueError, match="too large to square"):
        CoGAPS(**FAST).fit(X, uncertainty=u)


def test_large_but_representable_values_fit_finitely(dense):
    """Values near the accepted limits give finite fitted attributes."""
    for scale in (1e-100, 1e100):
        X = dense * scale
        model = CoGAPS(**FAST).fit(X, uncertainty=np.maximum(0.1 * X, 0.1 * scale))
        for name in ("components_", "components_std_", "loadings_", "chisq_", "objective_history_"):
            assert np.all(np.isfinite(getattr(model, name))), (scale, name)


def _small_fit():
    from sklearn_cogaps.datasets import make_patterns

    X = make_patterns(n_samples=20, n_features=60, n_components=2, random_state=0)[0]
    return CoGAPS(2, max_iter=30, random_state=0).fit(X), X


@pytest.mark.parametrize(
    "name, advice",
    [
        ("featureLoadings", r"components_.T"),
        ("Amean", r"components_.T"),
        ("sampleFactors", "loadings_"),
        # R's slots of the standard deviations: factorStdDev is P's (our loadings_std_),
        # loadingStdDev A's (our components_std_, transposed), not our loadings_std_
        ("factorStdDev", "loadings_std_"),
        ("loadingStdDev", r"components_std_.T"),
        ("getSampleFactors", "loadings_"),
        ("calcZ", r"z_scores\(\)"),
        ("patternMarkers", r"pattern_markers\(threshold="),
        ("calcCoGAPSStat", r"gene_set_statistic\(model.components_"),
        ("getUnmatchedPatterns", "pattern_clusters_ is -1"),
        ("getMeanChiSq", "chisq_"),
        ("getPatternGeneSet", r"feature_names=genes\), with genes = model.feature_names_in_"),
        ("calcCoGAPSStat", r"feature_names=genes\), with genes = model.feature_names_in_"),
        ("projectR", r"fixed_components=model.components_\[:, keep\]"),
        ("getOriginalParameters", r"get_params\(\)"),
        ("getVersion", r"sklearn_cogaps.__version__"),
        ("calcGeneGSStat", "nothing per gene"),
        ("plotPatterns", r"plot_patterns\(model"),
        ("binaryA", r"z_scores\(\)\[1\]\.T > 3"),
        ("reconstructGene", r"loadings_ @ model.components_"),
        ("plotResiduals", r"\(X - model.loadings_ @ model.components_\) / uncertainty"),
    ],
)
def test_r_and_pycogaps_result_names_say_ours(name, advice):
    model, _ = _small_fit()
    with pytest.raises(AttributeError, match=r"R CoGAPS.s and PyCoGAPS.s\); write .*" + advice):
        getattr(model, name)


def test_new_data_of_other_genes_get_the_projection_to_write():
    """R's projectR habit: transform of data lacking fitted genes failed with scikit-learn's
    list of names alone; the advice it now adds runs, on the genes both have."""
    pd = pytest.importorskip("pandas")
    _, X = _small_fit()
    X = pd.DataFrame(X, columns=[f"g{j}" for j in range(X.shape[1])])
    model = CoGAPS(2, max_iter=30, random_state=0).fit(X)
    X_new = X.iloc[:, ::-1].iloc[:, :45]
    anndata = pytest.importorskip("anndata")
    adata = anndata.AnnData(X.to_numpy())
    adata.var_names = list(X.columns)
    from_adata = CoGAPS(2, max_iter=30, random_state=0).fit(adata)
    for fitted, new in ((model, X_new), (from_adata, adata[:, ::-1][:, :45])):
        with pytest.raises(ValueError, match=r"X lacks 15 of the 60 features .*'g0'.*"
                           r"keep = np\.isin") as info:  # fmt: skip
            fitted.transform(new)
        advice = str(info.value).split("fixed: ", 1)[1]
        namespace = {"np": np, "CoGAPS": CoGAPS, "model": fitted, "X_new": new}
        exec(advice.replace("; ", "\n").replace(".loadings_", "", 1).replace(
            "CoGAPS(model.n_components).fit", "projected = CoGAPS(model.n_components, "
            "max_iter=30, random_state=0).fit"), namespace)  # fmt: skip
        assert namespace["projected"].loadings_.shape == (20, 2)
        # the genes both have, g15 to g59, in the fitted order
        assert_array_equal(namespace["projected"].components_, fitted.components_[:, 15:])


def test_r_habits_of_fit_and_set_params_say_what_to_write():
    model, X = _small_fit()
    with pytest.raises(TypeError, match=r"'seed' is R CoGAPS's name.*CoGAPS\(random_state=seed"):
        CoGAPS(2).fit(X, seed=1)
    with pytest.raises(TypeError, match=r"'max_iter' is a parameter.*set_params\(max_iter="):
        CoGAPS(2).fit(X, max_iter=10)
    # advice that is not a constructor argument is given as written
    for name, advice in [
        ("nThreads", "; it needs nothing here: the fit uses OpenMP's threads"),
        ("params", r"; write CoGAPS\(\*\*parameters\), with our names"),
        ("whichMatrixFixed", r"; write CoGAPS\(...\).fit\(X, fixed_components=H\)"),
        ("transposeData", r"; write fit\(X.T\)"),
    ]:
        with pytest.raises(TypeError, match=f"'{name}' is R CoGAPS's name of a parameter{advice}"):
            CoGAPS(2).fit(X, **{name: 1})
    with pytest.raises(TypeError, match="unexpected keyword argument 'bogus'"):
        CoGAPS(2).fit(X, bogus=1)
    with pytest.raises(ValueError, match=r"no parameter 'nPatterns'.*set_params\(n_components"):
        CoGAPS(2).set_params(nPatterns=5)
    with pytest.raises(TypeError, match=r"PyCoGAPS's CoGAPS\(adata, params\)"):
        CoGAPS(2).fit(X, {"nPatterns": 3})
    with pytest.raises(TypeError, match=r"takes weights=, not lp="):
        model.pattern_markers(lp=[1, 0])
    with pytest.raises(ValueError, match=r"Write axis='samples'"):
        model.pattern_markers(axis=2)
    # the number of fitted patterns is there whatever the mode
    assert model.n_components_ == 2


def test_data_below_the_default_uncertainty_floor_warn():
    from sklearn_cogaps.datasets import make_patterns

    X = make_patterns(n_samples=30, n_features=100, n_components=3, random_state=0)[0]
    with pytest.warns(UserWarning, match=r"median non-zero value of X is 0.0282, below"):
        CoGAPS(3, max_iter=5, random_state=0).fit(X * 0.01)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        CoGAPS(3, max_iter=5, random_state=0).fit(X * 0.01, uncertainty="relative")
        CoGAPS(3, max_iter=5, random_state=0).fit(X * 0.1)


def test_a_fixed_matrix_the_chain_cannot_fit_against_is_refused():
    """A fixed matrix of zeros, or scaled by 1e-200, returned the empty model without a word;
    one scaled by 1e200 gave numpy's overflow warnings. Each is refused with what to do;
    scales from 1e-4 to 1e6 still fit."""
    X, W, H = make_patterns(20, 30, 2, random_state=0)
    for scale, match in (
        (0.0, "'fixed_components' is zero everywhere"),
        (1e-200, "leaves W to reach entries of about 3.3.e\\+199, beyond its largest Gibbs"),
        (1e200, "'fixed_components' has entries up to .*: its products overflow"),
    ):
        with pytest.raises(ValueError, match=match):
            CoGAPS(2, max_iter=5, random_state=0).fit(X, fixed_components=H * scale)
    with pytest.raises(ValueError, match="'fixed_patterns' is zero everywhere"):
        CoGAPS(2, max_iter=5, random_state=0).fit(X, fixed_patterns=W * 0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        for scale in (1e-4, 1e6):
            CoGAPS(2, max_iter=5, random_state=0).fit(X, fixed_components=H * scale)


def test_an_atom_density_beyond_memory_is_refused():
    # atom_density_H=1e10 ran for minutes and took gigabytes before it was killed
    X = np.abs(np.random.default_rng(0).normal(size=(20, 30)))
    with pytest.raises(ValueError, match=r"atom_density_H=1e\+10 makes the prior expect 6e\+11"):
        CoGAPS(2, max_iter=5, atom_density_H=1e10).fit(X)
