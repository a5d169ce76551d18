/* model.c — builds the backbone + head + classifier of model.h, and runs its forward and
 * backward passes by calling the layer kernels in order (no graph). */
#include "model.h"
#include "layers.h"

#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <string.h>

void model_config_defaults(ModelConfig *c) {
    memset(c, 0, sizeof *c);
    c->in_c = 3;
    c->in_h = 32;
    c->in_w = 32;
    c->classes = 10;
    c->backbone = BACKBONE_DW;
    c->width = 1.0f;
    moe_config_defaults(&c->head);
    c->batch = 128;
    c->bn_momentum = 0.1f;
}

void model_config_visit(const ModelConfig *m, CfgVisitor *v) {
    v->i(v, "in_c", m->in_c);
    v->i(v, "in_h", m->in_h);
    v->i(v, "in_w", m->in_w);
    v->i(v, "classes", m->classes);
    v->s(v, "backbone", backbone_name(m->backbone));
    v->f(v, "width", m->width);
    v->i(v, "batch", m->batch);
    v->f(v, "bn_momentum", m->bn_momentum);
    v->s(v, "fc2_init", fc2_init_name(m->fc2_init));
    v->open(v, "head");
    moe_config_visit(&m->head, v);
    v->close(v);
    if (m->moe_n + m->ffn_n > 0) { /* backbone layers (--moe-after ...): the lists as given */
        v->open(v, "backbone_layers");
        v->ints(v, "moe_after", m->moe_after, m->moe_n < MODEL_MAX_BBL ? m->moe_n : MODEL_MAX_BBL);
        v->ints(v, "ffn_after", m->ffn_after, m->ffn_n < MODEL_MAX_BBL ? m->ffn_n : MODEL_MAX_BBL);
        v->ints(v, "hidden", m->bb_hidden, m->bb_nh < MODEL_MAX_BBL ? m->bb_nh : MODEL_MAX_BBL);
        v->ints(v, "experts", m->bb_E, m->bb_nE < MODEL_MAX_BBL ? m->bb_nE : MODEL_MAX_BBL);
        v->ints(v, "k", m->bb_k, m->bb_nk < MODEL_MAX_BBL ? m->bb_nk : MODEL_MAX_BBL);
        v->close(v);
    }
}

const char *backbone_name(BackboneKind k) { return k == BACKBONE_DW ? "dw" : "std"; }

/* ---------------------------------------------------------------- tensor registration */

static int add_tensor(TensorInfo *tab, int *count, long *total, int decay, int ndim, int s0, int s1, int s2, int s3,
                      const char *fmt, ...) __attribute__((format(printf, 10, 11)));

#include <stdarg.h>
static int add_tensor(TensorInfo *tab, int *count, long *total, int decay, int ndim, int s0, int s1, int s2, int s3,
                      const char *fmt, ...) {
    ML_ASSERT(*count < MODEL_MAX_TENSORS);
    TensorInfo *t = &tab[*count];
    memset(t, 0, sizeof *t);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(t->name, sizeof t->name, fmt, ap);
    va_end(ap);
    int s[4] = {s0, s1, s2, s3};
    t->ndim = ndim;
    t->n = 1;
    for (int i = 0; i < ndim; i++) {
        t->shape[i] = s[i];
        t->n *= s[i];
    }
    t->off = *total;
    t->decay = decay;
    *total += (t->n + 15) & ~15L; /* keep every tensor 64-byte aligned */
    return (*count)++;
}

#define PARAM(decay, nd, a, b, c, d, ...) \
    add_tensor(m->params, &m->nparams, &m->n_param, decay, nd, a, b, c, d, __VA_ARGS__)
#define BUF(nd, a, ...) add_tensor(m->bufs, &m->nbufs, &m->n_buf, 0, nd, a, 0, 0, 0, __VA_ARGS__)

static void add_unit(Model *m, UnitKind kind, int C, int OC, int H, int W, int stride, const char *conv_name,
                     const char *bn_name, const char *label) {
    ML_ASSERT(m->nunits < MODEL_MAX_UNITS);
    Unit *u = &m->units[m->nunits++];
    u->kind = kind;
    u->C = C;
    u->OC = OC;
    u->H = H;
    u->W = W;
    u->stride = stride;
    u->Ho = conv_out_size(H, stride);
    u->Wo = conv_out_size(W, stride);
    snprintf(u->label, sizeof u->label, "%s", label);
    switch (kind) {
    case UNIT_FULL3X3:
        u->w = PARAM(1, 4, OC, C, 3, 3, "backbone.%s.weight", conv_name);
        u->flops = 2.0 * C * 9 * OC * u->Ho * u->Wo;
        break;
    case UNIT_DW3X3:
        u->w = PARAM(1, 4, C, 1, 3, 3, "backbone.%s.weight", conv_name);
        u->flops = 2.0 * 9 * C * u->Ho * u->Wo;
        break;
    case UNIT_PW1X1:
        u->w = PARAM(1, 4, OC, C, 1, 1, "backbone.%s.weight", conv_name);
        u->flops = 2.0 * C * OC * u->Ho * u->Wo;
        break;
    }
    u->gamma = PARAM(0, 1, OC, 0, 0, 0, "backbone.%s.weight", bn_name);
    u->beta = PARAM(0, 1, OC, 0, 0, 0, "backbone.%s.bias", bn_name);
    u->run_mean = BUF(1, OC, "backbone.%s.running_mean", bn_name);
    u->run_var = BUF(1, OC, "backbone.%s.running_var", bn_name);
}

/* ---------------------------------------------------------------- backbone layers */

const char *model_stage_name(char *buf, size_t n, int routed, int stage) {
    snprintf(buf, n, "%s%d", routed ? "moe" : "ffn", stage);
    return buf;
}

/* The value of a per-layer list for layer i (one value: all layers; none: dflt). */
static int bb_pick(const int *v, int nv, int i, int dflt) { return nv == 0 ? dflt : nv == 1 ? v[0] : v[i]; }

/* Checks the stage lists and per-layer lists of cfg, then registers the layers' tensors and
 * FLOPs after the backbone units (activations are carved later, with the others). */
static ml_status add_backbone_layers(Model *m) {
    const ModelConfig *cfg = &m->cfg;
    const MoeConfig *hc = &cfg->head;
    for (int s = 0; s < MODEL_MAX_BBL; s++) m->stage_moe[s] = m->stage_ffn[s] = -1;
    for (int i = 0; i < MODEL_MAX_UNITS; i++) m->unit_stage[i] = -1;
    for (int s = 0; s < MODEL_MAX_BBL; s++) /* dw: the stem is unit 0, block s ends at unit 2s */
        m->unit_stage[cfg->backbone == BACKBONE_DW ? 2 * s : s] = s;
    if (cfg->moe_n < 0 || cfg->moe_n > MODEL_MAX_BBL || cfg->ffn_n < 0 || cfg->ffn_n > MODEL_MAX_BBL)
        return ml_fail(ML_ERR_ARG, "--moe-after / --ffn-after: at most %d stages", MODEL_MAX_BBL);
    const struct {
        const char *opt;
        int n;
    } lists[3] = {{"--moe-hidden", cfg->bb_nh}, {"--moe-experts", cfg->bb_nE}, {"--moe-k", cfg->bb_nk}};
    for (int l = 0; l < 3; l++) {
        if (lists[l].n < 0 || lists[l].n > MODEL_MAX_BBL)
            return ml_fail(ML_ERR_ARG, "%s: at most %d values", lists[l].opt, MODEL_MAX_BBL);
        const int ffn_too = l != 1 && cfg->ffn_n > 0; /* hidden and k also size the dense layers */
        if (lists[l].n > 1 && cfg->moe_n + cfg->ffn_n > 0 &&
            (lists[l].n != (cfg->moe_n ? cfg->moe_n : cfg->ffn_n) ||
             (ffn_too && cfg->moe_n && lists[l].n != cfg->ffn_n)))
            return ml_fail(ML_ERR_ARG,
                           "%s has %d values: give one value, or one per layer of --moe-after (%d) and of "
                           "--ffn-after (%d)",
                           lists[l].opt, lists[l].n, cfg->moe_n, cfg->ffn_n);
    }
    for (int routed = 1; routed >= 0; routed--) {
        const int n = routed ? cfg->moe_n : cfg->ffn_n;
        const int *st = routed ? cfg->moe_after : cfg->ffn_after;
        for (int i = 0; i < n; i++) {
            const int s = st[i];
            if (s < 0 || s > 3)
                return ml_fail(ML_ERR_ARG, "--%s-after: stage %d is not 0 (stem) .. 3 (block 3)",
                               routed ? "moe" : "ffn", s);
            if (m->stage_moe[s] >= 0 || m->stage_ffn[s] >= 0)
                return ml_fail(ML_ERR_ARG, "stage %d has two layers (%s): one layer per stage", s,
                               routed                 ? "it is twice in --moe-after"
                               : m->stage_moe[s] >= 0 ? "it is in --moe-after and in --ffn-after"
                                                      : "it is twice in --ffn-after");
            const int h = bb_pick(cfg->bb_hidden, cfg->bb_nh, i, hc->h);
            const int E = bb_pick(cfg->bb_E, cfg->bb_nE, i, hc->E);
            const int k = bb_pick(cfg->bb_k, cfg->bb_nk, i, hc->k);
            if (h < 1 || k < 1) return ml_fail(ML_ERR_ARG, "--moe-hidden and --moe-k must be positive");
            /* the stage's feature map: the output of the unit that closes it */
            int ui = 0;
            while (m->unit_stage[ui] != s) ui++;
            const Unit *u = &m->units[ui];
            char nm[16];
            model_stage_name(nm, sizeof nm, routed, s);
            if (routed) {
                MoeConv *L = &m->moec[m->nmoec];
                memset(L, 0, sizeof *L);
                MoeConfig rc = *hc;
                rc.kind = HEAD_MOE;
                rc.d = u->OC;
                rc.E = E;
                rc.k = k;
                rc.h = h;
                rc.slots = 0;
                if (k > E) return ml_fail(ML_ERR_ARG, "backbone layer %s: k = %d is larger than E = %d", nm, k, E);
                ml_status ist = m->layout_only ? moe_init_layout(&L->route, &rc, cfg->batch)
                                               : moe_init(&L->route, &rc, cfg->batch);
                if (ist != ML_OK) return ml_fail(ist, "backbone layer %s: %s", nm, ml_last_error());
                m->nmoec++; /* from here model_free frees its routing state */
                L->stage = s;
                snprintf(L->name, sizeof L->name, "%s", nm);
                L->C = u->OC;
                L->H = u->Ho;
                L->W = u->Wo;
                L->HW = u->Ho * u->Wo;
                L->Bmax = cfg->batch;
                L->t_router = PARAM(0, 2, E, L->C, 0, 0, "backbone.%s.router.weight", nm);
                for (int e = 0; e < E; e++) {
                    PARAM(1, 4, h, L->C, 1, 1, "backbone.%s.experts.%d.fc1.weight", nm, e);
                    PARAM(0, 1, h, 0, 0, 0, "backbone.%s.experts.%d.fc1.bias", nm, e);
                    PARAM(1, 4, L->C, h, 1, 1, "backbone.%s.experts.%d.fc2.weight", nm, e);
                    PARAM(0, 1, L->C, 0, 0, 0, "backbone.%s.experts.%d.fc2.bias", nm, e);
                }
                L->flops_router = 2.0 * L->C * E;
                L->flops_expert = (double)L->HW * 2.0 * (2.0 * L->C * h);
                m->flops.bb_extra += L->flops_router;
                m->flops.bb_routed += k * L->flops_expert;
                m->stage_moe[s] = m->nmoec - 1;
            } else {
                FfnConv *L = &m->ffnc[m->nffnc];
                memset(L, 0, sizeof *L);
                L->stage = s;
                snprintf(L->name, sizeof L->name, "%s", nm);
                L->C = u->OC;
                L->H = u->Ho;
                L->W = u->Wo;
                L->HW = u->Ho * u->Wo;
                L->hidden = k * h;
                L->Bmax = cfg->batch;
                L->t_w1 = PARAM(1, 4, L->hidden, L->C, 1, 1, "backbone.%s.fc1.weight", nm);
                PARAM(0, 1, L->hidden, 0, 0, 0, "backbone.%s.fc1.bias", nm);
                PARAM(1, 4, L->C, L->hidden, 1, 1, "backbone.%s.fc2.weight", nm);
                PARAM(0, 1, L->C, 0, 0, 0, "backbone.%s.fc2.bias", nm);
                L->flops = (double)L->HW * 2.0 * (2.0 * L->C * L->hidden);
                m->flops.bb_extra += L->flops;
                m->stage_ffn[s] = m->nffnc++;
            }
        }
    }
    return ML_OK;
}

/* Points the layers' parameter views and activations once the buffers exist. */
static void point_backbone_layers(Model *m, const long *a_pool, const long *a_xg, const long *a_hid, const long *a_yo,
                                  float *dhid, float *dpool) {
    for (int i = 0; i < m->nmoec; i++) {
        MoeConv *L = &m->moec[i];
        L->p.router = m->param + m->params[L->t_router].off;
        L->g.router = m->grad + m->params[L->t_router].off;
        for (int e = 0; e < L->route.cfg.E; e++) {
            const int t = L->t_router + 1 + 4 * e;
            L->p.w1[e] = m->param + m->params[t].off;
            L->p.b1[e] = m->param + m->params[t + 1].off;
            L->p.w2[e] = m->param + m->params[t + 2].off;
            L->p.b2[e] = m->param + m->params[t + 3].off;
            L->g.w1[e] = m->grad + m->params[t].off;
            L->g.b1[e] = m->grad + m->params[t + 1].off;
            L->g.w2[e] = m->grad + m->params[t + 2].off;
            L->g.b2[e] = m->grad + m->params[t + 3].off;
        }
        L->pool = m->act.buf + a_pool[i];
        L->xg = m->act.buf + a_xg[i];
        L->hid = m->act.buf + a_hid[i];
        L->yo = m->act.buf + a_yo[i];
        L->dhid = dhid;
        L->dpool = dpool;
    }
    for (int i = 0; i < m->nffnc; i++) {
        FfnConv *L = &m->ffnc[i];
        const TensorInfo *t = &m->params[L->t_w1];
        L->w1 = m->param + t[0].off;
        L->b1 = m->param + t[1].off;
        L->w2 = m->param + t[2].off;
        L->b2 = m->param + t[3].off;
        L->gw1 = m->grad + t[0].off;
        L->gb1 = m->grad + t[1].off;
        L->gw2 = m->grad + t[2].off;
        L->gb2 = m->grad + t[3].off;
        L->hid = m->act.buf + a_hid[MODEL_MAX_BBL + i];
        L->dhid = dhid;
    }
}

static long carve(long *total, long n) {
    long o = *total;
    *total += (n + 15) & ~15L;
    return o;
}

static ml_status model_build(Model *m, const ModelConfig *cfg, int alloc);

ml_status model_init(Model *m, const ModelConfig *cfg) { return model_build(m, cfg, 1); }
ml_status model_layout(Model *m, const ModelConfig *cfg) { return model_build(m, cfg, 0); }

double model_memory_bytes(const Model *m) {
    double b = (2.0 * m->n_param + (m->n_buf ? m->n_buf : 1) + m->act.n + m->ws.n) * sizeof(float);
    if (m->moe_first >= 0 && m->cfg.head.kind != HEAD_DENSE) b += m->moe.ws_bytes;
    for (int i = 0; i < m->nmoec; i++) b += m->moec[i].route.ws_bytes;
    return b;
}

/* alloc = 0: shapes, parameter table, FLOPs and the buffer sizes only (no weight, gradient,
 * activation or scratch memory: the dry run) */
static ml_status model_build(Model *m, const ModelConfig *cfg, int alloc) {
    memset(m, 0, sizeof *m);
    m->layout_only = !alloc;
    m->cfg = *cfg;
    MoeConfig *hc = &m->cfg.head;
    if (cfg->in_c < 1 || cfg->in_c > 4 || cfg->in_h < 4 || cfg->in_w < 4 || cfg->in_h > 1024 || cfg->in_w > 1024)
        return ml_fail(ML_ERR_ARG, "input shape %dx%dx%d not supported (need 4..1024 pixels, 1..4 channels)", cfg->in_h,
                       cfg->in_w, cfg->in_c);
    if (cfg->classes < 2) return ml_fail(ML_ERR_ARG, "need at least 2 classes, got %d", cfg->classes);
    if (!(cfg->width > 0.0f) || cfg->width > 16.0f)
        return ml_fail(ML_ERR_ARG, "--width must be in (0, 16], got %g", cfg->width);
    if (cfg->batch < 2 || cfg->batch > 65536)
        return ml_fail(ML_ERR_ARG, "--batch must be in [2, 65536], got %d", cfg->batch);
    if (hc->k < 1 || hc->h < 1) return ml_fail(ML_ERR_ARG, "--k and --hidden must be positive");
    m->c0 = (int)lroundf(32.0f * cfg->width);
    if (m->c0 < 1) m->c0 = 1;
    m->d = 8 * m->c0;
    hc->d = m->d;
    m->fc1_w = m->fc1_b = m->fc2_w = m->fc2_b = m->moe_first = -1;

    /* ---- backbone */
    int c = m->c0, H = cfg->in_h, W = cfg->in_w;
    add_unit(m, UNIT_FULL3X3, cfg->in_c, c, H, W, 1, "stem.conv", "stem.bn", "stem");
    for (int i = 1; i <= 3; i++) {
        char cn[32], bn[32], lb[32], cn2[32], bn2[32], lb2[32];
        if (cfg->backbone == BACKBONE_DW) {
            snprintf(cn, sizeof cn, "block%d.dw", i);
            snprintf(bn, sizeof bn, "block%d.bn1", i);
            snprintf(lb, sizeof lb, "block%d.dw", i);
            add_unit(m, UNIT_DW3X3, c, c, H, W, 2, cn, bn, lb);
            H = conv_out_size(H, 2);
            W = conv_out_size(W, 2);
            snprintf(cn2, sizeof cn2, "block%d.pw", i);
            snprintf(bn2, sizeof bn2, "block%d.bn2", i);
            snprintf(lb2, sizeof lb2, "block%d.pw", i);
            add_unit(m, UNIT_PW1X1, c, 2 * c, H, W, 1, cn2, bn2, lb2);
        } else {
            snprintf(cn, sizeof cn, "block%d.conv", i);
            snprintf(bn, sizeof bn, "block%d.bn", i);
            snprintf(lb, sizeof lb, "block%d.conv", i);
            add_unit(m, UNIT_FULL3X3, c, 2 * c, H, W, 2, cn, bn, lb);
            H = conv_out_size(H, 2);
            W = conv_out_size(W, 2);
        }
        c *= 2;
    }
    ML_ASSERT(c == m->d);
    m->flops.backbone = 0;
    for (int i = 0; i < m->nunits; i++) m->flops.backbone += m->units[i].flops;
    ml_status bst = add_backbone_layers(m);
    if (bst != ML_OK) {
        model_free(m);
        return bst;
    }

    /* ---- head */
    const int d = m->d, Bmax = cfg->batch;
    if (hc->kind == HEAD_DENSE) {
        const int kh = hc->k * hc->h;
        m->fc1_w = PARAM(1, 2, kh, d, 0, 0, "head.fc1.weight");
        m->fc1_b = PARAM(0, 1, kh, 0, 0, 0, "head.fc1.bias");
        m->fc2_w = PARAM(1, 2, d, kh, 0, 0, "head.fc2.weight");
        m->fc2_b = PARAM(0, 1, d, 0, 0, 0, "head.fc2.bias");
        m->flops.expert = 4.0 * d * kh;
        m->flops.head_active = m->flops.expert;
        m->flops.routed = 0;
        m->flops.router = 0;
    } else {
        ml_status st = m->layout_only ? moe_init_layout(&m->moe, hc, Bmax) : moe_init(&m->moe, hc, Bmax);
        if (st != ML_OK) {
            model_free(m); /* the backbone layers' routing state */
            return st;
        }
        const int E = hc->E, h = hc->h, P = m->moe.P;
        if (hc->kind == HEAD_SOFTMOE_BATCH) m->moe_first = PARAM(0, 2, E * P, d, 0, 0, "head.router.weight");
        else m->moe_first = PARAM(0, 2, E, d, 0, 0, "head.router.weight");
        const int ex = PARAM(1, 3, E, h, d, 0, "head.experts.fc1.weight");
        PARAM(0, 2, E, h, 0, 0, "head.experts.fc1.bias");
        PARAM(1, 3, E, d, h, 0, "head.experts.fc2.weight");
        PARAM(0, 2, E, d, 0, 0, "head.experts.fc2.bias");
        for (int t = ex; t < ex + 4; t++) m->params[t].overwrite = 1; /* moe_backward writes them whole (moe.h) */
        m->flops.expert = moe_expert_flops(hc);
        m->flops.router = moe_router_flops(hc, Bmax);
        m->flops.routed = moe_nominal_pairs(hc, Bmax) * m->flops.expert;
        m->flops.head_active = m->flops.router + m->flops.routed;
    }
    m->cls_w = PARAM(1, 2, cfg->classes, d, 0, 0, "classifier.weight");
    m->cls_b = PARAM(0, 1, cfg->classes, 0, 0, 0, "classifier.bias");
    m->flops.classifier = 2.0 * d * cfg->classes;

    /* ---- activations (sized for Bmax) */
    long na = 0, maxact = 0, maxcol = 0, maxcbw = 2, nwg = 1, maxoc = 1;
    m->act.x = carve(&na, (long)cfg->in_c * Bmax * cfg->in_h * cfg->in_w);
    maxact = (long)cfg->in_c * Bmax * cfg->in_h * cfg->in_w;
    for (int i = 0; i < m->nunits; i++) {
        Unit *u = &m->units[i];
        long outn = (long)u->OC * Bmax * u->Ho * u->Wo;
        long coln = (long)u->C * 9 * Bmax * u->Ho * u->Wo;
        u->col = u->kind == UNIT_FULL3X3 ? carve(&na, coln) : -1;
        if (u->kind == UNIT_FULL3X3 && i > 0 && coln > maxcol) maxcol = coln;
        u->z = carve(&na, outn);
        u->out = carve(&na, outn);
        u->mean = carve(&na, u->OC);
        u->rstd = carve(&na, u->OC);
        u->coef = carve(&na, 2L * u->OC);
        if (u->kind == UNIT_FULL3X3) {
            u->chunk = conv3x3_bn_chunk(u->C, u->OC, u->Ho, u->Wo);
            const long nw = 2 * conv3x3_bn_work_doubles(Bmax, u->OC, u->chunk); /* in floats */
            if (nw > maxcbw) maxcbw = nw;
        }
        if (i == 0 && u->kind == UNIT_FULL3X3) { /* no input gradient: BN backward + weight gradient in chunks */
            u->wchunk = conv3x3_wgrad_chunk(u->C, u->OC, u->H, u->W, u->stride);
            nwg = conv3x3_wgrad_part_floats(Bmax, u->C, u->OC, u->wchunk);
        }
        /* the batch norm + ReLU of a unit read only by the next, depthwise unit is applied there */
        const int st = m->unit_stage[i];
        u->defer = !cfg->sync_bn && i + 1 < m->nunits && m->units[i + 1].kind == UNIT_DW3X3 && u->Ho * u->Wo <= DW_BN_MAX_PLANE &&
                   !(st >= 0 && (m->stage_moe[st] >= 0 || m->stage_ffn[st] >= 0));
        long inn = (long)u->C * Bmax * u->H * u->W;
        if (u->OC > maxoc) maxoc = u->OC;
        if (outn > maxact) maxact = outn;
        if (inn > maxact) maxact = inn;
    }
    /* backbone layers: outputs and what their backward needs; scratch sized to the largest */
    long a_pool[MODEL_MAX_BBL] = {0}, a_xg[MODEL_MAX_BBL] = {0}, a_yo[MODEL_MAX_BBL] = {0};
    long a_hid[2 * MODEL_MAX_BBL] = {0}, max_dhid = 1, max_dpool = 1;
    for (int s = 0; s < MODEL_MAX_BBL; s++) m->act.bbl[s] = -1;
    /* a routed layer's expert-output buffers: one per thread that may run its items (the cores,
     * or more threads if asked for), at most one per gathered row */
    const int want_yo = omp_get_max_threads() > omp_get_num_procs() ? omp_get_max_threads() : omp_get_num_procs();
    for (int i = 0; i < m->nmoec; i++) {
        MoeConv *L = &m->moec[i];
        const long R = moeconv_cols(L), hh = L->route.cfg.h;
        L->nyo = (long)want_yo < (long)L->route.cfg.k * Bmax ? want_yo : L->route.cfg.k * Bmax;
        m->act.bbl[L->stage] = carve(&na, (long)L->C * Bmax * L->HW);
        a_pool[i] = carve(&na, (long)Bmax * L->C);
        a_xg[i] = carve(&na, (long)Bmax * L->C);
        a_hid[i] = carve(&na, hh * R);
        a_yo[i] = carve(&na, (long)L->nyo * L->C * L->HW);
        if (hh * R > max_dhid) max_dhid = hh * R;
        if ((long)Bmax * L->C > max_dpool) max_dpool = (long)Bmax * L->C;
    }
    for (int i = 0; i < m->nffnc; i++) {
        const FfnConv *L = &m->ffnc[i];
        const long n = (long)L->hidden * Bmax * L->HW;
        m->act.bbl[L->stage] = carve(&na, (long)L->C * Bmax * L->HW);
        a_hid[MODEL_MAX_BBL + i] = carve(&na, n);
        if (n > max_dhid) max_dhid = n;
    }
    const long kh = (long)hc->k * hc->h;
    m->act.feat = carve(&na, (long)Bmax * d);
    m->act.h1 = carve(&na, hc->kind == HEAD_DENSE ? Bmax * kh : 1);
    m->act.y = carve(&na, (long)Bmax * d);
    m->act.logits = carve(&na, (long)Bmax * cfg->classes);
    m->act.probs = carve(&na, (long)Bmax * cfg->classes);
    m->act.n = na;

    long ns = 0;
    long o_g0 = carve(&ns, maxact), o_g1 = carve(&ns, maxact), o_dcol = carve(&ns, maxcol ? maxcol : 1);
    long o_cbw = carve(&ns, maxcbw), o_wg = carve(&ns, nwg), o_wgm = carve(&ns, 2L * m->units[0].OC);
    long o_bns = carve(&ns, 4L * maxoc); /* doubles */
    long o_dfeat = carve(&ns, (long)Bmax * d), o_dy = carve(&ns, (long)Bmax * d);
    long o_dh1 = carve(&ns, hc->kind == HEAD_DENSE ? Bmax * kh : 1);
    long o_dl = carve(&ns, (long)Bmax * cfg->classes);
    long o_dhid = 0, o_dpool = 0;
    if (m->nmoec + m->nffnc > 0) {
        o_dhid = carve(&ns, max_dhid);
        o_dpool = carve(&ns, max_dpool);
    }
    m->ws.n = ns;
    if (!alloc) return ML_OK;

    m->param = ml_alloc(sizeof(float) * m->n_param);
    m->grad = ml_alloc(sizeof(float) * m->n_param);
    m->buf = ml_alloc(sizeof(float) * (m->n_buf ? m->n_buf : 1));
    m->act.buf = ml_alloc(sizeof(float) * m->act.n);
    m->ws.buf = ml_alloc(sizeof(float) * m->ws.n);
    if (!m->param || !m->grad || !m->buf || !m->act.buf || !m->ws.buf) {
        /* the sizes are read before model_free, which clears *m */
        const double mib_act = m->act.n * 4.0 / 1048576.0;
        const double mib_all = (2.0 * m->n_param + m->n_buf + m->act.n + m->ws.n) * 4.0 / 1048576.0;
        model_free(m);
        return ml_fail(ML_ERR_NOMEM, "out of memory allocating the model (%.1f MiB, %.1f MiB of it activations)",
                       mib_all, mib_act);
    }
    m->ws.g0 = m->ws.buf + o_g0;
    m->ws.g1 = m->ws.buf + o_g1;
    m->ws.dcol = m->ws.buf + o_dcol;
    m->ws.cbwork = (double *)(m->ws.buf + o_cbw);
    m->ws.wgpart = m->ws.buf + o_wg;
    m->ws.wgmean = m->ws.buf + o_wgm;
    m->ws.bnsums = (double *)(m->ws.buf + o_bns);
    m->ws.dfeat = m->ws.buf + o_dfeat;
    m->ws.dy = m->ws.buf + o_dy;
    m->ws.dh1 = m->ws.buf + o_dh1;
    m->ws.dlogits = m->ws.buf + o_dl;
    point_backbone_layers(m, a_pool, a_xg, a_hid, a_yo, m->ws.buf + o_dhid, m->ws.buf + o_dpool);
    if (m->moe_first >= 0) {
        moe_params_point(&m->moe_p, m->param + m->params[m->moe_first].off, hc, Bmax);
        moe_params_point(&m->moe_g, m->grad + m->params[m->moe_first].off, hc, Bmax);
        ML_ASSERT((long)moe_param_count(hc, Bmax) <= m->params[m->cls_w].off - m->params[m->moe_first].off);
        /* the five MoE tensors must sit exactly where moe_params_point puts them */
        ML_ASSERT(m->moe_p.w1 == m->param + m->params[m->moe_first + 1].off);
        ML_ASSERT(m->moe_p.b1 == m->param + m->params[m->moe_first + 2].off);
        ML_ASSERT(m->moe_p.w2 == m->param + m->params[m->moe_first + 3].off);
        ML_ASSERT(m->moe_p.b2 == m->param + m->params[m->moe_first + 4].off);
    }
    return ML_OK;
}

void model_free(Model *m) {
    if (m->moe_first >= 0 && m->cfg.head.kind != HEAD_DENSE) moe_free(&m->moe);
    for (int i = 0; i < m->nmoec; i++) moe_free(&m->moec[i].route);
    ml_free(m->param);
    ml_free(m->grad);
    ml_free(m->buf);
    ml_free(m->act.buf);
    ml_free(m->ws.buf);
    memset(m, 0, sizeof *m);
}

/* ---------------------------------------------------------------- initialisation */

static void fill_normal(float *p, long n, float std, Rng *r) {
    for (long i = 0; i < n; i++) p[i] = std * rng_normal(r);
}
static void fill_uniform(float *p, long n, float bound, Rng *r) {
    for (long i = 0; i < n; i++) p[i] = bound * (2.0f * rng_uniform(r) - 1.0f);
}

static const char *const fc2_init_names[] = {"normal", "zero", "zero-backbone", NULL};
const char *fc2_init_name(Fc2Init f) { return (unsigned)f < 3 ? fc2_init_names[f] : "?"; }
int fc2_init_parse(const char *s, Fc2Init *f) {
    for (int i = 0; s && fc2_init_names[i]; i++)
        if (!strcmp(s, fc2_init_names[i])) {
            *f = (Fc2Init)i;
            return 0;
        }
    return -1;
}

void model_init_params(Model *m, Rng *rng) {
    memset(m->param, 0, sizeof(float) * m->n_param);
    for (int i = 0; i < m->nunits; i++) {
        Unit *u = &m->units[i];
        TensorInfo *w = &m->params[u->w];
        int fan_in = w->shape[1] * w->shape[2] * w->shape[3];
        fill_normal(m->param + w->off, w->n, sqrtf(2.0f / fan_in), rng);
        float *g = m->param + m->params[u->gamma].off;
        for (int c = 0; c < u->OC; c++) g[c] = 1.0f;
        float *rv = m->buf + m->bufs[u->run_var].off, *rm = m->buf + m->bufs[u->run_mean].off;
        for (int c = 0; c < u->OC; c++) {
            rv[c] = 1.0f;
            rm[c] = 0.0f;
        }
    }
    const int d = m->d;
    if (m->cfg.head.kind == HEAD_DENSE) {
        TensorInfo *w1 = &m->params[m->fc1_w], *w2 = &m->params[m->fc2_w];
        fill_normal(m->param + w1->off, w1->n, sqrtf(2.0f / d), rng);
        fill_normal(m->param + w2->off, w2->n, sqrtf(1.0f / w2->shape[1]), rng);
        if (m->cfg.fc2_init == FC2_ZERO) memset(m->param + w2->off, 0, sizeof(float) * w2->n); /* drawn all the same */
    } else {
        TensorInfo *r = &m->params[m->moe_first], *w1 = &m->params[m->moe_first + 1],
                   *w2 = &m->params[m->moe_first + 3];
        fill_uniform(m->param + r->off, r->n, 1.0f / sqrtf((float)d), rng);
        fill_normal(m->param + w1->off, w1->n, sqrtf(2.0f / d), rng);
        fill_normal(m->param + w2->off, w2->n, sqrtf(1.0f / m->cfg.head.h), rng);
        if (m->cfg.fc2_init == FC2_ZERO) memset(m->param + w2->off, 0, sizeof(float) * w2->n);
        for (int e = 0; e < m->cfg.head.E; e++) m->moe.bias[e] = 0.0f;
    }
    TensorInfo *cw = &m->params[m->cls_w];
    fill_uniform(m->param + cw->off, cw->n, 1.0f / sqrtf((float)d), rng);
    /* backbone layers last, so that a model without them draws exactly as before */
    for (int i = 0; i < m->nmoec; i++) {
        MoeConv *L = &m->moec[i];
        const int C = L->C, h = L->route.cfg.h;
        TensorInfo *r = &m->params[L->t_router];
        fill_uniform(m->param + r->off, r->n, 1.0f / sqrtf((float)C), rng);
        for (int e = 0; e < L->route.cfg.E; e++) {
            fill_normal(L->p.w1[e], (long)h * C, sqrtf(2.0f / C), rng);
            fill_normal(L->p.w2[e], (long)C * h, sqrtf(1.0f / h), rng);
            if (m->cfg.fc2_init != FC2_NORMAL) memset(L->p.w2[e], 0, sizeof(float) * (size_t)C * h);
        }
        for (int e = 0; e < L->route.cfg.E; e++) L->route.bias[e] = 0.0f;
    }
    for (int i = 0; i < m->nffnc; i++) {
        FfnConv *L = &m->ffnc[i];
        fill_normal(L->w1, (long)L->hidden * L->C, sqrtf(2.0f / L->C), rng);
        fill_normal(L->w2, (long)L->C * L->hidden, sqrtf(1.0f / L->hidden), rng);
        if (m->cfg.fc2_init != FC2_NORMAL) memset(L->w2, 0, sizeof(float) * (size_t)L->C * L->hidden);
    }
}

/* ---------------------------------------------------------------- forward / backward */

#define P(i) (m->param + m->params[i].off)
#define G(i) (m->grad + m->params[i].off)
#define BUFP(i) (m->buf + m->bufs[i].off)
#define A(off) (m->act.buf + (off))

/* stage timing for --profile: PROF(slot) closes the stage that began at the previous mark; the
 * time spent inside ML_SGEMM during the stage goes to the matching _gemm array as well */
#define PROF_BEGIN                                      \
    double prof_t = m->prof.on ? ml_now() : 0.0;        \
    double prof_g = m->prof.on ? ml_gemm_seconds : 0.0; \
    if (m->prof.on) ml_gemm_timing = 1
#define PROF(arr, slot)                                 \
    do {                                                \
        if (m->prof.on) {                               \
            double t_ = ml_now(), g_ = ml_gemm_seconds; \
            m->prof.arr[slot] += t_ - prof_t;                \
            m->prof.arr##_gemm[slot] += g_ - prof_g;         \
            prof_t = t_;                                \
            prof_g = g_;                                \
        }                                               \
    } while (0)

const float *model_forward(Model *m, int B, int training, float tau, Rng *rng) {
    ML_ASSERT(B >= 1 && B <= m->cfg.batch);
    PROF_BEGIN;
    m->last_B = B;
    m->last_training = training;
    const float *in = A(m->act.x);
    for (int i = 0; i < m->nunits; i++) {
        Unit *u = &m->units[i];
        const int N = B * u->Ho * u->Wo;
        float *ca = A(u->coef), *cb = A(u->coef) + u->OC;
        const Unit *pd = i > 0 && m->units[i - 1].defer ? &m->units[i - 1] : NULL; /* its BN + ReLU is ours */
        const int sync = training && m->dist.bn_sum; /* batch statistics over every rank (no unit defers) */
        switch (u->kind) {
        case UNIT_FULL3X3:
            if (training && !sync) /* conv + the batch statistics, chunk by chunk */
                conv3x3_bn_stats_train(A(u->z), i == 0 && conv3x3_direct_ok(u->C, u->H, u->W, u->stride) ? NULL : A(u->col), ca, cb, A(u->mean), A(u->rstd), m->ws.cbwork, in, P(u->w),
                                       P(u->gamma), P(u->beta), BUFP(u->run_mean), BUFP(u->run_var), m->cfg.bn_momentum,
                                       B, u->C, u->H, u->W, u->OC, u->stride, u->chunk);
            else if (conv3x3_direct_ok(u->C, u->H, u->W, u->stride)) /* no col needed */
                conv3x3_direct_forward(A(u->z), in, P(u->w), B, u->C, u->H, u->W, u->OC);
            else conv3x3_forward(A(u->z), A(u->col), in, P(u->w), B, u->C, u->H, u->W, u->OC, u->stride);
            break;
        case UNIT_DW3X3:
            if (pd)
                dwconv3x3_forward_bnin(A(u->z), A(pd->z), A(pd->coef), A(pd->coef) + pd->OC, P(u->w), B, u->C, u->H,
                                       u->W, u->stride);
            else dwconv3x3_forward(A(u->z), in, P(u->w), B, u->C, u->H, u->W, u->stride);
            break;
        case UNIT_PW1X1: pwconv_forward(A(u->z), in, P(u->w), N, u->C, u->OC); break;
        }
        if (sync) {
            bn_stats_train_sync(ca, cb, A(u->mean), A(u->rstd), A(u->z), P(u->gamma), P(u->beta), BUFP(u->run_mean),
                                BUFP(u->run_var), m->cfg.bn_momentum, u->OC, N, m->dist.bn_sum, m->dist.bn_ctx);
            bn_relu_apply(A(u->out), A(u->z), ca, cb, u->OC, N);
        } else if (!training) {
            bn_scale_shift_eval(ca, cb, P(u->gamma), P(u->beta), BUFP(u->run_mean), BUFP(u->run_var), u->OC);
            if (!u->defer) bn_relu_apply(A(u->out), A(u->z), ca, cb, u->OC, N); /* bn_forward_eval's values */
        } else if (u->kind == UNIT_FULL3X3) {
            if (!u->defer) bn_relu_apply(A(u->out), A(u->z), ca, cb, u->OC, N);
        } else if (u->defer) {
            bn_stats_train(ca, cb, A(u->mean), A(u->rstd), A(u->z), P(u->gamma), P(u->beta), BUFP(u->run_mean),
                           BUFP(u->run_var), m->cfg.bn_momentum, u->OC, N);
        } else {
            bn_forward_train(A(u->out), A(u->mean), A(u->rstd), A(u->z), P(u->gamma), P(u->beta), BUFP(u->run_mean),
                             BUFP(u->run_var), m->cfg.bn_momentum, u->OC, N, 1);
        }
        in = u->defer ? NULL : A(u->out);
        PROF(fwd, i);
        const int s = m->unit_stage[i]; /* a routed or dense layer after this stage */
        if (s >= 0 && m->stage_moe[s] >= 0) {
            MoeConv *L = &m->moec[m->stage_moe[s]];
            moeconv_forward(L, A(m->act.bbl[s]), in, B, L->tau_own > 0 ? L->tau_own : tau, training, rng);
            in = A(m->act.bbl[s]);
            PROF(fwd, MODEL_PROF_BBL(s));
        } else if (s >= 0 && m->stage_ffn[s] >= 0) {
            ffnconv_forward(&m->ffnc[m->stage_ffn[s]], A(m->act.bbl[s]), in, B);
            in = A(m->act.bbl[s]);
            PROF(fwd, MODEL_PROF_BBL(s));
        }
    }
    const Unit *last = &m->units[m->nunits - 1];
    const int d = m->d;
    float *feat = A(m->act.feat), *y = A(m->act.y);
    gap_forward(feat, in, B, d, last->Ho * last->Wo);
    PROF(fwd, m->nunits);
    if (m->cfg.head.kind == HEAD_DENSE) {
        const int kh = m->cfg.head.k * m->cfg.head.h;
        float *h1 = A(m->act.h1);
        linear_forward(h1, feat, P(m->fc1_w), NULL, B, d, kh);
        bias_relu_forward(h1, P(m->fc1_b), B, kh); /* bias + ReLU in one pass */
        linear_forward(y, h1, P(m->fc2_w), P(m->fc2_b), B, kh, d);
        for (long i = 0; i < (long)B * d; i++) y[i] += feat[i];
    } else {
        moe_forward(&m->moe, y, feat, &m->moe_p, B, tau, training, rng);
    }
    PROF(fwd, m->nunits + 1);
    float *logits = A(m->act.logits);
    linear_forward(logits, y, P(m->cls_w), P(m->cls_b), B, d, m->cfg.classes);
    PROF(fwd, m->nunits + 2);
    return logits;
}

double model_loss(Model *m, const int32_t *labels, int B, int *correct) {
    return xent_forward(A(m->act.probs), A(m->act.logits), labels, B, m->cfg.classes, correct);
}

void model_zero_grad(Model *m) { memset(m->grad, 0, sizeof(float) * m->n_param); }

/* tensors [t0, t1] of the table are final: tell the listener (model.h grad_ready) */
static void grad_ready_tensors(Model *m, int t0, int t1) {
    if (!m->dist.grad_ready || t0 < 0 || t1 < t0) return;
    const long off = m->params[t0].off, end = m->params[t1].off + ((m->params[t1].n + 15) & ~15L);
    m->dist.grad_ready(m->dist.grad_ctx, off, end - off);
}

void model_backward(Model *m, const int32_t *labels, int B) {
    ML_ASSERT(B == m->last_B && m->last_training);
    const int d = m->d, K = m->cfg.classes;
    PROF_BEGIN;
    xent_backward(m->ws.dlogits, A(m->act.probs), labels, B, K, 1.0f / B);
    float *feat = A(m->act.feat), *y = A(m->act.y);
    linear_backward(m->ws.dy, G(m->cls_w), G(m->cls_b), m->ws.dlogits, y, P(m->cls_w), B, d, K);
    grad_ready_tensors(m, m->cls_w, m->cls_b);
    PROF(bwd, m->nunits + 2);
    if (m->cfg.head.kind == HEAD_DENSE) {
        const int kh = m->cfg.head.k * m->cfg.head.h;
        float *h1 = A(m->act.h1);
        linear_backward(m->ws.dh1, G(m->fc2_w), G(m->fc2_b), m->ws.dy, h1, P(m->fc2_w), B, kh, d);
        relu_bias_backward(m->ws.dh1, G(m->fc1_b), h1, B, kh); /* ReLU mask + bias gradient in one pass */
        linear_backward(m->ws.dfeat, G(m->fc1_w), NULL, m->ws.dh1, feat, P(m->fc1_w), B, d, kh);
        for (long i = 0; i < (long)B * d; i++) m->ws.dfeat[i] += m->ws.dy[i];
    } else {
        moe_backward(&m->moe, m->ws.dfeat, &m->moe_g, m->ws.dy, feat, &m->moe_p, B);
    }
    grad_ready_tensors(m, m->cfg.head.kind == HEAD_DENSE ? m->fc1_w : m->moe_first, m->cls_w - 1);
    PROF(bwd, m->nunits + 1);
    const Unit *last = &m->units[m->nunits - 1];
    float *dcur = m->ws.g0, *dnext = m->ws.g1;
    gap_backward(dcur, m->ws.dfeat, B, d, last->Ho * last->Wo);
    PROF(bwd, m->nunits);
    for (int i = m->nunits - 1; i >= 0; i--) {
        Unit *u = &m->units[i];
        const int N = B * u->Ho * u->Wo;
        const int s = m->unit_stage[i]; /* the layer after this stage first: dcur is its output's gradient */
        if (s >= 0 && (m->stage_moe[s] >= 0 || m->stage_ffn[s] >= 0)) {
            if (m->stage_moe[s] >= 0) {
                MoeConv *L = &m->moec[m->stage_moe[s]];
                moeconv_backward(L, dnext, dcur, A(u->out), B);
                grad_ready_tensors(m, L->t_router, L->t_router + 4 * L->route.cfg.E);
            } else {
                ffnconv_backward(&m->ffnc[m->stage_ffn[s]], dnext, dcur, A(u->out), B);
                grad_ready_tensors(m, m->ffnc[m->stage_ffn[s]].t_w1, m->ffnc[m->stage_ffn[s]].t_w1 + 3);
            }
            float *t = dcur;
            dcur = dnext;
            dnext = t;
            PROF(bwd, MODEL_PROF_BBL(s));
        }
        const int sp = i > 0 ? m->unit_stage[i - 1] : -1; /* this unit's input: a layer's output? */
        const float *in = i == 0 ? A(m->act.x) : sp >= 0 && m->act.bbl[sp] >= 0 ? A(m->act.bbl[sp]) : A(m->units[i - 1].out);
        float *din = i == 0 ? NULL : dnext;
        const int presummed = u->defer; /* the depthwise consumer took this unit's batch-norm sums */
        if (i == 0 && u->kind == UNIT_FULL3X3) { /* the stem: no input gradient; the im2col rows are made here */
            float *mdy = m->ws.wgmean, *mdyx = m->ws.wgmean + u->OC;
            if (m->dist.bn_sum)
                bn_relu_backward_sync(NULL, mdy, mdyx, G(u->gamma), G(u->beta), dcur, A(u->z), A(u->mean), A(u->rstd),
                                      P(u->gamma), P(u->beta), u->OC, N, m->dist.bn_sum, m->dist.bn_ctx);
            else if (presummed) bn_relu_backward_means(mdy, mdyx, G(u->gamma), G(u->beta), m->ws.bnsums, u->OC, N);
            else
                bn_relu_backward_sums(mdy, mdyx, G(u->gamma), G(u->beta), dcur, A(u->z), A(u->mean), A(u->rstd),
                                      P(u->gamma), P(u->beta), u->OC, N);
            conv3x3_bn_backward_wgrad(dcur, G(u->w), A(u->col), m->ws.wgpart, A(u->z), in, mdy, mdyx, A(u->mean),
                                      A(u->rstd), P(u->gamma), P(u->beta), B, u->C, u->H, u->W, u->OC, u->stride,
                                      u->wchunk);
            grad_ready_tensors(m, u->w, u->beta);
            PROF(bwd, i);
            break;
        }
        if (m->dist.bn_sum)
            bn_relu_backward_sync(dcur, NULL, NULL, G(u->gamma), G(u->beta), dcur, A(u->z), A(u->mean), A(u->rstd),
                                  P(u->gamma), P(u->beta), u->OC, N, m->dist.bn_sum, m->dist.bn_ctx);
        else if (presummed)
            bn_relu_backward_presummed(dcur, G(u->gamma), G(u->beta), dcur, A(u->z), A(u->mean), A(u->rstd),
                                       P(u->gamma), P(u->beta), m->ws.bnsums, u->OC, N);
        else
            bn_relu_backward(dcur, G(u->gamma), G(u->beta), dcur, A(u->z), A(u->mean), A(u->rstd), P(u->gamma),
                             P(u->beta), u->OC, N);
        switch (u->kind) {
        case UNIT_FULL3X3:
            conv3x3_backward(din, G(u->w), m->ws.dcol, dcur, A(u->col), P(u->w), B, u->C, u->H, u->W, u->OC, u->stride);
            break;
        case UNIT_DW3X3:
            if (i > 0 && m->units[i - 1].defer) {
                const Unit *pd = &m->units[i - 1];
                dwconv3x3_backward_bnin_sums(din, G(u->w), m->ws.bnsums, dcur, A(pd->z), A(pd->coef),
                                             A(pd->coef) + pd->OC, A(pd->mean), A(pd->rstd), P(u->w), B, u->C, u->H,
                                             u->W, u->stride);
            } else {
                dwconv3x3_backward(din, G(u->w), dcur, in, P(u->w), B, u->C, u->H, u->W, u->stride);
            }
            break;
        case UNIT_PW1X1: pwconv_backward(din, G(u->w), dcur, in, P(u->w), B * u->H * u->W, u->C, u->OC); break;
        }
        grad_ready_tensors(m, u->w, u->beta);
        float *t = dcur;
        dcur = dnext;
        dnext = t;
        PROF(bwd, i);
    }
}

double model_flops(const Model *m) {
    /* the backbone layers' terms are 0.0 without them: the sum is then exactly the head model's */
    return m->flops.backbone + m->flops.bb_extra + m->flops.bb_routed + m->flops.head_active + m->flops.classifier;
}

double model_rho_nominal(const Model *m) {
    double total = model_flops(m);
    return total > 0 ? (m->flops.routed + m->flops.bb_routed) / total : 0.0;
}

int model_has_routing(const Model *m) { return m->cfg.head.kind != HEAD_DENSE || m->nmoec > 0; }

double model_rho_realized(const Model *m) {
    const MoeConfig *hc = &m->cfg.head;
    const int moe_head = hc->kind != HEAD_DENSE;
    if (m->nmoec == 0) /* the head's own definition (moe.h), unchanged */
        return moe_head ? moe_rho_realized(hc, m->flops.backbone, m->flops.classifier, m->cfg.batch,
                                           m->moe.stats.pairs_per_sample)
                        : 0.0;
    double routed = moe_head ? m->moe.stats.pairs_per_sample * m->flops.expert : 0.0;
    for (int i = 0; i < m->nmoec; i++) routed += m->moec[i].route.stats.pairs_per_sample * m->moec[i].flops_expert;
    const double fixed = m->flops.backbone + m->flops.bb_extra + (moe_head ? m->flops.router : m->flops.head_active) +
                         m->flops.classifier;
    return fixed + routed > 0 ? routed / (fixed + routed) : 0.0;
}

double model_layer_rho_realized(const Model *m, int i) {
    const MoeConfig *hc = &m->cfg.head;
    const int moe_head = hc->kind != HEAD_DENSE;
    if (m->nmoec == 0) return i < 0 ? model_rho_realized(m) : 0.0;
    double routed = moe_head ? m->moe.stats.pairs_per_sample * m->flops.expert : 0.0;
    for (int j = 0; j < m->nmoec; j++) routed += m->moec[j].route.stats.pairs_per_sample * m->moec[j].flops_expert;
    const double fixed = m->flops.backbone + m->flops.bb_extra + (moe_head ? m->flops.router : m->flops.head_active) +
                         m->flops.classifier;
    const double mine = i < 0 ? (moe_head ? m->moe.stats.pairs_per_sample * m->flops.expert : 0.0)
                              : m->moec[i].route.stats.pairs_per_sample * m->moec[i].flops_expert;
    return fixed + routed > 0 ? mine / (fixed + routed) : 0.0;
}

double model_backbone_aux_loss(const Model *m) {
    double a = 0.0;
    for (int i = 0; i < m->nmoec; i++) {
        const MoeHead *r = &m->moec[i].route;
        a += r->cfg.alpha * r->stats.l_aux + r->cfg.beta * r->stats.l_z;
    }
    return a;
}

void model_backbone_update_bias(Model *m) {
    for (int i = 0; i < m->nmoec; i++) moe_update_bias(&m->moec[i].route);
}

void model_preset_backbone_moe(ModelConfig *c) {
    c->in_c = 3;
    c->in_h = 64;
    c->in_w = 64;
    c->backbone = BACKBONE_DW;
    c->width = 1.0f;
    c->head.kind = HEAD_DENSE;
    c->head.E = 8;
    c->head.k = 2;
    c->moe_n = 2;
    c->moe_after[0] = 2;
    c->moe_after[1] = 3;
    c->ffn_n = 0;
    c->bb_nh = 2;
    c->bb_hidden[0] = 32;
    c->bb_hidden[1] = 64;
    c->bb_nE = c->bb_nk = 0;
}
