/* dataset.h — in-memory image classification datasets and mini-batch preparation.
 *
 * A dataset is two splits of uint8 images stored (N, C, H, W) plus int32 labels, the class names
 * and the per-channel mean/std used for normalisation (in [0,1] pixel units). Readers validate
 * every size before they read and fail with a one-line message naming the file (ml_last_error).
 * Batches are handed to the model in the core's activation layout (C, B, H, W), normalised.
 *
 * Dataset specs accepted by dataset_open():
 *   "fashion-mnist"           IDX files under /usr/share/datasets/fashion-mnist (or $MOELAB_DATA/fashion-mnist)
 *   "mnist"                   IDX files under /usr/share/datasets/mnist
 *   DIR                       a directory holding the four IDX files (plain or .gz)
 *   "synthetic[:HxWxC[:K[:N]]]"  generated, class-structured images (default 32x32x3, 10 classes;
 *                             N train images, default 5000, and N/5 test images)
 *   "default"                 fashion-mnist when present, else synthetic (also for NULL or "")
 */
#ifndef ML_DATASET_H
#define ML_DATASET_H

#include <stdint.h>
#include "../core/common.h"

#define DATASET_MAX_CHANNELS 4

typedef struct {
    int n;             /* number of images */
    uint8_t *images;   /* (n, c, h, w) row-major, owned */
    int32_t *labels;   /* (n), each in [0, classes), owned */
} DatasetSplit;

typedef struct {
    char name[64];       /* "fashion-mnist", "synthetic", ... */
    char source[512];    /* where it was read from ("" for synthetic) */
    int c, h, w;         /* image shape */
    int classes;
    char **class_names;  /* (classes) owned strings */
    float mean[DATASET_MAX_CHANNELS]; /* per channel, pixel/255 units */
    float std[DATASET_MAX_CHANNELS];
    DatasetSplit train, test;
} Dataset;

typedef struct {
    int h, w, c;        /* image shape (default 32, 32, 3) */
    int classes;        /* default 10 */
    int n_train;        /* default 5000 */
    int n_test;         /* default 1000 */
    uint64_t seed;      /* default 1 */
} SyntheticOptions;

/* Opens the dataset described by `spec` (see above). On failure `ds` is left empty and
 * ml_last_error() names the file, offset and what was expected. */
ml_status dataset_open(Dataset *ds, const char *spec);
void dataset_free(Dataset *ds);

/* Reads the four IDX files from `dir` (train-images-idx3-ubyte, train-labels-idx1-ubyte,
 * t10k-images-idx3-ubyte, t10k-labels-idx1-ubyte, each plain or .gz). */
ml_status idx_load_dir(Dataset *ds, const char *dir, const char *name);

/* Parses one IDX file image held in memory (already decompressed). `what` names it in errors.
 * For an images file (magic 2051): *n, *rows, *cols set, *data points into buf (not copied).
 * For a labels file (magic 2049): *n set, *rows = *cols = 0. Returns ML_ERR_FORMAT on any
 * inconsistency (magic, dims, truncation, trailing garbage). */
ml_status idx_parse(const uint8_t *buf, size_t len, const char *what, int *magic, int *n,
                    int *rows, int *cols, const uint8_t **data);

/* Reads a whole file into memory, gunzipping it when it is gzip (by magic bytes). *out is
 * malloc'd (release with free() or ml_free()) and has a NUL byte after its *len bytes. */
ml_status file_read_all(const char *path, uint8_t **out, size_t *len);

/* Generates a synthetic, class-structured dataset (each class a distinct smooth pattern plus
 * noise; learnable but not trivial). Deterministic in the seed. */
ml_status synthetic_generate(Dataset *ds, const SyntheticOptions *opt);
void synthetic_defaults(SyntheticOptions *opt);

/* Computes ds->mean/std from the train split. */
void dataset_compute_stats(Dataset *ds);

/* Fills one normalised batch: x (C, B, H, W) floats, y (B) labels, from the images
 * split->images[idx[b]] for b in [0, B). */
void batch_fill(float *x, int32_t *y, const Dataset *ds, const DatasetSplit *split,
                const int32_t *idx, int B);

#endif
