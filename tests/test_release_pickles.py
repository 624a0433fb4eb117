"""Estimators pickled by release 0.1.0 load under the current layout and names, and predict
what they predicted then."""

import pickle
import warnings
from pathlib import Path

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal
from sklearn.base import clone
from sklearn.exceptions import ConvergenceWarning

RELEASE = Path(__file__).parent / "data" / "release_0_1"
EXPECTED = np.load(RELEASE / "expected.npz")


def _load(name):
    with warnings.catch_warnings():
        # scikit-learn says when the pickling version differs from the one installed
        warnings.simplefilter("ignore", UserWarning)
        with open(RELEASE / f"{name}.pkl", "rb") as f:
            return pickle.load(f)


@pytest.mark.parametrize("name", ["cogaps", "cogaps_warm", "hpmf", "wbpmf", "xd", "m3f"])
def test_a_release_0_1_pickle_loads_and_predicts_what_it_did(name):
    est = _load(name)
    X, P, R = EXPECTED["X"], EXPECTED["P"], EXPECTED["R"]
    with warnings.catch_warnings():
        warnings.simplefilter("error", FutureWarning)  # the old names are gone from it
        if name in ("cogaps", "cogaps_warm"):
            assert_array_equal(est.transform(X[:4]), EXPECTED[f"{name}.transform"])
            assert est.score(X[:4]) == EXPECTED[f"{name}.score"]
        elif name == "hpmf":
            # 0.2 extrapolates the new rows' fixed-point steps (SQUAREM) and stops by 0.1's
            # rule, a relative step below 1e-10: the same fixed point, to that tolerance.
            assert_allclose(est.transform(X[:4]), EXPECTED[f"{name}.transform"], rtol=1e-8)
            # 0.2 sums ln Gamma(x + 1) of each row first (so that counts read in blocks of
            # rows give the same bits): the score's constant is equal to round-off.
            assert_allclose(est.score(X[:4]), EXPECTED[f"{name}.score"], rtol=1e-14)
        elif name == "wbpmf":
            # 0.1 stopped the new rows' sweeps at max_iter (5 for this model); 0.2 sweeps
            # them to convergence, extrapolated (SQUAREM): near 0.1's rows, at a higher
            # bound.
            assert_allclose(est.transform(X[:4]), EXPECTED[f"{name}.transform"], rtol=1e-3)
            assert est.score(X[:4]) > EXPECTED[f"{name}.score"]
        elif name == "xd":
            assert_array_equal(est.predict_proba(P[:6]), EXPECTED[f"{name}.predict_proba"])
            assert_array_equal(est.score_samples(P[:6]), EXPECTED[f"{name}.score_samples"])
        else:
            assert_array_equal(est.predict_ratings(R), EXPECTED[f"{name}.predict_ratings"])
        # the parameters and attributes of the current names, the ones added since included
        params = est.get_params()
        assert isinstance(est.converged_, bool)
        assert est.objective_history_.ndim == 1 and repr(est)
        # it clones, and fits again without a word about names it never used
        data = {"xd": P, "m3f": R}.get(name, X)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            clone(est).fit(data)
            if params.get("warm_start"):
                est.fit(data)  # continues the pickled chain
    assert {"cogaps": "solver", "xd": "solver"}.get(name, "n_components") in params
    if name == "cogaps":
        assert params["solver"] == "reversible" and params["birth_death"] == "deprecated"
    if name == "xd":
        assert params["solver"] == "minibatch_em" and params["method"] == "deprecated"
