/* test_train.c — the training loop end to end on small synthetic data: it learns, it is
 * bit-for-bit reproducible from a seed, the optimisers and schedules follow their formulas, and
 * a diverging run stops with a clear error instead of producing NaN weights. */
#include "trainer_util.h"
#include "datasets/dataset.h"
#include "gradcheck.h"

#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

/* small_config (trainer_util.h) and what this test changes. */
static void local_config(TrainConfig *c, HeadKind head) {
    small_config(c, head);
    c->model.head.h = 32;
    c->epochs = 3;
    c->lr.base = 0.05f;
    c->log_every = 5;
    c->augment = 0; /* the learning thresholds below are for plain batches */
}

static double run(const Dataset *ds, const TrainConfig *cfg, float **params_out, long *n_out, double *acc_out) {
    Trainer t;
    if (trainer_init_ds(&t, cfg, ds) != ML_OK) {
        printf("trainer_init: %s\n", ml_last_error());
        exit(1);
    }
    const RunEnd end = trainer_run(&t, NULL);
    CHECK(end == RUN_FINISHED, "trainer_run (%s head) finishes", moe_head_name(cfg->model.head.kind));
    double loss, acc;
    trainer_evaluate(&t, &loss, &acc);
    *params_out = malloc(sizeof(float) * t.model.n_param);
    memcpy(*params_out, t.model.param, sizeof(float) * t.model.n_param);
    *n_out = t.model.n_param;
    *acc_out = acc;
    trainer_free(&t);
    return loss;
}

static void test_reproducible_and_learns(const Dataset *ds, HeadKind head, double min_acc) {
    TrainConfig cfg;
    local_config(&cfg, head);
    float *p1, *p2, *p3;
    long n1, n2, n3;
    double a1, a2, a3;
    double l1 = run(ds, &cfg, &p1, &n1, &a1);
    double l2 = run(ds, &cfg, &p2, &n2, &a2);
    CHECK(n1 == n2 && memcmp(p1, p2, sizeof(float) * n1) == 0 && l1 == l2,
          "%s: same seed, same threads -> bit-identical weights and loss (%.6f)", moe_head_name(head), l1);
    CHECK(a1 >= min_acc, "%s: learns the synthetic task: test accuracy %.1f%% >= %.0f%%", moe_head_name(head), 100 * a1,
          100 * min_acc);
    cfg.seed = 2;
    run(ds, &cfg, &p3, &n3, &a3);
    CHECK(memcmp(p1, p3, sizeof(float) * n1) != 0, "%s: a different seed gives different weights", moe_head_name(head));
    free(p1);
    free(p2);
    free(p3);
}

static void test_augmented_reproducible(const Dataset *ds) {
    TrainConfig cfg;
    local_config(&cfg, HEAD_MOE);
    cfg.augment = 1;
    cfg.epochs = 1;
    float *p1, *p2, *p3;
    long n1, n2, n3;
    double a1, a2, a3;
    run(ds, &cfg, &p1, &n1, &a1);
    run(ds, &cfg, &p2, &n2, &a2);
    cfg.augment = 0;
    run(ds, &cfg, &p3, &n3, &a3);
    CHECK(memcmp(p1, p2, sizeof(float) * n1) == 0, "augmented runs are bit-identical from the same seed");
    CHECK(memcmp(p1, p3, sizeof(float) * n1) != 0,
          "augmentation changes the batches (weights differ from an unaugmented run)");
    free(p1);
    free(p2);
    free(p3);
}

static void test_diverging_run(const Dataset *ds) {
    TrainConfig cfg;
    local_config(&cfg, HEAD_DENSE);
    cfg.lr.base = 1e9f;
    cfg.lr.kind = LR_CONST;
    cfg.opt.momentum = 0.0f;
    Trainer t;
    trainer_init_ds(&t, &cfg, ds);
    float *before = malloc(sizeof(float) * t.model.n_param);
    ml_status st = ML_OK;
    for (int i = 0; i < 100 && st == ML_OK; i++) {
        memcpy(before, t.model.param, sizeof(float) * t.model.n_param);
        st = trainer_step(&t, NULL);
    }
    CHECK(st == ML_ERR_NUMERIC && strstr(ml_last_error(), "loss is"), "lr 1e9 stops with ML_ERR_NUMERIC: \"%s\"",
          ml_last_error());
    CHECK(memcmp(before, t.model.param, sizeof(float) * t.model.n_param) == 0,
          "the failing step left the weights exactly as they were before it (no update applied)");
    free(before);
    trainer_free(&t);
    trainer_init_ds(&t, &cfg, ds);
    const RunEnd end = trainer_run(&t, NULL);
    CHECK(end == RUN_FAILED && strstr(ml_last_error(), "loss is"),
          "trainer_run fails on the same run with the numeric error: \"%s\"", ml_last_error());
    trainer_free(&t);
}

/* Issue 13 item 10: hidden widths (and router sizes) whose tensors are not a multiple of 16 floats
 * (--hidden 3: E*h = 12) aborted every MoE head in model_init (the MoE parameter layout did not
 * pad its tensors as the model's tensor table does). Every head trains a few steps with h = 3,
 * and with d = 8, E = 3 (router 24 floats). */
static void test_odd_hidden(const Dataset *ds) {
    const HeadKind heads[4] = {HEAD_DENSE, HEAD_MOE, HEAD_SOFTMOE_BATCH, HEAD_SOFTMOE_SAMPLE};
    const struct {
        float width;
        int E, h;
    } shapes[3] = {{0.25f, 4, 3}, {0.25f, 4, 15}, {1.0f / 32, 3, 3}};
    for (int s = 0; s < 3; s++)
        for (int i = 0; i < 4; i++) {
            TrainConfig cfg;
            local_config(&cfg, heads[i]);
            cfg.model.width = shapes[s].width;
            cfg.model.head.E = shapes[s].E;
            cfg.model.head.h = shapes[s].h;
            Trainer t;
            ml_status st = trainer_init_ds(&t, &cfg, ds);
            CHECK(st == ML_OK, "%s --hidden %d --experts %d (d %d): trainer_init OK%s%s", moe_head_name(heads[i]),
                  shapes[s].h, shapes[s].E, 8 * (int)(32 * shapes[s].width), st == ML_OK ? "" : ": ",
                  st == ML_OK ? "" : ml_last_error());
            if (st != ML_OK) continue;
            float *before = malloc(sizeof(float) * t.model.n_param);
            memcpy(before, t.model.param, sizeof(float) * t.model.n_param);
            for (int k = 0; k < 5 && st == ML_OK; k++) st = trainer_step(&t, NULL);
            int finite = 1, moved = 0;
            for (long j = 0; j < t.model.n_param; j++) {
                finite &= isfinite(t.model.param[j]) != 0;
                moved += t.model.param[j] != before[j];
            }
            /* every head tensor (the MoE ones sit where moe_params_point carves them) is updated */
            int tensors_moved = 1;
            for (int j = 0; j < t.model.nparams; j++) {
                const TensorInfo *ti = &t.model.params[j];
                if (strncmp(ti->name, "head.", 5) != 0) continue;
                int any = 0;
                for (long q = 0; q < ti->n && !any; q++) any = t.model.param[ti->off + q] != before[ti->off + q];
                tensors_moved &= any;
            }
            double loss, acc;
            trainer_evaluate(&t, &loss, &acc);
            CHECK(st == ML_OK && finite && moved > 0 && tensors_moved && isfinite(loss),
                  "%s --hidden %d --experts %d: 5 steps train (every head tensor updated, eval loss %.4f)",
                  moe_head_name(heads[i]), shapes[s].h, shapes[s].E, loss);
            free(before);
            trainer_free(&t);
        }
}

static void test_optimisers(void) {
    /* one tensor, hand-computed updates */
    Model m;
    memset(&m, 0, sizeof m);
    m.nparams = 1;
    m.params[0].n = 2;
    m.params[0].off = 0;
    m.params[0].decay = 1;
    float w[2] = {1.0f, -2.0f}, g[2] = {0.5f, 0.25f};
    m.param = w;
    m.grad = g;
    m.n_param = 2;
    OptConfig oc;
    optim_config_defaults(&oc, OPT_SGD);
    oc.wd = 0.1f;
    Optimizer o;
    optim_init(&o, &oc, 2);
    optim_step(&o, &m, 0.1f); /* v = g; w = w (1 - lr wd) - lr v */
    CHECK(g[0] == 0.0f && g[1] == 0.0f, "optim_step zeroes the gradients it consumed");
    {   /* a gradient the backward writes whole (TensorInfo.overwrite) is used the same way, not zeroed */
        Model m2 = m;
        float w2[2] = {1.0f, -2.0f}, g2[2] = {0.5f, 0.25f};
        m2.param = w2;
        m2.grad = g2;
        m2.params[0].overwrite = 1;
        Optimizer o2;
        optim_init(&o2, &oc, 2);
        optim_step(&o2, &m2, 0.1f);
        CHECK(g2[0] == 0.5f && g2[1] == 0.25f && w2[0] == w[0] && w2[1] == w[1],
              "optim_step leaves an overwrite gradient as it is and updates its weights the same way");
        optim_free(&o2);
    }
    g[0] = 0.5f;
    g[1] = 0.25f;
    optim_step(&o, &m, 0.1f); /* v = 0.9 g + g */
    double w0 = 1.0;
    w0 = w0 * (1 - 0.01) - 0.1 * 0.5;
    w0 = w0 * (1 - 0.01) - 0.1 * (0.9 * 0.5 + 0.5);
    CHECK(fabs(w[0] - w0) < 1e-6, "SGD momentum + decoupled weight decay: %.7f == %.7f", w[0], w0);
    optim_free(&o);
    oc.nesterov = 1;
    w[0] = 1.0f;
    g[0] = 0.5f;
    g[1] = 0.25f;
    optim_init(&o, &oc, 2);
    optim_step(&o, &m, 0.1f); /* v = g; step = g + 0.9 v */
    w0 = 1.0 * (1 - 0.01) - 0.1 * (0.5 + 0.9 * 0.5);
    CHECK(fabs(w[0] - w0) < 1e-6, "SGD Nesterov: %.7f == %.7f", w[0], w0);
    optim_free(&o);
    optim_config_defaults(&oc, OPT_ADAMW);
    oc.wd = 0.1f;
    w[0] = 1.0f;
    g[0] = 0.5f;
    g[1] = 0.25f;
    optim_init(&o, &oc, 2);
    optim_step(&o, &m, 0.01f); /* first AdamW step moves by lr * sign(g) (bias-corrected) plus decay */
    w0 = 1.0 * (1 - 0.001) - 0.01 * 0.5 / (0.5 + 1e-8);
    CHECK(fabs(w[0] - w0) < 1e-6, "AdamW first step: %.7f == %.7f", w[0], w0);
    optim_free(&o);
}

static void test_lr_schedules(void) {
    LrSchedule s = {
        .kind = LR_COSINE, .base = 1.0f, .warmup = 10, .total = 110, .gamma = 0.1f, .milestones = {0.5f, 0.75f}};
    CHECK(fabs(lr_value(&s, 0) - 0.1f) < 1e-6 && fabs(lr_value(&s, 9) - 1.0f) < 1e-6,
          "warm-up is linear: %.3f at step 0, %.3f at step 9", lr_value(&s, 0), lr_value(&s, 9));
    CHECK(fabs(lr_value(&s, 10) - 1.0f) < 1e-6 && fabs(lr_value(&s, 60) - 0.5f) < 1e-6 && lr_value(&s, 110) < 1e-6,
          "cosine: 1 after warm-up, 0.5 at the midpoint (%.4f), 0 at the end", lr_value(&s, 60));
    s.kind = LR_STEP;
    CHECK(fabs(lr_value(&s, 59) - 1.0f) < 1e-6 && fabs(lr_value(&s, 60) - 0.1f) < 1e-6 &&
              fabs(lr_value(&s, 85) - 0.01f) < 1e-6,
          "step: x0.1 at 50%% and 75%% of the post-warm-up steps");
    s.kind = LR_CONST;
    CHECK(lr_value(&s, 50) == 1.0f, "const stays at the base rate");
}

/* Every Trainer field is either resumable state (some row of trainer_state points into it, or into
 * the buffer it points to) or transient, with the reason. The fields must tile the struct: a field
 * added to Trainer without a line here leaves a gap (or an overrun) and this test fails. */
typedef struct {
    const char *name;
    size_t off, size, align;
    int state;       /* 1: checkpointed through the state table (or the model / optimiser tables) */
    const char *why; /* transient: why a resumed run does not need it */
} FieldRow;
#define F(f, st, why) \
    { #f, offsetof(Trainer, f), sizeof(((Trainer *)0)->f), __alignof__(((Trainer *)0)->f), st, why }
static const FieldRow trainer_fields[] = {
    F(cfg, 1, "launch configuration: from the stored command line; cfg.lr is a state row"),
    F(src, 0, "the data: re-opened from the dataset spec"),
    F(model, 1, "weights and buffers: the model's tensor tables; routing knobs and bias: state rows"),
    F(opt, 1, "moments: written with the weights' names; t: a state row; cfg from the command line"),
    F(tau, 1, NULL),
    F(rng_init, 1, NULL),
    F(rng_data, 1, NULL),
    F(rng_noise, 1, NULL),
    F(rng_aug, 1, NULL),
    F(perm, 1, NULL),
    F(labels, 0, "scratch of one batch"),
    F(eval_idx, 0, "scratch of one evaluation batch"),
    F(drop_ce, 1, NULL),
    F(step, 1, NULL),
    F(epoch, 1, NULL),
    F(steps_per_epoch, 1, NULL),
    F(total_steps, 1, NULL),
    F(pos, 1, NULL),
    F(ep, 1, "the epoch's running sums: state rows"),
    F(coll, 1, "windows, flags and first steps are state rows; cfg from the command line; E from the model"),
    F(ev, 0, "output of the last evaluation (recomputed by the next); tsne_n derived from the configuration"),
    F(clock, 0, "wall clock and throughput bookkeeping (reset on restore)"),
    F(lr_override, 1, NULL),
    F(ckpt_step, 0, "set to the restored step by the restore"),
    F(nbl, 0, "derived from the model"),
    F(rule, 1, "the on-collapse rule: pause, done and text are state rows"),
    F(state, 0, "what the loop publishes (rebuilt from step/epoch)"),
    F(bl, 1,
      "per backbone layer: collapse state, epoch sums and plan are /backbone/moe<s>/ rows; mi, buffers and "
      "fired transient"),
    F(dist, 0,
      "the run's processes (set by trainer_init_dist); rank_rngs and rank_bufs are the rows /dist/rank_rngs and "
      "/dist/rank_buffers in a run of several ranks; pack is a step's scratch"),
};
#undef F

static int points_into(const void *p, const void *base, size_t n) {
    return (const char *)p >= (const char *)base && (const char *)p < (const char *)base + n;
}

static int cmp_field(const void *a, const void *b) {
    const FieldRow *x = a, *y = b;
    return (x->off > y->off) - (x->off < y->off);
}

static void test_state_table(const Dataset *ds) {
    const int nf = (int)(sizeof trainer_fields / sizeof *trainer_fields);
    FieldRow rows[64];
    memcpy(rows, trainer_fields, sizeof trainer_fields);
    qsort(rows, (size_t)nf, sizeof *rows, cmp_field);
    /* Trainer has no padding (trainer.h orders its fields for that), so the fields of this table
     * must tile it exactly: a field added anywhere, even where padding was, leaves a gap here or
     * changes sizeof(Trainer) */
    size_t end = 0;
    int tiled = 1;
    for (int i = 0; i < nf; i++) {
        const FieldRow *f = &rows[i];
        if (f->off != end) {
            tiled = 0;
            printf("INFO field %s at %zu, the previous field ends at %zu: a field in between is missing from this "
                   "table (or padding crept in)\n",
                   f->name, f->off, end);
        }
        end = f->off + f->size;
        CHECK(f->state || f->why, "field %s: state or transient with a reason", f->name);
    }
    CHECK(tiled && sizeof(Trainer) == end,
          "every Trainer field is in the checkpoint coverage table (%d fields tile %zu of %zu bytes): add a state row "
          "(trainer_state) or a transient line here for a new field",
          nf, end, sizeof(Trainer));
    for (int head = 0; head < 2; head++) {
        TrainConfig cfg;
        local_config(&cfg, head ? HEAD_MOE : HEAD_DENSE);
        Trainer t;
        if (trainer_init_ds(&t, &cfg, ds) != ML_OK) {
            CHECK(0, "trainer_init: %s", ml_last_error());
            return;
        }
        StateView v;
        trainer_state(&t, &v);
        int covered = 1;
        for (int i = 0; i < nf; i++) {
            const FieldRow *f = &trainer_fields[i];
            if (!f->state || !strcmp(f->name, "model") || !strcmp(f->name, "opt")) continue;
            if ((!strcmp(f->name, "coll") || !strcmp(f->name, "drop_ce")) && !head)
                continue; /* dense heads have no routing window, no drops */
            if ((!strcmp(f->name, "bl") || !strcmp(f->name, "ep_rho_head")) && t.nbl == 0)
                continue; /* no backbone MoE layer in this configuration */
            const char *base = (const char *)&t + f->off;
            int hit = 0;
            for (int k = 0; k < v.nvars && !hit; k++) {
                hit = points_into(v.vars[k].ptr, base, f->size);
                if (!strcmp(f->name, "perm")) hit = v.vars[k].ptr == t.perm;
                if (!strcmp(f->name, "drop_ce")) hit = v.vars[k].ptr == t.drop_ce;
            }
            if (!hit) {
                covered = 0;
                printf("INFO state field %s has no state row\n", f->name);
            }
        }
        int unique = 1;
        for (int a = 0; a < v.nvars; a++)
            for (int b = a + 1; b < v.nvars; b++)
                if (!strcmp(v.vars[a].path, v.vars[b].path) || v.vars[a].ptr == v.vars[b].ptr) unique = 0;
        CHECK(covered && unique, "%s: every state field has a state row; %d rows, unique paths and pointers",
              head ? "moe" : "dense", v.nvars);
        CHECK(v.opt_m == t.opt.m && v.model == &t.model && (head == 0 || state_find(&v, "/moe/cf") >= 0),
              "%s: the state view covers the model, the optimiser moments and (MoE) the routing knobs",
              head ? "moe" : "dense");
        trainer_free(&t);
    }
}

/* The headless routing line names the clean-router and evaluation views and shows the epoch
 * means of tau, L_aux and the clean share, never one logged step's (an epoch with fewer steps
 * than --log-every has no logged step at all); a collapse names its views. */
static void test_routing_line(void) {
    EvalRecord er;
    memset(&er, 0, sizeof er);
    er.has_moe = 1;
    er.moe.experts = 8;
    er.moe.window_load_entropy = 0.987;
    er.moe.window_first_share = 0.16;
    er.moe.test_first_share = 0.968;
    er.moe.test_dead_first = 7;
    er.moe.epoch_clean_first_share = 0.97;
    er.moe.epoch_tau = 0.75;
    er.moe.epoch_l_aux = 1.25;
    StepRecord last;
    memset(&last, 0, sizeof last);
    last.tau = 0.1f;
    last.moe.l_aux = 9.0;
    last.moe.clean_first_share = 0.11;
    char buf[512];
    eval_routing_line(&er, &last, buf, sizeof buf);
    CHECK(strstr(buf, "top1 share 0.16  clean top1 share 0.97  test top1 share 0.97  test dead 7/8  ") != NULL,
          "routing line: \"%s\"", buf);
    CHECK(strstr(buf, "tau 0.75  aux 1.2500  collapse no") != NULL,
          "routing line: epoch means, not the last step: \"%s\"", buf);
    eval_routing_line(&er, NULL, buf, sizeof buf);
    CHECK(strstr(buf, "clean top1 share 0.97  test top1 share 0.97") && strstr(buf, "tau 0.75"),
          "routing line without a logged step: \"%s\"", buf);
    er.collapsed = 1;
    er.collapse_views = CVIEW_BIT_CLEAN | CVIEW_BIT_EVAL;
    er.collapse_reason = COLLAPSE_SHARE;
    eval_routing_line(&er, NULL, buf, sizeof buf);
    CHECK(strstr(buf, "collapse YES (clean router+evaluation: share)") != NULL, "routing line names the views: \"%s\"",
          buf);
}

int main(void) {
    Dataset ds;
    SyntheticOptions so;
    synthetic_defaults(&so);
    so.h = 16;
    so.w = 16;
    so.c = 3;
    so.classes = 4;
    so.n_train = 1024;
    so.n_test = 256;
    if (synthetic_generate(&ds, &so) != ML_OK) {
        printf("synthetic: %s\n", ml_last_error());
        return 1;
    }
    test_optimisers();
    test_lr_schedules();
    test_odd_hidden(&ds);
    test_reproducible_and_learns(&ds, HEAD_DENSE, 0.7);
    test_reproducible_and_learns(&ds, HEAD_MOE, 0.7);
    if (!getenv("MOELAB_QUICK")) /* the sanitizer build in CI skips the third head */
        test_reproducible_and_learns(&ds, HEAD_SOFTMOE_SAMPLE, 0.7);
    test_augmented_reproducible(&ds);
    test_diverging_run(&ds);
    test_state_table(&ds);
    test_routing_line();
    dataset_free(&ds);
    printf("%d failure(s)\n", n_failed);
    return n_failed ? 1 : 0;
}
