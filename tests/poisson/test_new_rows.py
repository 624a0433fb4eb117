"""HierarchicalPMF's estimates of new rows: ``new_rows="conditional_mean"``."""

import numpy as np
import pytest
from numpy.testing import assert_allclose
from scipy.optimize import minimize

from sklearn_cogaps import HierarchicalPMF


def _hierarchical_counts(seed, n_cells=600, n_genes=300, K=4):
    """Counts from scHPF's model (budgets per cell and gene, loadings of shape 0.3)."""
    rng = np.random.default_rng(seed)
    xi, eta = rng.gamma(5.0, 0.25, n_cells), rng.gamma(5.0, 0.25, n_genes)
    theta = rng.gamma(0.3, 1 / xi[:, None], (n_cells, K))
    beta = rng.gamma(0.3, 1 / eta[:, None], (n_genes, K))
    return rng.poisson(theta @ beta.T)


@pytest.fixture(scope="module")
def fitted():
    X = _hierarchical_counts(0)
    model = HierarchicalPMF(4, random_state=0, new_rows="conditional_mean").fit(X[:450])
    return model, X[450:]


def test_conditional_means_solve_their_identity(fitted):
    model, X = fitted
    L = model.transform(X)
    F = model.components_.T
    a, b = model.prior_loadings_shape_, model.prior_loadings_rate_
    z = L * ((X / (L @ F.T)) @ F)
    assert_allclose(L, (a + z) / (b + F.sum(axis=0)), rtol=1e-7)


def test_conditional_means_are_the_mode_under_shapes_plus_one(fitted):
    model, X = fitted
    F = model.components_.T
    a, b = model.prior_loadings_shape_, model.prior_loadings_rate_
    L = model.transform(X[:5])

    def objective(log_l, x):
        l = np.exp(log_l)
        return -(x @ np.log(l @ F.T) - l @ F.sum(axis=0) + a @ log_l - b @ l)

    for x, ours in zip(X[:5], L):
        # the posterior of log l under Gamma(a + 1, b) on l has this objective (with its
        # Jacobian); its one maximum is ours
        found = minimize(objective, np.log(ours) + 0.3, args=(x,), method="BFGS")
        assert objective(np.log(ours), x) <= found.fun + 1e-7
        assert_allclose(np.exp(found.x), ours, rtol=1e-3)


def test_held_out_counts_are_predicted_better(fitted):
    model, X = fitted
    rng = np.random.default_rng(1)
    A = rng.binomial(X, 0.5)
    B = X - A
    conditional = model.poisson_loglik(B, fit_on=A)
    variational = model.set_params(new_rows="variational").poisson_loglik(B, fit_on=A)
    model.set_params(new_rows="conditional_mean")
    assert conditional > variational


def test_score_is_the_variational_bound_with_either_estimate(fitted):
    model, X = fitted
    score = model.score(X)
    conditional = model.transform(X)
    model.set_params(new_rows="variational")
    try:
        assert model.score(X) == score
        assert not np.allclose(model.transform(X), conditional)
    finally:
        model.set_params(new_rows="conditional_mean")


def test_an_unknown_estimate_is_refused():
    with pytest.raises(ValueError, match="new_rows"):
        HierarchicalPMF(2, new_rows="exact").fit(np.ones((5, 4)))


def test_conditional_means_of_a_row_do_not_depend_on_the_other_rows(fitted):
    # each row stops by its own plain step and takes its own extrapolations
    model, X = fitted
    together = model.transform(X[:40])
    alone = np.vstack([model.transform(X[i : i + 1]) for i in range(40)])
    np.testing.assert_array_equal(together, alone)
