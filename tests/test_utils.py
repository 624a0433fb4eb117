"""The nogil building blocks: generators and the truncated-normal sampler."""

import numpy as np
import pytest
from numpy.testing import assert_allclose
from scipy import stats

from sklearn_cogaps._utils._rng import _below_by_for_tests, _divide_for_tests
from sklearn_cogaps._utils._rng import _draw_for_tests as draw
from sklearn_cogaps._utils._truncnorm import _truncnorm_for_tests as sample_truncnorm

N = 20000


@pytest.mark.parametrize(
    "name, param, dist",
    [
        ("uniform", 1.0, stats.uniform()),
        ("normal", 1.0, stats.norm()),
        ("exponential", 1.0, stats.expon()),
        ("gamma", 0.3, stats.gamma(0.3)),
        ("gamma", 1.0, stats.gamma(1.0)),
        ("gamma", 7.5, stats.gamma(7.5)),
    ],
)
def test_continuous_generators_match_scipy(name, param, dist):
    x = draw(name, N, 12345, param)
    assert stats.kstest(x, dist.cdf).pvalue > 1e-3


@pytest.mark.parametrize("lam", [0.5, 4.0, 9.9, 10.0, 37.0, 1234.5])
def test_poisson_matches_scipy(lam):
    k = draw("poisson", N, 7, lam)
    values, counts = np.unique(k, return_counts=True)
    expected = stats.poisson(lam).pmf(values) * N
    keep = expected > 20
    chi2 = np.sum((counts[keep] - expected[keep]) ** 2 / expected[keep])
    assert stats.chi2(keep.sum() - 1).sf(chi2) > 1e-3
    assert abs(k.mean() - lam) < 5 * np.sqrt(lam / N)


def test_uniform_integers_are_unbiased():
    k = draw("below", N, 3, 7)
    assert k.min() == 0 and k.max() == 6
    counts = np.bincount(k, minlength=7)
    assert stats.chisquare(counts).pvalue > 1e-3


@pytest.mark.parametrize(
    "d",
    [
        1,
        2,
        3,
        7,
        2600,
        4089,
        2**32 + 1,
        2**63 - 25,
        2**63,
        2**64 - 4089,
        2**64 - 1,
        (2**64 - 1) // 4089,
    ],
)
def test_prepared_division_is_exact(d):
    # the sampler divides by a multiplication (bins, uniform atoms and positions); it must
    # give Python's exact quotient and remainder for every 64-bit dividend, edges included
    rng = np.random.default_rng(d % 1000)
    x = np.concatenate(
        [
            rng.integers(0, 2**64, 2000, dtype=np.uint64, endpoint=False),
            np.array(
                [0, 1, d - 1, d, d + 1, 2**64 - 1, 2**64 - 2, (2**64 - 1) // d * d], dtype=object
            ).astype(np.uint64)
            if d < 2**64 - 2
            else np.array([0, 1, d - 1, d, 2**64 - 2], dtype=object).astype(np.uint64),
        ]
    )
    q, r = _divide_for_tests(x, d)
    expected = [divmod(int(v), d) for v in x]
    assert [int(v) for v in q] == [e[0] for e in expected]
    assert [int(v) for v in r] == [e[1] for e in expected]


@pytest.mark.parametrize("n", [1, 3, 1000, 2600, 2**40 + 3, 2**52 + 1])
def test_prepared_uniform_integers_are_the_plain_ones(n):
    # same stream, same draws: the chain does not change with the prepared division
    plain = draw("below", 3000, 11, float(n))
    assert np.array_equal(_below_by_for_tests(3000, 11, n).astype(np.int64), plain)


def _ziggurat_script():
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "tools" / "ziggurat_tables.py"
    spec = importlib.util.spec_from_file_location("ziggurat_tables", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_ziggurat_tables_are_the_scripts_output_and_have_equal_layers():
    script = _ziggurat_script()
    assert script.TARGET.read_text() == script.render()
    k, w, f = script.tables()
    x = np.array(w) * 2.0**52  # right edges; x[0] is the base's rectangle width q
    area = script.V
    # layer i >= 1 is [0, x_i] x [f(x_i), f(x_{i-1})], with f(x_0) read as 1 at the top
    layers = x[1:] * (np.r_[1.0, f[1:-1]] - np.array(f[1:]))
    assert_allclose(layers, area, rtol=1e-12)
    # the base: the rectangle [0, r] x [0, f(r)] and the tail beyond r
    assert_allclose(x[0] * f[255], area, rtol=1e-14)
    assert_allclose(
        script.R * f[255] + stats.norm.sf(script.R) * np.sqrt(2 * np.pi), area, rtol=1e-12
    )
    # a draw left of the next layer's edge is accepted at once
    assert k[1] == 0
    assert_allclose(np.array(k[2:], dtype=float), 2.0**52 * x[1:-1] / x[2:], rtol=1e-15)


def test_normal_matches_the_exact_probabilities_of_every_layer_and_the_tail():
    script = _ziggurat_script()
    _, w, _ = script.tables()
    x = draw("normal", 2_000_000, 2024)
    # bins with the layers' edges as boundaries (and their mirror images): a wrong wedge
    # or table entry shows as a bin off its probability
    edges = np.array(w[1:]) * 2.0**52
    edges = np.concatenate([[-np.inf], -edges[::-1], [0.0], edges, [np.inf]])
    observed = np.histogram(x, edges)[0]
    expected = np.diff(stats.norm.cdf(edges)) * x.size
    chi2 = np.sum((observed - expected) ** 2 / expected)
    assert stats.chi2(len(expected) - 1).sf(chi2) > 1e-3
    # beyond r, the tail's shape: a normal truncated to |x| > r
    tail = np.abs(x[np.abs(x) > script.R])
    assert stats.kstest(tail, stats.truncnorm(script.R, np.inf).cdf).pvalue > 1e-3
    assert np.mean(x > 0) == pytest.approx(0.5, abs=5 * 0.5 / np.sqrt(x.size))


def test_same_seed_same_stream_and_different_seeds_differ():
    assert np.array_equal(draw("normal", 100, 1), draw("normal", 100, 1))
    assert not np.array_equal(draw("normal", 100, 1), draw("normal", 100, 2))


@pytest.mark.parametrize(
    "mean, sd, lower, upper",
    [
        (0.0, 1.0, 0.0, np.inf),  # half normal
        (2.0, 0.5, 0.0, np.inf),  # mass far from the bound
        (-3.0, 1.0, 0.0, np.inf),  # bound 3 sd in the tail
        (-40.0, 1.0, 0.0, np.inf),  # bound 40 sd in the tail (births of tiny atoms)
        (-25.0, 2.0, 0.0, 3.0),  # two-sided interval far in the tail
        (-30.0, 1.0, 0.0, 0.01),  # narrow interval far in the tail
        (0.3, 1.0, -0.5, 0.7),  # narrow interval straddling the mean
        (0.0, 1.0, -4.0, 5.0),  # wide interval straddling the mean
        (50.0, 1.0, -np.inf, 10.0),  # upper tail mirrored
        (1.0, 3.0, 0.0, 2.0),
    ],
)
def test_truncnorm_matches_scipy(mean, sd, lower, upper):
    x = sample_truncnorm(mean, sd, lower, upper, N, 2024)
    assert np.all(np.isfinite(x))
    assert x.min() >= lower and x.max() <= upper
    ref = stats.truncnorm((lower - mean) / sd, (upper - mean) / sd, loc=mean, scale=sd)
    assert stats.kstest(x, ref.cdf).pvalue > 1e-3
    assert abs(x.mean() - ref.mean()) < 6 * ref.std() / np.sqrt(N)


@pytest.mark.parametrize(
    "mean, sd, lower, upper",
    [
        (np.nan, 1.0, 0.0, np.inf),
        (1.0, 0.0, 0.0, np.inf),
        (1.0, np.inf, 0.0, 2.0),
        (-1e300, 1e-300, 0.0, np.inf),
        (1.0, 1.0, 2.0, 2.0),
    ],
)
def test_truncnorm_degenerate_parameters_stay_finite_and_inside(mean, sd, lower, upper):
    x = sample_truncnorm(mean, sd, lower, upper, 50, 1)
    assert np.all(np.isfinite(x))
    assert np.all((x >= lower) & (x <= upper))


def test_truncnorm_beyond_double_precision_tails_is_the_limiting_exponential():
    # N(-m, 1) truncated to [0, inf) tends to an exponential of rate m as m grows.
    m = 3e9
    x = sample_truncnorm(-m, 1.0, 0.0, np.inf, N, 5)
    assert stats.kstest(x * m, stats.expon().cdf).pvalue > 1e-3


def test_matching_refuses_factors_in_rows_unless_told_the_axis():
    """components_ (one factor per row) matched with the default axis paired its features
    as factors, without an error."""
    from sklearn_cogaps import match_components

    rng = np.random.default_rng(0)
    H = rng.gamma(1.0, 1.0, (2, 8))
    with pytest.raises(ValueError, match=r"more columns \(8\) than rows \(2\).*axis=0"):
        match_components(H, H[::-1])
    order, corr = match_components(H, H[::-1], axis=0)
    assert order.tolist() == [1, 0] and np.allclose(corr, 1.0)
    assert match_components(H.T, H[::-1].T)[0].tolist() == [1, 0]
    assert match_components(H, H[::-1], axis=1)[0].shape == (8,)  # explicitly asked


@pytest.mark.parametrize("scale", [1e-200, 1.0, 1e160])
def test_matching_is_scale_free(scale):
    # the squares of values near 1e-200 (or 1e160) under- (over-)flowed: every correlation
    # came out 0, and the identity order, without a word
    from sklearn_cogaps import match_components

    A = np.random.default_rng(0).gamma(1.0, 1.0, (30, 3))
    order, corr = match_components(A * scale, A[:, [2, 0, 1]] * scale)
    assert order.tolist() == [1, 2, 0]
    np.testing.assert_allclose(corr, 1.0, rtol=1e-12)
    # a constant factor correlates with none
    _, corr = match_components(np.ones((5, 1)), A[:5, :1])
    assert corr.tolist() == [0.0]
