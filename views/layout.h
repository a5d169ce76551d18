/* layout.h — where each panel of the live screen goes, as pure geometry (no curses).
 *
 * The screen is a status bar (2 rows) at the top, an optional one-row banner under it (collapse
 * or NaN warnings), the panels, a log panel and the one-row command line at the bottom. Panels
 * tile the rows between the banner and the log in two rows whose column split depends on the
 * terminal width; a dense-head run has the curves and a note panel instead of the routing panels.
 * A zoomed panel takes every row between the banner and the command line. Hidden panels (the
 * config file's `hide`) leave their width to the others of their row, a hidden row its height to
 * the other one, a hidden log its rows to the panels. Below
 * LAYOUT_MIN_W x LAYOUT_MIN_H the layout is `too_small` and no panel is placed.
 *
 * Rectangles are in terminal cells, (x, y) the top-left corner; w == 0 or h == 0 means hidden. */
#ifndef ML_VIEWS_LAYOUT_H
#define ML_VIEWS_LAYOUT_H

#define LAYOUT_MIN_W 80
#define LAYOUT_MIN_H 24

typedef struct {
    int x, y, w, h;
} Rect;

typedef enum {
    PANEL_STATUS,  /* 2 rows at the top */
    PANEL_BANNER,  /* 1 row under the status bar when a warning is up */
    PANEL_CURVES,  /* loss / accuracy */
    PANEL_TEMP,    /* temperature schedule */
    PANEL_HEATMAP, /* class x expert */
    PANEL_LOAD,    /* expert load over time */
    PANEL_SCALARS, /* routing scalars with sparklines (dense: training scalars + note) */
    PANEL_LOG,     /* log lines */
    PANEL_CMD,     /* command line, last row */
    PANEL_COUNT
} PanelId;

typedef struct {
    int has_moe; /* routing panels shown */
    int banner;  /* banner rows under the status bar: 0, 1, or 2 (a message too long for one row) */
    int zoom;    /* a panel id to zoom, or -1 */
    int strip;   /* rows of the all-layers strip (0: none): full width under the panels, above the log */
    /* the user's preferences (views/prefs.h; zero: the defaults) */
    unsigned hide; /* bit p: panel p (PANEL_CURVES .. PANEL_LOG) hidden; its row's others share its width */
    int log_rows;  /* the log's rows (0: lines / 5 in 5..12; at most a third of the screen) */
    int top_share; /* percent (20..80) of the panel rows for the first row (0: half) */
} LayoutOptions;

typedef struct {
    int cols, lines;
    int too_small; /* below LAYOUT_MIN_W x LAYOUT_MIN_H: nothing placed */
    Rect r[PANEL_COUNT];
    Rect strip; /* the all-layers strip (empty without one) */
} Layout;

/* Computes the panel rectangles for a cols x lines terminal. Returns 0, or -1 when the terminal
 * is too small (l->too_small set, every rectangle empty). A zoom on a panel that the layout does
 * not show is ignored. */
int layout_compute(Layout *l, int cols, int lines, const LayoutOptions *o);
/* Rows of the all-layers strip for a terminal of `lines` rows: at most (lines - 20) / 2, 1..5. */
int layout_strip_budget(int lines);
/* 1 if the panel has a non-empty rectangle. */
int layout_visible(const Layout *l, int panel);
/* The next focusable panel (curves .. log, in screen order) after `cur` that is visible; `cur`
 * itself if no other is. -1 in a too-small layout. */
int layout_next_focus(const Layout *l, int cur);
/* Short name of a panel ("curves", "temperature", ...). */
const char *layout_panel_name(int panel);
/* ---- the session browser's compare screen: status (2 rows), the overlaid curves with the
 * scalar difference table to their right, the two class x expert heatmaps side by side under
 * them, and a hint row at the bottom. */
typedef enum { CMP_STATUS, CMP_CURVES, CMP_DIFF, CMP_HEAT_A, CMP_HEAT_B, CMP_HINT, CMP_COUNT } ComparePanel;
typedef struct {
    int cols, lines;
    int too_small;
    Rect r[CMP_COUNT];
} CompareLayout;
/* 0, or -1 below LAYOUT_MIN_W x LAYOUT_MIN_H (too_small, every rectangle empty). The panels tile
 * the screen without overlap; the diff table is 40..52 columns wide. */
int layout_compare(CompareLayout *l, int cols, int lines);

/* 1 if the two rectangles overlap. */
int rect_overlap(Rect a, Rect b);

#endif
