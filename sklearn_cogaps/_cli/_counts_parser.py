"""The arguments and help of ``sklearn-cogaps-counts``: prep, train, score and project, as
scHPF's command line names them, for count matrices."""

import argparse
import math

from ._parser import RefusedOption, SuggestingParser

__all__ = ["build_counts_parser", "refuse_peer_commands"]

PROG = "sklearn-cogaps-counts"

COUNT_FORMATS = (
    ".mtx, .h5ad, .csv, .tsv, .npy, scHPF's .txt (the text formats also as .gz, .bz2 or .xz)"
)

DESCRIPTION = """\
Poisson factorisation of count matrices (single-cell UMI counts, word counts) from the
shell, in four steps named as scHPF's command line names them:

  prep     filter the genes of a cells x genes count matrix
  train    fit HierarchicalPMF (or WeightedBackgroundPMF) and save the model
  score    write the cell and gene scores and the genes ranked in each factor
  project  score new cells on the trained genes

Run `sklearn-cogaps-counts COMMAND -h` for the formats and outputs of each.
"""

_INPUTS = f"""\
input formats: {COUNT_FORMATS}
  cells x genes (--transpose for a genes x cells .mtx, .csv, .tsv or .npy).
  .csv/.tsv files have a header row (gene names) and an index column (cell names);
  .h5ad files (AnnData, cells x genes) need the anndata package, and --layer NAME
  reads a layer (raw counts are often in layers['counts']) instead of X.
  scHPF's .txt files are whitespace-separated, genes x cells, without a header,
  each line a gene: its ENSEMBL id, its name, then its count in every cell.
  .mtx and .npy files carry no gene names: --genes FILE names the columns.
  Counts are whole numbers of at least 0; normalised or log-transformed values
  are refused."""

_GENE_LISTS = """\
gene files (--whitelist, --blacklist, --genes): one gene a line, or columns
  separated by tabs (or spaces) as scHPF's gene lists (ENSEMBL id, name) and
  10x's features.tsv (id, name, type). Empty lines and lines starting with # are
  skipped. A whitelist keeps only the genes on it, a blacklist drops the genes on
  it (even whitelisted ones). INPUT's first name column is matched against the
  list's first column, as scHPF does; --filter-by-gene-name matches the second
  columns (gene names) instead. When only one side has a single column (one name
  per gene), it is matched against the other side's column, of its first two,
  that shares more names with it. ENSEMBL ids match without their version
  (ENSG00000186092.6 is ENSG00000186092) unless --no-split-on-dot."""

_OUTDIR = """\
output files are written to OUTDIR (created when missing); with -p PREFIX their names
  start with "PREFIX." (for example PREFIX.genes.txt)."""

PREP_EPILOG = f"""\
{_INPUTS}

{_GENE_LISTS}

filtering: a gene is kept when it is detected (a count of at least 1) in at least
  --min-cells cells, and passes the whitelist and the blacklist. A --min-cells
  between 0 and 1 is a fraction of the cells, rounded to the nearest whole number
  (the default 0.01 is 1% of the cells); 1 or more is a number of cells.

{_OUTDIR}
  OUTDIR defaults to the folder of INPUT (prep refuses to write over INPUT).
  PREFIX.filtered.mtx  the kept counts, cells x genes, Matrix Market of integers
                       (scipy.io.mmread reads it), the input of train
  PREFIX.genes.txt     the kept genes in the order of the columns, one a line: their
                       name, all the columns of --genes (or of a .txt input's id and
                       name) separated by tabs, or their 0-based column number in
                       INPUT when it names no genes
  PREFIX.cells.txt     the cell names, one a line, when INPUT has them
"""

TRAIN_EPILOG = f"""\
{_INPUTS}
  The input is normally prep's PREFIX.filtered.mtx.

models: hpmf is sklearn_cogaps.HierarchicalPMF (scHPF's model, its priors learned
  by empirical Bayes); wbpmf is sklearn_cogaps.WeightedBackgroundPMF (a rank-one
  background of cell and gene totals, and sparse factors). --n-init starts the
  fit N times and keeps the start of highest final ELBO (scHPF's --ntrials).

{_OUTDIR}
  OUTDIR defaults to the folder of INPUT.
  PREFIX.model.joblib  the fitted estimator, saved with joblib: a pickle, to be
                       loaded only from a trusted source (joblib.load(path) gives
                       the estimator back, with the same version of sklearn_cogaps).
                       With --genes (or an INPUT that names its genes) it records
                       the gene names as feature_names_in_, which score and
                       project use.

scHPF's options without an equivalent are refused with what to write instead.
"""

SCORE_EPILOG = f"""\
{_OUTDIR}
  OUTDIR defaults to a folder named as MODEL without .joblib.
  PREFIX.cell_score.txt    cells x factors, tab-separated, no header: the cell
                           scores, est.loading_scores() of the training cells
  PREFIX.gene_score.txt    genes x factors, tab-separated, no header: the gene
                           scores, est.component_scores() transposed
  PREFIX.ranked_genes.txt  one column per factor, tab-separated, no header: the
                           genes ranked by gene score, highest first (the top
                           --n-top, or all), named from --genes FILE (its column
                           --name-col), else from the model's feature_names_in_,
                           else by their 0-based column number
  Rows follow the cells and genes of train's input. numpy.loadtxt reads the scores
  (numpy.loadtxt(path, dtype=str, delimiter="\t") the ranked genes).
"""

PROJECT_EPILOG = f"""\
{_INPUTS}
  When the model knows its genes (--genes FILE, else its feature_names_in_) and
  INPUT names its genes (or --input-genes names them), the trained genes are
  selected from INPUT by name, in the model's order, and genes missing from INPUT
  are refused; otherwise INPUT must have the model's genes, in its order.

{_OUTDIR}
  OUTDIR defaults to the folder of MODEL.
  PREFIX.projected.cell_score.txt  new cells x factors, tab-separated, no header:
                                   est.loading_scores(X_new)
  PREFIX.projected.loadings.txt    new cells x factors: est.transform(X_new), the
                                   posterior mean loadings with the genes fixed
  PREFIX.projected.cells.txt       the new cells' names, when INPUT has them
"""


def _number(kind, low):
    def parse(text):
        try:
            value = kind(text)
        except ValueError:
            value = None
        if value is None or not math.isfinite(value) or value < low:
            raise argparse.ArgumentTypeError(
                f"must be {'an integer' if kind is int else 'a number'} of at least {low}, "
                f"got {text!r}"
            )
        return value

    parse.__name__ = f"{kind.__name__} >= {low}"
    return parse


def _refuse(parser, flags, advice):
    """scHPF's option ``flags``, with no equivalent here: refused with ``advice``."""
    escaped = advice.replace("{", "{{").replace("}", "}}")
    message = "{option} is scHPF's, with no equivalent here: " + escaped
    parser.add_argument(*flags, action=RefusedOption, message=message)


_NO_VALIDATION = (
    "there is no set of validation cells. --n-init keeps the best start by the training "
    "ELBO; to stop on held-out counts, fit in Python with HierarchicalPMF(...).fit(X_train, "
    "X_val=X_held) on a binomial thinning of the same cells (see the HierarchicalPMF guide)."
)


def refuse_peer_commands(parser, argv):
    """Refuse scHPF's commands and its ``-v FILE`` that have no equivalent, saying what to
    write instead (argparse would only list the valid choices, or call FILE unrecognised)."""
    if not argv:
        return
    if argv[0] == "prep-like":
        parser.error(
            "prep-like is a command of scHPF with no equivalent here: project selects and "
            "orders the trained genes of its INPUT by name, so run project on the raw counts "
            "(with --input-genes FILE for an .mtx) and the model's genes (--genes)."
        )
    if argv[0] == "train-pool":
        parser.error(
            "train-pool is a command of scHPF with no equivalent here: use train with "
            "--n-init N (the starts run one after the other, each on --threads threads); "
            "for several K, run train once per K."
        )
    if argv[0] == "train" and "-v" in argv:
        after = argv[argv.index("-v") + 1 : argv.index("-v") + 2]
        if after and not after[0].startswith("-"):
            parser.error(
                f"-v takes no value here (it is --verbose): '-v {after[0]}' is scHPF's "
                "-v/--validation-cells, which has no equivalent: " + _NO_VALIDATION
            )


def _common(sub, input_help=None):
    if input_help is not None:
        sub.add_argument("-i", "--input", required=True, metavar="INPUT", help=input_help)
    sub.add_argument(
        "-o",
        "--outdir",
        metavar="OUTDIR",
        help="folder of the output files, created when missing (default: see below)",
    )
    sub.add_argument(
        "-p", "--prefix", default="", help="prefix of the output files' names (default: none)"
    )


def _reading(sub, genes_flags, genes_help):
    sub.add_argument(*genes_flags, dest="genes", metavar="FILE", help=genes_help)
    sub.add_argument(
        "--transpose",
        action="store_true",
        help="INPUT is genes x cells (.mtx, .csv, .tsv, .npy): read its transpose",
    )
    sub.add_argument("--layer", metavar="NAME", help="with an .h5ad INPUT: read this layer, not X")


def _add_prep(subparsers):
    sub = subparsers.add_parser(
        "prep",
        help="filter the genes of a cells x genes count matrix",
        description="Filter the genes of a count matrix and write it for train: genes detected\n"
        "in too few cells, off the whitelist or on the blacklist are dropped.",
        epilog=PREP_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        allow_abbrev=False,
    )
    _common(sub, f"cells x genes counts ({COUNT_FORMATS})")
    sub.add_argument(
        "-m",
        "--min-cells",
        type=_number(float, 0),
        default=0.01,
        metavar="N",
        help="keep the genes detected in at least N cells; 0 < N < 1 is a fraction of the "
        "cells (default 0.01)",
    )
    sub.add_argument("-w", "--whitelist", metavar="FILE", help="keep only the genes on this list")
    sub.add_argument(
        "-b", "--blacklist", metavar="FILE", help="drop the genes on this list (even whitelisted)"
    )
    _reading(
        sub,
        ("--genes",),
        "gene names of INPUT's columns, one a line or in columns (instead of its own)",
    )
    sub.add_argument(
        "--filter-by-gene-name",
        action="store_true",
        help="match the gene lists' second column (names) against INPUT's gene names",
    )
    sub.add_argument(
        "--no-split-on-dot",
        action="store_true",
        help="match ENSEMBL ids with their version (by default ENSG...92.6 is ENSG...92)",
    )
    no_split = (
        "prep sets no cells aside, as train takes no validation cells (it keeps the best of "
        "--n-init starts by the training ELBO); to score held-out cells, leave them out of "
        "INPUT and run project on them."
    )
    _refuse(sub, ("-nvc", "--n-validation-cells"), no_split)
    _refuse(sub, ("-vgid", "--validation-group-ids"), no_split)
    _refuse(sub, ("--validation-max-group-frac",), no_split)
    return sub


def _add_train(subparsers):
    sub = subparsers.add_parser(
        "train",
        help="fit a Poisson factorisation and save it",
        description="Fit HierarchicalPMF (or WeightedBackgroundPMF) to counts, the best of\n"
        "--n-init starts, and save the fitted estimator with joblib (a pickle: load it\n"
        "only from a trusted source).",
        epilog=TRAIN_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        allow_abbrev=False,
    )
    _common(sub, f"cells x genes counts, normally prep's PREFIX.filtered.mtx ({COUNT_FORMATS})")
    sub.add_argument(
        "-k",
        "--n-components",
        "--nfactors",
        type=_number(int, 1),
        required=True,
        metavar="K",
        help="number of factors (scHPF's --nfactors)",
    )
    sub.add_argument(
        "-t",
        "--n-init",
        "--ntrials",
        type=_number(int, 1),
        default=1,
        metavar="N",
        help="fits from N starts; the one of highest ELBO is kept (scHPF's --ntrials; default 1)",
    )
    sub.add_argument(
        "--model",
        choices=("hpmf", "wbpmf"),
        default="hpmf",
        help="HierarchicalPMF (hpmf, the default) or WeightedBackgroundPMF (wbpmf)",
    )
    sub.add_argument(
        "--solver",
        metavar="NAME",
        help="the estimator's solver: vbem (the default), newton or pathwise for hpmf; "
        "auto (the default), sequential or simultaneous for wbpmf",
    )
    sub.add_argument(
        "-M",
        "--max-iter",
        type=_number(int, 1),
        metavar="N",
        help="maximum iterations (default: the estimator's, 1000 for hpmf, 100 for wbpmf)",
    )
    sub.add_argument(
        "--tol",
        type=_number(float, 0),
        metavar="T",
        help="stop when an iteration changes the ELBO by at most T times its magnitude "
        "(default: the estimator's, 1e-6 for hpmf, 1e-8 for wbpmf)",
    )
    sub.add_argument("--seed", type=int, default=0, help="random_state of the fit (default 0)")
    sub.add_argument(
        "--threads",
        type=_number(int, 1),
        metavar="N",
        help="OpenMP threads (sets threadpoolctl's limit; default: OpenMP's own)",
    )
    sub.add_argument(
        "-v",
        "--verbose",
        action="count",
        default=0,
        help="print the fit's progress (-vv: every iteration, and tracebacks of errors)",
    )
    sub.add_argument(
        "--quiet", action="store_true", help="print no progress (the default; scHPF's --quiet)"
    )
    _reading(
        sub,
        ("-g", "--genes", "--genefile"),
        "gene names of INPUT's columns (prep's PREFIX.genes.txt), kept in the model",
    )
    fixed_run = "drop it: every iteration updates all cells and genes and checks the ELBO."
    for flags, advice in [
        (
            ("-m", "--min-iter"),
            "there is no minimum; the fit runs until the ELBO changes by at most --tol "
            "(relative) in an iteration, or --max-iter.",
        ),
        (
            ("-e", "--epsilon"),
            "write --tol T, the relative change of the ELBO in one iteration under which the "
            "fit stops (scHPF's epsilon is a change over --check-freq iterations of its loss).",
        ),
        (("-f", "--check-freq"), fixed_run),
        (("--better-than-n-ago",), fixed_run),
        (("-bs", "--batchsize"), fixed_run),
        (("-sl", "--smooth-loss"), fixed_run),
        (("-bts", "--beta-theta-simultaneous"), fixed_run),
        (("-rp", "--reproject"), fixed_run),
        (
            ("-a", "-c"),
            "the prior shapes are learned by empirical Bayes; to set or fix them, fit in "
            "Python with HierarchicalPMF(prior_shape=..., learn_prior=...).",
        ),
        (("--float32",), "drop it: the fit computes in float64."),
        (("-sa", "--save-all"), "only the best start is saved; run train once per --seed."),
        (("--validation-cells",), _NO_VALIDATION),
        (("-nvc", "--n-validation-cells"), _NO_VALIDATION),
        (("--njobs",), "write --threads N."),
    ]:
        _refuse(sub, flags, advice)
    return sub


def _add_score(subparsers):
    sub = subparsers.add_parser(
        "score",
        help="write cell scores, gene scores and ranked genes",
        description="Write the cell and gene scores of a model saved by train, and the genes\n"
        "ranked by their score in each factor.",
        epilog=SCORE_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        allow_abbrev=False,
    )
    sub.add_argument(
        "-m",
        "--model",
        required=True,
        metavar="MODEL",
        help="PREFIX.model.joblib written by train (a pickle: only from a trusted source)",
    )
    _common(sub)
    sub.add_argument(
        "-g",
        "--genes",
        "--genefile",
        metavar="FILE",
        help="gene names, one a line in the order of the model's genes (prep's PREFIX.genes.txt)",
    )
    sub.add_argument(
        "--name-col",
        type=_number(int, 0),
        default=1,
        metavar="C",
        help="0-based column of --genes holding the names; past its last column, the last "
        "(default 1, as scHPF)",
    )
    sub.add_argument(
        "-n",
        "--n-top",
        type=_number(int, 1),
        metavar="N",
        help="rank only the N genes of highest score in each factor (default: all)",
    )
    return sub


def _add_project(subparsers):
    sub = subparsers.add_parser(
        "project",
        help="score new cells on a trained model",
        description="Score new cells on the genes of a model saved by train (the genes fixed).",
        epilog=PROJECT_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        allow_abbrev=False,
    )
    sub.add_argument(
        "-m",
        "--model",
        required=True,
        metavar="MODEL",
        help="PREFIX.model.joblib written by train (a pickle: only from a trusted source)",
    )
    _common(sub, f"cells x genes counts of the new cells ({COUNT_FORMATS})")
    sub.add_argument(
        "-g",
        "--genes",
        metavar="FILE",
        help="the model's genes (prep's PREFIX.genes.txt; default: its feature_names_in_)",
    )
    sub.add_argument(
        "--input-genes", metavar="FILE", help="gene names of INPUT's columns (replaces its own)"
    )
    sub.add_argument(
        "--transpose",
        action="store_true",
        help="INPUT is genes x cells (.mtx, .csv, .tsv, .npy): read its transpose",
    )
    sub.add_argument("--layer", metavar="NAME", help="with an .h5ad INPUT: read this layer, not X")
    fixed = "project uses the settings the model was trained with for the new cells."
    _refuse(sub, ("--recalc-bp",), "the priors are the trained model's; " + fixed)
    for flag in ("--max-iter", "--min-iter", "--epsilon", "--check-freq"):
        _refuse(sub, (flag,), fixed)
    return sub


def build_counts_parser():
    """The argument parser of ``sklearn-cogaps-counts``.

    Returns
    -------
    parser : argparse.ArgumentParser
        The parser, with the subcommands prep, train, score and project.
    """
    parser = _CountsParser(
        prog=PROG,
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        allow_abbrev=False,
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    _add_prep(subparsers)
    _add_train(subparsers)
    _add_score(subparsers)
    _add_project(subparsers)
    parser.subcommands = subparsers.choices
    return parser


class _CountsParser(SuggestingParser):
    """The parser of the commands and of each command: an option it does not know is
    refused with the option meant (``--n_components``, ``--maxiter``), by the command's
    parser, whose usage it prints."""

    _answers_r_names = False
    _MEANT = {
        "nfactors": "-k/--n-components",
        "n-factors": "-k/--n-components",
        **dict.fromkeys(("n-iter", "niter", "n-iterations", "iterations"), "-M/--max-iter"),
    }
