/* test_follow.c — sessions/follow.c: following a live.h5 a writer is appending to gives exactly
 * the records of a whole re-read.
 *
 * This process writes a session (hand-made step, evaluation and event records through
 * SessionWriter) in rounds; two reader processes (this program re-executed, so each has its own
 * HDF5 state) read it after every round:
 *   - the follower loads the history once, then only polls (session_follow_poll);
 *   - the reference re-reads the whole file each time (session_history_load, file closed between).
 * After each round both print a digest of everything the history holds (every step, evaluation
 * and event record byte for byte, the class x expert matrices, the wall times, the summary) and
 * the digests must be equal; the follower must have appended exactly the rows flushed in the round
 * and nothing for a round whose rows are still buffered. The rounds cover several step blocks, a
 * `set cf 0` event in one poll and the steps it makes dropless in the next (the reconstruction
 * walks events already held), evaluations with their matrices (the eval arrays grow past their
 * first capacity), the close ("finished" seen by the follower), and a resume that drops rows: the
 * poll then fails (the caller re-reads) and a new follower again matches the reference.
 *
 * `test_follow --follow FILE` and `test_follow --full FILE` are the two readers. */
#define _GNU_SOURCE

#include "check.h"
#include "child.h"
#include "trainer_util.h"
#include "datasets/dataset.h"
#include "sessions/history.h"

#include <errno.h>
#include <hdf5.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define K_CLASSES 4
#define E_EXPERTS 4
#define BATCH 32

/* ------------------------------------------------------------------ the digest */

static uint64_t fnv(uint64_t h, const void *p, size_t n) {
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

/* One line: counts, summary and a hash of the steps, the evaluations and the events. */
static void digest(const SessionHistory *h, char *out, size_t n) {
    uint64_t hs = 1469598103934665603ull, he = hs, hv = hs;
    for (long i = 0; i < h->nsteps; i++) {
        hs = fnv(hs, &h->steps[i], sizeof h->steps[i]);
        hs = fnv(hs, &h->step_wall[i], sizeof h->step_wall[i]);
    }
    for (int i = 0; i < h->nevals; i++) {
        EvalRecord e;
        memcpy(&e, &h->evals[i], sizeof e);
        if (e.moe.class_expert) he = fnv(he, e.moe.class_expert, sizeof(int) * (size_t)e.moe.classes * (size_t)e.moe.experts);
        e.moe.class_expert = NULL; /* pointers into each reader's own arrays */
        e.moe.tsne_feat = NULL;
        e.moe.tsne_expert = NULL;
        e.tsne_label = NULL;
        for (int l = 0; l < e.nlayers && l < REC_MAX_LAYERS; l++) { /* each routed layer's matrix, by value */
            EvalLayer *el = &e.layer[l];
            if (el->class_expert)
                he = fnv(he, el->class_expert, sizeof(int) * (size_t)el->classes * (size_t)el->experts);
            el->class_expert = NULL;
            el->tsne_feat = NULL;
            el->tsne_expert = NULL;
        }
        he = fnv(he, &e, sizeof e);
        he = fnv(he, &h->eval_wall[i], sizeof h->eval_wall[i]);
    }
    for (long i = 0; i < h->nevents; i++) {
        hv = fnv(hv, &h->events[i].step, sizeof h->events[i].step);
        hv = fnv(hv, &h->events[i].wall_time, sizeof h->events[i].wall_time);
        hv = fnv(hv, h->events[i].text, strlen(h->events[i].text));
    }
    const SessionInfo *f = &h->info;
    snprintf(
        out, n,
        "steps %ld evals %d events %ld status %s last_step %ld last_epoch %d last %.6f best %.6f@%d | %016llx %016llx %016llx",
        h->nsteps, h->nevals, h->nevents, f->status, f->last_step, f->last_epoch, f->last_test_acc, f->best_test_acc,
        f->best_epoch, (unsigned long long)hs, (unsigned long long)he, (unsigned long long)hv);
}

/* ------------------------------------------------------------------ the readers */

/* --full: for every line, a whole load. --follow: "open" loads and starts following, "poll"
 * polls ("<st> <added> <digest>"), "reopen" closes the follower and does "open" again. */
static int reader_main(const char *mode, const char *file) {
    const int follow = !strcmp(mode, "--follow");
    SessionHistory h;
    memset(&h, 0, sizeof h);
    SessionFollow *fw = NULL;
    char line[64], d[512];
    while (fgets(line, sizeof line, stdin)) {
        ml_status st = ML_OK;
        long added = 0;
        if (!follow || !strncmp(line, "open", 4) || !strncmp(line, "reopen", 6)) {
            session_follow_close(fw);
            fw = NULL;
            session_history_free(&h);
            st = session_history_load(file, &h);
            if (st == ML_OK && follow && !(fw = session_follow_open(&h))) st = ML_ERR_IO;
            added = h.nsteps + h.nevals + h.nevents;
        } else if (!fw) {
            st = ML_ERR_ARG;
        } else {
            st = session_follow_poll(fw, &h, &added);
        }
        digest(&h, d, sizeof d);
        printf("%d %ld %s\n", (int)st, added, st == ML_OK ? d : ml_last_error());
        fflush(stdout);
        if (!follow) session_history_free(&h);
    }
    SessionFollowStats s;
    session_follow_stats(fw, &s);
    if (follow) fprintf(stderr, "follower: %ld polls, %ld rows, %ld failed\n", s.polls, s.rows, s.fails);
    session_follow_close(fw);
    session_history_free(&h);
    return 0;
}

static void ask(Child *c, const char *cmd, int *st, long *added, char *d, size_t n) {
    char buf[700] = "";
    fprintf(c->to, "%s\n", cmd);
    fflush(c->to);
    if (!fgets(buf, sizeof buf, c->from)) buf[0] = 0;
    buf[strcspn(buf, "\n")] = 0;
    *st = -99;
    *added = -1;
    int used = 0;
    if (sscanf(buf, "%d %ld %n", st, added, &used) < 2) used = 0;
    snprintf(d, n, "%s", buf + used);
}

/* ------------------------------------------------------------------ the writer's records */

static StepRecord step_rec(long i, int dropless) {
    StepRecord r;
    memset(&r, 0, sizeof r);
    r.step = 2 * (i + 1);
    r.epoch = 1 + (int)(r.step / 100);
    r.epoch_progress = (double)(r.step % 100) / 100.0;
    r.loss = 2.0 / (double)(i + 1) + 1e-12 * (double)i;
    r.loss_total = r.loss + 0.01;
    r.acc = (double)i / 1000.0;
    r.lr = 1e-3f;
    r.tau = 1.0f - 0.001f * (float)i;
    r.img_per_s = 1000.0 + (double)i;
    r.has_moe = 1;
    MoeStepStats *m = &r.moe;
    m->B = BATCH;
    m->E = E_EXPERTS;
    m->k = 2;
    m->training = 1;
    m->tau = r.tau;
    m->capacity = dropless ? BATCH : 20;
    for (int e = 0; e < E_EXPERTS; e++) {
        m->demand[e] = (int)((i * 7 + e * 5) % 40);
        m->kept[e] = m->demand[e] < m->capacity ? m->demand[e] : m->capacity;
        m->mean_gate[e] = 0.25f + 1e-4f * (float)i;
        m->bias[e] = -0.001f * (float)i * (float)(e + 1);
    }
    m->drop_frac = (double)(i % 11) / 64.0;
    m->load_entropy = 0.99 - (double)i * 1e-4;
    r.rho_realized = 0.2 + 0.001 * (double)i;
    r.dead_experts = (int)(i % 3);
    return r;
}

static int g_ce[128][K_CLASSES * E_EXPERTS]; /* (the test writes 83 evaluations) */

static EvalRecord eval_rec(int j, long step) {
    EvalRecord r;
    memset(&r, 0, sizeof r);
    r.epoch = j + 1;
    r.step = step;
    r.train_loss = 1.5 - 0.01 * j;
    r.test_loss = 1.6 - 0.01 * j;
    r.test_acc = j == 3 ? 0.93 : 0.4 + 0.005 * j; /* best at j = 3 */
    r.has_moe = 1;
    r.moe.classes = K_CLASSES;
    r.moe.experts = E_EXPERTS;
    r.moe.mutual_info = 0.1 * j;
    int *ce = g_ce[j % 128];
    for (int c = 0; c < K_CLASSES * E_EXPERTS; c++) ce[c] = 100 * j + c;
    r.moe.class_expert = ce;
    return r;
}

/* ------------------------------------------------------------------ the test */

/* small_config (trainer_util.h) and what this test changes. */
static void local_config(TrainConfig *c) {
    small_config(c, HEAD_MOE);
    c->model.batch = BATCH;
    c->model.head.E = E_EXPERTS;
    c->threads = 1;
    c->log_every = 2;
    c->tsne_samples = 0;
}

typedef struct {
    SessionWriter w;
    long nsteps;
    int nevals, errors;
    int dropless;
} Writer;

static void w_steps(Writer *W, int n) {
    for (int i = 0; i < n; i++) {
        const StepRecord r = step_rec(W->nsteps++, W->dropless);
        W->errors += session_append_step(&W->w, &r) != ML_OK;
    }
}
static void w_eval(Writer *W) {
    const EvalRecord r = eval_rec(W->nevals++, 2 * W->nsteps);
    W->errors += session_append_eval(&W->w, &r) != ML_OK;
}
static void w_event(Writer *W, const char *text) {
    W->errors += session_append_event(&W->w, 2 * W->nsteps, 0, text) != ML_OK;
}

/* Polls the follower and re-reads in the reference; both must agree, and the follower must
 * have appended `want` rows (< 0: any). */
static void compare(Child *fo, Child *fu, const char *round, long want) {
    int s1, s2;
    long a1, a2;
    char d1[600], d2[600];
    ask(fo, "poll", &s1, &a1, d1, sizeof d1);
    ask(fu, "load", &s2, &a2, d2, sizeof d2);
    check(s1 == 0 && s2 == 0, "%s: follower %d, reference %d (%s | %s)", round, s1, s2, s1 ? d1 : "ok", s2 ? d2 : "ok");
    check(!strcmp(d1, d2), "%s: the followed history equals a whole re-read\n    follow: %s\n    full:   %s", round, d1,
          d2);
    if (want >= 0) check(a1 == want, "%s: the poll appended %ld rows (want %ld)", round, a1, want);
}

int main(int argc, char **argv) {
    if (argc == 3 && (!strcmp(argv[1], "--follow") || !strcmp(argv[1], "--full"))) return reader_main(argv[1], argv[2]);
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    char root[256], dir[300], file[320];
    snprintf(root, sizeof root, "/tmp/moelab-follow-XXXXXX");
    if (!mkdtemp(root)) {
        printf("FAIL mkdtemp: %s\n", strerror(errno));
        return 1;
    }
    snprintf(dir, sizeof dir, "%s/s", root);
    snprintf(file, sizeof file, "%s/live.h5", dir);
    SyntheticOptions o;
    synthetic_defaults(&o);
    o.h = 16;
    o.w = 16;
    o.c = 3;
    o.classes = K_CLASSES;
    o.n_train = 128;
    o.n_test = 32;
    Dataset ds;
    if (synthetic_generate(&ds, &o) != ML_OK) {
        printf("FAIL synthetic_generate: %s\n", ml_last_error());
        return 1;
    }
    TrainConfig cfg;
    local_config(&cfg);
    Trainer t;
    memset(&t, 0, sizeof t);
    if (trainer_init_ds(&t, &cfg, &ds) != ML_OK) {
        printf("FAIL trainer_init: %s\n", ml_last_error());
        return 1;
    }
    SessionInfo info;
    memset(&info, 0, sizeof info);
    info.run = test_run(&t);
    info.command_line = "test_follow";
    info.dataset_spec = "synthetic:16x16x3:4";
    Writer W;
    memset(&W, 0, sizeof W);
    if (session_create(&W.w, dir, &info) != ML_OK) {
        printf("FAIL session_create: %s\n", ml_last_error());
        return 1;
    }
    /* round 0: the history before following */
    w_steps(&W, 70);
    w_event(&W, "set tau 0.5");
    w_eval(&W); /* flushes */
    Child fo, fu;
    if (child_start_mode(&fo, "test_follow", "--follow", file) ||
        child_start_mode(&fu, "test_follow", "--full", file)) {
        printf("FAIL reader processes\n");
        return 1;
    }
    int st;
    long added;
    char d[600];
    ask(&fo, "open", &st, &added, d, sizeof d);
    check(st == 0 && added == 70 + 1 + 1, "follower opened on 70 steps, 1 eval, 1 event (%d: %s)", st, d);
    compare(&fo, &fu, "no new rows", 0);

    /* round 1: two full step blocks and a partial one, flushed */
    w_steps(&W, 150);
    W.errors += session_flush(&W.w) != ML_OK;
    compare(&fo, &fu, "round 1 (150 steps)", 150);
    /* round 2: rows still buffered are not seen by either */
    w_steps(&W, 5);
    compare(&fo, &fu, "round 2 (5 buffered steps)", 0);
    /* round 3: `set cf 0` (an event: flushed at once) with the buffered steps */
    w_event(&W, "set cf 0");
    W.dropless = 1;
    compare(&fo, &fu, "round 3 (set cf 0)", -1);
    /* round 4: the steps after it are dropless (the reconstruction uses the event held) */
    w_steps(&W, 40);
    w_eval(&W);
    compare(&fo, &fu, "round 4 (dropless steps, an eval)", -1);
    /* rounds 5..: many evaluations, several per poll (the eval arrays grow past their capacity) */
    for (int r = 0; r < 4; r++) {
        for (int k = 0; k < 20; k++) {
            w_steps(&W, 3);
            w_eval(&W);
        }
        w_event(&W, "note: a round");
        char name[64];
        snprintf(name, sizeof name, "round %d (20 evals, 60 steps, 1 event)", 5 + r);
        compare(&fo, &fu, name, -1);
    }
    /* the close */
    W.errors += session_close(&W.w, "finished") != ML_OK;
    compare(&fo, &fu, "after the close (finished)", -1);
    ask(&fo, "poll", &st, &added, d, sizeof d);
    check(st == 0 && strstr(d, "status finished") && strstr(d, "best 0.930000@4"),
          "follower sees finished, best 0.93 at epoch 4: %s", d);
    char want[64];
    snprintf(want, sizeof want, "steps %ld evals %d events 6 ", W.nsteps, W.nevals);
    check(st == 0 && !strncmp(d, want, strlen(want)), "follower holds every row (%s): %s", want, d);

    /* a resume that drops the rows after step 200: the poll must fail, a new follower match */
    SessionLock lk;
    if (session_lock(dir, &lk) == ML_OK) {
        const ml_status so = session_open_append(&W.w, dir, 200);
        check(so == ML_OK, "resume at step 200: %s", so ? ml_last_error() : "ok");
        if (so == ML_OK) {
            w_steps(&W, 3);
            W.errors += session_flush(&W.w) != ML_OK;
            ask(&fo, "poll", &st, &added, d, sizeof d);
            check(st != 0, "after a resume dropped rows the poll fails (%d: %s)", st, d);
            ask(&fo, "reopen", &st, &added, d, sizeof d);
            compare(&fo, &fu, "a new follower after the resume", 0);
            W.errors += session_close(&W.w, "finished") != ML_OK;
        }
        session_unlock(&lk);
    } else {
        check(0, "session_lock: %s", ml_last_error());
    }
    check(W.errors == 0, "writer without errors (%d)", W.errors);
    const int r2 = child_finish(&fu), r1 = child_finish(&fo); /* fu holds fo's pipes (forked after it) */
    check(r1 == 0 && r2 == 0, "readers exit cleanly (%d, %d)", r1, r2);
    trainer_free(&t);
    dataset_free(&ds);
    if (n_failed == 0) {
        char cmd[300];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
        if (system(cmd) != 0) printf("INFO could not remove %s\n", root);
    } else {
        printf("INFO files kept in %s\n", root);
    }
    printf("%s: %d of %d checks failed\n", n_failed ? "FAIL" : "PASS", n_failed, n_checks);
    return n_failed ? 1 : 0;
}
