/* view_curves.c — loss and accuracy curves: train loss per logged step (raw dots and an EMA
 * line), test loss and test accuracy per evaluation, on a braille canvas (ASCII dots without
 * UTF-8). Left axis: loss (linear or log, key `l`); right axis: test accuracy in %; x: steps.
 * The whole run is kept in decimating series (ring.h), so memory is fixed. */
#include "view.h"
#include "draw.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define CURVE_CAP 2048
#define EVAL_CAP 1024
#define EMA_ALPHA 0.1

enum { C_NONE, C_RAW, C_EMA, C_TEST, C_ACC, C_B_EMA, C_B_TEST, C_B_ACC, C_CURSOR };
static const int curve_roles[] = {TH_NORMAL, TH_RAW, TH_EMA, TH_TEST, TH_ACC, TH_B_EMA, TH_B_TEST, TH_B_ACC, TH_NOW};

typedef struct {
    Series raw;  /* (step, loss) */
    Series ema;  /* (step, EMA of loss) */
    Series test; /* (step, [test loss, test acc, train loss, train acc]) */
    Ema e;
    /* compare: the second run (slot 1), smoothed loss and evaluations only */
    Series ema_b, test_b;
    Ema eb;
    long last_step_b;
    int have_b;
    long cursor;    /* browser: step of the cursor, -1 when none */
    EvalRecord cur; /* browser: the evaluation at the cursor (cur_have) */
    int cur_have;
    int logscale;
    double last_loss, last_ema, last_test_loss, last_test_acc;
    long last_step;
    Canvas cv;
} CurvesView;

static void curves_free(View *v) {
    CurvesView *c = v->self;
    if (!c) return;
    series_free(&c->raw);
    series_free(&c->ema);
    series_free(&c->test);
    series_free(&c->ema_b);
    series_free(&c->test_b);
    canvas_free(&c->cv);
    free(c);
}

static int curves_init(View *v) {
    CurvesView *c = calloc(1, sizeof *c);
    if (!c) return -1;
    v->self = c;
    if (series_init(&c->raw, CURVE_CAP, 1) || series_init(&c->ema, CURVE_CAP, 1) ||
        series_init(&c->test, EVAL_CAP, 4) || series_init(&c->ema_b, CURVE_CAP, 1) ||
        series_init(&c->test_b, EVAL_CAP, 4)) {
        curves_free(v);
        v->self = NULL;
        return -1;
    }
    ema_init(&c->e, EMA_ALPHA);
    ema_init(&c->eb, EMA_ALPHA);
    c->cursor = -1;
    c->last_test_loss = c->last_test_acc = NAN;
    return 0;
}

static void curves_update(View *v, const ViewMsg *m) {
    CurvesView *c = v->self;
    if (m->slot == 1) {
        if (m->kind == VIEW_MSG_STEP) {
            const double sm = ema_push(&c->eb, m->step->loss);
            series_push(&c->ema_b, (double)m->step->step, &sm);
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
            c->cur.class_expert = NULL; /* only the scalars are kept: the arrays are the sender's */
            c->cur.tsne_feat = NULL;
            c->cur.tsne_expert = NULL;
            c->cur.tsne_label = NULL;
        }
    } else if (m->kind == VIEW_MSG_STEP) {
        const StepRecord *r = m->step;
        const double loss = r->loss;
        series_push(&c->raw, (double)r->step, &loss);
        const double sm = ema_push(&c->e, loss);
        series_push(&c->ema, (double)r->step, &sm);
        c->last_loss = loss;
        c->last_ema = sm;
        c->last_step = r->step;
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
    return 0;
}

static void curves_title(const View *v, char *buf, size_t n) {
    const CurvesView *c = v->self;
    if (c->raw.total == 0) {
        snprintf(buf, n, "Loss & accuracy");
        return;
    }
    if (c->have_b) {
        snprintf(buf, n, "Loss & accuracy  A vs B");
        return;
    }
    if (c->cur_have) {
        snprintf(buf, n, "Loss & accuracy  epoch %d: train %.3g  test %.3g, %.2f%%", c->cur.epoch, c->cur.train_loss,
                 c->cur.test_loss, 100.0 * c->cur.test_acc);
        return;
    }
    if (isfinite(c->last_test_acc))
        snprintf(buf, n, "Loss & accuracy  ema %.3g  test %.3g, %.2f%%", c->last_ema, c->last_test_loss,
                 100.0 * c->last_test_acc);
    else snprintf(buf, n, "Loss & accuracy  train %.3g  ema %.3g", c->last_loss, c->last_ema);
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
        if (points) {
            canvas_dot(cv, x, y, color);
            canvas_dot(cv, x + 1, y, color);
            canvas_dot(cv, x, y + 1, color);
            canvas_dot(cv, x + 1, y + 1, color);
        }
        if (have && points >= 0) canvas_line(cv, px, py, x, y, color);
        else canvas_dot(cv, x, y, color);
        px = x;
        py = y;
        have = 1;
    }
}

static void curves_draw(View *v, WINDOW *w, Rect r) {
    CurvesView *c = v->self;
    const Theme *t = v->ctx->theme;
    // legend
    int x = r.x;
    if (c->have_b) {
        const ViewCtx *vc = v->ctx;
        char lab[96];
        snprintf(lab, sizeof lab, "%s A %s: ", t->utf8 ? "\u2501" : "-",
                 vc->slot_name[0][0] ? vc->slot_name[0] : "run A");
        x += draw_text(w, r.y, x, r.x + r.w - x, t->role[TH_EMA], lab);
        x += draw_text(w, r.y, x, r.x + r.w - x, t->role[TH_TEST], "loss ");
        x += draw_text(w, r.y, x, r.x + r.w - x, t->role[TH_ACC], "acc%  ");
        snprintf(lab, sizeof lab, "%s B %s: ", t->utf8 ? "\u2501" : "=",
                 vc->slot_name[1][0] ? vc->slot_name[1] : "run B");
        x += draw_text(w, r.y, x, r.x + r.w - x, t->role[TH_B_EMA], lab);
        x += draw_text(w, r.y, x, r.x + r.w - x, t->role[TH_B_TEST], "loss ");
        x += draw_text(w, r.y, x, r.x + r.w - x, t->role[TH_B_ACC], "acc%  ");
    } else {
        x += draw_text(w, r.y, x, r.x + r.w - x, t->role[TH_DIM], "train ");
        x += draw_text(w, r.y, x, r.x + r.w - x, t->role[TH_RAW], t->utf8 ? "\u2801raw " : ".raw ");
        x += draw_text(w, r.y, x, r.x + r.w - x, t->role[TH_EMA], t->utf8 ? "\u2501ema  " : "-ema  ");
        x += draw_text(w, r.y, x, r.x + r.w - x, t->role[TH_TEST], t->utf8 ? "\u25cf test loss  " : "o test loss  ");
        x += draw_text(w, r.y, x, r.x + r.w - x, t->role[TH_ACC], t->utf8 ? "\u25cf test acc %  " : "o test acc %  ");
    }
    draw_text(w, r.y, x, r.x + r.w - x, t->role[TH_DIM], c->logscale ? "[l] log" : "[l] linear");
    if (r.h < 4) return;
    if (c->raw.total == 0) {
        draw_text(w, r.y + r.h / 2, r.x + 2, r.w - 4, t->role[TH_DIM], "waiting for the first logged step...");
        return;
    }
    const int lw = 6, rw = 4;
    const int pw = r.w - lw - rw - 2, ph = r.h - 2;
    if (pw < 8 || ph < 1) return;
    if (canvas_resize(&c->cv, pw, ph)) return;
    // axes
    double lo, hi, xlo = 0, xhi = (double)c->last_step, tlo, thi;
    if (c->have_b) series_minmax(&c->ema, 0, &lo, &hi); /* raw dots are not drawn when comparing */
    else series_minmax(&c->raw, 0, &lo, &hi);
    if (series_minmax(&c->test, 0, &tlo, &thi)) {
        lo = fmin(lo, tlo);
        hi = fmax(hi, thi);
    }
    const int n_test = series_count(&c->test);
    if (n_test) xhi = fmax(xhi, series_x(&c->test, n_test - 1));
    if (c->have_b) {
        if (series_minmax(&c->ema_b, 0, &tlo, &thi)) {
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
    plot_line(&c->cv, &c->ema, 0, &ax, &ay, C_EMA, 0);
    if (have_acc) plot_line(&c->cv, &c->test, 1, &ax, &aa, C_ACC, 1);
    plot_line(&c->cv, &c->test, 0, &ax, &ay, C_TEST, 1);
    if (c->have_b) {
        plot_line(&c->cv, &c->ema_b, 0, &ax, &ay, C_B_EMA, 0);
        if (have_acc) plot_line(&c->cv, &c->test_b, 1, &ax, &aa, C_B_ACC, 1);
        plot_line(&c->cv, &c->test_b, 0, &ax, &ay, C_B_TEST, 1);
    }
    const int py = r.y + 1, px = r.x + lw + 1;
    draw_yaxis(w, py, r.x, lw, ph, &ay, t, 0);
    if (have_acc) draw_yaxis(w, py, px + pw + 1, rw, ph, &aa, t, 1);
    draw_canvas(w, py, px, &c->cv, t, curve_roles);
    draw_xaxis(w, py + ph, px, pw, &ax, t);
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
