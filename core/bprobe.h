/* bprobe.h — the batch-composition probe (`moelab probe batch`; README "Batch-composition
 * probe"): the same test images evaluated in batches of different make-up, compared with file
 * order. A head that routes per sample (moe with a dropless evaluation, dense, softmoe-sample)
 * must give exactly the same predictions and first choices whatever its batch mates, and logits
 * equal up to float rounding: the SGEMMs of the pointwise convolutions and of the head round a
 * column (a sample's position in the batch) differently, by a few ulp (measured: max |dlogit|
 * ~4e-7 on logits of size ~1). softmoe-batch, whose dispatch is a softmax over the batch axis,
 * changes far beyond that, and the size of its change is the measure of the paper's claim 3
 * failure mode. Core only: no files, no datasets. */
#ifndef ML_BPROBE_H
#define ML_BPROBE_H

#include "core/trainer.h"

enum { BP_FILE, BP_SHUFFLED, BP_SORTED, BP_SINGLE, BP_MAKEUPS };
#define BP_MAX_LAYERS (MODEL_MAX_BBL + 1)

typedef struct {
    const char *name;                  /* "file order", "shuffled", "sorted by class", "single-class" */
    int batches;                       /* batches evaluated */
    double acc, loss;                  /* test accuracy (fraction) and mean cross-entropy */
    long pred_changed;                 /* images whose predicted class differs from file order's */
    long logits_changed;               /* images with a logit not bit-identical to file order's */
    double max_dlogit;                 /* max |logit - file order's logit| over images and classes */
    long route_changed[BP_MAX_LAYERS]; /* per routed layer: images whose first choice differs */
} BatchProbeRow;

typedef struct {
    int n_test, classes, batch;
    double max_abs_logit;              /* the largest |logit| of file order: the scale of the rounding bound */
    int nlayers;                       /* routed layers (trainer_nlayers order) */
    char layer[BP_MAX_LAYERS][16];     /* their names */
    BatchProbeRow row[BP_MAKEUPS];     /* row[BP_FILE] is the reference (its changes are 0) */
} BatchProbe;

/* Runs the four make-ups on t's test split, at t's batch size: file order; a shuffle (seed);
 * sorted by class (stable: file order inside a class); single-class batches (each class's images
 * in file order, cut into batches of at most `batch`, so a batch never mixes classes).
 * ML_ERR_NOMEM, or the evaluation's error. */
ml_status batch_probe_run(Trainer *t, uint64_t seed, BatchProbe *out);

/* The largest change over the non-reference make-ups: max_dlogit, and whether anything at all
 * (a logit bit, a prediction, a first choice) changed. */
double batch_probe_max_dlogit(const BatchProbe *p);
int batch_probe_any_change(const BatchProbe *p);
/* Float rounding: |dlogit| <= BP_ROUNDING * max(1, max_abs_logit). */
#define BP_ROUNDING 1e-5
/* 1 when the predictions depend on the batch mates: a prediction or a first choice changed, or a
 * logit moved by more than float rounding; 0 when every make-up gives the same decisions and
 * logits equal up to rounding. */
int batch_probe_depends(const BatchProbe *p);

#endif
