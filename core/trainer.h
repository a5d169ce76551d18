/* trainer.h — the training loop: mini-batches, optimiser, schedules, evaluation, and the records
 * it publishes.
 *
 * The trainer owns the model, optimiser, RNG streams and data order. It publishes immutable
 * records (StepRecord every `log_every` steps, EvalRecord after each evaluation) through
 * callbacks; a headless printer, the TUI and the session writer are all just consumers.
 * Same seed + same thread count => bit-identical numbers. */
#ifndef ML_TRAINER_H
#define ML_TRAINER_H

#include "datasets/dataset.h"
#include "model.h"
#include "optim.h"
#include "routestats.h"

typedef struct Trainer Trainer;
#include "tau.h"

typedef struct {
    ModelConfig model;   /* in_c/h/w and classes are taken from the dataset */
    OptConfig opt;
    LrSchedule lr;       /* total/warmup in steps are filled by trainer_init from the epochs */
    float warmup_epochs; /* linear LR warm-up length in epochs (default 0) */
    TauSchedule tau;     /* total filled by trainer_init */
    float tau_epochs;    /* schedule length in epochs (0: the whole run); tau1 holds after it */
    int epochs;          /* default 10 */
    uint64_t seed;       /* default 1 */
    int threads;         /* OpenMP + OpenBLAS threads (default: all cores) */
    int log_every;       /* StepRecord period in steps (default 10) */
    RouteWinConfig route;/* dead-expert window and collapse thresholds */
    int tsne_samples;    /* test samples whose features are kept per evaluation (default 512) */
    int augment;         /* -1: on for RGB datasets (default), 0: off, 1: on (crop + flip) */
} TrainConfig;

void train_config_defaults(TrainConfig *c);

typedef struct {
    long step;            /* steps completed, this one included */
    int epoch;            /* 1-based epoch this step belongs to */
    double epoch_progress;/* fraction of the epoch done */
    double loss;          /* cross-entropy of this batch */
    double loss_total;    /* cross-entropy + alpha L_aux + beta L_z */
    double acc;           /* batch accuracy */
    float lr, tau;
    double img_per_s;     /* over the steps since the last record */
    int has_moe;
    MoeStepStats moe;     /* routing statistics of this batch (MoE heads) */
    double rho_realized;  /* routed FLOPs actually spent (kept pairs only) / total */
    int dead_experts;     /* experts with no kept pair over the window */
    int collapsed;        /* collapse flag over the window (routestats.h) */
    int collapse_reason;  /* COLLAPSE_* bits */
    double window_load_entropy;
} StepRecord;

typedef struct {
    int epoch;
    long step;
    double train_loss, train_acc; /* means over the epoch's training batches */
    double test_loss, test_acc;
    double img_per_s;             /* training throughput over the epoch */
    double epoch_seconds, elapsed;
    /* MoE heads only (has_moe): routing over the epoch's training steps and on the test set */
    int has_moe;
    double rho_nominal;
    double train_drop_frac, train_maxvio, train_rho_realized; /* epoch means */
    double window_load_entropy;   /* over the dead-expert window at the end of the epoch */
    double window_first_share;    /* mean largest first-choice share over the window */
    int dead_experts, collapsed, collapse_reason;
    int classes, experts;
    const int *class_expert;      /* (classes, experts) first-choice counts on the test set */
    double mutual_info;           /* I(class; expert) in nats */
    double test_load_entropy;     /* H(first-choice load) / log E on the test set */
    int tsne_n, feat_dim;
    const float *tsne_feat;       /* (tsne_n, feat_dim) pooled features of fixed test samples */
    const int *tsne_expert;       /* (tsne_n) first-choice expert */
    const int32_t *tsne_label;    /* (tsne_n) class */
} EvalRecord;

/* ---- commands: the command language (parsed in app/commands.c) acts on the trainer through
 * these typed records, always between two steps. */
typedef enum {
    CMD_PAUSE, CMD_RESUME, CMD_STEP, CMD_SET, CMD_ANNEAL, CMD_SNAPSHOT, CMD_EVAL, CMD_QUIT, CMD_HELP,
} CmdKind;
typedef enum {
    PARAM_TAU, PARAM_LR, PARAM_CF, PARAM_ALPHA, PARAM_BETA, PARAM_NOISE, PARAM_BIAS_RATE, PARAM_COUNT,
} CmdParam;
typedef struct {
    CmdKind kind;
    CmdParam param;      /* CMD_SET */
    double value;        /* CMD_SET */
    long n;              /* CMD_STEP: steps to run while paused */
    TauSchedule sched;   /* CMD_ANNEAL: the new schedule (start/total filled by the trainer) */
    char text[256];      /* the command as typed, normalised; goes to the event log */
} TrainerCmd;

/* Applies a parameter command (CMD_SET, CMD_ANNEAL) at the current step boundary. The other
 * kinds are the driver's business (pause, single steps, snapshots, evaluation, quit). */
ml_status trainer_apply(Trainer *t, const TrainerCmd *c);
/* The temperature part of trainer_apply, on a plan alone: `set tau` overrides from `step`, `anneal`
 * replaces the schedule from `step` to total_steps (the end of training). The session browser
 * replays logged commands with it to rebuild the plan at any step. ML_ERR_ARG for other kinds. */
ml_status trainer_tau_apply(TauPlan *plan, const TrainerCmd *c, long step, long total_steps);
/* 1 if c is `set tau` or `anneal`. */
int trainer_tau_command(const TrainerCmd *c);

typedef struct {
    void (*on_step)(const StepRecord *r, void *user);
    void (*on_eval)(const EvalRecord *r, void *user);
    /* called before every step; returns non-zero to stop the run cleanly (quit) */
    int (*before_step)(Trainer *t, void *user);
    void *user;
} TrainCallbacks;

struct Trainer {
    TrainConfig cfg;
    const Dataset *ds;
    Model model;
    Optimizer opt;
    TauPlan tau;
    Rng rng_init, rng_data, rng_noise, rng_aug;
    int32_t *perm;        /* (n_train) order of this epoch */
    int32_t *labels;      /* (batch) */
    int32_t *eval_idx;    /* (batch) test indices of one evaluation batch */
    long step;            /* steps completed */
    int epoch;            /* epochs completed */
    long steps_per_epoch;
    long total_steps;
    int pos;              /* batch index inside the current epoch */
    double ep_loss, ep_acc; long ep_batches; /* running sums of the current epoch */
    double ep_drop, ep_maxvio, ep_rho;        /* routing sums of the current epoch */
    RouteWin win;         /* MoE: dead experts and collapse over recent steps */
    int *class_expert;    /* (classes, E) counts of the last evaluation */
    int tsne_n;
    float *tsne_feat;     /* (tsne_n, d) */
    int *tsne_expert;     /* (tsne_n) */
    int32_t *tsne_label;  /* (tsne_n) */
    double t_start, t_epoch, t_rec; long rec_step;
    float lr_override;    /* > 0 after `set lr`: replaces the schedule */
    volatile int stop;    /* set from another thread to stop at the next step boundary */
};

ml_status trainer_init(Trainer *t, const TrainConfig *cfg, const Dataset *ds);
void trainer_free(Trainer *t);
/* One optimisation step on the next mini-batch (starting a new epoch, with a fresh shuffle, when
 * needed). Fills *rec when rec is non-NULL. ML_ERR_NUMERIC when the loss is not finite (the
 * parameters are left as they were before the update). */
ml_status trainer_step(Trainer *t, StepRecord *rec);
/* Evaluates on the test split (running BN statistics, evaluation capacity). For MoE heads it
 * also fills the class x expert counts and the t-SNE feature sample. */
ml_status trainer_evaluate(Trainer *t, double *loss, double *acc);
/* Fills the routing part of an EvalRecord from the last evaluation and the epoch's sums. */
void trainer_fill_eval_routing(const Trainer *t, EvalRecord *er);
/* Evaluates now and fills a complete EvalRecord (used after each epoch and by `eval`). */
ml_status trainer_eval_record(Trainer *t, EvalRecord *er, double train_time);
/* Trains cfg.epochs epochs, evaluating after each, publishing records through cb. */
ml_status trainer_run(Trainer *t, const TrainCallbacks *cb);

#endif
