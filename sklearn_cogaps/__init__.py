"""Bayesian matrix factorisation and deconvolution estimators for scikit-learn."""

from ._base import match_components
from ._extreme_deconvolution import ExtremeDeconvolution
from ._utils._openmp_helpers import effective_n_threads, openmp_enabled

__version__ = "0.1.0"

__all__ = [
    "ExtremeDeconvolution",
    "effective_n_threads",
    "match_components",
    "openmp_enabled",
]
