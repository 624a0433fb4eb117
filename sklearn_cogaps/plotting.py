"""Figures of fitted estimators: patterns, markers, traces and deconvolved densities.

Every function draws on the Matplotlib ``Axes`` it is given (or on a new figure's) and returns
that ``Axes``. Matplotlib is an optional dependency: ``pip install "sklearn_cogaps[plot]"``.
"""

from collections import Counter

import numpy as np
from sklearn.utils.validation import check_is_fitted

from ._utils._warnings import warn

__all__ = ["plot_patterns", "plot_markers", "plot_trace", "plot_xd"]


def _pyplot():
    try:
        import matplotlib.pyplot as plt
    except ImportError:
        raise ImportError(
            "sklearn_cogaps.plotting needs matplotlib, which is not installed: "
            'pip install "sklearn_cogaps[plot]" (or pip install matplotlib).'
        ) from None
    return plt


def _sample_factors(estimator):
    """The fitted per-sample factors of a factorisation estimator, ``loadings_``."""
    check_is_fitted(estimator)
    factors = getattr(estimator, "loadings_", None)
    if factors is None:
        raise TypeError(
            f"{type(estimator).__name__} has no per-sample factors (loadings_); pass the array "
            "itself."
        )
    return np.asarray(factors)


def _trace(estimator):
    """The objective after each iteration of a fitted estimator, its name and whether it is
    best drawn on a logarithmic axis."""
    check_is_fitted(estimator)
    values = getattr(estimator, "objective_history_", None)
    if values is None:
        raise TypeError(
            f"{type(estimator).__name__} records no trace (objective_history_): plot_trace "
            "draws the estimators of sklearn_cogaps."
        )
    cls = type(estimator)
    return (
        np.asarray(values, dtype=np.float64).ravel(),
        cls._objective_name,
        cls._objective_log_scale,
    )


def _axes(ax):
    if ax is None:
        _, ax = _pyplot().subplots()
    else:
        _pyplot()
    return ax


def _is_missing(value):
    """Whether a label is missing: None, NaN, or pandas' NA and NaT."""
    if value is None or type(value).__name__ in ("NAType", "NaTType"):
        return True
    return isinstance(value, (float, np.floating)) and bool(np.isnan(value))


def _labels(obj, axis):
    """The labels of a pandas object along ``axis`` (0: index, 1: columns) as a list of
    str, or None: other inputs and pandas' default ``RangeIndex`` carry no labels."""
    index = getattr(obj, "index" if axis == 0 else "columns", None)
    if index is None or not hasattr(index, "tolist") or type(index).__name__ == "RangeIndex":
        return None
    return [str(v) for v in index.tolist()]


def _follow_labels(values, labels, wanted, axis, what, wanted_what, disjoint_by_position=False):
    """``values`` with its ``axis`` reordered so that its ``labels`` follow ``wanted``.

    Positions are used when either side has no labels; the same labels in another order
    are reordered; labels that differ are refused (``what`` and ``wanted_what`` name the
    two sides in the message), except labels that share none when ``disjoint_by_position``
    (new names for the same positions, as ``sample_names`` gives).
    """
    if labels is None or wanted is None:
        return values
    wanted = [str(v) for v in wanted]
    if labels == wanted or (disjoint_by_position and not set(labels) & set(wanted)):
        return values
    # the same labels in another order, or more of them (a Series of every cell beside the
    # patterns of a subset): taken by label
    if len(set(labels)) == len(labels) and set(wanted) <= set(labels):
        position = {label: i for i, label in enumerate(labels)}
        return np.take(values, [position[label] for label in wanted], axis=axis)
    have = set(labels)
    missing = [label for label in wanted if label not in have]
    where = (
        f"{len(missing)} of {wanted_what} are not among them, first {missing[0]!r}"
        if missing
        else "some of its labels repeat, first "
        f"{next(v for v, c in Counter(labels).items() if c > 1)!r}"
    )
    raise ValueError(
        f"The labels of {what} do not name {wanted_what}: {where}. Pass data labelled "
        f"like {wanted_what}, or an array to match them by position."
    )


def _data_by_feature_names(X, feature_names):
    """X as a float array whose columns follow ``feature_names``, and its sample labels.

    A DataFrame or an AnnData carries its feature names: its columns are taken by name
    (in another order they are put in the fitted order; other names are refused), and its
    index or ``obs_names`` label the samples. Other inputs are read by position. Returns
    ``(X, sample_labels, feature_labels)``, the labels None when X has none.
    """
    from scipy import sparse

    from ._utils._anndata import is_anndata, load_matrix

    if is_anndata(X):
        columns = [str(v) for v in X.var_names]
        samples = [str(v) for v in X.obs_names]
        X = load_matrix(X.X)
    else:
        columns, samples = _labels(X, 1), _labels(X, 0)
    X = X.toarray() if sparse.issparse(X) else np.asarray(X, dtype=np.float64)
    X = _follow_labels(X, columns, feature_names, 1, "X's features", "the fitted features")
    return X, samples, columns


def plot_patterns(
    patterns,
    *,
    x=None,
    groups=None,
    pattern_names=None,
    sample_names=None,
    xlabel=None,
    ax=None,
    **line_kwargs,
):
    """Draw each pattern across the samples, one line per pattern.

    Parameters
    ----------
    patterns : estimator or array-like of shape (n_samples, n_components)
        A fitted factorisation estimator (its per-sample factor ``loadings_``: the patterns
        of CoGAPS, the loadings of the Poisson factorisations) or the array itself.
    x : array-like of shape (n_samples,), default=None
        Position of each sample on the horizontal axis, for example its time point; the
        samples are drawn in increasing ``x``. None places them at 0, 1, 2, ... in order.
    groups : array-like of shape (n_samples,), default=None
        A group label for each sample (condition, cell type): each line then goes through
        the mean of its pattern in each group, groups in the order of a categorical's
        categories (else of first appearance), and the axis is labelled with the groups.
        Missing labels (NaN) are refused. A pandas Series is taken by label (it may hold
        more samples than the patterns). Cannot be combined with ``x``.
    pattern_names : list of str, default=None
        Legend entries; ``Pattern_1``, ``Pattern_2``, ... by default, as CoGAPS names them.
    sample_names : array-like of shape (n_samples,), default=None
        The samples' names, in the order of the patterns' rows (the fitted data's index,
        ``X.index`` or ``adata.obs_names``), when ``patterns`` carries none: a fitted
        estimator keeps no sample names. A pandas Series of ``x`` or ``groups`` is then
        matched to the samples by its index. Without them such a Series is read by position,
        with a warning.
    xlabel : str, default=None
        Label of the horizontal axis: by default the name of ``x`` or ``groups`` when it is
        a named pandas Series, else "sample" (or "group" with ``groups``).
    ax : matplotlib Axes, default=None
        Where to draw; a new figure's Axes when None.
    **line_kwargs
        Passed to :meth:`matplotlib.axes.Axes.plot`.

    Returns
    -------
    ax : matplotlib Axes
        The Axes, with one line per pattern and a legend.

    Examples
    --------
    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> from sklearn_cogaps import CoGAPS
    >>> from sklearn_cogaps.datasets import make_patterns
    >>> from sklearn_cogaps.plotting import plot_patterns
    >>> X, _, _ = make_patterns(n_samples=20, n_features=40, n_components=2, random_state=0)
    >>> model = CoGAPS(n_components=2, max_iter=50, random_state=0).fit(X)
    >>> ax = plot_patterns(model, x=range(0, 40, 2))
    >>> len(ax.get_lines())
    2
    """
    if hasattr(patterns, "fit"):
        patterns = _sample_factors(patterns)
    samples, columns = _labels(patterns, 0), _labels(patterns, 1)
    P = np.asarray(patterns, dtype=np.float64)
    if sample_names is not None:
        samples = [str(v) for v in np.asarray(sample_names).ravel()]
        if P.ndim == 2 and len(samples) != P.shape[0]:
            raise ValueError(
                f"sample_names has {len(samples)} names for the {P.shape[0]} samples of the "
                "patterns."
            )
    if P.ndim != 2:
        raise ValueError(f"patterns must be 2-D (n_samples, n_components); got shape {P.shape}.")
    n, K = P.shape
    if pattern_names is None:
        pattern_names = columns or [f"Pattern_{k + 1}" for k in range(K)]
    elif len(pattern_names) != K:
        raise ValueError(f"pattern_names has {len(pattern_names)} names for {K} patterns.")
    if x is not None and groups is not None:
        raise ValueError("give x or groups, not both.")
    ax = _axes(ax)
    # a named Series of x or groups names the axis (time, dose) unless xlabel does
    x_name = getattr(x if groups is None else groups, "name", None)
    # a Series of x or groups is matched to a DataFrame of patterns by its index
    given = x if groups is None else groups
    if samples is None and _labels(given, 0) is not None:
        what = "x" if groups is None else "groups"
        warn(
            f"{what} is labelled by sample ({_labels(given, 0)[:3]}...), but the patterns "
            "carry no sample names (a fitted estimator keeps none): it is matched to them "
            f"by position. Pass sample_names=X.index (the fitted data's sample names) to "
            f"match it by label, or {what}.to_numpy() if its order is the data's."
        )
    if x is not None:
        x = _follow_labels(np.asarray(x), _labels(x, 0), samples, 0, "x", "the patterns' samples")
    if groups is not None:
        groups = _follow_labels(
            np.asarray(groups), _labels(groups, 0), samples, 0, "groups", "the patterns' samples"
        )
        if groups.shape != (n,):
            raise ValueError(f"groups must have one label per sample ({n}); got {groups.shape}.")
        missing = np.array([_is_missing(g) for g in groups.tolist()], dtype=bool)
        if missing.any():
            raise ValueError(
                f"groups has {int(missing.sum())} missing labels (NaN, first at sample "
                f"{int(np.argmax(missing))}): name them, for example "
                "pandas.Series(groups, dtype=object).fillna('unassigned') (a Series keeps "
                "its labels), or leave their samples out."
            )
        categorical = getattr(given, "cat", given)  # a Series' .cat, or a Categorical
        categories = getattr(categorical, "categories", None)
        if categories is not None:  # a categorical's order (scanpy's), the present ones
            present = set(groups.tolist())
            levels = np.array([c for c in categories if c in present], dtype=object)
        else:
            _, first = np.unique(groups, return_index=True)
            levels = groups[np.sort(first)]
        positions = np.arange(len(levels))
        values = np.array([P[groups == g].mean(axis=0) for g in levels])
        ax.set_xticks(positions, [str(g) for g in levels])
        default_label = "group" if x_name is None else str(x_name)
    else:
        positions = np.arange(n, dtype=float) if x is None else x.astype(float)
        if positions.shape != (n,):
            raise ValueError(f"x must have one value per sample ({n}); got {positions.shape}.")
        order = np.argsort(positions, kind="stable")
        positions, values = positions[order], P[order]
        default_label = "sample" if x is None or x_name is None else str(x_name)
    line_kwargs.setdefault("marker", "o")
    for k in range(K):
        ax.plot(positions, values[:, k], label=pattern_names[k], **line_kwargs)
    ax.set_xlabel(default_label if xlabel is None else xlabel)
    ax.set_ylabel("pattern value")
    ax.legend()
    return ax


def plot_markers(
    estimator=None,
    *,
    amplitudes=None,
    patterns=None,
    X=None,
    n_markers=10,
    threshold="all",
    feature_names=None,
    sample_names=None,
    cmap="viridis",
    ax=None,
):
    """Heatmap of the best marker features of each pattern.

    The markers are those of :func:`~sklearn_cogaps.pattern_markers` (as CoGAPS's
    ``patternMarkers``), the best ``n_markers`` of each pattern, stacked pattern by pattern.
    Without ``X`` each row shows a feature's amplitudes in the patterns, scaled to their
    maximum; with ``X`` it shows the feature's data across the samples (as R CoGAPS's
    ``plotPatternMarkers``), scaled from its minimum (0) to its maximum (1).

    Parameters
    ----------
    estimator : estimator, default=None
        A fitted factorisation estimator; its ``components_`` and per-sample factor are used.
        Give ``amplitudes`` and ``patterns`` instead to plot arrays.
    amplitudes : array-like of shape (n_features, n_components), default=None
        Amplitudes (``components_.T``; CoGAPS's ``Amean``), when no estimator is given.
    patterns : array-like of shape (n_samples, n_components), default=None
        Patterns (CoGAPS's ``Pmean``), when no estimator is given.
    X : {array-like, sparse matrix, DataFrame, AnnData} of shape (n_samples, n_features), \
            default=None
        The data: show the markers' values across the samples instead of their amplitudes.
        A DataFrame's columns (an AnnData's ``var_names``) are matched to the feature names
        by name, and its index (``obs_names``) labels the samples.
    n_markers : int, default=10
        Markers shown per pattern (fewer when a pattern has fewer).
    threshold : {"all", "cut"}, default="all"
        Passed to :func:`~sklearn_cogaps.pattern_markers`.
    feature_names : array-like of str of shape (n_features,), default=None
        Row labels; the estimator's ``feature_names_in_`` when it has them, else indices.
    sample_names : array-like of str of shape (n_samples,), default=None
        Column labels when ``X`` is given.
    cmap : str, default="viridis"
        Colour map.
    ax : matplotlib Axes, default=None
        Where to draw; a new figure's Axes when None.

    Returns
    -------
    ax : matplotlib Axes
        The Axes with the heatmap (an ``AxesImage`` of shape (markers shown, n_components) or
        (markers shown, n_samples)) and a colour bar.

    Examples
    --------
    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> from sklearn_cogaps import CoGAPS
    >>> from sklearn_cogaps.datasets import make_patterns
    >>> from sklearn_cogaps.plotting import plot_markers
    >>> X, _, _ = make_patterns(n_samples=20, n_features=40, n_components=2, random_state=0)
    >>> model = CoGAPS(n_components=2, max_iter=50, random_state=0).fit(X)
    >>> ax = plot_markers(model, n_markers=5)
    >>> ax.images[0].get_array().shape
    (10, 2)
    """
    from ._cogaps._markers import pattern_markers

    if estimator is not None:
        if amplitudes is not None or patterns is not None:
            raise ValueError("give an estimator or amplitudes and patterns, not both.")
        check_is_fitted(estimator, "components_")
        amplitudes = np.asarray(estimator.components_).T
        patterns = _sample_factors(estimator)
        if feature_names is None:
            feature_names = getattr(estimator, "feature_names_in_", None)
    elif amplitudes is None or patterns is None:
        raise ValueError("give a fitted estimator, or both amplitudes and patterns.")
    A = np.asarray(amplitudes, dtype=np.float64)
    P = np.asarray(patterns, dtype=np.float64)
    if A.ndim != 2 or P.ndim != 2 or A.shape[1] != P.shape[1]:
        raise ValueError(
            "amplitudes (n_features, n_components) and patterns (n_samples, n_components) "
            f"must share n_components; got shapes {A.shape} and {P.shape}."
        )
    if not (isinstance(n_markers, (int, np.integer)) and n_markers >= 1):
        raise ValueError(f"n_markers must be a positive integer; got {n_markers!r}.")
    # labels of another length would name the wrong rows or columns
    for what, labels, n in (
        ("feature_names", feature_names, A.shape[0]),
        ("sample_names", sample_names, P.shape[0]),
    ):
        if labels is not None and len(labels) != n:
            raise ValueError(
                f"{what} must have one label per {what[:-6]} ({n}); got {len(labels)}."
            )
    markers, _, _ = pattern_markers(A, P, threshold=threshold)
    shown = [m[:n_markers] for m in markers]
    rows = np.concatenate(shown).astype(int)
    if X is not None:
        X, x_samples, x_features = _data_by_feature_names(X, feature_names)
        if X.shape != (P.shape[0], A.shape[0]):
            raise ValueError(
                f"X must have shape (n_samples, n_features) = {(P.shape[0], A.shape[0])}; "
                f"got {X.shape}."
            )
        if feature_names is None:
            feature_names = x_features  # a model fitted on an array: X names the positions
        if sample_names is None:
            sample_names = x_samples
        else:
            # the same names in another order are followed; other names relabel
            X = _follow_labels(
                X,
                x_samples,
                sample_names,
                0,
                "X's samples",
                "sample_names",
                disjoint_by_position=True,
            )
        values = X[:, rows].T
        columns = (
            [str(s) for s in sample_names]
            if sample_names is not None
            else [str(i) for i in range(X.shape[0])]
        )
        xlabel = "sample"
        values = values - values.min(axis=1, keepdims=True)
        scale_label = "from each feature's minimum to its maximum"
    else:
        values = A[rows]
        columns = [f"Pattern_{k + 1}" for k in range(A.shape[1])]
        xlabel = "pattern"
        scale_label = "scaled to each feature's maximum"
    top = np.abs(values).max(axis=1, keepdims=True)
    values = np.divide(values, top, out=np.zeros_like(values), where=top > 0)
    names = (
        np.asarray(feature_names).astype(str)
        if feature_names is not None
        else np.arange(A.shape[0]).astype(str)
    )
    ax = _axes(ax)
    image = ax.imshow(values, aspect="auto", cmap=cmap, interpolation="nearest")
    ax.set_xticks(np.arange(len(columns)), columns, rotation=90 if len(columns) > 6 else 0)
    ax.set_yticks(np.arange(len(rows)), names[rows])
    edges = np.cumsum([len(m) for m in shown])[:-1] - 0.5
    for edge in edges:  # separate the patterns' blocks
        ax.axhline(edge, color="white", linewidth=1.5)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("marker features, by pattern")
    ax.figure.colorbar(image, ax=ax, label=scale_label)
    return ax


def plot_trace(estimator, *, ax=None, **line_kwargs):
    """Draw the per-iteration trace of a fit: chi-square, ELBO or log-likelihood.

    CoGAPS's chi-square is drawn on a logarithmic axis with its calibration and sampling
    phases marked; the Poisson factorisations show their ELBO, ExtremeDeconvolution its mean
    log-likelihood per point, MaxMarginMF the max-margin objective of each sample.

    Parameters
    ----------
    estimator : estimator
        A fitted estimator of this package.
    ax : matplotlib Axes, default=None
        Where to draw; a new figure's Axes when None.
    **line_kwargs
        Passed to :meth:`matplotlib.axes.Axes.plot`.

    Returns
    -------
    ax : matplotlib Axes
        The Axes, with the trace as its first line.

    Examples
    --------
    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> import numpy as np
    >>> from sklearn_cogaps import HierarchicalPMF
    >>> from sklearn_cogaps.plotting import plot_trace
    >>> X = np.random.RandomState(0).poisson(2.0, size=(30, 20))
    >>> model = HierarchicalPMF(n_components=2, max_iter=20, random_state=0).fit(X)
    >>> ax = plot_trace(model)
    >>> ax.get_ylabel()
    'ELBO'
    """
    values, label, log_scale = _trace(estimator)
    ax = _axes(ax)
    iterations = np.arange(1, values.size + 1)
    ax.plot(iterations, values, **line_kwargs)
    # the calibration phase of the chain: its first max_iter iterations when one fit ran
    # it, as recorded by the fit (a warm start appends sampling iterations only, with a
    # max_iter that may differ)
    n_calibration = getattr(estimator, "_n_calibration_iter", getattr(estimator, "max_iter", None))
    if log_scale:
        if np.all(values > 0):
            ax.set_yscale("log")
        if n_calibration is not None and values.size > n_calibration:
            ax.axvline(n_calibration + 0.5, color="0.5", linestyle="--", linewidth=1)
            ax.text(
                n_calibration + 0.5,
                0.98,
                " sampling",
                transform=ax.get_xaxis_transform(),
                va="top",
                color="0.3",
            )
            ax.text(
                n_calibration + 0.5,
                0.98,
                "calibration ",
                transform=ax.get_xaxis_transform(),
                va="top",
                ha="right",
                color="0.3",
            )
    ax.set_xlabel("iteration")
    ax.set_ylabel(label)
    ax.set_title(type(estimator).__name__)
    return ax


def _ellipse(ax, mean, cov, n_std, **kwargs):
    from matplotlib.patches import Ellipse

    values, vectors = np.linalg.eigh(cov)
    values = np.clip(values, 0.0, None)
    angle = np.degrees(np.arctan2(vectors[1, 1], vectors[0, 1]))
    width, height = 2.0 * n_std * np.sqrt(values[::-1])
    patch = Ellipse(mean, width, height, angle=angle, **kwargs)
    ax.add_patch(patch)
    return patch


def plot_xd(
    estimator,
    X=None,
    *,
    X_cov=None,
    dims=(0, 1),
    n_std=2.0,
    density=True,
    max_points=500,
    ax=None,
):
    """Draw a deconvolved mixture in two dimensions, with the data and their errors.

    The fitted components are drawn as ellipses of ``n_std`` standard deviations over the
    density of the deconvolved mixture (its marginal in the two dimensions ``dims``); the data,
    when given, as points with their own error ellipses (from ``X_cov``).

    Parameters
    ----------
    estimator : ExtremeDeconvolution or GaussianMixture
        A fitted mixture with ``weights_``, ``means_`` and full ``covariances_``.
    X : array-like of shape (n_samples, n_dims), default=None
        Observations in the mixture's space (without projection) to draw as points.
    X_cov : array-like of shape (n_samples, n_dims, n_dims) or (n_samples, n_dims), \
            default=None
        Their noise covariances, or variances: each point gets its ``n_std`` error ellipse.
    dims : tuple of two int, default=(0, 1)
        The two coordinates shown.
    n_std : float, default=2.0
        Size of the ellipses, in standard deviations.
    density : bool, default=True
        Shade the deconvolved density (the mixture's marginal in ``dims``).
    max_points : int, default=500
        Error ellipses are drawn for at most this many points (the first ones), to keep
        large catalogues readable; every point is drawn.
    ax : matplotlib Axes, default=None
        Where to draw; a new figure's Axes when None.

    Returns
    -------
    ax : matplotlib Axes
        The Axes: one ``Ellipse`` patch per component (labelled ``component``) and one per
        point with errors (labelled ``error``), the points as a scatter collection.

    Examples
    --------
    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> import numpy as np
    >>> from sklearn_cogaps import ExtremeDeconvolution
    >>> from sklearn_cogaps.plotting import plot_xd
    >>> rng = np.random.RandomState(0)
    >>> V = rng.normal(size=(200, 2)) + np.where(rng.rand(200, 1) < 0.5, -2.0, 2.0)
    >>> noise = np.full((200, 2), 0.25)
    >>> X = V + 0.5 * rng.normal(size=V.shape)
    >>> xd = ExtremeDeconvolution(n_components=2, random_state=0).fit(X, X_cov=noise)
    >>> ax = plot_xd(xd, X[:20], X_cov=noise[:20])
    >>> sum(p.get_label() == "component" for p in ax.patches)
    2
    """
    check_is_fitted(estimator, ["means_", "covariances_"])
    dims = list(dims)
    means = np.asarray(estimator.means_, dtype=np.float64)
    covs = np.asarray(estimator.covariances_, dtype=np.float64)
    weights = np.asarray(getattr(estimator, "weights_", np.full(len(means), 1.0 / len(means))))
    if covs.ndim != 3:
        raise ValueError(
            "plot_xd needs full covariances (n_components, n_dims, n_dims); got shape "
            f"{covs.shape} (use covariance_type='full' for a GaussianMixture)."
        )
    d = means.shape[1]
    if len(dims) != 2 or not all(0 <= i < d for i in dims) or dims[0] == dims[1]:
        raise ValueError(f"dims must be two different coordinates in [0, {d}); got {dims}.")
    means2 = means[:, dims]
    covs2 = covs[:, dims][:, :, dims]
    ax = _axes(ax)
    if X is not None:
        fitted = getattr(estimator, "feature_names_in_", None)
        X = _follow_labels(
            np.asarray(X, dtype=np.float64),
            _labels(X, 1),
            fitted,
            1,
            "X's columns",
            "the fitted features",
        )
        if X.ndim != 2 or X.shape[1] != d:
            raise ValueError(
                f"X must have shape (n_samples, {d}) in the mixture's space; got {X.shape}."
            )
        X2 = X[:, dims]
        ax.scatter(X2[:, 0], X2[:, 1], s=6, color="0.2", zorder=3, label="data")
        if X_cov is not None:
            S = np.asarray(X_cov, dtype=np.float64)
            if S.shape == X.shape:
                S = S[:, :, None] * np.eye(d)
            if S.shape != (X.shape[0], d, d):
                raise ValueError(
                    f"X_cov must have shape {(X.shape[0], d, d)} or {X.shape}; got "
                    f"{np.shape(X_cov)}."
                )
            S2 = S[:, dims][:, :, dims]
            for i in range(min(X.shape[0], max_points)):
                _ellipse(
                    ax,
                    X2[i],
                    S2[i],
                    n_std,
                    facecolor="none",
                    edgecolor="0.55",
                    linewidth=0.5,
                    label="error",
                    zorder=2,
                )
        lo, hi = X2.min(axis=0), X2.max(axis=0)
    else:
        spread = n_std * np.sqrt(np.stack([np.diagonal(c) for c in covs2]))
        lo, hi = (means2 - spread).min(axis=0), (means2 + spread).max(axis=0)
    pad = 0.05 * (hi - lo) + 1e-12
    lo, hi = lo - pad, hi + pad
    if density:
        from scipy.stats import multivariate_normal

        gx, gy = np.meshgrid(np.linspace(lo[0], hi[0], 120), np.linspace(lo[1], hi[1], 120))
        grid = np.column_stack([gx.ravel(), gy.ravel()])
        dens = sum(
            w * multivariate_normal(m, c, allow_singular=True).pdf(grid)
            for w, m, c in zip(weights, means2, covs2)
        )
        ax.contourf(gx, gy, np.reshape(dens, gx.shape), levels=12, cmap="Blues", zorder=0)
    for m, c in zip(means2, covs2):
        _ellipse(
            ax,
            m,
            c,
            n_std,
            facecolor="none",
            edgecolor="tab:red",
            linewidth=2,
            label="component",
            zorder=4,
        )
    ax.plot(means2[:, 0], means2[:, 1], "+", color="tab:red", markersize=10, zorder=5)
    ax.set_xlim(lo[0], hi[0])
    ax.set_ylim(lo[1], hi[1])
    names = getattr(estimator, "feature_names_in_", None)
    if names is None or len(names) != d:
        names = [f"x{i}" for i in range(d)]
    ax.set_xlabel(str(names[dims[0]]))
    ax.set_ylabel(str(names[dims[1]]))
    return ax
