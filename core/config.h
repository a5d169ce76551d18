/* config.h — a training run's configuration: model, optimiser, schedules, run length, routing
 * window. Plain data: the option parser fills it, the trainer reads it, sessions store it as
 * config_json. The trainer never changes it after trainer_init (the live knobs that `set` changes
 * live in the model's MoeConfig, the temperature plan and the learning-rate override). */
#ifndef ML_CONFIG_H
#define ML_CONFIG_H

#include <stdint.h>

#include "model.h"
#include "optim.h"
#include "routestats.h"
#include "tau.h"

/* A starting value of one expert's utility bias (--init-bias): a scenario that routes towards or
 * away from an expert from step 1 (used with --bias-mode logits|select; --bias-rate 0 keeps it). */
typedef struct {
    int stage;  /* the routed layer: -2 every layer, -1 the head, 0..3 the backbone layer after that stage */
    int expert; /* 0..E-1 */
    float value;
} InitBias;
#define MAX_INIT_BIAS 16

typedef struct {
    ModelConfig model; /* in_c/h/w and classes are taken from the batch source */
    OptConfig opt;
    LrSchedule lr;        /* total/warmup in steps are filled by trainer_init from the epochs */
    float warmup_epochs;  /* linear LR warm-up length in epochs (default 0) */
    TauSchedule tau;      /* total filled by trainer_init */
    float tau_epochs;     /* schedule length in epochs (0: the whole run); tau1 holds after it */
    int epochs;           /* default 10 */
    uint64_t seed;        /* default 1 */
    int threads;          /* OpenMP + OpenBLAS threads (default: all cores) */
    int log_every;        /* StepRecord period in steps (default 10) */
    RouteWinConfig route; /* dead-expert window and collapse thresholds */
    int tsne_samples;     /* test samples whose features are kept per evaluation (default 512) */
    int augment;          /* -1: on for RGB datasets (default), 0: off, 1: on (crop + flip) */
    int n_init_bias;      /* entries of init_bias (default 0: every bias starts at 0) */
    InitBias init_bias[MAX_INIT_BIAS];
    int ranks; /* processes training the run (data parallelism, core/dist.h); set by trainer_init_dist
                * (1: one process) */
} TrainConfig;

void train_config_defaults(TrainConfig *c);
/* The run's record in config_json (core/cfgvisit.h), in its order, after the dataset (which
 * sessions/ writes first): a new option's line goes here, in model_config_visit or in
 * moe_config_visit, beside its use. */
void train_config_visit(const TrainConfig *c, CfgVisitor *v);

#endif
