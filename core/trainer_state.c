/* trainer_state.c — the trainer's checkpoint state as a table (state.h): every resumable value
 * with its checkpoint path, type and shape, checked before it is restored; the sessions layer
 * reads and writes the table without knowing the trainer. */
#include "trainer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// ---------------------------------------------------------------------------------------------
// the checkpoint state table (state.h). Paths are the checkpoint format's (README "Checkpoints").

_Static_assert(sizeof(long) == 8, "long counters are stored as int64");
_Static_assert(sizeof(int) == 4, "int fields are stored as int32");
_Static_assert(sizeof(TauKind) == sizeof(int) && sizeof(LrKind) == sizeof(int), "enums are stored as int");

static void sv(StateView *v, const char *path, void *ptr, StateType type, long d0, long d1, const char *hint) {
    ML_ASSERT(v->nvars < STATE_MAX_VARS);
    StateVar *r = &v->vars[v->nvars++];
    r->path = path;
    r->ptr = ptr;
    r->type = type;
    r->rank = d0 < 0 ? 0 : d1 < 0 ? 1 : 2;
    r->dims[0] = d0 < 0 ? 1 : d0;
    r->dims[1] = d1 < 0 ? 1 : d1;
    r->hint = hint;
    r->since = 1;
}
/* a row added in format_version 2 (a version-1 checkpoint lacks it: the restore keeps its value) */
static void sv2(StateView *v, const char *path, void *ptr, StateType type, long d0, long d1, const char *hint) {
    sv(v, path, ptr, type, d0, d1, hint);
    v->vars[v->nvars - 1].since = 2;
}
/* rows added inside format 2 after its release (issue 29: drops per class): a checkpoint without
 * them restores as if they were absent (since 3 > its format_version 2), so the restore keeps
 * their trainer_init value (zero counts) */
static void sv3(StateView *v, const char *path, void *ptr, StateType type, long d0, long d1, const char *hint) {
    sv(v, path, ptr, type, d0, d1, hint);
    v->vars[v->nvars - 1].since = 3;
}
static const char *const drop_ce_paths[MODEL_MAX_BBL] = {
    "/backbone/moe0/drop_class_expert", "/backbone/moe1/drop_class_expert", "/backbone/moe2/drop_class_expert",
    "/backbone/moe3/drop_class_expert"};
#define SCALAR -1, -1

static const char *const rng_paths[4] = {"/rng/init", "/rng/data", "/rng/noise", "/rng/aug"};

/* checkpoint rows of the backbone MoE layer after stage s: its bias and knobs (format 1), and its
 * collapse windows and views, epoch sums and temperature plan (format 2) */
#define BB_ROWS_(X, s)                                                                                              \
    X(s, "bias")                                                                                                    \
    X(s, "cf")                                                                                                      \
    X(s, "alpha")                                                                                                   \
    X(s, "beta") X(s, "noise") X(s, "bias_rate") X(s, "routewin/ring") X(s, "routewin/n") X(s, "routewin/head")     \
        X(s, "routewin/pushed") X(s, "routewin/sum") X(s, "routewin/zero_run") X(s, "routewin/ent_ring")            \
            X(s, "routewin/share_ring") X(s, "routewin/share_sum") X(s, "routewin/ent_sum")                         \
                X(s, "routewin_clean/ring") X(s, "routewin_clean/n") X(s, "routewin_clean/head")                    \
                    X(s, "routewin_clean/pushed") X(s, "routewin_clean/sum") X(s, "routewin_clean/zero_run")        \
                        X(s, "routewin_clean/ent_ring") X(s, "routewin_clean/share_ring")                           \
                            X(s, "routewin_clean/share_sum") X(s, "routewin_clean/ent_sum") BB_VIEW_(X, s, "train") \
                                BB_VIEW_(X, s, "clean") BB_VIEW_(X, s, "eval") X(s, "collapse/first_step")          \
                                    X(s, "ep_drop") X(s, "ep_maxvio") X(s, "ep_rho") X(s, "ep_tau") X(s, "ep_aux")  \
                                        X(s, "ep_clean") X(s, "tau_base") X(s, "tau_repl") X(s, "tau_has_override") \
                                            X(s, "tau_override") X(s, "tau_override_step") X(s, "tau_has_replacement")
#define BB_VIEW_(X, s, v)                                                                   \
    X(s, "collapse/" v "/flag")                                                             \
    X(s, "collapse/" v "/reason")                                                           \
    X(s, "collapse/" v "/expert")                                                           \
    X(s, "collapse/" v "/dead") X(s, "collapse/" v "/share") X(s, "collapse/" v "/entropy") \
        X(s, "collapse/" v "/first_step") X(s, "collapse/" v "/episodes") X(s, "collapse/" v "/since")
#define BB_PATH_(s, x) "/backbone/moe" #s "/" x,
#define BB_ONE_(s, x) +1
enum { BB_NROWS = 0 BB_ROWS_(BB_ONE_, 0) };
static const char *const bb_state_paths[MODEL_MAX_BBL][BB_NROWS] = {
    {BB_ROWS_(BB_PATH_, 0)}, {BB_ROWS_(BB_PATH_, 1)}, {BB_ROWS_(BB_PATH_, 2)}, {BB_ROWS_(BB_PATH_, 3)}};
#undef BB_ROWS_
#undef BB_VIEW_
#undef BB_PATH_
#undef BB_ONE_
#define BB_FORMAT1_ROWS 6 /* rows 0..5 exist since format 1; the rest since format 2 */

/* format 3: the episode counters of the three views, the experts' deaths (nz of the windows is
 * recomputed from their rings on restore) */
#define C3_ROWS_(X, pre)                                                                                      \
    X(pre, "collapse/train/pending") X(pre, "collapse/train/cand") X(pre, "collapse/clean/pending")           \
        X(pre, "collapse/clean/cand") X(pre, "collapse/eval/pending") X(pre, "collapse/eval/cand")            \
            X(pre, "collapse/dead") X(pre, "collapse/dead_since") X(pre, "collapse/deaths") X(pre, "collapse/revivals") \
                X(pre, "collapse/first_ema") X(pre, "collapse/idle/flag") X(pre, "collapse/idle/first_step")      \
                    X(pre, "collapse/idle/episodes") X(pre, "collapse/idle/since") X(pre, "collapse/idle/pending") \
                        X(pre, "collapse/idle/cand") X(pre, "collapse/idle/gate_entropy")                         \
                            X(pre, "collapse/idle/agree") X(pre, "collapse/idle/n")
#define C3_PATH_(pre, x) pre x,
static const char *const c3_paths[MODEL_MAX_BBL + 1][20] = {
    {C3_ROWS_(C3_PATH_, "/backbone/moe0/")}, {C3_ROWS_(C3_PATH_, "/backbone/moe1/")},
    {C3_ROWS_(C3_PATH_, "/backbone/moe2/")}, {C3_ROWS_(C3_PATH_, "/backbone/moe3/")},
    {C3_ROWS_(C3_PATH_, "/trainer/")}};
#undef C3_ROWS_
#undef C3_PATH_
static void sv_coll3(StateView *v, CollapseState *cs, const char *const *p);

/* The rows of one collapse state (two windows, three views, first step) under paths p[0..47], in
 * the order of the backbone tables above and of the head's /trainer/... tables below. since: the
 * format version of the rows. */
static void sv_coll(StateView *v, CollapseState *cs, const char *const *p, int since);

/* What a checkpoint read must satisfy before it is committed (staged[i] = vars[i]'s data). */
static ml_status state_check(const void *owner, void *const *staged) {
    const Trainer *t = owner;
    StateView v;
    trainer_state((Trainer *)t, &v); /* the same table, for the row indices */
#define STAGED(path, type) ((const type *)staged[state_find(&v, path)])
    for (int i = 0; i < 4; i++) {
        const uint64_t *s = STAGED(rng_paths[i], uint64_t);
        if ((s[0] | s[1] | s[2] | s[3]) == 0) return ml_fail(ML_ERR_FORMAT, "%s is all zero", rng_paths[i]);
    }
    const int64_t spe = *STAGED("/trainer/steps_per_epoch", int64_t);
    const int64_t total = *STAGED("/trainer/total_steps", int64_t);
    const int64_t step = *STAGED("/trainer/step", int64_t);
    const int32_t epoch = *STAGED("/trainer/epoch", int32_t), pos = *STAGED("/trainer/pos", int32_t);
    if (spe != t->steps_per_epoch)
        return ml_fail(ML_ERR_FORMAT, "%lld steps per epoch, this trainer has %ld (different --batch or dataset)",
                       (long long)spe, t->steps_per_epoch);
    if (epoch < 0 || pos < 0 || pos >= t->steps_per_epoch || step != (int64_t)epoch * t->steps_per_epoch + pos)
        return ml_fail(ML_ERR_FORMAT, "inconsistent position (step %lld, epoch %d, pos %d)", (long long)step, epoch,
                       pos);
    if (total != t->total_steps || step > total)
        return ml_fail(ML_ERR_FORMAT, "a run of %lld steps at step %lld; this trainer runs %ld (different --epochs)",
                       (long long)total, (long long)step, t->total_steps);
    const int n = t->src.n_train;
    const int32_t *perm = STAGED("/trainer/perm", int32_t);
    char *seen = ml_alloc((size_t)(n > 0 ? n : 1));
    if (!seen) return ml_fail(ML_ERR_NOMEM, "out of memory");
    memset(seen, 0, (size_t)(n > 0 ? n : 1));
    ml_status st = ML_OK;
    for (int i = 0; i < n && st == ML_OK; i++) {
        if (perm[i] < 0 || perm[i] >= n || seen[perm[i]])
            st = ml_fail(ML_ERR_FORMAT, "/trainer/perm is not a permutation");
        else seen[perm[i]] = 1;
    }
    ml_free(seen);
    if (st != ML_OK) return st;
    const TauSchedule *tb = STAGED("/schedule/tau_base", TauSchedule), *tr = STAGED("/schedule/tau_repl", TauSchedule);
    if (memchr(STAGED("/trainer/rule", char), 0, sizeof t->rule.text) == NULL)
        return ml_fail(ML_ERR_FORMAT, "/trainer/rule is not a terminated string");
    if (tau_validate(tb) != ML_OK || (*STAGED("/schedule/tau_has_replacement", int32_t) && tau_validate(tr) != ML_OK))
        return ml_fail(ML_ERR_FORMAT, "/schedule: invalid temperature schedule (%s)", ml_last_error());
    if (t->cfg.model.head.kind != HEAD_DENSE) {
        for (int i = 0; i < 2; i++) {
            const int32_t wn = *STAGED(i ? "/trainer/routewin_clean/n" : "/trainer/routewin/n", int32_t);
            const int32_t wh = *STAGED(i ? "/trainer/routewin_clean/head" : "/trainer/routewin/head", int32_t);
            if (wn < 0 || wn > t->coll.train.cfg.window || wh < 0 || wh >= t->coll.train.cfg.window)
                return ml_fail(ML_ERR_FORMAT, "inconsistent routing window (n %d, head %d)", wn, wh);
        }
    }
#undef STAGED
    return ML_OK;
}

/* a window's per-expert count of held steps with load, from its ring */
static void routewin_recount(RouteWin *w) {
    const int W = w->cfg.window;
    memset(w->nz, 0, sizeof w->nz);
    if (!w->ring) return;
    for (int i = 0; i < w->n; i++) {
        const int *slot = w->ring + (size_t)(((w->head - 1 - i) % W + W) % W) * w->E;
        for (int e = 0; e < w->E; e++) w->nz[e] += slot[e] > 0;
    }
}

static void state_restored(void *owner) {
    Trainer *t = owner;
    for (int i = 0; i <= t->nbl; i++) {
        CollapseState *cs = i < t->nbl ? &t->bl[i].coll : &t->coll;
        if (i == t->nbl && t->cfg.model.head.kind == HEAD_DENSE) break;
        routewin_recount(&cs->train);
        routewin_recount(&cs->clean);
    }
    t->clock.rec_step = t->step;
    t->clock.rec = t->clock.epoch = ml_now();
    t->ckpt_step = t->step;
    t->state.step = t->step;
    t->state.epoch = t->epoch;
}

void trainer_state(Trainer *t, StateView *v) {
    memset(v, 0, sizeof *v);
    v->model = &t->model;
    v->opt_m = t->opt.m;
    v->opt_v = t->opt.v;
    v->opt_kind = optim_kind_name(t->opt.cfg.kind);
    v->cfg = &t->cfg;
    v->dataset = t->src.name;
    v->step = t->step;
    v->epoch = t->epoch;
    v->check = state_check;
    v->restored = state_restored;
    v->owner = t;
    sv(v, "/optimizer/t", &t->opt.t, SV_I64, SCALAR, NULL);
    Rng *rngs[4] = {&t->rng_init, &t->rng_data, &t->rng_noise, &t->rng_aug};
    for (int i = 0; i < 4; i++) sv(v, rng_paths[i], rngs[i]->s, SV_U64, 4, -1, NULL);
    if (t->dist.nranks > 1) /* every rank's noise and augmentation streams (a one-process run has none) */
    {
        sv(v, "/dist/rank_rngs", t->dist.rank_rngs, SV_U64, t->dist.nranks, 8,
           "(the checkpoint was written by a run on another number of ranks: resume it with that many)");
        if (t->model.n_buf > 0)
            sv(v, "/dist/rank_buffers", t->dist.rank_bufs, SV_F32, t->dist.nranks, t->model.n_buf,
               "(the checkpoint was written by a run on another number of ranks: resume it with that many)");
    }
    sv(v, "/schedule/tau_base", &t->tau.base, SV_TAU, SCALAR, NULL);
    sv(v, "/schedule/tau_repl", &t->tau.repl, SV_TAU, SCALAR, NULL);
    sv(v, "/schedule/tau_has_override", &t->tau.has_override, SV_I32, SCALAR, NULL);
    sv(v, "/schedule/tau_override", &t->tau.override_tau, SV_F32, SCALAR, NULL);
    sv(v, "/schedule/tau_override_step", &t->tau.override_step, SV_I64, SCALAR, NULL);
    sv(v, "/schedule/tau_has_replacement", &t->tau.has_replacement, SV_I32, SCALAR, NULL);
    sv(v, "/schedule/lr", &t->cfg.lr, SV_LR, SCALAR, NULL);
    sv(v, "/schedule/lr_override", &t->lr_override, SV_F32, SCALAR, NULL);
    sv(v, "/trainer/step", &t->step, SV_I64, SCALAR, NULL);
    sv(v, "/trainer/epoch", &t->epoch, SV_I32, SCALAR, NULL);
    sv(v, "/trainer/pos", &t->pos, SV_I32, SCALAR, NULL);
    sv(v, "/trainer/steps_per_epoch", &t->steps_per_epoch, SV_I64, SCALAR, NULL);
    sv(v, "/trainer/total_steps", &t->total_steps, SV_I64, SCALAR, NULL);
    sv(v, "/trainer/perm", t->perm, SV_I32, t->src.n_train, -1, "(the checkpoint is for a different training set)");
    sv(v, "/trainer/ep_loss", &t->ep.loss, SV_F64, SCALAR, NULL);
    sv(v, "/trainer/ep_acc", &t->ep.acc, SV_F64, SCALAR, NULL);
    sv(v, "/trainer/ep_batches", &t->ep.batches, SV_I64, SCALAR, NULL);
    sv(v, "/trainer/ep_drop", &t->ep.drop, SV_F64, SCALAR, NULL);
    sv(v, "/trainer/ep_maxvio", &t->ep.maxvio, SV_F64, SCALAR, NULL);
    sv(v, "/trainer/ep_rho", &t->ep.rho, SV_F64, SCALAR, NULL);
    /* every backbone MoE layer: its utility bias and the knobs `set` changes */
    for (int i = 0; i < t->model.nmoec; i++) {
        MoeConv *L = &t->model.moec[i];
        const char *const *p = bb_state_paths[L->stage];
        sv(v, p[0], L->route.bias, SV_F32, L->route.cfg.E, -1, NULL);
        sv(v, p[1], &L->route.cfg.cf, SV_F32, SCALAR, NULL);
        sv(v, p[2], &L->route.cfg.alpha, SV_F32, SCALAR, NULL);
        sv(v, p[3], &L->route.cfg.beta, SV_F32, SCALAR, NULL);
        sv(v, p[4], &L->route.cfg.noise, SV_F32, SCALAR, NULL);
        sv(v, p[5], &L->route.cfg.bias_rate, SV_F32, SCALAR, NULL);
    }
    /* their collapse states, epoch sums and temperature plans (format 2; bl[i] is stage order) */
    for (int i = 0; i < t->nbl; i++) {
        TrainerLayer *l = &t->bl[i];
        const char *const *p = bb_state_paths[t->model.moec[l->mi].stage] + BB_FORMAT1_ROWS;
        sv_coll(v, &l->coll, p, 2);
        sv_coll3(v, &l->coll, c3_paths[t->model.moec[l->mi].stage]);
        p += 2 * 10 + 3 * 9 + 1;
        double *ep[6] = {&l->ep_drop, &l->ep_maxvio, &l->ep_rho, &l->ep_tau, &l->ep_aux, &l->ep_clean};
        for (int k = 0; k < 6; k++) sv2(v, p[k], ep[k], SV_F64, SCALAR, NULL);
        p += 6;
        sv2(v, p[0], &l->tau.base, SV_TAU, SCALAR, NULL);
        sv2(v, p[1], &l->tau.repl, SV_TAU, SCALAR, NULL);
        sv2(v, p[2], &l->tau.has_override, SV_I32, SCALAR, NULL);
        sv2(v, p[3], &l->tau.override_tau, SV_F32, SCALAR, NULL);
        sv2(v, p[4], &l->tau.override_step, SV_I64, SCALAR, NULL);
        sv2(v, p[5], &l->tau.has_replacement, SV_I32, SCALAR, NULL);
        sv3(v, drop_ce_paths[t->model.moec[l->mi].stage], l->drop_ce, SV_I32, t->src.classes,
            t->model.moec[l->mi].route.cfg.E, NULL);
    }
    if (t->nbl > 0 && t->cfg.model.head.kind != HEAD_DENSE)
        sv2(v, "/trainer/ep_rho_head", &t->ep.rho_head, SV_F64, SCALAR, NULL);
    sv(v, "/trainer/ep_tau", &t->ep.tau, SV_F64, SCALAR, NULL);
    sv(v, "/trainer/ep_aux", &t->ep.aux, SV_F64, SCALAR, NULL);
    sv(v, "/trainer/ep_clean", &t->ep.clean, SV_F64, SCALAR, NULL);
    sv(v, "/trainer/rule_done", &t->rule.done, SV_I32, SCALAR, NULL);
    sv(v, "/trainer/rule_pause", &t->rule.pause, SV_I32, SCALAR, NULL);
    sv(v, "/trainer/rule", t->rule.text, SV_I32, (long)(sizeof t->rule.text / 4), -1, NULL); /* the rule text as int32 words */
    if (t->cfg.model.head.kind == HEAD_DENSE) return;
    Model *m = &t->model;
    MoeConfig *h = &m->moe.cfg;
    const int E = t->cfg.model.head.E;
    sv(v, "/moe/bias", m->moe.bias, SV_F32, E, -1, NULL);
    sv3(v, "/trainer/drop_class_expert", t->drop_ce, SV_I32, t->src.classes, E, NULL);
    /* the routing knobs `set` changes while training: stored once, in the head's MoeConfig */
    sv(v, "/moe/cf", &h->cf, SV_F32, SCALAR, NULL);
    sv(v, "/moe/alpha", &h->alpha, SV_F32, SCALAR, NULL);
    sv(v, "/moe/beta", &h->beta, SV_F32, SCALAR, NULL);
    sv(v, "/moe/noise", &h->noise, SV_F32, SCALAR, NULL);
    sv(v, "/moe/bias_rate", &h->bias_rate, SV_F32, SCALAR, NULL);
    /* the two windows of the collapse views (training: /trainer/routewin, clean router:
     * /trainer/routewin_clean) and the views' flags and first steps */
    static const char *const head_coll_paths[] = {"/trainer/routewin/ring",
                                                  "/trainer/routewin/n",
                                                  "/trainer/routewin/head",
                                                  "/trainer/routewin/pushed",
                                                  "/trainer/routewin/sum",
                                                  "/trainer/routewin/zero_run",
                                                  "/trainer/routewin/ent_ring",
                                                  "/trainer/routewin/share_ring",
                                                  "/trainer/routewin/share_sum",
                                                  "/trainer/routewin/ent_sum",
                                                  "/trainer/routewin_clean/ring",
                                                  "/trainer/routewin_clean/n",
                                                  "/trainer/routewin_clean/head",
                                                  "/trainer/routewin_clean/pushed",
                                                  "/trainer/routewin_clean/sum",
                                                  "/trainer/routewin_clean/zero_run",
                                                  "/trainer/routewin_clean/ent_ring",
                                                  "/trainer/routewin_clean/share_ring",
                                                  "/trainer/routewin_clean/share_sum",
                                                  "/trainer/routewin_clean/ent_sum",
                                                  "/trainer/collapse/train/flag",
                                                  "/trainer/collapse/train/reason",
                                                  "/trainer/collapse/train/expert",
                                                  "/trainer/collapse/train/dead",
                                                  "/trainer/collapse/train/share",
                                                  "/trainer/collapse/train/entropy",
                                                  "/trainer/collapse/train/first_step",
                                                  "/trainer/collapse/train/episodes",
                                                  "/trainer/collapse/train/since",
                                                  "/trainer/collapse/clean/flag",
                                                  "/trainer/collapse/clean/reason",
                                                  "/trainer/collapse/clean/expert",
                                                  "/trainer/collapse/clean/dead",
                                                  "/trainer/collapse/clean/share",
                                                  "/trainer/collapse/clean/entropy",
                                                  "/trainer/collapse/clean/first_step",
                                                  "/trainer/collapse/clean/episodes",
                                                  "/trainer/collapse/clean/since",
                                                  "/trainer/collapse/eval/flag",
                                                  "/trainer/collapse/eval/reason",
                                                  "/trainer/collapse/eval/expert",
                                                  "/trainer/collapse/eval/dead",
                                                  "/trainer/collapse/eval/share",
                                                  "/trainer/collapse/eval/entropy",
                                                  "/trainer/collapse/eval/first_step",
                                                  "/trainer/collapse/eval/episodes",
                                                  "/trainer/collapse/eval/since",
                                                  "/trainer/collapse/first_step"};
    _Static_assert(sizeof head_coll_paths / sizeof *head_coll_paths == 2 * 10 + 3 * 9 + 1, "48 collapse rows");
    sv_coll(v, &t->coll, head_coll_paths, 1);
    sv_coll3(v, &t->coll, c3_paths[MODEL_MAX_BBL]);
}

static void sv_coll3(StateView *v, CollapseState *cs, const char *const *p) {
    const int n0 = v->nvars;
    for (int i = 0; i < CVIEW_COUNT; i++, p += 2) {
        sv(v, p[0], &cs->view[i].pending, SV_I64, SCALAR, NULL);
        sv(v, p[1], &cs->view[i].cand, SV_I64, SCALAR, NULL);
    }
    sv(v, p[0], cs->dead, SV_I32, cs->E, -1, NULL);
    sv(v, p[1], cs->dead_since, SV_I64, cs->E, -1, NULL);
    sv(v, p[2], &cs->deaths, SV_I64, SCALAR, NULL);
    sv(v, p[3], &cs->revivals, SV_I64, SCALAR, NULL);
    sv(v, p[4], cs->first_ema, SV_F64, cs->E, -1, NULL);
    sv(v, p[5], &cs->idle.flag, SV_I32, SCALAR, NULL);
    sv(v, p[6], &cs->idle.first_step, SV_I64, SCALAR, NULL);
    sv(v, p[7], &cs->idle.episodes, SV_I64, SCALAR, NULL);
    sv(v, p[8], &cs->idle.since, SV_I64, SCALAR, NULL);
    sv(v, p[9], &cs->idle.pending, SV_I64, SCALAR, NULL);
    sv(v, p[10], &cs->idle.cand, SV_I64, SCALAR, NULL);
    sv(v, p[11], &cs->idle_gate_h, SV_F64, SCALAR, NULL);
    sv(v, p[12], &cs->idle_agree, SV_F64, SCALAR, NULL);
    sv(v, p[13], &cs->idle_n, SV_I64, SCALAR, NULL);
    for (int k = n0; k < v->nvars; k++) v->vars[k].since = 3;
}

static void sv_coll(StateView *v, CollapseState *cs, const char *const *p, int since) {
    for (int i = 0; i < 2; i++, p += 10) {
        RouteWin *w = i ? &cs->clean : &cs->train;
        const int W = w->cfg.window, E = cs->E;
        sv(v, p[0], w->ring, SV_I32, W, E, "(compare --route-window)");
        sv(v, p[1], &w->n, SV_I32, SCALAR, NULL);
        sv(v, p[2], &w->head, SV_I32, SCALAR, NULL);
        sv(v, p[3], &w->pushed, SV_I64, SCALAR, NULL);
        sv(v, p[4], w->sum, SV_I64, E, -1, NULL);
        sv(v, p[5], w->zero_run, SV_I64, E, -1, NULL);
        sv(v, p[6], w->ent_ring, SV_F64, W, -1, NULL);
        sv(v, p[7], w->share_ring, SV_F64, W, -1, NULL);
        sv(v, p[8], &w->share_sum, SV_F64, SCALAR, NULL);
        sv(v, p[9], &w->ent_sum, SV_F64, SCALAR, NULL);
        for (int k = v->nvars - 10; k < v->nvars; k++) v->vars[k].since = since;
    }
    for (int i = 0; i < CVIEW_COUNT; i++, p += 9) {
        CollapseView *cv = &cs->view[i];
        sv(v, p[0], &cv->flag, SV_I32, SCALAR, NULL);
        sv(v, p[1], &cv->reason, SV_I32, SCALAR, NULL);
        sv(v, p[2], &cv->expert, SV_I32, SCALAR, NULL);
        sv(v, p[3], &cv->dead, SV_I32, SCALAR, NULL);
        sv(v, p[4], &cv->share, SV_F64, SCALAR, NULL);
        sv(v, p[5], &cv->entropy, SV_F64, SCALAR, NULL);
        sv(v, p[6], &cv->first_step, SV_I64, SCALAR, NULL);
        sv(v, p[7], &cv->episodes, SV_I64, SCALAR, NULL);
        sv(v, p[8], &cv->since, SV_I64, SCALAR, NULL);
        for (int k = v->nvars - 9; k < v->nvars; k++) v->vars[k].since = since;
    }
    sv(v, p[0], &cs->first_step, SV_I64, SCALAR, NULL);
    v->vars[v->nvars - 1].since = since;
}
#undef SCALAR

size_t state_type_size(StateType t) {
    switch (t) {
    case SV_I32:
    case SV_F32: return 4;
    case SV_I64:
    case SV_U64:
    case SV_F64: return 8;
    case SV_TAU: return sizeof(TauSchedule);
    case SV_LR: return sizeof(LrSchedule);
    }
    return 0;
}

long state_var_count(const StateVar *v) {
    return v->rank == 0 ? 1 : v->rank == 1 ? v->dims[0] : v->dims[0] * v->dims[1];
}

int state_find(const StateView *v, const char *path) {
    for (int i = 0; i < v->nvars; i++)
        if (!strcmp(v->vars[i].path, path)) return i;
    return -1;
}
