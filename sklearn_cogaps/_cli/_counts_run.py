"""Running ``sklearn-cogaps-counts``: prep, train, score and project on count matrices."""

import contextlib
import sys
import time
import warnings
from collections import Counter
from pathlib import Path

import numpy as np
from scipy import sparse

from .._utils._validation import unversioned_ensembl
from ._counts_parser import build_counts_parser, refuse_peer_commands
from ._read import COMPRESSIONS, CommandLineError, open_text, read_matrix
from ._run import _PipeTolerantOutput

__all__ = ["main"]

_MODELS = {"hpmf": "HierarchicalPMF", "wbpmf": "WeightedBackgroundPMF"}
_SOLVERS = {"hpmf": ("vbem", "newton", "pathwise"), "wbpmf": ("auto", "sequential", "simultaneous")}


# -- reading ------------------------------------------------------------------------------


def _read_gene_file(path, what):
    """A gene file as a 2-D array of str (genes x columns): one name a line, or columns
    separated by tabs (or by spaces when a line has no tab)."""
    if not Path(path).is_file():
        raise CommandLineError(f"no such file: '{path}' ({what}).")
    rows, line_numbers = [], []
    with open_text(path) as f:
        for number, line in enumerate(f, start=1):
            line = line.rstrip("\r\n")
            if not line.strip() or line.startswith("#"):
                continue
            rows.append([v.strip() for v in line.split("\t")] if "\t" in line else line.split())
            line_numbers.append(number)
    if not rows:
        raise CommandLineError(f"{what} '{path}' names no gene.")
    widths = {len(r) for r in rows}
    if len(widths) > 1:
        first = next(i for i, r in enumerate(rows) if len(r) != len(rows[0]))
        raise CommandLineError(
            f"line {line_numbers[first]} of {what} '{path}' has {len(rows[first])} columns and "
            f"its first gene line {len(rows[0])}; every line must have the same columns."
        )
    return np.array(rows, dtype=object)


def _schpf_format_hint(path, message):
    """What to add to a reading error of a file that may be in scHPF's own format (gene id,
    gene name, one count per cell, whitespace-delimited, no header), which is read from a
    .txt or .txt.gz name only."""
    name = str(path).lower()
    if "cannot tell the format" in message:
        return " scHPF's count format (id, name, counts; no header) is read as .txt or .txt.gz."
    if name.endswith((".tsv", ".csv")) and "is not a number" in message:
        return (
            " If this is scHPF's count format (gene id, gene name, then one count per cell, "
            "no header), name the file .txt (or .txt.gz): a .tsv is read as a table with a "
            "header line."
        )
    return ""


def _read_schpf_txt(path):
    """scHPF's count table: whitespace-separated, genes x cells, no header, each line a
    gene's ENSEMBL id, its name and its counts. Returns cells x genes counts (CSR) and the
    genes' id and name."""
    genes, indptr, indices, data = [], [0], [], []
    n_cells = None
    with open_text(path) as f:
        for number, line in enumerate(f, start=1):
            fields = line.split()
            if not fields:
                continue
            if len(fields) < 3:
                raise CommandLineError(
                    f"line {number} of '{path}' has {len(fields)} fields; scHPF's .txt format "
                    "has a gene id, a gene name and a count per cell on each line."
                )
            if n_cells is None:
                n_cells = len(fields) - 2
            elif len(fields) - 2 != n_cells:
                raise CommandLineError(
                    f"line {number} of '{path}' has {len(fields) - 2} counts, the first line "
                    f"{n_cells}."
                )
            try:
                counts = np.array(fields[2:], dtype=np.float64)
            except ValueError:
                raise CommandLineError(
                    f"line {number} of '{path}' holds a count that is not a number; scHPF's "
                    ".txt format has no header line and two columns (id, name) before the "
                    "counts."
                ) from None
            nz = np.flatnonzero(counts)
            genes.append(fields[:2])
            indices.append(nz)
            data.append(counts[nz])
            indptr.append(indptr[-1] + len(nz))
    if n_cells is None:
        raise CommandLineError(f"'{path}' holds no gene.")
    by_gene = sparse.csr_matrix(
        (np.concatenate(data), np.concatenate(indices), np.array(indptr)),
        shape=(len(genes), n_cells),
    )
    return by_gene.T.tocsr(), np.array(genes, dtype=object)


def _read_counts(path, transpose=False, layer=None, genes_file=None):
    """Counts (CSR, cells x genes), the cell names (or None) and the gene table (genes x
    columns of str, or None) of an input file."""
    name = str(path).lower()
    if name.endswith(".loom"):
        raise CommandLineError(
            f"'{path}' is a loom file, which is not read here: convert it with anndata, "
            "anndata.io.read_loom(path).write_h5ad('counts.h5ad'), and give the .h5ad."
        )
    if name.endswith((".txt", *(".txt" + c for c in COMPRESSIONS))):
        if not Path(path).is_file():
            raise CommandLineError(f"no such file: '{path}'.")
        if transpose or layer is not None:
            raise CommandLineError(
                f"--transpose and --layer do not apply to scHPF's .txt format ('{path}'), "
                "genes x cells by definition."
            )
        X, genes = _read_schpf_txt(path)
        cells = None
    else:
        try:
            X, cells, names = read_matrix(path, transpose=transpose, layer=layer)
        except CommandLineError as exc:
            raise CommandLineError(f"{exc}{_schpf_format_hint(path, str(exc))}") from None
        genes = None if names is None else np.asarray(names, dtype=object)[:, None]
    X = sparse.csr_matrix(X)
    if genes_file is not None:
        own, genes = genes, _read_gene_file(genes_file, "the gene file")
        if len(genes) != X.shape[1]:
            raise CommandLineError(
                f"the gene file '{genes_file}' names {len(genes)} genes and '{path}' has "
                f"{X.shape[1]} columns (genes); one gene a line, no header"
                + (", and --transpose if the file is genes x cells." if not transpose else ".")
            )
        if own is not None:  # names of another kind replace the input's own, not the same
            _check_gene_file(genes, [str(v) for v in own[:, 0]], genes_file, f"'{path}'")
    _check_counts(X, path, genes)
    return X, cells, genes


def _check_counts(X, path, genes=None):
    """Refuse values that are not counts, saying where the first one is and what to do."""
    values = X.data
    if not (np.issubdtype(values.dtype, np.integer) or np.issubdtype(values.dtype, np.floating)):
        raise CommandLineError(f"'{path}' holds {values.dtype} values, not counts.")
    checks = [
        (
            ~np.isfinite(values),
            "missing or infinite",
            "Poisson factorisation has no model of missing counts: write 0 for undetected "
            "counts, or drop the cells or genes.",
        ),
        (
            values < 0,
            "negative",
            "counts are at least 0; give the raw counts (UMIs or reads), not centred or "
            "log-ratio values.",
        ),
        (
            values != np.round(values),
            "fractional",
            "counts are whole numbers; give the raw counts (UMIs or reads), not normalised "
            "or log-transformed values (in an .h5ad they are often in a layer: --layer counts, "
            "or in adata.raw: write adata.raw.to_adata() to a file).",
        ),
    ]
    for bad, kind, advice in checks:
        with np.errstate(invalid="ignore"):
            found = np.flatnonzero(bad)
        if not len(found):
            continue
        row = int(np.searchsorted(X.indptr, found[0], side="right") - 1)
        col = int(X.indices[found[0]])
        gene = f" ({genes[col, 0]})" if genes is not None else ""
        raise CommandLineError(
            f"'{path}' holds {len(found):,} {kind} values, the first "
            f"{float(values[found[0]])!r} in cell {row}, gene {col}{gene} (0-based): {advice}"
        )


def _gene_keys(column, split_on_dot):
    column = [str(v) for v in column]
    if not split_on_dot:
        return np.array(column, dtype=object)
    return np.array([unversioned_ensembl(v) for v in column], dtype=object)


_ORDINAL = ("first", "second")


def _overlap(a, b, split_on_dot):
    return len(set(_gene_keys(a, split_on_dot)) & set(_gene_keys(b, split_on_dot)))


def _list_mask(genes, path, kind, by_name, split_on_dot):
    """Which genes of the table are on the gene list, and a line saying how it was read.

    Columns are matched as scHPF matches them, ids (the first) or names (the second, with
    ``by_name``); when one side has a single column, it is matched against the other's
    column (of its first two) that shares more of its names.
    """
    listed = _read_gene_file(path, f"the {kind}")
    gene_col = 1 if by_name and genes.shape[1] > 1 else 0
    list_col = 1 if by_name and listed.shape[1] > 1 else 0
    if not by_name and (genes.shape[1] == 1) != (listed.shape[1] == 1):
        single, other = (genes, listed) if genes.shape[1] == 1 else (listed, genes)
        found = [_overlap(single[:, 0], other[:, c], split_on_dot) for c in (0, 1)]
        best = int(found[1] > found[0])
        gene_col, list_col = (0, best) if genes.shape[1] == 1 else (best, 0)
    on_list = np.isin(
        _gene_keys(genes[:, gene_col], split_on_dot),
        _gene_keys(listed[:, list_col], split_on_dot),
    )
    where = f"its {_ORDINAL[list_col]} column" if listed.shape[1] > 1 else "one a line"
    against = f", matched to INPUT's {_ORDINAL[gene_col]} column" if genes.shape[1] > 1 else ""
    return on_list, f"{kind} {path} ({len(listed):,} genes, {where}{against})"


# -- writing ------------------------------------------------------------------------------


def _outprefix(outdir, prefix):
    if "/" in prefix or "\\" in prefix:
        raise CommandLineError(
            f"-p/--prefix {prefix!r} names folders; the prefix starts the files' names: "
            "put the folders in -o/--outdir."
        )
    outdir = Path(outdir)
    if not outdir.is_dir():
        if outdir.exists():
            raise CommandLineError(f"the output folder '{outdir}' is a file.")
        outdir.mkdir(parents=True)
        print(f"created the output folder {outdir}")
    prefix = prefix.rstrip(".")
    return lambda name: outdir / (f"{prefix}.{name}" if prefix else name)


def _write_table(path, values):
    # 17 significant digits: the values read back are the computed ones
    np.savetxt(path, np.asarray(values, dtype=np.float64), fmt="%.17g", delimiter="\t")


def _write_lines(path, rows):
    with open(path, "w") as f:
        for row in rows:
            f.write("\t".join(str(v) for v in np.atleast_1d(row)) + "\n")


# -- the commands -------------------------------------------------------------------------


def _min_cells_threshold(min_cells, n_cells):
    """scHPF's rule: a value strictly between 0 and 1 is a fraction of the cells, rounded to
    the nearest whole number (half to even, as Python rounds); otherwise a number of cells."""
    if 0 < min_cells < 1:
        count = round(min_cells * n_cells)
        return count, f"{min_cells:g} of {n_cells:,} cells = {count:,} cells"
    return min_cells, f"{min_cells:g} cells"


def _prep(args):
    X, cells, genes = _read_counts(args.input, args.transpose, args.layer, args.genes)
    X.eliminate_zeros()
    n_cells, n_genes = X.shape
    print(f"prep {args.input}: {n_cells:,} cells x {n_genes:,} genes, {X.nnz:,} non-zero counts")
    threshold, described = _min_cells_threshold(args.min_cells, n_cells)
    detected = np.bincount(X.indices, minlength=n_genes)
    keep = detected >= threshold
    print(f"  detected in at least {described}: {int(keep.sum()):,} genes")
    lists = [(args.whitelist, "whitelist", True), (args.blacklist, "blacklist", False)]
    for path, kind, keeps in lists:
        if path is None:
            continue
        if genes is None:
            raise CommandLineError(
                f"--{kind} needs the names of INPUT's genes, and '{args.input}' has none: "
                "give them with --genes FILE (one a line, in the order of the columns)."
            )
        on_list, described = _list_mask(
            genes, path, kind, args.filter_by_gene_name, not args.no_split_on_dot
        )
        passes = on_list if keeps else ~on_list
        print(f"  {described}: {int(on_list.sum()):,} of INPUT's genes on it")
        if not on_list.any():
            print(
                f"warning: the {kind} names none of INPUT's genes: it may name them otherwise "
                "(ids or names, --filter-by-gene-name; an .h5ad's var_names are its names)",
                file=sys.stderr,
            )
        keep &= passes
    if not keep.any():
        raise CommandLineError(
            f"no gene of '{args.input}' passes the filters above; lower --min-cells, or check "
            "that the gene lists name INPUT's genes as INPUT does (ids or names: "
            "--filter-by-gene-name)."
        )
    filtered = X[:, keep].astype(np.int64)
    kept = genes[keep] if genes is not None else np.flatnonzero(keep)
    out = _outprefix(args.outdir or Path(args.input).parent, args.prefix)
    written = [out("filtered.mtx"), out("genes.txt")]
    if cells is not None:
        written.append(out("cells.txt"))
    inputs = [Path(p).resolve() for p in (args.input, args.genes) if p is not None]
    for path in written:
        if path.resolve() in inputs:
            raise CommandLineError(
                f"prep would write its output over its input '{path}': give another "
                "-o/--outdir or a -p/--prefix."
            )
    from scipy.io import mmwrite

    mmwrite(written[0], filtered.tocoo(), field="integer")
    _write_lines(written[1], kept)
    if cells is not None:
        _write_lines(written[2], cells)
    empty = int(np.sum(np.diff(filtered.indptr) == 0))
    print(
        f"kept {filtered.shape[1]:,} of {n_genes:,} genes in {n_cells:,} cells: "
        f"{filtered.nnz:,} non-zero counts"
    )
    if genes is None:
        print("  INPUT names no gene: genes.txt holds the kept genes' 0-based column numbers")
    if empty:
        print(f"  note: {empty:,} cells have no count in the kept genes")
    print("written: " + ", ".join(str(p) for p in written))


def _fit(model, X, threads):
    from sklearn.exceptions import ConvergenceWarning
    from threadpoolctl import threadpool_limits

    from .._utils._openmp_helpers import effective_n_threads
    from .._utils._progress import FitInterruptedWarning

    with threadpool_limits(limits=threads, user_api="openmp"):
        n_threads = effective_n_threads()
        start = time.perf_counter()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", ConvergenceWarning)
            warnings.simplefilter("always", FitInterruptedWarning)
            model.fit(X)
        seconds = time.perf_counter() - start
    if any(issubclass(w.category, FitInterruptedWarning) for w in caught):
        # what the estimator keeps (part of a start, or the starts done of -t/--n-init) is
        # not the fit asked for, and score would read it as one
        print(
            "Ctrl-C stopped the fit before it ended; no model written. Run train again "
            "(lower -M/--max-iter or -t/--n-init for a shorter fit).",
            file=sys.stderr,
        )
        raise KeyboardInterrupt
    for w in caught:
        if issubclass(w.category, ConvergenceWarning):
            # the estimator's advice names its Python parameters; here they are options
            print(
                f"warning: not converged in {model.n_iter_:,} iterations (the ELBO still "
                "moved by more than --tol): raise -M/--max-iter, or --tol",
                file=sys.stderr,
            )
        else:
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    return seconds, n_threads


def _train(args):
    import joblib

    import sklearn_cogaps

    _check_solver(args.model, args.solver)  # before reading the counts
    X, _, genes = _read_counts(args.input, args.transpose, args.layer, args.genes)
    verbose = 0 if args.quiet else min(args.verbose, 2)
    params = {"n_components": args.n_components, "n_init": args.n_init, "random_state": args.seed}
    if args.max_iter is not None:
        params["max_iter"] = args.max_iter
    if args.tol is not None:
        params["tol"] = args.tol
    if args.solver is not None:
        params["solver"] = args.solver
    name = _MODELS[args.model]
    model = getattr(sklearn_cogaps, name)(verbose=verbose, **params)
    shown = ", ".join(f"{k}={v!r}" for k, v in params.items())
    print(f"train {args.input}: {X.shape[0]:,} cells x {X.shape[1]:,} genes, {X.nnz:,} non-zeros")
    print(f"{name}({shown})\n")
    if args.n_components > min(X.shape):
        print(
            f"note: {args.n_components} factors for {X.shape[0]:,} cells x {X.shape[1]:,} genes: "
            f"at most {min(X.shape):,} can differ, the others will repeat or vanish",
            file=sys.stderr,
        )
    out = _outprefix(args.outdir or Path(args.input).parent, args.prefix)
    wall, n_threads = _fit(model, X, args.threads)
    if genes is not None:
        # the training matrix carries no names; the model keeps them for score and project
        model.feature_names_in_ = np.asarray([str(v) for v in genes[:, 0]], dtype=object)
    path = out("model.joblib")
    joblib.dump(model, path)
    starts = f" (the best of {args.n_init} starts)" if args.n_init > 1 else ""
    state = "converged" if getattr(model, "converged_", True) else "stopped at --max-iter"
    print(f"ELBO        {model.lower_bound_:,.4f}  (lower_bound_)")
    print(f"iterations  {model.n_iter_:,}{starts}, {state}")
    print(f"time        {wall:.2f} s wall, {n_threads} thread(s)")
    print(f"written: {path}")


def _check_solver(model, solver):
    """Refuse a ``--solver`` that ``--model`` does not have, naming those it has."""
    if solver is None or solver in _SOLVERS[model]:
        return
    other = [m for m, names in _SOLVERS.items() if solver in names]
    hint = f" (it is a solver of --model {other[0]})" if other else ""
    raise CommandLineError(
        f"--solver {solver} is not a solver of --model {model}{hint}; --model {model} takes "
        f"--solver {' or '.join(_SOLVERS[model])}."
    )


def _load_model(path):
    import joblib

    from .. import HierarchicalPMF, WeightedBackgroundPMF

    if not Path(path).is_file():
        raise CommandLineError(f"no such file: '{path}'.")
    try:
        model = joblib.load(path)
    except ModuleNotFoundError as error:
        raise CommandLineError(
            f"'{path}' needs the module {error.name!r} to be loaded: it was not written by "
            "sklearn-cogaps-counts train (scHPF's models are read by scHPF)."
        ) from None
    except Exception as error:  # unpickling raises whatever the file's bytes lead it to
        raise CommandLineError(f"'{path}' cannot be loaded with joblib: {error}") from None
    if not isinstance(model, (HierarchicalPMF, WeightedBackgroundPMF)):
        raise CommandLineError(
            f"'{path}' holds a {type(model).__name__}, not a model written by "
            "sklearn-cogaps-counts train (HierarchicalPMF or WeightedBackgroundPMF)."
        )
    if not hasattr(model, "components_"):
        raise CommandLineError(f"the {type(model).__name__} in '{path}' is not fitted.")
    return model


def _model_genes(model, genes_file):
    """The model's gene table (genes x columns of str) or None, checked against its width."""
    if genes_file is None:
        names = getattr(model, "feature_names_in_", None)
        return None if names is None else np.asarray(names, dtype=object)[:, None]
    genes = _read_gene_file(genes_file, "the gene file")
    if len(genes) != model.n_features_in_:
        raise CommandLineError(
            f"the gene file '{genes_file}' names {len(genes):,} genes and the model has "
            f"{model.n_features_in_:,}: give the genes.txt that prep wrote for train's input."
        )
    names = getattr(model, "feature_names_in_", None)
    if names is not None:
        # the model keeps its genes' names: a file of other genes would mislabel its scores
        _check_gene_file(genes, [str(v) for v in names], genes_file, "the model's genes")
    return genes


def _check_gene_file(genes, names, path, whose):
    """Refuse a gene file with a column whose names sit at other places than in ``names``:
    another run's genes, or these in another order. Names that appear once in the column
    and once in ``names`` must be at the same place; other names (ids for symbols, a name
    AnnData's var_names_make_unique suffixed, a column of feature types) say nothing."""
    if all(name == str(i) for i, name in enumerate(names)):
        return  # numbered columns (a header pandas wrote for a matrix): no names to compare
    place = {}
    for i, name in enumerate(names):
        place[name] = None if name in place else i  # a repeated name has no place
    for c in range(genes.shape[1]):
        column = [str(v) for v in genes[:, c]]
        counts = Counter(column)
        for i, name in enumerate(column):
            j = place.get(name)
            if j is not None and j != i and counts[name] == 1:
                raise CommandLineError(
                    f"the gene file '{path}' does not name {whose} in their order: its gene "
                    f"{i + 1} is {name!r}, which is gene {j + 1} of {whose}. Give the "
                    "genes.txt that prep wrote for these data (or leave the option out: the "
                    "names are known)."
                )


def _score(args):
    model = _load_model(args.model)
    genes = _model_genes(model, args.genes)
    cell_score = np.asarray(model.loading_scores())
    gene_score = np.asarray(model.component_scores()).T
    if genes is None:
        names = np.arange(gene_score.shape[0]).astype(str)
    else:
        names = genes[:, min(args.name_col, genes.shape[1] - 1)]
    order = np.argsort(-gene_score, axis=0, kind="stable")[: args.n_top]
    ranked = names[order]
    out = _outprefix(args.outdir or Path(args.model).with_suffix(""), args.prefix)
    written = [out("cell_score.txt"), out("gene_score.txt"), out("ranked_genes.txt")]
    _write_table(written[0], cell_score)
    _write_table(written[1], gene_score)
    _write_lines(written[2], ranked)
    print(
        f"score {args.model}: {type(model).__name__}, {cell_score.shape[0]:,} cells, "
        f"{gene_score.shape[0]:,} genes, {gene_score.shape[1]} factors"
    )
    print("genes of highest score in each factor")
    for k in range(gene_score.shape[1]):
        print(f"  factor {k + 1:<3} " + ", ".join(ranked[:5, k]))
    print("written: " + ", ".join(str(p) for p in written))


def _refuse_repeated_names(wanted, have, args):
    """Names that two genes share cannot say which column is which (gene symbols repeat in
    10x's features.tsv; their ids do not)."""
    in_model, in_input = Counter(wanted.tolist()), Counter(have.tolist())
    repeated = sorted(key for key in in_model if in_model[key] > 1 or in_input[key] > 1)
    if repeated:
        raise CommandLineError(
            f"{len(repeated):,} gene names are shared by several genes in the model's genes "
            f"or in '{args.input}' (first {repeated[:3]}), so the columns cannot be matched "
            "by them. Match by unique names: give the genes' ids to train (--genes with the "
            "id column first) and to project (--input-genes, or -g with the model's genes "
            "file), or make the names unique (anndata's var_names_make_unique)."
        )


def _align(X, input_genes, model_genes, args):
    """INPUT's columns of the model's genes, in the model's order, matched by name."""
    for mc in range(model_genes.shape[1]):
        wanted = _gene_keys(model_genes[:, mc], True)
        for ic in range(input_genes.shape[1]):
            have = _gene_keys(input_genes[:, ic], True)
            position = {key: j for j, key in reversed(list(enumerate(have)))}
            if all(key in position for key in wanted):
                _refuse_repeated_names(wanted, have, args)
                return X[:, [position[key] for key in wanted]]
    # the model's column of names that INPUT matches best (ids or symbols) says which of
    # its genes are missing
    have = set(_gene_keys(input_genes.ravel(), True))
    missing = min(
        ([g for g in _gene_keys(model_genes[:, mc], True) if g not in have]
         for mc in range(model_genes.shape[1])),
        key=len,
    )  # fmt: skip
    wanted = model_genes[:, 0]
    raise CommandLineError(
        f"{len(missing):,} of the model's {len(wanted):,} genes are not in '{args.input}' "
        f"(first {missing[:3]}): project needs the counts of every trained gene. Give the "
        "raw counts of all genes (not a filtered matrix of other genes), name them as the "
        "model does (--input-genes FILE, --genes FILE for the model's), or write 0 counts "
        "for genes that were not measured."
    )


def _project(args):
    model = _load_model(args.model)
    model_genes = _model_genes(model, args.genes)
    X, cells, input_genes = _read_counts(args.input, args.transpose, args.layer, args.input_genes)
    n_genes = X.shape[1]
    if model_genes is not None and input_genes is not None:
        X = _align(X, input_genes, model_genes, args)
        how = f"the model's {X.shape[1]:,} genes selected by name from {n_genes:,}"
    elif X.shape[1] != model.n_features_in_:
        raise CommandLineError(
            f"'{args.input}' has {X.shape[1]:,} genes and the model {model.n_features_in_:,}, "
            "and the genes cannot be matched by name: "
            + (
                "INPUT names no gene (--input-genes FILE names them)"
                if input_genes is None
                else "the model names no gene (--genes FILE, prep's genes.txt, names them)"
            )
            + ". Without names, INPUT must have the model's genes in its order."
        )
    else:
        how = "the genes matched by position"
    print(f"project {args.input}: {X.shape[0]:,} cells, {how}")
    with warnings.catch_warnings():
        # the columns were aligned above; a matrix carries no names to compare
        warnings.filterwarnings("ignore", message="X does not have valid feature names")
        cell_score = np.asarray(model.loading_scores(X))
        loadings = np.asarray(model.transform(X))
    out = _outprefix(args.outdir or Path(args.model).parent, args.prefix)
    written = [out("projected.cell_score.txt"), out("projected.loadings.txt")]
    _write_table(written[0], cell_score)
    _write_table(written[1], loadings)
    if cells is not None:
        written.append(out("projected.cells.txt"))
        _write_lines(written[2], cells)
    print("written: " + ", ".join(str(p) for p in written))


_COMMANDS = {"prep": _prep, "train": _train, "score": _score, "project": _project}


def main(argv=None):
    """Run ``sklearn-cogaps-counts``.

    Parameters
    ----------
    argv : list of str, default=None
        The arguments (without the program name); None reads ``sys.argv``.

    Returns
    -------
    status : int
        0 on success, 2 when the input or the options are wrong (the message goes to
        stderr), 130 (as a shell reports SIGINT) after Ctrl-C.
    """
    parser = build_counts_parser()
    argv = sys.argv[1:] if argv is None else [str(a) for a in argv]
    refuse_peer_commands(parser, argv)
    args = parser.parse_args(argv)
    with contextlib.redirect_stdout(_PipeTolerantOutput(sys.stdout)):
        try:
            _COMMANDS[args.command](args)
        except KeyboardInterrupt:
            print(f"{parser.prog} {args.command}: interrupted.", file=sys.stderr)
            return 130
        except (ValueError, OSError) as exc:
            if getattr(args, "verbose", 0) > 1:  # -vv: the whole traceback, for a bug report
                raise
            print(f"{parser.prog} {args.command}: error: {exc}", file=sys.stderr)
            return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
