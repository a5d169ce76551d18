/* test_verdict.c — the verdict of each preset (app/sweep/sweep_verdict.c) on hand-made
 * summaries: for every claim one that supports it, one that contradicts it and one that is
 * inconclusive (an interval spanning 0, too few seeds, or for topk-rho a realized rho that is not
 * held fixed); the printed block names the claim and the measured quantities; the claim a
 * summary tests is inferred from its axes. The agreement of two reruns (app/sweep/sweep_agree.c): the
 * Welch separation of two gaps (a shared baseline cancels, separate ones add their variance),
 * and agree / disagree for the same order, a swap within the noise, a reversed separated pair, a
 * reversed sign and different verdicts. */
#include "app/sweep/sweep_verdict.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

#define MAXC 16
typedef struct {
    SweepSummary s;
    SweepConfig c[MAXC];
    char *axes[4];
    char *values[MAXC * 4];
} Fake;

/* A summary with the given axes; configurations are added with add(). */
static void fake_init(Fake *f, int naxes, const char *a0, const char *a1, const char *a2) {
    memset(f, 0, sizeof *f);
    f->axes[0] = (char *)a0;
    f->axes[1] = (char *)a1;
    f->axes[2] = (char *)a2;
    f->s.naxes = naxes;
    f->s.axes = f->axes;
    f->s.values = f->values;
    f->s.configs = f->c;
    f->s.seeds = 3;
    f->s.ci_level = 0.95;
}

/* one configuration: axis values v0..v2, its head, n seeds, gap [lo, hi] (fractions), baseline */
static SweepConfig *add(Fake *f, const char *v0, const char *v1, const char *v2, const char *head, int n, double gap,
                        double lo, double hi, int baseline) {
    const int c = f->s.nconfigs++;
    SweepConfig *k = &f->c[c];
    memset(k, 0, sizeof *k);
    snprintf(k->head, sizeof k->head, "%s", head);
    snprintf(k->label, sizeof k->label, "%s,%s,%s", v0, v1 ? v1 : "", v2 ? v2 : "");
    const char *v[3] = {v0, v1, v2};
    for (int a = 0; a < f->s.naxes; a++) f->values[c * f->s.naxes + a] = (char *)v[a];
    k->n = k->n_expected = n;
    k->baseline = baseline;
    k->gap = gap;
    k->gap_lo = lo;
    k->gap_hi = hi;
    k->rho_nominal = k->rho_realized = NAN;
    k->peak_gap = k->peak_gap_lo = k->peak_gap_hi = NAN;
    k->collapse_step = NAN;
    return k;
}

/* runs the verdict into a buffer */
static Verdict run(VerdictKind kind, const Fake *f, char *out, size_t n) {
    FILE *t = tmpfile();
    const Verdict v = verdict_print(kind, &f->s, t);
    rewind(t);
    const size_t got = fread(out, 1, n - 1, t);
    out[got] = 0;
    fclose(t);
    return v;
}

/* hidden-size: backbone x hidden; dense baseline at index 0 of each backbone */
static void hidden(Fake *f, double dw_lo_gap, double dw_hi_gap, double std_lo_gap, double std_hi_gap, double half,
                   int n) {
    fake_init(f, 3, "hidden", "backbone", "head");
    add(f, "64", "dw", "dense", "dense", n, NAN, NAN, NAN, -1);
    add(f, "64", "dw", "moe", "moe", n, dw_lo_gap, dw_lo_gap - half, dw_lo_gap + half, 0)->rho_nominal = 0.06;
    add(f, "1024", "dw", "dense", "dense", n, NAN, NAN, NAN, -1);
    add(f, "1024", "dw", "moe", "moe", n, dw_hi_gap, dw_hi_gap - half, dw_hi_gap + half, 2)->rho_nominal = 0.51;
    add(f, "512", "std", "dense", "dense", n, NAN, NAN, NAN, -1);
    add(f, "512", "std", "moe", "moe", n, std_lo_gap, std_lo_gap - half, std_lo_gap + half, 4)->rho_nominal = 0.08;
    add(f, "8192", "std", "dense", "dense", n, NAN, NAN, NAN, -1);
    add(f, "8192", "std", "moe", "moe", n, std_hi_gap, std_hi_gap - half, std_hi_gap + half, 6)->rho_nominal = 0.57;
    if (n < 2)
        for (int c = 0; c < f->s.nconfigs; c++) f->c[c].gap_lo = f->c[c].gap_hi = NAN;
}

static void test_hidden(void) {
    Fake f;
    char out[4096];
    hidden(&f, -0.02, 0.015, -0.01, 0.02, 0.005, 3);
    check(run(VERDICT_HIDDEN, &f, out, sizeof out) == V_SUPPORTS,
          "hidden-size: negative then positive on both: supports");
    check(strstr(out, "claim 1") && strstr(out, "dw   h 64    rho 0.060  gap -2.00 pp [-2.50, -1.50]") &&
              strstr(out, "std  h 8192  rho 0.570  gap +2.00 pp [+1.50, +2.50]") && strstr(out, "-> supports"),
          "hidden-size: the block shows the gap with its CI at each rho per backbone:\n%s", out);
    hidden(&f, -0.02, 0.015, -0.01, -0.02, 0.005, 3);
    check(run(VERDICT_HIDDEN, &f, out, sizeof out) == V_CONTRADICTS && strstr(out, "still negative at the largest rho"),
          "hidden-size: std never turns positive: contradicts");
    hidden(&f, -0.02, 0.015, -0.01, 0.002, 0.005, 3);
    check(run(VERDICT_HIDDEN, &f, out, sizeof out) == V_INCONCLUSIVE,
          "hidden-size: std's largest-rho CI spans 0: inconclusive");
    hidden(&f, -0.02, 0.015, -0.01, 0.02, 0.005, 1);
    check(run(VERDICT_HIDDEN, &f, out, sizeof out) == V_INCONCLUSIVE && strstr(out, "no CI: 1 seed"),
          "hidden-size: one seed (no interval): inconclusive");
}

static void topk(Fake *f, double g1, double g2, double g4, double half, double r4) {
    fake_init(f, 3, "k", "cf", "head");
    add(f, "1", "0", "moe", "moe", 3, g1, g1 - half, g1 + half, 1)->rho_realized = 0.340;
    add(f, "1", "0", "dense", "dense", 3, NAN, NAN, NAN, -1);
    add(f, "2", "0.5", "moe", "moe", 3, g2, g2 - half, g2 + half, 3)->rho_realized = 0.338;
    add(f, "2", "0.5", "dense", "dense", 3, NAN, NAN, NAN, -1);
    add(f, "4", "0.25", "moe", "moe", 3, g4, g4 - half, g4 + half, 5)->rho_realized = r4;
    add(f, "4", "0.25", "dense", "dense", 3, NAN, NAN, NAN, -1);
}

static void test_topk(void) {
    Fake f;
    char out[4096];
    topk(&f, -0.01, 0.01, 0.012, 0.004, 0.341);
    check(run(VERDICT_TOPK, &f, out, sizeof out) == V_SUPPORTS && strstr(out, "realized rho equal within 0.9%") &&
              strstr(out, "k=4  cf 0.25  rho realized 0.3410"),
          "topk-rho: k=1 negative, k>=2 positive at equal realized rho: supports:\n%s", out);
    topk(&f, 0.01, 0.01, 0.012, 0.004, 0.341);
    check(run(VERDICT_TOPK, &f, out, sizeof out) == V_CONTRADICTS, "topk-rho: k=1 positive: contradicts");
    topk(&f, -0.01, 0.01, 0.012, 0.004, 0.40);
    check(run(VERDICT_TOPK, &f, out, sizeof out) == V_INCONCLUSIVE && strstr(out, "NOT equal within 18"),
          "topk-rho: realized rho 18%% apart: inconclusive whatever the gaps");
    topk(&f, -0.01, 0.002, 0.012, 0.004, 0.341);
    check(run(VERDICT_TOPK, &f, out, sizeof out) == V_INCONCLUSIVE, "topk-rho: k=2's CI spans 0: inconclusive");
    /* only the k = 1 pair (a grid cut to --vary k=1): a negative k = 1 alone decides nothing */
    topk(&f, -0.01, 0.01, 0.012, 0.004, 0.341);
    f.s.nconfigs = 2;
    check(run(VERDICT_TOPK, &f, out, sizeof out) == V_INCONCLUSIVE && strstr(out, "no k >= 2 configuration"),
          "topk-rho: k = 1 only: inconclusive (no k >= 2 configuration)");
}

static void softmoe(Fake *f, double gb, double gs, double half) {
    fake_init(f, 1, "head", NULL, NULL);
    add(f, "softmoe-sample", NULL, NULL, "softmoe-sample", 3, gs, gs - half, gs + half, 3);
    add(f, "softmoe-batch", NULL, NULL, "softmoe-batch", 3, gb, gb - half, gb + half, 3);
    add(f, "moe", NULL, NULL, "moe", 3, 0.0, -0.01, 0.01, 3);
    add(f, "dense", NULL, NULL, "dense", 3, NAN, NAN, NAN, -1);
}

static void test_softmoe(void) {
    Fake f;
    char out[4096];
    softmoe(&f, -0.05, 0.01, 0.005);
    check(run(VERDICT_SOFTMOE, &f, out, sizeof out) == V_SUPPORTS && strstr(out, "claim 3"),
          "softmoe: batch negative, sample positive: supports");
    softmoe(&f, -0.05, -0.01, 0.005);
    check(run(VERDICT_SOFTMOE, &f, out, sizeof out) == V_CONTRADICTS, "softmoe: per-sample negative: contradicts");
    softmoe(&f, -0.05, 0.003, 0.005);
    check(run(VERDICT_SOFTMOE, &f, out, sizeof out) == V_INCONCLUSIVE, "softmoe: per-sample CI spans 0: inconclusive");
}

static void temp(Fake *f, int agg, int mild, int sig, int n) {
    fake_init(f, 3, "schedule", "tau1", "head");
    add(f, "const", "1", "moe", "moe", n, 0.001, -0.002, 0.004, 1)->collapsed = 0;
    add(f, "const", "1", "dense", "dense", n, NAN, NAN, NAN, -1);
    SweepConfig *a = add(f, "linear", "0.1", "moe", "moe", n, -0.02, -0.03, -0.01, 1);
    a->collapsed = agg;
    a->collapse_step = 1500;
    a->peak_gap = 0.009;
    add(f, "linear", "0.3", "moe", "moe", n, 0.002, -0.001, 0.005, 1)->collapsed = mild;
    add(f, "sigmoid", "0.1", "moe", "moe", n, 0.0003, -0.002, 0.003, 1)->collapsed = sig;
}

static void test_temperature(void) {
    Fake f;
    char out[4096];
    temp(&f, 3, 0, 0, 3);
    check(run(VERDICT_TEMPERATURE, &f, out, sizeof out) == V_SUPPORTS &&
              strstr(out, "linear   tau1 0.1  collapsed 3/3 from step ~1500") && strstr(out, "peak +0.90 pp") &&
              strstr(out, "final -2.00 pp [-3.00, -1.00]"),
          "temperature: linear to 0.1 collapses on every seed, the others never: supports:\n%s", out);
    temp(&f, 0, 0, 0, 3);
    check(run(VERDICT_TEMPERATURE, &f, out, sizeof out) == V_CONTRADICTS && strstr(out, "never collapses"),
          "temperature: nothing collapses: contradicts");
    temp(&f, 3, 0, 3, 3);
    check(run(VERDICT_TEMPERATURE, &f, out, sizeof out) == V_CONTRADICTS,
          "temperature: sigmoid collapses too: contradicts");
    temp(&f, 1, 0, 0, 3);
    check(run(VERDICT_TEMPERATURE, &f, out, sizeof out) == V_INCONCLUSIVE, "temperature: 1 of 3 seeds: inconclusive");
    temp(&f, 1, 0, 0, 1);
    check(run(VERDICT_TEMPERATURE, &f, out, sizeof out) == V_INCONCLUSIVE && strstr(out, "too few seeds"),
          "temperature: one seed: inconclusive");
}

static void test_infer(void) {
    Fake f;
    hidden(&f, 0, 0, 0, 0, 0.01, 2);
    check(verdict_infer(&f.s) == VERDICT_HIDDEN, "infer: hidden + head -> hidden-size");
    topk(&f, 0, 0, 0, 0.01, 0.34);
    check(verdict_infer(&f.s) == VERDICT_TOPK, "infer: k + head -> topk-rho");
    softmoe(&f, 0, 0, 0.01);
    check(verdict_infer(&f.s) == VERDICT_SOFTMOE, "infer: a softmoe head -> softmoe");
    temp(&f, 0, 0, 0, 2);
    check(verdict_infer(&f.s) == VERDICT_TEMPERATURE, "infer: schedule + head -> temperature");
    fake_init(&f, 1, "noise", NULL, NULL);
    add(&f, "0", NULL, NULL, "moe", 2, NAN, NAN, NAN, -1);
    check(verdict_infer(&f.s) == VERDICT_NONE, "infer: no head axis -> none");
    char out[64];
    check(run(VERDICT_NONE, &f, out, sizeof out) == V_INCONCLUSIVE && out[0] == 0, "VERDICT_NONE prints nothing");
}

/* ---- two reruns: a temperature-like grid, one dense baseline (index 0) and three moe configs
 * with final accuracies m (sd sd, n seeds); gap and interval from those (normal approximation is
 * enough here: the tests below pick values far from the edges) */
static void rerun(Fake *f, const double m[3], double sd, double base_sd, int n) {
    fake_init(f, 2, "schedule", "head", NULL);
    SweepConfig *b = add(f, "const", "dense", NULL, "dense", n, NAN, NAN, NAN, -1);
    b->final_mean = 0.88;
    b->final_sd = base_sd;
    static const char *sch[3] = {"const", "linear", "sigmoid"};
    for (int i = 0; i < 3; i++) {
        const double half = 2.0 * sqrt(sd * sd / n + base_sd * base_sd / n);
        SweepConfig *k = add(f, sch[i], "moe", NULL, "moe", n, m[i] - 0.88, m[i] - 0.88 - half, m[i] - 0.88 + half, 0);
        snprintf(k->label, sizeof k->label, "schedule=%s,head=moe", sch[i]);
        k->final_mean = m[i];
        k->final_sd = sd;
        k->collapsed = 0;
    }
    snprintf(f->c[0].label, sizeof f->c[0].label, "schedule=const,head=dense");
}

static Agreement agree_of(const Fake *a, const Fake *b, char *out, size_t n) {
    FILE *t = tmpfile();
    Agreement g;
    sweep_agree(&a->s, &b->s, "A", "B", t, &g);
    rewind(t);
    const size_t got = fread(out, 1, n - 1, t);
    out[got] = 0;
    fclose(t);
    return g;
}

static void test_agree(void) {
    Fake a, b;
    char out[4096];
    /* separation: 0.90 vs 0.87, sd 0.005, 4 seeds: separated both ways round */
    const double m1[3] = {0.90, 0.87, 0.885};
    rerun(&a, m1, 0.005, 0.005, 4);
    check(sweep_agree_separated(&a.s, 1, 2, 0.95) == 1 && sweep_agree_separated(&a.s, 2, 1, 0.95) == -1,
          "separated: 0.90 vs 0.87 (sd 0.005, n 4) is resolved, and antisymmetric");
    check(sweep_agree_separated(&a.s, 1, 3, 0.95) == 1, "separated: 0.90 vs 0.885 resolved at sd 0.005");
    /* a shared baseline cancels: a huge baseline sd does not hide a difference between two moe runs */
    rerun(&a, m1, 0.005, 0.2, 4);
    check(sweep_agree_separated(&a.s, 1, 2, 0.95) == 1, "separated: a shared baseline's spread cancels");
    /* separate baselines add their variance: the same difference is no longer resolved */
    Fake h;
    fake_init(&h, 2, "hidden", "head", NULL);
    SweepConfig *d1 = add(&h, "64", "dense", NULL, "dense", 4, NAN, NAN, NAN, -1);
    d1->final_mean = 0.88, d1->final_sd = 0.2;
    SweepConfig *k1 = add(&h, "64", "moe", NULL, "moe", 4, 0.02, -0.3, 0.3, 0);
    k1->final_mean = 0.90, k1->final_sd = 0.005;
    SweepConfig *d2 = add(&h, "256", "dense", NULL, "dense", 4, NAN, NAN, NAN, -1);
    d2->final_mean = 0.88, d2->final_sd = 0.2;
    SweepConfig *k2 = add(&h, "256", "moe", NULL, "moe", 4, -0.01, -0.3, 0.3, 2);
    k2->final_mean = 0.87, k2->final_sd = 0.005;
    check(sweep_agree_separated(&h.s, 1, 3, 0.95) == 0, "separated: different baselines add their spread (not resolved)");
    k2->n = 1;
    check(sweep_agree_separated(&h.s, 1, 3, 0.95) == 0, "separated: one seed decides nothing");
    /* the same order, separated the same way in both: agree, tau +1 */
    rerun(&a, m1, 0.005, 0.005, 4);
    const double m2[3] = {0.901, 0.868, 0.884};
    rerun(&b, m2, 0.005, 0.005, 4);
    Agreement g = agree_of(&a, &b, out, sizeof out);
    check(g.agree && g.matched == 4 && g.pairs == 3 && g.kendall == 1.0 && g.separated_both == 3 && !g.pair_reversed,
          "agree: same order, every pair separated the same way (tau %+.2f, both %d)", g.kendall, g.separated_both);
    check(strstr(out, "-> agree") && strstr(out, "verdict   A inconclusive, B inconclusive: the same"),
          "agree: printed verdicts and the outcome");
    /* two configurations within the noise swap places: still agree, tau < 1 */
    const double m3[3] = {0.900, 0.8700, 0.8705}, m4[3] = {0.900, 0.8705, 0.8700};
    rerun(&a, m3, 0.005, 0.005, 4);
    rerun(&b, m4, 0.005, 0.005, 4);
    g = agree_of(&a, &b, out, sizeof out);
    check(g.agree && g.discordant == 1 && g.kendall < 1 && !g.pair_reversed && strstr(out, "within the seed noise"),
          "agree: a swap within the noise is not a disagreement (tau %+.2f)", g.kendall);
    /* a pair separated one way in A and the other way in B: disagree */
    const double m5[3] = {0.90, 0.87, 0.885}, m6[3] = {0.87, 0.90, 0.885};
    rerun(&a, m5, 0.005, 0.005, 4);
    rerun(&b, m6, 0.005, 0.005, 4);
    g = agree_of(&a, &b, out, sizeof out);
    check(!g.agree && g.pair_reversed >= 1 && strstr(out, "reversed  schedule=const,head=moe vs schedule=linear"),
          "disagree: a separated pair reversed (%d) is named", g.pair_reversed);
    /* a gap positive in A and negative in B, both resolved */
    const double m7[3] = {0.90, 0.885, 0.885}, m8[3] = {0.86, 0.885, 0.885};
    rerun(&a, m7, 0.002, 0.002, 4);
    rerun(&b, m8, 0.002, 0.002, 4);
    g = agree_of(&a, &b, out, sizeof out);
    check(!g.agree && g.sign_reversed == 1 && strstr(out, "+/-  REVERSED"), "disagree: a resolved gap sign reversed");
    /* different verdicts, nothing reversed: hidden-size supports in A; in B the large-rho dw gap
     * spans 0 (inconclusive); no sd, so no pair is separated */
    hidden(&a, -0.02, 0.02, -0.02, 0.02, 0.005, 4);
    hidden(&b, -0.02, 0.002, -0.02, 0.02, 0.005, 4);
    for (int c = 0; c < a.s.nconfigs; c++) a.c[c].final_sd = b.c[c].final_sd = NAN;
    g = agree_of(&a, &b, out, sizeof out);
    check(!g.agree && g.has_verdict && !g.same_verdict && g.verdict_a == V_SUPPORTS && g.verdict_b == V_INCONCLUSIVE &&
              !g.sign_reversed && !g.pair_reversed && strstr(out, "the verdicts differ"),
          "disagree: supports vs inconclusive with no reversal");
    /* a different grid: unmatched configurations are counted and said */
    rerun(&a, m1, 0.005, 0.005, 4);
    rerun(&b, m1, 0.005, 0.005, 4);
    snprintf(b.c[3].label, sizeof b.c[3].label, "schedule=cosine,head=moe");
    g = agree_of(&a, &b, out, sizeof out);
    check(g.matched == 3 && g.unmatched == 2 && strstr(out, "not the same grid"), "agree: unmatched labels are said");
    /* nothing with a gap in both: cannot tell, not agree */
    for (int c = 1; c < 4; c++) b.c[c].baseline = -1;
    g = agree_of(&a, &b, out, sizeof out);
    check(!g.agree && strstr(out, "cannot tell"), "agree: no common gap -> cannot tell");
}

/* ---- the paper's figures in each block: stated as a reading of the paper, compared with
 * moelab's interval (contains / does not / part of a range / not compared), none for claim 3 */
static void test_paper(void) {
    Fake f;
    char out[8192];
    /* claim 2: k = 1 at -1.0 pp [-1.4, -0.6] does not contain -2.08 (above); k = 2 at +1.0 [+0.6, +1.4] contains +1.17 */
    topk(&f, -0.01, 0.01, 0.012, 0.004, 0.341);
    run(VERDICT_TOPK, &f, out, sizeof out);
    check(strstr(out, "paper reports (a reading of the paper, not verified here):") &&
              strstr(out, "rho ~ 0.38, k = 1: -2.08 pp; moelab k = 1 at realized rho 0.340 -1.00 pp [-1.40, -0.60] "
                          "does not contain it (above)") &&
              strstr(out, "rho ~ 0.38, k = 2: +1.17 pp; moelab k = 2 at realized rho 0.338 +1.00 pp [+0.60, +1.40] "
                          "contains it"),
          "topk: the paper's k = 1 and k = 2 figures beside moelab's intervals:\n%s", out);
    check(strstr(out, "paper reports") < strstr(out, "-> supports"), "topk: the paper's figures come before the verdict");
    topk(&f, -0.025, 0.01, 0.012, 0.004, 0.341);
    run(VERDICT_TOPK, &f, out, sizeof out);
    check(strstr(out, "-2.08 pp; moelab k = 1 at realized rho 0.340 -2.50 pp [-2.90, -2.10] does not contain it (below)") != NULL,
          "topk: an interval below the paper's figure says so");
    topk(&f, -0.02, 0.01, 0.012, 0.004, 0.341);
    f.c[0].gap_lo = f.c[0].gap_hi = NAN;
    run(VERDICT_TOPK, &f, out, sizeof out);
    check(strstr(out, "-2.08 pp; moelab k = 1 at realized rho 0.340 -2.00 pp, no interval (fewer than 2 seeds): not compared") != NULL,
          "topk: no interval: not compared");
    /* claim 1: the smallest rho against the head-only range, the largest against +1.17 */
    hidden(&f, -0.016, 0.015, -0.01, 0.02, 0.005, 3);
    run(VERDICT_HIDDEN, &f, out, sizeof out);
    check(strstr(out, "MoE in the head only (routed FLOPs < 1%): -1.90 to -1.29 pp; moelab at its smallest rho 0.060 "
                      "-1.60 pp [-2.10, -1.10] contains the range") &&
              strstr(out, "k = 2: +1.17 pp; moelab at its largest rho 0.570 +2.00 pp [+1.50, +2.50] does not contain it "
                          "(above)") &&
              strstr(out, "no number for a hidden-size sweep"),
          "hidden-size: the paper's head-only range and backbone figure:\n%s", out);
    hidden(&f, -0.012, 0.015, -0.01, 0.02, 0.005, 3);
    run(VERDICT_HIDDEN, &f, out, sizeof out);
    check(strstr(out, "-1.20 pp [-1.70, -0.70] contains part of the range") != NULL, "hidden-size: an overlap is said as one");
    /* claim 3: no number */
    softmoe(&f, -0.05, 0.01, 0.005);
    run(VERDICT_SOFTMOE, &f, out, sizeof out);
    check(strstr(out, "paper reports (a reading of the paper, not verified here):") && strstr(out, "no number"),
          "softmoe: the paper gives no number, and the block says so");
    /* claim 4: linear to 0.1's peak against +0.92, sigmoid's final gap against +0.03 */
    temp(&f, 3, 0, 0, 3);
    f.c[2].peak_gap_lo = 0.004;
    f.c[2].peak_gap_hi = 0.014;
    run(VERDICT_TEMPERATURE, &f, out, sizeof out);
    check(strstr(out, "linear to tau_min 0.1, k = 1: peak (then collapses late): +0.92 pp; moelab peak of linear to 0.1 "
                      "+0.90 pp [+0.40, +1.40] contains it") &&
              strstr(out, "sigmoid, k = 1 (no collapse): +0.03 pp; moelab sigmoid final +0.03 pp [-0.20, +0.30] contains it") &&
              strstr(out, "linear to 0.3: no number"),
          "temperature: the paper's peak and sigmoid figures:\n%s", out);
    /* a grid without the configuration: not compared */
    fake_init(&f, 3, "schedule", "tau1", "head");
    add(&f, "const", "1", "moe", "moe", 3, 0.001, -0.002, 0.004, 1)->collapsed = 0;
    add(&f, "const", "1", "dense", "dense", 3, NAN, NAN, NAN, -1);
    run(VERDICT_TEMPERATURE, &f, out, sizeof out);
    check(strstr(out, "+0.03 pp; moelab: no sigmoid final in this sweep, not compared") != NULL,
          "temperature: a missing configuration is not compared:\n%s", out);
}

int main(void) {
    test_hidden();
    test_topk();
    test_softmoe();
    test_temperature();
    test_infer();
    test_paper();
    test_agree();
    printf("%d checks, %d failed\n", n_checks, n_failed);
    return n_failed ? 1 : 0;
}
