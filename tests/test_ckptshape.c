/* test_ckptshape.c — config_json stores what the model is: for widths 0.25, 0.5 and 1, both
 * backbones and every head, a checkpoint is written by a real trainer, the model is rebuilt from
 * the checkpoint's config_json alone (the JSON fields, nothing from the trainer) and every
 * parameter and buffer of the rebuilt model must exist in the checkpoint with the same shape, with
 * no dataset left over in /weights or /buffers; head.d must be the real feature width (8 c0) and
 * head.slots the effective softmoe-batch slot count. */
#include <hdf5.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "core/model.h"
#include "trainer_util.h"

/* the name in a table of names (moe_head_name etc.), or -1 */
static int name_index(const char *(*fn)(int), int n, const char *s) {
    for (int i = 0; i < n; i++)
        if (!strcmp(fn(i), s)) return i;
    return -1;
}
static const char *head_nm(int i) { return moe_head_name((HeadKind)i); }
static const char *bb_nm(int i) { return backbone_name((BackboneKind)i); }

static int json_i(json_t *root, const char *path, long *v) {
    if (!session_config_long(root, path, -1000000000L, 1000000000L, v)) {
        check(0, "config_json has integer %s", path);
        return 0;
    }
    return 1;
}

/* every /weights or /buffers dataset of the file, counted; each model tensor looked up */
static int count_group(hid_t f, const char *group) {
    H5G_info_t gi;
    hid_t g = H5Gopen2(f, group, H5P_DEFAULT);
    if (g < 0) return -1;
    int n = H5Gget_info(g, &gi) < 0 ? -1 : (int)gi.nlinks;
    H5Gclose(g);
    return n;
}

static int tensor_matches(hid_t f, const char *group, const TensorInfo *ti) {
    char path[160];
    snprintf(path, sizeof path, "/%s/%s", group, ti->name);
    if (H5Lexists(f, path, H5P_DEFAULT) <= 0) {
        check(0, "%s is in the checkpoint", path);
        return 0;
    }
    hid_t d = H5Dopen2(f, path, H5P_DEFAULT);
    hid_t s = H5Dget_space(d);
    hsize_t dims[8];
    int nd = H5Sget_simple_extent_dims(s, dims, NULL);
    H5Sclose(s);
    H5Dclose(d);
    int same = nd == ti->ndim;
    for (int i = 0; same && i < nd; i++) same = (int)dims[i] == ti->shape[i];
    if (!same) {
        char a[64] = "", b[64] = "";
        for (int i = 0; i < nd && i < 8; i++)
            snprintf(a + strlen(a), sizeof a - strlen(a), "%s%llu", i ? "x" : "", (unsigned long long)dims[i]);
        for (int i = 0; i < ti->ndim; i++)
            snprintf(b + strlen(b), sizeof b - strlen(b), "%s%d", i ? "x" : "", ti->shape[i]);
        check(0, "%s: checkpoint %s, rebuilt model %s", path, a, b);
    }
    return same;
}

static void one(const char *tmp, float width, BackboneKind bb, HeadKind head, const Dataset *ds) {
    TrainConfig c;
    train_config_defaults(&c);
    c.model.width = width;
    c.model.backbone = bb;
    c.model.batch = 16;
    c.model.head.kind = head;
    c.model.head.E = 4;
    c.model.head.k = 2;
    c.model.head.h = 8;
    c.epochs = 1;
    c.threads = 1;
    c.tsne_samples = 0;
    char label[96];
    snprintf(label, sizeof label, "w %g %s %s", width, backbone_name(bb), moe_head_name(head));
    Trainer t;
    if (!check(trainer_init_ds(&t, &c, ds) == ML_OK, "%s: trainer_init: %s", label, ml_last_error())) return;
    char dir[512], path[600];
    snprintf(dir, sizeof dir, "%s/w%g-%d-%d", tmp, width, (int)bb, (int)head);
    if (!check(ckpt_write_t(dir, &t, 0) == ML_OK, "%s: ckpt_write: %s", label, ml_last_error())) {
        trainer_free(&t);
        return;
    }
    snprintf(path, sizeof path, "%s/ckpt-0.h5", dir);
    const int real_d = t.model.d, real_slots = moe_slots(&t.model.cfg.head, c.model.batch);
    trainer_free(&t); /* from here on only the file speaks */

    static char js[65536];
    if (!check(ckpt_read_attr(path, "config_json", js, sizeof js) == ML_OK, "%s: config_json of %s", label, path))
        return;
    json_t *root = session_config_parse(js);
    if (!check(root != NULL, "%s: config_json parses", label)) return;
    ModelConfig m;
    model_config_defaults(&m);
    long in_c, in_h, in_w, classes, batch, d, E, k, h, slots;
    double w;
    char kind[32], bbs[16];
    int ok = json_i(root, "model.in_c", &in_c) && json_i(root, "model.in_h", &in_h) &&
             json_i(root, "model.in_w", &in_w) && json_i(root, "model.classes", &classes) &&
             json_i(root, "model.batch", &batch) && json_i(root, "model.head.d", &d) &&
             json_i(root, "model.head.E", &E) && json_i(root, "model.head.k", &k) && json_i(root, "model.head.h", &h) &&
             json_i(root, "model.head.slots", &slots) && session_config_num(root, "model.width", 0, 16, &w) &&
             session_config_str(root, "model.head.kind", kind, sizeof kind) &&
             session_config_str(root, "model.backbone", bbs, sizeof bbs);
    json_decref(root);
    if (!check(ok, "%s: config_json has every model field", label)) return;
    check(d == real_d && d == 8 * lroundf(32.0f * width), "%s: config_json head.d = %ld, the model's d = %d", label, d,
          real_d);
    check(slots == real_slots, "%s: config_json head.slots = %ld, effective %d", label, slots, real_slots);
    m.in_c = (int)in_c, m.in_h = (int)in_h, m.in_w = (int)in_w, m.classes = (int)classes, m.batch = (int)batch;
    m.width = (float)w;
    m.backbone = (BackboneKind)name_index(bb_nm, 2, bbs);
    m.head.kind = (HeadKind)name_index(head_nm, 4, kind);
    m.head.E = (int)E, m.head.k = (int)k, m.head.h = (int)h, m.head.slots = (int)slots;
    Model rebuilt;
    if (!check(model_init(&rebuilt, &m) == ML_OK, "%s: model_init from config_json: %s", label, ml_last_error()))
        return;
    check(rebuilt.d == d, "%s: rebuilt d %d = head.d %ld", label, rebuilt.d, d);
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    int match = 0;
    int want = 0;
    for (int i = 0; i < rebuilt.nparams; i++) {
        const TensorInfo *ti = &rebuilt.params[i];
        const char *pre = "head.experts.";
        if (strncmp(ti->name, pre, strlen(pre))) {
            match += tensor_matches(f, "weights", ti), want++;
            continue;
        }
        /* the experts' (E, ...) tensors are E checkpoint entries head.experts.<e>.<rest> of shape (...) */
        for (int e = 0; e < ti->shape[0]; e++) {
            TensorInfo one = *ti;
            snprintf(one.name, sizeof one.name, "%s%d.%s", pre, e, ti->name + strlen(pre));
            one.ndim = ti->ndim - 1;
            memmove(one.shape, ti->shape + 1, sizeof(int) * (size_t)one.ndim);
            match += tensor_matches(f, "weights", &one), want++;
        }
    }
    const int want_w = want;
    for (int i = 0; i < rebuilt.nbufs; i++) match += tensor_matches(f, "buffers", &rebuilt.bufs[i]), want++;
    const int nw = count_group(f, "weights"), nb = count_group(f, "buffers");
    check(match == want && nw == want_w && nb == rebuilt.nbufs,
          "%s: %d of %d tensors match the checkpoint's shapes; checkpoint has %d weights, %d buffers", label, match,
          want, nw, nb);
    H5Fclose(f);
    model_free(&rebuilt);
}

int main(void) {
    char tmp[] = "/tmp/test_ckptshape.XXXXXX";
    if (!mkdtemp(tmp)) return 1;
    SyntheticOptions o;
    synthetic_defaults(&o);
    o.h = 12, o.w = 12, o.c = 3, o.classes = 5, o.n_train = 32, o.n_test = 16, o.seed = 2;
    Dataset ds;
    if (synthetic_generate(&ds, &o) != ML_OK) return 1;
    const float widths[] = {0.25f, 0.5f, 1.0f};
    for (int wi = 0; wi < 3; wi++)
        for (int bb = 0; bb < 2; bb++)
            for (int hk = 0; hk < 4; hk++) one(tmp, widths[wi], (BackboneKind)bb, (HeadKind)hk, &ds);
    dataset_free(&ds);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
    if (system(cmd) != 0) printf("note: could not remove %s\n", tmp);
    printf("%d checks, %d failed\n", n_checks, n_failed);
    return n_failed != 0;
}
