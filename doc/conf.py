"""Sphinx configuration of the sklearn_cogaps documentation."""

import atexit
import inspect
import shutil
import tempfile
from importlib import metadata
from pathlib import Path

from sphinx.util.inspect import stringify_signature

import sklearn_cogaps

project = "sklearn_cogaps"
author = "The sklearn_cogaps developers"
copyright = author
release = sklearn_cogaps.__version__
version = release

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.mathjax",
    "numpydoc",
    "sphinx_gallery.gen_gallery",
]
autosummary_generate = True
# the class pages list their methods with autodoc (templates/autosummary/class.rst), so
# that every method shows its whole docstring: parameters, returns, examples
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
templates_path = ["_templates"]
exclude_patterns = [
    "_build",
    "generated/*.examples",
    "examples/*",  # the gallery's sources; sphinx-gallery writes auto_examples/ from them
    "auto_examples/*.ipynb",
    "auto_examples/*.py",
    "auto_examples/*.zip",
    "auto_examples/*.json",
    "auto_examples/*.md5",
]
nitpicky = False

# ----------------------------------------------------------------------------------------
# The pages: pydata-sphinx-theme, the theme of scikit-learn, numpy and scipy. Everything it
# shows is served with the pages: no version switcher (it reads a JSON file, often from the
# network), no icon links, no analytics, no announcement banner.
html_theme = "pydata_sphinx_theme"
html_theme_options = {
    "logo": {"text": project},
    "navbar_start": ["navbar-logo"],
    "navbar_center": ["navbar-nav"],
    "navbar_end": ["theme-switcher"],
    "navbar_persistent": ["search-button"],
    "header_links_before_dropdown": 6,
    "icon_links": [],
    "switcher": None,
    "check_switcher": False,
    "analytics": {},
    "announcement": "",
    "show_version_warning_banner": False,
    "use_edit_page_button": False,
    "secondary_sidebar_items": {"**": ["page-toc", "sourcelink"], "index": []},
    "show_toc_level": 2,
    "footer_start": ["project-version", "copyright"],
    "footer_center": [],
    "footer_end": ["sphinx-version", "theme-version"],
}
html_sidebars = {"index": []}  # the home page lists the contents itself
html_css_files = ["sklearn_cogaps.css"]
# the page's table of contents names a class's methods and attributes without the class
toc_object_entries_show_parents = "hide"


def _skip_metadata_requests(app, what, name, obj, skip, options):
    """Leave out scikit-learn's generated ``set_*_request`` methods (metadata routing):
    they are the same for every estimator and documented by scikit-learn."""
    if name.startswith("set_") and name.endswith("_request"):
        return True
    return None


def _init_signature(app, what, name, obj, options, signature, return_annotation):
    """Show a class's ``__init__`` signature, without ``self``.

    Autodoc takes a class's signature from its ``__new__`` before its ``__init__``, and the
    estimators inherit ``DataInFitMixin.__new__(cls, *args, **kwargs)``, which would show
    every estimator as ``CoGAPS(*args, **kwargs)``. The parameters are those of
    ``__init__``, whatever ``__new__`` or ``__signature__`` the class has. Classes without a
    Python ``__init__`` of their own (warnings, for example) keep autodoc's signature.
    """
    if what != "class" or not inspect.isclass(obj):
        return None
    init = getattr(obj, "__init__", None)
    if not inspect.isfunction(init):  # object.__init__ and other slot wrappers
        return None
    sig = inspect.signature(init)
    params = list(sig.parameters.values())[1:]  # drop self
    sig = sig.replace(parameters=params, return_annotation=inspect.Signature.empty)
    show_annotation = app.config.autodoc_typehints not in ("none", "description")
    return stringify_signature(sig, show_annotation=show_annotation), return_annotation


def setup(app):
    app.connect("autodoc-skip-member", _skip_metadata_requests)
    # ahead of numpydoc's handler (default priority 500), which answers with the signature
    # written in a docstring when there is one: the first answer is the one kept
    app.connect("autodoc-process-signature", _init_signature, priority=400)


# ----------------------------------------------------------------------------------------
# The examples gallery: doc/examples/plot_*.py, run at every build (a few seconds each).
sphinx_gallery_conf = {
    "examples_dirs": "examples",
    "gallery_dirs": "auto_examples",
    "filename_pattern": r"/plot_",
    "within_subsection_order": "FileNameSortKey",
    "abort_on_example_error": True,
    "only_warn_on_example_error": False,
    "download_all_examples": False,
    "image_scrapers": ("matplotlib",),
    "matplotlib_animations": False,
    "remove_config_comments": True,
    # the execution-times pages load their table scripts from a CDN: leave them out
    "write_computation_times": False,
}

# ----------------------------------------------------------------------------------------
# Formulas: MathJax served with the pages, never from the network. The MathJax 3 build that
# renders to SVG with every TeX extension is one self-contained file, taken from the
# sphinx-mathjax-offline package (a requirement of the doc extra) and published as
# _static/mathjax/tex-svg-full.js.
_MATHJAX_FILE = "tex-svg-full.js"


def _local_mathjax():
    try:
        dist = metadata.distribution("sphinx-mathjax-offline")
    except metadata.PackageNotFoundError:
        raise RuntimeError(
            "the documentation serves MathJax itself and takes it from the "
            "sphinx-mathjax-offline package, which is not installed: "
            'pip install "sklearn_cogaps[doc]" (or pip install sphinx-mathjax-offline).'
        ) from None
    for file in dist.files or ():
        if file.name == _MATHJAX_FILE and "mathjax" in file.parts:
            return Path(dist.locate_file(file))
    raise RuntimeError(f"sphinx-mathjax-offline has no {_MATHJAX_FILE}; reinstall it.")


_static = Path(tempfile.mkdtemp(prefix="sklearn_cogaps_doc_static_"))
atexit.register(shutil.rmtree, _static, ignore_errors=True)
(_static / "mathjax").mkdir()
shutil.copyfile(_local_mathjax(), _static / "mathjax" / _MATHJAX_FILE)
html_static_path = ["_static", str(_static)]
mathjax_path = f"mathjax/{_MATHJAX_FILE}"
