"""CoGAPS's distributed mode: recovery in both modes, the matching of patterns, explicit
subsets, reproducibility across joblib backends (processes and a real Dask cluster), errors."""

import pickle
import warnings

import joblib
import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal

from sklearn_cogaps import CoGAPS, match_components
from sklearn_cogaps._cogaps._distributed import consensus_patterns
from sklearn_cogaps.datasets import make_single_cell

FIT = dict(n_components=3, max_iter=300, random_state=0)


@pytest.fixture(scope="module")
def cells():
    # 400 cells x 300 genes of Poisson counts, about 70% zeros, three programs
    return make_single_cell(n_samples=400, n_features=300, n_components=3, random_state=0)


@pytest.fixture(scope="module")
def genome_wide(cells):
    X, _, _ = cells
    return CoGAPS(distributed="genome-wide", n_sets=3, **FIT).fit(X)


@pytest.fixture(scope="module")
def single_cell(cells):
    X, _, _ = cells
    return CoGAPS(distributed="single-cell", n_sets=3, **FIT).fit(X)


def _sparse_model_chisq(X, W, H):
    """Chi-square of the sparse-data model (sigma 0.1 for zeros, 0.1 x otherwise)."""
    D = X.toarray()
    sigma = np.where(D > 0, np.maximum(0.1 * D, 0.1), 0.1)
    return float(np.sum(((D - W @ H) / sigma) ** 2))


@pytest.mark.parametrize("mode", ["genome-wide", "single-cell"])
def test_recovers_the_planted_programs(cells, genome_wide, single_cell, mode):
    X, W, H = cells
    model = genome_wide if mode == "genome-wide" else single_cell
    assert model.n_components_ == 3
    assert model.loadings_.shape == (400, 3) and model.components_.shape == (3, 300)
    _, corr_w = match_components(W, model.loadings_)
    _, corr_h = match_components(H, model.components_, axis=0)
    assert np.all(corr_w > 0.9), corr_w
    assert np.all(corr_h > 0.9), corr_h
    # every consensus pattern comes from at least min_ns = 2 first-phase patterns that
    # agree with it (a short chain may split one program and merge two others)
    labels = model.pattern_clusters_
    assert np.all(np.bincount(labels[labels >= 0]) >= 2)
    matched = model.consensus_correlation_[labels >= 0]
    assert np.median(matched) > 0.9, model.consensus_correlation_
    # the consensus is the fixed factor: columns of maximum 1, no spread
    shared, shared_std = (
        (model.loadings_, model.loadings_std_)
        if mode == "genome-wide"
        else (model.components_.T, model.components_std_.T)
    )
    assert_allclose(shared.max(axis=0), 1.0)
    assert np.all(shared_std == 0)
    # stitched in the original order: the chi-square of the stitched result is the sum
    assert_allclose(
        _sparse_model_chisq(X, model.loadings_, model.components_), model.chisq_, rtol=1e-9
    )
    assert_allclose(model.chisq_, model.subset_chisq_.sum())
    assert model.objective_history_.shape == (600,) and model.n_iter_ == 600


def test_subsets_partition_the_split_axis_and_are_diagnosed(genome_wide, single_cell):
    for model, n in ((genome_wide, 300), (single_cell, 400)):
        assert len(model.subsets_) == 3
        assert_array_equal(np.sort(np.concatenate(model.subsets_)), np.arange(n))
        assert [s.size for s in model.subsets_] == [n // 3, n // 3, n - 2 * (n // 3)]
        assert all(np.all(np.diff(s) > 0) for s in model.subsets_)
    # the first-phase shared factor of every subset: patterns over all samples, or
    # amplitudes over all features
    assert [p.shape for p in genome_wide.subset_patterns_] == [(400, 3)] * 3
    assert [p.shape for p in single_cell.subset_patterns_] == [(300, 3)] * 3


def test_fitted_distributed_model_transforms_and_pickles(cells, genome_wide):
    X, _, _ = cells
    W_new = genome_wide.transform(X[:5])
    assert W_new.shape == (5, 3) and np.all(W_new >= 0)
    restored = pickle.loads(pickle.dumps(genome_wide))
    assert_array_equal(restored.transform(X[:5]), W_new)
    markers, _, _ = genome_wide.pattern_markers()
    assert len(markers) == 3


def test_a_plain_refit_drops_the_distributed_attributes(cells):
    X, _, _ = cells
    model = _fit_small(X, max_iter=20)
    assert model.n_components_ > 0
    with pytest.warns(UserWarning, match="n_sets=2 is used only in distributed mode"):
        model.set_params(distributed=None).fit(X)
    # the number of fitted patterns is there in both modes, for code that handles both
    assert model.n_components_ == model.n_components
    for name in (
        "subsets_",
        "subset_patterns_",
        "pattern_clusters_",
        "consensus_correlation_",
        "subset_chisq_",
    ):
        assert not hasattr(model, name), name


def test_explicit_sets_and_feature_names(cells):
    pd = pytest.importorskip("pandas", reason="pandas gives X feature names")
    X, W, _ = cells
    names = [f"gene{j}" for j in range(300)]
    frame = pd.DataFrame(X.toarray(), columns=names)
    # interleaved subsets, given by name
    sets = [names[0::3], names[1::3], names[2::3]]
    model = CoGAPS(distributed="genome-wide", explicit_sets=sets, **FIT).fit(frame)
    assert [s.tolist() for s in model.subsets_] == [
        list(range(0, 300, 3)),
        list(range(1, 300, 3)),
        list(range(2, 300, 3)),
    ]
    _, corr = match_components(W, model.loadings_)
    assert np.all(corr > 0.9), corr
    by_index = CoGAPS(
        distributed="genome-wide",
        explicit_sets=[range(0, 300, 3), range(1, 300, 3), range(2, 300, 3)],
        n_sets=3,
        **FIT,
    ).fit(X.toarray())
    assert_array_equal(by_index.components_, model.components_)
    # a single-cell split names its samples by the DataFrame's index
    cells_named = pd.DataFrame(X.toarray(), index=[f"cell{i}" for i in range(X.shape[0])])
    half = X.shape[0] // 2
    split = dict(distributed="single-cell", n_sets=2, random_state=0, max_iter=20)
    by_name = CoGAPS(
        explicit_sets=[cells_named.index[:half].tolist(), cells_named.index[half:].tolist()],
        **split,
    ).fit(cells_named)
    by_position = CoGAPS(explicit_sets=[range(half), range(half, X.shape[0])], **split).fit(
        X.toarray()
    )
    assert_array_equal(by_name.loadings_, by_position.loadings_)
    with pytest.raises(ValueError, match=r"X gives its samples no names: fit a DataFrame .*"
                       r"X\.index\.get_indexer\(names\)"):  # fmt: skip
        CoGAPS(explicit_sets=[["cell0", "cell1"]], **split).fit(X.toarray())


def test_one_flat_list_of_members_is_one_subset():
    """A flat list, tuple, range or list of names is one subset, as the 1-d array is (each
    member was a subset of one); R's 1-based indices are told where they start."""
    from sklearn_cogaps._cogaps._distributed import _explicit_subsets

    names = [f"g{j}" for j in range(60)]
    expected, left_out = _explicit_subsets(np.arange(30), 60, "feature", None)
    assert len(expected) == 1
    two, _ = _explicit_subsets({"a": range(10), "b": range(10, 30)}, 60, "feature", None)
    assert [t.tolist() for t in two] == [list(range(10)), list(range(10, 30))]
    for flat in (list(range(30)), tuple(range(30)), range(30), names[:30]):
        subsets, rest = _explicit_subsets(flat, 60, "feature", names)
        assert len(subsets) == 1
        assert_array_equal(subsets[0], expected[0])
        assert_array_equal(rest, left_out)
    with pytest.raises(ValueError, match=r"start at 0: R's 1:20 is range\(0, 20\)"):
        _explicit_subsets([range(1, 31), range(31, 61)], 60, "feature", None)


def test_explicit_sets_that_leave_features_out_still_fit_them(cells):
    # R CoGAPS's tests fit sets covering 900 of GIST's 1363 genes; here 200 of 300
    X, W, H = cells
    sets = [range(0, 200, 2), range(1, 200, 2)]
    model = CoGAPS(distributed="genome-wide", explicit_sets=sets, **FIT).fit(X)
    left_out = np.arange(200, 300)
    # the second phase shares the left-out features among the subsets, in order
    assert_array_equal(model.subsets_[0], np.r_[0:200:2, 200:250])
    assert_array_equal(model.subsets_[1], np.r_[1:200:2, 250:300])
    order, corr = match_components(W, model.loadings_)
    assert np.all(corr > 0.9), corr
    # their amplitudes are fitted against the consensus patterns like the others'
    for k in range(3):
        fitted = model.components_[order[k], left_out]
        assert np.corrcoef(fitted, H[k, left_out])[0, 1] > 0.8


def test_same_seed_same_result_and_the_seed_matters(cells, sequential_and_processes):
    X, _, _ = cells
    sequential, _ = sequential_and_processes
    _same_fit(sequential, _fit_small(X))
    other = _fit_small(X, max_iter=5, random_state=4)
    assert not np.array_equal(np.concatenate(other.subsets_), np.concatenate(sequential.subsets_))


def _fit_small(X, **kwargs):
    params = dict(n_components=3, max_iter=100, random_state=3, distributed="single-cell", n_sets=2)
    return CoGAPS(**{**params, **kwargs}).fit(X)


def _same_fit(a, b):
    for name in (
        "loadings_",
        "loadings_std_",
        "components_",
        "components_std_",
        "objective_history_",
        "consensus_correlation_",
    ):
        assert_array_equal(getattr(a, name), getattr(b, name), err_msg=name)
    assert a.chisq_ == b.chisq_


@pytest.fixture(scope="module")
def sequential_and_processes(cells):
    X, _, _ = cells
    sequential = _fit_small(X)
    processes = _fit_small(X, n_jobs=2)
    return sequential, processes


def test_joblib_processes_give_the_sequential_result(sequential_and_processes):
    sequential, processes = sequential_and_processes
    _same_fit(sequential, processes)
    with joblib.parallel_config(backend="threading", n_jobs=2):
        _same_fit(sequential, _fit_small(_cells_X()))


def _cells_X():
    return make_single_cell(n_samples=400, n_features=300, n_components=3, random_state=0)[0]


def test_dask_local_cluster_gives_the_joblib_processes_result(
    sequential_and_processes, monkeypatch
):
    distributed = pytest.importorskip(
        "distributed", reason="dask[distributed] is an optional extra"
    )
    _, processes = sequential_and_processes
    scattered = []
    real_scatter = distributed.Client.scatter

    def counting_scatter(self, data, *args, **kwargs):
        scattered.append(len(data) if isinstance(data, list) else 1)
        return real_scatter(self, data, *args, **kwargs)

    monkeypatch.setattr(distributed.Client, "scatter", counting_scatter)
    with (
        distributed.LocalCluster(
            n_workers=2,
            processes=True,
            threads_per_worker=1,
            host="127.0.0.1",
            dashboard_address=None,
        ) as cluster,
        distributed.Client(cluster) as client,
    ):
        client.wait_for_workers(2, timeout=120)  # both registered, as the test counts them
        with joblib.parallel_config(backend="dask"):
            on_dask = _fit_small(_cells_X())
        # the tasks did run on the cluster's workers
        ran = client.run(lambda: "sklearn_cogaps._cogaps._distributed" in __import__("sys").modules)
        assert len(ran) == 2 and all(ran.values()), ran
        # each subset's data left the client once (one scatter of the 2 subsets for both
        # phases), and no task fetched a subset from another worker
        moved = client.run(lambda dask_worker: dask_worker.state.transfer_incoming_count_total)
    assert scattered == [2], scattered
    assert sum(moved.values()) == 0, moved
    _same_fit(processes, on_dask)


def _patterns(rng, n=50):
    t = np.linspace(0, 1, n)
    return np.column_stack([np.exp(-0.5 * ((t - c) / 0.1) ** 2) for c in (0.2, 0.5, 0.8)])


def test_consensus_weights_members_by_their_correlation_cubed():
    rng = np.random.RandomState(0)
    base = _patterns(rng)
    fits = [base[:, rng.permutation(3)] * rng.uniform(0.5, 2, 3) for _ in range(4)]
    fits[3][:, 0] = rng.random_sample(50)  # one noisy member
    consensus, labels, corr = consensus_patterns(fits, cut=3, min_ns=2, max_ns=6)
    order, match = match_components(base, consensus)
    assert np.all(match > 0.99), match
    assert_allclose(consensus.max(axis=0), 1.0)
    # the noisy member joined a cluster but weighs little; the others agree with their mean
    cluster = labels[3, 0]
    members = np.argwhere(labels == cluster)
    block = np.column_stack([fits[i][:, k] for i, k in members])
    weights = np.round(corr[labels == cluster], 3) ** 3
    expected = block @ weights / weights.sum()
    assert_allclose(consensus[:, cluster], expected / expected.max())
    assert corr[3, 0] < 0.5 and np.all(np.delete(corr.ravel(), 9) > 0.95)


def test_small_clusters_are_dropped_and_large_ones_split():
    rng = np.random.RandomState(1)
    base = _patterns(rng)
    fits = [base + 0.01 * rng.random_sample(base.shape) for _ in range(4)]
    lone = rng.random_sample(50)
    fits[0] = np.column_stack([base[:, 0], base[:, 1], lone])
    # cut=4: the lone pattern is its own cluster of 1 < min_ns and is dropped
    consensus, labels, corr = consensus_patterns(fits, cut=4, min_ns=2, max_ns=8)
    assert consensus.shape[1] == 3
    assert labels[0, 2] == -1 and np.isnan(corr[0, 2])
    # max_ns=2: the clusters of 3 or 4 members are split in two, keeping parts of >= 1
    consensus, labels, _ = consensus_patterns(fits, cut=3, min_ns=1, max_ns=2)
    assert np.all(np.bincount(labels[labels >= 0]) <= 2)
    assert consensus.shape[1] > 3
    # a pattern that died (constant) is never matched
    fits[1][:, 2] = 0.0
    _, labels, _ = consensus_patterns(fits, cut=3, min_ns=2, max_ns=8)
    assert labels[1, 2] == -1


def test_anticorrelated_members_weigh_nothing_and_the_consensus_stays_non_negative():
    base = _patterns(None)[:, :1]
    # a cluster forced to hold a pattern and its mirror image: the mirror correlates
    # negatively with the cluster's mean, and a negative weight would give negative entries
    fits = [base, base * 0.9, 1.0 - base]
    consensus, labels, corr = consensus_patterns(fits, cut=1, min_ns=1, max_ns=3)
    assert_array_equal(labels.ravel(), [0, 0, 0])
    assert corr[2, 0] < 0 < corr[0, 0]
    assert np.all(consensus >= 0)
    w = np.round(corr[:2, 0], 3) ** 3
    expected = (base[:, 0] * w[0] + 0.9 * base[:, 0] * w[1]) / w.sum()
    assert_allclose(consensus[:, 0], expected / expected.max())


@pytest.mark.parametrize(
    "mode, shape, match",
    [
        ("genome-wide", (1, 30), "correlation over the samples.*n_samples=1"),
        ("single-cell", (30, 1), "correlation over the features.*n_features=1"),
        ("genome-wide", (30, 1), "n_sets=2 exceeds the number of features of X \\(n_features=1\\)"),
        ("single-cell", (1, 30), "n_sets=2 exceeds the number of samples of X \\(n_samples=1\\)"),
    ],
)
def test_too_small_an_input_for_the_subsets_is_an_error(mode, shape, match):
    X = np.random.RandomState(0).random_sample(shape)
    with pytest.raises(ValueError, match=match):
        CoGAPS(n_components=2, max_iter=5, distributed=mode, n_sets=2).fit(X)


def test_no_cluster_large_enough_is_an_error():
    rng = np.random.RandomState(2)
    fits = [rng.random_sample((30, 2)) for _ in range(2)]
    with pytest.raises(ValueError, match="No cluster of at least min_ns=3"):
        consensus_patterns(fits, cut=4, min_ns=3, max_ns=6)


@pytest.mark.parametrize(
    "params, match",
    [
        (dict(distributed="rows"), "distributed"),
        (dict(distributed="genome-wide", n_sets=0), "n_sets"),
        (
            dict(distributed="genome-wide", n_sets=301),
            "n_sets=301 exceeds the number of features of X \\(n_features=300\\)",
        ),
        (dict(distributed="single-cell", n_sets=2, cut=7), "cut=7 exceeds the 6 patterns"),
        (dict(distributed="single-cell", min_ns=3, max_ns=2), "max_ns=2 is smaller"),
        (dict(distributed="single-cell", warm_start=True), "warm_start=True cannot"),
        (dict(explicit_sets=[[0, 1]]), "only in distributed mode"),
        (dict(distributed="genome-wide", explicit_sets=[[0, 1], [1, 2]]), "must not overlap"),
        (dict(distributed="genome-wide", explicit_sets=[[0, 300]]), "outside"),
        (dict(distributed="genome-wide", explicit_sets=[[]]), "empty"),
        (dict(distributed="genome-wide", explicit_sets=[["a"]]), r"gives its features no names"),
        (dict(distributed="genome-wide", explicit_sets=[[0.5]]), "integer feature indices"),
        (
            dict(
                distributed="genome-wide",
                n_sets=2,
                explicit_sets=[range(0, 300, 3), range(1, 300, 3), range(2, 300, 3)],
            ),
            "n_sets=2 but explicit_sets holds 3 subsets",
        ),
    ],
)
def test_bad_parameters_are_refused(params, match):
    X = _cells_X()
    with pytest.raises(ValueError, match=match):
        CoGAPS(n_components=3, max_iter=5, **params).fit(X)


@pytest.mark.parametrize(
    "params, match",
    [
        (dict(n_sets=8), "n_sets=8 is used only in distributed mode"),
        (dict(cut=2, max_ns=5), "cut=2, max_ns=5 are used only in distributed mode"),
        (dict(min_ns=1), "min_ns=1 is used only"),
        (dict(n_jobs=2), "n_jobs=2 is used only.*OMP_NUM_THREADS"),
    ],
)
def test_one_chain_warns_that_it_ignores_the_parameters_of_distributed_mode(params, match):
    X = _cells_X()[:20, :30]
    with pytest.warns(UserWarning, match=match):
        CoGAPS(n_components=2, max_iter=2, random_state=0, **params).fit(X)
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=".*used only in distributed mode")
        CoGAPS(n_components=2, max_iter=2, random_state=0).fit(X)


def _subset_shipments(monkeypatch, X, n_sets):
    """Run a fit while recording every array joblib's loky backend writes to a memory map
    (its way of sending a large array to the worker processes)."""
    import joblib._memmapping_reducer as reducer

    dumped = []
    real_dump = reducer.dump

    def counting_dump(value, filename, *args, **kwargs):
        dumped.append((value.shape, value.dtype.str, hash(value.tobytes())))
        return real_dump(value, filename, *args, **kwargs)

    monkeypatch.setattr(reducer, "dump", counting_dump)
    with joblib.parallel_config(backend="loky", n_jobs=2, max_nbytes="1K"):
        model = _fit_small(X, n_sets=n_sets, max_iter=20)
    return model, dumped


def test_loky_sends_each_subsets_data_once_for_both_phases(monkeypatch):
    X = _cells_X()
    model, dumped = _subset_shipments(monkeypatch, X, n_sets=2)
    # each subset's CSR arrays (data, indices, indptr) above 1 kB are written once, and
    # phase 2 reuses the files: no array went twice
    assert len(dumped) == len(set(dumped)), dumped
    subset_sizes = {X[idx].nnz for idx in model.subsets_}
    values = {shape[0] for shape, dtype, _ in dumped if len(shape) == 1 and dtype.endswith("f8")}
    assert values == subset_sizes
    _same_fit(model, _fit_small(X, n_sets=2, max_iter=20))
