"""CoGAPS's distributed mode: fit subsets of the features ("genome-wide") or of the samples
("single-cell") independently, match their patterns across subsets by hierarchical clustering,
and refit every subset with the consensus held fixed.

The subsets run through joblib, so the same code runs on local processes (``n_jobs``) and on a
Dask or Ray cluster (``joblib.parallel_config(backend="dask")``). Every subset's chain is seeded
from ``random_state`` and the subset's index, and only arrays travel back, so the result does
not depend on the backend or on the number of workers.
"""

import math
from collections import Counter
from collections.abc import Mapping

import numpy as np
from scipy import sparse
from scipy.cluster.hierarchy import cut_tree, linkage
from scipy.spatial.distance import squareform
from sklearn.base import clone
from sklearn.utils import check_random_state

# scikit-learn's joblib wrappers carry the caller's configuration and warning filters
# into the workers, as its own estimators' n_jobs do
from sklearn.utils.parallel import Parallel, delayed

from .._utils._params import warn_unused_parameters
from .._utils._seeding import draw_seeds
from ._chain import prior_rates
from ._uncertainty import uncertainty_array

__all__ = [
    "check_single_chain_parameters",
    "clear_distributed_attributes",
    "consensus_patterns",
    "fit_distributed",
]

# the parameters that only distributed mode reads, with the defaults of CoGAPS.__init__
_DISTRIBUTED_ONLY = {
    "n_sets": None,
    "cut": None,
    "min_ns": None,
    "max_ns": None,
    "explicit_sets": None,
    "n_jobs": None,
}

# the number of random subsets when n_sets=None and no explicit_sets are given (nSets)
_DEFAULT_N_SETS = 4

# The fitted attributes only a distributed fit sets.
_DISTRIBUTED_ATTRIBUTES = (
    "n_components_",
    "subsets_",
    "subset_patterns_",
    "pattern_clusters_",
    "consensus_correlation_",
    "subset_chisq_",
)


# ---------------------------------------------------------------------- subsets
def _explicit_subsets(explicit_sets, n_total, axis_name, names):
    """The user's subsets as sorted index arrays, and the indices in none of them; no index
    may be in two."""
    if (
        isinstance(explicit_sets, np.ndarray)
        and explicit_sets.ndim == 1
        and explicit_sets.dtype != object
    ):
        explicit_sets = [explicit_sets]
    else:
        # a dict of name -> members, as gene sets come, gives its members
        explicit_sets = list(
            explicit_sets.values() if isinstance(explicit_sets, Mapping) else explicit_sets
        )
        if explicit_sets and all(np.ndim(members) == 0 for members in explicit_sets):
            # a flat list (or range, or pandas Index) of indices or names is one subset, as
            # the 1-d array is: each of its members became a subset of one
            explicit_sets = [explicit_sets]
    subsets = []
    lookup = None if names is None else {name: j for j, name in enumerate(names)}
    for i, members in enumerate(explicit_sets):
        members = np.asarray(members).ravel()
        if members.size == 0:
            raise ValueError(
                f"explicit_sets[{i}] is empty; every subset needs at least one {axis_name}."
            )
        if members.dtype.kind in "iu":
            idx = members.astype(np.intp)
        elif members.dtype.kind in "OUS" and lookup is not None:
            if len(lookup) < len(names):
                # a name given twice (anndata.concat keeps each batch's barcodes) names
                # either row: the last would be taken without a word
                repeated = sorted(k for k, c in Counter(names).items() if c > 1)
                raise ValueError(
                    f"explicit_sets[{i}] names {axis_name}s, but {len(repeated)} names of X's "
                    f"{axis_name}s repeat (first {repeated[:3]}), so a name "
                    f"does not say which {axis_name} it is. Pass positions, or make the names "
                    "unique where they are made, anndata.concat(..., index_unique='-'), and "
                    "name the sets by the new names (obs_names_make_unique() would keep "
                    "the old names for the first of each pair, another batch's cell)."
                )
            missing = [m for m in members.tolist() if m not in lookup]
            if missing:
                raise ValueError(
                    f"explicit_sets[{i}] names {axis_name}s that are not in X: {missing[:5]}."
                )
            idx = np.array([lookup[m] for m in members.tolist()], dtype=np.intp)
        elif members.dtype.kind in "OUS":
            # the samples of a single-cell split are positions: X's rows carry no names the
            # estimator keeps
            index, adata = (
                ("X.columns", "adata.var_names")
                if axis_name == "feature"
                else ("X.index", "adata.obs_names")
            )
            raise ValueError(
                f"explicit_sets[{i}] holds names ({members[:3].tolist()}), but X gives its "
                f"{axis_name}s no names: fit a DataFrame (or an AnnData) that names them, or "
                f"pass their positions ({index}.get_indexer(names) for a DataFrame, "
                f"{adata}.get_indexer(names) for an AnnData)."
            )
        else:
            raise ValueError(
                f"explicit_sets[{i}] must hold integer {axis_name} indices"
                + (" or feature names" if names is not None else "")
                + f"; got values of dtype {members.dtype}."
            )
        if idx.min() < 0 or idx.max() >= n_total:
            raise ValueError(
                f"explicit_sets[{i}] has indices outside [0, {n_total}) for the {n_total} "
                f"{axis_name}s of X. Indices start at 0: R's 1:20 is range(0, 20) here."
            )
        subsets.append(np.unique(idx))
    counts = np.bincount(np.concatenate(subsets), minlength=n_total)
    if np.any(counts > 1):
        twice = np.flatnonzero(counts > 1)
        raise ValueError(
            f"explicit_sets must not overlap: every {axis_name} in at most one subset (those in "
            f"none are fitted in the second phase). {twice.size} are in several (first: "
            f"{twice[:5].tolist()})."
        )
    return subsets, np.flatnonzero(counts == 0)


def _random_subsets(n_total, n_sets, rng, axis_name):
    """A random partition into ``n_sets`` sorted subsets, the first ``n_sets - 1`` of size
    ``n_total // n_sets`` and the last with the rest (as CoGAPS's uniform sampling)."""
    if n_sets > n_total:
        raise ValueError(
            f"n_sets={n_sets} exceeds the number of {axis_name}s of X (n_{axis_name}s="
            f"{n_total}); use at most {n_total} subsets, or distributed=None."
        )
    size = n_total // n_sets
    order = rng.permutation(n_total)
    bounds = [i * size for i in range(n_sets)] + [n_total]
    return [np.sort(order[bounds[i] : bounds[i + 1]]) for i in range(n_sets)]


def _take(A, idx, axis):
    """Rows (axis 0) or columns (axis 1) ``idx`` of a dense or sparse matrix, as a new array;
    None and a named uncertainty stand for every entry and are passed on as they are."""
    if A is None or isinstance(A, str):
        return A
    if axis == 0:
        return A[idx]
    if sparse.issparse(A):
        return A[:, idx].tocsr()
    return np.ascontiguousarray(A[:, idx])


# ---------------------------------------------------------------------- matching
def _pearson(M, v):
    """Correlation of every column of ``M`` with the vector ``v``."""
    Mc = M - M.mean(axis=0)
    vc = v - v.mean()
    denom = np.sqrt(np.sum(Mc * Mc, axis=0) * np.sum(vc * vc))
    return np.divide(Mc.T @ vc, denom, out=np.zeros(M.shape[1]), where=denom > 0)


def _cut_clusters(patterns, members, k, min_ns):
    """Complete-linkage clustering of the columns ``members`` of ``patterns`` on the
    correlation distance ``1 - r``, cut into ``k`` clusters; the clusters of at least
    ``min_ns`` columns, in order of their first column (CoGAPS's ``corcut``)."""
    k = min(k, members.size)
    if members.size == 1:
        ids = np.zeros(1, dtype=np.intp)
    else:
        distance = 1.0 - np.corrcoef(patterns[:, members].T)
        distance = np.clip((distance + distance.T) / 2.0, 0.0, 2.0)
        np.fill_diagonal(distance, 0.0)
        tree = linkage(squareform(distance, checks=False), method="complete")
        # cut_tree, as R's cutree, gives exactly k clusters
        ids = cut_tree(tree, n_clusters=k).ravel()
    clusters = []
    for cluster_id in dict.fromkeys(ids.tolist()):
        group = members[ids == cluster_id]
        if group.size >= min_ns:
            clusters.append(group)
    return clusters


def consensus_patterns(patterns, cut, min_ns, max_ns):
    """Match patterns of several fits and average every matched group into a consensus.

    The matching of CoGAPS's distributed mode: the patterns (columns) of all fits are
    clustered hierarchically (complete linkage, distance ``1 - Pearson correlation``) and the
    tree is cut into ``cut`` clusters; clusters of fewer than ``min_ns`` patterns are
    dropped, clusters of more than ``max_ns`` are split in two (again dropping a part smaller
    than ``min_ns``) until none is too large. Every cluster gives one consensus pattern: the
    mean of its members weighted by the cube of their correlation with the cluster's plain
    mean (rounded to 3 decimals, as CoGAPS does; a negative correlation weighs 0, so that
    the consensus stays non-negative), scaled to a maximum of 1. Constant
    patterns (a pattern that died in its fit) have no correlation and are left unmatched.

    Parameters
    ----------
    patterns : list of ndarray of shape (n, n_components)
        The patterns of each fit, one per column; all fits share the ``n`` rows.
    cut : int
        Number of clusters the tree is cut into.
    min_ns : int
        Smallest cluster kept.
    max_ns : int
        Largest cluster kept whole.

    Returns
    -------
    consensus : ndarray of shape (n, n_consensus)
        The consensus patterns, columns of maximum 1.
    labels : ndarray of int of shape (n_fits, n_components)
        The consensus pattern each input pattern went into, -1 when it was dropped.
    correlation : ndarray of shape (n_fits, n_components)
        Correlation of each input pattern with the plain mean of its cluster (NaN when
        dropped).
    """
    n_fits = len(patterns)
    K = patterns[0].shape[1]
    stacked = np.hstack([np.asarray(p, dtype=np.float64) for p in patterns])
    labels = np.full(stacked.shape[1], -1, dtype=np.intp)
    correlation = np.full(stacked.shape[1], np.nan)
    varying = np.flatnonzero(np.ptp(stacked, axis=0) > 0)
    clusters = _cut_clusters(stacked, varying, cut, min_ns) if varying.size else []
    while True:
        too_large = [i for i, c in enumerate(clusters) if c.size > max_ns]
        if not too_large:
            break
        i = too_large[0]
        parts = _cut_clusters(stacked, clusters[i], 2, min_ns)
        clusters[i : i + 1] = parts[:1]
        clusters.extend(parts[1:])
    if not clusters:
        raise ValueError(
            f"No cluster of at least min_ns={min_ns} patterns was found among the {n_fits} "
            f"subsets' {stacked.shape[1]} patterns (cut={cut}), so there is no consensus. "
            "Lower min_ns, raise max_iter, or use fewer subsets."
        )
    consensus = np.empty((stacked.shape[0], len(clusters)))
    for c, members in enumerate(clusters):
        block = stacked[:, members]
        r = _pearson(block, block.mean(axis=1))
        labels[members] = c
        correlation[members] = r
        # CoGAPS's patternMatch: weights are the rounded correlations, cubed. A member
        # anticorrelated with the cluster's mean gets no weight rather than a negative one:
        # a negative weight could make the consensus negative, which no fit can hold fixed.
        weights = np.maximum(np.round(r, 3), 0.0) ** 3
        if not weights.sum() > 0:
            weights = np.ones_like(weights)
        mean = block @ weights / weights.sum()
        top = mean.max()
        consensus[:, c] = mean / top if top > 0 else mean
    return consensus, labels.reshape(n_fits, K), correlation.reshape(n_fits, K)


# ---------------------------------------------------------------------- fits
def _fit_subset(estimator, data, fixed):
    """Fit one subset (in a worker) and return only its arrays."""
    X, uncertainty = data
    kwargs = {} if fixed is None else {fixed[0]: fixed[1]}
    estimator.fit(X, uncertainty=uncertainty, **kwargs)
    return {
        "patterns": estimator.loadings_,
        "patterns_std": estimator.loadings_std_,
        "components": estimator.components_,
        "components_std": estimator.components_std_,
        "chisq": estimator.chisq_,
        "objective_history": estimator.objective_history_,
        "n_atoms_history": estimator.n_atoms_history_,
        "converged": estimator.converged_,
    }


def _dask_client():
    """The Dask client of joblib's active backend, or None when the backend is not Dask's.

    Looked up by name, so that Dask stays an optional dependency."""
    from joblib.parallel import get_active_backend

    backend, _ = get_active_backend()
    if type(backend).__name__ == "DaskDistributedBackend":
        return getattr(backend, "client", None)
    return None


def _ship(data):
    """Make the subsets' data travel to the workers once for both phases.

    On Dask, every subset is scattered once, to one worker, and both phases' tasks receive
    its future: the scheduler runs each task where its data already is. (Left to itself,
    joblib's Dask backend scatters large arguments anew for every ``Parallel`` call.) Other
    backends receive the same array objects in both phases; loky, inside one ``Parallel``
    context, then memory-maps each large array once and reuses the file in phase 2.
    """
    client = _dask_client()
    if client is None:
        return data
    return client.scatter(data, hash=False)


def _run_subsets(parallel, model, data, n_components, seeds, fixed):
    """Fit every subset through joblib; each task receives only its own subset's data."""
    template = clone(model).set_params(
        distributed=None,
        n_components=n_components,
        warm_start=False,
        **_DISTRIBUTED_ONLY,
        **model._under_new_names(),
    )
    return parallel(
        delayed(_fit_subset)(clone(template).set_params(random_state=int(seed)), part, fixed)
        for part, seed in zip(data, seeds)
    )


def _check_matching_parameters(model, n_sets):
    K = model.n_components
    cut = K if model.cut is None else model.cut
    min_ns = math.ceil(n_sets / 2) if model.min_ns is None else model.min_ns
    max_ns = min_ns + n_sets if model.max_ns is None else model.max_ns
    if cut > n_sets * K:
        raise ValueError(
            f"cut={cut} exceeds the {n_sets * K} patterns of the {n_sets} subsets "
            f"(n_components={K} each); use cut <= {n_sets * K}."
        )
    if min_ns > n_sets * K:
        raise ValueError(
            f"min_ns={min_ns} exceeds the {n_sets * K} patterns of the {n_sets} subsets; no "
            "cluster could be kept."
        )
    if max_ns < min_ns:
        raise ValueError(
            f"max_ns={max_ns} is smaller than min_ns={min_ns}; every kept cluster would be "
            "split. Use max_ns >= min_ns."
        )
    return cut, min_ns, max_ns


def fit_distributed(model, X, uncertainty=None, sample_names=None):
    """Fit ``model`` (a CoGAPS with ``distributed`` set) in distributed mode; sets its
    fitted attributes and returns it. ``X`` is already validated; ``sample_names`` are the
    rows' names of X as given (a DataFrame's index, an AnnData's obs_names), by which a
    single-cell split's ``explicit_sets`` may name its samples."""
    genome_wide = model.distributed == "genome-wide"
    axis = 1 if genome_wide else 0
    axis_name = "feature" if genome_wide else "sample"
    if model.warm_start:
        raise ValueError(
            "warm_start=True cannot continue a distributed fit: its chains are the subsets'. "
            "Set warm_start=False, or distributed=None to continue a single chain."
        )
    if uncertainty is None:
        # the default, named: the subsets' fits do not repeat the warnings about it that
        # the whole data's fit gave once
        uncertainty = "relative"
    elif not isinstance(uncertainty, str):
        uncertainty = uncertainty_array(uncertainty, X.shape)
    if sparse.issparse(X) and genome_wide:
        # column subsets of a CSR matrix are cheaper from its CSC form
        X = X.tocsc()
    n_total = X.shape[axis]
    shared_name = "sample" if genome_wide else "feature"
    n_shared = X.shape[1 - axis]
    if n_shared < 2:
        # the subsets' patterns are matched by their correlation over the shared axis
        raise ValueError(
            f"distributed={model.distributed!r} matches the subsets' "
            f"{'patterns' if genome_wide else 'amplitudes'} by their correlation over the "
            f"{shared_name}s, which needs at least 2 {shared_name}s; got n_{shared_name}s="
            f"{n_shared}. Use distributed=None for this X."
        )
    rng = check_random_state(model.random_state)
    if model.explicit_sets is not None:
        names = getattr(model, "feature_names_in_", None) if genome_wide else sample_names
        subsets, left_out = _explicit_subsets(model.explicit_sets, n_total, axis_name, names)
        if model.n_sets is not None and model.n_sets != len(subsets):
            raise ValueError(
                f"n_sets={model.n_sets} but explicit_sets holds {len(subsets)} subsets; "
                "leave n_sets=None with explicit_sets (their number is n_sets)."
            )
    else:
        n_sets = _DEFAULT_N_SETS if model.n_sets is None else model.n_sets
        subsets = _random_subsets(n_total, n_sets, rng, axis_name)
        left_out = np.empty(0, dtype=np.intp)
    n_sets = len(subsets)
    # what no set holds does not shape the consensus; the second phase, whose chains hold the
    # consensus fixed, fits it too, shared out among the subsets in order
    completed = [
        np.union1d(idx, extra) for idx, extra in zip(subsets, np.array_split(left_out, n_sets))
    ]
    cut, min_ns, max_ns = _check_matching_parameters(model, n_sets)
    # one seed per subset and phase, drawn before any fit: independent of the workers
    seeds = rng.randint(np.iinfo(np.int32).max, size=(2, n_sets))
    transform_seed = draw_seeds(rng)

    # every subset is cut once, and the same objects serve both phases when the sets cover X
    def pieces(indices):
        return [(_take(X, idx, axis), _take(uncertainty, idx, axis)) for idx in indices]

    data = pieces(subsets)
    with Parallel(n_jobs=model.n_jobs) as parallel:
        data = _ship(data)
        if model.verbose:
            print(
                f"[CoGAPS] distributed ({model.distributed}): phase 1, {n_sets} subsets", flush=True
            )
        first = _run_subsets(parallel, model, data, model.n_components, seeds[0], None)
        if left_out.size:
            data = _ship(pieces(completed))
        shared = [r["patterns"] if genome_wide else r["components"].T for r in first]
        consensus, labels, correlation = consensus_patterns(shared, cut, min_ns, max_ns)
        K = consensus.shape[1]

        if model.verbose:
            print(
                f"[CoGAPS] distributed ({model.distributed}): phase 2, {K} consensus patterns",
                flush=True,
            )
        fixed = ("fixed_patterns", consensus) if genome_wide else ("fixed_components", consensus.T)
        second = _run_subsets(parallel, model, data, K, seeds[1], fixed)
        del data

    n_samples, n_features = X.shape
    subsets = completed
    if genome_wide:
        free, free_std = np.zeros((K, n_features)), np.zeros((K, n_features))
        for idx, r in zip(subsets, second):
            free[:, idx] = r["components"]
            free_std[:, idx] = r["components_std"]
        model.loadings_ = consensus
        model.loadings_std_ = np.zeros_like(consensus)
        model.components_ = free
        model.components_std_ = free_std
    else:
        free, free_std = np.zeros((n_samples, K)), np.zeros((n_samples, K))
        for idx, r in zip(subsets, second):
            free[idx] = r["patterns"]
            free_std[idx] = r["patterns_std"]
        model.loadings_ = free
        model.loadings_std_ = free_std
        model.components_ = np.ascontiguousarray(consensus.T)
        model.components_std_ = np.zeros_like(model.components_)

    # the subsets partition X, so the chi-squares add up to that of the stitched result
    model.subset_chisq_ = np.array([r["chisq"] for r in second])
    model.chisq_ = float(model.subset_chisq_.sum())
    model.objective_history_ = np.sum([r["objective_history"] for r in second], axis=0)
    model.n_atoms_history_ = np.sum([r["n_atoms_history"] for r in second], axis=0)
    model.n_iter_ = len(model.objective_history_)
    model.converged_ = all(r["converged"] for r in second)
    model.n_components_ = K
    model.subsets_ = subsets
    model.subset_patterns_ = shared
    model.pattern_clusters_ = labels
    model.consensus_correlation_ = correlation
    model.lambda_W_, model.lambda_H_ = prior_rates(X, K, model._atom_densities)
    model._transform_seed = transform_seed
    model._sampler_state = None
    for name in ("loadings_", "loadings_std_", "components_", "components_std_"):
        # float32 data give float32 attributes, as in a single fit
        setattr(model, name, np.asarray(getattr(model, name), dtype=X.dtype))
    return model


def check_single_chain_parameters(model, several_chains=False):
    """Refuse or flag the parameters of distributed mode in a fit that runs one chain.

    ``explicit_sets`` raises a ``ValueError``; the others (``n_sets``, ``cut``, ``min_ns``,
    ``max_ns``, ``n_jobs``) give a ``UserWarning``, as scikit-learn warns about ``l1_ratio``
    without an elastic-net penalty: they would otherwise be dropped silently (a grid over
    ``n_sets`` would fit the same model every time, ``n_jobs`` would not parallelise the
    chain), while a model switched back with ``set_params(distributed=None)`` still fits.

    Parameters
    ----------
    model : CoGAPS
        An estimator with ``distributed=None``.
    several_chains : bool, default=False
        Whether the fit runs several chains, which ``n_jobs`` parallelises.
    """
    if model.explicit_sets is not None:
        raise ValueError(
            "explicit_sets is used only in distributed mode; set distributed to "
            "'genome-wide' or 'single-cell', or explicit_sets=None."
        )
    names = [name for name in _DISTRIBUTED_ONLY if name != "explicit_sets"]
    if several_chains:  # n_jobs runs the chains
        names.remove("n_jobs")
    threads = (
        "A single chain is parallelised by threads: set OMP_NUM_THREADS or use "
        "threadpoolctl.threadpool_limits; n_jobs also runs the chains of n_chains > 1."
    )
    warn_unused_parameters(
        model,
        names,
        "in distributed mode",
        "Set distributed to 'genome-wide' or 'single-cell'",
        note=threads if model.n_jobs is not None and not several_chains else "",
    )


def clear_distributed_attributes(model):
    """Remove what an earlier distributed fit left, before a plain fit of ``model``."""
    for name in _DISTRIBUTED_ATTRIBUTES:
        if name in vars(model):
            delattr(model, name)
