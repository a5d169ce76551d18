/* view_tsne.c — a t-SNE map of an evaluation's saved test features as a terminal scatter plot:
 * each cell shows the symbol of the category with the most points in it (scatter_grid), coloured
 * by the theme's categorical palette, so it reads without colour too. `c` toggles the colouring
 * between the first-choice expert and the class. A legend on the right lists the categories with
 * their point counts. The embedding itself is computed by the caller (core/tsne.c, off the UI
 * thread) and handed over with view_tsne_set. */
#include "view.h"
#include "draw.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    float *Y; /* (n, 2) */
    int *expert, *label;
    int n;
    int epoch;
    int by_class;   /* 0: colour by expert, 1: by class */
    char msg[256];  /* shown instead of the plot when non-empty (computing, error) */
    char info[160]; /* a line under the title (agreement figures) */
    int *cell, *count;
    int cell_cap;
} TsneView;

static void tsne_free(View *v) {
    TsneView *s = v->self;
    if (!s) return;
    free(s->Y);
    free(s->expert);
    free(s->label);
    free(s->cell);
    free(s->count);
    free(s);
}

static int tsne_init(View *v) {
    TsneView *s = calloc(1, sizeof *s);
    if (!s) return -1;
    snprintf(s->msg, sizeof s->msg, "no t-SNE yet");
    v->self = s;
    return 0;
}

void view_tsne_set(View *v, const float *Y, const int *expert, const int *label, int n, int epoch, const char *msg,
                   const char *info) {
    TsneView *s = v->self;
    snprintf(s->msg, sizeof s->msg, "%s", msg ? msg : "");
    snprintf(s->info, sizeof s->info, "%s", info ? info : "");
    s->epoch = epoch;
    if (!Y || n <= 0) return; /* a message only: keep the last embedding for when it clears */
    float *y2 = malloc(sizeof *y2 * 2 * (size_t)n);
    int *e2 = malloc(sizeof *e2 * (size_t)n), *l2 = malloc(sizeof *l2 * (size_t)n);
    if (!y2 || !e2 || !l2) {
        free(y2);
        free(e2);
        free(l2);
        snprintf(s->msg, sizeof s->msg, "out of memory");
        return;
    }
    memcpy(y2, Y, sizeof *y2 * 2 * (size_t)n);
    memcpy(e2, expert, sizeof *e2 * (size_t)n);
    memcpy(l2, label, sizeof *l2 * (size_t)n);
    free(s->Y);
    free(s->expert);
    free(s->label);
    s->Y = y2;
    s->expert = e2;
    s->label = l2;
    s->n = n;
}

int view_tsne_by_class(const View *v) { return ((const TsneView *)v->self)->by_class; }

static int tsne_key(View *v, int key) {
    TsneView *s = v->self;
    if (key == 'c') {
        s->by_class = !s->by_class;
        return 1;
    }
    return 0;
}

static void tsne_title(const View *v, char *buf, size_t n) {
    const TsneView *s = v->self;
    snprintf(buf, n, "t-SNE of test features, epoch %d: colour = %s (c: %s)", s->epoch,
             s->by_class ? "class" : "first-choice expert", s->by_class ? "expert" : "class");
}

static void tsne_draw(View *v, WINDOW *w, Rect r) {
    TsneView *s = v->self;
    const ViewCtx *c = v->ctx;
    const Theme *t = c->theme;
    int y0 = r.y;
    if (s->info[0]) { /* segments separated by '\n', the later dropped first */
        char tmp[sizeof s->info];
        snprintf(tmp, sizeof tmp, "%s", s->info);
        DrawSeg seg[8];
        int n = 0;
        for (char *p = tmp; p && n < 8; n++) {
            char *nl = strchr(p, '\n');
            if (nl) *nl++ = '\0';
            seg[n].text = p;
            p = nl;
        }
        for (int i = 0; i < n; i++) seg[i].keep = n - i;
        draw_segs(w, y0, r.x, r.w, t->role[TH_DIM], seg, n);
        y0++;
    }
    if (s->msg[0] || !s->Y) { /* computing, or an error: the message alone */
        draw_wrapped(w, r.y + r.h / 2, r.x + 2, r.w - 4, 3, s->msg[0] ? t->role[TH_WARN] : t->role[TH_DIM],
                     s->msg[0] ? s->msg : "no t-SNE yet");
        return;
    }
    const int ncat = s->by_class ? c->classes : c->E;
    const int *cat = s->by_class ? s->label : s->expert;
    /* legend width: symbol, space, name, count */
    int lw = 0;
    for (int k = 0; k < ncat && k < 64; k++) {
        const int l = s->by_class && c->class_names && c->class_names[k] ? utf8_cells(c->class_names[k]) : 4;
        if (l > lw) lw = l;
    }
    lw += 9;
    if (lw > 24) lw = 24;
    if (lw > r.w / 3) lw = r.w / 3;
    const int pw = r.w - lw - 1, ph = r.h - (y0 - r.y);
    if (pw < 8 || ph < 3) return;
    const size_t cells = (size_t)pw * ph;
    if ((size_t)s->cell_cap < cells) {
        int *nc = realloc(s->cell, sizeof *nc * cells), *nn = nc ? realloc(s->count, sizeof *nn * cells) : NULL;
        if (nc) s->cell = nc;
        if (!nc || !nn) return;
        s->count = nn;
        s->cell_cap = (int)cells;
    }
    if (scatter_grid(s->Y, s->Y + 1, 2, s->n, cat, ncat, pw, ph, s->cell, s->count) < 0) return;
    for (int yy = 0; yy < ph; yy++)
        for (int xx = 0; xx < pw; xx++) {
            const int k = s->cell[yy * pw + xx];
            if (k < 0) continue;
            char sym[2] = {scatter_symbol(k), 0};
            const attr_t a = t->ncat ? theme_cat(t, k) | (s->count[yy * pw + xx] > 2 ? A_BOLD : 0) : A_NORMAL;
            draw_text(w, y0 + yy, r.x + xx, 1, a, sym);
        }
    /* legend: counts per category */
    const int lx = r.x + pw + 1;
    int *tot = calloc((size_t)(ncat > 0 ? ncat : 1), sizeof *tot);
    if (!tot) return;
    for (int i = 0; i < s->n; i++)
        if (cat[i] >= 0 && cat[i] < ncat) tot[cat[i]]++;
    int row = 0;
    for (int k = 0; k < ncat && row < ph; k++) {
        if (!tot[k] && ncat > ph) continue; /* many classes: list only those present */
        char name[64], line[96];
        if (s->by_class && c->class_names && c->class_names[k]) snprintf(name, sizeof name, "%s", c->class_names[k]);
        else snprintf(name, sizeof name, "%s%d", s->by_class ? "c" : "e", k);
        snprintf(line, sizeof line, "%c %s", scatter_symbol(k), name);
        draw_text(w, y0 + row, lx, lw - 5, t->ncat ? theme_cat(t, k) | A_BOLD : A_BOLD, line);
        draw_textf(w, y0 + row, lx + lw - 5, 5, t->role[TH_DIM], "%5d", tot[k]);
        row++;
    }
    free(tot);
}

const ViewClass view_tsne_class = {
    .name = "t-SNE",
    .init = tsne_init,
    .free = tsne_free,
    .draw = tsne_draw,
    .on_key = tsne_key,
    .title = tsne_title,
};
