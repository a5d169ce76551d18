/* test_fig.c — the figure API (views/fig.h) against what it promises:
 *   - a known matrix rendered as a heatmap to PNG has, at every cell centre, exactly the viridis
 *     colour of its value (±1 per channel for cairo's 8-bit rounding), row 0 at the top, NaN grey;
 *   - the PNG is 300 dpi: its pixel size is the page size in inches x 300 and its pHYs chunk says
 *     11811 pixels per metre; PDF and SVG files are written whole (%PDF ... %%EOF, <svg ... </svg>)
 *     and the PDF embeds its font;
 *   - viridis hits its published anchors and its lightness rises monotonically (greyscale); the
 *     first 8 categorical styles differ pairwise in dash or marker, not only in hue;
 *   - bad input: a figure in a missing folder fails with a message, leaves no file, never crashes;
 *   - the expert load and temperature figures of a hand-made run shade its alarm (issue 26): against
 *     the same run without alarm, the pixels differ in one yellow band (warning steps) and one red band
 *     (collapse steps) per panel, as wide as their steps and as far apart; an old session's collapsed
 *     rows give one red band.
 * With arguments (`test_fig --png FILE...`), decodes each PNG with libpng instead and checks it is
 * 8-bit RGB at 300 dpi with a width of 3.5 or 7 inches and 0.5-10 inches high (tests/t_plot.sh). */
#include "views/fig.h"
#include "views/figs.h"

#include <math.h>
#include <png.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"

typedef struct {
    int w, h;
    unsigned char *rgb; /* (h, w, 3) */
    png_uint_32 ppm_x, ppm_y;
    int unit;
} Png;

/* Decodes an 8-bit RGB PNG with libpng. 0, or -1 with a message on stdout. */
static int png_load(const char *path, Png *p) {
    memset(p, 0, sizeof *p);
    FILE *fp = fopen(path, "rb");
    if (!fp) {
        printf("cannot open %s\n", path);
        return -1;
    }
    unsigned char sig[8];
    if (fread(sig, 1, 8, fp) != 8 || png_sig_cmp(sig, 0, 8)) {
        printf("%s: not a PNG\n", path);
        fclose(fp);
        return -1;
    }
    png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, NULL, NULL, NULL);
    png_infop info = png_create_info_struct(png);
    png_bytep *rows = NULL;
    if (setjmp(png_jmpbuf(png))) {
        printf("%s: libpng failed decoding\n", path);
        png_destroy_read_struct(&png, &info, NULL);
        free(rows);
        free(p->rgb);
        p->rgb = NULL;
        fclose(fp);
        return -1;
    }
    png_init_io(png, fp);
    png_set_sig_bytes(png, 8);
    png_read_info(png, info);
    p->w = (int)png_get_image_width(png, info);
    p->h = (int)png_get_image_height(png, info);
    if (png_get_color_type(png, info) != PNG_COLOR_TYPE_RGB || png_get_bit_depth(png, info) != 8) {
        printf("%s: not 8-bit RGB\n", path);
        png_destroy_read_struct(&png, &info, NULL);
        fclose(fp);
        return -1;
    }
    png_get_pHYs(png, info, &p->ppm_x, &p->ppm_y, &p->unit);
    p->rgb = malloc((size_t)p->w * p->h * 3);
    rows = malloc(sizeof *rows * p->h);
    for (int y = 0; y < p->h; y++) rows[y] = p->rgb + (size_t)y * p->w * 3;
    png_read_image(png, rows);
    png_read_end(png, NULL);
    png_destroy_read_struct(&png, &info, NULL);
    free(rows);
    fclose(fp);
    return 0;
}

static int near_px(int a, double b01) { return abs(a - (int)lround(b01 * 255.0)) <= 1; }

static long file_size(const char *path) {
    FILE *fp = fopen(path, "rb");
    if (!fp) return -1;
    fseek(fp, 0, SEEK_END);
    const long n = ftell(fp);
    fclose(fp);
    return n;
}

static char *slurp(const char *path, long *n) {
    *n = file_size(path);
    if (*n <= 0) return NULL;
    FILE *fp = fopen(path, "rb");
    char *b = malloc(*n + 1);
    if (fread(b, 1, *n, fp) != (size_t)*n) *n = 0;
    b[*n] = 0;
    fclose(fp);
    return b;
}

static int mem_has(const char *b, long n, const char *s) {
    const size_t l = strlen(s);
    for (long i = 0; i + (long)l <= n; i++)
        if (memcmp(b + i, s, l) == 0) return 1;
    return 0;
}

/* --png FILE...: each is a valid 300 dpi RGB PNG, 3.5 or 7 inches wide, 1-10 inches high. */
static int check_pngs(int argc, char **argv) {
    for (int i = 2; i < argc; i++) {
        Png p;
        if (png_load(argv[i], &p)) {
            check(0, "%s decodes", argv[i]);
            continue;
        }
        check(p.unit == PNG_RESOLUTION_METER && p.ppm_x == 11811 && p.ppm_y == 11811, "%s: pHYs 300 dpi (%u/m)",
              argv[i], (unsigned)p.ppm_x);
        check(p.w == 1050 || p.w == 2100, "%s: %d px wide = 3.5 or 7 in at 300 dpi", argv[i], p.w);
        check(p.h >= 150 && p.h <= 3000, "%s: %d px high (0.5-10 in)", argv[i], p.h);
        /* not blank: some pixels are far from white */
        long ink = 0;
        for (long k = 0; k < (long)p.w * p.h; k++) ink += p.rgb[3 * k] + p.rgb[3 * k + 1] + p.rgb[3 * k + 2] < 600;
        check(ink > 1000, "%s: %ld inked pixels", argv[i], ink);
        free(p.rgb);
    }
    printf("%d checks, %d failed\n", n_checks, n_failed);
    return n_failed ? 1 : 0;
}

static void test_heatmap_png(const char *dir) {
    enum { R = 3, C = 4 };
    /* values over [2, 14] (vmin 2, vmax 14): the ends, interior points and a NaN */
    const double v[R * C] = {2, 3, 5, 8, 14, 11, 6.5, 2.6, NAN, 9.2, 12.8, 4.4};
    const double vmin = 2, vmax = 14;
    char path[512];
    snprintf(path, sizeof path, "%s/heat.png", dir);
    Fig *f = fig_open(path, FIG_PNG, 2.0, 1.5);
    check(f != NULL, "fig_open png");
    if (!f) return;
    check(fabs(fig_width(f) - 144) < 1e-9 && fabs(fig_height(f) - 108) < 1e-9, "page 2 x 1.5 in = 144 x 108 pt");
    /* the grid at (12, 9) pt, 120 x 90 pt: cells 30 x 30 pt = 125 x 125 px */
    const double gx = 12, gy = 9, gw = 120, gh = 90;
    fig_heatmap(f, gx, gy, gw, gh, v, R, C, vmin, vmax, NULL, NULL, 6);
    check(fig_close(f) == ML_OK, "fig_close png: %s", ml_last_error());
    Png p;
    if (png_load(path, &p)) {
        check(0, "the heatmap PNG decodes");
        return;
    }
    check(p.w == 600 && p.h == 450, "2 x 1.5 in at 300 dpi = 600 x 450 px (got %d x %d)", p.w, p.h);
    check(p.unit == PNG_RESOLUTION_METER && p.ppm_x == 11811, "pHYs 11811 px/m = 300 dpi");
    const double s = FIG_DPI / 72.0;
    for (int r = 0; r < R; r++)
        for (int c = 0; c < C; c++) {
            const int px = (int)((gx + (c + 0.5) * gw / C) * s), py = (int)((gy + (r + 0.5) * gh / R) * s);
            const unsigned char *q = p.rgb + ((size_t)py * p.w + px) * 3;
            const double val = v[r * C + c];
            const FigRGB want = fig_viridis_rgb(isnan(val) ? NAN : (val - vmin) / (vmax - vmin));
            check(near_px(q[0], want.r) && near_px(q[1], want.g) && near_px(q[2], want.b),
                  "cell (%d,%d) = %g: pixel (%d,%d) is %d,%d,%d, viridis gives %.0f,%.0f,%.0f", r, c, val, px, py, q[0],
                  q[1], q[2], want.r * 255, want.g * 255, want.b * 255);
        }
    /* the page around the grid is white */
    const unsigned char *corner = p.rgb + ((size_t)5 * p.w + 5) * 3;
    check(corner[0] == 255 && corner[1] == 255 && corner[2] == 255, "the background is white");
    free(p.rgb);
}

static void test_vector(const char *dir) {
    for (int fmt = FIG_PDF; fmt <= FIG_SVG; fmt++) {
        char path[512];
        snprintf(path, sizeof path, "%s/v.%s", dir, fig_format_ext((FigFormat)fmt));
        Fig *f = fig_open(path, (FigFormat)fmt, FIG_COL_IN, 2.5);
        check(f != NULL, "fig_open %s", fig_format_ext((FigFormat)fmt));
        if (!f) continue;
        Axis ax, ay;
        axis_fixed(&ax, 0, 10, 5);
        axis_autoscale(&ay, -1, 1, 5);
        FigPanel p;
        fig_panel(&p, f, 0, 0, fig_width(f), fig_height(f), &ax, &ay, "title", "x", "y");
        double x[50], y[50];
        for (int i = 0; i < 50; i++) x[i] = i * 0.2, y[i] = sin(x[i]);
        FigStyle st = fig_series_style(0);
        fig_line(&p, x, y, 50, &st, 5);
        const char *lab[1] = {"sin"};
        fig_legend(&p, &st, lab, 1, 0, 1);
        check(fabs(fig_px(&p, 0) - p.x) < 1e-9 && fabs(fig_px(&p, 10) - (p.x + p.w)) < 1e-9,
              "x data range maps to the panel's width");
        check(fabs(fig_py(&p, ay.lo) - (p.y + p.h)) < 1e-9, "y axis points up");
        check(fig_close(f) == ML_OK, "fig_close %s", fig_format_ext((FigFormat)fmt));
        long n;
        char *b = slurp(path, &n);
        check(b != NULL && n > 500, "%s written (%ld bytes)", path, n);
        if (!b) continue;
        if (fmt == FIG_PDF) {
            check(n > 5 && memcmp(b, "%PDF-", 5) == 0 && mem_has(b + n - 16, 16, "%%EOF"), "PDF header and trailer");
            check(mem_has(b, n, "/FontFile"), "the PDF embeds its font");
        } else {
            check(mem_has(b, 200, "<svg") && mem_has(b + n - 16, 16, "</svg>"), "SVG root element closed");
        }
        free(b);
        char tmp[600];
        snprintf(tmp, sizeof tmp, "%s.tmp", path);
        check(access(tmp, F_OK) != 0, "no temporary file left");
    }
}

static void test_palettes(void) {
    static const double a0[3] = {0.267004, 0.004874, 0.329415}, a5[3] = {0.127568, 0.566949, 0.550556},
                        a10[3] = {0.993248, 0.906157, 0.143936};
    const FigRGB c0 = fig_viridis_rgb(0), c5 = fig_viridis_rgb(0.5), c10 = fig_viridis_rgb(1);
    check(fabs(c0.r - a0[0]) + fabs(c0.g - a0[1]) + fabs(c0.b - a0[2]) < 1e-9, "viridis(0) = matplotlib's first entry");
    check(fabs(c5.r - a5[0]) + fabs(c5.g - a5[1]) + fabs(c5.b - a5[2]) < 1e-9, "viridis(0.5) = entry 128");
    check(fabs(c10.r - a10[0]) + fabs(c10.g - a10[1]) + fabs(c10.b - a10[2]) < 1e-9, "viridis(1) = last entry");
    const FigRGB lo = fig_viridis_rgb(-3), hi = fig_viridis_rgb(7);
    check(lo.r == c0.r && hi.g == c10.g, "viridis clamps outside [0, 1]");
    double prev = -1;
    int mono = 1;
    for (int i = 0; i <= 200; i++) {
        const FigRGB c = fig_viridis_rgb(i / 200.0);
        const double L = 0.2126 * c.r + 0.7152 * c.g + 0.0722 * c.b;
        if (L <= prev) mono = 0;
        prev = L;
    }
    check(mono, "viridis lightness rises monotonically (reads in greyscale)");
    int distinct = 1;
    for (int i = 0; i < FIG_NCAT; i++)
        for (int j = i + 1; j < FIG_NCAT; j++) {
            const FigStyle a = fig_series_style(i), b = fig_series_style(j);
            if (a.marker == b.marker && a.dash == b.dash) distinct = 0;
            if (a.marker == b.marker) distinct = 0; /* markers alone tell the 8 apart */
        }
    check(distinct, "the first 8 series differ in marker shape (and dash), not only in hue");
    FigFormat f;
    check(fig_format_parse("svg", &f) == ML_OK && f == FIG_SVG, "format svg parses");
    check(fig_format_parse("jpeg", &f) == ML_ERR_ARG && strstr(ml_last_error(), "jpeg"), "format jpeg refused: %s",
          ml_last_error());
}

static void test_bad(const char *dir) {
    char path[512];
    snprintf(path, sizeof path, "%s/no/such/folder/x.pdf", dir);
    for (int fmt = 0; fmt < FIG_NFORMATS; fmt++) {
        snprintf(path, sizeof path, "%s/no/such/folder/x.%s", dir, fig_format_ext((FigFormat)fmt));
        Fig *f = fig_open(path, (FigFormat)fmt, 3.5, 2);
        ml_status st = ML_OK;
        if (f) {
            fig_text(f, 10, 10, 8, 0, 0, 0, "x");
            st = fig_close(f);
        }
        check((!f || st != ML_OK) && ml_last_error()[0], "%s in a missing folder fails: %s",
              fig_format_ext((FigFormat)fmt), ml_last_error());
        check(access(path, F_OK) != 0, "and leaves no file");
    }
    check(fig_open("/tmp/x.pdf", FIG_PDF, -1, 2) == NULL, "a negative size is refused");
}

/* ---- where and when (issue 26): the expert load and temperature figures shade the alarm's spans */

/* A hand-made run of 100 logged steps (2 epochs of 50), E = 4 with steady loads; alarm levels by
 * step: warning 21..40, collapse 61..80 (old: no alarm column, collapsed rows 61..80; none: nothing). */
static void alarm_history(SessionHistory *h, StepRecord *rows, int mode) {
    memset(h, 0, sizeof *h);
    h->E = 4;
    h->K = 2;
    h->nsteps = 100;
    h->steps = rows;
    h->steps_per_epoch = 50;
    h->total_steps = 100;
    h->log_every = 1;
    for (int i = 0; i < 100; i++) {
        StepRecord *r = &rows[i];
        memset(r, 0, sizeof *r);
        r->step = i + 1;
        r->has_moe = 1;
        r->tau = 1.0f - 0.005f * (float)i;
        r->moe.E = 4;
        r->moe.k = 2;
        r->moe.capacity = 20;
        for (int e = 0; e < 4; e++) r->moe.kept[e] = r->moe.demand[e] = 4 + 2 * e;
        const int level = r->step >= 21 && r->step <= 40 ? 1 : r->step >= 61 && r->step <= 80 ? 2 : 0;
        if (mode == 0) r->alarm = level, r->collapsed = level == 2;
        else if (mode == 1) r->collapsed = level == 2;
    }
}

typedef struct {
    int x0, x1;        /* columns */
    double r, g, b;    /* mean colour of the pixels that differ */
} Band;

/* The bands of columns where images a and b differ over more than 30% of the height. */
static int diff_bands(const Png *a, const Png *b, Band *band, int cap) {
    int n = 0, in = 0;
    for (int x = 0; x < a->w; x++) {
        int rows = 0;
        double r = 0, g = 0, bl = 0;
        for (int y = 0; y < a->h; y++) {
            const unsigned char *p = a->rgb + 3 * ((long)y * a->w + x), *q = b->rgb + 3 * ((long)y * b->w + x);
            if (abs(p[0] - q[0]) + abs(p[1] - q[1]) + abs(p[2] - q[2]) > 12) {
                rows++;
                r += p[0], g += p[1], bl += p[2];
            }
        }
        const int hit = rows > a->h * 3 / 10;
        if (hit && !in && n < cap) {
            band[n] = (Band){x, x, 0, 0, 0};
            n++;
        }
        if (hit && n > 0 && n <= cap) {
            Band *k = &band[n - 1];
            k->x1 = x;
            k->r += r / rows, k->g += g / rows, k->b += bl / rows;
        }
        in = hit;
    }
    for (int i = 0; i < n; i++) {
        const double w = band[i].x1 - band[i].x0 + 1;
        band[i].r /= w, band[i].g /= w, band[i].b /= w;
    }
    return n;
}

static int is_red(const Band *k) { return k->r > k->g + 25 && k->r > k->b + 25; }
static int is_yellow(const Band *k) { return k->r > k->b + 25 && k->g > k->b + 20 && k->r - k->g < 40; }

static void test_alarm_shading(const char *dir) {
    static StepRecord rows[3][100];
    SessionHistory h[3];
    FigRun r[3];
    for (int m = 0; m < 3; m++) {
        alarm_history(&h[m], rows[m], m == 2 ? 2 : m);
        memset(&r[m], 0, sizeof r[m]);
        r[m].h = &h[m];
        r[m].name = "alarms";
        r[m].has_plan = 1;
        for (int i = 0; i < FIGS_PLAN_N; i++) {
            r[m].plan_step[i] = 100.0 * i / (FIGS_PLAN_N - 1);
            r[m].plan_launch[i] = r[m].plan_final[i] = 1.0 - 0.005 * r[m].plan_step[i];
        }
    }
    static const char *const what[2] = {"expert_load", "temperature"};
    static const char *const mode[3] = {"alarm", "old", "none"};
    for (int fig = 0; fig < 2; fig++) {
        Png png[3];
        int ok = 1;
        for (int m = 0; m < 3; m++) {
            char path[600];
            snprintf(path, sizeof path, "%s/%s_%s.png", dir, what[fig], mode[m]);
            const ml_status st = fig ? figs_temperature(&r[m], path, FIG_PNG) : figs_expert_load(&r[m], path, FIG_PNG);
            ok &= check(st == ML_OK && png_load(path, &png[m]) == 0, "%s (%s) drawn: %s", what[fig], mode[m],
                        st == ML_OK ? "" : ml_last_error());
        }
        if (!ok) continue;
        Band b[8];
        int n = diff_bands(&png[0], &png[2], b, 8);
        const int panels = fig ? 1 : 2;
        check(n == 2 * panels, "%s: %d shaded bands (2 per panel x %d)", what[fig], n, panels);
        for (int p = 0; p < panels && n == 2 * panels; p++) {
            const Band *w = &b[2 * p], *c = &b[2 * p + 1];
            check(is_yellow(w), "%s panel %d: the first band (steps 21-41) is yellow (%.0f %.0f %.0f)", what[fig], p, w->r,
                  w->g, w->b);
            check(is_red(c), "%s panel %d: the second (61-81) is red (%.0f %.0f %.0f)", what[fig], p, c->r, c->g, c->b);
            /* 20 steps each, 20 steps apart: equal widths and gap (within a few pixels) */
            const int ww = w->x1 - w->x0, cw = c->x1 - c->x0, gap = c->x0 - w->x1;
            check(abs(ww - cw) <= 3 && abs(gap - ww) <= ww / 8 + 3, "%s panel %d: widths %d, %d, gap %d (steps 20, 20, 20)",
                  what[fig], p, ww, cw, gap);
        }
        n = diff_bands(&png[1], &png[2], b, 8);
        int red = n == panels;
        for (int i = 0; i < n && red; i++) red &= is_red(&b[i]);
        check(red, "%s, an old session: its collapsed rows are one red band per panel (%d bands)", what[fig], n);
        for (int m = 0; m < 3; m++) free(png[m].rgb);
    }
}

int main(int argc, char **argv) {
    if (argc > 2 && strcmp(argv[1], "--png") == 0) return check_pngs(argc, argv);
    atexit(fig_release_caches);
    char dir[] = "/tmp/test_fig.XXXXXX";
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    test_heatmap_png(dir);
    test_vector(dir);
    test_palettes();
    test_bad(dir);
    test_alarm_shading(dir);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) printf("note: could not remove %s\n", dir);
    printf("%d checks, %d failed\n", n_checks, n_failed);
    return n_failed ? 1 : 0;
}
