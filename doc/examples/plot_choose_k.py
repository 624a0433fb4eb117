"""
Choosing the number of components with GridSearchCV
===================================================

Every estimator of the package has a ``score`` method, so the number of components can be
chosen by cross-validation like any other hyper-parameter. Here we simulate counts made of
three topics and let :class:`~sklearn.model_selection.GridSearchCV` pick ``n_components``
for :class:`~sklearn_cogaps.HierarchicalPMF`, whose score is the held-out evidence lower
bound per sample (higher is better): it rises until the true number and flattens after.
"""

import warnings

import matplotlib.pyplot as plt
import numpy as np
from sklearn.exceptions import ConvergenceWarning
from sklearn.model_selection import GridSearchCV, KFold

from sklearn_cogaps import HierarchicalPMF

# %%
# Counts with three planted topics
# --------------------------------
rng = np.random.RandomState(0)
n_samples, n_features, true_k = 150, 60, 3
L = rng.gamma(0.5, 2.0, size=(n_samples, true_k))
F = np.zeros((true_k, n_features))
for k in range(true_k):  # each topic owns a block of features
    F[k, k * 20 : (k + 1) * 20] = rng.gamma(2.0, 1.0, size=20)
X = rng.poisson(L @ F + 0.05)
print(f"{n_samples} samples x {n_features} features, {np.mean(X == 0):.0%} zeros")

# %%
# Cross-validated search
# ----------------------
search = GridSearchCV(
    HierarchicalPMF(max_iter=100, random_state=0),
    {"n_components": [1, 2, 3, 4, 5, 6]},
    cv=KFold(3, shuffle=True, random_state=0),
)
with warnings.catch_warnings():
    warnings.simplefilter("ignore", ConvergenceWarning)  # 100 iterations are enough here
    search.fit(X)
print("chosen n_components:", search.best_params_["n_components"])

# %%
# The score along K
# -----------------
ks = search.cv_results_["param_n_components"].data.astype(int)
mean = search.cv_results_["mean_test_score"]
std = search.cv_results_["std_test_score"]
fig, ax = plt.subplots(figsize=(6, 4))
ax.errorbar(ks, mean, yerr=std, marker="o", capsize=3)
ax.axvline(true_k, color="0.5", linestyle="--", label="true number of topics")
ax.set_xlabel("n_components")
ax.set_ylabel("held-out score (ELBO per sample)")
ax.set_title("HierarchicalPMF: choosing K by 3-fold cross-validation")
ax.legend()
fig.tight_layout()
plt.show()
