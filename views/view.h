/* view.h — the panels of the live screen as small vtables (htop's MeterClass pattern; README "The live screen"):
 *
 *   update(view, msg)      takes an immutable record (a StepRecord, EvalRecord, tau plan, log line
 *                          or the run status) and folds it into the view's own history;
 *   draw(view, win, rect)  draws that history into `rect` of `win` (the panel's inside; the
 *                          frame and title are drawn by the caller with draw_frame);
 *   on_key(view, key)      a key for the focused panel; returns 1 if used.
 *
 * Views never see the Trainer: everything they know arrives through update() as copies made by
 * the trainer thread (app/tui_worker.c) and handed over on the UI thread. Only the UI thread
 * calls these functions. Histories are fixed-capacity rings and decimating series (ring.h). */
#ifndef ML_VIEWS_VIEW_H
#define ML_VIEWS_VIEW_H

#include <stdio.h>
#include <curses.h>

#include "core/records.h"
#include "views/layout.h"
#include "views/theme.h"

/* What the views know about the run; filled once before training starts, constant after. */
typedef struct {
    const Theme *theme;
    char dataset[96]; /* "synthetic 16x16x3" */
    int classes;
    char *const *class_names; /* (classes), owned by the Dataset (outlives the screen) */
    int n_train, n_test;
    char model[96]; /* "dw w=0.25 d=64" */
    char head[96];  /* "moe E=4 k=2 h=16 cf=1.25" */
    int has_moe;
    int E, k, h;
    int capacity; /* training slots per expert per batch (B when dropless) */
    int batch, epochs, log_every;
    int ranks; /* processes of a data-parallel run (0 or 1: one); a step's capacity is one rank's, its
                  demand and kept counts the sums over ranks */
    long steps_per_epoch, total_steps;
    double rho_nominal;
    double collapse_entropy, collapse_share; /* the run's thresholds (--collapse-entropy, --collapse-share):
                                                the routing panel paints a value past them red */
    int dead_window;                 /* records (not steps) in the dead-expert window */
    TauPlan plan;                    /* the temperature plan at launch */
    float lr0;                       /* peak learning rate */
    int browse;                      /* 1: a saved session (the marker is a cursor, not "now") */
    char slot_name[2][48];           /* compare: names of the two runs in legends ("" when alone) */
    int nlayers;                     /* routed layers (RunRecord.layer); 0: none or an old producer */
    LayerInfo layer[REC_MAX_LAYERS]; /* their names, E, k, h, capacity */
    int layer_view;                  /* the per-layer contexts of views/panels.c: layer + 1 (0: the run) */
} ViewCtx;

/* Live state of the run shown by the status bar (refreshed every frame). */
typedef struct {
    const char *state;   /* "RUNNING", "PAUSED", "FINISHED", ... */
    int state_role;      /* ThemeRole of the state badge */
    long step;           /* steps completed */
    int epoch;           /* epochs completed */
    double img_per_s;    /* recent training throughput (0: unknown) */
    double eta;          /* seconds to the end (< 0: unknown) */
    double elapsed;      /* seconds since the screen opened */
    const char *session; /* session folder, "" when there is none */
    const char *note;    /* short extra text (e.g. "stopping: writing checkpoint"), may be NULL */
} RunStatus;

typedef enum {
    VIEW_MSG_STEP,   /* step */
    VIEW_MSG_EVAL,   /* eval (class_expert valid during the call only: copy it) */
    VIEW_MSG_PLAN,   /* plan: the temperature plan in effect from at_step on */
    VIEW_MSG_LOG,    /* level (LOG_*) + text */
    VIEW_MSG_STATUS, /* status */
    VIEW_MSG_CURSOR, /* browser: at_step = the point of the run shown; eval = the evaluation at
                          it (or NULL), step = the step record in effect at it (or NULL) */
} ViewMsgKind;

enum { VIEW_LOG_INFO, VIEW_LOG_WARN, VIEW_LOG_ERROR, VIEW_LOG_CMD, VIEW_LOG_EPOCH };

typedef struct {
    ViewMsgKind kind;
    const StepRecord *step;
    const EvalRecord *eval;
    const TauPlan *plan;
    long at_step;
    int level;
    const char *text;
    const RunStatus *status;
    int slot; /* STEP / EVAL: 0 = the run, 1 = a second run overlaid (compare; curves only) */
} ViewMsg;

typedef struct View View;

typedef struct {
    const char *name;     /* default panel title */
    int (*init)(View *v); /* allocates v->self; 0 or -1 */
    void (*free)(View *v);
    void (*update)(View *v, const ViewMsg *m); /* may be NULL */
    void (*draw)(View *v, WINDOW *w, Rect r);
    int (*on_key)(View *v, int key);                   /* may be NULL */
    void (*title)(const View *v, char *buf, size_t n); /* may be NULL: name is used */
} ViewClass;

struct View {
    const ViewClass *cls;
    const ViewCtx *ctx;
    void *self;
};

extern const ViewClass view_status_class;  /* status bar (2 rows, no frame) */
/* The status bar's progress bar as last drawn (the browser's epoch scrubber), in screen cells:
 * 1 with its first cell *x, width *w and row *y, or 0 when none was drawn. */
int view_status_bar(const View *v, int *x, int *w, int *y);
extern const ViewClass view_banner_class;  /* collapse / NaN banner (1 row, no frame) */
extern const ViewClass view_curves_class;  /* loss and accuracy */
extern const ViewClass view_heatmap_class; /* class x expert of the last evaluation */
extern const ViewClass view_load_class;    /* expert load over time */
extern const ViewClass view_temp_class;    /* temperature: plan, used, override, now */
extern const ViewClass view_scalars_class; /* routing scalars + sparklines (dense: training) */
extern const ViewClass view_log_class;     /* log lines */
/* The log's filter: only the lines holding text (any case) are shown, or with a leading '!' only
 * the others; "" shows every line again. The newest line shown is the current match. */
void view_log_filter(View *v, const char *text);
int view_log_filtering(const View *v); /* 1 while a filter is set (n / N then move between matches) */
extern const ViewClass view_help_class;    /* help overlay */
extern const ViewClass view_tsne_class;    /* t-SNE scatter of an evaluation's test features */
extern const ViewClass view_diff_class;    /* compare: routing scalars of two runs and B - A */
extern const ViewClass view_multi_class;   /* compare of 3..8 runs: curves overlaid (views/view_multi.c) */
extern const ViewClass view_layers_class;  /* the all-layers strip: one line per routed layer (no frame) */

/* view_layers: the selected layer (marked in the strip). */
void view_layers_select(View *v, int sel);
/* view_layers: rows the strip wants in a rect of `rows` rows at most: ctx->nlayers when they all
 * fit, else 1 (the one-line summary with its "+N layers" marker). */
int view_layers_rows(const ViewCtx *ctx, int rows);

/* view_multi: at most VIEW_MULTI_MAX runs; STEP / EVAL messages carry the run in .slot. */
#define VIEW_MULTI_MAX 8
void view_multi_set(View *v, int n, const char *const *names); /* the runs' names (legend) */
void view_multi_cursor(View *v, int epoch);                    /* the epoch marker */
const char *view_multi_glyph(const Theme *t, int i);           /* run i's glyph: ● ■ ▲ ... or A B C ... */
attr_t view_multi_attr(const Theme *t, int i);                 /* run i's colour (bold without colour) */

/* Creates a view of class cls (calls cls->init). 0, or -1 if out of memory. */
int view_init(View *v, const ViewClass *cls, const ViewCtx *ctx);
void view_free(View *v);
void view_update(View *v, const ViewMsg *m);
void view_draw(View *v, WINDOW *w, Rect r);
int view_on_key(View *v, int key);
void view_title(const View *v, char *buf, size_t n);

/* The panels of the live screen (status, banner, curves, scalars, log; with a router also
 * temperature, heatmap and load) in v[PanelId], have[p] = 1 for each one made. 0, or -1 if out of
 * memory (nothing left allocated). */
int view_make_panels(View v[PANEL_COUNT], int have[PANEL_COUNT], const ViewCtx *ctx);
/* The expert the alarm of step record r names (the banner's: the first "eN" word of its
 * collapse_text, or the one after "(now " when the episode's expert changed), -1 when r has no alarm. A stored step without the message (attach, the browser)
 * falls back to its columns: the largest first-choice count of the flagged view (training: noisy,
 * clean router: clean), else the lowest dead expert. The heatmap and load panels scroll to it. */
int view_alarm_expert(const StepRecord *r);
void view_free_panels(View v[PANEL_COUNT], int have[PANEL_COUNT]);

/* Banner text for the banner view: set by the UI for non-record conditions (NaN pause).
 * NULL or "" clears it; the collapse flag of the last StepRecord shows otherwise. */
void view_banner_set_note(View *v, const char *text);
/* 1 if the banner view has something to show (collapse or a note). */
int view_banner_active(const View *v);
/* Rows the banner needs at this width: 0 (nothing to say), 1, or 2 (an alarm message too long for
 * one row wraps at a word: the view, the expert and the share stay whole). */
int view_banner_rows(const View *v, int width);
/* t-SNE view: the embedding Y (n, 2) of evaluation `epoch` with each point's first-choice expert
 * and class (copied). Y == NULL keeps the last embedding and only sets the message; a non-empty
 * msg ("computing...", an error) is shown instead of the plot; info is a line above it,
 * segments separated by "\n" that are dropped whole (the later first, with "…") when it is short. */
void view_tsne_set(View *v, const float *Y, const int *expert, const int *label, int n, int epoch, const char *msg,
                   const char *info);
/* 1 if the t-SNE view colours by class (key c), 0 by expert. */
int view_tsne_by_class(const View *v);
/* Compare view: the evaluations of runs A and B at the same epoch (either may be NULL: missing). */
void view_diff_set(View *v, const EvalRecord *a, const EvalRecord *b);
/* Help overlay geometry: the box size it wants (clamped by the caller to the screen). */
void view_help_size(int *w, int *h);
/* The same for the live screen (browse 0) or the session browser (browse 1). */
void view_help_size_for(int browse, int *w, int *h);

#endif
