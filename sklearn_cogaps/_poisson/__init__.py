"""Poisson factorisations of counts: hierarchical PMF (Sarkar 2021) and the weighted-background
model with empirical-Bayes Poisson means priors (EBPMF-WBG)."""

from ._hpmf import HierarchicalPMF
from ._wbpmf import WeightedBackgroundPMF

__all__ = ["HierarchicalPMF", "WeightedBackgroundPMF"]
