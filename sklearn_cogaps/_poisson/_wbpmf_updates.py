"""Empirical-Bayes Poisson factorisation with a weighted background: the variational
updates and the ELBO (Wang, "Algorithm for PMF background model with weights", Algorithm
3.1, eqs. 3.11-3.20).

The counts are ``X_ij = sum_k Z_ijk`` with ``Z_ijk ~ Poisson(w_k l_i0 f_j0 l_ik f_jk)``; each
iteration updates, for every topic, the expected counts, the posterior and prior of the
loadings and of the factors (each an EBPM problem, ``_ebpm``) and the weight, then the
background. Every sweep over X visits its stored entries only (``_wbpmf_fast``), and an
iteration costs O(nnz K): the denominators ``B_ij = sum_k B_ijk`` are made once per
iteration, by the sweep of the previous iteration's bound, and then follow each topic's
update by the one term that changed. ``iterate_simultaneous`` updates every topic from the
same expected counts instead (``solver="simultaneous"``), made by HierarchicalPMF's two
passes over the counts.
"""

from concurrent.futures import ThreadPoolExecutor

import numpy as np

from .._utils._openmp_helpers import kernel_threads, limit_this_thread
from ._ebpm import (
    DEFAULT_GAMMA_GRID,
    _posterior_rows,
    ebpm,
    ebpm_exponential_mixture,
    ebpm_gamma,
    ebpm_mixture_near,
)
from ._hpmf_updates import _pass_rows
from ._wbpmf_fast import data_term, data_term_counts, denominators, topic_counts

_N_CHUNKS = 32  # row chunks of the sweeps: fixed, so results do not depend on the threads
_CLAMP = 1e-8  # initial factors are clamped below at this value (as ebpmf.alpha does)
# A row's or column's exponentials are rescaled when a topic moves its maximum by more than
# this (in log): they stay within e^30 of 1, far from overflow and underflow.
_RESTABILISE = 30.0
# Scales of the exponential-mixture prior in the model: the factors are normalised by the
# background (mean about 1), so a fixed geometric grid 2^-20 .. 2^20 covers them.
_EXP_SCALES = 2.0 ** np.arange(-20, 21)


def _initial_prior(family, n_components):
    """Starting priors, stacked over components: (pi0, weights, shape, rate)."""
    if family == "gamma_mixture":
        grid = DEFAULT_GAMMA_GRID
        m = grid.size
        return (
            np.zeros(n_components),
            np.full((n_components, m), 1.0 / m),
            np.tile(grid, (n_components, 1)),
            np.tile(grid, (n_components, 1)),
        )
    if family == "exponential_mixture":
        m = _EXP_SCALES.size
        return (
            np.zeros(n_components),
            np.full((n_components, m), 1.0 / m),
            np.ones((n_components, m)),
            np.tile(1.0 / _EXP_SCALES, (n_components, 1)),
        )
    # gamma / point_gamma: fitted from the moments at the first call.
    return None


def _prior_k(prior, k):
    if prior is None:
        return None
    return (prior[0][k], prior[1][k], prior[2][k], prior[3][k])


# the families whose prior is a mixture on a fixed grid, which a screened iteration solves
# on the components next to the support only (ebpm_mixture_near)
GRID_FAMILIES = ("gamma_mixture", "exponential_mixture")


def _solve(y, s, family, prior_k, near=False):
    if near and family in GRID_FAMILIES and prior_k is not None:
        return ebpm_mixture_near(y, s, prior_k)
    if family == "exponential_mixture":
        return ebpm_exponential_mixture(y, s, scales=1.0 / prior_k[3], weights_init=prior_k[1])
    return ebpm(y, s, family, prior_k)


def _store(prior, k, res, n_components):
    if prior is None:
        m = res.weights.size
        prior = (
            np.zeros(n_components),
            np.zeros((n_components, m)),
            np.ones((n_components, m)),
            np.ones((n_components, m)),
        )
    prior[0][k] = res.pi0
    prior[1][k] = res.weights
    prior[2][k] = res.shape
    prior[3][k] = res.rate
    return prior


def chunk_starts(n):
    """The first row of every chunk of the sweeps over n rows, and n: a fixed number of
    chunks, so that the column sums do not depend on the threads (nor, read by blocks cut at
    these bounds, on the blocks)."""
    n_chunks = max(1, min(_N_CHUNKS, n))
    return (np.arange(n_chunks + 1, dtype=np.intp) * n) // n_chunks


def _stabilised(logs):
    """exp(logs - rowmax) and the row maxima (0 where a row is all -inf)."""
    m = np.max(logs, axis=1)
    m = np.where(np.isfinite(m), m, 0.0)
    return np.ascontiguousarray(np.exp(logs - m[:, None])), m


class _Sweeper:
    """The compiled sweeps over one CSR matrix."""

    def __init__(self, X, n_threads):
        # the matrix's own index arrays when both are 32-bit (no copy), else 64-bit ones
        both32 = X.indptr.dtype == np.int32 and X.indices.dtype == np.int32
        index = np.int32 if both32 else np.int64
        self.indptr = np.asarray(X.indptr, dtype=index)
        self.indices = np.asarray(X.indices, dtype=index)
        self.data = np.asarray(X.data, dtype=np.float64)
        self.n, self.p = X.shape
        self.starts = chunk_starts(self.n)
        # about 20 operations per stored entry and component sweep
        self.n_threads = kernel_threads(20 * self.data.size, n_threads)
        self.ahead = None  # what the next iteration's first topic reads (iterate)

    def denominators(self, rows, cols):
        """``D_ij = sum_k U_ik V_jk`` at every stored entry, from the rows' and the columns'
        stabilised exponentials (:class:`_Exponentials`)."""
        D = np.empty(self.data.size)
        denominators(self.indptr, self.indices, rows.E, cols.E, D, self.n_threads)
        return D

    def topic_counts(self, rows, cols, D, k, changed=None):
        """Row sums and column sums of E[Z_..k] (eqs. 3.11-3.12) with the denominators ``D``;
        ``changed = (t, u_old, v_old)`` when topic ``t``'s exponentials changed
        (:meth:`_Exponentials.set`) since ``D`` was made: ``D`` follows in the same pass."""
        out = np.empty(self.n)
        partial = np.zeros((len(self.starts) - 1, self.p))
        t, u_old, v_old = (-1, out, partial[0]) if changed is None else changed
        topic_counts(self.indptr, self.indices, self.data, rows.E, cols.E, rows.logs, cols.logs,
                     D, k, out, partial, t, u_old, v_old, rows.moved, cols.moved, self.starts,
                     self.n_threads)  # fmt: skip
        return out, partial.sum(axis=0)

    def data_term(self, lu, lv):
        U, mu = _stabilised(lu)
        V, mv = _stabilised(lv)
        out = np.empty(self.n)
        data_term(self.indptr, self.indices, self.data, U, V, lu, lv, mu, mv, out, self.n_threads)
        return out

    def data_term_counts(self, rows, cols):
        """:meth:`data_term` of the exponentials ``rows`` and ``cols`` with, from the same
        sweep, the :meth:`denominators` and topic 0's :meth:`topic_counts` that the next
        iteration starts from (same bits as the three)."""
        terms, D, y_rows = np.empty(self.n), np.empty(self.data.size), np.empty(self.n)
        partial = np.zeros((len(self.starts) - 1, self.p))
        data_term_counts(self.indptr, self.indices, self.data, rows.E, cols.E, rows.logs,
                         cols.logs, rows.max, cols.max, terms, D, y_rows, partial, self.starts,
                         self.n_threads)  # fmt: skip
        return terms, D, (y_rows, partial.sum(axis=0))


class _Exponentials:
    """``logs`` (n, K) with its stabilised exponentials ``E = exp(logs - max)``, the maxima
    per row kept while a topic changes unless it moves them by more than ``_RESTABILISE``.

    Within an iteration of the fit, one topic changes at a time; the denominators
    ``B_ij`` follow it by one term instead of K (``_wbpmf_fast.update_denominators``).
    """

    def __init__(self, logs):
        self.logs = np.array(logs, dtype=np.float64, order="C")
        self.E, self.max = _stabilised(self.logs)
        self.moved = np.zeros(self.logs.shape[0], dtype=np.uint8)

    def set(self, k, logs_k):
        """Replace column ``k`` of the logs; returns the column's old exponentials."""
        old = self.E[:, k].copy()
        self.logs[:, k] = logs_k
        top = np.max(self.logs, axis=1)
        moved = np.isfinite(top) & (np.abs(top - self.max) > _RESTABILISE)
        with np.errstate(over="ignore"):
            self.E[:, k] = np.exp(self.logs[:, k] - self.max)
        if moved.any():
            self.max[moved] = top[moved]
            self.E[moved] = np.exp(self.logs[moved] - top[moved, None])
        self.moved = moved.view(np.uint8)
        return old


class FitState:
    """The variational state: topic weights ``w``, background ``l0``, ``f0``, the posterior
    moments of the loadings and factors, their priors and their KL terms."""

    def __init__(self, w, l0, f0, El, Ef, Elogl, Elogf, gL, gF, kl_L, kl_F):
        self.w, self.l0, self.f0 = w, l0, f0
        self.El, self.Ef, self.Elogl, self.Elogf = El, Ef, Elogl, Elogf
        self.gL, self.gF, self.kl_L, self.kl_F = gL, gF, kl_L, kl_F
        self.y_cols = None  # set by an iteration

    @classmethod
    def start(cls, L, F, prior_loadings, prior_components):
        """The state of the factors ``L`` (n, K) and ``F`` (p, K): clamped, scaled by their
        row means (the background), with ``w = 1`` and the priors' starting weights (the
        start of the reference implementation)."""
        K = L.shape[1]
        L = np.maximum(L, _CLAMP)
        F = np.maximum(F, _CLAMP)
        l0 = L.mean(axis=1)
        f0 = F.mean(axis=1)
        El = L / l0[:, None]
        Ef = F / f0[:, None]
        return cls(np.ones(K), l0, f0, El, Ef, np.log(El), np.log(Ef),
                   _initial_prior(prior_loadings, K), _initial_prior(prior_components, K),
                   np.zeros(K), np.zeros(K))  # fmt: skip


def _exponentials(state):
    """The rows' and the columns' :class:`_Exponentials` of the state's factors."""
    lu, lv = _topic_logs(state)
    return _Exponentials(lu), _Exponentials(lv)


def iterate(state, sweeper, x_rows, x_cols, const, prior_loadings, prior_components):
    """One iteration of Algorithm 3.1, in place; returns the ELBO after it (eq. 3.20).

    The sweep of the ELBO leaves with the in-memory sweeper what the next iteration's first
    topic reads (``sweeper.ahead``: the denominators and topic 0's expected counts), used
    only while the factors are those it was made from.
    """
    s_ = state
    K = s_.w.size
    rows, cols = _exponentials(s_)
    ahead = getattr(sweeper, "ahead", None)
    sweeper.ahead = None
    if (ahead is not None and np.array_equal(ahead[0], rows.logs)
            and np.array_equal(ahead[1], cols.logs)):  # fmt: skip
        D, counts = ahead[2], ahead[3]
    else:
        D, counts = sweeper.denominators(rows, cols), None
    del ahead
    changed = None
    # the columns' expected counts each topic's factors were fitted to, kept for partial_fit
    s_.y_cols = np.empty_like(s_.Ef)
    for k in range(K):
        # E[Z_ijk] with the current factors (eqs. 3.11-3.12).
        if k == 0 and counts is not None:
            y_rows, y_cols = counts
        else:
            y_rows, y_cols = sweeper.topic_counts(rows, cols, D, k, changed)
        _update_topic(s_, k, y_rows, y_cols, prior_loadings, prior_components)
        if k + 1 < K:  # topic k's new exponentials, for the next topic's expected counts
            with np.errstate(divide="ignore"):
                u_old = rows.set(k, np.log(s_.w[k]) + s_.Elogl[:, k])
            changed = (k, u_old, cols.set(k, s_.Elogf[:, k]))
    del D, rows, cols  # the ELBO's sweep makes the next iteration's denominators
    _update_background(s_, x_rows, x_cols)
    sparse_rows = None
    if getattr(sweeper, "data_term_counts", None) is not None:
        # zeta_ijk does not depend on l0 and f0 (eq. 3.11): the bound's B_ij are the next
        # iteration's
        rows, cols = _exponentials(s_)
        sparse_rows, D, counts = sweeper.data_term_counts(rows, cols)
        sweeper.ahead = (rows.logs, cols.logs, D, counts)
    value = elbo(sweeper, x_rows, x_cols, const, s_.w, s_.l0, s_.f0, s_.El, s_.Ef, s_.Elogl,
                 s_.Elogf, sparse_rows)  # fmt: skip
    return value - (s_.kl_L.sum() + s_.kl_F.sum())


def _loadings_exposure(s_, k):
    """The exposures of topic ``k``'s loadings (eq. 3.13)."""
    return np.dot(s_.f0, s_.Ef[:, k]) * s_.w[k] * s_.l0


def _components_exposure(s_, k, El_k):
    """The exposures of topic ``k``'s factors with its loadings' means ``El_k`` (eq. 3.14)."""
    return np.dot(s_.l0, El_k) * s_.w[k] * s_.f0


def _weight(s_, y_rows, El_k, Ef_k):
    """``w_k`` from the topic's expected counts and means (Algorithm 3.1, eq. 3.18)."""
    den = np.dot(s_.l0, El_k) * np.dot(s_.f0, Ef_k)
    return y_rows.sum() / den if den > 0 else 0.0


def _store_loadings(s_, k, res):
    s_.El[:, k], s_.Elogl[:, k], s_.kl_L[k] = res.mean, res.mean_log, res.kl
    s_.gL = _store(s_.gL, k, res, s_.w.size)


def _store_components(s_, k, res):
    s_.Ef[:, k], s_.Elogf[:, k], s_.kl_F[k] = res.mean, res.mean_log, res.kl
    s_.gF = _store(s_.gF, k, res, s_.w.size)


def _update_topic(s_, k, y_rows, y_cols, prior_loadings, prior_components):
    """Topic ``k``'s posteriors, priors and weight from its expected counts ``y_rows`` (n,)
    and ``y_cols`` (p,), in place: q_L,k and g_L,k, then q_F,k and g_F,k with the new
    loadings, then w_k."""
    s_.y_cols[:, k] = y_cols
    res = _solve(y_rows, _loadings_exposure(s_, k), prior_loadings, _prior_k(s_.gL, k))
    _store_loadings(s_, k, res)
    res = _solve(y_cols, _components_exposure(s_, k, s_.El[:, k]), prior_components,
                 _prior_k(s_.gF, k))  # fmt: skip
    _store_components(s_, k, res)
    s_.w[k] = _weight(s_, y_rows, s_.El[:, k], s_.Ef[:, k])


def _topic_solution(s_, k, y_rows, y_cols, prior_loadings, prior_components, near=False):
    """:func:`_update_topic` with the state left as it is: ``(res_L, res_F, w_k)``, from
    topic ``k``'s factors, weight and priors and the background alone; ``near``: the grid
    priors' weights move only next to their support (:func:`ebpm_mixture_near`)."""
    res_l = _solve(y_rows, _loadings_exposure(s_, k), prior_loadings, _prior_k(s_.gL, k), near)
    res_f = _solve(y_cols, _components_exposure(s_, k, res_l.mean), prior_components,
                   _prior_k(s_.gF, k), near)  # fmt: skip
    return res_l, res_f, _weight(s_, y_rows, res_l.mean, res_f.mean)


def _store_topic(s_, k, solution, y_cols):
    """Write topic ``k``'s :func:`_topic_solution` into the state."""
    res_l, res_f, w = solution
    s_.y_cols[:, k] = y_cols
    _store_loadings(s_, k, res_l)
    _store_components(s_, k, res_f)
    s_.w[k] = w


def _update_background(s_, x_rows, x_cols):
    """The background with the current w (eqs. 3.16-3.17), in place."""
    s_.l0 = safe_divide(x_rows, s_.El @ (s_.w * (s_.f0 @ s_.Ef)))
    s_.f0 = safe_divide(x_cols, s_.Ef @ (s_.w * (s_.l0 @ s_.El)))


def _topic_logs(s_):
    """The logs of the responsibilities' factors, ``log w_k + E[log l_ik]`` (n, K) and
    ``E[log f_jk]`` (p, K), as contiguous arrays."""
    with np.errstate(divide="ignore"):  # a topic of weight 0 has log w = -inf
        lu = np.ascontiguousarray(np.log(s_.w)[None, :] + s_.Elogl)
    return lu, np.ascontiguousarray(s_.Elogf)


def iterate_simultaneous(state, counts, ahead, x_rows, x_cols, const, prior_loadings,
                         prior_components, n_threads, solve_threads=1,
                         near=False):  # fmt: skip
    """One iteration with every topic updated from the same expected counts; returns the
    ELBO after it (eq. 3.20) and what the next iteration reads ahead.

    Algorithm 3.1 updates the topics one after the other, each from expected counts
    (eqs. 3.11-3.12) that follow the topics before it: K sweeps over the counts. Here one
    q(Z) serves every topic: with q(Z) fixed the ELBO separates over the topics, so the K
    topic updates are the same coordinate ascent made in a block, and each still raises
    the bound (doc/wbpmf.rst, "Topic updates"). The expected counts of all topics take one
    pass over the rows (CSR) and one over the columns (CSC), HierarchicalPMF's passes
    (``_hpmf_fast.expected_counts``, same bits for any thread count); the row pass that
    evaluates the bound also gives the next iteration its rows' expected counts
    (``ahead``: the logs it read and those counts, used only while the logs are the
    same).

    Parameters
    ----------
    state : FitState
        Updated in place.
    counts : _Counts, BlockCounts or DaskCounts
        The counts, with their row (``r``) and column (``c``) passes.
    ahead : tuple or None
        What the previous iteration's bound pass left.
    x_rows, x_cols : ndarray
        The rows' and the columns' totals.
    const : float
        ``sum log X_ij!``.
    prior_loadings, prior_components : str
        The EBPM families.
    n_threads : int
        Threads of the passes, shared by the topics' solves when they run at once.
    solve_threads : int, default=1
        Topics whose EBPM solves run at once (the results do not depend on it).
    near : bool, default=False
        Screened: the grid priors' weights move only onto the components next to their
        support (:func:`ebpm_mixture_near`), a step that still raises the bound; False
        solves them over the whole grid.

    Returns
    -------
    elbo : float
    ahead : tuple
    """
    s_ = state
    K = s_.w.size
    lu, lv = _topic_logs(s_)
    if ahead is not None and np.array_equal(ahead[0], lu) and np.array_equal(ahead[1], lv):
        y_rows = ahead[2]
    else:
        y_rows = _pass_rows(counts.r, lu, lv, n_threads, want_log=False)[0]
    y_cols = _pass_rows(counts.c, lv, lu, n_threads, want_log=False)[0]
    # contiguous per topic, as the EBPM solvers read them
    y_rows, y_cols = np.ascontiguousarray(y_rows.T), np.ascontiguousarray(y_cols.T)
    s_.y_cols = np.empty_like(s_.Ef)

    def solve(k):
        return _topic_solution(s_, k, y_rows[k], y_cols[k], prior_loadings, prior_components,
                               near)  # fmt: skip

    # the topics' EBPM solves are independent: a few at a time on threads (their compiled
    # parts release the GIL), each a function of its own topic alone, stored in order
    n_workers = min(K, solve_threads)
    if n_workers > 1:
        share, errors = max(1, n_threads // n_workers), np.geterr()

        def solve_in_worker(k):
            # a new thread has OpenMP's and numpy's defaults, not the caller's settings
            limit_this_thread(share)
            with np.errstate(**errors):
                return solve(k)

        with ThreadPoolExecutor(n_workers) as pool:
            solutions = list(pool.map(solve_in_worker, range(K)))
    else:
        solutions = [solve(k) for k in range(K)]
    for k in range(K):
        _store_topic(s_, k, solutions[k], y_cols[k])
    _update_background(s_, x_rows, x_cols)
    # zeta_ijk does not depend on l0 and f0 (eq. 3.11): the bound's pass reads the factors
    # the next iteration's expected counts are made of
    lu, lv = _topic_logs(s_)
    y_next, sparse_rows, _ = _pass_rows(counts.r, lu, lv, n_threads)
    value = elbo(None, x_rows, x_cols, const, s_.w, s_.l0, s_.f0, s_.El, s_.Ef, s_.Elogl,
                 s_.Elogf, sparse_rows)  # fmt: skip
    return value - (s_.kl_L.sum() + s_.kl_F.sum()), (lu, lv, y_next)


def rowwise_dot(A, v):
    """``A @ v`` with each row's sum made in the order of the columns, so that a row's
    result does not depend on the other rows (a matrix product's kernel depends on their
    number): new rows are fitted the same alone as in any batch, or read by blocks."""
    out = A[:, 0] * v[0]
    for k in range(1, A.shape[1]):
        out = out + A[:, k] * v[k]
    return out


def elbo_rows(
    sweeper, x_rows, x_cols, w, l0, f0, El, Ef, Elogl, Elogf, rowwise=False, sparse_rows=None
):
    """Per-row ELBO terms without the KLs and the log X! constant, plus the column part
    (``rowwise``: each row's terms from that row alone, :func:`rowwise_dot`);
    ``sparse_rows``: the rows' ``sum_j X_ij log B_ij`` when already made."""
    if sparse_rows is None:
        with np.errstate(divide="ignore"):  # a topic of weight 0 has log w = -inf
            lu = np.ascontiguousarray(np.log(w)[None, :] + Elogl)
        sparse_rows = sweeper.data_term(lu, np.ascontiguousarray(Elogf))
    # Dense part: -sum_ij l0_i f0_j Lambda_ij as a rank-K product (never n x p).
    colw = w * (f0 @ Ef)
    dense_rows = -l0 * (rowwise_dot(El, colw) if rowwise else El @ colw)
    with np.errstate(divide="ignore", invalid="ignore"):
        bg_rows = np.where(x_rows > 0, x_rows * np.log(l0), 0.0)
        bg_cols = float(np.sum(np.where(x_cols > 0, x_cols * np.log(f0), 0.0)))
    return sparse_rows + dense_rows + bg_rows, bg_cols


def elbo(sweeper, x_rows, x_cols, const, w, l0, f0, El, Ef, Elogl, Elogf, sparse_rows=None):
    """The ELBO without the KL terms (eq. 3.20, including ``-sum log X_ij!``)."""
    rows, cols = elbo_rows(sweeper, x_rows, x_cols, w, l0, f0, El, Ef, Elogl, Elogf,
                           sparse_rows=sparse_rows)  # fmt: skip
    return float(np.sum(rows)) + cols - const


def unseen_features(x_cols, w, l0, f0, El, Ef, Elogf, gF):
    """Positive background scales for the features without any count in the training data.

    The background update (eq. 3.17) gives ``f0_j = 0`` to a feature whose column of ``X`` is
    all zero: under the fitted model such a feature can never be non-zero, and a held-out row
    with a count there would have likelihood 0. The column scales are instead given the
    empirical-Bayes treatment that the model gives its factors: ``f0_j ~ Gamma(a, b)``
    fitted by EBPM to all columns (``x_cols_j ~ Poisson(f0_j s_j)`` with exposure ``s_j =
    sum_k w_k E[f_jk] sum_i l0_i E[l_ik]``), and an unseen feature gets its posterior mean
    ``a / (b + s_j)``, which is positive. Seen features keep their maximum-likelihood
    scale. The unseen features' ``q(f_jk)`` are the point masses at the posterior means of
    a zero count under ``g_F,k`` with the new exposure: with no data, that posterior is
    nearly the prior, whose ``E[log f]`` is dominated by its components near zero (the grid
    reaches Gamma(1e-16, 1e-16)) and would make the bound on a held-out count there
    meaningless.
    """
    unseen = x_cols <= 0
    if not unseen.any() or unseen.all():
        return f0, Ef, Elogf
    colsum = l0 @ El  # sum_i l0_i E[l_ik]
    s = Ef @ (w * colsum)
    g0 = ebpm_gamma(x_cols, s)
    f0 = f0.copy()
    f0[unseen] = g0.shape[0] / (g0.rate[0] + s[unseen])
    Ef, Elogf = Ef.copy(), Elogf.copy()
    zeros = np.zeros(int(unseen.sum()))
    for k in range(Ef.shape[1]):
        m, _, _ = _posterior_rows(
            zeros, w[k] * colsum[k] * f0[unseen], gF[0][k], gF[1][k], gF[2][k], gF[3][k]
        )
        with np.errstate(divide="ignore"):
            Ef[unseen, k], Elogf[unseen, k] = m, np.log(m)
    return f0, Ef, Elogf


def safe_divide(num, den):
    """num / den with 0 where num is 0 (empty rows or columns)."""
    out = np.zeros_like(num, dtype=np.float64)
    pos = num > 0
    out[pos] = num[pos] / den[pos]
    return out
