/* config.h — the user's config file, $XDG_CONFIG_HOME/moelab/config (else ~/.config/moelab/config):
 * `key = value` lines, `#` comments, read once when a screen opens (the live screen, attach, the
 * browser). Keys (CONFIG_KEYS in config.c, README "Make it yours"): theme, mouse, hide, log_rows,
 * top_share, smoothing, refresh. An unknown key or a bad value is reported as FILE:LINE: ... and
 * ignored (the rest of the file still applies); NO_COLOR still wins over any theme.
 * `moelab config --init` writes a commented default file. */
#ifndef ML_APP_CONFIG_H
#define ML_APP_CONFIG_H

#include <stddef.h>

#include "views/prefs.h"

#define CONFIG_PROBLEMS_MAX 8 /* problems kept word for word (the rest are counted) */

typedef struct {
    ViewPrefs view;  /* theme, hidden panels and sizes, smoothing (views/prefs.h) */
    int mouse;       /* 1: the screens take mouse clicks and the wheel (default); 0: off (`--no-mouse`) */
    double refresh;  /* the live screen's shortest interval between frames, in seconds (0.1) */
    char path[1024]; /* the file read ("" when no path could be made) */
    int found;       /* the file exists and was read */
    int nproblems;   /* problems found (the first CONFIG_PROBLEMS_MAX are in problem[]) */
    char problem[CONFIG_PROBLEMS_MAX][320];
} UiConfig;

void ui_config_defaults(UiConfig *c);
/* Parses `len` bytes of config text into c (on top of what it holds); `name` prefixes the
 * problems ("NAME:LINE: ..."). Never fails: bad lines are problems. */
void ui_config_parse(UiConfig *c, const char *text, size_t len, const char *name);
/* $VAR/moelab/LEAF into buf when the XDG variable VAR is absolute, else $HOME/HOME_DIR/moelab/LEAF
 * (HOME_DIR ".config" or ".local/state", the XDG defaults); -1 (and "") when neither is set. */
int xdg_path(char *buf, size_t n, const char *var, const char *home_dir, const char *leaf);
/* The config file's path into buf; -1 when neither XDG_CONFIG_HOME (absolute) nor HOME is set. */
int ui_config_path(char *buf, size_t n);
/* Reads the config file once per process (later calls return the same), prints each problem on
 * stderr (`who`: "moelab train") and makes its display preferences the ones in force
 * (view_prefs_set). A missing file is no problem: the defaults. */
const UiConfig *ui_config_load(const char *who);
/* The loaded config, for the options that override it (`--no-mouse` sets mouse = 0). */
UiConfig *ui_config_mut(void);
/* The settings as config lines ("theme = dark\n..."), into buf. */
void ui_config_format(const UiConfig *c, char *buf, size_t n);

/* `moelab config [--init [--force] | --path]`. */
int cmd_config(int argc, char **argv);

#endif
