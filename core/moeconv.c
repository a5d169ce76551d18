/* moeconv.c — routed conv-FFN layers of the backbone and their dense baseline (see moeconv.h for
 * the maths, layout and contracts). Routing is core/moe.c's (moe_route_forward/backward); this
 * file gathers the routed samples' pixels per expert, runs the experts as SGEMMs, combines, and
 * backs through all of it. OpenMP only over loops with disjoint outputs: deterministic for a
 * fixed thread count. */
#include "core/moeconv.h"

#include <cblas.h>
#include <string.h>

#include "core/layers.h"

// Loops smaller than this many float operations run on one thread.
#define MC_PAR_MIN 32768

long moeconv_cols(const MoeConv *L) { return (long)L->route.cfg.k * L->Bmax * L->HW; }

// out (rows, n) += bias[row] per row; then ReLU if relu.
static void mc_bias_act_(float *out, const float *bias, int rows, long n, int relu) {
#pragma omp parallel for if ((long)rows * n > MC_PAR_MIN)
    for (int i = 0; i < rows; i++) {
        float *r = out + (size_t)i * n;
        const float bv = bias[i];
        if (relu)
            for (long j = 0; j < n; j++) {
                const float v = r[j] + bv;
                r[j] = v > 0.0f ? v : 0.0f;
            }
        else
            for (long j = 0; j < n; j++) r[j] += bv;
    }
}

// db (rows) += row sums of a (rows, n), each in double, in order.
static void mc_rowsum_acc_(float *db, const float *a, int rows, long n) {
#pragma omp parallel for if ((long)rows * n > MC_PAR_MIN)
    for (int i = 0; i < rows; i++) {
        const float *r = a + (size_t)i * n;
        double s = 0.0;
        for (long j = 0; j < n; j++) s += r[j];
        db[i] += (float)s;
    }
}

// da (n) *= (act > 0) element-wise.
static void mc_relu_mask_(float *da, const float *act, long n) {
#pragma omp parallel for if (n > MC_PAR_MIN)
    for (long i = 0; i < n; i++) da[i] = act[i] > 0.0f ? da[i] : 0.0f;
}

// The expert of gathered row j.
static inline int mc_row_expert_(const MoeHead *r, int j) {
    return r->sel[(size_t)r->row_src[j] * r->cfg.k + r->row_rank[j]];
}

// ---------------------------------------------------------------- routed layer

void moeconv_forward(MoeConv *L, float *y, const float *x, int B, float tau, int training, Rng *rng) {
    ML_ASSERT(B >= 1 && B <= L->Bmax);
    MoeHead *r = &L->route;
    const int C = L->C, HW = L->HW, h = r->cfg.h, E = r->cfg.E, k = r->cfg.k;
    const size_t BHW = (size_t)B * HW;
    gap_forward(L->pool, x, B, C, HW);
    moe_route_forward(r, L->pool, L->p.router, B, tau, training, rng);
    // gather: row j of expert e = slot j - off[e] of e's block (C, n_e*HW)
    const int nrows = r->nrows;
#pragma omp parallel for if ((long)nrows * C * HW > MC_PAR_MIN)
    for (int j = 0; j < nrows; j++) {
        const int e = mc_row_expert_(r, j), b = r->row_src[j];
        const size_t o = (size_t)r->off[e], ld = (size_t)(r->off[e + 1] - r->off[e]) * HW;
        float *blk = L->xg + o * C * HW + (size_t)(j - r->off[e]) * HW;
        for (int c = 0; c < C; c++) memcpy(blk + c * ld, x + c * BHW + (size_t)b * HW, sizeof(float) * HW);
    }
    // experts: hid_e (h, N) = relu(W1_e xg_e + b1_e), yo_e (C, N) = W2_e hid_e + b2_e, N = n_e*HW
    for (int e = 0; e < E; e++) {
        const int n = r->off[e + 1] - r->off[e];
        if (n <= 0) continue;
        const long N = (long)n * HW;
        const size_t o = (size_t)r->off[e] * HW;
        float *xe = L->xg + o * C, *he = L->hid + o * h, *ye = L->yo + o * C;
        ML_SGEMM(CblasRowMajor, CblasNoTrans, CblasNoTrans, h, (int)N, C, 1.0f, L->p.w1[e], C, xe, (int)N, 0.0f, he,
                 (int)N);
        mc_bias_act_(he, L->p.b1[e], h, N, 1);
        ML_SGEMM(CblasRowMajor, CblasNoTrans, CblasNoTrans, C, (int)N, h, 1.0f, L->p.w2[e], h, he, (int)N, 0.0f, ye,
                 (int)N);
        mc_bias_act_(ye, L->p.b2[e], C, N, 0);
    }
    // combine: y = x + sum over the sample's kept pairs (ranks in order) of g * yo
#pragma omp parallel for if ((long)C * BHW > MC_PAR_MIN)
    for (int c = 0; c < C; c++) {
        memcpy(y + c * BHW, x + c * BHW, sizeof(float) * BHW);
        for (int b = 0; b < B; b++) {
            float *yb = y + c * BHW + (size_t)b * HW;
            for (int q = 0; q < k; q++) {
                const int j = r->row[(size_t)b * k + q];
                if (j < 0) continue;
                const int e = r->sel[(size_t)b * k + q];
                const size_t ld = (size_t)(r->off[e + 1] - r->off[e]) * HW;
                const float *src = L->yo + (size_t)r->off[e] * HW * C + c * ld + (size_t)(j - r->off[e]) * HW;
                const float gv = r->gate[(size_t)b * k + q];
                for (int i = 0; i < HW; i++) yb[i] += gv * src[i];
            }
        }
    }
}

void moeconv_backward(MoeConv *L, float *dx, const float *dy, const float *x, int B) {
    MoeHead *r = &L->route;
    ML_ASSERT(B == r->B && B >= 1);
    (void)x;
    const int C = L->C, HW = L->HW, h = r->cfg.h, E = r->cfg.E, k = r->cfg.k;
    const size_t BHW = (size_t)B * HW;
    const int nrows = r->nrows;
    // per gathered row: dyo = gate * dy[b], dgate = <dy[b], yo_row>
    memset(r->dgate, 0, sizeof(float) * (size_t)B * k);
#pragma omp parallel for if ((long)nrows * C * HW > MC_PAR_MIN)
    for (int j = 0; j < nrows; j++) {
        const int e = mc_row_expert_(r, j), b = r->row_src[j], q = r->row_rank[j];
        const size_t ld = (size_t)(r->off[e + 1] - r->off[e]) * HW;
        const size_t base = (size_t)r->off[e] * HW * C + (size_t)(j - r->off[e]) * HW;
        const float gv = r->gate[(size_t)b * k + q];
        double s = 0.0;
        for (int c = 0; c < C; c++) {
            const float *dyb = dy + c * BHW + (size_t)b * HW, *yj = L->yo + base + c * ld;
            float *dj = L->dyo + base + c * ld;
            for (int i = 0; i < HW; i++) {
                dj[i] = gv * dyb[i];
                s += (double)dyb[i] * yj[i];
            }
        }
        r->dgate[(size_t)b * k + q] = (float)s;
    }
    // experts backward; dxg_e overwrites dyo_e once dyo_e is used
    for (int e = 0; e < E; e++) {
        const int n = r->off[e + 1] - r->off[e];
        if (n <= 0) continue;
        const long N = (long)n * HW;
        const size_t o = (size_t)r->off[e] * HW;
        const float *xe = L->xg + o * C, *he = L->hid + o * h;
        float *dye = L->dyo + o * C, *dhe = L->dhid + o * h;
        // dW2 (C, h) += dyo hid^T; db2 += row sums of dyo
        ML_SGEMM(CblasRowMajor, CblasNoTrans, CblasTrans, C, h, (int)N, 1.0f, dye, (int)N, he, (int)N, 1.0f, L->g.w2[e],
                 h);
        mc_rowsum_acc_(L->g.b2[e], dye, C, N);
        // dhid (h, N) = W2^T dyo, masked by the ReLU
        ML_SGEMM(CblasRowMajor, CblasTrans, CblasNoTrans, h, (int)N, C, 1.0f, L->p.w2[e], h, dye, (int)N, 0.0f, dhe,
                 (int)N);
        mc_relu_mask_(dhe, he, (long)h * N);
        // dW1 (h, C) += dhid xg^T; db1 += row sums of dhid
        ML_SGEMM(CblasRowMajor, CblasNoTrans, CblasTrans, h, C, (int)N, 1.0f, dhe, (int)N, xe, (int)N, 1.0f, L->g.w1[e],
                 C);
        mc_rowsum_acc_(L->g.b1[e], dhe, h, N);
        // dxg (C, N) = W1^T dhid, into dyo's block
        ML_SGEMM(CblasRowMajor, CblasTrans, CblasNoTrans, C, (int)N, h, 1.0f, L->p.w1[e], C, dhe, (int)N, 0.0f, dye,
                 (int)N);
    }
    // router: dpool (B, C) from the gates (and L_aux, L_z), then through the pooling
    memset(L->dpool, 0, sizeof(float) * (size_t)B * C);
    moe_route_backward(r, L->dpool, L->g.router, L->pool, L->p.router, B);
    const float inv_hw = 1.0f / (float)HW;
    // dx = dy + scattered dxg of the kept pairs (ranks in order) + dpool / HW
#pragma omp parallel for if ((long)C * BHW > MC_PAR_MIN)
    for (int c = 0; c < C; c++) {
        memcpy(dx + c * BHW, dy + c * BHW, sizeof(float) * BHW);
        for (int b = 0; b < B; b++) {
            float *db = dx + c * BHW + (size_t)b * HW;
            for (int q = 0; q < k; q++) {
                const int j = r->row[(size_t)b * k + q];
                if (j < 0) continue;
                const int e = r->sel[(size_t)b * k + q];
                const size_t ld = (size_t)(r->off[e + 1] - r->off[e]) * HW;
                const float *src = L->dyo + (size_t)r->off[e] * HW * C + c * ld + (size_t)(j - r->off[e]) * HW;
                for (int i = 0; i < HW; i++) db[i] += src[i];
            }
            const float gp = L->dpool[(size_t)b * C + c] * inv_hw;
            for (int i = 0; i < HW; i++) db[i] += gp;
        }
    }
}

// ---------------------------------------------------------------- dense baseline

void ffnconv_forward(FfnConv *L, float *y, const float *x, int B) {
    ML_ASSERT(B >= 1 && B <= L->Bmax);
    const int C = L->C, hk = L->hidden;
    const long N = (long)B * L->HW;
    ML_SGEMM(CblasRowMajor, CblasNoTrans, CblasNoTrans, hk, (int)N, C, 1.0f, L->w1, C, x, (int)N, 0.0f, L->hid, (int)N);
    mc_bias_act_(L->hid, L->b1, hk, N, 1);
    memcpy(y, x, sizeof(float) * (size_t)C * N);
    ML_SGEMM(CblasRowMajor, CblasNoTrans, CblasNoTrans, C, (int)N, hk, 1.0f, L->w2, hk, L->hid, (int)N, 1.0f, y,
             (int)N);
    mc_bias_act_(y, L->b2, C, N, 0);
}

void ffnconv_backward(FfnConv *L, float *dx, const float *dy, const float *x, int B) {
    const int C = L->C, hk = L->hidden;
    const long N = (long)B * L->HW;
    ML_SGEMM(CblasRowMajor, CblasNoTrans, CblasTrans, C, hk, (int)N, 1.0f, dy, (int)N, L->hid, (int)N, 1.0f, L->gw2,
             hk);
    mc_rowsum_acc_(L->gb2, dy, C, N);
    ML_SGEMM(CblasRowMajor, CblasTrans, CblasNoTrans, hk, (int)N, C, 1.0f, L->w2, hk, dy, (int)N, 0.0f, L->dhid,
             (int)N);
    mc_relu_mask_(L->dhid, L->hid, (long)hk * N);
    ML_SGEMM(CblasRowMajor, CblasNoTrans, CblasTrans, hk, C, (int)N, 1.0f, L->dhid, (int)N, x, (int)N, 1.0f, L->gw1, C);
    mc_rowsum_acc_(L->gb1, L->dhid, hk, N);
    memcpy(dx, dy, sizeof(float) * (size_t)C * N);
    ML_SGEMM(CblasRowMajor, CblasTrans, CblasNoTrans, C, (int)N, hk, 1.0f, L->w1, C, L->dhid, (int)N, 1.0f, dx, (int)N);
}
