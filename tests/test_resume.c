/* test_resume.c — resume chooses the newest checkpoint that is whole and this run's
 * (ckpt_restore_latest): every bad newest checkpoint below is skipped with its reason named and
 * the valid older one restored, and the trainer is untouched by the ones skipped:
 *   /trainer/perm not a permutation, an all-zero RNG state, another model's newer checkpoint,
 *   the run's own checkpoint copied under another step's name (ckpt-99999.h5), 4 flipped bytes in /weights/classifier.weight, another seed's (and another
 *   session's) checkpoint copied in, a FIFO named ckpt-99999.h5 (must not hang), a directory. */
#define _GNU_SOURCE
#include "check.h"
#include "trainer_util.h"

#include <fcntl.h>
#include <hdf5.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *ID = "0123456789abcdef0123456789abcdef";

/* small_config (trainer_util.h) and what this test changes. */
static void local_config(TrainConfig *c, float width, uint64_t seed) {
    small_config(c, HEAD_MOE);
    c->model.width = width;
    c->seed = seed;
    c->route.window = 5;
}

static ml_status write_ckpt(const char *dir, Trainer *t, const char *id) {
    StateView v;
    trainer_state(t, &v);
    v.session_id = id;
    return ckpt_write(dir, &v, 0);
}

static void rm_rf(const char *d) {
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", d);
    if (system(cmd) != 0) printf("INFO could not remove %s\n", d);
}

/* The directory of a case: a valid ckpt-5.h5 of run (seed 1, id ID). */
static int setup(const char *dir, const Dataset *ds, Trainer *t) {
    rm_rf(dir);
    TrainConfig c;
    local_config(&c, 0.25f, 1);
    if (trainer_init_ds(t, &c, ds) != ML_OK) return -1;
    for (int i = 0; i < 5; i++) trainer_step(t, NULL);
    return write_ckpt(dir, t, ID) == ML_OK ? 0 : -1;
}

/* Restores into a fresh trainer; checks it got ckpt-5 and that `report` names `skipped` and `why`. */
static void expect_fallback(const char *dir, const Dataset *ds, const char *what, const char *skipped,
                            const char *why) {
    TrainConfig c;
    local_config(&c, 0.25f, 1);
    Trainer t;
    if (trainer_init_ds(&t, &c, ds) != ML_OK) {
        check(0, "%s: trainer_init", what);
        return;
    }
    StateView v;
    trainer_state(&t, &v);
    char path[1024], rep[4096];
    const ml_status st = ckpt_restore_latest(dir, &v, ID, path, sizeof path, rep, sizeof rep);
    check(st == ML_OK && strstr(path, "ckpt-5.h5") && t.step == 5, "%s: falls back to ckpt-5.h5 (%s, step %ld)", what,
          st == ML_OK ? path : ml_last_error(), t.step);
    check(strstr(rep, skipped) && strstr(rep, why), "%s: the report names %s and why: \"%s\"", what, skipped, rep);
    trainer_free(&t);
}

/* Flips 4 bytes in the middle of a dataset's stored values. */
static int flip_bytes(const char *file, const char *dset) {
    hid_t f = H5Fopen(file, H5F_ACC_RDONLY, H5P_DEFAULT);
    if (f < 0) return -1;
    hid_t d = H5Dopen2(f, dset, H5P_DEFAULT);
    const haddr_t off = d >= 0 ? H5Dget_offset(d) : HADDR_UNDEF;
    const hsize_t size = d >= 0 ? H5Dget_storage_size(d) : 0;
    if (d >= 0) H5Dclose(d);
    H5Fclose(f);
    if (off == HADDR_UNDEF || size < 8) return -1;
    const int fd = open(file, O_RDWR);
    if (fd < 0) return -1;
    unsigned char b[4];
    const off_t at = (off_t)(off + size / 2);
    int ok = pread(fd, b, 4, at) == 4;
    for (int i = 0; i < 4; i++) b[i] ^= 0x5a;
    ok = ok && pwrite(fd, b, 4, at) == 4;
    close(fd);
    return ok ? 0 : -1;
}

int main(void) {
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    char root[] = "/tmp/moelab-resume-XXXXXX";
    if (!mkdtemp(root)) {
        printf("FAIL mkdtemp\n");
        return 1;
    }
    Dataset ds;
    SyntheticOptions so;
    synthetic_defaults(&so);
    so.h = 16;
    so.w = 16;
    so.c = 3;
    so.classes = 4;
    so.n_train = 512;
    so.n_test = 64;
    so.seed = 3;
    if (synthetic_generate(&ds, &so) != ML_OK) {
        printf("FAIL synthetic: %s\n", ml_last_error());
        return 1;
    }
    char dir[512], src[700], dst[700];
    Trainer t;

    /* 1. /trainer/perm not a permutation */
    snprintf(dir, sizeof dir, "%s/perm", root);
    if (setup(dir, &ds, &t) == 0) {
        trainer_step(&t, NULL);
        t.perm[0] = t.perm[1];
        check(write_ckpt(dir, &t, ID) == ML_OK, "perm: a ckpt-6.h5 with a damaged permutation");
        trainer_free(&t);
        expect_fallback(dir, &ds, "perm", "ckpt-6.h5", "not a permutation");
    } else check(0, "perm: setup");

    /* 2. an all-zero RNG state */
    snprintf(dir, sizeof dir, "%s/rng", root);
    if (setup(dir, &ds, &t) == 0) {
        trainer_step(&t, NULL);
        memset(t.rng_noise.s, 0, sizeof t.rng_noise.s);
        write_ckpt(dir, &t, ID);
        trainer_free(&t);
        expect_fallback(dir, &ds, "rng", "ckpt-6.h5", "all zero");
    } else check(0, "rng: setup");

    /* 3. another model's checkpoint, newer (step 9, named so: the name agrees with its step) */
    snprintf(dir, sizeof dir, "%s/model", root);
    if (setup(dir, &ds, &t) == 0) {
        trainer_free(&t);
        TrainConfig c;
        local_config(&c, 0.5f, 1);
        Trainer o;
        char odir[600];
        snprintf(odir, sizeof odir, "%s/model-other", root);
        int made = trainer_init_ds(&o, &c, &ds) == ML_OK;
        for (int i = 0; made && i < 9; i++) trainer_step(&o, NULL);
        if (made && write_ckpt(odir, &o, ID) == ML_OK) {
            snprintf(src, sizeof src, "%s/ckpt-9.h5", odir);
            snprintf(dst, sizeof dst, "%s/ckpt-9.h5", dir);
            check(rename(src, dst) == 0, "model: another width's checkpoint as ckpt-9.h5");
            expect_fallback(dir, &ds, "model", "ckpt-9.h5", "different model");
        } else check(0, "model: the other trainer");
        trainer_free(&o);
    } else check(0, "model: setup");

    /* 3b. (issue 27) this run's own ckpt-5.h5 copied to ckpt-99999.h5: its name disagrees with
     * the step inside, so it is skipped (a resume "at step 5" from a file named 99999 would
     * silently drop the history after step 5) */
    snprintf(dir, sizeof dir, "%s/renamed", root);
    if (setup(dir, &ds, &t) == 0) {
        trainer_free(&t);
        char cmd[1400];
        snprintf(cmd, sizeof cmd, "cp '%s/ckpt-5.h5' '%s/ckpt-99999.h5'", dir, dir);
        check(system(cmd) == 0, "renamed: ckpt-5.h5 copied to ckpt-99999.h5");
        expect_fallback(dir, &ds, "renamed", "ckpt-99999.h5", "holds step 5, not 99999 (copied or renamed?)");
    } else check(0, "renamed: setup");

    /* 4. four flipped bytes in /weights/classifier.weight */
    snprintf(dir, sizeof dir, "%s/flip", root);
    if (setup(dir, &ds, &t) == 0) {
        trainer_step(&t, NULL);
        write_ckpt(dir, &t, ID);
        trainer_free(&t);
        snprintf(src, sizeof src, "%s/ckpt-6.h5", dir);
        check(flip_bytes(src, "/weights/classifier.weight") == 0, "flip: 4 bytes of classifier.weight flipped");
        expect_fallback(dir, &ds, "flip", "ckpt-6.h5", "checksum");
    } else check(0, "flip: setup");

    /* 5. another seed's checkpoint (another session) copied in; the same seed from another session */
    const char *cases[2][3] = {{"seed", "ffffffffffffffffffffffffffffffff", "another run"},
                               {"seed-only", NULL, "seed 2"}};
    for (int k = 0; k < 2; k++) {
        snprintf(dir, sizeof dir, "%s/%s", root, cases[k][0]);
        if (setup(dir, &ds, &t) != 0) {
            check(0, "%s: setup", cases[k][0]);
            continue;
        }
        trainer_free(&t);
        TrainConfig c;
        local_config(&c, 0.25f, 2);
        Trainer o;
        char odir[600];
        snprintf(odir, sizeof odir, "%s/%s-other", root, cases[k][0]);
        if (trainer_init_ds(&o, &c, &ds) == ML_OK) {
            for (int i = 0; i < 9; i++) trainer_step(&o, NULL);
            write_ckpt(odir, &o, cases[k][1] ? cases[k][1] : ID);
            snprintf(src, sizeof src, "%s/ckpt-9.h5", odir);
            snprintf(dst, sizeof dst, "%s/ckpt-9.h5", dir);
            check(rename(src, dst) == 0, "%s: seed 2's ckpt-9.h5 copied into the session", cases[k][0]);
            expect_fallback(dir, &ds, cases[k][0], "ckpt-9.h5", cases[k][2]);
        }
        trainer_free(&o);
    }

    /* 6. a FIFO named ckpt-99999.h5 (opening it for reading would block), and a directory */
    snprintf(dir, sizeof dir, "%s/fifo", root);
    if (setup(dir, &ds, &t) == 0) {
        trainer_free(&t);
        snprintf(dst, sizeof dst, "%s/ckpt-99999.h5", dir);
        check(mkfifo(dst, 0600) == 0, "fifo: mkfifo ckpt-99999.h5");
        snprintf(dst, sizeof dst, "%s/ckpt-88888.h5", dir);
        check(mkdir(dst, 0700) == 0, "fifo: a directory named ckpt-88888.h5");
        alarm(60); /* a hang fails the test instead of blocking CI */
        expect_fallback(dir, &ds, "fifo", "ckpt-99999.h5", "regular file");
        alarm(0);
    } else check(0, "fifo: setup");

    /* 7. nothing valid: a clear error, the trainer untouched */
    snprintf(dir, sizeof dir, "%s/none", root);
    if (setup(dir, &ds, &t) == 0) {
        trainer_free(&t);
        snprintf(src, sizeof src, "%s/ckpt-5.h5", dir);
        flip_bytes(src, "/weights/classifier.weight");
        TrainConfig c;
        local_config(&c, 0.25f, 1);
        Trainer f;
        if (trainer_init_ds(&f, &c, &ds) == ML_OK) {
            float w0 = f.model.param[0];
            StateView v;
            trainer_state(&f, &v);
            char path[1024], rep[4096];
            const ml_status st = ckpt_restore_latest(dir, &v, ID, path, sizeof path, rep, sizeof rep);
            check(st != ML_OK && strstr(ml_last_error(), "none of the 1 checkpoints") && f.step == 0 &&
                      f.model.param[0] == w0,
                  "none: refused with \"%s\" (%s), the trainer untouched", ml_last_error(), rep);
        }
        trainer_free(&f);
    }

    dataset_free(&ds);
    rm_rf(root);
    printf("%d checks, %d failed\n", n_checks, n_failed);
    return n_failed ? 1 : 0;
}
