"""Warnings that point at the user's line.

A warning raised deep in a fit (a ``ConvergenceWarning`` after the loop, advice about an
argument) is attributed to the first frame outside this package and outside the libraries
that call it (scikit-learn's wrappers and tools, joblib): the line of the user's script
that called ``fit``, ``cross_validate`` or ``GridSearchCV.fit``. A fixed ``stacklevel``
would name a wrapper of this package or of scikit-learn instead, and depend on how the
method was reached. Pointing at the user's line also lets Python's default filter show a
warning once per line of the user's code, however many times one call meets it.
"""

import os
import sys
import warnings

__all__ = ["warn"]

_INTERNAL = None


def _internal_folders():
    global _INTERNAL
    if _INTERNAL is None:
        folders = []
        for name in ("sklearn_cogaps", "sklearn", "joblib"):
            path = getattr(sys.modules.get(name), "__file__", None)
            if path:
                folders.append(os.path.dirname(os.path.abspath(path)) + os.sep)
        _INTERNAL = tuple(folders)
    return _INTERNAL


def warn(message, category=UserWarning):
    """``warnings.warn``, attributed to the first calling frame outside this package,
    scikit-learn and joblib (the outermost frame when the whole stack is inside them)."""
    internal = _internal_folders()
    frame = sys._getframe(1)
    level = 1
    while frame.f_back is not None and os.path.abspath(frame.f_code.co_filename).startswith(
        internal
    ):
        frame = frame.f_back
        level += 1
    warnings.warn(message, category, stacklevel=level + 1)
