"""Bad input, fuzzed: every case is a correct result or a ValueError naming the problem.

Never a crash, a hang, a NaN or inf in a fitted attribute, or a changed input. The cases
are drawn by hypothesis, derandomized so that CI sees the same cases at every run.
"""

import warnings

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scipy import sparse

from sklearn_cogaps import (
    CoGAPS,
    ExtremeDeconvolution,
    HierarchicalPMF,
    MaxMarginMF,
    WeightedBackgroundPMF,
)

FUZZ = settings(
    derandomize=True,
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

SPECIAL = [0.0, 1.0, 3.0, 0.5, 1e-300, 1e300, -1.0, np.nan, np.inf, 7.0]


@st.composite
def matrices(draw, max_rows=12, max_cols=6):
    """A small matrix with some special values planted, in a random container and dtype."""
    n = draw(st.sampled_from([0, 1, 2, 5, max_rows]))
    p = draw(st.sampled_from([0, 1, 3, max_cols]))
    seed = draw(st.integers(0, 2**16))
    rng = np.random.RandomState(seed)
    X = rng.poisson(2.0, size=(n, p)).astype(np.float64)
    for _ in range(draw(st.integers(0, 3))):
        if n and p:
            X[rng.randint(n), rng.randint(p)] = draw(st.sampled_from(SPECIAL))
    if draw(st.booleans()) and p:
        X[:, 0] = draw(st.sampled_from([0.0, 4.0]))  # constant column
    dtype = draw(st.sampled_from([np.float64, np.float32, np.int64]))
    if dtype is np.int64 and np.all(np.isfinite(X)) and np.all(np.abs(X) < 1e15):
        X = X.astype(np.int64)
    elif dtype is np.float32:
        with np.errstate(over="ignore"):
            X = X.astype(np.float32)
    container = draw(st.sampled_from(["dense", "csr", "csc"]))
    if container != "dense" and n and p:
        X = getattr(sparse, f"{container}_matrix")(X)
    return X


def _snapshot(X):
    if sparse.issparse(X):
        return [X.format] + [a.tobytes() for a in (X.data, X.indices, X.indptr)]
    return [np.asarray(X).tobytes()]


def _finite_attributes(est, not_measured=()):
    """Every fitted float is finite, except traces documented as NaN where not measured."""
    for name, value in vars(est).items():
        if not name.endswith("_") or name.startswith("_") or name in not_measured:
            continue
        if isinstance(value, np.ndarray) and value.dtype.kind == "f":
            assert np.all(np.isfinite(value)), name
        elif isinstance(value, float):
            assert np.isfinite(value), name


def _run(est, X, methods, **kw):
    before = _snapshot(X)
    side_before = [_snapshot(v) for v in kw.values() if v is not None]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            est.fit(X, **kw)
        except ValueError as exc:
            assert str(exc), "a ValueError must say what is wrong"
            return
        _finite_attributes(est)
        for m in methods:
            out = getattr(est, m)(X, **kw)
            for o in out if isinstance(out, tuple) else (out,):
                assert np.all(np.isfinite(np.asarray(o, dtype=float))), m
    assert _snapshot(X) == before
    assert [_snapshot(v) for v in kw.values() if v is not None] == side_before


@FUZZ
@given(X=matrices())
def test_hierarchical_pmf(X):
    _run(HierarchicalPMF(2, max_iter=10, random_state=0), X, ["transform", "score"])


@FUZZ
@given(X=matrices())
def test_weighted_background_pmf(X):
    _run(WeightedBackgroundPMF(2, max_iter=5, random_state=0), X, ["transform", "score"])


@FUZZ
@given(X=matrices(), u=st.sampled_from(["none", "good", "wrong-shape", "tiny", "zero"]))
def test_cogaps(X, u):
    shape = X.shape
    U = {
        "none": None,
        "good": np.full(shape, 0.5),
        "wrong-shape": np.ones((shape[0] + 1, shape[1])),
        "tiny": np.full(shape, 1e-300),
        "zero": np.zeros(shape),
    }[u]
    kw = {} if U is None else {"uncertainty": U}
    _run(CoGAPS(2, max_iter=10, random_state=0), X, ["transform"], **kw)


@FUZZ
@given(
    X=matrices(max_cols=3),
    side=st.sampled_from(["none", "diag", "full", "wrong-cov", "projection", "wrong-proj",
                          "nan-cov", "huge-cov"]),
)  # fmt: skip
def test_extreme_deconvolution(X, side):
    if sparse.issparse(X):
        X = X.toarray()
    X = np.asarray(X, dtype=np.float64) if X.dtype.kind == "i" else X
    n, p = X.shape
    rng = np.random.RandomState(0)
    kw = {
        "none": {},
        "diag": {"X_cov": rng.uniform(0.1, 1.0, size=(n, p))},
        "full": {"X_cov": np.broadcast_to(np.eye(p), (n, p, p)).copy()},
        "wrong-cov": {"X_cov": np.ones((n + 1, p))},
        "projection": {"projection": np.eye(p)},
        "wrong-proj": {"projection": np.ones((p + 1, p))},
        "nan-cov": {"X_cov": np.full((n, p), np.nan)},
        "huge-cov": {"X_cov": np.full((n, p), 1e300)},
    }[side]
    methods = ["score_samples", "predict_proba", "deconvolve", "bic"]
    _run(ExtremeDeconvolution(2, max_iter=10, random_state=0), X, methods, **kw)


@st.composite
def ratings(draw, max_users=12, max_items=6):
    """Ratings 1..5 with missing entries (NaN in a dense array, not stored in a sparse
    matrix) and special values planted among the observed ones."""
    n = draw(st.sampled_from([0, 1, 2, 5, max_users]))
    p = draw(st.sampled_from([0, 1, 3, max_items]))
    rng = np.random.RandomState(draw(st.integers(0, 2**16)))
    R = rng.randint(1, 6, size=(n, p)).astype(np.float64)
    observed = rng.uniform(size=(n, p)) >= draw(st.sampled_from([0.0, 0.5, 0.9, 1.0]))
    for _ in range(draw(st.integers(0, 3))):
        if n and p:
            i, j = rng.randint(n), rng.randint(p)
            R[i, j] = draw(st.sampled_from(SPECIAL + [2.5, 6.0, 1e9]))
            observed[i, j] = True
    container = draw(st.sampled_from(["dense", "csr", "csc"]))
    if container == "dense":
        return np.where(observed, R, np.nan)
    rows, cols = np.nonzero(observed)
    return getattr(sparse, f"{container}_matrix")((R[rows, cols], (rows, cols)), shape=(n, p))


@FUZZ
@given(R=ratings(), n_levels=st.sampled_from([None, 5]))
def test_max_margin_mf(R, n_levels):
    est = MaxMarginMF(2, n_levels=n_levels, max_iter=4, burn_in=2, random_state=0)
    before = _snapshot(R)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            est.fit(R)
        except ValueError as exc:
            assert str(exc), "a ValueError must say what is wrong"
        else:
            # held_out_nmae_ is NaN at iterations run without held-out ratings (documented)
            _finite_attributes(est, not_measured={"held_out_nmae_"})
            pred = est.predict_ratings(R)
            values = pred.data if sparse.issparse(pred) else pred[~np.isnan(pred)]
            assert np.all(np.isin(values, est.levels_))
            assert values.size == (R.nnz if sparse.issparse(R) else np.sum(~np.isnan(R)))
            try:
                score = est.score(R)
            except ValueError as exc:
                assert str(exc)
            else:
                assert np.isfinite(score)
    assert _snapshot(R) == before
