/* fuzz_cifar.c — libFuzzer target for the CIFAR readers: the first byte picks CIFAR-10 or -100
 * and fine/coarse, the rest is parsed as a batch file (counting first, then copying into
 * buffers sized from the count) and as a class-names file. */
#define _GNU_SOURCE

#include "core/common.h"
#include "datasets/dataset.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_driver.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    int variant = data[0] & 1 ? 100 : 10, coarse = (data[0] >> 1) & 1;
    const uint8_t *b = data + 1;
    size_t len = size - 1;
    int n = 0;
    if (cifar_parse_batch(b, len, "fuzz", variant, coarse, NULL, NULL, &n) == ML_OK) {
        uint8_t *img = malloc((size_t)n * 3072 + 1);
        int32_t *lab = malloc((size_t)n * sizeof(int32_t) + 1);
        int m = 0;
        if (img && lab && cifar_parse_batch(b, len, "fuzz", variant, coarse, img, lab, &m) == ML_OK)
            for (int i = 0; i < m; i++)
                if (lab[i] < 0 || lab[i] >= (variant == 10 ? 10 : coarse ? 20 : 100)) abort();
        free(img);
        free(lab);
    }
    char **names = NULL;
    int cnt = 0;
    int expected = (data[0] >> 2) & 1 ? 0 : 10;
    if (dataset_parse_names((const char *)b, len, "fuzz", expected, &names, &cnt) == ML_OK) {
        for (int i = 0; i < cnt; i++)
            if (!names[i] || strlen(names[i]) > 255) abort();
        dataset_names_free(names, cnt);
    }
    return 0;
}

#ifdef FUZZ_STANDALONE
static void fuzz_seeds(void (*run)(const uint8_t *, size_t)) {
    size_t len = 1 + 2 * 3074;
    uint8_t *b = calloc(1, len);
    for (int v = 0; v < 4; v++) {
        b[0] = (uint8_t)v;
        b[1] = 9;
        b[2] = 99;
        for (size_t k = 0; k <= len; k += 1 + k / 3) run(b, k);
        run(b, len);
    }
    const char names[] = "\x04"
                         "a\nb\r\n\n c \n";
    run((const uint8_t *)names, sizeof names - 1);
    free(b);
}
#endif
