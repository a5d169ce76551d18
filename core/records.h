/* records.h — what the trainer publishes and what it accepts: the immutable records of a run
 * (RunRecord once, StepRecord every log_every steps, EvalRecord after each evaluation,
 * TrainerEvent for everything else that happens at a step boundary) and the typed commands of
 * the command language (TrainerCmd). Views and sessions include this, never trainer.h: they see
 * records, not the Trainer. */
#ifndef ML_RECORDS_H
#define ML_RECORDS_H

#include <stddef.h>

#include "config.h"
#include "moe.h"
#include "tau.h"

/* ---- routed layers (issue #14 phase 2). A run has nlayers routed layers, 0..REC_MAX_LAYERS: the
 * backbone MoE layers in stage order ("moe0".."moe3"), then the head ("head") if it routes. Layer i
 * has the same index in RunRecord.layer, StepRecord.layer and EvalRecord.layer. The records' routing
 * fields describe the *primary* layer (the head when it routes, otherwise the first backbone
 * layer): StepRecord's top-level (has_moe, moe, rho_realized, dead_experts, window_*, ...) and
 * EvalRecord's embedded EvalLayer `moe`, a copy of that layer's entry; the collapse fields
 * (collapsed, collapse_reason, collapse_views, collapse_first_*, alarm) are the union over all
 * layers, and collapse_text names the first flagged layer ("moe2: clean router collapsed: ...").
 * rho_realized / train_rho_realized at the top level is the model total.
 * step_record_layer / eval_record_layer project layer i into a whole record, so a view made for
 * one router shows any layer unchanged. nlayers == 0: no layer routes (or an old producer). */
#define REC_MAX_LAYERS 5 /* MODEL_MAX_BBL backbone layers + the head */
#define REC_LAYER_NAME 16

typedef struct {
    char name[REC_LAYER_NAME]; /* "moe2" (checkpoint tensors backbone.moe2.*), "head" */
    int stage;                 /* backbone stage 0..3 it follows; -1 for the head */
    int kind;                  /* HeadKind of its routing (HEAD_MOE for backbone layers) */
    int E, k, h;               /* experts, top-k, expert hidden width */
    int capacity;              /* training slots per expert per batch (B when dropless) */
    double rho_nominal;        /* its routed FLOPs / the model's FLOPs per sample */
    int feat_dim;              /* its router input width (its t-SNE features): channels C; the head: d */
    int pad_;
} LayerInfo;

typedef struct {
    MoeStepStats moe;           /* this layer's statistics of the batch (moe.tau: its temperature) */
    double rho_realized;        /* this layer's routed FLOPs actually spent / the model's FLOPs */
    int dead_experts;           /* over the window */
    double window_load_entropy; /* over the window */
    int collapsed, collapse_reason, collapse_views;
    long collapse_first_step; /* -1: never */
    char collapse_text[256];  /* collapse_format of its most severe open item ("" if none) */
    int alarm;                /* AlarmLevel now: 0 none, 1 warning (yellow), 2 collapse (red) */
    int alarm_pad_;
    long dead_mask;           /* experts dead now (bit e), with revival hysteresis (routestats.h) */
    long forecast;            /* steps until the clean router crosses a threshold at its trend (-1: none) */
    double trend;             /* clean first-choice share per 1000 steps over the window */
    char forecast_text[96];   /* collapse_forecast_text ("clean share 0.42, rising: threshold in ~600 steps") */
} StepLayer;

typedef struct {
    double train_drop_frac, train_maxvio, train_rho_realized; /* epoch means */
    double window_load_entropy, window_first_share;
    int dead_experts;
    double epoch_tau, epoch_l_aux, epoch_clean_first_share;
    int collapsed, collapse_reason, collapse_views;
    long collapse_first_step, collapse_first_train, collapse_first_clean, collapse_first_eval;
    int alarm;           /* AlarmLevel after this evaluation */
    int alarm_pad_;
    long dead_mask;      /* experts dead now (bit e) */
    int classes, experts;
    const int *class_expert; /* (classes, experts) first-choice counts on the test set */
    const int *drop_class_expert; /* (classes, experts) training pairs dropped by capacity since the epoch's start */
    double mutual_info, test_load_entropy, test_first_share;
    int test_dead_first, test_dead_topk;
    int tsne_n, feat_dim;
    const float *tsne_feat; /* (tsne_n, feat_dim) the layer's pooled router input */
    const int *tsne_expert; /* (tsne_n) first-choice expert in this layer */
} EvalLayer;

/* The run's description, fixed after trainer_init (trainer_describe fills it). */
typedef struct {
    TrainConfig cfg;            /* the launch configuration with its step totals filled in */
    const char *dataset;        /* dataset name */
    const char *dataset_source; /* where it was read from */
    const float *mean, *std;    /* (c) normalisation */
    int c, h, w, classes;
    int n_train, n_test;
    const char *const *class_names; /* (classes) or NULL */
    int d;                          /* pooled feature width (the head's input) */
    long n_params;
    double rho_nominal, flops_per_sample;
    long steps_per_epoch, total_steps;
    int tsne_n;  /* test samples in the t-SNE sample (0 for dense heads) */
    int nlayers; /* routed layers (see "routed layers" above) */
    LayerInfo layer[REC_MAX_LAYERS];
} RunRecord;

typedef struct {
    long step;             /* steps completed, this one included */
    int epoch;             /* 1-based epoch this step belongs to */
    double epoch_progress; /* fraction of the epoch done */
    double loss;           /* cross-entropy of this batch */
    double loss_total;     /* cross-entropy + alpha L_aux + beta L_z */
    double acc;            /* batch accuracy */
    float lr, tau;
    double img_per_s; /* over the steps since the last record */
    int has_moe;
    MoeStepStats moe;    /* routing statistics of this batch (MoE heads) */
    double rho_realized; /* routed FLOPs actually spent (kept pairs only) / total */
    int dead_experts;    /* experts with no kept pair over the window */
    int collapsed;       /* collapse flag on any of the three views (routestats.h CollapseState) */
    int collapse_reason; /* COLLAPSE_* bits (the union over the flagged views) */
    double window_load_entropy;
    int collapse_views;       /* CVIEW_BIT_*: 1 training, 2 clean router, 4 evaluation (the last one) */
    int collapse_pad_;        /* (no padding) */
    long collapse_first_step; /* first step any view was flagged (-1: never) */
    char collapse_text[256];  /* collapse_format of the most severe open item of any layer ("" if none) */
    int alarm;                /* the most severe AlarmLevel of any layer (collapsed = alarm == 2) */
    int alarm_pad_;
    long dead_mask;           /* the primary layer's dead experts (bit e) */
    long forecast;            /* the primary layer's forecast (-1: none) */
    double trend;             /* the primary layer's clean-share trend per 1000 steps */
    char forecast_text[96];   /* the primary layer's collapse_forecast_text */
    int nlayers;              /* routed layers (RunRecord.layer has their names) */
    StepLayer layer[REC_MAX_LAYERS];
} StepRecord;

typedef struct {
    int epoch;
    long step;
    double train_loss, train_acc; /* means over the epoch's training batches */
    double test_loss, test_acc;
    double img_per_s; /* training throughput over the epoch */
    double epoch_seconds, elapsed;
    /* MoE heads only (has_moe): routing over the epoch's training steps and on the test set */
    int has_moe;
    double rho_nominal;
    double train_rho_realized; /* epoch mean of the model's total realized rho */
    EvalLayer moe;             /* the primary layer's statistics (eval_record_layer: the layer shown) */
    /* the collapse state, the union over the layers (eval_record_layer: the layer's own) */
    int collapsed, collapse_reason; /* collapsed: any view (the evaluation's included) */
    int collapse_views;             /* CVIEW_BIT_* flagged after this evaluation */
    int alarm;                      /* the most severe AlarmLevel of any layer */
    long collapse_first_step;       /* first step any view was flagged (-1: never) */
    long collapse_first_train, collapse_first_clean, collapse_first_eval; /* per view (-1: never) */
    const int32_t *tsne_label; /* (tsne_n) class of each t-SNE sample */
    int nlayers;               /* routed layers (RunRecord.layer has their names) */
    EvalLayer layer[REC_MAX_LAYERS];
} EvalRecord;

/* *out = *in with layer i's fields in the top-level routing fields (has_moe = 1, moe, tau =
 * moe.tau, rho_realized, dead_experts, window_load_entropy, collapse_*): what a one-router view
 * shows for layer i. i outside [0, nlayers) copies in unchanged. */
void step_record_layer(const StepRecord *in, int i, StepRecord *out);
/* The same for an evaluation (has_moe = 1, classes/experts/class_expert, test_*, tsne_* with
 * tsne_label shared, epoch means, collapse_*). */
void eval_record_layer(const EvalRecord *in, int i, EvalRecord *out);
/* Index of the layer called name in r->layer (-1 if none). */
int run_record_layer_find(const RunRecord *r, const char *name);

/* The epoch line of headless runs and of the live screen's log (one place for its format):
 * "epoch 3/10  step 1404  train loss ... acc ...%  test loss ... acc ...%  N img/s  T s", or for
 * an evaluation in the middle of an epoch "eval at step N  test loss ... acc ...%". */
void eval_record_line(const EvalRecord *r, int epochs, int epoch_end, char *buf, size_t n);
/* The routing line under it for MoE heads ("  routing  load entropy ...  collapse no"); last is
 * the last StepRecord (its tau, L_aux and clean-router top1 share, "-" without one), or NULL. */
void eval_routing_line(const EvalRecord *r, const StepRecord *last, char *buf, size_t n);

/* ---- commands: the command language (parsed in app/commands.c) acts on the trainer through
 * these typed records, always between two steps. */
#include "cmdrows.h" /* CMD_ROWS: one row per command */
// clang-format off
typedef enum {
#define CMD_KIND_ENUM_(kind, ...) kind,
    CMD_ROWS(CMD_KIND_ENUM_)
#undef CMD_KIND_ENUM_
} CmdKind;
#define CMD_KIND_ONE_(...) +1
enum { CMD_KIND_COUNT_ = 0 CMD_ROWS(CMD_KIND_ONE_) }; /* how many kinds (cmdtab.h: CMD_KIND_COUNT) */
#undef CMD_KIND_ONE_
// clang-format on
#include "params.h" /* CmdParam: the table of `set` parameters */
/* Where a command came from: typed on the live screen, a --commands file (and replay), the control
 * socket, or the --on-collapse / `on-collapse` rule. The event log records a socket/screen/file
 * origin after the command ("set tau 0.3  # socket", a comment command_parse skips) and a rule's
 * as a prefix of the event text ("rule: set tau 2"); replay strips the prefix (cmd_origin_strip)
 * and applies the command as logged. */
typedef enum { CMD_FROM_NONE, CMD_FROM_FILE, CMD_FROM_SCREEN, CMD_FROM_SOCKET, CMD_FROM_RULE } CmdOrigin;
/* "file", "screen", "socket", "rule" ("" for CMD_FROM_NONE or an unknown value). */
const char *cmd_origin_name(int origin);
/* "rule: " for CMD_FROM_RULE, "" otherwise */
const char *cmd_origin_prefix(CmdOrigin o);
/* text with a known origin prefix removed (a pointer into text), and its origin in *o
 * (CMD_FROM_RULE or CMD_FROM_NONE) */
const char *cmd_origin_strip(const char *text, CmdOrigin *o);
typedef struct {
    CmdKind kind;
    CmdParam param;             /* CMD_SET */
    double value;               /* CMD_SET */
    long n;                     /* CMD_STEP: steps to run while paused */
    TauSchedule sched;          /* CMD_ANNEAL: the new schedule (start/total filled by the trainer) */
    char text[256];             /* the command as typed, normalised; goes to the event log */
    char rule[224];             /* CMD_ON_COLLAPSE: "pause", "off" or the commands ("set tau 2; set alpha 0.05") */
    int origin;                 /* CmdOrigin: where it came from (written to the event log with it) */
    long tag;                   /* the control socket's request id (0: none): its reply waits for it */
    char layer[REC_LAYER_NAME]; /* routing knobs and anneal: the layer of an "@moe2" / "@head" suffix; "" = all */
} TrainerCmd;

/* The temperature part of a command, on a plan alone: `set tau` overrides from `step`, `anneal`
 * replaces the schedule from `step` to total_steps (the end of training). The trainer applies
 * temperature commands with it, and the session browser replays logged commands with it to
 * rebuild the plan at any step. ML_ERR_ARG for other kinds. */
ml_status trainer_tau_apply(TauPlan *plan, const TrainerCmd *c, long step, long total_steps);
/* 1 if c is `set tau` or `anneal`. */
int trainer_tau_command(const TrainerCmd *c);

/* ---- events: everything else the loop reports at a step boundary */
typedef enum {
    TEV_APPLIED,    /* a command took effect (text = its normalised form) */
    TEV_FAILED,     /* a command was rejected (text = "command: message") */
    TEV_NOTE,       /* a remark on a command (e.g. no effect in this run) */
    TEV_NUMERIC,    /* a NaN/inf loss stopped the step (text = message); the run pauses or fails */
    TEV_ERROR,      /* training or evaluation failed (text = message) */
    TEV_EPOCH,      /* an evaluation finished (text = the epoch line) */
    TEV_CHECKPOINT, /* a checkpoint was written (text = "checkpoint ckpt-N.h5 (why)") */
    TEV_COLLAPSE,   /* an alarm: a collapse or warning episode opened, an expert died or came back
                     * (text = "collapse|warning|expert death|expert revival at step N (...): MESSAGE",
                     * severity in TrainerEvent.severity) */
} TrainerEventKind;

typedef struct {
    TrainerEventKind kind;
    long step;   /* steps completed when it happened */
    CmdKind cmd; /* TEV_APPLIED / TEV_FAILED / TEV_NOTE */
    int logged;  /* 1 if it belongs in the session's event log (replay needs it) */
    int origin;  /* CmdOrigin of the command (CMD_FROM_NONE for events of no command) */
    char text[384];
    int has_plan; /* set/anneal: the temperature plan after the command */
    TauPlan plan;
    int layer; /* has_plan: the routed layer (RunRecord.layer index) whose plan it is; -1: every layer */
    int severity; /* TEV_COLLAPSE: AlarmLevel (0: a revival) */
} TrainerEvent;

/* The loop's state as the UI shows it (published after every step and state change). */
typedef struct {
    long step;           /* steps completed */
    int epoch;           /* epochs completed */
    int paused;          /* waiting at a step boundary */
    long steps_left;     /* `step N` steps still to run while paused */
    int numeric;         /* paused by a NaN/inf loss */
    int collapse;        /* paused by the --on-collapse pause rule (cleared by resume) */
    double busy;         /* seconds spent training (steps; evaluations excluded) */
    double eval_seconds; /* seconds spent in evaluations */
    int evals;
} TrainerState;

/* ---- where and when (issue 26): the alarm as spans of logged steps, for the loss curves' time axis
 * (views/view_curves.c) and the shaded spans of `moelab plot` (views/figs.c), and the alarm events
 * counted by kind, for the browser's list and the sweep summary. Pure functions, no I/O. */
#define ALARM_SPANS_MAX 128
typedef struct {
    long start, end; /* first and last logged step of the span (inclusive) */
    int level;       /* AlarmLevel: 1 warning or expert death (yellow), 2 collapse (red) */
    int pad_;
} AlarmSpan;
typedef struct {
    int n;       /* spans held, in step order */
    int open;    /* 1: the last step pushed had the last span's level (it goes on) */
    long merged; /* spans merged into a neighbour because the store was full */
    long last;   /* the last step pushed (-1: none) */
    AlarmSpan span[ALARM_SPANS_MAX];
} AlarmSpans;
/* The alarm level of a step row: r->alarm, or for a session written before the alarm column (alarm
 * 0 in every row) ALARM_COLLAPSE where r->collapsed is set. */
int step_record_alarm_level(const StepRecord *r);
void alarm_spans_init(AlarmSpans *a);
/* One logged step with its level: extends the open span when the level is the same, closes it at
 * level 0, opens a new span otherwise. A step before the last one (a resumed run's rows again) is
 * ignored. When ALARM_SPANS_MAX spans are held, the two neighbours with the smallest gap between
 * them merge (the higher level), so memory stays fixed and long runs keep their shape. */
void alarm_spans_push(AlarmSpans *a, long step, int level);
/* alarm_spans_init, then every row's step_record_alarm_level pushed. Returns a->n. */
int alarm_spans(const StepRecord *rows, long n, AlarmSpans *a);
/* The highest level of the spans overlapping the steps [x0, x1] (0: none). */
int alarm_spans_level(const AlarmSpans *a, double x0, double x1);

/* Alarm events by kind, from event log texts: "collapse at step N (...)", "warning at step N (...)",
 * "expert death at step N (...)", "expert revival at step N (...)" (core/trainer_loop.c, loop_collapse).
 * Sessions written before the warning and death events have collapse events only. */
typedef struct {
    int collapse; /* collapse episodes (each view of each layer that rose to red) */
    int warning;  /* warning episodes (the clean router alone, an idle router) */
    int death;    /* expert deaths (whatever their severity) */
    int revival;  /* experts that came back */
} AlarmCounts;
/* Counts one event text into c; returns the AlarmLevel-like kind it was (2 collapse, 1 warning or
 * death, 0 revival), -1 for any other text. */
int alarm_count_event(AlarmCounts *c, const char *text);
/* "2C 1W 1D" (collapse episodes, warnings, expert deaths; kinds at zero left out), "-" for none. */
void alarm_counts_text(const AlarmCounts *c, char *buf, size_t n);

#endif
