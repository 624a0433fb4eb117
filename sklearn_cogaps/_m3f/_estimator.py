"""Gibbs max-margin matrix factorisation of ordinal ratings (Gibbs M3F and Gibbs iPM3F): the
estimator.

Xu, Zhu & Zhang, "Fast Max-Margin Matrix Factorization with Data Augmentation", ICML 2013
(and its appendix on iPM3F). The hinge losses are augmented (Polson & Scott 2011) so that
every conditional is Gaussian, inverse Gaussian or Bernoulli; doc/m3f.rst derives them, and
``_fast.pyx`` samples them. The chain's state is in ``_chain``, the ratings in ``_ratings``.
"""

import copy
from numbers import Integral, Real

import numpy as np
from scipy import sparse
from sklearn.base import BaseEstimator, _fit_context
from sklearn.utils import check_random_state
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import check_is_fitted

from .._base import IterativeMixin
from .._mixins import DataInFitMixin
from .._utils._deprecation import RenamedMixin
from .._utils._openmp_helpers import kernel_threads
from .._utils._params import warn_unused_parameters
from .._utils._recommend import IMPLICIT_ATTRIBUTES, RecommenderMixin
from .._utils._seeding import draw_seeds
from .._utils._validation import (
    check_ignored_y,
    check_not_triplets,
    check_side_labels,
    data_dtype,
    shape_of,
    validate_input,
)
from . import _fast
from ._chain import (
    OPS_PER_WORK_UNIT,
    _Chain,
    _ibp_log_prior,
    _RunningSums,
    _snapshot,
    sample_new_users,
)
from ._metrics import _held_out_nmae, neg_nmae_scorer, rating_nmae
from ._ratings import (
    _as_ratings_csr,
    _check_held_out,
    _levels_text,
    _pattern_csr,
    _Ratings,
    _ratings_digest,
    _row_seeds,
    check_levels,
    infer_levels,
    level_codes,
)

__all__ = ["MaxMarginMF"]

# The largest prior scale whose square is a finite double.
# The most features the Indian buffet prior may expect (alpha * H_N) for a fit to start.
_MAX_IBP_FEATURES = 10_000
_MAX_SCALE = float(np.sqrt(np.finfo(np.float64).max))

_HELD_OUT_ADVICE = (
    "score held-out ratings, pass them as y of the shape of X, score(X_train, X_test) "
    "(the matrices of holdout_ratings), or call score(X) to hold one rating of each user "
    "out"
)


class _Problem:
    """What the chain of one fit reads: the ratings (and held-out ratings), their levels,
    the threshold prior and the fit's generator."""

    def __init__(self, R, R_held, data, levels, rho, varsigma, rng):
        self.R, self.R_held, self.data, self.levels = R, R_held, data, levels
        self.L = levels.size
        self.rho, self.varsigma, self.rng = rho, varsigma, rng


class _FitState:
    """A running chain with its running sums, the index of its first iteration in the whole
    chain (after a warm start), and the traces of the features and the held-out error."""

    def __init__(self, problem, chain, sums, it0, n_features, held_out):
        self.problem, self.chain, self.sums, self.it0 = problem, chain, sums, it0
        self.n_features, self.held_out = n_features, held_out


class MaxMarginMF(RenamedMixin, IterativeMixin, DataInFitMixin, RecommenderMixin, BaseEstimator):
    """Gibbs max-margin matrix factorisation of ordinal ratings (Gibbs M3F and iPM3F).

    Users (rows) rate items (columns) on L ordered levels. A rating is explained by a score
    x_ij = U_i . V_j and L - 1 thresholds theta_i of the user, with the all-threshold hinge
    loss of max-margin matrix factorisation; the hinge terms are augmented with latent
    variables so that every conditional of the posterior is a known distribution, sampled
    exactly (Xu, Zhu & Zhang 2013). With ``prior="ibp"`` the user factors are binary under
    an Indian buffet process and their number is learned. Predictions use the running mean
    of the parameters after ``burn_in``. See the :ref:`user guide <m3f>`.

    Parameters
    ----------
    n_components : int, default=30
        Number of latent dimensions K (``prior="gaussian"``); with ``prior="ibp"``, the
        number of features at the start.
    prior : {"gaussian", "ibp"}, default="gaussian"
        Gaussian user factors (Gibbs M3F) or binary features under an Indian buffet process
        prior (Gibbs iPM3F).
    C : float, default=0.1
        Weight of the hinge loss: larger fits the training ratings more closely.
    margin : float, default=9.0
        Margin of the hinge loss (the authors' value).
    n_levels : int or None, default=None
        Number of rating levels L when the ratings are 1..L. None infers the levels: 1..max
        when every rating is a positive integer, else the sorted distinct values of X (as
        the classes of a classifier); more than 20 inferred levels give a warning (continuous
        values are not ratings), which ``n_levels`` silences for a long scale mapped to 1..L.
    alpha : float, default=3.0
        Concentration of the Indian buffet process (``prior="ibp"``).
    max_new_features : int or None, default=None
        Truncation kappa of the number of new features a user may take per sweep
        (``prior="ibp"``); None uses max(ceil(alpha/N + 5 sqrt(alpha/N)), 10).
    factor_scale : float, default=1.0
        Standard deviation of the Gaussian priors of the factors (sigma).
    threshold_mean : array-like of shape (L - 1,) or None, default=None
        Prior means rho of the thresholds; None uses equal steps over
        [-1.5 margin (L - 2), 1.5 margin (L - 2)], as the authors.
    threshold_scale : float or None, default=None
        Prior standard deviation of the thresholds; None uses 1.5 margin.
    max_iter : int, default=50
        Gibbs iterations.
    burn_in : int, default=10
        Iterations before the running means start; must be below ``max_iter`` (with
        ``warm_start``, below the chain's length counting the earlier fits), and below
        ``max_iter`` again when new users are rated.
    random_state : int, RandomState instance or None, default=None
        Seed of the chain (and of the chains of new users in :meth:`predict_ratings`).
    verbose : int, default=0
        0: silent; 1: a progress line (iteration, objective, number of features, time
        elapsed and left) about every tenth of ``max_iter`` iterations; 2: a line after
        every iteration.
    warm_start : bool, default=False
        Continue the chain of the previous fit on the same ratings for ``max_iter`` more
        iterations, keeping its running means and drawing from where its generator stopped
        (with an integer ``random_state`` as with a generator instance). With other ratings
        (another number of users or items, other pairs or values), other rating levels,
        another ``prior`` or another ``n_components`` (``prior="gaussian"``), the fit starts
        a new chain with a ``UserWarning``.

    Attributes
    ----------
    loadings_ : ndarray of shape (n_users, K)
        The per-user factors: running mean of U (of Z for ``prior="ibp"``: the fraction of
        samples in which the user has the feature). K is ``n_components_``: ``n_components``
        for ``prior="gaussian"``, the features found for ``prior="ibp"``.
    components_ : ndarray of shape (K, n_items)
        The per-item factors: running mean of V, transposed (for ``prior="ibp"``, over the
        samples in which the feature exists).
    thresholds_ : ndarray of shape (n_users, n_levels - 1)
        Running mean of the thresholds.
    levels_ : ndarray of shape (n_levels,)
        The rating levels, in order.
    n_levels_ : int
        Number of levels L.
    n_components_ : int
        Number of latent dimensions (features) of the running means.
    threshold_mean_ : ndarray of shape (n_levels - 1,)
        The prior means of the thresholds used.
    threshold_scale_ : float
        The prior standard deviation of the thresholds used.
    objective_history_ : ndarray of shape (n_iter,)
        The max-margin objective of each sample: squared norms of the factors (or -ln of the
        IBP prior), C times the summed hinge losses and the threshold prior term.
    converged_ : bool
        True: the chain runs ``max_iter`` iterations, as every sampler of the package;
        False after an interruption.
    n_features_history_ : ndarray of shape (n_iter,)
        Number of features of each sample (constant for ``prior="gaussian"``).
    held_out_nmae_ : ndarray of shape (n_iter,)
        With held-out ratings passed as ``y`` to :meth:`fit`: their NMAE at each
        iteration, predicted from the current sample during the burn-in and from the
        running means after it (what :meth:`predict_ratings` would return had the fit
        stopped there); NaN for iterations run without ``y``. Use it to choose
        ``max_iter`` and ``burn_in``.
    n_iter_ : int
        Number of iterations run by the last call to :meth:`fit` (``max_iter``, or fewer
        after an interruption). The traces above cover the whole chain, across
        ``warm_start`` continuations: ``objective_history_.size`` iterations.
    n_samples_averaged_ : int
        Number of samples in the running means: the iterations after ``burn_in`` of the
        whole chain, across ``warm_start`` continuations.
    n_features_in_ : int
        Number of items seen during fit.
    feature_names_in_ : ndarray of shape (n_features_in,)
        Names of the items seen during fit, when X has string column names.

    See Also
    --------
    holdout_ratings : Training and held-out ratings for evaluation and model selection.
    rating_nmae : The normalised mean absolute error.

    References
    ----------
    M. Xu, J. Zhu and B. Zhang, "Fast Max-Margin Matrix Factorization with Data
    Augmentation", ICML 2013.

    N. G. Polson and S. L. Scott, "Data augmentation for support vector machines", Bayesian
    Analysis 6(1), 2011.

    Examples
    --------
    >>> import numpy as np
    >>> from scipy import sparse
    >>> from sklearn_cogaps import MaxMarginMF
    >>> rng = np.random.default_rng(0)
    >>> X = sparse.random(40, 30, density=0.5, random_state=0, format="csr")
    >>> X.data = rng.integers(1, 6, X.nnz).astype(float)
    >>> model = MaxMarginMF(n_components=3, max_iter=20, burn_in=5, random_state=0).fit(X)
    >>> model.predict_ratings(X).shape
    (40, 30)
    """

    _parameter_constraints: dict = {
        "n_components": [Interval(Integral, 1, None, closed="left")],
        "prior": [StrOptions({"gaussian", "ibp"})],
        "C": [Interval(Real, 0, None, closed="neither")],
        "margin": [Interval(Real, 0, None, closed="neither")],
        "n_levels": [Interval(Integral, 2, None, closed="left"), None],
        "alpha": [Interval(Real, 0, None, closed="neither")],
        "max_new_features": [Interval(Integral, 1, None, closed="left"), None],
        "factor_scale": [Interval(Real, 0, None, closed="neither")],
        "threshold_mean": ["array-like", None],
        "threshold_scale": [Interval(Real, 0, None, closed="neither"), None],
        "max_iter": [Interval(Integral, 1, None, closed="left")],
        "burn_in": [Interval(Integral, 0, None, closed="left")],
        "random_state": ["random_state"],
        "verbose": ["verbose"],
        "warm_start": ["boolean"],
    }

    _fit_advice = "MaxMarginMF(n_components=K).fit(R)"
    _peer_parameters = {
        "k": ("hpfrec", "n_components=k"),
        "n_factors": ("surprise", "n_components=n_factors"),
        "factors": ("implicit", "n_components=factors"),
        "n_epochs": ("surprise", "max_iter=n_epochs (Gibbs iterations, burn_in of them first)"),
        "iterations": ("implicit", "max_iter=iterations (Gibbs iterations)"),
        "random_seed": ("hpfrec", "random_state=random_seed"),
        "seed": ("a rating library", "random_state=seed"),
        **dict.fromkeys(
            ["lr_all", "lr_bu", "lr_bi", "lr_pu", "lr_qi"],
            ("surprise", "nothing: the Gibbs sampler takes no learning rate"),
        ),
        **dict.fromkeys(
            ["reg_all", "reg_bu", "reg_bi", "reg_pu", "reg_qi"],
            (
                "surprise",
                "C (the hinge loss's weight) and prior (the factors' prior); there is no "
                "ridge penalty to set",
            ),
        ),
        "regularization": (
            "implicit",
            "C (the hinge loss's weight) and prior (the factors' prior); there is no ridge "
            "penalty to set",
        ),
    }
    _masked_advice = (
        "MaxMarginMF reads NaN as a missing rating: pass {X}.astype(float).filled(np.nan)."
    )
    _peer_methods = {
        "predict": (
            "a rating library",
            "predict_ratings(X[rows], users=rows) for the ratings of training users' pairs "
            "(surprise's predict(uid, iid)), predict_ratings(X_new, observed=R_new) for "
            "new users', or score_pairs(users, items) for their latent scores",
        ),
        "topN": ("hpfrec", "recommend(R_user_rows, n=..., users=user_indices)"),
        **IMPLICIT_ATTRIBUTES,
        "test": (
            "surprise",
            "rating_mae(R_test, model.predict_ratings(R_test)) (or rating_nmae) for "
            "held-out ratings of all training users, R_test = triplets_to_matrix(..., "
            "user_labels=users, item_labels=items)[0] (row i is training row i); for some "
            "users' rows r, predict_ratings(R_test[r], users=r)",
        ),
    }

    _renamed_attributes = {
        "user_factors_": ("loadings_", False),
        "item_factors_": ("components_", True),
        "objective_": ("objective_history_", False),
        "n_features_trace_": ("n_features_history_", False),
    }

    _objective_name = "max-margin objective"
    _maximise = False
    _fitted_attribute = "loadings_"
    _stops_early = False

    def __init__(
        self,
        n_components=30,
        *,
        prior="gaussian",
        C=0.1,
        margin=9.0,
        n_levels=None,
        alpha=3.0,
        max_new_features=None,
        factor_scale=1.0,
        threshold_mean=None,
        threshold_scale=None,
        max_iter=50,
        burn_in=10,
        random_state=None,
        verbose=0,
        warm_start=False,
    ):
        self.n_components = n_components
        self.prior = prior
        self.C = C
        self.margin = margin
        self.n_levels = n_levels
        self.alpha = alpha
        self.max_new_features = max_new_features
        self.factor_scale = factor_scale
        self.threshold_mean = threshold_mean
        self.threshold_scale = threshold_scale
        self.max_iter = max_iter
        self.burn_in = burn_in
        self.random_state = random_state
        self.verbose = verbose
        self.warm_start = warm_start

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        tags.input_tags.allow_nan = True
        tags.target_tags.required = False
        return tags

    # -- validation --------------------------------------------------------------------------

    def _chain_mismatch(self, R, levels):
        """Why ``warm_start`` cannot continue the previous chain on the ratings ``R`` with
        ``levels``, or None when it can: the running means belong to the chain of one
        model of one set of ratings."""
        n_users, n_items = self._chain_state[0].shape[0], self._chain_state[1].shape[0]
        if (n_users, n_items) != R.shape:
            return (
                f"X has {R.shape[0]} users and {R.shape[1]} items, the previous fit had "
                f"{n_users} and {n_items}"
            )
        # the running means of a chain continued under another model (prior included)
        # would average draws of two posteriors, and new users would be rated under the
        # second alone
        fitted = self._fitted_model_params()
        for name, value in self._model_params().items():
            before = fitted.get(name, value)
            if name == "alpha" and self.prior != "ibp":
                continue
            if (value is None) != (before is None) or (
                value is not None and not np.array_equal(np.asarray(value), np.asarray(before))
            ):
                return f"{name}={value!r}, the previous fit had {name}={before!r}"
        K = self._chain_state[0].shape[1]
        if self.prior == "gaussian" and K != self.n_components:
            return f"n_components={self.n_components}, the previous fit had {K}"
        if not np.array_equal(levels, self.levels_):
            return (
                f"the rating levels are {_levels_text(levels)} (n_levels={self.n_levels}), "
                f"the previous fit had {_levels_text(self.levels_)}"
            )
        if getattr(self, "_ratings_digest", None) != _ratings_digest(R, levels):
            return "X holds other ratings than the previous fit"
        return None

    def _validate_ratings(self, X, reset, name="X"):
        check_not_triplets(self, X, value="Rating", source="a rating library's loader")
        X = validate_input(
            self,
            X,
            accept_sparse=("csr", "csc", "coo"),
            dtype=np.float64,
            ensure_all_finite="allow-nan",
            reset=reset,
            input_name=name,
        )
        return _as_ratings_csr(X, name)

    def _check_fit_ratings(self, R):
        if R.nnz == 0:
            raise ValueError(
                f"X of shape {R.shape} has no observed rating (every entry is missing)."
            )

    # -- priors and state --------------------------------------------------------------------

    def _threshold_prior(self, L):
        if self.threshold_mean is None:
            half = 1.5 * self.margin * (L - 2)
            rho = np.linspace(-half, half, L - 1)
        else:
            rho = np.asarray(self.threshold_mean, dtype=np.float64)
            if rho.shape != (L - 1,) or not np.all(np.isfinite(rho)):
                raise ValueError(
                    f"threshold_mean must be n_levels - 1 = {L - 1} finite values; got "
                    f"{rho.tolist()}."
                )
        scale = 1.5 * self.margin if self.threshold_scale is None else float(self.threshold_scale)
        # the sampler uses the prior precisions 1 / scale^2, which must be representable
        for name, value in (("threshold scale", scale), ("factor_scale", self.factor_scale)):
            if not value < _MAX_SCALE:
                raise ValueError(
                    f"The {name} must be below {_MAX_SCALE:.3g} (its square must be finite in "
                    f"double precision); got {value:g}. Rescale the ratings' scores: lower "
                    "margin, threshold_scale or factor_scale."
                )
            if not value > 1.0 / _MAX_SCALE:
                raise ValueError(
                    f"The {name} must be above {1.0 / _MAX_SCALE:.3g} (the prior precision "
                    f"1 / scale^2 must be finite in double precision); got {value:g}. Raise "
                    "margin, threshold_scale or factor_scale."
                )
        return rho, scale

    def _check_ibp_size(self, N):
        """Refuse an ``alpha`` whose Indian buffet process expects more features than a fit
        can hold: ``alpha * H_N`` for N users (Griffiths & Ghahramani 2005), each feature a
        column of U and a row of V swept at every iteration (alpha=1e4 on 30 users ran for
        minutes, 1e6 ended in a MemoryError that advised fewer threads)."""
        if self.prior != "ibp":
            return
        expected = self.alpha * float(np.sum(1.0 / np.arange(1, N + 1)))
        if expected > _MAX_IBP_FEATURES:
            raise ValueError(
                f"alpha={self.alpha:g} makes the Indian buffet process expect alpha * H_N = "
                f"{expected:.3g} features for N = {N} users, beyond the {_MAX_IBP_FEATURES:,} "
                "a fit can sweep in reasonable time and memory. alpha is the number of "
                "features a user has (the prior's mean); usual values are 1 to 10."
            )

    def _kappa(self, N):
        if self.max_new_features is not None:
            return int(self.max_new_features)
        r = self.alpha / N
        return int(max(np.ceil(r + 5.0 * np.sqrt(r)), 10))

    def _initial_chain(self, data, rng, L, rho, varsigma):
        N, M = data.shape
        K = self.n_components
        s = self.factor_scale
        if self.prior == "gaussian":
            U = s * rng.standard_normal((N, K))
        else:
            self._check_ibp_size(N)
            # each user starts with each of the K features with probability 1/2
            U = (rng.uniform(size=(N, K)) < 0.5).astype(np.float64)
            keep = U.sum(axis=0) > 0
            U = np.ascontiguousarray(U[:, keep])
            K = U.shape[1]
        V = s * rng.standard_normal((M, K))
        theta = np.tile(rho, (N, 1))
        return _Chain(U, V, theta, np.zeros((data.nnz, L - 1)), rho, varsigma)

    # -- the sweeps --------------------------------------------------------------------------

    def _row_pass(self, data, chain, seeds, update_theta, n_threads, model=None):
        """theta | rest (if update_theta), then lambda | rest; returns sum of the hinge terms.
        ``model``: the model's parameters (``C``, ``margin``) if not the current ones."""
        model = self._model_params() if model is None else model
        nnz = data.nnz
        chain.cv1 = np.empty(nnz)
        chain.cv2 = np.empty(nnz)
        hinge = np.empty(data.shape[0])
        _fast.row_pass(
            data.indptr,
            data.indices,
            data.level,
            chain.U,
            chain.V,
            chain.theta,
            chain.rho,
            1.0 / chain.varsigma**2,
            chain.ilam,
            np.empty(nnz),
            chain.cv1,
            chain.cv2,
            hinge,
            seeds,
            float(model["C"]),
            float(model["margin"]),
            update_theta,
            n_threads,
        )
        return float(np.sum(hinge))

    def _model_params(self):
        """The parameters of the model, whose posterior the chain samples (not those of the
        chain's length), as they are now."""
        names = ("prior", "C", "margin", "factor_scale", "alpha", "threshold_mean",
                 "threshold_scale")  # fmt: skip
        return {name: getattr(self, name) for name in names}

    def _fitted_model_params(self):
        """The model's parameters at the last fit, whose posterior the fitted attributes are:
        new users are rated under them (a parameter set after the fit is the next fit's).
        A model pickled before they were kept has the current ones, and its prior
        (``_fit_prior``, which those models kept)."""
        current = self._model_params()
        if "_fit_prior" in self.__dict__:
            current["prior"] = self._fit_prior
        return getattr(self, "_fit_model", current)

    def _objective(self, chain, hinge):
        s2 = self.factor_scale**2
        theta_term = float(np.sum((chain.theta - chain.rho) ** 2)) / (2 * chain.varsigma**2)
        v_term = float(np.sum(chain.V**2)) / (2 * s2)
        if self.prior == "gaussian":
            u_term = float(np.sum(chain.U**2)) / (2 * s2)
        else:
            u_term = -_ibp_log_prior(chain.U, self.alpha)
        return u_term + v_term + float(self.C) * hinge + theta_term

    def _sweep(self, data, chain, rng):
        """One Gibbs iteration: U (or Z), V, theta, lambda. Returns the objective."""
        N, M = data.shape
        K = chain.U.shape[1]
        work = data.nnz * max(K, 1) ** 2
        prec = 1.0 / self.factor_scale**2
        if self.prior == "gaussian":
            _fast.sample_factors(
                data.indptr,
                data.indices,
                data.entry,
                chain.cv1,
                chain.cv2,
                chain.V,
                prec,
                chain.U,
                draw_seeds(rng, N),
                kernel_threads(OPS_PER_WORK_UNIT * work),
            )
        else:
            self._sample_ibp(data, chain, rng)
        _fast.sample_factors(
            data.c_indptr,
            data.c_indices,
            data.c_entry,
            chain.cv1,
            chain.cv2,
            chain.U,
            prec,
            chain.V,
            draw_seeds(rng, M),
            kernel_threads(OPS_PER_WORK_UNIT * data.nnz * max(chain.U.shape[1], 1) ** 2),
            "item",
        )
        hinge = self._row_pass(
            data,
            chain,
            draw_seeds(rng, N),
            True,
            kernel_threads(
                OPS_PER_WORK_UNIT * data.nnz * (chain.theta.shape[1] + chain.U.shape[1]) * 20
            ),
        )
        return self._objective(chain, hinge)

    def _sample_ibp(self, data, chain, rng):
        """The Z sweep of Gibbs iPM3F, growing the feature arrays when needed, then compaction."""
        N, M = data.shape
        kappa = self._kappa(N)
        K = chain.U.shape[1]
        cap = K + 2 * kappa + 8
        Z = np.zeros((N, cap))
        Z[:, :K] = chain.U
        V = np.zeros((M, cap))
        V[:, :K] = chain.V
        counts = np.zeros(cap, dtype=np.intc)
        counts[:K] = chain.U.sum(axis=0).astype(np.intc)
        seeds = draw_seeds(rng, N)
        x = np.empty(data.nnz)
        start = 0
        while True:
            start, K = _fast.sample_ibp_rows(
                data.indptr,
                data.indices,
                chain.cv1,
                chain.cv2,
                Z,
                V,
                counts,
                x,
                K,
                start,
                seeds,
                float(self.alpha),
                float(self.factor_scale),
                kappa,
            )
            if start >= N:
                break
            cap = 2 * cap
            Z2 = np.zeros((N, cap))
            Z2[:, : Z.shape[1]] = Z
            V2 = np.zeros((M, cap))
            V2[:, : V.shape[1]] = V
            c2 = np.zeros(cap, dtype=np.intc)
            c2[: counts.size] = counts
            Z, V, counts = Z2, V2, c2
        keep = np.flatnonzero(counts[:K] > 0)
        born = np.arange(chain.n_born, chain.n_born + K - chain.U.shape[1])
        ids = np.concatenate([chain.ids, born])
        chain.n_born += born.size
        chain.ids = ids[keep]
        chain.U = np.ascontiguousarray(Z[:, keep])
        chain.V = np.ascontiguousarray(V[:, keep])

    # -- the fitting loop's hooks ------------------------------------------------------------

    def _initialise(self, problem, rng):
        chain = self._initial_chain(problem.data, rng, problem.L, problem.rho, problem.varsigma)
        sums = _RunningSums(problem.data.shape, problem.L)
        # lambda given the initial state, so that the first sweep has its statistics
        self._row_pass(problem.data, chain, draw_seeds(rng, problem.data.shape[0]), False, 1)
        return _FitState(problem, chain, sums, 0, [], [])

    def _warm_start_mismatch(self, problem):
        return self._chain_mismatch(problem.R, problem.levels)

    def _continue(self, problem):
        self._check_ibp_size(problem.data.shape[0])
        saved = getattr(self, "_chain_rng", None)
        if saved is not None and isinstance(self.random_state, Integral):
            # An integer seed makes the same generator at every fit: the continuation
            # draws from where the chain's generator stopped, not the first fit's numbers
            # again (a chain that replays its random numbers is no longer a Markov chain
            # of the posterior). A generator instance, or None's global one, has moved on.
            problem.rng = np.random.RandomState()
            problem.rng.set_state(saved)
        U, V, theta, ilam = (a.copy() for a in self._chain_state)
        chain = _Chain(U, V, theta, ilam, problem.rho, problem.varsigma)
        chain.ids, chain.n_born = self._chain_ids.copy(), self._n_born_total
        it0 = self.objective_history_.size
        held = list(getattr(self, "held_out_nmae_", np.full(it0, np.nan)))
        state = _FitState(problem, chain, copy.deepcopy(self._sums), it0,
                          list(self.n_features_history_), held)  # fmt: skip
        self._row_pass(problem.data, chain, draw_seeds(problem.rng, problem.data.shape[0]),
                       False, 1)  # fmt: skip
        return state

    def _iterate(self, state, iteration):
        p = state.problem
        it = state.it0 + iteration - 1  # the iteration's index in the whole chain
        chain = state.chain
        value = self._sweep(p.data, chain, p.rng)
        state.n_features.append(chain.U.shape[1])
        if it >= self.burn_in:
            state.sums.add(chain, chain.ids)
        state.held_out.append(
            np.nan
            if p.R_held is None
            else _held_out_nmae(p.R_held, chain, state.sums, self.prior, p.levels)
        )
        return value

    def _snapshot(self, state, iteration):
        if iteration == 0 or state.sums.count == 0:
            return None  # no running mean yet: an interruption leaves the estimator as it was
        return state, _snapshot(state.chain), copy.deepcopy(state.sums), iteration

    def _restore(self, snapshot):
        state, chain, sums, iteration = snapshot
        p = state.problem
        state.chain = _Chain(*chain[:4], p.rho, p.varsigma)
        state.chain.ids, state.chain.n_born = chain[4], chain[5]
        state.sums = sums
        del state.n_features[state.it0 + iteration :], state.held_out[state.it0 + iteration :]
        return state

    def _progress_extra(self, state):
        return f"{state.chain.U.shape[1]} features"

    # -- fit ---------------------------------------------------------------------------------

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y=None):
        """Run the Gibbs sampler on the ratings X.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_users, n_items)
            Ratings: the stored entries of a sparse matrix (stored zeros are an error), or
            the non-NaN entries of a dense array. A user or item without any rating keeps
            factors drawn from the prior.
        y : {array-like, sparse matrix} of shape (n_users, n_items), default=None
            Held-out ratings of the same users: pairs that X does not rate, with the levels
            of X. They are not fitted; their NMAE at each iteration is recorded in
            ``held_out_nmae_``. This is also what ``GridSearchCV(...,
            scoring=neg_nmae_scorer).fit(X_train, X_test)`` passes on (see
            :func:`holdout_ratings`). A one-dimensional target of length n_users, which
            scikit-learn's tools pass along, is ignored; anything else is refused.

        Returns
        -------
        self : MaxMarginMF
            The fitted estimator.

        Notes
        -----
        Ctrl-C stops the fit after its last complete iteration with a
        :class:`~sklearn_cogaps.FitInterruptedWarning`; ``n_iter_`` and the traces stop
        there. Interrupted before the first iteration after ``burn_in`` has completed (no
        running mean yet), the ``KeyboardInterrupt`` propagates and the estimator is left
        as it was.
        """
        held_out = y is not None and shape_of(y) == shape_of(X)
        if y is not None and not held_out and shape_of(y) != (shape_of(X)[:1]):
            # a 1-d target of length n_users (scikit-learn's tools pass one along) is
            # ignored; anything else is neither that nor held-out ratings
            raise ValueError(
                f"MaxMarginMF.fit takes as y held-out ratings of the shape of X, {shape_of(X)}; "
                f"got y of shape {shape_of(y)}. To monitor held-out ratings pass them by "
                "keyword, fit(X_train, y=X_test), with the matrices of holdout_ratings."
            )
        R = self._validate_ratings(X, reset=True)
        self._check_fit_ratings(R)
        if self.prior == "gaussian":
            warn_unused_parameters(self, ("alpha", "max_new_features"), "with prior='ibp'",
                                   "Set prior='ibp'")  # fmt: skip
        R_held = self._validate_ratings(y, reset=False, name="y") if held_out else None
        levels = infer_levels(R, self.n_levels)
        if data_dtype(X) == np.float32:
            # the decimals float32 ratings stand for: 0.3, not 0.30000001192092896
            levels = np.array([float(str(np.float32(v))) for v in levels])
        check_levels(R, levels, "X")
        if R_held is not None:
            _check_held_out(R, R_held)
            check_levels(R_held, levels, "y")
        L = levels.size
        rho, varsigma = self._threshold_prior(L)
        data = _Ratings(R, levels)
        rng = check_random_state(self.random_state)
        # score's held-out ratings, from random_state alone: a search's candidates (other
        # n_components or prior, which draw other starts) are scored on the same ratings
        holdout_seed = draw_seeds(copy.deepcopy(rng))
        problem = _Problem(R, R_held, data, levels, rho, varsigma, rng)
        state = self._warm_state(problem)
        if state is None:
            state = self._initialise(problem, rng)
        it0 = state.it0
        if it0 + self.max_iter <= self.burn_in:
            done = f" after the {it0} of the warm start" if it0 else ""
            raise ValueError(
                f"burn_in={self.burn_in} must be below the chain's length, {it0 + self.max_iter} "
                f"iterations (max_iter={self.max_iter}{done}): the running means start after "
                "the burn-in, and a chain that ends within it has no sample to predict from. "
                "Raise max_iter or lower burn_in."
            )
        objective = list(self.objective_history_) if state.it0 else []
        transform_seed = draw_seeds(problem.rng)
        run = self._run(state, self.max_iter)
        self._end_run(run)
        self._chain_rng = problem.rng.get_state()
        state = run.state
        sums = state.sums
        chain = state.chain
        self._transform_seed = transform_seed
        self._holdout_seed = holdout_seed
        self._keep_row_labels(X)
        self.n_samples_averaged_ = sums.count
        self.objective_history_ = np.asarray(objective + run.history)
        self.n_features_history_ = np.asarray(state.n_features, dtype=np.intp)
        self.held_out_nmae_ = np.asarray(state.held_out, dtype=np.float64)
        self.levels_ = levels
        self.n_levels_ = L
        self.threshold_mean_ = rho
        self.threshold_scale_ = float(varsigma)
        U, V, theta = sums.means(self.prior)
        self.loadings_ = U
        self.components_ = V.T
        self.thresholds_ = theta
        self.n_components_ = U.shape[1]
        self._sums = sums
        self._fit_model = self._model_params()
        self._ratings_digest = _ratings_digest(R, levels)
        self._chain_state = (chain.U, chain.V, chain.theta, chain.ilam)
        self._chain_ids = chain.ids
        self._n_born_total = chain.n_born
        return self

    def _ratings_from_scores(self, x, theta_rows):
        """Level index 1 + sum_r 1[x >= theta_r], mapped to the rating values."""
        idx = np.sum(x[:, None] >= theta_rows, axis=1)
        return self.levels_[idx]

    def _output(self, X, P, values, dtype=np.float64):
        values = values.astype(dtype, copy=False)
        out = sparse.csr_matrix((values, P.indices.copy(), P.indptr.copy()), shape=P.shape)
        if sparse.issparse(X):
            return out
        dense = np.full(P.shape, np.nan, dtype=dtype)
        rows = np.repeat(np.arange(P.shape[0]), np.diff(P.indptr))
        dense[rows, P.indices] = values
        return dense

    def predict_ratings(self, X, observed=None, *, users=None):
        """Predicted ratings at the (user, item) pairs of X.

        Without ``observed``, the rows of X are training users ("weak generalisation"):
        all of them in the order of the fit, or the rows ``users`` of the fitted matrix.
        Their ratings come from the running means of the fitted parameters,
        1 + sum_r 1[U_i . V_j >= theta_ir] mapped to the levels.

        With ``observed``, the rows are new users described by their ratings ("strong
        generalisation"): each user's factors and thresholds are sampled with the item
        factors held at their running means (a chain of ``max_iter`` iterations, averaged
        after ``burn_in``), from a random stream derived from ``random_state`` and the
        row's items and rating levels alone, so that a row gets the same predictions
        whatever other rows are in the batch, and on any scale of the same levels. For
        ``prior="ibp"`` a new user takes features among the fitted ones, with prior
        probability m_k / (N + 1).

        The method is not called ``predict`` because scikit-learn's ``predict`` returns one
        value per row; this returns a rating per requested pair.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_users, n_items)
            The pairs to rate: the stored entries of a sparse matrix or the non-NaN entries
            of a dense array (their values are ignored).
        observed : {array-like, sparse matrix} of shape (n_users, n_items), default=None
            Known ratings of new users, one row per row of X, with the levels of the fit.
        users : array-like of int of shape (n_users,), default=None
            The training users the rows of X are (row indices of the fitted matrix), to rate
            some of them: ``predict_ratings(X[rows], users=rows)`` (surprise's
            ``predict(uid, iid)`` for the pairs of those rows). None: X has every training
            user's row, or ``observed`` describes new users.

        Returns
        -------
        ratings : scipy.sparse.csr_matrix or ndarray of shape (n_users, n_items)
            Predicted ratings at the pairs of X: a CSR matrix for sparse X, else a dense
            array with NaN at the other entries; float32 for float32 X, else float64.
        """
        check_is_fitted(self)
        dtype = data_dtype(X)
        X_checked = validate_input(
            self,
            X,
            accept_sparse=("csr", "csc", "coo"),
            dtype=np.float64,
            ensure_all_finite="allow-nan",
            reset=False,
        )
        R = None
        if observed is not None:
            if users is not None:
                raise ValueError(
                    "users names training users and observed describes new ones: pass one of them."
                )
            # the new users' ratings are paired with the pairs of X by position
            check_side_labels(X, "observed", observed)
            R = self._validate_ratings(observed, reset=False, name="observed")
        if users is not None:
            users = self._indices(users, self.loadings_.shape[0], "users", "training users")
            if users.shape[0] != X_checked.shape[0]:
                raise ValueError(
                    f"users must name the training user of each row of X ({X_checked.shape[0]}"
                    f" rows); got {users.shape[0]} indices."
                )
        if R is None:  # training users: X's row labels, if any, must be theirs
            self._check_row_labels(X, users)
        return self._predict(X_checked, R, users, dtype)

    def _predict(self, X_checked, R, users=None, dtype=np.float64):
        """predict_ratings on validated pairs and validated ratings of new users (or None),
        or of the training users ``users`` (validated indices, or None for all)."""
        P = _pattern_csr(X_checked)
        rows = np.repeat(np.arange(P.shape[0]), np.diff(P.indptr))
        if R is None and users is not None:
            U, theta = self.loadings_[users], self.thresholds_[users]
        elif R is None:
            if X_checked.shape[0] != self.loadings_.shape[0]:
                raise ValueError(
                    f"X must have one row per training user ({self.loadings_.shape[0]}); "
                    f"got {X_checked.shape[0]}. Pass users=rows to rate some of them "
                    "(predict_ratings(X[rows], users=rows)), or observed=... to rate new "
                    "users."
                )
            U, theta = self.loadings_, self.thresholds_
        else:
            if R.shape[0] != X_checked.shape[0]:
                raise ValueError(
                    f"observed must have the rows of X ({X_checked.shape[0]}); got {R.shape[0]}."
                )
            U, theta = sample_new_users(self, R)
        x = np.einsum("pk,pk->p", U[rows], self.components_.T[P.indices])
        return self._output(X_checked, P, self._ratings_from_scores(x, theta[rows]), dtype)

    def _recommend_input(self, X):
        R = self._validate_ratings(X, reset=False)
        # training users' ratings say only what they have seen, but zeros read as ratings
        # of 0 would mark every item seen and recommend none: refused as for new users
        check_levels(R, self.levels_, "X")
        return R, R  # a user has seen the items it rated

    def _new_user_factors(self, R, given):
        U = sample_new_users(self, R)[0]
        if self._fitted_model_params()["prior"] == "gaussian":
            # a user without a rating has the prior's factors, of mean 0: every item's
            # expected score is the same, and the mean of the chain's draws ranked the
            # items by noise (the worst rated first, or the best, by the seed). Zero
            # factors rank none. (Under the IBP a new user takes the features of the
            # training users by their frequency, a ranking by popularity.)
            U = np.array(U, dtype=np.float64)
            U[np.diff(R.indptr) == 0] = 0.0
        return U

    def _unranked_reason(self):
        return (
            "have no rating: under prior='gaussian' their factors are the prior's, of mean "
            "0, so every item's expected score is the same and MaxMarginMF ranks none. "
            "Recommend them the items of the most ratings yourself, or fit with "
            "prior='ibp', whose new users take the training users' features by their "
            "frequency"
        )

    def score(self, X, y=None):
        """Score held-out ratings of the users of X: minus their NMAE (higher is better).

        With ``y``, held-out ratings of the users of X (the shape of X, as ``fit`` takes
        them): the users are rated from X as in :meth:`predict_ratings` and scored at the
        entries of y, as :func:`neg_nmae_scorer` scores them. So
        ``GridSearchCV(MaxMarginMF(), {...}).fit(X_train, X_test)`` with the matrices of
        :func:`holdout_ratings` scores each fold's held-out ratings.

        Without it, every user (row) with at least two ratings holds one of them out,
        chosen by a stream derived from ``random_state`` and the row's items and rating
        levels (the same on any scale of the levels, or in float32); the user is rated
        from the others, and the held-out ratings are scored. So
        ``GridSearchCV(MaxMarginMF(), {"C": [...]}).fit(X)`` over the users scores ratings
        the fit never saw.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_users, n_items)
            Ratings of the users to score.
        y : {array-like, sparse matrix} of shape (n_users, n_items), default=None
            Held-out ratings of the same users, to score given X. A 1-d target of length
            n_users (which scikit-learn's tools pass along) is ignored.

        Returns
        -------
        score : float
            -MAE / E_L over the held-out ratings (:func:`rating_nmae`).
        """
        if y is not None and shape_of(y) == shape_of(X):
            # fit(X_train, X_test) traces them: scored here as they are there
            check_is_fitted(self)
            return neg_nmae_scorer(self, X, y)
        check_ignored_y(self, y, X, method="score", advice=_HELD_OUT_ADVICE)
        check_is_fitted(self)
        R = self._validate_ratings(X, reset=False)
        check_levels(R, self.levels_, "X")
        counts = np.diff(R.indptr)
        if not np.any(counts >= 2):
            raise ValueError(
                "score needs users with at least two ratings (one is held out); X has none."
            )
        # a model pickled before _holdout_seed was kept holds out what it did then
        seed = getattr(self, "_holdout_seed", self._transform_seed ^ 0x5DEECE66D)
        seeds = _row_seeds(R, seed, self.levels_)
        held = np.zeros(R.nnz, dtype=bool)
        for i in np.flatnonzero(counts >= 2):
            held[R.indptr[i] + int(seeds[i] % np.uint64(counts[i]))] = True
        rows = np.repeat(np.arange(R.shape[0]), counts)
        train = sparse.csr_matrix((R.data[~held], (rows[~held], R.indices[~held])), shape=R.shape)
        test = sparse.csr_matrix((R.data[held], (rows[held], R.indices[held])), shape=R.shape)
        # scored as vectors in the CSR order of both: a dense X may hold ratings of 0, which
        # a sparse matrix of true ratings cannot (a stored 0 is refused there)
        predicted = self._predict(test, train).data
        # the held-out ratings as the levels they are (float32's 0.30000001 is 0.3)
        truth = self.levels_[level_codes(R.data[held], self.levels_)[0]]
        return -rating_nmae(truth, predicted, self.levels_)
