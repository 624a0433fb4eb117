"""The Examples of the public docstrings run as written and print what they show."""

import doctest
import inspect
import warnings

import numpy as np
import pytest

import sklearn_cogaps

PUBLIC_MODULES = ["sklearn_cogaps.datasets", "sklearn_cogaps.plotting", "sklearn_cogaps.anndata"]


def _public_objects():
    objects = {name: getattr(sklearn_cogaps, name) for name in sklearn_cogaps.__all__}
    for module_name in PUBLIC_MODULES:
        try:
            module = __import__(module_name, fromlist=["__all__"])
        except ImportError:  # an optional dependency is missing
            continue
        objects.update({name: getattr(module, name) for name in getattr(module, "__all__", [])})
    found = {}
    finder = doctest.DocTestFinder(recurse=True, exclude_empty=True)
    for name, obj in sorted(objects.items()):
        if not (inspect.isclass(obj) or inspect.isfunction(obj)):
            continue
        for test in finder.find(obj, name, globs={}):
            if test.examples and test.name not in found:
                found[test.name] = (test, obj.__module__)
    return found


TESTS = _public_objects()


def test_the_public_api_has_examples():
    assert len(TESTS) >= 20


@pytest.mark.parametrize("name", sorted(TESTS))
def test_docstring_example(name):
    test, module = TESTS[name]
    if module.startswith("sklearn_cogaps.plotting"):
        pytest.importorskip("matplotlib")
    runner = doctest.DocTestRunner(
        optionflags=doctest.NORMALIZE_WHITESPACE | doctest.ELLIPSIS, verbose=False
    )
    with warnings.catch_warnings(), np.printoptions(legacy=False):
        warnings.simplefilter("ignore")
        results = runner.run(test, out=lambda text: print(text, end=""))
    assert results.failed == 0, f"{results.failed} of {results.attempted} examples failed"
