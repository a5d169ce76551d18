/* trainer.h — the training loop: mini-batches, optimiser, schedules, evaluation, commands at step
 * boundaries and checkpoints on schedule; the one place that steps a model.
 *
 * The trainer owns the model, optimiser, RNG streams and data order; its data comes through a
 * BatchSource (core/batch.h). It publishes immutable records (core/records.h) through hooks:
 * the headless runner, the live screen's worker thread and the session writer are consumers,
 * and commands come from a command source (a --commands file, the live screen's queue).
 * Same seed + same thread count => bit-identical numbers. */
#ifndef ML_TRAINER_H
#define ML_TRAINER_H

#include "batch.h"
#include "config.h"
#include "dist.h"
#include "model.h"
#include "optim.h"
#include "records.h"
#include "routestats.h"
#include "state.h"
#include "tau.h"

typedef struct Trainer Trainer;

/* One backbone MoE layer's own statistics and temperature (the head's are the Trainer's fields
 * coll, tau, ep_*, class_expert, tsne_*). Trainer.bl[i] is routed layer i of the records
 * (RunRecord.layer[i]): the backbone layers in stage order, the head after them. */
typedef struct {
    TauPlan tau;                         /* its temperature plan (starts as the launch plan) */
    CollapseState coll;                  /* its collapse flag on three views */
    double ep_drop, ep_maxvio, ep_rho;   /* sums of the current epoch: drop fraction, MaxVio, its rho */
    double ep_tau, ep_aux, ep_clean;     /* tau, L_aux, clean first-choice share */
    int *class_expert;                   /* (classes, E) first choices of the last evaluation */
    int *drop_ce;                        /* (classes, E) training pairs dropped by capacity this epoch */
    float *tsne_feat;                    /* (tsne_n, C) its pooled router input of the t-SNE sample */
    int *tsne_expert;                    /* (tsne_n) its first choice */
    long eval_selected[MOE_MAX_EXPERTS]; /* (E) all-k selections in the last evaluation */
    int mi;                              /* its index in model.moec */
    int fired;                           /* collapse views that rose since the last boundary */
} TrainerLayer;

/* What trainer_run is driven by. Every member may be NULL / 0. */
typedef struct {
    /* The command source: the next command due at this step boundary (`step` = steps completed),
     * into *c; 1 if there was one, 0 if none is due. wait = 1 while the run is paused: block until
     * a command arrives, or return 0 at once if none ever can (then a pause has no effect). */
    int (*next_cmd)(void *user, long step, int wait, TrainerCmd *c);
    /* Asked at every step boundary: non-zero stops the run cleanly ("interrupted"). */
    int (*should_stop)(void *user);
    void (*on_step)(const StepRecord *r, void *user); /* every cfg.log_every steps */
    void (*on_eval)(const EvalRecord *r, void *user); /* after each evaluation */
    void (*on_event)(const TrainerEvent *e, void *user);
    void (*on_state)(const TrainerState *s, void *user);
    /* Writes a checkpoint of the trainer now; why = NULL for a scheduled one, "snapshot" for the
     * command, "final" at the end of the run. ML_OK, or an error (message set). */
    ml_status (*checkpoint)(Trainer *t, const char *why, void *user);
    int ckpt_every;  /* checkpoint after every N epochs (0: only at the end) */
    long ckpt_steps; /* also every N steps (0: off) */
    /* Parses the on-collapse rule's commands ("set tau 2; set alpha 0.05") into out[0..max): the
     * number parsed, or -1 (message in err). NULL: a rule of commands cannot be applied. */
    int (*parse_rule)(const char *text, TrainerCmd *out, int max, char *err, size_t errn);
    int interactive; /* 1: someone can resume a pause (live screen): `pause` and `step N` work
                           * and a NaN/inf loss pauses the run; 0: they are noted, a NaN fails it,
                           * and the on-collapse `pause` rule stops the run (after a checkpoint)
                           * unless pausable */
    int pausable;    /* 1: `pause` and `step N` work (a control socket can resume) without making a
                      * NaN/inf loss pause the run; next_cmd is polled while paused */
    void *user;
} TrainHooks;

typedef enum { RUN_FINISHED, RUN_INTERRUPTED, RUN_FAILED } RunEnd;
const char *run_end_name(RunEnd e); /* "finished", "interrupted", "failed" */

/* The sums of the current epoch (reset at its first step). */
typedef struct {
    double loss, acc;
    long batches;
    double drop, maxvio, rho; /* routing: drop fraction, MaxVio, realized rho (the model total) */
    double tau, aux, clean;   /* tau, L_aux, clean first-choice share */
    double rho_head;          /* the head's own rho (rho: the model total) */
} TrainerEpoch;

/* What the last evaluation left: its class x expert counts, selections and gate mass per expert,
 * and the t-SNE sample (recomputed by the next evaluation; not checkpointed). */
typedef struct {
    int *class_expert;              /* (classes, E) first-choice counts */
    long selected[MOE_MAX_EXPERTS]; /* (E) selections (all k) per expert */
    double gate[MOE_MAX_EXPERTS];   /* (E) gate mass per expert summed over the evaluation */
    float *tsne_feat;               /* (tsne_n, d) */
    int *tsne_expert;               /* (tsne_n) */
    int32_t *tsne_label;            /* (tsne_n) */
    int tsne_n;                     /* test samples in the t-SNE sample */
} TrainerEvalOut;

/* Wall clock and throughput bookkeeping. */
typedef struct {
    double start, epoch, rec; /* when the trainer started, the epoch started, the last record was made */
    long rec_step;            /* step of the last record */
} TrainerClock;

/* The on-collapse rule (--on-collapse). */
typedef struct {
    int pause;      /* 1: pause at the first collapse, 0 not */
    int done;       /* 1 once the rule was applied */
    char text[224]; /* the commands ("" none), parsed by TrainHooks.parse_rule */
} TrainerRule;

/* Data parallelism (core/dist.h); comm NULL, rank 0, nranks 1 in a one-process run. */
typedef struct {
    const TrainComm *comm;
    uint64_t *rank_rngs; /* (nranks, 8) every rank's noise and augmentation streams: gathered by
                          * trainer_dist_gather for a checkpoint, handed out again by a resume */
    float *rank_bufs;    /* (nranks, n_buf) every rank's batch-norm running statistics: gathered for a
                          * checkpoint (rank 0), handed back by a resume */
    DistPack pack;       /* a data-parallel step's figures summed over the ranks (kept: no allocation a step) */
    int rank, nranks;
    int Bl; /* this rank's part of the batch: cfg.model.batch / nranks (the model's batch) */
    int pad_;
} TrainerDist;

struct Trainer {
    TrainConfig cfg; /* the launch configuration (never changed after trainer_init) */
    BatchSource src;
    Model model; /* its MoeConfig holds the live routing knobs (`set cf|alpha|...`) */
    Optimizer opt;
    TauPlan tau;
    Rng rng_init, rng_data, rng_noise, rng_aug;
    int32_t *perm;     /* (n_train) order of this epoch */
    int32_t *labels;   /* (batch) */
    int32_t *eval_idx; /* (batch) test indices of one evaluation batch */
    int32_t *drop_ce;  /* (classes, E) the head's training pairs dropped by capacity this epoch, by the
                        * sample's class and the pair's expert (NULL for a dense head) */
    /* no padding between fields (tests/test_train.c: a field added anywhere changes the size) */
    long step; /* steps completed */
    long steps_per_epoch;
    long total_steps;
    int epoch; /* epochs completed */
    int pos;   /* batch index inside the current epoch */
    TrainerEpoch ep;    /* running sums of the current epoch */
    CollapseState coll; /* MoE: dead experts and the collapse flag on three views */
    TrainerEvalOut ev;  /* the last evaluation's output */
    TrainerClock clock;
    long ckpt_step;     /* step of the last checkpoint written or restored (-1: none) */
    float lr_override;  /* > 0 after `set lr`: replaces the schedule */
    int nbl;            /* backbone MoE layers (model.nmoec) */
    TrainerRule rule;
    TrainerState state; /* what on_state publishes */
    /* ---- the backbone MoE layers (issue #14 phase 2), in stage order */
    TrainerLayer bl[MODEL_MAX_BBL];
    TrainerDist dist;
};

/* src is copied (its ctx must outlive the trainer). */
ml_status trainer_init(Trainer *t, const TrainConfig *cfg, const BatchSource *src);
/* trainer_init for one rank of a data-parallel run (comm: core/dist.h; NULL: exactly trainer_init;
 * a comm of one rank takes the data-parallel code path on one process, a reference for tests).
 * cfg->model.batch stays the global batch; each rank's model holds batch / N, which N must divide.
 * Every rank must be given the same cfg and data. */
ml_status trainer_init_dist(Trainer *t, const TrainConfig *cfg, const BatchSource *src, const TrainComm *comm);
/* Data parallelism, collective (no-ops in a one-process run): trainer_dist_sync averages the batch
 * norm running statistics over the ranks (before every evaluation, so all ranks evaluate alike);
 * trainer_dist_gather collects every rank's random streams and running statistics into rank_rngs
 * and rank_bufs on rank 0 (before a checkpoint: a checkpoint changes nothing, so a run resumed
 * from it goes on exactly as the run that wrote it); trainer_dist_share sends rank 0's whole state
 * (weights, optimizer, every checkpoint row; each rank its own streams and running statistics) to
 * every rank (after a resume). */
void trainer_dist_sync(Trainer *t);
void trainer_dist_gather(Trainer *t);
void trainer_dist_share(Trainer *t);
/* trainer_init's checks and model, without its memory (model_layout): for a dry run, which may
 * only read t->cfg, t->model's layout and sizes, then trainer_free. */
ml_status trainer_init_layout(Trainer *t, const TrainConfig *cfg, const BatchSource *src);
/* Bytes the training would hold: the model's (model_memory_bytes) plus the optimizer state. */
double trainer_memory_bytes(const Trainer *t);
void trainer_free(Trainer *t);
/* Routed layers of the records: nbl backbone layers, then the head if it routes. */
int trainer_nlayers(const Trainer *t);
/* The primary routed layer (records index): the head when it routes, else the first backbone
 * layer; -1 when nothing routes. */
int trainer_primary_layer(const Trainer *t);
/* The routed layer called name ("moe2", "head"): its records index, or -1. */
int trainer_layer_find(const Trainer *t, const char *name);
/* The run's description for sessions and views. */
void trainer_describe(const Trainer *t, RunRecord *r);
/* The resumable state as a table over this trainer (see state.h). */
void trainer_state(Trainer *t, StateView *v);

/* One optimisation step on the next mini-batch (starting a new epoch, with a fresh shuffle, when
 * needed). Fills *rec when rec is non-NULL. ML_ERR_NUMERIC when the loss is not finite (the
 * parameters are left as they were before the update). */
ml_status trainer_step(Trainer *t, StepRecord *rec);
/* Evaluates on the test split (running BN statistics, evaluation capacity). For MoE heads it
 * also fills the class x expert counts and the t-SNE feature sample. */
ml_status trainer_evaluate(Trainer *t, double *loss, double *acc);
/* Evaluates test images in the batches given (the batch-composition probe, core/bprobe.h): batch
 * b is idx[bstart[b] .. bstart[b+1]) (1 .. batch images), with running BN statistics, the
 * evaluation capacity and no noise, as trainer_evaluate. Per test index i it stores (each output
 * may be NULL) the logits at logits[i * classes ..], the label at labels[i], and per routed layer
 * l (trainer_nlayers order) the first choice at first[l * n_test + i]. Changes no trainer
 * statistics. ML_ERR_ARG for a batch size or an index out of range. */
ml_status trainer_eval_batches(Trainer *t, const int *idx, const int *bstart, int nb, float *logits, int *first,
                               int32_t *labels);
/* The name of routed layer i (trainer_nlayers order): "moe2", ..., "head". */
const char *trainer_layer_name(const Trainer *t, int i);
/* Routed layer i's collapse detector and temperature plan (trainer_nlayers order). */
static inline const CollapseState *trainer_layer_collapse(const Trainer *t, int i) {
    return i < t->nbl ? &t->bl[i].coll : &t->coll;
}
static inline TauPlan *trainer_layer_plan(Trainer *t, int i) { return i < t->nbl ? &t->bl[i].tau : &t->tau; }
/* Evaluates now and fills a complete EvalRecord (used after each epoch and by `eval`). */
ml_status trainer_eval_record(Trainer *t, EvalRecord *er, double train_time);
/* Applies a parameter command (CMD_SET, CMD_ANNEAL) now. The other kinds are trainer_run's. */
ml_status trainer_apply(Trainer *t, const TrainerCmd *c);
/* Extends (or shortens, not below the epochs done) the run to `epochs` epochs from its current
 * state (`--resume DIR --epochs N`): total_steps, and the ends of the schedules that ended with
 * training (the learning-rate schedule, every layer's temperature plan and its replacement after
 * an `anneal`) move to the new end; a temperature schedule shorter than the run (--tau-epochs)
 * keeps its length. ML_ERR_ARG when epochs is below the epochs done. */
ml_status trainer_extend(Trainer *t, int epochs);
/* Sets the on-collapse rule: "pause", "off" / "" (none) or commands (parsed by
 * TrainHooks.parse_rule when the rule fires); re-arms it (it applies once, at the next rising edge
 * of a collapse view). ML_ERR_ARG if it is too long. */
ml_status trainer_set_rule(Trainer *t, const char *rule);
/* Trains to cfg.epochs, evaluating after each epoch, applying commands at step boundaries,
 * checkpointing on schedule and at the end, publishing records through h. */
RunEnd trainer_run(Trainer *t, const TrainHooks *h);

#endif
