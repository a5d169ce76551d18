/* options.c — the training option table (see options.h). One row per option: its name, value,
 * help text, group, and where the value goes (a field of AppOptions with its range, or a handler
 * for the named choices). getopt_long's array, the parsing, `--help` and the defaults shown in it
 * are all generated from the rows; the defaults themselves are read from app_options_defaults(),
 * so the help cannot disagree with them. The temperature options come from TAU_KEYS
 * (core/tau.h), the kind lists from TAU_KINDS, OPT_KINDS and LR_KINDS. Every option that sets a
 * number checks that the whole argument is a finite number in range; errors name the option and
 * the value. */
#include "app/cli/options.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app/cli/commands.h"
#include "app/cli/options_internal.h"
#include "core/cmdtab.h"
#include "core/params.h"
#include "core/vocab.h"

enum { G_DATA, G_SESSION, G_MODEL, G_ROUTING, G_TEMP, G_COMMANDS, G_OPTIM, G_BENCH, G_END };
static const char *const group_names[] = {
    [G_DATA] = "Data and run",
    [G_SESSION] = "Session (live.h5 + checkpoints)",
    [G_MODEL] = "Model",
    [G_ROUTING] = "Routing (MoE heads)",
    [G_TEMP] = "Temperature",
    [G_COMMANDS] = "Commands",
    [G_OPTIM] = "Optimiser",
    [G_BENCH] = "Benchmark (moelab bench)",
    [G_END] = NULL, /* --help: no heading */
};


/* A field of AppOptions whose type must be T (compile error otherwise). */
#define AT(T, m) .off = offsetof(AppOptions, m) + 0 * sizeof(char[_Generic(((AppOptions *)0)->m, T : 1, default : -1)])
#define F32(m, l, h) .type = T_F32, AT(float, m), .lo = (l), .hi = (h)
#define F64(m, l, h) .type = T_F64, AT(double, m), .lo = (l), .hi = (h)
#define I32(m, l, h) .type = T_I32, AT(int, m), .lo = (l), .hi = (h)
#define I64(m, l, h) .type = T_I64, AT(long, m), .lo = (l), .hi = (h)
#define U64(m, l, h) .type = T_U64, AT(uint64_t, m), .lo = (l), .hi = (h)
#define FLAG(m, v) .type = T_FLAG, AT(int, m), .lo = (v)
#define STR(m) .type = T_STR, AT(char *, m), .size = sizeof(((AppOptions *)0)->m)
#define FN(f) .type = T_FN, .set = (f)
#define CHOICES(...) \
    .choices = (const char *const[]) { __VA_ARGS__, NULL }
#define OPT_TYPE_float F32
#define OPT_TYPE_int I32
#define OPT_TYPE_(t) OPT_TYPE_##t

/* ---- choices and their defaults */
static int set_backbone(AppOptions *o, const char *a, const char *cmd);
static int set_fc2_init(AppOptions *o, const char *a, const char *cmd);
static int set_head(AppOptions *o, const char *a, const char *cmd);
static int set_optimizer(AppOptions *o, const char *a, const char *cmd);
static int set_lr_schedule(AppOptions *o, const char *a, const char *cmd);
static int set_priority(AppOptions *o, const char *a, const char *cmd);
static int set_bias_mode(AppOptions *o, const char *a, const char *cmd);
static int set_renorm(AppOptions *o, const char *a, const char *cmd);
static int set_schedule(AppOptions *o, const char *a, const char *cmd);
static int set_labels(AppOptions *o, const char *a, const char *cmd);
static int set_help(AppOptions *o, const char *a, const char *cmd);
static int set_moe_after(AppOptions *o, const char *a, const char *cmd);
static int set_bench_model(AppOptions *o, const char *a, const char *cmd);
static const char *now_bench_model(const AppOptions *d) { return d->bench_model; }
static int set_ffn_after(AppOptions *o, const char *a, const char *cmd);
static int set_moe_hidden(AppOptions *o, const char *a, const char *cmd);
static int set_moe_experts(AppOptions *o, const char *a, const char *cmd);
static int set_moe_k(AppOptions *o, const char *a, const char *cmd);
static int set_on_collapse(AppOptions *o, const char *a, const char *cmd);
static int set_init_bias(AppOptions *o, const char *a, const char *cmd);
static const char *now_backbone(const AppOptions *d) { return backbone_name(d->train.model.backbone); }
static const char *now_fc2_init(const AppOptions *d) { return fc2_init_name(d->train.model.fc2_init); }
static const char *now_head(const AppOptions *d) { return moe_head_name(d->train.model.head.kind); }
static const char *now_optimizer(const AppOptions *d) { return optim_kind_name(d->train.opt.kind); }
static const char *now_lr_schedule(const AppOptions *d) { return lr_kind_name(d->train.lr.kind); }
static const char *now_priority(const AppOptions *d) { return moe_priority_name(d->train.model.head.priority); }
static const char *now_renorm(const AppOptions *d) { return moe_renorm_name(d->train.model.head.renorm); }
static const char *now_bias_mode(const AppOptions *d) { return moe_bias_name(d->train.model.head.bias_mode); }
static const char *now_schedule(const AppOptions *d) { return tau_kind_name(d->train.tau.kind); }
static const char *now_labels(const AppOptions *d) { return d->coarse ? "coarse" : "fine"; }
static const char *show_wd(const AppOptions *d, char *b, size_t n) {
    snprintf(b, n, "%g; adamw %g", (double)optim_default_wd(d->train.opt.kind), (double)optim_default_wd(OPT_ADAMW));
    return b;
}
static const char *more_commands(char *b, size_t n);
static const char *more_schedule(char *b, size_t n);

/* ---- the table (the order of --help) */
static const OptSpec opts[] = {
    {"dataset", "SPEC", G_DATA,
     "default | fashion-mnist | mnist | cifar-10 | cifar-100 | DIR | FILE.h5 | synthetic[:HxWxC[:K[:N]]]; DIR holds IDX "
     "or CIFAR binary files; suffixes :coarse :stats=known|kuangliu|computed; default = fashion-mnist when installed, "
     "else synthetic",
     STR(dataset)},
    {"labels", NULL, G_DATA, "CIFAR-100 label set", FN(set_labels), CHOICES("fine", "coarse"), .current = now_labels},
    {"no-augment", NULL, G_DATA, "no random crop + flip (on by default for RGB datasets)", FLAG(train.augment, 0),
     .dflt = ""},
    {"epochs", "N", G_DATA, "training epochs", I32(train.epochs, 1, 100000)},
    {"batch", "B", G_DATA, "mini-batch size (under mpirun: the global batch, split evenly over the ranks)",
     I32(train.model.batch, 2, 65536)},
    {"sync-bn", NULL, G_DATA,
     "under mpirun: batch-norm statistics over every rank's samples (default: each rank's own, as distributed "
     "trainers do)",
     FLAG(train.model.sync_bn, 1), .dflt = ""},
    {"seed", "S", G_DATA, "seed of every random stream", U64(train.seed, 0, 9007199254740991L)},
    {"threads", "T", G_DATA, "OpenMP + OpenBLAS threads", I32(train.threads, 1, 1024), .dflt = "all cores"},
    {"log-every", "N", G_DATA, "step records every N steps", I32(train.log_every, 1, 1000000)},
    {"headless", NULL, G_DATA, "plain progress lines instead of the live screen", FLAG(headless, 1), .dflt = ""},
    {"no-mouse", NULL, G_DATA,
     "the live screen ignores the mouse (on by default: a click focuses a panel, a double click zooms it, the wheel "
     "scrolls it)",
     FLAG(no_mouse, 1), .dflt = ""},
    {"dry-run", NULL, G_DATA, "print the model's layers, parameters, FLOPs, rho and the memory the run would need, then exit", FLAG(dry_run, 1),
     .dflt = ""},
    {"quiet", NULL, G_DATA, "(reserved: no effect yet)", FLAG(quiet, 1), .dflt = "", .hidden = 1},

    {"session", "DIR", G_SESSION, "session folder", STR(session), .dflt = "runs/<dataset>-<head>-<time>"},
    {"no-session", NULL, G_SESSION, "write nothing to disk", FLAG(no_session, 1), .dflt = ""},
    {"private", NULL, G_SESSION,
     "make the session folder 0700: only you can read the run (without it the umask decides, as for any Unix tool; "
     "the control socket is owner-only either way)",
     FLAG(private_run, 1), .dflt = ""},
    {"notify", "CMD", G_SESSION,
     "run CMD (/bin/sh) on a collapse, warning, expert death, NaN loss, finished or failed run, with MOELAB_EVENT, "
     "MOELAB_SESSION, MOELAB_STEP, MOELAB_TEXT set; never blocks training; not stored in the session",
     STR(notify), .dflt = "none"},
    {"notify-timeout", "S", G_SESSION, "seconds a --notify command may run before it is killed", F64(notify_timeout, 0.1, 86400)},
    {"resume", "DIR", G_SESSION, "continue DIR from its newest valid checkpoint (with --epochs N: to N epochs)", STR(resume), .dflt = ""},
    {"ckpt-every", "N", G_SESSION, "checkpoint every N epochs, 0 = only at the end", I32(ckpt_every, 0, 1000000)},
    {"ckpt-steps", "N", G_SESSION, "also checkpoint every N steps, 0 = off", I64(ckpt_steps, 0, 1000000000)},
    {"keep", "N", G_SESSION, "checkpoints kept, 0 = all", I32(keep, 0, 1000000)},
    {"tsne-samples", "N", G_SESSION, "test images whose features each evaluation saves (t-SNE view), 0 = none",
     I32(train.tsne_samples, 0, 65536)},

    {"backbone", NULL, G_MODEL, "depthwise-separable or standard 3x3 blocks", FN(set_backbone), CHOICES("dw", "std"),
     .current = now_backbone},
    {"width", "W", G_MODEL, "width multiplier, c0 = round(32 W)", F32(train.model.width, 0.01, 16)},
    {"head", "KIND", G_MODEL, "classifier head", FN(set_head),
     CHOICES("dense", "moe", "softmoe-batch", "softmoe-sample"), .list = 1, .current = now_head},
    {"hidden", "H", G_MODEL, "expert hidden width h; the dense MLP has k*h", I32(train.model.head.h, 1, 1 << 16)},
    {"experts", "E", G_MODEL, "number of experts", I32(train.model.head.E, 1, MOE_MAX_EXPERTS)},
    {"k", "K", G_MODEL, "experts per sample", I32(train.model.head.k, 1, MOE_MAX_EXPERTS)},
    {"moe-after", "LIST", G_MODEL,
     "routed conv-FFN layers after these backbone stages (0 = stem, 1..3 = block s), e.g. 2,3 (or 2+3, the form of a "
     "sweep value; none); routing knobs and tau are the head's",
     FN(set_moe_after), .dflt = "none"},
    {"ffn-after", "LIST", G_MODEL, "the matched dense baseline: one conv-FFN of hidden k*h after these stages",
     FN(set_ffn_after), .dflt = "none"},
    {"moe-hidden", "LIST", G_MODEL, "hidden width h of the backbone layers: one value or one per layer",
     FN(set_moe_hidden), .dflt = "--hidden"},
    {"moe-experts", "LIST", G_MODEL, "experts E of the backbone MoE layers: one value or one per layer",
     FN(set_moe_experts), .dflt = "--experts"},
    {"moe-k", "LIST", G_MODEL, "k of the backbone layers: one value or one per layer", FN(set_moe_k), .dflt = "--k"},
    {"fc2-init", NULL, G_MODEL,
     "the second layer of every residual branch (the head's MLP or experts, the backbone's layers): N(0, 1/fan_in), "
     "zero (each branch starts as the identity), or zero for the backbone's layers only",
     FN(set_fc2_init), CHOICES("normal", "zero", "zero-backbone"), .current = now_fc2_init},

    {"cf", "F", G_ROUTING, "train capacity factor, C = ceil(cf k B / E); <= 0 dropless",
     F32(train.model.head.cf, -1, 1000)},
    {"eval-cf", "F", G_ROUTING, "evaluation capacity factor; <= 0 dropless", F32(train.model.head.eval_cf, -1, 1000)},
    {"priority", NULL, G_ROUTING, "order inside one rank when capacity runs out", FN(set_priority),
     CHOICES("batch", "gate"), .current = now_priority},
    {"noise", "S", G_ROUTING, "Gumbel selection noise scale in training, 0 = deterministic",
     F32(train.model.head.noise, 0, 100)},
    {"bias-mode", NULL, G_ROUTING, "utility bias", FN(set_bias_mode), CHOICES("none", "select", "logits"),
     .current = now_bias_mode},
    {"bias-rate", "U", G_ROUTING, "bias update b_e += U sign(mean - count_e)", F32(train.model.head.bias_rate, 0, 100)},
    {"alpha", "A", G_ROUTING, "load-balancing loss weight", F32(train.model.head.alpha, 0, 1e4)},
    {"beta", "B", G_ROUTING, "router z-loss weight", F32(train.model.head.beta, 0, 1e4)},
    {"renorm", NULL, G_ROUTING,
     "renormalise the k kept gates to sum 1: auto = only when k >= 2 (at k = 1 the gate is the softmax probability, "
     "as in Switch; per layer, with each layer's own k)",
     FN(set_renorm), CHOICES("auto", "on", "off"), .current = now_renorm},
    {"no-renorm", NULL, G_ROUTING, "the same as --renorm off", FLAG(train.model.head.renorm, MOE_RENORM_OFF),
     .dflt = ""},
    {"init-bias", "LIST", G_ROUTING,
     "starting utility bias of experts, [LAYER:]eN=V,... (LAYER head or moeS; default every routed layer); with "
     "--bias-mode logits|select, --bias-rate 0 keeps it: scenarios that favour or starve an expert",
     FN(set_init_bias), .dflt = "0"},
    {"slots", "P", G_ROUTING, "softmoe-batch slots per expert", I32(train.model.head.slots, 1, 1 << 20),
     .dflt = "ceil(k B / E)"},
    {"route-window", "N", G_ROUTING, "collapse window: steps judged (dead = no load in all N)",
     I32(train.route.window, 1, 100000)},
    {"collapse-min-steps", "N", G_ROUTING, "post-warm-up steps in the window before collapse is judged",
     I32(train.route.min_steps, 1, 100000), .dflt = "the window"},
    {"collapse-warmup", "N", G_ROUTING, "steps not judged at the start (-1: min(5% of training, 200))",
     I64(train.route.warmup, -1, 100000000)},
    {"collapse-hysteresis", "X", G_ROUTING, "an episode ends when its value is back past threshold -/+ X",
     F64(train.route.hysteresis, 0, 1)},
    {"collapse-confirm", "N", G_ROUTING, "steps running a condition must hold to open or close an episode",
     I32(train.route.confirm, 1, 100000)},
    {"collapse-entropy", "H", G_ROUTING, "collapse if the mean load entropy / log E < H (any view)",
     F64(train.route.entropy_min, 0, 1)},
    {"collapse-share", "S", G_ROUTING, "collapse if one expert's first-choice (soft: gate mass) share > S",
     F64(train.route.max_share, 0, 1)},
    {"collapse-dead", "F", G_ROUTING, "collapse if dead experts >= F E", F64(train.route.dead_frac, 0, 1)},
    {"on-collapse", "RULE", G_ROUTING,
     "once, at the first red collapse (not a warning): pause (a headless run stops, resumable) or 'COMMAND[; COMMAND...]' (set, anneal, "
     "eval, snapshot)",
     FN(set_on_collapse), .dflt = "none"},

    {"schedule", "KIND", G_TEMP, "temperature schedule, with the anneal keys it reads:", FN(set_schedule),
     .choices = tau_kind_names, .more = more_schedule, .current = now_schedule},
    {"tau0", "T", G_TEMP, "start temperature", F32(train.tau.tau0, 1e-6, 1e6)},
    {"tau1", "T", G_TEMP, "end temperature", F32(train.tau.tau1, 1e-6, 1e6)},
/* one row per TAU_KEYS key */
// clang-format off
#define TAU_OPTION_(ID, key, field, type, meta, lo, lo_open, hi, opt, opt_lo, opt_hi, help) \
    {opt, meta, G_TEMP, help ", as " key "= in anneal", OPT_TYPE_(type)(train.tau.field, opt_lo, opt_hi)},
    TAU_KEYS(TAU_OPTION_)
#undef TAU_OPTION_
    {"tau-epochs", "E", G_TEMP, "length of the schedule in epochs, then tau1 holds", F32(train.tau_epochs, 0, 1e6),
     .dflt = "whole run"},
    // clang-format on

    {"commands", "FILE", G_COMMANDS, "apply commands from FILE, one per line as 'at STEP COMMAND':", STR(commands),
     .more = more_commands, .dflt = ""},

    {"optimizer", NULL, G_OPTIM, "optimiser", FN(set_optimizer), .choices = optim_kind_names, .current = now_optimizer},
    {"lr", "LR", G_OPTIM, "peak learning rate", F32(train.lr.base, 0, 100)},
    {"lr-schedule", NULL, G_OPTIM, "learning-rate schedule (step = x0.1 at 50% and 75%)", FN(set_lr_schedule),
     .choices = lr_kind_names, .current = now_lr_schedule},
    {"warmup", "E", G_OPTIM, "linear warm-up epochs", F32(train.warmup_epochs, 0, 100000)},
    {"momentum", "M", G_OPTIM, "SGD momentum", F32(train.opt.momentum, 0, 0.9999)},
    {"nesterov", NULL, G_OPTIM, "Nesterov momentum", FLAG(train.opt.nesterov, 1), .dflt = ""},
    {"wd", "WD", G_OPTIM, "decoupled weight decay on conv/linear weights", F32(train.opt.wd, 0, 10), .show = show_wd},

    {"steps", "N", G_BENCH, "timed steps per measurement", I32(steps, 1, 1000000)},
    {"repeat", "R", G_BENCH, "measurements per head, median reported", I32(repeat, 1, 1000)},
    {"heads", "LIST", G_BENCH, "comma list of heads to time", STR(heads)},
    {"model", NULL, G_BENCH,
     "model to time: the reference model (with --heads), or the 64x64 backbone-MoE model of README \"MoE in the "
     "backbone\" / its dense baseline",
     FN(set_bench_model), CHOICES("reference", "backbone-moe", "backbone-ffn"), .current = now_bench_model},
    {"profile", NULL, G_BENCH, "per-layer forward/backward time table (ms per step, % of step, GEMM vs other)",
     FLAG(profile, 1), .dflt = ""},
    {"scaling", NULL, G_BENCH, "also time each head with 1 thread and print the speed-up of --threads",
     FLAG(scaling, 1), .dflt = ""},

    {"help", NULL, G_END, "this text", FN(set_help), .dflt = ""},
};
#define NOPTS ((int)(sizeof opts / sizeof opts[0]))
const OptSpec *const app_opt_rows = opts;
const int app_opt_nrows = NOPTS;
#define OPT_VAL0 256 /* getopt_long returns OPT_VAL0 + row */

static int opt_index(const char *name) {
    for (int i = 0; i < NOPTS; i++)
        if (!strcmp(opts[i].name, name)) return i;
    return -1;
}

void app_options_defaults(AppOptions *o) {
    memset(o, 0, sizeof *o);
    train_config_defaults(&o->train);
    /* the reference router's defaults, chosen by the router study (issue 33, tests/RESULTS.md):
     * small selection noise (1/E at E = 8), a cosine anneal of tau from 1 to 0.3 and a load-balancing
     * weight of 0.05, so the router decides, learns and keeps its experts; the core's defaults
     * (noise 1, alpha 0.01, tau constant 1) stay reachable with --noise 1 --alpha 0.01 --schedule const */
    o->train.model.head.noise = 0.125f;
    o->train.model.head.alpha = 0.05f;
    o->train.tau.kind = TAU_COSINE;
    o->train.tau.tau1 = 0.3f;
    snprintf(o->dataset, sizeof o->dataset, "default");
    o->steps = 30;
    o->repeat = 3;
    snprintf(o->heads, sizeof o->heads, "dense,moe");
    snprintf(o->bench_model, sizeof o->bench_model, "reference");
    o->ckpt_every = 1;
    o->keep = 3;
    o->notify_timeout = 30;
}

/* ---- --help */

/* The default of row r as text ("" for none), read from the defaults d. */
static const char *default_text(const OptSpec *r, const AppOptions *d, char *b, size_t n) {
    const char *p = (const char *)d + r->off;
    if (r->dflt) return r->dflt;
    if (r->current) return r->current(d);
    if (r->show) return r->show(d, b, n);
    switch (r->type) {
    case T_F32: snprintf(b, n, "%g", (double)*(const float *)p); break;
    case T_F64: snprintf(b, n, "%g", *(const double *)p); break;
    case T_I32: snprintf(b, n, "%d", *(const int *)p); break;
    case T_I64: snprintf(b, n, "%ld", *(const long *)p); break;
    case T_U64: snprintf(b, n, "%llu", (unsigned long long)*(const uint64_t *)p); break;
    case T_STR: snprintf(b, n, "%s", p); break;
    default: b[0] = '\0';
    }
    return b;
}

/* The metavar of row r: its own, or the choices joined with '|'. */
static const char *metavar_of(const OptSpec *r, char *b, size_t n) {
    if (r->metavar || !r->choices) return r->metavar ? r->metavar : "";
    return vocab_join(b, n, r->choices, "|", NULL);
}

#define HELP_COL 23   /* help text starts here */
#define HELP_WIDTH 79 /* and lines break before this */

/* Prints `text` from column `col` (the cursor is there), wrapping at spaces to HELP_COL. */
static void print_wrapped(const char *text, int col) {
    const char *p = text;
    while (*p) {
        const int room = HELP_WIDTH - col;
        int len = (int)strlen(p), cut = len;
        if (len > room) {
            cut = -1;
            for (int i = 0; i <= room && i < len; i++)
                if (p[i] == ' ') cut = i;
            if (cut <= 0) {
                cut = 0;
                while (p[cut] && p[cut] != ' ') cut++;
            } /* one long word */
        }
        printf("%.*s\n", cut, p);
        p += cut;
        while (*p == ' ') p++;
        if (*p) printf("%*s", HELP_COL, "");
        col = HELP_COL;
    }
}

/* Row i of the table as --help shows it: heading, metavar, the help text with the default, and
 * the choice words (NULL when free-form). 0 for a visible row, -1 past the end, 1 for a hidden one. */
int app_option_takes_value(const char *name, size_t len) {
    for (int i = 0; i < NOPTS; i++)
        if (strlen(opts[i].name) == len && !strncmp(opts[i].name, name, len)) return opts[i].type != T_FLAG;
    return -1;
}

int app_option_info(int i, AppOptionInfo *out) {
    static AppOptions d;
    static int init;
    if (!init) {
        app_options_defaults(&d);
        init = 1;
    }
    if (i < 0 || i >= NOPTS) return -1;
    const OptSpec *r = &opts[i];
    char dflt[256], list[512];
    memset(out, 0, sizeof *out);
    out->name = r->name;
    out->group = group_names[r->group];
    out->choices = r->choices;
    out->takes_value = r->type != T_FLAG;
    snprintf(out->metavar, sizeof out->metavar, "%s", metavar_of(r, list, sizeof list));
    const char *dv = default_text(r, &d, dflt, sizeof dflt);
    const char *more = r->more   ? r->more(list, sizeof list)
                       : r->list ? vocab_join(list, sizeof list, r->choices, " | ", NULL)
                                 : "";
    snprintf(out->text, sizeof out->text, "%s%s%s%s%s%s", r->help,
             r->list ? ": "
             : *more ? " "
                     : "",
             more, *dv ? " (" : "", dv, *dv ? ")" : "");
    return r->hidden ? 1 : 0;
}

void app_options_help(const char *cmd) {
    printf("usage: moelab %s [options]\n", cmd);
    const char *group = NULL;
    AppOptionInfo in;
    for (int i = 0, v; (v = app_option_info(i, &in)) >= 0; i++) {
        if (v) continue;
        if (in.group != group) {
            group = in.group;
            if (group) printf("%s%s\n", i ? "" : "\n", group);
        }
        char head[300];
        const int hl = snprintf(head, sizeof head, "  --%s%s%s", in.name, in.metavar[0] ? " " : "", in.metavar);
        if (hl < HELP_COL - 1) {
            printf("%-*s", HELP_COL, head);
            print_wrapped(in.text, HELP_COL);
        } else {
            printf("%s ", head);
            print_wrapped(in.text, hl + 1);
        }
    }
}
/* The command summary of --commands, from the command table (core/cmdtab.h). */
static const char *more_commands(char *b, size_t n) {
    char u[320];
    size_t len = 0;
    b[0] = '\0';
    for (int k = 0; k < CMD_KIND_COUNT && len < n; k++)
        if (cmd_table[k].file) len += (size_t)snprintf(b + len, n - len, "%s%s", len ? " | " : "", cmd_usage(k, u, sizeof u));
    return b;
}

/* The kinds of --schedule with the keys each reads besides min= (TAU_KINDS). */
static const char *more_schedule(char *b, size_t n) {
    size_t len = 0;
    b[0] = '\0';
    for (int k = 0; k < TAU_KIND_COUNT && len < n; k++) {
        const TauKindInfo *ki = tau_kind_info((TauKind)k);
        len += (size_t)snprintf(b + len, n - len, "%s%s", k ? " | " : "", ki->name);
        for (int j = 0, first = 1; j < TAU_KEY_COUNT && len < n; j++)
            if (ki->keys & (1u << j)) {
                len += (size_t)snprintf(b + len, n - len, "%s%s=", first ? " (" : " ", tau_key_info((TauKey)j)->key);
                first = 0;
            }
        if (ki->keys && len < n) len += (size_t)snprintf(b + len, n - len, ")");
    }
    return b;
}

/* ---- parsing */

static const char *g_cmd = "train"; /* the subcommand being parsed, for the `moelab CMD: ` prefix */

static int num(const char *opt, const char *s, double lo, double hi, double *out) {
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    /* strtod also reads hexadecimal ("0x20" = 32): not a form anyone means on a command line */
    if (errno || end == s || *end || !isfinite(v) || v < lo || v > hi || strpbrk(s, "xX")) {
        fprintf(stderr, "moelab %s: --%s: '%s' is not a number in [%g, %g]\n", g_cmd, opt, s, lo, hi);
        return -1;
    }
    *out = v;
    return 0;
}

static int integer(const char *opt, const char *s, long lo, long hi, long *out) {
    double v;
    if (num(opt, s, (double)lo, (double)hi, &v)) return -1;
    const char *d = s + (*s == '+' || *s == '-');
    if (v != floor(v) || !*d || strspn(d, "0123456789") != strlen(d)) { /* decimal digits only: not 1e3, 32.0 */
        fprintf(stderr, "moelab %s: --%s: '%s' is not a whole number\n", g_cmd, opt, s);
        return -1;
    }
    *out = (long)v;
    return 0;
}

static int set_fc2_init(AppOptions *o, const char *a, const char *cmd) {
    (void)cmd;
    return fc2_init_parse(a, &o->train.model.fc2_init);
}
static int set_backbone(AppOptions *o, const char *a, const char *cmd) {
    if (!strcmp(a, "dw")) o->train.model.backbone = BACKBONE_DW;
    else if (!strcmp(a, "std")) o->train.model.backbone = BACKBONE_STD;
    else return -1;
    return 0;
}
static int set_head(AppOptions *o, const char *a, const char *cmd) {
    return moe_parse_head(a, &o->train.model.head.kind) == ML_OK ? 0 : -1;
}
static int set_optimizer(AppOptions *o, const char *a, const char *cmd) {
    return optim_kind_parse(a, &o->train.opt.kind) ? -1 : 0; /* its weight decay: see the end of app_options_parse */
}
static int set_lr_schedule(AppOptions *o, const char *a, const char *cmd) {
    return lr_kind_parse(a, &o->train.lr.kind) ? -1 : 0;
}
static int set_priority(AppOptions *o, const char *a, const char *cmd) {
    return moe_parse_priority(a, &o->train.model.head.priority) == ML_OK ? 0 : -1;
}
static int set_renorm(AppOptions *o, const char *a, const char *cmd) {
    return moe_parse_renorm(a, &o->train.model.head.renorm) == ML_OK ? 0 : -1;
}
static int set_bias_mode(AppOptions *o, const char *a, const char *cmd) {
    return moe_parse_bias(a, &o->train.model.head.bias_mode) == ML_OK ? 0 : -1;
}
static int set_schedule(AppOptions *o, const char *a, const char *cmd) {
    return tau_parse_kind(a, &o->train.tau.kind) == ML_OK ? 0 : -1;
}
static int set_labels(AppOptions *o, const char *a, const char *cmd) {
    if (strcmp(a, "fine") && strcmp(a, "coarse")) return -1;
    o->coarse = !strcmp(a, "coarse");
    return 0;
}
static int set_help(AppOptions *o, const char *a, const char *cmd) {
    app_options_help(cmd);
    return 1;
}
static int set_init_bias(AppOptions *o, const char *a, const char *cmd) {
    (void)cmd;
    TrainConfig *t = &o->train;
    t->n_init_bias = 0;
    char buf[512];
    if (strlen(a) >= sizeof buf) {
        fprintf(stderr, "moelab train: --init-bias: %zu characters, more than the %zu a list may hold (at most %d entries)\n",
                strlen(a), sizeof buf - 1, MAX_INIT_BIAS);
        return -1;
    }
    snprintf(buf, sizeof buf, "%s", a);
    char *save = NULL;
    for (char *it = strtok_r(buf, ",", &save); it; it = strtok_r(NULL, ",", &save)) {
        InitBias ib = {.stage = -2};
        char *colon = strchr(it, ':');
        if (colon) {
            *colon = 0;
            if (!strcmp(it, "head")) ib.stage = -1;
            else if (!strncmp(it, "moe", 3) && it[3] >= '0' && it[3] <= '3' && !it[4]) ib.stage = it[3] - '0';
            else {
                fprintf(stderr, "moelab train: --init-bias: unknown layer '%s' (head, moe0..moe3)\n", it);
                return -1;
            }
            it = colon + 1;
        }
        char *end = NULL;
        if (it[0] != 'e' || !(it[1] >= '0' && it[1] <= '9')) goto bad;
        const long e = strtol(it + 1, &end, 10);
        if (*end != '=') goto bad;
        if (e < 0 || e >= MOE_MAX_EXPERTS) {
            fprintf(stderr, "moelab train: --init-bias: '%s': expert e%ld: experts are e0..e%d\n", it, e,
                    MOE_MAX_EXPERTS - 1);
            return -1;
        }
        const char *val = end + 1;
        if (!*val) {
            fprintf(stderr, "moelab train: --init-bias: '%s': no value after '=' (e.g. e%ld=-20)\n", it, e);
            return -1;
        }
        /* a decimal number: strtod also reads hexadecimal ("0x10"), as --batch refuses it */
        errno = 0;
        const double v = strtod(val, &end);
        if (*end || end == val || errno == ERANGE || !isfinite(v) || strpbrk(val, "xXpP")) {
            fprintf(stderr, "moelab train: --init-bias: '%s': '%s' is not a decimal number\n", it, val);
            return -1;
        }
        if (fabs(v) > 1e4) {
            fprintf(stderr, "moelab train: --init-bias: '%s': %g is outside [-10000, 10000]\n", it, v);
            return -1;
        }
        for (int i = 0; i < t->n_init_bias; i++)
            if (t->init_bias[i].stage == ib.stage && t->init_bias[i].expert == (int)e) {
                fprintf(stderr, "moelab train: --init-bias: '%s': expert e%ld of %s given twice\n", it, e,
                        ib.stage == -2 ? "every routed layer" : ib.stage == -1 ? "the head" : "that layer");
                return -1;
            }
        if (t->n_init_bias >= MAX_INIT_BIAS) {
            fprintf(stderr, "moelab train: --init-bias: at most %d entries\n", MAX_INIT_BIAS);
            return -1;
        }
        ib.expert = (int)e;
        ib.value = (float)v;
        t->init_bias[t->n_init_bias++] = ib;
        continue;
    bad:
        fprintf(stderr, "moelab train: --init-bias: '%s' is not eN=V (e.g. e5=-20 or moe2:e3=4)\n", it);
        return -1;
    }
    return 0;
}
static int set_on_collapse(AppOptions *o, const char *a, const char *cmd) {
    (void)cmd;
    char line[600], err[512];
    TrainerCmd c;
    if (strlen(a) > 400) {
        fprintf(stderr, "moelab %s: --on-collapse: the rule is too long (at most 400 characters)\n", g_cmd);
        return -1;
    }
    snprintf(line, sizeof line, "on-collapse %s", a);
    if (command_parse(line, &c, err, sizeof err)) {
        /* the parser's message names its command ("on-collapse: ..."): said once */
        const char *e = !strncmp(err, "on-collapse: ", 13) ? err + 13 : err;
        char *th = strstr(err, " (type help)"); /* the live screen's hint; here the command language's doc */
        if (th) *th = 0;
        fprintf(stderr, "moelab %s: --on-collapse: %s%s\n", g_cmd, e,
                th ? " (the rule is pause, off or commands such as 'set tau 2; set alpha 0.05': see moelab help)" : "");
        return -1;
    }
    snprintf(o->on_collapse, sizeof o->on_collapse, "%s", !strcmp(c.rule, "off") ? "" : c.rule);
    return 0;
}

/* A comma list of 1..MODEL_MAX_BBL whole numbers in [lo, hi] into v (*n of them); -1 after a
 * message. */
/* A stage or width list: "2,3", or "2+3" (the form a sweep value uses: `--vary moe-after=2+3,3`),
 * or "none" for the stage lists (none_ok: no layers, as the default). */
static int int_list(const char *opt, const char *a, long lo, long hi, int *v, int *n, int none_ok) {
    char buf[256];
    if (none_ok && !strcmp(a, "none")) {
        *n = 0;
        return 0;
    }
    if (strlen(a) >= sizeof buf || !*a) {
        fprintf(stderr, "moelab %s: --%s: '%s' is not a comma list of numbers (e.g. 2,3 or none)\n", g_cmd, opt, a);
        return -1;
    }
    snprintf(buf, sizeof buf, "%s", a);
    for (char *c = buf; *c; c++)
        if (*c == '+') *c = ',';
    int cnt = 0;
    for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        long x;
        if (cnt == MODEL_MAX_BBL) {
            fprintf(stderr, "moelab %s: --%s: at most %d values\n", g_cmd, opt, MODEL_MAX_BBL);
            return -1;
        }
        if (integer(opt, t, lo, hi, &x)) return -1;
        v[cnt++] = (int)x;
    }
    if (cnt == 0 || strchr(",+", a[strlen(a) - 1]) || strchr(",+", a[0]) || strstr(a, ",,") || strstr(a, "++") ||
        strstr(a, ",+") || strstr(a, "+,")) {
        fprintf(stderr, "moelab %s: --%s: '%s' is not a comma list of numbers (e.g. 2,3 or none)\n", g_cmd, opt, a);
        return -1;
    }
    *n = cnt;
    return 0;
}
static int set_bench_model(AppOptions *o, const char *a, const char *cmd) {
    if (strcmp(a, "reference") && strcmp(a, "backbone-moe") && strcmp(a, "backbone-ffn")) return -1;
    snprintf(o->bench_model, sizeof o->bench_model, "%s", a);
    return 0;
}
static int set_moe_after(AppOptions *o, const char *a, const char *cmd) {
    ModelConfig *m = &o->train.model;
    return int_list("moe-after", a, 0, 3, m->moe_after, &m->moe_n, 1);
}
static int set_ffn_after(AppOptions *o, const char *a, const char *cmd) {
    ModelConfig *m = &o->train.model;
    return int_list("ffn-after", a, 0, 3, m->ffn_after, &m->ffn_n, 1);
}
static int set_moe_hidden(AppOptions *o, const char *a, const char *cmd) {
    ModelConfig *m = &o->train.model;
    return int_list("moe-hidden", a, 1, 1 << 16, m->bb_hidden, &m->bb_nh, 0);
}
static int set_moe_experts(AppOptions *o, const char *a, const char *cmd) {
    ModelConfig *m = &o->train.model;
    return int_list("moe-experts", a, 1, MOE_MAX_EXPERTS, m->bb_E, &m->bb_nE, 0);
}
static int set_moe_k(AppOptions *o, const char *a, const char *cmd) {
    ModelConfig *m = &o->train.model;
    return int_list("moe-k", a, 1, MOE_MAX_EXPERTS, m->bb_k, &m->bb_nk, 0);
}

/* Stores argument a of row r. 0, 1 (stop parsing: --help) or -1 after a message. */
static int set_option(AppOptions *o, const OptSpec *r, const char *a, const char *cmd) {
    char *p = (char *)o + r->off;
    double v;
    long n;
    switch (r->type) {
    case T_FLAG: *(int *)p = (int)r->lo; return 0;
    case T_F32:
        if (num(r->name, a, r->lo, r->hi, &v)) return -1;
        *(float *)p = (float)v;
        return 0;
    case T_F64:
        if (num(r->name, a, r->lo, r->hi, &v)) return -1;
        *(double *)p = v;
        return 0;
    case T_I32:
        if (integer(r->name, a, (long)r->lo, (long)r->hi, &n)) return -1;
        *(int *)p = (int)n;
        return 0;
    case T_I64:
        if (integer(r->name, a, (long)r->lo, (long)r->hi, &n)) return -1;
        *(long *)p = n;
        return 0;
    case T_U64:
        if (integer(r->name, a, (long)r->lo, (long)r->hi, &n)) return -1;
        *(uint64_t *)p = (uint64_t)n;
        return 0;
    case T_STR:
        if (!*a) { /* an empty value must not silently mean the default (a script's unset variable) */
            const int d = r->dflt && r->dflt[0];
            fprintf(stderr, "moelab %s: --%s: an empty value: give a %s, or leave --%s out%s%s%s\n", g_cmd, r->name,
                    r->metavar ? r->metavar : "value", r->name, d ? " for the default (" : "", d ? r->dflt : "",
                    d ? ")" : "");
            return -1;
        }
        if (strlen(a) >= r->size) { /* never cut a path: a cut one names another file */
            fprintf(stderr, "moelab %s: --%s: %zu characters, at most %zu\n", g_cmd, r->name, strlen(a), r->size - 1);
            return -1;
        }
        snprintf(p, r->size, "%s", a);
        return 0;
    case T_FN: {
        const int rc = r->set(o, a, cmd);
        if (rc < 0 && r->choices) {
            char all[256];
            fprintf(stderr, "moelab %s: --%s: '%s' is not %s\n", g_cmd, r->name, a,
                    vocab_join(all, sizeof all, r->choices, ", ", " or "));
        }
        return rc;
    }
    }
    return -1;
}

/* Levenshtein distance of a and b (both short option names), with a transposition counted as one */
static int edit_distance(const char *a, const char *b) {
    const int n = (int)strlen(a), m = (int)strlen(b);
    if (n > 63 || m > 63) return 99;
    int d[64][64];
    for (int i = 0; i <= n; i++) d[i][0] = i;
    for (int j = 0; j <= m; j++) d[0][j] = j;
    for (int i = 1; i <= n; i++)
        for (int j = 1; j <= m; j++) {
            int v = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);
            if (d[i - 1][j] + 1 < v) v = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < v) v = d[i][j - 1] + 1;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] && d[i - 2][j - 2] + 1 < v)
                v = d[i - 2][j - 2] + 1;
            d[i][j] = v;
        }
    return d[n][m];
}

/* Options are spelled out in full: getopt_long would take any unambiguous prefix (`--epoch` for
 * `--epochs`), which silently changes meaning when an option is added. An argument "--NAME[=V]"
 * that is not an option's exact name is refused with the nearest names (a prefix of them, or at
 * most a third of the name's letters away). 0, or -1 (message printed). */
static int exact_names(int argc, char **argv, const char *cmd) {
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--")) break;
        if (strncmp(a, "--", 2) || !a[2]) continue;
        char name[96];
        const size_t len = strcspn(a + 2, "=");
        snprintf(name, sizeof name, "%.*s", (int)(len < sizeof name - 1 ? len : sizeof name - 1), a + 2);
        int row = -1;
        for (int k = 0; k < NOPTS; k++)
            if (!strcmp(opts[k].name, name)) row = k;
        if (row >= 0) {
            /* "--name VALUE": the value is not an option even if it starts with "--" */
            if (!a[2 + len] && (opts[row].metavar || opts[row].choices)) i++;
            continue;
        }
        if (!strcmp(name, "help")) continue;
        /* the candidates: options this name begins, then the nearest by edit distance */
        char sug[256] = "";
        size_t o = 0;
        int nsug = 0, best = 99;
        for (int k = 0; k < NOPTS; k++) {
            if (opts[k].hidden) continue;
            const int d = edit_distance(name, opts[k].name);
            if (d < best) best = d;
        }
        const int limit = (int)strlen(name) / 3 > 2 ? (int)strlen(name) / 3 : 2;
        for (int k = 0; k < NOPTS && nsug < 4; k++) {
            if (opts[k].hidden) continue;
            const int pre = !strncmp(opts[k].name, name, strlen(name));
            const int d = edit_distance(name, opts[k].name);
            if (pre || (d == best && d <= limit)) {
                o += (size_t)snprintf(sug + o, sizeof sug - o, "%s--%s", nsug ? " or " : "", opts[k].name);
                if (o >= sizeof sug) o = sizeof sug - 1;
                nsug++;
            }
        }
        if (nsug)
            fprintf(stderr, "moelab %s: unknown option '--%s'; did you mean %s? (see moelab %s --help)\n", cmd, name, sug,
                    cmd);
        else
            fprintf(stderr, "moelab %s: unknown option '--%s' (see moelab %s --help)\n", cmd, name, cmd);
        return -1;
    }
    return 0;
}

int app_options_parse(AppOptions *o, int argc, char **argv, const char *cmd) {
    if (exact_names(argc, argv, cmd)) return -1;
    TrainConfig *t = &o->train;
    MoeConfig *h = &t->model.head;
    struct option long_opts[NOPTS + 1];
    unsigned char given[NOPTS];
    for (int i = 0; i < NOPTS; i++)
        long_opts[i] = (struct option){
            opts[i].name, opts[i].metavar || opts[i].choices ? required_argument : no_argument, 0, OPT_VAL0 + i};
    long_opts[NOPTS] = (struct option){0, 0, 0, 0};
    memset(given, 0, sizeof given);
    g_cmd = cmd;
    optind = 1;
    opterr = 0;
    for (;;) {
        int idx = 0;
        const int c = getopt_long(argc, argv, ":", long_opts, &idx);
        if (c == -1) break;
        if (c == ':') {
            fprintf(stderr, "moelab %s: option '%s' needs a value (see moelab %s --help)\n", cmd, argv[optind - 1],
                    cmd);
            return -1;
        }
        if (c < OPT_VAL0 || c >= OPT_VAL0 + NOPTS) {
            fprintf(stderr, "moelab %s: unknown option '%s' (see moelab %s --help)\n", cmd, argv[optind - 1], cmd);
            return -1;
        }
        const int rc = set_option(o, &opts[c - OPT_VAL0], optarg, cmd);
        if (rc) return rc;
        given[c - OPT_VAL0] = 1;
    }
    if (optind < argc) {
        fprintf(stderr, "moelab %s: unexpected argument '%s' (see moelab %s --help)\n", cmd, argv[optind], cmd);
        return -1;
    }
    if (h->k > h->E && h->kind != HEAD_DENSE) {
        fprintf(stderr, "moelab %s: --k %d is larger than --experts %d\n", cmd, h->k, h->E);
        return -1;
    }
    /* the optimiser's own weight decay unless --wd is given (in any order) */
    if (!given[opt_index("wd")]) t->opt.wd = optim_default_wd(t->opt.kind);
    return 0;
}

int app_option_launch_only(int argc, char **argv, int i) {
    static const char *const names[] = {"--notify", "--notify-timeout"};
    if (!strcmp(argv[i], "--no-mouse")) return 1; /* a flag: the screen of this process */
    for (size_t k = 0; k < sizeof names / sizeof *names; k++) {
        const size_t n = strlen(names[k]);
        if (!strncmp(argv[i], names[k], n) && argv[i][n] == '=') return 1;
        if (!strcmp(argv[i], names[k])) return i + 1 < argc ? 2 : 1;
    }
    return 0;
}
