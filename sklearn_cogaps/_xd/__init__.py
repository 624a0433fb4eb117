"""Extreme deconvolution (Bovy, Hogg & Roweis 2011; Ritchie & Murray 2019)."""

from ._estimator import ExtremeDeconvolution

__all__ = ["ExtremeDeconvolution"]
