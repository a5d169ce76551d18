/* browse.c — `moelab browse [DIR | FILE.h5 | sweep.h5]`: the session browser.
 *
 * Three screens on one ncurses terminal:
 *   LIST     the sessions under DIR (or a sweep's runs): sortable, filterable, two can be marked;
 *   SESSION  one session read from live.h5 into the live screen's panels (views/), with an epoch
 *            scrubber moving every panel to one evaluation; `t` shows a t-SNE map of that
 *            evaluation's saved test features; a running session is re-read every second (SWMR);
 *   COMPARE  two sessions: curves overlaid, heatmaps side by side at the same epoch, B - A table.
 *
 * The UI thread alone calls ncurses and reads HDF5 (through sessions/); t-SNE runs on a worker
 * thread that only sees plain arrays (core/tsne.c) and can be cancelled. Without a terminal (or
 * with --list) the list is printed as text instead. */
#define _GNU_SOURCE
#include "app/browse/browse.h"
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

#define REFRESH_SEC 1.0      /* a running session is re-read this often */
#define LIST_REFRESH_SEC 5.0 /* the list's statuses */

enum { SCR_LIST, SCR_SESSION, SCR_COMPARE, SCR_MULTI };
#define MARK_MAX VIEW_MULTI_MAX /* sessions that can be marked for a comparison */

/* One loaded session with its views. */
typedef struct {
    SessionHistory h;
    ViewCtx ctx;
    TauSchedule base; /* launch temperature schedule */
    int have_base;
    Panels ps;             /* the live screen's panels (views/panels.c) */
    HistoryFed fed;        /* what of h the panels have seen */
    SessionFollow *follow; /* a running session: appends the rows its writer adds (sessions/follow.c) */
    int loaded;
    char name[512];
} Loaded;

/* The t-SNE worker. */
typedef struct {
    pthread_t th;
    int running;     /* a thread exists (join it) */
    atomic_int done; /* the thread finished */
    volatile int cancel;
    float *X; /* (n, d) input, owned */
    int *expert, *label;
    int n, d, ev, epoch;
    uint64_t seed;
    float *Y; /* (n, 2) result */
    ml_status st;
    char err[256];
    double seconds;
} TsneJob;

typedef struct {
    const char *root; /* what was given (DIR or a sweep.h5) */
    int direct;       /* opened one session directly: q quits from it */
    int screen;
    Theme theme;
    int utf8;
    // list
    BrowseList list;
    int *rows, nrows; /* indexes of the entries shown (filtered) */
    int sel, top;
    int sort_col, sort_rev;
    char filter[128];
    int input; /* 0, '/' filter or '#' epoch number being typed */
    char inbuf[64];
    double list_read_at;
    SweepSummary sweep; /* root is a sweep.h5: its summary, shown under the list */
    int have_sweep;
    char msg[512]; /* one-line message in the hint row */
    // session / compare
    Loaded a, b;
    Loaded *multi; /* compare of 3..8 runs: nmulti loaded sessions, their curves in mview */
    int nmulti;
    View mview;
    int ev;     /* cursor: evaluation index of a (-1: none) */
    int follow; /* cursor on the newest evaluation: follows a running session */
    int cmp_epoch;
    int focus, zoom, help_on, tsne_on;
    View help, tsne, diff;
    ViewCtx help_ctx;
    double refresh_at;
    TsneJob job;
    int dirty;
} Browser;

static volatile sig_atomic_t g_sig;
static int g_curses;

static void on_sig(int s) { g_sig = s; }

static void restore_terminal(void) {
    if (g_curses && !isendwin()) endwin();
    g_curses = 0;
}

static void set_msg(Browser *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void set_msg(Browser *b, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(b->msg, sizeof b->msg, fmt, ap);
    va_end(ap);
    b->dirty = 1;
}

// ---------------------------------------------------------------------------------------------
// loading a session into views

static void loaded_free(Loaded *L) {
    session_follow_close(L->follow);
    L->follow = NULL;
    panels_free(&L->ps);
    session_history_free(&L->h);
    L->loaded = 0;
}

static void fill_ctx(Loaded *L, const Theme *theme) {
    L->have_base = history_view_ctx(&L->h, theme, &L->ctx, &L->base); /* app/history_feed.c */
    L->ctx.browse = 1;
}

/* Loads a session and feeds its whole history into fresh views. 0, or -1 (message in err). */
/* probe: read it in a child first (a file that would crash libhdf5 stays out); the live refresh
 * of a session that loaded a moment ago skips it. */
static int load_session(Loaded *L, const char *path, const char *name, const Theme *theme, int probe, char *err,
                        size_t errn) {
    loaded_free(L);
    if (probe && browse_probe_history(path, err, errn)) return -1;
    if (session_history_load(path, &L->h) != ML_OK) {
        snprintf(err, errn, "%s", ml_last_error());
        return -1;
    }
    snprintf(L->name, sizeof L->name, "%s", name);
    fill_ctx(L, theme);
    if (panels_init(&L->ps, &L->ctx)) {
        snprintf(err, errn, "out of memory");
        loaded_free(L);
        return -1;
    }
    memset(&L->fed, 0, sizeof L->fed); /* the log it writes is rebuilt around the cursor (apply_cursor) */
    history_feed(&L->h, &L->ps, &L->fed, -1, NULL);
    L->loaded = 1;
    return 0;
}

static const char *state_of(const char *status) {
    if (!strcmp(status, "finished")) return "FINISHED";
    if (!strcmp(status, "running")) return "RUNNING";
    if (!strcmp(status, "interrupted")) return "INTERRUPTED";
    if (!strcmp(status, "failed")) return "FAILED";
    return "?";
}

static void log_line(View *v, int level, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void log_line(View *v, int level, const char *fmt, ...) {
    char buf[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    const ViewMsg m = {.kind = VIEW_MSG_LOG, .level = level, .text = buf};
    view_update(v, &m);
}

/* The log panel around the cursor: events and evaluations up to it, a marker, a few after. */
static void rebuild_log(Loaded *L, long at_step) {
    if (!L->ps.have[PANEL_LOG]) return;
    View *v = &L->ps.v[PANEL_LOG];
    view_free(v);
    L->ps.have[PANEL_LOG] = 0;
    if (view_init(v, &view_log_class, &L->ctx)) return;
    L->ps.have[PANEL_LOG] = 1;
    const SessionHistory *h = &L->h;
    long ie = 0;
    int iv = 0, after = 0, marked = 0;
    while (ie < h->nevents || iv < h->nevals) {
        const int take_event = iv >= h->nevals || (ie < h->nevents && h->events[ie].step <= h->evals[iv].step);
        const long step = take_event ? h->events[ie].step : h->evals[iv].step;
        if (step > at_step && !marked) {
            log_line(v, VIEW_LOG_WARN, "%s cursor: step %ld %s", L->ctx.theme->utf8 ? "\u25b6" : ">", at_step,
                     L->ctx.theme->utf8 ? "\u25c0" : "<");
            marked = 1;
        }
        if (marked && ++after > 2) break;
        if (take_event) {
            log_line(v, marked ? VIEW_LOG_INFO : VIEW_LOG_CMD, "[step %ld] %s", h->events[ie].step, h->events[ie].text);
            ie++;
        } else {
            const EvalRecord *e = &h->evals[iv];
            /* an `eval` in the middle of an epoch is labelled with its step, not as an epoch */
            if (h->steps_per_epoch > 0 && e->step != (long)e->epoch * h->steps_per_epoch)
                log_line(v, marked ? VIEW_LOG_INFO : VIEW_LOG_EPOCH, "eval at step %ld: test loss %.4f acc %.2f%%%s",
                         e->step, e->test_loss, 100 * e->test_acc, e->collapsed ? "  COLLAPSE" : "");
            else
                log_line(v, marked ? VIEW_LOG_INFO : VIEW_LOG_EPOCH,
                         "epoch %d (step %ld): train loss %.4f acc %.2f%%  test loss %.4f acc %.2f%%%s", e->epoch,
                         e->step, e->train_loss, 100 * e->train_acc, e->test_loss, 100 * e->test_acc,
                         e->collapsed ? "  COLLAPSE" : "");
            iv++;
        }
    }
    if (!marked)
        log_line(v, VIEW_LOG_WARN, "%s cursor: step %ld (end of the history)", L->ctx.theme->utf8 ? "\u25b6" : ">",
                 at_step);
}

/* Moves every panel of L to evaluation ev (or to the last step when ev < 0). */
static void apply_cursor(Loaded *L, int ev, const char *note) {
    const SessionHistory *h = &L->h;
    const EvalRecord *e = ev >= 0 && ev < h->nevals ? &h->evals[ev] : NULL;
    const long at = e ? e->step : h->nsteps > 0 ? h->steps[h->nsteps - 1].step : 0;
    const long si = session_history_step_at(h, at);
    const StepRecord *sr = si >= 0 ? &h->steps[si] : NULL;
    const ViewMsg cm = {.kind = VIEW_MSG_CURSOR, .at_step = at, .eval = e, .step = sr};
    RunStatus rs = {0};
    rs.state = state_of(h->info.status);
    rs.state_role = !strcmp(h->info.status, "failed")    ? TH_BANNER
                    : !strcmp(h->info.status, "running") ? TH_RUNNING
                                                         : TH_PAUSED;
    if (!strcmp(h->info.status, "finished")) rs.state_role = TH_RUNNING;
    rs.step = at;
    rs.epoch = e ? e->epoch : 0;
    rs.eta = -1;
    rs.session = L->name;
    rs.note = note;
    const ViewMsg sm = {.kind = VIEW_MSG_STATUS, .status = &rs};
    history_plans(h, &L->ps, &L->base, at);
    panels_update(&L->ps, &cm);
    panels_update(&L->ps, &sm);
    rebuild_log(L, at);
}

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

static void job_stop(TsneJob *j) {
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
static void tsne_start(Browser *b, int ev) {
    job_stop(&b->job);
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
        job_stop(j);
        return;
    }
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old); /* signals stay with the UI thread */
    const int rc = pthread_create(&j->th, NULL, tsne_thread, j);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc) {
        view_tsne_set(&b->tsne, NULL, NULL, NULL, 0, epoch, "cannot start the t-SNE thread", NULL);
        job_stop(j);
        return;
    }
    j->running = 1;
    char m[200];
    snprintf(m, sizeof m, "computing t-SNE of epoch %d: %d test samples, %d features (seed %llu)...", epoch, n, d,
             (unsigned long long)j->seed);
    view_tsne_set(&b->tsne, NULL, NULL, NULL, 0, epoch, m, NULL);
}

static void tsne_poll(Browser *b) {
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

// ---------------------------------------------------------------------------------------------
// list screen

static void list_rows(Browser *b) {
    free(b->rows);
    b->rows = malloc(sizeof *b->rows * (b->list.n ? b->list.n : 1));
    b->nrows = 0;
    if (!b->rows) return;
    for (int i = 0; i < b->list.n; i++)
        if (browse_entry_match(&b->list.e[i], b->filter)) b->rows[b->nrows++] = i;
    if (b->sel >= b->nrows) b->sel = b->nrows - 1;
    if (b->sel < 0) b->sel = 0;
}

static void list_rescan(Browser *b) {
    /* keep the marks and the selection across a rescan (by path) */
    char sel_path[1100] = "";
    if (b->nrows > 0) snprintf(sel_path, sizeof sel_path, "%s", b->list.e[b->rows[b->sel]].path);
    char(*marks)[1100] = NULL;
    int nm = 0;
    for (int i = 0; i < b->list.n; i++)
        if (b->list.e[i].marked) {
            void *nmk = realloc(marks, sizeof *marks * (nm + 1));
            if (!nmk) break;
            marks = nmk;
            snprintf(marks[nm++], sizeof *marks, "%s", b->list.e[i].path);
        }
    if (browse_list_scan(&b->list, b->root)) set_msg(b, "%s", ml_last_error());
    browse_list_sort(&b->list, b->sort_col, b->sort_rev);
    for (int i = 0; i < b->list.n; i++)
        for (int m = 0; m < nm; m++)
            if (!strcmp(b->list.e[i].path, marks[m])) b->list.e[i].marked = 1;
    free(marks);
    list_rows(b);
    for (int r = 0; r < b->nrows; r++)
        if (!strcmp(b->list.e[b->rows[r]].path, sel_path)) b->sel = r;
    b->list_read_at = ml_now();
    b->dirty = 1;
}

/* Column widths for a screen width; name takes what is left. */
static void list_widths(int W, int *wd) {
    static const int fixed[BCOL_COUNT] = {0, 14, 9, 11, 8, 6, 6, 6, 11, 8, 16};
    int used = 2;
    for (int c = 1; c < BCOL_COUNT; c++) {
        wd[c] = fixed[c];
        used += fixed[c] + 1;
    }
    /* narrow terminals: drop created, then dataset, then schedule (80 columns keep the alarms) */
    static const int drop[3] = {BCOL_CREATED, BCOL_DATASET, BCOL_SCHED};
    for (int i = 0; i < 3; i++)
        if (W - used < 16) {
            used -= wd[drop[i]] + 1;
            wd[drop[i]] = 0;
        }
    wd[BCOL_NAME] = W - used > 8 ? W - used : 8;
}

static void draw_list(Browser *b, int W, int H) {
    const Theme *t = &b->theme;
    int wd[BCOL_COUNT];
    list_widths(W, wd);
    /* title bar */
    draw_fill(stdscr, 0, 0, W, t->role[TH_STATUS]);
    char buf[1200];
    int marked = 0, running = 0, damaged = 0;
    for (int i = 0; i < b->list.n; i++) {
        marked += b->list.e[i].marked;
        running += !strcmp(b->list.e[i].status, "running");
        damaged += !b->list.e[i].ok;
    }
    /* the columns that do not fit, named at the right end of the title bar (the header row is full) */
    char hid[160] = "";
    {
        size_t n = 0;
        int k = 0;
        for (int c = 0; c < BCOL_COUNT; c++)
            if (!wd[c]) n += (size_t)snprintf(hid + n, sizeof hid - n, "%s%s", k++ ? "," : "+", browse_col_name(c));
        if (k) snprintf(hid + n, sizeof hid - n, " %s", t->utf8 ? "\u25b8" : ">");
    }
    const int hw = hid[0] ? utf8_cells(hid) + 1 : 0;
    /* the title in segments, dropped whole (draw_segs) left of that note */
    char s0[600], s1[48], s2[300], s3[64], s4[64];
    snprintf(s0, sizeof s0, " moelab browse %s %s", t->utf8 ? "\u2502" : "|", b->root);
    snprintf(s1, sizeof s1, "  %d sessions", b->list.n);
    snprintf(s2, sizeof s2, "%s%s", b->filter[0] ? ", filter: " : "", b->filter);
    snprintf(s3, sizeof s3, "  (%d running, %d damaged)", running, damaged);
    if (marked >= 2) snprintf(s4, sizeof s4, ", marked: %d (c compares)", marked);
    else snprintf(s4, sizeof s4, "%s", marked == 1 ? ", marked: 1 (mark one more to compare)" : "");
    const DrawSeg ts[5] = {{s0, 9}, {s1, 6}, {s2, 7}, {s3, 3}, {s4, 8}};
    draw_segs(stdscr, 0, 0, W - hw, t->role[TH_STATUS] | A_BOLD, ts, 5);
    if (hid[0]) draw_text(stdscr, 0, W - hw > 0 ? W - hw : 0, hw, t->role[TH_STATUS] | A_BOLD, hid);
    /* header */
    int x = 2;
    for (int c = 0; c < BCOL_COUNT; c++) {
        if (!wd[c]) continue;
        snprintf(buf, sizeof buf, "%s%s", browse_col_name(c),
                 c == b->sort_col ? (b->sort_rev ? (t->utf8 ? "\u25bc" : "v") : (t->utf8 ? "\u25b2" : "^")) : "");
        const int right = c == BCOL_BEST || c == BCOL_LAST || c == BCOL_EPOCHS;
        if (right) draw_textf(stdscr, 1, x, wd[c], t->role[TH_TITLE], "%*s", wd[c], buf);
        else draw_text(stdscr, 1, x, wd[c], t->role[TH_TITLE], buf);
        x += wd[c] + 1;
    }
    /* a sweep's summary under the list: one row per configuration (at most a third of the screen) */
    int sw_rows = 0;
    if (b->have_sweep && b->sweep.nconfigs > 0) {
        sw_rows = 3 + b->sweep.nconfigs;
        if (sw_rows > H / 3) sw_rows = H / 3;
    }
    const int list_h = H - 5 - sw_rows; /* title, header, sweep summary, detail (2), hint */
    if (sw_rows >= 2) {
        const SweepSummary *sw = &b->sweep;
        const int y0 = H - 3 - sw_rows;
        snprintf(buf, sizeof buf,
                 "sweep: %d configurations x %d seeds; gap = final test accuracy minus the matching dense "
                 "configuration's, with its %.0f%% Welch CI",
                 sw->nconfigs, sw->seeds, 100 * sw->ci_level);
        draw_text(stdscr, y0, 1, W - 2, t->role[TH_TITLE], buf);
        int lw = 13; /* the labels' width (56 at most), so the alarms at the end fit more often */
        for (int c = 0; c < sw->nconfigs; c++) {
            const int l = (int)strlen(sw->configs[c].label);
            if (l > lw) lw = l > 56 ? 56 : l;
        }
        snprintf(buf, sizeof buf, "  %-*s %3s %15s %8s %8s %9s %18s  %s", lw, "configuration", "n", "final acc %",
                 "rho nom", "rho real", "gap pp", "CI pp", "alarms");
        draw_text(stdscr, y0 + 1, 1, W - 2, t->role[TH_AXIS], buf);
        for (int c = 0; c < sw->nconfigs && 2 + c < sw_rows - 1; c++) {
            const SweepConfig *k = &sw->configs[c];
            char acc[32], gap[16], ci[40];
            if (k->n > 0) snprintf(acc, sizeof acc, "%.2f +- %.2f", 100 * k->final_mean, 100 * k->final_sd);
            else snprintf(acc, sizeof acc, "-");
            if (isfinite(k->gap)) snprintf(gap, sizeof gap, "%+.2f", 100 * k->gap);
            else snprintf(gap, sizeof gap, "-");
            if (isfinite(k->gap_lo)) snprintf(ci, sizeof ci, "[%+.2f, %+.2f]", 100 * k->gap_lo, 100 * k->gap_hi);
            else snprintf(ci, sizeof ci, "-");
            char n[16], al[48];
            snprintf(n, sizeof n, "%d/%d", k->n, k->n_expected);
            sweep_config_alarms(sw, c, al, sizeof al);
            snprintf(buf, sizeof buf, "  %-*.*s %3s %15s %8.3f %8.3f %9s %18s  %s", lw, lw, k->label, n, acc,
                     k->rho_nominal, k->rho_realized, gap, ci, al);
            draw_text(stdscr, y0 + 2 + c, 1, W - 2, A_NORMAL, buf);
        }
    }
    if (b->sel < b->top) b->top = b->sel;
    if (b->sel >= b->top + list_h) b->top = b->sel - list_h + 1;
    if (b->top < 0) b->top = 0;
    if (b->nrows == 0) {
        draw_text(stdscr, 3, 2, W - 4, t->role[TH_DIM],
                  b->list.n
                      ? "no session matches the filter (Esc clears it)"
                      : "no sessions here (a session is a folder with live.h5; moelab train writes them under runs/)");
    }
    for (int r = 0; r < list_h && b->top + r < b->nrows; r++) {
        const int i = b->rows[b->top + r];
        const BrowseEntry *e = &b->list.e[i];
        const int y = 2 + r, selected = b->top + r == b->sel;
        char cells[BCOL_COUNT][64];
        browse_entry_cells(e, cells);
        const attr_t base = selected ? t->role[TH_SELECT] | A_BOLD : A_NORMAL;
        if (selected) draw_fill(stdscr, y, 0, W, t->role[TH_SELECT]);
        draw_text(stdscr, y, 0, 2, base | (e->marked ? A_BOLD : 0), e->marked ? (t->utf8 ? "\u25c6 " : "* ") : "  ");
        x = 2;
        for (int c = 0; c < BCOL_COUNT; c++) {
            if (!wd[c]) continue;
            attr_t a = base;
            if (!selected && c == BCOL_STATUS) {
                if (!e->ok || !strcmp(e->status, "stale") || !strcmp(e->status, "failed")) a = t->role[TH_ERROR];
                else if (!strcmp(e->status, "running")) a = t->role[TH_GOOD] | A_BOLD;
                else if (!strcmp(e->status, "interrupted")) a = t->role[TH_WARN];
            }
            if (!selected && c == BCOL_ALARMS && e->alarms_ok) /* red: a collapse; yellow: warnings, deaths */
                a = e->alarms.collapse ? t->role[TH_ERROR] | A_BOLD
                    : e->alarms.warning || e->alarms.death ? t->role[TH_WARN]
                                                           : t->role[TH_DIM];
            const int right = c == BCOL_BEST || c == BCOL_LAST || c == BCOL_EPOCHS;
            const char *s = cells[c];
            if (c == BCOL_NAME && utf8_cells(s) > wd[c] && wd[c] > 8) {
                /* a long name keeps its start and its end, the middle gives way to "…" (the full
                 * path is in the detail lines under the list) */
                const size_t len = strlen(s);
                const int tail = (wd[c] - 1) / 3, head = wd[c] - 1 - tail;
                snprintf(buf, sizeof buf, "%.*s%s%s", head, s, t->utf8 ? "\u2026" : "~", s + len - (size_t)tail);
                s = buf;
            }
            if (c == BCOL_NAME && !e->ok) a |= selected ? 0 : t->role[TH_ERROR];
            if (right) draw_textf(stdscr, y, x, wd[c], a, "%*s", wd[c], s);
            else draw_text(stdscr, y, x, wd[c], a, s);
            x += wd[c] + 1;
        }
    }
    /* detail of the selected entry */
    if (b->nrows > 0) {
        const BrowseEntry *e = &b->list.e[b->rows[b->sel]];
        if (e->err[0]) {
            snprintf(buf, sizeof buf, "%s: %s", e->ok ? "note" : "cannot read", e->err);
            draw_wrapped(stdscr, H - 3, 1, W - 2, 2, e->ok ? t->role[TH_WARN] : t->role[TH_ERROR], buf);
        } else {
            char al[160] = "";
            if (e->alarms_ok && (e->alarms.collapse || e->alarms.warning || e->alarms.death || e->alarms.revival))
                snprintf(al, sizeof al, "; alarm events: %d collapse, %d warning, %d expert death, %d revival",
                         e->alarms.collapse, e->alarms.warning, e->alarms.death, e->alarms.revival);
            snprintf(
                buf, sizeof buf,
                "%.500s  created %.40s  seed %llu  %ld steps logged, %d evaluations (best %.2f%% at epoch %d), %ld events%s",
                e->path, e->info.created, (unsigned long long)e->info.seed, e->info.steps_logged, e->info.evals,
                isfinite(e->info.best_test_acc) ? 100 * e->info.best_test_acc : 0.0, e->info.best_epoch,
                e->info.events, al);
            draw_wrapped(stdscr, H - 3, 1, W - 2, 2, t->role[TH_DIM], buf);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// drawing helpers

static void panel(const Theme *t, View *v, Rect r, int focused, const char *prefix, int framed) {
    if (r.w <= 0 || r.h <= 0) return;
    WINDOW *w = newwin(r.h, r.w, r.y, r.x);
    if (!w) return;
    leaveok(w, TRUE);
    werase(w);
    if (framed) {
        char title[300], full[360];
        view_title(v, title, sizeof title);
        snprintf(full, sizeof full, "%s%s", prefix ? prefix : "", title);
        draw_frame(w, t, full, focused);
        view_draw(v, w, (Rect){1, 1, r.w - 2, r.h - 2});
    } else {
        view_draw(v, w, (Rect){0, 0, r.w, r.h});
    }
    wnoutrefresh(w);
    delwin(w);
}

static void draw_hint(Browser *b, int y, int W) {
    const Theme *t = &b->theme;
    draw_fill(stdscr, y, 0, W, A_NORMAL);
    if (b->input) {
        char buf[160];
        snprintf(buf, sizeof buf, "%s%s", b->input == '/' ? "filter: " : "go to epoch: ", b->inbuf);
        const int n = draw_text(stdscr, y, 0, W, t->role[TH_WARN] | A_BOLD, buf);
        draw_text(stdscr, y, n, W - n, t->role[TH_DIM], "  (Enter applies, Esc cancels)");
        return;
    }
    if (b->msg[0]) {
        draw_text(stdscr, y, 0, W, t->role[TH_WARN], b->msg);
        return;
    }
    const char *h =
        b->screen == SCR_LIST      ? "Enter open  m mark  c compare  s/S sort  / filter  r rescan  ? help  q quit"
        : b->screen == SCR_COMPARE ? "Left/Right epoch  Home/End  0-9 Enter epoch  p figures  ? help  Esc/q back"
        : b->screen == SCR_MULTI   ? "Left/Right epoch  Home/End  0-9 Enter epoch  l loss/acc  p figures  Esc/q back"
        : b->tsne_on               ? "c colour by class/expert  Left/Right epoch  t/Esc close  ? help"
                     : "Left/Right epoch  Home/End  0-9 Enter epoch  t t-SNE  tab focus  z zoom  ? help  Esc/q back";
    draw_text(stdscr, y, 0, W, t->role[TH_DIM], h);
}

static void draw_session(Browser *b, int W, int H) {
    Loaded *L = &b->a;
    Layout lay;
    panels_layout(&L->ps, &lay, W, H, b->zoom && !b->tsne_on ? b->focus : -1);
    if (b->tsne_on) { /* the t-SNE takes the panels' place */
        for (int p = PANEL_CURVES; p <= PANEL_LOG; p++) lay.r[p] = (Rect){0, 0, 0, 0};
        lay.strip = (Rect){0, 0, 0, 0};
    }
    panels_draw(&L->ps, &lay, b->focus, 0);
    if (b->tsne_on) {
        const int y0 = lay.r[PANEL_BANNER].h ? 3 : 2;
        char tag[64], pre[80] = "";
        panels_layer_tag(&L->ps, PANEL_HEATMAP, tag, sizeof tag); /* "moe2 (1/2)" with two or more layers */
        if (tag[0]) snprintf(pre, sizeof pre, "%s %s ", tag, b->theme.utf8 ? "\u00b7" : "-");
        panel(&b->theme, &b->tsne, (Rect){0, y0, W, H - 1 - y0}, 1, pre, 1);
    }
    draw_hint(b, H - 1, W);
}

static void draw_compare(Browser *b, int W, int H) {
    CompareLayout cl;
    layout_compare(&cl, W, H);
    const Theme *t = &b->theme;
    /* status: the two runs and the epoch */
    draw_fill(stdscr, 0, 0, W, t->role[TH_STATUS]);
    /* segments dropped whole when the row is short (draw_segs): the configurations first */
    const char *bar = t->utf8 ? "\u2502" : "|";
    char an[540], ac[160], bn[540], bc[160];
    snprintf(an, sizeof an, " %s A: %s", bar, b->a.name);
    snprintf(ac, sizeof ac, " (%s%s%s)", b->a.ctx.head, b->a.ctx.has_moe ? ", " : "",
             b->a.ctx.has_moe ? tau_kind_name(b->a.base.kind) : "");
    snprintf(bn, sizeof bn, " %s B: %s", bar, b->b.name);
    snprintf(bc, sizeof bc, " (%s%s%s)", b->b.ctx.head, b->b.ctx.has_moe ? ", " : "",
             b->b.ctx.has_moe ? tau_kind_name(b->b.base.kind) : "");
    const DrawSeg hs[5] = {{" moelab compare", 9}, {an, 8}, {ac, 2}, {bn, 8}, {bc, 2}};
    draw_segs(stdscr, 0, 0, W, t->role[TH_STATUS] | A_BOLD, hs, 5);
    char ep[64], ev[96], as[64], bs[64];
    snprintf(ep, sizeof ep, " epoch %d", b->cmp_epoch);
    snprintf(ev, sizeof ev, "  (A has %d evaluations, B %d)", b->a.h.nevals, b->b.h.nevals);
    snprintf(as, sizeof as, "   A: %s", b->a.h.info.status);
    snprintf(bs, sizeof bs, "   B: %s", b->b.h.info.status);
    const DrawSeg es[4] = {{ep, 9}, {ev, 2}, {as, 5}, {bs, 5}};
    draw_fill(stdscr, 1, 0, W, A_NORMAL);
    draw_segs(stdscr, 1, 0, W, A_BOLD, es, 4);
    panel(t, &b->a.ps.v[PANEL_CURVES], cl.r[CMP_CURVES], 0, NULL, 1);
    panel(t, &b->diff, cl.r[CMP_DIFF], 0, NULL, 1);
    if (b->a.ps.have[PANEL_HEATMAP]) panel(t, &b->a.ps.v[PANEL_HEATMAP], cl.r[CMP_HEAT_A], 0, "A: ", 1);
    else panel(t, &b->a.ps.v[PANEL_SCALARS], cl.r[CMP_HEAT_A], 0, "A: ", 1);
    if (b->b.ps.have[PANEL_HEATMAP]) panel(t, &b->b.ps.v[PANEL_HEATMAP], cl.r[CMP_HEAT_B], 0, "B: ", 1);
    else panel(t, &b->b.ps.v[PANEL_SCALARS], cl.r[CMP_HEAT_B], 0, "B: ", 1);
    draw_hint(b, H - 1, W);
}

/* Compare of 3..8 runs: curves overlaid (colour + glyph per run), the final metrics of each run
 * (its last evaluation), and the class x expert heatmaps of every run at the cursor's epoch. */
static void draw_multi(Browser *b, int W, int H) {
    const Theme *t = &b->theme;
    const int n = b->nmulti;
    char buf[600];
    draw_fill(stdscr, 0, 0, W, t->role[TH_STATUS]);
    snprintf(buf, sizeof buf, " moelab compare %s %d runs  epoch %d", t->utf8 ? "\u2502" : "|", n, b->cmp_epoch);
    draw_text(stdscr, 0, 0, W, t->role[TH_STATUS] | A_BOLD, buf);
    draw_fill(stdscr, 1, 0, W, A_NORMAL);
    /* one coloured segment per run: with its status when it fits, else the name alone, else
     * "…" and the rest are in the table below */
    int x = 1;
    for (int i = 0; i < n && x < W; i++) {
        const Loaded *L = &b->multi[i];
        const int room = W - x - (i + 1 < n ? 1 : 0); /* a cell for the "…" of later runs */
        snprintf(buf, sizeof buf, "%s %s: %s  ", view_multi_glyph(t, i), L->name, L->h.info.status);
        if (utf8_cells(buf) > room) snprintf(buf, sizeof buf, "%s %s  ", view_multi_glyph(t, i), L->name);
        if (utf8_cells(buf) > room && utf8_cells(buf) - 2 <= W - x && i + 1 == n)
            snprintf(buf, sizeof buf, "%s %s", view_multi_glyph(t, i), L->name);
        if (utf8_cells(buf) > room) {
            draw_text(stdscr, 1, x, W - x, t->role[TH_DIM], t->utf8 ? "\u2026" : "~");
            break;
        }
        x += draw_text(stdscr, 1, x, W - x, view_multi_attr(t, i), buf);
    }
    const int body = H - 3;
    int top = body / 2 > 12 ? body / 2 : body - 6 > 12 ? 12 : body - 6;
    if (top < 8) top = 8;
    int tw = W / 2 < 66 ? W / 2 : 66;
    panel(t, &b->mview, (Rect){0, 2, W - tw, top}, 0, NULL, 1);
    /* the final-metrics table */
    WINDOW *tw_ = newwin(top, tw, 2, W - tw);
    if (tw_) {
        leaveok(tw_, TRUE);
        werase(tw_);
        draw_frame(tw_, t, "Final metrics (last evaluation of each run)", 0);
        const int cw = tw - 2;
        int nw = cw - 50; /* the name column takes what the numbers leave */
        if (nw < 6) nw = 6;
        if (nw > 24) nw = 24;
        /* the number columns that fit, whole (the rest are named in the bottom border) */
        static const char *const head[] = {"epoch", "test%", "best%", "loss", "I(c;e)", "loadH", "dead"};
        static const int colw[] = {5, 7, 7, 7, 6, 5, 4};
        enum { NCOL = 7 };
        int ncol = 0, used = 2 + nw;
        while (ncol < NCOL && used + 1 + colw[ncol] <= cw) used += 1 + colw[ncol++];
        int o = snprintf(buf, sizeof buf, "  %-*s", nw, "run");
        for (int c = 0; c < ncol; c++) o += snprintf(buf + o, sizeof buf - (size_t)o, " %*s", colw[c], head[c]);
        draw_text(tw_, 1, 1, cw, t->role[TH_AXIS] | A_BOLD, buf);
        for (int i = 0; i < n && 2 + i < top - 1; i++) {
            const Loaded *L = &b->multi[i];
            const SessionHistory *h = &L->h;
            char name[128];
            if (utf8_cells(L->name) > nw)
                snprintf(name, sizeof name, "%.*s%s", nw - 1, L->name, t->utf8 ? "\u2026" : "~");
            else snprintf(name, sizeof name, "%.31s", L->name);
            int nl = (int)strlen(name);
            for (int pad = utf8_cells(name); pad < nw && nl + 1 < (int)sizeof name; pad++) name[nl++] = ' ';
            name[nl] = '\0';
            if (h->nevals == 0) {
                snprintf(buf, sizeof buf, "%s %s  no evaluation", view_multi_glyph(t, i), name);
            } else {
                const EvalRecord *e = &h->evals[h->nevals - 1];
                double best = 0;
                for (int k = 0; k < h->nevals; k++)
                    if (h->evals[k].test_acc > best) best = h->evals[k].test_acc;
                char cell[NCOL][24];
                snprintf(cell[0], sizeof cell[0], "%d", e->epoch);
                snprintf(cell[1], sizeof cell[1], "%.2f", 100 * e->test_acc);
                snprintf(cell[2], sizeof cell[2], "%.2f", 100 * best);
                snprintf(cell[3], sizeof cell[3], "%.4f", e->test_loss);
                snprintf(cell[4], sizeof cell[4], "%.3f", e->mutual_info);
                snprintf(cell[5], sizeof cell[5], "%.3f", e->test_load_entropy);
                if (L->ctx.has_moe) snprintf(cell[6], sizeof cell[6], "%d", e->dead_experts);
                else snprintf(cell[6], sizeof cell[6], "-");
                o = snprintf(buf, sizeof buf, "%s %s", view_multi_glyph(t, i), name);
                for (int c = 0; c < ncol; c++) o += snprintf(buf + o, sizeof buf - (size_t)o, " %*s", colw[c], cell[c]);
            }
            draw_text(tw_, 2 + i, 1, cw, view_multi_attr(t, i) & ~A_BOLD, buf);
        }
        char more[64] = "";
        if (n > top - 3)
            snprintf(more, sizeof more, "+%d runs %s%s", n - (top - 3), t->utf8 ? "\u25be" : "v",
                     ncol < NCOL ? " " : "");
        if (ncol < NCOL)
            snprintf(more + strlen(more), sizeof more - strlen(more), "+%d cols %s", NCOL - ncol,
                     t->utf8 ? "\u25b8" : ">");
        if (more[0]) draw_more(tw_, (Rect){1, 1, tw - 2, top - 2}, t, more);
        wnoutrefresh(tw_);
        delwin(tw_);
    }
    /* the heatmaps at the cursor's epoch: one row of up to 4, else two rows */
    const int rows = n > 4 ? 2 : 1, per = (n + rows - 1) / rows, hh = (body - top) / rows;
    for (int i = 0; i < n; i++) {
        Loaded *L = &b->multi[i];
        const int rr = i / per, cc = i % per, w0 = W / per;
        const Rect r = {cc * w0, 2 + top + rr * hh, cc == per - 1 ? W - cc * w0 : w0, hh};
        char pre[64];
        snprintf(pre, sizeof pre, "%s %.12s: ", view_multi_glyph(t, i), L->name);
        panel(t, L->ps.have[PANEL_HEATMAP] ? &L->ps.v[PANEL_HEATMAP] : &L->ps.v[PANEL_SCALARS], r, 0, pre, 1);
    }
    draw_hint(b, H - 1, W);
}

static void render(Browser *b) {
    int H, W;
    getmaxyx(stdscr, H, W);
    werase(stdscr);
    if (W < LAYOUT_MIN_W || H < LAYOUT_MIN_H) {
        char m[96];
        snprintf(m, sizeof m, "terminal too small (need %dx%d, have %dx%d)", LAYOUT_MIN_W, LAYOUT_MIN_H, W, H);
        draw_text(stdscr, H / 2, W > (int)strlen(m) ? (W - (int)strlen(m)) / 2 : 0, W, b->theme.role[TH_WARN] | A_BOLD,
                  m);
        wnoutrefresh(stdscr);
        doupdate();
        return;
    }
    if (b->screen == SCR_LIST) {
        draw_list(b, W, H);
        draw_hint(b, H - 1, W);
        wnoutrefresh(stdscr);
    } else {
        wnoutrefresh(stdscr);
        if (b->screen == SCR_SESSION) draw_session(b, W, H);
        else if (b->screen == SCR_MULTI) draw_multi(b, W, H);
        else draw_compare(b, W, H);
        wnoutrefresh(stdscr);
    }
    if (b->help_on) {
        int hw, hh;
        view_help_size_for(1, &hw, &hh);
        if (hw > W - 2) hw = W - 2;
        if (hh > H - 2) hh = H - 2;
        WINDOW *o = newwin(hh, hw, (H - hh) / 2, (W - hw) / 2);
        if (o) {
            werase(o);
            draw_frame(o, &b->theme, "Help: moelab browse (Esc, ? or q to close)", 2);
            view_draw(&b->help, o, (Rect){2, 1, hw - 4, hh - 2});
            wnoutrefresh(o);
            delwin(o);
        }
    }
    doupdate();
}

// ---------------------------------------------------------------------------------------------
// cursor and screens

static const char *cursor_note(Browser *b) {
    static char note[96];
    const SessionHistory *h = &b->a.h;
    if (h->nevals == 0) snprintf(note, sizeof note, "no evaluation yet");
    else
        snprintf(note, sizeof note, "evaluation %d of %d%s", b->ev + 1, h->nevals,
                 !strcmp(h->info.status, "running") ? (b->follow ? "  (following)" : "  (live)") : "");
    return note;
}

static void session_cursor(Browser *b) {
    apply_cursor(&b->a, b->ev, cursor_note(b));
    if (b->tsne_on && b->job.ev != b->ev) tsne_start(b, b->ev);
    b->dirty = 1;
}

static void compare_cursor(Browser *b) {
    const int ia = session_history_eval_at_epoch(&b->a.h, b->cmp_epoch);
    const int ib = session_history_eval_at_epoch(&b->b.h, b->cmp_epoch);
    apply_cursor(&b->a, ia, NULL);
    apply_cursor(&b->b, ib, NULL);
    view_diff_set(&b->diff, ia >= 0 ? &b->a.h.evals[ia] : NULL, ib >= 0 ? &b->b.h.evals[ib] : NULL);
    b->dirty = 1;
}

static int open_session(Browser *b, const char *path, const char *name) {
    char err[600];
    job_stop(&b->job);
    if (load_session(&b->a, path, name, &b->theme, 1, err, sizeof err)) {
        set_msg(b, "cannot open %s: %s", name, err);
        return -1;
    }
    view_free(&b->tsne);
    view_init(&b->tsne, &view_tsne_class, &b->a.ctx);
    b->ev = b->a.h.nevals - 1;
    b->follow = 1;
    b->focus = b->a.ctx.has_moe ? PANEL_HEATMAP : PANEL_CURVES;
    b->zoom = b->tsne_on = 0;
    b->screen = SCR_SESSION;
    b->refresh_at = ml_now() + REFRESH_SEC;
    b->msg[0] = 0;
    if (!strcmp(b->a.h.info.status, "running")) b->a.follow = session_follow_open(&b->a.h); /* NULL: re-read */
    session_cursor(b);
    return 0;
}

static int open_compare(Browser *b, const BrowseEntry *ea, const BrowseEntry *eb) {
    char err[600];
    job_stop(&b->job);
    if (load_session(&b->a, ea->path, ea->name, &b->theme, 1, err, sizeof err)) {
        set_msg(b, "cannot open %s: %s", ea->name, err);
        return -1;
    }
    if (load_session(&b->b, eb->path, eb->name, &b->theme, 1, err, sizeof err)) {
        set_msg(b, "cannot open %s: %s", eb->name, err);
        loaded_free(&b->a);
        return -1;
    }
    snprintf(b->a.ctx.slot_name[0], sizeof b->a.ctx.slot_name[0], "%.40s", ea->name);
    snprintf(b->a.ctx.slot_name[1], sizeof b->a.ctx.slot_name[1], "%.40s", eb->name);
    /* B's history overlaid on A's curves */
    for (long s = 0; s < b->b.h.nsteps; s++) {
        const ViewMsg m = {.kind = VIEW_MSG_STEP, .step = &b->b.h.steps[s], .slot = 1};
        view_update(&b->a.ps.v[PANEL_CURVES], &m);
    }
    for (int e = 0; e < b->b.h.nevals; e++) {
        const ViewMsg m = {.kind = VIEW_MSG_EVAL, .eval = &b->b.h.evals[e], .slot = 1};
        view_update(&b->a.ps.v[PANEL_CURVES], &m);
    }
    view_free(&b->diff);
    view_init(&b->diff, &view_diff_class, &b->a.ctx);
    const int la = b->a.h.nevals ? b->a.h.evals[b->a.h.nevals - 1].epoch : 0;
    const int lb = b->b.h.nevals ? b->b.h.evals[b->b.h.nevals - 1].epoch : 0;
    b->cmp_epoch = la < lb ? la : lb;
    if (b->cmp_epoch <= 0) b->cmp_epoch = la > lb ? la : lb;
    b->screen = SCR_COMPARE;
    b->msg[0] = 0;
    compare_cursor(b);
    return 0;
}

static void multi_free(Browser *b) {
    view_free(&b->mview);
    for (int i = 0; i < b->nmulti; i++) loaded_free(&b->multi[i]);
    free(b->multi);
    b->multi = NULL;
    b->nmulti = 0;
}

static void multi_cursor(Browser *b) {
    for (int i = 0; i < b->nmulti; i++) {
        Loaded *L = &b->multi[i];
        apply_cursor(L, session_history_eval_at_epoch(&L->h, b->cmp_epoch), NULL);
    }
    view_multi_cursor(&b->mview, b->cmp_epoch);
    b->dirty = 1;
}

/* Compare of 3..8 sessions: each loaded with its panels, their curves overlaid in mview. */
static int open_multi(Browser *b, const BrowseEntry *const *e, int n) {
    char err[600];
    job_stop(&b->job);
    multi_free(b);
    b->multi = calloc((size_t)n, sizeof *b->multi);
    if (!b->multi) {
        set_msg(b, "out of memory");
        return -1;
    }
    const char *names[VIEW_MULTI_MAX];
    for (int i = 0; i < n; i++) {
        if (load_session(&b->multi[i], e[i]->path, e[i]->name, &b->theme, 1, err, sizeof err)) {
            set_msg(b, "cannot open %s: %s", e[i]->name, err);
            b->nmulti = i;
            multi_free(b);
            return -1;
        }
        b->nmulti = i + 1;
        names[i] = e[i]->name;
    }
    if (view_init(&b->mview, &view_multi_class, &b->multi[0].ctx)) {
        multi_free(b);
        set_msg(b, "out of memory");
        return -1;
    }
    view_multi_set(&b->mview, n, names);
    int lo = 0, hi = 0;
    for (int i = 0; i < n; i++) {
        const SessionHistory *h = &b->multi[i].h;
        for (long s = 0; s < h->nsteps; s++) {
            const ViewMsg m = {.kind = VIEW_MSG_STEP, .step = &h->steps[s], .slot = i};
            view_update(&b->mview, &m);
        }
        for (int k = 0; k < h->nevals; k++) {
            const ViewMsg m = {.kind = VIEW_MSG_EVAL, .eval = &h->evals[k], .slot = i};
            view_update(&b->mview, &m);
        }
        const int last = h->nevals ? h->evals[h->nevals - 1].epoch : 0;
        if (i == 0 || (last > 0 && last < lo) || lo <= 0) lo = last;
        if (last > hi) hi = last;
    }
    b->cmp_epoch = lo > 0 ? lo : hi;
    b->screen = SCR_MULTI;
    b->msg[0] = 0;
    multi_cursor(b);
    return 0;
}

static void leave_to_list(Browser *b) {
    job_stop(&b->job);
    loaded_free(&b->a);
    loaded_free(&b->b);
    multi_free(b);
    b->screen = SCR_LIST;
    b->tsne_on = b->zoom = 0;
    b->msg[0] = 0;
    list_rescan(b);
}

/* A running session, every REFRESH_SEC: the follower appends what the writer added (only the new
 * rows are read) and the panels are fed those rows; when it cannot (no follower yet, the file
 * replaced, rows dropped by a resume, a read caught mid-write) the whole file is re-read and
 * followed from there. */
static void session_refresh(Browser *b) {
    if (b->screen != SCR_SESSION || !b->a.loaded) return;
    const double now = ml_now();
    if (now < b->refresh_at) return;
    b->refresh_at = now + REFRESH_SEC;
    if (strcmp(b->a.h.info.status, "running")) return;
    if (b->a.follow) {
        long added = 0;
        if (session_follow_poll(b->a.follow, &b->a.h, &added) == ML_OK) {
            if (!added && !strcmp(b->a.h.info.status, "running")) return;
            history_feed(&b->a.h, &b->a.ps, &b->a.fed, -1, NULL);
            if (strcmp(b->a.h.info.status, "running")) { /* finished, interrupted, failed: nothing more to follow */
                session_follow_close(b->a.follow);
                b->a.follow = NULL;
            }
            if (b->follow || b->ev >= b->a.h.nevals) b->ev = b->a.h.nevals - 1;
            session_cursor(b);
            return;
        }
        session_follow_close(b->a.follow); /* re-read the whole file below */
        b->a.follow = NULL;
    } else {
        SessionInfo i;
        if (session_read_info(b->a.h.path, &i) != ML_OK) return; /* mid-write: try again next time */
        const SessionInfo *o = &b->a.h.info;
        if (i.steps_logged == o->steps_logged && i.evals == o->evals && i.events == o->events &&
            !strcmp(i.status, o->status))
            return;
    }
    char path[1024], name[512], err[600];
    snprintf(path, sizeof path, "%s", b->a.h.path);
    snprintf(name, sizeof name, "%s", b->a.name);
    const int focus = b->focus, zoom = b->zoom, follow = b->follow;
    const int old_ev = b->ev;
    const double t0 = ml_now();
    const int rc = load_session(&b->a, path, name, &b->theme, 0, err, sizeof err);
    /* a long history takes a while to re-read: keep that under ~20% of the time */
    const double took = ml_now() - t0;
    if (b->refresh_at < now + 5 * took) b->refresh_at = now + 5 * took;
    if (rc) {
        set_msg(b, "re-reading %s: %s (trying again)", name, err);
        b->screen = SCR_SESSION;
        return;
    }
    b->ev = follow || old_ev >= b->a.h.nevals ? b->a.h.nevals - 1 : old_ev;
    b->focus = focus;
    b->zoom = zoom;
    if (!strcmp(b->a.h.info.status, "running")) b->a.follow = session_follow_open(&b->a.h); /* NULL: re-read */
    session_cursor(b);
}

// ---------------------------------------------------------------------------------------------
// keys

static void goto_epoch(Browser *b, int epoch) {
    if (b->screen == SCR_MULTI) {
        b->cmp_epoch = epoch;
        multi_cursor(b);
        return;
    }
    if (b->screen == SCR_COMPARE) {
        b->cmp_epoch = epoch;
        compare_cursor(b);
        return;
    }
    const int ev = session_history_eval_at_epoch(&b->a.h, epoch);
    if (ev < 0) {
        set_msg(b, "no evaluation at or before epoch %d", epoch);
        return;
    }
    b->ev = ev;
    b->follow = ev == b->a.h.nevals - 1;
    session_cursor(b);
}

static int max_epoch(Browser *b) {
    int m = b->a.h.nevals ? b->a.h.evals[b->a.h.nevals - 1].epoch : 0;
    for (int i = 0; b->screen == SCR_MULTI && i < b->nmulti; i++) {
        const SessionHistory *h = &b->multi[i].h;
        if (h->nevals && h->evals[h->nevals - 1].epoch > m) m = h->evals[h->nevals - 1].epoch;
    }
    if (b->screen == SCR_COMPARE && b->b.h.nevals) {
        const int mb = b->b.h.evals[b->b.h.nevals - 1].epoch;
        if (mb > m) m = mb;
    }
    return m;
}

static void move_cursor(Browser *b, int delta, int to) {
    if (b->screen == SCR_COMPARE || b->screen == SCR_MULTI) {
        const int me = max_epoch(b);
        int e = to < 0 ? 1 : to > 0 ? me : b->cmp_epoch + delta;
        if (e < 1) e = 1;
        if (e > me) e = me;
        b->cmp_epoch = e;
        if (b->screen == SCR_MULTI) multi_cursor(b);
        else compare_cursor(b);
        return;
    }
    const int n = b->a.h.nevals;
    if (n == 0) return;
    int ev = to < 0 ? 0 : to > 0 ? n - 1 : b->ev + delta;
    if (ev < 0) ev = 0;
    if (ev > n - 1) ev = n - 1;
    b->ev = ev;
    b->follow = ev == n - 1;
    session_cursor(b);
}

/* Returns 1 to quit the browser. */
static int key_input(Browser *b, int c) {
    const size_t len = strlen(b->inbuf);
    if (c == 27 || c == 7) { /* Esc, Ctrl-G */
        if (b->input == '/') {
            b->filter[0] = 0;
            list_rows(b);
        }
        b->input = 0;
    } else if (c == '\n' || c == '\r' || c == KEY_ENTER) {
        if (b->input == '/') {
            snprintf(b->filter, sizeof b->filter, "%s", b->inbuf);
            b->sel = 0;
            list_rows(b);
        } else if (len) goto_epoch(b, atoi(b->inbuf));
        b->input = 0;
    } else if (c == KEY_BACKSPACE || c == 127 || c == 8) {
        if (len) b->inbuf[len - 1] = 0;
        else b->input = 0;
    } else if (c >= 32 && c < 127 && len + 1 < sizeof b->inbuf && (b->input == '/' || (c >= '0' && c <= '9'))) {
        b->inbuf[len] = (char)c;
        b->inbuf[len + 1] = 0;
        if (b->input == '/') {
            snprintf(b->filter, sizeof b->filter, "%s", b->inbuf);
            b->sel = 0;
            list_rows(b);
        }
    }
    b->dirty = 1;
    return 0;
}

static int key_list(Browser *b, int c) {
    const int H = getmaxy(stdscr);
    const int page = H - 6 > 1 ? H - 6 : 1;
    switch (c) {
    case 'q': return 1;
    case KEY_UP:
    case 'k': b->sel--; break;
    case KEY_DOWN:
    case 'j': b->sel++; break;
    case KEY_PPAGE: b->sel -= page; break;
    case KEY_NPAGE: b->sel += page; break;
    case KEY_HOME:
    case KEY_FIND:
    case 'g': b->sel = 0; break;
    case KEY_END:
    case KEY_SELECT:
    case 'G': b->sel = b->nrows - 1; break;
    case 's':
        b->sort_col = (b->sort_col + 1) % BCOL_COUNT;
        browse_list_sort(&b->list, b->sort_col, b->sort_rev);
        list_rows(b);
        break;
    case 'S':
        b->sort_rev = !b->sort_rev;
        browse_list_sort(&b->list, b->sort_col, b->sort_rev);
        list_rows(b);
        break;
    case '/':
        b->input = '/';
        snprintf(b->inbuf, sizeof b->inbuf, "%.63s", b->filter);
        break;
    case 27:
        if (b->filter[0]) {
            b->filter[0] = 0;
            list_rows(b);
        }
        break;
    case 'r':
        list_rescan(b);
        set_msg(b, "rescanned: %d sessions", b->list.n);
        break;
    case ' ':
    case 'm':
        if (b->nrows > 0) {
            BrowseEntry *e = &b->list.e[b->rows[b->sel]];
            int marked = 0;
            for (int i = 0; i < b->list.n; i++) marked += b->list.e[i].marked;
            if (!e->marked && marked >= MARK_MAX)
                set_msg(b, "%d sessions are marked already: unmark one (m) first", MARK_MAX);
            else e->marked = !e->marked;
            if (c == ' ' || c == 'm') b->sel++;
        }
        break;
    case 'c': {
        const BrowseEntry *m[MARK_MAX] = {NULL};
        int nm = 0;
        for (int i = 0; i < b->list.n && nm < MARK_MAX; i++)
            if (b->list.e[i].marked) m[nm++] = &b->list.e[i];
        if (nm >= 3) {
            open_multi(b, m, nm);
            break;
        }
        if (nm == 1 && b->nrows > 0 && &b->list.e[b->rows[b->sel]] != m[0]) m[nm++] = &b->list.e[b->rows[b->sel]];
        if (nm < 2) {
            set_msg(b, "mark 2 to 8 sessions with m (or mark one and select the other), then c");
            break;
        }
        open_compare(b, m[0], m[1]);
        break;
    }
    case '\n':
    case '\r':
    case KEY_ENTER:
        if (b->nrows > 0) {
            const BrowseEntry *e = &b->list.e[b->rows[b->sel]];
            if (!e->ok) set_msg(b, "cannot open %s: %s", e->name, e->err);
            else open_session(b, e->path, e->name);
        }
        break;
    default: return 0;
    }
    if (b->sel >= b->nrows) b->sel = b->nrows - 1;
    if (b->sel < 0) b->sel = 0;
    b->dirty = 1;
    return 0;
}

/* `p`: the figures of what is on screen (the session, the two compared, or the 3..8 compared) as PDF and PNG, at the
 * cursor's epoch, by `moelab plot` (app/plot.c) in this process; the hint row says where. */
static void export_figures(Browser *b) {
    const char *in[VIEW_MULTI_MAX] = {b->a.h.path, b->b.h.path};
    int n = b->screen == SCR_COMPARE ? 2 : 1;
    int epoch = b->ev >= 0 && b->ev < b->a.h.nevals ? b->a.h.evals[b->ev].epoch : -1;
    if (b->screen == SCR_MULTI) { /* the 3..8 compared: the multi-run figures at the cursor's epoch */
        n = b->nmulti < VIEW_MULTI_MAX ? b->nmulti : VIEW_MULTI_MAX;
        for (int i = 0; i < n; i++) in[i] = b->multi[i].h.path;
        epoch = b->cmp_epoch > 0 ? b->cmp_epoch : -1;
    }
    char msg[1024];
    int rc = plot_run(in, n, NULL, PLOT_PDF | PLOT_PNG, epoch, 0, msg, sizeof msg);
    if (rc == 2 && epoch >= 0) rc = plot_run(in, n, NULL, PLOT_PDF | PLOT_PNG, -1, 0, msg, sizeof msg);
    set_msg(b, rc ? "p: figures failed: %s" : "p: figures written: %s (pdf, png)", msg);
}

static int key_view(Browser *b, int c) {
    const int back = c == 'q' || c == 27 || c == KEY_BACKSPACE || c == 127;
    if (b->tsne_on && (back || c == 't')) {
        b->tsne_on = 0;
        job_stop(&b->job);
        b->dirty = 1;
        return 0;
    }
    if (back) {
        if (b->direct) return 1;
        leave_to_list(b);
        return 0;
    }
    switch (c) {
    case KEY_LEFT:
    case 'h': move_cursor(b, -1, 0); break;
    case KEY_RIGHT:
    case 'l':
        if (c == 'l' && b->screen == SCR_MULTI) {
            view_on_key(&b->mview, 'l');
            break;
        }
        if (c == 'l' && b->screen == SCR_SESSION && !b->tsne_on &&
            (b->focus == PANEL_CURVES || b->focus == PANEL_TEMP) && b->a.ps.have[b->focus]) {
            view_on_key(&b->a.ps.v[b->focus], 'l'); /* log axis of the curves or the temperature */
            break;
        }
        move_cursor(b, +1, 0);
        break;
    case KEY_HOME:
    case KEY_FIND:
    case 'g': move_cursor(b, 0, -1); break;
    case KEY_END:
    case KEY_SELECT:
    case 'G': move_cursor(b, 0, +1); break;
    case KEY_PPAGE: move_cursor(b, -5, 0); break;
    case KEY_NPAGE: move_cursor(b, +5, 0); break;
    case 't':
        if (b->screen != SCR_SESSION) break;
        b->tsne_on = 1;
        tsne_start(b, b->ev);
        break;
    case 'c':
        if (b->tsne_on) view_on_key(&b->tsne, 'c');
        break;
    case 'p': export_figures(b); break;
    case 'm': /* smoothing of the loss curves */
        if (!b->tsne_on && b->a.ps.have[PANEL_CURVES]) view_on_key(&b->a.ps.v[PANEL_CURVES], 'm');
        break;
    case '\t':
        if (b->screen == SCR_SESSION && !b->tsne_on) {
            int H, W;
            getmaxyx(stdscr, H, W);
            Layout plain;
            panels_layout(&b->a.ps, &plain, W, H, -1);
            const int nf = layout_next_focus(&plain, b->focus);
            if (nf >= 0) b->focus = nf;
        }
        break;
    case 'z':
        if (b->screen == SCR_SESSION) b->zoom = !b->zoom;
        break;
    case '[':
    case ']':
    case '{':
    case '}':
        if (b->screen != SCR_SESSION) break;
        if (!b->tsne_on) panels_key(&b->a.ps, b->focus, c);
        else if ((c == '[' || c == ']') && panels_cycle(&b->a.ps, c == ']' ? 1 : -1))
            tsne_start(b, b->ev); /* the t-SNE of the other layer */
        break;
    default:
        if (c >= '0' && c <= '9') {
            b->input = '#';
            b->inbuf[0] = (char)c;
            b->inbuf[1] = 0;
        } else {
            return 0;
        }
    }
    b->dirty = 1;
    return 0;
}

static int handle_key(Browser *b, int c) {
    if (c == KEY_RESIZE) {
        b->dirty = 1;
        return 0;
    }
    if (c == 12) {
        clearok(curscr, TRUE);
        b->dirty = 1;
        return 0;
    }
    if (b->help_on) {
        if (c == 27 || c == '?' || c == 'q') b->help_on = 0;
        b->dirty = 1;
        return 0;
    }
    if (b->input) return key_input(b, c);
    if (c == '?') {
        b->help_on = 1;
        b->dirty = 1;
        return 0;
    }
    if (b->msg[0]) {
        b->msg[0] = 0;
        b->dirty = 1;
    }
    return b->screen == SCR_LIST ? key_list(b, c) : key_view(b, c);
}

/* getch, with escape sequences the terminal description does not know (Home as ESC [ 1 ~ under
 * another TERM, ...) mapped to keys where they are standard and swallowed otherwise, so their
 * ESC is never taken for the Esc key. */
static int read_key(void) {
    const int c = getch();
    if (c != 27) return c;
    const int c2 = getch();
    if (c2 == ERR) return 27;
    if (c2 != '[' && c2 != 'O') {
        ungetch(c2);
        return 27;
    }
    char seq[16];
    int n = 0, k;
    while ((k = getch()) != ERR && n < (int)sizeof seq - 1) {
        seq[n++] = (char)k;
        if (k >= 0x40 && k <= 0x7e) break;
    }
    seq[n] = 0;
    if (!strcmp(seq, "H") || !strcmp(seq, "1~") || !strcmp(seq, "7~")) return KEY_HOME;
    if (!strcmp(seq, "F") || !strcmp(seq, "4~") || !strcmp(seq, "8~")) return KEY_END;
    if (!strcmp(seq, "A")) return KEY_UP;
    if (!strcmp(seq, "B")) return KEY_DOWN;
    if (!strcmp(seq, "C")) return KEY_RIGHT;
    if (!strcmp(seq, "D")) return KEY_LEFT;
    if (!strcmp(seq, "5~")) return KEY_PPAGE;
    if (!strcmp(seq, "6~")) return KEY_NPAGE;
    return KEY_RESIZE; /* unknown: a harmless redraw */
}

// ---------------------------------------------------------------------------------------------
// plain output and the entry point

static void print_list(BrowseList *l, const char *filter) {
    static const int w[BCOL_COUNT] = {-28, -14, -8, -11, -8, 6, 6, 6, -11, -9, -16};
    for (int c = 0; c < BCOL_COUNT; c++) printf("%*s ", w[c], browse_col_name(c));
    printf("\n");
    for (int i = 0; i < l->n; i++) {
        const BrowseEntry *e = &l->e[i];
        if (!browse_entry_match(e, filter)) continue;
        char cells[BCOL_COUNT][64];
        browse_entry_cells(e, cells);
        for (int c = 0; c < BCOL_COUNT; c++) printf("%*s ", w[c], cells[c]);
        printf("\n");
        if (e->err[0]) printf("    %s: %s\n", e->ok ? "note" : "cannot read", e->err);
    }
}

static void usage(FILE *f) {
    fprintf(
        f,
        "usage: moelab browse [DIR | SESSION_DIR | FILE.h5 | sweep.h5] [--list] [--sort COLUMN] [--reverse] [--filter TEXT]\n\n"
        "Browses saved sessions (default DIR: $MOELAB_SESSIONS, else runs/). A folder holding\n"
        "live.h5, or an .h5 session file, opens that session directly; a sweep.h5 lists the\n"
        "sweep's runs. Without a terminal, or with --list, prints the list instead. COLUMN: name\n"
        "dataset head experts schedule best last epochs status alarms created (alarms: episodes by\n"
        "severity from the event log, 2C 1W 1D = collapses, warnings, expert deaths). Keys: ? in the browser.\n");
}

static int is_session_dir(const char *p) {
    char f[1200];
    struct stat sb;
    snprintf(f, sizeof f, "%s/live.h5", p);
    return stat(f, &sb) == 0 && S_ISREG(sb.st_mode);
}

/* The command line of `moelab browse`. */
typedef struct {
    const char *root; /* DIR, SESSION_DIR, FILE.h5 or sweep.h5 (default: sessions_root()) */
    int given;        /* root was on the command line */
    const char *filter;
    int list_only, sort_col, reverse;
} BrowseArgs;

/* Parses argv into a: -1 to go on, else the exit status (0 after --help, 2 on bad usage). */
static int parse_args(int argc, char **argv, BrowseArgs *a) {
    memset(a, 0, sizeof *a);
    a->filter = "";
    a->sort_col = BCOL_CREATED;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(stdout);
            return 0;
        }
        if (!strcmp(argv[i], "--list")) a->list_only = 1;
        else if (!strcmp(argv[i], "--reverse")) a->reverse = 1;
        else if (!strcmp(argv[i], "--sort") && i + 1 < argc) {
            a->sort_col = browse_col_parse(argv[++i]);
            if (a->sort_col < 0) {
                fprintf(stderr, "moelab browse: unknown column '%s'\n", argv[i]);
                usage(stderr);
                return 2;
            }
        } else if (!strcmp(argv[i], "--filter") && i + 1 < argc) a->filter = argv[++i];
        else if (argv[i][0] == '-') {
            fprintf(stderr, "moelab browse: unknown option '%s'\n", argv[i]);
            usage(stderr);
            return 2;
        } else if (!a->root) a->root = argv[i];
        else {
            fprintf(stderr, "moelab browse: one folder or file only\n");
            return 2;
        }
    }
    a->given = a->root != NULL;
    if (!a->root) a->root = sessions_root();
    return -1;
}

/* What root is: *is_h5 for an .h5 file, *direct for one session (a folder holding live.h5, or a
 * file that is not a sweep.h5). 0, or 1 (with a message) when root cannot be read. */
static int inspect_root(const char *root, int given, int *is_h5, int *direct) {
    struct stat sb;
    if (stat(root, &sb) != 0) {
        fprintf(
            stderr, "moelab browse: %s: %s%s\n", root, strerror(errno),
            given
                ? ""
                : " (moelab train writes sessions under $MOELAB_SESSIONS, else runs/ of the folder it runs in; give the "
                  "folder to browse)");
        return 1;
    }
    const size_t rl = strlen(root);
    *is_h5 = S_ISREG(sb.st_mode) && rl > 3 && !strcmp(root + rl - 3, ".h5");
    *direct = is_session_dir(root) || (S_ISREG(sb.st_mode) && !*is_h5);
    SessionInfo probe;
    /* a session file, not a sweep (read in a child first: one that crashes the HDF5 library is
     * taken as a session, and browse_load reports it) */
    if (*is_h5 && (session_probe(root, SESSION_PROBE_INFO) != ML_OK || session_read_info(root, &probe) == ML_OK))
        *direct = 1;
    return 0;
}

/* --list (or no terminal) on one session: its row of the list. */
static void print_session(const char *root) {
    BrowseList l = {0};
    BrowseEntry e;
    memset(&e, 0, sizeof e);
    snprintf(e.name, sizeof e.name, "%s", root);
    snprintf(e.path, sizeof e.path, "%s", root);
    browse_entry_read(&e, (double)time(NULL));
    l.e = &e;
    l.n = 1;
    print_list(&l, "");
}

/* Reads what the browser starts from: checks that the one session given reads, or scans the list
 * (and a sweep.h5's summary). With print (--list, or no terminal) prints the list instead of
 * browsing it. Returns -1 to open the screen, else the exit status. */
static int browse_load(Browser *b, const BrowseArgs *a, int is_h5, int direct, int print) {
    if (direct) {
        /* one session: check it reads before opening the screen */
        SessionInfo i;
        if (session_probe(a->root, SESSION_PROBE_INFO) != ML_OK || session_read_info(a->root, &i) != ML_OK) {
            fprintf(stderr, "moelab browse: %s\n", ml_last_error());
            return 1;
        }
        if (print) {
            print_session(a->root);
            return 0;
        }
        return -1;
    }
    if (browse_list_scan(&b->list, a->root)) {
        fprintf(stderr, "moelab browse: %s\n", ml_last_error());
        return 1;
    }
    browse_list_sort(&b->list, a->sort_col, a->reverse);
    if (is_h5 && sweep_h5_read(a->root, &b->sweep) == ML_OK) b->have_sweep = 1;
    if (!print) return -1;
    print_list(&b->list, a->filter);
    int damaged = 0;
    for (int i = 0; i < b->list.n; i++) damaged += !b->list.e[i].ok;
    printf("%d sessions, %d unreadable\n", b->list.n, damaged);
    return 0;
}

/* Opens the terminal in the browser's modes, with its theme and help overlay. NULL (with a
 * message) when the terminal cannot be opened. */
static SCREEN *screen_open(Browser *b) {
    setlocale(LC_ALL, "");
    b->utf8 = !strcmp(nl_langinfo(CODESET), "UTF-8");
    SCREEN *scr = newterm(NULL, stdout, stdin);
    if (!scr) {
        fprintf(stderr, "moelab browse: cannot open the terminal '%s' (use --list)\n",
                getenv("TERM") ? getenv("TERM") : "");
        return NULL;
    }
    g_curses = 1;
    atexit(restore_terminal);
    cbreak();
    noecho();
    nonl();
    keypad(stdscr, TRUE);
    nodelay(stdscr, TRUE);
    set_escdelay(25);
    curs_set(0);
    theme_init(&b->theme, b->utf8, 0);
    memset(&b->help_ctx, 0, sizeof b->help_ctx);
    b->help_ctx.theme = &b->theme;
    b->help_ctx.browse = 1;
    view_init(&b->help, &view_help_class, &b->help_ctx);
    return scr;
}

/* The handlers replaced while the screen is open: SIGINT, SIGTERM and SIGHUP end the loop. */
typedef struct {
    struct sigaction oi, ot, oh;
} SavedSignals;

static void signals_catch(SavedSignals *s) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sig;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &s->oi);
    sigaction(SIGTERM, &sa, &s->ot);
    sigaction(SIGHUP, &sa, &s->oh);
}

static void signals_restore(const SavedSignals *s) {
    sigaction(SIGINT, &s->oi, NULL);
    sigaction(SIGTERM, &s->ot, NULL);
    sigaction(SIGHUP, &s->oh, NULL);
}

/* The first screen: the session given (0, or -1 with the terminal restored and a message when
 * it does not open), or the list. */
static int screen_first(Browser *b, const char *root, int direct) {
    if (direct) {
        b->direct = 1;
        if (open_session(b, root, root)) {
            restore_terminal();
            fprintf(stderr, "moelab browse: %s\n", b->msg);
            return -1;
        }
    } else {
        list_rows(b);
        b->list_read_at = ml_now();
    }
    return 0;
}

/* Handles the keys waiting; 1 if one of them quits. */
static int read_keys(Browser *b) {
    for (int guard = 0; guard < 1024; guard++) {
        const int c = read_key();
        if (c == ERR) break;
        if (handle_key(b, c)) return 1;
    }
    return 0;
}

/* On the list screen, every LIST_REFRESH_SEC: the running sessions' rows follow their progress
 * (r rescans everything). */
static void list_follow_running(Browser *b) {
    if (b->screen == SCR_LIST && ml_now() - b->list_read_at > LIST_REFRESH_SEC) {
        const double t0 = ml_now();
        for (int i = 0; i < b->list.n; i++)
            if (!strcmp(b->list.e[i].status, "running")) {
                browse_entry_read(&b->list.e[i], (double)time(NULL));
                b->dirty = 1;
            }
        b->list_read_at = ml_now() + 4 * (ml_now() - t0);
    }
}

/* The event loop: draws, waits for keys, polls the t-SNE worker and re-reads running sessions
 * until a key quits, a signal arrives or the terminal hangs up. Returns the exit status. */
static int browse_loop(Browser *b) {
    b->dirty = 1;
    for (;;) {
        if (g_sig) return g_sig == SIGINT ? 0 : 128 + g_sig;
        if (b->dirty) {
            render(b);
            b->dirty = 0;
        }
        struct pollfd pf = {.fd = STDIN_FILENO, .events = POLLIN};
        const int timeout = b->job.running ? 100 : 250;
        const int pr = poll(&pf, 1, timeout);
        if (pr < 0 && errno != EINTR) return 0;
        if (pr > 0 && (pf.revents & (POLLHUP | POLLERR | POLLNVAL))) return 128 + SIGHUP;
        if (read_keys(b)) return 0;
        tsne_poll(b);
        session_refresh(b);
        list_follow_running(b);
    }
}

/* Stops the t-SNE worker, frees the views and closes the terminal. */
static void screen_close(Browser *b, SCREEN *scr) {
    job_stop(&b->job);
    loaded_free(&b->a);
    loaded_free(&b->b);
    multi_free(b);
    view_free(&b->help);
    view_free(&b->tsne);
    view_free(&b->diff);
    restore_terminal();
    delscreen(scr);
}

static void browser_free(Browser *b) {
    browse_list_free(&b->list);
    if (b->have_sweep) sweep_summary_free(&b->sweep);
    free(b->rows);
    free(b);
}

int cmd_browse(int argc, char **argv) {
    BrowseArgs a;
    int rc = parse_args(argc, argv, &a);
    if (rc >= 0) return rc;
    const int tty = isatty(STDIN_FILENO) && isatty(STDOUT_FILENO);
    int is_h5, direct;
    if (inspect_root(a.root, a.given, &is_h5, &direct)) return 1;
    Browser *b = calloc(1, sizeof *b);
    if (!b) {
        fprintf(stderr, "moelab browse: out of memory\n");
        return 1;
    }
    b->root = a.root;
    b->sort_col = a.sort_col;
    b->sort_rev = a.reverse;
    b->job.ev = -1;
    snprintf(b->filter, sizeof b->filter, "%s", a.filter);
    rc = browse_load(b, &a, is_h5, direct, !tty || a.list_only);
    if (rc >= 0) {
        browser_free(b);
        return rc;
    }

    // ---- the screen
    SCREEN *scr = screen_open(b);
    if (!scr) {
        browser_free(b);
        return 1;
    }
    SavedSignals sigs;
    signals_catch(&sigs);
    rc = screen_first(b, a.root, direct) ? 1 : browse_loop(b);
    screen_close(b, scr);
    signals_restore(&sigs);
    browser_free(b);
    return rc;
}
