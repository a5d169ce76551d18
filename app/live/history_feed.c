/* history_feed.c — a loaded session history into the live screen's views (see history_feed.h). */
#include "app/live/history_feed.h"
#include "app/browse/browse.h"
#include "app/cli/commands.h"

#include <float.h>
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

void run_view_ctx(const RunRecord *rr, const Theme *theme, ViewCtx *c) {
    const ModelConfig *mc = &rr->cfg.model;
    memset(c, 0, sizeof *c);
    c->theme = theme;
    snprintf(c->dataset, sizeof c->dataset, "%s %dx%dx%d", rr->dataset, rr->h, rr->w, rr->c);
    c->classes = rr->classes;
    c->class_names = (char *const *)rr->class_names; /* the views only read them */
    c->n_train = rr->n_train;
    c->n_test = rr->n_test;
    snprintf(c->model, sizeof c->model, "%s w=%g d=%d", backbone_name(mc->backbone), mc->width, rr->d);
    c->has_moe = mc->head.kind != HEAD_DENSE;
    c->E = mc->head.E;
    c->k = mc->head.k;
    c->h = mc->head.h;
    if (c->has_moe)
        snprintf(c->head, sizeof c->head, "%s E=%d k=%d h=%d cf=%g", moe_head_name(mc->head.kind), c->E, c->k, c->h,
                 mc->head.cf);
    else snprintf(c->head, sizeof c->head, "dense k*h=%d", mc->head.k * mc->head.h);
    c->batch = mc->batch;
    c->ranks = rr->cfg.ranks > 1 ? rr->cfg.ranks : 1;
    c->capacity = mc->batch;
    for (int i = 0; i < rr->nlayers && i < REC_MAX_LAYERS; i++)
        if (rr->layer[i].stage < 0) c->capacity = rr->layer[i].capacity; /* the head */
    c->epochs = rr->cfg.epochs;
    c->log_every = rr->cfg.log_every > 0 ? rr->cfg.log_every : 1;
    c->steps_per_epoch = rr->steps_per_epoch;
    c->total_steps = rr->total_steps;
    c->rho_nominal = rr->nlayers > 0 ? rr->rho_nominal : 0.0; /* head or backbone */
    c->dead_window = (rr->cfg.route.window + c->log_every - 1) / c->log_every;
    c->collapse_entropy = rr->cfg.route.entropy_min;
    c->collapse_share = rr->cfg.route.max_share;
    c->lr0 = rr->cfg.lr.base;
    c->nlayers = rr->nlayers < REC_MAX_LAYERS ? rr->nlayers : REC_MAX_LAYERS;
    memcpy(c->layer, rr->layer, sizeof c->layer);
}

int history_view_ctx(const SessionHistory *h, const Theme *theme, ViewCtx *c, TauSchedule *base) {
    const SessionInfo *i = &h->info;
    memset(c, 0, sizeof *c);
    c->theme = theme;
    snprintf(c->dataset, sizeof c->dataset, "%s %dx%dx%d", i->dataset, h->image_h, h->image_w, h->image_c);
    c->classes = h->K;
    c->class_names = h->class_names;
    c->n_train = h->n_train;
    c->n_test = h->n_test;
    snprintf(c->model, sizeof c->model, "%s w=%g d=%d", i->backbone, (double)i->width, h->d);
    c->has_moe = h->E > 0;
    c->E = h->E;
    c->k = i->k;
    c->h = i->hidden;
    json_t *cfg = session_config_parse(h->config_json); /* NULL if not JSON: the defaults below */
    double cf = 0;
    session_config_num(cfg, "model.head.cf", -HUGE_VAL, HUGE_VAL, &cf);
    if (c->has_moe) snprintf(c->head, sizeof c->head, "%s E=%d k=%d h=%d cf=%g", i->head, c->E, c->k, c->h, cf);
    else snprintf(c->head, sizeof c->head, "dense k*h=%d", c->k * c->h);
    c->batch = h->batch;
    long ranks = 1; /* absent: one process */
    session_config_long(cfg, "ranks", 1, 1 << 20, &ranks);
    c->ranks = (int)ranks;
    c->capacity = h->nsteps > 0 && h->steps[h->nsteps - 1].has_moe ? h->steps[h->nsteps - 1].moe.capacity : h->batch;
    c->epochs = i->epochs;
    c->log_every = h->log_every > 0 ? h->log_every : 1;
    c->steps_per_epoch = h->steps_per_epoch;
    c->total_steps = h->total_steps;
    c->rho_nominal = h->rho_nominal;
    long win = 100;
    session_config_long(cfg, "route.window", 1, INT_MAX, &win);
    c->dead_window = (int)((win + c->log_every - 1) / c->log_every);
    RouteWinConfig route; /* the thresholds the session was written with (its defaults when absent) */
    routewin_defaults(&route);
    session_config_num(cfg, "route.entropy_min", 0, 1, &route.entropy_min);
    session_config_num(cfg, "route.max_share", 0, 1, &route.max_share);
    c->collapse_entropy = route.entropy_min;
    c->collapse_share = route.max_share;
    const int have_base = browse_tau_schedule(h->config_json, base) == 0;
    if (!have_base) {
        tau_schedule_defaults(base);
        base->total = h->total_steps > 0 ? h->total_steps : 1;
    }
    tau_plan_init(&c->plan, base);
    double lr = 0;
    session_config_num(cfg, "lr.base", -FLT_MAX, FLT_MAX, &lr);
    c->lr0 = (float)lr;
    json_decref(cfg);
    c->nlayers = h->nlayers < REC_MAX_LAYERS ? h->nlayers : REC_MAX_LAYERS; /* /layers (format 2) */
    memcpy(c->layer, h->layer, sizeof c->layer);
    return have_base;
}

static void log_line(Panels *ps, int level, const char *text) {
    if (!ps->have[PANEL_LOG]) return;
    const ViewMsg m = {.kind = VIEW_MSG_LOG, .level = level, .text = text};
    view_update(&ps->v[PANEL_LOG], &m);
}

void history_plans(const SessionHistory *h, Panels *ps, const TauSchedule *base, long step) {
    TauPlan plan;
    if (!panels_layered(ps)) {
        browse_plan_at(h, base, step, &plan);
        panels_plan(ps, &plan, step, -1);
        return;
    }
    for (int i = 0; i < ps->nlayers; i++) {
        browse_plan_at_layer(h, base, step, ps->ctx->layer[i].name, &plan);
        panels_plan(ps, &plan, step, i);
    }
}

long history_feed(const SessionHistory *h, Panels *ps, HistoryFed *fed, long max_step, const TauSchedule *base) {
    long n = 0;
    const long lim = max_step < 0 ? LONG_MAX : max_step;
    for (; fed->steps < h->nsteps && h->steps[fed->steps].step <= lim; fed->steps++, n++) {
        const ViewMsg m = {.kind = VIEW_MSG_STEP, .step = &h->steps[fed->steps]};
        panels_update(ps, &m);
    }
    int tau_cmds = 0;
    char line[512];
    for (;;) { /* evaluations and events in step order, an event first at the same step */
        const int ev_ok = fed->events < h->nevents && h->events[fed->events].step <= lim;
        const int eval_ok = fed->evals < h->nevals && h->evals[fed->evals].step <= lim;
        if (!ev_ok && !eval_ok) break;
        if (ev_ok && (!eval_ok || h->events[fed->events].step <= h->evals[fed->evals].step)) {
            const SessionEventRow *e = &h->events[fed->events++];
            snprintf(line, sizeof line, "[step %ld] %s", e->step, e->text);
            log_line(ps, VIEW_LOG_CMD, line);
            TrainerCmd c;
            char err[256];
            if (command_parse(e->text, &c, err, sizeof err) == 0 && trainer_tau_command(&c)) tau_cmds++;
        } else {
            const EvalRecord *e = &h->evals[fed->evals++];
            const ViewMsg m = {.kind = VIEW_MSG_EVAL, .eval = e};
            panels_update(ps, &m);
            eval_record_line(e, h->info.epochs, 1, line, sizeof line);
            log_line(ps, VIEW_LOG_EPOCH, line);
        }
        n++;
    }
    if (base && (tau_cmds || n)) {
        const long at = fed->steps > 0 ? h->steps[fed->steps - 1].step : 0;
        history_plans(h, ps, base, at);
    }
    return n;
}
