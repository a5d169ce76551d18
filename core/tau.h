/* tau.h — router temperature schedules (pure functions of the step) and the live-override plan.
 *
 * A TauSchedule maps a training step to a temperature. Progress is
 *     t = clamp((step - start) / (total - start), 0, 1)      (t = step >= start ? 1 : 0 if total <= start)
 * and the kinds are (DESIGN.md section 1):
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

#include "core/common.h"

typedef enum { TAU_CONST, TAU_LINEAR, TAU_COSINE, TAU_EXP, TAU_SIGMOID, TAU_STEP } TauKind;

typedef struct {
    TauKind kind;
    float tau0, tau1, tau_min; // start value, end value, floor (all > 0)
    float s, c;                // sigmoid steepness and centre (in progress units, 0..1)
    int step_every;            // step: level length in steps (<= 0: (total - start) / 4)
    float step_gamma;          // step: factor per level (<= 0: chosen so the last level is tau1)
    long start;                // first step of the schedule
    long total;                // step at which progress reaches 1 (end of training)
} TauSchedule;

typedef struct {
    TauSchedule base;      // the schedule given at launch
    int has_override;      // 1 after tau_plan_set, until the next anneal
    float override_tau;    // the value set by tau_plan_set
    long override_step;    // the step at which it was set
    int has_replacement;   // 1 after tau_plan_anneal
    TauSchedule repl;      // the schedule in effect from repl.start on
} TauPlan;

// Defaults: TAU_CONST, tau0 = 1, tau1 = 0.1, tau_min = 0.01, s = 10, c = 0.5, step_every = 0,
// step_gamma = 0 (auto), start = 0, total = 1 (set total to the run's step count).
void tau_schedule_defaults(TauSchedule *s);
// ML_ERR_ARG with a message if a value is out of range (tau0, tau1, tau_min must be finite > 0,
// s finite, kind valid).
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

// "const", "linear", "cosine", "exp", "sigmoid", "step" (case-insensitive). ML_ERR_ARG otherwise.
ml_status tau_parse_kind(const char *name, TauKind *kind);
// The canonical lower-case name ("?" for an invalid value).
const char *tau_kind_name(TauKind kind);

#endif
