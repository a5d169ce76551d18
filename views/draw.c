/* draw.c — curses drawing helpers shared by the views (see draw.h). */
#define _DEFAULT_SOURCE
#define _XOPEN_SOURCE 700 /* wcwidth */
#include "draw.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <wchar.h>

/* Copies the longest prefix of s that fits in maxw cells into out (control bytes -> '?'; in a
 * single-byte locale, non-ASCII bytes -> '?'). Returns the cells used. */
static int fit_cells(const char *s, int maxw, char *out, size_t cap) {
    const int mb = MB_CUR_MAX > 1;
    mbstate_t st;
    memset(&st, 0, sizeof st);
    int cells = 0;
    size_t o = 0;
    while (*s && cells < maxw && o + 8 < cap) {
        const unsigned char c = (unsigned char)*s;
        if (c < 0x20 || c == 0x7f || (!mb && c >= 0x80)) {
            out[o++] = '?';
            cells++;
            s++;
            continue;
        }
        if (c < 0x80) {
            out[o++] = (char)c;
            cells++;
            s++;
            continue;
        }
        wchar_t wc;
        size_t k = mbrtowc(&wc, s, MB_CUR_MAX, &st);
        if (k == (size_t)-1 || k == (size_t)-2 || k == 0) {
            memset(&st, 0, sizeof st);
            out[o++] = '?';
            cells++;
            s++;
            continue;
        }
        int cw = wcwidth(wc);
        if (cw < 0) cw = 1;
        if (cells + cw > maxw) break;
        memcpy(out + o, s, k);
        o += k;
        s += k;
        cells += cw;
    }
    out[o] = '\0';
    return cells;
}

int draw_text(WINDOW *w, int y, int x, int maxw, attr_t a, const char *s) {
    int wh, ww;
    getmaxyx(w, wh, ww);
    if (y < 0 || y >= wh || x < 0 || x >= ww || maxw <= 0 || !s) return 0;
    if (maxw > ww - x) maxw = ww - x;
    char buf[1024];
    const int cells = fit_cells(s, maxw, buf, sizeof buf);
    wattrset(w, a);
    mvwaddstr(w, y, x, buf);
    wattrset(w, A_NORMAL);
    return cells;
}

/* The cut of draw_text_cut into out: s whole if it fits in maxw cells, else cut at a space with
 * "…" ("~" without UTF-8) in the last cell. Returns the cells of out. */
static int cut_text(const char *s, int maxw, int utf8, char *out, size_t cap) {
    if (maxw <= 0) {
        out[0] = '\0';
        return 0;
    }
    if (utf8_cells(s) <= maxw) return fit_cells(s, maxw, out, cap);
    fit_cells(s, maxw - 1, out, cap); /* room for the mark */
    char *sp = strrchr(out, ' ');
    if (sp && sp > out) *sp = '\0'; /* the last whole word */
    size_t n = strlen(out);
    while (n > 0 && out[n - 1] == ' ') out[--n] = '\0';
    snprintf(out + n, cap - n, "%s", utf8 ? "\u2026" : "~");
    return utf8_cells(out);
}

int draw_text_cut(WINDOW *w, int y, int x, int maxw, attr_t a, const char *s) {
    if (maxw <= 0 || !s) return 0;
    char buf[1024];
    cut_text(s, maxw, MB_CUR_MAX > 1, buf, sizeof buf);
    return draw_text(w, y, x, maxw, a, buf);
}

int draw_fit_segs(const DrawSeg *seg, int n, int maxw, int utf8, char *out, size_t cap) {
    enum { MAXSEG = 32 };
    int cells[MAXSEG], drop[MAXSEG] = {0}, dropped = 0;
    DrawSeg sg[MAXSEG];
    int m = 0; /* the non-empty segments (an empty one neither drops nor splits a run of dropped ones) */
    for (int i = 0; i < n && m < MAXSEG; i++)
        if (seg[i].text && seg[i].text[0]) sg[m++] = seg[i];
    seg = sg;
    n = m;
    if (cap == 0) return 0;
    out[0] = '\0';
    if (n <= 0 || maxw <= 0) return 0;
    for (int i = 0; i < n; i++) cells[i] = utf8_cells(seg[i].text);
    /* the width with the dropped runs as one mark each */
    for (;;) {
        int w = 0;
        for (int i = 0; i < n; i++) w += drop[i] ? (i == 0 || !drop[i - 1]) : cells[i];
        if (w <= maxw) break;
        int pick = -1; /* the droppable segment to go first: lowest keep, the later of a tie */
        for (int i = 1; i < n; i++)
            if (!drop[i] && (pick < 0 || seg[i].keep <= seg[pick].keep)) pick = i;
        if (pick < 0) break;
        drop[pick] = 1;
        dropped++;
    }
    char tmp[2048];
    size_t o = 0;
    for (int i = 0; i < n && o + 8 < sizeof tmp; i++) {
        const char *t = drop[i] ? (i > 0 && drop[i - 1] ? "" : utf8 ? "\u2026" : "~") : seg[i].text;
        o += (size_t)snprintf(tmp + o, sizeof tmp - o, "%s", t);
        if (o >= sizeof tmp) o = sizeof tmp - 1;
    }
    cut_text(tmp, maxw, utf8, out, cap); /* the first segment alone too long: cut at a word */
    return dropped;
}

int draw_segs(WINDOW *w, int y, int x, int maxw, attr_t a, const DrawSeg *seg, int n) {
    char buf[1024];
    draw_fit_segs(seg, n, maxw, MB_CUR_MAX > 1, buf, sizeof buf);
    return draw_text(w, y, x, maxw, a, buf);
}

void draw_more(WINDOW *w, Rect r, const Theme *t, const char *text) {
    char buf[128];
    snprintf(buf, sizeof buf, " %s ", text);
    const int n = utf8_cells(buf), x = r.x + r.w - n;
    draw_text(w, r.y + r.h, x > r.x ? x : r.x, r.w, t->role[TH_WARN] | A_BOLD, buf);
}

int draw_textf(WINDOW *w, int y, int x, int maxw, attr_t a, const char *fmt, ...) {
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    return draw_text(w, y, x, maxw, a, buf);
}

int draw_wrapped(WINDOW *w, int y, int x, int width, int max_rows, attr_t a, const char *text) {
    if (width <= 0) return 0;
    int rows = 0;
    const char *p = text;
    while (*p && rows < max_rows) {
        while (*p == ' ') p++;
        /* the longest run of whole words that fits (ASCII text: one cell per byte) */
        int len = (int)strlen(p), cut = len;
        if (len > width) {
            cut = width;
            while (cut > 0 && p[cut] != ' ') cut--;
            if (cut == 0) cut = width;
        }
        char line[512];
        const int n = cut < (int)sizeof line - 1 ? cut : (int)sizeof line - 1;
        memcpy(line, p, (size_t)n);
        line[n] = '\0';
        draw_text(w, y + rows, x, width, a, line);
        rows++;
        p += cut;
    }
    return rows;
}

void draw_fill(WINDOW *w, int y, int x, int n, attr_t a) {
    int wh, ww;
    getmaxyx(w, wh, ww);
    if (y < 0 || y >= wh || x < 0 || x >= ww) return;
    if (n > ww - x) n = ww - x;
    wattrset(w, a);
    for (int i = 0; i < n; i++) mvwaddch(w, y, x + i, ' ');
    wattrset(w, A_NORMAL);
}

void draw_frame(WINDOW *w, const Theme *t, const char *title, int focused) {
    int wh, ww;
    getmaxyx(w, wh, ww);
    (void)wh;
    wattrset(w, focused ? (t->color ? t->role[TH_WARN] : A_BOLD) : t->role[TH_BORDER]);
    if (t->utf8) box(w, 0, 0);
    else wborder(w, '|', '|', '-', '-', '+', '+', '+', '+'); /* ASCII fallback: no ACS either */
    wattrset(w, A_NORMAL);
    if (title && *title && ww > 6) {
        char buf[256];
        snprintf(buf, sizeof buf, " %s%s", focused == 1 ? "> " : "", title);
        const int n = draw_text_cut(w, 0, 2, ww - 5, focused ? t->role[TH_FOCUS] : t->role[TH_TITLE], buf);
        draw_text(w, 0, 2 + n, 1, focused ? t->role[TH_FOCUS] : t->role[TH_TITLE], " ");
    }
}

void draw_canvas(WINDOW *w, int y, int x, const Canvas *c, const Theme *t, const int *role_of_color) {
    char cell[8];
    for (int cy = 0; cy < c->ch; cy++)
        for (int cx = 0; cx < c->cw; cx++) {
            const int col = canvas_cell(c, cx, cy, t->utf8, cell);
            if (!cell[0]) continue;
            const int role = role_of_color ? role_of_color[col] : TH_NORMAL;
            wattrset(w, t->role[role >= 0 && role < TH_COUNT ? role : TH_NORMAL]);
            mvwaddstr(w, y + cy, x + cx, cell);
        }
    wattrset(w, A_NORMAL);
}

void draw_sparkline(WINDOW *w, int y, int x, int width, const Ring *r, const Theme *t, attr_t a) {
    if (width <= 0 || r->n == 0) return;
    const int n = r->n < width ? r->n : width;
    double lo, hi;
    if (!ring_minmax(r, n, &lo, &hi)) return;
    wattrset(w, a);
    for (int i = 0; i < n; i++) {
        const double v = ring_get(r, r->n - n + i);
        const char *g = isfinite(v) ? t->spark[spark_level(v, lo, hi, 8)] : " ";
        mvwaddstr(w, y, x + (width - n) + i, g);
    }
    wattrset(w, A_NORMAL);
}

void draw_heat_cell(WINDOW *w, int y, int x, int width, int bin, const char *text, const Theme *t) {
    if (width <= 0) return;
    const int len = text ? (int)strlen(text) : 0;
    if (t->color) {
        draw_fill(w, y, x, width, theme_heat(t, bin));
        if (len && len <= width) draw_text(w, y, x + width - len - (width > len), len, theme_heat(t, bin), text);
        return;
    }
    const int top = t->nheat - 1;
    if (len && len < width) {
        const attr_t a = bin >= top ? A_REVERSE | A_BOLD : bin >= top - 1 ? A_BOLD : bin == 0 ? A_DIM : A_NORMAL;
        draw_fill(w, y, x, width, A_NORMAL);
        draw_text(w, y, x + width - len - 1, len, a, text);
        return;
    }
    int b = bin < 0 ? 0 : bin > top ? top : bin;
    wattrset(w, A_NORMAL);
    for (int i = 0; i < width; i++) mvwaddstr(w, y, x + i, t->heat_glyph[b]);
}

void draw_yaxis(WINDOW *w, int y, int x, int lw, int rows, const Axis *a, const Theme *t, int right) {
    double ticks[32];
    const int nt = axis_ticks(a, ticks, 32);
    int last_row = -1;
    for (int i = 0; i < nt; i++) {
        const int row = rows - 1 - axis_map(a, ticks[i], rows);
        if (row == last_row) continue;
        last_row = row;
        char lab[32];
        axis_format(lab, sizeof lab, ticks[i], a->log ? ticks[i] : a->step);
        const int len = (int)strlen(lab);
        if (len > lw) continue;
        draw_text(w, y + row, right ? x : x + lw - len, lw, t->role[TH_AXIS], lab);
    }
}

void draw_xaxis(WINDOW *w, int y, int x, int cols, const Axis *a, const Theme *t) {
    double ticks[32];
    const int nt = axis_ticks(a, ticks, 32);
    int next_free = 0;
    for (int i = 0; i < nt; i++) {
        char lab[32];
        axis_format(lab, sizeof lab, ticks[i], a->log ? ticks[i] : a->step);
        const int len = (int)strlen(lab);
        int col = axis_map(a, ticks[i], cols) - len / 2;
        if (col < 0) col = 0;
        if (col + len > cols) col = cols - len;
        if (col < next_free) continue;
        draw_text(w, y, x + col, len, t->role[TH_AXIS], lab);
        next_free = col + len + 1;
    }
}
