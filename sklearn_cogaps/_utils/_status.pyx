"""One way for a failure inside a parallel loop to reach the caller.

Compiled kernels record a status per item (a row, a chunk, a point) in an array the loop
owns; `raise_for_status` turns the first failure into one exception after the loop. The
test-only hook `_set_fault_for_tests` forces a chosen item of a chosen loop to fail, so that the
path from any thread to the caller is tested; it is off unless a test turns it on.
"""

import numpy as np

# The fault the tests asked for: none by default.
cdef int FAULT_SITE = SITE_NONE
cdef Py_ssize_t FAULT_ITEM = -1
cdef int FAULT_CODE = 0

SITES = {
    "cogaps_rows": SITE_COGAPS_ROWS,
    "hpmf_counts": SITE_HPMF_COUNTS,
    "hpmf_transform": SITE_HPMF_TRANSFORM,
    "hpmf_sample": SITE_HPMF_SAMPLE,
    "wbpmf_counts": SITE_WBPMF_COUNTS,
    "wbpmf_data_term": SITE_WBPMF_DATA_TERM,
    "ebpm_posterior": SITE_EBPM_POSTERIOR,
    "xd_estep": SITE_XD_ESTEP,
    "xd_log_prob": SITE_XD_LOG_PROB,
    "m3f_rows": SITE_M3F_ROWS,
    "m3f_users": SITE_M3F_USERS,
    "m3f_items": SITE_M3F_ITEMS,
    "m3f_features": SITE_M3F_FEATURES,
    "m3f_new_user_features": SITE_M3F_NEW_USER_FEATURES,
    "wbpmf_rows": SITE_WBPMF_ROWS,
    "wbpmf_bound": SITE_WBPMF_BOUND,
}
# The failure codes, for the Python side.
NO_MEMORY = FAIL_NO_MEMORY
NOT_FINITE = FAIL_NOT_FINITE
NOT_POSITIVE_DEFINITE = FAIL_NOT_POSITIVE_DEFINITE
CODES = {
    "no_memory": FAIL_NO_MEMORY,
    "not_finite": FAIL_NOT_FINITE,
    "not_positive_definite": FAIL_NOT_POSITIVE_DEFINITE,
}


cdef int injected_fault(int site, Py_ssize_t item) noexcept nogil:
    if site == FAULT_SITE and item == FAULT_ITEM:
        return FAULT_CODE
    return 0


def _set_fault_for_tests(site=None, item=-1, code="no_memory"):
    """Make one item of one parallel loop fail, for tests.

    Parameters
    ----------
    site : str or None, default=None
        The loop, a key of ``SITES``; None turns the hook off.
    item : int, default=-1
        The item (row, chunk or point, as the loop counts them) that fails.
    code : str, default="no_memory"
        The failure, a key of ``CODES``.

    Returns
    -------
    previous : tuple
        ``(site, item, code)`` before the call, to restore it.
    """
    global FAULT_SITE, FAULT_ITEM, FAULT_CODE
    names = {v: k for k, v in SITES.items()}
    codes = {v: k for k, v in CODES.items()}
    previous = (names.get(FAULT_SITE), FAULT_ITEM, codes.get(FAULT_CODE, "no_memory"))
    if site is not None and site not in SITES:
        raise ValueError(f"site must be None or one of {sorted(SITES)}; got {site!r}.")
    if code not in CODES:
        raise ValueError(f"code must be one of {sorted(CODES)}; got {code!r}.")
    FAULT_SITE = SITE_NONE if site is None else SITES[site]
    FAULT_ITEM = item
    FAULT_CODE = CODES[code]
    return previous


class NonFiniteError(FloatingPointError, ValueError):
    """A computation met a value that is not finite.

    A ``ValueError`` too: the cause is nearly always data or parameters too extreme for
    double precision.
    """


# exception class, what happened, and what to do unless the caller says better
_FAILURES = {
    FAIL_NO_MEMORY: (
        MemoryError,
        "could not allocate its working memory",
        "Free memory, or use fewer threads (OMP_NUM_THREADS or threadpoolctl) or smaller "
        "batches.",
    ),
    FAIL_NOT_FINITE: (
        NonFiniteError,
        "met a value that is not finite",
        "The data or the parameters are too extreme for double precision; rescale the "
        "data to a moderate range.",
    ),
    FAIL_NOT_POSITIVE_DEFINITE: (
        ValueError,
        "met a covariance that is not positive definite",
        "Regularise the covariances or give the data some noise.",
    ),
}


def raise_for_status(status, operation, item="row", advice=None):
    """Raise one exception for the failed items of a parallel loop, if any.

    Parameters
    ----------
    status : array-like of int
        One status per item: >= 0 on success, a negative failure code otherwise.
    operation : str
        What the loop computes, the subject of the message (``"The E-step"``).
    item : str or None, default="row"
        What the loop's items are, to name the first that failed; None for a single
        status that names no item.
    advice : dict or None, default=None
        Per failure code, either what to do (a str, replacing the default) or a callable
        that takes the index of the first failed item and returns the exception to raise.

    Raises
    ------
    MemoryError, NonFiniteError or ValueError
        From the failure of the first failed item, with the number of failed items.
    """
    status = np.atleast_1d(np.asarray(status))
    failed = np.flatnonzero(status < 0)
    if failed.size == 0:
        return
    first = int(failed[0])
    code = int(status[first])
    cls, what, todo = _FAILURES.get(code, (RuntimeError, f"failed with status {code}", ""))
    todo = (advice or {}).get(code, todo)
    if callable(todo):
        raise todo(first)
    where = "" if item is None else f" of {failed.size} {item}(s) (first: {item} {first})"
    raise cls(f"{operation}{where} {what}. {todo}".rstrip())
