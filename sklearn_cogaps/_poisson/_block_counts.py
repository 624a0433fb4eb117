"""Counts that need not fit in memory: the passes of the Poisson models over blocks of rows.

Every quantity of a fit that involves the counts is a sum over their stored entries
(Sarkar 2021: the expected counts of each row and each column, ``sum x ln t``), so a fit
can read X a block of rows at a time (:class:`~sklearn_cogaps._utils._blocks.RowBlocks`)
with memory bounded by a block and the model. :class:`BlockCounts` has the interface of
the in-memory :class:`~sklearn_cogaps._poisson._hpmf_updates._Counts`: its ``r`` and ``c``
are passes over the rows and over the columns. A row's sums are those of the in-memory
pass; a column's sums continue from block to block (the kernels' ``accumulate``), so they
are the same additions in the same order; and the sums over all entries are taken in
pieces of fixed size (:class:`~sklearn_cogaps._utils._blocks.Pieces`) in both. A fit from
blocks therefore equals the in-memory fit to the bit, whatever the blocks.
"""

import numpy as np
from scipy.special import gammaln

from .._utils._blocks import Pieces
from . import _hpmf_fast as _fast

__all__ = ["BlockCounts", "compressed", "entry_sums"]


def compressed(M):
    """``(indptr, indices, data)`` of a CSR or CSC matrix, for the kernels."""
    index_dtype = np.int32 if max(M.nnz, *M.shape) < 2**31 - 1 else np.int64
    return (
        np.ascontiguousarray(M.indptr, dtype=index_dtype),
        np.ascontiguousarray(M.indices, dtype=index_dtype),
        np.ascontiguousarray(M.data, dtype=np.float64),
    )


class _EntrySums:
    """``sum ln Gamma(x + 1)``, ``sum x ln x`` and ``sum x`` over the stored counts, each a
    sum of its values over pieces of 2**16 entries in order: the same bits from one array
    or from blocks, with at most one piece held."""

    def __init__(self):
        self._pieces = Pieces(2**16)
        self._sums = []

    def add(self, data):
        for piece in self._pieces.add(data):
            self._sums.append(self._of(piece))

    @staticmethod
    def _of(piece):
        return (
            float(gammaln(piece + 1.0).sum()),
            float(np.dot(piece, np.log(piece))),
            float(piece.sum()),
        )

    def result(self):
        rest = self._pieces.rest()
        sums = self._sums + ([self._of(rest)] if rest.size else [])
        return tuple(sum(s[i] for s in sums) for i in range(3)) if sums else (0.0, 0.0, 0.0)


def entry_sums(data):
    """``(sum ln Gamma(x + 1), sum x ln x, sum x)`` over ``data`` (stored counts, all > 0)."""
    sums = _EntrySums()
    sums.add(data)
    return sums.result()


class BlockCounts:
    """The counts of an out-of-core X, read a block of rows at a time.

    Reading X once, it checks every block (``check``), and keeps the row sums, the number of
    stored counts and the sums over the entries; the passes read X again.

    Parameters
    ----------
    blocks : RowBlocks
        The source.
    check : callable, default=None
        Called with every block (a canonical CSR matrix) before it is used.
    """

    def __init__(self, blocks, check=None):
        self.blocks = blocks
        self.shape = blocks.shape
        self.row_sums = np.empty(self.shape[0])
        self.nnz = 0
        sums = _EntrySums()
        for a, X in blocks:
            if check is not None:
                check(X)
            self.row_sums[a : a + X.shape[0]] = np.asarray(X.sum(axis=1)).ravel()
            self.nnz += X.nnz
            sums.add(X.data)
        self.log_factorial, self.xlogx, self.total = sums.result()
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

    def expected_counts(self, major, minor, n_threads, kk=-1):
        n, K = major.shape
        z, xlogt, h = self._out((n, K)), self._out(n), self._out(n if kk >= 0 else 0)
        for rows, arrays in self._blocks():
            if self.columns:
                _fast.expected_counts(*arrays, major, minor[rows], z, xlogt, h, kk, n_threads,
                                      True)  # fmt: skip
            else:
                _fast.expected_counts(*arrays, major[rows], minor, z[rows], xlogt[rows],
                                      h[rows] if kk >= 0 else h, kk, n_threads)  # fmt: skip
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
