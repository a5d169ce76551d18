/* history.h — a whole live.h5 read into memory for the session browser (`moelab browse`), and the
 * scrubber's data access: which evaluation, step row and events belong to a point of the run.
 *
 * session_history_load reads every /steps row (the common length of all step columns, so a file a
 * writer is appending to, or a crashed writer left ragged, still loads), every /evals row with its
 * class x expert matrix, the event log, the class names and the /run attributes the panels need.
 * Records are rebuilt as the StepRecord / EvalRecord the trainer published, so the views of the
 * live screen can be fed from a file exactly as from a running trainer. The t-SNE features are
 * large and read on demand, one evaluation at a time (session_history_tsne).
 *
 * Like every reader in sessions/, it opens read-only with SWMR-read: it works while a writer is
 * active, never modifies the file, and a damaged, truncated or foreign file gives ML_ERR_FORMAT
 * with a one-line message (never a crash). Re-loading a running session (to see what was written
 * since) is just another session_history_load. */
#ifndef ML_SESSIONS_HISTORY_H
#define ML_SESSIONS_HISTORY_H

#include "sessions/session.h"

typedef struct {
    char path[1024];    /* the .h5 file read */
    SessionInfo info;   /* as session_read_info */
    int K, E;           /* classes; experts (0 for a dense head) */
    char **class_names; /* (K) ml_alloc'd block (one ml_free) */
    /* /run attributes */
    int batch, d, log_every, tsne_samples;
    long steps_per_epoch, total_steps;
    double rho_nominal;
    int image_c, image_h, image_w, n_train, n_test;
    char command_line[4096];
    char config_json[8192];
    /* /steps: one StepRecord per row, with has_moe and moe.{B,E,k,training,demand,kept,mean_gate,
     * bias,capacity,dropless,drop_frac,...} filled from the columns (dense heads: has_moe = 0) */
    long nsteps;
    StepRecord *steps; /* (nsteps) ml_alloc'd */
    double *step_wall; /* (nsteps) /steps/wall_time */
    /* /evals: one EvalRecord per row; class_expert points into ce (MoE heads; NULL for dense);
     * the t-SNE pointers are NULL (see session_history_tsne) but tsne_n / feat_dim are set */
    int nevals;
    EvalRecord *evals; /* (nevals) */
    double *eval_wall; /* (nevals) */
    int *ce;           /* (nevals, K, E) */
    /* /events */
    long nevents;
    SessionEventRow *events; /* (nevents) malloc'd */
    /* the routed layers (format 2: /layers; a version-1 file with a routing head: the head, from
     * the top-level columns). steps[i].layer / evals[i].layer are filled (nlayers each), their
     * class_expert pointing into lce[l]; t-SNE pointers NULL (session_history_layer_tsne) */
    int nlayers;
    LayerInfo layer[REC_MAX_LAYERS]; /* name, stage, kind, E, k, h, capacity, rho_nominal, feat_dim */
    int *lce[REC_MAX_LAYERS];        /* (nevals, K, E_l); NULL where it is the top-level ce */
} SessionHistory;

/* Reads DIR/live.h5 (or a path to an .h5 file) into h (zeroed first). On error h is left empty
 * (safe to free) and the message is in ml_last_error(). */
ml_status session_history_load(const char *dir_or_file, SessionHistory *h);
void session_history_free(SessionHistory *h);

/* ---- the scrubber's data access (pure functions of a loaded history) */

/* Index of the evaluation whose epoch is `epoch`, or of the last one before it; -1 if none.
 * When several evaluations have that epoch (an `eval` command records the epochs completed, so
 * one during epoch e+1 has epoch e), the first of them: the end-of-epoch evaluation. Binary
 * search (evaluations are in step order). */
int session_history_eval_at_epoch(const SessionHistory *h, int epoch);
/* Index of the last /steps row with step <= `step` (the record in effect at that step); -1 when
 * every row is after it or there is none. Binary search (rows are in step order). */
long session_history_step_at(const SessionHistory *h, long step);
/* Events [*first, *last) within `before` events before and `after` events after the position of
 * `step` in the event log (the first event with a step > `step`). */
void session_history_events_around(const SessionHistory *h, long step, int before, int after, long *first, long *last);

/* The t-SNE sample of evaluation `ev` (0-based row of /evals): features (n, d) and the
 * first-choice expert and class of each sample, read from the file into new ml_alloc'd arrays
 * (free each with ml_free). ML_ERR_ARG if the session has no t-SNE datasets (dense head or
 * --tsne-samples 0) or ev is out of range. */
ml_status session_history_tsne(const SessionHistory *h, int ev, float **feat, int **expert, int **label, int *n,
                               int *d);

/* The same for routed layer l (its pooled router input; format 2). ML_ERR_ARG without one. */
ml_status session_history_layer_tsne(const SessionHistory *h, int l, int ev, float **feat, int **expert, int **label,
                                     int *n, int *d);

/* ---- following a running session (sessions/follow.c): only the rows appended since */

typedef struct SessionFollow SessionFollow; /* private */

/* What a follower did (tests). */
typedef struct {
    long polls; /* session_follow_poll calls */
    long rows;  /* rows appended (steps + evaluations + events) */
    long fails; /* polls that returned an error */
} SessionFollowStats;

/* Keeps h's file (h->path, a history loaded by session_history_load) open read-only with
 * SWMR-read to follow it. NULL with a message in ml_last_error() if it cannot be opened. */
SessionFollow *session_follow_open(SessionHistory *h);
/* Appends to h the /events, /steps and /evals rows the writer added since the last poll (or the
 * load), each dataset refreshed, never re-reading the rows h holds; the records are the ones a
 * whole session_history_load would give. h->info follows (status, counts). *added (may be NULL)
 * = rows appended. An error (the file replaced, rows dropped by a resume, a damaged read) leaves
 * h valid: close the follower, re-read with session_history_load and follow that. */
ml_status session_follow_poll(SessionFollow *f, SessionHistory *h, long *added);
void session_follow_stats(const SessionFollow *f, SessionFollowStats *out);
/* Closes the file (NULL: nothing). */
void session_follow_close(SessionFollow *f);

#endif
