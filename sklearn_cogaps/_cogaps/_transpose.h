/* dst (m x n) = src (n x m)^T for the rows [i0, i1) of src: the transposes of the CoGAPS
   residual between its two half-iterations (_chisq.pyx). Consecutive rows start
   lds values apart in src and ldd values apart in dst (lds >= m, ldd >= n): the residuals
   are stored with rows padded to a stride that suits the transposes
   (residual_row_stride in _chisq.pyx).

   A transpose only moves values, so every implementation gives the same bits; they differ
   in how many bytes they move per instruction and in how they meet the caches. The rows
   of src are walked in tiles of CG_TILE_ROWS rows by CG_TILE_COLS columns: a tile reads
   CG_TILE_ROWS streams of 2 KB and writes CG_TILE_COLS short runs, which keeps both sides
   in the first-level cache while the tile is moved. Inside a tile, blocks of 4 x 4 values
   go through registers: four AVX registers for doubles (chosen at run time, as the row
   kernels of _row_sums.h are), four SSE registers for floats (every x86-64 processor has
   SSE), element by element elsewhere and at the edges. On the benchmark shapes (200 to
   5000 rows of 200 to 5000 doubles) this moves a residual in about three quarters of the
   time of 32 x 32 tiles copied element by element (doc/cogaps_scale.rst).

   A residual larger than the caches (CG_STREAM_MIN_BYTES) is written with streaming
   stores when its rows allow them (aligned vector stores: dst on a 32-byte boundary for
   doubles, 16 for floats, and rows a multiple of 4 values): the stores go to memory
   without first reading each destination line into the cache, a third of the traffic of
   a transpose, and they do not evict the rows the proposals read. A tile then writes four
   rows of dst across its columns before the next four, so that the lines of those rows
   are completed together. The values, hence the chain, are the same either way. */
#ifndef SKLEARN_COGAPS_TRANSPOSE_H
#define SKLEARN_COGAPS_TRANSPOSE_H

#include <stddef.h>

#include "_row_sums.h"

#define CG_TILE_ROWS 16
#define CG_TILE_COLS 256
#define CG_STREAM_MIN_BYTES (4 << 20)

/* Streaming stores are ordered before later loads and stores by a fence (the other
   threads read dst after the parallel region). */
#ifdef CG_HAVE_SSE2
#define CG_STREAM_FENCE(stream) do { if (stream) _mm_sfence(); } while (0)
#else
#define CG_STREAM_FENCE(stream) do { (void)(stream); } while (0)
#endif

/* Element by element over the block [i0, i1) x [j0, j1). */
#define CG_TRANSPOSE_BLOCK(T)                                                              \
    static inline void cg_transpose_block_##T(const T* src, ptrdiff_t lds, T* dst,         \
                                              ptrdiff_t ldd, ptrdiff_t i0, ptrdiff_t i1,   \
                                              ptrdiff_t j0, ptrdiff_t j1)                  \
    {                                                                                      \
        ptrdiff_t i, j;                                                                    \
        for (i = i0; i < i1; i++)                                                          \
            for (j = j0; j < j1; j++)                                                      \
                dst[j * ldd + i] = src[i * lds + j];                                       \
    }
CG_TRANSPOSE_BLOCK(double)
CG_TRANSPOSE_BLOCK(float)
#undef CG_TRANSPOSE_BLOCK

/* A tile with streaming stores, by the 4 x 4 kernel KERNEL (its last argument 1): four rows
   of dst at a time, each written across the tile's columns before the next four, so that
   their cache lines are completed together; the edges element by element. */
#define CG_TRANSPOSE_TILE_STREAM(SUFFIX, T, KERNEL, ATTRIBUTE)                              \
    ATTRIBUTE static void cg_transpose_tile_##SUFFIX##_stream(                             \
        const T* src, ptrdiff_t lds, T* dst, ptrdiff_t ldd, ptrdiff_t i0, ptrdiff_t i1,    \
        ptrdiff_t j0, ptrdiff_t j1)                                                        \
    {                                                                                      \
        ptrdiff_t i, j, ie = i0 + ((i1 - i0) / 4) * 4, je = j0 + ((j1 - j0) / 4) * 4;      \
        for (j = j0; j < je; j += 4)                                                       \
            for (i = i0; i < ie; i += 4)                                                   \
                KERNEL(src + i * lds + j, lds, dst + j * ldd + i, ldd, 1);                 \
        cg_transpose_block_##T(src, lds, dst, ldd, i0, i1, je, j1);                        \
        cg_transpose_block_##T(src, lds, dst, ldd, ie, i1, j0, je);                        \
    }

#ifdef CG_HAVE_AVX_DISPATCH
/* Four rows of four doubles at s (row stride m) become four columns at d (row stride n),
   written with streaming stores when ``stream`` (d 32-byte aligned, n a multiple of 4). */
__attribute__((target("avx")))
static inline void cg_transpose_4x4_avx(const double* s, ptrdiff_t m, double* d, ptrdiff_t n,
                                        int stream)
{
    __m256d r0 = _mm256_loadu_pd(s), r1 = _mm256_loadu_pd(s + m);
    __m256d r2 = _mm256_loadu_pd(s + 2 * m), r3 = _mm256_loadu_pd(s + 3 * m);
    __m256d t0 = _mm256_unpacklo_pd(r0, r1), t1 = _mm256_unpackhi_pd(r0, r1);
    __m256d t2 = _mm256_unpacklo_pd(r2, r3), t3 = _mm256_unpackhi_pd(r2, r3);
    __m256d c[4] = {_mm256_permute2f128_pd(t0, t2, 0x20), _mm256_permute2f128_pd(t1, t3, 0x20),
                    _mm256_permute2f128_pd(t0, t2, 0x31), _mm256_permute2f128_pd(t1, t3, 0x31)};
    int k;
    for (k = 0; k < 4; k++) {
        if (stream)
            _mm256_stream_pd(d + k * n, c[k]);
        else
            _mm256_storeu_pd(d + k * n, c[k]);
    }
}

__attribute__((target("avx")))
static void cg_transpose_tile_f64_avx(const double* src, ptrdiff_t lds, double* dst,
                                      ptrdiff_t ldd, ptrdiff_t i0, ptrdiff_t i1, ptrdiff_t j0,
                                      ptrdiff_t j1)
{
    ptrdiff_t i = i0, j;
    for (; i + 4 <= i1; i += 4) {
        for (j = j0; j + 4 <= j1; j += 4)
            cg_transpose_4x4_avx(src + i * lds + j, lds, dst + j * ldd + i, ldd, 0);
        cg_transpose_block_double(src, lds, dst, ldd, i, i + 4, j, j1);
    }
    cg_transpose_block_double(src, lds, dst, ldd, i, i1, j0, j1);
}

CG_TRANSPOSE_TILE_STREAM(f64_avx, double, cg_transpose_4x4_avx, __attribute__((target("avx"))))
#endif

#ifdef CG_HAVE_SSE2
/* Four rows of four floats at s (row stride m) become four columns at d (row stride n),
   written with streaming stores when ``stream`` (d 16-byte aligned, n a multiple of 4). */
static inline void cg_transpose_4x4_sse(const float* s, ptrdiff_t m, float* d, ptrdiff_t n,
                                        int stream)
{
    __m128 r0 = _mm_loadu_ps(s), r1 = _mm_loadu_ps(s + m);
    __m128 r2 = _mm_loadu_ps(s + 2 * m), r3 = _mm_loadu_ps(s + 3 * m);
    __m128 c[4];
    int k;
    _MM_TRANSPOSE4_PS(r0, r1, r2, r3);
    c[0] = r0;
    c[1] = r1;
    c[2] = r2;
    c[3] = r3;
    for (k = 0; k < 4; k++) {
        if (stream)
            _mm_stream_ps(d + k * n, c[k]);
        else
            _mm_storeu_ps(d + k * n, c[k]);
    }
}

CG_TRANSPOSE_TILE_STREAM(f32, float, cg_transpose_4x4_sse, )
#endif

static inline void cg_transpose_tile_f32(const float* src, ptrdiff_t lds, float* dst,
                                         ptrdiff_t ldd, ptrdiff_t i0, ptrdiff_t i1, ptrdiff_t j0,
                                         ptrdiff_t j1, int stream)
{
    ptrdiff_t i = i0;
#ifdef CG_HAVE_SSE2
    ptrdiff_t j;
    if (stream) {
        cg_transpose_tile_f32_stream(src, lds, dst, ldd, i0, i1, j0, j1);
        return;
    }
    for (; i + 4 <= i1; i += 4) {
        for (j = j0; j + 4 <= j1; j += 4)
            cg_transpose_4x4_sse(src + i * lds + j, lds, dst + j * ldd + i, ldd, 0);
        cg_transpose_block_float(src, lds, dst, ldd, i, i + 4, j, j1);
    }
#endif
    cg_transpose_block_float(src, lds, dst, ldd, i, i1, j0, j1);
}

static inline void cg_transpose_tile_f64(const double* src, ptrdiff_t lds, double* dst,
                                         ptrdiff_t ldd, ptrdiff_t i0, ptrdiff_t i1, ptrdiff_t j0,
                                         ptrdiff_t j1, int stream)
{
#ifdef CG_HAVE_AVX_DISPATCH
    if (stream && cg_avx_available()) {
        cg_transpose_tile_f64_avx_stream(src, lds, dst, ldd, i0, i1, j0, j1);
        return;
    }
    if (cg_avx_available()) {
        cg_transpose_tile_f64_avx(src, lds, dst, ldd, i0, i1, j0, j1);
        return;
    }
#endif
    cg_transpose_block_double(src, lds, dst, ldd, i0, i1, j0, j1);
}

/* Whether dst (rows ldd values of size bytes apart, n_total values in all) is written
   with streaming stores: larger than the caches, and aligned for vector stores (which
   exist for doubles where AVX does, for floats on every x86-64 processor). */
static inline int cg_transpose_streams(const void* dst, ptrdiff_t ldd, ptrdiff_t n_total,
                                       size_t size)
{
#ifdef CG_HAVE_SSE2
    size_t align = size == sizeof(double) ? 32 : 16;
    if ((size_t)n_total * size < CG_STREAM_MIN_BYTES || ldd % 4 != 0
            || (size_t)dst % align != 0)
        return 0;
#ifdef CG_HAVE_AVX_DISPATCH
    return size == sizeof(float) || cg_avx_available();
#else
    return size == sizeof(float);
#endif
#else
    (void)dst; (void)ldd; (void)n_total; (void)size;
    return 0;
#endif
}

/* The rows [i0, i1) of src (n x m, rows lds values apart) into dst (m x n, rows ldd
   values apart), tile by tile. */
#define CG_TRANSPOSE_ROWS(SUFFIX, T)                                                       \
    static inline void cg_transpose_rows_##SUFFIX(const T* src, ptrdiff_t n, ptrdiff_t m,  \
                                                  ptrdiff_t lds, T* dst, ptrdiff_t ldd,    \
                                                  ptrdiff_t i0, ptrdiff_t i1)              \
    {                                                                                      \
        ptrdiff_t ib, jb, ie, je;                                                          \
        int stream = cg_transpose_streams(dst, ldd, n * m, sizeof(T));                     \
        for (ib = i0; ib < i1; ib += CG_TILE_ROWS) {                                       \
            ie = ib + CG_TILE_ROWS < i1 ? ib + CG_TILE_ROWS : i1;                          \
            for (jb = 0; jb < m; jb += CG_TILE_COLS) {                                     \
                je = jb + CG_TILE_COLS < m ? jb + CG_TILE_COLS : m;                        \
                cg_transpose_tile_##SUFFIX(src, lds, dst, ldd, ib, ie, jb, je, stream);    \
            }                                                                              \
        }                                                                                  \
        CG_STREAM_FENCE(stream);                                                           \
    }
CG_TRANSPOSE_ROWS(f64, double)
CG_TRANSPOSE_ROWS(f32, float)
#undef CG_TRANSPOSE_ROWS

#endif
