"""Counts of a Dask array on a ``dask.distributed`` cluster: the passes of the Poisson models
run where the blocks live.

The cluster keeps the counts twice, as the in-memory fit does (CSR for the passes over rows,
CSC for those over columns): the Dask array's row chunks, and column blocks made from them
at the first pass over the columns (each worker gathers the columns of one block from every
row chunk), which a caller that needs no more such passes releases (``release_columns``):
``transform`` never makes them, and WeightedBackgroundPMF releases them after its start.
A pass over the rows sends each row block the factors it needs and gets back its rows'
sums; a pass over the columns does the same with the column blocks, each holding every row
of its columns, so every row's and every column's sums are the additions of the in-memory
pass in its order. The client only assembles the results in the blocks' order: the fit
equals the in-memory fit to the bit, whatever the number of workers or the chunks.
"""

import numpy as np
from scipy import sparse

from .._utils._blocks import canonical_block
from .._utils._openmp_helpers import kernel_threads
from . import _hpmf_fast as _fast
from ._block_counts import block_summary, compressed, entry_sums

__all__ = ["DaskCounts"]


# ---------------------------------------------------------------------------------------------
# Tasks (run on the workers)
# ---------------------------------------------------------------------------------------------


def _read_row_block(block, shape, check, first_row, chunk):
    """Row chunk ``chunk`` as canonical CSR arrays, checked; with its rows' sums."""
    X = canonical_block(block, first_row)
    if X.shape != shape:
        raise ValueError(
            f"Chunk {chunk} (rows {first_row} to {first_row + shape[0]}) of X has shape "
            f"{X.shape}; expected {shape}. The Dask array's chunks do not match its shape."
        )
    return compressed(X), block_summary(X, check, first_row)


def _column_block(lo, hi, n_features, *row_blocks):
    """Columns ``lo:hi`` of every row, as CSC arrays, from the row blocks' CSR arrays."""
    parts = [
        sparse.csr_matrix(arrays[::-1], shape=(arrays[0].shape[0] - 1, n_features))[:, lo:hi]
        for arrays in row_blocks
    ]
    return compressed(sparse.vstack(parts, format="csr").tocsc())


def _first(pair):
    return pair[0]


def _merged_rows(n_features, *row_blocks):
    """Consecutive row blocks' CSR arrays as one block: each row's entries, and so each
    row's sums in every pass, are unchanged."""
    parts = [
        sparse.csr_matrix(arrays[::-1], shape=(arrays[0].shape[0] - 1, n_features))
        for arrays in row_blocks
    ]
    return compressed(sparse.vstack(parts, format="csr"))


# Row chunks are merged into blocks of at least this many stored counts (about 3 MB as
# CSR), or of a share of the counts that leaves two blocks per worker, before the passes:
# every pass submits one task per block, and a task costs the scheduler about a
# millisecond, so chunks of a few rows made each pass take seconds (600 chunks of one row:
# 59 s for a 10-iteration fit of 600 x 40 counts, 1.8 s in chunks of 100 rows). Blocks
# already this large are kept as they are, where their chunks live.
MIN_BLOCK_NNZ = 2**18


def merge_groups(nnz, min_nnz=MIN_BLOCK_NNZ):
    """Consecutive groups of blocks, each of at least ``min_nnz`` stored counts but the
    last (which joins the one before it when that one exists).

    Parameters
    ----------
    nnz : sequence of int
        Stored counts of each block, in order.
    min_nnz : int
        The least stored counts of a group.

    Returns
    -------
    groups : list of range
        The blocks of each group, covering all blocks in order.
    """
    groups, first, held = [], 0, 0
    for i, size in enumerate(nnz):
        held += size
        if held >= min_nnz:
            groups.append(range(first, i + 1))
            first, held = i + 1, 0
    if first < len(nnz):
        if groups:
            groups[-1] = range(groups[-1].start, len(nnz))
        else:
            groups.append(range(first, len(nnz)))
    return groups


def _second(pair):
    return pair[1]


def _expected_counts(arrays, major, minor, kk, want_log=True):
    n, K = major.shape
    z, xlogt, h = np.empty((n, K)), np.empty(n), np.empty(n if kk >= 0 else 0)
    threads = kernel_threads(2 * K * arrays[2].size)
    _fast.expected_counts(*arrays, major, minor, z, xlogt, h, kk, threads, False, want_log)
    return z, xlogt, h


def _product(arrays, Q):
    out = np.empty((arrays[0].shape[0] - 1, Q.shape[1]))
    _fast.sparse_dense_product(*arrays, Q, out, kernel_threads(2 * Q.shape[1] * arrays[2].size))
    return out


def _sampled_data_term(arrays, log_r, log_c):
    xlogt = np.empty(log_r.shape[1])
    threads = kernel_threads(2 * log_r.shape[0] * log_r.shape[2] * arrays[2].size)
    _fast.sampled_data_term(*arrays, log_r, log_c, xlogt, threads)
    return xlogt


def _transform_rows(arrays, alpha, components_log, a, prior_rate, beta, max_iter, tol, share):
    n = alpha.shape[0]
    alpha = alpha.copy()
    args = (max_iter, tol, share, kernel_threads(40 * arrays[2].size * alpha.shape[1]))
    xlogt, n_iter = np.empty(n), np.empty(n, dtype=np.intc)
    _fast.transform_rows(*arrays, components_log, a, prior_rate, beta, alpha, xlogt, n_iter,
                         *args)  # fmt: skip
    return alpha, xlogt, n_iter


# ---------------------------------------------------------------------------------------------
# The client's side
# ---------------------------------------------------------------------------------------------


class DaskCounts:
    """The counts of a Dask array, kept on the cluster of ``client`` during a fit.

    Parameters
    ----------
    blocks : RowBlocks
        The row chunks of a Dask array of counts (one chunk along the columns, known sizes:
        :class:`~sklearn_cogaps._utils._blocks.RowBlocks` checks both).
    client : distributed.Client
        The cluster's client.
    check : callable, default=None
        Called on every row block (a canonical CSR matrix) and its first row, on its worker;
        it raises to refuse the data.
    """

    def __init__(self, blocks, client, check=None):
        X = blocks.source
        self.client = client
        self.shape = blocks.shape
        p = self.shape[1]
        self.row_bounds = blocks.bounds
        delayed = X.to_delayed()[:, 0]
        chunks = client.compute([delayed[i] for i in blocks.chunk_index])
        read = [
            client.submit(_read_row_block, chunk, (b - a, p), check, a, i, pure=False)
            for chunk, i, (a, b) in zip(chunks, blocks.chunk_index, self.row_bounds)
        ]
        rows = client.map(_first, read)
        summaries = client.gather(client.map(_second, read))
        del chunks, read
        nnz = [s[4] for s in summaries]
        n_workers = max(1, len(client.scheduler_info().get("workers", ())))
        groups = merge_groups(nnz, min(MIN_BLOCK_NNZ, sum(nnz) // (2 * n_workers)))
        if len(groups) < len(rows):
            rows = [
                rows[g[0]] if len(g) == 1
                else client.submit(_merged_rows, p, *(rows[i] for i in g), pure=False)
                for g in groups
            ]  # fmt: skip
            self.row_bounds = [
                (self.row_bounds[g[0]][0], self.row_bounds[g[-1]][1]) for g in groups
            ]
        self.rows = rows
        self.checked = [s[0] for s in summaries]
        self.row_sums = np.concatenate([s[1] for s in summaries])
        self.nnz = int(sum(s[4] for s in summaries))
        self.column_nnz = np.sum([s[5] for s in summaries], axis=0)
        self.log_factorial, self.xlogx, self.total = entry_sums(
            np.concatenate([s[2] for s in summaries]),
            np.concatenate([s[3] for s in summaries]),
            self.row_sums,
        )
        # as many column blocks as row blocks, cut by the shape alone
        cuts = np.linspace(0, p, len(self.row_bounds) + 1).round().astype(int)
        self.column_bounds = [(int(a), int(b)) for a, b in zip(cuts[:-1], cuts[1:]) if b > a]
        self.columns = None
        self.r = _DaskPass(self, self.rows, self.row_bounds)

    @property
    def c(self):
        """The passes over the column blocks, made from the row chunks at first use."""
        if self.columns is None:
            p = self.shape[1]
            self.columns = [
                self.client.submit(_column_block, a, b, p, *self.rows, pure=False)
                for a, b in self.column_bounds
            ]
        return _DaskPass(self, self.columns, self.column_bounds)

    def release_columns(self):
        """Let the workers drop the column blocks (a later pass over the columns makes them
        again)."""
        self.columns = None


class _DaskPass:
    """The passes over the row blocks or the column blocks of a :class:`DaskCounts`."""

    def __init__(self, counts, blocks, bounds):
        self.client = counts.client
        self.blocks = blocks
        self.bounds = bounds

    def _run(self, task, per_block, shared):
        """``task(block, *per_block(a, b), *shared)`` on every block, results in order; the
        shared arrays are sent to every worker once."""
        shared = [
            self.client.scatter(s, broadcast=True, hash=False) if isinstance(s, np.ndarray) else s
            for s in shared
        ]
        futures = [
            self.client.submit(task, block, *per_block(a, b), *shared, pure=False)
            for block, (a, b) in zip(self.blocks, self.bounds)
        ]
        return self.client.gather(futures)

    def expected_counts(self, major, minor, n_threads, kk=-1, want_log=True):
        parts = self._run(_expected_counts, lambda a, b: (major[a:b],), (minor, kk, want_log))
        z = np.concatenate([part[0] for part in parts])
        xlogt = np.concatenate([part[1] for part in parts])
        h = np.concatenate([part[2] for part in parts]) if kk >= 0 else np.empty(0)
        return z, xlogt, h

    def product(self, Q, n_threads):
        return np.concatenate(self._run(_product, lambda a, b: (), (Q,)))

    def sampled_data_term(self, log_r, log_c, xlogt, n_threads):
        parts = self._run(
            _sampled_data_term, lambda a, b: (np.ascontiguousarray(log_r[:, a:b]),), (log_c,)
        )
        xlogt[:] = np.concatenate(parts)

    def transform_rows(self, components_log, a, prior_rate, beta, alpha, xlogt, n_iter,
                       max_iter, tol, share, n_threads):  # fmt: skip
        # the workers choose their own threads; the row fit's settings are the caller's
        parts = self._run(_transform_rows, lambda lo, hi: (alpha[lo:hi],),
                          (components_log, a, prior_rate, beta, max_iter, tol, share))  # fmt: skip
        for (lo, hi), (al, xl, it) in zip(self.bounds, parts):
            alpha[lo:hi], xlogt[lo:hi], n_iter[lo:hi] = al, xl, it
