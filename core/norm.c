/* norm.c — batch normalisation over (C, N) with an optional fused ReLU, and plain ReLU.
 * Each channel's N values are contiguous (layout (C, B, H, W)); statistics are accumulated in
 * double inside one thread per channel, so results are reproducible for a fixed thread count. */
#include "layers.h"

#include <math.h>

void bn_forward_train(float *out, float *mean, float *rstd, const float *inp, const float *gamma,
                      const float *beta, float *run_mean, float *run_var, float momentum,
                      int C, int N, int relu) {
    #pragma omp parallel for schedule(static)
    for (int c = 0; c < C; c++) {
        const float *x = inp + (long)c * N;
        float *y = out + (long)c * N;
        double s = 0.0;
        for (int i = 0; i < N; i++) s += x[i];
        const double m = s / N;
        double v = 0.0;
        for (int i = 0; i < N; i++) { double dd = x[i] - m; v += dd * dd; }
        const double var = v / N;
        const float rs = (float)(1.0 / sqrt(var + BN_EPS));
        mean[c] = (float)m;
        rstd[c] = rs;
        const float a = gamma[c] * rs, bb = beta[c] - (float)m * a;
        if (relu) for (int i = 0; i < N; i++) { float t = x[i] * a + bb; y[i] = t > 0.0f ? t : 0.0f; }
        else      for (int i = 0; i < N; i++) y[i] = x[i] * a + bb;
        if (run_mean) {
            const double unbiased = N > 1 ? v / (N - 1) : var;
            run_mean[c] = (1.0f - momentum) * run_mean[c] + momentum * (float)m;
            run_var[c] = (1.0f - momentum) * run_var[c] + momentum * (float)unbiased;
        }
    }
}

void bn_forward_eval(float *out, const float *inp, const float *gamma, const float *beta,
                     const float *run_mean, const float *run_var, int C, int N, int relu) {
    #pragma omp parallel for schedule(static)
    for (int c = 0; c < C; c++) {
        const float *x = inp + (long)c * N;
        float *y = out + (long)c * N;
        const float a = gamma[c] / sqrtf(run_var[c] + BN_EPS), bb = beta[c] - run_mean[c] * a;
        if (relu) for (int i = 0; i < N; i++) { float t = x[i] * a + bb; y[i] = t > 0.0f ? t : 0.0f; }
        else      for (int i = 0; i < N; i++) y[i] = x[i] * a + bb;
    }
}

void bn_backward(float *dinp, float *dgamma, float *dbeta, const float *dout, const float *out,
                 const float *inp, const float *mean, const float *rstd, const float *gamma,
                 int C, int N, int relu) {
    #pragma omp parallel for schedule(static)
    for (int c = 0; c < C; c++) {
        const float *dy = dout + (long)c * N, *x = inp + (long)c * N, *y = out + (long)c * N;
        float *dx = dinp + (long)c * N;
        const float m = mean[c], rs = rstd[c];
        double sdy = 0.0, sdyx = 0.0;
        if (relu) {
            for (int i = 0; i < N; i++) {
                float g = y[i] > 0.0f ? dy[i] : 0.0f;
                sdy += g; sdyx += g * ((x[i] - m) * rs);
            }
        } else {
            for (int i = 0; i < N; i++) { sdy += dy[i]; sdyx += dy[i] * ((x[i] - m) * rs); }
        }
        dgamma[c] += (float)sdyx;
        dbeta[c] += (float)sdy;
        const float k = gamma[c] * rs;
        const float mdy = (float)(sdy / N), mdyx = (float)(sdyx / N);
        if (relu) {
            for (int i = 0; i < N; i++) {
                float g = y[i] > 0.0f ? dy[i] : 0.0f;
                dx[i] = k * (g - mdy - (x[i] - m) * rs * mdyx);
            }
        } else {
            for (int i = 0; i < N; i++) dx[i] = k * (dy[i] - mdy - (x[i] - m) * rs * mdyx);
        }
    }
}

void relu_forward(float *out, const float *inp, long n) {
    #pragma omp parallel for schedule(static) if (n > 65536)
    for (long i = 0; i < n; i++) out[i] = inp[i] > 0.0f ? inp[i] : 0.0f;
}

void relu_backward(float *dinp, const float *dout, const float *out, long n) {
    #pragma omp parallel for schedule(static) if (n > 65536)
    for (long i = 0; i < n; i++) dinp[i] = out[i] > 0.0f ? dout[i] : 0.0f;
}
