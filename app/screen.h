/* screen.h — one frame of the live screen and of `moelab attach` (the same screen fed from a
 * trainer thread or from live.h5): the panels (views/panels.c), the help overlay, the command line
 * and, below 80x24, the "terminal too small" notice. UI thread only. */
#ifndef ML_APP_SCREEN_H
#define ML_APP_SCREEN_H

#include "views/panels.h"

typedef struct {
    Panels *ps;
    const Theme *theme;
    int zoom, focus; /* zoom: the focused panel takes the screen */
    View *help;      /* the help overlay's view */
    int help_on;
    const char *small_note; /* second line of the too-small notice ("RUNNING  step 3/40"), may be NULL */
    void (*draw_cmdline)(WINDOW *w, void *user); /* the command line into its window */
    void *user;
    int *last_cols, *last_lines, *last_small; /* the caller's memory of the last frame (clears on change) */
    int force_clear;                          /* Ctrl-L */
} ScreenFrame;

/* Lays out (into *lay) and draws one frame, then doupdate. */
void screen_render(const ScreenFrame *f, Layout *lay);
/* Deletes the help overlay, the panels' windows and the command line's window. */
void screen_drop_windows(Panels *ps);
/* The focus after `cur` for the tab key (the panels' order at cols x lines). */
int screen_next_focus(const Panels *ps, int cols, int lines, int cur);

#endif
