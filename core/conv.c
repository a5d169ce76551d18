/* conv.c — 3x3 convolution (im2col + SGEMM), depthwise 3x3 convolution and 1x1 (pointwise)
 * convolution, forward and backward. Layout (C, B, H, W); see layers.h.
 *
 * Parallelism: OpenBLAS threads the GEMMs; our own loops are split over disjoint output planes
 * with a static OpenMP schedule, and every reduction happens inside one thread in a fixed order,
 * so results are bit-for-bit reproducible for a fixed thread count. */
#include "layers.h"

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
                if (iy < 0 || iy >= H) { memset(dst, 0, sizeof(float) * Wo); continue; }
                const float *src = plane + (long)iy * W - 1 + kx;
                for (int ox = 0; ox < lo; ox++) dst[ox] = 0.0f;
                if (stride == 1) memcpy(dst + lo, src + lo, sizeof(float) * (hi - lo));
                else for (int ox = lo; ox < hi; ox++) dst[ox] = src[ox * stride];
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

void conv3x3_forward(float *out, float *col, const float *inp, const float *w,
                     int B, int C, int H, int W, int OC, int stride) {
    const int N = B * conv_out_size(H, stride) * conv_out_size(W, stride);
    im2col3x3(col, inp, B, C, H, W, stride);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, OC, N, C * 9,
                1.0f, w, C * 9, col, N, 0.0f, out, N);
}

void conv3x3_backward(float *dinp, float *dw, float *dcol, const float *dout, const float *col,
                      const float *w, int B, int C, int H, int W, int OC, int stride) {
    const int N = B * conv_out_size(H, stride) * conv_out_size(W, stride);
    const int K = C * 9;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, OC, K, N,
                1.0f, dout, N, col, N, 1.0f, dw, K);
    if (!dinp) return;
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, K, N, OC,
                1.0f, w, K, dout, N, 0.0f, dcol, N);
    col2im3x3(dinp, dcol, B, C, H, W, stride);
}

/* ---------------------------------------------------------------- depthwise 3x3 */

void dwconv3x3_forward(float *out, const float *inp, const float *w,
                       int B, int C, int H, int W, int stride) {
    const int Ho = conv_out_size(H, stride), Wo = conv_out_size(W, stride);
    int lo[3], hi[3];
    for (int kx = 0; kx < 3; kx++) valid_range(kx, W, Wo, stride, &lo[kx], &hi[kx]);
    #pragma omp parallel for collapse(2) schedule(static)
    for (int c = 0; c < C; c++) {
        for (int b = 0; b < B; b++) {
            const float *plane = inp + ((long)c * B + b) * H * W;
            const float *wc = w + c * 9;
            float *o = out + ((long)c * B + b) * Ho * Wo;
            for (int oy = 0; oy < Ho; oy++) {
                float *orow = o + (long)oy * Wo;
                for (int ox = 0; ox < Wo; ox++) orow[ox] = 0.0f;
                for (int ky = 0; ky < 3; ky++) {
                    const int iy = oy * stride - 1 + ky;
                    if (iy < 0 || iy >= H) continue;
                    const float *irow = plane + (long)iy * W - 1;
                    for (int kx = 0; kx < 3; kx++) {
                        const float wv = wc[ky * 3 + kx];
                        const float *src = irow + kx;
                        if (stride == 1)
                            for (int ox = lo[kx]; ox < hi[kx]; ox++) orow[ox] += wv * src[ox];
                        else
                            for (int ox = lo[kx]; ox < hi[kx]; ox++) orow[ox] += wv * src[ox * stride];
                    }
                }
            }
        }
    }
}

void dwconv3x3_backward(float *dinp, float *dw, const float *dout, const float *inp,
                        const float *w, int B, int C, int H, int W, int stride) {
    const int Ho = conv_out_size(H, stride), Wo = conv_out_size(W, stride);
    int lo[3], hi[3];
    for (int kx = 0; kx < 3; kx++) valid_range(kx, W, Wo, stride, &lo[kx], &hi[kx]);
    #pragma omp parallel for schedule(static)
    for (int c = 0; c < C; c++) {
        double acc[9] = {0};
        const float *wc = w + c * 9;
        for (int b = 0; b < B; b++) {
            const float *plane = inp + ((long)c * B + b) * H * W;
            const float *d = dout + ((long)c * B + b) * Ho * Wo;
            float *di = dinp ? dinp + ((long)c * B + b) * H * W : NULL;
            if (di) memset(di, 0, sizeof(float) * H * W);
            float part[9] = {0};
            for (int oy = 0; oy < Ho; oy++) {
                const float *drow = d + (long)oy * Wo;
                for (int ky = 0; ky < 3; ky++) {
                    const int iy = oy * stride - 1 + ky;
                    if (iy < 0 || iy >= H) continue;
                    const float *irow = plane + (long)iy * W - 1;
                    float *dirow = di ? di + (long)iy * W - 1 : NULL;
                    for (int kx = 0; kx < 3; kx++) {
                        const float *src = irow + kx;
                        float s = 0.0f;
                        for (int ox = lo[kx]; ox < hi[kx]; ox++) s += drow[ox] * src[ox * stride];
                        part[ky * 3 + kx] += s;
                        if (dirow) {
                            const float wv = wc[ky * 3 + kx];
                            float *dst = dirow + kx;
                            for (int ox = lo[kx]; ox < hi[kx]; ox++) dst[ox * stride] += wv * drow[ox];
                        }
                    }
                }
            }
            for (int t = 0; t < 9; t++) acc[t] += part[t];
        }
        for (int t = 0; t < 9; t++) dw[c * 9 + t] += (float)acc[t];
    }
}

/* ---------------------------------------------------------------- pointwise 1x1 */

void pwconv_forward(float *out, const float *inp, const float *w, int N, int C, int OC) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, OC, N, C,
                1.0f, w, C, inp, N, 0.0f, out, N);
}

void pwconv_backward(float *dinp, float *dw, const float *dout, const float *inp,
                     const float *w, int N, int C, int OC) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, OC, C, N,
                1.0f, dout, N, inp, N, 1.0f, dw, C);
    if (dinp)
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, C, N, OC,
                    1.0f, w, C, dout, N, 0.0f, dinp, N);
}
