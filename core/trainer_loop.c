/* trainer_loop.c — trainer_run: the one loop that steps, evaluates, applies commands at step
 * boundaries, watches for collapse, checkpoints on schedule and publishes records through the
 * hooks (trainer.h); the trainer's own work is in trainer.c. */
#include "trainer.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// ---------------------------------------------------------------------------------------------
// the loop

const char *run_end_name(RunEnd e) {
    return e == RUN_FINISHED ? "finished" : e == RUN_INTERRUPTED ? "interrupted" : "failed";
}

typedef struct {
    Trainer *t;
    const TrainHooks *h;
    double ep_train, ep_t0; /* training seconds and start of the current epoch */
    int stop, snapshot;     /* quit seen; a snapshot is due at this boundary */
    int fired;              /* collapse views that rose since the last boundary (CVIEW_BIT_*) */
} Loop;

static void emit(Loop *L, TrainerEventKind kind, const TrainerCmd *c, int logged, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
static void emit(Loop *L, TrainerEventKind kind, const TrainerCmd *c, int logged, const char *fmt, ...) {
    if (!L->h->on_event) return;
    TrainerEvent ev;
    memset(&ev, 0, sizeof ev);
    ev.kind = kind;
    ev.step = L->t->step;
    ev.cmd = c ? c->kind : CMD_HELP;
    ev.logged = logged;
    ev.origin = c ? c->origin : CMD_FROM_NONE;
    ev.layer = -1; /* every layer's plan changed (the common plan), or the one of an @layer suffix */
    const int o = snprintf(ev.text, sizeof ev.text, "%s", cmd_origin_prefix(ev.origin));
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(ev.text + o, sizeof ev.text - (size_t)o, fmt, ap);
    va_end(ap);
    if (c && (c->kind == CMD_SET || c->kind == CMD_ANNEAL) && kind == TEV_APPLIED) {
        ev.has_plan = 1;
        const int li = c->layer[0] ? trainer_layer_find(L->t, c->layer) : -1;
        ev.layer = li;
        ev.plan = li >= 0 ? *trainer_layer_plan(L->t, li) : L->t->tau;
    }
    L->h->on_event(&ev, L->h->user);
}

/* an alarm event (TEV_COLLAPSE, logged) with its severity */
static void emit_alarm(Loop *L, int severity, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void emit_alarm(Loop *L, int severity, const char *fmt, ...) {
    if (!L->h->on_event) return;
    TrainerEvent ev;
    memset(&ev, 0, sizeof ev);
    ev.kind = TEV_COLLAPSE;
    ev.step = L->t->step;
    ev.cmd = CMD_HELP;
    ev.logged = 1;
    ev.origin = CMD_FROM_NONE;
    ev.layer = -1;
    ev.severity = severity;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(ev.text, sizeof ev.text, fmt, ap);
    va_end(ap);
    L->h->on_event(&ev, L->h->user);
}

static void publish_state(Loop *L) {
    L->t->state.step = L->t->step;
    L->t->state.epoch = L->t->epoch;
    if (L->h->on_state) L->h->on_state(&L->t->state, L->h->user);
}

/* Evaluates now and publishes the record and its line. 0, or -1 (an error event was published). */
static int loop_eval(Loop *L, int epoch_end) {
    Trainer *t = L->t;
    const double e0 = ml_now();
    EvalRecord er;
    const ml_status st = trainer_eval_record(t, &er, epoch_end ? L->ep_train : 0.0);
    const double dt = ml_now() - e0;
    t->state.eval_seconds += dt;
    t->state.evals++;
    if (st != ML_OK) {
        emit(L, st == ML_ERR_NUMERIC ? TEV_NUMERIC : TEV_ERROR, NULL, 0, "evaluation failed: %s", ml_last_error());
        return -1;
    }
    L->fired |= t->coll.fired;
    t->coll.fired = 0;
    er.epoch_seconds = epoch_end ? ml_now() - L->ep_t0 : dt;
    if (L->h->on_eval) L->h->on_eval(&er, L->h->user);
    char line[384];
    eval_record_line(&er, t->cfg.epochs, epoch_end, line, sizeof line);
    emit(L, TEV_EPOCH, NULL, 0, "%s", line);
    return 0;
}

static void loop_checkpoint(Loop *L, const char *why) {
    Trainer *t = L->t;
    if (!L->h->checkpoint || t->ckpt_step == t->step) return;
    if (L->h->checkpoint(t, why, L->h->user) != ML_OK) {
        emit(L, TEV_ERROR, NULL, 0, "checkpoint at step %ld failed and was skipped: %s (training goes on; the next "
             "checkpoint is tried as planned)", t->step, ml_last_error());
        return;
    }
    t->ckpt_step = t->step;
    emit(L, TEV_CHECKPOINT, NULL, why != NULL, "checkpoint ckpt-%ld.h5%s%s%s", t->step, why ? " (" : "", why ? why : "",
         why ? ")" : "");
}

/* One command at the step boundary. */
static void loop_apply(Loop *L, const TrainerCmd *c) {
    Trainer *t = L->t;
    TrainerState *s = &t->state;
    const int can_wait = L->h->next_cmd != NULL && (L->h->interactive || L->h->pausable); /* someone can resume */
    switch (c->kind) {
    case CMD_SET:
    case CMD_ANNEAL:
        if (trainer_apply(t, c) != ML_OK) {
            emit(L, TEV_FAILED, c, 0, "%s: %s", c->text, ml_last_error());
            return;
        }
        break;
    case CMD_PAUSE:
    case CMD_STEP:
        if (!can_wait) {
            emit(L, TEV_NOTE, c, 0, "'%s' has no effect in a headless run", c->text);
            return;
        }
        s->paused = 1;
        s->steps_left = c->kind == CMD_STEP ? c->n : 0;
        break;
    case CMD_RESUME:
        s->paused = 0;
        s->numeric = 0;
        s->collapse = 0;
        s->steps_left = 0;
        break;
    case CMD_EVAL:
        /* logged before it runs: the event precedes the evaluation row */
        emit(L, TEV_APPLIED, c, 1, "%s", c->text);
        if (loop_eval(L, 0)) emit(L, TEV_FAILED, c, 0, "eval failed");
        publish_state(L);
        return;
    case CMD_SNAPSHOT:
        if (!L->h->checkpoint) {
            emit(L, TEV_NOTE, c, 0, "snapshot: no session is being written, nothing saved");
            return;
        }
        L->snapshot = 1; /* written after every command of this boundary */
        break;
    case CMD_QUIT: L->stop = 1; break;
    case CMD_HELP: return; /* the live screen's business */
    case CMD_ON_COLLAPSE:
        if (trainer_set_rule(t, c->rule) != ML_OK) {
            emit(L, TEV_FAILED, c, 0, "%s: %s", c->text, ml_last_error());
            return;
        }
        if (!model_has_routing(&t->model))
            emit(L, TEV_NOTE, c, 0, "on-collapse: the %s head has no routing to collapse",
                 moe_head_name(t->cfg.model.head.kind));
        break;
    }
    emit(L, TEV_APPLIED, c, 1, "%s", c->text);
    publish_state(L);
}

/* The alarm events since the last boundary, every routed layer (backbone in stage order, then the
 * head): the views that rose (collapse, or a warning when only the clean router concentrates), the
 * experts that died or came back; each event's text carries THE message (collapse_format), the same
 * the banner and `ctl status` show. Then the on-collapse rule (once, on a red collapse): pause
 * (interactive) / stop (headless), or its commands with origin CMD_FROM_RULE. */
static void loop_collapse(Loop *L, int rule) {
    Trainer *t = L->t;
    const int nl = trainer_nlayers(t);
    int any = 0;
    char first[192] = "";
    for (int i = 0; i < nl; i++) {
        const int head = i == t->nbl;
        const int fired = !head ? t->bl[i].fired : t->cfg.model.head.kind != HEAD_DENSE ? L->fired : 0;
        if (!head) t->bl[i].fired = 0;
        CollapseState *cs = (CollapseState *)trainer_layer_collapse(t, i);
        const uint64_t died = cs->died, revived = cs->revived;
        cs->died = cs->revived = 0;
        const char *name = nl > 1 ? trainer_layer_name(t, i) : NULL;
        char msg[192];
        for (int v = 0; v < CVIEW_COUNT; v++) {
            if (!(fired & (1 << v))) continue;
            const int sev = collapse_item_alarm(cs, v);
            collapse_format(cs, v, -1, name, msg, sizeof msg);
            if (sev == ALARM_COLLAPSE) {
                any = 1;
                if (!first[0]) snprintf(first, sizeof first, "%s", msg);
            }
            emit_alarm(L, sev, "%s at step %ld (%s view, episode %ld%s): %s", sev == ALARM_COLLAPSE ? "collapse" : "warning",
                       t->step, collapse_view_name(v), cs->view[v].episodes,
                       cs->view[v].first_step == cs->view[v].since && cs->view[v].episodes == 1 ? ", first" : "", msg);
        }
        if (fired & CVIEW_BIT_IDLE) {
            collapse_format(cs, CITEM_IDLE, -1, name, msg, sizeof msg);
            emit_alarm(L, ALARM_WARNING, "warning at step %ld (idle router, episode %ld%s): %s", t->step,
                       cs->idle.episodes, cs->idle.episodes == 1 ? ", first" : "", msg);
        }
        for (int e = 0; e < cs->E; e++) {
            const uint64_t bit = (uint64_t)1 << e;
            if (died & bit && cs->dead[e]) {
                const int sev = collapse_item_alarm(cs, CITEM_DEATH);
                collapse_format(cs, CITEM_DEATH, e, name, msg, sizeof msg);
                if (sev == ALARM_COLLAPSE) {
                    any = 1;
                    if (!first[0]) snprintf(first, sizeof first, "%s", msg);
                }
                int ndead = 0; /* what the numbers are: the deaths counted so far, the experts dead now */
                for (int x = 0; x < cs->E; x++) ndead += cs->dead[x] != 0;
                emit_alarm(L, sev, "expert death at step %ld (e%d; deaths so far %ld, dead now %d of %d): %s", t->step, e,
                           cs->deaths, ndead, cs->E, msg);
            } else if (revived & bit && !cs->dead[e]) {
                collapse_format(cs, CITEM_REVIVAL, e, name, msg, sizeof msg);
                emit_alarm(L, ALARM_NONE, "expert revival at step %ld (e%d): %s", t->step, e, msg);
            }
        }
    }
    L->fired = 0;
    if (!any) return;
    if (!rule || t->rule.done || (!t->rule.pause && !t->rule.text[0])) return;
    t->rule.done = 1;
    TrainerCmd c;
    memset(&c, 0, sizeof c);
    c.origin = CMD_FROM_RULE;
    if (t->rule.pause) {
        c.kind = CMD_PAUSE;
        snprintf(c.text, sizeof c.text, "pause");
        if (!L->h->interactive) { /* nobody can resume: stop here, resumable from the checkpoint */
            emit(L, TEV_NOTE, &c, 1,
                 "on-collapse pause at step %ld (%s): a headless run stops here; continue it with moelab train "
                 "--resume DIR",
                 t->step, first);
            L->stop = 1;
            return;
        }
        t->state.paused = 1;
        t->state.collapse = 1;
        t->state.steps_left = 0;
        emit(L, TEV_APPLIED, &c, 1, "pause (on-collapse at step %ld: %s)", t->step, first);
        publish_state(L);
        return;
    }
    TrainerCmd cmds[8];
    char err[400];
    const int n = L->h->parse_rule ? L->h->parse_rule(t->rule.text, cmds, 8, err, sizeof err) : -1;
    if (n < 0) {
        snprintf(c.text, sizeof c.text, "on-collapse %.200s", t->rule.text);
        emit(L, TEV_FAILED, &c, 0, "%s: %s", c.text, L->h->parse_rule ? err : "no rule parser in this run");
        return;
    }
    for (int i = 0; i < n; i++) {
        cmds[i].origin = CMD_FROM_RULE;
        loop_apply(L, &cmds[i]);
    }
}

ml_status trainer_set_rule(Trainer *t, const char *rule) {
    if (!rule) rule = "";
    if (strlen(rule) >= sizeof t->rule.text)
        return ml_fail(ML_ERR_ARG, "on-collapse: the rule is longer than %zu characters", sizeof t->rule.text - 1);
    t->rule.pause = !strcmp(rule, "pause");
    snprintf(t->rule.text, sizeof t->rule.text, "%s", t->rule.pause || !strcmp(rule, "off") ? "" : rule);
    t->rule.done = 0;
    return ML_OK;
}

/* The step boundary: every command due now (waiting while paused), then the checkpoints due. */
static void loop_boundary(Loop *L, int epoch_end) {
    Trainer *t = L->t;
    const TrainHooks *h = L->h;
    TrainerCmd c;
    loop_collapse(L, 1);
    for (;;) {
        if (h->should_stop && h->should_stop(h->user)) {
            L->stop = 1;
            break;
        }
        const int wait = t->state.paused && t->state.steps_left == 0 && !L->stop;
        if (!h->next_cmd || !h->next_cmd(h->user, t->step, wait, &c)) {
            if (wait && h->next_cmd && (h->interactive || h->pausable)) continue; /* woken without a command */
            break;
        }
        loop_apply(L, &c);
    }
    const int ce = h->ckpt_every;
    if (L->snapshot) loop_checkpoint(L, "snapshot");
    else if ((h->ckpt_steps > 0 && t->step > 0 && t->step % h->ckpt_steps == 0) ||
             (epoch_end && ce > 0 && t->epoch % ce == 0))
        loop_checkpoint(L, NULL);
    L->snapshot = 0;
}

RunEnd trainer_run(Trainer *t, const TrainHooks *hooks) {
    static const TrainHooks none;
    Loop L = {.t = t, .h = hooks ? hooks : &none, .ep_t0 = ml_now()};
    const TrainHooks *h = L.h;
    RunEnd end = RUN_FINISHED;
    int epoch_end = 0;
    publish_state(&L);
    /* a routed layer whose router the task loss cannot reach (moe.h moe_k1_blind_router), said when
     * the run starts and written to the session's events on a fresh run */
    for (int i = 0; i < trainer_nlayers(t); i++)
        if (moe_k1_blind_router(i < t->nbl ? &t->model.moec[t->bl[i].mi].route.cfg : &t->model.moe.cfg))
            emit(&L, TEV_NOTE, NULL, t->step == 0,
                 "%s: k = 1 with renormalised gates: every kept gate is 1, so its router learns from L_aux only, "
                 "not from the task loss (--renorm auto or off: the softmax gate, as Switch and V-MoE use)",
                 trainer_layer_name(t, i));
    for (;;) {
        if (epoch_end && loop_eval(&L, 1)) {
            if (!h->interactive) {
                end = RUN_FAILED;
                break;
            }
            t->state.paused = 1; /* let the user decide (quit, or resume without this epoch's eval) */
        }
        if (epoch_end) {
            L.ep_train = 0.0;
            L.ep_t0 = ml_now();
        }
        if (t->epoch >= t->cfg.epochs) {
            loop_collapse(&L, 0); /* the events of a collapse at the last step; no rule after the end */
            break;
        }
        loop_boundary(&L, epoch_end);
        if (L.stop) {
            end = RUN_INTERRUPTED;
            break;
        }
        StepRecord rec;
        const int want = (t->step + 1) % t->cfg.log_every == 0;
        const double s0 = ml_now();
        const ml_status st = trainer_step(t, want ? &rec : NULL);
        const double dt = ml_now() - s0;
        epoch_end = 0;
        if (st == ML_ERR_NUMERIC && h->interactive) {
            t->state.paused = 1;
            t->state.numeric = 1;
            t->state.steps_left = 0;
            emit(&L, TEV_NUMERIC, NULL, 0, "%s", ml_last_error());
            publish_state(&L);
            continue;
        }
        if (st != ML_OK) {
            emit(&L, TEV_ERROR, NULL, 1, "training failed: %s", ml_last_error());
            end = RUN_FAILED;
            break;
        }
        L.fired |= t->coll.fired;
        t->coll.fired = 0;
        L.ep_train += dt;
        t->state.busy += dt;
        if (t->state.steps_left > 0) t->state.steps_left--;
        publish_state(&L);
        if (want && h->on_step) h->on_step(&rec, h->user);
        epoch_end = t->pos == 0;
    }
    loop_checkpoint(&L, NULL); /* a failed step left the weights as they were before it */
    publish_state(&L);
    return end;
}
