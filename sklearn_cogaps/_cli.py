"""The command line of sklearn_cogaps: ``sklearn-cogaps`` and ``python -m sklearn_cogaps``.

Without an input file it runs the built-in example: CoGAPS on data simulated by
:func:`sklearn_cogaps.datasets.make_patterns`, and prints each true pattern beside the fitted
pattern matched to it, the chi-square, the atom counts and the time. With an input file it
fits the user's matrix and writes the posterior means and standard deviations of both factor
matrices and the chain's traces to a file that numpy or pandas read directly.
"""

import argparse
import csv
import math
import sys
import time
from pathlib import Path

import numpy as np
from scipy import sparse

from ._base import label_mismatch

__all__ = ["main", "read_matrix", "write_results"]

INPUT_FORMATS = ".npy, .csv, .tsv, .mtx (or .mtx.gz), .h5ad"
OUTPUT_FORMATS = ".npz, .csv, .tsv"
# The named uncertainties of CoGAPS.fit, as --uncertainty takes them.
_NAMED_UNCERTAINTIES = {
    "relative": "0.1 for zeros, max(0.1 * x, 0.1) otherwise",
    "poisson": "max(sqrt(x), 1) (counts)",
}

DESCRIPTION = """\
Bayesian non-negative matrix factorisation with CoGAPS (atomic-domain Gibbs sampling).

Without INPUT, runs the built-in example: simulated data with known patterns
(sklearn_cogaps.datasets.make_patterns), fitted and compared with the truth.

With INPUT (samples x features; use --transpose for a genes x samples file as CoGAPS
reads and writes them), fits X ~ W H and, with --output, writes the results.
"""

EPILOG = f"""\
input formats: {INPUT_FORMATS}
  .csv/.tsv files have a header row (feature names) and an index column (sample names);
  .h5ad files (AnnData, cells x genes) need the anndata package.
  --uncertainty FILE has the same format, orientation and shape as INPUT;
  --uncertainty poisson uses max(sqrt(x), 1), for raw counts (write ./poisson for a
  file of that name), and --uncertainty relative CoGAPS's default max(0.1 * x, 0.1).
  Sparse inputs (.mtx, .h5ad with a sparse X) are fitted with the sparse-data
  model (--sparse-optimization), or densely when --uncertainty is a FILE.

output formats: {OUTPUT_FORMATS}
  OUT.npz holds the arrays patterns (samples x K, columns of maximum at most 1),
  patterns_std, amplitudes (K x features, components_), amplitudes_std,
  chisq_history, n_atoms_history (iterations x 2: atoms of W and of H), chisq
  (of the posterior mean), lambda (the prior rates of W and H), pattern_names,
  complete (False when the chain was interrupted), n_calibration and n_sampling
  (iterations run in each phase), and sample_names / feature_names when the
  input has them:
      r = numpy.load("OUT.npz"); r["patterns"]
  OUT.csv (or OUT.tsv) writes six tables with the common prefix OUT:
  OUT_patterns.csv and OUT_patterns_std.csv (one row per sample),
  OUT_amplitudes.csv and OUT_amplitudes_std.csv (one row per feature, as
  CoGAPS's Amean and Asd), OUT_trace.csv (one row per iteration: phase,
  chi-square, atoms of W and of H) and OUT_status.csv (complete or partial,
  the iterations of each phase, the chi-square); read them with
      pandas.read_csv("OUT_patterns.csv", index_col=0)
  --output-h5ad OUT.h5ad (with an .h5ad INPUT) copies INPUT and adds
  obsm['X_cogaps'] and obsm['X_cogaps_std'] (cells x K), varm['cogaps_components']
  and varm['cogaps_components_std'] (genes x K) and uns['cogaps'] (parameters,
  chi-square trace, status). Of INPUT only X (or --layer) and the names are read.

after Ctrl-C: a chain stopped early keeps the iterations done; its results are
  printed and written marked partial (complete = False in OUT.npz, status
  "partial" in OUT_status.csv and uns['cogaps']), and the exit status is 130.
"""


class CommandLineError(ValueError):
    """A problem with the command line's input, reported without a traceback."""


# ---------------------------------------------------------------------------------------
# Reading


def _kind(path, formats, what):
    name = Path(path).name.lower()
    for suffix in formats:
        if name.endswith(suffix):
            return suffix
    raise CommandLineError(
        f"cannot tell the format of {what} '{path}' from its name; use one of {', '.join(formats)}."
    )


def _read_delimited(path, sep):
    """A table with a header row and an index column: values, row names, column names."""
    try:
        import pandas as pd
    except ImportError:
        return _read_delimited_numpy(path, sep)
    # exact decimal-to-binary conversion: the default from pandas 3 on (where the option
    # is deprecated), an option before
    exact = {} if int(pd.__version__.split(".")[0]) >= 3 else {"float_precision": "round_trip"}
    try:
        frame = pd.read_csv(path, sep=sep, index_col=0, **exact)
    except (ValueError, pd.errors.ParserError) as error:
        raise CommandLineError(
            f"'{path}' cannot be read as a table separated by {_SEPARATORS[sep]}: {error}"
        ) from None
    # the row names as written: the index column read as text, so that "0101" stays "0101"
    # and "NA" stays "NA" (an index parsed with the values would lose both)
    frame.index = pd.read_csv(
        path, sep=sep, usecols=[0], header=None, skiprows=1, dtype=str, keep_default_na=False
    ).iloc[:, 0].to_numpy()
    # the column names as written too (pandas renames a repeated name "g0" to "g0.1")
    header = pd.read_csv(
        path, sep=sep, header=None, nrows=1, dtype=str, keep_default_na=False
    ).iloc[0].tolist()
    frame.columns = header[len(header) - frame.shape[1]:]
    logical = [j for j, dtype in enumerate(frame.dtypes) if pd.api.types.is_bool_dtype(dtype)]
    if logical:
        j = logical[0]
        raise CommandLineError(
            f"column '{frame.columns[j]}' of '{path}' holds logical values ({frame.iat[0, j]!r}), "
            "not numbers; every column after the index column must hold numbers (remove "
            "annotation columns, or write them as 0 and 1 if they are data)."
        )
    try:
        values = frame.to_numpy(dtype=np.float64)
    except (ValueError, TypeError):
        numeric = frame.apply(pd.to_numeric, errors="coerce")
        bad = np.argwhere(numeric.isna().to_numpy() & frame.notna().to_numpy())
        if not len(bad):
            raise CommandLineError(f"'{path}' does not hold a numeric table.") from None
        i, j = bad[0]
        raise CommandLineError(
            f"row '{frame.index[i]}', column '{frame.columns[j]}' of '{path}' is not a number: "
            f"{frame.iat[i, j]!r}; every column after the index column must hold numbers "
            "(the first row is the header)."
        ) from None
    rows = _names(frame.index)
    _check_row_names(rows, path)
    return values, rows, _names(frame.columns)


_SEPARATORS = {",": "commas (.csv)", "\t": "tabs (.tsv)"}


def _check_table(X, rows, cols, path, sep):
    """Refuse a table read with the wrong separator (no data columns) or with missing
    values, saying where and what to do."""
    if X.shape[1] == 0:
        raise CommandLineError(
            f"'{path}' has no column after its index column when read as separated by "
            f"{_SEPARATORS[sep]}; a table separated by tabs must be named .tsv, one by commas "
            ".csv (other separators and decimal commas are not read)."
        )
    missing = np.argwhere(np.isnan(X))
    if len(missing):
        i, j = missing[0]
        raise CommandLineError(
            f"row '{rows[i]}', column '{cols[j]}' of '{path}' is empty or NA ({len(missing)} "
            "such cells): CoGAPS has no model of missing values; fill them (with 0 for "
            "undetected counts) or drop their rows or columns."
        )


def _read_delimited_numpy(path, sep):
    """The same without pandas, with the csv module (empty cells and NA read as NaN)."""
    with open(path, newline="") as f:
        rows = [row for row in csv.reader(f, delimiter=sep) if row]
    if len(rows) < 2:
        raise CommandLineError(
            f"'{path}' must have a header row and at least one data row; it has {len(rows)} row(s)."
        )
    header, body = rows[0], rows[1:]
    if len(header) == len(body[0]) - 1:  # R's write.table: no header cell above the index
        header = ["", *header]
    n_cols = len(header) - 1
    values = np.empty((len(body), n_cols))
    for i, row in enumerate(body):
        if len(row) - 1 != n_cols:
            raise CommandLineError(
                f"line {i + 2} of '{path}' has {len(row) - 1} values after its index; the "
                f"header names {n_cols} columns."
            )
        for j, cell in enumerate(row[1:]):
            cell = cell.strip()
            try:
                values[i, j] = np.nan if cell in ("", "NA", "NaN", "nan") else float(cell)
            except ValueError:
                raise CommandLineError(
                    f"row '{row[0]}', column '{header[j + 1]}' of '{path}' is not a number: "
                    f"{cell!r}; every column after the index column must hold numbers "
                    "(the first row is the header)."
                ) from None
    rows = np.array([row[0] for row in body], dtype=str)
    _check_row_names(rows, path)
    return values, rows, np.array(header[1:], dtype=str)


def _check_row_names(rows, path):
    """Refuse a first column that holds data rather than row names.

    A table written without its index (pandas' ``to_csv(index=False)``, R's
    ``write.csv(row.names=FALSE)``) would otherwise lose its first data column, read as the
    row names. A column of numbers is taken for data when some are fractional or when they
    repeat (numbered rows are unique integers); names that are not all numbers pass.
    """
    numbers = []
    for name in rows:
        try:
            numbers.append(float(name))
        except ValueError:
            return
    numbers = np.asarray(numbers)
    finite = numbers[np.isfinite(numbers)]
    fractional = finite[finite != np.round(finite)]
    unique, counts = np.unique(numbers, return_counts=True)
    repeated = unique[counts > 1]
    if not len(fractional) and not len(repeated):
        return
    found = (
        f"holds fractional numbers ({', '.join(map(repr, fractional[:3].tolist()))}, ...)"
        if len(fractional)
        else f"repeats numbers ({', '.join(map(repr, repeated[:3].tolist()))}, ...)"
    )
    raise CommandLineError(
        f"the first column of '{path}' is read as the row names, but it {found}: it looks "
        "like data, which would be dropped. Give the table a first column of unique row "
        "names (pandas: df.to_csv(path) with its index; R: write.csv(x, path) with "
        "row.names), or save the matrix as .npy."
    )


def _names(index):
    return np.array([str(v) for v in index], dtype=str)


def _import_anndata(path):
    try:
        import anndata
    except ImportError:
        raise CommandLineError(
            f"reading '{path}' needs the anndata package, which is not installed: "
            "pip install anndata (or pip install 'sklearn_cogaps[anndata]'), or save "
            "the matrix as .npy, .csv or .mtx."
        ) from None
    return anndata


def _read_h5ad(path, layer=None):
    """``X`` (or a layer) and the cell and gene names of an .h5ad file, read element by
    element with anndata's reader: nothing else of the file (other layers, obsm, uns, the
    annotation columns) is loaded."""
    _import_anndata(path)
    import h5py

    try:
        from anndata.io import read_elem
    except ImportError:  # anndata < 0.11
        from anndata.experimental import read_elem

    def index(group):
        return _names(read_elem(group[group.attrs["_index"]]))

    with h5py.File(path, "r") as f:
        if layer is None:
            if "X" not in f:
                raise CommandLineError(f"'{path}' has no X; name a layer with --layer.")
            element = f["X"]
        else:
            layers = f.get("layers", {})
            if layer not in layers:
                raise CommandLineError(
                    f"'{path}' has no layer {layer!r}; its layers are {sorted(layers.keys())}."
                )
            element = layers[layer]
        X = read_elem(element)
        if sparse.issparse(X):
            X = sparse.csr_matrix(X)
        return X, index(f["obs"]), index(f["var"])


def read_matrix(path, transpose=False, layer=None):
    """Read a data matrix and the names of its rows and columns.

    Parameters
    ----------
    path : str or path-like
        A ``.npy`` array, a ``.csv``/``.tsv`` table with a header row and an index column
        (read with pandas when it is installed, else with the csv module), a MatrixMarket
        ``.mtx`` or ``.mtx.gz`` file, or an AnnData ``.h5ad`` file (needs anndata).
    transpose : bool, default=False
        The file is genes × samples as CoGAPS writes it: return its transpose.
    layer : str, default=None
        For an ``.h5ad`` file, the layer to read instead of ``X``.

    Returns
    -------
    X : ndarray or sparse matrix of shape (n_samples, n_features)
        The matrix, samples in rows.
    sample_names : ndarray of str of shape (n_samples,) or None
        Row names, when the format has them.
    feature_names : ndarray of str of shape (n_features,) or None
        Column names, when the format has them.
    """
    kind = _kind(path, (".npy", ".csv", ".tsv", ".mtx", ".mtx.gz", ".h5ad"), "the file")
    if not Path(path).is_file():
        raise CommandLineError(f"no such file: '{path}'.")
    if layer is not None and kind != ".h5ad":
        raise CommandLineError(f"--layer needs an .h5ad input; got '{path}'.")
    rows = cols = None
    if kind == ".npy":
        X = np.load(path, allow_pickle=False)
    elif kind in (".csv", ".tsv"):
        sep = "," if kind == ".csv" else "\t"
        X, rows, cols = _read_delimited(path, sep)
        _check_table(X, rows, cols, path, sep)
    elif kind in (".mtx", ".mtx.gz"):
        from scipy.io import mmread

        X = mmread(path)
        X = X.tocsr() if sparse.issparse(X) else np.asarray(X)
    else:
        X, rows, cols = _read_h5ad(path, layer)
    if X.ndim != 2:
        raise CommandLineError(
            f"'{path}' holds an array of shape {X.shape}; a 2-D matrix is needed."
        )
    if transpose:
        X = X.T.tocsr() if sparse.issparse(X) else X.T
        rows, cols = cols, rows
    return X, rows, cols


# ---------------------------------------------------------------------------------------
# Writing


def _pattern_names(k):
    return np.array([f"Pattern_{i + 1}" for i in range(k)], dtype=str)


def _write_table(path, values, row_names, col_names, sep, index_label):
    with open(path, "w", newline="") as f:
        writer = csv.writer(f, delimiter=sep)
        writer.writerow([index_label, *col_names])
        for name, row in zip(row_names, values):
            writer.writerow([name, *(repr(float(v)) for v in row)])


def chain_status(model):
    """How far the chain of a CoGAPS fit started by ``fit`` went.

    Parameters
    ----------
    model : CoGAPS
        A fitted estimator (not continued with ``warm_start``).

    Returns
    -------
    status : dict
        ``complete`` (bool: both phases ran all ``max_iter`` iterations; False after an
        interruption), ``calibration`` and ``sampling`` (iterations run in each phase) and
        ``status`` (``"complete"`` or ``"partial"``).
    """
    n_iter, n = int(model.n_iter_), int(model.max_iter)
    complete = n_iter >= 2 * n
    return {
        "status": "complete" if complete else "partial",
        "complete": complete,
        "calibration": min(n_iter, n),
        "sampling": max(n_iter - n, 0),
    }


def write_results(path, model, sample_names=None, feature_names=None):
    """Write a fitted :class:`~sklearn_cogaps.CoGAPS` to ``.npz`` or to CSV/TSV tables.

    The trace labels the first ``max_iter`` iterations as calibration, which is right for a
    chain started by ``fit`` (not one continued with ``warm_start``). A chain that stopped
    early (interrupted) is written as it is and marked partial: ``complete`` is False in the
    ``.npz`` archive, ``status`` is ``partial`` in the ``OUT_status`` table.

    Parameters
    ----------
    path : str or path-like
        ``OUT.npz`` writes one archive; ``OUT.csv`` or ``OUT.tsv`` writes the tables
        ``OUT_patterns``, ``OUT_patterns_std``, ``OUT_amplitudes``, ``OUT_amplitudes_std``
        (features in rows), ``OUT_trace`` and ``OUT_status`` (whether the chain is complete,
        the iterations of each phase, the chi-square, the uncertainty model) with that
        extension.
    model : CoGAPS
        A fitted estimator.
    sample_names, feature_names : array-like of str, default=None
        Names of the rows and columns of the fitted data.

    Returns
    -------
    written : list of pathlib.Path
        The files written.
    """
    path = Path(path)
    kind = _kind(path, (".npz", ".csv", ".tsv"), "the output")
    K = model.components_.shape[0]
    patterns = _pattern_names(K)
    n_iter = model.n_iter_
    status = chain_status(model)
    if kind == ".npz":
        arrays = {
            "patterns": model.loadings_,
            "patterns_std": model.loadings_std_,
            "amplitudes": model.components_,
            "amplitudes_std": model.components_std_,
            "chisq_history": model.chisq_history_,
            "n_atoms_history": model.n_atoms_history_,
            "chisq": np.float64(model.chisq_),
            "lambda": np.array([model.lambda_W_, model.lambda_H_]),
            "pattern_names": patterns,
            "complete": np.bool_(status["complete"]),
            "n_calibration": np.int64(status["calibration"]),
            "n_sampling": np.int64(status["sampling"]),
            "uncertainty_model": np.str_(model.uncertainty_model_),
        }
        if sample_names is not None:
            arrays["sample_names"] = np.asarray(sample_names, dtype=str)
        if feature_names is not None:
            arrays["feature_names"] = np.asarray(feature_names, dtype=str)
        np.savez_compressed(path, **arrays)
        return [path]

    sep = "," if kind == ".csv" else "\t"
    prefix = str(path)[: -len(kind)]
    samples = (
        sample_names
        if sample_names is not None
        else [f"sample_{i}" for i in range(model.loadings_.shape[0])]
    )
    features = (
        feature_names
        if feature_names is not None
        else [f"feature_{j}" for j in range(model.components_.shape[1])]
    )
    written = []
    for name, values, rows, label in [
        ("patterns", model.loadings_, samples, "sample"),
        ("patterns_std", model.loadings_std_, samples, "sample"),
        ("amplitudes", model.components_.T, features, "feature"),
        ("amplitudes_std", model.components_std_.T, features, "feature"),
    ]:
        out = Path(f"{prefix}_{name}{kind}")
        _write_table(out, values, rows, patterns, sep, label)
        written.append(out)
    phase = ["calibration" if i < model.max_iter else "sampling" for i in range(n_iter)]
    out = Path(f"{prefix}_trace{kind}")
    with open(out, "w", newline="") as f:
        writer = csv.writer(f, delimiter=sep)
        writer.writerow(["iteration", "phase", "chisq", "atoms_W", "atoms_H"])
        for i in range(n_iter):
            atoms = model.n_atoms_history_[i]
            writer.writerow(
                [
                    i + 1,
                    phase[i],
                    repr(float(model.chisq_history_[i])),
                    int(atoms[0]),
                    int(atoms[1]),
                ]
            )
    written.append(out)
    out = Path(f"{prefix}_status{kind}")
    with open(out, "w", newline="") as f:
        writer = csv.writer(f, delimiter=sep)
        writer.writerow(["key", "value"])
        writer.writerow(["status", status["status"]])
        writer.writerow(["calibration_iterations", status["calibration"]])
        writer.writerow(["sampling_iterations", status["sampling"]])
        writer.writerow(["max_iter", model.max_iter])
        writer.writerow(["uncertainty_model", model.uncertainty_model_])
        writer.writerow(["chisq", repr(float(model.chisq_))])
    written.append(out)
    return written


def write_h5ad(path, source, model, layer=None):
    """Copy an ``.h5ad`` file and add a CoGAPS fit of its matrix to the copy.

    Only the results are written into the copy (with anndata's element writer), so the
    matrix is never loaded: ``obsm["X_cogaps"]`` and ``obsm["X_cogaps_std"]`` (patterns
    and their standard deviations, one row per cell), ``varm["cogaps_components"]`` and
    ``varm["cogaps_components_std"]`` (amplitudes, one row per gene) and ``uns["cogaps"]``
    (the parameters, the chi-square trace and whether the chain is complete).

    Parameters
    ----------
    path : str or path-like
        The new ``.h5ad`` file.
    source : str or path-like
        The ``.h5ad`` file that was fitted (cells × genes, not transposed).
    model : CoGAPS
        The estimator fitted to ``source``'s ``X`` (or ``layer``).
    layer : str, default=None
        The layer that was fitted, recorded in ``uns["cogaps"]["layer"]``.

    Returns
    -------
    written : list of pathlib.Path
        The file written.
    """
    import shutil

    import h5py

    from .anndata import anndata_results

    _import_anndata(source)  # a clear message when anndata is missing
    try:
        from anndata.io import write_elem
    except ImportError:  # anndata < 0.11
        from anndata.experimental import write_elem
    path = Path(path)
    if path.resolve() == Path(source).resolve():
        raise CommandLineError(f"--output-h5ad '{path}' would overwrite the input; name a copy.")
    obsm, varm, uns = anndata_results(model, "cogaps")
    uns.update(chain_status(model))
    uns["layer"] = "X" if layer is None else layer
    shutil.copyfile(source, path)
    with h5py.File(path, "r+") as f:
        for group, items in (("obsm", obsm), ("varm", varm), ("uns", {"cogaps": uns})):
            g = f.require_group(group)
            for name, value in items.items():
                if name in g:
                    del g[name]
                write_elem(g, name, value)
    return [path]


# ---------------------------------------------------------------------------------------
# The command line


def _positive(kind):
    def parse(text):
        try:
            value = kind(text)
        except ValueError:
            value = None
        if value is None or not (value > 0 and math.isfinite(value)):
            raise argparse.ArgumentTypeError(f"must be a positive {kind.__name__}, got {text!r}")
        return value

    parse.__name__ = f"positive {kind.__name__}"
    return parse


def build_parser():
    """The argument parser of ``sklearn-cogaps``."""
    parser = argparse.ArgumentParser(
        prog="sklearn-cogaps",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "input", nargs="?", help=f"data matrix ({INPUT_FORMATS}); omit for the built-in example"
    )
    parser.add_argument(
        "-o", "--output", metavar="FILE", help=f"where to write the results ({OUTPUT_FORMATS})"
    )
    parser.add_argument(
        "--output-h5ad",
        metavar="FILE",
        help="with an .h5ad INPUT: write a copy of it with the results added "
        "(obsm['X_cogaps'], varm['cogaps_components'], uns['cogaps'])",
    )
    parser.add_argument(
        "--layer",
        metavar="NAME",
        help="with an .h5ad INPUT: fit this layer instead of X",
    )
    parser.add_argument(
        "-k",
        "--n-components",
        type=_positive(int),
        metavar="K",
        help="number of patterns (CoGAPS's nPatterns; default 7, or 3 for the built-in example, "
        "which simulates as many patterns as it fits)",
    )
    parser.add_argument(
        "-n",
        "--max-iter",
        type=_positive(int),
        default=1000,
        metavar="N",
        help="iterations of each phase, calibration then sampling "
        "(CoGAPS's nIterations; default 1000)",
    )
    # the per-matrix priors, with CoGAPS's names: W is its P, H its A
    for flag, default, metavar, text in [
        ("--alpha-w", 0.01, "A", "sparsity of the patterns W (CoGAPS's alphaP"),
        ("--alpha-h", 0.01, "A", "sparsity of the amplitudes H (CoGAPS's alphaA"),
        (
            "--max-gibbs-mass-w",
            100.0,
            "M",
            "largest Gibbs mass of an atom of W, in units of 1/lambda (CoGAPS's maxGibbsMassP",
        ),
        ("--max-gibbs-mass-h", 100.0, "M", "the same for H (CoGAPS's maxGibbsMassA"),
    ]:
        parser.add_argument(
            flag,
            type=_positive(float),
            default=default,
            metavar=metavar,
            help=f"{text}; default {default:g})",
        )
    parser.add_argument(
        "--birth-death",
        choices=("cogaps", "reversible"),
        default="cogaps",
        help="the chain's birth and death moves: CoGAPS's (default) or reversible-jump ones "
        "that sample the model's posterior exactly",
    )
    parser.add_argument(
        "--seed",
        type=int,
        default=0,
        help="random_state of the fit (and of the simulated data; default 0)",
    )
    parser.add_argument(
        "--uncertainty",
        metavar="FILE|poisson|relative",
        help="standard deviation of each entry: a FILE of the format and shape of INPUT, "
        "'poisson' for raw counts (max(sqrt(x), 1)) or 'relative' (the default, CoGAPS's "
        "max(0.1 * x, 0.1), for continuous data)",
    )
    parser.add_argument(
        "-t",
        "--transpose",
        action="store_true",
        help="INPUT (and the uncertainty) is genes x samples, as CoGAPS writes it: "
        "fit its transpose",
    )
    parser.add_argument(
        "--sparse-optimization",
        action="store_true",
        help="CoGAPS's sparse-data model: a named uncertainty (by default 0.1 for zeros and "
        "max(0.1 * x, 0.1) otherwise) computed from the stored values, memory growing with "
        "the non-zeros (sparse .mtx and .h5ad inputs use it unless --uncertainty is a FILE)",
    )
    parser.add_argument(
        "--threads",
        type=_positive(int),
        metavar="N",
        help="OpenMP threads (sets threadpoolctl's limit; default: OpenMP's own)",
    )
    parser.add_argument(
        "-v",
        "--verbose",
        action="count",
        default=0,
        help="print the chain's progress (-vv: tracebacks of errors too)",
    )
    return parser


def _levels():
    blocks = "▁▂▃▄▅▆▇█"
    try:
        blocks.encode(sys.stdout.encoding or "ascii")
    except (UnicodeEncodeError, LookupError):
        return "_.-=+*#@"
    return blocks


def _sparkline(values, width=48):
    """A pattern as one line of characters, scaled to its own maximum."""
    v = np.asarray(values, dtype=float)
    if v.size > width:  # average into `width` cells
        edges = np.linspace(0, v.size, width + 1).astype(int)
        v = np.array([v[a:b].mean() for a, b in zip(edges[:-1], edges[1:])])
    top = v.max()
    levels = _levels()
    if not top > 0:
        return levels[0] * v.size
    idx = np.clip(np.round(v / top * (len(levels) - 1)), 0, len(levels) - 1).astype(int)
    return "".join(levels[i] for i in idx)


def _empty_model_chisq(X, uncertainty):
    """Chi-square of W H = 0, without making a sparse X dense."""
    from ._cogaps import _named_uncertainty

    name = "relative" if uncertainty is None else uncertainty
    if sparse.issparse(X):  # zeros add nothing; the uncertainty is a named one
        values = np.asarray(X.data, dtype=np.float64)
        return float(np.sum((values / _named_uncertainty(name, values)) ** 2))
    X = np.asarray(X, dtype=np.float64)
    if isinstance(name, str):
        sigma = _named_uncertainty(name, X)
    else:
        sigma = np.asarray(uncertainty, dtype=float)
    if sigma.shape != X.shape:  # the estimator reports this one
        return float("nan")
    return float(np.sum((X / sigma) ** 2))


def _fit(model, X, uncertainty, threads):
    from threadpoolctl import threadpool_limits

    from ._base import effective_n_threads

    with threadpool_limits(limits=threads, user_api="openmp"):
        n_threads = effective_n_threads()
        start = time.perf_counter()
        model.fit(X, uncertainty=uncertainty)
        wall = time.perf_counter() - start
    return wall, n_threads


def _print_summary(model, X, uncertainty, wall, n_threads):
    n_entries = X.shape[0] * X.shape[1]
    n_iter = model.n_iter_
    atoms = model.n_atoms_history_
    status = chain_status(model)
    posterior = "posterior mean" if status["sampling"] else "current state"
    print("chi-square")
    print(f"  empty model (start)  {_empty_model_chisq(X, uncertainty):16,.1f}")
    if n_iter:
        print(f"  last iteration       {model.chisq_history_[-1]:16,.1f}")
    print(
        f"  {posterior:<20} {model.chisq_:16,.1f}   (X has {n_entries:,} entries: about that "
        "many if the uncertainty is right)"
    )
    if status["sampling"]:
        sampling = atoms[model.max_iter :]
        print(
            f"atoms      W {atoms[-1, 0]:,}, H {atoms[-1, 1]:,} at the end; mean over the "
            f"sampling phase W {sampling[:, 0].mean():,.1f}, H {sampling[:, 1].mean():,.1f}"
        )
    elif n_iter:
        print(
            f"atoms      W {atoms[-1, 0]:,}, H {atoms[-1, 1]:,} at the end; the sampling phase "
            "never started: the results are the chain's last state, not a posterior mean"
        )
    print(
        f"time       {wall:.2f} s wall for {n_iter:,} iterations "
        f"({1000.0 * wall / max(n_iter, 1):.3f} ms per iteration), {n_threads} thread(s)"
    )
    if not status["complete"]:
        print(
            f"INTERRUPTED after {status['calibration']:,} of {model.max_iter:,} calibration and "
            f"{status['sampling']:,} of {model.max_iter:,} sampling iterations: the results "
            "are partial"
        )


def _run_example(args, make_model):
    from ._base import match_components
    from .datasets import make_patterns

    K = args.n_components or 3
    X, W, H = make_patterns(n_components=K, random_state=args.seed)
    model = make_model(K)
    print(
        f"CoGAPS on simulated data: {X.shape[0]} samples x {X.shape[1]} features made of {K} "
        f"patterns (sklearn_cogaps.datasets.make_patterns, random_state={args.seed})"
    )
    print(
        f"{args.max_iter} calibration + {args.max_iter} sampling iterations, {K} patterns fitted\n"
    )
    wall, n_threads = _fit(model, X, None, args.threads)
    order, corr_w = match_components(W, model.loadings_)
    corr_h = np.array([np.corrcoef(H[i], model.components_[order[i]])[0, 1] for i in range(K)])
    print(
        f"{'true':>7} {'fitted':>7}  {'corr.':>6}  {'corr.':>6}   "
        f"shape along the {X.shape[0]} samples"
    )
    print(f"{'pattern':>7} {'pattern':>7}  {'of W':>6}  {'of H':>6}   (upper: true, lower: fitted)")
    for i in range(K):
        print(
            f"{i + 1:>7} {order[i] + 1:>7}  {corr_w[i]:6.4f}  {corr_h[i]:6.4f}   "
            f"{_sparkline(W[:, i])}"
        )
        print(f"{'':34}{_sparkline(model.loadings_[:, order[i]])}")
    print()
    _print_summary(model, X, None, wall, n_threads)
    return model, None, None


def _unrelated_names(a, b):
    """Whether two tables' names on one axis share none, neither being a numbered index
    (0, 1, 2, ...: positions)."""
    if a is None or b is None or len(a) != len(b):
        return False
    a, b = [str(v) for v in a], [str(v) for v in b]
    numbered = [str(i) for i in range(len(a))]
    return not set(a) & set(b) and numbered not in (a, b)


def _check_same_order(what, of_input, of_uncertainty, args):
    """Refuse an uncertainty file whose names are the input's in another order, or share
    none with them.

    Entries are matched by position, so reordered rows or columns would give each value
    another entry's standard deviation. A numbered index (0, 1, 2, ...) on either side
    means positions.
    """
    how = label_mismatch(of_input, of_uncertainty)
    if how is None and not _unrelated_names(of_input, of_uncertainty):
        return
    a, b = [str(v) for v in of_input], [str(v) for v in of_uncertainty]
    if how is None:
        # a table always carries names: none in common means another data set's file
        raise CommandLineError(
            f"the {what} names of '{args.uncertainty}' share none with those of "
            f"'{args.input}' (first {b[:3]} against {a[:3]}): is it the uncertainty of "
            f"these data? Write it with the input's {what} names (or a numbered index, "
            "0, 1, 2, ..., to match by position)."
        )
    raise CommandLineError(
        f"the {what} names of '{args.uncertainty}' are those of '{args.input}' {how} "
        f"(first {b[:3]} against {a[:3]}); entries are matched by position, so values "
        f"would get other entries' standard deviations. Write the uncertainty with the "
        f"{what}s in the order of the input."
    )


def _run_file(args, make_model):
    X, samples, features = read_matrix(args.input, transpose=args.transpose, layer=args.layer)
    uncertainty = args.uncertainty if args.uncertainty in _NAMED_UNCERTAINTIES else None
    if args.uncertainty and uncertainty is None:
        if args.sparse_optimization:
            raise CommandLineError(
                "--uncertainty FILE cannot be combined with --sparse-optimization: the "
                "sparse-data model computes a named uncertainty from the stored values "
                "(--uncertainty relative or poisson)."
            )
        uncertainty, u_samples, u_features = read_matrix(
            args.uncertainty, transpose=args.transpose
        )
        if uncertainty.shape != X.shape:
            flip = (lambda shape: shape[::-1]) if args.transpose else (lambda shape: shape)
            written = "genes x samples" if args.transpose else "samples x genes"
            raise CommandLineError(
                f"'{args.uncertainty}' holds a {' x '.join(map(str, flip(uncertainty.shape)))} "
                f"table and '{args.input}' a {' x '.join(map(str, flip(X.shape)))} one: the "
                f"uncertainty file must be written as the input is ({written}"
                f"{', as --transpose reads both' if args.transpose else ''})"
                + (", and it is the input's transpose." if uncertainty.shape == X.shape[::-1]
                   else ".")
            )
        _check_same_order("sample", samples, u_samples, args)
        _check_same_order("feature", features, u_features, args)
        if sparse.issparse(uncertainty):
            uncertainty = uncertainty.toarray()
        if sparse.issparse(X):  # the sparse-data model takes no uncertainty: fit densely
            X = X.toarray()
    K = args.n_components or 7
    model = make_model(K)
    how = f" (the transpose of the file's {X.shape[1]} x {X.shape[0]})" if args.transpose else ""
    print(
        f"CoGAPS on {args.input}: {X.shape[0]} samples x {X.shape[1]} features{how}, {K} patterns"
    )
    if args.uncertainty and args.uncertainty not in _NAMED_UNCERTAINTIES:
        described = f"from {args.uncertainty}"
    else:
        described = _NAMED_UNCERTAINTIES[args.uncertainty or "relative"]
    if args.sparse_optimization or sparse.issparse(X):
        print(f"sparse-data model: uncertainty {described}")
    else:
        print(f"dense model, uncertainty {described}")
    print(f"{args.max_iter} calibration + {args.max_iter} sampling iterations, seed {args.seed}\n")
    wall, n_threads = _fit(model, X, uncertainty, args.threads)
    names = (
        features if features is not None else np.array([f"feature {j}" for j in range(X.shape[1])])
    )
    print("features with the largest amplitudes in each pattern")
    for k in range(K):
        top = np.argsort(-model.components_[k], kind="stable")[:5]
        print(
            f"  Pattern_{k + 1:<3} {_sparkline(model.loadings_[:, k], 24)}  "
            + ", ".join(names[top])
        )
    print()
    _print_summary(model, X, uncertainty, wall, n_threads)
    return model, samples, features


def main(argv=None):
    """Run the command line.

    Parameters
    ----------
    argv : list of str, default=None
        The arguments (without the program name); None reads ``sys.argv``.

    Returns
    -------
    status : int
        0 on success, 2 when the input or the options are wrong (the message goes to
        stderr), 130 (as a shell reports SIGINT) after Ctrl-C: when the chain was
        interrupted, its partial results are still reported and written, marked partial.
    """
    parser = build_parser()
    args = parser.parse_args(argv)
    from ._cogaps import CoGAPS

    def make_model(K):
        return CoGAPS(
            n_components=K,
            max_iter=args.max_iter,
            atom_density_W=args.alpha_w,
            atom_density_H=args.alpha_h,
            max_gibbs_mass_W=args.max_gibbs_mass_w,
            max_gibbs_mass_H=args.max_gibbs_mass_h,
            birth_death=args.birth_death,
            random_state=args.seed,
            verbose=args.verbose,
            sparse_optimization=args.sparse_optimization,
        )

    interrupted = "interrupted before the fit finished; nothing written."
    try:
        if args.output is not None:
            _kind(args.output, (".npz", ".csv", ".tsv"), "the output")
            if not Path(args.output).resolve().parent.is_dir():
                raise CommandLineError(f"the folder of the output '{args.output}' does not exist.")
        if args.output_h5ad is not None:
            _kind(args.output_h5ad, (".h5ad",), "the output")
            if args.input is None or not args.input.lower().endswith(".h5ad") or args.transpose:
                raise CommandLineError(
                    "--output-h5ad adds the results to a copy of an .h5ad INPUT (cells x genes, "
                    "without --transpose)."
                )
            if not Path(args.output_h5ad).resolve().parent.is_dir():
                raise CommandLineError(
                    f"the folder of the output '{args.output_h5ad}' does not exist."
                )
        if args.input is None:
            if args.uncertainty or args.transpose or args.layer:
                raise CommandLineError("--uncertainty, --transpose and --layer need an INPUT file.")
            model, samples, features = _run_example(args, make_model)
        else:
            model, samples, features = _run_file(args, make_model)
            if args.output is None and args.output_h5ad is None:
                print("\nnothing written: add --output FILE.npz (or .csv) to keep the results.")
        interrupted = "interrupted while writing the results; the files may be incomplete."
        written = []
        if args.output is not None:
            written += write_results(args.output, model, samples, features)
        if args.output_h5ad is not None:
            written += write_h5ad(args.output_h5ad, args.input, model, args.layer)
        complete = chain_status(model)["complete"]
        if written:
            mark = "" if complete else " (partial results, marked as such)"
            print("\nwritten: " + ", ".join(str(p) for p in written) + mark)
    except KeyboardInterrupt:
        print(f"{parser.prog}: {interrupted}", file=sys.stderr)
        return 130
    except (ValueError, OSError) as exc:
        if args.verbose > 1:  # -vv: the whole traceback, for a bug report
            raise
        print(f"{parser.prog}: error: {exc}", file=sys.stderr)
        return 2
    if not complete:
        print(f"{parser.prog}: interrupted; the results are partial.", file=sys.stderr)
        return 130
    return 0
