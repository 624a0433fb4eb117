"""Bayesian matrix factorisation and deconvolution estimators for scikit-learn."""

try:
    from ._utils import _openmp_helpers  # noqa: F401  (the first of the compiled modules)
except ImportError as exc:  # the source tree, whose kernels are not built
    raise ImportError(
        f"sklearn_cogaps is imported from its source folder ({__path__[0]}), where its "
        "compiled kernels are not built. Install it (pip install .) and run Python from "
        "another folder, or install it editable (pip install --no-build-isolation -e .)."
    ) from exc

from ._cogaps import (
    CoGAPS,
    PatternMarkers,
    default_uncertainty,
    gene_set_statistic,
    marker_overrepresentation,
    pattern_markers,
    z_scores,
)
from ._compat import register as _register_moved_modules
from ._m3f import (
    MaxMarginMF,
    holdout_ratings,
    neg_mae_scorer,
    neg_nmae_scorer,
    neg_rmse_scorer,
    rating_mae,
    rating_nmae,
    rating_rmse,
)
from ._poisson import HierarchicalPMF, WeightedBackgroundPMF
from ._poisson._thinning import thin_counts
from ._utils._matching import match_components
from ._utils._model_selection import one_standard_error
from ._utils._openmp_helpers import effective_n_threads, openmp_enabled
from ._utils._progress import FitInterruptedWarning
from ._utils._recommend import label_indices, triplets_to_matrix
from ._xd import ExtremeDeconvolution

_register_moved_modules()

__version__ = "0.2.0.dev0"

__all__ = [
    "CoGAPS",
    "default_uncertainty",
    "one_standard_error",
    "HierarchicalPMF",
    "thin_counts",
    "MaxMarginMF",
    "holdout_ratings",
    "neg_mae_scorer",
    "neg_nmae_scorer",
    "neg_rmse_scorer",
    "rating_mae",
    "rating_nmae",
    "rating_rmse",
    "ExtremeDeconvolution",
    "effective_n_threads",
    "FitInterruptedWarning",
    "gene_set_statistic",
    "marker_overrepresentation",
    "match_components",
    "openmp_enabled",
    "label_indices",
    "triplets_to_matrix",
    "pattern_markers",
    "PatternMarkers",
    "z_scores",
    "WeightedBackgroundPMF",
]
