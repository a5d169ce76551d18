/* draw.h — curses drawing helpers shared by the views: clipped UTF-8 text, panel frames with
 * titles, braille canvases, sparklines, heat cells and axis labels. UI thread only. */
#ifndef ML_VIEWS_DRAW_H
#define ML_VIEWS_DRAW_H

#include <curses.h>

#include "views/layout.h"
#include "views/plot.h"
#include "views/ring.h"
#include "views/theme.h"

/* Prints at most maxw cells of s at (y, x) with attribute a (counting one cell per code point).
 * Returns the cells written. */
int draw_text(WINDOW *w, int y, int x, int maxw, attr_t a, const char *s);
/* Like draw_text, but a text too long for maxw is cut at a space (never inside a word or number)
 * and ends with "…" ("~" without UTF-8), so what is hidden is marked. Returns the cells written. */
int draw_text_cut(WINDOW *w, int y, int x, int maxw, attr_t a, const char *s);
/* A line of segments, each kept whole or dropped whole (so no number is cut): when the segments
 * do not fit in maxw cells, the droppable one with the lowest `keep` goes first (the later one of
 * a tie; the first segment is never dropped), and each run of dropped segments is shown as one
 * "…" ("~" without UTF-8) in its place. If the first segment alone is too long it is cut at a word
 * as by draw_text_cut. */
typedef struct {
    const char *text;
    int keep; /* higher: dropped later */
} DrawSeg;
/* The fitted line into out (cap bytes); returns the segments dropped. Pure (no curses). */
int draw_fit_segs(const DrawSeg *seg, int n, int maxw, int utf8, char *out, size_t cap);
/* draw_fit_segs drawn at (y, x) with attribute a; returns the cells written. */
int draw_segs(WINDOW *w, int y, int x, int maxw, attr_t a, const DrawSeg *seg, int n);
/* Writes " text " right-aligned into the bottom border of a panel whose inside is r (the row
 * under r): the panel's note of what it hides, e.g. "+4 experts ▾". */
void draw_more(WINDOW *w, Rect r, const Theme *t, const char *text);
/* printf-style draw_text. */
int draw_textf(WINDOW *w, int y, int x, int maxw, attr_t a, const char *fmt, ...) __attribute__((format(printf, 6, 7)));
/* Word-wraps text into at most max_rows rows of `width` cells from (y, x); returns rows used. */
int draw_wrapped(WINDOW *w, int y, int x, int width, int max_rows, attr_t a, const char *text);
/* Fills `n` cells at (y, x) with spaces in attribute a. */
void draw_fill(WINDOW *w, int y, int x, int n, attr_t a);
/* Border around the whole window and the title at the top left: focused 1 = highlighted with a
 * "> " marker (the focused panel), 2 = highlighted without it (overlays), 0 = plain. */
void draw_frame(WINDOW *w, const Theme *t, const char *title, int focused);
/* Blits a canvas with its top-left cell at (y, x); colour index c of a cell maps to role[c]. */
void draw_canvas(WINDOW *w, int y, int x, const Canvas *c, const Theme *t, const int *role_of_color);
/* A sparkline of the last `width` values of r at (y, x), scaled to their own min..max. */
void draw_sparkline(WINDOW *w, int y, int x, int width, const Ring *r, const Theme *t, attr_t a);
/* One heat-map cell of `width` cells at (y, x): colour mode = background of the bin with `text`
 * centred; no colour = `text` if it fits (bold for upper bins) else the bin's glyph. */
void draw_heat_cell(WINDOW *w, int y, int x, int width, int bin, const char *text, const Theme *t);
/* Y-axis tick labels right-aligned in `lw` cells left of a plot of `rows` cell rows starting at
 * (y, x): each tick goes on the row its value maps to. */
void draw_yaxis(WINDOW *w, int y, int x, int lw, int rows, const Axis *a, const Theme *t, int right);
/* X-axis tick labels under a plot of `cols` cells starting at (y, x); labels that would overlap
 * the previous one are skipped. */
void draw_xaxis(WINDOW *w, int y, int x, int cols, const Axis *a, const Theme *t);

#endif
