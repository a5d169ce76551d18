/* test_layerrec.c — the per-layer records through a session (format_version 2) and back:
 *   - a trainer with a routed layer after stage 2 and the moe head writes live.h5; the history
 *     loader gives back every logged step's and evaluation's per-layer fields as published
 *     (kept counts, tau, collapse fields, class x expert, I(class;expert)) and the layer's t-SNE
 *     sample of its pooled router input, and /run's layer list names them;
 *   - the version-1 fixture (tests/fixtures/v1-moe) loads with one routed layer, the head, whose
 *     fields mirror the top-level ones. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gradcheck.h"
#include "core/trainer.h"
#include "datasets/dataset.h"
#include "sessions/history.h"
#include "trainer_util.h"

#define MAXREC 64
static StepRecord g_steps[MAXREC];
static int g_nsteps;
static EvalRecord g_evals[4];
static int *g_ce[4][REC_MAX_LAYERS];
static float *g_tsne[4];
static int g_nevals;
static SessionWriter g_w;

static void on_step(const StepRecord *r, void *u) {
    (void)u;
    if (g_nsteps < MAXREC) g_steps[g_nsteps++] = *r;
    if (session_append_step(&g_w, r) != ML_OK) CHECK(0, "append step: %s", ml_last_error());
}
static void on_eval(const EvalRecord *r, void *u) {
    (void)u;
    if (session_append_eval(&g_w, r) != ML_OK) CHECK(0, "append eval: %s", ml_last_error());
    if (g_nevals >= 4) return;
    EvalRecord *c = &g_evals[g_nevals];
    *c = *r;
    for (int l = 0; l < r->nlayers; l++) { /* the record's arrays live until the next evaluation */
        const size_t n = (size_t)r->layer[l].classes * (size_t)r->layer[l].experts;
        g_ce[g_nevals][l] = malloc(sizeof(int) * n);
        memcpy(g_ce[g_nevals][l], r->layer[l].class_expert, sizeof(int) * n);
    }
    const size_t nt = (size_t)r->layer[0].tsne_n * (size_t)r->layer[0].feat_dim;
    g_tsne[g_nevals] = malloc(sizeof(float) * (nt + 1));
    memcpy(g_tsne[g_nevals], r->layer[0].tsne_feat, sizeof(float) * nt);
    g_nevals++;
}

static void test_roundtrip(const Dataset *ds, const char *dir) {
    TrainConfig c;
    train_config_defaults(&c);
    c.model.width = 0.25f;
    c.model.batch = 32;
    c.model.head.E = 4;
    c.model.head.h = 16;
    c.model.moe_n = 1;
    c.model.moe_after[0] = 2;
    c.model.bb_nh = 1;
    c.model.bb_hidden[0] = 8;
    c.model.bb_nE = 1;
    c.model.bb_E[0] = 6;
    c.epochs = 2;
    c.threads = 1;
    c.log_every = 3;
    c.tsne_samples = 20;
    c.route.window = 4;
    c.route.min_steps = 4;
    Trainer t;
    if (trainer_init_ds(&t, &c, ds) != ML_OK) {
        CHECK(0, "trainer_init: %s", ml_last_error());
        return;
    }
    TrainerCmd cmd;
    memset(&cmd, 0, sizeof cmd);
    cmd.kind = CMD_SET;
    cmd.param = PARAM_TAU;
    cmd.value = 0.4;
    snprintf(cmd.layer, sizeof cmd.layer, "moe2");
    CHECK(trainer_apply(&t, &cmd) == ML_OK, "set tau 0.4 @moe2");
    SessionInfo info;
    memset(&info, 0, sizeof info);
    info.run = test_run(&t);
    info.command_line = "test";
    CHECK(session_create(&g_w, dir, &info) == ML_OK, "session_create: %s", ml_last_error());
    TrainHooks h;
    memset(&h, 0, sizeof h);
    h.on_step = on_step;
    h.on_eval = on_eval;
    trainer_run(&t, &h);
    CHECK(session_close(&g_w, "finished") == ML_OK, "session_close");
    SessionHistory hs;
    if (session_history_load(dir, &hs) != ML_OK) {
        CHECK(0, "history: %s", ml_last_error());
        trainer_free(&t);
        return;
    }
    CHECK(hs.info.format_version == SESSION_FORMAT_VERSION && hs.nlayers == 2 && !strcmp(hs.layer[0].name, "moe2") &&
              !strcmp(hs.layer[1].name, "head") && hs.layer[0].E == 6 && hs.layer[0].stage == 2 &&
              hs.layer[1].stage == -1 && hs.layer[0].feat_dim == t.model.moec[0].C,
          "format 2: layers %d (%s E=%d stage %d, %s), moe2 features %d", hs.nlayers, hs.layer[0].name, hs.layer[0].E,
          hs.layer[0].stage, hs.layer[1].name, hs.layer[0].feat_dim);
    int same = hs.nsteps == g_nsteps, first_bad = -1;
    for (int i = 0; same && i < g_nsteps; i++)
        for (int l = 0; l < 2 && same; l++) {
            const StepLayer *a = &g_steps[i].layer[l], *b = &hs.steps[i].layer[l];
            same = hs.steps[i].nlayers == 2 && a->moe.tau == b->moe.tau && a->moe.load_entropy == b->moe.load_entropy &&
                   a->rho_realized == b->rho_realized && a->collapsed == b->collapsed &&
                   a->collapse_views == b->collapse_views && a->collapse_first_step == b->collapse_first_step &&
                   a->moe.first_share == b->moe.first_share && a->dead_experts == b->dead_experts &&
                   !memcmp(a->moe.kept, b->moe.kept, sizeof(int) * (size_t)a->moe.E) &&
                   !memcmp(a->moe.mean_gate, b->moe.mean_gate, sizeof(float) * (size_t)a->moe.E);
            if (!same) first_bad = i;
        }
    CHECK(same && g_nsteps > 2, "%d logged steps: every per-layer field read back exactly (first mismatch %d)",
          g_nsteps, first_bad);
    CHECK(g_nsteps > 0 && hs.steps[0].layer[0].moe.tau > 0.399 && hs.steps[0].layer[0].moe.tau < 0.401 &&
              hs.steps[0].layer[1].moe.tau == hs.steps[0].tau && hs.steps[0].tau > 0.5,
          "moe2 ran at its own tau %.3f, the head at %.3f", hs.steps[0].layer[0].moe.tau, hs.steps[0].layer[1].moe.tau);
    int esame = hs.nevals == g_nevals;
    for (int i = 0; esame && i < g_nevals; i++)
        for (int l = 0; l < 2 && esame; l++) {
            const EvalLayer *a = &g_evals[i].layer[l], *b = &hs.evals[i].layer[l];
            esame = a->mutual_info == b->mutual_info && a->test_first_share == b->test_first_share &&
                    a->test_dead_topk == b->test_dead_topk && a->epoch_tau == b->epoch_tau &&
                    a->collapse_first_eval == b->collapse_first_eval && b->classes == a->classes &&
                    b->experts == a->experts &&
                    !memcmp(g_ce[i][l], b->class_expert, sizeof(int) * (size_t)a->classes * (size_t)a->experts);
        }
    CHECK(esame && g_nevals == 2, "%d evaluations: per-layer scalars and class x expert matrices read back", g_nevals);
    float *feat = NULL;
    int *ex = NULL, *lab = NULL, n = 0, d = 0;
    CHECK(session_history_layer_tsne(&hs, 0, 1, &feat, &ex, &lab, &n, &d) == ML_OK && n == 20 &&
              d == t.model.moec[0].C && !memcmp(feat, g_tsne[1], sizeof(float) * (size_t)n * (size_t)d),
          "moe2's t-SNE sample of evaluation 2: %d x %d, its pooled router input as published", n, d);
    ml_free(feat);
    ml_free(ex);
    ml_free(lab);
    session_history_free(&hs);
    trainer_free(&t);
}

static void test_v1_fixture(void) {
    const char *src = getenv("MOELAB_SRC");
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/tests/fixtures/v1-moe", src ? src : ".");
    SessionHistory h;
    if (session_history_load(dir, &h) != ML_OK) {
        CHECK(0, "v1 fixture: %s", ml_last_error());
        return;
    }
    int same = h.nsteps > 0;
    for (long i = 0; same && i < h.nsteps; i++)
        same = h.steps[i].nlayers == 1 && h.steps[i].layer[0].moe.load_entropy == h.steps[i].moe.load_entropy &&
               !memcmp(h.steps[i].layer[0].moe.kept, h.steps[i].moe.kept, sizeof(int) * 4) &&
               h.steps[i].layer[0].collapsed == h.steps[i].collapsed;
    CHECK(h.info.format_version == 1 && h.nlayers == 1 && !strcmp(h.layer[0].name, "head") && h.layer[0].E == 4 &&
              same && h.nevals == 1 && h.evals[0].layer[0].class_expert == h.evals[0].moe.class_expert &&
              h.evals[0].layer[0].mutual_info == h.evals[0].moe.mutual_info,
          "the version-1 fixture: %ld steps, %d evaluation, one routed layer (%s) mirroring the top level", h.nsteps,
          h.nevals, h.layer[0].name);
    session_history_free(&h);
}

int main(void) {
    Dataset ds;
    SyntheticOptions so;
    synthetic_defaults(&so);
    so.h = so.w = 16;
    so.c = 3;
    so.classes = 4;
    so.n_train = 256;
    so.n_test = 64;
    if (synthetic_generate(&ds, &so) != ML_OK) {
        printf("synthetic: %s\n", ml_last_error());
        return 1;
    }
    char tmpl[] = "/tmp/moelab-layerrec-XXXXXX";
    const char *tmp = mkdtemp(tmpl);
    char dir[600];
    snprintf(dir, sizeof dir, "%s/run", tmp ? tmp : "/tmp");
    test_roundtrip(&ds, dir);
    test_v1_fixture();
    char cmd[700];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp ? tmp : "/nonexistent");
    if (tmp && system(cmd) != 0) printf("INFO could not remove %s\n", tmp);
    for (int i = 0; i < g_nevals; i++) {
        for (int l = 0; l < REC_MAX_LAYERS; l++) free(g_ce[i][l]);
        free(g_tsne[i]);
    }
    dataset_free(&ds);
    printf("%d failure(s)\n", n_failed);
    return n_failed ? 1 : 0;
}
