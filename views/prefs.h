/* prefs.h — the user's display preferences (the config file, app/cli/config.c): the theme, the
 * panels hidden and their sizes, the curves' smoothing. Set once at start, before the first
 * screen opens (view_prefs_set), and read by theme_init, panels_layout and the curves view.
 * Process-wide like the terminal itself; UI thread only. */
#ifndef ML_VIEWS_PREFS_H
#define ML_VIEWS_PREFS_H

typedef enum { THEME_DARK, THEME_LIGHT, THEME_HIGH_CONTRAST, THEME_KIND_COUNT } ThemeKind;

/* "dark", "light", "high-contrast" (index = ThemeKind), NULL-terminated. */
extern const char *const theme_kind_names[];

typedef struct {
    ThemeKind theme;
    unsigned hide;    /* bit p set: panel p (PANEL_CURVES .. PANEL_LOG of layout.h) is not shown */
    int log_rows;     /* the log panel's rows (0: a fifth of the screen, 5-12) */
    int top_share;    /* percent of the panel rows for the first row of panels (0: half) */
    double smoothing; /* the curves' EMA weight on the past at start (< 0: 0.9, key `m` cycles) */
} ViewPrefs;

void view_prefs_defaults(ViewPrefs *p);
void view_prefs_set(const ViewPrefs *p);
/* The preferences in force (the defaults until view_prefs_set). */
const ViewPrefs *view_prefs(void);

#endif
