/* view_log.c — the log panel: command echoes with their step, errors, epoch lines and core log
 * messages, newest at the bottom, in a fixed ring of LOG_CAP lines. `[` / `]` scroll back and
 * forward when the panel has focus. Lines are sanitised on arrival (control bytes -> '?').
 * A filter (view_log_filter: `/text` on the command line) shows only the lines holding the text
 * (any case; `!text`: only the others); the newest line shown is the current match, `N` / `n`
 * move it to the previous / next match. */
#define _GNU_SOURCE /* strcasestr */
#include "view.h"
#include "draw.h"

#include <stdlib.h>
#include <string.h>

#define LOG_CAP 512
#define LOG_LINE 300

typedef struct {
    int level;
    char text[LOG_LINE];
} LogLine;

typedef struct {
    LogLine *lines; /* (LOG_CAP) ring */
    int n, head;
    int back; /* lines scrolled back from the newest (with a filter: matching lines) */
    char filter[64]; /* "" none */
    int invert;      /* show the lines without the filter text */
} LogView;

static int log_match(const LogView *l, const LogLine *ln) {
    if (!l->filter[0]) return 1;
    return (strcasestr(ln->text, l->filter) != NULL) != l->invert;
}

/* The lines shown, oldest first, as ring indexes into idx (LOG_CAP); their count. */
static int log_shown(const LogView *l, int *idx) {
    int n = 0;
    for (int i = 0; i < l->n; i++) {
        const int k = (l->head - l->n + i + LOG_CAP) % LOG_CAP;
        if (log_match(l, &l->lines[k])) idx[n++] = k;
    }
    return n;
}

void view_log_filter(View *v, const char *text) {
    LogView *l = v->self;
    l->invert = text[0] == '!';
    snprintf(l->filter, sizeof l->filter, "%s", text + l->invert);
    if (!l->filter[0]) l->invert = 0;
    l->back = 0;
}

int view_log_filtering(const View *v) {
    const LogView *l = v->self;
    return l->filter[0] != 0;
}

static void log_free(View *v) {
    LogView *l = v->self;
    if (!l) return;
    free(l->lines);
    free(l);
}

static int log_init(View *v) {
    LogView *l = calloc(1, sizeof *l);
    if (!l) return -1;
    l->lines = calloc(LOG_CAP, sizeof *l->lines);
    v->self = l;
    if (!l->lines) {
        log_free(v);
        v->self = NULL;
        return -1;
    }
    return 0;
}

static void log_update(View *v, const ViewMsg *m) {
    LogView *l = v->self;
    if (m->kind != VIEW_MSG_LOG || !m->text) return;
    LogLine *ln = &l->lines[l->head];
    ln->level = m->level;
    snprintf(ln->text, sizeof ln->text, "%s", m->text);
    for (char *p = ln->text; *p; p++)
        if ((unsigned char)*p < 0x20 || *p == 0x7f) *p = ' ';
    l->head = (l->head + 1) % LOG_CAP;
    if (l->n < LOG_CAP) l->n++;
    if (l->back > 0 && l->back < l->n - 1 && log_match(l, ln)) l->back++; /* keep the view still while scrolled back */
}

static int log_key(View *v, int key) {
    LogView *l = v->self;
    if ((key == 'n' || key == 'N') && !l->filter[0]) return 0;
    if (key == '[' || key == 'N') {
        int idx[LOG_CAP];
        if (l->back < log_shown(l, idx) - 1) l->back++;
        return 1;
    }
    if (key == ']' || key == 'n') {
        if (l->back > 0) l->back--;
        return 1;
    }
    return 0;
}

static void log_title(const View *v, char *buf, size_t n) {
    const LogView *l = v->self;
    if (l->filter[0]) {
        int idx[LOG_CAP];
        const int m = log_shown(l, idx);
        snprintf(buf, n, "Log /%s%s: %d %s, match %d/%d (N n; / alone clears)", l->invert ? "!" : "", l->filter, m,
                 l->invert ? "lines without it" : m == 1 ? "match" : "matches", m ? m - l->back : 0, m);
    } else if (l->back) {
        snprintf(buf, n, "Log (%d lines back; ] to return)", l->back);
    } else {
        snprintf(buf, n, "Log");
    }
}

static void log_draw(View *v, WINDOW *w, Rect r) {
    LogView *l = v->self;
    const Theme *t = v->ctx->theme;
    int idx[LOG_CAP];
    const int avail = log_shown(l, idx);
    if (l->back > 0 && l->back > avail - 1) l->back = avail > 0 ? avail - 1 : 0;
    const int shown = avail - l->back < r.h ? avail - l->back : r.h;
    for (int i = 0; i < shown; i++) {
        const LogLine *ln = &l->lines[idx[avail - l->back - shown + i]];
        const int role = ln->level == VIEW_LOG_ERROR   ? TH_ERROR
                         : ln->level == VIEW_LOG_WARN  ? TH_WARN
                         : ln->level == VIEW_LOG_CMD   ? TH_OVERRIDE
                         : ln->level == VIEW_LOG_EPOCH ? TH_GOOD
                                                       : TH_NORMAL;
        const attr_t cur = l->filter[0] && i == shown - 1 ? A_REVERSE : 0; /* the current match */
        draw_text_cut(w, r.y + r.h - shown + i, r.x, r.w, t->role[role] | cur, ln->text);
    }
    const int older = avail - l->back - shown;
    if (older > 0) {
        char more[48];
        snprintf(more, sizeof more, "+%d earlier %s", older, t->utf8 ? "\u25b4" : "^");
        draw_more(w, r, t, more);
    }
}

const ViewClass view_log_class = {
    .name = "Log",
    .init = log_init,
    .free = log_free,
    .update = log_update,
    .draw = log_draw,
    .on_key = log_key,
    .title = log_title,
};
