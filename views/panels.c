/* panels.c — the live screen's panel set (see panels.h). */
#include "panels.h"
#include "draw.h"
#include "views/prefs.h"

#include <string.h>

int panels_per_layer(int p) { return p == PANEL_TEMP || p == PANEL_HEATMAP || p == PANEL_LOAD || p == PANEL_SCALARS; }

int panels_layered(const Panels *ps) { return ps->nlayers >= 2; }

static void drop_one(Panels *ps, int i);

/* v[p] of the per-layer panels: the selected layer's views. */
static void alias_selected(Panels *ps) {
    for (int p = 0; p < PANEL_COUNT; p++) {
        if (!panels_per_layer(p)) continue;
        ps->have[p] = ps->lhave[ps->sel][p];
        if (ps->have[p]) ps->v[p] = ps->lv[ps->sel][p];
        else memset(&ps->v[p], 0, sizeof ps->v[p]);
    }
    if (ps->have_strip) view_layers_select(&ps->strip, ps->sel);
}

void panels_free(Panels *ps) {
    panels_drop_windows(ps);
    for (int p = 0; p < PANEL_COUNT; p++) {
        if (ps->have[p] && !(ps->nlayers >= 2 && panels_per_layer(p))) view_free(&ps->v[p]);
        ps->have[p] = 0;
    }
    for (int i = 0; i < REC_MAX_LAYERS; i++)
        for (int p = 0; p < PANEL_COUNT; p++) {
            if (ps->lhave[i][p]) view_free(&ps->lv[i][p]);
            ps->lhave[i][p] = 0;
        }
    if (ps->have_strip) view_free(&ps->strip);
    ps->have_strip = 0;
    ps->nlayers = 0;
    ps->sel = 0;
}

int panels_init(Panels *ps, const ViewCtx *ctx) {
    memset(ps, 0, sizeof *ps);
    ps->ctx = ctx;
    if (view_make_panels(ps->v, ps->have, ctx)) return -1;
    const int n = ctx->nlayers > REC_MAX_LAYERS ? REC_MAX_LAYERS : ctx->nlayers;
    if (n < 2) return 0;
    /* the run's per-layer panels go: every layer gets its own */
    for (int p = 0; p < PANEL_COUNT; p++)
        if (panels_per_layer(p) && ps->have[p]) {
            view_free(&ps->v[p]);
            ps->have[p] = 0;
        }
    ps->nlayers = n;
    static const struct {
        int p;
        const ViewClass *cls;
    } per[] = {{PANEL_TEMP, &view_temp_class},
               {PANEL_HEATMAP, &view_heatmap_class},
               {PANEL_LOAD, &view_load_class},
               {PANEL_SCALARS, &view_scalars_class}};
    for (int i = 0; i < n; i++) {
        ViewCtx *c = &ps->lctx[i];
        const LayerInfo *l = &ctx->layer[i];
        *c = *ctx;
        c->layer_view = i + 1;
        c->has_moe = 1;
        c->E = l->E;
        c->k = l->k;
        c->h = l->h;
        c->capacity = l->capacity > 0 ? l->capacity : ctx->batch;
        c->rho_nominal = l->rho_nominal;
        for (size_t j = 0; j < sizeof per / sizeof per[0]; j++) {
            if (view_init(&ps->lv[i][per[j].p], per[j].cls, c)) {
                panels_free(ps);
                return -1;
            }
            ps->lhave[i][per[j].p] = 1;
        }
    }
    if (view_init(&ps->strip, &view_layers_class, ctx)) {
        panels_free(ps);
        return -1;
    }
    ps->have_strip = 1;
    alias_selected(ps);
    return 0;
}

void panels_update(Panels *ps, const ViewMsg *m) {
    for (int p = 0; p < PANEL_COUNT; p++)
        if (ps->have[p] && !(ps->nlayers >= 2 && panels_per_layer(p))) view_update(&ps->v[p], m);
    if (ps->nlayers < 2) return;
    if (ps->have_strip) view_update(&ps->strip, m);
    const int project =
        m->slot == 0 && (m->kind == VIEW_MSG_STEP || m->kind == VIEW_MSG_EVAL || m->kind == VIEW_MSG_CURSOR);
    for (int i = 0; i < ps->nlayers; i++) {
        ViewMsg lm = *m;
        StepRecord sr;
        EvalRecord er;
        if (project && m->step) {
            step_record_layer(m->step, i, &sr);
            lm.step = &sr;
        }
        if (project && m->eval) {
            eval_record_layer(m->eval, i, &er);
            lm.eval = &er;
        }
        for (int p = 0; p < PANEL_COUNT; p++)
            if (ps->lhave[i][p]) view_update(&ps->lv[i][p], &lm);
    }
}

void panels_plan(Panels *ps, const TauPlan *plan, long at_step, int layer) {
    const ViewMsg m = {.kind = VIEW_MSG_PLAN, .plan = plan, .at_step = at_step};
    if (ps->nlayers < 2) {
        if (ps->have[PANEL_TEMP]) view_update(&ps->v[PANEL_TEMP], &m);
        return;
    }
    for (int i = 0; i < ps->nlayers; i++)
        if ((layer < 0 || layer >= ps->nlayers || layer == i) && ps->lhave[i][PANEL_TEMP])
            view_update(&ps->lv[i][PANEL_TEMP], &m);
}

int panels_cycle(Panels *ps, int delta) {
    if (ps->nlayers < 2) return 0;
    const int old = ps->sel;
    ps->sel = ((ps->sel + delta) % ps->nlayers + ps->nlayers) % ps->nlayers;
    alias_selected(ps);
    return ps->sel != old;
}

int panels_key(Panels *ps, int focus, int c) {
    if (c == '[' || c == ']') {
        if (ps->nlayers >= 2 && focus != PANEL_LOG) {
            panels_cycle(ps, c == ']' ? 1 : -1);
            return 1;
        }
    } else if (c == '{' || c == '}') {
        c = c == '{' ? '[' : ']';
    } else {
        return 0;
    }
    if (focus < 0 || focus >= PANEL_COUNT || !ps->have[focus]) return 0;
    return view_on_key(&ps->v[focus], c);
}

void panels_layer_tag(const Panels *ps, int p, char *buf, size_t n) {
    if (!n) return;
    buf[0] = '\0';
    if (ps->nlayers < 2 || !panels_per_layer(p)) return;
    snprintf(buf, n, "%s (%d/%d)", ps->ctx->layer[ps->sel].name, ps->sel + 1, ps->nlayers);
}

/* The first `cells` cells of s at a word boundary, ending in the cut mark. */
static void cut_title(const char *s, int cells, int utf8, char *out, size_t n) {
    size_t o = 0;
    int c = 0;
    const char *mark = utf8 ? "\u2026" : "~";
    while (s[o] && o + 1 < n) {
        if (((unsigned char)s[o] & 0xC0) != 0x80) {
            if (c == cells - 1) break; /* room for the mark */
            c++;
        }
        o++;
    }
    while (o > 0 && ((unsigned char)s[o] & 0xC0) == 0x80) o--; /* not inside a character */
    size_t cut = o;
    if (s[o] && s[o] != ' ') { /* inside a word: back to the space before it */
        size_t k = o;
        while (k > 0 && s[k - 1] != ' ') k--;
        if (k > 0) cut = k;
    }
    while (cut > 0 && s[cut - 1] == ' ') cut--;
    snprintf(out, n, "%.*s%s", (int)cut, s, mark);
}

void panels_title(const Panels *ps, int p, int width, int focused, char *buf, size_t n) {
    char title[256], tag[64];
    view_title(&ps->v[p], title, sizeof title);
    panels_layer_tag(ps, p, tag, sizeof tag);
    if (!tag[0]) {
        snprintf(buf, n, "%s", title);
        return;
    }
    const int utf8 = ps->ctx->theme->utf8;
    const char *dot = utf8 ? "\u00b7" : "-";
    char full[96], brief[64];
    snprintf(full, sizeof full, " %s %s", dot, tag);                            /* " · moe2 (1/2)" */
    snprintf(brief, sizeof brief, " %s %s", dot, ps->ctx->layer[ps->sel].name); /* " · moe2" */
    /* draw_frame prints " [> ]title " from column 2 and keeps the last two columns of the border */
    const int avail = width - 5 - 1 - (focused == 1 ? 2 : 0), cells = utf8_cells(title);
    if (cells + utf8_cells(full) <= avail) {
        snprintf(buf, n, "%s%s", title, full);
    } else if (cells + utf8_cells(brief) <= avail) {
        snprintf(buf, n, "%s%s", title, brief); /* the strip shows the count */
    } else if (avail - utf8_cells(brief) >= 4) {
        char cut[256];
        cut_title(title, avail - utf8_cells(brief), utf8, cut, sizeof cut);
        snprintf(buf, n, "%s%s", cut, brief);
    } else {
        snprintf(buf, n, "%s", ps->ctx->layer[ps->sel].name); /* a very narrow panel: the layer at least */
    }
}

int panels_strip_rows(const Panels *ps, int lines) {
    if (ps->nlayers < 2) return 0;
    return view_layers_rows(ps->ctx, layout_strip_budget(lines));
}

void panels_layout(const Panels *ps, Layout *lay, int cols, int lines, int zoom) {
    const LayoutOptions lo = {
        .has_moe = ps->ctx->has_moe || ps->nlayers >= 2,
        .banner = ps->have[PANEL_BANNER] ? view_banner_rows(&ps->v[PANEL_BANNER], cols) : 0,
        .zoom = zoom,
        .strip = panels_strip_rows(ps, lines),
        .hide = view_prefs()->hide,
        .log_rows = view_prefs()->log_rows,
        .top_share = view_prefs()->top_share,
    };
    layout_compute(lay, cols, lines, &lo);
}

static WINDOW *window_for(Panels *ps, int i, Rect r, int keep) {
    if (!keep) {
        WINDOW *w = newwin(r.h, r.w, r.y, r.x);
        if (w) leaveok(w, TRUE);
        return w;
    }
    if (ps->win[i] && !memcmp(&ps->wrect[i], &r, sizeof r)) return ps->win[i];
    if (ps->win[i]) delwin(ps->win[i]);
    ps->win[i] = newwin(r.h, r.w, r.y, r.x);
    ps->wrect[i] = ps->win[i] ? r : (Rect){0, 0, 0, 0};
    if (ps->win[i]) leaveok(ps->win[i], TRUE);
    return ps->win[i];
}

static void drop_one(Panels *ps, int i) {
    if (ps->win[i]) delwin(ps->win[i]);
    ps->win[i] = NULL;
    memset(&ps->wrect[i], 0, sizeof ps->wrect[i]);
}

void panels_drop_windows(Panels *ps) {
    for (int i = 0; i < PANELS_NWIN; i++) drop_one(ps, i);
}

void panels_draw(Panels *ps, const Layout *lay, int focus, int keep) {
    const Theme *t = ps->ctx->theme;
    for (int p = 0; p < PANEL_COUNT; p++) {
        if (p == PANEL_CMD) continue;
        if (!layout_visible(lay, p) || !ps->have[p]) {
            if (keep) drop_one(ps, p);
            continue;
        }
        const Rect r = lay->r[p];
        WINDOW *w = window_for(ps, p, r, keep);
        if (!w) continue;
        werase(w);
        if (p == PANEL_STATUS || p == PANEL_BANNER) {
            view_draw(&ps->v[p], w, (Rect){0, 0, r.w, r.h});
        } else {
            char title[320];
            const int focused = focus == p;
            panels_title(ps, p, r.w, focused, title, sizeof title);
            draw_frame(w, t, title, focused);
            view_draw(&ps->v[p], w, (Rect){1, 1, r.w - 2, r.h - 2});
        }
        wnoutrefresh(w);
        if (!keep) delwin(w);
    }
    const Rect sr = lay->strip;
    if (ps->have_strip && sr.w > 0 && sr.h > 0) {
        WINDOW *w = window_for(ps, PANEL_COUNT, sr, keep);
        if (w) {
            werase(w);
            view_draw(&ps->strip, w, (Rect){0, 0, sr.w, sr.h});
            wnoutrefresh(w);
            if (!keep) delwin(w);
        }
    } else if (keep) {
        drop_one(ps, PANEL_COUNT);
    }
}

void panels_too_small(const Theme *t, int cols, int lines, const char *line2) {
    werase(stdscr);
    char msg[96];
    snprintf(msg, sizeof msg, "terminal too small (need %dx%d, have %dx%d)", LAYOUT_MIN_W, LAYOUT_MIN_H, cols, lines);
    const int y = lines > 2 ? lines / 2 - 1 : 0;
    const int n = utf8_cells(msg);
    draw_text(stdscr, y, cols > n ? (cols - n) / 2 : 0, cols, t->role[TH_WARN] | A_BOLD, msg);
    if (line2 && *line2 && lines > 3) {
        const int k = utf8_cells(line2);
        draw_text(stdscr, y + 1, cols > k ? (cols - k) / 2 : 0, cols, A_NORMAL, line2);
    }
    wnoutrefresh(stdscr);
}
