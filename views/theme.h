/* theme.h — colours, attributes and glyphs of the live screen, chosen once for the terminal:
 * 256 colours (COLORS >= 256: 10-step heat ramp), 8 colours (6-step ramp), or none (NO_COLOR set,
 * or a terminal without colour: attributes and glyph ramps only). With a UTF-8 locale the views
 * use braille, block and box glyphs; otherwise ASCII only.
 *
 * theme_init must run on the UI thread after initscr (it calls start_color / init_pair). */
#ifndef ML_VIEWS_THEME_H
#define ML_VIEWS_THEME_H

#include <curses.h>

typedef enum {
    TH_NORMAL,
    TH_TITLE, /* panel titles */
    TH_FOCUS, /* focused panel title / border */
    TH_BORDER,
    TH_AXIS,     /* axis labels */
    TH_DIM,      /* secondary text */
    TH_RAW,      /* raw train loss dots */
    TH_EMA,      /* smoothed train loss */
    TH_TEST,     /* test loss */
    TH_ACC,      /* test accuracy */
    TH_PLAN,     /* planned temperature */
    TH_USED,     /* temperature actually used */
    TH_OVERRIDE, /* live override */
    TH_NOW,      /* the "now" marker */
    TH_GOOD,
    TH_WARN,
    TH_ERROR,
    TH_STATUS, /* status bar */
    TH_RUNNING,
    TH_PAUSED,
    TH_BANNER, /* collapse / NaN banner (red) */
    TH_BANNER_WARN, /* warning banner (yellow): the clean router concentrates, an expert died */
    TH_BAR,    /* progress and load bars */
    TH_OVER,   /* demand above capacity */
    TH_CAP,    /* capacity line */
    TH_B_EMA,  /* compare: the second run's smoothed loss */
    TH_B_TEST, /* compare: the second run's test loss */
    TH_B_ACC,  /* compare: the second run's test accuracy */
    TH_SELECT, /* selected row of a list */
    TH_COUNT
} ThemeRole;

#define THEME_MAX_HEAT 10
#define THEME_MAX_CAT 12

typedef struct {
    int kind;       /* ThemeKind (views/prefs.h): dark, light or high-contrast */
    int color;      /* 1: colours in use */
    int colors256;  /* 1: 256-colour ramps */
    int utf8;       /* 1: braille / blocks / box glyphs */
    int default_bg; /* 1: the terminal's default colours (-1) are usable */
    attr_t role[TH_COUNT];
    int nheat;                              /* heat bins: 10 (256 colours), 6 (8 colours), 5 (glyphs) */
    attr_t heat[THEME_MAX_HEAT];            /* colour mode: a background colour with readable text */
    const char *heat_glyph[THEME_MAX_HEAT]; /* no-colour mode: one glyph per bin */
    int ncat;                               /* distinct categorical colours (0 without colour) */
    attr_t cat[THEME_MAX_CAT];              /* categorical colours (t-SNE experts / classes) */
    /* glyphs */
    const char *spark[8]; /* sparkline levels */
    const char *full;     /* full block or '#' */
    const char *dead;     /* dead-expert mark */
    const char *dot;      /* test-point marker */
    const char *vline;    /* capacity / now line */
} Theme;

/* Picks the mode from the terminal (has_colors, COLORS), the NO_COLOR environment variable and
 * `utf8`, and sets up colour pairs in the theme of view_prefs() (dark, light, high-contrast).
 * `no_color` forces the no-colour mode, and so does NO_COLOR whatever the theme. */
void theme_init(Theme *t, int utf8, int no_color);
/* Attribute of category i (cycling through ncat colours; A_NORMAL without colour). */
attr_t theme_cat(const Theme *t, int i);
/* Attribute of a heat bin in colour mode (A_NORMAL in no-colour mode). */
attr_t theme_heat(const Theme *t, int bin);
/* A short description ("256 colours", "8 colours", "no colour (NO_COLOR)", ...). */
const char *theme_describe(const Theme *t);

#endif
