/* moe.h — the Mixture-of-Experts head as numerical kernels: router, top-k selection with Gumbel
 * noise and utility bias, capacity with k-major priority, experts as per-expert SGEMMs on gathered
 * rows, combine, auxiliary and z losses, the full backward, the bias update, Soft MoE (batch and
 * per-sample variants), FLOP accounting (rho) and the per-step routing statistics.
 *
 * Layout: all tensors are row-major floats. Features x, y, dx, dy are (B, d). Parameters use
 * PyTorch's (out, in) weight layout with experts contiguous, carved from one flat buffer in this
 * order (moe_params_point):
 *     router (S, d)    S = E (moe, softmoe-sample) or E*P (softmoe-batch: slot embeddings Phi)
 *     w1     (E, h, d)
 *     b1     (E, h)
 *     w2     (E, d, h)
 *     b2     (E, d)
 * each tensor starting on a 16-float (64-byte) boundary of the buffer (zero padding in between, as
 * in the model's tensor table), so E*h or S*d need not be multiples of 16.
 * The dense head is not handled here (the model owns it); moe_param_count returns 0 for it.
 *
 * Maths (README "The model" and "Routing statistics"):
 *   z = x W_r^T (no bias), b = utility bias (state, not a parameter), b_g = b for BIAS_LOGITS else 0.
 *   moe: selection = top-k of (z + b)/tau + noise*G (G standard Gumbel, training only; ties go to
 *        the lower expert index). With noise = 1 this is Gumbel-top-k: the k experts are sampled
 *        without replacement from softmax((z + b)/tau), so tau controls exploration as well as the
 *        gates. Gates p = softmax((z + b_g)/tau); the k selected gates are renormalised to sum 1
 *        (before capacity) when moe_renorm_on: renorm = MOE_RENORM_ON, or MOE_RENORM_AUTO (the
 *        default) with k >= 2; at k = 1 under auto the gate is the softmax probability p_e (Switch,
 *        V-MoE), since a renormalised single gate is p/p = 1 and gives the router no task gradient. Capacity C = ceil(cf*k*B/E) (cf <= 0: dropless;
 *        computed in double with a 1e-6 relative tolerance so a float cf such as 0.3 that should
 *        give an integer does not round up; then clamped to [1, B]). Priority is k-major (all
 *        rank-0 pairs before any rank-1 pair); inside a rank, batch order or (PRIORITY_GATE)
 *        descending p[b, first choice] with ties by batch index. A pair past slot C is dropped
 *        and contributes exactly zero: y = x + sum over kept pairs of g * Expert_e(x).
 *        Expert_e(x) = W2_e relu(W1_e x + b1_e) + b2_e.
 *        If the renormalising sum underflows (< FLT_MIN) the sample's gates become 1/k with no
 *        gradient.
 *   softmoe-sample: w = softmax((z + b_g)/tau), y = x + sum_e w_e Expert_e(x), all E experts on
 *        the whole batch; no noise, no capacity.
 *   softmoe-batch (Puigcerver et al.): L = x Phi^T / tau (B, E*P); dispatch D = softmax of L over
 *        the batch axis (per slot column); slot inputs X~ = D^T x (E*P, d); expert e runs its P
 *        slots; combine Cw = softmax of L over the E*P slots of each sample; y = x + Cw Y~.
 *        The utility bias is not used by this head.
 *   L_aux = E * sum_e f_e P_e, P_e = mean_b p[b, e] (with gradient), f_e = fraction of samples
 *        whose selected set holds e (no gradient; moe: the selected top-k before capacity;
 *        softmoe-sample: the argmax of w). L_aux = 0 for softmoe-batch.
 *   L_z = mean_b logsumexp(z_b)^2 on the raw logits (softmoe-batch: the raw slot logits x Phi^T).
 *   moe_backward includes the gradients of alpha*L_aux + beta*L_z. The selection (and the argmax
 *   behind f_e) is a constant of the forward.
 *
 * Memory: moe_init allocates everything for batches up to Bmax; forward and backward never
 * allocate. OpenMP is used only for loops with disjoint outputs (per sample / per row), so
 * results are bit-for-bit deterministic for a fixed thread count. Not thread-safe per head. */
#ifndef ML_MOE_H
#define ML_MOE_H

#include "core/cfgvisit.h"
#include "core/common.h"
#include "core/dist.h"
#include "core/rng.h"

#define MOE_MAX_EXPERTS 64

typedef enum { HEAD_DENSE, HEAD_MOE, HEAD_SOFTMOE_BATCH, HEAD_SOFTMOE_SAMPLE } HeadKind;
typedef enum { BIAS_NONE, BIAS_SELECT, BIAS_LOGITS } BiasMode;
typedef enum { PRIORITY_BATCH, PRIORITY_GATE } Priority;
/* Renormalisation of the k kept gates. The values are stored in a session's config JSON
 * (model.head.renorm): sessions written before auto existed hold 0 (off) or 1 (on). */
enum { MOE_RENORM_OFF = 0, MOE_RENORM_ON = 1, MOE_RENORM_AUTO = 2 };

typedef struct {
    HeadKind kind;
    int d, E, k, h;     // feature width, experts, top-k, expert hidden width
    float cf;           // train capacity factor; C = ceil(cf*k*B/E); cf <= 0: dropless
    float eval_cf;      // evaluation capacity factor; <= 0 (default): dropless
    int renorm;         // MOE_RENORM_OFF / _ON / _AUTO (default auto: renormalise only when k >= 2)
    Priority priority;  // order inside one rank when filling capacity
    BiasMode bias_mode; // utility bias: none, selection only (DeepSeek), or selection + gates
    float bias_rate;    // u in b_e += u * sign(mean_count - count_e)
    float noise;        // Gumbel selection noise scale in training (default 1; 0 = deterministic)
    float alpha, beta;  // L_aux and L_z weights (defaults 0.01, 0)
    int slots;          // softmoe-batch slots per expert P; 0 = ceil(k*Bmax/E)
} MoeConfig;

// Reference: HEAD_MOE, d = 256, E = 8, k = 2, h = 1024, cf = 1.25, eval_cf = 0 (dropless),
// renorm = MOE_RENORM_AUTO, PRIORITY_BATCH, BIAS_NONE, bias_rate = 1e-3, noise = 1, alpha = 0.01, beta = 0,
// slots = 0.
void moe_config_defaults(MoeConfig *c);
// The head's record in config_json (core/cfgvisit.h), in its order.
void moe_config_visit(const MoeConfig *c, CfgVisitor *v);
// 1 when the kept gates of this configuration are renormalised: renorm = on, or auto with k >= 2.
int moe_renorm_on(const MoeConfig *c);
// "off", "on", "auto" (NULL for another value); parse: ML_ERR_ARG for another name.
const char *moe_renorm_name(int renorm);
ml_status moe_parse_renorm(const char *s, int *renorm);

typedef struct {
    float *router; // (E, d); softmoe-batch: slot embeddings Phi (E*P, d)
    float *w1;     // (E, h, d)
    float *b1;     // (E, h)
    float *w2;     // (E, d, h)
    float *b2;     // (E, d)
} MoeParams;

// Softmoe-batch slots per expert P for batches up to Bmax (slots, or ceil(k*Bmax/E)); 0 for other
// kinds.
int moe_slots(const MoeConfig *c, int Bmax);
// Total floats of MoeParams, in the order above, each tensor padded to a multiple of 16 floats
// (0 for HEAD_DENSE).
size_t moe_param_count(const MoeConfig *c, int Bmax);
// Carves the MoeParams pointers from one flat buffer of moe_param_count floats (all NULL for
// HEAD_DENSE).
void moe_params_point(MoeParams *p, float *base, const MoeConfig *c, int Bmax);

// The routing scalars of one forward, one row each. A row makes the MoeStepStats field, its
// column in live.h5 (/steps and /layers/<name>/steps, so the browser's history and the CSV
// export too), its line in the live screen's routing panel, and how a data-parallel run
// combines the ranks' values (moe_stats_put / moe_stats_get). A new per-step statistic is a row
// here and its computation in moe.c (moe_stats_finish_ and the soft heads' statistics), plus a
// test: three files (core/README.md "Adding things").
//   X(T, member, cols, dist, label, fmt, scale, warn, description)
//   T      F: double, I: int (the column is float64 / int64)
//   cols   ALL: /steps and every layer's steps; ALL_V1X: as ALL, but optional in /steps (added
//          after format 1); LAYER: only the layers' steps (the head's /steps has its own); NEW:
//          optional in both (older sessions lack it; readers then leave it 0) — use this one
//   dist   MS_MEAN: a mean over the batch's samples (ranks sum value x B); MS_FRAC: a count / B;
//          MS_PAIRFRAC: a count / (B k); MS_RANKMEAN: the mean of the ranks' values; MS_OWN: each
//          rank's own (the same on every rank); MS_DERIVED: recomputed from the summed counts in
//          moe_stats_get; MS_CONF: the confidence's weighted mean
//   label  the routing panel's label (NULL: not shown there), fmt its printf format, scale its
//          factor (100 for a percentage)
//   warn   when the routing panel paints the value red: W_NONE never; W_SHARE above the run's
//          collapse share threshold (--collapse-share, ViewCtx.collapse_share)
#define MOE_STEP_SCALARS(X)                                                                                            \
    X(F, tau, LAYER, MS_OWN, NULL, NULL, 1, W_NONE, "the layer's router temperature")                                  \
    X(F, drop_frac, ALL, MS_PAIRFRAC, "drop %", "%.2f", 100, W_NONE, "dropped pairs / (B k)")                          \
    X(F, no_expert_frac, ALL, MS_FRAC, "no-exp %", "%.2f", 100, W_NONE, "samples with every pair dropped / B")         \
    X(F, gate_entropy, ALL, MS_MEAN, "gate H", "%.3f", 1, W_NONE, "mean gate entropy / log E")                         \
    X(F, gate_margin, NEW, MS_MEAN, "margin", "%.3f", 1, W_NONE,                                                       \
      "mean over samples of the largest expert weight minus the second (0: a tie, 1: one expert)")                     \
    X(F, load_entropy, ALL, MS_DERIVED, NULL, NULL, 1, W_NONE, "entropy of the kept load / log E")                     \
    X(F, maxvio, ALL, MS_DERIVED, "MaxVio", "%.3f", 1, W_NONE, "max kept / mean kept - 1")                             \
    X(F, confidence, ALL, MS_CONF, "confid.", "%.3f", 1, W_NONE, "mean combine weight of the kept pairs")              \
    X(F, l_aux, ALL, MS_RANKMEAN, "aux loss", "%.4f", 1, W_NONE, "load-balancing loss (unweighted)")                   \
    X(F, l_z, ALL, MS_RANKMEAN, "z loss", "%.4g", 1, W_NONE, "router z-loss (unweighted)")                             \
    X(I, capacity, ALL, MS_OWN, NULL, NULL, 1, W_NONE, "expert capacity C used (B when dropless)")                     \
    X(F, pairs_per_sample, ALL, MS_MEAN, NULL, NULL, 1, W_NONE, "kept pairs / B")                                      \
    X(F, first_share, LAYER, MS_DERIVED, NULL, NULL, 1, W_NONE, "largest share of (noisy) first choices in the batch") \
    X(F, clean_first_share, ALL_V1X, MS_DERIVED, "clean 1st", "%.2f", 1, W_SHARE,                                      \
      "largest share of first choices without selection noise")                                                        \
    X(F, clean_load_entropy, ALL_V1X, MS_DERIVED, NULL, NULL, 1, W_NONE,                                               \
      "entropy of the first choices without selection noise / log E")                                                  \
    X(I, clean_dead, ALL_V1X, MS_DERIVED, NULL, NULL, 1, W_NONE,                                                       \
      "experts no sample of the batch picks first without selection noise")                                            \
    X(F, first_agree, ALL_V1X, MS_FRAC, "agree", "%.2f", 1, W_NONE,                                                    \
      "fraction of samples whose noisy first choice is the clean one")

#define MOE_STAT_CTYPE_F double
#define MOE_STAT_CTYPE_I int
#define MOE_STAT_FIELD_(T, m, cols, dist, label, fmt, scale, warn, desc) MOE_STAT_CTYPE_##T m;

// Statistics of one forward (vectors have E valid entries; the scalars are MOE_STEP_SCALARS).
// For the soft heads: demand = kept = number of samples whose largest expert weight is e
// (softmoe-batch: per-expert weight = sum of the combine weights of its slots), mean_gate = mean
// expert weight, confidence = mean over samples of the largest expert weight, dropped and
// no-expert fractions are 0, capacity = B (sample) or P (batch), pairs_per_sample = E (sample)
// or E*P/B (batch: expert rows processed per sample); the clean router is the router (no noise):
// its first choices are the published ones and first_agree is 1.
typedef struct {
    int B, E, k;                      // batch size, experts, top-k of this forward
    int training;                     // 1 for a training forward
    int dropless;                     // 1 if no capacity limit applied
    int demand[MOE_MAX_EXPERTS];      // (E) selected pairs per expert, before capacity
    int kept[MOE_MAX_EXPERTS];        // (E) pairs that got a slot
    float mean_gate[MOE_MAX_EXPERTS]; // (E) mean over samples of p[b, e]
    float bias[MOE_MAX_EXPERTS];      // (E) utility bias b_e used by this forward
    int first[MOE_MAX_EXPERTS];       // (E) samples whose (noisy) first choice is e
    int clean_first[MOE_MAX_EXPERTS]; // (E) samples whose clean first choice (argmax_e z[b,e], + b_e
                                      // with bias_mode select/logits) is e
    MOE_STEP_SCALARS(MOE_STAT_FIELD_)
} MoeStepStats;

typedef struct {
    MoeConfig cfg;
    int Bmax;                    // largest batch the workspace holds
    int P;                       // softmoe-batch slots per expert (0 otherwise)
    int S;                       // router rows: E, or E*P for softmoe-batch
    int rows_max;                // rows of the expert blocks: k*Bmax, E*Bmax or E*P
    double ws_bytes;             // bytes of the workspace below (what moe_init allocates)
    float bias[MOE_MAX_EXPERTS]; // (E) utility bias b: state, saved in checkpoints
    int freeze_selection;        // 1: reuse the previous forward's selection and keep mask
                                 // (softmoe-sample: its argmax behind f_e); for FD checks
    MoeStepStats stats;          // statistics of the last forward
    int *first_choice;           // (Bmax) first selected expert per sample (soft: argmax)

    // ---- saved by the forward for the backward
    int B;                        // batch size of the last forward (0 before any)
    float tau;                    // temperature of the last forward
    int training;                 // mode of the last forward
    int nrows;                    // gathered rows in use
    int off[MOE_MAX_EXPERTS + 1]; // expert e owns rows [off[e], off[e+1]) of xg/hid/yo
    float *z;                     // (Bmax, S) raw router logits
    float *p;                     // (Bmax, S) gates softmax((z + b_g)/tau); softmoe-batch: combine Cw
    float *disp;                  // (Bmax, S) softmoe-batch dispatch D (column softmax)
    double *lse;                  // (Bmax) logsumexp of the raw logits z_b
    int *sel;                     // (Bmax, k) moe: selected experts, rank order
    float *gate;                  // (Bmax, k) moe: combine weight of each selected pair
    int *row;                     // (Bmax, k) moe: gathered row of the pair, -1 if dropped
    int *row_src;                 // (rows_max) moe: sample of each gathered row
    int *row_rank;                // (rows_max) moe: rank of each gathered row
    float *xg;                    // (rows_max, d) expert inputs (moe: gathered x; batch: X~)
    float *hid;                   // (rows_max, h) expert hidden activations after ReLU
    float *yo;                    // (rows_max, d) expert outputs (before the gate)

    // ---- workspace
    float *dyo;                        // (rows_max, d)
    float *dhid;                       // (rows_max, h)
    float *dxg;                        // (rows_max, d)
    float *dp;                         // (Bmax, S)
    float *dd;                         // (Bmax, S)
    float *dz;                         // (Bmax, S)
    float *dgate;                      // (Bmax, k)
    float *colbuf;                     // (2, S) per-column scratch
    float *key;                        // (Bmax) priority keys
    int *order, *order_tmp;            // (Bmax) priority order and merge-sort scratch
    int demand_train[MOE_MAX_EXPERTS]; // (E) demand counts of the last training forward
    int has_train_counts;              // 1 once a training forward has run
} MoeHead;

// Data parallelism (core/dist.h): moe_stats_put appends the last forward's statistics to a pack
// in a fixed order (counts, and the per-sample means weighted by the local batch); once the pack is
// summed over ranks, moe_stats_get reads them back into m->stats as the statistics of the whole
// global batch (counts summed, means over every rank's samples, load entropy and MaxVio recomputed
// from the summed counts; L_aux and L_z the mean of the ranks' own values; capacity stays the
// rank's own) and sets the demand the utility-bias update uses to the summed one.
void moe_stats_put(const MoeHead *m, DistPack *p);
void moe_stats_get(MoeHead *m, DistPack *p, int nranks);

// Validates the config (ML_ERR_ARG: kind not moe/softmoe-*, d, h, Bmax < 1, E > MOE_MAX_EXPERTS,
// k < 1 or k > E, bad enums, non-finite factors) and allocates the workspace for batches <= Bmax.
// The bias starts at 0. On failure nothing stays allocated.
ml_status moe_init(MoeHead *m, const MoeConfig *c, int Bmax);
/* moe_init's checks and sizes (P, S, rows_max, ws_bytes) without allocating the workspace (a dry run). */
ml_status moe_init_layout(MoeHead *m, const MoeConfig *c, int Bmax);
// Frees the workspace (safe on a zeroed or failed head).
void moe_free(MoeHead *m);

// y (B, d) = x (B, d) + head(x). training = 1: Gumbel noise from rng (may be NULL if noise == 0)
// and the train capacity; training = 0: no noise, eval capacity. tau > 0. 1 <= B <= Bmax.
// RNG use: a training forward of the moe head with noise > 0 draws exactly B*E Gumbel variates
// (sample-major, then expert index); frozen forwards and the soft heads draw none.
// Stores what moe_backward needs, m->stats, m->first_choice, and the demand counts for the bias
// update. With freeze_selection set and a previous forward of the same B, a moe head reuses the
// previous selection and keep mask (no noise drawn; capacity as before) and recomputes everything
// else; softmoe-sample reuses its previous argmax (first_choice, f_e of L_aux).
void moe_forward(MoeHead *m, float *y, const float *x, const MoeParams *p, int B, float tau, int training, Rng *rng);
// dx (B, d) is overwritten; gradients are accumulated (+=) into g, except the experts' (w1, b1,
// w2, b2, every head), which are written whole, zeros for an expert without rows (model.c marks
// them `overwrite`, so the optimiser does not zero them). Includes the gradients of
// alpha*L_aux + beta*L_z. x and p must be those of the last forward, B its batch size.
void moe_backward(MoeHead *m, float *dx, MoeParams *g, const float *dy, const float *x, const MoeParams *p, int B);
// ---- routing only: the moe head's router, selection, capacity, gates, losses and statistics
// without its experts, shared with the backbone's routed conv layers (core/moeconv.h), so both
// run one implementation. moe_forward of a moe head is exactly moe_route_forward followed by the
// gather / experts / combine of its rows.
// moe_route_forward (HEAD_MOE only): z = x W_r^T for x (B, d) and router (E, d); fills z, lse, p,
// sel, gate, row (gathered row of each (sample, rank) pair, -1 if dropped), row_src, row_rank,
// off, nrows, first_choice and stats, with the RNG use, freeze_selection and capacity rules of
// moe_forward. The caller runs the experts on rows [off[e], off[e+1]).
void moe_route_forward(MoeHead *m, const float *x, const float *router, int B, float tau, int training, Rng *rng);
// Given m->dgate (B, k) = dL/dgate of every pair (0 for dropped pairs), backs through the
// renormalisation and the softmax, adds the alpha*L_aux and beta*L_z terms, accumulates the
// router gradient into grouter (E, d) and ADDS dz W_r into dx (B, d). x and router as in the
// last moe_route_forward of the same B.
void moe_route_backward(MoeHead *m, float *dx, float *grouter, const float *x, const float *router, int B);
// b_e += bias_rate * sign(mean_e demand - demand_e), using the DEMAND counts (selections before
// capacity) of the last training forward: kept counts saturate at C and hide how overloaded an
// expert is. No-op unless bias_mode != BIAS_NONE, bias_rate > 0, a training forward has run, and
// the head is moe (or softmoe-sample with BIAS_LOGITS, with argmax counts).
void moe_update_bias(MoeHead *m);

// FLOPs per sample (2 per multiply-add; biases, ReLU, softmax and the gated sums not counted).
// One expert: 4*d*h. Router: 2*d*E (moe, softmoe-sample); softmoe-batch: 2*d*S slot logits plus
// 2*S*d dispatch plus 2*S*d combine (S = E*P, P = moe_slots(c, B)).
// 1 when the task loss cannot reach the router: top-k routing (moe) with k = 1 and renormalised
// gates, where every kept gate is p_e / p_e = 1 and only L_aux / L_z train the router (Switch and
// V-MoE use the softmax value at k = 1: renorm = 0). The trainer says so when a run starts.
int moe_k1_blind_router(const MoeConfig *c);
double moe_expert_flops(const MoeConfig *c);
double moe_router_flops(const MoeConfig *c, int B);
// Nominal expert calls per sample: k (moe), E (softmoe-sample), E*P/B (softmoe-batch), 0 (dense).
double moe_nominal_pairs(const MoeConfig *c, int B);
// rho = routed / total forward FLOPs per sample, routed = pairs * expert FLOPs, total = backbone
// + router + routed + classifier. Nominal uses moe_nominal_pairs; realized takes the measured
// pairs per sample (MoeStepStats.pairs_per_sample). Pass B = Bmax (it sets the default P).
// Reference (backbone 5,173,248, classifier 5,120, E 8, k 2, d 256, h 1024): 0.288.
double moe_rho_nominal(const MoeConfig *c, double backbone_flops, double classifier_flops, int B);
double moe_rho_realized(const MoeConfig *c, double backbone_flops, double classifier_flops, int B,
                        double pairs_per_sample);

// Names for logs and options: "dense", "moe", "softmoe-batch", "softmoe-sample"; "none",
// "select", "logits"; "batch", "gate". Parsers return ML_ERR_ARG for an unknown name.
const char *moe_head_name(HeadKind k);
ml_status moe_parse_head(const char *s, HeadKind *k);
const char *moe_bias_name(BiasMode b);
ml_status moe_parse_bias(const char *s, BiasMode *b);
const char *moe_priority_name(Priority p);
ml_status moe_parse_priority(const char *s, Priority *p);

#endif
