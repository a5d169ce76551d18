/* browse_session.c — the browser's sessions: the list screen's rows (filter, rescan), loading one
 * into the live screen's panels, the log rebuilt at the cursor, opening a session, a comparison of
 * two or of 3-8 runs, the epoch cursor of each screen, and re-reading a running session (see
 * browse.c). */
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

void browse_set_msg(Browser *b, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(b->msg, sizeof b->msg, fmt, ap);
    va_end(ap);
    b->dirty = 1;
}

// ---------------------------------------------------------------------------------------------
// the list screen's rows: the filter applied, and a rescan that keeps marks and selection

void browse_list_rows(Browser *b) {
    free(b->rows);
    b->rows = malloc(sizeof *b->rows * (b->list.n ? b->list.n : 1));
    b->nrows = 0;
    if (!b->rows) return;
    for (int i = 0; i < b->list.n; i++)
        if (browse_entry_match(&b->list.e[i], b->filter)) b->rows[b->nrows++] = i;
    if (b->sel >= b->nrows) b->sel = b->nrows - 1;
    if (b->sel < 0) b->sel = 0;
}

void browse_list_rescan(Browser *b) {
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
    if (browse_list_scan(&b->list, b->root)) browse_set_msg(b, "%s", ml_last_error());
    browse_list_sort(&b->list, b->sort_col, b->sort_rev);
    for (int i = 0; i < b->list.n; i++)
        for (int m = 0; m < nm; m++)
            if (!strcmp(b->list.e[i].path, marks[m])) b->list.e[i].marked = 1;
    free(marks);
    browse_list_rows(b);
    for (int r = 0; r < b->nrows; r++)
        if (!strcmp(b->list.e[b->rows[r]].path, sel_path)) b->sel = r;
    b->list_read_at = ml_now();
    b->dirty = 1;
}

// ---------------------------------------------------------------------------------------------
// loading a session into views

void browse_loaded_free(Loaded *L) {
    session_follow_close(L->follow);
    L->follow = NULL;
    panels_free(&L->ps);
    session_history_free(&L->h);
    free(L->drops);
    L->drops = NULL;
    L->loaded = 0;
}

/* The drops per class x expert of every evaluation (issue 29: the heatmap's `d` view), read after
 * the history: an evaluation whose row has none (dense and soft heads, a session from before they
 * were recorded, a row not written yet) keeps drop_class_expert NULL. */
static void load_drops(Loaded *L, const char *path) {
    SessionHistory *h = &L->h;
    const size_t ke = (size_t)h->K * (size_t)h->E;
    if (ke == 0 || h->nevals <= 0) return;
    L->drops = calloc((size_t)h->nevals * ke, sizeof *L->drops);
    if (!L->drops) return;
    for (int i = 0; i < h->nevals; i++)
        if (session_read_drops(path, NULL, i, h->K, h->E, L->drops + (size_t)i * ke) == ML_OK)
            h->evals[i].moe.drop_class_expert = L->drops + (size_t)i * ke;
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
    browse_loaded_free(L);
    if (probe && browse_probe_history(path, err, errn)) return -1;
    if (session_history_load(path, &L->h) != ML_OK) {
        snprintf(err, errn, "%s", ml_last_error());
        return -1;
    }
    snprintf(L->name, sizeof L->name, "%s", name);
    load_drops(L, path);
    fill_ctx(L, theme);
    if (panels_init(&L->ps, &L->ctx)) {
        snprintf(err, errn, "out of memory");
        browse_loaded_free(L);
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

void browse_session_cursor(Browser *b) {
    apply_cursor(&b->a, b->ev, cursor_note(b));
    if (b->tsne_on && b->job.ev != b->ev) browse_tsne_start(b, b->ev);
    b->dirty = 1;
}

void browse_compare_cursor(Browser *b) {
    const int ia = session_history_eval_at_epoch(&b->a.h, b->cmp_epoch);
    const int ib = session_history_eval_at_epoch(&b->b.h, b->cmp_epoch);
    apply_cursor(&b->a, ia, NULL);
    apply_cursor(&b->b, ib, NULL);
    view_diff_set(&b->diff, ia >= 0 ? &b->a.h.evals[ia] : NULL, ib >= 0 ? &b->b.h.evals[ib] : NULL);
    b->dirty = 1;
}

int browse_open_session(Browser *b, const char *path, const char *name) {
    char err[600];
    browse_job_stop(&b->job);
    if (load_session(&b->a, path, name, &b->theme, 1, err, sizeof err)) {
        browse_set_msg(b, "cannot open %s: %s", name, err);
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
    browse_session_cursor(b);
    return 0;
}

int browse_open_compare(Browser *b, const BrowseEntry *ea, const BrowseEntry *eb) {
    char err[600];
    browse_job_stop(&b->job);
    if (load_session(&b->a, ea->path, ea->name, &b->theme, 1, err, sizeof err)) {
        browse_set_msg(b, "cannot open %s: %s", ea->name, err);
        return -1;
    }
    if (load_session(&b->b, eb->path, eb->name, &b->theme, 1, err, sizeof err)) {
        browse_set_msg(b, "cannot open %s: %s", eb->name, err);
        browse_loaded_free(&b->a);
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
    browse_compare_cursor(b);
    return 0;
}

void browse_multi_free(Browser *b) {
    view_free(&b->mview);
    for (int i = 0; i < b->nmulti; i++) browse_loaded_free(&b->multi[i]);
    free(b->multi);
    b->multi = NULL;
    b->nmulti = 0;
}

void browse_multi_cursor(Browser *b) {
    for (int i = 0; i < b->nmulti; i++) {
        Loaded *L = &b->multi[i];
        apply_cursor(L, session_history_eval_at_epoch(&L->h, b->cmp_epoch), NULL);
    }
    view_multi_cursor(&b->mview, b->cmp_epoch);
    b->dirty = 1;
}

/* Compare of 3..8 sessions: each loaded with its panels, their curves overlaid in mview. */
int browse_open_multi(Browser *b, const BrowseEntry *const *e, int n) {
    char err[600];
    browse_job_stop(&b->job);
    browse_multi_free(b);
    b->multi = calloc((size_t)n, sizeof *b->multi);
    if (!b->multi) {
        browse_set_msg(b, "out of memory");
        return -1;
    }
    const char *names[VIEW_MULTI_MAX];
    for (int i = 0; i < n; i++) {
        if (load_session(&b->multi[i], e[i]->path, e[i]->name, &b->theme, 1, err, sizeof err)) {
            browse_set_msg(b, "cannot open %s: %s", e[i]->name, err);
            b->nmulti = i;
            browse_multi_free(b);
            return -1;
        }
        b->nmulti = i + 1;
        names[i] = e[i]->name;
    }
    if (view_init(&b->mview, &view_multi_class, &b->multi[0].ctx)) {
        browse_multi_free(b);
        browse_set_msg(b, "out of memory");
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
    browse_multi_cursor(b);
    return 0;
}

void browse_leave_to_list(Browser *b) {
    browse_job_stop(&b->job);
    browse_loaded_free(&b->a);
    browse_loaded_free(&b->b);
    browse_multi_free(b);
    b->screen = SCR_LIST;
    b->tsne_on = b->zoom = 0;
    b->msg[0] = 0;
    browse_list_rescan(b);
}

/* A running session, every REFRESH_SEC: the follower appends what the writer added (only the new
 * rows are read) and the panels are fed those rows; when it cannot (no follower yet, the file
 * replaced, rows dropped by a resume, a read caught mid-write) the whole file is re-read and
 * followed from there. */
void browse_session_refresh(Browser *b) {
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
            browse_session_cursor(b);
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
        browse_set_msg(b, "re-reading %s: %s (trying again)", name, err);
        b->screen = SCR_SESSION;
        return;
    }
    b->ev = follow || old_ev >= b->a.h.nevals ? b->a.h.nevals - 1 : old_ev;
    b->focus = focus;
    b->zoom = zoom;
    if (!strcmp(b->a.h.info.status, "running")) b->a.follow = session_follow_open(&b->a.h); /* NULL: re-read */
    browse_session_cursor(b);
}
