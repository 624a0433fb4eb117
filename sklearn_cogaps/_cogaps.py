"""CoGAPS: Bayesian non-negative matrix factorisation by Gibbs sampling in the atomic domain."""

import hashlib
import warnings
from numbers import Integral, Real

import numpy as np
from scipy import sparse
from sklearn.base import BaseEstimator, ClassNamePrefixFeaturesOutMixin, TransformerMixin, _fit_context
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils import check_random_state
from sklearn.utils import deprecated
from sklearn.utils._param_validation import Hidden, Interval, StrOptions
from sklearn.utils.validation import check_array, check_is_fitted

from ._base import (
    DataInFitMixin,
    NonNegativeFactorisationMixin,
    check_ignored_y,
    check_side_labels,
    draw_seeds,
    effective_n_threads,
    fingerprint,
    validate_input,
    warn_warm_start_ignored,
)
from ._cogaps_distributed import (
    check_single_chain_parameters,
    clear_distributed_attributes,
    fit_distributed,
)
from ._progress import Progress
from ._markers import pattern_markers, z_scores
from ._cogaps_chisq import (
    _sparse_orientation,
    aligned_empty,
    padded_empty,
    fit_chi_square,
    residual,
    sparse_chi_square,
)
from ._cogaps_sampler import GibbsSampler, sample_fixed_rows, sample_fixed_sparse_rows
from ._utils._openmp_helpers import kernel_threads

__all__ = ["CoGAPS", "default_uncertainty"]

# The sparse model's standard deviation of a zero, and relative one of a non-zero.
SPARSE_SIGMA0 = 0.1
# The named uncertainties: (standard deviation of a zero, whether a non-zero's is sqrt(x)
# rather than sigma0 * x), as the sparse-data model computes them on the fly.
_NAMED_UNCERTAINTIES = {"relative": (SPARSE_SIGMA0, False), "poisson": (1.0, True)}
# Largest value of X and of an uncertainty, and smallest uncertainty: squares of scaled
# residuals and precisions 1 / sigma**2 stay finite and normal within these bounds.
_LARGEST_VALUE = 1e150
_SMALLEST_SIGMA = 1e-150
# Folds of each row's entries in score: each fold is predicted from the others.
_SCORE_FOLDS = 5
# A fit whose chi-square fell by more than this fraction between the first and the last
# quarter of its sampling iterations has not converged (a stationary chain's fluctuations
# are a few percent at most; a chain still gaining atoms falls by tens of percent).
_UNCONVERGED_CHISQ_FALL = 0.05
# Shortest sampling phase on which that fall is judged.
_MIN_SAMPLING_ITER_CHECKED = 20
# Rows of a sparse matrix made dense at a time by transform and score.
_ROW_CHUNK = 2048
# What to do instead of passing the uncertainty as the second positional argument.
_UNCERTAINTY_ADVICE = (
    "give the standard deviation of each entry of X, pass it by keyword: "
    "fit(X, uncertainty=U)"
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


def _named_uncertainty(name, X):
    """The standard deviations of a named uncertainty model for dense X."""
    if name == "poisson":
        # the standard deviation of a Poisson count, at least that of a count of 1
        return np.maximum(np.sqrt(np.asarray(X, dtype=np.float64)), 1.0)
    return default_uncertainty(X)


def _canonical_csr(X):
    """X as a float64 CSR matrix with sorted indices, no duplicates and no stored zeros.

    The caller's arrays are shared when they already have that form (they are then only
    read) and copied otherwise, so the caller's matrix is never modified and may be
    read-only or memory-mapped.
    """
    if not sparse.issparse(X):
        return sparse.csr_matrix(X, dtype=np.float64)
    csr = X.tocsr()  # converts other formats (new arrays); a CSR matrix comes back as is
    # a new matrix object on the same arrays: the checks below cache flags on it, not on X
    view = sparse.csr_matrix((csr.data, csr.indices, csr.indptr), shape=csr.shape, copy=False)
    if view.dtype == np.float64 and view.has_canonical_format and np.all(view.data != 0):
        return view
    if view.dtype != np.float64:
        view = view.astype(np.float64)  # a copy
    elif X.format == "csr":  # shares the caller's arrays
        view = view.copy()
    view.sum_duplicates()
    view.eliminate_zeros()
    return view


def _entry_folds(seeds, n_features, n_folds):
    """Fold of every entry of each row, a balanced random split seeded by the row's seed."""
    folds = np.empty((len(seeds), n_features), dtype=np.intp)
    base = np.arange(n_features) % n_folds
    for i, seed in enumerate(seeds):
        folds[i] = np.random.default_rng(int(seed)).permutation(base)
    return folds


def _fold_seeds(seeds, fold):
    """Seeds of the chains of one fold, distinct from those of transform (splitmix64)."""
    with np.errstate(over="ignore"):  # arithmetic modulo 2**64
        z = seeds + np.uint64(0x9E3779B97F4A7C15) * np.uint64(fold + 1)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def _precision(sigma, dtype=np.float64, padded=False):
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


def _as_dtype(values, dtype):
    """``values`` (float64 results) in the dtype of the data, unchanged for float64."""
    return values if dtype == np.float64 else np.asarray(values, dtype=dtype)


def _likelihood_digest(X, uncertainty_name, uncertainty):
    """The fingerprint of what the chain's likelihood reads: the validated X (dense or
    sparse, its pattern, dtype and values) and the uncertainty (its name, or the array's
    values). A warm start continues a chain only on the data it sampled."""
    if sparse.issparse(X):
        X = X.tocsr()
        parts = ("sparse", np.asarray(X.shape, dtype=np.int64), X.indptr.astype(np.int64),
                 X.indices.astype(np.int64), X.data)
    else:
        parts = ("dense", X)
    if uncertainty_name is None:
        U = uncertainty.toarray() if sparse.issparse(uncertainty) else uncertainty
        return fingerprint(*parts, "array", np.asarray(U, dtype=np.float64))
    return fingerprint(*parts, uncertainty_name)


def _n_entries(X):
    """Entries a pass over X reads: the stored ones of a sparse matrix, all of a dense one."""
    return X.nnz if sparse.issparse(X) else X.size


class CoGAPS(
    DataInFitMixin,
    NonNegativeFactorisationMixin,
    ClassNamePrefixFeaturesOutMixin,
    TransformerMixin,
    BaseEstimator,
):
    """Coordinated Gene Activity in Pattern Sets: Bayesian NMF by atomic-domain Gibbs sampling.

    Factorises non-negative data ``X ≈ W @ H`` with ``W`` (n_samples, n_components) the
    patterns and ``H`` (n_components, n_features) the amplitudes, both non-negative, under a
    Gaussian likelihood with a known standard deviation for every entry of ``X`` (the
    uncertainty). Each matrix is the image of an atomic domain: a set of point masses whose
    number is controlled by ``atom_density_W`` and ``atom_density_H`` and whose masses have an exponential prior, which makes
    both matrices sparse. The chain runs ``max_iter`` calibration iterations with an
    annealing temperature, then ``max_iter`` sampling iterations whose samples are averaged.

    Data in float32 (as AnnData matrices usually are) are fitted in float32, as
    :class:`~sklearn.decomposition.NMF` does: the dense model stores the residual and the
    precisions in single precision, which halves the memory read by each proposal, while
    every sum is still formed in float64, and the fitted attributes and the output of
    :meth:`transform` are float32 (see "Single precision" in
    :doc:`the scaling guide </cogaps_scale>`). The sparse-data model computes in float64
    and returns float32 attributes for float32 data.

    In CoGAPS's own names (genes × samples data ``D``), ``D = X.T``, the amplitude matrix
    ``A = H.T`` (``components_.T``) and the pattern matrix ``P = W``. As in CoGAPS, each
    pattern (column of ``W``) is scaled to a maximum of 1 in every sample of the chain that is
    averaged, and the amplitudes carry the scale.

    Parameters
    ----------
    n_components : int, default=7
        Number of patterns (CoGAPS's ``nPatterns``).
    max_iter : int, default=1000
        Iterations of each phase, calibration then sampling (CoGAPS's ``nIterations``).
        ``fit`` warns (``ConvergenceWarning``) when the chi-square still falls by more
        than 5% during the sampling phase: raise ``max_iter`` then.
    atom_density_W : float, default=0.01
        Rate of the Poisson prior on the number of atoms of the patterns ``W`` per matrix
        element (CoGAPS's ``alphaP``): the expected number of atoms per element, so smaller
        values give sparser patterns.
    atom_density_H : float, default=0.01
        The same for the amplitudes ``H`` (CoGAPS's ``alphaA``).
    max_gibbs_mass_W : float, default=100.0
        Largest mass a Gibbs draw may give an atom of ``W``, in units of the prior mean
        ``1 / lambda_W_`` (CoGAPS's ``maxGibbsMassP``).
    max_gibbs_mass_H : float, default=100.0
        The same for ``H`` (CoGAPS's ``maxGibbsMassA``).
    birth_death : {"cogaps", "reversible"}, default="cogaps"
        The birth and death moves of the chain, in ``fit``, fits with a fixed matrix,
        :meth:`transform` and :meth:`score`; see :ref:`cogaps-birth-death`.

        - ``"cogaps"``: CoGAPS's moves, as in the C++ CoGAPS (a birth always keeps its
          Gibbs-drawn mass; a death re-draws the mass and keeps the atom with the
          likelihood ratio), so that results compare with CoGAPS's. Their stationary law is
          not the posterior of the atomic prior: elements are rarely exactly zero and their
          means are larger, close to a posterior under a Gamma(2, lambda) prior.
        - ``"reversible"``: reversible-jump birth and death, whose stationary law is the
          posterior under the compound Poisson-exponential prior the model states (a point
          mass ``exp(-atom_density)`` at zero and Exp(lambda) masses). Use it when the
          posterior itself matters: probabilities of an element being zero, credible
          intervals, comparisons with other Bayesian models.
    random_state : int, RandomState instance or None, default=None
        Seed of the chain and of the per-row chains of :meth:`transform`. The result does
        not depend on the number of threads.
    verbose : int, default=0
        0: silent; 1: a progress line (iteration, chi-square, phase, atoms, time elapsed
        and left) about every tenth of the iterations; 2: a line after every iteration.
    sparse_optimization : bool, default=False
        Use the sparse-data model of CoGAPS 3 (supplement, section 3): the uncertainty is
        a named one (see ``fit``), by default ``0.1`` for a zero and ``max(0.1 * x, 0.1)``
        for a non-zero ``x`` (with ``uncertainty="poisson"``, 1 and ``max(sqrt(x), 1)``),
        computed from each stored value when it is read, and every update works from the stored non-zeros and two small lookup tables
        (``sum(H**2)`` and ``H H^T`` of the fixed matrix), so the dense ``W @ H`` is never
        stored and memory grows with the number of non-zeros. A scipy.sparse ``X``
        always uses this model. An ``uncertainty`` array cannot be combined with it.
    warm_start : bool, default=False
        When True and the estimator was fitted before on the same data, ``fit``
        continues the same chain for ``max_iter`` more sampling iterations (no new
        calibration) and the posterior averages cover all sampling iterations so far. The
        full sampler state (atoms, generator and sums) is kept in the fitted estimator
        only when ``warm_start=True`` or the fit was interrupted (Ctrl-C), so a pickled and
        restored estimator continues exactly as the original would, and an interrupted fit
        continues after ``set_params(warm_start=True)``; otherwise the pickle holds the
        fitted attributes alone. On other data (another shape, other values or dtype,
        another uncertainty), another ``n_components``, other atom densities or the other
        model (dense or sparse), the fit starts a new chain with a ``UserWarning``: the
        samples of two likelihoods or priors are not averaged together.
    distributed : {"genome-wide", "single-cell"} or None, default=None
        CoGAPS's distributed mode (``distributed``): fit ``n_sets`` subsets of the features
        (``"genome-wide"``) or of the samples (``"single-cell"``) independently, match
        their patterns across subsets and refit every subset with the consensus held fixed;
        see :ref:`cogaps-distributed`. The number of consensus patterns, ``n_components_``,
        can differ from ``n_components``. None fits all of X in one chain.
    n_sets : int, default=None
        Number of random subsets in distributed mode (``nSets``). None means 4, or the
        number of ``explicit_sets`` when they are given; an ``n_sets`` that differs from
        the number of ``explicit_sets`` raises a ``ValueError``.
    cut : int, default=None
        Number of clusters the tree of the subsets' patterns is cut into (``cut``); None
        uses ``n_components``.
    min_ns : int, default=None
        Smallest cluster of patterns that gives a consensus pattern (``minNS``); None uses
        half the number of subsets, rounded up.
    max_ns : int, default=None
        Largest cluster kept whole; larger ones are split in two (``maxNS``). None uses
        ``min_ns`` plus the number of subsets.
    explicit_sets : list of array-like, default=None
        The subsets of distributed mode, instead of random ones (``explicitSets``): lists
        of feature indices (or feature names) for ``"genome-wide"``, of sample indices for
        ``"single-cell"``. They must partition the features or samples.
    n_jobs : int, default=None
        Number of joblib workers for the subsets of distributed mode; None means 1 unless
        in a :func:`joblib.parallel_config` context (for example the ``"dask"`` backend).
        The result does not depend on it.
    alpha_W : float, default="deprecated"
        Former name of ``atom_density_W``.

        .. deprecated:: 0.2
           ``alpha_W`` is deprecated and will be removed in 0.3: it reads as the
           regularisation strength of :class:`~sklearn.decomposition.NMF`, the opposite of
           its meaning here. Use ``atom_density_W``.
    alpha_H : float, default="deprecated"
        Former name of ``atom_density_H``.

        .. deprecated:: 0.2
           ``alpha_H`` is deprecated and will be removed in 0.3. Use ``atom_density_H``.

    Attributes
    ----------
    components_ : ndarray of shape (n_components, n_features)
        Posterior mean of ``H`` over the sampling phase (CoGAPS's ``Amean.T``).
    components_std_ : ndarray of shape (n_components, n_features)
        Posterior standard deviation of ``H`` (``Asd.T``).
    loadings_ : ndarray of shape (n_samples, n_components)
        Posterior mean of ``W`` for the training samples, the patterns (CoGAPS's
        ``Pmean``). Every sample of the chain is scaled to columns of maximum 1 before it
        is averaged, as in CoGAPS, so a column's maximum is at most 1, and below 1 when the
        sample where the pattern peaks changes along the chain. With a matrix held fixed
        nothing is rescaled: ``loadings_`` is the fixed ``W``, or ``W`` averaged as sampled
        against the fixed ``H`` (in ``distributed="single-cell"``, the consensus
        amplitudes, whose rows have maximum 1). :meth:`transform` re-samples ``W`` with
        ``H`` fixed; this is the chain's own mean.
    loadings_std_ : ndarray of shape (n_samples, n_components)
        Posterior standard deviation of ``W`` (``Psd``).
    chisq_ : float
        Chi-square ``sum(((X - loadings_ @ components_) / uncertainty) ** 2)`` of the
        posterior mean (CoGAPS's ``meanChiSq``).
    uncertainty_model_ : {"relative", "poisson", "array"}
        The uncertainty of the fit: a named model, or ``"array"`` for the user's own.
        :meth:`transform` and :meth:`score` use the named model when given no
        uncertainty (``"relative"`` after an array).
    chisq_history_ : ndarray of shape (n_iterations,)
        Chi-square of the chain's current state after every iteration, calibration first.
    n_atoms_history_ : ndarray of shape (n_iterations, 2)
        Number of atoms in the domains of ``W`` and of ``H`` after every iteration.
    lambda_W_, lambda_H_ : float
        Rates of the exponential priors on atom masses, ``alpha * sqrt(K / mean(X))`` with
        the mean over the non-zero entries.
    n_iter_ : int
        Number of iterations run by the last call to ``fit``, calibration plus sampling:
        ``2 * max_iter`` for a new chain, ``max_iter`` (sampling only) when ``warm_start``
        continues one, fewer after an interruption.
    n_components_ : int
        Number of consensus patterns of a distributed fit (the columns of ``loadings_``).
        Set only in distributed mode, like the five attributes below.
    subsets_ : list of ndarray
        The feature (genome-wide) or sample (single-cell) indices of each subset.
    subset_patterns_ : list of ndarray of shape (n_shared, n_components)
        The shared factor of each subset's first-phase fit, before matching: its
        ``loadings_`` (genome-wide) or ``components_.T`` (single-cell).
    pattern_clusters_ : ndarray of shape (n_sets, n_components)
        The consensus pattern each first-phase pattern was matched to; -1 when unmatched.
    consensus_correlation_ : ndarray of shape (n_sets, n_components)
        Correlation of each first-phase pattern with the mean of its cluster; NaN when
        unmatched.
    subset_chisq_ : ndarray of shape (n_sets,)
        Chi-square of each subset's final fit; ``chisq_`` is their sum.
    n_features_in_ : int
        Number of features seen during ``fit``.
    feature_names_in_ : ndarray of shape (n_features,)
        Names of features seen during ``fit``, when ``X`` has string feature names.

    See Also
    --------
    sklearn.decomposition.NMF : Non-negative matrix factorisation by optimisation.

    References
    ----------
    .. [1] Sherman, T. D., Gao, T. and Fertig, E. J. (2019). CoGAPS 3: Bayesian non-negative
       matrix factorization for single-cell analysis with asynchronous updates and sparse
       data structures. Supplementary material, sections 1 and 4.
    .. [2] Fertig, E. J., Ding, J., Favorov, A. V., Parmigiani, G. and Ochs, M. F. (2010).
       CoGAPS: an R/C++ package to identify patterns and biological process activity in
       transcriptomic data. Bioinformatics 26(21).

    Examples
    --------
    >>> from sklearn_cogaps import CoGAPS
    >>> from sklearn_cogaps.datasets import make_patterns
    >>> X, W, H = make_patterns(n_samples=20, n_features=60, n_components=2, random_state=0)
    >>> model = CoGAPS(n_components=2, max_iter=200, random_state=0).fit(X)
    >>> model.components_.shape, model.loadings_.shape
    ((2, 60), (20, 2))
    """

    _fit_advice = (
        "CoGAPS(n_components=K).fit(X, uncertainty=U), with X of shape (n_samples, "
        "n_features), the transpose of R's data (nPatterns is n_components)"
    )

    _peer_parameters = {
        name: ("R CoGAPS", instead) for name, instead in {
            "nPatterns": "n_components=K",
            "nIterations": "max_iter=N (iterations of each phase, as nIterations)",
            "seed": "random_state=seed",
            "alphaA": "atom_density_H=... (its A is our H)",
            "alphaP": "atom_density_W=... (its P is our W)",
            "maxGibbsMassA": "max_gibbs_mass_H=...",
            "maxGibbsMassP": "max_gibbs_mass_W=...",
            "sparseOptimization": "sparse_optimization=True",
            "nSets": "n_sets=...",
            "minNS": "min_ns=...",
            "maxNS": "max_ns=...",
            "explicitSets": "explicit_sets=...",
            "singleCell": 'distributed="single-cell"',
            "nThreads": "nothing here: the fit uses OpenMP's threads, limited by "
                        "OMP_NUM_THREADS or threadpoolctl.threadpool_limits(n, user_api='openmp')",
            "uncertainty": "CoGAPS(...).fit(X, uncertainty=U)",
            "messages": "verbose=1",
            "outputFrequency": "verbose=1 (a progress line about every tenth of max_iter)",
            "transposeData": "fit(X.T): X here is samples x features, R's data genes x samples",
            **dict.fromkeys(
                ["geneNames", "sampleNames"],
                "fit(df) with a pandas DataFrame (or an AnnData) that carries the names",
            ),
            **dict.fromkeys(
                ["subsetIndices", "subsetDim"],
                "fit(X[:, genes]) for subsetDim=1 or fit(X[samples]) for subsetDim=2; for "
                "the subsets of distributed mode, explicit_sets=...",
            ),
            **dict.fromkeys(
                ["checkpointInterval", "checkpointOutFile", "checkpointInFile"],
                "warm_start=True and pickle the fitted estimator: it continues the chain "
                "exactly where it stopped",
            ),
            **dict.fromkeys(
                ["nSnapshots", "snapshotPhase"],
                "nothing: fit with warm_start=True in steps of max_iter to keep states along "
                "the chain; loadings_std_ and components_std_ summarise the samples",
            ),
            "asynchronousUpdates": "nothing: the chain is always the asynchronous one, with "
                                   "the same result for any number of threads",
            "BPPARAM": "n_jobs=... in distributed mode, or joblib.parallel_config(backend=...)",
            "params": "CoGAPS(**parameters), with our names for the CogapsParams slots "
                      "(n_components=, max_iter=, random_state=, ...)",
            **dict.fromkeys(
                ["fixedPatterns", "whichMatrixFixed"],
                "CoGAPS(...).fit(X, fixed_components=H) for 'A' (whichMatrixFixed), or "
                "fit(X, fixed_patterns=W) for 'P'",
            ),
        }.items()
    }

    _parameter_constraints = {
        "n_components": [Interval(Integral, 1, None, closed="left")],
        "max_iter": [Interval(Integral, 1, None, closed="left")],
        "atom_density_W": [Interval(Real, 0, None, closed="neither")],
        "atom_density_H": [Interval(Real, 0, None, closed="neither")],
        "alpha_W": [Interval(Real, 0, None, closed="neither"), Hidden(StrOptions({"deprecated"}))],
        "alpha_H": [Interval(Real, 0, None, closed="neither"), Hidden(StrOptions({"deprecated"}))],
        "max_gibbs_mass_W": [Interval(Real, 0, None, closed="neither")],
        "max_gibbs_mass_H": [Interval(Real, 0, None, closed="neither")],
        "birth_death": [StrOptions({"cogaps", "reversible"})],
        "random_state": ["random_state"],
        "verbose": ["verbose"],
        "sparse_optimization": ["boolean"],
        "warm_start": ["boolean"],
        "distributed": [StrOptions({"genome-wide", "single-cell"}), None],
        "n_sets": [Interval(Integral, 1, None, closed="left"), None],
        "cut": [Interval(Integral, 1, None, closed="left"), None],
        "min_ns": [Interval(Integral, 1, None, closed="left"), None],
        "max_ns": [Interval(Integral, 1, None, closed="left"), None],
        "explicit_sets": ["array-like", None],
        "n_jobs": [Integral, None],
    }

    def __init__(
        self,
        n_components=7,
        *,
        max_iter=1000,
        atom_density_W=0.01,
        atom_density_H=0.01,
        max_gibbs_mass_W=100.0,
        max_gibbs_mass_H=100.0,
        birth_death="cogaps",
        random_state=None,
        verbose=0,
        sparse_optimization=False,
        warm_start=False,
        distributed=None,
        n_sets=None,
        cut=None,
        min_ns=None,
        max_ns=None,
        explicit_sets=None,
        n_jobs=None,
        alpha_W="deprecated",
        alpha_H="deprecated",
    ):
        self.n_components = n_components
        self.max_iter = max_iter
        self.atom_density_W = atom_density_W
        self.atom_density_H = atom_density_H
        self.alpha_W = alpha_W
        self.alpha_H = alpha_H
        self.max_gibbs_mass_W = max_gibbs_mass_W
        self.max_gibbs_mass_H = max_gibbs_mass_H
        self.birth_death = birth_death
        self.random_state = random_state
        self.verbose = verbose
        self.sparse_optimization = sparse_optimization
        self.warm_start = warm_start
        self.distributed = distributed
        self.n_sets = n_sets
        self.cut = cut
        self.min_ns = min_ns
        self.max_ns = max_ns
        self.explicit_sets = explicit_sets
        self.n_jobs = n_jobs

    # ------------------------------------------------------------------ validation
    def _validate_X(self, X, reset):
        X = validate_input(
            self,
            X,
            reset=reset,
            accept_sparse=("csr", "csc"),
            dtype=(np.float64, np.float32),
            ensure_non_negative=True,
        )
        values = X.data if sparse.issparse(X) else X
        largest = float(values.max()) if values.size else 0.0
        if largest > _LARGEST_VALUE:
            raise ValueError(
                f"X holds values up to {largest:.3g}; CoGAPS squares residuals scaled by the "
                f"uncertainty, which overflows for values above {_LARGEST_VALUE:g}. Rescale "
                "X (and any uncertainty) by the same factor first, e.g. X / X.max()."
            )
        if sparse.issparse(X):
            return X
        return np.ascontiguousarray(X)

    @staticmethod
    def _uncertainty_name(uncertainty):
        """The named model ``uncertainty`` stands for, or None for an array."""
        if uncertainty is None:
            return "relative"
        if isinstance(uncertainty, str):
            if uncertainty not in _NAMED_UNCERTAINTIES:
                raise ValueError(
                    f"'uncertainty' must be 'relative', 'poisson', an array of the shape of X "
                    f"or None; got {uncertainty!r}. Use 'poisson' for counts and 'relative' "
                    "(the default) for continuous data."
                )
            return uncertainty
        return None

    def _resolve_uncertainty(self, uncertainty):
        """What transform and score use: the fitted named model when given None."""
        if uncertainty is not None:
            return uncertainty
        model = getattr(self, "uncertainty_model_", "relative")
        return "relative" if model == "array" else model

    @classmethod
    def _validate_uncertainty(cls, uncertainty, X):
        name = cls._uncertainty_name(uncertainty)
        if name is not None:
            return _named_uncertainty(name, X)
        if sparse.issparse(uncertainty):
            uncertainty = uncertainty.toarray()
        u = np.asarray(uncertainty, dtype=np.float64)
        if u.shape != X.shape:
            raise ValueError(
                f"'uncertainty' must have the shape of X {X.shape}; got {u.shape}. Pass one "
                "standard deviation per entry of X, or None for CoGAPS's default."
            )
        if not np.all(np.isfinite(u)):
            raise ValueError(
                "'uncertainty' contains NaN or infinite values; every entry must be a finite "
                "positive standard deviation."
            )
        if u.size == 0:
            return np.ascontiguousarray(u)
        smallest, largest = u.min(), u.max()
        if smallest <= 0:
            raise ValueError(
                f"'uncertainty' must be positive everywhere; its smallest entry is {smallest}. "
                "A zero standard deviation makes the likelihood infinite: floor it, for "
                "example np.maximum(uncertainty, 0.1)."
            )
        if smallest < _SMALLEST_SIGMA or largest > _LARGEST_VALUE:
            raise ValueError(
                f"'uncertainty' spans [{smallest:.3g}, {largest:.3g}]; CoGAPS works with the "
                f"precisions 1 / uncertainty**2, which are only representable for standard "
                f"deviations in [{_SMALLEST_SIGMA:g}, {_LARGEST_VALUE:g}]. Rescale X and the "
                "uncertainty by the same factor, or floor the uncertainty, e.g. "
                "np.maximum(uncertainty, 1e-6 * X.max())."
            )
        return np.ascontiguousarray(u)

    # ------------------------------------------------------------------ fit
    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y=None, *, uncertainty=None, fixed_components=None, fixed_patterns=None):
        """Sample the posterior of the factorisation of X.

        One of the two matrices can be held fixed (CoGAPS's ``fixedPatterns`` with
        ``whichMatrixFixed``): the chain then samples only the other one, and the fixed
        matrix comes back unchanged as the fitted attribute, with standard deviation 0.
        Neither matrix is rescaled in that case (the free one is averaged as sampled), so
        ``fit(X, fixed_components=H).loadings_`` estimates what ``transform(X)`` does for
        an estimator with ``components_ = H``, in one chain over all the rows.

        Parameters
        ----------
        X : {array-like, sparse matrix, AnnData} of shape (n_samples, n_features)
            Non-negative data (CoGAPS's ``D.T``); an AnnData contributes its ``.X``.
        y : Ignored
            Not used, present for API consistency by convention. A second positional
            array of the shape of X is refused: pass the uncertainty by keyword.
        uncertainty : {"relative", "poisson"} or array-like of shape (n_samples, n_features), \
                default=None
            Standard deviation of each entry of X (CoGAPS's ``uncertainty.T``), or the name
            of a model of it:

            - ``"relative"`` (what None means): CoGAPS's default ``max(0.1 * X, 0.1)``, a
              10% error. Use it for continuous, log-transformed or normalised data, as R
              and C++ CoGAPS do.
            - ``"poisson"``: ``max(sqrt(X), 1)``, the standard deviation of a Poisson count.
              Use it for raw counts (UMIs, reads, photon counts, pixel intensities): the
              relative model gives a count of 1 a hundred times the weight of a count of
              10, so the chain spends components on isolated small counts; on
              ``load_digits`` (10 patterns) the relative error of the fit falls from 0.54
              to 0.44 (scikit-learn's NMF, 10 components: 0.33).
            - an array: your own standard deviations, all positive.

            Both names work with the sparse-data model; an array needs dense data. The
            name is kept in ``uncertainty_model_`` and is what :meth:`transform` and
            :meth:`score` use when they get None.
        fixed_components : array-like of shape (n_components, n_features), default=None
            Amplitudes ``H`` to hold fixed: only the patterns ``W`` are sampled. Non-negative
            and finite.
        fixed_patterns : array-like of shape (n_samples, n_components), default=None
            Patterns ``W`` to hold fixed: only the amplitudes ``H`` are sampled. Cannot be
            combined with ``fixed_components``.

        Returns
        -------
        self : object
            The fitted estimator.

        Notes
        -----
        With ``warm_start=True``, a fit continues the previous chain only when it holds the
        same matrix fixed at the same values as the previous fit (or none in both); a
        different fixed matrix raises a ``ValueError`` (set ``warm_start=False`` to start
        a new chain).

        Examples
        --------
        Sample the patterns of data whose amplitudes are known:

        >>> from sklearn_cogaps import CoGAPS
        >>> from sklearn_cogaps.datasets import make_patterns
        >>> X, W, H = make_patterns(n_samples=20, n_features=60, n_components=2, random_state=0)
        >>> model = CoGAPS(n_components=2, max_iter=200, random_state=0)
        >>> model = model.fit(X, fixed_components=H)
        >>> bool((model.components_ == H).all()), float(model.components_std_.max())
        (True, 0.0)
        """
        check_ignored_y(self, y, X, advice=_UNCERTAINTY_ADVICE)
        check_side_labels(X, "uncertainty", uncertainty)
        check_side_labels(X, "fixed_components", fixed_components, axes=("column",))
        check_side_labels(X, "fixed_patterns", fixed_patterns, axes=("row",))
        self._atom_densities = self._resolve_atom_densities()
        X = self._validate_X(X, reset=True)
        name = self._uncertainty_name(uncertainty)
        self.uncertainty_model_ = "array" if name is None else name
        if self.distributed is not None:
            if fixed_components is not None or fixed_patterns is not None:
                raise ValueError(
                    "A distributed fit holds its consensus fixed itself; fixed_components "
                    "and fixed_patterns need distributed=None."
                )
            self._n_calibration_iter = None  # the subsets' chains have their own phases
            return fit_distributed(self, X, uncertainty)
        check_single_chain_parameters(self)
        clear_distributed_attributes(self)
        fixed = self._validate_fixed(X, fixed_components, fixed_patterns)
        # the chain gets the cap and decides per batch; a pass over the data, by its size
        n_threads = effective_n_threads()
        pass_threads = kernel_threads(2 * self.n_components * _n_entries(X), n_threads)
        data = self._model_data(X, uncertainty)
        likelihood = _likelihood_digest(X, name, uncertainty) if self.warm_start else None
        continued = self._continues_chain(X, data, fixed, likelihood)
        if continued:
            sampler, history, atoms = self._restore_sampler(data, n_threads)
            iterations = [True] * self.max_iter
        else:
            sampler = self._new_sampler(X, data, fixed)
            history = np.empty(0)
            atoms = np.empty((0, 2), dtype=np.int64)
            iterations = [False] * self.max_iter + [True] * self.max_iter
        chisq = sampler.chi_square(pass_threads)
        if not np.isfinite(chisq):
            raise ValueError(
                f"The chi-square of X against the chain's start is {chisq}: the values of X "
                "scaled by their uncertainty are too large to square. Rescale X or raise the "
                "smallest uncertainties."
            )
        new_history, new_atoms = self._run_chain(sampler, iterations, chisq, n_threads,
                                                 pass_threads)
        self._warn_if_unconverged(new_history[np.asarray(iterations[: len(new_history)])])
        self._set_posterior(
            sampler,
            data,
            np.concatenate([history, new_history]),
            np.concatenate([atoms, new_atoms]),
            pass_threads,
            fixed,
        )
        _cast_attributes(self, X.dtype)
        # the full state (atoms, generator, sums) only when a later fit may continue it:
        # with warm_start, or after an interruption (the warning advises continuing)
        self._sampler_state = None
        if self.warm_start or len(new_history) < len(iterations):
            if likelihood is None:
                likelihood = _likelihood_digest(X, name, uncertainty)
            self._sampler_state = {
                **sampler.get_state(),
                "birth_death": self.birth_death,
                "likelihood": likelihood,
                "atom_densities": tuple(self._atom_densities),
            }
        self.n_iter_ = len(new_history)
        if not continued:
            # the chain's calibration phase: its first iterations, whatever later warm
            # starts append (they sample only)
            self._n_calibration_iter = min(len(new_history), self.max_iter)
        self._check_finite_fit()
        return self

    def _warn_if_unconverged(self, sampling_chisq):
        """Warn when the chi-square still fell during the sampling phase.

        A chain that has reached its stationary law has a chi-square that fluctuates
        around a level; one still falling while samples are averaged has not converged,
        and its posterior means (hence ``chisq_`` and ``score``) describe a worse fit than
        the model can reach with this ``n_components``. The fall is measured between the
        means of the first and last quarters of the sampling iterations of this fit.
        """
        n = len(sampling_chisq)
        if n < _MIN_SAMPLING_ITER_CHECKED:
            return
        quarter = n // 4
        first = float(np.mean(sampling_chisq[:quarter]))
        last = float(np.mean(sampling_chisq[-quarter:]))
        fall = (first - last) / first if first > 0 else 0.0
        if fall > _UNCONVERGED_CHISQ_FALL:
            warnings.warn(
                f"The chi-square fell by {fall:.0%} during the sampling phase (from "
                f"{first:.6g} to {last:.6g}, means of its first and last quarters): the "
                "chain had not converged when sampling began, so the posterior means mix "
                "states of a worse fit and chisq_ and score understate what "
                f"n_components={self.n_components} can reach. Raise max_iter (now "
                f"{self.max_iter}); a model with few patterns gains its atoms slowly (see "
                "'Choosing the number of patterns' in the CoGAPS guide).",
                ConvergenceWarning,
                stacklevel=3,
            )

    def _check_finite_fit(self):
        """Raise instead of leaving a NaN or an infinity in a fitted attribute."""
        for name in ("components_", "components_std_", "loadings_", "loadings_std_", "chisq_"):
            if not np.all(np.isfinite(getattr(self, name))):
                raise ValueError(
                    f"The fit produced non-finite values in {name!r} (chi-square "
                    f"{self.chisq_}): the data or its uncertainty are too extreme for "
                    "double precision. Rescale X so that its values and their ratios to the "
                    "uncertainty stay well inside 1e-150..1e150."
                )

    def _resolve_atom_densities(self):
        """``(atom_density_W, atom_density_H)``, from the deprecated names when they are set."""
        densities = []
        for old, new in (("alpha_W", "atom_density_W"), ("alpha_H", "atom_density_H")):
            value = getattr(self, old)
            if isinstance(value, str) and value == "deprecated":
                densities.append(float(getattr(self, new)))
                continue
            warnings.warn(
                f"'{old}' was renamed '{new}' in 0.2 and will be removed in 0.3: it is the "
                f"expected number of atoms per matrix element, not a regularisation strength "
                f"as in NMF. Use {new}={value!r}.",
                FutureWarning,
                stacklevel=4,
            )
            densities.append(float(value))
        return tuple(densities)

    def _validate_fixed(self, X, fixed_components, fixed_patterns):
        """``(which, matrix)`` with which in {None, "W", "H"} and the fixed matrix in the
        sampler's orientation (W, or Ht = H^T), as a new float64 array."""
        if fixed_components is not None and fixed_patterns is not None:
            raise ValueError(
                "Pass at most one of 'fixed_components' and 'fixed_patterns': holding both "
                "matrices fixed leaves nothing to sample."
            )
        if fixed_components is None and fixed_patterns is None:
            return None, None, None
        K = self.n_components
        if fixed_components is not None:
            name, value, expected, which = (
                "fixed_components", fixed_components, (K, X.shape[1]), "H")
            meaning = "(n_components, n_features)"
        else:
            name, value, expected, which = (
                "fixed_patterns", fixed_patterns, (X.shape[0], K), "W")
            meaning = "(n_samples, n_components)"
        M = check_array(
            value,
            accept_sparse=False,
            dtype=np.float64,
            ensure_all_finite=True,
            ensure_min_samples=1,
            ensure_min_features=1,
            input_name=name,
            copy=True,
            order="C",  # the sampler reads the fixed matrix row by row
        )
        if M.shape != expected:
            raise ValueError(
                f"'{name}' must have shape {meaning} = {expected} for this X and "
                f"n_components={K}; got {M.shape}. Set n_components to the number of "
                "components of the fixed matrix."
            )
        if np.any(M < 0):
            raise ValueError(
                f"'{name}' must be non-negative; its smallest entry is {M.min()}. CoGAPS's "
                "matrices are sums of atoms of positive mass."
            )
        if which == "H":
            return which, M, np.ascontiguousarray(M.T)
        return which, M, M


    def _model_data(self, X, uncertainty):
        """What the sampler works from: ``("dense", X, precision, name)`` or, for the sparse
        model, ``("sparse", X as canonical CSR, X.T as CSR, name)``, with the name of the
        uncertainty model (None for an array)."""
        name = self._uncertainty_name(uncertainty)
        if self.sparse_optimization or sparse.issparse(X):
            if name is None:
                raise ValueError(
                    "The sparse-data model computes the uncertainty from each stored value: "
                    "it takes uncertainty='relative' (0.1 for zeros, max(0.1 * x, 0.1) "
                    "otherwise) or 'poisson' (max(sqrt(x), 1)), not an array. Pass dense X "
                    "with sparse_optimization=False to use your own."
                )
            # both orientations, sharing the caller's arrays where they are already
            # canonical (they are only read): a CSC's transpose is a CSR of its columns
            if sparse.issparse(X) and X.format == "csc":
                cols = _canonical_csr(X.T)
                rows = cols.T.tocsr()
                rows.sort_indices()
            else:
                rows = _canonical_csr(X)
                cols = rows.T.tocsr()
                cols.sort_indices()
            return ("sparse", rows, cols, name)
        sigma = self._validate_uncertainty(uncertainty, X)
        return ("dense", X, _precision(sigma, X.dtype, padded=True), name)

    def _continues_chain(self, X, data, fixed, likelihood):
        state = getattr(self, "_sampler_state", None)
        if not self.warm_start:
            return False
        if state is None:
            if hasattr(self, "components_"):
                # fitted before, to the end, without warm_start (or in distributed mode)
                warn_warm_start_ignored(
                    self, "the previous fit kept no sampler state (it ran with "
                    "warm_start=False, or in distributed mode; set warm_start=True before "
                    "the first fit to continue it later)"
                )
            return False
        previous = (state["W"].shape[0], state["Ht"].shape[0], state["W"].shape[1])
        if previous != (*X.shape, self.n_components):
            warn_warm_start_ignored(
                self, f"X has shape {X.shape} and n_components={self.n_components}, the "
                f"previous chain had {previous[:2]} and {previous[2]}"
            )
            return False
        if state["sparse"] != (data[0] == "sparse"):
            was, now = ("sparse", "dense") if state["sparse"] else ("dense", "sparse")
            warn_warm_start_ignored(
                self, f"the previous chain used the {was} model and this fit the {now} one "
                "(sparse_optimization or the input's format changed)"
            )
            return False
        # (states saved before these checks existed carry no digest or densities)
        if state.get("likelihood", likelihood) != likelihood:
            warn_warm_start_ignored(
                self, "X or its uncertainty differ from the previous fit's, whose likelihood "
                "the chain's samples follow"
            )
            return False
        densities = tuple(self._atom_densities)
        previous_densities = state.get("atom_densities", densities)
        if previous_densities != densities:
            warn_warm_start_ignored(
                self, f"the atom densities (atom_density_W, atom_density_H) are {densities}, "
                f"the previous chain's prior had {previous_densities}"
            )
            return False
        # states saved before the option existed come from CoGAPS's moves
        previous_moves = state.get("birth_death", "cogaps")
        if previous_moves != self.birth_death:
            raise ValueError(
                f"warm_start=True continues the previous chain, which ran with "
                f"birth_death={previous_moves!r}; this fit has birth_death="
                f"{self.birth_death!r}. The two moves sample different laws, so their "
                "samples cannot be averaged together: use the same birth_death, or set "
                "warm_start=False to start a new chain."
            )
        which, _, matrix = fixed
        previous = state.get("fixed")
        if which != previous or (
            which is not None
            and not np.array_equal(matrix, state["W"] if which == "W" else state["Ht"])
        ):
            describe = {None: "no fixed matrix", "W": "fixed_patterns", "H": "fixed_components"}
            raise ValueError(
                f"warm_start=True continues the previous chain, which was fitted with "
                f"{describe[previous]}; this fit has {describe[which]}"
                f"{' with other values' if which == previous else ''}. Pass the same fixed "
                "matrix as before, or set warm_start=False to start a new chain."
            )
        return True

    @property
    def _reversible(self):
        # estimators pickled before the option existed use CoGAPS's moves
        return getattr(self, "birth_death", "cogaps") == "reversible"

    def _prior_rates(self, X):
        values = X.data if sparse.issparse(X) else X
        # X is non-negative: the sum over the non-zeros is the sum over all entries
        n_nonzero = np.count_nonzero(values)
        data_mean = float(values.sum(dtype=np.float64)) / n_nonzero if n_nonzero else 1.0
        root = np.sqrt(self.n_components / data_mean)
        return self._atom_densities[0] * root, self._atom_densities[1] * root

    def _new_sampler(self, X, data, fixed):
        rng = check_random_state(self.random_state)
        seed = draw_seeds(rng)
        self._transform_seed = draw_seeds(rng)
        # from the canonical data: duplicates of a sparse X are summed there
        self.lambda_W_, self.lambda_H_ = self._prior_rates(data[1])
        K = self.n_components
        which, _, matrix = fixed
        W0 = matrix if which == "W" else np.zeros((X.shape[0], K))
        Ht0 = matrix if which == "H" else np.zeros((X.shape[1], K))
        return self._make_sampler(data, W0, Ht0, seed=seed, fixed=which)

    def _make_sampler(self, data, W, Ht, seed=0, state=None, n_threads=1, fixed=None):
        kind, a, b, name = data
        arguments = (
            *self._atom_densities,
            self.lambda_W_,
            self.lambda_H_,
            self.max_gibbs_mass_W,
            self.max_gibbs_mass_H,
            seed,
        )
        if kind == "sparse":
            return GibbsSampler(
                None,
                None,
                W,
                Ht,
                *arguments,
                state=state,
                sparse_data=(a, b, *_NAMED_UNCERTAINTIES[name]),
                fixed=fixed,
                reversible=self._reversible,
            )
        # a fresh chain starts with one matrix zero: its residual is X itself; a float32
        # chain recomputes its residual from X at every iteration
        R = a if state is None else residual(a, W, Ht, n_threads)
        return GibbsSampler(
            R,
            b,
            W,
            Ht,
            *arguments,
            state=state,
            fixed=fixed,
            reversible=self._reversible,
            X=a if a.dtype == np.float32 else None,
        )

    def _restore_sampler(self, data, n_threads):
        state = self._sampler_state
        sampler = self._make_sampler(
            data,
            state["W"],
            state["Ht"],
            state=state,
            n_threads=n_threads,
            fixed=state.get("fixed"),
        )
        return sampler, self.chisq_history_, self.n_atoms_history_

    def _run_chain(self, sampler, iterations, chisq, n_threads, pass_threads):
        """Run the chain, one Cython call per iteration (interruptible with Ctrl-C).

        ``iterations`` lists, for each iteration, whether it samples (True) or calibrates;
        the chain runs with up to ``n_threads``, its chi-square passes with ``pass_threads``.
        """
        n = self.max_iter
        history = []
        atoms = []
        total = len(iterations)
        progress = Progress(self, total, objective="chi-square")
        try:
            for it, sampling in enumerate(iterations):
                tau = 1.0 if sampling else min(1.0, 2.0 * (it + 1) / n)
                _, _, dloglik = sampler.iterate(tau, n_threads)
                # logL = -chisq / 2; re-computed exactly from time to time against drift
                chisq -= 2.0 * dloglik
                if (it + 1) % 100 == 0 or it + 1 in (n, total):
                    chisq = sampler.chi_square(pass_threads)
                if sampling:
                    sampler.accumulate()
                history.append(chisq)
                n_atoms = sampler.n_atoms
                atoms.append(n_atoms)
                if progress.due(it + 1):
                    progress(
                        it + 1,
                        chisq,
                        f"{'sampling' if sampling else 'calibration':>11}  atoms W {n_atoms[0]} "
                        f"H {n_atoms[1]}",
                    )
        except KeyboardInterrupt:
            # the samples of the complete iterations are kept (a sweep stops between rows)
            progress.interrupted(len(history), stacklevel=4)
        return np.asarray(history, dtype=np.float64), np.asarray(atoms, dtype=np.int64).reshape(-1, 2)

    def _set_posterior(self, sampler, data, history, atoms, pass_threads, fixed):
        if sampler.n_accumulated == 0:
            # interrupted during calibration: the current state is the only sample
            sampler.accumulate()
        w_mean, w_std, h_mean, h_std = sampler.posterior()
        # the fixed matrix comes back exactly as it was given, with standard deviation 0
        which, _, matrix = fixed
        if which == "W":
            w_mean, w_std = matrix, np.zeros_like(matrix)
        elif which == "H":
            h_mean, h_std = matrix, np.zeros_like(matrix)
        self.loadings_ = w_mean
        self.loadings_std_ = w_std
        self.components_ = np.ascontiguousarray(h_mean.T)
        self.components_std_ = np.ascontiguousarray(h_std.T)
        kind, a, b, name = data
        if kind == "sparse":
            rows = _sparse_orientation(a)
            sigma0, poisson = _NAMED_UNCERTAINTIES[name]
            self.chisq_ = sparse_chi_square(rows, w_mean, h_mean, sigma0, pass_threads, poisson)
        else:
            self.chisq_ = fit_chi_square(a, b, w_mean, h_mean, pass_threads)
        self.chisq_history_ = history
        self.n_atoms_history_ = atoms

    # ------------------------------------------------------------------ transform
    def _row_seeds(self, X):
        """One seed per row, from ``random_state`` and the row's values as a dense float64
        row, so a row gets the same chain whether it comes dense or sparse."""
        key = int(self._transform_seed).to_bytes(8, "little")
        seeds = np.empty(X.shape[0], dtype=np.uint64)

        def seed(row):
            return int.from_bytes(hashlib.blake2b(row.tobytes(), digest_size=8, key=key).digest(), "little")

        if not sparse.issparse(X):
            # float64 values, so that a float32 row gets the chain of the same row in float64
            for i, row in enumerate(X):
                seeds[i] = seed(np.asarray(row, dtype=np.float64))
            return seeds
        # a canonical CSR (sorted, summed duplicates), densified one row at a time
        row = np.zeros(X.shape[1])
        for i in range(X.shape[0]):
            cols = X.indices[X.indptr[i] : X.indptr[i + 1]]
            row[cols] = X.data[X.indptr[i] : X.indptr[i + 1]]
            seeds[i] = seed(row)
            row[cols] = 0.0
        return seeds

    def _row_chain_threads(self, X):
        """Threads for the per-row chains of ``transform`` and ``score`` on X, from a rough
        count of their work: 2 * max_iter iterations, each of about K proposals per row
        that read the row's entries."""
        iterations = 2 * self.max_iter
        return kernel_threads(iterations * self.components_.shape[0] * _n_entries(X))

    def _sample_sparse_patterns(self, X, name):
        """Patterns of the rows of X under the sparse-data model with the named
        uncertainty: each proposal costs O(nnz of the row * K), and the rows are never made
        dense."""
        rows = _canonical_csr(X)
        sigma0, poisson = _NAMED_UNCERTAINTIES[name]
        mean, _ = sample_fixed_sparse_rows(
            rows,
            np.ascontiguousarray(self.components_.T, dtype=np.float64),
            sigma0,
            self._atom_densities[0],
            self.lambda_W_,
            self.max_gibbs_mass_W,
            self.max_iter,
            self._row_seeds(rows),
            self._row_chain_threads(rows),
            reversible=self._reversible,
            poisson=poisson,
        )
        return _as_dtype(mean, X.dtype)

    def _row_chunks(self, X, uncertainty):
        """Dense row blocks of X with their uncertainty (sparse X is made dense a block at a
        time; rows are independent, so blocks do not change the result)."""
        if self._uncertainty_name(uncertainty) is None and sparse.issparse(uncertainty):
            uncertainty = uncertainty.toarray()
        if not sparse.issparse(X):
            yield X, self._validate_uncertainty(uncertainty, X)
            return
        X = X.tocsr()
        for start in range(0, X.shape[0], _ROW_CHUNK):
            block = X[start : start + _ROW_CHUNK].toarray()
            u = uncertainty
            if self._uncertainty_name(uncertainty) is None:
                u = uncertainty[start : start + _ROW_CHUNK]
            yield block, self._validate_uncertainty(u, block)

    def _sample_patterns(self, X, sigma):
        mean, std = sample_fixed_rows(
            X,
            _precision(sigma, X.dtype),
            np.ascontiguousarray(self.components_.T, dtype=np.float64),
            self._atom_densities[0],
            self.lambda_W_,
            self.max_gibbs_mass_W,
            self.max_iter,
            self._row_seeds(X),
            self._row_chain_threads(X),
            reversible=self._reversible,
        )
        return mean, std

    def fit_transform(self, X, y=None, *, uncertainty=None, fixed_components=None,
                      fixed_patterns=None):
        """Fit, then sample the patterns of X with the fitted amplitudes held fixed.

        ``fit(X, ...).transform(X, uncertainty=uncertainty)``: the returned patterns come
        from the same procedure, under the same uncertainty, as those of new samples in a
        ``Pipeline``. The chain's own posterior mean of W is ``loadings_`` (the fixed W
        itself with ``fixed_patterns``).

        Parameters
        ----------
        X : {array-like, sparse matrix, AnnData} of shape (n_samples, n_features)
            Non-negative data.
        y : Ignored
            Not used, present for API consistency.
        uncertainty : {"relative", "poisson"} or array-like of shape (n_samples, \
                n_features), default=None
            As in :meth:`fit`; also the one :meth:`transform` uses.
        fixed_components : array-like of shape (n_components, n_features), default=None
            As in :meth:`fit`.
        fixed_patterns : array-like of shape (n_samples, n_components), default=None
            As in :meth:`fit`.

        Returns
        -------
        W : ndarray of shape (n_samples, n_components)
            Posterior mean of the patterns of each sample, as :meth:`transform` gives it.
        """
        self.fit(X, y, uncertainty=uncertainty, fixed_components=fixed_components,
                 fixed_patterns=fixed_patterns)
        return self.transform(X, uncertainty=uncertainty)

    def transform(self, X, *, uncertainty=None):
        """Sample the patterns of new samples with the amplitudes held fixed.

        Each row gets its own chain (CoGAPS's fixed-matrix mode: ``max_iter`` calibration
        and ``max_iter`` sampling iterations), seeded from ``random_state`` and the row's
        values, so the result for a row does not depend on the other rows or on the
        number of threads.

        Sparse ``X`` (and any ``X`` when ``sparse_optimization=True``) with a named
        uncertainty is sampled with the sparse-data model, from the stored entries of each
        row: a proposal costs O(nnz of the row * n_components) and no row is made dense. It
        is the dense model with the same named uncertainty, so both give the same patterns
        up to rounding.

        Parameters
        ----------
        X : {array-like, sparse matrix, AnnData} of shape (n_samples, n_features)
            Non-negative data.
        uncertainty : {"relative", "poisson"} or array-like of shape (n_samples, n_features), \
                default=None
            Standard deviation of each entry, or the name of a model of it (see
            :meth:`fit`); None uses the fitted ``uncertainty_model_`` (``"relative"``,
            ``max(0.1 * X, 0.1)``, after a fit with an array).

        Returns
        -------
        W : ndarray of shape (n_samples, n_components)
            Posterior mean of the patterns of each sample, float32 for float32 X (whose
            rows are sampled with a float32 residual, as in ``fit``), float64 otherwise.
        """
        check_is_fitted(self)
        check_side_labels(X, "uncertainty", uncertainty)
        X = self._validate_X(X, reset=False)
        uncertainty = self._resolve_uncertainty(uncertainty)
        self._check_uncertainty_shape(uncertainty, X)
        name = self._uncertainty_name(uncertainty)
        if name is not None and (self.sparse_optimization or sparse.issparse(X)):
            return self._sample_sparse_patterns(X, name)
        blocks = [self._sample_patterns(x, sigma)[0] for x, sigma in self._row_chunks(X, uncertainty)]
        W = np.concatenate(blocks) if blocks else np.empty((0, self.n_components))
        return _as_dtype(W, X.dtype)

    def pattern_markers(self, threshold="all"):
        """The features that mark each pattern (CoGAPS's ``patternMarkers``).

        Parameters
        ----------
        threshold : {"all", "cut"}, default="all"
            ``"all"`` gives each feature to the pattern where it ranks best; ``"cut"`` keeps,
            for each pattern, the features in rank order up to the first one that ranks
            better in another pattern. See :func:`sklearn_cogaps.pattern_markers`.

        Returns
        -------
        markers : list of ndarray
            For each pattern, its marker features, best first: their names when ``X`` had
            feature names, else their indices.
        ranks : ndarray of shape (n_features, n_components)
            Rank of each feature for each pattern (1 = most specific).
        scores : ndarray of shape (n_features, n_components)
            Distance of each feature's normalised amplitude profile to each pattern.
        """
        check_is_fitted(self)
        markers, ranks, scores = pattern_markers(self.components_.T, self.loadings_, threshold)
        names = getattr(self, "feature_names_in_", None)
        if names is not None:
            markers = [names[m] for m in markers]
        return markers, ranks, scores

    def z_scores(self):
        """Posterior mean over standard deviation of both factors (CoGAPS's ``calcZ``).

        Returns
        -------
        patterns_z : ndarray of shape (n_samples, n_components)
            ``loadings_ / loadings_std_``, a standard deviation of 0 read as ``1e-6``.
        components_z : ndarray of shape (n_components, n_features)
            ``components_ / components_std_``, a standard deviation of 0 read as ``1e-6``.
        """
        check_is_fitted(self)
        return z_scores(self.loadings_, self.loadings_std_), z_scores(
            self.components_, self.components_std_
        )

    # deprecated in 0.2, to be removed in 0.3
    @deprecated("'patterns_' was renamed 'loadings_' in 0.2 and will be removed in 0.3.")
    @property
    def patterns_(self):
        """Deprecated alias of ``loadings_``."""
        return self.loadings_

    @deprecated("'patterns_std_' was renamed 'loadings_std_' in 0.2 and will be removed in 0.3.")
    @property
    def patterns_std_(self):
        """Deprecated alias of ``loadings_std_``."""
        return self.loadings_std_

    def score(self, X, y=None, *, uncertainty=None):
        """Held-out log-likelihood of X per sample, for choosing ``n_components``.

        Each row's entries are split into ``5`` folds at random, reproducibly (the split
        and the chains are seeded from ``random_state`` and the row's values, so a row's
        score does not depend on the other rows). For each fold, the row's patterns are
        sampled as in :meth:`transform` (amplitudes fixed) from the other folds only, and
        the entries of the fold are scored under the Gaussian likelihood of the posterior
        mean prediction ``W @ components_``. Every entry is scored once, by a fit that did
        not see it, so extra components that only fit noise lower the score: unlike the
        likelihood of the entries the patterns were fitted to, this criterion has a
        maximum near the number of patterns the data support, and ``GridSearchCV`` over
        ``n_components`` works without a scorer. See "Choosing the number of patterns"
        in the user guide.

        Parameters
        ----------
        X : {array-like, sparse matrix, AnnData} of shape (n_samples, n_features)
            Non-negative data.
        y : Ignored
            Not used, present for API consistency by convention. A second positional
            array of the shape of X is refused: pass the uncertainty by keyword.
        uncertainty : {"relative", "poisson"} or array-like of shape (n_samples, n_features), \
                default=None
            Standard deviation of each entry, or the name of a model of it (see
            :meth:`fit`); None uses the fitted ``uncertainty_model_`` (``"relative"``,
            ``max(0.1 * X, 0.1)``, after a fit with an array, with a warning: in
            ``GridSearchCV`` or ``cross_validate``, route the array to ``score`` with
            ``sklearn.set_config(enable_metadata_routing=True)`` and
            ``set_fit_request(uncertainty=True).set_score_request(uncertainty=True)``).

        Returns
        -------
        score : float
            Average over samples of ``sum_j log N(X_ij | (W^(-f(j)) H)_ij,
            uncertainty_ij**2)``, where ``W^(-f)`` is the posterior mean of the row's
            patterns given the entries outside fold ``f``.
        """
        check_is_fitted(self)
        check_ignored_y(self, y, X, method="score", advice=_UNCERTAINTY_ADVICE.replace("fit", "score"))
        check_side_labels(X, "uncertainty", uncertainty)
        if uncertainty is None and getattr(self, "uncertainty_model_", None) == "array":
            warnings.warn(
                "CoGAPS was fitted with an uncertainty array, but score got no uncertainty: "
                "it scores X under the 'relative' model max(0.1 * X, 0.1), not the "
                "likelihood of the fit, so models compared this way are not compared on "
                "your uncertainty. Pass score(X, uncertainty=U); in GridSearchCV or "
                "cross_validate, route it: sklearn.set_config(enable_metadata_routing=True) "
                "and estimator.set_fit_request(uncertainty=True)"
                ".set_score_request(uncertainty=True).",
                UserWarning,
                stacklevel=2,
            )
        X = self._validate_X(X, reset=False)
        uncertainty = self._resolve_uncertainty(uncertainty)
        self._check_uncertainty_shape(uncertainty, X)
        if X.shape[0] == 0:
            raise ValueError("score needs at least one sample; got X of shape (0, n_features).")
        total = 0.0
        for x, sigma in self._row_chunks(X, uncertainty):
            total += float(np.sum(self._held_out_loglik(x, sigma)))
        return total / X.shape[0]

    def _held_out_loglik(self, x, sigma):
        """Per-row sum of the held-out log-likelihoods of a dense block (see score)."""
        seeds = self._row_seeds(x)
        folds = _entry_folds(seeds, x.shape[1], _SCORE_FOLDS)
        prec = _precision(sigma, x.dtype)
        Ht = np.ascontiguousarray(self.components_.T, dtype=np.float64)
        n_threads = self._row_chain_threads(x)
        loglik = np.zeros(x.shape[0])
        for f in range(_SCORE_FOLDS):
            held = folds == f
            fit_prec = np.where(held, 0.0, prec).astype(x.dtype, copy=False)
            W, _ = sample_fixed_rows(
                x,
                fit_prec,
                Ht,
                self._atom_densities[0],
                self.lambda_W_,
                self.max_gibbs_mass_W,
                self.max_iter,
                _fold_seeds(seeds, f),
                n_threads,
                reversible=self._reversible,
            )
            z = (x - W @ self.components_) / sigma
            terms = -0.5 * z * z - np.log(sigma) - 0.5 * np.log(2.0 * np.pi)
            loglik += np.sum(terms, axis=1, where=held)
        return loglik

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        # float32 data are fitted and transformed in float32 (see the class docstring)
        tags.transformer_tags.preserves_dtype = ["float64", "float32"]
        return tags

    def _check_uncertainty_shape(self, uncertainty, X):
        if self._uncertainty_name(uncertainty) is None and np.shape(uncertainty) != X.shape:
            raise ValueError(
                f"'uncertainty' must have the shape of X {X.shape}; got {np.shape(uncertainty)}."
            )


def _cast_attributes(model, dtype):
    """The fitted matrices in the dtype of the data (float32 data give float32 attributes;
    the chain's sums are float64 in both cases)."""
    for name in ("loadings_", "loadings_std_", "components_", "components_std_"):
        setattr(model, name, _as_dtype(getattr(model, name), dtype))
