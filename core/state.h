/* state.h — the trainer's resumable state as a table, for checkpoints.
 *
 * A checkpoint must hold everything trainer_step reads, so that trainer_init + restore continues
 * bit for bit. The model's tensors come from its own tables (Model.params / Model.bufs, and the
 * optimiser moments with the same shapes); everything else is a row of this table: an HDF5 path,
 * a pointer into the trainer, a type and a shape. sessions/ckpt.c writes and reads the rows
 * without knowing what they mean, and core checks what was read before anything is committed.
 * Adding trainer state means adding one row in trainer_state.c (trainer_state); tests/test_train.c
 * fails when a Trainer field is neither in the table nor listed as transient. */
#ifndef ML_STATE_H
#define ML_STATE_H

#include "config.h"
#include "model.h"

typedef enum {
    SV_I32,
    SV_I64,
    SV_U64,
    SV_F32,
    SV_F64,
    SV_TAU, /* one TauSchedule (an HDF5 compound) */
    SV_LR,  /* one LrSchedule (an HDF5 compound) */
} StateType;

#define STATE_MAX_VARS 520 /* the head rows + 92 per backbone MoE layer */

typedef struct {
    const char *path; /* HDF5 path in the checkpoint, e.g. "/trainer/step" */
    void *ptr;        /* the live value(s) */
    StateType type;
    int rank; /* 0 (scalar), 1 or 2 */
    long dims[2];
    const char *hint; /* appended to a shape mismatch message (NULL: the model hint) */
    int since;        /* format_version that added the row: a checkpoint of an older version lacks it and
                       * the restore keeps the row's current value (the trainer_init one) */
    int pad_;
} StateVar;

typedef struct {
    Model *model;           /* weights and buffers (its tensor tables) */
    float *opt_m, *opt_v;   /* (n_param) optimiser moments; opt_v NULL without a second moment */
    const char *opt_kind;   /* "sgd", "adamw" */
    const TrainConfig *cfg; /* stored as the checkpoint's config_json */
    const char *dataset;
    const char *session_id; /* the session writing it (set by the writer; NULL: none) */
    long step;
    int epoch;
    int nvars;
    StateVar vars[STATE_MAX_VARS];
    /* Checks values read into staging buffers (staged[i] holds vars[i]'s data) before they are
     * committed: positions, the data permutation, RNG states, the routing window. ML_OK or
     * ML_ERR_FORMAT with a message naming what is wrong (the caller prefixes the file name). */
    ml_status (*check)(const void *owner, void *const *staged);
    /* Called after a successful commit (derived state, timers). */
    void (*restored)(void *owner);
    void *owner;
} StateView;

/* Bytes of one element of a type. */
size_t state_type_size(StateType t);
/* Elements of a row (product of its dims; 1 for a scalar). */
long state_var_count(const StateVar *v);
/* The row with this path, or -1. */
int state_find(const StateView *v, const char *path);

#endif
