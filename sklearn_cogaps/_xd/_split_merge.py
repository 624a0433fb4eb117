"""Split and merge (Bovy, Hogg & Roweis 2011, section 3.2, after Ueda et al. 2000): the
candidate triples and the proposal that merges two components and splits a third."""

import numpy as np
from scipy.special import logsumexp

from .._utils._progress import Progress

__all__ = ["split_merge", "split_merge_candidates", "split_merge_proposal"]


def split_merge_candidates(est, data, params, movable):
    """(j, k, l) triples, best first: merge j and k (most overlapping), split l.

    Merge criterion: the normalised overlap of the responsibilities, q_j . q_k / |q_j||q_k|;
    split criterion: the mean over its points of the component's negative log-density minus
    its expected value, i.e. how badly the component's Gaussian describes its own points
    (Bovy et al. 2011, sec. 3.2, after Ueda et al. 2000).
    """
    weights, means, covs = params
    K = len(weights)
    if hasattr(data, "reduce"):  # read by blocks: the parts' sums, added in order
        parts = data.reduce(_candidate_sums, est, params)
        sums = list(parts[0])
        for part in parts[1:]:
            sums = [total + value for total, value in zip(sums, part)]
        overlap, sq, qj, fitsum = sums
    else:
        overlap, sq, qj, fitsum = _candidate_sums(data, est, params)
    norms = np.sqrt(sq) + 1e-300
    merge = overlap / np.outer(norms, norms)
    qj = qj + 1e-300
    fit = fitsum / qj
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


def _candidate_sums(data, est, params):
    """Sums over the points of the criteria: the responsibilities' inner products and
    squares, their totals, and the responsibility-weighted log-densities of the components
    on their own points (the log-density less the log-weight)."""
    weights = params[0]
    logp, _, _ = est._log_prob(data, tuple(np.asarray(a, dtype=data.X.dtype) for a in params))
    logp = logp.astype(np.float64)
    resp = np.exp(logp - logsumexp(logp, axis=1, keepdims=True)) * data.sample_weight[:, None]
    dens = logp - np.log(np.maximum(weights, 1e-300))[None, :]
    return resp.T @ resp, (resp**2).sum(axis=0), resp.sum(axis=0), (resp * dens).sum(axis=0)


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
