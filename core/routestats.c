/* routestats.c — dead experts, collapse flag and class x expert mutual information (see
 * routestats.h for the definitions). */
#include "core/routestats.h"

#include <math.h>
#include <string.h>

void routewin_defaults(RouteWinConfig *c) {
    c->window = 100;
    c->min_steps = 10;
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

void routewin_push_counts(RouteWin *w, const int *kept, double first_share) {
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
    w->ent_ring[w->head] = step_entropy(kept, E);
    w->ent_sum += w->ent_ring[w->head];
    w->share_ring[w->head] = first_share;
    w->share_sum += first_share;
    w->head = (w->head + 1) % w->cfg.window;
    w->pushed++;
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
    if (w->n >= w->cfg.min_steps && w->n > 0) {
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
