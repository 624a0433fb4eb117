"""Max-margin matrix factorisation of ordinal ratings by Gibbs sampling (Xu, Zhu & Zhang
2013), with the rating helpers and metrics of collaborative filtering."""

from ._chain import _RunningSums  # noqa: F401  (named by estimators pickled by release 0.1)
from ._estimator import MaxMarginMF
from ._metrics import neg_mae_scorer, neg_nmae_scorer, rating_mae, rating_nmae
from ._ratings import holdout_ratings

__all__ = [
    "MaxMarginMF",
    "holdout_ratings",
    "neg_mae_scorer",
    "neg_nmae_scorer",
    "rating_mae",
    "rating_nmae",
]
