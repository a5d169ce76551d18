/* optim.c — SGD with momentum (optionally Nesterov) and AdamW, both with decoupled weight decay;
 * learning-rate schedules with linear warm-up. */
#include "optim.h"

#include <math.h>
#include <string.h>

#include "core/vocab.h"

#define KIND_NAME_(e, name, ...) name,
const char *const optim_kind_names[] = {OPT_KINDS(KIND_NAME_) NULL};
const char *const lr_kind_names[] = {LR_KINDS(KIND_NAME_) NULL};
#undef KIND_NAME_

float optim_default_wd(OptKind kind) {
    return kind == OPT_ADAMW ? 0.05f : 5e-3f; /* SGD: decoupled 5e-3 ~ PyTorch's coupled 5e-4 at momentum 0.9 */
}

void optim_config_defaults(OptConfig *c, OptKind kind) {
    memset(c, 0, sizeof *c);
    c->kind = kind;
    c->momentum = 0.9f;
    c->beta1 = 0.9f;
    c->beta2 = 0.999f;
    c->eps = 1e-8f;
    c->wd = optim_default_wd(kind);
}

ml_status optim_init(Optimizer *o, const OptConfig *cfg, long n) {
    memset(o, 0, sizeof *o);
    o->cfg = *cfg;
    o->n = n;
    o->m = ml_alloc(sizeof(float) * n);
    o->v = cfg->kind == OPT_ADAMW ? ml_alloc(sizeof(float) * n) : NULL;
    if (!o->m || (cfg->kind == OPT_ADAMW && !o->v)) {
        optim_free(o);
        return ml_fail(ML_ERR_NOMEM, "out of memory for optimiser state");
    }
    return ML_OK;
}

void optim_free(Optimizer *o) {
    ml_free(o->m);
    ml_free(o->v);
    memset(o, 0, sizeof *o);
}

/* One tensor's update; zero (a literal at each call) also clears its gradient. */
static inline __attribute__((always_inline)) void optim_tensor(const OptConfig *c, float *w, float *g, float *mm,
                                                               float *vv, long n, float lr, float decay, float bc1,
                                                               float bc2, const int zero) {
    if (c->kind == OPT_SGD) {
        const float mu = c->momentum;
        if (c->nesterov) {
#pragma omp parallel for schedule(static) if (n > 32768)
            for (long i = 0; i < n; i++) {
                mm[i] = mu * mm[i] + g[i];
                w[i] = w[i] * decay - lr * (g[i] + mu * mm[i]);
                if (zero) g[i] = 0.0f;
            }
        } else {
#pragma omp parallel for schedule(static) if (n > 32768)
            for (long i = 0; i < n; i++) {
                mm[i] = mu * mm[i] + g[i];
                w[i] = w[i] * decay - lr * mm[i];
                if (zero) g[i] = 0.0f;
            }
        }
    } else {
        const float b1 = c->beta1, b2 = c->beta2, eps = c->eps;
#pragma omp parallel for schedule(static) if (n > 32768)
        for (long i = 0; i < n; i++) {
            mm[i] = b1 * mm[i] + (1.0f - b1) * g[i];
            vv[i] = b2 * vv[i] + (1.0f - b2) * g[i] * g[i];
            const float mh = mm[i] / bc1, vh = vv[i] / bc2;
            w[i] = w[i] * decay - lr * mh / (sqrtf(vh) + eps);
            if (zero) g[i] = 0.0f;
        }
    }
}

void optim_step(Optimizer *o, Model *m, float lr) {
    const OptConfig *c = &o->cfg;
    o->t++;
    const float bc1 = 1.0f - powf(c->beta1, (float)o->t), bc2 = 1.0f - powf(c->beta2, (float)o->t);
    for (int ti = 0; ti < m->nparams; ti++) {
        const TensorInfo *t = &m->params[ti];
        float *w = m->param + t->off, *g = m->grad + t->off, *mm = o->m + t->off;
        float *vv = o->v ? o->v + t->off : NULL;
        const float decay = t->decay ? 1.0f - lr * c->wd : 1.0f;
        /* a gradient the backward overwrites is not zeroed: one write pass less over it here, and
         * the backward's GEMMs do not read the zeros back */
        if (t->overwrite) optim_tensor(c, w, g, mm, vv, t->n, lr, decay, bc1, bc2, 0);
        else optim_tensor(c, w, g, mm, vv, t->n, lr, decay, bc1, bc2, 1);
    }
}

int optim_kind_parse(const char *s, OptKind *k) {
    const int i = vocab_find(optim_kind_names, s, 0);
    if (i < 0) return -1;
    *k = (OptKind)i;
    return 0;
}
const char *optim_kind_name(OptKind k) { return optim_kind_names[k == OPT_SGD ? OPT_SGD : OPT_ADAMW]; }

float lr_value(const LrSchedule *s, long step) {
    if (step < 0) step = 0;
    if (s->warmup > 0 && step < s->warmup) return s->base * (float)(step + 1) / (float)s->warmup;
    const long span = s->total - s->warmup;
    double t = span > 0 ? (double)(step - s->warmup) / span : 1.0;
    if (t > 1.0) t = 1.0;
    switch (s->kind) {
    case LR_CONST: return s->base;
    case LR_COSINE: return (float)(s->base * 0.5 * (1.0 + cos(M_PI * t)));
    case LR_STEP: {
        float lr = s->base;
        for (int i = 0; i < 2; i++)
            if (s->milestones[i] > 0 && t >= s->milestones[i]) lr *= s->gamma;
        return lr;
    }
    }
    return s->base;
}

int lr_kind_parse(const char *s, LrKind *k) {
    const int i = s && strcmp(s, "constant") == 0 ? (int)LR_CONST : vocab_find(lr_kind_names, s, 0);
    if (i < 0) return -1;
    *k = (LrKind)i;
    return 0;
}
const char *lr_kind_name(LrKind k) { return k == LR_CONST || k == LR_STEP ? lr_kind_names[k] : "cosine"; }
