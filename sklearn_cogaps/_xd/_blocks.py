"""Observations that need not fit in memory, read a block of points at a time.

The E-step's statistics are sums over points (Bovy, Hogg & Roweis 2011, section 3.1), which
the compiled kernel adds up per chunk of points, the chunks a function of the number of
points alone (:func:`~._estep.chunk_starts`). Out of core, the points are read in parts
cut at chunk bounds, each part's chunks summed by the same kernel and the chunks' sums
added in their order as in memory: batch EM reads its data by parts and equals the
in-memory fit to the bit, wherever the parts are computed.

The sources of ``X`` are those of :class:`~sklearn_cogaps._utils._blocks.RowBlocks` that hold
dense values (a Dask array, an HDF5 or zarr dataset, a backed AnnData's dense ``.X``); the
noise, per-point projections and weights may be arrays in memory or sources of the same
kinds, a Dask array then cut into X's row chunks. With a ``dask.distributed`` client active,
the parts of a Dask array are kept on the workers (:class:`_ClusterParts`) and their
statistics computed there; otherwise every pass reads the source again (:class:`_LocalParts`).
"""

import copy

import numpy as np
from scipy import sparse

from .._utils import _blocks as _row_blocks
from .._utils._blocks import (
    RowBlocks,
    chunk_aligned_parts,
    is_dask_array,
    is_out_of_core,
    stream_parts,
)
from .._utils._seeding import draw_seeds
from .._utils._validation import check_not_masked
from ._data import MASKED_ADVICE, Observations, is_incomplete, observations
from ._estep import chunk_starts, chunk_stats, chunk_weights, log_prob, reduce_stats

__all__ = ["ObservationBlocks", "START_POINTS", "start_index"]

#: Points, drawn at random without replacement, from which the start of a fit out of core is
#: computed (every point when there are fewer): the k-means start of a mixture needs many
#: fewer points than the fit.
START_POINTS = 100_000


_SPARSE = (
    "ExtremeDeconvolution reads dense observations; X is a sparse matrix. Store the points "
    "as a dense array (NaN for missing coordinates)."
)


def start_index(n, rng):
    """The points a start is computed from, in memory as out of core: None (all of them)
    for at most ``START_POINTS`` points, else that many drawn without replacement from
    ``rng``, sorted. Drawn by a ``Generator`` seeded from ``rng``, whose sampling without
    replacement keeps a set of the drawn points where ``RandomState.choice`` permutes all n
    (8 bytes a point: 7.6 GB for a billion stars)."""
    if n <= START_POINTS:
        return None
    sampler = np.random.default_rng(draw_seeds(rng))
    return np.sort(sampler.choice(n, START_POINTS, replace=False))


def _check_side_shape(name, shape, X_shape):
    """Refuse a side input whose shape is not one of those of the in-memory fit, with X's
    number of points (not a block's)."""
    n, p = X_shape
    if name == "X_cov" and shape not in ((n, p), (n, p, p)):
        raise ValueError(
            f"X_cov must have shape (n_samples, n_features) = {(n, p)} for variances or "
            f"(n_samples, n_features, n_features) = {(n, p, p)} for covariances; got {shape}."
        )
    if name == "projection" and (len(shape) != 3 or shape[:2] != (n, p)):
        raise ValueError(
            f"projection must have shape (n_features, n_dims) or (n_samples, n_features, "
            f"n_dims) with n_samples = {n} and n_features = {p}; got {shape}."
        )
    if name == "sample_weight" and shape != (n,):
        raise ValueError(f"sample_weight must have shape (n_samples,) = {(n,)}; got {shape}.")


def _side_inputs(X_blocks, X_cov, projection, sample_weight):
    """The per-point inputs besides X (name -> array or source), checked against X's rows;
    a shared projection (2-D) is returned apart."""
    x_dask = X_blocks.kind == "dask"
    sides, shared = {}, None
    for name, value in (("X_cov", X_cov), ("projection", projection),
                        ("sample_weight", sample_weight)):  # fmt: skip
        if value is None:
            continue
        if not (is_out_of_core(value) or hasattr(value, "__array__")):
            value = np.asarray(value)
        if name == "projection" and len(value.shape) == 2:
            shared = np.asarray(value)
            continue
        _check_side_shape(name, tuple(int(v) for v in value.shape), X_blocks.shape)
        if is_dask_array(value):
            if np.any(np.isnan(np.asarray(value.shape, float))):
                raise ValueError(
                    f"The Dask array {name} has unknown chunk sizes; compute them first: "
                    f"{name}.compute_chunk_sizes()."
                )
            if any(len(c) != 1 for c in value.chunks[1:]):
                raise ValueError(
                    f"The Dask array {name} is chunked along its axis of coordinates; each "
                    f"point's values must be read together. Rechunk it: "
                    f"{name}.rechunk({{{', '.join(f'{a}: -1' for a in range(1, value.ndim))}}})."
                )
            if x_dask and tuple(value.chunks[0]) != tuple(X_blocks.source.chunks[0]):
                raise ValueError(
                    f"The Dask arrays X and {name} have different chunks of points "
                    f"({_describe(X_blocks.source.chunks[0])} against "
                    f"{_describe(value.chunks[0])}); a block of points is read with its "
                    f"{name}. Rechunk it as X: {name}.rechunk({{0: X.chunks[0]}})."
                )
        sides[name] = value
    return sides, shared


def _describe(chunks):
    chunks = list(chunks)
    return f"{len(chunks)} chunks, the first of {chunks[0]}" if chunks else "no chunks"


def _check_rows(arrays, a, b, p, index, what="Chunk"):
    """Refuse a block (or a Dask array's chunk) of points ``a:b`` whose arrays do not have
    the rows, and X not the coordinates, its place declares."""
    for name, value in arrays.items():
        shape = tuple(np.shape(value))
        expected = (b - a, p) if name == "X" else (b - a, *shape[1:])
        if shape[:2] != expected[:2]:
            raise ValueError(
                f"{what} {index} (points {a} to {b}) of {name} has shape {shape}; expected "
                f"{expected}. The source's chunks do not match its shape."
            )


class _Piece:
    """The raw arrays of consecutive points (X and the per-point side inputs), from row
    ``lo``."""

    def __init__(self, lo, arrays):
        self.lo, self.arrays = lo, arrays

    @property
    def hi(self):
        return self.lo + self.arrays["X"].shape[0]

    def cut(self, a, b):
        return _Piece(a, {k: v[a - self.lo : b - self.lo] for k, v in self.arrays.items()})

    def join(self, other):
        if other is None:
            return self
        return _Piece(other.lo, {k: np.concatenate([other.arrays[k], v])
                                 for k, v in self.arrays.items()})  # fmt: skip


def _as_observations(piece, dtype, shared, d, n_total, check):
    """Checked :class:`Observations` of a piece."""
    X = np.ascontiguousarray(np.asarray(piece.arrays["X"]), dtype=dtype)
    if X.ndim != 2:
        raise ValueError(f"X must be 2-D; a block has shape {X.shape}.")
    if check and np.isinf(X).any():
        bad = int(np.flatnonzero(np.isinf(X).any(axis=1))[0])
        raise ValueError(
            f"X contains infinity (point {piece.lo + bad}); NaN marks a missing coordinate, "
            "infinity is not a value. Replace it by NaN or a finite value."
        )
    arrays = piece.arrays
    projection = arrays.get("projection", shared)
    return observations(
        X,
        arrays.get("X_cov"),
        projection,
        arrays.get("sample_weight"),
        d,
        n_total,
        piece.lo,
        check=check,
    )


class ObservationBlocks:
    """Observations read a part at a time; the parts are cut at the E-step's chunk bounds.

    Parameters
    ----------
    X : object
        A dense out-of-core source (:class:`~sklearn_cogaps._utils._blocks.RowBlocks`).
    X_cov, projection, sample_weight : array-like, source or None
        As in ``ExtremeDeconvolution.fit``.
    d : int or None
        The fitted dimension of v (None in ``fit``).
    client : distributed.Client or None
        Keep the parts of a Dask array on this cluster.
    summarise : bool, default=True
        Read and check every part now, for the points' total weight and layout (a fit);
        False for one pass that checks the blocks as it reads them (:meth:`chunks`, the
        predictions), with the parts read locally.
    start_rng : RandomState or None, default=None
        The fit's generator, as :meth:`start_sample` will receive it: the points of the
        first start are then taken in the summary's pass (from a copy of the generator),
        rather than in a pass of their own.

    Attributes
    ----------
    n, dtype, noise_mode, n_dims, projected, total, incomplete
        As the in-memory :class:`Observations` (``total`` summed part by part,
        ``incomplete``: whether any point misses a coordinate).
    """

    def __init__(self, X, X_cov, projection, sample_weight, d=None, client=None, summarise=True,
                 start_rng=None):  # fmt: skip
        probe = RowBlocks(X)
        meta = getattr(probe.source, "_meta", None)
        if probe.format is not None or sparse.issparse(meta) or hasattr(meta, "to_scipy_sparse"):
            raise TypeError(_SPARSE)
        n, p = probe.shape
        # about BLOCK_ENTRIES values a block, the side inputs counted
        values = p + (0 if X_cov is None else int(np.prod(X_cov.shape[1:])))
        if projection is not None and len(projection.shape) == 3:
            values += int(np.prod(projection.shape[1:]))
        self.blocks = RowBlocks(X, block_entries=max(1, _row_blocks.BLOCK_ENTRIES * p // values))
        self.sides, self.shared = _side_inputs(self.blocks, X_cov, projection, sample_weight)
        source_dtype = getattr(self.blocks.source, "dtype", None)
        self.dtype = np.dtype(np.float32 if source_dtype == np.float32 else np.float64)
        self.n, self.p, self.d = n, p, d
        self.starts = chunk_starts(n)
        self.part_bounds = chunk_aligned_parts(self.starts, self.blocks.bounds)
        if client is not None and self.blocks.kind == "dask":
            self.parts = _ClusterParts(self, client)
        else:
            self.parts = _LocalParts(self)
        self._start = None
        if summarise:
            take = None
            if start_rng is not None:
                index = self._start_index(copy.deepcopy(start_rng))
                take = self._take_per_part(index)
            header, self.total, self.incomplete, sample = self.parts.summary(take)
            self.noise_mode, self.R, self.n_dims, self.projected = header
            if sample is not None:
                self._start = (index, Observations.concatenate(sample))

    def piece(self, index):
        """Block ``index`` of the source (rows of X and of its side inputs) as a piece."""
        a, b = self.blocks.bounds[index]
        arrays = {"X": self._read_X(index)}
        for name, value in self.sides.items():
            if is_dask_array(value) and self.blocks.kind == "dask":
                arrays[name] = value.blocks[self.blocks.chunk_index[index]]
            else:
                arrays[name] = value[a:b]  # lazy for a Dask array
        lazy = {k: v for k, v in arrays.items() if is_dask_array(v)}
        if lazy:
            import dask

            arrays.update(zip(lazy, dask.compute(*lazy.values())))
        if sparse.issparse(arrays["X"]) or hasattr(arrays["X"], "to_scipy_sparse"):
            raise TypeError(_SPARSE)
        for name, value in arrays.items():  # np.asarray would drop a mask
            # NaN marks a coordinate not measured in X only; the side inputs get the
            # generic advice, as in memory
            check_not_masked(value, name, first_row=a,
                             advice=MASKED_ADVICE if name == "X" else None)  # fmt: skip
        arrays = {k: np.asarray(v) for k, v in arrays.items()}
        chunk = self.blocks.chunk_index[index] if self.blocks.kind == "dask" else None
        _check_rows(arrays, a, b, self.p, chunk if chunk is not None else index,
                    "Chunk" if chunk is not None else "Block")  # fmt: skip
        return _Piece(a, arrays)

    def _read_X(self, index):
        blocks = self.blocks
        a, b = blocks.bounds[index]
        if blocks.kind == "dask":
            return blocks.source.blocks[blocks.chunk_index[index], 0]
        return blocks.source[a:b]

    def observations(self, piece, check=False):
        return _as_observations(piece, self.dtype, self.shared, self.d, self.n, check)

    def chunks(self):
        """Every block of the source as checked :class:`Observations`, in order (the
        minibatches of ``partial_fit``: a Dask array's chunks)."""
        for index in range(len(self.blocks)):
            yield self.observations(self.piece(index), check=True)

    def part_starts(self, lo, hi):
        """The chunk bounds of the part of points ``lo:hi``."""
        i, j = np.searchsorted(self.starts, [lo, hi])
        return self.starts[i : j + 1]

    # -- what the fit needs: the same calls as on Observations -------------------------

    def mean_weight(self):
        return self.total / self.n

    def estep(self, params, n_threads, reg_covar):
        return reduce_stats(self.parts.map(_part_stats, params, reg_covar, n_threads))

    def log_prob(self, params, reg_covar, posterior=False):
        """The per-point results of :func:`log_prob`, concatenated in the points' order."""
        parts = self.parts.map(_part_log_prob, params, reg_covar, posterior)
        return tuple(np.concatenate([part[k] for part in parts]) for k in range(3))

    def reduce(self, task, *args):
        """``task(observations, *args)`` of every part, in order."""
        return self.parts.map(_part_task, task, *args)

    def start_sample(self, rng):
        """The points the start is computed from: all when there are at most
        ``START_POINTS``, else that many drawn without replacement, in their order. The
        first start's points were read with the summary when the generator was given then;
        a later start of ``n_init`` reads its own."""
        index = self._start_index(rng)
        kept, self._start = self._start, None
        if kept is not None and (
            kept[0] is index if index is None else np.array_equal(kept[0], index)
        ):
            return kept[1]
        return Observations.concatenate(self.parts.take(self._take_per_part(index)))

    def _start_index(self, rng):
        """The points of a start (None: all), drawn from ``rng``."""
        return start_index(self.n, rng)

    def _take_per_part(self, index):
        if index is None:
            return [None] * len(self.part_bounds)
        return [index[(index >= a) & (index < b)] - a for a, b in self.part_bounds]

    def minibatches(self, rng, batch_size):
        """An epoch of the stochastic solvers: the parts in a random order, the points of
        each in a random order, ``batch_size`` at a time (one part: as in memory)."""
        order = rng.permutation(len(self.part_bounds)) if len(self.part_bounds) > 1 else [0]
        for index in order:
            yield from self.parts.get(int(index)).minibatches(rng, batch_size)


# ---------------------------------------------------------------------------------------------
# Tasks on a part (run where the part is)
# ---------------------------------------------------------------------------------------------


def _part_stats(data, lo, starts, params, reg_covar, n_threads):
    return chunk_stats(data, params, n_threads, reg_covar, starts, lo)


def _part_log_prob(data, lo, starts, params, reg_covar, posterior):
    return log_prob(data, params, reg_covar, posterior)


def _part_task(data, lo, starts, task, *args):
    return task(data, *args)


def _summary(data, lo, starts):
    """The layout of a part, its chunks' weights and whether it misses a coordinate."""
    return _header(data), chunk_weights(data.sample_weight, starts, lo), is_incomplete(data)


def _take(data, idx):
    return data if idx is None else data.take(idx)


def _summary_and_take(data, lo, starts, idx, sample):
    """A part's summary and, if ``sample``, its points ``idx`` (None: all)."""
    return _summary(data, lo, starts), _take(data, idx) if sample else None


def _total(summaries):
    """The first part's layout, the total weight of the points and whether any misses a
    coordinate, from the parts' summaries."""
    weights = np.concatenate([summary[1] for summary in summaries])
    return summaries[0][0], float(weights.sum()), any(summary[2] for summary in summaries)


def _header(data):
    """The layout the points share (noise, projection), from a part."""
    d = data.R.shape[1] if data.R is not None else (
        data.Rproj.shape[2] if data.Rproj.shape[0] else data.X.shape[1])  # fmt: skip
    return data.noise_mode, data.R, int(d), data.R is not None or data.Rproj.shape[0] > 0


class _LocalParts:
    """The parts of a source read in order, each pass anew, with a block's worth of points
    in memory (the whole chunks a block completes, the rest carried to the next)."""

    def __init__(self, blocks):
        self.blocks = blocks
        self.checked = False

    def __iter__(self):
        """``(lo, hi, observations)`` of every part, in order."""
        blocks = self.blocks
        pieces = ((a, blocks.piece(index)) for index, (a, _) in enumerate(blocks.blocks.bounds))
        for lo, hi, piece in stream_parts(
            pieces, blocks.part_bounds, lambda p: p.hi - p.lo, lambda a, b: b.join(a),
            lambda p, i, j: p.cut(p.lo + i, p.lo + j),
        ):  # fmt: skip
            yield lo, hi, blocks.observations(piece, check=not self.checked)
        self.checked = True

    def summary(self, take=None):
        """The points' layout, their total weight (every part read and checked) and, with
        ``take``, the points it names of every part (else None)."""
        summaries, sample = [], []
        for lo, hi, data in self:
            summaries.append(_summary(data, lo, self.blocks.part_starts(lo, hi)))
            if take is not None:
                sample.append(_take(data, take[len(sample)]))
        return (*_total(summaries), sample if take is not None else None)

    def map(self, task, *args):
        return [task(data, lo, self.blocks.part_starts(lo, hi), *args) for lo, hi, data in self]

    def take(self, take):
        return [_take(data, idx) for (_, _, data), idx in zip(self, take)]

    def get(self, index):
        """Part ``index`` alone, read from the blocks that hold it."""
        blocks = self.blocks
        lo, hi = blocks.part_bounds[index]
        piece = None
        for k, (a, b) in enumerate(blocks.blocks.bounds):
            if a < hi and b > lo:
                piece = blocks.piece(k).join(piece)
        return blocks.observations(piece.cut(lo, hi))


def _checked_block(a, b, p, chunk, names, *values):
    """``(a, *values)``: chunk ``chunk`` of points ``a:b`` (X and its side inputs) as one
    task's result on a cluster, refused if its arrays do not have the declared rows."""
    _check_rows(dict(zip(names, values)), a, b, p, chunk)
    return (a, *values)


def _assemble(lo, hi, dtype, shared, d, n_total, names, *blocks):
    """A part of points ``lo:hi``, checked, from the row blocks (``(a, arrays...)``) that
    hold them."""
    pieces = []
    for block in blocks:
        a, arrays = block[0], dict(zip(names, (np.asarray(x) for x in block[1:])))
        b = a + arrays["X"].shape[0]
        pieces.append(_Piece(a, arrays).cut(max(a, lo), min(b, hi)))
    piece = pieces[0]
    for later in pieces[1:]:
        piece = later.join(piece)
    return _as_observations(piece, dtype, shared, d, n_total, True)


class _ClusterParts:
    """The parts of a Dask array kept on the workers of a ``dask.distributed`` cluster,
    made once from its chunks; every task on a part runs where it is, the client gathers
    the results in the parts' order."""

    def __init__(self, blocks, client):
        self.blocks, self.client = blocks, client
        names = ["X", *blocks.sides]
        sources = [blocks.blocks.source, *blocks.sides.values()]
        per_block = []
        for index, (a, b) in enumerate(blocks.blocks.bounds):
            arrays = []
            for source in sources:
                if is_dask_array(source):
                    chunk = blocks.blocks.chunk_index[index]
                    arrays.append(source.blocks[(chunk,) + (0,) * (source.ndim - 1)])
                else:
                    arrays.append(np.asarray(source[a:b]))
            per_block.append((a, b, arrays))
        lazy = [x for _, _, arrays in per_block for x in arrays if is_dask_array(x)]
        futures = iter(client.compute(lazy))
        raw = []
        for index, (a, b, arrays) in enumerate(per_block):
            values = [next(futures) if is_dask_array(x) else x for x in arrays]
            chunk = blocks.blocks.chunk_index[index]
            raw.append(client.submit(_checked_block, a, b, blocks.p, chunk, names, *values,
                                     pure=False))  # fmt: skip
        self.futures = []
        for lo, hi in blocks.part_bounds:
            held = [f for f, (a, b) in zip(raw, blocks.blocks.bounds) if a < hi and b > lo]
            self.futures.append(client.submit(
                _assemble, lo, hi, blocks.dtype, blocks.shared, blocks.d, blocks.n, names,
                *held, pure=False))  # fmt: skip
        del raw, futures

    def _scatter(self, args):
        return [
            self.client.scatter(x, broadcast=True, hash=False)
            if isinstance(x, (np.ndarray, tuple)) and not isinstance(x, str)
            else x
            for x in args
        ]

    def summary(self, take=None):
        """As :meth:`_LocalParts.summary`, each part's share computed where it is."""
        per_part = take if take is not None else [None] * len(self.futures)
        results = self.client.gather([
            self.client.submit(_summary_and_take, part, lo, self.blocks.part_starts(lo, hi),
                               idx, take is not None, pure=False)
            for part, (lo, hi), idx in zip(self.futures, self.blocks.part_bounds, per_part)
        ])  # fmt: skip
        sample = [r[1] for r in results] if take is not None else None
        return (*_total([r[0] for r in results]), sample)

    def map(self, task, *args):
        if task is _part_stats:
            args = args[:-1] + (None,)  # the workers' own thread counts
        args = self._scatter(args)
        futures = [
            self.client.submit(
                task, part, lo, self.blocks.part_starts(lo, hi), *args, pure=False
            )  # fmt: skip
            for part, (lo, hi) in zip(self.futures, self.blocks.part_bounds)
        ]
        return self.client.gather(futures)

    def take(self, take):
        return self.client.gather([
            self.client.submit(_take, part, idx, pure=False)
            for part, idx in zip(self.futures, take)
        ])  # fmt: skip

    def get(self, index):
        return self.futures[index].result()
