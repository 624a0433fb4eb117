"""Simulated data sets with their ground truth, reproducible from ``random_state``."""

import numpy as np

from .._utils._seeding import check_seed

__all__ = ["make_patterns", "make_background_counts", "make_single_cell"]


def make_patterns(
    n_samples=40,
    n_features=300,
    n_components=3,
    *,
    density=0.3,
    noise=0.1,
    random_state=None,
):
    """Simulate non-negative data made of smooth, overlapping patterns across samples.

    In the spirit of CoGAPS's ``SimpSim`` examples: the samples lie along an axis (a
    time course, say); each of the ``n_components`` patterns is a Gaussian bump along
    that axis, scaled to a maximum of 1; each feature loads on a random subset of the
    patterns with Gamma-distributed amplitudes. The data are ``W @ H`` plus Gaussian
    noise whose standard deviation is ``noise`` times the signal (at least ``noise``),
    clipped at zero, which matches CoGAPS's default uncertainty.

    Parameters
    ----------
    n_samples : int, default=40
        Number of samples (points along the pattern axis).
    n_features : int, default=300
        Number of features (genes).
    n_components : int, default=3
        Number of patterns.
    density : float, default=0.3
        Probability that a feature loads on a given pattern; every feature loads on at
        least one.
    noise : float, default=0.1
        Relative standard deviation of the noise.
    random_state : int, RandomState instance or None, default=None
        Seed of the simulation.

    Returns
    -------
    X : ndarray of shape (n_samples, n_features)
        The non-negative data.
    W : ndarray of shape (n_samples, n_components)
        The true patterns (each column has maximum 1).
    H : ndarray of shape (n_components, n_features)
        The true amplitudes.

    Examples
    --------
    >>> from sklearn_cogaps.datasets import make_patterns
    >>> X, W, H = make_patterns(n_samples=20, n_features=50, random_state=0)
    >>> X.shape, W.shape, H.shape
    ((20, 50), (20, 3), (3, 50))
    """
    if n_components < 1 or n_samples < 1 or n_features < 1:
        raise ValueError(
            "n_samples, n_features and n_components must be positive; got "
            f"{n_samples}, {n_features}, {n_components}."
        )
    if not 0.0 < density <= 1.0:
        raise ValueError(f"density must lie in (0, 1]; got {density}.")
    if noise < 0:
        raise ValueError(f"noise must be non-negative; got {noise}.")
    rng = check_seed(random_state)
    t = np.linspace(0.0, 1.0, n_samples)
    centres = np.linspace(0.0, 1.0, n_components + 2)[1:-1]
    width = 0.7 / (n_components + 1)
    W = np.exp(-0.5 * ((t[:, None] - centres[None, :]) / width) ** 2)
    W /= W.max(axis=0, keepdims=True)

    loads = rng.random_sample((n_components, n_features)) < density
    loads[rng.randint(n_components, size=n_features), np.arange(n_features)] = True
    H = rng.gamma(2.0, 2.5, size=(n_components, n_features)) * loads

    mean = W @ H
    sd = noise * np.maximum(mean, 1.0)
    X = np.clip(mean + sd * rng.standard_normal(mean.shape), 0.0, None)
    return X, W, H


def make_background_counts(
    n_samples=300,
    n_features=200,
    n_components=3,
    *,
    weight=0.05,
    signal=20.0,
    frac_samples=0.1,
    frac_features=0.1,
    baseline=1.0,
    random_state=None,
):
    """Simulate counts from the weighted-background Poisson model, with sparse topics.

    The design of the reference run of ``ebpmf_wbg``: ``l0_i ~ 0.35 Gamma(2, rate 2)``,
    ``f0_j ~ Gamma(0.5, rate 0.5)``; the loadings and factors are 1 except on a random
    ``frac_samples`` of the samples (``frac_features`` of the features) of each topic, where
    they are ``signal``; all are multiplied by U(0.8, 1.2); ``w_k = weight``; then
    ``X_ij ~ Poisson(l0_i f0_j sum_k w_k l_ik f_jk)``. With ``baseline`` below 1 the
    loadings and factors outside the topics are ``baseline`` instead of 1.

    Parameters
    ----------
    n_samples : int, default=300
        Number of rows.
    n_features : int, default=200
        Number of columns.
    n_components : int, default=3
        Number of topics.
    weight : float, default=0.05
        The topic weight ``w_k`` (the same for every topic).
    signal : float, default=20.0
        Value of a loading or factor inside a topic.
    frac_samples, frac_features : float, default=0.1
        Fractions of rows and columns inside each topic.
    baseline : float, default=1.0
        Value of the loadings and factors outside the topics.
    random_state : int, RandomState instance or None, default=None
        Seed of the simulation.

    Returns
    -------
    X : scipy.sparse.csr_matrix of shape (n_samples, n_features)
        The counts (float64).
    L : ndarray of shape (n_samples, n_components)
        The true loadings ``l_ik``.
    F : ndarray of shape (n_features, n_components)
        The true factors ``f_jk``.
    l0 : ndarray of shape (n_samples,)
        The true row scales.
    f0 : ndarray of shape (n_features,)
        The true column scales.

    Examples
    --------
    >>> from sklearn_cogaps.datasets import make_background_counts
    >>> X, L, F, l0, f0 = make_background_counts(50, 40, 2, random_state=0)
    >>> X.shape, L.shape, F.shape
    ((50, 40), (50, 2), (40, 2))
    """
    from scipy import sparse

    if n_components < 1 or n_samples < 1 or n_features < 1:
        raise ValueError(
            "n_samples, n_features and n_components must be positive; got "
            f"{n_samples}, {n_features}, {n_components}."
        )
    rng = check_seed(random_state)
    l0 = 0.35 * rng.gamma(2.0, 0.5, n_samples)
    f0 = rng.gamma(0.5, 2.0, n_features)
    L = np.full((n_samples, n_components), float(baseline))
    F = np.full((n_features, n_components), float(baseline))
    n_in_l = max(1, int(round(frac_samples * n_samples)))
    n_in_f = max(1, int(round(frac_features * n_features)))
    for k in range(n_components):
        L[rng.choice(n_samples, n_in_l, replace=False), k] = signal
        F[rng.choice(n_features, n_in_f, replace=False), k] = signal
    L *= rng.uniform(0.8, 1.2, L.shape)
    F *= rng.uniform(0.8, 1.2, F.shape)
    mean = np.outer(l0, f0) * ((weight * L) @ F.T)
    X = sparse.csr_matrix(rng.poisson(mean).astype(np.float64))
    return X, L, F, l0, f0


def make_single_cell(
    n_samples=500,
    n_features=200,
    n_components=4,
    *,
    depth=1.0,
    background=0.02,
    random_state=None,
):
    """Simulate sparse single-cell-like counts made of gene programs.

    Every cell (sample) belongs to one of ``n_components`` cell types and runs its type's
    gene program at an activity drawn from U(0.5, 1); with probability 0.2 it also runs each
    other program at a low activity, U(0, 0.3). Every gene (feature) is a marker of one
    program, with a Gamma(2, scale 2) amplitude, and has a small ``background`` amplitude in
    the others. The counts are ``Poisson(depth_i * (W @ H))`` with a per-cell depth
    ``depth * LogNormal(0, 0.3)`` (folded into the returned ``W``), so most entries are zero
    (about ``1 - 1/n_components`` of them, and more at low ``depth``).

    Parameters
    ----------
    n_samples : int, default=500
        Number of cells.
    n_features : int, default=200
        Number of genes.
    n_components : int, default=4
        Number of programs (and cell types).
    depth : float, default=1.0
        Mean scale of the counts.
    background : float, default=0.02
        Amplitude of a gene in the programs it is not a marker of.
    random_state : int, RandomState instance or None, default=None
        Seed of the simulation.

    Returns
    -------
    X : scipy.sparse.csr_matrix of shape (n_samples, n_features)
        The counts (float64).
    W : ndarray of shape (n_samples, n_components)
        The true activity of each program in each cell, depth included.
    H : ndarray of shape (n_components, n_features)
        The true programs.

    Examples
    --------
    >>> from sklearn_cogaps.datasets import make_single_cell
    >>> X, W, H = make_single_cell(100, 40, 3, random_state=0)
    >>> X.shape, W.shape, H.shape
    ((100, 40), (100, 3), (3, 40))
    """
    from scipy import sparse

    if n_components < 1 or n_samples < 1 or n_features < 1:
        raise ValueError(
            "n_samples, n_features and n_components must be positive; got "
            f"{n_samples}, {n_features}, {n_components}."
        )
    if depth <= 0 or background < 0:
        raise ValueError(
            f"depth must be positive and background non-negative; got {depth} and {background}."
        )
    rng = check_seed(random_state)
    cell_type = rng.randint(n_components, size=n_samples)
    W = rng.uniform(0.0, 0.3, (n_samples, n_components)) * (
        rng.random_sample((n_samples, n_components)) < 0.2
    )
    W[np.arange(n_samples), cell_type] = rng.uniform(0.5, 1.0, n_samples)
    W *= depth * rng.lognormal(0.0, 0.3, n_samples)[:, None]
    program = rng.randint(n_components, size=n_features)
    H = np.full((n_components, n_features), float(background))
    H[program, np.arange(n_features)] = rng.gamma(2.0, 2.0, n_features)
    # row blocks: the dense mean of a large atlas is never held whole (the draws are the
    # same as in one call, which fills its output in row order)
    block = max(1, 2**22 // n_features)
    X = sparse.vstack(
        [
            sparse.csr_matrix(rng.poisson(W[start : start + block] @ H).astype(np.float64))
            for start in range(0, n_samples, block)
        ],
        format="csr",
    )
    return X, W, H
