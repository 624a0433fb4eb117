"""Gene-set statistics after a CoGAPS fit: the permutation test of a set's mean z-score and the
over-representation of pattern markers, on a planted set and on random ones."""

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal
from scipy import stats

from sklearn_cogaps import (
    CoGAPS,
    gene_set_statistic,
    marker_overrepresentation,
    match_components,
    z_scores,
)
from sklearn_cogaps.datasets import make_patterns


@pytest.fixture(scope="module")
def fitted():
    X, W, H = make_patterns(n_samples=30, n_features=300, n_components=3, random_state=1)
    model = CoGAPS(n_components=3, max_iter=300, random_state=0).fit(X)
    order, corr = match_components(W, model.loadings_)
    assert np.all(corr > 0.9)
    # the features that load on the first true pattern only
    planted = np.flatnonzero((H[0] > 2.0) & (H[1] == 0) & (H[2] == 0))
    assert planted.size >= 20
    random_set = np.random.RandomState(5).choice(300, planted.size, replace=False)
    return model, order[0], planted, random_set


def test_planted_set_is_significant_in_its_pattern_and_a_random_set_is_not(fitted):
    model, k, planted, random_set = fitted
    result = gene_set_statistic(
        model.components_,
        model.components_std_,
        {"planted": planted, "random": random_set},
        n_permutations=1000,
        random_state=0,
    )
    assert_array_equal(result["gene_set"], ["planted", "random"])
    assert_array_equal(result["set_size"], [planted.size, planted.size])
    assert result["p_up"].shape == (2, 3)
    # planted: as high as the test can say in its own pattern, low in the others
    assert result["p_up"][0, k] == 1e-3
    others = [j for j in range(3) if j != k]
    assert np.all(result["p_down"][0, others] < 0.05)
    # random: no signal anywhere
    assert np.all(result["p_up"][1] > 0.05), result["p_up"][1]
    assert np.all(result["p_down"][1] > 0.05), result["p_down"][1]
    # R's 1 - 2 GSUpreg, before the p-values' floor of 1 / n_permutations
    unfloored = (result["p_up"] > 1e-3) & (result["p_down"] > 1e-3)
    assert_allclose(result["activity"][unfloored], 1 - 2 * result["p_up"][unfloored])
    assert_allclose(result["p_up"][unfloored] + result["p_down"][unfloored], 1.0)
    assert result["activity"][0, k] == 1.0
    # the statistic is the mean z-score of the members
    z = z_scores(model.components_, model.components_std_)
    assert_allclose(result["mean_z"][0, k], np.mean(z[k, planted]))


def test_permutation_p_values_of_random_sets_are_uniform(fitted):
    model, _, _, _ = fitted
    rng = np.random.RandomState(3)
    sets = {f"r{i}": rng.choice(300, 15, replace=False) for i in range(200)}
    result = gene_set_statistic(
        model.components_, model.components_std_, sets, n_permutations=500, random_state=1
    )
    p = result["p_up"][:, 0]
    # under the null the p-values are uniform (up to the 1/500 grid)
    assert stats.kstest(p, "uniform").pvalue > 0.01
    assert 0.05 < np.mean(p < 0.25) < 0.45


def test_same_seed_same_null_and_names_resolve(fitted):
    model, k, planted, _ = fitted
    names = np.array([f"g{j}" for j in range(300)], dtype=object)
    by_name = {"planted": [names[j] for j in planted] + ["not-a-gene"]}
    a = gene_set_statistic(
        model.components_, model.components_std_, by_name, feature_names=names, random_state=7
    )
    b = gene_set_statistic(
        model.components_, model.components_std_, {"planted": planted}, random_state=7
    )
    for key in ("mean_z", "p_up", "p_down"):
        assert_array_equal(a[key], b[key])
    c = gene_set_statistic(
        model.components_, model.components_std_, {"planted": planted}, random_state=8
    )
    assert_array_equal(a["mean_z"], c["mean_z"])


def test_a_series_of_gene_sets_keeps_its_names(fitted):
    pd = pytest.importorskip("pandas")
    model, k, planted, _ = fitted
    sets = {"planted": list(planted), "other": [0, 1, 2, 3, 4]}
    from_dict = gene_set_statistic(
        model.components_, model.components_std_, sets, n_permutations=100, random_state=0
    )
    from_series = gene_set_statistic(
        model.components_,
        model.components_std_,
        pd.Series(sets),
        n_permutations=100,
        random_state=0,
    )
    assert list(from_series["gene_set"]) == ["planted", "other"]
    assert_array_equal(from_series["p_up"], from_dict["p_up"])
    over = marker_overrepresentation(model.components_, model.loadings_, pd.Series(sets))
    assert set(over["gene_set"]) == {"planted", "other"}


def test_labelled_amplitudes_are_read_by_their_column_labels(fitted):
    # a DataFrame of the amplitudes, genes as columns (R's Amean transposed), names its
    # features; with feature_names in another order, each gene was read with another's
    # amplitudes (the planted set's p_up 0.998 in its pattern, where it is 0.001)
    pd = pytest.importorskip("pandas")
    model, k, planted, _ = fitted
    names = np.array([f"g{j}" for j in range(300)], dtype=object)
    sets = {"planted": list(names[planted])}
    mean = pd.DataFrame(model.components_, columns=names)
    std = pd.DataFrame(model.components_std_, columns=names)
    expected = gene_set_statistic(
        model.components_, model.components_std_, sets, feature_names=names, random_state=0
    )
    got = gene_set_statistic(mean, std, sets, random_state=0)
    assert_array_equal(got["p_up"], expected["p_up"])
    assert got["p_up"][0, k] <= 0.01
    reversed_mean, reversed_std = mean[names[::-1]], std[names[::-1]]
    with pytest.raises(ValueError, match=r"the features in another order than feature_names.*"
                       r"components\[feature_names\]"):  # fmt: skip
        gene_set_statistic(reversed_mean, reversed_std, sets, feature_names=names)
    with pytest.raises(ValueError, match=r"components_std and components are not the same"):
        gene_set_statistic(mean, reversed_std, sets)
    # by their labels, the reversed columns give the planted set its pattern
    by_labels = gene_set_statistic(reversed_mean, reversed_std, sets, random_state=0)
    assert_allclose(by_labels["mean_z"], expected["mean_z"], rtol=1e-12)  # summed in order
    assert by_labels["p_up"][0, k] <= 0.01
    markers = marker_overrepresentation(reversed_mean, model.loadings_, sets)
    W = model.loadings_
    by_names = marker_overrepresentation(model.components_, W, sets, feature_names=names)
    assert_array_equal(markers["overlap"], by_names["overlap"])
    others = names[:-1].tolist() + ["other"]
    with pytest.raises(ValueError, match="other features than feature_names"):
        marker_overrepresentation(mean, W, sets, feature_names=others)


def test_zero_standard_deviation_counts_as_calcz_reads_it():
    # R's calcZ: stddev[stddev == 0] <- 1e-6; a near-zero amplitude with sd 0 is then the
    # lowest z-score here, not the highest
    H = np.array([[1e-9, 0.0, 2.0, 0.5]])
    sd = np.array([[0.0, 0.0, 1.0, 1.0]])
    result = gene_set_statistic(H, sd, {"a": [0], "b": [1]}, n_permutations=10, random_state=0)
    assert result["mean_z"][0, 0] == 1e-9 / 1e-6
    assert result["mean_z"][1, 0] == 0.0
    assert_array_equal(z_scores(H, sd), [[1e-3, 0.0, 2.0, 0.5]])
    # a name shared by two features (a gene measured twice) takes both, as R's %in% does
    result = gene_set_statistic(
        H,
        sd + 1.0,
        {"g": ["x"]},
        feature_names=["w", "x", "y", "x"],
        n_permutations=10,
        random_state=0,
    )
    assert result["set_size"][0] == 2 and result["mean_z"][0, 0] == (0.0 / 1 + 0.5 / 2) / 2


def test_markers_and_nmae_refuse_inputs_they_would_misread():
    from sklearn_cogaps import pattern_markers, rating_nmae

    A, P = np.ones((5, 2)), np.ones((4, 2))
    for bad, what in ((np.nan, "NaN or infinite"), (-1.0, "negative")):
        A_bad = A.copy()
        A_bad[0, 0] = bad
        with pytest.raises(ValueError, match=f"amplitudes must be finite and non-negative.*{what}"):
            pattern_markers(A_bad, P)
    # a repeated level would change E_L; a single level has none
    for levels in ((1, 1, 2), (3,)):
        with pytest.raises(ValueError, match="two or more distinct rating levels"):
            rating_nmae(np.array([[1.0]]), np.array([[2.0]]), levels=levels)


def test_statistics_and_matching_refuse_what_would_come_out_as_a_number():
    """NaN deviations gave the most significant p-values, negative ones flipped the
    z-scores, and NaN factors matched with correlation 0: each is refused, by name."""
    from scipy import sparse

    from sklearn_cogaps import match_components, z_scores

    H = np.abs(np.random.default_rng(0).normal(size=(3, 10)))
    for std, what in ((H * np.nan, "components_std must be finite"),
                      (-H, "components_std must be non-negative")):  # fmt: skip
        with pytest.raises(ValueError, match=what):
            gene_set_statistic(H, std, {"a": [0, 1]}, random_state=0)
    with pytest.raises(ValueError, match=r"components must be dense.*components.toarray\(\)"):
        gene_set_statistic(sparse.csr_matrix(H), H, {"a": [0, 1]}, random_state=0)
    with pytest.raises(ValueError, match="std must be non-negative"):
        z_scores(H, -H)
    with pytest.raises(ValueError, match="reference must be finite"):
        match_components(np.full((5, 2), np.nan), np.ones((5, 2)))
    with pytest.raises(ValueError, match=r"a single factor as x.reshape\(-1, 1\)"):
        match_components(np.ones(5), np.ones(5))
    with pytest.raises(ValueError, match="axis must be 0"):
        match_components(np.ones((5, 2)), np.ones((5, 2)), axis=2)


def test_markers_over_represented_in_the_planted_set_only(fitted):
    model, k, planted, random_set = fitted
    sets = {"planted": planted, "random": random_set}
    table = marker_overrepresentation(model.components_, model.loadings_, sets)
    assert set(table) == {
        "pattern",
        "gene_set",
        "set_size",
        "n_markers",
        "overlap",
        "p_value",
        "p_adjusted",
    }
    assert_array_equal(table["pattern"], [0, 0, 1, 1, 2, 2])
    assert_array_equal(table["gene_set"], ["planted", "random"] * 3)
    row = {(p, s): i for i, (p, s) in enumerate(zip(table["pattern"], table["gene_set"]))}
    assert table["p_adjusted"][row[k, "planted"]] < 1e-6
    for j in range(3):
        assert table["p_adjusted"][row[j, "random"]] > 0.05
    # the p-value is the hypergeometric tail of the overlap
    i = row[k, "planted"]
    expected = stats.hypergeom.sf(
        table["overlap"][i] - 1, 300, table["set_size"][i], table["n_markers"][i]
    )
    assert_allclose(table["p_value"][i], expected)
    markers, _, _ = model.pattern_markers()
    assert table["overlap"][i] == np.intersect1d(markers[k], planted).size


def test_benjamini_hochberg_within_each_pattern():
    rng = np.random.RandomState(0)
    H = rng.gamma(1.0, 1.0, (2, 200))
    W = rng.random_sample((10, 2))
    sets = {f"s{i}": rng.choice(200, 10 + i, replace=False) for i in range(12)}
    table = marker_overrepresentation(H, W, sets)
    for k in range(2):
        mine = table["pattern"] == k
        assert_allclose(
            table["p_adjusted"][mine], stats.false_discovery_control(table["p_value"][mine])
        )


def test_sets_above_the_size_r_gives_fora_are_left_out_of_the_test_and_the_adjustment():
    """R's getPatternGeneSet has fgsea::fora test sets of at most 2038 members: a larger set
    has no p-value, and the others are adjusted among themselves."""
    rng = np.random.RandomState(0)
    H = rng.gamma(1.0, 1.0, (3, 2600))
    W = rng.random_sample((10, 3))
    sets = {"small": np.arange(40), "huge": np.arange(2100), "mid": np.arange(300, 500)}
    table = marker_overrepresentation(H, W, sets)
    every = marker_overrepresentation(H, W, sets, max_size=None)
    huge = table["gene_set"] == "huge"
    assert np.isnan(table["p_value"][huge]).all() and np.isnan(table["p_adjusted"][huge]).all()
    assert not np.isnan(every["p_value"]).any()
    assert_allclose(table["p_value"][~huge], every["p_value"][~huge])
    for k in range(3):
        mine = (table["pattern"] == k) & ~huge
        assert_allclose(
            table["p_adjusted"][mine], stats.false_discovery_control(table["p_value"][mine])
        )
    # the adjustment over all three sets differs: the left-out set changed the result
    assert not np.allclose(table["p_adjusted"][~huge], every["p_adjusted"][~huge])
    assert_array_equal(marker_overrepresentation(H, W, sets, max_size=100)["p_value"][~huge]
                       > -1, (table["set_size"] <= 100)[~huge])  # fmt: skip
    with pytest.raises(ValueError, match="max_size must be a positive integer"):
        marker_overrepresentation(H, W, sets, max_size=0)


def test_a_set_without_a_member_among_the_features_is_nan_beside_the_others(fitted):
    """A collection (MSigDB) against a panel has sets of no measured gene: R's
    calcCoGAPSStat gives them NA and fora drops them; they stopped the whole analysis."""
    model, k, planted, random_set = fitted
    names = np.asarray([f"g{j}" for j in range(300)], dtype=object)
    # sets of three sizes, with sets off the panel first and between them: the nulls of
    # the others are drawn as without them
    sets = {"off_first": ["XYZ0"], "planted": names[planted].tolist(),
            "off_panel": ["XYZ1", "XYZ2"], "random": names[random_set].tolist(),
            "small": names[:7].tolist(), "large": names[100:190].tolist()}  # fmt: skip
    kept = {name: members for name, members in sets.items() if not name.startswith("off")}
    with pytest.warns(UserWarning, match=r"2 of the 6 gene sets have no member.*'off_first', "
                      r"'off_panel'"):  # fmt: skip
        got = gene_set_statistic(model.components_, model.components_std_, sets,
                                 feature_names=names, random_state=0)  # fmt: skip
    alone = gene_set_statistic(model.components_, model.components_std_, kept,
                               feature_names=names, random_state=0)  # fmt: skip
    assert got["set_size"].tolist() == [0, planted.size, 0, planted.size, 7, 90]
    off = [0, 2]
    for key in ("mean_z", "p_up", "p_down", "p_two_sided", "activity"):
        assert np.isnan(got[key][off]).all()
        assert_array_equal(got[key][[1, 3, 4, 5]], alone[key])
    assert_array_equal(got["p_two_sided"], np.maximum(np.minimum(got["p_up"], got["p_down"]),
                                                      1e-3))  # fmt: skip
    with pytest.warns(UserWarning, match="no member"):
        table = marker_overrepresentation(model.components_, model.loadings_, sets,
                                          feature_names=names)  # fmt: skip
    other = marker_overrepresentation(model.components_, model.loadings_, kept,
                                      feature_names=names)  # fmt: skip
    off = np.char.startswith(table["gene_set"].astype(str), "off")
    assert np.isnan(table["p_value"][off]).all() and np.isnan(table["p_adjusted"][off]).all()
    # left out of the adjustment, as fora drops it
    assert_allclose(table["p_adjusted"][~off], other["p_adjusted"])


def test_ensembl_versions_on_one_side_are_told_how_to_drop():
    # GTF-derived features carry versions (ENSG00000141510.16), collections mostly not
    H = np.random.default_rng(0).gamma(1.0, 1.0, (2, 6))
    versioned = [f"ENSG{j:011d}.{j + 2}" for j in range(6)]
    bare = [name.split(".")[0] for name in versioned]
    with pytest.raises(ValueError, match=r"differ by their ENSEMBL versions.*drop them, "
                       r"feature_names=\[name.split\('.'\)\[0\]"):  # fmt: skip
        gene_set_statistic(H, H, {"a": bare[:3]}, feature_names=versioned)
    with pytest.raises(ValueError, match=r"drop them, gene_sets = \{name: "):
        marker_overrepresentation(H, np.eye(2), {"a": versioned[:3]}, feature_names=bare)
    with pytest.raises(ValueError, match=r"spelt as the feature names\.$"):
        gene_set_statistic(H, H, {"a": ["TP53"]}, feature_names=versioned)
    # the advice, run as written: on either side, on both, on a list of sets, and on the
    # columns of a DataFrame that name the features
    pd = pytest.importorskip("pandas")
    other = [f"{name}.{j + 7}" for j, name in enumerate(bare)]
    cases = [
        ({"a": bare[:3]}, versioned, H),
        ({"a": versioned[:3]}, bare, H),
        ({"a": other[:3]}, versioned, H),
        ([versioned[:3]], bare, H),
        ({"a": bare[:3]}, None, pd.DataFrame(H, columns=versioned)),
    ]
    for gene_sets, feature_names, components in cases:
        components_std = components
        with pytest.raises(ValueError, match="differ by their ENSEMBL versions") as info:
            gene_set_statistic(components, components_std, gene_sets,
                               feature_names=feature_names)  # fmt: skip
        advice = str(info.value).split("drop them, ", 1)[1].rstrip(".")
        namespace = {"gene_sets": gene_sets, "feature_names": feature_names,
                     "components": components.copy(),
                     "components_std": components.copy()}  # fmt: skip
        for statement in advice.replace(" (and components_std's alike)", "").split(", and "):
            exec(statement, namespace)
        if "components.columns" in advice:
            namespace["components_std"].columns = namespace["components"].columns
        result = gene_set_statistic(namespace["components"], namespace["components_std"],
                                    namespace["gene_sets"],
                                    feature_names=namespace["feature_names"])  # fmt: skip
        assert result["set_size"][0] == 3


def test_labelled_amplitudes_with_sets_of_column_positions_read_positions():
    # positions, as the docstring says, also beside a DataFrame labelled by gene names
    pd = pytest.importorskip("pandas")
    rng = np.random.RandomState(0)
    H = rng.gamma(1.0, 1.0, (2, 50))
    H[0, :10] += 20.0
    frame = pd.DataFrame(H, columns=[f"g{j}" for j in range(50)])
    sets = {"planted": range(10)}
    expected = gene_set_statistic(H, np.ones_like(H), sets, random_state=0)
    got = gene_set_statistic(frame, np.ones_like(H), sets, random_state=0)
    assert_array_equal(got["p_up"], expected["p_up"])
    assert marker_overrepresentation(frame, np.eye(2), sets)["overlap"].tolist() == [10, 0]
    # a generator of sets is read once
    assert gene_set_statistic(frame, np.ones_like(H), (s for s in [range(10)]))["set_size"][0] == 10


def test_r_argument_names_of_the_gene_set_statistic_say_what_to_write():
    H = np.ones((2, 5))
    with pytest.raises(TypeError, match="n_permutations=, not numPerm="):
        gene_set_statistic(H, H, {"a": [0]}, numPerm=100)
    with pytest.raises(TypeError, match="gene_sets=, not sets="):
        gene_set_statistic(H, H, sets={"a": [0]})


@pytest.mark.parametrize(
    "sets, kwargs, match",
    [
        ({}, {}, "gene_sets is empty"),
        ({"a": "GENE"}, {}, "single string"),
        ({"a": ["x", "y"]}, {}, "not integer column indices"),
        # a mask as a list: True and False are integers to Python, not the set {0, 1}
        ({"a": [True, False, True, False, False]}, {}, r"boolean members.*flatnonzero"),
        ({"a": np.array([True, False, True, False, False])}, {}, "boolean members"),
        ({"a": [0, 999]}, {}, "outside"),
        ({"a": ["nope"]}, {"feature_names": [f"g{j}" for j in range(5)]}, "No gene set has a"),
        ({"a": [0]}, {"feature_names": ["g0"]}, "one name per feature"),
        ({"a": [0]}, {"n_permutations": 0}, "n_permutations"),
    ],
)
def test_bad_arguments_are_refused(sets, kwargs, match):
    H = np.ones((2, 5))
    with pytest.raises(ValueError, match=match):
        gene_set_statistic(H, H, sets, **kwargs)


def test_shapes_are_checked():
    with pytest.raises(ValueError, match="same shape"):
        gene_set_statistic(np.ones((2, 5)), np.ones((2, 4)), {"a": [0]})
    with pytest.raises(ValueError, match="n_components"):
        marker_overrepresentation(np.ones((2, 5)), np.ones((4, 3)), {"a": [0]})
    # R's orientation (Amean, Asd: genes x patterns) would make every gene a pattern
    with pytest.raises(ValueError, match=r"more patterns than features.*Amean.T"):
        gene_set_statistic(np.ones((50, 3)), np.ones((50, 3)), {"a": [0, 1, 2]})
    from sklearn_cogaps import pattern_markers

    # components_ (patterns x genes) given where the amplitudes go (genes x patterns)
    with pytest.raises(ValueError, match=r"one column per pattern.*components_.T and loadings_"):
        pattern_markers(np.ones((3, 50)), np.ones((20, 3)))


def test_the_null_of_large_sets_draws_distinct_features(fitted):
    """R's calcCoGAPSStat samples without replacement. Drawn with replacement, the null of
    a set of 200 among 300 features was too wide: 0.3% of random sets had p_up < 0.05."""
    model, _, _, _ = fitted
    rng = np.random.RandomState(11)
    sets = {f"r{i}": rng.choice(300, 200, replace=False) for i in range(300)}
    result = gene_set_statistic(
        model.components_, model.components_std_, sets, n_permutations=400, random_state=2
    )
    rate = np.mean(result["p_up"][:, 0] < 0.05)
    assert 0.02 < rate < 0.09, rate
    # every feature of the null draws at most once: a set of all features has a constant
    # null, every draw tied with the statistic: neither up nor down (it was p_up = 1 and an
    # activity of -1 in every pattern)
    everything = gene_set_statistic(
        model.components_, model.components_std_, {"all": range(300)}, n_permutations=50
    )
    assert_array_equal(everything["p_up"], np.full((1, 3), 0.5))
    assert_array_equal(everything["p_down"], np.full((1, 3), 0.5))
    assert_array_equal(everything["activity"], np.zeros((1, 3)))


def test_features_tied_at_zero_are_neither_up_nor_down():
    """Amplitudes of exactly 0 tie with null draws of zeros: counted half on each side, a
    set of such features sits in the middle of the null, as without ties (counted as above,
    its activity was -1 in every pattern)."""
    z = np.zeros((2, 40))
    z[:, 20:] = np.random.RandomState(0).gamma(1.0, 1.0, (2, 20))
    result = gene_set_statistic(z, np.ones_like(z), {"zeros": [0]}, n_permutations=2000,
                                random_state=0)  # fmt: skip
    # half of the features are 0: the statistic ties with half the draws, the others above
    assert_allclose(result["p_up"], 0.75, atol=0.03)
    assert_allclose(result["p_up"] + result["p_down"], 1.0)
    assert_allclose(result["activity"], -0.5, atol=0.06)
