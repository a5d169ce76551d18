/* view_banner.c — the alarm banner under the status bar: the latest StepRecord's alarm message
 * (red for a collapse, yellow for a warning or an expert death; one or two rows, wrapped at a word
 * so that the view, the expert and the share stay whole at 80 columns) or a note set by the UI
 * (a NaN/inf loss or the on-collapse rule that paused the run, red). The note wins when both are up. */
#include "view.h"
#include "draw.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
    int collapsed, reason, dead, E, views, alarm;
    double entropy;
    long step, first;
    char text[256];
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
    b->alarm = m->step->alarm > 0 ? m->step->alarm : m->step->collapsed ? ALARM_COLLAPSE : ALARM_NONE;
    b->reason = m->step->collapse_reason;
    b->dead = m->step->dead_experts;
    b->E = m->step->moe.E;
    b->entropy = m->step->window_load_entropy;
    b->step = m->step->step;
    b->views = m->step->collapse_views;
    b->first = m->step->collapse_first_step;
    snprintf(b->text, sizeof b->text, "%s", m->step->collapse_text);
}

/* The banner's text: the note, THE alarm message of the live run (collapse_format, the same as the
 * log's), or for a stored step (no message in /steps) what its columns say. */
static void banner_text(const BannerView *b, int browse, char *s, size_t n) {
    if (b->note[0]) snprintf(s, n, " %s", b->note);
    else if (b->alarm && b->text[0]) snprintf(s, n, " %s", b->text);
    else if (b->alarm) {
        char names[64] = "";
        size_t o = 0;
        for (int i = 0; i < CVIEW_COUNT; i++)
            if (b->views & (1 << i))
                o += (size_t)snprintf(names + o, sizeof names - o, "%s%s", o ? " + " : "", collapse_view_name(i));
        if (b->views & CVIEW_BIT_IDLE)
            o += (size_t)snprintf(names + o, sizeof names - o, "%srouter idle", o ? " + " : "");
        snprintf(s, n, " %s at step %ld: %s%s%s; window load entropy %.2f, dead %d/%d",
                 b->alarm == ALARM_COLLAPSE ? "COLLAPSE" : "WARNING", b->step, o ? names : "expert death",
                 b->reason ? " " : "", b->reason ? routewin_reason_text(b->reason) : "", b->entropy, b->dead, b->E);
    } else s[0] = '\0';
    (void)browse;
}

/* Splits s for two rows of width w at the last space that fits (*cut: where row 2 starts). */
static int banner_split(const char *s, int w) {
    const int len = (int)strlen(s);
    if (len <= w) return len;
    int cut = w;
    while (cut > w / 2 && s[cut] != ' ') cut--;
    return cut > w / 2 ? cut : w;
}

int view_banner_rows(const View *v, int width) {
    const BannerView *b = v->self;
    if (!b->note[0] && !b->alarm) return 0;
    char s[720];
    banner_text(b, v->ctx->browse, s, sizeof s);
    return (int)strlen(s) > width ? 2 : 1;
}

static void banner_draw(View *v, WINDOW *w, Rect r) {
    BannerView *b = v->self;
    const Theme *t = v->ctx->theme;
    const attr_t a = !b->note[0] && b->alarm == ALARM_WARNING ? t->role[TH_BANNER_WARN] : t->role[TH_BANNER];
    char s[720];
    banner_text(b, v->ctx->browse, s, sizeof s);
    /* the live run's hint, when it fits on the last row */
    const char *try_ = v->ctx->browse || b->note[0] || !b->alarm ? "" : "  Try: set alpha 0.05 | set tau 2";
    for (int y = 0; y < r.h; y++) draw_fill(w, r.y + y, r.x, r.w, a);
    if (r.h >= 2 && (int)strlen(s) > r.w) {
        const int cut = banner_split(s, r.w);
        char row1[720];
        snprintf(row1, sizeof row1, "%.*s", cut, s);
        draw_text(w, r.y, r.x, r.w, a, row1);
        const char *rest = s + cut;
        while (*rest == ' ') rest++;
        char row2[720];
        snprintf(row2, sizeof row2, " %s%s", rest, (int)(strlen(rest) + strlen(try_)) + 1 <= r.w ? try_ : "");
        draw_text_cut(w, r.y + 1, r.x, r.w, a, row2);
        return;
    }
    char row[760];
    snprintf(row, sizeof row, "%s%s", s, (int)(strlen(s) + strlen(try_)) <= r.w ? try_ : "");
    draw_text_cut(w, r.y, r.x, r.w, a, row);
}

void view_banner_set_note(View *v, const char *text) {
    BannerView *b = v->self;
    snprintf(b->note, sizeof b->note, "%s", text ? text : "");
}

int view_banner_active(const View *v) {
    const BannerView *b = v->self;
    return b->note[0] || b->alarm;
}

const ViewClass view_banner_class = {
    .name = "banner",
    .init = banner_init,
    .free = banner_free,
    .update = banner_update,
    .draw = banner_draw,
};
