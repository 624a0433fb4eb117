"""Split and merge (Bovy, Hogg & Roweis 2011, section 3.2, after Ueda et al. 2000): the
candidate triples and the proposal that merges two components and splits a third."""

import numpy as np
from scipy.special import logsumexp

from .._utils._progress import Progress
from ._data import Observations

__all__ = ["split_merge", "split_merge_candidates", "split_merge_proposal"]


def split_merge_candidates(est, data, params, movable):
    """(j, k, l) triples, best first: merge j and k (most overlapping), split l (least
    Gaussian).

    Merge criterion: the normalised overlap of the responsibilities, q_j . q_k / |q_j||q_k|
    (Ueda et al. 2000 and Bovy et al. 2011, sec. 3.2, take q_j . q_k, which ranks the
    large components' pairs first whatever their overlap).

    Split criterion: how far the component's points are from Gaussian about it, noise and
    projections included. Under a right component, the squared Mahalanobis distance
    z_ij^2 = (x_i - R_i m_j)^T T_ij^-1 (x_i - R_i m_j) of a point with p_i observed
    coordinates is chi-square with p_i degrees of freedom, so E[(z^2 - p)^2] = 2 p; the
    criterion is |log kappa_j|, kappa_j = sum_i f_ij (z_ij^2 - p_i)^2 / sum_i f_ij 2 p_i
    with f_ij the weighted responsibilities (a Mardia-type kurtosis). A component spanning
    two clusters has kappa below 1 (1/2 for two far, tight clusters), one with heavy tails
    above. This departs from Ueda's local Kullback-Leibler criterion, which Bovy et al.
    use: with the points as the local density it depends on the component's points only
    through their number, mean and covariance (at a fixed point of EM: its volume per
    point), so it cannot tell two clusters from one, and with noise it ranks the noisiest
    component first.
    """
    K = len(params[0])
    if hasattr(data, "reduce"):  # read by blocks: the parts' sums, added in order
        parts = data.reduce(_candidate_sums, est, params)
        sums = list(parts[0])
        for part in parts[1:]:
            sums = [total + value for total, value in zip(sums, part)]
        overlap, sq, spread, expected = sums
    else:
        overlap, sq, spread, expected = _candidate_sums(data, est, params)
    norms = np.sqrt(sq) + 1e-300
    merge = overlap / np.outer(norms, norms)
    with np.errstate(divide="ignore", invalid="ignore"):
        kappa = spread / expected
    split = np.where(kappa > 0, np.abs(np.log(np.where(kappa > 0, kappa, 1.0))), 0.0)
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


def _candidate_sums(data, est, params):
    """Sums over the points of the criteria: the responsibilities' inner products and
    squares, and for each component sum_i f_ij (z_ij^2 - p_i)^2 and sum_i f_ij 2 p_i.

    z_ij^2 is twice the gap between the component's log-density at its own prediction
    R_i m_j for point i (the same covariance T_ij, the same observed coordinates) and at
    x_i, so it comes from the densities the E-step computes, one more pass per component.
    """
    weights, means = params[0], np.asarray(params[1], dtype=np.float64)
    cast = tuple(np.asarray(a, dtype=data.X.dtype) for a in params)
    logp, _, _ = est._log_prob(data, cast)
    logp = logp.astype(np.float64)
    resp = np.exp(logp - logsumexp(logp, axis=1, keepdims=True)) * data.sample_weight[:, None]
    missing = np.isnan(data.X)
    n_obs = (~missing).sum(axis=1).astype(np.float64)
    K = len(weights)
    spread, expected = np.zeros(K), np.zeros(K)
    for j in range(K):
        if data.Rproj.shape[0]:
            centre = np.einsum("npd,d->np", data.Rproj.astype(np.float64), means[j])
        elif data.R is not None:
            centre = np.broadcast_to(np.asarray(data.R, dtype=np.float64) @ means[j], data.X.shape)
        else:
            centre = np.broadcast_to(means[j], data.X.shape)
        at_centre = Observations(np.where(missing, np.nan, centre).astype(data.X.dtype),
                                 data.noise_mode, data.Sdiag, data.Sfull, data.R, data.Rproj,
                                 data.sample_weight)  # fmt: skip
        peak = est._log_prob(at_centre, cast)[0][:, j].astype(np.float64)
        z2 = 2.0 * (peak - logp[:, j])
        spread[j] = resp[:, j] @ (z2 - n_obs) ** 2
        expected[j] = resp[:, j] @ (2.0 * n_obs)
    return resp.T @ resp, (resp**2).sum(axis=0), spread, expected


def split_merge_proposal(params, j, k, l):
    """Merge components j and k into j; split l into l and k (Bovy et al. 2011, sec. 3.2)."""
    weights, means, covs = (np.array(a, dtype=np.float64) for a in params)
    # Merge: the weights summed, the means and the covariances averaged by weight (Bovy,
    # Hogg & Roweis 2011, section 3.2, after Ueda et al.); not moment matching, which would
    # add the spread of the two means to the covariance: EM refits the merged component.
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


def split_merge(est, problem, run):
    """Split-and-merge EM of Bovy et al. (2011), section 3.2, ``split_merge`` attempts
    after the run ``run`` of batch EM; returns the best run."""
    K = est.n_components
    if K < 3 or run.interrupted:
        return run
    fixed = problem.fixed
    movable = ~(fixed[0] | fixed[1] | fixed[2])
    tried = set()
    progress = Progress(est, est.split_merge)
    try:
        for _ in range(est.split_merge):
            cands = split_merge_candidates(est, problem.data, run.state.params, movable)
            cands = [c for c in cands if c not in tried]
            if not cands:
                break
            j, k, l = cands[0]
            tried.add((j, k, l))
            trial = split_merge_proposal(run.state.params, j, k, l)
            # Partial EM on the three changed components, the others held fixed...
            others = np.ones(K, dtype=bool)
            others[[j, k, l]] = False
            partial = tuple(m | others for m in fixed)
            first = est._run(est._start_state(problem, trial, partial), est.max_iter)
            # ... then full EM; keep it only if the likelihood rose.
            new = first if first.interrupted else est._run(
                est._start_state(problem, first.state.params), est.max_iter)  # fmt: skip
            if new.interrupted:
                raise KeyboardInterrupt  # an unfinished trial is dropped
            progress.note(f"split-merge ({j}, {k}) -> {l}: mean log-likelihood "
                          f"{run.objective:.6f} -> {new.objective:.6f}")  # fmt: skip
            if new.objective > run.objective + est.tol:
                new.history = run.history + new.history
                new.n_iter += run.n_iter
                run, tried = new, set()
    except KeyboardInterrupt:
        run.interrupted = True
    return run
