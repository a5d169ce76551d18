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
    if (r->collapsed) {
        size_t o = 0;
        for (int v = 0; v < CVIEW_COUNT; v++)
            if (r->collapse_views & (1 << v))
                o += (size_t)snprintf(views + o, sizeof views - o, "%s%s", o ? "+" : "", collapse_view_name(v));
        if (!o) snprintf(views, sizeof views, "?");
    }
    snprintf(
        buf, n,
        "  routing  load entropy %.3f  top1 share %.2f  clean top1 share %.2f  test top1 share %.2f  test dead %d/%d  "
        "drop %.1f%%  dead %d/%d  MaxVio %.2f  rho %.3f (nominal %.3f)  I(class;expert) %.3f nats  tau %.3g  "
        "aux %.4f  collapse %s%s%s%s%s",
        r->window_load_entropy, r->window_first_share, r->epoch_clean_first_share, r->test_first_share,
        r->test_dead_first, r->experts, 100 * r->train_drop_frac, r->dead_experts, r->experts, r->train_maxvio,
        r->train_rho_realized, r->rho_nominal, r->mutual_info, r->epoch_tau, r->epoch_l_aux,
        r->collapsed ? "YES (" : "no", views, r->collapsed ? ": " : "",
        r->collapsed ? routewin_reason_text(r->collapse_reason) : "", r->collapsed ? ")" : "");
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
}

void eval_record_layer(const EvalRecord *in, int i, EvalRecord *out) {
    if (out != in) *out = *in;
    if (i < 0 || i >= in->nlayers) return;
    const EvalLayer *l = &in->layer[i];
    out->has_moe = 1;
    out->train_drop_frac = l->train_drop_frac;
    out->train_maxvio = l->train_maxvio;
    out->train_rho_realized = l->train_rho_realized;
    out->window_load_entropy = l->window_load_entropy;
    out->window_first_share = l->window_first_share;
    out->dead_experts = l->dead_experts;
    out->epoch_tau = l->epoch_tau;
    out->epoch_l_aux = l->epoch_l_aux;
    out->epoch_clean_first_share = l->epoch_clean_first_share;
    out->collapsed = l->collapsed;
    out->collapse_reason = l->collapse_reason;
    out->collapse_views = l->collapse_views;
    out->collapse_first_step = l->collapse_first_step;
    out->collapse_first_train = l->collapse_first_train;
    out->collapse_first_clean = l->collapse_first_clean;
    out->collapse_first_eval = l->collapse_first_eval;
    out->classes = l->classes;
    out->experts = l->experts;
    out->class_expert = l->class_expert;
    out->drop_class_expert = l->drop_class_expert;
    out->mutual_info = l->mutual_info;
    out->test_load_entropy = l->test_load_entropy;
    out->test_first_share = l->test_first_share;
    out->test_dead_first = l->test_dead_first;
    out->test_dead_topk = l->test_dead_topk;
    out->tsne_n = l->tsne_n;
    out->feat_dim = l->feat_dim;
    out->tsne_feat = l->tsne_feat;
    out->tsne_expert = l->tsne_expert;
}

int run_record_layer_find(const RunRecord *r, const char *name) {
    for (int i = 0; i < r->nlayers; i++)
        if (!strcmp(r->layer[i].name, name)) return i;
    return -1;
}
