/* browse_tsne.c — the browser's t-SNE worker: a thread that maps one evaluation's saved test
 * features (core/tsne.c, plain arrays only), cancellable; polled by the UI loop (see browse.c). */
#define _GNU_SOURCE
#include "app/browse/browse.h"
#include "app/browse/browse_internal.h"
#include "app/cli/app.h"
#include "app/live/history_feed.h"

#include <errno.h>
#include <float.h>
#include <jansson.h>
#include <langinfo.h>
#include <limits.h>
#include <locale.h>
#include <math.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/tsne.h"
#include "app/run/runsession.h" /* provides: sessions_root */
#include "sessions/sweep_h5.h"
#include "views/draw.h"
#include "views/panels.h"
#include "views/view.h"
#include "app/plot/plot.h"

// ---------------------------------------------------------------------------------------------
// t-SNE worker

static void *tsne_thread(void *arg) {
    TsneJob *j = arg;
    const double t0 = ml_now();
    TsneConfig cfg;
    tsne_default_config(&cfg);
    cfg.seed = j->seed;
    j->st = tsne_run(j->X, j->n, j->d, &cfg, j->Y, &j->cancel);
    if (j->st != ML_OK) snprintf(j->err, sizeof j->err, "%s", ml_last_error());
    j->seconds = ml_now() - t0;
    atomic_store(&j->done, 1);
    return NULL;
}

void browse_job_stop(TsneJob *j) {
    if (j->running) {
        j->cancel = 1;
        pthread_join(j->th, NULL);
        j->running = 0;
    }
    ml_free(j->X);
    ml_free(j->expert);
    ml_free(j->label);
    free(j->Y);
    j->X = NULL;
    j->expert = j->label = NULL;
    j->Y = NULL;
    j->ev = -1;
}

/* Starts the t-SNE of evaluation ev of b->a (features read here, on the UI thread). */
void browse_tsne_start(Browser *b, int ev) {
    browse_job_stop(&b->job);
    TsneJob *j = &b->job;
    const SessionHistory *h = &b->a.h;
    const int epoch = ev >= 0 && ev < h->nevals ? h->evals[ev].epoch : 0;
    if (ev < 0) {
        view_tsne_set(&b->tsne, NULL, NULL, NULL, 0, 0, "no evaluation yet: nothing to map", NULL);
        return;
    }
    int n = 0, d = 0;
    const int layer = panels_layered(&b->a.ps) ? b->a.ps.sel : -1; /* the selected routed layer's router input */
    if ((layer >= 0 ? session_history_layer_tsne(h, layer, ev, &j->X, &j->expert, &j->label, &n, &d)
                    : session_history_tsne(h, ev, &j->X, &j->expert, &j->label, &n, &d)) != ML_OK) {
        char m[600];
        snprintf(m, sizeof m, "no t-SNE for this session: %s", ml_last_error());
        view_tsne_set(&b->tsne, NULL, NULL, NULL, 0, epoch, m, NULL);
        return;
    }
    j->n = n;
    j->d = d;
    j->ev = ev;
    j->epoch = epoch;
    j->seed = h->info.seed;
    j->Y = malloc(sizeof *j->Y * 2 * (size_t)n);
    j->cancel = 0;
    atomic_store(&j->done, 0);
    if (!j->Y) {
        view_tsne_set(&b->tsne, NULL, NULL, NULL, 0, epoch, "out of memory", NULL);
        browse_job_stop(j);
        return;
    }
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old); /* signals stay with the UI thread */
    const int rc = pthread_create(&j->th, NULL, tsne_thread, j);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc) {
        view_tsne_set(&b->tsne, NULL, NULL, NULL, 0, epoch, "cannot start the t-SNE thread", NULL);
        browse_job_stop(j);
        return;
    }
    j->running = 1;
    char m[200];
    snprintf(m, sizeof m, "computing t-SNE of epoch %d: %d test samples, %d features (seed %llu)...", epoch, n, d,
             (unsigned long long)j->seed);
    view_tsne_set(&b->tsne, NULL, NULL, NULL, 0, epoch, m, NULL);
}

void browse_tsne_poll(Browser *b) {
    TsneJob *j = &b->job;
    if (!j->running || !atomic_load(&j->done)) return;
    pthread_join(j->th, NULL);
    j->running = 0;
    if (j->st != ML_OK) {
        char m[400];
        snprintf(m, sizeof m, "t-SNE failed: %s", j->err);
        view_tsne_set(&b->tsne, NULL, NULL, NULL, 0, j->epoch, m, NULL);
    } else {
        const double ae = tsne_knn_agreement(j->Y, j->n, j->expert);
        const double ac = tsne_knn_agreement(j->Y, j->n, j->label);
        char info[160];
        /* segments (view_tsne_set): the agreement figures first, dropped whole when short */
        snprintf(info, sizeof info,
                 "nearest neighbour in the map: same expert %.0f%%\n, same class %.0f%%\n; %d points\n, %.1f s",
                 100 * ae, 100 * ac, j->n, j->seconds);
        view_tsne_set(&b->tsne, j->Y, j->expert, j->label, j->n, j->epoch, NULL, info);
    }
    b->dirty = 1;
}
