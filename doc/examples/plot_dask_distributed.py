"""
Scaling a CoGAPS fit out to a Dask cluster
==========================================

CoGAPS's distributed mode cuts the data into subsets, fits them independently, matches the
patterns they found and refits every subset with the consensus patterns held fixed (see
:ref:`cogaps-distributed`). The subsets run through joblib, so the same call runs on this
machine's cores or on a Dask cluster: connect a client, select joblib's ``dask`` backend,
and nothing else changes, not even the result, which is the same bit for bit wherever the
subsets run.

Here a small simulated single-cell data set, cut into four subsets of cells, runs on a local
Dask cluster of two workers; a real cluster is ``Client("tcp://scheduler-address:8786")``.
"""

import joblib
import matplotlib.pyplot as plt
import numpy as np
from dask.distributed import Client, LocalCluster

from sklearn_cogaps import CoGAPS, match_components
from sklearn_cogaps.datasets import make_single_cell

X, W, H = make_single_cell(n_samples=1200, n_features=150, n_components=4, random_state=0)
zeros = 1 - X.nnz / (X.shape[0] * X.shape[1])
print(f"{X.shape[0]} cells x {X.shape[1]} genes, {zeros:.0%} zeros")


def make_model():
    return CoGAPS(n_components=4, max_iter=300, distributed="single-cell", n_sets=4, random_state=0)


# %%
# The fit on a Dask cluster
# -------------------------
# ``processes=False`` keeps this example's two workers in one process; on a real cluster each
# worker is a process of its own, possibly on another machine.
with (
    LocalCluster(
        n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None
    ) as cluster,
    Client(cluster),
):
    with joblib.parallel_config(backend="dask"):
        on_dask = make_model().fit(X, uncertainty="poisson")  # X holds counts
print("consensus patterns:", on_dask.n_components_)

# %%
# The same fit here, one subset after the other
# ---------------------------------------------
# The subsets and their seeds are drawn from ``random_state`` before any fit, so where they
# run does not change the result.
here = make_model().fit(X, uncertainty="poisson")
print("same components bit for bit:", np.array_equal(here.components_, on_dask.components_))

# %%
# The consensus against the truth
# -------------------------------
# The components (genes) shared by the subsets, matched to the simulated ones.
order, corr = match_components(H, on_dask.components_, axis=0)
print("correlation with the true components:", np.round(corr, 3))
fig, axes = plt.subplots(len(order), 1, figsize=(7, 6), sharex=True)
for i, (ax, k) in enumerate(zip(axes, order)):
    ax.plot(H[i] / H[i].max(), color="0.6", label="true")
    ax.plot(
        on_dask.components_[k] / on_dask.components_[k].max(),
        color="tab:blue",
        label="distributed fit",
    )
    ax.set_ylabel(f"r = {corr[i]:.2f}")
axes[0].legend(loc="upper right")
axes[-1].set_xlabel("gene")
fig.suptitle("consensus components of four subsets fitted on a Dask cluster")
fig.tight_layout()
plt.show()
