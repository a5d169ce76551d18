/* model.h — moelab's classification model: backbone -> global average pool -> head -> classifier
 * (README "The model").
 *
 *   backbone `dw`:  stem conv3x3(C_in -> c0) BN ReLU, then 3x [dw3x3 s2 BN ReLU, pw1x1 (c -> 2c) BN ReLU]
 *   backbone `std`: stem conv3x3(C_in -> c0) BN ReLU, then 3x [conv3x3 s2 (c -> 2c) BN ReLU]
 *   c0 = round(32 * width), feature width d = 8 * c0
 *   head `dense`: y = x + fc2(relu(fc1(x))), fc1: d -> k*h; `moe`, `softmoe-*`: see moe.h
 *   classifier: linear d -> classes
 *
 * Memory: parameters, gradients, batch-norm buffers and activations each live in one flat buffer
 * allocated once by model_init for the largest batch; nothing is allocated in a training step.
 * Every tensor is registered in a table with a PyTorch state_dict name and PyTorch shape, which
 * drives allocation, initialisation, weight decay, checkpoints and tests. */
#ifndef ML_MODEL_H
#define ML_MODEL_H

#include "common.h"
#include "moe.h"
#include "moeconv.h"
#include "rng.h"

typedef enum { BACKBONE_DW, BACKBONE_STD } BackboneKind;

/* The second layer (fc2) of every residual branch: the dense head's MLP, the head's experts, the
 * backbone's MoE experts and dense layers. NORMAL: N(0, 1 / fan_in). ZERO: every such branch
 * starts as the identity (as ResNets zero their last batch norm). ZERO_BACKBONE: only the
 * backbone's layers do; the head keeps NORMAL. The values are drawn either way, so the other
 * tensors' draws do not change. */
typedef enum { FC2_NORMAL, FC2_ZERO, FC2_ZERO_BACKBONE } Fc2Init;
const char *fc2_init_name(Fc2Init f);
int fc2_init_parse(const char *s, Fc2Init *f); /* 0, or -1 for an unknown name */

#define MODEL_MAX_BBL 4 /* backbone layers: at most one per stage 0..3 */

typedef struct {
    int in_c, in_h, in_w; /* input image shape */
    int classes;
    BackboneKind backbone;
    float width;       /* width multiplier w: c0 = round(32 w) */
    MoeConfig head;    /* head kind and MoE knobs; head.d is set by model_init */
    int batch;         /* largest batch the model will see */
    float bn_momentum; /* running-statistics momentum (PyTorch convention, 0.1) */
    Fc2Init fc2_init;  /* --fc2-init: how the second layer of each residual branch starts */
    /* ---- routed conv-FFN layers inside the backbone (core/moeconv.h). A stage s is 0 (after the
     * stem) or 1..3 (after block s). The lists of hidden widths, E and k index the layers of
     * moe_after in the order given (and, for hidden and k, those of ffn_after): one value applies
     * to every layer, 0 values mean the head's h, E, k. Every other routing knob is the head's. */
    int moe_n, moe_after[MODEL_MAX_BBL]; /* --moe-after: stages followed by a routed layer */
    int ffn_n, ffn_after[MODEL_MAX_BBL]; /* --ffn-after: stages followed by the dense baseline */
    int bb_nh, bb_hidden[MODEL_MAX_BBL]; /* --moe-hidden */
    int bb_nE, bb_E[MODEL_MAX_BBL];      /* --moe-experts */
    int bb_nk, bb_k[MODEL_MAX_BBL];      /* --moe-k */
    int sync_bn; /* --sync-bn: batch statistics over every rank of a data-parallel run (Model.bn_sum) */
} ModelConfig;

void model_config_defaults(
    ModelConfig *c); /* the reference model: dw, w=1, 32x32x3, 10, moe E=8 k=2 h=1024 cf=1.25, B=128 */
/* The model's record in config_json (core/cfgvisit.h), in its order; the head via moe_config_visit. */
void model_config_visit(const ModelConfig *m, CfgVisitor *v);

#define MODEL_MAX_TENSORS 1100 /* 4 routed layers of 64 experts fit: 4 (1 + 4*64) + the rest */
#define MODEL_MAX_UNITS 8
#define MODEL_PROF_BBL(s) (MODEL_MAX_UNITS + 3 + (s)) /* profile slot of the layer after stage s */
#define MODEL_PROF_SLOTS (MODEL_MAX_UNITS + 3 + MODEL_MAX_BBL)

typedef struct {
    char name[80]; /* PyTorch state_dict key, e.g. "backbone.block1.dw.weight" */
    int ndim;
    int shape[4]; /* PyTorch order */
    long off, n;  /* offset into the flat buffer, number of floats */
    int decay;    /* weight decay applies (conv and linear weights) */
    int overwrite; /* the backward writes (does not add to) this gradient every step: optim_step
                    * leaves it as it is instead of zeroing it (the moe head's experts) */
} TensorInfo;

typedef enum { UNIT_FULL3X3, UNIT_DW3X3, UNIT_PW1X1 } UnitKind;

/* One conv -> BN -> ReLU unit of the backbone. */
typedef struct {
    UnitKind kind;
    int C, OC, H, W, Ho, Wo, stride;
    int w, gamma, beta;    /* parameter indices */
    int run_mean, run_var; /* buffer indices */
    long col;              /* (C*9, B*Ho*Wo) im2col, FULL3X3 only, else -1 */
    long z;                /* (OC, B, Ho, Wo) conv output, pre-BN */
    long out;              /* (OC, B, Ho, Wo) after BN + ReLU */
    long mean, rstd;       /* (OC) batch statistics saved for the backward */
    long coef;             /* (2, OC) the output's scale a and shift b: out = relu(z a + b) */
    int defer;             /* 1: out is not materialised, the next (depthwise) unit computes it from z, coef */
    int chunk;             /* FULL3X3: samples per chunk of conv3x3_bn_stats_train */
    int wchunk;            /* unit 0 (FULL3X3): samples per chunk of conv3x3_bn_backward_wgrad */
    double flops;          /* forward FLOPs per sample (2 per multiply-add) */
    char label[48];        /* "stem", "block1.dw", ... */
} Unit;

/* Data parallelism (core/dist.h). grad_ready: called by model_backward each time the gradient of
 * grad[off, off + n) is final (NULL: nobody listens). bn_sum (synchronised batch norm, cfg.sync_bn
 * in a data-parallel run): v[0..n) = the sum over ranks; set, a training forward takes each
 * channel's mean and variance over the global batch and the backward its sums of dy and dy*xhat,
 * and the depthwise units' fused batch norm is off. */
typedef struct {
    void (*grad_ready)(void *ctx, long off, long n);
    void *grad_ctx;
    void (*bn_sum)(void *ctx, double *v, long n);
    void *bn_ctx;
} ModelDistHooks;

/* The activations: one flat buffer, offsets in floats. */
typedef struct {
    float *buf;
    long n;
    long x;              /* (C_in, B, H, W) input batch */
    long feat;           /* (B, d) pooled features */
    long h1;             /* (B, k*h) dense head hidden, after ReLU */
    long y;              /* (B, d) head output */
    long logits, probs;  /* (B, classes) */
    long bbl[MODEL_MAX_BBL]; /* (C, B, H, W) output of the layer after stage s */
} ModelActs;

/* The backward's scratch. */
typedef struct {
    float *buf;
    long n;
    float *g0, *g1; /* ping-pong (max activation) */
    float *dcol;    /* (max C*9 x N) */
    double *cbwork; /* conv3x3_bn_stats_train's per-chunk moments (the largest FULL3X3 unit) */
    float *wgpart;  /* (chunks, OC, 9C) unit 0's per-chunk weight gradients (conv3x3_bn_backward_wgrad) */
    float *wgmean;  /* (2, OC) unit 0's means of the masked gradient and of its product with x-hat */
    double *bnsums; /* (OC, 2) a deferred unit's batch-norm backward sums, taken by its depthwise consumer */
    float *dfeat, *dy, *dh1, *dlogits;
} ModelScratch;

/* FLOPs per sample, forward. */
typedef struct {
    double backbone, head_active, routed, classifier, router;
    double expert;    /* one expert (or the dense MLP for `dense`) */
    double bb_extra;  /* routers + dense baseline layers of the backbone */
    double bb_routed; /* nominal routed FLOPs of the backbone layers (k pairs each) */
} ModelFlops;

/* Optional timing of every stage (seconds, accumulated) when on = 1. Slots: units
 * 0..nunits-1, then pool, head, classifier (+loss) at nunits, +1, +2; the backbone layer after
 * stage s (routed or dense) at MODEL_PROF_BBL(s). */
typedef struct {
    int on;
    long steps; /* steps counted by the caller */
    double fwd[MODEL_PROF_SLOTS], bwd[MODEL_PROF_SLOTS];
    double fwd_gemm[MODEL_PROF_SLOTS], bwd_gemm[MODEL_PROF_SLOTS]; /* of which inside ML_SGEMM */
} ModelProf;

typedef struct {
    ModelConfig cfg;
    int c0, d; /* stem width, feature width */
    int nparams, nbufs;
    TensorInfo params[MODEL_MAX_TENSORS];
    TensorInfo bufs[MODEL_MAX_TENSORS];
    long n_param, n_buf;
    float *param, *grad; /* (n_param) each */
    float *buf;          /* (n_buf) batch-norm running statistics */
    ModelDistHooks dist; /* data parallelism: gradient-ready and batch-norm-sum hooks */
    int nunits;
    Unit units[MODEL_MAX_UNITS];
    /* head and classifier parameter indices (-1 when absent) */
    int fc1_w, fc1_b, fc2_w, fc2_b; /* dense head */
    int moe_first;                  /* first of the 5 MoE tensors (router, w1, b1, w2, b2) */
    int cls_w, cls_b;
    MoeParams moe_p, moe_g; /* views into param / grad */
    MoeHead moe;
    ModelActs act;     /* activations: one flat buffer, offsets in floats */
    ModelScratch ws;   /* gradient scratch */
    ModelFlops flops;  /* FLOPs per sample, forward */
    /* backbone layers: stage_moe[s] / stage_ffn[s] index moec / ffnc (-1: none after stage s) */
    int nmoec, nffnc;
    MoeConv moec[MODEL_MAX_BBL];
    FfnConv ffnc[MODEL_MAX_BBL];
    int stage_moe[MODEL_MAX_BBL], stage_ffn[MODEL_MAX_BBL];
    int unit_stage[MODEL_MAX_UNITS]; /* the stage unit i closes, -1 if none */
    ModelProf prof; /* optional timing of every stage */
    int last_B;                                                                    /* batch size of the last forward */
    int last_training;
    int layout_only; /* model_layout: no memory behind the pointers */
} Model;

ml_status model_init(Model *m, const ModelConfig *cfg);
/* model_init without the memory: the layers, parameter table (counts and offsets), FLOPs and the
 * sizes n_param, n_buf, act.n, ws.n, with param, grad, buf, act.buf and ws.buf left NULL (a dry
 * run). Only model_free and the read-only fields may be used on it. */
ml_status model_layout(Model *m, const ModelConfig *cfg);
/* Bytes model_init allocates for m (weights, gradients, buffers, activations, scratch). */
double model_memory_bytes(const Model *m);
void model_free(Model *m);
/* Initialises all parameters from the RNG (He-normal convs, PyTorch-style linears), BN gamma = 1,
 * beta = 0, running var = 1, running mean = 0. */
void model_init_params(Model *m, Rng *rng);
/* The input buffer (C_in, B, H, W) to fill before model_forward. */
static inline float *model_input(Model *m) { return m->act.buf + m->act.x; }
/* Forward pass for B <= cfg.batch samples. training: batch statistics, selection noise and
 * train capacity; else running statistics and evaluation capacity. Returns logits (B, classes). */
const float *model_forward(Model *m, int B, int training, float tau, Rng *rng);
/* Softmax cross-entropy on the last forward's logits; counts correct predictions. */
double model_loss(Model *m, const int32_t *labels, int B, int *correct);
/* Backward pass for the last (training) forward with mean cross-entropy loss; gradients of the
 * auxiliary MoE losses are included. Gradients are accumulated into m->grad. */
void model_backward(Model *m, const int32_t *labels, int B);
void model_zero_grad(Model *m);
/* Total forward FLOPs per sample (nominal, all k experts), and rho nominal: routed FLOPs of the
 * head and every backbone MoE layer over the total. */
double model_flops(const Model *m);
double model_rho_nominal(const Model *m);
/* rho of the last forward: kept pairs of the head and of every backbone MoE layer. */
double model_rho_realized(const Model *m);
/* The share of that: routed layer i's kept pairs (i = model.moec index; -1: the head) over the
 * model's realized FLOPs; with no backbone layer the head's is model_rho_realized. */
double model_layer_rho_realized(const Model *m, int i);
/* 1 if anything routes: a moe / softmoe head or a backbone MoE layer. */
int model_has_routing(const Model *m);
/* alpha*L_aux + beta*L_z of the backbone MoE layers' last forward (the head's is not included). */
double model_backbone_aux_loss(const Model *m);
/* The utility-bias update of every backbone MoE layer (the head's: moe_update_bias). */
void model_backbone_update_bias(Model *m);
/* The 64x64x3 model with routed layers inside the backbone (README "MoE in the backbone"):
 * applies the flags documented there to c (input shape, layers, hidden widths). */
void model_preset_backbone_moe(ModelConfig *c);
/* "moe2" / "ffn0": the name of the layer after stage s. */
const char *model_stage_name(char *buf, size_t n, int routed, int stage);
const char *backbone_name(BackboneKind k);

#endif
