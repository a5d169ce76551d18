/* figs.c — the figures of figs.h: one session, several sessions, a sweep. */
#include "views/figs.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EMA_ALPHA 0.1 /* smoothing of the batch curves: EMA weight 0.9 on the past */
#define NOTE_PT 6.5

// ---------------------------------------------------------------------------------------------
// helpers

static double step_epoch(const SessionHistory *h, long step) {
    return h->steps_per_epoch > 0 ? (double)step / (double)h->steps_per_epoch : (double)step;
}

static double *dalloc(long n) { return calloc(n > 0 ? (size_t)n : 1, sizeof(double)); }

static void minmax(const double *v, long n, double *lo, double *hi) {
    for (long i = 0; i < n; i++)
        if (isfinite(v[i])) {
            if (v[i] < *lo) *lo = v[i];
            if (v[i] > *hi) *hi = v[i];
        }
}

static void ema(const double *v, double *out, long n) {
    Ema e;
    ema_init(&e, EMA_ALPHA);
    for (long i = 0; i < n; i++) out[i] = isfinite(v[i]) ? ema_push(&e, v[i]) : NAN;
}

/* The x axis of a run's time series: epochs 0 .. the run's length (planned, else done). */
static void time_axis(Axis *a, const SessionHistory *h) {
    double hi = h->total_steps > 0 ? step_epoch(h, h->total_steps) : 0;
    if (h->nsteps > 0) hi = fmax(hi, step_epoch(h, h->steps[h->nsteps - 1].step));
    if (!(hi > 0)) hi = 1;
    axis_fixed(a, 0, hi, 6);
}

static void yaxis(Axis *a, double lo, double hi, int zero) {
    if (!(lo <= hi)) lo = 0, hi = 1;
    if (zero) axis_autoscale_zero(a, lo, hi, 6);
    else axis_autoscale(a, lo, hi, 6);
}

/* A panel-shaped strip (no frame) for a legend placed outside the plots. */
static FigPanel strip(Fig *f, double x, double y, double w, double h) {
    FigPanel p;
    memset(&p, 0, sizeof p);
    p.f = f;
    p.x = x;
    p.y = y;
    p.w = w;
    p.h = h;
    return p;
}

static FigStyle plain(FigRGB c, double width, int dash) {
    return (FigStyle){.color = c, .width = width, .dash = dash, .marker = FIG_MK_NONE, .alpha = 1};
}

static const FigRGB GREY = {0.45, 0.45, 0.45};

static void note(Fig *f, double x, double y, const char *s) { fig_text(f, x, y, NOTE_PT, 0.5, 0.5, 0, s); }

/* --columns: every figure one column (3.5 in) or both (7 in) wide; 0: each kind's own width */
static int g_columns;
void figs_set_columns(int columns) { g_columns = columns; }
static double fig_w(double natural) { return g_columns == 1 ? FIG_COL_IN : g_columns == 2 ? FIG_PAGE_IN : natural; }

static int mark_every(long n) { return n > 12 ? (int)(n / 12) : 1; }

/* ---- where and when: the alarm's spans shaded on a time panel (epochs) */
static const FigRGB ALARM_RED = {0.84, 0.19, 0.15}, ALARM_YELLOW = {0.95, 0.75, 0.05};
#define ALARM_RED_ALPHA 0.22
#define ALARM_YELLOW_ALPHA 0.30

/* The spans of the run's step rows; returns the levels present as bits (1 << AlarmLevel). */
static int alarm_levels(const SessionHistory *h, AlarmSpans *a) {
    alarm_spans(h->steps, h->nsteps, a);
    int levels = 0;
    for (int i = 0; i < a->n; i++) levels |= 1 << a->span[i].level;
    return levels;
}

/* Shades each span from its first row to the next logged step (the last row's step at most). */
static void shade_alarms(FigPanel *p, const SessionHistory *h, const AlarmSpans *a) {
    const long last = h->nsteps > 0 ? h->steps[h->nsteps - 1].step : 0, pad = h->log_every > 0 ? h->log_every : 0;
    for (int i = 0; i < a->n; i++) {
        const AlarmSpan *s = &a->span[i];
        const long end = s->end + pad < last ? s->end + pad : last > s->end ? last : s->end;
        const int red = s->level >= ALARM_COLLAPSE;
        fig_vspan(p, step_epoch(h, s->start), step_epoch(h, end), red ? ALARM_RED : ALARM_YELLOW,
                  red ? ALARM_RED_ALPHA : ALARM_YELLOW_ALPHA);
    }
}

/* A legend swatch: a square of the shading's colour as it shows over white. */
static FigStyle swatch(FigRGB c, double alpha) {
    const FigRGB w = {1 - alpha + alpha * c.r, 1 - alpha + alpha * c.g, 1 - alpha + alpha * c.b};
    return (FigStyle){.color = w, .width = 0, .marker = FIG_MK_SQUARE, .msize = 7, .mfill = 1, .alpha = 1};
}

/* The legend entries of the levels present into st / lab (room for 2); returns how many. */
static int alarm_legend(const FigRun *r, int levels, FigStyle *st, const char **lab) {
    const int any = !r->layer_fig && r->h->nlayers > 1;
    int n = 0;
    if (levels & (1 << ALARM_COLLAPSE)) {
        st[n] = swatch(ALARM_RED, ALARM_RED_ALPHA);
        lab[n++] = any ? "collapse (any layer)" : "collapse";
    }
    if (levels & (1 << ALARM_WARNING)) {
        st[n] = swatch(ALARM_YELLOW, ALARM_YELLOW_ALPHA);
        lab[n++] = any ? "warning / expert death (any layer)" : "warning / expert death";
    }
    return n;
}

/* Per-run step and eval series of one field, as x (epochs) and y arrays. */
typedef double (*StepGet)(const StepRecord *s);
typedef double (*EvalGet)(const EvalRecord *e);

static long step_series(const SessionHistory *h, StepGet g, double **x, double **y) {
    *x = dalloc(h->nsteps);
    *y = dalloc(h->nsteps);
    if (!*x || !*y) return -1;
    for (long i = 0; i < h->nsteps; i++) {
        (*x)[i] = step_epoch(h, h->steps[i].step);
        (*y)[i] = g(&h->steps[i]);
    }
    return h->nsteps;
}

static long eval_series(const SessionHistory *h, EvalGet g, double **x, double **y) {
    *x = dalloc(h->nevals);
    *y = dalloc(h->nevals);
    if (!*x || !*y) return -1;
    for (int i = 0; i < h->nevals; i++) {
        (*x)[i] = step_epoch(h, h->evals[i].step);
        (*y)[i] = g(&h->evals[i]);
    }
    return h->nevals;
}

#define GETTER(name, T, expr) \
    static double name(const T *r) { return (double)(expr); }
GETTER(s_loss, StepRecord, r->loss)
GETTER(s_acc, StepRecord, 100.0 * r->acc)
GETTER(s_tau, StepRecord, r->tau)
GETTER(s_load_ent, StepRecord, r->moe.load_entropy)
GETTER(s_clean_ent, StepRecord, r->moe.clean_load_entropy)
GETTER(s_clean_share, StepRecord, r->moe.clean_first_share)
GETTER(s_dead, StepRecord, r->dead_experts)
GETTER(s_clean_dead, StepRecord, r->moe.clean_dead)
GETTER(s_drop, StepRecord, r->moe.drop_frac)
GETTER(s_noexp, StepRecord, r->moe.no_expert_frac)
GETTER(s_maxvio, StepRecord, r->moe.maxvio)
GETTER(s_gate_ent, StepRecord, r->moe.gate_entropy)
GETTER(s_conf, StepRecord, r->moe.confidence)
GETTER(s_agree, StepRecord, r->moe.first_agree)
GETTER(s_rho, StepRecord, r->rho_realized)
GETTER(e_test_loss, EvalRecord, r->test_loss)
GETTER(e_test_acc, EvalRecord, 100.0 * r->test_acc)
GETTER(e_train_loss, EvalRecord, r->train_loss)
GETTER(e_train_acc, EvalRecord, 100.0 * r->train_acc)
GETTER(e_test_ent, EvalRecord, r->moe.test_load_entropy)
GETTER(e_test_share, EvalRecord, r->moe.test_first_share)
GETTER(e_test_dead, EvalRecord, r->moe.test_dead_first)
GETTER(e_mi, EvalRecord, r->moe.mutual_info)
GETTER(e_rho, EvalRecord, r->train_rho_realized)

/* One series of a multi-series time panel. */
typedef struct {
    StepGet sg; /* a step column, or */
    EvalGet eg; /* an eval column (markers joined by a thin line) */
    const char *label;
    int smooth; /* step columns: raw (light) + EMA */
} Series;

/* A time-series panel of up to 4 series with a legend. */
static ml_status series_panel(Fig *f, const SessionHistory *h, double x, double y, double w, double hh,
                              const char *title, const char *ylabel, const Series *ss, int ns, int zero, double hline,
                              int legend_corner) {
    double *xs[4] = {0}, *ys[4] = {0};
    long n[4] = {0};
    double lo = INFINITY, hi = -INFINITY;
    ml_status st = ML_OK;
    for (int i = 0; i < ns; i++) {
        n[i] = ss[i].sg ? step_series(h, ss[i].sg, &xs[i], &ys[i]) : eval_series(h, ss[i].eg, &xs[i], &ys[i]);
        if (n[i] < 0) {
            st = ml_fail(ML_ERR_NOMEM, "out of memory");
            goto done;
        }
        minmax(ys[i], n[i], &lo, &hi);
    }
    if (isfinite(hline)) lo = fmin(lo, hline), hi = fmax(hi, hline);
    Axis ax, ay;
    time_axis(&ax, h);
    yaxis(&ay, lo, hi, zero);
    FigPanel p;
    fig_panel(&p, f, x, y, w, hh, &ax, &ay, title, "epoch", ylabel);
    if (isfinite(hline)) {
        const FigStyle hs = plain(GREY, 0.6, 2);
        fig_hline(&p, hline, &hs);
    }
    FigStyle leg[4];
    const char *labels[4];
    for (int i = 0; i < ns; i++) {
        FigStyle s = fig_series_style(i);
        if (ss[i].sg) {
            if (ss[i].smooth) {
                FigStyle raw = s;
                raw.width = 0.4;
                raw.alpha = 0.3;
                raw.dash = 0;
                fig_line(&p, xs[i], ys[i], (int)n[i], &raw, 0);
                double *sm = dalloc(n[i]);
                if (!sm) {
                    st = ml_fail(ML_ERR_NOMEM, "out of memory");
                    goto done;
                }
                ema(ys[i], sm, n[i]);
                fig_line(&p, xs[i], sm, (int)n[i], &s, mark_every(n[i]));
                free(sm);
            } else {
                fig_line(&p, xs[i], ys[i], (int)n[i], &s, mark_every(n[i]));
            }
        } else {
            s.msize = 4.5;
            FigStyle l = s;
            l.width = 0.6;
            fig_line(&p, xs[i], ys[i], (int)n[i], &l, 1);
        }
        leg[i] = s;
        labels[i] = ss[i].label;
    }
    if (legend_corner >= 0) fig_legend(&p, leg, labels, ns, legend_corner, 1);
done:
    for (int i = 0; i < ns; i++) free(xs[i]), free(ys[i]);
    return st;
}

// ---------------------------------------------------------------------------------------------
// one session

ml_status figs_curves(const FigRun *r, const char *path, FigFormat fmt) {
    const SessionHistory *h = r->h;
    Fig *f = fig_open(path, fmt, fig_w(FIG_PAGE_IN), 2.5);
    if (!f) return ML_ERR_IO;
    const double W = fig_width(f), H = fig_height(f);
    const Series loss[3] = {{s_loss, NULL, "train (batch; EMA 0.9)", 1},
                            {NULL, e_train_loss, "train (epoch mean)", 0},
                            {NULL, e_test_loss, "test", 0}};
    const Series acc[3] = {{s_acc, NULL, "train (batch; EMA 0.9)", 1},
                           {NULL, e_train_acc, "train (epoch mean)", 0},
                           {NULL, e_test_acc, "test", 0}};
    char t1[320], t2[320];
    snprintf(t1, sizeof t1, "%s: cross-entropy", r->name);
    snprintf(t2, sizeof t2, "%s: accuracy", r->name);
    ml_status st = series_panel(f, h, 0, 0, W / 2, H, t1, "loss", loss, 3, 1, NAN, 0);
    if (st == ML_OK) st = series_panel(f, h, W / 2, 0, W / 2, H, t2, "accuracy (%)", acc, 3, 0, NAN, 2);
    const ml_status cst = fig_close(f);
    return st != ML_OK ? st : cst;
}

/* The class x expert matrix of evaluation ev as shares of each class (rows sum to 1). */
static void class_shares(const SessionHistory *h, int ev, double *m) {
    const int K = h->K, E = h->E;
    const int *ce = h->ce + (size_t)ev * K * E;
    for (int c = 0; c < K; c++) {
        double s = 0;
        for (int e = 0; e < E; e++) s += ce[c * E + e];
        for (int e = 0; e < E; e++) m[c * E + e] = s > 0 ? ce[c * E + e] / s : NAN;
    }
}

/* One class x expert block (labels, cells, values) into the box; returns 0 if drawn. */
static void heat_block(Fig *f, const SessionHistory *h, int ev, double x, double y, double w, double hh,
                       const char *title, const char *xlabel, int row_labels) {
    const int K = h->K, E = h->E;
    double *m = dalloc((long)K * E);
    char(*cl)[12] = calloc(E > 0 ? E : 1, sizeof *cl);
    const char **cls = calloc(E > 0 ? E : 1, sizeof *cls);
    if (!m || !cl || !cls) goto done;
    class_shares(h, ev, m);
    for (int e = 0; e < E; e++) snprintf(cl[e], sizeof cl[e], "%d", e), cls[e] = cl[e];
    double lw = 0;
    if (row_labels)
        for (int c = 0; c < K; c++) lw = fmax(lw, fig_text_width(f, 6.0, h->class_names[c]));
    const double top = fig_title(f, x + 2, y + 1, w - 4, 7.5, title) + 3, left = row_labels ? lw + 4 : 2,
                 bottom = 18;
    const double gx = x + left, gy = y + top, gw = w - left - 2, gh = hh - top - bottom;
    fig_heatmap(f, gx, gy, gw, gh, m, K, E, 0, 1, row_labels ? (const char *const *)h->class_names : NULL, cls, 6.0);
    if (gw / E >= 12 && gh / K >= 7) fig_heatmap_values(f, gx, gy, gw, gh, m, K, E, 0, 1, "%.2f", 4.5);
    fig_text(f, gx + gw / 2, gy + gh + 10, 7.0, 0.5, 0, 0, xlabel);
done:
    free(m);
    free(cl);
    free(cls);
}

ml_status figs_class_expert(const FigRun *r, int ev, const char *path, FigFormat fmt) {
    const SessionHistory *h = r->h;
    if (h->E <= 0 || !h->ce) return ml_fail(ML_ERR_ARG, "%s: a dense head has no class x expert routing", r->name);
    if (ev < 0 || ev >= h->nevals) return ml_fail(ML_ERR_ARG, "%s: no evaluation %d", r->name, ev);
    Fig *f = fig_open(path, fmt, fig_w(FIG_COL_IN), 0.9 + 0.2 * h->K);
    if (!f) return ML_ERR_IO;
    const double W = fig_width(f), H = fig_height(f);
    char title[320];
    snprintf(title, sizeof title, "%s: test set, epoch %d", r->name, h->evals[ev].epoch);
    heat_block(f, h, ev, 0, 0, W - 46, H, title, "expert (first choice)", 1);
    fig_colorbar(f, W - 40, 12, 7, H - 30, 0, 1, "share of the class");
    return fig_close(f);
}

ml_status figs_drops(const FigRun *r, int ev, const int *drops, const char *path, FigFormat fmt) {
    const SessionHistory *h = r->h;
    const int K = h->K, E = h->E;
    if (E <= 0 || !drops) return ml_fail(ML_ERR_ARG, "%s: no drops per class", r->name);
    if (ev < 0 || ev >= h->nevals) return ml_fail(ML_ERR_ARG, "%s: no evaluation %d", r->name, ev);
    double *m = dalloc((long)K * E);
    char(*cl)[12] = calloc(E, sizeof *cl);
    const char **cls = calloc(E, sizeof *cls);
    char(*rl)[80] = calloc(K, sizeof *rl);
    const char **rls = calloc(K, sizeof *rls);
    if (!m || !cl || !cls || !rl || !rls) {
        free(m), free(cl), free(cls), free(rl), free(rls);
        return ml_fail(ML_ERR_NOMEM, "out of memory");
    }
    double mx = 0;
    long total = 0;
    for (int i = 0; i < K * E; i++) mx = fmax(mx, drops[i]), total += drops[i];
    for (int i = 0; i < K * E; i++) m[i] = drops[i];
    for (int e = 0; e < E; e++) snprintf(cl[e], sizeof cl[e], "%d", e), cls[e] = cl[e];
    double lw = 0;
    Fig *f = fig_open(path, fmt, fig_w(FIG_COL_IN), 0.9 + 0.2 * K);
    if (!f) {
        free(m), free(cl), free(cls), free(rl), free(rls);
        return ML_ERR_IO;
    }
    for (int c = 0; c < K; c++) {
        long n = 0;
        for (int e = 0; e < E; e++) n += drops[c * E + e];
        snprintf(rl[c], sizeof rl[c], "%s (%ld)", h->class_names[c], n);
        rls[c] = rl[c];
        lw = fmax(lw, fig_text_width(f, 6.0, rl[c]));
    }
    const double W = fig_width(f), H = fig_height(f), w = W - 46;
    char title[320];
    snprintf(title, sizeof title, "%s: train pairs dropped, epoch %d (%ld)", r->name, h->evals[ev].epoch,
             total);
    const double top = fig_title(f, 2, 1, w - 4, 7.5, title) + 3, left = lw + 4, bottom = 18;
    const double gx = left, gy = top, gw = w - left - 2, gh = H - top - bottom;
    const double hi = mx > 0 ? mx : 1;
    fig_heatmap(f, gx, gy, gw, gh, m, K, E, 0, hi, (const char *const *)rls, cls, 6.0);
    if (gw / E >= 12 && gh / K >= 7) fig_heatmap_values(f, gx, gy, gw, gh, m, K, E, 0, hi, "%.0f", 4.5);
    fig_text(f, gx + gw / 2, gy + gh + 10, 7.0, 0.5, 0, 0, "expert (class total in brackets)");
    fig_colorbar(f, W - 40, 12, 7, H - 30, 0, hi, "dropped pairs");
    free(m), free(cl), free(cls), free(rl), free(rls);
    return fig_close(f);
}

ml_status figs_expert_load(const FigRun *r, const char *path, FigFormat fmt) {
    const SessionHistory *h = r->h;
    const int E = h->E;
    if (E <= 0) return ml_fail(ML_ERR_ARG, "%s: a dense head has no expert load", r->name);
    const long n = h->nsteps;
    double *x = dalloc(n), *y = dalloc(n * E), *cap = dalloc(n);
    ml_status st = ML_OK;
    if (!x || !y || !cap) {
        st = ml_fail(ML_ERR_NOMEM, "out of memory");
        goto done;
    }
    Fig *f = fig_open(path, fmt, fig_w(FIG_PAGE_IN), 2.9);
    if (!f) {
        st = ML_ERR_IO;
        goto done;
    }
    AlarmSpans spans;
    const int levels = alarm_levels(h, &spans);
    const int nalarm = !!(levels & (1 << ALARM_COLLAPSE)) + !!(levels & (1 << ALARM_WARNING));
    const double W = fig_width(f), H = fig_height(f), legh = 12 + 11 * ((E + 1 + nalarm + 4) / 5);
    FigStyle *styles = calloc(E + 3, sizeof *styles);
    const char **labels = calloc(E + 3, sizeof *labels);
    char(*lab)[24] = calloc(E + 1, sizeof *lab);
    if (!styles || !labels || !lab) {
        fig_close(f);
        free(styles), free(labels), free(lab);
        st = ml_fail(ML_ERR_NOMEM, "out of memory");
        goto done;
    }
    for (int pass = 0; pass < 2; pass++) { /* 0: demand, 1: kept */
        double lo = 0, hi = 0;
        for (long i = 0; i < n; i++) {
            const StepRecord *s = &h->steps[i];
            x[i] = step_epoch(h, s->step);
            cap[i] = s->moe.dropless ? NAN : s->moe.capacity;
            for (int e = 0; e < E; e++) y[e * n + i] = pass ? s->moe.kept[e] : s->moe.demand[e];
        }
        for (int e = 0; e < E; e++) ema(y + e * n, y + e * n, n); /* in place: reads before it writes */
        minmax(y, n * E, &lo, &hi);
        minmax(cap, n, &lo, &hi);
        hi *= 1.06;
        Axis ax, ay;
        time_axis(&ax, h);
        yaxis(&ay, lo, hi, 1);
        FigPanel p;
        char title[320];
        snprintf(title, sizeof title, "%s: %s", r->name,
                 pass ? "pairs kept per expert (EMA 0.9)" : "pairs selected per expert, before capacity (EMA 0.9)");
        fig_panel(&p, f, pass * W / 2, 0, W / 2, H - legh, &ax, &ay, title, "epoch", "pairs per batch");
        shade_alarms(&p, h, &spans);
        for (int e = 0; e < E; e++) {
            styles[e] = fig_series_style(e);
            styles[e].msize = 3;
            fig_line(&p, x, y + e * n, (int)n, &styles[e], mark_every(n));
            snprintf(lab[e], sizeof lab[e], "expert %d", e);
            labels[e] = lab[e];
        }
        styles[E] = plain(GREY, 2.0, 0);
        styles[E].alpha = 0.6;
        fig_line(&p, x, cap, (int)n, &styles[E], 0);
        labels[E] = "capacity C";
    }
    const int nleg = E + 1 + alarm_legend(r, levels, styles + E + 1, labels + E + 1);
    FigPanel ls = strip(f, 0, H - legh, W, legh);
    fig_legend(&ls, styles, labels, nleg, 1, nleg <= 5 ? nleg : 5);
    free(styles), free(labels), free(lab);
    st = fig_close(f);
done:
    free(x), free(y), free(cap);
    return st;
}

ml_status figs_temperature(const FigRun *r, const char *path, FigFormat fmt) {
    const SessionHistory *h = r->h;
    if (!r->has_plan) return ml_fail(ML_ERR_ARG, "%s: no temperature schedule stored", r->name);
    double *xs = NULL, *ys = NULL;
    const long n = step_series(h, s_tau, &xs, &ys);
    if (n < 0) {
        free(xs), free(ys);
        return ml_fail(ML_ERR_NOMEM, "out of memory");
    }
    double px[FIGS_PLAN_N];
    double lo = INFINITY, hi = -INFINITY;
    for (int i = 0; i < FIGS_PLAN_N; i++) px[i] = step_epoch(h, (long)r->plan_step[i]);
    minmax(r->plan_launch, FIGS_PLAN_N, &lo, &hi);
    minmax(r->plan_final, FIGS_PLAN_N, &lo, &hi);
    minmax(ys, n, &lo, &hi);
    Fig *f = fig_open(path, fmt, fig_w(FIG_COL_IN), 2.6);
    if (!f) {
        free(xs), free(ys);
        return ML_ERR_IO;
    }
    Axis ax, ay;
    time_axis(&ax, h);
    yaxis(&ay, lo, hi + 0.12 * (hi - lo + 1e-3), 1);
    FigPanel p;
    char title[320];
    snprintf(title, sizeof title, "%s: router temperature", r->name);
    fig_panel(&p, f, 0, 0, fig_width(f), fig_height(f), &ax, &ay, title, "epoch", "tau");
    AlarmSpans spans;
    const int levels = alarm_levels(h, &spans);
    shade_alarms(&p, h, &spans);
    FigStyle st[6] = {plain(GREY, 0.8, 2),
                      plain(fig_cat_rgb(0), 1.2, 0),
                      fig_series_style(1),
                      {.color = {0, 0, 0}, .width = 0, .marker = FIG_MK_TRIANGLE_DOWN, .msize = 4.5, .mfill = 1}};
    st[2].width = 0.8;
    st[2].dash = 1;
    fig_line(&p, px, r->plan_launch, FIGS_PLAN_N, &st[0], 0);
    fig_line(&p, px, r->plan_final, FIGS_PLAN_N, &st[1], 0);
    fig_line(&p, xs, ys, (int)n, &st[2], mark_every(n));
    for (int i = 0; i < r->nmarks; i++) {
        const double mx = step_epoch(h, r->mark_step[i]);
        const FigStyle vs = plain((FigRGB){0, 0, 0}, 0.5, 2);
        fig_vline(&p, mx, &vs);
        fig_marker(f, fig_px(&p, mx), p.y + 4, &st[3]);
        char num[12];
        snprintf(num, sizeof num, "%d", i + 1);
        fig_text(f, fig_px(&p, mx) + 3, p.y + 4, 5.5, 0, 0.5, 0, num);
    }
    const char *labels[6] = {"launch schedule", "plan at the end", "tau used", "command (set tau / anneal)"};
    int nleg = r->nmarks > 0 ? 4 : 3;
    nleg += alarm_legend(r, levels, st + nleg, labels + nleg);
    fig_legend(&p, st, labels, nleg, 0, 1);
    /* the commands, numbered, under the legend */
    for (int i = 0; i < r->nmarks && i < 6; i++) {
        char line[80];
        snprintf(line, sizeof line, "%d: %s @%.2f", i + 1, r->mark_text[i], step_epoch(h, r->mark_step[i]));
        fig_text(f, p.x + 4, p.y + p.h - 4 - 7 * (r->nmarks < 6 ? r->nmarks - 1 - i : 5 - i), 5.5, 0, 1, 0, line);
    }
    free(xs), free(ys);
    return fig_close(f);
}

ml_status figs_tsne(const FigRun *r, int by_class, const char *path, FigFormat fmt) {
    const SessionHistory *h = r->h;
    if (r->tsne_n <= 0 || !r->tsne_y) return ml_fail(ML_ERR_ARG, "%s: no t-SNE map", r->name);
    const int ncat = by_class ? h->K : h->E;
    const int *cat = by_class ? r->tsne_label : r->tsne_expert;
    double lo[2] = {INFINITY, INFINITY}, hi[2] = {-INFINITY, -INFINITY};
    for (int i = 0; i < r->tsne_n; i++)
        for (int k = 0; k < 2; k++) {
            const double v = r->tsne_y[2 * i + k];
            if (isfinite(v)) lo[k] = fmin(lo[k], v), hi[k] = fmax(hi[k], v);
        }
    Fig *f = fig_open(path, fmt, fig_w(FIG_COL_IN), 2.9);
    if (!f) return ML_ERR_IO;
    const double W = fig_width(f), H = fig_height(f);
    double lw = 0;
    char(*lab)[64] = calloc(ncat > 0 ? ncat : 1, sizeof *lab);
    const char **labels = calloc(ncat > 0 ? ncat : 1, sizeof *labels);
    FigStyle *styles = calloc(ncat > 0 ? ncat : 1, sizeof *styles);
    if (!lab || !labels || !styles) {
        free(lab), free(labels), free(styles);
        fig_close(f);
        return ml_fail(ML_ERR_NOMEM, "out of memory");
    }
    for (int c = 0; c < ncat; c++) {
        if (by_class) snprintf(lab[c], sizeof lab[c], "%s", h->class_names[c]);
        else snprintf(lab[c], sizeof lab[c], "expert %d", c);
        labels[c] = lab[c];
        lw = fmax(lw, fig_text_width(f, 6.5, lab[c]));
        styles[c] = fig_series_style(c);
        styles[c].width = 0;
        styles[c].msize = 2.6;
        styles[c].mfill = c < FIG_NCAT;
    }
    Axis ax, ay;
    const double pad0 = 0.04 * (hi[0] - lo[0] + 1e-9), pad1 = 0.04 * (hi[1] - lo[1] + 1e-9);
    axis_fixed(&ax, lo[0] - pad0, hi[0] + pad0, 4);
    axis_fixed(&ay, lo[1] - pad1, hi[1] + pad1, 4);
    FigPanel p;
    char title[320];
    snprintf(title, sizeof title, "%s: t-SNE by %s, epoch %d", r->name, by_class ? "class" : "expert",
             h->evals[r->tsne_ev].epoch);
    const double legw = lw + 30;
    fig_panel(&p, f, 0, 0, W - legw, H, &ax, &ay, title, "t-SNE 1", "t-SNE 2");
    for (int i = 0; i < r->tsne_n; i++) {
        const int c = cat[i];
        if (c < 0 || c >= ncat) continue;
        fig_marker(f, fig_px(&p, r->tsne_y[2 * i]), fig_py(&p, r->tsne_y[2 * i + 1]), &styles[c]);
    }
    char nt[64];
    snprintf(nt, sizeof nt, "%d test samples", r->tsne_n);
    fig_text(f, p.x + p.w - 3, p.y + p.h - 4, 5.5, 1, 1, 0, nt);
    FigPanel ls = strip(f, W - legw - 4, p.y - 3, legw, p.h);
    fig_legend(&ls, styles, labels, ncat, 1, 1);
    free(lab), free(labels), free(styles);
    return fig_close(f);
}

ml_status figs_routing(const FigRun *r, const char *path, FigFormat fmt) {
    const SessionHistory *h = r->h;
    if (h->E <= 0) return ml_fail(ML_ERR_ARG, "%s: a dense head has no routing statistics", r->name);
    Fig *f = fig_open(path, fmt, fig_w(FIG_PAGE_IN), 4.6);
    if (!f) return ML_ERR_IO;
    const double W = fig_width(f), H = fig_height(f) - 12, pw = W / 4, ph = H / 2;
    char head[320];
    snprintf(
        head, sizeof head,
        "%s: routing (train = noisy selection of the batch, clean = the same batch without noise, test = evaluation)",
        r->name);
    fig_text(f, W / 2, 1, 7.0, 0.5, 0, 1, head);
    const Series ent[3] = {
        {s_load_ent, NULL, "train", 0}, {s_clean_ent, NULL, "clean", 0}, {NULL, e_test_ent, "test", 0}};
    /* (the noisy selection's first-choice share is not stored per step: clean router and test set) */
    const Series share[2] = {{s_clean_share, NULL, "clean", 0}, {NULL, e_test_share, "test", 0}};
    const Series dead[3] = {
        {s_dead, NULL, "window", 0}, {s_clean_dead, NULL, "clean", 0}, {NULL, e_test_dead, "test", 0}};
    const Series drop[2] = {{s_drop, NULL, "dropped pairs", 0}, {s_noexp, NULL, "samples w/o expert", 0}};
    const Series vio[1] = {{s_maxvio, NULL, "train", 0}};
    const Series gate[3] = {
        {s_gate_ent, NULL, "gate entropy", 0}, {s_conf, NULL, "confidence", 0}, {s_agree, NULL, "noisy = clean", 0}};
    const Series rho[2] = {{s_rho, NULL, "per batch", 0}, {NULL, e_rho, "epoch mean", 0}};
    const Series mi[1] = {{NULL, e_mi, "test", 0}};
    const double rho_nom = h->rho_nominal;
    ml_status st = ML_OK;
    const double y0 = 12;
#define PANEL(i, title, yl, arr, zero, hl, corner)                                           \
    if (st == ML_OK)                                                                         \
        st = series_panel(f, h, ((i) % 4) * pw, y0 + ((i) / 4) * ph, pw, ph, title, yl, arr, \
                          (int)(sizeof arr / sizeof arr[0]), zero, hl, corner);
    PANEL(0, "load entropy / log E", "", ent, 1, NAN, 3)
    PANEL(1, "largest first-choice share", "", share, 1, NAN, 1)
    PANEL(2, "dead experts", "experts", dead, 1, NAN, 1)
    PANEL(3, "capacity drops", "fraction", drop, 1, NAN, 1)
    PANEL(4, "MaxVio (max load / mean - 1)", "", vio, 1, NAN, -1)
    PANEL(5, "gates", "fraction", gate, 1, NAN, 3)
    PANEL(6, "rho realized (dashed: nominal)", "", rho, 1, rho_nom, 3)
    PANEL(7, "I(class; expert), test", "nats", mi, 1, NAN, -1)
#undef PANEL
    const ml_status cst = fig_close(f);
    return st != ML_OK ? st : cst;
}

// ---------------------------------------------------------------------------------------------
// several sessions

/* The subtitle of a comparison figure (what the runs share) across the page's top; its height. */
#define SUBTITLE_PT 7.5
static double subtitle_h(double w_pt, const char *common) {
    return common && *common ? fig_title_measure(w_pt - 4, SUBTITLE_PT, common) + 4 : 0;
}

ml_status figs_cmp_curves(const FigRun *r, int n, const char *common, const char *path, FigFormat fmt) {
    /* legend columns: as many as fit the page (label widths estimated at 0.6 em per character) */
    const double PW = fig_w(FIG_PAGE_IN) * 72;
    double maxw = 0;
    for (int i = 0; i < n; i++) maxw = fmax(maxw, 0.6 * 6.5 * (double)strlen(r[i].name));
    int ncol = (int)((PW - 12) / (maxw + 28));
    ncol = ncol < 1 ? 1 : ncol > 4 ? 4 : ncol > n ? n : ncol;
    const double legh = 10 + 10 * ((n + ncol - 1) / ncol), th = subtitle_h(PW, common);
    Fig *f = fig_open(path, fmt, PW / 72, 2.3 + (legh + th) / 72);
    if (!f) return ML_ERR_IO;
    if (th > 0) fig_title(f, 2, 2, fig_width(f) - 4, SUBTITLE_PT, common);
    const double W = fig_width(f), H = fig_height(f) - legh - th, pw = W / 3;
    FigStyle styles[FIG_NCAT];
    const char *labels[FIG_NCAT];
    ml_status st = ML_OK;
    for (int panel = 0; panel < 3 && st == ML_OK; panel++) {
        double lo = INFINITY, hi = -INFINITY, xhi = 0;
        double *xs[FIG_NCAT] = {0}, *ys[FIG_NCAT] = {0};
        long ns[FIG_NCAT] = {0};
        for (int i = 0; i < n; i++) {
            const SessionHistory *h = r[i].h;
            ns[i] = panel == 0 ? step_series(h, s_loss, &xs[i], &ys[i])
                               : eval_series(h, panel == 1 ? e_test_loss : e_test_acc, &xs[i], &ys[i]);
            if (ns[i] < 0) {
                st = ml_fail(ML_ERR_NOMEM, "out of memory");
                break;
            }
            if (panel == 0) {
                double *sm = dalloc(ns[i]);
                if (!sm) {
                    st = ml_fail(ML_ERR_NOMEM, "out of memory");
                    break;
                }
                ema(ys[i], sm, ns[i]);
                free(ys[i]);
                ys[i] = sm;
            }
            minmax(ys[i], ns[i], &lo, &hi);
            Axis t;
            time_axis(&t, h);
            xhi = fmax(xhi, t.hi);
        }
        if (st == ML_OK) {
            Axis ax, ay;
            axis_fixed(&ax, 0, xhi > 0 ? xhi : 1, 6);
            yaxis(&ay, lo, hi, panel < 2);
            FigPanel p;
            static const char *const titles[3] = {"train loss (EMA 0.9)", "test loss", "test accuracy"};
            fig_panel(&p, f, panel * pw, th, pw, H, &ax, &ay, titles[panel], "epoch",
                      panel == 2 ? "accuracy (%)" : "loss");
            for (int i = 0; i < n; i++) {
                styles[i] = fig_series_style(i);
                fig_line(&p, xs[i], ys[i], (int)ns[i], &styles[i], panel == 0 ? mark_every(ns[i]) : 1);
                labels[i] = r[i].name;
            }
        }
        for (int i = 0; i < n; i++) free(xs[i]), free(ys[i]);
    }
    if (st == ML_OK) {
        FigPanel ls = strip(f, 0, th + H, W, legh);
        fig_legend(&ls, styles, labels, n, 1, ncol);
    }
    const ml_status cst = fig_close(f);
    return st != ML_OK ? st : cst;
}

ml_status figs_cmp_heatmaps(const FigRun *r, const int *ev, int n, const char *common, const char *path,
                            FigFormat fmt) {
    const int ncol = n < 4 ? n : 4, nrow = (n + ncol - 1) / ncol;
    int K = 1;
    for (int i = 0; i < n; i++) K = r[i].h->K > K ? r[i].h->K : K;
    const double PW = fig_w(FIG_PAGE_IN) * 72, th = subtitle_h(PW, common);
    Fig *f = fig_open(path, fmt, PW / 72, nrow * (0.6 + 0.17 * K) + th / 72);
    if (!f) return ML_ERR_IO;
    if (th > 0) fig_title(f, 2, 2, fig_width(f) - 4, SUBTITLE_PT, common);
    const double W = fig_width(f) - 46, H = fig_height(f) - th, cw = W / ncol, chh = H / nrow;
    for (int i = 0; i < n; i++) {
        const SessionHistory *h = r[i].h;
        const double x = (i % ncol) * cw, y = th + (i / ncol) * chh;
        if (h->E <= 0 || !h->ce || ev[i] < 0 || ev[i] >= h->nevals) {
            fig_title(f, x + 2, y + 1, cw - 6, 7.5, r[i].name);
            note(f, x + cw / 2, y + chh / 2, h->E <= 0 ? "dense head: no routing" : "no evaluation at this epoch");
            continue;
        }
        char xl[64];
        snprintf(xl, sizeof xl, "expert, epoch %d", h->evals[ev[i]].epoch);
        const int first = i % ncol == 0 || r[i - i % ncol].h->K != h->K;
        heat_block(f, h, ev[i], x, y, cw - 4, chh, r[i].name, xl, first);
    }
    fig_colorbar(f, W + 6, th + 12, 7, H - 30, 0, 1, "share of the class");
    return fig_close(f);
}

ml_status figs_cmp_table(const FigRun *r, int n, const char *path, FigFormat fmt) {
    static const char *const cols[] = {"run",      "head",      "E",           "k",         "epochs",  "test acc (%)",
                                       "best (%)", "test loss", "I(c;e) nats", "load ent.", "rho nom."};
    enum { NC = sizeof cols / sizeof cols[0] };
    Fig *f = fig_open(path, fmt, fig_w(FIG_PAGE_IN), 0.45 + 0.17 * n);
    if (!f) return ML_ERR_IO;
    char cell[FIG_NCAT][NC][96];
    for (int i = 0; i < n; i++) {
        const SessionHistory *h = r[i].h;
        const EvalRecord *last = h->nevals > 0 ? &h->evals[h->nevals - 1] : NULL;
        double best = NAN;
        for (int e = 0; e < h->nevals; e++)
            if (!(h->evals[e].test_acc <= best)) best = h->evals[e].test_acc;
        snprintf(cell[i][0], 96, "%s", r[i].name);
        snprintf(cell[i][1], 96, "%s", h->info.head);
        snprintf(cell[i][2], 96, "%d", h->E);
        snprintf(cell[i][3], 96, "%d", h->info.k);
        snprintf(cell[i][4], 96, "%d", last ? last->epoch : 0);
        snprintf(cell[i][5], 96, last ? "%.2f" : "-", last ? 100 * last->test_acc : 0);
        snprintf(cell[i][6], 96, isfinite(best) ? "%.2f" : "-", 100 * best);
        snprintf(cell[i][7], 96, last ? "%.4f" : "-", last ? last->test_loss : 0);
        snprintf(cell[i][8], 96, last && h->E > 0 ? "%.3f" : "-", last ? last->moe.mutual_info : 0);
        snprintf(cell[i][9], 96, last && h->E > 0 ? "%.3f" : "-", last ? last->moe.test_load_entropy : 0);
        snprintf(cell[i][10], 96, "%.3f", h->rho_nominal);
    }
    double cw[NC], total = 0;
    for (int c = 0; c < NC; c++) {
        cw[c] = fig_text_width(f, 6.5, cols[c]);
        for (int i = 0; i < n; i++) cw[c] = fmax(cw[c], fig_text_width(f, 6.5, cell[i][c]));
        cw[c] += 8;
        total += cw[c];
    }
    const double W = fig_width(f), scale = total > W - 8 ? (W - 8) / total : 1;
    const double sz = 6.5 * scale, rh = 12;
    double x = 4;
    for (int c = 0; c < NC; c++) {
        const double al = c < 2 ? 0 : 1, tx = c < 2 ? x : x + cw[c] * scale - 6 * scale;
        fig_text(f, tx, 8, sz, al, 0.5, 1, cols[c]);
        for (int i = 0; i < n; i++) fig_text(f, tx, 8 + rh * (i + 1) + 2, sz, al, 0.5, 0, cell[i][c]);
        x += cw[c] * scale;
    }
    const FigStyle rule = plain((FigRGB){0, 0, 0}, 0.6, 0);
    double rx[2] = {2, W - 2}, ry1[2] = {8 + rh / 2 + 1, 8 + rh / 2 + 1},
           ry2[2] = {8 + rh * (n + 0.5) + 3, 8 + rh * (n + 0.5) + 3};
    /* page coordinates: an identity panel */
    FigPanel id = strip(f, 0, 0, W, fig_height(f));
    id.ax = (Axis){.lo = 0, .hi = W, .step = 1};
    id.ay = (Axis){.lo = fig_height(f), .hi = 0, .step = 1};
    fig_line(&id, rx, ry1, 2, &rule, 0);
    fig_line(&id, rx, ry2, 2, &rule, 0);
    return fig_close(f);
}

// ---------------------------------------------------------------------------------------------
// sweeps

static int axis_index(const SweepSummary *s, const char *key) {
    for (int a = 0; a < s->naxes; a++)
        if (strcmp(s->axes[a], key) == 0) return a;
    return -1;
}

/* The x of a configuration in the gap figure: its realized rho when every configuration with a
 * gap has one (the mean over its finished runs), else the nominal rho of all. */
static int gap_rho_realized(const SweepSummary *s) {
    int n = 0;
    for (int c = 0; c < s->nconfigs; c++) {
        const SweepConfig *k = &s->configs[c];
        if (k->baseline < 0 || !isfinite(k->gap)) continue;
        if (!(isfinite(k->rho_realized) && k->rho_realized > 0)) return 0;
        n++;
    }
    return n > 0;
}

ml_status figs_sweep_gap_rho(const SweepSummary *s, const char *title, const char *path, FigFormat fmt) {
    const int ab = axis_index(s, "backbone");
    const int realized = gap_rho_realized(s);
#define GAP_X(k) (realized ? (k)->rho_realized : (k)->rho_nominal)
    /* groups: the distinct backbone values among configurations with a gap */
    const char *groups[FIG_NCAT];
    int ng = 0, ngap = 0;
    double xlo = INFINITY, xhi = -INFINITY, ylo = 0, yhi = 0;
    for (int c = 0; c < s->nconfigs; c++) {
        const SweepConfig *k = &s->configs[c];
        if (k->baseline < 0 || !isfinite(k->gap)) continue;
        ngap++;
        const char *g = ab >= 0 ? s->values[c * s->naxes + ab] : "all";
        int j = 0;
        while (j < ng && strcmp(groups[j], g) != 0) j++;
        if (j == ng && ng < FIG_NCAT) groups[ng++] = g;
        xlo = fmin(xlo, GAP_X(k)), xhi = fmax(xhi, GAP_X(k));
        const double lo = isfinite(k->gap_lo) ? k->gap_lo : k->gap, hi = isfinite(k->gap_hi) ? k->gap_hi : k->gap;
        ylo = fmin(ylo, 100 * lo), yhi = fmax(yhi, 100 * hi);
    }
    if (ngap == 0) return ml_fail(ML_ERR_ARG, "the sweep has no MoE-vs-dense gap (it needs a head axis with dense)");
    Fig *f = fig_open(path, fmt, fig_w(FIG_COL_IN), 2.7);
    if (!f) return ML_ERR_IO;
    Axis ax, ay;
    const double xr = xhi - xlo > 1e-9 ? xhi - xlo : fmax(0.05, 0.2 * xhi);
    axis_autoscale(&ax, fmax(0, xlo - 0.08 * xr), xhi + 0.08 * xr, 6);
    yaxis(&ay, ylo, yhi, 0);
    FigPanel p;
    fig_panel(&p, f, 0, 0, fig_width(f), fig_height(f), &ax, &ay, title,
              realized ? "rho (routed fraction of FLOPs, realized)" : "rho (routed fraction of FLOPs, nominal)",
              "gap to dense (pp)");
    const FigStyle zero = plain((FigRGB){0, 0, 0}, 0.6, 0);
    fig_hline(&p, 0, &zero);
    FigStyle styles[FIG_NCAT];
    const char *labels[FIG_NCAT];
    char lab[FIG_NCAT][96];
    double *gx = dalloc(s->nconfigs), *gy = dalloc(s->nconfigs);
    if (!gx || !gy) {
        free(gx), free(gy);
        fig_close(f);
        return ml_fail(ML_ERR_NOMEM, "out of memory");
    }
    for (int g = 0; g < ng; g++) {
        styles[g] = fig_series_style(g);
        const double dodge = ng > 1 ? (g - (ng - 1) / 2.0) * 0.012 * (ax.hi - ax.lo) : 0;
        int m = 0;
        for (int c = 0; c < s->nconfigs; c++) {
            const SweepConfig *k = &s->configs[c];
            if (k->baseline < 0 || !isfinite(k->gap)) continue;
            if (strcmp(ab >= 0 ? s->values[c * s->naxes + ab] : "all", groups[g]) != 0) continue;
            gx[m] = GAP_X(k) + dodge;
            gy[m] = 100 * k->gap;
            m++;
            fig_errbar(&p, GAP_X(k) + dodge, 100 * k->gap, 100 * k->gap_lo, 100 * k->gap_hi, &styles[g]);
        }
        /* join the points of a group in rho order */
        for (int i = 1; i < m; i++)
            for (int j = i; j > 0 && gx[j - 1] > gx[j]; j--) {
                double t = gx[j];
                gx[j] = gx[j - 1], gx[j - 1] = t;
                t = gy[j];
                gy[j] = gy[j - 1], gy[j - 1] = t;
            }
        FigStyle ls = styles[g];
        ls.width = 0.7;
        fig_line(&p, gx, gy, m, &ls, 0);
        snprintf(lab[g], sizeof lab[g], ab >= 0 ? "backbone %s" : "%s", groups[g]);
        labels[g] = lab[g];
    }
    free(gx), free(gy);
    fig_legend(&p, styles, labels, ng, 3, 1);
    char ci[64];
    snprintf(ci, sizeof ci, "bars: %.0f%% Welch CI, %d seeds", 100 * (s->ci_level > 0 ? s->ci_level : 0.95), s->seeds);
    fig_text(f, p.x + p.w - 3, p.y + 5, 5.5, 1, 0.5, 0, ci);
    return fig_close(f);
#undef GAP_X
}

ml_status figs_sweep_configs(const SweepSummary *s, const char *title, const char *path, FigFormat fmt) {
    int m = 0;
    for (int c = 0; c < s->nconfigs; c++)
        if (s->configs[c].baseline >= 0) m++;
    if (m == 0) return ml_fail(ML_ERR_ARG, "the sweep has no MoE-vs-dense gap (it needs a head axis with dense)");
    const int ha = axis_index(s, "head");
    const char **labels = calloc(m, sizeof *labels);
    char(*lab)[SWEEP_NAME_MAX] = calloc(m, sizeof *lab);
    int *idx = calloc(m, sizeof *idx);
    if (!labels || !lab || !idx) {
        free(labels), free(lab), free(idx);
        return ml_fail(ML_ERR_NOMEM, "out of memory");
    }
    double ylo = 0, yhi = 0;
    m = 0;
    for (int c = 0; c < s->nconfigs; c++) {
        const SweepConfig *k = &s->configs[c];
        if (k->baseline < 0) continue;
        idx[m] = c;
        /* the values of the axes but the head (the baseline is always dense; the head shows as the
         * style); the axis names go under the axis */
        lab[m][0] = 0;
        for (int a = 0; a < s->naxes; a++) {
            if (a == ha && s->naxes > 1) continue;
            const size_t l = strlen(lab[m]);
            snprintf(lab[m] + l, sizeof lab[m] - l, "%s%s", l ? ", " : "", s->values[c * s->naxes + a]);
        }
        if (!lab[m][0]) snprintf(lab[m], sizeof lab[m], "%s", k->label);
        labels[m] = lab[m];
        if (isfinite(k->gap_lo)) ylo = fmin(ylo, 100 * k->gap_lo);
        if (isfinite(k->gap_hi)) yhi = fmax(yhi, 100 * k->gap_hi);
        if (isfinite(k->gap)) ylo = fmin(ylo, 100 * k->gap), yhi = fmax(yhi, 100 * k->gap);
        m++;
    }
    /* labels that do not fit side by side are rotated (fig_panel_xlabels): the page grows for
     * them (width estimated at 0.6 em per character) */
    double maxw = 0;
    for (int i = 0; i < m; i++) maxw = fmax(maxw, 0.6 * 6.5 * (double)strlen(labels[i]));
    const double W = fig_w(m > 6 ? FIG_PAGE_IN : FIG_COL_IN) * 72.0;
    const int rotate = maxw > 0.9 * (W - 50) / m;
    /* one style per head kind; the legend and the note on filled markers go under the axis
     * name, outside the plot area: inside it they covered whiskers (issue #40 item 7) */
    const char *heads[FIG_NCAT];
    int nh = 0;
    double headw = 0;
    for (int i = 0; i < m; i++) {
        const char *hd = s->configs[idx[i]].head;
        int j = 0;
        while (j < nh && strcmp(heads[j], hd) != 0) j++;
        if (j == nh && nh < FIG_NCAT) heads[nh++] = hd, headw = fmax(headw, 0.6 * 6.5 * (double)strlen(hd));
    }
    int lcol = (int)((W - 12) / (headw + 28));
    lcol = lcol < 1 ? 1 : lcol > nh ? nh : lcol;
    const double legh = 10 * ((nh + lcol - 1) / lcol) + 8, noteh = 10;
    const double below = (rotate ? 0.72 * maxw + 4 : 0) + 12 + legh + noteh;
    Fig *f = fig_open(path, fmt, W / 72.0, 2.2 + below / 72.0);
    if (!f) {
        free(labels), free(lab), free(idx);
        return ML_ERR_IO;
    }
    char xl[256] = "";
    for (int a = 0; a < s->naxes; a++) {
        if (a == ha && s->naxes > 1) continue;
        const size_t l = strlen(xl);
        snprintf(xl + l, sizeof xl - l, "%s%s", l ? ", " : "", s->axes[a]);
    }
    Axis ax = {.lo = -0.5, .hi = m - 0.5, .step = -1}, ay;
    yaxis(&ay, ylo, yhi, 0);
    FigPanel p;
    /* rotated labels reach left of their tick: room for the first one */
    const double xoff = rotate ? fmax(0, 0.72 * 0.6 * 6.5 * (double)strlen(labels[0]) - 40) : 0;
    fig_panel(&p, f, xoff, 0, W - xoff, fig_height(f) - below, &ax, &ay, title, NULL, "gap to dense (pp)");
    fig_text(f, p.x + p.w / 2, fig_height(f) - legh - noteh - 9, 7.5, 0.5, 0, 0, xl);
    fig_panel_xlabels(&p, labels, m);
    const FigStyle zero = plain((FigRGB){0, 0, 0}, 0.6, 0);
    fig_hline(&p, 0, &zero);
    /* filled when the interval excludes 0 */
    FigStyle hs[FIG_NCAT];
    for (int j = 0; j < nh; j++) hs[j] = fig_series_style(j);
    for (int i = 0; i < m; i++) {
        const SweepConfig *k = &s->configs[idx[i]];
        int j = 0;
        while (j < nh && strcmp(heads[j], k->head) != 0) j++;
        if (j >= FIG_NCAT) j = FIG_NCAT - 1;
        FigStyle st = hs[j];
        st.msize = 4.5;
        st.mfill = isfinite(k->gap_lo) && isfinite(k->gap_hi) && (k->gap_lo > 0 || k->gap_hi < 0);
        fig_errbar(&p, i, 100 * k->gap, 100 * k->gap_lo, 100 * k->gap_hi, &st);
    }
    for (int j = 0; j < nh; j++) hs[j].width = 0, hs[j].msize = 4.5;
    FigPanel ls = strip(f, p.x - 3, fig_height(f) - legh - noteh, W - p.x + 3, legh);
    fig_legend(&ls, hs, heads, nh, 1, lcol);
    fig_text(f, p.x, fig_height(f) - 3, 5.5, 0, 1, 0, "filled: 95% CI excludes 0; open: inconclusive");
    free(labels), free(lab), free(idx);
    return fig_close(f);
}
