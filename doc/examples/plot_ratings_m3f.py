"""
Predicting star ratings with Gibbs max-margin matrix factorisation
==================================================================

:class:`~sklearn_cogaps.MaxMarginMF` predicts ordinal ratings (here 1 to 5 stars) of users
for items from the ratings they gave. Here the ratings are simulated: each user and each item
has three hidden tastes, a user's score for an item is the product of their tastes plus noise,
and the scores are cut into five star levels by thresholds. Only a fifth of the pairs is
rated. We hold out three ratings of every user with
:func:`~sklearn_cogaps.holdout_ratings`, fit Gibbs M3F on the others, and compare the error
on the held-out ratings with that of the best constant prediction, the median rating. The
error is the normalised mean absolute error (:func:`~sklearn_cogaps.rating_nmae`): the mean
absolute error divided by that of guessing a level uniformly at random (1.6 for five levels).
"""

import matplotlib.pyplot as plt
import numpy as np

from sklearn_cogaps import MaxMarginMF, holdout_ratings, rating_nmae

# %%
# Simulated ratings
# -----------------
rng = np.random.RandomState(0)
n_users, n_items, true_k = 300, 150, 3
scores = rng.normal(size=(n_users, true_k)) @ rng.normal(size=(true_k, n_items))
scores += 0.5 * rng.normal(size=scores.shape)
cuts = np.quantile(scores, [0.1, 0.3, 0.6, 0.85])  # more 3s and 4s than 1s, as on the web
stars = 1.0 + np.searchsorted(cuts, scores)
ratings = np.where(rng.uniform(size=stars.shape) < 0.2, stars, np.nan)  # NaN: not rated
train, test = holdout_ratings(ratings, n_per_user=3, random_state=0)
print(
    f"{train.nnz} training and {test.nnz} held-out ratings of {n_users} users and {n_items} items"
)

# %%
# Gibbs M3F against the best constant
# -----------------------------------
# The best constant prediction under absolute error is the median of the training ratings.
# The held-out ratings passed as ``y`` are not fitted: the fit records their error at each
# iteration (``held_out_nmae_``), which shows how long the chain needs.
model = MaxMarginMF(n_components=5, max_iter=60, burn_in=20, random_state=0)
model.fit(train, y=test)
predicted = model.predict_ratings(test)
median = test.copy()
median.data[:] = np.median(train.data)
print(f"held-out NMAE, Gibbs M3F: {rating_nmae(test, predicted):.3f}")
print(f"held-out NMAE, median rating {median.data[0]:g}: {rating_nmae(test, median):.3f}")

# %%
# The chain and the errors it makes
# ---------------------------------
# Left: the max-margin objective of each sample of the chain, which settles well before the
# end of the burn-in, and the held-out error (of the current sample during the burn-in, of
# the running means after it). Right: the held-out ratings against the predicted ones;
# most errors are off by one star.
confusion = np.zeros((5, 5), dtype=int)
np.add.at(confusion, (test.data.astype(int) - 1, predicted.data.astype(int) - 1), 1)

fig, (ax_trace, ax_conf) = plt.subplots(1, 2, figsize=(10, 4))
iterations = np.arange(1, model.objective_history_.size + 1)
ax_trace.plot(iterations, model.objective_history_, label="objective")
ax_trace.axvline(model.burn_in, color="grey", linestyle="--", label="end of burn-in")
ax_trace.set(xlabel="iteration", ylabel="objective", title="Gibbs M3F chain")
ax_nmae = ax_trace.twinx()
ax_nmae.plot(iterations, model.held_out_nmae_, color="C1", label="held-out NMAE")
ax_nmae.set_ylabel("held-out NMAE")
ax_trace.legend(handles=ax_trace.get_lines() + ax_nmae.get_lines(), loc="upper center")
image = ax_conf.imshow(confusion, cmap="Blues")
for (i, j), n in np.ndenumerate(confusion):
    ax_conf.text(
        j, i, n, ha="center", va="center", color="white" if n > confusion.max() / 2 else "black"
    )
ax_conf.set(
    xticks=range(5),
    yticks=range(5),
    xticklabels=range(1, 6),
    yticklabels=range(1, 6),
    xlabel="predicted stars",
    ylabel="held-out stars",
    title="Held-out ratings",
)
fig.colorbar(image, ax=ax_conf, label="ratings")
fig.tight_layout()
plt.show()
