/* plot.h — pure plotting arithmetic for the views: axis autoscaling and tick labels, value ->
 * cell mapping, heat-map colour binning, EMA smoothing, a braille dot canvas (with an ASCII
 * rendering), sparkline levels, progress-bar cells and short number/duration formats.
 *
 * Nothing here calls curses, so every function is testable without a terminal
 * (tests/test_views.c). The curses side (views/draw.c) turns these into characters and colours. */
#ifndef ML_VIEWS_PLOT_H
#define ML_VIEWS_PLOT_H

#include <stddef.h>
#include <stdint.h>

/* ---- axes */

typedef struct {
    double lo, hi; /* range shown (linear: multiples of step; log: powers of 10) */
    double step;   /* tick spacing (log axes: decades per tick, a whole number >= 1) */
    int log;       /* 1: log10 axis */
} Axis;

/* A "nice" tick step (1, 2 or 5 times a power of ten) giving at most max_ticks ticks over range. */
double axis_nice_step(double range, int max_ticks);
/* Linear axis covering [vmin, vmax] with lo/hi on multiples of a nice step and at most max_ticks
 * ticks (at least 3 are allowed: a range across 0 needs -step, 0, step). Degenerate input (vmin == vmax, non-finite values) gives a sensible non-empty
 * range around the value (or [0, 1]). */
void axis_autoscale(Axis *a, double vmin, double vmax, int max_ticks);
/* Same with lo pinned to 0 when 0 <= vmin (counts, losses, steps). */
void axis_autoscale_zero(Axis *a, double vmin, double vmax, int max_ticks);
/* Linear axis over exactly [lo, hi] (hi > lo, else lo + 1) with a nice tick step giving at most
 * max_ticks ticks at multiples of the step (used for time axes that must fill the plot). */
void axis_fixed(Axis *a, double lo, double hi, int max_ticks);
/* Log10 axis from the decade below vmin to the decade above vmax (values <= 0 are ignored:
 * vmin <= 0 falls back to vmax / 10). At most max_ticks ticks (step in decades). */
void axis_autoscale_log(Axis *a, double vmin, double vmax, int max_ticks);
/* Tick values into out (at most max); returns how many. Linear: the multiples of step in
 * [lo, hi]; log: lo, lo * 10^step, ... <= hi. */
int axis_ticks(const Axis *a, double *out, int max);
/* Position of v on an axis drawn over n cells or dots: 0 at lo, n - 1 at hi, rounded and clamped
 * (values outside the range land on the edge; NaN gives -1). */
int axis_map(const Axis *a, double v, int n);
/* The value at position i of n (inverse of axis_map, at the position's centre). */
double axis_unmap(const Axis *a, int i, int n);
/* Tick label for v on an axis with this step: shortest decimal form with the step's precision,
 * trailing zeros dropped ("0", "0.5", "2.5"), k/M suffixes from 10000 on ("12k", "1.5M"),
 * exponent form for tiny steps ("5e-05"). */
void axis_format(char *buf, size_t n, double v, double step);

/* ---- colour binning and smoothing */

/* Bin of v in n equal bins over [lo, hi]: 0 for v <= lo, n - 1 for v >= hi, 0 for NaN.
 * When hi <= lo: n - 1 if v > lo else 0. */
int heat_bin(double v, double lo, double hi, int n);

typedef struct {
    double alpha; /* weight of a new value, in (0, 1] */
    double value; /* current average (the first value pushed starts it) */
    long n;       /* finite values pushed */
} Ema;

void ema_init(Ema *e, double alpha);
/* Adds x (ignored when not finite) and returns the new average. */
double ema_push(Ema *e, double x);

/* ---- braille canvas: a (cw x ch) cell grid of (2cw x 4ch) dots, y = 0 at the top. Each cell
 * keeps the colour index of the last dot written into it (0 = empty). */

typedef struct {
    int cw, ch;     /* cells */
    int dw, dh;     /* dots: 2 cw, 4 ch */
    uint8_t *bits;  /* (ch, cw) braille dot masks */
    uint8_t *color; /* (ch, cw) colour of the last writer */
    size_t cap;     /* cells allocated */
} Canvas;

/* Sizes the canvas (reallocating only to grow) and clears it. 0, or -1 if out of memory. */
int canvas_resize(Canvas *c, int cw, int ch);
void canvas_clear(Canvas *c);
void canvas_free(Canvas *c);
/* Sets one dot; out-of-range dots are ignored. color in 1..255. */
void canvas_dot(Canvas *c, int x, int y, int color);
/* A straight line of dots (Bresenham), both ends included. */
void canvas_line(Canvas *c, int x0, int y0, int x1, int y1, int color);
/* Every other dot of a horizontal / vertical line (dashed), both ends included. */
void canvas_hdash(Canvas *c, int x0, int x1, int y, int color);
void canvas_vdash(Canvas *c, int x, int y0, int y1, int color);
/* The character of cell (cx, cy): the UTF-8 braille pattern (U+2800 + mask) when utf8, else an
 * ASCII approximation (':' dots top and bottom, '\'' top only, '.' bottom only). out gets ""
 * for an empty cell. Returns the cell's colour (0 when empty). */
int canvas_cell(const Canvas *c, int cx, int cy, int utf8, char out[8]);
/* The braille dot mask bit of dot (dx in 0..1, dy in 0..3) inside a cell. */
uint8_t braille_bit(int dx, int dy);

/* ---- small text helpers */

/* Level 0..levels-1 of v on [lo, hi] for a sparkline (the middle level when hi <= lo). */
int spark_level(double v, double lo, double hi, int levels);
/* A progress bar of exactly `width` cells for frac in [0, 1]: UTF-8 full blocks plus one
 * eighth-block partial cell and spaces, or ASCII '#' and '.'. out must hold 3 * width + 1 bytes. */
void bar_cells(char *out, size_t n, double frac, int width, int utf8);
/* "12s", "3m05s", "1h02m", "2d03h"; "--" for a negative or non-finite value. */
void fmt_duration(char *buf, size_t n, double seconds);
/* Compact count: "950", "12.3k", "1.25M". */
void fmt_count(char *buf, size_t n, double v);
/* Number of terminal cells of a UTF-8 string, counting each code point as one cell. */
int utf8_cells(const char *s);

/* ---- scatter plots of categorical points (the t-SNE view) */
/* Bins n points (x[i], y[i]) into a cols x rows grid spanning their bounding box (the y axis
 * upwards: row 0 is the top; a degenerate extent is centred) and writes into cell[row * cols + col]
 * the category that has the most points in the cell (ties: the smaller category), -1 for an
 * empty cell. cat[i] < 0 or >= ncat and non-finite points are skipped. count (may be NULL) gets
 * the number of points per cell. Returns the number of points placed, -1 if out of memory. */
int scatter_grid(const float *x, const float *y, int stride, int n, const int *cat, int ncat, int cols, int rows,
                 int *cell, int *count);
/* The symbol of category i: "0".."9", "a".."z", "A".."Z", cycling. */
char scatter_symbol(int i);

#endif
