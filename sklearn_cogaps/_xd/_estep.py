"""The E-step of extreme deconvolution: the compiled kernels and their arguments.

Bovy, Hogg & Roweis (2011), section 3.1: for each point and component, the covariance
``T_ij = R_i V_j R_i^T + S_i`` of the observation, the responsibility ``q_ij`` and the
posterior ``N(b_ij, B_ij)`` of ``v_i``. ``_fast.pyx`` computes them in one sweep; this module
marshals the parameters into the kernels' arguments and turns a failed factorisation into
an error that says what to change.
"""

import numpy as np

from .._utils._openmp_helpers import kernel_threads
from .._utils._status import NOT_POSITIVE_DEFINITE, raise_for_status
from . import _fast
from ._data import Observations

__all__ = [
    "chunk_starts",
    "chunk_stats",
    "chunk_weights",
    "component_error",
    "estep",
    "kernel_params",
    "log_prob",
    "reduce_stats",
]

_EMPTY1 = {np.float64: np.empty(0, np.float64), np.float32: np.empty(0, np.float32)}


def n_chunks_for(n):
    """Number of chunks of points for the per-chunk sums: a function of n only."""
    return int(min(max(1, n // 256), 256))


def _sweep_work(n, K, p, d):
    """Operations of a sweep over n points (a Cholesky factor and solves per point and
    component), for the thread count; the result never depends on it."""
    return 5 * n * K * (p * p + p * d + d * d)


def component_error(i, j, reg_covar):
    where = "of every complete point" if i is None else f"of point {i}"
    return ValueError(
        f"The covariance T_ij = R_i V_j R_i^T + S_i {where} under component {j} is not "
        f"positive definite (reg_covar={reg_covar:g}). This happens when a component "
        f"collapses onto points without noise, on coordinates where the data are constant or "
        f"far larger than reg_covar, or with a singular projection. Increase reg_covar (for "
        f"example to 1e-6 times the largest variance of the data), set the prior w > 0, or "
        f"give every point some noise (X_cov)."
    )


def kernel_params(data, weights, means, covs, reg_covar):
    """Arguments of the compiled kernels for the parameters (weights, means, covs)."""
    dtype = data.X.dtype.type
    empty = _EMPTY1[dtype]
    with np.errstate(divide="ignore"):
        logw = np.log(weights).astype(dtype)
    means = np.ascontiguousarray(means, dtype=dtype)
    covs = np.ascontiguousarray(covs, dtype=dtype)
    if data.Rproj.shape[0]:
        return logw, means, covs, empty, empty, empty, empty, empty, empty
    if data.R is None:
        RV, RVR, Rm = covs, covs, means
    else:
        RV = np.einsum("pk,jkd->jpd", data.R, covs)
        RVR = np.einsum("jpd,qd->jpq", RV, data.R)
        Rm = means @ data.R.T
    Lsh = Wsh = Msh = empty
    if data.noise_mode == 0:
        Ls, Ws = [], []
        for j in range(len(weights)):
            try:
                L = np.linalg.cholesky(RVR[j].astype(np.float64))
            except np.linalg.LinAlgError:
                raise component_error(None, j, reg_covar) from None
            Ls.append(L)
            Ws.append(np.linalg.solve(L, RV[j]))
        Lsh = np.ascontiguousarray(np.ravel(Ls), dtype=dtype)
        Wsh = np.ascontiguousarray(np.ravel(Ws), dtype=dtype)
        # W_j^T W_j: the same for every complete point, computed once
        Msh = _fast.shared_grams(Wsh, len(weights), RV.shape[1], means.shape[1])
    flat = [np.ascontiguousarray(np.ravel(a), dtype=dtype) for a in (RV, RVR, Rm)]
    return (logw, means, covs, *flat, Lsh, Wsh, Msh)


def chunk_starts(n):
    """The first point of every chunk of n points, and n: the partition of the E-step's
    sums, a function of n alone."""
    n_chunks = n_chunks_for(n)
    return (np.arange(n_chunks + 1, dtype=np.intp) * n) // n_chunks


def chunk_stats(data, params, n_threads, reg_covar, starts, offset=0):
    """The E-step's statistics (q, s1, A lower triangles, weighted log-likelihood) of every
    chunk of the points ``data``, unsummed.

    ``starts`` are the chunks' bounds in the numbering of a larger set of points of which
    ``data`` holds those from ``offset`` on (a block read out of core), so that blocks cut
    at chunk bounds give the chunks of the whole data, and their sums in order the sums of
    the whole data (:func:`reduce_stats`).
    """
    K, d = params[1].shape
    n_chunks = len(starts) - 1
    q = np.zeros((n_chunks, K))
    s1 = np.zeros((n_chunks, K, d))
    A = np.zeros((n_chunks, K, d, d))
    ll = np.zeros(n_chunks)
    fail = np.full(n_chunks, -1, dtype=np.intp)
    rel = np.ascontiguousarray(np.asarray(starts, dtype=np.intp) - offset)
    if rel[0] != 0 or rel[-1] != data.n:
        raise ValueError(f"The chunks {rel[0]}..{rel[-1]} do not cover the {data.n} points.")
    args = kernel_params(data, *params, reg_covar)
    threads = kernel_threads(_sweep_work(data.n, K, data.X.shape[1], d), n_threads)
    status = _fast.estep_stats(
        data.X, data.noise_mode, data.Sdiag, data.Sfull, data.Rproj, data.sample_weight,
        *args, q, s1, A, ll, fail, rel, threads,
    )  # fmt: skip
    raise_for_status(status, "The E-step", item="chunk", advice={
        NOT_POSITIVE_DEFINITE: lambda ch: component_error(
            offset + fail[ch] // K, fail[ch] % K, reg_covar),
    })  # fmt: skip
    return q, s1, A, ll


def chunk_weights(sample_weight, starts, offset=0):
    """The total weight of every chunk of points (as :func:`chunk_stats`, in float64); their
    sum over the chunks of consecutive blocks does not depend on where the blocks are cut."""
    rel = np.asarray(starts, dtype=np.intp) - offset
    sums = np.add.reduceat(np.asarray(sample_weight, dtype=np.float64), rel[:-1])
    return np.where(np.diff(rel) > 0, sums, 0.0)


def reduce_stats(parts):
    """Summed statistics (q, s1, A, log-likelihood) from the chunks' statistics of
    consecutive blocks (:func:`chunk_stats`), in the order of the chunks."""
    q, s1, A, ll = (np.concatenate([part[k] for part in parts]) for k in range(4))
    A = A.sum(axis=0)
    A = np.tril(A) + np.swapaxes(np.tril(A, -1), 1, 2)
    return q.sum(axis=0), s1.sum(axis=0), A, float(ll.sum())


def estep(data, params, n_threads, reg_covar):
    """Summed statistics (q, s1, A) and the weighted log-likelihood at ``params``."""
    if not isinstance(data, Observations):
        return data.estep(params, n_threads, reg_covar)  # read by blocks
    starts = chunk_starts(data.n)
    return reduce_stats([chunk_stats(data, params, n_threads, reg_covar, starts)])


def log_prob(data, params, reg_covar, posterior=False):
    """(n, K) log alpha_j N(x_i | ...) and, if ``posterior``, the posterior of each v_i."""
    K, d = params[1].shape
    dtype = data.X.dtype.type
    logp = np.zeros((data.n, K), dtype=dtype)
    shape = (data.n, d) if posterior else (0, 0)
    mean = np.zeros(shape, dtype=dtype)
    cov = np.zeros(shape + (d,) if posterior else (0, 0, 0), dtype=dtype)
    fail = np.full(data.n, -1, dtype=np.intp)
    args = kernel_params(data, *params, reg_covar)
    status = _fast.log_prob(
        data.X, data.noise_mode, data.Sdiag, data.Sfull, data.Rproj,
        *args, logp, mean, cov, fail,
        kernel_threads(_sweep_work(data.n, K, data.X.shape[1], d)),
    )  # fmt: skip
    raise_for_status(status, "The densities", item="point", advice={
        NOT_POSITIVE_DEFINITE: lambda i: component_error(
            i, int(fail[i]), reg_covar),
    })  # fmt: skip
    return logp, mean, cov
