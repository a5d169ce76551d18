/* panels.h — the panels of the live screen as one set, shared by the live screen (app/tui.c),
 * `moelab attach` (app/attach.c) and the session browser (app/browse.c): making them, feeding
 * them records, the routed layer shown, and drawing them into a layout.
 *
 * A run with two or more routed layers (ctx->nlayers >= 2) gets one set of the per-layer panels
 * (temperature, heatmap, load, scalars) for every layer, each with its own ViewCtx (the layer's
 * E, k, h, capacity) and fed with step_record_layer / eval_record_layer projections of every
 * record; v[p] of those panels is the selected layer's view (an alias: free with panels_free).
 * `[` / `]` (panels_key) cycle the layer, the layer's name is in the panel titles ("Class x
 * expert · moe2 (1/2)") and the all-layers strip (view_layers_class) sits under the panels. A run
 * with one routed layer or none has one set, fed the records as they are: the screen of before. */
#ifndef ML_VIEWS_PANELS_H
#define ML_VIEWS_PANELS_H

#include "views/view.h"

#define PANELS_NWIN (PANEL_COUNT + 1) /* persistent windows: the panels and the strip */

typedef struct {
    const ViewCtx *ctx;    /* the run's (owned by the caller, outlives the set) */
    View v[PANEL_COUNT];   /* by PanelId; PANEL_CMD has none */
    int have[PANEL_COUNT]; /* v[p] exists */
    int nlayers;           /* >= 2: one set of per-layer panels per layer */
    int sel;               /* the layer shown */
    ViewCtx lctx[REC_MAX_LAYERS];
    View lv[REC_MAX_LAYERS][PANEL_COUNT];
    int lhave[REC_MAX_LAYERS][PANEL_COUNT];
    View strip;
    int have_strip;
    WINDOW *win[PANELS_NWIN]; /* panels_draw(keep = 1): windows kept while their rectangle stays */
    Rect wrect[PANELS_NWIN];
} Panels;

/* 1 for the panels that come once per routed layer (temperature, heatmap, load, scalars). */
int panels_per_layer(int p);
/* Makes the set for ctx (ctx->nlayers, ctx->layer). 0, or -1 if out of memory (nothing left). */
int panels_init(Panels *ps, const ViewCtx *ctx);
/* Frees every view and window. Idempotent. */
void panels_free(Panels *ps);
/* 1 if the set has per-layer panels (two or more routed layers). */
int panels_layered(const Panels *ps);
/* A message to every view: STEP, EVAL and CURSOR projected to each layer for its panels. */
void panels_update(Panels *ps, const ViewMsg *m);
/* The temperature plan of routed layer `layer` (-1 or out of range: every layer) from at_step. */
void panels_plan(Panels *ps, const TauPlan *plan, long at_step, int layer);
/* Selects layer (sel + delta) mod nlayers. 1 if the selection changed. */
int panels_cycle(Panels *ps, int delta);
/* The keys of the panels with focus `focus`: `[` / `]` cycle the layer in a layered set (the
 * focused log scrolls instead), otherwise scroll the focused heatmap, load or log; `{` / `}`
 * always scroll it. 1 if used. */
int panels_key(Panels *ps, int focus, int c);
/* "moe2 (1/2)" for the per-layer panels of a layered set, "" otherwise. */
void panels_layer_tag(const Panels *ps, int p, char *buf, size_t n);
/* Panel p's title for a frame `width` cells wide: the view's title, in a layered set followed by
 * " · moe2 (1/2)", or " · moe2" when that does not fit; when neither fits the view's title is cut
 * (ending in "…"), never the layer's name. */
void panels_title(const Panels *ps, int p, int width, int focused, char *buf, size_t n);
/* Rows of the all-layers strip in a terminal of `lines` rows (0 without one). */
int panels_strip_rows(const Panels *ps, int lines);
/* Lays out the set for a cols x lines terminal (banner from the banner view, the strip). */
void panels_layout(const Panels *ps, Layout *lay, int cols, int lines, int zoom);
/* Draws every visible panel of lay but the command line, and the strip: status and banner bare,
 * the others framed with their title, the focused one marked. keep = 1: into the set's windows
 * (kept while their rectangle stays; the live screen and attach); 0: into windows made and
 * deleted for this frame (the browser). Each window gets wnoutrefresh; the caller does doupdate. */
void panels_draw(Panels *ps, const Layout *lay, int focus, int keep);
/* Deletes the kept windows (a too-small terminal, leaving the screen). */
void panels_drop_windows(Panels *ps);
/* The "terminal too small" notice on stdscr (centred, with an optional second line). */
void panels_too_small(const Theme *t, int cols, int lines, const char *line2);

#endif
