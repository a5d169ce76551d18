/* conv.c — 3x3 convolution (im2col + SGEMM), depthwise 3x3 convolution and 1x1 (pointwise)
 * convolution, forward and backward. Layout (C, B, H, W); see layers.h.
 *
 * Parallelism: OpenBLAS threads the GEMMs; our own loops are split over disjoint output planes
 * with a static OpenMP schedule, and every reduction happens inside one thread in a fixed order,
 * so results are bit-for-bit reproducible for a fixed thread count. */
#include "layers.h"
#include "common.h"

#include <cblas.h>
#include <math.h>
#include <string.h>

/* ---------------------------------------------------------------- im2col / col2im */

/* The output columns ox in [lo, hi) read input column ox*s - 1 + kx inside [0, W). */
static inline void valid_range(int kx, int W, int Wo, int s, int *lo, int *hi) {
    *lo = (kx == 0) ? 1 : 0;
    int h = (W - kx) / s + 1;
    *hi = h < Wo ? h : Wo;
}

/* one row r = (c, ky, kx) of im2col for the sample whose input plane is `plane`: dst (Ho * Wo) */
static inline void im2col_row(float *dst, const float *plane, int r, int H, int W, int Ho, int Wo, int stride) {
    const int ky = (r % 9) / 3, kx = r % 3;
    int lo, hi;
    valid_range(kx, W, Wo, stride, &lo, &hi);
    for (int oy = 0; oy < Ho; oy++, dst += Wo) {
        const int iy = oy * stride - 1 + ky;
        if (iy < 0 || iy >= H) {
            memset(dst, 0, sizeof(float) * Wo);
            continue;
        }
        const float *src = plane + (long)iy * W - 1 + kx;
        for (int ox = 0; ox < lo; ox++) dst[ox] = 0.0f;
        if (stride == 1) memcpy(dst + lo, src + lo, sizeof(float) * (hi - lo));
        else
            for (int ox = lo; ox < hi; ox++) dst[ox] = src[ox * stride];
        for (int ox = hi; ox < Wo; ox++) dst[ox] = 0.0f;
    }
}

/* the input plane (H, W) of one channel = scatter of its 9 im2col rows src (9, ld) */
static inline void col2im_plane(float *plane, const float *src, long ld, int H, int W, int Ho, int Wo, int stride) {
    memset(plane, 0, sizeof(float) * H * W);
    for (int t = 0; t < 9; t++, src += ld) {
        const int ky = t / 3, kx = t % 3;
        int lo, hi;
        valid_range(kx, W, Wo, stride, &lo, &hi);
        const float *s = src;
        for (int oy = 0; oy < Ho; oy++, s += Wo) {
            const int iy = oy * stride - 1 + ky;
            if (iy < 0 || iy >= H) continue;
            float *dst = plane + (long)iy * W - 1 + kx;
            for (int ox = lo; ox < hi; ox++) dst[ox * stride] += s[ox];
        }
    }
}

void im2col3x3(float *col, const float *inp, int B, int C, int H, int W, int stride) {
    const int Ho = conv_out_size(H, stride), Wo = conv_out_size(W, stride);
    const long N = (long)B * Ho * Wo;
#pragma omp parallel for collapse(2) schedule(static)
    for (int r = 0; r < C * 9; r++)
        for (int b = 0; b < B; b++)
            im2col_row(col + r * N + (long)b * Ho * Wo, inp + ((long)(r / 9) * B + b) * H * W, r, H, W, Ho, Wo, stride);
}

void col2im3x3(float *dinp, const float *dcol, int B, int C, int H, int W, int stride) {
    const int Ho = conv_out_size(H, stride), Wo = conv_out_size(W, stride);
    const long N = (long)B * Ho * Wo;
#pragma omp parallel for collapse(2) schedule(static)
    for (int c = 0; c < C; c++)
        for (int b = 0; b < B; b++)
            col2im_plane(dinp + ((long)c * B + b) * H * W, dcol + (long)c * 9 * N + (long)b * Ho * Wo, N, H, W, Ho, Wo,
                         stride);
}

/* ---------------------------------------------------------------- full 3x3 convolution */

void conv3x3_forward(float *out, float *col, const float *inp, const float *w, int B, int C, int H, int W, int OC,
                     int stride) {
    const int N = B * conv_out_size(H, stride) * conv_out_size(W, stride);
    im2col3x3(col, inp, B, C, H, W, stride);
    ML_SGEMM(CblasRowMajor, CblasNoTrans, CblasNoTrans, OC, N, C * 9, 1.0f, w, C * 9, col, N, 0.0f, out, N);
}

void conv3x3_backward(float *dinp, float *dw, float *dcol, const float *dout, const float *col, const float *w, int B,
                      int C, int H, int W, int OC, int stride) {
    const int N = B * conv_out_size(H, stride) * conv_out_size(W, stride);
    const int K = C * 9;
    ML_SGEMM(CblasRowMajor, CblasNoTrans, CblasTrans, OC, K, N, 1.0f, dout, N, col, N, 1.0f, dw, K);
    if (!dinp) return;
    ML_SGEMM(CblasRowMajor, CblasTrans, CblasNoTrans, K, N, OC, 1.0f, w, K, dout, N, 0.0f, dcol, N);
    col2im3x3(dinp, dcol, B, C, H, W, stride);
}

/* ---------------------------------------------------------------- depthwise 3x3 */

/* The plane kernels are force-inlined with a literal stride so that the compiler specialises
 * (and vectorises) the stride-1 and stride-2 cases. */
#define DW_MAX_W 1024

static inline __attribute__((always_inline)) void dw_plane_forward(float *o, const float *plane, const float *wc, int H,
                                                                   int W, int Ho, int Wo, const int *lo, const int *hi,
                                                                   const int s) {
    for (int oy = 0; oy < Ho; oy++) {
        float *orow = o + (long)oy * Wo;
        for (int ox = 0; ox < Wo; ox++) orow[ox] = 0.0f;
        for (int ky = 0; ky < 3; ky++) {
            const int iy = oy * s - 1 + ky;
            if (iy < 0 || iy >= H) continue;
            const float *irow = plane + (long)iy * W - 1;
            for (int kx = 0; kx < 3; kx++) {
                const float wv = wc[ky * 3 + kx];
                const float *src = irow + kx;
                for (int ox = lo[kx]; ox < hi[kx]; ox++) orow[ox] += wv * src[ox * s];
            }
        }
    }
}

/* acc (9, Wo): per-tap, per-column partial sums of dout * input (reduced by the caller) */
static inline __attribute__((always_inline)) void dw_plane_backward(float *di, float *acc, const float *plane,
                                                                    const float *d, const float *wc, int H, int W,
                                                                    int Ho, int Wo, const int *lo, const int *hi,
                                                                    const int s) {
    if (di) memset(di, 0, sizeof(float) * H * W);
    for (int oy = 0; oy < Ho; oy++) {
        const float *drow = d + (long)oy * Wo;
        for (int ky = 0; ky < 3; ky++) {
            const int iy = oy * s - 1 + ky;
            if (iy < 0 || iy >= H) continue;
            const float *irow = plane + (long)iy * W - 1;
            for (int kx = 0; kx < 3; kx++) {
                const float *src = irow + kx;
                float *a = acc + (ky * 3 + kx) * Wo;
                for (int ox = lo[kx]; ox < hi[kx]; ox++) a[ox] += drow[ox] * src[ox * s];
                if (di) {
                    const float wv = wc[ky * 3 + kx];
                    float *dst = di + (long)iy * W - 1 + kx;
                    for (int ox = lo[kx]; ox < hi[kx]; ox++) dst[ox * s] += wv * drow[ox];
                }
            }
        }
    }
}

/* Stride 2: each input row is split into its even and odd columns, padded so that output column
 * ox reads O[ox] (kx = 0, input column 2ox - 1), E[ox] (kx = 1, 2ox) and O[ox + 1] (kx = 2, 2ox + 1)
 * with unit stride: no bounds tests and no strided access in the inner loops. */
static inline void deinterleave_row(float *restrict E, float *restrict O, const float *restrict row, int W, int Wo) {
    /* 2j <= W - 1 for every j < Wo, whatever the parity of W; odd columns exist for j < W/2 */
    const int half = W / 2;
    O[0] = 0.0f;
    for (int j = 0; j < Wo; j++) E[j] = row[2 * j];
    for (int j = 0; j < half; j++) O[j + 1] = row[2 * j + 1];
    if (half < Wo) O[Wo] = 0.0f;
}

/* The backward of planes of DW2_PRE_MIN..DW2_PRE columns splits the whole plane into even and odd
 * columns before the arithmetic: the split's scalar stores have then left the store buffer when
 * the vector loads read them (reading a row right after splitting it stalled on store
 * forwarding). Same values, same operations. One thread, min of 200 calls, block1's shape (32
 * channels, 32x32, batch 128): 4.0 -> 3.2 ms. Splitting whole planes was slower on 16x16 and 8x8
 * planes (1.6 -> 1.8, 1.4 -> 1.6 ms) and in the forward (1.6 -> 2.5 ms), which keep splitting row
 * by row. */
#define DW2_PRE 32
#define DW2_PRE_MIN 28
#define DW2_PRE_E (DW2_PRE / 2 + 1)
#define DW2_PRE_O (DW2_PRE / 2 + 2)
static inline __attribute__((always_inline)) void deinterleave_plane(float (*restrict Ep)[DW2_PRE_E],
                                                                     float (*restrict Op)[DW2_PRE_O],
                                                                     const float *plane, int H, int W, int Wo) {
    for (int iy = 0; iy < H; iy++) deinterleave_row(Ep[iy], Op[iy], plane + (long)iy * W, W, Wo);
}

static inline __attribute__((always_inline)) void
dw2_plane_forward(float *o, const float *plane, const float *wc, const int H, const int W, const int Ho, const int Wo) {
    float E[DW_MAX_W + 1], O[DW_MAX_W + 2];
    for (int oy = 0; oy < Ho; oy++) {
        float *orow = o + (long)oy * Wo;
        for (int ox = 0; ox < Wo; ox++) orow[ox] = 0.0f;
        for (int ky = 0; ky < 3; ky++) {
            const int iy = 2 * oy - 1 + ky;
            if (iy < 0 || iy >= H) continue;
            deinterleave_row(E, O, plane + (long)iy * W, W, Wo);
            const float w0 = wc[ky * 3], w1 = wc[ky * 3 + 1], w2 = wc[ky * 3 + 2];
            for (int ox = 0; ox < Wo; ox++) orow[ox] += w0 * O[ox] + w1 * E[ox] + w2 * O[ox + 1];
        }
    }
}

/* The input gradient of one input row of a stride-2 plane, written whole: even column 2j is
 * sum_p w1_p d_p[j], odd column 2j+1 is sum_p (w0_p d_p[j+1] + w2_p d_p[j]) over the row's np
 * (output row, ky) pairs, accumulated in registers in the order of the earlier per-pair passes
 * (pair by pair, the w0 term before the w2 term), so the values are unchanged. */
static inline __attribute__((always_inline)) void dw2_row_dinp(float *restrict dr, const float *d, const float *wc,
                                                               const int *oys, const int *kys, int np, const int W,
                                                               const int Wo) {
    const int half = W / 2;
    if (np == 2) {
        const float *d0 = d + (long)oys[0] * Wo, *d1 = d + (long)oys[1] * Wo;
        const float *w0 = wc + kys[0] * 3, *w1 = wc + kys[1] * 3;
        const int jn = half < Wo - 1 ? half : Wo - 1; /* columns j with j + 1 < Wo */
        for (int j = 0; j < jn; j++) {
            float e = 0.0f, o = 0.0f;
            e += w0[1] * d0[j];
            o += w0[0] * d0[j + 1];
            o += w0[2] * d0[j];
            e += w1[1] * d1[j];
            o += w1[0] * d1[j + 1];
            o += w1[2] * d1[j];
            dr[2 * j] = e;
            dr[2 * j + 1] = o;
        }
        for (int j = jn; j < Wo; j++) {
            float e = 0.0f, o = 0.0f;
            e += w0[1] * d0[j];
            if (j + 1 < Wo) o += w0[0] * d0[j + 1];
            o += w0[2] * d0[j];
            e += w1[1] * d1[j];
            if (j + 1 < Wo) o += w1[0] * d1[j + 1];
            o += w1[2] * d1[j];
            dr[2 * j] = e;
            if (j < half) dr[2 * j + 1] = o;
        }
    } else if (np == 1) {
        const float *d0 = d + (long)oys[0] * Wo;
        const float *w0 = wc + kys[0] * 3;
        const int jn = half < Wo - 1 ? half : Wo - 1;
        for (int j = 0; j < jn; j++) {
            float e = 0.0f, o = 0.0f;
            e += w0[1] * d0[j];
            o += w0[0] * d0[j + 1];
            o += w0[2] * d0[j];
            dr[2 * j] = e;
            dr[2 * j + 1] = o;
        }
        for (int j = jn; j < Wo; j++) {
            float e = 0.0f, o = 0.0f;
            e += w0[1] * d0[j];
            if (j + 1 < Wo) o += w0[0] * d0[j + 1];
            o += w0[2] * d0[j];
            dr[2 * j] = e;
            if (j < half) dr[2 * j + 1] = o;
        }
    } else {
        for (int i = 0; i < W; i++) dr[i] = 0.0f;
    }
}

/* Visits every input row once: its (output row, ky) pairs accumulate the weight gradient into
 * acc (9, Wo) and the input gradient of the row, which is then written whole (no memset). */
static inline __attribute__((always_inline)) void dw2_plane_backward(float *di, float *acc, const float *plane,
                                                                     const float *d, const float *wc, const int H,
                                                                     const int W, const int Ho, const int Wo,
                                                                     const int pre) {
    float E_[DW_MAX_W + 1], O_[DW_MAX_W + 2];
    float Ep[DW2_PRE][DW2_PRE_E], Op[DW2_PRE][DW2_PRE_O];
    if (pre) deinterleave_plane(Ep, Op, plane, H, W, Wo);
    for (int iy = 0; iy < H; iy++) {
        int oys[2], kys[2], np = 0;
        if (iy % 2 == 0) {
            if (iy / 2 < Ho) {
                oys[np] = iy / 2;
                kys[np++] = 1;
            }
        } else {
            if ((iy + 1) / 2 < Ho) {
                oys[np] = (iy + 1) / 2;
                kys[np++] = 0;
            }
            if ((iy - 1) / 2 < Ho) {
                oys[np] = (iy - 1) / 2;
                kys[np++] = 2;
            }
        }
        const float *O = O_, *E = E_;
        if (pre) {
            E = Ep[iy];
            O = Op[iy];
        } else deinterleave_row(E_, O_, plane + (long)iy * W, W, Wo);
        for (int p = 0; p < np; p++) {
            const float *drow = d + (long)oys[p] * Wo;
            const int ky = kys[p];
            float *a0 = acc + (ky * 3) * Wo, *a1 = a0 + Wo, *a2 = a1 + Wo;
            for (int ox = 0; ox < Wo; ox++) {
                a0[ox] += drow[ox] * O[ox];
                a1[ox] += drow[ox] * E[ox];
                a2[ox] += drow[ox] * O[ox + 1];
            }
        }
        if (di) dw2_row_dinp(di + (long)iy * W, d, wc, oys, kys, np, W, Wo);
    }
}

/* Stride-2 plane kernels instantiated for the square sizes of 32x32 and 28x28 inputs, so that
 * the compiler sees constant row lengths: small planes (8x8, 7x7) are otherwise dominated by
 * loop overhead. Other sizes take the generic instance. */
#define DW2_SIZES(X) X(32) X(16) X(8) X(28) X(14) X(7)
static void dw2_forward_any(float *o, const float *plane, const float *wc, int H, int W, int Ho, int Wo) {
#define DW2F(n)                                                          \
    if (H == n && W == n) {                                              \
        dw2_plane_forward(o, plane, wc, n, n, (n + 1) / 2, (n + 1) / 2); \
        return;                                                          \
    }
    DW2_SIZES(DW2F)
#undef DW2F
    dw2_plane_forward(o, plane, wc, H, W, Ho, Wo);
}
static void dw2_backward_any(float *di, float *acc, const float *plane, const float *d, const float *wc, int H, int W,
                             int Ho, int Wo) {
#define DW2B(n)                                                                                      \
    if (H == n && W == n) {                                                                          \
        dw2_plane_backward(di, acc, plane, d, wc, n, n, (n + 1) / 2, (n + 1) / 2, n >= DW2_PRE_MIN); \
        return;                                                                                      \
    }
    DW2_SIZES(DW2B)
#undef DW2B
    dw2_plane_backward(di, acc, plane, d, wc, H, W, Ho, Wo, 0);
}

/* ---- stride 2 across samples (AVX): 8 samples' planes of one channel are transposed into a
 * zero-padded buffer T ((H + 2) x (W + 2) positions x 8 lanes, lane l = sample b0 + l), with the
 * deferred batch norm + ReLU applied on the way in; every output is then 9 vertical multiply-adds
 * (the channel's weights broadcast) over the taps in order, with no boundary tests and no
 * deinterleaving; results are transposed back to the planes. */
#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#define DWB_OK 1
#define DWB_MAX_POS (34 * 34) /* padded positions of T: planes up to 32x32 */
#define DWB_MAX_W 32
static inline void tr8x8(__m256 *r) {
    const __m256 t0 = _mm256_unpacklo_ps(r[0], r[1]), t1 = _mm256_unpackhi_ps(r[0], r[1]);
    const __m256 t2 = _mm256_unpacklo_ps(r[2], r[3]), t3 = _mm256_unpackhi_ps(r[2], r[3]);
    const __m256 t4 = _mm256_unpacklo_ps(r[4], r[5]), t5 = _mm256_unpackhi_ps(r[4], r[5]);
    const __m256 t6 = _mm256_unpacklo_ps(r[6], r[7]), t7 = _mm256_unpackhi_ps(r[6], r[7]);
    const __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xEE);
    const __m256 u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xEE);
    const __m256 u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xEE);
    const __m256 u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xEE);
    r[0] = _mm256_permute2f128_ps(u0, u4, 0x20);
    r[1] = _mm256_permute2f128_ps(u1, u5, 0x20);
    r[2] = _mm256_permute2f128_ps(u2, u6, 0x20);
    r[3] = _mm256_permute2f128_ps(u3, u7, 0x20);
    r[4] = _mm256_permute2f128_ps(u0, u4, 0x31);
    r[5] = _mm256_permute2f128_ps(u1, u5, 0x31);
    r[6] = _mm256_permute2f128_ps(u2, u6, 0x31);
    r[7] = _mm256_permute2f128_ps(u3, u7, 0x31);
}

/* relu(x a + bb) lane by lane, bn_forward_train's expression (x a + bb contracted to one FMA) */
static inline __m256 dwb_bn(__m256 x, __m256 a, __m256 bb) {
    const __m256 t = _mm256_fmadd_ps(x, a, bb);
    return _mm256_and_ps(t, _mm256_cmp_ps(t, _mm256_setzero_ps(), _CMP_GT_OQ));
}

/* T <- the planes x + l * H * W (l < nb; lanes >= nb are 0), with relu(x a + bb) when bn */
static void dwb_load(float *T, const float *x, int nb, int H, int W, int bn, float a, float bb) {
    const int WP = W + 2;
    const long HW = (long)H * W;
    const __m256 av = _mm256_set1_ps(a), bv = _mm256_set1_ps(bb), z = _mm256_setzero_ps();
    const __m256 live = _mm256_castsi256_ps(_mm256_cmpgt_epi32(_mm256_set1_epi32(nb), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7)));
    for (int x0 = 0; x0 < WP; x0++) _mm256_storeu_ps(T + 8L * x0, z);                        /* row -1 */
    for (int x0 = 0; x0 < WP; x0++) _mm256_storeu_ps(T + 8L * ((long)(H + 1) * WP + x0), z); /* row H */
    for (int y = 0; y < H; y++) {
        float *tr = T + 8L * (long)(y + 1) * WP;
        _mm256_storeu_ps(tr, z);
        _mm256_storeu_ps(tr + 8L * (W + 1), z);
        int x0 = 0;
        for (; x0 + 8 <= W; x0 += 8) {
            __m256 r[8];
            for (int l = 0; l < 8; l++) r[l] = l < nb ? _mm256_loadu_ps(x + l * HW + (long)y * W + x0) : z;
            tr8x8(r);
            for (int j = 0; j < 8; j++) {
                __m256 v = bn ? dwb_bn(r[j], av, bv) : r[j];
                if (bn && nb < 8) v = _mm256_and_ps(v, live); /* padding lanes stay 0 */
                _mm256_storeu_ps(tr + 8L * (x0 + 1 + j), v);
            }
        }
        for (; x0 < W; x0++) {
            float *t = tr + 8L * (x0 + 1);
            for (int l = 0; l < 8; l++) {
                float v = l < nb ? x[l * HW + (long)y * W + x0] : 0.0f;
                if (bn && l < nb) {
                    const float u = __builtin_fmaf(v, a, bb);
                    v = u > 0.0f ? u : 0.0f;
                }
                t[l] = v;
            }
        }
    }
}

/* out planes o + l * Ho * Wo (l < nb) of the stride-2 convolution of T with the weights wc */
static void dwb_forward(float *o, const float *T, const float *wc, int nb, int H, int W, int Ho, int Wo) {
    (void)H;
    const int WP = W + 2;
    const long HWo = (long)Ho * Wo;
    __m256 w[9];
    for (int t = 0; t < 9; t++) w[t] = _mm256_set1_ps(wc[t]);
    for (int oy = 0; oy < Ho; oy++) {
        const float *r0 = T + 8L * (long)(2 * oy) * WP, *r1 = r0 + 8L * WP, *r2 = r1 + 8L * WP;
        int ox0 = 0;
        for (; ox0 < Wo; ox0 += 8) {
            const int n = Wo - ox0 < 8 ? Wo - ox0 : 8;
            __m256 acc[8];
            for (int j = 0; j < n; j++) {
                const long c0 = 8L * (2 * (ox0 + j));
                __m256 a = _mm256_mul_ps(w[0], _mm256_loadu_ps(r0 + c0));
                a = _mm256_fmadd_ps(w[1], _mm256_loadu_ps(r0 + c0 + 8), a);
                a = _mm256_fmadd_ps(w[2], _mm256_loadu_ps(r0 + c0 + 16), a);
                a = _mm256_fmadd_ps(w[3], _mm256_loadu_ps(r1 + c0), a);
                a = _mm256_fmadd_ps(w[4], _mm256_loadu_ps(r1 + c0 + 8), a);
                a = _mm256_fmadd_ps(w[5], _mm256_loadu_ps(r1 + c0 + 16), a);
                a = _mm256_fmadd_ps(w[6], _mm256_loadu_ps(r2 + c0), a);
                a = _mm256_fmadd_ps(w[7], _mm256_loadu_ps(r2 + c0 + 8), a);
                acc[j] = _mm256_fmadd_ps(w[8], _mm256_loadu_ps(r2 + c0 + 16), a);
            }
            if (n == 8) {
                tr8x8(acc);
                for (int l = 0; l < nb; l++) _mm256_storeu_ps(o + l * HWo + (long)oy * Wo + ox0, acc[l]);
            } else {
                float tmp[8][8];
                for (int j = 0; j < n; j++) _mm256_storeu_ps(tmp[j], acc[j]);
                for (int l = 0; l < nb; l++)
                    for (int j = 0; j < n; j++) o[l * HWo + (long)oy * Wo + ox0 + j] = tmp[j][l];
            }
        }
    }
}

/* The backward of 8 samples of one channel: T (dwb_load) is the input, D the output gradient
 * transposed (Ho + 1 rows x Wo + 1 columns x 8 lanes, the last row and column 0). dw_acc[t] +=
 * lane by lane, over the outputs in order, d * input at tap t. The input gradient is gathered per
 * input position (1, 2 or 4 terms, by parity) and transposed back into the planes di + l * H * W. */
static void dwb_backward(float *di, __m256 *dw_acc, const float *T, float *D, const float *dout, const float *wc,
                         int nb, int H, int W, int Ho, int Wo) {
    const int WP = W + 2, WD = Wo + 1;
    const long HWo = (long)Ho * Wo, HW = (long)H * W;
    const __m256 z = _mm256_setzero_ps();
    for (int oy = 0; oy <= Ho; oy++) { /* D: the output gradient transposed, a zero last row and column */
        float *dr = D + 8L * (long)oy * WD;
        _mm256_storeu_ps(dr + 8L * Wo, z);
        if (oy == Ho) {
            for (int ox = 0; ox < Wo; ox++) _mm256_storeu_ps(dr + 8L * ox, z);
            continue;
        }
        int ox0 = 0;
        for (; ox0 + 8 <= Wo; ox0 += 8) {
            __m256 r[8];
            for (int l = 0; l < 8; l++) r[l] = l < nb ? _mm256_loadu_ps(dout + l * HWo + (long)oy * Wo + ox0) : z;
            tr8x8(r);
            for (int j = 0; j < 8; j++) _mm256_storeu_ps(dr + 8L * (ox0 + j), r[j]);
        }
        for (; ox0 < Wo; ox0++)
            for (int l = 0; l < 8; l++) dr[8L * ox0 + l] = l < nb ? dout[l * HWo + (long)oy * Wo + ox0] : 0.0f;
    }
    __m256 a[9];
    for (int t = 0; t < 9; t++) a[t] = dw_acc[t];
    for (int oy = 0; oy < Ho; oy++) {
        const float *r0 = T + 8L * (long)(2 * oy) * WP, *r1 = r0 + 8L * WP, *r2 = r1 + 8L * WP;
        const float *dr = D + 8L * (long)oy * WD;
        for (int ox = 0; ox < Wo; ox++) {
            const __m256 d = _mm256_loadu_ps(dr + 8L * ox);
            const long c0 = 8L * (2 * ox);
            a[0] = _mm256_fmadd_ps(d, _mm256_loadu_ps(r0 + c0), a[0]);
            a[1] = _mm256_fmadd_ps(d, _mm256_loadu_ps(r0 + c0 + 8), a[1]);
            a[2] = _mm256_fmadd_ps(d, _mm256_loadu_ps(r0 + c0 + 16), a[2]);
            a[3] = _mm256_fmadd_ps(d, _mm256_loadu_ps(r1 + c0), a[3]);
            a[4] = _mm256_fmadd_ps(d, _mm256_loadu_ps(r1 + c0 + 8), a[4]);
            a[5] = _mm256_fmadd_ps(d, _mm256_loadu_ps(r1 + c0 + 16), a[5]);
            a[6] = _mm256_fmadd_ps(d, _mm256_loadu_ps(r2 + c0), a[6]);
            a[7] = _mm256_fmadd_ps(d, _mm256_loadu_ps(r2 + c0 + 8), a[7]);
            a[8] = _mm256_fmadd_ps(d, _mm256_loadu_ps(r2 + c0 + 16), a[8]);
        }
    }
    for (int t = 0; t < 9; t++) dw_acc[t] = a[t];
    if (!di) return;
    __m256 w[9];
    for (int t = 0; t < 9; t++) w[t] = _mm256_set1_ps(wc[t]);
    float row[8 * (DWB_MAX_W + 8)];
    for (int iy = 0; iy < H; iy++) {
        const int m = iy / 2, odd = iy & 1;
        const float *dm = D + 8L * (long)m * WD, *dn = D + 8L * (long)(m + 1) * WD; /* rows m, m + 1 */
        for (int ix = 0; ix < W; ix++) {
            const int n = ix / 2;
            const __m256 d00 = _mm256_loadu_ps(dm + 8L * n);
            __m256 v;
            if (!odd) {
                if (!(ix & 1)) v = _mm256_mul_ps(w[4], d00);
                else v = _mm256_fmadd_ps(w[5], d00, _mm256_mul_ps(w[3], _mm256_loadu_ps(dm + 8L * (n + 1))));
            } else {
                const __m256 d10 = _mm256_loadu_ps(dn + 8L * n);
                if (!(ix & 1)) v = _mm256_fmadd_ps(w[7], d00, _mm256_mul_ps(w[1], d10));
                else {
                    v = _mm256_mul_ps(w[0], _mm256_loadu_ps(dn + 8L * (n + 1)));
                    v = _mm256_fmadd_ps(w[2], d10, v);
                    v = _mm256_fmadd_ps(w[6], _mm256_loadu_ps(dm + 8L * (n + 1)), v);
                    v = _mm256_fmadd_ps(w[8], d00, v);
                }
            }
            _mm256_storeu_ps(row + 8L * ix, v);
        }
        int x0 = 0; /* the row back into the planes */
        for (; x0 + 8 <= W; x0 += 8) {
            __m256 r[8];
            for (int j = 0; j < 8; j++) r[j] = _mm256_loadu_ps(row + 8L * (x0 + j));
            tr8x8(r);
            for (int l = 0; l < nb; l++) _mm256_storeu_ps(di + l * HW + (long)iy * W + x0, r[l]);
        }
        for (; x0 < W; x0++)
            for (int l = 0; l < nb; l++) di[l * HW + (long)iy * W + x0] = row[8L * x0 + l];
    }
}
#else
#define DWB_OK 0
#endif

/* A channel's weight gradient (its 9 taps' totals) and, if wanted, the producer's batch-norm sums. */
static inline void dw_channel_done(float *dw, double *sums, int c, const double *tot, double s1, double s2) {
    for (int t = 0; t < 9; t++) dw[c * 9 + t] += (float)tot[t];
    if (sums) {
        sums[2 * c] = s1;
        sums[2 * c + 1] = s2;
    }
}

/* The depthwise input plane: inp itself, or relu(x a_c + b_c) of the producing unit's pre-BN
 * plane x (its batch norm + ReLU deferred to here), written to tmp with the float expression of
 * bn_forward_train's output loop, so that the values are those of the materialised output. */
static inline const float *dw_in_plane(float *tmp, const float *x, int n, const float *a, const float *bb, int c) {
    if (!a) return x;
    const float av = a[c], bv = bb[c];
    for (int i = 0; i < n; i++) {
        float t = x[i] * av + bv;
        tmp[i] = t > 0.0f ? t : 0.0f;
    }
    return tmp;
}

static void dw_forward(float *out, const float *inp, const float *ia, const float *ib, const float *w, int B, int C,
                       int H, int W, int stride) {
    const int Ho = conv_out_size(H, stride), Wo = conv_out_size(W, stride);
    ML_ASSERT(Wo <= DW_MAX_W);
    ML_ASSERT(!ia || H * W <= DW_BN_MAX_PLANE);
    int lo[3], hi[3];
    for (int kx = 0; kx < 3; kx++) valid_range(kx, W, Wo, stride, &lo[kx], &hi[kx]);
#if DWB_OK
    if (stride == 2 && (long)(H + 2) * (W + 2) <= DWB_MAX_POS) { /* 8 samples at a time */
        const int ng = (B + 7) / 8;
#pragma omp parallel for collapse(2) schedule(static)
        for (int c = 0; c < C; c++)
            for (int g = 0; g < ng; g++) {
                float T[8 * DWB_MAX_POS];
                const int b0 = 8 * g, nb = B - b0 < 8 ? B - b0 : 8;
                dwb_load(T, inp + ((long)c * B + b0) * H * W, nb, H, W, ia != NULL, ia ? ia[c] : 0.0f,
                         ia ? ib[c] : 0.0f);
                dwb_forward(out + ((long)c * B + b0) * Ho * Wo, T, w + c * 9, nb, H, W, Ho, Wo);
            }
        return;
    }
#endif
#pragma omp parallel for collapse(2) schedule(static)
    for (int c = 0; c < C; c++) {
        for (int b = 0; b < B; b++) {
            float tmp[ia ? DW_BN_MAX_PLANE : 1];
            const float *plane = dw_in_plane(tmp, inp + ((long)c * B + b) * H * W, H * W, ia, ib, c);
            float *o = out + ((long)c * B + b) * Ho * Wo;
            if (stride == 1) dw_plane_forward(o, plane, w + c * 9, H, W, Ho, Wo, lo, hi, 1);
            else if (stride == 2) dw2_forward_any(o, plane, w + c * 9, H, W, Ho, Wo);
            else dw_plane_forward(o, plane, w + c * 9, H, W, Ho, Wo, lo, hi, stride);
        }
    }
}

static void dw_backward(float *dinp, float *dw, double *sums, const float *dout, const float *inp, const float *ia,
                        const float *ib, const float *im, const float *ir, const float *w, int B, int C, int H, int W,
                        int stride) {
    const int Ho = conv_out_size(H, stride), Wo = conv_out_size(W, stride);
    ML_ASSERT(Wo <= DW_MAX_W);
    ML_ASSERT(!ia || H * W <= DW_BN_MAX_PLANE);
    int lo[3], hi[3];
    for (int kx = 0; kx < 3; kx++) valid_range(kx, W, Wo, stride, &lo[kx], &hi[kx]);
#if DWB_OK
    if (stride == 2 && (long)(H + 2) * (W + 2) <= DWB_MAX_POS && W <= DWB_MAX_W) { /* 8 samples at a time */
        const int ng = (B + 7) / 8;
#pragma omp parallel for schedule(static)
        for (int c = 0; c < C; c++) {
            float T[8 * DWB_MAX_POS], D[8 * (DWB_MAX_W / 2 + 2) * (DWB_MAX_W / 2 + 2)];
            double tot[9] = {0}, s1 = 0.0, s2 = 0.0;
            for (int g = 0; g < ng; g++) {
                const int b0 = 8 * g, nb = B - b0 < 8 ? B - b0 : 8;
                const float *x = inp + ((long)c * B + b0) * H * W;
                float *di = dinp ? dinp + ((long)c * B + b0) * H * W : NULL;
                __m256 acc[9];
                for (int t = 0; t < 9; t++) acc[t] = _mm256_setzero_ps();
                dwb_load(T, x, nb, H, W, ia != NULL, ia ? ia[c] : 0.0f, ia ? ib[c] : 0.0f);
                dwb_backward(di, acc, T, D, dout + ((long)c * B + b0) * Ho * Wo, w + c * 9, nb, H, W, Ho, Wo);
                for (int t = 0; t < 9; t++) { /* each tap's lanes (samples) in order */
                    float l8[8], sum = 0.0f;
                    _mm256_storeu_ps(l8, acc[t]);
                    for (int l = 0; l < nb; l++) sum += l8[l];
                    tot[t] += sum;
                }
                for (int l = 0; sums && l < nb; l++) { /* the producer's sums, plane by plane in order */
                    double p1, p2;
                    bn_relu_sums_plane(di + (long)l * H * W, x + (long)l * H * W, H * W, im[c], ir[c], ia[c], ib[c],
                                       &p1, &p2);
                    s1 += p1;
                    s2 += p2;
                }
            }
            dw_channel_done(dw, sums, c, tot, s1, s2);
        }
        return;
    }
#endif
#pragma omp parallel for schedule(static)
    for (int c = 0; c < C; c++) {
        float acc[9 * DW_MAX_W];
        float tmp[ia ? DW_BN_MAX_PLANE : 1];
        double tot[9] = {0}, s1 = 0.0, s2 = 0.0;
        const float *wc = w + c * 9;
        for (int b = 0; b < B; b++) {
            const float *plane = dw_in_plane(tmp, inp + ((long)c * B + b) * H * W, H * W, ia, ib, c);
            const float *d = dout + ((long)c * B + b) * Ho * Wo;
            float *di = dinp ? dinp + ((long)c * B + b) * H * W : NULL;
            memset(acc, 0, sizeof(float) * 9 * Wo);
            if (stride == 1) dw_plane_backward(di, acc, plane, d, wc, H, W, Ho, Wo, lo, hi, 1);
            else if (stride == 2) dw2_backward_any(di, acc, plane, d, wc, H, W, Ho, Wo);
            else dw_plane_backward(di, acc, plane, d, wc, H, W, Ho, Wo, lo, hi, stride);
            for (int t = 0; t < 9; t++) {
                float sum = 0.0f;
                for (int ox = 0; ox < Wo; ox++) sum += acc[t * Wo + ox];
                tot[t] += sum;
            }
            if (sums) { /* the producer's batch-norm sums while the plane is in cache */
                double p1, p2;
                bn_relu_sums_plane(di, inp + ((long)c * B + b) * H * W, H * W, im[c], ir[c], ia[c], ib[c], &p1, &p2);
                s1 += p1;
                s2 += p2;
            }
        }
        dw_channel_done(dw, sums, c, tot, s1, s2);
    }
}

void dwconv3x3_forward(float *out, const float *inp, const float *w, int B, int C, int H, int W, int stride) {
    dw_forward(out, inp, NULL, NULL, w, B, C, H, W, stride);
}

void dwconv3x3_backward(float *dinp, float *dw, const float *dout, const float *inp, const float *w, int B, int C,
                        int H, int W, int stride) {
    dw_backward(dinp, dw, NULL, dout, inp, NULL, NULL, NULL, NULL, w, B, C, H, W, stride);
}

void dwconv3x3_forward_bnin(float *out, const float *x, const float *a, const float *bb, const float *w, int B, int C,
                            int H, int W, int stride) {
    dw_forward(out, x, a, bb, w, B, C, H, W, stride);
}

void dwconv3x3_backward_bnin(float *dinp, float *dw, const float *dout, const float *x, const float *a, const float *bb,
                             const float *w, int B, int C, int H, int W, int stride) {
    dw_backward(dinp, dw, NULL, dout, x, a, bb, NULL, NULL, w, B, C, H, W, stride);
}

void dwconv3x3_backward_bnin_sums(float *dinp, float *dw, double *sums, const float *dout, const float *x,
                                  const float *a, const float *bb, const float *mean, const float *rstd,
                                  const float *w, int B, int C, int H, int W, int stride) {
    ML_ASSERT(dinp && sums);
    dw_backward(dinp, dw, sums, dout, x, a, bb, mean, rstd, w, B, C, H, W, stride);
}

/* ---------------------------------------------------------------- pointwise 1x1 */

void pwconv_forward(float *out, const float *inp, const float *w, int N, int C, int OC) {
    ML_SGEMM(CblasRowMajor, CblasNoTrans, CblasNoTrans, OC, N, C, 1.0f, w, C, inp, N, 0.0f, out, N);
}

void pwconv_backward(float *dinp, float *dw, const float *dout, const float *inp, const float *w, int N, int C,
                     int OC) {
    ML_SGEMM(CblasRowMajor, CblasNoTrans, CblasTrans, OC, C, N, 1.0f, dout, N, inp, N, 1.0f, dw, C);
    if (dinp) ML_SGEMM(CblasRowMajor, CblasTrans, CblasNoTrans, C, N, OC, 1.0f, w, C, dout, N, 0.0f, dinp, N);
}

/* ---------------------------------------------------------------- direct 3x3 convolution (the stem)
 *
 * For few input channels (the stem: K = 9 C = 27) the SGEMM on im2col's columns runs at half the
 * SGEMM rate: it is bound by its passes over the output (OpenBLAS scales C by beta, then
 * accumulates into it). The direct kernel works one output row at a time on zero-padded input
 * rows held in L1 and keeps 4 output channels x 16 columns in registers over the 27 taps, so each
 * output is written once. Stride 1, W <= SD_MAX_W (a partial last vector of columns is computed
 * on the rows' zero padding and stored in part), C <= 4. Each output is the
 * sum over the taps in order; it does not depend on the number of threads. One thread, batch 128,
 * 32x32x3 -> 32: 4.3-4.9 ms against 6.5-6.6 ms for im2col + SGEMM (minimum of 10 calls). The
 * weight gradient (conv3x3_bn_backward_wgrad, below) is direct too: one SGEMM with M = 32, N = 27
 * and K = 131072 ran at 25-35 GFLOP/s on one thread, bound by packing its operands. */

typedef float cv8f __attribute__((vector_size(32)));
#define CV8_LOAD(p)                    \
    ({                                 \
        cv8f v8_;                      \
        memcpy(&v8_, (p), sizeof v8_); \
        v8_;                           \
    })
#define CV8_STORE(p, v)                  \
    do {                                 \
        const cv8f v8s_ = (v);           \
        memcpy((p), &v8s_, sizeof v8s_); \
    } while (0)
#define CV8_SPLAT(x) ((cv8f){(x), (x), (x), (x), (x), (x), (x), (x)})
#define SD_MAX_W 256 /* widest row of the direct kernels */
#define SD_ROW (SD_MAX_W + 16)

int conv3x3_direct_ok(int C, int H, int W, int stride) {
    return stride == 1 && C >= 1 && C <= 4 && W >= 1 && W <= SD_MAX_W && H >= 1;
}

/* the padded input rows (c, ky) of output row oy: xp[c * 3 + ky][1 + ix] = x[c][iy][ix], zero
 * outside the image (up to the end of a partial last vector of columns) */
static inline void sd_rows(float (*xp)[SD_ROW], const float *inp, int b, int B, int C, int H, int W, int oy) {
    for (int c = 0; c < C; c++)
        for (int ky = 0; ky < 3; ky++) {
            float *r = xp[c * 3 + ky];
            const int iy = oy + ky - 1;
            r[0] = 0.0f;
            memset(r + W + 1, 0, sizeof(float) * 8);
            if (iy < 0 || iy >= H) memset(r + 1, 0, sizeof(float) * W);
            else memcpy(r + 1, inp + (((long)c * B + b) * H + iy) * W, sizeof(float) * W);
        }
}

/* the first n (< 8) lanes of *v to d (by pointer: a 32-byte vector argument warns, -Wpsabi, where
 * AVX is off) */
static inline void cv8_store_part(float *d, const cv8f *v, int n) { memcpy(d, v, sizeof(float) * n); }

/* z (OC, B, H, W) of sample b; each output is the sum over the taps k = (c, ky, kx) in order */
static void sd_forward_sample(float *z, const float *inp, const float *w, int b, int B, int C, int H, int W, int OC) {
    const int K = 9 * C, NV = W / 8, tail = W % 8;
    const long N = (long)B * H * W;
    float xp[12][SD_ROW];
    const float *xb = &xp[0][0];
    int koff[36]; /* tap k = (c, ky, kx) reads row c * 3 + ky of xp from column kx */
    for (int k = 0; k < K; k++) koff[k] = (k / 3) * SD_ROW + k % 3;
    for (int oy = 0; oy < H; oy++) {
        sd_rows(xp, inp, b, B, C, H, W, oy);
        float *zr = z + ((long)b * H + oy) * W;
        int o = 0;
        for (; o + 4 <= OC; o += 4) {
            const float *w0 = w + (long)o * K, *w1 = w0 + K, *w2 = w1 + K, *w3 = w2 + K;
            int v = 0;
            for (; v + 2 <= NV; v += 2) {
                cv8f a00 = {0}, a01 = {0}, a10 = {0}, a11 = {0}, a20 = {0}, a21 = {0}, a30 = {0}, a31 = {0};
                for (int k = 0; k < K; k++) {
                    const float *src = xb + koff[k] + 8 * v;
                    const cv8f x0 = CV8_LOAD(src), x1 = CV8_LOAD(src + 8);
                    const cv8f q0 = CV8_SPLAT(w0[k]), q1 = CV8_SPLAT(w1[k]), q2 = CV8_SPLAT(w2[k]),
                               q3 = CV8_SPLAT(w3[k]);
                    a00 += q0 * x0;
                    a01 += q0 * x1;
                    a10 += q1 * x0;
                    a11 += q1 * x1;
                    a20 += q2 * x0;
                    a21 += q2 * x1;
                    a30 += q3 * x0;
                    a31 += q3 * x1;
                }
                float *d = zr + (long)o * N + 8 * v;
                CV8_STORE(d, a00);
                CV8_STORE(d + 8, a01);
                CV8_STORE(d + N, a10);
                CV8_STORE(d + N + 8, a11);
                CV8_STORE(d + 2 * N, a20);
                CV8_STORE(d + 2 * N + 8, a21);
                CV8_STORE(d + 3 * N, a30);
                CV8_STORE(d + 3 * N + 8, a31);
            }
            for (; v < NV; v++) {
                cv8f a0 = {0}, a1 = {0}, a2 = {0}, a3 = {0};
                for (int k = 0; k < K; k++) {
                    const cv8f x0 = CV8_LOAD(xb + koff[k] + 8 * v);
                    a0 += CV8_SPLAT(w0[k]) * x0;
                    a1 += CV8_SPLAT(w1[k]) * x0;
                    a2 += CV8_SPLAT(w2[k]) * x0;
                    a3 += CV8_SPLAT(w3[k]) * x0;
                }
                float *d = zr + (long)o * N + 8 * v;
                CV8_STORE(d, a0);
                CV8_STORE(d + N, a1);
                CV8_STORE(d + 2 * N, a2);
                CV8_STORE(d + 3 * N, a3);
            }
            if (tail) { /* a partial last vector: the padded rows are zero beyond the image */
                cv8f a0 = {0}, a1 = {0}, a2 = {0}, a3 = {0};
                for (int k = 0; k < K; k++) {
                    const cv8f x0 = CV8_LOAD(xb + koff[k] + 8 * NV);
                    a0 += CV8_SPLAT(w0[k]) * x0;
                    a1 += CV8_SPLAT(w1[k]) * x0;
                    a2 += CV8_SPLAT(w2[k]) * x0;
                    a3 += CV8_SPLAT(w3[k]) * x0;
                }
                float *d = zr + (long)o * N + 8 * NV;
                cv8_store_part(d, &a0, tail);
                cv8_store_part(d + N, &a1, tail);
                cv8_store_part(d + 2 * N, &a2, tail);
                cv8_store_part(d + 3 * N, &a3, tail);
            }
        }
        for (; o < OC; o++) {
            const float *wo = w + (long)o * K;
            for (int v = 0; v < NV + (tail > 0); v++) {
                cv8f a0 = {0};
                for (int k = 0; k < K; k++) a0 += CV8_SPLAT(wo[k]) * CV8_LOAD(xb + koff[k] + 8 * v);
                if (v < NV) CV8_STORE(zr + (long)o * N + 8 * v, a0);
                else cv8_store_part(zr + (long)o * N + 8 * v, &a0, tail);
            }
        }
    }
}

void conv3x3_direct_forward(float *z, const float *inp, const float *w, int B, int C, int H, int W, int OC) {
    ML_ASSERT(conv3x3_direct_ok(C, H, W, 1));
#pragma omp parallel for schedule(static)
    for (int b = 0; b < B; b++) sd_forward_sample(z, inp, w, b, B, C, H, W, OC);
}

/* ---------------------------------------------------------------- 3x3 convolution + BN statistics in chunks */

/* Bytes of a chunk's working set (its im2col rows and its pre-BN values) that should stay in the
 * L2 cache while the chunk is multiplied and reduced. */
#define CONV_BN_CHUNK_BYTES (256 * 1024)
#define CONV_BN_MAX_CHUNK 64

int conv3x3_bn_chunk(int C, int OC, int Ho, int Wo) {
    const long per = 4L * (9L * C + OC) * Ho * Wo; /* bytes per sample */
    const long n = CONV_BN_CHUNK_BYTES / (per > 0 ? per : 1);
    return n < 1 ? 1 : n > CONV_BN_MAX_CHUNK ? CONV_BN_MAX_CHUNK : (int)n;
}

long conv3x3_bn_work_doubles(int B, int OC, int chunk) { return 2L * ((B + chunk - 1) / chunk) * OC; }

void conv3x3_bn_stats_train(float *z, float *col, float *a, float *bb, float *mean, float *rstd, double *work,
                            const float *inp, const float *w, const float *gamma, const float *beta, float *run_mean,
                            float *run_var, float momentum, int B, int C, int H, int W, int OC, int stride, int chunk) {
    const int Ho = conv_out_size(H, stride), Wo = conv_out_size(W, stride), HoWo = Ho * Wo, K = 9 * C;
    const int nch = (B + chunk - 1) / chunk;
    const long N = (long)B * HoWo;
    const int direct = conv3x3_direct_ok(C, H, W, stride);
    ML_ASSERT(col || direct);
#pragma omp parallel
    {
#pragma omp for schedule(static)
        for (int j = 0; j < nch; j++) {
            const int b0 = j * chunk, nb = b0 + chunk <= B ? chunk : B - b0;
            const long c0 = (long)b0 * HoWo;
            const int nc = nb * HoWo;
            for (int r = 0; col && r < K; r++) /* im2col, for conv3x3_backward (and the GEMM) */
                for (int b = b0; b < b0 + nb; b++)
                    im2col_row(col + r * N + (long)b * HoWo, inp + ((long)(r / 9) * B + b) * H * W, r, H, W, Ho, Wo,
                               stride);
            if (direct) {
                for (int b = b0; b < b0 + nb; b++) sd_forward_sample(z, inp, w, b, B, C, H, W, OC);
            } else { /* one thread per chunk: OpenBLAS does not thread inside a parallel region */
                ML_SGEMM(CblasRowMajor, CblasNoTrans, CblasNoTrans, OC, nc, K, 1.0f, w, K, col + c0, (int)N, 0.0f,
                         z + c0, (int)N);
            }
            for (int c = 0; c < OC; c++) /* the chunk's moments while it is in cache */
                bn_chunk_moments(z + c * N + c0, nc, &work[2 * ((long)j * OC + c)], &work[2 * ((long)j * OC + c) + 1]);
        }
#pragma omp for schedule(static)
        for (int c = 0; c < OC; c++) {
            /* the chunks' moments combined in chunk order (Chan, Golub and LeVeque's pairwise update) */
            double n = 0.0, m = 0.0, v = 0.0;
            for (int j = 0; j < nch; j++) {
                const int b0 = j * chunk, nb = b0 + chunk <= B ? chunk : B - b0;
                const double nj = (double)nb * HoWo, mj = work[2 * ((long)j * OC + c)],
                             vj = work[2 * ((long)j * OC + c) + 1];
                const double tot = n + nj, d = mj - m;
                m += d * (nj / tot);
                v += vj + d * d * (n * nj / tot);
                n = tot;
            }
            bn_channel_finish((double)N, m, v, c, mean, rstd, gamma, beta, run_mean, run_var, momentum, &a[c], &bb[c]);
        }
    }
}

/* ---------------------------------------------------------------- 3x3 convolution + BN backward, weight gradient only */

/* Bytes of a chunk's working set in the weight-gradient pass (its dz and z columns, and its
 * im2col rows where the direct kernel does not apply). */
#define CONV_WG_CHUNK_BYTES (512 * 1024)

int conv3x3_wgrad_chunk(int C, int OC, int H, int W, int stride) {
    const int Ho = conv_out_size(H, stride), Wo = conv_out_size(W, stride);
    const long per = 4L * ((conv3x3_direct_ok(C, H, W, stride) ? 0 : 9L * C) + 2L * OC) * Ho * Wo;
    const long n = CONV_WG_CHUNK_BYTES / (per > 0 ? per : 1);
    return n < 1 ? 1 : n > CONV_BN_MAX_CHUNK ? CONV_BN_MAX_CHUNK : (int)n;
}

/* each chunk owns OC * 9C vectors of 8 floats (the direct kernel's lane accumulators); its sums
 * are left in the first OC * 9C floats */
#define WG_PART(C, OC) ((long)(OC) * 9 * (C) * 8)
long conv3x3_wgrad_part_floats(int B, int C, int OC, int chunk) { return (long)((B + chunk - 1) / chunk) * WG_PART(C, OC); }

/* accv (OC, 9C, 8) += the lane-wise products dz * input of sample b for every output channel and
 * tap (c, ky, kx), accumulated over blocks of output rows, the rows and column vectors in order
 * (stride 1, pad 1, conv3x3_direct_ok). Four output channels x the three kx taps of one (c, ky)
 * are twelve vector accumulators, kept in registers over a block of rows (up to 32 vectors of
 * dz per channel), read from the block's zero-padded input rows. */
#define WG_VECS 32 /* dz vectors per channel and row block */
#if defined(__GNUC__) && defined(__AVX__)
#define CV8_IN_REG(v) __asm__("" : "+x"(v))
#else
#define CV8_IN_REG(v) (void)0
#endif
static void sd_wgrad_sample(float *accv, const float *dz, const float *inp, int b, int B, int C, int H, int W, int OC) {
    const int K = 9 * C, NV = W / 8, tail = W % 8, NVT = NV + (tail > 0);
    const int R = WG_VECS / NVT > 8 ? 8 : WG_VECS / NVT; /* rows per block (NVT <= 32: R >= 1) */
    const long N = (long)B * H * W;
    float xp[4 * 10][SD_ROW]; /* (c, t): input row oy0 - 1 + t, padded as sd_rows pads */
    cv8f d[4][WG_VECS];
    for (int oy0 = 0; oy0 < H; oy0 += R) {
        const int nr = oy0 + R <= H ? R : H - oy0;
        for (int c = 0; c < C; c++)
            for (int t = 0; t < nr + 2; t++) {
                float *r = xp[c * (R + 2) + t];
                const int iy = oy0 - 1 + t;
                r[0] = 0.0f;
                memset(r + W + 1, 0, sizeof(float) * 8);
                if (iy < 0 || iy >= H) memset(r + 1, 0, sizeof(float) * W);
                else memcpy(r + 1, inp + (((long)c * B + b) * H + iy) * W, sizeof(float) * W);
            }
        for (int o = 0; o < OC; o += 4) {
            const int no = OC - o < 4 ? OC - o : 4;
            for (int q = 0; q < no; q++)
                for (int i = 0; i < nr; i++) {
                    const float *src = dz + (long)(o + q) * N + ((long)b * H + oy0 + i) * W;
                    for (int v = 0; v < NV; v++) d[q][i * NVT + v] = CV8_LOAD(src + 8 * v);
                    if (tail) { /* a partial last vector: zero beyond the row */
                        d[q][i * NVT + NV] = CV8_SPLAT(0.0f);
                        memcpy(&d[q][i * NVT + NV], src + 8 * NV, sizeof(float) * tail);
                    }
                }
            for (int c = 0; c < C; c++)
                for (int ky = 0; ky < 3; ky++) {
                    float *ar = accv + ((long)o * K + (c * 3 + ky) * 3) * 8;
                    if (no == 4) {
                        cv8f a[4][3];
                        for (int q = 0; q < 4; q++)
                            for (int kx = 0; kx < 3; kx++) a[q][kx] = CV8_LOAD(ar + ((long)q * K + kx) * 8);
                        for (int i = 0; i < nr; i++) {
                            const float *xr = xp[c * (R + 2) + i + ky];
                            const cv8f *dv0 = d[0] + i * NVT, *dv1 = d[1] + i * NVT, *dv2 = d[2] + i * NVT,
                                       *dv3 = d[3] + i * NVT;
                            for (int v = 0; v < NVT; v++) {
                                cv8f x0 = CV8_LOAD(xr + 8 * v), x1 = CV8_LOAD(xr + 1 + 8 * v),
                                     x2 = CV8_LOAD(xr + 2 + 8 * v);
                                CV8_IN_REG(x0); /* three loads, not one per product */
                                CV8_IN_REG(x1);
                                CV8_IN_REG(x2);
                                a[0][0] += dv0[v] * x0;
                                a[0][1] += dv0[v] * x1;
                                a[0][2] += dv0[v] * x2;
                                a[1][0] += dv1[v] * x0;
                                a[1][1] += dv1[v] * x1;
                                a[1][2] += dv1[v] * x2;
                                a[2][0] += dv2[v] * x0;
                                a[2][1] += dv2[v] * x1;
                                a[2][2] += dv2[v] * x2;
                                a[3][0] += dv3[v] * x0;
                                a[3][1] += dv3[v] * x1;
                                a[3][2] += dv3[v] * x2;
                            }
                        }
                        for (int q = 0; q < 4; q++)
                            for (int kx = 0; kx < 3; kx++) CV8_STORE(ar + ((long)q * K + kx) * 8, a[q][kx]);
                    } else {
                        for (int q = 0; q < no; q++)
                            for (int kx = 0; kx < 3; kx++) {
                                cv8f a = CV8_LOAD(ar + ((long)q * K + kx) * 8);
                                for (int i = 0; i < nr; i++) {
                                    const float *xr = xp[c * (R + 2) + i + ky] + kx;
                                    for (int v = 0; v < NVT; v++) a += d[q][i * NVT + v] * CV8_LOAD(xr + 8 * v);
                                }
                                CV8_STORE(ar + ((long)q * K + kx) * 8, a);
                            }
                    }
                }
        }
    }
}

typedef struct {
    float *dz, *col, *part;
    const float *z, *inp, *mdy, *mdyx, *mean, *rstd, *gamma, *beta;
    int B, C, H, W, OC, stride, chunk;
} WgradCtx;

static void wgrad_chunk(void *vctx, int j) {
    const WgradCtx *x = vctx;
    const int Ho = conv_out_size(x->H, x->stride), Wo = conv_out_size(x->W, x->stride), HoWo = Ho * Wo;
    const int B = x->B, K = 9 * x->C, OC = x->OC, b0 = j * x->chunk, nb = b0 + x->chunk <= B ? x->chunk : B - b0;
    const long N = (long)B * HoWo, c0 = (long)b0 * HoWo;
    const int nc = nb * HoWo;
    float *part = x->part + (long)j * WG_PART(x->C, OC);
    bn_relu_backward_cols(x->dz, x->dz, x->z, x->mdy, x->mdyx, x->mean, x->rstd, x->gamma, x->beta, OC, N, c0, nc);
    if (conv3x3_direct_ok(x->C, x->H, x->W, x->stride)) {
        memset(part, 0, sizeof(float) * 8L * OC * K);
        for (int b = b0; b < b0 + nb; b++) sd_wgrad_sample(part, x->dz, x->inp, b, B, x->C, x->H, x->W, OC);
        for (int i = 0; i < OC * K; i++) { /* each accumulator's lanes in order (i <= 8i: in place) */
            float t = 0.0f;
            for (int l = 0; l < 8; l++) t += part[8L * i + l];
            part[i] = t;
        }
        return;
    }
    for (int r = 0; r < K; r++)
        for (int b = b0; b < b0 + nb; b++)
            im2col_row(x->col + r * N + (long)b * HoWo, x->inp + ((long)(r / 9) * B + b) * x->H * x->W, r, x->H, x->W,
                       Ho, Wo, x->stride);
    ML_SGEMM(CblasRowMajor, CblasNoTrans, CblasTrans, OC, K, nc, 1.0f, x->dz + c0, (int)N, x->col + c0, (int)N, 0.0f,
             part, K);
}

void conv3x3_bn_backward_wgrad(float *dz, float *dw, float *col, float *part, const float *z, const float *inp,
                               const float *mdy, const float *mdyx, const float *mean, const float *rstd,
                               const float *gamma, const float *beta, int B, int C, int H, int W, int OC, int stride,
                               int chunk) {
    const int K = 9 * C, nch = (B + chunk - 1) / chunk;
    WgradCtx ctx = {dz, col, part, z, inp, mdy, mdyx, mean, rstd, gamma, beta, B, C, H, W, OC, stride, chunk};
    ml_par_items(nch, NULL, wgrad_chunk, &ctx); /* each chunk on one thread, even when they are fewer than the threads */
#pragma omp parallel for schedule(static) if (OC * K * nch > 16384)
    for (int i = 0; i < OC * K; i++) {
        double t = 0.0;
        for (int j = 0; j < nch; j++) t += part[(long)j * WG_PART(C, OC) + i];
        dw[i] += (float)t;
    }
}
