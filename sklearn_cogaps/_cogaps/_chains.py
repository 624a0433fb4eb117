"""Several chains of one CoGAPS fit: their seeds, their run through joblib, the matching of
their patterns, the pooled posterior, and the diagnostics of Bayesian software on it
(rank-normalised split R-hat, bulk and tail effective sample sizes; Vehtari et al. 2021,
``_utils/_diagnostics``).

Each chain is a complete single-chain fit seeded from ``random_state`` by its index, so the
result does not depend on the joblib backend (threads, processes, Dask) or on the number of
workers. The chains sample the same posterior, but a chain may order its patterns otherwise:
every chain is matched to the first by the correlation of its patterns and amplitudes
(Hungarian algorithm) before anything is pooled or compared.
"""

import os
from types import SimpleNamespace

import numpy as np
from joblib import effective_n_jobs
from scipy import sparse
from sklearn.base import clone
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils import check_random_state

# scikit-learn's joblib wrappers carry the caller's configuration and warning filters
# into the workers, as its own estimators' n_jobs do
from sklearn.utils.parallel import Parallel, delayed

from .._utils._diagnostics import (
    MIN_ESS_PER_CHAIN,
    RHAT_LIMIT,
    RHAT_THRESHOLD,
    diagnostics,
    rhat,
    rhat_threshold,
)
from .._utils._matching import match_components
from .._utils._openmp_helpers import effective_n_threads, kernel_threads
from .._utils._params import parameter_defaults
from .._utils._progress import FitInterruptedWarning
from .._utils._seeding import draw_seeds
from .._utils._warnings import warn
from ._chain import (
    as_dtype,
    cast_attributes,
    check_finite_fit,
    checkpoint_key,
    chi_square_of,
    model_data,
    n_entries,
    validate_fixed,
)
from ._uncertainty import likelihood_digest, uncertainty_name

__all__ = ["DEFAULT_DRAWS", "clear_chain_attributes", "fit_chains", "inference_data"]

#: The fitted attributes only a fit of several chains sets.
CHAIN_ATTRIBUTES = ("rhat_", "ess_bulk_", "ess_tail_", "chain_loadings_", "chain_components_",
                    "chain_objective_histories_", "snapshot_chains_", "_draws",
                    "_chain_chisq", "_chains_complete")  # fmt: skip

#: Draws of each chain's sampling phase kept for the diagnostics when ``n_snapshots`` is 0.
DEFAULT_DRAWS = 100


def clear_chain_attributes(model):
    """Remove what an earlier fit of several chains left, before a fit of one."""
    for name in CHAIN_ATTRIBUTES:
        model.__dict__.pop(name, None)


#: The fewest iterations between two looks at the diagnostics when ``tol`` stops the chains.
MIN_ROUND = 50
_CHAIN_NAMES = ("loadings_", "loadings_std_", "components_", "components_std_",
                "objective_history_", "n_atoms_history_", "loadings_snapshots_",
                "components_snapshots_", "snapshot_iterations_", "lambda_W_",
                "lambda_H_")  # fmt: skip


def _fit_chain(estimator, X, uncertainty, fixed):
    """One chain (in a worker); only its arrays come back."""
    estimator._quiet_convergence = True  # the diagnostics of all the chains decide
    estimator.fit(X, uncertainty=uncertainty, **fixed)
    if estimator.n_iter_ < 2 * estimator.max_iter:
        # Ctrl-C stopped this chain: stop them all (joblib cancels the chains not started)
        raise KeyboardInterrupt
    return {name: getattr(estimator, name) for name in _CHAIN_NAMES}


def _chains_in_waves(model, template, seeds, X, uncertainty, fixed):
    """Fit the chains, as many at a time as joblib has workers; returns the fitted arrays of
    the chains completed, in the chains' order. Ctrl-C stops the wave that runs and keeps
    the chains of the waves before it (none kept: the ``KeyboardInterrupt`` propagates)."""
    wave = max(1, min(len(seeds), effective_n_jobs(model.n_jobs)))
    chains = []
    try:
        for first in range(0, len(seeds), wave):
            chains.extend(Parallel(n_jobs=model.n_jobs)(
                delayed(_fit_chain)(
                    clone(template).set_params(random_state=int(seed)), X, uncertainty, fixed
                )
                for seed in seeds[first : first + wave]
            ))  # fmt: skip
    except KeyboardInterrupt:
        if not chains:
            raise
    return chains


def _segment(estimator, X, uncertainty, fixed, payload, stop, calibration_end):
    """One round of one chain (in a worker): the chain and its state after ``stop``."""
    estimator._quiet_convergence = True  # the diagnostics of all the chains decide
    payload, interrupted = estimator._chain_segment(X, uncertainty, fixed, payload, stop,
                                                    calibration_end)  # fmt: skip
    if interrupted:
        raise KeyboardInterrupt  # stop them all, as _fit_chain does
    return estimator, payload


def _matched_draws(payloads):
    """The chains' sampling draws of W and H, (chains, draws, ...), every chain's patterns
    in the order of the first's (matched on the means of their draws)."""
    W = np.stack([np.stack([shot[1] for shot in p["snapshots"]]) for p in payloads])
    H = np.stack([np.stack([shot[2] for shot in p["snapshots"]]) for p in payloads])
    reference = np.vstack([W[0].mean(axis=0), H[0].mean(axis=0).T])
    for c in range(1, len(payloads)):
        order, _ = match_components(reference, np.vstack([W[c].mean(axis=0),
                                                          H[c].mean(axis=0).T]))  # fmt: skip
        W[c], H[c] = W[c][:, :, order], H[c][:, order]
    return W, H


#: The fewest sampling draws per chain before the diagnostics may end the sampling: fewer
#: give R-hat and ESS estimates that mean nothing.
MIN_DRAWS = 20


def calibration_window(histories, iteration, annealed_until):
    """The chains' chi-squares that :func:`calibration_agrees` reads after ``iteration``
    calibration iterations: the later half of their traces after the annealing."""
    first = annealed_until + max(iteration - annealed_until, 0) // 2
    return histories[:, first:iteration]


def calibration_agrees(histories, iteration, annealed_until):
    """Whether the chains' chi-squares agree after ``iteration`` calibration iterations:
    the split R-hat of :func:`calibration_window` is at most ``RHAT_THRESHOLD``, so every
    chain has left its start for the same stationary level."""
    window = calibration_window(histories, iteration, annealed_until)
    if window.shape[1] < MIN_ROUND // 2:
        return False
    return bool(rhat(window) <= RHAT_THRESHOLD)


def means_are_precise(histories, calibration, payloads, tol):
    """Whether the pooled posterior means are estimated to ``tol`` by chains that agree:
    for the chi-square and every entry of W and H that moves, the Monte Carlo standard
    error is at most ``tol`` times the posterior standard deviation (a bulk ESS of at least
    ``1 / tol**2``) and the split R-hat is at most ``RHAT_THRESHOLD`` (Vehtari et al. 2021,
    section 4), or for the entries of W and H together at most :func:`rhat_threshold` of
    their number and draws; from at least ``MIN_DRAWS`` draws per chain. The chi-square
    also needs what the ``ConvergenceWarning`` asks of it, bulk and tail ESS of at least
    ``MIN_ESS_PER_CHAIN`` per chain (Vehtari et al. 2021, section 4.3): a loose ``tol`` asks
    fewer effective draws of the entries, never less agreement, so a fit that stops is
    converged by the tests its warning reads."""
    if min(len(p["snapshots"]) for p in payloads) < MIN_DRAWS:
        return False
    needed = 1.0 / tol**2
    # a loose tol stopped chains whose chi-square had a tail ESS the warning refuses
    agreed = MIN_ESS_PER_CHAIN * len(payloads)
    r, bulk, tail = diagnostics(histories[:, calibration:])
    if not (r <= RHAT_THRESHOLD and bulk >= max(needed, agreed) and tail >= agreed):
        return False

    def moving(draws):
        r, ess = map(np.atleast_1d, diagnostics(draws, tail=False))
        keep = np.isfinite(ess) & np.isfinite(r)  # NaN for entries constant in every draw
        return r[keep], ess[keep]

    def precise(r, ess, threshold):
        return not r.size or (ess.min() >= needed and r.max() <= threshold)

    W, H = _matched_draws(payloads)
    (rw, ew), (rh, eh) = moving(W), moving(H)
    entries = rhat_threshold(W.shape[0], W.shape[1], rw.size + rh.size)
    # too few draws for that many entries: chains apart would pass (more come each round)
    return entries <= RHAT_LIMIT and precise(rw, ew, entries) and precise(rh, eh, entries)


def _chains_key(model, X, uncertainty, fixed):
    """What a checkpoint of several chains depends on: what one chain's does
    (:func:`checkpoint_key`, with the fit's ``random_state``, from which the chains' seeds
    are drawn), the number of chains and ``tol``."""
    problem = SimpleNamespace(
        fixed=validate_fixed(
            X, model.n_components, fixed.get("fixed_components"), fixed.get("fixed_patterns")
        ),  # fmt: skip
        likelihood=likelihood_digest(X, uncertainty_name(uncertainty), uncertainty),
        data=("sparse" if model.sparse_optimization or sparse.issparse(X) else "dense",),
    )
    return {**checkpoint_key(model, problem), "n_chains": model.n_chains, "tol": model.tol}


def _resumed_rounds(model, checkpoint, key):
    """The rounds' progress that a checkpoint of several chains holds: (iteration, the
    calibration's length or None, whether the chains agreed, every chain's payload); or
    None when there is no checkpoint yet."""
    saved = checkpoint.read()
    if saved is None:
        return None
    if "chains" not in saved:
        raise ValueError(
            f"The checkpoint file {checkpoint.path!r} holds a fit of one chain; this fit runs "
            f"n_chains={model.n_chains}. Fit with n_chains=1 to resume it, or delete the file "
            "(or pass another checkpoint_path) to start the chains anew."
        )
    differ = [name for name, value in key.items() if saved.get("key", {}).get(name) != value]
    if differ:
        raise ValueError(
            f"The checkpoint file {checkpoint.path!r} holds chains fitted with another "
            f"{', '.join(differ)} than this fit: resuming them would not give this fit's "
            "result. Pass the data and parameters of the fit that wrote it, or delete the "
            "file (or pass another checkpoint_path) to start the chains anew."
        )
    calibration = int(saved["calibration"])
    return (int(saved["iteration"]), None if calibration < 0 else calibration,
            bool(saved["agreed"]), list(saved["chains"]))  # fmt: skip


def _chains_in_rounds(model, template, seeds, X, uncertainty, fixed, checkpoint=None):
    """Run the chains in rounds, every chain to the same iteration in each; with ``tol``,
    end each phase by their diagnostics: the calibration once :func:`calibration_agrees`,
    the sampling once :func:`means_are_precise`, each after at most ``max_iter``
    iterations; without, each phase after ``max_iter``, as :func:`_chains_in_waves` runs
    them (and with their bits). The decisions read only the chains' results, so the
    phases' lengths, like the chains, do not depend on the backend or the number of
    workers. With ``checkpoint``, the chains' states and the rounds' progress are written
    after the rounds in which the checkpoint falls due, and a fit resumes from them.
    Returns the chains' fitted arrays, the calibration's length and the phases' verdicts
    (None when Ctrl-C stopped the sampling: the chains are those of its last complete
    round)."""
    # the chains' own progress lines would end at every round: the fit reports the rounds
    estimators = [clone(template).set_params(random_state=int(seed), verbose=0)
                  for seed in seeds]  # fmt: skip
    payloads = [None] * len(estimators)
    every = max(MIN_ROUND, model.max_iter // 10)
    # a chain from the empty domain is annealed over the first half of max_iter
    annealed_until = model.max_iter // 2 if model.init == "empty" else 0
    by_diagnostics = getattr(model, "tol", None) is not None
    iteration, calibration, agreed, precise = 0, None, False, False
    model._resumed_at = 0  # the iterations this call did not run (the command line's timing)
    if checkpoint is not None:
        key = _chains_key(model, X, uncertainty, fixed)
        resumed = _resumed_rounds(model, checkpoint, key)
        if resumed is not None:
            iteration, calibration, agreed, payloads = resumed
            model._resumed_at = iteration
            if model.verbose:
                print(f"[CoGAPS] {model.n_chains} chains resumed from the checkpoint "
                      f"{checkpoint.path!r} after iteration {iteration:,}", flush=True)  # fmt: skip
    written = iteration
    kept = None  # the last complete round of the sampling: what Ctrl-C keeps
    while True:
        cap = model.max_iter if calibration is None else calibration + model.max_iter
        stop = min(iteration + every, cap)
        try:
            rounds = Parallel(n_jobs=model.n_jobs)(
                delayed(_segment)(est, X, uncertainty, fixed, payload, stop, calibration)
                for est, payload in zip(estimators, payloads)
            )
        except KeyboardInterrupt:
            if checkpoint is not None and iteration > written:
                # the last complete round, which the next fit would otherwise run again
                _write_rounds(checkpoint, key, iteration, calibration, agreed, payloads)
            if kept is None:
                raise
            return kept, calibration, None
        estimators = [est for est, _ in rounds]
        payloads = [payload for _, payload in rounds]
        iteration = stop
        histories = np.stack([np.asarray(p["history"], dtype=np.float64) for p in payloads])
        if calibration is None:
            window = calibration_window(histories, iteration, annealed_until)
            agreed = by_diagnostics and calibration_agrees(histories, iteration, annealed_until)
            _report_round(model, iteration, "calibration", window,
                          "the chains agree" if agreed else None)  # fmt: skip
            if agreed or iteration >= cap:
                calibration = iteration
        else:
            # the fitted arrays of this round (a later round binds new ones)
            kept = [{name: getattr(est, name) for name in _CHAIN_NAMES} for est in estimators]
            try:
                # the diagnostics of a round take seconds at single-cell size: Ctrl-C
                # there keeps the round, which is complete
                precise = by_diagnostics and means_are_precise(histories, calibration,
                                                               payloads, model.tol)  # fmt: skip
            except KeyboardInterrupt:
                if checkpoint is not None and iteration > written:
                    _write_rounds(checkpoint, key, iteration, calibration, agreed, payloads)
                return kept, calibration, None
            _report_round(model, iteration, "sampling", histories[:, calibration:],
                          "the means are precise" if precise else None)  # fmt: skip
            if precise or iteration >= cap:
                break
        if checkpoint is not None and checkpoint.due(iteration, written):
            try:
                _write_rounds(checkpoint, key, iteration, calibration, agreed, payloads)
            except KeyboardInterrupt:
                # the write is atomic: the file keeps the previous checkpoint
                if kept is None:
                    raise
                return kept, calibration, None
            written = iteration
    return kept, calibration, (agreed, precise)


def _write_rounds(checkpoint, key, iteration, calibration, agreed, payloads):
    """Write the chains after a complete round, with the rounds' progress."""
    checkpoint.write({
        "key": key, "iteration": iteration, "agreed": agreed, "chains": payloads,
        "calibration": -1 if calibration is None else calibration,
    })  # fmt: skip


def _report_round(model, iteration, phase, chisq, verdict):
    """A progress line after a round of the chains (``verbose``)."""
    if model.verbose:
        ended = f"; {phase} ends: {verdict}" if verdict else ""
        value = float(rhat(chisq)) if chisq.shape[1] >= 4 else float("nan")
        print(f"[CoGAPS] {model.n_chains} chains, iteration {iteration}, {phase}: split "
              f"R-hat of the chi-square {value:.3f}{ended}", flush=True)  # fmt: skip


def _aligned(chains):
    """Every chain's patterns in the order of the first chain's."""
    reference = np.vstack([chains[0]["loadings_"], chains[0]["components_"].T])
    for chain in chains[1:]:
        both = np.vstack([chain["loadings_"], chain["components_"].T])
        order, _ = match_components(reference, both)
        for name in ("loadings_", "loadings_std_"):
            chain[name] = chain[name][:, order]
        for name in ("components_", "components_std_"):
            chain[name] = chain[name][order]
        chain["loadings_snapshots_"] = chain["loadings_snapshots_"][:, :, order]
        chain["components_snapshots_"] = chain["components_snapshots_"][:, order]
    return chains


def _gathered(chains, name):
    """The chains' arrays ``name`` as one (chains, ...) array of doubles, each chain's let go
    once copied: at single-cell size every chain's draws are hundreds of megabytes, and a
    stack of them all would hold them twice."""
    out = np.empty((len(chains),) + np.shape(chains[0][name]))
    for i, chain in enumerate(chains):
        out[i] = chain[name]
        chain[name] = None
    return out


def fit_chains(model, X, uncertainty, fixed, checkpoint=None):
    """Fit ``model.n_chains`` chains, pool them into ``model``'s fitted attributes and set
    their diagnostics; ``fixed`` holds the fit's ``fixed_components``/``fixed_patterns``,
    ``checkpoint`` the fit's :class:`Checkpoint` (taken; the caller removes the file once
    the fit is complete)."""
    rng = check_random_state(model.random_state)
    # each chain's random_state, as distributed mode seeds its subsets' chains
    seeds = rng.randint(np.iinfo(np.int32).max, size=model.n_chains)
    n_draws = model.n_snapshots if model.n_snapshots else min(DEFAULT_DRAWS, model.max_iter)
    if uncertainty is None:
        # the default, named: the chains' fits do not repeat the warnings about it that the
        # fit of all of them gave once
        uncertainty = "relative"
    template = clone(model).set_params(
        n_chains=1,
        n_jobs=None,
        warm_start=False,
        # the fit of all the chains writes their checkpoints (and warned of its options)
        **parameter_defaults(model, ("checkpoint_path", "checkpoint_every", "checkpoint_minutes")),
        n_snapshots=n_draws,
        snapshot_phase="sampling",
        **model._under_new_names(),
    )
    tol = getattr(model, "tol", None)
    if tol is None and checkpoint is None:
        model._resumed_at = 0
        chains = _chains_in_waves(model, template, seeds, X, uncertainty, fixed)
        calibration, stopped = model.max_iter, None
        interrupted = len(chains) < len(seeds)
    else:
        # the diagnostics end the phases, or a checkpoint holds every chain at one
        # iteration: the chains run in rounds
        if tol is not None and 1.0 / tol**2 > model.n_chains * n_draws:
            # the effective draws cannot exceed the draws kept: say so now, not at the cap
            warn(
                f"tol={tol} asks a bulk ESS of {1.0 / tol**2:.0f} for every "
                f"posterior mean, more than the {model.n_chains} chains x {n_draws} draws "
                "kept: the sampling will run to max_iter. tol is the Monte Carlo error in "
                "posterior standard deviations (0.05 to 0.2 are usual); or raise n_snapshots "
                "or n_chains.",
                UserWarning,
            )
        chains, calibration, stopped = _chains_in_rounds(
            model, template, seeds, X, uncertainty, fixed, checkpoint
        )
        interrupted = stopped is None
        if tol is None:
            stopped = None  # phases of max_iter: judged as the chains run whole are
    chains = _aligned(chains)
    means_w = np.stack([np.asarray(c["loadings_"], dtype=np.float64) for c in chains])
    means_h = np.stack([np.asarray(c["components_"], dtype=np.float64) for c in chains])
    sds_w = np.stack([np.asarray(c["loadings_std_"], dtype=np.float64) for c in chains])
    sds_h = np.stack([np.asarray(c["components_std_"], dtype=np.float64) for c in chains])
    # the pooled posterior: chains of equal length weigh the same
    model.loadings_ = means_w.mean(axis=0)
    model.components_ = means_h.mean(axis=0)
    model.loadings_std_ = np.sqrt(np.maximum(
        (sds_w**2 + means_w**2).mean(axis=0) - model.loadings_**2, 0.0))  # fmt: skip
    model.components_std_ = np.sqrt(np.maximum(
        (sds_h**2 + means_h**2).mean(axis=0) - model.components_**2, 0.0))  # fmt: skip
    # a matrix held fixed comes back exactly as it was given, with standard deviation 0
    if "fixed_components" in fixed:
        model.components_ = np.array(fixed["fixed_components"], dtype=np.float64)
        model.components_std_ = np.zeros_like(model.components_)
    if "fixed_patterns" in fixed:
        model.loadings_ = np.array(fixed["fixed_patterns"], dtype=np.float64)
        model.loadings_std_ = np.zeros_like(model.loadings_)
    model.chain_loadings_ = means_w
    model.chain_components_ = means_h
    histories = np.stack([np.asarray(c["objective_history_"], dtype=np.float64) for c in chains])
    model.chain_objective_histories_ = histories
    model.objective_history_ = histories[0]
    model.n_atoms_history_ = chains[0]["n_atoms_history_"]
    model.lambda_W_, model.lambda_H_ = chains[0]["lambda_W_"], chains[0]["lambda_H_"]
    data = model_data(model, X, uncertainty)
    threads = kernel_threads(2 * model.n_components * n_entries(X), effective_n_threads())
    model.chisq_ = chi_square_of(data, model.loadings_, np.ascontiguousarray(model.components_.T),
                                 threads)  # fmt: skip
    # each chain's own posterior mean, against which the pooled one is judged
    model._chain_chisq = np.array([
        chi_square_of(data, np.asarray(w, dtype=np.float64),
                      np.ascontiguousarray(np.asarray(h, dtype=np.float64).T), threads)
        for w, h in zip(means_w, means_h)])  # fmt: skip
    model._transform_seed = draw_seeds(rng)
    model._sampler_state = None
    model._n_calibration_iter = calibration
    model.n_iter_ = histories.shape[1]
    # draws: (chains, draws, ...) for the diagnostics and ArviZ
    draws_w = _gathered(chains, "loadings_snapshots_")
    draws_h = _gathered(chains, "components_snapshots_")
    chisq_draws = histories[:, calibration:]
    model._draws = {"loadings": draws_w, "components": draws_h, "chisq": chisq_draws,
                    "iterations": np.asarray(chains[0]["snapshot_iterations_"])}  # fmt: skip
    model.rhat_, model.ess_bulk_, model.ess_tail_ = {}, {}, {}
    model._diagnostics_interrupted = False
    everything = (("chisq", chisq_draws), ("loadings", draws_w), ("components", draws_h))
    try:
        for name, draws in everything:
            r, bulk, tail = diagnostics(draws)
            model.rhat_[name], model.ess_bulk_[name], model.ess_tail_[name] = r, bulk, tail
    except KeyboardInterrupt:
        # the chains are complete (the diagnostics take tens of seconds at single-cell
        # size): they are kept, their diagnostics unknown
        for name, draws in everything:
            for diagnostic in (model.rhat_, model.ess_bulk_, model.ess_tail_):
                diagnostic[name] = np.full(draws.shape[2:], np.nan)[()]
        interrupted = model._diagnostics_interrupted = True
    dtype = X.dtype
    if model.n_snapshots:
        model.loadings_snapshots_ = as_dtype(np.concatenate(draws_w), dtype)
        model.components_snapshots_ = as_dtype(np.concatenate(draws_h), dtype)
        model.snapshot_iterations_ = np.concatenate([c["snapshot_iterations_"] for c in chains])
        model.snapshot_chains_ = np.repeat(np.arange(len(chains)), draws_w.shape[1])
    else:
        n, m, K = X.shape[0], X.shape[1], model.n_components
        model.loadings_snapshots_ = np.empty((0, n, K), dtype=dtype)
        model.components_snapshots_ = np.empty((0, K, m), dtype=dtype)
        model.snapshot_iterations_ = np.empty(0, dtype=np.int64)
        model.snapshot_chains_ = np.empty(0, dtype=np.int64)
    cast_attributes(model, dtype)
    for name in ("chain_loadings_", "chain_components_"):
        setattr(model, name, as_dtype(getattr(model, name), dtype))
    check_finite_fit(model)
    model._chains_complete = not interrupted
    if interrupted:
        model.converged_ = False
        warn(_interrupted_message(model, len(chains), calibration),
                      FitInterruptedWarning)  # fmt: skip
        return
    if stopped is None:
        message = unconverged_chains_message(model)
    else:
        message = unstopped_message(model, *stopped)
    if message is not None:
        message += _pooling_warning(model)
    model.converged_ = message is None
    if message is not None:
        warn(message, ConvergenceWarning)


def _interrupted_message(model, n_kept, calibration):
    """What a fit of several chains stopped by Ctrl-C keeps: the chains completed before it
    (each run to its end), or, when the chains run in rounds (``tol``, or a checkpoint
    file), every chain at the end of the last complete round of their sampling."""
    if getattr(model, "tol", None) is None and model.checkpoint_path is None:
        kept = (f"the estimator pools the {n_kept} of {model.n_chains} chains completed "
                "before it")  # fmt: skip
    else:
        kept = (f"the estimator keeps the {n_kept} chains at the last complete round, after "
                f"{calibration} calibration and {model.n_iter_ - calibration} sampling "
                "iterations")  # fmt: skip
    if model.checkpoint_path is not None:
        again = (f"Fit again with the same data, parameters and checkpoint_path "
                 f"({os.fspath(model.checkpoint_path)!r}) to resume the chains from their last "
                 "checkpoint")  # fmt: skip
    else:
        again = "Fit again for the complete run (several chains do not continue with warm_start)"
    diagnosed = (
        "were not computed (NaN): Ctrl-C came while they ran"
        if model._diagnostics_interrupted
        else "are those of what it keeps"
    )
    return (
        f"CoGAPS: interrupted; {kept}. Its diagnostics (rhat_, ess_bulk_, ess_tail_) "
        f"{diagnosed}, and the ConvergenceWarning is not given. {again}."
    )


def entries_rhat_threshold(model):
    """:func:`rhat_threshold` of a fitted model's moving entries of W and H and its draws:
    (the threshold, the draws per chain, the moving entries)."""
    draws = model._draws["loadings"]
    n_entries = sum(
        int(np.isfinite(model.rhat_[name]).sum()) for name in ("loadings", "components")
    )
    return rhat_threshold(draws.shape[0], draws.shape[1], n_entries), draws.shape[1], n_entries


def _rhat_problems(model):
    """Where the chains' R-hat exceeds ``RHAT_THRESHOLD`` (the chi-square) or
    :func:`rhat_threshold` of the entries' number and draws (W and H), as phrases."""
    entries, n_draws, n_entries = entries_rhat_threshold(model)
    problems = []
    if entries > RHAT_LIMIT:
        problems.append(f"{n_draws} draws per chain cannot show that the chains agree "
                        f"on {n_entries} entries (chains that agree would reach an R-hat of "
                        f"{entries:.3f} by chance, and chains apart stay below it; raise "
                        "n_snapshots)")  # fmt: skip
    by_chance = RHAT_THRESHOLD < entries <= RHAT_LIMIT
    entries = min(entries, RHAT_LIMIT)
    for name, values in model.rhat_.items():
        threshold = RHAT_THRESHOLD if name == "chisq" else entries
        values = np.atleast_1d(values)
        values = values[np.isfinite(values)]  # entries kept at 0 by the prior have none
        if not values.size or values.max() <= threshold:
            continue
        if name == "chisq":
            problems.append(f"R-hat of the chi-square is {values.max():.3f}")
        else:
            share = np.mean(values > threshold)
            problems.append(f"R-hat exceeds {threshold:.3f} for {share:.0%} of the entries "
                            f"of {name}_ (at most {values.max():.3f})")  # fmt: skip
    if by_chance and any("of the entries" in problem for problem in problems):
        problems.append(f"{entries:.3f} is the R-hat that chains of {n_draws} "
                        f"independent draws would exceed by chance over {n_entries} entries "
                        "in 5% of fits")  # fmt: skip
    return problems


def _chisq_ess_shortfalls(model):
    """The chi-square's effective sample sizes below ``MIN_ESS_PER_CHAIN`` per chain, what
    the ``ConvergenceWarning`` and the stopping test with ``tol`` ask: ``(kind, ess)`` with
    kind ``"bulk"`` or ``"tail"``."""
    needed = MIN_ESS_PER_CHAIN * model.n_chains
    return [(kind[4:-1], float(getattr(model, kind)["chisq"]))
            for kind in ("ess_bulk_", "ess_tail_")
            if getattr(model, kind)["chisq"] < needed]  # fmt: skip


def unconverged_chains_message(model):
    """Why the chains do not agree yet (R-hat above 1.01, or too few effective draws of the
    chi-square), or None."""
    n_chains = model.n_chains
    problems = _rhat_problems(model)
    for kind, ess in _chisq_ess_shortfalls(model):
        problems.append(f"the {kind} ESS of the chi-square is {ess:.0f}")
    if not problems:
        return None
    return (
        f"The {n_chains} chains do not agree yet: {'; '.join(problems)} (Vehtari et al. 2021 "
        f"ask R-hat < {RHAT_THRESHOLD} of a quantity of interest, as of the chi-square, and "
        f"an effective sample size above {MIN_ESS_PER_CHAIN} per chain). Raise max_iter (now "
        f"{model.max_iter}); rhat_, "
        "ess_bulk_ and ess_tail_ hold the diagnostics, chain_loadings_ and "
        "chain_components_ each chain's posterior means."
    )


#: A pooled chi-square this many times the worst chain's says the chains sit apart.
POOLED_CHISQ_RATIO = 1.1


def _pooling_warning(model):
    """A sentence for the warning when the pooled posterior mean fits worse than every
    chain's own, else an empty string: chains in different modes average to none of them."""
    chain_chisq = getattr(model, "_chain_chisq", None)
    if chain_chisq is None or not model.chisq_ > POOLED_CHISQ_RATIO * chain_chisq.max():
        return ""
    return (
        f" The pooled chisq_ ({model.chisq_:.6g}) is worse than every chain's own "
        f"({chain_chisq.min():.6g} to {chain_chisq.max():.6g}): the chains sit in different "
        "modes and their average is none of them; use one chain's means "
        "(chain_loadings_[c], chain_components_[c])."
    )


def unstopped_message(model, agreed, precise):
    """Why a fit whose phases end by the diagnostics (``tol``) ran into ``max_iter``, or
    None when both phases ended by them (the sampling's test includes R-hat, so the chains
    then agree on every entry)."""
    if agreed and precise:
        return None
    problems = []
    if not agreed:
        problems.append(f"the chains' chi-squares did not agree (split R-hat at most "
                        f"{RHAT_THRESHOLD}) within the {model.max_iter} calibration "
                        "iterations")  # fmt: skip
    if not precise:
        n_draws = model._draws["loadings"].shape[1]
        least = min(float(np.nanmin(np.atleast_1d(model.ess_bulk_[name]), initial=np.inf))
                    for name in ("chisq", "loadings", "components"))  # fmt: skip
        if n_draws < MIN_DRAWS:
            problems.append(f"the sampling phase gave {n_draws} draws per chain, fewer than "
                            f"the {MIN_DRAWS} the diagnostics need (raise max_iter or "
                            "n_snapshots)")  # fmt: skip
        else:
            # only the tests that failed: R-hat, and the ESS when it is short of 1 / tol**2
            failed = _rhat_problems(model)
            if least < 1.0 / model.tol**2:
                failed.append(f"the smallest bulk ESS is {least:.0f}, against the "
                              f"{1.0 / model.tol**2:.0f} that tol={model.tol} asks")  # fmt: skip
            # and what the stopping test asks of the chi-square beyond tol, as the warning
            agreed = MIN_ESS_PER_CHAIN * model.n_chains
            for kind, ess in _chisq_ess_shortfalls(model):
                failed.append(f"the {kind} ESS of the chi-square is {ess:.0f}, against "
                              f"{agreed} ({MIN_ESS_PER_CHAIN} per chain)")  # fmt: skip
            problems.append(f"after {model.max_iter} sampling iterations " + "; ".join(failed))
    return (
        f"The {model.n_chains} chains ran into max_iter: {'; '.join(problems)}. Raise "
        "max_iter, or n_chains and n_snapshots for more draws; rhat_, ess_bulk_ and "
        "ess_tail_ hold the diagnostics."
    )


def inference_data(model):
    """The draws of a fitted model as an ArviZ ``InferenceData``: ``posterior`` holds the
    matrices' draws (``loadings``: chain, draw, sample, component; ``components``: chain,
    draw, component, feature), ``sample_stats`` the chi-square of the same states, and the
    draws' coordinate is their iteration."""
    try:
        import arviz
    except ImportError as exc:
        raise ImportError(
            "to_inference_data needs ArviZ: pip install arviz (or the extra "
            '"sklearn_cogaps[diagnostics]").'
        ) from exc
    draws = getattr(model, "_draws", None)
    if draws is None:
        n_calibration = getattr(model, "_n_calibration_iter", None)
        sampling = (
            np.zeros(0, dtype=bool)
            if n_calibration is None
            else np.asarray(model.snapshot_iterations_) > n_calibration
        )
        if not sampling.any():
            raise ValueError(
                "This fit kept no draws of its sampling phase: fit with n_chains > 1, or "
                "with n_snapshots > 0 (and snapshot_phase 'sampling' or 'all'), to export "
                "its chains."
            )
        draws = {
            "loadings": np.asarray(model.loadings_snapshots_)[sampling][None],
            "components": np.asarray(model.components_snapshots_)[sampling][None],
            "iterations": np.asarray(model.snapshot_iterations_)[sampling],
        }
        histories = np.asarray(model.objective_history_)[None]
    else:
        histories = np.asarray(model.chain_objective_histories_)
    # every group's draw is the same state: the chi-square of every iteration would give
    # sample_stats another length than posterior under the same name ("draw")
    iterations = np.asarray(draws["iterations"], dtype=np.int64)
    n_samples, K = draws["loadings"].shape[2:]
    features = getattr(model, "feature_names_in_", None)
    coords = {
        "draw": iterations,
        "sample": np.arange(n_samples),
        "component": np.arange(K),
        "feature": np.arange(draws["components"].shape[3]) if features is None else features,
    }
    return arviz.from_dict(
        posterior={"loadings": draws["loadings"], "components": draws["components"]},
        sample_stats={"chisq": histories[:, iterations - 1]},
        coords=coords,
        dims={"loadings": ["sample", "component"], "components": ["component", "feature"]},
    )
