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
}

ml_status routewin_init(RouteWin *w, const RouteWinConfig *c, int E) {
    memset(w, 0, sizeof *w);
    if (c->window < 1) return ml_fail(ML_ERR_ARG, "route window: window = %d must be >= 1", c->window);
    if (E < 1 || E > MOE_MAX_EXPERTS)
        return ml_fail(ML_ERR_ARG, "route window: E = %d must be 1..%d", E, MOE_MAX_EXPERTS);
    if (!isfinite(c->entropy_min) || !isfinite(c->max_share) || !isfinite(c->dead_frac))
        return ml_fail(ML_ERR_ARG, "route window: collapse thresholds must be finite");
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
        for (int e = 0; e < E; e++) w->sum[e] -= slot[e];
        w->ent_sum -= w->ent_ring[w->head];
        w->share_sum -= w->share_ring[w->head];
    } else {
        w->n++;
    }
    for (int e = 0; e < E; e++) {
        slot[e] = kept[e];
        w->sum[e] += kept[e];
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
    for (int v = 0; v < CVIEW_COUNT; v++) {
        s->view[v].first_step = -1;
        s->view[v].since = -1;
        s->view[v].expert = -1;
    }
    return ML_OK;
}

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

/* a view's new flag: records the first step and the rising edge; returns 1 if it rose */
static int view_set(CollapseState *s, int v, int flag, int reason, long step) {
    CollapseView *cv = &s->view[v];
    const int rose = flag && !cv->flag;
    cv->flag = flag;
    cv->reason = reason;
    if (rose) {
        cv->episodes++;
        cv->since = step;
        if (cv->first_step < 0) cv->first_step = step;
        if (s->first_step < 0) s->first_step = step;
    }
    return rose;
}

/* the window's judgement into a view */
static int view_from_window(CollapseState *s, int v, const RouteWin *w, long step) {
    int reason = 0;
    const int flag = routewin_collapsed(w, &reason);
    CollapseView *cv = &s->view[v];
    cv->entropy = routewin_load_entropy(w);
    cv->share = routewin_max_share(w);
    cv->dead = routewin_dead_count(w, NULL);
    long mx = -1;
    for (int e = 0; e < s->E; e++)
        if (w->sum[e] > mx) mx = w->sum[e], cv->expert = e;
    return view_set(s, v, flag, reason, step);
}

int collapse_push_step(CollapseState *s, const MoeStepStats *st, long step) {
    ML_ASSERT(st->E == s->E);
    const int E = s->E;
    s->fired = 0;
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
        if (view_from_window(s, CVIEW_TRAIN, &s->train, step)) s->fired |= CVIEW_BIT_TRAIN;
        return s->fired;
    }
    routewin_push(&s->train, st);
    routewin_push_counts(&s->clean, st->clean_first, st->clean_first_share);
    if (view_from_window(s, CVIEW_TRAIN, &s->train, step)) s->fired |= CVIEW_BIT_TRAIN;
    if (view_from_window(s, CVIEW_CLEAN, &s->clean, step)) s->fired |= CVIEW_BIT_CLEAN;
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
    int reason = 0;
    if (tot > 0) {
        if (cv->entropy < s->cfg.entropy_min) reason |= COLLAPSE_ENTROPY;
        if (cv->share > s->cfg.max_share) reason |= COLLAPSE_SHARE;
        if (dead > 0 && (double)dead >= s->cfg.dead_frac * E) reason |= COLLAPSE_DEAD;
    }
    const int rose = view_set(s, CVIEW_EVAL, reason != 0, reason, step);
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

void collapse_describe(const CollapseState *s, int view, char *buf, size_t n) {
    buf[0] = 0;
    if (view < 0 || view >= CVIEW_COUNT || !s->view[view].flag) return;
    const CollapseView *cv = &s->view[view];
    char what[160];
    if (cv->reason & COLLAPSE_SHARE)
        snprintf(what, sizeof what, s->soft ? "%.0f%% of the gate mass on e%d" : "%.0f%% of first choices to e%d",
                 100.0 * cv->share, cv->expert);
    else if (cv->reason & COLLAPSE_ENTROPY)
        snprintf(what, sizeof what, "load entropy %.2f (< %.2f)", cv->entropy, s->cfg.entropy_min);
    else snprintf(what, sizeof what, "%d/%d experts dead", cv->dead, s->E);
    const char *why = "";
    if (view == CVIEW_CLEAN && !s->view[CVIEW_TRAIN].flag) why = " (noise hides it from the training load)";
    else if (view == CVIEW_EVAL && !s->view[CVIEW_TRAIN].flag && !s->view[CVIEW_CLEAN].flag)
        why = " (the training batches look balanced)";
    snprintf(buf, n, "%s collapsed at step %ld: %s%s", collapse_view_name(view), cv->since, what, why);
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
