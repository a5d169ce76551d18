/* view_log.c — the log panel: command echoes with their step, errors, epoch lines and core log
 * messages, newest at the bottom, in a fixed ring of LOG_CAP lines. `[` / `]` scroll back and
 * forward when the panel has focus. Lines are sanitised on arrival (control bytes -> '?'). */
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
    int back; /* lines scrolled back from the newest */
} LogView;

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
    if (l->back > 0 && l->back < l->n - 1) l->back++; /* keep the view still while scrolled back */
}

static int log_key(View *v, int key) {
    LogView *l = v->self;
    if (key == '[') {
        if (l->back < l->n - 1) l->back++;
        return 1;
    }
    if (key == ']') {
        if (l->back > 0) l->back--;
        return 1;
    }
    return 0;
}

static void log_title(const View *v, char *buf, size_t n) {
    const LogView *l = v->self;
    if (l->back) snprintf(buf, n, "Log (%d lines back; ] to return)", l->back);
    else snprintf(buf, n, "Log");
}

static void log_draw(View *v, WINDOW *w, Rect r) {
    LogView *l = v->self;
    const Theme *t = v->ctx->theme;
    const int shown = l->n - l->back < r.h ? l->n - l->back : r.h;
    for (int i = 0; i < shown; i++) {
        const int idx = l->n - l->back - shown + i; /* 0 = oldest held */
        const LogLine *ln = &l->lines[(l->head - l->n + idx + LOG_CAP) % LOG_CAP];
        const int role = ln->level == VIEW_LOG_ERROR   ? TH_ERROR
                         : ln->level == VIEW_LOG_WARN  ? TH_WARN
                         : ln->level == VIEW_LOG_CMD   ? TH_OVERRIDE
                         : ln->level == VIEW_LOG_EPOCH ? TH_GOOD
                                                       : TH_NORMAL;
        draw_text_cut(w, r.y + r.h - shown + i, r.x, r.w, t->role[role], ln->text);
    }
    const int older = l->n - l->back - shown;
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
