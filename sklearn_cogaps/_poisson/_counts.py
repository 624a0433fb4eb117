"""What the Poisson factorisations share: the advice on non-count input, the largest total
they can fit, and the start from scikit-learn's Kullback-Leibler NMF, the maximum-likelihood
Poisson factorisation."""

import warnings

import numpy as np
from scipy import sparse
from sklearn.decomposition import NMF
from sklearn.exceptions import ConvergenceWarning

from .._utils._recommend import RecommenderMixin

__all__ = [
    "COUNTS_ADVICE",
    "MISSING_COUNTS_ADVICE",
    "CountRecommenderMixin",
    "check_total",
    "kl_nmf",
]

#: What a count model's error on negative input adds (``_negative_input_advice``).
COUNTS_ADVICE = (
    "The model is for counts: pass the raw counts, before normalising, centring or "
    "log-transforming them."
)

#: What a count model's error on NaN says (``_missing_value_advice``).
MISSING_COUNTS_ADVICE = (
    "A Poisson factorisation has no missing counts: every entry is a count, and a sparse "
    "matrix leaves out zeros, not unknowns. Replace NaN by 0 where it stands for no count "
    "(np.nan_to_num(X)), or drop the rows or columns that have them."
)

#: Largest total count: the variational updates form products of two count-sized numbers
#: (a count times a rate of the same size), which overflow float64 above about 1e300.
MAX_TOTAL = 1e150


def check_total(data, name):
    """Refuse counts whose total would overflow the updates of a Poisson factorisation.

    Parameters
    ----------
    data : ndarray
        The counts (a dense array, or a sparse matrix's ``data``).
    name : str
        The estimator's name, for the message.
    """
    total = float(np.sum(data, dtype=np.float64))
    if not total <= MAX_TOTAL:
        raise ValueError(
            f"X sums to {total:.3g}; {name}'s variational updates multiply counts by rates of "
            f"the same size, which overflows in float64 above a total of {MAX_TOTAL:g}. "
            "Rescale X (the model is for counts)."
        )


def kl_nmf(X, n_components, max_iter, random_state, **nmf_params):
    """A few multiplicative updates of scikit-learn's KL-NMF, the start of both models.

    Parameters
    ----------
    X : {ndarray, sparse matrix} of shape (n_samples, n_features)
        The counts.
    n_components : int
        Number of components.
    max_iter : int
        Number of multiplicative updates (a start needs few; its ConvergenceWarning is
        silenced).
    random_state : int
        Seed of the NMF's own start.
    **nmf_params : dict
        More parameters of :class:`~sklearn.decomposition.NMF` (its ``init``, ``tol``).

    Returns
    -------
    W : ndarray of shape (n_samples, n_components)
    H : ndarray of shape (n_features, n_components)
        The factors, ``X ~ W @ H.T``.
    """
    nmf = NMF(n_components, beta_loss="kullback-leibler", solver="mu", max_iter=max_iter,
              random_state=random_state, **nmf_params)  # fmt: skip
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        W = nmf.fit_transform(X)
    return W, nmf.components_.T.copy()


#: hpfrec's methods, and what to call instead.
HPFREC_METHODS = {
    "topN": ("hpfrec", "recommend(X_user_rows, n=..., users=user_indices)"),
    "topN_cold": ("hpfrec", "recommend(X_new_rows, n=...) (new users by default)"),
    "predict": ("hpfrec", "score_pairs(users, items) for the expected counts of pairs"),
    "eval_llk": ("hpfrec", "score(X) for the ELBO per row of held-out counts"),
}


class CountRecommenderMixin(RecommenderMixin):
    """Recommendations from a Poisson factorisation of users x items counts: the score of a
    pair is its expected count, the seen items of a row are its non-zero counts, and new
    users get their loadings from ``transform``."""

    _peer_methods = HPFREC_METHODS

    def _recommend_input(self, X):
        X = self._validate_counts(X, reset=False)
        seen = sparse.csr_matrix(X, dtype=np.float64, copy=True)
        seen.eliminate_zeros()
        return X, seen

    def _new_user_factors(self, X):
        return np.asarray(self.transform(X))
