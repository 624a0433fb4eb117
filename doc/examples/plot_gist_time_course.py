"""
Time-course patterns and their marker genes (CoGAPS on GIST)
============================================================

CoGAPS's own example data set: the expression of 1363 genes in a gastrointestinal stromal
tumour cell line treated with imatinib, measured at nine time points from 0 to 48 hours. The
R package ships it with the result of a three-pattern run; here we fit the same model with
:class:`~sklearn_cogaps.CoGAPS`, draw the patterns along the time axis beside the published
ones, show the marker genes of each pattern, and check that the chain has settled.

The data are genes × samples, the R package's orientation: scikit-learn wants samples in
rows, so we fit the transpose.
"""

# %%
# Loading the data
# ----------------
# The data set lives in the project's shared material (``shared/fixtures/gist``), beside the
# repository; the ``SKC_SHARED`` environment variable names another place.
import os
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from sklearn_cogaps import CoGAPS, match_components
from sklearn_cogaps.plotting import plot_markers, plot_patterns, plot_trace


def find_gist():
    places = []
    if os.environ.get("SKC_SHARED"):
        places.append(Path(os.environ["SKC_SHARED"]))
    here = Path(globals().get("__file__", Path.cwd() / "example.py")).resolve()
    places += [parent / "shared" for parent in here.parents]
    for shared in places:
        if (shared / "fixtures" / "gist" / "GIST_matrix.csv").is_file():
            return shared / "fixtures" / "gist"
    raise FileNotFoundError(
        "the GIST data (shared/fixtures/gist) is neither in SKC_SHARED nor in a 'shared' "
        "folder beside the repository or above it; set SKC_SHARED to the shared folder."
    )


gist = find_gist()
D = pd.read_csv(gist / "GIST_matrix.csv", index_col=0)  # genes x samples
published = pd.read_csv(gist / "GIST_result_Pmean.csv", index_col=0)  # samples x patterns
X = D.T  # samples x genes
hours = np.array([int(name[2:]) for name in X.index])  # IM00 ... IM48
print(f"{X.shape[0]} samples x {X.shape[1]} genes; time points {hours} h")

# %%
# Fitting three patterns
# ----------------------
# 2500 calibration and 2500 sampling iterations take a few seconds. The default uncertainty
# is CoGAPS's ``max(0.1 * x, 0.1)``, the one the published run used.
model = CoGAPS(n_components=3, max_iter=2500, random_state=0).fit(X)
print(f"chi-square of the posterior mean: {model.chisq_:.1f} ({X.size} entries)")

order, corr = match_components(published.to_numpy(), model.loadings_)
print("correlation with the published patterns:", np.round(corr, 3))

# %%
# The patterns along the time course
# ----------------------------------
# Each pattern is scaled to a maximum of 1, as in the R package. Dotted lines are the
# published patterns, matched to ours.
fig, ax = plt.subplots(figsize=(7, 4))
plot_patterns(model, x=hours, xlabel="hours of imatinib", ax=ax)
for i, k in enumerate(order):
    ax.plot(
        np.sort(hours),
        published.to_numpy()[np.argsort(hours), i],
        linestyle=":",
        color=ax.get_lines()[k].get_color(),
    )
ax.set_title("GIST: CoGAPS patterns (dotted: published result)")
fig.tight_layout()

# %%
# Marker genes
# ------------
# The genes that follow one pattern and no other (the R package's ``patternMarkers``), the
# ten best of each pattern, with their expression across the time course: each row is scaled
# to its own maximum.
fig, ax = plt.subplots(figsize=(6, 7))
plot_markers(model, X=X, n_markers=10, sample_names=[f"{h} h" for h in hours], ax=ax)
ax.set_title("ten marker genes per pattern")
fig.tight_layout()

# %%
# Has the chain settled?
# ----------------------
# The chi-square falls during calibration and stays flat while the sampler draws the
# posterior (right of the dashed line).
fig, ax = plt.subplots(figsize=(6, 3.5))
plot_trace(model, ax=ax)
fig.tight_layout()
plt.show()
