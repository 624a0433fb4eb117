"""Progress lines and interruptions of the iterative fits, alike in every estimator.

``verbose=0`` prints nothing; ``verbose=1`` prints a line about every tenth of ``max_iter``
iterations; ``verbose=2`` (or more) a line after every iteration. Each line gives the estimator,
the iteration, the objective, the time elapsed and the estimated time left (an upper bound for
fits that may stop early at convergence). A last line says how the fit ended. A fit
interrupted with Ctrl-C keeps its last complete iteration and warns with
:class:`FitInterruptedWarning`.
"""

import sys
import time

from ._warnings import warn

__all__ = ["FitInterruptedWarning", "Progress"]


class FitInterruptedWarning(RuntimeWarning):
    """Warning issued when a fit is interrupted (Ctrl-C) and keeps its last complete iteration.

    The estimator stays usable (fitted on the iterations completed before the interruption);
    catch this warning, for example with :func:`warnings.catch_warnings`, to tell a complete
    fit from an interrupted one.

    Examples
    --------
    >>> import warnings
    >>> from sklearn_cogaps import FitInterruptedWarning
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     warnings.warn("interrupted", FitInterruptedWarning)
    >>> caught[0].category.__name__
    'FitInterruptedWarning'
    """


def _duration(seconds):
    """``12.3s``, ``4m05s`` or ``2h03m``."""
    if seconds != seconds or seconds == float("inf"):
        return "?"
    if seconds < 60:
        return f"{seconds:.1f}s"
    minutes, seconds = divmod(int(round(seconds)), 60)
    if minutes < 60:
        return f"{minutes}m{seconds:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"


class Progress:
    """The progress lines of one iterative fit.

    Parameters
    ----------
    estimator : estimator instance
        The estimator being fitted; its class name starts each line and its ``verbose``
        parameter sets how often lines are printed.
    total : int
        The number of iterations the fit runs at most.
    objective : str, default="objective"
        The name of the objective printed on each line.
    every : int or None, default=None
        Print every ``every`` iterations when ``verbose=1`` instead of about every tenth.
    """

    def __init__(self, estimator, total, *, objective="objective", every=None):
        self.name = type(estimator).__name__
        self.verbose = int(getattr(estimator, "verbose", 0) or 0)
        self.total = max(int(total), 1)
        self.objective = objective
        if self.verbose >= 2:
            self.every = 1
        elif every is not None:
            self.every = max(int(every), 1)
        else:
            self.every = max(1, -(-self.total // 10))
        self.start = time.perf_counter()

    def __call__(self, iteration, value, extra=""):
        """Print the line of ``iteration`` (1-based count of complete iterations) if due.

        Parameters
        ----------
        iteration : int
            The number of iterations completed so far.
        value : float
            The objective after that iteration.
        extra : str, default=""
            More fields for the line (for example a phase or atom counts).
        """
        if not self.due(iteration):
            return
        elapsed = time.perf_counter() - self.start
        left = elapsed / iteration * max(self.total - iteration, 0)
        width = len(str(self.total))
        extra = f"  {extra}" if extra else ""
        print(
            f"[{self.name}] iteration {iteration:>{width}}/{self.total}  "
            f"{self.objective} {value:.8g}{extra}  elapsed {_duration(elapsed)}  "
            f"ETA {_duration(left)}",
            file=sys.stdout,
            flush=True,
        )

    def due(self, iteration):
        """Whether the line of ``iteration`` is printed: loops whose extra fields cost
        something to format ask first.

        Parameters
        ----------
        iteration : int
            The number of iterations completed so far.

        Returns
        -------
        due : bool
            True when :meth:`__call__` would print a line for ``iteration``.
        """
        if not self.verbose or iteration < 1:
            return False
        return iteration % self.every == 0 or iteration == self.total

    def done(self, n_iter, value, outcome):
        """Print the last line of a fit, when verbose: how it ended, after how many
        iterations and how long, and its objective.

        Parameters
        ----------
        n_iter : int
            The number of iterations the fit ran.
        value : float or None
            Its final objective.
        outcome : str
            How it ended ("converged", "reached max_iter", ...).
        """
        if not self.verbose:
            return
        elapsed = time.perf_counter() - self.start
        objective = "" if value is None else f", {self.objective} {value:.8g}"
        print(
            f"[{self.name}] {outcome} after {n_iter} iterations in {_duration(elapsed)}{objective}",
            file=sys.stdout,
            flush=True,
        )

    def note(self, text):
        """Print a line of free text, prefixed by the estimator's name, when verbose.

        Parameters
        ----------
        text : str
            The message.
        """
        if self.verbose:
            print(f"[{self.name}] {text}", file=sys.stdout, flush=True)

    def interrupted(self, done, advice=None):
        """Warn that the fit stopped at Ctrl-C after ``done`` complete iterations.

        Parameters
        ----------
        done : int
            The number of complete iterations the estimator keeps.
        advice : str or None, default=None
            How to complete the fit; None advises fitting again with ``warm_start=True``.
        """
        if advice is None:
            advice = (
                "Fit again (with warm_start=True to continue where it stopped) for a complete fit."
            )
        warn(
            f"{self.name}: interrupted after {done} of {self.total} iterations; the estimator "
            f"keeps the last complete iteration. {advice}",
            FitInterruptedWarning,
        )
