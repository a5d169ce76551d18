/* fig.h — a small figure API over cairo for paper figures (`moelab plot`): a page in inches, plot
 * panels with axes and ticks, lines with dashes and markers, error bars, a legend, a heatmap with a
 * colour bar, text. PDF and SVG are vector (cairo embeds the fonts as subsets); PNG is rendered at
 * 300 dpi and written with libpng with its pHYs chunk saying so.
 *
 * Units: page coordinates are points (1/72 in) from the top-left corner; data coordinates go
 * through a panel's two Axis (views/plot.h: the same nice-tick arithmetic as the terminal views).
 *
 * Palettes (readable by colour-blind readers and in greyscale):
 *   - categories: Okabe-Ito (fig_cat_rgb), always paired with a dash pattern (fig_dash) and a
 *     marker shape (FigMarker) that differ from series to series, so no series depends on hue;
 *   - heatmaps: viridis (fig_viridis_rgb), whose lightness rises monotonically.
 *
 * The words of an SVG: cairo draws text as glyph outlines, so every SVG also carries its text in a
 * side channel, right after the <svg> tag: <metadata id="moelab-figure"> holds a <moelab:figure>
 * (namespace urn:moelab:figure) with one <moelab:text role="title|legend|text"> per string drawn
 * (a legend entry, a title line, any other label), in drawing order, and one
 * <moelab:box role="plot|legend" x= y= w= h=> (points) per plot area and legend box. Readers and
 * tests take the words from there (xmllint --xpath); renderers ignore it.
 *
 * Errors: ml_status with a one-line message in ml_last_error(); nothing is printed. Cairo is used
 * by the calling thread only. */
#ifndef ML_VIEWS_FIG_H
#define ML_VIEWS_FIG_H

#include <stddef.h>

#include "core/common.h"
#include "views/plot.h"

#define FIG_DPI 300.0
#define FIG_COL_IN 3.5  /* one column of a two-column paper */
#define FIG_PAGE_IN 7.0 /* both columns */
#define FIG_NCAT 8      /* Okabe-Ito colours */

typedef enum { FIG_PDF, FIG_SVG, FIG_PNG, FIG_NFORMATS } FigFormat;

typedef enum {
    FIG_MK_NONE,
    FIG_MK_CIRCLE,
    FIG_MK_SQUARE,
    FIG_MK_TRIANGLE,
    FIG_MK_DIAMOND,
    FIG_MK_TRIANGLE_DOWN,
    FIG_MK_PLUS,
    FIG_MK_CROSS,
    FIG_MK_STAR,
    FIG_MK_COUNT
} FigMarker;

typedef struct {
    double r, g, b;
} FigRGB;

typedef struct {
    FigRGB color;
    double width;     /* line width in points (0: no line) */
    int dash;         /* fig_dash pattern index (0: solid) */
    FigMarker marker; /* FIG_MK_NONE: none */
    double msize;     /* marker size in points (diameter) */
    int mfill;        /* 1: filled marker, 0: open (white inside) */
    double alpha;     /* 0 means 1 */
} FigStyle;

typedef struct Fig Fig;

/* The style of series i of a categorical set: Okabe-Ito colour i % 8, dash i % 5 and marker
 * 1 + i % 8, line width 1. */
FigStyle fig_series_style(int i);
FigRGB fig_cat_rgb(int i);
/* Viridis at t in [0, 1] (clamped; NaN gives light grey), linear between 11 anchor colours. */
FigRGB fig_viridis_rgb(double t);
/* Dash pattern i (0 solid, 1 dashed, 2 dotted, 3 dash-dot, 4 long dash; cycles) in points. */
int fig_dash(int i, double out[4]);

const char *fig_format_ext(FigFormat f);
/* "pdf", "svg", "png" -> 0 and *f; ML_ERR_ARG otherwise. */
ml_status fig_format_parse(const char *s, FigFormat *f);

/* A page of w_in x h_in inches writing to path (the file is created at fig_close). NULL with a
 * message on error. */
Fig *fig_open(const char *path, FigFormat fmt, double w_in, double h_in);
/* Finishes the page and writes the file; frees f (NULL is a no-op). */
ml_status fig_close(Fig *f);
/* Releases cairo's and fontconfig's process-wide caches (font lists, glyphs), so a leak checker
 * sees no allocation left behind. Call with no Fig open and no other thread drawing; the next
 * fig_open initialises them again. */
void fig_release_caches(void);
double fig_width(const Fig *f);  /* points */
double fig_height(const Fig *f); /* points */

/* ---- text (DejaVu Sans; size in points). ax: x is the text's left end (0), centre (0.5) or right
 * end (1); ay: y is the top of the capitals (0), their middle (0.5) or the baseline (1). */
void fig_text(Fig *f, double x, double y, double size, double ax, double ay, int bold, const char *s);
/* The same rotated 90 degrees counter-clockwise (y labels). */
void fig_text_vertical(Fig *f, double x, double y, double size, const char *s);
double fig_text_width(Fig *f, double size, const char *s);
/* A bold title centred in [x, x + w] from y down, fitted to that width: shrunk to 80% of size,
 * then broken into two lines, then cut with an ellipsis; returns the height it took. fig_panel
 * titles go through it too. Every line drawn is checked (process-wide counters, for the figure
 * test): its ink must stay inside its box and the page and must not cover another title's. */
double fig_title(Fig *f, double x, double y, double w, double size, const char *title);
/* The height fig_title would take for title in width w, before any page is open (to size one). */
double fig_title_measure(double w, double size, const char *title);
void fig_title_stats(int *lines, int *bad, char *worst, size_t n);
void fig_title_stats_reset(void);

/* ---- panels: a plot area inside `outer` (points) leaving room for the title, tick labels and
 * axis labels. Draws the frame, ticks, tick labels, grid lines, labels and title. An x axis with
 * step < 0 is categorical: no numeric ticks (label it with fig_panel_xlabels). */
typedef struct {
    Fig *f;
    double x, y, w, h; /* the plot area */
    Axis ax, ay;
    int cat_x; /* 1: x is categorical (labels given by fig_panel_xlabels) */
} FigPanel;

void fig_panel(FigPanel *p, Fig *f, double x, double y, double w, double h, const Axis *ax, const Axis *ay,
               const char *title, const char *xlabel, const char *ylabel);
/* Categorical x tick labels at x = 0..n-1 (the x axis must be [-0.5, n-0.5]); rotated when long. */
void fig_panel_xlabels(FigPanel *p, const char *const *labels, int n);
/* Data -> page. */
double fig_px(const FigPanel *p, double x);
double fig_py(const FigPanel *p, double y);

/* A polyline through the finite points (a NaN breaks it), clipped to the panel; markers at every
 * mark_every-th point (0: none). */
void fig_line(FigPanel *p, const double *x, const double *y, int n, const FigStyle *s, int mark_every);
/* Markers only. */
void fig_points(FigPanel *p, const double *x, const double *y, int n, const FigStyle *s);
void fig_marker(Fig *f, double x, double y, const FigStyle *s);
/* Vertical error bars [lo, hi] at x with caps, and a marker at (x, y). */
void fig_errbar(FigPanel *p, double x, double y, double lo, double hi, const FigStyle *s);
/* A full-width horizontal / full-height vertical line at a data value. */
void fig_hline(FigPanel *p, double y, const FigStyle *s);
void fig_vline(FigPanel *p, double x, const FigStyle *s);
/* A full-height band over the data range [x0, x1], filled with colour c at opacity alpha (under what
 * is drawn after it); at least 0.8 pt wide, so a one-row span shows. */
void fig_vspan(FigPanel *p, double x0, double x1, FigRGB c, double alpha);

/* A legend box: n entries (style sample + label) in the panel's corner (0 top-right, 1 top-left,
 * 2 bottom-right, 3 bottom-left), ncol columns. */
void fig_legend(FigPanel *p, const FigStyle *styles, const char *const *labels, int n, int corner, int ncol);

/* ---- heatmap: rows x cols cells of values v[r * cols + c] coloured by viridis over [vmin, vmax]
 * into the rectangle (x, y, w, h); NaN cells light grey. Row labels left, column labels below
 * (either may be NULL). Each cell's centre has exactly fig_viridis_rgb((v - vmin) / (vmax - vmin)). */
void fig_heatmap(Fig *f, double x, double y, double w, double h, const double *v, int rows, int cols, double vmin,
                 double vmax, const char *const *row_labels, const char *const *col_labels, double label_size);
/* Writes each cell's value (printf format fmt) at its centre, black or white by the cell's lightness. */
void fig_heatmap_values(Fig *f, double x, double y, double w, double h, const double *v, int rows, int cols,
                        double vmin, double vmax, const char *fmt, double size);
/* A vertical colour bar in (x, y, w, h) for [vmin, vmax] with ticks and a label on the right. */
void fig_colorbar(Fig *f, double x, double y, double w, double h, double vmin, double vmax, const char *label);

#endif
