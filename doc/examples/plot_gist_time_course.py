"""
Time-course patterns and their marker genes (CoGAPS on GIST)
============================================================

CoGAPS's own example data set: the expression of 1363 genes in a gastrointestinal stromal
tumour cell line treated with imatinib, measured at nine time points from 0 to 48 hours. The
R package ships it with the result of a three-pattern run; here we fit the same model with
:class:`~sklearn_cogaps.CoGAPS`, draw the patterns along the time axis beside the published
ones, show the marker genes of each pattern, and check that the chain has settled.

The package ships the data set and the published result:
:func:`~sklearn_cogaps.datasets.load_gist` returns them samples × genes, scikit-learn's
orientation (the transpose of R's ``GIST.matrix``).
"""

# %%
# Loading the data
# ----------------
# With ``as_frame=True`` the matrices are pandas DataFrames labelled with the sample and gene
# names, and ``hours`` is the time point of each sample. ``gist.DESCR`` tells where the data
# come from, how to cite them and under which terms they are shipped.
import matplotlib.pyplot as plt
import numpy as np

from sklearn_cogaps import CoGAPS, match_components
from sklearn_cogaps.datasets import load_gist
from sklearn_cogaps.plotting import plot_markers, plot_patterns, plot_trace

gist = load_gist(as_frame=True)
X = gist.data  # samples x genes
published = gist.published_patterns  # samples x patterns
hours = gist.hours.to_numpy()  # IM00 ... IM48
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
