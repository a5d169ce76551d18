/* test_drops.c — drops per class (issue 29): with a capacity that must drop (cf 0.3), every
 * evaluation's drop_class_expert (the head's and a backbone MoE layer's) holds, per expert, the
 * pairs the step records say capacity dropped since the epoch's start (sum over the steps of
 * demand - kept, log_every 1), and its total equals the sum of drop_frac * B * k; the counts start
 * again at each epoch; a mid-epoch evaluation holds the epoch so far; a checkpoint restores them. */
#include "trainer_util.h"
#include "datasets/dataset.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

#define NL 2

int main(void) {
    Dataset ds;
    SyntheticOptions so;
    synthetic_defaults(&so);
    so.h = 16;
    so.w = 16;
    so.c = 3;
    so.classes = 4;
    so.n_train = 256;
    so.n_test = 64;
    if (synthetic_generate(&ds, &so) != ML_OK) {
        printf("synthetic: %s\n", ml_last_error());
        return 1;
    }
    TrainConfig c;
    train_config_defaults(&c);
    c.model.width = 0.25f;
    c.model.batch = 32;
    c.model.head.kind = HEAD_MOE;
    c.model.head.E = 4;
    c.model.head.k = 2;
    c.model.head.h = 16;
    c.model.head.cf = 0.3f; /* C = ceil(0.3 * 2 * 32 / 4) = 5 slots for 16 pairs per expert: drops */
    c.model.moe_n = 1;
    c.model.moe_after[0] = 2;
    c.epochs = 2;
    c.log_every = 1;
    c.threads = 2;
    c.augment = 0;
    Trainer t;
    if (trainer_init_ds(&t, &c, &ds) != ML_OK) {
        printf("trainer_init: %s\n", ml_last_error());
        return 1;
    }
    const int nl = trainer_nlayers(&t), K = t.src.classes;
    check(nl == NL, "two routed layers (moe2, head): %d", nl);
    long want[NL][MOE_MAX_EXPERTS];
    double want_tot[NL];
    memset(want, 0, sizeof want);
    memset(want_tot, 0, sizeof want_tot);
    int *saved = malloc(sizeof(int) * NL * K * MOE_MAX_EXPERTS);
    for (int epoch = 0; epoch < 2; epoch++) {
        memset(want, 0, sizeof want);
        memset(want_tot, 0, sizeof want_tot);
        for (long s = 0; s < t.steps_per_epoch; s++) {
            StepRecord rec;
            if (trainer_step(&t, &rec) != ML_OK) {
                check(0, "trainer_step: %s", ml_last_error());
                return 1;
            }
            for (int l = 0; l < nl; l++) {
                const MoeStepStats *m = &rec.layer[l].moe;
                for (int e = 0; e < m->E; e++) want[l][e] += m->demand[e] - m->kept[e];
                want_tot[l] += m->drop_frac * m->B * m->k;
            }
            if (epoch == 1 && s == t.steps_per_epoch / 2 - 1) { /* a mid-epoch evaluation: the epoch so far */
                EvalRecord er;
                trainer_eval_record(&t, &er, 0.0);
                int ok = 1;
                for (int l = 0; l < nl; l++) {
                    const EvalLayer *el = &er.layer[l];
                    for (int e = 0; e < el->experts; e++) {
                        long n = 0;
                        for (int k = 0; k < K; k++) n += el->drop_class_expert[k * el->experts + e];
                        ok &= n == want[l][e];
                    }
                }
                check(ok, "epoch 2, mid-epoch evaluation at step %ld: the counts of the epoch so far", t.step);
                /* a checkpoint here restores them */
                char dir[] = "/tmp/moelab_test_drops_XXXXXX";
                if (mkdtemp(dir)) {
                    ckpt_write_t(dir, &t, 0);
                    for (int l = 0; l < nl; l++)
                        memcpy(saved + l * K * MOE_MAX_EXPERTS, er.layer[l].drop_class_expert,
                               sizeof(int) * K * er.layer[l].experts);
                    Trainer u;
                    char path[128];
                    snprintf(path, sizeof path, "%s/ckpt-%ld.h5", dir, t.step);
                    int same = trainer_init_ds(&u, &c, &ds) == ML_OK && ckpt_read_t(path, &u) == ML_OK;
                    EvalRecord eu;
                    if (same) trainer_eval_record(&u, &eu, 0.0);
                    for (int l = 0; same && l < nl; l++)
                        same = !memcmp(eu.layer[l].drop_class_expert, saved + l * K * MOE_MAX_EXPERTS,
                                       sizeof(int) * K * eu.layer[l].experts);
                    check(same, "a checkpoint restores the drops per class of every layer");
                    trainer_free(&u);
                    char cmd[160];
                    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
                    if (system(cmd) != 0) printf("note: could not remove %s\n", dir);
                }
            }
        }
        EvalRecord er;
        trainer_eval_record(&t, &er, 0.0);
        check(er.nlayers == NL && er.moe.drop_class_expert == er.layer[NL - 1].drop_class_expert,
              "epoch %d: the top level's drops are the head's", epoch + 1);
        for (int l = 0; l < nl; l++) {
            const EvalLayer *el = &er.layer[l];
            long tot = 0, per_e[MOE_MAX_EXPERTS] = {0};
            int classes_hit = 0;
            for (int k = 0; k < K; k++) {
                long ck = 0;
                for (int e = 0; e < el->experts; e++) {
                    per_e[e] += el->drop_class_expert[k * el->experts + e];
                    ck += el->drop_class_expert[k * el->experts + e];
                }
                tot += ck;
                classes_hit += ck > 0;
            }
            int ok = tot > 0;
            for (int e = 0; e < el->experts; e++) ok &= per_e[e] == want[l][e];
            check(ok && fabs((double)tot - want_tot[l]) < 0.5,
                  "epoch %d, layer %d: %ld pairs dropped (%d of %d classes), per expert equal to the step records' "
                  "demand - kept, total = sum of drop_frac B k (%.0f)",
                  epoch + 1, l, tot, classes_hit, K, want_tot[l]);
        }
    }
    free(saved);
    trainer_free(&t);
    dataset_free(&ds);
    printf("%d checks, %d failed\n", n_checks, n_failed);
    return n_failed ? 1 : 0;
}
