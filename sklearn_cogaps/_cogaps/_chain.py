"""The chain of a CoGAPS fit: the data the sampler reads, its start from an empty atomic
domain, its iterations (calibration with annealing, then sampling), its warm start and its
posterior (Sherman, Gao & Fertig 2019, sections 1 and 4). The sampler itself is
compiled: ``_sampler.pyx`` and the modules it cimports."""

import os
from numbers import Integral

import numpy as np
from scipy import sparse
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_array
from threadpoolctl import threadpool_limits

from .._utils._openmp_helpers import kernel_threads
from .._utils._seeding import draw_seeds, fingerprint
from .._utils._validation import canonical_csr, check_not_masked
from ._chisq import (
    _sparse_orientation,
    fit_chi_square,
    residual,
    sparse_chi_square,
    weighted_gradient_parts,
)
from ._sampler import GibbsSampler
from ._uncertainty import NAMED_UNCERTAINTIES, precision, uncertainty_name, validate_uncertainty

__all__ = [
    "ChainState",
    "check_checkpoint",
    "checkpoint_key",
    "gibbs_mass_caps",
    "as_dtype",
    "canonical_csr",
    "cast_attributes",
    "check_finite_fit",
    "chi_square_of",
    "chisq_fall",
    "make_sampler",
    "model_data",
    "n_entries",
    "nmf_start",
    "new_sampler",
    "prior_rates",
    "restore_sampler",
    "set_posterior",
    "set_snapshots",
    "snapshot_plan",
    "unconverged_message",
    "validate_fixed",
    "warm_start_mismatch",
]

# A fit whose chi-square fell by more than this fraction between the first and the last
# quarter of its sampling iterations has not converged (a stationary chain's fluctuations
# are a few percent at most; a chain still gaining atoms falls by tens of percent).
_UNCONVERGED_CHISQ_FALL = 0.05
# Shortest sampling phase on which that fall is judged.
_MIN_SAMPLING_ITER_CHECKED = 20


def n_entries(X):
    """Entries a pass over X reads: the stored ones of a sparse matrix, all of a dense one."""
    return X.nnz if sparse.issparse(X) else X.size


def model_data(est, X, uncertainty):
    """What the sampler works from: ``("dense", X, precision, name)`` or, for the sparse
    model, ``("sparse", X as canonical CSR, X.T as CSR, name)``, with the name of the
    uncertainty model (None for an array)."""
    name = uncertainty_name(uncertainty)
    if est.sparse_optimization or sparse.issparse(X):
        if name is None:
            raise ValueError(
                "The sparse-data model computes the uncertainty from each stored value: "
                "it takes uncertainty='relative' (0.1 for zeros, max(0.1 * x, 0.1) "
                "otherwise) or 'poisson' (max(sqrt(x), 1)), not an array. Pass dense X "
                "with sparse_optimization=False to use your own."
            )
        # both orientations, sharing the caller's arrays where they are already
        # canonical (they are only read): a CSC's transpose is a CSR of its columns
        if sparse.issparse(X) and X.format == "csc":
            cols = canonical_csr(X.T)
            rows = cols.T.tocsr()
            rows.sort_indices()
        else:
            rows = canonical_csr(X)
            cols = rows.T.tocsr()
            cols.sort_indices()
        _check_sparse_weights(rows, name)
        return ("sparse", rows, cols, name)
    sigma = validate_uncertainty(uncertainty, X, fit=True)
    return ("dense", X, precision(sigma, X.dtype, padded=True), name)


# Largest ratio of the sparse model's weights 1 / sigma**2 (a zero's to the largest value's).
# Its chi-square and gradients take the zeros' terms as the whole matrix's at a zero's weight
# minus the stored entries' (Sherman, Gao & Fertig 2019, section 3): the difference keeps
# about -log10(eps * ratio) digits. At 2.6e10 a sparse fit equals the dense one; at 2.6e12
# its chi-square was 4e-9 of the dense fit's, and at 6e15 its start overflowed.
_MAX_SPARSE_WEIGHT_RATIO = 1e11


def _check_sparse_weights(rows, name):
    """Refuse data whose values span more weights than the sparse model's sums can hold."""
    sigma0, poisson = NAMED_UNCERTAINTIES[name]
    largest = float(rows.data.max(initial=0.0))
    # a zero's weight 1 / sigma0**2 against the largest value's
    smallest_sigma = max(np.sqrt(largest), 1.0) if poisson else max(sigma0 * largest, sigma0)
    ratio = (smallest_sigma / sigma0) ** 2
    if ratio > _MAX_SPARSE_WEIGHT_RATIO:
        raise ValueError(
            f"X's largest value, {largest:.3g}, has a weight {ratio:.2g} times smaller than a "
            f"zero's under the sparse-data model's uncertainty {name!r} (a zero's sigma "
            f"{sigma0:g}, this value's {smallest_sigma:.3g}): its chi-square, the zeros' terms "
            "taken as the whole matrix's minus the stored entries', loses its digits beyond "
            f"{_MAX_SPARSE_WEIGHT_RATIO:.0e}. Fit log1p(X) or X scaled down (the relative "
            "uncertainty's floor of 0.1 makes a zero weigh more the larger the data's scale), "
            "pass uncertainty='poisson' for counts, or dense X with sparse_optimization=False."
        )


def _nonzero_mean(X):
    """The mean of X's non-zero entries (1 when there are none), as the C++ CoGAPS takes
    the data's scale."""
    values = X.data if sparse.issparse(X) else X
    # X is non-negative: the sum over the non-zeros is the sum over all entries
    n_nonzero = np.count_nonzero(values)
    return float(values.sum(dtype=np.float64)) / n_nonzero if n_nonzero else 1.0


def prior_rates(X, n_components, atom_densities):
    """The rates ``lambda_W``, ``lambda_H`` of the exponential priors of the atoms' masses,
    ``alpha * sqrt(K / mean(X))`` (Sherman, Gao & Fertig 2019, section 1.1, eq. 1), with the
    mean over the non-zero entries, as the C++ CoGAPS takes it."""
    root = np.sqrt(n_components / _nonzero_mean(X))
    return atom_densities[0] * root, atom_densities[1] * root


def validate_fixed(X, n_components, fixed_components, fixed_patterns):
    """The matrix held fixed (CoGAPS's ``fixedPatterns`` with ``whichMatrixFixed``):
    ``(which, matrix, in the sampler's orientation)`` with which in {None, "W", "H"}, the
    matrix as given (a new float64 array) and W, or Ht = H^T."""
    if fixed_components is not None and fixed_patterns is not None:
        raise ValueError(
            "Pass at most one of 'fixed_components' and 'fixed_patterns': holding both "
            "matrices fixed leaves nothing to sample."
        )
    if fixed_components is None and fixed_patterns is None:
        return None, None, None
    check_not_masked(fixed_components, "fixed_components")
    check_not_masked(fixed_patterns, "fixed_patterns")
    K = n_components
    if fixed_components is not None:
        name, value, expected, which = (
            "fixed_components",
            fixed_components,
            (K, X.shape[1]),
            "H",
        )
        meaning = "(n_components, n_features)"
    else:
        name, value, expected, which = ("fixed_patterns", fixed_patterns, (X.shape[0], K), "W")
        meaning = "(n_samples, n_components)"
    M = check_array(
        value,
        accept_sparse=False,
        dtype=np.float64,
        ensure_all_finite=True,
        ensure_min_samples=1,
        ensure_min_features=1,
        input_name=name,
        copy=True,
        order="C",  # the sampler reads the fixed matrix row by row
    )
    if M.shape != expected:
        advice = (
            f"It looks transposed: pass {name}.T."
            if M.shape == expected[::-1]
            else "Set n_components to the number of components of the fixed matrix."
        )
        raise ValueError(
            f"'{name}' must have shape {meaning} = {expected} for this X and "
            f"n_components={K}; got {M.shape}. {advice}"
        )
    if np.any(M < 0):
        raise ValueError(
            f"'{name}' must be non-negative; its smallest entry is {M.min()}. CoGAPS's "
            "matrices are sums of atoms of positive mass."
        )
    if which == "H":
        return which, M, np.ascontiguousarray(M.T)
    return which, M, M


# The most atoms the prior may expect in one matrix: each atom takes about 80 bytes (its
# position, mass, neighbours and treap links), so 1e8 atoms are about 8 GB.
_MAX_PRIOR_ATOMS = 1e8


def _check_atom_budget(est, shape):
    """Refuse atom densities whose prior expects more atoms than memory holds: the chain
    gains atoms towards ``alpha * n_bins`` and would grow until memory ran out."""
    K = est.n_components
    for name, density, bins in (
        ("atom_density_W", est._atom_densities[0], shape[0] * K),
        ("atom_density_H", est._atom_densities[1], shape[1] * K),
    ):
        if density * bins > _MAX_PRIOR_ATOMS:
            raise ValueError(
                f"{name}={density:g} makes the prior expect {density * bins:.3g} atoms in "
                f"its {bins} matrix elements (atom density times elements), more than "
                f"{_MAX_PRIOR_ATOMS:.0e} (about 8 GB): the chain would grow until memory ran "
                "out. atom_density is the prior's expected number of atoms per element: "
                "CoGAPS's default is 0.01; 1 is already a dense prior."
            )


def _check_fixed_scale(est, X, fixed):
    """Refuse a fixed matrix the chain cannot be sampled against: zero everywhere, so large
    that its products overflow, or so small that the sampled matrix would need entries
    beyond the largest Gibbs mass of an atom (the chain would stop at that cap and return a
    model of nothing)."""
    which, given, _ = fixed
    if which is None:
        return
    name, free = ("fixed_components", "W") if which == "H" else ("fixed_patterns", "H")
    scale_advice = (
        f"Rescale it to the data's scale (CoGAPS's patterns have maximum 1: {name} / "
        f"{name}.max(axis={1 if which == 'H' else 0}, keepdims=True) with X unchanged)."
    )
    if not np.any(given > 0):
        raise ValueError(
            f"'{name}' is zero everywhere: it explains no part of X, and {free} cannot be "
            "sampled against it. Pass the factors to hold fixed (for example a previous "
            f"fit's {'components_' if which == 'H' else 'loadings_'})."
        )
    largest = float(given.max())
    if largest > np.sqrt(np.finfo(np.float64).max / max(given.shape)):
        raise ValueError(
            f"'{name}' has entries up to {largest:.3g}: its products overflow in double "
            f"precision. {scale_advice}"
        )
    # X ~ W H: an entry sums n_components products, so the sampled factor's entries are
    # about the data's mean over n_components times the fixed factor's typical entry
    needed = _nonzero_mean(X) / (est.n_components * float(given[given > 0].mean()))
    if free == "W":
        cap = est.max_gibbs_mass_W / est.lambda_W_
    else:
        cap = est.max_gibbs_mass_H / est.lambda_H_
    if needed > cap:
        raise ValueError(
            f"'{name}' is on a scale that leaves {free} to reach entries of about "
            f"{needed:.3g}, beyond its largest Gibbs mass "
            f"({cap:.3g}, max_gibbs_mass_{free} / lambda_{free}_): the chain would stop at "
            f"that cap. {scale_advice}"
        )


def new_sampler(est, X, data, fixed):
    """A new chain from an empty atomic domain (or the fixed matrix), or with
    ``init="nmf"`` from :func:`nmf_start`; sets the prior rates and the seed of the
    per-row chains."""
    rng = check_random_state(est.random_state)
    seed = draw_seeds(rng)
    est._transform_seed = draw_seeds(rng)
    # from the canonical data: duplicates of a sparse X are summed there
    est.lambda_W_, est.lambda_H_ = prior_rates(data[1], est.n_components, est._atom_densities)
    _check_fixed_scale(est, data[1], fixed)
    _check_atom_budget(est, X.shape)
    K = est.n_components
    which, _, matrix = fixed
    W0 = matrix if which == "W" else np.zeros((X.shape[0], K))
    Ht0 = matrix if which == "H" else np.zeros((X.shape[1], K))
    sampler = make_sampler(est, data, W0, Ht0, seed=seed, fixed=which)
    if getattr(est, "init", "empty") != "nmf":
        return sampler
    # the start's products overflow where the empty domain's chi-square does
    _check_finite_start(sampler.chi_square(1))
    # the start's random factors come after the chain's seeds: the empty start is unchanged.
    # One BLAS thread: the products' sums over the rows or the columns of X are added in an
    # order that depends on BLAS's thread count (OMP_NUM_THREADS sets OpenBLAS's too), and
    # their last bits, then the chain's, with it
    with threadpool_limits(limits=1, user_api="blas"):
        W0, Ht0 = nmf_start(data, K, (est.lambda_W_, est.lambda_H_), fixed, rng)
    state = sampler.get_state()
    state["W"], state["Ht"] = W0, Ht0
    state["atoms_w"] = _one_atom_per_element(W0, which == "W")
    state["atoms_h"] = _one_atom_per_element(Ht0, which == "H")
    return make_sampler(est, data, W0, Ht0, state=state, fixed=which)


def _check_finite_start(chisq):
    """A ValueError that says what to do when X's chi-square against a start overflows."""
    if not np.isfinite(chisq):
        raise ValueError(
            f"The chi-square of X against the chain's start is {chisq}: the values of X "
            "scaled by their uncertainty are too large to square. Rescale X or raise the "
            "smallest uncertainties."
        )


# Multiplicative updates of the weighted NMF that starts a chain with init="nmf".
_NMF_START_ITER = 300
# Elements of the start below this fraction of their matrix's largest get no atom.
_NMF_START_CUTOFF = 1e-3


def nmf_start(data, n_components, rates, fixed, rng):
    """A start near the posterior: the non-negative factorisation of X under the fit's
    weights and priors (dense data, or the sparse model's weights on a sparse matrix).

    It minimises ``chi^2 / 2 + lambda_W sum W + lambda_H sum H`` (the Gaussian likelihood
    with the fit's precisions, and the exponential priors of the atoms' masses at their
    rates, Sherman, Gao & Fertig 2019, section 1.1) by Lee and Seung's multiplicative
    updates with the penalties in the denominators, from random factors on the data's
    scale. A matrix held fixed stays as it is. Elements below ``_NMF_START_CUTOFF`` of the
    largest of their matrix are set to 0: the prior's atoms make most elements exactly 0.

    Returns
    -------
    W, Ht : ndarray of shape (n_samples, K) and (n_features, K)
    """
    kind = data[0]
    which, _, matrix = fixed
    n, m = data[1].shape
    K = n_components
    if kind == "dense":
        X = np.asarray(data[1], dtype=np.float64)
        mean = float(X.mean())
    else:
        X = data[1]  # the canonical CSR of the sparse model
        mean = float(X.sum()) / (n * m)
    size = np.sqrt(max(mean, 1e-300) / K)
    W = matrix.copy() if which == "W" else rng.uniform(0.1, 1.0, (n, K)) * size
    H = matrix.T.copy() if which == "H" else rng.uniform(0.1, 1.0, (K, m)) * size
    if kind == "dense":
        gradients = _dense_gradients(X, data[2])
    else:
        gradients = _sparse_gradients(X, data[2], data[3])
    lam_w, lam_h = rates
    for _ in range(_NMF_START_ITER):
        # the negative and positive parts of the penalised chi-square's gradient
        if which != "H":
            down, up = gradients(W, H, "H")
            H *= down / np.maximum(up + lam_h, 1e-300)
        if which != "W":
            down, up = gradients(W, H, "W")
            W *= down / np.maximum(up + lam_w, 1e-300)
    if not (np.all(np.isfinite(W)) and np.all(np.isfinite(H))):
        raise ValueError(
            "The start's non-negative factorisation of X did not stay finite under the fit's "
            "uncertainty (its values span too many orders of magnitude for its weights). "
            "Rescale X (e.g. log1p) or start from the empty domain with init='empty'."
        )
    Ht = np.ascontiguousarray(H.T)
    for M, held in ((W, which == "W"), (Ht, which == "H")):
        if not held:
            M[M < _NMF_START_CUTOFF * M.max(initial=0.0)] = 0.0
    return W, Ht


def _dense_gradients(X, prec):
    """The two parts of the gradient of chi^2 / 2 in W or H: ``P X`` and ``P (W H)``."""
    P = np.asarray(prec, dtype=np.float64)
    PX = P * X

    def gradients(W, H, side):
        PWH = P * (W @ H)
        if side == "H":
            return W.T @ PX, W.T @ PWH
        return PX @ H.T, PWH @ H.T

    return gradients


def _sparse_gradients(csr, csr_t, name):
    """As :func:`_dense_gradients` under the sparse model's weights (``w0`` for a zero, the
    stored value's own otherwise; Sherman, Gao & Fertig 2019, section 3): ``P (W H) = w0 W H
    + (P - w0)`` on the stored entries, so a gradient costs O(nnz K + (n + m) K^2) and W H
    is never dense. ``csr_t`` is X transposed (CSR), whose rows are H's columns."""
    sigma0, poisson = NAMED_UNCERTAINTIES[name]
    w0 = 1.0 / sigma0**2
    sides = {}
    for side, matrix in (("W", csr), ("H", csr_t)):
        x = np.asarray(matrix.data, dtype=np.float64)
        w = 1.0 / np.maximum(x, 1.0) if poisson else 1.0 / np.maximum(sigma0 * x, sigma0) ** 2
        sides[side] = (_sparse_orientation(matrix), w * x, w - w0)

    def gradients(W, H, side):
        rows, wx, excess = sides[side]
        K = W.shape[1]
        threads = kernel_threads(4 * K * wx.size)
        Ht = np.ascontiguousarray(H.T)
        A, B = (W, Ht) if side == "W" else (Ht, np.ascontiguousarray(W))
        down, up = np.empty_like(A), np.empty_like(A)
        weighted_gradient_parts(rows, wx, excess, A, B, down, up, threads)
        if side == "H":
            return down.T, w0 * (W.T @ W) @ H + up.T
        return down, w0 * W @ (H @ H.T) + up

    return gradients


def _one_atom_per_element(M, held):
    """Atoms that make ``M``: one in the middle of each non-zero element's bin (none for
    a matrix held fixed, whose domain stays empty)."""
    flat = M.ravel()
    if held:
        return np.zeros(0, dtype=np.uint64), np.zeros(0)
    bin_length = np.uint64(np.iinfo(np.uint64).max // max(flat.size, 1))
    idx = np.flatnonzero(flat > 0).astype(np.uint64)
    return idx * bin_length + bin_length // np.uint64(2), flat[flat > 0].copy()


def make_sampler(est, data, W, Ht, seed=0, state=None, n_threads=1, fixed=None):
    """The compiled sampler of the model ``data`` (see :func:`model_data`) at ``W``, ``Ht``,
    or at a saved ``state``."""
    kind, a, b, name = data
    arguments = (
        *est._atom_densities,
        est.lambda_W_,
        est.lambda_H_,
        est.max_gibbs_mass_W,
        est.max_gibbs_mass_H,
        seed,
    )
    if kind == "sparse":
        return GibbsSampler(
            None,
            None,
            W,
            Ht,
            *arguments,
            state=state,
            sparse_data=(a, b, *NAMED_UNCERTAINTIES[name]),
            fixed=fixed,
            reversible=est._reversible,
        )
    # a fresh chain starts with one matrix zero: its residual is X itself; a float32
    # chain recomputes its residual from X at every iteration
    if state is None:
        R = a
    elif "residual" in state:  # a checkpoint's running residual: the chain continues exactly
        R = state["residual"][0]
    else:
        R = residual(a, W, Ht, n_threads)
    return GibbsSampler(
        R,
        b,
        W,
        Ht,
        *arguments,
        state=state,
        fixed=fixed,
        reversible=est._reversible,
        X=a if a.dtype == np.float32 else None,
    )


def restore_sampler(est, data, n_threads):
    """The sampler of the chain that ``warm_start`` continues."""
    state = est._sampler_state
    return make_sampler(
        est,
        data,
        state["W"],
        state["Ht"],
        state=state,
        n_threads=n_threads,
        fixed=state.get("fixed"),
    )


def gibbs_mass_caps(est):
    """The caps of the Gibbs mass moves, part of the chain's kernel: a chain continued
    under other caps would average the samples of two kernels."""
    return (float(est.max_gibbs_mass_W), float(est.max_gibbs_mass_H))


def warm_start_mismatch(est, X, data, fixed, likelihood):
    """Why ``warm_start`` cannot continue the previous chain on these data (a sentence), or
    None when it can. A previous chain whose samples cannot be averaged with this fit's
    (other moves, another fixed matrix) is an error: the user asked to continue it."""
    state = getattr(est, "_sampler_state", None)
    if state is None:
        # fitted before, to the end, without warm_start (or in distributed mode)
        return ("the previous fit kept no sampler state (it ran with warm_start=False, or "
                "in distributed mode; set warm_start=True before the first fit to continue "
                "it later)")  # fmt: skip
    previous = (state["W"].shape[0], state["Ht"].shape[0], state["W"].shape[1])
    if previous != (*X.shape, est.n_components):
        return (f"X has shape {X.shape} and n_components={est.n_components}, the previous "
                f"chain had {previous[:2]} and {previous[2]}")  # fmt: skip
    if state["sparse"] != (data[0] == "sparse"):
        was, now = ("sparse", "dense") if state["sparse"] else ("dense", "sparse")
        return (f"the previous chain used the {was} model and this fit the {now} one "
                "(sparse_optimization or the input's format changed)")  # fmt: skip
    # (states saved before these checks existed carry no digest or densities)
    if state.get("likelihood", likelihood) != likelihood:
        return ("X or its uncertainty differ from the previous fit's, whose likelihood the "
                "chain's samples follow")  # fmt: skip
    densities = tuple(est._atom_densities)
    previous_densities = state.get("atom_densities", densities)
    if previous_densities != densities:
        return (f"the atom densities (atom_density_W, atom_density_H) are {densities}, the "
                f"previous chain's prior had {previous_densities}")  # fmt: skip
    caps = gibbs_mass_caps(est)
    previous_caps = state.get("gibbs_mass_caps", caps)
    if previous_caps != caps:
        return (f"the Gibbs mass caps (max_gibbs_mass_W, max_gibbs_mass_H) are {caps}, the "
                f"previous chain's moves had {previous_caps}")  # fmt: skip
    # states saved by release 0.1 name the moves "birth_death", or none (CoGAPS's)
    previous_moves = state.get("solver", state.get("birth_death", "cogaps"))
    solver = est._parameter("solver")
    if previous_moves != solver:
        raise ValueError(
            f"warm_start=True continues the previous chain, which ran with "
            f"solver={previous_moves!r}; this fit has solver={solver!r}. The two moves "
            "sample different laws, so their samples cannot be averaged together: use the "
            "same solver, or set warm_start=False to start a new chain."
        )
    which, _, matrix = fixed
    previous = state.get("fixed")
    if which != previous or (
        which is not None
        and not np.array_equal(matrix, state["W"] if which == "W" else state["Ht"])
    ):
        describe = {None: "no fixed matrix", "W": "fixed_patterns", "H": "fixed_components"}
        raise ValueError(
            f"warm_start=True continues the previous chain, which was fitted with "
            f"{describe[previous]}; this fit has {describe[which]}"
            f"{' with other values' if which == previous else ''}. Pass the same fixed "
            "matrix as before, or set warm_start=False to start a new chain."
        )
    return None


def checkpoint_key(est, problem):
    """What a checkpoint's chain depends on, to refuse resuming it under anything else: the
    data and uncertainty (their digest), the fixed matrix, and every parameter of the chain
    (the seed when it is an integer; a generator's state is in the checkpoint itself)."""
    which, matrix, _ = problem.fixed
    seed = est.random_state
    if not (seed is None or isinstance(seed, Integral)):
        seed = type(seed).__name__
    phase = est.snapshot_phase
    return {
        "data and uncertainty": problem.likelihood,
        "fixed matrix": None if which is None else (which, fingerprint(matrix)),
        "n_components": est.n_components,
        "max_iter": est.max_iter,
        "atom densities (atom_density_W, atom_density_H)": tuple(est._atom_densities),
        "max_gibbs_mass_W": float(est.max_gibbs_mass_W),
        "max_gibbs_mass_H": float(est.max_gibbs_mass_H),
        "solver": est._parameter("solver"),
        "init": est.init,
        "random_state": seed,
        "model (sparse_optimization or sparse X)": problem.data[0],
        "n_snapshots": est.n_snapshots,
        "snapshot_phase": "calibration" if phase == "equilibration" else phase,
    }


def check_checkpoint(est, payload):
    """Refuse a checkpoint written by a fit on other data or with other parameters."""
    if "chains" in payload:
        n = len(payload["chains"])
        raise ValueError(
            f"The checkpoint file {os.fspath(est.checkpoint_path)!r} holds a fit of {n} "
            f"chains; this fit runs one. Fit with n_chains={n} to resume them, or delete the "
            "file (or pass another checkpoint_path) to start a new chain."
        )
    key = payload.get("key", {})
    differ = [name for name, value in est._checkpoint_key.items() if key.get(name) != value]
    if differ:
        raise ValueError(
            f"The checkpoint file {os.fspath(est.checkpoint_path)!r} holds a chain fitted with "
            f"another {', '.join(differ)} than this fit: resuming it would not give this "
            "fit's result. Pass the data and parameters of the fit that wrote it, or delete "
            "the file (or pass another checkpoint_path) to start a new chain."
        )


class ChainState:
    """A running chain: the sampler, the phase of each of its iterations, its chi-square
    and the atom counts after each iteration.

    Parameters
    ----------
    sampler : GibbsSampler
        The compiled chain.
    sampling : list of bool
        For each iteration of this run, whether it samples (True) or calibrates.
    n_calibration : int
        Length of the calibration phase (the annealing schedule's scale).
    n_threads, pass_threads : int
        Threads of the chain, and of the passes over the data that recompute its chi-square.
    """

    def __init__(self, sampler, sampling, n_calibration, n_threads, pass_threads,
                 snapshots=frozenset(), rescale=True, anneal=True):  # fmt: skip
        self.sampler, self.sampling, self.n_calibration = sampler, sampling, n_calibration
        # the run's length, which the exact recomputations of the chi-square read: a run in
        # rounds (several chains) cuts ``sampling`` at each round, not its chain
        self.total = len(sampling)
        self.anneal = anneal
        self.n_threads, self.pass_threads = n_threads, pass_threads
        self.chisq = None
        self.atoms = []
        self.snapshot_at, self.rescale = snapshots, rescale
        self.snapshots = []

    def take_snapshot(self, iteration):
        """Keep the chain's current W and H, scaled as :meth:`accumulate` scales a sample."""
        W, Ht = self.sampler.W, self.sampler.Ht
        if self.rescale:
            scale = W.max(axis=0)
            scale[scale <= 0] = 1.0
            W /= scale
            Ht *= scale
        self.snapshots.append((iteration, W, np.ascontiguousarray(Ht.T)))

    def drop_snapshots_after(self, iteration):
        """Forget the snapshots of iterations an interruption leaves out."""
        self.snapshots = [shot for shot in self.snapshots if shot[0] <= iteration]

    def start(self):
        """The chi-square at the start; a ValueError when it is not finite."""
        self.chisq = self.sampler.chi_square(self.pass_threads)
        _check_finite_start(self.chisq)
        return self.chisq

    def iterate(self, iteration):
        """Iteration ``iteration`` (1-based): one Cython call; returns the chi-square."""
        sampling = self.sampling[iteration - 1]
        n, total = self.n_calibration, self.total
        # the annealing of Sherman, Gao & Fertig (2019), section 1.4: the temperature
        # scales the likelihood while calibrating; as in the C++ CoGAPS, it rises linearly
        # to 1 over the first half of the calibration phase. A chain started near the
        # posterior (init="nmf") is not annealed: at a low temperature the prior would
        # undo its start.
        tau = 1.0 if sampling or not self.anneal else min(1.0, 2.0 * iteration / n)
        if sampling:
            # the reversible chain samples with a fixed number of updates per iteration
            self.sampler.freeze_proposal_counts()
        _, _, dloglik = self.sampler.iterate(tau, self.n_threads)
        # logL = -chisq / 2; re-computed exactly from time to time against drift
        self.chisq -= 2.0 * dloglik
        if iteration % 100 == 0 or iteration in (n, total):
            self.chisq = self.sampler.chi_square(self.pass_threads)
        if sampling:
            self.sampler.accumulate()
        if iteration in self.snapshot_at:
            self.take_snapshot(iteration)
        self.atoms.append(self.sampler.n_atoms)
        return self.chisq

    def progress_extra(self):
        n_atoms = self.atoms[-1]
        phase = "sampling" if self.sampling[len(self.atoms) - 1] else "calibration"
        return f"{phase:>11}  atoms W {n_atoms[0]} H {n_atoms[1]}"

    def atom_history(self):
        return np.asarray(self.atoms, dtype=np.int64).reshape(-1, 2)


def snapshot_plan(sampling, n_snapshots, phase):
    """The iterations of a run (1-based) at which to keep the chain's state.

    As R's CoGAPS: in each phase named, every ``length // n_snapshots`` iterations of that
    phase, ``n_snapshots`` of them (every iteration when the phase is shorter).

    Parameters
    ----------
    sampling : list of bool
        For each iteration of the run, whether it samples.
    n_snapshots : int
        Snapshots per phase.
    phase : {"sampling", "calibration", "all"}
        The phases that get them.

    Returns
    -------
    iterations : frozenset of int
    """
    if n_snapshots == 0:
        return frozenset()
    phase = "calibration" if phase == "equilibration" else phase  # R's name
    sampling = np.asarray(sampling, dtype=bool)
    taken = []
    for name, mask in (("calibration", ~sampling), ("sampling", sampling)):
        if phase not in (name, "all"):
            continue
        iterations = np.flatnonzero(mask) + 1
        every = max(iterations.size // n_snapshots, 1)
        taken.extend(iterations[every - 1 :: every][:n_snapshots].tolist())
    return frozenset(taken)


def set_snapshots(est, state, offset, previous, n_samples, n_features, dtype):
    """The snapshots of this run after those of the run it continues (``previous``, or
    None), their iterations counted over the whole chain."""
    K = est.n_components
    W = [shot[1] for shot in state.snapshots]
    H = [shot[2] for shot in state.snapshots]
    its = [offset + shot[0] for shot in state.snapshots]
    if previous is not None:
        W = [*previous[0], *W]
        H = [*previous[1], *H]
        its = [*previous[2].tolist(), *its]
    est.loadings_snapshots_ = as_dtype(np.asarray(W).reshape(-1, n_samples, K), dtype)
    est.components_snapshots_ = as_dtype(np.asarray(H).reshape(-1, K, n_features), dtype)
    est.snapshot_iterations_ = np.asarray(its, dtype=np.int64)


def chisq_fall(sampling_chisq):
    """``(fall, first, last)`` when the chain's chi-square still fell during the sampling
    phase, else None.

    A chain that has reached its stationary law has a chi-square that fluctuates around a
    level; one still falling while samples are averaged has not converged. The fall is
    measured between the means of the first and last quarters of the sampling iterations.
    """
    n = len(sampling_chisq)
    if n < _MIN_SAMPLING_ITER_CHECKED:
        return None
    quarter = n // 4
    first = float(np.mean(sampling_chisq[:quarter]))
    last = float(np.mean(sampling_chisq[-quarter:]))
    fall = (first - last) / first if first > 0 else 0.0
    if fall <= _UNCONVERGED_CHISQ_FALL:
        return None
    return fall, first, last


def unconverged_message(est, sampling_chisq):
    """Why the chain of this fit has not converged (see :func:`chisq_fall`), or None: its
    posterior means (hence ``chisq_`` and ``score``) describe a worse fit than the model can
    reach with this ``n_components``."""
    fell = chisq_fall(sampling_chisq)
    if fell is None:
        return None
    fall, first, last = fell
    return (
        f"The chi-square fell by {fall:.0%} during the sampling phase (from {first:.6g} to "
        f"{last:.6g}, means of its first and last quarters): the chain had not converged "
        "when sampling began, so the posterior means mix states of a worse fit and chisq_ "
        f"and score understate what n_components={est.n_components} can reach. Raise "
        f"max_iter (now {est.max_iter}); a model with few patterns gains its atoms slowly "
        "(see 'Choosing the number of patterns' in the CoGAPS guide)."
    )


def set_posterior(est, sampler, data, history, atoms, pass_threads, fixed):
    """Set the fitted matrices, their chi-square and the traces from the chain's sums."""
    if sampler.n_accumulated == 0:
        # interrupted during calibration: the current state is the only sample
        sampler.accumulate()
    w_mean, w_std, h_mean, h_std = sampler.posterior()
    # the fixed matrix comes back exactly as it was given, with standard deviation 0
    which, _, matrix = fixed
    if which == "W":
        w_mean, w_std = matrix, np.zeros_like(matrix)
    elif which == "H":
        h_mean, h_std = matrix, np.zeros_like(matrix)
    est.loadings_ = w_mean
    est.loadings_std_ = w_std
    est.components_ = np.ascontiguousarray(h_mean.T)
    est.components_std_ = np.ascontiguousarray(h_std.T)
    est.chisq_ = chi_square_of(data, w_mean, h_mean, pass_threads)
    est.objective_history_ = history
    est.n_atoms_history_ = atoms


def chi_square_of(data, W, Ht, pass_threads):
    """The chi-square of the model ``data`` (see :func:`model_data`) at ``W``, ``Ht``."""
    kind, a, b, name = data
    if kind == "sparse":
        sigma0, poisson = NAMED_UNCERTAINTIES[name]
        return sparse_chi_square(_sparse_orientation(a), W, Ht, sigma0, pass_threads, poisson)
    return fit_chi_square(a, b, W, Ht, pass_threads)


def as_dtype(values, dtype):
    """``values`` (float64 results) in the dtype of the data, unchanged for float64."""
    return values if dtype == np.float64 else np.asarray(values, dtype=dtype)


def cast_attributes(model, dtype):
    """The fitted matrices in the dtype of the data (float32 data give float32 attributes;
    the chain's sums are float64 in both cases)."""
    for name in ("loadings_", "loadings_std_", "components_", "components_std_"):
        setattr(model, name, as_dtype(getattr(model, name), dtype))


def check_finite_fit(est):
    """Raise instead of leaving a NaN or an infinity in a fitted attribute."""
    for name in ("components_", "components_std_", "loadings_", "loadings_std_", "chisq_"):
        if not np.all(np.isfinite(getattr(est, name))):
            raise ValueError(
                f"The fit produced non-finite values in {name!r} (chi-square "
                f"{est.chisq_}): the data or its uncertainty are too extreme for "
                "double precision. Rescale X so that its values and their ratios to the "
                "uncertainty stay well inside 1e-150..1e150."
            )
