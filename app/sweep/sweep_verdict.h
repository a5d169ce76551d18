/* sweep_verdict.h — the verdict on a paper claim that a preset prints after its summary
 * (sweep_verdict.c; README "Presets and verdicts"). Depends only on the SweepSummary. */
#ifndef ML_APP_SWEEP_VERDICT_H
#define ML_APP_SWEEP_VERDICT_H

#include <stdio.h>

#include "sessions/sweep_h5.h"

typedef enum { VERDICT_NONE, VERDICT_HIDDEN, VERDICT_TOPK, VERDICT_SOFTMOE, VERDICT_TEMPERATURE } VerdictKind;
typedef enum { V_SUPPORTS, V_CONTRADICTS, V_INCONCLUSIVE } Verdict;

const char *verdict_name(Verdict v); /* "supports" | "contradicts" | "inconclusive" */
/* The claim a summary's axes test (--collect / --show of a preset's folder): schedule ->
 * temperature, hidden -> hidden-size, k -> topk-rho, a softmoe head -> softmoe; each needs a head
 * axis (the dense baseline). VERDICT_NONE otherwise. */
VerdictKind verdict_infer(const SweepSummary *s);
/* Prints the block (claim, measured quantity per configuration, verdict) to o; returns the
 * verdict (V_INCONCLUSIVE for VERDICT_NONE, which prints nothing). */
Verdict verdict_print(VerdictKind kind, const SweepSummary *s, FILE *o);

/* Two sweeps of the same grid with different seeds (sweep_agree.c; README "Do two reruns agree?"). */
typedef struct {
    int matched, unmatched;        /* configurations found in both by label / in one only */
    int has_verdict, same_verdict; /* a claim's verdict exists; A's and B's are equal */
    Verdict verdict_a, verdict_b;
    int sign_same, sign_reversed;      /* gaps whose resolved sign (+ - 0) is equal / opposite and resolved in both */
    int pairs, concordant, discordant; /* pairs of configurations with a gap in both; in the same / swapped order */
    double kendall;                    /* (concordant - discordant) / pairs, NaN without pairs */
    int separated_a, separated_b;      /* pairs whose gaps differ at 95% in A, in B */
    int separated_both, pair_reversed; /* separated in both the same way / opposite ways */
    int agree;                         /* same verdict, nothing reversed, at least one gap in both */
} Agreement;

/* +1 when configuration i's gap is above j's at `level` (Welch interval of the difference of the
 * two gaps excludes 0; a shared baseline cancels), -1 below, 0 not separated or unknown. */
int sweep_agree_separated(const SweepSummary *s, int i, int j, double level);
/* Prints the comparison of A and B to o (names label them) and fills *out (may be NULL).
 * Returns 0, -1 on an I/O error. */
int sweep_agree(const SweepSummary *A, const SweepSummary *B, const char *name_a, const char *name_b, FILE *o,
                Agreement *out);

#endif
