"""Warnings about parameters: values a fit does not read, and a warm start that cannot
continue."""

import inspect

import numpy as np

from ._warnings import warn

__all__ = ["parameter_defaults", "warn_unused_parameters", "warn_warm_start_ignored"]


def parameter_defaults(estimator, names):
    """The constructor's defaults of ``names``, for a copy of ``estimator`` that must not
    read (or warn about) the values these parameters were given."""
    defaults = inspect.signature(type(estimator).__init__).parameters
    return {name: defaults[name].default for name in names}


def warn_warm_start_ignored(estimator, reason):
    """Say that ``warm_start=True`` could not continue the previous fit, which is replaced.

    Parameters
    ----------
    estimator : estimator instance
        The estimator being fitted with ``warm_start=True`` after an earlier fit.
    reason : str
        Why the earlier fit cannot be continued (for example ``"X has 30 rows, the
        previous fit had 40"``).
    """
    warn(
        f"warm_start=True, but {reason}: {type(estimator).__name__} cannot continue the "
        "previous fit and starts a new one. To continue it, fit the previous fit's data "
        "with its settings; or set warm_start=False to start anew without this warning.",
        UserWarning,
    )


def warn_unused_parameters(estimator, names, used_when, advice, note=""):
    """Warn about parameters set away from their defaults that this fit does not read.

    scikit-learn warns so about ``l1_ratio`` without an elastic-net penalty: a value that
    changes nothing would otherwise be dropped silently (a grid over it would fit the same
    model every time).

    Parameters
    ----------
    estimator : estimator instance
        The estimator being fitted.
    names : sequence of str
        Parameters the current settings do not read.
    used_when : str
        When they are read, for the message (for example ``"with solver='pathwise'"``).
    advice : str
        What to set to use them, for the message.
    note : str, default=""
        A sentence added to the message (for example what to use instead).
    """
    defaults = inspect.signature(type(estimator).__init__).parameters
    changed = [
        f"{name}={getattr(estimator, name)!r}"
        for name in names
        if not _is_default(getattr(estimator, name), defaults[name].default)
    ]
    if not changed:
        return
    one = len(changed) == 1
    warn(
        f"{', '.join(changed)} {'is' if one else 'are'} used only {used_when}, and this "
        f"fit ignores {'it' if one else 'them'}. {advice}, or leave "
        f"{', '.join(c.split('=')[0] for c in changed)} at "
        f"{'its default' if one else 'their defaults'}.{' ' + note if note else ''}",
        UserWarning,
    )


def _is_default(value, default):
    """Whether a parameter holds its default (a list or an array never does)."""
    if default is None:
        return value is None
    return not isinstance(value, (list, tuple, np.ndarray)) and value == default


def integral_float_hint(estimator, name):
    """What to write for the parameter ``name`` when it takes an int but was given a float
    with an integral value (``max_iter=1e4``, R's way of writing 10000), or None:
    scikit-learn's message says only that the value is not an int."""
    from numbers import Integral

    from sklearn.utils._param_validation import Interval

    constraints = getattr(estimator, "_parameter_constraints", {}).get(name, [])
    value = getattr(estimator, name, None)
    takes_int = any(isinstance(c, Interval) and c.type is Integral for c in constraints)
    if takes_int and isinstance(value, float) and value.is_integer():
        return f"Write {name}={int(value)}: Python reads {value!r} as a float (1e4 too)."
    return None
