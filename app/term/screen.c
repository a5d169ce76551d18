/* screen.c — one frame of the live screen and attach (see screen.h). */
#include "app/term/screen.h"
#include "app/term/tui_cmdline.h"

#include <string.h>

#include "views/draw.h"

static WINDOW *g_overlay; /* the help overlay (one screen at a time) */

static void overlay_drop(void) {
    if (g_overlay) delwin(g_overlay);
    g_overlay = NULL;
}

void screen_drop_windows(Panels *ps) {
    overlay_drop();
    panels_drop_windows(ps);
    cmdline_window_drop();
}

int screen_next_focus(const Panels *ps, int cols, int lines, int cur) {
    Layout plain;
    panels_layout(ps, &plain, cols, lines, -1);
    const int next = layout_next_focus(&plain, cur);
    return next >= 0 ? next : cur;
}

int screen_panel_at(const Layout *lay, int x, int y) {
    if (lay->too_small) return -1;
    for (int p = PANEL_CURVES; p <= PANEL_LOG; p++) {
        const Rect r = lay->r[p];
        if (r.w > 0 && r.h > 0 && x >= r.x && x < r.x + r.w && y >= r.y && y < r.y + r.h) return p;
    }
    return -1;
}

int screen_mouse(Screen *s, const TermMouse *m, double now) {
    if (!s->mouse || !m->press) return 0;
    if (s->help_on) {
        s->help_on = 0;
        return 1;
    }
    const int p = screen_panel_at(&s->lay, m->x, m->y);
    if (p < 0) return 0;
    if (m->button == 4 || m->button == 5) {
        s->focus = p;
        for (int i = 0; i < SCREEN_WHEEL_LINES; i++) panels_key(&s->ps, p, m->button == 4 ? '{' : '}');
        return 1;
    }
    if (m->button != 0) return 0;
    if (p == s->click_panel && now - s->click_at < SCREEN_DOUBLE_SEC) {
        s->zoom = !s->zoom;
        s->click_at = 0;
    } else {
        s->click_at = now;
    }
    s->click_panel = p;
    s->focus = p;
    return 1;
}

int screen_log_filter(Screen *s, const char *line) {
    if (line[0] != '/') return 0;
    if (!s->ps.have[PANEL_LOG]) return 1;
    view_log_filter(&s->ps.v[PANEL_LOG], line + 1);
    s->focus = PANEL_LOG;
    return 1;
}

int screen_log_key(Screen *s, int c) {
    if ((c != 'n' && c != 'N') || !s->ps.have[PANEL_LOG] || !view_log_filtering(&s->ps.v[PANEL_LOG])) return 0;
    return view_on_key(&s->ps.v[PANEL_LOG], c);
}

static void help_overlay(Screen *f, int W, int H) {
    overlay_drop();
    if (!f->help_on) return;
    int hw, hh;
    view_help_size(&hw, &hh);
    if (hw > W - 2) hw = W - 2;
    if (hh > H - 3) hh = H - 3;
    g_overlay = newwin(hh, hw, (H - hh) / 2, (W - hw) / 2);
    if (!g_overlay) return;
    werase(g_overlay);
    char title[128];
    view_title(&f->help, title, sizeof title);
    draw_frame(g_overlay, &f->theme, title, 2);
    view_draw(&f->help, g_overlay, (Rect){2, 1, hw - 4, hh - 2});
    wnoutrefresh(g_overlay);
}

static void command_line(const Screen *f, Rect r, void (*draw_cmdline)(WINDOW *w, void *user), void *user) {
    WINDOW *cw = cmdline_window(r, &f->theme);
    if (!cw) return;
    draw_cmdline(cw, user);
    wnoutrefresh(cw);
}

void screen_confirm(WINDOW *w, const Screen *s, const char *question) {
    werase(w);
    const int n = draw_text(w, 0, 0, getmaxx(w) - 1, s->theme.role[TH_WARN], question);
    wmove(w, 0, n);
}

void screen_render(Screen *f, const char *small_note, void (*draw_cmdline)(WINDOW *w, void *user), void *user) {
    int H, W;
    Layout *lay = &f->lay;
    getmaxyx(stdscr, H, W);
    panels_layout(&f->ps, lay, W, H, f->zoom ? f->focus : -1);
    if (W != f->last_cols || H != f->last_lines || lay->too_small != f->last_small || f->force_clear) {
        werase(stdscr);
        wnoutrefresh(stdscr);
        f->last_cols = W;
        f->last_lines = H;
        f->last_small = lay->too_small;
    }
    f->force_clear = 0;
    if (lay->too_small) {
        overlay_drop();
        panels_drop_windows(&f->ps);
        panels_too_small(&f->theme, W, H, small_note);
        if (H >= 2) command_line(f, (Rect){0, H - 1, W, 1}, draw_cmdline, user);
        doupdate();
        return;
    }
    if (!f->zoom && !layout_visible(lay, f->focus)) /* the config hides the focused panel */
        f->focus = layout_next_focus(lay, f->focus);
    panels_draw(&f->ps, lay, f->focus, 1);
    help_overlay(f, W, H);
    cmdline_popup_draw(lay->r[PANEL_CMD], W); /* tab completion's matches, until the next key */
    command_line(f, lay->r[PANEL_CMD], draw_cmdline, user);
    doupdate();
}
