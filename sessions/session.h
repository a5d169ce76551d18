/* session.h — sessions on disk (README "Sessions"): the live metrics file written in HDF5 SWMR
 * mode, crash-safe checkpoints for exact resume, CSV export, and readers for the browser.
 *
 * A session is a folder:
 *     DIR/live.h5          config, every StepRecord / EvalRecord, event log, status (SWMR)
 *     DIR/ckpt-<step>.h5   weights, BN statistics, optimiser, RNG, schedules, data order
 * The schema (every group, dataset, shape, dtype and attribute) is in README "Session files (format_version 2)";
 * SESSION_FORMAT_VERSION is stored as the `format_version` attribute of both kinds of file.
 * This module is the only one that includes hdf5.h; this header does not.
 *
 * Errors: every function returns an ml_status and leaves a one-line message (file, dataset and
 * the innermost HDF5 / errno reason) in ml_last_error(); nothing is printed, nothing exits.
 * HDF5's automatic error printing is switched off by every entry point.
 *
 * Writing to a full disk or past RLIMIT_FSIZE gives ML_ERR_IO, never a crash, provided the
 * application ignores SIGXFSZ (signal(SIGXFSZ, SIG_IGN); otherwise the kernel kills the process
 * at the limit before write() can fail). HDF5 1.10.8 itself cannot survive a failed flush (every
 * later close fails and its close at exit crashes), so HDF5 never writes to a disk that can fail
 * on space: the live writer reserves file space ahead with posix_fallocate (1-2 MiB past what
 * HDF5 has allocated, given back at close) and stops before HDF5 writes when the reservation
 * fails; checkpoints are built in memory and written with plain write(2). After a write error a
 * SessionWriter is disabled: later calls return ML_ERR_IO at once (the training state in memory
 * is untouched; session_close still closes the file, which keeps everything flushed before the
 * error and gets the status passed to session_close). A failed ckpt_write removes its temporary
 * file and never touches the earlier checkpoints.
 *
 * Threads and processes: HDF5 handles are not shared across fork(); open files after forking.
 * One SessionWriter per file; any number of readers (other processes, SWMR) may read live.h5
 * while it is written. Inside ONE process HDF5 refuses to open a file a second time with
 * different SWMR flags, so a reader of a file this process is writing must be another process.
 *
 * Crashed writers: a writer killed while live.h5 is open leaves the superblock's "file is open
 * for SWMR writing" flags set, and its stored end-of-allocation may be behind the data flushed
 * since. Readers here open with SWMR-read and are not affected; session_open_append repairs the
 * file itself, as `h5clear -s --increment=0 FILE` would (in C: the file-access property
 * "clear_status_flags" that h5clear uses, which HDF5 1.10's public H5Pset accepts, then
 * H5Fincrement_filesize), so the caller never runs h5clear. The HDF5 1.10 command-line tools
 * (h5dump, h5ls) cannot open a file while a SWMR writer has it, nor a crashed one before
 * h5clear; h5py with swmr=True can. */
#ifndef ML_SESSION_H
#define ML_SESSION_H

#include <stddef.h>
#include <stdint.h>

#include "core/common.h"
#include "core/records.h"
#include "core/state.h"

#define SESSION_FORMAT_VERSION 3
#define SESSION_STEP_BLOCK 64 /* step records buffered in memory before a block write */

/* ------------------------------------------------------------------ live.h5 */

typedef struct {
    /* ---- inputs of session_create (ignored by session_read_info) */
    const RunRecord *run;      /* the run's description (trainer_describe) */
    const char *command_line;  /* the exact command line, stored verbatim (NULL: "") */
    const char *dataset_spec;  /* as given to dataset_open (NULL: the dataset's name) */
    const char *session_id;    /* a random id stored as /run@session_id and in every checkpoint */
    const char *commands_text; /* the --commands file's text, stored as /run@commands (NULL: "") */

    /* ---- outputs of session_read_info */
    int format_version;
    char status[16]; /* "running", "finished", "interrupted", "failed" */
    char moelab_version[32];
    char created[40];           /* ISO 8601 local time with offset */
    char dataset[64];           /* dataset name ("fashion-mnist", "synthetic", ...) */
    char dataset_spec_out[256]; /* the spec it was opened from */
    char head[24];              /* "dense", "moe", "softmoe-batch", "softmoe-sample" */
    char backbone[8];           /* "dw", "std" */
    float width;
    int experts, k, hidden; /* experts = 0 for a dense head */
    int classes, epochs;    /* epochs = configured epochs */
    uint64_t seed;
    long steps_logged;                   /* rows of /steps */
    long last_step;                      /* /steps/step of the last row (0 if none) */
    double last_wall_time;               /* Unix time of the last step row (0 if none) */
    int evals;                           /* rows of /evals */
    int last_epoch;                      /* /evals/epoch of the last row (0 if none) */
    double last_test_acc, best_test_acc; /* NaN if no evaluation yet */
    int best_epoch;                      /* epoch of best_test_acc (0 if none) */
    long events;                         /* rows of /events */
} SessionInfo;

struct SessionLive; /* private (sessions/live.c) */
typedef struct {
    struct SessionLive *p; /* NULL when closed */
} SessionWriter;

/* Creates DIR (mkdir -p) and DIR/live.h5 (fails with ML_ERR_IO if live.h5 already exists: use
 * session_open_append to continue a session). Writes the configuration attributes, creates
 * every dataset of the schema, sets /status to "running" and starts SWMR writing.
 * Dense heads: the per-expert datasets (/steps/demand|kept|mean_gate|bias, /evals/class_expert,
 * /evals/tsne_*) are not created and /run@experts is 0; routing scalars are stored as the
 * trainer publishes them (0). The t-SNE datasets are also absent when trainer->tsne_n == 0. */
ml_status session_create(SessionWriter *w, const char *dir, const SessionInfo *info);

/* Reopens DIR/live.h5 to continue a session after a resume. Clears the status flags a crashed
 * writer left (as h5clear -s), aligns all step/eval columns to their common length (a crash
 * during a block write may leave them ragged), drops the rows of /steps, /evals and /events whose
 * step is > resume_step (resume_step < 0: keep everything) so that the appended history has no
 * duplicates from the part of the run lost with the crash, sets /status to "running" and starts
 * SWMR writing. Every check (format, datasets, shapes, room for the first space reservation:
 * free space and RLIMIT_FSIZE) runs on a read-only handle first, so a refused resume writes
 * nothing; a failure after the file was opened for writing still closes it (the "open for
 * writing" flags are cleared on every path), so readers and h5dump open it afterwards. Call it
 * only while holding session_lock(dir): clearing a writer's flags is right for a dead writer and
 * ruinous for a live one. */
ml_status session_open_append(SessionWriter *w, const char *dir, long resume_step);
/* `--resume DIR --epochs N`: /run's epochs, total_steps and command_line (now with `--epochs N`,
 * for later resumes); the first extension keeps the command line the run was launched with as
 * launch_command_line (`moelab replay` starts from it). config_json keeps the launch
 * configuration. */
typedef struct {
    int epochs;
    long total_steps;
    const char *command_line, *launch_line; /* launch_line: only written when /run has none */
} SessionExtension;
/* session_open_append, also writing the extension x (NULL: none) to /run. The extension is one of
 * the resume's writes to its copy of live.h5, so a resume refused or killed before the copy takes
 * live.h5's place leaves /run (and every later resume of the session) as it was. */
ml_status session_open_append_ext(SessionWriter *w, const char *dir, long resume_step, const SessionExtension *x);
/* Fault injection for the tests of a refused resume: 1 when $MOELAB_FAULT_RESUME is `stage`
 * (session_open_append: copy, apply, rename; runsession_open: restore, extend, events, ckpt). */
int session_fault(const char *stage);

/* Appends one step record (buffered: written every SESSION_STEP_BLOCK records or on flush).
 * wall_time is taken here (Unix time). */
ml_status session_append_step(SessionWriter *w, const StepRecord *r);
/* Appends one evaluation record (written at once, after the buffered steps) and flushes.
 * For MoE heads r->class_expert (classes x experts) and the t-SNE arrays must have the
 * dimensions the session was created with (ML_ERR_ARG otherwise). */
ml_status session_append_eval(SessionWriter *w, const EvalRecord *r);
/* Appends one event (an interactive command, a resume, a snapshot...) and flushes the event log.
 * `text` is truncated to 255 bytes. wall <= 0 means now (Unix time). */
ml_status session_append_event(SessionWriter *w, long step, double wall, const char *text);
/* Writes the buffered step records and H5Dflush-es every dataset written since the last flush,
 * so SWMR readers see them. Cheap when nothing is pending; call it every ~2 s and at every eval. */
ml_status session_flush(SessionWriter *w);
/* Flushes, writes `status` ("finished", "interrupted", "failed"; NULL keeps "running") and
 * closes. Always releases everything, even after an error (which is returned). */
ml_status session_close(SessionWriter *w, const char *status);
/* Records written so far (buffered ones included), for progress displays and tests. */
long session_steps_written(const SessionWriter *w);

/* ---- the configuration JSON (/run@config_json, a checkpoint's @config_json), with jansson */

/* JSON object with every TrainConfig field (nested: model{head{}}, opt, lr, tau, route, ...)
 * plus "dataset": dataset_spec, keys in that order, `", "` and `": "` between items. Numbers
 * read back exactly: a float field is the shortest decimal that converts back to the same float
 * (0.1 for 0.1f), a double field its own value (both with as many digits as the text needs, 17
 * at most); integers as integers (the seed too, above INT64_MAX included); a value that is not
 * finite is null. ML_ERR_ARG if buf (n bytes) is too small. */
ml_status session_config_json(const TrainConfig *c, const char *dataset_spec, char *buf, size_t n);

struct json_t; /* jansson's value; include <jansson.h> to use it beyond these functions */
/* Parses a stored configuration JSON, written by session_config_json or by an older moelab
 * (%.9g reals, integers above INT64_MAX: every number is read as a double). The root object
 * (release it with json_decref), or NULL with ML_ERR_FORMAT's one-line message in
 * ml_last_error() for text that is not JSON (truncated, damaged, a key twice in one object; the
 * message gives jansson's reason, line and column) or not an object. */
struct json_t *session_config_parse(const char *text);
/* Look-ups at a path of object keys joined by dots ("log_every", "model.head.cf") in a parsed
 * configuration (cfg NULL: nothing found). Each returns 1 and stores the value, 0 if a key on
 * the path is absent, or -1 if a value has the wrong type (a key on the way is not an object;
 * the value is not a number, null included, not in lo..hi, not an integer, not a string), with
 * a message naming the path in ml_last_error(). The output is untouched unless 1 is returned.
 * session_config_str truncates the string to n-1 bytes (n == 0: -1). */
int session_config_num(const struct json_t *cfg, const char *path, double lo, double hi, double *v);
int session_config_long(const struct json_t *cfg, const char *path, long lo, long hi, long *v);
int session_config_str(const struct json_t *cfg, const char *path, char *buf, size_t n);

/* ------------------------------------------------------------------ readers */

/* Summary of DIR/live.h5 (or of a path ending in .h5) for the browser. Opens read-only with
 * SWMR-read, so it works while a writer is active and on files a crashed writer left flagged.
 * ML_ERR_IO if the file is missing, ML_ERR_FORMAT (with a message) if it is not a moelab
 * session, is damaged or truncated. Only reads: never modifies the file. */
ml_status session_read_info(const char *dir, SessionInfo *info);
/* A string attribute of /run (e.g. "command_line", "config_json", "dataset_spec") into buf
 * (truncated to n-1 bytes; ML_ERR_ARG if it did not fit). */
ml_status session_read_run_attr(const char *dir, const char *name, char *buf, size_t n);
/* The same, whole, into a malloc'd string *out (free it): no length limit below 64 MiB. */
ml_status session_read_run_attr_alloc(const char *dir, const char *name, char **out);

/* The training pairs capacity dropped, per class x expert, of evaluation row `row`
 * (/evals/drop_class_expert, or /layers/<layer>/evals/drop_class_expert when layer is a layer
 * name), K*E ints into out. ML_ERR_FORMAT for a session from before they were recorded, a row
 * out of range or one holding the fill value. */
ml_status session_read_drops(const char *dir, const char *layer, long row, int K, int E, int *out);

/* The event log (/events): every interactive command with its step, for replay. *out is
 * malloc'd (free it), *n rows. */
typedef struct {
    long step;
    double wall_time;
    char text[256];
} SessionEventRow;
ml_status session_read_events(const char *dir, SessionEventRow **out, long *n);

/* ------------------------------------------------------------------ protected reading (sessions/probe.c) */

/* libhdf5 1.10 can crash (heap overflow, use after free) or hang on corrupted metadata. A command
 * about to read a live.h5 it did not just write itself calls session_probe first: a forked child
 * (ml_run_isolated) makes the reads named in `what` (any of these, or'ed) and the caller makes them
 * in its own process only after the child came through. */
enum {
    SESSION_PROBE_INFO = 1 << 0,    /* session_read_info */
    SESSION_PROBE_ATTRS = 1 << 1,   /* session_read_run_attr(_alloc) of /run@command_line (sweep, replay) */
    SESSION_PROBE_EVENTS = 1 << 2,  /* session_read_events */
    SESSION_PROBE_HISTORY = 1 << 3, /* session_history_load */
    SESSION_PROBE_TSNE = 1 << 4,    /* session_history_load, then every evaluation's t-SNE sample (layers too) */
    SESSION_PROBE_EXPORT = 1 << 5,  /* session_export_csv (its tables written to /dev/null) */
    SESSION_PROBE_SWEEP = 1 << 6,   /* sweep_h5_read_run and sweep_h5_read_routing (sessions/sweep_h5.h) */
};
/* ML_OK: the in-process reads may go ahead. Also ML_OK when the child's reads failed in the
 * ordinary way (the caller's own read reports it), when there is no file to read (DIR/live.h5
 * missing) and when no child could be started (logged; the caller reads unprotected). A crash,
 * abort or sanitizer exit of the child: ML_ERR_FORMAT "PATH: reading it crashed the HDF5 library
 * (signal N): the file is damaged"; no answer within the timeout (30 s,
 * $MOELAB_SESSION_PROBE_TIMEOUT_MS in ms): "PATH: reading it did not finish in N s: the file is
 * damaged (or its storage is very slow)". PATH is the live.h5 file. One fork (1-5 ms, README
 * "Fuzzing") plus the reads themselves. Fault injection for the tests:
 * MOELAB_FAULT_SESSION_PROBE=[segv:|abort:|hang:]SUBSTRING makes the child of a probe of a path
 * containing SUBSTRING crash (SIGSEGV), abort or hang; MOELAB_FAULT_OPEN_CRASH=SUBSTRING crashes
 * the child of a SESSION_PROBE_HISTORY probe (the browser's name for it). */
ml_status session_probe(const char *dir_or_file, int what);
/* The probe's timeout in ms (30 000 or $MOELAB_SESSION_PROBE_TIMEOUT_MS). */
int session_probe_timeout_ms(void);
/* The status and message of a child read of `path` that ended as r says, in the probe's words:
 * ML_OK for ML_ISOLATED_OK and _NO_CHILD, the child's own status and message for _FAILED,
 * ML_ERR_FORMAT "... the file is damaged" otherwise (timeout_ms: the one the child had). For
 * other readers in a child (the browser's list). */
ml_status session_isolated_status(const MlIsolated *r, const char *path, int timeout_ms);

/* ------------------------------------------------------------------ export */

/* Writes OUTDIR (mkdir -p)/steps.csv (every /steps scalar), expert_load.csv (step, e0..e{E-1}
 * kept counts), evals.csv (every /evals scalar), class_expert.csv (eval, epoch, class,
 * class_name, e0..), events.csv (step, wall_time, text). RFC 4180 quoting; the per-expert files
 * are written with a header only for dense heads. Readable while a writer is active. outdir
 * NULL: every read, every table written to /dev/null (session_probe's child). */
ml_status session_export_csv(const char *dir, const char *outdir);

/* ------------------------------------------------------------------ checkpoints */

/* Writes DIR/ckpt-<step>.h5 atomically (DIR created if needed): the file is built in memory
 * (one checkpoint's size of RAM, twice while copied out), written to DIR/ckpt-<step>.h5.tmp,
 * fsync'd, renamed, and DIR fsync'd. Then removes the oldest checkpoints beyond `keep` (keep <= 0: keep
 * all) and stale ckpt-*.h5.tmp files of crashed writes. On failure the temporary file is
 * removed and earlier checkpoints are untouched. The file holds everything trainer_step uses:
 * weights (PyTorch state_dict names and shapes; MoE expert tensors split per expert as
 * head.experts.<e>.fc1.weight ...), BN running statistics, optimiser m/v/t, the three RNG
 * states, tau plan and LR schedule, step/epoch/pos/data permutation, the epoch's running sums,
 * the MoE utility bias and the routing window. */
ml_status ckpt_write(const char *dir, const StateView *v, int keep);
/* Restores a checkpoint into the state a StateView describes (core/state.h: trainer_state of an
 * already trainer_init'ed Trainer with the same configuration). Every dataset's shape is checked
 * against the model's tables and the state rows first (ML_ERR_FORMAT naming the dataset on a
 * mismatch); everything is read into staging buffers and checked by v->check, and the state is
 * only modified once all of that passed, so on any error it is left exactly as it was. */
ml_status ckpt_read(const char *path, StateView *v);
/* Opens a checkpoint and reads every dataset (catches truncation and damage) without a Trainer.
 * *step (may be NULL) gets its step. The reading is done in a forked child (ml_run_isolated):
 * a crash or hang of libhdf5 on corrupted metadata there becomes ML_ERR_FORMAT ("reading it
 * crashed the HDF5 library ...: the file is damaged"); validate a checkpoint of unknown state
 * before ckpt_read or ckpt_read_attr, which read in this process (ckpt_restore_latest and
 * ckpt_find_latest do). */
ml_status ckpt_validate(const char *path, long *step);
/* The newest checkpoint in DIR that validates, into path (n bytes). Damaged newer ones are
 * described in `report` (rn bytes, "" if none; may be NULL). ML_ERR_IO if there is no valid
 * checkpoint (the message says why). */
ml_status ckpt_find_latest(const char *dir, char *path, size_t n, char *report, size_t rn);
/* Resume: restores into v the newest checkpoint of DIR that is a regular file, validates (every
 * dataset readable, checksums match), is this run's (its session_id and seed, when it has them,
 * equal session_id and v's seed) and passes v's checks (shapes, position, permutation, RNG). Each one
 * skipped on the way is named in `report` with the reason. path gets the one used. ML_ERR_IO if
 * none can be restored; v is untouched then. */
ml_status ckpt_restore_latest(const char *dir, StateView *v, const char *session_id, char *path, size_t n, char *report,
                              size_t rn);
/* A string attribute of a checkpoint's root ("config_json", "moelab_version", "created"). */
ml_status ckpt_read_attr(const char *path, const char *name, char *buf, size_t n);

/* ------------------------------------------------------------------ session lock (sessions/lock.c) */

/* One writer per session folder. The lock is an exclusive flock(2) on DIR/.lock (a regular
 * file, created if missing, never removed), held as long as SessionLock's descriptor is open;
 * the holder's PID is written into the file for the refusal message. The kernel drops a flock
 * when its holder dies (SIGKILL included), so a lock file left by a dead process is simply
 * taken over. Take it before touching anything in DIR (before ckpt_find_latest and
 * session_open_append / session_create), keep it until after session_close and the last
 * ckpt_write, then session_unlock. The descriptor is O_CLOEXEC: an exec'd child does not inherit
 * the lock, but a fork()ed child that does not exec shares it until it exits. Two SessionLocks
 * on one DIR conflict even inside one process. A zeroed SessionLock is "not held". */
#define SESSION_LOCK_FILE ".lock"
typedef struct {
    int fd;   /* the open DIR/.lock while held */
    int held; /* 1 while held */
} SessionLock;
/* Locks the existing folder DIR (never creates it: ML_ERR_IO if it is missing). Another holder:
 * ML_ERR_STATE, "session DIR is in use by PID N", nothing changed. */
ml_status session_lock(const char *dir, SessionLock *l);
/* session_lock after mkdir -p DIR: for a new session, before session_create. */
ml_status session_lock_create(const char *dir, SessionLock *l);
/* Releases the lock (no-op if not held). */
void session_unlock(SessionLock *l);
/* 1 if some process holds DIR's session lock (a writer is alive), 0 if none does (a status
 * "running" is then left by a killed or crashed writer), -1 if it cannot be told. Never takes the
 * lock itself (reads /proc/locks; a shared-lock probe without /proc). */
int session_lock_held(const char *dir);

/* Clears the "open for writing" flags of DIR/live.h5 that a writer killed between opening it and
 * starting SWMR leaves (SWMR readers cannot open such a file), as `h5clear -s`. Writes only the
 * superblock. Call it only while holding session_lock(DIR): then no writer is alive. */
ml_status session_unflag(const char *dir);

/* ------------------------------------------------------------------ crash-consistent history (sessions/live.c) */

/* session_flush, then H5Fflush and fsync of live.h5: every step, eval and event appended so far
 * is on disk (power loss included) when it returns ML_OK. Call it right before ckpt_write, so
 * that a checkpoint renamed into place never refers to steps that live.h5 lacks; resume
 * (session_open_append at the checkpoint's step) then drops exactly the rows after the
 * checkpoint, and the history has every row once. Costs an fsync: once per checkpoint, not
 * every few seconds (session_flush is the cheap periodic one). */
ml_status session_sync(SessionWriter *w);

#endif
