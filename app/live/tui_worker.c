/* tui_worker.c — the trainer thread of the live screen and its queues (see tui_worker.h).
 *
 * Locking: w->mu guards the queues and w->st. The thread never holds it while it trains,
 * evaluates, applies a command or calls a hook; the UI holds it only to copy queues out. */
#include "app/live/tui_worker.h"

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
    do r = write(w->wake_fd, "w", 1);
    while (r < 0 && errno == EINTR);
}

static int w_submit(void *user, const TrainerCmd *c) { return worker_send(user, c); }
static void w_ctl_log(void *user, int level, const char *msg) { worker_log(user, level, msg); }

int worker_init(TuiWorker *w, Trainer *t, const TuiHooks *hooks, int wake_fd, ScheduledCmd *sched, int nsched) {
    memset(w, 0, sizeof *w);
    w->t = t;
    w->hooks = hooks;
    w->wake_fd = wake_fd;
    w->sched = sched;
    w->nsched = nsched;
    atomic_init(&w->wake_pending, 0);
    /* one slot holds the top-level class x expert matrix and every routed layer's, packed */
    RunRecord *rr = malloc(sizeof *rr);
    if (!rr) return -1;
    trainer_describe(t, rr);
    int top_e = t->cfg.model.head.kind != HEAD_DENSE ? t->cfg.model.head.E : 0, sum_e = 0;
    for (int l = 0; l < rr->nlayers; l++) {
        sum_e += rr->layer[l].E;
        if (rr->layer[l].E > top_e) top_e = rr->layer[l].E;
    }
    free(rr);
    w->ce_size = t->src.classes * (top_e + sum_e);
    if (w->ce_size < 1) w->ce_size = 1;
    w->sq = calloc(WORKER_STEPQ, sizeof *w->sq);
    w->evq = calloc(WORKER_EVQ, sizeof *w->evq);
    w->eq_counts = calloc((size_t)WORKER_EVALQ * w->ce_size, sizeof *w->eq_counts);
    if (!w->sq || !w->evq || !w->eq_counts) {
        worker_free(w);
        return -1;
    }
    pthread_mutex_init(&w->mu, NULL);
    pthread_cond_init(&w->cv, NULL);
    w->st.run.step = t->step;
    w->st.run.epoch = t->epoch;
    if (hooks && hooks->control_dir && hooks->control_dir[0]) {
        const ControlOps ops = {.submit = w_submit, .log = w_ctl_log, .user = w};
        char err[600];
        w->ctl = control_start(hooks->control_dir, &ops, err, sizeof err);
        if (!w->ctl) worker_log(w, 1, err);
        control_note_run(w->ctl, t->total_steps, t->cfg.epochs);
        RunRecord *lr = malloc(sizeof *lr); /* large: the routed layers' names for status */
        if (lr) {
            trainer_describe(t, lr);
            control_note_layers(w->ctl, lr);
            free(lr);
        }
    }
    return 0;
}

void worker_free(TuiWorker *w) {
    control_stop(w->ctl); /* the thread never ran */
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

/* A text event at the step the UI knows (w->st.run.step: safe to read from any thread). */
static void publish_text(TuiWorker *w, WorkerEventKind kind, const char *text) {
    WorkerEvent ev;
    memset(&ev, 0, sizeof ev);
    ev.kind = kind;
    ev.wall = wall_now();
    snprintf(ev.text, sizeof ev.text, "%s", text);
    pthread_mutex_lock(&w->mu);
    ev.step = w->st.run.step;
    push_event_locked(w, &ev);
    pthread_mutex_unlock(&w->mu);
    worker_wake(w);
}

static void publish_step(TuiWorker *w, const StepRecord *r) {
    pthread_mutex_lock(&w->mu);
    const int slot = (w->sq_head + w->sq_n) % WORKER_STEPQ;
    w->sq[slot] = *r;
    if (w->sq_n < WORKER_STEPQ) w->sq_n++;
    else {
        w->sq_head = (w->sq_head + 1) % WORKER_STEPQ;
        w->st.steps_dropped++;
    }
    pthread_mutex_unlock(&w->mu);
    worker_wake(w);
}

static void publish_eval(TuiWorker *w, const EvalRecord *er) {
    pthread_mutex_lock(&w->mu);
    const int slot = (w->eq_head + w->eq_n) % WORKER_EVALQ;
    EvalRecord *c = &w->eq[slot];
    *c = *er;
    int *counts = w->eq_counts + (long)slot * w->ce_size;
    long used = 0; /* the matrices packed into the slot: the top level's, then each layer's */
    const long top = (long)er->moe.classes * er->moe.experts;
    if (er->has_moe && er->moe.class_expert && top > 0 && top <= w->ce_size) {
        memcpy(counts, er->moe.class_expert, sizeof *counts * (size_t)top);
        c->moe.class_expert = counts;
        used = top;
    } else {
        c->moe.class_expert = NULL;
    }
    for (int l = 0; l < c->nlayers && l < REC_MAX_LAYERS; l++) {
        const EvalLayer *src = &er->layer[l];
        const long n = (long)src->classes * src->experts;
        if (src->class_expert && n > 0 && used + n <= w->ce_size) {
            memcpy(counts + used, src->class_expert, sizeof *counts * (size_t)n);
            c->layer[l].class_expert = counts + used;
            used += n;
        } else c->layer[l].class_expert = NULL;
    }
    c->moe.drop_class_expert = NULL; /* the drops per class stay with the trainer (the session gets them) */
    for (int l = 0; l < c->nlayers && l < REC_MAX_LAYERS; l++) c->layer[l].drop_class_expert = NULL;
    c->moe.tsne_n = 0; /* the t-SNE sample stays with the trainer (hooks get it) */
    c->moe.tsne_feat = NULL;
    c->moe.tsne_expert = NULL;
    c->tsne_label = NULL;
    for (int l = 0; l < c->nlayers; l++) { /* the per-layer t-SNE samples stay with the trainer */
        c->layer[l].tsne_n = 0;
        c->layer[l].tsne_feat = NULL;
        c->layer[l].tsne_expert = NULL;
    }
    if (w->eq_n < WORKER_EVALQ) w->eq_n++;
    else w->eq_head = (w->eq_head + 1) % WORKER_EVALQ;
    pthread_mutex_unlock(&w->mu);
    worker_wake(w);
}

void worker_log(TuiWorker *w, int level, const char *msg) {
    publish_text(w, level >= 2 ? WEV_ERROR : level == 1 ? WEV_WARN : WEV_INFO, msg);
}

// ---------------------------------------------------------------------------------------------
// the trainer thread: core's training loop with this worker as its command source and state sink,
// the session writer (hooks->sink) underneath

/* The next command due: the --commands file first (in step order), then the UI's queue. While
 * paused it blocks on the condvar until a command or a stop request arrives. */
static int w_next_cmd(void *user, long step, int wait, TrainerCmd *c) {
    TuiWorker *w = user;
    int got = 0;
    pthread_mutex_lock(&w->mu);
    if (w->next_sched < w->nsched && w->sched[w->next_sched].step <= step) {
        *c = w->sched[w->next_sched++].cmd;
        if (!c->origin) c->origin = CMD_FROM_FILE;
        got = 1;
    } else if (w->cq_n > 0) {
        *c = w->cmdq[w->cq_head];
        w->cq_head = (w->cq_head + 1) % WORKER_CMDQ;
        w->cq_n--;
        got = 1;
    } else if (wait && !w->st.stop_requested) {
        w->st.waiting = 1;
        pthread_cond_wait(&w->cv, &w->mu);
        w->st.waiting = 0;
    }
    pthread_mutex_unlock(&w->mu);
    if (got) control_handed(w->ctl, c);
    return got;
}

static int w_should_stop(void *user) {
    TuiWorker *w = user;
    pthread_mutex_lock(&w->mu);
    const int stop = w->st.stop_requested;
    pthread_mutex_unlock(&w->mu);
    return stop;
}

static void w_on_state(const TrainerState *s, void *user) {
    TuiWorker *w = user;
    pthread_mutex_lock(&w->mu);
    w->st.run = *s;
    pthread_mutex_unlock(&w->mu);
    control_note_state(w->ctl, s);
}

static void w_on_step(const StepRecord *r, void *user) {
    TuiWorker *w = user;
    const TrainHooks *sink = &w->hooks->sink;
    if (sink->on_step) sink->on_step(r, sink->user);
    control_note_step(w->ctl, r);
    publish_step(w, r);
}

static void w_on_eval(const EvalRecord *r, void *user) {
    TuiWorker *w = user;
    const TrainHooks *sink = &w->hooks->sink;
    if (sink->on_eval) sink->on_eval(r, sink->user);
    control_note_eval(w->ctl, r);
    publish_eval(w, r);
}

static void w_on_event(const TrainerEvent *e, void *user) {
    TuiWorker *w = user;
    const TrainHooks *sink = &w->hooks->sink;
    if (sink->on_event) sink->on_event(e, sink->user);
    control_event(w->ctl, e);
    if (e->kind == TEV_CHECKPOINT && !e->logged) return; /* scheduled checkpoints: not worth a log line */
    static const WorkerEventKind kinds[] = {
        [TEV_APPLIED] = WEV_APPLIED, [TEV_FAILED] = WEV_FAILED, [TEV_NOTE] = WEV_WARN,
        [TEV_NUMERIC] = WEV_NUMERIC, [TEV_ERROR] = WEV_ERROR,   [TEV_EPOCH] = WEV_EPOCH,
        [TEV_CHECKPOINT] = WEV_INFO, [TEV_COLLAPSE] = WEV_WARN,
    };
    WorkerEvent ev;
    memset(&ev, 0, sizeof ev);
    ev.kind = kinds[e->kind];
    if (e->kind == TEV_COLLAPSE) /* by severity: a collapse red, a warning or a death yellow, a revival plain */
        ev.kind = e->severity == ALARM_COLLAPSE ? WEV_ERROR : e->severity == ALARM_WARNING ? WEV_WARN : WEV_INFO;
    ev.step = e->step;
    ev.wall = wall_now();
    ev.cmd = e->cmd;
    snprintf(ev.text, sizeof ev.text, "%s", e->text);
    ev.has_plan = e->has_plan;
    if (e->has_plan) ev.plan = e->plan;
    ev.layer = e->has_plan ? e->layer : -1;
    publish_event(w, &ev);
}

static ml_status w_checkpoint(Trainer *t, const char *why, void *user) {
    TuiWorker *w = user;
    return w->hooks->sink.checkpoint(t, why, w->hooks->sink.user);
}

static void *worker_main(void *arg) {
    TuiWorker *w = arg;
    Trainer *t = w->t;
    omp_set_num_threads(t->cfg.threads); /* the ICV is per thread: trainer_init set the caller's */
    const TrainHooks *sink = w->hooks ? &w->hooks->sink : NULL;
    TrainHooks h = {
        .next_cmd = w_next_cmd,
        .parse_rule = command_rule_parse,
        .should_stop = w_should_stop,
        .on_step = w_on_step,
        .on_eval = w_on_eval,
        .on_event = w_on_event,
        .on_state = w_on_state,
        .checkpoint = sink && sink->checkpoint ? w_checkpoint : NULL,
        .ckpt_every = sink ? sink->ckpt_every : 0,
        .ckpt_steps = sink ? sink->ckpt_steps : 0,
        .interactive = 1,
        .user = w,
    };
    const char *status = run_end_name(trainer_run(t, &h));
    control_stop(w->ctl); /* after the final checkpoint: waiting clients hear that the run ended */
    w->ctl = NULL;
    if (w->hooks && w->hooks->rs) runsession_finish(w->hooks->rs, status);
    pthread_mutex_lock(&w->mu);
    snprintf(w->st.status, sizeof w->st.status, "%s", status);
    w->st.run.step = t->step;
    w->st.run.epoch = t->epoch;
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
    if (w->cq_n == WORKER_CMDQ) {
        pthread_mutex_unlock(&w->mu);
        return -1;
    }
    TrainerCmd *q = &w->cmdq[(w->cq_head + w->cq_n) % WORKER_CMDQ];
    *q = *c;
    if (!q->origin) q->origin = CMD_FROM_SCREEN;
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
    if (!d->steps || !d->events || !d->eval_counts) {
        worker_drain_free(d);
        return -1;
    }
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
        /* the slot's packed matrices, with every pointer moved to the copy */
        const int *src = w->eq_counts + (long)slot * w->ce_size;
        int *dst = d->eval_counts + (long)i * w->ce_size;
        memcpy(dst, src, sizeof *dst * w->ce_size);
        if (w->eq[slot].moe.class_expert) d->evals[i].moe.class_expert = dst + (w->eq[slot].moe.class_expert - src);
        for (int l = 0; l < w->eq[slot].nlayers && l < REC_MAX_LAYERS; l++)
            if (w->eq[slot].layer[l].class_expert)
                d->evals[i].layer[l].class_expert = dst + (w->eq[slot].layer[l].class_expert - src);
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
