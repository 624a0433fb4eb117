"""The fitting loop that every iterative estimator of the package shares.

As ``sklearn/mixture/_base.py`` does for scikit-learn's mixtures, one base owns what every
iterative fit does, and each estimator fills in hooks:

- the loop, interruptible with Ctrl-C, that keeps the last complete iteration;
- the convergence test on ``tol`` and the :class:`~sklearn.exceptions.ConvergenceWarning`;
- early stopping on held-out data: a score after every iteration, the best iteration kept
  once ``n_iter_no_change`` iterations have not improved it;
- ``n_init``: the best of several starts;
- the warm-start guard: a previous fit is continued only when it can be;
- the trace of the objective and the progress lines of ``verbose``;
- the fitted check.

The hooks:

``_initialise(data, rng)``
    A new starting state (once per start of ``n_init``).
``_warm_start_mismatch(data)``
    Why the previous fit cannot be continued on ``data`` (a sentence), or None.
``_continue(data)``
    The previous fit's state, to continue from.
``_start_objective(state)``
    The objective at the start, or None when the estimator does not evaluate it.
``_iterate(state, iteration)``
    One iteration, in place; returns the value traced for it, or None to end the run
    without keeping the iteration (an optimiser that cannot improve).
``_monitored(state, value)``
    The objective the convergence test follows (the traced value by default).
``_snapshot(state, iteration)`` / ``_restore(snapshot)``
    A copy of the state after ``iteration`` complete iterations (0: the start), and the
    state it gives back; None means there is nothing to keep yet (an interruption then
    leaves the estimator as it was).
``_progress_extra(state)``
    More fields for the progress line.
``_run_objective(run)``
    The final objective of a run, by which ``n_init`` picks the best start.
``_validation_score(state)``
    The score of the held-out data at ``state`` (higher is better), or None when the fit
    has none; the estimator then has ``n_iter_no_change``.
``_checkpoint_payload(state, iteration, history, start)``
    Everything a resumed fit needs after ``iteration`` complete iterations (a dict), for an
    estimator that writes checkpoints (``_utils/_checkpoint.py``); the run then takes a
    ``checkpoint`` and may resume from an iteration other than the first.
"""

import copy
import functools
import time

import numpy as np
from sklearn.exceptions import ConvergenceWarning

from ._utils._params import warn_warm_start_ignored
from ._utils._progress import Progress
from ._utils._warnings import warn

__all__ = ["IterativeMixin", "Run"]


class Run:
    """What one run of the loop leaves: its state after the last complete iteration.

    Attributes
    ----------
    state : object
        The estimator's state.
    history : list of float
        The traced value after each complete iteration.
    start : float or None
        The objective at the start.
    n_iter : int
        Number of complete iterations.
    n_ran : int
        Number of iterations run: more than ``n_iter`` when held-out data kept an earlier
        iteration, the best held-out score.
    converged : bool
        Whether the convergence test was met.
    interrupted : bool
        Whether Ctrl-C ended the run.
    stopped : bool
        Whether an iteration ended the run by itself (``_iterate`` returned None, as EM
        does when its objective falls), keeping the state before it.
    started : float
        When the run started (``time.perf_counter``), or the first of several starts.
    n_starts : int
        Number of starts this run was chosen from.
    objective : float or None
        The final objective, by which the best of several starts is chosen.
    validation : list of float or None
        The held-out score after each kept iteration, when the fit has held-out data.
    """

    def __init__(self, state, history, start, n_iter, converged, interrupted, started):
        self.validation = None
        self.started = started
        self.state = state
        self.history = history
        self.start = start
        self.n_iter = n_iter
        self.converged = converged
        self.interrupted = interrupted
        self.stopped = False
        self.objective = None
        self.n_starts = 1
        self.n_ran = n_iter


def _left_as_it_was(method):
    """Wrap ``fit`` or ``partial_fit`` so that a call that raises (an error, or Ctrl-C
    before the loop has an iteration to keep) leaves the estimator's attributes as they
    were: validation sets ``n_features_in_`` and ``feature_names_in_`` from the new data
    before the fit can fail, and a previous fit kept beside them would then transform data
    of another shape, or with other names, without a word. The attributes are put back as
    objects (a shallow copy): the fits build their fitted arrays anew."""

    @functools.wraps(method)
    def wrapper(self, *args, **kwargs):
        before = dict(self.__dict__)
        try:
            return method(self, *args, **kwargs)
        except BaseException:
            self.__dict__.clear()
            self.__dict__.update(before)
            raise

    return wrapper


class IterativeMixin:
    """The shared fitting loop. Put it left of ``BaseEstimator``.

    Class attributes an estimator sets:

    ``_objective_name``
        What the objective is, for progress lines, messages and plots ("ELBO",
        "chi-square").
    ``_objective_log_scale``
        Whether its trace is best drawn on a logarithmic axis.
    ``_maximise``
        Whether a better fit has a larger objective.
    ``_fitted_attribute``
        An attribute that only a complete (or kept, interrupted) fit sets.
    ``_stops_early``
        Whether the fit stops on ``tol`` (optimisers) or runs ``max_iter`` iterations
        (samplers).
    """

    _objective_name = "objective"
    _objective_log_scale = False
    _maximise = True
    _fitted_attribute = "components_"
    _stops_early = True

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        for name in ("fit", "partial_fit"):
            if name in cls.__dict__:
                setattr(cls, name, _left_as_it_was(cls.__dict__[name]))

    @classmethod
    def _converged_of_earlier_fit(cls, state):
        """``converged_`` of a fit pickled before the attribute existed (its ``state``): an
        optimiser that stopped before ``max_iter`` met ``tol``; a sampler had no test."""
        if not cls._stops_early:
            return True
        return bool(state.get("n_iter_", state["max_iter"]) < state["max_iter"])

    def __sklearn_is_fitted__(self):
        # not n_features_in_, which validation sets before a fit can fail or be interrupted
        return hasattr(self, self._fitted_attribute)

    # ------------------------------------------------------------------ hooks
    def _start_objective(self, state):
        return None

    def _monitored(self, state, value):
        return value

    def _snapshot(self, state, iteration):
        return copy.deepcopy(state)

    def _restore(self, snapshot):
        return snapshot

    def _progress_extra(self, state):
        return ""

    def _validation_score(self, state):
        return None

    def _run_objective(self, run):
        if run.history:
            return run.history[-1]
        return run.start

    def _has_converged(self, previous, current):
        """Whether one iteration that took the objective from ``previous`` to ``current``
        meets ``tol``: the change is at most ``tol`` times the magnitude of the objective,
        or ``tol`` itself for an objective below 1 in magnitude."""
        return abs(current - previous) <= self.tol * max(abs(previous), 1.0)

    # ------------------------------------------------------------------ warm start
    def _warm_state(self, data):
        """The previous fit's state when ``warm_start`` continues it, else None (with a
        warning when a previous fit exists but cannot be continued)."""
        if not getattr(self, "warm_start", False) or not self.__sklearn_is_fitted__():
            return None
        reason = self._warm_start_mismatch(data)
        if reason is not None:
            warn_warm_start_ignored(self, reason)
            return None
        return self._continue(data)

    # ------------------------------------------------------------------ the loop
    def _run(self, state, n_iterations, *, progress=None, resume=None, checkpoint=None):
        """Run up to ``n_iterations`` iterations from ``state``.

        Ctrl-C ends the run after its last complete iteration, whose state is kept
        (``_snapshot``); before the first iteration of the run is complete (or with a
        snapshot of None), the ``KeyboardInterrupt`` propagates.

        ``resume = (iteration, history, start)`` continues a run whose first ``iteration``
        iterations (with their traced values and starting objective) a checkpoint holds;
        ``checkpoint`` (a :class:`~._utils._checkpoint.Checkpoint`) writes
        ``_checkpoint_payload`` whenever it is due.

        Returns
        -------
        run : Run
        """
        started = time.perf_counter()
        if progress is None:
            progress = Progress(
                self, n_iterations, objective=self._objective_name, every=self._progress_every()
            )
        history = []
        first = 1
        start = None
        # the last complete iteration's snapshot and number, bound together in one assignment:
        # Ctrl-C may come between any two statements (in a snapshot's copies most often), and
        # the history must end at the state kept, not one iteration after it
        kept = None
        n_kept = 0
        converged = interrupted = stopped = False
        # early stopping: the held-out scores, and the best iteration with its snapshot
        validation, best = [], None
        try:
            if resume is None:
                start = self._start_objective(state)
            else:
                n_kept, history, start = resume[0], list(resume[1]), resume[2]
                first = n_kept + 1
            kept = (self._snapshot(state, n_kept), n_kept)
            previous = None if start is None else self._monitored(state, start)
            if history:
                previous = self._monitored(state, history[-1])
            for iteration in range(first, n_iterations + 1):
                value = self._iterate(state, iteration)
                if value is None:
                    stopped = True
                    break
                snapshot = self._snapshot(state, iteration)
                history.append(value)
                kept = (snapshot, iteration)
                if (
                    checkpoint is not None
                    and iteration < n_iterations
                    and checkpoint.due(iteration)
                ):
                    checkpoint.write(self._checkpoint_payload(state, iteration, history, start))
                score = self._validation_score(state)
                if progress.due(iteration):
                    extra = self._progress_extra(state)
                    if score is not None:
                        extra = f"{extra}  held-out {score:.6g}".strip()
                    progress(iteration, value, extra)
                if score is not None:
                    validation.append(score)
                    if best is None or score > best[0]:
                        best = (score, snapshot, iteration)
                    elif iteration - best[2] >= self.n_iter_no_change:
                        converged = True
                        break
                current = self._monitored(state, value)
                if self._stops_early and self._converged_now(previous, current, history):
                    converged = True
                    break
                previous = current
        except KeyboardInterrupt:
            if kept is None or kept[0] is None or kept[1] == 0:
                # no iteration complete (the start alone is no fit): the estimator is left
                # as it was, unfitted or with its previous fit
                raise
            state = self._restore(kept[0])
            del history[kept[1] :]
            interrupted = True
        n_ran = len(history)
        if best is not None and best[2] < len(history):
            # the iterations after the best held-out score are dropped, interrupted or not
            state = self._restore(best[1])
            del history[best[2] :]
        # a fit of no iteration has nothing to converge
        converged = converged or n_iterations == 0
        run = Run(state, history, start, len(history), converged, interrupted, started)
        run.n_ran = n_ran
        run.stopped = stopped
        if best is not None:
            run.validation = validation[: len(history)]
        run.objective = self._run_objective(run)
        return run

    def _converged_now(self, previous, current, history):
        """The convergence test after an iteration (``previous`` is None after the first
        iteration of an estimator that does not evaluate its start)."""
        return previous is not None and self._has_converged(previous, current)

    def _progress_every(self):
        return None

    def _fit_from(self, state):
        """A run from ``state``: ``max_iter`` iterations (estimators that refine a run
        further, as split-and-merge does, extend this)."""
        return self._run(state, self.max_iter)

    def _best_run(self, data, rng, n_init):
        """The best of ``n_init`` runs from new starts. Ctrl-C keeps the best run so far
        (the one interrupted included) and starts no other."""
        best = None
        started = time.perf_counter()
        n_starts = 0
        for _ in range(n_init):
            try:
                run = self._fit_from(self._initialise(data, rng))
            except KeyboardInterrupt:
                if best is None:
                    raise  # nothing complete: the estimator is left as it was
                best.interrupted = True
                break
            n_starts += 1
            if best is None or self._better(run, best):
                best = run
            if run.interrupted:
                best.interrupted = True
                break
        best.started, best.n_starts = started, n_starts
        return best

    def _better(self, run, best):
        if self._maximise:
            return run.objective > best.objective
        return run.objective < best.objective

    # ------------------------------------------------------------------ after the loop
    def _interrupted_advice(self):
        """How to complete an interrupted fit, for its warning (None: the default advice,
        to fit again with ``warm_start=True``; False: no warning, the caller reports)."""
        return None

    def _unconverged_message(self, run):
        """Why the fit has not converged, for a ConvergenceWarning, or None."""
        if not self._stops_early or run.converged or run.interrupted or not self.tol > 0:
            return None
        diverged = self._diverged(run.history)
        if diverged is not None:
            return diverged
        if run.stopped:
            return (
                f"{type(self).__name__} stopped after {run.n_iter} of max_iter="
                f"{self.max_iter} iterations: the next one lowered its "
                f"{self._objective_name} (the warning before this one says by how much), "
                "and the fit kept the parameters before it. More iterations would not help."
            )
        return (
            f"{type(self).__name__} did not converge in max_iter={self.max_iter} "
            f"iterations: the {self._objective_name} still changed by more than tol="
            f"{self.tol} (relative) {self._tol_test()}. Increase max_iter or tol."
        )

    def _tol_test(self):
        """Where ``tol`` compares the objective, for the ConvergenceWarning."""
        return "in the last one"

    def _judged_trace(self, history):
        """The objective's trace that :meth:`_diverged` reads: one value per iteration, or
        for a noisy estimate of it, the means of windows of iterations."""
        return history

    def _diverged(self, history):
        """The message of a fit whose objective ended far worse than its best, or a thousand
        times larger in magnitude than at its start (stochastic steps too large), or None:
        more iterations would not help it."""
        trace = self._judged_trace(history)
        values = [v for v in trace if np.isfinite(v)]
        if len(values) < 2:
            return None
        best = max(values) if self._maximise else min(values)
        final = trace[-1]
        worse = final < best if self._maximise else final > best
        exploded = abs(final) > 1e3 * max(abs(values[0]), 1.0)
        far = worse and abs(final - best) > 0.1 * max(abs(best), 1.0)
        if np.isfinite(final) and not (far or exploded):
            return None
        advice = self._divergence_advice()
        return (
            f"{type(self).__name__} diverged: its {self._objective_name} went from "
            f"{values[0]:.6g} to {final:.6g} in {len(history)} iterations; more iterations "
            f"would not help. To fit, {advice}."
        )

    def _divergence_advice(self):
        """What a diverged fit should change, for :meth:`_diverged`'s message."""
        if "learning_rate" in self.get_params(deep=False):
            return "lower learning_rate"
        return "start it from other parameters"

    def _end_run(self, run, *, total=None):
        """Say how the fit ended (the last progress line, a warning after an interruption
        or for a fit that has not converged); set ``n_iter_`` and ``converged_``."""
        progress = Progress(
            self, total if total is not None else self.max_iter, objective=self._objective_name
        )
        progress.start = run.started
        message = self._unconverged_message(run)
        if run.interrupted:
            outcome = "interrupted"
        elif self._stops_early:
            outcome = "converged" if run.converged else "reached max_iter"
        else:
            outcome = "done" if message is None else "done, not converged"
        if run.n_starts > 1:
            outcome += f" (the best of {run.n_starts} starts)"
        if run.n_ran > run.n_iter:
            outcome += f" (iteration {run.n_iter} kept, the best held-out score)"
        progress.done(run.n_ran, run.objective, outcome)
        if run.interrupted:
            advice = self._interrupted_advice()
            if advice is not False:
                progress.interrupted(run.n_iter, advice=advice)
        if message is not None:
            warn(message, ConvergenceWarning)
        self.n_iter_ = int(run.n_iter)
        # an interrupted fit has not converged, whether or not it stops early by itself
        self.converged_ = (
            bool(run.converged) if self._stops_early else message is None and not run.interrupted
        )
