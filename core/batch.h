/* batch.h — how the trainer gets its data: a batch source that datasets/ implements.
 *
 * core/ never sees a dataset: the trainer asks its BatchSource for the images and labels of a
 * list of sample indices. datasets/dataset.h builds one from a Dataset (dataset_batch_source);
 * tests can supply their own. The source describes its data (shape, classes, split sizes) and
 * fills float images in the model input layout (c, n, h, w), already normalised, with optional CIFAR-style
 * augmentation drawn from the Rng the trainer passes (so the stream is part of the trainer's
 * checkpointed state). */
#ifndef ML_BATCH_H
#define ML_BATCH_H

#include <stdint.h>

#include "rng.h"

typedef enum { SPLIT_TRAIN, SPLIT_TEST } SplitId;

typedef struct {
    const char *name;   /* dataset name ("fashion-mnist", "synthetic", ...) */
    const char *source; /* where it was read from ("" if generated) */
    int c, h, w, classes;
    int n_train, n_test;            /* samples in each split */
    const char *const *class_names; /* (classes) names, or NULL */
    const float *mean, *std;        /* (c) normalisation, in pixel/255 units */
    int augment_default;            /* 1 if random crop + flip is on by default (RGB data) */
    /* Fills x (c, n, h, w) and y (n) with samples idx[0..n) of `split`. aug != NULL: random crop
     * + horizontal flip drawn from aug (training only). */
    void (*fill)(void *ctx, SplitId split, const int32_t *idx, int n, float *x, int32_t *y, Rng *aug);
    void *ctx;
} BatchSource;

#endif
