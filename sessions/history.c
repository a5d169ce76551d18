/* history.c — a whole live.h5 in memory for the session browser, and the scrubber's look-ups
 * (history.h). Reads through the shared row readers of reader.c (sess_open_read, sess_read_rows,
 * sess_read_strings) and the column tables of schema.c, so it follows the writer's layout.
 *
 * Rebuilding the records. Every stored /steps and /evals column goes back into the field it came
 * from (sess_step_row / sess_eval_row in reverse: exact, the columns are f8 / i8 and the float
 * fields lr and tau were widened from float). What the file does not store is reconstructed:
 *   - StepRecord.moe.{B, E, k, training, tau}: /run@batch, /run@experts, /run@k, 1 (every
 *     published step is a training forward), the step's tau (the trainer's MoeStepStats.tau is
 *     the temperature of the forward, which is StepRecord.tau);
 *   - StepRecord.moe.dropless: the trainer's definition (moe.c) is "no capacity limit applied":
 *     always 1 for the softmoe heads; for the moe head 1 iff the train capacity factor in effect
 *     is <= 0 (then capacity = B). The factor in effect is the launch value (config_json
 *     model.head.cf) changed by the `set cf X` events of the log (an event at step s takes effect
 *     from step s + 1; values the trainer refuses, > 1000 or not a number, are skipped). It also
 *     requires capacity >= B, so a file whose events do not explain the capacity still reads
 *     sensibly. Without a readable cf the rule is capacity >= B;
 *   - config_json is parsed with jansson (session_config_parse); a text that is cut (longer than
 *     the 64 KiB read) or damaged, or a key of the wrong type, only makes the values read from it
 *     unknown: the file still loads;
 *   - MoeStepStats.first_share and EvalRecord.window_first_share are not stored: 0;
 *   - /run has no log_every attribute: it is read from config_json ("log_every"), or, if that
 *     is missing, taken as the spacing of the first two step rows (the first row's step if only
 *     one row, 0 if none).
 * Dense heads: has_moe = 0 and the routing fields are as stored (0); evaluations of a dense head
 * have classes = experts = 0, as the trainer publishes them (trainer_fill_eval_routing does
 * nothing for a dense head).
 *
 * Lengths. The step rows are the common length of every /steps column (the per-expert ones
 * included for MoE heads) and the eval rows the common length of every /evals column
 * (class_expert and the t-SNE datasets included), as session_open_append aligns them, so that a
 * file being written or left ragged by a crash loads. A damaged file can claim any number of
 * rows; a dataset is refused (ML_ERR_FORMAT) when it claims more data than the file could hold
 * even at deflate's best ratio (about 1032:1), plus 1 MiB of never-written rows, so that a flipped
 * byte in a dimension gives a message and not an allocation of terabytes. */
#define _POSIX_C_SOURCE 200809L

#include "history.h"
#include "h5util.h"
#include "history_tail.h"
#include "schema.h"

#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

typedef struct {
    hid_t f;
    const char *path;
    double fsize;     /* bytes of the file when opened */
    SessTailCap *cap; /* NULL: a whole load (arrays of the exact size); else the rows already held
                         * are kept and the arrays grow geometrically (session_history_tail) */
} Ld;

/* Makes *p (ml_alloc'd, `have` elements of `elem` bytes) hold `need` elements: exactly for a
 * whole load, else with room to grow (cap: the elements it holds). */
static int grow(const Ld *L, void **p, size_t elem, long have, long need, long *cap) {
    if (L->cap && need <= *cap && *p) return 0;
    long nc = need;
    if (L->cap) {
        nc = *cap * 2 > need ? *cap * 2 : need;
        if (nc < 64) nc = 64;
    }
    void *q = ml_alloc(elem * (size_t)nc);
    if (!q) return -1;
    if (*p && have > 0) memcpy(q, *p, elem * (size_t)have);
    ml_free(*p);
    *p = q;
    if (L->cap) *cap = nc;
    return 0;
}

/* More than the file could hold (see the top comment)? */
static int too_big(const Ld *L, double elems, double elem_bytes) {
    return elems * elem_bytes > 1032.0 * L->fsize + (double)(1 << 20);
}

static int clamp_int(int64_t v) { return v > INT_MAX ? INT_MAX : v < INT_MIN ? INT_MIN : (int)v; }

/* Opens `name`, checks rank and the dims after the first (inner[k] < 0: any), and gives its rows.
 * Missing datasets: ML_ERR_FORMAT naming them. */
static ml_status ds_shape(const Ld *L, const char *name, int rank, const long *inner, long *rows, hsize_t *dims_out) {
    *rows = 0;
    if (H5Lexists(L->f, name, H5P_DEFAULT) <= 0) {
        H5Eclear2(H5E_DEFAULT);
        return ml_fail(ML_ERR_FORMAT, "%s: dataset %s is missing", L->path, name);
    }
    hid_t d = H5Dopen2(L->f, name, H5P_DEFAULT);
    if (d < 0) return h5u_fail(ML_ERR_FORMAT, L->path, name, "cannot open dataset");
    hsize_t dims[4] = {0, 0, 0, 0};
    const int r = h5u_dims(d, dims, 4, 1);
    H5Dclose(d);
    H5Eclear2(H5E_DEFAULT);
    if (r != rank) return ml_fail(ML_ERR_FORMAT, "%s: dataset %s has rank %d, expected %d", L->path, name, r, rank);
    double inner_elems = 1;
    for (int k = 1; k < rank; k++) {
        if (inner && inner[k - 1] >= 0 && dims[k] != (hsize_t)inner[k - 1])
            return ml_fail(ML_ERR_FORMAT, "%s: dataset %s has %llu in dimension %d, expected %ld", L->path, name,
                           (unsigned long long)dims[k], k, inner[k - 1]);
        inner_elems *= (double)dims[k];
    }
    if (too_big(L, (double)dims[0] * inner_elems, 1.0) || dims[0] > (hsize_t)LONG_MAX / 2)
        return ml_fail(ML_ERR_FORMAT, "%s: dataset %s claims %llu rows, more than the file can hold (damaged?)",
                       L->path, name, (unsigned long long)dims[0]);
    *rows = (long)dims[0];
    if (dims_out) memcpy(dims_out, dims, sizeof dims);
    return ML_OK;
}

/* ------------------------------------------------------------------ /run */

/* cfg: the parsed config_json (NULL if it is cut or not JSON: see the top comment) */
static ml_status read_run(const Ld *L, SessionHistory *h, char *json, size_t json_n, json_t **cfg) {
    const char *path = L->path;
    hid_t run = H5Gopen2(L->f, "run", H5P_DEFAULT);
    if (run < 0) return h5u_fail(ML_ERR_FORMAT, path, "/run", "cannot open group");
    struct {
        const char *name;
        int64_t v;
    } iv[] = {
        {"classes", 0},     {"experts", 0},      {"k", 0},       {"batch", 0},   {"d", 0},       {"steps_per_epoch", 0},
        {"total_steps", 0}, {"tsne_samples", 0}, {"image_c", 0}, {"image_h", 0}, {"image_w", 0}, {"n_train", 0},
        {"n_test", 0},
    };
    ml_status st = ML_OK;
    for (size_t i = 0; i < sizeof iv / sizeof *iv && st == ML_OK; i++)
        st = h5u_read_attr_i64(run, iv[i].name, &iv[i].v, path);
    if (st == ML_OK) st = h5u_read_attr_f64(run, "rho_nominal", &h->rho_nominal, path);
    if (st == ML_OK) {
        st = h5u_read_attr_str(run, "command_line", h->command_line, sizeof h->command_line, path);
        if (st == ML_ERR_ARG) st = ML_OK; /* kept truncated */
    }
    if (st == ML_OK) {
        st = h5u_read_attr_str(run, "config_json", json, json_n, path);
        if (st == ML_ERR_ARG) st = ML_OK;
        snprintf(h->config_json, sizeof h->config_json, "%s", json);
    }
    H5Gclose(run);
    H5Eclear2(H5E_DEFAULT);
    if (st != ML_OK) return st;
    const int64_t K = iv[0].v, E = iv[1].v, k = iv[2].v, B = iv[3].v;
    if (K < 1 || K > 1000000 || E < 0 || E > MOE_MAX_EXPERTS || B < 1 || B > INT_MAX || (E > 0 && (k < 1 || k > E)))
        return ml_fail(ML_ERR_FORMAT, "%s: /run has classes %lld, experts %lld, k %lld, batch %lld", path, (long long)K,
                       (long long)E, (long long)k, (long long)B);
    h->K = (int)K;
    h->E = (int)E;
    h->batch = (int)B;
    h->d = clamp_int(iv[4].v);
    h->steps_per_epoch = (long)iv[5].v;
    h->total_steps = (long)iv[6].v;
    h->tsne_samples = clamp_int(iv[7].v);
    h->image_c = clamp_int(iv[8].v);
    h->image_h = clamp_int(iv[9].v);
    h->image_w = clamp_int(iv[10].v);
    h->n_train = clamp_int(iv[11].v);
    h->n_test = clamp_int(iv[12].v);
    *cfg = session_config_parse(json);
    long le = 0;
    h->log_every = session_config_long(*cfg, "log_every", 1, INT_MAX, &le) == 1 ? (int)le : 0;

    int n = 0;
    st = sess_read_strings(L->f, "/run/class_names", &h->class_names, &n, path);
    if (st != ML_OK) return st;
    if (n != h->K)
        return ml_fail(ML_ERR_FORMAT, "%s: /run/class_names has %d names, /run@classes is %d", path, n, h->K);
    return ML_OK;
}

/* Is row `row` of the f8 dataset `name` still `want`? A resume drops rows and appends new ones,
 * which can bring a dataset back to the length it had: the last row held then has another wall
 * time (the rows held are not the file's any more). */
static ml_status same_row(const Ld *L, const char *name, long row, double want) {
    if (row < 0) return ML_OK;
    double *v = NULL;
    ml_status st = sess_read_rows_at(L->f, name, (hsize_t)row, 1, H5T_NATIVE_DOUBLE, (void **)&v, L->path);
    if (st == ML_OK && !(v[0] == want))
        st = ml_fail(ML_ERR_FORMAT, "%s: %s row %ld changed (rewritten by a resume?)", L->path, name, row);
    ml_free(v);
    return st;
}

/* ------------------------------------------------------------------ /events */

/* h->nevents rows are held (0 for a whole load): the rows after them. */
static ml_status read_events(const Ld *L, SessionHistory *h) {
    long n = 0;
    const long have = h->nevents;
    ml_status st = ds_shape(L, "/events", 1, NULL, &n, NULL);
    if (st != ML_OK) return st;
    if (too_big(L, (double)n, 16.0))
        return ml_fail(ML_ERR_FORMAT, "%s: /events claims %ld rows (damaged?)", L->path, n);
    if (n < have) return ml_fail(ML_ERR_FORMAT, "%s: /events lost rows (%ld, was %ld)", L->path, n, have);
    if (n == have) return ML_OK;
    hid_t t = sess_event_type();
    if (t < 0) return h5u_fail(ML_ERR_FORMAT, L->path, "/events", "cannot make the event type");
    SessEvent *rows = NULL;
    /* following: the last row held too, to see that it is still the file's (same_row) */
    const long from = have > 0 ? have - 1 : 0;
    st = sess_read_rows_at(L->f, "/events", (hsize_t)from, (hsize_t)(n - from), t, (void **)&rows, L->path);
    H5Tclose(t);
    if (st != ML_OK) return st;
    if (have > 0 &&
        !(rows[0].wall_time == h->events[have - 1].wall_time && (long)rows[0].step == h->events[have - 1].step)) {
        ml_free(rows);
        return ml_fail(ML_ERR_FORMAT, "%s: /events row %ld changed (rewritten by a resume?)", L->path, have - 1);
    }
    long cap0 = L->cap ? L->cap->events : 0;
    if (L->cap ? n > cap0 : 1) { /* malloc'd (session_history_free) */
        const long nc = L->cap ? (cap0 * 2 > n ? cap0 * 2 : n < 64 ? 64 : n) : n;
        SessionEventRow *ne = calloc((size_t)nc, sizeof *ne);
        if (!ne) {
            ml_free(rows);
            return ml_fail(ML_ERR_NOMEM, "%s: out of memory reading /events", L->path);
        }
        if (have > 0) memcpy(ne, h->events, sizeof *ne * (size_t)have);
        free(h->events);
        h->events = ne;
        if (L->cap) L->cap->events = nc;
    }
    for (long i = have; i < n; i++) {
        const SessEvent *r = &rows[i - from];
        h->events[i].step = (long)r->step;
        h->events[i].wall_time = r->wall_time;
        memcpy(h->events[i].text, r->text, SESS_EVENT_TEXT);
        h->events[i].text[SESS_EVENT_TEXT - 1] = 0;
    }
    h->nevents = n;
    ml_free(rows);
    return ML_OK;
}

/* ------------------------------------------------------------------ /steps */

/* The message of an alarm event ("collapse at step N (VIEW view, ...): MESSAGE", "warning at ...",
 * "expert death at ..."), or NULL for any other event; *cat its item: 0 training view, 1
 * evaluation, 2 clean router, 3 expert death, 4 idle router. */
static const char *alarm_event_message(const char *text, int *cat) {
    static const char *const kinds[] = {"collapse at step ", "warning at step ", "expert death at step "};
    for (size_t k = 0; k < sizeof kinds / sizeof *kinds; k++)
        if (!strncmp(text, kinds[k], strlen(kinds[k]))) {
            const char *m = strstr(text, "): ");
            if (!m || !m[3]) return NULL;
            *cat = k == 2                               ? 3
                   : strstr(text, "(training view")     ? 0
                   : strstr(text, "(evaluation view")   ? 1
                   : strstr(text, "(clean router view") ? 2
                                                        : 4;
            return m + 3;
        }
    return NULL;
}

/* The banner's message of a stored step with an open alarm: the event message of its most severe
 * open item, in the live run's order (collapse_top_item: training, evaluation, a red death, the
 * clean router, a death, the idle router), from the views and dead experts the step records. */
static const char *alarm_step_message(const StepRecord *s, const char *const *msg) {
    const int red_death = msg[3] && !strncmp(msg[3], "COLLAPSE", 8);
    if ((s->collapse_views & CVIEW_BIT_TRAIN) && msg[0]) return msg[0];
    if ((s->collapse_views & CVIEW_BIT_EVAL) && msg[1]) return msg[1];
    if (s->dead_experts > 0 && red_death) return msg[3];
    if ((s->collapse_views & CVIEW_BIT_CLEAN) && msg[2]) return msg[2];
    if (s->dead_experts > 0 && msg[3]) return msg[3];
    if ((s->collapse_views & CVIEW_BIT_IDLE) && msg[4]) return msg[4];
    return NULL;
}

static int event_set_cf(const SessionEventRow *e, double *cf) {
    const char *p = e->text;
    if (strncmp(p, "set cf ", 7)) return 0;
    char *end = NULL;
    errno = 0;
    const double v = strtod(p + 7, &end);
    if (end == p + 7 || errno || !isfinite(v) || v > 1000) return 0; /* refused by trainer_apply */
    while (*end == ' ') end++;
    if (*end) return 0;
    *cf = v;
    return 1;
}

/* The scalar columns of `group` (a table of schema.c) into n records of rec_size bytes at recs,
 * the wall_time column into wall. Optional columns a file lacks are left 0. */
static ml_status read_columns(const Ld *L, const char *group, const SessCol *cols, int ncols, long r0, long n,
                              void *recs, size_t rec_size, double *wall) {
    char name[96];
    for (int c = 0; c < ncols; c++) {
        const SessCol *col = &cols[c];
        snprintf(name, sizeof name, "%s/%s", group, col->name);
        if (col->optional && H5Lexists(L->f, name, H5P_DEFAULT) <= 0) {
            H5Eclear2(H5E_DEFAULT);
            continue;
        }
        double *dv = NULL;
        const ml_status st =
            sess_read_rows_at(L->f, name, (hsize_t)r0, (hsize_t)(n - r0), H5T_NATIVE_DOUBLE, (void **)&dv, L->path);
        if (st != ML_OK) return st;
        for (long i = r0; i < n; i++) {
            if (col->field == SF_WALL) wall[i] = dv[i - r0];
            else sess_col_set(col, (char *)recs + (size_t)i * rec_size, dv[i - r0]);
        }
        ml_free(dv);
    }
    return ML_OK;
}

static ml_status read_steps(const Ld *L, SessionHistory *h, const json_t *cfg) {
    char name[64];
    long ns = -1, r = 0;
    ml_status st = ML_OK;
    /* following: no row beyond those held in the first column is no new row (the length is the
     * columns' minimum); only then refresh every column */
    if (L->cap && (st = ds_shape(L, "/steps/step", 1, NULL, &r, NULL)) != ML_OK) return st;
    if (L->cap && r == h->nsteps) return ML_OK;
    for (int c = 0; c < SC_N; c++) {
        snprintf(name, sizeof name, "/steps/%s", sess_step_cols[c].name);
        if (sess_step_cols[c].optional && H5Lexists(L->f, name, H5P_DEFAULT) <= 0) {
            H5Eclear2(H5E_DEFAULT);
            continue;
        }
        if ((st = ds_shape(L, name, 1, NULL, &r, NULL)) != ML_OK) return st;
        if (ns < 0 || r < ns) ns = r;
    }
    const long E = h->E;
    for (int c = 0; c < SV_N && E > 0; c++) {
        snprintf(name, sizeof name, "/steps/%s", sess_step_vecs[c].name);
        if ((st = ds_shape(L, name, 2, &E, &r, NULL)) != ML_OK) return st;
        if (r < ns) ns = r;
    }
    if (too_big(L, (double)ns, 8.0 * SC_N))
        return ml_fail(ML_ERR_FORMAT, "%s: /steps claims %ld rows (damaged?)", L->path, ns);
    const long have = h->nsteps; /* rows held (0 for a whole load): read the rows after them */
    if (ns < have) return ml_fail(ML_ERR_FORMAT, "%s: /steps lost rows (%ld, was %ld)", L->path, ns, have);
    if (L->cap && ns == have) return ML_OK;
    if (have > 0 && (st = same_row(L, "/steps/wall_time", have - 1, h->step_wall[have - 1])) != ML_OK) return st;
    long c0 = L->cap ? L->cap->steps : 0, c1 = c0;
    if (grow(L, (void **)&h->steps, sizeof *h->steps, have, ns, &c0) ||
        grow(L, (void **)&h->step_wall, sizeof *h->step_wall, have, ns, &c1))
        return ml_fail(ML_ERR_NOMEM, "%s: out of memory for %ld step rows", L->path, ns);
    if (L->cap) L->cap->steps = c0 < c1 ? c0 : c1;
    if (ns == have) return ML_OK;

    if ((st = read_columns(L, "/steps", sess_step_cols, SC_N, have, ns, h->steps, sizeof *h->steps, h->step_wall)) !=
        ML_OK)
        return st;
    if (E == 0) {
        h->nsteps = ns;
        return ML_OK;
    }

    for (int c = 0; c < SV_N; c++) {
        snprintf(name, sizeof name, "/steps/%s", sess_step_vecs[c].name);
        void *buf = NULL;
        const int is_int = sess_step_vecs[c].is_int;
        st = sess_read_rows_at(L->f, name, (hsize_t)have, (hsize_t)(ns - have),
                               is_int ? H5T_NATIVE_INT32 : H5T_NATIVE_FLOAT, &buf, L->path);
        if (st != ML_OK) return st;
        const int32_t *iv = buf;
        const float *fv = buf;
        for (long i = have; i < ns; i++) {
            MoeStepStats *m = &h->steps[i].moe;
            for (long e = 0; e < E; e++) {
                const size_t j = (size_t)(i - have) * (size_t)E + (size_t)e;
                switch (c) {
                case SV_DEMAND: m->demand[e] = iv[j]; break;
                case SV_KEPT: m->kept[e] = iv[j]; break;
                case SV_MEAN_GATE: m->mean_gate[e] = fv[j]; break;
                case SV_BIAS: m->bias[e] = fv[j]; break;
                default: break;
                }
            }
        }
        ml_free(buf);
    }

    /* what the file does not store: see the top comment */
    const int is_moe_head = !strcmp(h->info.head, "moe");
    /* the moe head's train capacity factor in effect (see the top comment): the launch value,
     * changed by "set cf X" events; unknown without a readable model.head.cf */
    double cf = 0;
    const int cf_known = session_config_num(cfg, "model.head.cf", -HUGE_VAL, HUGE_VAL, &cf) == 1;
    long ev = 0, aev = 0; /* (the first row read walks the events before it) */
    const char *alarm_msg[5] = {0}; /* the latest alarm event's message of each item, at or before the step */
    for (long i = have; i < ns; i++) {
        StepRecord *s = &h->steps[i];
        MoeStepStats *m = &s->moe;
        s->has_moe = 1;
        m->B = h->batch;
        m->E = h->E;
        m->k = h->info.k;
        m->training = 1;
        m->tau = s->tau;
        for (; ev < h->nevents && h->events[ev].step < s->step; ev++) event_set_cf(&h->events[ev], &cf);
        /* /steps store no message: a step with an open alarm shows the message its episode's event
         * carries (THE message, the one the live run showed), not a text of its own */
        for (; aev < h->nevents && h->events[aev].step <= s->step; aev++) {
            int cat = 0;
            const char *am = alarm_event_message(h->events[aev].text, &cat);
            if (am) alarm_msg[cat] = am;
        }
        const char *am = s->alarm > 0 ? alarm_step_message(s, alarm_msg) : NULL;
        if (am) snprintf(s->collapse_text, sizeof s->collapse_text, "%s", am);
        if (!is_moe_head) m->dropless = 1;
        else m->dropless = m->capacity >= h->batch && (!cf_known || !(cf > 0));
    }
    h->nsteps = ns;
    return ML_OK;
}

/* ------------------------------------------------------------------ /evals */

static ml_status read_evals(const Ld *L, SessionHistory *h) {
    char name[64];
    long ne = -1, r = 0;
    ml_status st = ML_OK;
    if (L->cap && (st = ds_shape(L, "/evals/epoch", 1, NULL, &r, NULL)) != ML_OK) return st; /* as read_steps */
    if (L->cap && r == h->nevals) return ML_OK;
    for (int c = 0; c < EC_N; c++) {
        snprintf(name, sizeof name, "/evals/%s", sess_eval_cols[c].name);
        if (sess_eval_cols[c].optional && H5Lexists(L->f, name, H5P_DEFAULT) <= 0) {
            H5Eclear2(H5E_DEFAULT);
            continue;
        }
        if ((st = ds_shape(L, name, 1, NULL, &r, NULL)) != ML_OK) return st;
        if (ne < 0 || r < ne) ne = r;
    }
    const int E = h->E, K = h->K;
    int tsne_n = 0, feat_dim = 0;
    if (E > 0) {
        const long ke[2] = {K, E};
        if ((st = ds_shape(L, "/evals/class_expert", 3, ke, &r, NULL)) != ML_OK) return st;
        if (r < ne) ne = r;
        const int nt = (H5Lexists(L->f, "/evals/tsne_features", H5P_DEFAULT) > 0) +
                       (H5Lexists(L->f, "/evals/tsne_expert", H5P_DEFAULT) > 0) +
                       (H5Lexists(L->f, "/evals/tsne_label", H5P_DEFAULT) > 0);
        H5Eclear2(H5E_DEFAULT);
        if (nt != 0 && nt != 3) return ml_fail(ML_ERR_FORMAT, "%s: /evals/tsne_* datasets are incomplete", L->path);
        if (nt == 3) {
            hsize_t dims[4] = {0, 0, 0, 0};
            const long any2[2] = {-1, -1};
            if ((st = ds_shape(L, "/evals/tsne_features", 3, any2, &r, dims)) != ML_OK) return st;
            if (r < ne) ne = r;
            if (dims[1] > INT_MAX || dims[2] > INT_MAX)
                return ml_fail(ML_ERR_FORMAT, "%s: /evals/tsne_features has dims beyond int", L->path);
            tsne_n = (int)dims[1];
            feat_dim = (int)dims[2];
            const long n1 = tsne_n;
            if ((st = ds_shape(L, "/evals/tsne_expert", 2, &n1, &r, NULL)) != ML_OK) return st;
            if (r < ne) ne = r;
            if ((st = ds_shape(L, "/evals/tsne_label", 2, &n1, &r, NULL)) != ML_OK) return st;
            if (r < ne) ne = r;
        }
    }
    if (ne > INT_MAX || too_big(L, (double)ne, 8.0 * EC_N + 4.0 * K * E))
        return ml_fail(ML_ERR_FORMAT, "%s: /evals claims %ld rows (damaged?)", L->path, ne);
    const long have = h->nevals; /* rows held (0 for a whole load): read the rows after them */
    if (ne < have) return ml_fail(ML_ERR_FORMAT, "%s: /evals lost rows (%ld, was %ld)", L->path, ne, have);
    if (L->cap && ne == have) return ML_OK;
    if (have > 0 && (st = same_row(L, "/evals/wall_time", have - 1, h->eval_wall[have - 1])) != ML_OK) return st;
    long c0 = L->cap ? L->cap->evals : 0, c1 = c0, c2 = c0;
    if (grow(L, (void **)&h->evals, sizeof *h->evals, have, ne, &c0) ||
        grow(L, (void **)&h->eval_wall, sizeof *h->eval_wall, have, ne, &c1))
        return ml_fail(ML_ERR_NOMEM, "%s: out of memory for %ld eval rows", L->path, ne);
    if (ne == have) return ML_OK;

    if ((st = read_columns(L, "/evals", sess_eval_cols, EC_N, have, ne, h->evals, sizeof *h->evals, h->eval_wall)) !=
        ML_OK)
        return st;
    if (E == 0) {
        if (L->cap) L->cap->evals = c0 < c1 ? c0 : c1;
        h->nevals = (int)ne;
        return ML_OK;
    }
    int *ce = NULL;
    const size_t ke = (size_t)K * (size_t)E;
    st = sess_read_rows_at(L->f, "/evals/class_expert", (hsize_t)have, (hsize_t)(ne - have), H5T_NATIVE_INT,
                           (void **)&ce, L->path);
    if (st != ML_OK) return st;
    if (!L->cap) h->ce = ce; /* a whole load: the rows read are all */
    else {
        const int fail = grow(L, (void **)&h->ce, sizeof *h->ce * ke, have, ne, &c2);
        if (!fail) memcpy(h->ce + (size_t)have * ke, ce, sizeof *ce * ke * (size_t)(ne - have));
        ml_free(ce);
        if (fail) return ml_fail(ML_ERR_NOMEM, "%s: out of memory for %ld eval rows", L->path, ne);
        L->cap->evals = c0 < c1 ? (c0 < c2 ? c0 : c2) : (c1 < c2 ? c1 : c2);
    }
    h->nevals = (int)ne;
    for (long i = 0; i < ne; i++) { /* (all: ce may have moved) */
        EvalRecord *v = &h->evals[i];
        v->has_moe = 1;
        v->moe.classes = K;
        v->moe.experts = E;
        v->moe.class_expert = h->ce + (size_t)i * (size_t)K * (size_t)E;
        v->moe.tsne_n = tsne_n;
        v->moe.feat_dim = tsne_n > 0 ? feat_dim : h->d;
    }
    return ML_OK;
}

/* ------------------------------------------------------------------ /layers (format 2) */

/* An integer attribute of group path g (0 when missing). */
static long layer_attr(const Ld *L, hid_t g, const char *name) {
    int64_t v = 0;
    if (h5u_read_attr_i64(g, name, &v, L->path) != ML_OK) v = 0;
    H5Eclear2(H5E_DEFAULT);
    return (long)v;
}

/* Rows of every dataset of layer group gp/sub (cols) and its per-expert ones: the minimum into *n. */
static ml_status layer_rows(const Ld *L, const char *gp, const SessCol *cols, int ncols, long *n) {
    char name[256];
    long r = 0;
    for (int c = 0; c < ncols; c++) {
        snprintf(name, sizeof name, "%s/%s", gp, cols[c].name);
        if (cols[c].optional && H5Lexists(L->f, name, H5P_DEFAULT) <= 0) { /* a column an older layer lacks */
            H5Eclear2(H5E_DEFAULT);
            continue;
        }
        ml_status st = ds_shape(L, name, 1, NULL, &r, NULL);
        if (st != ML_OK) return st;
        if (r < *n) *n = r;
    }
    return ML_OK;
}

/* The per-layer rows of a format-2 file: step rows [s0, ns) and evaluation rows [e0, ne) (a whole
 * load: 0, 0; a follower's poll: the rows it held before), ns / ne the rows every layer has. */
static ml_status read_layers_v2(const Ld *L, SessionHistory *h, long s0, int e0) {
    char names[REC_MAX_LAYERS][REC_LAYER_NAME];
    int nl = 0;
    ml_status st = sess_read_layers(L->f, names, &nl, L->path);
    if (st != ML_OK || nl == 0) return st;
    const int K = h->K;
    long ns = h->nsteps, ne = h->nevals;
    char gp[64], name[160];
    int ltn[REC_MAX_LAYERS] = {0};
    for (int l = 0; l < nl; l++) {
        LayerInfo *li = &h->layer[l];
        snprintf(li->name, sizeof li->name, "%s", names[l]);
        snprintf(gp, sizeof gp, "/layers/%s", names[l]);
        hid_t g = H5Gopen2(L->f, gp, H5P_DEFAULT);
        if (g < 0) return h5u_fail(ML_ERR_FORMAT, L->path, gp, "cannot open group");
        li->stage = (int)layer_attr(L, g, "stage");
        li->E = (int)layer_attr(L, g, "experts");
        li->k = (int)layer_attr(L, g, "k");
        li->h = (int)layer_attr(L, g, "hidden");
        li->capacity = (int)layer_attr(L, g, "capacity");
        double rho = 0;
        if (h5u_read_attr_f64(g, "rho_nominal", &rho, L->path) == ML_OK) li->rho_nominal = rho;
        char kind[32] = "moe";
        h5u_read_attr_str(g, "kind", kind, sizeof kind, L->path);
        H5Eclear2(H5E_DEFAULT);
        H5Gclose(g);
        HeadKind hk = HEAD_MOE;
        if (moe_parse_head(kind, &hk) == ML_OK) li->kind = (int)hk;
        if (li->E < 1 || li->E > MOE_MAX_EXPERTS)
            return ml_fail(ML_ERR_FORMAT, "%s: %s@experts is %d", L->path, gp, li->E);
        snprintf(name, sizeof name, "%s/steps", gp);
        if ((st = layer_rows(L, name, sess_layer_step_cols, LSC_N, &ns)) != ML_OK) return st;
        const long E = li->E;
        for (int c = 0; c < SV_N; c++) {
            long r = 0;
            snprintf(name, sizeof name, "%s/steps/%s", gp, sess_step_vecs[c].name);
            if ((st = ds_shape(L, name, 2, &E, &r, NULL)) != ML_OK) return st;
            if (r < ns) ns = r;
        }
        snprintf(name, sizeof name, "%s/evals", gp);
        if ((st = layer_rows(L, name, sess_layer_eval_cols, LEC_N, &ne)) != ML_OK) return st;
        const long ke[2] = {K, E};
        long r = 0;
        snprintf(name, sizeof name, "%s/evals/class_expert", gp);
        if ((st = ds_shape(L, name, 3, ke, &r, NULL)) != ML_OK) return st;
        if (r < ne) ne = r;
        snprintf(name, sizeof name, "%s/evals/tsne_features", gp);
        if (H5Lexists(L->f, name, H5P_DEFAULT) > 0) {
            hsize_t dims[4] = {0};
            const long any2[2] = {-1, -1};
            if ((st = ds_shape(L, name, 3, any2, &r, dims)) != ML_OK) return st;
            if (dims[2] > INT_MAX) return ml_fail(ML_ERR_FORMAT, "%s: %s has dims beyond int", L->path, name);
            if (dims[1] > INT_MAX) return ml_fail(ML_ERR_FORMAT, "%s: %s has dims beyond int", L->path, name);
            li->feat_dim = (int)dims[2];
            ltn[l] = (int)dims[1];
            if (r < ne) ne = r;
        }
        H5Eclear2(H5E_DEFAULT);
    }
    /* the rows every layer has (a crash can leave the per-layer columns shorter) */
    h->nsteps = ns;
    h->nevals = (int)ne;
    h->nlayers = nl;
    if (s0 > ns) s0 = ns;
    if (e0 > ne) e0 = (int)ne;
    for (int l = 0; l < nl && st == ML_OK; l++) {
        const LayerInfo *li = &h->layer[l];
        const int E = li->E;
        for (int c = 0; c < LSC_N && st == ML_OK && ns > s0; c++) {
            const SessCol *col = &sess_layer_step_cols[c];
            if (col->field == SF_ROW) continue;
            snprintf(name, sizeof name, "/layers/%s/steps/%s", li->name, col->name);
            if (col->optional && H5Lexists(L->f, name, H5P_DEFAULT) <= 0) { /* left 0, as in /steps */
                H5Eclear2(H5E_DEFAULT);
                continue;
            }
            double *dv = NULL;
            if ((st = sess_read_rows_at(L->f, name, (hsize_t)s0, (hsize_t)(ns - s0), H5T_NATIVE_DOUBLE, (void **)&dv,
                                        L->path)) != ML_OK)
                break;
            for (long i = s0; i < ns; i++) sess_col_set(col, &h->steps[i].layer[l], dv[i - s0]);
            ml_free(dv);
        }
        for (int c = 0; c < SV_N && st == ML_OK && ns > s0; c++) {
            snprintf(name, sizeof name, "/layers/%s/steps/%s", li->name, sess_step_vecs[c].name);
            void *buf = NULL;
            const int is_int = sess_step_vecs[c].is_int;
            st = sess_read_rows_at(L->f, name, (hsize_t)s0, (hsize_t)(ns - s0),
                                   is_int ? H5T_NATIVE_INT32 : H5T_NATIVE_FLOAT, &buf, L->path);
            if (st != ML_OK) break;
            const int32_t *iv = buf;
            const float *fv = buf;
            for (long i = s0; i < ns; i++) {
                MoeStepStats *m = &h->steps[i].layer[l].moe;
                for (int e = 0; e < E; e++) {
                    const size_t j = (size_t)(i - s0) * (size_t)E + (size_t)e;
                    if (c == SV_DEMAND) m->demand[e] = iv[j];
                    else if (c == SV_KEPT) m->kept[e] = iv[j];
                    else if (c == SV_MEAN_GATE) m->mean_gate[e] = fv[j];
                    else m->bias[e] = fv[j];
                }
            }
            ml_free(buf);
        }
        for (long i = s0; i < ns; i++) { /* what the columns do not hold */
            MoeStepStats *m = &h->steps[i].layer[l].moe;
            m->B = h->batch;
            m->E = E;
            m->k = li->k;
            m->training = 1;
            m->dropless = m->capacity >= h->batch;
            h->steps[i].nlayers = nl;
        }
        for (int c = 0; c < LEC_N && st == ML_OK && ne > e0; c++) {
            const SessCol *col = &sess_layer_eval_cols[c];
            if (col->field == SF_ROW) continue;
            snprintf(name, sizeof name, "/layers/%s/evals/%s", li->name, col->name);
            if (col->optional && H5Lexists(L->f, name, H5P_DEFAULT) <= 0) { /* left 0, as in /evals */
                H5Eclear2(H5E_DEFAULT);
                continue;
            }
            double *dv = NULL;
            if ((st = sess_read_rows_at(L->f, name, (hsize_t)e0, (hsize_t)(ne - e0), H5T_NATIVE_DOUBLE, (void **)&dv,
                                        L->path)) != ML_OK)
                break;
            for (long i = e0; i < ne; i++) sess_col_set(col, &h->evals[i].layer[l], dv[i - e0]);
            ml_free(dv);
        }
        if (st == ML_OK && ne > e0) { /* the held matrices, then the new rows' */
            snprintf(name, sizeof name, "/layers/%s/evals/class_expert", li->name);
            const size_t per = (size_t)K * (size_t)E;
            int *add = NULL, *all = ml_alloc(sizeof *all * per * (size_t)ne);
            if (!all) st = ml_fail(ML_ERR_NOMEM, "%s: out of memory", L->path);
            if (st == ML_OK)
                st = sess_read_rows_at(L->f, name, (hsize_t)e0, (hsize_t)(ne - e0), H5T_NATIVE_INT, (void **)&add,
                                       L->path);
            if (st == ML_OK) {
                if (e0 > 0 && h->lce[l]) memcpy(all, h->lce[l], sizeof *all * per * (size_t)e0);
                memcpy(all + per * (size_t)e0, add, sizeof *all * per * (size_t)(ne - e0));
                ml_free(h->lce[l]);
                h->lce[l] = all;
                all = NULL;
            }
            ml_free(add);
            ml_free(all);
        }
        for (long i = 0; i < ne && st == ML_OK; i++) {
            EvalLayer *el = &h->evals[i].layer[l];
            el->classes = K;
            el->experts = E;
            el->class_expert = h->lce[l] + (size_t)i * (size_t)K * (size_t)E;
            el->tsne_n = ltn[l];
            el->feat_dim = li->feat_dim;
            h->evals[i].nlayers = nl;
        }
    }
    return st;
}

/* A version-1 file: a routing head is the one routed layer, its columns the top-level ones. */
static void layers_from_v1(SessionHistory *h) {
    if (h->E <= 0) return;
    h->nlayers = 1;
    LayerInfo *li = &h->layer[0];
    snprintf(li->name, sizeof li->name, "head");
    li->stage = -1;
    HeadKind hk = HEAD_MOE;
    if (moe_parse_head(h->info.head, &hk) == ML_OK) li->kind = (int)hk;
    li->E = h->E;
    li->k = h->info.k;
    li->h = h->info.hidden;
    li->capacity = h->nsteps > 0 ? h->steps[h->nsteps - 1].moe.capacity : h->batch;
    li->rho_nominal = h->rho_nominal;
    li->feat_dim = h->d;
    for (long i = 0; i < h->nsteps; i++) {
        StepRecord *s = &h->steps[i];
        StepLayer *l = &s->layer[0];
        s->nlayers = 1;
        l->moe = s->moe;
        l->rho_realized = s->rho_realized;
        l->dead_experts = s->dead_experts;
        l->window_load_entropy = s->window_load_entropy;
        l->collapsed = s->collapsed;
        l->collapse_reason = s->collapse_reason;
        l->collapse_views = s->collapse_views;
        l->collapse_first_step = s->collapse_first_step;
        memcpy(l->collapse_text, s->collapse_text, sizeof l->collapse_text);
    }
    for (int i = 0; i < h->nevals; i++) {
        EvalRecord *v = &h->evals[i];
        EvalLayer *l = &v->layer[0];
        v->nlayers = 1;
        l->train_drop_frac = v->moe.train_drop_frac;
        l->train_maxvio = v->moe.train_maxvio;
        l->train_rho_realized = v->train_rho_realized;
        l->window_load_entropy = v->moe.window_load_entropy;
        l->window_first_share = v->moe.window_first_share;
        l->dead_experts = v->moe.dead_experts;
        l->epoch_tau = v->moe.epoch_tau;
        l->epoch_l_aux = v->moe.epoch_l_aux;
        l->epoch_clean_first_share = v->moe.epoch_clean_first_share;
        l->collapsed = v->collapsed;
        l->collapse_reason = v->collapse_reason;
        l->collapse_views = v->collapse_views;
        l->collapse_first_step = v->collapse_first_step;
        l->collapse_first_train = v->collapse_first_train;
        l->collapse_first_clean = v->collapse_first_clean;
        l->collapse_first_eval = v->collapse_first_eval;
        l->classes = v->moe.classes;
        l->experts = v->moe.experts;
        l->class_expert = v->moe.class_expert;
        l->mutual_info = v->moe.mutual_info;
        l->test_load_entropy = v->moe.test_load_entropy;
        l->test_first_share = v->moe.test_first_share;
        l->test_dead_first = v->moe.test_dead_first;
        l->test_dead_topk = v->moe.test_dead_topk;
        l->tsne_n = v->moe.tsne_n;
        l->feat_dim = v->moe.feat_dim;
    }
}

/* ------------------------------------------------------------------ load / free */

void session_history_free(SessionHistory *h) {
    if (!h) return;
    ml_free(h->class_names);
    ml_free(h->steps);
    ml_free(h->step_wall);
    ml_free(h->evals);
    ml_free(h->eval_wall);
    ml_free(h->ce);
    for (int l = 0; l < REC_MAX_LAYERS; l++) ml_free(h->lce[l]);
    free(h->events);
    memset(h, 0, sizeof *h);
}

ml_status session_history_load(const char *dir_or_file, SessionHistory *h) {
    h5u_quiet();
    if (!h) return ml_fail(ML_ERR_ARG, "session_history_load: no history");
    memset(h, 0, sizeof *h);
    if (!dir_or_file) return ml_fail(ML_ERR_ARG, "session_history_load: no session folder given");
    /* the summary first (its own open: same checks and messages as everywhere else) */
    ml_status st = session_read_info(dir_or_file, &h->info);
    if (st != ML_OK) {
        memset(h, 0, sizeof *h);
        return st;
    }
    char path[H5U_PATH_MAX];
    hid_t f = -1;
    st = sess_open_read(dir_or_file, &f, path, sizeof path);
    if (st != ML_OK) {
        memset(h, 0, sizeof *h);
        return st;
    }
    if (snprintf(h->path, sizeof h->path, "%s", path) >= (int)sizeof h->path) {
        H5Fclose(f);
        memset(h, 0, sizeof *h);
        return ml_fail(ML_ERR_ARG, "%s: path longer than %zu bytes", path, sizeof h->path - 1);
    }
    struct stat sb;
    Ld L = {f, path, stat(path, &sb) == 0 ? (double)sb.st_size : 0.0, NULL};
    char *json = ml_alloc(65536);
    if (!json) st = ml_fail(ML_ERR_NOMEM, "%s: out of memory", path);
    json_t *cfg = NULL;
    if (st == ML_OK) st = read_run(&L, h, json, 65536, &cfg);
    if (st == ML_OK && h->E != h->info.experts)
        st = ml_fail(ML_ERR_FORMAT, "%s: /run@experts changed while reading", path);
    /* events before steps: the capacity factor in effect comes from `set cf` events */
    if (st == ML_OK) st = read_events(&L, h);
    if (st == ML_OK) st = read_steps(&L, h, cfg);
    if (st == ML_OK) st = read_evals(&L, h);
    if (st == ML_OK && h->info.format_version >= 2) st = read_layers_v2(&L, h, 0, 0);
    else if (st == ML_OK) layers_from_v1(h);
    json_decref(cfg);
    ml_free(json);
    if (H5Fclose(f) < 0 && st == ML_OK) st = h5u_fail(ML_ERR_FORMAT, path, "", "cannot close");
    H5Eclear2(H5E_DEFAULT);
    if (st != ML_OK) {
        const ml_status keep = st == ML_ERR_NOMEM ? st : ML_ERR_FORMAT;
        session_history_free(h);
        return keep;
    }
    if (h->log_every == 0 && h->nsteps > 0) {
        /* no log_every in config_json: the spacing of the step rows */
        const long d = h->nsteps > 1 ? h->steps[1].step - h->steps[0].step : h->steps[0].step;
        h->log_every = d > 0 && d <= INT_MAX ? (int)d : 0;
    }
    return ML_OK;
}

/* ------------------------------------------------------------------ the rows added since (history_tail.h) */

static ml_status read_status(const Ld *L, SessionInfo *info) {
    hid_t d = H5Dopen2(L->f, "status", H5P_DEFAULT);
    hid_t mt = h5u_str_type(SESS_STATUS_LEN), ft = d >= 0 ? H5Dget_type(d) : -1;
    char buf[SESS_STATUS_LEN + 1];
    memset(buf, 0, sizeof buf);
    ml_status st = ML_OK;
    if (d < 0 || mt < 0 || ft < 0 || H5Drefresh(d) < 0 || H5Tget_class(ft) != H5T_STRING ||
        H5Tget_size(ft) != SESS_STATUS_LEN || H5Dread(d, mt, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf) < 0)
        st = h5u_fail(ML_ERR_FORMAT, L->path, "/status", "cannot read");
    else {
        buf[sizeof info->status - 1] = 0;
        memcpy(info->status, buf, sizeof info->status);
    }
    h5u_close(ft);
    h5u_close(mt);
    h5u_close(d);
    return st;
}

ml_status session_history_tail(hid_t f, const char *path, SessionHistory *h, SessTailCap *cap) {
    h5u_quiet();
    struct stat sb;
    const Ld L = {f, path, stat(path, &sb) == 0 ? (double)sb.st_size : 0.0, cap};
    const int ev0 = h->nevals;
    const long st0 = h->nsteps;
    ml_status st = read_status(&L, &h->info);
    /* events before steps: the capacity factor in effect comes from `set cf` events */
    if (st == ML_OK) st = read_events(&L, h);
    if (st == ML_OK) st = read_steps(&L, h, cap->cfg);
    if (st == ML_OK) st = read_evals(&L, h);
    /* the routed layers' rows of the new steps and evaluations (format 2) */
    if (st == ML_OK && h->info.format_version >= 2 && h->nlayers > 0) st = read_layers_v2(&L, h, st0, ev0);
    H5Eclear2(H5E_DEFAULT);
    /* the summary of what is held (as session_read_info gives it) */
    SessionInfo *i = &h->info;
    i->steps_logged = h->nsteps;
    if (h->nsteps > 0) {
        i->last_step = h->steps[h->nsteps - 1].step;
        i->last_wall_time = h->step_wall[h->nsteps - 1];
    }
    i->evals = h->nevals;
    for (int k = ev0; k < h->nevals; k++) {
        const EvalRecord *e = &h->evals[k];
        i->last_epoch = e->epoch;
        i->last_test_acc = e->test_acc;
        if (isfinite(e->test_acc) && !(e->test_acc <= i->best_test_acc)) {
            i->best_test_acc = e->test_acc;
            i->best_epoch = e->epoch;
        }
    }
    i->events = h->nevents;
    return st;
}

/* ------------------------------------------------------------------ scrubber */

int session_history_eval_at_epoch(const SessionHistory *h, int epoch) {
    if (!h || h->nevals <= 0) return -1;
    /* upper bound: first evaluation with epoch > `epoch` */
    int lo = 0, hi = h->nevals;
    while (lo < hi) {
        const int mid = lo + (hi - lo) / 2;
        if (h->evals[mid].epoch <= epoch) lo = mid + 1;
        else hi = mid;
    }
    const int last = lo - 1;
    if (last < 0 || h->evals[last].epoch != epoch) return last;
    /* several with this epoch (an `eval` command during the next epoch records the epochs
     * completed): the first, the end-of-epoch evaluation */
    lo = 0;
    hi = last;
    while (lo < hi) {
        const int mid = lo + (hi - lo) / 2;
        if (h->evals[mid].epoch < epoch) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

long session_history_step_at(const SessionHistory *h, long step) {
    if (!h || h->nsteps <= 0) return -1;
    long lo = 0, hi = h->nsteps;
    while (lo < hi) {
        const long mid = lo + (hi - lo) / 2;
        if (h->steps[mid].step <= step) lo = mid + 1;
        else hi = mid;
    }
    return lo - 1;
}

void session_history_events_around(const SessionHistory *h, long step, int before, int after, long *first, long *last) {
    long a = 0, b = 0;
    if (h && h->nevents > 0) {
        long lo = 0, hi = h->nevents;
        while (lo < hi) {
            const long mid = lo + (hi - lo) / 2;
            if (h->events[mid].step <= step) lo = mid + 1;
            else hi = mid;
        }
        a = lo - (before > 0 ? before : 0);
        b = lo + (after > 0 ? after : 0);
        if (a < 0) a = 0;
        if (b > h->nevents) b = h->nevents;
    }
    if (first) *first = a;
    if (last) *last = b;
}

/* ------------------------------------------------------------------ t-SNE */

/* Row `ev` of `name` (rank 1 + ninner, inner dims as given) into a new ml_alloc'd buffer. */
static ml_status read_one_row(hid_t f, const char *path, const char *name, int ev, int ninner, const hsize_t *inner,
                              hid_t mem_type, void **out) {
    *out = NULL;
    if (H5Lexists(f, name, H5P_DEFAULT) <= 0) {
        H5Eclear2(H5E_DEFAULT);
        return ml_fail(ML_ERR_FORMAT, "%s: dataset %s is missing", path, name);
    }
    hid_t d = H5Dopen2(f, name, H5P_DEFAULT);
    if (d < 0) return h5u_fail(ML_ERR_FORMAT, path, name, "cannot open dataset");
    hsize_t dims[4] = {0}, start[4] = {(hsize_t)ev, 0, 0, 0}, count[4] = {1, 0, 0, 0};
    const int r = h5u_dims(d, dims, 4, 1);
    int ok = r == ninner + 1 && dims[0] > (hsize_t)ev;
    size_t elems = 1;
    for (int k = 0; ok && k < ninner; k++) {
        ok = dims[k + 1] == inner[k];
        count[k + 1] = inner[k];
        elems *= (size_t)inner[k];
    }
    if (!ok) {
        H5Dclose(d);
        H5Eclear2(H5E_DEFAULT);
        return ml_fail(ML_ERR_FORMAT, "%s: %s has no row %d of the loaded shape (changed since loading?)", path, name,
                       ev);
    }
    void *buf = ml_alloc(H5Tget_size(mem_type) * elems);
    hid_t fs = H5Dget_space(d), ms = -1;
    ml_status st = ML_OK;
    if (!buf) st = ml_fail(ML_ERR_NOMEM, "%s: %s: out of memory", path, name);
    else if (fs < 0 || H5Sselect_hyperslab(fs, H5S_SELECT_SET, start, NULL, count, NULL) < 0 ||
             (ms = H5Screate_simple(ninner + 1, count, NULL)) < 0 || H5Dread(d, mem_type, ms, fs, H5P_DEFAULT, buf) < 0)
        st = h5u_fail(ML_ERR_FORMAT, path, name, "cannot read row");
    h5u_close(fs);
    h5u_close(ms);
    H5Dclose(d);
    if (st != ML_OK) {
        ml_free(buf);
        return st;
    }
    *out = buf;
    return ML_OK;
}

/* Evaluation ev's t-SNE sample (tn points of width fd) from the datasets <group>/tsne_features,
 * tsne_expert and tsne_label ("/evals" for the top level, "/layers/<name>/evals" for a layer). */
static ml_status read_tsne(const SessionHistory *h, const char *group, int ev, int tn, int fd, float **feat,
                           int **expert, int **label, int *n, int *d) {
    char path[H5U_PATH_MAX], nf[96], ne_[96], nl[96];
    snprintf(nf, sizeof nf, "%s/tsne_features", group);
    snprintf(ne_, sizeof ne_, "%s/tsne_expert", group);
    snprintf(nl, sizeof nl, "%s/tsne_label", group);
    hid_t f = -1;
    ml_status st = sess_open_read(h->path, &f, path, sizeof path);
    if (st != ML_OK) return st;
    const hsize_t nd[2] = {(hsize_t)tn, (hsize_t)fd}, n1 = (hsize_t)tn;
    void *fb = NULL, *eb = NULL, *lb = NULL;
    st = read_one_row(f, path, nf, ev, 2, nd, H5T_NATIVE_FLOAT, &fb);
    if (st == ML_OK) st = read_one_row(f, path, ne_, ev, 1, &n1, H5T_NATIVE_INT, &eb);
    if (st == ML_OK) st = read_one_row(f, path, nl, ev, 1, &n1, H5T_NATIVE_INT, &lb);
    H5Fclose(f);
    H5Eclear2(H5E_DEFAULT);
    if (st != ML_OK) {
        ml_free(fb);
        ml_free(eb);
        ml_free(lb);
        return st;
    }
    *feat = fb;
    *expert = eb;
    *label = lb;
    *n = tn;
    *d = fd;
    return ML_OK;
}

/* Clears the outputs; ML_ERR_ARG naming fn when one is missing. */
static ml_status tsne_args(const SessionHistory *h, const char *fn, float **feat, int **expert, int **label, int *n,
                           int *d) {
    h5u_quiet();
    if (feat) *feat = NULL;
    if (expert) *expert = NULL;
    if (label) *label = NULL;
    if (n) *n = 0;
    if (d) *d = 0;
    if (!h || !feat || !expert || !label || !n || !d) return ml_fail(ML_ERR_ARG, "%s: missing argument", fn);
    return ML_OK;
}

ml_status session_history_layer_tsne(const SessionHistory *h, int l, int ev, float **feat, int **expert, int **label,
                                     int *n, int *d) {
    ml_status st = tsne_args(h, "session_history_layer_tsne", feat, expert, label, n, d);
    if (st != ML_OK) return st;
    if (l < 0 || l >= h->nlayers) return ml_fail(ML_ERR_ARG, "%s: no routed layer %d", h->path, l);
    if (h->info.format_version < 2) return session_history_tsne(h, ev, feat, expert, label, n, d); /* the head */
    if (ev < 0 || ev >= h->nevals)
        return ml_fail(ML_ERR_ARG, "%s: evaluation %d is out of range (%d loaded)", h->path, ev, h->nevals);
    const int tn = h->evals[ev].layer[l].tsne_n, fd = h->evals[ev].layer[l].feat_dim;
    if (tn <= 0 || fd <= 0) return ml_fail(ML_ERR_ARG, "%s: layer %s has no t-SNE sample", h->path, h->layer[l].name);
    char group[64];
    snprintf(group, sizeof group, "/layers/%s/evals", h->layer[l].name);
    return read_tsne(h, group, ev, tn, fd, feat, expert, label, n, d);
}

ml_status session_history_tsne(const SessionHistory *h, int ev, float **feat, int **expert, int **label, int *n,
                               int *d) {
    ml_status st = tsne_args(h, "session_history_tsne", feat, expert, label, n, d);
    if (st != ML_OK) return st;
    if (h->E <= 0) return ml_fail(ML_ERR_ARG, "%s: a dense head has no t-SNE sample", h->path);
    if (ev < 0 || ev >= h->nevals)
        return ml_fail(ML_ERR_ARG, "%s: evaluation %d is out of range (%d loaded)", h->path, ev, h->nevals);
    const int tn = h->evals[ev].moe.tsne_n, fd = h->evals[ev].moe.feat_dim;
    if (tn <= 0 || fd <= 0)
        return ml_fail(ML_ERR_ARG, "%s: the session has no t-SNE sample (--tsne-samples 0)", h->path);
    return read_tsne(h, "/evals", ev, tn, fd, feat, expert, label, n, d);
}
