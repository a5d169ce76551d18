/* screen.h — one frame of the live screen and of `moelab attach` (the same screen fed from a
 * trainer thread or from live.h5): the panels (views/panels.c), the help overlay, the command line
 * and, below 80x24, the "terminal too small" notice. UI thread only. */
#ifndef ML_APP_SCREEN_H
#define ML_APP_SCREEN_H

#include "app/term/term.h"
#include "views/panels.h"

/* The screen's own state, embedded in the live screen's Tui (app/tui.c) and in attach's Attach
 * (app/attach.c): the panels, the help overlay, the theme, the layout of the last frame and what
 * the keys change (focus, zoom, help). */
typedef struct {
    Panels ps;
    View help; /* the help overlay's view */
    Theme theme;
    Layout lay;                            /* of the last frame */
    int focus, zoom, help_on;              /* zoom: the focused panel takes the screen */
    int force_clear;                       /* Ctrl-L: clear before the next frame */
    int last_cols, last_lines, last_small; /* the last frame's size (a change clears the screen) */
    int mouse;                             /* clicks and the wheel are used (not --no-mouse) */
    int click_panel;                       /* the panel of the last left press, and when */
    double click_at;
} Screen;

/* Lays out (into s->lay) and draws one frame, then doupdate; clears s->force_clear. small_note:
 * the second line of the too-small notice ("RUNNING  step 3/40"), may be NULL; draw_cmdline
 * draws the command line into its window (user is its argument). */
void screen_render(Screen *s, const char *small_note, void (*draw_cmdline)(WINDOW *w, void *user), void *user);
/* The command line as a y/n question (quit confirmations), the cursor after it. */
void screen_confirm(WINDOW *w, const Screen *s, const char *question);
/* Deletes the help overlay, the panels' windows and the command line's window. */
void screen_drop_windows(Panels *ps);
/* A click or wheel notch at m on the last frame (now: seconds, for double clicks): a left press
 * on a panel focuses it, a second one on the same panel within SCREEN_DOUBLE_SEC zooms it (or
 * unzooms), the wheel focuses the panel under the pointer and scrolls it SCREEN_WHEEL_LINES
 * (the log, heatmap or load); any click closes the help. 1 if the screen changed. */
#define SCREEN_DOUBLE_SEC 0.4
#define SCREEN_WHEEL_LINES 3
int screen_mouse(Screen *s, const TermMouse *m, double now);
/* The panel (PANEL_CURVES .. PANEL_LOG) of lay under cell (x, y), or -1. */
int screen_panel_at(const Layout *lay, int x, int y);

/* A command line starting with '/': the log's filter (`/text`, `/!text` for the lines without
 * it, `/` alone clears it; views/view_log.c), and the log gets the focus. 1 if line was one. */
int screen_log_filter(Screen *s, const char *line);
/* n / N on an empty command line while the log is filtered: the next / previous match. 1 if used. */
int screen_log_key(Screen *s, int c);

/* The focus after `cur` for the tab key (the panels' order at cols x lines). */
int screen_next_focus(const Panels *ps, int cols, int lines, int cur);

#endif
