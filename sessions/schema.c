/* schema.c — the live.h5 column tables, record-to-row mapping, event type, and the config JSON
 * (session_config_json). See schema.h and the README's "The session format". */
#include "schema.h"
#include "session.h"
#include "h5util.h"

#include <limits.h>
#include <math.h>
#include <stddef.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

const SessCol sess_step_cols[SC_N] = {
    [SC_STEP] = {"step", 1, "steps completed, this one included", SF_I64, offsetof(StepRecord, step), 0},
    [SC_EPOCH] = {"epoch", 1, "1-based epoch of this step", SF_I32, offsetof(StepRecord, epoch), 0},
    [SC_EPOCH_PROGRESS] = {"epoch_progress", 0, "fraction of the epoch done", SF_F64, offsetof(StepRecord, epoch_progress), 0},
    [SC_LOSS] = {"loss", 0, "cross-entropy of the batch", SF_F64, offsetof(StepRecord, loss), 0},
    [SC_LOSS_TOTAL] = {"loss_total", 0, "cross-entropy + alpha L_aux + beta L_z", SF_F64, offsetof(StepRecord, loss_total), 0},
    [SC_ACC] = {"acc", 0, "batch accuracy", SF_F64, offsetof(StepRecord, acc), 0},
    [SC_LR] = {"lr", 0, "learning rate used", SF_F32, offsetof(StepRecord, lr), 0},
    [SC_TAU] = {"tau", 0, "router temperature used", SF_F32, offsetof(StepRecord, tau), 0},
    [SC_IMG_PER_S] = {"img_per_s", 0, "training throughput since the previous record", SF_F64, offsetof(StepRecord, img_per_s), 0},
    [SC_DROP_FRAC] = {"drop_frac", 0, "dropped pairs / (B k)", SF_F64, offsetof(StepRecord, moe.drop_frac), 0},
    [SC_NO_EXPERT_FRAC] = {"no_expert_frac", 0, "samples with every pair dropped / B", SF_F64, offsetof(StepRecord, moe.no_expert_frac), 0},
    [SC_GATE_ENTROPY] = {"gate_entropy", 0, "mean gate entropy / log E", SF_F64, offsetof(StepRecord, moe.gate_entropy), 0},
    [SC_LOAD_ENTROPY] = {"load_entropy", 0, "entropy of the kept load / log E", SF_F64, offsetof(StepRecord, moe.load_entropy), 0},
    [SC_MAXVIO] = {"maxvio", 0, "max kept / mean kept - 1", SF_F64, offsetof(StepRecord, moe.maxvio), 0},
    [SC_CONFIDENCE] = {"confidence", 0, "mean combine weight of the kept pairs", SF_F64, offsetof(StepRecord, moe.confidence), 0},
    [SC_L_AUX] = {"l_aux", 0, "load-balancing loss (unweighted)", SF_F64, offsetof(StepRecord, moe.l_aux), 0},
    [SC_L_Z] = {"l_z", 0, "router z-loss (unweighted)", SF_F64, offsetof(StepRecord, moe.l_z), 0},
    [SC_CAPACITY] = {"capacity", 1, "expert capacity C used (B when dropless)", SF_I32, offsetof(StepRecord, moe.capacity), 0},
    [SC_PAIRS_PER_SAMPLE] = {"pairs_per_sample", 0, "kept pairs / B", SF_F64, offsetof(StepRecord, moe.pairs_per_sample), 0},
    [SC_RHO_REALIZED] = {"rho_realized", 0, "routed FLOPs actually spent / total", SF_F64, offsetof(StepRecord, rho_realized), 0},
    [SC_DEAD_EXPERTS] = {"dead_experts", 1, "experts with no kept pair over the window", SF_I32, offsetof(StepRecord, dead_experts), 0},
    [SC_COLLAPSED] = {"collapsed", 1, "collapse flag over the window", SF_I32, offsetof(StepRecord, collapsed), 0},
    [SC_COLLAPSE_REASON] = {"collapse_reason", 1, "COLLAPSE_* bits: 1 entropy, 2 share, 4 dead", SF_I32, offsetof(StepRecord, collapse_reason), 0},
    [SC_WINDOW_LOAD_ENTROPY] = {"window_load_entropy", 0, "load entropy / log E over the window", SF_F64, offsetof(StepRecord, window_load_entropy), 0},
    [SC_WALL_TIME] = {"wall_time", 0, "Unix time when the record was appended (s)", SF_WALL, 0, 0},
    [SC_CLEAN_FIRST_SHARE] = {"clean_first_share", 0, "largest share of first choices without selection noise",
                              SF_F64, offsetof(StepRecord, moe.clean_first_share), 1},
};

const SessCol sess_step_vecs[SV_N] = {
    [SV_DEMAND] = {"demand", 1, "(T, E) selected pairs per expert before capacity"},
    [SV_KEPT] = {"kept", 1, "(T, E) pairs per expert that got a slot"},
    [SV_MEAN_GATE] = {"mean_gate", 0, "(T, E) mean gate probability per expert"},
    [SV_BIAS] = {"bias", 0, "(T, E) utility bias used by the step"},
};

const SessCol sess_eval_cols[EC_N] = {
    [EC_EPOCH] = {"epoch", 1, "epochs completed", SF_I32, offsetof(EvalRecord, epoch), 0},
    [EC_STEP] = {"step", 1, "steps completed", SF_I64, offsetof(EvalRecord, step), 0},
    [EC_TRAIN_LOSS] = {"train_loss", 0, "mean training cross-entropy over the epoch", SF_F64, offsetof(EvalRecord, train_loss), 0},
    [EC_TRAIN_ACC] = {"train_acc", 0, "mean training accuracy over the epoch", SF_F64, offsetof(EvalRecord, train_acc), 0},
    [EC_TEST_LOSS] = {"test_loss", 0, "test cross-entropy", SF_F64, offsetof(EvalRecord, test_loss), 0},
    [EC_TEST_ACC] = {"test_acc", 0, "test accuracy", SF_F64, offsetof(EvalRecord, test_acc), 0},
    [EC_IMG_PER_S] = {"img_per_s", 0, "training throughput over the epoch", SF_F64, offsetof(EvalRecord, img_per_s), 0},
    [EC_EPOCH_SECONDS] = {"epoch_seconds", 0, "seconds for the epoch and its evaluation", SF_F64, offsetof(EvalRecord, epoch_seconds), 0},
    [EC_ELAPSED] = {"elapsed", 0, "seconds since the trainer started", SF_F64, offsetof(EvalRecord, elapsed), 0},
    [EC_RHO_NOMINAL] = {"rho_nominal", 0, "nominal routed FLOP fraction", SF_F64, offsetof(EvalRecord, rho_nominal), 0},
    [EC_TRAIN_DROP_FRAC] = {"train_drop_frac", 0, "epoch mean of drop_frac", SF_F64, offsetof(EvalRecord, train_drop_frac), 0},
    [EC_TRAIN_MAXVIO] = {"train_maxvio", 0, "epoch mean of maxvio", SF_F64, offsetof(EvalRecord, train_maxvio), 0},
    [EC_TRAIN_RHO_REALIZED] = {"train_rho_realized", 0, "epoch mean of rho_realized", SF_F64, offsetof(EvalRecord, train_rho_realized), 0},
    [EC_WINDOW_LOAD_ENTROPY] = {"window_load_entropy", 0, "load entropy / log E over the window", SF_F64, offsetof(EvalRecord, window_load_entropy), 0},
    [EC_DEAD_EXPERTS] = {"dead_experts", 1, "dead experts at the end of the epoch", SF_I32, offsetof(EvalRecord, dead_experts), 0},
    [EC_COLLAPSED] = {"collapsed", 1, "collapse flag at the end of the epoch", SF_I32, offsetof(EvalRecord, collapsed), 0},
    [EC_COLLAPSE_REASON] = {"collapse_reason", 1, "COLLAPSE_* bits: 1 entropy, 2 share, 4 dead", SF_I32, offsetof(EvalRecord, collapse_reason), 0},
    [EC_MUTUAL_INFO] = {"mutual_info", 0, "I(class; expert) on the test set, nats", SF_F64, offsetof(EvalRecord, mutual_info), 0},
    [EC_TEST_LOAD_ENTROPY] = {"test_load_entropy", 0, "first-choice load entropy / log E on the test set", SF_F64, offsetof(EvalRecord, test_load_entropy), 0},
    [EC_WALL_TIME] = {"wall_time", 0, "Unix time when the record was appended (s)", SF_WALL, 0, 0},
};

double sess_col_get(const SessCol *c, const void *rec, double wall_time) {
    const char *p = (const char *)rec + c->off;
    switch (c->field) {
    case SF_WALL: return wall_time;
    case SF_F64: return *(const double *)p;
    case SF_F32: return *(const float *)p;
    case SF_I32: return *(const int *)p;
    case SF_I64: return (double)*(const long *)p;
    }
    return 0.0;
}

void sess_col_set(const SessCol *c, void *rec, double v) {
    char *p = (char *)rec + c->off;
    switch (c->field) {
    case SF_WALL: break;
    case SF_F64: *(double *)p = v; break;
    case SF_F32: *(float *)p = (float)v; break;
    case SF_I32: *(int *)p = !(v == v) ? 0 : v > INT_MAX ? INT_MAX : v < INT_MIN ? INT_MIN : (int)v; break;
    case SF_I64: *(long *)p = !(v == v) ? 0 : v >= 9.2e18 ? LONG_MAX : v <= -9.2e18 ? LONG_MIN : (long)v; break;
    }
}

void sess_step_row(const StepRecord *r, double wall_time, double *v) {
    for (int c = 0; c < SC_N; c++) v[c] = sess_col_get(&sess_step_cols[c], r, wall_time);
}

void sess_eval_row(const EvalRecord *r, double wall_time, double *v) {
    for (int c = 0; c < EC_N; c++) v[c] = sess_col_get(&sess_eval_cols[c], r, wall_time);
}

hid_t sess_event_type(void) {
    hid_t t = H5Tcreate(H5T_COMPOUND, sizeof(SessEvent));
    hid_t s = h5u_str_type(SESS_EVENT_TEXT);
    if (t < 0 || s < 0 ||
        H5Tinsert(t, "step", HOFFSET(SessEvent, step), H5T_NATIVE_INT64) < 0 ||
        H5Tinsert(t, "wall_time", HOFFSET(SessEvent, wall_time), H5T_NATIVE_DOUBLE) < 0 ||
        H5Tinsert(t, "text", HOFFSET(SessEvent, text), s) < 0) {
        h5u_close(t);
        t = -1;
    }
    h5u_close(s);
    return t;
}

hid_t sess_event_step_type(void) {
    hid_t t = H5Tcreate(H5T_COMPOUND, sizeof(int64_t));
    if (t >= 0 && H5Tinsert(t, "step", 0, H5T_NATIVE_INT64) < 0) {
        H5Tclose(t);
        t = -1;
    }
    return t;
}

/* ------------------------------------------------------------------ config JSON */

typedef struct {
    char *buf;
    size_t n, len;
    int overflow;
    int need_comma;
} Json;

static void js_raw(Json *j, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void js_raw(Json *j, const char *fmt, ...) {
    if (j->overflow) return;
    va_list ap;
    va_start(ap, fmt);
    const int r = vsnprintf(j->buf + j->len, j->n - j->len, fmt, ap);
    va_end(ap);
    if (r < 0 || (size_t)r >= j->n - j->len) { j->overflow = 1; return; }
    j->len += (size_t)r;
}

static void js_str_body(Json *j, const char *s) {
    js_raw(j, "\"");
    for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p; p++) {
        if (*p == '"' || *p == '\\') js_raw(j, "\\%c", *p);
        else if (*p == '\n') js_raw(j, "\\n");
        else if (*p == '\t') js_raw(j, "\\t");
        else if (*p < 0x20) js_raw(j, "\\u%04x", *p);
        else js_raw(j, "%c", *p);
    }
    js_raw(j, "\"");
}

static void js_key(Json *j, const char *k) {
    js_raw(j, "%s", j->need_comma ? ", " : "");
    js_str_body(j, k);
    js_raw(j, ": ");
    j->need_comma = 1;
}

static void js_open(Json *j, const char *k) {
    if (k) js_key(j, k);
    js_raw(j, "{");
    j->need_comma = 0;
}

static void js_close(Json *j) {
    js_raw(j, "}");
    j->need_comma = 1;
}

static void js_int(Json *j, const char *k, long long v) { js_key(j, k); js_raw(j, "%lld", v); }
static void js_u64(Json *j, const char *k, uint64_t v) { js_key(j, k); js_raw(j, "%llu", (unsigned long long)v); }
static void js_str(Json *j, const char *k, const char *v) { js_key(j, k); js_str_body(j, v); }
static void js_num(Json *j, const char *k, double v) {
    js_key(j, k);
    if (isfinite(v)) js_raw(j, "%.9g", v);
    else js_raw(j, "null");
}

ml_status session_config_json(const TrainConfig *c, const char *dataset_spec, char *buf, size_t n) {
    if (!buf || n < 3) return ml_fail(ML_ERR_ARG, "config JSON: buffer too small");
    Json j = {buf, n, 0, 0, 0};
    const ModelConfig *m = &c->model;
    const MoeConfig *h = &m->head;
    js_open(&j, NULL);
    js_str(&j, "dataset", dataset_spec ? dataset_spec : "");
    js_open(&j, "model");
    js_int(&j, "in_c", m->in_c);
    js_int(&j, "in_h", m->in_h);
    js_int(&j, "in_w", m->in_w);
    js_int(&j, "classes", m->classes);
    js_str(&j, "backbone", backbone_name(m->backbone));
    js_num(&j, "width", m->width);
    js_int(&j, "batch", m->batch);
    js_num(&j, "bn_momentum", m->bn_momentum);
    js_open(&j, "head");
    js_str(&j, "kind", moe_head_name(h->kind));
    js_int(&j, "d", h->d);
    js_int(&j, "E", h->E);
    js_int(&j, "k", h->k);
    js_int(&j, "h", h->h);
    js_num(&j, "cf", h->cf);
    js_num(&j, "eval_cf", h->eval_cf);
    js_int(&j, "renorm", h->renorm);
    js_str(&j, "priority", moe_priority_name(h->priority));
    js_str(&j, "bias_mode", moe_bias_name(h->bias_mode));
    js_num(&j, "bias_rate", h->bias_rate);
    js_num(&j, "noise", h->noise);
    js_num(&j, "alpha", h->alpha);
    js_num(&j, "beta", h->beta);
    js_int(&j, "slots", h->slots);
    js_close(&j);
    js_close(&j);
    js_open(&j, "opt");
    js_str(&j, "kind", optim_kind_name(c->opt.kind));
    js_num(&j, "momentum", c->opt.momentum);
    js_int(&j, "nesterov", c->opt.nesterov);
    js_num(&j, "beta1", c->opt.beta1);
    js_num(&j, "beta2", c->opt.beta2);
    js_num(&j, "eps", c->opt.eps);
    js_num(&j, "wd", c->opt.wd);
    js_close(&j);
    js_open(&j, "lr");
    js_str(&j, "kind", lr_kind_name(c->lr.kind));
    js_num(&j, "base", c->lr.base);
    js_int(&j, "warmup", c->lr.warmup);
    js_int(&j, "total", c->lr.total);
    js_num(&j, "gamma", c->lr.gamma);
    js_key(&j, "milestones");
    js_raw(&j, "[%.9g, %.9g]", c->lr.milestones[0], c->lr.milestones[1]);
    js_close(&j);
    js_num(&j, "warmup_epochs", c->warmup_epochs);
    js_num(&j, "tau_epochs", c->tau_epochs);
    js_open(&j, "tau");
    js_str(&j, "kind", tau_kind_name(c->tau.kind));
    js_num(&j, "tau0", c->tau.tau0);
    js_num(&j, "tau1", c->tau.tau1);
    js_num(&j, "tau_min", c->tau.tau_min);
    js_num(&j, "s", c->tau.s);
    js_num(&j, "c", c->tau.c);
    js_int(&j, "step_every", c->tau.step_every);
    js_num(&j, "step_gamma", c->tau.step_gamma);
    js_int(&j, "start", c->tau.start);
    js_int(&j, "total", c->tau.total);
    js_close(&j);
    js_int(&j, "epochs", c->epochs);
    js_u64(&j, "seed", c->seed);
    js_int(&j, "threads", c->threads);
    js_int(&j, "log_every", c->log_every);
    js_open(&j, "route");
    js_int(&j, "window", c->route.window);
    js_int(&j, "min_steps", c->route.min_steps);
    js_num(&j, "entropy_min", c->route.entropy_min);
    js_num(&j, "max_share", c->route.max_share);
    js_num(&j, "dead_frac", c->route.dead_frac);
    js_close(&j);
    js_int(&j, "tsne_samples", c->tsne_samples);
    js_int(&j, "augment", c->augment);
    js_close(&j);
    if (j.overflow) {
        buf[0] = 0;
        return ml_fail(ML_ERR_ARG, "config JSON does not fit in %zu bytes", n);
    }
    return ML_OK;
}
