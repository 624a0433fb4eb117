"""Warnings point at the user's line, past the package's and scikit-learn's wrappers."""

import warnings

import numpy as np
from sklearn.exceptions import ConvergenceWarning
from sklearn.model_selection import cross_validate

from sklearn_cogaps import CoGAPS, ExtremeDeconvolution, HierarchicalPMF
from sklearn_cogaps.datasets import make_single_cell


def _caught(call):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        call()
    return caught


def test_a_fit_s_warnings_name_the_line_that_called_it():
    X = make_single_cell(n_samples=60, n_features=30, n_components=2, random_state=0)[0]
    caught = _caught(lambda: HierarchicalPMF(2, max_iter=2, random_state=0).fit(X))
    convergence = [w for w in caught if issubclass(w.category, ConvergenceWarning)]
    assert convergence and all(w.filename == __file__ for w in convergence)
    # through scikit-learn's tools too: the line that called cross_validate
    caught = _caught(lambda: cross_validate(HierarchicalPMF(2, max_iter=2, random_state=0), X))
    assert len(caught) == 5 and all(w.filename == __file__ for w in caught)
    # a method's advice (ExtremeDeconvolution scoring without the noise it was fitted with)
    xd = ExtremeDeconvolution(2, max_iter=50, random_state=0)
    xd.fit(X.toarray(), X_cov=np.ones(X.shape))
    caught = _caught(lambda: xd.score(X.toarray()))
    assert len(caught) == 1 and caught[0].filename == __file__


def test_a_renamed_parameter_warns_once_per_fit():
    X = np.abs(np.random.default_rng(0).normal(size=(10, 20)))
    # "always": the fit reads the parameter in several places, and "default" would show a
    # repeated warning once only because every copy points at the same line
    for _ in range(2):  # and again on the next fit
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            CoGAPS(2, max_iter=5, birth_death="reversible", random_state=0).fit(X)
        renamed = [w for w in caught if "'birth_death' was renamed" in str(w.message)]
        assert len(renamed) == 1 and renamed[0].filename == __file__
