/* browse.h — `moelab browse`: the session browser (browse.c) and its terminal-free data side
 * (browse_data.c: the session list, sorting, filtering, the stored configuration and the
 * temperature plan at a step). */
#ifndef ML_APP_BROWSE_H
#define ML_APP_BROWSE_H

#include <stddef.h>

#include "core/tau.h"
#include "sessions/history.h"
#include "sessions/session.h"

#define BROWSE_STALE_SEC 600.0 /* "running" with no write for this long: shown as stale */
#define BROWSE_JSON_MAX 16384

typedef struct {
    char name[512];  /* shown: the folder relative to the browsed root */
    char path[1100]; /* session folder (or .h5 file) */
    int ok;          /* info was read */
    SessionInfo info;
    char status[16]; /* running finished interrupted failed stale damaged unsupported missing */
    char sched[24];  /* the last temperature plan in force (browse_sched_label) */
    char conf[4096]; /* the stored configuration flattened, "model.head.E=4\n..." (for the filter) */
    char err[512];   /* why it is damaged / stale ("" otherwise) */
    double mtime;    /* live.h5 modification time (Unix s) */
    int marked;      /* compare mark */
    int alarms_ok;   /* alarms was read (the event log) */
    AlarmCounts alarms; /* alarm events by kind from the event log (core/records.h) */
} BrowseEntry;

typedef struct {
    BrowseEntry *e;
    int n, cap;
} BrowseList;

enum {
    BCOL_NAME,
    BCOL_DATASET,
    BCOL_HEAD,
    BCOL_EXPERTS,
    BCOL_SCHED,
    BCOL_BEST,
    BCOL_LAST,
    BCOL_EPOCHS,
    BCOL_STATUS,
    BCOL_ALARMS, /* episodes by severity: "2C 1W 1D" (collapse, warning, expert death), "-" for none */
    BCOL_CREATED,
    BCOL_COUNT
};

/* Fills the list with the sessions under `root` (folders holding live.h5, 4 levels deep at most),
 * or with the runs of a sweep summary when root is a sweep.h5, and reads each one's summary
 * (damaged files become entries with status "damaged" and the reason in err). 0, or -1 when root
 * cannot be read (message in ml_last_error()). */
int browse_list_scan(BrowseList *l, const char *root);
void browse_list_free(BrowseList *l);
/* Re-reads one entry's summary and status (now: Unix time, for "stale"). The file is read in a
 * child process: a file that crashes libhdf5 or makes it hang (session_probe_timeout_ms: 30 s) becomes a "damaged" entry
 * with that reason, and the caller lives on. */
void browse_entry_read(BrowseEntry *e, double now);
/* Loads the whole session in a child process first (session_probe, SESSION_PROBE_HISTORY): 0 if
 * the caller's own session_history_load may go ahead (it loads, or fails with its own message),
 * -1 with the reason (a crash of the HDF5 library, a timeout) in err. */
int browse_probe_history(const char *path, char *err, size_t n);
/* Sorts by column col (reverse: descending). Entries without a value in the column (unreadable;
 * no evaluation for the accuracy columns; no event log read for alarms) go last in both directions,
 * by name. Alarms sort by collapse episodes, then warnings, then expert deaths. */
void browse_list_sort(BrowseList *l, int col, int reverse);
/* 1 if the entry has no value in column col (see browse_list_sort). */
int browse_missing(const BrowseEntry *e, int col);
int browse_entry_cmp(const BrowseEntry *a, const BrowseEntry *b, int col);
/* 1 if the filter text occurs (case-insensitive) in the name, dataset, head, schedule, status or
 * "E<e> k<k> h<h>", or is a value of the stored configuration (the whole value, any case), or,
 * written KEY=VALUE, the configuration has a key that is KEY or ends in ".KEY" with that value
 * (numbers compared as numbers: lr.base=0.05 matches 5e-2). A leading '!' inverts the filter;
 * an empty filter (or "!") matches everything. */
int browse_entry_match(const BrowseEntry *e, const char *filter);
/* The list's cells of an entry, as shown and printed. */
void browse_entry_cells(const BrowseEntry *e, char cells[BCOL_COUNT][64]);
const char *browse_col_name(int c);
int browse_col_parse(const char *s); /* -1 if unknown */

/* The launch temperature schedule stored in a session's config_json (tau.kind and any of the
 * other tau{} fields; absent ones keep tau_schedule_defaults). 0, or -1 if the text is not JSON,
 * has no tau.kind, a field of the wrong type or a schedule tau_validate refuses (the reason is
 * in ml_last_error()). */
int browse_tau_schedule(const char *config_json, TauSchedule *s);
/* The temperature plan in effect at `step`: the launch schedule with the session's logged `set tau`
 * and `anneal` commands up to that step applied, as the trainer applied them: the plan of the
 * primary routed layer (the head when it routes, else the first backbone layer). */
void browse_plan_at(const SessionHistory *h, const TauSchedule *base, long step, TauPlan *plan);
/* The schedule column: the last temperature plan in force at the end of the event log: the
 * launch kind, "KIND*" after an `anneal KIND ...` (a live change), "tau=V" after a `set tau V`;
 * commands for a backbone layer alone (`@moe2`) are not the head's and are skipped. */
void browse_sched_label(const char *launch_kind, const SessionEventRow *ev, long nev, char *out, size_t n);
/* The name of the primary routed layer (the head when it routes, else the first backbone layer;
 * "head" for a session without layers). */
const char *browse_primary_layer(const SessionHistory *h);
/* The same for one routed layer: only the commands without an `@layer` suffix or with `@layer`
 * (layer NULL: every command, as browse_plan_at). */
void browse_plan_at_layer(const SessionHistory *h, const TauSchedule *base, long step, const char *layer,
                          TauPlan *plan);

int cmd_browse(int argc, char **argv);

#endif
