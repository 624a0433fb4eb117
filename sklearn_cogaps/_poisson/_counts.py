"""What the Poisson factorisations share: the advice on non-count input, the largest total
they can fit, and their start: the Kullback-Leibler NMF (the maximum-likelihood Poisson
factorisation) from NNDSVDa, on the VBEM's compiled pass."""

import functools
import numbers
import reprlib

import numpy as np
from scipy import sparse
from scipy.special import gammaln
from sklearn.utils.validation import check_array, check_is_fitted

from .._utils._anndata import is_anndata
from .._utils._blocks import RowBlocks, current_client, is_out_of_core
from .._utils._openmp_helpers import kernel_threads
from .._utils._params import warn_unused_parameters
from .._utils._recommend import IMPLICIT_ATTRIBUTES, RecommenderMixin
from .._utils._seeding import check_seed
from .._utils._validation import (
    check_side_labels,
    data_dtype,
    out_of_core_features,
    validate_input,
)
from .._utils._warnings import warn
from . import _hpmf_fast
from ._block_counts import BlockCounts
from ._dask_counts import DaskCounts
from ._hpmf_updates import _Counts, _pass

__all__ = [
    "COUNTS_ADVICE",
    "MISSING_COUNTS_ADVICE",
    "CountModelMixin",
    "HeldOut",
    "check_total",
    "has_fractions",
    "held_out",
    "kl_nmf",
    "log_of_factor",
    "loglik",
]

# Power iterations of the start's randomised SVD: on make_sc (20000 x 5000, K = 10) a fit
# of 10 iterations from 2 scores poisson_loglik -24,082,540 against -24,082,269 from
# scikit-learn's 7, in 0.29 s instead of 0.65 s (doc/hpmf.rst, "The start").
_SVD_POWER_ITERATIONS = 2

#: What a count model's error on negative input adds (``_negative_input_advice``).
COUNTS_ADVICE = (
    "The model is for counts: pass the raw counts, before normalising, centring or "
    "log-transforming them."
)

#: What a count model's error on a masked array says (``_masked_advice``; ``{X}`` is the
#: input's name).
MASKED_COUNTS_ADVICE = (
    "A Poisson factorisation has no missing counts: fill the masked entries with 0 where "
    "they stand for no count, {X}.filled(0), or drop the rows or columns that have them."
)

#: What a count model's error on NaN says (``_missing_value_advice``).
MISSING_COUNTS_ADVICE = (
    "A Poisson factorisation has no missing counts: every entry is a count, and a sparse "
    "matrix leaves out zeros, not unknowns. Replace NaN by 0 where it stands for no count "
    "(np.nan_to_num(X)), or drop the rows or columns that have them."
)

#: Largest total count: the variational updates form products of two count-sized numbers
#: (a count times a rate of the same size), which overflow float64 above about 1e300.
MAX_TOTAL = 1e150


def check_total(data, name, input_name="X"):
    """Refuse counts whose total would overflow the updates of a Poisson factorisation.

    Parameters
    ----------
    data : ndarray
        The counts (a dense array, or a sparse matrix's ``data``).
    name : str
        The estimator's name, for the message.
    input_name : str, default="X"
        The argument that holds the counts, for the message.
    """
    total = float(np.sum(data, dtype=np.float64))
    if not total <= MAX_TOTAL:
        raise ValueError(
            f"{input_name} sums to {total:.3g}; {name}'s variational updates multiply "
            "counts by rates of the same size, which overflows in float64 above a total of "
            f"{MAX_TOTAL:g}. "
            f"Rescale {input_name} (the model is for counts)."
        )


def has_fractions(data, chunk=2**20):
    """Whether counts hold a non-integer value, read in chunks: no temporary the size of
    the data (a sparse fit's memory above its input stays that of the model's copies)."""
    flat = np.ravel(data)
    return any(
        np.any(flat[a : a + chunk] != np.floor(flat[a : a + chunk]))
        for a in range(0, flat.size, chunk)
    )


def kl_nmf(X, n_components, max_iter, random_state, random_start=False):
    """Multiplicative updates of the Kullback-Leibler NMF, the start of both models.

    Lee & Seung's updates (2001), as scikit-learn's ``NMF(solver="mu",
    beta_loss="kullback-leibler")`` makes them, from scikit-learn's start (NNDSVDa, or
    random), but each half-update is one compiled pass over the stored counts: the pass of
    the VBEM with the logs of the factors for E[ln], whose expected counts
    ``sum_j x_ij W_ik H_jk / (WH)_ij`` are the updates' numerators. scikit-learn's solver
    forms ``WH`` at the stored entries in numpy, one thread, and evaluates the divergence
    for its stopping test: on 7 million counts, five iterations took 10 s there and take 0.5 s
    here (``doc/hpmf.rst``, "The start").

    Parameters
    ----------
    X : {ndarray, sparse matrix} of shape (n_samples, n_features), or _Counts
        The counts (or the VBEM's copies of them).
    n_components : int
        Number of components.
    max_iter : int
        Number of updates of both factors (a start needs few; there is no stopping test).
    random_state : int
        Seed of the start: NNDSVDa's randomised SVD, or, when ``n_components`` exceeds
        ``min(n_samples, n_features)`` (where NNDSVDa has no start), scikit-learn's random
        start, as ``NMF(init=None)`` chooses.
    random_start : bool, default=False
        Start at random whatever ``n_components``: NNDSVDa is deterministic (the seed only
        drives its randomised SVD to the same subspace), so the second and later of several
        starts (``n_init``) are random ones.

    Returns
    -------
    W : ndarray of shape (n_samples, n_components)
    H : ndarray of shape (n_features, n_components)
        The factors, ``X ~ W @ H.T``.
    """
    counts = X if isinstance(X, (_Counts, BlockCounts, DaskCounts)) else _Counts(X)
    n_threads = kernel_threads(2 * n_components * counts.nnz)
    W, H = _nmf_start(counts, n_components, random_state, n_threads, random_start)
    for _ in range(max_iter):
        W = _pass(counts.r, log_of_factor(W), log_of_factor(H), n_threads, want_log=False)[0]
        W /= H.sum(axis=0)
        H = _pass(counts.c, log_of_factor(H), log_of_factor(W), n_threads, want_log=False)[0]
        H /= W.sum(axis=0)
    return W, H


def _refuse_out_of_core(X, method):
    """Refuse an out-of-core X in a method that reads its counts in memory, with how to load
    the rows (where it would otherwise fail inside numpy, or load the whole source)."""
    if is_out_of_core(X):
        raise ValueError(
            f"{method} reads the counts in memory; X is read by blocks ({type(X).__name__}). "
            "Load the rows to use: adata[rows].to_memory() for a backed AnnData, "
            "X[rows].compute() for a Dask array, X[rows] for an HDF5 or zarr dataset."
        )


def _nmf_start(counts, n_components, random_state, n_threads, random_start=False, eps=1e-6):
    """scikit-learn's start of NMF with ``init=None``: NNDSVDa, or random beyond
    ``min(n_samples, n_features)`` components, without a copy of X.

    NNDSVD (Boutsidis & Gallopoulos 2008, "SVD based initialization: a head start for
    nonnegative matrix factorization", section 3): each singular pair after the first is
    replaced by the larger, in the product of its norms, of its positive and negative parts,
    entries below ``eps`` set to 0; NNDSVDa then fills the zeros with the mean of X.
    scikit-learn's function takes that mean by ``X.mean()``, which copies a sparse X: here
    it is the sum over the number of entries. The singular pairs come from
    :func:`_randomized_svd`.

    Returns
    -------
    W : ndarray of shape (n_samples, n_components)
    H : ndarray of shape (n_features, n_components)
    """
    n, p = counts.shape
    mean = float(counts.row_sums.sum()) / (n * p)
    if random_start or n_components > min(n, p):
        rng = check_seed(random_state)
        scale = np.sqrt(mean / n_components)
        H = np.abs(scale * rng.standard_normal(size=(n_components, p)))
        W = np.abs(scale * rng.standard_normal(size=(n, n_components)))
        return W, np.ascontiguousarray(H.T)
    U, S, Vt = _randomized_svd(counts, n_components, random_state, n_threads)
    W, H = np.zeros_like(U), np.zeros_like(Vt)
    # the first pair of a non-negative matrix is non-negative up to its sign
    W[:, 0] = np.sqrt(S[0]) * np.abs(U[:, 0])
    H[0, :] = np.sqrt(S[0]) * np.abs(Vt[0, :])
    for j in range(1, n_components):
        x, y = U[:, j], Vt[j, :]
        x_p, y_p = np.maximum(x, 0), np.maximum(y, 0)
        x_n, y_n = np.abs(np.minimum(x, 0)), np.abs(np.minimum(y, 0))
        x_p_nrm, y_p_nrm = np.linalg.norm(x_p), np.linalg.norm(y_p)
        x_n_nrm, y_n_nrm = np.linalg.norm(x_n), np.linalg.norm(y_n)
        m_p, m_n = x_p_nrm * y_p_nrm, x_n_nrm * y_n_nrm
        if m_p == m_n == 0:
            continue  # no part of one sign on both sides: the column is filled below
        if m_p > m_n:
            u, v, sigma = x_p / x_p_nrm, y_p / y_p_nrm, m_p
        else:
            u, v, sigma = x_n / x_n_nrm, y_n / y_n_nrm, m_n
        lbd = np.sqrt(S[j] * sigma)
        W[:, j] = lbd * u
        H[j, :] = lbd * v
    W[W < eps] = 0
    H[H < eps] = 0
    W[W == 0] = mean
    H[H == 0] = mean
    return W, np.ascontiguousarray(H.T)


def _randomized_svd(counts, n_components, random_state, n_threads):
    """The leading singular pairs of the counts by the randomised range finder.

    Halko, Martinsson & Tropp (2011), algorithms 4.4 and 5.1, as scikit-learn's
    ``randomized_svd`` (10 oversamples, Gaussian test matrix from ``random_state``), with
    each product by X or X' one compiled pass over the stored counts on ``n_threads``
    threads (its CSR and CSC copies), orthonormalised by QR after every product, and
    ``_SVD_POWER_ITERATIONS`` power iterations instead of scikit-learn's 7: NNDSVDa needs
    the signs of the leading vectors, not their digits (``doc/hpmf.rst``, "The start").

    Returns
    -------
    U : ndarray of shape (n_samples, n_components)
    S : ndarray of shape (n_components,)
    Vt : ndarray of shape (n_components, n_features)
    """
    n, p = counts.shape
    rng = check_seed(random_state)
    Q = rng.normal(size=(p, min(n_components + 10, n, p)))

    def product(compressed, A, n_out):
        A = np.ascontiguousarray(A)
        if not isinstance(compressed, tuple):  # a pass over blocks of rows
            return compressed.product(A, n_threads)
        out = np.empty((n_out, A.shape[1]))
        _hpmf_fast.sparse_dense_product(*compressed, A, out, n_threads)
        return out

    for _ in range(_SVD_POWER_ITERATIONS):
        Q = np.linalg.qr(product(counts.r, Q, n))[0]
        Q = np.linalg.qr(product(counts.c, Q, p))[0]
    Q = np.linalg.qr(product(counts.r, Q, n))[0]
    U, S, Vt = np.linalg.svd(product(counts.c, Q, p).T, full_matrices=False)
    return (Q @ U)[:, :n_components], S[:n_components], Vt[:n_components]


def log_of_factor(factor):
    """The log of a factor for the pass, a zero as the log of the smallest normal number
    (a finite log keeps the pass's max-shift defined for rows without counts)."""
    return np.ascontiguousarray(np.log(np.maximum(factor, np.finfo(np.float64).tiny)))


def held_out(X):
    """Counts to score, as :func:`loglik` reads them: a canonical CSR without stored zeros."""
    counts = sparse.csr_matrix(X, dtype=np.float64, copy=True)
    counts.sum_duplicates()
    counts.eliminate_zeros()
    return counts


# Stored entries whose factors loglik gathers at a time: its temporaries are this many rows
# of W and columns of H (16 MB at K = 10), not the held-out counts times K.
_ENTRIES_A_STEP = 2**17


def _means_at_entries(W, H, counts):
    """``(W @ H)_ij`` at the stored entries of the CSR ``counts``, in their order, gathered a
    step of rows at a time: each entry's sum over the components is the same whatever the
    steps."""
    out = np.empty(counts.nnz)
    bounds = np.searchsorted(counts.indptr, np.arange(0, counts.nnz, _ENTRIES_A_STEP))
    starts = np.unique(np.append(np.minimum(bounds, counts.shape[0]), counts.shape[0]))
    for a, b in zip(starts[:-1], starts[1:]):
        lo, hi = counts.indptr[a], counts.indptr[b]
        rows = np.repeat(np.arange(a, b), np.diff(counts.indptr[a : b + 1]))
        out[lo:hi] = np.einsum("pk,kp->p", W[rows], H[:, counts.indices[lo:hi]])
    return out


def loglik(W, H, counts, average):
    """Poisson log-likelihood of ``counts`` (from :func:`held_out`) under the means ``W @ H``:
    O(nnz K) for the counts' terms, the means' total from the factors' sums."""
    mean_at = _means_at_entries(W, H, counts)
    x = counts.data
    with np.errstate(divide="ignore"):
        terms = x * np.log(mean_at) - gammaln(x + 1.0)
    if average == "nonzero":
        if x.size == 0:
            raise ValueError("X has no non-zero count to average over.")
        return float(np.mean(terms - mean_at))
    total = float(np.sum(terms) - W.sum(axis=0) @ H.sum(axis=1))
    return total / (counts.shape[0] * counts.shape[1]) if average == "entry" else total


class HeldOut:
    """The held-out counts of early stopping (from :func:`held_out`), scored at their depth.

    Held-out counts made by thinning (``thin_counts(X, f)``) are Poisson of means ``f mu``
    beside the training counts' ``(1 - f) mu``: the fit's means estimate the training
    counts', and scored as the held-out counts' means they are ``(1 - f) / f`` times too
    large, which rewards the iterations whose means are smallest (with ``f = 0.2``, the
    first iteration was kept). Their means are taken as the fit's times ``depth``, the
    held-out counts' total over the training counts' (``f / (1 - f)`` for thinning, 1 for
    a replicate of the same depth)."""

    def __init__(self, counts, training_row_sums):
        self.counts = counts
        self.depth = float(counts.data.sum()) / float(np.sum(training_row_sums))

    def score(self, W, H):
        """The held-out counts' Poisson log-likelihood per entry under ``depth * W @ H``."""
        return loglik(self.depth * W, H, self.counts, "entry")


def warn_fit_only_parameters(estimator, X_val):
    """Warn in ``fit`` about the parameters of the Poisson models that it does not read:
    ``n_iter_no_change`` without held-out counts, ``total_samples`` (partial_fit's)."""
    if X_val is None:
        warn_unused_parameters(
            estimator, ("n_iter_no_change",), "with held-out counts", "Pass fit(X, X_val=...)"
        )
    if getattr(estimator, "warm_start", False) and "_svi_state" in estimator.__dict__:
        return  # fit continuing a stream of partial_fit, which read it (the documented route)
    warn_unused_parameters(
        estimator, ("total_samples",), "by partial_fit", "Call partial_fit on batches of rows"
    )


#: hpfrec's arguments of ``fit``: its held-out triplets (``val_set``) are X_val's counts.
_HPFREC_FIT_ARGUMENTS = {"val_set": ("hpfrec's", "X_val")}

#: hpfrec's methods, and what to call instead.
HPFREC_METHODS = {
    "topN": ("hpfrec", "recommend(X_user_rows, n=..., users=user_indices)"),
    "topN_cold": ("hpfrec", "recommend(X_new_rows, n=...) (new users by default)"),
    "predict": ("hpfrec", "score_pairs(users, items) for the expected counts of pairs"),
    "eval_llk": (
        "hpfrec",
        "poisson_loglik(X_held, users=np.arange(X_held.shape[0]), average='nonzero') * "
        "X_held.nnz, with X_held = triplets_to_matrix(..., user_labels=users, "
        "item_labels=items)[0], whose row i is training row i (hpfrec sums over the given "
        "triplets only; average=None sums every entry of their rows)",
    ),
    "mean_negative_pois_llh": (
        "scHPF",
        "-poisson_loglik(X, users=np.arange(X.shape[0]), average='nonzero') for the training "
        "cells (their fitted loadings, as scHPF's); without users the rows are refitted by "
        "transform, as for new cells",
    ),
    "elbo": ("R ebpmf", "objective_history_ (the trace) or lower_bound_ (the last)"),
    "cell_score": ("scHPF", "loading_scores() (or loading_scores(X_new) for new cells)"),
    "project": ("scHPF", "transform(X_new) (the loadings of new cells, the factors fixed)"),
    "gene_score": ("scHPF", "component_scores().T (genes x factors, as scHPF's)"),
    "predict_factors": ("hpfrec", "transform(X_new_rows) (the loadings of new users)"),
    "add_user": ("hpfrec", "transform(X_new_rows) (new users' loadings, the factors fixed)"),
    "Theta": ("hpfrec", "loadings_ (the users' factors, n_users x K)"),
    "Beta": ("hpfrec", "components_.T (the items' factors, n_items x K)"),
    **IMPLICIT_ATTRIBUTES,
}


def _check_block(estimator, block, first_row=0):
    """Refuse a block of out-of-core counts (whose first row is ``first_row`` of the whole
    data) as ``fit`` refuses X; whether it has fractions."""
    validate_input(estimator, block, reset=False, check=check_array, accept_sparse="csr",
                   dtype=np.float64, ensure_non_negative=True, input_name="X",
                   row_offset=first_row)  # fmt: skip
    return has_fractions(block.data)


def _source_dtype(X):
    """float32 for an out-of-core source of float32 values, else float64 (the group of a
    sparse matrix in a file has the dtype of its ``data``)."""
    source = getattr(X, "X", X) if is_anndata(X) else X
    dtype = getattr(source, "dtype", None)
    if dtype is None and hasattr(source, "keys") and "data" in source:
        dtype = getattr(source["data"], "dtype", None)
    return np.float32 if dtype == np.float32 else np.float64


#: hpfrec's and scHPF's names for what both Poisson models set the same way, and what to
#: write instead.
PEER_RUN_PARAMETERS = {
    "k": ("hpfrec", "n_components=K"),
    "nfactors": ("scHPF", "n_components=K"),
    "ntrials": ("scHPF", "n_init=N (the best of N starts by the final ELBO)"),
    "random_seed": ("hpfrec", "random_state=seed"),
    "stop_thr": ("hpfrec", "tol=... (on the relative change of the ELBO)"),
    "check_every": (
        "hpfrec",
        "nothing: the ELBO is computed and tested against tol after every iteration "
        "(verbose=1 prints it)",
    ),
    "reindex": (
        "hpfrec",
        "nothing: triplets_to_matrix(df) maps the ids to rows and columns and returns "
        "their labels, and label_indices(labels, ids) maps ids back",
    ),
    "epsilon": ("scHPF", "tol=... (on the relative change of the ELBO)"),
    "stop_crit": (
        "hpfrec",
        "fit(X, X_val=held_out_counts) for 'val-llk' (n_iter_no_change=N), tol for 'train-llk'",
    ),
    "ncores": ("hpfrec", "threadpoolctl.threadpool_limits(n) around fit, or OMP_NUM_THREADS"),
    "users_per_batch": (
        "hpfrec",
        "partial_fit(X[rows]) on each batch of rows, with total_samples=n_rows",
    ),
    "items_per_batch": (
        "hpfrec",
        "partial_fit on batches of rows (transpose X to batch its columns)",
    ),
    "step_size": ("hpfrec", "step_exponent=kappa (steps (t + 2) ** -kappa)"),
    "nusers": ("hpfrec", "total_samples=nusers (the rows partial_fit's batches come from)"),
    "nitems": ("hpfrec", "nothing: the columns of X are the items"),
    "factors": ("implicit", "n_components=factors"),
    "iterations": ("implicit", "max_iter=iterations"),
    "regularization": (
        "implicit",
        "nothing: the priors regularise the factors and are learned from the data "
        "(empirical Bayes); there is no penalty to set",
    ),
    "min_iter": ("scHPF", "nothing: tol stops the fit, max_iter caps it"),
    "better_than_n_ago": (
        "scHPF",
        "nothing: tol stops the fit on the relative change of its ELBO (with "
        "solver='pathwise', of the means of its noisy estimates); for a stop on held-out "
        "counts, fit(X, X_val=...) with n_iter_no_change=N",
    ),
    "dtype": ("scHPF", "nothing: the fit runs in float64, and float32 counts get float32 results"),
}

# hpfrec's arguments of partial_fit, and what to write instead ({model}: the estimator).
_HPFREC_PARTIAL_FIT = {
    "nusers": "{model}(total_samples=nusers)",
    "nitems": "nothing: the columns of X are the items",
    "step_size": "{model}(step_exponent=kappa), for steps (t + 2) ** -kappa",
    "batch_type": "partial_fit on a matrix of whole rows (transpose X to batch its items)",
    "users_in_batch": "nothing: the rows of the batch are its users",
    "items_in_batch": "nothing: the columns of X are the items",
    "new_users": "nothing: every batch may hold new rows",
    "new_items": "fit again: the items are the columns the model was fitted on",
    "random_seed": "{model}(random_state=seed)",
}


def refuse_hpfrec_arguments(model, arguments):
    """Refuse keyword arguments of ``partial_fit``: hpfrec's with what to write instead."""
    for name, value in arguments.items():
        if name in _HPFREC_PARTIAL_FIT:
            advice = _HPFREC_PARTIAL_FIT[name].format(model=type(model).__name__)
            raise TypeError(
                f"partial_fit() has no argument {name!r} (hpfrec's, given "
                f"{reprlib.repr(value)}); write {advice}."
            )
        raise TypeError(f"partial_fit() got an unexpected keyword argument {name!r}")


class CountModelMixin(RecommenderMixin):
    """What the Poisson factorisations offer on their fitted means: the Poisson
    log-likelihood of held-out counts, and recommendations (the score of a pair is its
    expected count, the seen items of a row are its non-zero counts, and new users get
    their loadings from ``transform``)."""

    _peer_methods = HPFREC_METHODS

    #: Whether non-integer counts are warned about (the model extends the Poisson
    #: likelihood to them by Gamma(x + 1)).
    _warns_on_fractions = True

    #: The attributes of the training rows of a fit, which ``partial_fit`` (keeping no rows)
    #: removes.
    _row_attributes = ()

    def _absent_attribute(self, name):
        """Why an attribute of the training rows is absent after ``partial_fit``."""
        if name in self._row_attributes and "_svi_state" in self.__dict__:
            return (
                "the model was last updated by partial_fit, which keeps no training rows. "
                "transform(X) gives the loadings of the rows X; fit(X) keeps its rows."
            )
        return None

    def _check_batch(self, first, n_batch):
        """Refuse a ``partial_fit`` batch the model cannot take: another ``n_components``
        than the fitted model's, or more rows than ``total_samples``."""
        if not first and self.components_.shape[0] != self.n_components:
            raise ValueError(
                f"n_components={self.n_components}, but the model being updated has "
                f"{self.components_.shape[0]} components. partial_fit continues the fitted "
                "model; call fit to start one with the new n_components."
            )
        if self.total_samples is not None and self.total_samples < n_batch:
            raise ValueError(
                f"total_samples={self.total_samples} is smaller than this batch of {n_batch} "
                "rows: it is the number of rows of the whole data set the batches come from. "
                "Set it to that number, or to None to count the rows given so far."
            )

    def _warn_small_batch(self, n_batch, seen, steps):
        """Warn when a ``partial_fit`` batch is under a tenth of the mean size of the batches
        so far: every batch gets a full step, so it moves the model as far as they did."""
        if steps > 0 and n_batch < 0.1 * seen / steps:
            warn(
                f"This batch of {n_batch} rows is under a tenth of the {seen / steps:.0f} rows "
                "of the batches so far; partial_fit gives every batch a full step, so it "
                "moves the model as far as one of those. Give batches of similar sizes "
                "(np.array_split(rows, n_batches)), or join the small ones.",
                UserWarning,
            )

    def _drop_row_attributes(self):
        for name in (*self._row_attributes, "_row_labels"):
            self.__dict__.pop(name, None)

    def _check_values(self, shape, all_zeros, totals, fractions):
        """What the counts must be beyond non-negative and finite: not all zeros (in fit),
        a total the updates can hold, and whole numbers (else a warning)."""
        if all_zeros:
            raise ValueError(
                f"X of shape {shape} contains only zeros: a Poisson factorisation needs at "
                "least one positive count. Remove empty data before fitting."
            )
        check_total(totals, type(self).__name__)
        if fractions and self._warns_on_fractions:
            warn(
                f"X contains non-integer values; {type(self).__name__} models counts. The fit "
                "uses the Poisson likelihood extended to real x >= 0 by Gamma(x + 1), which "
                "stays well defined. Round X to silence this warning.",
                UserWarning,
            )

    def _read_counts(self, X, reset):
        """The dtype of the results, and X validated: in memory, or read by blocks of rows
        (:class:`BlockCounts`, or :class:`DaskCounts` on a cluster) when out of core."""
        if is_out_of_core(X):
            return _source_dtype(X), self._out_of_core_counts(X, reset)
        return data_dtype(X), self._validate_counts(X, reset)

    def _out_of_core_counts(self, X, reset):
        """The counts of an out-of-core X (a backed AnnData, a Dask, HDF5 or zarr array), read
        a block of rows at a time, every block checked as :meth:`_validate_counts` checks X."""
        blocks = RowBlocks(X)
        if not reset:
            check_is_fitted(self)
            out_of_core_features(self, X, blocks.shape[1], reset=False)
        check = functools.partial(_check_block, self)
        client = current_client() if blocks.kind == "dask" else None
        if client is not None:
            counts = DaskCounts(blocks, client, check)
        else:
            if blocks.kind == "dask":  # read here: small chunks are read together
                blocks = RowBlocks(X, group_chunks=True)
            counts = BlockCounts(blocks, check)
        self._check_values(counts.shape, reset and counts.nnz == 0, np.array([counts.total]),
                           any(counts.checked))  # fmt: skip
        if reset:
            out_of_core_features(self, X, counts.shape[1], reset=True)
        return counts

    def poisson_loglik(self, X, *, fit_on=None, users=None, average="entry", depth=1.0):
        """Poisson log-likelihood of counts under the fitted means of their rows.

        ``sum_ij x_ij ln m_ij - m_ij - ln x_ij!`` with ``m = depth * W @ components_``, where
        ``W`` are the rows' loadings: those of the training users ``users``; or fitted by
        :meth:`transform` on ``fit_on`` (other counts of the same rows, as the two halves
        of a binomial thinning: fit on one, score the other); or else on ``X`` itself.
        hpfrec's ``eval_llk`` and scHPF's ``mean_negative_pois_llh`` (with the sign changed)
        are its total and its ``"nonzero"`` mean.

        Parameters
        ----------
        X : {array-like, sparse matrix, AnnData} of shape (n_samples, n_features)
            The counts to score.
        fit_on : {array-like, sparse matrix} of shape (n_samples, n_features), default=None
            Counts of the same rows that give their loadings; not with ``users``.
        users : array-like of int of shape (n_samples,), default=None
            The training rows that the rows of X are (held-out entries of training users).
        average : {"entry", "nonzero"} or None, default="entry"
            ``"entry"``: the mean over all entries of X, zeros included; ``"nonzero"``: the
            mean over its non-zero entries of their terms (scHPF's); None: the total.
        depth : float, default=1.0
            X's depth relative to the counts that gave the loadings (the training counts
            with ``users``, ``fit_on`` with it, X itself otherwise): X's means are the
            fitted ones times ``depth``. 1 for held-out entries (a split of the
            interactions) and for the two halves of ``thin_counts(X, 0.5)``; ``f / (1 -
            f)`` for the share held out by ``thin_counts(X, f)`` of training users. The
            early stopping of ``fit(X_train, X_val=...)`` scores ``X_val`` at the depth
            ``X_val.sum() / X_train.sum()``.

        Returns
        -------
        loglik : float
            The log-likelihood, averaged as asked.
        """
        check_is_fitted(self)
        if average not in ("entry", "nonzero", None):
            raise ValueError(f"average must be 'entry', 'nonzero' or None; got {average!r}.")
        if isinstance(depth, bool) or not isinstance(depth, numbers.Real) or not 0 < depth < np.inf:
            raise ValueError(
                f"depth must be a positive number (X's means over the fitted ones, f / (1 - "
                f"f) for counts held out by thin_counts(X, f)); got {depth!r}."
            )
        if fit_on is not None and users is not None:
            raise ValueError(
                "Give the rows' loadings one way: users=... (training rows) or fit_on=... "
                "(counts to fit them on), not both."
            )
        _refuse_out_of_core(X, "poisson_loglik")
        # fit_on's rows are X's rows, its columns X's columns, matched by position
        check_side_labels(X, "fit_on", fit_on)
        given, X = X, self._validate_counts(X, reset=False)
        if users is not None:
            W = self._loadings_of(users, X.shape[0], given)
        else:
            # the input as given: transform checks an AnnData's names against the fit's
            source = given if fit_on is None else fit_on
            W = np.asarray(self.transform(source), dtype=np.float64)
            if W.shape[0] != X.shape[0]:
                raise ValueError(
                    f"fit_on must hold the rows of X: got {W.shape[0]} rows for {X.shape[0]}."
                )
        H = np.asarray(self.components_, dtype=np.float64)
        return loglik(float(depth) * W, H, held_out(X), average)

    def _set_reconstruction_err(self, X):
        """``reconstruction_err_``, ``sqrt(2 D_KL(X || loadings_ @ components_))`` as
        scikit-learn's NMF defines it for ``beta_loss="kullback-leibler"``, from one compiled
        pass over the stored counts (the VBEM's, with the factors' logs for E[ln]):
        ``sum x ln x - sum x ln (WH) - sum x + sum WH``, the last term from the factors'
        sums, so that no array the size of the counts times K is formed. ``X`` is the data,
        or the fit's own :class:`_Counts` copy of it."""
        W = np.asarray(self.loadings_, dtype=np.float64)
        H = np.asarray(self.components_, dtype=np.float64)
        counts = X if isinstance(X, (_Counts, BlockCounts, DaskCounts)) else _Counts(X)
        xlogt = _pass(
            counts.r,
            log_of_factor(W),
            log_of_factor(H.T),
            kernel_threads(2 * W.shape[1] * counts.nnz),
        )[1]
        divergence = counts.xlogx - xlogt - counts.total
        divergence += float(W.sum(axis=0) @ H.sum(axis=1))
        self.reconstruction_err_ = float(np.sqrt(2.0 * max(divergence, 0.0)))

    def _held_out_counts(self, X_val, counts):
        """The held-out counts of early stopping, as :func:`loglik` reads them (or None);
        ``counts`` are the fit's (CSR in memory, or read by blocks)."""
        if X_val is None:
            return None
        shape = counts.shape
        if is_out_of_core(X_val):
            # held-out counts are scored in memory: read them a block at a time, as CSR
            blocks = RowBlocks(X_val, group_chunks=True)
            X_val = sparse.vstack([block for _, block in blocks], format="csr")
        # checked as X is, with messages that name X_val; its rows are X's, so an AnnData's
        # names are checked against the fit's but a plain array is not warned about
        X_val = validate_input(self, X_val, reset=False, check=check_array, input_name="X_val",
                               accept_sparse=("csr", "csc", "coo"), dtype=np.float64,
                               ensure_non_negative=True)  # fmt: skip
        held = held_out(X_val)
        check_total(held.data, type(self).__name__, input_name="X_val")
        if held.shape != shape:
            raise ValueError(
                f"X_val must hold counts of the rows of X, shape {shape}; got {held.shape}."
            )
        if held.nnz == 0:
            # its score would be minus the means' total, which says nothing of how well the
            # iterations predict held-out counts
            raise ValueError(
                "X_val holds no positive count: there is nothing to score the iterations on. "
                "Hold out a share of the counts (X_train, X_val = thin_counts(X, 0.2), then "
                "fit(X_train, X_val=X_val)), or fit without X_val."
            )
        # X in memory, dense or sparse (not read by blocks): its values at X_val's counts
        in_memory = sparse.issparse(counts) or isinstance(counts, np.ndarray)
        if in_memory and not np.any(np.asarray(counts[held.nonzero()])):
            # every entry of X_val's rows is scored, X's own counts as held-out zeros: a
            # split of the interactions (hpfrec's val_set) makes the held-out score fall as
            # the fit learns X, and early stopping keep the first iteration
            warn(
                "X_val has no count where X has one, as a split of the interactions gives "
                "(hpfrec's val_set, holdout_ratings): its score reads every entry of its "
                "rows, X's counts as held-out zeros, and falls as the fit learns them, so "
                "early stopping would keep an early iteration. Hold out a share of every "
                "count instead: X_train, X_val = thin_counts(X, 0.2), then "
                "fit(X_train, X_val=X_val); or fit without X_val and score held-out pairs "
                "with score_pairs.",
                UserWarning,
            )
        return held

    def _recommend_input(self, X):
        _refuse_out_of_core(X, "recommend")
        X = self._validate_counts(X, reset=False)
        return X, held_out(X)  # a row's seen items: its non-zero counts

    def _new_user_factors(self, X, given):
        # the input as given: transform checks an AnnData's or a DataFrame's feature names
        return np.asarray(self.transform(given))
