"""Reading the command line's input: a matrix from .npy, .csv/.tsv, .gct, .mtx or .h5ad, with
its sample and feature names."""

import bz2
import csv
import gzip
import lzma
from pathlib import Path

import numpy as np
from scipy import sparse

__all__ = ["INPUT_FORMATS", "CommandLineError", "open_text", "read_matrix"]

# text formats are also read compressed, as GEO and the 10x pipelines distribute them
COMPRESSIONS = {".gz": gzip.open, ".bz2": bz2.open, ".xz": lzma.open}
TEXT_FORMATS = (".csv", ".tsv", ".gct", ".mtx")
INPUT_FORMATS = ".npy, .csv, .tsv, .gct, .mtx, .h5ad (the text formats also as .gz, .bz2 or .xz)"


class CommandLineError(ValueError):
    """A problem with the command line's input, reported without a traceback."""


def open_text(path, newline=None):
    """A text file for reading, decompressed when its name ends with .gz, .bz2 or .xz."""
    opener = COMPRESSIONS.get(Path(path).suffix.lower())
    if opener is None:
        return open(path, newline=newline)
    return opener(path, "rt", newline=newline)


def open_binary(path):
    """The same file as bytes: scipy's Matrix Market reader wraps a text file in a bytes
    reader whose clean-up, after an error, printed a traceback of its own."""
    opener = COMPRESSIONS.get(Path(path).suffix.lower())
    return open(path, "rb") if opener is None else opener(path, "rb")


def _kind(path, formats, what, compressed=()):
    """The format of ``path`` among ``formats`` by its name; those in ``compressed`` may
    also end with a compression's suffix."""
    name = Path(path).name.lower()
    for suffix in formats:
        if name.endswith(suffix) or (
            suffix in compressed and any(name.endswith(suffix + c) for c in COMPRESSIONS)
        ):
            return suffix
    also = f" ({', '.join(compressed)} also as {', '.join(COMPRESSIONS)})" if compressed else ""
    raise CommandLineError(
        f"cannot tell the format of {what} '{path}' from its name; use one of "
        f"{', '.join(formats)}{also}."
    )


def _layout_hint(path, sep):
    """What a table that pandas could not read may be instead: comment lines, or a table
    separated by semicolons with decimal commas (a spreadsheet's export in many locales)."""
    try:
        with open_text(path) as f:
            first, second = f.readline(), f.readline()
    except (OSError, UnicodeDecodeError):
        return ""
    if first.startswith("#") and first.count(sep) != second.count(sep):
        return (". It starts with a comment line ('#'): remove the comment lines, or write "
                "the table again without them.")  # fmt: skip
    if sep != ";" and first.count(";") > first.count(sep):
        return (". Its header row is separated by semicolons (decimal commas?): write it "
                "with commas first, pandas.read_csv(path, sep=';', decimal=',', "
                "index_col=0).to_csv('X.csv').")  # fmt: skip
    return ""


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
            f"'{path}' cannot be read as a table separated by {_SEPARATORS[sep]}: "
            f"{str(error).rstrip('.')}{_layout_hint(path, sep) or '.'}"
        ) from None
    # the row names as written: the index column read as text, so that "0101" stays "0101"
    # and "NA" stays "NA" (an index parsed with the values would lose both)
    frame.index = (
        pd.read_csv(
            path, sep=sep, usecols=[0], header=None, skiprows=1, dtype=str, keep_default_na=False
        )
        .iloc[:, 0]
        .to_numpy()
    )
    # the column names as written too (pandas renames a repeated name "g0" to "g0.1")
    header = (
        pd.read_csv(path, sep=sep, header=None, nrows=1, dtype=str, keep_default_na=False)
        .iloc[0]
        .tolist()
    )
    frame.columns = header[len(header) - frame.shape[1] :]
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
            f"(the first row is the header){_layout_hint(path, sep) or '.'}"
        ) from None
    rows, cols = _names(frame.index), _names(frame.columns)
    _check_row_names(rows, path)
    corner = header[0] if len(header) > frame.shape[1] else ""
    _check_column_names(cols, rows, corner, path)
    return values, rows, cols


_SEPARATORS = {",": "commas (.csv)", "\t": "tabs (.tsv)"}


def _check_table(X, rows, cols, path, sep):
    """Refuse a table read with the wrong separator (no data columns) or with missing
    values, saying where and what to do."""
    if X.shape[1] == 0:
        raise CommandLineError(
            f"'{path}' has no column after its index column when read as separated by "
            f"{_SEPARATORS[sep]}; a table separated by tabs must be named .tsv, one by commas "
            ".csv (other separators and decimal commas are not read)"
            f"{_layout_hint(path, sep) or '.'}"
        )
    missing = np.argwhere(np.isnan(X))
    if len(missing):
        i, j = missing[0]
        raise CommandLineError(
            f"row '{rows[i]}', column '{cols[j]}' of '{path}' is empty or NA ({len(missing)} "
            "such cells): the factorisations have no model of missing values; fill them "
            "(with 0 for undetected counts) or drop their rows or columns."
        )


def _read_delimited_numpy(path, sep):
    """The same without pandas, with the csv module (empty cells and NA read as NaN)."""
    with open_text(path, newline="") as f:
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
    _check_column_names(header[1:], rows, header[0], path)
    return values, rows, np.array(header[1:], dtype=str)


def _all_numbers(names):
    """The names as numbers, or None when one of them is not a number."""
    try:
        return np.array([float(name) for name in names])
    except ValueError:
        return None


def _numbers_that_look_like_data(numbers):
    """The fractional and the repeated numbers among ``numbers`` (:func:`_all_numbers` of
    the names; numbered rows or numeric gene ids are unique integers): two empty arrays for
    None."""
    if numbers is None:
        return np.empty(0), np.empty(0)
    finite = numbers[np.isfinite(numbers)]
    unique, counts = np.unique(numbers, return_counts=True)
    return finite[finite != np.round(finite)], unique[counts > 1]


def _found(fractional, repeated):
    if len(fractional):
        return f"holds fractional numbers ({', '.join(map(repr, fractional[:3].tolist()))}, ...)"
    return f"repeats numbers ({', '.join(map(repr, repeated[:3].tolist()))}, ...)"


def _check_row_names(rows, path):
    """Refuse a first column that holds data rather than row names.

    A table written without its index (pandas' ``to_csv(index=False)``, R's
    ``write.csv(row.names=FALSE)``) would otherwise lose its first data column, read as the
    row names. A column of numbers is taken for data when some are fractional or when they
    repeat (numbered rows are unique integers); names that are not all numbers pass.
    """
    empty = [i for i, name in enumerate(rows) if not str(name).strip()]
    if empty:
        # a second header line (a pandas MultiIndex of columns) or a blank name: a row of
        # names read as data, or a row that cannot be told from the others
        raise CommandLineError(
            f"line {empty[0] + 2} of '{path}' has no row name: a table has one header line "
            "(a second one, as pandas writes for a MultiIndex of columns, would be read as "
            "data) and a name in the first column of every row. Keep one level of column "
            "names (df.columns = df.columns.get_level_values(0)) and name every row."
        )
    fractional, repeated = _numbers_that_look_like_data(_all_numbers(rows))
    if not len(fractional) and not len(repeated):
        return
    raise CommandLineError(
        f"the first column of '{path}' is read as the row names, but it "
        f"{_found(fractional, repeated)}: it looks like data, which would be dropped. Give "
        "the table a first column of unique row names (pandas: df.to_csv(path) with its "
        "index; R: write.csv(x, path) with row.names), or save the matrix as .npy."
    )


def _numbered(numbers):
    """Whether names that are all numbers count 0, 1, 2, ... or 1, 2, 3, ...: the names
    pandas (a default index or columns) and R write for a matrix without its own."""
    return bool(
        numbers.size and numbers[0] in (0.0, 1.0) and np.array_equal(numbers - numbers[0],
                                                                      np.arange(numbers.size))
    )  # fmt: skip


def _check_column_names(cols, rows, corner, path):
    """Refuse a header row that holds data rather than column names, which would be dropped:
    an empty name (a blank cell, or a header row shorter than the rows); numbers that
    repeat or are fractional after a first cell that names something, as in a table
    written without its header but with its row names (``to_csv(header=False)``: that
    cell is the first row's name); or numbers above a first column of numbers, as in a
    table written without any names (numpy's ``savetxt``). Numbers after an empty first
    cell (as pandas and R write a header) are names: time points, replicates, numeric gene
    ids; numbered rows and columns (0, 1, 2, ... or 1, 2, 3, ..., both) are the names
    pandas and R write for a matrix without its own."""
    empty = [j for j, name in enumerate(cols) if not str(name).strip()]
    header, first = _all_numbers(cols), _all_numbers(rows)
    fractional, repeated = _numbers_that_look_like_data(header)
    if empty:
        found = f"has an empty name in column {empty[0] + 2}"
    elif str(corner).strip() and (len(fractional) or len(repeated)):
        found = f"{_found(fractional, repeated)} after a first cell {corner!r}"
    elif header is not None and first is not None and not (_numbered(header) and _numbered(first)):
        found = "holds numbers, as does the first column"
    else:
        return
    raise CommandLineError(
        f"the first row of '{path}' is read as the column names, but it {found}: it looks "
        "like data, which would be dropped. Give the table a header row of column names "
        "(pandas: df.to_csv(path) with its columns; numpy: savetxt(path, X, header=...) "
        "with comments=''), or save the matrix as .npy."
    )


def _read_gct(path):
    """A GCT file (the Broad's format that R CoGAPS reads, versions 1.2 and 1.3): genes in
    rows after their name and annotation columns, samples in columns. Returns the values
    (genes x samples), the gene names and the sample names."""
    with open_text(path, newline="") as f:
        lines = f.read().splitlines()
    version = lines[0].strip() if lines else ""
    if version not in ("#1.2", "#1.3"):
        raise CommandLineError(
            f"'{path}' does not start with a GCT version line (#1.2 or #1.3); got {version[:20]!r}."
        )
    try:
        dims = [int(v) for v in lines[1].split("\t") if v.strip()]
    except (IndexError, ValueError):
        raise CommandLineError(f"the second line of '{path}' must give its dimensions.") from None
    n_genes, n_samples = dims[0], dims[1]
    # 1.2: Name and Description; 1.3: the id and the row annotations, then column annotations
    n_row_meta, n_col_meta = (1, 0) if version == "#1.2" else (dims[2], dims[3])
    header = lines[2].split("\t")
    first = 1 + n_row_meta
    samples = np.array(header[first:], dtype=object)
    rows = [line.split("\t") for line in lines[3 + n_col_meta :] if line.strip()]
    if len(samples) != n_samples or len(rows) != n_genes:
        # GCT 1.2 has a Description column after the names; a file without it has one
        # sample column fewer than it announces once the first is read as the description
        missing = (
            " Its header has no Description column after Name: GCT 1.2 needs one (it may be "
            "empty) before the samples."
            if version == "#1.2"
            and len(samples) == n_samples - 1
            and len(header) > 1
            and header[1].strip().lower() != "description"
            else ""
        )
        raise CommandLineError(
            f"'{path}' announces {n_genes} genes x {n_samples} samples and holds {len(rows)} x "
            f"{len(samples)}.{missing}"
        )
    genes = np.array([r[0] for r in rows], dtype=object)
    try:
        values = np.array([[float(v) for v in r[first:]] for r in rows], dtype=np.float64)
    except ValueError:
        raise CommandLineError(f"'{path}' holds values that are not numbers.") from None
    if values.shape != (n_genes, n_samples):
        raise CommandLineError(f"a row of '{path}' does not have {n_samples} values.")
    return values, genes, samples


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
        ``.mtx`` file, or an AnnData ``.h5ad`` file (needs anndata). The text formats
        (``.csv``, ``.tsv``, ``.gct``, ``.mtx``) are also read compressed, named with
        ``.gz``, ``.bz2`` or ``.xz`` after their suffix.
    transpose : bool, default=False
        The file is genes × samples as CoGAPS writes it: return its transpose. A ``.gct``
        file is genes × samples by its format and is always returned transposed.
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
    kind = _kind(path, (".npy", *TEXT_FORMATS, ".h5ad"), "the file", TEXT_FORMATS)
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
    elif kind == ".gct":
        X, rows, cols = _read_gct(path)
        transpose = True  # genes x samples by definition
    elif kind == ".mtx":
        from scipy.io import mmread

        with open_binary(path) as f:
            X = mmread(f)
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
