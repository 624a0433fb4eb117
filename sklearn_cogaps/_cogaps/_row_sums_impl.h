/* The row kernels of _row_sums.h for one storage type of the residual and the precision,
   included once per type with CG_T (double or float) and CG_SUFFIX (f64 or f32) defined.
   A stored value is widened to double when it is read (exact), and every product and sum
   is formed in double in the order _row_sums.h describes, so the kernels of one type give
   the same bits with or without SIMD; only the storage, and the rounding of a residual
   written back, depend on the type. No include guard: included once per type. */

#define CG_PASTE2(a, b) a##_##b
#define CG_PASTE(a, b) CG_PASTE2(a, b)
#define CG_NAME(base) CG_PASTE(base, CG_SUFFIX)

static inline void CG_NAME(cg_row_sums_scalar)(const double* o1, const double* o2,
                                               const CG_T* res, const CG_T* w, ptrdiff_t n,
                                               double* s, double* smu)
{
    double s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0;
    double m0 = 0.0, m1 = 0.0, m2 = 0.0, m3 = 0.0;
    double d0, d1, d2, d3;
    ptrdiff_t c = 0;
    if (o2 == NULL) {
        for (; c + 4 <= n; c += 4) {
            d0 = o1[c] * (double)w[c];
            d1 = o1[c + 1] * (double)w[c + 1];
            d2 = o1[c + 2] * (double)w[c + 2];
            d3 = o1[c + 3] * (double)w[c + 3];
            s0 += d0 * o1[c];
            s1 += d1 * o1[c + 1];
            s2 += d2 * o1[c + 2];
            s3 += d3 * o1[c + 3];
            m0 += d0 * (double)res[c];
            m1 += d1 * (double)res[c + 1];
            m2 += d2 * (double)res[c + 2];
            m3 += d3 * (double)res[c + 3];
        }
        for (; c < n; c++) {
            d0 = o1[c] * (double)w[c];
            s0 += d0 * o1[c];
            m0 += d0 * (double)res[c];
        }
    } else {
        for (; c + 4 <= n; c += 4) {
            d0 = o1[c] - o2[c];
            d1 = o1[c + 1] - o2[c + 1];
            d2 = o1[c + 2] - o2[c + 2];
            d3 = o1[c + 3] - o2[c + 3];
            s0 += d0 * d0 * (double)w[c];
            s1 += d1 * d1 * (double)w[c + 1];
            s2 += d2 * d2 * (double)w[c + 2];
            s3 += d3 * d3 * (double)w[c + 3];
            m0 += d0 * (double)w[c] * (double)res[c];
            m1 += d1 * (double)w[c + 1] * (double)res[c + 1];
            m2 += d2 * (double)w[c + 2] * (double)res[c + 2];
            m3 += d3 * (double)w[c + 3] * (double)res[c + 3];
        }
        for (; c < n; c++) {
            d0 = o1[c] - o2[c];
            s0 += d0 * d0 * (double)w[c];
            m0 += d0 * (double)w[c] * (double)res[c];
        }
    }
    *s = (s0 + s1) + (s2 + s3);
    *smu = (m0 + m1) + (m2 + m3);
}

/* The leftover columns (n mod 4) go to partial 0, as in the scalar kernel. */
static inline void CG_NAME(cg_row_sums_tail)(const double* o1, const double* o2,
                                             const CG_T* res, const CG_T* w, ptrdiff_t c,
                                             ptrdiff_t n, double* ps, double* pm)
{
    double d;
    for (; c < n; c++) {
        if (o2 == NULL) {
            d = o1[c] * (double)w[c];
            ps[0] += d * o1[c];
            pm[0] += d * (double)res[c];
        } else {
            d = o1[c] - o2[c];
            ps[0] += d * d * (double)w[c];
            pm[0] += d * (double)w[c] * (double)res[c];
        }
    }
}

#ifdef CG_HAVE_SSE2
/* Two 2-lane registers per sum: lanes (0, 1) and (2, 3) of the scalar partials. */
static inline void CG_NAME(cg_row_sums_sse2)(const double* o1, const double* o2,
                                             const CG_T* res, const CG_T* w, ptrdiff_t n,
                                             double* s, double* smu)
{
    __m128d sa = _mm_setzero_pd(), sb = _mm_setzero_pd();
    __m128d ma = _mm_setzero_pd(), mb = _mm_setzero_pd();
    __m128d da, db, wa, wb;
    double ps[4], pm[4];
    ptrdiff_t c = 0;
    if (o2 == NULL) {
        for (; c + 4 <= n; c += 4) {
            __m128d oa = _mm_loadu_pd(o1 + c), ob = _mm_loadu_pd(o1 + c + 2);
            da = _mm_mul_pd(oa, CG_NAME(cg_load2)(w + c));
            db = _mm_mul_pd(ob, CG_NAME(cg_load2)(w + c + 2));
            sa = _mm_add_pd(sa, _mm_mul_pd(da, oa));
            sb = _mm_add_pd(sb, _mm_mul_pd(db, ob));
            ma = _mm_add_pd(ma, _mm_mul_pd(da, CG_NAME(cg_load2)(res + c)));
            mb = _mm_add_pd(mb, _mm_mul_pd(db, CG_NAME(cg_load2)(res + c + 2)));
        }
    } else {
        for (; c + 4 <= n; c += 4) {
            da = _mm_sub_pd(_mm_loadu_pd(o1 + c), _mm_loadu_pd(o2 + c));
            db = _mm_sub_pd(_mm_loadu_pd(o1 + c + 2), _mm_loadu_pd(o2 + c + 2));
            wa = CG_NAME(cg_load2)(w + c);
            wb = CG_NAME(cg_load2)(w + c + 2);
            sa = _mm_add_pd(sa, _mm_mul_pd(_mm_mul_pd(da, da), wa));
            sb = _mm_add_pd(sb, _mm_mul_pd(_mm_mul_pd(db, db), wb));
            ma = _mm_add_pd(ma, _mm_mul_pd(_mm_mul_pd(da, wa), CG_NAME(cg_load2)(res + c)));
            mb = _mm_add_pd(mb, _mm_mul_pd(_mm_mul_pd(db, wb), CG_NAME(cg_load2)(res + c + 2)));
        }
    }
    _mm_storeu_pd(ps, sa);
    _mm_storeu_pd(ps + 2, sb);
    _mm_storeu_pd(pm, ma);
    _mm_storeu_pd(pm + 2, mb);
    CG_NAME(cg_row_sums_tail)(o1, o2, res, w, c, n, ps, pm);
    *s = (ps[0] + ps[1]) + (ps[2] + ps[3]);
    *smu = (pm[0] + pm[1]) + (pm[2] + pm[3]);
}
#endif

#ifdef CG_HAVE_AVX_DISPATCH
/* One 4-lane register per sum: exactly the four scalar partials. No FMA: a fused
   multiply-add rounds once where the other kernels round twice. */
__attribute__((target("avx")))
static void CG_NAME(cg_row_sums_avx)(const double* o1, const double* o2, const CG_T* res,
                                     const CG_T* w, ptrdiff_t n, double* s, double* smu)
{
    __m256d sv = _mm256_setzero_pd(), mv = _mm256_setzero_pd(), dv, wv;
    double ps[4], pm[4];
    ptrdiff_t c = 0;
    if (o2 == NULL) {
        for (; c + 4 <= n; c += 4) {
            __m256d ov = _mm256_loadu_pd(o1 + c);
            dv = _mm256_mul_pd(ov, CG_NAME(cg_load4)(w + c));
            sv = _mm256_add_pd(sv, _mm256_mul_pd(dv, ov));
            mv = _mm256_add_pd(mv, _mm256_mul_pd(dv, CG_NAME(cg_load4)(res + c)));
        }
    } else {
        for (; c + 4 <= n; c += 4) {
            dv = _mm256_sub_pd(_mm256_loadu_pd(o1 + c), _mm256_loadu_pd(o2 + c));
            wv = CG_NAME(cg_load4)(w + c);
            sv = _mm256_add_pd(sv, _mm256_mul_pd(_mm256_mul_pd(dv, dv), wv));
            mv = _mm256_add_pd(mv, _mm256_mul_pd(_mm256_mul_pd(dv, wv), CG_NAME(cg_load4)(res + c)));
        }
    }
    _mm256_storeu_pd(ps, sv);
    _mm256_storeu_pd(pm, mv);
    CG_NAME(cg_row_sums_tail)(o1, o2, res, w, c, n, ps, pm);
    *s = (ps[0] + ps[1]) + (ps[2] + ps[3]);
    *smu = (pm[0] + pm[1]) + (pm[2] + pm[3]);
}
#endif

/* The kernel every caller uses: the widest one the processor runs, all with the same bits.
   Rows shorter than CG_SHORT_ROW go to the SSE2 kernel, which is inlined into the caller:
   for a few columns the call into the AVX kernel costs more than its wider registers
   save (GIST's amplitudes have rows of 9 samples). */
static inline void CG_NAME(cg_row_sums)(const double* o1, const double* o2, const CG_T* res,
                                        const CG_T* w, ptrdiff_t n, double* s, double* smu)
{
#if defined(CG_HAVE_AVX_DISPATCH)
    if (n >= CG_SHORT_ROW && cg_avx_available()) {
        CG_NAME(cg_row_sums_avx)(o1, o2, res, w, n, s, smu);
        return;
    }
#endif
#if defined(CG_HAVE_SSE2)
    CG_NAME(cg_row_sums_sse2)(o1, o2, res, w, n, s, smu);
#else
    CG_NAME(cg_row_sums_scalar)(o1, o2, res, w, n, s, smu);
#endif
}

/* res -= delta * o, each entry formed in double and rounded once to the storage type: the
   residual row follows a change delta of one matrix element. */
static inline __attribute__((always_inline))
void CG_NAME(cg_residual_update_body)(CG_T* restrict res, const double* restrict o,
                                      double delta, ptrdiff_t n)
{
    ptrdiff_t c;
    for (c = 0; c < n; c++)
        res[c] = (CG_T)((double)res[c] - delta * o[c]);
}

/* One row of R = X - M O^T, from the row m (K) of M and Ot = O^T (K x n): each entry is
   x - m_0 o_0 - m_1 o_1 - ... in double, in increasing k, rounded once when stored. buf
   (n doubles) holds the row while it is formed. */
static inline __attribute__((always_inline))
void CG_NAME(cg_residual_row_body)(const CG_T* x, const double* m, const double* Ot,
                                   ptrdiff_t K, ptrdiff_t n, CG_T* res, double* buf)
{
    ptrdiff_t c, k;
    const double* o;
    double mk;
    for (c = 0; c < n; c++)
        buf[c] = (double)x[c];
    for (k = 0; k < K; k++) {
        mk = m[k];
        o = Ot + k * n;
        for (c = 0; c < n; c++)
            buf[c] = buf[c] - mk * o[c];
    }
    for (c = 0; c < n; c++)
        res[c] = (CG_T)buf[c];
}

/* The same loops compiled for AVX: every entry is computed on its own (no sum across
   entries), so any vector width gives the bits of the plain loop. */
#ifdef CG_HAVE_AVX_DISPATCH
__attribute__((target("avx")))
static void CG_NAME(cg_residual_update_avx)(CG_T* restrict res, const double* restrict o,
                                            double delta, ptrdiff_t n)
{
    CG_NAME(cg_residual_update_body)(res, o, delta, n);
}

__attribute__((target("avx")))
static void CG_NAME(cg_residual_row_avx)(const CG_T* x, const double* m, const double* Ot,
                                         ptrdiff_t K, ptrdiff_t n, CG_T* res, double* buf)
{
    CG_NAME(cg_residual_row_body)(x, m, Ot, K, n, res, buf);
}
#endif

/* Short rows are updated by the inlined plain loop, as cg_row_sums sums them. */
static inline void CG_NAME(cg_residual_update)(CG_T* res, const double* o, double delta,
                                               ptrdiff_t n)
{
#if defined(CG_HAVE_AVX_DISPATCH)
    if (n >= CG_SHORT_ROW && cg_avx_available()) {
        CG_NAME(cg_residual_update_avx)(res, o, delta, n);
        return;
    }
#endif
    CG_NAME(cg_residual_update_body)(res, o, delta, n);
}

static inline void CG_NAME(cg_residual_row)(const CG_T* x, const double* m, const double* Ot,
                                            ptrdiff_t K, ptrdiff_t n, CG_T* res, double* buf)
{
#if defined(CG_HAVE_AVX_DISPATCH)
    if (cg_avx_available()) {
        CG_NAME(cg_residual_row_avx)(x, m, Ot, K, n, res, buf);
        return;
    }
#endif
    CG_NAME(cg_residual_row_body)(x, m, Ot, K, n, res, buf);
}

#undef CG_NAME
#undef CG_PASTE
#undef CG_PASTE2
