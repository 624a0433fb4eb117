"""The compiled passes of the Poisson models against direct numpy computations."""

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal
from scipy import sparse
from scipy.special import logsumexp
from sklearn.utils import check_random_state

from sklearn_cogaps._poisson import _hpmf_fast
from sklearn_cogaps._poisson._counts import _randomized_svd
from sklearn_cogaps._poisson._hpmf_updates import _Counts, _exact_elbo_estimate, _Side


def _counts(seed=0, shape=(70, 40), density=0.3):
    X = sparse.random(*shape, density=density, random_state=seed, format="csr")
    X.data = np.ceil(10 * X.data)
    return X


@pytest.mark.parametrize("n_threads", [1, 2])
def test_sparse_dense_product_is_the_product_to_the_bit(n_threads):
    X = _counts()
    counts = _Counts(X)
    Q = np.random.default_rng(0).normal(size=(40, 7))
    out = np.empty((70, 7))
    _hpmf_fast.sparse_dense_product(*counts.r, Q, out, n_threads)
    assert_array_equal(out, X @ Q)
    P = np.random.default_rng(1).normal(size=(70, 3))
    out = np.empty((40, 3))
    _hpmf_fast.sparse_dense_product(*counts.c, P, out, n_threads)
    assert_allclose(out, X.T @ P, rtol=1e-14, atol=1e-13)


def test_randomized_svd_finds_the_leading_singular_values():
    # counts of a rank-4 mean: the leading values stand out of the noise, as in count data
    rng = np.random.default_rng(0)
    X = sparse.csr_matrix(
        rng.poisson(rng.gamma(0.3, 3.0, (300, 4)) @ rng.gamma(0.3, 3.0, (4, 120)))
    )
    U, S, Vt = _randomized_svd(_Counts(X), 4, 0, 2)
    exact = np.linalg.svd(X.toarray(), compute_uv=False)[:4]
    assert_allclose(S, exact, rtol=1e-3)
    assert_allclose(U.T @ U, np.eye(4), atol=1e-12)
    assert_allclose(Vt @ Vt.T, np.eye(4), atol=1e-12)


def _data_term(X, log_l, log_f):
    """sum_ij x_ij ln sum_k exp(log_l[i, k] + log_f[j, k]), entry by entry."""
    coo = X.tocoo()
    return sum(x * logsumexp(log_l[i] + log_f[j]) for i, j, x in zip(coo.row, coo.col, coo.data))


@pytest.mark.parametrize("n_draws", [1, 3, 4])
def test_sampled_data_term_of_a_group_is_the_sum_of_its_draws(n_draws):
    X = _counts(seed=3)
    counts = _Counts(X)
    rng = np.random.default_rng(2)
    log_l = rng.normal(size=(n_draws, 70, 5))
    log_f = rng.normal(size=(n_draws, 40, 5))
    # draws whose shifted terms underflow for some entries (log-sum-exp there), and a group
    # whose product of normalisers is below the smallest normal double (logs one by one)
    log_l[0, :10] += np.where(np.arange(5) < 2, 0.0, -700.0)
    log_f[0, :8] += np.where(np.arange(5) < 2, -700.0, 0.0)
    log_l[-1, 10:20] -= 300.0
    xlogt = np.empty(70)
    _hpmf_fast.sampled_data_term(*counts.r, log_l, log_f, xlogt, 2)
    expected = sum(_data_term(X, log_l[s], log_f[s]) for s in range(n_draws))
    assert_allclose(xlogt.sum(), expected, rtol=1e-12)


def test_sampled_data_term_refuses_more_than_four_draws():
    counts = _Counts(_counts())
    with pytest.raises(ValueError, match="1 to 4 draws"):
        _hpmf_fast.sampled_data_term(
            *counts.r, np.zeros((5, 70, 2)), np.zeros((5, 40, 2)), np.empty(70), 1
        )


def test_exact_elbo_estimate_does_not_depend_on_the_grouping_of_draws(monkeypatch):
    import sklearn_cogaps._poisson._hpmf_updates as updates

    X = _counts(seed=5)
    counts = _Counts(X)
    rng = np.random.default_rng(4)
    a, b = np.ones(3), np.ones(3)
    L = _Side(rng.gamma(2.0, 1.0, (70, 3)), np.full(3, 2.0), a, b)
    F = _Side(rng.gamma(2.0, 1.0, (40, 3)), np.full(3, 2.0), a, b)
    values = []
    for group in (1, 4):
        monkeypatch.setattr(updates, "_DRAWS_A_PASS", group)
        values.append(_exact_elbo_estimate(counts, L, F, check_random_state(0), 7, 2))
    assert_allclose(values[0], values[1], rtol=1e-13)


@pytest.mark.parametrize("n_threads", [1, 2])
@pytest.mark.parametrize("kk", [-1, 2])
def test_expected_counts_without_the_log_are_the_same_counts(n_threads, kk):
    # the column pass and the KL-NMF start skip the logarithm; their counts must not move.
    # Scales of e^-800 make some entries underflow, so both the shifted-exponential and the
    # log-sum-exp weights are compared.
    X = _counts(seed=5)
    rng = np.random.default_rng(4)
    log_l = rng.normal(size=(70, 5))
    log_f = rng.normal(size=(40, 5))
    log_l[::7] -= 800.0
    log_f[::5, 1:] -= 800.0
    counts = _Counts(X)
    outs = []
    for want_log in (True, False):
        z, xlogt, h = np.empty((70, 5)), np.empty(70), np.empty(70 if kk >= 0 else 0)
        _hpmf_fast.expected_counts(
            *counts.r, log_l, log_f, z, xlogt, h, kk, n_threads, False, want_log
        )
        outs.append((z, xlogt, h))
    assert_array_equal(outs[0][0], outs[1][0])
    assert_array_equal(outs[0][2], outs[1][2])
    assert np.isnan(outs[1][1]).all()
    assert_allclose(outs[0][1].sum(), _data_term(X, log_l, log_f), rtol=1e-12)
    # the counts sum to the data over the components, whichever weights an entry took
    assert_allclose(outs[1][0].sum(axis=1), np.asarray(X.sum(axis=1)).ravel(), rtol=1e-12)


def test_expected_counts_without_the_log_still_refuse_an_impossible_entry():
    X = _counts(seed=6)
    counts = _Counts(X)
    log_l = np.zeros((70, 3))
    log_f = np.zeros((40, 3))
    log_l[int(np.flatnonzero(np.diff(X.indptr))[0])] = -np.inf  # a row with counts, t = 0
    z, xlogt, h = np.empty((70, 3)), np.empty(70), np.empty(0)
    with np.errstate(invalid="ignore"), pytest.raises(ValueError, match="NaN or infinite"):
        _hpmf_fast.expected_counts(*counts.r, log_l, log_f, z, xlogt, h, -1, 1, False, False)
