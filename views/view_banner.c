/* view_banner.c — the one-row warning banner under the status bar: expert collapse (from the
 * collapse flag of the latest StepRecord, naming the view that flagged it: training, clean
 * router or evaluation) or a note set by the UI (a NaN/inf loss or the on-collapse rule that
 * paused the run). The note wins when both are up. */
#include "view.h"
#include "draw.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
    int collapsed, reason, dead, E, views;
    double entropy;
    long step, first;
    char text[192];
    char note[512];
} BannerView;

static int banner_init(View *v) {
    v->self = calloc(1, sizeof(BannerView));
    return v->self ? 0 : -1;
}

static void banner_free(View *v) { free(v->self); }

static void banner_update(View *v, const ViewMsg *m) {
    BannerView *b = v->self;
    if (m->slot != 0 || (m->kind != VIEW_MSG_STEP && m->kind != VIEW_MSG_CURSOR)) return;
    if (!m->step || !m->step->has_moe) return;
    b->collapsed = m->step->collapsed;
    b->reason = m->step->collapse_reason;
    b->dead = m->step->dead_experts;
    b->E = m->step->moe.E;
    b->entropy = m->step->window_load_entropy;
    b->step = m->step->step;
    b->views = m->step->collapse_views;
    b->first = m->step->collapse_first_step;
    snprintf(b->text, sizeof b->text, "%s", m->step->collapse_text);
}

static void banner_draw(View *v, WINDOW *w, Rect r) {
    BannerView *b = v->self;
    const Theme *t = v->ctx->theme;
    /* segments, dropped whole when the row is short (the lowest keep first; draw_segs) */
    char s0[600], s1[96], s2[64], s3[64], s4[64];
    const char *try_ = v->ctx->browse ? "" : "  Try: set alpha 0.05 | set tau 2";
    DrawSeg seg[5] = {{s0, 9}, {s1, 5}, {s2, 2}, {s3, 4}, {s4, 3}};
    int n = 1;
    s1[0] = s2[0] = s3[0] = s4[0] = '\0';
    if (b->note[0]) snprintf(s0, sizeof s0, " %s", b->note);
    else if (b->collapsed && b->text[0]) { /* the live run: the view and what it measured */
        snprintf(s0, sizeof s0, " EXPERT COLLAPSE: %s.", b->text);
        snprintf(s1, sizeof s1, "%s", try_);
        seg[1].keep = 1;
        n = 2;
    } else if (b->collapsed && b->views) { /* a stored step: the views that flagged it */
        char names[64] = "";
        size_t o = 0;
        for (int i = 0; i < CVIEW_COUNT; i++)
            if (b->views & (1 << i))
                o += (size_t)snprintf(names + o, sizeof names - o, "%s%s", o ? " + " : "", collapse_view_name(i));
        snprintf(s0, sizeof s0, " EXPERT COLLAPSE at step %ld:", b->step);
        snprintf(s1, sizeof s1, " %s collapsed", names);
        snprintf(s2, sizeof s2, " (%s)", routewin_reason_text(b->reason));
        snprintf(s3, sizeof s3, "; window load entropy %.2f", b->entropy);
        snprintf(s4, sizeof s4, ", dead %d/%d", b->dead, b->E);
        n = 5;
    } else if (b->collapsed) {
        snprintf(s0, sizeof s0, " EXPERT COLLAPSE at step %ld", b->step);
        snprintf(s1, sizeof s1, " (%s)", routewin_reason_text(b->reason));
        snprintf(s2, sizeof s2, ": window load entropy %.2f", b->entropy);
        snprintf(s3, sizeof s3, ", dead experts %d/%d.", b->dead, b->E);
        snprintf(s4, sizeof s4, "%s%s", try_, v->ctx->browse ? "" : " | set noise 1");
        seg[1].keep = 2;
        seg[2].keep = 4;
        seg[3].keep = 3;
        seg[4].keep = 1;
        n = 5;
    } else s0[0] = '\0';
    draw_fill(w, r.y, r.x, r.w, t->role[TH_BANNER]);
    draw_segs(w, r.y, r.x, r.w, t->role[TH_BANNER], seg, n);
}

void view_banner_set_note(View *v, const char *text) {
    BannerView *b = v->self;
    snprintf(b->note, sizeof b->note, "%s", text ? text : "");
}

int view_banner_active(const View *v) {
    const BannerView *b = v->self;
    return b->note[0] || b->collapsed;
}

const ViewClass view_banner_class = {
    .name = "banner",
    .init = banner_init,
    .free = banner_free,
    .update = banner_update,
    .draw = banner_draw,
};
