/* trainer_util.h — test shorthands over the trainer's interfaces: a Trainer on a Dataset (through
 * its BatchSource), checkpoints of a Trainer (through its state table), a SessionInfo's run
 * description. */
#ifndef ML_TESTS_TRAINER_UTIL_H
#define ML_TESTS_TRAINER_UTIL_H

#include "core/trainer.h"
#include "datasets/dataset.h"
#include "sessions/session.h"

static inline ml_status trainer_init_ds(Trainer *t, const TrainConfig *cfg, const Dataset *ds) {
    BatchSource src;
    dataset_batch_source(ds, &src);
    return trainer_init(t, cfg, &src);
}

static inline ml_status ckpt_write_t(const char *dir, Trainer *t, int keep) {
    StateView v;
    trainer_state(t, &v);
    return ckpt_write(dir, &v, keep);
}

static inline ml_status ckpt_read_t(const char *path, Trainer *t) {
    StateView v;
    trainer_state(t, &v);
    return ckpt_read(path, &v);
}

/* The small model the trainer and session tests start from: width 0.25 (c0 = 8, d = 64), batch
 * 32, `head` with E = 4, k = 2, h = 16, 2 epochs on 2 threads, the other fields at their defaults.
 * Each test's local_config changes what it needs after it. */
static inline void small_config(TrainConfig *c, HeadKind head) {
    train_config_defaults(c);
    c->model.width = 0.25f;
    c->model.batch = 32;
    c->model.head.kind = head;
    c->model.head.E = 4;
    c->model.head.k = 2;
    c->model.head.h = 16;
    c->epochs = 2;
    c->threads = 2;
}

/* The run description of t, in one of 8 rotating static slots (valid while a few are in use). */
static inline const RunRecord *test_run(const Trainer *t) {
    static RunRecord slot[8];
    static int next;
    RunRecord *r = &slot[next++ % 8];
    trainer_describe(t, r);
    return r;
}

#endif
