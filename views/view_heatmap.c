/* view_heatmap.c — the class x expert matrix of the latest evaluation (first-choice counts on the
 * test set): one row per class labelled with its name, one column per expert, each cell coloured
 * by p(expert | class) (the row-normalised count, so a specialised class is one bright cell),
 * with a colour legend, I(class; expert) and the test load entropy. Rows that do not fit scroll
 * with `[` and `]` when the panel has focus (or zoom it with `z`). Experts that do not fit: the
 * columns start at the expert an alarm names (view_alarm_expert), so the banner's expert shows. */
#include "view.h"
#include "draw.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    int K, E;
    int *counts; /* (K, E) of the latest evaluation */
    int have;
    int epoch;
    long step;
    double mi, load_h, test_acc;
    int scroll; /* first class row shown */
    int *drops;     /* (K, E) training pairs dropped by capacity in the evaluation's epoch */
    int have_drops; /* the evaluation shown recorded them */
    int show_drops; /* `d`: the panel shows the drops instead of the first choices */
    int alarm_e;    /* the expert the latest step's alarm names (-1: none) */
    int escroll;    /* first expert column shown (moved to show alarm_e when the columns do not fit) */
} HeatmapView;

static void heatmap_free(View *v) {
    HeatmapView *h = v->self;
    if (!h) return;
    free(h->counts);
    free(h->drops);
    free(h);
}

static int heatmap_init(View *v) {
    HeatmapView *h = calloc(1, sizeof *h);
    if (!h) return -1;
    h->K = v->ctx->classes > 0 ? v->ctx->classes : 1;
    h->E = v->ctx->E > 0 ? v->ctx->E : 1;
    h->counts = calloc((size_t)h->K * h->E, sizeof *h->counts);
    h->drops = calloc((size_t)h->K * h->E, sizeof *h->drops);
    h->alarm_e = -1;
    v->self = h;
    if (!h->counts || !h->drops) {
        heatmap_free(v);
        v->self = NULL;
        return -1;
    }
    return 0;
}

static void heatmap_update(View *v, const ViewMsg *m) {
    HeatmapView *h = v->self;
    if (m->slot == 0 && (m->kind == VIEW_MSG_STEP || m->kind == VIEW_MSG_CURSOR) && m->step && m->step->has_moe &&
        m->step->moe.E == h->E)
        h->alarm_e = view_alarm_expert(m->step);
    if ((m->kind != VIEW_MSG_EVAL && m->kind != VIEW_MSG_CURSOR) || m->slot != 0) return;
    if (!m->eval || !m->eval->has_moe || !m->eval->moe.class_expert) return;
    const EvalRecord *e = m->eval;
    if (e->moe.classes != h->K || e->moe.experts != h->E) return;
    memcpy(h->counts, e->moe.class_expert, sizeof *h->counts * h->K * h->E);
    h->have_drops = e->moe.drop_class_expert != NULL;
    if (h->have_drops) memcpy(h->drops, e->moe.drop_class_expert, sizeof *h->drops * h->K * h->E);
    h->have = 1;
    h->epoch = e->epoch;
    h->step = e->step;
    h->mi = e->moe.mutual_info;
    h->load_h = e->moe.test_load_entropy;
    h->test_acc = e->test_acc;
}

static int heatmap_key(View *v, int key) {
    HeatmapView *h = v->self;
    if (key == 'd') {
        h->show_drops = !h->show_drops;
        return 1;
    }
    if (key == ']') {
        if (h->scroll < h->K - 1) h->scroll++;
        return 1;
    }
    if (key == '[') {
        if (h->scroll > 0) h->scroll--;
        return 1;
    }
    return 0;
}

static void heatmap_title(const View *v, char *buf, size_t n) {
    const HeatmapView *h = v->self;
    if (!h->have) snprintf(buf, n, "Class x expert");
    else if (h->show_drops) snprintf(buf, n, "Drops per class x expert  epoch %d (train, capacity)", h->epoch);
    else snprintf(buf, n, "Class x expert  epoch %d (test)", h->epoch);
}

static void heatmap_draw(View *v, WINDOW *w, Rect r) {
    HeatmapView *h = v->self;
    const ViewCtx *c = v->ctx;
    const Theme *t = c->theme;
    if (!h->have) {
        draw_wrapped(w, r.y + (r.h > 3 ? r.h / 2 - 1 : 0), r.x + 1, r.w - 2, r.h, t->role[TH_DIM],
                     "waiting for the first evaluation (end of epoch 1, or `eval`)");
        return;
    }
    if (h->show_drops && !h->have_drops) {
        draw_wrapped(w, r.y + (r.h > 3 ? r.h / 2 - 1 : 0), r.x + 1, r.w - 2, r.h, t->role[TH_DIM],
                     "no drops recorded for this evaluation (a session from before they were recorded, or a row "
                     "not written yet); d: back to the first choices");
        return;
    }
    const int drops = h->show_drops;
    long dmax = 0, dtot = 0;
    for (int i = 0; drops && i < h->K * h->E; i++) {
        if (h->drops[i] > dmax) dmax = h->drops[i];
        dtot += h->drops[i];
    }
    /* label width from the class names, cell width from what is left */
    int lw = 4;
    for (int k = 0; k < h->K; k++) {
        const int l = c->class_names && c->class_names[k] ? utf8_cells(c->class_names[k]) : 3;
        if (l > lw) lw = l;
    }
    if (lw > 14) lw = 14;
    if (lw > r.w / 3) lw = r.w / 3;
    int cw = (r.w - lw - 1) / h->E;
    if (cw > 6) cw = 6;
    int shown_e = h->E;
    if (cw < 2) {
        cw = 2;
        shown_e = (r.w - lw - 1 - 4) / 2; /* room for "+N▸" */
        if (shown_e < 1) shown_e = 1;
    }
    /* the columns shown: experts es..es+shown_e-1; while an alarm names an expert that would be
     * hidden, they move to show it (back to e0 when no alarm names one) */
    if (shown_e >= h->E) h->escroll = 0;
    else if (h->alarm_e < 0) h->escroll = 0;
    else if (h->alarm_e < h->escroll) h->escroll = h->alarm_e;
    else if (h->alarm_e >= h->escroll + shown_e) h->escroll = h->alarm_e - shown_e + 1;
    if (h->escroll > h->E - shown_e) h->escroll = h->E - shown_e > 0 ? h->E - shown_e : 0;
    const int es = h->escroll;
    const int x0 = r.x + lw + 1;
    // header: expert numbers (the alarm's expert in reverse video); 2-cell columns skip a label that
    // would touch the one before it (or the alarm's), so "9 10 11" never reads as "91011"
    int ax0 = -1, ax1 = -1; /* the alarm's label cells */
    if (h->alarm_e >= es && h->alarm_e < es + shown_e) {
        char lab[16];
        snprintf(lab, sizeof lab, cw >= 3 ? "e%d" : "%d", h->alarm_e);
        ax1 = x0 + (h->alarm_e - es) * cw + cw - 1;
        ax0 = ax1 - (int)strlen(lab) + 1;
    }
    for (int j = 0, last = -2; j < shown_e; j++) {
        const int e = es + j;
        char lab[16];
        snprintf(lab, sizeof lab, cw >= 3 ? "e%d" : "%d", e);
        const int lx = x0 + j * cw + (cw - (int)strlen(lab)), rx = lx + (int)strlen(lab) - 1;
        if (e != h->alarm_e && (lx <= last + 1 || (ax0 >= 0 && lx <= ax1 + 1 && rx >= ax0 - 1))) continue;
        draw_text(w, r.y, lx, cw, e == h->alarm_e ? t->role[TH_ERROR] | A_REVERSE | A_BOLD : t->role[TH_AXIS], lab);
        last = rx;
    }
    if (es + shown_e < h->E) {
        char lab[24];
        snprintf(lab, sizeof lab, "+%d%s", h->E - es - shown_e, t->utf8 ? "\u25b8" : ">");
        draw_text(w, r.y, x0 + shown_e * cw, r.x + r.w - x0 - shown_e * cw, t->role[TH_WARN] | A_BOLD, lab);
    }
    /* class rows first: the legend shrinks to one row, or none, before classes are cut */
    const int avail = r.h - 1;
    const int legend_rows = avail >= h->K + 2 ? 2 : avail >= h->K + 1 ? 1 : r.h >= 8 ? 1 : 0;
    const int rows = r.h - 1 - legend_rows;
    if (h->scroll > h->K - rows) h->scroll = h->K - rows > 0 ? h->K - rows : 0;
    const int nbins = t->nheat;
    for (int i = 0; i < rows && h->scroll + i < h->K; i++) {
        const int k = h->scroll + i, y = r.y + 1 + i;
        const char *name = c->class_names && c->class_names[k] ? c->class_names[k] : "?";
        draw_text(w, y, r.x, lw, A_NORMAL, name);
        long tot = 0;
        for (int e = 0; e < h->E; e++) tot += h->counts[k * h->E + e];
        for (int j = 0; j < shown_e; j++) {
            const int e = es + j;
            /* first choices: the share of the class (%); drops: the count, shaded against the largest */
            const int dv = h->drops[k * h->E + e];
            const double p = drops ? (dmax > 0 ? (double)dv / dmax : 0.0)
                                   : tot > 0 ? (double)h->counts[k * h->E + e] / tot
                                             : 0.0;
            char txt[16];
            if (!drops) snprintf(txt, sizeof txt, "%d", (int)lround(100.0 * p));
            else if (dv < 1000) snprintf(txt, sizeof txt, "%d", dv);
            else if (dv < 100000) snprintf(txt, sizeof txt, "%dk", (int)lround(dv / 1000.0));
            else snprintf(txt, sizeof txt, "%dM", (int)lround(dv / 1e6));
            draw_heat_cell(w, y, x0 + j * cw, cw - (cw > 2), heat_bin(p, 0.0, 1.0, nbins), cw >= 4 ? txt : NULL, t);
        }
    }
    { /* what is hidden, in the bottom border: classes below / above, experts to the right; the
       * words go first when the panel is too narrow for them */
        const int below = h->K - h->scroll - rows, right = h->E - es - shown_e, left = es;
        const char *up = t->utf8 ? "\u25b4" : "^", *dn = t->utf8 ? "\u25be" : "v", *rt = t->utf8 ? "\u25b8" : ">";
        const char *lf = t->utf8 ? "\u25c2" : "<";
        for (int form = 0; form < 3; form++) {
            char more[96] = "";
            size_t n = 0;
            if (h->scroll > 0)
                n += (size_t)snprintf(more + n, sizeof more - n, form < 2 ? "%d above %s " : "%d%s ", h->scroll, up);
            if (below > 0)
                n += (size_t)snprintf(more + n, sizeof more - n,
                                      form == 0   ? "+%d classes %s "
                                      : form == 1 ? "+%d cls %s "
                                                  : "+%d%s ",
                                      below, dn);
            if (left > 0)
                n += (size_t)snprintf(more + n, sizeof more - n, form < 2 ? "%d left %s " : "%d%s ", left, lf);
            if (right > 0)
                n += (size_t)snprintf(more + n, sizeof more - n,
                                      form == 0   ? "+%d experts %s "
                                      : form == 1 ? "+%d exp %s "
                                                  : "+%d%s ",
                                      right, rt);
            if (!n) break;
            more[n - 1] = 0;
            if (utf8_cells(more) + 2 <= r.w || form == 2) {
                draw_more(w, r, t, more);
                break;
            }
        }
    }
    if (rows < h->K) { /* which rows are shown, in the empty corner above the labels */
        char more[32];
        snprintf(more, sizeof more, "%d-%d/%d", h->scroll + 1, h->scroll + rows < h->K ? h->scroll + rows : h->K, h->K);
        draw_text(w, r.y, r.x, lw, t->role[TH_DIM], more);
    }
    if (legend_rows == 0) return;
    // legend: the colour ramp of p(e|c) and I(class; expert); on one row, a compact form
    const int y = r.y + r.h - legend_rows;
    int x = r.x;
    if (drops) { /* the drops' legend: the ramp from 0 to the largest cell, and the epoch's total */
        x += draw_text(w, y, x, r.w, t->role[TH_DIM], legend_rows >= 2 ? "dropped 0" : "0");
        for (int b = 0; b < nbins && x < r.x + r.w - 6; b++) {
            draw_heat_cell(w, y, x, legend_rows >= 2 ? 2 : 1, b, NULL, t);
            x += legend_rows >= 2 ? 2 : 1;
        }
        char mx[64];
        snprintf(mx, sizeof mx, "%ld", dmax);
        x += draw_text(w, y, x, r.x + r.w - x, t->role[TH_DIM], mx);
        if (legend_rows >= 2) {
            char buf[96];
            snprintf(buf, sizeof buf, "%ld training pairs dropped in the epoch  (d: first choices)", dtot);
            draw_text(w, y + 1, r.x, r.w, t->role[TH_DIM], buf);
        }
        return;
    }
    x += draw_text(w, y, x, r.w, t->role[TH_DIM], legend_rows >= 2 ? "p(e|c) 0%" : "0");
    for (int b = 0; b < nbins && x < r.x + r.w - 6; b++) {
        draw_heat_cell(w, y, x, legend_rows >= 2 ? 2 : 1, b, NULL, t);
        x += legend_rows >= 2 ? 2 : 1;
    }
    x += draw_text(w, y, x, r.x + r.w - x, t->role[TH_DIM], legend_rows >= 2 ? "100%" : "1");
    char buf[160];
    const int kmin = h->K < h->E ? h->K : h->E;
    if (legend_rows >= 2) {
        /* the longest form that fits, rather than a cut number */
        const double mx = log((double)kmin);
        for (int form = 0; form < 5; form++) {
            if (form == 0)
                snprintf(buf, sizeof buf, "I(class;expert) %.3f nats (max %.2f)  load H %.2f", h->mi, mx, h->load_h);
            else if (form == 1) snprintf(buf, sizeof buf, "I(class;expert) %.3f nats  load H %.2f", h->mi, h->load_h);
            else if (form == 2) snprintf(buf, sizeof buf, "I(class;expert) %.3f nats (max %.2f)", h->mi, mx);
            else if (form == 3) snprintf(buf, sizeof buf, "I(class;expert) %.3f nats", h->mi);
            else snprintf(buf, sizeof buf, "I(c;e) %.3f/%.2f", h->mi, mx);
            if (utf8_cells(buf) <= r.w) break;
        }
        draw_text_cut(w, y + 1, r.x, r.w, A_BOLD, buf);
    } else {
        snprintf(buf, sizeof buf, "I(c;e) %.3f/%.2f", h->mi, log((double)kmin));
        draw_text_cut(w, y, x + 1, r.x + r.w - x - 1, A_BOLD, buf);
    }
}

const ViewClass view_heatmap_class = {
    .name = "Class x expert",
    .init = heatmap_init,
    .free = heatmap_free,
    .update = heatmap_update,
    .draw = heatmap_draw,
    .on_key = heatmap_key,
    .title = heatmap_title,
};
