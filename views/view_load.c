/* view_load.c — expert load over time: a steps x experts heat map of kept pairs / capacity (one
 * row per expert, time to the right, the whole run decimated into the panel's width), and on the
 * right each expert's demand in the latest logged step as a bar against the capacity line
 * (demand past capacity = dropped pairs, drawn in the overflow colour). Experts with no kept
 * pair over the dead-expert window are marked. In a data-parallel run (ViewCtx.ranks > 1) a step's
 * demand and kept counts are summed over the ranks and its capacity is one rank's: the heat map,
 * the bars and the title's C (C=2x20) compare them with the ranks' total capacity, C x ranks. When the rows
 * do not hold every expert, they scroll to the expert an alarm names (view_alarm_expert) unless the
 * user scrolled by hand since that expert was named. */
#include "view.h"
#include "draw.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define LOAD_CAP 1024

typedef struct {
    int E;
    Series hist; /* (step, kept_e / C for each e) */
    int demand[MOE_MAX_EXPERTS], kept[MOE_MAX_EXPERTS];
    long zero_run[MOE_MAX_EXPERTS]; /* consecutive records with kept_e == 0 */
    int capacity, dropless, dead;
    long dead_mask; /* the record's dead experts (bit e); 0 with dead > 0: an older session, judged here */
    double drop;
    long step;
    int have;
    long cursor; /* browser: cursor step (-1: none; the bars are then the latest step) */
    int scroll;
    int ranks;   /* data-parallel ranks (>= 1): capacities are multiplied by it */
    int alarm_e; /* the expert the latest step's alarm names (-1: none) */
    int manual;  /* the user scrolled since alarm_e was named: the rows stay where they are */
    double *col; /* resample scratch */
    int col_cap;
} LoadView;

static void load_free(View *v) {
    LoadView *l = v->self;
    if (!l) return;
    series_free(&l->hist);
    free(l->col);
    free(l);
}

static int load_init(View *v) {
    LoadView *l = calloc(1, sizeof *l);
    if (!l) return -1;
    l->E = v->ctx->E > 0 ? (v->ctx->E < MOE_MAX_EXPERTS ? v->ctx->E : MOE_MAX_EXPERTS) : 1;
    l->ranks = v->ctx->ranks > 1 ? v->ctx->ranks : 1;
    l->capacity = v->ctx->capacity * l->ranks;
    l->cursor = -1;
    l->alarm_e = -1;
    v->self = l;
    if (series_init(&l->hist, LOAD_CAP, l->E)) {
        load_free(v);
        v->self = NULL;
        return -1;
    }
    return 0;
}

/* A new expert named by the alarm is followed again, even after a manual scroll. */
static void load_follow(LoadView *l, const StepRecord *r) {
    const int e = view_alarm_expert(r);
    if (e != l->alarm_e) l->manual = 0;
    l->alarm_e = e;
}

static void load_update(View *v, const ViewMsg *m) {
    LoadView *l = v->self;
    if (m->slot != 0) return;
    if (m->kind == VIEW_MSG_CURSOR) {
        /* the bars show the step record in effect at the cursor */
        l->cursor = m->at_step;
        if (!m->step || !m->step->has_moe || m->step->moe.E != l->E) return;
        const MoeStepStats *s = &m->step->moe;
        load_follow(l, m->step);
        for (int e = 0; e < l->E; e++) {
            l->demand[e] = s->demand[e];
            l->kept[e] = s->kept[e];
        }
        l->capacity = s->capacity * l->ranks;
        l->dropless = s->dropless;
        l->dead = m->step->dead_experts;
        l->dead_mask = m->step->dead_mask;
        l->drop = s->drop_frac;
        return;
    }
    if (m->kind != VIEW_MSG_STEP || !m->step->has_moe) return;
    const MoeStepStats *s = &m->step->moe;
    if (s->E != l->E) return;
    double y[MOE_MAX_EXPERTS];
    const int C = s->capacity > 0 ? s->capacity * l->ranks : 1;
    load_follow(l, m->step);
    for (int e = 0; e < l->E; e++) {
        y[e] = (double)s->kept[e] / C;
        l->demand[e] = s->demand[e];
        l->kept[e] = s->kept[e];
        l->zero_run[e] = s->kept[e] == 0 ? l->zero_run[e] + 1 : 0;
    }
    series_push(&l->hist, (double)m->step->step, y);
    l->capacity = s->capacity * l->ranks;
    l->dropless = s->dropless;
    l->dead = m->step->dead_experts;
    l->dead_mask = m->step->dead_mask;
    l->drop = s->drop_frac;
    l->step = m->step->step;
    l->have = 1;
}

static int load_key(View *v, int key) {
    LoadView *l = v->self;
    if (key == ']') {
        if (l->scroll < l->E - 1) l->scroll++;
        l->manual = 1;
        return 1;
    }
    if (key == '[') {
        if (l->scroll > 0) l->scroll--;
        l->manual = 1;
        return 1;
    }
    return 0;
}

static void load_title(const View *v, char *buf, size_t n) {
    const LoadView *l = v->self;
    char cap[48], at[32] = "";
    if (l->ranks > 1) /* the ranks' total, 2 ranks of 20: "C=2x20" */
        snprintf(cap, sizeof cap, "C=%dx%d", l->ranks, l->capacity / l->ranks);
    else snprintf(cap, sizeof cap, "C=%d", l->capacity);
    if (l->cursor >= 0) snprintf(at, sizeof at, " @%ld", l->cursor);
    if (!l->have) snprintf(buf, n, "Expert load");
    else
        snprintf(buf, n, "Expert load%s %s%s dead %d/%d drop %.0f%%", at, cap, l->dropless ? " dropless" : "", l->dead,
                 l->E, 100.0 * l->drop);
}

/* 1 if expert e is dead: the record's dead_mask (with the trainer's revival rule); an older session
 * without it: the trainer reports dead experts and e kept nothing for a window. */
static int is_dead(const LoadView *l, int e, int window) {
    if (l->dead_mask) return (int)((unsigned long)l->dead_mask >> e & 1u); /* the trainer's own judgement */
    return l->dead > 0 && l->zero_run[e] >= (window > 0 ? window : 1);
}

static void load_draw(View *v, WINDOW *w, Rect r) {
    LoadView *l = v->self;
    const ViewCtx *c = v->ctx;
    const Theme *t = c->theme;
    if (!l->have) {
        draw_wrapped(w, r.y + (r.h > 3 ? r.h / 2 - 1 : 0), r.x + 1, r.w - 2, r.h, t->role[TH_DIM],
                     "waiting for the first logged step...");
        return;
    }
    const int lw = 4, bw = r.w * 2 / 5 < 11 ? 11 : r.w * 2 / 5 > 30 ? 30 : r.w * 2 / 5;
    const int hw = r.w - lw - bw - 2;
    const int rows = r.h - 2;
    if (hw < 4 || rows < 1) return;
    if (l->alarm_e >= 0 && !l->manual && rows < l->E) { /* the alarm's expert in view */
        if (l->alarm_e < l->scroll) l->scroll = l->alarm_e;
        else if (l->alarm_e >= l->scroll + rows) l->scroll = l->alarm_e - rows + 1;
    }
    if (l->scroll > l->E - rows) l->scroll = l->E - rows > 0 ? l->E - rows : 0;
    // header: heat legend and bar legend
    int x = r.x + lw;
    x += draw_text(w, r.y, x, hw, t->role[TH_DIM], "kept 0 ");
    for (int b = 0; b < t->nheat && x < r.x + lw + hw - 4; b++) {
        draw_heat_cell(w, r.y, x, 1, b, NULL, t);
        x++;
    }
    x += draw_text(w, r.y, x, r.x + lw + hw - x, t->role[TH_DIM], " C");
    if (rows < l->E) { /* hidden experts, in the bottom border */
        char note[64];
        const int below = l->E - l->scroll - rows;
        int k = 0;
        if (l->scroll > 0)
            k += snprintf(note + k, sizeof note - (size_t)k, "%d above %s%s", l->scroll, t->utf8 ? "\u25b4" : "^",
                          below > 0 ? " " : "");
        if (below > 0) snprintf(note + k, sizeof note - (size_t)k, "+%d experts %s", below, t->utf8 ? "\u25be" : "v");
        draw_more(w, r, t, note);
    }
    if (rows < l->E) {
        char more[32];
        snprintf(more, sizeof more, "  e%d-%d/%d", l->scroll, l->scroll + rows - 1, l->E);
        draw_text(w, r.y, x, r.x + lw + hw - x, t->role[TH_DIM], more);
    }
    {
        char lab[48];
        snprintf(lab, sizeof lab, "demand %s C", t->vline);
        draw_text(w, r.y, r.x + lw + hw + 2, bw, t->role[TH_DIM], lab);
    }
    // time axis over the whole run so far
    Axis ax;
    axis_fixed(&ax, 0, l->step > 0 ? (double)l->step : 1, hw / 7 > 3 ? hw / 7 : 3);
    if (l->col_cap < hw) {
        double *nc = realloc(l->col, sizeof *nc * hw);
        if (!nc) return;
        l->col = nc;
        l->col_cap = hw;
    }
    int maxd = l->capacity;
    for (int e = 0; e < l->E; e++)
        if (l->demand[e] > maxd) maxd = l->demand[e];
    const double scale = fmax(1.25 * l->capacity, (double)maxd);
    const int nb = bw - 5;
    const int window = c->dead_window;
    for (int i = 0; i < rows && l->scroll + i < l->E; i++) {
        const int e = l->scroll + i, y = r.y + 1 + i;
        const int dead = is_dead(l, e, window);
        char lab[16];
        snprintf(lab, sizeof lab, "e%d", e);
        const int ll = draw_text(w, y, r.x, lw,
                                 (dead ? t->role[TH_ERROR] : t->role[TH_AXIS]) |
                                     (e == l->alarm_e ? A_REVERSE | A_BOLD : 0),
                                 lab);
        if (dead) draw_text(w, y, r.x + ll, lw - ll, t->role[TH_ERROR], t->dead);
        series_resample(&l->hist, e, ax.lo, ax.hi + 1e-9, hw, l->col);
        double carry = NAN;
        const int last_col = axis_map(&ax, (double)l->step, hw);
        const int cur_col = l->cursor >= 0 ? axis_map(&ax, (double)l->cursor, hw) : -1;
        for (int cx = 0; cx < hw && cx <= last_col; cx++) {
            double val = l->col[cx];
            if (isnan(val)) val = carry;
            else carry = val;
            if (isnan(val)) continue;
            draw_heat_cell(w, y, r.x + lw + cx, 1, heat_bin(val, 0.0, 1.0, t->nheat), NULL, t);
        }
        if (cur_col >= 0) draw_text(w, y, r.x + lw + cur_col, 1, t->role[TH_NOW] | A_REVERSE, t->vline);
        // demand bar against the capacity line
        const int bx = r.x + lw + hw + 2;
        const int kc = (int)lround(l->kept[e] / scale * nb), dc = (int)lround(l->demand[e] / scale * nb);
        const int cap_col = (int)lround(l->capacity / scale * nb);
        for (int b = 0; b < nb; b++) {
            if (b < kc) draw_text(w, y, bx + b, 1, t->color ? t->role[TH_BAR] : A_NORMAL, t->full);
            else if (b < dc) draw_text(w, y, bx + b, 1, t->role[TH_OVER], t->utf8 ? "\u2592" : "!");
        }
        if (cap_col >= 0 && cap_col < nb && !l->dropless) draw_text(w, y, bx + cap_col, 1, t->role[TH_CAP], t->vline);
        draw_textf(w, y, bx + nb + 1, 4, l->demand[e] > l->capacity && !l->dropless ? t->role[TH_OVER] : A_NORMAL,
                   "%4d", l->demand[e]);
    }
    draw_xaxis(w, r.y + r.h - 1, r.x + lw, hw, &ax, t);
    if (l->cursor >= 0)
        draw_text(w, r.y + r.h - 1, r.x + lw + axis_map(&ax, (double)l->cursor, hw), 1, t->role[TH_NOW],
                  t->utf8 ? "\u25b2" : "^");
}

const ViewClass view_load_class = {
    .name = "Expert load",
    .init = load_init,
    .free = load_free,
    .update = load_update,
    .draw = load_draw,
    .on_key = load_key,
    .title = load_title,
};
