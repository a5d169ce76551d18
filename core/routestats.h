/* routestats.h — routing statistics over time: dead experts and the collapse flag over a window of
 * logged steps, and the class x expert matrix with its mutual information.
 *
 * RouteWin is a ring of the last W logged steps' kept counts (W fixed at init, default 100).
 *   dead expert: its kept count is zero in every one of the last W steps. Only judged once the
 *       window is full (W steps pushed since init/reset), so a run's first steps never flag.
 *   collapse (README "Routing statistics"), judged on the kept counts summed over the steps in the window,
 *       once it holds at least min(min_steps, window) steps:
 *       COLLAPSE_ENTROPY  the mean over the window of the per-step load entropy
 *                         H(kept / sum kept)/log E is < entropy_min (default 0.5). A per-step
 *                         mean, not the entropy of the summed counts: a router that sends each
 *                         batch to one expert pair, but a different pair over time, is collapsed.
 *       COLLAPSE_SHARE    one expert holds more than max_share (default 0.5) of the routing:
 *                         the mean over the window of the per-step share of samples whose FIRST
 *                         choice it is (MoeStepStats.first_share). Kept pairs cannot show this
 *                         for k >= 2 (a sample picks an expert once, capacity caps it at C): a
 *                         router whose first choice is always the same expert, with varied
 *                         second choices, keeps a high kept-load entropy but is collapsed.
 *       COLLAPSE_DEAD     at least dead_frac (default 0.5) of the experts are dead.
 *
 * Class x expert matrix: counts (K, E) row-major, counts[c*E + e] = samples of class c whose first
 * choice is e. Mutual information I(class; expert) is in NATS (natural log): a diagonal matrix
 * gives log(min(K, E)), an independent (e.g. uniform) one gives 0. */
#ifndef ML_ROUTESTATS_H
#define ML_ROUTESTATS_H

#include "core/common.h"
#include "core/moe.h"

typedef struct {
    int window;         // W: steps in the window (default 100)
    int min_steps;      // post-warm-up steps needed before collapse is judged (default 100 = a full window)
    double entropy_min; // collapse if the window load entropy < this (default 0.5)
    double max_share;   // collapse if one expert's share of kept pairs > this (default 0.5)
    double dead_frac;   // collapse if dead experts >= this fraction of E (default 0.5)
    long warmup;        // steps before any judgement (-1: auto, min(5% of training, 200); see collapse_warmup)
    double hysteresis;  // an episode ends only when the value is back by this much (default 0.1: 0.5 in, 0.4 out)
    int confirm;        // consecutive steps a condition must hold to open or close an episode (default 20)
    int pad_;
} RouteWinConfig;

enum { COLLAPSE_ENTROPY = 1, COLLAPSE_SHARE = 2, COLLAPSE_DEAD = 4 };

typedef struct {
    RouteWinConfig cfg;
    int E;                          // experts
    int n;                          // steps held (<= window)
    int head;                       // ring slot the next push writes
    long pushed;                    // steps pushed since init/reset
    int *ring;                      // (window, E) kept counts per step
    long sum[MOE_MAX_EXPERTS];      // (E) kept counts summed over the held steps
    long zero_run[MOE_MAX_EXPERTS]; // (E) consecutive most recent steps with kept_e == 0
    double *ent_ring;               // (window) per-step load entropy H(kept/sum kept)/log E
    double ent_sum;                 // sum of ent_ring over the held steps
    double *share_ring;             // (window) per-step first-choice share max_e first_e / B
    double share_sum;               // sum of share_ring over the held steps
    long nz[MOE_MAX_EXPERTS];       // (E) held steps with kept_e > 0 (revival of a dead expert)
} RouteWin;

void routewin_defaults(RouteWinConfig *c);
// Allocates the ring. ML_ERR_ARG if window < 1, E outside 1..MOE_MAX_EXPERTS or thresholds are
// not finite; ML_ERR_NOMEM.
ml_status routewin_init(RouteWin *w, const RouteWinConfig *c, int E);
void routewin_free(RouteWin *w);
// Forgets every step (keeps the configuration and the ring).
void routewin_reset(RouteWin *w);
// Records one logged step's kept counts (st->kept, st->E must equal w->E).
void routewin_push(RouteWin *w, const MoeStepStats *st);
// Same from a raw (E) vector of kept counts and the step's first-choice share.
void routewin_push_counts(RouteWin *w, const int *kept, double first_share);
// Experts with zero kept count over the last W steps (0 until the window is full); if dead is not
// NULL, dead[e] = 1/0 for each expert.
int routewin_dead_count(const RouteWin *w, int *dead /* (E) or NULL */);
// Mean per-step load entropy / log E over the window (1 if E = 1, 0 if nothing pushed).
double routewin_load_entropy(const RouteWin *w);
// Mean over the window of the per-step largest first-choice share (0 if nothing pushed).
double routewin_max_share(const RouteWin *w);
// Nonzero if collapse is flagged; *reason (may be NULL) gets a mask of COLLAPSE_* bits.
int routewin_collapsed(const RouteWin *w, int *reason);
// Short text of a reason mask, e.g. "entropy+dead" ("" for 0); static storage, do not free.
const char *routewin_reason_text(int reason);

/* ---- the collapse flag of one MoE layer on three views (README "Collapse").
 *   CVIEW_TRAIN  the training selection: the RouteWin above over each step's kept counts and
 *                noisy first-choice share. Soft heads (no discrete selection) use their gate
 *                mass instead: the per-step "load" is the mean gate vector (MoeStepStats.mean_gate),
 *                its entropy and largest entry are the entropy and share, and an expert is dead
 *                when its mean gate stays below SOFT_DEAD_MASS / E over the whole window.
 *   CVIEW_CLEAN  the same batch's router without noise: a second RouteWin over the clean
 *                first-choice counts (MoeStepStats.clean_first). Soft heads have no noise, so
 *                this view is the training view and is never judged separately.
 *   CVIEW_EVAL   the last evaluation (no noise, the whole test set): its first-choice load
 *                entropy, largest first-choice share and experts no test sample selects (all k);
 *                soft heads: the test set's mean gate mass. Judged once per evaluation, with
 *                the same thresholds.
 * A view's first_step is the first step at which it was flagged (-1: never), episodes counts
 * its rising edges. Everything is a function of one layer's statistics: a model with several
 * MoE layers keeps one CollapseState per layer. */
#define SOFT_DEAD_MASS 0.1
typedef enum { CVIEW_TRAIN, CVIEW_CLEAN, CVIEW_EVAL, CVIEW_COUNT } CollapseViewId;
enum { CVIEW_BIT_TRAIN = 1, CVIEW_BIT_CLEAN = 2, CVIEW_BIT_EVAL = 4 };

typedef struct {
    int flag, reason; // flagged now; COLLAPSE_* bits
    int expert;       // the expert with the largest share (-1: none yet)
    int dead;         // dead experts of this view
    double share;     // largest first-choice share (soft heads: largest mean gate)
    double entropy;   // load entropy / log E
    long first_step;  // first step flagged (-1: never)
    long episodes;    // times it went from not flagged to flagged
    long since;       // step of the latest rise (the current episode's onset; -1: never)
    long pending;     // consecutive judged steps the opposite condition has held (opens/closes at cfg.confirm)
    long cand;        // first step of that run (the onset an opening episode reports)
    /* the episode's message as it opened (one episode, one message: the event's, the banner's, ctl's),
     * set when it rises; not checkpointed (after a resume an open episode reads the values then) */
    int onset_expert;       // -1: no snapshot
    int onset_dead, onset_reason, onset_sev;
    double onset_share, onset_entropy;
    char onset_cause[112];
} CollapseView;

/* Severity of what a layer shows now (collapse_alarm): none, a yellow warning (only the clean router
 * concentrates, or an expert died), a red collapse (the routing that makes outputs concentrates:
 * training selection, evaluation, or at least dead_frac of the experts dead). */
typedef enum { ALARM_NONE, ALARM_WARNING, ALARM_COLLAPSE } AlarmLevel;
/* What one message is about: a view's episode, an expert's death or its revival. */
typedef enum { CITEM_TRAIN, CITEM_CLEAN, CITEM_EVAL, CITEM_DEATH, CITEM_REVIVAL, CITEM_IDLE } CollapseItem;
/* The idle router (the opposite failure): per-sample gates near uniform (mean gate entropy / log E
 * above IDLE_GATE_H) and the noisy first choice rarely the clean one (first_agree under IDLE_AGREE / E)
 * over the window: the noise, not the router, routes. A yellow warning, judged like a view (warm-up,
 * hysteresis 0.05 on the entropy and 1/E on the agreement, confirmation). Its bit in collapse_views. */
#define IDLE_GATE_H 0.95
#define IDLE_AGREE 2.0
enum { CVIEW_BIT_IDLE = 8 };

/* What one evaluation measured for CVIEW_EVAL. */
typedef struct {
    int E;
    double load[MOE_MAX_EXPERTS]; // (E) first-choice counts (soft heads: summed gate mass)
    int selected_dead;            // experts no sample selected among its k (soft heads: -1, use load)
} CollapseEvalInput;

typedef struct {
    RouteWinConfig cfg;
    int E, soft;                    // soft: a soft head (gate mass, no clean view)
    RouteWin train, clean;          // windows of the training and clean views
    CollapseView view[CVIEW_COUNT]; // current state per view
    long first_step;                // first step any view was flagged (-1: never)
    int fired;                      // views that rose at the last update (CVIEW_BIT_*)
    int pad_;
    /* format 3: warm-up, expert deaths, forecast */
    long warmup;                        // steps not judged (resolved: collapse_set_warmup)
    int dead[MOE_MAX_EXPERTS];          // (E) 1: the expert is dead now (no kept pair / gate mass for a window)
    long dead_since[MOE_MAX_EXPERTS];   // (E) step its current death began (-1: alive)
    long deaths, revivals;              // events so far
    uint64_t died, revived;             // experts that died / came back at the last update (bits)
    double trend;                       // clean first-choice share per 1000 steps over the window (soft: gate share)
    double trend_entropy;               // clean load entropy per 1000 steps
    long forecast;                      // steps until a threshold is crossed at this trend (-1: none)
    double first_ema[MOE_MAX_EXPERTS];  // (E) moving average (span: the window) of the noisy first-choice
                                        // counts: the training view's expert (kept counts are capped at C)
    CollapseView idle;                  // the idle router (share: mean first_agree, entropy: mean gate entropy)
    double idle_gate_h, idle_agree;     // their moving averages (span: the window)
    long idle_n;                        // post-warm-up steps in those averages
    /* what the messages' causes read (set by the trainer before each step; not checkpointed) */
    double noise;                       // the training selection's noise scale now (--noise)
} CollapseState;

ml_status collapse_init(CollapseState *s, const RouteWinConfig *c, int E, int soft);
// The warm-up of a run of total_steps: c->warmup if >= 0, else min(5% of total_steps, 200).
long collapse_warmup(const RouteWinConfig *c, long total_steps);
void collapse_set_warmup(CollapseState *s, long warmup);
void collapse_free(CollapseState *s);
// One training step's statistics (st->E == s->E), at step `step` (steps completed). Returns the
// views that rose to flagged at this step (CVIEW_BIT_*; also in s->fired).
int collapse_push_step(CollapseState *s, const MoeStepStats *st, long step);
// One evaluation at step `step`. Returns CVIEW_BIT_EVAL if the evaluation view rose.
int collapse_push_eval(CollapseState *s, const CollapseEvalInput *in, long step);
// Views flagged now (CVIEW_BIT_* mask); the union of their reasons in *reason (may be NULL).
int collapse_views(const CollapseState *s, int *reason);
// "training" | "clean router" | "evaluation"
const char *collapse_view_name(int view);
// The layer's severity now (AlarmLevel).
int collapse_alarm(const CollapseState *s);
// Dead experts now as bits (e0 = bit 0), and their count.
uint64_t collapse_dead_mask(const CollapseState *s);
int collapse_dead_count(const CollapseState *s);
// "collapse" | "warning" | "expert death" | "expert revival": the kind word of an item's event
const char *collapse_item_word(int item);
// Severity of an item now (a clean-router episode is a warning unless the training view is flagged too;
// a death is a warning unless the dead experts reach dead_frac; a revival is none).
int collapse_item_alarm(const CollapseState *s, int item);
/* THE message of an item (one formatter for the banner, the log, the event, the headless line and
 * `ctl status`), e.g. "COLLAPSE training: 83% of first choices to e3, load entropy 0.41, since step 420
 * (experts starve)". layer: "moe2" to name the layer ("" or NULL: not named); expert: CITEM_DEATH and
 * CITEM_REVIVAL's expert (ignored otherwise). buf gets "" when the item is not open (a view not flagged,
 * an expert not dead for a death). */
void collapse_format(const CollapseState *s, int item, int expert, const char *layer, char *buf, size_t n);
// The cause clause of a view's message (CITEM_TRAIN/CLEAN/EVAL at severity sev), from the state it
// describes: the noise scale, the other views, the deaths ("" for other items).
void collapse_cause(const CollapseState *s, int item, int sev, char *buf, size_t n);
// THE message with what changed since the episode opened: collapse_format, then for a view whose
// largest share or expert moved since its onset " (now 41% to e7)" (records, banner, ctl status).
void collapse_format_now(const CollapseState *s, int item, int expert, const char *layer, char *buf, size_t n);
// The most severe open item of the layer (CITEM_*, and its expert for a death), -1 if none.
int collapse_top_item(const CollapseState *s, int *expert);
// The routing panel's forecast line, e.g. "clean share 0.42, rising: threshold in ~600 steps" ("" if none).
void collapse_forecast_text(const CollapseState *s, char *buf, size_t n);
// The first flagged view of mask (CVIEW_TRAIN..), -1 for 0.
int collapse_view_first(int mask);
// collapse_format of a view without a layer name (buf gets "" if the view is not flagged).
void collapse_describe(const CollapseState *s, int view, char *buf, size_t n);

// counts (K, E) += one count per sample at [labels[b], first_choice[b]]; samples with a negative
// label or an expert outside [0, E) are skipped. Labels must be < K (the caller's matrix rows).
void classexp_add(int *counts, const int32_t *labels, const int *first_choice, int B, int E);
// I(class; expert) in nats from the (K, E) count matrix (0 if it is empty).
double classexp_mutual_info(const int *counts, int K, int E);

#endif
