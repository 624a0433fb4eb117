"""The command line: the built-in example, every input format, the outputs, the errors."""

import bz2
import gzip
import lzma
import subprocess
import sys
import warnings

import numpy as np
import pytest
from numpy.testing import assert_array_equal
from scipy import io as sio
from scipy import sparse
from sklearn.exceptions import ConvergenceWarning

from sklearn_cogaps import CoGAPS, match_components
from sklearn_cogaps._cli import CommandLineError, main
from sklearn_cogaps.datasets import make_patterns

from _shared import interrupt_cogaps_at

FAST = ["-k", "2", "--max-iter", "15", "--seed", "3"]


@pytest.fixture(scope="module")
def data():
    X, _, _ = make_patterns(n_samples=12, n_features=25, n_components=2, random_state=1)
    samples = np.array([f"s{i}" for i in range(X.shape[0])])
    features = np.array([f"gene{j}" for j in range(X.shape[1])])
    return X, samples, features


@pytest.fixture(scope="module")
def reference(data):
    """The fit that every input format must reproduce exactly."""
    X = data[0]
    return CoGAPS(n_components=2, max_iter=15, random_state=3).fit(X)


def _write_delimited(path, X, rows, cols, sep):
    with open(path, "w") as f:
        f.write(sep.join(["", *cols]) + "\n")
        for name, row in zip(rows, X):
            f.write(sep.join([name, *(repr(float(v)) for v in row)]) + "\n")


def _run(capsys, argv):
    status = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return status, out, err


def _fit_table(capsys, monkeypatch, path, with_pandas, *options):
    """Run the command line on the table ``path`` (with or without pandas) into out.npz;
    returns the archive's path."""
    if not with_pandas:
        monkeypatch.setitem(sys.modules, "pandas", None)
    out = path.parent / "out.npz"
    status, _, err = _run(capsys, [path, *options, *FAST, "-o", out])
    assert status == 0, err
    return out


def _check_npz(path, model, samples=None, features=None):
    with np.load(path) as r:  # no pickles needed
        assert_array_equal(r["patterns"], model.loadings_)
        assert_array_equal(r["patterns_std"], model.loadings_std_)
        assert_array_equal(r["amplitudes"], model.components_)
        assert_array_equal(r["amplitudes_std"], model.components_std_)
        assert_array_equal(r["chisq_history"], model.objective_history_)
        assert_array_equal(r["n_atoms_history"], model.n_atoms_history_)
        assert float(r["chisq"]) == model.chisq_
        assert list(r["pattern_names"]) == ["Pattern_1", "Pattern_2"]
        assert str(r["uncertainty_model"]) == model.uncertainty_model_
        if samples is None:
            assert "sample_names" not in r and "feature_names" not in r
        else:
            assert_array_equal(r["sample_names"], samples)
            assert_array_equal(r["feature_names"], features)


def test_builtin_example_recovers_the_patterns(tmp_path, capsys):
    out_file = tmp_path / "example.npz"
    status, out, _ = _run(capsys, ["--output", out_file])
    assert status == 0
    for text in (
        "make_patterns",
        "corr.",
        "empty model (W H = 0)",
        "first iteration",
        "last iteration",
        "posterior mean",
        "atoms",
        "wall",
        "written",
    ):
        assert text in out
    X, W, H = make_patterns(n_components=3, random_state=0)
    with np.load(out_file) as r:
        _, corr = match_components(W, r["patterns"])
        assert r["patterns"].shape == (X.shape[0], 3)
        assert r["amplitudes"].shape == (3, X.shape[1])
        assert r["chisq_history"].shape == (2000,)
        # the start near the posterior explains the data from the first iteration
        empty = np.sum((X / np.maximum(0.1 * X, 0.1)) ** 2)
        assert float(r["chisq"]) < 2 * X.size < 0.05 * empty
        assert r["chisq_history"][0] < 0.05 * empty
    assert np.all(corr > 0.9), corr


@pytest.fixture(scope="module")
def reference_sparse(data):
    """The same with the sparse-data model, which sparse files (.mtx) use."""
    X = data[0]
    return CoGAPS(n_components=2, max_iter=15, random_state=3, sparse_optimization=True).fit(X)


@pytest.mark.parametrize(
    "suffix", [".npy", ".csv", ".tsv", ".mtx", ".mtx.gz", ".csv.bz2", ".tsv.xz", ".mtx.bz2"]
)
def test_each_input_format_round_trips(suffix, data, reference, reference_sparse, tmp_path, capsys):
    X, samples, features = data
    plain, _, compression = suffix.partition(".")[2].partition(".")
    path = tmp_path / f"data.{plain}"
    named = plain in ("csv", "tsv")
    if plain == "npy":
        np.save(path, X)
    elif named:
        _write_delimited(path, X, samples, features, "," if plain == "csv" else "\t")
    else:
        sio.mmwrite(path, sparse.coo_matrix(X), precision=17)
    if compression:
        pack = {"gz": gzip.compress, "bz2": bz2.compress, "xz": lzma.compress}[compression]
        packed = tmp_path / f"data{suffix}"
        packed.write_bytes(pack(path.read_bytes()))
        path.unlink()
        path = packed
    status, out, err = _run(capsys, [path, *FAST, "-o", tmp_path / "out.npz"])
    assert status == 0, err
    assert f"{X.shape[0]} samples x {X.shape[1]} features" in out
    expected = reference_sparse if suffix.startswith(".mtx") else reference
    assert ("sparse-data model" in out) == suffix.startswith(".mtx")
    _check_npz(tmp_path / "out.npz", expected, *((samples, features) if named else ()))


def test_sparse_model_option_and_sparse_files_with_an_uncertainty(
    data, reference_sparse, tmp_path, capsys
):
    X = data[0]
    np.save(tmp_path / "x.npy", X)
    status, out, err = _run(
        capsys, [tmp_path / "x.npy", *FAST, "--sparse-optimization", "-o", tmp_path / "s.npz"]
    )
    assert status == 0, err
    assert "sparse-data model" in out
    _check_npz(tmp_path / "s.npz", reference_sparse)
    # a sparse file with a user uncertainty is fitted by the dense model with it
    U = np.maximum(0.2 * X, 0.3)
    sio.mmwrite(tmp_path / "x.mtx", sparse.coo_matrix(X), precision=17)
    np.save(tmp_path / "u.npy", U)
    status, out, err = _run(
        capsys,
        [tmp_path / "x.mtx", *FAST, "--uncertainty", tmp_path / "u.npy", "-o", tmp_path / "d.npz"],
    )
    assert status == 0, err
    assert "dense model, uncertainty from" in out
    expected = CoGAPS(n_components=2, max_iter=15, random_state=3).fit(X, uncertainty=U)
    _check_npz(tmp_path / "d.npz", expected)


def test_csv_without_pandas_and_transposed_files(data, reference, tmp_path, capsys, monkeypatch):
    X, samples, features = data
    path = tmp_path / "genes_by_samples.csv"
    _write_delimited(path, X.T, features, samples, ",")  # CoGAPS's orientation
    monkeypatch.setitem(sys.modules, "pandas", None)  # import pandas now fails
    status, out, err = _run(capsys, [path, "--transpose", *FAST, "-o", tmp_path / "out.npz"])
    assert status == 0, err
    assert "transpose" in out
    _check_npz(tmp_path / "out.npz", reference, samples, features)


def _write_gct(path, X, genes, samples, version):
    """X (genes x samples) as a GCT file: 1.2 (Name, Description) or 1.3 (an id, one row
    annotation and one column annotation)."""
    with open(path, "w") as f:
        if version == "1.2":
            f.write(f"#1.2\n{X.shape[0]}\t{X.shape[1]}\n")
            f.write("\t".join(["Name", "Description", *samples]) + "\n")
            lead = [[g, "na"] for g in genes]
        else:
            f.write(f"#1.3\n{X.shape[0]}\t{X.shape[1]}\t1\t1\n")
            f.write("\t".join(["id", "chromosome", *samples]) + "\n")
            f.write("\t".join(["batch", "na", *["b1"] * len(samples)]) + "\n")
            lead = [[g, "chr1"] for g in genes]
        for first, row in zip(lead, X):
            f.write("\t".join([*first, *(repr(float(v)) for v in row)]) + "\n")


@pytest.mark.parametrize("version", ["1.2", "1.3"])
@pytest.mark.parametrize("transpose", [[], ["--transpose"]])
def test_gct_files_are_read_as_genes_by_samples(
    data, reference, tmp_path, capsys, version, transpose
):
    X, samples, features = data
    path = tmp_path / "data.gct"
    _write_gct(path, X.T, features, samples, version)  # R CoGAPS's orientation
    status, out, err = _run(capsys, [path, *transpose, *FAST, "-o", tmp_path / "out.npz"])
    assert status == 0, err
    assert f"{X.shape[0]} samples x {X.shape[1]} features (the transpose" in out
    _check_npz(tmp_path / "out.npz", reference, samples, features)
    bad = tmp_path / "bad.gct"
    bad.write_text("#1.2\n3\t2\nName\tDescription\ts0\ts1\ng0\tna\t1\t2\n")
    status, _, err = _run(capsys, [bad, *FAST])
    assert status == 2 and "announces 3 genes x 2 samples and holds 1 x 2" in err
    bad.write_text("#1.2\n1\t2\nName\ts0\ts1\ng0\t1\t2\n")  # no Description column
    status, _, err = _run(capsys, [bad, *FAST])
    assert status == 2 and "no Description column after Name" in err


@pytest.mark.parametrize("with_pandas", [True, False])
@pytest.mark.parametrize("transpose", [False, True])
def test_names_that_look_like_numbers_stay_as_written(
    data, reference, tmp_path, capsys, monkeypatch, with_pandas, transpose
):
    X, _, _ = data
    # sample and gene identifiers with leading zeros, and one named NA
    samples = np.array([f"{i:04d}" for i in range(X.shape[0] - 1)] + ["NA"])
    features = np.array([f"{j:05d}" for j in range(X.shape[1])])
    path = tmp_path / "ids.csv"
    if transpose:
        _write_delimited(path, X.T, features, samples, ",")
    else:
        _write_delimited(path, X, samples, features, ",")
    options = ["--transpose"] if transpose else []
    out = _fit_table(capsys, monkeypatch, path, with_pandas, *options)
    _check_npz(out, reference, samples, features)


@pytest.mark.parametrize("with_pandas", [True, False])
def test_repeated_column_names_stay_as_written(
    data, reference, tmp_path, capsys, monkeypatch, with_pandas
):
    X, samples, features = data
    features = features.copy()
    features[1] = features[0]  # pandas alone would rename the second one "gene0.1"
    path = tmp_path / "repeated.csv"
    _write_delimited(path, X, samples, features, ",")
    _check_npz(_fit_table(capsys, monkeypatch, path, with_pandas), reference, samples, features)


@pytest.mark.parametrize("with_pandas", [True, False])
def test_tables_without_a_header_cell_above_the_index(
    data, reference, tmp_path, capsys, monkeypatch, with_pandas
):
    # R's write.table(sep="\t") writes one header cell fewer than the data rows, and quotes
    X, samples, features = data
    path = tmp_path / "from_r.tsv"
    lines = ["\t".join(f'"{f}"' for f in features)]
    lines += [
        "\t".join([f'"{name}"', *(repr(float(v)) for v in row)]) for name, row in zip(samples, X)
    ]
    path.write_text("\n".join(lines) + "\n")
    _check_npz(_fit_table(capsys, monkeypatch, path, with_pandas), reference, samples, features)


def test_h5ad_round_trip_or_a_clear_error(data, reference, tmp_path, capsys, monkeypatch):
    X, samples, features = data
    path = tmp_path / "cells.h5ad"
    try:
        import anndata
    except ImportError:
        anndata = None
    if anndata is not None:
        import pandas as pd

        adata = anndata.AnnData(
            X, obs=pd.DataFrame(index=samples), var=pd.DataFrame(index=features)
        )
        adata.write_h5ad(path)
        status, _, err = _run(capsys, [path, *FAST, "-o", tmp_path / "out.npz"])
        assert status == 0, err
        _check_npz(tmp_path / "out.npz", reference, samples, features)
    else:
        path.write_bytes(b"not read")
    monkeypatch.setitem(sys.modules, "anndata", None)
    status, _, err = _run(capsys, [path, *FAST])
    assert status == 2
    assert "needs the anndata package" in err and "pip install anndata" in err


def test_uncertainty_file_threads_and_csv_output(data, tmp_path, capsys):
    X, samples, features = data
    U = np.maximum(0.2 * X, 0.3)
    np.save(tmp_path / "x.npy", X)
    np.save(tmp_path / "u.npy", U)
    expected = CoGAPS(n_components=2, max_iter=15, random_state=3).fit(X, uncertainty=U)
    status, _, err = _run(
        capsys,
        [
            tmp_path / "x.npy",
            *FAST,
            "--uncertainty",
            tmp_path / "u.npy",
            "--threads",
            "1",
            "-o",
            tmp_path / "res.csv",
        ],
    )
    assert status == 0, err
    import pandas  # a test requirement

    def read(path):
        exact = {} if pandas.__version__ >= "3" else {"float_precision": "round_trip"}
        return pandas.read_csv(path, index_col=0, **exact)

    patterns = read(tmp_path / "res_patterns.csv")
    assert list(patterns.columns) == ["Pattern_1", "Pattern_2"]
    assert list(patterns.index) == [f"sample_{i}" for i in range(X.shape[0])]
    assert_array_equal(patterns.to_numpy(), expected.loadings_)
    assert_array_equal(read(tmp_path / "res_patterns_std.csv").to_numpy(), expected.loadings_std_)
    amplitudes = read(tmp_path / "res_amplitudes.csv")
    assert_array_equal(amplitudes.to_numpy(), expected.components_.T)
    assert_array_equal(
        read(tmp_path / "res_amplitudes_std.csv").to_numpy(), expected.components_std_.T
    )
    trace = read(tmp_path / "res_trace.csv")
    assert_array_equal(trace["chisq"].to_numpy(), expected.objective_history_)
    assert_array_equal(trace[["atoms_W", "atoms_H"]].to_numpy(), expected.n_atoms_history_)
    assert (trace["phase"] == "calibration").sum() == 15 == (trace["phase"] == "sampling").sum()


def test_verbose_prints_progress(data, tmp_path, capsys):
    np.save(tmp_path / "x.npy", data[0])
    status, out, _ = _run(capsys, [tmp_path / "x.npy", *FAST, "-v"])
    assert status == 0
    assert "calibration" in out and "sampling" in out and "nothing written" in out


def _bad_inputs(tmp_path, X):
    np.save(tmp_path / "vector.npy", X[0])
    np.save(tmp_path / "negative.npy", X - 1.0)
    np.save(tmp_path / "x.npy", X)
    np.save(tmp_path / "u_wrong.npy", np.ones((3, 3)))
    (tmp_path / "text.csv").write_text(",a,b\nr1,1.0,oops\nr2,2.0,3.0\n")
    (tmp_path / "data.xlsx").write_text("")
    # an annotation column left in the table: logical values are not data
    (tmp_path / "logical.csv").write_text(",a,treated\nr1,1.0,TRUE\nr2,2.0,FALSE\nr3,3.0,TRUE\n")
    (tmp_path / "empty_cell.csv").write_text(",a,b\nr1,1.0,\nr2,2.0,3.0\n")
    (tmp_path / "tabs.csv").write_text("\ta\tb\nr1\t1.0\t2.0\nr2\t2.0\t3.0\n")
    # genes x samples read with -t: the file's own row and column, not the transpose's
    (tmp_path / "negative.csv").write_text(",s1,s2,s3\ng1,1,2,3\ng2,1,2,-1\ng3,4,5,6\n")
    return [
        (["logical.csv"], "'treated'"),
        (["empty_cell.csv"], "row 'r1', column 'b' of 'empty_cell.csv' is empty or NA"),
        (["tabs.csv"], "must be named .tsv"),
        (["data.xlsx"], "cannot tell the format"),
        (["missing.npy"], "no such file"),
        (["vector.npy"], "a 2-D matrix is needed"),
        (["text.csv"], "oops"),
        (["negative.npy"], "row '1', column '1' of 'negative.npy' is negative"),
        (["negative.csv", "-t"], "row 'g2', column 's3' of 'negative.csv' is negative (-1;"),
        (["x.npy", "--uncertainty", "u_wrong.npy"], "must be written as the input is"),
        (["x.npy", "-o", "out.txt"], "cannot tell the format of the output"),
        (["x.npy", "-o", "no/such/folder/out.npz"], "does not exist"),
        (["--transpose"], "need an INPUT file"),
        (["x.npy", "--uncertainty", "x.npy", "--sparse-optimization"], "cannot be combined"),
    ]


@pytest.mark.parametrize("with_pandas", [True, False])
def test_errors_are_clear(data, tmp_path, capsys, monkeypatch, with_pandas):
    if not with_pandas:
        monkeypatch.setitem(sys.modules, "pandas", None)
    monkeypatch.chdir(tmp_path)
    for argv, message in _bad_inputs(tmp_path, data[0]):
        status, out, err = _run(capsys, [*argv, *FAST])
        assert status == 2, argv
        assert err.startswith("sklearn-cogaps: error:") and message in err, (argv, err)
        assert "chi-square" not in out  # nothing was fitted


def test_double_verbose_shows_the_traceback(tmp_path):
    with pytest.raises(CommandLineError, match="no such file"):
        main([str(tmp_path / "missing.npy"), "-vv"])


def test_bad_option_values_stop_the_parser(capsys):
    with pytest.raises(SystemExit) as info:
        main(["--max-iter", "0"])
    assert info.value.code == 2
    assert "must be a positive int, got '0'" in capsys.readouterr().err


def test_python_dash_m_runs_the_command_line(tmp_path):
    # away from the repository root, whose source folder lacks the compiled modules
    done = subprocess.run(
        [sys.executable, "-m", "sklearn_cogaps", "--help"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert "usage: sklearn-cogaps" in done.stdout and "--n-components" in done.stdout


def test_a_reader_that_stops_early_does_not_stop_the_run(data, tmp_path):
    # sklearn-cogaps IN -o OUT | head -1: the summary is cut short, the results are written
    X, samples, features = data
    table = tmp_path / "X.csv"
    _write_delimited(table, X, samples, features, ",")
    out = tmp_path / "out.npz"
    run = subprocess.Popen(
        [sys.executable, "-m", "sklearn_cogaps", table, "-k", "2", "--max-iter", "300", "-o", out],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=tmp_path,
    )
    run.stdout.readline()
    run.stdout.close()  # as head does after its lines
    err = run.stderr.read().decode()
    assert run.wait(timeout=300) == 0, err
    assert "Broken pipe" not in err and "Exception ignored" not in err
    with np.load(out) as r:
        assert r["patterns"].shape == (X.shape[0], 2)


def test_a_tall_table_gets_a_hint_to_transpose(data, tmp_path, capsys):
    X, samples, features = data
    table = tmp_path / "genes_by_samples.csv"
    tall = np.tile(X[:2].T, (10, 1))  # 250 genes x 2 samples
    genes = np.array([f"gene{j}" for j in range(tall.shape[0])])
    _write_delimited(table, tall, genes, samples[:2], ",")
    status, _, err = _run(capsys, [table, *FAST])
    assert status == 0, err
    assert "250 rows and 2 columns" in err and "add --transpose" in err
    status, _, err = _run(capsys, [table, "--transpose", *FAST])
    assert status == 0 and "add --transpose" not in err


def _interrupt_at(monkeypatch, call):
    """Make the sampler raise KeyboardInterrupt at its `call`-th iteration, as Ctrl-C does."""
    interrupt_cogaps_at(monkeypatch, call)


@pytest.mark.parametrize("suffix", [".npz", ".csv"])
def test_ctrl_c_during_sampling_exits_130_with_partial_results(
    data, tmp_path, capsys, monkeypatch, suffix
):
    np.save(tmp_path / "x.npy", data[0])
    _interrupt_at(monkeypatch, 15 + 6)  # 15 calibration and 5 sampling iterations done
    status, out, err = _run(capsys, [tmp_path / "x.npy", *FAST, "-o", tmp_path / f"r{suffix}"])
    assert status == 130
    # the interruption is said in the command line's words, not as a Python warning
    assert "warning: CoGAPS: interrupted after 20 of 30" in err and "Warning:" not in err
    assert "interrupted; the results are partial" in err
    assert "INTERRUPTED after 15 of 15 calibration and 5 of 15 sampling iterations" in out
    assert "partial results, marked as such" in out
    assert "posterior mean" in out and "mean over the sampling phase" in out
    if suffix == ".npz":
        with np.load(tmp_path / "r.npz") as r:
            assert not bool(r["complete"])
            assert int(r["n_calibration"]) == 15 and int(r["n_sampling"]) == 5
            assert r["chisq_history"].shape == (20,)
    else:
        import pandas

        info = pandas.read_csv(tmp_path / "r_status.csv", index_col=0)["value"]
        assert info["status"] == "partial"
        assert int(info["calibration_iterations"]) == 15 and int(info["sampling_iterations"]) == 5
        trace = pandas.read_csv(tmp_path / "r_trace.csv")
        assert list(trace["phase"].value_counts().sort_index()) == [15, 5]


def test_ctrl_c_does_not_write_partial_results_over_earlier_ones(data, tmp_path, capsys,
                                                                 monkeypatch):  # fmt: skip
    np.save(tmp_path / "x.npy", data[0])
    for suffix, earlier in ((".npz", "r.npz"), (".csv", "r_status.csv")):
        (tmp_path / earlier).write_text("a complete run's")
        _interrupt_at(monkeypatch, 15 + 6)
        status, out, err = _run(capsys, [tmp_path / "x.npy", *FAST, "-o", tmp_path / f"r{suffix}"])
        assert status == 130 and "earlier results, kept" in err
        assert (tmp_path / earlier).read_text() == "a complete run's"
        assert f"r.partial{'_patterns' if suffix == '.csv' else ''}{suffix}" in out
        assert (tmp_path / f"r.partial{'_status' if suffix == '.csv' else ''}{suffix}").exists()
        # a complete run then writes r.npz, and says that the partial results beside it
        # are not its own
        monkeypatch.undo()
        status, _, err = _run(capsys, [tmp_path / "x.npy", *FAST, "-o", tmp_path / f"r{suffix}"])
        shown = "r.partial_*.csv" if suffix == ".csv" else "r.partial.npz"
        assert status == 0 and f"{shown}' beside" in err and "earlier interrupted run" in err


def test_ctrl_c_with_several_chains_writes_the_chains_kept(data, tmp_path, capsys, monkeypatch):
    np.save(tmp_path / "x.npy", data[0])
    _interrupt_at(monkeypatch, 30 + 6)  # the first of 3 chains complete, then Ctrl-C
    argv = [tmp_path / "x.npy", *FAST, "--n-chains", "3", "-o", tmp_path / "r.npz"]
    status, out, err = _run(capsys, argv)
    assert status == 130
    assert "pools the 1 of 3 chains completed" in err and "Run again for the complete" in err
    assert "time       " in out and "for 1 chains of 30 iterations" in out
    assert "interrupted; the results are partial" in err
    assert "chains     1 of 3 (interrupted)" in out
    assert "INTERRUPTED: 1 of 3 chains kept, each after 15 calibration and 15 sampling" in out
    with np.load(tmp_path / "r.npz") as r:
        assert not bool(r["complete"]) and int(r["n_sampling"]) == 15


def test_snapshots_of_several_chains_are_written(data, tmp_path, capsys):
    np.save(tmp_path / "x.npy", data[0])
    argv = [tmp_path / "x.npy", *FAST, "--n-chains", "2", "--n-snapshots", "5"]
    status, out, _ = _run(capsys, [*argv, "-o", tmp_path / "r.npz"])
    assert status == 0
    # the summary names the thresholds the warning reads: 1.01 for the chi-square, the
    # entries' (capped where 5 draws per chain cannot judge them)
    assert "(above 1.01 for the chi-square, 1.150 for the entries: run longer)" in out, out
    with np.load(tmp_path / "r.npz") as r:
        assert int(r["n_chains"]) == 2 and r["converged"].dtype == bool
        assert r["patterns_snapshots"].shape == (10, 12, 2)
        assert r["amplitudes_snapshots"].shape == (10, 2, 25)
        assert list(r["snapshot_chains"]) == [0] * 5 + [1] * 5
        assert r["snapshot_iterations"].max() == 30
        # each chain's own means, which the warnings on disagreeing chains point to
        assert r["chain_patterns"].shape == (2, 12, 2)
        assert r["chain_amplitudes"].shape == (2, 2, 25)
    status, _, _ = _run(capsys, [tmp_path / "x.npy", *FAST, "--n-snapshots", "3", "-o",
                                 tmp_path / "one.npz"])  # fmt: skip
    with np.load(tmp_path / "one.npz") as r:
        assert r["patterns_snapshots"].shape == (3, 12, 2) and "snapshot_chains" not in r
    with pytest.raises(SystemExit):
        main(["--n-snapshots", "-1"])
    assert "must be an integer of at least 0" in capsys.readouterr().err


def test_ctrl_c_during_calibration_claims_no_sampling_mean(data, tmp_path, capsys, monkeypatch):
    np.save(tmp_path / "x.npy", data[0])
    _interrupt_at(monkeypatch, 7)
    status, out, err = _run(capsys, [tmp_path / "x.npy", *FAST, "-o", tmp_path / "r.npz"])
    assert status == 130 and "interrupted after 6 of 30" in err
    assert "mean over the sampling phase" not in out
    assert not any(line.lstrip().startswith("posterior mean") for line in out.splitlines())
    assert "sampling phase never started" in out and "  current state" in out
    assert "INTERRUPTED after 6 of 15 calibration and 0 of 15 sampling" in out
    with np.load(tmp_path / "r.npz") as r:
        assert not bool(r["complete"]) and int(r["n_sampling"]) == 0


def test_a_complete_run_is_marked_complete(data, tmp_path, capsys):
    np.save(tmp_path / "x.npy", data[0])
    status, out, err = _run(capsys, [tmp_path / "x.npy", *FAST, "-o", tmp_path / "r.npz"])
    assert status == 0 and "INTERRUPTED" not in out and "partial" not in out + err
    with np.load(tmp_path / "r.npz") as r:
        assert bool(r["complete"]) and int(r["n_sampling"]) == 15


def test_ctrl_c_before_the_fit_exits_130_and_writes_nothing(tmp_path, capsys, monkeypatch):
    from sklearn_cogaps._cli import _run as _cli

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(_cli, "read_matrix", interrupted)
    np.save(tmp_path / "x.npy", np.ones((4, 3)))
    status, out, err = _run(capsys, [tmp_path / "x.npy", *FAST, "-o", tmp_path / "r.npz"])
    assert status == 130
    assert "interrupted before the fit finished; nothing written" in err
    assert not (tmp_path / "r.npz").exists()


@pytest.fixture
def h5ad_file(data, tmp_path):
    anndata = pytest.importorskip("anndata", reason="the .h5ad tests need anndata")
    import pandas as pd

    X, samples, features = data
    adata = anndata.AnnData(
        sparse.csr_matrix(np.zeros_like(X)),
        obs=pd.DataFrame({"batch": ["a", "b"] * (X.shape[0] // 2)}, index=samples),
        var=pd.DataFrame(index=features),
        layers={"expr": X},
        obsm={"X_other": np.ones((X.shape[0], 2))},
        uns={"note": "kept"},
    )
    path = tmp_path / "cells.h5ad"
    adata.write_h5ad(path)
    return path


def test_h5ad_reads_only_the_layer_and_is_written_into_a_copy(
    data, reference, h5ad_file, tmp_path, capsys, monkeypatch
):
    import anndata
    import anndata.io

    X, samples, features = data
    read = []
    read_elem = anndata.io.read_elem

    def spy(element):
        read.append(element.name)
        return read_elem(element)

    monkeypatch.setattr(anndata.io, "read_elem", spy)
    out = tmp_path / "with_cogaps.h5ad"
    status, stdout, err = _run(
        capsys,
        [h5ad_file, "--layer", "expr", *FAST, "--output-h5ad", out, "-o", tmp_path / "r.npz"],
    )
    assert status == 0, err
    # only the layer and the names are read: not X, obsm, uns or the annotations
    assert read == ["/layers/expr", "/obs/_index", "/var/_index"]
    _check_npz(tmp_path / "r.npz", reference, samples, features)
    monkeypatch.setattr(anndata.io, "read_elem", read_elem)
    result = anndata.read_h5ad(out)
    assert_array_equal(result.obsm["X_cogaps"], reference.loadings_)
    assert_array_equal(result.obsm["X_cogaps_std"], reference.loadings_std_)
    assert_array_equal(result.varm["cogaps_components"], reference.components_.T)
    assert_array_equal(result.varm["cogaps_components_std"], reference.components_std_.T)
    uns = result.uns["cogaps"]
    assert_array_equal(uns["objective_history"], reference.objective_history_)
    assert uns["status"] == "complete" and bool(uns["complete"]) and uns["layer"] == "expr"
    assert uns["params"]["n_components"] == 2 and uns["params"]["max_iter"] == 15
    # everything the input had is still there; the input itself is unchanged
    assert_array_equal(result.layers["expr"], X)
    assert_array_equal(result.obsm["X_other"], 1.0)
    assert result.uns["note"] == "kept" and list(result.obs["batch"][:2]) == ["a", "b"]
    assert list(result.obs_names) == list(samples)
    assert "X_cogaps" not in anndata.read_h5ad(h5ad_file).obsm


def test_h5ad_output_errors(data, h5ad_file, tmp_path, capsys):
    np.save(tmp_path / "x.npy", data[0])
    cases = [
        ([tmp_path / "x.npy", "--output-h5ad", tmp_path / "o.h5ad"], "copy of an .h5ad INPUT"),
        ([h5ad_file, "--transpose", "--output-h5ad", tmp_path / "o.h5ad"], "without --transpose"),
        ([h5ad_file, "--output-h5ad", tmp_path / "o.npz"], "cannot tell the format"),
        ([h5ad_file, "--output-h5ad", h5ad_file], "would overwrite the input"),
        ([h5ad_file, "--layer", "nope"], "has no layer 'nope'"),
        ([tmp_path / "x.npy", "--layer", "expr"], "--layer needs an .h5ad input"),
    ]
    for argv, message in cases:
        status, _, err = _run(capsys, [*argv, *FAST])
        assert status == 2, argv
        assert message in err, (argv, err)


def test_solver_option_reaches_the_estimator(data, tmp_path, capsys):
    np.save(tmp_path / "x.npy", data[0])
    outputs = {}
    for moves in ("cogaps", "reversible"):
        status, _, err = _run(
            capsys, [tmp_path / "x.npy", *FAST, "--solver", moves, "-o", tmp_path / f"{moves}.npz"]
        )
        assert status == 0, err
        outputs[moves] = np.load(tmp_path / f"{moves}.npz")["patterns"]
    expected = (
        CoGAPS(n_components=2, max_iter=15, random_state=3, solver="reversible")
        .fit(data[0])
        .loadings_
    )
    np.testing.assert_allclose(outputs["reversible"], expected)
    assert not np.array_equal(outputs["reversible"], outputs["cogaps"])


@pytest.mark.parametrize("with_pandas", [True, False])
@pytest.mark.parametrize("counts", [False, True])
def test_table_without_an_index_column_is_refused(
    data, tmp_path, capsys, monkeypatch, with_pandas, counts
):
    # to_csv(index=False) or write.csv(row.names=FALSE): the first column is data, not names
    X = data[0]
    values = np.round(3 * X) if counts else X
    path = tmp_path / "no_index.csv"
    lines = [",".join(data[2])]
    lines += [",".join(repr(float(v)) for v in row) for row in values]
    path.write_text("\n".join(lines) + "\n")
    if not with_pandas:
        monkeypatch.setitem(sys.modules, "pandas", None)
    status, _, err = _run(capsys, [path, *FAST])
    assert status == 2
    assert "first column" in err and "looks like data" in err and "row names" in err
    # numbered rows (unique integers) are names
    lines = [",".join(["", *data[2]])]
    lines += [",".join([str(i), *(repr(float(v)) for v in row)]) for i, row in enumerate(values)]
    path.write_text("\n".join(lines) + "\n")
    status, _, err = _run(capsys, [path, *FAST, "-o", tmp_path / "out.npz"])
    assert status == 0, err


@pytest.mark.parametrize("with_pandas", [True, False])
def test_table_without_a_header_row_is_refused(data, tmp_path, capsys, monkeypatch, with_pandas):
    # to_csv(header=False) or numpy's savetxt: the first row is data, not names
    X = data[0]
    path = tmp_path / "no_header.csv"
    rows = [",".join([name, *(repr(float(v)) for v in row)]) for name, row in zip(data[1], X)]
    path.write_text("\n".join(rows) + "\n")
    if not with_pandas:
        monkeypatch.setitem(sys.modules, "pandas", None)
    status, _, err = _run(capsys, [path, *FAST])
    assert status == 2
    assert "first row" in err and "looks like data" in err and "column names" in err, err
    # counts repeat
    path.write_text("cell0,1,0,2,1\ncell1,0,0,3,1\ncell2,2,1,0,0\n")
    status, _, err = _run(capsys, [path, *FAST])
    assert status == 2 and "repeats numbers" in err, err
    # no names at all: numbers above numbers
    path.write_text("0,1,2,5\n3,0,4,6\n7,1,1,2\n8,3,0,1\n")
    status, _, err = _run(capsys, [path, *FAST])
    assert status == 2 and "as does the first column" in err, err
    # an empty column name
    path.write_text(",a,,c\ncell0,1,2,3\ncell1,2,3,4\n")
    status, _, err = _run(capsys, [path, *FAST])
    assert status == 2 and "empty name in column 3" in err, err
    # a second header line (pandas' MultiIndex of columns) is not a row of data
    path.write_text(",a,b,c\n,7157,1956,672\ncell0,1,2,3\ncell1,2,3,4\n")
    status, _, err = _run(capsys, [path, *FAST])
    assert status == 2 and "line 2" in err and "no row name" in err, err
    # names that are numbers: numeric gene ids, time points and replicates after an empty
    # first cell, numbered rows and columns
    ok = tmp_path / "out.npz"
    for header in (
        [str(7157 + j) for j in range(X.shape[1])],
        [repr(0.5 * j) for j in range(X.shape[1])],
        [str(6 * (j // 2)) for j in range(X.shape[1])],
    ):
        path.write_text("\n".join([",".join(["", *header]), *rows]) + "\n")
        status, _, err = _run(capsys, [path, *FAST, "-o", ok])
        assert status == 0, err
    numbered = [",".join(["", *(str(j) for j in range(X.shape[1]))])]
    numbered += [",".join([str(i), *(repr(float(v)) for v in row)]) for i, row in enumerate(X)]
    path.write_text("\n".join(numbered) + "\n")
    status, _, err = _run(capsys, [path, *FAST, "-o", ok])
    assert status == 0, err


def test_uncertainty_file_with_reordered_names_is_refused(data, tmp_path, capsys):
    X, samples, features = data
    U = np.maximum(0.2 * X, 0.3)
    _write_delimited(tmp_path / "x.csv", X, samples, features, ",")
    _write_delimited(tmp_path / "u.csv", U[:, ::-1], samples, features[::-1], ",")
    status, _, err = _run(capsys, [tmp_path / "x.csv", *FAST, "--uncertainty", tmp_path / "u.csv"])
    assert status == 2
    assert "feature names of" in err and "in another order" in err
    _write_delimited(tmp_path / "u.csv", U[::-1], samples[::-1], features, ",")
    status, _, err = _run(capsys, [tmp_path / "x.csv", *FAST, "--uncertainty", tmp_path / "u.csv"])
    assert status == 2 and "sample names of" in err
    # one name of another gene: the message names where the names part, not the first few
    changed = list(features)
    changed[3] = "other"
    _write_delimited(tmp_path / "u.csv", U, samples, changed, ",")
    status, _, err = _run(capsys, [tmp_path / "x.csv", *FAST, "--uncertainty", tmp_path / "u.csv"])
    assert (
        status == 2 and f"first that differs at position 3, 'other' against '{features[3]}'" in err
    )
    # names that share none with the input's: the file of other data
    _write_delimited(tmp_path / "u.csv", U, [f"T{i}" for i in range(len(samples))], features, ",")
    status, _, err = _run(capsys, [tmp_path / "x.csv", *FAST, "--uncertainty", tmp_path / "u.csv"])
    assert status == 2 and "share none with those of" in err
    # written as the input's transpose: said so
    _write_delimited(tmp_path / "u.csv", U.T, features, samples, ",")
    status, _, err = _run(capsys, [tmp_path / "x.csv", *FAST, "--uncertainty", tmp_path / "u.csv"])
    assert status == 2 and "it is the input's transpose" in err
    # in the input's order, or with a numbered index (positions), it is used
    for rows in (samples, [str(i) for i in range(len(samples))]):
        _write_delimited(tmp_path / "u.csv", U, rows, features, ",")
        out = tmp_path / "out.npz"
        status, _, err = _run(
            capsys, [tmp_path / "x.csv", *FAST, "--uncertainty", tmp_path / "u.csv", "-o", out]
        )
        assert status == 0, err
        expected = CoGAPS(n_components=2, max_iter=15, random_state=3).fit(X, uncertainty=U)
        with np.load(out) as r:
            assert_array_equal(r["amplitudes"], expected.components_)


@pytest.mark.parametrize(
    "old, new",
    [
        (["--birth-death", "reversible"], ["--solver", "reversible"]),
        (
            ["--alpha-w", "0.05", "--alpha-h", "0.02"],
            ["--atom-density-w", "0.05", "--atom-density-h", "0.02"],
        ),
    ],
)
def test_former_option_names_still_work(data, tmp_path, capsys, old, new):
    np.save(tmp_path / "x.npy", data[0])
    results = []
    for options in (old, new):
        out = tmp_path / f"{options[0].strip('-')}.npz"
        status, _, err = _run(capsys, [tmp_path / "x.npy", *FAST, *options, "-o", out])
        assert status == 0, err
        results.append(np.load(out)["patterns"])
    np.testing.assert_array_equal(*results)


def test_checkpoint_resumes_an_interrupted_run_to_the_uninterrupted_results(
    data, tmp_path, capsys, monkeypatch
):
    np.save(tmp_path / "x.npy", data[0])
    checkpoint = ["--checkpoint", tmp_path / "run.ckpt", "--checkpoint-every", "4"]
    status, _, _ = _run(capsys, [tmp_path / "x.npy", *FAST, "-o", tmp_path / "ref.npz"])
    assert status == 0
    original = interrupt_cogaps_at(monkeypatch, 15 + 6)
    status, _, err = _run(
        capsys, [tmp_path / "x.npy", *FAST, *checkpoint, "-o", tmp_path / "part.npz"]
    )
    assert status == 130 and (tmp_path / "run.ckpt").exists()
    assert "interrupted after 20 of 30" in err
    monkeypatch.setattr("sklearn_cogaps._cogaps._chain.GibbsSampler", original)
    # the estimator's refusals name the options, not its parameters
    status, _, err = _run(capsys, [tmp_path / "x.npy", *FAST, *checkpoint, "--seed", "4"])
    assert status == 2 and "another --seed than this fit" in err
    assert "(or pass another --checkpoint)" in err and "checkpoint_path" not in err
    status, _, err = _run(capsys, [tmp_path / "x.npy", *FAST, "--checkpoint", tmp_path])
    assert status == 2 and f"error: --checkpoint '{tmp_path}' is a directory" in err
    # a quoted path keeps the parameters' names of its folders (a sweep's max_iter=500)
    folder = tmp_path / "max_iter=500,random_state=3"
    folder.mkdir()
    status, _, err = _run(capsys, [folder / "missing.npy", *FAST])
    assert status == 2 and f"'{folder / 'missing.npy'}'" in err
    status, _, err = _run(capsys, [tmp_path / "x.npy", *FAST, "--checkpoint", folder])
    assert status == 2 and f"error: --checkpoint '{folder}' is a directory" in err
    status, out, _ = _run(
        capsys, [tmp_path / "x.npy", *FAST, *checkpoint, "-o", tmp_path / "r.npz"]
    )
    assert status == 0 and "INTERRUPTED" not in out
    # the time is that of the iterations run after the checkpoint of iteration 20
    assert "s wall for 10 iterations (resumed after iteration 20 of 30;" in out
    assert not (tmp_path / "run.ckpt").exists()
    with np.load(tmp_path / "r.npz") as r, np.load(tmp_path / "ref.npz") as ref:
        assert set(r.files) == set(ref.files)
        for name in ref.files:
            assert_array_equal(r[name], ref[name], err_msg=name)


def test_checkpoint_of_several_chains_resumes_to_the_uninterrupted_results(
    data, tmp_path, capsys, monkeypatch
):
    """--checkpoint with --n-chains: Ctrl-C in the sampling (one round per phase at 15
    iterations) writes nothing and says how to resume; the same command then gives the
    results of the run without a checkpoint."""
    np.save(tmp_path / "x.npy", data[0])
    chains = ["--n-chains", "2"]
    checkpoint = ["--checkpoint", tmp_path / "run.ckpt", "--checkpoint-every", "4"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        status, _, _ = _run(
            capsys, [tmp_path / "x.npy", *FAST, *chains, "-o", tmp_path / "ref.npz"]
        )
        assert status == 0
        original = interrupt_cogaps_at(monkeypatch, 2 * 15 + 5)
        status, _, err = _run(capsys, [tmp_path / "x.npy", *FAST, *chains, *checkpoint, "-o",
                                       tmp_path / "part.npz"])  # fmt: skip
        assert status == 130 and not (tmp_path / "part.npz").exists()
        assert "run the same command again to resume from it" in err
        monkeypatch.setattr("sklearn_cogaps._cogaps._chain.GibbsSampler", original)
        status, out, _ = _run(capsys, [tmp_path / "x.npy", *FAST, *chains, *checkpoint, "-o",
                                       tmp_path / "r.npz"])  # fmt: skip
    assert status == 0 and "INTERRUPTED" not in out
    assert "s wall for 2 chains of 15 iterations (resumed after iteration 15 of 30;" in out
    assert not (tmp_path / "run.ckpt").exists()
    with np.load(tmp_path / "r.npz") as r, np.load(tmp_path / "ref.npz") as ref:
        assert set(r.files) == set(ref.files)
        for name in ref.files:
            assert_array_equal(r[name], ref[name], err_msg=name)


def test_init_and_chains_reach_the_model(capsys, tmp_path):
    """--init nmf and --n-chains 2 give the fit of CoGAPS(init="nmf", n_chains=2), and the
    summary reports the chains' diagnostics."""
    X = make_patterns(n_samples=12, n_features=30, n_components=2, random_state=1)[0]
    np.save(tmp_path / "x.npy", X)
    out = tmp_path / "out.npz"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        status, text, err = _run(capsys, [tmp_path / "x.npy", "-k", 2, "-n", 60, "--init", "nmf",
                                          "--n-chains", 2, "-o", out])  # fmt: skip
        model = CoGAPS(2, max_iter=60, init="nmf", n_chains=2, random_state=0).fit(X)
    assert status == 0, err
    assert "start 'nmf', 2 chains" in text
    assert f"split R-hat of the chi-square {model.rhat_['chisq']:.3f}" in text
    saved = np.load(out)
    assert_array_equal(saved["patterns"], model.loadings_)
    assert_array_equal(saved["rhat_amplitudes"], model.rhat_["components"])
    assert saved["rhat_chisq"] == model.rhat_["chisq"]


def test_convergence_advice_names_the_options(capsys, tmp_path):
    """A fit that has not converged is told to raise -n/--max-iter, the command line's
    option, not the estimator's max_iter."""
    X = make_patterns(n_samples=12, n_features=30, n_components=2, random_state=1)[0]
    np.save(tmp_path / "x.npy", X)
    status, _, err = _run(capsys, [tmp_path / "x.npy", "-k", 2, "-n", 10, "--n-chains", 2])
    assert status == 0, err
    assert "warning: The 2 chains do not agree yet" in err
    assert "Raise -n/--max-iter (now 10)" in err and "max_iter (now" not in err


@pytest.mark.parametrize(
    "r_name, option",
    [("--nIterations", "--max-iter"), ("--nPatterns", "--n-components"),
     ("--nThreads", "--threads"), ("--checkpointInFile", "--checkpoint"),
     ("--snapshotPhase", "--n-snapshots"), ("--outputFrequency", "--verbose"),
     ("--nSets", "n_sets=N"),
     # as options are spelled: a close match would name the other matrix or unit
     ("--alpha-a", "--atom-density-h"), ("--alpha-p", "--atom-density-w"),
     ("--max-gibbs-mass-a", "--max-gibbs-mass-h"), ("--checkpoint-interval", "--checkpoint-every"),
     ("--n-patterns", "-k/--n-components"), ("--niterations", "--max-iter")],
)  # fmt: skip
def test_r_cogaps_names_as_options_say_what_to_write(r_name, option, capsys):
    with pytest.raises(SystemExit):
        main([r_name, "100"])
    err = capsys.readouterr().err
    assert "R CoGAPS's name" in err and option in err


@pytest.mark.parametrize(
    "written, option",
    [("--n_components", "write --n-components"), ("--max_iter", "write --max-iter"),
     ("--n-compnents", "write --n-components"), ("--sede", "write --seed")],
)  # fmt: skip
def test_a_misspelt_option_gets_the_option_meant(written, option, capsys):
    with pytest.raises(SystemExit):
        main(["x.npy", written, "3"])
    err = capsys.readouterr().err
    assert f"unrecognized arguments: {written}" in err and f"({written}: {option})" in err
    # an option far from every one keeps argparse's message alone
    with pytest.raises(SystemExit):
        main(["x.npy", "--frobnicate", "2"])
    assert "unrecognized arguments: --frobnicate 2\n" in capsys.readouterr().err


def test_the_advice_on_counts_is_given_in_the_command_line_s_words(tmp_path, capsys):
    """It said uncertainty='poisson' (Python's), after the frame of Python's runpy."""
    counts = np.random.default_rng(0).poisson(3.0, (20, 12)).astype(np.int64)
    np.save(tmp_path / "x.npy", counts)
    status, out, err = _run(capsys, [tmp_path / "x.npy", *FAST, "-o", tmp_path / "r.npz"])
    assert status == 0
    assert "warning: X holds only whole numbers" in err
    assert "pass --uncertainty poisson" in err and "uncertainty='poisson'" not in err
    assert "UserWarning" not in err


def test_tables_of_other_layouts_say_what_they_look_like(tmp_path, capsys):
    # a spreadsheet's export with semicolons and decimal commas, and a comment line: what
    # pandas says alone does not tell the user what to change
    (tmp_path / "semi.csv").write_text(";S1;S2;S3\nG1;1,5;2;3\nG2;4;5,5;6\n")
    (tmp_path / "hash.csv").write_text("# exported\n,S1,S2\nG1,1,2\nG2,3,4\n")
    status, _, err = _run(capsys, [tmp_path / "semi.csv", *FAST])
    assert status == 2 and "separated by semicolons (decimal commas?)" in err
    status, _, err = _run(capsys, [tmp_path / "hash.csv", *FAST])
    assert status == 2 and "starts with a comment line ('#')" in err
    # integers separated by semicolons read as one column; a header named '#gene' is a
    # header, not a comment line
    (tmp_path / "semi.csv").write_text(";S1;S2\nG1;1;2\nG2;3;4\n")
    status, _, err = _run(capsys, [tmp_path / "semi.csv", *FAST])
    assert status == 2 and "separated by semicolons" in err
    (tmp_path / "hash.csv").write_text("#gene,S1,S2\nG1,1,2\nG2,3,x\n")
    status, _, err = _run(capsys, [tmp_path / "hash.csv", *FAST])
    assert status == 2 and "is not a number: 'x'" in err and "comment" not in err


def test_an_npz_output_is_written_to_the_file_named(data, tmp_path, capsys):
    # numpy adds ".npz" to a name that ends otherwise: R.NPZ was written as R.NPZ.npz
    np.save(tmp_path / "x.npy", data[0])
    status, out, err = _run(capsys, [tmp_path / "x.npy", *FAST, "-o", tmp_path / "R.NPZ"])
    assert status == 0, err
    assert (tmp_path / "R.NPZ").exists() and not (tmp_path / "R.NPZ.npz").exists()
    with np.load(tmp_path / "R.NPZ") as r:
        assert bool(r["complete"])
