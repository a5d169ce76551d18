/* test_moeconv.c — routed conv-FFN layers in the backbone (core/moeconv.h) and their model
 * integration.
 *
 *   - finite differences of one routed layer with the selection held fixed: input, router, every
 *     expert's fc1/fc2 weight and bias (loss includes alpha*L_aux + beta*L_z), with drops present;
 *     the same for the dense baseline layer;
 *   - the forward against a naive per-sample, per-pixel reference in double;
 *   - routing invariants of every layer over many random batches: no expert over C pairs, first
 *     choices before second choices, batch order inside a rank, a sample whose pairs are all dropped
 *     leaves the layer exactly as x; evaluation of one sample does not depend on its batch mates;
 *   - finite differences of a whole model with two MoE layers, a dense baseline layer and a moe
 *     head (every tensor);
 *   - FLOP counts and rho of the documented 64x64 model against a hand computation; bad layer
 *     lists are refused with a message;
 *   - a trainer checkpointed and resumed mid-run ends bit-identical to an uninterrupted one.
 * Plain main: one line per check, returns 0 if all pass. */
#include "gradcheck.h"
#include "trainer_util.h"

#include "core/layers.h"
#include "core/model.h"
#include "core/moeconv.h"

#include <omp.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "unit_mask.h"

// ---------------------------------------------------------------- one layer on malloc'd buffers

typedef struct {
    MoeConv L;
    float *pbuf, *gbuf; // all parameters / gradients
    size_t np;
    float *x, *y, *dx, *dy, *w; // (C, B, HW); w: the loss weights
    int B;
    float tau;
    int training;
} LayerT;

static float *zalloc(size_t n) { return calloc(n ? n : 1, sizeof(float)); }

static void layer_init(LayerT *t, const MoeConfig *rc, int C, int H, int W, int B, uint64_t seed) {
    memset(t, 0, sizeof *t);
    MoeConv *L = &t->L;
    if (moe_init(&L->route, rc, B) != ML_OK) {
        printf("FAIL moe_init: %s\n", ml_last_error());
        exit(1);
    }
    L->C = C;
    L->H = H;
    L->W = W;
    L->HW = H * W;
    L->Bmax = B;
    t->B = B;
    t->tau = 0.8f;
    const int E = rc->E, h = rc->h;
    t->np = (size_t)E * C + (size_t)E * (2 * h * C + h + C);
    t->pbuf = zalloc(t->np);
    t->gbuf = zalloc(t->np);
    float *p = t->pbuf, *g = t->gbuf;
    L->p.router = p;
    L->g.router = g;
    p += E * C;
    g += E * C;
    for (int e = 0; e < E; e++) {
        L->p.w1[e] = p, L->g.w1[e] = g, p += h * C, g += h * C;
        L->p.b1[e] = p, L->g.b1[e] = g, p += h, g += h;
        L->p.w2[e] = p, L->g.w2[e] = g, p += C * h, g += C * h;
        L->p.b2[e] = p, L->g.b2[e] = g, p += C, g += C;
    }
    const long R = moeconv_cols(L), n = (long)C * B * L->HW;
    L->pool = zalloc((size_t)B * C);
    L->dpool = zalloc((size_t)B * C);
    /* the sizes model.c gives them: row sums (B, C); one expert output (C, HW) per thread */
    L->nyo = omp_get_max_threads();
    L->xg = zalloc((size_t)B * C);
    L->yo = zalloc((size_t)L->nyo * C * L->HW);
    L->hid = zalloc((size_t)h * R);
    L->dhid = zalloc((size_t)h * R);
    t->x = zalloc(n);
    t->y = zalloc(n);
    t->dx = zalloc(n);
    t->dy = zalloc(n);
    t->w = zalloc(n);
    Rng r;
    rng_seed(&r, seed);
    // parameters: router logits well separated, ReLU pre-activations away from 0 (|b1| >= 0.5)
    for (int i = 0; i < E * C; i++) L->p.router[i] = 1.5f * rng_normal(&r);
    for (int e = 0; e < E; e++) {
        for (int i = 0; i < h * C; i++) L->p.w1[e][i] = 0.2f / C * rng_normal(&r);
        for (int i = 0; i < h; i++) L->p.b1[e][i] = (rng_uniform(&r) < 0.5f ? -1.0f : 1.0f) * (0.5f + rng_uniform(&r));
        for (int i = 0; i < C * h; i++) L->p.w2[e][i] = rng_normal(&r) / sqrtf((float)h);
        for (int i = 0; i < C; i++) L->p.b2[e][i] = 0.3f * rng_normal(&r);
    }
    for (long i = 0; i < n; i++) {
        t->x[i] = 2.0f * rng_uniform(&r) - 1.0f;
        t->w[i] = rng_normal(&r);
    }
    // per-sample offsets so that the pooled router inputs differ clearly between samples
    for (int c = 0; c < C; c++)
        for (int b = 0; b < B; b++) {
            const float o = 0.8f * rng_normal(&r);
            for (int i = 0; i < L->HW; i++) t->x[((size_t)c * B + b) * L->HW + i] += o;
        }
}

static void layer_free(LayerT *t) {
    MoeConv *L = &t->L;
    free(L->pool), free(L->dpool), free(L->xg), free(L->yo), free(L->hid), free(L->dhid);
    free(t->pbuf), free(t->gbuf), free(t->x), free(t->y), free(t->dx), free(t->dy), free(t->w);
    moe_free(&L->route);
}

static long layer_n(const LayerT *t) { return (long)t->L.C * t->B * t->L.HW; }

// loss = sum w*y + alpha L_aux + beta L_z
static double layer_loss(void *p) {
    LayerT *t = p;
    moeconv_forward(&t->L, t->y, t->x, t->B, t->tau, t->training, NULL);
    double s = 0.0;
    for (long i = 0; i < layer_n(t); i++) s += (double)t->w[i] * t->y[i];
    const MoeHead *r = &t->L.route;
    return s + r->cfg.alpha * r->stats.l_aux + r->cfg.beta * r->stats.l_z;
}

static uint64_t layer_sig(void *p) {
    LayerT *t = p;
    return fd_hash_mask(t->L.hid, (long)t->L.route.cfg.h * t->L.route.nrows * t->L.HW);
}

static void test_layer_gradients(BiasMode bm, float cf, const char *label) {
    MoeConfig rc;
    moe_config_defaults(&rc);
    rc.E = 3;
    rc.k = 2;
    rc.h = 5;
    rc.d = 6;
    rc.cf = cf;
    rc.noise = 0.0f;
    rc.alpha = 0.3f;
    rc.beta = 0.05f;
    rc.bias_mode = bm;
    LayerT t;
    layer_init(&t, &rc, 6, 3, 2, 5, 11);
    for (int e = 0; e < rc.E; e++) t.L.route.bias[e] = 0.2f * (float)(e - 1);
    t.training = 1;
    layer_loss(&t); // selects; then held fixed
    t.L.route.freeze_selection = 1;
    const MoeStepStats *st = &t.L.route.stats;
    if (cf > 0) CHECK(st->drop_frac > 0.0, "%s: the batch has dropped pairs (%.2f)", label, st->drop_frac);
    layer_loss(&t);
    memset(t.gbuf, 0, sizeof(float) * t.np);
    memcpy(t.dy, t.w, sizeof(float) * layer_n(&t));
    moeconv_backward(&t.L, t.dx, t.dy, t.x, t.B);
    char nm[96];
    snprintf(nm, sizeof nm, "%s input x", label);
    fd_check(nm, t.x, t.dx, layer_n(&t), layer_loss, layer_sig, &t, 1e-3f, 200, 2e-3);
    snprintf(nm, sizeof nm, "%s router", label);
    fd_check(nm, t.L.p.router, t.L.g.router, (long)rc.E * 6, layer_loss, layer_sig, &t, 1e-3f, 200, 2e-3);
    for (int e = 0; e < rc.E; e++) {
        const int kept = t.L.route.off[e + 1] - t.L.route.off[e];
        struct {
            const char *n;
            float *p, *g;
            long len;
        } ts[4] = {{"fc1.weight", t.L.p.w1[e], t.L.g.w1[e], (long)rc.h * 6},
                   {"fc1.bias", t.L.p.b1[e], t.L.g.b1[e], rc.h},
                   {"fc2.weight", t.L.p.w2[e], t.L.g.w2[e], (long)6 * rc.h},
                   {"fc2.bias", t.L.p.b2[e], t.L.g.b2[e], 6}};
        for (int q = 0; q < 4; q++) {
            snprintf(nm, sizeof nm, "%s expert %d (%d samples) %s", label, e, kept, ts[q].n);
            if (kept == 0) {
                double mx = 0;
                for (long i = 0; i < ts[q].len; i++) mx = fmax(mx, fabs(ts[q].g[i]));
                CHECK(mx == 0.0, "%s: no sample, zero gradient", nm);
                continue;
            }
            fd_check(nm, ts[q].p, ts[q].g, ts[q].len, layer_loss, layer_sig, &t, 1e-3f, 200, 2e-3);
        }
    }
    layer_free(&t);
}

// ---------------------------------------------------------------- dense baseline layer

typedef struct {
    FfnConv L;
    float *x, *y, *w, *dx;
    int B;
} FfnT;

static double ffn_loss(void *p) {
    FfnT *t = p;
    ffnconv_forward(&t->L, t->y, t->x, t->B);
    double s = 0.0;
    for (long i = 0; i < (long)t->L.C * t->B * t->L.HW; i++) s += (double)t->w[i] * t->y[i];
    return s;
}
static uint64_t ffn_sig(void *p) {
    FfnT *t = p;
    return fd_hash_mask(t->L.hid, (long)t->L.hidden * t->B * t->L.HW);
}

static void test_ffn_gradients(void) {
    FfnT t;
    memset(&t, 0, sizeof t);
    const int C = 5, HW = 6, B = 3, hk = 7;
    t.B = B;
    t.L.C = C;
    t.L.H = 2;
    t.L.W = 3;
    t.L.HW = HW;
    t.L.hidden = hk;
    t.L.Bmax = B;
    const long n = (long)C * B * HW;
    float *pp = zalloc(2 * (size_t)hk * C + hk + C), *gg = zalloc(2 * (size_t)hk * C + hk + C);
    t.L.w1 = pp, t.L.b1 = pp + hk * C, t.L.w2 = t.L.b1 + hk, t.L.b2 = t.L.w2 + C * hk;
    t.L.gw1 = gg, t.L.gb1 = gg + hk * C, t.L.gw2 = t.L.gb1 + hk, t.L.gb2 = t.L.gw2 + C * hk;
    t.L.hid = zalloc((size_t)hk * B * HW);
    t.L.dhid = zalloc((size_t)hk * B * HW);
    t.x = zalloc(n), t.y = zalloc(n), t.w = zalloc(n), t.dx = zalloc(n);
    Rng r;
    rng_seed(&r, 3);
    for (int i = 0; i < hk * C; i++) t.L.w1[i] = 0.2f / C * rng_normal(&r), t.L.w2[i] = rng_normal(&r);
    for (int i = 0; i < hk; i++) t.L.b1[i] = (i % 2 ? 1.0f : -1.0f) * (0.5f + rng_uniform(&r));
    for (int i = 0; i < C; i++) t.L.b2[i] = rng_normal(&r);
    for (long i = 0; i < n; i++) t.x[i] = 2.0f * rng_uniform(&r) - 1.0f, t.w[i] = rng_normal(&r);
    ffn_loss(&t);
    ffnconv_backward(&t.L, t.dx, t.w, t.x, B);
    fd_check("ffn input x", t.x, t.dx, n, ffn_loss, ffn_sig, &t, 1e-3f, 200, 2e-3);
    fd_check("ffn fc1.weight", t.L.w1, t.L.gw1, (long)hk * C, ffn_loss, ffn_sig, &t, 1e-3f, 200, 2e-3);
    fd_check("ffn fc1.bias", t.L.b1, t.L.gb1, hk, ffn_loss, ffn_sig, &t, 1e-3f, 200, 2e-3);
    fd_check("ffn fc2.weight", t.L.w2, t.L.gw2, (long)hk * C, ffn_loss, ffn_sig, &t, 1e-3f, 200, 2e-3);
    fd_check("ffn fc2.bias", t.L.b2, t.L.gb2, C, ffn_loss, ffn_sig, &t, 1e-3f, 200, 2e-3);
    free(pp), free(gg), free(t.L.hid), free(t.L.dhid), free(t.x), free(t.y), free(t.w), free(t.dx);
}

// ---------------------------------------------------------------- invariants

// The layer's output against a naive reference: per sample, its kept pairs, per pixel, in double.
// Returns the largest difference; *exact_ok = 0 if a sample with every pair dropped is not x.
static double layer_reference_err(const LayerT *t, int *n_empty, int *exact_ok) {
    const MoeConv *L = &t->L;
    const MoeHead *r = &L->route;
    const int C = L->C, HW = L->HW, B = t->B, k = r->cfg.k, h = r->cfg.h;
    double worst = 0.0;
    *n_empty = 0;
    *exact_ok = 1;
    double *hv = malloc(sizeof(double) * h);
    for (int b = 0; b < B; b++) {
        int kept = 0;
        for (int q = 0; q < k; q++) kept += r->row[b * k + q] >= 0;
        if (kept == 0) {
            (*n_empty)++;
            for (int c = 0; c < C; c++)
                if (memcmp(t->y + ((size_t)c * B + b) * HW, t->x + ((size_t)c * B + b) * HW, sizeof(float) * HW))
                    *exact_ok = 0;
        }
        for (int i = 0; i < HW; i++)
            for (int c = 0; c < C; c++) {
                double v = t->x[((size_t)c * B + b) * HW + i];
                for (int q = 0; q < k; q++) {
                    if (r->row[b * k + q] < 0) continue;
                    const int e = r->sel[b * k + q];
                    for (int j = 0; j < h; j++) {
                        double a = L->p.b1[e][j];
                        for (int cc = 0; cc < C; cc++)
                            a += (double)L->p.w1[e][j * C + cc] * t->x[((size_t)cc * B + b) * HW + i];
                        hv[j] = a > 0 ? a : 0;
                    }
                    double o = L->p.b2[e][c];
                    for (int j = 0; j < h; j++) o += (double)L->p.w2[e][c * h + j] * hv[j];
                    v += r->gate[b * k + q] * o;
                }
                worst = fmax(worst, fabs(v - t->y[((size_t)c * B + b) * HW + i]));
            }
    }
    free(hv);
    return worst;
}

// Capacity and priority: per expert at most C kept; k-major; batch order inside a rank.
static int priority_violations(const MoeHead *r, int B) {
    const int k = r->cfg.k, E = r->cfg.E, C = r->stats.capacity;
    int bad = 0;
    for (int e = 0; e < E; e++) {
        if (r->off[e + 1] - r->off[e] > C || r->stats.kept[e] > C) bad++;
        for (int q = 0; q < k; q++)
            for (int b = 0; b < B; b++) {
                if (r->sel[b * k + q] != e || r->row[b * k + q] >= 0) continue;
                // (b, q) dropped from e: no later pair of the same rank, nor any higher rank, kept in e
                for (int q2 = q; q2 < k; q2++)
                    for (int b2 = q2 == q ? b + 1 : 0; b2 < B; b2++)
                        if (r->sel[b2 * k + q2] == e && r->row[b2 * k + q2] >= 0) bad++;
            }
    }
    return bad;
}

static void test_invariants(void) {
    const int cases[][5] = {
        // E, k, h, B, HW-side
        {4, 2, 6, 16, 3},
        {3, 1, 4, 12, 2},
        {6, 3, 5, 20, 2},
    };
    const float cfs[] = {0.3f, 0.75f, 1.0f, 1.5f};
    int worst_bad = 0, empties = 0, exact_all = 1, trials = 0;
    double worst_err = 0.0, worst_eval = 0.0;
    for (int ci = 0; ci < 3; ci++)
        for (int fi = 0; fi < 4; fi++)
            for (int seed = 0; seed < 4; seed++) {
                MoeConfig rc;
                moe_config_defaults(&rc);
                rc.E = cases[ci][0];
                rc.k = cases[ci][1];
                rc.h = cases[ci][2];
                rc.d = 5;
                rc.cf = cfs[fi];
                rc.noise = 1.0f;
                LayerT t;
                layer_init(&t, &rc, 5, cases[ci][4], cases[ci][4], cases[ci][3], 100 + seed);
                Rng rng;
                rng_seed(&rng, 7 + seed);
                moeconv_forward(&t.L, t.y, t.x, t.B, 1.0f, 1, &rng);
                trials++;
                int bad = priority_violations(&t.L.route, t.B);
                if (bad > worst_bad) worst_bad = bad;
                int ne, ok;
                double err = layer_reference_err(&t, &ne, &ok);
                empties += ne;
                exact_all &= ok;
                if (err > worst_err) worst_err = err;
                // evaluation (dropless): one sample alone equals itself inside the batch
                moeconv_forward(&t.L, t.y, t.x, t.B, 1.0f, 0, NULL);
                const int C = t.L.C, HW = t.L.HW, B = t.B;
                float *x1 = zalloc((size_t)C * HW), *y1 = zalloc((size_t)C * HW);
                float *yb = zalloc((size_t)C * B * HW);
                memcpy(yb, t.y, sizeof(float) * C * B * HW);
                for (int b = 0; b < B; b += 3) {
                    for (int c = 0; c < C; c++) memcpy(x1 + c * HW, t.x + ((size_t)c * B + b) * HW, sizeof(float) * HW);
                    moeconv_forward(&t.L, y1, x1, 1, 1.0f, 0, NULL);
                    for (int c = 0; c < C; c++)
                        for (int i = 0; i < HW; i++)
                            worst_eval = fmax(worst_eval, fabs(y1[c * HW + i] - yb[((size_t)c * B + b) * HW + i]));
                }
                free(x1), free(y1), free(yb);
                layer_free(&t);
            }
    CHECK(worst_bad == 0,
          "%d random batches: no expert over C pairs, first choices before second, batch order "
          "inside a rank (%d violations)",
          trials, worst_bad);
    CHECK(worst_err < 1e-4, "forward equals the per-sample per-pixel reference (max err %.2e)", worst_err);
    CHECK(empties > 0 && exact_all, "%d samples with every pair dropped leave the layer exactly as x", empties);
    CHECK(worst_eval < 1e-5, "evaluation: a sample alone equals itself in its batch (max diff %.2e)", worst_eval);
}

// ---------------------------------------------------------------- whole model

typedef struct {
    Model *m;
    int B;
    int32_t *y;
} ModelCtx;

static double model_total_loss(void *p) {
    ModelCtx *c = p;
    Model *m = c->m;
    model_forward(m, c->B, 1, 0.9f, NULL);
    double l = model_loss(m, c->y, c->B, NULL) + model_backbone_aux_loss(m);
    if (m->cfg.head.kind != HEAD_DENSE) l += m->moe.cfg.alpha * m->moe.stats.l_aux + m->moe.cfg.beta * m->moe.stats.l_z;
    return l;
}

static uint64_t model_sig2(void *p) {
    ModelCtx *c = p;
    Model *m = c->m;
    uint64_t h = 0;
    for (int i = 0; i < m->nunits; i++) {
        const Unit *u = &m->units[i];
        h = h * 31 + unit_mask_hash(m, u, c->B);
    }
    for (int i = 0; i < m->nmoec; i++) {
        const MoeConv *L = &m->moec[i];
        h = h * 31 + fd_hash_mask(L->hid, (long)L->route.cfg.h * L->route.nrows * L->HW);
    }
    for (int i = 0; i < m->nffnc; i++)
        h = h * 31 + fd_hash_mask(m->ffnc[i].hid, (long)m->ffnc[i].hidden * c->B * m->ffnc[i].HW);
    h = h * 31 + fd_hash_mask(m->moe.hid, (long)m->moe.cfg.h * m->moe.nrows);
    return h;
}

static void test_model_gradients(void) {
    ModelConfig cfg;
    model_config_defaults(&cfg);
    cfg.in_c = 3;
    cfg.in_h = cfg.in_w = 8;
    cfg.classes = 4;
    cfg.width = 0.125f; // c0 = 4
    cfg.batch = 4;
    cfg.head.kind = HEAD_MOE;
    cfg.head.E = 3;
    cfg.head.k = 2;
    cfg.head.h = 6;
    cfg.head.noise = 0.0f;
    cfg.head.alpha = 0.2f;
    cfg.head.beta = 0.02f;
    cfg.head.cf = 0.0f;
    cfg.moe_n = 2;
    cfg.moe_after[0] = 0;
    cfg.moe_after[1] = 2;
    cfg.ffn_n = 1;
    cfg.ffn_after[0] = 3;
    cfg.bb_nh = 1;
    cfg.bb_hidden[0] = 5;
    cfg.bb_nE = 2;
    cfg.bb_E[0] = 3;
    cfg.bb_E[1] = 4;
    Model m;
    if (model_init(&m, &cfg) != ML_OK) {
        CHECK(0, "model_init (2 MoE layers, 1 dense layer, moe head): %s", ml_last_error());
        return;
    }
    CHECK(m.nmoec == 2 && m.nffnc == 1 && m.moec[0].C == 4 && m.moec[0].HW == 64 && m.moec[1].C == 16 &&
              m.moec[1].HW == 4 && m.moec[1].route.cfg.E == 4 && m.ffnc[0].hidden == 10,
          "layers: moe0 4x8x8 E 3, moe2 16x2x2 E 4, ffn3 hidden k*h = 10");
    Rng r;
    rng_seed(&r, 9);
    model_init_params(&m, &r);
    for (int i = 0; i < m.nunits; i++) {
        const Unit *u = &m.units[i];
        for (int ch = 0; ch < u->OC; ch++) {
            m.param[m.params[u->gamma].off + ch] = 1.0f + 0.3f * rng_normal(&r);
            m.param[m.params[u->beta].off + ch] = 0.3f * rng_normal(&r);
        }
    }
    for (int i = 0; i < m.nmoec; i++) { // router logits spread out, expert outputs sizeable
        MoeConv *L = &m.moec[i];
        for (long j = 0; j < (long)L->route.cfg.E * L->C; j++) L->p.router[j] *= 6.0f;
        const int h = L->route.cfg.h;
        for (int e = 0; e < L->route.cfg.E; e++) { // ReLU pre-activations far from 0 (no kinks)
            for (int j = 0; j < L->C; j++) L->p.b2[e][j] = 0.3f * rng_normal(&r);
            for (int j = 0; j < h * L->C; j++) L->p.w1[e][j] *= 0.05f;
            for (int j = 0; j < h; j++) L->p.b1[e][j] = (j % 2 ? 1.0f : -1.0f) * (0.5f + rng_uniform(&r));
        }
        L->route.cfg.noise = 0.0f;
        L->route.cfg.alpha = 0.2f;
        L->route.cfg.beta = 0.02f;
        L->route.cfg.cf = 1.0f; // drops happen
    }
    for (int i = 0; i < m.nffnc; i++) {
        FfnConv *L = &m.ffnc[i];
        for (long j = 0; j < (long)L->hidden * L->C; j++) L->w1[j] *= 0.05f;
        for (int j = 0; j < L->hidden; j++) L->b1[j] = (j % 2 ? 1.0f : -1.0f) * (0.5f + rng_uniform(&r));
    }
    float *x = model_input(&m);
    for (long i = 0; i < 3L * 4 * 64; i++) x[i] = rng_normal(&r);
    int32_t y[4] = {0, 1, 2, 3};
    ModelCtx c = {.m = &m, .B = 4, .y = y};
    model_total_loss(&c);
    for (int i = 0; i < m.nmoec; i++) m.moec[i].route.freeze_selection = 1;
    m.moe.freeze_selection = 1;
    model_total_loss(&c);
    model_zero_grad(&m);
    model_backward(&m, y, 4);
    float *g = malloc(sizeof(float) * m.n_param);
    memcpy(g, m.grad, sizeof(float) * m.n_param);
    int checked = 0;
    for (int t = 0; t < m.nparams; t++) {
        const TensorInfo *ti = &m.params[t];
        double mx = 0;
        for (long i = 0; i < ti->n; i++) mx = fmax(mx, fabs(g[ti->off + i]));
        if (mx == 0.0 && strstr(ti->name, ".experts.")) continue; // an expert no sample reached
        char name[128];
        snprintf(name, sizeof name, "model(2 moe, ffn, moe head) %s", ti->name);
        fd_check(name, m.param + ti->off, g + ti->off, ti->n, model_total_loss, model_sig2, &c, 4e-3f, 20, 1e-2);
        checked++;
    }
    CHECK(checked > 40, "%d of %d tensors checked (experts that got no sample have zero gradient)", checked, m.nparams);
    free(g);
    model_free(&m);
}

// ---------------------------------------------------------------- FLOPs, rho, configuration errors

static void test_flops(void) {
    ModelConfig cfg;
    model_config_defaults(&cfg);
    model_preset_backbone_moe(&cfg);
    cfg.classes = 100;
    Model m;
    if (model_init(&m, &cfg) != ML_OK) {
        CHECK(0, "model_init(preset): %s", ml_last_error());
        return;
    }
    // by hand: 64x64x3, dw, c0 = 32
    const double stem = 2.0 * 3 * 9 * 32 * 64 * 64;
    const double b1 = 2.0 * 9 * 32 * 32 * 32 + 2.0 * 32 * 64 * 32 * 32;
    const double b2 = 2.0 * 9 * 64 * 16 * 16 + 2.0 * 64 * 128 * 16 * 16;
    const double b3 = 2.0 * 9 * 128 * 8 * 8 + 2.0 * 128 * 256 * 8 * 8;
    const double e2 = 16.0 * 16 * 2 * (2.0 * 128 * 32), e3 = 8.0 * 8 * 2 * (2.0 * 256 * 64);
    const double routers = 2.0 * 128 * 8 + 2.0 * 256 * 8, head = 2.0 * 2 * 256 * (2 * 1024), cls = 2.0 * 256 * 100;
    const double total = stem + b1 + b2 + b3 + routers + 2 * e2 + 2 * e3 + head + cls;
    CHECK(m.flops.backbone == stem + b1 + b2 + b3, "backbone FLOPs %.0f == hand %.0f", m.flops.backbone,
          stem + b1 + b2 + b3);
    CHECK(m.nmoec == 2 && m.moec[0].flops_expert == e2 && m.moec[1].flops_expert == e3,
          "expert pair FLOPs moe2 %.0f == 16*16*2*(2*128*32) = %.0f, moe3 %.0f == 8*8*2*(2*256*64) = %.0f",
          m.moec[0].flops_expert, e2, m.moec[1].flops_expert, e3);
    CHECK(m.flops.bb_extra == routers && m.flops.bb_routed == 2 * e2 + 2 * e3,
          "routers %.0f == %.0f, routed %.0f == k (e2 + e3)", m.flops.bb_extra, routers, m.flops.bb_routed);
    CHECK(model_flops(&m) == total, "total forward FLOPs %.0f == hand %.0f", model_flops(&m), total);
    const double rho = (2 * e2 + 2 * e3) / total;
    CHECK(fabs(model_rho_nominal(&m) - rho) < 1e-12 && rho >= 0.35 && rho <= 0.45,
          "nominal rho %.4f == hand %.4f, in [0.35, 0.45]", model_rho_nominal(&m), rho);
    // realized rho counts kept pairs: all kept -> nominal; half kept in moe3 -> less
    m.moec[0].route.stats.pairs_per_sample = 2.0;
    m.moec[1].route.stats.pairs_per_sample = 2.0;
    const double full = model_rho_realized(&m);
    m.moec[1].route.stats.pairs_per_sample = 1.0;
    const double half = model_rho_realized(&m), want = (2 * e2 + e3) / (total - e3);
    CHECK(fabs(full - rho) < 1e-12 && fabs(half - want) < 1e-12,
          "realized rho %.4f with every pair kept, %.4f == %.4f with half of moe3's", full, half, want);
    model_free(&m);
    // the dense baseline of the same model: hidden k*h, no routed FLOPs
    model_config_defaults(&cfg);
    model_preset_backbone_moe(&cfg);
    cfg.classes = 100;
    cfg.ffn_n = cfg.moe_n;
    memcpy(cfg.ffn_after, cfg.moe_after, sizeof cfg.ffn_after);
    cfg.moe_n = 0;
    if (model_init(&m, &cfg) == ML_OK) {
        CHECK(m.nffnc == 2 && m.ffnc[0].flops == 2 * e2 && m.ffnc[1].flops == 2 * e3 && model_rho_nominal(&m) == 0.0 &&
                  model_flops(&m) == total - routers,
              "--ffn-after 2,3: dense layers of k*h, %.0f FLOPs (the MoE model's minus its routers), rho 0",
              model_flops(&m));
        model_free(&m);
    } else CHECK(0, "model_init(ffn): %s", ml_last_error());
}

static void expect_refused(const char *what, ModelConfig *cfg, const char *needle) {
    Model m;
    const ml_status st = model_init(&m, cfg);
    CHECK(st == ML_ERR_ARG && strstr(ml_last_error(), needle), "%s is refused: \"%s\"", what,
          st == ML_OK ? "(accepted)" : ml_last_error());
    if (st == ML_OK) model_free(&m);
}

static void test_config_errors(void) {
    ModelConfig c;
    model_config_defaults(&c);
    c.moe_n = 2, c.moe_after[0] = 2, c.moe_after[1] = 2;
    expect_refused("--moe-after 2,2", &c, "stage 2 has two layers");
    model_config_defaults(&c);
    c.moe_n = 1, c.moe_after[0] = 1, c.ffn_n = 1, c.ffn_after[0] = 1;
    expect_refused("--moe-after 1 --ffn-after 1", &c, "stage 1 has two layers");
    model_config_defaults(&c);
    c.moe_n = 2, c.moe_after[0] = 1, c.moe_after[1] = 2, c.bb_nh = 3;
    expect_refused("--moe-hidden with 3 values for 2 layers", &c, "--moe-hidden has 3 values");
    model_config_defaults(&c);
    c.moe_n = 1, c.moe_after[0] = 3, c.bb_nE = 1, c.bb_E[0] = 2, c.bb_nk = 1, c.bb_k[0] = 3;
    expect_refused("--moe-k 3 with --moe-experts 2", &c, "k = 3 is larger than E = 2");
    model_config_defaults(&c);
    c.moe_n = 1, c.moe_after[0] = 4;
    expect_refused("--moe-after 4", &c, "stage 4");
}

// ---------------------------------------------------------------- resume

static void bb_config(TrainConfig *c) {
    train_config_defaults(c);
    c->model.width = 0.25f;
    c->model.batch = 16;
    c->model.head.kind = HEAD_MOE;
    c->model.head.E = 4;
    c->model.head.k = 2;
    c->model.head.h = 16;
    c->model.head.bias_mode = BIAS_SELECT; // the layers' biases move and must be restored
    c->model.moe_n = 2;
    c->model.moe_after[0] = 1;
    c->model.moe_after[1] = 2;
    c->model.bb_nh = 2;
    c->model.bb_hidden[0] = 8;
    c->model.bb_hidden[1] = 12;
    c->model.bb_nE = 1;
    c->model.bb_E[0] = 3;
    c->epochs = 2;
    c->threads = 1;
    c->seed = 4;
    c->route.window = 5;
}

static void test_resume(void) {
    Dataset ds;
    if (dataset_open(&ds, "synthetic:16x16x3:4:160") != ML_OK) {
        CHECK(0, "dataset: %s", ml_last_error());
        return;
    }
    TrainConfig c;
    bb_config(&c);
    Trainer a, b, r;
    if (trainer_init_ds(&a, &c, &ds) != ML_OK || trainer_init_ds(&b, &c, &ds) != ML_OK) {
        CHECK(0, "trainer_init: %s", ml_last_error());
        dataset_free(&ds);
        return;
    }
    const long total = a.total_steps, cut = total / 2 + 1; // mid-epoch
    for (long i = 0; i < total; i++) trainer_step(&a, NULL);
    for (long i = 0; i < cut; i++) trainer_step(&b, NULL);
    char dir[] = "/tmp/moelab-bbresume-XXXXXX";
    if (!mkdtemp(dir)) {
        CHECK(0, "mkdtemp");
        return;
    }
    CHECK(ckpt_write_t(dir, &b, 0) == ML_OK, "checkpoint at step %ld of %ld", cut, total);
    // bias values were moved by training (else restoring them proves nothing)
    CHECK(b.model.moec[0].route.bias[0] != 0.0f || b.model.moec[0].route.bias[1] != 0.0f,
          "the layer's utility bias moved (%g)", (double)b.model.moec[0].route.bias[0]);
    trainer_free(&b);
    c.model.bb_hidden[1] = 13; // another model: refused with a message naming the tensor
    Trainer o;
    if (trainer_init_ds(&o, &c, &ds) == ML_OK) {
        char path[1024], rep[4096];
        StateView v;
        trainer_state(&o, &v);
        const ml_status st = ckpt_restore_latest(dir, &v, NULL, path, sizeof path, rep, sizeof rep);
        CHECK(st != ML_OK && strstr(rep, "backbone.moe2"), "a checkpoint of another layer width is refused: %s", rep);
        trainer_free(&o);
    }
    c.model.bb_hidden[1] = 12;
    if (trainer_init_ds(&r, &c, &ds) != ML_OK) {
        CHECK(0, "trainer_init: %s", ml_last_error());
        return;
    }
    char path[1024], rep[4096];
    StateView v;
    trainer_state(&r, &v);
    const ml_status st = ckpt_restore_latest(dir, &v, NULL, path, sizeof path, rep, sizeof rep);
    CHECK(st == ML_OK && r.step == cut, "restored step %ld (%s)", r.step, st == ML_OK ? path : ml_last_error());
    for (long i = r.step; i < total; i++) trainer_step(&r, NULL);
    const int same_p = memcmp(a.model.param, r.model.param, sizeof(float) * a.model.n_param) == 0;
    const int same_b = memcmp(a.model.buf, r.model.buf, sizeof(float) * a.model.n_buf) == 0;
    int same_bias = 1;
    for (int i = 0; i < a.model.nmoec; i++)
        same_bias &=
            memcmp(a.model.moec[i].route.bias, r.model.moec[i].route.bias, sizeof a.model.moec[i].route.bias) == 0;
    CHECK(same_p && same_b && same_bias && a.step == r.step,
          "resumed run ends bit-identical to the uninterrupted one (weights %d, BN buffers %d, layer biases %d)",
          same_p, same_b, same_bias);
    trainer_free(&a);
    trainer_free(&r);
    dataset_free(&ds);
    char cmd[256];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) printf("INFO could not remove %s\n", dir);
}

// `set` and `anneal` reach every backbone layer, also when the head is dense.
static void test_commands(void) {
    Dataset ds;
    if (dataset_open(&ds, "synthetic:16x16x3:4:64") != ML_OK) return;
    TrainConfig c;
    bb_config(&c);
    c.model.head.kind = HEAD_DENSE;
    c.model.batch = 8;
    Trainer t;
    if (trainer_init_ds(&t, &c, &ds) != ML_OK) {
        CHECK(0, "trainer_init: %s", ml_last_error());
        dataset_free(&ds);
        return;
    }
    const CmdParam ps[] = {PARAM_CF, PARAM_ALPHA, PARAM_BETA, PARAM_NOISE, PARAM_BIAS_RATE};
    int ok = 1;
    for (size_t i = 0; i < sizeof ps / sizeof ps[0]; i++) {
        TrainerCmd cmd = {.kind = CMD_SET, .param = ps[i], .value = 0.375};
        ok &= trainer_apply(&t, &cmd) == ML_OK;
    }
    for (int i = 0; i < t.model.nmoec; i++) {
        const MoeConfig *rc = &t.model.moec[i].route.cfg;
        ok &= rc->cf == 0.375f && rc->alpha == 0.375f && rc->beta == 0.375f && rc->noise == 0.375f &&
              rc->bias_rate == 0.375f;
    }
    TrainerCmd tau = {.kind = CMD_SET, .param = PARAM_TAU, .value = 0.5};
    ok &= trainer_apply(&t, &tau) == ML_OK;
    CHECK(ok && t.model.nmoec == 2, "dense head + 2 backbone MoE layers: set cf/alpha/beta/noise/bias-rate reach both "
                                    "layers, set tau is accepted");
    trainer_free(&t);
    c.model.moe_n = 0;
    if (trainer_init_ds(&t, &c, &ds) == ML_OK) {
        TrainerCmd cmd = {.kind = CMD_SET, .param = PARAM_CF, .value = 1.0};
        CHECK(trainer_apply(&t, &cmd) == ML_ERR_STATE,
              "dense head, no backbone MoE (per-layer lists unused): set cf "
              "is refused (%s)",
              ml_last_error());
        trainer_free(&t);
    } else CHECK(0, "trainer_init without layers, lists given: %s", ml_last_error());
    dataset_free(&ds);
}

// --fc2-init: zero makes every residual branch the identity at initialisation. A model with two
// MoE layers and a dense layer in the backbone gives bit for bit the logits of the same model
// without them (the backbone layers draw last, so every other tensor is the same), in training
// (batch statistics) and evaluation, for a dense and a moe head, and the head's output is its
// input exactly. zero-backbone: the same logits, but the head is not the identity. normal: the
// layers change the logits (the check can fail).
static void test_fc2_init(void) {
    for (int hk = 0; hk < 2; hk++)
        for (int mode = FC2_NORMAL; mode <= FC2_ZERO_BACKBONE; mode++) {
            Model m[2];
            for (int v = 0; v < 2; v++) {
                ModelConfig cfg;
                model_config_defaults(&cfg);
                cfg.in_c = 3;
                cfg.in_h = cfg.in_w = 8;
                cfg.classes = 4;
                cfg.width = 0.125f;
                cfg.batch = 6;
                cfg.head.kind = hk ? HEAD_MOE : HEAD_DENSE;
                cfg.head.E = 3;
                cfg.head.k = 2;
                cfg.head.h = 6;
                cfg.fc2_init = (Fc2Init)mode;
                cfg.head.noise = 0.0f; /* the backbone layers' noise draws would move the head's */
                if (v == 1) { /* the same model with routed and dense layers in the backbone */
                    cfg.moe_n = 2;
                    cfg.moe_after[0] = 0;
                    cfg.moe_after[1] = 2;
                    cfg.ffn_n = 1;
                    cfg.ffn_after[0] = 3;
                }
                if (model_init(&m[v], &cfg) != ML_OK) {
                    CHECK(0, "fc2-init: model_init: %s", ml_last_error());
                    return;
                }
                Rng r;
                rng_seed(&r, 21);
                model_init_params(&m[v], &r);
                float *x = model_input(&m[v]);
                Rng rx;
                rng_seed(&rx, 3);
                for (long i = 0; i < 3L * 6 * 64; i++) x[i] = rng_normal(&rx);
            }
            int same_train = 1, same_eval = 1, head_id = 1;
            for (int training = 1; training >= 0; training--) {
                const float *lg[2];
                for (int v = 0; v < 2; v++) {
                    Rng rn;
                    rng_seed(&rn, 5);
                    lg[v] = model_forward(&m[v], 6, training, 1.0f, &rn);
                    const float *feat = m[v].act.buf + m[v].act.feat, *y = m[v].act.buf + m[v].act.y;
                    if (memcmp(feat, y, sizeof(float) * 6 * m[v].d) != 0) head_id = 0;
                }
                if (memcmp(lg[0], lg[1], sizeof(float) * 6 * 4) != 0) *(training ? &same_train : &same_eval) = 0;
            }
            const char *head = hk ? "moe" : "dense";
            if (mode == FC2_ZERO)
                CHECK(same_train && same_eval && head_id,
                      "fc2-init zero, %s head: the backbone's MoE and dense layers and the head are the identity "
                      "at init (logits bit-identical to the model without the layers, training %d, evaluation %d; "
                      "head output = its input %d)",
                      head, same_train, same_eval, head_id);
            else if (mode == FC2_ZERO_BACKBONE)
                CHECK(same_train && same_eval && !head_id,
                      "fc2-init zero-backbone, %s head: the backbone's layers are the identity (logits as without "
                      "them: training %d, evaluation %d), the head is not (%d)",
                      head, same_train, same_eval, !head_id);
            else
                CHECK(!same_train && !same_eval && !head_id, "fc2-init normal, %s head: the layers change the logits",
                      head);
            model_free(&m[0]);
            model_free(&m[1]);
        }
    Fc2Init f;
    CHECK(fc2_init_parse("zero-backbone", &f) == 0 && f == FC2_ZERO_BACKBONE && fc2_init_parse("zero ", &f) == -1 &&
              !strcmp(fc2_init_name(FC2_NORMAL), "normal"),
          "fc2_init_parse / fc2_init_name");
}

int main(void) {
    test_layer_gradients(BIAS_NONE, 0.75f, "moeconv cf 0.75");
    test_layer_gradients(BIAS_LOGITS, 0.0f, "moeconv dropless bias-logits");
    test_ffn_gradients();
    test_invariants();
    test_model_gradients();
    test_flops();
    test_fc2_init();
    test_config_errors();
    test_resume();
    test_commands();
    printf("%s: %d failures\n", n_failed ? "FAIL" : "ok", n_failed);
    return n_failed ? 1 : 0;
}
