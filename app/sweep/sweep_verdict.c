/* sweep_verdict.c — the verdict block a preset prints after its summary: the paper's claim in one
 * line (DESIGN.md "The paper's claims"), the measured quantity per configuration, and supports /
 * contradicts / inconclusive. Works on a SweepSummary alone (the same for a finished sweep,
 * --collect and --show), so tests can feed it hand-made summaries (tests/test_verdict.c).
 *
 * A gap is "negative" / "positive" when its whole 95% interval is below / above 0; an interval
 * that spans 0, or one that does not exist (fewer than 2 seeds on a side), decides nothing.
 *
 * Each block also prints the paper's own figure for the claim ("paper reports"), as read from the
 * paper by a third party (DESIGN.md "The paper's claims": not verified here), says where the
 * paper gives none, and whether moelab's 95% interval contains the paper's figure. The paper's
 * figures come from its own setting (ImageNet scale, its epochs and schedules), which the line
 * names; moelab's configuration compared with each is the closest analogue in the sweep. */
#include "app/sweep/sweep_verdict.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *verdict_name(Verdict v) {
    return v == V_SUPPORTS ? "supports" : v == V_CONTRADICTS ? "contradicts" : "inconclusive";
}

static int axis_of(const SweepSummary *s, const char *key) {
    for (int a = 0; a < s->naxes; a++)
        if (!strcmp(s->axes[a], key)) return a;
    return -1;
}

static const char *value_of(const SweepSummary *s, int c, const char *key) {
    const int a = axis_of(s, key);
    return a < 0 ? "" : s->values[c * s->naxes + a];
}

/* +1: the interval is above 0, -1: below, 0: spans 0 or unknown */
static int ci_sign(double lo, double hi) {
    if (isnan(lo) || isnan(hi)) return 0;
    return lo > 0 ? 1 : hi < 0 ? -1 : 0;
}

static void gap_text(const SweepConfig *k, char *buf, size_t n) {
    if (isnan(k->gap)) snprintf(buf, n, "gap -");
    else if (isnan(k->gap_lo))
        snprintf(buf, n, "gap %+.2f pp [no CI: %d seed%s]", 100 * k->gap, k->n, k->n == 1 ? "" : "s");
    else snprintf(buf, n, "gap %+.2f pp [%+.2f, %+.2f]", 100 * k->gap, 100 * k->gap_lo, 100 * k->gap_hi);
}


/* ---- the paper's figures (DESIGN.md "The paper's claims"; a third party's reading of the paper,
 * not verified here), in percentage points */
#define PAPER_SOURCE "a reading of the paper, not verified here"
static const double PAPER_HEAD_ONLY_LO = -1.90, PAPER_HEAD_ONLY_HI = -1.29; /* ImageNet, head MoE, routed FLOPs < 1% */
static const double PAPER_BB_K2 = +1.17, PAPER_BB_K1 = -2.08; /* ImageNet, backbone MoE, rho ~ 0.38 */
static const double PAPER_LIN01_PEAK = +0.92, PAPER_SIGMOID = +0.03; /* Fig. 3, k = 1 */

static void paper_head(FILE *o) { fprintf(o, "          paper reports (%s):\n", PAPER_SOURCE); }

/* One comparison: the paper's figure [plo, phi] (plo == phi: one number; pp) against moelab's
 * interval [lo, hi] (fractions) of configuration k (NULL: the sweep has none). Prints whether the
 * interval contains it; returns 1 contains, 0 does not, -1 not compared (no configuration, no
 * interval). */
static int paper_cmp(FILE *o, const char *what, double plo, double phi, const char *mwhat, const SweepConfig *k,
                     double g, double lo, double hi) {
    char fig[48];
    if (plo == phi) snprintf(fig, sizeof fig, "%+.2f pp", plo);
    else snprintf(fig, sizeof fig, "%+.2f to %+.2f pp", plo, phi);
    fprintf(o, "            %s: %s; ", what, fig);
    if (!k || isnan(g)) {
        fprintf(o, "moelab: no %s in this sweep, not compared\n", mwhat);
        return -1;
    }
    if (isnan(lo) || isnan(hi)) {
        fprintf(o, "moelab %s %+.2f pp, no interval (fewer than 2 seeds): not compared\n", mwhat, 100 * g);
        return -1;
    }
    const double L = 100 * lo, H = 100 * hi;
    fprintf(o, "moelab %s %+.2f pp [%+.2f, %+.2f] ", mwhat, 100 * g, L, H);
    int in;
    if (plo == phi) {
        in = L <= plo && plo <= H;
        fprintf(o, "%s\n", in ? "contains it" : H < plo ? "does not contain it (below)" : "does not contain it (above)");
    } else {
        in = L <= plo && phi <= H;
        fprintf(o, "%s\n", in                        ? "contains the range"
                           : H < plo                 ? "does not contain it (below)"
                           : L > phi                 ? "does not contain it (above)"
                                                     : "contains part of the range");
    }
    return in;
}

/* top-k routing: the moe head, or backbone MoE layers before a dense head */
static int is_moe(const SweepConfig *k) { return !strcmp(k->head, "moe") || !strcmp(k->head, "moe-backbone"); }

/* ---- claim 1: the gap's sign reverses as rho grows, on each backbone */
static Verdict v_hidden(const SweepSummary *s, FILE *o) {
    fprintf(o, "claim 1   compute leverage: the gap is negative at small rho and turns positive as rho grows, on both "
               "backbones\n");
    const char *groups[16];
    int ng = 0;
    for (int c = 0; c < s->nconfigs && ng < 16; c++) {
        if (!is_moe(&s->configs[c]) || s->configs[c].baseline < 0) continue;
        const char *g = value_of(s, c, "backbone");
        int seen = 0;
        for (int i = 0; i < ng; i++) seen |= !strcmp(groups[i], g);
        if (!seen) groups[ng++] = g;
    }
    if (!ng) {
        fprintf(o, "          no MoE configuration with a dense baseline\n-> inconclusive\n");
        return V_INCONCLUSIVE;
    }
    int sup = 0, con = 0;
    for (int gi = 0; gi < ng; gi++) {
        int idx[256], n = 0;
        for (int c = 0; c < s->nconfigs && n < 256; c++)
            if (is_moe(&s->configs[c]) && s->configs[c].baseline >= 0 &&
                !strcmp(value_of(s, c, "backbone"), groups[gi]))
                idx[n++] = c;
        for (int i = 1; i < n; i++) /* by nominal rho */
            for (int j = i; j > 0 && s->configs[idx[j]].rho_nominal < s->configs[idx[j - 1]].rho_nominal; j--) {
                const int t = idx[j];
                idx[j] = idx[j - 1];
                idx[j - 1] = t;
            }
        const char *bb = groups[gi][0] ? groups[gi] : "(base)";
        for (int i = 0; i < n; i++) {
            const SweepConfig *k = &s->configs[idx[i]];
            char g[96];
            gap_text(k, g, sizeof g);
            fprintf(o, "          %-4s h %-5s rho %.3f  %s  n %d\n", bb, value_of(s, idx[i], "hidden"), k->rho_nominal,
                    g, k->n);
        }
        Verdict v = V_INCONCLUSIVE;
        const char *why = "fewer than two rho values";
        if (n >= 2) {
            const int lo = ci_sign(s->configs[idx[0]].gap_lo, s->configs[idx[0]].gap_hi);
            const int hi = ci_sign(s->configs[idx[n - 1]].gap_lo, s->configs[idx[n - 1]].gap_hi);
            if (lo < 0 && hi > 0) v = V_SUPPORTS, why = "negative at the smallest rho, positive at the largest";
            else if (lo > 0) v = V_CONTRADICTS, why = "already positive at the smallest rho";
            else if (hi < 0) v = V_CONTRADICTS, why = "still negative at the largest rho";
            else why = "an end of the rho range has an interval spanning 0 (or too few seeds)";
        }
        fprintf(o, "          %s: %s (%s)\n", bb, verdict_name(v), why);
        sup += v == V_SUPPORTS;
        con += v == V_CONTRADICTS;
    }
    /* the paper's two ends of the rho range, against moelab's smallest- and largest-rho configurations */
    const SweepConfig *small = NULL, *large = NULL;
    for (int c = 0; c < s->nconfigs; c++) {
        const SweepConfig *k = &s->configs[c];
        if (!is_moe(k) || k->baseline < 0 || isnan(k->rho_nominal)) continue;
        if (!small || k->rho_nominal < small->rho_nominal) small = k;
        if (!large || k->rho_nominal > large->rho_nominal) large = k;
    }
    paper_head(o);
    char w1[64] = "smallest rho", w2[64] = "largest rho";
    if (small) snprintf(w1, sizeof w1, "at its smallest rho %.3f", small->rho_nominal);
    if (large) snprintf(w2, sizeof w2, "at its largest rho %.3f", large->rho_nominal);
    /* (the loop above skips configurations without a nominal rho) */
    paper_cmp(o, "ImageNet, MoE in the head only (routed FLOPs < 1%)", PAPER_HEAD_ONLY_LO, PAPER_HEAD_ONLY_HI, w1,
              small, small ? small->gap : NAN, small ? small->gap_lo : NAN, small ? small->gap_hi : NAN);
    paper_cmp(o, "ImageNet, MoE in the backbone at rho ~ 0.38, k = 2", PAPER_BB_K2, PAPER_BB_K2, w2, large,
              large ? large->gap : NAN, large ? large->gap_lo : NAN, large ? large->gap_hi : NAN);
    fprintf(o, "            no number for a hidden-size sweep on this data (the paper's figures are at ImageNet scale)\n");
    const Verdict v = con ? V_CONTRADICTS : sup == ng ? V_SUPPORTS : V_INCONCLUSIVE;
    fprintf(o, "-> %s\n", verdict_name(v));
    return v;
}

/* ---- claim 2: at equal realized rho, k = 1 negative and k >= 2 positive */
static Verdict v_topk(const SweepSummary *s, FILE *o) {
    fprintf(o, "claim 2   with realized rho held fixed, k = 1 gives a negative gap and k >= 2 a positive one\n");
    double rmin = INFINITY, rmax = -INFINITY;
    int k1 = 0, k1_sign = 0, many_pos = 1, many_neg = 0, nk = 0, missing = 0, nmany = 0;
    const SweepConfig *c1 = NULL, *c2 = NULL; /* the k = 1 and k = 2 configurations, for the paper's figures */
    for (int c = 0; c < s->nconfigs; c++) {
        const SweepConfig *k = &s->configs[c];
        if (!is_moe(k) || k->baseline < 0) continue;
        const char *kname = axis_of(s, "k") >= 0 ? "k" : "moe-k"; /* the head's k or the backbone layers' */
        const int kv = atoi(value_of(s, c, kname));
        char g[96];
        gap_text(k, g, sizeof g);
        fprintf(o, "          k=%-2s cf %-5s rho realized %.4f (nominal %.3f)  %s  n %d\n", value_of(s, c, kname),
                value_of(s, c, "cf")[0] ? value_of(s, c, "cf") : "-", k->rho_realized, k->rho_nominal, g, k->n);
        nk++;
        if (isnan(k->rho_realized)) missing = 1;
        else {
            if (k->rho_realized < rmin) rmin = k->rho_realized;
            if (k->rho_realized > rmax) rmax = k->rho_realized;
        }
        const int sg = ci_sign(k->gap_lo, k->gap_hi);
        if (kv == 1 && !c1) c1 = k;
        if (kv == 2 && !c2) c2 = k;
        if (kv == 1) k1 = 1, k1_sign = sg;
        else {
            many_pos &= sg > 0;
            many_neg |= sg < 0;
            nmany++;
        }
    }
    paper_head(o);
    char w1[64] = "k = 1", w2[64] = "k = 2";
    if (c1 && !isnan(c1->rho_realized)) snprintf(w1, sizeof w1, "k = 1 at realized rho %.3f", c1->rho_realized);
    if (c2 && !isnan(c2->rho_realized)) snprintf(w2, sizeof w2, "k = 2 at realized rho %.3f", c2->rho_realized);
    paper_cmp(o, "ImageNet, MoE in the backbone at rho ~ 0.38, k = 1", PAPER_BB_K1, PAPER_BB_K1, w1, c1,
              c1 ? c1->gap : NAN, c1 ? c1->gap_lo : NAN, c1 ? c1->gap_hi : NAN);
    paper_cmp(o, "ImageNet, MoE in the backbone at rho ~ 0.38, k = 2", PAPER_BB_K2, PAPER_BB_K2, w2, c2,
              c2 ? c2->gap : NAN, c2 ? c2->gap_lo : NAN, c2 ? c2->gap_hi : NAN);
    fprintf(o, "            no number for k = 4 or for other data\n");
    if (!nk || !k1 || missing) {
        fprintf(o, "          %s\n-> inconclusive\n",
                !nk   ? "no MoE configuration with a dense baseline"
                : !k1 ? "no k = 1 configuration"
                      : "realized rho unknown");
        return V_INCONCLUSIVE;
    }
    const double spread = rmin > 0 ? rmax / rmin - 1 : INFINITY;
    fprintf(o, "          realized rho %s within %.1f%% across k (max / min - 1; the claim needs <= 5%%)\n",
            spread <= 0.05 ? "equal" : "NOT equal", 100 * spread);
    Verdict v;
    const char *why;
    if (spread > 0.05) v = V_INCONCLUSIVE, why = "realized rho differs by more than 5%: not a fixed-rho comparison";
    else if (k1_sign < 0 && many_pos && nmany > 0) v = V_SUPPORTS, why = "k = 1 negative, every k >= 2 positive";
    else if (k1_sign > 0 || many_neg)
        v = V_CONTRADICTS, why = k1_sign > 0 ? "k = 1 is positive" : "a k >= 2 is negative";
    else if (!nmany) v = V_INCONCLUSIVE, why = "no k >= 2 configuration";
    else v = V_INCONCLUSIVE, why = "an interval spans 0 (or too few seeds)";
    fprintf(o, "-> %s (%s)\n", verdict_name(v), why);
    return v;
}

/* ---- claim 3: softmoe-batch negative, softmoe-sample positive */
static Verdict v_softmoe(const SweepSummary *s, FILE *o) {
    fprintf(o, "claim 3   soft MoE dispatching over the batch fails in per-sample CNNs (negative gap); the per-sample "
               "variant beats dense (positive gap)\n");
    int sb = 0, ss = 0, have_b = 0, have_s = 0;
    for (int c = 0; c < s->nconfigs; c++) {
        const SweepConfig *k = &s->configs[c];
        if (k->baseline < 0 || !strcmp(k->head, "dense")) continue;
        char g[96];
        gap_text(k, g, sizeof g);
        fprintf(o, "          %-16s %s  n %d\n", k->head, g, k->n);
        if (!strcmp(k->head, "softmoe-batch")) have_b = 1, sb = ci_sign(k->gap_lo, k->gap_hi);
        if (!strcmp(k->head, "softmoe-sample")) have_s = 1, ss = ci_sign(k->gap_lo, k->gap_hi);
    }
    paper_head(o);
    fprintf(o, "            no number: the paper states the claim without a gap that this reading gives\n");
    Verdict v;
    const char *why;
    if (!have_b || !have_s) v = V_INCONCLUSIVE, why = "softmoe-batch or softmoe-sample missing";
    else if (sb < 0 && ss > 0) v = V_SUPPORTS, why = "batch negative, per-sample positive";
    else if (sb > 0 || ss < 0)
        v = V_CONTRADICTS, why = sb > 0 ? "softmoe-batch is positive" : "softmoe-sample is negative";
    else v = V_INCONCLUSIVE, why = "an interval spans 0 (or too few seeds)";
    fprintf(o, "-> %s (%s)\n", verdict_name(v), why);
    return v;
}

/* ---- claim 4: linear to 0.1 collapses, linear to 0.3 and sigmoid do not */
static Verdict v_temperature(const SweepSummary *s, FILE *o) {
    fprintf(o, "claim 4   (k = 1) aggressive annealing collapses routing: linear to 0.1 peaks then collapses; "
               "linear to 0.3 and sigmoid do not collapse\n");
    int agg = -1, mild = -1, sig = -1;
    double agg_tau = INFINITY, mild_tau = -INFINITY;
    for (int c = 0; c < s->nconfigs; c++) {
        const SweepConfig *k = &s->configs[c];
        if (!is_moe(k)) continue;
        const char *sch = value_of(s, c, "schedule");
        const double t1 = atof(value_of(s, c, "tau1"));
        char f[96], pk[64];
        gap_text(k, f, sizeof f);
        if (isnan(k->peak_gap)) snprintf(pk, sizeof pk, "peak -");
        else snprintf(pk, sizeof pk, "peak %+.2f pp", 100 * k->peak_gap);
        char col[48];
        if (k->collapsed < 0) snprintf(col, sizeof col, "collapsed ?");
        else if (k->collapsed == 0) snprintf(col, sizeof col, "collapsed 0/%d", k->n);
        else snprintf(col, sizeof col, "collapsed %d/%d from step ~%.0f", k->collapsed, k->n, k->collapse_step);
        fprintf(o, "          %-8s tau1 %-4s %-30s %-14s final %s\n", sch, value_of(s, c, "tau1"), col, pk, f + 4);
        if (!strcmp(sch, "linear") && t1 < agg_tau) agg_tau = t1, agg = c;
        if (!strcmp(sch, "linear") && t1 > mild_tau) mild_tau = t1, mild = c;
        if (!strcmp(sch, "sigmoid")) sig = c;
    }
    paper_head(o);
    {
        const SweepConfig *a = agg >= 0 ? &s->configs[agg] : NULL, *g = sig >= 0 ? &s->configs[sig] : NULL;
        char wa[64] = "peak of linear to its low floor";
        if (a) snprintf(wa, sizeof wa, "peak of linear to %s", value_of(s, agg, "tau1"));
        paper_cmp(o, "linear to tau_min 0.1, k = 1: peak (then collapses late)", PAPER_LIN01_PEAK, PAPER_LIN01_PEAK, wa,
                  a, a ? a->peak_gap : NAN, a ? a->peak_gap_lo : NAN, a ? a->peak_gap_hi : NAN);
        paper_cmp(o, "sigmoid, k = 1 (no collapse)", PAPER_SIGMOID, PAPER_SIGMOID, "sigmoid final", g,
                  g ? g->gap : NAN, g ? g->gap_lo : NAN, g ? g->gap_hi : NAN);
        fprintf(o, "            linear to 0.3: no number (reported: no collapse); constant tau: no number\n");
    }
    Verdict v;
    const char *why;
    if (agg < 0 || mild < 0 || agg == mild || sig < 0) {
        v = V_INCONCLUSIVE;
        why = "needs linear to two floors and sigmoid";
    } else {
        const SweepConfig *a = &s->configs[agg], *m = &s->configs[mild], *g = &s->configs[sig];
        if (a->n < 2 || m->n < 2 || g->n < 2 || a->collapsed < 0 || m->collapsed < 0 || g->collapsed < 0)
            v = V_INCONCLUSIVE, why = "too few seeds (or no collapse record)";
        else if (2 * a->collapsed > a->n && m->collapsed == 0 && g->collapsed == 0)
            v = V_SUPPORTS, why = "linear to the low floor collapses on most seeds, the others on none";
        else if (a->collapsed == 0 || 2 * m->collapsed > m->n || 2 * g->collapsed > g->n)
            v = V_CONTRADICTS, why = a->collapsed == 0 ? "linear to the low floor never collapses"
                                                       : "the mild or the sigmoid schedule collapses on most seeds";
        else v = V_INCONCLUSIVE, why = "mixed: collapses on some seeds only";
    }
    fprintf(o, "-> %s (%s)\n", verdict_name(v), why);
    return v;
}

VerdictKind verdict_infer(const SweepSummary *s) {
    const int head = axis_of(s, "head");
    if (head < 0) /* backbone MoE layers against their matched dense layers */
        return axis_of(s, "moe-after") >= 0 && (axis_of(s, "k") >= 0 || axis_of(s, "moe-k") >= 0) ? VERDICT_TOPK
                                                                                                  : VERDICT_NONE;
    if (axis_of(s, "schedule") >= 0) return VERDICT_TEMPERATURE;
    if (axis_of(s, "hidden") >= 0) return VERDICT_HIDDEN;
    if (axis_of(s, "k") >= 0) return VERDICT_TOPK;
    for (int c = 0; c < s->nconfigs; c++)
        if (!strncmp(s->values[c * s->naxes + head], "softmoe", 7)) return VERDICT_SOFTMOE;
    return VERDICT_NONE;
}

Verdict verdict_print(VerdictKind kind, const SweepSummary *s, FILE *o) {
    if (kind == VERDICT_NONE) return V_INCONCLUSIVE;
    fprintf(o, "\n");
    switch (kind) {
    case VERDICT_HIDDEN: return v_hidden(s, o);
    case VERDICT_TOPK: return v_topk(s, o);
    case VERDICT_SOFTMOE: return v_softmoe(s, o);
    case VERDICT_TEMPERATURE: return v_temperature(s, o);
    case VERDICT_NONE: break;
    }
    return V_INCONCLUSIVE;
}
