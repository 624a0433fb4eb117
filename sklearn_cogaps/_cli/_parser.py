"""The command line's arguments and help."""

import argparse
import difflib
import math
import re

from ._read import INPUT_FORMATS
from ._write import OUTPUT_FORMATS

__all__ = ["NAMED_UNCERTAINTIES", "build_parser"]

# The named uncertainties of CoGAPS.fit, as --uncertainty takes them.
NAMED_UNCERTAINTIES = {
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
  .gct files (R CoGAPS's GCT 1.2 or 1.3) are genes x samples by their format: they are
  read transposed, with or without --transpose.
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
  complete (False when the chain was interrupted), converged (False after a
  convergence warning), n_calibration and n_sampling (iterations run in each
  phase), uncertainty_model, with --n-chains n_chains and the diagnostics
  rhat_chisq, rhat_patterns, rhat_amplitudes, ess_bulk_chisq, ess_bulk_patterns
  and ess_bulk_amplitudes (split R-hat and bulk ESS), with --n-snapshots the
  kept states patterns_snapshots, amplitudes_snapshots, snapshot_iterations (and
  snapshot_chains, the chain of each), with --n-chains each chain's means
  chain_patterns (chains x samples x K) and chain_amplitudes, and
  sample_names / feature_names when the input has them:
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
  "partial" in OUT_status.csv and uns['cogaps']), beside earlier results of OUT
  (as OUT.partial.npz) rather than over them, and the exit status is 130. With
  --n-chains > 1 the chains completed are kept (none when they run at once, with
  --n-jobs); with --checkpoint FILE, the same command resumes the run.
"""


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


def _fraction(text):
    """A number strictly between 0 and 1 (``--tol``)."""
    try:
        value = float(text)
    except ValueError:
        value = None
    if value is None or not 0.0 < value < 1.0:
        raise argparse.ArgumentTypeError(f"must be a number between 0 and 1, got {text!r}")
    return value


def _non_negative_int(text):
    """An integer of at least 0 (``--n-snapshots``)."""
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be an integer of at least 0, got {text!r}")
    return value


class SuggestingParser(argparse.ArgumentParser):
    """argparse's parser, whose refusal of options it does not know names the option
    meant: the same name with ``-`` for ``_`` (``--n_components``), a near spelling, or the
    option of a word of R's (``--n-patterns``)."""

    _MEANT = {
        "n-patterns": "-k/--n-components",
        "patterns": "-k/--n-components",
        "n-iterations": "-n/--max-iter",
        "iterations": "-n/--max-iter",
        "n-iter": "-n/--max-iter",
        "random-state": "--seed",
    }

    _answers_r_names = True

    def parse_args(self, args=None, namespace=None):
        parsed, extras = self.parse_known_args(args, namespace)
        if extras:
            # a subcommand's options are refused by the subcommand's parser, which knows them
            chosen = getattr(self, "subcommands", {}).get(getattr(parsed, "command", None))
            (chosen or self).error("unrecognized arguments: " + " ".join(extras))
        return parsed

    def error(self, message):
        prefix = "unrecognized arguments: "
        if message.startswith(prefix):
            options = [
                name
                for action in self._actions
                if action.help is not argparse.SUPPRESS
                for name in action.option_strings
                if name.startswith("--")
            ]
            hints = []
            for word in message[len(prefix) :].split():
                if not word.startswith("--"):
                    continue
                written = word.split("=")[0]
                name = written[2:].replace("_", "-").lower()
                r_name = _r_spellings().get(written[2:].lower())
                if r_name is not None and self._answers_r_names:
                    hints.append(f"{written} {r_name}")
                    continue
                close = difflib.get_close_matches(f"--{name}", options, n=1, cutoff=0.8)
                meant = self._MEANT.get(name)
                if meant is not None and meant.split()[0].split("/")[-1] not in options:
                    meant = None  # an option of another command (--nfactors of train)
                meant = meant or (close[0] if close else None)
                if meant:
                    hints.append(f"{written}: write {meant}")
            if hints:
                message += " (" + "; ".join(hints) + ")"
        super().error(message)


def build_parser():
    """The argument parser of ``sklearn-cogaps``."""
    parser = SuggestingParser(
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
    for flags, default, metavar, text in [
        (
            ("--atom-density-w", "--alpha-w"),
            0.01,
            "A",
            "expected number of atoms per element of the patterns W, their sparsity "
            "(CoGAPS's alphaP; --alpha-w is its former name",
        ),
        (
            ("--atom-density-h", "--alpha-h"),
            0.01,
            "A",
            "the same for the amplitudes H (CoGAPS's alphaA; --alpha-h is its former name",
        ),  # fmt: skip
        (
            ("--max-gibbs-mass-w",),
            100.0,
            "M",
            "largest Gibbs mass of an atom of W, in units of 1/lambda (CoGAPS's maxGibbsMassP",
        ),
        (("--max-gibbs-mass-h",), 100.0, "M", "the same for H (CoGAPS's maxGibbsMassA"),
    ]:
        parser.add_argument(
            *flags,
            type=_positive(float),
            default=default,
            metavar=metavar,
            help=f"{text}; default {default:g})",
        )
    parser.add_argument(
        "--solver",
        "--birth-death",
        choices=("cogaps", "reversible"),
        default="cogaps",
        help="the chain's birth and death moves: CoGAPS's (default) or reversible-jump ones "
        "that sample the model's posterior exactly (--birth-death is its former name)",
    )
    parser.add_argument(
        "--init",
        choices=("empty", "nmf"),
        default="nmf",
        help="the chain's start: a weighted NMF of INPUT with the fit's uncertainty (default), "
        "which reaches the posterior in far fewer iterations, or an empty atomic domain "
        "annealed over the calibration, as the C++ CoGAPS starts",
    )
    parser.add_argument(
        "--n-chains",
        type=_positive(int),
        default=1,
        metavar="N",
        help="independent chains, their patterns matched and their posteriors pooled, with "
        "the split R-hat and effective sample sizes of the chi-square in the summary "
        "(default 1)",
    )
    parser.add_argument(
        "--tol",
        type=_fraction,
        default=None,
        metavar="TOL",
        help="with --n-chains, end each phase by the chains' diagnostics, --max-iter a cap: "
        "the calibration once their chi-squares agree, the sampling once every posterior "
        "mean has a Monte Carlo error of at most TOL posterior standard deviations "
        "(default: run --max-iter iterations in each phase)",
    )
    parser.add_argument(
        "--n-jobs",
        type=int,
        default=None,
        metavar="N",
        help="with --n-chains, chains run at a time in worker processes (-1: one per core; "
        "default: one after the other); the results do not depend on it",
    )
    parser.add_argument(
        "--n-snapshots",
        type=_non_negative_int,
        default=0,
        metavar="N",
        help="states of W and H kept from each chain's sampling phase, evenly spaced "
        "(CoGAPS's nSnapshots), written to an .npz output; with --n-chains they are the "
        "draws the diagnostics read (0, the default: 100 per chain then, none for one chain)",
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
        "fit its transpose (a .gct is genes x samples by its format and always read "
        "transposed; -t then applies to the uncertainty alone)",
    )
    parser.add_argument(
        "--sparse-optimization",
        action="store_true",
        help="CoGAPS's sparse-data model: a named uncertainty (by default 0.1 for zeros and "
        "max(0.1 * x, 0.1) otherwise) computed from the stored values, memory growing with "
        "the non-zeros (sparse .mtx and .h5ad inputs use it unless --uncertainty is a FILE)",
    )
    parser.add_argument(
        "--checkpoint",
        metavar="FILE",
        help="keep the chain's state in FILE during the fit (CoGAPS's checkpointOutFile), "
        "every chain's with --n-chains: a run started while FILE exists resumes from it "
        "(checkpointInFile) and gives the results of an uninterrupted run, also after a "
        "crash or kill -9; deleted when the fit completes",
    )
    parser.add_argument(
        "--checkpoint-every",
        type=_positive(int),
        default=500,
        metavar="N",
        help="iterations between two checkpoints (CoGAPS's checkpointInterval; default 500)",
    )
    parser.add_argument(
        "--checkpoint-minutes",
        type=_positive(float),
        metavar="M",
        help="also write a checkpoint when M minutes have passed since the last one",
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
    for r_name, option in _R_OPTIONS.items():
        parser.add_argument(f"--{r_name}", action=RefusedOption,
                            message="{option} is R CoGAPS's name; write " + option)  # fmt: skip
    return parser


def _r_spellings():
    """R CoGAPS's names as options are spelled (``--alpha-a``, ``--niterations``), and what
    to write: a close match among ours would name another matrix (``--alpha-w`` for
    ``alphaA``) or another unit. They are answered when refused, not registered, so that
    argparse's abbreviations of ours (``--n-s``, ``--output-``) stay unambiguous."""
    spellings = {}
    for r_name, option in _R_OPTIONS.items():
        kebab = re.sub(r"(?<=[a-z])([A-Z])", r"-\1", r_name).lower()
        for name in (kebab, r_name.lower()):
            spellings[name] = f"is R CoGAPS's name {r_name}; write {option}"
    return spellings


# R CoGAPS's parameter names, written as options out of habit, and the option to write.
_R_OPTIONS = {
    "nIterations": "-n/--max-iter N (iterations of each phase)",
    "nPatterns": "-k/--n-components K",
    "alphaA": "--atom-density-h (its A is our H)",
    "alphaP": "--atom-density-w (its P is our W)",
    "maxGibbsMassA": "--max-gibbs-mass-h",
    "maxGibbsMassP": "--max-gibbs-mass-w",
    "sparseOptimization": "--sparse-optimization",
    "nThreads": "--threads N",
    "transposeData": "-t/--transpose",
    "checkpointOutFile": "--checkpoint FILE",
    "checkpointInFile": "--checkpoint FILE (a run resumes from it when it exists)",
    "checkpointInterval": "--checkpoint-every N",
    "nSnapshots": "--n-snapshots N",
    "snapshotPhase": "--n-snapshots N for the sampling phase's states (other phases: "
    "CoGAPS(snapshot_phase=...) in Python)",
    "outputFrequency": "-v/--verbose (a progress line about every tenth of --max-iter)",
    "nSets": "nothing here: distributed mode is CoGAPS(distributed='genome-wide', n_sets=N) "
    "in Python",
    "distributed": "nothing here: distributed mode is CoGAPS(distributed='genome-wide', "
    "n_sets=N) in Python",
}


class RefusedOption(argparse.Action):
    """An option of a peer's command line (R CoGAPS's parameter names, scHPF's options with
    no equivalent): refused with ``message``, whose ``{option}`` is the option as written,
    rather than argparse's bare "unrecognized arguments"."""

    def __init__(self, option_strings, dest, message="", **kwargs):
        kwargs.update(nargs="?", default=argparse.SUPPRESS, help=argparse.SUPPRESS)
        super().__init__(option_strings, argparse.SUPPRESS, **kwargs)
        self.message = message

    def __call__(self, parser, namespace, values, option_string=None):
        parser.error(self.message.format(option=option_string))
