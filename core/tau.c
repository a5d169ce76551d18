/* tau.c — router temperature schedules and the live-override plan (see tau.h for the formulas). */
#include "core/tau.h"

#include <math.h>
#include <strings.h>

static const char *const tau_names[] = {"const", "linear", "cosine", "exp", "sigmoid", "step"};
#define TAU_NKINDS ((int)(sizeof tau_names / sizeof tau_names[0]))

void tau_schedule_defaults(TauSchedule *s)
{
    s->kind = TAU_CONST;
    s->tau0 = 1.0f;
    s->tau1 = 0.1f;
    s->tau_min = 0.01f;
    s->s = 10.0f;
    s->c = 0.5f;
    s->step_every = 0;
    s->step_gamma = 0.0f;
    s->start = 0;
    s->total = 1;
}

static int tau_positive_(float v)
{
    return isfinite(v) && v > 0.0f;
}

ml_status tau_validate(const TauSchedule *s)
{
    if ((int)s->kind < 0 || (int)s->kind >= TAU_NKINDS)
        return ml_fail(ML_ERR_ARG, "tau schedule: invalid kind %d", (int)s->kind);
    if (!tau_positive_(s->tau0) || !tau_positive_(s->tau1) || !tau_positive_(s->tau_min))
        return ml_fail(ML_ERR_ARG, "tau schedule: tau0 (%g), tau1 (%g) and tau_min (%g) must be > 0",
                       (double)s->tau0, (double)s->tau1, (double)s->tau_min);
    if (!isfinite(s->s) || !isfinite(s->c) || !isfinite(s->step_gamma))
        return ml_fail(ML_ERR_ARG, "tau schedule: s, c and step_gamma must be finite");
    return ML_OK;
}

// Progress in [0, 1] (double for long step counts).
static double tau_progress_(const TauSchedule *s, long step)
{
    if (s->total <= s->start)
        return step >= s->start ? 1.0 : 0.0;
    double t = (double)(step - s->start) / (double)(s->total - s->start);
    return t < 0.0 ? 0.0 : (t > 1.0 ? 1.0 : t);
}

static double tau_step_rule_(const TauSchedule *s, long step)
{
    long span = s->total - s->start;
    if (span <= 0) // degenerate: like the other kinds, tau0 before start and the end value after
        return step < s->start ? s->tau0 : (s->step_gamma > 0.0f ? s->tau0 : s->tau1);
    if (step <= s->start)
        return s->tau0;
    long every = s->step_every > 0 ? s->step_every : span / 4;
    if (every < 1)
        every = 1;
    long n = (span + every - 1) / every - 1; // index of the last level
    long at = (step < s->total ? step : s->total) - s->start;
    long i = at / every;
    if (i > n)
        i = n;
    if (n <= 0 || i <= 0)
        return s->tau0;
    double gamma;
    if (s->step_gamma > 0.0f)
        gamma = s->step_gamma;
    else
        gamma = pow((double)s->tau1 / (double)s->tau0, 1.0 / (double)n);
    if (i == n && s->step_gamma <= 0.0f)
        return s->tau1; // exact end value, no pow round-off
    return (double)s->tau0 * pow(gamma, (double)i);
}

float tau_value(const TauSchedule *s, long step)
{
    double t = tau_progress_(s, step);
    double a = s->tau0, b = s->tau1, v;
    switch (s->kind) {
    case TAU_LINEAR: v = a + (b - a) * t; break;
    case TAU_COSINE: v = b + (a - b) * 0.5 * (1.0 + cos(3.14159265358979323846 * t)); break;
    case TAU_EXP: v = a * pow(b / a, t); break;
    case TAU_SIGMOID: v = b + (a - b) / (1.0 + exp((double)s->s * (t - (double)s->c))); break;
    case TAU_STEP: v = tau_step_rule_(s, step); break;
    case TAU_CONST:
    default: v = a; break;
    }
    if (!(v >= s->tau_min))
        v = s->tau_min;
    return (float)v;
}

void tau_plan_init(TauPlan *plan, const TauSchedule *base)
{
    plan->base = *base;
    plan->has_override = 0;
    plan->override_tau = 0.0f;
    plan->override_step = 0;
    plan->has_replacement = 0;
    plan->repl = *base;
}

float tau_plan_scheduled(const TauPlan *plan, long step)
{
    if (plan->has_replacement && step >= plan->repl.start)
        return tau_value(&plan->repl, step);
    return tau_value(&plan->base, step);
}

float tau_plan_value(const TauPlan *plan, long step)
{
    if (plan->has_override)
        return plan->override_tau;
    return tau_plan_scheduled(plan, step);
}

ml_status tau_plan_set(TauPlan *plan, long step, float tau)
{
    if (!tau_positive_(tau))
        return ml_fail(ML_ERR_ARG, "set tau: %g is not a positive finite number", (double)tau);
    plan->has_override = 1;
    plan->override_tau = tau;
    plan->override_step = step;
    return ML_OK;
}

ml_status tau_plan_anneal(TauPlan *plan, long step, const TauSchedule *new_sched)
{
    TauSchedule r = *new_sched;
    if (!(r.tau0 > 0.0f))
        r.tau0 = tau_plan_value(plan, step);
    if (!(r.tau_min > 0.0f))
        r.tau_min = plan->base.tau_min;
    r.start = step;
    r.total = plan->base.total > step ? plan->base.total : step;
    ml_status st = tau_validate(&r);
    if (st != ML_OK)
        return st;
    plan->repl = r;
    plan->has_replacement = 1;
    plan->has_override = 0;
    return ML_OK;
}

ml_status tau_parse_kind(const char *name, TauKind *kind)
{
    for (int i = 0; name && i < TAU_NKINDS; i++) {
        if (strcasecmp(name, tau_names[i]) == 0) {
            *kind = (TauKind)i;
            return ML_OK;
        }
    }
    return ml_fail(ML_ERR_ARG, "unknown tau schedule '%s' (const, linear, cosine, exp, sigmoid, step)",
                   name ? name : "(null)");
}

const char *tau_kind_name(TauKind kind)
{
    if ((int)kind < 0 || (int)kind >= TAU_NKINDS)
        return "?";
    return tau_names[kind];
}
