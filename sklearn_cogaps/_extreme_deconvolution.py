"""Extreme deconvolution: Gaussian mixtures fitted to noisy, projected and incomplete data.

The model (Bovy, Hogg & Roweis 2011): x_i = R_i v_i + e_i with e_i ~ N(0, S_i) known and
v_i drawn from the mixture sum_j alpha_j N(m_j, V_j). Three fitting methods share one compiled
E-step (``_xd_fast``): Bovy's batch EM, the minibatch online EM of Ritchie & Murray (2019)
with its numerically stable covariance update, and stochastic gradient ascent with Adam on
softmax / Cholesky parameters (Ritchie & Murray 2019).
"""

import copy
import warnings
from numbers import Integral, Real

import numpy as np
from scipy.special import logsumexp
from sklearn.base import BaseEstimator, DensityMixin, _fit_context
from sklearn.cluster import KMeans, kmeans_plusplus
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils import check_random_state
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import (
    _check_sample_weight,
    check_array,
    check_is_fitted,
)

from . import _xd_fast
from ._base import (
    DataInFitMixin,
    check_ignored_y,
    check_side_labels,
    validate_input,
    warn_warm_start_ignored,
)
from ._progress import Progress
from ._utils._adam import Adam
from ._utils._openmp_helpers import effective_n_threads, kernel_threads
from ._utils._status import NOT_POSITIVE_DEFINITE, raise_for_status

__all__ = ["ExtremeDeconvolution"]

_EMPTY1 = {np.float64: np.empty(0, np.float64), np.float32: np.empty(0, np.float32)}

# What to do instead of passing the noise as the second positional argument (astroML's
# XDGMM.fit(X, Xerr) takes it there).
_NOISE_ADVICE = (
    "give the noise of each point, pass it by keyword: fit(X, X_cov=Xerr) with covariances "
    "of shape (n_samples, n_features, n_features) or variances of shape (n_samples, "
    "n_features); projections go in projection=R and weights in sample_weight=w"
)

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


class _Data:
    """The validated input of one call: observations, noise, projection and weights.

    ``noise_mode`` is 0 (no noise), 1 (diagonal variances ``Sdiag`` (n, p)) or 2 (full
    ``Sfull`` (n, p, p)); ``R`` is the shared projection (p, d) or None for the identity;
    ``Rproj`` holds per-point projections (n, p, d) or is empty.
    """

    def __init__(self, X, noise_mode, Sdiag, Sfull, R, Rproj, sample_weight):
        self.X, self.noise_mode, self.Sdiag, self.Sfull = X, noise_mode, Sdiag, Sfull
        self.R, self.Rproj, self.sample_weight = R, Rproj, sample_weight

    @property
    def n(self):
        return self.X.shape[0]

    def take(self, idx):
        """The rows ``idx`` (a minibatch), as a new ``_Data``."""
        sub = _Data(
            np.ascontiguousarray(self.X[idx]),
            self.noise_mode,
            np.ascontiguousarray(self.Sdiag[idx]) if self.noise_mode == 1 else self.Sdiag,
            np.ascontiguousarray(self.Sfull[idx]) if self.noise_mode == 2 else self.Sfull,
            self.R,
            np.ascontiguousarray(self.Rproj[idx]) if self.Rproj.shape[0] else self.Rproj,
            np.ascontiguousarray(self.sample_weight[idx]),
        )
        return sub


def _chunks(n):
    """Number of chunks of points for the per-chunk sums: a function of n only."""
    return int(min(max(1, n // 256), 256))


def _check_noise_block(S, missing, offset):
    """Check full noise covariances (finite, symmetric, PSD) on their observed coordinates."""
    S = np.where(missing[:, :, None] | missing[:, None, :], 0.0, S.astype(np.float64))
    if not np.all(np.isfinite(S)):
        bad = np.flatnonzero(~np.isfinite(S).all(axis=(1, 2)))[0]
        raise ValueError(
            f"X_cov must be finite where X is observed; the covariance of point "
            f"{offset + bad} has non-finite entries."
        )
    asym = np.abs(S - np.swapaxes(S, 1, 2)).max(axis=(1, 2))
    scale = np.abs(S).max(axis=(1, 2))
    if np.any(asym > 1e-8 * scale + 1e-300):
        bad = int(np.argmax(asym > 1e-8 * scale + 1e-300))
        raise ValueError(
            f"X_cov must hold symmetric covariance matrices; the one of point "
            f"{offset + bad} is not symmetric (largest asymmetry {asym[bad]:.3g})."
        )
    eig = np.linalg.eigvalsh(S)
    neg = eig[:, 0] < -1e-10 * np.maximum(eig[:, -1], 0.0) - 1e-300
    if np.any(neg):
        bad = int(np.flatnonzero(neg)[0])
        raise ValueError(
            f"X_cov must be positive semi-definite; the covariance of point {offset + bad} "
            f"has eigenvalue {eig[bad, 0]:.3g}. Pass valid noise covariances."
        )


def _check_magnitude(X, missing):
    """Refuse observations whose squared deviations would overflow in the E- and M-steps.

    The fit sums ``n`` outer products of deviations of ``p`` coordinates: they stay finite
    while ``16 n p max|x|^2`` does.
    """
    if X.size == 0 or missing.all():
        return
    big = float(np.max(np.abs(np.where(missing, 0, X))))
    limit = np.sqrt(np.finfo(X.dtype).max / (16.0 * X.shape[0] * X.shape[1]))
    if big > limit:
        raise ValueError(
            f"X has an entry of magnitude {big:.3g}; with {X.shape[0]} points of "
            f"{X.shape[1]} coordinates in {X.dtype}, the sums of squared deviations overflow "
            f"above {limit:.3g}. Rescale X (and X_cov by the square of the factor)."
        )


def _threads(n, K, p, d, n_threads):
    """Threads worth starting for a sweep of n points (a Cholesky factor and solves per point
    and component). The result never depends on it."""
    return kernel_threads(5 * n * K * (p * p + p * d + d * d), n_threads)


def _component_error(i, j, reg_covar):
    where = "of every complete point" if i is None else f"of point {i}"
    return ValueError(
        f"The covariance T_ij = R_i V_j R_i^T + S_i {where} under component {j} is not "
        f"positive definite (reg_covar={reg_covar:g}). This happens when a component "
        f"collapses onto points without noise, on coordinates where the data are constant or "
        f"far larger than reg_covar, or with a singular projection. Increase reg_covar (for "
        f"example to 1e-6 times the largest variance of the data), set the prior w > 0, or "
        f"give every point some noise (X_cov)."
    )


class ExtremeDeconvolution(DataInFitMixin, DensityMixin, BaseEstimator):
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
    method : {"em", "minibatch_em", "sgd"}, default="em"
        ``"em"``: batch EM of Bovy et al. (2011). ``"minibatch_em"``: online EM on minibatches
        with the numerically stable covariance update of Ritchie & Murray (2019) and step sizes
        ``(t + 2) ** -step_exponent``. ``"sgd"``: stochastic gradient ascent of the
        log-likelihood with Adam on softmax weights and Cholesky factors with log-diagonal.
    tol : float, default=1e-6
        Convergence threshold on the gain of the mean log-likelihood per point (per iteration
        for ``"em"``, per pass over the data for the stochastic methods, whose per-epoch means
        are noisy: they usually run all ``max_iter`` epochs, without a warning).
    max_iter : int, default=100
        Maximum number of EM iterations (``"em"``) or of passes over the data (epochs).
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
        Non-negative number added to the diagonal of every covariance ``V_j`` after each
        update, as in :class:`~sklearn.mixture.GaussianMixture`: it keeps the components
        positive definite when one collapses onto points without noise or the data have a
        constant coordinate. It is on the scale of the data: rescale data whose variances
        are far below 1e-6, or set it to 0 for the unregularised estimate.
    w : float, default=0.0
        Regulariser: the conjugate prior of Bovy et al. (2011) on every covariance, which
        adds ``w`` times the identity to the scatter matrix: ``V_j = (sum_i q_ij [(b_ij - m_j)
        (b_ij - m_j)^T + B_ij] + w I) / (q_j + 1)`` when ``w > 0``.
    fixed_weights, fixed_means, fixed_covariances : bool or array-like of bool, default=False
        Hold these parameters of all (True) or of the marked components at their initial
        values, which must then be given (``weights_init``, ``means_init``,
        ``precisions_init``).
    split_merge : int, default=0
        Number of split-and-merge attempts after EM has converged (``method="em"``): merge
        the two most overlapping components, split the worst-fitting one, re-run EM, and keep
        the result only if it raises the likelihood (Bovy et al. 2011, section 3.2).
    batch_size : int, default=1000
        Minibatch size of the stochastic methods.
    step_exponent : float, default=0.6
        Exponent ``kappa`` of the online-EM step size ``lambda_t = (t + 2) ** -kappa`` after
        ``t`` steps; in (0.5, 1] for convergence (Cappe & Moulines 2009).
    learning_rate : float, default=0.01
        Adam step size of ``method="sgd"``.
    random_state : int, RandomState instance or None, default=None
        Seeds the initialisation, the minibatch order and `sample`.
    warm_start : bool, default=False
        Start from the previous fit's parameters (one run, whatever ``n_init``); the
        components named by ``fixed_weights``, ``fixed_means`` or ``fixed_covariances`` are
        held at ``weights_init``, ``means_init`` or ``covariances_init``. On data of another
        dimension or with another ``n_components``, the fit starts anew with a
        ``UserWarning``.
    verbose : int, default=0
        0: silent; 1: a progress line (iteration, mean log-likelihood, time elapsed and
        left) about every tenth of ``max_iter``, or every ``verbose_interval`` iterations;
        2: a line after every iteration.
    verbose_interval : int or None, default=None
        Iterations between progress lines with ``verbose=1``; None: about a tenth of
        ``max_iter``.

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
        Mean log-likelihood per point of the fitted mixture on the training data.
    lower_bounds_ : ndarray of shape (``n_iter_``,)
        Mean log-likelihood after each iteration (for the stochastic methods, the mean over the
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
    }

    _parameter_constraints = {
        "n_components": [Interval(Integral, 1, None, closed="left")],
        "method": [StrOptions({"em", "minibatch_em", "sgd"})],
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
        "verbose_interval": [Interval(Integral, 1, None, closed="left"), None],
    }

    def __init__(
        self,
        n_components=1,
        *,
        method="em",
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
        verbose_interval=None,
    ):
        self.n_components = n_components
        self.method = method
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
        self.verbose_interval = verbose_interval

    def __sklearn_is_fitted__(self):
        # not n_features_in_, which validation sets before a fit can fail or be interrupted
        return hasattr(self, "means_")

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = True
        tags.transformer_tags = None
        return tags

    # ------------------------------------------------------------------ input validation

    def _validate_inputs(self, X, X_cov, projection, sample_weight, reset):
        """Validate X and its noise and projection; returns a ``_Data``."""
        # noise variances as a DataFrame are matched to X by position: their labels must
        # be X's, in X's order
        check_side_labels(X, "X_cov", X_cov)
        kw = dict(dtype=[np.float64, np.float32], ensure_all_finite="allow-nan", order="C")
        if reset or projection is None:
            X = validate_input(self, X, reset=reset, **kw)
        else:
            # With a projection, the points scored may observe a different number of
            # coordinates than the training points: the projection maps v to them.
            X = validate_input(self, X, reset=False, check=check_array, **kw)
        dtype = X.dtype.type
        n, p = X.shape
        missing = np.isnan(X)
        _check_magnitude(X, missing)
        # Noise.
        Sdiag = np.zeros((0, 0), dtype=dtype)
        Sfull = np.zeros((0, 0, 0), dtype=dtype)
        noise_mode = 0
        if X_cov is not None:
            S = np.asarray(X_cov)
            if S.dtype.kind not in "fiu":
                S = S.astype(np.float64)
            if S.shape == (n, p):
                S = np.where(missing, 0.0, S)
                if not np.all(np.isfinite(S)) or np.any(S < 0):
                    bad = np.flatnonzero(~(np.isfinite(S) & (S >= 0)).all(axis=1))[0]
                    raise ValueError(
                        f"X_cov given as variances of shape (n_samples, n_features) must be "
                        f"finite and non-negative where X is observed; row {bad} is "
                        f"{S[bad].tolist()}. Pass the noise variances of each coordinate."
                    )
                Sdiag, noise_mode = np.ascontiguousarray(S, dtype=dtype), 1
            elif S.shape == (n, p, p):
                # The kernels read only the observed rows and columns, so the array is passed
                # as it is (no copy when its dtype and layout fit) and checked by blocks.
                Sfull, noise_mode = np.ascontiguousarray(S, dtype=dtype), 2
                for start in range(0, n, 1 << 15):
                    _check_noise_block(Sfull[start : start + (1 << 15)],
                                       missing[start : start + (1 << 15)], start)  # fmt: skip
            else:
                raise ValueError(
                    f"X_cov must have shape (n_samples, n_features) = {(n, p)} for variances "
                    f"or (n_samples, n_features, n_features) = {(n, p, p)} for covariances; "
                    f"got {S.shape}."
                )
        # Projection.
        d = p if reset else self.means_.shape[1]
        R, Rproj = None, np.zeros((0, 0, 0), dtype=dtype)
        if projection is not None:
            P = np.asarray(projection, dtype=np.float64)
            if P.ndim == 2 and P.shape[0] == p and (reset or P.shape[1] == d):
                R = P
            elif P.ndim == 3 and P.shape[:2] == (n, p) and (reset or P.shape[2] == d):
                Rproj = P
            else:
                want = "(n_features, n_dims) or (n_samples, n_features, n_dims)"
                got = f"{(n, p, 'n_dims')}" if reset else f"{(n, p, d)}"
                raise ValueError(
                    f"projection must have shape {want} with n_features = {p}"
                    + ("" if reset else f" and n_dims = {d} (the fitted dimension)")
                    + f", i.e. (p, d) or {got}; got {P.shape}."
                )
            if not np.all(np.isfinite(P)):
                raise ValueError("projection must be finite; got NaN or infinite entries.")
            d = P.shape[-1]
            if R is not None and R.shape[0] == R.shape[1] and np.array_equal(R, np.eye(d)):
                R = None  # the square identity: the points are v (a rectangular one is not)
            if R is not None:
                R = R.astype(dtype)
            else:
                Rproj = np.ascontiguousarray(Rproj, dtype=dtype)
        elif d != p:
            raise ValueError(
                f"Without a projection X must have the fitted dimension {d}; got {p} "
                f"features. Pass the projection of each point."
            )
        sw = _check_sample_weight(sample_weight, X, dtype=dtype, ensure_non_negative=True)
        return _Data(X, noise_mode, Sdiag, Sfull, R, Rproj, np.ascontiguousarray(sw))

    # ------------------------------------------------------------------ kernels

    def _kernel_params(self, data, weights, means, covs):
        """Arguments of the compiled kernels for the parameters (weights, means, covs)."""
        dtype = data.X.dtype.type
        empty = _EMPTY1[dtype]
        with np.errstate(divide="ignore"):
            logw = np.log(weights).astype(dtype)
        means = np.ascontiguousarray(means, dtype=dtype)
        covs = np.ascontiguousarray(covs, dtype=dtype)
        if data.Rproj.shape[0]:
            return logw, means, covs, empty, empty, empty, empty, empty
        if data.R is None:
            RV, RVR, Rm = covs, covs, means
        else:
            RV = np.einsum("pk,jkd->jpd", data.R, covs)
            RVR = np.einsum("jpd,qd->jpq", RV, data.R)
            Rm = means @ data.R.T
        Lsh = Wsh = empty
        if data.noise_mode == 0:
            Ls, Ws = [], []
            for j in range(len(weights)):
                try:
                    L = np.linalg.cholesky(RVR[j].astype(np.float64))
                except np.linalg.LinAlgError:
                    raise _component_error(None, j, self.reg_covar) from None
                Ls.append(L)
                Ws.append(np.linalg.solve(L, RV[j]))
            Lsh = np.ascontiguousarray(np.ravel(Ls), dtype=dtype)
            Wsh = np.ascontiguousarray(np.ravel(Ws), dtype=dtype)
        flat = [np.ascontiguousarray(np.ravel(a), dtype=dtype) for a in (RV, RVR, Rm)]
        return (logw, means, covs, *flat, Lsh, Wsh)

    def _estep(self, data, params, n_threads):
        """Summed statistics (q, s1, A) and the weighted log-likelihood at ``params``."""
        K, d = params[1].shape
        n_chunks = _chunks(data.n)
        q = np.zeros((n_chunks, K))
        s1 = np.zeros((n_chunks, K, d))
        A = np.zeros((n_chunks, K, d, d))
        ll = np.zeros(n_chunks)
        fail = np.full(n_chunks, -1, dtype=np.intp)
        args = self._kernel_params(data, *params)
        status = _xd_fast.estep_stats(
            data.X, data.noise_mode, data.Sdiag, data.Sfull, data.Rproj, data.sample_weight,
            *args, q, s1, A, ll, fail, _threads(data.n, K, data.X.shape[1], d, n_threads),
        )  # fmt: skip
        raise_for_status(status, "The E-step", item="chunk", advice={
            NOT_POSITIVE_DEFINITE: lambda ch: _component_error(
                fail[ch] // K, fail[ch] % K, self.reg_covar),
        })  # fmt: skip
        A = A.sum(axis=0)
        A = np.tril(A) + np.swapaxes(np.tril(A, -1), 1, 2)
        return q.sum(axis=0), s1.sum(axis=0), A, float(ll.sum())

    def _log_prob(self, data, params, posterior=False):
        """(n, K) log alpha_j N(x_i | ...) and, if ``posterior``, the posterior of each v_i."""
        K, d = params[1].shape
        dtype = data.X.dtype.type
        logp = np.zeros((data.n, K), dtype=dtype)
        shape = (data.n, d) if posterior else (0, 0)
        mean = np.zeros(shape, dtype=dtype)
        cov = np.zeros(shape + (d,) if posterior else (0, 0, 0), dtype=dtype)
        fail = np.full(data.n, -1, dtype=np.intp)
        args = self._kernel_params(data, *params)
        status = _xd_fast.log_prob(
            data.X, data.noise_mode, data.Sdiag, data.Sfull, data.Rproj,
            *args, logp, mean, cov, fail,
            _threads(data.n, K, data.X.shape[1], d, effective_n_threads()),
        )  # fmt: skip
        raise_for_status(status, "The densities", item="point", advice={
            NOT_POSITIVE_DEFINITE: lambda i: _component_error(
                i, int(fail[i]), self.reg_covar),
        })  # fmt: skip
        return logp, mean, cov

    # ------------------------------------------------------------------ parameters

    def _fixed(self, K):
        """Boolean masks (weights, means, covariances) of the components held fixed."""
        masks = []
        for name in ("fixed_weights", "fixed_means", "fixed_covariances"):
            value = getattr(self, name)
            if np.ndim(value) not in (0, 1) or (np.ndim(value) == 1 and len(value) != K):
                raise ValueError(
                    f"{name} must be a bool or an array of n_components = {K} booleans; got "
                    f"{value!r}."
                )
            mask = np.broadcast_to(np.asarray(value, dtype=bool), (K,)).copy()
            masks.append(mask)
        needs = [("fixed_weights", "weights_init"), ("fixed_means", "means_init"),
                 ("fixed_covariances", "precisions_init")]  # fmt: skip
        for mask, (name, init) in zip(masks, needs):
            if mask.any() and getattr(self, init) is None:
                raise ValueError(
                    f"{name} holds components at their initial values, so {init} must be "
                    f"given; it is None."
                )
        return tuple(masks)

    def _warm_params(self, data, fixed):
        """The previous fit's (weights, means, covariances) that ``warm_start`` continues,
        with the fixed components (``fixed_*``) at their initial values; None to initialise
        anew (no warm start, no previous fit, or one of another dimension or ``n_components``,
        which warns)."""
        if not (self.warm_start and hasattr(self, "means_")):
            return None
        K, d = self.n_components, _n_dims(data)
        if self.means_.shape != (K, d):
            warn_warm_start_ignored(
                self, f"the data have dimension {d} and n_components={K}, the previous fit "
                f"had {self.means_.shape[1]} and {self.means_.shape[0]}"
            )
            return None
        weights, means, covs = (np.array(a, dtype=np.float64) for a in self._fitted_params())
        init = self._check_init_params(K, d)
        for current, start, mask in zip((weights, means, covs), init, fixed):
            if mask.any():
                current[mask] = start[mask]
        if fixed[0].any() and not fixed[0].all():
            # the free weights share what the fixed ones leave, in their previous proportions
            free = ~fixed[0]
            if weights[free].sum() > 0:
                weights[free] *= max(1.0 - weights[fixed[0]].sum(), 0.0) / weights[free].sum()
        return weights, means, covs

    def _check_init_params(self, K, d):
        """The user's initial parameters, validated; None where not given."""
        weights = means = covs = None
        if self.weights_init is not None:
            weights = np.asarray(self.weights_init, dtype=np.float64)
            if weights.shape != (K,) or np.any(weights < 0) or not np.isclose(weights.sum(), 1):
                raise ValueError(
                    f"weights_init must be {K} non-negative numbers summing to 1; got "
                    f"shape {weights.shape} summing to {weights.sum():.6g}."
                )
        if self.means_init is not None:
            means = np.asarray(self.means_init, dtype=np.float64)
            if means.shape != (K, d) or not np.all(np.isfinite(means)):
                raise ValueError(
                    f"means_init must be finite with shape (n_components, n_dims) = {(K, d)}; "
                    f"got {means.shape}."
                )
        if self.precisions_init is not None:
            prec = np.asarray(self.precisions_init, dtype=np.float64)
            if prec.shape != (K, d, d):
                raise ValueError(
                    f"precisions_init must have shape (n_components, n_dims, n_dims) = "
                    f"{(K, d, d)}; got {prec.shape}."
                )
            try:
                np.linalg.cholesky(0.5 * (prec + np.swapaxes(prec, 1, 2)))
            except np.linalg.LinAlgError:
                raise ValueError(
                    "precisions_init must hold symmetric positive-definite matrices."
                ) from None
            covs = np.linalg.inv(prec)
            covs = 0.5 * (covs + np.swapaxes(covs, 1, 2))
        return weights, means, covs

    def _initialize(self, data, rng):
        """Initial (weights, means, covariances) in float64."""
        K = self.n_components
        d = _n_dims(data)
        weights, means, covs = self._check_init_params(K, d)
        if weights is not None and means is not None and covs is not None:
            return weights, means, covs
        V = _proxy(data)
        sw = data.sample_weight.astype(np.float64)
        n = V.shape[0]
        # The starting responsibilities are computed on the distinct points with positive
        # weight, in sorted order, each with its total weight: a point of integer weight w and
        # w copies of it give the same input, so the same start (and the order of the rows
        # does not matter).
        pos = np.flatnonzero(sw > 0)
        Vu, inverse = np.unique(V[pos], axis=0, return_inverse=True)
        inverse = inverse.ravel()
        wu = np.bincount(inverse, weights=sw[pos], minlength=Vu.shape[0])
        resp = np.zeros((n, K))
        resp[pos] = self._initial_resp(Vu, wu, rng)[inverse]
        wr = resp * sw[:, None]
        nk = wr.sum(axis=0) + 10 * np.finfo(float).eps
        mean = np.average(V, axis=0, weights=sw if sw.sum() > 0 else None)
        # A component without points starts at the mean.
        mk = np.where((wr.sum(axis=0) > 0)[:, None], (wr.T @ V) / nk[:, None], mean)
        centred = V - mean
        overall = np.average(centred**2, axis=0, weights=sw if sw.sum() > 0 else None)
        overall = np.where(overall > 0, overall, 1.0)
        ck = np.empty((K, d, d))
        for j in range(K):
            diff = V - mk[j]
            ck[j] = (wr[:, j, None] * diff).T @ diff
            # Shrink towards the overall variances, with the weight of one point, so that a
            # component starting from few points is still positive definite.
            ck[j] = (ck[j] + np.diag(overall)) / (nk[j] + 1) + self.reg_covar * np.eye(d)
        return (
            nk / nk.sum() if weights is None else weights,
            mk if means is None else means,
            ck if covs is None else covs,
        )

    def _initial_resp(self, V, sw, rng):
        """Starting responsibilities (m, K) of the distinct weighted points ``V``."""
        K = self.n_components
        m = V.shape[0]
        resp = np.zeros((m, K))
        if m <= K:
            # Fewer distinct points than components: one point each; the other components
            # start empty, from the overall variance.
            resp[np.arange(m), np.arange(m)] = 1
            return resp
        if self.init_params == "kmeans":
            with warnings.catch_warnings():
                # Distinct points may still give fewer distinct clusters than K.
                warnings.simplefilter("ignore", ConvergenceWarning)
                labels = KMeans(K, n_init=1, random_state=rng).fit(
                    V, sample_weight=sw).labels_  # fmt: skip
            resp[np.arange(m), labels] = 1
        elif self.init_params == "k-means++":
            centres, _ = kmeans_plusplus(V, K, random_state=rng, sample_weight=sw)
            labels = ((V[:, None, :] - centres[None]) ** 2).sum(-1).argmin(1)
            resp[np.arange(m), labels] = 1
        elif self.init_params == "random":
            resp = rng.uniform(size=(m, K))
            resp /= resp.sum(axis=1, keepdims=True)
        else:
            resp[rng.choice(m, size=K, replace=False, p=sw / sw.sum()), np.arange(K)] = 1
        return resp

    # ------------------------------------------------------------------ fitting

    def _check_enough_samples(self, n):
        """The first fit starts each component's mean at a sample: it needs enough."""
        if n < self.n_components:
            raise ValueError(
                f"Expected n_samples >= n_components but got n_components = "
                f"{self.n_components}, n_samples = {n}: each component starts at a "
                f"sample. Fit on at least {self.n_components} samples, or lower n_components."
            )

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y=None, *, X_cov=None, projection=None, sample_weight=None):
        """Fit the deconvolved mixture.

        Parameters
        ----------
        X : {array-like, AnnData} of shape (n_samples, n_features)
            Observations x_i; NaN marks a missing coordinate, which is dropped from that
            point's projection. An AnnData contributes its ``.X``.
        y : None
            Ignored. A second positional array of the shape of X, or of three dimensions,
            is refused: pass the noise by keyword, ``X_cov=``.
        X_cov : array-like of shape (n_samples, n_features, n_features) or \
                (n_samples, n_features), default=None
            Noise covariance S_i of each point, or its diagonal (the variances). None means
            no noise.
        projection : array-like of shape (n_samples, n_features, n_dims) or \
                (n_features, n_dims), default=None
            Projection R_i of each point, or one shared by all. None means the identity.
        sample_weight : array-like of shape (n_samples,), default=None
            Weight of each point in the likelihood.

        Returns
        -------
        self : ExtremeDeconvolution
            The fitted estimator.
        """
        check_ignored_y(self, y, X, advice=_NOISE_ADVICE)
        _warn_if_noise_like(self, y, X_cov, "fit")
        data = self._validate_inputs(X, X_cov, projection, sample_weight, reset=True)
        self._fitted_with_noise = data.noise_mode != 0
        self._fitted_with_projection = _projected(data)
        self._check_enough_samples(data.n)
        if np.sum(data.sample_weight) <= 0:
            raise ValueError("sample_weight must have a positive sum; got all zeros.")
        rng = check_random_state(self.random_state)
        n_threads = effective_n_threads()
        fixed = self._fixed(self.n_components)
        previous = self._warm_params(data, fixed)
        n_init = self.n_init if previous is None else 1
        best, interrupted = None, False
        for init in range(n_init):
            try:
                params = self._initialize(data, rng) if previous is None else previous
                params = tuple(np.asarray(a, dtype=np.float64) for a in params)
                if self.method == "em":
                    result = self._fit_em(data, params, fixed, n_threads)
                    if self.split_merge:
                        result = self._split_merge(data, result, fixed, n_threads)
                else:
                    result = self._fit_stochastic(data, params, fixed, n_threads, rng)
            except KeyboardInterrupt:
                interrupted = True
                break
            # Ctrl-C: keep the best run so far; the other initialisations are not run
            interrupted = result["interrupted"]
            if best is None or result["objective"] > best["objective"]:
                best = result
            if interrupted:
                break
        if interrupted:
            if best is None:
                raise KeyboardInterrupt  # during the initialisation: the estimator is unchanged
            Progress(self, self.max_iter).interrupted(best["n_iter"], stacklevel=4)
        # The stochastic methods run the epochs asked for; only batch EM has a convergence
        # promise to break.
        if not best["converged"] and not interrupted and self.max_iter > 0 and self.method == "em":
            warnings.warn(
                f"ExtremeDeconvolution ({self.method}) did not converge in max_iter = "
                f"{self.max_iter} iterations (tol = {self.tol}); increase max_iter or tol.",
                ConvergenceWarning,
            )
        self._set_params(best["params"], data.X.dtype)
        self._fit_weight = float(np.sum(data.sample_weight, dtype=np.float64))
        if hasattr(self, "_online_state"):
            del self._online_state
        self.converged_ = bool(best["converged"])
        self.n_iter_ = int(best["n_iter"])
        self.lower_bound_ = float(best["loglik"])
        self.lower_bounds_ = np.asarray(best["history"], dtype=np.float64)
        return self

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

    def _penalty(self, covs, fixed_cov):
        """Log of the covariance prior of Bovy et al. (w > 0): -log|V|/2 - w tr(V^-1)/2."""
        if self.w <= 0:
            return 0.0
        total = 0.0
        for j in np.flatnonzero(~fixed_cov):
            L = np.linalg.cholesky(covs[j])
            Linv = np.linalg.inv(L)
            total += -np.log(np.diag(L)).sum() - 0.5 * self.w * np.sum(Linv**2)
        return total

    def _m_step(self, stats, params, fixed, warned):
        """Bovy et al. (2011) M-step from the statistics centred on the current means."""
        q, s1, A, _ = stats
        weights, means, covs = params
        fixed_w, fixed_m, fixed_c = fixed
        K, d = means.shape
        alive = q > 10 * np.finfo(float).eps * max(q.sum(), 1e-300)
        dead = tuple(np.flatnonzero(~alive & ~(fixed_m & fixed_c)))
        if dead and dead not in warned:
            warned.add(dead)  # once per collapse, not at every iteration
            warnings.warn(
                f"Components {list(dead)} have no responsibility left; their parameters are "
                f"kept. Fewer components, or other initial parameters, may fit better.",
                RuntimeWarning,
            )
        qa = np.where(alive, q, 1.0)
        shift = np.where((alive & ~fixed_m)[:, None], s1 / qa[:, None], 0.0)
        new_means = means + shift
        # sum_i q_ij [(b_ij - m_new)(b_ij - m_new)^T + B_ij]
        #   = A_j + q_j V_j - q_j shift shift^T   (A is centred on the old mean).
        C = A + qa[:, None, None] * covs - qa[:, None, None] * shift[:, :, None] * shift[:, None, :]
        if self.w > 0:
            new_covs = (C + self.w * np.eye(d)) / (qa + 1)[:, None, None]
        else:
            new_covs = C / qa[:, None, None]
        new_covs = 0.5 * (new_covs + np.swapaxes(new_covs, 1, 2)) + self.reg_covar * np.eye(d)
        keep_c = fixed_c | ~alive
        new_covs[keep_c] = covs[keep_c]
        new_weights = _renormalise(q, weights, fixed_w)
        return new_weights, new_means, new_covs

    def _fit_em(self, data, params, fixed, n_threads, max_iter=None):
        """Batch EM from ``params`` until the objective gains less than tol."""
        max_iter = self.max_iter if max_iter is None else max_iter
        total = float(data.sample_weight.sum())
        stats = self._estep(data, params, n_threads)
        obj = (stats[3] + self._penalty(params[2], fixed[2])) / total
        history, converged, n_iter, warned = [], False, 0, set()
        roundoff = 1e-10 if data.X.dtype == np.float64 else 1e-5
        progress = Progress(self, max_iter, objective="mean log-likelihood",
                            every=self.verbose_interval)  # fmt: skip
        done = (params, stats, obj, n_iter)  # the last complete iteration, set at once
        interrupted = False
        try:
            for it in range(1, max_iter + 1):
                new = self._m_step(stats, params, fixed, warned)
                new_stats = self._estep(data, new, n_threads)
                new_obj = (new_stats[3] + self._penalty(new[2], fixed[2])) / total
                change = new_obj - obj
                if change < -roundoff * max(1.0, abs(obj)):
                    warnings.warn(
                        f"The EM objective decreased by {-change:.3g} at iteration {it}; "
                        f"stopping with the previous parameters.",
                        RuntimeWarning,
                    )
                    break
                done = (new, new_stats, new_obj, it)
                params, stats, obj, n_iter = done
                history.append(stats[3] / total)
                progress(it, history[-1])
                if change < self.tol:
                    converged = True
                    break
        except KeyboardInterrupt:
            params, stats, obj, n_iter = done
            del history[n_iter:]
            interrupted = True
        return dict(params=params, objective=obj, loglik=stats[3] / total, history=history,
                    converged=converged or max_iter == 0, n_iter=n_iter,
                    interrupted=interrupted)  # fmt: skip

    # ------------------------------------------------------------------ stochastic methods

    def _fit_stochastic(self, data, params, fixed, n_threads, rng):
        """Minibatch EM or SGD over ``max_iter`` epochs (shuffled minibatches)."""
        total = float(data.sample_weight.sum())
        state = self._online_init(params, data) if self.method == "minibatch_em" else (
            _AdamState(params, fixed, self.reg_covar))
        history, converged, prev = [], False, None
        n_iter = 0
        progress = Progress(self, self.max_iter, objective="mean log-likelihood",
                            every=self.verbose_interval)  # fmt: skip
        saved = (copy.deepcopy(state), 0)  # the state after the last complete epoch
        interrupted = False
        try:
            for epoch in range(1, self.max_iter + 1):
                order = rng.permutation(data.n)
                ll_sum = 0.0
                for start in range(0, data.n, self.batch_size):
                    batch = data.take(order[start : start + self.batch_size])
                    ll_sum += self._stochastic_step(state, batch, fixed, n_threads, total)
                n_iter = epoch
                history.append(ll_sum / total)
                saved = (copy.deepcopy(state), epoch)
                progress(epoch, history[-1])
                if prev is not None and abs(history[-1] - prev) < self.tol:
                    converged = True
                    break
                prev = history[-1]
        except KeyboardInterrupt:
            state, n_iter = saved
            del history[n_iter:]
            interrupted = True
        params = state.params()
        stats = self._estep(data, params, n_threads)
        obj = (stats[3] + self._penalty(params[2], fixed[2])) / total
        return dict(params=params, objective=obj, loglik=stats[3] / total, history=history,
                    converged=converged or self.max_iter == 0, n_iter=n_iter,
                    interrupted=interrupted)  # fmt: skip

    def _online_init(self, params, data):
        return _OnlineEMState(
            params, float(np.mean(data.sample_weight)) * self.batch_size, reg_covar=self.reg_covar
        )

    def _stochastic_step(self, state, batch, fixed, n_threads, total):
        """One minibatch step; returns the minibatch's weighted log-likelihood."""
        params = state.params()
        stats = self._estep(batch, params, n_threads)
        if isinstance(state, _OnlineEMState):
            state.step(stats, fixed, self.step_exponent, self.w, float(batch.sample_weight.sum()) / total)
        else:
            state.step(stats, fixed, self.learning_rate, self.w,
                       float(batch.sample_weight.sum()), total)  # fmt: skip
        return stats[3]

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
        y : None
            Ignored. A second positional array of the shape of X, or of three dimensions,
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
                        advice=_NOISE_ADVICE.replace("fit(", "partial_fit("))  # fmt: skip
        _warn_if_noise_like(self, y, X_cov, "partial_fit")
        first = not hasattr(self, "means_")
        if not first and self.means_.shape[0] != self.n_components:
            raise ValueError(
                f"n_components={self.n_components}, but the model being updated has "
                f"{self.means_.shape[0]} components. partial_fit continues the fitted "
                "mixture; call fit to start one with the new n_components."
            )
        data = self._validate_inputs(X, X_cov, projection, sample_weight, reset=first)
        n_threads = effective_n_threads()
        fixed = self._fixed(self.n_components)
        batch_weight = float(data.sample_weight.sum())
        # Work on local copies and set the attributes at the end: an interrupted call leaves
        # the estimator as it was.
        if first:
            self._check_enough_samples(data.n)
            rng = check_random_state(self.random_state)
            params = tuple(np.asarray(a, dtype=np.float64) for a in self._initialize(data, rng))
            state = _OnlineEMState(params, batch_weight, reg_covar=self.reg_covar)
            seen, history = 0.0, np.empty(0)
        elif not hasattr(self, "_online_state"):
            # Continue from a fit: its parameters, as if its data had come before in
            # minibatches of this one's weight, so that the step size continues Cappe's
            # schedule from there instead of restarting at its largest step (one small
            # minibatch would outweigh the whole fit). The traces start with this call.
            fitted = getattr(self, "_fit_weight", batch_weight)
            t = int(round(fitted / batch_weight)) if batch_weight > 0 else 0
            params = tuple(np.asarray(a, dtype=np.float64) for a in self._fitted_params())
            state = _OnlineEMState(params, batch_weight, t=t, reg_covar=self.reg_covar)
            seen, history = fitted, np.empty(0)
        else:
            state = _OnlineEMState.from_arrays(self._online_state, self.reg_covar)
            seen, history = self._online_seen, self.lower_bounds_
        seen += batch_weight
        stats = self._estep(data, state.params(), n_threads)
        state.step(stats, fixed, self.step_exponent, self.w, batch_weight / seen)
        history = np.append(np.asarray(history, dtype=np.float64), stats[3] / batch_weight)
        self._online_state = state.to_arrays()
        self._online_seen = seen
        self._fitted_with_noise = data.noise_mode != 0 or (
            not first and getattr(self, "_fitted_with_noise", False)
        )
        self._fitted_with_projection = _projected(data) or (
            not first and getattr(self, "_fitted_with_projection", False)
        )
        self._set_params(state.params(), data.X.dtype)
        self.lower_bounds_ = history
        self.lower_bound_ = float(history[-1])
        self.n_iter_ = len(history)
        self.converged_ = False
        return self

    # ------------------------------------------------------------------ split and merge

    def _split_merge(self, data, result, fixed, n_threads):
        """Split-and-merge EM of Bovy et al. (2011), section 3.2, ``split_merge`` attempts."""
        K = self.n_components
        if K < 3 or result["interrupted"]:
            return result
        movable = ~(fixed[0] | fixed[1] | fixed[2])
        tried = set()
        progress = Progress(self, self.split_merge)
        try:
            for _ in range(self.split_merge):
                cands = _split_merge_candidates(self, data, result["params"], movable)
                cands = [c for c in cands if c not in tried]
                if not cands:
                    break
                j, k, l = cands[0]
                tried.add((j, k, l))
                trial = _split_merge_proposal(result["params"], j, k, l)
                # Partial EM on the three changed components, the others held fixed...
                partial = tuple(m.copy() for m in fixed)
                others = np.ones(K, dtype=bool)
                others[[j, k, l]] = False
                partial = (partial[0] | others, partial[1] | others, partial[2] | others)
                first = self._fit_em(data, trial, partial, n_threads)
                # ... then full EM; keep it only if the likelihood rose.
                new = first if first["interrupted"] else self._fit_em(
                    data, first["params"], fixed, n_threads)  # fmt: skip
                if new["interrupted"]:
                    raise KeyboardInterrupt  # an unfinished trial is dropped
                progress.note(f"split-merge ({j}, {k}) -> {l}: mean log-likelihood "
                              f"{result['objective']:.6f} -> {new['objective']:.6f}")  # fmt: skip
                if new["objective"] > result["objective"] + self.tol:
                    new["history"] = result["history"] + new["history"]
                    new["n_iter"] += result["n_iter"]
                    result, tried = new, set()
        except KeyboardInterrupt:
            result = dict(result, interrupted=True)
        return result

    # ------------------------------------------------------------------ prediction

    def _fitted_params(self):
        return (self.weights_, self.means_, self.covariances_)

    def _predict_data(self, X, X_cov, projection):
        check_is_fitted(self)
        return self._validate_inputs(X, X_cov, projection, None, reset=False)

    def _estimate_weighted_log_prob(self, X, X_cov, projection):
        data = self._predict_data(X, X_cov, projection)
        params = tuple(np.asarray(a, dtype=data.X.dtype) for a in self._fitted_params())
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
        warnings.warn(
            f"{type(self).__name__} was fitted with {keyword}, but {method} got no {keyword}: "
            f"{consequence} Pass it, {method}(X, {keyword}=...), or {plain}. In GridSearchCV "
            "or cross_validate, route it: sklearn.set_config(enable_metadata_routing=True) "
            f"and estimator.set_fit_request({keyword}=True).set_score_request({keyword}=True).",
            UserWarning,
            stacklevel=3,
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
        y : None
            Ignored. A second positional array of the shape of X, or of three dimensions,
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
                        advice=_NOISE_ADVICE.replace("fit(", "score("))  # fmt: skip
        _warn_if_noise_like(self, y, X_cov, "score")
        self._warn_if_missing("score", "X_cov", X_cov)
        self._warn_if_missing("score", "projection", projection)
        return float(self._log_likelihoods(X, X_cov, projection).mean())

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
        logp = self._estimate_weighted_log_prob(X, X_cov, projection)
        return np.exp(logp - logsumexp(logp, axis=1, keepdims=True))

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
        params = tuple(np.asarray(a, dtype=data.X.dtype) for a in self._fitted_params())
        _, mean, cov = self._log_prob(data, params, posterior=True)
        return mean, cov

    def sample(self, n_samples=1):
        """Draw from the deconvolved mixture (reproducible from ``random_state``).

        Parameters
        ----------
        n_samples : int, default=1
            Number of draws.

        Returns
        -------
        X : ndarray of shape (n_samples, n_dims)
            Draws of v.
        y : ndarray of shape (n_samples,)
            Their components.
        """
        check_is_fitted(self)
        if n_samples < 1:
            raise ValueError(f"n_samples must be at least 1; got {n_samples}.")
        rng = check_random_state(self.random_state)
        weights = np.asarray(self.weights_, dtype=np.float64)
        counts = rng.multinomial(n_samples, weights / weights.sum())
        X = np.vstack(
            [
                rng.multivariate_normal(m, c, int(k))
                for m, c, k in zip(self.means_.astype(float), self.covariances_.astype(float), counts)
            ]
        )
        y = np.repeat(np.arange(self.n_components), counts)
        return X, y

    def _n_parameters(self):
        K, d = self.means_.shape
        fw, fm, fc = self._fixed(K)
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
        return -2 * log_prob.sum() + self._n_parameters() * np.log(log_prob.shape[0])

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
        return -2 * log_prob.sum() + 2 * self._n_parameters()


def _n_dims(data):
    """Dimension of v for validated points: the projection's number of columns, or the
    number of features without one."""
    if data.R is not None:
        return data.R.shape[1]
    if data.Rproj.shape[0]:
        return data.Rproj.shape[2]
    return data.X.shape[1]


def _projected(data):
    """Whether validated points carry a projection other than the identity."""
    return data.R is not None or data.Rproj.shape[0] > 0


def _warn_if_noise_like(estimator, y, X_cov, method):
    """Warn when the ignored ``y`` looks like the points' noise given without its keyword.

    A 1-d ``y`` of length n_samples passes :func:`check_ignored_y` (scikit-learn's tools
    pass targets along), but astroML's ``fit(X, Xerr)`` habit with one variance per point
    also gives one. Non-negative values that are not all integers are not class labels:
    they are most likely variances, dropped unless said.
    """
    if y is None or X_cov is not None:
        return
    try:
        values = np.asarray(y)
    except (TypeError, ValueError):
        return
    if values.ndim != 1 or values.dtype.kind != "f":
        return
    finite = values[np.isfinite(values)]
    if finite.size == 0 or np.any(finite < 0) or np.all(finite == np.round(finite)):
        return
    warnings.warn(
        f"{type(estimator).__name__}.{method} ignores y, whose values look like each point's "
        "noise variance (non-negative, not integers). To use them, pass them by keyword: "
        f"{method}(X, X_cov=np.repeat(y[:, None], n_features, axis=1)) for one variance "
        "per point and coordinate, or X_cov of shape (n_samples, n_features, n_features) "
        "for covariances.",
        UserWarning,
        stacklevel=3,
    )


def _renormalise(q, weights, fixed_w):
    """Mixture weights from responsibilities, the fixed ones held (Bovy et al. 2011)."""
    free = ~fixed_w
    new = weights.astype(np.float64).copy()
    if free.any():
        mass = 1.0 - weights[fixed_w].sum()
        qf = q[free]
        new[free] = mass * qf / qf.sum() if qf.sum() > 0 else weights[free]
    return new


def _proxy(data):
    """The observations mapped back to the deconvolved space, for the initialisation."""
    X = data.X.astype(np.float64)
    missing = np.isnan(X)
    if data.Rproj.shape[0] == 0 and data.R is None:
        col = np.nanmean(np.where(missing.all(axis=0), 0.0, X), axis=0) if missing.any() else None
        return np.where(missing, col, X) if missing.any() else X
    R = data.Rproj.astype(np.float64) if data.Rproj.shape[0] else np.broadcast_to(
        data.R.astype(np.float64), (X.shape[0],) + data.R.shape)
    R = np.where(missing[:, :, None], 0.0, R)
    # Minimum-norm least-squares v_i = pinv(R_i) x_i over the observed rows.
    return np.einsum("npd,np->nd", np.linalg.pinv(R).swapaxes(1, 2), np.where(missing, 0.0, X))


class _OnlineEMState:
    """Minibatch online EM (Ritchie & Murray 2019, sec. minibatch EM) with Cappe's schedule.

    Holds qhat_j (the running sum of responsibilities, in units of one minibatch), the means
    and the unregularised covariances V_j, and the step count t.
    """

    def __init__(self, params, batch_weight, t=0, reg_covar=0.0):
        weights, means, covs = params
        self.reg_covar = reg_covar
        self.weights = np.asarray(weights, dtype=np.float64).copy()
        self.qhat = self.weights * batch_weight
        self.means = np.asarray(means, dtype=np.float64).copy()
        self.covs = np.asarray(covs, dtype=np.float64).copy()
        self.reg_covs = self.covs.copy()
        self.t = t

    def params(self):
        return self.weights, self.means, self.reg_covs

    def to_arrays(self):
        return dict(weights=self.weights, qhat=self.qhat, means=self.means, covs=self.covs,
                    reg_covs=self.reg_covs, t=np.array(self.t))  # fmt: skip

    @classmethod
    def from_arrays(cls, a, reg_covar=0.0):
        s = cls((a["weights"], a["means"], a["covs"]), 1.0, int(a["t"]), reg_covar)
        s.qhat, s.reg_covs = a["qhat"].copy(), a["reg_covs"].copy()
        return s

    def step(self, stats, fixed, kappa, w, batch_fraction):
        """One online-EM update from the minibatch statistics (centred on the current means).

        The covariance update is the paper's recentred convex combination, written so that
        every term is positive semi-definite (derivation in the user guide):
        V_t = a1 [V_{t-1} + (m_{t-1} - m_t)(.)^T] + a2 [V_b + (m_b - m_t)(.)^T],
        a1 = (1 - lam) qhat_{t-1} / qhat_t, a2 = lam q_b / qhat_t.
        """
        q, s1, A, _ = stats
        fixed_w, fixed_m, fixed_c = fixed
        lam = (self.t + 2.0) ** (-kappa)
        self.t += 1
        qhat = (1 - lam) * self.qhat + lam * q
        ok = (qhat > 0) & (q >= 0)
        qb = np.where(q > 0, q, 1.0)
        dbar = s1 / qb[:, None]  # m_b - m_{t-1}
        # V_b: the minibatch's own covariance of v about its mean m_b.
        Vb = self.reg_covs + A / qb[:, None, None] - dbar[:, :, None] * dbar[:, None, :]
        Vb = np.where((q > 0)[:, None, None], Vb, 0.0)
        qh = np.where(ok, qhat, 1.0)
        a1 = (1 - lam) * self.qhat / qh
        a2 = lam * q / qh
        shift = np.where((ok & ~fixed_m)[:, None], (lam * s1) / qh[:, None], 0.0)  # m_t - m_{t-1}
        e1 = -shift
        e2 = dbar - shift
        covs = (
            a1[:, None, None] * (self.covs + e1[:, :, None] * e1[:, None, :])
            + a2[:, None, None] * (Vb + e2[:, :, None] * e2[:, None, :])
        )
        covs = 0.5 * (covs + np.swapaxes(covs, 1, 2))
        upd_c = ok & ~fixed_c
        self.covs = np.where(upd_c[:, None, None], covs, self.covs)
        self.means = self.means + shift
        self.qhat = np.where(ok, qhat, self.qhat)
        self.weights = _renormalise(self.qhat, self.weights, fixed_w)
        d = self.means.shape[1]
        if w > 0:
            # The prior of Bovy et al., with the weight of this minibatch's share of the data.
            rho = batch_fraction * self.qhat.sum() / max(q.sum(), 1e-300)
            reg = (self.qhat[:, None, None] * self.covs + rho * w * np.eye(d)) / (
                self.qhat + rho)[:, None, None]  # fmt: skip
            reg = reg + self.reg_covar * np.eye(d)
            self.reg_covs = np.where(upd_c[:, None, None], reg, self.reg_covs)
        else:
            self.reg_covs = np.where(
                upd_c[:, None, None], self.covs + self.reg_covar * np.eye(d), self.reg_covs
            )


class _AdamState:
    """Adam on (z, m, L~): weights softmax(z), V = L L^T with log-diagonal (Ritchie & Murray 2019).

    The gradients are analytic, from the E-step statistics (Fisher's identity):
    d/dm_j = V_j^-1 s1_j, d/dV_j = V_j^-1 A_j V_j^-1 / 2, d/dz_j = q_j - alpha_j sum_k q_k.
    """

    def __init__(self, params, fixed, reg_covar=0.0):
        weights, means, covs = params
        self.reg_covar = reg_covar
        self.fixed_w = fixed[0]
        self.weights0 = np.asarray(weights, dtype=np.float64)
        self.z = np.log(np.maximum(self.weights0, 1e-300))
        self.means = np.asarray(means, dtype=np.float64).copy()
        L = np.linalg.cholesky(covs)
        self.d = means.shape[1]
        self.tril = np.tril_indices(self.d)
        Lt = L.copy()
        idx = np.arange(self.d)
        Lt[:, idx, idx] = np.log(L[:, idx, idx])
        self.Lt = Lt[:, self.tril[0], self.tril[1]]
        self.adam = None

    def _L(self):
        K = self.means.shape[0]
        L = np.zeros((K, self.d, self.d))
        L[:, self.tril[0], self.tril[1]] = self.Lt
        idx = np.arange(self.d)
        L[:, idx, idx] = np.exp(L[:, idx, idx])
        return L

    def _weights(self):
        free = ~self.fixed_w
        w = self.weights0.copy()
        if free.any():
            zf = self.z[free]
            e = np.exp(zf - zf.max())
            w[free] = (1.0 - self.weights0[self.fixed_w].sum()) * e / e.sum()
        return w

    def params(self):
        L = self._L()
        return self._weights(), self.means, L @ np.swapaxes(L, 1, 2) + self.reg_covar * np.eye(self.d)

    def step(self, stats, fixed, lr, w, batch_weight, total):
        q, s1, A, _ = stats
        fixed_w, fixed_m, fixed_c = fixed
        L = self._L()
        K, d = self.means.shape
        weights = self._weights()
        free = ~fixed_w
        gz = np.zeros(K)
        if free.any():
            soft = weights[free] / max(weights[free].sum(), 1e-300)
            gz[free] = q[free] - q[free].sum() * soft
        gm = np.empty((K, d))
        gL = np.empty((K, d, d))
        eye = np.eye(d)
        for j in range(K):
            # V = L L^T + reg_covar I: dV/dL is that of L L^T.
            Vinv = np.linalg.inv(L[j] @ L[j].T + self.reg_covar * eye)
            gm[j] = Vinv @ s1[j]
            gV = 0.5 * Vinv @ A[j] @ Vinv
            if w > 0:
                # Prior of Bovy et al., its share for this minibatch.
                gV += (batch_weight / total) * (-0.5 * Vinv + 0.5 * w * Vinv @ Vinv)
            gL[j] = 2.0 * gV @ L[j]
        idx = np.arange(d)
        gL[:, idx, idx] *= L[:, idx, idx]
        gLt = gL[:, self.tril[0], self.tril[1]]
        gm[fixed_m] = 0.0
        gLt[fixed_c] = 0.0
        grads = [g / batch_weight for g in (gz, gm, gLt)]
        params = [self.z, self.means, self.Lt]
        if self.adam is None:
            self.adam = Adam([a.shape for a in params], lr)
        self.adam.step(params, grads)  # ascent on the log-likelihood


def _split_merge_candidates(est, data, params, movable):
    """(j, k, l) triples, best first: merge j and k (most overlapping), split l.

    Merge criterion: the normalised overlap of the responsibilities, q_j . q_k / |q_j||q_k|;
    split criterion: the mean over its points of the component's negative log-density minus
    its expected value, i.e. how badly the component's Gaussian describes its own points
    (Bovy et al. 2011, sec. 3.2, after Ueda et al. 2000).
    """
    weights, means, covs = params
    K = len(weights)
    logp, _, _ = est._log_prob(data, tuple(np.asarray(a, dtype=data.X.dtype) for a in params))
    logp = logp.astype(np.float64)
    resp = np.exp(logp - logsumexp(logp, axis=1, keepdims=True)) * data.sample_weight[:, None]
    norms = np.sqrt((resp**2).sum(axis=0)) + 1e-300
    merge = (resp.T @ resp) / np.outer(norms, norms)
    # Local log-likelihood of each component on its own points, relative to the best the
    # component could reach: the responsibilities-weighted mean of log N minus log alpha.
    dens = logp - np.log(np.maximum(weights, 1e-300))[None, :]
    qj = resp.sum(axis=0) + 1e-300
    fit = (resp * dens).sum(axis=0) / qj
    # Entropy of a Gaussian of the component's own covariance: what a perfect fit would give.
    ent = np.array([-0.5 * (len(c) * (1 + np.log(2 * np.pi)) + np.linalg.slogdet(c)[1]) for c in covs])
    split = ent - fit
    merges = [(merge[j, k], j, k) for j in range(K) for k in range(j + 1, K) if movable[j] and movable[k]]
    merges.sort(reverse=True)
    splits = [l for l in np.argsort(-split) if movable[l]]
    out = []
    for _, j, k in merges:
        for l in splits:
            if l not in (j, k):
                out.append((j, k, int(l)))
    return out


def _split_merge_proposal(params, j, k, l):
    """Merge components j and k into j; split l into l and k (Bovy et al. 2011, sec. 3.2)."""
    weights, means, covs = (np.array(a, dtype=np.float64) for a in params)
    d = means.shape[1]
    # Merge: moment-matched.
    a = weights[j] + weights[k]
    m = (weights[j] * means[j] + weights[k] * means[k]) / a
    V = (weights[j] * covs[j] + weights[k] * covs[k]) / a
    weights[j], means[j], covs[j] = a, m, V
    # Split l into l and k: two halves at +-sqrt(lambda)/2 along its major axis e, each with
    # the variance along e reduced by lambda/4 so that the pair keeps l's covariance.
    evals, evecs = np.linalg.eigh(covs[l])
    e, lam = evecs[:, -1], evals[-1]
    offset = 0.5 * np.sqrt(lam) * e
    weights[l] = weights[k] = weights[l] / 2
    means[k] = means[l] - offset
    means[l] = means[l] + offset
    covs[l] = covs[k] = covs[l] - 0.25 * lam * np.outer(e, e)
    return weights, means, covs
