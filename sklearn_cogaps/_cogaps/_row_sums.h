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

   The residual and the precision are stored in double (cg_row_sums_f64) or in float
   (cg_row_sums_f32, half the bytes read per entry). A float is widened to double when it
   is read, which is exact, and all the arithmetic above is in double in both cases: the
   storage type changes what is stored, not how it is summed. The kernels are written once,
   in _row_sums_impl.h, and instantiated for each type below.
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

/* Rows shorter than this are summed and updated by inlined code (cg_row_sums,
   cg_residual_update) rather than by a call into the AVX kernels. */
#define CG_SHORT_ROW 16

#ifdef CG_HAVE_AVX_DISPATCH
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

#ifdef CG_HAVE_SSE2
/* Two stored values widened to the two double lanes of an SSE2 register. */
static inline __m128d cg_load2_f64(const double* p) { return _mm_loadu_pd(p); }
static inline __m128d cg_load2_f32(const float* p)
{
    return _mm_cvtps_pd(_mm_castsi128_ps(_mm_loadl_epi64((const __m128i*)p)));
}
#endif

#ifdef CG_HAVE_AVX_DISPATCH
/* Four stored values widened to the four double lanes of an AVX register. */
__attribute__((target("avx")))
static inline __m256d cg_load4_f64(const double* p) { return _mm256_loadu_pd(p); }
__attribute__((target("avx")))
static inline __m256d cg_load4_f32(const float* p) { return _mm256_cvtps_pd(_mm_loadu_ps(p)); }
#endif

/* The kernels, once per storage type of the residual and the precision:
   cg_row_sums_f64 and cg_row_sums_f32 (and their residual helpers). */
#define CG_T double
#define CG_SUFFIX f64
#include "_row_sums_impl.h"
#undef CG_T
#undef CG_SUFFIX

#define CG_T float
#define CG_SUFFIX f32
#include "_row_sums_impl.h"
#undef CG_T
#undef CG_SUFFIX

#endif
