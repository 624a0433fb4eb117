"""The input of extreme deconvolution: noisy, projected and incomplete observations.

Each observation is ``x_i = R_i v_i + e_i`` with a known noise covariance ``S_i`` (Bovy,
Hogg & Roweis 2011, section 2); a missing coordinate (NaN) is dropped from its point's
projection. This module validates the observations, their noise, projections and weights,
and the habits of astroML's ``XDGMM.fit(X, Xerr)``.
"""

import numpy as np
from scipy import sparse
from sklearn.utils.validation import _check_sample_weight, check_array

from .._utils._validation import (
    as_float_array,
    check_not_masked,
    check_side_labels,
    shape_of,
    validate_input,
)
from .._utils._warnings import warn

__all__ = [
    "noise_advice",
    "Observations",
    "Problem",
    "is_projected",
    "n_dims",
    "proxy",
    "observations",
    "validate_observations",
    "check_noise_like_y",
]


# What to do instead of passing the noise as the second positional argument (astroML's
# XDGMM.fit(X, Xerr) takes it there).
def noise_advice(method):
    """What ``method``'s refusal of a side input given positionally advises: the noise by
    keyword, and the other side inputs ``method`` takes."""
    weights = "" if method == "score" else " and weights in sample_weight=w"
    return (
        f"give the noise of each point, pass it by keyword: {method}(X, X_cov=Xerr) with "
        "covariances of shape (n_samples, n_features, n_features) or variances of shape "
        f"(n_samples, n_features); projections go in projection=R{weights}"
    )


# What a masked array of points should be instead: ExtremeDeconvolution reads NaN as a
# coordinate not measured.
MASKED_ADVICE = (
    "ExtremeDeconvolution reads NaN as a coordinate not measured: pass "
    "{X}.astype(float).filled(np.nan)."
)


class Observations:
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

    @property
    def dtype(self):
        return self.X.dtype

    @property
    def total(self):
        """The points' total weight, summed by the E-step's chunks (so that points read by
        blocks give the same sum)."""
        from ._estep import chunk_starts, chunk_weights

        return float(chunk_weights(self.sample_weight, chunk_starts(self.n)).sum())

    def mean_weight(self):
        return float(np.mean(self.sample_weight))

    def minibatches(self, rng, batch_size):
        """The points in a random order, ``batch_size`` at a time: an epoch."""
        order = rng.permutation(self.n)
        for start in range(0, self.n, batch_size):
            yield self.take(order[start : start + batch_size])

    @classmethod
    def concatenate(cls, parts):
        """The points of consecutive blocks, as one set."""
        first = parts[0]

        def joined(name, per_point):
            arrays = [getattr(part, name) for part in parts]
            return np.concatenate(arrays) if per_point else arrays[0]

        return cls(
            joined("X", True),
            first.noise_mode,
            joined("Sdiag", first.noise_mode == 1),
            joined("Sfull", first.noise_mode == 2),
            first.R,
            joined("Rproj", first.Rproj.shape[0] > 0),
            joined("sample_weight", True),
        )

    def take(self, idx):
        """The rows ``idx`` (a minibatch), as new ``Observations``."""
        sub = Observations(
            np.ascontiguousarray(self.X[idx]),
            self.noise_mode,
            np.ascontiguousarray(self.Sdiag[idx]) if self.noise_mode == 1 else self.Sdiag,
            np.ascontiguousarray(self.Sfull[idx]) if self.noise_mode == 2 else self.Sfull,
            self.R,
            np.ascontiguousarray(self.Rproj[idx]) if self.Rproj.shape[0] else self.Rproj,
            np.ascontiguousarray(self.sample_weight[idx]),
        )
        return sub


# The habit of writing a huge or infinite variance for a coordinate that was not measured.
_MISSING_AS_NAN = (
    " A coordinate that was not measured is NaN in X (its noise entries are then ignored), "
    "not an infinite variance."
)


def _check_representable(name, values, dtype):
    """Refuse finite entries that the points' dtype (float32) would make infinite: the
    likelihood would be -inf, without an error."""
    largest = np.finfo(dtype).max
    if largest >= np.finfo(np.float64).max or not values.size:
        return  # finite values are checked already; float64 holds them all
    magnitude = float(np.max(np.abs(values)))
    if magnitude > largest:
        raise ValueError(
            f"{name} has entries of magnitude {magnitude:.3g}, above "
            f"the largest {np.dtype(dtype).name} ({largest:.3g}), X's dtype, in which they "
            f"would be infinite. Fit in float64 (X.astype(np.float64)), or rescale."
            + (_MISSING_AS_NAN if name == "X_cov" else "")
        )


def check_noise_block(S, missing, offset):
    """Check full noise covariances (finite, symmetric, PSD) on their observed coordinates."""
    S = np.where(missing[:, :, None] | missing[:, None, :], 0.0, S.astype(np.float64))
    if not np.all(np.isfinite(S)):
        bad = np.flatnonzero(~np.isfinite(S).all(axis=(1, 2)))[0]
        raise ValueError(
            f"X_cov must be finite where X is observed; the covariance of point "
            f"{offset + bad} has non-finite entries."
            + (_MISSING_AS_NAN if np.isinf(S[bad]).any() else "")
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


def check_magnitude(X, missing, n):
    """Refuse observations whose squared deviations would overflow in the E- and M-steps.

    The fit sums ``n`` outer products of deviations of ``p`` coordinates: they stay finite
    while ``16 n p max|x|^2`` does.
    """
    if X.size == 0 or missing.all():
        return
    big = float(np.max(np.abs(np.where(missing, 0, X))))
    limit = np.sqrt(np.finfo(X.dtype).max / (16.0 * n * X.shape[1]))
    if big > limit:
        raise ValueError(
            f"X has an entry of magnitude {big:.3g}; with {n} points of "
            f"{X.shape[1]} coordinates in {X.dtype}, the sums of squared deviations overflow "
            f"above {limit:.3g}. Rescale X (and X_cov by the square of the factor)."
        )


def validate_observations(estimator, X, X_cov, projection, sample_weight, reset):
    """Validate X and its noise, projection and weights; returns an :class:`Observations`.

    ``reset`` is True in ``fit`` (the points set the dimensions) and False elsewhere (they
    must have the fitted ones).
    """
    # noise variances as a DataFrame are matched to X by position: their labels must
    # be X's, in X's order
    check_side_labels(X, "X_cov", X_cov)
    check_side_labels(X, "sample_weight", sample_weight, axes=("row",))
    for name, value in (("X_cov", X_cov), ("projection", projection),
                        ("sample_weight", sample_weight)):  # fmt: skip
        check_not_masked(value, name)
    kw = dict(dtype=[np.float64, np.float32], ensure_all_finite="allow-nan", order="C")
    if reset or projection is None and not getattr(estimator, "_fitted_with_projection", False):
        X = validate_input(estimator, X, reset=reset, **kw)
    else:
        # With a projection, the points scored may observe a different number of
        # coordinates than the training points: the projection maps v to them. A model
        # fitted with projections reads points given without one as points of v, which
        # must have v's dimension (checked by observations), not the training points'.
        X = validate_input(estimator, X, reset=False, check=check_array, **kw)
    data = observations(X, X_cov, projection, sample_weight,
                        None if reset else estimator.means_.shape[1])  # fmt: skip
    if reset:
        warn_unreached(data)
    return data


def warn_unreached(data):
    """Warn about coordinates of v that no point of positive weight observes (a column of X
    all NaN, or a direction of v outside every projection): the likelihood does not depend
    on them, so the fitted means and variances there are the start's, not estimates."""
    used = data.sample_weight > 0
    observed = ~np.isnan(data.X[used])
    if data.R is None and data.Rproj.shape[0] == 0:
        reached = observed.any(axis=0)
    elif data.R is not None:
        reached = (data.R[observed.any(axis=0)] != 0).any(axis=0)
    else:
        reached = ((data.Rproj[used] != 0) & observed[:, :, None]).any(axis=(0, 1))
    unreached = np.flatnonzero(~reached)
    if unreached.size and used.any():
        warn(
            f"{unreached.size} coordinate(s) of v are observed by no point (all NaN in X, or "
            f"outside every projection): {unreached[:10].tolist()}. The data say nothing "
            "about them, so means_ and covariances_ there are the start's, not estimates, "
            "and sample() draws them from the start. Drop those coordinates, or add points "
            "that observe them.",
            UserWarning,
        )


def _warn_unobserved(missing, offset):
    """Warn about points whose every coordinate is missing: they carry no information, and
    counted as points they dilute ``score``'s mean and BIC's number of points."""
    empty = np.flatnonzero(missing.all(axis=1)) if missing.shape[1] else np.zeros(0, int)
    if empty.size:
        warn(
            f"X has {empty.size} point(s) with no observed coordinate (all NaN; the first: "
            f"point {offset + empty[0]}). They carry no information: their log-likelihood "
            "is 0, which counts in score's mean and in the number of points of bic and "
            "aic, and they slow the fit. Drop them: X[~np.isnan(X).all(axis=1)].",
            UserWarning,
        )


def observations(X, X_cov, projection, sample_weight, d=None, n_total=None, offset=0, check=True):
    """The :class:`Observations` of validated points ``X`` (float32 or float64, C order,
    NaN for missing) with their noise, projection and weights, checked.

    ``d`` is the fitted dimension of v (None in ``fit``). The points may be a block of a
    larger set of ``n_total`` points (out of core), the first of them point ``offset``: the
    errors then name the points by their place in the whole set. ``check=False`` skips the
    checks of values (a block checked at an earlier pass).
    """
    reset = d is None
    dtype = X.dtype.type
    n, p = X.shape
    missing = np.isnan(X)
    if check:
        check_magnitude(X, missing, n if n_total is None else n_total)
        _warn_unobserved(missing, offset)
    # Noise.
    Sdiag = np.zeros((0, 0), dtype=dtype)
    Sfull = np.zeros((0, 0, 0), dtype=dtype)
    noise_mode = 0
    for name, value in (("X_cov", X_cov), ("projection", projection)):
        if sparse.issparse(value):
            raise ValueError(
                f"{name} must be dense (an array of shape (n, p), (n, p, p) or (p, d)); got "
                f"a sparse matrix. Pass {name}.toarray()."
            )
    if X_cov is not None:
        S = np.asarray(X_cov)
        if S.dtype.kind not in "fiu":
            S = as_float_array(X_cov, "X_cov")  # pandas' NA as NaN
        n_all = n if n_total is None else n_total
        if S.shape == (n, p) and n_all == p > 1:
            # (p, p) is also the shape of one covariance shared by every point: read as
            # variances, such a matrix would give a wrong answer without a word
            raise ValueError(
                f"X_cov of shape {(n_all, p)} is ambiguous with n_samples = n_features = {p}: "
                "it could be each point's variances or one covariance shared by every "
                f"point. Pass an array of shape (n_samples, n_features, n_features): "
                f"X_cov[:, :, None] * np.eye({p}) for variances, np.broadcast_to(X_cov, "
                f"({p}, {p}, {p})) for a shared covariance."
            )
        if S.shape == (n, p):
            S = np.where(missing, 0.0, S)
            if check and (not np.all(np.isfinite(S)) or np.any(S < 0)):
                bad = np.flatnonzero(~(np.isfinite(S) & (S >= 0)).all(axis=1))[0]
                raise ValueError(
                    f"X_cov given as variances of shape (n_samples, n_features) must be "
                    f"finite and non-negative where X is observed; row {offset + bad} is "
                    f"{S[bad].tolist()}. Pass the noise variances of each coordinate."
                    + (_MISSING_AS_NAN if np.isinf(S[bad]).any() else "")
                )
            if check:
                _check_representable("X_cov", S, dtype)
            Sdiag, noise_mode = np.ascontiguousarray(S, dtype=dtype), 1
        elif S.shape == (n, p, p):
            # The kernels read only the observed rows and columns, so the array is passed
            # as it is (no copy when its dtype and layout fit) and checked by blocks.
            Sfull, noise_mode = np.ascontiguousarray(S, dtype=dtype), 2
            for start in range(0, n if check else 0, 1 << 15):
                check_noise_block(Sfull[start : start + (1 << 15)],
                                   missing[start : start + (1 << 15)], offset + start)  # fmt: skip
        else:
            shared = (
                f" For one covariance shared by every point, pass np.broadcast_to(X_cov, "
                f"{(n, p, p)})."
                if S.shape == (p, p)
                else ""
            )
            raise ValueError(
                f"X_cov must have shape (n_samples, n_features) = {(n, p)} for variances "
                f"or (n_samples, n_features, n_features) = {(n, p, p)} for covariances; "
                f"got {S.shape}.{shared}"
            )
    # Projection.
    d = p if reset else d
    R, Rproj = None, np.zeros((0, 0, 0), dtype=dtype)
    if projection is not None:
        P = as_float_array(projection, "projection")
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
        if check and not np.all(np.isfinite(P)):
            raise ValueError("projection must be finite; got NaN or infinite entries.")
        if check:
            _check_representable("projection", P, dtype)
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
    if hasattr(sample_weight, "to_numpy"):
        sample_weight = as_float_array(sample_weight, "sample_weight")
    if n_total is None or sample_weight is None:
        sw = _check_sample_weight(sample_weight, X, dtype=dtype, ensure_non_negative=True)
    else:
        sw = _block_weights(sample_weight, n, dtype, offset, check)
    return Observations(X, noise_mode, Sdiag, Sfull, R, Rproj, np.ascontiguousarray(sw))


def _block_weights(sample_weight, n, dtype, offset, check):
    """The weights of a block of points: a block may have only zero weights, the whole data
    not (the fit checks their sum)."""
    sw = np.asarray(sample_weight, dtype=dtype).reshape(-1)
    if sw.shape != (n,):
        raise ValueError(f"sample_weight must have one value a point; a block has {sw.shape}.")
    if check and not np.all(np.isfinite(sw) & (sw >= 0)):
        bad = int(np.flatnonzero(~(np.isfinite(sw) & (sw >= 0)))[0])
        raise ValueError(
            f"sample_weight must be finite and non-negative; point {offset + bad} has {sw[bad]!r}."
        )
    return sw


def n_dims(data):
    """Dimension of v for validated points: the projection's number of columns, or the
    number of features without one."""
    if hasattr(data, "n_dims"):  # read by blocks
        return data.n_dims
    if data.R is not None:
        return data.R.shape[1]
    if data.Rproj.shape[0]:
        return data.Rproj.shape[2]
    return data.X.shape[1]


def is_projected(data):
    """Whether validated points carry a projection other than the identity."""
    if hasattr(data, "projected"):  # read by blocks
        return data.projected
    return data.R is not None or data.Rproj.shape[0] > 0


def is_incomplete(data):
    """Whether some validated point misses a coordinate (NaN)."""
    if hasattr(data, "incomplete"):  # read by blocks
        return data.incomplete
    return bool(np.isnan(data.X).any())


def floors_covariances(data):
    """Whether ``reg_covar`` is a floor on the covariances' eigenvalues for these points
    rather than added to them. Added, it moves EM's fixed point by many times itself
    whenever the update of V_j carries the posterior covariances B_ij (Bovy, Hogg & Roweis
    2011, section 3.1): of noisy points, and of projected or incomplete ones, whose B_ij
    is not 0 without noise either (the variance of a coordinate missing from a fraction f
    of the points ended near its value plus reg_covar / (1 - f)). Only complete points
    without noise or projection, a Gaussian mixture, keep GaussianMixture's convention."""
    return data.noise_mode != 0 or is_projected(data) or is_incomplete(data)


def proxy(data):
    """The observations mapped back to the deconvolved space, for the initialisation."""
    X = data.X.astype(np.float64)
    missing = np.isnan(X)
    if data.Rproj.shape[0] == 0 and data.R is None:
        if not missing.any():
            return X
        # a missing value starts at its coordinate's weighted mean (0 where no point of
        # positive weight observes it): a point of weight w and w copies of it start alike
        w = np.where(missing, 0.0, data.sample_weight.astype(np.float64)[:, None])
        total = w.sum(axis=0)
        col = (w * np.where(missing, 0.0, X)).sum(axis=0) / np.where(total > 0, total, 1.0)
        return np.where(missing, col, X)
    R = (
        data.Rproj.astype(np.float64)
        if data.Rproj.shape[0]
        else np.broadcast_to(data.R.astype(np.float64), (X.shape[0],) + data.R.shape)
    )
    R = np.where(missing[:, :, None], 0.0, R)
    # Minimum-norm least-squares v_i = pinv(R_i) x_i over the observed rows.
    return np.einsum("npd,np->nd", np.linalg.pinv(R).swapaxes(1, 2), np.where(missing, 0.0, X))


def check_noise_like_y(estimator, y, X, X_cov, method):
    """Warn when the ignored ``y`` looks like the points' noise given without its keyword,
    and refuse it beside points of one coordinate.

    A 1-d ``y`` of length n_samples passes :func:`check_ignored_y` (scikit-learn's tools
    pass targets along), but astroML's ``fit(X, Xerr)`` habit with one variance per point
    also gives one. Non-negative values that are not all integers are not class labels:
    they are most likely variances, dropped unless said. Beside X of one column they are
    exactly the habit's noise of one-dimensional data (a magnitude, a velocity), which a
    warning would let the fit drop, deconvolving nothing.
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
    shape = shape_of(X)
    if len(shape) == 2 and shape[1] == 1:
        raise ValueError(
            f"{type(estimator).__name__}.{method} got X of one coordinate and, as its second "
            "positional argument, a value per point that looks like its noise variance "
            "(non-negative, not integers), as astroML's fit(X, Xerr) takes it; y is ignored, "
            f"so the noise would be dropped. Pass it by keyword: {method}(X, "
            "X_cov=np.asarray(y)[:, None]) for variances, or X_cov=np.asarray(y)[:, None]**2 "
            f"for standard deviations; to {method} without noise, call {method}(X)."
        )
    warn(
        f"{type(estimator).__name__}.{method} ignores y, whose values look like each point's "
        "noise variance (non-negative, not integers). To use them, pass them by keyword: "
        f"{method}(X, X_cov=np.repeat(y[:, None], n_features, axis=1)) for one variance "
        "per point and coordinate, or X_cov of shape (n_samples, n_features, n_features) "
        "for covariances.",
        UserWarning,
    )


class Problem:
    """What every run of one fit shares: the observations, the masks of the components held
    fixed, the thread count, the fit's generator and solver, the total weight of the points and the
    round-off below which a fall of the objective is not a failure."""

    def __init__(self, data, fixed, n_threads, rng, solver):
        self.data, self.fixed, self.n_threads, self.rng = data, fixed, n_threads, rng
        self.solver = solver
        self.total = data.total
        self.roundoff = 1e-10 if data.dtype == np.float64 else 1e-5
