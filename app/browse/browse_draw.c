/* browse_draw.c — the browser's frames: the list screen (columns, the sweep summary) and
 * the session, comparison and multi-run screens with their hint line (see browse.c). UI thread only. */
#define _GNU_SOURCE
#include "app/browse/browse.h"
#include "app/browse/browse_internal.h"
#include "app/cli/app.h"
#include "app/live/history_feed.h"

#include <errno.h>
#include <float.h>
#include <jansson.h>
#include <langinfo.h>
#include <limits.h>
#include <locale.h>
#include <math.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/tsne.h"
#include "app/run/runsession.h" /* provides: sessions_root */
#include "sessions/sweep_h5.h"
#include "views/draw.h"
#include "views/panels.h"
#include "views/view.h"
#include "app/plot/plot.h"

// ---------------------------------------------------------------------------------------------
// list screen

/* Column widths for a screen width; name takes what is left. */
static void list_widths(int W, int *wd) {
    static const int fixed[BCOL_COUNT] = {0, 14, 9, 11, 8, 6, 6, 6, 11, 8, 16};
    int used = 2;
    for (int c = 1; c < BCOL_COUNT; c++) {
        wd[c] = fixed[c];
        used += fixed[c] + 1;
    }
    /* narrow terminals: drop created, then dataset, then schedule (80 columns keep the alarms) */
    static const int drop[3] = {BCOL_CREATED, BCOL_DATASET, BCOL_SCHED};
    for (int i = 0; i < 3; i++)
        if (W - used < 16) {
            used -= wd[drop[i]] + 1;
            wd[drop[i]] = 0;
        }
    wd[BCOL_NAME] = W - used > 8 ? W - used : 8;
}

static void draw_list(Browser *b, int W, int H) {
    const Theme *t = &b->theme;
    int wd[BCOL_COUNT];
    list_widths(W, wd);
    /* title bar */
    draw_fill(stdscr, 0, 0, W, t->role[TH_STATUS]);
    char buf[1200];
    int marked = 0, running = 0, damaged = 0;
    for (int i = 0; i < b->list.n; i++) {
        marked += b->list.e[i].marked;
        running += !strcmp(b->list.e[i].status, "running");
        damaged += !b->list.e[i].ok;
    }
    /* the columns that do not fit, named at the right end of the title bar (the header row is full) */
    char hid[160] = "";
    {
        size_t n = 0;
        int k = 0;
        for (int c = 0; c < BCOL_COUNT; c++)
            if (!wd[c]) n += (size_t)snprintf(hid + n, sizeof hid - n, "%s%s", k++ ? "," : "+", browse_col_name(c));
        if (k) snprintf(hid + n, sizeof hid - n, " %s", t->utf8 ? "\u25b8" : ">");
    }
    const int hw = hid[0] ? utf8_cells(hid) + 1 : 0;
    /* the title in segments, dropped whole (draw_segs) left of that note */
    char s0[600], s1[48], s2[300], s3[64], s4[64];
    snprintf(s0, sizeof s0, " moelab browse %s %s", t->utf8 ? "\u2502" : "|", b->root);
    snprintf(s1, sizeof s1, "  %d sessions", b->list.n);
    snprintf(s2, sizeof s2, "%s%s", b->filter[0] ? ", filter: " : "", b->filter);
    snprintf(s3, sizeof s3, "  (%d running, %d damaged)", running, damaged);
    if (marked >= 2) snprintf(s4, sizeof s4, ", marked: %d (c compares)", marked);
    else snprintf(s4, sizeof s4, "%s", marked == 1 ? ", marked: 1 (mark one more to compare)" : "");
    const DrawSeg ts[5] = {{s0, 9}, {s1, 6}, {s2, 7}, {s3, 3}, {s4, 8}};
    draw_segs(stdscr, 0, 0, W - hw, t->role[TH_STATUS] | A_BOLD, ts, 5);
    if (hid[0]) draw_text(stdscr, 0, W - hw > 0 ? W - hw : 0, hw, t->role[TH_STATUS] | A_BOLD, hid);
    /* header */
    int x = 2;
    for (int c = 0; c < BCOL_COUNT; c++) {
        if (!wd[c]) continue;
        snprintf(buf, sizeof buf, "%s%s", browse_col_name(c),
                 c == b->sort_col ? (b->sort_rev ? (t->utf8 ? "\u25bc" : "v") : (t->utf8 ? "\u25b2" : "^")) : "");
        const int right = c == BCOL_BEST || c == BCOL_LAST || c == BCOL_EPOCHS;
        if (right) draw_textf(stdscr, 1, x, wd[c], t->role[TH_TITLE], "%*s", wd[c], buf);
        else draw_text(stdscr, 1, x, wd[c], t->role[TH_TITLE], buf);
        x += wd[c] + 1;
    }
    /* a sweep's summary under the list: one row per configuration (at most a third of the screen) */
    int sw_rows = 0;
    if (b->have_sweep && b->sweep.nconfigs > 0) {
        sw_rows = 3 + b->sweep.nconfigs;
        if (sw_rows > H / 3) sw_rows = H / 3;
    }
    const int list_h = H - 5 - sw_rows; /* title, header, sweep summary, detail (2), hint */
    if (sw_rows >= 2) {
        const SweepSummary *sw = &b->sweep;
        const int y0 = H - 3 - sw_rows;
        snprintf(buf, sizeof buf,
                 "sweep: %d configurations x %d seeds; gap = final test accuracy minus the matching dense "
                 "configuration's, with its %.0f%% Welch CI",
                 sw->nconfigs, sw->seeds, 100 * sw->ci_level);
        draw_text(stdscr, y0, 1, W - 2, t->role[TH_TITLE], buf);
        int lw = 13; /* the labels' width (56 at most), so the alarms at the end fit more often */
        for (int c = 0; c < sw->nconfigs; c++) {
            const int l = (int)strlen(sw->configs[c].label);
            if (l > lw) lw = l > 56 ? 56 : l;
        }
        snprintf(buf, sizeof buf, "  %-*s %3s %15s %8s %8s %9s %18s  %s", lw, "configuration", "n", "final acc %",
                 "rho nom", "rho real", "gap pp", "CI pp", "alarms");
        draw_text(stdscr, y0 + 1, 1, W - 2, t->role[TH_AXIS], buf);
        for (int c = 0; c < sw->nconfigs && 2 + c < sw_rows - 1; c++) {
            const SweepConfig *k = &sw->configs[c];
            char acc[32], gap[16], ci[40];
            if (k->n > 0) snprintf(acc, sizeof acc, "%.2f +- %.2f", 100 * k->final_mean, 100 * k->final_sd);
            else snprintf(acc, sizeof acc, "-");
            if (isfinite(k->gap)) snprintf(gap, sizeof gap, "%+.2f", 100 * k->gap);
            else snprintf(gap, sizeof gap, "-");
            if (isfinite(k->gap_lo)) snprintf(ci, sizeof ci, "[%+.2f, %+.2f]", 100 * k->gap_lo, 100 * k->gap_hi);
            else snprintf(ci, sizeof ci, "-");
            char n[16], al[48];
            snprintf(n, sizeof n, "%d/%d", k->n, k->n_expected);
            sweep_config_alarms(sw, c, al, sizeof al);
            snprintf(buf, sizeof buf, "  %-*.*s %3s %15s %8.3f %8.3f %9s %18s  %s", lw, lw, k->label, n, acc,
                     k->rho_nominal, k->rho_realized, gap, ci, al);
            draw_text(stdscr, y0 + 2 + c, 1, W - 2, A_NORMAL, buf);
        }
    }
    b->list_h = list_h;
    if (b->sel < b->top) b->top = b->sel;
    if (b->sel >= b->top + list_h) b->top = b->sel - list_h + 1;
    if (b->top < 0) b->top = 0;
    if (b->nrows == 0) {
        draw_text(stdscr, 3, 2, W - 4, t->role[TH_DIM],
                  b->list.n
                      ? "no session matches the filter (Esc clears it)"
                      : "no sessions here (a session is a folder with live.h5; moelab train writes them under runs/)");
    }
    for (int r = 0; r < list_h && b->top + r < b->nrows; r++) {
        const int i = b->rows[b->top + r];
        const BrowseEntry *e = &b->list.e[i];
        const int y = 2 + r, selected = b->top + r == b->sel;
        char cells[BCOL_COUNT][64];
        browse_entry_cells(e, cells);
        const attr_t base = selected ? t->role[TH_SELECT] | A_BOLD : A_NORMAL;
        if (selected) draw_fill(stdscr, y, 0, W, t->role[TH_SELECT]);
        draw_text(stdscr, y, 0, 2, base | (e->marked ? A_BOLD : 0), e->marked ? (t->utf8 ? "\u25c6 " : "* ") : "  ");
        x = 2;
        for (int c = 0; c < BCOL_COUNT; c++) {
            if (!wd[c]) continue;
            attr_t a = base;
            if (!selected && c == BCOL_STATUS) {
                if (!e->ok || !strcmp(e->status, "stale") || !strcmp(e->status, "failed")) a = t->role[TH_ERROR];
                else if (!strcmp(e->status, "running")) a = t->role[TH_GOOD] | A_BOLD;
                else if (!strcmp(e->status, "interrupted")) a = t->role[TH_WARN];
            }
            if (!selected && c == BCOL_ALARMS && e->alarms_ok) /* red: a collapse; yellow: warnings, deaths */
                a = e->alarms.collapse ? t->role[TH_ERROR] | A_BOLD
                    : e->alarms.warning || e->alarms.death ? t->role[TH_WARN]
                                                           : t->role[TH_DIM];
            const int right = c == BCOL_BEST || c == BCOL_LAST || c == BCOL_EPOCHS;
            const char *s = cells[c];
            if (c == BCOL_NAME && utf8_cells(s) > wd[c] && wd[c] > 8) {
                /* a long name keeps its start and its end, the middle gives way to "…" (the full
                 * path is in the detail lines under the list) */
                const size_t len = strlen(s);
                const int tail = (wd[c] - 1) / 3, head = wd[c] - 1 - tail;
                snprintf(buf, sizeof buf, "%.*s%s%s", head, s, t->utf8 ? "\u2026" : "~", s + len - (size_t)tail);
                s = buf;
            }
            if (c == BCOL_NAME && !e->ok) a |= selected ? 0 : t->role[TH_ERROR];
            if (right) draw_textf(stdscr, y, x, wd[c], a, "%*s", wd[c], s);
            else draw_text(stdscr, y, x, wd[c], a, s);
            x += wd[c] + 1;
        }
    }
    /* detail of the selected entry */
    if (b->nrows > 0) {
        const BrowseEntry *e = &b->list.e[b->rows[b->sel]];
        if (e->err[0]) {
            snprintf(buf, sizeof buf, "%s: %s", e->ok ? "note" : "cannot read", e->err);
            draw_wrapped(stdscr, H - 3, 1, W - 2, 2, e->ok ? t->role[TH_WARN] : t->role[TH_ERROR], buf);
        } else {
            char al[160] = "";
            if (e->alarms_ok && (e->alarms.collapse || e->alarms.warning || e->alarms.death || e->alarms.revival))
                snprintf(al, sizeof al, "; alarm events: %d collapse, %d warning, %d expert death, %d revival",
                         e->alarms.collapse, e->alarms.warning, e->alarms.death, e->alarms.revival);
            snprintf(
                buf, sizeof buf,
                "%.500s  created %.40s  seed %llu  %ld steps logged, %d evaluations (best %.2f%% at epoch %d), %ld events%s",
                e->path, e->info.created, (unsigned long long)e->info.seed, e->info.steps_logged, e->info.evals,
                isfinite(e->info.best_test_acc) ? 100 * e->info.best_test_acc : 0.0, e->info.best_epoch,
                e->info.events, al);
            draw_wrapped(stdscr, H - 3, 1, W - 2, 2, t->role[TH_DIM], buf);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// drawing helpers

static void panel(const Theme *t, View *v, Rect r, int focused, const char *prefix, int framed) {
    if (r.w <= 0 || r.h <= 0) return;
    WINDOW *w = newwin(r.h, r.w, r.y, r.x);
    if (!w) return;
    leaveok(w, TRUE);
    werase(w);
    if (framed) {
        char title[300], full[360];
        view_title(v, title, sizeof title);
        snprintf(full, sizeof full, "%s%s", prefix ? prefix : "", title);
        draw_frame(w, t, full, focused);
        view_draw(v, w, (Rect){1, 1, r.w - 2, r.h - 2});
    } else {
        view_draw(v, w, (Rect){0, 0, r.w, r.h});
    }
    wnoutrefresh(w);
    delwin(w);
}

static void draw_hint(Browser *b, int y, int W) {
    const Theme *t = &b->theme;
    draw_fill(stdscr, y, 0, W, A_NORMAL);
    if (b->input) {
        char buf[160];
        snprintf(buf, sizeof buf, "%s%s", b->input == '/' ? "filter: " : "go to epoch: ", b->inbuf);
        const int n = draw_text(stdscr, y, 0, W, t->role[TH_WARN] | A_BOLD, buf);
        draw_text(stdscr, y, n, W - n, t->role[TH_DIM], "  (Enter applies, Esc cancels)");
        return;
    }
    if (b->msg[0]) {
        draw_text(stdscr, y, 0, W, t->role[TH_WARN], b->msg);
        return;
    }
    const char *h =
        b->screen == SCR_LIST      ? "Enter open  m mark  c compare  s/S sort  / filter (/!: not)  n/N match  r rescan  ? help  q quit"
        : b->screen == SCR_COMPARE ? "Left/Right epoch  Home/End  0-9 Enter epoch  p figures  ? help  Esc/q back"
        : b->screen == SCR_MULTI   ? "Left/Right epoch  Home/End  0-9 Enter epoch  l loss/acc  p figures  Esc/q back"
        : b->tsne_on               ? "c colour by class/expert  Left/Right epoch  t/Esc close  ? help"
                     : "Left/Right epoch  Home/End  0-9 Enter epoch  t t-SNE  tab focus  z zoom  ? help  Esc/q back";
    draw_text(stdscr, y, 0, W, t->role[TH_DIM], h);
}

static void draw_session(Browser *b, int W, int H) {
    Loaded *L = &b->a;
    Layout lay;
    panels_layout(&L->ps, &lay, W, H, b->zoom && !b->tsne_on ? b->focus : -1);
    if (b->tsne_on) { /* the t-SNE takes the panels' place */
        for (int p = PANEL_CURVES; p <= PANEL_LOG; p++) lay.r[p] = (Rect){0, 0, 0, 0};
        lay.strip = (Rect){0, 0, 0, 0};
    }
    panels_draw(&L->ps, &lay, b->focus, 0);
    if (b->tsne_on) {
        const int y0 = lay.r[PANEL_BANNER].h ? 3 : 2;
        char tag[64], pre[80] = "";
        panels_layer_tag(&L->ps, PANEL_HEATMAP, tag, sizeof tag); /* "moe2 (1/2)" with two or more layers */
        if (tag[0]) snprintf(pre, sizeof pre, "%s %s ", tag, b->theme.utf8 ? "\u00b7" : "-");
        panel(&b->theme, &b->tsne, (Rect){0, y0, W, H - 1 - y0}, 1, pre, 1);
    }
    draw_hint(b, H - 1, W);
}

static void draw_compare(Browser *b, int W, int H) {
    CompareLayout cl;
    layout_compare(&cl, W, H);
    const Theme *t = &b->theme;
    /* status: the two runs and the epoch */
    draw_fill(stdscr, 0, 0, W, t->role[TH_STATUS]);
    /* segments dropped whole when the row is short (draw_segs): the configurations first */
    const char *bar = t->utf8 ? "\u2502" : "|";
    char an[540], ac[160], bn[540], bc[160];
    snprintf(an, sizeof an, " %s A: %s", bar, b->a.name);
    snprintf(ac, sizeof ac, " (%s%s%s)", b->a.ctx.head, b->a.ctx.has_moe ? ", " : "",
             b->a.ctx.has_moe ? tau_kind_name(b->a.base.kind) : "");
    snprintf(bn, sizeof bn, " %s B: %s", bar, b->b.name);
    snprintf(bc, sizeof bc, " (%s%s%s)", b->b.ctx.head, b->b.ctx.has_moe ? ", " : "",
             b->b.ctx.has_moe ? tau_kind_name(b->b.base.kind) : "");
    const DrawSeg hs[5] = {{" moelab compare", 9}, {an, 8}, {ac, 2}, {bn, 8}, {bc, 2}};
    draw_segs(stdscr, 0, 0, W, t->role[TH_STATUS] | A_BOLD, hs, 5);
    char ep[64], ev[96], as[64], bs[64];
    snprintf(ep, sizeof ep, " epoch %d", b->cmp_epoch);
    snprintf(ev, sizeof ev, "  (A has %d evaluations, B %d)", b->a.h.nevals, b->b.h.nevals);
    snprintf(as, sizeof as, "   A: %s", b->a.h.info.status);
    snprintf(bs, sizeof bs, "   B: %s", b->b.h.info.status);
    const DrawSeg es[4] = {{ep, 9}, {ev, 2}, {as, 5}, {bs, 5}};
    draw_fill(stdscr, 1, 0, W, A_NORMAL);
    draw_segs(stdscr, 1, 0, W, A_BOLD, es, 4);
    panel(t, &b->a.ps.v[PANEL_CURVES], cl.r[CMP_CURVES], 0, NULL, 1);
    panel(t, &b->diff, cl.r[CMP_DIFF], 0, NULL, 1);
    if (b->a.ps.have[PANEL_HEATMAP]) panel(t, &b->a.ps.v[PANEL_HEATMAP], cl.r[CMP_HEAT_A], 0, "A: ", 1);
    else panel(t, &b->a.ps.v[PANEL_SCALARS], cl.r[CMP_HEAT_A], 0, "A: ", 1);
    if (b->b.ps.have[PANEL_HEATMAP]) panel(t, &b->b.ps.v[PANEL_HEATMAP], cl.r[CMP_HEAT_B], 0, "B: ", 1);
    else panel(t, &b->b.ps.v[PANEL_SCALARS], cl.r[CMP_HEAT_B], 0, "B: ", 1);
    draw_hint(b, H - 1, W);
}

/* Compare of 3..8 runs: curves overlaid (colour + glyph per run), the final metrics of each run
 * (its last evaluation), and the class x expert heatmaps of every run at the cursor's epoch. */
static void draw_multi(Browser *b, int W, int H) {
    const Theme *t = &b->theme;
    const int n = b->nmulti;
    char buf[600];
    draw_fill(stdscr, 0, 0, W, t->role[TH_STATUS]);
    snprintf(buf, sizeof buf, " moelab compare %s %d runs  epoch %d", t->utf8 ? "\u2502" : "|", n, b->cmp_epoch);
    draw_text(stdscr, 0, 0, W, t->role[TH_STATUS] | A_BOLD, buf);
    draw_fill(stdscr, 1, 0, W, A_NORMAL);
    /* one coloured segment per run: with its status when it fits, else the name alone, else
     * "…" and the rest are in the table below */
    int x = 1;
    for (int i = 0; i < n && x < W; i++) {
        const Loaded *L = &b->multi[i];
        const int room = W - x - (i + 1 < n ? 1 : 0); /* a cell for the "…" of later runs */
        snprintf(buf, sizeof buf, "%s %s: %s  ", view_multi_glyph(t, i), L->name, L->h.info.status);
        if (utf8_cells(buf) > room) snprintf(buf, sizeof buf, "%s %s  ", view_multi_glyph(t, i), L->name);
        if (utf8_cells(buf) > room && utf8_cells(buf) - 2 <= W - x && i + 1 == n)
            snprintf(buf, sizeof buf, "%s %s", view_multi_glyph(t, i), L->name);
        if (utf8_cells(buf) > room) {
            draw_text(stdscr, 1, x, W - x, t->role[TH_DIM], t->utf8 ? "\u2026" : "~");
            break;
        }
        x += draw_text(stdscr, 1, x, W - x, view_multi_attr(t, i), buf);
    }
    const int body = H - 3;
    int top = body / 2 > 12 ? body / 2 : body - 6 > 12 ? 12 : body - 6;
    if (top < 8) top = 8;
    int tw = W / 2 < 66 ? W / 2 : 66;
    panel(t, &b->mview, (Rect){0, 2, W - tw, top}, 0, NULL, 1);
    /* the final-metrics table */
    WINDOW *tw_ = newwin(top, tw, 2, W - tw);
    if (tw_) {
        leaveok(tw_, TRUE);
        werase(tw_);
        draw_frame(tw_, t, "Final metrics (last evaluation of each run)", 0);
        const int cw = tw - 2;
        int nw = cw - 50; /* the name column takes what the numbers leave */
        if (nw < 6) nw = 6;
        if (nw > 24) nw = 24;
        /* the number columns that fit, whole (the rest are named in the bottom border) */
        static const char *const head[] = {"epoch", "test%", "best%", "loss", "I(c;e)", "loadH", "dead"};
        static const int colw[] = {5, 7, 7, 7, 6, 5, 4};
        enum { NCOL = 7 };
        int ncol = 0, used = 2 + nw;
        while (ncol < NCOL && used + 1 + colw[ncol] <= cw) used += 1 + colw[ncol++];
        int o = snprintf(buf, sizeof buf, "  %-*s", nw, "run");
        for (int c = 0; c < ncol; c++) o += snprintf(buf + o, sizeof buf - (size_t)o, " %*s", colw[c], head[c]);
        draw_text(tw_, 1, 1, cw, t->role[TH_AXIS] | A_BOLD, buf);
        for (int i = 0; i < n && 2 + i < top - 1; i++) {
            const Loaded *L = &b->multi[i];
            const SessionHistory *h = &L->h;
            char name[128];
            if (utf8_cells(L->name) > nw)
                snprintf(name, sizeof name, "%.*s%s", nw - 1, L->name, t->utf8 ? "\u2026" : "~");
            else snprintf(name, sizeof name, "%.31s", L->name);
            int nl = (int)strlen(name);
            for (int pad = utf8_cells(name); pad < nw && nl + 1 < (int)sizeof name; pad++) name[nl++] = ' ';
            name[nl] = '\0';
            if (h->nevals == 0) {
                snprintf(buf, sizeof buf, "%s %s  no evaluation", view_multi_glyph(t, i), name);
            } else {
                const EvalRecord *e = &h->evals[h->nevals - 1];
                double best = 0;
                for (int k = 0; k < h->nevals; k++)
                    if (h->evals[k].test_acc > best) best = h->evals[k].test_acc;
                char cell[NCOL][24];
                snprintf(cell[0], sizeof cell[0], "%d", e->epoch);
                snprintf(cell[1], sizeof cell[1], "%.2f", 100 * e->test_acc);
                snprintf(cell[2], sizeof cell[2], "%.2f", 100 * best);
                snprintf(cell[3], sizeof cell[3], "%.4f", e->test_loss);
                snprintf(cell[4], sizeof cell[4], "%.3f", e->moe.mutual_info);
                snprintf(cell[5], sizeof cell[5], "%.3f", e->moe.test_load_entropy);
                if (L->ctx.has_moe) snprintf(cell[6], sizeof cell[6], "%d", e->moe.dead_experts);
                else snprintf(cell[6], sizeof cell[6], "-");
                o = snprintf(buf, sizeof buf, "%s %s", view_multi_glyph(t, i), name);
                for (int c = 0; c < ncol; c++) o += snprintf(buf + o, sizeof buf - (size_t)o, " %*s", colw[c], cell[c]);
            }
            draw_text(tw_, 2 + i, 1, cw, view_multi_attr(t, i) & ~A_BOLD, buf);
        }
        char more[64] = "";
        if (n > top - 3)
            snprintf(more, sizeof more, "+%d runs %s%s", n - (top - 3), t->utf8 ? "\u25be" : "v",
                     ncol < NCOL ? " " : "");
        if (ncol < NCOL)
            snprintf(more + strlen(more), sizeof more - strlen(more), "+%d cols %s", NCOL - ncol,
                     t->utf8 ? "\u25b8" : ">");
        if (more[0]) draw_more(tw_, (Rect){1, 1, tw - 2, top - 2}, t, more);
        wnoutrefresh(tw_);
        delwin(tw_);
    }
    /* the heatmaps at the cursor's epoch: one row of up to 4, else two rows */
    const int rows = n > 4 ? 2 : 1, per = (n + rows - 1) / rows, hh = (body - top) / rows;
    for (int i = 0; i < n; i++) {
        Loaded *L = &b->multi[i];
        const int rr = i / per, cc = i % per, w0 = W / per;
        const Rect r = {cc * w0, 2 + top + rr * hh, cc == per - 1 ? W - cc * w0 : w0, hh};
        char pre[64];
        snprintf(pre, sizeof pre, "%s %.12s: ", view_multi_glyph(t, i), L->name);
        panel(t, L->ps.have[PANEL_HEATMAP] ? &L->ps.v[PANEL_HEATMAP] : &L->ps.v[PANEL_SCALARS], r, 0, pre, 1);
    }
    draw_hint(b, H - 1, W);
}

void browse_render(Browser *b) {
    int H, W;
    getmaxyx(stdscr, H, W);
    werase(stdscr);
    if (W < LAYOUT_MIN_W || H < LAYOUT_MIN_H) {
        char m[96];
        snprintf(m, sizeof m, "terminal too small (need %dx%d, have %dx%d)", LAYOUT_MIN_W, LAYOUT_MIN_H, W, H);
        draw_text(stdscr, H / 2, W > (int)strlen(m) ? (W - (int)strlen(m)) / 2 : 0, W, b->theme.role[TH_WARN] | A_BOLD,
                  m);
        wnoutrefresh(stdscr);
        doupdate();
        return;
    }
    if (b->screen == SCR_LIST) {
        draw_list(b, W, H);
        draw_hint(b, H - 1, W);
        wnoutrefresh(stdscr);
    } else {
        wnoutrefresh(stdscr);
        if (b->screen == SCR_SESSION) draw_session(b, W, H);
        else if (b->screen == SCR_MULTI) draw_multi(b, W, H);
        else draw_compare(b, W, H);
        wnoutrefresh(stdscr);
    }
    if (b->help_on) {
        int hw, hh;
        view_help_size_for(1, &hw, &hh);
        if (hw > W - 2) hw = W - 2;
        if (hh > H - 2) hh = H - 2;
        WINDOW *o = newwin(hh, hw, (H - hh) / 2, (W - hw) / 2);
        if (o) {
            werase(o);
            draw_frame(o, &b->theme, "Help: moelab browse (Esc, ? or q to close)", 2);
            view_draw(&b->help, o, (Rect){2, 1, hw - 4, hh - 2});
            wnoutrefresh(o);
            delwin(o);
        }
    }
    doupdate();
}
