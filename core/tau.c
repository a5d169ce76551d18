/* tau.c — router temperature schedules and the live-override plan (see tau.h for the formulas). */
#include "core/tau.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core/vocab.h"

#define TAU_NAME_(e, name, ...) name,
const char *const tau_kind_names[] = {TAU_KINDS(TAU_NAME_) NULL};
#undef TAU_NAME_

static const TauKindInfo tau_kinds_[] = {
#define TAU_KIND_ROW_(e, name, keys, desc) {name, keys, desc},
    TAU_KINDS(TAU_KIND_ROW_)
#undef TAU_KIND_ROW_
};

static const TauKeyInfo tau_keys_[] = {
#define TAU_KEY_ROW_(ID, key, field, type, meta, lo, lo_open, hi, opt, opt_lo, opt_hi, help) \
    {key, meta, lo, hi, lo_open, _Generic((type)0, int : 1, default : 0), opt, opt_lo, opt_hi, help},
    TAU_KEYS(TAU_KEY_ROW_)
#undef TAU_KEY_ROW_
};

#define TAU_NKINDS ((int)TAU_KIND_COUNT)
_Static_assert(sizeof tau_kinds_ / sizeof tau_kinds_[0] == TAU_KIND_COUNT, "one TauKindInfo per kind");
_Static_assert(TAU_KEY_COUNT <= 32, "TauKindInfo.keys is a 32-bit mask");

const TauKindInfo *tau_kind_info(TauKind kind) {
    return (int)kind >= 0 && (int)kind < TAU_NKINDS ? &tau_kinds_[kind] : NULL;
}

const TauKeyInfo *tau_key_info(TauKey key) {
    return (int)key >= 0 && (int)key < (int)TAU_KEY_COUNT ? &tau_keys_[key] : NULL;
}

int tau_key_find(const char *key) {
    for (int i = 0; key && i < (int)TAU_KEY_COUNT; i++)
        if (strcmp(key, tau_keys_[i].key) == 0) return i;
    return -1;
}

int tau_key_ok(TauKey key, double v) {
    const TauKeyInfo *k = tau_key_info(key);
    if (!k || !(k->lo_open ? v > k->lo : v >= k->lo) || !(v <= k->hi)) return 0;
    return !k->is_int || v == floor(v);
}

void tau_key_set(TauSchedule *s, TauKey key, double v) {
    switch (key) {
#define TAU_KEY_SET_(ID, key, field, type, ...) \
    case TAU_KEY_##ID: s->field = (type)v; break;
        TAU_KEYS(TAU_KEY_SET_)
#undef TAU_KEY_SET_
    case TAU_KEY_COUNT: break;
    }
}

double tau_key_get(const TauSchedule *s, TauKey key) {
    switch (key) {
#define TAU_KEY_GET_(ID, key, field, ...) \
    case TAU_KEY_##ID: return (double)s->field;
        TAU_KEYS(TAU_KEY_GET_)
#undef TAU_KEY_GET_
    case TAU_KEY_COUNT: break;
    }
    return 0.0;
}

const char *tau_key_usage(char *buf, size_t n) {
    size_t len = 0;
    if (n) buf[0] = '\0';
    for (int i = 0; i < (int)TAU_KEY_COUNT && len < n; i++) {
        int w = snprintf(buf + len, n - len, "%s[%s=%s]", i ? " " : "", tau_keys_[i].key, tau_keys_[i].metavar);
        if (w < 0) break;
        len += (size_t)w;
    }
    return buf;
}

void tau_schedule_defaults(TauSchedule *s) {
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

// A usable temperature: finite and in [TAU_LOWEST, TAU_HIGHEST] (below, z / tau overflows to
// inf and the softmax to NaN: `set tau 1e-40` used to NaN the run).
static int tau_positive_(float v) { return isfinite(v) && v >= TAU_LOWEST && v <= TAU_HIGHEST; }

ml_status tau_validate(const TauSchedule *s) {
    if ((int)s->kind < 0 || (int)s->kind >= TAU_NKINDS)
        return ml_fail(ML_ERR_ARG, "tau schedule: invalid kind %d", (int)s->kind);
    if (!tau_positive_(s->tau0) || !tau_positive_(s->tau1) || !tau_positive_(s->tau_min))
        return ml_fail(ML_ERR_ARG, "tau schedule: tau0 (%g), tau1 (%g) and tau_min (%g) must be > 0, in [%g, %g]",
                       (double)s->tau0, (double)s->tau1, (double)s->tau_min, (double)TAU_LOWEST, (double)TAU_HIGHEST);
    if (!isfinite(s->s) || !isfinite(s->c) || !isfinite(s->step_gamma))
        return ml_fail(ML_ERR_ARG, "tau schedule: s, c and step_gamma must be finite");
    if (s->kind == TAU_COSINE_RESTART && s->step_gamma > 0.0f && s->step_gamma < 1.0f)
        return ml_fail(
            ML_ERR_ARG,
            "tau schedule: cosine-restart gamma %g must be >= 1 (each cycle as long as the one before or longer)",
            (double)s->step_gamma);
    return ML_OK;
}

// Progress in [0, 1] (double for long step counts).
static double tau_progress_(const TauSchedule *s, long step) {
    if (s->total <= s->start) return step >= s->start ? 1.0 : 0.0;
    double t = (double)(step - s->start) / (double)(s->total - s->start);
    return t < 0.0 ? 0.0 : (t > 1.0 ? 1.0 : t);
}

static double tau_step_rule_(const TauSchedule *s, long step) {
    long span = s->total - s->start;
    if (span <= 0) // degenerate: like the other kinds, tau0 before start and the end value after
        return step < s->start ? s->tau0 : (s->step_gamma > 0.0f ? s->tau0 : s->tau1);
    if (step <= s->start) return s->tau0;
    long every = s->step_every > 0 ? s->step_every : span / 4;
    if (every < 1) every = 1;
    long n = (span + every - 1) / every - 1; // index of the last level
    long at = (step < s->total ? step : s->total) - s->start;
    long i = at / every;
    if (i > n) i = n;
    if (n <= 0 || i <= 0) return s->tau0;
    double gamma;
    if (s->step_gamma > 0.0f) gamma = s->step_gamma;
    else gamma = pow((double)s->tau1 / (double)s->tau0, 1.0 / (double)n);
    if (i == n && s->step_gamma <= 0.0f) return s->tau1; // exact end value, no pow round-off
    return (double)s->tau0 * pow(gamma, (double)i);
}

static double tau_restart_rule_(const TauSchedule *s, long step) {
    const long span = s->total - s->start;
    if (span <= 0) return step < s->start ? s->tau0 : s->tau1;
    if (step <= s->start) return s->tau0;
    const long x = (step < s->total ? step : s->total) - s->start; // 1 .. span
    const long T = s->step_every > 0 ? s->step_every : (span / 4 > 0 ? span / 4 : 1);
    const double g0 = (double)s->step_gamma;
    const double g = g0 > 1.0 && isfinite(g0) ? g0 : 1.0; // <= 0: 1 (and an unvalidated (0, 1): 1)
    double c0, len;                                       // the cycle holding x: (c0, c0 + len]
    if (g == 1.0) {
        const long i = (x - 1) / T;
        c0 = (double)(i * T);
        len = (double)T;
    } else {
        long i = (long)floor(log1p((double)x * (g - 1.0) / (double)T) / log(g));
        if (i < 0) i = 0;
        while (i > 0 && (double)T * (pow(g, (double)i) - 1.0) / (g - 1.0) >= (double)x) i--;
        while ((double)T * (pow(g, (double)(i + 1)) - 1.0) / (g - 1.0) < (double)x) i++;
        c0 = (double)T * (pow(g, (double)i) - 1.0) / (g - 1.0);
        len = (double)T * pow(g, (double)i);
    }
    const double u = ((double)x - c0) / len; // (0, 1]
    return (double)s->tau1 + ((double)s->tau0 - (double)s->tau1) * 0.5 * (1.0 + cos(3.14159265358979323846 * u));
}

float tau_value(const TauSchedule *s, long step) {
    double t = tau_progress_(s, step);
    double a = s->tau0, b = s->tau1, v;
    switch (s->kind) {
    case TAU_LINEAR: v = a + (b - a) * t; break;
    case TAU_COSINE: v = b + (a - b) * 0.5 * (1.0 + cos(3.14159265358979323846 * t)); break;
    case TAU_EXP: v = a * pow(b / a, t); break;
    case TAU_SIGMOID: v = b + (a - b) / (1.0 + exp((double)s->s * (t - (double)s->c))); break;
    case TAU_STEP: v = tau_step_rule_(s, step); break;
    case TAU_COSINE_RESTART: v = tau_restart_rule_(s, step); break;
    case TAU_CONST:
    default: v = a; break;
    }
    if (!(v >= s->tau_min)) v = s->tau_min;
    return (float)v;
}

void tau_plan_init(TauPlan *plan, const TauSchedule *base) {
    plan->base = *base;
    plan->has_override = 0;
    plan->override_tau = 0.0f;
    plan->override_step = 0;
    plan->has_replacement = 0;
    plan->repl = *base;
}

float tau_plan_scheduled(const TauPlan *plan, long step) {
    if (plan->has_replacement && step >= plan->repl.start) return tau_value(&plan->repl, step);
    return tau_value(&plan->base, step);
}

float tau_plan_value(const TauPlan *plan, long step) {
    if (plan->has_override) return plan->override_tau;
    return tau_plan_scheduled(plan, step);
}

ml_status tau_plan_set(TauPlan *plan, long step, float tau) {
    if (!tau_positive_(tau))
        return ml_fail(ML_ERR_ARG, "set tau: %g is not a positive finite number in [%g, %g]", (double)tau,
                       (double)TAU_LOWEST, (double)TAU_HIGHEST);
    plan->has_override = 1;
    plan->override_tau = tau;
    plan->override_step = step;
    return ML_OK;
}

ml_status tau_plan_anneal(TauPlan *plan, long step, const TauSchedule *new_sched) {
    TauSchedule r = *new_sched;
    if (!(r.tau0 > 0.0f)) r.tau0 = tau_plan_value(plan, step);
    if (!(r.tau_min > 0.0f)) r.tau_min = plan->base.tau_min;
    r.start = step;
    r.total = plan->base.total > step ? plan->base.total : step;
    ml_status st = tau_validate(&r);
    if (st != ML_OK) return st;
    plan->repl = r;
    plan->has_replacement = 1;
    plan->has_override = 0;
    return ML_OK;
}

ml_status tau_parse_kind(const char *name, TauKind *kind) {
    const int i = vocab_find(tau_kind_names, name, 1);
    if (i >= 0) {
        *kind = (TauKind)i;
        return ML_OK;
    }
    char all[256];
    return ml_fail(ML_ERR_ARG, "unknown tau schedule '%s' (%s)", name ? name : "(null)",
                   vocab_join(all, sizeof all, tau_kind_names, ", ", NULL));
}

const char *tau_kind_name(TauKind kind) {
    if ((int)kind < 0 || (int)kind >= TAU_NKINDS) return "?";
    return tau_kind_names[kind];
}
