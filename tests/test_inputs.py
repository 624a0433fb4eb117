"""Inputs are never modified, and every container gives the result of a canonical copy.

For HierarchicalPMF, WeightedBackgroundPMF, ExtremeDeconvolution and MaxMarginMF, every
method is called on dense, CSR, CSC and COO input, read-only and memory-mapped arrays, and
sparse matrices with explicit zeros (stored NaNs for ratings), unsorted or duplicate
indices; the results must equal those of a canonical copy, and the caller's object must be
unchanged to the bit. CoGAPS has its own file, test_cogaps_inputs.py.
"""

import copy
import warnings

import numpy as np
import pytest
from numpy.testing import assert_array_equal
from scipy import sparse
from sklearn.exceptions import ConvergenceWarning

from sklearn_cogaps import ExtremeDeconvolution, HierarchicalPMF, WeightedBackgroundPMF


@pytest.fixture(autouse=True)
def _quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        yield


def _counts(seed=0):
    rng = np.random.RandomState(seed)
    X = rng.poisson(rng.gamma(1.0, 1.0, (25, 1)) * rng.gamma(1.0, 1.0, (1, 12)) * 2)
    X[3] = 0  # an empty row
    return X.astype(np.float64)


def _read_only(a):
    a = a.copy()
    a.flags.writeable = False
    return a


def _memmap(a, tmp_path, name):
    # one file per array: two arrays of the same shape must not share a file
    path = tmp_path / f"{name}-{len(list(tmp_path.iterdir()))}.dat"
    m = np.memmap(path, dtype=a.dtype, mode="w+", shape=a.shape)
    m[:] = a
    m.flush()
    return np.memmap(path, dtype=a.dtype, mode="r", shape=a.shape)


def _messy_csr(X):
    """The same matrix with explicit zeros, unsorted and duplicate indices."""
    rows, cols = np.nonzero(X)
    vals = X[rows, cols]
    # split each value in two duplicate entries, add explicit zeros, shuffle within rows
    r = np.concatenate([rows, rows, [0, 1, 2]])
    c = np.concatenate([cols, cols, [0, 1, 2]])
    v = np.concatenate([vals / 2, vals / 2, [0.0, 0.0, 0.0]])
    # X[0, 0] etc. may be non-zero: the explicit zeros are extra entries there
    order = np.lexsort((np.random.RandomState(1).rand(r.size), r))
    r, c, v = r[order], c[order], v[order]
    indptr = np.concatenate([[0], np.cumsum(np.bincount(r, minlength=X.shape[0]))])
    M = sparse.csr_matrix((v, c, indptr), shape=X.shape)
    assert not M.has_canonical_format
    return M


def _forms(X, tmp_path, sparse_ok):
    forms = {"dense": X.copy(), "read-only": _read_only(X), "memmap": _memmap(X, tmp_path, "X"),
             "fortran": np.asfortranarray(X), "int": X.astype(np.int64)}  # fmt: skip
    if sparse_ok:
        forms.update({
            "csr": sparse.csr_matrix(X), "csc": sparse.csc_matrix(X),
            "coo": sparse.coo_matrix(X), "messy-csr": _messy_csr(X),
            "messy-csc": _messy_csr(X.T).T,
        })  # fmt: skip
        ro = sparse.csr_matrix(X)
        for a in (ro.data, ro.indices, ro.indptr):
            a.flags.writeable = False
        forms["read-only-csr"] = ro
        forms["int-csr"] = sparse.csr_matrix(X.astype(np.int64))
    return forms


def _snapshot(X):
    if sparse.issparse(X):
        parts = [X.format, X.shape] + [
            (a.dtype.str, a.tobytes()) for a in
            ((X.row, X.col, X.data) if X.format == "coo" else (X.data, X.indices, X.indptr))
        ]  # fmt: skip
        if X.format != "coo":
            parts.append(X.has_sorted_indices)
        return parts
    return [X.dtype.str, X.shape, X.tobytes(), X.flags.writeable, X.flags.c_contiguous]


def _results(est, methods, X, **kw):
    return {m: copy.deepcopy(getattr(est, m)(X, **kw)) for m in methods}


def _assert_same(a, b, msg):
    if isinstance(a, tuple):
        for x, y in zip(a, b):
            _assert_same(x, y, msg)
    else:
        assert_array_equal(np.asarray(a), np.asarray(b), err_msg=msg)


@pytest.mark.parametrize(
    "make, methods",
    [
        (lambda: HierarchicalPMF(2, max_iter=20, random_state=0),
         ["transform", "score", "fit_transform"]),
        (lambda: WeightedBackgroundPMF(2, max_iter=5, random_state=0),
         ["transform", "score", "fit_transform"]),
    ],
    ids=["HierarchicalPMF", "WeightedBackgroundPMF"],
)  # fmt: skip
def test_count_models_leave_inputs_unchanged(make, methods, tmp_path):
    X = _counts()
    ref = make().fit(X)
    expected = _results(ref, methods[:-1], X)
    expected["fit_transform"] = make().fit_transform(X)
    for name, form in _forms(X, tmp_path, sparse_ok=True).items():
        before = _snapshot(form)
        est = make().fit(form)
        got = _results(est, methods[:-1], form)
        got["fit_transform"] = make().fit_transform(form)
        for m in methods:
            _assert_same(expected[m], got[m], f"{m} on {name}")
        assert _snapshot(form) == before, name


def _xd_data(seed=0):
    rng = np.random.RandomState(seed)
    v = rng.normal(size=(60, 2)) + np.where(rng.rand(60, 1) < 0.5, -2.0, 2.0)
    S = rng.uniform(0.1, 0.5, size=(60, 2))
    X = v + rng.normal(size=v.shape) * np.sqrt(S)
    X[5, 1] = np.nan
    Sfull = np.zeros((60, 2, 2))
    Sfull[:, [0, 1], [0, 1]] = S
    P = np.repeat(np.eye(2)[None], 60, axis=0)
    return X, S, Sfull, P


XD_METHODS = ["score_samples", "score", "predict", "predict_proba", "deconvolve", "bic", "aic"]


@pytest.mark.parametrize("side", ["none", "diag", "full", "projection"])
def test_xd_leaves_inputs_unchanged(side, tmp_path):
    X, S, Sfull, P = _xd_data()
    sides = {"none": {}, "diag": {"X_cov": S}, "full": {"X_cov": Sfull},
             "projection": {"X_cov": S, "projection": P}}  # fmt: skip
    kw = sides[side]
    make = lambda: ExtremeDeconvolution(2, max_iter=10, random_state=0)  # noqa: E731
    ref = make().fit(X, **kw)
    expected = _results(ref, XD_METHODS, X, **kw)
    expected_partial = make().partial_fit(X, **kw).partial_fit(X, **kw).means_
    variants = {
        "read-only": (lambda a: _read_only(a)),
        "memmap": (lambda a: _memmap(a, tmp_path, f"a{a.ndim}{a.shape[-1]}")),
        "fortran": (lambda a: np.asfortranarray(a)),
        "float32-side": (lambda a: a.astype(np.float32) if a is not X else a),
    }
    for name, conv in variants.items():
        Xv = conv(X)
        kwv = {k: conv(v) for k, v in kw.items()}
        before = [_snapshot(Xv)] + [_snapshot(v) for v in kwv.values()]
        est = make().fit(Xv, **kwv)
        got = _results(est, XD_METHODS, Xv, **kwv)
        if name != "float32-side":
            for m in XD_METHODS:
                _assert_same(expected[m], got[m], f"{m} on {name}")
            partial = make().partial_fit(Xv, **kwv).partial_fit(Xv, **kwv).means_
            assert_array_equal(partial, expected_partial)
        after = [_snapshot(Xv)] + [_snapshot(v) for v in kwv.values()]
        assert after == before, name


def test_xd_sample_weight_is_not_modified():
    X, S, _, _ = _xd_data()
    sw = _read_only(np.linspace(0.5, 2.0, X.shape[0]))
    before = sw.tobytes()
    ExtremeDeconvolution(2, max_iter=5, random_state=0).fit(X, X_cov=S, sample_weight=sw)
    assert sw.tobytes() == before


def _ratings(seed=0):
    """Ratings 1..5 of 30 users and 12 items, about half observed (NaN elsewhere)."""
    rng = np.random.RandomState(seed)
    R = rng.randint(1, 6, size=(30, 12)).astype(np.float64)
    return np.where(rng.uniform(size=R.shape) < 0.5, np.nan, R)


def _ratings_forms(R, tmp_path):
    """Every container of the same ratings: dense with NaN for missing, sparse with the
    ratings stored (also with stored NaNs, which are missing, and unsorted indices)."""
    rows, cols = np.nonzero(~np.isnan(R))
    csr = sparse.csr_matrix((R[rows, cols], (rows, cols)), shape=R.shape)
    forms = {"dense": R.copy(), "read-only": _read_only(R), "memmap": _memmap(R, tmp_path, "R"),
             "fortran": np.asfortranarray(R), "csr": csr.copy(), "csc": csr.tocsc(),
             "coo": csr.tocoo()}  # fmt: skip
    ro = csr.copy()
    for a in (ro.data, ro.indices, ro.indptr):
        a.flags.writeable = False
    forms["read-only-csr"] = ro
    # stored NaNs (missing) and indices in reverse order within each row
    r2 = np.concatenate([rows, [0, 1]])
    c2 = np.concatenate([cols, [np.flatnonzero(np.isnan(R[i]))[0] for i in (0, 1)]])
    v2 = np.concatenate([R[rows, cols], [np.nan, np.nan]])
    order = np.lexsort((-c2, r2))
    indptr = np.concatenate([[0], np.cumsum(np.bincount(r2, minlength=R.shape[0]))])
    messy = sparse.csr_matrix((v2[order], c2[order], indptr), shape=R.shape)
    assert not messy.has_sorted_indices
    forms["messy-csr"] = messy
    return forms


def test_max_margin_mf_leaves_inputs_unchanged(tmp_path):
    from sklearn_cogaps import MaxMarginMF

    R = _ratings()
    make = lambda: MaxMarginMF(2, max_iter=6, burn_in=2, random_state=0)  # noqa: E731
    ref = make().fit(R)
    pairs = sparse.csr_matrix(~np.isnan(R), dtype=np.float64)
    expected = (
        ref.predict_ratings(pairs).toarray(),
        ref.score(R),
        ref.predict_ratings(pairs[:4], observed=R[:4]).toarray(),
    )
    for name, form in _ratings_forms(R, tmp_path).items():
        before = _snapshot(form)
        est = make().fit(form)
        # the first four users again, as new users, in the same container
        observed = (
            form.tocsr()[:4].asformat(form.format)
            if sparse.issparse(form)
            else np.asarray(form)[:4]
        )
        got = (
            est.predict_ratings(pairs).toarray(),
            est.score(form),
            est.predict_ratings(pairs[:4], observed=observed).toarray(),
        )
        for a, b in zip(expected, got):
            assert_array_equal(a, b, err_msg=name)
        assert _snapshot(form) == before, name


@pytest.mark.parametrize(
    "make, side",
    [
        (lambda: ExtremeDeconvolution(1, random_state=0), "X_cov"),
        (lambda: ExtremeDeconvolution(1, random_state=0), "sample_weight"),
        (lambda: HierarchicalPMF(2, max_iter=5, random_state=0), "X_val"),
        (lambda: WeightedBackgroundPMF(2, max_iter=5, random_state=0), "X_val"),
    ],
)
def test_a_list_side_input_beside_a_list_x_gives_the_arrays_result(make, side):
    """A list has an ``index`` method, which the check of a side input's labels took for
    pandas labels and failed on (TypeError: object of type 'builtin_function_or_method'
    has no len()) when X was a list too."""
    X = _counts()
    values = {
        "X_cov": np.full_like(X, 0.1),
        "sample_weight": np.arange(1.0, X.shape[0] + 1),
        "X_val": _counts(1),
    }[side]
    expected = make().fit(X, **{side: values})
    fitted = make().fit(X.tolist(), **{side: values.tolist()})
    for name in ("means_", "components_"):
        if hasattr(expected, name):
            assert_array_equal(getattr(fitted, name), getattr(expected, name))
