/* view_diff.c — comparing two runs: their routing and accuracy scalars at the same epoch side by
 * side, with the difference B - A (green where B is better for a scalar with a direction). */
#include "view.h"
#include "draw.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    EvalRecord a, b;
    int have_a, have_b;
} DiffView;

static int diff_init(View *v) {
    v->self = calloc(1, sizeof(DiffView));
    return v->self ? 0 : -1;
}

static void diff_free(View *v) { free(v->self); }

void view_diff_set(View *v, const EvalRecord *a, const EvalRecord *b) {
    DiffView *d = v->self;
    d->have_a = a != NULL;
    d->have_b = b != NULL;
    if (a) {
        d->a = *a;
        d->a.moe.class_expert = NULL;
        d->a.moe.tsne_feat = NULL;
        d->a.moe.tsne_expert = NULL;
        d->a.tsne_label = NULL;
    }
    if (b) {
        d->b = *b;
        d->b.moe.class_expert = NULL;
        d->b.moe.tsne_feat = NULL;
        d->b.moe.tsne_expert = NULL;
        d->b.tsne_label = NULL;
    }
}

typedef struct {
    const char *label;
    double scale;
    const char *fmt;
    int better; /* +1 higher is better, -1 lower is better, 0 no direction */
    int moe;    /* routing scalar (blank for dense heads) */
} DiffRow;

enum {
    R_TEST_ACC,
    R_TEST_LOSS,
    R_TRAIN_ACC,
    R_TRAIN_LOSS,
    R_MI,
    R_TEST_H,
    R_WIN_H,
    R_DROP,
    R_MAXVIO,
    R_RHO,
    R_DEAD,
    R_COLL,
    R_IMG,
    R_N
};
static const DiffRow rows[R_N] = {
    [R_TEST_ACC] = {"test acc %", 100, "%.2f", +1, 0},
    [R_TEST_LOSS] = {"test loss", 1, "%.3f", -1, 0},
    [R_TRAIN_ACC] = {"train acc %", 100, "%.2f", +1, 0},
    [R_TRAIN_LOSS] = {"train loss", 1, "%.3f", -1, 0},
    [R_MI] = {"I(c;e) nats", 1, "%.3f", 0, 1},
    [R_TEST_H] = {"test load H", 1, "%.3f", +1, 1},
    [R_WIN_H] = {"train load H", 1, "%.3f", +1, 1},
    [R_DROP] = {"drop %", 100, "%.2f", -1, 1},
    [R_MAXVIO] = {"MaxVio", 1, "%.3f", -1, 1},
    [R_RHO] = {"rho real", 1, "%.3f", 0, 1},
    [R_DEAD] = {"dead experts", 1, "%.0f", -1, 1},
    [R_COLL] = {"collapsed", 1, "%.0f", -1, 1},
    [R_IMG] = {"img/s", 1, "%.0f", +1, 0},
};

static double value_of(const EvalRecord *e, int r) {
    switch (r) {
    case R_TEST_ACC: return e->test_acc;
    case R_TEST_LOSS: return e->test_loss;
    case R_TRAIN_ACC: return e->train_acc;
    case R_TRAIN_LOSS: return e->train_loss;
    case R_MI: return e->moe.mutual_info;
    case R_TEST_H: return e->moe.test_load_entropy;
    case R_WIN_H: return e->moe.window_load_entropy;
    case R_DROP: return e->moe.train_drop_frac;
    case R_MAXVIO: return e->moe.train_maxvio;
    case R_RHO: return e->train_rho_realized;
    case R_DEAD: return e->moe.dead_experts;
    case R_COLL: return e->collapsed;
    case R_IMG: return e->img_per_s;
    default: return NAN;
    }
}

static void diff_title(const View *v, char *buf, size_t n) {
    const DiffView *d = v->self;
    if (d->have_a && d->have_b) snprintf(buf, n, "A vs B at epoch %d / %d", d->a.epoch, d->b.epoch);
    else snprintf(buf, n, "A vs B");
}

static void fmt_cell(char *buf, size_t n, const DiffRow *row, const EvalRecord *e, int have, int idx) {
    if (!have || (row->moe && !e->has_moe)) {
        snprintf(buf, n, "-");
        return;
    }
    snprintf(buf, n, row->fmt, value_of(e, idx) * row->scale);
}

static void diff_draw(View *v, WINDOW *w, Rect r) {
    DiffView *d = v->self;
    const ViewCtx *c = v->ctx;
    const Theme *t = c->theme;
    const int lw = 12, cw = (r.w - lw) / 3 > 12 ? 12 : (r.w - lw) / 3;
    if (cw < 5) return;
    char a_name[16], b_name[16];
    snprintf(a_name, sizeof a_name, "A e%d", d->a.epoch);
    snprintf(b_name, sizeof b_name, "B e%d", d->b.epoch);
    draw_textf(w, r.y, r.x + lw, cw, t->role[TH_EMA] | A_BOLD, "%*s", cw - 1, d->have_a ? a_name : "A");
    draw_textf(w, r.y, r.x + lw + cw, cw, t->role[TH_B_EMA] | A_BOLD, "%*s", cw - 1, d->have_b ? b_name : "B");
    draw_textf(w, r.y, r.x + lw + 2 * cw, cw, t->role[TH_AXIS] | A_BOLD, "%*s", cw - 1, "B - A");
    for (int i = 0; i < R_N && 1 + i < r.h; i++) {
        const DiffRow *row = &rows[i];
        const int y = r.y + 1 + i;
        char va[32], vb[32], dv[32];
        fmt_cell(va, sizeof va, row, &d->a, d->have_a, i);
        fmt_cell(vb, sizeof vb, row, &d->b, d->have_b, i);
        int role = TH_NORMAL;
        if (d->have_a && d->have_b && !(row->moe && (!d->a.has_moe || !d->b.has_moe))) {
            const double delta = (value_of(&d->b, i) - value_of(&d->a, i)) * row->scale;
            char f[16];
            snprintf(f, sizeof f, "%%+%s", row->fmt + 1);
            snprintf(dv, sizeof dv, f, delta);
            if (row->better && fabs(delta) > 1e-12) role = (delta > 0) == (row->better > 0) ? TH_GOOD : TH_ERROR;
        } else {
            snprintf(dv, sizeof dv, "-");
        }
        draw_text(w, y, r.x, lw, t->role[TH_AXIS], row->label);
        draw_textf(w, y, r.x + lw, cw, A_NORMAL, "%*s", cw - 1, va);
        draw_textf(w, y, r.x + lw + cw, cw, A_NORMAL, "%*s", cw - 1, vb);
        draw_textf(w, y, r.x + lw + 2 * cw, cw, t->role[role] | A_BOLD, "%*s", cw - 1, dv);
    }
}

const ViewClass view_diff_class = {
    .name = "A vs B",
    .init = diff_init,
    .free = diff_free,
    .draw = diff_draw,
    .title = diff_title,
};
