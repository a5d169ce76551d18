/* sweep_plan.c — the plan of a sweep and its grid: string lists, validating the base options and
 * every configuration (app_options_parse), configuration labels, heads and dense baselines, run
 * names and folders, the training command of each run, and the grid as DIR/sweep.args. */
#define _GNU_SOURCE

#include "app/sweep/sweep_internal.h"
#include "app/cli/options.h"
#include "app/run/runsession.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ string lists */

/* Removes base options [i, i + n) (a preset's entry: the preset's count shrinks with it). */
static void base_remove(Plan *p, int i, int n) {
    for (int k = 0; k < n; k++) free(p->base.v[i + k]);
    memmove(p->base.v + i, p->base.v + i + n, sizeof(char *) * (size_t)(p->base.n - i - n + 1));
    p->base.n -= n;
    if (i < p->nbase_preset) p->nbase_preset -= n;
}

/* 1 or 2 (the entries the preset's option at b spans: "--key=V" or a flag, "--key V") when the
 * user's part of the base options gives the same option, else 0. */
static int plan_user_overrides(const Plan *p, const char *b) {
    const char *name = b + 2;
    const size_t kl = strcspn(name, "=");
    const int takes = app_option_takes_value(name, kl) == 1;
    for (int u = p->nbase_preset; u < p->base.n; u++) {
        const char *o = p->base.v[u];
        if (strncmp(o, "--", 2) || strncmp(o + 2, name, kl) || (o[2 + kl] != 0 && o[2 + kl] != '=')) continue;
        return name[kl] == '=' || !takes ? 1 : 2;
    }
    return 0;
}

int sweep_sl_push(StrList *l, const char *s) {
    if (l->n + 2 > l->cap) {
        const int cap = l->cap ? 2 * l->cap : 16;
        char **nv = realloc(l->v, sizeof *nv * (size_t)cap);
        if (!nv) return -1;
        l->v = nv;
        l->cap = cap;
    }
    if (!(l->v[l->n] = strdup(s))) return -1;
    l->v[++l->n] = NULL;
    return 0;
}

void sweep_sl_free(StrList *l) {
    for (int i = 0; i < l->n; i++) free(l->v[i]);
    free(l->v);
    memset(l, 0, sizeof *l);
}

/* ------------------------------------------------------------------ the plan */

void sweep_plan_free(Plan *p) {
    sweep_sl_free(&p->base);
    for (int a = 0; a < p->naxes; a++)
        for (int v = 0; v < p->axes[a].nvals; v++) free(p->axes[a].vals[v]);
    free(p->vidx);
    free(p->label);
    free(p->head);
    free(p->baseline);
    free(p->alias);
    memset(p, 0, sizeof *p);
}

/* ------------------------------------------------------------------ the grid */

static void sanitize(char *s) {
    for (; *s; s++)
        if (*s == '/' || *s == ' ' || *s == '\t' || *s == '\n') *s = '_';
}

/* Appends "--KEY VALUE" for every axis of configuration c. */
static int push_axes(const Plan *p, int c, StrList *l) {
    for (int a = 0; a < p->naxes; a++) {
        char opt[80];
        snprintf(opt, sizeof opt, "--%s", p->axes[a].key);
        if (sweep_sl_push(l, opt) || sweep_sl_push(l, p->axes[a].vals[p->vidx[c * p->naxes + a]])) return -1;
    }
    return 0;
}

/* The training options of run (c, seed) without --threads and --session: "train --headless BASE
 * AXES --seed S". */
int sweep_run_train_args(const Plan *p, int c, int seed, StrList *l) {
    char s[32];
    snprintf(s, sizeof s, "%d", seed);
    if (sweep_sl_push(l, "train") || sweep_sl_push(l, "--headless")) return -1;
    for (int i = 0; i < p->base.n; i++)
        if (sweep_sl_push(l, p->base.v[i])) return -1;
    if (push_axes(p, c, l) || sweep_sl_push(l, "--seed") || sweep_sl_push(l, s)) return -1;
    return 0;
}

/* The complete training command of a fresh run r: the options above plus --threads (unless the
 * base sets it) and --session DIR. */
int sweep_run_child_args(const Plan *p, int r, int threads, StrList *l) {
    char th[32], dir[DIR_N];
    snprintf(th, sizeof th, "%d", threads);
    sweep_run_dir(p, r, dir, sizeof dir);
    if (sweep_run_train_args(p, r % p->nconfigs, r / p->nconfigs + p->seed0, l)) return -1;
    if (!p->user_threads && (sweep_sl_push(l, "--threads") || sweep_sl_push(l, th))) return -1;
    return sweep_sl_push(l, "--session") || sweep_sl_push(l, dir) ? -1 : 0;
}

void sweep_run_name(const Plan *p, int r, char *buf, size_t n) {
    const int c = r % p->nconfigs, seed = r / p->nconfigs + p->seed0;
    snprintf(buf, n, "%s%sseed=%d", p->label[c], p->label[c][0] ? "," : "", seed);
}

void sweep_run_dir(const Plan *p, int r, char *buf, size_t n) {
    char name[SWEEP_NAME_MAX];
    sweep_run_name(p, r, name, sizeof name);
    snprintf(buf, n, "%s/%s", p->out, name);
}

const char *sweep_config_label(const Plan *p, int c) { return p->label[c][0] ? p->label[c] : "(base)"; }

/* What identifies a trained model: the options with every field the configuration's head does
 * not read reset to its default (a model where nothing routes ignores the routing, temperature, collapse thresholds
 * and rule; soft heads ignore noise, capacity and priority), and the thread count cleared
 * (runs of one sweep use one count). Two configurations with equal identities train the same
 * model: a sweep trains it once. */
static void config_identity(AppOptions *o) {
    TrainConfig d;
    train_config_defaults(&d);
    TrainConfig *t = &o->train;
    MoeConfig *h = &t->model.head;
    t->threads = 0;
    if (h->kind == HEAD_DENSE && t->model.moe_n == 0) { /* nothing routes (backbone MoE layers read the head's knobs) */
        const int k = h->k, hid = h->h;
        *h = d.model.head;
        h->kind = HEAD_DENSE;
        h->k = k;   /* the dense MLP has k*h hidden units */
        h->h = hid; /* (its width; the rest of the head is routing) */
        t->tau = d.tau;
        t->tau_epochs = d.tau_epochs;
        t->route = d.route;
        o->on_collapse[0] = 0;
    } else if (h->kind == HEAD_SOFTMOE_SAMPLE || h->kind == HEAD_SOFTMOE_BATCH) {
        h->noise = d.model.head.noise;
        h->cf = d.model.head.cf;
        h->eval_cf = d.model.head.eval_cf;
        h->priority = d.model.head.priority;
    }
}

int sweep_run_canonical(const Plan *p, int r) {
    const int c = r % p->nconfigs;
    return p->alias ? r - c + p->alias[c] : r;
}

void sweep_plan_fill_aliases(const Plan *p, SweepRun *rows) {
    for (int r = 0; r < p->nruns; r++) {
        const int k = sweep_run_canonical(p, r);
        if (k == r) continue;
        const int index = rows[r].index, config = rows[r].config;
        rows[r] = rows[k];
        rows[r].index = index;
        rows[r].config = config;
    }
}

/* Validates the base options and every configuration, derives labels, heads and baselines. */
int sweep_plan_build(Plan *p) {
    /* base options: a sweep owns the seeds and the session folders */
    {
        StrList l = {0};
        sweep_sl_push(&l, "sweep");
        for (int i = 0; i < p->base.n; i++) sweep_sl_push(&l, p->base.v[i]);
        AppOptions o;
        app_options_defaults(&o);
        const uint64_t seed_mark = 0x5eed5eedULL;
        o.train.seed = seed_mark;
        o.train.threads = -77;
        const int r = app_options_parse(&o, l.n, l.v, "sweep");
        sweep_sl_free(&l);
        if (r != 0) return -1;
        if (o.train.seed != seed_mark) {
            fprintf(stderr, "moelab sweep: --seed: the sweep runs seeds 1..N (--seeds N)\n");
            return -1;
        }
        if (o.session[0] || o.resume[0] || o.no_session) {
            fprintf(stderr, "moelab sweep: --session, --resume and --no-session are set by the sweep (see --out)\n");
            return -1;
        }
        p->user_threads = o.train.threads != -77;
    }
    /* a preset's option that the user gives too is dropped (the user's decides: recorded once, in
     * every run's command line and in `sweep --show`, not `--epochs 3 --epochs 1`) */
    for (int i = 0; i < p->nbase_preset;) {
        const char *b = p->base.v[i];
        const int drop = b[0] == '-' && b[1] == '-' ? plan_user_overrides(p, b) : 0;
        if (drop) base_remove(p, i, drop);
        else i++;
    }
    /* base options that an axis sets are dropped (the axis decides) */
    for (int i = 0; i < p->base.n;) {
        int drop = 0;
        for (int a = 0; a < p->naxes && !drop; a++) {
            const size_t kl = strlen(p->axes[a].key);
            const char *b = p->base.v[i];
            if (!strncmp(b, "--", 2) && !strncmp(b + 2, p->axes[a].key, kl)) {
                if (b[2 + kl] == 0 && i + 1 < p->base.n) drop = 2;
                else if (b[2 + kl] == '=') drop = 1;
            }
            if (drop && i >= p->nbase_preset)
                fprintf(stderr, "moelab sweep: note: %s%s%s is replaced by the --vary %s axis\n", b,
                        drop == 2 ? " " : "", drop == 2 ? p->base.v[i + 1] : "", p->axes[a].key);
        }
        if (drop) base_remove(p, i, drop);
        else i++;
    }
    /* the product of the independent axes, the last one fastest */
    long nc = 1;
    for (int a = 0; a < p->naxes; a++)
        if (p->axes[a].leader < 0) nc *= p->axes[a].nvals;
    if (nc > MAX_CONFIGS || nc * p->seeds > MAX_CONFIGS) {
        fprintf(stderr, "moelab sweep: %ld configurations x %d seeds is more than %d runs\n", nc, p->seeds,
                MAX_CONFIGS);
        return -1;
    }
    p->nconfigs = (int)nc;
    p->nruns = p->nconfigs * p->seeds;
    p->vidx = calloc((size_t)nc * (size_t)(p->naxes ? p->naxes : 1), sizeof(int));
    p->label = calloc((size_t)nc, sizeof *p->label);
    p->head = calloc((size_t)nc, sizeof *p->head);
    p->baseline = calloc((size_t)nc, sizeof(int));
    p->alias = calloc((size_t)nc, sizeof(int));
    AppOptions *ident = calloc((size_t)nc, sizeof(AppOptions));
    if (!p->vidx || !p->label || !p->head || !p->baseline || !p->alias || !ident) {
        free(ident);
        fprintf(stderr, "moelab sweep: out of memory\n");
        return -1;
    }
    int head_axis = -1;
    for (int c = 0; c < p->nconfigs; c++) {
        long rest = c;
        for (int a = p->naxes - 1; a >= 0; a--) {
            if (p->axes[a].leader >= 0) continue;
            p->vidx[c * p->naxes + a] = (int)(rest % p->axes[a].nvals);
            rest /= p->axes[a].nvals;
        }
        size_t o = 0;
        for (int a = 0; a < p->naxes; a++) {
            if (p->axes[a].leader >= 0) p->vidx[c * p->naxes + a] = p->vidx[c * p->naxes + p->axes[a].leader];
            const int w = snprintf(p->label[c] + o, SWEEP_NAME_MAX - o, "%s%s=%s", a ? "," : "", p->axes[a].key,
                                   p->axes[a].vals[p->vidx[c * p->naxes + a]]);
            if (w < 0 || o + (size_t)w >= SWEEP_NAME_MAX - 16) {
                fprintf(stderr, "moelab sweep: the run names get too long (over %d characters)\n", SWEEP_NAME_MAX - 16);
                free(ident);
                return -1;
            }
            o += (size_t)w;
        }
        sanitize(p->label[c]);
        for (int b = 0; b < c; b++)
            if (!strcmp(p->label[b], p->label[c])) {
                fprintf(stderr, "moelab sweep: two configurations get the same folder name '%s'\n", p->label[c]);
                free(ident);
                return -1;
            }
        /* every configuration must be a valid training configuration */
        StrList l = {0};
        sweep_sl_push(&l, "sweep");
        for (int i = 0; i < p->base.n; i++) sweep_sl_push(&l, p->base.v[i]);
        if (push_axes(p, c, &l)) {
            sweep_sl_free(&l);
            free(ident);
            return -1;
        }
        AppOptions o2;
        app_options_defaults(&o2);
        const int r = app_options_parse(&o2, l.n, l.v, "sweep");
        sweep_sl_free(&l);
        if (r != 0) {
            fprintf(stderr, "moelab sweep: configuration %s is not a valid training configuration\n",
                    sweep_config_label(p, c));
            free(ident);
            return -1;
        }
        /* what routes: the head's kind, or "moe-backbone" for a dense head after backbone MoE layers;
         * "dense" only when nothing routes (the baselines) */
        snprintf(p->head[c], sizeof p->head[c], "%s",
                 o2.train.model.head.kind == HEAD_DENSE && o2.train.model.moe_n > 0
                     ? "moe-backbone"
                     : moe_head_name(o2.train.model.head.kind));
        config_identity(&o2);
        ident[c] = o2;
        p->alias[c] = c;
        for (int b = 0; b < c; b++)
            if (p->alias[b] == b && !memcmp(&ident[b], &ident[c], sizeof o2)) {
                p->alias[c] = b;
                break;
            }
    }
    free(ident);
    p->ndistinct = 0;
    for (int c = 0; c < p->nconfigs; c++) p->ndistinct += p->alias[c] == c;
    /* the routing axis: head, or moe-after (with --with ffn-after=...: MoE layers vs the matched dense ones) */
    for (int pass = 0; pass < 2 && head_axis < 0; pass++)
        for (int a = 0; a < p->naxes; a++)
            if (!strcmp(p->axes[a].key, pass ? "moe-after" : "head"))
                head_axis = p->axes[a].leader >= 0 ? p->axes[a].leader : a;
    /* the matching dense configuration: nothing routes, same value on every axis outside the routing
     * axis's group */
    for (int c = 0; c < p->nconfigs; c++) {
        p->baseline[c] = -1;
        if (head_axis < 0 || !strcmp(p->head[c], "dense")) continue;
        for (int b = 0; b < p->nconfigs && p->baseline[c] < 0; b++) {
            if (strcmp(p->head[b], "dense")) continue;
            int same = 1;
            for (int a = 0; a < p->naxes && same; a++) {
                const int g = p->axes[a].leader >= 0 ? p->axes[a].leader : a;
                if (g != head_axis && p->vidx[b * p->naxes + a] != p->vidx[c * p->naxes + a]) same = 0;
            }
            if (same) p->baseline[c] = b;
        }
    }
    return 0;
}

/* The grid as arguments (DIR/sweep.args): base options, axes, seeds. */
int sweep_plan_args_line(const Plan *p, char *buf, size_t n) {
    StrList l = {0};
    int rc = 0;
    for (int i = 0; i < p->base.n && !rc; i++) rc = sweep_sl_push(&l, p->base.v[i]);
    for (int a = 0; a < p->naxes && !rc; a++) {
        char spec[4096];
        size_t o = (size_t)snprintf(spec, sizeof spec, "%s=", p->axes[a].key);
        for (int v = 0; v < p->axes[a].nvals && o < sizeof spec; v++)
            o += (size_t)snprintf(spec + o, sizeof spec - o, "%s%s", v ? "," : "", p->axes[a].vals[v]);
        rc = sweep_sl_push(&l, p->axes[a].leader >= 0 ? "--with" : "--vary") || sweep_sl_push(&l, spec);
    }
    char s[32];
    snprintf(s, sizeof s, "%d", p->seeds);
    if (!rc) rc = sweep_sl_push(&l, "--seeds") || sweep_sl_push(&l, s);
    snprintf(s, sizeof s, "%d", p->seed0);
    if (!rc && p->seed0 != 1) rc = sweep_sl_push(&l, "--seed-from") || sweep_sl_push(&l, s);
    if (!rc) command_line_join(buf, n, l.n, l.v);
    sweep_sl_free(&l);
    return rc ? -1 : 0;
}
