/* view_multi.c — the curves of up to 8 sessions overlaid (browser compare of 3..8 marked runs):
 * test accuracy per evaluation (default) or test loss with the smoothed train loss (key `l`,
 * log axis), over epochs so runs of different lengths line up. Each run has its own colour AND
 * its own glyph (● ■ ▲ ◆ ★ ▼ ✚ ✖; ASCII A..H) at its evaluation points, so no run hides another
 * without colour either; where two runs' points share a cell, the later one moves to the nearest
 * free neighbouring cell, so every run's points stay visible. A legend column on the right names the runs. */
#include "view.h"
#include "draw.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define MULTI_CAP 2048

typedef struct {
    int n;
    char names[VIEW_MULTI_MAX][48];
    Series acc[VIEW_MULTI_MAX];  /* (epoch, test acc %) */
    Series loss[VIEW_MULTI_MAX]; /* (epoch, test loss) */
    Series ema[VIEW_MULTI_MAX];  /* (epoch + progress, EMA 0.9 of the train loss) */
    Ema e[VIEW_MULTI_MAX];
    int show_loss;
    double cursor; /* epoch of the cursor, < 0 none */
    Canvas cv;
} MultiView;

const char *view_multi_glyph(const Theme *t, int i) {
    static const char *const u[VIEW_MULTI_MAX] = {"\u25cf", "\u25a0", "\u25b2", "\u25c6",
                                                  "\u2605", "\u25bc", "\u271a", "\u2716"};
    static const char *const a[VIEW_MULTI_MAX] = {"A", "B", "C", "D", "E", "F", "G", "H"};
    return t->utf8 ? u[i % VIEW_MULTI_MAX] : a[i % VIEW_MULTI_MAX];
}

attr_t view_multi_attr(const Theme *t, int i) { return t->ncat ? theme_cat(t, i) | A_BOLD : A_BOLD; }

static void multi_free(View *v) {
    MultiView *m = v->self;
    if (!m) return;
    for (int i = 0; i < VIEW_MULTI_MAX; i++) {
        series_free(&m->acc[i]);
        series_free(&m->loss[i]);
        series_free(&m->ema[i]);
    }
    canvas_free(&m->cv);
    free(m);
}

static int multi_init(View *v) {
    MultiView *m = calloc(1, sizeof *m);
    if (!m) return -1;
    v->self = m;
    int bad = 0;
    for (int i = 0; i < VIEW_MULTI_MAX; i++) {
        bad = bad || series_init(&m->acc[i], MULTI_CAP, 1) || series_init(&m->loss[i], MULTI_CAP, 1) ||
              series_init(&m->ema[i], MULTI_CAP, 1);
        ema_init(&m->e[i], 0.1);
    }
    if (bad) {
        multi_free(v);
        v->self = NULL;
        return -1;
    }
    m->cursor = -1;
    return 0;
}

void view_multi_set(View *v, int n, const char *const *names) {
    MultiView *m = v->self;
    if (!m) return;
    m->n = n < VIEW_MULTI_MAX ? n : VIEW_MULTI_MAX;
    for (int i = 0; i < m->n; i++) snprintf(m->names[i], sizeof m->names[i], "%s", names[i]);
}

void view_multi_cursor(View *v, int epoch) {
    MultiView *m = v->self;
    if (m) m->cursor = epoch;
}

static void multi_update(View *v, const ViewMsg *msg) {
    MultiView *m = v->self;
    const int i = msg->slot;
    if (i < 0 || i >= VIEW_MULTI_MAX) return;
    if (msg->kind == VIEW_MSG_STEP) {
        const double x = (double)(msg->step->epoch - 1) + msg->step->epoch_progress;
        const double sm = ema_push(&m->e[i], msg->step->loss);
        series_push(&m->ema[i], x, &sm);
    } else if (msg->kind == VIEW_MSG_EVAL) {
        const double a = 100.0 * msg->eval->test_acc, l = msg->eval->test_loss;
        series_push(&m->acc[i], (double)msg->eval->epoch, &a);
        series_push(&m->loss[i], (double)msg->eval->epoch, &l);
    }
}

static int multi_key(View *v, int key) {
    MultiView *m = v->self;
    if (key != 'l') return 0;
    m->show_loss = !m->show_loss;
    return 1;
}

static void multi_title(const View *v, char *buf, size_t n) {
    const MultiView *m = v->self;
    snprintf(buf, n, "%s of %d runs  [l] %s", m->show_loss ? "Test loss (log), train ema 0.9" : "Test accuracy %", m->n,
             m->show_loss ? "accuracy" : "loss");
}

static int dot_of(const Canvas *cv, const Axis *ax, const Axis *ay, double x, double y, int *dx, int *dy) {
    if (!isfinite(y) || (ay->log && !(y > 0))) return 0;
    *dx = axis_map(ax, x, cv->dw);
    *dy = cv->dh - 1 - axis_map(ay, y, cv->dh);
    return 1;
}

static void multi_draw(View *v, WINDOW *w, Rect r) {
    MultiView *m = v->self;
    const Theme *t = v->ctx->theme;
    if (m->n == 0) return;
    /* legend column: glyph + name of each run */
    int legw = r.w / 3 < 22 ? r.w / 3 : 22;
    if (legw < 6) legw = 6;
    for (int i = 0; i < m->n && i < r.h; i++) {
        char lab[64];
        snprintf(lab, sizeof lab, "%s %s", view_multi_glyph(t, i), m->names[i]);
        draw_text_cut(w, r.y + i, r.x + r.w - legw, legw, view_multi_attr(t, i), lab);
    }
    if (m->n > r.h) {
        char more[32];
        snprintf(more, sizeof more, "+%d runs %s", m->n - r.h, t->utf8 ? "\u25be" : "v");
        draw_more(w, r, t, more);
    }
    const int lw = 6, pw = r.w - legw - lw - 2, ph = r.h - 1;
    if (pw < 8 || ph < 2 || canvas_resize(&m->cv, pw, ph)) return;
    /* axes over every run */
    double lo = INFINITY, hi = -INFINITY, xhi = 1, a, b;
    for (int i = 0; i < m->n; i++) {
        const Series *s = m->show_loss ? &m->loss[i] : &m->acc[i];
        if (series_minmax(s, 0, &a, &b)) lo = fmin(lo, a), hi = fmax(hi, b);
        if (m->show_loss && series_minmax(&m->ema[i], 0, &a, &b)) lo = fmin(lo, a), hi = fmax(hi, b);
        const int c = series_count(s);
        if (c) xhi = fmax(xhi, series_x(s, c - 1));
    }
    if (!isfinite(lo)) {
        draw_text(w, r.y + r.h / 2, r.x + 1, pw, t->role[TH_DIM], "no evaluation yet");
        return;
    }
    Axis ax, ay;
    axis_fixed(&ax, 0, xhi, pw / 8 > 2 ? pw / 8 : 2);
    const int yt = ph / 2 + 1 > 2 ? ph / 2 + 1 : 2;
    if (m->show_loss && lo > 0) axis_autoscale_log(&ay, lo, hi, yt);
    else axis_autoscale(&ay, lo, hi, yt);
    if (m->cursor >= 0) canvas_vdash(&m->cv, axis_map(&ax, m->cursor, m->cv.dw), 0, m->cv.dh - 1, VIEW_MULTI_MAX);
    /* lines: colour index i + 1 (0 is empty) */
    for (int i = 0; i < m->n; i++) {
        const Series *lines[2] = {m->show_loss ? &m->ema[i] : &m->acc[i], m->show_loss ? &m->loss[i] : NULL};
        for (int L = 0; L < 2; L++) {
            if (!lines[L]) continue;
            int px = 0, py = 0, have = 0;
            for (int k = 0; k < series_count(lines[L]); k++) {
                int x, y;
                if (!dot_of(&m->cv, &ax, &ay, series_x(lines[L], k), series_y(lines[L], k, 0), &x, &y)) {
                    have = 0;
                    continue;
                }
                if (have) canvas_line(&m->cv, px, py, x, y, i);
                else canvas_dot(&m->cv, x, y, i);
                px = x, py = y, have = 1;
            }
        }
    }
    const int py0 = r.y + 1, px0 = r.x + lw + 1;
    draw_yaxis(w, py0, r.x, lw, ph - 1, &ay, t, 0);
    char cell[8];
    for (int cy = 0; cy < m->cv.ch && cy < ph - 1; cy++)
        for (int cx = 0; cx < m->cv.cw; cx++) {
            const int col = canvas_cell(&m->cv, cx, cy, t->utf8, cell);
            if (!cell[0]) continue;
            wattrset(w, col == VIEW_MULTI_MAX ? t->role[TH_NOW] : view_multi_attr(t, col) & ~A_BOLD);
            mvwaddstr(w, py0 + cy, px0 + cx, cell);
        }
    wattrset(w, A_NORMAL);
    /* the glyphs of every run's evaluations; a taken cell moves the glyph one cell right when free */
    const int cw = m->cv.cw, chh = ph - 1;
    signed char *taken = calloc((size_t)cw * (size_t)(chh > 0 ? chh : 1), 1);
    for (int i = 0; i < m->n && taken; i++) {
        const Series *s = m->show_loss ? &m->loss[i] : &m->acc[i];
        for (int k = 0; k < series_count(s); k++) {
            int x, y;
            if (!dot_of(&m->cv, &ax, &ay, series_x(s, k), series_y(s, k, 0), &x, &y)) continue;
            int cx = x / 2;
            const int cy = y / 4;
            if (cy < 0 || cy >= chh || cx < 0 || cx >= cw) continue;
            int cy2 = cy;
            if (taken[cy * cw + cx]) { /* the nearest free neighbour cell, so both runs stay visible */
                static const int nb[8][2] = {{1, 0}, {-1, 0}, {0, -1}, {0, 1}, {1, -1}, {-1, -1}, {1, 1}, {-1, 1}};
                for (int q = 0; q < 8; q++) {
                    const int nx = cx + nb[q][0], ny = cy + nb[q][1];
                    if (nx >= 0 && nx < cw && ny >= 0 && ny < chh && !taken[ny * cw + nx]) {
                        cx = nx, cy2 = ny;
                        break;
                    }
                }
            }
            taken[cy2 * cw + cx] = 1;
            wattrset(w, view_multi_attr(t, i));
            mvwaddstr(w, py0 + cy2, px0 + cx, view_multi_glyph(t, i));
        }
    }
    free(taken);
    wattrset(w, A_NORMAL);
    draw_xaxis(w, py0 + ph - 1, px0, pw, &ax, t);
}

const ViewClass view_multi_class = {
    .name = "Compare",
    .init = multi_init,
    .free = multi_free,
    .update = multi_update,
    .draw = multi_draw,
    .on_key = multi_key,
    .title = multi_title,
};
