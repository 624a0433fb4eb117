"""Bayesian matrix factorisation and deconvolution estimators for scikit-learn."""

from ._base import match_components
from ._cogaps import CoGAPS
from ._cogaps import default_uncertainty
from ._markers import pattern_markers, z_scores
from ._progress import FitInterruptedWarning
from ._gene_sets import gene_set_statistic, marker_overrepresentation
from ._hpmf import HierarchicalPMF
from ._m3f import (
    MaxMarginMF,
    holdout_ratings,
    neg_mae_scorer,
    neg_nmae_scorer,
    rating_mae,
    rating_nmae,
)
from ._extreme_deconvolution import ExtremeDeconvolution
from ._utils._openmp_helpers import effective_n_threads, openmp_enabled
from ._wbpmf import WeightedBackgroundPMF

__version__ = "0.1.0"

__all__ = [
    "CoGAPS",
    "default_uncertainty",
    "HierarchicalPMF",
    "MaxMarginMF",
    "holdout_ratings",
    "neg_mae_scorer",
    "neg_nmae_scorer",
    "rating_mae",
    "rating_nmae",
    "ExtremeDeconvolution",
    "effective_n_threads",
    "FitInterruptedWarning",
    "gene_set_statistic",
    "marker_overrepresentation",
    "match_components",
    "openmp_enabled",
    "pattern_markers",
    "z_scores",
    "WeightedBackgroundPMF",
]
