"""Empirical-Bayes Poisson matrix factorisation with a weighted background (EBPMF-WBG): the
estimator. The variational updates of the fit are in ``_wbpmf_updates``; the EBPM problems
that learn the priors in ``_ebpm``.
"""

import copy
from numbers import Integral, Real

import numpy as np
from scipy import sparse
from scipy.special import gammaln
from sklearn.base import (
    BaseEstimator,
    ClassNamePrefixFeaturesOutMixin,
    TransformerMixin,
    _fit_context,
)
from sklearn.utils import check_random_state
from sklearn.utils._param_validation import Hidden, Interval, StrOptions
from sklearn.utils.validation import check_is_fitted
from threadpoolctl import threadpool_limits

from .._base import IterativeMixin
from .._mixins import DataInFitMixin, NonNegativeFactorisationMixin
from .._utils._blocks import RowBlocks, is_out_of_core
from .._utils._deprecation import RenamedMixin
from .._utils._habits import peer_arguments
from .._utils._openmp_helpers import effective_n_threads, kernel_threads
from .._utils._seeding import draw_seeds
from .._utils._validation import (
    canonical_csr,
    check_ignored_y,
    check_not_masked,
    check_side_labels,
    data_dtype,
    out_of_core_features,
    validate_input,
)
from .._utils._warnings import warn
from ._block_counts import BlockCounts, compressed, entry_sums, row_entry_sums
from ._counts import (
    _HPFREC_FIT_ARGUMENTS,
    COUNTS_ADVICE,
    HPFREC_METHODS,
    MASKED_COUNTS_ADVICE,
    MISSING_COUNTS_ADVICE,
    PEER_RUN_PARAMETERS,
    CountModelMixin,
    HeldOut,
    _check_block,
    _source_dtype,
    has_fractions,
    kl_nmf,
    refuse_hpfrec_arguments,
    warn_fit_only_parameters,
)
from ._dask_counts import DaskCounts
from ._ebpm import EBPM_FAMILIES
from ._hpmf_updates import _Counts
from ._wbpmf_blocks import BlockSweeper, column_sums
from ._wbpmf_fast import regress_rows, row_expected_counts
from ._wbpmf_svi import ColumnStatistics, batch_statistics, global_step
from ._wbpmf_updates import (
    _CLAMP,
    GRID_FAMILIES,
    FitState,
    _stabilised,
    _Sweeper,
    elbo_rows,
    iterate,
    iterate_simultaneous,
    rowwise_dot,
    safe_divide,
    unseen_features,
)

__all__ = ["WeightedBackgroundPMF"]

# KL-NMF iterations of init="nmf", as R's ebpmf; with solver="simultaneous" on counts of at
# least _LARGE_NNZ stored values, where an iteration costs 0.5 to 1 iteration of the fit and
# a fit from the shorter start was level at equal time (doc/wbpmf.rst, "The start on large
# counts"), fewer.
_N_INIT_NMF = 50
_N_INIT_NMF_LARGE = 10
# solver="simultaneous" with a grid prior: screened iterations (the weights moved only next
# to their support) between two over the whole grid; None: every iteration over the whole
# grid (doc/wbpmf.rst, "Topic updates")
_SCREENED_RUN = 9
# Large counts: solver="auto" takes the simultaneous updates (make_sc's 7.1 M: 0.175 s an
# iteration against the sequential 0.459 s; doc/wbpmf.rst, "Topic updates") and init="nmf"
# the shorter start from this many stored counts.
_LARGE_NNZ = 1_000_000
_ML_ITER = 30  # multiplicative updates of the maximum-likelihood start of transform
# Topics that hold at most this share of a row's expected counts are tried switched off by
# transform's row fit (as HierarchicalPMF's new rows, doc/hpmf.rst "New rows").
_SEARCH_SHARE = 0.25
# Whether that search also tries a row's largest topic switched off: it leaves 336 rows
# below the fit's where the default leaves 369, of 2,160 (benchmarks/wbpmf_training_rows.py)
_SEARCH_LARGEST = False
# operations of regress_rows per stored entry and pair of components (one sweep: the
# normaliser of every entry for every component), for its thread count
_ROW_WORK = 4
# What to do instead of passing data as the second positional argument.
_NO_SIDE_INPUT = (
    "fit the counts alone, call fit(X); initial factors for init='custom' go by keyword, "
    "fit(X, W=W0, H=H0), and held-out counts of the same rows too, fit(X_train, "
    "X_val=X_held) (thin_counts makes them)"
)


# The local step of partial_fit: from the rows' maximum-likelihood loadings, at most this
# many plain sweeps of coordinate ascent, to this relative change of a row's loadings. With
# the rows of transform as then made (100 sweeps to 1e-8), a step this short was five times
# faster and reached a better held-out score after three epochs (doc/wbpmf.rst).
_SVI_LOCAL_SWEEPS = 10
_SVI_LOCAL_TOL = 1e-3
# transform's rows: extrapolated sweeps to this relative change of a row's loadings, at most
# this many, for every fit of its search among fixed points. Along the flattest directions
# of a row's bound a sweep moves the loadings by less than 1e-5 of their size while they
# drift by a percent over hundreds of sweeps, at no measurable gain in the bound; compared
# at 1e-5 the fits missed the fit's own fixed point in one row of
# test_transform_finds_the_rows_where_a_topic_of_a_few_counts_is_off (2.9 nats below it),
# at 1e-6 in none (doc/wbpmf.rst).
_ROW_TOL = 1e-6
_ROW_MAX_SWEEPS = 1000
# The attributes of the training rows of a fit, which partial_fit (keeping no rows) removes.
_ROW_ATTRIBUTES = ("loadings_", "loadings_mean_", "loadings_mean_log_", "l0_", "kl_loadings_",
                   "reconstruction_err_", "validation_scores_")  # fmt: skip


def _without_rows_of_no_count(held, x_rows):
    """The held-out counts without those of rows that have no training count.

    Such a row's background ``l0_i`` is 0 at the maximum likelihood (eq. 3.16) and the model
    gives its entries a mean of 0, so a held-out count there scores -inf at every iteration
    and early stopping would end the fit at its first as if it were the best. Unlike a
    feature's (``unseen_features``), a row's background has no prior to fall back on: its
    held-out counts are left out of the score, with a warning."""
    rows = np.flatnonzero((np.diff(held.indptr) > 0) & (np.asarray(x_rows) == 0))
    if rows.size == 0:
        return held
    warn(
        f"{rows.size} row(s) of X_val hold counts where X has none (the first: row "
        f"{rows[0]}); the model gives such a row a mean of 0, so their held-out counts are "
        "left out of validation_scores_. Hold out a share of each row's counts (X_train, "
        "X_val = thin_counts(X, 0.2)) or drop the rows without training counts.",
        UserWarning,
    )
    held = held.copy()
    for i in rows:
        held.data[held.indptr[i] : held.indptr[i + 1]] = 0.0
    held.eliminate_zeros()
    return held


class _Problem:
    """What every run of one fit shares: the counts, the starts given for init='custom', the
    compiled sweeps, the row and column sums, the log X! constant and the prior families
    of the loadings and of the components."""

    def __init__(self, X, W, H, n_threads, families, held=None, sweeps=True):
        self.X, self.W, self.H, self.families, self.held = X, W, H, families, held
        self.n_threads = n_threads
        self.sweeps = sweeps  # False: the counts' own passes (solver="simultaneous")
        self._sweeper = None
        self._counts = None
        self.ahead = None  # what solver="simultaneous"'s next iteration reads ahead
        if isinstance(X, (BlockCounts, DaskCounts)):  # read by blocks, or on a cluster
            self.x_rows = X.row_sums
            self.const = X.log_factorial
        else:
            self.x_rows = np.asarray(X.sum(axis=1)).ravel()
            # the sum of the rows' sums, as the blocks of an out-of-core X give it
            self.const = entry_sums(*row_entry_sums(compressed(X)), self.x_rows)[0]
        self.n_started = 0
        if held is not None:
            self.held = HeldOut(_without_rows_of_no_count(held, self.x_rows), self.x_rows)

    @property
    def sweeper(self):
        """The compiled sweeps, made at their first use, after the start: on a cluster the
        start's column blocks are released first, so that the workers hold the counts twice
        (the row chunks and the sweeps' parts), not three times."""
        if self._sweeper is None:
            self.release_columns()
            if isinstance(self.X, (BlockCounts, DaskCounts)):
                self._sweeper = BlockSweeper(self.X, self.n_threads)
            else:
                self._sweeper = _Sweeper(self.X, self.n_threads)
        return self._sweeper

    @property
    def counts(self):
        """The counts with their passes over the rows and over the columns (CSR and CSC in
        memory, made at first use), for solver="simultaneous" and its start."""
        if self._counts is None:
            is_blocks = isinstance(self.X, (BlockCounts, DaskCounts))
            self._counts = self.X if is_blocks else _Counts(self.X)
        return self._counts

    def pass_threads(self, n_components):
        """Threads of a pass over the counts with ``n_components`` topics."""
        return kernel_threads(2 * self.counts.nnz * n_components, self.n_threads)

    def solve_threads(self, n_components):
        """Topics whose EBPM solves run at once: with the mixture priors, whose solves are
        compiled, on counts of at least 10,000 rows and columns; otherwise one at a time
        (on smaller counts, and with the gamma families' solves, mostly Python, a pool
        cost more than it saved: 4.3-4.9 ms against 1.9 ms per iteration on 200 x 150
        counts with K = 3)."""
        if not set(self.families) <= {"gamma_mixture", "exponential_mixture"}:
            return 1
        return kernel_threads(200 * sum(self.counts.shape), min(n_components, self.n_threads))

    def release_columns(self):
        """Let a cluster drop the column blocks of the start's passes over the columns, and
        the sweeper the denominators that a previous run of n_init left ahead."""
        self.ahead = None
        if self._sweeper is not None:
            self._sweeper.ahead = None
        if isinstance(self.X, DaskCounts) and self.sweeps:  # the other solver's passes
            self.X.release_columns()

    @property
    def x_cols(self):
        """The columns' sums, added row after row as ``X.sum(axis=0)`` adds them."""
        if isinstance(self.X, (BlockCounts, DaskCounts)):
            if self.sweeps:
                return self.sweeper.x_cols
            if not hasattr(self, "_x_cols"):
                self._x_cols = column_sums(self.X)
            return self._x_cols
        if not hasattr(self, "_x_cols"):
            self._x_cols = np.asarray(self.X.sum(axis=0)).ravel()
        return self._x_cols

    def close(self):
        """Remove the denominators of counts read by blocks, or kept in memory."""
        self.ahead = self._counts = None
        if self._sweeper is not None:
            self._sweeper.ahead = None
        if self._sweeper is not None and hasattr(self._sweeper, "close"):
            self._sweeper.close()


class _SVIState:
    """What ``partial_fit`` continues: the globals (``w``, ``f0``, ``q(f)``, both priors)
    as the batch algorithm's updates leave them (``f0`` of the features without counts is
    0 here; the fitted attributes give them their empirical-Bayes scales), the running
    averages of the sums over rows, the steps taken and the rows seen."""

    def __init__(self, state, stats, steps, seen):
        self.globals = _Globals(
            state.w.copy(), state.f0.copy(), state.Ef.copy(), state.Elogf.copy(),
            tuple(np.array(a, dtype=np.float64) for a in state.gL),
            tuple(np.array(a, dtype=np.float64) for a in state.gF),
            np.array(state.kl_F, dtype=np.float64),
        )  # fmt: skip
        self.stats, self.steps, self.seen = stats, steps, seen

    @classmethod
    def of_fit(cls, model, n_batch):
        """The state of a fitted model, its rows counted as if they had come in batches of
        ``n_batch`` rows, so that the step size goes on from there instead of restarting at
        its largest (one small batch would outweigh the whole fit)."""
        stats = getattr(model, "_fit_statistics", None)
        if stats is None:
            raise ValueError(
                "This model was fitted by an earlier release, which did not keep the sums "
                "over rows that partial_fit continues; fit it again, then call partial_fit."
            )
        keys = ("pi0", "weights", "shape", "rate")
        # the raw f0 and q(f) of the fit: the features without counts back at 0
        f0 = np.where(stats.x > 0, model.f0_, 0.0)
        state = _Globals(
            model.w_,
            f0,
            *model._feature_moments(),
            tuple(model.prior_loadings_[k] for k in keys),
            tuple(model.prior_components_[k] for k in keys),
            model.kl_components_,
        )
        seen = model.l0_.shape[0]
        return cls(state, stats, int(round(seen / max(n_batch, 1))), seen)

    def as_state(self):
        """The globals as a state :func:`unseen_features` reads (``l0 @ El`` is ``T``)."""
        g = self.globals
        return _Globals(g.w, g.f0, g.Ef, g.Elogf, g.gL, g.gF, g.kl_F, l0=np.ones(1),
                        El=self.stats.T[None, :])  # fmt: skip


class _Globals:
    """The globals of a state, by the names of :class:`FitState`."""

    def __init__(self, w, f0, Ef, Elogf, gL, gF, kl_F, l0=None, El=None):
        self.w, self.f0, self.Ef, self.Elogf = w, f0, Ef, Elogf
        self.gL, self.gF, self.kl_F, self.l0, self.El = gL, gF, kl_F, l0, El


def _is_large(X):
    """Whether the counts hold at least ``_LARGE_NNZ`` stored values (dense: non-zeros)."""
    stored = X.nnz if hasattr(X, "nnz") else np.count_nonzero(X)
    return stored >= _LARGE_NNZ


class _FitState:
    """A run's variational state with the problem it fits."""

    def __init__(self, problem, fit):
        self.problem, self.fit = problem, fit
        # solver="simultaneous": whether the last iteration was screened, and the screened
        # iterations since the last over the whole grid (None before the first)
        self.screened, self.screened_run = False, None
        # the bound the state had when a warm start took it (None for a new start, whose
        # bound R's ebpmf_wbg does not compute)
        self.bound = None


class WeightedBackgroundPMF(
    RenamedMixin,
    IterativeMixin,
    DataInFitMixin,
    CountModelMixin,
    NonNegativeFactorisationMixin,
    ClassNamePrefixFeaturesOutMixin,
    TransformerMixin,
    BaseEstimator,
):
    """Empirical-Bayes Poisson matrix factorisation with a weighted background (EBPMF-WBG).

    The counts are modelled as ``X_ij = sum_k Z_ijk`` with ``Z_ijk ~ Poisson(w_k l_i0 f_j0
    l_ik f_jk)``: a rank-one background (row scales ``l0``, column scales ``f0``) modulated
    by ``K`` weighted topics whose loadings ``l_ik ~ g_L,k`` and factors ``f_jk ~ g_F,k``
    have priors learned from the data by empirical Bayes Poisson means (EBPM) at every
    iteration. Inference is mean-field variational Bayes (Algorithm 3.1 of the reference)
    and touches only the non-zeros of ``X``.

    Parameters
    ----------
    n_components : int, default=5
        Number of topics ``K``.
    prior_loadings : {"gamma_mixture", "gamma", "point_gamma", "exponential_mixture"}, \
            default="gamma_mixture"
        EBPM family of the priors ``g_L,k`` of the loadings. ``"gamma_mixture"`` is a
        mixture of Gamma(a, a) on the fixed 34-value grid of the R package ebpmf.alpha with
        weights fitted by mix-SQP; ``"exponential_mixture"`` a mixture of exponentials on the
        geometric grid of scales ``2**-20, ..., 2**20``.
    prior_components : {"gamma_mixture", "gamma", "point_gamma", "exponential_mixture"}, \
            default="gamma_mixture"
        EBPM family of the priors ``g_F,k`` of the per-feature factors.
    solver : {"auto", "sequential", "simultaneous"}, default="auto"
        The order of the topics' updates within an iteration of :meth:`fit`. ``"auto"`` is
        ``"simultaneous"`` on counts of at least a million stored values when both priors are
        mixture families, and ``"sequential"`` otherwise; pass ``solver="sequential"`` for the
        updates of R's ``ebpmf_wbg`` on any counts. The choice follows the size of X:
        cross-validation folds below the size fit with the sequential solver and their refit on all
        rows with the simultaneous one (``solver_`` says which); pass ``solver`` to keep one.
        ``"sequential"`` is Algorithm 3.1 of the reference (and R's ``ebpmf_wbg``): each topic from
        expected counts that follow the topics updated before it, one sweep over the counts per
        topic. ``"simultaneous"`` updates every topic from the same expected counts, made by one
        pass over the rows and one over the columns as in :class:`HierarchicalPMF`, with the topics'
        prior fits on several threads on large counts, and keeps a second, column-major copy of the
        counts: the same coordinate ascent on the same ELBO, each iteration raising it. With the
        mixture priors, up to nine iterations of ten are screened (each prior's weights move only
        onto the grid components next to their support, whose likelihoods alone are computed), and
        the fit stops only after an iteration over the whole grid. With the mixture priors it took
        about as many iterations for the same bound in less time per iteration; with ``"gamma"`` and
        ``"point_gamma"`` it needed up to ten times the iterations and sometimes ended at a lower
        fixed point (``doc/wbpmf.rst``, "Topic updates"). :meth:`partial_fit` starts with a
        sequential iteration either way.
    max_iter : int, default=100
        Maximum number of iterations of the fit.
    tol : float, default=1e-8
        Stop when an iteration changes the ELBO by at most ``tol`` times its magnitude (or ``tol``
        itself below a magnitude of 1), as in every estimator of the package; with
        ``solver="simultaneous"`` a change within ``tol`` after a screened iteration is tested again
        after an iteration over the whole grid. ``transform`` and ``score`` sweep each new row until
        its loadings change by less than 1e-6, relative, whatever ``max_iter`` and ``tol``.
    init : {"nmf", "custom"}, default="nmf"
        ``"nmf"``: start from scikit-learn's KL-NMF (multiplicative updates, 50 iterations as R's
        ebpmf; 10 with the simultaneous solver on counts of at least a million stored values, where
        each costs about an iteration of the fit); ``"custom"``: from ``W`` and ``H`` passed to
        :meth:`fit`. In both cases the factors are clamped below at 1e-8, ``l0`` and ``f0`` are the
        row means of ``W`` and of ``H.T`` over the components, ``E[l_ik] = W_ik / l0_i``, ``E[f_jk]
        = H_kj / f0_j``, ``w = 1`` and the mixture priors start from uniform weights: factors from
        an earlier fit start near it, not at it (its priors and weights are reset). To continue an
        earlier fit (R's ``init = fit``), use ``warm_start=True``.
    random_state : int, RandomState instance or None, default=None
        Seed of the NMF initialisation (the iterations are deterministic).
    verbose : int, default=0
        0: silent; 1: a progress line (iteration, ELBO, time elapsed and left) about every
        tenth of ``max_iter``; 2: a line after every iteration.
    warm_start : bool, default=False
        When True and the estimator was fitted before on data of the same shape with the
        same prior families, ``fit`` continues from the previous fit's posteriors, priors,
        weights and background (``init``, ``W`` and ``H`` are then not used). Otherwise
        a previous fit is not continued: the fit starts anew with a ``UserWarning``.
    n_init : int, default=1
        Number of fits from different starts; the one with the highest final ELBO is kept.
        The first starts from KL-NMF from NNDSVDa, the others from KL-NMF from random
        factors (NNDSVDa's seed drives only its randomised SVD, to the same leading vectors:
        it changes the fit at the level of rounding). Ignored when ``warm_start``
        continues a fit.
    n_iter_no_change : int, default=20
        With held-out counts (``fit(X, X_val=...)``), the fit stops once this many
        iterations have not raised their log-likelihood, and keeps its best iteration, as in
        :class:`HierarchicalPMF`. Not used without ``X_val``.
    step_exponent : float, default=0.6
        The step of the ``t``-th call of :meth:`partial_fit` is ``(t + 2) **
        -step_exponent`` (as :class:`HierarchicalPMF`'s); in (0.5, 1] for convergence
        (Robbins-Monro).
    total_samples : int or None, default=None
        The number of rows of the data set whose batches :meth:`partial_fit` receives: each
        batch stands for that many rows. None counts the rows given so far.
    prior_factors : str, default="deprecated"
        Former name of ``prior_components``.

        .. deprecated:: 0.2
           ``prior_factors`` was renamed ``prior_components`` (the per-feature side is
           ``components`` in every estimator) and will be removed in 0.3.

    Attributes
    ----------
    components_ : ndarray of shape (n_components, n_features)
        The topics on the data scale: ``components_[k, j] = w_k f0_j E[f_jk]``, so that
        ``transform(X) @ components_`` is the posterior mean of ``E[X]``.
    w_ : ndarray of shape (n_components,)
        Topic weights ``w_k``.
    l0_ : ndarray of shape (n_samples,)
        Row background scales of the training data. This and the other attributes of the
        training rows (``loadings_``, ``loadings_mean_``, ``loadings_mean_log_``,
        ``kl_loadings_``, ``reconstruction_err_``, ``validation_scores_``) are set by
        :meth:`fit` only: :meth:`partial_fit` keeps no rows.
    f0_ : ndarray of shape (n_features,)
        Column background scales; a feature without counts in the training data gets its
        empirical-Bayes posterior mean (positive), so that it may be non-zero in new rows.
    loadings_ : ndarray of shape (n_samples, n_components)
        The loadings of the training rows on the data scale, ``l0_i E[l_ik]`` (the
        quantity :meth:`transform` gives for new rows), so that ``loadings_ @ components_``
        is the fitted mean of ``X``. ``transform(X)`` fits each row afresh from its own
        starts: the row problem is not concave, so on some training rows it can end at
        another optimum than the fit's.
    loadings_mean_, loadings_mean_log_ : ndarray of shape (n_samples, n_components)
        Posterior ``E[l_ik]`` and ``E[log l_ik]`` of the training rows.
    components_mean_, components_mean_log_ : ndarray of shape (n_components, n_features)
        Posterior ``E[f_jk]`` and ``E[log f_jk]``, transposed.
    prior_loadings_, prior_components_ : dict of ndarray
        The fitted priors, each ``pi0 delta_0 + sum_m weights[k, m] Gamma(shape[k, m],
        rate[k, m])`` for component ``k``: keys ``"pi0"`` (n_components,), ``"weights"``,
        ``"shape"``, ``"rate"`` (n_components, n_mix).
    kl_loadings_, kl_components_ : ndarray of shape (n_components,)
        ``KL(q_L,k || g_L,k)`` and ``KL(q_F,k || g_F,k)`` at the end of the fit.
    lower_bound_ : float
        The final ELBO (eq. 3.20, including ``-sum log X_ij!``), of the last iteration:
        before the features without counts get their empirical-Bayes ``f0_`` (above),
        which the ELBO of the returned attributes includes; after :meth:`partial_fit`, the
        last batch's ELBO per row.
    reconstruction_err_ : float
        ``sqrt(2 D_KL(X || loadings_ @ components_))``, the Poisson deviance's square root:
        scikit-learn's NMF's ``reconstruction_err_`` with ``beta_loss="kullback-leibler"``.
    solver_ : {"sequential", "simultaneous"}
        The solver of the last :meth:`fit`: ``solver``, or what ``"auto"`` chose for its
        counts. Set by :meth:`fit` only.
    objective_history_ : ndarray of shape (``n_iter_``,)
        The ELBO after each iteration; after :meth:`partial_fit`, each batch's ELBO per row
        before its step, with the batch's rows fitted by the local step (at most a few
        sweeps, not :meth:`score`'s fit of the rows to convergence).
    validation_scores_ : ndarray of shape (``n_iter_``,) or None
        With ``X_val``, the held-out counts' Poisson log-likelihood per entry after each kept
        iteration, under the fitted means times their depth ``X_val.sum() / X.sum()``
        (``poisson_loglik(X_val, users=..., depth=...)``); None without. Rows of ``X_val``
        whose row of X has no count are left out of both (with a warning).
    converged_ : bool
        Whether the last fit met ``tol`` (or, with ``X_val``, stopped at its best held-out
        score); False after an interruption.
    n_iter_ : int
        Number of iterations run by the last call to ``fit`` (with ``X_val``, the iteration
        kept, whose held-out score was the best); after :meth:`partial_fit`, the number of
        its calls since the first or since ``fit``.
    n_features_in_ : int
        Number of features seen during fit.
    feature_names_in_ : ndarray of shape (``n_features_in_``,)
        Names of features seen during fit, when ``X`` has string column names.

    See Also
    --------
    sklearn.decomposition.NMF : Maximum-likelihood Poisson NMF (``beta_loss="kullback-leibler"``).

    References
    ----------
    Z. Wang, "Algorithm for PMF background model with weights" (EBPMF-WBG), with the R
    packages ebpmf.alpha (``ebpmf_wbg``) and ebpm (the EBPM solvers), Stephens lab.

    Y. Kim, P. Carbonetto, M. Stephens and M. Anitescu, "A fast algorithm for maximum
    likelihood estimation of mixture proportions using sequential quadratic programming",
    Journal of Computational and Graphical Statistics 29 (2020).

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_cogaps import WeightedBackgroundPMF
    >>> rng = np.random.RandomState(0)
    >>> X = rng.poisson(2.0, size=(30, 20))
    >>> model = WeightedBackgroundPMF(n_components=2, max_iter=20, random_state=0).fit(X)
    >>> model.transform(X).shape
    (30, 2)
    >>> bool(np.all(np.diff(model.objective_history_) > -1e-6 * abs(model.lower_bound_)))
    True
    """

    _fit_advice = "WeightedBackgroundPMF(n_components=K).fit(X)"

    _renamed_parameters = {"prior_factors": "prior_components"}
    _renamed_attributes = {
        "lower_bounds_": ("objective_history_", False),
        "factors_mean_": ("components_mean_", True),
        "factors_mean_log_": ("components_mean_log_", True),
        "prior_factors_": ("prior_components_", False),
        "kl_factors_": ("kl_components_", False),
    }

    _row_attributes = _ROW_ATTRIBUTES
    _objective_name = "ELBO"
    _maximise = True

    _peer_parameters = {
        # the Poisson factorisations' users come from hpfrec and scHPF too
        **PEER_RUN_PARAMETERS,
        **dict.fromkeys(
            [
                "a",
                "b",
                "c",
                "d",
                "a_prime",
                "b_prime",
                "c_prime",
                "d_prime",
                "ap",
                "bp",
                "cp",
                "dp",
            ],
            (
                "hpfrec and scHPF",
                "prior_loadings=... and prior_components=... (EBPM families "
                "whose parameters are fitted, not set)",
            ),
        ),  # fmt: skip
        "K": ("R ebpmf", "n_components=K"),
        "maxiter": ("R ebpmf", "max_iter=N"),
        **dict.fromkeys(
            ["ebpm_fn", "pm_func"],
            (
                "R ebpmf",
                "prior_loadings=... and prior_components=... (one of "
                "'gamma_mixture', 'gamma', 'point_gamma', 'exponential_mixture')",
            ),
        ),
        "seed": ("R ebpmf", "random_state=seed"),
        "fix_option": (
            "R ebpmf",
            "init='custom' with fit(X, W=..., H=...) to start from given factors; nothing "
            "holds a factor fixed during the fit",
        ),
        "pm_control": (
            "R ebpmf",
            "nothing: the prior solvers run to their tolerance (mix-SQP's KKT conditions)",
        ),
        "Kmax": (
            "R ebpmf",
            "n_components=K: the fit neither adds nor drops topics (choose K by "
            "GridSearchCV over n_components, whose score is the held-out bound)",
        ),
        "fix_g": (
            "R ebpmf",
            "nothing: the priors are always fitted (empirical Bayes); to start from given "
            "factors, init='custom' with fit(X, W=..., H=...)",
        ),
        "init_tol": (
            "R ebpmf",
            "nothing: the start is a fixed number of KL-NMF iterations (init='nmf'), or "
            "your own factors with init='custom' and fit(X, W=..., H=...)",
        ),
    }

    # R ebpm's prior families that this estimator lacks, and the closest one it has
    _peer_families = {
        "point_exponential": "'point_gamma' (a point mass at 0 and a gamma, of which the "
        "exponential is the shape-1 case) or 'exponential_mixture'",
        "two_gamma": "'gamma_mixture' (a mixture on a grid of gammas)",
        "gamma_mixture_single_scale": "'gamma_mixture' (its grid of gammas of mean 1)",
        "mle_pm": "'gamma' (a fitted prior in place of no prior)",
    }

    def _validate_params(self):
        if hasattr(self.init, "get_params") or isinstance(self.init, (dict, list, tuple)):
            from sklearn.utils._param_validation import InvalidParameterError

            raise InvalidParameterError(
                "init takes 'nmf' or 'custom', not a fit (R ebpmf's init = fit). To continue "
                "a fitted model, fit it again with warm_start=True (model.set_params("
                "warm_start=True).fit(X)); to start from given factors, init='custom' "
                "with fit(X, W=..., H=...)."
            )
        if isinstance(self.init, str) and self.init == "fasttopics":
            from sklearn.utils._param_validation import InvalidParameterError

            raise InvalidParameterError(
                "init='fasttopics' is R ebpmf's start by fastTopics' Poisson NMF; write "
                "init='nmf', its KL-NMF iterations (the same objective), or init='custom' "
                "with fit(X, W=..., H=...) to start from factors you computed."
            )
        for name in ("prior_loadings", "prior_components", "prior_factors"):
            family = given = getattr(self, name)
            # prior_factors is prior_components' former name: advised under the new one
            target = self._renamed_parameters.get(name, name)
            if isinstance(family, str) and family.startswith("ebpm_"):
                # R's function names: ebpm_point_gamma is the family 'point_gamma'
                from sklearn.utils._param_validation import InvalidParameterError

                bare = family[len("ebpm_") :]
                if bare in EBPM_FAMILIES:
                    raise InvalidParameterError(
                        f"{name}={family!r} is R ebpm's function; write {target}={bare!r}."
                    )
                family = bare
            if isinstance(family, str) and family in self._peer_families:
                from sklearn.utils._param_validation import InvalidParameterError

                raise InvalidParameterError(
                    f"{name}={given!r} is a prior family of R's ebpm that this estimator "
                    f"does not fit; the closest it has is {self._peer_families[family]}. "
                    f"Its families: {', '.join(map(repr, EBPM_FAMILIES))}."
                )
        super()._validate_params()

    # R ebpmf_wbg's results, read on a fitted model
    _peer_methods = {
        **HPFREC_METHODS,
        "l0": ("R ebpmf", "l0_"),
        "f0": ("R ebpmf", "f0_"),
        "w": ("R ebpmf", "w_"),
        "EL": ("R ebpmf", "loadings_mean_ (E[l_ik]; loadings_ holds l0_i E[l_ik])"),
        "EF": ("R ebpmf", "components_mean_.T (E[f_jk]; components_ holds w_k f0_j E[f_jk])"),
        "ELBO": ("R ebpmf", "objective_history_ (the trace) or lower_bound_ (the last)"),
        "KL": (
            "R ebpmf",
            "kl_loadings_ and kl_components_ (each topic's KL of its posterior from its "
            "prior, at the end of the fit)",
        ),
        "qg": (
            "R ebpmf",
            "loadings_mean_ (qls_mean), components_mean_.T (qfs_mean), their _log "
            "attributes, and prior_loadings_, prior_components_ (gls, gfs)",
        ),
    }

    _negative_input_advice = COUNTS_ADVICE
    _missing_value_advice = MISSING_COUNTS_ADVICE
    _masked_advice = MASKED_COUNTS_ADVICE
    _reconstruction_beta = 1

    _parameter_constraints: dict = {
        "n_components": [Interval(Integral, 1, None, closed="left")],
        "prior_loadings": [StrOptions(set(EBPM_FAMILIES))],
        "prior_components": [StrOptions(set(EBPM_FAMILIES))],
        "solver": [StrOptions({"auto", "sequential", "simultaneous"})],
        "max_iter": [Interval(Integral, 1, None, closed="left")],
        "tol": [Interval(Real, 0, None, closed="left")],
        "init": [StrOptions({"nmf", "custom"})],
        "random_state": ["random_state"],
        "verbose": ["verbose"],
        "warm_start": ["boolean"],
        "n_init": [Interval(Integral, 1, None, closed="left")],
        "n_iter_no_change": [Interval(Integral, 1, None, closed="left")],
        "step_exponent": [Interval(Real, 0.0, 1.0, closed="right")],
        "total_samples": [Interval(Integral, 1, None, closed="left"), None],
        "prior_factors": [StrOptions(set(EBPM_FAMILIES)), Hidden(StrOptions({"deprecated"}))],
    }

    def __init__(
        self,
        n_components=5,
        *,
        prior_loadings="gamma_mixture",
        prior_components="gamma_mixture",
        solver="auto",
        max_iter=100,
        tol=1e-8,
        init="nmf",
        random_state=None,
        verbose=0,
        warm_start=False,
        n_init=1,
        n_iter_no_change=20,
        step_exponent=0.6,
        total_samples=None,
        prior_factors="deprecated",
    ):
        self.n_components = n_components
        self.prior_loadings = prior_loadings
        self.prior_components = prior_components
        self.solver = solver
        self.max_iter = max_iter
        self.tol = tol
        self.init = init
        self.random_state = random_state
        self.verbose = verbose
        self.warm_start = warm_start
        self.n_init = n_init
        self.n_iter_no_change = n_iter_no_change
        self.step_exponent = step_exponent
        self.total_samples = total_samples
        self.prior_factors = prior_factors

    # ------------------------------------------------------------------ helpers
    def _validate_counts(self, X, reset):
        X = validate_input(
            self,
            X,
            accept_sparse=("csr", "csc", "coo"),
            dtype=[np.float64, np.float32],
            ensure_non_negative=True,
            reset=reset,
        )
        # the caller's arrays are read in place when already canonical: a copy is one more
        # CSR size of memory
        X = canonical_csr(X)
        # its total, and a warning on fractions as HierarchicalPMF's (and as out of core)
        self._check_values(X.shape, False, X.data, has_fractions(X.data))
        return X

    def _initial_factors(self, X, W, H, rng, random_nmf=False, short=False):
        n, p = X.shape
        K = self.n_components
        if self.init == "custom":
            if W is None or H is None:
                raise ValueError(
                    "init='custom' needs the initial factors: call fit(X, W=..., H=...) "
                    f"with W of shape {(n, K)} and H of shape {(K, p)}."
                )
            for name, value in (("W", W), ("H", H)):
                check_not_masked(value, name)
                if sparse.issparse(value):
                    raise ValueError(
                        f"{name} must be dense; got a sparse matrix. Pass {name}.toarray()."
                    )
            W = np.array(W, dtype=np.float64)
            H = np.array(H, dtype=np.float64)
            if W.shape != (n, K):
                raise ValueError(
                    f"W must have shape (n_samples, n_components) = {(n, K)}; got {W.shape}."
                )
            if H.shape != (K, p):
                raise ValueError(
                    f"H must have shape (n_components, n_features) = {(K, p)}; got {H.shape}."
                )
            if not (np.all(np.isfinite(W)) and np.all(np.isfinite(H))):
                raise ValueError("W and H must be finite.")
            if W.min() < 0 or H.min() < 0:
                raise ValueError(
                    f"W and H must be non-negative; got minima {W.min()} and {H.min()}."
                )
            return W, H.T.copy()
        if W is not None or H is not None:
            raise ValueError(f"W and H are used only with init='custom'; got init={self.init!r}.")
        length = _N_INIT_NMF_LARGE if short else _N_INIT_NMF
        return kl_nmf(X, K, length, draw_seeds(rng) % (2**32), random_nmf)

    def _solver_for(self, families, X):
        """``solver="auto"``: the simultaneous updates on counts of at least
        ``_LARGE_NNZ`` stored values when both priors are mixtures on a grid, whose
        iterations it screens; there they reached the sequential updates' bound in fewer
        seconds and no more iterations. Otherwise Algorithm 3.1's sequential updates, R's
        ``ebpmf_wbg``'s: with a gamma family the simultaneous updates needed up to ten
        times the iterations, and on small counts an iteration costs milliseconds either
        way (doc/wbpmf.rst, "Topic updates")."""
        if self.solver != "auto":
            return self.solver
        if _is_large(X) and all(family in GRID_FAMILIES for family in families):
            return "simultaneous"
        return "sequential"

    # -- the fitting loop's hooks ------------------------------------------------------------

    def _initialise(self, problem, rng):
        # NNDSVDa is deterministic: the later of n_init starts are KL-NMF from random factors
        problem.n_started += 1
        # solver="simultaneous" keeps the start's CSC copy of the counts for its passes
        X = problem.X if problem.sweeps else problem.counts
        # the simultaneous solver on large counts starts from fewer KL-NMF iterations, which
        # cost it 0.5 to 1 of its own there; the sequential solver keeps R's 50
        L, F = self._initial_factors(X, problem.W, problem.H, rng,
                                     random_nmf=problem.n_started > 1,
                                     short=not problem.sweeps and _is_large(X))  # fmt: skip
        problem.release_columns()  # a later start of n_init made them again
        return _FitState(problem, FitState.start(L, F, *problem.families))

    def _warm_start_mismatch(self, problem):
        n, p = problem.X.shape
        if "_svi_state" in self.__dict__:  # partial_fit: no rows, any number of them
            if isinstance(problem.X, (BlockCounts, DaskCounts)):
                return ("the model was last updated by partial_fit, and the rows of an "
                        "out-of-core X are not started from it; fit X in memory")  # fmt: skip
            previous = (n, *self.components_mean_.shape[::-1])
        else:
            previous = (self.loadings_mean_.shape[0], *self.components_mean_.shape[::-1])
        if previous != (n, p, self.n_components):
            return (f"X has shape {(n, p)} and n_components={self.n_components}, the "
                    f"previous fit had {previous[:2]} and {previous[2]}")  # fmt: skip
        families = getattr(self, "_fit_families", None)
        if families != problem.families:
            return (f"the prior families are {problem.families}, the previous fit had "
                    f"{families}")  # fmt: skip
        if "_svi_state" not in self.__dict__:
            # a row or column without counts in the previous fit has background 0 in its
            # state (l0_i = 0 at the maximum likelihood; f0_j kept at 0 in the fit's state):
            # its counts now would have no mean to update from
            rows = np.flatnonzero((np.asarray(self.l0_) == 0) & (problem.x_rows > 0))
            unseen = self.__dict__.get("_unseen_state", (np.empty(0, dtype=np.intp),))[0]
            if unseen.size:
                # out of core, a pass of its own: x_cols would make the sweeps (and let go
                # of the columns that a new start, if this one is refused, reads)
                out_of_core = isinstance(problem.X, (BlockCounts, DaskCounts))
                sums = column_sums(problem.X) if out_of_core else problem.x_cols
                unseen = unseen[sums[unseen] > 0]
            cols = unseen
            if rows.size or cols.size:
                first = f"row {rows[0]}" if rows.size else f"column {cols[0]}"
                return (f"X has counts in {rows.size} row(s) and {cols.size} column(s) that "
                        f"had none in the previous fit (the first: {first}), whose state "
                        "has no background there to continue from")  # fmt: skip
        return None

    def _continue(self, problem):
        """Copies of the previous fit's state; after ``partial_fit``, its globals with the
        rows of X at their local step's fixed point."""
        keys = ("pi0", "weights", "shape", "rate")
        Ef, Elogf = self._feature_moments()
        svi = self.__dict__.get("_svi_state")
        if svi is not None:
            # the fitted features (those without counts so far at their empirical-Bayes
            # scales), the rows of X at the local step
            _, _, l0, El, Elogl, kl = self._local_step(problem.X)
            g = svi.globals
            return _FitState(problem, FitState(*copy.deepcopy((
                self.w_, l0, self.f0_, El, Ef, Elogl, Elogf, g.gL, g.gF, kl.sum(axis=0),
                self.kl_components_,
            ))))  # fmt: skip
        # the features without counts as the fit left them, not at their fitted scales: a
        # fit of n iterations continued by m is then the fit of n + m
        f0 = self.f0_.copy()
        unseen_state = self.__dict__.get("_unseen_state")
        if unseen_state is not None:
            Ef, Elogf = Ef.copy(), Elogf.copy()  # with one component, views of the attributes
            unseen, f0[unseen], Ef[unseen], Elogf[unseen] = unseen_state
        state = _FitState(problem, FitState(*copy.deepcopy((
            self.w_, self.l0_, f0, self.loadings_mean_, Ef, self.loadings_mean_log_,
            Elogf, tuple(self.prior_loadings_[k] for k in keys),
            tuple(self.prior_components_[k] for k in keys), self.kl_loadings_,
            self.kl_components_,
        ))))  # fmt: skip
        # the screening's cycle goes on where the fit left it, so that a fit of n iterations
        # continued by m is the fit of n + m (a new cycle would put a whole-grid iteration
        # where the longer fit screened one)
        state.screened_run = self.__dict__.get("_screened_run")
        # tol tests the first iteration against it, as the longer fit tested it against
        # the one before (after partial_fit the rows start from their local step: no bound)
        state.bound = self.lower_bound_
        return state

    def _start_objective(self, state):
        return state.bound

    def _iterate(self, state, iteration):
        p = state.problem
        if not p.sweeps:  # solver="simultaneous"
            near = self._screens(state)
            value, p.ahead = iterate_simultaneous(
                state.fit, p.counts, p.ahead, p.x_rows, p.x_cols, p.const, *p.families,
                p.pass_threads(self.n_components), p.solve_threads(self.n_components), near,
            )  # fmt: skip
            state.screened = near
            state.screened_run = state.screened_run + 1 if near else 0
            return value
        return iterate(state.fit, p.sweeper, p.x_rows, p.x_cols, p.const, *p.families)

    @staticmethod
    def _screens(state):
        """Whether the next iteration of solver="simultaneous" is screened: with a grid
        prior, after one over the whole grid and fewer than ``_SCREENED_RUN`` screened
        since. A screened iteration computes the likelihoods of the components next to
        each prior's support only, where the whole grid's cost about as much as the passes
        over the counts; it still raises the bound (``ebpm_mixture_near``), and the
        iterations over the whole grid let the support reach any component."""
        run = state.screened_run
        if _SCREENED_RUN is None or run is None or run >= _SCREENED_RUN:
            return False
        return any(family in GRID_FAMILIES for family in state.problem.families)

    def _monitored(self, state, value):
        # the convergence test reads whether the iteration was screened
        return value, state

    def _has_converged(self, previous, current):
        """``tol`` met after an iteration over the whole grid: met after a screened one,
        the next iteration is over the whole grid, and the fit stops only if ``tol`` holds
        there too (a component off the screened face may still raise the bound)."""
        (before, _), (value, state) = previous, current
        if not super()._has_converged(before, value):
            return False
        if state.screened:
            state.screened_run = _SCREENED_RUN
            return False
        return True

    def _validation_score(self, state):
        held = state.problem.held
        if held is None:
            return None
        s = state.fit
        # the features without a training count get the scales the fitted model would give
        # them (unseen_features): with f0_j = 0 a held-out count there scored -inf at every
        # iteration, and the fit stopped at its first as if it were the best
        f0, Ef, _ = unseen_features(state.problem.x_cols, s.w, s.l0, s.f0, s.El, s.Ef,
                                    s.Elogf, s.gF)  # fmt: skip
        # loadings_ @ components_ of this state (Wang: l0_i f0_j sum_k w_k E l_ik E f_jk)
        W = s.l0[:, None] * s.El
        H = s.w[:, None] * (f0[:, None] * Ef).T
        return held.score(W, H)

    def _snapshot(self, state, iteration):
        if iteration == 0:
            return None  # nothing complete: an interruption leaves the estimator as it was
        snapshot = _FitState(state.problem, copy.deepcopy(state.fit))
        # with the screening's place, which a warm start after an interruption continues
        snapshot.screened, snapshot.screened_run = state.screened, state.screened_run
        return snapshot

    # ---------------------------------------------------------------------- fit
    @_fit_context(prefer_skip_nested_validation=True)
    @peer_arguments(_HPFREC_FIT_ARGUMENTS, example="fit(X_train, X_val=X_held)")
    def fit(self, X, y=None, *, W=None, H=None, X_val=None):
        """Fit the model to the counts ``X``.

        Parameters
        ----------
        X : {array-like, sparse matrix, AnnData} of shape (n_samples, n_features)
            Non-negative counts (non-integer values are accepted). An AnnData contributes
            its ``.X``.
        y : Ignored
            Not used, present for API consistency. A second positional array of the shape
            of X is refused.
        W : array-like of shape (n_samples, n_components), default=None
            Initial loadings, with ``init="custom"``.
        H : array-like of shape (n_components, n_features), default=None
            Initial factors, with ``init="custom"``.
        X_val : {array-like, sparse matrix} of shape (n_samples, n_features), default=None
            Held-out counts of the same rows, for early stopping on their Poisson
            log-likelihood per entry (``validation_scores_``), as in
            :meth:`HierarchicalPMF.fit`.

        Returns
        -------
        self : object
            The fitted estimator.
        """
        check_ignored_y(self, y, X, advice=_NO_SIDE_INPUT)
        # labelled starts are read by position: their samples and features must be X's
        check_side_labels(X, "W", W, axes=("row",))
        check_side_labels(X, "H", H, axes=("column",))
        check_side_labels(X, "X_val", X_val)
        given, (dtype, X) = X, self._read_counts(X, reset=True)
        warn_fit_only_parameters(self, X_val)
        # The EBPM solvers work on (n x grid) matrices: BLAS threads only add overhead there.
        held = self._held_out_counts(X_val, X)
        with threadpool_limits(limits=1, user_api="blas"):
            self._fit(X, W, H, held)
        self._cast_fitted(dtype)
        self._keep_row_labels(given)
        return self

    def _fit(self, X, W, H, held=None):
        total = X.total if isinstance(X, (BlockCounts, DaskCounts)) else X.sum()
        if not total > 0:
            raise ValueError(
                "X has no positive entry; the Poisson model needs at least one non-zero count."
            )
        rng = check_random_state(self.random_state)
        families = (self.prior_loadings, self._parameter("prior_components"))
        solver = self._solver_for(families, X)
        problem = _Problem(X, W, H, effective_n_threads(), families, held,
                           sweeps=solver == "sequential")  # fmt: skip
        try:
            start = self._warm_state(problem)
            run = (
                self._fit_from(start)
                if start is not None
                else self._best_run(problem, rng, self.n_init)
            )
        finally:
            problem.close()
        self._end_run(run)
        s = run.state.fit
        self._set_globals(s, problem.x_cols, problem.families)
        self.solver_ = solver
        self._screened_run = run.state.screened_run
        # the state of the features without counts, which the fitted attributes give their
        # empirical-Bayes scales instead (unseen_features): what a warm start continues from
        unseen = np.flatnonzero(problem.x_cols <= 0)
        self._unseen_state = (unseen, s.f0[unseen], s.Ef[unseen], s.Elogf[unseen])
        l0, El = s.l0, s.El
        self.l0_ = l0
        self.loadings_ = l0[:, None] * El
        self.loadings_mean_ = El
        self.loadings_mean_log_ = s.Elogl
        self.kl_loadings_ = s.kl_L
        self.objective_history_ = np.asarray(run.history)
        self.validation_scores_ = None if held is None else np.asarray(run.validation)
        self.lower_bound_ = float(run.history[-1])
        self._set_reconstruction_err(X)
        # what a later partial_fit continues from: the sums over the fit's rows that its
        # last iteration read (doc/wbpmf.rst, "Stochastic variational inference")
        self.__dict__.pop("_svi_state", None)
        self._fit_statistics = (
            None if s.y_cols is None else ColumnStatistics(s.y_cols, l0 @ El, problem.x_cols)
        )
        return self

    def _set_globals(self, s, x_cols, families):
        """The fitted attributes of the features, the weights and the priors, from the state
        ``s`` (with ``w``, ``f0``, ``Ef``, ``Elogf``, ``gL``, ``gF``, ``kl_F``) and the
        columns' totals: the features without counts get their empirical-Bayes scales."""
        f0, Ef, Elogf = unseen_features(x_cols, s.w, s.l0, s.f0, s.El, s.Ef, s.Elogf, s.gF)
        w = s.w
        if np.any(w == 0):
            warn(
                f"Components {np.flatnonzero(w == 0).tolist()} collapsed (weight w_k = 0: they "
                "explain no count); refit with fewer n_components or another initialisation.",
                RuntimeWarning,
            )
        self.w_ = w
        self.f0_ = f0
        self.components_mean_ = np.ascontiguousarray(Ef.T)
        self.components_mean_log_ = np.ascontiguousarray(Elogf.T)
        keys = ("pi0", "weights", "shape", "rate")
        self.prior_loadings_ = dict(zip(keys, s.gL))
        self.prior_components_ = dict(zip(keys, s.gF))
        self.kl_components_ = s.kl_F
        self.components_ = (w[:, None] * (f0[:, None] * Ef).T).copy()
        self._fit_families = families

    # ----------------------------------------------------------- partial_fit
    @_fit_context(prefer_skip_nested_validation=True)
    def partial_fit(self, X, y=None, **hpfrec_arguments):
        """One step of stochastic variational inference on a batch of rows.

        Each row of the batch gets its background ``l0_i`` and ``q(l_i)`` given the features
        (from the rows' maximum-likelihood loadings, a few sweeps of :meth:`transform`'s
        coordinate ascent), then the sums over rows that the globals
        read (the columns' expected counts per topic, ``sum_i l0_i E[l_ik]``, the columns'
        totals) move a step ``(t + 2) ** -step_exponent`` towards the batch's sums times
        the ``total_samples`` rows it stands for; ``q(f)``, ``g_F``, ``w`` and ``f0`` are
        the batch algorithm's updates of these averages, and ``g_L`` moves the same step
        towards the batch rows' EBPM estimate (``doc/wbpmf.rst``, "Stochastic variational
        inference"). The first call starts the model on its batch as ``fit`` would (the
        KL-NMF start and one iteration); a call after ``fit`` continues the fitted model.
        The model keeps no rows: get them with :meth:`transform`. Give batches of similar
        sizes: every batch gets a full step.

        Parameters
        ----------
        X : {array-like, sparse matrix, AnnData} of shape (n_samples, n_features)
            The batch: whole rows of counts. An out-of-core source is read block by block,
            checked, and held in memory as one batch.
        y : Ignored
            Not used, present for API consistency.
        **hpfrec_arguments
            Refused, with what to write instead: hpfrec's ``partial_fit`` arguments
            (``nusers``, ``step_size``...) are parameters here, or have no use.

        Returns
        -------
        self : WeightedBackgroundPMF
            The updated estimator.
        """
        refuse_hpfrec_arguments(self, hpfrec_arguments)
        # every call (scikit-learn validates the first only): set_params may have changed them
        self._validate_params()
        check_ignored_y(self, y, X, method="partial_fit",
                        advice="partial_fit the counts alone, call partial_fit(X)")  # fmt: skip
        first = not self.__sklearn_is_fitted__()
        if first and self.init == "custom":
            raise ValueError(
                "partial_fit starts the model on its first batch from KL-NMF: set init='nmf', "
                "or fit(X, W=..., H=...) with init='custom' first and continue it with "
                "partial_fit."
            )
        self._check_batch(first, 0)
        dtype, batch = self._batch(X, reset=first)
        self._check_batch(first, batch.shape[0])
        if not first:  # the model keeps the dtype it started with, whatever the batch's
            dtype = self.components_.dtype
        families = (self.prior_loadings, self._parameter("prior_components"))
        fitted = getattr(self, "_fit_families", None)
        if not first and fitted is not None and fitted != families:
            raise ValueError(
                f"The prior families are {families}, but the model being updated has "
                f"{fitted}. partial_fit continues the fitted priors; set prior_loadings and "
                "prior_components back, or call fit to start a model with the new ones."
            )
        with threadpool_limits(limits=1, user_api="blas"):
            if first:
                return self._start_on_batch(batch, dtype, families)
            return self._svi_step(batch, dtype, families)

    def _batch(self, X, reset):
        """The dtype of the results and the batch as checked canonical CSR, read block by
        block when out of core."""
        if not is_out_of_core(X):
            return data_dtype(X), self._validate_counts(X, reset)
        blocks = RowBlocks(X, group_chunks=True)
        if not reset:
            out_of_core_features(self, X, blocks.shape[1], reset=False)
        parts, fractions = [], False
        for a, block in blocks:
            fractions = _check_block(self, block, a) or fractions
            parts.append(block)
        batch = parts[0] if len(parts) == 1 else sparse.vstack(parts, format="csr")
        self._check_values(batch.shape, reset and batch.nnz == 0, batch.data, fractions)
        if reset:
            out_of_core_features(self, X, batch.shape[1], reset=True)
        return _source_dtype(X), canonical_csr(batch)

    def _start_on_batch(self, batch, dtype, families):
        """The first call: the fit's start on the batch and one iteration."""
        if not batch.sum() > 0:
            raise ValueError(
                "X has no positive entry; the Poisson model needs at least one non-zero count."
            )
        rng = check_random_state(self.random_state)
        problem = _Problem(batch, None, None, effective_n_threads(), families)
        state = self._initialise(problem, rng).fit
        iterate(state, problem.sweeper, problem.x_rows, problem.x_cols, problem.const, *families)
        # the batch's ELBO per row with the features fixed (its score), as the later calls
        # report theirs: the fit's ELBO less the features' KL
        n_batch = batch.shape[0]
        rows, cols = elbo_rows(problem.sweeper, problem.x_rows, problem.x_cols, state.w,
                               state.l0, state.f0, state.El, state.Ef, state.Elogl,
                               state.Elogf)  # fmt: skip
        bound = float(np.sum(rows) + cols - np.sum(state.kl_L) - problem.const) / n_batch
        n_rows = self.total_samples if self.total_samples is not None else n_batch
        stats = ColumnStatistics(state.y_cols, state.l0 @ state.El, problem.x_cols)
        svi = _SVIState(state, stats.scaled(n_rows / n_batch), 1, n_batch)
        self._end_svi_step(svi, families, [], bound, dtype)
        return self

    def _svi_step(self, batch, dtype, families):
        """A later call: the local step, then the global step (``_wbpmf_svi``)."""
        n_batch = batch.shape[0]
        svi = self.__dict__.get("_svi_state")
        if svi is None:  # continue a fit, as if its rows had come in batches of this size
            svi = _SVIState.of_fit(self, n_batch)
            history = []
        else:
            self._warn_small_batch(n_batch, svi.seen, svi.steps)
            svi = copy.deepcopy(svi)  # an interrupted call leaves the estimator as it was
            history = list(self.objective_history_)
        seen = svi.seen + n_batch
        rho = (svi.steps + 2.0) ** -self.step_exponent
        n_rows = self.total_samples if self.total_samples is not None else seen
        sweeper, x_rows, l0, El, Elogl, kl = self._local_step(batch)
        Elogf = self._feature_moments()[1]
        stats, Z = batch_statistics(sweeper, self.w_, l0, El, Elogl, Elogf)
        # the batch's ELBO per row before the step, as score(batch) sums it (the rows from
        # the local step rather than transform's)
        rows = self._row_elbo(sweeper, x_rows, l0, El, Elogl, kl)
        with np.errstate(divide="ignore", invalid="ignore"):
            cols = np.sum(np.where(stats.x > 0, stats.x * np.log(self.f0_), 0.0))
        log_factorial = row_entry_sums(compressed(batch))[0]
        bound = float(np.sum(rows) + cols - np.sum(log_factorial)) / n_batch
        svi.stats = svi.stats.blend(stats.scaled(n_rows / n_batch), rho)
        global_step(svi.stats, Z, l0, svi.globals, rho, families)
        svi.steps, svi.seen = svi.steps + 1, seen
        self._end_svi_step(svi, families, history, bound, dtype)
        return self

    def _local_step(self, batch):
        """The batch rows' ``l0`` and ``q(l)`` given the features: coordinate ascent from
        their maximum-likelihood loadings (transform's search among fixed points is left
        out, as HierarchicalPMF's stochastic step leaves it out), plain sweeps: a few
        sweeps to a loose tolerance, where an extrapolation has little to gain."""
        sweeper = _Sweeper(batch, effective_n_threads())
        x_rows = np.asarray(batch.sum(axis=1)).ravel()
        start = self._ml_start(sweeper)
        fit = self._sweep_rows(sweeper, x_rows, start, _SVI_LOCAL_TOL, _SVI_LOCAL_SWEEPS,
                               extrapolate=False)  # fmt: skip
        return (sweeper, x_rows, *fit)

    def _end_svi_step(self, svi, families, history, bound, dtype):
        """Set the globals of ``svi`` and the trace; remove the training rows' attributes."""
        self._drop_row_attributes()
        self.__dict__.pop("_fit_statistics", None)
        self._set_globals(svi.as_state(), svi.stats.x, families)
        self._svi_state = svi
        self.objective_history_ = np.asarray(history + [bound], dtype=np.float64)
        self.lower_bound_ = float(bound)
        self.n_iter_ = self.objective_history_.size
        self.converged_ = False
        self.components_ = self.components_.astype(dtype, copy=False)

    # ---------------------------------------------------------------- transform
    def _fit_rows(self, X):
        """Fit l0 and q(l) of new rows with the feature side held fixed.

        A row's ELBO is not concave in q(l): under a mixture prior with mass near 0, a topic
        ends on, off or barely on depending on where the row starts. Each row is therefore
        fitted from three deterministic starts, in turn, and keeps the solution with the
        higher ELBO (rows are independent, so the choice is exact, row by row):

        - ``E[l_ik] = 1``, ``E[log l_ik] = 0``, the same for every row;
        - the row's maximum-likelihood loadings under the fixed features (:meth:`_ml_start`),
          as the fit starts from KL-NMF;
        - the better of these two with the topics that explain less than one count of the
          row switched off (``E[l_ik] = 0``; the row's largest topic is kept), for the rows
          that have such topics. Such a topic settles at a small loading (about a third of a
          count under the default prior) although switching it off is better: once off, it
          is allotted no count and the prior's mass near 0 keeps it off, a fixed point that
          the fit reaches but the other two starts do not;
        - then, topic by topic, the better fit with that topic switched off, for the rows
          where it holds at most ``_SEARCH_SHARE`` of the row's expected counts (not the
          largest): a topic can hold a few counts (3 to 9 of about 100 in
          ``test_transform_finds_the_rows_where_a_topic_of_a_few_counts_is_off``) at a
          fixed point 2 to 5 nats below the one where it is off. On ``load_digits`` the
          search raises the mean ELBO of new rows by 1.4 nats, at 3.8 times the time
          (``doc/wbpmf.rst``).
        """
        n_threads = effective_n_threads()
        sweeper = _Sweeper(X, n_threads)
        x_rows = np.asarray(X.sum(axis=1)).ravel()
        every = np.arange(X.shape[0])
        fit = self._sweep_rows(sweeper, x_rows, np.ones((X.shape[0], self.n_components)))
        self._keep_better(fit, every, sweeper, x_rows, self._ml_start(sweeper))
        Ef, _ = self._feature_moments()
        colw = self.w_ * (self.f0_ @ Ef)
        counts = fit[0][:, None] * fit[1] * colw
        off = (counts < 1) & (counts < counts.max(axis=1, keepdims=True))
        self._try_switched_off(fit, X, x_rows, off, n_threads)
        # the same for each topic alone that holds a small share of its row
        for k in range(self.n_components):
            counts = fit[0][:, None] * fit[1] * colw
            total = counts.sum(axis=1)
            off = np.zeros_like(counts, dtype=bool)
            off[:, k] = (counts[:, k] > 0) & (counts[:, k] <= _SEARCH_SHARE * total)
            if not _SEARCH_LARGEST:
                off[:, k] &= counts[:, k] < counts.max(axis=1)
            self._try_switched_off(fit, X, x_rows, off, n_threads)
        return (sweeper, x_rows, *fit)

    def _try_switched_off(self, fit, X, x_rows, off, n_threads):
        """Fit the rows that have a topic in ``off`` from their current ``E[l]`` with those
        topics at 0, and keep the better fit of each."""
        rows = np.flatnonzero(off.any(axis=1))
        if rows.size:
            self._keep_better(fit, rows, _Sweeper(X[rows], n_threads), x_rows[rows],
                              np.where(off[rows], 0.0, fit[1][rows]))  # fmt: skip

    def _keep_better(self, fit, rows, sweeper, x_rows, El):
        """Fit ``rows`` (whose sweeper and sums are given) from ``El`` and keep, in place in
        ``fit``, the rows where that gives a higher ELBO."""
        new = self._sweep_rows(sweeper, x_rows, El)
        old = tuple(a[rows] for a in fit)
        better = self._row_elbo(sweeper, x_rows, *new) > self._row_elbo(sweeper, x_rows, *old)
        for a, b in zip(fit, new):
            a[rows[better]] = b[better]

    def _ml_start(self, sweeper):
        """``E[l]`` at the rows' maximum-likelihood loadings, with the features fixed.

        With q(l) a point mass and no prior, the rows' bound ``sum_j X_ij log sum_k w_k l_ik
        exp(E[log f_jk]) - sum_k l_ik w_k sum_j f0_j E[f_jk]`` is concave in ``l``;
        ``_ML_ITER`` multiplicative (EM) updates ``l_ik <- sum_j E[Z_ijk] / (w_k sum_j f0_j
        E[f_jk])`` climb it. The loadings are then scaled by their row means and clamped
        below at ``_CLAMP``, as the fit's start is.
        """
        n, K = sweeper.n, self.n_components
        Ef, Elogf = self._feature_moments()
        colw = self.w_ * (self.f0_ @ Ef)
        lv = Elogf
        V, _ = _stabilised(lv)
        with np.errstate(divide="ignore"):
            logw = np.log(self.w_)
        L = np.ones((n, K))
        Y = np.empty((n, K))
        for _ in range(_ML_ITER):
            with np.errstate(divide="ignore"):
                logl = np.log(L)
            row_expected_counts(sweeper.indptr, sweeper.indices, sweeper.data, logw, logl, V, lv,
                                Y, sweeper.n_threads)  # fmt: skip
            L = np.divide(Y, colw, out=np.zeros_like(Y), where=colw > 0)
        scale = L.mean(axis=1, keepdims=True)
        return np.maximum(np.divide(L, scale, out=np.ones_like(L), where=scale > 0), _CLAMP)

    def _sweep_rows(self, sweeper, x_rows, El, tol=None, max_iter=None, extrapolate=True):
        """Coordinate ascent on l0 and q(l) of every row from ``E[l] = El``, a point mass,
        compiled row by row and extrapolated by SQUAREM (``_wbpmf_fast.regress_rows``), to
        the relative change ``tol`` of a row's loadings or ``max_iter`` sweeps (None:
        ``_ROW_TOL`` and ``_ROW_MAX_SWEEPS``)."""
        n, K = El.shape
        w, f0 = self.w_, self.f0_
        Ef, Elogf = self._feature_moments()
        colw = w * (f0 @ Ef)  # w_k sum_j f0_j E[f_jk]
        El = np.array(El, dtype=np.float64, order="C")
        with np.errstate(divide="ignore"):
            Elogl = np.log(El)  # -inf: a topic switched off
            logw = np.log(w)
        kl = np.zeros((n, K))
        l0 = safe_divide(x_rows, rowwise_dot(El, colw))
        lv = np.ascontiguousarray(Elogf)
        threads = kernel_threads(_ROW_WORK * sweeper.data.size * K * K, effective_n_threads())
        V, mv = _stabilised(lv)
        regress_rows(sweeper.indptr, sweeper.indices, sweeper.data, V, lv, mv, logw, colw,
                     *self._loadings_prior_arrays(), np.ascontiguousarray(x_rows), l0, El, Elogl,
                     kl, _ROW_MAX_SWEEPS if max_iter is None else max_iter,
                     _ROW_TOL if tol is None else tol, threads, extrapolate)  # fmt: skip
        return l0, El, Elogl, kl

    def _loadings_prior_arrays(self):
        """The fitted prior of the loadings as ``regress_rows`` reads it: per component, the
        log mass at 0, and its Gamma components of positive weight first (log weights,
        shapes, rates, log-gamma of the shapes, log rates, padded) with their number."""
        g = self.prior_loadings_
        weights = np.atleast_2d(np.asarray(g["weights"], dtype=np.float64))
        K, M = weights.shape
        shape = np.ones((K, max(M, 1)))
        rate = np.ones((K, max(M, 1)))
        log_w = np.full((K, max(M, 1)), -np.inf)
        n_mix = np.zeros(K, dtype=np.intp)
        for k in range(K):
            kept = np.flatnonzero(weights[k] > 0)
            n_mix[k] = kept.size
            log_w[k, : kept.size] = np.log(weights[k, kept])
            shape[k, : kept.size] = np.asarray(g["shape"], dtype=np.float64).reshape(K, -1)[k, kept]
            rate[k, : kept.size] = np.asarray(g["rate"], dtype=np.float64).reshape(K, -1)[k, kept]
        with np.errstate(divide="ignore"):
            log_pi0 = np.log(np.asarray(g["pi0"], dtype=np.float64).reshape(K))
        return log_pi0, log_w, shape, rate, gammaln(shape), np.log(rate), n_mix

    def _feature_moments(self):
        """``E[f]`` and ``E[log f]`` in the model's orientation, (n_features, n_components)."""
        return (np.ascontiguousarray(self.components_mean_.T),
                np.ascontiguousarray(self.components_mean_log_.T))  # fmt: skip

    def _row_elbo(self, sweeper, x_rows, l0, El, Elogl, kl):
        """Each row's part of the ELBO that :meth:`score` sums (less its log X! constant)."""
        no_cols = np.zeros(self.f0_.size)  # the column part is the same for every fit of the rows
        Ef, Elogf = self._feature_moments()
        rows, _ = elbo_rows(sweeper, x_rows, no_cols, self.w_, l0, self.f0_, El, Ef, Elogl, Elogf,
                            rowwise=True)  # fmt: skip
        return rows - kl.sum(axis=1)

    def transform(self, X):
        """Fit the loadings of new rows on the data scale, with the features held fixed.

        Each row's ``l0_i`` and ``q(l_i)`` are fitted under the learned priors ``g_L`` with
        ``f0``, ``q_F`` and ``w`` fixed; rows are independent of each other. Each row keeps
        the best, by its ELBO, of the fits from three deterministic starts and of the fits
        with one of its smaller topics switched off (see ``_fit_rows``). The row fit has
        several optima and does not always reach the fit's own: for the training rows, use
        ``loadings_`` (``doc/wbpmf.rst``).

        Parameters
        ----------
        X : {array-like, sparse matrix, AnnData} of shape (n_samples, n_features)
            Non-negative counts.

        Returns
        -------
        W : ndarray of shape (n_samples, n_components)
            ``l0_i E[l_ik]``, so that ``W @ components_`` is the fitted mean of ``X``.
        """
        check_is_fitted(self)
        dtype, blocks = self._blocks_of_rows(X)
        L = [l0[:, None] * El for _, _, l0, El, _, _ in map(self._fit_rows, blocks)]
        return np.concatenate(L).astype(dtype, copy=False)

    def _blocks_of_rows(self, X):
        """The dtype of the results, and the new rows validated as CSR blocks: X whole, or
        read a block at a time when out of core (the rows are fitted independently)."""
        if not is_out_of_core(X):
            return data_dtype(X), [self._validate_counts(X, reset=False)]
        blocks = RowBlocks(X, group_chunks=True)  # the rows are fitted here, block by block
        out_of_core_features(self, X, blocks.shape[1], reset=False)

        def checked():
            warned = False
            for a, block in blocks:
                fractions = _check_block(self, block, a)
                # its total, and one warning on fractions, as in memory
                self._check_values(block.shape, False, block.data, fractions and not warned)
                warned = warned or fractions
                yield block

        return _source_dtype(X), checked()

    def loading_scores(self, X=None):
        """Compute each topic's share of a row's expected counts, scHPF's cell scores.

        ``l0_i E[l_ik] c_k / sum_a l0_i E[l_ia] c_a`` with ``c_k = w_k sum_j f0_j E[f_jk]``
        (``loadings_ @ components_`` split by topic): the row's depth divides out, so rows
        of any total compare. The row background ``l0_i`` and ``E[l_i]`` are not separately
        determined by a row's counts (their product is; the fit and :meth:`transform` can
        split one row's scale differently), and the share does not depend on that split.

        Parameters
        ----------
        X : {array-like, sparse matrix, AnnData} of shape (n_samples, n_features), default=None
            New rows, fitted as by :meth:`transform`; None scores the training rows.

        Returns
        -------
        scores : ndarray of shape (n_samples, n_components)
            The shares, each row summing to 1 (0 for a row without counts).
        """
        check_is_fitted(self)
        if X is None:
            loadings = self._training_loadings(
                "loading_scores(X) scores the rows X; fit(X) keeps its rows."
            )
        else:
            loadings = self.transform(X)
        expected = np.asarray(loadings, dtype=np.float64) * self._topic_totals()
        totals = expected.sum(axis=1, keepdims=True)
        shares = np.divide(expected, totals, out=np.zeros_like(expected), where=totals > 0)
        return shares.astype(np.asarray(loadings).dtype, copy=False)

    def _topic_totals(self):
        """``sum_j components_[k, j]``: each topic's expected count per unit of loading."""
        return np.asarray(self.components_, dtype=np.float64).sum(axis=1)

    def component_scores(self):
        """Compute the topics relative to their feature's background, scHPF's gene scores.

        A feature's weight in a topic over its background ``f0_j``, so that a topic's top
        features are those specific to it rather than the most abundant.

        Returns
        -------
        scores : ndarray of shape (n_components, n_features)
            The posterior means ``E[f_jk]``: ``components_mean_``.
        """
        check_is_fitted(self)
        return self.components_mean_.astype(self.components_.dtype)

    def score(self, X, y=None):
        """Average ELBO per sample of new rows, with the feature side held fixed.

        The rows' ``l0`` and ``q(l)`` are fitted as in :meth:`transform`; the score is
        ``sum_ij (-E[mu_ij] + X_ij log(l0_i f0_j B_ij) - log X_ij!) - sum_ik KL_ik`` divided by
        ``n_samples``, where the KL terms are those of the rows' loadings under ``g_L``.

        Parameters
        ----------
        X : {array-like, sparse matrix, AnnData} of shape (n_samples, n_features)
            Non-negative counts.
        y : Ignored
            Not used, present for API consistency. A second positional array of the shape
            of X is refused.

        Returns
        -------
        score : float
            ELBO per sample (higher is better).
        """
        check_is_fitted(self)
        check_ignored_y(self, y, X, method="score", advice="score the counts alone, call score(X)")
        _, blocks = self._blocks_of_rows(X)
        Ef, Elogf = self._feature_moments()
        rows, row_log_factorial, kls = [], [], []
        x_cols = np.zeros(self.f0_.size)
        for block in blocks:
            sweeper, x_rows, l0, El, Elogl, kl = self._fit_rows(block)
            no_cols = np.zeros(self.f0_.size)
            rows.append(elbo_rows(sweeper, x_rows, no_cols, self.w_, l0, self.f0_, El, Ef,
                                  Elogl, Elogf, rowwise=True)[0])  # fmt: skip
            row_log_factorial.append(row_entry_sums(compressed(block))[0])
            kls.append(kl)
            # the columns' sums continue row after row, as X.sum(axis=0) adds them
            np.add.at(x_cols, block.indices, block.data)
        with np.errstate(divide="ignore", invalid="ignore"):
            cols = float(np.sum(np.where(x_cols > 0, x_cols * np.log(self.f0_), 0.0)))
        rows, kl = np.concatenate(rows), np.concatenate(kls)
        const = float(np.sum(np.concatenate(row_log_factorial)))
        return (float(np.sum(rows)) + cols - const - float(np.sum(kl))) / rows.shape[0]
