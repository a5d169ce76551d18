/* theme.c — colour pairs, attributes and glyph sets (see theme.h), in three themes (prefs.h). */
#include "theme.h"
#include "views/prefs.h"

#include <stdlib.h>
#include <string.h>

#define PAIR_ROLE0 1  /* role r uses pair PAIR_ROLE0 + r */
#define PAIR_HEAT0 32 /* heat bin b uses pair PAIR_HEAT0 + b */
#define PAIR_CAT0 48  /* category i uses pair PAIR_CAT0 + i */

typedef struct {
    short fg8, bg8;     /* 8-colour pair (-1: terminal default) */
    attr_t a8;          /* extra attribute in 8-colour mode */
    short fg256, bg256; /* 256-colour pair */
    attr_t a256;
    attr_t mono; /* attribute without colour */
} RoleSpec;

/* dark (the default): bright colours on the terminal's own (dark) background */
static const RoleSpec role_dark[TH_COUNT] = {
    [TH_NORMAL] = {-1, -1, 0, -1, -1, 0, 0},
    [TH_TITLE] = {COLOR_CYAN, -1, A_BOLD, 81, -1, A_BOLD, A_BOLD},
    [TH_FOCUS] = {COLOR_BLACK, COLOR_YELLOW, A_BOLD, 16, 220, A_BOLD, A_REVERSE | A_BOLD},
    [TH_BORDER] = {COLOR_BLUE, -1, 0, 67, -1, 0, 0},
    [TH_AXIS] = {-1, -1, 0, 250, -1, 0, 0},
    [TH_DIM] = {-1, -1, A_DIM, 244, -1, 0, A_DIM},
    [TH_RAW] = {COLOR_BLUE, -1, A_BOLD, 61, -1, 0, 0},
    [TH_EMA] = {COLOR_CYAN, -1, A_BOLD, 51, -1, A_BOLD, A_BOLD},
    [TH_TEST] = {COLOR_YELLOW, -1, A_BOLD, 214, -1, A_BOLD, A_BOLD},
    [TH_ACC] = {COLOR_GREEN, -1, A_BOLD, 83, -1, A_BOLD, 0},
    [TH_PLAN] = {COLOR_CYAN, -1, 0, 67, -1, 0, 0},
    [TH_USED] = {COLOR_GREEN, -1, A_BOLD, 46, -1, A_BOLD, A_BOLD},
    [TH_OVERRIDE] = {COLOR_MAGENTA, -1, A_BOLD, 201, -1, A_BOLD, A_BOLD | A_UNDERLINE},
    [TH_NOW] = {COLOR_RED, -1, A_BOLD, 196, -1, A_BOLD, A_BOLD},
    [TH_GOOD] = {COLOR_GREEN, -1, 0, 77, -1, 0, 0},
    [TH_WARN] = {COLOR_YELLOW, -1, A_BOLD, 220, -1, A_BOLD, A_BOLD},
    [TH_ERROR] = {COLOR_RED, -1, A_BOLD, 203, -1, A_BOLD, A_BOLD},
    [TH_STATUS] = {COLOR_WHITE, COLOR_BLUE, 0, 255, 24, 0, A_REVERSE},
    [TH_RUNNING] = {COLOR_BLACK, COLOR_GREEN, 0, 16, 77, A_BOLD, A_BOLD},
    [TH_PAUSED] = {COLOR_BLACK, COLOR_YELLOW, 0, 16, 220, A_BOLD, A_BOLD | A_UNDERLINE},
    [TH_BANNER] = {COLOR_WHITE, COLOR_RED, A_BOLD, 231, 160, A_BOLD, A_REVERSE | A_BOLD},
    [TH_BANNER_WARN] = {COLOR_BLACK, COLOR_YELLOW, 0, 16, 220, 0, A_REVERSE},
    [TH_BAR] = {COLOR_CYAN, -1, 0, 38, -1, 0, 0},
    [TH_OVER] = {COLOR_RED, -1, A_BOLD, 196, -1, A_BOLD, A_BOLD},
    [TH_CAP] = {COLOR_YELLOW, -1, A_BOLD, 226, -1, A_BOLD, A_BOLD},
    [TH_B_EMA] = {COLOR_MAGENTA, -1, A_BOLD, 213, -1, A_BOLD, A_BOLD},
    [TH_B_TEST] = {COLOR_RED, -1, A_BOLD, 203, -1, A_BOLD, A_BOLD},
    [TH_B_ACC] = {COLOR_WHITE, -1, A_BOLD, 231, -1, A_BOLD, A_UNDERLINE},
    [TH_SELECT] = {COLOR_BLACK, COLOR_CYAN, 0, 16, 117, 0, A_REVERSE},
};

/* light: dark colours for a light background (no white or pale-yellow text) */
static const RoleSpec role_light[TH_COUNT] = {
    [TH_NORMAL] = {-1, -1, 0, -1, -1, 0, 0},
    [TH_TITLE] = {COLOR_BLUE, -1, A_BOLD, 25, -1, A_BOLD, A_BOLD},
    [TH_FOCUS] = {COLOR_WHITE, COLOR_BLUE, A_BOLD, 231, 25, A_BOLD, A_REVERSE | A_BOLD},
    [TH_BORDER] = {COLOR_BLUE, -1, 0, 103, -1, 0, 0},
    [TH_AXIS] = {-1, -1, 0, 238, -1, 0, 0},
    [TH_DIM] = {-1, -1, A_DIM, 243, -1, 0, A_DIM},
    [TH_RAW] = {COLOR_BLUE, -1, 0, 111, -1, 0, 0},
    [TH_EMA] = {COLOR_BLUE, -1, A_BOLD, 25, -1, A_BOLD, A_BOLD},
    [TH_TEST] = {COLOR_RED, -1, A_BOLD, 166, -1, A_BOLD, A_BOLD},
    [TH_ACC] = {COLOR_GREEN, -1, A_BOLD, 28, -1, A_BOLD, 0},
    [TH_PLAN] = {COLOR_BLUE, -1, 0, 67, -1, 0, 0},
    [TH_USED] = {COLOR_GREEN, -1, A_BOLD, 28, -1, A_BOLD, A_BOLD},
    [TH_OVERRIDE] = {COLOR_MAGENTA, -1, A_BOLD, 127, -1, A_BOLD, A_BOLD | A_UNDERLINE},
    [TH_NOW] = {COLOR_RED, -1, A_BOLD, 160, -1, A_BOLD, A_BOLD},
    [TH_GOOD] = {COLOR_GREEN, -1, 0, 28, -1, 0, 0},
    [TH_WARN] = {COLOR_MAGENTA, -1, A_BOLD, 130, -1, A_BOLD, A_BOLD},
    [TH_ERROR] = {COLOR_RED, -1, A_BOLD, 160, -1, A_BOLD, A_BOLD},
    [TH_STATUS] = {COLOR_WHITE, COLOR_BLUE, 0, 231, 25, 0, A_REVERSE},
    [TH_RUNNING] = {COLOR_WHITE, COLOR_GREEN, A_BOLD, 231, 28, A_BOLD, A_BOLD},
    [TH_PAUSED] = {COLOR_BLACK, COLOR_YELLOW, 0, 16, 214, A_BOLD, A_BOLD | A_UNDERLINE},
    [TH_BANNER] = {COLOR_WHITE, COLOR_RED, A_BOLD, 231, 160, A_BOLD, A_REVERSE | A_BOLD},
    [TH_BANNER_WARN] = {COLOR_BLACK, COLOR_YELLOW, 0, 16, 214, 0, A_REVERSE},
    [TH_BAR] = {COLOR_BLUE, -1, 0, 31, -1, 0, 0},
    [TH_OVER] = {COLOR_RED, -1, A_BOLD, 160, -1, A_BOLD, A_BOLD},
    [TH_CAP] = {COLOR_MAGENTA, -1, A_BOLD, 130, -1, A_BOLD, A_BOLD},
    [TH_B_EMA] = {COLOR_MAGENTA, -1, A_BOLD, 90, -1, A_BOLD, A_BOLD},
    [TH_B_TEST] = {COLOR_RED, -1, A_BOLD, 124, -1, A_BOLD, A_BOLD},
    [TH_B_ACC] = {COLOR_BLACK, -1, A_BOLD, 16, -1, A_BOLD, A_UNDERLINE},
    [TH_SELECT] = {COLOR_WHITE, COLOR_BLUE, 0, 16, 153, 0, A_REVERSE},
};

/* high-contrast: the brightest colours, bold text, black on white or yellow where highlighted */
static const RoleSpec role_high[TH_COUNT] = {
    [TH_NORMAL] = {COLOR_WHITE, -1, A_BOLD, 231, -1, 0, 0},
    [TH_TITLE] = {COLOR_WHITE, -1, A_BOLD, 231, -1, A_BOLD | A_UNDERLINE, A_BOLD | A_UNDERLINE},
    [TH_FOCUS] = {COLOR_BLACK, COLOR_YELLOW, A_BOLD, 16, 226, A_BOLD, A_REVERSE | A_BOLD},
    [TH_BORDER] = {COLOR_WHITE, -1, 0, 231, -1, 0, 0},
    [TH_AXIS] = {COLOR_WHITE, -1, 0, 231, -1, 0, 0},
    [TH_DIM] = {COLOR_WHITE, -1, 0, 252, -1, 0, 0},
    [TH_RAW] = {COLOR_CYAN, -1, 0, 45, -1, 0, 0},
    [TH_EMA] = {COLOR_CYAN, -1, A_BOLD, 51, -1, A_BOLD, A_BOLD},
    [TH_TEST] = {COLOR_YELLOW, -1, A_BOLD, 226, -1, A_BOLD, A_BOLD},
    [TH_ACC] = {COLOR_GREEN, -1, A_BOLD, 46, -1, A_BOLD, A_BOLD},
    [TH_PLAN] = {COLOR_CYAN, -1, A_BOLD, 51, -1, A_BOLD, 0},
    [TH_USED] = {COLOR_GREEN, -1, A_BOLD, 46, -1, A_BOLD, A_BOLD},
    [TH_OVERRIDE] = {COLOR_MAGENTA, -1, A_BOLD, 201, -1, A_BOLD, A_BOLD | A_UNDERLINE},
    [TH_NOW] = {COLOR_RED, -1, A_BOLD, 196, -1, A_BOLD, A_BOLD},
    [TH_GOOD] = {COLOR_GREEN, -1, A_BOLD, 46, -1, A_BOLD, A_BOLD},
    [TH_WARN] = {COLOR_YELLOW, -1, A_BOLD, 226, -1, A_BOLD, A_BOLD},
    [TH_ERROR] = {COLOR_RED, -1, A_BOLD, 196, -1, A_BOLD, A_BOLD},
    [TH_STATUS] = {COLOR_BLACK, COLOR_WHITE, A_BOLD, 16, 231, A_BOLD, A_REVERSE | A_BOLD},
    [TH_RUNNING] = {COLOR_BLACK, COLOR_GREEN, A_BOLD, 16, 46, A_BOLD, A_BOLD},
    [TH_PAUSED] = {COLOR_BLACK, COLOR_YELLOW, A_BOLD, 16, 226, A_BOLD, A_BOLD | A_UNDERLINE},
    [TH_BANNER] = {COLOR_WHITE, COLOR_RED, A_BOLD, 231, 196, A_BOLD, A_REVERSE | A_BOLD},
    [TH_BANNER_WARN] = {COLOR_BLACK, COLOR_YELLOW, A_BOLD, 16, 226, A_BOLD, A_REVERSE | A_BOLD},
    [TH_BAR] = {COLOR_CYAN, -1, A_BOLD, 51, -1, A_BOLD, 0},
    [TH_OVER] = {COLOR_RED, -1, A_BOLD, 196, -1, A_BOLD, A_BOLD},
    [TH_CAP] = {COLOR_YELLOW, -1, A_BOLD, 226, -1, A_BOLD, A_BOLD},
    [TH_B_EMA] = {COLOR_MAGENTA, -1, A_BOLD, 201, -1, A_BOLD, A_BOLD},
    [TH_B_TEST] = {COLOR_RED, -1, A_BOLD, 196, -1, A_BOLD, A_BOLD},
    [TH_B_ACC] = {COLOR_WHITE, -1, A_BOLD, 231, -1, A_BOLD, A_UNDERLINE},
    [TH_SELECT] = {COLOR_BLACK, COLOR_WHITE, A_BOLD, 16, 231, A_BOLD, A_REVERSE | A_BOLD},
};

static const RoleSpec *const role_specs[THEME_KIND_COUNT] = {role_dark, role_light, role_high};


/* categorical palettes: 12 distinguishable xterm colours (light: darker ones, no pale grey or
 * yellow); 6 basic colours (twice, bold) */
static const short cat256[THEME_MAX_CAT] = {39, 208, 76, 196, 141, 130, 211, 248, 184, 44, 27, 226};
static const short cat256_light[THEME_MAX_CAT] = {25, 166, 28, 160, 91, 94, 162, 240, 136, 30, 19, 130};
static const short cat8[6] = {COLOR_CYAN, COLOR_YELLOW, COLOR_GREEN, COLOR_RED, COLOR_MAGENTA, COLOR_BLUE};

/* viridis-like ramp in the xterm 6x6x6 cube, dark to bright */
static const short heat256[10] = {53, 54, 60, 24, 30, 36, 72, 77, 148, 220};
static const short heat8[6] = {COLOR_BLACK, COLOR_BLUE, COLOR_CYAN, COLOR_GREEN, COLOR_YELLOW, COLOR_RED};
static const short heat8_fg[6] = {COLOR_WHITE, COLOR_WHITE, COLOR_BLACK, COLOR_BLACK, COLOR_BLACK, COLOR_WHITE};

void theme_init(Theme *t, int utf8, int no_color) {
    memset(t, 0, sizeof *t);
    t->utf8 = utf8;
    const char *nc = getenv("NO_COLOR");
    const int want = !no_color && !(nc && *nc) && has_colors();
    if (want && start_color() == OK) {
        t->default_bg = use_default_colors() == OK;
        t->colors256 = COLORS >= 256 && COLOR_PAIRS >= PAIR_HEAT0 + THEME_MAX_HEAT;
        t->color = COLORS >= 8 && COLOR_PAIRS >= PAIR_HEAT0 + 6;
    }
    const ViewPrefs *pr = view_prefs();
    t->kind = pr->theme >= 0 && pr->theme < THEME_KIND_COUNT ? pr->theme : THEME_DARK;
    const RoleSpec *spec = role_specs[t->kind];
    for (int r = 0; r < TH_COUNT; r++) {
        const RoleSpec *s = &spec[r];
        if (!t->color) {
            t->role[r] = s->mono;
            continue;
        }
        const short pair = (short)(PAIR_ROLE0 + r);
        short fg = t->colors256 ? s->fg256 : s->fg8, bg = t->colors256 ? s->bg256 : s->bg8;
        if (!t->default_bg) { /* no "default colour" (-1): assume white on black */
            if (fg < 0) fg = COLOR_WHITE;
            if (bg < 0) bg = COLOR_BLACK;
        }
        init_pair(pair, fg, bg);
        t->role[r] = COLOR_PAIR(pair) | (t->colors256 ? s->a256 : s->a8);
    }
    if (t->colors256) {
        t->nheat = 10;
        for (int b = 0; b < 10; b++) {
            init_pair((short)(PAIR_HEAT0 + b), b < 5 ? 231 : 16, heat256[b]);
            t->heat[b] = COLOR_PAIR(PAIR_HEAT0 + b);
        }
    } else if (t->color) {
        t->nheat = 6;
        for (int b = 0; b < 6; b++) {
            init_pair((short)(PAIR_HEAT0 + b), heat8_fg[b], heat8[b]);
            t->heat[b] = COLOR_PAIR(PAIR_HEAT0 + b);
        }
    } else {
        t->nheat = 5;
    }
    if (t->color && COLOR_PAIRS >= PAIR_CAT0 + THEME_MAX_CAT) {
        t->ncat = t->colors256 ? THEME_MAX_CAT : 2 * 6;
        for (int i = 0; i < THEME_MAX_CAT; i++) {
            const short fg = t->colors256 ? (t->kind == THEME_LIGHT ? cat256_light : cat256)[i] : cat8[i % 6];
            init_pair((short)(PAIR_CAT0 + i), fg, t->default_bg ? -1 : COLOR_BLACK);
            t->cat[i] = COLOR_PAIR(PAIR_CAT0 + i) | (!t->colors256 && i >= 6 ? A_BOLD : 0);
        }
    }
    static const char *const glyph_u[5] = {" ", "\u2591", "\u2592", "\u2593", "\u2588"};
    static const char *const glyph_a[5] = {" ", ".", ":", "*", "#"};
    static const char *const spark_u[8] = {"\u2581", "\u2582", "\u2583", "\u2584",
                                           "\u2585", "\u2586", "\u2587", "\u2588"};
    static const char *const spark_a[8] = {"_", ".", ",", "-", "~", "+", "*", "#"};
    for (int b = 0; b < 5; b++) t->heat_glyph[b] = utf8 ? glyph_u[b] : glyph_a[b];
    for (int i = 0; i < 8; i++) t->spark[i] = utf8 ? spark_u[i] : spark_a[i];
    t->full = utf8 ? "\u2588" : "#";
    t->dead = utf8 ? "\u2717" : "x";
    t->dot = utf8 ? "\u25cf" : "o";
    t->vline = utf8 ? "\u2502" : "|";
}

attr_t theme_cat(const Theme *t, int i) {
    if (t->ncat <= 0) return A_NORMAL;
    if (i < 0) i = -i;
    return t->cat[i % t->ncat];
}

attr_t theme_heat(const Theme *t, int bin) {
    if (!t->color || t->nheat <= 0) return A_NORMAL;
    if (bin < 0) bin = 0;
    if (bin >= t->nheat) bin = t->nheat - 1;
    return t->heat[bin];
}

const char *theme_describe(const Theme *t) {
    const char *nc = getenv("NO_COLOR");
    if (!t->color) return nc && *nc ? "no colour (NO_COLOR)" : "no colour";
    static const char *const d[THEME_KIND_COUNT][2] = {{"8 colours", "256 colours"},
                                                       {"8 colours, light", "256 colours, light"},
                                                       {"8 colours, high-contrast", "256 colours, high-contrast"}};
    return d[t->kind][t->colors256 ? 1 : 0];
}
