/* ring.c — ring buffers and decimating series (see ring.h). Pure: no curses. */
#include "ring.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

// ---------------------------------------------------------------------------------------------
// Ring

int ring_init(Ring *r, int cap) {
    memset(r, 0, sizeof *r);
    if (cap < 1) return -1;
    r->v = calloc((size_t)cap, sizeof *r->v);
    if (!r->v) return -1;
    r->cap = cap;
    return 0;
}

void ring_free(Ring *r) {
    free(r->v);
    memset(r, 0, sizeof *r);
}

void ring_clear(Ring *r) { r->n = r->head = 0; }

void ring_push(Ring *r, double v) {
    if (!r->cap) return;
    r->v[r->head] = v;
    r->head = (r->head + 1) % r->cap;
    if (r->n < r->cap) r->n++;
}

double ring_get(const Ring *r, int i) {
    if (i < 0 || i >= r->n) return NAN;
    return r->v[(r->head - r->n + i + r->cap) % r->cap];
}

double ring_last(const Ring *r) { return r->n ? ring_get(r, r->n - 1) : NAN; }

int ring_minmax(const Ring *r, int last, double *lo, double *hi) {
    const int from = last > 0 && last < r->n ? r->n - last : 0;
    int cnt = 0;
    *lo = INFINITY;
    *hi = -INFINITY;
    for (int i = from; i < r->n; i++) {
        const double v = ring_get(r, i);
        if (!isfinite(v)) continue;
        if (v < *lo) *lo = v;
        if (v > *hi) *hi = v;
        cnt++;
    }
    return cnt;
}

// ---------------------------------------------------------------------------------------------
// Series

int series_init(Series *s, int cap, int dim) {
    memset(s, 0, sizeof *s);
    if (cap < 2 || dim < 1) return -1;
    cap += cap & 1;
    s->x = malloc(sizeof *s->x * cap);
    s->y = malloc(sizeof *s->y * cap * dim);
    s->py = calloc((size_t)dim, sizeof *s->py);
    if (!s->x || !s->y || !s->py) {
        series_free(s);
        return -1;
    }
    s->cap = cap;
    s->dim = dim;
    s->stride = 1;
    return 0;
}

void series_free(Series *s) {
    free(s->x);
    free(s->y);
    free(s->py);
    memset(s, 0, sizeof *s);
}

void series_clear(Series *s) {
    s->n = 0;
    s->stride = 1;
    s->px = 0;
    s->pn = 0;
    s->total = 0;
    if (s->py) memset(s->py, 0, sizeof *s->py * s->dim);
}

/* Halves the store: point i becomes the mean of old points 2i and 2i+1. */
static void series_compact(Series *s) {
    const int half = s->n / 2;
    for (int i = 0; i < half; i++) {
        s->x[i] = 0.5 * (s->x[2 * i] + s->x[2 * i + 1]);
        for (int j = 0; j < s->dim; j++)
            s->y[(long)i * s->dim + j] = 0.5 * (s->y[(long)2 * i * s->dim + j] + s->y[(long)(2 * i + 1) * s->dim + j]);
    }
    s->n = half;
    s->stride *= 2;
}

void series_push(Series *s, double x, const double *y) {
    if (!s->cap) return;
    s->px += x;
    for (int j = 0; j < s->dim; j++) s->py[j] += y[j];
    s->pn++;
    s->total++;
    if (s->pn < s->stride) return;
    if (s->n == s->cap) {
        /* the pending point has the NEW stride's weight only after compaction: compact first,
         * then it still needs to fill the doubled stride */
        series_compact(s);
        if (s->pn < s->stride) return;
    }
    s->x[s->n] = s->px / s->pn;
    for (int j = 0; j < s->dim; j++) s->y[(long)s->n * s->dim + j] = s->py[j] / s->pn;
    s->n++;
    s->px = 0;
    s->pn = 0;
    memset(s->py, 0, sizeof *s->py * s->dim);
}

int series_count(const Series *s) { return s->n + (s->pn > 0); }

double series_x(const Series *s, int i) {
    if (i >= 0 && i < s->n) return s->x[i];
    if (i == s->n && s->pn > 0) return s->px / s->pn;
    return NAN;
}

double series_y(const Series *s, int i, int j) {
    if (j < 0 || j >= s->dim) return NAN;
    if (i >= 0 && i < s->n) return s->y[(long)i * s->dim + j];
    if (i == s->n && s->pn > 0) return s->py[j] / s->pn;
    return NAN;
}

int series_minmax(const Series *s, int j, double *lo, double *hi) {
    int cnt = 0;
    *lo = INFINITY;
    *hi = -INFINITY;
    const int n = series_count(s);
    for (int i = 0; i < n; i++) {
        const double v = series_y(s, i, j);
        if (!isfinite(v)) continue;
        if (v < *lo) *lo = v;
        if (v > *hi) *hi = v;
        cnt++;
    }
    return cnt;
}

void series_resample(const Series *s, int j, double x0, double x1, int ncols, double *out) {
    if (ncols <= 0) return;
    for (int c = 0; c < ncols; c++) out[c] = NAN;
    if (!(x1 > x0)) return;
    double *cnt = calloc((size_t)ncols, sizeof *cnt);
    if (!cnt) return;
    const int n = series_count(s);
    for (int i = 0; i < n; i++) {
        const double x = series_x(s, i), v = series_y(s, i, j);
        if (!isfinite(v) || x < x0 || x >= x1) continue;
        int c = (int)((x - x0) / (x1 - x0) * ncols);
        if (c >= ncols) c = ncols - 1;
        out[c] = cnt[c] > 0 ? out[c] + v : v;
        cnt[c] += 1;
    }
    for (int c = 0; c < ncols; c++)
        if (cnt[c] > 0) out[c] /= cnt[c];
    free(cnt);
}
