/* moeconv.h — routed conv feed-forward layers inside the backbone (DESIGN.md section 1, "MoE in
 * the backbone"), as kernels over buffers the model owns: nothing here allocates, prints or locks.
 *
 *   MoeConv (`--moe-after S`): y = x + sum over kept (sample, expert) pairs of g * Expert_e(x),
 *     Expert_e = conv1x1(C -> h) + bias -> ReLU -> conv1x1(h -> C) + bias, applied to the
 *     sample's whole feature map. Routing is per sample on the globally average-pooled map
 *     pool (B, C): router, temperature, noise, bias, capacity, priority, renormalisation and the
 *     L_aux / L_z losses are the moe head's, run by the same code (moe_route_forward /
 *     moe_route_backward of core/moe.h on the layer's MoeHead). A dropped pair contributes zero:
 *     a sample whose pairs are all dropped leaves the layer exactly as x.
 *   FfnConv (`--ffn-after S`): the matched dense baseline y = x + conv1x1(relu(conv1x1(x) + b1)) + b2
 *     with hidden k*h over every pixel.
 *
 * Layout: feature maps are channel-major over the batch, (C, B, H, W), as every backbone
 * activation (core/layers.h). An expert runs on each routed sample's map where it lies (no
 * gathered copy): W1_e (h, C) times the sample's (C, H*W) block (leading dimension B*H*W) is one
 * SGEMM, and so is W2_e times the hidden (h, H*W); never per pixel. Samples (forward, input
 * gradient) and experts (weight gradients) are handed to the threads whole, with single-threaded
 * BLAS inside, so the results do not depend on the thread count (moeconv.c).
 * Weights use PyTorch's conv layout: fc1 (h, C, 1, 1), fc2 (C, h, 1, 1), router (E, C).
 *
 * FLOPs per sample (2 per multiply-add; pooling, biases, ReLU, gates not counted):
 *   router 2*C*E; one expert pair H*W*2*(2*C*h) (routed); dense baseline H*W*2*(2*C*k*h). */
#ifndef ML_MOECONV_H
#define ML_MOECONV_H

#include "core/moe.h"

/* Parameter (or gradient) views of one routed layer: router and each expert's four tensors. */
typedef struct {
    float *router;              // (E, C)
    float *w1[MOE_MAX_EXPERTS]; // (h, C) expert e's fc1 weight
    float *b1[MOE_MAX_EXPERTS]; // (h)
    float *w2[MOE_MAX_EXPERTS]; // (C, h)
    float *b2[MOE_MAX_EXPERTS]; // (C)
} MoeConvParams;

/* One routed conv-FFN layer: configuration, parameter views, routing state and scratch, and the
 * counts of its last forward (route.stats: demand, kept, drops, losses, pairs per sample). */
typedef struct {
    int stage;                         // backbone stage it follows: 0 = stem, 1..3 = block s
    char name[16];                     // "moe2": tensors are backbone.<name>.router.weight, ...
    int C, H, W, HW;                   // its feature map (C, B, H, W), HW = H*W
    int Bmax;                          // largest batch
    MoeHead route;                     // routing: route.cfg holds E, k, h (hidden), cf and every routing knob
    MoeConvParams p, g;                // views into the model's parameter / gradient buffers
    int t_router;                      // tensor-table index of the router; the experts' tensors follow it
    double flops_router, flops_expert; // per sample: 2*C*E; one expert pair H*W*4*C*h
    float tau_own;                     // > 0: its own temperature (the trainer's per-layer plan), used by
                                       // model_forward instead of the model-wide one; 0: the model's
    int nyo;                           // expert-output buffers in yo: items run in parallel only when
                                       // the threads are at most nyo (else in order, same numbers)
    // activations kept for the backward (the model's activation buffer); R = k*Bmax*HW
    float *pool; // (Bmax, C) pooled router input
    float *xg;   // (Bmax, C) scratch: the backward's row sums of dy
    float *hid;  // (h, R) hidden after ReLU, gathered row j's (h, HW) at h*HW*j (an expert's rows contiguous)
    float *yo;   // (nyo, C, HW) scratch: each thread's expert output (C, HW) at C*HW*thread
    // scratch (the model's, shared by all layers)
    float *dhid;  // (h, R) dL/dhid of gathered row j at h*HW*j (before: W2^T dy)
    float *dpool; // (Bmax, C)
} MoeConv;

/* Gathered columns an expert block buffer needs: k * Bmax * HW. */
long moeconv_cols(const MoeConv *L);

/* y (C, B, H, W) = x + routed experts (see top). training: selection noise from rng (as
 * moe_forward: B*E Gumbel draws when noise > 0) and the train capacity; else no noise and the
 * evaluation capacity (dropless by default). tau > 0, 1 <= B <= Bmax. y must not alias x. */
void moeconv_forward(MoeConv *L, float *y, const float *x, int B, float tau, int training, Rng *rng);
/* dx (C, B, H, W) overwritten (must not alias dy); parameter gradients accumulated into L->g,
 * including alpha*L_aux + beta*L_z of the router. x must be the last forward's input. */
void moeconv_backward(MoeConv *L, float *dx, const float *dy, const float *x, int B);

/* The dense baseline layer. */
typedef struct {
    int stage;
    char name[16]; // "ffn2": backbone.ffn2.fc1.weight, ...
    int C, H, W, HW;
    int hidden; // k*h
    int Bmax;
    int t_w1;                     // tensor-table index of fc1.weight (fc1.bias, fc2.weight, fc2.bias follow)
    double flops;                 // per sample H*W*4*C*hidden
    float *w1, *b1, *w2, *b2;     // (hidden, C), (hidden), (C, hidden), (C)
    float *gw1, *gb1, *gw2, *gb2; // their gradients
    float *hid;                   // (hidden, Bmax*HW) after ReLU (activation)
    float *dhid;                  // (hidden, Bmax*HW) scratch
} FfnConv;

void ffnconv_forward(FfnConv *L, float *y, const float *x, int B);
void ffnconv_backward(FfnConv *L, float *dx, const float *dy, const float *x, int B);

#endif
