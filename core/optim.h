/* optim.h — optimisers over the model's flat parameter buffer, and learning-rate schedules.
 *
 * SGD: v = mu v + g; step = nesterov ? g + mu v : v; w -= lr step.  AdamW (Loshchilov & Hutter)
 * with bias correction. Weight decay is decoupled in both: w -= lr * wd * w, applied only to the
 * tensors flagged `decay` (conv and linear weights; not biases, batch-norm or the router). */
#ifndef ML_OPTIM_H
#define ML_OPTIM_H

#include "model.h"

/* The optimisers and the learning-rate schedules, one row each (enum order = the value stored in
 * checkpoints: append, never reorder): X(ENUM, name, description). `--optimizer`, `--lr-schedule`,
 * their help and error messages come from these. */
#define OPT_KINDS(X)                                             \
    X(OPT_SGD, "sgd", "SGD with momentum (optionally Nesterov)") \
    X(OPT_ADAMW, "adamw", "AdamW")
#define LR_KINDS(X)                                                       \
    X(LR_CONST, "const", "the peak rate throughout")                      \
    X(LR_STEP, "step", "x gamma at each milestone (x0.1 at 50% and 75%)") \
    X(LR_COSINE, "cosine", "half cosine from the peak rate to 0")

#define OPT_ENUM_(e, ...) e,
typedef enum { OPT_KINDS(OPT_ENUM_) } OptKind;
typedef enum { LR_KINDS(OPT_ENUM_) } LrKind;
#undef OPT_ENUM_

/* Names, index = enum value, NULL-terminated. */
extern const char *const optim_kind_names[];
extern const char *const lr_kind_names[];

typedef struct {
    OptKind kind;
    float momentum;          /* SGD (default 0.9) */
    int nesterov;            /* SGD (default 0) */
    float beta1, beta2, eps; /* AdamW (0.9, 0.999, 1e-8) */
    float wd;                /* decoupled weight decay (default optim_default_wd(kind)) */
} OptConfig;

typedef struct {
    LrKind kind;
    float base;          /* peak learning rate */
    long warmup;         /* linear warm-up steps from base/warmup to base */
    long total;          /* total training steps */
    float gamma;         /* LR_STEP: multiply by gamma at each milestone (default 0.1) */
    float milestones[2]; /* LR_STEP: fractions of training (default 0.5, 0.75) */
} LrSchedule;

typedef struct {
    OptConfig cfg;
    long n;       /* floats */
    float *m, *v; /* (n) momentum / first moment, second moment (AdamW only) */
    long t;       /* steps taken */
} Optimizer;

/* The default weight decay of an optimiser: SGD 5e-3 (decoupled; about PyTorch's coupled 5e-4 at
 * momentum 0.9), AdamW 0.05. The one place this default lives. */
float optim_default_wd(OptKind kind);
void optim_config_defaults(OptConfig *c, OptKind kind);
ml_status optim_init(Optimizer *o, const OptConfig *cfg, long n);
void optim_free(Optimizer *o);
/* One update of every parameter tensor of the model with learning rate lr. The gradients are
 * zeroed as they are consumed (saving a separate pass over them), ready for the next backward. */
void optim_step(Optimizer *o, Model *m, float lr);
int optim_kind_parse(const char *s, OptKind *k);
const char *optim_kind_name(OptKind k);

/* Learning rate at `step` (pure function of the step). */
float lr_value(const LrSchedule *s, long step);
/* A name of LR_KINDS, or "constant" for LR_CONST: 0, else -1. */
int lr_kind_parse(const char *s, LrKind *k);
const char *lr_kind_name(LrKind k);

#endif
