/* view.c — the view vtable dispatch (see view.h). */
#include "view.h"

#include "core/routestats.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

int view_init(View *v, const ViewClass *cls, const ViewCtx *ctx) {
    memset(v, 0, sizeof *v);
    v->cls = cls;
    v->ctx = ctx;
    return cls->init ? cls->init(v) : 0;
}

void view_free(View *v) {
    if (v->cls && v->cls->free) v->cls->free(v);
    memset(v, 0, sizeof *v);
}

void view_update(View *v, const ViewMsg *m) {
    if (v->cls && v->cls->update) v->cls->update(v, m);
}

void view_draw(View *v, WINDOW *w, Rect r) {
    if (v->cls && v->cls->draw && r.w > 0 && r.h > 0) v->cls->draw(v, w, r);
}

int view_on_key(View *v, int key) { return v->cls && v->cls->on_key ? v->cls->on_key(v, key) : 0; }

void view_title(const View *v, char *buf, size_t n) {
    if (!n) return;
    if (v->cls && v->cls->title) v->cls->title(v, buf, n);
    else snprintf(buf, n, "%s", v->cls ? v->cls->name : "");
}

int view_make_panels(View v[PANEL_COUNT], int have[PANEL_COUNT], const ViewCtx *ctx) {
    static const struct {
        int panel;
        const ViewClass *cls;
        int moe_only;
    } table[] = {
        {PANEL_STATUS, &view_status_class, 0},   {PANEL_BANNER, &view_banner_class, 0},
        {PANEL_CURVES, &view_curves_class, 0},   {PANEL_TEMP, &view_temp_class, 1},
        {PANEL_HEATMAP, &view_heatmap_class, 1}, {PANEL_LOAD, &view_load_class, 1},
        {PANEL_SCALARS, &view_scalars_class, 0}, {PANEL_LOG, &view_log_class, 0},
    };
    for (int p = 0; p < PANEL_COUNT; p++) have[p] = 0;
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
        if (table[i].moe_only && !ctx->has_moe) continue;
        if (view_init(&v[table[i].panel], table[i].cls, ctx)) {
            view_free_panels(v, have);
            return -1;
        }
        have[table[i].panel] = 1;
    }
    return 0;
}

void view_free_panels(View v[PANEL_COUNT], int have[PANEL_COUNT]) {
    for (int p = 0; p < PANEL_COUNT; p++) {
        if (have[p]) view_free(&v[p]);
        have[p] = 0;
    }
}

/* The first "eN" word of text (N < E), -1 if none. */
static int first_expert_word(const char *text, const char *from, int E) {
    for (const char *p = from; *p; p++) {
        if (*p != 'e' || !isdigit((unsigned char)p[1]) || (p > text && isalnum((unsigned char)p[-1]))) continue;
        char *end;
        const long e = strtol(p + 1, &end, 10);
        if (!isalnum((unsigned char)*end) && e >= 0 && e < E) return (int)e;
    }
    return -1;
}

int view_alarm_expert(const StepRecord *r) {
    if (!r || !r->has_moe || (r->alarm <= 0 && !r->collapsed)) return -1;
    const int E = r->moe.E;
    /* "... to e3, ...", "EXPERT DEATH e5: ..."; an episode whose expert changed since its onset says
     * where it is now, "(now 97% to e13)": that one */
    const char *now = strstr(r->collapse_text, "(now ");
    int e = now ? first_expert_word(r->collapse_text, now, E) : -1;
    if (e < 0) e = first_expert_word(r->collapse_text, r->collapse_text, E);
    if (e >= 0) return e;
    const int *count = r->collapse_views & CVIEW_BIT_TRAIN ? r->moe.first
                       : r->collapse_views & CVIEW_BIT_CLEAN ? r->moe.clean_first
                                                             : NULL;
    if (count) {
        int best = -1;
        for (int i = 0; i < E; i++)
            if (count[i] > 0 && (best < 0 || count[i] > count[best])) best = i;
        if (best >= 0) return best;
    }
    for (int i = 0; i < E && i < 63; i++)
        if ((unsigned long)r->dead_mask >> i & 1u) return i;
    return -1;
}
