/* plot.c — `moelab plot SESSION|SWEEP ... [--out DIR] [--format pdf,svg,png|all] [--epoch N]`:
 * loads the inputs through sessions/ (history.c, sweep_h5.c), prepares what the figures need
 * (the t-SNE map of the saved test features, core/tsne.c; the temperature plan replayed from the
 * logged commands, browse_data.c) and has views/figs.c draw each figure in each format. */
#define _GNU_SOURCE
#include "app/plot/plot.h"
#include "app/cli/app.h"
#include "app/browse/browse.h"
#include "app/cli/commands.h"
#include "app/sweep/sweep_verdict.h"

#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/tsne.h"
#include "app/run/outdir.h"
#include "sessions/sweep_h5.h"
#include "views/figs.h"

typedef struct {
    char dir[1100];  /* out: the folder asked for (named in messages) */
    char wdir[1200]; /* where the files are written: its staging folder (outdir.h) */
    unsigned formats;
    int verbose;
    int written;
    char err[2600]; /* first figure error */
} Out;

static int is_dir(const char *p) {
    struct stat sb;
    return stat(p, &sb) == 0 && S_ISDIR(sb.st_mode);
}

static int is_file(const char *p) {
    struct stat sb;
    return stat(p, &sb) == 0 && S_ISREG(sb.st_mode);
}

/* The folder of an input: itself, or the folder of a file. */
static void input_folder(const char *in, char *out, size_t n) {
    if (is_dir(in)) {
        snprintf(out, n, "%s", in);
        return;
    }
    const char *slash = strrchr(in, '/');
    if (!slash) snprintf(out, n, ".");
    else snprintf(out, n, "%.*s", (int)(slash - in), in);
}

void plot_default_out(const char *const *inputs, int n, char *out, size_t outn) {
    if (n == 1) {
        char d[1024];
        input_folder(inputs[0], d, sizeof d);
        snprintf(out, outn, "%s/figures", d);
    } else {
        snprintf(out, outn, "figures-compare");
    }
}

/* The name a run is shown under: its folder's last component. */
/* --title, --label, --columns (cmd_plot; the browser's export keeps the defaults) */
static const char *g_title;
static const char *g_labels[PLOT_MAX_RUNS];
static int g_nlabels;


/* A run's configuration in words, the default label of its figures: "moe E=8 k=2 h=1024",
 * "dense h=1024", with the backbone's routed layers ("dense h=64 + moe2 moe3 E=8 k=1"). */
static void run_words(const SessionHistory *h, char *out, size_t n) {
    const SessionInfo *i = &h->info;
    size_t o = 0;
    int backbone = 0;
    for (int l = 0; l < h->nlayers; l++) backbone |= strcmp(h->layer[l].name, "head") != 0;
    if (i->experts > 0 && strcmp(i->head, "dense"))
        o += (size_t)snprintf(out + o, n - o, "%s E=%d k=%d h=%d", i->head, i->experts, i->k, i->hidden);
    else o += (size_t)snprintf(out + o, n - o, "%s h=%d", i->head[0] ? i->head : "dense", i->hidden);
    if (backbone && o < n) {
        o += (size_t)snprintf(out + o, n - o, " +");
        for (int l = 0; l < h->nlayers && o < n; l++)
            if (strcmp(h->layer[l].name, "head"))
                o += (size_t)snprintf(out + o, n - o, " %s", h->layer[l].name);
        if (o < n && h->nlayers > 0) {
            const LayerInfo *li = &h->layer[0];
            snprintf(out + o, n - o, " E=%d k=%d", li->E, li->k);
        }
    }
}

static void run_name(const char *in, char *out, size_t n) {
    char d[1024];
    input_folder(in, d, sizeof d);
    size_t l = strlen(d);
    while (l > 1 && d[l - 1] == '/') d[--l] = 0;
    const char *s = strrchr(d, '/');
    snprintf(out, n, "%s", s ? s + 1 : d);
}

/* Writes one figure in every requested format. Returns 0, or -1 (message in o->err). */
static int emit(Out *o, const char *name, ml_status (*draw)(void *ctx, const char *path, FigFormat fmt), void *ctx) {
    for (int f = 0; f < FIG_NFORMATS; f++) {
        if (!(o->formats & (1u << f))) continue;
        char path[1400];
        snprintf(path, sizeof path, "%s/%s.%s", o->wdir, name, fig_format_ext((FigFormat)f));
        if (draw(ctx, path, (FigFormat)f) != ML_OK) {
            if (!o->err[0]) snprintf(o->err, sizeof o->err, "%s", ml_last_error());
            return -1;
        }
        o->written++;
        if (o->verbose) {
            struct stat sb;
            printf("wrote %s/%s.%s (%lld bytes)\n", o->dir, name, fig_format_ext((FigFormat)f),
                   stat(path, &sb) == 0 ? (long long)sb.st_size : -1LL);
        }
    }
    return 0;
}

// ---------------------------------------------------------------------------------------------
// one session: loading and the data the figures need

typedef struct {
    SessionHistory h;
    FigRun r;
    char name[256];
    float *feat, *ymap;
    int *expert, *label;
    int ev; /* evaluation of the heatmap / t-SNE, -1 for none */
} Run;

static void run_free(Run *R) {
    session_history_free(&R->h);
    ml_free(R->feat);
    ml_free(R->expert);
    ml_free(R->label);
    free(R->ymap);
    memset(R, 0, sizeof *R);
}

/* The evaluation at `epoch` (< 0: the last one). 0, or 2 with a message (out of range). */
static int pick_eval(const SessionHistory *h, const char *name, int epoch, int *ev, char *msg, size_t msgn) {
    *ev = h->nevals - 1;
    if (epoch < 0) return 0;
    const int i = session_history_eval_at_epoch(h, epoch);
    if (i < 0 || h->evals[i].epoch != epoch) {
        if (h->nevals == 0) snprintf(msg, msgn, "--epoch %d: %s has no evaluation yet", epoch, name);
        else
            snprintf(msg, msgn, "--epoch %d: %s has evaluations at epochs %d..%d", epoch, name, h->evals[0].epoch,
                     h->evals[h->nevals - 1].epoch);
        return 2;
    }
    *ev = i;
    return 0;
}

/* The temperature plan of the run's primary routed layer (layer NULL) or of the layer called layer,
 * with the commands that changed it. */
static void prepare_plan(Run *R, const char *layer) {
    const SessionHistory *h = &R->h;
    FigRun *r = &R->r;
    TauSchedule base;
    if (h->E <= 0 || browse_tau_schedule(h->config_json, &base) != 0) return;
    const long total = h->total_steps > 0 ? h->total_steps : (h->nsteps ? h->steps[h->nsteps - 1].step : 1);
    TauPlan end;
    if (!layer) layer = browse_primary_layer(h);
    browse_plan_at_layer(h, &base, LONG_MAX, layer, &end);
    for (int i = 0; i < FIGS_PLAN_N; i++) {
        const long s = (long)llround((double)total * i / (FIGS_PLAN_N - 1));
        r->plan_step[i] = (double)s;
        r->plan_launch[i] = tau_value(&base, s);
        r->plan_final[i] = tau_plan_scheduled(&end, s);
    }
    for (long i = 0; i < h->nevents && r->nmarks < FIGS_MARKS; i++) {
        TrainerCmd c;
        char err[128];
        if (command_parse(h->events[i].text, &c, err, sizeof err) || !trainer_tau_command(&c)) continue;
        if (layer && c.layer[0] && strcmp(c.layer, layer)) continue; /* another layer's `... @moe2` */
        r->mark_step[r->nmarks] = h->events[i].step;
        /* the command as typed, without the event log's "  # screen" origin tag */
        const char *t = h->events[i].text, *tag = strstr(t, "  #");
        snprintf(r->mark_text[r->nmarks], sizeof r->mark_text[0], "%.*s", tag ? (int)(tag - t < 47 ? tag - t : 47) : 47,
                 t);
        r->nmarks++;
    }
    r->has_plan = 1;
}

/* The t-SNE map of evaluation R->ev (when the session saved features): of the top-level features
 * (layer < 0) or of routed layer `layer`'s router input. Failures leave it off. */
static void prepare_tsne(Run *R, int verbose, int layer) {
    const SessionHistory *h = &R->h;
    int n = 0, d = 0;
    if (R->ev < 0 || h->E <= 0 || h->evals[R->ev].moe.tsne_n < 4) return;
    const ml_status st = layer < 0
                             ? session_history_tsne(h, R->ev, &R->feat, &R->expert, &R->label, &n, &d)
                             : session_history_layer_tsne(h, layer, R->ev, &R->feat, &R->expert, &R->label, &n, &d);
    if (st != ML_OK || n < 4) return;
    R->ymap = malloc(sizeof(float) * 2 * (size_t)n);
    if (!R->ymap) return;
    TsneConfig cfg;
    tsne_default_config(&cfg);
    cfg.seed = 1;
    if (verbose) printf("t-SNE of %d test features (d %d), epoch %d ...\n", n, d, h->evals[R->ev].epoch);
    if (tsne_run(R->feat, n, d, &cfg, R->ymap, NULL) != ML_OK) return;
    R->r.tsne_ev = R->ev;
    R->r.tsne_n = n;
    R->r.tsne_y = R->ymap;
    R->r.tsne_expert = R->expert;
    R->r.tsne_label = R->label;
}

// ---------------------------------------------------------------------------------------------
// the labels of compared runs: what differs between their recorded configurations

/* The options of a session's record (/run config_json) by their path, with the name the command
 * line gives them. "" names a value shown alone (the dataset, the head kind); NULL a field that
 * never labels a run: derived from other options (the image shape and classes from the dataset,
 * d from the width, step counts from epochs and data) or how the run was carried out, not what
 * it computed (threads, log_every, tsne_samples). A path not listed is named by itself ("tau.s":
 * "tau-s"; a record written by a newer moelab still labels its runs). */
static const struct {
    const char *path, *name;
} cfg_names[] = {
    {"dataset", ""},
    {"model.head.kind", ""},
    {"model.backbone", "backbone"},
    {"model.width", "width"},
    {"model.batch", "batch"},
    {"model.fc2_init", "fc2-init"},
    {"model.head.E", "experts"},
    {"model.head.k", "k"},
    {"model.head.h", "hidden"},
    {"model.head.cf", "cf"},
    {"model.head.eval_cf", "eval-cf"},
    {"model.head.renorm", "renorm"},
    {"model.head.priority", "priority"},
    {"model.head.bias_mode", "bias-mode"},
    {"model.head.bias_rate", "bias-rate"},
    {"model.head.noise", "noise"},
    {"model.head.alpha", "alpha"},
    {"model.head.beta", "beta"},
    {"model.head.slots", "slots"},
    {"model.backbone_layers.moe_after", "moe-after"},
    {"model.backbone_layers.ffn_after", "ffn-after"},
    {"model.backbone_layers.hidden", "moe-hidden"},
    {"model.backbone_layers.experts", "moe-experts"},
    {"model.backbone_layers.k", "moe-k"},
    {"opt.kind", "optimizer"},
    {"opt.momentum", "momentum"},
    {"opt.nesterov", "nesterov"},
    {"opt.wd", "wd"},
    {"lr.kind", "lr-schedule"},
    {"lr.base", "lr"},
    {"warmup_epochs", "warmup"},
    {"tau_epochs", "tau-epochs"},
    {"tau.kind", "schedule"},
    {"tau.tau0", "tau0"},
    {"tau.tau1", "tau1"},
    {"epochs", "epochs"},
    {"seed", "seed"},
    {"route.window", "route-window"},
    {"route.min_steps", "collapse-min-steps"},
    {"route.entropy_min", "collapse-entropy"},
    {"route.max_share", "collapse-share"},
    {"route.dead_frac", "collapse-dead"},
    {"route.warmup", "collapse-warmup"},
    {"route.hysteresis", "collapse-hysteresis"},
    {"route.confirm", "collapse-confirm"},
    {"augment", "augment"},
    {"sync_bn", "sync-bn"},
    {"ranks", "ranks"},
    {"model.in_c", NULL},
    {"model.in_h", NULL},
    {"model.in_w", NULL},
    {"model.classes", NULL},
    {"model.head.d", NULL},
    {"lr.warmup", NULL},
    {"lr.total", NULL},
    {"tau.start", NULL},
    {"tau.total", NULL},
    {"threads", NULL},
    {"log_every", NULL},
    {"tsne_samples", NULL},
};
enum { CFG_NNAMES = sizeof cfg_names / sizeof cfg_names[0] };

#define CFG_MAX_ITEMS 160
typedef struct {
    char path[64];
    char val[128];
} CfgItem;
typedef struct {
    int n;
    CfgItem it[CFG_MAX_ITEMS];
} CfgItems;

/* The leaves of a parsed config_json in record order, each value as text ("0.25", "moe", "2,3"). */
static void cfg_flatten(const json_t *o, const char *prefix, CfgItems *out) {
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)o, key, v) {
        if (out->n >= CFG_MAX_ITEMS) return;
        char path[64];
        snprintf(path, sizeof path, "%s%s%s", prefix, prefix[0] ? "." : "", key);
        if (json_is_object(v)) {
            cfg_flatten(v, path, out);
            continue;
        }
        CfgItem *it = &out->it[out->n];
        snprintf(it->path, sizeof it->path, "%s", path);
        it->val[0] = 0;
        const json_t *e = v;
        size_t idx = 0, len = json_is_array(v) ? json_array_size(v) : 1;
        for (idx = 0; idx < len; idx++) {
            if (json_is_array(v)) e = json_array_get(v, idx);
            const size_t l = strlen(it->val);
            const char *sep = idx ? "," : "";
            if (json_is_string(e)) snprintf(it->val + l, sizeof it->val - l, "%s%s", sep, json_string_value(e));
            else if (json_is_integer(e))
                snprintf(it->val + l, sizeof it->val - l, "%s%lld", sep, (long long)json_integer_value(e));
            else if (json_is_real(e)) snprintf(it->val + l, sizeof it->val - l, "%s%.7g", sep, json_real_value(e));
            else if (json_is_boolean(e)) snprintf(it->val + l, sizeof it->val - l, "%s%d", sep, json_is_true(e));
            else snprintf(it->val + l, sizeof it->val - l, "%snull", sep);
        }
        if (json_is_array(v) && len == 0) snprintf(it->val, sizeof it->val, "-");
        out->n++;
    }
}

static const char *cfg_value(const CfgItems *c, const char *path) {
    for (int i = 0; i < c->n; i++)
        if (!strcmp(c->it[i].path, path)) return c->it[i].val;
    /* fields the record leaves out at their default */
    if (!strcmp(path, "ranks")) return "1";
    if (!strcmp(path, "sync_bn")) return "0";
    return "-";
}

/* path's option in words: "width 0.5", "seed 2", "fashion-mnist", "dense", "no-augment". */
static void cfg_words(const char *path, const char *val, char *out, size_t n) {
    const char *name = NULL;
    int listed = 0;
    for (int i = 0; i < CFG_NNAMES && !listed; i++)
        if (!strcmp(cfg_names[i].path, path)) name = cfg_names[i].name, listed = 1;
    char own[64];
    if (!listed) { /* "model.head.x_y" -> "x-y", "tau.s" -> "tau-s" */
        const char *p = !strncmp(path, "model.head.", 11) ? path + 11 : !strncmp(path, "model.", 6) ? path + 6 : path;
        snprintf(own, sizeof own, "%s", p);
        for (char *c = own; *c; c++)
            if (*c == '.' || *c == '_') *c = '-';
        name = own;
    }
    if (!strcmp(path, "dataset")) { /* a dataset file: its name, not its folders */
        const char *b = strrchr(val, '/');
        snprintf(out, n, "%s", b && b[1] ? b + 1 : val);
    } else if (!name[0]) {
        snprintf(out, n, "%s", val);
    } else if (!strcmp(path, "augment") || !strcmp(path, "sync_bn") || !strcmp(path, "opt.nesterov")) {
        snprintf(out, n, "%s%s", !strcmp(val, "0") ? "no-" : "", name); /* flags */
    } else if (!strcmp(path, "model.head.renorm")) {
        snprintf(out, n, "renorm %s", !strcmp(val, "0") ? "off" : !strcmp(val, "1") ? "on" : !strcmp(val, "2") ? "auto" : val);
    } else {
        snprintf(out, n, "%s %s", name, val);
    }
}

static int cfg_labels_path(const char *path) {
    for (int i = 0; i < CFG_NNAMES; i++)
        if (!strcmp(cfg_names[i].path, path)) return cfg_names[i].name != NULL;
    return 1;
}

/* The options the subtitle names when all compared runs share them (the rest are left out). */
static const char *const cfg_headline[] = {"model.head.kind", "model.head.E", "model.head.k",  "model.head.h",
                                           "model.backbone",  "model.width",  "epochs",        "seed",
                                           "dataset"};

/* Labels compared runs by what differs between their recorded configurations, like a tracker's
 * "diff only": each run's name becomes its differing options in a stable order (the head kind
 * first, then the record's order, the dataset last; "width 0.5 seed 2 fashion-mnist"); common
 * gets what they share of the headline options ("all runs: moe experts 8 ..."; "" when nothing).
 * A run that differs in nothing keeps its folder name; two runs with the same label get their
 * folder's name after it. Runs whose record cannot be read keep their configuration in words. */
static void compare_labels(Run *runs, int n, const char *const *inputs, char *common, size_t cn) {
    CfgItems *cf = calloc((size_t)n, sizeof *cf);
    common[0] = 0;
    if (!cf) return;
    int ok = 1;
    for (int i = 0; i < n; i++) {
        json_t *j = session_config_parse(runs[i].h.config_json);
        if (j) cfg_flatten(j, "", &cf[i]);
        else ok = 0;
        json_decref(j);
    }
    if (!ok) { /* an old or cut record: the names in words, told apart by seed and folder */
        free(cf);
        for (int i = 0; i < n; i++) {
            int dup = 0;
            for (int j = 0; j < n; j++) dup |= j != i && !strcmp(runs[i].name, runs[j].name);
            if (dup) {
                const size_t l = strlen(runs[i].name);
                snprintf(runs[i].name + l, sizeof runs[i].name - l, " seed %llu",
                         (unsigned long long)runs[i].h.info.seed);
            }
        }
        for (int i = 0; i < n; i++) {
            int dup = 0;
            for (int j = 0; j < n; j++) dup |= j != i && !strcmp(runs[i].name, runs[j].name);
            if (dup) run_name(inputs[i], runs[i].name, sizeof runs[i].name);
        }
        return;
    }
    /* every path of any run, in order of first appearance; the head kind first, the dataset last */
    static char paths[CFG_MAX_ITEMS * 2][64];
    int np = 0;
    snprintf(paths[np++], sizeof paths[0], "model.head.kind");
    for (int i = 0; i < n; i++)
        for (int k = 0; k < cf[i].n && np < CFG_MAX_ITEMS * 2; k++) {
            int seen = !strcmp(cf[i].it[k].path, "dataset");
            for (int q = 0; q < np && !seen; q++) seen = !strcmp(paths[q], cf[i].it[k].path);
            if (!seen) snprintf(paths[np++], sizeof paths[0], "%s", cf[i].it[k].path);
        }
    if (np < CFG_MAX_ITEMS * 2) snprintf(paths[np++], sizeof paths[0], "dataset");
    char lab[PLOT_MAX_RUNS][256] = {{0}};
    for (int q = 0; q < np; q++) {
        if (!cfg_labels_path(paths[q])) continue;
        int same = 1;
        for (int i = 1; i < n && same; i++) same = !strcmp(cfg_value(&cf[i], paths[q]), cfg_value(&cf[0], paths[q]));
        if (same) continue;
        for (int i = 0; i < n; i++) {
            char w[200];
            cfg_words(paths[q], cfg_value(&cf[i], paths[q]), w, sizeof w);
            const size_t l = strlen(lab[i]);
            snprintf(lab[i] + l, sizeof lab[i] - l, "%s%s", l ? " " : "", w);
        }
    }
    for (int h = 0; h < (int)(sizeof cfg_headline / sizeof cfg_headline[0]); h++) {
        const char *v = cfg_value(&cf[0], cfg_headline[h]);
        int same = strcmp(v, "-") != 0;
        for (int i = 1; i < n && same; i++) same = !strcmp(cfg_value(&cf[i], cfg_headline[h]), v);
        if (!same) continue;
        char w[200];
        cfg_words(cfg_headline[h], v, w, sizeof w);
        const size_t l = strlen(common);
        snprintf(common + l, cn - l, "%s%s", l ? " " : "all runs: ", w);
    }
    free(cf);
    for (int i = 0; i < n; i++) {
        char folder[256];
        run_name(inputs[i], folder, sizeof folder);
        int dup = 0;
        for (int j = 0; j < n; j++) dup |= j != i && !strcmp(lab[i], lab[j]);
        if (!lab[i][0]) snprintf(runs[i].name, sizeof runs[i].name, "%s", folder);
        else if (dup) snprintf(runs[i].name, sizeof runs[i].name, "%.200s (%.50s)", lab[i], folder);
        else snprintf(runs[i].name, sizeof runs[i].name, "%.255s", lab[i]);
    }
}

static int run_load(Run *R, const char *in, int epoch, int tsne, int verbose, char *msg, size_t msgn) {
    memset(R, 0, sizeof *R);
    R->ev = -1;
    if (!is_dir(in) && !is_file(in)) {
        snprintf(msg, msgn, "%s: no such session", in);
        return 1;
    }
    /* the reads below (the history; the t-SNE samples of a single session) in a child first: a
     * file that crashes the HDF5 library gives a message, not a crash (sessions/probe.c) */
    if (session_probe(in, tsne ? SESSION_PROBE_TSNE : SESSION_PROBE_HISTORY) != ML_OK ||
        session_history_load(in, &R->h) != ML_OK) {
        snprintf(msg, msgn, "%s", ml_last_error());
        return 1;
    }
    run_words(&R->h, R->name, sizeof R->name);
    R->r.h = &R->h;
    R->r.name = R->name;
    const int rc = pick_eval(&R->h, in, epoch, &R->ev, msg, msgn);
    if (rc) return rc;
    prepare_plan(R, NULL);
    if (tsne) prepare_tsne(R, verbose, -1);
    return 0;
}

/* Routed layer l of a loaded run as a run of its own (R->h: the layer's view of the history,
 * steps and evaluations projected with step_record_layer / eval_record_layer, its experts and
 * class x expert matrices; everything else shared with src, which owns it): the per-layer figures
 * of a run with two or more routed layers. Free with layer_run_free. 0, or -1 out of memory. */
static int layer_run(const Run *src, int l, int tsne, int verbose, Run *R) {
    const SessionHistory *h = &src->h;
    memset(R, 0, sizeof *R);
    R->h = *h;
    R->h.steps = malloc(sizeof *R->h.steps * (size_t)(h->nsteps > 0 ? h->nsteps : 1));
    R->h.evals = malloc(sizeof *R->h.evals * (size_t)(h->nevals > 0 ? h->nevals : 1));
    if (!R->h.steps || !R->h.evals) {
        free(R->h.steps);
        free(R->h.evals);
        memset(R, 0, sizeof *R);
        return -1;
    }
    for (long i = 0; i < h->nsteps; i++) step_record_layer(&h->steps[i], l, &R->h.steps[i]);
    for (int i = 0; i < h->nevals; i++) eval_record_layer(&h->evals[i], l, &R->h.evals[i]);
    const LayerInfo *li = &h->layer[l];
    R->h.E = li->E;
    R->h.info.experts = li->E;
    R->h.info.k = li->k;
    if (h->lce[l]) R->h.ce = h->lce[l];
    snprintf(R->name, sizeof R->name, "%.200s \u00b7 %s", src->name, li->name);
    R->r.h = &R->h;
    R->r.name = R->name;
    R->r.layer_fig = 1;
    R->ev = src->ev;
    prepare_plan(R, li->name);
    if (tsne) prepare_tsne(R, verbose, l);
    return 0;
}

static void layer_run_free(Run *R) {
    free(R->h.steps);
    free(R->h.evals);
    ml_free(R->feat);
    ml_free(R->expert);
    ml_free(R->label);
    free(R->ymap);
    memset(R, 0, sizeof *R);
}

// ---------------------------------------------------------------------------------------------
// drawing callbacks

typedef struct {
    Run *runs;
    int n;
    int by_class;
    int *evs;
    const SweepSummary *sw;
    const char *title;
    const int *drops;   /* (K, E) drops per class x expert of runs[0].ev */
    const char *common; /* what compared runs share: the comparison figures' subtitle */
} Ctx;

static ml_status d_curves(void *c, const char *p, FigFormat f) { return figs_curves(&((Ctx *)c)->runs[0].r, p, f); }
static ml_status d_ce(void *c, const char *p, FigFormat f) {
    return figs_class_expert(&((Ctx *)c)->runs[0].r, ((Ctx *)c)->runs[0].ev, p, f);
}
static ml_status d_drops(void *c, const char *p, FigFormat f) {
    const Ctx *x = c;
    return figs_drops(&x->runs[0].r, x->runs[0].ev, x->drops, p, f);
}
static ml_status d_load(void *c, const char *p, FigFormat f) { return figs_expert_load(&((Ctx *)c)->runs[0].r, p, f); }
static ml_status d_temp(void *c, const char *p, FigFormat f) { return figs_temperature(&((Ctx *)c)->runs[0].r, p, f); }
static ml_status d_tsne(void *c, const char *p, FigFormat f) {
    return figs_tsne(&((Ctx *)c)->runs[0].r, ((Ctx *)c)->by_class, p, f);
}
static ml_status d_routing(void *c, const char *p, FigFormat f) { return figs_routing(&((Ctx *)c)->runs[0].r, p, f); }
static ml_status d_gap_rho(void *c, const char *p, FigFormat f) {
    return figs_sweep_gap_rho(((Ctx *)c)->sw, ((Ctx *)c)->title, p, f);
}
static ml_status d_configs(void *c, const char *p, FigFormat f) {
    return figs_sweep_configs(((Ctx *)c)->sw, ((Ctx *)c)->title, p, f);
}

static FigRun *ctx_runs(Ctx *c, FigRun *out) {
    for (int i = 0; i < c->n; i++) out[i] = c->runs[i].r;
    return out;
}
static ml_status d_cmp_curves(void *c, const char *p, FigFormat f) {
    FigRun r[PLOT_MAX_RUNS];
    return figs_cmp_curves(ctx_runs(c, r), ((Ctx *)c)->n, ((Ctx *)c)->common, p, f);
}
static ml_status d_cmp_heat(void *c, const char *p, FigFormat f) {
    FigRun r[PLOT_MAX_RUNS];
    return figs_cmp_heatmaps(ctx_runs(c, r), ((Ctx *)c)->evs, ((Ctx *)c)->n, ((Ctx *)c)->common, p, f);
}
static ml_status d_cmp_table(void *c, const char *p, FigFormat f) {
    FigRun r[PLOT_MAX_RUNS];
    return figs_cmp_table(ctx_runs(c, r), ((Ctx *)c)->n, p, f);
}

// ---------------------------------------------------------------------------------------------
// the three kinds of input

/* The routing figures of one router (sfx: "" for the primary layer, "_moe2" for a layer's own). */
static int plot_routing(Out *o, Run *R, const char *sfx) {
    Ctx c = {.runs = R, .n = 1};
    char nm[96];
    int bad = 0;
#define EMIT(base, fn) (snprintf(nm, sizeof nm, "%s%s", base, sfx), emit(o, nm, fn, &c))
    if (R->ev >= 0) bad |= EMIT("class_expert", d_ce);
    /* drops per class x expert (sessions from before issue 29 have none: no figure) */
    const SessionHistory *h = &R->h;
    const int ke = h->K * h->E;
    int *drops = R->ev >= 0 && ke > 0 ? ml_alloc(sizeof(int) * (size_t)ke) : NULL;
    if (drops && session_read_drops(h->path, sfx[0] ? sfx + 1 : NULL, R->ev, h->K, h->E, drops) == ML_OK) {
        long total = 0;
        for (int i = 0; i < ke; i++) total += drops[i];
        if (total > 0) { /* nothing dropped (dropless, soft heads): no figure */
            c.drops = drops;
            bad |= EMIT("drops_class", d_drops);
            c.drops = NULL;
        }
    }
    ml_free(drops);
    bad |= EMIT("expert_load", d_load);
    if (R->r.has_plan) bad |= EMIT("temperature", d_temp);
    bad |= EMIT("routing", d_routing);
    if (R->r.tsne_n > 0) {
        c.by_class = 0;
        bad |= EMIT("tsne_expert", d_tsne);
        c.by_class = 1;
        bad |= EMIT("tsne_class", d_tsne);
    }
#undef EMIT
    return bad;
}

static int plot_session(Out *o, Run *R, int tsne) {
    Ctx c = {.runs = R, .n = 1};
    const SessionHistory *h = &R->h;
    int bad = emit(o, "curves", d_curves, &c);
    if (h->E > 0) bad |= plot_routing(o, R, "");
    /* two or more routed layers: each layer's routing figures too, named by the layer */
    for (int l = 0; h->nlayers >= 2 && l < h->nlayers; l++) {
        Run L;
        if (layer_run(R, l, tsne, o->verbose, &L)) {
            fprintf(stderr, "moelab plot: out of memory for layer %s\n", h->layer[l].name);
            bad = 1;
            break;
        }
        char sfx[REC_LAYER_NAME + 2];
        snprintf(sfx, sizeof sfx, "_%s", h->layer[l].name);
        bad |= plot_routing(o, &L, sfx);
        layer_run_free(&L);
    }
    return bad ? 1 : 0;
}

/* A CSV field: quoted (quotes doubled) when it holds a comma, quote or line break. */
static void csv_field(FILE *fp, const char *v) {
    if (!strpbrk(v, ",\"\n\r")) {
        fputs(v, fp);
        return;
    }
    fputc('"', fp);
    for (; *v; v++) {
        if (*v == '"') fputc('"', fp);
        fputc(*v, fp);
    }
    fputc('"', fp);
}

/* final_metrics.csv: one row per compared session. */
static int write_metrics_csv(Out *o, Run *runs, int n) {
    char path[1400];
    snprintf(path, sizeof path, "%s/final_metrics.csv", o->wdir);
    FILE *fp = fopen(path, "w");
    if (!fp) {
        snprintf(o->err, sizeof o->err, "%s: cannot open: %s", path, strerror(errno));
        return -1;
    }
    fprintf(fp, "run,path,head,backbone,width,experts,k,hidden,seed,epoch,step,test_acc,best_test_acc,test_loss,"
                "train_acc,train_loss,mutual_info_nats,test_load_entropy,test_first_share,test_dead_first,"
                "rho_nominal,rho_realized,elapsed_s\n");
    for (int i = 0; i < n; i++) {
        const SessionHistory *h = &runs[i].h;
        const EvalRecord *e = h->nevals ? &h->evals[h->nevals - 1] : NULL;
        double best = NAN;
        for (int j = 0; j < h->nevals; j++)
            if (!(h->evals[j].test_acc <= best)) best = h->evals[j].test_acc;
        csv_field(fp, runs[i].name);
        fputc(',', fp);
        csv_field(fp, h->path);
        fprintf(fp, ",%s,%s,%g,%d,%d,%d,%llu,", h->info.head, h->info.backbone, h->info.width, h->E, h->info.k,
                h->info.hidden, (unsigned long long)h->info.seed);
        if (e)
            fprintf(fp, "%d,%ld,%.6f,%.6f,%.6f,%.6f,%.6f,%.6f,%.6f,%.6f,%d,%.6f,%.6f,%.3f\n", e->epoch, e->step,
                    e->test_acc, best, e->test_loss, e->train_acc, e->train_loss, e->moe.mutual_info, e->moe.test_load_entropy,
                    e->moe.test_first_share, e->moe.test_dead_first, h->rho_nominal, e->train_rho_realized, e->elapsed);
        else fprintf(fp, ",,,,,,,,,,,%.6f,,\n", h->rho_nominal);
    }
    if (fclose(fp) != 0) {
        snprintf(o->err, sizeof o->err, "%s: write failed: %s", path, strerror(errno));
        return -1;
    }
    o->written++;
    if (o->verbose) printf("wrote %s/final_metrics.csv (%d rows)\n", o->dir, n);
    return 0;
}

static int plot_compare(Out *o, Run *runs, int n, int epoch, const char *common) {
    int evs[PLOT_MAX_RUNS];
    for (int i = 0; i < n; i++) {
        /* the same epoch in every heatmap: the one asked for, else the last epoch all runs reached */
        evs[i] = runs[i].ev;
    }
    if (epoch < 0) {
        int last = INT_MAX;
        for (int i = 0; i < n; i++)
            if (runs[i].h.nevals > 0 && runs[i].h.evals[runs[i].h.nevals - 1].epoch < last)
                last = runs[i].h.evals[runs[i].h.nevals - 1].epoch;
        for (int i = 0; i < n; i++) evs[i] = last == INT_MAX ? -1 : session_history_eval_at_epoch(&runs[i].h, last);
    }
    Ctx c = {.runs = runs, .n = n, .evs = evs, .common = common};
    int bad = emit(o, "compare_curves", d_cmp_curves, &c);
    int moe = 0;
    for (int i = 0; i < n; i++) moe += runs[i].h.E > 0;
    if (moe) bad |= emit(o, "compare_class_expert", d_cmp_heat, &c);
    bad |= emit(o, "compare_table", d_cmp_table, &c);
    bad |= write_metrics_csv(o, runs, n) != 0;
    return bad ? 1 : 0;
}

static int plot_sweep(Out *o, const char *in, const char *path, char *msg, size_t msgn) {
    SweepSummary s;
    memset(&s, 0, sizeof s);
    if (sweep_h5_read(path, &s) != ML_OK) {
        snprintf(msg, msgn, "%s", ml_last_error());
        return 1;
    }
    char name[256], title[320];
    if (g_title) snprintf(name, sizeof name, "%s", g_title);
    else run_name(in, name, sizeof name);
    int has_gap = 0;
    for (int c = 0; c < s.nconfigs; c++) has_gap |= s.configs[c].baseline >= 0;
    if (!has_gap) {
        snprintf(msg, msgn, "%s: the sweep has no MoE-vs-dense gap to plot (it needs a head axis with dense)", path);
        sweep_summary_free(&s);
        return 1;
    }
    Ctx c = {.sw = &s, .title = title};
    snprintf(title, sizeof title, "%s: MoE - dense vs rho", name);
    /* gap against rho only where the x axis means something: one kind of routed head (a line
     * through moe, softmoe-sample and softmoe-batch joins different models) at two rho or more */
    int kinds = 0, rhos = 0;
    const char *kind0 = NULL;
    double rho[256];
    for (int k = 0; k < s.nconfigs; k++) {
        const SweepConfig *g = &s.configs[k];
        if (g->baseline < 0) continue;
        if (!kind0) kind0 = g->head, kinds = 1;
        else if (strcmp(kind0, g->head)) kinds = 2;
        const double r = isfinite(g->rho_realized) ? g->rho_realized : g->rho_nominal;
        int seen = !isfinite(r);
        for (int j = 0; j < rhos && !seen; j++) seen = fabs(rho[j] - r) <= 1e-3 * fmax(1e-6, fabs(r));
        if (!seen && rhos < 256) rho[rhos++] = r;
    }
    int bad = 0;
    if (kinds == 1 && rhos >= 2) bad = emit(o, "gap_rho", d_gap_rho, &c);
    else if (o->verbose)
        printf("gap_rho   not drawn: %s (the configs figure shows each gap)\n",
               kinds > 1 ? "the configurations are different kinds of head" : "the configurations do not differ in rho");
    /* a preset's sweep: the verdict on its claim in the title, the whole block in verdict.txt */
    const VerdictKind vk = verdict_infer(&s);
    if (vk != VERDICT_NONE) {
        char vpath[1300];
        snprintf(vpath, sizeof vpath, "%s/verdict.txt", o->wdir);
        FILE *vf = fopen(vpath, "w");
        const Verdict v = verdict_print(vk, &s, vf ? vf : stderr);
        if (!vf || fclose(vf) != 0) {
            fprintf(stderr, "moelab plot: %s/verdict.txt: %s\n", o->dir, strerror(errno));
            bad = 1;
        } else if (o->verbose) {
            printf("%s/verdict.txt\n", o->dir);
        }
        snprintf(title, sizeof title, "%s: gap per configuration (verdict: %s)", name, verdict_name(v));
    } else {
        snprintf(title, sizeof title, "%s: gap per configuration", name);
    }
    bad |= emit(o, "configs", d_configs, &c);
    sweep_summary_free(&s);
    return bad ? 1 : 0;
}

/* The sweep.h5 of an input, or "" when it is a session. */
static void sweep_path(const char *in, char *out, size_t n) {
    out[0] = 0;
    if (is_dir(in)) {
        char p[1100];
        snprintf(p, sizeof p, "%s/sweep.h5", in);
        /* any file of that name, not only a regular one: sweep_h5_read refuses a FIFO or a
         * directory naming it (it was taken for a session folder without live.h5) */
        struct stat sb;
        if (lstat(p, &sb) == 0) snprintf(out, n, "%s", p);
        return;
    }
    const char *b = strrchr(in, '/');
    b = b ? b + 1 : in;
    if (strcmp(b, "sweep.h5") == 0) snprintf(out, n, "%s", in);
}

int plot_run(const char *const *inputs, int n, const char *outdir, unsigned formats, int epoch, int verbose, char *msg,
             size_t msgn) {
    msg[0] = 0;
    if (n < 1 || n > PLOT_MAX_RUNS) {
        snprintf(msg, msgn, "give 1 to %d sessions (or one sweep), not %d", PLOT_MAX_RUNS, n);
        return 2;
    }
    if (!formats) formats = PLOT_PDF;
    Out o = {.formats = formats, .verbose = verbose};
    if (outdir && *outdir) snprintf(o.dir, sizeof o.dir, "%s", outdir);
    else plot_default_out(inputs, n, o.dir, sizeof o.dir);
    char sp[1100];
    for (int i = 0; i < n; i++) {
        sweep_path(inputs[i], sp, sizeof sp);
        if (sp[0] && n > 1) {
            snprintf(msg, msgn, "%s is a sweep: plot it alone (moelab plot %s)", inputs[i], inputs[i]);
            return 2;
        }
    }
    int rc = 0, staged = 0;
    OutDir od;
    memset(&od, 0, sizeof od);
    if (sp[0] && n == 1) {
        if (epoch >= 0) {
            snprintf(msg, msgn, "--epoch applies to sessions, not to a sweep");
            return 2;
        }
        if (outdir_begin(&od, o.dir)) {
            snprintf(msg, msgn, "%s", ml_last_error());
            return 1;
        }
        staged = 1;
        snprintf(o.wdir, sizeof o.wdir, "%s", od.tmp);
        rc = plot_sweep(&o, inputs[0], sp, msg, msgn);
    } else {
        Run *runs = calloc((size_t)n, sizeof *runs);
        if (!runs) {
            snprintf(msg, msgn, "out of memory");
            return 1;
        }
        for (int i = 0; i < n && rc == 0; i++) rc = run_load(&runs[i], inputs[i], epoch, n == 1, verbose, msg, msgn);
        /* the labels: --label per session, --title for a single one; compared runs by what differs
         * between their configurations, what they share in the comparison figures' subtitle */
        char common[512] = "";
        if (rc == 0 && n > 1) compare_labels(runs, n, inputs, common, sizeof common);
        for (int i = 0; i < n && rc == 0; i++)
            if (i < g_nlabels) snprintf(runs[i].name, sizeof runs[i].name, "%s", g_labels[i]);
        if (rc == 0 && n == 1 && g_title) snprintf(runs[0].name, sizeof runs[0].name, "%s", g_title);
        if (rc == 0 && outdir_begin(&od, o.dir)) {
            snprintf(msg, msgn, "%s", ml_last_error());
            rc = 1;
        } else if (rc == 0) {
            staged = 1;
            snprintf(o.wdir, sizeof o.wdir, "%s", od.tmp);
        }
        if (rc == 0) rc = n == 1 ? plot_session(&o, &runs[0], 1) : plot_compare(&o, runs, n, epoch, common);
        for (int i = 0; i < n; i++) run_free(&runs[i]);
        free(runs);
    }
    fig_release_caches(); /* nothing of cairo or fontconfig stays allocated between exports */
    /* all the figures or none: a failed one removes what this call wrote (earlier files stay) */
    if (staged && rc == 0 && outdir_commit(&od)) {
        snprintf(msg, msgn, "%s", ml_last_error());
        rc = 1;
    }
    if (rc == 0) snprintf(msg, msgn, "%d file%s in %s", o.written, o.written == 1 ? "" : "s", o.dir);
    else if (!msg[0]) snprintf(msg, msgn, "%s", o.err[0] ? o.err : "figure failed");
    if (staged && rc != 0) {
        outdir_unstage(&od, msg, msgn);
        outdir_abort(&od);
    }
    return rc;
}

// ---------------------------------------------------------------------------------------------
// the subcommand

static void usage(FILE *f) {
    fprintf(f, "usage: moelab plot SESSION|SWEEP [SESSION ...] [--out DIR] [--format pdf|svg|png|all] [--epoch N]\n"
               "                   [--title TEXT] [--label TEXT ...] [--columns 1|2]\n\n"
               "Paper figures (PDF and SVG vector, PNG at 300 dpi; 3.5 or 7 inches wide) of:\n"
               "  one session   curves, class_expert, expert_load, temperature, routing, tsne_expert, tsne_class\n"
               "  2-8 sessions  compare_curves, compare_class_expert, compare_table + final_metrics.csv\n"
               "  a sweep       gap_rho (gap vs rho per backbone, 95%% CI), configs (gap per configuration)\n\n"
               "  --out DIR     where the files go (SESSION/figures, SWEEP/figures; figures-compare for several)\n"
               "  --format F    pdf, svg, png, a comma list or all (pdf)\n"
               "  --epoch N     the evaluation of the heatmaps and t-SNE (the last one; for several sessions\n"
               "                the last epoch they all reached)\n"
               "  --title TEXT  the name in the titles (one session or a sweep; default: the configuration in\n"
               "                words, e.g. \"moe E=8 k=2 h=1024\"; a sweep: its folder)\n"
               "  --label TEXT  the legend name of each compared session, in order (repeat per session)\n"
               "  --columns C   every figure 1 column (3.5 in) or 2 columns (7 in) wide (default: each its own)\n");
}

static int parse_formats(const char *s, unsigned *out) {
    *out = 0;
    if (strcmp(s, "all") == 0) {
        *out = PLOT_PDF | PLOT_SVG | PLOT_PNG;
        return 0;
    }
    char buf[64];
    snprintf(buf, sizeof buf, "%s", s);
    for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        FigFormat f;
        if (fig_format_parse(t, &f) != ML_OK) return -1;
        *out |= 1u << f;
    }
    return *out ? 0 : (ml_fail(ML_ERR_ARG, "empty --format"), -1);
}

int cmd_plot(int argc, char **argv) {
    const char *inputs[PLOT_MAX_RUNS + 1];
    int n = 0, epoch = -1;
    const char *out = NULL;
    unsigned formats = PLOT_PDF;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            return 0;
        }
        if (!strcmp(a, "--title") || !strcmp(a, "--label") || !strcmp(a, "--columns")) {
            if (i + 1 >= argc) {
                fprintf(stderr, "moelab plot: %s needs a value\n", a);
                return 2;
            }
            const char *v = argv[++i];
            if (a[2] == 't') g_title = v;
            else if (a[2] == 'l') {
                if (g_nlabels == PLOT_MAX_RUNS) {
                    fprintf(stderr, "moelab plot: at most %d --label\n", PLOT_MAX_RUNS);
                    return 2;
                }
                g_labels[g_nlabels++] = v;
            } else if (!strcmp(v, "1") || !strcmp(v, "2")) figs_set_columns(v[0] - '0');
            else {
                fprintf(stderr, "moelab plot: --columns %s: 1 (3.5 in) or 2 (7 in)\n", v);
                return 2;
            }
            continue;
        }
        if (strcmp(a, "--out") == 0 || strcmp(a, "--format") == 0 || strcmp(a, "--epoch") == 0) {
            if (i + 1 >= argc) {
                fprintf(stderr, "moelab plot: %s needs a value\n", a);
                return 2;
            }
            const char *v = argv[++i];
            if (a[2] == 'o') {
                out = v;
            } else if (a[2] == 'f') {
                if (parse_formats(v, &formats)) {
                    fprintf(stderr, "moelab plot: --format %s: %s\n", v, ml_last_error());
                    return 2;
                }
            } else {
                char *end;
                errno = 0;
                const long e = strtol(v, &end, 10);
                if (errno || end == v || *end || e < 0 || e > INT_MAX) {
                    fprintf(stderr, "moelab plot: --epoch %s: expected an epoch number >= 0\n", v);
                    return 2;
                }
                epoch = (int)e;
            }
            continue;
        }
        if (a[0] == '-') {
            fprintf(stderr, "moelab plot: unknown option '%s'\n", a);
            usage(stderr);
            return 2;
        }
        if (n == PLOT_MAX_RUNS) {
            fprintf(stderr, "moelab plot: at most %d sessions can be compared\n", PLOT_MAX_RUNS);
            return 2;
        }
        inputs[n++] = a;
    }
    if (n == 0) {
        fprintf(stderr, "moelab plot: give a session or sweep folder\n");
        usage(stderr);
        return 2;
    }
    if (g_nlabels > n) {
        fprintf(stderr, "moelab plot: %d --label for %d session%s\n", g_nlabels, n, n == 1 ? "" : "s");
        return 2;
    }
    char msg[1024];
    fig_title_stats_reset();
    const int rc = plot_run(inputs, n, out, formats, epoch, 1, msg, sizeof msg);
    if (rc) fprintf(stderr, "moelab plot: %s\n", msg);
    else printf("%s\n", msg);
    /* every title line was measured as it was drawn (views/fig.c fig_title) */
    int lines = 0, bad = 0;
    char worst[256];
    fig_title_stats(&lines, &bad, worst, sizeof worst);
    if (bad) fprintf(stderr, "moelab plot: %d of %d title lines do not fit their panel, e.g. %s\n", bad, lines, worst);
    else if (getenv("MOELAB_FIG_CHECK")) printf("titles    %d lines, each inside its panel\n", lines);
    return rc;
}
