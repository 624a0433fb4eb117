"""The one-standard-error rule, as a ``refit`` callable of scikit-learn's searches."""

import numpy as np

__all__ = ["one_standard_error"]


def one_standard_error(cv_results, *, param="n_components", metric=None):
    """The simplest candidate whose score is within one standard error of the best.

    Held-out scores of factorisations rise with the number of components until the model
    has the components the data hold, then stay on a plateau (or fall slowly) while the
    extra components fit noise; the best mean on that plateau is often a larger model by
    chance. The rule (Hastie, Tibshirani & Friedman 2009, section 7.10) takes the best mean
    score, its standard error over the folds (the sample standard deviation of the fold
    scores over sqrt(n_folds)), and picks the candidate with the smallest ``param`` among
    those whose mean score is at least the best mean minus that standard error. Use it as
    the ``refit`` of :class:`~sklearn.model_selection.GridSearchCV` or
    :class:`~sklearn.model_selection.RandomizedSearchCV`; for another parameter or a
    named metric, pass ``functools.partial(one_standard_error, param=..., metric=...)``.

    Parameters
    ----------
    cv_results : dict or pandas.DataFrame
        The search's ``cv_results_`` (what scikit-learn passes to a ``refit`` callable), or
        ``pandas.DataFrame(search.cv_results_)``.
    param : str, default="n_components"
        The parameter whose smallest value is the simplest model (a name of the parameter
        grid, such as ``"n_components"`` or ``"model__n_components"`` in a pipeline).
    metric : str or None, default=None
        The scorer's name when the search has several (``scoring`` a dict); None for a
        single score.

    Returns
    -------
    index : int
        The index of the chosen candidate in ``cv_results``: for a DataFrame, the position
        of its row (``df.iloc[index]``, whatever the index labels).

    Examples
    --------
    >>> from sklearn.model_selection import GridSearchCV, KFold
    >>> from sklearn_cogaps import HierarchicalPMF, one_standard_error
    >>> from sklearn_cogaps.datasets import make_single_cell
    >>> X = make_single_cell(n_samples=150, n_features=80, n_components=3, random_state=0)[0]
    >>> search = GridSearchCV(HierarchicalPMF(max_iter=100, random_state=0),
    ...                       {"n_components": [1, 2, 3, 4, 6]},
    ...                       cv=KFold(3, shuffle=True, random_state=0),
    ...                       refit=one_standard_error).fit(X)
    >>> search.best_params_
    {'n_components': 3}
    """
    if hasattr(cv_results, "columns"):
        # pd.DataFrame(search.cv_results_), as results are read: its columns are the keys,
        # and a parameter a candidate does not set is NaN there (masked in the dict)
        # (a parameter set to None stays None there: only float NaN is unset)
        cv_results = {
            column: (np.ma.masked_array(values, mask=[isinstance(v, float) and v != v
                                                      for v in values])
                     if column.startswith("param_") else values)
            for column in cv_results.columns
            for values in [cv_results[column].to_numpy()]
        }  # fmt: skip
    elif not hasattr(cv_results, "keys"):
        raise TypeError(
            "cv_results must be a search's cv_results_ (a dict of arrays, or a DataFrame of "
            f"it); got {type(cv_results).__name__}. Pass search.cv_results_."
        )
    suffix = "test_score" if metric is None else f"test_{metric}"
    key = f"mean_{suffix}"
    if key not in cv_results:
        names = sorted(k[len("mean_test_") :] for k in cv_results if k.startswith("mean_test_"))
        raise ValueError(
            f"cv_results has no {key!r}: the search scored "
            f"{', '.join(names) if names else 'nothing'}. Pass metric= one of these names "
            "(functools.partial(one_standard_error, metric=...)) when scoring is a dict."
        )
    values = cv_results.get(f"param_{param}")
    if values is None or np.ma.is_masked(values) and np.ma.getmaskarray(values).any():
        grid = sorted(k[len("param_") :] for k in cv_results if k.startswith("param_"))
        raise ValueError(
            f"one_standard_error compares the candidates by {param!r}, which not every "
            f"candidate sets (the search's parameters: {', '.join(grid)}). Pass "
            "param= the parameter whose smallest value is the simplest model "
            "(functools.partial(one_standard_error, param=...))."
        )
    values = np.asarray(np.ma.getdata(values), dtype=object)
    mean = np.asarray(cv_results[key], dtype=np.float64)
    std = np.asarray(cv_results[f"std_{suffix}"], dtype=np.float64)
    n_splits = sum(1 for k in cv_results if k.startswith("split") and k.endswith(f"_{suffix}"))
    scored = np.isfinite(mean)
    if not scored.any():
        raise ValueError(
            "Every candidate's score is NaN: each fit, or its scoring on the held-out fold, "
            "failed (the search's FitFailedWarning or UserWarning says why; "
            "error_score='raise' shows the first error)."
        )
    best = int(np.nanargmax(np.where(scored, mean, -np.inf)))
    # scikit-learn's std_test_score divides by n_splits; the rule's standard error is the
    # sample standard deviation (divided by n_splits - 1) over sqrt(n_splits)
    se = std[best] / np.sqrt(n_splits - 1) if n_splits > 1 else 0.0
    threshold = mean[best] - se
    within = np.flatnonzero(scored & (mean >= threshold))
    # the smallest parameter value; among equal ones, the best score
    try:
        return int(min(within, key=lambda i: (values[i], -mean[i])))
    except TypeError:
        raise ValueError(
            f"one_standard_error takes the candidate with the smallest {param!r}, but its "
            f"values cannot be ordered: {sorted(set(map(repr, values.tolist())))}. Pass "
            "param= a parameter whose smallest value is the simplest model "
            "(functools.partial(one_standard_error, param=...))."
        ) from None
