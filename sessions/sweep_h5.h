/* sweep_h5.h — the HDF5 side of `moelab sweep`: reading what a sweep needs from each run's
 * session (nominal and realized rho, training time), and writing / reading the sweep summary
 * file DIR/sweep.h5 (schema in sessions/README.md, "Sweep folders"; SWEEP_FORMAT_VERSION is its root
 * `format_version` attribute). Like the rest of sessions/, the only code here that sees hdf5.h;
 * this header does not include it.
 *
 * Errors: ml_status with a one-line message in ml_last_error(); nothing is printed. */
#ifndef ML_SWEEP_H5_H
#define ML_SWEEP_H5_H

#include <stdint.h>

#include "core/common.h"

#define SWEEP_FORMAT_VERSION 1
#define SWEEP_NAME_MAX 256

/* One run of the grid (one configuration x one seed). Plain data (sent between MPI ranks as
 * bytes). Accuracies are fractions in [0, 1]; NaN when unknown. */
typedef struct {
    int index;                  /* position in the run grid */
    int config;                 /* index of its configuration */
    int best_epoch, last_epoch; /* epoch of best_acc, of the last evaluation */
    uint64_t seed;
    long steps;                 /* steps completed (last logged) */
    char name[SWEEP_NAME_MAX];  /* session folder, relative to the sweep folder */
    char status[16];            /* finished | interrupted | failed | running | missing | mismatch */
    double final_acc, best_acc; /* test accuracy of the last evaluation; best over evaluations */
    double rho_nominal;         /* /run@rho_nominal (0 for dense) */
    double rho_realized;        /* last evaluation's train_rho_realized (epoch mean, kept pairs) */
    double seconds;             /* training time: last evaluation's `elapsed` */
    /* routing (MoE heads; NaN / -2 when unknown): the clean router's largest first-choice share
     * (last logged step), the test set's (last evaluation); collapse_step: the onset (the last
     * collapse event) of a collapse still flagged at the last evaluation, -1 if the run ends
     * uncollapsed; collapse_first: the first step any view was flagged (-1: never; a random
     * router is often collapsed in the clean view for its first steps); the views ever flagged
     * (CVIEW_BIT_*) and the collapse events, from the event log; by severity (issue 26), the
     * warning events (the clean router alone, an idle router) and the expert deaths of the event log (-2: unknown,
     * a sweep.h5 written before these columns) */
    double clean_share, test_share;
    long collapse_step, collapse_first;
    int collapse_views, collapse_episodes;
    int warning_episodes, expert_deaths;
} SweepRun;

/* One configuration (every axis but the seed), summarised over its finished runs. The gap
 * columns compare final test accuracy with the matching dense configuration (baseline). */
typedef struct {
    char label[SWEEP_NAME_MAX]; /* e.g. "head=moe,hidden=256" ("(base)" without axes) */
    char head[24];              /* what routes: head kind, or "moe-backbone" (dense head, MoE layers) */
    int n, n_expected;          /* finished runs; seeds */
    int baseline;               /* index of the dense configuration it is compared with, -1 */
    double final_mean, final_sd, best_mean, best_sd;
    double rho_nominal, rho_realized;   /* rho_realized: mean over finished runs */
    double gap, gap_lo, gap_hi, gap_df; /* mean difference, 95% Welch CI and its df */
    double cohen_d, hedges_g;
    double seconds;                            /* mean training time of a finished run */
    double clean_share, test_share;            /* means over finished runs (NaN: unknown) */
    int collapsed;                             /* finished runs with a collapse (any view) */
    double collapse_step;                      /* mean first collapse step of those (NaN: none) */
    double peak_gap, peak_gap_lo, peak_gap_hi; /* best_mean - the baseline's, its 95% Welch CI */
} SweepConfig;

typedef struct {
    char *args; /* the sweep's arguments as one shell-quoted line (DIR/sweep.args) */
    int seeds;
    double ci_level; /* 0.95 */
    int naxes;
    char **axes; /* (naxes) axis keys, e.g. "head", "hidden" */
    int nconfigs;
    char **values; /* (nconfigs * naxes): value of axis a in config c at [c * naxes + a] */
    SweepConfig *configs;
    int nruns;
    SweepRun *runs;
    int checksums; /* sweep_h5_read: 1 every dataset's crc32 verified, 0 the file has none (an older moelab) */
} SweepSummary;

/* Reads from a session folder the values the sweep summary needs beyond session_read_info:
 * /run@rho_nominal, and from the last evaluation train_rho_realized, elapsed and step (NaN and
 * 0 when there is no evaluation yet). */
ml_status sweep_h5_read_run(const char *session_dir, double *rho_nominal, double *rho_realized, double *seconds,
                            long *steps);

/* The routing part of a run's SweepRun (clean_share ... expert_deaths) from its session:
 * NaN / -2 for what the session does not hold (dense heads, older sessions). */
ml_status sweep_h5_read_routing(const char *session_dir, SweepRun *row);

/* The alarm episodes of configuration c's finished runs summed by severity (their collapse_episodes,
 * warning_episodes, expert_deaths): "3C 2W 1D", "-" for none; "?" marks counts that are unknown (a
 * sweep.h5 written before the warning and death columns). The summary's routing table and the
 * browser's sweep rows. */
void sweep_config_alarms(const SweepSummary *s, int c, char *buf, size_t n);

/* Writes the summary to `path` atomically (path.tmp, fsync, rename). */
ml_status sweep_h5_write(const char *path, const SweepSummary *s);
/* Reads a summary written by sweep_h5_write into *s (all malloc'd: release with
 * sweep_summary_free). ML_ERR_FORMAT if it is not a sweep file or is damaged. */
ml_status sweep_h5_read(const char *path, SweepSummary *s);
void sweep_summary_free(SweepSummary *s);

#endif
