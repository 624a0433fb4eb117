/* Weighted sums over one row of the residual, the inner loop of every CoGAPS proposal.

   For a direction d over the columns c of row r (d = o1, or o1 - o2 for a same-row pair)
       s   = sum_c d_c^2 w_c
       smu = sum_c d_c w_c res_c
   (w the precision row, res the residual row; doc/cogaps.rst, "per-proposal statistics").

   Every implementation below adds in one and the same order: four partial sums, partial j
   taking the columns c = j (mod 4) in increasing c, every product rounded on its own (no
   fused multiply-add), the leftover columns (n mod 4) added to partial 0, and the result
   (p0 + p1) + (p2 + p3). The SSE2 and AVX kernels compute exactly the lanes of the scalar
   one, so a chain gives the same bits on every x86-64 machine, with or without AVX, and on
   other processors through the scalar code. The AVX kernel is chosen at run time, once.
*/
#ifndef SKLEARN_COGAPS_ROW_SUMS_H
#define SKLEARN_COGAPS_ROW_SUMS_H

#include <stddef.h>

#if defined(__x86_64__) || defined(_M_X64)
#include <emmintrin.h>
#if defined(__GNUC__) && !defined(__INTEL_COMPILER)
#include <immintrin.h>
#define CG_HAVE_AVX_DISPATCH 1
#endif
#define CG_HAVE_SSE2 1
#endif

static inline void cg_row_sums_scalar(const double* o1, const double* o2, const double* res,
                                      const double* w, ptrdiff_t n, double* s, double* smu)
{
    double s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0;
    double m0 = 0.0, m1 = 0.0, m2 = 0.0, m3 = 0.0;
    double d0, d1, d2, d3;
    ptrdiff_t c = 0;
    if (o2 == NULL) {
        for (; c + 4 <= n; c += 4) {
            d0 = o1[c] * w[c];
            d1 = o1[c + 1] * w[c + 1];
            d2 = o1[c + 2] * w[c + 2];
            d3 = o1[c + 3] * w[c + 3];
            s0 += d0 * o1[c];
            s1 += d1 * o1[c + 1];
            s2 += d2 * o1[c + 2];
            s3 += d3 * o1[c + 3];
            m0 += d0 * res[c];
            m1 += d1 * res[c + 1];
            m2 += d2 * res[c + 2];
            m3 += d3 * res[c + 3];
        }
        for (; c < n; c++) {
            d0 = o1[c] * w[c];
            s0 += d0 * o1[c];
            m0 += d0 * res[c];
        }
    } else {
        for (; c + 4 <= n; c += 4) {
            d0 = o1[c] - o2[c];
            d1 = o1[c + 1] - o2[c + 1];
            d2 = o1[c + 2] - o2[c + 2];
            d3 = o1[c + 3] - o2[c + 3];
            s0 += d0 * d0 * w[c];
            s1 += d1 * d1 * w[c + 1];
            s2 += d2 * d2 * w[c + 2];
            s3 += d3 * d3 * w[c + 3];
            m0 += d0 * w[c] * res[c];
            m1 += d1 * w[c + 1] * res[c + 1];
            m2 += d2 * w[c + 2] * res[c + 2];
            m3 += d3 * w[c + 3] * res[c + 3];
        }
        for (; c < n; c++) {
            d0 = o1[c] - o2[c];
            s0 += d0 * d0 * w[c];
            m0 += d0 * w[c] * res[c];
        }
    }
    *s = (s0 + s1) + (s2 + s3);
    *smu = (m0 + m1) + (m2 + m3);
}

#ifdef CG_HAVE_SSE2
/* Two 2-lane registers per sum: lanes (0, 1) and (2, 3) of the scalar partials. */
static inline void cg_row_sums_sse2(const double* o1, const double* o2, const double* res,
                                    const double* w, ptrdiff_t n, double* s, double* smu)
{
    __m128d sa = _mm_setzero_pd(), sb = _mm_setzero_pd();
    __m128d ma = _mm_setzero_pd(), mb = _mm_setzero_pd();
    __m128d da, db, wa, wb;
    double ps[4], pm[4], d;
    ptrdiff_t c = 0;
    if (o2 == NULL) {
        for (; c + 4 <= n; c += 4) {
            __m128d oa = _mm_loadu_pd(o1 + c), ob = _mm_loadu_pd(o1 + c + 2);
            da = _mm_mul_pd(oa, _mm_loadu_pd(w + c));
            db = _mm_mul_pd(ob, _mm_loadu_pd(w + c + 2));
            sa = _mm_add_pd(sa, _mm_mul_pd(da, oa));
            sb = _mm_add_pd(sb, _mm_mul_pd(db, ob));
            ma = _mm_add_pd(ma, _mm_mul_pd(da, _mm_loadu_pd(res + c)));
            mb = _mm_add_pd(mb, _mm_mul_pd(db, _mm_loadu_pd(res + c + 2)));
        }
    } else {
        for (; c + 4 <= n; c += 4) {
            da = _mm_sub_pd(_mm_loadu_pd(o1 + c), _mm_loadu_pd(o2 + c));
            db = _mm_sub_pd(_mm_loadu_pd(o1 + c + 2), _mm_loadu_pd(o2 + c + 2));
            wa = _mm_loadu_pd(w + c);
            wb = _mm_loadu_pd(w + c + 2);
            sa = _mm_add_pd(sa, _mm_mul_pd(_mm_mul_pd(da, da), wa));
            sb = _mm_add_pd(sb, _mm_mul_pd(_mm_mul_pd(db, db), wb));
            ma = _mm_add_pd(ma, _mm_mul_pd(_mm_mul_pd(da, wa), _mm_loadu_pd(res + c)));
            mb = _mm_add_pd(mb, _mm_mul_pd(_mm_mul_pd(db, wb), _mm_loadu_pd(res + c + 2)));
        }
    }
    _mm_storeu_pd(ps, sa);
    _mm_storeu_pd(ps + 2, sb);
    _mm_storeu_pd(pm, ma);
    _mm_storeu_pd(pm + 2, mb);
    for (; c < n; c++) {
        if (o2 == NULL) {
            d = o1[c] * w[c];
            ps[0] += d * o1[c];
            pm[0] += d * res[c];
        } else {
            d = o1[c] - o2[c];
            ps[0] += d * d * w[c];
            pm[0] += d * w[c] * res[c];
        }
    }
    *s = (ps[0] + ps[1]) + (ps[2] + ps[3]);
    *smu = (pm[0] + pm[1]) + (pm[2] + pm[3]);
}
#endif

#ifdef CG_HAVE_AVX_DISPATCH
/* One 4-lane register per sum: exactly the four scalar partials. No FMA: a fused
   multiply-add rounds once where the other kernels round twice. */
__attribute__((target("avx")))
static void cg_row_sums_avx(const double* o1, const double* o2, const double* res,
                            const double* w, ptrdiff_t n, double* s, double* smu)
{
    __m256d sv = _mm256_setzero_pd(), mv = _mm256_setzero_pd(), dv, wv;
    double ps[4], pm[4], d;
    ptrdiff_t c = 0;
    if (o2 == NULL) {
        for (; c + 4 <= n; c += 4) {
            __m256d ov = _mm256_loadu_pd(o1 + c);
            dv = _mm256_mul_pd(ov, _mm256_loadu_pd(w + c));
            sv = _mm256_add_pd(sv, _mm256_mul_pd(dv, ov));
            mv = _mm256_add_pd(mv, _mm256_mul_pd(dv, _mm256_loadu_pd(res + c)));
        }
    } else {
        for (; c + 4 <= n; c += 4) {
            dv = _mm256_sub_pd(_mm256_loadu_pd(o1 + c), _mm256_loadu_pd(o2 + c));
            wv = _mm256_loadu_pd(w + c);
            sv = _mm256_add_pd(sv, _mm256_mul_pd(_mm256_mul_pd(dv, dv), wv));
            mv = _mm256_add_pd(mv, _mm256_mul_pd(_mm256_mul_pd(dv, wv), _mm256_loadu_pd(res + c)));
        }
    }
    _mm256_storeu_pd(ps, sv);
    _mm256_storeu_pd(pm, mv);
    for (; c < n; c++) {
        if (o2 == NULL) {
            d = o1[c] * w[c];
            ps[0] += d * o1[c];
            pm[0] += d * res[c];
        } else {
            d = o1[c] - o2[c];
            ps[0] += d * d * w[c];
            pm[0] += d * w[c] * res[c];
        }
    }
    *s = (ps[0] + ps[1]) + (ps[2] + ps[3]);
    *smu = (pm[0] + pm[1]) + (pm[2] + pm[3]);
}

/* 1: AVX, 0: SSE2, -1: not decided yet. Deciding twice (two threads at once) is harmless:
   both write the same value. */
static int cg_use_avx = -1;

static inline int cg_avx_available(void)
{
    if (cg_use_avx < 0) {
        __builtin_cpu_init();
        cg_use_avx = __builtin_cpu_supports("avx") ? 1 : 0;
    }
    return cg_use_avx;
}
#endif

/* The kernel every caller uses: the widest one the processor runs, all with the same bits. */
static inline void cg_row_sums(const double* o1, const double* o2, const double* res,
                               const double* w, ptrdiff_t n, double* s, double* smu)
{
#if defined(CG_HAVE_AVX_DISPATCH)
    if (cg_avx_available()) {
        cg_row_sums_avx(o1, o2, res, w, n, s, smu);
        return;
    }
#endif
#if defined(CG_HAVE_SSE2)
    cg_row_sums_sse2(o1, o2, res, w, n, s, smu);
#else
    cg_row_sums_scalar(o1, o2, res, w, n, s, smu);
#endif
}

#endif
