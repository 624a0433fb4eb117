"""CoGAPS: Bayesian non-negative matrix factorisation by Gibbs sampling in the atomic domain
(Sherman, Gao & Fertig 2019), with its distributed mode, pattern markers and gene-set
statistics."""

from ._estimator import CoGAPS
from ._gene_sets import gene_set_statistic, marker_overrepresentation
from ._markers import PatternMarkers, pattern_markers, z_scores
from ._uncertainty import default_uncertainty

__all__ = [
    "CoGAPS",
    "default_uncertainty",
    "gene_set_statistic",
    "marker_overrepresentation",
    "PatternMarkers",
    "pattern_markers",
    "z_scores",
]
