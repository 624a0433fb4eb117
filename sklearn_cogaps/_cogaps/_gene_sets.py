"""Gene-set statistics of a CoGAPS fit: the R package's permutation test of a set's mean
z-score per pattern (``calcCoGAPSStat``) and the over-representation of each pattern's markers
in given gene sets (``getPatternGeneSet(method="overrepresentation")``)."""

from collections.abc import Mapping
from numbers import Integral

import numpy as np

from .._utils._habits import peer_arguments
from .._utils._seeding import check_seed
from .._utils._validation import dense_matrix, unversioned_ensembl
from .._utils._warnings import warn
from ._markers import pattern_markers, z_scores

__all__ = ["gene_set_statistic", "marker_overrepresentation"]

# Bound on the size of one block of permutation draws (n_draws x set size), to keep the
# memory of the vectorised test small whatever the set sizes.
_DRAW_BLOCK = 2**22

# The largest set R CoGAPS's getPatternGeneSet has fgsea::fora test (its maxSize): larger
# sets are left out of the test and of the adjustment.
R_MAX_SET_SIZE = 2038


def _is_mapping(gene_sets):
    """Whether the gene sets are named: a dict or any mapping, or a pandas Series of name
    -> members."""
    return isinstance(gene_sets, Mapping) or hasattr(gene_sets, "items")


def _readable_twice(gene_sets):
    """The gene sets, a one-pass iterable of sets (a generator) made a list."""
    if _is_mapping(gene_sets) or hasattr(gene_sets, "columns"):
        return gene_sets
    return list(gene_sets)


def _sets_of(gene_sets):
    """The members of each set, as given (a mapping's or Series' values, or the sets of a
    list)."""
    if _is_mapping(gene_sets):
        return [members for _, members in gene_sets.items()]
    return list(gene_sets)


def _are_positions(gene_sets):
    """Whether every member of every set is an integer: column positions, not names."""
    members = [m for ms in _sets_of(gene_sets) if not isinstance(ms, str) for m in ms]
    return bool(members) and all(
        isinstance(m, Integral) and not isinstance(m, (bool, np.bool_)) for m in members
    )


def _labelled_feature_names(feature_names, gene_sets, **inputs):
    """The feature names and where they come from (None, ``"feature_names"`` or the input
    whose columns they are): ``feature_names``, or the column labels of the inputs that
    are DataFrames (labels that are not all strings are positions; sets of integers are
    positions too). Read by position, columns in another order than ``feature_names``
    would pair each gene with another's values."""
    given_as = None if feature_names is None else "feature_names"
    labelled = None
    for name, value in inputs.items():
        columns = getattr(value, "columns", None)
        if columns is None or not all(isinstance(c, str) for c in columns):
            continue
        columns = np.asarray(columns, dtype=object)
        if labelled is None:
            labelled = (name, columns)
        elif not np.array_equal(columns, labelled[1]):
            raise ValueError(
                f"The columns of {name} and {labelled[0]} are not the same features in the "
                f"same order; select them alike: {name}[{labelled[0]}.columns]."
            )
    if labelled is None:
        return feature_names, given_as
    name, columns = labelled
    if feature_names is None:
        # sets of column positions beside labelled columns: positions, as documented
        return (None, None) if _are_positions(gene_sets) else (columns, name)
    given = np.asarray(feature_names, dtype=object)
    if given.shape != columns.shape or not np.array_equal(given.astype(str), columns.astype(str)):
        reordered = set(given) == set(columns)
        raise ValueError(
            f"The columns of {name} name "
            + ("the features in another order than" if reordered else "other features than")
            + " feature_names, and the statistic reads columns by position. Leave "
            "feature_names out (the columns name the features)"
            + (f", or pass {name}[feature_names]." if reordered else ".")
        )
    return feature_names, given_as


def _feature_index(gene_sets, n_features, feature_names, names_from="feature_names"):
    """Each set as sorted unique column indices, with the set names.

    Members are feature names when ``feature_names`` is given (names not among the features
    are ignored, as in the R package; a name shared by several features takes them all),
    else integer column indices.
    """
    if hasattr(gene_sets, "columns"):
        # msigdbr's long table (gs_name, gene_symbol): its items() are its columns, each
        # of which would be read as a set
        columns = list(gene_sets.columns)
        usual = ["gs_name", "gene_symbol"]
        name, member = usual if set(usual) <= set(columns) else (columns + usual)[:2]
        raise TypeError(
            f"gene_sets is a table (columns {columns[:5]}); pass a dict of set name -> "
            f"members, for a long table of one row per member: "
            f"df.groupby({name!r})[{member!r}].apply(list)."
        )
    sets = _sets_of(gene_sets)
    if _is_mapping(gene_sets):
        names = [str(name) for name in gene_sets.keys()]
    else:
        names = [f"set{i}" for i in range(len(sets))]
    if not sets:
        raise ValueError(
            "gene_sets is empty; pass a dict of name -> members with at least one set."
        )
    lookup = None
    if feature_names is not None:
        feature_names = np.asarray(feature_names, dtype=object)
        if feature_names.shape != (n_features,):
            raise ValueError(
                f"feature_names must have one name per feature ({n_features}); got shape "
                f"{feature_names.shape}."
            )
        # a name may label several columns (a gene measured twice): a member takes them
        # all, as R's rownames %in% set does
        lookup = {}
        for j, feature in enumerate(feature_names):
            lookup.setdefault(feature, []).append(j)
    index = []
    for name, members in zip(names, sets):
        if isinstance(members, str):
            raise ValueError(f"Gene set {name!r} is a single string; pass a list of its members.")
        members = list(members)
        if lookup is not None:
            cols = [j for m in members if m in lookup for j in lookup[m]]
        else:
            if any(isinstance(m, (bool, np.bool_)) for m in members):
                # True and False are integers to Python: a mask would become {0, 1}
                raise ValueError(
                    f"Gene set {name!r} has boolean members; a set is a list of column "
                    "indices (or of names, with feature_names): pass np.flatnonzero(mask)."
                )
            if not all(isinstance(m, Integral) for m in members):
                raise ValueError(
                    f"Gene set {name!r} has members that are not integer column indices; "
                    "pass feature_names to refer to features by name."
                )
            cols = [int(m) for m in members]
            bad = [c for c in cols if not 0 <= c < n_features]
            if bad:
                raise ValueError(
                    f"Gene set {name!r} has column indices outside [0, {n_features}): {bad[:5]}."
                )
        index.append(np.unique(np.asarray(cols, dtype=np.intp)))
    empty = [name for name, cols in zip(names, index) if cols.size == 0]
    if len(empty) == len(names):
        # no set meets the features: names of another kind (ENSEMBL ids against symbols),
        # or ENSEMBL ids with their version on one side only
        raise ValueError(
            f"No gene set has a member among the {n_features} features (first set: "
            f"{names[0]!r}); check that the members are spelt as the feature names."
            + _version_advice(gene_sets, sets, lookup, names_from)
        )
    if empty:
        # a collection (MSigDB) against a panel: R's calcCoGAPSStat gives such a set NA,
        # fgsea's fora (getPatternGeneSet) drops it; the other sets are still tested
        warn(
            f"{len(empty)} of the {len(names)} gene sets have no member among the "
            f"{n_features} features ({', '.join(map(repr, empty[:5]))}"
            f"{', ...' if len(empty) > 5 else ''}): their statistics are NaN.",
            UserWarning,
        )
    return names, index


def _version_advice(gene_sets, sets, lookup, names_from):
    """What to write when the members and the features would meet without the ENSEMBL
    versions (ENSG00000141510.16) that one side carries, or both, else an empty string;
    ``names_from`` is where the feature names came from (``"feature_names"`` or the input
    whose columns they are)."""
    if lookup is None:
        return ""
    features = {unversioned_ensembl(f) for f in lookup}
    members = {unversioned_ensembl(m) for ms in sets for m in ms}
    if not features & members:
        return ""
    advice = []
    if any(unversioned_ensembl(f) != f for f in lookup):
        if names_from == "feature_names":
            advice.append("feature_names=[name.split('.')[0] for name in feature_names]")
        else:
            alike = " (and components_std's alike)" if names_from == "components" else ""
            advice.append(f"{names_from}.columns = [name.split('.')[0] for name in "
                          f"{names_from}.columns]{alike}")  # fmt: skip
    if any(unversioned_ensembl(m) != m for ms in sets for m in ms):
        if _is_mapping(gene_sets):
            advice.append("gene_sets = {name: [m.split('.')[0] for m in members] for name, "
                          "members in gene_sets.items()}")  # fmt: skip
        else:
            advice.append("gene_sets = [[m.split('.')[0] for m in members] for members in "
                          "gene_sets]")  # fmt: skip
    return (
        " The members and the feature names differ by their ENSEMBL versions "
        "(ENSG00000141510.16): drop them, " + ", and ".join(advice) + "."
    )


@peer_arguments(
    {"numPerm": ("R CoGAPS's", "n_permutations"), "sets": ("R CoGAPS's", "gene_sets")},
    example="{name}(components, components_std, gene_sets, {new}=...)",
)
def gene_set_statistic(
    components,
    components_std,
    gene_sets,
    *,
    feature_names=None,
    n_permutations=1000,
    random_state=None,
):
    """Permutation test of the mean amplitude z-score of gene sets in each pattern.

    The statistic of the R package's ``calcCoGAPSStat``: the z-score of every feature in
    every pattern is its posterior mean amplitude over its posterior standard deviation
    (CoGAPS's ``calcZ`` of ``Amean`` and ``Asd``, which are ``components_.T`` and
    ``components_std_.T`` here); a set's statistic in a pattern is the mean z-score of its
    members. The null distribution for a set of ``n`` members is the mean z-score of ``n``
    distinct features drawn uniformly (without replacement, as R's ``sample(...,
    replace=FALSE)``: a set holds each feature once), ``n_permutations`` times (one null
    per set size, shared by the sets of that size).

    Parameters
    ----------
    components : array-like of shape (n_components, n_features)
        Posterior mean amplitudes, ``CoGAPS.components_``.
    components_std : array-like of shape (n_components, n_features)
        Their posterior standard deviations, ``CoGAPS.components_std_``. As in the R
        package (``calcZ``), a standard deviation of 0 is replaced by ``1e-6``.
    gene_sets : dict of str to list, or pandas.Series
        The gene sets: name -> members (a dict, any mapping, or a Series indexed by the
        set names), the members being feature names when
        ``feature_names`` is given, else column indices. Members that are not features are
        ignored; a set with no member among the features gets NaN statistics and a
        warning (R gives it NA), and none with a member is an error. A list of sets is
        accepted too; its sets are named ``set0``, ``set1``, ...
    feature_names : array-like of str of shape (n_features,), default=None
        Names of the features, for example ``CoGAPS.feature_names_in_``. None: the
        column labels of ``components`` (or ``components_std``) if it is a DataFrame
        labelled by strings, else none. Given with such a DataFrame, they must be its
        columns in their order.
    n_permutations : int, default=1000
        Number of draws of the null distribution.
    random_state : int, RandomState instance or None, default=None
        Seed of the draws.

    Returns
    -------
    result : dict
        With ``n_sets`` gene sets and ``K`` patterns:

        - ``"gene_set"``: ndarray of shape (n_sets,), the set names;
        - ``"set_size"``: ndarray of shape (n_sets,), members found among the features;
        - ``"mean_z"``: ndarray of shape (n_sets, K), the statistic;
        - ``"p_up"``: ndarray of shape (n_sets, K), the fraction of the null above the
          statistic, the draws equal to it counted half, at least ``1 / n_permutations``
          (R: ``GSUpreg``, which counts only the draws above and has no floor: it is 0
          where no draw is above, and R's ``calcGeneGSStat`` then takes an infinite
          ``-log``; ``1 / n_permutations`` is the smallest p-value that many draws can
          support);
        - ``"p_down"``: ndarray of shape (n_sets, K), ``1 - p_up`` (before the floor), at
          least ``1 / n_permutations`` (R: ``GSDownreg``, ``1 - GSUpreg``, no floor);
        - ``"p_two_sided"``: ndarray of shape (n_sets, K), the smaller of the two before
          the floor, at least ``1 / n_permutations``: R's ``twoSidedPValue``, which is not
          doubled;
        - ``"activity"``: ndarray of shape (n_sets, K), ``1 - 2 * p_up`` (before the
          floor; R: ``GSActEst``), 0 for a set whose every draw ties with it.

        Note that the R package returns these matrices transposed (patterns × sets).

    See Also
    --------
    marker_overrepresentation : Over-representation of the pattern markers in gene sets.
    z_scores : The z-scores the statistic averages.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_cogaps import gene_set_statistic
    >>> rng = np.random.RandomState(0)
    >>> H = rng.gamma(1.0, 1.0, (2, 50))
    >>> H[0, :10] += 20.0
    >>> result = gene_set_statistic(H, np.ones_like(H), {"planted": range(10)},
    ...                             random_state=0)
    >>> result["p_up"].round(3)
    array([[0.001, 0.41 ]])
    """
    mean = dense_matrix(components, "components", ndim=None)
    std = dense_matrix(components_std, "components_std", non_negative=True, ndim=None)
    if mean.ndim != 2 or std.shape != mean.shape:
        raise ValueError(
            "components and components_std must be 2-d arrays of the same shape "
            f"(n_components, n_features); got {mean.shape} and {std.shape}."
        )
    if mean.shape[0] > mean.shape[1]:
        # R's Amean and Asd are genes x patterns: read as ours, each gene became a pattern
        raise ValueError(
            f"components must have shape (n_components, n_features); got {mean.shape}, more "
            "patterns than features. Pass CoGAPS.components_ and components_std_ (R's Amean "
            "and Asd transposed: Amean.T, Asd.T)."
        )
    if not isinstance(n_permutations, Integral) or n_permutations < 1:
        raise ValueError(f"n_permutations must be a positive integer; got {n_permutations!r}.")
    gene_sets = _readable_twice(gene_sets)
    feature_names, names_from = _labelled_feature_names(
        feature_names, gene_sets, components=components, components_std=components_std
    )
    rng = check_seed(random_state)
    # genes x patterns, as CoGAPS's zMatrix
    z = z_scores(mean, std).T
    n_features, K = z.shape
    names, index = _feature_index(gene_sets, n_features, feature_names, names_from)
    sizes = np.array([cols.size for cols in index])
    observed = np.array([z[cols].mean(axis=0) if cols.size else np.full(K, np.nan)
                         for cols in index]).reshape(len(index), K)  # fmt: skip

    # one null per set size, in order of first appearance (the draws depend only on the seed
    # and the sequence of set sizes)
    nulls = {}
    for n in sizes:
        if n in nulls or n == 0:
            continue
        null = np.empty((n_permutations, K))
        # n distinct features per draw: the n smallest of uniform keys (a uniformly random
        # subset); drawing with replacement made the null of a set that is a fair share of
        # the features too wide (p-values of random sets of 200 among 300 features below
        # 0.05 in 0.3% of cases, not 5%)
        block = max(1, _DRAW_BLOCK // max(n_features, n * 8))
        for start in range(0, n_permutations, block):
            stop = min(n_permutations, start + block)
            if n < n_features:
                keys = rng.random_sample((stop - start, n_features))
                draws = np.argpartition(keys, n - 1, axis=1)[:, :n]
            else:
                draws = np.broadcast_to(np.arange(n_features), (stop - start, n_features))
            null[start:stop] = z[draws].mean(axis=1)
        nulls[n] = null

    floor = 1.0 / n_permutations
    up = np.empty_like(observed)
    for s, n in enumerate(sizes):
        if n == 0:  # no member among the features
            up[s] = np.nan
            continue
        null = nulls[n]
        # R: #(null > stat) / n_perm, its complement down. Ties (amplitudes of exactly 0,
        # which the sampler gives) count half on each side: counted as above, as they were,
        # a set at the null's typical value got an activity of -1.
        up[s] = np.mean(null > observed[s], axis=0) + 0.5 * np.mean(null == observed[s], axis=0)
    return {
        "gene_set": np.asarray(names, dtype=object),
        "set_size": sizes,
        "mean_z": observed,
        "p_up": np.maximum(up, floor),
        "p_down": np.maximum(1.0 - up, floor),
        "p_two_sided": np.maximum(np.minimum(up, 1.0 - up), floor),
        "activity": 1.0 - 2.0 * up,
    }


def _benjamini_hochberg(p):
    """Benjamini–Hochberg adjusted p-values of a 1-d array (step-up, monotone, at most 1)."""
    p = np.asarray(p, dtype=np.float64)
    m = p.size
    if m == 0:
        return p.copy()
    order = np.argsort(p, kind="stable")
    scaled = p[order] * m / np.arange(1, m + 1)
    adjusted = np.minimum.accumulate(scaled[::-1])[::-1]
    out = np.empty(m)
    out[order] = np.minimum(adjusted, 1.0)
    return out


def marker_overrepresentation(
    components,
    patterns,
    gene_sets,
    *,
    feature_names=None,
    threshold="all",
    max_size=R_MAX_SET_SIZE,
):
    """Over-representation of each pattern's marker features in gene sets.

    The markers of each pattern come from :func:`pattern_markers`; for every pattern and
    gene set, the overlap of the markers with the set is tested against drawing that many
    markers at random from all features (one-sided hypergeometric test: the probability of
    an overlap at least as large). The p-values of each pattern are adjusted over the gene
    sets by the Benjamini–Hochberg procedure, as the R package's
    ``getPatternGeneSet(method="overrepresentation")`` does with ``fgsea::fora``.

    Parameters
    ----------
    components : array-like of shape (n_components, n_features)
        Posterior mean amplitudes, ``CoGAPS.components_``.
    patterns : array-like of shape (n_samples, n_components)
        Posterior mean patterns, ``CoGAPS.loadings_``.
    gene_sets : dict of str to list, or pandas.Series
        The gene sets: name -> members (a dict, any mapping, or a Series indexed by the set
        names; feature names when ``feature_names`` is given, else
        column indices). Members that are not features are ignored; a set with no member
        among the features is kept in the table with a NaN p-value, and a warning. A list
        of sets is accepted too; its sets are named ``set0``, ``set1``, ...
    feature_names : array-like of str of shape (n_features,), default=None
        Names of the features, for example ``CoGAPS.feature_names_in_``. None: the
        column labels of ``components`` if it is a DataFrame labelled by strings, else
        none. Given with such a DataFrame, they must be its columns in their order.
    threshold : {"all", "cut"}, default="all"
        How markers are chosen; see :func:`pattern_markers`.
    max_size : int or None, default=2038
        Sets with more members among the features are not tested: their p-values are NaN
        and the adjustment leaves them out, as ``fgsea::fora`` does with the ``maxSize``
        of 2038 that R's ``getPatternGeneSet`` gives it. None tests every set.

    Returns
    -------
    table : dict of ndarray
        One entry per (pattern, gene set) pair, patterns first then sets in the given order,
        each array of length ``n_components * n_sets``:

        - ``"pattern"``: the pattern index;
        - ``"gene_set"``: the set name;
        - ``"set_size"``: members of the set among the features;
        - ``"n_markers"``: markers of the pattern;
        - ``"overlap"``: markers that are members of the set;
        - ``"p_value"``: hypergeometric ``P(overlap >= observed)`` (NaN for a set above
          ``max_size`` or without a member among the features, which are left out of the
          adjustment, as fgsea's ``fora`` drops them);
        - ``"p_adjusted"``: Benjamini–Hochberg over the tested sets of the same pattern.

        ``pandas.DataFrame(table)`` makes it a data frame.

    See Also
    --------
    gene_set_statistic : The permutation test of a set's mean z-score.
    pattern_markers : The markers tested here.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_cogaps import marker_overrepresentation
    >>> H = np.full((2, 40), 0.01)
    >>> H[0, :20] = 5.0
    >>> H[1, 20:] = 5.0
    >>> W = np.eye(2)
    >>> table = marker_overrepresentation(H, W, {"first": range(20), "second": range(20, 40)})
    >>> table["overlap"], table["p_adjusted"] < 1e-6
    (array([20,  0,  0, 20]), array([ True, False, False,  True]))
    """
    from scipy.stats import hypergeom

    H = np.asarray(components, dtype=np.float64)
    W = np.asarray(patterns, dtype=np.float64)
    if H.ndim != 2 or W.ndim != 2 or W.shape[1] != H.shape[0]:
        raise ValueError(
            "components must have shape (n_components, n_features) and patterns "
            f"(n_samples, n_components); got {H.shape} and {W.shape}."
        )
    K, n_features = H.shape
    if max_size is not None and (
        isinstance(max_size, bool) or not isinstance(max_size, Integral) or max_size < 1
    ):
        raise ValueError(f"max_size must be a positive integer or None; got {max_size!r}.")
    gene_sets = _readable_twice(gene_sets)
    feature_names, names_from = _labelled_feature_names(
        feature_names, gene_sets, components=components
    )
    names, index = _feature_index(gene_sets, n_features, feature_names, names_from)
    tested = np.array([max_size is None or cols.size <= max_size for cols in index])
    sizes = np.array([cols.size for cols in index])
    markers, _, _ = pattern_markers(H.T, W, threshold)
    rows = {
        key: [] for key in ("pattern", "gene_set", "set_size", "n_markers", "overlap", "p_value")
    }
    adjusted = []
    for k in range(K):
        is_marker = np.zeros(n_features, dtype=bool)
        is_marker[markers[k]] = True
        n_markers = int(is_marker.sum())
        p_k = []
        for name, cols in zip(names, index):
            overlap = int(is_marker[cols].sum())
            # P(X >= overlap), X ~ Hypergeometric(population, successes = set, draws = markers)
            p = float(hypergeom.sf(overlap - 1, n_features, cols.size, n_markers))
            p_k.append(min(max(p, 0.0), 1.0))
            rows["pattern"].append(k)
            rows["gene_set"].append(name)
            rows["set_size"].append(cols.size)
            rows["n_markers"].append(n_markers)
            rows["overlap"].append(overlap)
        p_k = np.where(tested & (sizes > 0), p_k, np.nan)
        adjusted_k = np.full(p_k.shape, np.nan)
        kept = tested & (sizes > 0)
        adjusted_k[kept] = _benjamini_hochberg(p_k[kept])
        rows["p_value"].extend(p_k)
        adjusted.extend(adjusted_k)
    table = {
        "pattern": np.asarray(rows["pattern"], dtype=np.intp),
        "gene_set": np.asarray(rows["gene_set"], dtype=object),
        "set_size": np.asarray(rows["set_size"], dtype=np.intp),
        "n_markers": np.asarray(rows["n_markers"], dtype=np.intp),
        "overlap": np.asarray(rows["overlap"], dtype=np.intp),
        "p_value": np.asarray(rows["p_value"], dtype=np.float64),
        "p_adjusted": np.asarray(adjusted, dtype=np.float64),
    }
    return table
