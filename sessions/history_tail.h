/* history_tail.h — private to sessions/: appending to a loaded history the rows its writer added
 * since (the incremental reader behind session_follow_poll, sessions/follow.c). */
#ifndef ML_SESSIONS_HISTORY_TAIL_H
#define ML_SESSIONS_HISTORY_TAIL_H

#include <hdf5.h>

#include "history.h"

/* The elements the arrays of a followed history hold (they grow geometrically), and its parsed
 * config_json (for the capacity factor of new step rows; NULL: unknown). */
typedef struct {
    long steps, evals, events;
    struct json_t *cfg;
} SessTailCap;

/* Appends to h (loaded by session_history_load from this file, then only grown by this function)
 * the /events, /steps and /evals rows written since, read from the open SWMR-read file f
 * (each dataset refreshed), rebuilt exactly as session_history_load rebuilds them, and refreshes
 * h->info (status, row counts, last and best figures). Rows already held are never re-read.
 * ML_ERR_FORMAT when a dataset has fewer rows than h holds (a resume dropped them: re-read the
 * whole file) or cannot be read; h then still holds valid rows (some may have been appended). */
ml_status session_history_tail(hid_t f, const char *path, SessionHistory *h, SessTailCap *cap);

#endif
