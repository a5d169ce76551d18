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
        for (int t = 0; t < 9; t++) dw[c * 9 + t] += (float)tot[t];
        if (sums) {
            sums[2 * c] = s1;
            sums[2 * c + 1] = s2;
        }
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
 * 32x32x3 -> 32: 4.3-4.9 ms against 6.5-6.6 ms for im2col + SGEMM (minimum of 10 calls). A
 * direct weight gradient (fused with the batch-norm backward's second pass) was tried and dropped:
 * 8.0 ms against 5.9 ms for the SGEMM. */

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
                    const float *src = xp[k / 3] + k % 3 + 8 * v;
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
                    const cv8f x0 = CV8_LOAD(xp[k / 3] + k % 3 + 8 * v);
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
                    const cv8f x0 = CV8_LOAD(xp[k / 3] + k % 3 + 8 * NV);
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
                for (int k = 0; k < K; k++) a0 += CV8_SPLAT(wo[k]) * CV8_LOAD(xp[k / 3] + k % 3 + 8 * v);
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
            if (v < 0.0) v = 0.0;
            const double var = v / N;
            const float rs = (float)(1.0 / sqrt(var + BN_EPS));
            mean[c] = (float)m;
            rstd[c] = rs;
            a[c] = gamma[c] * rs;
            bb[c] = beta[c] - (float)m * a[c];
            if (run_mean) {
                const double unbiased = N > 1 ? v / (N - 1) : var;
                run_mean[c] = (1.0f - momentum) * run_mean[c] + momentum * (float)m;
                run_var[c] = (1.0f - momentum) * run_var[c] + momentum * (float)unbiased;
            }
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
#define WG_PART(B, C, OC) ((long)(OC) * 9 * (C) * 8)
long conv3x3_wgrad_part_floats(int B, int C, int OC, int chunk) { return (long)((B + chunk - 1) / chunk) * WG_PART(B, C, OC); }

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
    float *part = x->part + (long)j * WG_PART(B, x->C, OC);
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
        for (int j = 0; j < nch; j++) t += part[(long)j * WG_PART(B, C, OC) + i];
        dw[i] += (float)t;
    }
}
