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
 * separately; DIR/sweep.args records the grid (base options, axes, seeds).
 *
 * The code: this file (help, argument parsing, the command), sweep_presets.c, sweep_plan.c (the
 * grid), sweep_run.c (run states, child processes, MPI) and sweep_summary.c (statistics, table,
 * CSV and sweep.h5); sweep_internal.h declares what they share. */
#define _GNU_SOURCE

#include "app/sweep/sweep.h"
#include "app/sweep/sweep_internal.h"
#include "app/cli/app.h"
#include "app/run/runsession.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static void sweep_help(void) {
#ifdef MOELAB_HAVE_MPI
    const char *mpi = "this moelab is built with MPI";
#else
    const char *mpi = "this moelab is built without MPI: use --shard";
#endif
    char names[256];
    sweep_preset_names(names, sizeof names, "|");
    printf("usage: moelab sweep [train options] --vary KEY=V1,V2,... [--with KEY=W1,W2,...] --seeds N --out DIR\n"
           "                    [--jobs N] [--shard I/N] [--dry-run]\n"
           "       moelab sweep --preset %s [--budget quick|medium|paper]\n"
           "                    [train options] [--out DIR]\n"
           "       moelab sweep --collect DIR\n"
           "       moelab sweep --show DIR|FILE.h5\n"
           "       moelab sweep --agree A B\n\n"
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
           "  --seed-from S        seeds S..S+N-1 instead (a rerun of a preset with other seeds)\n"
           "  --out DIR            sweep folder (presets: sweeps/<preset>[-medium|-full])\n"
           "  --jobs N             N runs at once, each with (cores / N) threads unless --threads is given (1)\n"
           "  --shard I/N          only the runs whose index %% N == I (Slurm arrays: I = $SLURM_ARRAY_TASK_ID);\n"
           "                       merge with --collect when all shards are done\n"
           "  --collect DIR        rebuild the summary of DIR from the sessions present\n"
           "  --show DIR|FILE.h5   print the table stored in DIR/sweep.h5\n"
           "  --agree A B          compare two sweeps of one grid run with different seeds (a preset and its\n"
           "                       --seed-from rerun): verdicts, gap signs, the order by gap; exit status 0\n"
           "                       when they agree, 1 when they do not, 2 on an error\n"
           "  --preset NAME        the paper's experiments, each followed by a verdict on its claim;\n"
           "                       --budget quick (default: Fashion-MNIST, 2 cores, under an hour each),\n"
           "                       --budget medium (w 1, 10-20 epochs, 5 seeds: a night on 2 cores) or\n"
           "                       --budget paper (= --full: 5 seeds, 30 epochs, w 1); medium and paper\n"
           "                       first print the estimated wall time (as --estimate); paper then asks\n"
           "                       to start on a terminal (--yes: do not ask)\n",
           names);
    sweep_preset_help_lines(stdout, 25);
    printf("  --dry-run            print the runs and their state, run nothing\n"
           "  --estimate           time a few training steps of each configuration still to run, print the\n"
           "                       estimated wall time at --jobs, run nothing\n"
           "Under mpirun (Open MPI) each rank runs the runs with index %% ranks == rank and rank 0 writes\n"
           "the summary (%s). Train options (moelab train --help) set the base\n"
           "configuration; --seed, --session and --resume are the sweep's business.\n",
           mpi);
}

/* ------------------------------------------------------------------ argument parsing */

/* "--name VALUE" or "--name=VALUE" at argv[*i]: 1 with *val set (and *i advanced past the value),
 * 0 if argv[*i] is another option, -1 when the value is missing. */
static int opt_value(int argc, char **argv, int *i, const char *name, const char **val) {
    const char *a = argv[*i];
    const size_t n = strlen(name);
    if (strncmp(a, name, n)) return 0;
    if (a[n] == '=') {
        *val = a + n + 1;
        return 1;
    }
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

static const char *const reserved_keys[] = {"seed",    "seeds",   "session",  "resume", "no-session",
                                            "threads", "dry-run", "headless", "help",   "vary",
                                            "with",    "out",     NULL};

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
    if (kl >= sizeof ax.key) {
        fprintf(stderr, "moelab sweep: %s: option name too long\n", opt);
        return -1;
    }
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
        if (l == 0) {
            fprintf(stderr, "moelab sweep: %s %s: empty value\n", opt, spec);
            axis_clear(&ax);
            return -1;
        }
        if (ax.nvals >= MAX_VALUES) {
            fprintf(stderr, "moelab sweep: %s: more than %d values\n", opt, MAX_VALUES);
            axis_clear(&ax);
            return -1;
        }
        char *v = strndup(s, l);
        if (!v) {
            axis_clear(&ax);
            return -1;
        }
        /* a value may repeat (schedule=linear,linear --with tau1=0.1,0.3; backbone=dw,dw,std with a
         * hidden axis): configurations that come out equal are refused by their folder names */
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
        } else if ((r = opt_value(argc, argv, &i, "--seed-from", &v))) {
            if (r < 0 || parse_count("--seed-from", v, 1, 1000000, &p->seed0)) return -1;
        } else if ((r = opt_value(argc, argv, &i, "--jobs", &v))) {
            if (r < 0 || parse_count("--jobs", v, 1, 1024, &p->jobs)) return -1;
        } else if ((r = opt_value(argc, argv, &i, "--out", &v))) {
            if (r < 0) return -1;
            if (!*v || strlen(v) > OUT_MAX) {
                fprintf(stderr, "moelab sweep: --out: bad folder name '%s'\n", v);
                return -1;
            }
            snprintf(p->out, sizeof p->out, "%s", v);
        } else if ((r = opt_value(argc, argv, &i, "--collect", &v))) {
            if (r < 0) return -1;
            if (!*v || strlen(v) > OUT_MAX) {
                fprintf(stderr, "moelab sweep: --collect: bad folder name '%s'\n", v);
                return -1;
            }
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
        } else if ((r = opt_value(argc, argv, &i, "--budget", &v))) {
            if (r < 0) return -1; /* read by the caller */
        } else if (!strcmp(argv[i], "--yes")) {
            p->yes = 1;
        } else if (!strcmp(argv[i], "--estimate")) {
            p->estimate = 1;
        } else if (!strcmp(argv[i], "--dry-run")) {
            p->dry_run = 1;
        } else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            sweep_help();
            return 1;
        } else if (sweep_sl_push(&p->base, argv[i])) {
            fprintf(stderr, "moelab sweep: out of memory\n");
            return -1;
        }
    }
    return 0;
}

/* ------------------------------------------------------------------ the command */

/* Parses the command line (preset first, then the user's arguments). */
static int plan_from_argv(Plan *p, int argc, char **argv, const Preset **preset_out) {
    memset(p, 0, sizeof *p);
    p->last_leader = -1;
    p->seeds = 3;
    p->seed0 = 1;
    p->jobs = 1;
    p->shard_n = 1;
    const char *pname = NULL;
    int full = 0, medium = 0;
    for (int i = 1; i < argc; i++) {
        const char *v;
        int j = i;
        if (opt_value(argc, argv, &j, "--preset", &v) == 1) pname = v;
        if (!strcmp(argv[i], "--full")) full = 1;
        if (opt_value(argc, argv, &j, "--budget", &v) == 1) {
            if (!strcmp(v, "paper")) full = 1, medium = 0;
            else if (!strcmp(v, "medium")) medium = 1, full = 0;
            else if (!strcmp(v, "quick")) full = medium = 0;
            else {
                fprintf(stderr, "moelab sweep: --budget: '%s' is not quick, medium or paper\n", v);
                return -1;
            }
        }
        i = j;
    }
    const Preset *pr = NULL;
    if (pname) {
        if (!(pr = sweep_find_preset(pname))) {
            fprintf(stderr,
                    "moelab sweep: --preset: '%s' is not hidden-size, topk-rho, imagenet-topk, softmoe, temperature or "
                    "backbone\n",
                    pname);
            return -1;
        }
        const char *const *pa = full ? pr->full : medium && pr->medium ? pr->medium : pr->quick;
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
        snprintf(p->out, sizeof p->out, "sweeps/%s%s", pr->name, full ? "-full" : medium ? "-medium" : "");
    } else if (full || medium) {
        fprintf(stderr, "moelab sweep: --full / --budget go with --preset\n");
        return -1;
    }
    p->last_leader = -1; /* a user's --with never pairs with a preset's axis */
    const int r = plan_args(p, argc, argv, 1);
    if (r) return r;
    if (full) p->full = 1;
    if (medium) p->medium = 1;
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
    if (ac < 0) {
        fprintf(stderr, "moelab sweep: %s: cannot parse '%s'\n", path, line);
        return 1;
    }
    StrList l = {0};
    sweep_sl_push(&l, "sweep");
    for (int i = 0; i < ac; i++) sweep_sl_push(&l, av[i]);
    argv_free(ac, av);
    Plan p;
    memset(&p, 0, sizeof p);
    p.last_leader = -1;
    p.seeds = 3;
    p.seed0 = 1;
    p.jobs = 1;
    p.shard_n = 1;
    int rc = plan_args(&p, l.n, l.v, 1) || p.collect[0] || p.out[0] ? -1 : 0;
    sweep_sl_free(&l);
    if (rc) {
        fprintf(stderr, "moelab sweep: %s: not a sweep argument list: %s\n", path, line);
        sweep_plan_free(&p);
        return 1;
    }
    snprintf(p.out, sizeof p.out, "%s", dir);
    if (sweep_plan_build(&p)) {
        sweep_plan_free(&p);
        return 1;
    }
    printf("collect   %s: %d configurations x %d seeds\n", dir, p.nconfigs, p.seeds);
    SweepRun *rows = calloc((size_t)p.nruns + 1, sizeof(SweepRun));
    for (int r = 0; r < p.nruns; r++) sweep_read_run_row(&p, r, &rows[r]);
    rc = sweep_summary_emit(&p, rows, NULL);
    free(rows);
    sweep_plan_free(&p);
    return rc;
}

/* DIR (its sweep.h5) or FILE.h5 */
static int read_summary(const char *arg, char path[DIR_N], SweepSummary *s) {
    struct stat sb;
    if (stat(arg, &sb) == 0 && S_ISDIR(sb.st_mode)) snprintf(path, DIR_N, "%s/sweep.h5", arg);
    else snprintf(path, DIR_N, "%s", arg);
    if (sweep_h5_read(path, s) != ML_OK) {
        fprintf(stderr, "moelab sweep: %s\n", ml_last_error());
        return -1;
    }
    if (!s->checksums)
        fprintf(stderr, "moelab sweep: note: %s has no checksums (written by an older moelab): its values are not "
                        "verified; `moelab sweep --collect` rewrites it with them\n", path);
    return 0;
}

/* --agree A B: two reruns of one grid (sweep_agree.c); exit 0 agree, 1 disagree, 2 error */
static int do_agree(const char *a, const char *b) {
    char pa[DIR_N], pb[DIR_N];
    SweepSummary A, B;
    if (read_summary(a, pa, &A)) return 2;
    if (read_summary(b, pb, &B)) {
        sweep_summary_free(&A);
        return 2;
    }
    Agreement g;
    const int r = sweep_agree(&A, &B, a, b, stdout, &g);
    sweep_summary_free(&A);
    sweep_summary_free(&B);
    return r ? 2 : g.agree ? 0 : 1;
}

/* --show: the table of a sweep.h5, without the sessions. */
static int do_show(const char *arg) {
    char path[DIR_N];
    SweepSummary s;
    if (read_summary(arg, path, &s)) return 1;
    int done = 0;
    for (int r = 0; r < s.nruns; r++) done += !strcmp(s.runs[r].status, "finished");
    printf("sweep     %s: %d configurations x %d seeds, %d of %d runs finished\n", path, s.nconfigs, s.seeds, done,
           s.nruns);
    printf("args      %s\n", s.args);
    sweep_summary_print(&s, NULL);
    verdict_print(verdict_infer(&s), &s, stdout);
    sweep_summary_free(&s);
    return 0;
}

int cmd_sweep(int argc, char **argv) {
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--agree")) {
            if (argc != 4 || i != 1) {
                fprintf(stderr, "moelab sweep: --agree takes two sweep folders (or sweep.h5 files) and nothing else\n");
                return 2;
            }
            return do_agree(argv[2], argv[3]);
        }
    Plan p;
    const Preset *pr = NULL;
    int r = plan_from_argv(&p, argc, argv, &pr);
    if (r) {
        sweep_plan_free(&p);
        return r > 0 ? 0 : 2;
    }
    if (p.show[0]) {
        if (p.base.n || p.naxes || p.collect[0] || pr) {
            fprintf(stderr, "moelab sweep: --show takes no other options\n");
            sweep_plan_free(&p);
            return 2;
        }
        char show[PATH_N];
        snprintf(show, sizeof show, "%s", p.show);
        sweep_plan_free(&p);
        return do_show(show);
    }
    if (p.collect[0]) {
        if (p.base.n || p.naxes || p.dry_run || p.shard_n > 1 || pr) {
            fprintf(stderr, "moelab sweep: --collect DIR takes no other options\n");
            sweep_plan_free(&p);
            return 2;
        }
        char dir[PATH_N];
        snprintf(dir, sizeof dir, "%s", p.collect);
        sweep_plan_free(&p);
        return do_collect(dir);
    }
    if (!p.out[0]) {
        fprintf(stderr, "moelab sweep: --out DIR is required (see moelab sweep --help)\n");
        sweep_plan_free(&p);
        return 2;
    }
    if (sweep_plan_build(&p)) {
        sweep_plan_free(&p);
        return 2;
    }

    Mpi mpi;
    if (sweep_mpi_start(&mpi)) {
        sweep_plan_free(&p);
        return 1;
    }
    char who[32] = "";
    if (mpi.size > 1) snprintf(who, sizeof who, "rank %d: ", mpi.rank);

    /* this process's runs */
    int *sel = calloc((size_t)p.nruns + 1, sizeof(int)), nsel = 0;
    /* only the runs of distinct models: a configuration that trains the same model as an earlier
     * one (e.g. dense under a routing axis) reuses its runs */
    int ntrain = 0;
    for (int i = 0; i < p.nruns; i++) {
        if (sweep_run_canonical(&p, i) != i) continue;
        if (ntrain++ % p.shard_n == p.shard_i && ((ntrain - 1) / p.shard_n) % mpi.size == mpi.rank) sel[nsel++] = i;
    }
    const int cores = sweep_cores_available(mpi.local);
    int threads = cores / p.jobs;
    if (threads < 1) threads = 1;

    char args[8192];
    if (sweep_plan_args_line(&p, args, sizeof args)) {
        fprintf(stderr, "moelab sweep: out of memory\n");
        free(sel);
        sweep_plan_free(&p);
        return 1;
    }
    if (mpi.rank == 0) {
        printf("sweep     %s%s%s%d configuration%s x %d seed%s = %d runs in %s", pr ? "preset " : "",
               pr ? pr->name : "", pr ? (p.full ? " (full): " : p.medium ? " (medium): " : ": ") : "", p.nconfigs, p.nconfigs == 1 ? "" : "s",
               p.seeds, p.seeds == 1 ? "" : "s", p.nruns, p.out);
        if (p.ndistinct < p.nconfigs)
            printf(" (%d trained: %d configuration%s share%s another's model)", ntrain, p.nconfigs - p.ndistinct,
                   p.nconfigs - p.ndistinct == 1 ? "" : "s", p.nconfigs - p.ndistinct == 1 ? "s" : "");
        if (p.shard_n > 1) printf(", shard %d/%d (%d runs)", p.shard_i, p.shard_n, nsel);
        if (mpi.size > 1) printf(", %d MPI ranks", mpi.size);
        if (p.user_threads) printf("; %d job%s at once, --threads as given\n", p.jobs, p.jobs == 1 ? "" : "s");
        else
            printf("; %d job%s at once x %d thread%s\n", p.jobs, p.jobs == 1 ? "" : "s", threads,
                   threads == 1 ? "" : "s");
        fflush(stdout);
    }
    /* --budget paper / medium (or --estimate): the estimated wall time from a short calibration;
     * paper asks first; --estimate stops there (the calibration writes nothing) */
    if ((((p.full || p.medium) && pr && !p.dry_run) || p.estimate) && mpi.size == 1) {
        if (sweep_calibrate(&p, sel, nsel, p.user_threads ? 0 : threads) < 0) {
            free(sel);
            sweep_plan_free(&p);
            return 1;
        }
        if (p.estimate) {
            free(sel);
            sweep_plan_free(&p);
            return 0;
        }
        if (p.full && !p.yes && !sweep_confirm()) {
            printf("budget    not started\n");
            free(sel);
            sweep_plan_free(&p);
            return 0;
        }
    }
    if (p.dry_run) {
        if (mpi.rank == 0) printf("grid      %s\n", args);
        for (int i = 0; i < nsel; i++) {
            const int run = sel[i];
            char dir[DIR_N], msg[2048];
            sweep_run_dir(&p, run, dir, sizeof dir);
            SessionInfo info;
            const RunState st = sweep_run_state(&p, run, dir, &info, msg, sizeof msg, RUN_STATE_PROBE);
            StrList t = {0};
            sweep_run_child_args(&p, run, threads, &t);
            char line[4096];
            command_line_join(line, sizeof line, t.n, t.v);
            sweep_sl_free(&t);
            printf("%s[%d/%d] %-10s moelab %s\n", who, run + 1, p.nruns, sweep_state_names[st], line);
        }
        free(sel);
        sweep_mpi_finish(&mpi, NULL, NULL, 0, 0);
        sweep_plan_free(&p);
        return 0;
    }
    /* a folder that holds another sweep's sessions is refused before anything is written */
    for (int i = 0; i < nsel; i++) {
        char dir[DIR_N], msg[2048];
        SessionInfo info;
        sweep_run_dir(&p, sel[i], dir, sizeof dir);
        if (sweep_run_state(&p, sel[i], dir, &info, msg, sizeof msg, RUN_STATE_PROBE) == RS_MISMATCH) {
            fprintf(stderr, "moelab sweep: %s holds another configuration: %s (use another --out)\n", dir, msg);
            free(sel);
            sweep_mpi_finish(&mpi, NULL, NULL, 0, 1);
            sweep_plan_free(&p);
            return 1;
        }
    }
    /* --private: everything the sweep writes is owner-only, not only its runs' folders: a umask of
     * 077 for this process and its runs (sweep.h5, summary.csv, runs.csv, sweep.args, sweep.plan,
     * logs/NAME.log are born 0600, folders 0700), and the sweep folder and logs/ made 0700 even when
     * an earlier sweep created them */
    const int private_sweep = sweep_private(&p);
    if (private_sweep) {
        const mode_t um = umask(077);
        umask(um | 077);
    }
    char logs[DIR_N];
    snprintf(logs, sizeof logs, "%s/logs", p.out);
    int made = sweep_mkdirs(logs) == 0;
    if (made && private_sweep && (chmod(p.out, 0700) != 0 || chmod(logs, 0700) != 0)) {
        fprintf(stderr, "moelab sweep: %s: cannot make it private (chmod 700): %s\n", p.out, strerror(errno));
        made = 0;
    }
    if (!made) {
        free(sel);
        sweep_mpi_finish(&mpi, NULL, NULL, 0, 1);
        sweep_plan_free(&p);
        return 1;
    }
    char manifest[DIR_N], text[8200];
    snprintf(manifest, sizeof manifest, "%s/sweep.args", p.out);
    snprintf(text, sizeof text, "%s\n", args);
    char plan[DIR_N], ptext[96];
    snprintf(plan, sizeof plan, "%s/sweep.plan", p.out); /* for attach's ETA: the runs not started yet */
    snprintf(ptext, sizeof ptext, "trains %d\njobs %d\n", ntrain, p.jobs > 0 ? p.jobs * (mpi.size > 0 ? mpi.size : 1) : 1);
    if (sweep_write_atomic(manifest, text) || (mpi.rank == 0 && sweep_write_atomic(plan, ptext))) {
        free(sel);
        sweep_mpi_finish(&mpi, NULL, NULL, 0, 1);
        sweep_plan_free(&p);
        return 1;
    }

    Runner R;
    memset(&R, 0, sizeof R);
    R.p = &p;
    R.threads = threads;
    R.who = who;
    sweep_self_exe(R.exe, sizeof R.exe, argv[0]);
    g_sweep_stop = 0;
    sweep_runner_go(&R, sel, nsel);
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
        rc = sweep_mpi_finish(&mpi, NULL, NULL, 0, rc);
        sweep_plan_free(&p);
        return rc;
    }
    SweepRun *rows = calloc((size_t)p.nruns + 1, sizeof(SweepRun));
    if (mpi.active) {
        for (int i = 0; i < nsel; i++) sweep_read_run_row(&p, sel[i], &rows[sel[i]]);
        rc = sweep_mpi_finish(&mpi, rows, sel, nsel, rc);
    } else {
        for (int i = 0; i < p.nruns; i++) sweep_read_run_row(&p, i, &rows[i]);
    }
    if (mpi.rank == 0) {
        const int src = sweep_summary_emit(&p, rows, pr ? pr->note : NULL);
        if (src && !rc) rc = 1;
        if (g_sweep_stop) printf("interrupted: run the same command again to resume the sweep\n");
    }
    free(rows);
    free(sel);
    sweep_plan_free(&p);
    return rc;
}
