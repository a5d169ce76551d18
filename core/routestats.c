/* routestats.c — dead experts, collapse flag and class x expert mutual information (see
 * routestats.h for the definitions). */
#include "core/routestats.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

void routewin_defaults(RouteWinConfig *c) {
    c->window = 100;
    c->min_steps = 100; /* a full window: a random router is often collapsed for its first ~50 steps */
    c->entropy_min = 0.5;
    c->max_share = 0.5;
    c->dead_frac = 0.5;
    c->warmup = -1;       /* auto: min(5% of training, 200 steps) */
    c->hysteresis = 0.1;  /* in at 0.5, out at 0.4 (shares) / 0.6 (entropy) */
    c->confirm = 20;      /* a condition must hold 20 steps running to open or close an episode */
}

ml_status routewin_init(RouteWin *w, const RouteWinConfig *c, int E) {
    memset(w, 0, sizeof *w);
    if (c->window < 1) return ml_fail(ML_ERR_ARG, "route window: window = %d must be >= 1", c->window);
    if (E < 1 || E > MOE_MAX_EXPERTS)
        return ml_fail(ML_ERR_ARG, "route window: E = %d must be 1..%d", E, MOE_MAX_EXPERTS);
    if (!isfinite(c->entropy_min) || !isfinite(c->max_share) || !isfinite(c->dead_frac) || !isfinite(c->hysteresis))
        return ml_fail(ML_ERR_ARG, "route window: collapse thresholds must be finite");
    if (c->confirm < 1) return ml_fail(ML_ERR_ARG, "route window: confirm = %d must be >= 1", c->confirm);
    w->ring = ml_alloc((size_t)c->window * (size_t)E * sizeof *w->ring);
    w->ent_ring = ml_alloc((size_t)c->window * sizeof *w->ent_ring);
    w->share_ring = ml_alloc((size_t)c->window * sizeof *w->share_ring);
    if (!w->ring || !w->ent_ring || !w->share_ring) {
        ml_free(w->ring);
        ml_free(w->ent_ring);
        ml_free(w->share_ring);
        w->ring = NULL;
        w->ent_ring = NULL;
        w->share_ring = NULL;
    }
    if (!w->ring) return ml_fail(ML_ERR_NOMEM, "route window: out of memory (%d steps x %d experts)", c->window, E);
    w->cfg = *c;
    w->E = E;
    return ML_OK;
}

void routewin_free(RouteWin *w) {
    ml_free(w->ring);
    ml_free(w->ent_ring);
    ml_free(w->share_ring);
    memset(w, 0, sizeof *w);
}

void routewin_reset(RouteWin *w) {
    w->n = 0;
    w->head = 0;
    w->pushed = 0;
    memset(w->sum, 0, sizeof w->sum);
    memset(w->zero_run, 0, sizeof w->zero_run);
    memset(w->nz, 0, sizeof w->nz);
    w->ent_sum = 0.0;
    w->share_sum = 0.0;
}

/* H(kept / sum kept) / log E of one step's counts (1 if E = 1, 0 if nothing kept) */
static double step_entropy(const int *kept, int E) {
    if (E <= 1) return 1.0;
    double tot = 0.0, h = 0.0;
    for (int e = 0; e < E; e++) tot += kept[e];
    if (!(tot > 0.0)) return 0.0;
    for (int e = 0; e < E; e++)
        if (kept[e] > 0) {
            double q = kept[e] / tot;
            h -= q * log(q);
        }
    return h / log((double)E);
}

/* One step with its entropy given (soft heads: the entropy of the gate mass, not of the counts). */
static void routewin_push_ent(RouteWin *w, const int *kept, double entropy, double first_share) {
    int E = w->E;
    int *slot = w->ring + (size_t)w->head * E;
    if (w->n == w->cfg.window) {
        for (int e = 0; e < E; e++) w->sum[e] -= slot[e], w->nz[e] -= slot[e] > 0;
        w->ent_sum -= w->ent_ring[w->head];
        w->share_sum -= w->share_ring[w->head];
    } else {
        w->n++;
    }
    for (int e = 0; e < E; e++) {
        slot[e] = kept[e];
        w->sum[e] += kept[e];
        w->nz[e] += kept[e] > 0;
        w->zero_run[e] = kept[e] == 0 ? w->zero_run[e] + 1 : 0;
    }
    w->ent_ring[w->head] = entropy;
    w->ent_sum += w->ent_ring[w->head];
    w->share_ring[w->head] = first_share;
    w->share_sum += first_share;
    w->head = (w->head + 1) % w->cfg.window;
    w->pushed++;
}

void routewin_push_counts(RouteWin *w, const int *kept, double first_share) {
    routewin_push_ent(w, kept, step_entropy(kept, w->E), first_share);
}

void routewin_push(RouteWin *w, const MoeStepStats *st) {
    ML_ASSERT(st->E == w->E);
    routewin_push_counts(w, st->kept, st->first_share);
}

int routewin_dead_count(const RouteWin *w, int *dead) {
    int full = w->n == w->cfg.window, nd = 0;
    for (int e = 0; e < w->E; e++) {
        int is_dead = full && w->zero_run[e] >= w->cfg.window;
        nd += is_dead;
        if (dead) dead[e] = is_dead;
    }
    return nd;
}

double routewin_load_entropy(const RouteWin *w) {
    /* mean of the per-step load entropies over the window: collapse is a per-batch event, and
     * the summed counts of a window hide a router that sends every batch to one expert pair
     * that changes over time (as a utility bias makes it do) */
    if (w->n == 0) return w->E <= 1 ? 1.0 : 0.0;
    return w->ent_sum / w->n;
}

double routewin_max_share(const RouteWin *w) { return w->n > 0 ? w->share_sum / w->n : 0.0; }

int routewin_collapsed(const RouteWin *w, int *reason) {
    int r = 0;
    const int need = w->cfg.min_steps < w->cfg.window ? w->cfg.min_steps : w->cfg.window;
    if (w->n >= need && w->n > 0) {
        if (routewin_load_entropy(w) < w->cfg.entropy_min) r |= COLLAPSE_ENTROPY;
        if (routewin_max_share(w) > w->cfg.max_share) r |= COLLAPSE_SHARE;
    }
    int nd = routewin_dead_count(w, NULL);
    if (nd > 0 && (double)nd >= w->cfg.dead_frac * w->E) r |= COLLAPSE_DEAD;
    if (reason) *reason = r;
    return r != 0;
}

const char *routewin_reason_text(int reason) {
    static const char *const texts[8] = {"",     "entropy",      "share",      "entropy+share",
                                         "dead", "entropy+dead", "share+dead", "entropy+share+dead"};
    return texts[reason & 7];
}

/* ------------------------------------------------------------------ collapse on three views */

ml_status collapse_init(CollapseState *s, const RouteWinConfig *c, int E, int soft) {
    memset(s, 0, sizeof *s);
    ml_status st = routewin_init(&s->train, c, E);
    if (st == ML_OK && (st = routewin_init(&s->clean, c, E)) != ML_OK) routewin_free(&s->train);
    if (st != ML_OK) return st;
    s->cfg = *c;
    s->E = E;
    s->soft = soft != 0;
    s->first_step = -1;
    s->warmup = c->warmup > 0 ? c->warmup : 0; /* auto (-1) until collapse_set_warmup knows the run's length */
    s->forecast = -1;
    for (int v = 0; v < CVIEW_COUNT; v++) {
        s->view[v].first_step = -1;
        s->view[v].since = -1;
        s->view[v].expert = -1;
        s->view[v].onset_expert = -1;
        s->view[v].cand = -1;
    }
    for (int e = 0; e < E; e++) s->dead_since[e] = -1;
    s->idle.first_step = s->idle.since = s->idle.cand = -1;
    s->idle.expert = -1;
    s->idle.onset_expert = -1;
    return ML_OK;
}

long collapse_warmup(const RouteWinConfig *c, long total_steps) {
    if (c->warmup >= 0) return c->warmup;
    const long five = total_steps / 20; /* 5% of training */
    return five < 200 ? five : 200;
}

void collapse_set_warmup(CollapseState *s, long warmup) { s->warmup = warmup > 0 ? warmup : 0; }

void collapse_free(CollapseState *s) {
    if (s->train.ring) routewin_free(&s->train);
    if (s->clean.ring) routewin_free(&s->clean);
    memset(s, 0, sizeof *s);
}

/* normalised entropy, largest share and its expert of a non-negative (E) vector */
static double vec_entropy(const double *v, int E, double *share, int *expert) {
    double tot = 0.0, h = 0.0, mx = -1.0;
    int arg = -1;
    for (int e = 0; e < E; e++) {
        tot += v[e] > 0 ? v[e] : 0;
        if (v[e] > mx) mx = v[e], arg = e;
    }
    *share = tot > 0 ? mx / tot : 0.0;
    *expert = tot > 0 ? arg : -1;
    if (E <= 1) return 1.0;
    if (!(tot > 0)) return 0.0;
    for (int e = 0; e < E; e++)
        if (v[e] > 0) h -= v[e] / tot * log(v[e] / tot);
    return h / log((double)E);
}

int collapse_item_alarm(const CollapseState *s, int item);

/* a view's flag changes: records the first step and the rising edge, and the episode's message as
 * it opens (the snapshot collapse_format reads for the whole episode); returns 1 if it rose */
static int view_set(CollapseState *s, int v, int flag, long onset) {
    CollapseView *cv = &s->view[v];
    const int rose = flag && !cv->flag;
    cv->flag = flag;
    if (rose) {
        cv->episodes++;
        cv->since = onset;
        if (cv->first_step < 0) cv->first_step = onset;
        if (s->first_step < 0 || onset < s->first_step) s->first_step = onset;
        cv->onset_expert = cv->expert;
        cv->onset_share = cv->share;
        cv->onset_entropy = cv->entropy;
        cv->onset_dead = cv->dead;
        cv->onset_reason = cv->reason;
        cv->onset_sev = collapse_item_alarm(s, v);
        collapse_cause(s, v, cv->onset_sev, cv->onset_cause, sizeof cv->onset_cause);
    }
    return rose;
}

/* The reason bits at the entry thresholds (enter) or at the exit ones (stay: hysteresis). */
static int judge(const CollapseState *s, double entropy, double share, int dead, int stay) {
    const double h = stay ? s->cfg.hysteresis : 0.0;
    int r = 0;
    if (entropy < s->cfg.entropy_min + h) r |= COLLAPSE_ENTROPY;
    if (share > s->cfg.max_share - h) r |= COLLAPSE_SHARE;
    if (dead > 0 && (double)dead >= s->cfg.dead_frac * s->E) r |= COLLAPSE_DEAD;
    return r;
}

/* The entry thresholds moved past by the hysteresis (a single evaluation's margin). */
static int judge_margin(const CollapseState *s, double entropy, double share, int dead) {
    const double h = s->cfg.hysteresis;
    int r = 0;
    if (entropy < s->cfg.entropy_min - h) r |= COLLAPSE_ENTROPY;
    if (share > s->cfg.max_share + h) r |= COLLAPSE_SHARE;
    if (dead > 0 && (double)dead >= s->cfg.dead_frac * s->E) r |= COLLAPSE_DEAD;
    return r;
}

/* One judged step of a window view: an episode opens when the entry condition has held for
 * cfg.confirm steps running (its onset: the first of them), and closes when the exit condition
 * (the thresholds moved back by the hysteresis) has failed for cfg.confirm steps running. */
static int view_judge(CollapseState *s, int v, const RouteWin *w, int dead, long step, int expert) {
    CollapseView *cv = &s->view[v];
    cv->entropy = routewin_load_entropy(w);
    cv->share = routewin_max_share(w);
    cv->dead = dead;
    long mx = -1;
    for (int e = 0; e < s->E; e++)
        if (w->sum[e] > mx) mx = w->sum[e], cv->expert = e;
    if (expert >= 0) cv->expert = expert; /* set before a rise: the episode's message names it */
    const int need = s->cfg.min_steps < s->cfg.window ? s->cfg.min_steps : s->cfg.window;
    if (w->n < need || w->n == 0) { /* not judged yet (warm-up, or the window still filling) */
        cv->pending = 0;
        return 0;
    }
    const int enter = judge(s, cv->entropy, cv->share, dead, 0), stay = judge(s, cv->entropy, cv->share, dead, 1);
    const int confirm = s->cfg.confirm > 0 ? s->cfg.confirm : 1;
    if (!cv->flag) {
        if (enter) {
            if (cv->pending++ == 0) cv->cand = step;
        } else cv->pending = 0;
        cv->reason = 0;
        if (cv->pending >= confirm) {
            cv->pending = 0;
            cv->reason = enter;
            return view_set(s, v, 1, cv->cand);
        }
        return 0;
    }
    cv->reason = enter ? enter : stay ? stay : cv->reason;
    if (!stay) {
        if (++cv->pending >= confirm) {
            cv->pending = 0;
            view_set(s, v, 0, step);
        }
    } else cv->pending = 0;
    return 0;
}

/* Per-expert deaths and revivals on the training window: dead after a whole full window without a
 * kept pair (soft: gate mass under the floor); alive again once it has had load in cfg.confirm of
 * the window's steps. */
static void deaths_update(CollapseState *s, const RouteWin *w, long step) {
    const int full = w->n == s->cfg.window;
    const long back = s->cfg.confirm < s->cfg.window ? s->cfg.confirm : s->cfg.window;
    for (int e = 0; e < s->E; e++) {
        if (!s->dead[e] && full && w->zero_run[e] >= s->cfg.window) {
            s->dead[e] = 1;
            s->dead_since[e] = step - w->zero_run[e] + 1;
            s->deaths++;
            s->died |= (uint64_t)1 << e;
        } else if (s->dead[e] && w->nz[e] >= back) {
            s->dead[e] = 0;
            s->dead_since[e] = -1;
            s->revivals++;
            s->revived |= (uint64_t)1 << e;
        }
    }
}

/* least-squares slope per step of the window's ring (oldest first) */
static double ring_slope(const RouteWin *w, const double *ring) {
    const int n = w->n, W = w->cfg.window;
    if (n < 10) return 0.0;
    double sx = 0, sy = 0, sxx = 0, sxy = 0;
    for (int i = 0; i < n; i++) {
        const double y = ring[((w->head - n + i) % W + W) % W];
        sx += i, sy += y, sxx += (double)i * i, sxy += i * y;
    }
    const double den = n * sxx - sx * sx;
    return den > 0 ? (n * sxy - sx * sy) / den : 0.0;
}

/* The forecast: where the judged window (the clean router's; soft heads: the gate mass) heads at the
 * trend of its last window, steps until its share crosses max_share or its entropy entropy_min. */
static void forecast_update(CollapseState *s) {
    const RouteWin *w = s->soft ? &s->train : &s->clean;
    const int v = s->soft ? CVIEW_TRAIN : CVIEW_CLEAN;
    s->forecast = -1;
    s->trend = s->trend_entropy = 0.0;
    const int need = s->cfg.min_steps < s->cfg.window ? s->cfg.min_steps : s->cfg.window;
    if (w->n < need || w->n < 10) return;
    const double ks = ring_slope(w, w->share_ring), ke = ring_slope(w, w->ent_ring);
    s->trend = 1000.0 * ks;
    s->trend_entropy = 1000.0 * ke;
    if (s->view[v].flag) return;
    /* the fitted value at the window's end */
    const double ms = routewin_max_share(w), me = routewin_load_entropy(w), half = (w->n - 1) / 2.0;
    const double now_s = ms + ks * half, now_e = me + ke * half;
    double best = -1;
    if (ks > 0 && now_s < s->cfg.max_share) best = (s->cfg.max_share - now_s) / ks;
    if (ke < 0 && now_e > s->cfg.entropy_min) {
        const double t = (now_e - s->cfg.entropy_min) / -ke;
        if (best < 0 || t < best) best = t;
    }
    /* the window mean reaches the threshold about half a window after the fitted end value does */
    if (best >= 0) s->forecast = (long)(best + half + 0.5);
}

/* The idle router: moving averages of the gate entropy and the first-choice agreement over a window,
 * judged like a window view once a window of post-warm-up steps went in. 1 if it rose. */
static int idle_update(CollapseState *s, const MoeStepStats *st, long step) {
    if (s->soft || s->E < 2) return 0;
    const double a = 2.0 / (s->cfg.window + 1.0);
    if (s->idle_n++ == 0) s->idle_gate_h = st->gate_entropy, s->idle_agree = st->first_agree;
    s->idle_gate_h += a * (st->gate_entropy - s->idle_gate_h);
    s->idle_agree += a * (st->first_agree - s->idle_agree);
    CollapseView *cv = &s->idle;
    cv->entropy = s->idle_gate_h;
    cv->share = s->idle_agree;
    if (s->idle_n < s->cfg.window) return 0;
    const double agree_in = IDLE_AGREE / s->E, agree_out = (IDLE_AGREE + 1.0) / s->E;
    const int enter = s->idle_gate_h > IDLE_GATE_H && s->idle_agree < agree_in;
    const int stay = s->idle_gate_h > IDLE_GATE_H - 0.05 && s->idle_agree < agree_out;
    const int confirm = s->cfg.confirm > 0 ? s->cfg.confirm : 1;
    if (!cv->flag) {
        if (enter) {
            if (cv->pending++ == 0) cv->cand = step;
        } else cv->pending = 0;
        if (cv->pending < confirm) return 0;
        cv->pending = 0;
        cv->flag = 1;
        cv->episodes++;
        cv->since = cv->cand;
        if (cv->first_step < 0) cv->first_step = cv->cand;
        return 1;
    }
    if (!stay) {
        if (++cv->pending >= confirm) cv->pending = 0, cv->flag = 0;
    } else cv->pending = 0;
    return 0;
}

int collapse_push_step(CollapseState *s, const MoeStepStats *st, long step) {
    ML_ASSERT(st->E == s->E);
    const int E = s->E;
    s->fired = 0; /* died / revived accumulate until the consumer clears them */
    if (step <= s->warmup) return 0; /* the warm-up: no step enters a window */
    if (s->soft) { /* gate mass: the mean gate vector is the load */
        double g[MOE_MAX_EXPERTS], share;
        int kept[MOE_MAX_EXPERTS], arg;
        for (int e = 0; e < E; e++) {
            g[e] = st->mean_gate[e];
            /* alive (a pseudo-count of its mass) unless below SOFT_DEAD_MASS of the uniform share */
            kept[e] = g[e] * E >= SOFT_DEAD_MASS ? 1 + (int)(g[e] * st->B) : 0;
        }
        const double h = vec_entropy(g, E, &share, &arg);
        routewin_push_ent(&s->train, kept, h, share);
    } else {
        routewin_push(&s->train, st);
        routewin_push_counts(&s->clean, st->clean_first, st->clean_first_share);
        const double a = 2.0 / (s->cfg.window + 1.0);
        for (int e = 0; e < E; e++) s->first_ema[e] += a * (st->first[e] - s->first_ema[e]);
    }
    deaths_update(s, &s->train, step);
    const int nd = collapse_dead_count(s);
    int arg = -1;
    if (!s->soft) { /* the training view's expert: the most frequent noisy first choice (kept counts
                     * are capped at C, so their largest is not the expert the router prefers) */
        arg = 0;
        for (int e = 1; e < E; e++)
            if (s->first_ema[e] > s->first_ema[arg]) arg = e;
    }
    const int tr = view_judge(s, CVIEW_TRAIN, &s->train, nd, step, arg);
    if (tr) s->fired |= CVIEW_BIT_TRAIN;
    if (!s->soft && view_judge(s, CVIEW_CLEAN, &s->clean, routewin_dead_count(&s->clean, NULL), step, -1))
        s->fired |= CVIEW_BIT_CLEAN;
    forecast_update(s);
    if (idle_update(s, st, step)) s->fired |= CVIEW_BIT_IDLE;
    return s->fired;
}

int collapse_push_eval(CollapseState *s, const CollapseEvalInput *in, long step) {
    ML_ASSERT(in->E == s->E);
    const int E = s->E;
    CollapseView *cv = &s->view[CVIEW_EVAL];
    double tot = 0.0;
    for (int e = 0; e < E; e++) tot += in->load[e];
    cv->entropy = vec_entropy(in->load, E, &cv->share, &cv->expert);
    int dead = 0;
    if (in->selected_dead >= 0) dead = in->selected_dead;
    else
        for (int e = 0; e < E; e++) dead += !(tot > 0) || in->load[e] / tot * E < SOFT_DEAD_MASS;
    cv->dead = dead;
    s->fired = 0;
    if (step <= s->warmup && !cv->flag) { /* an evaluation inside the warm-up is not judged */
        cv->reason = 0;
        return 0;
    }
    /* One judgement per evaluation (the whole test set), but one evaluation is one sample: a value
     * hovering at a threshold must not flip red on thread count or rounding. An episode opens on one
     * evaluation past the threshold by the hysteresis margin (share > max_share + h, entropy <
     * entropy_min - h, or the dead experts reaching dead_frac), or on two evaluations running past
     * the threshold itself (confirmation; the onset is the first of them); it closes past the
     * hysteresis, as before. */
    const int enter = tot > 0 ? judge(s, cv->entropy, cv->share, dead, 0) : 0;
    const int stay = tot > 0 ? judge(s, cv->entropy, cv->share, dead, 1) : 0;
    const int clear = tot > 0 ? judge_margin(s, cv->entropy, cv->share, dead) : 0;
    int flag = cv->flag ? stay != 0 : 0;
    long onset = step;
    if (!cv->flag) {
        if (enter) {
            if (cv->pending++ == 0) cv->cand = step;
        } else cv->pending = 0;
        if (clear) flag = 1;
        else if (enter && cv->pending >= 2) {
            flag = 1;
            onset = cv->cand;
        }
        if (flag) cv->pending = 0;
    }
    cv->reason = enter ? enter : flag ? stay : 0;
    const int rose = view_set(s, CVIEW_EVAL, flag, onset);
    s->fired = rose ? CVIEW_BIT_EVAL : 0;
    return s->fired;
}

int collapse_views(const CollapseState *s, int *reason) {
    int m = 0, r = 0;
    for (int v = 0; v < CVIEW_COUNT; v++)
        if (s->view[v].flag) {
            m |= 1 << v;
            r |= s->view[v].reason;
        }
    if (s->idle.flag) m |= CVIEW_BIT_IDLE;
    if (reason) *reason = r;
    return m;
}

const char *collapse_view_name(int view) {
    static const char *const names[CVIEW_COUNT] = {"training", "clean router", "evaluation"};
    return view >= 0 && view < CVIEW_COUNT ? names[view] : "?";
}

int collapse_view_first(int mask) {
    for (int v = 0; v < CVIEW_COUNT; v++)
        if (mask & (1 << v)) return v;
    return -1;
}

uint64_t collapse_dead_mask(const CollapseState *s) {
    uint64_t m = 0;
    for (int e = 0; e < s->E; e++)
        if (s->dead[e]) m |= (uint64_t)1 << e;
    return m;
}

int collapse_dead_count(const CollapseState *s) {
    int n = 0;
    for (int e = 0; e < s->E; e++) n += s->dead[e] != 0;
    return n;
}

static int dead_reaches(const CollapseState *s) {
    const int nd = collapse_dead_count(s);
    return nd > 0 && (double)nd >= s->cfg.dead_frac * s->E;
}

int collapse_item_alarm(const CollapseState *s, int item) {
    switch (item) {
    case CITEM_TRAIN:
    case CITEM_EVAL: return s->view[item].flag ? ALARM_COLLAPSE : ALARM_NONE;
    case CITEM_CLEAN:
        return !s->view[CVIEW_CLEAN].flag ? ALARM_NONE : s->view[CVIEW_TRAIN].flag ? ALARM_COLLAPSE : ALARM_WARNING;
    case CITEM_DEATH: return dead_reaches(s) ? ALARM_COLLAPSE : ALARM_WARNING;
    case CITEM_IDLE: return s->idle.flag ? ALARM_WARNING : ALARM_NONE;
    default: return ALARM_NONE;
    }
}

int collapse_alarm(const CollapseState *s) {
    if (s->view[CVIEW_TRAIN].flag || s->view[CVIEW_EVAL].flag || dead_reaches(s)) return ALARM_COLLAPSE;
    if (s->view[CVIEW_CLEAN].flag || collapse_dead_count(s) > 0 || s->idle.flag) return ALARM_WARNING;
    return ALARM_NONE;
}

const char *collapse_item_word(int item) {
    switch (item) {
    case CITEM_DEATH: return "expert death";
    case CITEM_REVIVAL: return "expert revival";
    case CITEM_CLEAN:
    case CITEM_IDLE: return "warning";
    default: return "collapse";
    }
}

int collapse_top_item(const CollapseState *s, int *expert) {
    if (expert) *expert = -1;
    if (s->view[CVIEW_TRAIN].flag) return CITEM_TRAIN;
    if (s->view[CVIEW_EVAL].flag) return CITEM_EVAL;
    int last = -1; /* the most recent death */
    for (int e = 0; e < s->E; e++)
        if (s->dead[e] && (last < 0 || s->dead_since[e] > s->dead_since[last])) last = e;
    if (last >= 0 && dead_reaches(s)) {
        if (expert) *expert = last;
        return CITEM_DEATH;
    }
    if (s->view[CVIEW_CLEAN].flag) return CITEM_CLEAN;
    if (last >= 0) {
        if (expert) *expert = last;
        return CITEM_DEATH;
    }
    if (s->idle.flag) return CITEM_IDLE;
    return -1;
}

/* "e1 e2 e5" of the dead experts */
static void dead_list(const CollapseState *s, char *buf, size_t n) {
    size_t o = 0;
    buf[0] = 0;
    for (int e = 0; e < s->E && o + 1 < n; e++)
        if (s->dead[e]) o += (size_t)snprintf(buf + o, n - o, "%se%d", o ? " " : "", e);
}

/* The cause clause of a view's message, from the state it describes (a test per clause in
 * tests/test_collapse.c):
 *   training:        experts starve[; N/E dead in training]
 *   clean, warning:  what balances the training selection (the selection noise at its scale, or with
 *                    no noise the capacity that keeps at most C pairs an expert), then the evaluation:
 *                    collapsed since step S / not concentrated at its last run (X%) / not run yet
 *   clean, collapse: and the training selection too
 *   evaluation:      the training side as it is (the message already says the test set goes to
 *                    few experts): the training selection / clean router concentrated too (or
 *                    concentrating: over the threshold, not yet confirmed), N/E dead in training,
 *                    the training batches balanced, or not judged yet
 * The longest message (a layer, a dead count, every clause) fits the records' 192 bytes. */
void collapse_cause(const CollapseState *s, int item, int sev, char *buf, size_t n) {
    buf[0] = 0;
    const int nd = collapse_dead_count(s);
    char deaths[48] = "";
    if (nd > 0) snprintf(deaths, sizeof deaths, "%d/%d dead in training", nd, s->E);
    const CollapseView *ev = &s->view[CVIEW_EVAL];
    if (item == CVIEW_TRAIN) {
        snprintf(buf, n, "experts starve%s%s", nd ? "; " : "", deaths);
    } else if (item == CVIEW_CLEAN) {
        if (sev != ALARM_WARNING) {
            snprintf(buf, n, "and the training selection too");
            return;
        }
        char bal[64], evs[64];
        if (s->noise > 0) snprintf(bal, sizeof bal, "the selection noise (%.3g) is doing the balancing", s->noise);
        else snprintf(bal, sizeof bal, "no noise: capacity is doing the balancing");
        if (ev->flag) snprintf(evs, sizeof evs, "evaluation collapsed since step %ld", ev->since);
        else if (ev->expert >= 0) snprintf(evs, sizeof evs, "last evaluation %.0f%% to e%d", 100.0 * ev->share, ev->expert);
        else snprintf(evs, sizeof evs, "evaluation, without noise, will follow it");
        snprintf(buf, n, "%s; %s", bal, evs);
    } else if (item == CVIEW_EVAL) {
        const char *trs = s->view[CVIEW_TRAIN].flag      ? "the training selection too"
                          : s->view[CVIEW_TRAIN].pending ? "the training selection concentrating too"
                          : s->view[CVIEW_CLEAN].flag    ? "the clean router too, training selection balanced"
                          : s->view[CVIEW_CLEAN].pending ? "the clean router concentrating"
                          : nd                           ? ""
                          : s->train.n > 0            ? "the training batches look balanced"
                                                      : "training not judged yet";
        snprintf(buf, n, "%s%s%s", trs, trs[0] && nd ? "; " : "", deaths);
    }
}

void collapse_format(const CollapseState *s, int item, int expert, const char *layer, char *buf, size_t n) {
    buf[0] = 0;
    char lay[40] = "";
    if (layer && layer[0]) snprintf(lay, sizeof lay, " %s", layer);
    if (item == CITEM_DEATH || item == CITEM_REVIVAL) {
        if (expert < 0 || expert >= s->E) return;
        const int nd = collapse_dead_count(s);
        if (item == CITEM_DEATH) {
            if (!s->dead[expert]) return;
            char dl[3 * MOE_MAX_EXPERTS + 8];
            dead_list(s, dl, sizeof dl);
            snprintf(buf, n, "%s%s e%d: %s for %d steps, since step %ld (%d/%d dead: %s)",
                     dead_reaches(s) ? "COLLAPSE: EXPERT DEATH" : "EXPERT DEATH", lay, expert,
                     s->soft ? "gate mass below the floor" : "no kept pair", s->cfg.window, s->dead_since[expert], nd,
                     s->E, dl);
        } else
            snprintf(buf, n, "EXPERT REVIVAL%s e%d: %s again (%d/%d dead)", lay, expert,
                     s->soft ? "gate mass" : "kept pairs", nd, s->E);
        return;
    }
    if (item == CITEM_IDLE) {
        if (!s->idle.flag) return;
        snprintf(buf, n,
                 "WARNING%s router idle: gate entropy %.2f of its maximum, noisy first choice = clean one for %.0f%% "
                 "(1/E = %.0f%%), since step %ld (the noise is routing: experts see random samples)",
                 lay, s->idle.entropy, 100.0 * s->idle.share, 100.0 / s->E, s->idle.since);
        return;
    }
    if (item < 0 || item >= CVIEW_COUNT || !s->view[item].flag) return;
    const CollapseView *cv = &s->view[item];
    const int sev = collapse_item_alarm(s, item);
    const char *what = s->soft ? "of the gate mass on" : item == CVIEW_EVAL ? "of test first choices to" : "of first choices to";
    /* the episode's values as it opened (the event's message), and its cause then, unless the
     * severity changed since (a new situation: the cause as it is now) */
    const int snap = cv->onset_expert >= 0;
    const double share = snap ? cv->onset_share : cv->share, entropy = snap ? cv->onset_entropy : cv->entropy;
    const int expert_ = snap ? cv->onset_expert : cv->expert, ndead = snap ? cv->onset_dead : cv->dead;
    const int reason = snap ? cv->onset_reason : cv->reason;
    char dead[64] = "";
    if (reason & COLLAPSE_DEAD)
        snprintf(dead, sizeof dead, item == CVIEW_EVAL ? ", test dead %d/%d" : ", %d/%d dead", ndead, s->E);
    char why[160];
    if (snap && cv->onset_sev == sev) snprintf(why, sizeof why, "%s", cv->onset_cause);
    else collapse_cause(s, item, sev, why, sizeof why);
    snprintf(buf, n, "%s%s %s: %.0f%% %s e%d, load entropy %.2f%s, since step %ld (%s)",
             sev == ALARM_COLLAPSE ? "COLLAPSE" : "WARNING", lay, collapse_view_name(item), 100.0 * share, what,
             expert_, entropy, dead, cv->since, why);
}

void collapse_format_now(const CollapseState *s, int item, int expert, const char *layer, char *buf, size_t n) {
    collapse_format(s, item, expert, layer, buf, n);
    if (item < 0 || item >= CVIEW_COUNT || !buf[0]) return;
    const CollapseView *cv = &s->view[item];
    if (cv->onset_expert < 0) return;
    if (cv->expert == cv->onset_expert && fabs(100.0 * cv->share - 100.0 * cv->onset_share) < 1.0) return;
    const size_t len = strlen(buf);
    if (len + 1 < n) snprintf(buf + len, n - len, " (now %.0f%% to e%d)", 100.0 * cv->share, cv->expert);
}

void collapse_describe(const CollapseState *s, int view, char *buf, size_t n) {
    collapse_format(s, view, -1, NULL, buf, n);
}

void collapse_forecast_text(const CollapseState *s, char *buf, size_t n) {
    buf[0] = 0;
    const int v = s->soft ? CVIEW_TRAIN : CVIEW_CLEAN;
    const RouteWin *w = s->soft ? &s->train : &s->clean;
    if (w->n == 0) return;
    const char *name = s->soft ? "gate share" : "clean share";
    const double sh = routewin_max_share(w);
    if (s->view[v].flag) snprintf(buf, n, "%s %.2f: over the threshold", name, sh);
    else if (s->forecast >= 0)
        snprintf(buf, n, "%s %.2f, %s: threshold in ~%ld steps", name, sh, s->trend > 0 ? "rising" : "entropy falling",
                 s->forecast);
    else snprintf(buf, n, "%s %.2f, %s: no crossing ahead", name, sh, s->trend < 0 ? "falling" : "steady");
}

void classexp_add(int *counts, const int32_t *labels, const int *first_choice, int B, int E) {
    for (int b = 0; b < B; b++) {
        int32_t c = labels[b];
        int e = first_choice[b];
        if (c < 0 || e < 0 || e >= E) continue;
        counts[(size_t)c * E + e]++;
    }
}

// One term -(v/n) log(v/n) of an entropy (0 for v = 0).
static double classexp_entropy_term_(double v, double n) { return v > 0.0 ? -(v / n) * log(v / n) : 0.0; }

double classexp_mutual_info(const int *counts, int K, int E) {
    if (K < 1 || E < 1) return 0.0;
    // I(C; E) = H(C) + H(E) - H(C, E), with marginals computed on the fly (no scratch arrays).
    double n = 0.0, hc = 0.0, he = 0.0, hce = 0.0;
    for (size_t i = 0; i < (size_t)K * E; i++) n += counts[i];
    if (!(n > 0.0)) return 0.0;
    for (int c = 0; c < K; c++) {
        double rc = 0.0;
        for (int e = 0; e < E; e++) {
            double v = counts[(size_t)c * E + e];
            rc += v;
            hce += classexp_entropy_term_(v, n);
        }
        hc += classexp_entropy_term_(rc, n);
    }
    for (int e = 0; e < E; e++) {
        double ce = 0.0;
        for (int c = 0; c < K; c++) ce += counts[(size_t)c * E + e];
        he += classexp_entropy_term_(ce, n);
    }
    double mi = hc + he - hce;
    return mi > 0.0 ? mi : 0.0;
}
