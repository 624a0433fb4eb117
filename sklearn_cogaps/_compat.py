"""The module paths of release 0.1, kept importable for one release so that estimators
pickled by it still load (a pickle names the module of its class). To be removed in 0.3."""

import importlib
import sys

# old module -> the module that now holds what it held
_MOVED = {
    "sklearn_cogaps._extreme_deconvolution": "sklearn_cogaps._xd._estimator",
    "sklearn_cogaps._hpmf": "sklearn_cogaps._poisson._hpmf",
    "sklearn_cogaps._wbpmf": "sklearn_cogaps._poisson._wbpmf",
}


def register():
    """Make the old module paths resolve to their new modules."""
    for old, new in _MOVED.items():
        if old not in sys.modules:
            sys.modules[old] = importlib.import_module(new)
