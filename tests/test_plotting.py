"""The figures of sklearn_cogaps.plotting, drawn headless and checked for what they must show."""

import sys
import warnings

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal

matplotlib = pytest.importorskip("matplotlib", reason="the plotting functions need matplotlib")
matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.patches import Ellipse  # noqa: E402
from sklearn.decomposition import NMF  # noqa: E402
from sklearn.exceptions import ConvergenceWarning, NotFittedError  # noqa: E402
from sklearn.mixture import GaussianMixture  # noqa: E402

from sklearn_cogaps import (  # noqa: E402
    CoGAPS,
    ExtremeDeconvolution,
    HierarchicalPMF,
    MaxMarginMF,
    WeightedBackgroundPMF,
    pattern_markers,
)
from sklearn_cogaps.datasets import make_patterns  # noqa: E402
from sklearn_cogaps.plotting import (  # noqa: E402
    plot_markers,
    plot_patterns,
    plot_trace,
    plot_xd,
)


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


@pytest.fixture(scope="module")
def cogaps():
    X, _, _ = make_patterns(n_samples=16, n_features=30, n_components=3, random_state=0)
    return X, CoGAPS(n_components=3, max_iter=40, random_state=0).fit(X)


@pytest.fixture(scope="module")
def counts():
    rng = np.random.RandomState(0)
    return rng.poisson(rng.gamma(2.0, 1.0, size=(40, 1)) * rng.gamma(1.0, 1.0, size=(1, 25)))


def test_patterns_one_line_per_pattern_in_time_order(cogaps):
    X, model = cogaps
    times = np.arange(X.shape[0])[::-1] * 3.0  # given in reverse: drawn sorted
    ax = plot_patterns(model, x=times, xlabel="hours")
    lines = ax.get_lines()
    assert len(lines) == 3
    assert_array_equal(lines[0].get_xdata(), np.sort(times))
    assert_array_equal(lines[1].get_ydata(), model.loadings_[::-1, 1])
    assert ax.get_xlabel() == "hours" and ax.get_ylabel() == "pattern value"
    # a named Series names the axis; an array, or an unnamed Series, leaves "sample"
    pd = pytest.importorskip("pandas")
    assert plot_patterns(model, x=pd.Series(times, name="hours")).get_xlabel() == "hours"
    assert plot_patterns(model, x=pd.Series(times)).get_xlabel() == "sample"
    assert plot_patterns(model, x=times).get_xlabel() == "sample"
    assert [t.get_text() for t in ax.get_legend().get_texts()] == [
        "Pattern_1",
        "Pattern_2",
        "Pattern_3",
    ]


def test_patterns_by_group_and_from_an_array(cogaps):
    X, model = cogaps
    groups = np.repeat(["ctrl", "drug"], X.shape[0] // 2)[::-1]  # "drug" appears first
    fig, ax = plt.subplots()
    out = plot_patterns(model.loadings_[:, :2], groups=groups, pattern_names=["a", "b"], ax=ax)
    assert out is ax and len(ax.get_lines()) == 2
    assert [t.get_text() for t in ax.get_xticklabels()] == ["drug", "ctrl"]
    assert_allclose(
        ax.get_lines()[0].get_ydata(),
        [model.loadings_[:8, 0].mean(), model.loadings_[8:, 0].mean()],
    )
    assert ax.get_xlabel() == "group"
    with pytest.raises(ValueError, match="x or groups, not both"):
        plot_patterns(model, x=np.arange(16), groups=groups)
    with pytest.raises(ValueError, match="one value per sample"):
        plot_patterns(model, x=[1, 2])
    with pytest.raises(ValueError, match="must be 2-D"):
        plot_patterns(np.ones(5))
    with pytest.raises(NotFittedError):
        plot_patterns(CoGAPS())


def test_marker_heatmap_of_amplitudes_and_of_data(cogaps):
    X, model = cogaps
    markers, _, _ = pattern_markers(model.components_.T, model.loadings_)
    shown = [m[:4] for m in markers]
    n_rows = sum(len(m) for m in shown)
    ax = plot_markers(model, n_markers=4)
    image = ax.images[0].get_array()
    assert image.shape == (n_rows, 3)
    assert_allclose(image.max(axis=1), 1.0)  # each row scaled to its maximum
    rows = np.concatenate(shown)
    assert [t.get_text() for t in ax.get_yticklabels()] == [str(r) for r in rows]
    # the best marker of pattern 1 peaks in pattern 1
    assert np.argmax(image[0]) == 0
    names = np.array([f"g{j}" for j in range(X.shape[1])])
    samples = [f"s{i}" for i in range(X.shape[0])]
    ax = plot_markers(
        amplitudes=model.components_.T,
        patterns=model.loadings_,
        X=X,
        n_markers=4,
        feature_names=names,
        sample_names=samples,
    )
    image = ax.images[0].get_array()
    assert image.shape == (n_rows, X.shape[0])
    column = X[:, rows[0]]
    assert_allclose(image[0], (column - column.min()) / (column.max() - column.min()))
    assert [t.get_text() for t in ax.get_yticklabels()][0] == names[rows[0]]
    assert [t.get_text() for t in ax.get_xticklabels()] == samples
    assert len(ax.figure.axes) == 2  # the heatmap and its colour bar
    with pytest.raises(ValueError, match="or both amplitudes and patterns"):
        plot_markers(amplitudes=model.components_.T)
    with pytest.raises(ValueError, match="must have shape"):
        plot_markers(model, X=X[:3])
    with pytest.raises(ValueError, match="n_markers must be"):
        plot_markers(model, n_markers=0)
    # labels of another length would name the wrong features or samples
    with pytest.raises(ValueError, match=r"feature_names must have one label per feature"):
        plot_markers(model, feature_names=list(names) + ["extra"])
    with pytest.raises(ValueError, match=r"sample_names must have one label per sample"):
        plot_markers(model, X=X, sample_names=samples[:2])
    with pytest.raises(NotFittedError):
        plot_markers(CoGAPS(n_components=3))


def test_marker_heatmap_reads_a_data_frame_by_its_names(cogaps):
    pd = pytest.importorskip("pandas")
    X, _ = cogaps
    genes = [f"g{j}" for j in range(X.shape[1])]
    cells = [f"c{i}" for i in range(X.shape[0])]
    df = pd.DataFrame(X, columns=genes, index=cells)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model = CoGAPS(n_components=3, max_iter=40, random_state=0).fit(df)
    expected = plot_markers(model, X=df, n_markers=3).images[0].get_array()
    # the same genes in another order, and the cells in another order: matched by name
    shuffled = df[genes[::-1]].iloc[::-1]
    ax = plot_markers(model, X=shuffled, n_markers=3)
    assert_allclose(ax.images[0].get_array(), expected[:, ::-1])
    assert [t.get_text() for t in ax.get_xticklabels()] == cells[::-1]
    with pytest.raises(ValueError, match="do not name the fitted features"):
        plot_markers(model, X=df.rename(columns={"g0": "other"}), n_markers=3)
    # names that share nothing with the fitted ones (other identifiers) are refused too
    with pytest.raises(ValueError, match="do not name the fitted features"):
        plot_markers(model, X=df.set_axis([f"ENSG{j}" for j in range(len(genes))], axis=1))
    # sample_names with a frame in another row order: the rows follow sample_names
    ax = plot_markers(model, X=shuffled, sample_names=cells, n_markers=3)
    assert_allclose(ax.images[0].get_array(), expected)
    assert [t.get_text() for t in ax.get_xticklabels()] == cells


def test_marker_heatmap_of_an_array_fit_labels_rows_by_the_frame(cogaps):
    pd = pytest.importorskip("pandas")
    X, model = cogaps  # fitted on an array: no feature names
    genes = np.array([f"g{j}" for j in range(X.shape[1])])
    # the frame's columns are read by position and name the rows they are
    df = pd.DataFrame(X[:, ::-1], columns=genes[::-1])
    ax = plot_markers(model, X=df, n_markers=3)
    labels = [t.get_text() for t in ax.get_yticklabels()]
    array_ax = plot_markers(model, X=X[:, ::-1], n_markers=3)
    rows = [int(t.get_text()) for t in array_ax.get_yticklabels()]
    assert labels == [str(genes[::-1][j]) for j in rows]


def test_patterns_frame_names_its_lines_and_aligns_its_labels(cogaps):
    pd = pytest.importorskip("pandas")
    X, model = cogaps
    cells = [f"c{i}" for i in range(X.shape[0])]
    frame = pd.DataFrame(model.loadings_, index=cells, columns=["a", "b", "c"])
    groups = pd.Series(["ctrl"] * 8 + ["treat"] * 8, index=cells)
    expected = plot_patterns(frame, groups=groups.to_numpy())
    # the groups in another order are matched by the samples' names
    ax = plot_patterns(frame, groups=groups.iloc[::-1])
    assert [ln.get_label() for ln in ax.get_lines()] == ["a", "b", "c"]
    for got, want in zip(ax.get_lines(), expected.get_lines()):
        assert_allclose(got.get_ydata(), want.get_ydata())
    # the columns chosen are the lines' names
    ax = plot_patterns(frame[["c", "a"]])
    assert [ln.get_label() for ln in ax.get_lines()] == ["c", "a"]
    assert_allclose(ax.get_lines()[0].get_ydata(), frame["c"].to_numpy())
    times = pd.Series(np.arange(16.0), index=cells)
    ax = plot_patterns(frame, x=times.iloc[::-1])
    assert_allclose(ax.get_lines()[0].get_ydata(), frame["a"].to_numpy())
    with pytest.raises(ValueError, match="do not name the patterns' samples"):
        plot_patterns(frame, groups=groups.rename(index={"c0": "other"}))


def test_traces_of_every_estimator(cogaps, counts):
    X, model = cogaps
    ax = plot_trace(model)
    line = ax.get_lines()[0]
    assert_array_equal(line.get_ydata(), model.objective_history_)
    assert ax.get_yscale() == "log" and ax.get_ylabel() == "chi-square"
    # the boundary between the phases
    assert any(np.allclose(ln.get_xdata(), 40.5) for ln in ax.get_lines()[1:])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        hpmf = HierarchicalPMF(n_components=2, max_iter=15, random_state=0).fit(counts)
        wbpmf = WeightedBackgroundPMF(n_components=2, max_iter=15, random_state=0).fit(counts)
    for est in (hpmf, wbpmf):
        ax = plot_trace(est)
        assert ax.get_ylabel() == "ELBO" and ax.get_yscale() == "linear"
        assert_array_equal(ax.get_lines()[0].get_ydata(), np.asarray(est.objective_history_))
        assert ax.get_lines()[0].get_xdata()[0] == 1 and ax.get_xlabel() == "iteration"
        assert ax.get_title() == type(est).__name__
    rng = np.random.RandomState(0)
    xd = ExtremeDeconvolution(n_components=2, tol=1e-3, random_state=0)
    xd.fit(rng.normal(size=(50, 2)))
    ax = plot_trace(xd)
    assert ax.get_ylabel() == "mean log-likelihood per point"
    assert_array_equal(ax.get_lines()[0].get_ydata(), np.asarray(xd.objective_history_))
    ratings = np.random.RandomState(0).randint(1, 6, size=(20, 15)).astype(float)
    m3f = MaxMarginMF(n_components=2, max_iter=6, burn_in=2, random_state=0).fit(ratings)
    ax = plot_trace(m3f)
    assert ax.get_ylabel() == "max-margin objective"
    assert_array_equal(ax.get_lines()[0].get_ydata(), m3f.objective_history_)
    nmf = NMF(2, init="nndsvda", tol=1e-2, random_state=0).fit(counts)
    with pytest.raises(TypeError, match="records no trace"):
        plot_trace(nmf)


def test_phase_boundary_of_a_warm_started_chain(cogaps):
    """A warm start appends sampling iterations, with a max_iter that may differ: the
    boundary stays after the chain's calibration phase."""
    X, _ = cogaps
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model = CoGAPS(n_components=2, max_iter=12, warm_start=True, random_state=0).fit(X)
        model.set_params(max_iter=5).fit(X)
    assert model.objective_history_.size == 12 + 12 + 5
    ax = plot_trace(model)
    boundaries = [ln.get_xdata()[0] for ln in ax.get_lines()[1:]]
    assert boundaries == [12.5]


@pytest.fixture(scope="module")
def catalogue():
    rng = np.random.RandomState(1)
    n = 300
    V = np.where(rng.rand(n, 1) < 0.4, [-2.0, 0.0, 1.0], [2.0, 1.0, -1.0])
    V = V + 0.4 * rng.normal(size=(n, 3))
    variances = rng.uniform(0.05, 0.5, size=(n, 3))
    X = V + np.sqrt(variances) * rng.normal(size=V.shape)
    xd = ExtremeDeconvolution(n_components=2, random_state=0).fit(X, X_cov=variances)
    return X, variances, xd


def test_xd_ellipses_for_components_and_points(catalogue):
    X, variances, xd = catalogue
    ax = plot_xd(xd, X, X_cov=variances, dims=(0, 2), max_points=25, n_std=1.0)
    components = [p for p in ax.patches if p.get_label() == "component"]
    errors = [p for p in ax.patches if p.get_label() == "error"]
    assert len(components) == 2 and len(errors) == 25
    assert all(isinstance(p, Ellipse) for p in ax.patches)
    # a point's error ellipse: centred on it, axes 2 sqrt(variance) (diagonal covariance)
    e = errors[3]
    assert_allclose(e.center, X[3, [0, 2]])
    assert_allclose(sorted([e.width, e.height]), sorted(2 * np.sqrt(variances[3, [0, 2]])))
    # a component's ellipse has the eigenvalues of its 2-D marginal covariance
    c = xd.covariances_[0][np.ix_([0, 2], [0, 2])]
    assert_allclose(components[0].center, xd.means_[0, [0, 2]])
    assert_allclose(
        sorted([components[0].width, components[0].height]),
        sorted(2 * np.sqrt(np.linalg.eigvalsh(c))),
        rtol=1e-10,
    )
    assert len(ax.collections) >= 2  # the density's filled contours and the points
    assert ax.get_xlabel() == "x0" and ax.get_ylabel() == "x2"


def test_xd_reads_a_frame_by_its_column_names(catalogue):
    pd = pytest.importorskip("pandas")
    X, _, _ = catalogue
    names = ["a", "b", "c"]
    frame = pd.DataFrame(X, columns=names)
    xd = ExtremeDeconvolution(n_components=2, tol=1e-3, random_state=0).fit(frame)
    ax = plot_xd(xd, frame[["c", "b", "a"]], dims=(0, 2), density=False)
    assert_allclose(ax.collections[0].get_offsets(), X[:, [0, 2]])
    assert ax.get_xlabel() == "a" and ax.get_ylabel() == "c"
    with pytest.raises(ValueError, match="do not name the fitted features"):
        plot_xd(xd, frame.set_axis(["x", "y", "z"], axis=1))


def test_xd_full_covariances_gaussian_mixture_and_errors(catalogue):
    X, variances, xd = catalogue
    full = variances[:, :, None] * np.eye(3)
    ax = plot_xd(xd, X, X_cov=full, max_points=10)
    assert sum(p.get_label() == "error" for p in ax.patches) == 10
    gm = GaussianMixture(3, random_state=0).fit(X)
    ax = plot_xd(gm, density=False)
    assert sum(p.get_label() == "component" for p in ax.patches) == 3
    assert not ax.collections  # no density, no points
    with pytest.raises(ValueError, match="full covariances"):
        plot_xd(GaussianMixture(2, covariance_type="diag", random_state=0).fit(X))
    with pytest.raises(ValueError, match="two different coordinates"):
        plot_xd(xd, dims=(0, 0))
    with pytest.raises(ValueError, match="X_cov must have shape"):
        plot_xd(xd, X, X_cov=variances[:, :2])
    with pytest.raises(ValueError, match="in the mixture's space"):
        plot_xd(xd, X[:, :2])


def test_missing_matplotlib_says_what_to_install(monkeypatch, cogaps):
    monkeypatch.setitem(sys.modules, "matplotlib.pyplot", None)
    with pytest.raises(ImportError, match=r"pip install \"sklearn_cogaps\[plot\]\""):
        plot_patterns(cogaps[1])


def test_a_labelled_series_beside_a_fitted_estimator_is_matched_by_the_sample_names(cogaps):
    """A fitted estimator keeps no sample names: a Series of time points in another order
    than the data was drawn by position, each sample at another's time, without a word."""
    pd = pytest.importorskip("pandas")
    X, model = cogaps
    cells = [f"c{i}" for i in range(X.shape[0])]
    times = pd.Series(np.arange(16.0), index=cells)
    expected = plot_patterns(model, x=times.to_numpy())
    with pytest.warns(UserWarning, match=r"x is labelled by sample .* matched to them by "
                      r"position\. Pass sample_names=X\.index"):  # fmt: skip
        plot_patterns(model, x=times.iloc[::-1])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ax = plot_patterns(model, x=times.iloc[::-1], sample_names=cells)
        grouped = plot_patterns(model, groups=pd.Series(["a"] * 8 + ["b"] * 8, index=cells)
                                .iloc[::-1], sample_names=cells)  # fmt: skip
    for got, want in zip(ax.get_lines(), expected.get_lines()):
        assert_allclose(got.get_ydata(), want.get_ydata())
    first = grouped.get_lines()[0].get_ydata()
    with pytest.raises(ValueError, match=r"sample_names has 15 names for the 16 samples"):
        plot_patterns(model, x=times, sample_names=cells[:-1])
    halves = [model.loadings_[:8, 0].mean(), model.loadings_[8:, 0].mean()]
    assert_allclose(sorted(first), sorted(halves))


def test_groups_of_scanpy_habits():
    # a categorical's order, the parent AnnData's Series beside a subset's patterns, and
    # missing labels refused with what to write
    pd = pytest.importorskip("pandas")
    P = pd.DataFrame(np.arange(12.0).reshape(6, 2), index=[f"c{i}" for i in range(6)])
    cells = pd.Series(["b", "a", "b", "a", "b", "a", "a"], index=[f"c{i}" for i in range(7)])
    ax = plot_patterns(P, groups=cells.astype(pd.CategoricalDtype(["a", "b"])))
    assert [t.get_text() for t in ax.get_xticklabels()] == ["a", "b"]
    plt.close("all")
    ax = plot_patterns(P, groups=pd.Categorical(cells.iloc[:6], categories=["a", "b"]))
    assert [t.get_text() for t in ax.get_xticklabels()] == ["a", "b"]
    plt.close("all")
    ax = plot_patterns(P, groups=cells)  # 7 cells for 6 patterns: taken by label
    assert [t.get_text() for t in ax.get_xticklabels()] == ["b", "a"]
    assert_allclose(ax.get_lines()[0].get_ydata(), [4.0, 6.0])  # rows 0, 2, 4 and 1, 3, 5
    plt.close("all")
    unlabelled = cells.iloc[:6].where(cells.iloc[:6] != "a")  # NaN for the 'a' cells
    with pytest.raises(ValueError, match=r"3 missing labels .*fillna\('unassigned'\)"):
        plot_patterns(P, groups=unlabelled)
