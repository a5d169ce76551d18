/* figs.h — the paper figures of `moelab plot`, drawn with the figure API (views/fig.h) from the
 * records of a loaded session (sessions/history.h: StepRecord, EvalRecord) or a sweep summary
 * (sessions/sweep_h5.h). Nothing here reads a file: app/plot.c loads the data (and runs the
 * t-SNE, and replays the temperature commands) and passes it in a FigRun.
 *
 * Every function writes one file (path, format) and returns ML_OK or an error with a message.
 * Sizes: FIG_COL_IN (3.5 in) wide for single-panel figures, FIG_PAGE_IN (7 in) for multi-panel
 * ones; the x axis of time series is the epoch (step / steps per epoch).
 *
 * Where and when (issue 26): the expert load and temperature figures shade the spans of logged steps
 * whose alarm was a collapse (light red) or a warning / expert death (light yellow), from the step
 * rows' alarm (core/records.h alarm_spans; an old session's collapsed rows are collapse), each span
 * running to the next logged step; a legend entry names each kind present. */
#ifndef ML_VIEWS_FIGS_H
#define ML_VIEWS_FIGS_H

#include "sessions/history.h"
#include "sessions/sweep_h5.h"
#include "views/fig.h"

#define FIGS_PLAN_N 256 /* samples of the planned temperature curve */
#define FIGS_MARKS 64   /* temperature commands marked */

typedef struct {
    const SessionHistory *h;
    const char *name; /* label in titles and legends */
    int layer_fig;    /* 1: one routed layer's figures (h's rows projected: its own alarm); 0: the run's
                       * (the alarm of any layer when there are several) */
    /* temperature (has_plan): the launch schedule and the plan in effect at the end of the run,
     * sampled at plan_step; the logged `set tau` / `anneal` commands with their step and text */
    int has_plan;
    double plan_step[FIGS_PLAN_N], plan_launch[FIGS_PLAN_N], plan_final[FIGS_PLAN_N];
    int nmarks;
    long mark_step[FIGS_MARKS];
    char mark_text[FIGS_MARKS][48];
    /* t-SNE of evaluation tsne_ev (tsne_n > 0): the 2-D map and each point's expert and class */
    int tsne_ev, tsne_n;
    const float *tsne_y;
    const int *tsne_expert, *tsne_label;
} FigRun;

/* Every figure drawn after this call 1 column (FIG_COL_IN) or 2 columns (FIG_PAGE_IN) wide; 0 (the
 * default): each kind its own width (multi-panel figures two columns, the others one). */
void figs_set_columns(int columns);

/* One session. ev is a row of /evals (class x expert). */
ml_status figs_curves(const FigRun *r, const char *path, FigFormat fmt);
ml_status figs_class_expert(const FigRun *r, int ev, const char *path, FigFormat fmt);
/* The training pairs capacity dropped since the start of evaluation ev's epoch, per class x
 * expert (drops: K*E counts, read by the caller: sessions/session.h session_read_drops); class
 * totals in the row labels. */
ml_status figs_drops(const FigRun *r, int ev, const int *drops, const char *path, FigFormat fmt);
ml_status figs_expert_load(const FigRun *r, const char *path, FigFormat fmt);
ml_status figs_temperature(const FigRun *r, const char *path, FigFormat fmt);
ml_status figs_tsne(const FigRun *r, int by_class, const char *path, FigFormat fmt);
ml_status figs_routing(const FigRun *r, const char *path, FigFormat fmt);

/* Several sessions (n <= FIG_NCAT): overlaid curves (colour, dash and marker per run); the class
 * x expert matrices of evaluation ev[i] of each MoE run in a grid; the final metrics as a table.
 * Each run is named r[i].name (app/plot: what differs between the runs' configurations); common
 * (NULL or "": none), what they share, is the curves' and the matrices' subtitle. */
ml_status figs_cmp_curves(const FigRun *r, int n, const char *common, const char *path, FigFormat fmt);
ml_status figs_cmp_heatmaps(const FigRun *r, const int *ev, int n, const char *common, const char *path,
                            FigFormat fmt);
ml_status figs_cmp_table(const FigRun *r, int n, const char *path, FigFormat fmt);

/* A sweep: the gap to the dense baseline with its 95% CI against rho (the realized rho when every configuration with a gap has one, else nominal; the axis label says which), one series per
 * value of the `backbone` axis (the paper's Fig. 2); and the gap with CI of every configuration
 * that has a baseline, in the order of the grid (the preset's axis). ML_ERR_ARG when the sweep
 * has no configuration with a gap (no head axis). */
ml_status figs_sweep_gap_rho(const SweepSummary *s, const char *title, const char *path, FigFormat fmt);
ml_status figs_sweep_configs(const SweepSummary *s, const char *title, const char *path, FigFormat fmt);

#endif
