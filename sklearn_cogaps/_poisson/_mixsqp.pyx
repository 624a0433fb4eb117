"""Mixture weights by sequential quadratic programming (mix-SQP), compiled.

Kim, Carbonetto, Stephens & Anitescu (2020), "A fast algorithm for maximum likelihood
estimation of mixture proportions using sequential quadratic programming", section 2: the
weights maximise ``(1/n) sum_i log (L x)_i`` over the simplex, solved as ``min f(x) =
-(1/n) sum_i log (L x)_i + sum_j x_j`` over ``x >= 0``, each iteration minimising the
quadratic model of ``f`` under ``x >= 0`` by a primal active-set method and stepping by
backtracking line search.

The Hessian of ``f``, ``H = A'A / n`` with ``A = diag(1/(Lx)) L``, is never formed whole (it
would cost ``n m^2`` per iteration): the active-set method only needs its entries on the
free set, built on demand and kept for the iteration, and its products ``H u``, which are
``A'(A u) / n`` at ``n (m + |support of u|)``. EBPM's priors keep a few of the grid's
components, so an iteration costs a few passes over ``L``.

Every pass over the rows of ``L`` is cut into a number of chunks fixed by ``n`` alone
(``_n_chunks``); each chunk makes its own partial sums, which are then added in the chunks'
order, so the chunks run on several threads and the solution does not depend on the thread
count. Below ``2 * CHUNK_ROWS`` rows there is one chunk: the sums are those of a plain loop.
"""

from cython.parallel cimport prange
from libc.math cimport fabs, log, INFINITY
from libc.stdlib cimport free, malloc

ctypedef Py_ssize_t intp_t

# Rows per chunk of the passes (at least), and the most chunks.
cdef intp_t CHUNK_ROWS = 2048
cdef intp_t MAX_CHUNKS = 16


cdef struct Chunks:
    # the passes' partition of the rows and their scratch: per chunk, m partial sums and
    # a compensated sum with its compensation
    intp_t n
    intp_t count
    int n_threads
    double* part      # count x m
    double* acc       # count
    double* comp      # count
    char* bad         # count


cdef inline intp_t _n_chunks(intp_t n) noexcept nogil:
    cdef intp_t c = n // CHUNK_ROWS
    if c < 1:
        return 1
    return c if c < MAX_CHUNKS else MAX_CHUNKS


cdef inline intp_t _lo(const Chunks* ch, intp_t c) noexcept nogil:
    return (ch.n * c) // ch.count


cdef inline void _neumaier(double* acc, double* comp, double term) noexcept nogil:
    cdef double t = acc[0] + term
    if fabs(acc[0]) >= fabs(term):
        comp[0] = comp[0] + ((acc[0] - t) + term)
    else:
        comp[0] = comp[0] + ((term - t) + acc[0])
    acc[0] = t


cdef void _add_parts(const Chunks* ch, intp_t m, double* out) noexcept nogil:
    """out[j] = the chunks' partial sums of j, added in the chunks' order."""
    cdef intp_t c, j
    for j in range(m):
        out[j] = 0.0
    for c in range(ch.count):
        for j in range(m):
            out[j] = out[j] + ch.part[c * m + j]

# Ridge added to the Hessian's diagonal, so the free set's system is positive definite when
# components have (nearly) equal likelihood columns (the grid's Gamma(1e-8) and
# Gamma(1e-16) do).
cdef double RIDGE = 1e-10


cdef double _objective(const double[:, ::1] L, const double* z, const intp_t* nz, intp_t n_nz,
                       double* v, Chunks* ch) noexcept nogil:
    """f(z) = -(1/n) sum_i log (L z)_i + sum_j z_j, +inf where some (L z)_i <= 0; ``nz``
    lists the positive entries of z; ``v`` receives L z."""
    cdef intp_t n = L.shape[0], i, a, c, lo, hi
    cdef double acc = 0.0, comp = 0.0, total = 0.0, vi
    for c in prange(ch.count, nogil=True, schedule="static", num_threads=ch.n_threads):
        lo = _lo(ch, c)
        hi = _lo(ch, c + 1)
        ch.acc[c] = 0.0
        ch.comp[c] = 0.0
        ch.bad[c] = 0
        for i in range(lo, hi):
            vi = 0.0
            for a in range(n_nz):
                vi = vi + L[i, nz[a]] * z[nz[a]]
            v[i] = vi
            if vi <= 0.0:
                ch.bad[c] = 1
            elif not ch.bad[c]:
                # compensated (Neumaier) sum: near the optimum the line search compares
                # values of f that differ by 1e-15 relative, below the error of a plain sum
                # of n logarithms
                _neumaier(&ch.acc[c], &ch.comp[c], log(vi))
    for c in range(ch.count):
        if ch.bad[c]:
            return INFINITY
        _neumaier(&acc, &comp, ch.acc[c] + ch.comp[c])
    for a in range(n_nz):
        total = total + z[nz[a]]
    return -(acc + comp) / n + total


cdef intp_t _support(const double* z, intp_t m, intp_t* nz) noexcept nogil:
    cdef intp_t j, count = 0
    for j in range(m):
        if z[j] > 0.0:
            nz[count] = j
            count += 1
    return count


cdef void _hess_times(const double[:, ::1] L, const double* d, const double* u, intp_t m,
                      const intp_t* nz, intp_t n_nz, double* out, Chunks* ch) noexcept nogil:
    """out = H u (with the ridge), ``nz`` the non-zero entries of u."""
    cdef intp_t n = L.shape[0], i, j, a, c, lo, hi
    cdef double ti
    cdef double* part
    for c in prange(ch.count, nogil=True, schedule="static", num_threads=ch.n_threads):
        part = ch.part + c * m
        for j in range(m):
            part[j] = 0.0
        lo = _lo(ch, c)
        hi = _lo(ch, c + 1)
        for i in range(lo, hi):
            ti = 0.0
            for a in range(n_nz):
                ti = ti + L[i, nz[a]] * u[nz[a]]
            ti = ti * d[i] * d[i]
            if ti != 0.0:
                for j in range(m):
                    part[j] = part[j] + L[i, j] * ti
    _add_parts(ch, m, out)
    for j in range(m):
        out[j] = out[j] / n + RIDGE * u[j]


cdef double _hess_entry(const double[:, ::1] L, const double* d, intp_t j, intp_t k,
                        double* H, char* known, intp_t m, Chunks* ch) noexcept nogil:
    """H_jk, computed on first use in this iteration and kept in ``H``."""
    cdef intp_t n = L.shape[0], i, c, lo, hi
    cdef double acc = 0.0, s
    if not known[j * m + k]:
        for c in prange(ch.count, nogil=True, schedule="static", num_threads=ch.n_threads):
            lo = _lo(ch, c)
            hi = _lo(ch, c + 1)
            s = 0.0
            for i in range(lo, hi):
                s = s + L[i, j] * L[i, k] * d[i] * d[i]
            ch.acc[c] = s
        for c in range(ch.count):
            acc = acc + ch.acc[c]
        acc = acc / n
        if j == k:
            acc = acc + RIDGE
        H[j * m + k] = acc
        H[k * m + j] = acc
        known[j * m + k] = 1
        known[k * m + j] = 1
    return H[j * m + k]


cdef bint _solve(double* A, double* b, intp_t q) noexcept nogil:
    """Solve A z = b in place (z in b) by Gaussian elimination with partial pivoting;
    A (q, q) row-major is overwritten. False if A is singular to working precision."""
    cdef intp_t r, c, piv, k
    cdef double best, tmp, f
    for c in range(q):
        piv = c
        best = fabs(A[c * q + c])
        for r in range(c + 1, q):
            if fabs(A[r * q + c]) > best:
                best = fabs(A[r * q + c])
                piv = r
        if best == 0.0:
            return False
        if piv != c:
            for k in range(q):
                tmp = A[c * q + k]
                A[c * q + k] = A[piv * q + k]
                A[piv * q + k] = tmp
            tmp = b[c]
            b[c] = b[piv]
            b[piv] = tmp
        for r in range(c + 1, q):
            f = A[r * q + c] / A[c * q + c]
            if f != 0.0:
                for k in range(c, q):
                    A[r * q + k] = A[r * q + k] - f * A[c * q + k]
                b[r] = b[r] - f * b[c]
    for c in range(q - 1, -1, -1):
        tmp = b[c]
        for k in range(c + 1, q):
            tmp = tmp - A[c * q + k] * b[k]
        b[c] = tmp / A[c * q + c]
    return True


cdef void _quadratic_step(const double[:, ::1] L, const double* d, const double* g,
                          const double* x, double* y, intp_t m, double* H, char* known,
                          double* work, intp_t* iwork, int max_iter,
                          Chunks* ch) noexcept nogil:
    """Minimise the model ``g'(y - x) + (y - x)'H(y - x)/2`` over ``y >= 0`` from ``y = x``
    (primal active set: Nocedal & Wright 2006, algorithm 16.3)."""
    cdef double* grad = work
    cdef double* u = work + m
    cdef double* p = work + 2 * m
    cdef double* A = work + 3 * m
    cdef char* active = <char*> (iwork + 2 * m)
    cdef intp_t* free_ = iwork
    cdef intp_t* nz = iwork + m
    cdef intp_t j, k, a, b, n_free, n_nz, block, it
    cdef double alpha, ratio, lam, big
    cdef bint stationary = False, moved = True
    for j in range(m):
        y[j] = x[j]
        active[j] = y[j] <= 0.0
        if active[j]:
            y[j] = 0.0
    for it in range(max_iter):
        if moved:  # the gradient of the model at y: g + H (y - x)
            for j in range(m):
                u[j] = y[j] - x[j]
            n_nz = 0
            for j in range(m):
                if u[j] != 0.0:
                    nz[n_nz] = j
                    n_nz += 1
            _hess_times(L, d, u, m, nz, n_nz, grad, ch)
            for j in range(m):
                grad[j] = grad[j] + g[j]
            moved = False
        if not stationary:
            n_free = 0
            for j in range(m):
                p[j] = 0.0
                if not active[j]:
                    free_[n_free] = j
                    n_free += 1
            if n_free:
                for a in range(n_free):
                    for b in range(n_free):
                        A[a * n_free + b] = _hess_entry(L, d, free_[a], free_[b], H, known, m,
                                                        ch)
                    u[a] = -grad[free_[a]]
                if not _solve(A, u, n_free):
                    return
                for a in range(n_free):
                    p[free_[a]] = u[a]
            # step to the minimiser on the working set, or to the first blocking bound
            alpha = 1.0
            block = -1
            for a in range(n_free):
                j = free_[a]
                if p[j] < 0.0:
                    ratio = -y[j] / p[j]
                    if ratio < alpha:
                        alpha = ratio
                        block = j
            for j in range(m):
                y[j] = y[j] + alpha * p[j]
                if y[j] < 0.0:
                    y[j] = 0.0
            moved = True
            if block >= 0:
                y[block] = 0.0
                active[block] = 1
                continue
            stationary = True  # a full step reaches the minimiser on the working set
            continue  # the gradient at the new y, at the loop's top
        # stationary on the working set: release the most negative multiplier, if any
        k = -1
        lam = 0.0
        big = 1.0
        for j in range(m):
            if fabs(grad[j]) > big:
                big = fabs(grad[j])
            if active[j] and grad[j] < lam:
                lam = grad[j]
                k = j
        if k < 0 or lam >= -1e-14 * big:
            return
        active[k] = 0
        stationary = False


def mixsqp_solve(const double[:, ::1] L, double[::1] x, double tol, int max_iter,
                 int n_threads=1):
    """Solve in place from the weights ``x`` (non-negative, sum 1, ``L x > 0``); returns the
    KKT residual ``max(0, -min_j g_j, max_{x_j > 0} |g_j|)`` of ``g = grad f`` at the last
    iterate. On return ``x`` is non-negative and sums to 1. The passes over the rows run
    on ``n_threads`` threads; the result does not depend on them."""
    cdef intp_t n = L.shape[0], m = L.shape[1], i, j, a, n_nz, c, lo, hi
    cdef double kkt = INFINITY, fx, fn, slope, alpha, total, gmin, gabs
    cdef int it
    cdef double* part
    cdef Chunks ch
    ch.n = n
    ch.count = _n_chunks(n)
    ch.n_threads = n_threads if n_threads > 0 else 1
    cdef double* buf = <double*> malloc(sizeof(double) * (2 * n + 9 * m + 2 * m * m))
    cdef intp_t* ibuf = <intp_t*> malloc(sizeof(intp_t) * 4 * m)
    cdef char* known = <char*> malloc(m * m)
    ch.part = <double*> malloc(sizeof(double) * ch.count * (m + 2))
    ch.bad = <char*> malloc(ch.count)
    if buf == NULL or ibuf == NULL or known == NULL or ch.part == NULL or ch.bad == NULL:
        free(buf)
        free(ibuf)
        free(known)
        free(ch.part)
        free(ch.bad)
        raise MemoryError()
    ch.acc = ch.part + ch.count * m
    ch.comp = ch.acc + ch.count
    cdef double* v = buf
    cdef double* d = buf + n
    cdef double* g = buf + 2 * n
    cdef double* y = g + m
    cdef double* xn = y + m
    cdef double* H = xn + m
    cdef double* work = H + m * m  # 4 m + m^2 for the quadratic step
    cdef intp_t* nz = ibuf
    with nogil:
        n_nz = _support(&x[0], m, nz)
        fx = _objective(L, &x[0], nz, n_nz, v, &ch)
        for it in range(max_iter):
            for c in prange(ch.count, schedule="static", num_threads=ch.n_threads):
                part = ch.part + c * m
                for j in range(m):
                    part[j] = 0.0
                lo = _lo(&ch, c)
                hi = _lo(&ch, c + 1)
                for i in range(lo, hi):
                    d[i] = 1.0 / v[i]
                    for j in range(m):
                        part[j] = part[j] + L[i, j] * d[i]
            _add_parts(&ch, m, g)
            gmin = 0.0
            gabs = 0.0
            for j in range(m):
                g[j] = 1.0 - g[j] / n
                if -g[j] > gmin:
                    gmin = -g[j]
                if x[j] > 0.0 and fabs(g[j]) > gabs:
                    gabs = fabs(g[j])
            kkt = gmin if gmin > gabs else gabs
            if kkt <= tol:
                break
            for j in range(m * m):
                known[j] = 0
            _quadratic_step(L, d, g, &x[0], y, m, H, known, work, ibuf, 200, &ch)
            slope = 0.0
            for j in range(m):
                y[j] = y[j] - x[j]  # the search direction p
                slope = slope + g[j] * y[j]
            if slope >= -1e-15 * (1.0 + fabs(fx)):
                # The model predicts no decrease above round-off: x is optimal to machine
                # precision (nearly collinear columns can leave a KKT residual above tol that
                # no representable step reduces).
                break
            alpha = 1.0
            fn = INFINITY
            while alpha > 1e-12:
                for j in range(m):
                    xn[j] = x[j] + alpha * y[j]
                n_nz = _support(xn, m, nz)
                fn = _objective(L, xn, nz, n_nz, v, &ch)
                if fn <= fx + 0.01 * alpha * slope:
                    break
                alpha = alpha * 0.5
            if alpha <= 1e-12 or not fn < fx:
                # no step decreases f by a representable amount: x is optimal to the
                # precision of f
                break
            for j in range(m):
                x[j] = xn[j]
            fx = fn
        # v holds L x of the last accepted iterate unless the line search failed: then it
        # is not used again
        total = 0.0
        for j in range(m):
            if x[j] < 0.0:
                x[j] = 0.0
            total = total + x[j]
        for j in range(m):
            x[j] = x[j] / total
    free(buf)
    free(ibuf)
    free(known)
    free(ch.part)
    free(ch.bad)
    return kkt
