/* tui_worker.c — the trainer thread of the live screen and its queues (see tui_worker.h).
 *
 * Locking: w->mu guards the queues and w->st. The thread never holds it while it trains,
 * evaluates, applies a command or calls a hook; the UI holds it only to copy queues out. */
#include "tui_worker.h"

#include <errno.h>
#include <math.h>
#include <omp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>

static double wall_now(void) {
    struct timeval tv;
    gettimeofday(&tv, NULL);
    return (double)tv.tv_sec + tv.tv_usec * 1e-6;
}

/* One byte to the UI unless a wake-up is already pending (EAGAIN: the pipe is full anyway). */
static void worker_wake(TuiWorker *w) {
    if (w->wake_fd < 0 || atomic_exchange(&w->wake_pending, 1)) return;
    ssize_t r;
    do r = write(w->wake_fd, "w", 1); while (r < 0 && errno == EINTR);
}

int worker_init(TuiWorker *w, Trainer *t, const TuiHooks *hooks, int wake_fd, ScheduledCmd *sched, int nsched) {
    memset(w, 0, sizeof *w);
    w->t = t;
    w->hooks = hooks;
    w->wake_fd = wake_fd;
    w->sched = sched;
    w->nsched = nsched;
    atomic_init(&w->wake_pending, 0);
    const int moe = t->cfg.model.head.kind != HEAD_DENSE;
    w->ce_size = moe ? t->ds->classes * t->cfg.model.head.E : 1;
    w->sq = calloc(WORKER_STEPQ, sizeof *w->sq);
    w->evq = calloc(WORKER_EVQ, sizeof *w->evq);
    w->eq_counts = calloc((size_t)WORKER_EVALQ * w->ce_size, sizeof *w->eq_counts);
    if (!w->sq || !w->evq || !w->eq_counts) { worker_free(w); return -1; }
    pthread_mutex_init(&w->mu, NULL);
    pthread_cond_init(&w->cv, NULL);
    w->st.step = t->step;
    w->st.epoch = t->epoch;
    return 0;
}

void worker_free(TuiWorker *w) {
    if (w->sq || w->evq || w->eq_counts) {
        pthread_mutex_destroy(&w->mu);
        pthread_cond_destroy(&w->cv);
    }
    free(w->sq);
    free(w->evq);
    free(w->eq_counts);
    free(w->sched);
    memset(w, 0, sizeof *w);
    w->wake_fd = -1;
}

// ---------------------------------------------------------------------------------------------
// publishing (trainer thread, mutex not held on entry)

static void push_event_locked(TuiWorker *w, const WorkerEvent *ev) {
    const int slot = (w->ev_head + w->ev_n) % WORKER_EVQ;
    w->evq[slot] = *ev;
    if (w->ev_n < WORKER_EVQ) w->ev_n++;
    else w->ev_head = (w->ev_head + 1) % WORKER_EVQ; /* the oldest event is lost */
}

static void publish_event(TuiWorker *w, const WorkerEvent *ev) {
    pthread_mutex_lock(&w->mu);
    push_event_locked(w, ev);
    pthread_mutex_unlock(&w->mu);
    worker_wake(w);
}

/* A text event at the step the UI knows (w->st.step: safe to read from any thread). */
static void publish_text(TuiWorker *w, WorkerEventKind kind, const char *text) {
    WorkerEvent ev;
    memset(&ev, 0, sizeof ev);
    ev.kind = kind;
    ev.wall = wall_now();
    snprintf(ev.text, sizeof ev.text, "%s", text);
    pthread_mutex_lock(&w->mu);
    ev.step = w->st.step;
    push_event_locked(w, &ev);
    pthread_mutex_unlock(&w->mu);
    worker_wake(w);
}

static void publish_step(TuiWorker *w, const StepRecord *r) {
    pthread_mutex_lock(&w->mu);
    const int slot = (w->sq_head + w->sq_n) % WORKER_STEPQ;
    w->sq[slot] = *r;
    if (w->sq_n < WORKER_STEPQ) w->sq_n++;
    else { w->sq_head = (w->sq_head + 1) % WORKER_STEPQ; w->st.steps_dropped++; }
    pthread_mutex_unlock(&w->mu);
    worker_wake(w);
}

static void publish_eval(TuiWorker *w, const EvalRecord *er) {
    pthread_mutex_lock(&w->mu);
    const int slot = (w->eq_head + w->eq_n) % WORKER_EVALQ;
    EvalRecord *c = &w->eq[slot];
    *c = *er;
    int *counts = w->eq_counts + (long)slot * w->ce_size;
    if (er->has_moe && er->class_expert && er->classes * er->experts == w->ce_size) {
        memcpy(counts, er->class_expert, sizeof *counts * w->ce_size);
        c->class_expert = counts;
    } else {
        c->class_expert = NULL;
    }
    c->tsne_n = 0; /* the t-SNE sample stays with the trainer (hooks get it) */
    c->tsne_feat = NULL;
    c->tsne_expert = NULL;
    c->tsne_label = NULL;
    if (w->eq_n < WORKER_EVALQ) w->eq_n++;
    else w->eq_head = (w->eq_head + 1) % WORKER_EVALQ;
    pthread_mutex_unlock(&w->mu);
    worker_wake(w);
}

void worker_log(TuiWorker *w, int level, const char *msg) {
    publish_text(w, level >= 2 ? WEV_ERROR : level == 1 ? WEV_WARN : WEV_INFO, msg);
}

// ---------------------------------------------------------------------------------------------
// the trainer thread

/* Evaluates now, hands the record to the hook and the UI. 0, or -1 (message published). */
static int run_eval(TuiWorker *w, double train_time, double epoch_t0, int epoch_end) {
    Trainer *t = w->t;
    const double e0 = ml_now();
    EvalRecord er;
    const ml_status st = trainer_eval_record(t, &er, train_time);
    const double dt = ml_now() - e0;
    pthread_mutex_lock(&w->mu);
    w->st.eval_seconds += dt;
    w->st.evals++;
    pthread_mutex_unlock(&w->mu);
    if (st != ML_OK) {
        char msg[384];
        snprintf(msg, sizeof msg, "evaluation failed: %s", ml_last_error());
        publish_text(w, st == ML_ERR_NUMERIC ? WEV_NUMERIC : WEV_ERROR, msg);
        return -1;
    }
    er.epoch_seconds = epoch_end ? ml_now() - epoch_t0 : dt;
    if (w->hooks && w->hooks->on_eval) w->hooks->on_eval(&er, w->hooks->user);
    publish_eval(w, &er);
    char line[384];
    if (epoch_end)
        snprintf(line, sizeof line, "epoch %d/%d  step %ld  train loss %.4f acc %.2f%%  test loss %.4f acc %.2f%%  %.0f img/s  %.1f s",
                 er.epoch, t->cfg.epochs, er.step, er.train_loss, 100 * er.train_acc, er.test_loss, 100 * er.test_acc,
                 er.img_per_s, er.epoch_seconds);
    else
        snprintf(line, sizeof line, "eval at step %ld  test loss %.4f acc %.2f%%", er.step, er.test_loss, 100 * er.test_acc);
    if (er.has_moe) {
        const size_t len = strlen(line);
        snprintf(line + len, sizeof line - len, "  I(class;expert) %.3f  dead %d/%d%s", er.mutual_info, er.dead_experts,
                 er.experts, er.collapsed ? "  COLLAPSE" : "");
    }
    publish_text(w, WEV_EPOCH, line);
    return 0;
}

/* Applies one command at the current step boundary (mutex not held). */
static void apply_cmd(TuiWorker *w, const TrainerCmd *c) {
    Trainer *t = w->t;
    const TuiHooks *h = w->hooks;
    WorkerEvent ev;
    memset(&ev, 0, sizeof ev);
    ev.kind = WEV_APPLIED;
    ev.step = t->step;
    ev.wall = wall_now();
    ev.cmd = c->kind;
    snprintf(ev.text, sizeof ev.text, "%s", c->text);
    int applied = 1;
    switch (c->kind) {
    case CMD_PAUSE:
        pthread_mutex_lock(&w->mu);
        w->st.paused = 1;
        w->st.steps_left = 0;
        pthread_mutex_unlock(&w->mu);
        break;
    case CMD_RESUME:
        pthread_mutex_lock(&w->mu);
        w->st.paused = 0;
        w->st.numeric = 0;
        w->st.steps_left = 0;
        pthread_mutex_unlock(&w->mu);
        break;
    case CMD_STEP:
        pthread_mutex_lock(&w->mu);
        w->st.paused = 1;
        w->st.steps_left = c->n;
        pthread_mutex_unlock(&w->mu);
        break;
    case CMD_SET:
    case CMD_ANNEAL:
        if (trainer_apply(t, c) != ML_OK) {
            applied = 0;
            ev.kind = WEV_FAILED;
            snprintf(ev.text, sizeof ev.text, "%s: %s", c->text, ml_last_error());
        } else {
            ev.has_plan = 1;
            ev.plan = t->tau;
        }
        break;
    case CMD_EVAL:
        /* the epoch line comes from run_eval; the event itself is logged too */
        if (run_eval(w, 0.0, ml_now(), 0)) { applied = 0; ev.kind = WEV_FAILED; snprintf(ev.text, sizeof ev.text, "eval failed"); }
        break;
    case CMD_SNAPSHOT:
        /* logged before it runs, like the headless runner: the event precedes its checkpoint */
        if (h && h->on_snapshot && h->on_event) h->on_event(ev.step, ev.wall, c->text, h->user);
        if (!h || !h->on_snapshot) {
            applied = 0;
            ev.kind = WEV_WARN;
            snprintf(ev.text, sizeof ev.text, "snapshot: no session is being written, nothing saved");
        } else if (h->on_snapshot(t, h->user) != ML_OK) {
            applied = 0;
            ev.kind = WEV_FAILED;
            snprintf(ev.text, sizeof ev.text, "snapshot failed: %s", ml_last_error());
        }
        break;
    case CMD_QUIT:
        pthread_mutex_lock(&w->mu);
        w->st.stop_requested = 1;
        pthread_mutex_unlock(&w->mu);
        break;
    case CMD_HELP:
        return; /* the UI's business */
    }
    if (applied && c->kind != CMD_SNAPSHOT && h && h->on_event) h->on_event(ev.step, ev.wall, c->text, h->user);
    publish_event(w, &ev);
}

static void *worker_main(void *arg) {
    TuiWorker *w = arg;
    Trainer *t = w->t;
    omp_set_num_threads(t->cfg.threads); /* the ICV is per thread: trainer_init set the caller's */
    const char *status = "finished";
    double ep_train = 0.0, ep_t0 = ml_now();
    for (;;) {
        // ---- step boundary: commands (UI queue and --commands file), pause
        pthread_mutex_lock(&w->mu);
        for (;;) {
            TrainerCmd c;
            if (w->next_sched < w->nsched && w->sched[w->next_sched].step <= t->step) {
                c = w->sched[w->next_sched++].cmd;
            } else if (w->cq_n > 0) {
                c = w->cmdq[w->cq_head];
                w->cq_head = (w->cq_head + 1) % WORKER_CMDQ;
                w->cq_n--;
            } else {
                if (w->st.stop_requested || !w->st.paused || w->st.steps_left > 0) break;
                w->st.waiting = 1;
                pthread_cond_wait(&w->cv, &w->mu);
                w->st.waiting = 0;
                continue;
            }
            pthread_mutex_unlock(&w->mu);
            apply_cmd(w, &c);
            pthread_mutex_lock(&w->mu);
        }
        int stop = w->st.stop_requested;
        pthread_mutex_unlock(&w->mu);
        if (!stop && w->hooks && w->hooks->before_step && t->epoch < t->cfg.epochs)
            stop = w->hooks->before_step(t, w->hooks->user) != 0;
        if (stop) { status = "interrupted"; break; }
        if (t->epoch >= t->cfg.epochs) { status = "finished"; break; }

        // ---- one step
        StepRecord rec;
        const int want = (t->step + 1) % t->cfg.log_every == 0;
        const double s0 = ml_now();
        const ml_status st = trainer_step(t, want ? &rec : NULL);
        const double dt = ml_now() - s0;
        if (st == ML_ERR_NUMERIC) {
            pthread_mutex_lock(&w->mu);
            w->st.paused = 1;
            w->st.numeric = 1;
            w->st.steps_left = 0;
            pthread_mutex_unlock(&w->mu);
            char msg[384];
            snprintf(msg, sizeof msg, "%s", ml_last_error());
            publish_text(w, WEV_NUMERIC, msg);
            continue;
        }
        if (st != ML_OK) {
            char msg[384];
            snprintf(msg, sizeof msg, "training failed: %s", ml_last_error());
            publish_text(w, WEV_ERROR, msg);
            status = "failed";
            break;
        }
        ep_train += dt;
        pthread_mutex_lock(&w->mu);
        w->st.step = t->step;
        w->st.epoch = t->epoch;
        w->st.busy += dt;
        if (w->st.steps_left > 0) w->st.steps_left--;
        pthread_mutex_unlock(&w->mu);
        if (want) {
            if (w->hooks && w->hooks->on_step) w->hooks->on_step(&rec, w->hooks->user);
            publish_step(w, &rec);
        }
        // ---- epoch end: evaluate
        if (t->pos == 0) {
            if (run_eval(w, ep_train, ep_t0, 1)) {
                pthread_mutex_lock(&w->mu);
                w->st.paused = 1; /* let the user decide (quit, or resume without this epoch's eval) */
                pthread_mutex_unlock(&w->mu);
            }
            ep_train = 0.0;
            ep_t0 = ml_now();
        }
    }
    if (w->hooks && w->hooks->on_finish) w->hooks->on_finish(t, status, w->hooks->user);
    pthread_mutex_lock(&w->mu);
    snprintf(w->st.status, sizeof w->st.status, "%s", status);
    w->st.step = t->step;
    w->st.epoch = t->epoch;
    w->st.done = 1;
    pthread_mutex_unlock(&w->mu);
    worker_wake(w);
    return NULL;
}

int worker_start(TuiWorker *w) {
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old); /* the thread (and its OpenMP team) inherit this */
    const int rc = pthread_create(&w->thread, NULL, worker_main, w);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc) return -1;
    w->started = 1;
    return 0;
}

int worker_send(TuiWorker *w, const TrainerCmd *c) {
    pthread_mutex_lock(&w->mu);
    if (w->cq_n == WORKER_CMDQ) { pthread_mutex_unlock(&w->mu); return -1; }
    w->cmdq[(w->cq_head + w->cq_n) % WORKER_CMDQ] = *c;
    w->cq_n++;
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
    return 0;
}

void worker_request_stop(TuiWorker *w) {
    pthread_mutex_lock(&w->mu);
    w->st.stop_requested = 1;
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
}

void worker_join(TuiWorker *w) {
    if (w->started) pthread_join(w->thread, NULL);
    w->started = 0;
}

// ---------------------------------------------------------------------------------------------
// the UI side

int worker_drain_init(WorkerDrain *d, const TuiWorker *w) {
    memset(d, 0, sizeof *d);
    d->steps = malloc(sizeof *d->steps * WORKER_STEPQ);
    d->events = malloc(sizeof *d->events * WORKER_EVQ);
    d->eval_counts = malloc(sizeof *d->eval_counts * WORKER_EVALQ * w->ce_size);
    if (!d->steps || !d->events || !d->eval_counts) { worker_drain_free(d); return -1; }
    return 0;
}

void worker_drain_free(WorkerDrain *d) {
    free(d->steps);
    free(d->events);
    free(d->eval_counts);
    memset(d, 0, sizeof *d);
}

void worker_drain(TuiWorker *w, WorkerDrain *d) {
    atomic_store(&w->wake_pending, 0); /* anything published from now on wakes the UI again */
    pthread_mutex_lock(&w->mu);
    d->nsteps = w->sq_n;
    for (int i = 0; i < w->sq_n; i++) d->steps[i] = w->sq[(w->sq_head + i) % WORKER_STEPQ];
    w->sq_head = (w->sq_head + w->sq_n) % WORKER_STEPQ;
    w->sq_n = 0;
    d->nevals = w->eq_n;
    for (int i = 0; i < w->eq_n; i++) {
        const int slot = (w->eq_head + i) % WORKER_EVALQ;
        d->evals[i] = w->eq[slot];
        if (w->eq[slot].class_expert) {
            int *dst = d->eval_counts + (long)i * w->ce_size;
            memcpy(dst, w->eq[slot].class_expert, sizeof *dst * w->ce_size);
            d->evals[i].class_expert = dst;
        }
    }
    w->eq_head = (w->eq_head + w->eq_n) % WORKER_EVALQ;
    w->eq_n = 0;
    d->nevents = w->ev_n;
    for (int i = 0; i < w->ev_n; i++) d->events[i] = w->evq[(w->ev_head + i) % WORKER_EVQ];
    w->ev_head = (w->ev_head + w->ev_n) % WORKER_EVQ;
    w->ev_n = 0;
    d->st = w->st;
    pthread_mutex_unlock(&w->mu);
}
