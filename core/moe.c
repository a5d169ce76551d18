/* moe.c — Mixture-of-Experts head kernels (see moe.h for the maths, layout and contracts).
 *
 * Sections: config and parameter layout; init/free; shared helpers (softmax, top-k, capacity
 * order, expert MLP forward/backward on a contiguous row block); the three heads' forward and
 * backward; statistics; bias update; FLOP accounting; names. */
#include "core/moe.h"
#include "core/layers.h"

#include <cblas.h>
#include <float.h>
#include <math.h>
#include <string.h>
#include <strings.h>

// Loops smaller than this many float operations run on one thread.
#define MOE_PAR_MIN 16384

// ---------------------------------------------------------------- config and parameter layout

void moe_config_defaults(MoeConfig *c) {
    c->kind = HEAD_MOE;
    c->d = 256;
    c->E = 8;
    c->k = 2;
    c->h = 1024;
    c->cf = 1.25f;
    c->eval_cf = 0.0f;
    c->renorm = MOE_RENORM_AUTO;
    c->priority = PRIORITY_BATCH;
    c->bias_mode = BIAS_NONE;
    c->bias_rate = 1e-3f;
    c->noise = 1.0f;
    c->alpha = 0.01f;
    c->beta = 0.0f;
    c->slots = 0;
}

void moe_config_visit(const MoeConfig *h, CfgVisitor *v) {
    v->s(v, "kind", moe_head_name(h->kind));
    v->i(v, "d", h->d);
    v->i(v, "E", h->E);
    v->i(v, "k", h->k);
    v->i(v, "h", h->h);
    v->f(v, "cf", h->cf);
    v->f(v, "eval_cf", h->eval_cf);
    v->i(v, "renorm", h->renorm);
    v->s(v, "priority", moe_priority_name(h->priority));
    v->s(v, "bias_mode", moe_bias_name(h->bias_mode));
    v->f(v, "bias_rate", h->bias_rate);
    v->f(v, "noise", h->noise);
    v->f(v, "alpha", h->alpha);
    v->f(v, "beta", h->beta);
    v->i(v, "slots", h->slots);
}

int moe_slots(const MoeConfig *c, int Bmax) {
    if (c->kind != HEAD_SOFTMOE_BATCH) return 0;
    if (c->slots > 0) return c->slots;
    if (c->E < 1 || Bmax < 1) return 1;
    int P = (int)(((long)c->k * Bmax + c->E - 1) / c->E);
    return P < 1 ? 1 : P;
}

static size_t moe_router_rows_(const MoeConfig *c, int Bmax) {
    return c->kind == HEAD_SOFTMOE_BATCH ? (size_t)c->E * (size_t)moe_slots(c, Bmax) : (size_t)c->E;
}

// Every tensor starts on a 16-float (64-byte) boundary, as in the model's tensor table
// (core/model.c add_tensor): with E*h or S*d not a multiple of 16 (odd h, say) a packed layout
// would put w2/b2 elsewhere than the model's tensors.
static size_t moe_pad_(size_t n) { return (n + 15) & ~(size_t)15; }

size_t moe_param_count(const MoeConfig *c, int Bmax) {
    if (c->kind == HEAD_DENSE) return 0;
    size_t d = (size_t)c->d, h = (size_t)c->h, E = (size_t)c->E;
    return moe_pad_(moe_router_rows_(c, Bmax) * d) + moe_pad_(E * h * d) + moe_pad_(E * h) + moe_pad_(E * d * h) +
           moe_pad_(E * d);
}

void moe_params_point(MoeParams *p, float *base, const MoeConfig *c, int Bmax) {
    if (c->kind == HEAD_DENSE) {
        p->router = p->w1 = p->b1 = p->w2 = p->b2 = NULL;
        return;
    }
    size_t d = (size_t)c->d, h = (size_t)c->h, E = (size_t)c->E;
    p->router = base;
    p->w1 = p->router + moe_pad_(moe_router_rows_(c, Bmax) * d);
    p->b1 = p->w1 + moe_pad_(E * h * d);
    p->w2 = p->b1 + moe_pad_(E * h);
    p->b2 = p->w2 + moe_pad_(E * d * h);
}

// ---------------------------------------------------------------- init / free

void moe_free(MoeHead *m) {
    void *bufs[] = {m->first_choice, m->z,        m->p,  m->disp,  m->lse,    m->sel, m->gate,  m->row,
                    m->row_src,      m->row_rank, m->xg, m->hid,   m->yo,     m->dyo, m->dhid,  m->dxg,
                    m->dp,           m->dd,       m->dz, m->dgate, m->colbuf, m->key, m->order, m->order_tmp};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) ml_free(bufs[i]);
    memset(m, 0, sizeof *m);
}

static int moe_finite_(float v) { return isfinite(v) != 0; }

static ml_status moe_setup(MoeHead *m, const MoeConfig *c, int Bmax, int alloc);

ml_status moe_init(MoeHead *m, const MoeConfig *c, int Bmax) { return moe_setup(m, c, Bmax, 1); }
ml_status moe_init_layout(MoeHead *m, const MoeConfig *c, int Bmax) { return moe_setup(m, c, Bmax, 0); }

/* alloc = 0: checks and sizes only; ws_bytes says what the workspace would take */
static ml_status moe_setup(MoeHead *m, const MoeConfig *c, int Bmax, int alloc) {
    memset(m, 0, sizeof *m);
    if (c->kind != HEAD_MOE && c->kind != HEAD_SOFTMOE_BATCH && c->kind != HEAD_SOFTMOE_SAMPLE)
        return ml_fail(ML_ERR_ARG, "moe: head kind %d is not moe, softmoe-batch or softmoe-sample", (int)c->kind);
    if (c->E < 1 || c->E > MOE_MAX_EXPERTS)
        return ml_fail(ML_ERR_ARG, "moe: E = %d experts, must be 1..%d", c->E, MOE_MAX_EXPERTS);
    if (c->k < 1 || c->k > c->E) return ml_fail(ML_ERR_ARG, "moe: k = %d, must be 1..E (E = %d)", c->k, c->E);
    if (c->d < 1 || c->h < 1 || Bmax < 1)
        return ml_fail(ML_ERR_ARG, "moe: d = %d, h = %d, Bmax = %d must all be >= 1", c->d, c->h, Bmax);
    if ((unsigned)c->priority > PRIORITY_GATE || (unsigned)c->bias_mode > BIAS_LOGITS)
        return ml_fail(ML_ERR_ARG, "moe: invalid priority (%d) or bias mode (%d)", (int)c->priority, (int)c->bias_mode);
    if (!moe_finite_(c->cf) || !moe_finite_(c->eval_cf) || !moe_finite_(c->bias_rate) || !moe_finite_(c->noise) ||
        !moe_finite_(c->alpha) || !moe_finite_(c->beta))
        return ml_fail(ML_ERR_ARG, "moe: cf, eval_cf, bias_rate, noise, alpha and beta must be finite");
    if (c->noise < 0.0f || c->bias_rate < 0.0f)
        return ml_fail(ML_ERR_ARG, "moe: noise (%g) and bias_rate (%g) must be >= 0", (double)c->noise,
                       (double)c->bias_rate);
    if (c->slots < 0) return ml_fail(ML_ERR_ARG, "moe: slots = %d must be >= 0", c->slots);

    m->cfg = *c;
    m->Bmax = Bmax;
    m->P = moe_slots(c, Bmax);
    m->S = (int)moe_router_rows_(c, Bmax);
    switch (c->kind) {
    case HEAD_MOE: m->rows_max = c->k * Bmax; break;
    case HEAD_SOFTMOE_SAMPLE: m->rows_max = c->E * Bmax; break;
    default: m->rows_max = m->S; break;
    }
    size_t B = (size_t)Bmax, S = (size_t)m->S, R = (size_t)m->rows_max, k = (size_t)c->k;
    size_t d = (size_t)c->d, h = (size_t)c->h;
    int ok = 1;
#define MOE_ALLOC_(field, n)                                                                 \
    do {                                                                                     \
        m->ws_bytes += (double)(n) * sizeof *m->field;                                       \
        if (alloc) ok = ok && (m->field = ml_alloc((n) * sizeof *m->field)) != NULL;           \
    } while (0)
    MOE_ALLOC_(first_choice, B);
    MOE_ALLOC_(z, B * S);
    MOE_ALLOC_(p, B * S);
    MOE_ALLOC_(lse, B);
    MOE_ALLOC_(sel, B * k);
    MOE_ALLOC_(gate, B * k);
    MOE_ALLOC_(row, B * k);
    MOE_ALLOC_(row_src, R);
    MOE_ALLOC_(row_rank, R);
    if (c->kind != HEAD_SOFTMOE_SAMPLE) MOE_ALLOC_(xg, R * d);
    if (c->kind == HEAD_SOFTMOE_BATCH) {
        MOE_ALLOC_(disp, B * S);
        MOE_ALLOC_(dd, B * S);
    }
    MOE_ALLOC_(hid, R * h);
    MOE_ALLOC_(yo, R * d);
    MOE_ALLOC_(dyo, R * d);
    MOE_ALLOC_(dhid, R * h);
    MOE_ALLOC_(dxg, R * d);
    MOE_ALLOC_(dp, B * S);
    MOE_ALLOC_(dz, B * S);
    MOE_ALLOC_(dgate, B * k);
    MOE_ALLOC_(colbuf, 2 * S);
    MOE_ALLOC_(key, B);
    MOE_ALLOC_(order, B);
    MOE_ALLOC_(order_tmp, B);
#undef MOE_ALLOC_
    if (!ok) {
        moe_free(m);
        return ml_fail(ML_ERR_NOMEM, "moe: out of memory for the workspace (Bmax %d, rows %zu, h %zu)", Bmax, R, h);
    }
    return ML_OK;
}

// ---------------------------------------------------------------- shared helpers

// out (n) = softmax((z + bias)/tau) (bias may be NULL); returns nothing. Sums in double.
static void moe_softmax_(float *out, const float *z, const float *bias, float tau, int n) {
    float mx = -INFINITY;
    for (int i = 0; i < n; i++) {
        float u = (z[i] + (bias ? bias[i] : 0.0f)) / tau;
        out[i] = u;
        if (u > mx) mx = u;
    }
    double s = 0.0;
    for (int i = 0; i < n; i++) {
        out[i] = expf(out[i] - mx);
        s += out[i];
    }
    float inv = (float)(1.0 / s);
    for (int i = 0; i < n; i++) out[i] *= inv;
}

// logsumexp of z (n) in double.
static double moe_lse_(const float *z, int n) {
    double mx = -INFINITY;
    for (int i = 0; i < n; i++)
        if (z[i] > mx) mx = z[i];
    double s = 0.0;
    for (int i = 0; i < n; i++) s += exp((double)z[i] - mx);
    return mx + log(s);
}

// Top-k of score (E) into idx (k), descending, ties to the lower index (strict > while scanning
// upward). Deterministic for any input, NaN included.
static void moe_topk_(int *idx, const float *score, int E, int k) {
    uint64_t taken = 0;
    for (int r = 0; r < k; r++) {
        int best = -1;
        float bv = 0.0f;
        for (int e = 0; e < E; e++) {
            if (taken >> e & 1u) continue;
            if (best < 0 || score[e] > bv) {
                best = e;
                bv = score[e];
            }
        }
        idx[r] = best;
        taken |= (uint64_t)1 << best;
    }
}

// Stable merge sort of order[0..n) by descending key[order[i]] (ties keep the input order).
static void moe_sort_desc_(int *order, int *tmp, const float *key, int n) {
    for (int width = 1; width < n; width *= 2) {
        for (int lo = 0; lo < n; lo += 2 * width) {
            int mid = lo + width < n ? lo + width : n;
            int hi = lo + 2 * width < n ? lo + 2 * width : n;
            int i = lo, j = mid, o = lo;
            while (i < mid && j < hi) tmp[o++] = key[order[j]] > key[order[i]] ? order[j++] : order[i++];
            while (i < mid) tmp[o++] = order[i++];
            while (j < hi) tmp[o++] = order[j++];
        }
        memcpy(order, tmp, (size_t)n * sizeof *order);
    }
}

// Capacity for a batch of B in this mode (B when dropless).
static int moe_capacity_(const MoeConfig *c, int B, int training, int *dropless) {
    float cf = training ? c->cf : c->eval_cf;
    if (!(cf > 0.0f)) {
        *dropless = 1;
        return B;
    }
    double v = (double)cf * c->k * B / c->E;
    long C = (long)ceil(v * (1.0 - 1e-6));
    *dropless = 0;
    if (C < 1) C = 1;
    if (C > B) C = B;
    return (int)C;
}

// Expert e on n contiguous rows: hid (n, h) = relu(xin (n, d) W1_e^T + b1_e),
// yo (n, d) = hid W2_e^T + b2_e.
static void moe_expert_fwd_(const MoeConfig *c, const MoeParams *p, int e, const float *xin, int n, float *hid,
                            float *yo) {
    if (n <= 0) return;
    int d = c->d, h = c->h;
    const float *w1 = p->w1 + (size_t)e * h * d, *b1 = p->b1 + (size_t)e * h;
    const float *w2 = p->w2 + (size_t)e * d * h, *b2 = p->b2 + (size_t)e * d;
    ML_SGEMM(CblasRowMajor, CblasNoTrans, CblasTrans, n, h, d, 1.0f, xin, d, w1, d, 0.0f, hid, h);
#pragma omp parallel for if ((long)n * h > MOE_PAR_MIN)
    for (int i = 0; i < n; i++) {
        float *r = hid + (size_t)i * h;
        for (int j = 0; j < h; j++) {
            float v = r[j] + b1[j];
            r[j] = v > 0.0f ? v : 0.0f;
        }
    }
    ML_SGEMM(CblasRowMajor, CblasNoTrans, CblasTrans, n, d, h, 1.0f, hid, h, w2, h, 0.0f, yo, d);
#pragma omp parallel for if ((long)n * d > MOE_PAR_MIN)
    for (int i = 0; i < n; i++) {
        float *r = yo + (size_t)i * d;
        for (int j = 0; j < d; j++) r[j] += b2[j];
    }
}

// colsum (m) += sum over rows of a (n, m), rows in order (deterministic).
static void moe_colsum_acc_(float *colsum, const float *a, int n, int mcols) {
    for (int i = 0; i < n; i++) {
        const float *r = a + (size_t)i * mcols;
        for (int j = 0; j < mcols; j++) colsum[j] += r[j];
    }
}

// Backward of moe_expert_fwd_ for expert e on n rows, given dyo (n, d) = dL/dyo.
// Writes gW1, gb1, gW2, gb2 of expert e (not added to: see model.c overwrite); dhid (n, h) is scratch;
// dxin (n, d) = dhid W1_e + beta_dx * dxin.
static void moe_expert_bwd_(const MoeConfig *c, const MoeParams *p, MoeParams *g, int e, const float *xin, int n,
                            const float *hid, const float *dyo, float *dhid, float *dxin, float beta_dx) {
    int d = c->d, h = c->h;
    const float *w1 = p->w1 + (size_t)e * h * d, *w2 = p->w2 + (size_t)e * d * h;
    float *gw1 = g->w1 + (size_t)e * h * d, *gb1 = g->b1 + (size_t)e * h;
    float *gw2 = g->w2 + (size_t)e * d * h, *gb2 = g->b2 + (size_t)e * d;
    // the expert's gradients are written, not added to (model.c marks them overwrite: the
    // optimiser does not zero them); an expert without rows gets zeros
    memset(gb1, 0, sizeof(float) * (size_t)h);
    memset(gb2, 0, sizeof(float) * (size_t)d);
    if (n <= 0) {
        memset(gw1, 0, sizeof(float) * (size_t)h * d);
        memset(gw2, 0, sizeof(float) * (size_t)d * h);
        return;
    }
    // dW2_e (d, h) = dyo^T hid; db2_e = colsum(dyo)
    ML_SGEMM(CblasRowMajor, CblasTrans, CblasNoTrans, d, h, n, 1.0f, dyo, d, hid, h, 0.0f, gw2, h);
    moe_colsum_acc_(gb2, dyo, n, d);
    // dhid (n, h) = dyo W2_e, masked by the ReLU
    ML_SGEMM(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, h, d, 1.0f, dyo, d, w2, h, 0.0f, dhid, h);
    // the ReLU mask and db1_e += colsum(dhid) in one pass, split over column blocks (each column's
    // sum runs over the rows in order, as moe_colsum_acc_ does: the same values)
    relu_bias_backward(dhid, gb1, hid, n, h);
    // dW1_e (h, d) = dhid^T xin
    ML_SGEMM(CblasRowMajor, CblasTrans, CblasNoTrans, h, d, n, 1.0f, dhid, h, xin, d, 0.0f, gw1, d);
    // dxin (n, d) = dhid W1_e (+ beta dxin)
    ML_SGEMM(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, d, h, 1.0f, dhid, h, w1, d, beta_dx, dxin, d);
}

// Normalised entropy H(v / sum v) / log n of a non-negative vector (1 when n == 1, 0 if sum 0).
static double moe_norm_entropy_(const double *v, int n) {
    if (n <= 1) return 1.0;
    double s = 0.0, hsum = 0.0;
    for (int i = 0; i < n; i++) s += v[i];
    if (!(s > 0.0)) return 0.0;
    for (int i = 0; i < n; i++)
        if (v[i] > 0.0) {
            double q = v[i] / s;
            hsum -= q * log(q);
        }
    return hsum / log((double)n);
}

// Fills the count-based statistics from kept[] (already in st): load entropy, MaxVio.
// The largest of v[0..n) minus the second largest (0 when n < 2).
static double moe_margin_(const double *v, int n) {
    double a = -INFINITY, b = -INFINITY;
    for (int i = 0; i < n; i++) {
        if (v[i] > a) b = a, a = v[i];
        else if (v[i] > b) b = v[i];
    }
    return n < 2 ? 0.0 : a - b;
}

static void moe_stats_load_(MoeStepStats *st, int E) {
    double v[MOE_MAX_EXPERTS] = {0}, tot = 0.0, mx = 0.0;
    for (int e = 0; e < E; e++) {
        v[e] = st->kept[e];
        tot += v[e];
        if (v[e] > mx) mx = v[e];
    }
    st->load_entropy = moe_norm_entropy_(v, E);
    st->maxvio = tot > 0.0 ? mx / (tot / E) - 1.0 : 0.0;
}

// Router backward shared by moe and softmoe-sample: given dp (B, E) = dL/dp (gates), adds the
// alpha*L_aux term, backs through the softmax at temperature tau and the beta*L_z term, and
// writes dz (B, E) = dL/dz.
static void moe_router_bwd_(MoeHead *m, int B, const float *fsel /* (E) */) {
    const MoeConfig *c = &m->cfg;
    int E = c->E;
    float aux[MOE_MAX_EXPERTS];
    for (int e = 0; e < E; e++) aux[e] = c->alpha * (float)E * fsel[e] / (float)B;
    float zc = 2.0f * c->beta / (float)B;
    float inv_tau = 1.0f / m->tau;
#pragma omp parallel for if ((long)B * E > MOE_PAR_MIN)
    for (int b = 0; b < B; b++) {
        const float *pb = m->p + (size_t)b * E, *zb = m->z + (size_t)b * E;
        float *dpb = m->dp + (size_t)b * E, *dzb = m->dz + (size_t)b * E;
        double sdot = 0.0;
        for (int e = 0; e < E; e++) {
            dpb[e] += aux[e];
            sdot += (double)pb[e] * dpb[e];
        }
        float sd = (float)sdot;
        for (int e = 0; e < E; e++) dzb[e] = pb[e] * (dpb[e] - sd) * inv_tau;
        if (c->beta != 0.0f) {
            float l = (float)m->lse[b];
            for (int e = 0; e < E; e++) dzb[e] += zc * l * (float)exp((double)zb[e] - m->lse[b]);
        }
    }
}

// ---------------------------------------------------------------- moe (sparse top-k)

// Selection, gates and capacity for the moe head: fills sel, row, row_src, row_rank, off, nrows.
static void moe_route_(MoeHead *m, int B, float tau, int training, Rng *rng, int C) {
    const MoeConfig *c = &m->cfg;
    int E = c->E, k = c->k;
    int use_noise = training && c->noise > 0.0f;
    ML_ASSERT(!use_noise || rng != NULL);
    float score[MOE_MAX_EXPERTS];
    for (int b = 0; b < B; b++) {
        const float *zb = m->z + (size_t)b * E;
        for (int e = 0; e < E; e++) {
            float sb = c->bias_mode != BIAS_NONE ? m->bias[e] : 0.0f;
            score[e] = (zb[e] + sb) / tau;
            if (use_noise) score[e] += c->noise * rng_gumbel(rng);
        }
        moe_topk_(m->sel + (size_t)b * k, score, E, k);
    }
    // priority order inside one rank
    for (int b = 0; b < B; b++) m->order[b] = b;
    if (c->priority == PRIORITY_GATE) {
        for (int b = 0; b < B; b++) m->key[b] = m->p[(size_t)b * E + m->sel[(size_t)b * k]];
        moe_sort_desc_(m->order, m->order_tmp, m->key, B);
    }
    // k-major slot assignment
    int count[MOE_MAX_EXPERTS] = {0};
    for (int r = 0; r < k; r++)
        for (int i = 0; i < B; i++) {
            int b = m->order[i];
            int e = m->sel[(size_t)b * k + r];
            m->row[(size_t)b * k + r] = count[e] < C ? count[e]++ : -1;
        }
    // rows grouped by expert, in slot order: row = off[e] + slot
    m->off[0] = 0;
    for (int e = 0; e < E; e++) m->off[e + 1] = m->off[e] + count[e];
    m->nrows = m->off[E];
    for (int b = 0; b < B; b++)
        for (int r = 0; r < k; r++) {
            int *rw = &m->row[(size_t)b * k + r];
            if (*rw < 0) continue;
            *rw += m->off[m->sel[(size_t)b * k + r]];
            m->row_src[*rw] = b;
            m->row_rank[*rw] = r;
        }
}

// Gates, selection, capacity and the selection statistics of the moe head (no experts): softmax,
// route (or the frozen selection), renormalised gates, first_choice, demand/kept/drops/confidence,
// mean gates and L_aux. z must hold this batch's logits.
static void moe_route_sparse_(MoeHead *m, int B, float tau, int training, Rng *rng) {
    const MoeConfig *c = &m->cfg;
    int E = c->E, k = c->k;
    int dropless;
    int C = moe_capacity_(c, B, training, &dropless);
    int frozen = m->freeze_selection && m->B == B; // m->B == 0 before the first forward
    const float *bg = c->bias_mode == BIAS_LOGITS ? m->bias : NULL;
    for (int b = 0; b < B; b++) moe_softmax_(m->p + (size_t)b * E, m->z + (size_t)b * E, bg, tau, E);
    if (!frozen) {
        moe_route_(m, B, tau, training, rng, C);
    } else { // selection, keep mask and capacity of the previous forward
        C = m->stats.capacity;
        dropless = m->stats.dropless;
    }
    // gates of the selected experts (renormalised before capacity)
    const int renorm = moe_renorm_on(c);
    for (int b = 0; b < B; b++) {
        const float *pb = m->p + (size_t)b * E;
        const int *sb = m->sel + (size_t)b * k;
        float *gb = m->gate + (size_t)b * k;
        double s = 0.0;
        for (int r = 0; r < k; r++) s += pb[sb[r]];
        if (renorm && !(s >= FLT_MIN)) {
            for (int r = 0; r < k; r++) gb[r] = 1.0f / (float)k;
        } else {
            float inv = renorm ? (float)(1.0 / s) : 1.0f;
            for (int r = 0; r < k; r++) gb[r] = pb[sb[r]] * inv;
        }
        m->first_choice[b] = sb[0];
    }
    // statistics and losses
    MoeStepStats *st = &m->stats;
    memset(st->demand, 0, sizeof st->demand);
    memset(st->kept, 0, sizeof st->kept);
    int dropped = 0, empty = 0;
    double conf = 0.0;
    for (int b = 0; b < B; b++) {
        int nk = 0;
        for (int r = 0; r < k; r++) {
            int e = m->sel[(size_t)b * k + r];
            st->demand[e]++;
            if (m->row[(size_t)b * k + r] >= 0) {
                st->kept[e]++;
                nk++;
                conf += m->gate[(size_t)b * k + r];
            } else {
                dropped++;
            }
        }
        empty += nk == 0;
    }
    int kept_total = B * k - dropped;
    st->capacity = C;
    st->dropless = dropless;
    st->drop_frac = (double)dropped / ((double)B * k);
    st->no_expert_frac = (double)empty / B;
    st->confidence = kept_total > 0 ? conf / kept_total : 0.0;
    st->pairs_per_sample = (double)kept_total / B;
    double laux = 0.0;
    for (int e = 0; e < E; e++) {
        double pe = 0.0;
        for (int b = 0; b < B; b++) pe += m->p[(size_t)b * E + e];
        pe /= B;
        st->mean_gate[e] = (float)pe;
        laux += ((double)st->demand[e] / B) * pe;
    }
    st->l_aux = E * laux;
}

// The experts of the moe head as items for ml_par_items: each expert's rows, hidden units and
// gradients are its own, so they run side by side.
typedef struct {
    MoeHead *m;
    const MoeParams *p;
    MoeParams *g;
} MoeExpertsCtx_;

static void moe_expert_fwd_item_(void *vctx, int e) {
    const MoeExpertsCtx_ *x = vctx;
    MoeHead *m = x->m;
    const int d = m->cfg.d, h = m->cfg.h, o = m->off[e], n = m->off[e + 1] - o;
    moe_expert_fwd_(&m->cfg, x->p, e, m->xg + (size_t)o * d, n, m->hid + (size_t)o * h, m->yo + (size_t)o * d);
}

static void moe_expert_bwd_item_(void *vctx, int e) {
    const MoeExpertsCtx_ *x = vctx;
    MoeHead *m = x->m;
    const int d = m->cfg.d, h = m->cfg.h, o = m->off[e], n = m->off[e + 1] - o;
    moe_expert_bwd_(&m->cfg, x->p, x->g, e, m->xg + (size_t)o * d, n, m->hid + (size_t)o * h, m->dyo + (size_t)o * d,
                    m->dhid + (size_t)o * h, m->dxg + (size_t)o * d, 0.0f);
}

// Experts by decreasing row count (ties by index): the largest are handed out first.
static void moe_size_order_(const MoeHead *m, int *order) {
    const int E = m->cfg.E;
    for (int e = 0; e < E; e++) {
        int i = e;
        const int n = m->off[e + 1] - m->off[e];
        while (i > 0 && m->off[order[i - 1] + 1] - m->off[order[i - 1]] < n) {
            order[i] = order[i - 1];
            i--;
        }
        order[i] = e;
    }
}

// fn(ctx, e) for every expert: side by side, one thread each and the largest first, when there
// are enough of them for the threads (ml_par_items_worth); otherwise in index order.
static void moe_run_experts_(MoeExpertsCtx_ *ctx, void (*fn)(void *, int)) {
    const int E = ctx->m->cfg.E;
    if (ml_par_items_worth(E)) {
        int order[MOE_MAX_EXPERTS];
        moe_size_order_(ctx->m, order);
        ml_par_items(E, order, fn, ctx);
    } else {
        for (int e = 0; e < E; e++) fn(ctx, e);
    }
}

// The moe head's experts on the routed rows: gather, expert MLPs, gated combine.
static void moe_experts_sparse_(MoeHead *m, float *y, const float *x, const MoeParams *p, int B) {
    const MoeConfig *c = &m->cfg;
    int k = c->k, d = c->d;
    int nrows = m->nrows;
#pragma omp parallel for if ((long)nrows * d > MOE_PAR_MIN)
    for (int j = 0; j < nrows; j++)
        memcpy(m->xg + (size_t)j * d, x + (size_t)m->row_src[j] * d, (size_t)d * sizeof(float));
    MoeExpertsCtx_ ctx = {m, p, NULL};
    moe_run_experts_(&ctx, moe_expert_fwd_item_);
#pragma omp parallel for if ((long)B * d * k > MOE_PAR_MIN)
    for (int b = 0; b < B; b++) {
        float *yb = y + (size_t)b * d;
        memcpy(yb, x + (size_t)b * d, (size_t)d * sizeof(float));
        for (int r = 0; r < k; r++) {
            int j = m->row[(size_t)b * k + r];
            if (j < 0) continue;
            float gv = m->gate[(size_t)b * k + r];
            const float *yj = m->yo + (size_t)j * d;
            for (int i = 0; i < d; i++) yb[i] += gv * yj[i];
        }
    }
}

static void moe_backward_sparse_(MoeHead *m, float *dx, MoeParams *g, const float *dy, const float *x,
                                 const MoeParams *p, int B) {
    const MoeConfig *c = &m->cfg;
    int k = c->k, d = c->d;
    int nrows = m->nrows;
    // per gathered row: dyo = gate * dy[b], dgate = dy[b] . yo
    memset(m->dgate, 0, (size_t)B * k * sizeof(float));
#pragma omp parallel for if ((long)nrows * d > MOE_PAR_MIN)
    for (int j = 0; j < nrows; j++) {
        int b = m->row_src[j], r = m->row_rank[j];
        float gv = m->gate[(size_t)b * k + r];
        const float *dyb = dy + (size_t)b * d, *yj = m->yo + (size_t)j * d;
        float *dj = m->dyo + (size_t)j * d;
        float s = 0.0f;
        for (int i = 0; i < d; i++) {
            dj[i] = gv * dyb[i];
            s += dyb[i] * yj[i];
        }
        m->dgate[(size_t)b * k + r] = s;
    }
    MoeExpertsCtx_ ctx = {m, p, g};
    moe_run_experts_(&ctx, moe_expert_bwd_item_);
    // dx = dy (residual) + scattered expert input gradients, ranks in order
#pragma omp parallel for if ((long)B * d * k > MOE_PAR_MIN)
    for (int b = 0; b < B; b++) {
        float *dxb = dx + (size_t)b * d;
        memcpy(dxb, dy + (size_t)b * d, (size_t)d * sizeof(float));
        for (int r = 0; r < k; r++) {
            int j = m->row[(size_t)b * k + r];
            if (j < 0) continue;
            const float *gj = m->dxg + (size_t)j * d;
            for (int i = 0; i < d; i++) dxb[i] += gj[i];
        }
    }
    moe_route_backward(m, dx, g->router, x, p->router, B);
}

// ---------------------------------------------------------------- softmoe-sample (dense over experts)

static void moe_forward_sample_(MoeHead *m, float *y, const float *x, const MoeParams *p, int B, float tau) {
    const MoeConfig *c = &m->cfg;
    int E = c->E, d = c->d, h = c->h;
    const float *bg = c->bias_mode == BIAS_LOGITS ? m->bias : NULL;
    for (int b = 0; b < B; b++) moe_softmax_(m->p + (size_t)b * E, m->z + (size_t)b * E, bg, tau, E);
    for (int e = 0; e < E; e++) moe_expert_fwd_(c, p, e, x, B, m->hid + (size_t)e * B * h, m->yo + (size_t)e * B * d);
#pragma omp parallel for if ((long)B * d * E > MOE_PAR_MIN)
    for (int b = 0; b < B; b++) {
        float *yb = y + (size_t)b * d;
        memcpy(yb, x + (size_t)b * d, (size_t)d * sizeof(float));
        for (int e = 0; e < E; e++) {
            float w = m->p[(size_t)b * E + e];
            const float *ye = m->yo + ((size_t)e * B + b) * d;
            for (int i = 0; i < d; i++) yb[i] += w * ye[i];
        }
    }
    // statistics: argmax counts, L_aux with f = argmax fraction (frozen: previous argmax)
    MoeStepStats *st = &m->stats;
    int frozen = m->freeze_selection && m->B == B; // m->B == 0 before the first forward
    memset(st->demand, 0, sizeof st->demand);
    memset(st->kept, 0, sizeof st->kept);
    double conf = 0.0, laux = 0.0;
    for (int b = 0; b < B; b++) {
        int a = m->first_choice[b];
        if (!frozen) moe_topk_(&a, m->p + (size_t)b * E, E, 1);
        m->first_choice[b] = a;
        st->demand[a]++;
        st->kept[a]++;
        conf += m->p[(size_t)b * E + a];
    }
    for (int e = 0; e < E; e++) {
        double pe = 0.0;
        for (int b = 0; b < B; b++) pe += m->p[(size_t)b * E + e];
        pe /= B;
        st->mean_gate[e] = (float)pe;
        laux += ((double)st->demand[e] / B) * pe;
    }
    st->l_aux = E * laux;
    st->capacity = B;
    st->dropless = 1;
    st->drop_frac = 0.0;
    st->no_expert_frac = 0.0;
    st->confidence = conf / B;
    st->pairs_per_sample = E;
}

static void moe_backward_sample_(MoeHead *m, float *dx, MoeParams *g, const float *dy, const float *x,
                                 const MoeParams *p, int B) {
    const MoeConfig *c = &m->cfg;
    int E = c->E, d = c->d, h = c->h;
    memcpy(dx, dy, (size_t)B * d * sizeof(float));
#pragma omp parallel for if ((long)B * d * E > MOE_PAR_MIN)
    for (int b = 0; b < B; b++) {
        const float *dyb = dy + (size_t)b * d;
        for (int e = 0; e < E; e++) {
            float w = m->p[(size_t)b * E + e];
            const float *ye = m->yo + ((size_t)e * B + b) * d;
            float *de = m->dyo + ((size_t)e * B + b) * d;
            float s = 0.0f;
            for (int i = 0; i < d; i++) {
                de[i] = w * dyb[i];
                s += dyb[i] * ye[i];
            }
            m->dp[(size_t)b * E + e] = s;
        }
    }
    for (int e = 0; e < E; e++)
        moe_expert_bwd_(c, p, g, e, x, B, m->hid + (size_t)e * B * h, m->dyo + (size_t)e * B * d, m->dhid, dx, 1.0f);
    float fsel[MOE_MAX_EXPERTS];
    for (int e = 0; e < E; e++) fsel[e] = (float)m->stats.demand[e] / (float)B;
    moe_router_bwd_(m, B, fsel);
    ML_SGEMM(CblasRowMajor, CblasTrans, CblasNoTrans, E, d, B, 1.0f, m->dz, E, x, d, 1.0f, g->router, d);
    ML_SGEMM(CblasRowMajor, CblasNoTrans, CblasNoTrans, B, d, E, 1.0f, m->dz, E, p->router, d, 1.0f, dx, d);
}

// ---------------------------------------------------------------- softmoe-batch (Puigcerver et al.)

static void moe_forward_batch_(MoeHead *m, float *y, const float *x, const MoeParams *p, int B, float tau) {
    const MoeConfig *c = &m->cfg;
    int E = c->E, d = c->d, h = c->h, S = m->S, P = m->P;
    // combine Cw: softmax over the S slots of each sample
#pragma omp parallel for if ((long)B * S > MOE_PAR_MIN)
    for (int b = 0; b < B; b++) moe_softmax_(m->p + (size_t)b * S, m->z + (size_t)b * S, NULL, tau, S);
    // dispatch D: softmax over the batch of each slot column
    float *cmax = m->colbuf, *csum = m->colbuf + S;
    for (int s = 0; s < S; s++) {
        cmax[s] = -INFINITY;
        csum[s] = 0.0f;
    }
    for (int b = 0; b < B; b++) {
        const float *zb = m->z + (size_t)b * S;
        for (int s = 0; s < S; s++) {
            float u = zb[s] / tau;
            if (u > cmax[s]) cmax[s] = u;
        }
    }
    for (int b = 0; b < B; b++) {
        const float *zb = m->z + (size_t)b * S;
        float *db = m->disp + (size_t)b * S;
        for (int s = 0; s < S; s++) {
            db[s] = expf(zb[s] / tau - cmax[s]);
            csum[s] += db[s];
        }
    }
    for (int s = 0; s < S; s++) csum[s] = 1.0f / csum[s];
    for (int b = 0; b < B; b++) {
        float *db = m->disp + (size_t)b * S;
        for (int s = 0; s < S; s++) db[s] *= csum[s];
    }
    // slot inputs X~ (S, d) = D^T x; experts on their P slots; y = x + Cw Y~
    ML_SGEMM(CblasRowMajor, CblasTrans, CblasNoTrans, S, d, B, 1.0f, m->disp, S, x, d, 0.0f, m->xg, d);
    for (int e = 0; e < E; e++)
        moe_expert_fwd_(c, p, e, m->xg + (size_t)e * P * d, P, m->hid + (size_t)e * P * h, m->yo + (size_t)e * P * d);
    memcpy(y, x, (size_t)B * d * sizeof(float));
    ML_SGEMM(CblasRowMajor, CblasNoTrans, CblasNoTrans, B, d, S, 1.0f, m->p, S, m->yo, d, 1.0f, y, d);
    // statistics on per-expert weights W_be = sum of the combine weights of e's slots
    MoeStepStats *st = &m->stats;
    memset(st->demand, 0, sizeof st->demand);
    memset(st->kept, 0, sizeof st->kept);
    double conf = 0.0, hsum = 0.0, msum = 0.0, mg[MOE_MAX_EXPERTS] = {0};
    for (int b = 0; b < B; b++) {
        float w[MOE_MAX_EXPERTS];
        double wd[MOE_MAX_EXPERTS];
        const float *cb = m->p + (size_t)b * S;
        for (int e = 0; e < E; e++) {
            double s = 0.0;
            for (int q = 0; q < P; q++) s += cb[e * P + q];
            w[e] = (float)s;
            wd[e] = s;
            mg[e] += s;
        }
        int a;
        moe_topk_(&a, w, E, 1);
        m->first_choice[b] = a;
        st->demand[a]++;
        st->kept[a]++;
        conf += wd[a];
        hsum += moe_norm_entropy_(wd, E);
        msum += moe_margin_(wd, E);
    }
    for (int e = 0; e < E; e++) st->mean_gate[e] = (float)(mg[e] / B);
    st->gate_entropy = hsum / B;
    st->gate_margin = msum / B;
    st->l_aux = 0.0;
    st->capacity = P;
    st->dropless = 1;
    st->drop_frac = 0.0;
    st->no_expert_frac = 0.0;
    st->confidence = conf / B;
    st->pairs_per_sample = (double)S / B;
}

static void moe_backward_batch_(MoeHead *m, float *dx, MoeParams *g, const float *dy, const float *x,
                                const MoeParams *p, int B) {
    const MoeConfig *c = &m->cfg;
    int E = c->E, d = c->d, h = c->h, S = m->S, P = m->P;
    // dCw (B, S) = dy Y~^T; dY~ (S, d) = Cw^T dy
    ML_SGEMM(CblasRowMajor, CblasNoTrans, CblasTrans, B, S, d, 1.0f, dy, d, m->yo, d, 0.0f, m->dp, S);
    ML_SGEMM(CblasRowMajor, CblasTrans, CblasNoTrans, S, d, B, 1.0f, m->p, S, dy, d, 0.0f, m->dyo, d);
    for (int e = 0; e < E; e++)
        moe_expert_bwd_(c, p, g, e, m->xg + (size_t)e * P * d, P, m->hid + (size_t)e * P * h,
                        m->dyo + (size_t)e * P * d, m->dhid + (size_t)e * P * h, m->dxg + (size_t)e * P * d, 0.0f);
    // dD (B, S) = x dX~^T; dx = dy + D dX~
    ML_SGEMM(CblasRowMajor, CblasNoTrans, CblasTrans, B, S, d, 1.0f, x, d, m->dxg, d, 0.0f, m->dd, S);
    memcpy(dx, dy, (size_t)B * d * sizeof(float));
    ML_SGEMM(CblasRowMajor, CblasNoTrans, CblasNoTrans, B, d, S, 1.0f, m->disp, S, m->dxg, d, 1.0f, dx, d);
    // logits: row-softmax backward (combine) + column-softmax backward (dispatch), then / tau
    float *cdot = m->colbuf;
    for (int s = 0; s < S; s++) cdot[s] = 0.0f;
    for (int b = 0; b < B; b++) {
        const float *db = m->disp + (size_t)b * S, *ddb = m->dd + (size_t)b * S;
        for (int s = 0; s < S; s++) cdot[s] += db[s] * ddb[s];
    }
    float inv_tau = 1.0f / m->tau, zc = 2.0f * c->beta / (float)B;
#pragma omp parallel for if ((long)B * S > MOE_PAR_MIN)
    for (int b = 0; b < B; b++) {
        const float *cb = m->p + (size_t)b * S, *dcb = m->dp + (size_t)b * S;
        const float *db = m->disp + (size_t)b * S, *ddb = m->dd + (size_t)b * S;
        const float *zb = m->z + (size_t)b * S;
        float *dzb = m->dz + (size_t)b * S;
        double rs = 0.0;
        for (int s = 0; s < S; s++) rs += (double)cb[s] * dcb[s];
        float r = (float)rs;
        for (int s = 0; s < S; s++) dzb[s] = (cb[s] * (dcb[s] - r) + db[s] * (ddb[s] - cdot[s])) * inv_tau;
        if (c->beta != 0.0f) {
            float l = (float)m->lse[b];
            for (int s = 0; s < S; s++) dzb[s] += zc * l * (float)exp((double)zb[s] - m->lse[b]);
        }
    }
    ML_SGEMM(CblasRowMajor, CblasTrans, CblasNoTrans, S, d, B, 1.0f, m->dz, S, x, d, 1.0f, g->router, d);
    ML_SGEMM(CblasRowMajor, CblasNoTrans, CblasNoTrans, B, d, S, 1.0f, m->dz, S, p->router, d, 1.0f, dx, d);
}

// ---------------------------------------------------------------- public forward / backward

// z (B, S) = x W_r^T and the logsumexp of each row (for L_z); returns sum_b lse_b^2.
static double moe_logits_(MoeHead *m, const float *x, const float *router, int B) {
    int S = m->S, d = m->cfg.d;
    ML_SGEMM(CblasRowMajor, CblasNoTrans, CblasTrans, B, S, d, 1.0f, x, d, router, d, 0.0f, m->z, S);
    double lz = 0.0;
    for (int b = 0; b < B; b++) {
        m->lse[b] = moe_lse_(m->z + (size_t)b * S, S);
        lz += m->lse[b] * m->lse[b];
    }
    return lz;
}

// The statistics every head shares (gate entropy, load, first-choice and clean-router shares),
// the scalars of this forward, and what the backward and the bias update need.
static void moe_stats_finish_(MoeHead *m, int B, float tau, int training, double lz) {
    const MoeConfig *c = &m->cfg;
    int E = c->E;
    MoeStepStats *st = &m->stats;
    if (c->kind != HEAD_SOFTMOE_BATCH) {
        double hsum = 0.0, msum = 0.0, v[MOE_MAX_EXPERTS];
        for (int b = 0; b < B; b++) {
            for (int e = 0; e < E; e++) v[e] = m->p[(size_t)b * E + e];
            hsum += moe_norm_entropy_(v, E);
            msum += moe_margin_(v, E);
        }
        st->gate_entropy = hsum / B;
        st->gate_margin = msum / B;
    }
    moe_stats_load_(st, E);
    {
        int fc[MOE_MAX_EXPERTS] = {0}, mx = 0;
        for (int b = 0; b < B; b++)
            if (m->first_choice[b] >= 0 && m->first_choice[b] < E) fc[m->first_choice[b]]++;
        for (int e = 0; e < E; e++)
            if (fc[e] > mx) mx = fc[e];
        st->first_share = (double)mx / B;
        memcpy(st->first, fc, sizeof st->first);
        /* the clean router: the same batch's logits with no noise (soft heads have none, their
         * first choice is already the largest weight). One pass: counts and agreement. */
        int cc[MOE_MAX_EXPERTS] = {0}, cmx = 0, agree = 0, dead = 0;
        const int biased = c->bias_mode != BIAS_NONE;
        for (int b = 0; b < B; b++) {
            int best = m->first_choice[b];
            if (c->kind == HEAD_MOE) {
                const float *zb = m->z + (size_t)b * E;
                best = 0;
                for (int e = 1; e < E; e++) {
                    const float bb = biased ? m->bias[best] : 0.0f, be = biased ? m->bias[e] : 0.0f;
                    if (zb[e] + be > zb[best] + bb) best = e;
                }
            }
            if (best >= 0 && best < E) cc[best]++;
            agree += best == m->first_choice[b];
        }
        double cv[MOE_MAX_EXPERTS];
        for (int e = 0; e < E; e++) {
            if (cc[e] > cmx) cmx = cc[e];
            dead += cc[e] == 0;
            cv[e] = cc[e];
        }
        st->clean_first_share = (double)cmx / B;
        st->clean_load_entropy = moe_norm_entropy_(cv, E);
        st->clean_dead = dead;
        memcpy(st->clean_first, cc, sizeof st->clean_first);
        st->first_agree = (double)agree / B;
    }
    st->B = B;
    st->E = E;
    st->k = c->k;
    st->training = training != 0;
    st->tau = tau;
    st->l_z = lz / B;
    for (int e = 0; e < E; e++) st->bias[e] = m->bias[e];
    if (training) {
        memcpy(m->demand_train, st->demand, sizeof m->demand_train);
        m->has_train_counts = 1;
    }
    m->B = B;
    m->tau = tau;
    m->training = training != 0;
}

void moe_forward(MoeHead *m, float *y, const float *x, const MoeParams *p, int B, float tau, int training, Rng *rng) {
    const MoeConfig *c = &m->cfg;
    ML_ASSERT(B >= 1 && B <= m->Bmax);
    ML_ASSERT(tau > 0.0f && isfinite(tau));
    const double lz = moe_logits_(m, x, p->router, B);
    switch (c->kind) {
    case HEAD_MOE:
        moe_route_sparse_(m, B, tau, training, rng);
        moe_experts_sparse_(m, y, x, p, B);
        break;
    case HEAD_SOFTMOE_SAMPLE: moe_forward_sample_(m, y, x, p, B, tau); break;
    case HEAD_SOFTMOE_BATCH: moe_forward_batch_(m, y, x, p, B, tau); break;
    default: ML_ASSERT(0 && "moe_forward: not an moe head");
    }
    moe_stats_finish_(m, B, tau, training, lz);
}

void moe_route_forward(MoeHead *m, const float *x, const float *router, int B, float tau, int training, Rng *rng) {
    ML_ASSERT(m->cfg.kind == HEAD_MOE);
    ML_ASSERT(B >= 1 && B <= m->Bmax);
    ML_ASSERT(tau > 0.0f && isfinite(tau));
    const double lz = moe_logits_(m, x, router, B);
    moe_route_sparse_(m, B, tau, training, rng);
    moe_stats_finish_(m, B, tau, training, lz);
}

void moe_route_backward(MoeHead *m, float *dx, float *grouter, const float *x, const float *router, int B) {
    const MoeConfig *c = &m->cfg;
    ML_ASSERT(c->kind == HEAD_MOE && B == m->B && B >= 1);
    int E = c->E, k = c->k, d = c->d;
    // gates -> softmax probabilities p (through the renormalisation)
    const int renorm = moe_renorm_on(c);
    memset(m->dp, 0, (size_t)B * E * sizeof(float));
    for (int b = 0; b < B; b++) {
        const float *pb = m->p + (size_t)b * E, *gb = m->gate + (size_t)b * k;
        const float *dgb = m->dgate + (size_t)b * k;
        const int *sb = m->sel + (size_t)b * k;
        float *dpb = m->dp + (size_t)b * E;
        if (!renorm) {
            for (int r = 0; r < k; r++) dpb[sb[r]] += dgb[r];
            continue;
        }
        double s = 0.0, cd = 0.0;
        for (int r = 0; r < k; r++) {
            s += pb[sb[r]];
            cd += (double)dgb[r] * gb[r];
        }
        if (!(s >= FLT_MIN)) continue; // gates were set to 1/k: constant
        for (int r = 0; r < k; r++) dpb[sb[r]] += (float)((dgb[r] - cd) / s);
    }
    float fsel[MOE_MAX_EXPERTS];
    for (int e = 0; e < E; e++) fsel[e] = (float)m->stats.demand[e] / (float)B;
    moe_router_bwd_(m, B, fsel);
    ML_SGEMM(CblasRowMajor, CblasTrans, CblasNoTrans, E, d, B, 1.0f, m->dz, E, x, d, 1.0f, grouter, d);
    ML_SGEMM(CblasRowMajor, CblasNoTrans, CblasNoTrans, B, d, E, 1.0f, m->dz, E, router, d, 1.0f, dx, d);
}

void moe_backward(MoeHead *m, float *dx, MoeParams *g, const float *dy, const float *x, const MoeParams *p, int B) {
    ML_ASSERT(B == m->B && B >= 1);
    switch (m->cfg.kind) {
    case HEAD_MOE: moe_backward_sparse_(m, dx, g, dy, x, p, B); break;
    case HEAD_SOFTMOE_SAMPLE: moe_backward_sample_(m, dx, g, dy, x, p, B); break;
    case HEAD_SOFTMOE_BATCH: moe_backward_batch_(m, dx, g, dy, x, p, B); break;
    default: ML_ASSERT(0 && "moe_backward: not an moe head");
    }
}

// ---------------------------------------------------------------- bias update

void moe_update_bias(MoeHead *m) {
    const MoeConfig *c = &m->cfg;
    if (c->bias_mode == BIAS_NONE || !(c->bias_rate > 0.0f) || !m->has_train_counts) return;
    if (c->kind == HEAD_SOFTMOE_BATCH || (c->kind == HEAD_SOFTMOE_SAMPLE && c->bias_mode != BIAS_LOGITS)) return;
    double mean = 0.0;
    for (int e = 0; e < c->E; e++) mean += m->demand_train[e];
    mean /= c->E;
    for (int e = 0; e < c->E; e++) {
        double diff = mean - m->demand_train[e];
        if (diff > 0.0) m->bias[e] += c->bias_rate;
        else if (diff < 0.0) m->bias[e] -= c->bias_rate;
    }
}

// ---------------------------------------------------------------- FLOP accounting

int moe_renorm_on(const MoeConfig *c) { return c->renorm == MOE_RENORM_AUTO ? c->k >= 2 : c->renorm != MOE_RENORM_OFF; }

const char *moe_renorm_name(int renorm) {
    return renorm == MOE_RENORM_OFF ? "off" : renorm == MOE_RENORM_ON ? "on" : renorm == MOE_RENORM_AUTO ? "auto" : NULL;
}

ml_status moe_parse_renorm(const char *s, int *renorm) {
    for (int v = MOE_RENORM_OFF; v <= MOE_RENORM_AUTO; v++)
        if (s && !strcmp(s, moe_renorm_name(v))) {
            *renorm = v;
            return ML_OK;
        }
    return ml_fail(ML_ERR_ARG, "--renorm: '%s' is not auto, on or off", s ? s : "");
}

int moe_k1_blind_router(const MoeConfig *c) { return c->kind == HEAD_MOE && c->k == 1 && moe_renorm_on(c); }

double moe_expert_flops(const MoeConfig *c) { return c->kind == HEAD_DENSE ? 0.0 : 4.0 * c->d * c->h; }

double moe_router_flops(const MoeConfig *c, int B) {
    switch (c->kind) {
    case HEAD_MOE:
    case HEAD_SOFTMOE_SAMPLE: return 2.0 * c->d * c->E;
    case HEAD_SOFTMOE_BATCH: return 6.0 * c->d * (double)c->E * moe_slots(c, B);
    default: return 0.0;
    }
}

double moe_nominal_pairs(const MoeConfig *c, int B) {
    switch (c->kind) {
    case HEAD_MOE: return c->k;
    case HEAD_SOFTMOE_SAMPLE: return c->E;
    case HEAD_SOFTMOE_BATCH: return B > 0 ? (double)c->E * moe_slots(c, B) / B : 0.0;
    default: return 0.0;
    }
}

double moe_rho_realized(const MoeConfig *c, double backbone_flops, double classifier_flops, int B,
                        double pairs_per_sample) {
    double routed = pairs_per_sample * moe_expert_flops(c);
    double total = backbone_flops + moe_router_flops(c, B) + routed + classifier_flops;
    return total > 0.0 ? routed / total : 0.0;
}

double moe_rho_nominal(const MoeConfig *c, double backbone_flops, double classifier_flops, int B) {
    return moe_rho_realized(c, backbone_flops, classifier_flops, B, moe_nominal_pairs(c, B));
}

// ---------------------------------------------------------------- names

static const char *const moe_head_names[] = {"dense", "moe", "softmoe-batch", "softmoe-sample"};
static const char *const moe_bias_names[] = {"none", "select", "logits"};
static const char *const moe_prio_names[] = {"batch", "gate"};

static int moe_lookup_(const char *const *names, int n, const char *s) {
    for (int i = 0; s && i < n; i++)
        if (strcasecmp(s, names[i]) == 0) return i;
    return -1;
}

const char *moe_head_name(HeadKind k) { return (unsigned)k < 4 ? moe_head_names[k] : "?"; }

ml_status moe_parse_head(const char *s, HeadKind *k) {
    int i = moe_lookup_(moe_head_names, 4, s);
    if (i < 0)
        return ml_fail(ML_ERR_ARG, "unknown head '%s' (dense, moe, softmoe-batch, softmoe-sample)", s ? s : "(null)");
    *k = (HeadKind)i;
    return ML_OK;
}

const char *moe_bias_name(BiasMode b) { return (unsigned)b < 3 ? moe_bias_names[b] : "?"; }

ml_status moe_parse_bias(const char *s, BiasMode *b) {
    int i = moe_lookup_(moe_bias_names, 3, s);
    if (i < 0) return ml_fail(ML_ERR_ARG, "unknown bias mode '%s' (none, select, logits)", s ? s : "(null)");
    *b = (BiasMode)i;
    return ML_OK;
}

const char *moe_priority_name(Priority p) { return (unsigned)p < 2 ? moe_prio_names[p] : "?"; }

ml_status moe_parse_priority(const char *s, Priority *p) {
    int i = moe_lookup_(moe_prio_names, 2, s);
    if (i < 0) return ml_fail(ML_ERR_ARG, "unknown priority '%s' (batch, gate)", s ? s : "(null)");
    *p = (Priority)i;
    return ML_OK;
}

// ---------------------------------------------------------------- data parallelism

// How the ranks' values of a MOE_STEP_SCALARS row travel: put (the value to sum over the ranks)
// and get (the whole batch's value from the sum). MS_OWN and MS_DERIVED rows travel not: the
// former are the same on every rank, the latter are recomputed from the summed counts below.
#define MS_PUT_MS_MEAN(m) dist_put(p, st->m * B);
#define MS_PUT_MS_FRAC(m) dist_put(p, (double)llround(st->m * B));
#define MS_PUT_MS_PAIRFRAC(m) dist_put(p, (double)llround(st->m * B * k));
#define MS_PUT_MS_RANKMEAN(m) dist_put(p, st->m);
#define MS_PUT_MS_CONF(m) dist_put(p, st->m * wconf), dist_put(p, wconf);
#define MS_PUT_MS_OWN(m)
#define MS_PUT_MS_DERIVED(m)
#define MS_PUT_(T, m, cols, dist, label, fmt, scale, warn, desc) MS_PUT_##dist(m)
#define MS_GET_MS_MEAN(m) st->m = dist_get(p) / B;
#define MS_GET_MS_FRAC(m) st->m = dist_get(p) / B;
#define MS_GET_MS_PAIRFRAC(m) st->m = dist_get(p) / (B * st->k);
#define MS_GET_MS_RANKMEAN(m) st->m = dist_get(p) / nranks;
#define MS_GET_MS_CONF(m)                                                                                       \
    {                                                                                                           \
        const double sum_ = dist_get(p), w_ = dist_get(p);                                                      \
        st->m = w_ > 0 ? sum_ / w_ : 0.0;                                                                       \
    }
#define MS_GET_MS_OWN(m)
#define MS_GET_MS_DERIVED(m)
#define MS_GET_(T, m, cols, dist, label, fmt, scale, warn, desc) MS_GET_##dist(m)

void moe_stats_put(const MoeHead *m, DistPack *p) {
    const MoeStepStats *st = &m->stats;
    const int E = m->cfg.E, B = st->B, k = st->k;
    long kept_total = 0;
    for (int e = 0; e < E; e++) kept_total += st->kept[e];
    const double wconf = m->cfg.kind == HEAD_MOE ? (double)kept_total : (double)B;
    (void)wconf, (void)k;
    dist_put(p, B);
    MOE_STEP_SCALARS(MS_PUT_)
    for (int e = 0; e < E; e++) {
        dist_put(p, st->demand[e]);
        dist_put(p, st->kept[e]);
        dist_put(p, st->first[e]);
        dist_put(p, st->clean_first[e]);
        dist_put(p, (double)st->mean_gate[e] * B);
    }
}

void moe_stats_get(MoeHead *m, DistPack *p, int nranks) {
    MoeStepStats *st = &m->stats;
    const int E = m->cfg.E;
    const double B = dist_get(p);
    (void)nranks;
    MOE_STEP_SCALARS(MS_GET_)
    double cv[MOE_MAX_EXPERTS] = {0};
    int fmx = 0, cmx = 0, dead = 0;
    for (int e = 0; e < E; e++) {
        st->demand[e] = (int)dist_get(p);
        st->kept[e] = (int)dist_get(p);
        st->first[e] = (int)dist_get(p);
        st->clean_first[e] = (int)dist_get(p);
        st->mean_gate[e] = (float)(dist_get(p) / B);
        if (st->first[e] > fmx) fmx = st->first[e];
        if (st->clean_first[e] > cmx) cmx = st->clean_first[e];
        dead += st->clean_first[e] == 0;
        cv[e] = st->clean_first[e];
    }
    st->B = (int)B;
    /* the MS_DERIVED rows */
    st->first_share = fmx / B;
    st->clean_first_share = cmx / B;
    st->clean_load_entropy = moe_norm_entropy_(cv, E);
    st->clean_dead = dead;
    moe_stats_load_(st, E);
    if (st->training) memcpy(m->demand_train, st->demand, sizeof m->demand_train);
}
