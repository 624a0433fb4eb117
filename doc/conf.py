"""Sphinx configuration of the sklearn_cogaps documentation."""

import sklearn_cogaps

project = "sklearn_cogaps"
author = "The sklearn_cogaps developers"
release = sklearn_cogaps.__version__
version = release

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.mathjax",
    "numpydoc",
]
autosummary_generate = True
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
templates_path = []
exclude_patterns = ["_build", "generated/*.examples"]
html_theme = "alabaster"
nitpicky = False
