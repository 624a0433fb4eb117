"""
Fitting counts batch by batch: stochastic variational inference
===============================================================

:meth:`HierarchicalPMF.partial_fit <sklearn_cogaps.HierarchicalPMF.partial_fit>` updates the
model with one batch of rows at a time (see :ref:`hpmf_svi`): for data read from a file once
per epoch, or for a stream. Here simulated single-cell counts are cut into batches of 200
cells; after every epoch (one pass over the batches, in a new order) the held-out counts of
other cells are scored, and the curve is compared with the batch fit's score.

Two habits matter: ``total_samples`` is the number of rows the batches come from (each
batch's statistics are scaled to it), and the batches have similar sizes
(``np.array_split``), because every batch gets a full step.
"""

import matplotlib.pyplot as plt
import numpy as np

from sklearn_cogaps import HierarchicalPMF, match_components
from sklearn_cogaps.datasets import make_single_cell

X, W, H = make_single_cell(n_samples=3000, n_features=200, n_components=4, random_state=0)
train, held_out = X[:2400], X[2400:]
n = train.shape[0]
print(f"{n} training cells, {held_out.shape[0]} held-out cells, {X.shape[1]} genes")

# %%
# The batch fit, for reference
# ----------------------------
batch = HierarchicalPMF(n_components=4, random_state=0).fit(train)
reference = batch.score(held_out)
print(f"batch fit: {batch.n_iter_} iterations, held-out ELBO per cell {reference:.2f}")

# %%
# Epochs of partial_fit
# ---------------------
# Each epoch visits the training cells once, in batches of about 200.
model = HierarchicalPMF(n_components=4, random_state=0, total_samples=n)
rng = np.random.default_rng(0)
scores = []
for epoch in range(8):
    for rows in np.array_split(rng.permutation(n), n // 200):
        model.partial_fit(train[np.sort(rows)])
    scores.append(model.score(held_out))
    print(f"epoch {epoch + 1}: held-out ELBO per cell {scores[-1]:.2f}")

# %%
# The held-out score by epoch
# ---------------------------
# The steps shrink as ``(t + 2) ** -0.6`` after ``t`` batches, so the score approaches the
# batch fit's from below.
fig, ax = plt.subplots(figsize=(6, 3.5))
ax.plot(np.arange(1, len(scores) + 1), scores, "o-", label="partial_fit, after each epoch")
ax.axhline(reference, color="k", linestyle="--", label="batch fit")
ax.set_xlabel("epoch")
ax.set_ylabel("held-out ELBO per cell")
ax.legend()
fig.tight_layout()
plt.show()

# %%
# The programs it found
# ---------------------
# The components of the stream against the batch fit's, matched by correlation.
order, corr = match_components(batch.components_, model.components_, axis=0)
print("correlation of matched programs:", np.round(corr, 3))
