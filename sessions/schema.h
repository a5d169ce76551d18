/* schema.h — private description of live.h5 shared by the writer, the readers and the exporter:
 * the column tables of /steps and /evals, how a record maps to a row, the per-expert step
 * datasets and the /events compound type. README.md ("The session format") documents the same
 * layout. A new column is one enum value and one table row (schema.c); a new routing statistic is
 * a MOE_STEP_SCALARS row (core/moe.h), which makes its columns here. */
#ifndef ML_SESSIONS_SCHEMA_H
#define ML_SESSIONS_SCHEMA_H

#include <hdf5.h>

#include "core/records.h"

/* Where a column's value lives in its record (StepRecord for /steps, EvalRecord for /evals). */
/* SF_ROW: the row's step, for the per-layer tables (a StepLayer / EvalLayer has no step). */
typedef enum { SF_WALL, SF_F64, SF_F32, SF_I32, SF_I64, SF_ROW } SessField;

typedef struct {
    const char *name; /* dataset name under /steps or /evals */
    int is_int;       /* stored as int64 (else float64) */
    const char *desc; /* `description` attribute */
    SessField field;  /* the record member's type (SF_WALL: the row's wall_time, not in the record) */
    size_t off;       /* offsetof the member in the record */
    int optional;     /* added after format_version 1's first release: older sessions lack it
                         * (readers leave the member 0, appends to such a session skip it) */
} SessCol;
/* The value of column c in record rec, and the reverse (ints clamped to their type); wall_time
 * is also the value of an SF_ROW column. */
double sess_col_get(const SessCol *c, const void *rec, double wall_time);
void sess_col_set(const SessCol *c, void *rec, double v);

/* The columns that are MoeStepStats scalars come from MOE_STEP_SCALARS (core/moe.h): SC_MOE_<member>
 * in /steps (rows with cols ALL, ALL_V1X or NEW), LSC_MOE_<member> in the layers' steps (every
 * row). */
#define SESS_STAT_ENUM_ALL(p, m) p##m,
#define SESS_STAT_ENUM_ALL_V1X(p, m) p##m,
#define SESS_STAT_ENUM_NEW(p, m) p##m,
#define SESS_STAT_ENUM_LAYER(p, m)
#define SESS_STEP_ENUM_(T, m, cols, dist, label, fmt, scale, warn, desc) SESS_STAT_ENUM_##cols(SC_MOE_, m)
#define SESS_LAYER_ENUM_(T, m, cols, dist, label, fmt, scale, warn, desc) LSC_MOE_##m,
enum {
    SC_STEP,
    SC_EPOCH,
    SC_EPOCH_PROGRESS,
    SC_LOSS,
    SC_LOSS_TOTAL,
    SC_ACC,
    SC_LR,
    SC_TAU,
    SC_IMG_PER_S,
    MOE_STEP_SCALARS(SESS_STEP_ENUM_)
    SC_RHO_REALIZED,
    SC_DEAD_EXPERTS,
    SC_COLLAPSED,
    SC_COLLAPSE_REASON,
    SC_WINDOW_LOAD_ENTROPY,
    SC_WALL_TIME,
    SC_COLLAPSE_VIEWS,
    SC_COLLAPSE_FIRST_STEP,
    SC_ALARM,
    SC_DEAD_MASK,
    SC_FORECAST,
    SC_TREND,
    SC_N
};
extern const SessCol sess_step_cols[SC_N];
/* One /steps row (every column as double; int columns hold exact integers). */
void sess_step_row(const StepRecord *r, double wall_time, double *v);

/* Per-expert step datasets [T, E]. */
enum { SV_DEMAND, SV_KEPT, SV_MEAN_GATE, SV_BIAS, SV_N };
extern const SessCol sess_step_vecs[SV_N]; /* is_int: int32, else float32 */

enum {
    EC_EPOCH,
    EC_STEP,
    EC_TRAIN_LOSS,
    EC_TRAIN_ACC,
    EC_TEST_LOSS,
    EC_TEST_ACC,
    EC_IMG_PER_S,
    EC_EPOCH_SECONDS,
    EC_ELAPSED,
    EC_RHO_NOMINAL,
    EC_TRAIN_DROP_FRAC,
    EC_TRAIN_MAXVIO,
    EC_TRAIN_RHO_REALIZED,
    EC_WINDOW_LOAD_ENTROPY,
    EC_DEAD_EXPERTS,
    EC_COLLAPSED,
    EC_COLLAPSE_REASON,
    EC_MUTUAL_INFO,
    EC_TEST_LOAD_ENTROPY,
    EC_WALL_TIME,
    EC_TEST_FIRST_SHARE,
    EC_TEST_DEAD_FIRST,
    EC_TEST_DEAD_TOPK,
    EC_COLLAPSE_VIEWS,
    EC_COLLAPSE_FIRST_STEP,
    EC_COLLAPSE_FIRST_TRAIN,
    EC_COLLAPSE_FIRST_CLEAN,
    EC_COLLAPSE_FIRST_EVAL,
    EC_EPOCH_TAU,
    EC_EPOCH_L_AUX,
    EC_EPOCH_CLEAN_FIRST_SHARE,
    EC_ALARM,
    EC_DEAD_MASK,
    EC_N
};
extern const SessCol sess_eval_cols[EC_N];
void sess_eval_row(const EvalRecord *r, double wall_time, double *v);

/* ---- format_version 2: per routed layer (RunRecord.layer), /layers/<name>/steps/<col> and
 * /layers/<name>/evals/<col>. The offsets are StepLayer's / EvalLayer's (the step column: SF_ROW;
 * the epoch is /evals/epoch of the same row); per-expert vectors
 * /layers/<name>/steps/{demand,kept,mean_gate,bias} (T, E_layer) and per evaluation
 * /layers/<name>/evals/class_expert (N, K, E_layer), tsne_features (N, n, C_layer), tsne_expert
 * (N, n). */
enum {
    LSC_STEP,
    MOE_STEP_SCALARS(SESS_LAYER_ENUM_)
    LSC_RHO_REALIZED,
    LSC_DEAD_EXPERTS,
    LSC_COLLAPSED,
    LSC_COLLAPSE_REASON,
    LSC_WINDOW_LOAD_ENTROPY,
    LSC_COLLAPSE_VIEWS,
    LSC_COLLAPSE_FIRST_STEP,
    LSC_ALARM,
    LSC_DEAD_MASK,
    LSC_FORECAST,
    LSC_TREND,
    LSC_N
};
extern const SessCol sess_layer_step_cols[LSC_N];
enum {
    LEC_STEP,
    LEC_TRAIN_DROP_FRAC,
    LEC_TRAIN_MAXVIO,
    LEC_TRAIN_RHO_REALIZED,
    LEC_WINDOW_LOAD_ENTROPY,
    LEC_WINDOW_FIRST_SHARE,
    LEC_DEAD_EXPERTS,
    LEC_COLLAPSED,
    LEC_COLLAPSE_REASON,
    LEC_MUTUAL_INFO,
    LEC_TEST_LOAD_ENTROPY,
    LEC_TEST_FIRST_SHARE,
    LEC_TEST_DEAD_FIRST,
    LEC_TEST_DEAD_TOPK,
    LEC_COLLAPSE_VIEWS,
    LEC_COLLAPSE_FIRST_STEP,
    LEC_COLLAPSE_FIRST_TRAIN,
    LEC_COLLAPSE_FIRST_CLEAN,
    LEC_COLLAPSE_FIRST_EVAL,
    LEC_EPOCH_TAU,
    LEC_EPOCH_L_AUX,
    LEC_EPOCH_CLEAN_FIRST_SHARE,
    LEC_ALARM,
    LEC_DEAD_MASK,
    LEC_N
};
extern const SessCol sess_layer_eval_cols[LEC_N];
/* One layer row of a step / an evaluation at `step` (every column as double). */
void sess_layer_step_row(const StepLayer *l, long step, double *v);
void sess_layer_eval_row(const EvalLayer *l, long step, double *v);

/* The routed layers of a format-2 file: /layers@count and @name_<i> into names, their number in
 * *n (0 when the file has no /layers: version 1). ML_ERR_FORMAT for a damaged list. */
ml_status sess_read_layers(hid_t file, char names[][REC_LAYER_NAME], int *n, const char *path);

#define SESS_EVENT_TEXT 256
typedef struct {
    int64_t step;
    double wall_time;
    char text[SESS_EVENT_TEXT];
} SessEvent;
/* The compound type of /events (same layout in memory and file), or -1. */
hid_t sess_event_type(void);
/* A compound type holding only the `step` member (int64), for partial reads, or -1. */
hid_t sess_event_step_type(void);

#define SESS_STATUS_LEN 16

/* ---- reading (reader.c) */
#define SESS_READ_ATTEMPTS 8 /* metadata read attempts of SWMR readers (HDF5's default: 100) */
/* Opens a session for reading: `dir` is a session folder (DIR/live.h5 is used) or a path to an
 * .h5 file. Read-only + SWMR-read, so a live writer and crashed-writer flags do not matter.
 * Checks the root format_version. ML_ERR_IO if missing, ML_ERR_FORMAT otherwise. `path` gets
 * the file name for messages. */
ml_status sess_open_read(const char *dir, hid_t *file, char *path, size_t n);
/* The same without HDF5's file lock, for a reader that keeps the file open (session_follow_open):
 * a writer can then reopen it (a resume) while it follows. */
ml_status sess_open_follow(const char *dir, hid_t *file, char *path, size_t n);
/* Rows (dim 0) of an open dataset, refreshed for SWMR, or -1. */
long sess_rows(hid_t dset);
/* Reads the first `rows` rows of `name` (dims beyond the first: the dataset's own) as mem_type
 * into a new ml_alloc'd buffer *out. ML_ERR_FORMAT on failure. */
ml_status sess_read_rows(hid_t file, const char *name, hsize_t rows, hid_t mem_type, void **out, const char *path);
/* The same for rows [first, first + rows) (the rows appended since a reader's last look). */
ml_status sess_read_rows_at(hid_t file, const char *name, hsize_t first, hsize_t rows, hid_t mem_type, void **out,
                            const char *path);
/* The (n,) fixed-length strings of `name` into a new ml_alloc'd array of n pointers to
 * NUL-terminated strings (one block: release with ml_free(*out)). */
ml_status sess_read_strings(hid_t file, const char *name, char ***out, int *n, const char *path);

#endif
