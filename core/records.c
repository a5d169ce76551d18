/* records.c — the text forms of records (see records.h). */
#include "records.h"

#include <stdio.h>
#include <string.h>

#include "routestats.h"

void eval_record_line(const EvalRecord *r, int epochs, int epoch_end, char *buf, size_t n) {
    if (epoch_end)
        snprintf(
            buf, n,
            "epoch %3d/%d  step %6ld  train loss %.4f acc %6.2f%%  test loss %.4f acc %6.2f%%  %6.0f img/s  %6.1f s",
            r->epoch, epochs, r->step, r->train_loss, 100 * r->train_acc, r->test_loss, 100 * r->test_acc, r->img_per_s,
            r->elapsed);
    else snprintf(buf, n, "eval at step %ld  test loss %.4f acc %.2f%%", r->step, r->test_loss, 100 * r->test_acc);
}

void eval_routing_line(const EvalRecord *r, const StepRecord *last, char *buf, size_t n) {
    (void)last; /* the epoch means of the EvalRecord, not one logged step */
    char views[64] = "";
    const int flagged = r->collapsed || r->alarm > 0;
    if (flagged) {
        size_t o = 0;
        for (int v = 0; v < CVIEW_COUNT; v++)
            if (r->collapse_views & (1 << v))
                o += (size_t)snprintf(views + o, sizeof views - o, "%s%s", o ? "+" : "", collapse_view_name(v));
        if (r->collapse_views & CVIEW_BIT_IDLE)
            o += (size_t)snprintf(views + o, sizeof views - o, "%sidle router", o ? "+" : "");
        if (!o) snprintf(views, sizeof views, r->moe.dead_experts > 0 ? "expert death" : "?");
    }
    /* "collapse no" | "collapse YES (training: share)" | "collapse warning (clean router: share)" */
    const char *word = r->collapsed ? "YES (" : r->alarm > 0 ? "warning (" : "no";
    snprintf(
        buf, n,
        "  routing  load entropy %.3f  top1 share %.2f  clean top1 share %.2f  test top1 share %.2f  test dead %d/%d  "
        "drop %.1f%%  dead %d/%d  MaxVio %.2f  rho %.3f (nominal %.3f)  I(class;expert) %.3f nats  tau %.3g  "
        "aux %.4f  collapse %s%s%s%s%s",
        r->moe.window_load_entropy, r->moe.window_first_share, r->moe.epoch_clean_first_share, r->moe.test_first_share,
        r->moe.test_dead_first, r->moe.experts, 100 * r->moe.train_drop_frac, r->moe.dead_experts, r->moe.experts, r->moe.train_maxvio,
        r->train_rho_realized, r->rho_nominal, r->moe.mutual_info, r->moe.epoch_tau, r->moe.epoch_l_aux,
        word, views, flagged && r->collapse_reason ? ": " : "", flagged ? routewin_reason_text(r->collapse_reason) : "",
        flagged ? ")" : "");
}

const char *cmd_origin_prefix(CmdOrigin o) { return o == CMD_FROM_RULE ? "rule: " : ""; }

const char *cmd_origin_strip(const char *text, CmdOrigin *o) {
    if (o) *o = CMD_FROM_NONE;
    if (!strncmp(text, "rule: ", 6)) {
        if (o) *o = CMD_FROM_RULE;
        return text + 6;
    }
    return text;
}

const char *cmd_origin_name(int origin) {
    static const char *const names[] = {[CMD_FROM_NONE] = "",
                                        [CMD_FROM_FILE] = "file",
                                        [CMD_FROM_SCREEN] = "screen",
                                        [CMD_FROM_SOCKET] = "socket",
                                        [CMD_FROM_RULE] = "rule"};
    return origin >= 0 && origin < (int)(sizeof names / sizeof *names) ? names[origin] : "";
}

void step_record_layer(const StepRecord *in, int i, StepRecord *out) {
    if (out != in) *out = *in;
    if (i < 0 || i >= in->nlayers) return;
    const StepLayer *l = &in->layer[i];
    out->has_moe = 1;
    out->moe = l->moe;
    out->tau = (float)l->moe.tau;
    out->rho_realized = l->rho_realized;
    out->dead_experts = l->dead_experts;
    out->window_load_entropy = l->window_load_entropy;
    out->collapsed = l->collapsed;
    out->collapse_reason = l->collapse_reason;
    out->collapse_views = l->collapse_views;
    out->collapse_first_step = l->collapse_first_step;
    memcpy(out->collapse_text, l->collapse_text, sizeof out->collapse_text);
    out->alarm = l->alarm;
    out->dead_mask = l->dead_mask;
    out->forecast = l->forecast;
    out->trend = l->trend;
    memcpy(out->forecast_text, l->forecast_text, sizeof out->forecast_text);
}

void eval_record_layer(const EvalRecord *in, int i, EvalRecord *out) {
    if (out != in) *out = *in;
    if (i < 0 || i >= in->nlayers) return;
    const EvalLayer *l = &in->layer[i];
    out->has_moe = 1;
    out->moe = *l;
    out->train_rho_realized = l->train_rho_realized;
    out->collapsed = l->collapsed;
    out->collapse_reason = l->collapse_reason;
    out->collapse_views = l->collapse_views;
    out->collapse_first_step = l->collapse_first_step;
    out->collapse_first_train = l->collapse_first_train;
    out->collapse_first_clean = l->collapse_first_clean;
    out->collapse_first_eval = l->collapse_first_eval;
    out->alarm = l->alarm;
}

int run_record_layer_find(const RunRecord *r, const char *name) {
    for (int i = 0; i < r->nlayers; i++)
        if (!strcmp(r->layer[i].name, name)) return i;
    return -1;
}

/* ---- where and when: alarm spans and counts (records.h) */

int step_record_alarm_level(const StepRecord *r) {
    if (r->alarm > 0) return r->alarm > ALARM_COLLAPSE ? ALARM_COLLAPSE : r->alarm;
    return r->collapsed ? ALARM_COLLAPSE : ALARM_NONE;
}

void alarm_spans_init(AlarmSpans *a) {
    memset(a, 0, sizeof *a);
    a->last = -1;
}

/* Merges the two neighbouring spans with the smallest gap (the first such pair). */
static void alarm_spans_merge(AlarmSpans *a) {
    int best = 0;
    long gap = -1;
    for (int i = 0; i + 1 < a->n; i++) {
        const long g = a->span[i + 1].start - a->span[i].end;
        if (gap < 0 || g < gap) gap = g, best = i;
    }
    AlarmSpan *s = &a->span[best];
    const AlarmSpan *t = &a->span[best + 1];
    s->end = t->end;
    if (t->level > s->level) s->level = t->level;
    memmove(&a->span[best + 1], &a->span[best + 2], sizeof a->span[0] * (size_t)(a->n - best - 2));
    a->n--;
    a->merged++;
}

void alarm_spans_push(AlarmSpans *a, long step, int level) {
    if (a->last >= 0 && step <= a->last) return;
    a->last = step;
    if (level < ALARM_NONE) level = ALARM_NONE;
    if (level > ALARM_COLLAPSE) level = ALARM_COLLAPSE;
    if (level == ALARM_NONE) {
        a->open = 0;
        return;
    }
    if (a->open && a->n > 0 && a->span[a->n - 1].level == level) {
        a->span[a->n - 1].end = step;
        return;
    }
    if (a->n == ALARM_SPANS_MAX) alarm_spans_merge(a);
    AlarmSpan *s = &a->span[a->n++];
    s->start = s->end = step;
    s->level = level;
    s->pad_ = 0;
    a->open = 1;
}

int alarm_spans(const StepRecord *rows, long n, AlarmSpans *a) {
    alarm_spans_init(a);
    for (long i = 0; i < n; i++) alarm_spans_push(a, rows[i].step, step_record_alarm_level(&rows[i]));
    return a->n;
}

int alarm_spans_level(const AlarmSpans *a, double x0, double x1) {
    int level = ALARM_NONE;
    for (int i = 0; i < a->n; i++)
        if ((double)a->span[i].start <= x1 && (double)a->span[i].end >= x0 && a->span[i].level > level)
            level = a->span[i].level;
    return level;
}

/* 1 if text starts with word followed by " at step " and a digit. */
static int alarm_event_is(const char *text, const char *word) {
    const size_t n = strlen(word);
    return !strncmp(text, word, n) && !strncmp(text + n, " at step ", 9) && text[n + 9] >= '0' && text[n + 9] <= '9';
}

int alarm_count_event(AlarmCounts *c, const char *text) {
    if (!text) return -1;
    if (alarm_event_is(text, "collapse")) {
        c->collapse++;
        return ALARM_COLLAPSE;
    }
    if (alarm_event_is(text, "warning")) {
        c->warning++;
        return ALARM_WARNING;
    }
    if (alarm_event_is(text, "expert death")) {
        c->death++;
        return ALARM_WARNING;
    }
    if (alarm_event_is(text, "expert revival")) {
        c->revival++;
        return ALARM_NONE;
    }
    return -1;
}

void alarm_counts_text(const AlarmCounts *c, char *buf, size_t n) {
    if (!n) return;
    buf[0] = 0;
    size_t k = 0;
    const int v[3] = {c->collapse, c->warning, c->death};
    const char tag[3] = {'C', 'W', 'D'};
    for (int i = 0; i < 3; i++) {
        if (v[i] <= 0 || k >= n) continue;
        const int w = snprintf(buf + k, n - k, "%s%d%c", k ? " " : "", v[i], tag[i]);
        if (w < 0) break;
        k += (size_t)w;
    }
    if (!buf[0]) snprintf(buf, n, "-");
}
