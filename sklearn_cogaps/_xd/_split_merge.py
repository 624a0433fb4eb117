"""Split and merge (Bovy, Hogg & Roweis 2011, section 3.2, after Ueda et al. 2000): the
candidate triples and the proposal that merges two components and splits a third."""

import numpy as np
from scipy.special import logsumexp

__all__ = ["split_merge_candidates", "split_merge_proposal"]


def split_merge_candidates(est, data, params, movable):
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
    ent = np.array(
        [-0.5 * (len(c) * (1 + np.log(2 * np.pi)) + np.linalg.slogdet(c)[1]) for c in covs]
    )
    split = ent - fit
    merges = [
        (merge[j, k], j, k) for j in range(K) for k in range(j + 1, K) if movable[j] and movable[k]
    ]
    merges.sort(reverse=True)
    splits = [l for l in np.argsort(-split) if movable[l]]
    out = []
    for _, j, k in merges:
        for l in splits:
            if l not in (j, k):
                out.append((j, k, int(l)))
    return out


def split_merge_proposal(params, j, k, l):
    """Merge components j and k into j; split l into l and k (Bovy et al. 2011, sec. 3.2)."""
    weights, means, covs = (np.array(a, dtype=np.float64) for a in params)
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
