/* view_curves.c — loss and accuracy curves: train loss per logged step (raw dots and an EMA
 * line), test loss and test accuracy per evaluation, on a braille canvas (ASCII dots without
 * UTF-8). Left axis: loss (linear or log, key `l`); right axis: test accuracy in %; x: steps.
 * Key `m` cycles the smoothing of the EMA line through 0 (raw), 0.6, 0.9 (default) and 0.99
 * (TensorBoard's convention: ema = s ema + (1 - s) loss), shown in the title. Test points are
 * glyphs written over the braille lines, so they read without colour: test loss ●, test accuracy
 * ○ (compare: run B ■ / □; ASCII A/a and B/b). The whole run is kept in decimating series
 * (ring.h), so memory is fixed. Where and when the run was in alarm (issue 26): the spans of logged
 * steps whose alarm was a collapse (red ━, ASCII #) or a warning / expert death (yellow ┅, ASCII -)
 * are marked on a row labelled "alarm" between the plot and the step axis, always a row of its own
 * (a short panel gives it a plot row, and at 4 rows the axis row); core/records.h AlarmSpans. */
#include "view.h"
#include "draw.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "views/prefs.h"

#define CURVE_CAP 2048
#define EVAL_CAP 1024
#define N_SMOOTH 4
static const double smooth_levels[N_SMOOTH] = {0.0, 0.6, 0.9, 0.99};
#define SMOOTH_DEFAULT 2 /* 0.9 */

enum { C_NONE, C_RAW, C_EMA, C_TEST, C_ACC, C_B_EMA, C_B_TEST, C_B_ACC, C_CURSOR };
static const int curve_roles[] = {TH_NORMAL, TH_RAW, TH_EMA, TH_TEST, TH_ACC, TH_B_EMA, TH_B_TEST, TH_B_ACC, TH_NOW};

typedef struct {
    Series raw;           /* (step, loss) */
    Series ema[N_SMOOTH]; /* (step, EMA of loss) at each smoothing level */
    Series test;          /* (step, [test loss, test acc, train loss, train acc]) */
    Ema e[N_SMOOTH];
    int smooth;            /* index into lv */
    double lv[N_SMOOTH];   /* smooth_levels, the default one replaced by the config's smoothing */
    /* compare: the second run (slot 1), smoothed loss and evaluations only */
    Series ema_b[N_SMOOTH], test_b;
    Ema eb[N_SMOOTH];
    long last_step_b;
    int have_b;
    long cursor;    /* browser: step of the cursor, -1 when none */
    EvalRecord cur; /* browser: the evaluation at the cursor (cur_have) */
    int cur_have;
    int logscale;
    double last_loss, last_test_loss, last_test_acc;
    long last_step;
    AlarmSpans spans; /* the run's alarm by logged step (slot 0) */
    Canvas cv;
} CurvesView;

static void curves_free(View *v) {
    CurvesView *c = v->self;
    if (!c) return;
    series_free(&c->raw);
    for (int i = 0; i < N_SMOOTH; i++) {
        series_free(&c->ema[i]);
        series_free(&c->ema_b[i]);
    }
    series_free(&c->test);
    series_free(&c->test_b);
    canvas_free(&c->cv);
    free(c);
}

static int curves_init(View *v) {
    CurvesView *c = calloc(1, sizeof *c);
    if (!c) return -1;
    v->self = c;
    int bad = series_init(&c->raw, CURVE_CAP, 1) || series_init(&c->test, EVAL_CAP, 4) ||
              series_init(&c->test_b, EVAL_CAP, 4);
    /* the config file's smoothing: its level if it is one, else it takes the default's place */
    c->smooth = SMOOTH_DEFAULT;
    const double want = view_prefs()->smoothing;
    for (int i = 0; i < N_SMOOTH; i++) c->lv[i] = smooth_levels[i];
    if (want >= 0.0 && want < 1.0) {
        int at = -1;
        for (int i = 0; i < N_SMOOTH; i++)
            if (fabs(smooth_levels[i] - want) < 1e-9) at = i;
        if (at < 0) c->lv[SMOOTH_DEFAULT] = want;
        else c->smooth = at;
    }
    for (int i = 0; i < N_SMOOTH; i++) {
        bad = bad || series_init(&c->ema[i], CURVE_CAP, 1) || series_init(&c->ema_b[i], CURVE_CAP, 1);
        ema_init(&c->e[i], 1.0 - c->lv[i]);
        ema_init(&c->eb[i], 1.0 - c->lv[i]);
    }
    if (bad) {
        curves_free(v);
        v->self = NULL;
        return -1;
    }
    c->cursor = -1;
    alarm_spans_init(&c->spans);
    c->last_test_loss = c->last_test_acc = NAN;
    return 0;
}

static void curves_update(View *v, const ViewMsg *m) {
    CurvesView *c = v->self;
    if (m->slot == 1) {
        if (m->kind == VIEW_MSG_STEP) {
            for (int i = 0; i < N_SMOOTH; i++) {
                const double sm = ema_push(&c->eb[i], m->step->loss);
                series_push(&c->ema_b[i], (double)m->step->step, &sm);
            }
            if (m->step->step > c->last_step_b) c->last_step_b = m->step->step;
            c->have_b = 1;
        } else if (m->kind == VIEW_MSG_EVAL) {
            const EvalRecord *e = m->eval;
            const double y[4] = {e->test_loss, 100.0 * e->test_acc, e->train_loss, 100.0 * e->train_acc};
            series_push(&c->test_b, (double)e->step, y);
            c->have_b = 1;
        }
        return;
    }
    if (m->kind == VIEW_MSG_CURSOR) {
        c->cursor = m->at_step;
        c->cur_have = m->eval != NULL;
        if (m->eval) {
            c->cur = *m->eval;
            c->cur.moe.class_expert = NULL; /* only the scalars are kept: the arrays are the sender's */
            c->cur.moe.tsne_feat = NULL;
            c->cur.moe.tsne_expert = NULL;
            c->cur.tsne_label = NULL;
        }
    } else if (m->kind == VIEW_MSG_STEP) {
        const StepRecord *r = m->step;
        const double loss = r->loss;
        series_push(&c->raw, (double)r->step, &loss);
        for (int i = 0; i < N_SMOOTH; i++) {
            const double sm = ema_push(&c->e[i], loss);
            series_push(&c->ema[i], (double)r->step, &sm);
        }
        c->last_loss = loss;
        c->last_step = r->step;
        alarm_spans_push(&c->spans, r->step, step_record_alarm_level(r));
    } else if (m->kind == VIEW_MSG_EVAL) {
        const EvalRecord *e = m->eval;
        const double y[4] = {e->test_loss, 100.0 * e->test_acc, e->train_loss, 100.0 * e->train_acc};
        series_push(&c->test, (double)e->step, y);
        c->last_test_loss = e->test_loss;
        c->last_test_acc = e->test_acc;
    }
}

static int curves_key(View *v, int key) {
    CurvesView *c = v->self;
    if (key == 'l') {
        c->logscale = !c->logscale;
        return 1;
    }
    if (key == 'm') {
        c->smooth = (c->smooth + 1) % N_SMOOTH;
        return 1;
    }
    return 0;
}

static void curves_title(const View *v, char *buf, size_t n) {
    const CurvesView *c = v->self;
    char sm[24];
    snprintf(sm, sizeof sm, "ema %g", c->lv[c->smooth]);
    if (c->raw.total == 0) {
        snprintf(buf, n, "Loss & accuracy  %s", sm);
        return;
    }
    if (c->have_b) {
        snprintf(buf, n, "Loss & accuracy  %s  A vs B", sm);
        return;
    }
    if (c->cur_have) {
        snprintf(buf, n, "Loss & accuracy  %s  epoch %d: train %.3g  test %.3g, %.2f%%", sm, c->cur.epoch,
                 c->cur.train_loss, c->cur.test_loss, 100.0 * c->cur.test_acc);
        return;
    }
    const double last_ema = c->e[c->smooth].value;
    if (isfinite(c->last_test_acc))
        snprintf(buf, n, "Loss & accuracy  %s %.3g  test %.3g, %.2f%%", sm, last_ema, c->last_test_loss,
                 100.0 * c->last_test_acc);
    else snprintf(buf, n, "Loss & accuracy  %s %.3g  train %.3g", sm, last_ema, c->last_loss);
}

/* Dot coordinates of (x, y) on the canvas; 0 if y is not finite or off a log axis. */
static int to_dot(const Canvas *cv, const Axis *ax, const Axis *ay, double x, double y, int *dx, int *dy) {
    if (!isfinite(y) || (ay->log && !(y > 0))) return 0;
    *dx = axis_map(ax, x, cv->dw);
    *dy = cv->dh - 1 - axis_map(ay, y, cv->dh);
    return 1;
}

static void plot_line(Canvas *cv, const Series *s, int j, const Axis *ax, const Axis *ay, int color, int points) {
    const int n = series_count(s);
    int px = 0, py = 0, have = 0;
    for (int i = 0; i < n; i++) {
        int x, y;
        if (!to_dot(cv, ax, ay, series_x(s, i), series_y(s, i, j), &x, &y)) {
            have = 0;
            continue;
        }
        (void)points;
        if (have) canvas_line(cv, px, py, x, y, color);
        else canvas_dot(cv, x, y, color);
        px = x;
        py = y;
        have = 1;
    }
}

/* One legend item at (r.y, x): drawn whole or not at all (then, once, "…" marks what is left out).
 * Returns the cells used. */
static int legend_item(WINDOW *w, Rect r, int x, int *cut, attr_t a, const char *s) {
    const int n = utf8_cells(s), room = r.x + r.w - x;
    if (!*cut && n <= room) return draw_text(w, r.y, x, room, a, s);
    if (!*cut && room >= 1) draw_text(w, r.y, r.x + r.w - 1, 1, A_BOLD, MB_CUR_MAX > 1 ? "\u2026" : "~");
    *cut = 1;
    return 0;
}

/* The glyph of a test point: run (0 A, 1 B) x series (0 loss, 1 accuracy). */
static const char *point_glyph(const Theme *t, int run, int acc) {
    static const char *const u[2][2] = {{"\u25cf", "\u25cb"}, {"\u25a0", "\u25a1"}};
    static const char *const a[2][2] = {{"A", "a"}, {"B", "b"}};
    return t->utf8 ? u[run][acc] : a[run][acc];
}

/* Writes glyph g over the canvas cell of every point of column j of s (cells of the plot at py, px). */
static void draw_points(WINDOW *w, int py, int px, const Canvas *cv, const Series *s, int j, const Axis *ax,
                        const Axis *ay, attr_t attr, const char *g) {
    const int n = series_count(s);
    wattrset(w, attr);
    for (int i = 0; i < n; i++) {
        int x, y;
        if (!to_dot(cv, ax, ay, series_x(s, i), series_y(s, i, j), &x, &y)) continue;
        const int cx = x / 2, cy = y / 4;
        if (cx < 0 || cy < 0 || cx >= cv->cw || cy >= cv->ch) continue;
        mvwaddstr(w, py + cy, px + cx, g);
    }
    wattrset(w, A_NORMAL);
}

#define STRIP_MAX_CELLS 1024

/* The alarm marks of the cells of a plot of cv->cw cells from column px on row y: each cell covering a
 * span's steps (through the canvas' dot mapping, so marks line up with the curves) gets the highest
 * level among them, drawn as ━ / # (collapse, TH_ERROR) or ┅ / - (warning or death, TH_WARN). */
static void draw_alarm_strip(WINDOW *w, int y, int px, const Canvas *cv, const Axis *ax, const AlarmSpans *s,
                             const Theme *t) {
    unsigned char lev[STRIP_MAX_CELLS];
    const int cw = cv->cw < STRIP_MAX_CELLS ? cv->cw : STRIP_MAX_CELLS;
    if (cw <= 0) return;
    memset(lev, 0, (size_t)cw);
    for (int i = 0; i < s->n; i++) {
        const AlarmSpan *sp = &s->span[i];
        int c0 = axis_map(ax, (double)sp->start, cv->dw) / 2, c1 = axis_map(ax, (double)sp->end, cv->dw) / 2;
        if (c0 < 0) c0 = 0;
        if (c1 >= cw) c1 = cw - 1;
        for (int cx = c0; cx <= c1; cx++)
            if (sp->level > lev[cx]) lev[cx] = (unsigned char)sp->level;
    }
    for (int cx = 0; cx < cw; cx++) {
        if (!lev[cx]) continue;
        const int red = lev[cx] >= ALARM_COLLAPSE;
        wattrset(w, red ? t->role[TH_ERROR] | A_BOLD : t->role[TH_WARN]);
        mvwaddstr(w, y, px + cx, red ? (t->utf8 ? "\u2501" : "#") : (t->utf8 ? "\u2505" : "-"));
    }
    wattrset(w, A_NORMAL);
}

static void curves_draw(View *v, WINDOW *w, Rect r) {
    CurvesView *c = v->self;
    const Theme *t = v->ctx->theme;
    // legend
    int x = r.x, cut = 0;
    if (c->have_b) {
        const ViewCtx *vc = v->ctx;
        char lab[96];
        snprintf(lab, sizeof lab, "%s A %s: ", t->utf8 ? "\u2501" : "-",
                 vc->slot_name[0][0] ? vc->slot_name[0] : "run A");
        x += legend_item(w, r, x, &cut, t->role[TH_EMA], lab);
        snprintf(lab, sizeof lab, "%s loss ", point_glyph(t, 0, 0));
        x += legend_item(w, r, x, &cut, t->role[TH_TEST], lab);
        snprintf(lab, sizeof lab, "%s acc%%  ", point_glyph(t, 0, 1));
        x += legend_item(w, r, x, &cut, t->role[TH_ACC], lab);
        snprintf(lab, sizeof lab, "%s B %s: ", t->utf8 ? "\u2501" : "=",
                 vc->slot_name[1][0] ? vc->slot_name[1] : "run B");
        x += legend_item(w, r, x, &cut, t->role[TH_B_EMA], lab);
        snprintf(lab, sizeof lab, "%s loss ", point_glyph(t, 1, 0));
        x += legend_item(w, r, x, &cut, t->role[TH_B_TEST], lab);
        snprintf(lab, sizeof lab, "%s acc%%  ", point_glyph(t, 1, 1));
        x += legend_item(w, r, x, &cut, t->role[TH_B_ACC], lab);
    } else {
        const int narrow = r.w < 50; /* 80 columns: the short legend, so every item shows */
        if (!narrow) x += legend_item(w, r, x, &cut, t->role[TH_DIM], "train ");
        x += legend_item(w, r, x, &cut, t->role[TH_RAW], t->utf8 ? "\u2801raw " : ".raw ");
        x += legend_item(w, r, x, &cut, t->role[TH_EMA],
                         t->utf8 ? (narrow ? "\u2501ema " : "\u2501ema  ") : (narrow ? "-ema " : "-ema  "));
        char lab[48];
        snprintf(lab, sizeof lab, narrow ? "%s loss " : "%s test loss  ", point_glyph(t, 0, 0));
        x += legend_item(w, r, x, &cut, t->role[TH_TEST], lab);
        snprintf(lab, sizeof lab, narrow ? "%s acc%% " : "%s test acc %%  ", point_glyph(t, 0, 1));
        x += legend_item(w, r, x, &cut, t->role[TH_ACC], lab);
    }
    legend_item(w, r, x, &cut, t->role[TH_DIM], c->logscale ? "[l] log" : r.w < 50 ? "[l] lin" : "[l] linear");
    if (r.h < 4) return;
    if (c->raw.total == 0) {
        draw_wrapped(w, r.y + r.h / 2, r.x + 1, r.w - 2, r.h - r.h / 2, t->role[TH_DIM],
                     "waiting for the first logged step...");
        return;
    }
    const int lw = 6, rw = 4;
    /* a row of its own for the alarm marks when there are any, never the axis row: the plot gives
     * it a row, and keeps 2 rows by giving up the step axis when the panel has only 4 */
    const int marks = c->spans.n > 0, strip = marks;
    const int xaxis = !marks || r.h - 3 >= 2;
    const int pw = r.w - lw - rw - 2, ph = r.h - 1 - xaxis - strip;
    if (pw < 8 || ph < 1) return;
    if (canvas_resize(&c->cv, pw, ph)) return;
    // axes
    double lo, hi, xlo = 0, xhi = (double)c->last_step, tlo, thi;
    const Series *ema = &c->ema[c->smooth], *ema_b = &c->ema_b[c->smooth];
    if (c->have_b) series_minmax(ema, 0, &lo, &hi); /* raw dots are not drawn when comparing */
    else series_minmax(&c->raw, 0, &lo, &hi);
    if (series_minmax(&c->test, 0, &tlo, &thi)) {
        lo = fmin(lo, tlo);
        hi = fmax(hi, thi);
    }
    const int n_test = series_count(&c->test);
    if (n_test) xhi = fmax(xhi, series_x(&c->test, n_test - 1));
    if (c->have_b) {
        if (series_minmax(ema_b, 0, &tlo, &thi)) {
            lo = fmin(lo, tlo);
            hi = fmax(hi, thi);
        }
        if (series_minmax(&c->test_b, 0, &tlo, &thi)) {
            lo = fmin(lo, tlo);
            hi = fmax(hi, thi);
        }
        xhi = fmax(xhi, (double)c->last_step_b);
        const int nb = series_count(&c->test_b);
        if (nb) xhi = fmax(xhi, series_x(&c->test_b, nb - 1));
    }
    Axis ax, ay, aa;
    axis_fixed(&ax, xlo, xhi > 0 ? xhi : 1, pw / 8 > 2 ? pw / 8 : 2);
    const int yt = ph / 2 + 1 > 2 ? ph / 2 + 1 : 2;
    if (c->logscale) axis_autoscale_log(&ay, lo, hi, yt);
    else axis_autoscale_zero(&ay, lo, hi, yt);
    int have_acc = series_minmax(&c->test, 1, &tlo, &thi);
    if (c->have_b) {
        double blo, bhi;
        if (series_minmax(&c->test_b, 1, &blo, &bhi)) {
            if (have_acc) {
                tlo = fmin(tlo, blo);
                thi = fmax(thi, bhi);
            } else {
                tlo = blo;
                thi = bhi;
            }
            have_acc = 1;
        }
    }
    if (have_acc) {
        axis_autoscale(&aa, tlo, thi, yt);
        if (aa.lo < 0) aa.lo = 0;
        if (aa.hi > 100) aa.hi = 100;
        if (aa.hi <= aa.lo) {
            aa.lo = 0;
            aa.hi = 100;
            aa.step = 50;
        }
    }
    // plot: raw dots, EMA line, test loss, test accuracy
    const int n = c->have_b ? 0 : series_count(&c->raw);
    if (c->cursor >= 0) canvas_vdash(&c->cv, axis_map(&ax, (double)c->cursor, c->cv.dw), 0, c->cv.dh - 1, C_CURSOR);
    for (int i = 0; i < n; i++) {
        int dx, dy;
        if (to_dot(&c->cv, &ax, &ay, series_x(&c->raw, i), series_y(&c->raw, i, 0), &dx, &dy))
            canvas_dot(&c->cv, dx, dy, C_RAW);
    }
    plot_line(&c->cv, ema, 0, &ax, &ay, C_EMA, 0);
    if (have_acc) plot_line(&c->cv, &c->test, 1, &ax, &aa, C_ACC, 1);
    plot_line(&c->cv, &c->test, 0, &ax, &ay, C_TEST, 1);
    if (c->have_b) {
        plot_line(&c->cv, ema_b, 0, &ax, &ay, C_B_EMA, 0);
        if (have_acc) plot_line(&c->cv, &c->test_b, 1, &ax, &aa, C_B_ACC, 1);
        plot_line(&c->cv, &c->test_b, 0, &ax, &ay, C_B_TEST, 1);
    }
    const int py = r.y + 1, px = r.x + lw + 1;
    draw_yaxis(w, py, r.x, lw, ph, &ay, t, 0);
    if (have_acc) draw_yaxis(w, py, px + pw + 1, rw, ph, &aa, t, 1);
    draw_canvas(w, py, px, &c->cv, t, curve_roles);
    /* test points as glyphs over the lines: accuracy first, loss on top */
    if (have_acc) draw_points(w, py, px, &c->cv, &c->test, 1, &ax, &aa, t->role[TH_ACC], point_glyph(t, 0, 1));
    draw_points(w, py, px, &c->cv, &c->test, 0, &ax, &ay, t->role[TH_TEST], point_glyph(t, 0, 0));
    if (c->have_b) {
        if (have_acc) draw_points(w, py, px, &c->cv, &c->test_b, 1, &ax, &aa, t->role[TH_B_ACC], point_glyph(t, 1, 1));
        draw_points(w, py, px, &c->cv, &c->test_b, 0, &ax, &ay, t->role[TH_B_TEST], point_glyph(t, 1, 0));
    }
    if (marks) {
        const int sy = py + ph; /* the strip's own row, under the plot */
        draw_textf(w, sy, r.x, lw, t->role[TH_DIM], "%*s", lw - 1, "alarm");
        draw_alarm_strip(w, sy, px, &c->cv, &ax, &c->spans, t);
    }
    if (xaxis) draw_xaxis(w, py + ph + strip, px, pw, &ax, t);
}

const ViewClass view_curves_class = {
    .name = "Loss & accuracy",
    .init = curves_init,
    .free = curves_free,
    .update = curves_update,
    .draw = curves_draw,
    .on_key = curves_key,
    .title = curves_title,
};
