"""
Topics of real counts: HierarchicalPMF and WeightedBackgroundPMF on digits
==========================================================================

The handwritten digits that ship with scikit-learn are 8 × 8 images whose pixels count ink
from 0 to 16: a small matrix of real counts. Poisson factorisation splits each image into
non-negative parts ("topics") that add up. :class:`~sklearn_cogaps.HierarchicalPMF` fits
topics with Gamma priors learned from the data;
:class:`~sklearn_cogaps.WeightedBackgroundPMF` adds a rank-one background (how much ink an
image has, how often a pixel is used) so that its topics describe what is left: the strokes
that tell the digits apart.
"""

import warnings

import matplotlib.pyplot as plt
import numpy as np
from sklearn.datasets import load_digits
from sklearn.exceptions import ConvergenceWarning

from sklearn_cogaps import HierarchicalPMF, WeightedBackgroundPMF
from sklearn_cogaps.plotting import plot_trace

X, y = load_digits(return_X_y=True)
X, y = X[:800], y[:800]  # enough for the topics, and fast
print(f"{X.shape[0]} images of {X.shape[1]} pixels, counts from {X.min():.0f} to {X.max():.0f}")

# %%
# Fitting ten topics with each model
# ----------------------------------
with warnings.catch_warnings():
    warnings.simplefilter("ignore", ConvergenceWarning)  # a short run is enough to look
    hpmf = HierarchicalPMF(n_components=10, max_iter=150, random_state=0).fit(X)
    wbpmf = WeightedBackgroundPMF(n_components=10, max_iter=60, random_state=0).fit(X)

# %%
# The topics as images
# --------------------
# Each row of ``components_`` is a topic over the 64 pixels, drawn as an 8 × 8 image
# (scaled to its own maximum), in order of total weight.
fig, axes = plt.subplots(2, 10, figsize=(10, 2.6))
for row, (name, model) in enumerate([("Hierarchical", hpmf), ("Weighted\nbackground", wbpmf)]):
    topics = model.components_
    order = np.argsort(-topics.sum(axis=1))
    for ax, k in zip(axes[row], order):
        ax.imshow(topics[k].reshape(8, 8), cmap="Greys")
        ax.set_xticks([])
        ax.set_yticks([])
    axes[row, 0].set_ylabel(name, fontsize=8)
fig.suptitle("ten topics of the digits")
fig.tight_layout()

# %%
# Which topics each digit uses
# ----------------------------
# The mean per-image weight of each HierarchicalPMF topic, by digit: most digits are made of
# a few topics of their own.
weights = hpmf.transform(X)
weights = weights / weights.sum(axis=1, keepdims=True)
profile = np.array([weights[y == d].mean(axis=0) for d in range(10)])
fig, ax = plt.subplots(figsize=(6, 4.5))
image = ax.imshow(profile[:, np.argsort(-hpmf.components_.sum(axis=1))], cmap="viridis")
ax.set_xlabel("topic (order of the images above)")
ax.set_ylabel("digit")
ax.set_yticks(range(10))
fig.colorbar(image, ax=ax, label="mean share of the image")
fig.tight_layout()

# %%
# Convergence
# -----------
# Both fits maximise an evidence lower bound (ELBO); its trace shows they have levelled off.
fig, axes = plt.subplots(1, 2, figsize=(9, 3.5))
plot_trace(hpmf, ax=axes[0])
plot_trace(wbpmf, ax=axes[1])
fig.tight_layout()
plt.show()
