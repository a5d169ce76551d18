/* sweep.c — `moelab sweep`: the paper's multi-seed comparisons as one command.
 *
 * A sweep is a base training configuration (any `moelab train` option), axes to vary
 * (`--vary KEY=V1,V2,...`, cartesian product; `--with KEY=...` pairs a second option with the
 * preceding axis, value by value) and a number of seeds (1..N). Each configuration x seed is
 * one headless `moelab train` run in its own session folder DIR/<axis=value,...,seed=S>, run as
 * a child process of this binary (/proc/self/exe) with its output in DIR/logs/<name>.log.
 *
 * Run grid: configurations enumerate the axes in --vary order, the last one fastest (a --with
 * option follows its axis); run index = (seed - 1) * configurations + configuration, so the
 * first pass over the grid gives one seed of everything. --shard i/n keeps the runs with
 * index % n == i; under mpirun rank r of P keeps the runs with (index / n) % P == r.
 *
 * Restart safety: a run whose session says "finished" is skipped; "interrupted" (or "running"
 * left by a dead writer) is continued with `train --resume`; one with no checkpoint yet is
 * restarted; "failed" (a diverged loss: deterministic) is reported and left alone. Each run
 * holds an exclusive flock on its log file for as long as its training process lives (the lock
 * is on the child's stdout), so two sweeps over the same folder never run one session twice.
 * A session whose stored command line differs from the run's configuration (other than
 * --threads and --session) is refused as a mismatch.
 *
 * The summary (DIR/summary.csv, DIR/runs.csv, DIR/sweep.h5 and the printed table) is computed
 * from the session folders alone, so `moelab sweep --collect DIR` rebuilds it after shards ran
 * separately; DIR/sweep.args records the grid (base options, axes, seeds). */
#define _GNU_SOURCE

#include "sweep.h"
#include "app.h"
#include "options.h"
#include "runsession.h"
#include "core/stats.h"
#include "sessions/session.h"
#include "sessions/sweep_h5.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifdef MOELAB_HAVE_MPI
#include <mpi.h>
#endif

extern char **environ;

#define MAX_AXES 16
#define MAX_VALUES 256
#define MAX_CONFIGS 10000  /* runs in one sweep */
#define PATH_N 512      /* --out, --collect */
#define DIR_N 1024      /* paths under them */
#define OUT_MAX 200     /* longest --out: a run's folder must fit AppOptions.session */

/* ------------------------------------------------------------------ string lists */

typedef struct {
    int n, cap;
    char **v;
} StrList;

static int sl_push(StrList *l, const char *s) {
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

static void sl_free(StrList *l) {
    for (int i = 0; i < l->n; i++) free(l->v[i]);
    free(l->v);
    memset(l, 0, sizeof *l);
}

/* ------------------------------------------------------------------ the plan */

typedef struct {
    char key[64];
    int nvals;
    char *vals[MAX_VALUES];
    int leader;      /* -1: an axis of its own; else the axis whose value index it follows (--with) */
} Axis;

typedef struct {
    StrList base;    /* training options shared by every run */
    int nbase_preset;/* the first nbase_preset entries came from a preset */
    int naxes;
    Axis axes[MAX_AXES];
    int last_leader;
    int seeds;
    char out[PATH_N];
    int jobs;
    int shard_i, shard_n;
    char preset[32];
    int full;
    char collect[PATH_N];
    char show[PATH_N];
    int dry_run;
    /* derived by plan_build */
    int user_threads;        /* --threads given: every run uses it */
    int nconfigs, nruns;
    int *vidx;               /* (nconfigs * naxes) value index of axis a in config c */
    char (*label)[SWEEP_NAME_MAX];  /* (nconfigs) "k=v,k=v" ("" without axes) */
    char (*head)[24];        /* (nconfigs) head kind */
    int *baseline;           /* (nconfigs) matching dense configuration or -1 */
} Plan;

static void plan_free(Plan *p) {
    sl_free(&p->base);
    for (int a = 0; a < p->naxes; a++)
        for (int v = 0; v < p->axes[a].nvals; v++) free(p->axes[a].vals[v]);
    free(p->vidx);
    free(p->label);
    free(p->head);
    free(p->baseline);
    memset(p, 0, sizeof *p);
}

static void sweep_help(void) {
#ifdef MOELAB_HAVE_MPI
    const char *mpi = "this moelab is built with MPI";
#else
    const char *mpi = "this moelab is built without MPI: use --shard";
#endif
    printf(
"usage: moelab sweep [train options] --vary KEY=V1,V2,... [--with KEY=W1,W2,...] --seeds N --out DIR\n"
"                    [--jobs N] [--shard I/N] [--dry-run]\n"
"       moelab sweep --preset hidden-size|topk-rho|softmoe|backbone [--full] [train options] [--out DIR]\n"
"       moelab sweep --collect DIR\n"
"       moelab sweep --show DIR|FILE.h5\n\n"
"Runs every combination of the --vary axes for seeds 1..N as a headless training session\n"
"DIR/<axis=value,...,seed=S> and summarises them: per configuration the mean and sd of the final\n"
"and best test accuracy and rho; for each non-dense configuration its gap to the dense one with\n"
"the same other values, with Cohen's d, Hedges' g and a 95%% Welch confidence interval.\n"
"Written to DIR/summary.csv, DIR/runs.csv and DIR/sweep.h5. Rerunning the same command resumes:\n"
"finished runs are skipped, interrupted ones continue from their checkpoint.\n\n"
"  --vary KEY=V1,V2     an axis: any train option that takes a value (head, hidden, k, cf,\n"
"                       backbone, width, experts, lr, dataset, ...); repeatable\n"
"  --with KEY=W1,W2     pair an option with the preceding --vary axis, value by value\n"
"                       (e.g. --vary k=1,2,4 --with cf=2.5,1.25,0.625)\n"
"  --seeds N            seeds 1..N per configuration (3)\n"
"  --out DIR            sweep folder (presets: sweeps/<preset>[-full])\n"
"  --jobs N             N runs at once, each with (cores / N) threads unless --threads is given (1)\n"
"  --shard I/N          only the runs whose index %% N == I (Slurm arrays: I = $SLURM_ARRAY_TASK_ID);\n"
"                       merge with --collect when all shards are done\n"
"  --collect DIR        rebuild the summary of DIR from the sessions present\n"
"  --show DIR|FILE.h5   print the table stored in DIR/sweep.h5\n"
"  --preset NAME        the paper's experiments with short budgets (Fashion-MNIST, 2 cores,\n"
"                       under an hour each); --full for the real budgets (5 seeds, 30 epochs, w 1):\n"
"                         hidden-size  backbone dw,std x hidden x head moe,dense\n"
"                         topk-rho     k 1,2,4 with cf 2.5/k (slot budget fixed) x head moe,dense\n"
"                         softmoe      head softmoe-sample,softmoe-batch,moe,dense\n"
"                         backbone     backbone dw,std x head moe,dense at the reference model\n"
"  --dry-run            print the runs and their state, run nothing\n"
"Under mpirun (Open MPI) each rank runs the runs with index %% ranks == rank and rank 0 writes\n"
"the summary (%s). Train options (moelab train --help) set the base\n"
"configuration; --seed, --session and --resume are the sweep's business.\n", mpi);
}

/* ------------------------------------------------------------------ presets */

typedef struct {
    const char *name;
    const char *const *quick;   /* arguments, NULL-terminated */
    const char *const *full;
    const char *note;
} Preset;

static const char *const hs_quick[] = {"--width", "0.5", "--epochs", "1", "--vary", "backbone=dw,std", "--vary",
                                       "hidden=64,256,1024", "--vary", "head=moe,dense", "--seeds", "2", NULL};
static const char *const hs_full[] = {"--width", "1", "--epochs", "30", "--vary", "backbone=dw,std", "--vary",
                                      "hidden=64,128,256,512,1024,2048,4096", "--vary", "head=moe,dense", "--seeds", "5", NULL};
static const char *const tk_quick[] = {"--width", "0.5", "--epochs", "2", "--vary", "k=1,2,4", "--with", "cf=2.5,1.25,0.625",
                                       "--vary", "head=moe,dense", "--seeds", "2", NULL};
static const char *const tk_full[] = {"--width", "1", "--epochs", "30", "--vary", "k=1,2,4", "--with", "cf=2.5,1.25,0.625",
                                      "--vary", "head=moe,dense", "--seeds", "5", NULL};
static const char *const sm_quick[] = {"--width", "0.5", "--epochs", "2", "--vary", "head=softmoe-sample,softmoe-batch,moe,dense",
                                       "--seeds", "2", NULL};
static const char *const sm_full[] = {"--width", "1", "--epochs", "30", "--vary", "head=softmoe-sample,softmoe-batch,moe,dense",
                                      "--seeds", "5", NULL};
static const char *const bb_quick[] = {"--width", "0.5", "--epochs", "2", "--vary", "backbone=dw,std", "--vary", "head=moe,dense",
                                       "--seeds", "2", NULL};
static const char *const bb_full[] = {"--width", "1", "--epochs", "30", "--vary", "backbone=dw,std", "--vary", "head=moe,dense",
                                      "--seeds", "5", NULL};

static const Preset presets[] = {
    {"hidden-size", hs_quick, hs_full,
     "the gap's sign as h (hence rho) grows, both backbones; dense has the same k*h active width"},
    {"topk-rho", tk_quick, tk_full,
     "cf = 2.5/k keeps the slot budget E*C = 2.5 B per batch fixed; rho realized counts the pairs that got a slot"},
    {"softmoe", sm_quick, sm_full, "soft MoE per sample (dense over experts) vs over the batch (samples mix)"},
    {"backbone", bb_quick, bb_full, "dw vs std backbone at the reference head (E 8, k 2, h 1024, cf 1.25)"},
};
#define N_PRESETS (int)(sizeof presets / sizeof presets[0])

/* ------------------------------------------------------------------ argument parsing */

/* "--name VALUE" or "--name=VALUE" at argv[*i]: 1 with *val set (and *i advanced past the value),
 * 0 if argv[*i] is another option, -1 when the value is missing. */
static int opt_value(int argc, char **argv, int *i, const char *name, const char **val) {
    const char *a = argv[*i];
    const size_t n = strlen(name);
    if (strncmp(a, name, n)) return 0;
    if (a[n] == '=') { *val = a + n + 1; return 1; }
    if (a[n]) return 0;
    if (*i + 1 >= argc) {
        fprintf(stderr, "moelab sweep: %s needs a value (see moelab sweep --help)\n", name);
        return -1;
    }
    *val = argv[++*i];
    return 1;
}

static int parse_count(const char *opt, const char *s, long lo, long hi, int *out) {
    char *end;
    errno = 0;
    const long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi) {
        fprintf(stderr, "moelab sweep: %s: '%s' is not a whole number in [%ld, %ld]\n", opt, s, lo, hi);
        return -1;
    }
    *out = (int)v;
    return 0;
}

static const char *const reserved_keys[] = {"seed", "seeds", "session", "resume", "no-session", "threads", "dry-run",
                                            "headless", "help", "vary", "with", "out", NULL};

static void axis_clear(Axis *a) {
    for (int v = 0; v < a->nvals; v++) free(a->vals[v]);
    a->nvals = 0;
}

/* Removes axis a (and, for a leader, its --with followers), keeping the order of the others. */
static void plan_drop_axis(Plan *p, int a) {
    int keep[MAX_AXES], nk = 0, map[MAX_AXES];
    for (int i = 0; i < p->naxes; i++) {
        const int drop = i == a || p->axes[i].leader == a;
        map[i] = drop ? -1 : nk;
        if (drop) axis_clear(&p->axes[i]);
        else keep[nk++] = i;
    }
    Axis tmp[MAX_AXES];
    for (int i = 0; i < nk; i++) {
        tmp[i] = p->axes[keep[i]];
        if (tmp[i].leader >= 0) tmp[i].leader = map[tmp[i].leader];
    }
    memcpy(p->axes, tmp, sizeof(Axis) * (size_t)nk);
    p->naxes = nk;
    p->last_leader = p->last_leader >= 0 ? map[p->last_leader] : -1;
}

/* --vary / --with KEY=V1,V2,... */
static int plan_axis(Plan *p, const char *opt, const char *spec, int with) {
    const char *eq = strchr(spec, '=');
    if (!eq || eq == spec || !eq[1]) {
        fprintf(stderr, "moelab sweep: %s '%s': expected KEY=V1,V2,...\n", opt, spec);
        return -1;
    }
    Axis ax;
    memset(&ax, 0, sizeof ax);
    ax.leader = -1;
    const size_t kl = (size_t)(eq - spec);
    if (kl >= sizeof ax.key) { fprintf(stderr, "moelab sweep: %s: option name too long\n", opt); return -1; }
    memcpy(ax.key, spec, kl);
    if (ax.key[0] == '-') memmove(ax.key, ax.key + strspn(ax.key, "-"), strlen(ax.key) - strspn(ax.key, "-") + 1);
    for (const char *c = ax.key; *c; c++)
        if (!((*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') || *c == '-')) {
            fprintf(stderr, "moelab sweep: %s: '%s' is not an option name\n", opt, ax.key);
            return -1;
        }
    for (int i = 0; reserved_keys[i]; i++)
        if (!strcmp(ax.key, reserved_keys[i])) {
            fprintf(stderr, "moelab sweep: %s: --%s cannot be swept%s\n", opt, ax.key,
                    !strcmp(ax.key, "seed") ? " (--seeds N runs seeds 1..N)" : "");
            return -1;
        }
    const char *s = eq + 1;
    while (1) {
        const char *c = strchr(s, ',');
        const size_t l = c ? (size_t)(c - s) : strlen(s);
        if (l == 0) { fprintf(stderr, "moelab sweep: %s %s: empty value\n", opt, spec); axis_clear(&ax); return -1; }
        if (ax.nvals >= MAX_VALUES) { fprintf(stderr, "moelab sweep: %s: more than %d values\n", opt, MAX_VALUES); axis_clear(&ax); return -1; }
        char *v = strndup(s, l);
        if (!v) { axis_clear(&ax); return -1; }
        for (int i = 0; i < ax.nvals; i++)
            if (!strcmp(ax.vals[i], v)) {
                fprintf(stderr, "moelab sweep: %s %s: '%s' appears twice\n", opt, ax.key, v);
                free(v);
                axis_clear(&ax);
                return -1;
            }
        ax.vals[ax.nvals++] = v;
        if (!c) break;
        s = c + 1;
    }
    /* an axis given again (e.g. over a preset's) replaces the old one, and a --vary keeps its
     * place in the order (its old --with partners go) */
    for (int i = 0; i < p->naxes; i++) {
        if (strcmp(p->axes[i].key, ax.key)) continue;
        if (with || p->axes[i].leader >= 0) {
            plan_drop_axis(p, i);
            break;
        }
        for (int f = p->naxes - 1; f > i; f--)
            if (p->axes[f].leader == i) plan_drop_axis(p, f);
        axis_clear(&p->axes[i]);
        p->axes[i] = ax;
        p->last_leader = i;
        return 0;
    }
    if (with) {
        if (p->last_leader < 0) {
            fprintf(stderr, "moelab sweep: --with %s must follow a --vary axis\n", ax.key);
            axis_clear(&ax);
            return -1;
        }
        if (p->axes[p->last_leader].nvals != ax.nvals) {
            fprintf(stderr, "moelab sweep: --with %s has %d values, --vary %s has %d\n", ax.key, ax.nvals,
                    p->axes[p->last_leader].key, p->axes[p->last_leader].nvals);
            axis_clear(&ax);
            return -1;
        }
        ax.leader = p->last_leader;
    }
    if (p->naxes >= MAX_AXES) {
        fprintf(stderr, "moelab sweep: more than %d axes\n", MAX_AXES);
        axis_clear(&ax);
        return -1;
    }
    if (!with) {
        p->axes[p->naxes] = ax;
        p->last_leader = p->naxes++;
        return 0;
    }
    /* a --with option goes right after its axis and that axis's earlier partners, so that the
     * order of the axes (names, sweep.args) always keeps a group together */
    int pos = ax.leader + 1;
    while (pos < p->naxes && p->axes[pos].leader == ax.leader) pos++;
    memmove(p->axes + pos + 1, p->axes + pos, sizeof(Axis) * (size_t)(p->naxes - pos));
    for (int i = pos + 1; i <= p->naxes; i++)
        if (p->axes[i].leader >= pos) p->axes[i].leader++;
    p->axes[pos] = ax;
    p->naxes++;
    return 0;
}

/* Parses sweep arguments argv[first..]; everything that is not a sweep option goes to the base
 * configuration. Returns 0, 1 after --help, -1 on error. */
static int plan_args(Plan *p, int argc, char **argv, int first) {
    for (int i = first; i < argc; i++) {
        const char *v = NULL;
        int r;
        if ((r = opt_value(argc, argv, &i, "--vary", &v))) {
            if (r < 0 || plan_axis(p, "--vary", v, 0)) return -1;
        } else if ((r = opt_value(argc, argv, &i, "--with", &v))) {
            if (r < 0 || plan_axis(p, "--with", v, 1)) return -1;
        } else if ((r = opt_value(argc, argv, &i, "--seeds", &v))) {
            if (r < 0 || parse_count("--seeds", v, 1, 10000, &p->seeds)) return -1;
        } else if ((r = opt_value(argc, argv, &i, "--jobs", &v))) {
            if (r < 0 || parse_count("--jobs", v, 1, 1024, &p->jobs)) return -1;
        } else if ((r = opt_value(argc, argv, &i, "--out", &v))) {
            if (r < 0) return -1;
            if (!*v || strlen(v) > OUT_MAX) { fprintf(stderr, "moelab sweep: --out: bad folder name '%s'\n", v); return -1; }
            snprintf(p->out, sizeof p->out, "%s", v);
        } else if ((r = opt_value(argc, argv, &i, "--collect", &v))) {
            if (r < 0) return -1;
            if (!*v || strlen(v) > OUT_MAX) { fprintf(stderr, "moelab sweep: --collect: bad folder name '%s'\n", v); return -1; }
            snprintf(p->collect, sizeof p->collect, "%s", v);
        } else if ((r = opt_value(argc, argv, &i, "--show", &v))) {
            if (r < 0) return -1;
            snprintf(p->show, sizeof p->show, "%s", v);
        } else if ((r = opt_value(argc, argv, &i, "--shard", &v))) {
            int a = -1, b = -1, n = 0;
            if (r < 0) return -1;
            if (sscanf(v, "%d/%d%n", &a, &b, &n) != 2 || v[n] || b < 1 || a < 0 || a >= b) {
                fprintf(stderr, "moelab sweep: --shard: '%s' is not I/N with 0 <= I < N\n", v);
                return -1;
            }
            p->shard_i = a;
            p->shard_n = b;
        } else if ((r = opt_value(argc, argv, &i, "--preset", &v))) {
            if (r < 0) return -1; /* expanded by the caller */
        } else if (!strcmp(argv[i], "--full")) {
            p->full = 1;
        } else if (!strcmp(argv[i], "--dry-run")) {
            p->dry_run = 1;
        } else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            sweep_help();
            return 1;
        } else if (sl_push(&p->base, argv[i])) {
            fprintf(stderr, "moelab sweep: out of memory\n");
            return -1;
        }
    }
    return 0;
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
        if (sl_push(l, opt) || sl_push(l, p->axes[a].vals[p->vidx[c * p->naxes + a]])) return -1;
    }
    return 0;
}

/* The training options of run (c, seed) without --threads and --session: "train --headless BASE
 * AXES --seed S". */
static int run_train_args(const Plan *p, int c, int seed, StrList *l) {
    char s[32];
    snprintf(s, sizeof s, "%d", seed);
    if (sl_push(l, "train") || sl_push(l, "--headless")) return -1;
    for (int i = 0; i < p->base.n; i++)
        if (sl_push(l, p->base.v[i])) return -1;
    if (push_axes(p, c, l) || sl_push(l, "--seed") || sl_push(l, s)) return -1;
    return 0;
}

static void run_dir(const Plan *p, int r, char *buf, size_t n);

/* The complete training command of a fresh run r: the options above plus --threads (unless the
 * base sets it) and --session DIR. */
static int run_child_args(const Plan *p, int r, int threads, StrList *l) {
    char th[32], dir[DIR_N];
    snprintf(th, sizeof th, "%d", threads);
    run_dir(p, r, dir, sizeof dir);
    if (run_train_args(p, r % p->nconfigs, r / p->nconfigs + 1, l)) return -1;
    if (!p->user_threads && (sl_push(l, "--threads") || sl_push(l, th))) return -1;
    return sl_push(l, "--session") || sl_push(l, dir) ? -1 : 0;
}

static void run_name(const Plan *p, int r, char *buf, size_t n) {
    const int c = r % p->nconfigs, seed = r / p->nconfigs + 1;
    snprintf(buf, n, "%s%sseed=%d", p->label[c], p->label[c][0] ? "," : "", seed);
}

static const char *config_label(const Plan *p, int c) { return p->label[c][0] ? p->label[c] : "(base)"; }

/* Validates the base options and every configuration, derives labels, heads and baselines. */
static int plan_build(Plan *p) {
    /* base options: a sweep owns the seeds and the session folders */
    {
        StrList l = {0};
        sl_push(&l, "sweep");
        for (int i = 0; i < p->base.n; i++) sl_push(&l, p->base.v[i]);
        AppOptions o;
        app_options_defaults(&o);
        const uint64_t seed_mark = 0x5eed5eedULL;
        o.train.seed = seed_mark;
        o.train.threads = -77;
        const int r = app_options_parse(&o, l.n, l.v, "sweep");
        sl_free(&l);
        if (r != 0) return -1;
        if (o.train.seed != seed_mark) { fprintf(stderr, "moelab sweep: --seed: the sweep runs seeds 1..N (--seeds N)\n"); return -1; }
        if (o.session[0] || o.resume[0] || o.no_session) {
            fprintf(stderr, "moelab sweep: --session, --resume and --no-session are set by the sweep (see --out)\n");
            return -1;
        }
        p->user_threads = o.train.threads != -77;
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
                fprintf(stderr, "moelab sweep: note: %s%s%s is replaced by the --vary %s axis\n", b, drop == 2 ? " " : "",
                        drop == 2 ? p->base.v[i + 1] : "", p->axes[a].key);
        }
        if (!drop) { i++; continue; }
        for (int k = 0; k < drop; k++) free(p->base.v[i + k]);
        memmove(p->base.v + i, p->base.v + i + drop, sizeof(char *) * (size_t)(p->base.n - i - drop + 1));
        p->base.n -= drop;
        if (i < p->nbase_preset) p->nbase_preset -= drop;
    }
    /* the product of the independent axes, the last one fastest */
    long nc = 1;
    for (int a = 0; a < p->naxes; a++)
        if (p->axes[a].leader < 0) nc *= p->axes[a].nvals;
    if (nc > MAX_CONFIGS || nc * p->seeds > MAX_CONFIGS) {
        fprintf(stderr, "moelab sweep: %ld configurations x %d seeds is more than %d runs\n", nc, p->seeds, MAX_CONFIGS);
        return -1;
    }
    p->nconfigs = (int)nc;
    p->nruns = p->nconfigs * p->seeds;
    p->vidx = calloc((size_t)nc * (size_t)(p->naxes ? p->naxes : 1), sizeof(int));
    p->label = calloc((size_t)nc, sizeof *p->label);
    p->head = calloc((size_t)nc, sizeof *p->head);
    p->baseline = calloc((size_t)nc, sizeof(int));
    if (!p->vidx || !p->label || !p->head || !p->baseline) { fprintf(stderr, "moelab sweep: out of memory\n"); return -1; }
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
                return -1;
            }
            o += (size_t)w;
        }
        sanitize(p->label[c]);
        for (int b = 0; b < c; b++)
            if (!strcmp(p->label[b], p->label[c])) {
                fprintf(stderr, "moelab sweep: two configurations get the same folder name '%s'\n", p->label[c]);
                return -1;
            }
        /* every configuration must be a valid training configuration */
        StrList l = {0};
        sl_push(&l, "sweep");
        for (int i = 0; i < p->base.n; i++) sl_push(&l, p->base.v[i]);
        if (push_axes(p, c, &l)) { sl_free(&l); return -1; }
        AppOptions o2;
        app_options_defaults(&o2);
        const int r = app_options_parse(&o2, l.n, l.v, "sweep");
        sl_free(&l);
        if (r != 0) {
            fprintf(stderr, "moelab sweep: configuration %s is not a valid training configuration\n", config_label(p, c));
            return -1;
        }
        snprintf(p->head[c], sizeof p->head[c], "%s", moe_head_name(o2.train.model.head.kind));
    }
    for (int a = 0; a < p->naxes; a++)
        if (!strcmp(p->axes[a].key, "head")) head_axis = p->axes[a].leader >= 0 ? p->axes[a].leader : a;
    /* the matching dense configuration: head dense, same value on every axis outside the head's group */
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
static int plan_args_line(const Plan *p, char *buf, size_t n) {
    StrList l = {0};
    int rc = 0;
    for (int i = 0; i < p->base.n && !rc; i++) rc = sl_push(&l, p->base.v[i]);
    for (int a = 0; a < p->naxes && !rc; a++) {
        char spec[4096];
        size_t o = (size_t)snprintf(spec, sizeof spec, "%s=", p->axes[a].key);
        for (int v = 0; v < p->axes[a].nvals && o < sizeof spec; v++)
            o += (size_t)snprintf(spec + o, sizeof spec - o, "%s%s", v ? "," : "", p->axes[a].vals[v]);
        rc = sl_push(&l, p->axes[a].leader >= 0 ? "--with" : "--vary") || sl_push(&l, spec);
    }
    char s[32];
    snprintf(s, sizeof s, "%d", p->seeds);
    if (!rc) rc = sl_push(&l, "--seeds") || sl_push(&l, s);
    if (!rc) command_line_join(buf, n, l.n, l.v);
    sl_free(&l);
    return rc ? -1 : 0;
}

/* ------------------------------------------------------------------ files */

static int mkdirs(const char *dir) {
    char p[DIR_N];
    snprintf(p, sizeof p, "%s", dir);
    for (char *s = p + 1;; s++) {
        const char c = *s;
        if (c == '/' || c == 0) {
            *s = 0;
            if (mkdir(p, 0777) != 0 && errno != EEXIST) {
                fprintf(stderr, "moelab sweep: %s: cannot create directory: %s\n", p, strerror(errno));
                return -1;
            }
            *s = c;
        }
        if (c == 0) break;
    }
    return 0;
}

static int file_exists(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0;
}

/* Writes text to path atomically (path.tmp.<pid>, rename). */
static int write_atomic(const char *path, const char *text) {
    char tmp[DIR_N + 32];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    FILE *f = fopen(tmp, "w");
    if (!f) { fprintf(stderr, "moelab sweep: %s: %s\n", tmp, strerror(errno)); return -1; }
    const int bad = fputs(text, f) < 0;
    if (fclose(f) != 0 || bad || rename(tmp, path) != 0) {
        fprintf(stderr, "moelab sweep: %s: cannot write: %s\n", path, strerror(errno));
        unlink(tmp);
        return -1;
    }
    return 0;
}

/* Drops "--threads X" and "--session X" (the per-machine parts of a run's command line). */
static void normalize_args(StrList *l) {
    int w = 0;
    for (int i = 0; i < l->n; i++) {
        const char *a = l->v[i];
        if ((!strcmp(a, "--threads") || !strcmp(a, "--session")) && i + 1 < l->n) {
            free(l->v[i]);
            free(l->v[i + 1]);
            i++;
            continue;
        }
        if (!strncmp(a, "--threads=", 10) || !strncmp(a, "--session=", 10)) { free(l->v[i]); continue; }
        l->v[w++] = l->v[i];
    }
    l->n = w;
    if (l->v) l->v[w] = NULL;
}

/* 1 if the session in dir was started with the training options of run r. */
static int session_matches(const Plan *p, int r, const char *dir, char *why, size_t wn) {
    char line[4096];
    if (session_read_run_attr(dir, "command_line", line, sizeof line) != ML_OK) {
        snprintf(why, wn, "%s", ml_last_error());
        return 0;
    }
    char **av = NULL;
    const int ac = command_line_split(line, &av);
    if (ac < 0) { snprintf(why, wn, "cannot parse its stored command line"); return 0; }
    StrList stored = {.n = ac, .cap = ac + 1, .v = av}, want = {0};
    run_train_args(p, r % p->nconfigs, r / p->nconfigs + 1, &want);
    normalize_args(&stored);
    normalize_args(&want);
    char a[4096], b[4096];
    command_line_join(a, sizeof a, stored.n, stored.v);
    command_line_join(b, sizeof b, want.n, want.v);
    sl_free(&stored);
    sl_free(&want);
    if (strcmp(a, b)) {
        snprintf(why, wn, "it was started as '%.900s', this sweep wants '%.900s'", a, b);
        return 0;
    }
    return 1;
}

typedef enum { RS_NEW, RS_DONE, RS_FAILED, RS_RESUME, RS_RESTART, RS_MISMATCH, RS_BROKEN } RunState;
static const char *const state_names[] = {"to run", "finished", "failed", "to resume", "to restart", "mismatch", "unreadable"};

static RunState run_state(const Plan *p, int r, const char *dir, SessionInfo *info, char *msg, size_t mn) {
    char live[DIR_N + 16];
    snprintf(live, sizeof live, "%s/live.h5", dir);
    msg[0] = 0;
    memset(info, 0, sizeof *info);
    info->last_test_acc = info->best_test_acc = NAN;
    if (!file_exists(live)) return RS_NEW;
    char ck[DIR_N + 64];
    if (session_read_info(dir, info) != ML_OK) {
        snprintf(msg, mn, "%s", ml_last_error());
        /* a run killed while it created live.h5 has nothing worth keeping */
        if (ckpt_find_latest(dir, ck, sizeof ck, NULL, 0) != ML_OK) return RS_RESTART;
        return RS_BROKEN;
    }
    if (!session_matches(p, r, dir, msg, mn)) return RS_MISMATCH;
    if (!strcmp(info->status, "finished")) return RS_DONE;
    if (!strcmp(info->status, "failed")) return RS_FAILED;
    return ckpt_find_latest(dir, ck, sizeof ck, NULL, 0) == ML_OK ? RS_RESUME : RS_RESTART;
}

/* ------------------------------------------------------------------ running */

static volatile sig_atomic_t g_sweep_stop = 0;
static void sweep_on_signal(int sig) { g_sweep_stop = sig; }

typedef struct {
    pid_t pid;
    int run;
    int logfd;
    double t0;
} Child;

typedef struct {
    int ran, skipped, failed, busy, interrupted;
} Tally;

static int cores_available(int mpi_local) {
    cpu_set_t set;
    const long online = sysconf(_SC_NPROCESSORS_ONLN);
    int n = (int)(online > 0 ? online : 1);
    if (sched_getaffinity(0, sizeof set, &set) == 0) {
        const int a = CPU_COUNT(&set);
        /* ranks bound by the launcher already have their share; unbound ones split the machine */
        if (a > 0 && a < n) return a;
        if (a > 0) n = a;
    }
    if (mpi_local > 1) n /= mpi_local;
    return n > 0 ? n : 1;
}

static void self_exe(char *buf, size_t n, const char *argv0) {
    const ssize_t l = readlink("/proc/self/exe", buf, n - 1);
    if (l > 0) buf[l] = 0;
    else snprintf(buf, n, "%s", argv0);
}

static const char *acc_text(double a, char *buf, size_t n) {
    if (isnan(a)) snprintf(buf, n, "-");
    else snprintf(buf, n, "%.2f%%", 100 * a);
    return buf;
}

/* The last non-empty line of a log (for a failed run's message). */
static void log_tail(const char *path, char *buf, size_t n) {
    buf[0] = 0;
    FILE *f = fopen(path, "r");
    if (!f) return;
    char line[1024];
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = 0;
        if (line[0]) snprintf(buf, n, "%s", line);
    }
    fclose(f);
}

typedef struct {
    const Plan *p;
    char exe[PATH_N];
    int threads;
    const char *who;  /* "" or "rank r: " */
    Child *kids;
    int nkids;
    Tally tally;
} Runner;

static void run_dir(const Plan *p, int r, char *buf, size_t n) {
    char name[SWEEP_NAME_MAX];
    run_name(p, r, name, sizeof name);
    snprintf(buf, n, "%s/%s", p->out, name);
}

static void log_path(const Plan *p, int r, char *buf, size_t n) {
    char name[SWEEP_NAME_MAX];
    run_name(p, r, name, sizeof name);
    snprintf(buf, n, "%s/logs/%s.log", p->out, name);
}

/* Starts run r (or skips it). Returns 1 if a child was started. */
static int runner_start(Runner *R, int r) {
    const Plan *p = R->p;
    char name[SWEEP_NAME_MAX], dir[DIR_N], logp[DIR_N], msg[2048], a1[32], a2[32];
    run_name(p, r, name, sizeof name);
    run_dir(p, r, dir, sizeof dir);
    log_path(p, r, logp, sizeof logp);
    const int fd = open(logp, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0) {
        fprintf(stderr, "moelab sweep: %s: %s\n", logp, strerror(errno));
        R->tally.failed++;
        return 0;
    }
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        printf("%s[%d/%d] %s: busy (another process is running it), skipped\n", R->who, r + 1, p->nruns, name);
        close(fd);
        R->tally.busy++;
        return 0;
    }
    SessionInfo info;
    const RunState st = run_state(p, r, dir, &info, msg, sizeof msg);
    switch (st) {
    case RS_DONE:
        printf("%s[%d/%d] %s: finished before (final %s, best %s), skipped\n", R->who, r + 1, p->nruns, name,
               acc_text(info.last_test_acc, a1, sizeof a1), acc_text(info.best_test_acc, a2, sizeof a2));
        close(fd);
        R->tally.skipped++;
        return 0;
    case RS_FAILED:
        printf("%s[%d/%d] %s: failed before (see %s), skipped: remove %s to run it again\n", R->who, r + 1, p->nruns,
               name, logp, dir);
        close(fd);
        R->tally.failed++;
        return 0;
    case RS_MISMATCH:
    case RS_BROKEN:
        fprintf(stderr, "moelab sweep: %s: %s%s (remove it or use another --out)\n", dir,
                st == RS_MISMATCH ? "holds another configuration: " : "", msg);
        close(fd);
        R->tally.failed++;
        return 0;
    case RS_RESTART: {
        /* a run killed before its first checkpoint: nothing to continue from */
        char live[DIR_N + 16];
        snprintf(live, sizeof live, "%s/live.h5", dir);
        if (unlink(live) != 0) {
            fprintf(stderr, "moelab sweep: %s: %s\n", live, strerror(errno));
            close(fd);
            R->tally.failed++;
            return 0;
        }
        break;
    }
    default:
        break;
    }
    StrList av = {0};
    sl_push(&av, R->exe);
    if (st == RS_RESUME) {
        sl_push(&av, "train");
        sl_push(&av, "--headless");
        sl_push(&av, "--resume");
        sl_push(&av, dir);
    } else {
        run_child_args(p, r, R->threads, &av);
    }
    char line[4096];
    command_line_join(line, sizeof line, av.n - 1, av.v + 1);
    dprintf(fd, "== moelab sweep: moelab %s\n", line);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_adddup2(&fa, fd, 1);
    posix_spawn_file_actions_adddup2(&fa, fd, 2);
    pid_t pid;
    const int e = posix_spawn(&pid, R->exe, &fa, NULL, av.v, environ);
    posix_spawn_file_actions_destroy(&fa);
    sl_free(&av);
    if (e != 0) {
        fprintf(stderr, "moelab sweep: cannot start %s: %s\n", R->exe, strerror(e));
        close(fd);
        R->tally.failed++;
        return 0;
    }
    printf("%s[%d/%d] %s: %s (log %s)\n", R->who, r + 1, p->nruns, name,
           st == RS_RESUME ? "resuming from its checkpoint" : st == RS_RESTART ? "restarting (no checkpoint yet)" : "started",
           logp);
    fflush(stdout);
    R->kids[R->nkids++] = (Child){.pid = pid, .run = r, .logfd = fd, .t0 = ml_now()};
    return 1;
}

static void runner_reap(Runner *R, pid_t pid, int wstatus) {
    const Plan *p = R->p;
    int k = 0;
    while (k < R->nkids && R->kids[k].pid != pid) k++;
    if (k == R->nkids) return;
    const Child c = R->kids[k];
    R->kids[k] = R->kids[--R->nkids];
    close(c.logfd);
    char name[SWEEP_NAME_MAX], dir[DIR_N], logp[DIR_N], a1[32], a2[32];
    run_name(p, c.run, name, sizeof name);
    run_dir(p, c.run, dir, sizeof dir);
    log_path(p, c.run, logp, sizeof logp);
    SessionInfo info;
    const int have = session_read_info(dir, &info) == ML_OK;
    const int code = WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : 128 + WTERMSIG(wstatus);
    if (have && !strcmp(info.status, "finished") && code == 0) {
        printf("%s[%d/%d] %s: finished in %.1f s: final test acc %s, best %s\n", R->who, c.run + 1, p->nruns, name,
               ml_now() - c.t0, acc_text(info.last_test_acc, a1, sizeof a1), acc_text(info.best_test_acc, a2, sizeof a2));
        R->tally.ran++;
    } else if (have && !strcmp(info.status, "interrupted")) {
        char ck[DIR_N + 64];
        const char *b = ckpt_find_latest(dir, ck, sizeof ck, NULL, 0) == ML_OK ? strrchr(ck, '/') : NULL;
        printf("%s[%d/%d] %s: interrupted, checkpoint %s (resumes when the sweep runs again)\n", R->who, c.run + 1,
               p->nruns, name, b ? b + 1 : "none");
        R->tally.interrupted++;
    } else if (g_sweep_stop) {
        printf("%s[%d/%d] %s: stopped (exit %d) before its first checkpoint: starts again when the sweep runs again\n",
               R->who, c.run + 1, p->nruns, name, code);
        R->tally.interrupted++;
    } else {
        char tail[1024];
        log_tail(logp, tail, sizeof tail);
        printf("%s[%d/%d] %s: FAILED (exit %d%s%s): %s (log %s)\n", R->who, c.run + 1, p->nruns, name, code,
               have ? ", status " : "", have ? info.status : "", tail, logp);
        R->tally.failed++;
    }
    fflush(stdout);
}

/* Runs the selected runs, at most p->jobs at a time. */
static void runner_go(Runner *R, const int *sel, int nsel) {
    const Plan *p = R->p;
    struct sigaction sa, old_int, old_term;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = sweep_on_signal;
    sigaction(SIGINT, &sa, &old_int);
    sigaction(SIGTERM, &sa, &old_term);
    R->kids = calloc((size_t)p->jobs, sizeof(Child));
    int next = 0, signalled = 0;
    while ((next < nsel && !g_sweep_stop) || R->nkids > 0) {
        while (!g_sweep_stop && next < nsel && R->nkids < p->jobs) runner_start(R, sel[next++]);
        if (R->nkids == 0) continue;
        int ws;
        const pid_t pid = waitpid(-1, &ws, 0);
        if (pid > 0) runner_reap(R, pid, ws);
        else if (errno == ECHILD) R->nkids = 0;
        if (g_sweep_stop && !signalled) {
            /* Ctrl-C reaches the children through the terminal; a SIGTERM to this process alone does not */
            for (int k = 0; k < R->nkids; k++) kill(R->kids[k].pid, SIGTERM);
            signalled = 1;
            printf("%sstopping: waiting for %d running session(s) to checkpoint\n", R->who, R->nkids);
            fflush(stdout);
        }
    }
    free(R->kids);
    R->kids = NULL;
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGTERM, &old_term, NULL);
}

/* ------------------------------------------------------------------ summary */

static void read_run_row(const Plan *p, int r, SweepRun *row) {
    memset(row, 0, sizeof *row);
    row->index = r;
    row->config = r % p->nconfigs;
    row->seed = (uint64_t)(r / p->nconfigs + 1);
    run_name(p, r, row->name, sizeof row->name);
    row->final_acc = row->best_acc = row->rho_nominal = row->rho_realized = row->seconds = NAN;
    char dir[DIR_N], msg[2048];
    run_dir(p, r, dir, sizeof dir);
    SessionInfo info;
    const RunState st = run_state(p, r, dir, &info, msg, sizeof msg);
    if (st == RS_NEW) { snprintf(row->status, sizeof row->status, "missing"); return; }
    if (st == RS_BROKEN) { snprintf(row->status, sizeof row->status, "unreadable"); return; }
    if (st == RS_MISMATCH) { snprintf(row->status, sizeof row->status, "mismatch"); return; }
    snprintf(row->status, sizeof row->status, "%s", info.status[0] ? info.status : "unreadable");
    row->final_acc = info.last_test_acc;
    row->best_acc = info.best_test_acc;
    row->best_epoch = info.best_epoch;
    row->last_epoch = info.last_epoch;
    long esteps = 0;
    if (sweep_h5_read_run(dir, &row->rho_nominal, &row->rho_realized, &row->seconds, &esteps) != ML_OK)
        fprintf(stderr, "moelab sweep: %s: %s\n", dir, ml_last_error());
    row->steps = esteps > info.last_step ? esteps : info.last_step;
}

static void summary_build(const Plan *p, SweepRun *rows, const char *args, SweepSummary *s) {
    memset(s, 0, sizeof *s);
    s->args = (char *)args;
    s->seeds = p->seeds;
    s->ci_level = 0.95;
    s->naxes = p->naxes;
    s->axes = calloc((size_t)p->naxes + 1, sizeof(char *));
    for (int a = 0; a < p->naxes; a++) s->axes[a] = (char *)p->axes[a].key;
    s->nconfigs = p->nconfigs;
    s->values = calloc((size_t)p->nconfigs * (size_t)p->naxes + 1, sizeof(char *));
    for (int c = 0; c < p->nconfigs; c++)
        for (int a = 0; a < p->naxes; a++) s->values[c * p->naxes + a] = p->axes[a].vals[p->vidx[c * p->naxes + a]];
    s->configs = calloc((size_t)p->nconfigs + 1, sizeof(SweepConfig));
    s->nruns = p->nruns;
    s->runs = rows;
    double *fin = calloc((size_t)p->nconfigs * (size_t)p->seeds + 1, sizeof(double));
    double *best = calloc((size_t)p->seeds + 1, sizeof(double));
    for (int c = 0; c < p->nconfigs; c++) {
        SweepConfig *k = &s->configs[c];
        snprintf(k->label, sizeof k->label, "%s", config_label(p, c));
        snprintf(k->head, sizeof k->head, "%s", p->head[c]);
        k->n_expected = p->seeds;
        k->baseline = p->baseline[c];
        k->rho_nominal = k->rho_realized = k->seconds = NAN;
        double rr = 0, sec = 0;
        int n = 0;
        for (int sd = 0; sd < p->seeds; sd++) {
            const SweepRun *row = &rows[sd * p->nconfigs + c];
            if (isnan(k->rho_nominal) && !isnan(row->rho_nominal)) k->rho_nominal = row->rho_nominal;
            if (strcmp(row->status, "finished") || isnan(row->final_acc)) continue;
            fin[c * p->seeds + n] = row->final_acc;
            best[n] = row->best_acc;
            rr += row->rho_realized;
            sec += row->seconds;
            n++;
        }
        k->n = n;
        k->final_mean = stats_mean(fin + c * p->seeds, n);
        k->final_sd = stats_sd(fin + c * p->seeds, n);
        k->best_mean = stats_mean(best, n);
        k->best_sd = stats_sd(best, n);
        if (n) { k->rho_realized = rr / n; k->seconds = sec / n; }
    }
    for (int c = 0; c < p->nconfigs; c++) {
        SweepConfig *k = &s->configs[c];
        k->gap = k->gap_lo = k->gap_hi = k->gap_df = k->cohen_d = k->hedges_g = NAN;
        const int b = k->baseline;
        if (b < 0 || k->n < 1 || s->configs[b].n < 1) continue;
        StatsGap g;
        stats_gap(fin + c * p->seeds, k->n, fin + b * p->seeds, s->configs[b].n, s->ci_level, &g);
        k->gap = g.diff;
        k->gap_lo = g.lo;
        k->gap_hi = g.hi;
        k->gap_df = g.df;
        k->cohen_d = g.d;
        k->hedges_g = g.g;
    }
    free(fin);
    free(best);
}

static void summary_release(SweepSummary *s) {
    free(s->axes);
    free(s->values);
    free(s->configs);
    memset(s, 0, sizeof *s);
}

static int utf8_locale(void) {
    const char *v = getenv("LC_ALL");
    if (!v || !*v) v = getenv("LC_CTYPE");
    if (!v || !*v) v = getenv("LANG");
    return v && (strstr(v, "UTF-8") || strstr(v, "utf8") || strstr(v, "UTF8") || strstr(v, "utf-8"));
}

static void fmt_ms(char *buf, size_t n, double m, double sd, const char *pm) {
    if (isnan(m)) snprintf(buf, n, "-");
    else if (isnan(sd)) snprintf(buf, n, "%.2f", 100 * m);
    else snprintf(buf, n, "%.2f %s %.2f", 100 * m, pm, 100 * sd);
}

static void fmt_num(char *buf, size_t n, const char *fmt, double v) {
    if (isnan(v)) snprintf(buf, n, "-");
    else snprintf(buf, n, fmt, v);
}

static void summary_print(const SweepSummary *s, const char *note) {
    const char *pm = utf8_locale() ? "\xc2\xb1" : "+-";
    int w = 6;
    for (int c = 0; c < s->nconfigs; c++) {
        const int l = (int)strlen(s->configs[c].label);
        if (l > w) w = l;
    }
    printf("\n%-*s %5s  %-15s  %-15s  %7s  %8s  %8s  %-18s  %6s  %6s\n", w, "config", "n", "final acc (%)",
           "best acc (%)", "rho nom", "rho real", "gap (pp)", "95% CI (pp)", "d", "g");
    for (int c = 0; c < s->nconfigs; c++) {
        const SweepConfig *k = &s->configs[c];
        char f[40], b[40], rn[16], rr[16], gap[24], ci[48], d[16], g[16], nn[16];
        fmt_ms(f, sizeof f, k->final_mean, k->final_sd, pm);
        fmt_ms(b, sizeof b, k->best_mean, k->best_sd, pm);
        fmt_num(rn, sizeof rn, "%.3f", k->rho_nominal);
        fmt_num(rr, sizeof rr, "%.3f", k->rho_realized);
        if (k->baseline < 0) snprintf(gap, sizeof gap, "%s", "");
        else fmt_num(gap, sizeof gap, "%+.2f", 100 * k->gap);
        if (k->baseline < 0) ci[0] = 0;
        else if (isnan(k->gap_lo)) snprintf(ci, sizeof ci, "-");
        else snprintf(ci, sizeof ci, "[%+.2f, %+.2f]", 100 * k->gap_lo, 100 * k->gap_hi);
        if (k->baseline < 0) d[0] = g[0] = 0;
        else {
            fmt_num(d, sizeof d, "%+.2f", k->cohen_d);
            fmt_num(g, sizeof g, "%+.2f", k->hedges_g);
        }
        if (k->n == k->n_expected) snprintf(nn, sizeof nn, "%d", k->n);
        else snprintf(nn, sizeof nn, "%d/%d", k->n, k->n_expected);
        /* "±" is two bytes in UTF-8 and one column on screen */
        const int fpad = 15 + (strstr(f, "\xc2\xb1") ? 1 : 0), bpad = 15 + (strstr(b, "\xc2\xb1") ? 1 : 0);
        char line[1024];
        snprintf(line, sizeof line, "%-*s %5s  %-*s  %-*s  %7s  %8s  %8s  %-18s  %6s  %6s", w, k->label, nn, fpad, f, bpad, b,
                 rn, rr, gap, ci, d, g);
        for (size_t l = strlen(line); l > 0 && line[l - 1] == ' ';) line[--l] = 0;
        puts(line);
    }
    int gaps = 0;
    for (int c = 0; c < s->nconfigs; c++) gaps += s->configs[c].baseline >= 0;
    if (gaps)
        printf("gap: mean final test accuracy minus that of the dense configuration with the same other values;\n"
               "95%% CI: Welch; d: Cohen's d (pooled sd); g: Hedges' g. rho real: routed FLOPs actually spent.\n");
    if (note) printf("note: %s\n", note);
}

static void csv_field(FILE *f, const char *s) {
    if (strpbrk(s, ",\"\n\r")) {
        fputc('"', f);
        for (; *s; s++) {
            if (*s == '"') fputc('"', f);
            fputc(*s, f);
        }
        fputc('"', f);
    } else {
        fputs(s, f);
    }
}

static void csv_num(FILE *f, double v) {
    if (isnan(v)) fputs(",", f);
    else fprintf(f, ",%.10g", v);
}

static int summary_write_csv(const SweepSummary *s, const char *dir) {
    char path[DIR_N], tmp[DIR_N + 32];
    /* summary.csv */
    snprintf(path, sizeof path, "%s/summary.csv", dir);
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    FILE *f = fopen(tmp, "w");
    if (!f) { fprintf(stderr, "moelab sweep: %s: %s\n", tmp, strerror(errno)); return -1; }
    fputs("config", f);
    for (int a = 0; a < s->naxes; a++) { fputc(',', f); csv_field(f, s->axes[a]); }
    fputs(",head_kind,n,n_expected,final_mean,final_sd,best_mean,best_sd,rho_nominal,rho_realized,baseline,gap,gap_ci_lo,"
          "gap_ci_hi,gap_df,cohen_d,hedges_g,seconds\n", f);
    for (int c = 0; c < s->nconfigs; c++) {
        const SweepConfig *k = &s->configs[c];
        csv_field(f, k->label);
        for (int a = 0; a < s->naxes; a++) { fputc(',', f); csv_field(f, s->values[c * s->naxes + a]); }
        fprintf(f, ",%s,%d,%d", k->head, k->n, k->n_expected);
        csv_num(f, k->final_mean);
        csv_num(f, k->final_sd);
        csv_num(f, k->best_mean);
        csv_num(f, k->best_sd);
        csv_num(f, k->rho_nominal);
        csv_num(f, k->rho_realized);
        fputc(',', f);
        if (k->baseline >= 0) csv_field(f, s->configs[k->baseline].label);
        csv_num(f, k->gap);
        csv_num(f, k->gap_lo);
        csv_num(f, k->gap_hi);
        csv_num(f, k->gap_df);
        csv_num(f, k->cohen_d);
        csv_num(f, k->hedges_g);
        csv_num(f, k->seconds);
        fputc('\n', f);
    }
    if (fclose(f) != 0 || rename(tmp, path) != 0) {
        fprintf(stderr, "moelab sweep: %s: cannot write: %s\n", path, strerror(errno));
        unlink(tmp);
        return -1;
    }
    /* runs.csv */
    snprintf(path, sizeof path, "%s/runs.csv", dir);
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    if (!(f = fopen(tmp, "w"))) { fprintf(stderr, "moelab sweep: %s: %s\n", tmp, strerror(errno)); return -1; }
    fputs("index,name,config", f);
    for (int a = 0; a < s->naxes; a++) { fputc(',', f); csv_field(f, s->axes[a]); }
    fputs(",seed,status,final_acc,best_acc,best_epoch,last_epoch,steps,rho_nominal,rho_realized,seconds\n", f);
    for (int r = 0; r < s->nruns; r++) {
        const SweepRun *w = &s->runs[r];
        fprintf(f, "%d,", w->index);
        csv_field(f, w->name);
        fputc(',', f);
        csv_field(f, s->configs[w->config].label);
        for (int a = 0; a < s->naxes; a++) { fputc(',', f); csv_field(f, s->values[w->config * s->naxes + a]); }
        fprintf(f, ",%llu,%s", (unsigned long long)w->seed, w->status);
        csv_num(f, w->final_acc);
        csv_num(f, w->best_acc);
        fprintf(f, ",%d,%d,%ld", w->best_epoch, w->last_epoch, w->steps);
        csv_num(f, w->rho_nominal);
        csv_num(f, w->rho_realized);
        csv_num(f, w->seconds);
        fputc('\n', f);
    }
    if (fclose(f) != 0 || rename(tmp, path) != 0) {
        fprintf(stderr, "moelab sweep: %s: cannot write: %s\n", path, strerror(errno));
        unlink(tmp);
        return -1;
    }
    return 0;
}

/* Builds, prints and writes the summary from rows (all runs of the grid). Returns 0 when every
 * run finished. */
static int summary_emit(const Plan *p, SweepRun *rows, const char *note) {
    char args[8192];
    plan_args_line(p, args, sizeof args);
    SweepSummary s;
    summary_build(p, rows, args, &s);
    summary_print(&s, note);
    int rc = summary_write_csv(&s, p->out);
    char h5[DIR_N];
    snprintf(h5, sizeof h5, "%s/sweep.h5", p->out);
    if (sweep_h5_write(h5, &s) != ML_OK) {
        fprintf(stderr, "moelab sweep: %s\n", ml_last_error());
        rc = -1;
    }
    int done = 0, missing = 0, other = 0;
    for (int r = 0; r < p->nruns; r++) {
        if (!strcmp(rows[r].status, "finished")) done++;
        else if (!strcmp(rows[r].status, "missing")) missing++;
        else other++;
    }
    printf("summary   %d of %d runs finished%s", done, p->nruns, missing || other ? " (" : "");
    if (missing) printf("%d not started%s", missing, other ? ", " : "");
    if (other) printf("%d unfinished, failed or mismatched: see runs.csv", other);
    printf("%s; written to %s/summary.csv, runs.csv, sweep.h5\n", missing || other ? ")" : "", p->out);
    summary_release(&s);
    return rc == 0 && done == p->nruns ? 0 : 1;
}

/* ------------------------------------------------------------------ MPI */

typedef struct {
    int rank, size, local, active;
} Mpi;

static int env_int(const char *name, int dflt) {
    const char *v = getenv(name);
    return v && *v ? atoi(v) : dflt;
}

static int mpi_start(Mpi *m) {
    memset(m, 0, sizeof *m);
    m->size = 1;
    m->local = 1;
    const int launched = getenv("OMPI_COMM_WORLD_SIZE") || getenv("PMI_SIZE") || getenv("PMIX_RANK");
    if (!launched) return 0;
    const int size = env_int("OMPI_COMM_WORLD_SIZE", env_int("PMI_SIZE", 1));
#ifdef MOELAB_HAVE_MPI
    /* runs are child processes: no fork warnings, no CMA single-copy (blocked in containers) */
    setenv("OMPI_MCA_mpi_warn_on_fork", "0", 0);
    setenv("OMPI_MCA_btl_vader_single_copy_mechanism", "none", 0);
    if (MPI_Init(NULL, NULL) != MPI_SUCCESS) {
        fprintf(stderr, "moelab sweep: MPI_Init failed\n");
        return -1;
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &m->rank);
    MPI_Comm_size(MPI_COMM_WORLD, &m->size);
    m->local = env_int("OMPI_COMM_WORLD_LOCAL_SIZE", env_int("MPI_LOCALNRANKS", 1));
    m->active = 1;
    (void)size;
    return 0;
#else
    if (size > 1) {
        fprintf(stderr, "moelab sweep: started by an MPI launcher with %d ranks, but this moelab was built without MPI "
                        "(install libopenmpi-dev and rebuild, or use --shard I/N)\n", size);
        return -1;
    }
    return 0;
#endif
}

/* Waits for every rank without spinning a core, then gathers every rank's rows on rank 0 (rows
 * of runs a rank did not own are left as they were). Returns the worst exit code of all ranks
 * (on rank 0). */
static int mpi_finish(Mpi *m, SweepRun *rows, const int *owned, int nowned, int rc) {
#ifdef MOELAB_HAVE_MPI
    if (!m->active) return rc;
    MPI_Request req;
    MPI_Ibarrier(MPI_COMM_WORLD, &req);
    for (int done = 0; !done;) {
        MPI_Test(&req, &done, MPI_STATUS_IGNORE);
        if (!done) nanosleep(&(struct timespec){0, 50 * 1000 * 1000}, NULL);
    }
    int worst = rc;
    MPI_Reduce(&rc, &worst, 1, MPI_INT, MPI_MAX, 0, MPI_COMM_WORLD);
    if (rows) {
        SweepRun *mine = calloc((size_t)nowned + 1, sizeof(SweepRun));
        for (int i = 0; i < nowned; i++) mine[i] = rows[owned[i]];
        int cnt = nowned * (int)sizeof(SweepRun);
        int *counts = NULL, *displs = NULL;
        char *all = NULL;
        if (m->rank == 0) {
            counts = calloc((size_t)m->size, sizeof(int));
            displs = calloc((size_t)m->size, sizeof(int));
        }
        MPI_Gather(&cnt, 1, MPI_INT, counts, 1, MPI_INT, 0, MPI_COMM_WORLD);
        long total = 0;
        if (m->rank == 0) {
            for (int i = 0; i < m->size; i++) { displs[i] = (int)total; total += counts[i]; }
            all = malloc((size_t)total + 1);
        }
        MPI_Gatherv(mine, cnt, MPI_BYTE, all, counts, displs, MPI_BYTE, 0, MPI_COMM_WORLD);
        if (m->rank == 0) {
            const SweepRun *got = (const SweepRun *)all;
            for (long i = 0; i < total / (long)sizeof(SweepRun); i++) rows[got[i].index] = got[i];
        }
        free(all);
        free(counts);
        free(displs);
        free(mine);
    }
    MPI_Finalize();
    m->active = 0;
    return m->rank == 0 ? worst : rc;
#else
    (void)m;
    (void)rows;
    (void)owned;
    (void)nowned;
    return rc;
#endif
}

/* ------------------------------------------------------------------ the command */

static const Preset *find_preset(const char *name) {
    for (int i = 0; i < N_PRESETS; i++)
        if (!strcmp(presets[i].name, name)) return &presets[i];
    return NULL;
}

/* Parses the command line (preset first, then the user's arguments). */
static int plan_from_argv(Plan *p, int argc, char **argv, const Preset **preset_out) {
    memset(p, 0, sizeof *p);
    p->last_leader = -1;
    p->seeds = 3;
    p->jobs = 1;
    p->shard_n = 1;
    const char *pname = NULL;
    int full = 0;
    for (int i = 1; i < argc; i++) {
        const char *v;
        int j = i;
        if (opt_value(argc, argv, &j, "--preset", &v) == 1) pname = v;
        if (!strcmp(argv[i], "--full")) full = 1;
        i = j;
    }
    const Preset *pr = NULL;
    if (pname) {
        if (!(pr = find_preset(pname))) {
            fprintf(stderr, "moelab sweep: --preset: '%s' is not hidden-size, topk-rho, softmoe or backbone\n", pname);
            return -1;
        }
        const char *const *pa = full ? pr->full : pr->quick;
        int n = 0;
        while (pa[n]) n++;
        char **av = calloc((size_t)n + 2, sizeof(char *));
        av[0] = "sweep";
        for (int i = 0; i < n; i++) av[i + 1] = (char *)pa[i];
        const int r = plan_args(p, n + 1, av, 1);
        free(av);
        if (r) return -1;
        p->nbase_preset = p->base.n;
        snprintf(p->preset, sizeof p->preset, "%s", pr->name);
        snprintf(p->out, sizeof p->out, "sweeps/%s%s", pr->name, full ? "-full" : "");
    } else if (full) {
        fprintf(stderr, "moelab sweep: --full goes with --preset\n");
        return -1;
    }
    p->last_leader = -1; /* a user's --with never pairs with a preset's axis */
    const int r = plan_args(p, argc, argv, 1);
    if (r) return r;
    *preset_out = pr;
    return 0;
}

static int do_collect(const char dir[PATH_N]) {
    char path[DIR_N];
    snprintf(path, sizeof path, "%s/sweep.args", dir);
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "moelab sweep: --collect %s: %s: %s (not a sweep folder?)\n", dir, path, strerror(errno));
        return 1;
    }
    char line[8192];
    if (!fgets(line, sizeof line, f)) line[0] = 0;
    fclose(f);
    line[strcspn(line, "\n")] = 0;
    char **av = NULL;
    const int ac = command_line_split(line, &av);
    if (ac < 0) { fprintf(stderr, "moelab sweep: %s: cannot parse '%s'\n", path, line); return 1; }
    StrList l = {0};
    sl_push(&l, "sweep");
    for (int i = 0; i < ac; i++) sl_push(&l, av[i]);
    argv_free(ac, av);
    Plan p;
    memset(&p, 0, sizeof p);
    p.last_leader = -1;
    p.seeds = 3;
    p.jobs = 1;
    p.shard_n = 1;
    int rc = plan_args(&p, l.n, l.v, 1) || p.collect[0] || p.out[0] ? -1 : 0;
    sl_free(&l);
    if (rc) { fprintf(stderr, "moelab sweep: %s: not a sweep argument list: %s\n", path, line); plan_free(&p); return 1; }
    snprintf(p.out, sizeof p.out, "%s", dir);
    if (plan_build(&p)) { plan_free(&p); return 1; }
    printf("collect   %s: %d configurations x %d seeds\n", dir, p.nconfigs, p.seeds);
    SweepRun *rows = calloc((size_t)p.nruns + 1, sizeof(SweepRun));
    for (int r = 0; r < p.nruns; r++) read_run_row(&p, r, &rows[r]);
    rc = summary_emit(&p, rows, NULL);
    free(rows);
    plan_free(&p);
    return rc;
}

/* --show: the table of a sweep.h5, without the sessions. */
static int do_show(const char *arg) {
    char path[DIR_N];
    struct stat sb;
    if (stat(arg, &sb) == 0 && S_ISDIR(sb.st_mode)) snprintf(path, sizeof path, "%s/sweep.h5", arg);
    else snprintf(path, sizeof path, "%s", arg);
    SweepSummary s;
    if (sweep_h5_read(path, &s) != ML_OK) {
        fprintf(stderr, "moelab sweep: %s\n", ml_last_error());
        return 1;
    }
    int done = 0;
    for (int r = 0; r < s.nruns; r++) done += !strcmp(s.runs[r].status, "finished");
    printf("sweep     %s: %d configurations x %d seeds, %d of %d runs finished\n", path, s.nconfigs, s.seeds, done, s.nruns);
    printf("args      %s\n", s.args);
    summary_print(&s, NULL);
    sweep_summary_free(&s);
    return 0;
}

int cmd_sweep(int argc, char **argv) {
    Plan p;
    const Preset *pr = NULL;
    int r = plan_from_argv(&p, argc, argv, &pr);
    if (r) { plan_free(&p); return r > 0 ? 0 : 2; }
    if (p.show[0]) {
        if (p.base.n || p.naxes || p.collect[0] || pr) {
            fprintf(stderr, "moelab sweep: --show takes no other options\n");
            plan_free(&p);
            return 2;
        }
        char show[PATH_N];
        snprintf(show, sizeof show, "%s", p.show);
        plan_free(&p);
        return do_show(show);
    }
    if (p.collect[0]) {
        if (p.base.n || p.naxes || p.dry_run || p.shard_n > 1 || pr) {
            fprintf(stderr, "moelab sweep: --collect DIR takes no other options\n");
            plan_free(&p);
            return 2;
        }
        char dir[PATH_N];
        snprintf(dir, sizeof dir, "%s", p.collect);
        plan_free(&p);
        return do_collect(dir);
    }
    if (!p.out[0]) {
        fprintf(stderr, "moelab sweep: --out DIR is required (see moelab sweep --help)\n");
        plan_free(&p);
        return 2;
    }
    if (plan_build(&p)) { plan_free(&p); return 2; }

    Mpi mpi;
    if (mpi_start(&mpi)) { plan_free(&p); return 1; }
    char who[32] = "";
    if (mpi.size > 1) snprintf(who, sizeof who, "rank %d: ", mpi.rank);

    /* this process's runs */
    int *sel = calloc((size_t)p.nruns + 1, sizeof(int)), nsel = 0;
    for (int i = 0; i < p.nruns; i++)
        if (i % p.shard_n == p.shard_i && (i / p.shard_n) % mpi.size == mpi.rank) sel[nsel++] = i;
    const int cores = cores_available(mpi.local);
    int threads = cores / p.jobs;
    if (threads < 1) threads = 1;

    char args[8192];
    if (plan_args_line(&p, args, sizeof args)) { fprintf(stderr, "moelab sweep: out of memory\n"); free(sel); plan_free(&p); return 1; }
    if (mpi.rank == 0) {
        printf("sweep     %s%s%s%d configuration%s x %d seed%s = %d runs in %s", pr ? "preset " : "", pr ? pr->name : "",
               pr ? (p.full ? " (full): " : ": ") : "", p.nconfigs, p.nconfigs == 1 ? "" : "s", p.seeds,
               p.seeds == 1 ? "" : "s", p.nruns, p.out);
        if (p.shard_n > 1) printf(", shard %d/%d (%d runs)", p.shard_i, p.shard_n, nsel);
        if (mpi.size > 1) printf(", %d MPI ranks", mpi.size);
        if (p.user_threads) printf("; %d job%s at once, --threads as given\n", p.jobs, p.jobs == 1 ? "" : "s");
        else printf("; %d job%s at once x %d thread%s\n", p.jobs, p.jobs == 1 ? "" : "s", threads, threads == 1 ? "" : "s");
        fflush(stdout);
    }
    if (p.dry_run) {
        if (mpi.rank == 0) printf("grid      %s\n", args);
        for (int i = 0; i < nsel; i++) {
            const int run = sel[i];
            char dir[DIR_N], msg[2048];
            run_dir(&p, run, dir, sizeof dir);
            SessionInfo info;
            const RunState st = run_state(&p, run, dir, &info, msg, sizeof msg);
            StrList t = {0};
            run_child_args(&p, run, threads, &t);
            char line[4096];
            command_line_join(line, sizeof line, t.n, t.v);
            sl_free(&t);
            printf("%s[%d/%d] %-10s moelab %s\n", who, run + 1, p.nruns, state_names[st], line);
        }
        free(sel);
        mpi_finish(&mpi, NULL, NULL, 0, 0);
        plan_free(&p);
        return 0;
    }
    /* a folder that holds another sweep's sessions is refused before anything is written */
    for (int i = 0; i < nsel; i++) {
        char dir[DIR_N], msg[2048];
        SessionInfo info;
        run_dir(&p, sel[i], dir, sizeof dir);
        if (run_state(&p, sel[i], dir, &info, msg, sizeof msg) == RS_MISMATCH) {
            fprintf(stderr, "moelab sweep: %s holds another configuration: %s (use another --out)\n", dir, msg);
            free(sel);
            mpi_finish(&mpi, NULL, NULL, 0, 1);
            plan_free(&p);
            return 1;
        }
    }
    char logs[DIR_N];
    snprintf(logs, sizeof logs, "%s/logs", p.out);
    if (mkdirs(logs)) { free(sel); mpi_finish(&mpi, NULL, NULL, 0, 1); plan_free(&p); return 1; }
    char manifest[DIR_N], text[8200];
    snprintf(manifest, sizeof manifest, "%s/sweep.args", p.out);
    snprintf(text, sizeof text, "%s\n", args);
    if (write_atomic(manifest, text)) { free(sel); mpi_finish(&mpi, NULL, NULL, 0, 1); plan_free(&p); return 1; }

    Runner R;
    memset(&R, 0, sizeof R);
    R.p = &p;
    R.threads = threads;
    R.who = who;
    self_exe(R.exe, sizeof R.exe, argv[0]);
    g_sweep_stop = 0;
    runner_go(&R, sel, nsel);
    const Tally *t = &R.tally;
    printf("%s%d run%s: %d run, %d skipped (finished before)%s", who, nsel, nsel == 1 ? "" : "s", t->ran, t->skipped,
           t->failed ? ", " : "");
    if (t->failed) printf("%d failed", t->failed);
    if (t->interrupted) printf(", %d interrupted", t->interrupted);
    if (t->busy) printf(", %d busy elsewhere", t->busy);
    if (nsel - t->ran - t->skipped - t->failed - t->interrupted - t->busy > 0)
        printf(", %d not started", nsel - t->ran - t->skipped - t->failed - t->interrupted - t->busy);
    printf("\n");
    fflush(stdout);
    int rc = (t->failed || t->interrupted || t->busy || g_sweep_stop || t->ran + t->skipped < nsel) ? 1 : 0;

    if (p.shard_n > 1) {
        if (mpi.rank == 0)
            printf("shard %d/%d done: when every shard has finished, `moelab sweep --collect %s` writes the summary\n",
                   p.shard_i, p.shard_n, p.out);
        free(sel);
        rc = mpi_finish(&mpi, NULL, NULL, 0, rc);
        plan_free(&p);
        return rc;
    }
    SweepRun *rows = calloc((size_t)p.nruns + 1, sizeof(SweepRun));
    if (mpi.active) {
        for (int i = 0; i < nsel; i++) read_run_row(&p, sel[i], &rows[sel[i]]);
        rc = mpi_finish(&mpi, rows, sel, nsel, rc);
    } else {
        for (int i = 0; i < p.nruns; i++) read_run_row(&p, i, &rows[i]);
    }
    if (mpi.rank == 0) {
        const int src = summary_emit(&p, rows, pr ? pr->note : NULL);
        if (src && !rc) rc = 1;
        if (g_sweep_stop) printf("interrupted: run the same command again to resume the sweep\n");
    }
    free(rows);
    free(sel);
    plan_free(&p);
    return rc;
}
