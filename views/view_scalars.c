/* view_scalars.c — the routing scalars of the latest logged step, each with a sparkline of its
 * recent history: load entropy (window), drop %, MaxVio, dead experts, rho realized / nominal,
 * aux and z losses, gate entropy, router confidence, samples with no expert, the clean router's
 * top-1 share and its agreement with the noisy first choice; above them the forecast of the clean
 * router's trend; the title names the alarm and its views. A dense-head run has
 * no router: the panel then shows training scalars and a note instead. */
#include "view.h"
#include "draw.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define SPARK_CAP 256

enum { S_LOADH, S_DROP, S_MAXVIO, S_DEAD, S_RHO, S_AUX, S_Z, S_GATEH, S_CONF, S_NOEXP, S_CLEAN, S_AGREE, S_COUNT_MOE };
enum { D_LOSS, D_ACC, D_LR, D_RATE, S_COUNT_DENSE };
#define S_MAX 12

typedef struct {
    const char *label;
    const char *fmt;
    double scale;
    int role;
} ScalarSpec;

static const ScalarSpec moe_spec[S_COUNT_MOE] = {
    [S_LOADH] = {"load H", "%.3f", 1, TH_NORMAL},    [S_DROP] = {"drop %", "%.2f", 100, TH_NORMAL},
    [S_MAXVIO] = {"MaxVio", "%.3f", 1, TH_NORMAL},   [S_DEAD] = {"dead", "%.0f", 1, TH_NORMAL},
    [S_RHO] = {"rho", "%.3f", 1, TH_NORMAL},         [S_AUX] = {"aux loss", "%.4f", 1, TH_NORMAL},
    [S_Z] = {"z loss", "%.4g", 1, TH_NORMAL},        [S_GATEH] = {"gate H", "%.3f", 1, TH_NORMAL},
    [S_CONF] = {"confid.", "%.3f", 1, TH_NORMAL},    [S_NOEXP] = {"no-exp %", "%.2f", 100, TH_NORMAL},
    [S_CLEAN] = {"clean 1st", "%.2f", 1, TH_NORMAL}, [S_AGREE] = {"agree", "%.2f", 1, TH_NORMAL},
};
static const ScalarSpec dense_spec[S_COUNT_DENSE] = {
    [D_LOSS] = {"loss", "%.4f", 1, TH_NORMAL},
    [D_ACC] = {"batch acc", "%.1f%%", 100, TH_NORMAL},
    [D_LR] = {"lr", "%.4g", 1, TH_NORMAL},
    [D_RATE] = {"img/s", "%.0f", 1, TH_NORMAL},
};

typedef struct {
    Ring ring[S_MAX];
    int nrows;
    const ScalarSpec *spec;
    double last[S_MAX];
    long step;
    int have, collapsed, E, views, alarm;
    long forecast;
    char forecast_text[96]; /* the trainer's forecast ("clean share 0.42, rising: threshold in ~600 steps") */
} ScalarsView;

static void scalars_free(View *v) {
    ScalarsView *s = v->self;
    if (!s) return;
    for (int i = 0; i < S_MAX; i++) ring_free(&s->ring[i]);
    free(s);
}

static int scalars_init(View *v) {
    ScalarsView *s = calloc(1, sizeof *s);
    if (!s) return -1;
    v->self = s;
    s->nrows = v->ctx->has_moe ? S_COUNT_MOE : S_COUNT_DENSE;
    s->spec = v->ctx->has_moe ? moe_spec : dense_spec;
    for (int i = 0; i < s->nrows; i++)
        if (ring_init(&s->ring[i], SPARK_CAP)) {
            scalars_free(v);
            v->self = NULL;
            return -1;
        }
    return 0;
}

static void scalars_update(View *v, const ViewMsg *m) {
    ScalarsView *s = v->self;
    if (m->slot != 0) return;
    const int cursor = m->kind == VIEW_MSG_CURSOR;
    if (cursor && !m->step) return;
    if (m->kind != VIEW_MSG_STEP && !cursor) return;
    const StepRecord *r = m->step;
    double val[S_MAX] = {0};
    if (v->ctx->has_moe) {
        if (!r->has_moe) return;
        val[S_LOADH] = r->window_load_entropy;
        val[S_DROP] = r->moe.drop_frac;
        val[S_MAXVIO] = r->moe.maxvio;
        val[S_DEAD] = r->dead_experts;
        val[S_RHO] = r->rho_realized;
        val[S_AUX] = r->moe.l_aux;
        val[S_Z] = r->moe.l_z;
        val[S_GATEH] = r->moe.gate_entropy;
        val[S_CONF] = r->moe.confidence;
        val[S_NOEXP] = r->moe.no_expert_frac;
        val[S_CLEAN] = r->moe.clean_first_share;
        val[S_AGREE] = r->moe.first_agree;
        s->collapsed = r->collapsed;
        s->alarm = r->alarm;
        s->views = r->collapse_views;
        s->E = r->moe.E;
        s->forecast = r->forecast;
        snprintf(s->forecast_text, sizeof s->forecast_text, "%s", r->forecast_text);
    } else {
        val[D_LOSS] = r->loss;
        val[D_ACC] = r->acc;
        val[D_LR] = r->lr;
        val[D_RATE] = r->img_per_s;
    }
    for (int i = 0; i < s->nrows; i++) {
        if (!cursor) ring_push(&s->ring[i], val[i] * s->spec[i].scale);
        s->last[i] = val[i] * s->spec[i].scale; /* the browser's cursor sets the values shown */
    }
    s->step = r->step;
    s->have = 1;
}

static void scalars_title(const View *v, char *buf, size_t n) {
    const ScalarsView *s = v->self;
    if (!v->ctx->has_moe) snprintf(buf, n, "Training (dense head)");
    else if (!s->have) snprintf(buf, n, "Routing");
    else {
        char names[64] = "";
        size_t o = 0;
        for (int i = 0; i < CVIEW_COUNT; i++)
            if (s->views & (1 << i))
                o += (size_t)snprintf(names + o, sizeof names - o, "%s%s", o ? "+" : " (",
                                      i == CVIEW_CLEAN  ? "clean"
                                      : i == CVIEW_EVAL ? "eval"
                                                        : "train");
        if (o) snprintf(names + o, sizeof names - o, ")");
        snprintf(buf, n, "Routing: step %ld%s%s", s->step,
                 s->collapsed      ? "  COLLAPSE"
                 : s->alarm == 1 ? "  WARNING"
                                   : "",
                 s->alarm || s->collapsed ? names : "");
    }
}

static void scalars_draw(View *v, WINDOW *w, Rect r) {
    ScalarsView *s = v->self;
    const ViewCtx *c = v->ctx;
    const Theme *t = c->theme;
    int y = r.y;
    const int ymax = r.y + r.h;
    if (!c->has_moe) {
        /* the note first: it is why the routing panels are missing */
        char note[256];
        snprintf(note, sizeof note,
                 "Dense head: no router, so no routing panels. Its MLP has k*h = %d hidden units: "
                 "the active FLOPs of an MoE head with the same k and h.",
                 c->k * c->h);
        y += draw_wrapped(w, y, r.x, r.w, ymax - y - 1, t->role[TH_WARN], note);
        if (y < ymax) y++;
    }
    if (!s->have) {
        if (y < ymax)
            draw_wrapped(w, y, r.x + 1, r.w - 2, ymax - y, t->role[TH_DIM], "waiting for the first logged step...");
        return;
    }
    const int lw = 9, vw = 12, sw = r.w - lw - vw - 1;
    if (c->has_moe && s->forecast_text[0] && y < ymax) { /* the forecast: where the clean router is heading */
        const int warn = s->forecast >= 0 || strstr(s->forecast_text, "over the threshold");
        draw_text_cut(w, y, r.x, r.w, t->role[warn ? TH_WARN : TH_DIM], s->forecast_text);
        y++;
    }
    if (s->nrows > ymax - y) { /* rows that do not fit, in the bottom border */
        char more[48];
        snprintf(more, sizeof more, "+%d rows %s", s->nrows - (ymax - y), t->utf8 ? "\u25be" : "v");
        draw_more(w, r, t, more);
    }
    for (int i = 0; i < s->nrows && y < ymax; i++, y++) {
        const ScalarSpec *sp = &s->spec[i];
        char val[48];
        if (c->has_moe && i == S_DEAD) snprintf(val, sizeof val, "%.0f/%d", s->last[i], s->E);
        else if (c->has_moe && i == S_RHO) snprintf(val, sizeof val, "%.3f/%.3f", s->last[i], c->rho_nominal);
        else snprintf(val, sizeof val, sp->fmt, s->last[i]);
        int role = sp->role;
        if (c->has_moe && ((i == S_DEAD && s->last[i] > 0) || (i == S_LOADH && s->last[i] < 0.5) ||
                           (i == S_CLEAN && s->last[i] > 0.5)))
            role = TH_ERROR;
        draw_text(w, y, r.x, lw, t->role[TH_AXIS], sp->label);
        draw_textf(w, y, r.x + lw, vw, t->role[role] | A_BOLD, "%*s", vw - 1, val);
        if (sw >= 4) draw_sparkline(w, y, r.x + lw + vw, sw, &s->ring[i], t, t->role[TH_BAR]);
    }
}

const ViewClass view_scalars_class = {
    .name = "Routing",
    .init = scalars_init,
    .free = scalars_free,
    .update = scalars_update,
    .draw = scalars_draw,
    .title = scalars_title,
};
