/* fuzz_h5.c — libFuzzer target for the imported-HDF5 dataset reader: the bytes are opened as an
 * in-memory HDF5 file image (core driver) by dataset_h5_load_image. A load that succeeds must
 * be self-consistent (labels in range, shapes positive). Crashes inside libhdf5 itself on
 * corrupted metadata are libhdf5's; run with -detect_leaks=0 (libhdf5 leaks on some failures).
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

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > (4u << 20))
        return 0;
    Dataset ds;
    if (dataset_h5_load_image(&ds, data, size, "fuzz") == ML_OK) {
        if (ds.c < 1 || ds.h < 1 || ds.w < 1 || ds.classes < 1 || !ds.class_names)
            abort();
        for (int i = 0; i < ds.train.n; i++)
            if (ds.train.labels[i] < 0 || ds.train.labels[i] >= ds.classes)
                abort();
        for (int i = 0; i < ds.test.n; i++)
            if (ds.test.labels[i] < 0 || ds.test.labels[i] >= ds.classes)
                abort();
        dataset_free(&ds);
    }
    return 0;
}

#ifdef FUZZ_STANDALONE
static void fuzz_seeds(void (*run)(const uint8_t *, size_t))
{
    Dataset ds;
    SyntheticOptions o;
    synthetic_defaults(&o);
    o.h = o.w = 4;
    o.classes = 3;
    o.n_train = 6;
    o.n_test = 2;
    if (synthetic_generate(&ds, &o) != ML_OK)
        abort();
    char path[] = "/tmp/moelab_fuzz_h5_XXXXXX";
    int fd = mkstemp(path);
    close(fd);
    if (dataset_h5_save(&ds, path) != ML_OK)
        abort();
    dataset_free(&ds);
    FILE *f = fopen(path, "rb");
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *b = malloc((size_t)n);
    if (fread(b, 1, (size_t)n, f) != (size_t)n)
        abort();
    fclose(f);
    unlink(path);
    run(b, (size_t)n);
    for (long k = 0; k < n; k += n / 9)
        run(b, (size_t)k);
    for (long k = 0; k < n; k += 97) {
        b[k] ^= 0x20;
        run(b, (size_t)n);
        b[k] ^= 0x20;
    }
    free(b);
}
#endif
