"""Matrices that need not fit in memory, read a block of rows at a time.

A fit whose updates are sums over rows (the Poisson models' passes) can read its data in
consecutive blocks of rows, with memory bounded by one block and the model. The sources:

* a backed AnnData (``anndata.read_h5ad(path, backed="r")``): its ``.X``, CSR or dense;
* anndata's backed sparse dataset of a layer (``anndata.io.sparse_dataset(group)``), or
  the HDF5 or zarr group of a sparse matrix in an .h5ad or .zarr store itself;
* an HDF5 (h5py) or zarr 2-D dataset of dense values;
* a Dask array (its own row chunks are the blocks; a single chunk along the columns).

Optional packages are recognised by their modules, never imported here.
"""

import numpy as np
from scipy import sparse

from ._validation import canonical_csr, check_not_masked

__all__ = [
    "BLOCK_ENTRIES",
    "RowBlocks",
    "canonical_block",
    "chunk_aligned_parts",
    "stream_parts",
    "current_client",
    "first_row_and",
    "is_dask_array",
    "is_out_of_core",
]

#: Stored entries (sparse) or values (dense) read at a time from a source without chunks
#: of its own: about 50 MB of CSR data and indices.
BLOCK_ENTRIES = 2**22


def _module(obj):
    return (type(obj).__module__ or "").split(".")[0]


def _backed_matrix(X):
    """The matrix of a backed AnnData when it is read from the file, or None (a view of a
    backed AnnData holds its subset in memory)."""
    if _module(X) == "anndata" and hasattr(X, "X") and getattr(X, "isbacked", False):
        matrix = X.X
        return matrix if _kind(matrix) is not None else None
    return None


def _encoding(X):
    """The anndata encoding of an HDF5 or zarr group (``"csr_matrix"``...), or None."""
    try:
        encoding = X.attrs.get("encoding-type", None)
    except AttributeError:
        return None
    return encoding.decode() if isinstance(encoding, bytes) else encoding


def is_dask_array(obj):
    """Whether ``obj`` is a Dask array (recognised by its module, never imported here)."""
    return _kind(obj) == "dask"


def chunk_aligned_parts(starts, block_bounds):
    """Parts of rows cut at chunk bounds: for each block of the source, the whole chunks
    that end in it and have not started in an earlier one (empty parts dropped).

    A fit that adds its sums per fixed chunk of rows and then the chunks' sums in order
    (the E-step of extreme deconvolution, the sweeps of WeightedBackgroundPMF) gives the same
    bits over these parts as over the whole data: each chunk is summed whole, by one call.

    Parameters
    ----------
    starts : ndarray of int
        The first row of every chunk, and the number of rows.
    block_bounds : list of (int, int)
        The source's blocks of rows, in order.

    Returns
    -------
    parts : list of (int, int)
        The first row and one past the last of every part.
    """
    ends = [0]
    for _, b in block_bounds:
        ends.append(int(starts[np.searchsorted(starts, b, "right") - 1]))
    return [(a, b) for a, b in zip(ends[:-1], ends[1:]) if b > a]


def stream_parts(blocks, part_bounds, rows, join, cut):
    """The parts of :func:`chunk_aligned_parts` from the source's blocks read in order, with
    one block and the rows carried from the previous one in memory.

    Parameters
    ----------
    blocks : iterable of (int, object)
        Every block with its first row, in order.
    part_bounds : list of (int, int)
        The parts, from :func:`chunk_aligned_parts` of the blocks' bounds.
    rows, join, cut : callable
        ``rows(block)`` its number of rows; ``join(first, second)`` the rows of both, in
        order; ``cut(block, i, j)`` its rows ``i:j``.

    Yields
    ------
    lo, hi, part
        The first row and one past the last of every part, and its rows.
    """
    carry, carry_lo, k = None, 0, 0
    for a, block in blocks:
        piece, first = (block, a) if carry is None else (join(carry, block), carry_lo)
        end = first + rows(piece)
        while k < len(part_bounds) and part_bounds[k][1] <= end:
            lo, hi = part_bounds[k]
            yield lo, hi, cut(piece, lo - first, hi - first)
            k += 1
        carry_lo = part_bounds[k - 1][1] if k else 0
        carry = cut(piece, carry_lo - first, end - first)


def first_row_and(a, *values):
    """``(a, *values)``: a block's arrays with its first row, as one task's result on a
    cluster (the futures of the block's arrays become one)."""
    return (a, *values)


def current_client():
    """The ``dask.distributed`` client that computes Dask collections now, or None."""
    try:
        from distributed import default_client
    except ImportError:
        return None
    try:
        return default_client()
    except ValueError:
        return None


def is_out_of_core(X):
    """Whether ``X`` is read a block of rows at a time (see the module's docstring)."""
    if _backed_matrix(X) is not None:
        return True
    return _kind(X) is not None


def _kind(X):
    module = _module(X)
    if module == "h5py" and hasattr(X, "id") and not X.id.valid:
        # h5py's own error on any read of it is "Unable to synchronously get dataspace"
        raise ValueError(
            f"X is an HDF5 {type(X).__name__.lower()} of a file that has been closed. Fit "
            "while the file is open: with h5py.File(path) as f: estimator.fit(f['X'])."
        )
    if module == "dask" and hasattr(X, "chunks") and hasattr(X, "blocks"):
        return "dask"
    if module == "anndata" and hasattr(X, "format") and hasattr(X, "group"):
        return "sparse_dataset"
    if module in ("h5py", "zarr") and _encoding(X) in ("csr_matrix", "csc_matrix"):
        return "sparse_group"  # the group of a sparse matrix in an .h5ad or .zarr store
    if module in ("h5py", "zarr") and hasattr(X, "shape") and hasattr(X, "dtype"):
        return "dense_dataset"
    if module in ("h5py", "zarr") and hasattr(X, "keys"):
        # a file or a group that holds matrices, not a matrix
        members = ", ".join(sorted(X.keys())[:6]) or "nothing"
        raise ValueError(
            f"X is an {module} {type(X).__name__.lower()} that holds {members}, not a matrix: "
            "pass the matrix in it, for example f['X'] or f['layers/counts'] of an .h5ad."
        )
    return None


def _refuse_complex(dtype):
    """Complex data, refused as scikit-learn refuses them in memory (a cast to float64 would
    drop the imaginary parts)."""
    if np.dtype(dtype).kind == "c":
        raise ValueError(
            f"Complex data not supported: X has dtype {np.dtype(dtype)}. Pass its real part "
            "or its absolute values."
        )


def canonical_block(block, first_row=None):
    """A block as a canonical float64 CSR matrix (:func:`canonical_csr`); ``first_row``, its
    place in the whole data, for the messages."""
    check_not_masked(block, "X", first_row=first_row)
    if hasattr(block, "to_scipy_sparse"):  # pydata/sparse arrays from a Dask array
        block = block.to_scipy_sparse()
    _refuse_complex(getattr(block, "dtype", np.asarray(block).dtype))
    if not sparse.issparse(block):
        block = np.asarray(block, dtype=np.float64)
        if block.ndim != 2:
            raise ValueError(f"A block of rows must be 2-D; got shape {block.shape}.")
    return canonical_csr(block)


class RowBlocks:
    """Consecutive blocks of rows of an out-of-core matrix, each read as CSR when used.

    Parameters
    ----------
    X : object
        A source listed in the module's docstring.
    block_entries : int, default=BLOCK_ENTRIES
        Entries per block for the sources without chunks of their own.
    group_chunks : bool, default=False
        For a Dask array, read consecutive chunks together, as many as hold at most
        ``block_entries`` values at their dense size (at least one chunk a block): each
        read of a chunk is a Dask computation of its own, whose cost small chunks would
        repeat at every pass. Only where the blocks are read here, not where a cluster
        keeps the chunks or the chunks are the minibatches.

    Attributes
    ----------
    shape : tuple of int
        The matrix's shape.
    bounds : list of (int, int)
        The first row and one past the last of every block, in order.
    chunk_index : list of int or None
        For a Dask array, the index of every block's chunk (its empty chunks are no
        blocks); None when the chunks are grouped (``chunk_groups``).
    chunk_groups : list of list of int or None
        For a Dask array read with ``group_chunks``, the indices of every block's chunks.
    """

    def __init__(self, X, block_entries=None, group_chunks=False):
        block_entries = int(block_entries or BLOCK_ENTRIES)
        self.chunk_groups = None
        matrix = _backed_matrix(X)
        self.source = matrix if matrix is not None else X
        self.kind = _kind(self.source)
        if self.kind is None:
            # a backed AnnData's .X that is not a dataset (anndata reads some layouts whole)
            raise TypeError(f"{type(self.source).__name__} is not an out-of-core matrix.")
        if self.kind == "dask" and np.any(np.isnan(np.asarray(self.source.shape, float))):
            raise ValueError(
                "The Dask array X has unknown chunk sizes (after a filter of its rows, for "
                "example): the model needs them to place its blocks. Compute them first: "
                "X.compute_chunk_sizes()."
            )
        if self.kind == "sparse_group":
            self.group = self.source
            self.format = _encoding(self.source)[:3]
            shape = self.source.attrs["shape"]
            _refuse_complex(self.group["data"].dtype)
        else:
            self.group = getattr(self.source, "group", None)
            self.format = getattr(self.source, "format", None)
            shape = self.source.shape
            _refuse_complex(self.source.dtype)
        if len(shape) != 2:
            raise ValueError(f"X must be 2-D; got shape {tuple(shape)}.")
        self.shape = tuple(int(s) for s in shape)
        n, p = self.shape
        if n == 0 or p == 0:
            # the whole data's shape, where a block's check would name the block's
            raise ValueError(
                f"Found array with {n} sample(s) and {p} feature(s) (shape={self.shape}) "
                "while a minimum of 1 of each is required."
            )
        if self.kind == "dask":
            if self.source.numblocks[1] != 1:
                raise ValueError(
                    f"The Dask array X has {self.source.numblocks[1]} chunks along its columns; "
                    "the model reads whole rows at a time. Rechunk it to one chunk of "
                    "columns: X.rechunk({1: -1})."
                )
            # a filter of the rows may leave empty chunks: the blocks are the others
            sizes = np.asarray(self.source.chunks[0], dtype=np.int64)
            self.chunk_index = [int(i) for i in np.flatnonzero(sizes > 0)]
            edges = np.concatenate([[0], np.cumsum(sizes[sizes > 0])])
        elif self.kind in ("sparse_dataset", "sparse_group"):
            if self.format != "csr":
                raise ValueError(
                    f"The backed matrix is stored as {self.format.upper()}; the model "
                    "reads blocks of rows, which a CSC file does not store together. Write "
                    "the counts as CSR (for example adata.X = adata.X.tocsr() before "
                    "write_h5ad), or load them: adata.to_memory()."
                )
            indptr = np.asarray(self.group["indptr"][...], dtype=np.int64)
            self._indptr = indptr
            # blocks of about block_entries stored entries, at least one row each
            cuts = np.searchsorted(indptr, np.arange(0, indptr[-1], block_entries), "right")
            edges = np.unique(np.concatenate([[0], cuts - 1, [n]]))
        else:
            rows = max(1, block_entries // max(p, 1))
            edges = np.unique(np.concatenate([np.arange(0, n, rows), [n]]))
        edges = np.unique(np.clip(edges, 0, n))
        if edges.size == 1:
            edges = np.array([0, n])
            if self.kind == "dask":
                self.chunk_index = [0]
        if self.kind == "dask" and group_chunks:
            edges = self._group(edges, max(1, block_entries // max(p, 1)))
        self.bounds = [(int(a), int(b)) for a, b in zip(edges[:-1], edges[1:])]

    def _group(self, edges, rows):
        """The edges of groups of consecutive chunks of at most ``rows`` rows together
        (a larger chunk alone), and ``chunk_groups``."""
        groups, kept = [[self.chunk_index[0]]], [edges[0], edges[1]]
        for i, b in zip(self.chunk_index[1:], edges[2:]):
            if b - kept[-2] <= rows:
                groups[-1].append(i)
                kept[-1] = b
            else:
                groups.append([i])
                kept.append(b)
        self.chunk_groups, self.chunk_index = groups, None
        return np.asarray(kept)

    def read(self, index):
        """Block ``index`` as a canonical float64 CSR matrix."""
        a, b = self.bounds[index]
        if self.kind == "dask" and self.chunk_groups is not None:
            import dask

            group = self.chunk_groups[index]
            chunks = dask.compute(*[self.source.blocks[i, 0] for i in group])
            pieces = [canonical_block(c, a) for c in chunks]
            # each chunk against its declared size, as a block alone would be
            first = a
            for i, piece in zip(group, pieces):
                rows = int(self.source.chunks[0][i])
                if piece.shape != (rows, self.shape[1]):
                    raise ValueError(
                        f"Chunk {i} (rows {first} to {first + rows}) of X has shape "
                        f"{piece.shape}; expected {(rows, self.shape[1])}. The source's chunks "
                        "do not match its shape."
                    )
                first += rows
            block = pieces[0] if len(pieces) == 1 else sparse.vstack(pieces, format="csr")
        elif self.kind == "dask":
            block = self.source.blocks[self.chunk_index[index], 0].compute()
        elif self.kind in ("sparse_dataset", "sparse_group"):
            # the rows' slices of the stored arrays, read directly (h5py or zarr)
            group, indptr = self.group, self._indptr
            s, e = int(indptr[a]), int(indptr[b])
            block = sparse.csr_matrix(
                (group["data"][s:e], group["indices"][s:e], indptr[a : b + 1] - s),
                shape=(b - a, self.shape[1]),
            )
        else:
            block = self.source[a:b]
        block = canonical_block(block, a)
        if block.shape != (b - a, self.shape[1]):
            raise ValueError(
                f"Block {index} (rows {a} to {b}) of X has shape {block.shape}; expected "
                f"{(b - a, self.shape[1])}. The source's chunks do not match its shape."
            )
        return block

    def __len__(self):
        return len(self.bounds)

    def __iter__(self):
        """``(first_row, block)`` for every block, in order."""
        for index, (a, _) in enumerate(self.bounds):
            yield a, self.read(index)
