/* test_history.c — sessions/history.h: a live.h5 read back into StepRecord / EvalRecord / events.
 *
 *  1. hand-made records written through SessionWriter: every field round-trips exactly (steps,
 *     per-expert vectors, evals, class x expert per eval, events, class names, /run attributes),
 *     the reconstructed fields (moe.B/E/k/training/tau, dropless from `set cf` events);
 *  2. the scrubber: eval_at_epoch, step_at, events_around at exact, between, before, after;
 *  3. session_history_tsne: the features written for each eval; ML_ERR_ARG out of range / dense /
 *     --tsne-samples 0;
 *  4. real trainer runs (moe with capacity, moe dropless, softmoe-batch, dense): the loaded records
 *     equal the published ones field by field; a collapsed evaluation (router overwritten) gives
 *     test first share 1 and E-1 dead first choices, in live.h5 and read back;
 *  5. damage: truncated copies, garbage, missing file, a non-moelab HDF5 file, format_version 99,
 *     a missing dataset, a dimension claiming 1e12 rows (each in a child process, so a crash is
 *     seen as one), ragged columns (load at the common length);
 *  5b. the configuration JSON: session_config_json read back with session_config_parse gives
 *     every number exactly (float, double, integer, awkward values), short values stay short, a
 *     NaN is null, a non-UTF-8 dataset spec is made valid; a live.h5 whose config_json is cut,
 *     over 64 KiB, damaged, of wrong types, without keys or by the old hand-written writer loads,
 *     using only what it can read;
 *  6. reading while writing: a reader process (fork + exec of this program) loads the file while
 *     the writer is open, after each flush, and after the close.
 *
 * Run as `test_history`; `test_history --live-reader FILE` is the reader child of test 6. */
#define _GNU_SOURCE

#include "check.h"
#include "child.h"
#include "trainer_util.h"
#include "datasets/dataset.h"
#include "sessions/history.h"

#include <errno.h>
#include <float.h>
#include <hdf5.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static char g_root[256];

static void path_in(char *buf, size_t n, const char *sub) { snprintf(buf, n, "%s/%s", g_root, sub); }

/* ------------------------------------------------------------------ fixtures */

/* small_config (trainer_util.h) and what this test changes. */
static void local_config(TrainConfig *c, HeadKind head) {
    small_config(c, head);
    c->opt.kind = OPT_ADAMW;
    optim_config_defaults(&c->opt, OPT_ADAMW);
    c->lr.base = 0.005f;
    c->log_every = 1;
    c->tsne_samples = 16;
    c->route.window = 5;
    c->route.min_steps = 2;
}

static int make_dataset(Dataset *ds) {
    SyntheticOptions o;
    synthetic_defaults(&o);
    o.h = 16;
    o.w = 16;
    o.c = 3;
    o.classes = 4;
    o.n_train = 256;
    o.n_test = 64;
    o.seed = 3;
    return synthetic_generate(ds, &o) == ML_OK ? 0 : -1;
}

static int create_session(SessionWriter *w, const Trainer *t, const char *dir, const char *cmdline) {
    SessionInfo info;
    memset(&info, 0, sizeof info);
    info.run = test_run(t);
    info.command_line = cmdline;
    info.dataset_spec = "synthetic:16x16x3:4";
    const ml_status st = session_create(w, dir, &info);
    if (st != ML_OK) printf("INFO session_create %s: %s\n", dir, ml_last_error());
    return st == ML_OK ? 0 : -1;
}

/* ------------------------------------------------------------------ record comparison */

/* The first field where a and b differ (NULL: none). Per-expert vectors over the first E. */
static const char *step_diff(const StepRecord *a, const StepRecord *b) {
#define D(f) \
    if (a->f != b->f) return #f
    D(step);
    D(epoch);
    D(epoch_progress);
    D(loss);
    D(loss_total);
    D(acc);
    D(lr);
    D(tau);
    D(img_per_s);
    D(has_moe);
    D(rho_realized);
    D(dead_experts);
    D(collapsed);
    D(collapse_reason);
    D(window_load_entropy);
    D(moe.B);
    D(moe.E);
    D(moe.k);
    D(moe.training);
    D(moe.capacity);
    D(moe.dropless);
    D(moe.drop_frac);
    D(moe.no_expert_frac);
    D(moe.gate_entropy);
    D(moe.load_entropy);
    D(moe.maxvio);
    D(moe.confidence);
    D(moe.l_aux);
    D(moe.l_z);
    D(moe.tau);
    D(moe.pairs_per_sample);
    D(moe.first_share);
    D(moe.clean_first_share);
    D(moe.clean_load_entropy);
    D(moe.clean_dead);
    D(moe.first_agree);
    for (int e = 0; e < a->moe.E && e < MOE_MAX_EXPERTS; e++) {
        D(moe.demand[e]);
        D(moe.kept[e]);
        D(moe.mean_gate[e]);
        D(moe.bias[e]);
    }
    return NULL;
}

static const char *eval_diff(const EvalRecord *a, const EvalRecord *b) {
    D(epoch);
    D(step);
    D(train_loss);
    D(train_acc);
    D(test_loss);
    D(test_acc);
    D(img_per_s);
    D(epoch_seconds);
    D(elapsed);
    D(has_moe);
    D(rho_nominal);
    D(moe.train_drop_frac);
    D(moe.train_maxvio);
    D(train_rho_realized);
    D(moe.window_load_entropy);
    D(moe.window_first_share);
    D(moe.dead_experts);
    D(collapsed);
    D(collapse_reason);
    D(moe.classes);
    D(moe.experts);
    D(moe.mutual_info);
    D(moe.test_load_entropy);
    D(moe.test_first_share);
    D(moe.test_dead_first);
    D(moe.test_dead_topk);
    D(moe.tsne_n);
    D(moe.feat_dim);
    if ((a->moe.class_expert == NULL) != (b->moe.class_expert == NULL)) return "class_expert (NULL vs not)";
    if (a->moe.class_expert && memcmp(a->moe.class_expert, b->moe.class_expert, sizeof(int) * (size_t)a->moe.classes * a->moe.experts))
        return "class_expert";
#undef D
    return NULL;
}

/* An EvalRecord with owned copies of its arrays (the trainer's are overwritten by the next eval). */
typedef struct {
    EvalRecord r;
    int *ce;
    float *feat;
    int *tex;
    int32_t *tla;
} EvalCopy;

static void eval_copy(EvalCopy *c, const EvalRecord *r) {
    memset(c, 0, sizeof *c);
    c->r = *r;
    if (r->moe.class_expert) {
        c->ce = malloc(sizeof(int) * (size_t)r->moe.classes * r->moe.experts);
        memcpy(c->ce, r->moe.class_expert, sizeof(int) * (size_t)r->moe.classes * r->moe.experts);
    }
    if (r->moe.tsne_n > 0 && r->moe.tsne_feat) {
        c->feat = malloc(sizeof(float) * (size_t)r->moe.tsne_n * r->moe.feat_dim);
        c->tex = malloc(sizeof(int) * (size_t)r->moe.tsne_n);
        c->tla = malloc(sizeof(int32_t) * (size_t)r->moe.tsne_n);
        memcpy(c->feat, r->moe.tsne_feat, sizeof(float) * (size_t)r->moe.tsne_n * r->moe.feat_dim);
        memcpy(c->tex, r->moe.tsne_expert, sizeof(int) * (size_t)r->moe.tsne_n);
        memcpy(c->tla, r->tsne_label, sizeof(int32_t) * (size_t)r->moe.tsne_n);
    }
    c->r.moe.class_expert = c->ce;
    c->r.moe.tsne_feat = c->feat;
    c->r.moe.tsne_expert = c->tex;
    c->r.tsne_label = c->tla;
}

static void eval_copy_free(EvalCopy *c) {
    free(c->ce);
    free(c->feat);
    free(c->tex);
    free(c->tla);
    memset(c, 0, sizeof *c);
}

/* Is h completely empty (as after a failed load or a free)? */
static int history_empty(const SessionHistory *h) {
    static const SessionHistory zero;
    return !memcmp(h, &zero, sizeof zero);
}

/* ------------------------------------------------------------------ 1-3: hand-made session */

#define NS 150 /* step rows: two full blocks of 64 and a partial one */
#define NEV 4  /* evaluations */
#define NEVT 7 /* events */
#define LOG_EVERY 3
#define BATCH 32

static StepRecord g_st[NS]; /* as written (dropless = what the loader must reconstruct) */
static EvalRecord g_ev[NEV];
static int *g_ce[NEV];
static float *g_feat[NEV];
static int *g_tex[NEV];
static int32_t *g_tla[NEV];
static int g_tn, g_fd; /* t-SNE sample size of the hand-made session */
static const long g_evt_step[NEVT] = {10, 150, 150, 200, 300, 301, 460};
static const char *g_evt_text[NEVT] = {"set tau 0.3",       "set cf 0", "note: two events at one step",
                                       "set cf 2000",       "set cf 3", NULL /* long */,
                                       "after the last row"};
#define LONG_EVT 5
static char g_long[400];
static const int g_ev_epoch[NEV] = {1, 2, 2, 4};
static const long g_ev_step[NEV] = {100, 200, 250, 400};
static char g_hand_dir[512], g_hand_file[600];
static char g_hand_json[8192];
static const char g_hand_cmd[] = "moelab train --head moe --experts 4 -k 2 --log-every 3 --note \"hand, made\"";

/* launch cf 1.25 (C = ceil(1.25 * 2 * 32 / 4) = 20); "set cf 0" at step 150 -> dropless from step
 * 151 (C = B); "set cf 2000" at 200 is refused by the trainer (> 1000: still dropless); "set cf 3"
 * at 300 -> C = min(48, 32) = 32 but not dropless. */
static void hand_step(int i, StepRecord *r) {
    memset(r, 0, sizeof *r);
    r->step = (long)LOG_EVERY * (i + 1);
    r->epoch = 1 + (int)(r->step / 100);
    r->epoch_progress = (double)(r->step % 100) / 100.0;
    r->loss = 2.0 / (i + 1) + 1e-12 * i;
    r->loss_total = r->loss + 0.0123456789;
    r->acc = i / 151.0;
    r->lr = 1e-7f * (float)(1 + i % 7) * 1000.0f;
    r->tau = r->step > 10 ? 0.3f : 1.0f + 0.01f * (float)i;
    r->img_per_s = 1000.0 + i * 3.25;
    r->has_moe = 1;
    MoeStepStats *m = &r->moe;
    m->B = BATCH;
    m->E = 4;
    m->k = 2;
    m->training = 1;
    m->tau = r->tau;
    m->capacity = r->step <= 150 ? 20 : BATCH;
    m->dropless = r->step > 150 && r->step <= 300;
    for (int e = 0; e < 4; e++) {
        m->demand[e] = (i * 7 + e * 5) % 40;
        m->kept[e] = m->demand[e] < m->capacity ? m->demand[e] : m->capacity;
        m->mean_gate[e] = 0.25f + 0.01f * ((float)e - 1.5f) + 1e-4f * (float)i;
        m->bias[e] = -0.001f * (float)i * (float)(e + 1);
    }
    m->drop_frac = (i % 11) / 64.0;
    m->no_expert_frac = (i % 3) / 32.0;
    m->gate_entropy = 0.5 + i * 1e-3;
    m->load_entropy = 0.99 - i * 1e-4;
    m->maxvio = 0.1 * (i % 9);
    m->confidence = 0.6 + 1e-5 * i;
    m->l_aux = 1.0 + 1e-3 * i;
    m->l_z = 3.0e-5 * i;
    m->pairs_per_sample = 2.0 - m->drop_frac * 2;
    m->clean_first_share = 0.25 + (i % 13) / 17.0;
    m->clean_load_entropy = 1.0 - (i % 7) / 9.0;
    m->clean_dead = i % 4;
    m->first_agree = 0.5 + (i % 5) / 11.0;
    r->rho_realized = 0.2 + 0.001 * i;
    r->dead_experts = i % 3;
    r->collapsed = i % 5 == 0;
    r->collapse_reason = i % 8;
    r->window_load_entropy = 0.9 - 0.001 * i;
}

static void hand_eval(int j, int K, int E) {
    EvalRecord *r = &g_ev[j];
    memset(r, 0, sizeof *r);
    r->epoch = g_ev_epoch[j];
    r->step = g_ev_step[j];
    r->train_loss = 1.5 - 0.1 * j;
    r->train_acc = 0.4 + 0.05 * j;
    r->test_loss = 1.6 - 0.1 * j;
    r->test_acc = j == 2 ? 0.91 : 0.5 + 0.1 * j; /* best at j = 2 */
    r->img_per_s = 2000 + j;
    r->epoch_seconds = 10.5 + j;
    r->elapsed = 11.25 * (j + 1);
    r->has_moe = 1;
    r->rho_nominal = 0.288;
    r->moe.train_drop_frac = 0.01 * j;
    r->moe.train_maxvio = 0.2 + j;
    r->train_rho_realized = 0.27 + 0.001 * j;
    r->moe.window_load_entropy = 0.95 - 0.01 * j;
    r->moe.dead_experts = j % 2;
    r->collapsed = j == 3;
    r->collapse_reason = j == 3 ? 5 : 0;
    r->moe.classes = K;
    r->moe.experts = E;
    r->moe.mutual_info = 0.1 * j + 0.001;
    r->moe.test_load_entropy = 0.97 - 0.02 * j;
    r->moe.test_first_share = 0.3 + 0.125 * j;
    r->moe.test_dead_first = j % 3;
    r->moe.test_dead_topk = j % 2;
    r->moe.tsne_n = g_tn;
    r->moe.feat_dim = g_fd;
    g_ce[j] = malloc(sizeof(int) * (size_t)K * E);
    for (int c = 0; c < K; c++)
        for (int e = 0; e < E; e++) g_ce[j][c * E + e] = 100 * j + 10 * c + e;
    g_feat[j] = malloc(sizeof(float) * (size_t)g_tn * g_fd);
    g_tex[j] = malloc(sizeof(int) * (size_t)g_tn);
    g_tla[j] = malloc(sizeof(int32_t) * (size_t)g_tn);
    for (int s = 0; s < g_tn; s++) {
        for (int q = 0; q < g_fd; q++) g_feat[j][s * g_fd + q] = sinf(0.37f * (float)(s * g_fd + q) + (float)j);
        g_tex[j][s] = (s + j) % E;
        g_tla[j][s] = (3 * s + j) % K;
    }
    r->moe.class_expert = g_ce[j];
    r->moe.tsne_feat = g_feat[j];
    r->moe.tsne_expert = g_tex[j];
    r->tsne_label = g_tla[j];
}

static const char *evt_text(int i) { return g_evt_text[i] ? g_evt_text[i] : g_long; }
static double evt_wall(int i) { return 1.7e9 + 0.125 * i; }

/* Writes the hand-made session: steps, evals and events interleaved in step order. */
static int write_hand_session(const Dataset *ds, Trainer *t, double *t0, double *t1) {
    TrainConfig cfg;
    local_config(&cfg, HEAD_MOE);
    cfg.log_every = LOG_EVERY;
    if (trainer_init_ds(t, &cfg, ds) != ML_OK) {
        check(0, "trainer_init: %s", ml_last_error());
        return -1;
    }
    g_tn = t->ev.tsne_n;
    g_fd = t->model.d;
    memset(g_long, 'x', sizeof g_long - 1);
    g_long[0] = 'L';
    for (int i = 0; i < NS; i++) hand_step(i, &g_st[i]);
    for (int j = 0; j < NEV; j++) hand_eval(j, ds->classes, 4);
    session_config_json(&t->cfg, "synthetic:16x16x3:4", g_hand_json, sizeof g_hand_json);
    path_in(g_hand_dir, sizeof g_hand_dir, "hand");
    snprintf(g_hand_file, sizeof g_hand_file, "%s/live.h5", g_hand_dir);
    SessionWriter w;
    *t0 = (double)time(NULL) - 1;
    if (create_session(&w, t, g_hand_dir, g_hand_cmd) != 0) return -1;
    int errors = 0, ie = 0, iv = 0;
    for (int i = 0; i < NS; i++) {
        errors += session_append_step(&w, &g_st[i]) != ML_OK;
        while (iv < NEVT && g_evt_step[iv] <= g_st[i].step) {
            errors += session_append_event(&w, g_evt_step[iv], evt_wall(iv), evt_text(iv)) != ML_OK;
            iv++;
        }
        while (ie < NEV && g_ev_step[ie] <= g_st[i].step) errors += session_append_eval(&w, &g_ev[ie++]) != ML_OK;
    }
    while (iv < NEVT) {
        errors += session_append_event(&w, g_evt_step[iv], evt_wall(iv), evt_text(iv)) != ML_OK;
        iv++;
    }
    errors += session_close(&w, "finished") != ML_OK;
    *t1 = (double)time(NULL) + 1;
    check(errors == 0 && ie == NEV, "hand-made session written: %d steps, %d evals, %d events (%d errors)", NS, ie,
          NEVT, errors);
    return errors ? -1 : 0;
}

static void test_roundtrip(const SessionHistory *h, const Trainer *t, double t0, double t1) {
    const BatchSource *ds = &t->src;
    check(!strcmp(h->path, g_hand_file), "path is the file read (%s)", h->path);
    check(h->nsteps == NS && h->nevals == NEV && h->nevents == NEVT, "%ld steps, %d evals, %ld events", h->nsteps,
          h->nevals, h->nevents);
    check(h->K == 4 && h->E == 4 && h->class_names != NULL, "K = %d, E = %d", h->K, h->E);
    int names_ok = h->class_names != NULL && h->K == ds->classes;
    for (int k = 0; names_ok && k < h->K; k++) names_ok = !strcmp(h->class_names[k], ds->class_names[k]);
    check(names_ok, "class names are the dataset's (%s, ...)", h->class_names ? h->class_names[0] : "?");
    /* /run attributes */
    check(h->batch == BATCH && h->d == t->model.d && h->log_every == LOG_EVERY && h->tsne_samples == t->ev.tsne_n,
          "batch %d, d %d, log_every %d (from config_json), tsne_samples %d", h->batch, h->d, h->log_every,
          h->tsne_samples);
    check(h->steps_per_epoch == t->steps_per_epoch && h->total_steps == t->total_steps &&
              h->rho_nominal == model_rho_nominal(&t->model),
          "steps_per_epoch %ld, total_steps %ld, rho_nominal %.4f", h->steps_per_epoch, h->total_steps, h->rho_nominal);
    check(h->image_c == 3 && h->image_h == 16 && h->image_w == 16 && h->n_train == 256 && h->n_test == 64,
          "image %dx%dx%d, n_train %d, n_test %d", h->image_c, h->image_h, h->image_w, h->n_train, h->n_test);
    check(!strcmp(h->command_line, g_hand_cmd), "command_line verbatim");
    check(!strcmp(h->config_json, g_hand_json), "config_json = session_config_json (%zu bytes)", strlen(g_hand_json));
    /* info */
    check(!strcmp(h->info.status, "finished") && !strcmp(h->info.head, "moe") && h->info.experts == 4 &&
              h->info.k == 2 && h->info.steps_logged == NS && h->info.last_step == g_st[NS - 1].step &&
              h->info.evals == NEV && h->info.best_test_acc == 0.91 && h->info.best_epoch == 2 &&
              h->info.events == NEVT,
          "info as session_read_info: %s, head %s, %ld steps, best %.2f at epoch %d", h->info.status, h->info.head,
          h->info.steps_logged, h->info.best_test_acc, h->info.best_epoch);
    /* steps */
    if (h->nsteps != NS) return;
    long bad = -1;
    const char *what = NULL;
    for (long i = 0; i < NS && bad < 0; i++)
        if ((what = step_diff(&h->steps[i], &g_st[i]))) bad = i;
    check(bad < 0,
          "all %d StepRecords round-trip exactly (every column, demand/kept/mean_gate/bias, B/E/k/training/"
          "tau rebuilt)%s%s",
          NS, what ? ": differs in " : "", what ? what : "");
    if (bad >= 0) printf("INFO first difference at row %ld\n", bad);
    int dl[3] = {0, 0, 0};
    for (long i = 0; i < NS; i++) dl[g_st[i].step <= 150 ? 0 : g_st[i].step <= 300 ? 1 : 2] += h->steps[i].moe.dropless;
    check(dl[0] == 0 && dl[1] == 50 && dl[2] == 0,
          "dropless follows the `set cf` events: %d rows before `set cf 0`, %d/50 after (a refused `set cf 2000` "
          "in between), %d after `set cf 3` (C = B)",
          dl[0], dl[1], dl[2]);
    int wall_ok = 1;
    for (long i = 0; i < NS; i++)
        wall_ok = wall_ok && h->step_wall[i] >= t0 && h->step_wall[i] <= t1 &&
                  (i == 0 || h->step_wall[i] >= h->step_wall[i - 1]);
    check(wall_ok, "step_wall: Unix times of the appends, non-decreasing");
    /* evals */
    if (h->nevals != NEV) return;
    int ev_bad = -1;
    what = NULL;
    for (int j = 0; j < NEV && ev_bad < 0; j++) {
        EvalRecord want = g_ev[j];
        if ((what = eval_diff(&h->evals[j], &want))) ev_bad = j;
        else if (h->evals[j].moe.tsne_feat || h->evals[j].moe.tsne_expert || h->evals[j].tsne_label) {
            what = "tsne pointers";
            ev_bad = j;
        } else if (h->evals[j].moe.class_expert != h->ce + (size_t)j * 16) {
            what = "class_expert pointer";
            ev_bad = j;
        }
    }
    check(ev_bad < 0, "all %d EvalRecords round-trip (scalars, class x expert per eval, tsne_n %d, feat_dim %d)%s%s",
          NEV, h->evals[0].moe.tsne_n, h->evals[0].moe.feat_dim, what ? ": differs in " : "", what ? what : "");
    wall_ok = 1;
    for (int j = 0; j < NEV; j++) wall_ok = wall_ok && h->eval_wall[j] >= t0 && h->eval_wall[j] <= t1;
    check(wall_ok, "eval_wall: Unix times of the appends");
    /* events */
    if (h->nevents != NEVT) return;
    int evt_ok = 1;
    for (int i = 0; i < NEVT; i++) {
        char want[256]; /* the text cut to 255 bytes */
        const size_t len = strlen(evt_text(i)) < 255 ? strlen(evt_text(i)) : 255;
        memcpy(want, evt_text(i), len);
        want[len] = 0;
        evt_ok = evt_ok && h->events[i].step == g_evt_step[i] && h->events[i].wall_time == evt_wall(i) &&
                 !strcmp(h->events[i].text, want);
    }
    check(evt_ok && strlen(h->events[LONG_EVT].text) == 255,
          "events: steps, wall times and texts (a 399-byte text cut to %zu)", strlen(h->events[LONG_EVT].text));
}

static void test_scrubber(const SessionHistory *h) {
    /* evals at epochs 1, 2, 2, 4 */
    const int ep[] = {-1, 0, 1, 2, 3, 4, 5, 1000};
    const int want[] = {-1, -1, 0, 1, 2, 3, 3, 3};
    int ok = 1;
    for (size_t i = 0; i < sizeof ep / sizeof *ep; i++) {
        const int got = session_history_eval_at_epoch(h, ep[i]);
        if (got != want[i]) {
            ok = 0;
            printf("INFO eval_at_epoch(%d) = %d, want %d\n", ep[i], got, want[i]);
        }
    }
    check(ok, "eval_at_epoch: none before the first (-1), exact (the first of two with epoch 2), between (3 -> the "
              "last before), after the last");
    /* rows at steps 3, 6, ..., 450 */
    const long st[] = {-5, 0, 2, 3, 4, 5, 6, 299, 300, 301, 447, 449, 450, 451, 1000000};
    const long sw[] = {-1, -1, -1, 0, 0, 0, 1, 98, 99, 99, 148, 148, 149, 149, 149};
    ok = 1;
    for (size_t i = 0; i < sizeof st / sizeof *st; i++) {
        const long got = session_history_step_at(h, st[i]);
        if (got != sw[i]) {
            ok = 0;
            printf("INFO step_at(%ld) = %ld, want %ld\n", st[i], got, sw[i]);
        }
    }
    check(ok, "step_at: before the first row -1, exact rows, between rows, after the last");
    /* events at steps 10, 150, 150, 200, 300, 301, 460 */
    struct {
        long step;
        int before, after;
        long first, last;
    } ea[] = {
        {0, 2, 2, 0, 2},                         /* start: position 0 */
        {9, 5, 1, 0, 1},      {10, 1, 1, 0, 2},  /* position 1 (after the event at 10) */
        {150, 2, 2, 1, 5},                       /* position 3: both step-150 events are before it */
        {200, 1, 3, 3, 7},                       /* position 4 */
        {301, 0, 0, 6, 6},    {460, 3, 3, 4, 7}, /* end: position 7 */
        {100000, 2, 5, 5, 7}, {100000, 100, 100, 0, 7}, {150, -3, -3, 3, 3}, /* negative windows count as 0 */
    };
    ok = 1;
    for (size_t i = 0; i < sizeof ea / sizeof *ea; i++) {
        long a = -9, b = -9;
        session_history_events_around(h, ea[i].step, ea[i].before, ea[i].after, &a, &b);
        if (a != ea[i].first || b != ea[i].last) {
            ok = 0;
            printf("INFO events_around(%ld, %d, %d) = [%ld, %ld), want [%ld, %ld)\n", ea[i].step, ea[i].before,
                   ea[i].after, a, b, ea[i].first, ea[i].last);
        }
    }
    check(ok, "events_around: windows at the start, middle (several events at one step) and end, clamped");
    SessionHistory empty;
    memset(&empty, 0, sizeof empty);
    long a = -9, b = -9;
    session_history_events_around(&empty, 5, 2, 2, &a, &b);
    check(session_history_eval_at_epoch(&empty, 3) == -1 && session_history_step_at(&empty, 5) == -1 && a == 0 &&
              b == 0,
          "an empty history: -1, -1, [0, 0)");
}

static void test_tsne(const SessionHistory *h) {
    int ok = 1;
    for (int j = 0; j < h->nevals; j++) {
        float *f = NULL;
        int *e = NULL, *l = NULL, n = 0, d = 0;
        const ml_status st = session_history_tsne(h, j, &f, &e, &l, &n, &d);
        ok = ok && st == ML_OK && n == g_tn && d == g_fd && f && e && l &&
             !memcmp(f, g_feat[j], sizeof(float) * (size_t)n * d) && !memcmp(e, g_tex[j], sizeof(int) * (size_t)n) &&
             !memcmp(l, g_tla[j], sizeof(int) * (size_t)n);
        if (st != ML_OK) printf("INFO tsne(%d): %s\n", j, ml_last_error());
        ml_free(f);
        ml_free(e);
        ml_free(l);
    }
    check(ok && h->nevals == NEV,
          "session_history_tsne returns the %d x %d features, experts and labels of each of the "
          "%d evaluations",
          g_tn, g_fd, h->nevals);
    float *f = (float *)1;
    int *e = (int *)1, *l = (int *)1, n = 7, d = 7;
    ml_status st = session_history_tsne(h, -1, &f, &e, &l, &n, &d);
    check(st == ML_ERR_ARG && !f && !e && !l && n == 0 && d == 0 && ml_last_error()[0],
          "ev = -1: ML_ERR_ARG, outputs cleared (\"%s\")", ml_last_error());
    st = session_history_tsne(h, h->nevals, &f, &e, &l, &n, &d);
    check(st == ML_ERR_ARG, "ev = nevals: ML_ERR_ARG (\"%s\")", ml_last_error());
    st = session_history_tsne(NULL, 0, &f, &e, &l, &n, &d);
    check(st == ML_ERR_ARG, "no history: ML_ERR_ARG");
}

/* ------------------------------------------------------------------ 4: real trainer runs */

typedef struct {
    const char *name;
    HeadKind head;
    float cf;
    int tsne;
} RealRun;

static void test_real_run(const Dataset *ds, const RealRun *rr) {
    TrainConfig cfg;
    local_config(&cfg, rr->head);
    cfg.epochs = 1;
    cfg.model.head.cf = rr->cf;
    cfg.tsne_samples = rr->tsne;
    Trainer t;
    if (trainer_init_ds(&t, &cfg, ds) != ML_OK) {
        check(0, "%s: trainer_init: %s", rr->name, ml_last_error());
        return;
    }
    char dir[512];
    char sub[64];
    snprintf(sub, sizeof sub, "real-%s", rr->name);
    path_in(dir, sizeof dir, sub);
    SessionWriter w;
    if (create_session(&w, &t, dir, rr->name) != 0) {
        check(0, "%s: session_create", rr->name);
        trainer_free(&t);
        return;
    }
    const int moe = rr->head != HEAD_DENSE;
    enum { MAXS = 16 };
    StepRecord rec[MAXS];
    EvalCopy evc[2];
    memset(evc, 0, sizeof evc);
    int ns = 0, nev = 0, errors = 0;
    while (t.epoch < cfg.epochs && ns < MAXS) {
        if (moe && t.step == 4) {
            TrainerCmd c;
            memset(&c, 0, sizeof c);
            c.kind = CMD_SET;
            c.param = PARAM_TAU;
            c.value = 0.3;
            snprintf(c.text, sizeof c.text, "set tau 0.3");
            errors += trainer_apply(&t, &c) != ML_OK;
            errors += session_append_event(&w, t.step, 0, c.text) != ML_OK;
        }
        if (trainer_step(&t, &rec[ns]) != ML_OK) {
            errors++;
            break;
        }
        errors += session_append_step(&w, &rec[ns]) != ML_OK;
        ns++;
    }
    for (int j = 0; j < 2; j++) { /* the end-of-epoch evaluation and an `eval` command after it */
        EvalRecord er;
        if (trainer_eval_record(&t, &er, 0.25) != ML_OK) {
            errors++;
            break;
        }
        er.epoch_seconds = 1.5 + j;
        eval_copy(&evc[nev++], &er);
        errors += session_append_eval(&w, &er) != ML_OK;
    }
    errors += session_close(&w, "interrupted") != ML_OK;
    SessionHistory h;
    ml_status st = session_history_load(dir, &h);
    check(st == ML_OK && !errors && h.nsteps == ns && h.nevals == nev && h.nevents == (moe ? 1 : 0),
          "%s: trained %d steps, %d evals, loaded %ld / %d / %ld: %s", rr->name, ns, nev, h.nsteps, h.nevals, h.nevents,
          st ? ml_last_error() : "ok");
    if (st == ML_OK && h.nsteps == ns && h.nevals == nev) {
        long bad = -1;
        const char *what = NULL;
        int dropless = 0;
        for (int i = 0; i < ns && bad < 0; i++) {
            StepRecord want = rec[i];
            want.moe.first_share = 0; /* not stored */
            if ((what = step_diff(&h.steps[i], &want))) bad = i;
            dropless += h.steps[i].moe.dropless;
        }
        check(bad < 0, "%s: the loaded StepRecords equal the published ones (dropless %d/%d, capacity %d)%s%s",
              rr->name, dropless, ns, h.steps[0].moe.capacity, what ? ": differs in " : "", what ? what : "");
        if (bad >= 0) printf("INFO first difference at row %ld\n", bad);
        int ebad = -1;
        what = NULL;
        for (int j = 0; j < nev && ebad < 0; j++) {
            EvalRecord want = evc[j].r;
            want.moe.window_first_share = 0; /* not stored */
            if ((what = eval_diff(&h.evals[j], &want))) ebad = j;
        }
        check(ebad < 0, "%s: the loaded EvalRecords equal the published ones (classes %d, experts %d, tsne_n %d)%s%s",
              rr->name, h.evals[0].moe.classes, h.evals[0].moe.experts, h.evals[0].moe.tsne_n, what ? ": differs in " : "",
              what ? what : "");
        check(session_history_eval_at_epoch(&h, 1) == 0, "%s: eval_at_epoch(1) is the end-of-epoch evaluation",
              rr->name);
        check(h.log_every == 1 && !strcmp(h.info.status, "interrupted"), "%s: log_every %d, status %s", rr->name,
              h.log_every, h.info.status);
        float *f = NULL;
        int *e = NULL, *l = NULL, n = 0, d = 0;
        st = session_history_tsne(&h, 1, &f, &e, &l, &n, &d);
        if (moe && rr->tsne > 0) {
            check(st == ML_OK && n == evc[1].r.moe.tsne_n && d == evc[1].r.moe.feat_dim &&
                      !memcmp(f, evc[1].feat, sizeof(float) * (size_t)n * d) &&
                      !memcmp(e, evc[1].tex, sizeof(int) * (size_t)n) &&
                      !memcmp(l, evc[1].tla, sizeof(int) * (size_t)n),
                  "%s: t-SNE sample of eval 1 equals the trainer's (%d x %d)", rr->name, n, d);
        } else {
            check(st == ML_ERR_ARG && !f, "%s: no t-SNE sample: ML_ERR_ARG (\"%s\")", rr->name, ml_last_error());
        }
        ml_free(f);
        ml_free(e);
        ml_free(l);
        if (!moe)
            check(h.E == 0 && h.ce == NULL && !h.steps[0].has_moe && !h.evals[0].has_moe &&
                      h.evals[0].moe.class_expert == NULL && h.K == 4 && h.class_names && !strcmp(h.info.head, "dense"),
                  "dense: E = 0, ce NULL, has_moe 0 in steps and evals, K = %d, head %s", h.K, h.info.head);
    }
    session_history_free(&h);
    check(history_empty(&h), "%s: session_history_free leaves the history empty", rr->name);
    session_history_free(&h);
    for (int j = 0; j < nev; j++) eval_copy_free(&evc[j]);
    trainer_free(&t);
}

/* A collapsed evaluation: a trained moe trainer whose router is overwritten so that every test
 * sample's first choice is expert 2 (row 2 = +1, the others -1, on non-negative pooled features;
 * the second choice is then the lowest-index tie, expert 0). The evaluation routing columns say
 * so, are in live.h5 and are read back by the loader; the healthy evaluation before it is not. */
static void test_collapsed_eval(const Dataset *ds) {
    TrainConfig cfg;
    local_config(&cfg, HEAD_MOE);
    cfg.epochs = 1;
    Trainer t;
    if (trainer_init_ds(&t, &cfg, ds) != ML_OK) {
        check(0, "collapsed eval: trainer_init: %s", ml_last_error());
        return;
    }
    char dir[512];
    path_in(dir, sizeof dir, "collapsed-eval");
    SessionWriter w;
    if (create_session(&w, &t, dir, "collapsed-eval") != 0) {
        check(0, "collapsed eval: session_create");
        trainer_free(&t);
        return;
    }
    int errors = 0;
    for (int i = 0; i < 6; i++) {
        StepRecord rec;
        errors += trainer_step(&t, &rec) != ML_OK;
        errors += session_append_step(&w, &rec) != ML_OK;
    }
    const int E = cfg.model.head.E, k = cfg.model.head.k, d = t.model.d;
    EvalRecord er[2];
    errors += trainer_eval_record(&t, &er[0], 0.1) != ML_OK;
    errors += session_append_eval(&w, &er[0]) != ML_OK;
    float *router = t.model.moe_p.router;
    for (int e = 0; e < E; e++)
        for (int i = 0; i < d; i++) router[e * d + i] = e == 2 ? 1.0f : -1.0f;
    errors += trainer_eval_record(&t, &er[1], 0.1) != ML_OK;
    errors += session_append_eval(&w, &er[1]) != ML_OK;
    errors += session_close(&w, "interrupted") != ML_OK;
    check(!errors && er[1].moe.test_first_share == 1.0 && er[1].moe.test_dead_first == E - 1 && er[1].moe.test_dead_topk == E - k &&
              er[1].moe.test_load_entropy == 0.0,
          "collapsed router: test first share %.3f, dead first %d/%d, dead among the k = %d selected %d/%d, "
          "test load entropy %.3f",
          er[1].moe.test_first_share, er[1].moe.test_dead_first, E, k, er[1].moe.test_dead_topk, E, er[1].moe.test_load_entropy);
    check(er[0].moe.test_first_share < 1.0 && er[0].moe.test_dead_first < E - 1 &&
              er[0].moe.test_dead_topk <= er[0].moe.test_dead_first,
          "before the overwrite: test first share %.3f, dead first %d/%d, dead top-k %d/%d", er[0].moe.test_first_share,
          er[0].moe.test_dead_first, E, er[0].moe.test_dead_topk, E);
    char file[600];
    snprintf(file, sizeof file, "%s/live.h5", dir);
    hid_t f = H5Fopen(file, H5F_ACC_RDONLY, H5P_DEFAULT);
    int present = f >= 0;
    const char *cols[] = {"/evals/test_first_share",   "/evals/test_dead_first", "/evals/test_dead_topk",
                          "/steps/clean_load_entropy", "/steps/clean_dead",      "/steps/first_agree"};
    for (int i = 0; i < 6 && f >= 0; i++) present &= H5Lexists(f, cols[i], H5P_DEFAULT) > 0;
    if (f >= 0) H5Fclose(f);
    check(present, "live.h5 has /evals/test_first_share, test_dead_first, test_dead_topk and the clean-router /steps");
    SessionHistory h;
    const ml_status st = session_history_load(dir, &h);
    check(st == ML_OK && h.nevals == 2 && h.evals[1].moe.test_first_share == 1.0 && h.evals[1].moe.test_dead_first == E - 1 &&
              h.evals[1].moe.test_dead_topk == E - k && h.evals[0].moe.test_first_share == er[0].moe.test_first_share &&
              h.evals[0].moe.test_dead_first == er[0].moe.test_dead_first && h.evals[0].moe.test_dead_topk == er[0].moe.test_dead_topk,
          "the history loader reads the evaluation routing columns back (%s)", st ? ml_last_error() : "ok");
    session_history_free(&h);
    trainer_free(&t);
}

/* ------------------------------------------------------------------ 5: damage */

static long copy_file(const char *src, const char *dst, long limit) {
    FILE *in = fopen(src, "rb"), *out = fopen(dst, "wb");
    long n = 0;
    if (in && out) {
        char buf[65536];
        size_t r;
        while ((limit < 0 || n < limit) && (r = fread(buf, 1, sizeof buf, in)) > 0) {
            if (limit >= 0 && n + (long)r > limit) r = (size_t)(limit - n);
            if (fwrite(buf, 1, r, out) != r) {
                n = -1;
                break;
            }
            n += (long)r;
        }
    } else {
        n = -1;
    }
    if (in) fclose(in);
    if (out) fclose(out);
    return n;
}

/* Loads `path` in a child process. Returns the child's code: 0 = failed cleanly with
 * `want` (or any error status if want == 1), a message, an empty history, a safe double free;
 * 10 = loaded (unexpectedly); 11 = wrong status or state; 128+ = crashed. The message goes to msg. */
static int load_in_child(const char *path, ml_status want, char *msg, size_t n) {
    int pfd[2];
    if (pipe(pfd)) return 200;
    fflush(stdout);
    const pid_t pid = fork();
    if (pid == 0) {
        close(pfd[0]);
        SessionHistory h;
        memset(&h, 0xAB, sizeof h); /* the loader must zero it */
        const ml_status st = session_history_load(path, &h);
        const char *m = ml_last_error();
        if (write(pfd[1], m, strlen(m)) < 0) _exit(12);
        close(pfd[1]);
        const int empty = history_empty(&h);
        session_history_free(&h);
        session_history_free(&h);
        if (st == ML_OK) _exit(10);
        _exit((want == 1 || st == want) && m[0] && empty ? 0 : 11);
    }
    close(pfd[1]);
    ssize_t r = read(pfd[0], msg, n - 1);
    msg[r > 0 ? r : 0] = 0;
    close(pfd[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

/* After a child survived it: the same failed load in this process, so that the leak checker of the
 * sanitizer build (which only runs at this process's exit) covers the error paths too. */
static int fails_here(const char *path) {
    SessionHistory h;
    const ml_status st = session_history_load(path, &h);
    const int ok = st != ML_OK && history_empty(&h);
    session_history_free(&h);
    return ok;
}

/* Opens a copy read-write with the plain HDF5 API (the test is the independent editor). */
static hid_t h5_edit(const char *path) {
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    H5Pset_libver_bounds(fapl, H5F_LIBVER_LATEST, H5F_LIBVER_LATEST);
    hid_t f = H5Fopen(path, H5F_ACC_RDWR, fapl);
    H5Pclose(fapl);
    return f;
}

static int h5_set_rows(hid_t f, const char *name, hsize_t rows) {
    hid_t d = H5Dopen2(f, name, H5P_DEFAULT);
    if (d < 0) return -1;
    hid_t s = H5Dget_space(d);
    hsize_t dims[4];
    const int r = H5Sget_simple_extent_dims(s, dims, NULL);
    H5Sclose(s);
    dims[0] = rows;
    const herr_t e = r >= 1 ? H5Dset_extent(d, dims) : -1;
    H5Dclose(d);
    return e < 0 ? -1 : 0;
}

static void test_damage(void) {
    char dir[512], file[600], msg[1024];
    path_in(dir, sizeof dir, "damaged");
    mkdir(dir, 0777);
    snprintf(file, sizeof file, "%s/live.h5", dir);
    struct stat sb;
    const long size = stat(g_hand_file, &sb) == 0 ? (long)sb.st_size : 0;
    const double fr[] = {0.02, 0.1, 0.3, 0.5, 0.7, 0.9, 0.99};
    int good = 0;
    for (size_t i = 0; i < sizeof fr / sizeof *fr; i++) {
        const long cut = (long)(size * fr[i]);
        copy_file(g_hand_file, file, cut);
        const int code = load_in_child(dir, ML_ERR_FORMAT, msg, sizeof msg);
        good += code == 0 && fails_here(dir);
        if (code) printf("INFO truncated to %ld bytes: child code %d, \"%s\"\n", cut, code, msg);
    }
    check(good == (int)(sizeof fr / sizeof *fr),
          "live.h5 (%ld bytes) truncated to 2..99%%: ML_ERR_FORMAT with a message, history empty, free safe, no crash "
          "(%d/%zu)",
          size, good, sizeof fr / sizeof *fr);

    FILE *g = fopen(file, "wb");
    uint64_t x = 88172645463325252ULL;
    for (int i = 0; i < 16384; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        fputc((int)(x & 255), g);
    }
    fclose(g);
    int code = load_in_child(file, ML_ERR_FORMAT, msg, sizeof msg);
    check(code == 0 && fails_here(file), "garbage bytes: ML_ERR_FORMAT \"%s\" (child code %d)", msg, code);

    char missing[600];
    path_in(missing, sizeof missing, "no-such-session");
    code = load_in_child(missing, ML_ERR_IO, msg, sizeof msg);
    check(code == 0 && strstr(msg, "no-such-session") && fails_here(missing),
          "missing session: ML_ERR_IO \"%s\" (child code %d)", msg, code);

    hid_t f = H5Fcreate(file, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    hsize_t one = 3;
    hid_t s = H5Screate_simple(1, &one, NULL);
    hid_t d = H5Dcreate2(f, "data", H5T_NATIVE_INT, s, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    H5Dclose(d);
    H5Sclose(s);
    H5Fclose(f);
    code = load_in_child(file, ML_ERR_FORMAT, msg, sizeof msg);
    check(code == 0 && strstr(msg, "not a moelab session") && fails_here(file),
          "an HDF5 file that is not a session: \"%s\" (child code %d)", msg, code);

    /* format_version 99, written over the root attribute */
    copy_file(g_hand_file, file, -1);
    f = h5_edit(file);
    int edited = 0;
    if (f >= 0) {
        hid_t a = H5Aopen(f, "format_version", H5P_DEFAULT);
        const int64_t v = 99;
        edited = a >= 0 && H5Awrite(a, H5T_NATIVE_INT64, &v) >= 0;
        if (a >= 0) H5Aclose(a);
        H5Fclose(f);
    }
    code = load_in_child(file, ML_ERR_FORMAT, msg, sizeof msg);
    check(edited && code == 0 && strstr(msg, "format_version 99") && fails_here(file),
          "format_version 99: \"%s\" (child code %d)", msg, code);

    /* a missing per-expert dataset */
    copy_file(g_hand_file, file, -1);
    f = h5_edit(file);
    edited = f >= 0 && H5Ldelete(f, "/steps/kept", H5P_DEFAULT) >= 0;
    if (f >= 0) H5Fclose(f);
    code = load_in_child(file, ML_ERR_FORMAT, msg, sizeof msg);
    check(edited && code == 0 && strstr(msg, "/steps/kept") && fails_here(file),
          "/steps/kept deleted: \"%s\" (child code %d)", msg, code);

    /* a dimension claiming 1e12 rows (a damaged header): a message, not a terabyte allocation */
    copy_file(g_hand_file, file, -1);
    f = h5_edit(file);
    edited = f >= 0 && h5_set_rows(f, "/steps/loss", 1000000000000ULL) == 0;
    if (f >= 0) H5Fclose(f);
    code = load_in_child(file, ML_ERR_FORMAT, msg, sizeof msg);
    check(edited && code == 0 && strstr(msg, "/steps/loss") && fails_here(file),
          "/steps/loss claiming 1e12 rows: \"%s\" (child code %d)", msg, code);

    /* ragged columns (a crash inside a block write): loads at the common length */
    copy_file(g_hand_file, file, -1);
    f = h5_edit(file);
    edited = f >= 0 && h5_set_rows(f, "/steps/loss", NS - 10) == 0 && h5_set_rows(f, "/steps/kept", NS - 20) == 0 &&
             h5_set_rows(f, "/steps/mean_gate", NS + 5) == 0 && h5_set_rows(f, "/evals/tsne_label", NEV - 1) == 0 &&
             h5_set_rows(f, "/evals/test_acc", NEV + 2) == 0;
    if (f >= 0) H5Fclose(f);
    SessionHistory h;
    ml_status st = session_history_load(file, &h);
    int same = st == ML_OK && h.nsteps == NS - 20 && h.nevals == NEV - 1;
    for (long i = 0; same && i < h.nsteps; i++) same = step_diff(&h.steps[i], &g_st[i]) == NULL;
    for (int j = 0; same && j < h.nevals; j++) same = eval_diff(&h.evals[j], &g_ev[j]) == NULL;
    check(edited && same,
          "ragged columns (loss %d rows, kept %d, mean_gate %d, tsne_label %d, test_acc %d): loads %ld "
          "steps and %d evals, equal to the written ones: %s",
          NS - 10, NS - 20, NS + 5, NEV - 1, NEV + 2, h.nsteps, h.nevals, st ? ml_last_error() : "ok");
    session_history_free(&h);

    st = session_history_load(NULL, &h);
    check(st == ML_ERR_ARG && history_empty(&h), "NULL path: ML_ERR_ARG, history empty");
    check(session_history_load(g_hand_dir, NULL) == ML_ERR_ARG, "NULL history: ML_ERR_ARG");
    session_history_free(NULL);
}

/* ------------------------------------------------------------------ 5b: the configuration JSON */

/* session_config_json -> session_config_parse: every number of the configuration comes back
 * exactly (floats as the same float, doubles as the same double), awkward values included. */
static void test_config_roundtrip(void) {
    TrainConfig c;
    local_config(&c, HEAD_MOE);
    c.model.width = 1.0f / 3.0f;
    c.model.bn_momentum = 0.1f;
    c.model.head.cf = FLT_MAX;
    c.model.head.eval_cf = -0.0f;
    c.model.head.bias_rate = FLT_TRUE_MIN;
    c.model.head.noise = 1e-30f;
    c.model.head.alpha = 0.01f;
    c.opt.eps = 1e-8f;
    c.lr.base = 16777217.0f; /* rounds to 16777216 */
    c.lr.milestones[0] = 0.3f;
    c.lr.milestones[1] = 0.7f;
    c.tau.tau1 = 0.1f;
    c.tau.tau_min = 1.17549435e-38f; /* FLT_MIN */
    c.tau.total = 123456789012L;
    c.route.entropy_min = 1.0 / 3.0;
    c.route.max_share = 0.1 + 0.2; /* 0.30000000000000004: a double that needs 17 digits */
    c.route.dead_frac = 5e-324;    /* the smallest double */
    c.seed = 9007199254740993ULL;  /* 2^53 + 1: an integer, not a double */
    static char js[8192];
    ml_status st = session_config_json(&c, "synthetic:16x16x3:4", js, sizeof js);
    json_t *cfg = st == ML_OK ? session_config_parse(js) : NULL;
    check(cfg != NULL, "config JSON written and parsed back (%zu bytes): %s", strlen(js), cfg ? "ok" : ml_last_error());
    const struct {
        const char *path;
        double want;
        int is_float;
    } f[] = {
        {"model.width", c.model.width, 1},
        {"model.bn_momentum", c.model.bn_momentum, 1},
        {"model.head.cf", c.model.head.cf, 1},
        {"model.head.eval_cf", c.model.head.eval_cf, 1},
        {"model.head.bias_rate", c.model.head.bias_rate, 1},
        {"model.head.noise", c.model.head.noise, 1},
        {"model.head.alpha", c.model.head.alpha, 1},
        {"model.head.beta", c.model.head.beta, 1},
        {"opt.momentum", c.opt.momentum, 1},
        {"opt.beta1", c.opt.beta1, 1},
        {"opt.beta2", c.opt.beta2, 1},
        {"opt.eps", c.opt.eps, 1},
        {"opt.wd", c.opt.wd, 1},
        {"lr.base", c.lr.base, 1},
        {"lr.gamma", c.lr.gamma, 1},
        {"warmup_epochs", c.warmup_epochs, 1},
        {"tau_epochs", c.tau_epochs, 1},
        {"tau.tau0", c.tau.tau0, 1},
        {"tau.tau1", c.tau.tau1, 1},
        {"tau.tau_min", c.tau.tau_min, 1},
        {"tau.s", c.tau.s, 1},
        {"tau.c", c.tau.c, 1},
        {"tau.step_gamma", c.tau.step_gamma, 1},
        {"route.entropy_min", c.route.entropy_min, 0},
        {"route.max_share", c.route.max_share, 0},
        {"route.dead_frac", c.route.dead_frac, 0},
        {"model.in_c", c.model.in_c, 0},
        {"model.head.E", c.model.head.E, 0},
        {"model.head.slots", c.model.head.slots, 0},
        {"lr.warmup", (double)c.lr.warmup, 0},
        {"tau.total", (double)c.tau.total, 0},
        {"epochs", c.epochs, 0},
        {"log_every", c.log_every, 0},
        {"route.window", c.route.window, 0},
        {"augment", c.augment, 0},
    };
    int bad = 0;
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) {
        double v = NAN;
        const int r = session_config_num(cfg, f[i].path, -HUGE_VAL, HUGE_VAL, &v);
        const int same = r == 1 && (f[i].is_float ? (float)v == (float)f[i].want && signbit(v) == signbit(f[i].want)
                                                  : v == f[i].want);
        if (!same) {
            printf("     %s: wrote %.17g, read %.17g (%d)\n", f[i].path, f[i].want, v, r);
            bad++;
        }
    }
    const json_t *ms = json_object_get(json_object_get(cfg, "lr"), "milestones");
    bad += (float)json_number_value(json_array_get(ms, 0)) != 0.3f ||
           (float)json_number_value(json_array_get(ms, 1)) != 0.7f;
    check(cfg && bad == 0, "every number of the configuration reads back exactly (%zu fields, milestones)",
          sizeof f / sizeof f[0]);
    check(strstr(js, "\"seed\": 9007199254740993,") && strstr(js, "\"tau1\": 0.10000000000000001,") &&
              strstr(js, "\"max_share\": 0.30000000000000004,"),
          "the seed as an integer; with a double that needs 17 digits every real has 17");
    json_decref(cfg);

    local_config(&c, HEAD_MOE); /* every value short: reals with the digits they need */
    c.model.head.cf = NAN;
    st = session_config_json(&c, "x", js, sizeof js);
    check(st == ML_OK && strstr(js, "\"tau1\": 0.1,") && strstr(js, "\"eps\": 1e-8,") &&
              strstr(js, "\"width\": 0.25,") && strstr(js, "\"cf\": null,") &&
              strstr(js, "\"milestones\": [0.5, 0.75]"),
          "short values stay short (0.1 for 0.1f, 1e-8), a NaN is null");
    /* a dataset spec that is not UTF-8 (JSON cannot hold it): U+FFFD for the bad byte */
    st = session_config_json(&c, "caf\xe9-\xc3\xa9", js, sizeof js);
    cfg = st == ML_OK ? session_config_parse(js) : NULL;
    char spec[64] = "";
    check(cfg && session_config_str(cfg, "dataset", spec, sizeof spec) == 1 &&
              !strcmp(spec, "caf\xef\xbf\xbd-\xc3\xa9"),
          "a Latin-1 byte in the dataset spec becomes U+FFFD, valid UTF-8 stays: '%s'", spec);
    json_decref(cfg);
}

/* Replaces /run@config_json of a copy of the hand-made session. */
static int set_config_json(const char *file, const char *text) {
    copy_file(g_hand_file, file, -1);
    hid_t f = h5_edit(file);
    if (f < 0) return -1;
    hid_t run = H5Gopen2(f, "/run", H5P_DEFAULT);
    hid_t t = H5Tcopy(H5T_C_S1), sp = H5Screate(H5S_SCALAR);
    H5Tset_size(t, strlen(text) + 1);
    H5Tset_strpad(t, H5T_STR_NULLTERM);
    H5Tset_cset(t, H5T_CSET_UTF8); /* as the writer (sessions/h5util.c) */
    int ok = run >= 0 && H5Adelete(run, "config_json") >= 0;
    hid_t a = ok ? H5Acreate2(run, "config_json", t, sp, H5P_DEFAULT, H5P_DEFAULT) : -1;
    ok = a >= 0 && H5Awrite(a, t, text) >= 0;
    if (a >= 0) H5Aclose(a);
    H5Sclose(sp);
    H5Tclose(t);
    if (run >= 0) H5Gclose(run);
    H5Fclose(f);
    return ok ? 0 : -1;
}

/* A live.h5 whose config_json is hostile (cut, damaged, wrong types, missing keys) or from the
 * old hand-written writer: it loads; what cannot be read is unknown (log_every from the spacing
 * of the rows, the launch cf unknown so dropless is capacity >= B), nothing crashes. */
static void test_config_damage(void) {
    char dir[512], file[600];
    path_in(dir, sizeof dir, "config");
    mkdir(dir, 0777);
    snprintf(file, sizeof file, "%s/live.h5", dir);
    char half[4096];
    snprintf(half, sizeof half, "%.*s", (int)(strlen(g_hand_json) / 2), g_hand_json);
    static char huge[70000]; /* longer than the 64 KiB the loader reads: cut */
    snprintf(huge, sizeof huge, "{\"log_every\": 7, \"dataset\": \"%65600d\"}", 0);
    const struct {
        const char *what, *text;
        int log_every, cf_known;
    } cases[] = {
        {"the old writer's text",
         "{\"dataset\": \"synthetic:16x16x3:4\", \"model\": {\"width\": 0.25, \"head\": {\"kind\": \"moe\", "
         "\"cf\": 1.25, \"noise\": 1}}, \"seed\": 18000000000000000001, \"log_every\": 7}",
         7, 1},
        {"cut in half", half, LOG_EVERY, 0},
        {"longer than 64 KiB", huge, LOG_EVERY, 0},
        {"strings for numbers", "{\"log_every\": \"7\", \"model\": {\"head\": {\"cf\": \"1.25\"}}}", LOG_EVERY, 0},
        {"out of range, wrong containers", "{\"log_every\": 1e300, \"model\": {\"head\": [1.25]}}", LOG_EVERY, 0},
        {"a fraction, a number for an object", "{\"log_every\": 2.5, \"model\": 3}", LOG_EVERY, 0},
        {"zero and negative", "{\"log_every\": 0, \"model\": {\"head\": {\"cf\": null}}}", LOG_EVERY, 0},
        {"missing keys", "{}", LOG_EVERY, 0},
        {"a key twice", "{\"log_every\": 7, \"log_every\": 8, \"model\": {\"head\": {\"cf\": 1.25}}}", LOG_EVERY, 0},
        {"an array", "[7, 1.25]", LOG_EVERY, 0},
        {"not JSON", "garbage \x01\xff {", LOG_EVERY, 0},
        {"empty", "", LOG_EVERY, 0},
    };
    int good = 0;
    const int n = (int)(sizeof cases / sizeof cases[0]);
    for (int i = 0; i < n; i++) {
        SessionHistory h;
        const int edited = set_config_json(file, cases[i].text) == 0;
        const ml_status st = session_history_load(file, &h);
        int dl[3] = {0, 0, 0};
        for (long r = 0; st == ML_OK && r < h.nsteps; r++)
            dl[h.steps[r].step <= 150 ? 0 : h.steps[r].step <= 300 ? 1 : 2] += h.steps[r].moe.dropless;
        /* cf known: dropless only between `set cf 0` and `set cf 3`; unknown: wherever C = B */
        const int dl_ok = dl[0] == 0 && dl[1] == 50 && dl[2] == (cases[i].cf_known ? 0 : 50);
        const int ok = edited && st == ML_OK && h.nsteps == NS && h.log_every == cases[i].log_every && dl_ok &&
                       !strncmp(h.config_json, cases[i].text, sizeof h.config_json - 1);
        if (!ok)
            printf("     %s: edited %d, %s, %ld rows, log_every %d, dropless %d/%d/%d\n", cases[i].what, edited,
                   st ? ml_last_error() : "loaded", h.nsteps, h.log_every, dl[0], dl[1], dl[2]);
        good += ok;
        session_history_free(&h);
    }
    check(good == n,
          "config_json cut, over 64 KiB, damaged, of wrong types, without keys, or by the old writer: the "
          "session loads, log_every and cf from it only when readable (%d/%d)",
          good, n);
}

/* ------------------------------------------------------------------ 6: reading while writing */

/* Child: for every line on stdin, loads FILE and prints "<st> <nsteps> <nevals> <nevents> <status>
 * <last step> <kept[0] of the last row>". */
static int live_reader_main(const char *file) {
    char line[64];
    while (fgets(line, sizeof line, stdin)) {
        SessionHistory h;
        const ml_status st = session_history_load(file, &h);
        if (st != ML_OK) printf("%d 0 0 0 error %s\n", (int)st, ml_last_error());
        else
            printf("0 %ld %d %ld %s %ld %d\n", h.nsteps, h.nevals, h.nevents, h.info.status,
                   h.nsteps ? h.steps[h.nsteps - 1].step : -1L, h.nsteps ? h.steps[h.nsteps - 1].moe.kept[0] : -1);
        fflush(stdout);
        session_history_free(&h);
    }
    return 0;
}

static int child_start(Child *c, const char *file) {
    return child_start_mode(c, "test_history", "--live-reader", file);
}

/* Asks the child to load; returns its line in buf. */
static void child_load(Child *c, char *buf, size_t n) {
    buf[0] = 0;
    fputs("load\n", c->to);
    fflush(c->to);
    if (!fgets(buf, (int)n, c->from)) buf[0] = 0;
    buf[strcspn(buf, "\n")] = 0;
}

static void test_live_read(const Trainer *t) {
    char dir[512], file[600];
    path_in(dir, sizeof dir, "live");
    snprintf(file, sizeof file, "%s/live.h5", dir);
    SessionWriter w;
    if (create_session(&w, t, dir, "live") != 0) {
        check(0, "live: session_create");
        return;
    }
    int errors = 0;
    for (int i = 0; i < 70; i++) errors += session_append_step(&w, &g_st[i]) != ML_OK;
    errors += session_append_event(&w, 10, evt_wall(0), "set tau 0.3") != ML_OK;
    errors += session_append_eval(&w, &g_ev[0]) != ML_OK; /* flushes the 70 steps */
    errors += session_append_event(&w, 150, evt_wall(1), "set cf 0") != ML_OK;
    Child c;
    if (child_start(&c, file) != 0) {
        check(0, "reader process started");
        session_close(&w, NULL);
        return;
    }
    char line[512], want[512];
    child_load(&c, line, sizeof line);
    snprintf(want, sizeof want, "0 70 1 2 running %ld %d", g_st[69].step, g_st[69].moe.kept[0]);
    check(!strcmp(line, want), "reader process, writer open: \"%s\" (want \"%s\")", line, want);
    for (int i = 70; i < 120; i++) errors += session_append_step(&w, &g_st[i]) != ML_OK;
    errors += session_flush(&w) != ML_OK;
    child_load(&c, line, sizeof line);
    snprintf(want, sizeof want, "0 120 1 2 running %ld %d", g_st[119].step, g_st[119].moe.kept[0]);
    check(!strcmp(line, want), "after a flush the next load sees 120 rows: \"%s\"", line);
    for (int i = 120; i < 125; i++) errors += session_append_step(&w, &g_st[i]) != ML_OK;
    child_load(&c, line, sizeof line);
    check(!strcmp(line, want), "buffered (unflushed) rows are not visible yet: \"%s\"", line);
    errors += session_append_eval(&w, &g_ev[1]) != ML_OK;
    errors += session_close(&w, "finished") != ML_OK;
    child_load(&c, line, sizeof line);
    snprintf(want, sizeof want, "0 125 2 2 finished %ld %d", g_st[124].step, g_st[124].moe.kept[0]);
    check(!strcmp(line, want), "after the close: \"%s\"", line);
    const int rc = child_finish(&c);
    check(errors == 0 && rc == 0, "writer without errors, reader exits cleanly (%d)", rc);
}

/* ------------------------------------------------------------------ main */

int main(int argc, char **argv) {
    if (argc == 3 && !strcmp(argv[1], "--live-reader")) return live_reader_main(argv[2]);
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    snprintf(g_root, sizeof g_root, "/tmp/moelab-history-XXXXXX");
    if (!mkdtemp(g_root)) {
        printf("FAIL mkdtemp: %s\n", strerror(errno));
        return 1;
    }
    Dataset ds;
    if (make_dataset(&ds) != 0) {
        printf("FAIL synthetic_generate: %s\n", ml_last_error());
        return 1;
    }

    Trainer t;
    memset(&t, 0, sizeof t);
    double t0 = 0, t1 = 0;
    if (write_hand_session(&ds, &t, &t0, &t1) == 0) {
        SessionHistory h;
        ml_status st = session_history_load(g_hand_dir, &h);
        check(st == ML_OK, "session_history_load(session folder): %s", st ? ml_last_error() : "ok");
        if (st == ML_OK) {
            test_roundtrip(&h, &t, t0, t1);
            test_scrubber(&h);
            test_tsne(&h);
        }
        session_history_free(&h);
        st = session_history_load(g_hand_file, &h);
        check(st == ML_OK && h.nsteps == NS, "session_history_load(path to the .h5 file) works too");
        session_history_free(&h);
        test_damage();
        test_config_damage();
        test_live_read(&t);
    }
    trainer_free(&t);

    const RealRun runs[] = {
        {"moe", HEAD_MOE, 1.25f, 16},
        {"moe-dropless", HEAD_MOE, 0.0f, 0},
        {"softmoe-batch", HEAD_SOFTMOE_BATCH, 1.25f, 16},
        {"dense", HEAD_DENSE, 1.25f, 16},
    };
    for (size_t i = 0; i < sizeof runs / sizeof *runs; i++) test_real_run(&ds, &runs[i]);
    test_collapsed_eval(&ds);
    test_config_roundtrip();

    for (int j = 0; j < NEV; j++) {
        free(g_ce[j]);
        free(g_feat[j]);
        free(g_tex[j]);
        free(g_tla[j]);
    }
    dataset_free(&ds);
    if (n_failed == 0 && !getenv("MOELAB_TEST_KEEP")) {
        char cmd[300];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_root);
        if (system(cmd) != 0) printf("INFO could not remove %s\n", g_root);
    } else {
        printf("INFO files kept in %s\n", g_root);
    }
    printf("%s: %d of %d checks failed\n", n_failed ? "FAIL" : "PASS", n_failed, n_checks);
    return n_failed ? 1 : 0;
}
