# Failures inside parallel loops. A prange body that can fail writes a status to its own
# item's slot of a status array (never to a variable shared by the threads), and the Python
# side raises one exception after the loop (`raise_for_status`), so a failure reaches the
# caller whichever thread met it. A status is 0 (or, where a kernel says so, a count >= 0)
# on success and one of these negative codes on failure.
cdef enum:
    FAIL_NO_MEMORY = -1             # a per-thread or per-item buffer could not be allocated
    FAIL_NOT_FINITE = -2            # a value that must be finite is NaN or infinite
    FAIL_NOT_POSITIVE_DEFINITE = -3  # a Cholesky factorisation met a non-positive pivot

# The places where the tests can force a failure (`_set_fault`), one per parallel loop.
cdef enum:
    SITE_NONE = 0
    SITE_COGAPS_ROWS = 1
    SITE_HPMF_COUNTS = 2
    SITE_HPMF_TRANSFORM = 3
    SITE_HPMF_SAMPLE = 4
    SITE_WBPMF_COUNTS = 5
    SITE_WBPMF_DATA_TERM = 6
    SITE_EBPM_POSTERIOR = 7
    SITE_XD_ESTEP = 8
    SITE_XD_LOG_PROB = 9
    SITE_M3F_ROWS = 10
    SITE_M3F_USERS = 11
    SITE_M3F_ITEMS = 12
    SITE_M3F_FEATURES = 13
    SITE_M3F_NEW_USER_FEATURES = 14
    SITE_WBPMF_ROWS = 15
    SITE_WBPMF_BOUND = 16

cdef int injected_fault(int site, Py_ssize_t item) noexcept nogil


cdef inline int item_status(int site, Py_ssize_t item, bint have_memory) noexcept nogil:
    """The status an item records before its work: a failure the tests injected at (site,
    item), FAIL_NO_MEMORY when its thread's scratch could not be allocated, else 0."""
    cdef int status = injected_fault(site, item)
    if status == 0 and not have_memory:
        return FAIL_NO_MEMORY
    return status
