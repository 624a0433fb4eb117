"""What a fitted estimator holds, read the same way whatever the estimator: its per-sample
factor and its per-iteration trace. The plotting functions and the AnnData helper read fits
through these two functions only."""

import numpy as np
from sklearn.utils.validation import check_is_fitted

__all__ = ["sample_factors", "trace"]

# The per-sample factor of the training data: the same name in every factorisation estimator.
_SAMPLE_FACTOR_ATTRIBUTES = ("loadings_",)

# The trace of each estimator: (attribute, label of the y axis, log scale), first match wins.
_TRACES = (
    ("chisq_history_", "chi-square", True),
    ("lower_bounds_", None, False),
    ("objective_", "max-margin objective", False),
)
_LOWER_BOUND_LABELS = {
    "HierarchicalPMF": "ELBO",
    "WeightedBackgroundPMF": "ELBO",
    "ExtremeDeconvolution": "mean log-likelihood per point",
}


def sample_factors(estimator):
    """The fitted per-sample factor of a factorisation estimator, (n_samples, n_components).

    Parameters
    ----------
    estimator : estimator
        A fitted :class:`~sklearn_cogaps.CoGAPS`, :class:`~sklearn_cogaps.HierarchicalPMF` or
        :class:`~sklearn_cogaps.WeightedBackgroundPMF`.

    Returns
    -------
    factors : ndarray of shape (n_samples, n_components)
        The per-sample factor of the training data.
    """
    check_is_fitted(estimator)
    for name in _SAMPLE_FACTOR_ATTRIBUTES:
        value = getattr(estimator, name, None)
        if value is not None:
            return np.asarray(value)
    raise TypeError(
        f"{type(estimator).__name__} has no per-sample factor (one of "
        f"{', '.join(_SAMPLE_FACTOR_ATTRIBUTES)}); pass the array itself."
    )


def trace(estimator):
    """The per-iteration trace of a fitted estimator and how to label it.

    Parameters
    ----------
    estimator : estimator
        A fitted estimator of this package.

    Returns
    -------
    values : ndarray of shape (n_iterations,)
        Chi-square (CoGAPS), ELBO (the Poisson factorisations), mean log-likelihood
        (ExtremeDeconvolution) or max-margin objective of each sample (MaxMarginMF) after
        each iteration.
    label : str
        What the values are.
    log_scale : bool
        Whether the values are best shown on a logarithmic axis.
    """
    check_is_fitted(estimator)
    for name, label, log_scale in _TRACES:
        value = getattr(estimator, name, None)
        if value is not None:
            if label is None:
                label = _LOWER_BOUND_LABELS.get(type(estimator).__name__, "lower bound")
            return np.asarray(value, dtype=np.float64).ravel(), label, log_scale
    raise TypeError(
        f"{type(estimator).__name__} records no trace (none of "
        f"{', '.join(name for name, _, _ in _TRACES)})."
    )
