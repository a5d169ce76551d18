/* norm.c — batch normalisation over (C, N) with an optional fused ReLU, and plain ReLU.
 * Each channel's N values are contiguous (layout (C, B, H, W)); statistics are accumulated in
 * double inside one thread per channel, so results are reproducible for a fixed thread count. */
#include "layers.h"

#include <math.h>
#include <string.h>

/* Reductions are written with LANES independent float accumulators, flushed into doubles every
 * BLOCK elements: the compiler vectorises them without -ffast-math, the order is fixed (so the
 * result is reproducible), and the double flush keeps long sums accurate. */
#define LANES 16
#define BLOCK 1024

/* The LANES accumulators are held as LANES / 8 vectors of 8 floats (GCC/clang vector extensions):
 * lane j of vector v is accumulator 8v + j, updated with the same float operations in the same
 * order as the scalar form `acc[j] += ...` (the compiler had kept those arrays on the stack and
 * shuffled them); the results are those of the scalar form bit for bit. */
typedef float v8f __attribute__((vector_size(32)));
typedef int v8i __attribute__((vector_size(32)));
#define NV (LANES / 8)
/* The scalar form's vectorised code rounded d * d before adding it (no FMA) in shifted_moments;
 * this keeps the compiler from contracting the vector form into an FMA (x86 with AVX, where the
 * checksums of tests/bitident.txt are recorded). */
#if defined(__GNUC__) && defined(__AVX__)
#define V8_NO_CONTRACT(v) __asm__("" : "+x"(v))
#else
#define V8_NO_CONTRACT(v) (void)0
#endif
/* macros, not functions: a 32-byte vector argument or return value warns (-Wpsabi) where AVX is off */
#define V8_LOAD(p)                     \
    ({                                 \
        v8f v8_;                       \
        memcpy(&v8_, (p), sizeof v8_); \
        v8_;                           \
    })
#define V8_SPLAT(x) ((v8f){(x), (x), (x), (x), (x), (x), (x), (x)})
/* t > 0 ? d : 0, lane by lane */
#define V8_MASK_POS(t, d) ((v8f)((v8i)(d) & ((t) > V8_SPLAT(0.0f))))
/* t += acc[0] + ... + acc[LANES - 1], in that order */
static inline float v8_flush(float t, const v8f *acc) {
    float a[LANES];
    memcpy(a, acc, sizeof a);
    for (int j = 0; j < LANES; j++) t += a[j];
    return t;
}

/* sums of (x - k) and (x - k)^2 in one pass; shifting by a sample value k keeps the
 * difference of large sums away from cancellation */
static void shifted_moments(const float *x, int n, float k, double *sum, double *sumsq) {
    double s = 0.0, q = 0.0;
    const v8f kv = V8_SPLAT(k);
    for (int i0 = 0; i0 < n; i0 += BLOCK) {
        const int i1 = i0 + BLOCK < n ? i0 + BLOCK : n;
        v8f a[NV] = {{0}}, b[NV] = {{0}};
        int i = i0;
        for (; i + LANES <= i1; i += LANES)
            for (int v = 0; v < NV; v++) {
                v8f d = V8_LOAD(x + i + 8 * v) - kv;
                a[v] += d;
                v8f dd = d * d;
                V8_NO_CONTRACT(dd);
                b[v] += dd;
            }
        float ta = 0.0f, tb = 0.0f;
        for (; i < i1; i++) {
            float d = x[i] - k;
            ta += d;
            tb += d * d;
        }
        ta = v8_flush(ta, a);
        tb = v8_flush(tb, b);
        s += ta;
        q += tb;
    }
    *sum = s;
    *sumsq = q;
}

/* sum x[i] */
static __attribute__((unused)) double sum_f(const float *x, int n) {
    double s = 0.0;
    for (int i0 = 0; i0 < n; i0 += BLOCK) {
        const int i1 = i0 + BLOCK < n ? i0 + BLOCK : n;
        float acc[LANES] = {0};
        int i = i0;
        for (; i + LANES <= i1; i += LANES)
            for (int j = 0; j < LANES; j++) acc[j] += x[i + j];
        float t = 0.0f;
        for (; i < i1; i++) t += x[i];
        for (int j = 0; j < LANES; j++) t += acc[j];
        s += t;
    }
    return s;
}

/* sum (x[i] - m)^2 */
static __attribute__((unused)) double sq_dev(const float *x, int n, float m) {
    double s = 0.0;
    for (int i0 = 0; i0 < n; i0 += BLOCK) {
        const int i1 = i0 + BLOCK < n ? i0 + BLOCK : n;
        float acc[LANES] = {0};
        int i = i0;
        for (; i + LANES <= i1; i += LANES)
            for (int j = 0; j < LANES; j++) {
                float d = x[i + j] - m;
                acc[j] += d * d;
            }
        float t = 0.0f;
        for (; i < i1; i++) {
            float d = x[i] - m;
            t += d * d;
        }
        for (int j = 0; j < LANES; j++) t += acc[j];
        s += t;
    }
    return s;
}

/* sum g and sum g * (x - m) * rs, with g = dy masked by y > 0 when relu */
static void bwd_sums(const float *dy, const float *x, const float *y, int n, float m, float rs, int relu, double *sdy,
                     double *sdyx) {
    double s1 = 0.0, s2 = 0.0;
    for (int i0 = 0; i0 < n; i0 += BLOCK) {
        const int i1 = i0 + BLOCK < n ? i0 + BLOCK : n;
        float a1[LANES] = {0}, a2[LANES] = {0};
        int i = i0;
        if (relu) {
            for (; i + LANES <= i1; i += LANES)
                for (int j = 0; j < LANES; j++) {
                    float g = y[i + j] > 0.0f ? dy[i + j] : 0.0f;
                    a1[j] += g;
                    a2[j] += g * ((x[i + j] - m) * rs);
                }
        } else {
            for (; i + LANES <= i1; i += LANES)
                for (int j = 0; j < LANES; j++) {
                    float g = dy[i + j];
                    a1[j] += g;
                    a2[j] += g * ((x[i + j] - m) * rs);
                }
        }
        float t1 = 0.0f, t2 = 0.0f;
        for (; i < i1; i++) {
            float g = (!relu || y[i] > 0.0f) ? dy[i] : 0.0f;
            t1 += g;
            t2 += g * ((x[i] - m) * rs);
        }
        for (int j = 0; j < LANES; j++) {
            t1 += a1[j];
            t2 += a2[j];
        }
        s1 += t1;
        s2 += t2;
    }
    *sdy = s1;
    *sdyx = s2;
}

/* channel c's batch statistics (mean[c], rstd[c], the running statistics) from its N values x;
 * returns the scale and shift of the output, y = relu?(x a + b) */
static inline void bn_channel_stats(const float *x, int N, int c, float *mean, float *rstd, const float *gamma,
                                    const float *beta, float *run_mean, float *run_var, float momentum, float *a_out,
                                    float *b_out) {
    double s, ss;
    shifted_moments(x, N, x[0], &s, &ss); /* one pass: sums of (x - x0) and (x - x0)^2 */
    const double ms = s / N;
    bn_channel_finish(N, x[0] + ms, ss - s * ms, c, mean, rstd, gamma, beta, run_mean, run_var, momentum, a_out,
                      b_out);
}

void bn_forward_train(float *out, float *mean, float *rstd, const float *inp, const float *gamma, const float *beta,
                      float *run_mean, float *run_var, float momentum, int C, int N, int relu) {
#pragma omp parallel for schedule(static)
    for (int c = 0; c < C; c++) {
        const float *x = inp + (long)c * N;
        float *y = out + (long)c * N;
        float a, bb;
        bn_channel_stats(x, N, c, mean, rstd, gamma, beta, run_mean, run_var, momentum, &a, &bb);
        if (relu)
            for (int i = 0; i < N; i++) {
                float t = x[i] * a + bb;
                y[i] = t > 0.0f ? t : 0.0f;
            }
        else
            for (int i = 0; i < N; i++) y[i] = x[i] * a + bb;
    }
}

void bn_stats_train(float *a, float *bb, float *mean, float *rstd, const float *inp, const float *gamma,
                    const float *beta, float *run_mean, float *run_var, float momentum, int C, int N) {
#pragma omp parallel for schedule(static)
    for (int c = 0; c < C; c++)
        bn_channel_stats(inp + (long)c * N, N, c, mean, rstd, gamma, beta, run_mean, run_var, momentum, &a[c], &bb[c]);
}

void bn_scale_shift_eval(float *a, float *bb, const float *gamma, const float *beta, const float *run_mean,
                         const float *run_var, int C) {
    for (int c = 0; c < C; c++) {
        a[c] = gamma[c] / sqrtf(run_var[c] + BN_EPS);
        bb[c] = beta[c] - run_mean[c] * a[c];
    }
}

void bn_forward_eval(float *out, const float *inp, const float *gamma, const float *beta, const float *run_mean,
                     const float *run_var, int C, int N, int relu) {
#pragma omp parallel for schedule(static)
    for (int c = 0; c < C; c++) {
        const float *x = inp + (long)c * N;
        float *y = out + (long)c * N;
        const float a = gamma[c] / sqrtf(run_var[c] + BN_EPS), bb = beta[c] - run_mean[c] * a;
        if (relu)
            for (int i = 0; i < N; i++) {
                float t = x[i] * a + bb;
                y[i] = t > 0.0f ? t : 0.0f;
            }
        else
            for (int i = 0; i < N; i++) y[i] = x[i] * a + bb;
    }
}

void bn_backward(float *dinp, float *dgamma, float *dbeta, const float *dout, const float *out, const float *inp,
                 const float *mean, const float *rstd, const float *gamma, int C, int N, int relu) {
#pragma omp parallel for schedule(static)
    for (int c = 0; c < C; c++) {
        const float *dy = dout + (long)c * N, *x = inp + (long)c * N, *y = out + (long)c * N;
        float *dx = dinp + (long)c * N;
        const float m = mean[c], rs = rstd[c];
        double sdy, sdyx;
        bwd_sums(dy, x, y, N, m, rs, relu, &sdy, &sdyx);
        dgamma[c] += (float)sdyx;
        dbeta[c] += (float)sdy;
        const float k = gamma[c] * rs;
        const float mdy = (float)(sdy / N), mdyx = (float)(sdyx / N);
        if (relu) {
            for (int i = 0; i < N; i++) {
                const float d = dy[i];
                const float g = y[i] > 0.0f ? d : 0.0f;
                dx[i] = k * (g - mdy - (x[i] - m) * rs * mdyx);
            }
        } else {
            for (int i = 0; i < N; i++) dx[i] = k * (dy[i] - mdy - (x[i] - m) * rs * mdyx);
        }
    }
}

/* bn_backward with relu = 1, the ReLU mask recomputed from the input as the forward did
 * (x a + b > 0 with a = gamma rstd, b = beta - mean a, the same float expression), so that the
 * forward output is not read: two streams (dy, x) in the sums pass instead of three. The values
 * are those of bn_backward. */
static void bwd_sums_relu(const float *dy, const float *x, int n, float m, float rs, float a, float bb, double *sdy,
                          double *sdyx) {
    double s1 = 0.0, s2 = 0.0;
    const v8f av = V8_SPLAT(a), bv = V8_SPLAT(bb), mv = V8_SPLAT(m), rv = V8_SPLAT(rs);
    for (int i0 = 0; i0 < n; i0 += BLOCK) {
        const int i1 = i0 + BLOCK < n ? i0 + BLOCK : n;
        v8f a1[NV] = {{0}}, a2[NV] = {{0}};
        int i = i0;
        for (; i + LANES <= i1; i += LANES)
            for (int v = 0; v < NV; v++) {
                const v8f xv = V8_LOAD(x + i + 8 * v);
                const v8f t = xv * av + bv;
                const v8f g = V8_MASK_POS(t, V8_LOAD(dy + i + 8 * v));
                a1[v] += g;
                a2[v] += g * ((xv - mv) * rv);
            }
        float t1 = 0.0f, t2 = 0.0f;
        for (; i < i1; i++) {
            float t = x[i] * a + bb;
            float g = t > 0.0f ? dy[i] : 0.0f;
            t1 += g;
            t2 += g * ((x[i] - m) * rs);
        }
        t1 = v8_flush(t1, a1);
        t2 = v8_flush(t2, a2);
        s1 += t1;
        s2 += t2;
    }
    *sdy = s1;
    *sdyx = s2;
}

/* bn_relu_backward's dx for n values of one channel, from its sums sdy, sdyx over the channel's N */
static inline void bn_relu_dx(float *dx, const float *dy, const float *x, int n, float m, float rs, float a, float bb,
                              float k, float mdy, float mdyx) {
    for (int i = 0; i < n; i++) {
        const float t = x[i] * a + bb, d = dy[i]; /* dy read unconditionally: a select, not a masked load */
        const float g = t > 0.0f ? d : 0.0f;
        dx[i] = k * (g - mdy - (x[i] - m) * rs * mdyx);
    }
}

void bn_relu_backward(float *dinp, float *dgamma, float *dbeta, const float *dout, const float *inp, const float *mean,
                      const float *rstd, const float *gamma, const float *beta, int C, int N) {
#pragma omp parallel for schedule(static)
    for (int c = 0; c < C; c++) {
        const float *dy = dout + (long)c * N, *x = inp + (long)c * N;
        const float m = mean[c], rs = rstd[c];
        const float a = gamma[c] * rs, bb = beta[c] - m * a; /* the forward's scale and shift */
        double sdy, sdyx;
        bwd_sums_relu(dy, x, N, m, rs, a, bb, &sdy, &sdyx);
        dgamma[c] += (float)sdyx;
        dbeta[c] += (float)sdy;
        bn_relu_dx(dinp + (long)c * N, dy, x, N, m, rs, a, bb, gamma[c] * rs, (float)(sdy / N), (float)(sdyx / N));
    }
}

void bn_stats_train_sync(float *a, float *bb, float *mean, float *rstd, const float *inp, const float *gamma,
                         const float *beta, float *run_mean, float *run_var, float momentum, int C, int N,
                         void (*sum)(void *ctx, double *v, long n), void *ctx) {
    double v[2 * C + 1];
#pragma omp parallel for schedule(static)
    for (int c = 0; c < C; c++) { /* this rank's count * mean and centred sum of squares + count * mean^2 */
        double mc, m2;
        bn_chunk_moments(inp + (long)c * N, N, &mc, &m2);
        v[2 * c] = N * mc;
        v[2 * c + 1] = m2 + N * mc * mc;
    }
    v[2 * C] = N;
    sum(ctx, v, 2L * C + 1);
    const double n = v[2 * C];
    for (int c = 0; c < C; c++) {
        const double m = v[2 * c] / n; /* sum (x - m)^2 over the global batch below */
        bn_channel_finish(n, m, v[2 * c + 1] - n * m * m, c, mean, rstd, gamma, beta, run_mean, run_var, momentum,
                          &a[c], &bb[c]);
    }
}

void bn_relu_backward_sync(float *dinp, float *mdy, float *mdyx, float *dgamma, float *dbeta, const float *dout,
                           const float *inp, const float *mean, const float *rstd, const float *gamma,
                           const float *beta, int C, int N, void (*sum)(void *ctx, double *v, long n), void *ctx) {
    double v[2 * C + 1];
#pragma omp parallel for schedule(static)
    for (int c = 0; c < C; c++) {
        const float m = mean[c], rs = rstd[c];
        const float a = gamma[c] * rs, bb = beta[c] - m * a;
        bwd_sums_relu(dout + (long)c * N, inp + (long)c * N, N, m, rs, a, bb, &v[2 * c], &v[2 * c + 1]);
        dgamma[c] += (float)v[2 * c + 1]; /* this rank's part: the gradient mean over ranks adds them */
        dbeta[c] += (float)v[2 * c];
    }
    v[2 * C] = N;
    sum(ctx, v, 2L * C + 1);
    const double n = v[2 * C];
    if (mdy) {
        for (int c = 0; c < C; c++) {
            mdy[c] = (float)(v[2 * c] / n);
            mdyx[c] = (float)(v[2 * c + 1] / n);
        }
    } else {
#pragma omp parallel for schedule(static)
        for (int c = 0; c < C; c++) {
            const float m = mean[c], rs = rstd[c];
            const float a = gamma[c] * rs, bb = beta[c] - m * a;
            const long o = (long)c * N;
            bn_relu_dx(dinp + o, dout + o, inp + o, N, m, rs, a, bb, gamma[c] * rs, (float)(v[2 * c] / n),
                       (float)(v[2 * c + 1] / n));
        }
    }
}

void bn_relu_sums_plane(const float *dy, const float *x, int n, float m, float rs, float a, float bb, double *sdy,
                        double *sdyx) {
    bwd_sums_relu(dy, x, n, m, rs, a, bb, sdy, sdyx);
}

void bn_relu_backward_presummed(float *dinp, float *dgamma, float *dbeta, const float *dout, const float *inp,
                                const float *mean, const float *rstd, const float *gamma, const float *beta,
                                const double *sums, int C, int N) {
#pragma omp parallel for schedule(static)
    for (int c = 0; c < C; c++) {
        const float m = mean[c], rs = rstd[c];
        const float a = gamma[c] * rs, bb = beta[c] - m * a;
        const double sdy = sums[2 * c], sdyx = sums[2 * c + 1];
        dgamma[c] += (float)sdyx;
        dbeta[c] += (float)sdy;
        const long o = (long)c * N;
        bn_relu_dx(dinp + o, dout + o, inp + o, N, m, rs, a, bb, gamma[c] * rs, (float)(sdy / N), (float)(sdyx / N));
    }
}

void bn_relu_backward_sums(float *mdy, float *mdyx, float *dgamma, float *dbeta, const float *dout, const float *inp,
                           const float *mean, const float *rstd, const float *gamma, const float *beta, int C, int N) {
#pragma omp parallel for schedule(static)
    for (int c = 0; c < C; c++) {
        const float m = mean[c], rs = rstd[c];
        const float a = gamma[c] * rs, bb = beta[c] - m * a;
        double sdy, sdyx;
        bwd_sums_relu(dout + (long)c * N, inp + (long)c * N, N, m, rs, a, bb, &sdy, &sdyx);
        dgamma[c] += (float)sdyx;
        dbeta[c] += (float)sdy;
        mdy[c] = (float)(sdy / N);
        mdyx[c] = (float)(sdyx / N);
    }
}

void bn_relu_backward_means(float *mdy, float *mdyx, float *dgamma, float *dbeta, const double *sums, int C, int N) {
    for (int c = 0; c < C; c++) {
        dgamma[c] += (float)sums[2 * c + 1];
        dbeta[c] += (float)sums[2 * c];
        mdy[c] = (float)(sums[2 * c] / N);
        mdyx[c] = (float)(sums[2 * c + 1] / N);
    }
}

void bn_relu_backward_cols(float *dinp, const float *dout, const float *inp, const float *mdy, const float *mdyx,
                           const float *mean, const float *rstd, const float *gamma, const float *beta, int C, long N,
                           long c0, int n) {
    for (int c = 0; c < C; c++) {
        const float m = mean[c], rs = rstd[c];
        const float a = gamma[c] * rs, bb = beta[c] - m * a;
        const long o = (long)c * N + c0;
        bn_relu_dx(dinp + o, dout + o, inp + o, n, m, rs, a, bb, gamma[c] * rs, mdy[c], mdyx[c]);
    }
}

/* ---- building blocks of the chunked convolution + batch norm (conv.c, convbn_*) */

void bn_chunk_moments(const float *x, int n, double *mean, double *m2) {
    double s, q;
    shifted_moments(x, n, x[0], &s, &q);
    const double ms = s / n;
    *mean = x[0] + ms;
    *m2 = q - s * ms;
}

void bn_relu_apply(float *out, const float *z, const float *a, const float *bb, int C, int N) {
#pragma omp parallel for schedule(static)
    for (int c = 0; c < C; c++) {
        const float *x = z + (long)c * N;
        float *y = out + (long)c * N;
        const float av = a[c], bv = bb[c];
        for (int i = 0; i < N; i++) {
            float t = x[i] * av + bv;
            y[i] = t > 0.0f ? t : 0.0f;
        }
    }
}

void relu_forward(float *out, const float *inp, long n) {
#pragma omp parallel for schedule(static) if (n > 65536)
    for (long i = 0; i < n; i++) out[i] = inp[i] > 0.0f ? inp[i] : 0.0f;
}

void relu_backward(float *dinp, const float *dout, const float *out, long n) {
#pragma omp parallel for schedule(static) if (n > 65536)
    for (long i = 0; i < n; i++) {
        const float d = dout[i]; /* read unconditionally: a select, not a masked load */
        dinp[i] = out[i] > 0.0f ? d : 0.0f;
    }
}
