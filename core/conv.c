/* conv.c — 3x3 convolution (im2col + SGEMM), depthwise 3x3 convolution and 1x1 (pointwise)
 * convolution, forward and backward. Layout (C, B, H, W); see layers.h.
 *
 * Parallelism: OpenBLAS threads the GEMMs; our own loops are split over disjoint output planes
 * with a static OpenMP schedule, and every reduction happens inside one thread in a fixed order,
 * so results are bit-for-bit reproducible for a fixed thread count. */
#include "layers.h"
#include "common.h"

#include <cblas.h>
#include <string.h>

/* ---------------------------------------------------------------- im2col / col2im */

/* The output columns ox in [lo, hi) read input column ox*s - 1 + kx inside [0, W). */
static inline void valid_range(int kx, int W, int Wo, int s, int *lo, int *hi) {
    *lo = (kx == 0) ? 1 : 0;
    int h = (W - kx) / s + 1;
    *hi = h < Wo ? h : Wo;
}

void im2col3x3(float *col, const float *inp, int B, int C, int H, int W, int stride) {
    const int Ho = conv_out_size(H, stride), Wo = conv_out_size(W, stride);
    const long N = (long)B * Ho * Wo;
#pragma omp parallel for collapse(2) schedule(static)
    for (int r = 0; r < C * 9; r++) {
        for (int b = 0; b < B; b++) {
            const int c = r / 9, ky = (r % 9) / 3, kx = r % 3;
            int lo, hi;
            valid_range(kx, W, Wo, stride, &lo, &hi);
            const float *plane = inp + ((long)c * B + b) * H * W;
            float *dst = col + r * N + (long)b * Ho * Wo;
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
    }
}

void col2im3x3(float *dinp, const float *dcol, int B, int C, int H, int W, int stride) {
    const int Ho = conv_out_size(H, stride), Wo = conv_out_size(W, stride);
    const long N = (long)B * Ho * Wo;
#pragma omp parallel for collapse(2) schedule(static)
    for (int c = 0; c < C; c++) {
        for (int b = 0; b < B; b++) {
            float *plane = dinp + ((long)c * B + b) * H * W;
            memset(plane, 0, sizeof(float) * H * W);
            for (int t = 0; t < 9; t++) {
                const int ky = t / 3, kx = t % 3;
                int lo, hi;
                valid_range(kx, W, Wo, stride, &lo, &hi);
                const float *src = dcol + (long)(c * 9 + t) * N + (long)b * Ho * Wo;
                for (int oy = 0; oy < Ho; oy++, src += Wo) {
                    const int iy = oy * stride - 1 + ky;
                    if (iy < 0 || iy >= H) continue;
                    float *dst = plane + (long)iy * W - 1 + kx;
                    for (int ox = lo; ox < hi; ox++) dst[ox * stride] += src[ox];
                }
            }
        }
    }
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

void dwconv3x3_forward(float *out, const float *inp, const float *w, int B, int C, int H, int W, int stride) {
    const int Ho = conv_out_size(H, stride), Wo = conv_out_size(W, stride);
    ML_ASSERT(Wo <= DW_MAX_W);
    int lo[3], hi[3];
    for (int kx = 0; kx < 3; kx++) valid_range(kx, W, Wo, stride, &lo[kx], &hi[kx]);
#pragma omp parallel for collapse(2) schedule(static)
    for (int c = 0; c < C; c++) {
        for (int b = 0; b < B; b++) {
            const float *plane = inp + ((long)c * B + b) * H * W;
            float *o = out + ((long)c * B + b) * Ho * Wo;
            if (stride == 1) dw_plane_forward(o, plane, w + c * 9, H, W, Ho, Wo, lo, hi, 1);
            else if (stride == 2) dw2_forward_any(o, plane, w + c * 9, H, W, Ho, Wo);
            else dw_plane_forward(o, plane, w + c * 9, H, W, Ho, Wo, lo, hi, stride);
        }
    }
}

void dwconv3x3_backward(float *dinp, float *dw, const float *dout, const float *inp, const float *w, int B, int C,
                        int H, int W, int stride) {
    const int Ho = conv_out_size(H, stride), Wo = conv_out_size(W, stride);
    ML_ASSERT(Wo <= DW_MAX_W);
    int lo[3], hi[3];
    for (int kx = 0; kx < 3; kx++) valid_range(kx, W, Wo, stride, &lo[kx], &hi[kx]);
#pragma omp parallel for schedule(static)
    for (int c = 0; c < C; c++) {
        float acc[9 * DW_MAX_W];
        double tot[9] = {0};
        const float *wc = w + c * 9;
        for (int b = 0; b < B; b++) {
            const float *plane = inp + ((long)c * B + b) * H * W;
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
        }
        for (int t = 0; t < 9; t++) dw[c * 9 + t] += (float)tot[t];
    }
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
