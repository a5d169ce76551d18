/* fuzz_driver.h — a standalone main() for the fuzz_*.c targets when they are built without
 * libFuzzer (gcc, no clang runtime): `fuzz_x FILE...` runs LLVMFuzzerTestOneInput once per file,
 * `fuzz_x` alone runs the built-in seed inputs (and writes them to $FUZZ_SEED_DIR when set, a
 * seed corpus for the libFuzzer build). Compiled only with -DFUZZ_STANDALONE. */
#ifndef ML_FUZZ_DRIVER_H
#define ML_FUZZ_DRIVER_H

#ifdef FUZZ_STANDALONE
#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
static void fuzz_seeds(void (*run)(const uint8_t *, size_t));

/* Runs one input; with FUZZ_SEED_DIR set, also saves it there (a libFuzzer seed corpus). */
static void fuzz_run_one(const uint8_t *d, size_t n) {
    static int k;
    const char *dir = getenv("FUZZ_SEED_DIR");
    if (dir) {
        char p[4096];
        snprintf(p, sizeof p, "%s/seed-%04d", dir, k++);
        FILE *f = fopen(p, "wb");
        if (f) {
            if (n) fwrite(d, 1, n, f);
            fclose(f);
        }
    }
    LLVMFuzzerTestOneInput(d, n);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fuzz_seeds(fuzz_run_one);
        printf("seed inputs ran clean\n");
        return 0;
    }
    for (int i = 1; i < argc; i++) {
        FILE *f = fopen(argv[i], "rb");
        if (!f) {
            fprintf(stderr, "%s: cannot open\n", argv[i]);
            return 1;
        }
        fseek(f, 0, SEEK_END);
        long n = ftell(f);
        fseek(f, 0, SEEK_SET);
        uint8_t *b = malloc((size_t)n + 1);
        size_t got = fread(b, 1, (size_t)n, f);
        fclose(f);
        LLVMFuzzerTestOneInput(b, got);
        free(b);
    }
    printf("%d inputs ran clean\n", argc - 1);
    return 0;
}
#endif

#endif
