/* sweep_budget.c — the wall time a sweep will take, estimated from a short measured calibration
 * (README "Budgets"): `--budget paper` prints it before it starts and asks for confirmation on a
 * terminal; `--budget medium` prints it. Each distinct configuration still to run is built once
 * (its dataset opened, the model initialised, at the thread count its runs get) and timed for a
 * few training steps (the median step counts); a run then costs its measured start (dataset and
 * model) plus epochs x (steps per epoch + evaluation) steps, an
 * evaluation batch counted as a third of a training step (forward only). The runs go `--jobs` at
 * once, so the wall time is the sum over runs / jobs. Optimistic when other work shares the
 * machine (the calibration is timed alone; say so). */
#include "app/sweep/sweep_internal.h"

#include "core/common.h"
#include "core/trainer.h"
#include "datasets/dataset.h"
#include "app/cli/options.h"
#include "app/run/runsession.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CAL_WARMUP 2
#define CAL_STEPS 5

/* Seconds of one training step of run r's configuration (dataset, model, threads), and its
 * steps per run (training + evaluation as a third). -1 on an error (message printed). */
static int calibrate_run(const Plan *p, int r, int threads, double *sec_step, double *steps_run, char *what,
                         size_t wn) {
    StrList a = {0};
    if (sweep_run_child_args(p, r, threads, &a)) {
        sweep_sl_free(&a);
        return -1;
    }
    AppOptions o;
    app_options_defaults(&o);
    const int bad = app_options_parse(&o, a.n, a.v, "train") != 0;
    sweep_sl_free(&a);
    if (bad) return -1;
    const double t_setup = ml_now(); /* a run's own start: its dataset and model */
    Dataset ds;
    DatasetOpenOptions dopt = {0};
    dopt.coarse = o.coarse;
    if (dataset_open_with(&ds, o.dataset, &dopt) != ML_OK) {
        fprintf(stderr, "moelab sweep: calibration: %s\n", ml_last_error());
        return -1;
    }
    BatchSource src;
    dataset_batch_source(&ds, &src);
    Trainer t;
    if (trainer_init(&t, &o.train, &src) != ML_OK) {
        fprintf(stderr, "moelab sweep: calibration: %s\n", ml_last_error());
        dataset_free(&ds);
        return -1;
    }
    const double setup = ml_now() - t_setup;
    int rc = 0;
    double dt[CAL_STEPS];
    for (int s = 0; s < CAL_WARMUP + CAL_STEPS && !rc; s++) {
        const double t0 = ml_now();
        if (trainer_step(&t, NULL) != ML_OK) rc = -1;
        if (s >= CAL_WARMUP) dt[s - CAL_WARMUP] = ml_now() - t0;
    }
    /* the median step: a step slowed by other work on the machine does not count */
    for (int i = 1; i < CAL_STEPS; i++)
        for (int j = i; j > 0 && dt[j] < dt[j - 1]; j--) {
            const double x = dt[j];
            dt[j] = dt[j - 1];
            dt[j - 1] = x;
        }
    *sec_step = rc ? 0 : 0.5 * (dt[(CAL_STEPS - 1) / 2] + dt[CAL_STEPS / 2]);
    const int B = t.cfg.model.batch;
    *steps_run = (double)t.cfg.epochs * ((double)t.steps_per_epoch + ceil((double)t.src.n_test / B) / 3.0) +
                 (*sec_step > 0 ? setup / *sec_step : 0); /* the start, in steps */
    snprintf(what, wn, "%s, %d epochs x %ld steps, %d thread%s", t.src.name, t.cfg.epochs, t.steps_per_epoch,
             t.cfg.threads, t.cfg.threads == 1 ? "" : "s");
    trainer_free(&t);
    dataset_free(&ds);
    return rc;
}

static void fmt_hms(char *buf, size_t n, double s) {
    const long x = (long)(s + 0.5);
    if (x >= 3600) snprintf(buf, n, "%ldh %02ldm", x / 3600, (x % 3600) / 60);
    else snprintf(buf, n, "%ldm %02lds", x / 60, x % 60);
}

double sweep_calibrate(const Plan *p, const int *sel, int nsel, int threads) {
    double total = 0;
    int nruns = 0, ncal = 0;
    int *done = calloc((size_t)p->nconfigs + 1, sizeof(int)); /* config -> measured */
    double *cost = calloc((size_t)p->nconfigs + 1, sizeof(double));
    if (!done || !cost) {
        free(done);
        free(cost);
        return -1;
    }
    const double t0 = ml_now();
    printf("budget    calibrating: %d timed training steps per configuration still to run ...\n", CAL_STEPS);
    fflush(stdout);
    for (int i = 0; i < nsel; i++) {
        const int r = sel[i], c = r % p->nconfigs;
        char dir[DIR_N], msg[2048];
        SessionInfo info;
        sweep_run_dir(p, r, dir, sizeof dir);
        if (sweep_run_state(p, r, dir, &info, msg, sizeof msg, RUN_STATE_PROBE) == RS_DONE) continue;
        if (!done[c]) {
            double ss, sr;
            char what[256];
            if (calibrate_run(p, r, threads, &ss, &sr, what, sizeof what)) {
                free(done);
                free(cost);
                return -1;
            }
            done[c] = 1;
            cost[c] = ss * sr;
            ncal++;
            char h[32];
            fmt_hms(h, sizeof h, cost[c]);
            printf("budget    %-40s %7.3f s/step -> %s per run (%s)\n", sweep_config_label(p, c), ss, h, what);
            fflush(stdout);
        }
        total += cost[c];
        nruns++;
    }
    free(done);
    free(cost);
    const double wall = total / (p->jobs > 0 ? p->jobs : 1);
    char h[32], hc[32];
    fmt_hms(h, sizeof h, wall);
    fmt_hms(hc, sizeof hc, ml_now() - t0);
    printf("budget    estimated wall time %s for %d run%s at %d at once (calibration of %d configuration%s took %s; "
           "timed alone, so other work on the machine makes it longer)\n",
           h, nruns, nruns == 1 ? "" : "s", p->jobs, ncal, ncal == 1 ? "" : "s", hc);
    fflush(stdout);
    return wall;
}

int sweep_confirm(void) {
    if (!isatty(STDIN_FILENO) || !isatty(STDOUT_FILENO)) {
        printf("budget    no terminal: starting without confirmation\n");
        return 1;
    }
    printf("budget    start the sweep? [y/N] ");
    fflush(stdout);
    char line[64];
    if (!fgets(line, sizeof line, stdin)) return 0;
    return line[0] == 'y' || line[0] == 'Y';
}
