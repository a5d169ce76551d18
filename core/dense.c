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

void bias_relu_forward(float *out, const float *bias, int B, int OC) {
#pragma omp parallel for schedule(static) if ((long)B * OC > 16384)
    for (int b = 0; b < B; b++) {
        float *r = out + (long)b * OC;
        for (int o = 0; o < OC; o++) {
            float v = r[o] + bias[o];
            r[o] = v > 0.0f ? v : 0.0f;
        }
    }
}

/* Columns are split into blocks of RB_COLS, one block per task; inside a block the rows run in
 * order, so each column's sum is the same serial sum whatever the thread count. */
#define RB_COLS 256
void relu_bias_backward(float *dout, float *dbias, const float *out, int B, int OC) {
    const int nblk = (OC + RB_COLS - 1) / RB_COLS;
#pragma omp parallel for schedule(static) if ((long)B * OC > 16384)
    for (int k = 0; k < nblk; k++) {
        const int o0 = k * RB_COLS, o1 = o0 + RB_COLS < OC ? o0 + RB_COLS : OC;
        float s[RB_COLS] = {0};
        for (int b = 0; b < B; b++) {
            float *d = dout + (long)b * OC;
            const float *y = out + (long)b * OC;
            for (int o = o0; o < o1; o++) {
                const float g = y[o] > 0.0f ? d[o] : 0.0f;
                d[o] = g;
                s[o - o0] += g;
            }
        }
        if (dbias)
            for (int o = o0; o < o1; o++) dbias[o] += s[o - o0];
    }
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
