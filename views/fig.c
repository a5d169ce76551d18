/* fig.c — the figure API of fig.h over cairo (PDF, SVG, and PNG written through libpng). */
#include "views/fig.h"

#include <cairo-pdf.h>
#include <cairo-svg.h>
#include <cairo.h>
#include <errno.h>
#include <fontconfig/fontconfig.h>
#include <math.h>
#include <png.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FIG_MAX_TITLES 64
struct Fig {
    cairo_surface_t *s;
    cairo_t *cr;
    FigFormat fmt;
    double w, h; /* points */
    char path[1024], tmp[1100];
    int ntitles;                          /* title lines drawn (fig_title), for the check */
    double tbox[FIG_MAX_TITLES][4];       /* each line's ink: x0, y0, x1, y1 */
    char ttext[FIG_MAX_TITLES][96];       /* its text (cut), for the message */
    /* SVG: the text side channel (fig.h): every text drawn and the boxes of the plot areas and
     * legends, as XML lines written into the file's <metadata> at fig_close */
    const char *role; /* of the text being drawn: "text", "title", "legend" */
    char *meta;
    size_t meta_len, meta_cap;
    int meta_bad; /* out of memory: fig_close fails */
};

/* the title check (fig_title_stats): lines drawn and lines outside their box or over another */
static int g_title_lines, g_title_bad;
static char g_title_worst[256];

#define FONT "DejaVu Sans"

// ---------------------------------------------------------------------------------------------
// palettes

static const FigRGB okabe_ito[FIG_NCAT] = {
    {0x00 / 255.0, 0x72 / 255.0, 0xB2 / 255.0}, /* blue */
    {0xD5 / 255.0, 0x5E / 255.0, 0x00 / 255.0}, /* vermilion */
    {0x00 / 255.0, 0x9E / 255.0, 0x73 / 255.0}, /* bluish green */
    {0xCC / 255.0, 0x79 / 255.0, 0xA7 / 255.0}, /* reddish purple */
    {0xE6 / 255.0, 0x9F / 255.0, 0x00 / 255.0}, /* orange */
    {0x56 / 255.0, 0xB4 / 255.0, 0xE9 / 255.0}, /* sky blue */
    {0x00 / 255.0, 0x00 / 255.0, 0x00 / 255.0}, /* black */
    {0xF0 / 255.0, 0xE4 / 255.0, 0x42 / 255.0}, /* yellow */
};

/* matplotlib's viridis at 0, 0.1, ..., 1 (rows 0, 25.5, ... 255 of its 256-entry table) */
static const double viridis[11][3] = {
    {0.267004, 0.004874, 0.329415}, {0.282623, 0.140926, 0.457517}, {0.253935, 0.265254, 0.529983},
    {0.206756, 0.371758, 0.553117}, {0.163625, 0.471133, 0.558148}, {0.127568, 0.566949, 0.550556},
    {0.134692, 0.658636, 0.517649}, {0.266941, 0.748751, 0.440573}, {0.477504, 0.821444, 0.318195},
    {0.741388, 0.873449, 0.149561}, {0.993248, 0.906157, 0.143936},
};

FigRGB fig_cat_rgb(int i) { return okabe_ito[((i % FIG_NCAT) + FIG_NCAT) % FIG_NCAT]; }

FigRGB fig_viridis_rgb(double t) {
    if (isnan(t)) return (FigRGB){0.85, 0.85, 0.85};
    if (t < 0) t = 0;
    if (t > 1) t = 1;
    const double s = t * 10.0;
    int i = (int)floor(s);
    if (i > 9) i = 9;
    const double u = s - i;
    return (FigRGB){viridis[i][0] + u * (viridis[i + 1][0] - viridis[i][0]),
                    viridis[i][1] + u * (viridis[i + 1][1] - viridis[i][1]),
                    viridis[i][2] + u * (viridis[i + 1][2] - viridis[i][2])};
}

int fig_dash(int i, double out[4]) {
    switch (((i % 5) + 5) % 5) {
    case 1: out[0] = 4, out[1] = 2; return 2;
    case 2: out[0] = 1, out[1] = 1.5; return 2;
    case 3: out[0] = 4, out[1] = 1.5, out[2] = 1, out[3] = 1.5; return 4;
    case 4: out[0] = 7, out[1] = 2.5; return 2;
    default: return 0;
    }
}

FigStyle fig_series_style(int i) {
    return (FigStyle){.color = fig_cat_rgb(i),
                      .width = 1.0,
                      .dash = i % 5,
                      .marker = (FigMarker)(1 + i % (FIG_MK_COUNT - 1)),
                      .msize = 3.5,
                      .mfill = (i / (FIG_MK_COUNT - 1)) % 2 == 0,
                      .alpha = 1};
}

static const char *const fmt_ext[FIG_NFORMATS] = {"pdf", "svg", "png"};

const char *fig_format_ext(FigFormat f) { return f >= 0 && f < FIG_NFORMATS ? fmt_ext[f] : "?"; }

ml_status fig_format_parse(const char *s, FigFormat *f) {
    for (int i = 0; i < FIG_NFORMATS; i++)
        if (strcmp(s, fmt_ext[i]) == 0) {
            *f = (FigFormat)i;
            return ML_OK;
        }
    return ml_fail(ML_ERR_ARG, "unknown figure format '%s' (pdf, svg or png)", s);
}

// ---------------------------------------------------------------------------------------------
// the page

Fig *fig_open(const char *path, FigFormat fmt, double w_in, double h_in) {
    if (!(w_in > 0 && h_in > 0 && w_in < 100 && h_in < 100)) {
        ml_fail(ML_ERR_ARG, "figure size %gx%g in is out of range", w_in, h_in);
        return NULL;
    }
    Fig *f = calloc(1, sizeof *f);
    if (!f) {
        ml_fail(ML_ERR_NOMEM, "out of memory");
        return NULL;
    }
    f->fmt = fmt;
    f->role = "text";
    f->w = w_in * 72.0;
    f->h = h_in * 72.0;
    snprintf(f->path, sizeof f->path, "%s", path);
    snprintf(f->tmp, sizeof f->tmp, "%s.tmp", path);
    switch (fmt) {
    case FIG_PDF: f->s = cairo_pdf_surface_create(f->tmp, f->w, f->h); break;
    case FIG_SVG:
        f->s = cairo_svg_surface_create(f->tmp, f->w, f->h);
        if (cairo_surface_status(f->s) == CAIRO_STATUS_SUCCESS)
            cairo_svg_surface_restrict_to_version(f->s, CAIRO_SVG_VERSION_1_1);
        break;
    case FIG_PNG:
        f->s =
            cairo_image_surface_create(CAIRO_FORMAT_ARGB32, (int)lround(w_in * FIG_DPI), (int)lround(h_in * FIG_DPI));
        break;
    default:
        free(f);
        ml_fail(ML_ERR_ARG, "bad figure format");
        return NULL;
    }
    if (cairo_surface_status(f->s) != CAIRO_STATUS_SUCCESS) {
        ml_fail(ML_ERR_IO, "%s: cannot create the figure: %s", path,
                cairo_status_to_string(cairo_surface_status(f->s)));
        cairo_surface_destroy(f->s);
        remove(f->tmp);
        free(f);
        return NULL;
    }
    f->cr = cairo_create(f->s);
    if (fmt == FIG_PNG) cairo_scale(f->cr, FIG_DPI / 72.0, FIG_DPI / 72.0);
    cairo_set_source_rgb(f->cr, 1, 1, 1);
    cairo_paint(f->cr);
    cairo_select_font_face(f->cr, FONT, CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_NORMAL);
    cairo_set_line_join(f->cr, CAIRO_LINE_JOIN_ROUND);
    return f;
}

void fig_release_caches(void) {
    cairo_debug_reset_static_data();
    FcFini();
}

double fig_width(const Fig *f) { return f->w; }
double fig_height(const Fig *f) { return f->h; }

// ---------------------------------------------------------------------------------------------
// the SVG's text side channel: cairo draws text as glyph outlines, so the words of an SVG figure
// are also written as XML in its <metadata> (fig.h)

static void meta_put(Fig *f, const char *s, size_t n) {
    if (f->meta_bad) return;
    if (f->meta_len + n + 1 > f->meta_cap) {
        size_t cap = f->meta_cap ? f->meta_cap : 4096;
        while (cap < f->meta_len + n + 1) cap *= 2;
        char *m = realloc(f->meta, cap);
        if (!m) {
            f->meta_bad = 1;
            return;
        }
        f->meta = m;
        f->meta_cap = cap;
    }
    memcpy(f->meta + f->meta_len, s, n);
    f->meta_len += n;
    f->meta[f->meta_len] = 0;
}

static void meta_str(Fig *f, const char *s) { meta_put(f, s, strlen(s)); }

/* s with &, <, >, " escaped (control characters, which XML 1.0 does not allow, as spaces) */
static void meta_escaped(Fig *f, const char *s) {
    for (; *s; s++) {
        const unsigned char c = (unsigned char)*s;
        if (c == '&') meta_str(f, "&amp;");
        else if (c == '<') meta_str(f, "&lt;");
        else if (c == '>') meta_str(f, "&gt;");
        else if (c == '"') meta_str(f, "&quot;");
        else if (c < 0x20) meta_str(f, " ");
        else meta_put(f, s, 1);
    }
}

static void meta_text(Fig *f, const char *s) {
    if (f->fmt != FIG_SVG) return;
    meta_str(f, "<moelab:text role=\"");
    meta_str(f, f->role);
    meta_str(f, "\">");
    meta_escaped(f, s);
    meta_str(f, "</moelab:text>\n");
}

static void meta_box(Fig *f, const char *role, double x, double y, double w, double h) {
    if (f->fmt != FIG_SVG) return;
    char b[200];
    snprintf(b, sizeof b, "<moelab:box role=\"%s\" x=\"%.2f\" y=\"%.2f\" w=\"%.2f\" h=\"%.2f\"/>\n", role, x, y, w, h);
    meta_str(f, b);
}

/* Puts the side channel into the SVG cairo wrote at path: right after the <svg ...> tag. */
static ml_status svg_add_meta(Fig *f, const char *path) {
    if (f->meta_bad) return ml_fail(ML_ERR_NOMEM, "%s: out of memory for the figure's text", f->path);
    FILE *fp = fopen(path, "rb");
    if (!fp) return ml_fail(ML_ERR_IO, "%s: cannot read back: %s", path, strerror(errno));
    char *svg = NULL;
    size_t n = 0, cap = 0;
    for (;;) {
        if (n + 65536 > cap) {
            char *m = realloc(svg, cap = cap ? 2 * cap : 262144);
            if (!m) {
                free(svg);
                fclose(fp);
                return ml_fail(ML_ERR_NOMEM, "%s: out of memory", path);
            }
            svg = m;
        }
        const size_t r = fread(svg + n, 1, cap - n - 1, fp);
        n += r;
        if (r == 0) break;
    }
    const int rerr = ferror(fp);
    fclose(fp);
    svg[n] = 0;
    char *tag = rerr ? NULL : strstr(svg, "<svg");
    char *end = tag ? strchr(tag, '>') : NULL;
    if (!end) {
        free(svg);
        return ml_fail(ML_ERR_IO, "%s: cairo's SVG has no <svg> element", path);
    }
    const size_t head = (size_t)(end + 1 - svg);
    fp = fopen(path, "wb");
    if (!fp) {
        free(svg);
        return ml_fail(ML_ERR_IO, "%s: cannot write: %s", path, strerror(errno));
    }
    fwrite(svg, 1, head, fp);
    fputs("\n<metadata id=\"moelab-figure\"><moelab:figure xmlns:moelab=\"urn:moelab:figure\">\n", fp);
    if (f->meta) fwrite(f->meta, 1, f->meta_len, fp);
    fputs("</moelab:figure></metadata>", fp);
    fwrite(svg + head, 1, n - head, fp);
    free(svg);
    if (ferror(fp) | (fclose(fp) != 0)) return ml_fail(ML_ERR_IO, "%s: write failed: %s", path, strerror(errno));
    return ML_OK;
}

/* The image surface as 8-bit RGB (opaque: the page is painted white first) with pHYs = 300 dpi. */
static ml_status write_png(cairo_surface_t *s, const char *path) {
    cairo_surface_flush(s);
    const int w = cairo_image_surface_get_width(s), h = cairo_image_surface_get_height(s);
    const int stride = cairo_image_surface_get_stride(s);
    const unsigned char *data = cairo_image_surface_get_data(s);
    FILE *fp = fopen(path, "wb");
    if (!fp) return ml_fail(ML_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, NULL, NULL, NULL);
    png_infop info = png ? png_create_info_struct(png) : NULL;
    unsigned char *row = malloc((size_t)w * 3);
    if (!png || !info || !row) {
        png_destroy_write_struct(&png, &info);
        free(row);
        fclose(fp);
        return ml_fail(ML_ERR_NOMEM, "out of memory writing %s", path);
    }
    if (setjmp(png_jmpbuf(png))) {
        png_destroy_write_struct(&png, &info);
        free(row);
        fclose(fp);
        return ml_fail(ML_ERR_IO, "%s: libpng failed writing", path);
    }
    png_init_io(png, fp);
    png_set_IHDR(png, info, (png_uint_32)w, (png_uint_32)h, 8, PNG_COLOR_TYPE_RGB, PNG_INTERLACE_NONE,
                 PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
    const png_uint_32 ppm = (png_uint_32)lround(FIG_DPI / 0.0254);
    png_set_pHYs(png, info, ppm, ppm, PNG_RESOLUTION_METER);
    png_write_info(png, info);
    for (int y = 0; y < h; y++) {
        const uint32_t *src = (const uint32_t *)(data + (size_t)y * stride);
        for (int x = 0; x < w; x++) { /* ARGB32 premultiplied, alpha 255 everywhere */
            row[3 * x] = (unsigned char)(src[x] >> 16);
            row[3 * x + 1] = (unsigned char)(src[x] >> 8);
            row[3 * x + 2] = (unsigned char)src[x];
        }
        png_write_row(png, row);
    }
    png_write_end(png, info);
    png_destroy_write_struct(&png, &info);
    free(row);
    if (fclose(fp) != 0) return ml_fail(ML_ERR_IO, "%s: write failed: %s", path, strerror(errno));
    return ML_OK;
}

ml_status fig_close(Fig *f) {
    if (!f) return ML_OK;
    ml_status st = ML_OK;
    if (cairo_status(f->cr) != CAIRO_STATUS_SUCCESS)
        st = ml_fail(ML_ERR_IO, "%s: drawing failed: %s", f->path, cairo_status_to_string(cairo_status(f->cr)));
    cairo_destroy(f->cr);
    if (f->fmt == FIG_PNG) {
        if (st == ML_OK) st = write_png(f->s, f->tmp);
    } else {
        cairo_surface_finish(f->s);
        if (st == ML_OK && cairo_surface_status(f->s) != CAIRO_STATUS_SUCCESS)
            st =
                ml_fail(ML_ERR_IO, "%s: cannot write: %s", f->path, cairo_status_to_string(cairo_surface_status(f->s)));
    }
    cairo_surface_destroy(f->s);
    if (st == ML_OK && f->fmt == FIG_SVG) st = svg_add_meta(f, f->tmp);
    free(f->meta);
    if (st == ML_OK && rename(f->tmp, f->path) != 0)
        st = ml_fail(ML_ERR_IO, "%s: cannot rename from %s: %s", f->path, f->tmp, strerror(errno));
    if (st != ML_OK) remove(f->tmp);
    free(f);
    return st;
}

// ---------------------------------------------------------------------------------------------
// text

static void set_font(Fig *f, double size, int bold) {
    cairo_select_font_face(f->cr, FONT, CAIRO_FONT_SLANT_NORMAL,
                           bold ? CAIRO_FONT_WEIGHT_BOLD : CAIRO_FONT_WEIGHT_NORMAL);
    cairo_set_font_size(f->cr, size);
}

double fig_text_width(Fig *f, double size, const char *s) {
    set_font(f, size, 0);
    cairo_text_extents_t e;
    cairo_text_extents(f->cr, s, &e);
    return e.x_advance;
}

void fig_text(Fig *f, double x, double y, double size, double ax, double ay, int bold, const char *s) {
    set_font(f, size, bold);
    cairo_text_extents_t e;
    cairo_text_extents(f->cr, s, &e);
    const double cap = 0.73 * size; /* cap height of DejaVu Sans */
    cairo_set_source_rgb(f->cr, 0, 0, 0);
    cairo_move_to(f->cr, x - ax * e.x_advance, y + (1 - ay) * cap);
    cairo_show_text(f->cr, s);
    cairo_new_path(f->cr);
    meta_text(f, s);
}

void fig_text_vertical(Fig *f, double x, double y, double size, const char *s) {
    set_font(f, size, 0);
    cairo_text_extents_t e;
    cairo_text_extents(f->cr, s, &e);
    cairo_save(f->cr);
    cairo_translate(f->cr, x, y);
    cairo_rotate(f->cr, -M_PI / 2);
    cairo_set_source_rgb(f->cr, 0, 0, 0);
    cairo_move_to(f->cr, -e.x_advance / 2, 0.73 * size / 2);
    cairo_show_text(f->cr, s);
    cairo_new_path(f->cr);
    cairo_restore(f->cr);
    meta_text(f, s);
}

// ---------------------------------------------------------------------------------------------
// titles: never clipped, never over a neighbour's

#define TITLE_MIN_FRAC 0.8 /* a title shrinks to 80% of its size before it wraps */

static double ink_width(Fig *f, double size, int bold, const char *s, double *x0) {
    set_font(f, size, bold);
    cairo_text_extents_t e;
    cairo_text_extents(f->cr, s, &e);
    if (x0) *x0 = e.x_bearing;
    return fmax(e.x_advance, e.x_bearing + e.width);
}

/* s cut to fit maxw at size, ending in an ellipsis */
static void ellipsize(Fig *f, double size, int bold, const char *s, double maxw, char *out, size_t n) {
    snprintf(out, n, "%s", s);
    size_t len = strlen(out);
    while (len > 0 && ink_width(f, size, bold, out, NULL) > maxw) {
        do len--; /* whole UTF-8 characters */
        while (len > 0 && ((unsigned char)s[len] & 0xC0) == 0x80);
        snprintf(out, n, "%.*s\u2026", (int)len, s);
    }
}

/* The layout of a title in width w: its size and one or two lines. */
typedef struct {
    double size;
    int nlines;
    char line[2][320];
} TitleFit;

static void title_fit(Fig *f, double w, double size, const char *title, TitleFit *t) {
    memset(t, 0, sizeof *t);
    t->nlines = 1;
    t->size = size;
    while (ink_width(f, t->size, 1, title, NULL) > w && t->size > TITLE_MIN_FRAC * size + 1e-9) t->size -= 0.25;
    if (ink_width(f, t->size, 1, title, NULL) <= w) {
        snprintf(t->line[0], sizeof t->line[0], "%s", title);
        return;
    }
    /* two lines, broken at the space (or after the ": ", ", ") nearest the middle that fits */
    const size_t len = strlen(title);
    size_t best = 0;
    double bestd = 1e300;
    for (size_t i = 1; i + 1 < len; i++) {
        if (title[i] != ' ') continue;
        char a[320];
        snprintf(a, sizeof a, "%.*s", (int)i, title);
        const double wa = ink_width(f, t->size, 1, a, NULL), wb = ink_width(f, t->size, 1, title + i + 1, NULL);
        const double d = fabs(wa - wb) + (wa > w || wb > w ? 1e6 : 0) - (title[i - 1] == ':' ? 0.25 * w : 0);
        if (d < bestd) bestd = d, best = i;
    }
    if (!best) {
        ellipsize(f, t->size, 1, title, w, t->line[0], sizeof t->line[0]);
        return;
    }
    char a[320];
    snprintf(a, sizeof a, "%.*s", (int)best, title);
    t->nlines = 2;
    ellipsize(f, t->size, 1, a, w, t->line[0], sizeof t->line[0]);
    ellipsize(f, t->size, 1, title + best + 1, w, t->line[1], sizeof t->line[1]);
}

static double title_height(const TitleFit *t) { return t->nlines * (t->size + 2); }

/* Draws a fitted title centred in [x, x + w] from y down and records its lines for the check. */
static void title_draw(Fig *f, double x, double y, double w, const TitleFit *t) {
    for (int l = 0; l < t->nlines; l++) {
        const double ly = y + l * (t->size + 2);
        set_font(f, t->size, 1);
        cairo_text_extents_t e; /* one measurement: the advance centres it, the ink is checked */
        cairo_text_extents(f->cr, t->line[l], &e);
        const double x0 = e.x_bearing, iw = fmax(e.x_advance, e.x_bearing + e.width);
        const double left = x + w / 2 - e.x_advance / 2;
        f->role = "title";
        fig_text(f, x + w / 2, ly, t->size, 0.5, 0, 1, t->line[l]);
        f->role = "text";
        /* the ink of the line, and the box it had to stay in */
        const double bx0 = left + fmin(0, x0), bx1 = left + iw;
        g_title_lines++;
        int bad = bx0 < x - 0.5 || bx1 > x + w + 0.5 || bx0 < -0.5 || bx1 > f->w + 0.5;
        for (int i = 0; i < f->ntitles && !bad; i++) {
            const double *b = f->tbox[i];
            if (bx0 < b[2] && bx1 > b[0] && ly < b[3] && ly + t->size > b[1]) bad = 2;
        }
        if (bad) {
            g_title_bad++;
            snprintf(g_title_worst, sizeof g_title_worst, "'%.120s' %s [%.1f, %.1f] (box [%.1f, %.1f])", t->line[l],
                     bad == 2 ? "overlaps another title at" : "outside its box:", bx0, bx1, x, x + w);
        }
        if (f->ntitles < FIG_MAX_TITLES) {
            double *b = f->tbox[f->ntitles];
            b[0] = bx0, b[1] = ly, b[2] = bx1, b[3] = ly + t->size;
            snprintf(f->ttext[f->ntitles], sizeof f->ttext[0], "%s", t->line[l]);
            f->ntitles++;
        }
    }
}

double fig_title(Fig *f, double x, double y, double w, double size, const char *title) {
    if (!title || !*title) return 0;
    TitleFit t;
    title_fit(f, w, size, title, &t);
    title_draw(f, x, y, w, &t);
    return title_height(&t);
}

double fig_title_measure(double w, double size, const char *title) {
    if (!title || !*title) return 0;
    Fig f;
    memset(&f, 0, sizeof f);
    f.fmt = FIG_PNG;
    f.role = "text";
    f.s = cairo_image_surface_create(CAIRO_FORMAT_ARGB32, 1, 1);
    f.cr = cairo_create(f.s);
    TitleFit t;
    title_fit(&f, w, size, title, &t);
    cairo_destroy(f.cr);
    cairo_surface_destroy(f.s);
    return title_height(&t);
}

void fig_title_stats(int *lines, int *bad, char *worst, size_t n) {
    if (lines) *lines = g_title_lines;
    if (bad) *bad = g_title_bad;
    if (worst && n) snprintf(worst, n, "%s", g_title_worst);
}

void fig_title_stats_reset(void) {
    g_title_lines = g_title_bad = 0;
    g_title_worst[0] = 0;
}

// ---------------------------------------------------------------------------------------------
// panels

#define TICK_PT 6.5
#define LABEL_PT 7.5
#define TITLE_PT 8.0

static double axis_t(const Axis *a, double v) {
    if (a->log) {
        if (!(v > 0)) return NAN;
        return (log10(v) - log10(a->lo)) / (log10(a->hi) - log10(a->lo));
    }
    return (v - a->lo) / (a->hi - a->lo);
}

double fig_px(const FigPanel *p, double x) { return p->x + axis_t(&p->ax, x) * p->w; }
double fig_py(const FigPanel *p, double y) { return p->y + p->h - axis_t(&p->ay, y) * p->h; }

static void tick_label(char *buf, size_t n, const Axis *a, double v) {
    if (a->log) {
        snprintf(buf, n, "%g", v);
        return;
    }
    axis_format(buf, n, fabs(v) < 1e-12 * (fabs(a->step) + 1e-300) ? 0.0 : v, a->step);
}

void fig_panel(FigPanel *p, Fig *f, double x, double y, double w, double h, const Axis *ax, const Axis *ay,
               const char *title, const char *xlabel, const char *ylabel) {
    memset(p, 0, sizeof *p);
    p->f = f;
    p->ax = *ax;
    p->ay = *ay;
    p->cat_x = ax->step < 0;
    double yt[32];
    const int nyt = axis_ticks(ay, yt, 32);
    double lw = 0;
    char buf[64];
    for (int i = 0; i < nyt; i++) {
        tick_label(buf, sizeof buf, ay, yt[i]);
        const double tw = fig_text_width(f, TICK_PT, buf);
        if (tw > lw) lw = tw;
    }
    const double left = lw + 4 + (ylabel && *ylabel ? LABEL_PT + 4 : 0);
    /* the title fits the panel's whole width (shrunk, then wrapped), so neighbours never meet */
    TitleFit tf;
    if (title && *title) title_fit(f, w - 2, TITLE_PT, title, &tf);
    const double top = title && *title ? title_height(&tf) + 4 : 4;
    const double bottom = TICK_PT + 5 + (xlabel && *xlabel ? LABEL_PT + 4 : 0);
    p->x = x + left;
    p->y = y + top;
    p->w = w - left - 6;
    p->h = h - top - bottom;
    if (p->w < 10) p->w = 10;
    if (p->h < 10) p->h = 10;
    cairo_t *cr = f->cr;
    cairo_set_dash(cr, NULL, 0, 0);
    meta_box(f, "plot", p->x, p->y, p->w, p->h);
    if (title && *title) title_draw(f, x + 1, y + 1, w - 2, &tf);
    if (ylabel && *ylabel) fig_text_vertical(f, x + LABEL_PT / 2 + 1, p->y + p->h / 2, LABEL_PT, ylabel);
    if (xlabel && *xlabel) fig_text(f, p->x + p->w / 2, p->y + p->h + TICK_PT + 6, LABEL_PT, 0.5, 0, 0, xlabel);
    /* grid and ticks */
    cairo_set_line_width(cr, 0.4);
    for (int i = 0; i < nyt; i++) {
        const double py = fig_py(p, yt[i]);
        if (!(py >= p->y - 0.01 && py <= p->y + p->h + 0.01)) continue;
        cairo_set_source_rgb(cr, 0.88, 0.88, 0.88);
        cairo_move_to(cr, p->x, py);
        cairo_line_to(cr, p->x + p->w, py);
        cairo_stroke(cr);
        cairo_set_source_rgb(cr, 0, 0, 0);
        cairo_move_to(cr, p->x - 2.5, py);
        cairo_line_to(cr, p->x, py);
        cairo_stroke(cr);
        tick_label(buf, sizeof buf, ay, yt[i]);
        fig_text(f, p->x - 3.5, py, TICK_PT, 1, 0.5, 0, buf);
    }
    if (!p->cat_x) {
        double xt[32];
        const int nxt = axis_ticks(ax, xt, 32);
        for (int i = 0; i < nxt; i++) {
            const double px = fig_px(p, xt[i]);
            if (!(px >= p->x - 0.01 && px <= p->x + p->w + 0.01)) continue;
            cairo_set_source_rgb(cr, 0.88, 0.88, 0.88);
            cairo_move_to(cr, px, p->y);
            cairo_line_to(cr, px, p->y + p->h);
            cairo_stroke(cr);
            cairo_set_source_rgb(cr, 0, 0, 0);
            cairo_move_to(cr, px, p->y + p->h);
            cairo_line_to(cr, px, p->y + p->h + 2.5);
            cairo_stroke(cr);
            tick_label(buf, sizeof buf, ax, xt[i]);
            fig_text(f, px, p->y + p->h + 3.5, TICK_PT, 0.5, 0, 0, buf);
        }
    }
    cairo_set_source_rgb(cr, 0, 0, 0);
    cairo_set_line_width(cr, 0.6);
    cairo_rectangle(cr, p->x, p->y, p->w, p->h);
    cairo_stroke(cr);
}

void fig_panel_xlabels(FigPanel *p, const char *const *labels, int n) {
    Fig *f = p->f;
    double maxw = 0;
    for (int i = 0; i < n; i++) maxw = fmax(maxw, fig_text_width(f, TICK_PT, labels[i]));
    const int rotate = n > 0 && maxw > 0.9 * p->w / n;
    cairo_t *cr = f->cr;
    for (int i = 0; i < n; i++) {
        const double px = fig_px(p, i);
        cairo_set_source_rgb(cr, 0, 0, 0);
        cairo_set_line_width(cr, 0.4);
        cairo_move_to(cr, px, p->y + p->h);
        cairo_line_to(cr, px, p->y + p->h + 2.5);
        cairo_stroke(cr);
        if (!rotate) {
            fig_text(f, px, p->y + p->h + 3.5, TICK_PT, 0.5, 0, 0, labels[i]);
        } else {
            set_font(f, TICK_PT, 0);
            cairo_text_extents_t e;
            cairo_text_extents(cr, labels[i], &e);
            cairo_save(cr);
            cairo_translate(cr, px + 0.36 * TICK_PT, p->y + p->h + 3.5);
            cairo_rotate(cr, -M_PI / 4);
            cairo_move_to(cr, -e.x_advance, 0);
            cairo_show_text(cr, labels[i]);
            cairo_new_path(cr);
            cairo_restore(cr);
        }
    }
}

static void set_style(cairo_t *cr, const FigStyle *s) {
    const double a = s->alpha > 0 ? s->alpha : 1;
    cairo_set_source_rgba(cr, s->color.r, s->color.g, s->color.b, a);
    cairo_set_line_width(cr, s->width > 0 ? s->width : 1);
    double d[4];
    const int nd = fig_dash(s->dash, d);
    if (nd) {
        const double lw = s->width > 0 ? s->width : 1;
        for (int i = 0; i < nd; i++) d[i] *= fmax(1.0, lw);
    }
    cairo_set_dash(cr, d, nd, 0);
}

static void clip_panel(FigPanel *p) {
    cairo_save(p->f->cr);
    cairo_rectangle(p->f->cr, p->x, p->y, p->w, p->h);
    cairo_clip(p->f->cr);
}

void fig_marker(Fig *f, double x, double y, const FigStyle *s) {
    if (s->marker == FIG_MK_NONE || !isfinite(x) || !isfinite(y)) return;
    cairo_t *cr = f->cr;
    const double r = (s->msize > 0 ? s->msize : 3.5) / 2;
    cairo_save(cr);
    cairo_set_dash(cr, NULL, 0, 0);
    cairo_set_line_width(cr, 0.7);
    cairo_new_path(cr);
    int open_path = 0; /* + and x are strokes only */
    switch (s->marker) {
    case FIG_MK_CIRCLE: cairo_arc(cr, x, y, r, 0, 2 * M_PI); break;
    case FIG_MK_SQUARE: cairo_rectangle(cr, x - 0.85 * r, y - 0.85 * r, 1.7 * r, 1.7 * r); break;
    case FIG_MK_TRIANGLE:
        cairo_move_to(cr, x, y - 1.15 * r);
        cairo_line_to(cr, x + r, y + 0.7 * r);
        cairo_line_to(cr, x - r, y + 0.7 * r);
        cairo_close_path(cr);
        break;
    case FIG_MK_TRIANGLE_DOWN:
        cairo_move_to(cr, x, y + 1.15 * r);
        cairo_line_to(cr, x + r, y - 0.7 * r);
        cairo_line_to(cr, x - r, y - 0.7 * r);
        cairo_close_path(cr);
        break;
    case FIG_MK_DIAMOND:
        cairo_move_to(cr, x, y - 1.2 * r);
        cairo_line_to(cr, x + 0.85 * r, y);
        cairo_line_to(cr, x, y + 1.2 * r);
        cairo_line_to(cr, x - 0.85 * r, y);
        cairo_close_path(cr);
        break;
    case FIG_MK_PLUS:
        cairo_move_to(cr, x - 1.1 * r, y);
        cairo_line_to(cr, x + 1.1 * r, y);
        cairo_move_to(cr, x, y - 1.1 * r);
        cairo_line_to(cr, x, y + 1.1 * r);
        open_path = 1;
        break;
    case FIG_MK_CROSS:
        cairo_move_to(cr, x - 0.9 * r, y - 0.9 * r);
        cairo_line_to(cr, x + 0.9 * r, y + 0.9 * r);
        cairo_move_to(cr, x + 0.9 * r, y - 0.9 * r);
        cairo_line_to(cr, x - 0.9 * r, y + 0.9 * r);
        open_path = 1;
        break;
    case FIG_MK_STAR:
        for (int i = 0; i < 10; i++) {
            const double a = -M_PI / 2 + i * M_PI / 5, rr = i % 2 ? 0.5 * r : 1.25 * r;
            if (i == 0) cairo_move_to(cr, x + rr * cos(a), y + rr * sin(a));
            else cairo_line_to(cr, x + rr * cos(a), y + rr * sin(a));
        }
        cairo_close_path(cr);
        break;
    default: break;
    }
    if (open_path) {
        cairo_set_line_width(cr, 1.0);
        cairo_set_source_rgb(cr, s->color.r, s->color.g, s->color.b);
        cairo_stroke(cr);
    } else {
        if (s->mfill) cairo_set_source_rgb(cr, s->color.r, s->color.g, s->color.b);
        else cairo_set_source_rgb(cr, 1, 1, 1);
        cairo_fill_preserve(cr);
        cairo_set_source_rgb(cr, s->mfill ? 0.15 * s->color.r : s->color.r, s->mfill ? 0.15 * s->color.g : s->color.g,
                             s->mfill ? 0.15 * s->color.b : s->color.b);
        if (s->mfill) cairo_set_line_width(cr, 0.35);
        cairo_stroke(cr);
    }
    cairo_restore(cr);
}

void fig_line(FigPanel *p, const double *x, const double *y, int n, const FigStyle *s, int mark_every) {
    cairo_t *cr = p->f->cr;
    clip_panel(p);
    if (s->width > 0) {
        set_style(cr, s);
        int pen = 0;
        for (int i = 0; i < n; i++) {
            const double px = fig_px(p, x[i]), py = fig_py(p, y[i]);
            if (!isfinite(px) || !isfinite(py)) {
                pen = 0;
                continue;
            }
            if (pen) cairo_line_to(cr, px, py);
            else cairo_move_to(cr, px, py);
            pen = 1;
        }
        cairo_stroke(cr);
    }
    cairo_restore(cr);
    if (mark_every > 0 && s->marker != FIG_MK_NONE)
        for (int i = 0; i < n; i += mark_every) {
            const double px = fig_px(p, x[i]), py = fig_py(p, y[i]);
            if (px >= p->x - 0.5 && px <= p->x + p->w + 0.5 && py >= p->y - 0.5 && py <= p->y + p->h + 0.5)
                fig_marker(p->f, px, py, s);
        }
}

void fig_points(FigPanel *p, const double *x, const double *y, int n, const FigStyle *s) {
    for (int i = 0; i < n; i++) {
        const double px = fig_px(p, x[i]), py = fig_py(p, y[i]);
        if (px >= p->x - 0.5 && px <= p->x + p->w + 0.5 && py >= p->y - 0.5 && py <= p->y + p->h + 0.5)
            fig_marker(p->f, px, py, s);
    }
}

void fig_errbar(FigPanel *p, double x, double y, double lo, double hi, const FigStyle *s) {
    cairo_t *cr = p->f->cr;
    const double px = fig_px(p, x);
    if (!isfinite(px)) return;
    clip_panel(p);
    FigStyle ls = *s;
    ls.dash = 0;
    set_style(cr, &ls);
    if (isfinite(lo) && isfinite(hi)) {
        const double a = fig_py(p, lo), b = fig_py(p, hi), c = 2.0;
        cairo_move_to(cr, px, a);
        cairo_line_to(cr, px, b);
        cairo_move_to(cr, px - c, a);
        cairo_line_to(cr, px + c, a);
        cairo_move_to(cr, px - c, b);
        cairo_line_to(cr, px + c, b);
        cairo_stroke(cr);
    }
    cairo_restore(cr);
    const double py = fig_py(p, y);
    if (isfinite(py)) fig_marker(p->f, px, py, s);
}

void fig_hline(FigPanel *p, double y, const FigStyle *s) {
    const double py = fig_py(p, y);
    if (!isfinite(py)) return;
    clip_panel(p);
    set_style(p->f->cr, s);
    cairo_move_to(p->f->cr, p->x, py);
    cairo_line_to(p->f->cr, p->x + p->w, py);
    cairo_stroke(p->f->cr);
    cairo_restore(p->f->cr);
}

void fig_vspan(FigPanel *p, double x0, double x1, FigRGB c, double alpha) {
    double a = fig_px(p, x0), b = fig_px(p, x1);
    if (!isfinite(a) || !isfinite(b)) return;
    if (b < a) {
        const double t = a;
        a = b;
        b = t;
    }
    if (b - a < 0.8) {
        const double m = (a + b) / 2;
        a = m - 0.4;
        b = m + 0.4;
    }
    clip_panel(p);
    cairo_set_source_rgba(p->f->cr, c.r, c.g, c.b, alpha > 0 ? alpha : 1);
    cairo_rectangle(p->f->cr, a, p->y, b - a, p->h);
    cairo_fill(p->f->cr);
    cairo_restore(p->f->cr);
}

void fig_vline(FigPanel *p, double x, const FigStyle *s) {
    const double px = fig_px(p, x);
    if (!isfinite(px)) return;
    clip_panel(p);
    set_style(p->f->cr, s);
    cairo_move_to(p->f->cr, px, p->y);
    cairo_line_to(p->f->cr, px, p->y + p->h);
    cairo_stroke(p->f->cr);
    cairo_restore(p->f->cr);
}

void fig_legend(FigPanel *p, const FigStyle *styles, const char *const *labels, int n, int corner, int ncol) {
    if (n <= 0) return;
    Fig *f = p->f;
    cairo_t *cr = f->cr;
    if (ncol < 1) ncol = 1;
    const int nrow = (n + ncol - 1) / ncol;
    const double sz = 6.5, sample = 14, row_h = sz + 3.5, pad = 3;
    double colw = 0;
    for (int i = 0; i < n; i++) colw = fmax(colw, fig_text_width(f, sz, labels[i]));
    colw += sample + 4 + 5;
    const double bw = ncol * colw + 2 * pad - 5, bh = nrow * row_h + 2 * pad - 1;
    const double bx = corner % 2 == 0 ? p->x + p->w - bw - 3 : p->x + 3;
    const double by = corner < 2 ? p->y + 3 : p->y + p->h - bh - 3;
    cairo_save(cr);
    cairo_set_dash(cr, NULL, 0, 0);
    cairo_set_source_rgba(cr, 1, 1, 1, 0.88);
    cairo_rectangle(cr, bx, by, bw, bh);
    cairo_fill_preserve(cr);
    cairo_set_source_rgb(cr, 0.6, 0.6, 0.6);
    cairo_set_line_width(cr, 0.4);
    cairo_stroke(cr);
    meta_box(f, "legend", bx, by, bw, bh);
    for (int i = 0; i < n; i++) {
        const int col = i / nrow, row = i % nrow;
        const double x0 = bx + pad + col * colw, yc = by + pad + row * row_h + row_h / 2;
        const FigStyle *s = &styles[i];
        if (s->width > 0) {
            set_style(cr, s);
            cairo_move_to(cr, x0, yc);
            cairo_line_to(cr, x0 + sample, yc);
            cairo_stroke(cr);
        }
        fig_marker(f, x0 + sample / 2, yc, s);
        f->role = "legend";
        fig_text(f, x0 + sample + 3, yc, sz, 0, 0.5, 0, labels[i]);
        f->role = "text";
    }
    cairo_restore(cr);
}

// ---------------------------------------------------------------------------------------------
// heatmap and colour bar

static double heat_t(double v, double vmin, double vmax) {
    if (isnan(v)) return NAN;
    return vmax > vmin ? (v - vmin) / (vmax - vmin) : (v > vmin ? 1.0 : 0.0);
}

void fig_heatmap(Fig *f, double x, double y, double w, double h, const double *v, int rows, int cols, double vmin,
                 double vmax, const char *const *row_labels, const char *const *col_labels, double label_size) {
    if (rows <= 0 || cols <= 0) return;
    cairo_t *cr = f->cr;
    const double cw = w / cols, ch = h / rows;
    cairo_save(cr);
    cairo_set_antialias(cr, CAIRO_ANTIALIAS_NONE); /* no seams between cells */
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < cols; c++) {
            const FigRGB col = fig_viridis_rgb(heat_t(v[(size_t)r * cols + c], vmin, vmax));
            cairo_set_source_rgb(cr, col.r, col.g, col.b);
            /* each cell overlaps the next by a hair so the page never shows a gap */
            cairo_rectangle(cr, x + c * cw, y + r * ch, cw + (c + 1 < cols ? 0.3 : 0), ch + (r + 1 < rows ? 0.3 : 0));
            cairo_fill(cr);
        }
    cairo_restore(cr);
    cairo_set_source_rgb(cr, 0, 0, 0);
    cairo_set_line_width(cr, 0.5);
    cairo_rectangle(cr, x, y, w, h);
    cairo_stroke(cr);
    if (row_labels)
        for (int r = 0; r < rows; r++) fig_text(f, x - 2.5, y + (r + 0.5) * ch, label_size, 1, 0.5, 0, row_labels[r]);
    if (col_labels)
        for (int c = 0; c < cols; c++)
            fig_text(f, x + (c + 0.5) * cw, y + h + 2.5, label_size, 0.5, 0, 0, col_labels[c]);
}

void fig_heatmap_values(Fig *f, double x, double y, double w, double h, const double *v, int rows, int cols,
                        double vmin, double vmax, const char *fmt, double size) {
    const double cw = w / cols, ch = h / rows;
    char buf[32];
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < cols; c++) {
            const double val = v[(size_t)r * cols + c];
            if (!isfinite(val)) continue;
            const FigRGB col = fig_viridis_rgb(heat_t(val, vmin, vmax));
            const double lum = 0.2126 * col.r + 0.7152 * col.g + 0.0722 * col.b;
            snprintf(buf, sizeof buf, fmt, val);
            set_font(f, size, 0);
            cairo_text_extents_t e;
            cairo_text_extents(f->cr, buf, &e);
            if (lum < 0.45) cairo_set_source_rgb(f->cr, 1, 1, 1);
            else cairo_set_source_rgb(f->cr, 0, 0, 0);
            cairo_move_to(f->cr, x + (c + 0.5) * cw - e.x_advance / 2, y + (r + 0.5) * ch + 0.36 * size);
            cairo_show_text(f->cr, buf);
            cairo_new_path(f->cr);
        }
}

void fig_colorbar(Fig *f, double x, double y, double w, double h, double vmin, double vmax, const char *label) {
    cairo_t *cr = f->cr;
    cairo_pattern_t *g = cairo_pattern_create_linear(0, y + h, 0, y);
    for (int i = 0; i <= 10; i++) {
        const FigRGB c = fig_viridis_rgb(i / 10.0);
        cairo_pattern_add_color_stop_rgb(g, i / 10.0, c.r, c.g, c.b);
    }
    cairo_rectangle(cr, x, y, w, h);
    cairo_set_source(cr, g);
    cairo_fill(cr);
    cairo_pattern_destroy(g);
    cairo_set_source_rgb(cr, 0, 0, 0);
    cairo_set_line_width(cr, 0.5);
    cairo_rectangle(cr, x, y, w, h);
    cairo_stroke(cr);
    Axis a;
    axis_fixed(&a, vmin, vmax > vmin ? vmax : vmin + 1, 5);
    double t[16];
    const int nt = axis_ticks(&a, t, 16);
    double tw = 0;
    char buf[64];
    for (int i = 0; i < nt; i++) {
        const double py = y + h - (t[i] - a.lo) / (a.hi - a.lo) * h;
        cairo_set_source_rgb(cr, 0, 0, 0);
        cairo_set_line_width(cr, 0.4);
        cairo_move_to(cr, x + w, py);
        cairo_line_to(cr, x + w + 2, py);
        cairo_stroke(cr);
        axis_format(buf, sizeof buf, t[i], a.step);
        fig_text(f, x + w + 3, py, TICK_PT, 0, 0.5, 0, buf);
        tw = fmax(tw, fig_text_width(f, TICK_PT, buf));
    }
    if (label && *label) fig_text_vertical(f, x + w + 5 + tw + LABEL_PT / 2, y + h / 2, LABEL_PT, label);
}
