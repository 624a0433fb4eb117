"""Max-margin matrix factorisation of ordinal ratings by Gibbs sampling (Xu, Zhu & Zhang
2013), with the rating helpers and metrics of collaborative filtering."""

from . import _metrics
from ._chain import _RunningSums  # noqa: F401  (named by estimators pickled by release 0.1)
from ._estimator import MaxMarginMF
from ._metrics import *  # noqa: F403  (the measures and their scorers: _metrics.__all__)
from ._ratings import holdout_ratings

__all__ = ["MaxMarginMF", "holdout_ratings", *_metrics.__all__]
