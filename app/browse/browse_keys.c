/* browse_keys.c — the browser's keys: the filter and epoch prompts, the list's keys (sort,
 * mark, open), the session and comparison keys (scrub, focus, zoom, t-SNE, figures) (see browse.c). */
#define _GNU_SOURCE
#include "app/browse/browse.h"
#include "app/browse/browse_internal.h"
#include "app/cli/app.h"
#include "app/live/history_feed.h"
#include "app/term/screen.h" /* provides: screen_panel_at, SCREEN_DOUBLE_SEC, SCREEN_WHEEL_LINES */

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
// keys

static void goto_epoch(Browser *b, int epoch) {
    if (b->screen == SCR_MULTI) {
        b->cmp_epoch = epoch;
        browse_multi_cursor(b);
        return;
    }
    if (b->screen == SCR_COMPARE) {
        b->cmp_epoch = epoch;
        browse_compare_cursor(b);
        return;
    }
    const int ev = session_history_eval_at_epoch(&b->a.h, epoch);
    if (ev < 0) {
        browse_set_msg(b, "no evaluation at or before epoch %d", epoch);
        return;
    }
    b->ev = ev;
    b->follow = ev == b->a.h.nevals - 1;
    browse_session_cursor(b);
}

static int max_epoch(Browser *b) {
    int m = b->a.h.nevals ? b->a.h.evals[b->a.h.nevals - 1].epoch : 0;
    for (int i = 0; b->screen == SCR_MULTI && i < b->nmulti; i++) {
        const SessionHistory *h = &b->multi[i].h;
        if (h->nevals && h->evals[h->nevals - 1].epoch > m) m = h->evals[h->nevals - 1].epoch;
    }
    if (b->screen == SCR_COMPARE && b->b.h.nevals) {
        const int mb = b->b.h.evals[b->b.h.nevals - 1].epoch;
        if (mb > m) m = mb;
    }
    return m;
}

static void move_cursor(Browser *b, int delta, int to) {
    if (b->screen == SCR_COMPARE || b->screen == SCR_MULTI) {
        const int me = max_epoch(b);
        int e = to < 0 ? 1 : to > 0 ? me : b->cmp_epoch + delta;
        if (e < 1) e = 1;
        if (e > me) e = me;
        b->cmp_epoch = e;
        if (b->screen == SCR_MULTI) browse_multi_cursor(b);
        else browse_compare_cursor(b);
        return;
    }
    const int n = b->a.h.nevals;
    if (n == 0) return;
    int ev = to < 0 ? 0 : to > 0 ? n - 1 : b->ev + delta;
    if (ev < 0) ev = 0;
    if (ev > n - 1) ev = n - 1;
    b->ev = ev;
    b->follow = ev == n - 1;
    browse_session_cursor(b);
}

/* Returns 1 to quit the browser. */
static int key_input(Browser *b, int c) {
    const size_t len = strlen(b->inbuf);
    if (c == 27 || c == 7) { /* Esc, Ctrl-G */
        if (b->input == '/') {
            b->filter[0] = 0;
            browse_list_rows(b);
        }
        b->input = 0;
    } else if (c == '\n' || c == '\r' || c == KEY_ENTER) {
        if (b->input == '/') {
            snprintf(b->filter, sizeof b->filter, "%s", b->inbuf);
            b->sel = 0;
            browse_list_rows(b);
        } else if (len) goto_epoch(b, atoi(b->inbuf));
        b->input = 0;
    } else if (c == KEY_BACKSPACE || c == 127 || c == 8) {
        if (len) b->inbuf[len - 1] = 0;
        else b->input = 0;
    } else if (c >= 32 && c < 127 && len + 1 < sizeof b->inbuf && (b->input == '/' || (c >= '0' && c <= '9'))) {
        b->inbuf[len] = (char)c;
        b->inbuf[len + 1] = 0;
        if (b->input == '/') {
            snprintf(b->filter, sizeof b->filter, "%s", b->inbuf);
            b->sel = 0;
            browse_list_rows(b);
        }
    }
    b->dirty = 1;
    return 0;
}

static int key_list(Browser *b, int c) {
    const int H = getmaxy(stdscr);
    const int page = H - 6 > 1 ? H - 6 : 1;
    switch (c) {
    case 'q': return 1;
    case KEY_UP:
    case 'k': b->sel--; break;
    case KEY_DOWN:
    case 'j': b->sel++; break;
    case KEY_PPAGE: b->sel -= page; break;
    case KEY_NPAGE: b->sel += page; break;
    case KEY_HOME:
    case KEY_FIND:
    case 'g': b->sel = 0; break;
    case KEY_END:
    case KEY_SELECT:
    case 'G': b->sel = b->nrows - 1; break;
    case 's':
        b->sort_col = (b->sort_col + 1) % BCOL_COUNT;
        browse_list_sort(&b->list, b->sort_col, b->sort_rev);
        browse_list_rows(b);
        break;
    case 'S':
        b->sort_rev = !b->sort_rev;
        browse_list_sort(&b->list, b->sort_col, b->sort_rev);
        browse_list_rows(b);
        break;
    case '/':
        b->input = '/';
        snprintf(b->inbuf, sizeof b->inbuf, "%.63s", b->filter);
        break;
    case 27:
        if (b->filter[0]) {
            b->filter[0] = 0;
            browse_list_rows(b);
        }
        break;
    case 'n': /* the next / previous match of the filter (the list shows only matches: wraps) */
    case 'N':
        if (!b->filter[0]) {
            browse_set_msg(b, "n / N: no filter (/ sets one)");
            break;
        }
        if (b->nrows > 0) b->sel = ((b->sel + (c == 'n' ? 1 : -1)) % b->nrows + b->nrows) % b->nrows;
        break;
    case 'r':
        browse_list_rescan(b);
        browse_set_msg(b, "rescanned: %d sessions", b->list.n);
        break;
    case ' ':
    case 'm':
        if (b->nrows > 0) {
            BrowseEntry *e = &b->list.e[b->rows[b->sel]];
            int marked = 0;
            for (int i = 0; i < b->list.n; i++) marked += b->list.e[i].marked;
            if (!e->marked && marked >= MARK_MAX)
                browse_set_msg(b, "%d sessions are marked already: unmark one (m) first", MARK_MAX);
            else e->marked = !e->marked;
            if (c == ' ' || c == 'm') b->sel++;
        }
        break;
    case 'c': {
        const BrowseEntry *m[MARK_MAX] = {NULL};
        int nm = 0;
        for (int i = 0; i < b->list.n && nm < MARK_MAX; i++)
            if (b->list.e[i].marked) m[nm++] = &b->list.e[i];
        if (nm >= 3) {
            browse_open_multi(b, m, nm);
            break;
        }
        if (nm == 1 && b->nrows > 0 && &b->list.e[b->rows[b->sel]] != m[0]) m[nm++] = &b->list.e[b->rows[b->sel]];
        if (nm < 2) {
            browse_set_msg(b, "mark 2 to 8 sessions with m (or mark one and select the other), then c");
            break;
        }
        browse_open_compare(b, m[0], m[1]);
        break;
    }
    case '\n':
    case '\r':
    case KEY_ENTER:
        if (b->nrows > 0) {
            const BrowseEntry *e = &b->list.e[b->rows[b->sel]];
            if (!e->ok) browse_set_msg(b, "cannot open %s: %s", e->name, e->err);
            else browse_open_session(b, e->path, e->name);
        }
        break;
    default: return 0;
    }
    if (b->sel >= b->nrows) b->sel = b->nrows - 1;
    if (b->sel < 0) b->sel = 0;
    b->dirty = 1;
    return 0;
}

/* `p`: the figures of what is on screen (the session, the two compared, or the 3..8 compared) as PDF and PNG, at the
 * cursor's epoch, by `moelab plot` (app/plot.c) in this process; the hint row says where. */
static void export_figures(Browser *b) {
    const char *in[VIEW_MULTI_MAX] = {b->a.h.path, b->b.h.path};
    int n = b->screen == SCR_COMPARE ? 2 : 1;
    int epoch = b->ev >= 0 && b->ev < b->a.h.nevals ? b->a.h.evals[b->ev].epoch : -1;
    if (b->screen == SCR_MULTI) { /* the 3..8 compared: the multi-run figures at the cursor's epoch */
        n = b->nmulti < VIEW_MULTI_MAX ? b->nmulti : VIEW_MULTI_MAX;
        for (int i = 0; i < n; i++) in[i] = b->multi[i].h.path;
        epoch = b->cmp_epoch > 0 ? b->cmp_epoch : -1;
    }
    char msg[1024];
    int rc = plot_run(in, n, NULL, PLOT_PDF | PLOT_PNG, epoch, 0, msg, sizeof msg);
    if (rc == 2 && epoch >= 0) rc = plot_run(in, n, NULL, PLOT_PDF | PLOT_PNG, -1, 0, msg, sizeof msg);
    browse_set_msg(b, rc ? "p: figures failed: %s" : "p: figures written: %s (pdf, png)", msg);
}

static int key_view(Browser *b, int c) {
    const int back = c == 'q' || c == 27 || c == KEY_BACKSPACE || c == 127;
    if (b->tsne_on && (back || c == 't')) {
        b->tsne_on = 0;
        browse_job_stop(&b->job);
        b->dirty = 1;
        return 0;
    }
    if (back) {
        if (b->direct) return 1;
        browse_leave_to_list(b);
        return 0;
    }
    switch (c) {
    case KEY_LEFT:
    case 'h': move_cursor(b, -1, 0); break;
    case KEY_RIGHT:
    case 'l':
        if (c == 'l' && b->screen == SCR_MULTI) {
            view_on_key(&b->mview, 'l');
            break;
        }
        if (c == 'l' && b->screen == SCR_SESSION && !b->tsne_on &&
            (b->focus == PANEL_CURVES || b->focus == PANEL_TEMP) && b->a.ps.have[b->focus]) {
            view_on_key(&b->a.ps.v[b->focus], 'l'); /* log axis of the curves or the temperature */
            break;
        }
        move_cursor(b, +1, 0);
        break;
    case KEY_HOME:
    case KEY_FIND:
    case 'g': move_cursor(b, 0, -1); break;
    case KEY_END:
    case KEY_SELECT:
    case 'G': move_cursor(b, 0, +1); break;
    case KEY_PPAGE: move_cursor(b, -5, 0); break;
    case KEY_NPAGE: move_cursor(b, +5, 0); break;
    case 't':
        if (b->screen != SCR_SESSION) break;
        b->tsne_on = 1;
        browse_tsne_start(b, b->ev);
        break;
    case 'c':
        if (b->tsne_on) view_on_key(&b->tsne, 'c');
        break;
    case 'd': /* the class x expert panel: test first choices <-> training pairs dropped by capacity */
        if (b->screen == SCR_SESSION && !b->tsne_on && b->a.ps.have[PANEL_HEATMAP])
            view_on_key(&b->a.ps.v[PANEL_HEATMAP], 'd');
        break;
    case 'p': export_figures(b); break;
    case 'm': /* smoothing of the loss curves */
        if (!b->tsne_on && b->a.ps.have[PANEL_CURVES]) view_on_key(&b->a.ps.v[PANEL_CURVES], 'm');
        break;
    case '\t':
        if (b->screen == SCR_SESSION && !b->tsne_on) {
            int H, W;
            getmaxyx(stdscr, H, W);
            Layout plain;
            panels_layout(&b->a.ps, &plain, W, H, -1);
            const int nf = layout_next_focus(&plain, b->focus);
            if (nf >= 0) b->focus = nf;
        }
        break;
    case 'z':
        if (b->screen == SCR_SESSION) b->zoom = !b->zoom;
        break;
    case '[':
    case ']':
    case '{':
    case '}':
        if (b->screen != SCR_SESSION) break;
        if (!b->tsne_on) panels_key(&b->a.ps, b->focus, c);
        else if ((c == '[' || c == ']') && panels_cycle(&b->a.ps, c == ']' ? 1 : -1))
            browse_tsne_start(b, b->ev); /* the t-SNE of the other layer */
        break;
    default:
        if (c >= '0' && c <= '9') {
            b->input = '#';
            b->inbuf[0] = (char)c;
            b->inbuf[1] = 0;
        } else {
            return 0;
        }
    }
    b->dirty = 1;
    return 0;
}

/* A click or a wheel notch (b->mev): in the list, a click opens the entry under it and the wheel
 * moves the cursor; on a session, a click focuses a panel (a double click zooms it) or, on the
 * status bar's progress bar (the epoch scrubber), moves the cursor to the epoch there; the wheel
 * scrolls the panel under it. */
static int key_mouse(Browser *b) {
    const TermMouse *m = &b->mev;
    if (!b->mouse || !m->press || b->input) return 0;
    b->dirty = 1;
    if (b->help_on) {
        b->help_on = 0;
        return 0;
    }
    const int wheel = m->button == 4 ? -1 : m->button == 5 ? 1 : 0;
    if (!wheel && m->button != 0) return 0;
    if (b->screen == SCR_LIST) {
        if (wheel) {
            b->sel += wheel * SCREEN_WHEEL_LINES;
        } else {
            const int r = m->y - 2;
            if (r < 0 || r >= b->list_h || b->top + r >= b->nrows) return 0;
            b->sel = b->top + r;
            return key_list(b, '\n'); /* open it */
        }
        if (b->sel >= b->nrows) b->sel = b->nrows - 1;
        if (b->sel < 0) b->sel = 0;
        return 0;
    }
    if (b->screen != SCR_SESSION || b->tsne_on) {
        if (wheel) move_cursor(b, wheel, 0);
        return 0;
    }
    int bx, bw, by;
    if (!wheel && b->a.ps.have[PANEL_STATUS] && view_status_bar(&b->a.ps.v[PANEL_STATUS], &bx, &bw, &by) &&
        m->y == by && m->x >= bx && m->x < bx + bw) {
        const int epochs = b->a.ctx.epochs > 0 ? b->a.ctx.epochs : 1;
        int e = (int)ceil((double)(m->x - bx + 1) / bw * epochs);
        if (e < 1) e = 1;
        if (e > epochs) e = epochs;
        const int last = b->a.h.nevals ? b->a.h.evals[b->a.h.nevals - 1].epoch : 1;
        goto_epoch(b, e > last ? last : e);
        return 0;
    }
    int H, W;
    getmaxyx(stdscr, H, W);
    Layout lay;
    panels_layout(&b->a.ps, &lay, W, H, b->zoom ? b->focus : -1);
    const int p = screen_panel_at(&lay, m->x, m->y);
    if (p < 0) return 0;
    b->focus = p;
    if (wheel) {
        for (int i = 0; i < SCREEN_WHEEL_LINES; i++) panels_key(&b->a.ps, p, wheel < 0 ? '{' : '}');
        return 0;
    }
    const double now = ml_now();
    if (p == b->click_panel && now - b->click_at < SCREEN_DOUBLE_SEC) {
        b->zoom = !b->zoom;
        b->click_at = 0;
    } else {
        b->click_at = now;
    }
    b->click_panel = p;
    return 0;
}

int browse_handle_key(Browser *b, int c) {
    if (c == KEY_MOUSE) return key_mouse(b);
    if (c == KEY_RESIZE) {
        b->dirty = 1;
        return 0;
    }
    if (c == 12) {
        clearok(curscr, TRUE);
        b->dirty = 1;
        return 0;
    }
    if (b->help_on) {
        if (c == 27 || c == '?' || c == 'q') b->help_on = 0;
        b->dirty = 1;
        return 0;
    }
    if (b->input) return key_input(b, c);
    if (c == '?') {
        b->help_on = 1;
        b->dirty = 1;
        return 0;
    }
    if (b->msg[0]) {
        b->msg[0] = 0;
        b->dirty = 1;
    }
    return b->screen == SCR_LIST ? key_list(b, c) : key_view(b, c);
}

/* getch, with escape sequences the terminal description does not know (Home as ESC [ 1 ~ under
 * another TERM, ...) mapped to keys where they are standard and swallowed otherwise, so their
 * ESC is never taken for the Esc key. */
int browse_read_key(TermMouse *m) {
    const int c = getch();
    if (c == KEY_MOUSE) return term_mouse_curses(m) ? KEY_MOUSE : KEY_RESIZE;
    if (c != 27) return c;
    const int c2 = getch();
    if (c2 == ERR) return 27;
    if (c2 != '[' && c2 != 'O') {
        ungetch(c2);
        return 27;
    }
    char seq[32];
    int n = 0, k;
    while ((k = getch()) != ERR && n < (int)sizeof seq - 1) {
        seq[n++] = (char)k;
        if (k >= 0x40 && k <= 0x7e) break;
    }
    seq[n] = 0;
    if (seq[0] == '<') return term_mouse_sgr(seq, m) ? KEY_MOUSE : KEY_RESIZE; /* a mouse report (SGR) */
    if (!strcmp(seq, "H") || !strcmp(seq, "1~") || !strcmp(seq, "7~")) return KEY_HOME;
    if (!strcmp(seq, "F") || !strcmp(seq, "4~") || !strcmp(seq, "8~")) return KEY_END;
    if (!strcmp(seq, "A")) return KEY_UP;
    if (!strcmp(seq, "B")) return KEY_DOWN;
    if (!strcmp(seq, "C")) return KEY_RIGHT;
    if (!strcmp(seq, "D")) return KEY_LEFT;
    if (!strcmp(seq, "5~")) return KEY_PPAGE;
    if (!strcmp(seq, "6~")) return KEY_NPAGE;
    return KEY_RESIZE; /* unknown: a harmless redraw */
}
