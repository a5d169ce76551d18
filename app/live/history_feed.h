/* history_feed.h — a session's history (sessions/history.c, read from live.h5) fed into the
 * panels of the live screen: the one loader behind `moelab attach` (the whole history, then what
 * each re-read adds) and the resumed live screen (the run before the resume). UI thread only. */
#ifndef ML_APP_HISTORY_FEED_H
#define ML_APP_HISTORY_FEED_H

#include "core/tau.h"
#include "sessions/history.h"
#include "views/panels.h"
#include "views/view.h"

/* How much of a history the views have seen (zero it before the first feed). */
typedef struct {
    long steps, events;
    int evals;
} HistoryFed;

/* The views' description of the run from its run record (trainer_describe): the live screen's
 * (c->plan is the caller's: the trainer's temperature plan). The capacity shown is the head's
 * (RunRecord.layer, computed once by the trainer), the batch without a routed head. */
void run_view_ctx(const RunRecord *rr, const Theme *theme, ViewCtx *c);

/* The views' description of the run from a loaded history (/run, the stored configuration and the
 * routed layers), for a live screen (browse = 0; the browser sets it); *base = the launch
 * temperature schedule. Returns 1 if that schedule was read from the session, 0 if it is the
 * default one (the configuration did not say). */
int history_view_ctx(const SessionHistory *h, const Theme *theme, ViewCtx *c, TauSchedule *base);

/* Feeds the rows not fed yet whose step is <= max_step (< 0: all) into the panels: step records,
 * evaluations (also as epoch lines in the log) and events (log lines "[step N] text", in step
 * order with the evaluations). base != NULL: the temperature panels get the plan rebuilt from the
 * launch schedule and the logged `set tau` / `anneal` commands. The one feed of the live screen's
 * resume, `moelab attach` and the browser. Returns the rows fed. */
long history_feed(const SessionHistory *h, Panels *ps, HistoryFed *fed, long max_step, const TauSchedule *base);
/* The temperature panels at `step`: each routed layer's plan rebuilt from the launch schedule and
 * the logged commands for it (those without an `@layer` suffix and its own). */
void history_plans(const SessionHistory *h, Panels *ps, const TauSchedule *base, long step);

#endif
