"""The uncertainty of CoGAPS's likelihood: the standard deviation of every entry of X, given
as an array or as a named model (Sherman, Gao & Fertig 2019, supplement section 3 for the
sparse-data model, which computes it from each stored value), and the precisions the
sampler reads."""

import numpy as np
from scipy import sparse

from .._utils._anndata import is_anndata
from .._utils._seeding import fingerprint
from .._utils._validation import as_float_array, check_not_masked
from .._utils._warnings import warn
from ._chisq import aligned_empty, padded_empty

__all__ = [
    "LARGEST_VALUE",
    "NAMED_UNCERTAINTIES",
    "SPARSE_SIGMA0",
    "UNCERTAINTY_ADVICE",
    "advise_counts",
    "advise_scale",
    "check_uncertainty_shape",
    "default_uncertainty",
    "likelihood_digest",
    "named_uncertainty",
    "precision",
    "uncertainty_array",
    "uncertainty_name",
    "validate_uncertainty",
]

# The sparse model's standard deviation of a zero, and relative one of a non-zero.
SPARSE_SIGMA0 = 0.1
# The named uncertainties: (standard deviation of a zero, whether a non-zero's is sqrt(x)
# rather than sigma0 * x), as the sparse-data model computes them on the fly.
NAMED_UNCERTAINTIES = {"relative": (SPARSE_SIGMA0, False), "poisson": (1.0, True)}
# Largest value of X and of an uncertainty, and smallest uncertainty: squares of scaled
# residuals and precisions 1 / sigma**2 stay finite and normal within these bounds.
LARGEST_VALUE = 1e150
SMALLEST_SIGMA = 1e-150
# What to do instead of passing the uncertainty as the second positional argument.
UNCERTAINTY_ADVICE = (
    "give the standard deviation of each entry of X, pass it by keyword: fit(X, uncertainty=U)"
)


def default_uncertainty(X):
    """Compute CoGAPS's default uncertainty: 10% of each value, at least 0.1.

    Parameters
    ----------
    X : ndarray of shape (n_samples, n_features)
        Non-negative data.

    Returns
    -------
    uncertainty : ndarray of shape (n_samples, n_features)
        ``max(0.1 * X, 0.1)``.
    """
    return np.maximum(0.1 * np.asarray(X, dtype=np.float64), 0.1)


def advise_counts(X):
    """Warn when X looks like counts and the uncertainty is left at CoGAPS's default.

    The relative model ``max(0.1 * X, 0.1)`` gives a count of 1 a hundred times the weight
    of a count of 10, so a chain on counts spends its patterns on isolated small counts and
    its score favours few components (on ``load_digits``, cross-validation picks the
    smallest K offered). Binary data are left alone: every entry gets the same weight.

    Parameters
    ----------
    X : {ndarray, sparse matrix} of shape (n_samples, n_features)
        The validated data.
    """
    values = X.data if sparse.issparse(X) else X
    if values.size == 0 or float(values.max()) < 2 or np.any(np.mod(values, 1)):
        return
    warn(
        f"X holds only whole numbers up to {float(values.max()):g}, like counts, and the "
        "uncertainty is CoGAPS's default for continuous data, 'relative' (max(0.1 * X, 0.1)), "
        "which gives a count of 1 a hundred times the weight of a count of 10. For counts "
        "pass uncertainty='poisson'; for data that are not counts pass "
        "uncertainty='relative' to silence this warning.",
        UserWarning,
    )


def advise_scale(X):
    """Warn when the floor of the default uncertainty, 0.1, exceeds most of X.

    ``max(0.1 * X, 0.1)`` is meant for data whose values are mostly above 1; on data of a
    smaller scale (proportions, counts divided by library size) the floor makes the entries
    look like noise, the likelihood is nearly flat and the patterns are arbitrary, with a
    chi-square far below the number of entries. On ``make_patterns(30, 100, 3)`` (300
    iterations), the worst correlation of a fitted pattern with a planted one was 0.998 at
    the data's scale and at a tenth of it (median non-zero value 0.28), 0.966 at 0.03 (median
    0.085) and 0.50 at 0.01: the warning is given when the median is below the floor.

    Parameters
    ----------
    X : {ndarray, sparse matrix} of shape (n_samples, n_features)
        The validated data.
    """
    values = X.data if sparse.issparse(X) else np.ravel(X)
    values = values[values > 0]
    if values.size == 0:
        return
    # a strided sample bounds the cost on atlas-sized data
    step = max(1, values.size // 1_000_000)
    median = float(np.median(values[::step]))
    if median >= 0.1:
        return
    warn(
        f"The median non-zero value of X is {median:.3g}, below the floor 0.1 of the default "
        "uncertainty max(0.1 * X, 0.1): at this scale most entries look like noise and the "
        "patterns can be arbitrary. Pass an uncertainty of the data's scale (its "
        "measurement errors, or for example uncertainty=np.maximum(0.1 * X, "
        f"{median / 10:.2g})), or rescale X so that its values are mostly above 1; pass "
        "uncertainty='relative' to keep the default and silence this warning.",
        UserWarning,
    )


def named_uncertainty(name, X):
    """The standard deviations of a named uncertainty model for dense X."""
    if name == "poisson":
        # the standard deviation of a Poisson count, at least that of a count of 1
        return np.maximum(np.sqrt(np.asarray(X, dtype=np.float64)), 1.0)
    return default_uncertainty(X)


def uncertainty_name(uncertainty):
    """The named model ``uncertainty`` stands for, or None for an array."""
    if uncertainty is None:
        return "relative"
    if isinstance(uncertainty, str):
        if uncertainty not in NAMED_UNCERTAINTIES:
            raise ValueError(
                f"'uncertainty' must be 'relative', 'poisson', an array of the shape of X "
                f"or None; got {uncertainty!r}. Use 'poisson' for counts and 'relative' "
                "(the default) for continuous data."
            )
        return uncertainty
    if is_anndata(uncertainty):
        raise TypeError(
            "'uncertainty' is an AnnData: pass the array of its standard deviations, e.g. "
            "uncertainty=adata.layers['sigma'] beside fit(adata), or a name ('relative', "
            "'poisson')."
        )
    return None


def uncertainty_array(uncertainty, shape):
    """An uncertainty array (dense, float64) of the given shape, or a ValueError that says
    what to pass."""
    check_not_masked(
        uncertainty,
        "uncertainty",
        advice="For entries without data, pass a large uncertainty there (their precision "
        "near 0), e.g. uncertainty.filled(1e6 * X.max()).",
    )
    if sparse.issparse(uncertainty):
        uncertainty = uncertainty.toarray()
    u = as_float_array(uncertainty, "uncertainty")
    if u.shape != tuple(shape):
        raise ValueError(
            f"'uncertainty' must have the shape of X {tuple(shape)}; got {u.shape}. Pass one "
            "standard deviation per entry of X, or None for CoGAPS's default."
        )
    return u


def check_uncertainty_shape(uncertainty, X):
    """Refuse an uncertainty array of another shape than X (a named model has none)."""
    if uncertainty_name(uncertainty) is None and np.shape(uncertainty) != X.shape:
        uncertainty_array(uncertainty, X.shape)


def validate_uncertainty(uncertainty, X, fit=False):
    """The standard deviation of every entry of dense X: a named model's, or the array's,
    checked (finite, positive, with representable precisions); for a ``fit``, samples
    without effective data are warned about."""
    name = uncertainty_name(uncertainty)
    if name is not None:
        return named_uncertainty(name, X)
    u = uncertainty_array(uncertainty, X.shape)
    if not np.all(np.isfinite(u)):
        raise ValueError(
            "'uncertainty' contains NaN or infinite values; every entry must be a finite "
            "positive standard deviation."
        )
    if u.size == 0:
        return np.ascontiguousarray(u)
    smallest, largest = u.min(), u.max()
    if smallest <= 0:
        i, j = np.unravel_index(int(np.argmin(u)), u.shape)
        count = int(np.count_nonzero(u <= 0))
        raise ValueError(
            f"'uncertainty' must be positive everywhere; {count} entr"
            f"{'y is' if count == 1 else 'ies are'} not, the smallest {smallest} at row {i}, "
            f"column {j}. A zero standard deviation makes the likelihood infinite: floor it, "
            "for example np.maximum(uncertainty, 0.1)."
        )
    if smallest < SMALLEST_SIGMA or largest > LARGEST_VALUE:
        raise ValueError(
            f"'uncertainty' spans [{smallest:.3g}, {largest:.3g}]; CoGAPS works with the "
            f"precisions 1 / uncertainty**2, which are only representable for standard "
            f"deviations in [{SMALLEST_SIGMA:g}, {LARGEST_VALUE:g}]. Rescale X and the "
            "uncertainty by the same factor, or floor the uncertainty, e.g. "
            "np.maximum(uncertainty, 1e-6 * X.max())."
        )
    if fit:
        _warn_unconstrained(u)
    return np.ascontiguousarray(u)


# A sample (row) whose smallest uncertainty is this many times the typical one has no
# effective data: its likelihood is flat at the scale of the others.
_UNCONSTRAINED_RATIO = 1e3


def _warn_unconstrained(u):
    """Warn about samples with no effective data (every entry's uncertainty huge, as the
    advice for missing values makes them): their patterns are unconstrained, and the
    scaling of each pattern to a maximum of 1 over the samples takes that maximum from
    them, shrinking every other sample's pattern (a wrong answer without this warning)."""
    typical = float(np.median(u))
    free = np.flatnonzero(u.min(axis=1) > _UNCONSTRAINED_RATIO * typical)
    if free.size == 0:
        return
    shown = ", ".join(str(i) for i in free[:10]) + (", ..." if free.size > 10 else "")
    warn(
        f"Samples {shown} ({free.size} of {u.shape[0]}) have no effective data: each of "
        f"their entries' uncertainty is over {_UNCONSTRAINED_RATIO:g} times the median "
        f"({typical:.3g}), so their patterns are not constrained by X. CoGAPS scales each "
        "pattern to a maximum of 1 over the samples, and an unconstrained sample can take "
        "that maximum, shrinking every other sample's pattern. Fit without these samples "
        "(X[keep], uncertainty[keep]) and transform them later if they get data.",
        UserWarning,
    )


def precision(sigma, dtype=np.float64, padded=False):
    """1 / sigma**2 in one new array (no temporaries: the data can be large), formed in
    float64 and rounded once to ``dtype``, the storage type of a float32 fit. The array
    starts on a cache line; ``padded``, its rows lie as the sampler keeps them
    (``padded_empty``), so that a fit does not copy it again."""
    sigma = np.asarray(sigma)
    empty = padded_empty if padded else aligned_empty
    prec = empty(sigma.shape, np.float64)
    np.square(sigma, out=prec)
    np.reciprocal(prec, out=prec)
    if dtype == np.float64:
        return prec
    info = np.finfo(dtype)
    smallest, largest = (prec.min(), prec.max()) if prec.size else (1.0, 1.0)
    if smallest < info.tiny or largest > info.max:
        raise ValueError(
            f"The precisions 1 / uncertainty**2 span [{smallest:.3g}, {largest:.3g}], outside "
            f"the normal range of {np.dtype(dtype).name} [{info.tiny:.3g}, {info.max:.3g}] "
            f"in which a {np.dtype(dtype).name} X is fitted. Pass X as float64 "
            "(X.astype(np.float64)), or rescale X and the uncertainty by the same factor."
        )
    stored = empty(prec.shape, dtype)
    stored[...] = prec
    return stored


def likelihood_digest(X, uncertainty_name, uncertainty):
    """The fingerprint of what the chain's likelihood reads: the validated X (dense or
    sparse, its pattern, dtype and values) and the uncertainty (its name, or the array's
    values). A warm start continues a chain only on the data it sampled."""
    if sparse.issparse(X):
        X = X.tocsr()
        parts = (
            "sparse",
            np.asarray(X.shape, dtype=np.int64),
            X.indptr.astype(np.int64),
            X.indices.astype(np.int64),
            X.data,
        )
    else:
        parts = ("dense", X)
    if uncertainty_name is None:
        U = uncertainty.toarray() if sparse.issparse(uncertainty) else uncertainty
        return fingerprint(*parts, "array", np.asarray(U, dtype=np.float64))
    return fingerprint(*parts, uncertainty_name)
