/* plot.c — axis scaling, colour binning, smoothing, the braille canvas and text helpers
 * (see plot.h). Pure: no curses, no globals. */
#include "plot.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// ---------------------------------------------------------------------------------------------
// axes

double axis_nice_step(double range, int max_ticks) {
    if (max_ticks < 2) max_ticks = 2;
    if (!(range > 0) || !isfinite(range)) return 1.0;
    const double raw = range / (max_ticks - 1);
    const double mag = pow(10.0, floor(log10(raw)));
    const double f = raw / mag;
    const double nice = f <= 1.0 + 1e-9 ? 1.0 : f <= 2.0 + 1e-9 ? 2.0 : f <= 5.0 + 1e-9 ? 5.0 : 10.0;
    return nice * mag;
}

/* The next nice step above `step` (1 -> 2 -> 5 -> 10 times a power of ten). */
static double next_nice(double step) {
    const double mag = pow(10.0, floor(log10(step) + 1e-9));
    const double f = round(step / mag);
    return (f < 1.5 ? 2.0 : f < 3.5 ? 5.0 : 10.0) * mag;
}

void axis_autoscale(Axis *a, double vmin, double vmax, int max_ticks) {
    if (max_ticks < 3) max_ticks = 3; /* a range across 0 needs -step, 0, step */
    a->log = 0;
    if (!isfinite(vmin) && !isfinite(vmax)) {
        vmin = 0.0;
        vmax = 1.0;
    } else if (!isfinite(vmin)) vmin = vmax;
    else if (!isfinite(vmax)) vmax = vmin;
    if (vmin > vmax) {
        double t = vmin;
        vmin = vmax;
        vmax = t;
    }
    const double mag = fmax(fabs(vmin), fabs(vmax));
    if (vmax - vmin <= 1e-9 * mag || vmax - vmin < 1e-300) {
        const double pad = mag > 0 ? 0.1 * mag : 0.5;
        vmin -= pad;
        vmax += pad;
    }
    double step = axis_nice_step(vmax - vmin, max_ticks);
    for (int iter = 0; iter < 16; iter++) {
        a->lo = floor(vmin / step + 1e-9) * step;
        a->hi = ceil(vmax / step - 1e-9) * step;
        if (a->hi <= a->lo) a->hi = a->lo + step;
        a->step = step;
        if ((int)lround((a->hi - a->lo) / step) + 1 <= max_ticks) break;
        step = next_nice(step);
    }
}

void axis_autoscale_zero(Axis *a, double vmin, double vmax, int max_ticks) {
    if (isfinite(vmin) && vmin >= 0.0) vmin = 0.0;
    axis_autoscale(a, vmin, vmax, max_ticks);
}

void axis_fixed(Axis *a, double lo, double hi, int max_ticks) {
    if (!isfinite(lo)) lo = 0.0;
    if (!isfinite(hi) || !(hi > lo)) hi = lo + 1.0;
    if (max_ticks < 2) max_ticks = 2;
    double step = axis_nice_step(hi - lo, max_ticks);
    while (floor(hi / step + 1e-9) - ceil(lo / step - 1e-9) + 1 > max_ticks) step = next_nice(step);
    a->lo = lo;
    a->hi = hi;
    a->step = step;
    a->log = 0;
}

void axis_autoscale_log(Axis *a, double vmin, double vmax, int max_ticks) {
    if (max_ticks < 2) max_ticks = 2;
    if (!(vmax > 0) || !isfinite(vmax)) vmax = 1.0;
    if (!(vmin > 0) || !isfinite(vmin) || vmin > vmax) vmin = vmax / 10.0;
    int d0 = (int)floor(log10(vmin) + 1e-9), d1 = (int)ceil(log10(vmax) - 1e-9);
    if (d1 <= d0) d1 = d0 + 1;
    int st = 1;
    while ((d1 - d0 + st - 1) / st + 1 > max_ticks) st++;
    d1 = d0 + ((d1 - d0 + st - 1) / st) * st; /* whole ticks up to hi */
    a->lo = pow(10.0, d0);
    a->hi = pow(10.0, d1);
    a->step = st;
    a->log = 1;
}

int axis_ticks(const Axis *a, double *out, int max) {
    int n = 0;
    if (a->log) {
        for (double e = log10(a->lo); n < max && e <= log10(a->hi) + 1e-9; e += a->step) out[n++] = pow(10.0, e);
        return n;
    }
    if (!(a->step > 0)) return 0;
    const double k0 = ceil(a->lo / a->step - 1e-9), k1 = floor(a->hi / a->step + 1e-9);
    for (double k = k0; k <= k1 && n < max; k += 1.0) {
        double v = k * a->step;
        if (fabs(v) < a->step * 1e-9) v = 0.0;
        out[n++] = v;
    }
    return n;
}

static double axis_frac(const Axis *a, double v) {
    if (a->log) {
        if (!(v > 0)) return 0.0;
        const double l0 = log10(a->lo), l1 = log10(a->hi);
        return l1 > l0 ? (log10(v) - l0) / (l1 - l0) : 0.0;
    }
    return a->hi > a->lo ? (v - a->lo) / (a->hi - a->lo) : 0.0;
}

int axis_map(const Axis *a, double v, int n) {
    if (isnan(v)) return -1;
    if (n <= 1) return 0;
    double t = axis_frac(a, v);
    if (t < 0) t = 0;
    if (t > 1) t = 1;
    return (int)lround(t * (n - 1));
}

double axis_unmap(const Axis *a, int i, int n) {
    const double t = n > 1 ? (double)i / (n - 1) : 0.0;
    if (a->log) return pow(10.0, log10(a->lo) + t * (log10(a->hi) - log10(a->lo)));
    return a->lo + t * (a->hi - a->lo);
}

/* Decimals needed to write multiples of `step` exactly (0..4). */
static int step_decimals(double step) {
    if (!(step > 0)) return 3;
    for (int d = 0; d < 4; d++) {
        const double m = step * pow(10.0, d);
        if (fabs(m - round(m)) < 1e-6 * fmax(1.0, m)) return d;
    }
    return 4;
}

/* Drops trailing zeros of a decimal number ("2.50" -> "2.5", "3.00" -> "3", "-0" -> "0"). */
static void trim_zeros(char *s) {
    if (strchr(s, '.') && !strchr(s, 'e')) {
        size_t len = strlen(s);
        while (len > 0 && s[len - 1] == '0') s[--len] = '\0';
        if (len > 0 && s[len - 1] == '.') s[--len] = '\0';
    }
    if (!strcmp(s, "-0")) strcpy(s, "0");
}

void axis_format(char *buf, size_t n, double v, double step) {
    if (n == 0) return;
    step = fabs(step);
    if (step > 0 && fabs(v) < step * 1e-6) v = 0.0;
    const double av = fabs(v);
    if (v == 0.0) {
        snprintf(buf, n, "0");
        return;
    }
    if (av >= 1e4) {
        const double div = av >= 1e6 ? 1e6 : 1e3;
        const char *suf = av >= 1e6 ? "M" : "k";
        int dec = step_decimals(step > 0 ? step / div : 1.0);
        if (dec > 3) dec = 3;
        char tmp[48];
        snprintf(tmp, sizeof tmp, "%.*f", dec, v / div);
        trim_zeros(tmp);
        snprintf(buf, n, "%s%s", tmp, suf);
        return;
    }
    if ((step > 0 && step < 1e-3) || av < 1e-3) {
        snprintf(buf, n, "%.2g", v);
        return;
    }
    const int dec = step_decimals(step);
    char tmp[48];
    snprintf(tmp, sizeof tmp, "%.*f", dec, v);
    trim_zeros(tmp);
    snprintf(buf, n, "%s", tmp);
}

// ---------------------------------------------------------------------------------------------
// binning and smoothing

int heat_bin(double v, double lo, double hi, int n) {
    if (n <= 1 || isnan(v)) return 0;
    if (!(hi > lo)) return v > lo ? n - 1 : 0;
    const double t = (v - lo) / (hi - lo);
    if (t <= 0) return 0;
    if (t >= 1) return n - 1;
    int b = (int)(t * n);
    return b >= n ? n - 1 : b;
}

void ema_init(Ema *e, double alpha) {
    e->alpha = alpha > 0 && alpha <= 1 ? alpha : 0.1;
    e->value = 0.0;
    e->n = 0;
}

double ema_push(Ema *e, double x) {
    if (!isfinite(x)) return e->value;
    e->value = e->n == 0 ? x : e->alpha * x + (1.0 - e->alpha) * e->value;
    e->n++;
    return e->value;
}

// ---------------------------------------------------------------------------------------------
// braille canvas

uint8_t braille_bit(int dx, int dy) {
    static const uint8_t bit[2][4] = {{0x01, 0x02, 0x04, 0x40}, {0x08, 0x10, 0x20, 0x80}};
    return (dx >= 0 && dx < 2 && dy >= 0 && dy < 4) ? bit[dx][dy] : 0;
}

int canvas_resize(Canvas *c, int cw, int ch) {
    if (cw < 0) cw = 0;
    if (ch < 0) ch = 0;
    const size_t need = (size_t)cw * ch;
    if (need > c->cap) {
        uint8_t *b = realloc(c->bits, need ? need : 1), *col;
        if (!b) return -1;
        c->bits = b;
        col = realloc(c->color, need ? need : 1);
        if (!col) return -1;
        c->color = col;
        c->cap = need;
    }
    c->cw = cw;
    c->ch = ch;
    c->dw = 2 * cw;
    c->dh = 4 * ch;
    canvas_clear(c);
    return 0;
}

void canvas_clear(Canvas *c) {
    const size_t n = (size_t)c->cw * c->ch;
    if (n && c->bits) memset(c->bits, 0, n);
    if (n && c->color) memset(c->color, 0, n);
}

void canvas_free(Canvas *c) {
    free(c->bits);
    free(c->color);
    memset(c, 0, sizeof *c);
}

void canvas_dot(Canvas *c, int x, int y, int color) {
    if (x < 0 || y < 0 || x >= c->dw || y >= c->dh) return;
    const size_t i = (size_t)(y / 4) * c->cw + x / 2;
    c->bits[i] |= braille_bit(x % 2, y % 4);
    c->color[i] = (uint8_t)color;
}

void canvas_line(Canvas *c, int x0, int y0, int x1, int y1, int color) {
    const int dx = abs(x1 - x0), sx = x0 < x1 ? 1 : -1;
    const int dy = -abs(y1 - y0), sy = y0 < y1 ? 1 : -1;
    int err = dx + dy;
    for (int guard = 0; guard < 1 << 20; guard++) {
        canvas_dot(c, x0, y0, color);
        if (x0 == x1 && y0 == y1) break;
        const int e2 = 2 * err;
        if (e2 >= dy) {
            err += dy;
            x0 += sx;
        }
        if (e2 <= dx) {
            err += dx;
            y0 += sy;
        }
    }
}

void canvas_hdash(Canvas *c, int x0, int x1, int y, int color) {
    if (x0 > x1) {
        int t = x0;
        x0 = x1;
        x1 = t;
    }
    for (int x = x0; x <= x1; x++)
        if (((x - x0) & 3) < 2 || x == x1) canvas_dot(c, x, y, color);
}

void canvas_vdash(Canvas *c, int x, int y0, int y1, int color) {
    if (y0 > y1) {
        int t = y0;
        y0 = y1;
        y1 = t;
    }
    for (int y = y0; y <= y1; y++)
        if (((y - y0) & 1) == 0 || y == y1) canvas_dot(c, x, y, color);
}

int canvas_cell(const Canvas *c, int cx, int cy, int utf8, char out[8]) {
    out[0] = '\0';
    if (cx < 0 || cy < 0 || cx >= c->cw || cy >= c->ch) return 0;
    const size_t i = (size_t)cy * c->cw + cx;
    const unsigned m = c->bits[i];
    if (!m) return 0;
    if (utf8) {
        const unsigned cp = 0x2800u + m; /* 3-byte UTF-8: 1110xxxx 10xxxxxx 10xxxxxx */
        out[0] = (char)(0xE0 | (cp >> 12));
        out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (char)(0x80 | (cp & 0x3F));
        out[3] = '\0';
    } else {
        const int top = (m & 0x1B) != 0;    /* dots of rows 0-1: 0x01 0x02 0x08 0x10 */
        const int bottom = (m & 0xE4) != 0; /* rows 2-3: 0x04 0x20 0x40 0x80 */
        out[0] = top && bottom ? ':' : top ? '\'' : '.';
        out[1] = '\0';
    }
    return c->color[i];
}

// ---------------------------------------------------------------------------------------------
// text helpers

int spark_level(double v, double lo, double hi, int levels) {
    if (levels <= 1) return 0;
    if (!(hi > lo)) return isnan(v) ? 0 : (levels - 1) / 2;
    return heat_bin(v, lo, hi, levels);
}

void bar_cells(char *out, size_t n, double frac, int width, int utf8) {
    static const char *const part[8] = {"", "\u258f", "\u258e", "\u258d", "\u258c", "\u258b", "\u258a", "\u2589"};
    if (n == 0) return;
    out[0] = '\0';
    if (width <= 0) return;
    if (!(frac >= 0)) frac = 0;
    if (frac > 1) frac = 1;
    const double cells = frac * width;
    int full = (int)floor(cells + 1e-9);
    if (full > width) full = width;
    const int eighth = utf8 && full < width ? (int)((cells - full) * 8) : 0;
    size_t len = 0;
    for (int i = 0; i < width; i++) {
        const char *s = i < full                    ? (utf8 ? "\u2588" : "#")
                        : (i == full && eighth > 0) ? part[eighth]
                                                    : (utf8 ? " " : ".");
        const size_t l = strlen(s);
        if (len + l + 1 > n) break;
        memcpy(out + len, s, l);
        len += l;
    }
    out[len] = '\0';
}

void fmt_duration(char *buf, size_t n, double s) {
    if (!(s >= 0) || !isfinite(s)) {
        snprintf(buf, n, "--");
        return;
    }
    const long t = (long)(s + 0.5);
    if (t < 60) snprintf(buf, n, "%lds", t);
    else if (t < 3600) snprintf(buf, n, "%ldm%02lds", t / 60, t % 60);
    else if (t < 86400) snprintf(buf, n, "%ldh%02ldm", t / 3600, (t % 3600) / 60);
    else snprintf(buf, n, "%ldd%02ldh", t / 86400, (t % 86400) / 3600);
}

void fmt_count(char *buf, size_t n, double v) {
    const double av = fabs(v);
    if (av < 1000) snprintf(buf, n, "%.0f", v);
    else if (av < 1e5) snprintf(buf, n, "%.1fk", v / 1e3);
    else if (av < 1e6) snprintf(buf, n, "%.0fk", v / 1e3);
    else snprintf(buf, n, "%.2fM", v / 1e6);
}

int utf8_cells(const char *s) {
    int n = 0;
    for (; *s; s++)
        if (((unsigned char)*s & 0xC0) != 0x80) n++;
    return n;
}

/* ------------------------------------------------------------------ scatter */

int scatter_grid(const float *x, const float *y, int stride, int n, const int *cat, int ncat, int cols, int rows,
                 int *cell, int *count) {
    if (cols <= 0 || rows <= 0) return 0;
    const size_t cells = (size_t)cols * rows;
    for (size_t i = 0; i < cells; i++) {
        cell[i] = -1;
        if (count) count[i] = 0;
    }
    if (n <= 0 || ncat <= 0) return 0;
    double xlo = INFINITY, xhi = -INFINITY, ylo = INFINITY, yhi = -INFINITY;
    for (int i = 0; i < n; i++) {
        const double a = x[(size_t)i * stride], b = y[(size_t)i * stride];
        if (!isfinite(a) || !isfinite(b)) continue;
        xlo = fmin(xlo, a);
        xhi = fmax(xhi, a);
        ylo = fmin(ylo, b);
        yhi = fmax(yhi, b);
    }
    if (!(xlo <= xhi)) return 0;
    /* per-cell category counts: cells x ncat ints can be large (200 classes): count sparsely by
     * sorting the points by cell instead */
    int *key = malloc(sizeof *key * (size_t)n);
    int *ord = malloc(sizeof *ord * (size_t)n);
    int *tally = calloc((size_t)ncat, sizeof *tally);
    if (!key || !ord || !tally) {
        free(key);
        free(ord);
        free(tally);
        return -1;
    }
    int placed = 0;
    for (int i = 0; i < n; i++) {
        const double a = x[(size_t)i * stride], b = y[(size_t)i * stride];
        key[i] = -1;
        if (!isfinite(a) || !isfinite(b) || cat[i] < 0 || cat[i] >= ncat) continue;
        int cx = xhi > xlo ? (int)((a - xlo) / (xhi - xlo) * cols) : cols / 2;
        int cy = yhi > ylo ? (int)((b - ylo) / (yhi - ylo) * rows) : rows / 2;
        if (cx >= cols) cx = cols - 1;
        if (cy >= rows) cy = rows - 1;
        cy = rows - 1 - cy; /* row 0 at the top */
        key[i] = cy * cols + cx;
        ord[placed++] = i;
    }
    /* counting sort of the placed points by cell */
    int *start = calloc(cells + 1, sizeof *start);
    int *sorted = malloc(sizeof *sorted * (size_t)(placed ? placed : 1));
    if (!start || !sorted) {
        free(key);
        free(ord);
        free(tally);
        free(start);
        free(sorted);
        return -1;
    }
    for (int j = 0; j < placed; j++) start[key[ord[j]] + 1]++;
    for (size_t c = 0; c < cells; c++) start[c + 1] += start[c];
    for (int j = 0; j < placed; j++) sorted[start[key[ord[j]]]++] = ord[j];
    /* start[c] is now the end of cell c; walk the cells in order */
    int j = 0;
    for (size_t c = 0; c < cells; c++) {
        const int end = start[c];
        if (j == end) continue;
        int best = -1, bestn = 0;
        for (int q = j; q < end; q++) tally[cat[sorted[q]]]++;
        for (int q = j; q < end; q++) {
            const int k = cat[sorted[q]];
            if (tally[k] > bestn || (tally[k] == bestn && k < best)) {
                best = k;
                bestn = tally[k];
            }
        }
        for (int q = j; q < end; q++) tally[cat[sorted[q]]] = 0;
        cell[c] = best;
        if (count) count[c] = end - j;
        j = end;
    }
    free(key);
    free(ord);
    free(tally);
    free(start);
    free(sorted);
    return placed;
}

char scatter_symbol(int i) {
    static const char sym[] = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";
    if (i < 0) i = -i;
    return sym[i % 62];
}
