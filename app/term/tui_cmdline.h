/* tui_cmdline.h — GNU readline in callback mode inside the ncurses screen (after rlncurses.c):
 * the UI feeds readline one byte at a time, readline edits the line, and our redisplay function
 * draws prompt and line into the command window. Readline never touches the terminal itself (no
 * signal handlers, no terminal preparation, output to /dev/null). Completion covers command
 * words, parameter names, schedule names and anneal options; the match list goes to a popup above
 * the command line that the next key closes (never to the log panel, never to stdout). History lives in a file (XDG state directory).
 *
 * Readline is a process-wide singleton, so this module is too. UI thread only. */
#ifndef ML_APP_TUI_CMDLINE_H
#define ML_APP_TUI_CMDLINE_H

#include <stdio.h>
#include <curses.h>

#include "views/layout.h"
#include "views/theme.h"

/* A complete line (malloc'd: the callee frees it), or NULL for end of input (Ctrl-D on an
 * empty line). */
typedef void (*cmdline_line_fn)(char *line, void *user);
/* A message for the log: level 0 info, 1 warning, 2 error. */
typedef void (*cmdline_msg_fn)(int level, const char *text, void *user);

/* Installs the readline callback handler. 0, or -1 (readline could not be set up). */
int cmdline_init(const char *prompt, cmdline_line_fn on_line, cmdline_msg_fn on_msg, void *user);
/* The run's routed layers ("moe2", "head"): completed after `@` in set / anneal (at most 8). */
void cmdline_set_layers(const char *const *names, int n);
/* Removes the handler and restores readline's globals. */
void cmdline_free(void);
/* The window the line is drawn into (re-set after every resize) and the theme. */
void cmdline_set_window(WINDOW *w, const Theme *t);
/* The command line's window at rectangle r (made again when r changed; keys are read from it:
 * non-blocking, raw bytes for readline, the cursor left where the line is edited), set with
 * cmdline_set_window. NULL if it cannot be made. The live screen's and attach's one window. */
WINDOW *cmdline_window(Rect r, const Theme *t);
/* The window made by cmdline_window (NULL: none). */
WINDOW *cmdline_window_get(void);
/* Deletes it. */
void cmdline_window_drop(void);
/* Passes one input byte to readline (which may call on_line and redisplay). */
void cmdline_feed(int byte);
/* 1 if the line is empty and readline is not in the middle of a key sequence, search or
 * numeric argument: single-key shortcuts apply then. */
int cmdline_idle(void);
/* The completion popup: 1 if it appeared or went since the last call (the caller draws a frame),
 * whether it is shown, and drawing it (after the panels and the command line: a framed list of
 * the matches in columns, just above the command line's rectangle `cmd`, on a screen `cols`
 * wide; wnoutrefresh, no doupdate). Any key fed to cmdline_feed closes it. */
int cmdline_popup_changed(void);
int cmdline_popup_shown(void);
void cmdline_popup_draw(Rect cmd, int cols);
/* Draws prompt + line into the window set with cmdline_set_window (scrolled horizontally to
 * keep the cursor visible) and leaves the cursor at the editing point. hint (may be NULL) is
 * shown dimmed at the right while the line is empty. Does not refresh. */
void cmdline_draw(const char *hint);

/* History file: creates its directory (0700) and the file, loads it. 0, or -1 with a message in
 * err (history then stays in memory only). */
int cmdline_history_open(const char *path, char *err, size_t errn);
/* Adds a line to the history and appends it to the file (errors go to on_msg, once). */
void cmdline_history_add(const char *line);
/* Trims the history file to its last entries. */
void cmdline_history_close(void);
/* The default history path: $XDG_STATE_HOME/moelab/history, else ~/.local/state/moelab/history.
 * -1 if neither XDG_STATE_HOME nor HOME is set. */
int cmdline_history_path(char *buf, size_t n);

#endif
