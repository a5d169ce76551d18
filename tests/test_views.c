/* test_views.c — the live screen's pure geometry, without a terminal: panel layout at 80x24,
 * 120x40 and 200x60 (tiling, no overlap, zoom, banner, dense runs, focus order) and the
 * too-small cut-off; axis autoscaling and tick labels; heat-map colour binning; EMA smoothing;
 * ring buffers and the decimating series; the braille canvas and its ASCII fallback; progress
 * bars and duration formats; both help overlays fit 80 columns. A plain main: 0 on success, 1 on any failure. */
#include <locale.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "views/draw.h"
#include "views/layout.h"
#include "views/plot.h"
#include "views/ring.h"
#include "views/view.h"

#define CHECK_QUIET /* thousands of checks: only the failures are printed */
#include "check.h"


static int close_to(double a, double b, double tol) { return fabs(a - b) <= tol * (1.0 + fabs(b)); }

// ---------------------------------------------------------------------------------------------
// layout

/* Every cell of the screen belongs to exactly one visible rectangle; all lie on screen. */
static void check_tiling(const Layout *l, const char *what) {
    const int W = l->cols, H = l->lines;
    int *cover = calloc((size_t)W * H, sizeof *cover);
    for (int p = 0; p < PANEL_COUNT; p++) {
        if (!layout_visible(l, p)) continue;
        const Rect r = l->r[p];
        CHECK(r.x >= 0 && r.y >= 0 && r.x + r.w <= W && r.y + r.h <= H, "%s: %s off screen (%d,%d %dx%d)", what,
              layout_panel_name(p), r.x, r.y, r.w, r.h);
        for (int y = r.y; y < r.y + r.h && y < H; y++)
            for (int x = r.x; x < r.x + r.w && x < W; x++) cover[y * W + x]++;
    }
    int holes = 0, overlaps = 0;
    for (int i = 0; i < W * H; i++) {
        holes += cover[i] == 0;
        overlaps += cover[i] > 1;
    }
    CHECK(holes == 0, "%s: %d cells not covered", what, holes);
    CHECK(overlaps == 0, "%s: %d cells covered twice", what, overlaps);
    free(cover);
}

static void test_layout(void) {
    static const int sizes[][2] = {{80, 24}, {120, 40}, {200, 60}, {81, 25}, {159, 50}, {160, 50}};
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        const int W = sizes[s][0], H = sizes[s][1];
        char what[64];
        for (int moe = 0; moe < 2; moe++)
            for (int banner = 0; banner < 2; banner++) {
                Layout l;
                const LayoutOptions o = {.has_moe = moe, .banner = banner, .zoom = -1};
                snprintf(what, sizeof what, "%dx%d moe=%d banner=%d", W, H, moe, banner);
                CHECK(layout_compute(&l, W, H, &o) == 0 && !l.too_small, "%s: laid out", what);
                check_tiling(&l, what);
                CHECK(l.r[PANEL_STATUS].y == 0 && l.r[PANEL_STATUS].h == 2 && l.r[PANEL_STATUS].w == W,
                      "%s: status bar", what);
                CHECK(l.r[PANEL_CMD].y == H - 1 && l.r[PANEL_CMD].h == 1 && l.r[PANEL_CMD].w == W, "%s: command line",
                      what);
                CHECK(l.r[PANEL_LOG].y + l.r[PANEL_LOG].h == H - 1 && l.r[PANEL_LOG].h >= 5,
                      "%s: log above the command line", what);
                CHECK(layout_visible(&l, PANEL_BANNER) == banner && (!banner || l.r[PANEL_BANNER].y == 2), "%s: banner",
                      what);
                CHECK(layout_visible(&l, PANEL_CURVES) && layout_visible(&l, PANEL_SCALARS), "%s: curves and scalars",
                      what);
                for (int p = PANEL_TEMP; p <= PANEL_LOAD; p++)
                    CHECK(layout_visible(&l, p) == moe, "%s: %s shown only for MoE", what, layout_panel_name(p));
                /* every panel leaves room for a frame and a few lines of content */
                for (int p = PANEL_CURVES; p <= PANEL_LOG; p++)
                    if (layout_visible(&l, p))
                        CHECK(l.r[p].w >= 24 && l.r[p].h >= 5, "%s: %s too small (%dx%d)", what, layout_panel_name(p),
                              l.r[p].w, l.r[p].h);
                /* focus visits every visible panel once, in screen order */
                int seen[PANEL_COUNT] = {0}, f = PANEL_CURVES, n = 0, nvis = 0;
                for (int p = PANEL_CURVES; p <= PANEL_LOG; p++) nvis += layout_visible(&l, p);
                for (int i = 0; i < nvis; i++) {
                    f = layout_next_focus(&l, f);
                    if (!seen[f]++) n++;
                }
                CHECK(n == nvis && f == PANEL_CURVES, "%s: focus cycle (%d of %d, back at %s)", what, n, nvis,
                      layout_panel_name(f));
                /* zoom: the focused panel takes everything between banner and command line */
                for (int z = PANEL_CURVES; z <= PANEL_LOG; z++) {
                    if (!layout_visible(&l, z)) continue;
                    Layout lz;
                    const LayoutOptions oz = {.has_moe = moe, .banner = banner, .zoom = z};
                    layout_compute(&lz, W, H, &oz);
                    snprintf(what, sizeof what, "%dx%d moe=%d zoom=%s", W, H, moe, layout_panel_name(z));
                    check_tiling(&lz, what);
                    CHECK(lz.r[z].w == W && lz.r[z].h == H - 1 - (banner ? 3 : 2), "%s: zoomed size", what);
                    for (int p = PANEL_CURVES; p <= PANEL_LOG; p++)
                        if (p != z) CHECK(!layout_visible(&lz, p), "%s: %s hidden", what, layout_panel_name(p));
                }
            }
    }
    /* the exact 120x40 MoE layout (the README screenshot) */
    Layout l;
    const LayoutOptions o = {.has_moe = 1, .banner = 0, .zoom = -1};
    layout_compute(&l, 120, 40, &o);
    CHECK(l.r[PANEL_CURVES].x == 0 && l.r[PANEL_CURVES].y == 2 && l.r[PANEL_CURVES].w == 66 &&
              l.r[PANEL_CURVES].h == 15,
          "120x40 curves");
    CHECK(l.r[PANEL_TEMP].x == 66 && l.r[PANEL_TEMP].w == 54, "120x40 temperature");
    CHECK(l.r[PANEL_HEATMAP].y == 17 && l.r[PANEL_HEATMAP].w == 40 && l.r[PANEL_HEATMAP].h == 14, "120x40 heatmap");
    CHECK(l.r[PANEL_LOG].y == 31 && l.r[PANEL_LOG].h == 8, "120x40 log");
    /* 200x60: three columns on top */
    layout_compute(&l, 200, 60, &o);
    CHECK(l.r[PANEL_SCALARS].y == l.r[PANEL_CURVES].y && l.r[PANEL_LOAD].w == 120, "200x60 wide arrangement");
    /* too small */
    static const int small[][2] = {{79, 24}, {80, 23}, {70, 20}, {1, 1}, {0, 0}, {200, 10}};
    for (size_t s = 0; s < sizeof small / sizeof small[0]; s++) {
        CHECK(layout_compute(&l, small[s][0], small[s][1], &o) == -1 && l.too_small, "%dx%d is too small", small[s][0],
              small[s][1]);
        for (int p = 0; p < PANEL_COUNT; p++)
            CHECK(!layout_visible(&l, p), "%dx%d: %s hidden", small[s][0], small[s][1], layout_panel_name(p));
        CHECK(layout_next_focus(&l, PANEL_CURVES) == -1, "no focus when too small");
    }
    CHECK(rect_overlap((Rect){0, 0, 2, 2}, (Rect){1, 1, 2, 2}) && !rect_overlap((Rect){0, 0, 2, 2}, (Rect){2, 0, 2, 2}),
          "rect_overlap");
}

// ---------------------------------------------------------------------------------------------
// axes

static int is_nice(double step) {
    const double m = step / pow(10.0, floor(log10(step) + 1e-9));
    return close_to(m, 1, 1e-9) || close_to(m, 2, 1e-9) || close_to(m, 5, 1e-9);
}

static void test_axes(void) {
    Axis a;
    double t[64];
    char buf[32];
    axis_autoscale(&a, 0.0, 2.3, 6);
    CHECK(close_to(a.lo, 0, 1e-12) && close_to(a.hi, 2.5, 1e-12) && close_to(a.step, 0.5, 1e-12),
          "0..2.3 -> [%g, %g] step %g", a.lo, a.hi, a.step);
    const int n = axis_ticks(&a, t, 64);
    static const char *const want[] = {"0", "0.5", "1", "1.5", "2", "2.5"};
    CHECK(n == 6, "0..2.3: %d ticks", n);
    for (int i = 0; i < n && i < 6; i++) {
        axis_format(buf, sizeof buf, t[i], a.step);
        CHECK(!strcmp(buf, want[i]), "tick %d: '%s' (want %s)", i, buf, want[i]);
    }
    /* random ranges: covering, nice, within the tick budget */
    unsigned seed = 12345;
    for (int it = 0; it < 2000; it++) {
        seed = seed * 1103515245u + 12345u;
        const double v0 = ((int)(seed >> 8) % 20000 - 10000) * pow(10.0, (int)(seed % 9) - 4) / 1000.0;
        seed = seed * 1103515245u + 12345u;
        const double v1 = v0 + ((seed >> 8) % 10000 + 1) * pow(10.0, (int)(seed % 7) - 4) / 100.0;
        const int mt = 2 + (int)(seed % 9);
        axis_autoscale(&a, v0, v1, mt);
        const int nt = axis_ticks(&a, t, 64);
        CHECK(a.lo <= v0 + 1e-9 * a.step && a.hi >= v1 - 1e-9 * a.step, "[%g, %g] covers [%g, %g]", a.lo, a.hi, v0, v1);
        CHECK(is_nice(a.step), "step %g is nice", a.step);
        CHECK(nt >= 2 && nt <= (mt < 3 ? 3 : mt), "%d ticks within %d for [%g, %g]", nt, mt, v0, v1);
        CHECK(a.hi - a.lo <= 10 * (v1 - v0) || nt <= 3, "[%g, %g] is not much wider than [%g, %g]", a.lo, a.hi, v0, v1);
        if (n_failed > 20) return;
    }
    /* degenerate ranges */
    axis_autoscale(&a, 1.0, 1.0, 5);
    CHECK(a.lo < 1.0 && a.hi > 1.0, "constant 1 -> [%g, %g]", a.lo, a.hi);
    axis_autoscale(&a, 0.0, 0.0, 5);
    CHECK(a.lo < 0.0 && a.hi > 0.0, "constant 0 -> [%g, %g]", a.lo, a.hi);
    axis_autoscale(&a, NAN, INFINITY, 5);
    CHECK(a.lo == 0.0 && a.hi == 1.0, "non-finite -> [%g, %g]", a.lo, a.hi);
    axis_autoscale(&a, 3.0, 1.0, 5);
    CHECK(a.lo <= 1.0 && a.hi >= 3.0, "swapped range");
    axis_autoscale_zero(&a, 0.31, 2.2, 5);
    CHECK(a.lo == 0.0 && a.hi >= 2.2, "zero-pinned [%g, %g]", a.lo, a.hi);
    /* fixed time axis: exact ends, ticks at multiples */
    axis_fixed(&a, 0, 3200, 5);
    CHECK(a.lo == 0 && a.hi == 3200 && a.step == 1000, "fixed 0..3200 step %g", a.step);
    CHECK(axis_ticks(&a, t, 64) == 4 && t[3] == 3000, "fixed ticks");
    CHECK(axis_map(&a, 3200, 100) == 99 && axis_map(&a, 0, 100) == 0 && axis_map(&a, 1600, 101) == 50, "fixed mapping");
    /* mapping and its inverse */
    axis_autoscale(&a, 0, 10, 6);
    CHECK(axis_map(&a, a.lo, 50) == 0 && axis_map(&a, a.hi, 50) == 49, "ends map to ends");
    CHECK(axis_map(&a, -100, 50) == 0 && axis_map(&a, 100, 50) == 49 && axis_map(&a, NAN, 50) == -1, "clamping");
    for (int i = 0; i < 50; i++) CHECK(axis_map(&a, axis_unmap(&a, i, 50), 50) == i, "unmap %d", i);
    /* log axis */
    axis_autoscale_log(&a, 0.02, 3.0, 6);
    CHECK(a.log && close_to(a.lo, 0.01, 1e-12) && close_to(a.hi, 10, 1e-12), "log [%g, %g]", a.lo, a.hi);
    CHECK(axis_ticks(&a, t, 64) == 4 && close_to(t[2], 1.0, 1e-12), "log ticks");
    CHECK(axis_map(&a, 1.0, 31) == 20 && axis_map(&a, 0.0, 31) == 0, "log mapping");
    axis_autoscale_log(&a, 1e-6, 1e6, 4);
    CHECK(axis_ticks(&a, t, 64) <= 4 && a.hi >= 1e6 && a.lo <= 1e-6, "log decades thinned (step %g)", a.step);
    /* labels */
    static const struct {
        double v, step;
        const char *want;
    } lab[] = {
        {12000, 2000, "12k"}, {1500000, 500000, "1.5M"},  {2500, 500, "2500"},
        {-0.5, 0.5, "-0.5"},  {0.0005, 0.0001, "0.0005"}, {1e-9, 0.5, "0"},
        {0.25, 0.05, "0.25"}, {100, 20, "100"},           {3, 1, "3"},
        {0.1, 0.1, "0.1"},    {25000, 5000, "25k"},       {12500, 2500, "12.5k"},
    };
    for (size_t i = 0; i < sizeof lab / sizeof lab[0]; i++) {
        axis_format(buf, sizeof buf, lab[i].v, lab[i].step);
        CHECK(!strcmp(buf, lab[i].want), "label %g (step %g): '%s', want '%s'", lab[i].v, lab[i].step, buf,
              lab[i].want);
    }
}

// ---------------------------------------------------------------------------------------------
// colour binning, smoothing, sparklines

static void test_binning(void) {
    CHECK(heat_bin(0.0, 0, 1, 10) == 0 && heat_bin(0.0999, 0, 1, 10) == 0 && heat_bin(0.1, 0, 1, 10) == 1, "low bins");
    CHECK(heat_bin(0.999, 0, 1, 10) == 9 && heat_bin(1.0, 0, 1, 10) == 9 && heat_bin(7.0, 0, 1, 10) == 9, "top bin");
    CHECK(heat_bin(-3, 0, 1, 10) == 0 && heat_bin(NAN, 0, 1, 10) == 0, "below range and NaN");
    CHECK(heat_bin(5, 5, 5, 6) == 0 && heat_bin(6, 5, 5, 6) == 5, "empty range");
    CHECK(heat_bin(0.5, 0, 1, 1) == 0, "one bin");
    /* equal-width bins: a uniform grid fills every bin equally */
    for (int nb = 2; nb <= 10; nb++) {
        int cnt[10] = {0};
        const int N = 1000 * nb;
        for (int i = 0; i < N; i++) cnt[heat_bin((i + 0.5) / N, 0, 1, nb)]++;
        int ok = 1;
        for (int b = 0; b < nb; b++) ok &= cnt[b] == 1000;
        CHECK(ok, "%d bins of equal width", nb);
    }
    /* monotone */
    int prev = 0, mono = 1;
    for (int i = 0; i <= 100; i++) {
        const int b = heat_bin(i / 100.0, 0, 1, 6);
        mono &= b >= prev;
        prev = b;
    }
    CHECK(mono, "bins grow with the value");
    CHECK(spark_level(3, 3, 3, 8) == 3 && spark_level(0, 0, 1, 8) == 0 && spark_level(1, 0, 1, 8) == 7,
          "sparkline levels");

    Ema e;
    ema_init(&e, 0.5);
    CHECK(ema_push(&e, 2.0) == 2.0, "the first value starts the average");
    CHECK(close_to(ema_push(&e, 4.0), 3.0, 1e-12), "0.5 * 4 + 0.5 * 2");
    CHECK(close_to(ema_push(&e, NAN), 3.0, 1e-12) && e.n == 2, "NaN ignored");
    ema_init(&e, 0.1);
    for (int i = 0; i < 100; i++) ema_push(&e, 7.0);
    CHECK(close_to(e.value, 7.0, 1e-12), "constant stays constant");
    /* step response: after n steps the gap is (1 - alpha)^n */
    ema_init(&e, 0.1);
    ema_push(&e, 0.0);
    for (int i = 0; i < 10; i++) ema_push(&e, 1.0);
    CHECK(close_to(e.value, 1.0 - pow(0.9, 10), 1e-12), "step response %g", e.value);
    /* smoothing reduces the variance of noise */
    ema_init(&e, 0.1);
    unsigned s = 7;
    double var_raw = 0, var_ema = 0;
    for (int i = 0; i < 5000; i++) {
        s = s * 1664525u + 1013904223u;
        const double x = (s >> 8) / 16777216.0 - 0.5;
        const double y = ema_push(&e, x);
        if (i > 100) {
            var_raw += x * x;
            var_ema += y * y;
        }
    }
    CHECK(var_ema < 0.2 * var_raw, "EMA variance %g vs raw %g", var_ema, var_raw);
}

// ---------------------------------------------------------------------------------------------
// rings and decimation

static void test_rings(void) {
    Ring r;
    CHECK(ring_init(&r, 4) == 0, "ring_init");
    CHECK(isnan(ring_last(&r)), "empty ring");
    for (int i = 1; i <= 6; i++) ring_push(&r, i);
    CHECK(r.n == 4 && ring_get(&r, 0) == 3 && ring_get(&r, 3) == 6 && ring_last(&r) == 6, "ring keeps the last 4");
    double lo, hi;
    CHECK(ring_minmax(&r, 0, &lo, &hi) == 4 && lo == 3 && hi == 6, "ring min/max");
    CHECK(ring_minmax(&r, 2, &lo, &hi) == 2 && lo == 5 && hi == 6, "min/max of the last 2");
    ring_push(&r, NAN);
    CHECK(ring_minmax(&r, 0, &lo, &hi) == 3 && lo == 4, "NaN skipped");
    ring_free(&r);
    CHECK(ring_init(&r, 0) == -1, "capacity 0 rejected");

    /* decimating series: whole history in a fixed store, means preserved */
    Series s;
    CHECK(series_init(&s, 8, 1) == 0, "series_init");
    double sum = 0;
    const int N = 1000;
    for (int i = 0; i < N; i++) {
        const double y = i * 0.5;
        series_push(&s, i, &y);
        sum += y;
    }
    CHECK(s.n <= 8 && s.n >= 4, "stored points %d within capacity 8", s.n);
    CHECK((s.stride & (s.stride - 1)) == 0 && s.stride * s.n + s.pn == N,
          "stride %ld is a power of 2 and accounts for every point", s.stride);
    double got = 0;
    for (int i = 0; i < s.n; i++) got += series_y(&s, i, 0) * s.stride;
    got += s.pn ? series_y(&s, s.n, 0) * s.pn : 0;
    CHECK(close_to(got, sum, 1e-9), "sum preserved: %g vs %g", got, sum);
    CHECK(close_to(series_x(&s, 0), (s.stride - 1) / 2.0, 1e-9), "first point is the mean of the first stride (x %g)",
          series_x(&s, 0));
    int mono = 1;
    for (int i = 1; i < series_count(&s); i++) mono &= series_x(&s, i) > series_x(&s, i - 1);
    CHECK(mono, "x increases");
    CHECK(series_count(&s) == s.n + (s.pn > 0), "pending point exposed");
    CHECK(series_minmax(&s, 0, &lo, &hi) == series_count(&s) && lo >= 0 && hi <= (N - 1) * 0.5, "series min/max");
    series_free(&s);

    /* several values per point (the expert-load heat map) */
    CHECK(series_init(&s, 16, 3) == 0, "3-wide series");
    for (int i = 0; i < 100; i++) {
        const double y[3] = {i, 2.0 * i, 7.0};
        series_push(&s, i, y);
    }
    int ok = 1;
    for (int i = 0; i < series_count(&s); i++)
        ok &= close_to(series_y(&s, i, 1), 2 * series_y(&s, i, 0), 1e-12) && series_y(&s, i, 2) == 7.0 &&
              close_to(series_x(&s, i), series_y(&s, i, 0), 1e-12);
    CHECK(ok, "columns decimated together");
    series_free(&s);

    /* resampling onto columns */
    CHECK(series_init(&s, 64, 1) == 0, "series for resampling");
    for (int i = 0; i < 10; i++) {
        const double y = i;
        series_push(&s, i, &y);
    }
    double col[20];
    series_resample(&s, 0, 0, 10, 5, col);
    CHECK(col[0] == 0.5 && col[2] == 4.5 && col[4] == 8.5, "5 columns: %g %g %g", col[0], col[2], col[4]);
    series_resample(&s, 0, 0, 10, 20, col);
    CHECK(col[0] == 0 && isnan(col[1]) && col[18] == 9, "20 columns: gaps are NaN");
    series_resample(&s, 0, 100, 200, 4, col);
    CHECK(isnan(col[0]) && isnan(col[3]), "no points in range");
    series_free(&s);
    CHECK(series_init(&s, 1, 1) == -1 && series_init(&s, 8, 0) == -1, "bad series sizes rejected");
}

// ---------------------------------------------------------------------------------------------
// canvas and text

static void test_canvas(void) {
    Canvas c = {0};
    char cell[8];
    CHECK(canvas_resize(&c, 3, 2) == 0 && c.dw == 6 && c.dh == 8, "canvas 3x2 cells = 6x8 dots");
    canvas_dot(&c, 0, 0, 1);
    CHECK(canvas_cell(&c, 0, 0, 1, cell) == 1 && !strcmp(cell, "\u2801"), "dot (0,0) is U+2801");
    canvas_dot(&c, 1, 3, 2);
    CHECK(canvas_cell(&c, 0, 0, 1, cell) == 2 && !strcmp(cell, "\u2881"),
          "dots (0,0)+(1,3) are U+2881, last colour wins");
    CHECK(canvas_cell(&c, 0, 0, 0, cell) == 2 && !strcmp(cell, ":"), "ASCII: top and bottom dots -> ':'");
    canvas_dot(&c, 2, 0, 3);
    CHECK(canvas_cell(&c, 1, 0, 0, cell) == 3 && !strcmp(cell, "'"), "ASCII: top only -> \"'\"");
    canvas_dot(&c, 4, 7, 3);
    CHECK(canvas_cell(&c, 2, 1, 0, cell) == 3 && !strcmp(cell, "."), "ASCII: bottom only -> '.'");
    CHECK(canvas_cell(&c, 1, 1, 1, cell) == 0 && cell[0] == '\0', "empty cell");
    canvas_dot(&c, -1, 0, 1);
    canvas_dot(&c, 6, 0, 1);
    canvas_dot(&c, 0, 8, 1);
    CHECK(canvas_cell(&c, 2, 0, 1, cell) == 0, "out-of-range dots ignored");
    /* every braille pattern encodes as 3 UTF-8 bytes in U+2800..U+28FF */
    int ok = 1;
    for (int m = 1; m < 256; m++) {
        canvas_clear(&c);
        for (int b = 0; b < 8; b++)
            if (m & braille_bit(b / 4, b % 4)) canvas_dot(&c, b / 4, b % 4, 1);
        canvas_cell(&c, 0, 0, 1, cell);
        const unsigned cp = ((unsigned)(cell[0] & 0x0f) << 12) | ((unsigned)(cell[1] & 0x3f) << 6) | (cell[2] & 0x3f);
        ok &= strlen(cell) == 3 && cp >= 0x2800 && cp <= 0x28ff && c.bits[0] != 0;
    }
    CHECK(ok, "all 255 braille patterns");
    /* a diagonal line touches every column and row of dots */
    canvas_resize(&c, 4, 2);
    canvas_line(&c, 0, 0, 7, 7, 1);
    int dots = 0;
    for (int i = 0; i < c.cw * c.ch; i++)
        for (int b = 0; b < 8; b++) dots += (c.bits[i] >> b) & 1;
    CHECK(dots == 8, "diagonal of 8 dots (%d)", dots);
    canvas_clear(&c);
    canvas_hdash(&c, 0, 7, 0, 1);
    dots = 0;
    for (int i = 0; i < c.cw; i++)
        for (int b = 0; b < 8; b++) dots += (c.bits[i] >> b) & 1;
    CHECK(dots >= 4 && dots < 8, "dashed line has gaps (%d dots)", dots);
    canvas_free(&c);

    char bar[128];
    bar_cells(bar, sizeof bar, 0.5, 10, 0);
    CHECK(!strcmp(bar, "#####....."), "ASCII bar '%s'", bar);
    bar_cells(bar, sizeof bar, 0.55, 10, 1);
    CHECK(utf8_cells(bar) == 10 && strstr(bar, "\u258c") != NULL, "UTF-8 bar with a half block '%s'", bar);
    bar_cells(bar, sizeof bar, 2.0, 4, 0);
    CHECK(!strcmp(bar, "####"), "bar clamps to full");
    bar_cells(bar, sizeof bar, NAN, 4, 0);
    CHECK(!strcmp(bar, "...."), "NaN bar is empty");
    fmt_duration(bar, sizeof bar, 5);
    CHECK(!strcmp(bar, "5s"), "5s");
    fmt_duration(bar, sizeof bar, 65);
    CHECK(!strcmp(bar, "1m05s"), "1m05s");
    fmt_duration(bar, sizeof bar, 3725);
    CHECK(!strcmp(bar, "1h02m"), "1h02m");
    fmt_duration(bar, sizeof bar, 90000);
    CHECK(!strcmp(bar, "1d01h"), "1d01h");
    fmt_duration(bar, sizeof bar, -1);
    CHECK(!strcmp(bar, "--"), "unknown duration");
    fmt_count(bar, sizeof bar, 12345);
    CHECK(!strcmp(bar, "12.3k"), "12.3k");
    CHECK(utf8_cells("a\u2801b") == 3, "utf8_cells");
}

static void test_compare_layout(void) {
    static const int sizes[][2] = {{80, 24}, {100, 30}, {120, 40}, {200, 60}, {81, 25}};
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        const int W = sizes[s][0], H = sizes[s][1];
        CompareLayout l;
        CHECK(layout_compare(&l, W, H) == 0 && !l.too_small, "compare %dx%d: laid out", W, H);
        long area = 0;
        for (int a = 0; a < CMP_COUNT; a++) {
            const Rect r = l.r[a];
            CHECK(r.w > 0 && r.h > 0 && r.x >= 0 && r.y >= 0 && r.x + r.w <= W && r.y + r.h <= H,
                  "compare %dx%d: panel %d inside the screen", W, H, a);
            area += (long)r.w * r.h;
            for (int b = a + 1; b < CMP_COUNT; b++)
                CHECK(!rect_overlap(r, l.r[b]), "compare %dx%d: panels %d and %d do not overlap", W, H, a, b);
        }
        CHECK(area == (long)W * H, "compare %dx%d: the panels tile the screen (%ld of %d cells)", W, H, area, W * H);
        CHECK(l.r[CMP_DIFF].w >= 40 && l.r[CMP_DIFF].w <= 52, "compare %dx%d: diff width %d", W, H, l.r[CMP_DIFF].w);
        CHECK(l.r[CMP_DIFF].h >= 15, "compare %dx%d: the diff table's 13 rows fit (h %d)", W, H, l.r[CMP_DIFF].h);
        CHECK(l.r[CMP_HEAT_A].h >= 5 && l.r[CMP_HEAT_A].y == l.r[CMP_HEAT_B].y &&
                  l.r[CMP_HEAT_A].h == l.r[CMP_HEAT_B].h,
              "compare %dx%d: heatmaps side by side", W, H);
        CHECK(l.r[CMP_HINT].y == H - 1, "compare %dx%d: hint row last", W, H);
    }
    CompareLayout l;
    CHECK(layout_compare(&l, 79, 40) == -1 && l.too_small && l.r[CMP_CURVES].w == 0, "compare 79x40: too small");
    CHECK(layout_compare(&l, 120, 23) == -1 && l.too_small, "compare 120x23: too small");
}

static void test_scatter(void) {
    /* two clusters in opposite corners and one point in the middle */
    const float pts[][2] = {{0, 0}, {0.1f, 0}, {0, 0.1f}, {10, 10}, {9.9f, 10}, {10, 9.9f}, {5, 5}, {NAN, 1}};
    const int cat[] = {0, 0, 1, 2, 2, 2, 1, 0};
    float x[8], y[8];
    for (int i = 0; i < 8; i++) {
        x[i] = pts[i][0];
        y[i] = pts[i][1];
    }
    int cell[5 * 5], count[5 * 5];
    const int placed = scatter_grid(x, y, 1, 8, cat, 3, 5, 5, cell, count);
    CHECK(placed == 7, "scatter: NaN point skipped (%d placed)", placed);
    /* (0,0) is the bottom-left cell: row 4, col 0; majority 0 (two of three) */
    CHECK(cell[4 * 5 + 0] == 0 && count[4 * 5 + 0] == 3, "scatter: bottom-left cell is category 0 x3 (%d x%d)",
          cell[20], count[20]);
    CHECK(cell[0 * 5 + 4] == 2 && count[4] == 3, "scatter: top-right cell is category 2 x3 (%d x%d)", cell[4],
          count[4]);
    CHECK(cell[2 * 5 + 2] == 1 && count[12] == 1, "scatter: the middle point (%d)", cell[12]);
    int empty = 0;
    for (int i = 0; i < 25; i++) empty += cell[i] < 0;
    CHECK(empty == 22, "scatter: every other cell empty (%d)", empty);
    /* a tie goes to the smaller category; an out-of-range category is skipped */
    const float tx[] = {1, 1, 1}, ty[] = {1, 1, 1};
    const int tc[] = {2, 1, 7};
    CHECK(scatter_grid(tx, ty, 1, 3, tc, 3, 3, 3, cell, count) == 2 && cell[4] == 1 && count[4] == 2,
          "scatter: degenerate extent centred, tie to the smaller category (%d)", cell[4]);
    /* interleaved (n, 2) layout via the stride */
    const float xy[] = {0, 0, 1, 1};
    const int c2[] = {3, 4};
    CHECK(scatter_grid(xy, xy + 1, 2, 2, c2, 5, 2, 2, cell, NULL) == 2 && cell[2] == 3 && cell[1] == 4,
          "scatter: stride 2 (%d %d)", cell[2], cell[1]);
    CHECK(scatter_symbol(0) == '0' && scatter_symbol(10) == 'a' && scatter_symbol(36) == 'A' &&
              scatter_symbol(62) == '0',
          "scatter symbols");
}

/* draw_fit_segs: whole segments or none, the lowest keep first, one "…" per dropped run, the
 * first segment cut at a word only when it alone is too long. */
static void test_fit_segs(void) {
    char out[256];
    if (!setlocale(LC_ALL, "C.UTF-8")) {
        printf("test_fit_segs: no C.UTF-8 locale, skipped\n");
        return;
    }
    const DrawSeg s[4] = {{"same expert 59%", 9}, {", same class 40%", 8}, {"; 204 points", 5}, {", 1.2 s", 4}};
    CHECK(draw_fit_segs(s, 4, 80, 1, out, sizeof out) == 0 &&
              !strcmp(out, "same expert 59%, same class 40%; 204 points, 1.2 s"),
          "segments: all fit '%s'", out);
    CHECK(draw_fit_segs(s, 4, 44, 1, out, sizeof out) == 1 &&
              !strcmp(out, "same expert 59%, same class 40%; 204 points\u2026"),
          "segments: the last dropped, marked '%s'", out);
    CHECK(draw_fit_segs(s, 4, 32, 1, out, sizeof out) == 2 && !strcmp(out, "same expert 59%, same class 40%\u2026"),
          "segments: the run of two dropped is one mark '%s'", out);
    CHECK(draw_fit_segs(s, 4, 31, 0, out, sizeof out) == 3 && !strcmp(out, "same expert 59%~"),
          "segments: ASCII mark, no number cut '%s'", out);
    /* a middle segment with a low keep goes first and its mark stays in place */
    const DrawSeg c[5] = {
        {" compare", 9}, {" | A: alpha", 8}, {" (moe E=8 k=2)", 2}, {" | B: beta", 8}, {" (moe E=4 k=1)", 2}};
    CHECK(draw_fit_segs(c, 5, 50, 1, out, sizeof out) == 1 &&
              !strcmp(out, " compare | A: alpha (moe E=8 k=2) | B: beta\u2026"),
          "segments: the later of a tie first '%s'", out);
    CHECK(draw_fit_segs(c, 5, 33, 1, out, sizeof out) == 2 && !strcmp(out, " compare | A: alpha\u2026 | B: beta\u2026"),
          "segments: a mark where each was dropped '%s'", out);
    /* empty segments neither drop nor split a run */
    const DrawSeg e[4] = {{"title", 9}, {"  4 sessions", 3}, {"", 7}, {"  (0 running)", 2}};
    CHECK(draw_fit_segs(e, 4, 8, 1, out, sizeof out) == 2 && !strcmp(out, "title\u2026"),
          "segments: empty ones skipped '%s'", out);
    /* the first alone too long: cut at a word with the mark, never inside "C=128" */
    const DrawSeg f[2] = {{"head moe C=128 of the run", 9}, {" more", 1}};
    CHECK(draw_fit_segs(f, 2, 14, 1, out, sizeof out) == 1 && !strcmp(out, "head moe\u2026"), "segments: word cut '%s'",
          out);
    CHECK(utf8_cells(out) <= 14, "segments: within the width");
    setlocale(LC_ALL, "C");
}

// ---------------------------------------------------------------------------------------------
// help overlays

/* Both help overlays (live screen, browser) fit an 80-column terminal with a cell to spare on
 * each side: every line at most 74 cells (the box adds 4). */
static void test_help_fits(void) {
    for (int browse = 0; browse <= 1; browse++) {
        int w = 0, h = 0;
        view_help_size_for(browse, &w, &h);
        CHECK(w > 4 && w <= 78, "help (%s): box %d cells wide, more than 78", browse ? "browse" : "live", w);
        CHECK(h > 2 && h <= 42, "help (%s): box %d lines high", browse ? "browse" : "live", h);
    }
}

int main(void) {
    test_help_fits();
    test_fit_segs();
    test_layout();
    test_compare_layout();
    test_scatter();
    test_axes();
    test_binning();
    test_rings();
    test_canvas();
    printf("test_views: %d checks, %d failures\n", n_checks, n_failed);
    return n_failed ? 1 : 0;
}
