/* view_status.c — the two-row status bar: run description (dataset, model, session) on the first
 * row; state badge, epoch/step with a progress bar, images/s, ETA and the latest numbers on the
 * second. Optional segments are dropped from the right when the terminal is narrow. */
#include "view.h"
#include "draw.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    char state[48];
    int state_role;
    char session[256];
    char note[160];
    long step;
    int epoch;
    double img_per_s, eta, elapsed;
    int have_status;
    float tau, lr;
    int have_step;
    double test_acc;
    int have_eval;
    int bar_x, bar_w, bar_y; /* the progress bar of the last draw, screen cells (bar_w 0: none) */
} StatusView;

int view_status_bar(const View *v, int *x, int *w, int *y) {
    const StatusView *s = v->self;
    if (!s || s->bar_w <= 0) return 0;
    *x = s->bar_x;
    *w = s->bar_w;
    *y = s->bar_y;
    return 1;
}

static int status_init(View *v) {
    StatusView *s = calloc(1, sizeof *s);
    if (!s) return -1;
    snprintf(s->state, sizeof s->state, "STARTING");
    s->state_role = TH_RUNNING;
    s->eta = -1;
    v->self = s;
    return 0;
}

static void status_free(View *v) { free(v->self); }

static void status_update(View *v, const ViewMsg *m) {
    StatusView *s = v->self;
    switch (m->kind) {
    case VIEW_MSG_STATUS: {
        const RunStatus *st = m->status;
        snprintf(s->state, sizeof s->state, "%s", st->state ? st->state : "");
        s->state_role = st->state_role;
        snprintf(s->session, sizeof s->session, "%s", st->session ? st->session : "");
        snprintf(s->note, sizeof s->note, "%s", st->note ? st->note : "");
        s->step = st->step;
        s->epoch = st->epoch;
        s->img_per_s = st->img_per_s;
        s->eta = st->eta;
        s->elapsed = st->elapsed;
        s->have_status = 1;
        break;
    }
    case VIEW_MSG_CURSOR:
        if (m->slot) break;
        if (m->step) {
            s->tau = m->step->tau;
            s->lr = m->step->lr;
            s->have_step = 1;
        }
        if (m->eval) {
            s->test_acc = m->eval->test_acc;
            s->have_eval = 1;
        }
        break;
    case VIEW_MSG_STEP:
        if (m->slot) break;
        s->tau = m->step->tau;
        s->lr = m->step->lr;
        s->have_step = 1;
        break;
    case VIEW_MSG_EVAL:
        if (m->slot) break;
        s->test_acc = m->eval->test_acc;
        s->have_eval = 1;
        break;
    default: break;
    }
}

/* Appends a segment when it fits in the remaining width; returns the new column. A segment that
 * does not fit sets *dropped (the row then ends in "…", so it says that it hides something). */
static int put_seg(WINDOW *w, int y, int x, int xmax, attr_t a, const char *text, int *dropped) {
    const int len = utf8_cells(text);
    if (x + len > xmax) {
        *dropped = 1;
        return x;
    }
    draw_text(w, y, x, len, a, text);
    return x + len;
}

static void status_draw(View *v, WINDOW *w, Rect r) {
    StatusView *s = v->self;
    const ViewCtx *c = v->ctx;
    const Theme *t = c->theme;
    const attr_t base = t->role[TH_STATUS];
    const char *sep = t->utf8 ? " \u2502 " : " | ";
    char buf[1024];

    // row 0: what is running. When the row is short, the dataset sizes go first, then the key
    // hint; then a long session folder keeps only its tail; the model goes last, shown as "…"
    // so that the row says something is hidden.
    draw_fill(w, r.y, r.x, r.w, base);
    const char *sess = s->session[0] ? s->session : "-";
    const char *keys = " ? help  q quit ";
    const int kl = (int)strlen(keys), sl0 = (int)strlen(sess);
    char sizes[64];
    snprintf(sizes, sizeof sizes, " (%d classes, %d/%d)", c->classes, c->n_train, c->n_test);
    int x = r.x, keys_shown = 0;
    for (int level = 0; level < 5; level++) {
        snprintf(buf, sizeof buf, " moelab%s%s%s%s%s%s%s%ssession ", sep, c->dataset, level < 1 ? sizes : "", sep,
                 level < 4 ? c->model : (t->utf8 ? "\u2026" : "~"), sep, c->head, sep); /* "…": the model is hidden */
        const int need = utf8_cells(buf) + (level < 3 ? sl0 : (sl0 < 16 ? sl0 : 16)) + (level < 2 ? kl : 0);
        if (need <= r.w || level == 4) {
            x = r.x + draw_text(w, r.y, r.x, r.w, base | A_BOLD, buf);
            keys_shown = level < 2;
            if (keys_shown) draw_text(w, r.y, r.x + r.w - kl, kl, base, keys);
            break;
        }
    }
    const int room = r.x + r.w - x - (keys_shown ? kl : 0);
    const int sl = (int)strlen(sess);
    if (sl > room && room > 4) {
        snprintf(buf, sizeof buf, "...%s", sess + sl - (room - 3));
        draw_text(w, r.y, x, room, base | A_BOLD, buf);
    } else {
        draw_text(w, r.y, x, room, base | A_BOLD, sess);
    }
    if (r.h < 2) return;

    // row 1: where it is; a dropped segment puts "…" in the last cell when that cell is free
    const int y = r.y + 1, xmax = r.x + r.w;
    int dropped = 0;
    draw_fill(w, y, r.x, r.w, A_NORMAL);
    x = r.x;
    snprintf(buf, sizeof buf, " %s ", s->state);
    x = put_seg(w, y, x, xmax, t->role[s->state_role] | (t->color ? 0 : A_REVERSE), buf, &dropped);
    const long total = c->total_steps > 0 ? c->total_steps : 1;
    const double frac = (double)s->step / total;
    if (c->browse) /* a saved session: the cursor's evaluation epoch and step */
        snprintf(buf, sizeof buf, " cursor: epoch %d/%d  step %ld/%ld ", s->epoch, c->epochs, s->step, c->total_steps);
    else
        snprintf(buf, sizeof buf, " epoch %d/%d  step %ld/%ld ", s->epoch < c->epochs ? s->epoch + 1 : c->epochs,
                 c->epochs, s->step, c->total_steps);
    x = put_seg(w, y, x, xmax, A_BOLD, buf, &dropped);
    char rate[32], eta[32], el[32];
    if (s->img_per_s > 0) snprintf(rate, sizeof rate, "%.0f img/s", s->img_per_s);
    else snprintf(rate, sizeof rate, "-- img/s");
    fmt_duration(eta, sizeof eta, s->eta);
    fmt_duration(el, sizeof el, s->elapsed);
    /* the note (attach's "attached", the browser's cursor, "q to exit") and the latest test
     * accuracy outrank the bar's width and the rate: on the live screen a narrow row (80 columns)
     * first drops img/s, then the bar, so that they stay; when both cannot, the accuracy stays
     * (the browser keeps its bar: it is the epoch scrubber) */
    char acc[48] = "", note[200] = "";
    if (s->have_eval) snprintf(acc, sizeof acc, "  test acc %.2f%%", 100.0 * s->test_acc);
    if (s->note[0]) snprintf(note, sizeof note, "  %s", s->note);
    int acc_len = utf8_cells(acc) + utf8_cells(note);
    if (acc[0] && note[0] && !c->browse) { /* both, without the bar and img/s? */
        char shortest[64];
        snprintf(shortest, sizeof shortest, " %4.1f%%  ETA %s", 100.0 * frac, eta);
        if (x + utf8_cells(shortest) + acc_len > xmax) note[0] = '\0', acc_len = utf8_cells(acc), dropped = 1;
    }
    /* fixed tail after the bar */
    char tail[128];
    if (c->browse) snprintf(tail, sizeof tail, " %4.1f%%", 100.0 * frac);
    else snprintf(tail, sizeof tail, " %4.1f%%  %s  ETA %s", 100.0 * frac, rate, eta);
    int tail_len = utf8_cells(tail);
    int bw = xmax - x - tail_len - 2 - 1 - acc_len;
    if (bw < 6 && acc_len && !c->browse) {
        snprintf(tail, sizeof tail, " %4.1f%%  ETA %s", 100.0 * frac, eta);
        tail_len = utf8_cells(tail);
        dropped = 1; /* img/s */
        bw = xmax - x - tail_len - 2 - 1 - acc_len;
        if (bw < 6) bw = 0; /* no bar: the percentage says where it is */
    } else if (bw < 6) bw = xmax - x - tail_len - 2 - 1; /* the browser: the bar before the accuracy */
    if (bw > 30) bw = 30;
    s->bar_w = 0;
    if (bw >= 6) {
        s->bar_x = getbegx(w) + x + 1;
        s->bar_y = getbegy(w) + y;
        s->bar_w = bw;
        char bar[128];
        bar_cells(bar, sizeof bar, frac, bw, t->utf8);
        x = put_seg(w, y, x, xmax, A_NORMAL, "[", &dropped);
        draw_text(w, y, x, bw, t->role[TH_BAR] | (t->color ? 0 : A_BOLD), bar);
        x += bw;
        x = put_seg(w, y, x, xmax, A_NORMAL, "]", &dropped);
    }
    x = put_seg(w, y, x, xmax, A_NORMAL, tail, &dropped);
    /* optional segments, in order of importance */
    if (note[0]) x = put_seg(w, y, x, xmax, t->role[TH_WARN], note, &dropped);
    if (acc[0]) x = put_seg(w, y, x, xmax, t->role[TH_ACC], acc, &dropped);
    if (s->have_step && c->has_moe) {
        snprintf(buf, sizeof buf, "  %s %.3g", t->utf8 ? "\u03c4" : "tau", (double)s->tau);
        x = put_seg(w, y, x, xmax, A_NORMAL, buf, &dropped);
    }
    if (s->have_step) {
        snprintf(buf, sizeof buf, "  lr %.3g", (double)s->lr);
        x = put_seg(w, y, x, xmax, A_NORMAL, buf, &dropped);
    }
    if (!c->browse) {
        snprintf(buf, sizeof buf, "  elapsed %s", el);
        x = put_seg(w, y, x, xmax, t->role[TH_DIM], buf, &dropped);
    }
    if (dropped && x < xmax) draw_text(w, y, xmax - 1, 1, t->role[TH_DIM], t->utf8 ? "\u2026" : "~");
}

const ViewClass view_status_class = {
    .name = "status",
    .init = status_init,
    .free = status_free,
    .update = status_update,
    .draw = status_draw,
};
