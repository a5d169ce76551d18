/* params.c — the `set` parameters' table, lookup and range checks (see params.h). */
#include "core/params.h"

#include <stdio.h>
#include <string.h>

#include "core/vocab.h"

static const CmdParamInfo cmd_params_[] = {
#define CMD_PARAM_ROW_(ID, word, lo, lo_open, hi, hi_open, moe, help) {word, lo, hi, lo_open, hi_open, moe, help},
    CMD_PARAMS(CMD_PARAM_ROW_)
#undef CMD_PARAM_ROW_
};
_Static_assert(sizeof cmd_params_ / sizeof cmd_params_[0] == PARAM_COUNT, "one row per CmdParam");

const char *const cmd_param_words[] = {
#define CMD_PARAM_WORD_(ID, word, ...) word,
    CMD_PARAMS(CMD_PARAM_WORD_)
#undef CMD_PARAM_WORD_
        NULL,
};

const CmdParamInfo *cmd_param_info(CmdParam p) { return (int)p >= 0 && (int)p < PARAM_COUNT ? &cmd_params_[p] : NULL; }

int cmd_param_parse(const char *word, CmdParam *out) {
    const int i = vocab_find(cmd_param_words, word, 0);
    if (i < 0) return -1;
    *out = (CmdParam)i;
    return 0;
}

static int above_lo(const CmdParamInfo *pi, double v) { return pi->lo_open ? v > pi->lo : v >= pi->lo; }
static int below_hi(const CmdParamInfo *pi, double v) { return pi->hi_open ? v < pi->hi : v <= pi->hi; }

ml_status cmd_param_check(CmdParam p, double v) {
    const CmdParamInfo *pi = cmd_param_info(p);
    if (!pi) return ml_fail(ML_ERR_ARG, "set: unknown parameter");
    if (!isfinite(v)) return ml_fail(ML_ERR_ARG, "set: value must be finite");
    if (above_lo(pi, v) && below_hi(pi, v)) return ML_OK;
    if (!isfinite(pi->lo)) return ml_fail(ML_ERR_ARG, "set %s: %g is too large", pi->word, v);
    if (!isfinite(pi->hi) && pi->lo == 0)
        return ml_fail(ML_ERR_ARG, "set %s: %g is not a %s finite number", pi->word, v,
                       pi->lo_open ? "positive" : "non-negative");
    if (!isfinite(pi->hi))
        return ml_fail(ML_ERR_ARG, "set %s: %g is not %s %g", pi->word, v, pi->lo_open ? ">" : ">=", pi->lo);
    return ml_fail(ML_ERR_ARG, "set %s: %g is outside %c%g, %g%c", pi->word, v, pi->lo_open ? '(' : '[', pi->lo, pi->hi,
                   pi->hi_open ? ')' : ']');
}

int cmd_param_lower_ok(CmdParam p, double v, char *msg, size_t n) {
    const CmdParamInfo *pi = cmd_param_info(p);
    if (!pi || !isfinite(pi->lo) || above_lo(pi, v)) return 1;
    snprintf(msg, n, "must be %s %g", pi->lo_open ? ">" : ">=", pi->lo);
    return 0;
}
