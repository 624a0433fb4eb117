"""WeightedBackgroundPMF's sweeps over counts read a block of rows at a time, or kept on a
``dask.distributed`` cluster.

An iteration of the fit (Wang, Algorithm 3.1) sweeps the stored counts once per topic, each
sweep giving the rows' and the columns' expected counts of its topic while the per-entry
denominators ``B_ij`` follow the previous topic's update (``_wbpmf_updates``). The column
sums are added per fixed chunk of rows (:func:`~._wbpmf_updates.chunk_starts`), the chunks'
sums then in order. Here the counts are read in parts cut at those chunks' bounds (the whole
chunks a block of the source completes; the rest of the block is carried to the next part),
so that every chunk's sums are those of the in-memory sweep and the fit equals the in-memory
fit to the bit. The denominators, one float64 per stored count, live in a temporary file
mapped in memory (:class:`_LocalParts`) or beside their part on its worker
(:class:`_ClusterParts`).
"""

import operator
import os
import tempfile

import numpy as np
from scipy import sparse

from .._utils._blocks import chunk_aligned_parts, first_row_and, stream_parts
from .._utils._openmp_helpers import kernel_threads
from ._block_counts import compressed
from ._wbpmf_fast import data_term, denominators, topic_counts
from ._wbpmf_updates import _stabilised, chunk_starts

__all__ = ["BlockSweeper", "column_sums"]


def _csr(arrays, n_features):
    indptr, indices, data = arrays
    return sparse.csr_matrix((data, indices, indptr), shape=(indptr.size - 1, n_features))


class BlockSweeper:
    """The sweeps of ``_wbpmf_updates._Sweeper`` over counts read by parts.

    Parameters
    ----------
    counts : BlockCounts or DaskCounts
        The checked counts (``_block_counts``, ``_dask_counts``): their blocks of rows are
        read again, or their row chunks kept on the cluster are gathered into parts there.
    n_threads : int
        Threads of the local sweeps.

    Attributes
    ----------
    x_cols : ndarray of shape (n_features,)
        The columns' sums, added row after row as ``X.sum(axis=0)`` adds them.
    """

    def __init__(self, counts, n_threads):
        self.n, self.p = counts.shape
        self.starts = chunk_starts(self.n)
        self.n_threads = kernel_threads(20 * counts.nnz, n_threads)
        if hasattr(counts, "client"):
            self.part_bounds = chunk_aligned_parts(self.starts, counts.row_bounds)
            self.parts = _ClusterParts(self, counts)
        else:
            self.part_bounds = chunk_aligned_parts(self.starts, counts.blocks.bounds)
            self.parts = _LocalParts(self, counts.blocks, counts.nnz)
        self.x_cols = self.parts.column_sums()

    def _chunks(self, lo, hi):
        """The chunk indices of the part of rows ``lo:hi``, and their bounds in the part."""
        c_lo, c_hi = np.searchsorted(self.starts, [lo, hi])
        return c_lo, c_hi, np.ascontiguousarray(self.starts[c_lo : c_hi + 1] - lo)

    def denominators(self, rows, cols):
        return self.parts.denominators(rows.E, cols.E)

    def topic_counts(self, rows, cols, D, k, changed=None):
        out = np.empty(self.n)
        partial = np.zeros((len(self.starts) - 1, self.p))
        t, u_old, v_old = (-1, out, partial[0]) if changed is None else changed
        shared = (cols.E, cols.logs, k, v_old, cols.moved, t)
        self.parts.topic_counts(D, rows, u_old, shared, out, partial)
        return out, partial.sum(axis=0)

    def data_term(self, lu, lv):
        U, mu = _stabilised(lu)
        V, mv = _stabilised(lv)
        out = np.empty(self.n)
        self.parts.data_term(U, lu, mu, (V, lv, mv), out)
        return out

    def close(self):
        self.parts.close()


# ---------------------------------------------------------------------------------------------
# Kernels on one part (run where the part is)
# ---------------------------------------------------------------------------------------------


def _denominators(arrays, U, V, n_threads=None):
    D = np.empty(arrays[2].size)
    threads = kernel_threads(20 * D.size, n_threads)
    denominators(arrays[0], arrays[1], U, V, D, threads)
    return D


def _topic_counts(arrays, D, U, lu, u_old, row_new, starts, n_chunks, shared, n_threads=None):
    """The part's denominators after they followed the topic that changed (a new array:
    the part's ``D`` may have been sent from another worker), its rows' sums and its
    chunks' column sums."""
    V, lv, k, v_old, col_new, t = shared
    D = D.copy()
    out = np.empty(U.shape[0])
    partial = np.zeros((n_chunks, V.shape[0]))
    threads = kernel_threads(20 * D.size, n_threads)
    topic_counts(*arrays, U, V, lu, lv, D, k, out, partial, t, u_old, v_old, row_new, col_new,
                 starts, threads)  # fmt: skip
    return D, out, partial


def _sums(result):
    return result[1:]


def _data_term(arrays, U, lu, mu, shared, n_threads=None):
    V, lv, mv = shared
    out = np.empty(U.shape[0])
    data_term(*arrays, U, V, lu, lv, mu, mv, out, kernel_threads(20 * arrays[2].size, n_threads))
    return out


def _column_sums(y, arrays):
    """``y`` with the part's counts added column by column, row after row."""
    y = y.copy()
    np.add.at(y, arrays[1], arrays[2])
    return y


def _column_sums_of(parts, n_features, client=None):
    """The columns' sums of CSR ``parts`` (arrays, or futures of them on ``client``), added
    row after row in the order of the parts, as ``X.sum(axis=0)`` adds them."""
    y = np.zeros(n_features)
    for arrays in parts:
        if client is None:
            np.add.at(y, arrays[1], arrays[2])
        else:
            y = client.submit(_column_sums, y, arrays, pure=False)
    return y if client is None else client.gather(y)


def column_sums(counts):
    """The columns' sums of counts read by blocks or kept on a cluster, from the counts' own
    blocks: for the solver that makes no :class:`BlockSweeper` (``solver="simultaneous"``,
    whose passes are the counts')."""
    if hasattr(counts, "client"):
        return _column_sums_of(counts.rows, counts.shape[1], counts.client)
    return _column_sums_of((compressed(X) for _, X in counts.blocks), counts.shape[1])


class _LocalParts:
    """The parts read from the source at every sweep; the denominators in a temporary file
    mapped in memory, one float64 per stored count."""

    def __init__(self, sweeper, blocks, nnz):
        self.sweeper, self.blocks = sweeper, blocks
        self._dir = tempfile.TemporaryDirectory(prefix="sklearn_cogaps_wbpmf_")
        path = os.path.join(self._dir.name, "denominators.f8")
        self.D = np.memmap(path, dtype=np.float64, mode="w+", shape=(max(nnz, 1),))
        self.offsets = None

    def __iter__(self):
        """``(lo, hi, ptr, arrays)`` of every part: its rows, the offset of its first stored
        count, its CSR arrays."""
        ptr = 0
        for lo, hi, part in stream_parts(
            self.blocks, self.sweeper.part_bounds, lambda X: X.shape[0],
            lambda a, b: sparse.vstack([a, b], format="csr"), lambda X, i, j: X[i:j],
        ):  # fmt: skip
            arrays = compressed(part)
            yield lo, hi, ptr, arrays
            ptr += arrays[2].size

    def column_sums(self):
        return _column_sums_of((arrays for _, _, _, arrays in self), self.sweeper.p)

    def denominators(self, U, V):
        for lo, hi, ptr, arrays in self:
            D = self.D[ptr : ptr + arrays[2].size]
            denominators(arrays[0], arrays[1], U[lo:hi], V, D, self.sweeper.n_threads)
        return self.D

    def topic_counts(self, D, rows, u_old, shared, out, partial):
        V, lv, k, v_old, col_new, t = shared
        for lo, hi, ptr, arrays in self:
            c_lo, c_hi, starts = self.sweeper._chunks(lo, hi)
            topic_counts(*arrays, rows.E[lo:hi], V, rows.logs[lo:hi], lv,
                         D[ptr : ptr + arrays[2].size], k, out[lo:hi], partial[c_lo:c_hi], t,
                         u_old[lo:hi], v_old, rows.moved[lo:hi], col_new, starts,
                         self.sweeper.n_threads)  # fmt: skip

    def data_term(self, U, lu, mu, shared, out):
        V, lv, mv = shared
        for lo, hi, _, arrays in self:
            data_term(*arrays, U[lo:hi], V, lu[lo:hi], lv, mu[lo:hi], mv, out[lo:hi],
                      self.sweeper.n_threads)  # fmt: skip

    def close(self):
        self.D = None
        self._dir.cleanup()


def _assemble(lo, hi, n_features, *blocks):
    """The CSR arrays of rows ``lo:hi`` from the row chunks (``(first_row, arrays)``) that
    hold them."""
    pieces = []
    for a, arrays in blocks:
        X = _csr(arrays, n_features)
        pieces.append(X[max(lo - a, 0) : min(hi - a, X.shape[0])])
    return compressed(sparse.vstack(pieces, format="csr"))


class _ClusterParts:
    """The parts gathered once on the workers from the row chunks a ``DaskCounts`` keeps
    there, each with its denominators beside it; the client sends the factors a sweep needs
    and puts the results in order."""

    def __init__(self, sweeper, counts):
        self.sweeper, self.client = sweeper, counts.client
        client, p = self.client, sweeper.p
        chunks = [client.submit(first_row_and, a, rows, pure=False)
                  for rows, (a, _) in zip(counts.rows, counts.row_bounds)]  # fmt: skip
        self.futures = []
        for lo, hi in sweeper.part_bounds:
            held = [f for f, (a, b) in zip(chunks, counts.row_bounds) if a < hi and b > lo]
            self.futures.append(client.submit(_assemble, lo, hi, p, *held, pure=False))
        del chunks
        self.D = None

    def _shared(self, values):
        return self.client.scatter(values, broadcast=True, hash=False)

    def column_sums(self):
        return _column_sums_of(self.futures, self.sweeper.p, self.client)

    def denominators(self, U, V):
        V = self._shared(V)
        self.D = [
            self.client.submit(_denominators, part, U[lo:hi], V, pure=False)
            for part, (lo, hi) in zip(self.futures, self.sweeper.part_bounds)
        ]
        return self.D

    def topic_counts(self, D, rows, u_old, shared, out, partial):
        shared = self._shared(list(shared))
        results = []
        for part, d, (lo, hi) in zip(self.futures, D, self.sweeper.part_bounds):
            c_lo, c_hi, starts = self.sweeper._chunks(lo, hi)
            results.append(self.client.submit(
                _topic_counts, part, d, rows.E[lo:hi], rows.logs[lo:hi], u_old[lo:hi],
                rows.moved[lo:hi], starts, c_hi - c_lo, shared, pure=False))  # fmt: skip
        sums = self.client.gather([self.client.submit(_sums, r, pure=False) for r in results])
        for (lo, hi), (row_sums, chunk_sums) in zip(self.sweeper.part_bounds, sums):
            c_lo, c_hi, _ = self.sweeper._chunks(lo, hi)
            out[lo:hi], partial[c_lo:c_hi] = row_sums, chunk_sums
        D[:] = [self.client.submit(operator.getitem, r, 0, pure=False) for r in results]

    def data_term(self, U, lu, mu, shared, out):
        shared = self._shared(list(shared))
        futures = [
            self.client.submit(
                _data_term, part, U[lo:hi], lu[lo:hi], mu[lo:hi], shared, pure=False
            )  # fmt: skip
            for part, (lo, hi) in zip(self.futures, self.sweeper.part_bounds)
        ]
        for (lo, hi), rows in zip(self.sweeper.part_bounds, self.client.gather(futures)):
            out[lo:hi] = rows

    def close(self):
        self.futures = self.D = None
