"""The start of extreme deconvolution: the user's initial parameters, the components held
fixed, and starting responsibilities on the observations mapped back to v."""

import warnings

import numpy as np
from sklearn.cluster import KMeans, kmeans_plusplus
from sklearn.exceptions import ConvergenceWarning

from .._utils._arrays import unique_rows
from .._utils._validation import check_not_masked
from ._data import n_dims, proxy

__all__ = [
    "check_enough_samples",
    "check_init_params",
    "fixed_masks",
    "initial_params",
    "initial_responsibilities",
]


def check_enough_samples(est, n):
    """The first fit starts each component's mean at a sample: it needs enough."""
    if n < est.n_components:
        raise ValueError(
            f"Expected n_samples >= n_components but got n_components = "
            f"{est.n_components}, n_samples = {n}: each component starts at a "
            f"sample. Fit on at least {est.n_components} samples, or lower n_components."
        )


def fixed_masks(est, K):
    """Boolean masks (weights, means, covariances) of the components held fixed."""
    masks = []
    for name in ("fixed_weights", "fixed_means", "fixed_covariances"):
        value = getattr(est, name)
        if np.ndim(value) not in (0, 1) or (np.ndim(value) == 1 and len(value) != K):
            raise ValueError(
                f"{name} must be a bool or an array of n_components = {K} booleans; got {value!r}."
            )
        if np.ndim(value) == 1 and np.asarray(value).dtype.kind != "b":
            # [0, 1] is a mask to numpy and a list of components to a reader
            raise ValueError(
                f"{name} must be booleans, one per component; got {list(value)!r}, which could "
                f"be a mask or the indices of components. For the components of indices idx, "
                f"pass np.isin(np.arange({K}), idx)."
            )
        mask = np.broadcast_to(np.asarray(value, dtype=bool), (K,)).copy()
        masks.append(mask)
    needs = [("fixed_weights", "weights_init"), ("fixed_means", "means_init"),
             ("fixed_covariances", "precisions_init")]  # fmt: skip
    for mask, (name, init) in zip(masks, needs):
        if mask.any() and getattr(est, init) is None:
            raise ValueError(
                f"{name} holds components at their initial values, so {init} must be "
                f"given; it is None."
            )
    return tuple(masks)


def check_init_params(est, K, d):
    """The user's initial parameters, validated; None where not given."""
    weights = means = covs = None
    for name in ("weights_init", "means_init", "precisions_init"):
        check_not_masked(getattr(est, name), name)
    if est.weights_init is not None:
        weights = np.asarray(est.weights_init, dtype=np.float64)
        if weights.shape != (K,) or np.any(weights < 0) or not np.isclose(weights.sum(), 1):
            raise ValueError(
                f"weights_init must be {K} non-negative numbers summing to 1; got "
                f"{weights.ravel().tolist() if weights.size <= 10 else weights.shape}"
                f" summing to {weights.sum():.6g}."
            )
    if est.means_init is not None:
        means = np.asarray(est.means_init, dtype=np.float64)
        if means.shape != (K, d) or not np.all(np.isfinite(means)):
            raise ValueError(
                f"means_init must be finite with shape (n_components, n_dims) = {(K, d)}; "
                f"got {means.shape}."
            )
    if est.precisions_init is not None:
        prec = np.asarray(est.precisions_init, dtype=np.float64)
        if prec.shape != (K, d, d):
            raise ValueError(
                f"precisions_init must have shape (n_components, n_dims, n_dims) = "
                f"{(K, d, d)}; got {prec.shape}."
            )
        asymmetry = np.abs(prec - np.swapaxes(prec, 1, 2)).max(axis=(1, 2), initial=0.0)
        if not np.all(np.isfinite(prec)) or np.any(
            asymmetry > 1e-10 * np.abs(prec).max(axis=(1, 2), initial=0.0)
        ):
            # a non-symmetric matrix would be inverted as it is: the covariance held would
            # be neither it nor its symmetric part
            raise ValueError(
                "precisions_init must hold symmetric positive-definite matrices; got "
                "non-symmetric or non-finite ones. Pass 0.5 * (P + P.transpose(0, 2, 1)) for "
                "their symmetric parts."
            )
        try:
            np.linalg.cholesky(prec)
        except np.linalg.LinAlgError:
            raise ValueError(
                "precisions_init must hold symmetric positive-definite matrices."
            ) from None
        covs = np.linalg.inv(prec)
        covs = 0.5 * (covs + np.swapaxes(covs, 1, 2))
    return weights, means, covs


def initial_params(est, data, rng):
    """Initial (weights, means, covariances) in float64."""
    K = est.n_components
    d = n_dims(data)
    weights, means, covs = check_init_params(est, K, d)
    if weights is not None and means is not None and covs is not None:
        return weights, means, covs
    V = proxy(data)
    sw = data.sample_weight.astype(np.float64)
    n = V.shape[0]
    # The starting responsibilities are computed on the distinct points with positive
    # weight, in sorted order, each with its total weight: a point of integer weight w and
    # w copies of it give the same input, so the same start (and the order of the rows
    # does not matter).
    pos = np.flatnonzero(sw > 0)
    Vu, inverse = unique_rows(V[pos])
    wu = np.bincount(inverse, weights=sw[pos], minlength=Vu.shape[0])
    resp = np.zeros((n, K))
    resp[pos] = initial_responsibilities(est, Vu, wu, rng)[inverse]
    wr = resp * sw[:, None]
    # "one point" below is a point of weight 1, or of the mean weight when the weights are
    # smaller (weights of 1e-20 are relative weights: with 1 the start would ignore them)
    unit = min(1.0, float(sw[pos].mean())) if pos.size else 1.0
    nk = wr.sum(axis=0) + 10 * np.finfo(float).eps * unit
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
        ck[j] = (ck[j] + unit * np.diag(overall)) / (nk[j] + unit) + est.reg_covar * np.eye(d)
    return (
        nk / nk.sum() if weights is None else weights,
        mk if means is None else means,
        ck if covs is None else covs,
    )


def initial_responsibilities(est, V, sw, rng):
    """Starting responsibilities (m, K) of the distinct weighted points ``V``."""
    K = est.n_components
    m = V.shape[0]
    resp = np.zeros((m, K))
    if m <= K:
        # Fewer distinct points than components: one point each; the other components
        # start empty, from the overall variance.
        resp[np.arange(m), np.arange(m)] = 1
        return resp
    if est.init_params == "kmeans":
        with warnings.catch_warnings():
            # Distinct points may still give fewer distinct clusters than K.
            warnings.simplefilter("ignore", ConvergenceWarning)
            labels = KMeans(K, n_init=1, random_state=rng).fit(
                V, sample_weight=sw).labels_  # fmt: skip
        resp[np.arange(m), labels] = 1
    elif est.init_params == "k-means++":
        centres, _ = kmeans_plusplus(V, K, random_state=rng, sample_weight=sw)
        labels = ((V[:, None, :] - centres[None]) ** 2).sum(-1).argmin(1)
        resp[np.arange(m), labels] = 1
    elif est.init_params == "random":
        resp = rng.uniform(size=(m, K))
        resp /= resp.sum(axis=1, keepdims=True)
    else:
        resp[rng.choice(m, size=K, replace=False, p=sw / sw.sum()), np.arange(K)] = 1
    return resp
