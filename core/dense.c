/* dense.c — global average pooling, linear layers and softmax cross-entropy.
 * Per-sample tensors are row-major (B, D); pooled inputs come in the conv layout (C, B, HW). */
#include "layers.h"
#include "common.h"

#include <cblas.h>
#include <math.h>

void gap_forward(float *out, const float *inp, int B, int C, int HW) {
    const float inv = 1.0f / HW;
#pragma omp parallel for schedule(static)
    for (int c = 0; c < C; c++)
        for (int b = 0; b < B; b++) {
            const float *p = inp + ((long)c * B + b) * HW;
            float s = 0.0f;
            for (int i = 0; i < HW; i++) s += p[i];
            out[(long)b * C + c] = s * inv;
        }
}

void gap_backward(float *dinp, const float *dout, int B, int C, int HW) {
    const float inv = 1.0f / HW;
#pragma omp parallel for schedule(static)
    for (int c = 0; c < C; c++)
        for (int b = 0; b < B; b++) {
            float *p = dinp + ((long)c * B + b) * HW;
            const float g = dout[(long)b * C + c] * inv;
            for (int i = 0; i < HW; i++) p[i] = g;
        }
}

void linear_forward(float *out, const float *inp, const float *w, const float *bias, int B, int IC, int OC) {
    ML_SGEMM(CblasRowMajor, CblasNoTrans, CblasTrans, B, OC, IC, 1.0f, inp, IC, w, IC, 0.0f, out, OC);
    if (bias)
        for (int b = 0; b < B; b++)
            for (int o = 0; o < OC; o++) out[(long)b * OC + o] += bias[o];
}

void linear_backward(float *dinp, float *dw, float *dbias, const float *dout, const float *inp, const float *w, int B,
                     int IC, int OC) {
    ML_SGEMM(CblasRowMajor, CblasTrans, CblasNoTrans, OC, IC, B, 1.0f, dout, OC, inp, IC, 1.0f, dw, IC);
    if (dbias)
        for (int o = 0; o < OC; o++) {
            float s = 0.0f;
            for (int b = 0; b < B; b++) s += dout[(long)b * OC + o];
            dbias[o] += s;
        }
    if (dinp) ML_SGEMM(CblasRowMajor, CblasNoTrans, CblasNoTrans, B, IC, OC, 1.0f, dout, OC, w, IC, 0.0f, dinp, IC);
}

double xent_forward(float *probs, const float *logits, const int32_t *labels, int B, int K, int *correct) {
    double loss = 0.0;
    int ok = 0;
    for (int b = 0; b < B; b++) {
        const float *z = logits + (long)b * K;
        float *p = probs + (long)b * K;
        int am = 0;
        float mx = z[0];
        for (int j = 1; j < K; j++)
            if (z[j] > mx) {
                mx = z[j];
                am = j;
            }
        double s = 0.0;
        for (int j = 0; j < K; j++) {
            p[j] = expf(z[j] - mx);
            s += p[j];
        }
        const float inv = (float)(1.0 / s);
        for (int j = 0; j < K; j++) p[j] *= inv;
        loss += log(s) + mx - z[labels[b]];
        ok += (am == labels[b]);
    }
    if (correct) *correct = ok;
    return loss / B;
}

void xent_backward(float *dlogits, const float *probs, const int32_t *labels, int B, int K, float scale) {
    for (int b = 0; b < B; b++) {
        for (int j = 0; j < K; j++) dlogits[(long)b * K + j] = probs[(long)b * K + j] * scale;
        dlogits[(long)b * K + labels[b]] -= scale;
    }
}
