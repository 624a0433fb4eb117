"""Data sets: simulations with their ground truth, reproducible from ``random_state``, and
CoGAPS's own GIST example with its published result, shipped with the package."""

from ._gist import load_gist
from ._samples_generator import make_background_counts, make_patterns, make_single_cell

__all__ = ["make_patterns", "make_background_counts", "make_single_cell", "load_gist"]
