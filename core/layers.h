/* layers.h — the layer kernels of moelab's models: pure forward/backward pairs with every shape
 * in the signature. They never allocate, print or lock.
 *
 * Layout. Convolutional activations are stored channel-major over the whole batch, (C, B, H, W):
 * one contiguous plane of B*H*W values per channel. With that layout a 1x1 convolution is a single
 * SGEMM (OC x C) * (C x B*H*W), batch norm reduces over contiguous memory, and im2col produces
 * (C*9, B*Ho*Wo) directly. Vectors per sample (features, logits) are row-major (B, D).
 * Weights use PyTorch's layouts: conv (OC, C/groups, kh, kw), linear (out, in).
 *
 * Gradient conventions: parameter gradients are ACCUMULATED (+=) so that zeroing all gradients is
 * one memset; input gradients are OVERWRITTEN. A NULL input-gradient pointer skips that work.
 * Padding is always 1 for 3x3 kernels; output size Ho = (H - 1) / stride + 1. */
#ifndef ML_LAYERS_H
#define ML_LAYERS_H

#include <math.h>
#include <stdint.h>

static inline int conv_out_size(int n, int stride) { return (n - 1) / stride + 1; }

/* ---- convolution 3x3, pad 1, any stride, through im2col + SGEMM */
/* col (C*9, B*Ho*Wo) <- inp (C, B, H, W) */
void im2col3x3(float *col, const float *inp, int B, int C, int H, int W, int stride);
/* dinp (C, B, H, W) = scatter of dcol (C*9, B*Ho*Wo) (overwritten) */
void col2im3x3(float *dinp, const float *dcol, int B, int C, int H, int W, int stride);
/* out (OC, B, Ho, Wo) = w (OC, C, 3, 3) * col; col (C*9, B*Ho*Wo) is filled here and kept for
 * the backward pass. */
void conv3x3_forward(float *out, float *col, const float *inp, const float *w, int B, int C, int H, int W, int OC,
                     int stride);
/* dw (OC, C, 3, 3) += dout * col^T; if dinp: dinp (C, B, H, W) = col2im(w^T dout), dcol
 * (C*9, B*Ho*Wo) is scratch. */
void conv3x3_backward(float *dinp, float *dw, float *dcol, const float *dout, const float *col, const float *w, int B,
                      int C, int H, int W, int OC, int stride);

/* ---- depthwise convolution 3x3 (groups = C), pad 1, any stride */
/* out (C, B, Ho, Wo), inp (C, B, H, W), w (C, 1, 3, 3) */
void dwconv3x3_forward(float *out, const float *inp, const float *w, int B, int C, int H, int W, int stride);
/* dw (C, 1, 3, 3) +=; dinp (C, B, H, W) overwritten if non-NULL */
void dwconv3x3_backward(float *dinp, float *dw, const float *dout, const float *inp, const float *w, int B, int C,
                        int H, int W, int stride);

/* The same with the input relu(x a_c + b_c) computed plane by plane from x (C, B, H, W), the
 * producing unit's pre-BN output, instead of read from memory (model.c defers a unit's batch norm
 * + ReLU to the depthwise unit that reads it: its output is never materialised). a, bb (C) are
 * that unit's batch-norm scale and shift (bn_stats_train, bn_scale_shift_eval), applied with
 * bn_forward_train's float expression, so the values are those of dwconv3x3_forward / _backward
 * on bn_forward_train's output (relu = 1), bit for bit. H * W <= DW_BN_MAX_PLANE. */
#define DW_BN_MAX_PLANE 4096
void dwconv3x3_forward_bnin(float *out, const float *x, const float *a, const float *bb, const float *w, int B, int C,
                            int H, int W, int stride);
void dwconv3x3_backward_bnin(float *dinp, float *dw, const float *dout, const float *x, const float *a, const float *bb,
                             const float *w, int B, int C, int H, int W, int stride);
/* dwconv3x3_backward_bnin that also takes the producing unit's batch-norm backward sums while each
 * input-gradient plane is in cache: sums (C, 2) = bn_relu_sums_plane over the planes of dinp
 * (the producer's dL/d(output)) and x, with its mean and rstd (C); dinp must be non-NULL. */
void dwconv3x3_backward_bnin_sums(float *dinp, float *dw, double *sums, const float *dout, const float *x,
                                  const float *a, const float *bb, const float *mean, const float *rstd,
                                  const float *w, int B, int C, int H, int W, int stride);

/* ---- pointwise convolution 1x1: out (OC, N) = w (OC, C) * inp (C, N), N = B*H*W */
void pwconv_forward(float *out, const float *inp, const float *w, int N, int C, int OC);
void pwconv_backward(float *dinp, float *dw, const float *dout, const float *inp, const float *w, int N, int C, int OC);

/* ---- batch norm over (C, N) with optional fused ReLU.
 * Training: batch statistics; saves mean (C) and rstd (C) for the backward and updates the
 * running statistics (momentum m, unbiased variance, as PyTorch). Evaluation: running stats. */
#define BN_EPS 1e-5f
/* Channel c's batch statistics from its n values' mean m and centred sum of squares m2 (every
 * training path ends here: one channel pass, chunked moments, pooled over ranks): mean[c], rstd[c],
 * the output's scale *a and shift *bb (y = relu?(x a + bb)) and, run_mean non-NULL, the running
 * statistics (momentum, unbiased variance). */
static inline void bn_channel_finish(double n, double m, double m2, int c, float *mean, float *rstd,
                                     const float *gamma, const float *beta, float *run_mean, float *run_var,
                                     float momentum, float *a, float *bb) {
    if (m2 < 0.0) m2 = 0.0;
    const double var = m2 / n;
    const float rs = (float)(1.0 / sqrt(var + BN_EPS));
    mean[c] = (float)m;
    rstd[c] = rs;
    *a = gamma[c] * rs;
    *bb = beta[c] - (float)m * *a;
    if (run_mean) {
        const double unbiased = n > 1 ? m2 / (n - 1) : var;
        run_mean[c] = (1.0f - momentum) * run_mean[c] + momentum * (float)m;
        run_var[c] = (1.0f - momentum) * run_var[c] + momentum * (float)unbiased;
    }
}
void bn_forward_train(float *out, float *mean, float *rstd, const float *inp, const float *gamma, const float *beta,
                      float *run_mean, float *run_var, float momentum, int C, int N, int relu);
/* bn_forward_train without the output: the same statistics (mean, rstd, running statistics) and
 * the output's scale a and shift bb (C), y = relu(x a + bb), for a consumer that applies them
 * itself (dwconv3x3_forward_bnin). */
void bn_stats_train(float *a, float *bb, float *mean, float *rstd, const float *inp, const float *gamma,
                    const float *beta, float *run_mean, float *run_var, float momentum, int C, int N);
/* bn_stats_train over a data-parallel batch: every rank's N values of each channel (sum(ctx, v, n):
 * v = the sum over ranks). The moments are pooled exactly (counts, sums and centred sums of squares
 * in double); the running statistics use the unbiased variance of the pooled batch. */
void bn_stats_train_sync(float *a, float *bb, float *mean, float *rstd, const float *inp, const float *gamma,
                         const float *beta, float *run_mean, float *run_var, float momentum, int C, int N,
                         void (*sum)(void *ctx, double *v, long n), void *ctx);
/* bn_relu_backward (dx written, dgamma, dbeta += this rank's sums) and bn_relu_backward_sums (mdy,
 * mdyx) with the means of dy and dy*xhat over every rank's values. mdy / mdyx NULL: dx written;
 * else only the means (dinp unused). */
void bn_relu_backward_sync(float *dinp, float *mdy, float *mdyx, float *dgamma, float *dbeta, const float *dout,
                           const float *inp, const float *mean, const float *rstd, const float *gamma,
                           const float *beta, int C, int N, void (*sum)(void *ctx, double *v, long n), void *ctx);
/* bn_forward_eval's scale and shift: y = relu?(x a + bb) */
void bn_scale_shift_eval(float *a, float *bb, const float *gamma, const float *beta, const float *run_mean,
                         const float *run_var, int C);
void bn_forward_eval(float *out, const float *inp, const float *gamma, const float *beta, const float *run_mean,
                     const float *run_var, int C, int N, int relu);
/* dinp (C, N) overwritten (may alias dout); dgamma, dbeta (C) +=. `out` is the forward output
 * (used for the ReLU mask when relu = 1). */
void bn_backward(float *dinp, float *dgamma, float *dbeta, const float *dout, const float *out, const float *inp,
                 const float *mean, const float *rstd, const float *gamma, int C, int N, int relu);

/* bn_backward with relu = 1 and the same values, without reading the forward output: the ReLU
 * mask is recomputed from inp, gamma and beta (which must be the forward's). */
void bn_relu_backward(float *dinp, float *dgamma, float *dbeta, const float *dout, const float *inp, const float *mean,
                      const float *rstd, const float *gamma, const float *beta, int C, int N);

/* bn_relu_backward in two steps, for a consumer that applies it in column ranges while they are
 * in cache (conv3x3_bn_backward_wgrad): the sums pass (dgamma, dbeta +=; the means mdy, mdyx (C)
 * of the masked gradient and of its product with x-hat), then dinp for the columns [c0, c0 + n)
 * of every channel (one thread; dinp may alias dout). Together: bn_relu_backward's values. */
/* The sums pass of bn_relu_backward for one stretch of n values of a channel (a plane), with the
 * forward's scale and shift a, bb: sdy = sum of the masked gradient, sdyx = its sum with x-hat.
 * For a consumer that has the plane in cache (dwconv3x3_backward_bnin); summed plane after plane
 * in order, planes of 1024 values give bn_relu_backward's sums bit for bit. */
void bn_relu_sums_plane(const float *dy, const float *x, int n, float m, float rs, float a, float bb, double *sdy,
                        double *sdyx);
/* bn_relu_backward with its sums pass already done: sums (C, 2) = (sdy, sdyx) per channel. */
void bn_relu_backward_presummed(float *dinp, float *dgamma, float *dbeta, const float *dout, const float *inp,
                                const float *mean, const float *rstd, const float *gamma, const float *beta,
                                const double *sums, int C, int N);
void bn_relu_backward_sums(float *mdy, float *mdyx, float *dgamma, float *dbeta, const float *dout, const float *inp,
                           const float *mean, const float *rstd, const float *gamma, const float *beta, int C, int N);
/* the same from sums already taken (bn_relu_sums_plane): dgamma, dbeta +=; mdy, mdyx */
void bn_relu_backward_means(float *mdy, float *mdyx, float *dgamma, float *dbeta, const double *sums, int C, int N);
void bn_relu_backward_cols(float *dinp, const float *dout, const float *inp, const float *mdy, const float *mdyx,
                           const float *mean, const float *rstd, const float *gamma, const float *beta, int C, long N,
                           long c0, int n);

/* ---- 3x3 convolution + batch-norm statistics in chunks of samples
 * conv3x3_forward followed by bn_stats_train, processed in chunks of `chunk` samples
 * (conv3x3_bn_chunk: a function of the shape only): each chunk is im2col'ed into its columns of
 * col (kept for conv3x3_backward; col may be NULL where the direct kernel applies and nothing
 * reads col later), multiplied into z, and its batch-norm moments are taken while
 * it is in cache; the chunks' moments are then combined in chunk order (in double). Chunks are
 * spread over the OpenMP threads, each chunk's SGEMM on one thread. The results depend on the
 * chunk partition, not on the number of threads. work: conv3x3_bn_work_doubles(B, OC, chunk).
 * Writes z, col, a, bb, mean, rstd (and the running statistics if run_mean is non-NULL) like
 * conv3x3_forward + bn_stats_train, with the moments summed chunk by chunk. */
int conv3x3_bn_chunk(int C, int OC, int Ho, int Wo);
long conv3x3_bn_work_doubles(int B, int OC, int chunk);
void conv3x3_bn_stats_train(float *z, float *col, float *a, float *bb, float *mean, float *rstd, double *work,
                            const float *inp, const float *w, const float *gamma, const float *beta, float *run_mean,
                            float *run_var, float momentum, int B, int C, int H, int W, int OC, int stride, int chunk);
/* The backward of a 3x3 convolution + batch norm + ReLU whose input gradient is not wanted (the
 * stem): dz (OC, N) holds dL/d(output) on entry and the pre-BN gradient on return (bn_relu_backward's
 * values, with mdy, mdyx from bn_relu_backward_sums); dw (OC, 9C) += dz col^T. Chunks of `chunk`
 * samples (conv3x3_wgrad_chunk) are spread over the threads: each chunk's dz columns are computed
 * and, while they are in cache, its weight gradient on one thread into its part
 * (conv3x3_wgrad_part_floats): by a direct kernel where conv3x3_direct_ok (col unused, may be
 * NULL), else by an SGEMM of its im2col columns (written to col). The parts are summed in chunk
 * order (in double): the result depends on the chunk partition, not on the number of threads. */
int conv3x3_wgrad_chunk(int C, int OC, int H, int W, int stride);
long conv3x3_wgrad_part_floats(int B, int C, int OC, int chunk);
void conv3x3_bn_backward_wgrad(float *dz, float *dw, float *col, float *part, const float *z, const float *inp,
                               const float *mdy, const float *mdyx, const float *mean, const float *rstd,
                               const float *gamma, const float *beta, int B, int C, int H, int W, int OC, int stride,
                               int chunk);
/* ---- direct 3x3 convolution for few input channels (the stem): stride 1, pad 1, C <= 4,
 * W <= 256 (conv3x3_direct_ok). z (OC, B, H, W) = conv(inp), each output summed over the
 * taps (c, ky, kx) in order. conv3x3_bn_stats_train uses it where it applies. */
int conv3x3_direct_ok(int C, int H, int W, int stride);
void conv3x3_direct_forward(float *z, const float *inp, const float *w, int B, int C, int H, int W, int OC);
/* building block (norm.c): the mean and the sum of squared deviations of x[0..n) */
void bn_chunk_moments(const float *x, int n, double *mean, double *m2);
/* out (C, N) = relu(z a_c + bb_c), bn_forward_train's output from bn_stats_train's a, bb */
void bn_relu_apply(float *out, const float *z, const float *a, const float *bb, int C, int N);

/* ---- ReLU, element-wise over n values (in place allowed) */
void relu_forward(float *out, const float *inp, long n);
/* dinp = dout * (out > 0) (in place allowed) */
void relu_backward(float *dinp, const float *dout, const float *out, long n);

/* ---- global average pool: out (B, C) row-major <- inp (C, B, HW) */
void gap_forward(float *out, const float *inp, int B, int C, int HW);
void gap_backward(float *dinp, const float *dout, int B, int C, int HW);

/* ---- linear: out (B, OC) = inp (B, IC) w^T + bias; w (OC, IC); bias (OC) may be NULL */
void linear_forward(float *out, const float *inp, const float *w, const float *bias, int B, int IC, int OC);
/* dw (OC, IC) +=, dbias (OC) += (if non-NULL), dinp (B, IC) overwritten if non-NULL */
void linear_backward(float *dinp, float *dw, float *dbias, const float *dout, const float *inp, const float *w, int B,
                     int IC, int OC);

/* The MLP epilogues. out (B, OC) = relu(out + bias) in place (after linear_forward with a NULL
 * bias: the same values as linear_forward with the bias, then relu_forward).
 * dout (B, OC) masked in place by out > 0 (out: the forward's ReLU output), and dbias (OC) += its
 * column sums if non-NULL (each column summed over the rows in order, starting from 0, then
 * added: linear_backward's dbias values). */
void bias_relu_forward(float *out, const float *bias, int B, int OC);
void relu_bias_backward(float *dout, float *dbias, const float *out, int B, int OC);

/* ---- softmax cross-entropy. probs (B, K) <- softmax(logits); returns the mean loss over B and
 * counts correct argmax predictions into *correct (if non-NULL). Labels in [0, K). */
double xent_forward(float *probs, const float *logits, const int32_t *labels, int B, int K, int *correct);
/* dlogits (B, K) = (probs - onehot(labels)) * scale (scale = 1/B for the mean loss) */
void xent_backward(float *dlogits, const float *probs, const int32_t *labels, int B, int K, float scale);

#endif
