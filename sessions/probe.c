/* probe.c — reading a session in a child process before this process reads it (session.h,
 * "protected reading"). libhdf5 1.10 can crash (heap overflow, use after free) or hang on
 * corrupted metadata (tests/fuzz_session.c, tests/fuzz_h5.c); the commands that read live.h5 in
 * their own process (plot, export, attach, replay, the sweep's collection and summary, the
 * browser's full load) first let a forked child (ml_run_isolated) make the same reads. A crash
 * or hang there becomes a one-line ML_ERR_FORMAT "damaged" message and the caller never reads
 * the file; when the child read it to the end the caller's own read goes ahead. */
#define _POSIX_C_SOURCE 200809L

#include "session.h"
#include "history.h"
#include "schema.h"
#include "sweep_h5.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define SESSION_PROBE_TIMEOUT_MS 30000 /* a whole history or export of a large session, loaded machine */

int session_probe_timeout_ms(void) {
    const char *t = getenv("MOELAB_SESSION_PROBE_TIMEOUT_MS");
    const int v = t ? atoi(t) : 0;
    return v > 0 ? v : SESSION_PROBE_TIMEOUT_MS;
}

ml_status session_isolated_status(const MlIsolated *r, const char *path, int timeout_ms) {
    switch (r->outcome) {
    case ML_ISOLATED_OK:
    case ML_ISOLATED_NO_CHILD: return ML_OK;
    case ML_ISOLATED_FAILED: return ml_fail(r->status, "%s", r->msg);
    case ML_ISOLATED_SIGNALED:
        return ml_fail(ML_ERR_FORMAT, "%.1000s: reading it crashed the HDF5 library (signal %d): the file is damaged",
                       path, r->signal);
    case ML_ISOLATED_EXITED:
        return ml_fail(ML_ERR_FORMAT,
                       "%.1000s: reading it crashed the HDF5 library (exit status %d): the file is damaged", path,
                       r->exit_code);
    case ML_ISOLATED_TIMEOUT: break;
    }
    return ml_fail(ML_ERR_FORMAT,
                   "%.1000s: reading it did not finish in %g s: the file is damaged (or its storage is very slow)",
                   path, timeout_ms / 1000.0);
}

typedef struct {
    const char *dir;  /* as the caller's readers get it */
    const char *file; /* the live.h5 it names */
    int what;
} ProbeArg;

/* Fault injection for the tests. $MOELAB_FAULT_SESSION_PROBE = [segv:|abort:|hang:]SUBSTRING: a
 * probe of a file whose path contains SUBSTRING crashes with SIGSEGV (default), aborts, or hangs
 * past the timeout (MOELAB_SESSION_PROBE_TIMEOUT_MS shortens it). $MOELAB_FAULT_OPEN_CRASH =
 * SUBSTRING (the browser's older name, tests/t_browse.sh): a history probe crashes. */
static void fault_point(const ProbeArg *a) {
    const char *f = getenv("MOELAB_FAULT_SESSION_PROBE");
    if (f && *f) {
        int mode = 0;
        if (!strncmp(f, "segv:", 5)) f += 5;
        else if (!strncmp(f, "abort:", 6)) f += 6, mode = 1;
        else if (!strncmp(f, "hang:", 5)) f += 5, mode = 2;
        if (*f && strstr(a->file, f)) {
            if (mode == 1) abort();
            if (mode == 2)
                for (;;) pause();
            raise(SIGSEGV);
        }
    }
    const char *o = getenv("MOELAB_FAULT_OPEN_CRASH");
    if ((a->what & SESSION_PROBE_HISTORY) && o && *o && strstr(a->file, o)) raise(SIGSEGV);
}

/* Every t-SNE sample the history holds, top level and per routed layer. */
static void read_all_tsne(const SessionHistory *h) {
    for (int ev = 0; ev < h->nevals; ev++) {
        float *x = NULL;
        int *e = NULL, *l = NULL, n = 0, d = 0;
        if (h->E > 0 && h->evals[ev].moe.tsne_n > 0 && session_history_tsne(h, ev, &x, &e, &l, &n, &d) == ML_OK) {
            ml_free(x);
            ml_free(e);
            ml_free(l);
        }
        for (int k = 0; k < h->nlayers && h->info.format_version >= 2; k++) {
            if (h->evals[ev].layer[k].tsne_n <= 0) continue;
            if (session_history_layer_tsne(h, k, ev, &x, &e, &l, &n, &d) != ML_OK) continue;
            ml_free(x);
            ml_free(e);
            ml_free(l);
        }
    }
}

/* Runs in the child: the reads asked for, in the order the callers make them. Their errors do
 * not matter here (the caller's own read reports them): only a crash or a hang does. */
static ml_status probe_child(void *arg) {
    const ProbeArg *a = arg;
    fault_point(a);
    if (a->what & SESSION_PROBE_INFO) {
        SessionInfo info;
        session_read_info(a->dir, &info);
    }
    if (a->what & SESSION_PROBE_ATTRS) {
        char *s = NULL;
        if (session_read_run_attr_alloc(a->dir, "command_line", &s) == ML_OK) free(s);
    }
    if (a->what & SESSION_PROBE_EVENTS) {
        SessionEventRow *ev = NULL;
        long n = 0;
        if (session_read_events(a->dir, &ev, &n) == ML_OK) free(ev);
    }
    if (a->what & (SESSION_PROBE_HISTORY | SESSION_PROBE_TSNE)) {
        SessionHistory h;
        if (session_history_load(a->dir, &h) == ML_OK) {
            if (a->what & SESSION_PROBE_TSNE) read_all_tsne(&h);
            session_history_free(&h);
        }
    }
    if (a->what & SESSION_PROBE_EXPORT) session_export_csv(a->dir, NULL);
    if (a->what & SESSION_PROBE_SWEEP) {
        double rn, rr, sec;
        long steps;
        sweep_h5_read_run(a->dir, &rn, &rr, &sec, &steps);
        SweepRun row;
        memset(&row, 0, sizeof row);
        sweep_h5_read_routing(a->dir, &row);
    }
    return ML_OK;
}

ml_status session_probe(const char *dir_or_file, int what) {
    if (!dir_or_file) return ML_OK; /* the caller's read says what is wrong */
    char file[4096];
    struct stat sb;
    if (stat(dir_or_file, &sb) == 0 && S_ISREG(sb.st_mode)) snprintf(file, sizeof file, "%s", dir_or_file);
    else if (snprintf(file, sizeof file, "%s/live.h5", dir_or_file) >= (int)sizeof file) return ML_OK;
    /* nothing to read (missing, not a file): no child, the caller's read gives the message */
    if (stat(file, &sb) != 0 || !S_ISREG(sb.st_mode)) return ML_OK;
    const ProbeArg a = {dir_or_file, file, what};
    const int timeout_ms = session_probe_timeout_ms();
    MlIsolated r;
    if (ml_run_isolated(probe_child, (void *)&a, timeout_ms, &r) == ML_ISOLATED_NO_CHILD) {
        ml_log(1, "%s: cannot read it in a child process first (%s): reading it unprotected", file, r.msg);
        return ML_OK;
    }
    return session_isolated_status(&r, file, timeout_ms);
}
