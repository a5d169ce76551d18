/* moeconv.c — routed conv-FFN layers of the backbone and their dense baseline (see moeconv.h for
 * the maths, layout and contracts). Routing is core/moe.c's (moe_route_forward/backward); this
 * file runs the experts as SGEMMs on the routed samples' maps in place, combines with the gates,
 * and backs through all of it. Threads only over items with disjoint outputs. */
#include "core/moeconv.h"

#include <cblas.h>
#include <omp.h>
#include <string.h>

#include "core/layers.h"

// Loops smaller than this many float operations run on one thread.
#define MC_PAR_MIN 32768

long moeconv_cols(const MoeConv *L) { return (long)L->route.cfg.k * L->Bmax * L->HW; }

// Sum of a (n) and dot product of a, b (n): 16 float lanes (the loop vectorises; a double
// accumulator's add chain does not), then the lanes added in double. Same order on every call.
#define MC_LANES 16
static double mc_sum_(const float *a, long n) {
    float acc[MC_LANES] = {0};
    long i = 0;
    for (; i + MC_LANES <= n; i += MC_LANES)
        for (int l = 0; l < MC_LANES; l++) acc[l] += a[i + l];
    double s = 0.0;
    for (; i < n; i++) s += a[i];
    for (int l = 0; l < MC_LANES; l++) s += acc[l];
    return s;
}

static double mc_dot_(const float *a, const float *b, long n) {
    float acc[MC_LANES] = {0};
    long i = 0;
    for (; i + MC_LANES <= n; i += MC_LANES)
        for (int l = 0; l < MC_LANES; l++) acc[l] += a[i + l] * b[i + l];
    double s = 0.0;
    for (; i < n; i++) s += (double)a[i] * b[i];
    for (int l = 0; l < MC_LANES; l++) s += acc[l];
    return s;
}

// db (rows) += row sums of a (rows, n) (mc_sum_ per row).
static void mc_rowsum_acc_(float *db, const float *a, int rows, long n) {
#pragma omp parallel for if ((long)rows * n > MC_PAR_MIN)
    for (int i = 0; i < rows; i++) db[i] += (float)mc_sum_(a + (size_t)i * n, n);
}

// ---------------------------------------------------------------- routed layer
//
// No gathered copies of feature maps: an expert's SGEMMs read a routed sample's map where it
// lies, (C, HW) at x + b*HW with leading dimension B*HW, and write its hidden activation to the
// pair's slot of hid, (h, HW) at hid + j*h*HW for gathered row j (rows are expert-major, so an
// expert's slots are contiguous). Work is handed out as whole items to one thread each
// (ml_par_items; BLAS inside runs single-threaded), so the numbers do not depend on the thread
// count:
//   forward   per sample: its kept pairs in rank order, y_b = x_b + sum_q g_q (W2 hid_q + b2),
//             the expert output staying in a per-thread (C, HW) buffer (L->yo) while in cache;
//   backward  1. per sample: T_q = W2^T dy_b into dhid's slot; the gate's gradient
//                <dy_b, W2 hid_q + b2> = <T_q, hid_q> + <b2, row sums of dy_b>; then
//                dhid_q = g_q T_q masked by the ReLU (no expert output is stored);
//             2. the router's backward (dpool);
//             3. per expert (largest first): its pairs in row order accumulate dW2 += g dy_b hid^T,
//                db2 += g rowsum(dy_b), dW1 += dhid x_b^T, db1 += rowsum(dhid); then per sample:
//                dx_b = dy_b + dpool_b / HW + sum_q W1^T dhid_q.
// Scratch: L->yo holds a (C, HW) buffer per thread; L->xg the row sums of dy, (B, C).

typedef struct {
    MoeConv *L;
    const float *x, *dy;
    float *y, *dx;
    int B;
    int par;                   // items run by ml_par_items: each thread uses its own expert-output buffer
    int eord[MOE_MAX_EXPERTS]; // experts, most rows first
} McWork;

// Items go to ml_par_items when there are enough for the threads and each thread's (C, HW)
// buffer fits in L->yo (L->nyo buffers of C*HW floats); otherwise they run in order on this thread.
static void mc_run_(int n, void (*fn)(void *, int), McWork *w) {
    const MoeConv *L = w->L;
    w->par = ml_par_items_worth(n) && omp_get_max_threads() <= L->nyo;
    if (w->par) ml_par_items(n, NULL, fn, w);
    else
        for (int i = 0; i < n; i++) fn(w, i);
}

static void mc_forward_sample_(void *ctx, int b) {
    McWork *w = ctx;
    MoeConv *L = w->L;
    const MoeHead *r = &L->route;
    const int C = L->C, HW = L->HW, h = r->cfg.h, k = r->cfg.k;
    const size_t BHW = (size_t)w->B * HW;
    const float *xb = w->x + (size_t)b * HW;
    float *yb = w->y + (size_t)b * HW;
    float *yo = L->yo + (size_t)(w->par ? omp_get_thread_num() : 0) * C * HW;
    int first = 1;
    for (int q = 0; q < k; q++) {
        const int j = r->row[(size_t)b * k + q];
        if (j < 0) continue;
        const int e = r->sel[(size_t)b * k + q];
        const float gv = r->gate[(size_t)b * k + q];
        float *hj = L->hid + (size_t)j * h * HW;
        ML_SGEMM(CblasRowMajor, CblasNoTrans, CblasNoTrans, h, HW, C, 1.0f, L->p.w1[e], C, xb, (int)BHW, 0.0f, hj, HW);
        for (int m = 0; m < h; m++) {
            float *hr = hj + (size_t)m * HW;
            const float bv = L->p.b1[e][m];
            for (int i = 0; i < HW; i++) {
                const float v = hr[i] + bv;
                hr[i] = v > 0.0f ? v : 0.0f;
            }
        }
        ML_SGEMM(CblasRowMajor, CblasNoTrans, CblasNoTrans, C, HW, h, 1.0f, L->p.w2[e], h, hj, HW, 0.0f, yo, HW);
        // y = x + g (yo + b2) for the first kept pair, y += g (yo + b2) for the next (rank order)
        for (int c = 0; c < C; c++) {
            const float bv = L->p.b2[e][c], *o = yo + (size_t)c * HW;
            const float *src = first ? xb + c * BHW : yb + c * BHW;
            float *dst = yb + c * BHW;
            for (int i = 0; i < HW; i++) dst[i] = src[i] + gv * (o[i] + bv);
        }
        first = 0;
    }
    if (first) /* every pair dropped: the layer leaves the sample as x */
        for (int c = 0; c < C; c++) memcpy(yb + c * BHW, xb + c * BHW, sizeof(float) * HW);
}

void moeconv_forward(MoeConv *L, float *y, const float *x, int B, float tau, int training, Rng *rng) {
    ML_ASSERT(B >= 1 && B <= L->Bmax);
    MoeHead *r = &L->route;
    gap_forward(L->pool, x, B, L->C, L->HW);
    moe_route_forward(r, L->pool, L->p.router, B, tau, training, rng);
    McWork w = {.L = L, .x = x, .y = y, .B = B};
    mc_run_(B, mc_forward_sample_, &w);
}

// Backward step 1 for sample b: row sums of dy_b, T = W2^T dy_b per kept pair, the gate's
// gradient, and dhid = g T masked by the ReLU.
static void mc_backward_gates_(void *ctx, int b) {
    McWork *w = ctx;
    MoeConv *L = w->L;
    MoeHead *r = &L->route;
    const int C = L->C, HW = L->HW, h = r->cfg.h, k = r->cfg.k;
    const size_t BHW = (size_t)w->B * HW;
    const float *dyb = w->dy + (size_t)b * HW;
    float *rs = L->xg + (size_t)b * C;
    int kept = 0;
    for (int q = 0; q < k; q++) kept += r->row[(size_t)b * k + q] >= 0;
    if (!kept) return;
    for (int c = 0; c < C; c++) rs[c] = (float)mc_sum_(dyb + c * BHW, HW);
    for (int q = 0; q < k; q++) {
        const int j = r->row[(size_t)b * k + q];
        if (j < 0) continue;
        const int e = r->sel[(size_t)b * k + q];
        const float gv = r->gate[(size_t)b * k + q];
        const float *hj = L->hid + (size_t)j * h * HW;
        float *dj = L->dhid + (size_t)j * h * HW;
        ML_SGEMM(CblasRowMajor, CblasTrans, CblasNoTrans, h, HW, C, 1.0f, L->p.w2[e], h, dyb, (int)BHW, 0.0f, dj, HW);
        double s = mc_dot_(dj, hj, (long)h * HW);
        for (long i = 0; i < (long)h * HW; i++) dj[i] = hj[i] > 0.0f ? gv * dj[i] : 0.0f;
        for (int c = 0; c < C; c++) s += (double)L->p.b2[e][c] * rs[c];
        r->dgate[(size_t)b * k + q] = (float)s;
    }
}

// Backward step 3: items 0..E-1 are the experts' weight gradients (w->eord), items E.. the
// samples' input gradients.
static void mc_backward_grads_(void *ctx, int i) {
    McWork *w = ctx;
    MoeConv *L = w->L;
    const MoeHead *r = &L->route;
    const int C = L->C, HW = L->HW, h = r->cfg.h, k = r->cfg.k, E = r->cfg.E;
    const size_t BHW = (size_t)w->B * HW;
    if (i < E) {
        const int e = w->eord[i];
        for (int j = r->off[e]; j < r->off[e + 1]; j++) {
            const int b = r->row_src[j];
            const float gv = r->gate[(size_t)b * k + r->row_rank[j]];
            const float *hj = L->hid + (size_t)j * h * HW, *dj = L->dhid + (size_t)j * h * HW;
            const float *dyb = w->dy + (size_t)b * HW, *xb = w->x + (size_t)b * HW, *rs = L->xg + (size_t)b * C;
            ML_SGEMM(CblasRowMajor, CblasNoTrans, CblasTrans, C, h, HW, gv, dyb, (int)BHW, hj, HW, 1.0f, L->g.w2[e], h);
            for (int c = 0; c < C; c++) L->g.b2[e][c] += gv * rs[c];
            ML_SGEMM(CblasRowMajor, CblasNoTrans, CblasTrans, h, C, HW, 1.0f, dj, HW, xb, (int)BHW, 1.0f, L->g.w1[e], C);
            for (int m = 0; m < h; m++) L->g.b1[e][m] += (float)mc_sum_(dj + (size_t)m * HW, HW);
        }
        return;
    }
    const int b = i - E;
    const float *dyb = w->dy + (size_t)b * HW;
    float *dxb = w->dx + (size_t)b * HW;
    const float inv_hw = 1.0f / (float)HW;
    for (int c = 0; c < C; c++) {
        const float gp = L->dpool[(size_t)b * C + c] * inv_hw, *d = dyb + c * BHW;
        float *o = dxb + c * BHW;
        for (int t = 0; t < HW; t++) o[t] = d[t] + gp;
    }
    for (int q = 0; q < k; q++) {
        const int j = r->row[(size_t)b * k + q];
        if (j < 0) continue;
        const int e = r->sel[(size_t)b * k + q];
        ML_SGEMM(CblasRowMajor, CblasTrans, CblasNoTrans, C, HW, h, 1.0f, L->p.w1[e], C, L->dhid + (size_t)j * h * HW,
                 HW, 1.0f, dxb, (int)BHW);
    }
}

void moeconv_backward(MoeConv *L, float *dx, const float *dy, const float *x, int B) {
    MoeHead *r = &L->route;
    ML_ASSERT(B == r->B && B >= 1);
    const int C = L->C, E = r->cfg.E, k = r->cfg.k;
    McWork w = {.L = L, .x = x, .dy = dy, .dx = dx, .B = B};
    memset(r->dgate, 0, sizeof(float) * (size_t)B * k);
    mc_run_(B, mc_backward_gates_, &w);
    // router: dpool (B, C) from the gates (and L_aux, L_z), then through the pooling
    memset(L->dpool, 0, sizeof(float) * (size_t)B * C);
    moe_route_backward(r, L->dpool, L->g.router, L->pool, L->p.router, B);
    for (int e = 0; e < E; e++) w.eord[e] = e; /* most rows first, ties by index (insertion sort) */
    for (int a = 1; a < E; a++)
        for (int c = a; c > 0; c--) {
            const int u = w.eord[c - 1], v = w.eord[c];
            if (r->off[v + 1] - r->off[v] <= r->off[u + 1] - r->off[u]) break;
            w.eord[c - 1] = v, w.eord[c] = u;
        }
    mc_run_(E + B, mc_backward_grads_, &w);
}

// ---------------------------------------------------------------- dense baseline
//
// The elementwise passes (bias + ReLU, y = x + ..., + b2, the ReLU mask, dx = dy + ...) run per
// block of samples right after the block's SGEMMs, while the block is in cache: items of about
// FC_COLS columns, whole on one thread (ml_par_items). The weight gradients stay whole-batch
// SGEMMs (threaded by OpenBLAS). Per element the arithmetic is the old full-width passes', in
// the same order; only the bias gradients' row sums are taken in float lanes.

#define FC_COLS 512

typedef struct {
    FfnConv *L;
    const float *x, *dy;
    float *y, *dx;
    int B, nb; // batch, samples per block
} FcWork;

static int fc_blocks_(const FfnConv *L, int B, int *nb) {
    *nb = L->HW >= FC_COLS ? 1 : FC_COLS / L->HW;
    if (*nb > B) *nb = B;
    return (B + *nb - 1) / *nb;
}

static void fc_run_(int n, void (*fn)(void *, int), FcWork *w) {
    if (ml_par_items_worth(n)) ml_par_items(n, NULL, fn, w);
    else
        for (int i = 0; i < n; i++) fn(w, i);
}

static void fc_forward_block_(void *ctx, int i) {
    FcWork *w = ctx;
    FfnConv *L = w->L;
    const int C = L->C, hk = L->hidden, b0 = i * w->nb, nb = w->B - b0 < w->nb ? w->B - b0 : w->nb;
    const long BHW = (long)w->B * L->HW, n = (long)nb * L->HW, o = (long)b0 * L->HW;
    float *hid = L->hid + o, *y = w->y + o;
    const float *x = w->x + o;
    ML_SGEMM(CblasRowMajor, CblasNoTrans, CblasNoTrans, hk, (int)n, C, 1.0f, L->w1, C, x, (int)BHW, 0.0f, hid,
             (int)BHW);
    for (int r = 0; r < hk; r++) {
        float *h = hid + r * BHW;
        const float bv = L->b1[r];
        for (long j = 0; j < n; j++) {
            const float v = h[j] + bv;
            h[j] = v > 0.0f ? v : 0.0f;
        }
    }
    for (int c = 0; c < C; c++) memcpy(y + c * BHW, x + c * BHW, sizeof(float) * n);
    ML_SGEMM(CblasRowMajor, CblasNoTrans, CblasNoTrans, C, (int)n, hk, 1.0f, L->w2, hk, hid, (int)BHW, 1.0f, y,
             (int)BHW);
    for (int c = 0; c < C; c++) {
        float *yr = y + c * BHW;
        const float bv = L->b2[c];
        for (long j = 0; j < n; j++) yr[j] += bv;
    }
}

void ffnconv_forward(FfnConv *L, float *y, const float *x, int B) {
    ML_ASSERT(B >= 1 && B <= L->Bmax);
    FcWork w = {.L = L, .x = x, .y = y, .B = B};
    fc_run_(fc_blocks_(L, B, &w.nb), fc_forward_block_, &w);
}

// The block's dhid = relu'(hid) * W2^T dy and dx = dy + W1^T dhid.
static void fc_backward_block_(void *ctx, int i) {
    FcWork *w = ctx;
    FfnConv *L = w->L;
    const int C = L->C, hk = L->hidden, b0 = i * w->nb, nb = w->B - b0 < w->nb ? w->B - b0 : w->nb;
    const long BHW = (long)w->B * L->HW, n = (long)nb * L->HW, o = (long)b0 * L->HW;
    const float *dy = w->dy + o, *hid = L->hid + o;
    float *dhid = L->dhid + o, *dx = w->dx + o;
    ML_SGEMM(CblasRowMajor, CblasTrans, CblasNoTrans, hk, (int)n, C, 1.0f, L->w2, hk, dy, (int)BHW, 0.0f, dhid,
             (int)BHW);
    for (int r = 0; r < hk; r++) {
        float *d = dhid + r * BHW;
        const float *a = hid + r * BHW;
        for (long j = 0; j < n; j++) d[j] = a[j] > 0.0f ? d[j] : 0.0f;
    }
    for (int c = 0; c < C; c++) memcpy(dx + c * BHW, dy + c * BHW, sizeof(float) * n);
    ML_SGEMM(CblasRowMajor, CblasTrans, CblasNoTrans, C, (int)n, hk, 1.0f, L->w1, C, dhid, (int)BHW, 1.0f, dx,
             (int)BHW);
}

void ffnconv_backward(FfnConv *L, float *dx, const float *dy, const float *x, int B) {
    const int C = L->C, hk = L->hidden;
    const long N = (long)B * L->HW;
    ML_SGEMM(CblasRowMajor, CblasNoTrans, CblasTrans, C, hk, (int)N, 1.0f, dy, (int)N, L->hid, (int)N, 1.0f, L->gw2,
             hk);
    mc_rowsum_acc_(L->gb2, dy, C, N);
    FcWork w = {.L = L, .x = x, .dy = dy, .dx = dx, .B = B};
    fc_run_(fc_blocks_(L, B, &w.nb), fc_backward_block_, &w);
    ML_SGEMM(CblasRowMajor, CblasNoTrans, CblasTrans, hk, C, (int)N, 1.0f, L->dhid, (int)N, x, (int)N, 1.0f, L->gw1, C);
    mc_rowsum_acc_(L->gb1, L->dhid, hk, N);
}
