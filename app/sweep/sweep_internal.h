/* sweep_internal.h — what the files of `moelab sweep` share (not for use outside them):
 *   sweep.c          the command: help, argument parsing, --collect, --show, cmd_sweep
 *   sweep_presets.c  the paper's presets (--preset NAME [--full])
 *   sweep_plan.c     string lists, the plan and the grid: configurations, run names, run commands
 *   sweep_run.c      the runs' folders and states, running the runs as child processes, MPI ranks
 *   sweep_summary.c  the summary: per-configuration statistics, effect sizes against the dense
 *                    baseline, the printed table, summary.csv, runs.csv and sweep.h5
 * The overview (run grid, restart safety, the summary) is at the top of sweep.c. */
#ifndef ML_APP_SWEEP_INTERNAL_H
#define ML_APP_SWEEP_INTERNAL_H

#include <signal.h>
#include <stddef.h>
#include <sys/types.h>

#include "sessions/session.h"
#include "sessions/sweep_h5.h"
#include "app/sweep/sweep.h"
#include "app/sweep/sweep_verdict.h"

#define MAX_AXES 16
#define MAX_VALUES 256
#define MAX_CONFIGS 10000 /* runs in one sweep */
#define PATH_N 512        /* --out, --collect */
#define DIR_N 1024        /* paths under them */
#define OUT_MAX 200       /* longest --out: a run's folder must fit AppOptions.session */

/* ------------------------------------------------------------------ string lists */

typedef struct {
    int n, cap;
    char **v;
} StrList;

int sweep_sl_push(StrList *l, const char *s);
void sweep_sl_free(StrList *l);

/* ------------------------------------------------------------------ the plan */

typedef struct {
    char key[64];
    int nvals;
    char *vals[MAX_VALUES];
    int leader; /* -1: an axis of its own; else the axis whose value index it follows (--with) */
} Axis;

typedef struct {
    StrList base;     /* training options shared by every run */
    int nbase_preset; /* the first nbase_preset entries came from a preset */
    int naxes;
    Axis axes[MAX_AXES];
    int last_leader;
    int seeds;
    int seed0; /* --seed-from: the first seed (1); the runs use seeds seed0..seed0+seeds-1 */
    char out[PATH_N];
    int jobs;
    int shard_i, shard_n;
    char preset[32];
    int full;   /* --budget paper (--full) */
    int medium; /* --budget medium */
    int yes;      /* --yes: no confirmation question */
    int estimate; /* --estimate: print the calibrated wall time, run nothing */
    char collect[PATH_N];
    char show[PATH_N];
    int dry_run;
    /* derived by sweep_plan_build */
    int user_threads; /* --threads given: every run uses it */
    int nconfigs, nruns;
    int *vidx;                     /* (nconfigs * naxes) value index of axis a in config c */
    char (*label)[SWEEP_NAME_MAX]; /* (nconfigs) "k=v,k=v" ("" without axes) */
    char (*head)[24];              /* (nconfigs) what routes: head kind, "moe-backbone" (dense head after MoE layers) */
    int *baseline;                 /* (nconfigs) matching dense configuration or -1 */
    int *alias;                    /* (nconfigs) the first configuration that trains the same model
                                    * (itself if none): its runs stand for this one's */
    int ndistinct;                 /* configurations that are trained (alias[c] == c) */
} Plan;

void sweep_plan_free(Plan *p);

/* ------------------------------------------------------------------ presets */

typedef struct {
    const char *name;
    const char *const *quick; /* arguments, NULL-terminated */
    const char *const *full;
    const char *const *medium; /* --budget medium: between the two (NULL: the quick arguments) */
    const char *note;
    VerdictKind verdict; /* the claim its verdict block judges (sweep_verdict.c) */
    const char *help;    /* its line in `sweep --help` */
} Preset;

/* The preset called name, NULL if there is none (sweep_presets.c). */
const Preset *sweep_find_preset(const char *name);
/* The presets' `--help` lines, each starting with indent spaces, from the one table (their names:
 * sweep_preset_names in sweep.h). */
void sweep_preset_help_lines(FILE *f, int indent);

/* ------------------------------------------------------------------ the grid (sweep_plan.c) */

int sweep_run_train_args(const Plan *p, int c, int seed, StrList *l);
/* The run that trains run r's model: r itself, or the same seed of its alias configuration. */
int sweep_run_canonical(const Plan *p, int r);
/* rows of runs whose configuration is an alias: a copy of the canonical run's row (index and
 * configuration kept). */
void sweep_plan_fill_aliases(const Plan *p, SweepRun *rows);
int sweep_run_child_args(const Plan *p, int r, int threads, StrList *l);
void sweep_run_name(const Plan *p, int r, char *buf, size_t n);
void sweep_run_dir(const Plan *p, int r, char *buf, size_t n);
const char *sweep_config_label(const Plan *p, int c);
int sweep_plan_build(Plan *p);
int sweep_plan_args_line(const Plan *p, char *buf, size_t n);

/* ------------------------------------------------------------------ files (sweep_run.c) */

int sweep_mkdirs(const char *dir);
/* 1 when the runs' options hold --private: everything the sweep writes is then owner-only */
int sweep_private(const Plan *p);
int sweep_write_atomic(const char *path, const char *text);

typedef enum { RS_NEW, RS_DONE, RS_FAILED, RS_RESUME, RS_RESTART, RS_MISMATCH, RS_BROKEN } RunState;
extern const char *const sweep_state_names[];

/* The state of run r in dir, its summary in *info; msg says why for RS_MISMATCH and RS_BROKEN.
 * live.h5 is read in a child first (session_probe with `probe`: SESSION_PROBE_INFO and _ATTRS at
 * least, the reads made here; the summary adds SESSION_PROBE_SWEEP for its own): a file that
 * crashes the HDF5 library is unreadable like one that fails to read (msg says so). */
#define RUN_STATE_PROBE (SESSION_PROBE_INFO | SESSION_PROBE_ATTRS)
RunState sweep_run_state(const Plan *p, int r, const char *dir, SessionInfo *info, char *msg, size_t mn, int probe);

/* ------------------------------------------------------------------ running (sweep_run.c) */

extern volatile sig_atomic_t g_sweep_stop;

typedef struct Child Child;

typedef struct {
    int ran, skipped, failed, busy, interrupted;
} Tally;

typedef struct {
    const Plan *p;
    char exe[PATH_N];
    int threads;
    const char *who; /* "" or "rank r: " */
    Child *kids;
    int nkids;
    Tally tally;
} Runner;

int sweep_cores_available(int mpi_local);

/* ------------------------------------------------------------------ budgets (sweep_budget.c) */

/* Times CAL_STEPS training steps of each distinct configuration among the runs sel[0..nsel) that
 * are not finished, at `threads` threads, prints each and the estimated wall time at p->jobs runs
 * at once; returns that estimate in seconds, or -1 on an error (message printed). */
double sweep_calibrate(const Plan *p, const int *sel, int nsel, int threads);
/* On a terminal: asks "start the sweep? [y/N]", 1 for yes. Without one: 1 (says so). */
int sweep_confirm(void);
void sweep_self_exe(char *buf, size_t n, const char *argv0);
void sweep_runner_go(Runner *R, const int *sel, int nsel);

/* ------------------------------------------------------------------ summary (sweep_summary.c) */

void sweep_read_run_row(const Plan *p, int r, SweepRun *row);
void sweep_summary_print(const SweepSummary *s, const char *note);
int sweep_summary_emit(const Plan *p, SweepRun *rows, const char *note);

/* ------------------------------------------------------------------ MPI (sweep_run.c) */

typedef struct {
    int rank, size, local, active;
} Mpi;

int sweep_mpi_start(Mpi *m);
int sweep_mpi_finish(Mpi *m, SweepRun *rows, const int *owned, int nowned, int rc);

#endif
