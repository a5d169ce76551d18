/* probe.c — `moelab probe batch SESSION [--epoch N]`: a session's checkpoint evaluated on its test
 * set in batches of different make-up (core/bprobe.c; README "Batch-composition probe"). */
#include "app/run/probe.h"

#include "app/cli/app.h"
#include "app/cli/options.h"
#include "app/run/runsession.h"
#include "datasets/dataset.h"
#include "sessions/session.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int probe_batch_session(const char *dir, int epoch, BatchProbe *out, char *ckpt, size_t n, char *head) {
    char *line = NULL;
    if (session_probe(dir, SESSION_PROBE_INFO | SESSION_PROBE_ATTRS) != ML_OK ||
        session_read_run_attr_alloc(dir, "command_line", &line) != ML_OK)
        return 1;
    char **av;
    const int ac = command_line_split(line, &av);
    AppOptions o;
    app_options_defaults(&o);
    const int bad = ac < 1 || app_options_parse(&o, ac, av, "train") != 0;
    argv_free(ac > 0 ? ac : 0, av);
    if (bad) {
        ml_fail(ML_ERR_FORMAT, "%s: cannot parse the stored command line: %s", dir, line);
        free(line);
        return 1;
    }
    free(line);
    runsession_stored_config(dir, &o);
    Dataset ds;
    DatasetOpenOptions dopt = {0};
    dopt.coarse = o.coarse;
    if (dataset_open_with(&ds, o.dataset, &dopt) != ML_OK) return 1;
    BatchSource src;
    dataset_batch_source(&ds, &src);
    Trainer t;
    if (trainer_init(&t, &o.train, &src) != ML_OK) {
        dataset_free(&ds);
        return 1;
    }
    char path[APP_PATH_MAX + 64];
    ml_status st = ML_OK;
    if (epoch > 0) {
        snprintf(path, sizeof path, "%s/ckpt-%ld.h5", dir, (long)epoch * t.steps_per_epoch);
        struct stat sb;
        if (stat(path, &sb) != 0)
            st = ml_fail(ML_ERR_IO, "%s: no checkpoint of epoch %d (ckpt-%ld.h5; --keep may have removed it)", dir,
                         epoch, (long)epoch * t.steps_per_epoch);
        else st = ckpt_validate(path, NULL);
    } else st = ckpt_find_latest(dir, path, sizeof path, NULL, 0);
    if (st == ML_OK) {
        StateView v;
        trainer_state(&t, &v);
        st = ckpt_read(path, &v);
    }
    if (st == ML_OK) st = batch_probe_run(&t, 1, out);
    if (st == ML_OK && ckpt) snprintf(ckpt, n, "%s", strrchr(path, '/') ? strrchr(path, '/') + 1 : path);
    if (st == ML_OK && head)
        snprintf(head, 24, "%s", t.cfg.model.head.kind == HEAD_DENSE && t.nbl ? "moe-backbone" : moe_head_name(t.cfg.model.head.kind));
    trainer_free(&t);
    dataset_free(&ds);
    return st == ML_OK ? 0 : 1;
}

void probe_batch_summary(const BatchProbe *p, char *buf, size_t n) {
    const double md = batch_probe_max_dlogit(p), bound = BP_ROUNDING * fmax(1.0, p->max_abs_logit);
    long preds = 0, routes = 0;
    double dacc = 0.0;
    for (int k = 1; k < BP_MAKEUPS; k++) {
        if (p->row[k].pred_changed > preds) preds = p->row[k].pred_changed;
        for (int l = 0; l < p->nlayers; l++)
            if (p->row[k].route_changed[l] > routes) routes = p->row[k].route_changed[l];
        if (fabs(p->row[k].acc - p->row[BP_FILE].acc) > fabs(dacc)) dacc = p->row[k].acc - p->row[BP_FILE].acc;
    }
    if (!batch_probe_depends(p))
        snprintf(buf, n, "no change beyond float rounding: 0 predictions, 0 first choices, max |dlogit| %.2g <= %.2g",
                 md, bound);
    else
        snprintf(buf, n,
                 "depends on batch mates: max |dlogit| %.3g, up to %ld of %d predictions and %ld first choices "
                 "changed, accuracy moved up to %+.2f pp",
                 md, preds, p->n_test, routes, 100 * dacc);
}

void probe_batch_print(const BatchProbe *p, FILE *o) {
    fprintf(o, "%-16s %7s %8s %8s %9s %9s %8s %12s", "make-up", "batches", "acc %", "d acc pp", "loss", "d loss",
            "preds", "max |dlogit|");
    for (int l = 0; l < p->nlayers; l++) fprintf(o, " %9s", p->layer[l]);
    fprintf(o, "\n%-16s %7s %8s %8s %9s %9s %8s %12s", "", "", "", "", "", "", "changed", "");
    if (p->nlayers) fprintf(o, " first choices changed");
    fprintf(o, "\n");
    for (int k = 0; k < BP_MAKEUPS; k++) {
        const BatchProbeRow *r = &p->row[k];
        fprintf(o, "%-16s %7d %8.2f %+8.2f %9.5f %+9.2e %8ld %12.3g", r->name, r->batches, 100 * r->acc,
                100 * (r->acc - p->row[BP_FILE].acc), r->loss, r->loss - p->row[BP_FILE].loss, r->pred_changed,
                r->max_dlogit);
        for (int l = 0; l < p->nlayers; l++) fprintf(o, " %9ld", r->route_changed[l]);
        fprintf(o, "\n");
    }
    char s[256];
    probe_batch_summary(p, s, sizeof s);
    fprintf(o, "reading   %s\n", s);
}

int cmd_probe(int argc, char **argv) {
    if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        printf("usage: moelab probe batch SESSION [--epoch N]\n\n"
               "Batch-composition probe: loads the session's checkpoint (the newest, or the one at the end of\n"
               "epoch N) and evaluates its test set in batches of different make-up: file order, shuffled,\n"
               "sorted by class, single-class batches. Per make-up: accuracy, loss and their change from file\n"
               "order, predictions changed, the largest logit change, and per routed layer the first choices\n"
               "changed. A per-sample head (moe with a dropless evaluation, dense, softmoe-sample) changes by\n"
               "float rounding only; softmoe-batch, which dispatches over the batch, changes beyond it.\n"
               "Exit status 0 (no change beyond rounding), 3 (predictions depend on batch mates), 1 error.\n");
        return 0;
    }
    if (argc < 3 || strcmp(argv[1], "batch")) {
        fprintf(stderr, "usage: moelab probe batch SESSION [--epoch N]\n");
        return 2;
    }
    const char *dir = argv[2];
    int epoch = 0;
    for (int i = 3; i < argc; i++) {
        if (!strcmp(argv[i], "--epoch") && i + 1 < argc) {
            char *end;
            const long e = strtol(argv[++i], &end, 10);
            if (*end || e < 1 || e > 1000000) {
                fprintf(stderr, "moelab probe: --epoch: '%s' is not a positive whole number\n", argv[i]);
                return 2;
            }
            epoch = (int)e;
        } else {
            fprintf(stderr, "moelab probe: unexpected argument '%s'\n", argv[i]);
            return 2;
        }
    }
    BatchProbe p;
    char ck[256] = "", head[24] = "";
    if (probe_batch_session(dir, epoch, &p, ck, sizeof ck, head)) {
        fprintf(stderr, "moelab probe: %s\n", ml_last_error());
        return 1;
    }
    printf("probe     %s: %s, head %s, %d test images, batch %d\n", dir, ck, head, p.n_test, p.batch);
    probe_batch_print(&p, stdout);
    return batch_probe_depends(&p) ? 3 : 0;
}
