/* fuzz_h5.c — libFuzzer target for the imported-HDF5 dataset reader: the bytes are opened as an
 * in-memory HDF5 file image (core driver) by dataset_h5_load_image, the protected loader that
 * `moelab train --dataset FILE.h5` uses: a forked child validates the image first (every
 * metadata access of the load), and a crash of libhdf5 there (the children inherit ASan)
 * becomes an error, so this process only loads images the child read cleanly. One fork per
 * execution: ~20 exec/s instead of ~300 in-process (tests/README.md, Fuzzing), but the protected path is
 * what is fuzzed, and the child's coverage is copied back (below).
 * A load that succeeds must be self-consistent (labels in range, shapes positive); a load that
 * fails must leave the dataset empty with a one-line message naming the input ("fuzz").
 * FUZZ_H5_SHOW_ERRORS=1 prints that message (to see what became of a crash input).
 * Run with -detect_leaks=0 (libhdf5 1.10 leaks internal objects on some malformed files).
 * Seeds (FUZZ_STANDALONE): a small valid dataset file written by dataset_h5_save and
 * truncated or bit-flipped copies of it. */
#define _GNU_SOURCE

#include "core/common.h"
#include "datasets/dataset.h"
#include "sessions/dataset_h5.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fuzz_driver.h"

#include "fuzz_childcov.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
NO_COV int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > (4u << 20)) return 0;
    Dataset ds;
    cov_begin();
    ml_status st = dataset_h5_load_image(&ds, data, size, "fuzz");
    cov_merge();
    if (st == ML_OK) {
        if (ds.c < 1 || ds.h < 1 || ds.w < 1 || ds.classes < 1 || !ds.class_names) abort();
        for (int i = 0; i < ds.train.n; i++)
            if (ds.train.labels[i] < 0 || ds.train.labels[i] >= ds.classes) abort();
        for (int i = 0; i < ds.test.n; i++)
            if (ds.test.labels[i] < 0 || ds.test.labels[i] >= ds.classes) abort();
        dataset_free(&ds);
    } else {
        const char *e = ml_last_error();
        if (strncmp(e, "fuzz", 4) != 0 || strchr(e, '\n') || ds.train.images || ds.test.images || ds.class_names ||
            ds.train.n || ds.classes)
            abort();
        if (getenv("FUZZ_H5_SHOW_ERRORS")) fprintf(stderr, "fuzz_h5: %s\n", e);
    }
    return 0;
}

#ifdef FUZZ_STANDALONE
static void fuzz_seeds(void (*run)(const uint8_t *, size_t)) {
    Dataset ds;
    SyntheticOptions o;
    synthetic_defaults(&o);
    o.h = o.w = 4;
    o.classes = 3;
    o.n_train = 6;
    o.n_test = 2;
    if (synthetic_generate(&ds, &o) != ML_OK) abort();
    char path[] = "/tmp/moelab_fuzz_h5_XXXXXX";
    int fd = mkstemp(path);
    close(fd);
    if (dataset_h5_save(&ds, path) != ML_OK) abort();
    dataset_free(&ds);
    FILE *f = fopen(path, "rb");
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *b = malloc((size_t)n);
    if (fread(b, 1, (size_t)n, f) != (size_t)n) abort();
    fclose(f);
    unlink(path);
    run(b, (size_t)n);
    for (long k = 0; k < n; k += n / 9) run(b, (size_t)k);
    for (long k = 0; k < n; k += 97) {
        b[k] ^= 0x20;
        run(b, (size_t)n);
        b[k] ^= 0x20;
    }
    free(b);
}
#endif
