"""The CoGAPS sampler: the state of one chain of a fit (both atomic domains, both matrices,
the residual in both orientations, the master generator), its iterations, posterior sums and
saved state; and the per-row chains of ``transform`` (Sherman, Gao & Fertig 2019, sections 1 and 4).

The model's structures and statistics are in ``_stats.pxd``, the updates in
``_proposals``, the queue in ``_queue`` and the dense and sparse helpers in
``_chisq``.
"""

import numpy as np

from cython cimport floating
from cython.parallel cimport prange
from libc.math cimport sqrt, fmax
from libc.stdint cimport uint64_t, int64_t, int32_t
from libc.stdlib cimport malloc, free, calloc
from libc.string cimport memcpy

from .._utils._rng cimport Rng, rng_seed
from ._atomic_domain cimport (AtomicDomain, domain_init, domain_free,
                                     domain_insert)
from .._utils._status cimport FAIL_NO_MEMORY, FAIL_NOT_FINITE, SITE_COGAPS_ROWS, item_status
from .._utils._status import raise_for_status
from ._stats cimport Half, Proposal, _lookup_tables
from ._proposals cimport _freeze_count, _half_init, _sequential_half
from ._queue cimport MAX_BATCH, parallel_min_entries, _queued_half
from ._chisq cimport _transpose, _residual_rows
from ._row_sums cimport cg_residual_row_f32
from ._chisq import (padded_empty, residual_row_stride, chi_square, fit_chi_square,
                            residual, sparse_chi_square, _sparse_orientation)
from ._queue import _set_parallel_thresholds_for_tests


cdef class GibbsSampler:
    """State of one CoGAPS chain: both atomic domains, both matrices, the residual in both
    orientations and the master generator.

    Parameters
    ----------
    R : ndarray of shape (n_samples, n_features)
        The residual X - W Ht^T of the starting matrices (X itself for a fresh chain).
        float64, or float32 to store the residual and the precisions in single precision
        (then ``X`` is required).
    prec : ndarray of shape (n_samples, n_features)
        Precisions 1 / uncertainty**2, of R's dtype.
    W : ndarray of shape (n_samples, n_components)
        Starting patterns (zeros for a fresh chain; the sum of the atoms otherwise).
    Ht : ndarray of shape (n_features, n_components)
        Starting amplitudes.
    alpha_w, alpha_h : float
        Sparsity of each matrix.
    lam_w, lam_h : float
        Rates of the exponential mass priors.
    max_mass_w, max_mass_h : float
        Gibbs mass caps, in units of 1 / lam.
    seed : int
        Seed of the master generator (ignored when ``state`` is given).
    state : dict or None
        Atoms and generator state from :meth:`get_state`, to continue a chain.
    sparse_data : tuple or None, default=None
        For the sparse-data model (R and prec are then None): ``(rows, cols, sigma0)`` or
        ``(rows, cols, sigma0, poisson)``, X as a canonical CSR and its transpose as one,
        the standard deviation of a zero (relative one of a non-zero), and whether a
        non-zero's is ``max(sqrt(x), 1)`` instead (default False).
    fixed : {None, "W", "H"}, default=None
        The matrix held fixed at its starting value (CoGAPS's ``whichMatrixFixed``): its
        half-iterations are skipped, its domain stays empty, and neither matrix is
        rescaled when samples are accumulated.
    reversible : bool, default=False
        Use the reversible-jump birth and death (stationary law: the posterior under the
        compound Poisson-exponential prior) instead of CoGAPS's; see doc/testing.rst.
    X : ndarray of shape (n_samples, n_features) or None, default=None
        The data, needed (float32) when R is float32: the residual is then recomputed in
        double from X and the matrices at the start of every iteration, and rounded once
        to float32, so that the rounding of the updates within an iteration does not add
        up over the chain.
    """
    cdef AtomicDomain dom_w
    cdef AtomicDomain dom_h
    cdef Half half_w
    cdef Half half_h
    cdef Rng rng
    cdef Proposal* batch
    cdef object W_arr, Ht_arr, R_arr, Rt_arr, prec_arr, prect_arr, Wt_arr, Htt_arr
    cdef object X_arr, buf_arr
    cdef readonly bint f32
    cdef object sparse_rows, sparse_cols, tables
    cdef readonly bint is_sparse
    cdef readonly bint fixed_w, fixed_h
    cdef double sigma0
    cdef bint poisson
    cdef object sum_w, sq_w, sum_h, sq_h
    cdef public Py_ssize_t n_accumulated
    cdef Py_ssize_t n, m, K
    cdef double lam_w, lam_h

    def __cinit__(self):
        domain_init(&self.dom_w, 1, 1, 16)
        domain_init(&self.dom_h, 1, 1, 16)
        self.half_w.row_mark = NULL
        self.half_w.atom_mark = NULL
        self.half_h.row_mark = NULL
        self.half_h.atom_mark = NULL
        self.batch = <Proposal*>malloc(MAX_BATCH * sizeof(Proposal))
        if self.batch == NULL:
            raise MemoryError("could not allocate the proposal queue")

    def __dealloc__(self):
        domain_free(&self.dom_w)
        domain_free(&self.dom_h)
        free(self.half_w.row_mark)
        free(self.half_w.atom_mark)
        free(self.half_h.row_mark)
        free(self.half_h.atom_mark)
        free(self.batch)

    def __init__(self, R, prec, W, Ht, double alpha_w, double alpha_h, double lam_w,
                 double lam_h, double max_mass_w, double max_mass_h, uint64_t seed=0,
                 state=None, sparse_data=None, fixed=None, bint reversible=False, X=None):
        if fixed not in (None, "W", "H"):
            raise ValueError(f"fixed must be None, 'W' or 'H'; got {fixed!r}.")
        self.fixed_w = fixed == "W"
        self.fixed_h = fixed == "H"
        self.n, self.K = W.shape
        self.m = Ht.shape[0]
        self.is_sparse = sparse_data is not None
        self.W_arr = np.array(W, dtype=np.float64, order="C")
        self.Ht_arr = np.array(Ht, dtype=np.float64, order="C")
        self.lam_w = lam_w
        self.lam_h = lam_h
        self.reset_accumulators()
        domain_free(&self.dom_w)
        domain_free(&self.dom_h)
        if (domain_init(&self.dom_w, <uint64_t>(self.n * self.K), <uint64_t>self.K, 1024) != 0
                or domain_init(&self.dom_h, <uint64_t>(self.m * self.K), <uint64_t>self.K, 1024) != 0):
            raise MemoryError("could not allocate the atomic domains")
        if self.is_sparse:
            rows, cols, self.sigma0 = sparse_data[:3]
            self.poisson = len(sparse_data) > 3 and sparse_data[3]
            self.sparse_rows = _sparse_orientation(rows)
            self.sparse_cols = _sparse_orientation(cols)
            self.tables = [np.zeros(self.K), np.zeros((self.K, self.K)),
                           np.zeros(self.K), np.zeros((self.K, self.K))]
            self._bind(&self.half_w, &self.dom_w, self.W_arr, self.m, alpha_w, lam_w, max_mass_w)
            self._bind(&self.half_h, &self.dom_h, self.Ht_arr, self.n, alpha_h, lam_h, max_mass_h)
            self._bind_sparse(&self.half_w, self.sparse_rows, self.Ht_arr, self.tables[0],
                              self.tables[1])
            self._bind_sparse(&self.half_h, self.sparse_cols, self.W_arr, self.tables[2],
                              self.tables[3])
        else:
            self.f32 = np.asarray(R).dtype == np.float32
            dtype = np.float32 if self.f32 else np.float64
            if self.f32:
                if X is None or np.asarray(X).shape != (self.n, self.m):
                    raise ValueError("a float32 residual needs the data X, of the same shape")
                # the data in the orientation of the residual refreshed at each iteration:
                # the amplitudes' (X^T), or the patterns' when the amplitudes are fixed
                X = np.asarray(X, dtype=np.float32)
                self.X_arr = np.ascontiguousarray(X if self.fixed_h else X.T)
                self.buf_arr = np.empty((1, max(self.n, self.m)))
            # always a copy: the chain writes the residual, which may be the caller's data;
            # the rows of the residuals and precisions are padded for the transposes
            self.R_arr = padded_empty((self.n, self.m), dtype)
            self.R_arr[...] = R
            self.Rt_arr = padded_empty((self.m, self.n), dtype)
            self.prec_arr = _padded_copy(prec, dtype)
            self.prect_arr = _padded_copy(self.prec_arr.T, dtype)
            self.Wt_arr = np.empty((self.K, self.n), dtype=np.float64)
            self.Htt_arr = np.empty((self.K, self.m), dtype=np.float64)
            self._bind(&self.half_w, &self.dom_w, self.W_arr, self.m, alpha_w, lam_w, max_mass_w)
            self._bind(&self.half_h, &self.dom_h, self.Ht_arr, self.n, alpha_h, lam_h, max_mass_h)
            self._bind_dense(&self.half_w, self.Htt_arr, self.R_arr, self.prec_arr)
            self._bind_dense(&self.half_h, self.Wt_arr, self.Rt_arr, self.prect_arr)
            # a fixed matrix never changes: its transpose is made once, and the residual
            # stays in the orientation of the free matrix
            if self.fixed_h:
                self.Htt_arr[...] = self.Ht_arr.T
            elif self.fixed_w:
                self.Wt_arr[...] = self.W_arr.T
                self.Rt_arr[...] = self.R_arr.T
        self.half_w.reversible = reversible
        self.half_h.reversible = reversible
        if state is None:
            rng_seed(&self.rng, seed)
        else:
            self._restore(state)

    cdef void _bind(self, Half* h, AtomicDomain* dom, M, Py_ssize_t n_cols, double alpha,
                    double lam, double max_mass) except *:
        cdef double[:, ::1] m_v = M
        free(h.row_mark)
        _half_init(h, dom, &m_v[0, 0], m_v.shape[0], n_cols, m_v.shape[1], alpha, lam, max_mass)
        h.row_mark = <int64_t*>calloc(h.n_rows, sizeof(int64_t))
        if h.row_mark == NULL:
            raise MemoryError("could not allocate the proposal queue")

    cdef void _bind_dense(self, Half* h, Ot, R, prec) except *:
        cdef double[:, ::1] o_v = Ot
        if R.strides != prec.strides:
            raise ValueError("the residual and the precisions must share their row stride")
        h.Ot = &o_v[0, 0]
        h.R = _address(R)
        h.prec = _address(prec)
        h.row_stride = R.strides[0] // R.itemsize
        h.f32 = self.f32

    cdef void _bind_sparse(self, Half* h, data, O, Z1, Z2) except *:
        cdef const int64_t[::1] indptr = data[0]
        cdef const int32_t[::1] indices = data[1]
        cdef const double[::1] values = data[2]
        cdef double[:, ::1] o_v = O
        cdef double[::1] z1 = Z1
        cdef double[:, ::1] z2 = Z2
        h.sparse = True
        h.indptr = &indptr[0]
        h.indices = &indices[0] if indices.shape[0] else NULL
        h.x = &values[0] if values.shape[0] else NULL
        h.sigma0 = self.sigma0
        h.poisson = self.poisson
        h.O = &o_v[0, 0]
        h.Z1 = &z1[0]
        h.Z2 = &z2[0, 0]
        h.w0 = 1.0 / (self.sigma0 * self.sigma0)
        # cost of one proposal: the stored entries of a row, K operations each
        h.work = h.K * (indices.shape[0] // max(h.n_rows, 1) + h.K)

    def iterate(self, double tau, int n_threads=1):
        """One iteration: updates of the amplitudes Ht, then of the patterns W.

        Parameters
        ----------
        tau : float
            Annealing temperature in (0, 1].
        n_threads : int, default=1
            Threads for the dense transposes.

        Returns
        -------
        n_proposals_h, n_proposals_w : int
            Number of updates made on each matrix.
        loglik_change : float
            Untempered change of the Gaussian log-likelihood over the iteration.
        """
        cdef int64_t nh = 0, nw = 0
        self.half_h.loglik_change = 0.0
        self.half_w.loglik_change = 0.0
        if self.is_sparse:
            with nogil:
                if not self.fixed_h:
                    _lookup_tables(&self.half_h)
                    nh = _queued_half(&self.half_h, self.batch, &self.rng, tau, n_threads)
                if nh >= 0 and not self.fixed_w:
                    _lookup_tables(&self.half_w)
                    nw = _queued_half(&self.half_w, self.batch, &self.rng, tau, n_threads)
        else:
            nh, nw = self._dense_iteration(tau, n_threads)
        if nh < 0 or nw < 0:
            _raise_failure(min(nh, nw))
        return nh, nw, self.half_h.loglik_change + self.half_w.loglik_change

    cdef tuple _dense_iteration(self, double tau, int n_threads):
        if self.f32:
            return self._dense_iteration_f32(tau, n_threads)
        cdef int64_t nh = 0, nw = 0
        # the residual in each orientation, rows padded (padded_empty)
        cdef double* R = <double*>self.half_w.R
        cdef double* Rt = <double*>self.half_h.R
        cdef Py_ssize_t ldr = self.half_w.row_stride, ldrt = self.half_h.row_stride
        cdef double[:, ::1] W = self.W_arr
        cdef double[:, ::1] Ht = self.Ht_arr
        cdef double[:, ::1] Wt = self.Wt_arr
        cdef double[:, ::1] Htt = self.Htt_arr
        cdef int transpose_threads = n_threads if self.n * self.m >= parallel_min_entries() else 1
        if self.fixed_h:
            with nogil:
                nw = _queued_half(&self.half_w, self.batch, &self.rng, tau, n_threads)
            return nh, nw
        if self.fixed_w:
            with nogil:
                nh = _queued_half(&self.half_h, self.batch, &self.rng, tau, n_threads)
            return nh, nw
        with nogil:
            _transpose(R, self.n, self.m, ldr, Rt, ldrt, transpose_threads)
            _transpose(&W[0, 0], self.n, self.K, self.K, &Wt[0, 0], self.n, 1)
            nh = _queued_half(&self.half_h, self.batch, &self.rng, tau, n_threads)
            if nh >= 0:
                _transpose(Rt, self.m, self.n, ldrt, R, ldr, transpose_threads)
                _transpose(&Ht[0, 0], self.m, self.K, self.K, &Htt[0, 0], self.m, 1)
                nw = _queued_half(&self.half_w, self.batch, &self.rng, tau, n_threads)
        return nh, nw

    cdef tuple _dense_iteration_f32(self, double tau, int n_threads):
        """The iteration of a float32 residual: as in the double one, but the residual
        of the first half-iteration is recomputed from the data and the matrices
        (``_residual_rows``) rather than transposed, so that the float rounding of the
        residual updates never outlives one iteration."""
        cdef int64_t nh = 0, nw = 0
        cdef int threads = n_threads if self.n * self.m >= parallel_min_entries() else 1
        if self.buf_arr.shape[0] < threads:
            # scratch of the residual rows, one row per thread
            self.buf_arr = np.empty((threads, self.buf_arr.shape[1]))
        cdef float* R = <float*>self.half_w.R
        cdef float* Rt = <float*>self.half_h.R
        cdef Py_ssize_t ldr = self.half_w.row_stride, ldrt = self.half_h.row_stride
        cdef const float[:, ::1] X = self.X_arr
        cdef double[:, ::1] buf = self.buf_arr
        cdef double[:, ::1] W = self.W_arr
        cdef double[:, ::1] Ht = self.Ht_arr
        cdef double[:, ::1] Wt = self.Wt_arr
        cdef double[:, ::1] Htt = self.Htt_arr
        with nogil:
            if self.fixed_h:
                _residual_rows(&X[0, 0], &W[0, 0], &Htt[0, 0], self.n, self.m, self.K,
                               R, ldr, &buf[0, 0], threads)
                nw = _queued_half(&self.half_w, self.batch, &self.rng, tau, n_threads)
        if self.fixed_h:
            return nh, nw
        with nogil:
            if not self.fixed_w:
                _transpose(&W[0, 0], self.n, self.K, self.K, &Wt[0, 0], self.n, 1)
            _residual_rows(&X[0, 0], &Ht[0, 0], &Wt[0, 0], self.m, self.n, self.K,
                           Rt, ldrt, &buf[0, 0], threads)
            nh = _queued_half(&self.half_h, self.batch, &self.rng, tau, n_threads)
            if nh >= 0 and not self.fixed_w:
                _transpose(Rt, self.m, self.n, ldrt, R, ldr, threads)
                _transpose(&Ht[0, 0], self.m, self.K, self.K, &Htt[0, 0], self.m, 1)
                nw = _queued_half(&self.half_w, self.batch, &self.rng, tau, n_threads)
        return nh, nw

    def chi_square(self, int n_threads=1):
        """Chi-square of the chain's current state.

        Parameters
        ----------
        n_threads : int, default=1

        Returns
        -------
        chisq : float
        """
        if self.is_sparse:
            return sparse_chi_square(self.sparse_rows, self.W_arr, self.Ht_arr, self.sigma0,
                                     n_threads, self.poisson)
        if self.fixed_w:
            # the residual lives in the amplitudes' orientation
            return chi_square(self.Rt_arr, self.prect_arr, n_threads)
        return chi_square(self.R_arr, self.prec_arr, n_threads)

    def reset_accumulators(self):
        """Forget the accumulated posterior sums."""
        self.sum_w = np.zeros((self.n, self.K))
        self.sq_w = np.zeros((self.n, self.K))
        self.sum_h = np.zeros((self.m, self.K))
        self.sq_h = np.zeros((self.m, self.K))
        self.n_accumulated = 0

    def freeze_proposal_counts(self):
        """Fix the reversible chain's number of updates per half-iteration at the present
        atom counts for the rest of the chain (kept by :meth:`get_state`), as its sampling
        phase starts: with a count that follows the state, the recorded states are not
        drawn from the posterior (``_n_proposals``). Nothing for CoGAPS's moves, or once
        fixed."""
        _freeze_count(&self.half_w)
        _freeze_count(&self.half_h)

    def accumulate(self):
        """Add the current sample to the posterior sums, each pattern (column of W)
        scaled to maximum 1 and the amplitudes scaled by the same factor, as CoGAPS does.

        With a fixed matrix nothing is rescaled: the fixed matrix keeps its values and the
        free one is accumulated as sampled (as in :func:`sample_fixed_rows`)."""
        cdef double[:, ::1] W = self.W_arr
        cdef double[:, ::1] Ht = self.Ht_arr
        cdef double[:, ::1] sw = self.sum_w
        cdef double[:, ::1] qw = self.sq_w
        cdef double[:, ::1] sh = self.sum_h
        cdef double[:, ::1] qh = self.sq_h
        cdef Py_ssize_t i, j, k
        cdef double scale, v
        cdef bint rescale = not (self.fixed_w or self.fixed_h)
        with nogil:
            for k in range(self.K):
                scale = 0.0
                if rescale:
                    for i in range(self.n):
                        if W[i, k] > scale:
                            scale = W[i, k]
                if scale <= 0.0:
                    scale = 1.0
                for i in range(self.n):
                    v = W[i, k] / scale
                    sw[i, k] += v
                    qw[i, k] += v * v
                for j in range(self.m):
                    v = Ht[j, k] * scale
                    sh[j, k] += v
                    qh[j, k] += v * v
        self.n_accumulated += 1

    def posterior(self):
        """Posterior means and standard deviations of W and Ht from the accumulated sums.

        Returns
        -------
        W_mean, W_std, Ht_mean, Ht_std : ndarrays
        """
        n = max(self.n_accumulated, 1)
        w_mean = self.sum_w / n
        h_mean = self.sum_h / n
        w_std = np.sqrt(np.maximum(self.sq_w / n - w_mean**2, 0.0))
        h_std = np.sqrt(np.maximum(self.sq_h / n - h_mean**2, 0.0))
        return w_mean, w_std, h_mean, h_std

    @property
    def W(self):
        """Current patterns (a copy)."""
        return self.W_arr.copy()

    @property
    def Ht(self):
        """Current amplitudes (a copy)."""
        return self.Ht_arr.copy()


    @property
    def queue_statistics(self):
        """Batches and queued proposals so far, for the amplitudes and the patterns:
        ``((n_batches_h, n_proposals_h), (n_batches_w, n_proposals_w))``."""
        return ((self.half_h.n_batches, self.half_h.n_queued),
                (self.half_w.n_batches, self.half_w.n_queued))

    @property
    def n_atoms(self):
        """Number of atoms in the domains of W and of Ht."""
        return self.dom_w.n_atoms, self.dom_h.n_atoms

    def get_state(self, residual=False):
        """Everything needed to continue the chain, as numpy arrays.

        Atoms are listed in the order of the domain's unsorted array, which the uniform
        choice of an atom indexes, so a restored chain makes the same choices. With
        ``residual=True`` the dense model's running residuals come too: a chain restored
        with them continues bit for bit as the uninterrupted one (without them the residual
        is recomputed from X, W and H, which differs from the running one at round-off).
        """
        state = {
            "sparse": bool(self.is_sparse),
            "fixed": "W" if self.fixed_w else ("H" if self.fixed_h else None),
            "rng": self._rng_state(),
            "W": self.W_arr.copy(),
            "Ht": self.Ht_arr.copy(),
            "atoms_w": _domain_atoms(&self.dom_w),
            "atoms_h": _domain_atoms(&self.dom_h),
            "sums": (self.sum_w.copy(), self.sq_w.copy(), self.sum_h.copy(),
                     self.sq_h.copy(), self.n_accumulated),
            "proposal_counts": np.array([self.half_w.count_base, self.half_h.count_base],
                                        dtype=np.int64),
        }
        if residual and not self.is_sparse:
            state["residual"] = (np.array(self.R_arr), np.array(self.Rt_arr))
        return state

    cdef object _rng_state(self):
        return np.array([self.rng.s0, self.rng.s1, self.rng.s2, self.rng.s3], dtype=np.uint64)

    cdef void _restore(self, state) except *:
        _check_state(state, self.n, self.m, self.K,
                     (int(self.dom_w.bin_length), int(self.dom_w.length)),
                     (int(self.dom_h.bin_length), int(self.dom_h.length)),
                     self.W_arr, self.Ht_arr, self.fixed_w, self.fixed_h)
        rng = np.asarray(state["rng"], dtype=np.uint64)
        self.rng.s0 = rng[0]
        self.rng.s1 = rng[1]
        self.rng.s2 = rng[2]
        self.rng.s3 = rng[3]
        _domain_load(&self.dom_w, state["atoms_w"][0], state["atoms_w"][1])
        _domain_load(&self.dom_h, state["atoms_h"][0], state["atoms_h"][1])
        sw, qw, sh, qh, n_acc = state["sums"]
        self.sum_w[...] = sw
        self.sq_w[...] = qw
        self.sum_h[...] = sh
        self.sq_h[...] = qh
        self.n_accumulated = n_acc
        # a state saved before the counts were kept has none: fixed when sampling resumes
        counts = state.get("proposal_counts", (0, 0))
        self.half_w.count_base = int(counts[0])
        self.half_h.count_base = int(counts[1])
        if "residual" in state and not self.is_sparse:
            R, Rt = state["residual"]
            if np.shape(R) != (self.n, self.m) or np.shape(Rt) != (self.m, self.n):
                raise ValueError(
                    "The saved CoGAPS chain state is invalid: its residual does not have the "
                    "data's shape. It does not come from a fit of this estimator on these "
                    "data; fit again with warm_start=False."
                )
            self.R_arr[...] = R
            self.Rt_arr[...] = Rt


def _padded_copy(a, dtype):
    """``a`` as a matrix of ``dtype`` laid out as :func:`padded_empty` lays it out (rows
    ``residual_row_stride`` values apart, the first on a 64-byte boundary): ``a`` itself
    when it already is one, else a copy."""
    a = np.asarray(a)
    dtype = np.dtype(dtype)
    n_rows, n_cols = a.shape
    stride = residual_row_stride(n_rows, n_cols, dtype.itemsize) * dtype.itemsize
    if (a.dtype == dtype and a.strides == (stride, dtype.itemsize)
            and a.ctypes.data % 64 == 0):
        return a
    out = padded_empty(a.shape, dtype)
    out[...] = a
    return out


cdef void* _address(arr) except? NULL:
    """The first element of a float32 or float64 matrix whose rows are contiguous (they
    may start further apart than their length), which the caller keeps alive."""
    cdef const float[:, :] f
    cdef const double[:, :] d
    if arr.strides[1] != arr.itemsize:
        raise ValueError("the rows of a residual or precision matrix must be contiguous")
    if arr.dtype == np.float32:
        f = arr
        return <void*>&f[0, 0]
    d = arr
    return <void*>&d[0, 0]


def _check_state(state, n, m, K, domain_w, domain_h, W, Ht, fixed_w, fixed_h):
    """Refuse a saved chain state (from :meth:`GibbsSampler.get_state`, possibly unpickled
    from elsewhere) that does not describe a chain of these dimensions: the shapes, atom
    positions inside their domains and distinct, masses finite and >= 0, the atoms of each
    matrix element summing to that element, the posterior sums and the generator."""
    def bad(what):
        raise ValueError(
            f"The saved CoGAPS chain state is invalid: {what}. It does not come from a fit of "
            "this estimator on data of this shape; fit again with warm_start=False."
        )

    if not isinstance(state, dict):
        bad(f"expected a dict, got {type(state).__name__}")
    missing = {"rng", "W", "Ht", "atoms_w", "atoms_h", "sums"} - set(state)
    if missing:
        bad(f"missing entries {sorted(missing)}")
    rng = np.asarray(state["rng"])
    if rng.shape != (4,) or rng.dtype != np.uint64 or not rng.any():
        bad(f"the generator state must be 4 uint64 words, not all zero; got {rng!r}")
    tolerance = 1e-9
    for name, M, (bin_length, length), fixed in (
        ("W", W, domain_w, fixed_w),
        ("Ht", Ht, domain_h, fixed_h),
    ):
        if not np.all(np.isfinite(M)) or np.any(M < 0):
            bad(f"the saved {name} must be finite and non-negative")
        atoms = state["atoms_w" if name == "W" else "atoms_h"]
        if len(atoms) != 2:
            bad(f"the atoms of {name} must be (positions, masses)")
        pos = np.asarray(atoms[0])
        mass = np.asarray(atoms[1])
        if pos.dtype != np.uint64 or pos.ndim != 1 or mass.shape != pos.shape:
            bad(f"the atoms of {name} must be a uint64 vector of positions and a vector of "
                f"masses of the same length; got {pos.dtype} {pos.shape} and {mass.shape}")
        if not np.all(np.isfinite(mass)) or np.any(mass < 0):
            bad(f"the atom masses of {name} must be finite and >= 0")
        if pos.size and (pos.max() >= np.uint64(length)):
            bad(f"an atom of {name} lies outside its domain [0, {length})")
        if np.unique(pos).size != pos.size:
            bad(f"two atoms of {name} share a position")
        if fixed and pos.size:
            bad(f"{name} is held fixed, so its domain must be empty; it has {pos.size} atoms")
        if not fixed:
            # the atoms of each bin add up to the matrix element of the bin
            bins = (pos // np.uint64(bin_length)).astype(np.int64)
            sums = np.bincount(bins, weights=mass, minlength=M.size)
            scale = max(1.0, float(np.abs(M).max(initial=0.0)))
            if sums.shape != (M.size,) or not np.allclose(sums, M.ravel(), rtol=tolerance,
                                                          atol=tolerance * scale):
                bad(f"the atoms of {name} do not add up to the saved matrix")
    sums = state["sums"]
    if len(sums) != 5:
        bad("the posterior sums must be (sum W, sum W^2, sum Ht, sum Ht^2, count)")
    for value, shape, what in zip(sums[:4], [(n, K), (n, K), (m, K), (m, K)],
                                  ["sum W", "sum W^2", "sum Ht", "sum Ht^2"]):
        value = np.asarray(value)
        if value.shape != shape or not np.all(np.isfinite(value)):
            bad(f"{what} must be a finite array of shape {shape}; got shape {value.shape}")
    count = sums[4]
    if int(count) != count or count < 0:
        bad(f"the number of accumulated samples must be a non-negative integer; got {count!r}")
    counts = np.asarray(state.get("proposal_counts", (0, 0)))
    if counts.shape != (2,) or not np.all(counts == np.round(counts)) or np.any(counts < 0):
        bad(f"the proposal counts must be two non-negative integers; got {counts!r}")


cdef object _domain_atoms(AtomicDomain* d):
    pos = np.empty(d.n_atoms, dtype=np.uint64)
    mass = np.empty(d.n_atoms, dtype=np.float64)
    cdef uint64_t[::1] p = pos
    cdef double[::1] m = mass
    cdef int64_t i
    for i in range(d.n_atoms):
        p[i] = d.pos[d.order[i]]
        m[i] = d.mass[d.order[i]]
    return pos, mass


cdef void _domain_load(AtomicDomain* d, positions, masses) except *:
    cdef const uint64_t[::1] p = np.ascontiguousarray(positions, dtype=np.uint64)
    cdef const double[::1] m = np.ascontiguousarray(masses, dtype=np.float64)
    cdef int64_t i
    for i in range(p.shape[0]):
        if domain_insert(d, p[i], m[i]) < 0:
            raise MemoryError("could not rebuild the atomic domain")


# ---------------------------------------------------------------------------------------
# Fixed-matrix mode: the amplitudes are fixed and each row of new data gets its own chain
# for its patterns (CoGAPS's fixed-matrix mode). Rows are independent, so they run in
# parallel; each row's generator is seeded from random_state and the row's own content.
# A failing row marks its own status entry (never a variable shared by the threads), so
# every failure reaches the caller whatever thread met it (_utils/_status.pxd).

def sample_fixed_rows(const floating[:, ::1] X, const floating[:, ::1] prec,
                      const double[:, ::1] Ht, double alpha, double lam, double max_mass,
                      Py_ssize_t n_iter, const uint64_t[::1] seeds, int n_threads=1,
                      bint reversible=False):
    """Sample the patterns of each row of X with the amplitudes Ht held fixed.

    Parameters
    ----------
    X : ndarray of shape (n_rows, n_features), float64 or float32
        With float32, each row's residual is stored in float32 and recomputed in double
        from the row and its patterns at the start of every iteration.
    prec : ndarray of shape (n_rows, n_features), of X's dtype
        Precisions 1 / uncertainty**2.
    Ht : ndarray of shape (n_features, n_components)
        The fixed amplitudes.
    alpha, lam, max_mass : float
        Sparsity, prior rate and Gibbs mass cap of the patterns.
    n_iter : int
        Iterations of each phase (calibration, then sampling).
    seeds : ndarray of uint64, shape (n_rows,)
        One seed per row.
    n_threads : int, default=1
    reversible : bool, default=False
        Use the reversible-jump birth and death instead of CoGAPS's.

    Returns
    -------
    W_mean, W_std : ndarrays of shape (n_rows, n_components)
        Posterior mean and standard deviation of each row's patterns.
    """
    cdef Py_ssize_t n = X.shape[0], m = X.shape[1], K = Ht.shape[1], i
    Htt_arr = np.ascontiguousarray(np.asarray(Ht).T)
    cdef const double[:, ::1] Htt = Htt_arr
    mean_arr = np.zeros((n, K))
    std_arr = np.zeros((n, K))
    status_arr = np.zeros(n, dtype=np.intc)
    cdef double[:, ::1] mean = mean_arr
    cdef double[:, ::1] std = std_arr
    cdef int[::1] status = status_arr
    with nogil:
        for i in prange(n, schedule='dynamic', num_threads=n_threads):
            status[i] = item_status(SITE_COGAPS_ROWS, i, True)
            if status[i] == 0:
                status[i] = _sample_one_row(&X[i, 0], &prec[i, 0], &Htt[0, 0], m, K, alpha,
                                            lam, max_mass, n_iter, seeds[i], reversible,
                                            &mean[i, 0], &std[i, 0])
    _check_rows(status_arr)
    return mean_arr, std_arr


def sample_fixed_sparse_rows(csr, const double[:, ::1] Ht, double sigma0, double alpha,
                             double lam, double max_mass, Py_ssize_t n_iter,
                             const uint64_t[::1] seeds, int n_threads=1,
                             bint reversible=False, bint poisson=False):
    """Sample the patterns of each row of a sparse X with the amplitudes Ht held fixed,
    under the sparse-data model (Sherman, Gao & Fertig 2019, section 3): a proposal costs O(K^2 + nnz of
    the row times K), from the row's stored entries and the lookup tables of Ht.

    The model is the dense one with the default uncertainty ``max(sigma0 * x, sigma0)``
    (or ``max(sqrt(x), 1)`` with ``poisson``), so the chains are those of
    :func:`sample_fixed_rows` on the dense rows up to rounding.

    Parameters
    ----------
    csr : scipy.sparse.csr_matrix of shape (n_rows, n_features)
        Sorted indices, no explicit zeros.
    Ht : ndarray of shape (n_features, n_components)
        The fixed amplitudes.
    sigma0 : float
        Standard deviation of a zero, relative one of a non-zero.
    alpha, lam, max_mass : float
        Sparsity, prior rate and Gibbs mass cap of the patterns.
    n_iter : int
        Iterations of each phase (calibration, then sampling).
    seeds : ndarray of uint64, shape (n_rows,)
        One seed per row.
    n_threads : int, default=1
    reversible : bool, default=False
        Use the reversible-jump birth and death instead of CoGAPS's.
    poisson : bool, default=False
        Standard deviation ``max(sqrt(x), 1)`` of every entry instead (with sigma0 = 1).

    Returns
    -------
    W_mean, W_std : ndarrays of shape (n_rows, n_components)
        Posterior mean and standard deviation of each row's patterns.
    """
    data = _sparse_orientation(csr)
    cdef const int64_t[::1] indptr = data[0]
    cdef const int32_t[::1] indices = data[1]
    cdef const double[::1] values = data[2]
    cdef Py_ssize_t n = indptr.shape[0] - 1, m = Ht.shape[0], K = Ht.shape[1], i
    cdef const int32_t* ind_p = &indices[0] if indices.shape[0] else NULL
    cdef const double* x_p = &values[0] if values.shape[0] else NULL
    # the lookup tables of the fixed amplitudes (section 3.2), made once for every row as
    # the fit makes them
    Z1_arr = np.zeros(K)
    Z2_arr = np.zeros((K, K))
    cdef double[::1] Z1 = Z1_arr
    cdef double[:, ::1] Z2 = Z2_arr
    cdef Half tables
    tables.O = &Ht[0, 0]
    tables.n_cols = m
    tables.K = K
    tables.Z1 = &Z1[0]
    tables.Z2 = &Z2[0, 0]
    _lookup_tables(&tables)
    mean_arr = np.zeros((n, K))
    std_arr = np.zeros((n, K))
    status_arr = np.zeros(n, dtype=np.intc)
    cdef double[:, ::1] mean = mean_arr
    cdef double[:, ::1] std = std_arr
    cdef int[::1] status = status_arr
    with nogil:
        for i in prange(n, schedule='dynamic', num_threads=n_threads):
            status[i] = item_status(SITE_COGAPS_ROWS, i, True)
            if status[i] != 0:
                continue
            status[i] = _sample_one_sparse_row(
                ind_p, x_p, indptr[i], indptr[i + 1], &Ht[0, 0], &Z1[0], &Z2[0, 0],
                sigma0, poisson, m, K, alpha, lam, max_mass, n_iter, seeds[i], reversible,
                &mean[i, 0],
                &std[i, 0])
    _check_rows(status_arr)
    return mean_arr, std_arr


# What to do when a chain fails, for the shared messages of _utils/_status.pyx.
_ADVICE = {
    FAIL_NO_MEMORY: "Free memory, or transform fewer rows at a time.",
    FAIL_NOT_FINITE: (
        "A proposal's likelihood change is NaN or infinite: the data or the uncertainty "
        "are too extreme for double precision (values near 1e300, or uncertainties near "
        "1e-300). Rescale X (and the uncertainty) to a moderate range."
    ),
}


def _raise_failure(int status):
    """Raise the error a (negative) half-iteration status stands for; nothing for >= 0."""
    raise_for_status(status, "The CoGAPS chain", item=None, advice=_ADVICE)


def _check_rows(status):
    """Raise for the rows whose chains failed: each row records its own status, so the
    failure of any row reaches the caller whatever thread ran it."""
    raise_for_status(status, "The pattern chains", item="row", advice=_ADVICE)


cdef int _sample_one_row(const floating* x, const floating* prec, const double* Htt,
                         Py_ssize_t m, Py_ssize_t K, double alpha, double lam,
                         double max_mass, Py_ssize_t n_iter, uint64_t seed,
                         bint reversible, double* mean, double* std) noexcept nogil:
    cdef AtomicDomain dom
    cdef Half h
    cdef int status
    cdef floating* row = <floating*>malloc(m * sizeof(floating))
    cdef double* w = <double*>calloc(K, sizeof(double))
    # a float32 row's residual is recomputed at every iteration, in this scratch
    cdef double* buf = <double*>malloc(m * sizeof(double)) if floating is float else NULL
    if (row == NULL or w == NULL or (floating is float and buf == NULL)
            or domain_init(&dom, <uint64_t>K, <uint64_t>K, 64) != 0):
        free(row); free(w); free(buf)
        return FAIL_NO_MEMORY
    memcpy(row, x, m * sizeof(floating))
    _half_init(&h, &dom, w, 1, m, K, alpha, lam, max_mass)
    h.reversible = reversible
    h.Ot = Htt
    h.R = row
    h.prec = prec
    h.f32 = floating is float
    status = _row_chain(&h, n_iter, seed, mean, std, x, buf)
    domain_free(&dom)
    free(row); free(w); free(buf)
    return status


cdef int _sample_one_sparse_row(const int32_t* indices, const double* x, int64_t start,
                                int64_t end, const double* Ht, const double* Z1,
                                const double* Z2, double sigma0, bint poisson, Py_ssize_t m,
                                Py_ssize_t K, double alpha, double lam, double max_mass,
                                Py_ssize_t n_iter, uint64_t seed, bint reversible,
                                double* mean, double* std) noexcept nogil:
    cdef AtomicDomain dom
    cdef Half h
    cdef int status
    # the row's stored entries, as a one-row CSR
    cdef int64_t indptr[2]
    cdef double* w = <double*>calloc(K, sizeof(double))
    if w == NULL or domain_init(&dom, <uint64_t>K, <uint64_t>K, 64) != 0:
        free(w)
        return FAIL_NO_MEMORY
    indptr[0] = 0
    indptr[1] = end - start
    _half_init(&h, &dom, w, 1, m, K, alpha, lam, max_mass)
    h.reversible = reversible
    h.sparse = True
    h.indptr = indptr
    h.indices = indices + start if indices != NULL else NULL
    h.x = x + start if x != NULL else NULL
    h.O = Ht
    # read only: the tables are made once for all rows
    h.Z1 = <double*>Z1
    h.Z2 = <double*>Z2
    h.sigma0 = sigma0
    h.poisson = poisson
    h.w0 = 1.0 / (sigma0 * sigma0)
    status = _row_chain(&h, n_iter, seed, mean, std, NULL, NULL)
    domain_free(&dom)
    free(w)
    return status


cdef int _row_chain(Half* h, Py_ssize_t n_iter, uint64_t seed, double* mean,
                    double* std, const void* x, double* buf) noexcept nogil:
    """One row's chain: ``n_iter`` calibration then ``n_iter`` sampling iterations of the
    sequential chain, with the mean and standard deviation of the samples.

    A float32 residual (``h.f32``) is recomputed from the row ``x`` and the patterns at the
    start of every iteration, in double with the scratch ``buf``, as in the fit."""
    cdef Rng rng
    cdef Py_ssize_t it, k, K = h.K
    cdef int status = 0
    cdef int64_t done
    cdef double tau
    cdef double* w = h.M
    cdef double* sq = <double*>calloc(K, sizeof(double))
    if sq == NULL:
        return FAIL_NO_MEMORY
    rng_seed(&rng, seed)
    for k in range(K):
        mean[k] = 0.0
    for it in range(2 * n_iter):
        tau = 1.0 if it >= n_iter else fmin1(2.0 * (it + 1) / n_iter)
        if it == n_iter:
            _freeze_count(h)  # the sampling phase's count (reversible chain)
        if h.f32 and it > 0:
            cg_residual_row_f32(<const float*>x, w, h.Ot, K, h.n_cols, <float*>h.R, buf)
        done = _sequential_half(h, &rng, tau)
        if done < 0:
            status = <int>done
            break
        if it >= n_iter:
            for k in range(K):
                mean[k] += w[k]
                sq[k] += w[k] * w[k]
    for k in range(K):
        mean[k] /= n_iter
        std[k] = sqrt(fmax(sq[k] / n_iter - mean[k] * mean[k], 0.0))
    free(sq)
    return status


cdef inline double fmin1(double v) noexcept nogil:
    return v if v < 1.0 else 1.0
