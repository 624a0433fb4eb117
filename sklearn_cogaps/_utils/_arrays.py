"""Array algorithms that numpy offers only in a form unsafe under Ctrl-C."""

import numpy as np

__all__ = ["unique_rows"]


def unique_rows(a):
    """The distinct rows of the 2-d array ``a`` in lexicographic order, and each row's index
    among them: ``np.unique(a, axis=0, return_inverse=True)``, found with a lexsort of the
    columns.

    ``np.unique(axis=0)`` compares the rows as structured scalars, and a Ctrl-C arriving
    during that comparison can surface as a ``TypeError`` instead of the
    ``KeyboardInterrupt`` (a fit's interruption must stay an interruption).
    """
    n = a.shape[0]
    if n == 0:
        return a[:0], np.zeros(0, dtype=np.intp)
    order = np.lexsort(a.T[::-1])
    ordered = a[order]
    first = np.empty(n, dtype=bool)
    first[0] = True
    np.any(ordered[1:] != ordered[:-1], axis=1, out=first[1:])
    inverse = np.empty(n, dtype=np.intp)
    inverse[order] = np.cumsum(first) - 1
    return ordered[first], inverse
