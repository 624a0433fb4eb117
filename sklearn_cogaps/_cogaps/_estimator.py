"""CoGAPS: Bayesian non-negative matrix factorisation by Gibbs sampling in the atomic domain.

The estimator: its parameters, the fit's orchestration and the fitting loop's hooks,
``transform``, ``score`` and the pattern statistics. The chain is driven from ``_chain``, the
per-row chains of ``transform`` and ``score`` from ``_rows``; the uncertainty is in
``_uncertainty``, the distributed mode in ``_distributed``; the sampler is compiled
(``_sampler.pyx``).
"""

import os
from numbers import Integral, Real

import numpy as np
from scipy import sparse
from sklearn.base import (
    BaseEstimator,
    ClassNamePrefixFeaturesOutMixin,
    TransformerMixin,
    _fit_context,
)
from sklearn.utils._param_validation import Hidden, Interval, StrOptions
from sklearn.utils.validation import check_is_fitted

from .._base import IterativeMixin
from .._mixins import DataInFitMixin, NonNegativeFactorisationMixin
from .._utils._anndata import is_anndata
from .._utils._blocks import is_dask_array
from .._utils._checkpoint import Checkpoint
from .._utils._deprecation import RenamedMixin
from .._utils._habits import peer_arguments
from .._utils._openmp_helpers import effective_n_threads, kernel_threads
from .._utils._params import warn_unused_parameters
from .._utils._validation import (
    axis_labels,
    check_ignored_y,
    check_side_labels,
    validate_input,
)
from .._utils._warnings import warn
from ._atomic_domain import MAX_N_COLUMNS
from ._chain import (
    ChainState,
    as_dtype,
    cast_attributes,
    check_checkpoint,
    check_finite_fit,
    checkpoint_key,
    chisq_fall,
    gibbs_mass_caps,
    make_sampler,
    model_data,
    n_entries,
    new_sampler,
    restore_sampler,
    set_posterior,
    set_snapshots,
    snapshot_plan,
    unconverged_message,
    validate_fixed,
    warm_start_mismatch,
)
from ._chains import clear_chain_attributes, fit_chains, inference_data
from ._distributed import (
    check_single_chain_parameters,
    clear_distributed_attributes,
    fit_distributed,
)
from ._markers import pattern_markers, z_scores
from ._r_names import R_ATTRIBUTES, R_PARAMETERS
from ._rows import (
    held_out_loglik,
    row_chunks,
    sample_patterns,
    sample_sparse_patterns,
    warn_few_entries,
)
from ._uncertainty import (
    LARGEST_VALUE,
    UNCERTAINTY_ADVICE,
    advise_counts,
    advise_scale,
    check_uncertainty_shape,
    likelihood_digest,
    uncertainty_name,
)

__all__ = ["CoGAPS"]


class _Problem:
    """What the chain of one fit reads: X, the model's data (see ``model_data``), the fixed
    matrix, the digest of the likelihood (for a warm start) and the thread counts."""

    def __init__(self, X, data, fixed, likelihood, n_threads, pass_threads):
        self.X, self.data, self.fixed, self.likelihood = X, data, fixed, likelihood
        self.n_threads, self.pass_threads = n_threads, pass_threads


# How to give score or transform the uncertainty a fit got, inside scikit-learn's tools.
_ROUTE_UNCERTAINTY = (
    "sklearn.set_config(enable_metadata_routing=True) and "
    "estimator.set_fit_request(uncertainty=True).set_score_request(uncertainty=True)"
)


def _check_fitted_genes_present(model, X):
    """Refuse data named by genes that lack some of the fitted ones, with the fit that
    projects them (R's projectR habit): scikit-learn's refusal lists the names alone."""
    fitted = getattr(model, "feature_names_in_", None)
    names = axis_labels(X, "column")
    if fitted is None or names is None or not all(isinstance(n, str) for n in names):
        return
    missing = ~np.isin(fitted, np.asarray(names, dtype=object))
    if not missing.any():
        return
    adata = is_anndata(X)
    columns = "X_new.var_names" if adata else "X_new.columns"
    select = "X_new[:, model.feature_names_in_[keep]]" if adata else (
        "X_new[model.feature_names_in_[keep]]")  # fmt: skip
    raise ValueError(
        f"X lacks {int(missing.sum())} of the {fitted.size} features CoGAPS was fitted on "
        f"(e.g. {fitted[missing][:3].tolist()}): transform projects data of the fitted "
        "genes. To project data that lack some of them, fit the genes both have with the "
        f"amplitudes fixed: keep = np.isin(model.feature_names_in_, {columns}); "
        f"CoGAPS(model.n_components).fit({select}, "
        "fixed_components=model.components_[:, keep]).loadings_"
    )


class CoGAPS(
    RenamedMixin,
    IterativeMixin,
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
    number is controlled by ``atom_density_W`` and ``atom_density_H`` and whose masses have
    an exponential prior, which makes both matrices sparse. The chain runs ``max_iter``
    calibration iterations (annealed when it starts from an empty domain), then
    ``max_iter`` sampling iterations whose samples are averaged; with several chains,
    ``tol`` ends each phase by their diagnostics instead.

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
    solver : {"cogaps", "reversible"}, default="cogaps"
        The chain's birth and death moves, in ``fit``, fits with a fixed matrix,
        :meth:`transform` and :meth:`score`; see :ref:`cogaps-birth-death`.

        - ``"cogaps"``: CoGAPS's moves, as in the C++ CoGAPS (a birth always keeps its
          Gibbs-drawn mass; a death re-draws the mass and keeps the atom with the
          likelihood ratio), so that results compare with CoGAPS's. Their stationary law is
          not the posterior of the atomic prior: elements are rarely exactly zero and their
          means are larger, close to a posterior under a Gamma(2, lambda) prior.
        - ``"reversible"``: reversible-jump birth and death, whose stationary law is the
          posterior under the compound Poisson-exponential prior the model states (a point
          mass ``exp(-atom_density)`` at zero and Exp(lambda) masses); its sampling phase
          makes a fixed number of proposals per iteration, so that the recorded states
          have that law. Use it when the posterior itself matters: probabilities of an
          element being zero, credible intervals, comparisons with other Bayesian models.
    init : {"nmf", "empty"}, default="nmf"
        Where a new chain starts.

        - ``"nmf"``: a point estimate under the fit's weights and priors (the non-negative
          factorisation minimising ``chi^2 / 2`` plus the exponential priors' penalties,
          300 multiplicative updates), one atom per non-zero element, without annealing.
          The chain starts where the posterior is: on every data set of the start's
          benchmark it had the converged answer in 2 to 20 times fewer iterations than the
          empty start (see :ref:`cogaps-start`). On GIST, 500 + 500 iterations give the
          published patterns (worst correlation 0.995 to 0.998 over three seeds, against
          0.31 to 0.79 from the empty domain). On sparse data the start computes on the
          stored entries only. The sampling phase and its law are the same.
        - ``"empty"``: an empty atomic domain, annealed over the first half of the
          calibration, as the C++ CoGAPS starts (choose it to compare with CoGAPS's runs
          iteration by iteration). It gains its atoms slowly: on GIST the patterns need
          about 2000 calibration iterations.

        .. versionchanged:: 0.2
           The default changed from ``"empty"`` to ``"nmf"``.
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
        computed from each stored value when it is read, and every update works from the
        stored non-zeros and two small lookup tables (``sum(H**2)`` and ``H H^T`` of the
        fixed matrix), so the dense ``W @ H`` is never
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
        of feature indices (or feature names) for ``"genome-wide"``, of sample indices (or
        the names of a DataFrame's index, an AnnData's obs_names) for ``"single-cell"``,
        from 0; one flat list or 1-d array is one subset, a dict's values
        are its subsets. They must not overlap. Features (or samples) in no set do not
        shape the consensus patterns; the second phase fits them too, shared out among the
        subsets in order, so that every one has its result (R's tests fit four sets
        covering 900 of GIST's 1363 genes).
    n_jobs : int, default=None
        Number of joblib workers for the subsets of distributed mode and for the chains of
        ``n_chains > 1``; None means 1 unless in a :func:`joblib.parallel_config` context
        (for example the ``"dask"`` backend). The result does not depend on it. One chain
        runs on OpenMP's threads instead.
    n_snapshots : int, default=0
        Number of states of the chain kept in each phase ``snapshot_phase`` names (R's
        ``nSnapshots``): every ``max_iter // n_snapshots`` iterations of a phase, the
        chain's current ``W`` and ``H`` are kept, scaled as the samples that are averaged
        (each pattern to a maximum of 1), in ``loadings_snapshots_`` and
        ``components_snapshots_``. They cost ``n_snapshots`` copies of both matrices. 0 keeps
        none. Not with ``distributed``.
    snapshot_phase : {"sampling", "calibration", "all"}, default="sampling"
        The phase whose states ``n_snapshots`` keeps (R's ``snapshotPhase``, whose
        ``"equilibration"`` is ``"calibration"`` here and is read as such). With more
        snapshots than iterations in a phase, every iteration of it is kept.
    n_chains : int, default=1
        Independent chains to run (in parallel through joblib with ``n_jobs`` workers:
        threads, processes, or a Dask cluster with ``joblib.parallel_config(backend=
        "dask")``). Each is seeded from ``random_state`` by its index, so the result does
        not depend on the backend or the number of workers. Their patterns are matched to
        the first chain's, their posteriors pooled (``loadings_``, ``components_`` and their
        standard deviations are over all chains), and the standard diagnostics of Bayesian
        software computed on their sampling phases: ``rhat_``, ``ess_bulk_``, ``ess_tail_``
        (Vehtari et al. 2021, as ArviZ computes them), from every iteration's chi-square and
        from ``n_snapshots`` draws of each matrix per chain (100 when ``n_snapshots`` is 0;
        the fitted estimator keeps them for :meth:`to_inference_data`, ``n_chains *
        n_draws * (n_samples + n_features) * n_components`` floats: lower ``n_snapshots``
        on large data).
        The ``ConvergenceWarning`` then says when R-hat exceeds its threshold (1.01 for
        the chi-square; for the entries of ``W`` and ``H``, what chains of independent
        draws would exceed over that many entries in 5% of fits, see
        :ref:`cogaps-stopping`) or the chi-square has fewer than 100 effective draws per
        chain. Ctrl-C keeps the chains completed (with
        ``tol``, every chain at its last complete round of sampling), pooled. Not with
        ``warm_start`` or ``distributed``; with ``checkpoint_path`` one file holds every
        chain.
    checkpoint_path : str or os.PathLike, default=None
        A file in which a long fit keeps its complete state (R's ``checkpointOutFile`` and
        ``checkpointInFile`` in one): written every ``checkpoint_every`` iterations and, with
        ``checkpoint_minutes``, whenever that many minutes have passed, each time atomically
        (a crash or ``kill -9`` while writing leaves the previous checkpoint whole). A fit
        started while the file exists resumes from it and ends with the same bits as an
        uninterrupted fit; a file from other data or other parameters is refused. A fit that
        runs to its end deletes the file. One fit at a time: another fit of the same file
        (a parallel search's clone) is refused while this one runs. A new chain only: not
        with a ``warm_start`` continuation or ``distributed``. With ``n_chains > 1`` the
        file holds every chain; they run in rounds (as with ``tol``) and the checkpoint is
        written at the end of the round in which it falls due. The file is read as data: a
        pickle that names anything but numpy's arrays is refused before it can run.
    checkpoint_every : int, default=500
        Iterations (calibration and sampling counted together) between two checkpoints;
        with ``n_chains > 1`` the checkpoint is written at the end of the round of the
        chains (``max(50, max_iter // 10)`` iterations) in which it falls due.
    checkpoint_minutes : float, default=None
        Also write a checkpoint when this many minutes have passed since the last one (with
        several chains, at the end of the round in which they have).
    tol : float, default=None
        With ``n_chains > 1``, end each phase by the chains' diagnostics instead of after
        ``max_iter`` iterations, which then caps each phase (see
        :ref:`cogaps-stopping`). The chains run in rounds of ``max(50, max_iter // 10)``
        iterations. The calibration ends after the first round where the split R-hat of
        the later half of the chains' chi-square traces is at most 1.01: every chain has
        left its start for the same level. The sampling ends after the first round where
        the chains agree and the pooled posterior means are estimated to ``tol`` times
        their posterior standard deviation: for the chi-square and every entry of ``W``
        and ``H`` that moves, the split R-hat is at most its threshold (as for the
        ``ConvergenceWarning``) and the bulk effective sample size at least ``1 / tol**2``
        (100 for 0.1), from at least 20 draws per chain, and the chi-square's bulk and
        tail effective sample sizes at least 100 per chain, as for the warning. The
        draws are the ``n_snapshots`` per chain of a full sampling phase (100 when 0), so
        ``n_chains * n_snapshots`` must exceed ``1 / tol**2`` for the sampling to end
        before ``max_iter``. ``n_iter_`` is then the iterations run per chain. A fit that
        reaches a cap warns and says which test failed. None runs ``max_iter`` iterations
        in each phase. It ends the phases of ``fit``: :meth:`transform` and :meth:`score`
        run one chain per row, ``max_iter`` iterations in each phase, with or without it.
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
    birth_death : {"cogaps", "reversible"}, default="deprecated"
        Former name of ``solver``.

        .. deprecated:: 0.2
           ``birth_death`` was renamed ``solver`` (the name of the algorithm switch in every
           estimator of the package) and will be removed in 0.3.

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
    reconstruction_err_ : float
        Frobenius norm of ``X - loadings_ @ components_``, unweighted: scikit-learn's NMF's
        ``reconstruction_err_`` (its default ``beta_loss="frobenius"``).
    uncertainty_model_ : {"relative", "poisson", "array"}
        The uncertainty of the fit: a named model, or ``"array"`` for the user's own.
        :meth:`transform` and :meth:`score` use the named model when given no
        uncertainty (``"relative"`` after an array).
    objective_history_ : ndarray of shape (n_iterations,)
        Chi-square of the chain's current state after every iteration, calibration first,
        over the whole chain (a ``warm_start`` continuation appends to it).
    loadings_snapshots_ : ndarray of shape (n_snapshots_taken, n_samples, n_components)
        The chain's patterns at the iterations of ``snapshot_iterations_`` (see
        ``n_snapshots``); no snapshot when ``n_snapshots=0``.
    components_snapshots_ : ndarray of shape (n_snapshots_taken, n_components, n_features)
        Its amplitudes at the same iterations.
    snapshot_iterations_ : ndarray of shape (n_snapshots_taken,)
        The iterations of the snapshots, counted over the chain as ``objective_history_``
        is (calibration first, from 1); those above ``n_calibration_iter_`` belong to the
        sampling phase.
    n_calibration_iter_ : int or None
        Length of the chain's calibration phase: its first ``n_calibration_iter_`` values
        of ``objective_history_`` and ``n_atoms_history_`` calibrate, the rest sample.
        ``max_iter`` for a new chain, fewer after an interruption during the calibration
        or when ``tol`` ended it; a ``warm_start`` continuation keeps its chain's. None
        in distributed mode, whose subsets' chains have their own phases.
    n_atoms_history_ : ndarray of shape (n_iterations, 2)
        Number of atoms in the domains of ``W`` and of ``H`` after every iteration.
    lambda_W_, lambda_H_ : float
        Rates of the exponential priors on atom masses, ``atom_density_W * sqrt(K /
        mean(X))`` (and ``atom_density_H``) with the mean over the non-zero entries.
    converged_ : bool
        One chain: whether its chi-square had stopped falling in the sampling phase (the
        test of its ``ConvergenceWarning``). Several: whether their diagnostics pass (split
        R-hat within its threshold everywhere and enough effective draws of the chi-square; with
        ``tol``, whether both phases ended by their tests before ``max_iter``). False after
        an interruption.
    n_iter_ : int
        Number of iterations run by the last call to ``fit``, calibration plus sampling:
        ``2 * max_iter`` for a new chain, ``max_iter`` (sampling only) when ``warm_start``
        continues one, fewer after an interruption or when ``tol`` ended the phases of
        several chains (each chain ran ``n_iter_``).
    rhat_ : dict
        With ``n_chains > 1``: the rank-normalised split R-hat of the chi-square of the
        sampling iterations (``"chisq"``, a float) and of every entry of the two matrices
        (``"loadings"`` of shape (n_samples, n_components), ``"components"`` of shape
        (n_components, n_features); NaN for entries constant in every draw). Set only with
        several chains, like the attributes below up to ``snapshot_chains_``.
    ess_bulk_, ess_tail_ : dict
        The bulk and tail effective sample sizes of the same quantities.
    chain_loadings_ : ndarray of shape (n_chains, n_samples, n_components)
        Each chain's posterior mean of W, its patterns matched to the first chain's.
    chain_components_ : ndarray of shape (n_chains, n_components, n_features)
        Each chain's posterior mean of H, matched likewise.
    chain_objective_histories_ : ndarray of shape (n_chains, n_iterations)
        Each chain's chi-square after every iteration, ``n_iterations = n_iter_``
        (``objective_history_`` is the first chain's).
    snapshot_chains_ : ndarray of shape (n_snapshots_taken,)
        The chain of each snapshot when several chains keep them (``n_snapshots`` per
        chain, fewer when ``tol`` ended the sampling early).
    n_components_ : int
        Number of fitted patterns (the columns of ``loadings_``): ``n_components``, or the
        number of consensus patterns of a distributed fit, which can differ from it. The
        five attributes below are set only in distributed mode.
    subsets_ : list of ndarray
        The feature (genome-wide) or sample (single-cell) indices of each subset in the
        second phase: a partition of the axis (the explicit sets with what they leave out
        shared among them).
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

    _renamed_parameters = {
        "alpha_W": "atom_density_W",
        "alpha_H": "atom_density_H",
        "birth_death": "solver",
    }
    _renamed_attributes = {
        "patterns_": ("loadings_", False),
        "patterns_std_": ("loadings_std_", False),
        "chisq_history_": ("objective_history_", False),
    }

    @property
    def n_calibration_iter_(self):
        check_is_fitted(self)
        return getattr(self, "_n_calibration_iter", None)

    @classmethod
    def _converged_of_earlier_fit(cls, state):
        # the stationarity test of the ConvergenceWarning, on the chain's sampling phase
        history = np.asarray(state.get("objective_history_", state.get("chisq_history_")))
        n_calibration = state.get("_n_calibration_iter") or 0
        return chisq_fall(history[n_calibration:]) is None

    _objective_name = "chi-square"
    _objective_log_scale = True
    _maximise = False
    _stops_early = False

    _fit_advice = (
        "CoGAPS(n_components=K).fit(X, uncertainty=U), with X of shape (n_samples, "
        "n_features), the transpose of R's data (nPatterns is n_components)"
    )

    _peer_parameters = R_PARAMETERS
    _peer_methods = R_ATTRIBUTES
    _missing_value_advice = (
        "CoGAPS weighs each entry of X by 1 / uncertainty**2; to leave entries out of the "
        "fit, give them a value of 0 and a large standard deviation: "
        "U = default_uncertainty(np.nan_to_num(X)); U[np.isnan(X)] = 1e6 * np.nanmax(X); "
        "then pass np.nan_to_num(X) with uncertainty=U, to fit or to transform "
        "(default_uncertainty is in sklearn_cogaps). Drop the samples with no value at "
        "all: their patterns would be unconstrained."
    )
    _masked_advice = (
        "CoGAPS weighs each entry of X by 1 / uncertainty**2; to leave the masked entries "
        "out, give them a value of 0 and a large standard deviation: M = "
        "np.ma.getmaskarray(X); U = default_uncertainty(X.filled(0)); U[M] = 1e6 * X.max(); "
        "then pass X.filled(0) with uncertainty=U, to fit or to transform "
        "(default_uncertainty is in sklearn_cogaps)."
    )

    _parameter_constraints = {
        # the atomic domain packs an atom's column, its pattern, in a fixed number of bits
        "n_components": [Interval(Integral, 1, MAX_N_COLUMNS, closed="both")],
        "max_iter": [Interval(Integral, 1, None, closed="left")],
        "atom_density_W": [Interval(Real, 0, None, closed="neither")],
        "atom_density_H": [Interval(Real, 0, None, closed="neither")],
        "alpha_W": [Interval(Real, 0, None, closed="neither"), Hidden(StrOptions({"deprecated"}))],
        "alpha_H": [Interval(Real, 0, None, closed="neither"), Hidden(StrOptions({"deprecated"}))],
        "max_gibbs_mass_W": [Interval(Real, 0, None, closed="neither")],
        "max_gibbs_mass_H": [Interval(Real, 0, None, closed="neither")],
        "solver": [StrOptions({"cogaps", "reversible"})],
        "init": [StrOptions({"nmf", "empty"})],
        "birth_death": [StrOptions({"cogaps", "reversible"}), Hidden(StrOptions({"deprecated"}))],
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
        # joblib's n_jobs: 0 has no meaning (-1 is every core)
        "n_jobs": [
            Interval(Integral, 1, None, closed="left"),
            Interval(Integral, None, -1, closed="right"),
            None,
        ],  # fmt: skip
        "n_snapshots": [Interval(Integral, 0, None, closed="left")],
        "snapshot_phase": [
            StrOptions({"sampling", "calibration", "all"}),
            Hidden(StrOptions({"equilibration"})),
        ],
        "n_chains": [Interval(Integral, 1, None, closed="left")],
        "checkpoint_path": [str, os.PathLike, None],
        "checkpoint_every": [Interval(Integral, 1, None, closed="left")],
        "checkpoint_minutes": [Interval(Real, 0, None, closed="neither"), None],
        "tol": [Interval(Real, 0, 1, closed="neither"), None],
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
        solver="cogaps",
        init="nmf",
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
        n_snapshots=0,
        snapshot_phase="sampling",
        n_chains=1,
        checkpoint_path=None,
        checkpoint_every=500,
        checkpoint_minutes=None,
        tol=None,
        alpha_W="deprecated",
        alpha_H="deprecated",
        birth_death="deprecated",
    ):
        self.n_components = n_components
        self.max_iter = max_iter
        self.atom_density_W = atom_density_W
        self.atom_density_H = atom_density_H
        self.alpha_W = alpha_W
        self.alpha_H = alpha_H
        self.max_gibbs_mass_W = max_gibbs_mass_W
        self.max_gibbs_mass_H = max_gibbs_mass_H
        self.solver = solver
        self.init = init
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
        self.n_snapshots = n_snapshots
        self.snapshot_phase = snapshot_phase
        self.n_chains = n_chains
        self.checkpoint_path = checkpoint_path
        self.checkpoint_every = checkpoint_every
        self.checkpoint_minutes = checkpoint_minutes
        self.tol = tol

    # ------------------------------------------------------------------ validation
    def _validate_X(self, X, reset):
        if is_dask_array(X):
            # the sampler holds X in memory: computed whole, CSR chunks as a CSR matrix
            # (numpy would wrap the computed matrix in an array of one object)
            X = X.compute()
            if hasattr(X, "to_scipy_sparse"):  # chunks of pydata/sparse
                X = X.to_scipy_sparse()
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
        if largest > LARGEST_VALUE:
            raise ValueError(
                f"X holds values up to {largest:.3g}; CoGAPS squares residuals scaled by the "
                f"uncertainty, which overflows for values above {LARGEST_VALUE:g}. Rescale "
                "X (and any uncertainty) by the same factor first, e.g. X / X.max()."
            )
        if sparse.issparse(X):
            return X
        return np.ascontiguousarray(X)

    def _resolve_uncertainty(self, uncertainty):
        """What transform and score use: the fitted named model when given None."""
        if uncertainty is not None:
            return uncertainty
        model = getattr(self, "uncertainty_model_", "relative")
        return "relative" if model == "array" else model

    # ------------------------------------------------------------------ the fitting loop's hooks
    def _warm_start_mismatch(self, problem):
        return warm_start_mismatch(self, problem.X, problem.data, problem.fixed,
                                   problem.likelihood)  # fmt: skip

    def _chain_state(self, sampler, sampling, problem):
        plan = snapshot_plan(sampling, getattr(self, "n_snapshots", 0),
                             getattr(self, "snapshot_phase", "sampling"))  # fmt: skip
        return ChainState(sampler, sampling, self.max_iter, problem.n_threads,
                          problem.pass_threads, snapshots=plan,
                          rescale=problem.fixed[0] is None,
                          anneal=getattr(self, "init", "empty") != "nmf")  # fmt: skip

    def _continue(self, problem):
        sampler = restore_sampler(self, problem.data, problem.n_threads)
        return self._chain_state(sampler, [True] * self.max_iter, problem)

    def _initialise(self, problem, rng):
        sampler = new_sampler(self, problem.X, problem.data, problem.fixed)
        return self._chain_state(sampler, [False] * self.max_iter + [True] * self.max_iter,
                                 problem)  # fmt: skip

    def _resume(self, problem, payload, checked=True):
        """The chain and the loop's resume point that a checkpoint holds (``checked=False``:
        a payload this fit made itself, between rounds of several chains)."""
        if checked:
            check_checkpoint(self, payload)
        self.lambda_W_, self.lambda_H_ = payload["prior_rates"]
        self._transform_seed = payload["transform_seed"]
        saved = payload["sampler"]
        sampler = make_sampler(self, problem.data, saved["W"], saved["Ht"], state=saved,
                               n_threads=problem.n_threads, fixed=saved.get("fixed"))  # fmt: skip
        state = self._chain_state(sampler, [False] * self.max_iter + [True] * self.max_iter,
                                  problem)  # fmt: skip
        state.chisq = payload["chisq"]
        state.atoms = list(payload["atoms"])
        state.snapshots = list(payload["snapshots"])
        return state, (payload["iteration"], payload["history"], payload["start"])

    def _checkpoint_payload(self, state, iteration, history, start):
        return {
            "key": getattr(self, "_checkpoint_key", None),
            "path": None if self.checkpoint_path is None else os.fspath(self.checkpoint_path),
            "iteration": iteration,
            "history": list(history),
            "start": start,
            "sampler": state.sampler.get_state(residual=True),
            "chisq": state.chisq,
            "atoms": list(state.atoms),
            "snapshots": list(state.snapshots),
            "prior_rates": (self.lambda_W_, self.lambda_H_),
            "transform_seed": self._transform_seed,
        }

    def _start_objective(self, state):
        return state.start()

    def _iterate(self, state, iteration):
        return state.iterate(iteration)

    def _snapshot(self, state, iteration):
        # the sampler keeps its complete iterations; an interruption keeps their samples
        return state, iteration

    def _restore(self, snapshot):
        state, iteration = snapshot
        del state.atoms[iteration:]
        state.drop_snapshots_after(iteration)
        return state

    def _progress_extra(self, state):
        return state.progress_extra()

    def _interrupted_advice(self):
        if getattr(self, "_quiet_convergence", False):
            return False  # one of several chains: the fit of all of them reports
        if self.checkpoint_path is not None:
            return (
                f"Fit again with the same data, parameters and checkpoint_path "
                f"({os.fspath(self.checkpoint_path)!r}) to resume from its last checkpoint."
            )
        # a warm start continues with max_iter sampling iterations whatever the phase the
        # chain stopped in: an interrupted calibration is not resumed
        return (
            "Fit again with warm_start=True to continue the chain (max_iter more sampling "
            "iterations from where it stopped; a calibration cut short is not resumed), or "
            "fit again from the start for a complete fit."
        )

    def _unconverged_message(self, run):
        if getattr(self, "_quiet_convergence", False):
            return None  # one of several chains: the diagnostics of all of them decide
        sampling = np.asarray(run.state.sampling[: run.n_iter], dtype=bool)
        return unconverged_message(self, np.asarray(run.history)[sampling])

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
        check_ignored_y(self, y, X, advice=UNCERTAINTY_ADVICE)
        check_side_labels(X, "uncertainty", uncertainty)
        check_side_labels(X, "fixed_components", fixed_components, axes=("column",))
        check_side_labels(X, "fixed_patterns", fixed_patterns, axes=("row",))
        if self.checkpoint_path is None:
            warn_unused_parameters(self, ("checkpoint_every", "checkpoint_minutes"),
                                   "with checkpoint_path", "Set checkpoint_path")  # fmt: skip
        if self.n_snapshots == 0:
            warn_unused_parameters(self, ("snapshot_phase",), "with n_snapshots > 0",
                                   "Set n_snapshots")  # fmt: skip
        self._atom_densities = (
            float(self._parameter("atom_density_W")),
            float(self._parameter("atom_density_H")),
        )
        # the samples' names, by which a single-cell split's explicit_sets may name them
        sample_names = axis_labels(X, "row")
        X = self._validate_X(X, reset=True)
        values = X.data if sparse.issparse(X) else X
        if not np.any(values):
            raise ValueError(
                f"X of shape {X.shape} contains only zeros: CoGAPS has no pattern to find "
                "(its chain would only sample the prior). Remove empty data before fitting."
            )
        name = uncertainty_name(uncertainty)
        if uncertainty is None:
            advise_counts(X)
            advise_scale(X)
        self.uncertainty_model_ = "array" if name is None else name
        if getattr(self, "tol", None) is not None and self.n_chains == 1:
            raise ValueError(
                f"tol={self.tol} ends the phases by the diagnostics of several chains, which "
                "one chain cannot compute. Set n_chains=4 (or 2 or more), or tol=None to run "
                "max_iter iterations in each phase."
            )
        if self.distributed is not None:
            if self.checkpoint_path is not None:
                raise ValueError(
                    "checkpoint_path keeps the state of one chain; a distributed fit runs one "
                    "per set. Set checkpoint_path=None, or fit one set's data with "
                    "distributed=None to checkpoint its chain."
                )
            if fixed_components is not None or fixed_patterns is not None:
                raise ValueError(
                    "A distributed fit holds its consensus fixed itself; fixed_components "
                    "and fixed_patterns need distributed=None."
                )
            if getattr(self, "n_snapshots", 0):
                raise ValueError(
                    "Snapshots are of one chain; a distributed fit runs one per set. Set "
                    "n_snapshots=0, or fit one set's data with distributed=None to see its "
                    "chain."
                )
            if self.n_chains > 1:
                raise ValueError(
                    "A distributed fit runs one chain per set; n_chains is for a fit of all "
                    "the data. Set n_chains=1, or distributed=None."
                )
            clear_chain_attributes(self)
            self._n_calibration_iter = None  # the subsets' chains have their own phases
            for name in ("loadings_snapshots_", "components_snapshots_", "snapshot_iterations_"):
                self.__dict__.pop(name, None)
            fit_distributed(self, X, uncertainty, sample_names)
            self._set_reconstruction_err(X)
            return self
        if self.n_chains > 1:
            if self.warm_start:
                raise ValueError(
                    f"warm_start is for one chain; n_chains={self.n_chains} runs several. "
                    "Set n_chains=1 to use warm_start, or warm_start=False."
                )
            if self.n_snapshots and self.snapshot_phase != "sampling":
                raise ValueError(
                    f"With n_chains={self.n_chains} the snapshots are the chains' draws of "
                    "their sampling phases, which the diagnostics read: snapshot_phase must "
                    f"be 'sampling', not {self.snapshot_phase!r}. Fit one chain "
                    "(n_chains=1) to keep snapshots of its calibration."
                )
            check_single_chain_parameters(self, several_chains=True)
            clear_distributed_attributes(self)
            self.n_components_ = self.n_components
            fixed = {}
            if fixed_components is not None:
                fixed["fixed_components"] = fixed_components
            if fixed_patterns is not None:
                fixed["fixed_patterns"] = fixed_patterns
            checkpoint = self._taken_checkpoint()
            try:
                fit_chains(self, X, uncertainty, fixed, checkpoint)
                self._set_reconstruction_err(X)
                if checkpoint is not None and self._chains_complete:
                    checkpoint.remove()  # complete, results set: nothing to resume
            finally:
                if checkpoint is not None:
                    checkpoint.release()
            return self
        check_single_chain_parameters(self)
        clear_distributed_attributes(self)
        clear_chain_attributes(self)
        self.n_components_ = self.n_components
        fixed = validate_fixed(X, self.n_components, fixed_components, fixed_patterns)
        # the chain gets the cap and decides per batch; a pass over the data, by its size
        n_threads = effective_n_threads()
        pass_threads = kernel_threads(2 * self.n_components * n_entries(X), n_threads)
        data = model_data(self, X, uncertainty)
        checkpoint = self._taken_checkpoint()
        try:
            likelihood = None
            if self.warm_start or checkpoint is not None:
                likelihood = likelihood_digest(X, name, uncertainty)
            problem = _Problem(X, data, fixed, likelihood, n_threads, pass_threads)
            state = self._warm_state(problem)
            continued = state is not None
            resume = None
            if continued:
                if checkpoint is not None:
                    raise ValueError(
                        "checkpoint_path keeps the state of a new chain; this fit continues the "
                        "previous one (warm_start=True). Pickle the fitted estimator to keep a "
                        "continued chain, or set checkpoint_path=None."
                    )
                history, atoms = self.objective_history_, self.n_atoms_history_
            else:
                payload = None
                if checkpoint is not None:
                    self._checkpoint_key = checkpoint_key(self, problem)
                    payload = checkpoint.read()
                self._resumed_at = 0
                if payload is None:
                    state = self._initialise(problem, None)
                else:
                    try:
                        state, resume = self._resume(problem, payload)
                        # the iterations this call did not run (the command line's timing)
                        self._resumed_at = int(resume[0])
                        if self.verbose:
                            print(
                                f"CoGAPS: resumed from the checkpoint "
                                f"{os.fspath(self.checkpoint_path)!r} after iteration "
                                f"{self._resumed_at:,}",
                                flush=True,
                            )
                    except KeyError as exc:
                        raise ValueError(
                            f"The checkpoint file {os.fspath(self.checkpoint_path)!r} lacks "
                            f"the chain's {exc.args[0]!r}: it was not written whole by this "
                            "version of the package. Delete it, or pass another checkpoint "
                            "file, to start the fit from the beginning."
                        ) from None
                history, atoms = np.empty(0), np.empty((0, 2), dtype=np.int64)
            run = self._run(state, len(state.sampling), resume=resume, checkpoint=checkpoint)
            self._end_run(run, total=len(state.sampling))
            sampler = state.sampler
            set_posterior(
                self,
                sampler,
                data,
                np.concatenate([history, np.asarray(run.history, dtype=np.float64)]),
                np.concatenate([atoms, state.atom_history()]),
                pass_threads,
                fixed,
            )
            cast_attributes(self, X.dtype)
            previous = None
            if continued and hasattr(self, "snapshot_iterations_"):
                previous = (self.loadings_snapshots_, self.components_snapshots_,
                            self.snapshot_iterations_)  # fmt: skip
            set_snapshots(self, state, len(history), previous, *X.shape, X.dtype)
            # the full state (atoms, generator, sums) only when a later fit may continue it:
            # with warm_start, or after an interruption (the warning advises continuing)
            self._sampler_state = None
            if self.warm_start or run.interrupted:
                if likelihood is None:
                    likelihood = likelihood_digest(X, name, uncertainty)
                self._sampler_state = {
                    **sampler.get_state(),
                    "solver": self._parameter("solver"),
                    "likelihood": likelihood,
                    "atom_densities": tuple(self._atom_densities),
                    "gibbs_mass_caps": gibbs_mass_caps(self),
                }
            if not continued:
                # the chain's calibration phase: its first iterations, whatever later warm
                # starts append (they sample only)
                self._n_calibration_iter = min(run.n_iter, self.max_iter)
            check_finite_fit(self)
            self._set_reconstruction_err(X)
            if checkpoint is not None and not run.interrupted:
                # the fit is complete and its results are set: nothing to resume (a kill
                # before this line resumes from the file)
                checkpoint.remove()
        finally:
            if checkpoint is not None:
                checkpoint.release()
        return self

    def _taken_checkpoint(self):
        """The fit's :class:`Checkpoint`, taken for this fit alone, or None without
        ``checkpoint_path``: another fit of the file (a parallel search's, with the same
        parameters) would resume from this one's state or refuse it midway."""
        if self.checkpoint_path is None:
            return None
        checkpoint = Checkpoint(self.checkpoint_path, self.checkpoint_every,
                                self.checkpoint_minutes)  # fmt: skip
        checkpoint.acquire()
        return checkpoint

    def _chain_segment(self, X, uncertainty, fixed, payload, stop, calibration_end):
        """One round of a fit whose chains stop by their diagnostics (``tol``): this chain
        from ``payload`` (None: a new chain) to iteration ``stop``, its calibration ending
        after ``calibration_end`` iterations (None: not before ``stop``).

        Returns the payload after ``stop`` (as a checkpoint holds it), and True when Ctrl-C
        ended the round early. A round that ends the fit (``stop`` the last iteration run)
        also sets the fitted attributes, as :meth:`fit` does."""
        self._atom_densities = (
            float(self._parameter("atom_density_W")),
            float(self._parameter("atom_density_H")),
        )
        X = self._validate_X(X, reset=True)
        name = uncertainty_name(uncertainty)
        self.uncertainty_model_ = "array" if name is None else name
        fixed = validate_fixed(X, self.n_components, fixed.get("fixed_components"),
                               fixed.get("fixed_patterns"))  # fmt: skip
        n_threads = effective_n_threads()
        pass_threads = kernel_threads(2 * self.n_components * n_entries(X), n_threads)
        data = model_data(self, X, uncertainty)
        problem = _Problem(X, data, fixed, None, n_threads, pass_threads)
        if payload is None:
            state, resume = self._initialise(problem, None), None
        else:
            state, resume = self._resume(problem, payload, checked=False)
        calibration = stop if calibration_end is None else calibration_end
        # the phases decided so far; the sampling snapshots at the spacing of a full-length
        # sampling phase, counted from the end of the calibration
        state.sampling = [False] * calibration + [True] * (stop - calibration)
        if calibration_end is not None:
            state.total = calibration_end + self.max_iter
        full = [False] * calibration + [True] * self.max_iter
        state.snapshot_at = snapshot_plan(full, self.n_snapshots, "sampling")
        run = self._run(state, stop, resume=resume)
        payload = self._checkpoint_payload(state, run.n_iter, run.history, run.start)
        if calibration_end is not None and not run.interrupted:
            self._end_run(run, total=stop)
            set_posterior(self, state.sampler, data, np.asarray(run.history, dtype=np.float64),
                          state.atom_history(), pass_threads, fixed)  # fmt: skip
            cast_attributes(self, X.dtype)
            set_snapshots(self, state, 0, None, *X.shape, X.dtype)
            self._sampler_state = None
            self._n_calibration_iter = calibration_end
            check_finite_fit(self)
        return payload, run.interrupted

    def to_inference_data(self):
        """The chains' draws as an ArviZ ``InferenceData`` (needs ``arviz``).

        ``posterior`` holds the draws of ``loadings`` (chain, draw, sample, component) and
        ``components`` (chain, draw, component, feature) that the diagnostics read: those
        of every chain of a fit with ``n_chains > 1``, or a single chain's sampling-phase
        snapshots (``n_snapshots > 0``). ``sample_stats`` holds the chi-square of the same
        states (``chisq``), and the coordinate ``draw`` is their iteration (as
        ``snapshot_iterations_``). ArviZ's ``summary``, ``plot_trace`` and ``rhat`` then
        work on it. The chi-square of every iteration, which ``rhat_["chisq"]`` reads, is
        in ``chain_objective_histories_`` (``objective_history_`` for one chain).

        Returns
        -------
        idata : arviz.InferenceData
            The groups ``posterior`` and ``sample_stats``, with the coordinates ``sample``,
            ``component`` and ``feature`` (the feature names when X had them).
        """
        check_is_fitted(self)
        return inference_data(self)

    @property
    def _reversible(self):
        # estimators pickled before the option existed use CoGAPS's moves
        return self._parameter("solver") == "reversible"

    def fit_transform(
        self, X, y=None, *, uncertainty=None, fixed_components=None, fixed_patterns=None
    ):
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
        self.fit(
            X,
            y,
            uncertainty=uncertainty,
            fixed_components=fixed_components,
            fixed_patterns=fixed_patterns,
        )
        return self.transform(X, uncertainty=uncertainty)

    def transform(self, X, *, uncertainty=None):
        """Sample the patterns of new samples with the amplitudes held fixed.

        Each row gets its own chain (CoGAPS's fixed-matrix mode: ``max_iter`` calibration
        and ``max_iter`` sampling iterations), seeded from a seed drawn from ``random_state``
        at ``fit`` (``set_params(random_state=...)`` afterwards does not change it) and the
        row's values, so the result for a row does not depend on the other rows or on the
        number of threads. A row whose values change, even in their last bit, gets another
        chain: its patterns move by the chain's Monte Carlo error.

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
            ``max(0.1 * X, 0.1)``, after a fit with an array, with a warning: in a
            ``Pipeline``, route the array to ``transform`` with
            ``sklearn.set_config(enable_metadata_routing=True)`` and
            ``set_fit_request(uncertainty=True).set_transform_request(uncertainty=True)``).

        Returns
        -------
        W : ndarray of shape (n_samples, n_components)
            Posterior mean of the patterns of each sample, float32 for float32 X (whose
            rows are sampled with a float32 residual, as in ``fit``), float64 otherwise.
        """
        check_is_fitted(self)
        check_side_labels(X, "uncertainty", uncertainty)
        if uncertainty is None and getattr(self, "uncertainty_model_", None) == "array":
            warn(
                "CoGAPS was fitted with an uncertainty array, but transform got no "
                "uncertainty: it samples the patterns of X under the 'relative' model "
                "max(0.1 * X, 0.1), not the likelihood of the fit. Pass "
                "transform(X, uncertainty=U); in a Pipeline, route it: "
                + _ROUTE_UNCERTAINTY.replace("score", "transform")
                + ".",
                UserWarning,
            )
        _check_fitted_genes_present(self, X)
        X = self._validate_X(X, reset=False)
        uncertainty = self._resolve_uncertainty(uncertainty)
        check_uncertainty_shape(uncertainty, X)
        name = uncertainty_name(uncertainty)
        if name is not None and (self.sparse_optimization or sparse.issparse(X)):
            return sample_sparse_patterns(self, X, name)
        blocks = [sample_patterns(self, x, sigma)[0] for x, sigma in row_chunks(X, uncertainty)]
        W = np.concatenate(blocks) if blocks else np.empty((0, self.n_components))
        return as_dtype(W, X.dtype)

    @peer_arguments({"lp": ("R CoGAPS's", "weights")}, example="{name}({new}=...)")
    def pattern_markers(self, threshold="all", *, axis="features", weights=None):
        """The features (or samples) that mark each pattern (CoGAPS's ``patternMarkers``).

        Parameters
        ----------
        threshold : {"all", "cut"}, default="all"
            ``"all"`` gives each feature to the pattern where it ranks best; ``"cut"`` keeps,
            for each pattern, the features in rank order up to the first one that ranks
            better in another pattern. See :func:`sklearn_cogaps.pattern_markers`.
        axis : {"features", "samples"}, default="features"
            What to rank: the features by their amplitudes (R's ``axis = 1``, the genes) or
            the samples by their patterns (R's ``axis = 2``).
        weights : array-like of shape (n_components,), default=None
            One profile over the patterns to rank against instead of each pattern (R's
            ``lp``), e.g. ``[1, 1, 0]`` for what patterns 1 and 2 share.

        Returns
        -------
        result : PatternMarkers
            A named tuple that unpacks as ``markers, ranks, scores``: for each pattern (or
            the profile of ``weights``), its markers best first (their names when ``X`` had
            feature names and ``axis="features"``, else their indices); the rank of each
            feature or sample for each pattern (1 = most specific), of shape
            (n_features or n_samples, n_components or 1); and the distances they come from.
        """
        check_is_fitted(self)
        if axis not in ("features", "samples"):
            r_axis = {1: "features", 2: "samples"}.get(axis) if type(axis) is int else None
            raise ValueError(
                f"axis must be 'features' or 'samples' (R's axis = 1 or 2); got {axis!r}."
                + (f" Write axis={r_axis!r}." if r_axis else "")
            )
        if axis == "features":
            amplitudes, patterns = self.components_.T, self.loadings_
        else:
            amplitudes, patterns = self.loadings_, self.components_.T
        result = pattern_markers(amplitudes, patterns, threshold, weights=weights)
        names = getattr(self, "feature_names_in_", None)
        if names is not None and axis == "features":
            result = result._replace(markers=[names[m] for m in result.markers])
        return result

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

    def score(self, X, y=None, *, uncertainty=None):
        """Held-out log-likelihood of X per sample, for choosing ``n_components``.

        Each row's entries are split into ``5`` folds at random, reproducibly (the split and
        the chains are seeded as in :meth:`transform`, from the fit's seed and the row's
        values, so a row's score does not depend on the other rows). For each fold, the
        row's patterns are sampled as in :meth:`transform` (amplitudes fixed) from the other
        folds only, and the entries of the fold are scored under the Gaussian likelihood of
        the posterior mean prediction ``W @ components_``. Every entry is scored once, by a
        fit that did not see it, so extra components that only fit noise lower the score:
        unlike the likelihood of the entries the patterns were fitted to, this criterion has
        a maximum near the number of patterns the data support, and ``GridSearchCV`` over
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
        check_ignored_y(
            self, y, X, method="score", advice=UNCERTAINTY_ADVICE.replace("fit", "score")
        )
        check_side_labels(X, "uncertainty", uncertainty)
        if uncertainty is None and getattr(self, "uncertainty_model_", None) == "array":
            warn(
                "CoGAPS was fitted with an uncertainty array, but score got no uncertainty: "
                "it scores X under the 'relative' model max(0.1 * X, 0.1), not the "
                "likelihood of the fit, so models compared this way are not compared on "
                "your uncertainty. Pass score(X, uncertainty=U); in GridSearchCV or "
                "cross_validate, route it: " + _ROUTE_UNCERTAINTY + ".",
                UserWarning,
            )
        X = self._validate_X(X, reset=False)
        uncertainty = self._resolve_uncertainty(uncertainty)
        check_uncertainty_shape(uncertainty, X)
        if X.shape[0] == 0:
            raise ValueError("score needs at least one sample; got X of shape (0, n_features).")
        warn_few_entries(X.shape[1], self.components_.shape[0])
        total = 0.0
        for x, sigma in row_chunks(X, uncertainty):
            total += float(np.sum(held_out_loglik(self, x, sigma)))
        return total / X.shape[0]

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        # float32 data are fitted and transformed in float32 (see the class docstring)
        tags.transformer_tags.preserves_dtype = ["float64", "float32"]
        return tags
