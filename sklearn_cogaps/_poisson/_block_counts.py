"""Counts that need not fit in memory: the passes of the Poisson models over blocks of rows.

Every quantity of a fit that involves the counts is a sum over their stored entries
(Sarkar 2021: the expected counts of each row and each column, ``sum x ln t``), so a fit
can read X a block of rows at a time (:class:`~sklearn_cogaps._utils._blocks.RowBlocks`)
with memory bounded by a block and the model. :class:`BlockCounts` has the interface of
the in-memory :class:`~sklearn_cogaps._poisson._hpmf_updates._Counts`: its ``r`` and ``c``
are passes over the rows and over the columns. A row's sums are those of the in-memory
pass; a column's sums continue from block to block (the kernels' ``accumulate``), so they
are the same additions in the same order; and the sums over all entries are sums of the
rows' sums in both. A fit from blocks therefore equals the in-memory fit to the bit,
whatever the blocks.
"""

import numpy as np

from .._utils._openmp_helpers import kernel_threads
from . import _hpmf_fast as _fast

__all__ = ["BlockCounts", "block_summary", "compressed", "entry_sums", "row_entry_sums"]


def compressed(M):
    """``(indptr, indices, data)`` of a CSR or CSC matrix, for the kernels."""
    index_dtype = np.int32 if max(M.nnz, *M.shape) < 2**31 - 1 else np.int64
    return (
        np.ascontiguousarray(M.indptr, dtype=index_dtype),
        np.ascontiguousarray(M.indices, dtype=index_dtype),
        np.ascontiguousarray(M.data, dtype=np.float64),
    )


def row_entry_sums(compressed_rows):
    """``sum ln Gamma(x + 1)`` and ``sum x ln x`` of every row's stored counts."""
    indptr, _, data = compressed_rows
    n = indptr.shape[0] - 1
    log_factorial, xlogx = np.empty(n), np.empty(n)
    _fast.row_entry_sums(indptr, data, log_factorial, xlogx, kernel_threads(20 * data.size))
    return log_factorial, xlogx


def entry_sums(row_log_factorial, row_xlogx, row_sums):
    """``(sum ln Gamma(x + 1), sum x ln x, sum x)`` over the stored counts, from their rows'
    sums: the same bits whatever blocks the rows were read in."""
    return tuple(float(np.sum(v)) for v in (row_log_factorial, row_xlogx, row_sums))


def block_summary(X, check=None, first_row=0):
    """What a fit keeps of a block of rows (canonical CSR) besides the block: what ``check``
    (called with the block and ``first_row``, its place in the whole data) returns, the
    rows' sums, their ``sum ln Gamma(x + 1)`` and ``sum x ln x``, the number of stored
    counts, and each column's number of positive counts."""
    checked = check(X, first_row) if check is not None else None
    row_sums = np.asarray(X.sum(axis=1)).ravel()
    column_nnz = np.bincount(X.indices[X.data != 0], minlength=X.shape[1])
    return (checked, row_sums, *row_entry_sums(compressed(X)), X.nnz, column_nnz)


class BlockCounts:
    """The counts of an out-of-core X, read a block of rows at a time.

    Reading X once, it checks every block (``check``), and keeps the row sums, the number of
    stored counts and the sums over the entries; the passes read X again.

    Parameters
    ----------
    blocks : RowBlocks
        The source.
    check : callable, default=None
        Called with every block (a canonical CSR matrix) and its first row before it is
        used; it raises to refuse the data, and what it returns is kept in ``checked``.
    """

    def __init__(self, blocks, check=None):
        self.blocks = blocks
        self.shape = blocks.shape
        n = self.shape[0]
        self.row_sums, log_factorial, xlogx = np.empty(n), np.empty(n), np.empty(n)
        self.nnz = 0
        self.checked = []
        self.column_nnz = np.zeros(self.shape[1], dtype=np.int64)
        for a, X in blocks:
            rows = slice(a, a + X.shape[0])
            summary = block_summary(X, check, a)
            checked, self.row_sums[rows], log_factorial[rows], xlogx[rows], nnz = summary[:5]
            self.column_nnz += summary[5]
            self.checked.append(checked)
            self.nnz += nnz
        self.log_factorial, self.xlogx, self.total = entry_sums(log_factorial, xlogx,
                                                                self.row_sums)  # fmt: skip
        self.r = _Pass(self, columns=False)
        self.c = _Pass(self, columns=True)


class _Pass:
    """The passes over one axis of a :class:`BlockCounts`, block by block.

    Over the rows (``columns=False``) each block's CSR writes its own rows of the results;
    over the columns each block's CSC copy continues every column's sums (``accumulate``).
    """

    def __init__(self, counts, columns):
        self.counts = counts
        self.columns = columns

    def _blocks(self):
        """``(rows, (indptr, indices, data))`` of every block, CSC over the columns."""
        for a, X in self.counts.blocks:
            yield slice(a, a + X.shape[0]), compressed(X.tocsc() if self.columns else X)

    def _out(self, shape):
        return np.zeros(shape) if self.columns else np.empty(shape)

    def expected_counts(self, major, minor, n_threads, kk=-1, want_log=True):
        n, K = major.shape
        z, xlogt, h = self._out((n, K)), self._out(n), self._out(n if kk >= 0 else 0)
        for rows, arrays in self._blocks():
            if self.columns:
                _fast.expected_counts(*arrays, major, minor[rows], z, xlogt, h, kk, n_threads,
                                      True, want_log)  # fmt: skip
            else:
                _fast.expected_counts(*arrays, major[rows], minor, z[rows], xlogt[rows],
                                      h[rows] if kk >= 0 else h, kk, n_threads, False,
                                      want_log)  # fmt: skip
        return z, xlogt, h

    def product(self, Q, n_threads):
        out = self._out((self.counts.shape[int(self.columns)], Q.shape[1]))
        for rows, arrays in self._blocks():
            if self.columns:
                Qb = np.ascontiguousarray(Q[rows])
                _fast.sparse_dense_product(*arrays, Qb, out, n_threads, True)
            else:
                _fast.sparse_dense_product(*arrays, Q, out[rows], n_threads)
        return out

    def sampled_data_term(self, log_r, log_c, xlogt, n_threads):
        for rows, arrays in self._blocks():
            draws = np.ascontiguousarray(log_r[:, rows])
            _fast.sampled_data_term(*arrays, draws, log_c, xlogt[rows], n_threads)

    def transform_rows(self, components_log, a, prior_rate, beta, alpha, xlogt, n_iter, *args):
        for rows, arrays in self._blocks():
            _fast.transform_rows(*arrays, components_log, a, prior_rate, beta, alpha[rows],
                                 xlogt[rows], n_iter[rows], *args)  # fmt: skip
