/* sweep_agree.c — `moelab sweep --agree A B`: do two sweeps of the same grid with different seeds
 * (a preset and its `--seed-from` rerun) tell the same story? Works on two SweepSummary values
 * alone (tests/test_verdict.c feeds it hand-made ones).
 *
 * Compared, configuration by configuration (matched by label):
 *   - the verdict of the claim the axes test (sweep_verdict.c);
 *   - each gap's sign as the 95% interval resolves it (+, -, or 0 when it spans 0): a sign that
 *     is resolved in both sweeps and opposite is a reversal;
 *   - the order of the configurations by gap: Kendall's tau-a over every pair of configurations
 *     with a gap in both sweeps, and the pairs that one sweep *separates* (the 95% Welch interval
 *     of the difference of their gaps excludes 0) — a pair separated in both in opposite
 *     directions is a reversal, a pair separated in one and tied in the other is not (the other
 *     sweep's seeds simply could not resolve it).
 * The sweeps agree when the verdicts are equal and nothing is reversed. The point order (tau = 1)
 * is printed but not required: configurations closer together than the seed noise swap places
 * from rerun to rerun, and demanding otherwise would make agreement a coin toss.
 *
 * Difference of two gaps g_i = m_i - m_bi and g_j = m_j - m_bj (means of final accuracy, sds s,
 * finished runs n): var = s_i^2/n_i + s_j^2/n_j (+ s_bi^2/n_bi + s_bj^2/n_bj when the baselines
 * differ; a shared baseline cancels), Welch-Satterthwaite df, interval diff -+ t_{0.975, df} sqrt(var). */
#include "app/sweep/sweep_verdict.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/stats.h"

static int find_label(const SweepSummary *s, const char *label) {
    for (int c = 0; c < s->nconfigs; c++)
        if (!strcmp(s->configs[c].label, label)) return c;
    return -1;
}

static int has_gap(const SweepSummary *s, int c) {
    return c >= 0 && s->configs[c].baseline >= 0 && !isnan(s->configs[c].gap);
}

static int ci_sign3(double lo, double hi) {
    if (isnan(lo) || isnan(hi)) return 0;
    return lo > 0 ? 1 : hi < 0 ? -1 : 0;
}

/* +1: gap i is above gap j at 95%, -1: below, 0: not separated (or unknown) */
int sweep_agree_separated(const SweepSummary *s, int i, int j, double level) {
    const SweepConfig *a = &s->configs[i], *b = &s->configs[j];
    if (a->baseline < 0 || b->baseline < 0) return 0;
    const SweepConfig *ba = &s->configs[a->baseline], *bb = &s->configs[b->baseline];
    const SweepConfig *g[4] = {a, b, ba, bb};
    const int ng = a->baseline == b->baseline ? 2 : 4;
    double var = 0, den = 0;
    for (int k = 0; k < ng; k++) {
        if (g[k]->n < 2 || isnan(g[k]->final_sd)) return 0;
        const double v = g[k]->final_sd * g[k]->final_sd / g[k]->n;
        var += v;
        den += v * v / (g[k]->n - 1);
    }
    const double diff = a->gap - b->gap;
    if (isnan(diff)) return 0;
    if (var <= 0) return diff > 0 ? 1 : diff < 0 ? -1 : 0;
    const double df = den > 0 ? var * var / den : INFINITY;
    const double t = stats_t_quantile(0.5 + 0.5 * level, df);
    const double half = t * sqrt(var);
    return diff - half > 0 ? 1 : diff + half < 0 ? -1 : 0;
}

static const char *sign_name(int s) { return s > 0 ? "+" : s < 0 ? "-" : "0"; }

static void seed_range(const SweepSummary *s, char *buf, size_t n) {
    uint64_t lo = UINT64_MAX, hi = 0;
    for (int r = 0; r < s->nruns; r++) {
        if (s->runs[r].seed < lo) lo = s->runs[r].seed;
        if (s->runs[r].seed > hi) hi = s->runs[r].seed;
    }
    if (!s->nruns) snprintf(buf, n, "no runs");
    else if (lo == hi) snprintf(buf, n, "seed %llu", (unsigned long long)lo);
    else snprintf(buf, n, "seeds %llu-%llu", (unsigned long long)lo, (unsigned long long)hi);
}

int sweep_agree(const SweepSummary *A, const SweepSummary *B, const char *name_a, const char *name_b, FILE *o,
                Agreement *out) {
    Agreement g;
    memset(&g, 0, sizeof g);
    g.kendall = NAN;
    char ra[64], rb[64];
    seed_range(A, ra, sizeof ra);
    seed_range(B, rb, sizeof rb);
    /* configurations with a gap in both, in A's order */
    int *ia = malloc(sizeof(int) * (A->nconfigs + 1)), *ib = malloc(sizeof(int) * (A->nconfigs + 1)), n = 0;
    if (!ia || !ib) {
        free(ia);
        free(ib);
        return -1;
    }
    for (int c = 0; c < A->nconfigs; c++) {
        const int d = find_label(B, A->configs[c].label);
        if (d < 0) {
            g.unmatched++;
            continue;
        }
        g.matched++;
        if (has_gap(A, c) && has_gap(B, d)) ia[n] = c, ib[n] = d, n++;
    }
    for (int d = 0; d < B->nconfigs; d++) g.unmatched += find_label(A, B->configs[d].label) < 0;
    fprintf(o, "agree     A %s (%s) vs B %s (%s): %d configurations matched, %d with a gap in both%s\n", name_a, ra,
            name_b, rb, g.matched, n, g.unmatched ? ", some not matched (not the same grid?)" : "");
    /* the verdicts */
    const VerdictKind ka = verdict_infer(A), kb = verdict_infer(B);
    if (ka != VERDICT_NONE || kb != VERDICT_NONE) {
        FILE *devnull = tmpfile();
        if (!devnull) {
            free(ia);
            free(ib);
            return -1;
        }
        g.verdict_a = verdict_print(ka, A, devnull);
        g.verdict_b = verdict_print(kb, B, devnull);
        fclose(devnull);
        g.has_verdict = 1;
        g.same_verdict = ka == kb && g.verdict_a == g.verdict_b;
        fprintf(o, "verdict   A %s, B %s: %s\n", verdict_name(g.verdict_a), verdict_name(g.verdict_b),
                g.same_verdict ? "the same" : "DIFFERENT");
    }
    /* each gap with its resolved sign */
    fprintf(o, "%-40s %24s  %24s  sign A/B\n", "configuration", "A gap (pp) [95% CI]", "B gap (pp) [95% CI]");
    for (int x = 0; x < n; x++) {
        const SweepConfig *a = &A->configs[ia[x]], *b = &B->configs[ib[x]];
        const int sa = ci_sign3(a->gap_lo, a->gap_hi), sb = ci_sign3(b->gap_lo, b->gap_hi);
        char ca[48], cb[48];
        snprintf(ca, sizeof ca, "%+.2f [%+.2f, %+.2f]", 100 * a->gap, 100 * a->gap_lo, 100 * a->gap_hi);
        snprintf(cb, sizeof cb, "%+.2f [%+.2f, %+.2f]", 100 * b->gap, 100 * b->gap_lo, 100 * b->gap_hi);
        const int rev = sa && sb && sa != sb;
        g.sign_reversed += rev;
        g.sign_same += sa == sb;
        fprintf(o, "%-40s %24s  %24s  %s/%s%s\n", a->label, ca, cb, sign_name(sa), sign_name(sb),
                rev ? "  REVERSED" : "");
    }
    /* the order by gap */
    int conc = 0, disc = 0;
    for (int x = 0; x < n; x++)
        for (int y = x + 1; y < n; y++) {
            const double da = A->configs[ia[x]].gap - A->configs[ia[y]].gap;
            const double db = B->configs[ib[x]].gap - B->configs[ib[y]].gap;
            g.pairs++;
            if (da * db > 0) conc++;
            else if (da * db < 0) disc++;
            const int pa = sweep_agree_separated(A, ia[x], ia[y], 0.95), pb = sweep_agree_separated(B, ib[x], ib[y], 0.95);
            g.separated_a += pa != 0;
            g.separated_b += pb != 0;
            if (pa && pb) {
                g.separated_both += pa == pb;
                if (pa != pb) {
                    g.pair_reversed++;
                    fprintf(o, "reversed  %s vs %s: A separates them one way, B the other\n", A->configs[ia[x]].label,
                            A->configs[ia[y]].label);
                }
            }
        }
    g.concordant = conc;
    g.discordant = disc;
    if (g.pairs) g.kendall = (double)(conc - disc) / g.pairs;
    if (g.pairs)
        fprintf(
            o,
            "order     by gap: Kendall tau %+.2f (%d pairs: %d in the same order, %d swapped%s); separated at 95%%: "
            "%d pairs in A, %d in B, %d in both and the same way, %d reversed\n",
            g.kendall, g.pairs, conc, disc, conc + disc < g.pairs ? ", the rest tied" : "", g.separated_a,
            g.separated_b, g.separated_both, g.pair_reversed);
    g.agree = n > 0 && (!g.has_verdict || g.same_verdict) && !g.sign_reversed && !g.pair_reversed;
    if (!n) fprintf(o, "-> cannot tell: no configuration has a gap in both sweeps\n");
    else if (g.agree)
        fprintf(o, "-> agree: %s, no gap sign and no separated pair reversed%s\n",
                g.has_verdict ? "the same verdict" : "no verdict to compare",
                disc ? "; the swapped pairs are within the seed noise" : "; the same order");
    else {
        fprintf(o, "-> disagree:");
        if (g.has_verdict && !g.same_verdict) fprintf(o, " the verdicts differ;");
        if (g.sign_reversed) fprintf(o, " %d gap sign%s reversed;", g.sign_reversed, g.sign_reversed > 1 ? "s" : "");
        if (g.pair_reversed)
            fprintf(o, " %d separated pair%s reversed;", g.pair_reversed, g.pair_reversed > 1 ? "s" : "");
        fprintf(o, " more seeds or epochs are needed before the order means anything\n");
    }
    if (n && g.pairs && !g.separated_a && !g.separated_b)
        fprintf(o, "          (neither sweep separates any pair at 95%%: the order of the configurations is within the "
                   "seed noise of both)\n");
    free(ia);
    free(ib);
    if (out) *out = g;
    return 0;
}
