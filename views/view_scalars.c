/* view_scalars.c — the routing scalars of the latest logged step, each with a sparkline of its
 * recent history: load entropy (window), drop %, MaxVio, dead experts, rho realized / nominal,
 * aux and z losses, gate entropy, router confidence, samples with no expert, the clean router's
 * top-1 share and its agreement with the noisy first choice; above them the forecast of the clean
 * router's trend; the title names the alarm and its views. A dense-head run has
 * no router: the panel then shows training scalars and a note instead. */
#include "view.h"
#include "draw.h"

#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#define SPARK_CAP 256

enum { D_LOSS, D_ACC, D_LR, D_RATE, S_COUNT_DENSE };
#define S_MAX 16

/* Where a row's value comes from: a MoeStepStats scalar (off), or the record's window load
 * entropy, dead experts or realized rho. */
enum { SRC_MOE, SRC_LOADH, SRC_DEAD, SRC_RHO, SRC_DENSE };

/* When a row is painted red (MOE_STEP_SCALARS' warn column): never, above the run's collapse share
 * threshold, below its collapse entropy threshold, above 0. */
enum { W_NONE, W_SHARE, W_ENTROPY, W_POSITIVE };

typedef struct {
    const char *label;
    const char *fmt;
    double scale;
    int role;
    int src;
    size_t off; /* SRC_MOE: offsetof(MoeStepStats, member) */
    int is_int;
    int warn; /* W_* */
} ScalarSpec;

/* The routing panel: the window's load entropy, dead experts and realized rho, then every
 * MOE_STEP_SCALARS row with a label (core/moe.h), in the table's order. */
#define PANEL_IS_INT_F 0
#define PANEL_IS_INT_I 1
#define PANEL_ROW_(T, m, cols, dist, label, fmt, scale, warn, desc) \
    {label, fmt, scale, TH_NORMAL, SRC_MOE, offsetof(MoeStepStats, m), PANEL_IS_INT_##T, warn},
static const ScalarSpec moe_rows[] = {
    {"load H", "%.3f", 1, TH_NORMAL, SRC_LOADH, 0, 0, W_ENTROPY},
    {"dead", "%.0f", 1, TH_NORMAL, SRC_DEAD, 0, 0, W_POSITIVE},
    {"rho", "%.3f", 1, TH_NORMAL, SRC_RHO, 0, 0, W_NONE},
    MOE_STEP_SCALARS(PANEL_ROW_)
};
#define S_MOE_ROWS ((int)(sizeof moe_rows / sizeof moe_rows[0]))
static const ScalarSpec dense_spec[S_COUNT_DENSE] = {
    [D_LOSS] = {"loss", "%.4f", 1, TH_NORMAL, SRC_DENSE, 0, 0, W_NONE},
    [D_ACC] = {"batch acc", "%.1f%%", 100, TH_NORMAL, SRC_DENSE, 0, 0, W_NONE},
    [D_LR] = {"lr", "%.4g", 1, TH_NORMAL, SRC_DENSE, 0, 0, W_NONE},
    [D_RATE] = {"img/s", "%.0f", 1, TH_NORMAL, SRC_DENSE, 0, 0, W_NONE},
};

typedef struct {
    Ring ring[S_MAX];
    int nrows;
    ScalarSpec spec[S_MAX]; /* the rows shown */
    double last[S_MAX];
    long step;
    int have, collapsed, E, views, alarm;
    long forecast;
    double trend;           /* the clean share's trend (> 0: rising; the forecast is then its crossing) */
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
    if (v->ctx->has_moe) {
        for (int i = 0; i < S_MOE_ROWS && s->nrows < S_MAX; i++)
            if (moe_rows[i].label) s->spec[s->nrows++] = moe_rows[i];
    } else {
        for (int i = 0; i < S_COUNT_DENSE; i++) s->spec[s->nrows++] = dense_spec[i];
    }
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
        for (int i = 0; i < s->nrows; i++) {
            const ScalarSpec *sp = &s->spec[i];
            const char *p = (const char *)&r->moe + sp->off;
            val[i] = sp->src == SRC_LOADH ? r->window_load_entropy
                     : sp->src == SRC_DEAD ? r->dead_experts
                     : sp->src == SRC_RHO  ? r->rho_realized
                     : sp->is_int          ? *(const int *)p
                                           : *(const double *)p;
        }
        s->collapsed = r->collapsed;
        s->alarm = r->alarm;
        s->views = r->collapse_views;
        s->E = r->moe.E;
        s->forecast = r->forecast;
        s->trend = r->trend;
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

/* The forecast line in `width` cells: the trainer's text when it fits, else shorter forms that keep
 * the share and the step count ("clean 0.30 rising: threshold ~120 steps", "clean 0.30 \u2191 ~120
 * steps", "\u2191 ~120 steps") or, without a count, the verdict ("clean 1.00 over threshold",
 * "clean 0.20 \u2193 no crossing"); what still does not fit is cut by the caller (draw_text_cut). */
static void forecast_fit(const ScalarsView *s, int width, int utf8, char *buf, size_t n) {
    snprintf(buf, n, "%s", s->forecast_text);
    if (utf8_cells(buf) <= width) return;
    const char *txt = s->forecast_text;
    const char *name = !strncmp(txt, "gate", 4) ? "gate" : "clean";
    const char *num = txt + strcspn(txt, "0123456789");
    char share[16] = "";
    if (*num) snprintf(share, sizeof share, " %.*s", (int)strspn(num, "0123456789."), num);
    const char *up = utf8 ? "\u2191" : "^", *down = utf8 ? "\u2193" : "v";
    if (s->forecast < 0) { /* over the threshold, or no crossing ahead */
        const int over = strstr(txt, "over the threshold") != NULL;
        const char *dir = strstr(txt, "falling") ? down : "=";
        for (int form = 0; form < 2; form++) {
            if (over) snprintf(buf, n, form ? "%s%s over" : "%s%s over threshold", name, share);
            else snprintf(buf, n, form ? "%s%s %s" : "%s%s %s no crossing", name, share, dir);
            if (utf8_cells(buf) <= width) return;
        }
        return;
    }
    const int rising = s->trend > 0;
    const char *word = rising ? "rising" : "entropy falling";
    char arrow[32];
    snprintf(arrow, sizeof arrow, "%s%s", rising ? "" : "entropy ", rising ? up : down);
    for (int form = 0; form < 4; form++) {
        if (form == 0) snprintf(buf, n, "%s%s %s: threshold ~%ld steps", name, share, word, s->forecast);
        else if (form == 1) snprintf(buf, n, "%s%s %s threshold ~%ld steps", name, share, arrow, s->forecast);
        else if (form == 2) snprintf(buf, n, "%s%s %s ~%ld steps", name, share, arrow, s->forecast);
        else snprintf(buf, n, "%s ~%ld steps", arrow, s->forecast);
        if (utf8_cells(buf) <= width) return;
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
        char fc[128];
        forecast_fit(s, r.w, t->utf8, fc, sizeof fc);
        draw_text_cut(w, y, r.x, r.w, t->role[warn ? TH_WARN : TH_DIM], fc);
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
        if (sp->src == SRC_DEAD) snprintf(val, sizeof val, "%.0f/%d", s->last[i], s->E);
        else if (sp->src == SRC_RHO) snprintf(val, sizeof val, "%.3f/%.3f", s->last[i], c->rho_nominal);
        else snprintf(val, sizeof val, sp->fmt, s->last[i]);
        const double x = s->last[i];
        const int red = (sp->warn == W_SHARE && x > c->collapse_share) ||
                        (sp->warn == W_ENTROPY && x < c->collapse_entropy) || (sp->warn == W_POSITIVE && x > 0);
        const int role = red ? TH_ERROR : sp->role;
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
