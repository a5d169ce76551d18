/* layout.c — panel rectangles for the live screen (see layout.h). Pure: no curses. */
#include "layout.h"

#include <string.h>

static Rect rect_make(int x, int y, int w, int h) {
    Rect r = {x, y, w > 0 ? w : 0, h > 0 ? h : 0};
    return r;
}

static int clampi(int v, int lo, int hi) { return v < lo ? lo : v > hi ? hi : v; }

static void layout_hide(Layout *l, unsigned hide, int top, int rows);

int layout_compute(Layout *l, int cols, int lines, const LayoutOptions *o) {
    memset(l, 0, sizeof *l);
    l->cols = cols;
    l->lines = lines;
    if (cols < LAYOUT_MIN_W || lines < LAYOUT_MIN_H) {
        l->too_small = 1;
        return -1;
    }
    const int W = cols, H = lines;
    l->r[PANEL_STATUS] = rect_make(0, 0, W, 2);
    int top = 2;
    if (o->banner) { /* one row, or two when the message needs them */
        const int rows = o->banner > 1 ? 2 : 1;
        l->r[PANEL_BANNER] = rect_make(0, 2, W, rows);
        top = 2 + rows;
    }
    const int bottom = H - 1; /* first row not available to panels: the command line */
    l->r[PANEL_CMD] = rect_make(0, bottom, W, 1);
    const unsigned hide = o->hide & ~((1u << PANEL_CURVES) - 1) & ((1u << PANEL_CMD) - 1);
    int logh = o->log_rows > 0 ? clampi(o->log_rows, 3, H / 3) : clampi(H / 5, 5, 12);
    if (hide & (1u << PANEL_LOG)) logh = 0;
    l->r[PANEL_LOG] = rect_make(0, bottom - logh, W, logh);
    int strip = o->strip > 0 ? o->strip : 0;
    if (strip > layout_strip_budget(H)) strip = layout_strip_budget(H);
    if (strip) l->strip = rect_make(0, bottom - logh - strip, W, strip);
    const int mh = bottom - logh - top - strip; /* rows for the panels: >= 24 - 1 - 5 - 3 - 2 = 13 */
    if (o->has_moe) {
        const int h1 = o->top_share > 0 ? clampi(mh * clampi(o->top_share, 20, 80) / 100, 4, mh - 4) : (mh + 1) / 2;
        const int h2 = mh - h1, y2 = top + h1;
        if (W >= 160) {
            const int a = W * 2 / 5, b = W * 3 / 10, c = W * 2 / 5;
            l->r[PANEL_CURVES] = rect_make(0, top, a, h1);
            l->r[PANEL_TEMP] = rect_make(a, top, b, h1);
            l->r[PANEL_SCALARS] = rect_make(a + b, top, W - a - b, h1);
            l->r[PANEL_HEATMAP] = rect_make(0, y2, c, h2);
            l->r[PANEL_LOAD] = rect_make(c, y2, W - c, h2);
        } else {
            const int a = W < 120 ? W / 2 : W * 11 / 20, c = W / 3;
            l->r[PANEL_CURVES] = rect_make(0, top, a, h1);
            l->r[PANEL_TEMP] = rect_make(a, top, W - a, h1);
            l->r[PANEL_HEATMAP] = rect_make(0, y2, c, h2);
            l->r[PANEL_LOAD] = rect_make(c, y2, c, h2);
            l->r[PANEL_SCALARS] = rect_make(2 * c, y2, W - 2 * c, h2);
        }
    } else {
        const int a = W * 2 / 3;
        l->r[PANEL_CURVES] = rect_make(0, top, a, mh);
        l->r[PANEL_SCALARS] = rect_make(a, top, W - a, mh);
    }
    if (hide) layout_hide(l, hide, top, mh + logh);
    if (o->zoom >= PANEL_CURVES && o->zoom <= PANEL_LOG && layout_visible(l, o->zoom)) {
        for (int p = PANEL_CURVES; p <= PANEL_LOG; p++) l->r[p] = rect_make(0, 0, 0, 0);
        l->r[o->zoom] = rect_make(0, top, W, bottom - top - strip);
        if (strip) l->strip = rect_make(0, bottom - strip, W, strip);
    }
    return 0;
}

/* Takes the hidden panels out: in each row of panels the visible ones share the row's width in
 * proportion to their widths; a row with none visible gives its rows to the other; when every
 * panel is hidden the log takes their rows too (rows: from `top`, the panels' and the log's). */
static void layout_hide(Layout *l, unsigned hide, int top, int rows) {
    int ys[2] = {-1, -1}, hs[2] = {0, 0}, nrows = 0;
    for (int p = PANEL_CURVES; p < PANEL_LOG; p++) { /* the rows, by their y */
        const Rect r = l->r[p];
        if (r.w <= 0) continue;
        int i = 0;
        while (i < nrows && ys[i] != r.y) i++;
        if (i == nrows && nrows < 2) ys[nrows] = r.y, hs[nrows++] = r.h;
    }
    int vis[2] = {0, 0};
    for (int i = 0; i < nrows; i++) {
        int total = 0, kept = 0, members[PANEL_COUNT], n = 0;
        for (int p = PANEL_CURVES; p < PANEL_LOG; p++) {
            if (l->r[p].w <= 0 || l->r[p].y != ys[i]) continue;
            total += l->r[p].w;
            if (hide & (1u << p)) l->r[p] = rect_make(0, 0, 0, 0);
            else kept += l->r[p].w, members[n++] = p;
        }
        vis[i] = n;
        /* in screen order (left to right), each visible one scaled to the whole width */
        for (int a = 1; a < n; a++)
            for (int b = a; b > 0 && l->r[members[b]].x < l->r[members[b - 1]].x; b--) {
                const int t = members[b];
                members[b] = members[b - 1];
                members[b - 1] = t;
            }
        int x = 0;
        for (int j = 0; j < n; j++) {
            Rect *r = &l->r[members[j]];
            const int w = j == n - 1 ? total - x : (int)((long)r->w * total / kept);
            r->x = x;
            r->w = w;
            x += w;
        }
    }
    if (nrows == 2 && (!vis[0] || !vis[1])) /* one row left: it takes both */
        for (int p = PANEL_CURVES; p < PANEL_LOG; p++)
            if (l->r[p].w > 0) l->r[p].y = ys[0], l->r[p].h = hs[0] + hs[1];
    if (!vis[0] && (nrows < 2 || !vis[1]) && !(hide & (1u << PANEL_LOG))) { /* only the log: all of it */
        const int strip = l->strip.h;
        if (strip) l->strip = rect_make(0, top, l->cols, strip);
        l->r[PANEL_LOG] = rect_make(0, top + strip, l->cols, rows);
    }
}

int layout_strip_budget(int lines) {
    const int b = (lines - 20) / 2;
    return clampi(b, 1, 5);
}

int layout_visible(const Layout *l, int panel) {
    return panel >= 0 && panel < PANEL_COUNT && l->r[panel].w > 0 && l->r[panel].h > 0;
}

/* Focusable panels in screen order: by row, then column. */
static int focus_before(const Layout *l, int a, int b) {
    const Rect ra = l->r[a], rb = l->r[b];
    if (ra.y != rb.y) return ra.y < rb.y;
    if (ra.x != rb.x) return ra.x < rb.x;
    return a < b;
}

int layout_next_focus(const Layout *l, int cur) {
    if (l->too_small) return -1;
    int order[PANEL_COUNT], n = 0;
    for (int p = PANEL_CURVES; p <= PANEL_LOG; p++) {
        if (!layout_visible(l, p)) continue;
        int i = n++;
        while (i > 0 && focus_before(l, p, order[i - 1])) {
            order[i] = order[i - 1];
            i--;
        }
        order[i] = p;
    }
    if (n == 0) return cur;
    for (int i = 0; i < n; i++)
        if (order[i] == cur) return order[(i + 1) % n];
    return order[0];
}

const char *layout_panel_name(int panel) {
    static const char *const names[PANEL_COUNT] = {
        "status", "banner", "curves", "temperature", "heatmap", "load", "scalars", "log", "command",
    };
    return panel >= 0 && panel < PANEL_COUNT ? names[panel] : "?";
}

int rect_overlap(Rect a, Rect b) {
    if (a.w <= 0 || a.h <= 0 || b.w <= 0 || b.h <= 0) return 0;
    return a.x < b.x + b.w && b.x < a.x + a.w && a.y < b.y + b.h && b.y < a.y + a.h;
}

int layout_compare(CompareLayout *l, int cols, int lines) {
    memset(l, 0, sizeof *l);
    l->cols = cols;
    l->lines = lines;
    if (cols < LAYOUT_MIN_W || lines < LAYOUT_MIN_H) {
        l->too_small = 1;
        return -1;
    }
    l->r[CMP_STATUS] = (Rect){0, 0, cols, 2};
    l->r[CMP_HINT] = (Rect){0, lines - 1, cols, 1};
    const int body = lines - 3; /* rows between the status bar and the hint */
    int top = body * 9 / 20;    /* curves and diff: 13 scalar rows + header + frame fit at 16 */
    if (top < 16) top = 16 < body - 6 ? 16 : body - 6;
    int dw = cols * 2 / 5;
    if (dw < 40) dw = 40;
    if (dw > 52) dw = 52;
    l->r[CMP_CURVES] = (Rect){0, 2, cols - dw, top};
    l->r[CMP_DIFF] = (Rect){cols - dw, 2, dw, top};
    const int hh = body - top, ha = cols / 2;
    l->r[CMP_HEAT_A] = (Rect){0, 2 + top, ha, hh};
    l->r[CMP_HEAT_B] = (Rect){ha, 2 + top, cols - ha, hh};
    return 0;
}
