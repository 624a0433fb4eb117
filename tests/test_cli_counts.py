"""The count-matrix command line, sklearn-cogaps-counts: prep, train, score and project."""

import shutil
import subprocess
import sys
from pathlib import Path

import joblib
import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal
from scipy import io as sio
from scipy import sparse

from sklearn_cogaps import HierarchicalPMF, WeightedBackgroundPMF
from sklearn_cogaps._cli._counts_run import main

FAST = ["-k", "3", "--max-iter", "20", "--seed", "1"]

# the fits are cut short on purpose
pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")


@pytest.fixture(scope="module")
def counts():
    """60 cells x 40 genes of counts from three factors; the last genes are rarely detected."""
    rng = np.random.default_rng(0)
    X = rng.poisson(rng.gamma(1.0, 1.0, (60, 3)) @ rng.gamma(0.5, 1.0, (3, 40)))
    X[:, -6:] = 0
    for j, n_cells in zip(range(34, 40), (1, 2, 3, 5, 6, 7)):
        X[:n_cells, j] = 1
    ids = np.array([f"ENSG{j:011d}.{j % 4}" for j in range(40)])
    names = np.array([f"GENE{j}" for j in range(40)])
    return X, ids, names


@pytest.fixture(scope="module")
def files(counts, tmp_path_factory):
    X, ids, names = counts
    folder = tmp_path_factory.mktemp("counts")
    sio.mmwrite(folder / "raw.mtx", sparse.coo_matrix(X))
    with open(folder / "features.tsv", "w") as f:
        f.writelines(f"{i}\t{n}\tGene Expression\n" for i, n in zip(ids, names))
    return folder


def _run(capsys, *argv):
    status = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return status, out, err


def _refused(capsys, *argv):
    with pytest.raises(SystemExit) as info:
        main([str(a) for a in argv])
    assert info.value.code == 2
    return capsys.readouterr().err


@pytest.fixture(scope="module")
def trained(files, tmp_path_factory):
    """prep (genes named by features.tsv, a whitelist) then train, once for the module."""
    out = tmp_path_factory.mktemp("trained")
    with open(out / "whitelist.txt", "w") as f:
        f.writelines(f"GENE{j}\n" for j in range(38))  # by name; GENE38 and GENE39 are off
    argv = ["prep", "-i", files / "raw.mtx", "-o", out, "-p", "run", "-m", "0.05"]
    argv += ["--genes", files / "features.tsv", "-w", out / "whitelist.txt"]
    assert main([str(a) for a in argv]) == 0
    argv = ["train", "-i", out / "run.filtered.mtx", "-o", out, "-p", "run", "-t", "2", *FAST]
    assert main([str(a) for a in argv + ["-g", out / "run.genes.txt"]]) == 0
    return out


def test_prep_min_cells_as_fraction_or_count(capsys, counts, files, tmp_path):
    X = counts[0]
    detected = (X > 0).sum(axis=0)
    # scHPF's rule: 0 < m < 1 is round(m * n_cells) cells, otherwise m cells
    for min_cells, threshold in [("0.1", 6), ("0.05", 3), ("5", 5), ("1", 1)]:
        status, out, err = _run(
            capsys, "prep", "-i", files / "raw.mtx", "-o", tmp_path, "-m", min_cells
        )
        assert status == 0, err
        keep = np.flatnonzero(detected >= threshold)
        filtered = sio.mmread(tmp_path / "filtered.mtx")
        assert filtered.dtype.kind == "i"
        assert_array_equal(filtered.toarray(), X[:, keep])
        # without gene names, genes.txt holds the kept columns' numbers
        assert_array_equal(np.loadtxt(tmp_path / "genes.txt", dtype=int), keep)
        assert f"kept {len(keep)} of 40 genes in 60 cells" in out
    assert "integer" in (tmp_path / "filtered.mtx").read_text().splitlines()[0]


def test_prep_gene_lists(capsys, files, tmp_path):
    # scHPF's list format: ids (another version) and names; matched by id without version
    with open(tmp_path / "black.txt", "w") as f:
        f.write("ENSG00000000001.9\tGENE1\nENSG00000000002\tGENE2\n")
    with open(tmp_path / "white.txt", "w") as f:
        f.writelines(f"GENE{j}\n" for j in range(0, 40, 2))
    argv = ["prep", "-i", files / "raw.mtx", "-o", tmp_path, "-m", "0"]
    argv += ["--genes", files / "features.tsv", "-b", tmp_path / "black.txt"]
    status, _, err = _run(capsys, *argv)
    assert status == 0, err
    genes = np.loadtxt(tmp_path / "genes.txt", dtype=str, delimiter="\t")
    assert genes.shape == (38, 3)  # every column of the gene file
    assert not {"GENE1", "GENE2"} & set(genes[:, 1])
    status, _, err = _run(capsys, *argv, "-w", tmp_path / "white.txt")
    assert status == 0, err
    kept = np.loadtxt(tmp_path / "genes.txt", dtype=str, delimiter="\t")[:, 1]
    assert_array_equal(kept, [f"GENE{j}" for j in range(0, 40, 2) if j != 2])
    # the blacklist by name
    status, _, err = _run(capsys, *argv, "--filter-by-gene-name")
    assert status == 0, err


def test_prep_refuses_what_is_not_counts(capsys, counts, tmp_path):
    X = counts[0].astype(float)
    X[4, 7] = 0.5
    sio.mmwrite(tmp_path / "norm.mtx", sparse.coo_matrix(X))
    status, _, err = _run(capsys, "prep", "-i", tmp_path / "norm.mtx", "-o", tmp_path)
    assert status == 2
    assert "fractional values, the first 0.5 in cell 4, gene 7" in err and "raw counts" in err
    X[4, 7] = -1.0
    np.save(tmp_path / "neg.npy", X)
    status, _, err = _run(capsys, "train", "-i", tmp_path / "neg.npy", "-o", tmp_path, "-k", "2")
    assert status == 2 and "negative" in err
    assert not (tmp_path / "filtered.mtx").exists()


@pytest.mark.parametrize("name", ["empty.mtx", "garbage.mtx", "garbage.mtx.gz"])
def test_a_file_that_is_not_matrix_market_gets_one_message(capsys, tmp_path, monkeypatch, name):
    """scipy's reader of a text file left a bytes wrapper whose clean-up printed "Exception
    ignored in ... I/O operation on closed file" after the error."""
    import gc
    import gzip

    raw = b"" if name.startswith("empty") else b"garbage\n"
    opener = gzip.open if name.endswith(".gz") else open
    with opener(tmp_path / name, "wb") as f:
        f.write(raw)
    unraisable = []
    monkeypatch.setattr(sys, "unraisablehook", unraisable.append)
    status, _, err = _run(capsys, "prep", "-i", tmp_path / name, "-o", tmp_path / "out")
    gc.collect()
    assert status == 2 and "error:" in err and not unraisable


@pytest.mark.parametrize("suffix", [".txt", ".txt.bz2"])
def test_prep_reads_schpf_txt(capsys, counts, tmp_path, suffix):
    import bz2

    X, ids, names = counts
    lines = [" ".join([ids[j], names[j], *map(str, X[:, j])]) + "\n" for j in range(X.shape[1])]
    text = "".join(lines).encode()
    (tmp_path / f"umis{suffix}").write_bytes(bz2.compress(text) if suffix.endswith("2") else text)
    status, out, err = _run(capsys, "prep", "-i", tmp_path / f"umis{suffix}", "-m", "0")
    assert status == 0, err
    assert "60 cells x 40 genes" in out
    assert_array_equal(sio.mmread(tmp_path / "filtered.mtx").toarray(), X)
    genes = np.loadtxt(tmp_path / "genes.txt", dtype=str, delimiter="\t")
    assert_array_equal(genes, np.column_stack([ids, names]))


def test_schpf_txt_content_under_another_name_says_to_name_it_txt(capsys, counts, tmp_path):
    X, ids, names = counts
    for name in ("umis.tsv", "umis.dat"):
        with open(tmp_path / name, "w") as f:
            for j in range(X.shape[1]):
                f.write("\t".join([ids[j], names[j], *map(str, X[:, j])]) + "\n")
        status, out, err = _run(capsys, "prep", "-i", tmp_path / name, "-m", "0")
        assert status != 0
        assert "scHPF's count format" in err and ".txt" in err, err


def test_train_writes_the_fitted_estimator(capsys, trained):
    model = joblib.load(trained / "run.model.joblib")
    assert isinstance(model, HierarchicalPMF)
    assert (model.n_components, model.n_init, model.random_state) == (3, 2, 1)
    genes = np.loadtxt(trained / "run.genes.txt", dtype=str, delimiter="\t")
    assert_array_equal(model.feature_names_in_, genes[:, 0])
    X = sio.mmread(trained / "run.filtered.mtx").tocsr()
    again = HierarchicalPMF(n_components=3, n_init=2, max_iter=20, random_state=1).fit(X)
    assert_allclose(model.components_, again.components_)


def test_train_passes_the_solver_and_refuses_one_of_the_other_model(capsys, trained, tmp_path):
    X = sio.mmread(trained / "run.filtered.mtx").tocsr()
    argv = ["train", "-i", trained / "run.filtered.mtx", "-o", tmp_path, "-p", "w", *FAST]
    status, _, err = _run(capsys, *argv, "--model", "wbpmf", "--solver", "simultaneous")
    assert status == 0, err
    model = joblib.load(tmp_path / "w.model.joblib")
    assert isinstance(model, WeightedBackgroundPMF) and model.solver == "simultaneous"
    again = WeightedBackgroundPMF(3, solver="simultaneous", max_iter=20, random_state=1).fit(X)
    assert_array_equal(model.components_, again.components_)
    # a solver of the other model is refused before the counts are read
    argv[2] = tmp_path / "absent.mtx"
    status, _, err = _run(capsys, *argv, "--model", "wbpmf", "--solver", "newton")
    assert status == 2
    assert "--solver newton is not a solver of --model wbpmf" in err
    assert "(it is a solver of --model hpmf)" in err
    assert "sequential or simultaneous" in err and "absent" not in err


def test_score_writes_the_methods_results(capsys, trained, tmp_path):
    model = joblib.load(trained / "run.model.joblib")
    argv = ["score", "-m", trained / "run.model.joblib", "-o", tmp_path, "-p", "s", "-n", "5"]
    status, out, err = _run(capsys, *argv, "-g", trained / "run.genes.txt")
    assert status == 0, err
    cell_score = np.loadtxt(tmp_path / "s.cell_score.txt", delimiter="\t")
    gene_score = np.loadtxt(tmp_path / "s.gene_score.txt", delimiter="\t")
    assert_array_equal(cell_score, model.loading_scores())
    assert_array_equal(gene_score, model.component_scores().T)
    ranked = np.loadtxt(tmp_path / "s.ranked_genes.txt", dtype=str, delimiter="\t")
    names = np.loadtxt(trained / "run.genes.txt", dtype=str, delimiter="\t")[:, 1]
    assert ranked.shape == (5, 3)
    for k in range(3):
        assert_array_equal(ranked[:, k], names[np.argsort(-gene_score[:, k], kind="stable")[:5]])
    # without -g: the model's feature_names_in_; and the default folder is named as MODEL
    status, _, err = _run(capsys, "score", "-m", trained / "run.model.joblib")
    assert status == 0, err
    ranked = np.loadtxt(trained / "run.model" / "ranked_genes.txt", dtype=str, delimiter="\t")
    assert ranked.shape == (len(names), 3) and ranked[0, 0].startswith("ENSG")


def test_project_selects_the_trained_genes_by_name(capsys, counts, files, trained, tmp_path):
    X = counts[0]
    model = joblib.load(trained / "run.model.joblib")
    argv = ["project", "-m", trained / "run.model.joblib", "-o", tmp_path, "-p", "new"]
    argv += ["-i", files / "raw.mtx", "--input-genes", files / "features.tsv"]
    status, out, err = _run(capsys, *argv)
    assert status == 0, err
    columns = [int(g[4:15]) for g in model.feature_names_in_]  # ENSG<number>.<version>
    X_new = sparse.csr_matrix(X[:, columns].astype(float))
    with pytest.warns(UserWarning, match="feature names"):
        expected = model.loading_scores(X_new), model.transform(X_new)
    assert_array_equal(np.loadtxt(tmp_path / "new.projected.cell_score.txt"), expected[0])
    assert_array_equal(np.loadtxt(tmp_path / "new.projected.loadings.txt"), expected[1])
    # a gene of the model missing from INPUT's names
    with open(tmp_path / "short.tsv", "w") as f:
        f.writelines(f"OTHER{j}\n" for j in range(X.shape[1]))
    status, _, err = _run(capsys, *argv[:-1], tmp_path / "short.tsv")
    assert status == 2 and "not in" in err and "--input-genes" in err
    # INPUT named by symbol, without three of the trained genes: the message counts those
    # three by the model's names that INPUT uses, not every gene by the model's ids
    keep = [j for j in range(X.shape[1]) if j not in (5, 6, 7)]
    sio.mmwrite(tmp_path / "fewer.mtx", sparse.coo_matrix(X[:, keep]))
    with open(tmp_path / "fewer.tsv", "w") as f:
        f.writelines(f"GENE{j}\n" for j in keep)
    fewer = ["-i", tmp_path / "fewer.mtx", "--input-genes", tmp_path / "fewer.tsv"]
    status, _, err = _run(capsys, *argv[:-4], *fewer, "-g", trained / "run.genes.txt")
    assert status == 2, err
    assert f"3 of the model's {model.n_features_in_} genes" in err, err
    assert "['GENE5', 'GENE6', 'GENE7']" in err, err
    # no names to match, another width
    status, _, err = _run(capsys, *argv[:-2])
    assert status == 2 and "cannot be matched by name" in err
    # two genes of the input under one name (gene symbols repeat in 10x's features.tsv):
    # refused, not matched to the first of them
    with open(tmp_path / "repeated.tsv", "w") as f:  # GENE39 (not trained) named GENE5
        f.writelines(f"GENE{j if j < X.shape[1] - 1 else 5}\n" for j in range(X.shape[1]))
    genes = ["-g", trained / "run.genes.txt"]  # the model's ids and names
    status, _, err = _run(capsys, *argv[:-1], tmp_path / "repeated.tsv", *genes)
    assert status == 2 and "shared by several genes" in err, err


def test_wbpmf(capsys, trained, tmp_path):
    argv = ["train", "-i", trained / "run.filtered.mtx", "-o", tmp_path, "--model", "wbpmf"]
    status, out, err = _run(capsys, *argv, "-k", "2", "--max-iter", "5")
    assert status == 0, err
    assert "WeightedBackgroundPMF" in out and "ELBO" in out
    model = joblib.load(tmp_path / "model.joblib")
    assert isinstance(model, WeightedBackgroundPMF)
    status, _, err = _run(capsys, "score", "-m", tmp_path / "model.joblib", "-o", tmp_path)
    assert status == 0, err
    assert_array_equal(np.loadtxt(tmp_path / "cell_score.txt"), model.loading_scores())
    ranked = np.loadtxt(tmp_path / "ranked_genes.txt", dtype=int)  # no names: numbers
    assert sorted(ranked[:, 0]) == list(range(model.n_features_in_))


def test_h5ad_names(capsys, counts, tmp_path):
    anndata = pytest.importorskip("anndata")
    X, _, names = counts
    cells = [f"cell{i}" for i in range(X.shape[0])]
    adata = anndata.AnnData(sparse.csr_matrix(X.astype(np.float32)))
    adata.obs_names, adata.var_names = cells, names
    adata.write_h5ad(tmp_path / "cells.h5ad")
    status, _, err = _run(capsys, "prep", "-i", tmp_path / "cells.h5ad", "-m", "0.1")
    assert status == 0, err
    assert (tmp_path / "cells.txt").read_text().split() == cells
    genes = (tmp_path / "genes.txt").read_text().split()
    argv = ["train", "-i", tmp_path / "filtered.mtx", "-g", tmp_path / "genes.txt", *FAST]
    assert _run(capsys, *argv)[0] == 0
    model = joblib.load(tmp_path / "model.joblib")
    # new cells with the genes in another order, and more of them
    order = np.random.default_rng(1).permutation(X.shape[1])
    shuffled = adata[:20, order].copy()
    shuffled.write_h5ad(tmp_path / "new.h5ad")
    argv = ["project", "-m", tmp_path / "model.joblib", "-i", tmp_path / "new.h5ad"]
    status, out, err = _run(capsys, *argv)
    assert status == 0, err
    X_new = adata[:20, genes].X
    with pytest.warns(UserWarning, match="feature names"):
        expected = model.transform(X_new)
    assert_allclose(np.loadtxt(tmp_path / "projected.loadings.txt"), expected)
    assert (tmp_path / "projected.cells.txt").read_text().split() == cells[:20]


@pytest.mark.parametrize(
    "argv, message",
    [
        (["train", "-i", "x.mtx", "-k", "3", "-e", "0.01"], "write --tol T"),
        (["train", "-i", "x.mtx", "-k", "3", "--batchsize", "100"], "drop it"),
        (["train", "-i", "x.mtx", "-k", "3", "-v", "val.mtx"], "-v/--validation-cells"),
        (["train-pool", "-i", "x.mtx", "-k", "3"], "--n-init N"),
        (["prep-like", "-i", "x.txt", "-r", "genes.txt"], "project selects"),
        (["prep", "-i", "x.mtx", "-nvc", "100"], "sets no cells aside"),
        (["train", "-i", "x.mtx", "-k", "3", "-nvc", "100"], "no set of validation cells"),
        (["project", "-m", "m.joblib", "-i", "x.mtx", "--recalc-bp"], "trained model's"),
    ],
)
def test_schpf_options_without_equivalent(capsys, argv, message):
    err = _refused(capsys, *argv)
    assert message in err


def test_schpf_aliases(capsys, trained, tmp_path):
    argv = ["train", "-i", trained / "run.filtered.mtx", "-o", tmp_path, "--quiet"]
    argv += ["--nfactors", "2", "--ntrials", "1", "-M", "3"]
    status, out, err = _run(capsys, *argv)
    assert status == 0, err
    model = joblib.load(tmp_path / "model.joblib")
    assert (model.n_components, model.n_init, model.max_iter, model.n_iter_) == (2, 1, 3, 3)


@pytest.mark.parametrize("command", ["prep", "train", "score", "project"])
def test_help_names_the_outputs(capsys, command):
    with pytest.raises(SystemExit) as info:
        main([command, "-h"])
    assert info.value.code == 0
    out = capsys.readouterr().out
    expected = {
        "prep": ["PREFIX.filtered.mtx", "PREFIX.genes.txt", "--min-cells"],
        "train": ["PREFIX.model.joblib", "pickle", "trusted"],
        "score": ["PREFIX.cell_score.txt", "PREFIX.gene_score.txt", "PREFIX.ranked_genes.txt"],
        "project": ["PREFIX.projected.cell_score.txt", "PREFIX.projected.loadings.txt"],
    }[command]
    for text in expected:
        assert text in out


def test_console_script(files, tmp_path):
    script = Path(sys.executable).parent / "sklearn-cogaps-counts"
    found = script if script.exists() else shutil.which("sklearn-cogaps-counts")
    command = [str(found)] if found else [sys.executable, "-m", "sklearn_cogaps._cli._counts_run"]
    done = subprocess.run(
        [*command, "prep", "-i", str(files / "raw.mtx"), "-o", str(tmp_path), "-p", "x"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "written:" in done.stdout
    assert sio.mmread(tmp_path / "x.filtered.mtx").shape[0] == 60
    done = subprocess.run([*command, "score"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "-m/--model" in done.stderr


def test_train_checks_its_options_and_speaks_in_them(capsys, trained, tmp_path):
    argv = ["train", "-i", trained / "run.filtered.mtx", "-o", tmp_path, "--max-iter", "5"]
    status, _, err = _run(capsys, *argv, "-k", "3", "-p", "a/b")
    assert status == 2 and "-o/--outdir" in err and not list(tmp_path.iterdir())
    status, _, err = _run(capsys, *argv, "-k", "70")
    assert status == 0 and "at most 35 can differ" in err
    # the estimator's ConvergenceWarning, in the options of the command line
    assert "raise -M/--max-iter" in err and "max_iter=" not in err


def test_gene_files_that_name_other_genes_are_refused(capsys, counts, files, trained, tmp_path):
    # the model keeps its genes' names: another run's genes.txt, or this one shuffled,
    # would label its scores and select project's genes wrongly
    lines = (trained / "run.genes.txt").read_text().splitlines()
    shifted = tmp_path / "shifted.txt"
    shifted.write_text("\n".join(lines[1:] + lines[:1]) + "\n")
    model = trained / "run.model.joblib"
    status, _, err = _run(capsys, "score", "-m", model, "-g", shifted, "-o", tmp_path)
    assert status == 2 and "not name the model's genes in their order: its gene 1 is" in err
    argv = ["project", "-m", model, "-g", shifted, "-i", files / "raw.mtx", "-o", tmp_path]
    status, _, err = _run(capsys, *argv, "--input-genes", files / "features.tsv")
    assert status == 2 and "in their order" in err
    status, _, err = _run(capsys, "score", "-m", model, "-g", trained / "run.genes.txt",
                          "-o", tmp_path)  # fmt: skip
    assert status == 0, err
    # --genes replaces an input's own names by others (ids for symbols), not by its own
    # names in another order
    X, _, names = counts
    pd = pytest.importorskip("pandas")
    pd.DataFrame(X, columns=names).to_csv(tmp_path / "named.csv")
    reordered = tmp_path / "reordered.txt"
    reordered.write_text("\n".join(names[::-1]) + "\n")
    argv = ["prep", "-i", tmp_path / "named.csv", "-o", tmp_path / "p", "-m", "0"]
    status, _, err = _run(capsys, *argv, "--genes", reordered)
    assert status == 2 and "in their order: its gene 1 is 'GENE39', which is gene 40" in err
    status, _, err = _run(capsys, *argv, "--genes", files / "features.tsv")  # ids and names
    assert status == 0, err
    # 10x's names beside var_names made unique (GENE4, GENE4-1): the names that repeat say
    # nothing, the others are in place
    unique = list(names)
    unique[5] = f"{names[4]}-1"
    pd.DataFrame(X, columns=unique).to_csv(tmp_path / "unique.csv")
    features = tmp_path / "features.tsv"
    features.write_text("".join(f"ENSG{j}\t{names[4] if j == 5 else n}\tGene Expression\n"
                                for j, n in enumerate(names)))  # fmt: skip
    argv = ["prep", "-i", tmp_path / "unique.csv", "-o", tmp_path / "q", "-m", "0"]
    status, _, err = _run(capsys, *argv, "--genes", features)
    assert status == 0, err
    # a table whose columns are numbered (pandas' header for a matrix) has no names
    pd.DataFrame(X).to_csv(tmp_path / "numbered.csv")
    argv = ["prep", "-i", tmp_path / "numbered.csv", "-o", tmp_path / "r", "-m", "0"]
    status, _, err = _run(capsys, *argv, "--genes", reordered)
    assert status == 0, err


def test_prep_does_not_write_over_its_input(capsys, files, tmp_path):
    shutil.copy(files / "raw.mtx", tmp_path / "filtered.mtx")
    before = (tmp_path / "filtered.mtx").read_bytes()
    status, _, err = _run(capsys, "prep", "-i", tmp_path / "filtered.mtx", "-m", "1")
    assert status == 2 and "over its input" in err
    assert (tmp_path / "filtered.mtx").read_bytes() == before


def test_an_interrupted_train_writes_no_model(capsys, files, tmp_path, monkeypatch):
    import warnings

    from sklearn_cogaps._utils._progress import FitInterruptedWarning

    def interrupted(self, X, y=None, **kwargs):  # Ctrl-C after 7 iterations, as fit ends
        self.n_iter_ = 7
        warnings.warn("stopped", FitInterruptedWarning, stacklevel=2)
        return self

    monkeypatch.setattr(HierarchicalPMF, "fit", interrupted)
    status, _, err = _run(capsys, "train", "-i", files / "raw.mtx", "-o", tmp_path, *FAST)
    assert status == 130 and "before it ended; no model written" in err
    assert not list(tmp_path.glob("*.joblib"))


@pytest.mark.parametrize(
    "argv, hint",
    [(["train", "-i", "x.mtx", "-k", "3", "--max_iter", "3"], "(--max_iter: write --max-iter)"),
     (["train", "-i", "x.mtx", "-k", "3", "--maxiter", "3"], "(--maxiter: write --max-iter)"),
     (["prep", "-i", "x.mtx", "--min_cells", "3"], "(--min_cells: write --min-cells)"),
     (["score", "-m", "m.joblib", "--n_top", "3"], "(--n_top: write --n-top)")],
)  # fmt: skip
def test_a_misspelt_option_of_a_command_gets_the_option_meant(capsys, argv, hint):
    # refused by the command's parser, which knows its options and names the command
    with pytest.raises(SystemExit):
        main(argv)
    err = capsys.readouterr().err
    assert f"sklearn-cogaps-counts {argv[0]}: error: unrecognized arguments" in err
    assert hint in err
