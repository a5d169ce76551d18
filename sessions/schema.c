/* schema.c — the live.h5 column tables, record-to-row mapping, event type, and the config JSON:
 * written (session_config_json) and read back (session_config_parse and its look-ups) with
 * jansson. See schema.h and the README's "Session files (format_version 2)". */
#include "schema.h"
#include "session.h"
#include "h5util.h"

#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SESS_SF_F SF_F64
#define SESS_SF_I SF_I32
#define SESS_IS_INT_F 0
#define SESS_IS_INT_I 1
#define SESS_COL_(rec, m, T, desc, opt) {#m, SESS_IS_INT_##T, desc, SESS_SF_##T, offsetof(rec, moe.m), opt}
#define SESS_HEAD_ALL(T, m, desc) [SC_MOE_##m] = SESS_COL_(StepRecord, m, T, desc, 0),
#define SESS_HEAD_ALL_V1X(T, m, desc) [SC_MOE_##m] = SESS_COL_(StepRecord, m, T, desc, 1),
#define SESS_HEAD_NEW(T, m, desc) [SC_MOE_##m] = SESS_COL_(StepRecord, m, T, desc, 1),
#define SESS_HEAD_LAYER(T, m, desc)
#define SESS_HEAD_COL_(T, m, cols, dist, label, fmt, scale, warn, desc) SESS_HEAD_##cols(T, m, desc)
const SessCol sess_step_cols[SC_N] = {
    [SC_STEP] = {"step", 1, "steps completed, this one included", SF_I64, offsetof(StepRecord, step), 0},
    [SC_EPOCH] = {"epoch", 1, "1-based epoch of this step", SF_I32, offsetof(StepRecord, epoch), 0},
    [SC_EPOCH_PROGRESS] = {"epoch_progress", 0, "fraction of the epoch done", SF_F64,
                           offsetof(StepRecord, epoch_progress), 0},
    [SC_LOSS] = {"loss", 0, "cross-entropy of the batch", SF_F64, offsetof(StepRecord, loss), 0},
    [SC_LOSS_TOTAL] = {"loss_total", 0, "cross-entropy + alpha L_aux + beta L_z", SF_F64,
                       offsetof(StepRecord, loss_total), 0},
    [SC_ACC] = {"acc", 0, "batch accuracy", SF_F64, offsetof(StepRecord, acc), 0},
    [SC_LR] = {"lr", 0, "learning rate used", SF_F32, offsetof(StepRecord, lr), 0},
    [SC_TAU] = {"tau", 0, "router temperature used", SF_F32, offsetof(StepRecord, tau), 0},
    [SC_IMG_PER_S] = {"img_per_s", 0, "training throughput since the previous record", SF_F64,
                      offsetof(StepRecord, img_per_s), 0},
    [SC_RHO_REALIZED] = {"rho_realized", 0, "routed FLOPs actually spent / total", SF_F64,
                         offsetof(StepRecord, rho_realized), 0},
    [SC_DEAD_EXPERTS] = {"dead_experts", 1, "experts with no kept pair over the window", SF_I32,
                         offsetof(StepRecord, dead_experts), 0},
    [SC_COLLAPSED] = {"collapsed", 1, "collapse flag over the window", SF_I32, offsetof(StepRecord, collapsed), 0},
    [SC_COLLAPSE_REASON] = {"collapse_reason", 1, "COLLAPSE_* bits: 1 entropy, 2 share, 4 dead", SF_I32,
                            offsetof(StepRecord, collapse_reason), 0},
    [SC_WINDOW_LOAD_ENTROPY] = {"window_load_entropy", 0, "load entropy / log E over the window", SF_F64,
                                offsetof(StepRecord, window_load_entropy), 0},
    [SC_WALL_TIME] = {"wall_time", 0, "Unix time when the record was appended (s)", SF_WALL, 0, 0},
    [SC_COLLAPSE_VIEWS] = {"collapse_views", 1, "collapse views flagged: 1 training, 2 clean router, 4 evaluation",
                           SF_I32, offsetof(StepRecord, collapse_views), 1},
    [SC_COLLAPSE_FIRST_STEP] = {"collapse_first_step", 1, "first step any collapse view was flagged (-1: never)",
                                SF_I64, offsetof(StepRecord, collapse_first_step), 1},
    [SC_ALARM] = {"alarm", 1, "alarm level: 0 none, 1 warning (only the clean router concentrates, or an expert died), 2 collapse", SF_I32, offsetof(StepRecord, alarm), 1},
    [SC_DEAD_MASK] = {"dead_mask", 1, "experts dead now (bit e = expert e; no kept pair for a window, revival after load again)", SF_I64, offsetof(StepRecord, dead_mask), 1},
    [SC_FORECAST] = {"forecast", 1, "steps until the clean router crosses a collapse threshold at its trend (-1: none)", SF_I64, offsetof(StepRecord, forecast), 1},
    [SC_TREND] = {"trend", 0, "clean first-choice share change per 1000 steps over the window", SF_F64, offsetof(StepRecord, trend), 1},
    MOE_STEP_SCALARS(SESS_HEAD_COL_)
};

const SessCol sess_step_vecs[SV_N] = {
    [SV_DEMAND] = {.name = "demand", .is_int = 1, .desc = "(T, E) selected pairs per expert before capacity"},
    [SV_KEPT] = {.name = "kept", .is_int = 1, .desc = "(T, E) pairs per expert that got a slot"},
    [SV_MEAN_GATE] = {.name = "mean_gate", .is_int = 0, .desc = "(T, E) mean gate probability per expert"},
    [SV_BIAS] = {.name = "bias", .is_int = 0, .desc = "(T, E) utility bias used by the step"},
};

const SessCol sess_eval_cols[EC_N] = {
    [EC_EPOCH] = {"epoch", 1, "epochs completed", SF_I32, offsetof(EvalRecord, epoch), 0},
    [EC_STEP] = {"step", 1, "steps completed", SF_I64, offsetof(EvalRecord, step), 0},
    [EC_TRAIN_LOSS] = {"train_loss", 0, "mean training cross-entropy over the epoch", SF_F64,
                       offsetof(EvalRecord, train_loss), 0},
    [EC_TRAIN_ACC] = {"train_acc", 0, "mean training accuracy over the epoch", SF_F64, offsetof(EvalRecord, train_acc),
                      0},
    [EC_TEST_LOSS] = {"test_loss", 0, "test cross-entropy", SF_F64, offsetof(EvalRecord, test_loss), 0},
    [EC_TEST_ACC] = {"test_acc", 0, "test accuracy", SF_F64, offsetof(EvalRecord, test_acc), 0},
    [EC_IMG_PER_S] = {"img_per_s", 0, "training throughput over the epoch", SF_F64, offsetof(EvalRecord, img_per_s), 0},
    [EC_EPOCH_SECONDS] = {"epoch_seconds", 0, "seconds for the epoch and its evaluation", SF_F64,
                          offsetof(EvalRecord, epoch_seconds), 0},
    [EC_ELAPSED] = {"elapsed", 0, "seconds since the trainer started", SF_F64, offsetof(EvalRecord, elapsed), 0},
    [EC_RHO_NOMINAL] = {"rho_nominal", 0, "nominal routed FLOP fraction", SF_F64, offsetof(EvalRecord, rho_nominal), 0},
    [EC_TRAIN_DROP_FRAC] = {"train_drop_frac", 0, "epoch mean of drop_frac", SF_F64,
                            offsetof(EvalRecord, moe.train_drop_frac), 0},
    [EC_TRAIN_MAXVIO] = {"train_maxvio", 0, "epoch mean of maxvio", SF_F64, offsetof(EvalRecord, moe.train_maxvio), 0},
    [EC_TRAIN_RHO_REALIZED] = {"train_rho_realized", 0, "epoch mean of rho_realized", SF_F64,
                               offsetof(EvalRecord, train_rho_realized), 0},
    [EC_WINDOW_LOAD_ENTROPY] = {"window_load_entropy", 0, "load entropy / log E over the window", SF_F64,
                                offsetof(EvalRecord, moe.window_load_entropy), 0},
    [EC_DEAD_EXPERTS] = {"dead_experts", 1, "dead experts at the end of the epoch", SF_I32,
                         offsetof(EvalRecord, moe.dead_experts), 0},
    [EC_COLLAPSED] = {"collapsed", 1, "collapse flag at the end of the epoch", SF_I32, offsetof(EvalRecord, collapsed),
                      0},
    [EC_COLLAPSE_REASON] = {"collapse_reason", 1, "COLLAPSE_* bits: 1 entropy, 2 share, 4 dead", SF_I32,
                            offsetof(EvalRecord, collapse_reason), 0},
    [EC_MUTUAL_INFO] = {"mutual_info", 0, "I(class; expert) on the test set, nats", SF_F64,
                        offsetof(EvalRecord, moe.mutual_info), 0},
    [EC_TEST_LOAD_ENTROPY] = {"test_load_entropy", 0, "first-choice load entropy / log E on the test set", SF_F64,
                              offsetof(EvalRecord, moe.test_load_entropy), 0},
    [EC_WALL_TIME] = {"wall_time", 0, "Unix time when the record was appended (s)", SF_WALL, 0, 0},
    [EC_TEST_FIRST_SHARE] = {"test_first_share", 0, "largest share of first choices on the test set", SF_F64,
                             offsetof(EvalRecord, moe.test_first_share), 1},
    [EC_TEST_DEAD_FIRST] = {"test_dead_first", 1, "experts no test sample picks first", SF_I32,
                            offsetof(EvalRecord, moe.test_dead_first), 1},
    [EC_COLLAPSE_VIEWS] = {"collapse_views", 1, "collapse views flagged: 1 training, 2 clean router, 4 evaluation",
                           SF_I32, offsetof(EvalRecord, collapse_views), 1},
    [EC_COLLAPSE_FIRST_STEP] = {"collapse_first_step", 1, "first step any collapse view was flagged (-1: never)",
                                SF_I64, offsetof(EvalRecord, collapse_first_step), 1},
    [EC_COLLAPSE_FIRST_TRAIN] = {"collapse_first_train", 1, "first step the training view was flagged (-1: never)",
                                 SF_I64, offsetof(EvalRecord, collapse_first_train), 1},
    [EC_COLLAPSE_FIRST_CLEAN] = {"collapse_first_clean", 1, "first step the clean-router view was flagged (-1: never)",
                                 SF_I64, offsetof(EvalRecord, collapse_first_clean), 1},
    [EC_COLLAPSE_FIRST_EVAL] = {"collapse_first_eval", 1, "first step the evaluation view was flagged (-1: never)",
                                SF_I64, offsetof(EvalRecord, collapse_first_eval), 1},
    [EC_EPOCH_TAU] = {"epoch_tau", 0, "mean tau over the epoch's steps", SF_F64, offsetof(EvalRecord, moe.epoch_tau), 1},
    [EC_EPOCH_L_AUX] = {"epoch_l_aux", 0, "mean L_aux over the epoch's steps", SF_F64,
                        offsetof(EvalRecord, moe.epoch_l_aux), 1},
    [EC_EPOCH_CLEAN_FIRST_SHARE] = {"epoch_clean_first_share", 0, "mean clean first-choice share over the epoch",
                                    SF_F64, offsetof(EvalRecord, moe.epoch_clean_first_share), 1},
    [EC_ALARM] = {"alarm", 1, "alarm level: 0 none, 1 warning (only the clean router concentrates, or an expert died), 2 collapse", SF_I32, offsetof(EvalRecord, alarm), 1},
    [EC_DEAD_MASK] = {"dead_mask", 1, "experts dead now (bit e = expert e; no kept pair for a window, revival after load again)", SF_I64, offsetof(EvalRecord, moe.dead_mask), 1},
    [EC_TEST_DEAD_TOPK] = {"test_dead_topk", 1, "experts no test sample has among its k selected", SF_I32,
                           offsetof(EvalRecord, moe.test_dead_topk), 1},
};

#define LS_(ID, name, is_int, desc, field, member) \
    [LSC_##ID] = {name, is_int, desc, field, offsetof(StepLayer, member), 0}
#define SESS_LAYER_OPT_ALL 0
#define SESS_LAYER_OPT_ALL_V1X 0
#define SESS_LAYER_OPT_LAYER 0
#define SESS_LAYER_OPT_NEW 1
#define SESS_LAYER_COL_(T, m, cols, dist, label, fmt, scale, warn, desc) \
    [LSC_MOE_##m] = SESS_COL_(StepLayer, m, T, desc, SESS_LAYER_OPT_##cols),
const SessCol sess_layer_step_cols[LSC_N] = {
    [LSC_STEP] = {"step", 1, "steps completed, this one included", SF_ROW, 0, 0},
    LS_(RHO_REALIZED, "rho_realized", 0, "the layer's routed FLOPs actually spent / the model's", SF_F64, rho_realized),
    LS_(DEAD_EXPERTS, "dead_experts", 1, "experts with no kept pair over the window", SF_I32, dead_experts),
    LS_(COLLAPSED, "collapsed", 1, "the layer's collapse flag (any view)", SF_I32, collapsed),
    LS_(COLLAPSE_REASON, "collapse_reason", 1, "COLLAPSE_* bits: 1 entropy, 2 share, 4 dead", SF_I32, collapse_reason),
    LS_(WINDOW_LOAD_ENTROPY, "window_load_entropy", 0, "load entropy / log E over the window", SF_F64,
        window_load_entropy),
    LS_(COLLAPSE_VIEWS, "collapse_views", 1, "collapse views flagged: 1 training, 2 clean router, 4 evaluation", SF_I32,
        collapse_views),
    LS_(COLLAPSE_FIRST_STEP, "collapse_first_step", 1, "first step any view of the layer was flagged (-1: never)",
        SF_I64, collapse_first_step),
    [LSC_ALARM] = {"alarm", 1, "alarm level: 0 none, 1 warning (only the clean router concentrates, or an expert died), 2 collapse", SF_I32, offsetof(StepLayer, alarm), 1},
    [LSC_DEAD_MASK] = {"dead_mask", 1, "experts dead now (bit e = expert e; no kept pair for a window, revival after load again)", SF_I64, offsetof(StepLayer, dead_mask), 1},
    [LSC_FORECAST] = {"forecast", 1, "steps until the clean router crosses a collapse threshold at its trend (-1: none)", SF_I64, offsetof(StepLayer, forecast), 1},
    [LSC_TREND] = {"trend", 0, "clean first-choice share change per 1000 steps over the window", SF_F64, offsetof(StepLayer, trend), 1},
    MOE_STEP_SCALARS(SESS_LAYER_COL_)
};
#undef LS_

#define LE_(ID, name, is_int, desc, field, member) \
    [LEC_##ID] = {name, is_int, desc, field, offsetof(EvalLayer, member), 0}
const SessCol sess_layer_eval_cols[LEC_N] = {
    [LEC_STEP] = {"step", 1, "steps completed", SF_ROW, 0, 0},
    LE_(TRAIN_DROP_FRAC, "train_drop_frac", 0, "epoch mean of drop_frac", SF_F64, train_drop_frac),
    LE_(TRAIN_MAXVIO, "train_maxvio", 0, "epoch mean of maxvio", SF_F64, train_maxvio),
    LE_(TRAIN_RHO_REALIZED, "train_rho_realized", 0, "epoch mean of the layer's rho_realized", SF_F64,
        train_rho_realized),
    LE_(WINDOW_LOAD_ENTROPY, "window_load_entropy", 0, "load entropy / log E over the window", SF_F64,
        window_load_entropy),
    LE_(WINDOW_FIRST_SHARE, "window_first_share", 0, "mean largest first-choice share over the window", SF_F64,
        window_first_share),
    LE_(DEAD_EXPERTS, "dead_experts", 1, "dead experts at the evaluation", SF_I32, dead_experts),
    LE_(COLLAPSED, "collapsed", 1, "the layer's collapse flag (any view)", SF_I32, collapsed),
    LE_(COLLAPSE_REASON, "collapse_reason", 1, "COLLAPSE_* bits: 1 entropy, 2 share, 4 dead", SF_I32, collapse_reason),
    LE_(MUTUAL_INFO, "mutual_info", 0, "I(class; expert) on the test set, nats", SF_F64, mutual_info),
    LE_(TEST_LOAD_ENTROPY, "test_load_entropy", 0, "first-choice load entropy / log E on the test set", SF_F64,
        test_load_entropy),
    LE_(TEST_FIRST_SHARE, "test_first_share", 0, "largest share of first choices on the test set", SF_F64,
        test_first_share),
    LE_(TEST_DEAD_FIRST, "test_dead_first", 1, "experts no test sample picks first", SF_I32, test_dead_first),
    LE_(TEST_DEAD_TOPK, "test_dead_topk", 1, "experts no test sample has among its k selected", SF_I32, test_dead_topk),
    LE_(COLLAPSE_VIEWS, "collapse_views", 1, "collapse views flagged: 1 training, 2 clean router, 4 evaluation", SF_I32,
        collapse_views),
    LE_(COLLAPSE_FIRST_STEP, "collapse_first_step", 1, "first step any view of the layer was flagged (-1: never)",
        SF_I64, collapse_first_step),
    LE_(COLLAPSE_FIRST_TRAIN, "collapse_first_train", 1, "first step the training view was flagged (-1: never)", SF_I64,
        collapse_first_train),
    LE_(COLLAPSE_FIRST_CLEAN, "collapse_first_clean", 1, "first step the clean-router view was flagged (-1: never)",
        SF_I64, collapse_first_clean),
    LE_(COLLAPSE_FIRST_EVAL, "collapse_first_eval", 1, "first step the evaluation view was flagged (-1: never)", SF_I64,
        collapse_first_eval),
    LE_(EPOCH_TAU, "epoch_tau", 0, "mean tau of the layer over the epoch's steps", SF_F64, epoch_tau),
    LE_(EPOCH_L_AUX, "epoch_l_aux", 0, "mean L_aux over the epoch's steps", SF_F64, epoch_l_aux),
    LE_(EPOCH_CLEAN_FIRST_SHARE, "epoch_clean_first_share", 0, "mean clean first-choice share over the epoch", SF_F64,
        epoch_clean_first_share),
    [LEC_ALARM] = {"alarm", 1, "alarm level: 0 none, 1 warning (only the clean router concentrates, or an expert died), 2 collapse", SF_I32, offsetof(EvalLayer, alarm), 1},
    [LEC_DEAD_MASK] = {"dead_mask", 1, "experts dead now (bit e = expert e; no kept pair for a window, revival after load again)", SF_I64, offsetof(EvalLayer, dead_mask), 1},
};
#undef LE_

void sess_layer_step_row(const StepLayer *l, long step, double *v) {
    for (int c = 0; c < LSC_N; c++) v[c] = sess_col_get(&sess_layer_step_cols[c], l, (double)step);
}

void sess_layer_eval_row(const EvalLayer *l, long step, double *v) {
    for (int c = 0; c < LEC_N; c++) v[c] = sess_col_get(&sess_layer_eval_cols[c], l, (double)step);
}

double sess_col_get(const SessCol *c, const void *rec, double wall_time) {
    const char *p = (const char *)rec + c->off;
    switch (c->field) {
    case SF_WALL:
    case SF_ROW: return wall_time;
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
    case SF_WALL:
    case SF_ROW: break;
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
    if (t < 0 || s < 0 || H5Tinsert(t, "step", HOFFSET(SessEvent, step), H5T_NATIVE_INT64) < 0 ||
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

/* ------------------------------------------------------------------ config JSON (jansson) */

/* Significant digits (1..17) with which %g gives back exactly d. */
static int digits_exact(double d) {
    char s[40];
    for (int p = 1; p < 17; p++) {
        snprintf(s, sizeof s, "%.*g", p, d);
        if (strtod(s, NULL) == d) return p;
    }
    return 17;
}

/* A float field as a JSON number: the double nearest to the shortest decimal (1..9 digits) that
 * converts back to exactly f, so that JSON readers see 0.1 for 0.1f (not 0.100000001 or
 * 0.10000000149011612) and (float)value is f again. */
static double float_decimal(float f) {
    char s[40];
    for (int p = 1; p <= 9; p++) {
        snprintf(s, sizeof s, "%.*g", p, (double)f);
        const double d = strtod(s, NULL);
        if ((float)d == f) return d;
    }
    return (double)f; /* exact; only if decimal -> double -> float rounded differently at 9 digits */
}

typedef struct {
    int bad;    /* an allocation failed */
    int digits; /* the most significant digits a real of the tree needs */
} Jw;

/* set_new / append_new release v when they fail, also when the container or v is NULL */
static void jw_set(Jw *w, json_t *o, const char *k, json_t *v) {
    if (json_object_set_new(o, k, v)) w->bad = 1;
}
static json_t *jw_obj(Jw *w, json_t *parent, const char *k) {
    json_t *o = json_object();
    const int failed = json_object_set(parent, k, o) != 0;
    json_decref(o); /* parent holds it */
    if (failed) w->bad = 1;
    return failed ? NULL : o;
}
static void jw_int(Jw *w, json_t *o, const char *k, long long v) { jw_set(w, o, k, json_integer(v)); }
/* Bytes of the valid UTF-8 sequence at p (left bytes remain), 0 if none starts there. */
static size_t utf8_seq(const char *p, size_t left) {
    for (size_t len = 1; len <= 4 && len <= left; len++) {
        json_t *s = json_stringn(p, len); /* jansson's own UTF-8 check */
        if (s) {
            json_decref(s);
            return len;
        }
    }
    return 0;
}
/* Strings as UTF-8: a byte that starts no valid UTF-8 sequence (a path in another encoding)
 * becomes U+FFFD, since JSON text cannot hold it (the exact spec is also /run@dataset_spec). */
static void jw_str(Jw *w, json_t *o, const char *k, const char *v) {
    v = v ? v : "";
    json_t *s = json_string(v);
    if (!s) {
        const size_t n = strlen(v);
        char *u = malloc(3 * n + 1);
        size_t un = 0;
        for (size_t i = 0; u && i < n;) {
            const size_t len = utf8_seq(v + i, n - i);
            if (len) memcpy(u + un, v + i, len);
            else memcpy(u + un, "\xef\xbf\xbd", 3);
            un += len ? len : 3;
            i += len ? len : 1;
        }
        if (u) s = json_stringn(u, un);
        free(u);
    }
    jw_set(w, o, k, s);
}
/* A double as a JSON real (null when not finite, as jansson has no NaN or infinity). */
static json_t *jw_real_value(Jw *w, double v) {
    if (!isfinite(v)) return json_null();
    const int d = digits_exact(v);
    if (d > w->digits) w->digits = d;
    return json_real(v);
}
static void jw_num(Jw *w, json_t *o, const char *k, double v) { jw_set(w, o, k, jw_real_value(w, v)); }
static void jw_flt(Jw *w, json_t *o, const char *k, float v) { jw_num(w, o, k, isfinite(v) ? float_decimal(v) : v); }

/* The JSON side of train_config_visit (core/cfgvisit.h): a stack of open objects. */
typedef struct {
    CfgVisitor v; /* first: the callbacks get &Jv.v */
    Jw w;
    json_t *stack[8];
    int depth;
    int big_seed; /* the seed is above INT64_MAX: written as 0, its digits put in the text after */
} Jv;
static json_t *jv_top(CfgVisitor *v) {
    Jv *j = (Jv *)v;
    return j->stack[j->depth];
}
static void jv_open(CfgVisitor *v, const char *k) {
    Jv *j = (Jv *)v;
    json_t *o = jw_obj(&j->w, jv_top(v), k);
    if (j->depth + 1 < (int)(sizeof j->stack / sizeof j->stack[0])) j->stack[++j->depth] = o;
    else j->w.bad = 1;
}
static void jv_close(CfgVisitor *v) {
    Jv *j = (Jv *)v;
    if (j->depth > 0) j->depth--;
}
static void jv_i(CfgVisitor *v, const char *k, long long x) { jw_int(&((Jv *)v)->w, jv_top(v), k, x); }
static void jv_f(CfgVisitor *v, const char *k, float x) { jw_flt(&((Jv *)v)->w, jv_top(v), k, x); }
static void jv_d(CfgVisitor *v, const char *k, double x) { jw_num(&((Jv *)v)->w, jv_top(v), k, x); }
static void jv_s(CfgVisitor *v, const char *k, const char *x) { jw_str(&((Jv *)v)->w, jv_top(v), k, x); }
static void jv_ints(CfgVisitor *v, const char *k, const int *x, int n) {
    Jv *j = (Jv *)v;
    json_t *a = json_array();
    for (int i = 0; i < n; i++)
        if (json_array_append_new(a, json_integer(x[i]))) j->w.bad = 1;
    jw_set(&j->w, jv_top(v), k, a);
}
static void jv_floats(CfgVisitor *v, const char *k, const float *x, int n) {
    Jv *j = (Jv *)v;
    json_t *a = json_array();
    for (int i = 0; i < n; i++)
        if (json_array_append_new(a, jw_real_value(&j->w, isfinite(x[i]) ? float_decimal(x[i]) : x[i]))) j->w.bad = 1;
    jw_set(&j->w, jv_top(v), k, a);
}
/* jansson's integers are long long: a seed above INT64_MAX (the API takes any uint64_t; --seed
 * stops at 2^53 - 1) goes in as 0 and its digits replace that 0 in the text (session_config_json) */
static void jv_u64(CfgVisitor *v, const char *k, uint64_t x) {
    Jv *j = (Jv *)v;
    if (x > (uint64_t)INT64_MAX) j->big_seed = 1;
    jw_int(&j->w, jv_top(v), k, j->big_seed ? 0 : (long long)x);
}

ml_status session_config_json(const TrainConfig *c, const char *dataset_spec, char *buf, size_t n) {
    if (!buf || n < 3) return ml_fail(ML_ERR_ARG, "config JSON: buffer too small");
    buf[0] = 0;
    json_t *root = json_object();
    Jv j = {.v = {jv_open, jv_close, jv_i, jv_f, jv_d, jv_s, jv_ints, jv_floats, jv_u64}, .w = {0, 1}, .stack = {root}};
    jw_str(&j.w, root, "dataset", dataset_spec);
    train_config_visit(c, &j.v);
    Jw w = j.w;
    const int big_seed = j.big_seed;
    if (!root || w.bad) {
        json_decref(root);
        return ml_fail(ML_ERR_NOMEM, "config JSON: out of memory");
    }
    /* ", " and ": " between items (jansson's default without JSON_COMPACT), keys in insertion
     * order; reals with the fewest significant digits that give every real of the tree back
     * exactly (%.<digits>g: 17 at most, for a double that needs them) */
    char *text = json_dumps(root, JSON_REAL_PRECISION(w.digits));
    json_decref(root);
    if (!text) return ml_fail(ML_ERR_NOMEM, "config JSON: out of memory");
    /* `"seed": ` is in the text once: it is no other key, and a quote inside a string value is
     * always escaped, so the text `"seed"` followed by a colon is that key */
    const char *at = big_seed ? strstr(text, "\"seed\": 0") : NULL;
    const size_t head = at ? (size_t)(at - text) + strlen("\"seed\": ") : 0;
    const int len = at ? snprintf(buf, n, "%.*s%llu%s", (int)head, text, (unsigned long long)c->seed, text + head + 1)
                       : snprintf(buf, n, "%s", text);
    free(text);
    if (big_seed && !at) {
        buf[0] = 0;
        return ml_fail(ML_ERR_STATE, "config JSON: the seed is missing from the text");
    }
    if (len < 0 || (size_t)len >= n) {
        buf[0] = 0;
        return ml_fail(ML_ERR_ARG, "config JSON does not fit in %zu bytes", n);
    }
    return ML_OK;
}

/* ------------------------------------------------------------------ reading a config JSON */

static const char *json_kind(const json_t *v) {
    switch (json_typeof(v)) {
    case JSON_OBJECT: return "an object";
    case JSON_ARRAY: return "an array";
    case JSON_STRING: return "a string";
    case JSON_INTEGER:
    case JSON_REAL: return "a number";
    case JSON_TRUE:
    case JSON_FALSE: return "a boolean";
    default: return "null";
    }
}

json_t *session_config_parse(const char *text) {
    if (!text) {
        ml_fail(ML_ERR_FORMAT, "config_json: no text");
        return NULL;
    }
    json_error_t e;
    json_t *root = json_loads(text, JSON_DECODE_INT_AS_REAL | JSON_REJECT_DUPLICATES, &e);
    if (!root) {
        ml_fail(ML_ERR_FORMAT, "config_json is not valid JSON: %s (line %d, column %d)", e.text, e.line, e.column);
        return NULL;
    }
    if (!json_is_object(root)) {
        ml_fail(ML_ERR_FORMAT, "config_json is %s, not an object", json_kind(root));
        json_decref(root);
        return NULL;
    }
    return root;
}

/* The value at path (keys joined by dots): 1 and *out, 0 if a key is missing, -1 if a value on
 * the way is not an object. */
static int config_at(const json_t *cfg, const char *path, json_t **out) {
    if (!json_is_object(cfg)) {
        ml_fail(ML_ERR_ARG, "config_json: the configuration is not an object");
        return -1;
    }
    const json_t *v = cfg;
    const char *p = path;
    for (;;) {
        const char *dot = strchr(p, '.');
        const size_t kl = dot ? (size_t)(dot - p) : strlen(p);
        char key[64];
        if (!json_is_object(v)) { /* p > path here: the key before it named v */
            ml_fail(ML_ERR_FORMAT, "config_json: %.*s is %s, not an object", (int)(p - path - 1), path, json_kind(v));
            return -1;
        }
        if (kl >= sizeof key) return 0; /* longer than any key */
        memcpy(key, p, kl);
        key[kl] = 0;
        v = json_object_get(v, key);
        if (!v) return 0;
        if (!dot) break;
        p = dot + 1;
    }
    *out = (json_t *)v;
    return 1;
}

int session_config_num(const json_t *cfg, const char *path, double lo, double hi, double *v) {
    json_t *x = NULL;
    const int r = cfg && path ? config_at(cfg, path, &x) : 0;
    if (r <= 0) return r;
    if (!json_is_number(x)) {
        ml_fail(ML_ERR_FORMAT, "config_json: %s is %s, not a number", path, json_kind(x));
        return -1;
    }
    const double d = json_number_value(x);
    if (!(d >= lo && d <= hi)) {
        ml_fail(ML_ERR_FORMAT, "config_json: %s is %g, outside %g..%g", path, d, lo, hi);
        return -1;
    }
    *v = d;
    return 1;
}

int session_config_long(const json_t *cfg, const char *path, long lo, long hi, long *v) {
    double d = 0;
    const int r = session_config_num(cfg, path, (double)lo, (double)hi, &d);
    if (r <= 0) return r;
    /* (double)hi may round up ((double)LONG_MAX is 2^63): the bounds again on the long */
    if (d != floor(d) || d >= -(double)LONG_MIN || (long)d < lo || (long)d > hi) {
        ml_fail(ML_ERR_FORMAT, "config_json: %s is %g, not an integer in %ld..%ld", path, d, lo, hi);
        return -1;
    }
    *v = (long)d;
    return 1;
}

int session_config_str(const json_t *cfg, const char *path, char *buf, size_t n) {
    json_t *x = NULL;
    if (!n) {
        ml_fail(ML_ERR_ARG, "config_json: %s: no room for the string", path ? path : "");
        return -1;
    }
    const int r = cfg && path ? config_at(cfg, path, &x) : 0;
    if (r <= 0) return r;
    if (!json_is_string(x)) {
        ml_fail(ML_ERR_FORMAT, "config_json: %s is %s, not a string", path, json_kind(x));
        return -1;
    }
    snprintf(buf, n, "%s", json_string_value(x));
    return 1;
}
