/* prefs.c — the display preferences in force (see prefs.h). */
#include "views/prefs.h"

const char *const theme_kind_names[] = {"dark", "light", "high-contrast", 0};

static ViewPrefs g_prefs = {THEME_DARK, 0u, 0, 0, -1.0};

void view_prefs_defaults(ViewPrefs *p) {
    p->theme = THEME_DARK;
    p->hide = 0u;
    p->log_rows = 0;
    p->top_share = 0;
    p->smoothing = -1.0;
}

void view_prefs_set(const ViewPrefs *p) { g_prefs = *p; }

const ViewPrefs *view_prefs(void) { return &g_prefs; }
