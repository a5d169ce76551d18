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
