"""Running the command line: the built-in example, a fit of the user's matrix, and the
summary it prints."""

import contextlib
import io
import os
import re
import sys
import time
import warnings
from pathlib import Path

import numpy as np
from scipy import sparse

from .._cogaps._chains import entries_rhat_threshold
from .._utils._checkpoint import defer_removal
from .._utils._diagnostics import RHAT_LIMIT, RHAT_THRESHOLD
from .._utils._validation import first_difference, label_mismatch
from ._parser import NAMED_UNCERTAINTIES, build_parser
from ._read import CommandLineError, _kind, read_matrix
from ._write import chain_status, write_h5ad, write_results

__all__ = ["main"]

# A file with this many times more rows than columns is likely genes x samples.
_TALL = 20


class _PipeTolerantOutput(io.TextIOBase):
    """Standard output that a reader may close early (``sklearn-cogaps ... | head``).

    The summary is a report, the results are the files: once the reader has gone, the rest
    of the report is dropped and the run goes on to write its files, where a plain ``print``
    would stop it with a BrokenPipeError.
    """

    def __init__(self, stream):
        self._stream = stream
        self.closed_by_reader = False

    def _drop_the_rest(self):
        self.closed_by_reader = True
        # what the stream still buffers goes to /dev/null at exit, not to a closed pipe
        with contextlib.suppress(OSError, ValueError, io.UnsupportedOperation):
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, self._stream.fileno())
            os.close(devnull)

    def write(self, text):
        if not self.closed_by_reader:
            try:
                self._stream.write(text)
            except BrokenPipeError:
                self._drop_the_rest()
        return len(text)

    def flush(self):
        if not self.closed_by_reader:
            try:
                self._stream.flush()
            except BrokenPipeError:
                self._drop_the_rest()

    @property
    def encoding(self):
        return getattr(self._stream, "encoding", None)

    def writable(self):
        return True


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
    from .._cogaps._uncertainty import named_uncertainty as _named_uncertainty

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


# The estimator's advice names its Python parameters; on the command line they are options.
_OPTION_NAMES = (
    ("max_iter (now", "-n/--max-iter (now"),
    ("Raise max_iter, or n_chains and n_snapshots", "Raise --max-iter, or --n-chains and "
     "--n-snapshots"),
    ("raise max_iter or n_snapshots", "raise --max-iter or --n-snapshots"),
    ("or raise n_snapshots or n_chains", "or raise --n-snapshots or --n-chains"),
    ("rhat_, ess_bulk_ and ess_tail_ hold the diagnostics", "the .npz output holds the "
     "diagnostics (rhat_*, ess_bulk_*)"),
    ("Fit again for the complete run (several chains do not continue with warm_start).",
     "Run again for the complete run."),
    # each chain's means: chain_patterns and chain_amplitudes of the .npz output
    ("chain_loadings_ and chain_components_", "the .npz's chain_patterns and "
     "chain_amplitudes"),
    ("(chain_loadings_[c], chain_components_[c])", "(chain_patterns[c] and "
     "chain_amplitudes[c] of the .npz output)"),
    # the advice on counts and on the default uncertainty
    ("pass uncertainty='poisson'", "pass --uncertainty poisson"),
    ("pass uncertainty='relative'", "pass --uncertainty relative"),
    ("Fit again with the same data, parameters and checkpoint_path",
     "Run the same command again with --checkpoint"),
    ("Set checkpoint_path=None", "Leave out --checkpoint"),
    # an interrupted chain: the command line has no warm start, and resumes by checkpoints
    ("Fit again with warm_start=True to continue the chain (max_iter more sampling "
     "iterations from where it stopped; a calibration cut short is not resumed), or fit "
     "again from the start for a complete fit.", "Run again for a complete fit; with "
     "--checkpoint FILE a run interrupted later resumes from its last checkpoint."),
    # n_jobs with one chain: the command line has no distributed mode
    ("is used only in distributed mode, and this fit ignores it", "runs the chains of "
     "--n-chains > 1, and this fit of one chain ignores it"),
    ("Set distributed to 'genome-wide' or 'single-cell'", "Use --n-chains"),
    ("set OMP_NUM_THREADS or use threadpoolctl.threadpool_limits", "use --threads N"),
    ("; n_jobs also runs the chains of n_chains > 1.", "."),
)  # fmt: skip

# The estimator's parameters that are options under another spelling; the names hold an
# underscore, so no word of the messages' prose is taken for one.
_PARAMETER_OPTIONS = {
    "n_components": "-k/--n-components",
    "max_iter": "--max-iter",
    "n_chains": "--n-chains",
    "n_snapshots": "--n-snapshots",
    "n_jobs": "--n-jobs",
    "checkpoint_path": "--checkpoint",
    "checkpoint_every": "--checkpoint-every",
    "checkpoint_minutes": "--checkpoint-minutes",
    "atom_density_W": "--atom-density-w",
    "atom_density_H": "--atom-density-h",
    "max_gibbs_mass_W": "--max-gibbs-mass-w",
    "max_gibbs_mass_H": "--max-gibbs-mass-h",
    "random_state": "--seed",
    "sparse_optimization": "--sparse-optimization",
}
_PARAMETER = re.compile(r"\b(" + "|".join(_PARAMETER_OPTIONS) + r")\b(=?)")


# A quoted value of a message (a path, a name): "'" not after a letter (R's, chain's) to
# the next "'" not before one
_QUOTED = re.compile(r"((?<!\w)'[^']*'(?!\w))")


def in_option_words(message):
    """The estimator's message with its parameters named as the command line's options
    (``checkpoint_path='run.ckpt'`` as ``--checkpoint 'run.ckpt'``); quoted values, such as
    a path with ``max_iter=500`` in a folder's name, are left as they are."""
    # the advice's phrases whole (some quote a value: uncertainty='poisson'), then the
    # parameters' names in the text between the quoted values
    for name, option in _OPTION_NAMES:
        message = message.replace(name, option)
    parts = _QUOTED.split(message)
    for i in range(0, len(parts), 2):
        parts[i] = _PARAMETER.sub(
            lambda m: _PARAMETER_OPTIONS[m.group(1)] + (" " if m.group(2) else ""), parts[i]
        )
    return "".join(parts)


def _fit(model, X, uncertainty, threads):
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
            model.fit(X, uncertainty=uncertainty)
        wall = time.perf_counter() - start
    for w in caught:
        # the fit's verdicts and advice, in the command line's words (not a Python
        # warning's place, which is the command line's own frame)
        if issubclass(w.category, (ConvergenceWarning, FitInterruptedWarning, UserWarning)):
            print(f"warning: {in_option_words(str(w.message))}", file=sys.stderr)
        else:
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    return wall, n_threads


def _phases(args):
    """The phases' lengths as the options ask them."""
    if args.tol is not None:
        return (f"at most {args.max_iter} calibration + {args.max_iter} sampling iterations "
                f"(--tol {args.tol}: each phase ends by the chains' diagnostics)")  # fmt: skip
    return f"{args.max_iter} calibration + {args.max_iter} sampling iterations"


def _chains(args):
    return f", {args.n_chains} chains" if args.n_chains > 1 else ""


def _print_summary(model, X, uncertainty, wall, n_threads):
    n_entries = X.shape[0] * X.shape[1]
    n_iter = model.n_iter_
    atoms = model.n_atoms_history_
    status = chain_status(model)
    posterior = "posterior mean" if status["sampling"] else "current state"
    print("chi-square")
    print(f"  empty model (W H = 0) {_empty_model_chisq(X, uncertainty):15,.1f}")
    if n_iter:
        print(f"  first iteration      {model.objective_history_[0]:16,.1f}")
        print(f"  last iteration       {model.objective_history_[-1]:16,.1f}")
    print(
        f"  {posterior:<20} {model.chisq_:16,.1f}   (X has {n_entries:,} entries: about that "
        "many if the uncertainty is right)"
    )
    if status["sampling"]:
        sampling = atoms[status["calibration"] :]
        print(
            f"atoms      W {atoms[-1, 0]:,}, H {atoms[-1, 1]:,} at the end; mean over the "
            f"sampling phase W {sampling[:, 0].mean():,.1f}, H {sampling[:, 1].mean():,.1f}"
        )
    elif n_iter:
        print(
            f"atoms      W {atoms[-1, 0]:,}, H {atoms[-1, 1]:,} at the end; the sampling phase "
            "never started: the results are the chain's last state, not a posterior mean"
        )
    rhat = getattr(model, "rhat_", None)
    n_kept = model.chain_loadings_.shape[0] if rhat is not None else 1
    if rhat is not None:
        kept = "" if status["complete"] else f" of {model.n_chains} (interrupted)"
        print(
            f"chains     {n_kept}{kept}: split R-hat of the chi-square {rhat['chisq']:.3f}, "
            f"bulk ESS {model.ess_bulk_['chisq']:,.0f}; largest R-hat of W "
            f"{np.nanmax(rhat['loadings']):.3f}, of H {np.nanmax(rhat['components']):.3f} "
            f"(above {RHAT_THRESHOLD} for the chi-square, "
            f"{min(entries_rhat_threshold(model)[0], RHAT_LIMIT):.3f} for the entries: run "
            "longer)"
        )
    # a resumed fit ran only the iterations after its checkpoint here
    resumed = getattr(model, "_resumed_at", 0)
    run = n_iter - resumed
    since = f"(resumed after iteration {resumed:,} of {n_iter:,}; " if resumed else "("
    if rhat is not None:  # several chains: n_iter_ is each chain's
        print(
            f"time       {wall:.2f} s wall for {n_kept} chains of {run:,} iterations {since}"
            f"{1000.0 * wall / max(run * n_kept, 1):.3f} ms per chain iteration), "
            f"{n_threads} thread(s)"
        )
    else:
        print(
            f"time       {wall:.2f} s wall for {run:,} iterations {since}"
            f"{1000.0 * wall / max(run, 1):.3f} ms per iteration), {n_threads} thread(s)"
        )
    if not status["complete"] and rhat is not None:
        print(
            f"INTERRUPTED: {n_kept} of {model.n_chains} chains kept, each after "
            f"{status['calibration']:,} calibration and {status['sampling']:,} sampling "
            "iterations: the results are partial"
        )
    elif not status["complete"]:
        print(
            f"INTERRUPTED after {status['calibration']:,} of {model.max_iter:,} calibration and "
            f"{status['sampling']:,} of {model.max_iter:,} sampling iterations: the results "
            "are partial"
        )


def _run_example(args, make_model):
    from .._utils._matching import match_components
    from ..datasets import make_patterns

    K = args.n_components or 3
    X, W, H = make_patterns(n_components=K, random_state=args.seed)
    model = make_model(K)
    print(
        f"CoGAPS on simulated data: {X.shape[0]} samples x {X.shape[1]} features made of {K} "
        f"patterns (sklearn_cogaps.datasets.make_patterns, random_state={args.seed})"
    )
    print(f"{_phases(args)}, {K} patterns fitted, start {args.init!r}{_chains(args)}\n")
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
        f"(the first that differs {first_difference(b, a)}); entries are matched by "
        "position, so values "
        f"would get other entries' standard deviations. Write the uncertainty with the "
        f"{what}s in the order of the input."
    )


def _refuse_negative(X, samples, features, args):
    """Refuse a negative value, named by the file's own row and column (a transposed
    file's rows are the genes)."""
    values = X.data if sparse.issparse(X) else X
    n_negative = int(np.count_nonzero(values < 0))
    if not n_negative:
        return
    coo = sparse.coo_matrix(X) if sparse.issparse(X) else None
    if coo is not None:
        first = np.flatnonzero(coo.data < 0)[0]
        i, j, value = coo.row[first], coo.col[first], coo.data[first]
    else:
        i, j = np.argwhere(X < 0)[0]
        value = X[i, j]
    transposed = args.transpose or args.input.lower().endswith(".gct")
    # an unnamed matrix (.npy, .mtx) is named by its 1-based places in the file
    samples = samples if samples is not None else [str(k + 1) for k in range(X.shape[0])]
    features = features if features is not None else [str(k + 1) for k in range(X.shape[1])]
    row, column = (features[j], samples[i]) if transposed else (samples[i], features[j])
    raise CommandLineError(
        f"row '{row}', column '{column}' of '{args.input}' is negative ({value:g}; "
        f"{n_negative} negative value(s) in all): CoGAPS factors non-negative data. Give it "
        "the data before centring or scaling (log1p of counts, or expression values), not "
        "z-scores."
    )


def _run_file(args, make_model):
    X, samples, features = read_matrix(args.input, transpose=args.transpose, layer=args.layer)
    _refuse_negative(X, samples, features, args)
    uncertainty = args.uncertainty if args.uncertainty in NAMED_UNCERTAINTIES else None
    if args.uncertainty and uncertainty is None:
        if args.sparse_optimization:
            raise CommandLineError(
                "--uncertainty FILE cannot be combined with --sparse-optimization: the "
                "sparse-data model computes a named uncertainty from the stored values "
                "(--uncertainty relative or poisson)."
            )
        uncertainty, u_samples, u_features = read_matrix(args.uncertainty, transpose=args.transpose)
        if uncertainty.shape != X.shape:
            flip = (lambda shape: shape[::-1]) if args.transpose else (lambda shape: shape)
            written = "genes x samples" if args.transpose else "samples x genes"
            raise CommandLineError(
                f"'{args.uncertainty}' holds a {' x '.join(map(str, flip(uncertainty.shape)))} "
                f"table and '{args.input}' a {' x '.join(map(str, flip(X.shape)))} one: the "
                f"uncertainty file must be written as the input is ({written}"
                f"{', as --transpose reads both' if args.transpose else ''})"
                + (
                    ", and it is the input's transpose."
                    if uncertainty.shape == X.shape[::-1]
                    else "."
                )
            )
        _check_same_order("sample", samples, u_samples, args)
        _check_same_order("feature", features, u_features, args)
        if sparse.issparse(uncertainty):
            uncertainty = uncertainty.toarray()
        if sparse.issparse(X):  # the sparse-data model takes no uncertainty: fit densely
            X = X.toarray()
    K = args.n_components or 7
    model = make_model(K)
    transposed = args.transpose or args.input.lower().endswith(".gct")
    how = f" (the transpose of the file's {X.shape[1]} x {X.shape[0]})" if transposed else ""
    if not transposed and X.shape[0] >= _TALL * X.shape[1]:
        print(
            f"note: '{args.input}' has {X.shape[0]:,} rows and {X.shape[1]:,} columns, read as "
            f"{X.shape[0]:,} samples x {X.shape[1]:,} features. If its rows are genes (R "
            "CoGAPS's genes x samples), add --transpose.",
            file=sys.stderr,
        )
    print(
        f"CoGAPS on {args.input}: {X.shape[0]} samples x {X.shape[1]} features{how}, {K} patterns"
    )
    if args.uncertainty and args.uncertainty not in NAMED_UNCERTAINTIES:
        described = f"from {args.uncertainty}"
    else:
        described = NAMED_UNCERTAINTIES[args.uncertainty or "relative"]
    if args.sparse_optimization or sparse.issparse(X):
        print(f"sparse-data model: uncertainty {described}")
    else:
        print(f"dense model, uncertainty {described}")
    print(f"{_phases(args)}, seed {args.seed}, start {args.init!r}{_chains(args)}\n")
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
    if args.tol is not None and args.n_chains == 1:
        parser.error(
            "--tol ends the phases by the diagnostics of several chains: add --n-chains 4 "
            "(or 2 or more), or leave --tol out to run --max-iter iterations in each phase"
        )
    from .._cogaps import CoGAPS

    def make_model(K):
        return CoGAPS(
            n_components=K,
            max_iter=args.max_iter,
            atom_density_W=args.atom_density_w,
            atom_density_H=args.atom_density_h,
            max_gibbs_mass_W=args.max_gibbs_mass_w,
            max_gibbs_mass_H=args.max_gibbs_mass_h,
            solver=args.solver,
            init=args.init,
            n_chains=args.n_chains,
            tol=args.tol,
            random_state=args.seed,
            verbose=args.verbose,
            sparse_optimization=args.sparse_optimization,
            checkpoint_path=args.checkpoint,
            checkpoint_every=args.checkpoint_every,
            checkpoint_minutes=args.checkpoint_minutes,
            n_snapshots=args.n_snapshots,
            n_jobs=args.n_jobs,
        )

    interrupted = "interrupted before the fit finished; nothing written."
    with contextlib.redirect_stdout(_PipeTolerantOutput(sys.stdout)):
        return _main(args, parser, make_model, interrupted)


def _partial_names(path):
    """The names around an output ``path`` (a .npz, an .h5ad, or the prefix of .csv
    tables): ``(its status file, the partial output's name, the partial output as shown,
    the partial output's status file)``."""
    path = Path(path)
    prefix = str(path)[: -len(path.suffix)]
    beside = f"{prefix}.partial{path.suffix}"
    if path.suffix.lower() in (".csv", ".tsv"):
        return (Path(f"{prefix}_status{path.suffix}"), beside,
                f"'{prefix}.partial_*{path.suffix}'",
                Path(f"{prefix}.partial_status{path.suffix}"))  # fmt: skip
    return path, beside, f"'{beside}'", Path(beside)


def _partial_output(path):
    """Where the partial results of an interrupted run go: the output asked for, or beside
    it (``OUT.partial.npz``) when that output already holds results, which a later run's
    Ctrl-C must not replace."""
    if path is None:
        return None
    path = Path(path)
    status, beside, shown, _ = _partial_names(path)
    if not status.exists():
        return str(path)
    held = f"'{path}' holds" if status == path else (
        f"'{str(path)[: -len(path.suffix)]}_*{path.suffix}' hold")  # fmt: skip
    print(
        f"warning: {held} earlier results, kept; the partial results are written to {shown}",
        file=sys.stderr,
    )
    return beside


def _warn_stale_partial(path):
    """Say that partial results beside a complete run's output (``OUT.partial.npz``) are an
    earlier interrupted run's: their name would pass them for this run's."""
    if path is None:
        return
    path = Path(path)
    _, _, shown, partial_status = _partial_names(path)
    if partial_status.exists():
        print(
            f"warning: {shown} beside '{path}' holds the partial results of an earlier "
            "interrupted run, not this run's; remove it if this run replaces it",
            file=sys.stderr,
        )


def _main(args, parser, make_model, interrupted):
    """The run of :func:`main`, its summary on standard output."""
    try:
        if args.output is not None:
            _kind(args.output, (".npz", ".csv", ".tsv"), "the output")
            if not Path(args.output).resolve().parent.is_dir():
                raise CommandLineError(f"the folder of the output '{args.output}' does not exist.")
        if args.n_snapshots and not str(args.output).lower().endswith(".npz"):
            used = " (with --n-chains they are still the draws the diagnostics read)"
            print(
                f"warning: --n-snapshots {args.n_snapshots} keeps states that only an .npz "
                "output holds (-o FILE.npz); this run writes none of them"
                + (used if args.n_chains > 1 else ""),
                file=sys.stderr,
            )
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
            if Path(args.output_h5ad).resolve() == Path(args.input).resolve():
                raise CommandLineError(
                    f"--output-h5ad '{args.output_h5ad}' would overwrite the input; name a copy."
                )
        # a completed fit's checkpoint goes once its results are written: a run killed
        # before then resumes from it
        with defer_removal():
            if args.input is None:
                if args.uncertainty or args.transpose or args.layer:
                    raise CommandLineError(
                        "--uncertainty, --transpose and --layer need an INPUT file."
                    )
                model, samples, features = _run_example(args, make_model)
            else:
                model, samples, features = _run_file(args, make_model)
                if args.output is None and args.output_h5ad is None:
                    print("\nnothing written: add --output FILE.npz (or .csv) to keep the results.")
            interrupted = "interrupted while writing the results; the files may be incomplete."
            written = []
            complete = chain_status(model)["complete"]
            output, output_h5ad = args.output, args.output_h5ad
            if not complete:  # a partial result does not replace results already there
                output, output_h5ad = _partial_output(output), _partial_output(output_h5ad)
            if output is not None:
                written += write_results(output, model, samples, features)
            if output_h5ad is not None:
                written += write_h5ad(output_h5ad, args.input, model, args.layer)
            if written:
                mark = "" if complete else " (partial results, marked as such)"
                print("\nwritten: " + ", ".join(str(p) for p in written) + mark)
            if complete:
                _warn_stale_partial(output)
                _warn_stale_partial(output_h5ad)
    except KeyboardInterrupt:
        if args.checkpoint is not None and Path(args.checkpoint).exists():
            interrupted += (f" The checkpoint '{args.checkpoint}' holds the run so far: run "
                            "the same command again to resume from it.")  # fmt: skip
        print(f"{parser.prog}: {interrupted}", file=sys.stderr)
        return 130
    except (ValueError, OSError) as exc:
        if args.verbose > 1:  # -vv: the whole traceback, for a bug report
            raise
        print(f"{parser.prog}: error: {in_option_words(str(exc))}", file=sys.stderr)
        return 2
    if not complete:
        print(f"{parser.prog}: interrupted; the results are partial.", file=sys.stderr)
        return 130
    return 0
