"""
Choosing the number of components with GridSearchCV
===================================================

Every estimator of the package has a ``score`` method that rates held-out data, so the number
of components can be chosen by cross-validation like any other hyper-parameter, with
:class:`~sklearn.model_selection.GridSearchCV` and no scorer to write. Here two data sets with
three planted components: counts for :class:`~sklearn_cogaps.HierarchicalPMF` (its score is
the held-out evidence lower bound per sample) and continuous data with Gaussian noise for
:class:`~sklearn_cogaps.CoGAPS` (its score is the held-out log-likelihood of entries that
the sampled patterns did not see).

Both scores climb steeply up to the true number and then reach a plateau, where extra
components only fit noise. The maximum of a plateau is a matter of chance, so we let
``GridSearchCV`` choose with the one-standard-error rule
(:func:`~sklearn_cogaps.one_standard_error`): the smallest number of components whose mean
score is within one standard error (over the folds) of the best.
"""

import matplotlib.pyplot as plt
import numpy as np
from sklearn.model_selection import GridSearchCV, KFold

from sklearn_cogaps import CoGAPS, HierarchicalPMF, one_standard_error
from sklearn_cogaps.datasets import make_patterns

grid = {"n_components": [1, 2, 3, 4, 5, 6]}
folds = KFold(3, shuffle=True, random_state=0)  # shuffled: the samples are ordered

# %%
# Counts with three planted topics: HierarchicalPMF
# -------------------------------------------------
rng = np.random.RandomState(0)
n_samples, n_features, true_k = 150, 60, 3
L = rng.gamma(0.5, 2.0, size=(n_samples, true_k))
F = np.zeros((true_k, n_features))
for k in range(true_k):  # each topic owns a block of features
    F[k, k * 20 : (k + 1) * 20] = rng.gamma(2.0, 1.0, size=20)
counts = rng.poisson(L @ F + 0.05)
print(f"counts: {n_samples} samples x {n_features} features, {np.mean(counts == 0):.0%} zeros")

# Every fit of the grid must reach its optimum for the scores to compare models rather
# than unfinished fits: with ``max_iter=1000`` none stops early (with 100, twelve of the
# nineteen fits warned that they had not converged).
hpmf_search = GridSearchCV(
    HierarchicalPMF(max_iter=1000, random_state=0), grid, cv=folds, refit=one_standard_error
)
hpmf_search.fit(counts)
print("HierarchicalPMF chooses n_components =", hpmf_search.best_params_["n_components"])

# %%
# Three patterns with Gaussian noise: CoGAPS
# ------------------------------------------
# :func:`~sklearn_cogaps.datasets.make_patterns` simulates smooth patterns along 40 ordered
# samples. A chain that still improves while it samples would understate what its K can
# reach (``fit`` warns then): with 1500 iterations per phase no fit of the grid warns (with
# 600, seven of the nineteen did).
X, _, _ = make_patterns(n_samples=40, n_features=60, n_components=3, random_state=0)
cogaps_search = GridSearchCV(
    CoGAPS(max_iter=1500, random_state=0), grid, cv=folds, refit=one_standard_error
)
cogaps_search.fit(X)
print("CoGAPS chooses n_components =", cogaps_search.best_params_["n_components"])

# %%
# The scores along K
# ------------------
fig, axes = plt.subplots(1, 2, figsize=(10, 4))
for ax, (name, search) in zip(
    axes, [("HierarchicalPMF (counts)", hpmf_search), ("CoGAPS (Gaussian noise)", cogaps_search)]
):
    ks = np.asarray(search.cv_results_["param_n_components"], dtype=int)
    mean = search.cv_results_["mean_test_score"]
    std = search.cv_results_["std_test_score"]
    ax.errorbar(ks, mean, yerr=std, marker="o", capsize=3)
    ax.axvline(true_k, color="0.5", linestyle="--", label="true number")
    chosen = search.best_params_["n_components"]
    ax.plot(
        chosen, mean[ks == chosen], "o", markersize=14, mfc="none", color="tab:red", label="chosen"
    )
    ax.set_xlabel("n_components")
    ax.set_ylabel("held-out score (higher is better)")
    ax.set_title(name)
    ax.legend(loc="lower right")
fig.suptitle("choosing K by 3-fold cross-validation")
fig.tight_layout()
plt.show()
