/* view_layers.c — the all-layers strip of a run with two or more routed layers: one line per
 * layer (name, window load entropy, top-1 share, dead experts, drop %, collapse flag) from the
 * latest StepRecord (the browser: the one at the cursor), so that a collapse in a layer that the
 * other panels do not show is still seen. When the rows do not hold every layer it is one line,
 * collapsed layers first, ending in "+N layers" for those that did not fit. No frame. */
#include "view.h"
#include "draw.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    int have;
    double load_h, top1, drop;
    int dead, E, collapsed, eval_collapsed;
} StripLayer;

typedef struct {
    int sel;
    long step;
    StripLayer l[REC_MAX_LAYERS];
} StripView;

static int strip_init(View *v) {
    v->self = calloc(1, sizeof(StripView));
    return v->self ? 0 : -1;
}

static void strip_free(View *v) { free(v->self); }

static void strip_update(View *v, const ViewMsg *m) {
    StripView *s = v->self;
    if (m->slot != 0) return;
    const int n = v->ctx->nlayers < REC_MAX_LAYERS ? v->ctx->nlayers : REC_MAX_LAYERS;
    if ((m->kind == VIEW_MSG_STEP || m->kind == VIEW_MSG_CURSOR) && m->step) {
        const StepRecord *r = m->step;
        s->step = r->step;
        for (int i = 0; i < n; i++) {
            StripLayer *l = &s->l[i];
            if (i >= r->nlayers) {
                l->have = 0;
                continue;
            }
            const StepLayer *x = &r->layer[i];
            l->have = 1;
            l->load_h = x->window_load_entropy;
            l->top1 = x->moe.first_share;
            l->drop = x->moe.drop_frac;
            l->dead = x->dead_experts;
            l->E = x->moe.E > 0 ? x->moe.E : v->ctx->layer[i].E;
            l->collapsed = x->collapsed;
        }
    }
    if ((m->kind == VIEW_MSG_EVAL || m->kind == VIEW_MSG_CURSOR) && m->eval)
        for (int i = 0; i < n; i++) s->l[i].eval_collapsed = i < m->eval->nlayers && m->eval->layer[i].collapsed;
}

void view_layers_select(View *v, int sel) {
    if (v->self) ((StripView *)v->self)->sel = sel;
}

int view_layers_rows(const ViewCtx *ctx, int rows) {
    if (ctx->nlayers < 2 || rows < 1) return 0;
    return ctx->nlayers <= rows ? ctx->nlayers : 1;
}

static int flagged(const StripLayer *l) { return l->have && (l->collapsed || l->eval_collapsed); }

static void strip_line(View *v, int i, WINDOW *w, int y, int x, int width) {
    const StripView *s = v->self;
    const Theme *t = v->ctx->theme;
    const StripLayer *l = &s->l[i];
    const char *mark = i == s->sel ? (t->utf8 ? "\u25b8 " : "> ") : "  ";
    char buf[256];
    snprintf(buf, sizeof buf, "%s%-5s", mark, v->ctx->layer[i].name);
    int n = draw_text(w, y, x, width, i == s->sel ? t->role[TH_TITLE] | A_BOLD : A_NORMAL, buf);
    if (!l->have) {
        draw_text(w, y, x + n, width - n, t->role[TH_DIM], "  no step yet");
        return;
    }
    snprintf(buf, sizeof buf, "  load H %.3f  top-1 %3.0f%%  dead %d/%d  drop %4.1f%%  ", l->load_h, 100 * l->top1,
             l->dead, l->E, 100 * l->drop);
    n += draw_text(w, y, x + n, width - n, A_NORMAL, buf);
    if (flagged(l))
        draw_text(w, y, x + n, width - n, t->role[TH_BANNER] | A_BOLD, l->collapsed ? "COLLAPSE" : "COLLAPSE (eval)");
    else draw_text(w, y, x + n, width - n, t->role[TH_DIM], "ok");
}

/* One line: "layers  ▸moe2 H 0.97 ok  head H 0.40 COLLAPSE  +1 layers", collapsed layers first. */
static void strip_summary(View *v, WINDOW *w, int y, int x, int width) {
    const StripView *s = v->self;
    const Theme *t = v->ctx->theme;
    const int n = v->ctx->nlayers < REC_MAX_LAYERS ? v->ctx->nlayers : REC_MAX_LAYERS;
    int order[REC_MAX_LAYERS], m = 0;
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < n; i++)
            if (flagged(&s->l[i]) == !pass) order[m++] = i;
    int used = draw_text(w, y, x, width, t->role[TH_DIM], "layers ");
    for (int j = 0; j < m; j++) {
        const int i = order[j];
        const StripLayer *l = &s->l[i];
        char tok[96], more[32];
        if (l->have)
            snprintf(tok, sizeof tok, " %s%s H %.2f %s ", i == s->sel ? (t->utf8 ? "\u25b8" : ">") : "",
                     v->ctx->layer[i].name, l->load_h, flagged(l) ? "COLLAPSE" : "ok");
        else
            snprintf(tok, sizeof tok, " %s%s - ", i == s->sel ? (t->utf8 ? "\u25b8" : ">") : "", v->ctx->layer[i].name);
        snprintf(more, sizeof more, " +%d layers", m - j - 1);
        const int need = utf8_cells(tok) + (j < m - 1 ? utf8_cells(more) : 0);
        if (used + need > width) {
            snprintf(more, sizeof more, " +%d layers", m - j);
            draw_text(w, y, x + used, width - used, t->role[TH_WARN] | A_BOLD, more);
            return;
        }
        used += draw_text(w, y, x + used, width - used, flagged(l) ? t->role[TH_BANNER] | A_BOLD : A_NORMAL, tok);
    }
}

static void strip_draw(View *v, WINDOW *w, Rect r) {
    const int n = v->ctx->nlayers < REC_MAX_LAYERS ? v->ctx->nlayers : REC_MAX_LAYERS;
    if (n < 2) return;
    if (r.h >= n)
        for (int i = 0; i < n; i++) strip_line(v, i, w, r.y + i, r.x, r.w);
    else strip_summary(v, w, r.y, r.x, r.w);
}

const ViewClass view_layers_class = {
    .name = "Layers",
    .init = strip_init,
    .free = strip_free,
    .update = strip_update,
    .draw = strip_draw,
};
