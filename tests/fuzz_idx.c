/* fuzz_idx.c — libFuzzer target for the IDX reader: idx_parse on the raw bytes, and, when the
 * input is gzip, file_read_all's gunzip path through a temporary file. Seeds (FUZZ_STANDALONE):
 * a valid images file, a valid labels file and their gzip-looking prefixes. */
#define _GNU_SOURCE

#include "core/common.h"
#include "datasets/dataset.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fuzz_driver.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    int magic, n, rows, cols;
    const uint8_t *px;
    if (idx_parse(data, size, "fuzz", &magic, &n, &rows, &cols, &px) == ML_OK) {
        /* touch every byte the parser vouched for */
        size_t cnt = magic == 0x803 ? (size_t)n * rows * cols : (size_t)n;
        volatile uint8_t acc = 0;
        for (size_t i = 0; i < cnt; i++) acc ^= px[i];
        (void)acc;
    }
    if (size >= 2 && data[0] == 0x1f && data[1] == 0x8b && size < (1 << 16)) {
        char path[] = "/tmp/moelab_fuzz_idx_XXXXXX";
        int fd = mkstemp(path);
        if (fd < 0) return 0;
        ssize_t w = write(fd, data, size);
        close(fd);
        if (w == (ssize_t)size) {
            uint8_t *buf = NULL;
            size_t len = 0;
            if (file_read_all(path, &buf, &len) == ML_OK) {
                idx_parse(buf, len, path, &magic, &n, &rows, &cols, &px);
                free(buf);
            }
        }
        unlink(path);
    }
    return 0;
}

#ifdef FUZZ_STANDALONE
static void fuzz_seeds(void (*run)(const uint8_t *, size_t)) {
    uint8_t img[16 + 12] = {0, 0, 8, 3, 0, 0, 0, 3, 0, 0, 0, 2, 0, 0, 0, 2};
    for (int i = 0; i < 12; i++) img[16 + i] = (uint8_t)i;
    uint8_t lab[8 + 3] = {0, 0, 8, 1, 0, 0, 0, 3, 1, 2, 0};
    for (size_t k = 0; k <= sizeof img; k++) run(img, k);
    for (size_t k = 0; k <= sizeof lab; k++) run(lab, k);
    const uint8_t gz[12] = {0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 3, 0, 0};
    run(gz, sizeof gz);
}
#endif
