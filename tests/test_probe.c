/* test_probe.c — the batch-composition probe (core/bprobe.c): a model trained briefly on
 * synthetic data, its test set evaluated in file order, shuffled, sorted by class and in
 * single-class batches. Heads that route per sample (moe with its dropless evaluation, dense,
 * softmoe-sample, and backbone MoE layers) give exactly the same predictions, first choices and
 * accuracy in every make-up, and logits equal up to float rounding (the SGEMMs round a sample's
 * column differently by its position in the batch: a few ulp, printed; not bit for bit);
 * softmoe-batch (dispatch over the batch axis) changes 100x beyond the rounding bound, and the
 * size of its change is printed. The file-order evaluation equals trainer_evaluate's. */
#include "trainer_util.h"
#include "core/bprobe.h"
#include "datasets/dataset.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

static void probe_one(const Dataset *ds, HeadKind head, int moe_after, float eval_cf, int want_change) {
    TrainConfig c;
    train_config_defaults(&c);
    c.model.width = 0.25f;
    c.model.batch = 32;
    c.model.head.kind = head;
    c.model.head.E = 4;
    c.model.head.k = 2;
    c.model.head.h = 16;
    c.model.head.eval_cf = eval_cf;
    if (moe_after >= 0) {
        c.model.moe_n = 1;
        c.model.moe_after[0] = moe_after;
    }
    c.epochs = 1;
    c.lr.base = 0.05f;
    c.threads = getenv("PROBE_THREADS") ? atoi(getenv("PROBE_THREADS")) : 2;
    c.augment = 0;
    Trainer t;
    if (trainer_init_ds(&t, &c, ds) != ML_OK) {
        check(0, "trainer_init: %s", ml_last_error());
        return;
    }
    char what[96];
    snprintf(what, sizeof what, "%s%s%s", moe_head_name(head), moe_after >= 0 ? " + moe after stage 2" : "",
             eval_cf > 0 ? " --eval-cf 1" : "");
    for (int s = 0; s < 12; s++) trainer_step(&t, NULL);
    double loss, acc;
    trainer_evaluate(&t, &loss, &acc);
    BatchProbe p;
    const ml_status st = batch_probe_run(&t, 7, &p);
    check(st == ML_OK, "%s: the probe runs (%s)", what, st == ML_OK ? "ok" : ml_last_error());
    if (st != ML_OK) {
        trainer_free(&t);
        return;
    }
    check(p.row[BP_FILE].acc == acc && fabs(p.row[BP_FILE].loss - loss) <= 1e-6 * fabs(loss),
          "%s: file order = trainer_evaluate (acc %.4f = %.4f, loss %.6f vs %.6f)", what, p.row[BP_FILE].acc, acc,
          p.row[BP_FILE].loss, loss);
    check(p.row[BP_SINGLE].batches >= p.classes && p.row[BP_FILE].batches == (p.n_test + 31) / 32,
          "%s: %d file-order batches, %d single-class batches (>= %d classes)", what, p.row[BP_FILE].batches,
          p.row[BP_SINGLE].batches, p.classes);
    check(p.nlayers == (head != HEAD_DENSE) + (moe_after >= 0), "%s: %d routed layers probed", what, p.nlayers);
    for (int k = 1; k < BP_MAKEUPS; k++)
        printf("     %-16s %2d batches: max |dlogit| %.3g, logits changed %ld, predictions %ld, first choices %ld\n",
               p.row[k].name, p.row[k].batches, p.row[k].max_dlogit, p.row[k].logits_changed, p.row[k].pred_changed,
               p.nlayers ? p.row[k].route_changed[p.nlayers - 1] : 0L);
    const double md = batch_probe_max_dlogit(&p);
    const double bound = BP_ROUNDING * fmax(1.0, p.max_abs_logit);
    const BatchProbeRow *r = &p.row[BP_SINGLE];
    long preds = 0, routes = 0, bits = 0;
    int same_acc = 1;
    for (int k = 1; k < BP_MAKEUPS; k++) {
        preds += p.row[k].pred_changed;
        bits += p.row[k].logits_changed;
        same_acc &= p.row[k].acc == p.row[BP_FILE].acc && fabs(p.row[k].loss - p.row[BP_FILE].loss) <= 1e-6;
        for (int l = 0; l < p.nlayers; l++) routes += p.row[k].route_changed[l];
    }
    if (want_change > 0)
        check(batch_probe_depends(&p) && md > 100 * bound,
              "%s: predictions depend on batch mates: max |dlogit| %.3g (rounding bound %.2g); single-class batches: "
              "acc %+.2f pp, loss %+.4f, %ld/%d predictions changed",
              what, md, bound, 100 * (r->acc - p.row[BP_FILE].acc), r->loss - p.row[BP_FILE].loss, r->pred_changed,
              p.n_test);
    else if (want_change == 0)
        check(!batch_probe_depends(&p) && preds == 0 && routes == 0 && same_acc && md <= bound,
              "%s: no change in any make-up: 0 predictions, 0 first choices, the same accuracy; logits within "
              "rounding (max |dlogit| %.3g <= %.2g; %ld of %d image-rows not bit-identical)",
              what, md, bound, bits, 3 * p.n_test);
    else
        printf("note %s: max |dlogit| %.3g, %ld predictions changed in single-class batches (not checked)\n", what, md,
               r->pred_changed);
    trainer_free(&t);
}

int main(void) {
    Dataset ds;
    SyntheticOptions so;
    synthetic_defaults(&so);
    so.h = 16;
    so.w = 16;
    so.c = 3;
    so.classes = 4;
    so.n_train = 512;
    so.n_test = 200; /* not a multiple of the batch: a short last batch in every make-up */
    if (synthetic_generate(&ds, &so) != ML_OK) {
        printf("synthetic: %s\n", ml_last_error());
        return 1;
    }
    probe_one(&ds, HEAD_MOE, -1, 0.0f, 0);
    probe_one(&ds, HEAD_DENSE, -1, 0.0f, 0);
    probe_one(&ds, HEAD_SOFTMOE_SAMPLE, -1, 0.0f, 0);
    probe_one(&ds, HEAD_DENSE, 2, 0.0f, 0);
    probe_one(&ds, HEAD_MOE, 2, 0.0f, 0);
    probe_one(&ds, HEAD_SOFTMOE_BATCH, -1, 0.0f, 1);
    probe_one(&ds, HEAD_MOE, -1, 1.0f, -1); /* an evaluation capacity: batch mates can take a slot */
    dataset_free(&ds);
    printf("%d checks, %d failed\n", n_checks, n_failed);
    return n_failed ? 1 : 0;
}
