"""Hierarchical Poisson matrix factorisation with empirical-Bayes Gamma priors: the estimator.

Sarkar (2021), "Hierarchical PMF": VBEM (Cemgil 2009), one-dimensional Newton-Raphson, the
pathwise-gradient ELBO, and alternating Poisson regression for new rows. The model's bound
and updates are in ``_hpmf_updates``.
"""

import copy
from numbers import Integral, Real

import numpy as np
from scipy import sparse
from sklearn.base import (
    BaseEstimator,
    ClassNamePrefixFeaturesOutMixin,
    TransformerMixin,
    _fit_context,
)
from sklearn.utils import check_random_state
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import check_is_fitted

from .._base import IterativeMixin
from .._mixins import DataInFitMixin, NonNegativeFactorisationMixin
from .._utils._adam import Adam
from .._utils._deprecation import RenamedMixin
from .._utils._habits import peer_arguments
from .._utils._openmp_helpers import kernel_threads
from .._utils._params import warn_unused_parameters
from .._utils._validation import (
    check_ignored_y,
    check_side_labels,
    validate_input,
)
from .._utils._warnings import warn
from ._block_counts import BlockCounts
from ._counts import (
    _HPFREC_FIT_ARGUMENTS,
    COUNTS_ADVICE,
    HPFREC_METHODS,
    MASKED_COUNTS_ADVICE,
    MISSING_COUNTS_ADVICE,
    PEER_RUN_PARAMETERS,
    CountModelMixin,
    HeldOut,
    has_fractions,
    kl_nmf,
    log_of_factor,
    refuse_hpfrec_arguments,
    warn_fit_only_parameters,
)
from ._dask_counts import DaskCounts
from ._hpmf_updates import (
    _augmented_elbo,
    _Counts,
    _exact_elbo_estimate,
    _newton_step,
    _pass,
    _pass_rows,
    _pathwise_step,
    _restore,
    _Side,
    _snapshot,
    _vbem_step,
    regress_rows,
    svi_step,
)
from ._scores import hierarchical_scores, row_scores

__all__ = ["HierarchicalPMF"]


# VBEM iterations of init="vbem".
_N_INIT_VBEM = 50
# KL-NMF iterations of init="nmf" (from scikit-learn's NNDSVDa start): measured in
# doc/hpmf.rst ("The start").
_N_INIT_NMF = 5
# What replaces the peers' hyperpriors on the prior rates (their a', b', c', d').
_LEARNED_RATES = (
    "learn_prior='rate' (the prior rates are learned by empirical Bayes, without a hyperprior)"
)
# The conditional-mean estimate of new rows (new_rows="conditional_mean"): EM's steps
# shrink linearly; stop at this relative change of the loadings, or this many steps.
_CONDITIONAL_MEAN_TOL = 1e-10
_CONDITIONAL_MEAN_MAX_ITER = 10_000
# Monte Carlo samples for the estimate of the exact ELBO reported after every fit.
_N_EVAL_SAMPLES = 16
# The pathwise solver: windows of estimates compared for convergence, and the weight of a
# new iterate in the moving average that is the fitted q.
_WINDOW = 100
_DECAY = 1.0 - 1.0 / 50.0
# The attributes of the training rows of a fit, which partial_fit (keeping no rows) removes.
_ROW_ATTRIBUTES = (
    "loadings_", "loadings_log_", "loadings_shape_", "loadings_rate_",
    "augmented_lower_bound_", "exact_lower_bound_", "reconstruction_err_",
    "validation_scores_",
)  # fmt: skip
# What to do instead of passing data as the second positional argument.
_NO_OTHER_INPUT = (
    "{method} the counts alone, call {method}(X): HierarchicalPMF takes no per-entry side input"
)
_NO_SIDE_INPUT = (
    "fit the counts alone, call fit(X); held-out counts of the same rows go by keyword, "
    "fit(X_train, X_val=X_held) (thin_counts makes them)"
)


def _lines_without_counts(counts):
    """The rows and the features of the counts without a single count (index arrays)."""
    return np.flatnonzero(counts.row_sums == 0), np.flatnonzero(counts.column_nnz == 0)


def _warn_scores_without_counts(lines, axis):
    """scHPF's scores divide by a capacity that a row or feature without counts makes small,
    so they rank such a line mid-range (a gene never detected above half of the detected
    ones); scHPF's preprocessing (Levitin et al. 2019, "Methods") drops such genes."""
    if not len(lines):
        return
    if axis == 0:
        name, kind = "rows", "cells"
        keep = ("X[np.asarray(X.sum(axis=1)).ravel() > 0] (a DataFrame: X[X.sum(axis=1) > 0]; "
                "an AnnData: adata[np.asarray(adata.X.sum(axis=1)).ravel() > 0])")  # fmt: skip
    else:
        name, kind = "features", "genes"
        keep = ("X[:, np.asarray(X.sum(axis=0)).ravel() > 0] (a DataFrame: "
                "X.loc[:, X.sum(axis=0) > 0]; an AnnData: "
                "adata[:, np.asarray(adata.X.sum(axis=0)).ravel() > 0])")  # fmt: skip
    shown = ", ".join(str(i) for i in lines[:5]) + (", ..." if len(lines) > 5 else "")
    warn(
        f"{len(lines)} {name} of the training data have no count ({shown}): their factors "
        "are the prior's, and their scores rank mid-range, above many with counts. scHPF's "
        f"prep drops such {kind}; fit the others, {keep}.",
        UserWarning,
    )


class _Problem:
    """What every run of one fit shares: the counts, the fit's generator, the threads, and
    the held-out counts of early stopping (or None)."""

    def __init__(self, counts, rng, n_threads, held=None):
        self.counts, self.rng, self.n_threads, self.held = counts, rng, n_threads, held
        self.n_started = 0


class _FitState:
    """The two sides' variational parameters, and what the next step reads: the expected
    counts of the last pass (VBEM), or Adam's iterates and their average (pathwise)."""

    def __init__(self, problem, L, F):
        self.problem, self.L, self.F = problem, L, F
        self.z_l = None
        self.params = self.average = self.opt = None


class HierarchicalPMF(
    RenamedMixin,
    IterativeMixin,
    DataInFitMixin,
    CountModelMixin,
    NonNegativeFactorisationMixin,
    ClassNamePrefixFeaturesOutMixin,
    TransformerMixin,
    BaseEstimator,
):
    """Hierarchical Poisson matrix factorisation with empirical-Bayes Gamma priors.

    The model of Sarkar (2021) for counts X of shape (n_samples, n_features)::

        x_ij ~ Poisson((L F')_ij),  l_ik ~ Gamma(a_lk, b_lk),  f_jk ~ Gamma(a_fk, b_fk)

    (shape, rate), with a variational posterior q(l_ik) = Gamma(alpha_lik, beta_lk),
    q(f_jk) = Gamma(alpha_fjk, beta_fk), and the prior hyperparameters of each component
    learned by empirical Bayes. X is approximated by ``transform(X) @ components_``, the
    posterior means of L and F'. Every sweep costs O(nnz K): only the stored entries of X are
    visited.

    Read more in the :ref:`User Guide <hpmf>`.

    Parameters
    ----------
    n_components : int, default=10
        Number of components K.
    solver : {"vbem", "newton", "pathwise"}, default="vbem"
        ``"vbem"``: Cemgil's coordinate updates of the augmented ELBO (q(z) multinomial).
        ``"newton"``: one-dimensional Newton-Raphson updates, with analytic first and second
        derivatives, of the same augmented ELBO. ``"pathwise"``: Adam on a Monte Carlo
        estimate of the exact ELBO of the original model, with reparameterised Gamma samples
        (a tighter bound, stochastic). See the user guide for the bounds.
    max_iter : int, default=1000
        Maximum number of iterations (sweeps; Adam steps for ``"pathwise"``).
    tol : float, default=1e-6
        Stop when an iteration changes the ELBO by at most ``tol`` times its magnitude (or
        ``tol`` itself below a magnitude of 1), as in every estimator of the package. For
        ``"pathwise"``, the change between the means of consecutive windows of 100
        estimates, whose noise (tens of nats on 60,000 counts) is above the default's
        threshold: such a fit runs ``max_iter`` steps, so choose those.
    init : {"auto", "random", "nmf", "vbem"}, default="auto"
        How the variational parameters start: ``"random"`` draws posterior means around the
        scale of the data; ``"nmf"`` starts from 5 iterations of scikit-learn's
        Kullback-Leibler NMF (from its NNDSVDa start); ``"vbem"`` runs 50 VBEM iterations
        from ``"random"`` (the paper's start for its Newton and gradient solvers).
        ``"auto"`` is ``"nmf"``: from random starts the fit can end at a far worse optimum
        (on simulated single-cell counts, by thousands of nats on some seeds, and by 15% of
        the ELBO on an 8000 x 1500 matrix), while the NMF start was above every random start
        measured (see the user guide). Ignored when ``warm_start`` continues a previous fit.
    prior_shape : float, default=1.0
        Initial (or fixed) shape a of every Gamma prior.
    prior_rate : float or None, default=None
        Initial (or fixed) rate b of every Gamma prior. None sets it so that the prior means
        of L and F give the mean of X: b = a / sqrt(mean(X) / K).
    learn_prior : {"both", "rate", "none"}, default="both"
        Which prior hyperparameters empirical Bayes learns: shapes and rates, rates only,
        or none (fixed at ``prior_shape`` and ``prior_rate``).
    learning_rate : float, default=0.05
        Adam's step size (``"pathwise"`` only; another value with another solver warns that
        it is ignored).
    n_mc_samples : int, default=1
        Monte Carlo samples per gradient (``"pathwise"`` only; likewise).
    random_state : int, RandomState instance or None, default=None
        Seeds the initialisation and the Monte Carlo draws.
    verbose : int, default=0
        0: silent; 1: a progress line (iteration, ELBO, time elapsed and left) about every
        tenth of ``max_iter``; 2: a line after every iteration.
    warm_start : bool, default=False
        Continue from the previous fit's variational parameters and learned priors (the
        hyperparameters ``learn_prior`` does not learn are those of ``prior_shape`` and
        ``prior_rate`` as they are set now). On data of another shape or another
        ``n_components``, the fit starts anew with a ``UserWarning``.
    n_init : int, default=1
        Number of fits from different starts (as scHPF's ``ntrials``); the one with the
        highest final bound is kept. With the NMF start, the first runs KL-NMF from
        NNDSVDa and the others from random factors (NNDSVDa is deterministic: its seed does
        not change it). Ignored when ``warm_start`` continues a fit.
    n_iter_no_change : int, default=20
        With held-out counts (``fit(X, X_val=...)``), the fit stops once this many
        iterations have not raised their log-likelihood, and keeps its best iteration
        (hpfrec's ``stop_crit="val-llk"``). The held-out score can dip for ten iterations
        or so while the empirical-Bayes priors move, and rise again; fewer than 20 can stop
        in such a dip. Not used without ``X_val``.
    new_rows : {"variational", "conditional_mean"}, default="variational"
        What :meth:`transform` (and with it ``poisson_loglik(fit_on=...)`` and the
        recommendations of new users) gives for rows fitted with the factors fixed.
        ``"variational"``: the mean of the row's variational posterior, the quantity
        ``loadings_`` holds for the training rows. ``"conditional_mean"``: the fixed point
        ``l_ik = (a_k + E[z_ik | l_i]) / (b_k + sum_j E[f_jk])`` of the exact posterior
        mean's identity, the allocations taken at the mean (the maximum a posteriori under
        the prior's shapes plus one: unique, the problem being log-concave). With prior
        shapes below 1 the variational mean is sparser than the posterior's, and this
        estimate predicts held-out counts better (``doc/hpmf.rst``, "Held-out counts and
        recommendations"). :meth:`score` is the variational bound in both cases.
    step_exponent : float, default=0.6
        Exponent ``kappa`` of the step size ``rho_t = (t + 2) ** -kappa`` of
        :meth:`partial_fit` after ``t`` steps; in (0.5, 1] for convergence (Robbins-Monro,
        as in Hoffman et al. 2013). hpfrec's default step ``1 / sqrt(t + 2)`` is
        ``kappa = 0.5``.
    total_samples : int or None, default=None
        The number of rows of the data set whose batches :meth:`partial_fit` receives: each
        batch's statistics are scaled to that many rows (hpfrec's ``nusers``). None counts
        the rows of the batches given so far, as for a stream read once; for several passes
        over a data set, set it to the data set's number of rows. A value below a batch's
        rows is refused.

    Attributes
    ----------
    components_ : ndarray of shape (n_components, n_features)
        Posterior mean E[F]'.
    components_log_ : ndarray of shape (n_components, n_features)
        Posterior E[ln F]'.
    components_shape_ : ndarray of shape (n_components, n_features)
        Posterior shapes alpha_f' of q(F).
    components_rate_ : ndarray of shape (n_components,)
        Posterior rates beta_f of q(F) (shared by the entries of a component).
    loadings_ : ndarray of shape (n_samples, n_components)
        Posterior mean E[L] of the training rows. This attribute and the other attributes
        of the training rows (``loadings_log_``, ``loadings_shape_``, ``loadings_rate_``,
        ``augmented_lower_bound_``, ``exact_lower_bound_``, ``reconstruction_err_``,
        ``validation_scores_``) are set by :meth:`fit` only: :meth:`partial_fit` keeps no
        rows, and removes them.
    loadings_log_ : ndarray of shape (n_samples, n_components)
        Posterior E[ln L].
    loadings_shape_ : ndarray of shape (n_samples, n_components)
        Posterior shapes alpha_l of q(L).
    loadings_rate_ : ndarray of shape (n_components,)
        Posterior rates beta_l of q(L).
    prior_loadings_shape_, prior_loadings_rate_ : ndarray of shape (n_components,)
        The learned Gamma prior of L.
    prior_components_shape_, prior_components_rate_ : ndarray of shape (n_components,)
        The learned Gamma prior of F.
    lower_bound_ : float
        The final value of the bound the solver maximises (for ``"pathwise"``, the mean of
        the single-draw estimates at Adam's last 100 iterates, not the bound of the averaged
        q it returns); after :meth:`partial_fit`, the last batch's bound per row.
    objective_history_ : ndarray of shape (``n_iter_``,)
        Its trace: the value after every iteration of the last fit.
    augmented_lower_bound_ : float
        The ELBO of the augmented model (exact, deterministic) at the fitted q.
    exact_lower_bound_ : float
        A Monte Carlo estimate (16 draws) of the ELBO of the original model at the fitted q;
        at least ``augmented_lower_bound_`` up to Monte Carlo error, which is large: the
        draws are of whole rows and columns, shared by their entries (on 200 x 300 counts
        its standard deviation over seeds was about 140 nats).
    reconstruction_err_ : float
        ``sqrt(2 D_KL(X || loadings_ @ components_))``, the Poisson deviance's square root:
        scikit-learn's NMF's ``reconstruction_err_`` with ``beta_loss="kullback-leibler"``.
    validation_scores_ : ndarray of shape (``n_iter_``,) or None
        With ``X_val``, the held-out counts' Poisson log-likelihood per entry after each kept
        iteration, under the fitted means times their depth ``X_val.sum() / X.sum()``
        (``poisson_loglik(X_val, users=..., depth=...)``); None without.
    converged_ : bool
        Whether the last fit met ``tol`` (or, with ``X_val``, stopped at its best held-out
        score); False after an interruption.
    n_iter_ : int
        Number of iterations run by the last call to ``fit`` (with ``X_val``, the iteration
        kept, whose held-out score was the best); after :meth:`partial_fit`,
        the number of its calls since the model was started or fitted
        (``objective_history_`` then holds each batch's bound per row, before its step).
    n_features_in_ : int
        Number of features seen during fit.
    feature_names_in_ : ndarray of shape (n_features,)
        Names of features seen during fit, when X has string column names.

    See Also
    --------
    sklearn.decomposition.NMF : Maximum-likelihood Poisson factorisation with
        ``beta_loss="kullback-leibler"``.

    References
    ----------
    A. Sarkar, "Hierarchical PMF", 2021 (VBEM with empirical-Bayes priors, Newton-Raphson,
    pathwise gradient, alternating Poisson regression).

    A. T. Cemgil, "Bayesian inference for nonnegative matrix factorisation models",
    Computational Intelligence and Neuroscience, 2009.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_cogaps import HierarchicalPMF
    >>> rng = np.random.default_rng(0)
    >>> X = rng.poisson(rng.gamma(1.0, 1.0, (30, 2)) @ rng.gamma(1.0, 1.0, (2, 20)))
    >>> model = HierarchicalPMF(n_components=2, random_state=0).fit(X)
    >>> model.transform(X).shape
    (30, 2)
    >>> bool(np.all(np.diff(model.objective_history_) > -1e-6 * abs(model.lower_bound_)))
    True
    """

    _fit_advice = "HierarchicalPMF(n_components=K).fit(X)"

    _renamed_attributes = {"lower_bounds_": ("objective_history_", False)}

    _row_attributes = _ROW_ATTRIBUTES
    _objective_name = "ELBO"
    _maximise = True

    _peer_parameters = {
        **PEER_RUN_PARAMETERS,
        "K": ("R ebpmf", "n_components=K"),
        "maxiter": ("hpfrec", "max_iter=N"),
        **{
            name: (
                "hpfrec and scHPF",
                f"prior_shape={name}, learn_prior='rate' to hold it fixed as they do (one "
                "shape for both factors; the default learn_prior='both' learns it from there)",
            )
            for name in ("a", "c")
        },
        **dict.fromkeys(["a_prime", "b_prime", "c_prime", "d_prime"], ("hpfrec", _LEARNED_RATES)),
        **dict.fromkeys(["ap", "bp", "cp", "dp"], ("scHPF", _LEARNED_RATES)),
    }

    # scHPF's fitted model, read on ours
    _peer_methods = {
        **HPFREC_METHODS,
        "theta": (
            "scHPF",
            "loadings_ (E[theta], theta.e_x; the variational Gamma's loadings_shape_ and "
            "loadings_rate_)",
        ),
        "beta": (
            "scHPF",
            "components_.T (E[beta], genes x factors; components_shape_ and components_rate_)",
        ),
        **dict.fromkeys(
            ["xi", "eta"],
            (
                "scHPF",
                "nothing per cell or gene: the Gamma priors' rates are per factor "
                "(prior_loadings_rate_, prior_components_rate_), learned with learn_prior",
            ),
        ),
        "loss": (
            "scHPF",
            "objective_history_ (the ELBO after every iteration); scHPF's loss, the mean "
            "negative Poisson log-likelihood, is -poisson_loglik(X, "
            "users=np.arange(X.shape[0]), average='nonzero')",
        ),
    }

    _negative_input_advice = COUNTS_ADVICE
    _missing_value_advice = MISSING_COUNTS_ADVICE
    _masked_advice = MASKED_COUNTS_ADVICE
    _reconstruction_beta = 1

    _parameter_constraints: dict = {
        "n_components": [Interval(Integral, 1, None, closed="left")],
        "solver": [StrOptions({"vbem", "newton", "pathwise"})],
        "max_iter": [Interval(Integral, 1, None, closed="left")],
        "tol": [Interval(Real, 0, None, closed="left")],
        "init": [StrOptions({"auto", "random", "nmf", "vbem"})],
        "prior_shape": [Interval(Real, 0, None, closed="neither")],
        "prior_rate": [Interval(Real, 0, None, closed="neither"), None],
        "learn_prior": [StrOptions({"both", "rate", "none"})],
        "learning_rate": [Interval(Real, 0, None, closed="neither")],
        "n_mc_samples": [Interval(Integral, 1, None, closed="left")],
        "random_state": ["random_state"],
        "verbose": ["verbose"],
        "warm_start": ["boolean"],
        "n_init": [Interval(Integral, 1, None, closed="left")],
        "n_iter_no_change": [Interval(Integral, 1, None, closed="left")],
        "new_rows": [StrOptions({"variational", "conditional_mean"})],
        "step_exponent": [Interval(Real, 0.0, 1.0, closed="right")],
        "total_samples": [Interval(Integral, 1, None, closed="left"), None],
    }

    def __init__(
        self,
        n_components=10,
        *,
        solver="vbem",
        max_iter=1000,
        tol=1e-6,
        init="auto",
        prior_shape=1.0,
        prior_rate=None,
        learn_prior="both",
        learning_rate=0.05,
        n_mc_samples=1,
        random_state=None,
        verbose=0,
        warm_start=False,
        n_init=1,
        n_iter_no_change=20,
        new_rows="variational",
        step_exponent=0.6,
        total_samples=None,
    ):
        self.n_components = n_components
        self.solver = solver
        self.max_iter = max_iter
        self.tol = tol
        self.init = init
        self.prior_shape = prior_shape
        self.prior_rate = prior_rate
        self.learn_prior = learn_prior
        self.learning_rate = learning_rate
        self.n_mc_samples = n_mc_samples
        self.random_state = random_state
        self.verbose = verbose
        self.warm_start = warm_start
        self.n_init = n_init
        self.n_iter_no_change = n_iter_no_change
        self.new_rows = new_rows
        self.step_exponent = step_exponent
        self.total_samples = total_samples

    # -- validation --------------------------------------------------------------------------

    def _validate_counts(self, X, reset):
        X = validate_input(
            self,
            X,
            accept_sparse=("csr", "csc"),
            dtype=np.float64,
            ensure_non_negative=True,
            reset=reset,
        )
        data = X.data if sparse.issparse(X) else X
        if sparse.issparse(X) and not X.has_canonical_format:
            # the fit adds duplicate entries: a whole count stored in parts is whole
            summed = X.copy()
            summed.sum_duplicates()
            data = summed.data
        self._check_values(X.shape, reset and not np.any(data > 0), data, has_fractions(data))
        return X

    # -- the fitting loop's hooks ------------------------------------------------------------

    def _initialise(self, problem, rng):
        counts, n_threads = problem.counts, problem.n_threads
        init = "nmf" if self.init == "auto" else self.init
        # the NMF start is deterministic: the later of n_init starts run its KL-NMF from
        # random factors, or they would repeat the first fit
        problem.n_started += 1
        random_nmf = problem.n_started > 1
        L, F = self._start(counts, rng, "nmf" if init == "nmf" else "random", random_nmf)
        if init == "vbem":
            # Sarkar (2021), section 4: "To initialize all methods, run 50 epochs of VBEM."
            for _ in range(_N_INIT_VBEM):
                z_l = _pass(counts.r, L.elog, F.elog, n_threads, want_log=False)[0]
                _vbem_step(counts, L, F, z_l, self.learn_prior, n_threads)
        return self._state(problem, L, F)

    def _state(self, problem, L, F):
        state = _FitState(problem, L, F)
        if self.solver == "pathwise":
            # Adam in (ln alpha, ln beta); the fitted q is the exponential moving average of
            # the iterates, which removes most of Adam's step noise (Polyak-Ruppert averaging)
            state.params = [np.log(L.alpha), np.log(L.beta), np.log(F.alpha), np.log(F.beta)]
            state.average = [q.copy() for q in state.params]
            state.opt = Adam([q.shape for q in state.params], self.learning_rate)
        return state

    def _scale(self, counts):
        """sqrt(mean(X) / K): the prior mean of L and F whose product gives mean(X)."""
        n, p = counts.shape
        return np.sqrt(counts.row_sums.sum() / (n * p) / self.n_components)

    def _prior_start(self, counts):
        """The starting (or fixed) prior shapes and rates, one per component."""
        a0 = float(self.prior_shape)
        b0 = float(self.prior_rate) if self.prior_rate is not None else a0 / self._scale(counts)
        return np.full(self.n_components, a0), np.full(self.n_components, b0)

    def _start(self, counts, rng, init, random_nmf=False):
        n, p = counts.shape
        K = self.n_components
        scale = self._scale(counts)
        a, b = self._prior_start(counts)
        if init == "nmf":
            W, H = kl_nmf(counts, K, _N_INIT_NMF, rng.randint(2**31 - 1), random_nmf)
            eps = 1e-3 * scale
            W = W + eps
            H = H + eps
            d = np.sqrt(H.sum(0) / W.sum(0))
            W, H = W * d, H / d
            # the VBEM fixed point at the NMF solution: alpha = a + W sum_j H, beta = b + sum_j H
            L = _Side(a + W * H.sum(0), b + H.sum(0), a, b)
            F = _Side(a + H * W.sum(0), b + W.sum(0), a, b)
        else:
            L = _Side(0.5 + rng.uniform(size=(n, K)), np.full(K, 1.0 / scale), a, b)
            F = _Side(0.5 + rng.uniform(size=(p, K)), np.full(K, 1.0 / scale), a, b)
        return L, F

    def _warm_start_mismatch(self, problem):
        n, p = problem.counts.shape
        # after partial_fit the model keeps no rows: it continues on any number of them
        rows = getattr(self, "loadings_shape_", None)
        previous = (n if rows is None else rows.shape[0], *self.components_.shape[::-1])
        if previous != (n, p, self.n_components):
            return (f"X has shape {(n, p)} and n_components={self.n_components}, the "
                    f"previous fit had {previous[:2]} and {previous[2]}")  # fmt: skip
        return None

    def _continue(self, problem):
        if hasattr(self, "loadings_shape_"):
            alpha, beta = self.loadings_shape_, self.loadings_rate_
        else:  # fitted by partial_fit: the rows start at their optimum given q(F)
            alpha, beta, _ = regress_rows(problem.counts, self.prior_loadings_shape_,
                                          self.prior_loadings_rate_, self._components64(),
                                          self.components_log_)  # fmt: skip
        L = _Side(alpha, beta, self.prior_loadings_shape_, self.prior_loadings_rate_)
        F = _Side(
            self.components_shape_.T,
            self.components_rate_,
            self.prior_components_shape_,
            self.prior_components_rate_,
        )
        # What learn_prior does not learn is fixed at prior_shape and prior_rate as they are
        # now, not as they were in the previous fit (set_params may have changed them).
        a, b = self._prior_start(problem.counts)
        for side in (L, F):
            if self.learn_prior != "both":
                side.a = a.copy()
            if self.learn_prior == "none":
                side.b = b.copy()
        return self._state(problem, L, F)

    def _start_objective(self, state):
        p = state.problem
        if self.solver == "pathwise":
            return _exact_elbo_estimate(p.counts, state.L, state.F, p.rng, 1, p.n_threads)
        state.z_l, xlogt, _ = _pass(p.counts.r, state.L.elog, state.F.elog, p.n_threads)
        return _augmented_elbo(xlogt, p.counts, state.L, state.F)

    def _iterate(self, state, iteration):
        p = state.problem
        L, F = state.L, state.F
        if self.solver == "pathwise":
            # a step too large overflows the Adam iterates' exponentials: the fit's end
            # reports it once, as a divergence with what to lower, not numpy at every step
            with np.errstate(over="ignore", invalid="ignore"):
                value = _pathwise_step(p.counts, L, F, p.rng, state.opt, state.params,
                                       self.n_mc_samples, self.learn_prior,
                                       p.n_threads)  # fmt: skip
            # new arrays, never updated in place, so that a snapshot stays complete
            state.average = [
                _DECAY * m + (1.0 - _DECAY) * q for q, m in zip(state.params, state.average)
            ]
            return value
        if self.solver == "vbem":
            _vbem_step(p.counts, L, F, state.z_l, self.learn_prior, p.n_threads)
        else:
            _newton_step(p.counts, L, F, self.learn_prior, p.n_threads)
        # the pass that evaluates the bound also gives the next VBEM step its expected counts
        state.z_l, xlogt, _ = _pass(p.counts.r, L.elog, F.elog, p.n_threads)
        return _augmented_elbo(xlogt, p.counts, L, F)

    def _validation_score(self, state):
        held = state.problem.held
        if held is None:
            return None
        L, F = state.L.mean, state.F.mean
        if self.solver == "pathwise":  # the fitted q is the average of the iterates
            la, lb, fa, fb = state.average
            L, F = np.exp(la - lb), np.exp(fa - fb)
        return held.score(L, np.ascontiguousarray(F.T))

    def _snapshot(self, state, iteration):
        kept = copy.copy(state)
        if self.solver != "pathwise":  # the pathwise fit keeps its averages, new at each step
            kept.L, kept.F = _restore(_snapshot(state.L, state.F))
        return kept

    def _converged_now(self, previous, current, history):
        if self.solver != "pathwise":
            return super()._converged_now(previous, current, history)
        # the means of two consecutive windows of estimates, every window
        n = len(history)
        if n < 2 * _WINDOW or n % _WINDOW:
            return False
        new = np.mean(history[-_WINDOW:])
        old = np.mean(history[-2 * _WINDOW : -_WINDOW])
        return abs(new - old) <= self.tol * max(abs(new), 1.0)  # as the other solvers

    def _divergence_advice(self):
        if self.solver == "pathwise":  # the only solver that takes steps
            return "lower learning_rate"
        # the updates of VBEM and Newton raise the bound in exact arithmetic: a bound that
        # falls far has lost its precision, to counts far above the others most often
        return (
            "look for counts far larger than the others (the bound's terms of the others "
            "are then below its precision), or start it from other parameters"
        )

    def _unconverged_message(self, run):
        message = super()._unconverged_message(run)
        if message is None and run.converged and not run.interrupted:
            message = self._stalled_priors(run.state)
            # _end_run reads run.converged after this message: a stall is no convergence
            run.converged = message is None
        return message

    def _tol_test(self):
        if self.solver != "pathwise":
            return super()._tol_test()
        return f"between the means of its last two windows of {_WINDOW} estimates"

    def _judged_trace(self, history):
        if self.solver != "pathwise":
            return history
        # one Monte Carlo estimate per step: the best of a thousand noisy estimates lies far
        # above their mean, and a stable fit read step by step looked diverged. The means of
        # windows ending at the last step (shorter windows for a short fit)
        window = _WINDOW if len(history) >= 2 * _WINDOW else max(len(history) // 4, 1)
        n = len(history) // window * window
        return list(np.mean(np.reshape(history[len(history) - n :], (-1, window)), axis=1))

    def _stalled_priors(self, state):
        """The message of a fit whose learned priors stayed at a start that outweighs the
        counts, or None. A Gamma prior of shape a_k holds a share a_k / alpha_ik of each
        posterior; where a strong prior is nearly all of it, q is the prior, its empirical-Bayes
        update (Sarkar 2021, section 3) reproduces itself to under 1% per iteration, and
        the ELBO's relative change meets ``tol`` long before the priors have learned the
        data (prior_shape=1e6: an ELBO of -1.02e5 at the second iteration, where the default
        start reaches -4.05e4)."""
        if self.learn_prior != "both" or self.solver == "pathwise":
            return None
        start = float(self.prior_shape)
        for side, S in (("loadings", state.L), ("components", state.F)):
            # strong (a coefficient of variation below 10%) and where it started: an unused
            # component's weak prior also holds its posteriors, legitimately
            near_start = (S.a > max(start / 10.0, 100.0)) & (S.a < start * 10.0)
            dominated = np.mean(S.a[None, :] > 0.9 * S.alpha, axis=0) > 0.9
            stalled = np.flatnonzero(near_start & dominated)
            if stalled.size:
                return (
                    f"{type(self).__name__} stopped near its start: the Gamma priors of the "
                    f"{side} of {stalled.size} of the {self.n_components} components kept "
                    f"shapes near prior_shape={start:g} (now {np.median(S.a[stalled]):.3g}) "
                    "and hold over 90% of the posterior of nine in ten of their entries, so "
                    "the data had no say and the empirical-Bayes updates moved them by under "
                    "1% per iteration, which tol read as convergence. Start the priors from "
                    "prior_shape=1 (the default; learned shapes are usually below 1), or keep "
                    "them as given with learn_prior='none'."
                )
        return None

    def _run_objective(self, run):
        if self.solver != "pathwise":
            return super()._run_objective(run)
        # the mean of the last window of estimates
        trace = [run.start] + run.history
        return float(np.mean(trace[-max(min(_WINDOW, len(trace) - 1), 1) :]))

    # -- fit ---------------------------------------------------------------------------------

    @_fit_context(prefer_skip_nested_validation=True)
    @peer_arguments(_HPFREC_FIT_ARGUMENTS, example="fit(X_train, X_val=X_held)")
    def fit(self, X, y=None, *, X_val=None):
        """Fit the model to the counts X.

        Parameters
        ----------
        X : {array-like, sparse matrix, AnnData} of shape (n_samples, n_features)
            Non-negative counts; CSR and CSC matrices are used without densifying. An AnnData
            contributes its ``.X``. A backed AnnData, a Dask array, or an HDF5 or zarr
            dataset is read a block of rows at a time, with the in-memory result
            (``doc/hpmf.rst``, "Data that do not fit in memory").
        y : Ignored
            Not used, present for API consistency. A second positional array of the shape
            of X is refused.
        X_val : {array-like, sparse matrix} of shape (n_samples, n_features), default=None
            Held-out counts of the same rows, for early stopping: after every iteration
            their Poisson log-likelihood per entry is recorded in ``validation_scores_``,
            and the fit stops once ``n_iter_no_change`` iterations have not raised it, at
            its best iteration. A binomial thinning of the data gives such counts:
            ``X_train, X_val = thin_counts(X, 0.2)``, then ``fit(X_train, X_val=X_val)``.
            Their means are the fitted ones (which estimate X's) times their depth, the
            ratio of their total to X's (0.25 for a share of 0.2).

        Returns
        -------
        self : HierarchicalPMF
            The fitted estimator.
        """
        check_ignored_y(self, y, X, advice=_NO_SIDE_INPUT)
        # held-out counts are matched to X by position: their labels must be X's
        check_side_labels(X, "X_val", X_val)
        dtype, read = self._read_counts(X, reset=True)
        counts = read if isinstance(read, (BlockCounts, DaskCounts)) else _Counts(read)
        if self.solver != "pathwise":
            warn_unused_parameters(
                self,
                ("learning_rate", "n_mc_samples"),
                "with solver='pathwise'",
                "Set solver='pathwise'",
            )
        warn_fit_only_parameters(self, X_val)
        held = self._held_out_counts(X_val, read)
        if held is not None:
            held = HeldOut(held, counts.row_sums)
        rng = check_random_state(self.random_state)
        n_threads = kernel_threads(2 * counts.nnz * self.n_components)
        # scHPF's scores are misleading for them (loading_scores, component_scores warn)
        without_counts = _lines_without_counts(counts)
        problem = _Problem(counts, rng, n_threads, held)
        start = self._warm_state(problem)
        run = (
            self._fit_from(start)
            if start is not None
            else self._best_run(problem, rng, self.n_init)
        )
        self._end_run(run)
        L, F = run.state.L, run.state.F
        if self.solver == "pathwise":
            average = run.state.average
            for S, la, lb in ((L, average[0], average[1]), (F, average[2], average[3])):
                S.alpha, S.beta = np.exp(la), np.exp(lb)
                S.refresh()
                S.update_prior(self.learn_prior)
        xlogt = _pass(counts.r, L.elog, F.elog, n_threads)[1]
        self.augmented_lower_bound_ = float(_augmented_elbo(xlogt, counts, L, F))
        self.exact_lower_bound_ = float(
            _exact_elbo_estimate(counts, L, F, rng, _N_EVAL_SAMPLES, n_threads)
        )
        self.lower_bound_ = float(run.objective)
        self.objective_history_ = np.asarray(run.history, dtype=np.float64)
        self.validation_scores_ = None if held is None else np.asarray(run.validation)
        self.loadings_shape_, self.loadings_rate_ = L.alpha, L.beta
        self.loadings_, self.loadings_log_ = L.mean, L.elog
        self._set_components(F, (L.a, L.b))
        self._set_reconstruction_err(counts)
        self._cast_fitted(dtype)
        self._without_counts = without_counts
        self._keep_row_labels(X)
        if hasattr(self, "_svi_state"):  # a later partial_fit continues this fit
            del self._svi_state
        return self

    def _set_components(self, F, prior_loadings):
        """The fitted attributes of q(F) and of both priors (``fit`` and ``partial_fit``)."""
        self.components_shape_ = np.ascontiguousarray(F.alpha.T)
        self.components_rate_ = F.beta
        self.components_ = np.ascontiguousarray(F.mean.T)
        self.components_log_ = np.ascontiguousarray(F.elog.T)
        self.prior_loadings_shape_, self.prior_loadings_rate_ = prior_loadings
        self.prior_components_shape_, self.prior_components_rate_ = F.a, F.b

    @_fit_context(prefer_skip_nested_validation=True)
    def partial_fit(self, X, y=None, **hpfrec_arguments):
        """One step of stochastic variational inference on a batch of rows.

        Hoffman et al. (2013): each row of the batch gets its q(l_i) at its optimum given
        q(F) (as :meth:`transform`), then q(F) moves a step ``(t + 2) ** -step_exponent``
        towards the VBEM update of ``total_samples`` rows like the batch's, and the priors
        follow (``doc/hpmf.rst``, "Stochastic variational inference"). Call it on the
        batches of a data set that does not fit in memory, or on a stream; the first call
        starts the model on its batch as ``fit`` would (``init``), and a call after ``fit``
        continues the fitted q(F). The model keeps no rows: get them with
        :meth:`transform`. The step is the same whatever ``solver``; ``max_iter``, ``tol``,
        ``n_init``, ``n_iter_no_change`` and ``verbose`` are ``fit``'s. Every batch gets a
        full step whatever its size, so give batches of similar sizes
        (``np.array_split(order, n_batches)``): a batch of a few rows moves q(F) as far as
        one of thousands.

        Parameters
        ----------
        X : {array-like, sparse matrix, AnnData} of shape (n_samples, n_features)
            The batch: whole rows of counts (all of a row's counts in one batch). An
            out-of-core source is one batch, read a block of rows at a time.
        y : Ignored
            Not used, present for API consistency.
        **hpfrec_arguments
            Refused, with what to write instead: hpfrec's ``partial_fit`` arguments
            (``nusers``, ``step_size``, ``batch_type``...) are parameters here, or have no
            use (a batch is a matrix of whole rows).

        Returns
        -------
        self : HierarchicalPMF
            The updated estimator.
        """
        refuse_hpfrec_arguments(self, hpfrec_arguments)
        # every call (scikit-learn validates the first only): set_params may have changed them
        self._validate_params()
        check_ignored_y(self, y, X, method="partial_fit",
                        advice=_NO_OTHER_INPUT.format(method="partial_fit"))  # fmt: skip
        first = not self.__sklearn_is_fitted__()
        self._check_batch(first, 0)
        dtype, counts = self._read_counts(X, reset=first)
        counts = counts if isinstance(counts, (BlockCounts, DaskCounts)) else _Counts(counts)
        n_batch = counts.shape[0]
        self._check_batch(first, n_batch)
        if not first:  # the model keeps the dtype it started with, whatever the batch's
            dtype = self.components_.dtype
        n_threads = kernel_threads(2 * counts.nnz * self.n_components)
        # local copies, set at the end: an interrupted call leaves the estimator as it was
        if first:
            rng = check_random_state(self.random_state)
            start = self._initialise(_Problem(counts, rng, n_threads), rng)
            L, F = start.L, start.F
            prior = (L.a, L.b)
            means = np.stack([L.mean.mean(axis=0), L.elog.mean(axis=0)])
            steps, seen, history = 0, 0, []
        else:
            F = _Side(self.components_shape_.T, self.components_rate_,
                      self.prior_components_shape_, self.prior_components_rate_)  # fmt: skip
            prior = (self.prior_loadings_shape_, self.prior_loadings_rate_)
            if hasattr(self, "_svi_state"):
                steps, seen, means = self._svi_state
                self._warn_small_batch(n_batch, seen, steps)
                history = list(self.objective_history_)
            else:
                # continue a fit as if its rows had come before in batches of this size,
                # so the step size goes on from there instead of restarting at its largest
                # (one small batch would outweigh the whole fit)
                seen = self.loadings_shape_.shape[0]
                steps = int(round(seen / max(n_batch, 1)))
                means = np.stack([(self.loadings_shape_ / self.loadings_rate_).mean(axis=0),
                                  self.loadings_log_.mean(axis=0)])  # fmt: skip
                history = []
        seen += n_batch
        rho = (steps + 2.0) ** -self.step_exponent
        n_rows = self.total_samples if self.total_samples is not None else seen
        prior, means, bound = svi_step(counts, prior, F, means, rho, n_rows, self.learn_prior,
                                       n_threads)  # fmt: skip
        self._drop_row_attributes()
        self.__dict__.pop("_without_counts", None)
        self._svi_state = (steps + 1, seen, means)
        self._set_components(F, prior)
        self.components_ = self.components_.astype(dtype, copy=False)
        self.objective_history_ = np.asarray(history + [bound], dtype=np.float64)
        self.lower_bound_ = float(bound)
        self.n_iter_ = self.objective_history_.size
        self.converged_ = False
        return self

    # -- new rows ----------------------------------------------------------------------------

    def _components64(self):
        """E[F]', in float64 whatever the dtype of ``components_`` (float32 after a fit on
        float32 data): the same bits as the fit's."""
        return self.components_shape_ / self.components_rate_[:, None]

    def _regress_rows(self, X):
        """Alternating Poisson regression of each row on q(F): shapes, rate, sum x ln t."""
        counts = X if isinstance(X, (BlockCounts, DaskCounts)) else _Counts(X)
        alpha, beta, xlogt = regress_rows(
            counts, self.prior_loadings_shape_, self.prior_loadings_rate_,
            self._components64(), self.components_log_)  # fmt: skip
        return counts, alpha, beta, xlogt

    def transform(self, X):
        """Posterior mean loadings of new rows, with the factors fixed.

        Each row is fitted on its own by alternating Poisson regression (the paper's per-row
        subproblem, with q(F) and the learned prior of L fixed): deterministic and
        independent of the other rows. The per-row bound has several fixed points; each
        component that holds at most a tenth of the row's counts is also tried switched off,
        and the row keeps the highest bound found. For the training rows this gives
        ``loadings_`` up to the fit's convergence, or a row at a higher bound
        (``doc/hpmf.rst``, "New rows"); after ``solver="pathwise"``, which maximises the
        exact ELBO, it differs from ``loadings_`` by about a percent.

        Parameters
        ----------
        X : {array-like, sparse matrix, AnnData} of shape (n_samples, n_features)
            Non-negative counts; out-of-core sources as in :meth:`fit`.

        Returns
        -------
        W : ndarray of shape (n_samples, n_components)
            Posterior means E[l_i] of the rows.
        """
        check_is_fitted(self)
        dtype, X = self._read_counts(X, reset=False)
        # estimators pickled before the option existed give the variational mean
        if getattr(self, "new_rows", "variational") == "conditional_mean":
            return self._conditional_means(X).astype(dtype, copy=False)
        _, alpha, beta, _ = self._regress_rows(X)
        return (alpha / beta).astype(dtype, copy=False)

    def _conditional_means(self, X):
        """The rows' loadings at ``l = (a + E[z | l]) / (b + sum_j E[f_j])`` (``new_rows``).

        The exact posterior mean satisfies ``E[l_k] = (a_k + E[Z_k]) / (b_k + sum_j f_jk)``
        (Rao-Blackwell, on the multinomial augmentation); the allocations of ``E[Z_k]`` are
        taken at the mean, where the variational update takes them at geometric means
        ``exp E[ln l]``. The iteration is EM for the posterior mode under Gamma(a + 1, b):
        it climbs a strictly concave objective, to its one maximum, whatever the start.

        EM converges linearly, slowly where components overlap, so its steps are
        extrapolated row by row by SQUAREM (Varadhan & Roland 2008, scheme S3, as the
        variational rows of :func:`regress_rows`): the point ``L0 - 2 s r + s^2 v`` of two
        steps is kept through one more step where the row's objective there is at least
        the objective at ``L0``, else the second step is. The stopping rule is the plain
        step's.
        """
        counts = X if isinstance(X, (BlockCounts, DaskCounts)) else _Counts(X)
        F = np.ascontiguousarray(self._components64().T)
        log_f = log_of_factor(F)
        a = self.prior_loadings_shape_
        denominator = self.prior_loadings_rate_ + F.sum(axis=0)
        n_threads = kernel_threads(2 * counts.nnz * self.n_components)

        def step(L):
            """The EM step from L, and each row's objective at L (the rows of ``working``)."""
            z, xlogt, _ = _pass_rows(working.r, log_of_factor(L), log_f, n_threads)
            # elementwise sums, not BLAS products, whose order may depend on the number of
            # rows: a row's decisions are then its own
            with np.errstate(divide="ignore"):
                objective = xlogt - np.sum(L * denominator - np.log(L) * a, axis=1)
            return (a + z) / denominator, objective

        result = (a + counts.row_sums[:, None] / self.n_components) / denominator
        # a row stops when its own plain step changes it by at most the tolerance (relative
        # to its largest loading), so that its result does not depend on the other rows.
        # In memory, the steps run on the rows still moving: once they are fewer than half
        # of those stepped, the others are put in the result and left out (each row's steps
        # are its own, so this changes no bit).
        working, rows, L = counts, np.arange(result.shape[0]), result.copy()
        moving = np.ones(L.shape[0], dtype=bool)
        n_steps = 0
        while n_steps < _CONDITIONAL_MEAN_MAX_ITER:
            if isinstance(working, _Counts) and 2 * moving.sum() < moving.size:
                result[rows] = L
                rows, L, moving = rows[moving], L[moving], moving[moving]
                indptr, indices, data = counts.r
                whole = sparse.csr_matrix((data, indices, indptr), shape=counts.shape)
                working = _Counts(whole[rows])
            L1, objective = step(L)
            n_steps += 1
            done = np.max(np.abs(L1 - L), axis=1, initial=0.0) <= (
                _CONDITIONAL_MEAN_TOL * np.max(L1, axis=1, initial=0.0))  # fmt: skip
            L = np.where((moving & done)[:, None], L1, L)
            moving &= ~done
            if not moving.any():
                break
            L1 = np.where(moving[:, None], L1, L)
            L2, _ = step(L1)
            n_steps += 1
            r, v = L1 - L, L2 - 2.0 * L1 + L
            with np.errstate(divide="ignore", invalid="ignore"):
                s = -np.sqrt(np.sum(r * r, axis=1) / np.sum(v * v, axis=1))
            s = np.where(np.isfinite(s), np.minimum(s, -1.0), -1.0)[:, None]
            point = L - 2.0 * s * r + s * s * v
            # a loading at or below 0 is outside the objective's domain: there the plain
            # steps go on (EM from L2 cannot lower the objective)
            outside = ~np.all(point > 0, axis=1)
            point[outside] = L2[outside]
            L3, at_point = step(point)
            n_steps += 1
            L = np.where(moving[:, None], np.where((at_point >= objective)[:, None], L3, L2), L)
        result[rows] = L
        return result

    def score(self, X, y=None):
        """Average per-row ELBO of X, with the factors and priors fixed.

        Each row gets its q(l_i) from :meth:`transform`; the score is the mean over rows of
        sum_j [x ln t_ij - E l_i . E f_j - ln Gamma(x + 1)] - KL(q(l_i) || p(l_i)), so higher
        is better and models with different ``n_components`` compare (``GridSearchCV``).

        Parameters
        ----------
        X : {array-like, sparse matrix, AnnData} of shape (n_samples, n_features)
            Non-negative counts; out-of-core sources as in :meth:`fit`.
        y : Ignored
            Not used, present for API consistency. A second positional array of the shape
            of X is refused.

        Returns
        -------
        score : float
            The ELBO per sample.
        """
        check_is_fitted(self)
        check_ignored_y(self, y, X, method="score", advice=_NO_OTHER_INPUT.format(method="score"))
        _, X = self._read_counts(X, reset=False)
        counts, alpha, beta, xlogt = self._regress_rows(X)
        L = _Side(alpha, beta, self.prior_loadings_shape_, self.prior_loadings_rate_)
        cross = float(np.sum(L.mean @ self._components64().sum(axis=1)))
        total = float(np.sum(xlogt)) - cross - counts.log_factorial + L.neg_kl()
        return total / max(counts.shape[0], 1)

    # -- scHPF's scores ----------------------------------------------------------------------

    def _hierarchical_scores(self):
        self._training_loadings(
            "scHPF's scores put each component on the scale the training rows' loadings "
            "give. fit(X) with warm_start=True continues this model on the rows X and keeps "
            "them."
        )
        L = self.loadings_shape_ / self.loadings_rate_
        return hierarchical_scores(
            L, self._components64().T, self.prior_loadings_shape_, self.prior_components_shape_
        )

    def _without_counts_of(self, axis):
        # a model pickled before these were kept has none to name
        return getattr(self, "_without_counts", (np.empty(0, int),) * 2)[axis]

    def loading_scores(self, X=None):
        """Compute scHPF's cell scores: each loading times its row's capacity.

        A row's capacity is the rate of its loadings' prior in scHPF's model (Levitin et al.
        2019); the score ``s_k E[L_ik] E[xi_i]`` divides out the row's total, so that rows
        compare by the share of their counts each component explains, whatever their depth.
        HierarchicalPMF's prior has no per-row rate: ``E[xi_i]`` is computed from the fitted
        means as scHPF's own update would set it, with scHPF's hyperparameters, and every
        component is first put on scHPF's scale ``s_k`` (the fit's own scale of a component
        is arbitrary); see ``doc/hpmf.rst``, "Cell and gene scores".

        Parameters
        ----------
        X : {array-like, sparse matrix, AnnData} of shape (n_samples, n_features), default=None
            New rows, scored from their :meth:`transform`; None scores the training rows.

        Returns
        -------
        scores : ndarray of shape (n_samples, n_components)
            The scores, scHPF's ``cell_score()`` (cells x factors).
        """
        check_is_fitted(self)
        rows, _, scale, (rate_l, _) = self._hierarchical_scores()
        if X is None:
            _warn_scores_without_counts(self._without_counts_of(0), axis=0)
            return rows.astype(self.components_.dtype, copy=False)
        L = self.transform(X)  # in the dtype of X, as the scores
        scores = row_scores(np.asarray(L, dtype=np.float64), scale, self.prior_loadings_shape_,
                            rate_l)  # fmt: skip
        return scores.astype(L.dtype, copy=False)

    def component_scores(self):
        """Compute scHPF's gene scores: each feature weight times its feature's capacity.

        ``E[F_jk] E[eta_j] / s_k``, with the capacities and scales of
        :meth:`loading_scores`: a feature's weight in a component relative to its weight in
        all of them, so that a component's top features are those specific to it rather
        than the most abundant ones.

        Returns
        -------
        scores : ndarray of shape (n_components, n_features)
            The scores, scHPF's ``gene_score()`` transposed as ``components_`` is.
        """
        check_is_fitted(self)
        scores = self._hierarchical_scores()[1].T
        _warn_scores_without_counts(self._without_counts_of(1), axis=1)
        return np.ascontiguousarray(scores, dtype=self.components_.dtype)
