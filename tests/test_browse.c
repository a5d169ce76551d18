/* test_browse.c — the terminal-free side of `moelab browse` (app/browse/browse_data.c, through
 * app/browse/browse.h, linked from the moelab_app library):
 *
 *  1. the configuration reader (session_config_parse and its look-ups, jansson) on the text an
 *     older moelab stored in /run@config_json: nested lookups, keys that are prefixes of others,
 *     keys found only nested (never at the top level), arrays, escaped quotes; hostile input:
 *     wrong types, missing keys, out-of-range numbers, duplicate keys, non-objects, text that is
 *     not JSON and every truncation of the configuration (in an exact-size heap copy, so an
 *     over-read is an ASan error): -1 / NULL with a message naming config_json, never a crash;
 *  2. browse_tau_schedule: the launch schedule, defaults, and -1 when absent / unknown / invalid;
 *  3. browse_plan_at on a hand-made event log (set tau, anneal, and notes that are not commands)
 *     against a TauPlan built the way trainer_apply builds it, including a schedule shorter than
 *     the run (--tau-epochs), where an anneal runs to the end of training;
 *  4. a folder tree of real sessions made by the moelab binary (MOELAB_BIN): browse_list_scan
 *     (names, depth limit, folders without live.h5, statuses finished / interrupted / running /
 *     damaged / unsupported, schedules), sorting by every column both ways, filtering, the list
 *     cells, stale detection on a SIGKILLed writer, and the temperature plan rebuilt at every
 *     logged step of a run driven by --commands equal to the tau the trainer logged;
 *  5. browse_list_scan on a missing folder and on a plain file: -1 with a message;
 *  6. the alarms column: episodes by severity counted from the event log ("3C 1W 1D", "-" for none,
 *     "?" when not read), its sort, and sweep_h5_read_routing counting the same events. */
#define _GNU_SOURCE
#include "app/cli/commands.h"
#include "app/browse/browse.h"
#include "check.h"
#include "sessions/sweep_h5.h"

#include <errno.h>
#include <fcntl.h>
#include <float.h>
#include <hdf5.h>
#include <jansson.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* The configuration JSON as session_config_json writes it (shortened). */
static const char *const CONFIG =
    "{\"dataset\": \"fashion-mnist\", \"model\": {\"in_c\": 1, \"head\": {\"kind\": \"moe\", \"E\": 8, \"cf\": 1.25}}, "
    "\"lr\": {\"kind\": \"cosine\", \"base\": 0.05, \"milestones\": [0.5, 0.75]}, \"tau\": {\"kind\": \"exp\", \"tau0\": 1, "
    "\"tau1\": 0.100000001, \"tau_min\": 0.00999999978, \"s\": 10, \"c\": 0.5, \"step_every\": 0, \"step_gamma\": 0, "
    "\"start\": 0, \"total\": 468}, \"epochs\": 1}";


static int str_is(const char *got, const char *want) { return got && !strcmp(got, want); }

/* ------------------------------------------------------------------ 1. JSON */

static const double ANY = HUGE_VAL;

/* The error message names config_json and contains `what`. */
static int error_is(const char *what) {
    const char *e = ml_last_error();
    return strstr(e, "config_json") && strstr(e, what);
}

static void test_json(void) {
    char buf[256];
    double v;
    long l;
    json_t *cfg = session_config_parse(CONFIG);
    check(cfg != NULL, "the configuration (as moelab's hand-written writer stored it) parses: %s",
          cfg ? "" : ml_last_error());

    /* top-level values */
    check(session_config_str(cfg, "dataset", buf, sizeof buf) == 1 && str_is(buf, "fashion-mnist"), "dataset = '%s'",
          buf);
    check(session_config_num(cfg, "epochs", -ANY, ANY, &v) == 1 && v == 1.0,
          "epochs (after nested objects and an array) = %g", v);

    /* nested lookups */
    check(json_is_object(json_object_get(cfg, "model")), "model is an object");
    check(session_config_str(cfg, "model.head.kind", buf, sizeof buf) == 1 && str_is(buf, "moe"),
          "model.head.kind = '%s'", buf);
    check(session_config_long(cfg, "model.head.E", 1, 64, &l) == 1 && l == 8, "model.head.E = %ld", l);
    check(session_config_num(cfg, "model.head.cf", -ANY, ANY, &v) == 1 && v == 1.25, "model.head.cf = %g", v);
    check(session_config_num(cfg, "model.in_c", -ANY, ANY, &v) == 1 && v == 1, "model.in_c = %g", v);
    check(session_config_num(cfg, "model.E", -ANY, ANY, &v) == 0 &&
              session_config_str(cfg, "model.kind", buf, sizeof buf) == 0,
          "model.E / model.kind: only in model.head");
    check(session_config_str(cfg, "lr.kind", buf, sizeof buf) == 1 && str_is(buf, "cosine"), "lr.kind = '%s'", buf);
    check(session_config_num(cfg, "lr.base", -ANY, ANY, &v) == 1 && v == 0.05, "lr.base = %g", v);
    check(session_config_str(cfg, "tau.kind", buf, sizeof buf) == 1 && str_is(buf, "exp"),
          "tau.kind = '%s' (not lr's or the head's)", buf);
    check(session_config_long(cfg, "tau.total", 0, LONG_MAX, &l) == 1 && l == 468, "tau.total = %ld", l);

    /* keys only present nested are not found at the top level */
    check(session_config_str(cfg, "kind", buf, sizeof buf) == 0, "top-level 'kind' is absent (only nested)");
    check(session_config_num(cfg, "E", -ANY, ANY, &v) == 0 && session_config_num(cfg, "total", -ANY, ANY, &v) == 0 &&
              session_config_num(cfg, "base", -ANY, ANY, &v) == 0,
          "top-level E / total / base are absent (only nested)");
    check(session_config_num(cfg, "head.cf", -ANY, ANY, &v) == 0, "top-level 'head' is absent (model.head)");

    /* prefixes and extensions of keys */
    check(session_config_num(cfg, "tau.tau", -ANY, ANY, &v) == 0,
          "'tau' inside tau{} (prefix of tau0, tau1, tau_min) is absent");
    check(session_config_num(cfg, "tau.step", -ANY, ANY, &v) == 0,
          "'step' (prefix of step_every, step_gamma) is absent");
    check(session_config_num(cfg, "tau.tau_", -ANY, ANY, &v) == 0 &&
              session_config_num(cfg, "tau.tau00", -ANY, ANY, &v) == 0 &&
              session_config_num(cfg, "tau.tota", -ANY, ANY, &v) == 0,
          "tau_ / tau00 / tota are absent");
    check(session_config_num(cfg, "tau.tau0", -ANY, ANY, &v) == 1 && v == 1, "tau.tau0 = %g", v);
    check(session_config_num(cfg, "tau.tau1", -ANY, ANY, &v) == 1 && v == 0.100000001 && (float)v == 0.1f,
          "tau.tau1 = %.9g, the float 0.1 again", v);
    check(session_config_num(cfg, "tau.tau_min", -ANY, ANY, &v) == 1 && v == 0.00999999978 && (float)v == 0.01f,
          "tau.tau_min = %.9g, the float 0.01 again", v);
    check(session_config_num(cfg, "tau.s", -ANY, ANY, &v) == 1 && v == 10,
          "tau.s = %g (not step_every / step_gamma / start)", v);
    check(session_config_num(cfg, "tau.step_gamma", -ANY, ANY, &v) == 1 && v == 0, "tau.step_gamma = %g", v);
    check(session_config_num(cfg, "epoch", -ANY, ANY, &v) == 0 &&
              session_config_num(cfg, "epochs ", -ANY, ANY, &v) == 0,
          "'epoch' / 'epochs ' are absent");
    check(session_config_num(cfg, "", -ANY, ANY, &v) == 0 && session_config_num(cfg, "tau.", -ANY, ANY, &v) == 0 &&
              session_config_num(cfg, ".tau", -ANY, ANY, &v) == 0,
          "the empty key is absent");

    /* arrays */
    const json_t *ms = json_object_get(json_object_get(cfg, "lr"), "milestones");
    check(json_array_size(ms) == 2 && json_number_value(json_array_get(ms, 0)) == 0.5 &&
              json_number_value(json_array_get(ms, 1)) == 0.75,
          "lr.milestones is the array [0.5, 0.75]");
    v = -7;
    check(session_config_num(cfg, "lr.milestones", -ANY, ANY, &v) == -1 && v == -7 &&
              error_is("lr.milestones is an array"),
          "a number look-up on an array: -1, v untouched, \"%s\"", ml_last_error());
    check(session_config_str(cfg, "lr.milestones", buf, sizeof buf) == -1, "a string look-up on an array: -1");
    check(session_config_num(cfg, "lr.milestones.0", -ANY, ANY, &v) == -1 &&
              error_is("lr.milestones is an array, not an object"),
          "a path through an array: -1, \"%s\"", ml_last_error());
    json_t *arr = session_config_parse(
        "{\"a\": [1, {\"b\": 2}, \"x]\", [[]], \"}\"], \"b\": 3, \"c\": {\"d\": [{\"b\": 4}]}, \"e\": [] }");
    check(session_config_num(arr, "b", -ANY, ANY, &v) == 1 && v == 3,
          "key after an array holding objects, brackets in strings: b = %g", v);
    check(session_config_num(arr, "d", -ANY, ANY, &v) == 0 && session_config_num(arr, "c.d", -ANY, ANY, &v) == -1,
          "'d' only inside c{}, and an array there");
    check(json_is_array(json_object_get(arr, "e")) && json_array_size(json_object_get(arr, "e")) == 0,
          "an empty array value");
    json_decref(arr);

    /* strings with escaped quotes and backslashes */
    json_t *esc = session_config_parse("{\"note\": \"\\\"n\\\": 99, {\\\"b\\\": [\", \"cmd\": \"say \\\"hi\\\"\", "
                                       "\"path\": \"C:\\\\x\\\\\", \"n\": 5, \"q\\\"k\": 6}");
    check(session_config_num(esc, "n", -ANY, ANY, &v) == 1 && v == 5,
          "n after strings holding escaped quotes and a key-like text = %g", v);
    check(session_config_str(esc, "cmd", buf, sizeof buf) == 1 && str_is(buf, "say \"hi\""),
          "escaped quotes unescaped: '%s'", buf);
    check(session_config_str(esc, "path", buf, sizeof buf) == 1 && str_is(buf, "C:\\x\\"),
          "escaped backslashes, one at the end: '%s'", buf);
    check(session_config_str(esc, "note", buf, sizeof buf) == 1 && str_is(buf, "\"n\": 99, {\"b\": ["),
          "string with JSON-like text: '%s'", buf);
    check(session_config_num(esc, "q\"k", -ANY, ANY, &v) == 1 && v == 6, "a key holding a quote = %g", v);
    json_decref(esc);

    /* truncation of a string to the buffer */
    memset(buf, 'X', sizeof buf);
    check(session_config_str(cfg, "dataset", buf, 4) == 1 && str_is(buf, "fas") && buf[4] == 'X',
          "a string is cut to n-1 and terminated");
    check(session_config_str(cfg, "dataset", buf, 0) == -1, "a string look-up with n = 0 fails");

    /* wrong types, missing keys, ranges: -1 with a message naming the path, 0 when absent */
    v = -7;
    check(session_config_num(cfg, "dataset", -ANY, ANY, &v) == -1 && v == -7 &&
              error_is("dataset is a string, not a number"),
          "a number look-up on a string: \"%s\"", ml_last_error());
    check(session_config_str(cfg, "epochs", buf, sizeof buf) == -1 && error_is("epochs is a number, not a string"),
          "a string look-up on a number: \"%s\"", ml_last_error());
    check(session_config_str(cfg, "model", buf, sizeof buf) == -1 && error_is("model is an object"),
          "a string look-up on an object: -1");
    check(session_config_num(cfg, "dataset.x", -ANY, ANY, &v) == -1 && error_is("dataset is a string, not an object"),
          "a path through a string: \"%s\"", ml_last_error());
    check(session_config_num(cfg, "nonexistent", -ANY, ANY, &v) == 0 &&
              session_config_str(cfg, "nonexistent", buf, sizeof buf) == 0 &&
              session_config_long(cfg, "nonexistent.x", 0, 1, &l) == 0,
          "missing key: 0");
    check(session_config_num(NULL, "epochs", -ANY, ANY, &v) == 0 &&
              session_config_str(NULL, "dataset", buf, sizeof buf) == 0,
          "no configuration (NULL, as session_config_parse gives for bad text): 0");
    json_t *lit = session_config_parse("{\"x\": null, \"y\": true, \"h\": 2.5, \"big\": 1e300, \"neg\": -3}");
    check(session_config_num(lit, "x", -ANY, ANY, &v) == -1 && error_is("x is null") &&
              session_config_num(lit, "y", -ANY, ANY, &v) == -1 && error_is("y is a boolean"),
          "null and true are not numbers");
    l = -7;
    check(session_config_long(lit, "h", 0, 10, &l) == -1 && l == -7 && error_is("not an integer"),
          "2.5 is not an integer: \"%s\"", ml_last_error());
    check(session_config_long(lit, "big", LONG_MIN, LONG_MAX, &l) == -1 &&
              session_config_num(lit, "big", -FLT_MAX, FLT_MAX, &v) == -1 && error_is("outside"),
          "1e300 is out of the long and float ranges: \"%s\"", ml_last_error());
    check(session_config_long(lit, "neg", 0, 10, &l) == -1 && session_config_long(lit, "neg", -3, 10, &l) == 1 &&
              l == -3,
          "the bounds are inclusive");
    json_decref(lit);
    json_t *ws = session_config_parse(" \n{ \"a\" :\t-2.5e-3 ,\"b\":1}");
    check(session_config_num(ws, "a", -ANY, ANY, &v) == 1 && v == -2.5e-3, "whitespace around keys and colons");
    json_decref(ws);
    json_t *dup = session_config_parse("{\"a\": 1, \"a\": 2}");
    check(!dup && error_is("duplicate"), "a key twice: refused, \"%s\"", ml_last_error());
    json_decref(dup);
    /* what older moelab versions wrote: a seed above INT64_MAX (jansson's integers stop at
     * INT64_MAX: every number is read as a double), null for a value that was not finite */
    json_t *old = session_config_parse(
        "{\"seed\": 18000000000000000001, \"tau\": {\"kind\": \"exp\", \"tau0\": null}, \"width\": 1}");
    check(old && session_config_num(old, "seed", -ANY, ANY, &v) == 1 && v == 1.8e19 &&
              session_config_num(old, "width", -ANY, ANY, &v) == 1 && v == 1 &&
              session_config_num(old, "tau.tau0", -ANY, ANY, &v) == -1,
          "a seed above INT64_MAX parses, null is not a number");
    json_decref(old);

    /* not JSON or not an object: NULL with a message */
    const char *bad[] = {"",
                         "   ",
                         "[{\"a\": 1}]",
                         "\"a\"",
                         "42",
                         "a: 1",
                         "{a: 1}",
                         "{\"b\" 1, \"a\": 2}",
                         "{\"a\": 1} x",
                         "{\"a\": NaN}",
                         "{\"a\": 1e999}",
                         "{\"a\": \"\xff\"}",
                         "{\"a\": 01}"};
    int nbad = 0;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        json_t *j = session_config_parse(bad[i]);
        if (j || !error_is("")) {
            printf("     parsed or no message: '%s'\n", bad[i]);
            nbad++;
        }
        json_decref(j);
    }
    check(nbad == 0 && !session_config_parse(NULL),
          "empty, array, string, number, bare text, malformed, trailing text, NaN, "
          "overflow, bad UTF-8, leading zero: NULL with a message");
    check(!session_config_parse("{\"a\": ") && error_is("line 1, column"), "the message gives the position: \"%s\"",
          ml_last_error());
    json_t *empty = session_config_parse("{ }");
    check(empty && session_config_num(empty, "a", -ANY, ANY, &v) == 0, "an empty object parses, nothing in it");
    json_decref(empty);

    /* every truncation of the configuration: no crash, a message, nothing invented */
    const size_t len = strlen(CONFIG);
    int wrong = 0;
    for (size_t n = 0; n <= len; n++) {
        char *cut = malloc(n + 1); /* exact size: an over-read is an ASan error */
        memcpy(cut, CONFIG, n);
        cut[n] = 0;
        json_t *j = session_config_parse(cut);
        TauSchedule ts;
        const int sched = browse_tau_schedule(cut, &ts);
        if (n < len && (j || !error_is("not valid JSON") || sched != -1)) wrong++;
        if (n == len && (!j || sched != 0)) wrong++;
        json_decref(j);
        if (wrong) {
            printf("     first wrong truncation at %zu chars: '%s'\n", n, cut);
            free(cut);
            break;
        }
        free(cut);
    }
    check(wrong == 0, "every truncation of the configuration (%zu of them): NULL with a message, the whole text parses",
          len + 1);
    const char *cuts[] = {"{",
                          "{\"",
                          "{\"a",
                          "{\"a\"",
                          "{\"a\":",
                          "{\"a\": \"x\\",
                          "{\"a\": \"x\\\"",
                          "{\"a\": [1, {\"b\"",
                          "{\"a\": {\"b\": \"",
                          "{\"c\": 1, \"a\": \"\\"};
    int found = 0;
    for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
        char *cut = strdup(cuts[i]);
        json_t *j = session_config_parse(cut);
        found += j != NULL;
        json_decref(j);
        free(cut);
    }
    check(found == 0, "hand-cut truncations (inside keys, strings, escapes, arrays): NULL");
    json_decref(cfg);
}

/* ------------------------------------------------------------------ 2. the launch schedule */

static char *replace(const char *s, const char *from, const char *to) {
    static char out[2048];
    const char *p = strstr(s, from);
    snprintf(out, sizeof out, "%.*s%s%s", (int)(p - s), s, to, p + strlen(from));
    return out;
}

static void test_tau_schedule(void) {
    TauSchedule s;
    check(browse_tau_schedule(CONFIG, &s) == 0, "browse_tau_schedule on the configuration");
    check(s.kind == TAU_EXP && s.tau0 == 1.0f && fabsf(s.tau1 - 0.1f) < 1e-7f && fabsf(s.tau_min - 0.01f) < 1e-8f &&
              s.s == 10.0f && s.c == 0.5f && s.step_every == 0 && s.step_gamma == 0.0f && s.start == 0 &&
              s.total == 468,
          "kind exp, tau0 1, tau1 %.9g, tau_min %.9g, s 10, c 0.5, start 0, total %ld", (double)s.tau1,
          (double)s.tau_min, s.total);
    check(tau_value(&s, 468) == s.tau1 || near(tau_value(&s, 468), 0.1, 1e-6), "its value at the end is tau1");

    check(browse_tau_schedule("{\"dataset\": \"x\", \"model\": {\"head\": {\"kind\": \"dense\"}}, \"epochs\": 1}",
                              &s) == -1,
          "no tau: -1");
    check(browse_tau_schedule("{\"sched\": {\"tau\": {\"kind\": \"exp\"}}}", &s) == -1, "tau only nested: -1");
    check(browse_tau_schedule(replace(CONFIG, "\"kind\": \"exp\"", "\"kind\": \"wiggly\""), &s) == -1,
          "unknown kind: -1");
    check(browse_tau_schedule(replace(CONFIG, "\"kind\": \"exp\", ", ""), &s) == -1, "tau without kind: -1");
    check(browse_tau_schedule(replace(CONFIG, "\"kind\": \"exp\"", "\"kind\": 3"), &s) == -1, "numeric kind: -1");
    check(browse_tau_schedule(replace(CONFIG, "\"tau0\": 1,", "\"tau0\": 0,"), &s) == -1,
          "tau0 = 0 does not validate: -1");
    check(browse_tau_schedule("{\"tau\": 0.5}", &s) == -1 && browse_tau_schedule("{\"tau\": \"exp\"}", &s) == -1,
          "tau not an object: -1");
    check(browse_tau_schedule(NULL, &s) == -1 && browse_tau_schedule("", &s) == -1 &&
              browse_tau_schedule("{\"ta", &s) == -1,
          "NULL / empty / truncated: -1");
    check(browse_tau_schedule("{\"tau\": {\"kind\": \"LINEAR\", \"total\": 100}}", &s) == 0 && s.kind == TAU_LINEAR &&
              s.tau0 == 1.0f && fabsf(s.tau1 - 0.1f) < 1e-7f && s.total == 100 && s.start == 0,
          "missing fields take the defaults (kind case-insensitive)");
    static const char *const kinds[] = {"const", "linear", "cosine", "exp", "sigmoid", "step"};
    int ok = 1;
    for (int k = 0; k < 6; k++) {
        char j[256];
        snprintf(j, sizeof j,
                 "{\"tau\": {\"kind\": \"%s\", \"tau0\": 2, \"tau1\": 0.25, \"tau_min\": 0.02, \"s\": 7, "
                 "\"c\": 0.3, \"step_every\": 7, \"step_gamma\": 0.5, \"start\": 3, \"total\": 50}}",
                 kinds[k]);
        ok &= browse_tau_schedule(j, &s) == 0 && (int)s.kind == k && s.tau0 == 2.0f && s.tau1 == 0.25f &&
              s.tau_min == 0.02f && s.s == 7.0f && s.c == 0.3f && s.step_every == 7 && s.step_gamma == 0.5f &&
              s.start == 3 && s.total == 50;
    }
    check(ok, "every kind name parses, with every field (none left at its default)");
}

/* browse_entry_cmp on hand-made entries: the tie-breaks the real sessions cannot show */
static void test_cmp(void) {
    BrowseEntry a, b;
    memset(&a, 0, sizeof a);
    memset(&b, 0, sizeof b);
    snprintf(a.name, sizeof a.name, "a");
    snprintf(b.name, sizeof b.name, "b");
    a.ok = b.ok = 1;
    a.info.experts = b.info.experts = 8;
    a.info.k = 2;
    b.info.k = 1;
    check(browse_entry_cmp(&a, &b, BCOL_EXPERTS) > 0 && browse_entry_cmp(&b, &a, BCOL_EXPERTS) < 0,
          "experts equal: k decides");
    b.info.k = 2;
    a.info.hidden = 64;
    b.info.hidden = 128;
    check(browse_entry_cmp(&a, &b, BCOL_EXPERTS) < 0 && browse_entry_cmp(&b, &a, BCOL_EXPERTS) > 0,
          "E and k equal: h decides");
    b.info.hidden = 64;
    check(browse_entry_cmp(&a, &b, BCOL_EXPERTS) < 0 && browse_entry_cmp(&b, &a, BCOL_EXPERTS) > 0 &&
              browse_entry_cmp(&a, &a, BCOL_EXPERTS) == 0,
          "all equal: the name decides");
    a.info.best_test_acc = 0.9;
    b.info.best_test_acc = NAN;
    check(browse_entry_cmp(&a, &b, BCOL_BEST) < 0 && browse_entry_cmp(&b, &a, BCOL_BEST) > 0,
          "best: NaN after a number");
    b.info.best_test_acc = 0.95;
    b.ok = 0; /* unreadable: its (stale) numbers do not count */
    check(browse_entry_cmp(&a, &b, BCOL_BEST) < 0 && browse_entry_cmp(&b, &a, BCOL_BEST) > 0,
          "best: an unreadable entry after a number");
    b.ok = 1;
    check(browse_entry_cmp(&a, &b, BCOL_BEST) < 0, "best: 0.9 before 0.95");
    a.info.last_test_acc = 0.5;
    b.info.last_test_acc = 0.4;
    check(browse_entry_cmp(&a, &b, BCOL_LAST) > 0, "last: 0.5 after 0.4");
    a.info.last_epoch = 3;
    b.info.last_epoch = 10;
    check(browse_entry_cmp(&a, &b, BCOL_EPOCHS) < 0, "epochs: numeric (3 before 10)");
}

/* ------------------------------------------------------------------ 3. the plan at a step */

/* What the trainer does for one logged command (core/trainer.c trainer_apply). */
static void trainer_like_apply(TauPlan *p, long step, long total_steps, const char *text) {
    TrainerCmd c;
    char err[128];
    if (command_parse(text, &c, err, sizeof err)) return;
    if (c.kind == CMD_ANNEAL) {
        ml_status st = tau_plan_anneal(p, step, &c.sched);
        if (st == ML_OK && total_steps > step) p->repl.total = total_steps;
    } else if (c.kind == CMD_SET && c.param == PARAM_TAU) {
        tau_plan_set(p, step, (float)c.value);
    }
}

/* The reference plan at `cursor`: every logged command up to it, applied as the trainer does. */
static void reference_plan(const SessionHistory *h, const TauSchedule *base, long cursor, TauPlan *p) {
    tau_plan_init(p, base);
    for (long i = 0; i < h->nevents && h->events[i].step <= cursor; i++)
        trainer_like_apply(p, h->events[i].step, h->total_steps, h->events[i].text);
}

/* Number of steps in [0, last] where the two plans give different temperatures. */
static int plans_differ(const TauPlan *a, const TauPlan *b, long last, long *first) {
    int n = 0;
    for (long s = 0; s <= last; s++)
        if (tau_plan_value(a, s) != tau_plan_value(b, s)) {
            if (!n) *first = s;
            n++;
        }
    return n;
}

static void ev(SessionEventRow *e, long step, const char *text) {
    memset(e, 0, sizeof *e);
    e->step = step;
    e->wall_time = 1.7e9 + step;
    snprintf(e->text, sizeof e->text, "%s", text);
}

/* a run extended by `--resume DIR --epochs 3` at step 32 (2 epochs of 16 steps): before the
 * extension the plan ends at 32, after it at 48, the anneal's replacement too */
static void test_plan_extend(void) {
    TauSchedule base;
    tau_schedule_defaults(&base);
    base.kind = TAU_LINEAR;
    base.tau0 = 1.0f;
    base.tau1 = 0.2f;
    base.total = 32;
    SessionEventRow events[3];
    int ne = 0;
    ev(&events[ne++], 10, "anneal cosine now 0.3  # file");
    ev(&events[ne++], 32, "resume from ckpt-32.h5");
    ev(&events[ne++], 32, "extend --epochs 3 (was 2)");
    SessionHistory h;
    memset(&h, 0, sizeof h);
    h.events = events;
    h.nevents = ne;
    h.total_steps = 48;
    h.steps_per_epoch = 16;
    TauPlan p;
    browse_plan_at(&h, &base, 20, &p);
    check(p.has_replacement && p.repl.total == 32 && p.base.total == 32,
          "extended run, cursor 20: the anneal runs to the old end 32 (repl %ld, base %ld)", p.repl.total, p.base.total);
    browse_plan_at(&h, &base, 40, &p);
    check(p.has_replacement && p.repl.total == 48 && p.base.total == 48,
          "extended run, cursor 40: both ends moved to 48 (repl %ld, base %ld)", p.repl.total, p.base.total);
    h.nevents = 1; /* the same run never extended: 48 steps from the start */
    h.total_steps = 32;
    browse_plan_at(&h, &base, 40, &p);
    check(p.repl.total == 32, "not extended: the anneal runs to the end 32 (%ld)", p.repl.total);
}

static void test_plan(void) {
    TauSchedule base;
    browse_tau_schedule(CONFIG, &base); /* exp 1 -> 0.1 over 468 steps */
    SessionEventRow events[9];
    int ne = 0;
    ev(&events[ne++], 0, "resume from ckpt-0.h5");
    ev(&events[ne++], 30, "snapshot");
    ev(&events[ne++], 30, "checkpoint ckpt-30.h5 (snapshot)");
    ev(&events[ne++], 40, "set lr 0.1");
    ev(&events[ne++], 50, "set tau 0.3");
    ev(&events[ne++], 80, "eval");
    ev(&events[ne++], 100, "resume from ckpt-100.h5");
    ev(&events[ne++], 120, "anneal exp now 0.05");
    ev(&events[ne++], 130, "set tau banana"); /* a failed command line, logged as typed */
    SessionHistory h;
    memset(&h, 0, sizeof h);
    h.events = events;
    h.nevents = ne;
    h.total_steps = 468;

    TauPlan p, ref;
    long first = -1;
    browse_plan_at(&h, &base, 10, &p);
    check(!p.has_override && !p.has_replacement, "cursor 10: no override, no replacement");
    int same = 1;
    for (long s = 0; s <= 468; s += 13) same &= tau_plan_value(&p, s) == tau_value(&base, s);
    check(same && tau_plan_value(&p, 10) == tau_value(&base, 10),
          "cursor 10: the plan is the launch schedule (%g at 10)", (double)tau_plan_value(&p, 10));

    browse_plan_at(&h, &base, 49, &p);
    check(!p.has_override && tau_plan_value(&p, 49) == tau_value(&base, 49),
          "cursor 49: set tau at 50 not yet applied");
    browse_plan_at(&h, &base, 50, &p);
    check(p.has_override && tau_plan_value(&p, 50) == 0.3f, "cursor 50: the set at step 50 is applied (%g)",
          (double)tau_plan_value(&p, 50));
    browse_plan_at(&h, &base, 60, &p);
    check(p.has_override && p.override_step == 50 && !p.has_replacement && tau_plan_value(&p, 60) == 0.3f &&
              tau_plan_value(&p, 400) == 0.3f,
          "cursor 60: override 0.3 from step 50 on (%g at 60)", (double)tau_plan_value(&p, 60));
    reference_plan(&h, &base, 60, &ref);
    check(!plans_differ(&p, &ref, 468, &first), "cursor 60: equals the trainer's plan");
    browse_plan_at(&h, &base, 119, &p);
    check(p.has_override && !p.has_replacement, "cursor 119: anneal at 120 not yet applied");

    browse_plan_at(&h, &base, 200, &p);
    reference_plan(&h, &base, 200, &ref);
    check(p.has_replacement && !p.has_override, "cursor 200: annealed, the anneal cleared the override");
    check(p.repl.kind == TAU_EXP && p.repl.start == 120 && p.repl.total == 468 && p.repl.tau0 == 0.3f &&
              fabsf(p.repl.tau1 - 0.05f) < 1e-8f && p.repl.tau_min == base.tau_min,
          "cursor 200: exp from 0.3 (continuity) at 120 to 0.05 at 468 (start %ld total %ld tau0 %g)", p.repl.start,
          p.repl.total, (double)p.repl.tau0);
    int n = plans_differ(&p, &ref, 468, &first);
    check(n == 0, "cursor 200: equals the trainer's plan at every step (%d differ, first %ld)", n, first);
    int curve = 1;
    for (long s = 120; s <= 468; s += 29) {
        const double want = 0.3 * pow(0.05 / 0.3, (double)(s - 120) / (468 - 120));
        curve &= near(tau_plan_value(&p, s), want, 1e-5);
    }
    check(curve && tau_plan_value(&p, 120) == 0.3f && near(tau_plan_value(&p, 468), 0.05, 1e-6) &&
              near(tau_plan_value(&p, 294), sqrt(0.3 * 0.05), 1e-5),
          "cursor 200: 0.3 (0.05/0.3)^((s-120)/348): %g at 294", (double)tau_plan_value(&p, 294));
    browse_plan_at(&h, &base, 1000, &p);
    check(p.has_replacement && !p.has_override && !plans_differ(&p, &ref, 468, &first),
          "cursor past the end: the failed 'set tau banana' changes nothing");

    /* the launch schedule shorter than the run (--tau-epochs): the trainer anneals to the end of
     * training (its total_steps), not to the end of the launch schedule */
    TauSchedule shortb = base;
    shortb.total = 300;
    browse_plan_at(&h, &shortb, 200, &p);
    reference_plan(&h, &shortb, 200, &ref);
    n = plans_differ(&p, &ref, 468, &first);
    check(n == 0 && p.repl.total == 468,
          "schedule 300 of a 468-step run: anneal at 120 runs to 468 (total %ld; %d steps differ, first %ld)",
          p.repl.total, n, first);
    shortb.total = 100; /* the schedule ended before the anneal */
    browse_plan_at(&h, &shortb, 200, &p);
    reference_plan(&h, &shortb, 200, &ref);
    n = plans_differ(&p, &ref, 468, &first);
    check(n == 0 && near(tau_plan_value(&p, 294), sqrt(0.3 * 0.05), 1e-5),
          "schedule of 100 steps, anneal at 120: still exp over 120..468 (%g at 294; %d steps differ)",
          (double)tau_plan_value(&p, 294), n);
    /* a history without total_steps (0): the launch schedule's total */
    h.total_steps = 0;
    browse_plan_at(&h, &base, 200, &p);
    check(p.repl.total == 468, "total_steps unknown: the anneal runs to the schedule's total (%ld)", p.repl.total);
    h.total_steps = 468;

    /* no events at all */
    SessionHistory empty;
    memset(&empty, 0, sizeof empty);
    browse_plan_at(&empty, &base, 300, &p);
    check(!p.has_override && !p.has_replacement && tau_plan_value(&p, 300) == tau_value(&base, 300),
          "no events: the launch schedule");
}

/* ------------------------------------------------------------------ 4. real sessions */

static char g_root[256];
static char g_log[300];
static const char *g_bin;

static void path_in(char *buf, size_t n, const char *sub) { snprintf(buf, n, "%.255s/%.255s", g_root, sub); }

static pid_t spawn(const char *const *args) {
    const pid_t pid = fork();
    if (pid == 0) {
        const int fd = open(g_log, O_WRONLY | O_CREAT | O_APPEND, 0644);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
            close(fd);
        }
        execv(args[0], (char *const *)args);
        _exit(127);
    }
    return pid;
}

static int run(const char *const *args) {
    const pid_t pid = spawn(args);
    int ws = 0;
    if (pid < 0 || waitpid(pid, &ws, 0) != pid) return -1;
    return WIFEXITED(ws) ? WEXITSTATUS(ws) : 128 + WTERMSIG(ws);
}

/* moelab train on a tiny synthetic problem into ROOT/name; extra options in opts (NULL-terminated). */
static int train(const char *name, const char *seed, const char *const *opts) {
    char dir[512];
    path_in(dir, sizeof dir, name);
    const char *args[64] = {g_bin,     "train",    "--headless", "--dataset", "synthetic:8x8x1:3:256",
                            "--width", "0.25",     "--batch",    "32",        "--experts",
                            "4",       "--hidden", "8",          "--threads", "1",
                            "--seed",  seed,       "--session",  dir};
    int n = 19;
    while (opts && *opts && n < 62) args[n++] = *opts++;
    args[n] = NULL;
    const int rc = run(args);
    check(rc == 0, "moelab train %s (exit %d; log %s)", name, rc, g_log);
    return rc;
}

static int copy_file(const char *from, const char *to, long keep) {
    FILE *a = fopen(from, "rb"), *b = fopen(to, "wb");
    int rc = a && b ? 0 : -1;
    char buf[8192];
    size_t k;
    long done = 0;
    while (!rc && (keep < 0 || done < keep) && (k = fread(buf, 1, sizeof buf, a)) > 0) {
        if (keep >= 0 && done + (long)k > keep) k = (size_t)(keep - done);
        if (fwrite(buf, 1, k, b) != k) rc = -1;
        done += (long)k;
    }
    if (a) fclose(a);
    if (b && fclose(b)) rc = -1;
    return rc;
}

static void mkdirs(const char *sub) {
    char p[512], q[600];
    snprintf(p, sizeof p, "%s", sub);
    for (char *s = p;; s++) {
        if (*s == '/' || !*s) {
            const char c = *s;
            *s = 0;
            path_in(q, sizeof q, p);
            mkdir(q, 0755);
            *s = c;
            if (!c) break;
        }
    }
}

/* An HDF5 file that is not a moelab session (version < 0: no format_version attribute). */
static void write_h5(const char *sub, long long version) {
    char p[512];
    path_in(p, sizeof p, sub);
    hid_t f = H5Fcreate(p, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    hid_t s = H5Screate(H5S_SCALAR);
    hid_t a =
        H5Acreate2(f, version < 0 ? "something_else" : "format_version", H5T_STD_I64LE, s, H5P_DEFAULT, H5P_DEFAULT);
    const int64_t v = version < 0 ? 7 : version;
    H5Awrite(a, H5T_NATIVE_INT64, &v);
    H5Aclose(a);
    H5Sclose(s);
    hid_t g = H5Gcreate2(f, "run", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    H5Gclose(g);
    check(H5Fclose(f) >= 0, "wrote %s", sub);
}

static BrowseEntry *find(BrowseList *l, const char *name) {
    BrowseEntry *r = NULL;
    int n = 0;
    for (int i = 0; i < l->n; i++)
        if (!strcmp(l->e[i].name, name)) {
            r = &l->e[i];
            n++;
        }
    return n == 1 ? r : NULL;
}

static int count_matches(const BrowseList *l, const char *filter, char *names, size_t nn) {
    int c = 0;
    names[0] = 0;
    for (int i = 0; i < l->n; i++)
        if (browse_entry_match(&l->e[i], filter)) {
            c++;
            const size_t o = strlen(names);
            snprintf(names + o, nn - o, "%s%s", o ? "," : "", l->e[i].name);
        }
    return c;
}

/* The killed writer: a long run SIGKILLed once it has written a step block, leaving /status "running". */
static int make_killed(const char *name) {
    char dir[512];
    path_in(dir, sizeof dir, name);
    const char *args[] = {g_bin,       "train",       "--headless", "--dataset",  "synthetic:8x8x1:3:256",
                          "--width",   "0.25",        "--batch",    "32",         "--experts",
                          "4",         "--hidden",    "8",          "--threads",  "1",
                          "--seed",    "9",           "--epochs",   "100000",     "--ckpt-every",
                          "0",         "--log-every", "1",          "--schedule", "sigmoid",
                          "--session", dir,           NULL};
    const pid_t pid = spawn(args);
    if (pid < 0) return -1;
    int ready = 0;
    for (int i = 0; i < 600 && !ready; i++) { /* up to 60 s */
        usleep(100000);
        SessionInfo info;
        ready = session_read_info(dir, &info) == ML_OK && info.steps_logged > 0 && info.evals > 0 &&
                !strcmp(info.status, "running");
        int ws;
        if (waitpid(pid, &ws, WNOHANG) == pid) return -1; /* ended by itself */
    }
    usleep(300000);
    kill(pid, SIGKILL);
    int ws = 0;
    waitpid(pid, &ws, 0);
    return ready && WIFSIGNALED(ws) && WTERMSIG(ws) == SIGKILL ? 0 : -1;
}

/* The tau the trainer logged at every step equals the plan browse_plan_at rebuilds for it. */
static void test_plan_real(const char *name) {
    char dir[512];
    path_in(dir, sizeof dir, name);
    SessionHistory h;
    if (!check(session_history_load(dir, &h) == ML_OK, "load %s: %s", name, ml_last_error())) return;
    TauSchedule base;
    check(browse_tau_schedule(h.config_json, &base) == 0 && base.kind == TAU_COSINE && base.total == 8 &&
              h.total_steps == 32,
          "%s: launch schedule cosine over 8 steps of a 32-step run (total %ld)", name, base.total);
    int notes = 0, collapses = 0; /* collapse events (this small router collapses) are not commands */
    for (long i = 0; i < h.nevents; i++) {
        notes += !strncmp(h.events[i].text, "checkpoint ckpt-", 16);
        collapses += !strncmp(h.events[i].text, "collapse at step ", 17);
    }
    check(h.nevents - collapses == 4 && notes == 1,
          "%s: 4 events logged (and %d collapse events), one of them a checkpoint note (%ld)", name, collapses,
          h.nevents);
    long bad = 0, first = -1, checked = 0;
    float got = 0, want = 0;
    for (long r = 0; r < h.nsteps; r++) {
        const long s = h.steps[r].step - 1; /* the forward of record `step` ran at t->step = step - 1 */
        TauPlan p;
        browse_plan_at(&h, &base, s, &p);
        const float v = tau_plan_value(&p, s);
        checked++;
        if (!near(v, h.steps[r].tau, 1e-6)) {
            if (!bad) {
                first = h.steps[r].step;
                got = v;
                want = h.steps[r].tau;
            }
            bad++;
        }
    }
    check(
        checked == 32 && bad == 0,
        "%s: the plan at each of the %ld logged steps gives the tau the trainer used (%ld differ; first at step %ld: %g, logged %g)",
        name, checked, bad, first, (double)got, (double)want);
    session_history_free(&h);
}

/* The alarms column (issue 26): a copy of moe-exp with alarm events appended to its event log (two
 * collapse episodes, a warning, an expert death, a revival, and texts that only mention them) lists
 * its own collapses plus those, "NC 1W 1D"; a copy of the dense run "-"; sorted by alarms, the dense
 * one first (reversed: last); the cell of an entry whose event log was not read is "?" and it sorts
 * last. In a folder of its own (the counts of the tree above stay as they are). */
static void test_alarms(void) {
    char src[600], dst[600], dir[600];
    mkdirs("alarms/x");
    mkdirs("alarms/y");
    path_in(src, sizeof src, "moe-exp/live.h5");
    path_in(dst, sizeof dst, "alarms/x/live.h5");
    check(copy_file(src, dst, -1) == 0, "copy of moe-exp");
    path_in(src, sizeof src, "dense/live.h5");
    path_in(dst, sizeof dst, "alarms/y/live.h5");
    check(copy_file(src, dst, -1) == 0, "copy of dense");
    /* moe-exp's own collapse events (a small router collapses), counted here by their first words */
    path_in(dir, sizeof dir, "alarms/x");
    SessionEventRow *ev = NULL;
    long n = 0, base = 0;
    if (check(session_read_events(dir, &ev, &n) == ML_OK, "read the copy's events: %s", ml_last_error()))
        for (long i = 0; i < n; i++) base += !strncmp(ev[i].text, "collapse at step ", 17);
    free(ev);
    SessionWriter w;
    if (!check(session_open_append(&w, dir, -1) == ML_OK, "append to the copy: %s", ml_last_error())) return;
    static const char *const add[] = {
        "warning at step 40 (clean router view, episode 1, first): WARNING clean router: 71% of first choices to e2",
        "collapse at step 50 (training view, episode 1, first): COLLAPSE training: 83% of first choices to e3",
        "collapse at step 50 (evaluation view, episode 1, first): COLLAPSE evaluation: 90% of first choices to e3",
        "expert death at step 52 (e1, death 1): EXPERT DEATH e1: no pair kept for 100 steps",
        "expert revival at step 60 (e1): EXPERT REVIVAL e1",
        "rule: pause (on-collapse at step 50: COLLAPSE training ...)",
        "note: warning at step 3 is only a mention",
    };
    for (int i = 0; i < 7; i++) check(session_append_event(&w, 60, 0, add[i]) == ML_OK, "event %d", i);
    check(session_close(&w, "finished") == ML_OK, "close the copy: %s", ml_last_error());
    char root[600];
    path_in(root, sizeof root, "alarms");
    BrowseList l;
    memset(&l, 0, sizeof l);
    const int scanned = browse_list_scan(&l, root);
    if (!check(scanned == 0 && l.n == 2, "the alarms folder: two entries (%d)", l.n)) return;
    BrowseEntry *x = find(&l, "x"), *y = find(&l, "y");
    char cells[BCOL_COUNT][64], want[64];
    snprintf(want, sizeof want, "%ldC 1W 1D", base + 2);
    if (check(x && y, "entries x and y")) {
        browse_entry_cells(x, cells);
        check(x->alarms_ok && !strcmp(cells[BCOL_ALARMS], want) && x->alarms.revival == 1,
              "x: alarms '%s' (want '%s': its %ld collapse events + 2, 1 warning, 1 death; %d revival)",
              cells[BCOL_ALARMS], want, base, x->alarms.revival);
        browse_entry_cells(y, cells);
        check(y->alarms_ok && !strcmp(cells[BCOL_ALARMS], "-"), "y (dense): alarms '%s'", cells[BCOL_ALARMS]);
        browse_list_sort(&l, BCOL_ALARMS, 0);
        check(!strcmp(l.e[0].name, "y"), "by alarms: the quiet run first (%s)", l.e[0].name);
        browse_list_sort(&l, BCOL_ALARMS, 1);
        check(!strcmp(l.e[0].name, "x"), "by alarms reversed: the alarmed run first (%s)", l.e[0].name);
        BrowseEntry u = l.e[1];
        u.alarms_ok = 0;
        browse_entry_cells(&u, cells);
        check(!strcmp(cells[BCOL_ALARMS], "?") && browse_missing(&u, BCOL_ALARMS) && !browse_missing(&l.e[0], BCOL_ALARMS),
              "not read: '?', sorted with the missing ('%s')", cells[BCOL_ALARMS]);
        /* the sweep's reader counts the same events */
        SweepRun row;
        memset(&row, 0, sizeof row);
        const ml_status rst = sweep_h5_read_routing(dir, &row);
        check(rst == ML_OK && row.collapse_episodes == base + 2 &&
                  row.warning_episodes == 1 && row.expert_deaths == 1,
              "sweep_h5_read_routing: %d collapse, %d warning, %d deaths", row.collapse_episodes, row.warning_episodes,
              row.expert_deaths);
    }
    browse_list_free(&l);
}

static void test_sessions(void) {
    g_bin = getenv("MOELAB_BIN");
    if (!g_bin || access(g_bin, X_OK)) {
        printf("SKIP the session-list tests: MOELAB_BIN is not set to the moelab binary (ctest sets it)\n");
        return;
    }
    snprintf(g_root, sizeof g_root, "/tmp/moelab_browse_XXXXXX");
    if (!check(mkdtemp(g_root) != NULL, "temporary folder")) return;
    snprintf(g_log, sizeof g_log, "%s.log", g_root);
    const double t_start = (double)time(NULL);

    /* the tree */
    const char *o_exp[] = {"--epochs", "2", "--schedule", "exp", NULL};
    const char *o_cmd[] = {"--epochs", "4",          "--schedule", "cosine", "--tau-epochs", "1", "--log-every",
                           "1",        "--commands", NULL,         NULL};
    const char *o_dense[] = {"--epochs", "2", "--head", "dense", NULL};
    const char *o_lin[] = {"--epochs", "1", "--schedule", "linear", NULL};
    const char *o_quit[] = {"--epochs", "2", "--commands", NULL, NULL};
    char cmds[512], quit[512], p[600], q[600];
    path_in(cmds, sizeof cmds, "cmds.txt");
    path_in(quit, sizeof quit, "quit.txt");
    FILE *f = fopen(cmds, "w");
    fputs("at 3 set tau 0.3\nat 4 snapshot\nat 10 anneal exp now 0.05\n", f);
    fclose(f);
    f = fopen(quit, "w");
    fputs("at 1 quit\n", f);
    fclose(f);
    o_cmd[9] = cmds;
    o_quit[3] = quit;
    train("moe-exp", "1", o_exp);
    train("moe-cos", "2", o_cmd);
    train("dense", "3", o_dense);
    mkdirs("a/b");
    train("a/b/run", "4", o_lin);
    /* an interrupted run without any evaluation: status interrupted (quit exits 0) */
    train("quit", "5", o_quit);
    check(make_killed("killed") == 0, "a writer SIGKILLed mid-run");
    path_in(p, sizeof p, "moe-exp/live.h5");
    struct stat sb;
    stat(p, &sb);
    mkdirs("trunc");
    path_in(q, sizeof q, "trunc/live.h5");
    check(copy_file(p, q, (long)sb.st_size / 2) == 0, "truncated copy");
    mkdirs("garbage");
    path_in(q, sizeof q, "garbage/live.h5");
    f = fopen(q, "wb");
    unsigned x = 12345;
    for (int i = 0; i < 5000; i++) {
        x = x * 1103515245u + 12345u;
        fputc((int)(x >> 16) & 255, f);
    }
    fclose(f);
    mkdirs("foreign");
    write_h5("foreign/live.h5", -1);
    mkdirs("future");
    write_h5("future/live.h5", 99);
    mkdirs("empty/sub");
    path_in(q, sizeof q, "empty/notes.txt");
    f = fopen(q, "w");
    fputs("no session here\n", f);
    fclose(f);
    path_in(q, sizeof q, "empty/sub/live.h5.tmp");
    copy_file(p, q, -1);
    mkdirs("deep/1/2/3");
    path_in(q, sizeof q, "deep/1/2/3/live.h5");
    check(copy_file(p, q, -1) == 0, "a session 4 levels down");
    mkdirs("deeper/1/2/3/4");
    path_in(q, sizeof q, "deeper/1/2/3/4/live.h5");
    check(copy_file(p, q, -1) == 0, "a session 5 levels down");
    mkdirs(".hidden");
    path_in(q, sizeof q, ".hidden/live.h5");
    copy_file(p, q, -1);

    /* the scan */
    BrowseList l;
    memset(&l, 0, sizeof l);
    check(browse_list_scan(&l, g_root) == 0, "browse_list_scan %s", g_root);
    static const char *const want[] = {"moe-exp", "moe-cos", "dense",   "a/b/run", "quit",      "killed",
                                       "trunc",   "garbage", "foreign", "future",  "deep/1/2/3"};
    const int nwant = (int)(sizeof want / sizeof want[0]);
    int all = 1;
    for (int i = 0; i < nwant; i++)
        if (!find(&l, want[i])) {
            all = 0;
            printf("     missing: %s\n", want[i]);
        }
    check(l.n == nwant && all, "%d entries (got %d), each once, names relative to the root", nwant, l.n);
    for (int i = 0; i < l.n; i++)
        printf("     %-12s %-12s %-8s %s\n", l.e[i].name, l.e[i].status, l.e[i].sched, l.e[i].err);
    check(!find(&l, "empty") && !find(&l, "empty/sub") && !find(&l, "deeper/1/2/3/4") && !find(&l, ".hidden"),
          "folders without live.h5, 5 levels down, hidden: not listed");
    int paths = 1;
    for (int i = 0; i < l.n; i++) {
        path_in(p, sizeof p, l.e[i].name);
        paths &= !strcmp(l.e[i].path, p);
    }
    check(paths, "each entry's path is ROOT/name");

    /* statuses */
    struct {
        const char *name, *status, *sched;
    } st[] = {{"moe-exp", "finished", "exp"},   {"moe-cos", "finished", "exp*"}, {"a/b/run", "finished", "linear"},
              {"quit", "interrupted", "cosine"}, {"killed", "stale", "sigmoid"},  {"deep/1/2/3", "finished", "exp"},
              {"dense", "finished", NULL}};
    for (size_t i = 0; i < sizeof st / sizeof st[0]; i++) {
        BrowseEntry *e = find(&l, st[i].name);
        check(e && e->ok && !strcmp(e->status, st[i].status) && (e->err[0] != 0) == !strcmp(st[i].status, "stale") &&
                  (!st[i].sched || !strcmp(e->sched, st[i].sched)),
              "%s: ok, status %s, schedule %s (got %s, %s, '%s')", st[i].name, st[i].status,
              st[i].sched ? st[i].sched : "-", e ? e->status : "?", e ? e->sched : "?", e ? e->err : "");
    }
    const char *dmg[] = {"trunc", "garbage", "foreign"};
    for (int i = 0; i < 3; i++) {
        BrowseEntry *e = find(&l, dmg[i]);
        char fn[64];
        snprintf(fn, sizeof fn, "%s/live.h5", dmg[i]);
        check(e && !e->ok && !strcmp(e->status, "damaged") && strstr(e->err, fn),
              "%s: damaged, err names the file (%s: %s)", dmg[i], e ? e->status : "?", e ? e->err : "");
    }
    BrowseEntry *e = find(&l, "future");
    check(e && !e->ok && !strcmp(e->status, "unsupported") && strstr(e->err, "future/live.h5") && strstr(e->err, "99"),
          "future: format_version 99 is unsupported (%s: %s)", e ? e->status : "?", e ? e->err : "");
    e = find(&l, "moe-exp");
    check(e && !strcmp(e->info.dataset, "synthetic") && !strcmp(e->info.head, "moe") && e->info.experts == 4 &&
              e->info.hidden == 8 && e->info.epochs == 2 && e->info.last_epoch == 2 && isfinite(e->info.best_test_acc),
          "moe-exp: summary read (synthetic, moe, E4 h8, 2/2 epochs)");
    check(e && e->mtime >= t_start - 5 && e->mtime <= (double)time(NULL) + 5, "moe-exp: mtime is the file's (%.0f)",
          e ? e->mtime : 0);
    e = find(&l, "dense");
    check(e && !strcmp(e->info.head, "dense") && e->info.experts == 0, "dense: head dense, 0 experts");

    /* a second scan replaces the list */
    const int n0 = l.n;
    const int rescan = browse_list_scan(&l, g_root);
    check(rescan == 0 && l.n == n0, "a second scan gives the same %d entries (%d)", n0, l.n);

    /* sorting: every column, both directions */
    for (int col = 0; col < BCOL_COUNT; col++)
        for (int rev = 0; rev < 2; rev++) {
            browse_list_sort(&l, col, rev);
            int order = 1, perm = l.n == nwant;
            /* entries without a value in the column (unreadable; no evaluation for accuracies) go
             * last in both directions; the others are strictly ordered */
            for (int i = 0; i + 1 < l.n; i++) {
                const int ma = browse_missing(&l.e[i], col), mb = browse_missing(&l.e[i + 1], col);
                if (ma != mb) {
                    order &= ma < mb;
                    continue;
                }
                const int c = browse_entry_cmp(&l.e[i], &l.e[i + 1], col);
                order &= (rev && !ma) ? c > 0 : c < 0;
            }
            for (int i = 0; i < nwant; i++) perm &= find(&l, want[i]) != NULL;
            check(order && perm, "sort by %s%s: strictly ordered, same entries (first %s, last %s)",
                  browse_col_name(col), rev ? " reversed" : "", l.e[0].name, l.e[l.n - 1].name);
        }
    browse_list_sort(&l, BCOL_NAME, 0);
    check(!strcmp(l.e[0].name, "a/b/run") && !strcmp(l.e[l.n - 1].name, "trunc"), "by name: a/b/run first, trunc last");
    browse_list_sort(&l, BCOL_BEST, 0);
    {
        int nan_seen = 0, ok = 1, nfin = 0;
        double prev = -1;
        for (int i = 0; i < l.n; i++) {
            const double b = l.e[i].ok ? l.e[i].info.best_test_acc : NAN;
            if (isnan(b)) nan_seen = 1;
            else {
                ok &= !nan_seen && b >= prev;
                prev = b;
                nfin++;
            }
        }
        check(ok && nfin >= 6, "by best ascending: %d accuracies ascending, then damaged / no evaluation", nfin);
    }
    browse_list_sort(&l, BCOL_STATUS, 0);
    check(!strcmp(l.e[0].status, "damaged") && !strcmp(l.e[l.n - 1].status, "unsupported"),
          "by status: damaged first, unsupported last");
    browse_list_sort(&l, BCOL_EXPERTS, 1);
    check(l.e[0].info.experts == 4 && l.e[l.n - 1].info.experts == 0, "by experts reversed: E4 first");

    /* column names */
    int names_ok = 1;
    for (int c = 0; c < BCOL_COUNT; c++) names_ok &= browse_col_parse(browse_col_name(c)) == c;
    check(names_ok && browse_col_parse("BEST") == BCOL_BEST && browse_col_parse("bestx") == -1 &&
              browse_col_parse("") == -1 && !strcmp(browse_col_name(-1), "?") &&
              !strcmp(browse_col_name(BCOL_COUNT), "?"),
          "column names round-trip, case-insensitive; unknown -1 / '?'");

    /* filtering */
    char names[2048];
    int c;
    check(count_matches(&l, "", names, sizeof names) == l.n && count_matches(&l, NULL, names, sizeof names) == l.n,
          "empty filter matches everything");
    c = count_matches(&l, "moe-", names, sizeof names);
    check(c == 2, "'moe-' (name substring): %d (%s)", c, names);
    c = count_matches(&l, "MoE-ExP", names, sizeof names);
    check(c == 1 && !strcmp(names, "moe-exp"), "'MoE-ExP' case-insensitive: %d (%s)", c, names);
    c = count_matches(&l, "dense", names, sizeof names);
    check(c == 1 && !strcmp(names, "dense"), "'dense': %d (%s)", c, names);
    c = count_matches(&l, "E4", names, sizeof names);
    check(c == 6, "'E4' (experts): %d (%s)", c, names);
    c = count_matches(&l, "e4 k2", names, sizeof names);
    check(c == 6, "'e4 k2': %d (%s)", c, names);
    c = count_matches(&l, "h8", names, sizeof names);
    check(c == 7, "'h8' (hidden; dense too): %d (%s)", c, names);
    c = count_matches(&l, "exp", names, sizeof names);
    /* moe-cos was launched cosine and annealed live to exp: its column is "exp*" */
    check(c == 3, "'exp' (name or schedule): %d (%s)", c, names);
    c = count_matches(&l, "SIGMOID", names, sizeof names);
    check(c == 1 && !strcmp(names, "killed"), "'SIGMOID' (schedule): %d (%s)", c, names);
    c = count_matches(&l, "damaged", names, sizeof names);
    check(c == 3, "'damaged' (status): %d (%s)", c, names);
    c = count_matches(&l, "synthetic", names, sizeof names);
    check(c == 7, "'synthetic' (dataset): %d (%s)", c, names);
    c = count_matches(&l, "a/b", names, sizeof names);
    check(c == 1 && !strcmp(names, "a/b/run"), "'a/b' (nested name): %d (%s)", c, names);
    c = count_matches(&l, "zzz-nothing", names, sizeof names);
    check(c == 0, "no match: %d (%s)", c, names);
    /* issue 32: `!` inverts; configuration values, whole or as KEY=VALUE (numbers as numbers) */
    c = count_matches(&l, "!dense", names, sizeof names);
    check(c == l.n - 1 && !strstr(names, "dense"), "'!dense' (inverted): %d of %d (%s)", c, l.n, names);
    c = count_matches(&l, "!", names, sizeof names);
    check(c == l.n, "'!' alone matches everything: %d", c);
    c = count_matches(&l, "tau.kind=SIGMOID", names, sizeof names);
    check(c == 1 && !strcmp(names, "killed"), "'tau.kind=SIGMOID' (a configuration value): %d (%s)", c, names);
    c = count_matches(&l, "kind=sigmoid", names, sizeof names);
    check(c == 1 && !strcmp(names, "killed"), "'kind=sigmoid' (a key's last part): %d (%s)", c, names);
    c = count_matches(&l, "seed=9", names, sizeof names);
    check(c >= 1 && strstr(names, "killed") != NULL, "'seed=9': %d (%s)", c, names);
    const int c1 = count_matches(&l, "tau0=1", names, sizeof names);
    c = count_matches(&l, "tau0=1e0", names, sizeof names);
    check(c1 > 0 && c == c1, "'tau0=1e0' matches as many as 'tau0=1' (numbers compared as numbers): %d, %d", c, c1);
    c = count_matches(&l, "ind=sigmoid", names, sizeof names);
    check(c == 0, "'ind=sigmoid' (not a whole key part): %d (%s)", c, names);
    c = count_matches(&l, "sgd", names, sizeof names);
    const int c2 = count_matches(&l, "!sgd", names, sizeof names);
    check(c > 0 && c + c2 == l.n, "'sgd' (a whole configuration value, opt.kind) %d + '!sgd' %d = %d", c, c2, l.n);

    /* cells */
    char cells[BCOL_COUNT][64];
    e = find(&l, "moe-exp");
    if (e) {
        browse_entry_cells(e, cells);
        char best[64], last[64];
        snprintf(best, sizeof best, "%.2f", 100.0 * e->info.best_test_acc);
        snprintf(last, sizeof last, "%.2f", 100.0 * e->info.last_test_acc);
        check(!strcmp(cells[BCOL_NAME], "moe-exp") && !strcmp(cells[BCOL_DATASET], "synthetic") &&
                  !strcmp(cells[BCOL_HEAD], "moe") && !strcmp(cells[BCOL_EXPERTS], "4/2/8") &&
                  !strcmp(cells[BCOL_SCHED], "exp") && !strcmp(cells[BCOL_BEST], best) &&
                  !strcmp(cells[BCOL_LAST], last) && !strcmp(cells[BCOL_EPOCHS], "2/2") &&
                  !strcmp(cells[BCOL_STATUS], "finished"),
              "moe-exp cells: %s | %s | %s | %s | %s | %s | %s | %s | %s", cells[0], cells[1], cells[2], cells[3],
              cells[4], cells[5], cells[6], cells[7], cells[8]);
        check(strlen(cells[BCOL_CREATED]) == 16 && cells[BCOL_CREATED][10] == ' ' &&
                  !strchr(cells[BCOL_CREATED], 'T') && !strncmp(cells[BCOL_CREATED], e->info.created, 10),
              "created cell 'YYYY-MM-DD HH:MM': '%s'", cells[BCOL_CREATED]);
        check(strchr(best, '.') && strlen(strchr(best, '.')) == 3 && atof(best) > 0 && atof(best) <= 100,
              "best is a percentage, 2 decimals (%s)", best);
    }
    e = find(&l, "quit");
    if (e) {
        browse_entry_cells(e, cells);
        check(!strcmp(cells[BCOL_BEST], "-") && !strcmp(cells[BCOL_LAST], "-") && !strcmp(cells[BCOL_EPOCHS], "0/2") &&
                  !strcmp(cells[BCOL_STATUS], "interrupted"),
              "no evaluation: best '-', last '-', epochs 0/2 (%s %s %s)", cells[BCOL_BEST], cells[BCOL_LAST],
              cells[BCOL_EPOCHS]);
    }
    e = find(&l, "dense");
    if (e) {
        browse_entry_cells(e, cells);
        check(!strcmp(cells[BCOL_SCHED], "-") && !strncmp(cells[BCOL_EXPERTS], "-/", 2) &&
                  strcmp(cells[BCOL_BEST], "-"),
              "dense cells: schedule '-', experts '%s', best %s", cells[BCOL_EXPERTS], cells[BCOL_BEST]);
    }
    e = find(&l, "garbage");
    if (e) {
        browse_entry_cells(e, cells);
        int empty = 1;
        for (int k = 0; k < BCOL_COUNT; k++)
            if (k != BCOL_NAME && k != BCOL_STATUS) empty &= !cells[k][0];
        check(empty && !strcmp(cells[BCOL_NAME], "garbage") && !strcmp(cells[BCOL_STATUS], "damaged"),
              "damaged cells: only name and status");
    }

    /* stale: a "running" file nobody writes to */
    e = find(&l, "killed");
    if (check(e != NULL, "killed entry")) {
        /* issue 27: the session lock tells, not the time since the last write: nobody holds it, so
         * the killed writer is stale at once; while a process holds it, it is running however long
         * it has been quiet */
        BrowseEntry k = *e;
        const double now = (double)time(NULL);
        browse_entry_read(&k, now);
        /* (killed before its first checkpoint: the advice is to start it again, never --resume) */
        check(!strcmp(k.status, "stale") && strstr(k.err, "no process holds the session's lock") &&
                  strstr(k.err, "no checkpoint was written: start it again with `rm ") && !strstr(k.err, "--resume") &&
                  strstr(k.err, k.path) && k.ok,
              "right away (no lock held): stale, err '%s'", k.err);
        SessionLock lk;
        if (check(session_lock(k.path, &lk) == ML_OK, "take the killed session's lock (as a live writer would)")) {
            browse_entry_read(&k, now);
            check(!strcmp(k.status, "running") && !k.err[0], "lock held: running (%s)", k.status);
            browse_entry_read(&k, k.mtime + BROWSE_STALE_SEC + 3600);
            check(!strcmp(k.status, "running"), "lock held, quiet for over an hour: still running (%s)", k.status);
            session_unlock(&lk);
        }
        browse_entry_read(&k, now);
        check(!strcmp(k.status, "stale"), "lock released: stale again");
    }
    e = find(&l, "moe-exp");
    if (e) {
        BrowseEntry k = *e;
        browse_entry_read(&k, (double)time(NULL) + 1e7);
        check(!strcmp(k.status, "finished") && !k.err[0], "a finished session never becomes stale");
        path_in(k.path, sizeof k.path, "moe-exp/live.h5");
        browse_entry_read(&k, (double)time(NULL));
        check(k.ok && !strcmp(k.status, "finished") && !strcmp(k.sched, "exp") && k.mtime > 0,
              "an entry whose path is the .h5 file itself");
        path_in(k.path, sizeof k.path, "no-such-session");
        browse_entry_read(&k, (double)time(NULL));
        check(!k.ok && !strcmp(k.status, "missing") && k.err[0] && k.mtime == 0 && !k.sched[0],
              "a vanished session: missing (%s)", k.err);
    }

    /* a session folder as the root */
    BrowseList one;
    memset(&one, 0, sizeof one);
    path_in(p, sizeof p, "moe-cos");
    check(browse_list_scan(&one, p) == 0 && one.n == 1 && !strcmp(one.e[0].name, ".") &&
              !strcmp(one.e[0].status, "finished"),
          "a session folder as root: one entry '.'");
    browse_list_free(&one);
    check(one.e == NULL && one.n == 0, "browse_list_free empties the list");

    test_plan_real("moe-cos");
    test_alarms();

    /* 5. unreadable roots */
    path_in(p, sizeof p, "no-such-folder");
    errno = 0;
    check(browse_list_scan(&l, p) == -1 && strstr(ml_last_error(), "no-such-folder") &&
              strstr(ml_last_error(), strerror(ENOENT)),
          "missing folder: -1 (%s)", ml_last_error());
    check(l.n == 0, "the list is empty after a failed scan");
    errno = ENOTTY; /* left over from an earlier call (isatty on a pipe) */
    check(browse_list_scan(&l, cmds) == -1 && strstr(ml_last_error(), "cmds.txt") &&
              strstr(ml_last_error(), "not a folder"),
          "a plain file: -1 (%s)", ml_last_error());
    browse_list_free(&l);

    if (n_failed == 0) {
        char cmd[700];
        snprintf(cmd, sizeof cmd, "rm -rf '%s' '%s'", g_root, g_log);
        if (system(cmd) != 0) printf("could not remove %s\n", g_root);
    } else {
        printf("kept %s (log %s)\n", g_root, g_log);
    }
}

int main(void) {
    test_json();
    test_tau_schedule();
    test_cmp();
    test_plan();
    test_plan_extend();
    test_sessions();
    printf("%d checks, %d failed\n", n_checks, n_failed);
    return n_failed ? 1 : 0;
}
