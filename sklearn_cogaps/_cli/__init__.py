"""The command line of sklearn_cogaps: ``sklearn-cogaps`` and ``python -m sklearn_cogaps``.

Without an input file it runs the built-in example: CoGAPS on data simulated by
:func:`sklearn_cogaps.datasets.make_patterns`, and prints each true pattern beside the fitted
pattern matched to it, the chi-square, the atom counts and the time. With an input file it
fits the user's matrix and writes the posterior means and standard deviations of both factor
matrices and the chain's traces to a file that numpy or pandas read directly.
"""

from ._read import CommandLineError, read_matrix
from ._run import main
from ._write import write_results

__all__ = ["CommandLineError", "main", "read_matrix", "write_results"]
