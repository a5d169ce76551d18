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
 *   "cifar-10", "cifar-100"   $MOELAB_DATA/cifar-10-batches-bin, $MOELAB_DATA/cifar-100-binary
 *                             (default root /usr/share/datasets); also "cifar10", "cifar100"
 *   DIR                       a directory, format detected: the four IDX files (plain or .gz),
 *                             CIFAR-10 binary (data_batch_N.bin, test_batch.bin,
 *                             batches.meta.txt), CIFAR-100 binary (train.bin, test.bin,
 *                             fine/coarse_label_names.txt), or a parent holding
 *                             cifar-10-batches-bin/ or cifar-100-binary/. Image folders
 *                             (Tiny-ImageNet, train/<class>/ trees) must be imported first
 *                             (`moelab data import`); dataset_open says so.
 *   FILE.h5                   an HDF5 dataset file written by `moelab data import` (read through
 *                             the loader registered with dataset_set_h5_loader)
 *   "synthetic[:HxWxC[:K[:N]]]"  generated, class-structured images (default 32x32x3, 10 classes;
 *                             N train images, default 5000, and N/5 test images)
 *   "default"                 fashion-mnist when present, else synthetic (also for NULL or "")
 * Options may follow a path or a named dataset as ":"-separated suffixes:
 *   ":fine" / ":coarse"       CIFAR-100 label set (default fine)
 *   ":stats=known"            published mean/std for CIFAR (default; true pixel std)
 *   ":stats=kuangliu"         CIFAR-10 with the widespread std (0.2023, 0.1994, 0.2010)
 *   ":stats=computed"         mean/std computed from the train split
 * e.g. "cifar-100-binary:coarse" or "/data/cifar-10-batches-bin:stats=computed". Where the
 * constants came from is recorded in Dataset.stats_source.
 */
#ifndef ML_DATASET_H
#define ML_DATASET_H

#include <stdint.h>
#include "../core/common.h"
#include "../core/batch.h"
#include "../core/rng.h"

#define DATASET_MAX_CHANNELS 4

typedef struct {
    int n;           /* number of images */
    uint8_t *images; /* (n, c, h, w) row-major, owned */
    int32_t *labels; /* (n), each in [0, classes), owned */
} DatasetSplit;

typedef enum {
    DATASET_FORMAT_UNKNOWN = 0,
    DATASET_FORMAT_IDX,           /* MNIST / Fashion-MNIST IDX files */
    DATASET_FORMAT_CIFAR10,       /* cifar-10-batches-bin */
    DATASET_FORMAT_CIFAR100,      /* cifar-100-binary */
    DATASET_FORMAT_H5,            /* HDF5 dataset file from `moelab data import` */
    DATASET_FORMAT_TINY_IMAGENET, /* tiny-imagenet-200 folder (import first) */
    DATASET_FORMAT_IMAGE_FOLDER,  /* train/<class>/..., val/<class>/... tree (import first) */
    DATASET_FORMAT_SYNTHETIC,
} DatasetFormat;

/* Where mean/std come from. */
typedef enum {
    DATASET_STATS_KNOWN = 0,    /* published constants where known (CIFAR), else computed */
    DATASET_STATS_COMPUTED = 1, /* always computed from the train split */
    DATASET_STATS_KUANGLIU = 2, /* CIFAR-10 only: std (0.2023, 0.1994, 0.2010) of pytorch-cifar */
} DatasetStats;

typedef struct {
    int coarse;         /* CIFAR-100: 1 = 20 coarse labels, 0 = 100 fine labels (default) */
    DatasetStats stats; /* default DATASET_STATS_KNOWN */
} DatasetOpenOptions;

typedef struct {
    char name[64];    /* "fashion-mnist", "synthetic", "cifar-10", ... */
    char source[512]; /* where it was read from ("" for synthetic) */
    int c, h, w;      /* image shape */
    int classes;
    char **class_names;               /* (classes) owned strings */
    float mean[DATASET_MAX_CHANNELS]; /* per channel, pixel/255 units */
    float std[DATASET_MAX_CHANNELS];
    DatasetSplit train, test;
    DatasetFormat format;
    char stats_source[64]; /* e.g. "known: CIFAR-10 (true std)", "computed: train split" */
    int checksums;         /* HDF5 dataset files: 2 every dataset's crc32 and the root attributes'
                            * attrs_crc32 verified, 1 the datasets' only (imported before attrs_crc32),
                            * 0 none stored (an older import); other formats 0 */
} Dataset;

typedef struct {
    int h, w, c;   /* image shape (default 32, 32, 3) */
    int classes;   /* default 10 */
    int n_train;   /* default 5000 */
    int n_test;    /* default 1000 */
    uint64_t seed; /* default 1 */
} SyntheticOptions;

/* Opens the dataset described by `spec` (see above). On failure `ds` is left empty and
 * ml_last_error() names the file, offset and what was expected. */
ml_status dataset_open(Dataset *ds, const char *spec);
/* dataset_open with explicit options; ":" suffixes of the spec override them. opt may be NULL. */
ml_status dataset_open_with(Dataset *ds, const char *spec, const DatasetOpenOptions *opt);
void dataset_free(Dataset *ds);

/* Detects the format of a filesystem path without reading more than a few bytes per file
 * (DATASET_FORMAT_UNKNOWN when nothing matches; *resolved gets the directory actually holding
 * the files, e.g. PATH/cifar-10-batches-bin, when resolved is not NULL). */
DatasetFormat dataset_detect(const char *path, char *resolved, size_t cap);
const char *dataset_format_name(DatasetFormat f);

/* HDF5 dataset files are read by the sessions module (the only one that links HDF5): the
 * application registers its reader at startup, dataset_open() calls it for HDF5 files. */
typedef ml_status (*dataset_h5_loader_fn)(Dataset *ds, const char *path);
void dataset_set_h5_loader(dataset_h5_loader_fn fn);

/* Reads a CIFAR-10 (`cifar-10-batches-bin`) or CIFAR-100 (`cifar-100-binary`) directory;
 * `variant` is 10 or 100 (0: detect from the files present). opt may be NULL. */
ml_status cifar_load_dir(Dataset *ds, const char *dir, int variant, const DatasetOpenOptions *opt);

/* Parses one CIFAR batch file held in memory: records of 3073 bytes (variant 10: label, 3072
 * pixels R, G, B planes of 32x32) or 3074 bytes (variant 100: coarse, fine, pixels). Sets *n to
 * the record count; when images/labels are not NULL they receive n*3072 bytes (N, 3, 32, 32) and
 * n labels (fine or coarse for CIFAR-100). Errors name `what` and the offset. */
ml_status cifar_parse_batch(const uint8_t *buf, size_t len, const char *what, int variant, int coarse, uint8_t *images,
                            int32_t *labels, int *n);

/* Parses a class-names text file (one name per line, blank lines and surrounding spaces
 * ignored, CRLF accepted, control bytes replaced by '?'); exactly `expected` names are
 * required (any count >= 1 when expected is 0: *count gets it). *names is an array of malloc'd
 * strings, freed with dataset_names_free. */
ml_status dataset_parse_names(const char *text, size_t len, const char *what, int expected, char ***names, int *count);
void dataset_names_free(char **names, int count);

/* Reads the four IDX files from `dir` (train-images-idx3-ubyte, train-labels-idx1-ubyte,
 * t10k-images-idx3-ubyte, t10k-labels-idx1-ubyte, each plain or .gz). IDX stores no class
 * count: `name` "mnist" and "fashion-mnist" have 10 classes and every label must be 0..9; for
 * other names classes = max label + 1 (at least 2) and every class 0..max must occur in the
 * training labels. A label breaking that is ML_ERR_FORMAT naming the file, offset and value
 * (one corrupted byte must not silently add classes). */
ml_status idx_load_dir(Dataset *ds, const char *dir, const char *name);

/* Parses one IDX file image held in memory (already decompressed). `what` names it in errors.
 * For an images file (magic 2051): *n, *rows, *cols set, *data points into buf (not copied).
 * For a labels file (magic 2049): *n set, *rows = *cols = 0. Returns ML_ERR_FORMAT on any
 * inconsistency (magic, dims, truncation, trailing garbage). */
ml_status idx_parse(const uint8_t *buf, size_t len, const char *what, int *magic, int *n, int *rows, int *cols,
                    const uint8_t **data);

/* Reads a whole file into memory, gunzipping it when it is gzip (by magic bytes). *out is
 * malloc'd (release with free() or ml_free()) and has a NUL byte after its *len bytes. */
ml_status file_read_all(const char *path, uint8_t **out, size_t *len);

/* Generates a synthetic, class-structured dataset (each class a distinct smooth pattern plus
 * noise; learnable but not trivial). Deterministic in the seed. */
ml_status synthetic_generate(Dataset *ds, const SyntheticOptions *opt);
void synthetic_defaults(SyntheticOptions *opt);

/* Computes ds->mean/std from the train split (and sets stats_source to "computed: train split"). */
void dataset_compute_stats(Dataset *ds);

/* Fills one normalised batch: x (C, B, H, W) floats, y (B) labels, from the images
 * split->images[idx[b]] for b in [0, B). */
void batch_fill(float *x, int32_t *y, const Dataset *ds, const DatasetSplit *split, const int32_t *idx, int B);

/* ---- augmentation (augment.c) */

#define DATASET_AUGMENT_PAD 4

/* batch_fill with CIFAR-style augmentation of every sample: a random crop of the image padded
 * by DATASET_AUGMENT_PAD zero pixels on each side (pad value 0 in [0,1] pixel space, i.e.
 * (0 - mean) / std after normalisation), then a horizontal flip with probability 1/2 (the
 * torchvision RandomCrop(padding=4) + RandomHorizontalFlip order). The draws (one rng_below per
 * sample, in batch order) are taken before the parallel copy, so the result depends only on the
 * Rng state, not on the thread count. rng == NULL is batch_fill. */
void batch_fill_augment(float *x, int32_t *y, const Dataset *ds, const DatasetSplit *split, const int32_t *idx, int B,
                        Rng *rng);
/* The same with an explicit padding (0..h/2) and flip switch. */
void batch_fill_augment_ex(float *x, int32_t *y, const Dataset *ds, const DatasetSplit *split, const int32_t *idx,
                           int B, Rng *rng, int pad, int flip);
/* Whether augmentation is on by default for this dataset (RGB: c == 3). */
int dataset_augment_default(const Dataset *ds);
/* The trainer's view of ds (core/batch.h): fill is batch_fill_augment on the split. ds must
 * outlive the source. */
void dataset_batch_source(const Dataset *ds, BatchSource *src);

/* ---- inspection (check.c): what `moelab data info` reports */

#define DATASET_MAX_NOTES 24

typedef struct {
    int count;   /* notes kept */
    int dropped; /* notes beyond DATASET_MAX_NOTES */
    char text[DATASET_MAX_NOTES][384];
} DatasetNotes;

void dataset_notes_add(DatasetNotes *n, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Per-class image counts of a split: counts[k] for k < classes. */
void dataset_class_counts(const DatasetSplit *s, int classes, long *counts);

/* Looks for problems in a loaded dataset: class imbalance, classes without images, exact
 * duplicate images inside the train split, test images that also occur in train, duplicates
 * with conflicting labels, constant images. Adds one note per kind of problem. */
void dataset_check(const Dataset *ds, DatasetNotes *notes);

/* ---- image folders (imgfolder.c): scanning and importing Tiny-ImageNet-200 and
 * train/<class>/..., val/<class>/... trees of JPEG and PNG files (other files are reported as
 * non-image files and skipped). */

typedef struct {
    char *path; /* full path */
    int32_t label;
    int64_t size; /* file size in bytes */
} ImgEntry;

typedef struct {
    DatasetFormat format; /* TINY_IMAGENET or IMAGE_FOLDER */
    char root[4096];
    char name[64]; /* basename of root */
    int classes;
    char **class_ids;   /* folder names / wnids (classes) */
    char **class_names; /* human-readable names (words.txt, else the folder name) */
    ImgEntry *train, *test;
    long n_train, n_test;
    /* problems found while scanning (the import reports them too) */
    long non_image;     /* files that are not JPEG/PNG (by extension), skipped */
    long empty_classes; /* class folders without any JPEG/PNG */
    long missing;       /* files listed in val_annotations.txt but absent */
    char first_non_image[512], first_empty_class[512], first_missing[512];
} ImgScan;

/* Lists the images of an image-folder dataset (no decoding). Fails on a missing or malformed
 * wnids.txt / val_annotations.txt (naming the file and line), on a tree without train/, or when
 * no JPEG or PNG is found at all. */
ml_status imgfolder_scan(const char *src, ImgScan *scan);
void imgfolder_scan_free(ImgScan *scan);

/* Exact duplicate files among the scanned ones (same size, same bytes): *groups duplicate
 * groups, *extra files beyond the first of each group; `first` gets one example pair. */
ml_status imgfolder_find_duplicates(const ImgScan *scan, long *groups, long *extra, char *first, size_t cap);

/* Decodes a JPEG held in memory to RGB (grayscale and CMYK expanded/converted) and resizes the
 * whole image to size x size (area average when shrinking, bilinear when enlarging; libjpeg DCT
 * scaling first for large images). out: size*size*3 bytes, HWC. Thread-safe. On failure writes
 * a reason to err and returns non-zero. */
int jpeg_decode_resized(const uint8_t *buf, size_t len, int size, uint8_t *out, char *err, size_t errcap);

/* Decodes a PNG held in memory to RGB and resizes it like jpeg_decode_resized (same contract):
 * palette -> RGB, grayscale (+alpha) -> three equal channels, 16-bit -> 8-bit (rounded scaling),
 * alpha (RGBA, gray+alpha, tRNS) composited on black (c * a / 255, no gamma), interlaced images
 * de-interlaced; at most 65535 pixels a side and 100 M pixels. Thread-safe (png.c). */
int png_decode_resized(const uint8_t *buf, size_t len, int size, uint8_t *out, char *err, size_t errcap);

/* Picks jpeg_decode_resized or png_decode_resized from the first bytes (not the file name);
 * anything else fails with "neither a JPEG nor a PNG file". */
int image_decode_resized(const uint8_t *buf, size_t len, int size, uint8_t *out, char *err, size_t errcap);

/* Resizes an 8-bit HWC image (area average down, bilinear up, copy when equal). */
void image_resize_u8(const uint8_t *src, int sh, int sw, int c, uint8_t *dst, int dh, int dw);

typedef struct {
    const char *name, *source;
    int c, h, w; /* image shape of every appended image */
    int classes;
    char *const *class_names;
    long n_train_max, n_test_max; /* upper bounds (files listed) */
} ImportHeader;

/* Where imported images go (sessions/dataset_h5.c writes an HDF5 file). Images arrive NHWC. */
typedef struct {
    void *user;
    ml_status (*begin)(void *user, const ImportHeader *h);
    ml_status (*append)(void *user, int split /* 0 train, 1 test */, const uint8_t *nhwc, const int32_t *labels, int n);
    ml_status (*finish)(void *user, const float *mean, const float *std, const char *stats_source);
} ImportSink;

typedef struct {
    int size;    /* output side in pixels (default 64) */
    int strict;  /* an unreadable image is fatal (default: skipped and counted) */
    int block;   /* images decoded per streaming block (default 1024) */
    int threads; /* decoding threads (0: OpenMP default) */
    void (*progress)(void *user, long done, long total); /* after each block, may be NULL */
    void *progress_user;
} ImportOptions;

typedef struct {
    long n_train, n_test; /* images written */
    long unreadable;      /* JPEG/PNG files that failed to decode, skipped */
    char first_unreadable[768];
    float mean[3], std[3];
    double seconds;
} ImportReport;

void import_options_defaults(ImportOptions *o);

/* Decodes every image of a scanned folder in blocks of opt->block (OpenMP over files) and
 * streams them to the sink: train first, then test. Holds at most one block of decoded images.
 * Mean/std are computed over the train images written. */
ml_status imgfolder_import(const ImgScan *scan, const ImportOptions *opt, const ImportSink *sink, ImportReport *rep);

/* Streams an in-memory dataset (any format dataset_open reads) to the sink, NCHW -> NHWC. */
ml_status dataset_export(const Dataset *ds, const ImportSink *sink, int block);

#endif
