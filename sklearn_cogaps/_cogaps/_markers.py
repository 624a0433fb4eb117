"""Post-fit statistics of a CoGAPS fit that users of the R package rely on: pattern markers
(its ``patternMarkers``) and z-scores of the posterior (its ``calcZ``)."""

from typing import NamedTuple

import numpy as np
from scipy import sparse

from .._utils._habits import peer_arguments
from .._utils._validation import dense_matrix

__all__ = ["PatternMarkers", "pattern_markers", "z_scores"]


class PatternMarkers(NamedTuple):
    """What :func:`pattern_markers` finds; it unpacks as ``markers, ranks, scores``.

    Parameters
    ----------
    markers : list of ndarray
        For each pattern (or for the one profile of ``weights``), its marker features, best
        first.
    ranks : ndarray of shape (n_features, n_profiles)
        Rank of each feature for each pattern (1 = most specific).
    scores : ndarray of shape (n_features, n_profiles)
        Distance of each feature's normalised profile to each pattern's.
    """

    markers: list
    ranks: np.ndarray
    scores: np.ndarray


@peer_arguments(
    {"lp": ("R CoGAPS's", "weights")}, example="{name}(amplitudes, patterns, {new}=...)"
)
def pattern_markers(amplitudes, patterns, threshold="all", *, weights=None):
    """Rank the features by how specifically they follow each pattern.

    As CoGAPS's ``patternMarkers``: the amplitudes are scaled by the maximum of their
    pattern, each feature's amplitudes are divided by their largest one, and for pattern
    ``k`` every feature is scored by the Euclidean distance of that profile to the one-hot
    vector of ``k`` (0: the feature loads on pattern ``k`` only). Ranks are taken per
    pattern (1 = closest; equal scores ranked in the features' order, as R's
    ``rank(ties.method = "first")``). A feature whose amplitudes are all 0 has no profile:
    its scores are NaN, it takes the last ranks of every pattern, in the features' order,
    as R ranks NaN scores, and, unlike in R, it marks none. With ``weights`` (R's ``lp``)
    the features are scored against that one profile instead. To rank samples rather than
    features (R's ``axis = 2``), pass the patterns as ``amplitudes`` and the amplitudes as
    ``patterns``.

    Parameters
    ----------
    amplitudes : ndarray of shape (n_features, n_components)
        Amplitudes of the features (``components_.T``; CoGAPS's ``Amean``).
    patterns : ndarray of shape (n_samples, n_components)
        Patterns (CoGAPS's ``Pmean``).
    threshold : {"all", "cut"}, default="all"
        ``"all"`` gives each feature to the pattern where it ranks best, so the markers
        partition the features (those with some amplitude); ``"cut"`` keeps, for each
        pattern, the features in rank order up to the first one that ranks better in
        another pattern. Not used with ``weights``. These are the rules of R CoGAPS's
        source since its 2024 rewrite of ``patternMarkers``. The R releases before it give
        each feature, under ``"all"``, to the pattern at the smallest *distance*
        (``scores.argmin(axis=1)`` of the result), and under ``"cut"`` keep the first
        feature that ranks better elsewhere too, so their marker lists can differ from
        these by a few features. PyCoGAPS takes the distances of amplitudes not scaled by
        the patterns' maxima (the same where every pattern's maximum is 1, as CoGAPS's
        are) and assigns them under ``"all"`` as those releases do; its ``"cut"`` reads
        the features' *order* (``np.argsort``) as their ranks, and its lists can differ
        from these entirely.
    weights : array-like of shape (n_components,), default=None
        One profile over the patterns to score the features against (R's ``lp``), with
        maximum 1: for example ``[1, 1, 0]`` for the features of patterns 1 and 2
        together. Every feature with some amplitude is a marker of it, in rank order.

    Returns
    -------
    result : PatternMarkers
        ``markers`` (for each pattern, or for the one profile of ``weights``, the indices of
        its marker features, best first; features with amplitudes all 0 are in none),
        ``ranks`` of shape (n_features, n_profiles) and ``scores`` of the same shape, the
        distances the ranks come from. It unpacks as ``markers, ranks, scores``. ``ranks``
        holds each feature's rank, as R's ``PatternMarkerRanks``; PyCoGAPS's
        ``PatternMarkerRanks`` is the features in rank order, ``np.argsort(ranks,
        axis=0)`` here.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_cogaps import pattern_markers
    >>> amplitudes = np.array([[1.0, 0.0], [0.9, 0.1], [0.0, 1.0], [0.2, 0.8]])
    >>> result = pattern_markers(amplitudes, np.ones((3, 2)))
    >>> [m.tolist() for m in result.markers]
    [[0, 1], [2, 3]]
    >>> pattern_markers(amplitudes, np.ones((3, 2)), weights=[1, 1]).markers[0].tolist()
    [3, 1, 0, 2]
    """
    from scipy.stats import rankdata

    if threshold not in ("all", "cut"):
        raise ValueError(f"threshold must be 'all' or 'cut'; got {threshold!r}.")
    for name, values in (("amplitudes", amplitudes), ("patterns", patterns)):
        if sparse.issparse(values):
            raise TypeError(f"{name} is a sparse matrix; pass {name}.toarray().")
    try:
        amplitudes = np.asarray(amplitudes, dtype=np.float64)
        patterns = np.asarray(patterns, dtype=np.float64)
    except (TypeError, ValueError):
        raise TypeError(
            "amplitudes and patterns must be arrays of numbers: from a fitted CoGAPS, "
            "model.components_.T and model.loadings_ (or call model.pattern_markers())."
        ) from None
    for name, values in (("amplitudes", amplitudes), ("patterns", patterns)):
        problem = (
            "NaN or infinite values"
            if not np.all(np.isfinite(values))
            else "negative values"
            if np.any(values < 0)
            else None
        )
        if problem:
            raise ValueError(
                f"{name} must be finite and non-negative (CoGAPS's factors are); got {problem}."
            )
    if amplitudes.ndim != 2 or patterns.ndim != 2 or amplitudes.shape[1] != patterns.shape[1]:
        raise ValueError(
            "amplitudes (n_features, n_components) and patterns (n_samples, n_components) "
            f"must have one column per pattern; got shapes {amplitudes.shape} and "
            f"{patterns.shape}. From a fitted CoGAPS, pass components_.T and loadings_ "
            "(R's Amean and Pmean), or call model.pattern_markers()."
        )
    K = amplitudes.shape[1]
    if weights is None:
        targets = np.eye(K)
    else:
        try:
            targets = np.asarray(weights, dtype=np.float64).reshape(1, -1)
        except (TypeError, ValueError):
            targets = np.full((1, 0), np.nan)  # refused below, with what to pass
        if targets.shape[1] != K or not np.all(np.isfinite(targets)):
            raise ValueError(
                f"weights must be {K} finite numbers, one per pattern (R's lp); got {weights!r}."
            )
        if np.any(targets < 0) or targets.max() <= 0:
            raise ValueError(
                "weights is a profile over the patterns, compared with each feature's "
                "profile of non-negative amplitudes: it must be non-negative with a "
                f"positive largest value; got {np.asarray(weights).ravel().tolist()}."
            )
        if targets.max() != 1.0:
            # the features' profiles are scaled to maximum 1: a profile on another scale
            # would rank them by a distance to nothing they can reach
            raise ValueError(
                "weights is a profile over the patterns, compared with each feature's "
                "profile scaled to maximum 1, so its largest value must be 1; got "
                f"{np.asarray(weights).ravel().tolist()}. Pass weights / max(weights)."
            )
    A = amplitudes * patterns.max(axis=0)
    row_max = A.max(axis=1, keepdims=True)
    # a feature whose amplitudes are all 0 has no profile (R's x / max(x) is NaN there)
    detected = row_max[:, 0] > 0
    profile = np.divide(A, row_max, out=np.full_like(A, np.nan), where=row_max > 0)
    scores = np.empty((A.shape[0], targets.shape[0]))
    for k, target in enumerate(targets):
        scores[:, k] = np.sqrt(np.sum((profile - target) ** 2, axis=1))
    # R's rank(ties.method = "first", na.last = TRUE): ties in the features' order, the
    # undetected features (NaN scores) after every other, in their order
    n_detected = int(detected.sum())
    ranks = np.empty_like(scores)
    ranks[~detected] = np.arange(n_detected + 1, A.shape[0] + 1, dtype=np.float64)[:, None]
    for k in range(scores.shape[1]):
        ranks[detected, k] = rankdata(scores[detected, k], method="ordinal")
    best = ranks.min(axis=1)
    markers = []
    for k in range(scores.shape[1]):
        order = np.argsort(ranks[:, k], kind="stable")
        order = order[detected[order]]
        if weights is not None:
            markers.append(order)
        elif threshold == "all":
            owner = np.argmin(ranks, axis=1)
            markers.append(order[owner[order] == k])
        else:
            worse = np.flatnonzero(ranks[order, k] > best[order])
            markers.append(order[: worse[0] if worse.size else order.size])
    return PatternMarkers(markers, ranks, scores)


# What CoGAPS's calcZ divides by where a standard deviation is 0 (``stddev[stddev == 0]
# <- 1e-6``): an element that kept one value in every sample, 0 when it never held an atom,
# the fixed value after a fit with that matrix held fixed.
ZERO_STD = 1e-6


def z_scores(mean, std):
    """Posterior mean over posterior standard deviation, as CoGAPS's ``calcZ``.

    Parameters
    ----------
    mean, std : ndarray of the same shape
        Posterior means and standard deviations, for example ``components_`` and
        ``components_std_``.

    Returns
    -------
    z : ndarray
        ``mean / std``, with a standard deviation of 0 replaced by ``1e-6`` as ``calcZ``
        does (an element that kept one value in every sample: 0 when it never held an atom;
        a matrix held fixed has standard deviation 0 everywhere).
    """
    mean = dense_matrix(mean, "mean", ndim=None)
    std = dense_matrix(std, "std", non_negative=True, ndim=None).copy()
    std[std == 0] = ZERO_STD
    return mean / std
