"""CoGAPS's per-row chains: the patterns of new samples with the amplitudes held fixed (the
fixed-matrix mode of the C++ CoGAPS, one chain per row), for ``transform``, and the held-out
log-likelihood of ``score``.

Each row's chain is seeded from ``random_state`` and the row's values, so a row gets the same
result whatever else is in the batch, in whatever order, on any number of threads.
"""

import numpy as np
from scipy import sparse

from .._utils._openmp_helpers import kernel_threads
from .._utils._seeding import keyed_digest_seeds, stream_seeds
from .._utils._warnings import warn
from ._chain import as_dtype, canonical_csr, n_entries
from ._sampler import sample_fixed_rows, sample_fixed_sparse_rows
from ._uncertainty import NAMED_UNCERTAINTIES, precision, uncertainty_name, validate_uncertainty

__all__ = [
    "held_out_loglik",
    "row_chunks",
    "row_seeds",
    "sample_patterns",
    "sample_sparse_patterns",
]

# Folds of each row's entries in score: each fold is predicted from the others.
SCORE_FOLDS = 5
# Rows of a sparse matrix made dense at a time by transform and score.
_ROW_CHUNK = 2048


def row_seeds(est, X):
    """One seed per row, from ``random_state`` and the row's values as a dense float64
    row, so a row gets the same chain whether it comes dense or sparse. The values are
    hashed plus 0.0, which turns -0.0 (``np.round(-0.3)``) into 0.0: the same row, the same
    chain."""
    if not sparse.issparse(X):
        # float64 values, so that a float32 row gets the chain of the same row in float64
        return keyed_digest_seeds(
            est._transform_seed,
            ((np.asarray(row, dtype=np.float64) + 0.0).tobytes() for row in X),
        )

    def dense_rows():
        # a canonical CSR (sorted, summed duplicates), densified one row at a time
        row = np.zeros(X.shape[1])
        for i in range(X.shape[0]):
            cols = X.indices[X.indptr[i] : X.indptr[i + 1]]
            row[cols] = X.data[X.indptr[i] : X.indptr[i + 1]] + 0.0
            yield row.tobytes()
            row[cols] = 0.0

    return keyed_digest_seeds(est._transform_seed, dense_rows())


def _row_chains_work(est, X):
    """A rough count of the work of the per-row chains on X, for the thread count:
    2 * max_iter iterations, each of about K proposals per row that read the row's
    entries."""
    return 2 * est.max_iter * est.components_.shape[0] * n_entries(X)


def _fixed_row_arguments(est):
    """The arguments of a per-row chain that come from the fit (after X and precisions);
    warns first when those chains cannot mix (``_warn_single_bin_rows``)."""
    _warn_single_bin_rows(est)
    return (
        np.ascontiguousarray(est.components_.T, dtype=np.float64),
        est._atom_densities[0],
        est.lambda_W_,
        est.max_gibbs_mass_W,
        est.max_iter,
    )


def _warn_single_bin_rows(est):
    """Warn when the per-row chains of the reversible moves have one element each (one
    pattern): a move or an exchange within one bin changes nothing, and a reversible death
    removes a whole atom without redrawing a mass (Sherman, Gao & Fertig 2019, sections
    1.3.3 and 1.3.4), so a row's pattern changes only by whole atoms, whose deaths precise
    data reject. The chain stays near its start: on 4 x 5 data, six seeds gave 0.58 to
    0.98 for a posterior mean of 0.596 (standard deviation 0.09)."""
    if not est._reversible or est.components_.shape[0] != 1:
        return
    warn(
        "With solver='reversible' and one pattern, the per-row chains of transform and "
        "score change a row's pattern only by whole atoms, and do not mix on precise "
        "data: their results depend on the seed by several posterior standard deviations. "
        "Fit the new rows with the amplitudes fixed, whose chain mixes across rows: "
        "CoGAPS(1, solver='reversible').fit(X_new, fixed_components=model.components_)"
        ".loadings_; or use solver='cogaps'.",
        UserWarning,
    )


def sample_sparse_patterns(est, X, name):
    """Patterns of the rows of X under the sparse-data model with the named uncertainty:
    each proposal costs O(nnz of the row * K), and the rows are never made dense."""
    rows = canonical_csr(X)
    sigma0, poisson = NAMED_UNCERTAINTIES[name]
    Ht, density, lam, max_mass, max_iter = _fixed_row_arguments(est)
    mean, _ = sample_fixed_sparse_rows(
        rows, Ht, sigma0, density, lam, max_mass, max_iter, row_seeds(est, rows),
        kernel_threads(_row_chains_work(est, rows)), reversible=est._reversible, poisson=poisson,
    )  # fmt: skip
    return as_dtype(mean, X.dtype)


def row_chunks(X, uncertainty):
    """Dense row blocks of X with their uncertainty (sparse X is made dense a block at a
    time; rows are independent, so blocks do not change the result)."""
    if uncertainty_name(uncertainty) is None and sparse.issparse(uncertainty):
        uncertainty = uncertainty.toarray()
    if not sparse.issparse(X):
        yield X, validate_uncertainty(uncertainty, X)
        return
    X = X.tocsr()
    for start in range(0, X.shape[0], _ROW_CHUNK):
        block = X[start : start + _ROW_CHUNK].toarray()
        u = uncertainty
        if uncertainty_name(uncertainty) is None:
            u = uncertainty[start : start + _ROW_CHUNK]
        yield block, validate_uncertainty(u, block)


def sample_patterns(est, X, sigma):
    """Posterior mean and standard deviation of the patterns of the dense rows X."""
    return sample_fixed_rows(
        X, precision(sigma, X.dtype), *_fixed_row_arguments(est), row_seeds(est, X),
        kernel_threads(_row_chains_work(est, X)), reversible=est._reversible,
    )  # fmt: skip


def _entry_folds(seeds, n_features, n_folds):
    """Fold of every entry of each row, a balanced random split seeded by the row's seed."""
    folds = np.empty((len(seeds), n_features), dtype=np.intp)
    base = np.arange(n_features) % n_folds
    for i, seed in enumerate(seeds):
        folds[i] = np.random.default_rng(int(seed)).permutation(base)
    return folds


def warn_few_entries(n_features, n_components):
    """Warn when the fits of ``score`` see fewer than twice ``n_components`` entries of a
    row: its held-out predictions are then mostly the prior's, and the score does not
    compare numbers of patterns."""
    seen = n_features - -(-n_features // SCORE_FOLDS)  # the entries outside the largest fold
    if seen < 2 * n_components:
        warn(
            f"score fits the patterns of each row from {seen} of its {n_features} entries "
            f"(one of {SCORE_FOLDS} folds held out), fewer than twice n_components="
            f"{n_components}: the held-out entries are predicted mostly by the prior, and "
            "the score is no guide to the number of patterns. Score samples with more "
            "features.",
            UserWarning,
        )


def held_out_loglik(est, x, sigma):
    """Per-row sum of the held-out log-likelihoods of a dense block (see ``score``): each
    fold of a row's entries is scored under the patterns sampled from the other folds."""
    seeds = row_seeds(est, x)
    folds = _entry_folds(seeds, x.shape[1], SCORE_FOLDS)
    prec = precision(sigma, x.dtype)
    arguments = _fixed_row_arguments(est)
    n_threads = kernel_threads(_row_chains_work(est, x))
    loglik = np.zeros(x.shape[0])
    for f in range(SCORE_FOLDS):
        held = folds == f
        fit_prec = np.where(held, 0.0, prec).astype(x.dtype, copy=False)
        # the chains of a fold have seeds of their own, distinct from those of transform
        W, _ = sample_fixed_rows(x, fit_prec, *arguments, stream_seeds(seeds, f), n_threads,
                                 reversible=est._reversible)  # fmt: skip
        z = (x - W @ est.components_) / sigma
        terms = -0.5 * z * z - np.log(sigma) - 0.5 * np.log(2.0 * np.pi)
        loglik += np.sum(terms, axis=1, where=held)
    return loglik
