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

#endif
