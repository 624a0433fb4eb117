"""load_gist: CoGAPS's GIST example and its published result, shipped with the package."""

import sys

import numpy as np
import pytest
from numpy.testing import assert_array_equal

from sklearn_cogaps import default_uncertainty
from sklearn_cogaps.datasets import load_gist
from sklearn_cogaps.datasets._gist import GIST_DIR

SAMPLES = ["IM00", "IM02", "IM04", "IM06", "IM09", "IM12", "IM18", "IM24", "IM48"]


@pytest.fixture(scope="module")
def gist():
    return load_gist()


def test_shapes_names_and_orientation(gist):
    assert gist.data.shape == gist.uncertainty.shape == gist.r_uncertainty.shape == (9, 1363)
    assert gist.published_patterns.shape == (9, 3)
    assert gist.published_amplitudes.shape == (3, 1363)
    names = ["data", "uncertainty", "r_uncertainty", "published_patterns", "published_amplitudes"]
    for name in names:
        assert gist[name].dtype == np.float64 and gist[name].flags.c_contiguous, name
    assert list(gist.sample_names) == SAMPLES
    assert_array_equal(gist.hours, [0, 2, 4, 6, 9, 12, 18, 24, 48])
    assert list(gist.pattern_names) == ["Pattern_1", "Pattern_2", "Pattern_3"]
    assert len(set(gist.feature_names)) == 1363
    assert all(name.startswith("Hs.") for name in gist.feature_names)
    # samples in rows: the first line of R's GIST.matrix (gene Hs.101174) is the first column
    assert gist.feature_names[0] == "Hs.101174"
    assert gist.data[0, 0] == 1.02292779317617
    assert gist.data[8, 0] == 1.14756946223999
    assert gist.r_uncertainty[0, 0] == 0.008500952
    # the uncertainty of the published fit, as R's habit fit(data, uncertainty) expects
    assert_array_equal(gist.uncertainty, default_uncertainty(gist.data))
    assert gist.published_amplitudes[0, 0] == 0.506117522716522
    assert gist.published_patterns[0, 0] == 0.848650634288788
    for name in names:
        assert np.all(gist[name] >= 0), name
    assert "BSD" in gist.DESCR and "10.1158/0008-5472.CAN-09-1709" in gist.DESCR


def test_published_result_is_r_s(gist):
    """Each pattern's maximum is just below 1 (R averages patterns scaled to maximum 1),
    and the result reconstructs the data at R's chi-square, under the default uncertainty."""
    maxima = gist.published_patterns.max(axis=0)
    assert np.all(maxima <= 1.0) and np.all(maxima > 0.997), maxima
    fitted = gist.published_patterns @ gist.published_amplitudes
    chisq = np.sum(((gist.data - fitted) / default_uncertainty(gist.data)) ** 2)
    # GIST.result's meanChiSq is 4473.90 (in single precision); from the files, 4473.91
    assert chisq == pytest.approx(4473.9, abs=0.1)


def test_values_are_the_decimals_written():
    """Every value is the double nearest the decimal in the shipped table (pandas's default
    parser is off in the last places of some small values; its round-trip parser is not)."""
    pd = pytest.importorskip("pandas")
    gist = load_gist()
    genes, samples, patterns = gist.feature_names, gist.sample_names, gist.pattern_names
    tables = {  # R's orientation: genes x samples
        "GIST_matrix": (gist.data.T, genes, samples),
        "GIST_uncertainty": (gist.r_uncertainty.T, genes, samples),
        "GIST_result_Amean": (gist.published_amplitudes.T, genes, patterns),
        "GIST_result_Pmean": (gist.published_patterns, samples, patterns),
    }
    for name, (values, index, columns) in tables.items():
        table = pd.read_csv(GIST_DIR / f"{name}.csv.gz", index_col=0, float_precision="round_trip")
        assert_array_equal(table.to_numpy(), values)
        assert list(table.index) == list(index) and list(table.columns) == list(columns)


def test_as_frame(gist):
    pd = pytest.importorskip("pandas")
    frame = load_gist(as_frame=True)
    assert isinstance(frame.data, pd.DataFrame)
    assert list(frame.data.index) == SAMPLES
    assert list(frame.data.columns) == list(gist.feature_names)
    assert_array_equal(frame.data.to_numpy(), gist.data)
    assert_array_equal(frame.uncertainty.to_numpy(), gist.uncertainty)
    assert list(frame.uncertainty.columns) == list(gist.feature_names)
    assert list(frame.published_patterns.index) == SAMPLES
    assert list(frame.published_patterns.columns) == list(gist.pattern_names)
    assert_array_equal(frame.published_patterns.to_numpy(), gist.published_patterns)
    assert list(frame.published_amplitudes.index) == list(gist.pattern_names)
    assert list(frame.published_amplitudes.columns) == list(gist.feature_names)
    assert_array_equal(frame.published_amplitudes.to_numpy(), gist.published_amplitudes)
    assert isinstance(frame.hours, pd.Series) and list(frame.hours.index) == SAMPLES
    assert_array_equal(frame.hours.to_numpy(), gist.hours)


def test_as_frame_without_pandas_says_so(monkeypatch):
    monkeypatch.setitem(sys.modules, "pandas", None)  # import pandas raises ImportError
    with pytest.raises(ImportError, match="needs pandas"):
        load_gist(as_frame=True)
    assert load_gist().data.shape == (9, 1363)


def test_r_habit_fits_the_published_model(gist):
    """R users write CoGAPS(GIST.matrix, GIST.uncertainty): here fit(data,
    uncertainty=gist.uncertainty) is the published fit's model, the same chain as the
    default; R's own matrix, on the unlogged scale, is kept apart."""
    from sklearn_cogaps import CoGAPS

    model = CoGAPS(n_components=3, max_iter=100, random_state=0)
    with_uncertainty = model.fit(gist.data, uncertainty=gist.uncertainty).components_.copy()
    assert_array_equal(with_uncertainty, model.fit(gist.data).components_)
    assert not np.allclose(gist.r_uncertainty, gist.uncertainty)
