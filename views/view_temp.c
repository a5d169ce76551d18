/* view_temp.c — the router temperature over the whole run: the planned schedule (a pure function
 * of the step, tau_plan_scheduled, sampled over [0, total steps] from the UI's copy of the
 * TauPlan), a live override as a dashed line from the step it was set, the tau actually used so
 * far (from the StepRecords) and a marker at the current step. The plan copy is replaced by
 * VIEW_MSG_PLAN whenever a `set tau` or `anneal` command is applied by the trainer. */
#include "view.h"
#include "draw.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define TEMP_CAP 2048

enum { T_NONE, T_PLAN, T_OVERRIDE, T_USED, T_NOW };
static const int temp_roles[] = {TH_NORMAL, TH_PLAN, TH_OVERRIDE, TH_USED, TH_NOW};

typedef struct {
    TauPlan plan;
    Series used; /* (step, tau) */
    long now;    /* steps completed */
    float last_tau;
    int have;
    long anneal_step; /* step of the last anneal, -1 if none */
    int logscale;     /* key `l`: log tau axis */
    Canvas cv;
} TempView;

static int temp_key(View *v, int key) {
    TempView *tv = v->self;
    if (key != 'l') return 0;
    tv->logscale = !tv->logscale;
    return 1;
}

static void temp_free(View *v) {
    TempView *tv = v->self;
    if (!tv) return;
    series_free(&tv->used);
    canvas_free(&tv->cv);
    free(tv);
}

static int temp_init(View *v) {
    TempView *tv = calloc(1, sizeof *tv);
    if (!tv) return -1;
    v->self = tv;
    if (series_init(&tv->used, TEMP_CAP, 1)) {
        temp_free(v);
        v->self = NULL;
        return -1;
    }
    tv->plan = v->ctx->plan;
    tv->anneal_step = -1;
    return 0;
}

static void temp_update(View *v, const ViewMsg *m) {
    TempView *tv = v->self;
    if (m->slot != 0) return;
    if (m->kind == VIEW_MSG_CURSOR) {
        tv->now = m->at_step;
    } else if (m->kind == VIEW_MSG_STEP) {
        const double tau = m->step->tau;
        series_push(&tv->used, (double)m->step->step, &tau);
        tv->last_tau = m->step->tau;
        tv->have = 1;
        if (m->step->step > tv->now && !v->ctx->browse) tv->now = m->step->step;
    } else if (m->kind == VIEW_MSG_PLAN) {
        if (m->plan->has_replacement && (!tv->plan.has_replacement || m->plan->repl.start != tv->plan.repl.start ||
                                         memcmp(&m->plan->repl, &tv->plan.repl, sizeof tv->plan.repl)))
            tv->anneal_step = m->plan->repl.start;
        tv->plan = *m->plan;
    } else if (m->kind == VIEW_MSG_STATUS && !v->ctx->browse) {
        tv->now = m->status->step;
    }
}

static void temp_title(const View *v, char *buf, size_t n) {
    const TempView *tv = v->self;
    const char *tau = v->ctx->theme->utf8 ? "\u03c4" : "tau";
    const float now = tau_plan_value(&tv->plan, tv->now);
    if (v->ctx->browse && tv->plan.has_override && tv->now >= tv->plan.override_step)
        snprintf(buf, n, "Temperature @%ld  %s %.3g  OVERRIDE @%ld", tv->now, tau, (double)now, tv->plan.override_step);
    else if (v->ctx->browse)
        snprintf(buf, n, "Temperature @%ld  %s %.3g  %s", tv->now, tau, (double)now,
                 tau_kind_name(tv->plan.has_replacement ? tv->plan.repl.kind : tv->plan.base.kind));
    else if (tv->plan.has_override)
        snprintf(buf, n, "Temperature  %s %.3g  OVERRIDE @%ld", tau, (double)now, tv->plan.override_step);
    else if (tv->plan.has_replacement)
        snprintf(buf, n, "Temperature  %s %.3g  annealed %s @%ld", tau, (double)now, tau_kind_name(tv->plan.repl.kind),
                 tv->plan.repl.start);
    else snprintf(buf, n, "Temperature  %s %.3g  %s", tau, (double)now, tau_kind_name(tv->plan.base.kind));
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

static void temp_draw(View *v, WINDOW *w, Rect r) {
    TempView *tv = v->self;
    const ViewCtx *c = v->ctx;
    const Theme *t = c->theme;
    const TauPlan *p = &tv->plan;
    // legend (and the override, spelled out, so it shows without colour too)
    int x = r.x, cut = 0;
    x += legend_item(w, r, x, &cut, t->role[TH_PLAN], t->utf8 ? "\u2508 plan  " : ": plan  ");
    x += legend_item(w, r, x, &cut, t->role[TH_USED], t->utf8 ? "\u2501 used  " : "= used  ");
    if (c->browse) x += legend_item(w, r, x, &cut, t->role[TH_NOW], t->utf8 ? "\u2502 cursor  " : "| cursor  ");
    else x += legend_item(w, r, x, &cut, t->role[TH_NOW], t->utf8 ? "\u2502 now  " : "| now  ");
    if (p->has_override) {
        char ov[96];
        snprintf(ov, sizeof ov, "%s OVERRIDE %s=%.3g @%ld", t->utf8 ? "\u2504" : "--", t->utf8 ? "\u03c4" : "tau",
                 (double)p->override_tau, p->override_step);
        x += legend_item(w, r, x, &cut, t->role[TH_OVERRIDE], ov);
    } else if (p->has_replacement) {
        char an[96];
        snprintf(an, sizeof an, "anneal %s %.3g%s%.3g @%ld", tau_kind_name(p->repl.kind), (double)p->repl.tau0,
                 t->utf8 ? "\u2192" : "->", (double)p->repl.tau1, p->repl.start);
        x += legend_item(w, r, x, &cut, t->role[TH_WARN], an);
    }
    if (tv->logscale) legend_item(w, r, x, &cut, t->role[TH_DIM], "[l] log");
    const int lw = 6, pw = r.w - lw - 2, ph = r.h - 2;
    if (pw < 8 || ph < 1) return;
    if (canvas_resize(&tv->cv, pw, ph)) return;
    const long total = c->total_steps > 0 ? c->total_steps : 1;
    Axis ax, ay;
    axis_fixed(&ax, 0, (double)total, pw / 8 > 2 ? pw / 8 : 2);
    // y range: the plan over the run, the override and the values used
    double lo = INFINITY, hi = -INFINITY;
    const int dw = tv->cv.dw;
    float *plan = malloc(sizeof *plan * dw);
    if (!plan) return;
    for (int i = 0; i < dw; i++) {
        const double s = axis_unmap(&ax, i, dw);
        plan[i] = s <= (double)total ? tau_plan_scheduled(p, (long)llround(s)) : NAN;
        if (isfinite(plan[i])) {
            lo = fmin(lo, plan[i]);
            hi = fmax(hi, plan[i]);
        }
    }
    if (p->has_override) {
        lo = fmin(lo, p->override_tau);
        hi = fmax(hi, p->override_tau);
    }
    double ulo, uhi;
    if (series_minmax(&tv->used, 0, &ulo, &uhi)) {
        lo = fmin(lo, ulo);
        hi = fmax(hi, uhi);
    }
    if (tv->logscale && lo > 0) axis_autoscale_log(&ay, lo, hi, ph / 2 + 1 > 2 ? ph / 2 + 1 : 2);
    else axis_autoscale_zero(&ay, lo, hi, ph / 2 + 1 > 2 ? ph / 2 + 1 : 2);
    const int dh = tv->cv.dh;
    // plan
    int px = -1, py = -1;
    for (int i = 0; i < dw; i++) {
        if (!isfinite(plan[i])) {
            px = -1;
            continue;
        }
        /* dotted: one dot in three columns, steps drawn as a dotted vertical run, so the plan reads
         * apart from the solid line of the tau used without colour */
        const int y = dh - 1 - axis_map(&ay, plan[i], dh);
        if (px >= 0 && abs(y - py) > 1)
            for (int yy = (y < py ? y : py) + 1; yy < (y < py ? py : y); yy += 2) canvas_dot(&tv->cv, i, yy, T_PLAN);
        if (i % 3 == 0 || (px >= 0 && y != py)) canvas_dot(&tv->cv, i, y, T_PLAN);
        px = i;
        py = y;
    }
    free(plan);
    // override from the step it was set
    if (p->has_override) {
        const int x0 = axis_map(&ax, (double)p->override_step, dw), x1 = axis_map(&ax, (double)total, dw);
        canvas_hdash(&tv->cv, x0, x1, dh - 1 - axis_map(&ay, p->override_tau, dh), T_OVERRIDE);
    }
    // used
    px = -1;
    const int n = series_count(&tv->used);
    for (int i = 0; i < n; i++) {
        const double v2 = series_y(&tv->used, i, 0);
        if (!isfinite(v2)) continue;
        const int xx = axis_map(&ax, series_x(&tv->used, i), dw), y = dh - 1 - axis_map(&ay, v2, dh);
        if (px >= 0) canvas_line(&tv->cv, px, py, xx, y, T_USED);
        else canvas_dot(&tv->cv, xx, y, T_USED);
        px = xx;
        py = y;
    }
    // now
    canvas_vdash(&tv->cv, axis_map(&ax, (double)tv->now, dw), 0, dh - 1, T_NOW);
    const int py0 = r.y + 1, px0 = r.x + lw + 1;
    draw_yaxis(w, py0, r.x, lw, ph, &ay, t, 0);
    draw_canvas(w, py0, px0, &tv->cv, t, temp_roles);
    draw_xaxis(w, py0 + ph, px0, pw, &ax, t);
}

const ViewClass view_temp_class = {
    .name = "Temperature",
    .init = temp_init,
    .free = temp_free,
    .update = temp_update,
    .draw = temp_draw,
    .title = temp_title,
    .on_key = temp_key,
};
