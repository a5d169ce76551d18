/* tau.h — router temperature schedules (pure functions of the step) and the live-override plan.
 *
 * A TauSchedule maps a training step to a temperature. Progress is
 *     t = clamp((step - start) / (total - start), 0, 1)      (t = step >= start ? 1 : 0 if total <= start)
 * and the kinds are (one row each in TAU_KINDS below):
 *     const    tau0
 *     linear   tau0 + (tau1 - tau0) t
 *     cosine   tau1 + (tau0 - tau1) (1 + cos(pi t)) / 2
 *     exp      tau0 (tau1 / tau0)^t
 *     sigmoid  tau1 + (tau0 - tau1) / (1 + exp(s (t - c)))      (exact formula: at t = 0 it is not
 *              exactly tau0 unless s c is large; at t = c it is (tau0 + tau1) / 2)
 *     step     a staircase of levels `step_every` steps long, counted from `start`:
 *                  i = min(floor((min(step, total) - start) / step_every), n),
 *                  n = ceil((total - start) / step_every) - 1   (index of the last level),
 *                  tau = tau0 * gamma^i.
 *              gamma = step_gamma when step_gamma > 0 (classic StepLR; tau1 unused); when
 *              step_gamma <= 0 (the default) gamma = (tau1 / tau0)^(1 / n), so the levels are
 *              log-spaced and the last level is exactly tau1. step_every <= 0 means
 *              (total - start) / 4 (four levels). Before `start` the value is tau0.
 *     cosine-restart  SGDR warm restarts: cycles of T, T g, T g^2, ... steps from `start`
 *              (T = step_every, or (total - start) / 4 when <= 0; g = step_gamma, or 1 when
 *              <= 0; g >= 1). Cycle i covers the steps x = step - start in (c_i, c_i + T g^i],
 *              c_i = T (g^i - 1) / (g - 1) (T i for g = 1), and with u = (x - c_i) / (T g^i)
 *                  tau = tau1 + (tau0 - tau1) (1 + cos(pi u)) / 2,
 *              so every cycle ends exactly at tau1 and the next step restarts near tau0. x is
 *              clamped to total - start (the value at the end holds; with the default T and
 *              g = 1 that is tau1). tau0 at and before `start`.
 * and every value is finally clamped to >= tau_min.
 *
 * TauPlan adds the live layer used by the `set tau` and `anneal` commands:
 *   - tau_plan_set(plan, step, tau): override — tau is used from now on, whatever the schedule
 *     says, until the next anneal (the override is not clamped to tau_min; it must be > 0).
 *   - tau_plan_anneal(plan, step, sched): replace the schedule from `step` on: the new schedule's
 *     start becomes `step`, its total becomes the base schedule's total (the end of training);
 *     tau0 <= 0 in `sched` means "start from the value in effect at `step`" (continuity), and
 *     tau_min <= 0 means "keep the base tau_min". An anneal clears any override.
 * Everything is a pure function of (plan, step), so a view can plot the whole future curve. */
#ifndef ML_TAU_H
#define ML_TAU_H

#include <limits.h>
#include <math.h>

#include "core/common.h"

/* ---- the vocabulary: one table of schedule kinds, one of anneal keys. The parser and completion
 * of `anneal`, `--schedule` and its help text, the tau options, the live screen's help overlay
 * and the README test are all generated from these two tables.
 *
 * TAU_KEYS: the KEY=VALUE words of `anneal KIND ...`, the TauSchedule field each sets and the
 * `moelab train` option that sets the same field:
 *     X(ID, key, field, type, metavar, lo, lo_open, hi, option, opt_lo, opt_hi, help)
 * `anneal` accepts v when lo < v (lo_open) or lo <= v (closed), v <= hi, and v is whole for an
 * int field; the option accepts [opt_lo, opt_hi]. Every kind accepts every key (a kind that does
 * not read a field ignores it); completion offers a kind's own keys (TAU_KINDS) and min=. */
/* Every temperature (tau0, tau1, tau_min, `set tau`) must be in [TAU_LOWEST, TAU_HIGHEST]: the
 * parser checks the sign, tau_validate and tau_plan_set the range when it is applied. */
#define TAU_LOWEST 1e-6f
#define TAU_HIGHEST 1e6f

#define TAU_KEYS(X)                                                                                      \
    X(S, "s", s, float, "S", -INFINITY, 0, INFINITY, "sigmoid-s", -1e4, 1e4, "sigmoid steepness")        \
    X(C, "c", c, float, "C", -INFINITY, 0, INFINITY, "sigmoid-c", -10, 10,                               \
      "sigmoid centre, in progress units (0 start, 1 end)")                                              \
    X(MIN, "min", tau_min, float, "T", 0, 1, INFINITY, "tau-min", 1e-6, 1e6, "floor of every schedule")  \
    X(EVERY, "every", step_every, int, "N", 1, 0, INT_MAX, "tau-every", 0, 1e9,                          \
      "step: level length, cosine-restart: first cycle length, in steps (0: a quarter of the schedule)") \
    X(GAMMA, "gamma", step_gamma, float, "G", 0, 1, INFINITY, "tau-gamma", 0, 1e6,                       \
      "step: factor per level (0: log-spaced levels ending at tau1); cosine-restart: each cycle G "      \
      "times longer than the one before (0: 1)")

typedef enum {
#define TAU_KEY_ENUM_(ID, ...) TAU_KEY_##ID,
    TAU_KEYS(TAU_KEY_ENUM_)
#undef TAU_KEY_ENUM_
        TAU_KEY_COUNT
} TauKey;
#define TAU_KEY_BIT(ID) (1u << TAU_KEY_##ID)

/* TAU_KINDS: one row per kind, in enum order (the value stored in checkpoints: append, never
 * reorder): X(ENUM, name, keys, description). keys: the TAU_KEY_BITs of the fields the kind
 * reads besides tau0, tau1 and min (the formulas are in the file comment). */
#define TAU_KINDS(X)                                                                                 \
    X(TAU_CONST, "const", 0u, "tau0 throughout")                                                     \
    X(TAU_LINEAR, "linear", 0u, "straight line from tau0 to tau1")                                   \
    X(TAU_COSINE, "cosine", 0u, "half cosine from tau0 to tau1")                                     \
    X(TAU_EXP, "exp", 0u, "geometric from tau0 to tau1: tau0 (tau1/tau0)^t")                         \
    X(TAU_SIGMOID, "sigmoid", TAU_KEY_BIT(S) | TAU_KEY_BIT(C),                                       \
      "logistic from tau0 to tau1, (tau0+tau1)/2 at progress c, steepness s")                        \
    X(TAU_STEP, "step", TAU_KEY_BIT(EVERY) | TAU_KEY_BIT(GAMMA),                                     \
      "staircase from tau0, a level every N steps, x gamma per level (default: log-spaced to tau1)") \
    X(TAU_COSINE_RESTART, "cosine-restart", TAU_KEY_BIT(EVERY) | TAU_KEY_BIT(GAMMA),                 \
      "SGDR: half cosines from tau0 to tau1, restarting every N steps (cycles x gamma longer)")

typedef enum {
#define TAU_KIND_ENUM_(e, ...) e,
    TAU_KINDS(TAU_KIND_ENUM_)
#undef TAU_KIND_ENUM_
        TAU_KIND_COUNT
} TauKind;

typedef struct {
    TauKind kind;
    float tau0, tau1, tau_min; // start value, end value, floor (all > 0)
    float s, c;                // sigmoid steepness and centre (in progress units, 0..1)
    int step_every;            // step: level length, cosine-restart: first cycle length, in steps
                               // (<= 0: (total - start) / 4)
    float step_gamma;          // step: factor per level (<= 0: chosen so the last level is tau1);
                               // cosine-restart: cycle-length factor, >= 1 (<= 0: 1)
    long start;                // first step of the schedule
    long total;                // step at which progress reaches 1 (end of training)
} TauSchedule;

typedef struct {
    TauSchedule base;    // the schedule given at launch
    int has_override;    // 1 after tau_plan_set, until the next anneal
    float override_tau;  // the value set by tau_plan_set
    long override_step;  // the step at which it was set
    int has_replacement; // 1 after tau_plan_anneal
    TauSchedule repl;    // the schedule in effect from repl.start on
} TauPlan;

typedef struct {
    const char *name; /* as typed (`--schedule NAME`, `anneal NAME`) */
    unsigned keys;    /* TAU_KEY_BITs of the keys it reads */
    const char *desc; /* one line */
} TauKindInfo;

typedef struct {
    const char *key;     /* without the '=' */
    const char *metavar; /* in usage lines: key=METAVAR */
    double lo, hi;       /* `anneal` range (see TAU_KEYS) */
    int lo_open, is_int;
    const char *option; /* the `moelab train` option without "--" */
    double opt_lo, opt_hi;
    const char *help;
} TauKeyInfo;

// Kind names, index = TauKind, NULL-terminated (completion lists, help texts).
extern const char *const tau_kind_names[];
// The rows of TAU_KINDS / TAU_KEYS; NULL for an invalid kind / key.
const TauKindInfo *tau_kind_info(TauKind kind);
const TauKeyInfo *tau_key_info(TauKey key);
// The key named `key` (without the '='), or -1.
int tau_key_find(const char *key);
// 1 if `anneal ... key=v` is in range for the key (see TAU_KEYS).
int tau_key_ok(TauKey key, double v);
// Sets / reads the field of `key` in s.
void tau_key_set(TauSchedule *s, TauKey key, double v);
double tau_key_get(const TauSchedule *s, TauKey key);
// "[s=S] [c=C] [min=T] ..." (every key, table order) for usage lines; returns buf.
const char *tau_key_usage(char *buf, size_t n);

// Defaults: TAU_CONST, tau0 = 1, tau1 = 0.1, tau_min = 0.01, s = 10, c = 0.5, step_every = 0,
// step_gamma = 0 (auto), start = 0, total = 1 (set total to the run's step count).
void tau_schedule_defaults(TauSchedule *s);
// ML_ERR_ARG with a message if a value is out of range (tau0, tau1, tau_min must be finite > 0,
// s finite, kind valid, cosine-restart gamma <= 0 or >= 1).
ml_status tau_validate(const TauSchedule *s);
// The schedule's temperature at `step` (see the file comment), always >= tau_min.
float tau_value(const TauSchedule *s, long step);

// Plan with `base` as its schedule and no override or replacement.
void tau_plan_init(TauPlan *plan, const TauSchedule *base);
// Temperature actually used at `step`: the override if set, else the replacement schedule if
// annealed (base before repl.start), else the base schedule.
float tau_plan_value(const TauPlan *plan, long step);
// The planned curve (ignores the override): replacement from repl.start on, else base.
float tau_plan_scheduled(const TauPlan *plan, long step);
// Overrides tau from `step` on. ML_ERR_ARG if tau is not finite and > 0.
ml_status tau_plan_set(TauPlan *plan, long step, float tau);
// Replaces the schedule from `step` to the end of training (see the file comment).
// ML_ERR_ARG if the resulting schedule does not validate.
ml_status tau_plan_anneal(TauPlan *plan, long step, const TauSchedule *new_sched);

// A name of TAU_KINDS (case-insensitive); ML_ERR_ARG naming the kinds otherwise.
ml_status tau_parse_kind(const char *name, TauKind *kind);
// The canonical lower-case name ("?" for an invalid value).
const char *tau_kind_name(TauKind kind);

#endif
