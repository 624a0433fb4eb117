"""Extreme deconvolution: Gaussian mixtures fitted to noisy, projected and incomplete data.

The model (Bovy, Hogg & Roweis 2011): x_i = R_i v_i + e_i with e_i ~ N(0, S_i) known and
v_i drawn from the mixture sum_j alpha_j N(m_j, V_j). Three fitting methods share one compiled
E-step (``_estep``, ``_fast``): Bovy's batch EM (``_em``), the minibatch online EM of Ritchie
& Murray (2019) with its numerically stable covariance update, and stochastic gradient ascent
with Adam on softmax / Cholesky parameters (``_online``); split and merge in ``_split_merge``.
"""

from numbers import Integral, Real

import numpy as np
from scipy import sparse
from scipy.special import logsumexp
from sklearn.base import BaseEstimator, DensityMixin, _fit_context, clone
from sklearn.utils import check_random_state
from sklearn.utils._param_validation import Hidden, Interval, StrOptions
from sklearn.utils.validation import check_is_fitted

from .._base import IterativeMixin
from .._mixins import DataInFitMixin
from .._utils._anndata import is_anndata, unwrap_anndata
from .._utils._blocks import current_client, is_out_of_core
from .._utils._deprecation import RenamedMixin
from .._utils._habits import peer_arguments
from .._utils._openmp_helpers import effective_n_threads
from .._utils._params import warn_unused_parameters
from .._utils._validation import check_ignored_y, out_of_core_features
from .._utils._warnings import warn
from ._blocks import ObservationBlocks, start_index
from ._condition import aligned_by_name, condition_mixture, given_values
from ._data import (
    MASKED_ADVICE,
    Problem,
    check_noise_like_y,
    floors_covariances,
    is_projected,
    n_dims,
    noise_advice,
    validate_observations,
)
from ._em import EMRun, floor_eigenvalues, m_step, penalty
from ._estep import estep, log_prob
from ._init import check_enough_samples, check_init_params, fixed_masks, initial_params
from ._online import AdamState, OnlineEMState, StochasticRun
from ._split_merge import split_merge

__all__ = ["ExtremeDeconvolution"]

# What a model fitted with a side input does with points given without it (the fitted
# model's flag, what happens, and the value that says the points need none).
_MISSING_INPUTS = {
    "X_cov": (
        "_fitted_with_noise",
        "the points are read as noise-free: they meet the deconvolved density itself (its "
        "narrow components score noisy points low and assign them to the wrong component, "
        "and deconvolve returns each point unchanged).",
        "X_cov=np.zeros_like(X) for points without noise",
    ),
    "projection": (
        "_fitted_with_projection",
        "the points are taken as observations of v itself (the identity projection).",
        "projection=np.eye(n_dims) for points that are v",
    ),
}

# The parameters shared by the methods that take observations.
_OBSERVATIONS = """X : {array-like, AnnData} of shape (n_samples, n_features)
            Observations (NaN for missing coordinates).
        X_cov : array-like, default=None
            Their noise covariances or variances, as in `fit`.
        projection : array-like, default=None
            Their projections, as in `fit`."""


def _observations_doc(method):
    method.__doc__ = method.__doc__.replace("{observations}", _OBSERVATIONS)
    return method


# astroML's and extreme-deconvolution's names of the methods' arguments.
_PEER_ARGUMENTS = {
    **dict.fromkeys(["Xerr", "xerr", "Xerr_input"], ("astroML's", "X_cov")),
    "ycovar": ("extreme-deconvolution's", "X_cov"),
    "weight": ("extreme-deconvolution's", "sample_weight"),
    **dict.fromkeys(["ydata", "X_input"], ("astroML's", None)),
    "X_dict": ("XDGMM's", None),
    "Xerr_dict": ("XDGMM's", "X_cov"),
}
# astroML's noise given positionally to a method that takes the observations alone
_POSITIONAL_NOISE = (
    "{name}() takes the observations X positionally and their noise by keyword: write "
    "{name}(X, X_cov=Xerr) (astroML's {name}(X, Xerr))."
)


class ExtremeDeconvolution(
    RenamedMixin, IterativeMixin, DataInFitMixin, DensityMixin, BaseEstimator
):
    """Gaussian mixture of the noise-free data behind noisy, projected, incomplete observations.

    Each observation is ``x_i = R_i v_i + e_i`` where ``e_i ~ N(0, S_i)`` has a known covariance
    ``S_i`` (``X_cov``), ``R_i`` is a known projection (``projection``) and ``v_i`` is drawn from
    the mixture ``sum_j alpha_j N(m_j, V_j)`` that the estimator recovers: the deconvolved density.
    Missing coordinates (NaN in ``X``) are dropped exactly from their point's projection.
    Without noise and projection the model is an ordinary Gaussian mixture.

    Read more in the :doc:`user guide </extreme_deconvolution>`.

    Parameters
    ----------
    n_components : int, default=1
        Number of mixture components K.
    solver : {"em", "minibatch_em", "sgd"}, default="em"
        ``"em"``: batch EM of Bovy et al. (2011). ``"minibatch_em"``: online EM on minibatches
        with the numerically stable covariance update of Ritchie & Murray (2019) and step sizes
        ``(t + 2) ** -step_exponent``. ``"sgd"``: stochastic gradient ascent of the
        log-likelihood with Adam on softmax weights and Cholesky factors with log-diagonal.
    tol : float, default=1e-6
        The fit stops when an iteration changes the mean log-likelihood per point by at
        most ``tol`` (by ``tol`` times its magnitude when that is above 1), as in every
        estimator of the package (per pass over the data for the stochastic solvers, whose
        per-epoch means are noisy: they usually run all ``max_iter`` epochs, and then warn
        as every solver does).
    max_iter : int, default=100
        Maximum number of EM iterations (``"em"``) or of passes over the data (epochs); with
        ``split_merge``, of each EM run (the first and each accepted split and merge's), so
        that ``n_iter_``, their total, may exceed it.
    n_init : int, default=1
        Number of initialisations; the best result is kept.
    init_params : {"kmeans", "k-means++", "random", "random_from_data"}, default="kmeans"
        How to start the parameters that are not given: responsibilities from k-means,
        k-means++ centres, random responsibilities or random data points, computed on the
        data mapped back to the deconvolved space (NaNs filled by column means; per-point
        least-squares inverse of the projection).
    weights_init : array-like of shape (n_components,), default=None
        Initial mixture weights.
    means_init : array-like of shape (n_components, n_dims), default=None
        Initial means; ``n_dims`` is the dimension of v (the projection's number of columns).
    precisions_init : array-like of shape (n_components, n_dims, n_dims), default=None
        Initial precision matrices (inverse covariances), as in
        :class:`~sklearn.mixture.GaussianMixture`.
    reg_covar : float, default=1e-6
        Keeps every covariance ``V_j`` positive definite when a component collapses onto
        points without noise or the data have a constant coordinate. On complete points
        without ``X_cov`` or projection, it is added to the diagonal after each update, as
        in :class:`~sklearn.mixture.GaussianMixture`. With ``X_cov``, a projection or
        missing values, it is a floor on the eigenvalues of each ``V_j``: a deconvolved
        variance above it is the likelihood's (added at every update, it would widen a
        component narrower than the noise, or a coordinate often missing, by many times
        itself), a start below it is floored first, and a fit with ``X_cov`` and a
        component at the floor warns. It is on the scale of the data: rescale data whose
        variances are far below 1e-6, or set it to 0 for the unregularised estimate.
    w : float, default=0.0
        Regulariser: the conjugate prior of Bovy et al. (2011) on every covariance, which
        adds ``w`` times the identity to the scatter matrix: ``V_j = (sum_i q_ij [(b_ij - m_j)
        (b_ij - m_j)^T + B_ij] + w I) / (q_j + 1)`` when ``w > 0``.
    fixed_weights, fixed_means, fixed_covariances : bool or array-like of bool, default=False
        Hold these parameters of all (True) or of the marked components at their initial
        values, which must then be given (``weights_init``, ``means_init``,
        ``precisions_init``).
    split_merge : int, default=0
        Number of split-and-merge attempts after EM has converged (``solver="em"``): merge
        the two most overlapping components, split the worst-fitting one, re-run EM, and keep
        the result only if it raises the likelihood (Bovy et al. 2011, section 3.2).
    batch_size : int, default=1000
        Minibatch size of the stochastic methods; one larger than the number of points
        makes each step a pass over all of them.
    step_exponent : float, default=0.6
        Exponent ``kappa`` of the online-EM step size ``lambda_t = (t + 2) ** -kappa`` after
        ``t`` steps; in (0.5, 1] for convergence (Cappe & Moulines 2009).
    learning_rate : float, default=0.01
        Adam step size of ``solver="sgd"``.
    random_state : int, RandomState instance or None, default=None
        Seeds the initialisation, the minibatch order and `sample`.
    warm_start : bool, default=False
        Start from the previous fit's parameters (one run, whatever ``n_init``); the
        components named by ``fixed_weights``, ``fixed_means`` or ``fixed_covariances`` are
        held at ``weights_init``, ``means_init`` or ``precisions_init``. On data of another
        dimension or with another ``n_components``, the fit starts anew with a
        ``UserWarning``.
    verbose : int, default=0
        0: silent; 1: a progress line (iteration, mean log-likelihood, time elapsed and
        left) about every tenth of ``max_iter``; 2: a line after every iteration.
    method : {"em", "minibatch_em", "sgd"}, default="deprecated"
        Former name of ``solver``.

        .. deprecated:: 0.2
           ``method`` was renamed ``solver`` (the name of the algorithm switch in every
           estimator of the package) and will be removed in 0.3.
    verbose_interval : int or None, default="deprecated"
        Iterations between progress lines with ``verbose=1``.

        .. deprecated:: 0.2
           ``verbose_interval`` will be removed in 0.3: ``verbose=1`` prints about every
           tenth of the iterations and ``verbose=2`` every one, as in every estimator of the
           package.

    Attributes
    ----------
    weights_ : ndarray of shape (n_components,)
        Mixture weights alpha_j.
    means_ : ndarray of shape (n_components, n_dims)
        Means m_j of the deconvolved components.
    covariances_ : ndarray of shape (n_components, n_dims, n_dims)
        Covariances V_j of the deconvolved components.
    precisions_ : ndarray of shape (n_components, n_dims, n_dims)
        Their inverses.
    precisions_cholesky_ : ndarray of shape (n_components, n_dims, n_dims)
        Upper-triangular ``U_j`` with ``precisions_[j] = U_j @ U_j.T`` (as in
        :class:`~sklearn.mixture.GaussianMixture`).
    converged_ : bool
        Whether the last fit met ``tol``.
    n_iter_ : int
        Iterations (or epochs) run by the last call to ``fit``, in the best of its ``n_init``
        runs; after `partial_fit`, the number of its calls since the first one or since the
        last ``fit``.
    lower_bound_ : float
        Mean log-likelihood per point of the fitted mixture on the training data (weighted
        by ``sample_weight`` when given); after :meth:`partial_fit`, that of the last
        minibatch under the mixture before its step, not of the training data.
    objective_history_ : ndarray of shape (``n_iter_``,)
        Mean log-likelihood after each iteration (for the stochastic solvers, the mean over the
        minibatches of each epoch; for `partial_fit`, that of each minibatch it was given).
    n_features_in_ : int
        Number of observed coordinates p (columns of X).
    feature_names_in_ : ndarray of shape (`n_features_in_`,)
        Names of the columns of X, when they are all strings.

    See Also
    --------
    sklearn.mixture.GaussianMixture : The noise-free special case.

    References
    ----------
    .. [1] J. Bovy, D. W. Hogg and S. T. Roweis, "Extreme deconvolution: inferring complete
       distribution functions from noisy, heterogeneous and incomplete observations",
       Annals of Applied Statistics 5(2B), 1657-1677, 2011.
    .. [2] J. A. Ritchie and I. Murray, "Scalable extreme deconvolution", 2019.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_cogaps import ExtremeDeconvolution
    >>> rng = np.random.RandomState(0)
    >>> v = rng.normal(size=(500, 2)) * 0.5 + np.where(rng.rand(500, 1) < 0.5, -2.0, 2.0)
    >>> noise = rng.uniform(0.1, 1.0, size=(500, 2))
    >>> X = v + rng.normal(size=v.shape) * np.sqrt(noise)
    >>> xd = ExtremeDeconvolution(n_components=2, random_state=0).fit(X, X_cov=noise)
    >>> np.round(np.sort(xd.means_[:, 0]), 1)
    array([-2.1,  1.9])
    """

    _masked_advice = MASKED_ADVICE

    _fit_advice = (
        "ExtremeDeconvolution(n_components=K).fit(X, X_cov=Xerr), with the noise of each "
        "point by keyword (astroML's XDGMM(K).fit(X, Xerr))"
    )

    _peer_parameters = {
        "n_iter": ("astroML's XDGMM", "max_iter=N"),
        "maxiter": ("extreme-deconvolution", "max_iter=N"),
        "splitnmerge": ("extreme-deconvolution", "split_merge=N"),
        "xamp": ("extreme-deconvolution", "weights_init=xamp"),
        "xmean": ("extreme-deconvolution", "means_init=xmean"),
        "xcovar": ("extreme-deconvolution", "precisions_init=np.linalg.inv(xcovar)"),
        "fixamp": ("extreme-deconvolution", "fixed_weights=fixamp"),
        "fixmean": ("extreme-deconvolution", "fixed_means=fixmean"),
        "fixcovar": ("extreme-deconvolution", "fixed_covariances=fixcovar"),
        "mu": ("xdgmm's XDGMM", "means_init=mu"),
        "V": ("xdgmm's XDGMM", "precisions_init=np.linalg.inv(V)"),
        "weights": ("xdgmm's XDGMM", "weights_init=weights"),
        "filename": ("xdgmm's XDGMM", "xd = joblib.load(path) for a saved model"),
        "labels": (
            "xdgmm's XDGMM",
            "fit(X) on a pandas DataFrame whose columns are the labels (feature_names_in_)",
        ),
        "covariance_type": (
            "scikit-learn's GaussianMixture",
            "leave it out: every component has a full covariance",
        ),
    }

    _parameter_constraints = {
        "n_components": [Interval(Integral, 1, None, closed="left")],
        "solver": [StrOptions({"em", "minibatch_em", "sgd"})],
        "tol": [Interval(Real, 0.0, None, closed="left")],
        "max_iter": [Interval(Integral, 0, None, closed="left")],
        "n_init": [Interval(Integral, 1, None, closed="left")],
        "init_params": [StrOptions({"kmeans", "k-means++", "random", "random_from_data"})],
        "weights_init": ["array-like", None],
        "means_init": ["array-like", None],
        "precisions_init": ["array-like", None],
        "reg_covar": [Interval(Real, 0.0, None, closed="left")],
        "w": [Interval(Real, 0.0, None, closed="left")],
        "fixed_weights": ["boolean", "array-like"],
        "fixed_means": ["boolean", "array-like"],
        "fixed_covariances": ["boolean", "array-like"],
        "split_merge": [Interval(Integral, 0, None, closed="left")],
        "batch_size": [Interval(Integral, 1, None, closed="left")],
        "step_exponent": [Interval(Real, 0.0, 1.0, closed="right")],
        "learning_rate": [Interval(Real, 0.0, None, closed="neither")],
        "random_state": ["random_state"],
        "warm_start": ["boolean"],
        "verbose": ["verbose"],
        "method": [StrOptions({"em", "minibatch_em", "sgd"}), Hidden(StrOptions({"deprecated"}))],
        "verbose_interval": [
            Interval(Integral, 1, None, closed="left"),
            None,
            Hidden(StrOptions({"deprecated"})),
        ],
    }

    def __init__(
        self,
        n_components=1,
        *,
        solver="em",
        tol=1e-6,
        max_iter=100,
        n_init=1,
        init_params="kmeans",
        weights_init=None,
        means_init=None,
        precisions_init=None,
        reg_covar=1e-6,
        w=0.0,
        fixed_weights=False,
        fixed_means=False,
        fixed_covariances=False,
        split_merge=0,
        batch_size=1000,
        step_exponent=0.6,
        learning_rate=0.01,
        random_state=None,
        warm_start=False,
        verbose=0,
        method="deprecated",
        verbose_interval="deprecated",
    ):
        self.n_components = n_components
        self.solver = solver
        self.tol = tol
        self.max_iter = max_iter
        self.n_init = n_init
        self.init_params = init_params
        self.weights_init = weights_init
        self.means_init = means_init
        self.precisions_init = precisions_init
        self.reg_covar = reg_covar
        self.w = w
        self.fixed_weights = fixed_weights
        self.fixed_means = fixed_means
        self.fixed_covariances = fixed_covariances
        self.split_merge = split_merge
        self.batch_size = batch_size
        self.step_exponent = step_exponent
        self.learning_rate = learning_rate
        self.random_state = random_state
        self.warm_start = warm_start
        self.verbose = verbose
        self.method = method
        self.verbose_interval = verbose_interval

    _renamed_parameters = {"method": "solver"}
    _retired_defaults = {"verbose_interval": None}
    _renamed_attributes = {"lower_bounds_": ("objective_history_", False)}

    _peer_methods = {
        "logL": ("xdgmm", "score(X, X_cov=Xerr) * len(X) for the total log-likelihood"),
        "logprob_a": (
            "astroML",
            "predict_log_proba(X, X_cov=Xerr) + score_samples(X, X_cov=Xerr)[:, None] "
            "for log(alpha_j N_j) of each point and component; score_samples(X, "
            "X_cov=Xerr) for their logsumexp",
        ),
        "mu": ("astroML", "means_"),
        "V": ("astroML", "covariances_"),
        "alpha": ("astroML", "weights_"),
        "weights": ("xdgmm", "weights_"),
        "labels": ("xdgmm", "feature_names_in_ (fit on a pandas DataFrame)"),
        "bic_test": (
            "xdgmm",
            "bic(X, X_cov=Xerr) of a fit for each n_components, or GridSearchCV over "
            "n_components (score is the held-out log-likelihood)",
        ),
        "save_model": ("xdgmm", "joblib.dump(xd, path) (or pickle)"),
        "read_model": ("xdgmm", "xd = joblib.load(path)"),
    }

    # astroML's XDGMM(n_components, max_iter): the second positional parameter
    _positional_advice = "ExtremeDeconvolution(n_components, max_iter=N) (astroML's XDGMM(K, N))"

    def _validate_params(self):
        method = self.method
        if isinstance(method, str) and method.lower() in ("bovy", "astroml"):
            from sklearn.utils._param_validation import InvalidParameterError

            raise InvalidParameterError(
                f"method={method!r} is xdgmm's choice between two implementations of the same "
                "EM (Bovy et al. 2011); there is one here. Drop it: 'method' is the "
                "deprecated name of solver, whose default 'em' is that EM."
            )
        super()._validate_params()

    _objective_name = "mean log-likelihood per point"
    _maximise = True
    _fitted_attribute = "means_"

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = True
        tags.transformer_tags = None
        return tags

    # ------------------------------------------------------------------ kernels

    def _estep(self, data, params, n_threads):
        """Summed statistics (q, s1, A) and the weighted log-likelihood at ``params``."""
        return estep(data, params, n_threads, self.reg_covar)

    def _log_prob(self, data, params, posterior=False):
        """(n, K) log alpha_j N(x_i | ...) and, if ``posterior``, the posterior of each v_i."""
        if isinstance(data, ObservationBlocks):
            return data.log_prob(params, self.reg_covar, posterior)
        return log_prob(data, params, self.reg_covar, posterior)

    def _m_step(self, stats, params, fixed, warned):
        """Bovy et al. (2011) M-step from the statistics centred on the current means."""
        return m_step(stats, params, fixed, warned, self.w, self.reg_covar,
                      noisy=self._floors_covariances())  # fmt: skip

    def _floors_covariances(self):
        """Whether ``reg_covar`` floors the covariances of this fit (``floors_covariances``);
        a model pickled before the flag was kept floors them when fitted with noise."""
        return getattr(self, "_floored", getattr(self, "_fitted_with_noise", False))

    def _penalty(self, covs, fixed_cov):
        return penalty(covs, fixed_cov, self.w)

    def _stochastic_step(self, state, batch, fixed, n_threads, total):
        """One minibatch step; returns the minibatch's weighted log-likelihood."""
        params = state.params()
        stats = self._estep(batch, params, n_threads)
        if isinstance(state, OnlineEMState):
            state.step(stats, fixed, self.step_exponent, self.w,
                       float(batch.sample_weight.sum()) / total,
                       noisy=self._floors_covariances())  # fmt: skip
        else:
            state.step(stats, fixed, self.learning_rate, self.w,
                       float(batch.sample_weight.sum()), total)  # fmt: skip
        return stats[3]

    # ------------------------------------------------------------------ the fitting loop's hooks

    def _initialise(self, problem, rng):
        data = problem.data
        if isinstance(data, ObservationBlocks):
            data = data.start_sample(rng)
        else:  # the points an out-of-core fit starts from, so that both fits are one
            index = start_index(data.n, rng)
            data = data if index is None else data.take(index)
        return self._start_state(problem, initial_params(self, data, rng))

    def _start_state(self, problem, params, fixed=None):
        """The state of a run of the fit's solver from ``params`` (``fixed`` overrides the
        masks of the components held fixed, as split-and-merge does)."""
        params = tuple(np.asarray(a, dtype=np.float64) for a in params)
        fixed = problem.fixed if fixed is None else fixed
        if problem.solver != "sgd" and self.reg_covar > 0 and self._floors_covariances():
            # EM under V >= reg_covar * I rises from a start that satisfies it; from one
            # below (precisions_init, or a warm start after reg_covar was raised) its first
            # step fell, and the fit stopped there, below the floor. The covariances held
            # fixed are the user's.
            weights, means, covs = params
            free = ~np.asarray(fixed[2], dtype=bool)
            covs = covs.copy()
            covs[free] = floor_eigenvalues(covs[free], self.reg_covar)
            params = (weights, means, covs)
        if problem.solver == "em":
            return EMRun(problem, params, fixed)
        if problem.solver == "minibatch_em":
            # a batch is at most all the points: the running statistics start with the
            # weight of one batch, which a larger batch_size would inflate
            batch = min(self.batch_size, problem.data.n)
            optimiser = OnlineEMState(params, problem.data.mean_weight() * batch,
                                      reg_covar=self.reg_covar)  # fmt: skip
        else:
            optimiser = AdamState(params, fixed, self.reg_covar)
        return StochasticRun(problem, optimiser, fixed)

    def _warm_start_mismatch(self, problem):
        K, d = self.n_components, n_dims(problem.data)
        if self.means_.shape != (K, d):
            return (f"the data have dimension {d} and n_components={K}, the previous fit "
                    f"had {self.means_.shape[1]} and {self.means_.shape[0]}")  # fmt: skip
        return None

    def _continue(self, problem):
        """The previous fit's parameters, with the fixed components (``fixed_*``) at their
        initial values."""
        fixed = problem.fixed
        weights, means, covs = (np.array(a, dtype=np.float64) for a in self._fitted_params())
        init = check_init_params(self, *means.shape)
        for current, start, mask in zip((weights, means, covs), init, fixed):
            if mask.any():
                current[mask] = start[mask]
        if fixed[0].any() and not fixed[0].all():
            # the free weights share what the fixed ones leave, in their previous proportions
            free = ~fixed[0]
            if weights[free].sum() > 0:
                weights[free] *= max(1.0 - weights[fixed[0]].sum(), 0.0) / weights[free].sum()
        return self._start_state(problem, (weights, means, covs))

    def _start_objective(self, state):
        return state.start(self)

    def _iterate(self, state, iteration):
        return state.iterate(self, iteration)

    def _monitored(self, state, value):
        return state.monitored(value)

    def _snapshot(self, state, iteration):
        return state.snapshot()

    def _run_objective(self, run):
        return run.state.finish(self)

    def _progress_every(self):
        every = self.verbose_interval
        return None if isinstance(every, str) else every

    def _unconverged_message(self, run):
        # every solver stops by tol (the stochastic ones between epochs), so every one
        # warns when max_iter came first
        if self.max_iter == 0:
            return None
        return super()._unconverged_message(run)

    def _fit_from(self, state):
        run = super()._fit_from(state)
        if state.problem.solver == "em" and self.split_merge:
            run = split_merge(self, state.problem, run)
        return run

    # ------------------------------------------------------------------ fitting

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y=None, *, X_cov=None, projection=None, sample_weight=None):
        """Fit the deconvolved mixture.

        Parameters
        ----------
        X : {array-like, AnnData} of shape (n_samples, n_features)
            Observations x_i; NaN marks a missing coordinate, which is dropped from that
            point's projection. An AnnData contributes its ``.X``.
        y : Ignored
            A second positional array of the shape of X, or of three dimensions,
            is refused: pass the noise by keyword, ``X_cov=``.
        X_cov : array-like of shape (n_samples, n_features, n_features) or \
                (n_samples, n_features), default=None
            Noise covariance S_i of each point, or its diagonal (the variances). None means
            no noise.
        projection : array-like of shape (n_samples, n_features, n_dims) or \
                (n_features, n_dims), default=None
            Projection R_i of each point, or one shared by all. None means the identity.
        sample_weight : array-like of shape (n_samples,), default=None
            Weight of each point in the likelihood. Weights count copies: a point of weight
            3 is fitted as three copies of it, start included (the start's covariances are
            shrunk by one point of weight 1, or of the mean weight if that is smaller).
            Scaling every weight by the same number above 1 therefore changes the start,
            and the fit within ``tol``; relative weights below 1 do not.

        Returns
        -------
        self : ExtremeDeconvolution
            The fitted estimator.
        """
        check_ignored_y(self, y, X, advice=noise_advice("fit"))
        check_noise_like_y(self, y, X, X_cov, "fit")
        rng = check_random_state(self.random_state)
        # out of core, the first start's points are read in the pass that checks the data
        data = self._read_observations(X, X_cov, projection, sample_weight, reset=True,
                                       start_rng=rng)  # fmt: skip
        self._fitted_with_noise = data.noise_mode != 0
        self._fitted_with_projection = is_projected(data)
        self._floored = floors_covariances(data)
        check_enough_samples(self, data.n)
        if data.total <= 0:
            raise ValueError("sample_weight must have a positive sum; got all zeros.")
        if not (isinstance(self.verbose_interval, str) and self.verbose_interval == "deprecated"):
            warn(
                "verbose_interval is deprecated in 0.2 and will be removed in 0.3: verbose=1 "
                "prints about every tenth of the iterations, verbose=2 every one.",
                FutureWarning,
            )
        solver = self._parameter("solver")
        # a value that this solver never reads would fit the same model whatever it is
        # (step_exponent is partial_fit's too, whatever the solver)
        for names, solvers in ((("batch_size",), ("minibatch_em", "sgd")),
                               (("learning_rate",), ("sgd",)),
                               (("split_merge",), ("em",))):  # fmt: skip
            if solver not in solvers:
                warn_unused_parameters(
                    self,
                    names,
                    f"with solver={' or '.join(map(repr, solvers))}",
                    f"Set solver={solvers[0]!r}",
                )
        problem = Problem(data, fixed_masks(self, self.n_components), effective_n_threads(), rng,
                          solver)  # fmt: skip
        start = self._warm_state(problem)
        if start is not None:
            run = self._fit_from(start)  # one run, whatever n_init
        else:
            run = self._best_run(problem, rng, self.n_init)
        self._end_run(run)
        self._set_params(run.state.params, data.dtype)
        self._warn_if_reg_covar_dominates(run.state.params, problem.fixed[2],
                                          approached=problem.solver == "sgd")  # fmt: skip
        self._fit_weight = (
            data.total if isinstance(data, ObservationBlocks)
            else float(np.sum(data.sample_weight, dtype=np.float64))
        )  # fmt: skip
        if hasattr(self, "_online_state"):
            del self._online_state
        self.lower_bound_ = float(run.state.loglik)
        self.objective_history_ = np.asarray(run.history, dtype=np.float64)
        return self

    def _warn_if_reg_covar_dominates(self, params, fixed_covs, approached=False):
        """Data on a scale far below 1 (1e-8 degrees, 1e-5 magnitudes) got covariances that
        were mostly ``reg_covar``, the absolute floor of GaussianMixture's convention, in
        silence: without noise (reg_covar floored or added), warn when it is at least a
        tenth of the fitted mixture's largest variance (a constant coordinate beside
        others, what the floor is for, does not warn); with noise, when a component's
        covariance is at the floor (within a tenth of it when ``approached``: Adam's
        ``L L^T + reg_covar I`` only nears it)."""
        if self.reg_covar <= 0:
            return
        weights, means, covs = (np.asarray(a, dtype=np.float64) for a in params)
        # incomplete or projected points without noise are floored too, but a component at
        # the floor there is a degenerate direction (a constant coordinate), what reg_covar
        # is for: they get the second test, of a floor that dominates the mixture
        if getattr(self, "_fitted_with_noise", False):
            # a covariance rebuilt from clipped eigenvalues is off the floor by eps times
            # its largest; one held fixed is the user's, not the fit's
            evals = np.linalg.eigvalsh(covs)
            near = self.reg_covar * (1.1 if approached else 1 + 1e-9)
            near = near + 100 * np.finfo(np.float64).eps * evals[:, -1]
            low = (evals[:, 0] <= near) & ~np.asarray(fixed_covs, dtype=bool)
            if low.any():
                at = "near (Adam nears it)" if approached else "at"
                warn(
                    f"The covariances of components {np.flatnonzero(low).tolist()} are {at} "
                    f"the floor reg_covar={self.reg_covar:g} in some "
                    "direction: their deconvolved variance there is below what this fit "
                    "can give, and is reported as about reg_covar. Set reg_covar lower (0 "
                    "when every point has noise in every coordinate), or rescale the points "
                    "(and X_cov by the square of the factor) if their variances are far "
                    "below 1.",
                    UserWarning,
                )
            return
        mean = weights @ means
        second = np.einsum("j,jab->ab", weights, covs + means[:, :, None] * means[:, None, :])
        largest = float(np.max(np.diag(second) - mean**2))
        if self.reg_covar >= 0.1 * largest:
            warn(
                f"reg_covar={self.reg_covar:g} is added to every covariance, and the fitted "
                f"mixture's largest variance is {largest:.3g}: its covariances are largely "
                "reg_covar. Rescale the points (and X_cov by the square of the factor), or "
                f"set reg_covar far below the data's variances (e.g. "
                f"reg_covar={largest * 1e-6:.1g}).",
                UserWarning,
            )

    def _set_params(self, params, dtype):
        weights, means, covs = (np.asarray(a, dtype=np.float64) for a in params)
        covs = 0.5 * (covs + np.swapaxes(covs, 1, 2))
        chol = np.linalg.cholesky(covs)
        # numpy rather than scipy.linalg: these are tiny, and scipy's LAPACK wrappers are slow
        # to start while the OpenMP threads of the kernels are still spinning.
        prec_chol = np.swapaxes(np.linalg.inv(chol), 1, 2)
        self.weights_ = weights.astype(dtype)
        self.means_ = means.astype(dtype)
        self.covariances_ = covs.astype(dtype)
        self.precisions_cholesky_ = prec_chol.astype(dtype)
        self.precisions_ = (prec_chol @ np.swapaxes(prec_chol, 1, 2)).astype(dtype)

    def partial_fit(self, X, y=None, *, X_cov=None, projection=None, sample_weight=None):
        """One minibatch online-EM step on the points given.

        The first call initialises the mixture from these points (as `fit` would); later
        calls update it with step size ``(t + 2) ** -step_exponent`` after ``t`` updates.
        After a ``fit``, the update continues the fitted mixture, and ``t`` counts the fitted
        data as minibatches of this one's weight (the fitted data's total weight divided by
        this minibatch's). Use it for data that do not fit in memory.

        Parameters
        ----------
        X : {array-like, AnnData} of shape (n_samples, n_features)
            A minibatch of observations (NaN for missing coordinates).
        y : Ignored
            A second positional array of the shape of X, or of three dimensions,
            is refused: pass the noise by keyword, ``X_cov=``.
        X_cov : array-like of shape (n_samples, n_features, n_features) or \
                (n_samples, n_features), default=None
            Their noise covariances or variances.
        projection : array-like of shape (n_samples, n_features, n_dims) or \
                (n_features, n_dims), default=None
            Their projections.
        sample_weight : array-like of shape (n_samples,), default=None
            Their weights.

        Returns
        -------
        self : ExtremeDeconvolution
            The updated estimator.
        """
        # every call: the parameters may have changed with set_params (a cheap check)
        self._validate_params()
        check_ignored_y(self, y, X, method="partial_fit",
                        advice=noise_advice("partial_fit"))  # fmt: skip
        check_noise_like_y(self, y, X, X_cov, "partial_fit")
        first = not hasattr(self, "means_")
        if not first:  # a batch without the noise the earlier batches had
            self._warn_if_missing("partial_fit", "X_cov", X_cov)
            self._warn_if_missing("partial_fit", "projection", projection)
        if not first and self.means_.shape[0] != self.n_components:
            raise ValueError(
                f"n_components={self.n_components}, but the model being updated has "
                f"{self.means_.shape[0]} components. partial_fit continues the fitted "
                "mixture; call fit to start one with the new n_components."
            )
        if is_out_of_core(X):
            # a step on each block of points (a Dask array's chunks), in order: as many
            # calls on the blocks read into memory
            blocks = self._read_observations(X, X_cov, projection, sample_weight, reset=first,
                                             summarise=False)  # fmt: skip
            for data in blocks.chunks():
                self._partial_fit_step(data, not hasattr(self, "means_"))
        else:
            data = validate_observations(self, X, X_cov, projection, sample_weight, reset=first)
            self._partial_fit_step(data, first)
        self._warn_if_reg_covar_dominates(self._fitted_params(),
                                          fixed_masks(self, self.n_components)[2])  # fmt: skip
        return self

    def _partial_fit_step(self, data, first):
        """One online-EM step on validated points (the first initialises the mixture)."""
        n_threads = effective_n_threads()
        fixed = fixed_masks(self, self.n_components)
        batch_weight = float(data.sample_weight.sum())
        # Work on local copies and set the attributes at the end: an interrupted call leaves
        # the estimator as it was.
        if first:
            check_enough_samples(self, data.n)
            rng = check_random_state(self.random_state)
            params = tuple(np.asarray(a, dtype=np.float64) for a in initial_params(self, data, rng))
            state = OnlineEMState(params, batch_weight, reg_covar=self.reg_covar)
            seen, history = 0.0, np.empty(0)
        elif not hasattr(self, "_online_state"):
            # Continue from a fit: its parameters, as if its data had come before in
            # minibatches of this one's weight, so that the step size continues Cappe's
            # schedule from there instead of restarting at its largest step (one small
            # minibatch would outweigh the whole fit). The traces start with this call.
            fitted = getattr(self, "_fit_weight", batch_weight)
            t = int(round(fitted / batch_weight)) if batch_weight > 0 else 0
            params = tuple(np.asarray(a, dtype=np.float64) for a in self._fitted_params())
            state = OnlineEMState(params, batch_weight, t=t, reg_covar=self.reg_covar)
            seen, history = fitted, np.empty(0)
        else:
            state = OnlineEMState.from_arrays(self._online_state, self.reg_covar)
            seen, history = self._online_seen, self.objective_history_
        seen += batch_weight
        # a floor once any minibatch needed it (a model continued from a fit: as it had)
        floored = floors_covariances(data) or (not first and self._floors_covariances())
        stats = self._estep(data, state.params(), n_threads)
        state.step(stats, fixed, self.step_exponent, self.w, batch_weight / seen,
                   noisy=floored)  # fmt: skip
        history = np.append(np.asarray(history, dtype=np.float64), stats[3] / batch_weight)
        self._online_state = state.to_arrays()
        self._online_seen = seen
        self._fitted_with_noise = data.noise_mode != 0 or (
            not first and getattr(self, "_fitted_with_noise", False)
        )
        self._fitted_with_projection = is_projected(data) or (
            not first and getattr(self, "_fitted_with_projection", False)
        )
        self._floored = floored
        self._set_params(state.params(), data.dtype)
        self.objective_history_ = history
        self.lower_bound_ = float(history[-1])
        self.n_iter_ = len(history)
        self.converged_ = False
        return self

    # ------------------------------------------------------------------ prediction

    def _fitted_params(self):
        return (self.weights_, self.means_, self.covariances_)

    def _predict_data(self, X, X_cov, projection):
        check_is_fitted(self)
        # out of core: one pass, which checks the blocks as it reads them
        return self._read_observations(X, X_cov, projection, None, reset=False,
                                       summarise=False)  # fmt: skip

    def _read_observations(self, X, X_cov, projection, sample_weight, reset, summarise=True,
                           start_rng=None):  # fmt: skip
        """The observations validated: in memory, or read by blocks of points
        (:class:`ObservationBlocks`, on the cluster when one is active) when X is out of
        core."""
        if not is_out_of_core(X):
            return validate_observations(self, X, X_cov, projection, sample_weight, reset)
        shape = tuple(getattr(X, "shape", ()))
        if len(shape) != 2 or shape[1] == 0:
            raise ValueError(
                f"X must be 2-D with at least one feature; got shape {shape}. Reshape a "
                "single feature with X.reshape(-1, 1)."
            )
        # with a projection, the points scored may observe other coordinates than fit's
        out_of_core_features(self, X, int(shape[1]), reset, check=projection is None)
        d = None if reset else self.means_.shape[1]
        client = current_client() if summarise else None
        return ObservationBlocks(X, X_cov, projection, sample_weight, d, client, summarise,
                                 start_rng)  # fmt: skip

    def _estimate_weighted_log_prob(self, X, X_cov, projection):
        data = self._predict_data(X, X_cov, projection)
        params = tuple(np.asarray(a, dtype=data.dtype) for a in self._fitted_params())
        return self._log_prob(data, params)[0]

    def _warn_if_missing(self, method, keyword, value):
        """Warn when a model fitted with ``X_cov`` or ``projection`` reads points without it.

        Model selection (``GridSearchCV``, ``cross_validate``) calls ``score(X_test)``
        without the test points' side inputs unless they are routed to ``score``. Noisy
        points scored as noise-free meet the deconvolved density, whose narrow components
        penalise them, and the criterion no longer selects the model of the data; points
        of a projected survey read without their projection are taken as points of v, with
        a wrong likelihood and a wrong component. Nothing else would say so.
        """
        flag, consequence, plain = _MISSING_INPUTS[keyword]
        if value is not None or not getattr(self, flag, False):
            return
        warn(
            f"{type(self).__name__} was fitted with {keyword}, but {method} got no {keyword}: "
            f"{consequence} Pass it, {method}(X, {keyword}=...), or {plain}. In GridSearchCV "
            "or cross_validate, route it: sklearn.set_config(enable_metadata_routing=True) "
            f"and estimator.set_fit_request({keyword}=True).set_score_request({keyword}=True).",
            UserWarning,
        )

    def _log_likelihoods(self, X, X_cov, projection):
        """log p(x_i) of each observation (:meth:`score_samples` without its warnings)."""
        return logsumexp(self._estimate_weighted_log_prob(X, X_cov, projection), axis=1)

    @_observations_doc
    def score_samples(self, X, *, X_cov=None, projection=None):
        """Log-likelihood of each observation under the mixture convolved with its noise.

        Parameters
        ----------
        {observations}

        Returns
        -------
        log_prob : ndarray of shape (n_samples,)
            ``log p(x_i) = log sum_j alpha_j N(x_i | R_i m_j, R_i V_j R_i^T + S_i)`` over the
            observed coordinates of each point.
        """
        self._warn_if_missing("score_samples", "X_cov", X_cov)
        self._warn_if_missing("score_samples", "projection", projection)
        return self._log_likelihoods(X, X_cov, projection)

    @_observations_doc
    def score(self, X, y=None, *, X_cov=None, projection=None):
        """Mean log-likelihood per observation.

        Parameters
        ----------
        X : {array-like, AnnData} of shape (n_samples, n_features)
            Observations.
        y : Ignored
            A second positional array of the shape of X, or of three dimensions,
            is refused: pass the noise by keyword, ``X_cov=``.
        X_cov : array-like, default=None
            Their noise, as in `fit`. A model fitted with ``X_cov`` warns when it gets none
            here: in ``GridSearchCV`` or ``cross_validate``, route it with
            ``sklearn.set_config(enable_metadata_routing=True)`` and
            ``set_fit_request(X_cov=True).set_score_request(X_cov=True)``.
        projection : array-like, default=None
            Their projections, as in `fit`.

        Returns
        -------
        log_likelihood : float
            Mean of `score_samples`.
        """
        check_ignored_y(self, y, X, method="score",
                        advice=noise_advice("score"))  # fmt: skip
        check_noise_like_y(self, y, X, X_cov, "score")
        self._warn_if_missing("score", "X_cov", X_cov)
        self._warn_if_missing("score", "projection", projection)
        return float(self._log_likelihoods(X, X_cov, projection).mean(dtype=np.float64))

    @_observations_doc
    def predict_proba(self, X, *, X_cov=None, projection=None):
        """Posterior probability of each component for each observation.

        Parameters
        ----------
        {observations}

        Returns
        -------
        resp : ndarray of shape (n_samples, n_components)
            Responsibilities q_ij.
        """
        self._warn_if_missing("predict_proba", "X_cov", X_cov)
        self._warn_if_missing("predict_proba", "projection", projection)
        return np.exp(self._log_responsibilities(X, X_cov, projection))

    @_observations_doc
    def predict_log_proba(self, X, *, X_cov=None, projection=None):
        """Logarithm of the posterior probability of each component for each observation.

        Finite where :meth:`predict_proba` underflows to 0 (a point far from a component).
        Added to :meth:`score_samples`, it gives the weighted log-density of each point
        under each component, ``log(alpha_j N(x_i | m_j, V_j + S_i))`` (astroML's
        ``logprob_a``).

        Parameters
        ----------
        {observations}

        Returns
        -------
        log_resp : ndarray of shape (n_samples, n_components)
            ``log q_ij``.
        """
        self._warn_if_missing("predict_log_proba", "X_cov", X_cov)
        self._warn_if_missing("predict_log_proba", "projection", projection)
        return self._log_responsibilities(X, X_cov, projection)

    def _log_responsibilities(self, X, X_cov, projection):
        logp = self._estimate_weighted_log_prob(X, X_cov, projection)
        return logp - logsumexp(logp, axis=1, keepdims=True)

    @_observations_doc
    def predict(self, X, *, X_cov=None, projection=None):
        """Most probable component of each observation.

        Parameters
        ----------
        {observations}

        Returns
        -------
        labels : ndarray of shape (n_samples,)
            Component indices.
        """
        self._warn_if_missing("predict", "X_cov", X_cov)
        self._warn_if_missing("predict", "projection", projection)
        return self._estimate_weighted_log_prob(X, X_cov, projection).argmax(axis=1)

    @_observations_doc
    def deconvolve(self, X, *, X_cov=None, projection=None):
        """Posterior of the noise-free v_i behind each observation.

        Given x_i, v_i is a mixture of Gaussians with weights q_ij, means b_ij and covariances
        B_ij; this returns its mean and covariance (the deconvolved estimate of each point).

        Parameters
        ----------
        {observations}

        Returns
        -------
        mean : ndarray of shape (n_samples, n_dims)
            ``sum_j q_ij b_ij``.
        covariance : ndarray of shape (n_samples, n_dims, n_dims)
            ``sum_j q_ij [B_ij + (b_ij - mean)(b_ij - mean)^T]``.
        """
        self._warn_if_missing("deconvolve", "X_cov", X_cov)
        self._warn_if_missing("deconvolve", "projection", projection)
        data = self._predict_data(X, X_cov, projection)
        params = tuple(np.asarray(a, dtype=data.dtype) for a in self._fitted_params())
        _, mean, cov = self._log_prob(data, params, posterior=True)
        return mean, cov

    def condition(self, X, X_cov=None):
        """The mixture of some coordinates given measured values of the others.

        XDGMM's ``condition``: ``X`` holds one point's values, with NaN for the
        coordinates to predict; the result is a fitted :class:`ExtremeDeconvolution` over
        those coordinates, the deconvolved density conditioned on the measured ones (their
        measurement noise ``X_cov`` added to each component's covariance). Its
        ``sample``, ``score_samples``, ``means_`` and ``weights_`` predict the unmeasured
        quantities with their uncertainty, several modes included. For the conditional
        mean and covariance of many points at once, pass them with NaN to
        :meth:`deconvolve`.

        Parameters
        ----------
        X : array-like of shape (n_dims,)
            Values of the deconvolved coordinates; NaN marks those to predict. A pandas
            Series is read by its labels, which must be the feature names seen in fit (in
            any order); a one-row DataFrame must have them as its columns, in their order.
            A dict of feature name -> value (XDGMM's ``X_dict``) gives the measured values
            by name, the features it leaves out being predicted.
        X_cov : array-like of shape (n_dims,) or (n_dims, n_dims), or dict, default=None
            Noise of the given values: variances or a covariance (entries of the NaN
            coordinates are ignored), labelled as ``X`` may be, or a dict of feature name
            -> variance (XDGMM's ``Xerr_dict``). None means exact values.

        Returns
        -------
        conditional : ExtremeDeconvolution
            A fitted estimator over the NaN coordinates (``n_features_in_`` of them, with
            their names when the fit had feature names), with the parameters of this one.

        Examples
        --------
        >>> import numpy as np
        >>> from sklearn_cogaps import ExtremeDeconvolution
        >>> rng = np.random.default_rng(0)
        >>> v = rng.multivariate_normal([0, 0], [[1, 0.9], [0.9, 1]], 2000)
        >>> xd = ExtremeDeconvolution(1, random_state=0).fit(v)
        >>> given = xd.condition([1.0, np.nan])  # predict the second from the first
        >>> round(float(given.means_[0, 0]), 1), round(float(given.covariances_[0, 0, 0]), 2)
        (0.9, 0.19)
        """
        check_is_fitted(self)
        d = self.means_.shape[1]
        names = getattr(self, "feature_names_in_", None)
        if is_anndata(X):  # one observation: its values, by the fitted names
            X, var_names = unwrap_anndata(X)
            X = X.toarray() if sparse.issparse(X) else np.asarray(X)
            if names is not None and list(var_names) != list(names):
                raise ValueError(
                    f"The AnnData's var_names must be the feature names seen in fit, "
                    f"{list(names)}; got {list(var_names)}."
                )
        X, X_cov = aligned_by_name(X, X_cov, names)
        known, x, noise = given_values(X, X_cov, d)
        weights, means, covs = condition_mixture(
            *(np.asarray(a, dtype=np.float64) for a in self._fitted_params()), known, x, noise
        )
        conditional = clone(self)
        conditional._set_params((weights, means, covs), self.means_.dtype)
        conditional.n_features_in_ = int((~known).sum())
        names = getattr(self, "feature_names_in_", None)
        if names is not None and len(names) == d:
            conditional.feature_names_in_ = names[~known]
        conditional.converged_ = True
        conditional.n_iter_ = 0
        return conditional

    def fit_predict(self, X, y=None, *, X_cov=None, projection=None, sample_weight=None):
        """Fit, then give each observation its most probable component.

        As :meth:`sklearn.mixture.GaussianMixture.fit_predict`: ``fit(X, ...)`` followed
        by :meth:`predict` on the same observations, with their noise and projections.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Observations, as in :meth:`fit`.
        y : Ignored
            Not used, present for API consistency.
        X_cov : array-like, default=None
            As in :meth:`fit`.
        projection : array-like, default=None
            As in :meth:`fit`.
        sample_weight : array-like of shape (n_samples,), default=None
            As in :meth:`fit`.

        Returns
        -------
        labels : ndarray of shape (n_samples,)
            Component indices.
        """
        self.fit(X, y, X_cov=X_cov, projection=projection, sample_weight=sample_weight)
        return self.predict(X, X_cov=X_cov, projection=projection)

    def sample(self, n_samples=1, *, random_state=None, size=None):
        """Draw from the deconvolved mixture (reproducible from ``random_state``).

        As in scikit-learn's mixtures, an integer ``random_state`` of the estimator gives
        the same draws at every call, and so do the conditional mixtures of
        :meth:`condition` (clones of this estimator) for every point conditioned on: their
        draws are not independent. To draw independently across calls or across a
        catalogue's points, pass one ``numpy.random.Generator`` as ``random_state`` here.

        Parameters
        ----------
        n_samples : int, default=1
            Number of draws.
        random_state : int, RandomState instance, Generator or None, default=None
            The draws' randomness for this call; None uses the estimator's
            ``random_state``.
        size : None, default=None
            The name astroML gives ``n_samples``: refused with what to write.

        Returns
        -------
        X : ndarray of shape (n_samples, n_dims)
            Draws of v.
        y : ndarray of shape (n_samples,)
            Their components.
        """
        check_is_fitted(self)
        shape = size if size is not None else n_samples
        if isinstance(shape, tuple) and all(
            isinstance(s, Integral) and not isinstance(s, bool) for s in shape
        ):
            # astroML's sample(size) takes a shape; the draws here are rows of one array
            total = int(np.prod(shape))
            raise TypeError(
                f"sample takes a number of draws, not a shape: write X, y = "
                f"sample({total}) and X.reshape({', '.join(map(str, shape))}, -1)."
            )
        if size is not None:
            raise TypeError(f"sample takes n_samples, astroML's size: write sample({size!r}).")
        if isinstance(n_samples, bool) or not isinstance(n_samples, Integral):
            raise TypeError(
                f"n_samples must be an integer; got {n_samples!r}. Write "
                f"sample({int(n_samples) if isinstance(n_samples, Real) else 1})."
            )
        if n_samples < 1:
            raise ValueError(f"n_samples must be at least 1; got {n_samples}.")
        rng = self.random_state if random_state is None else random_state
        if not isinstance(rng, np.random.Generator):
            rng = check_random_state(rng)
        weights = np.asarray(self.weights_, dtype=np.float64)
        counts = rng.multinomial(n_samples, weights / weights.sum())
        X = np.vstack(
            [
                rng.multivariate_normal(m, c, int(k))
                for m, c, k in zip(
                    self.means_.astype(float), self.covariances_.astype(float), counts
                )
            ]
        )
        y = np.repeat(np.arange(weights.size), counts)  # the fitted K, whatever set_params
        return X, y

    def _n_parameters(self):
        K, d = self.means_.shape
        fw, fm, fc = fixed_masks(self, K)
        free_w = max(K - int(fw.sum()) - 1, 0)
        return free_w + d * int((~fm).sum()) + d * (d + 1) // 2 * int((~fc).sum())

    @_observations_doc
    def bic(self, X, *, X_cov=None, projection=None):
        """Bayesian information criterion (lower is better).

        Parameters
        ----------
        {observations}

        Returns
        -------
        bic : float
            ``-2 log L + n_free_parameters log n``; fixed parameters are not counted.
        """
        self._warn_if_missing("bic", "X_cov", X_cov)
        self._warn_if_missing("bic", "projection", projection)
        log_prob = self._log_likelihoods(X, X_cov, projection)
        # summed in float64 whatever the points' dtype, as score averages them
        return float(-2 * log_prob.sum(dtype=np.float64)
                     + self._n_parameters() * np.log(log_prob.shape[0]))  # fmt: skip

    @_observations_doc
    def aic(self, X, *, X_cov=None, projection=None):
        """Akaike information criterion (lower is better).

        Parameters
        ----------
        {observations}

        Returns
        -------
        aic : float
            ``-2 log L + 2 n_free_parameters``.
        """
        self._warn_if_missing("aic", "X_cov", X_cov)
        self._warn_if_missing("aic", "projection", projection)
        log_prob = self._log_likelihoods(X, X_cov, projection)
        return float(-2 * log_prob.sum(dtype=np.float64) + 2 * self._n_parameters())


# The methods that take observations: astroML's argument names and its positional noise get
# what to write (the number: positional arguments that each one takes, self included).
for _name, _n_positional in (
    ("fit", 3),
    ("partial_fit", 3),
    ("fit_predict", 3),
    ("score", 3),
    ("score_samples", 2),
    ("predict", 2),
    ("predict_proba", 2),
    ("predict_log_proba", 2),
    ("deconvolve", 2),
    ("bic", 2),
    ("aic", 2),
    ("condition", 3),
):
    _habits = peer_arguments(
        _PEER_ARGUMENTS, n_positional=_n_positional, positional_advice=_POSITIONAL_NOISE
    )
    setattr(ExtremeDeconvolution, _name, _habits(getattr(ExtremeDeconvolution, _name)))
del _name, _n_positional, _habits
