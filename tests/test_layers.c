/* test_layers.c — every layer's backward against central finite differences, plus a whole-model
 * check (dw and std backbones, dense head) and forward sanity checks against direct formulas.
 * Loss for a layer: L = sum(out * R) for a fixed random R, so dL/dout = R. */
#include "core/layers.h"
#include "core/model.h"
#include "core/rng.h"
#include "gradcheck.h"

#include <omp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#include "unit_mask.h"

static Rng rng;
static float *randv(long n, float scale) {
    float *v = malloc(sizeof(float) * n);
    for (long i = 0; i < n; i++) v[i] = scale * rng_normal(&rng);
    return v;
}
static double dot(const float *a, const float *b, long n) {
    double s = 0;
    for (long i = 0; i < n; i++) s += (double)a[i] * b[i];
    return s;
}

/* ---------------------------------------------------------------- conv3x3 */
typedef struct {
    int B, C, H, W, OC, s;
    float *x, *w, *out, *col, *R;
} ConvCtx;
static long conv_outn(ConvCtx *c) { return (long)c->OC * c->B * conv_out_size(c->H, c->s) * conv_out_size(c->W, c->s); }
static double conv_loss(void *p) {
    ConvCtx *c = p;
    conv3x3_forward(c->out, c->col, c->x, c->w, c->B, c->C, c->H, c->W, c->OC, c->s);
    return dot(c->out, c->R, conv_outn(c));
}
static void test_conv3x3(int s, int H, int W) {
    ConvCtx c = {.B = 2, .C = 3, .H = H, .W = W, .OC = 4, .s = s};
    long nx = (long)c.C * c.B * H * W, nw = c.OC * c.C * 9, no = conv_outn(&c);
    long ncol = (long)c.C * 9 * c.B * conv_out_size(H, s) * conv_out_size(W, s);
    c.x = randv(nx, 1);
    c.w = randv(nw, 0.5f);
    c.out = randv(no, 1);
    c.col = randv(ncol, 1);
    c.R = randv(no, 1);
    float *dx = calloc(nx, 4), *dw = calloc(nw, 4), *dcol = calloc(ncol, 4);
    conv_loss(&c);
    conv3x3_backward(dx, dw, dcol, c.R, c.col, c.w, c.B, c.C, H, W, c.OC, s);
    char name[64];
    snprintf(name, sizeof name, "conv3x3 s%d %dx%d dinp", s, H, W);
    fd_check(name, c.x, dx, nx, conv_loss, NULL, &c, 1e-2f, 400, 1e-3);
    snprintf(name, sizeof name, "conv3x3 s%d %dx%d dw", s, H, W);
    fd_check(name, c.w, dw, nw, conv_loss, NULL, &c, 1e-2f, 400, 1e-3);
    /* forward against the direct formula at one output position */
    conv_loss(&c);
    const int Ho = conv_out_size(H, s), Wo = conv_out_size(W, s);
    double maxd = 0;
    for (int o = 0; o < c.OC; o++)
        for (int b = 0; b < c.B; b++)
            for (int oy = 0; oy < Ho; oy++)
                for (int ox = 0; ox < Wo; ox++) {
                    double ref = 0;
                    for (int ci = 0; ci < c.C; ci++)
                        for (int ky = 0; ky < 3; ky++)
                            for (int kx = 0; kx < 3; kx++) {
                                int iy = oy * s - 1 + ky, ix = ox * s - 1 + kx;
                                if (iy < 0 || iy >= H || ix < 0 || ix >= W) continue;
                                ref += (double)c.w[((o * c.C + ci) * 3 + ky) * 3 + kx] *
                                       c.x[(((long)ci * c.B + b) * H + iy) * W + ix];
                            }
                    double got = c.out[(((long)o * c.B + b) * Ho + oy) * Wo + ox];
                    if (fabs(got - ref) > maxd) maxd = fabs(got - ref);
                }
    CHECK(maxd < 1e-4, "conv3x3 s%d %dx%d forward matches the direct sum (max diff %.2e)", s, H, W, maxd);
    free(c.x);
    free(c.w);
    free(c.out);
    free(c.col);
    free(c.R);
    free(dx);
    free(dw);
    free(dcol);
}

/* The stem's forward: the direct convolution against im2col + SGEMM, and conv3x3_bn_stats_train
 * (chunks of samples, moments combined in chunk order) against conv3x3_forward + bn_stats_train:
 * the same values up to float rounding, the same im2col columns exactly, and bit-identical results
 * for 1 and 3 threads (the chunk partition does not depend on the thread count). */
static void test_conv_bn_chunks(int B, int C, int H, int W, int OC, int stride, int chunk) {
    const int Ho = conv_out_size(H, stride), Wo = conv_out_size(W, stride), K = 9 * C;
    const long nx = (long)C * B * H * W, N = (long)B * Ho * Wo;
    float *x = randv(nx, 1), *w = randv((long)OC * K, 0.5f), *g = randv(OC, 0.3f), *be = randv(OC, 0.3f);
    for (int c = 0; c < OC; c++) g[c] += 1.0f;
    for (long i = 0; i < nx; i++) x[i] += 0.5f; /* a mean away from 0: the moments' combination matters */
    float *z1 = calloc(OC * N, 4), *z2 = calloc(OC * N, 4), *z3 = calloc(OC * N, 4), *col1 = calloc(K * N, 4),
          *col2 = calloc(K * N, 4), *col3 = calloc(K * N, 4);
    float *st = calloc(12L * OC, 4); /* a, bb, mean, rstd, running mean and variance, for 1 and 2 */
    float *a1 = st, *b1 = st + OC, *m1 = st + 2 * OC, *r1 = st + 3 * OC, *rm1 = st + 4 * OC, *rv1 = st + 5 * OC;
    float *a2 = st + 6 * OC, *b2 = st + 7 * OC, *m2 = st + 8 * OC, *r2 = st + 9 * OC, *rm2 = st + 10 * OC,
          *rv2 = st + 11 * OC;
    for (int c = 0; c < OC; c++) rv1[c] = rv2[c] = 1.0f;
    double *work = calloc(conv3x3_bn_work_doubles(B, OC, chunk), sizeof(double));
    conv3x3_forward(z1, col1, x, w, B, C, H, W, OC, stride);
    bn_stats_train(a1, b1, m1, r1, z1, g, be, rm1, rv1, 0.1f, OC, (int)N);
    const int saved = omp_get_max_threads();
    omp_set_num_threads(1);
    conv3x3_bn_stats_train(z2, col2, a2, b2, m2, r2, work, x, w, g, be, rm2, rv2, 0.1f, B, C, H, W, OC, stride, chunk);
    float *st3 = malloc(12L * OC * 4);
    memcpy(st3, st, 12L * OC * 4);
    for (int c = 0; c < OC; c++) st3[10 * OC + c] = 0.0f, st3[11 * OC + c] = 1.0f;
    omp_set_num_threads(3);
    conv3x3_bn_stats_train(z3, col3, st3 + 6 * OC, st3 + 7 * OC, st3 + 8 * OC, st3 + 9 * OC, work, x, w, g, be,
                           st3 + 10 * OC, st3 + 11 * OC, 0.1f, B, C, H, W, OC, stride, chunk);
    omp_set_num_threads(saved);
    double dz = 0, zmax = 0, dm = 0, dr = 0, drv = 0;
    for (long i = 0; i < OC * N; i++) {
        dz = fmax(dz, fabs((double)z1[i] - z2[i]));
        zmax = fmax(zmax, fabs(z1[i]));
    }
    for (int c = 0; c < OC; c++) {
        dm = fmax(dm, fabs((double)m1[c] - m2[c]) / (fabs(m1[c]) + 1e-3));
        dr = fmax(dr, fabs((double)r1[c] - r2[c]) / r1[c]);
        drv = fmax(drv, fabs((double)rv1[c] - rv2[c]) / rv1[c]);
    }
    const char *path = conv3x3_direct_ok(C, H, W, stride) ? "direct" : "SGEMM";
    CHECK(!memcmp(col1, col2, 4 * K * N), "conv3x3_bn_stats_train %dx%dx%d s%d (%s, chunk %d): im2col columns exact", H,
          W, C, stride, path, chunk);
    CHECK(dz <= 1e-5 * zmax, "conv3x3_bn_stats_train %dx%dx%d s%d (%s): z matches im2col + SGEMM (%.1e of %.1e)", H, W,
          C, stride, path, dz, zmax);
    CHECK(dm < 1e-4 && dr < 1e-5 && drv < 1e-5,
          "conv3x3_bn_stats_train %dx%dx%d s%d: chunked moments match (mean %.1e, rstd %.1e, running var %.1e)", H, W,
          C, stride, dm, dr, drv);
    CHECK(!memcmp(z2, z3, 4 * OC * N) && !memcmp(st + 6 * OC, st3 + 6 * OC, 6L * OC * 4),
          "conv3x3_bn_stats_train %dx%dx%d s%d: 1 and 3 threads give the same bits", H, W, C, stride);
    if (conv3x3_direct_ok(C, H, W, stride)) {
        memset(z3, 0, 4 * OC * N);
        conv3x3_direct_forward(z3, x, w, B, C, H, W, OC);
        CHECK(!memcmp(z2, z3, 4 * OC * N), "conv3x3_direct_forward %dx%dx%d: the chunked forward's z, bit for bit", H,
              W, C);
    }
    free(x);
    free(w);
    free(g);
    free(be);
    free(z1);
    free(z2);
    free(z3);
    free(col1);
    free(col2);
    free(col3);
    free(st);
    free(st3);
    free(work);
}

/* The stem's backward: bn_relu_backward_sums + conv3x3_bn_backward_wgrad (chunks of samples, the
 * weight gradient by the direct kernel or by an SGEMM per chunk) against bn_relu_backward +
 * conv3x3_backward: the same pre-BN gradient and BN gradients bit for bit, the same weight gradient
 * up to float rounding, and the same bits at 1 and 3 threads. */
static void test_wgrad(int B, int C, int H, int W, int OC, int stride) {
    const int Ho = conv_out_size(H, stride), Wo = conv_out_size(W, stride), K = 9 * C;
    const long nx = (long)C * B * H * W, N = (long)B * Ho * Wo;
    const int chunk = conv3x3_wgrad_chunk(C, OC, H, W, stride);
    float *x = randv(nx, 1), *z = randv(OC * N, 1), *dy = randv(OC * N, 1), *g = randv(OC, 0.3f),
          *be = randv(OC, 0.3f), *mean = randv(OC, 0.2f), *rstd = randv(OC, 0.3f);
    for (int c = 0; c < OC; c++) g[c] += 1.0f, rstd[c] += 1.0f;
    float *dz1 = malloc(4 * OC * N), *dz2 = malloc(4 * OC * N), *col = calloc(K * N, 4);
    float *part = calloc(conv3x3_wgrad_part_floats(B, C, OC, chunk), 4);
    float *st = calloc(OC * (3L * K + 8), 4); /* dw x 3, dgamma, dbeta x 2, mdy, mdyx x 2 */
    float *dw1 = st, *dw2 = st + OC * K, *dw3 = st + 2L * OC * K, *bg = st + 3L * OC * K;
    memcpy(dz1, dy, 4 * OC * N);
    bn_relu_backward(dz1, bg, bg + OC, dz1, z, mean, rstd, g, be, OC, (int)N);
    im2col3x3(col, x, B, C, H, W, stride);
    conv3x3_backward(NULL, dw1, NULL, dz1, col, NULL, B, C, H, W, OC, stride);
    const int saved = omp_get_max_threads();
    for (int r = 0; r < 2; r++) {
        omp_set_num_threads(r ? 3 : 1);
        float *dw = r ? dw3 : dw2, *m = bg + (4 + 2 * r) * OC;
        memcpy(dz2, dy, 4 * OC * N);
        bn_relu_backward_sums(m, m + OC, bg + (2 + 0) * OC, bg + 3 * OC, dz2, z, mean, rstd, g, be, OC, (int)N);
        if (r) memset(bg + 2 * OC, 0, 8 * OC); /* the second run's BN gradients again from 0 */
        if (r) bn_relu_backward_sums(m, m + OC, bg + 2 * OC, bg + 3 * OC, dz2, z, mean, rstd, g, be, OC, (int)N);
        conv3x3_bn_backward_wgrad(dz2, dw, col, part, z, x, m, m + OC, mean, rstd, g, be, B, C, H, W, OC, stride,
                                  chunk);
    }
    omp_set_num_threads(saved);
    double e = 0, mx = 0;
    for (long i = 0; i < (long)OC * K; i++) {
        e = fmax(e, fabs((double)dw1[i] - dw2[i]));
        mx = fmax(mx, fabs(dw1[i]));
    }
    const char *path = conv3x3_direct_ok(C, H, W, stride) ? "direct" : "SGEMM";
    CHECK(!memcmp(dz1, dz2, 4 * OC * N) && !memcmp(bg, bg + 2 * OC, 8 * OC),
          "conv3x3_bn_backward_wgrad %dx%dx%d OC %d s%d (%s, chunk %d): pre-BN and BN gradients exact", H, W, C, OC,
          stride, path, chunk);
    CHECK(mx > 0 && e <= 2e-5 * mx, "conv3x3_bn_backward_wgrad %dx%dx%d OC %d: weight gradient matches (%.1e of %.1e)",
          H, W, C, OC, e, mx);
    CHECK(!memcmp(dw2, dw3, 4L * OC * K), "conv3x3_bn_backward_wgrad %dx%dx%d OC %d: 1 and 3 threads, the same bits", H,
          W, C, OC);
    free(x);
    free(z);
    free(dy);
    free(g);
    free(be);
    free(mean);
    free(rstd);
    free(dz1);
    free(dz2);
    free(col);
    free(part);
    free(st);
}

/* ---------------------------------------------------------------- depthwise */
typedef struct {
    int B, C, H, W, s;
    float *x, *w, *out, *R;
} DwCtx;
static long dw_outn(DwCtx *c) { return (long)c->C * c->B * conv_out_size(c->H, c->s) * conv_out_size(c->W, c->s); }
static double dw_loss(void *p) {
    DwCtx *c = p;
    dwconv3x3_forward(c->out, c->x, c->w, c->B, c->C, c->H, c->W, c->s);
    return dot(c->out, c->R, dw_outn(c));
}
static void test_dwconv(int s, int H, int W, int B) {
    DwCtx c = {.B = B, .C = 4, .H = H, .W = W, .s = s};
    long nx = (long)c.C * c.B * H * W, nw = c.C * 9, no = dw_outn(&c);
    c.x = randv(nx, 1);
    c.w = randv(nw, 0.5f);
    c.out = randv(no, 1);
    c.R = randv(no, 1);
    float *dx = calloc(nx, 4), *dw = calloc(nw, 4);
    dw_loss(&c);
    dwconv3x3_backward(dx, dw, c.R, c.x, c.w, c.B, c.C, H, W, s);
    char name[64];
    snprintf(name, sizeof name, "dwconv3x3 s%d %dx%d B%d dinp", s, H, W, B);
    fd_check(name, c.x, dx, nx, dw_loss, NULL, &c, 1e-2f, 400, 1e-3);
    snprintf(name, sizeof name, "dwconv3x3 s%d %dx%d B%d dw", s, H, W, B);
    fd_check(name, c.w, dw, nw, dw_loss, NULL, &c, 1e-2f, 400, 1e-3);
    free(c.x);
    free(c.w);
    free(c.out);
    free(c.R);
    free(dx);
    free(dw);
}

/* The depthwise kernels with the producing unit's batch norm + ReLU applied plane by plane
 * (dwconv3x3_*_bnin, model.c's deferred output) give the values of the kernels on the output of
 * bn_forward_train, bit for bit, and bn_stats_train the same statistics. */
static void test_dw_bnin(int s, int H, int W, int B) {
    const int C = 5;
    const long nx = (long)C * B * H * W, no = (long)C * B * conv_out_size(H, s) * conv_out_size(W, s);
    float *z = randv(nx, 1), *w = randv(C * 9, 0.5f), *g = randv(C, 0.3f), *be = randv(C, 0.3f), *R = randv(no, 1);
    for (int c = 0; c < C; c++) g[c] += 1.0f;
    float *xin = calloc(nx, 4), *o1 = calloc(no, 4), *o2 = calloc(no, 4), *d1 = calloc(nx, 4), *d2 = calloc(nx, 4);
    float m1[5], r1[5], m2[5], r2[5], a[5], bb[5], rm1[5] = {0}, rv1[5] = {1, 1, 1, 1, 1}, rm2[5] = {0},
                                                   rv2[5] = {1, 1, 1, 1, 1}, w1[45] = {0}, w2[45] = {0};
    bn_forward_train(xin, m1, r1, z, g, be, rm1, rv1, 0.1f, C, B * H * W, 1);
    bn_stats_train(a, bb, m2, r2, z, g, be, rm2, rv2, 0.1f, C, B * H * W);
    dwconv3x3_forward(o1, xin, w, B, C, H, W, s);
    dwconv3x3_forward_bnin(o2, z, a, bb, w, B, C, H, W, s);
    dwconv3x3_backward(d1, w1, R, xin, w, B, C, H, W, s);
    dwconv3x3_backward_bnin(d2, w2, R, z, a, bb, w, B, C, H, W, s);
    int nz = 0;
    for (long i = 0; i < nx; i++) nz += xin[i] == 0.0f;
    CHECK(nz > nx / 5 && nz < nx * 4 / 5, "dw bnin s%d %dx%d: the ReLU cuts part of the input (%d of %ld zero)", s, H,
          W, nz, nx);
    CHECK(!memcmp(m1, m2, sizeof m1) && !memcmp(r1, r2, sizeof r1) && !memcmp(rm1, rm2, sizeof rm1) &&
              !memcmp(rv1, rv2, sizeof rv1),
          "bn_stats_train s%d %dx%d: bn_forward_train's statistics, bit for bit", s, H, W);
    CHECK(!memcmp(o1, o2, 4 * no) && !memcmp(d1, d2, 4 * nx) && !memcmp(w1, w2, sizeof w1),
          "dwconv3x3 bnin s%d %dx%d: output, input and weight gradients of the materialised input, bit for bit", s, H,
          W);
    /* the producer's batch-norm sums taken plane by plane inside the depthwise backward */
    double sums[10];
    float w3[45] = {0}, gs[10] = {0}, gr[10] = {0}, mdy[5], mdyx[5];
    memset(d1, 0, 4 * nx);
    dwconv3x3_backward_bnin_sums(d1, w3, sums, R, z, a, bb, m2, r2, w, B, C, H, W, s);
    bn_relu_backward_means(mdy, mdyx, gs, gs + 5, sums, C, B * H * W);
    bn_relu_backward_sums(mdy, mdyx, gr, gr + 5, d2, z, m2, r2, g, be, C, B * H * W);
    double e = 0, mx = 0;
    for (int i = 0; i < 10; i++) {
        e = fmax(e, fabs((double)gs[i] - gr[i]));
        mx = fmax(mx, fabs(gr[i]));
    }
    CHECK(!memcmp(d1, d2, 4 * nx) && !memcmp(w2, w3, sizeof w2) && e <= 1e-5 * mx && mx > 0,
          "dwconv3x3 bnin s%d %dx%d with the producer's sums: same gradients, dgamma/dbeta as the sums pass (%.1e of "
          "%.1e)",
          s, H, W, e, mx);
    if (H * W == 1024)
        CHECK(!memcmp(gs, gr, sizeof gs), "dwconv3x3 bnin %dx%d (planes of 1024): the producer's sums bit for bit", H, W);
    free(z);
    free(w);
    free(g);
    free(be);
    free(R);
    free(xin);
    free(o1);
    free(o2);
    free(d1);
    free(d2);
}

/* ---------------------------------------------------------------- pointwise */
typedef struct {
    int N, C, OC;
    float *x, *w, *out, *R;
} PwCtx;
static double pw_loss(void *p) {
    PwCtx *c = p;
    pwconv_forward(c->out, c->x, c->w, c->N, c->C, c->OC);
    return dot(c->out, c->R, (long)c->OC * c->N);
}
static void test_pwconv(void) {
    PwCtx c = {.N = 50, .C = 6, .OC = 5};
    c.x = randv(c.N * c.C, 1);
    c.w = randv(c.OC * c.C, 0.5f);
    c.out = randv(c.OC * c.N, 1);
    c.R = randv(c.OC * c.N, 1);
    float *dx = calloc(c.N * c.C, 4), *dw = calloc(c.OC * c.C, 4);
    pw_loss(&c);
    pwconv_backward(dx, dw, c.R, c.x, c.w, c.N, c.C, c.OC);
    fd_check("pwconv1x1 dinp", c.x, dx, c.N * c.C, pw_loss, NULL, &c, 1e-2f, 400, 1e-3);
    fd_check("pwconv1x1 dw", c.w, dw, c.OC * c.C, pw_loss, NULL, &c, 1e-2f, 400, 1e-3);
    free(c.x);
    free(c.w);
    free(c.out);
    free(c.R);
    free(dx);
    free(dw);
}

/* ---------------------------------------------------------------- batch norm */
typedef struct {
    int C, N, relu;
    float *x, *g, *b, *out, *mean, *rstd, *rm, *rv, *R;
} BnCtx;
static double bn_loss(void *p) {
    BnCtx *c = p;
    bn_forward_train(c->out, c->mean, c->rstd, c->x, c->g, c->b, NULL, NULL, 0.1f, c->C, c->N, c->relu);
    return dot(c->out, c->R, (long)c->C * c->N);
}
static uint64_t bn_sig(void *p) {
    BnCtx *c = p;
    return c->relu ? fd_hash_mask(c->out, (long)c->C * c->N) : 0;
}
static void test_bn(int relu) {
    BnCtx c = {.C = 3, .N = 40, .relu = relu};
    long n = (long)c.C * c.N;
    c.x = randv(n, 2);
    c.g = randv(c.C, 1);
    c.b = randv(c.C, 0.5f);
    c.out = randv(n, 1);
    c.mean = calloc(c.C, 4);
    c.rstd = calloc(c.C, 4);
    c.R = randv(n, 1);
    for (int i = 0; i < c.C; i++) c.x[i * c.N] += 3.0f; /* a skewed channel */
    float *dx = calloc(n, 4), *dg = calloc(c.C, 4), *db = calloc(c.C, 4);
    bn_loss(&c);
    bn_backward(dx, dg, db, c.R, c.out, c.x, c.mean, c.rstd, c.g, c.C, c.N, relu);
    char name[64];
    snprintf(name, sizeof name, "batchnorm%s dinp", relu ? "+relu" : "");
    fd_check(name, c.x, dx, n, bn_loss, bn_sig, &c, 5e-3f, 400, 1e-3);
    snprintf(name, sizeof name, "batchnorm%s dgamma", relu ? "+relu" : "");
    fd_check(name, c.g, dg, c.C, bn_loss, bn_sig, &c, 2e-3f, 400, 1e-3);
    snprintf(name, sizeof name, "batchnorm%s dbeta", relu ? "+relu" : "");
    fd_check(name, c.b, db, c.C, bn_loss, bn_sig, &c, 2e-3f, 400, 1e-3);
    /* in-place backward gives the same result */
    float *dy = malloc(sizeof(float) * n);
    memcpy(dy, c.R, sizeof(float) * n);
    float dg2[3] = {0}, db2[3] = {0};
    bn_loss(&c);
    bn_backward(dy, dg2, db2, dy, c.out, c.x, c.mean, c.rstd, c.g, c.C, c.N, relu);
    bn_backward(dx, dg, db, c.R, c.out, c.x, c.mean, c.rstd, c.g, c.C, c.N, relu);
    CHECK(memcmp(dy, dx, sizeof(float) * n) == 0, "batchnorm%s backward in place == out of place", relu ? "+relu" : "");
    if (relu) {
        /* bn_relu_backward (mask recomputed from x) gives bn_backward's values bit for bit, here and
         * on a long channel that takes the vectorised blocks */
        float dg3[3] = {0}, db3[3] = {0}, *dx3 = malloc(sizeof(float) * n);
        float dg1[3] = {0}, db1[3] = {0};
        bn_backward(dx, dg1, db1, c.R, c.out, c.x, c.mean, c.rstd, c.g, c.C, c.N, 1);
        bn_relu_backward(dx3, dg3, db3, c.R, c.x, c.mean, c.rstd, c.g, c.b, c.C, c.N);
        int same =
            !memcmp(dx3, dx, sizeof(float) * n) && !memcmp(dg1, dg3, sizeof dg3) && !memcmp(db1, db3, sizeof db3);
        const int C2 = 2, N2 = 5000;
        float *x2 = randv((long)C2 * N2, 1.5f), *y2 = malloc(sizeof(float) * C2 * N2), *r2 = randv((long)C2 * N2, 1);
        float *d2a = malloc(sizeof(float) * C2 * N2), *d2b = malloc(sizeof(float) * C2 * N2);
        float g2[2] = {0.7f, -1.3f}, b2[2] = {0.2f, 0.4f}, m2[2], s2[2], ga[2] = {0}, gb[2] = {0}, ba[2] = {0},
              bb[2] = {0};
        bn_forward_train(y2, m2, s2, x2, g2, b2, NULL, NULL, 0.1f, C2, N2, 1);
        bn_backward(d2a, ga, ba, r2, y2, x2, m2, s2, g2, C2, N2, 1);
        bn_relu_backward(d2b, gb, bb, r2, x2, m2, s2, g2, b2, C2, N2);
        same = same && !memcmp(d2a, d2b, sizeof(float) * C2 * N2) && !memcmp(ga, gb, sizeof ga) &&
               !memcmp(ba, bb, sizeof ba);
        CHECK(same, "bn_relu_backward == bn_backward(relu = 1), bit for bit (3x40 and 2x5000)");
        free(dx3);
        free(x2);
        free(y2);
        free(r2);
        free(d2a);
        free(d2b);
    }
    /* training output is normalised per channel (no relu): mean ~ beta, std ~ |gamma| */
    if (!relu) {
        double m = 0, v = 0;
        for (int i = 0; i < c.N; i++) m += c.out[i];
        m /= c.N;
        for (int i = 0; i < c.N; i++) v += (c.out[i] - m) * (c.out[i] - m);
        v /= c.N;
        CHECK(fabs(m - c.b[0]) < 1e-4 && fabs(sqrt(v) - fabs(c.g[0])) < 1e-3,
              "batchnorm output mean %.5f (beta %.5f), std %.5f (|gamma| %.5f)", m, c.b[0], sqrt(v), fabs(c.g[0]));
        /* running statistics: one update from (0, 1) with momentum 1 gives the batch mean and unbiased var */
        float rm[3] = {0}, rv[3] = {1, 1, 1};
        bn_forward_train(c.out, c.mean, c.rstd, c.x, c.g, c.b, rm, rv, 1.0f, c.C, c.N, 0);
        double bm = 0, bv = 0;
        for (int i = 0; i < c.N; i++) bm += c.x[i];
        bm /= c.N;
        for (int i = 0; i < c.N; i++) bv += (c.x[i] - bm) * (c.x[i] - bm);
        bv /= (c.N - 1);
        CHECK(fabs(rm[0] - bm) < 1e-5 && fabs(rv[0] - bv) < 1e-4,
              "running mean/var = batch mean %.4f / unbiased var %.4f", bm, bv);
        /* eval mode with running stats equal to the batch's (biased) stats reproduces training output */
        float *o2 = malloc(sizeof(float) * n);
        for (int ch = 0; ch < c.C; ch++) {
            rm[ch] = c.mean[ch];
            rv[ch] = 1.0f / (c.rstd[ch] * c.rstd[ch]) - BN_EPS;
        }
        bn_forward_eval(o2, c.x, c.g, c.b, rm, rv, c.C, c.N, 0);
        double md = 0;
        for (long i = 0; i < n; i++) md = fmax(md, fabs(o2[i] - c.out[i]));
        CHECK(md < 1e-3, "batchnorm eval with running = batch statistics matches training (max diff %.2e)", md);
        free(o2);
    }
    free(c.x);
    free(c.g);
    free(c.b);
    free(c.out);
    free(c.mean);
    free(c.rstd);
    free(c.R);
    free(dx);
    free(dg);
    free(db);
    free(dy);
}

/* ---------------------------------------------------------------- relu, gap, linear, xent */
typedef struct {
    long n;
    float *x, *out, *R;
} ReluCtx;
static double relu_loss(void *p) {
    ReluCtx *c = p;
    relu_forward(c->out, c->x, c->n);
    return dot(c->out, c->R, c->n);
}
static uint64_t relu_sig(void *p) {
    ReluCtx *c = p;
    return fd_hash_mask(c->out, c->n);
}
static void test_relu(void) {
    ReluCtx c = {.n = 200};
    c.x = randv(c.n, 1);
    c.out = randv(c.n, 1);
    c.R = randv(c.n, 1);
    float *dx = calloc(c.n, 4);
    relu_loss(&c);
    relu_backward(dx, c.R, c.out, c.n);
    fd_check("relu dinp", c.x, dx, c.n, relu_loss, relu_sig, &c, 1e-3f, 400, 1e-3);
    free(c.x);
    free(c.out);
    free(c.R);
    free(dx);
}

typedef struct {
    int B, C, HW;
    float *x, *out, *R;
} GapCtx;
static double gap_loss(void *p) {
    GapCtx *c = p;
    gap_forward(c->out, c->x, c->B, c->C, c->HW);
    return dot(c->out, c->R, (long)c->B * c->C);
}
static void test_gap(void) {
    GapCtx c = {.B = 3, .C = 4, .HW = 9};
    long n = (long)c.B * c.C * c.HW;
    c.x = randv(n, 1);
    c.out = randv(c.B * c.C, 1);
    c.R = randv(c.B * c.C, 1);
    float *dx = calloc(n, 4);
    gap_loss(&c);
    gap_backward(dx, c.R, c.B, c.C, c.HW);
    fd_check("global avg pool dinp", c.x, dx, n, gap_loss, NULL, &c, 1e-2f, 400, 1e-3);
    free(c.x);
    free(c.out);
    free(c.R);
    free(dx);
}

typedef struct {
    int B, IC, OC;
    float *x, *w, *b, *out, *R;
} LinCtx;
static double lin_loss(void *p) {
    LinCtx *c = p;
    linear_forward(c->out, c->x, c->w, c->b, c->B, c->IC, c->OC);
    return dot(c->out, c->R, (long)c->B * c->OC);
}
static void test_linear(void) {
    LinCtx c = {.B = 5, .IC = 7, .OC = 6};
    c.x = randv(c.B * c.IC, 1);
    c.w = randv(c.OC * c.IC, 0.5f);
    c.b = randv(c.OC, 1);
    c.out = randv(c.B * c.OC, 1);
    c.R = randv(c.B * c.OC, 1);
    float *dx = calloc(c.B * c.IC, 4), *dw = calloc(c.OC * c.IC, 4), *db = calloc(c.OC, 4);
    lin_loss(&c);
    linear_backward(dx, dw, db, c.R, c.x, c.w, c.B, c.IC, c.OC);
    fd_check("linear dinp", c.x, dx, c.B * c.IC, lin_loss, NULL, &c, 1e-2f, 400, 1e-3);
    fd_check("linear dw", c.w, dw, c.OC * c.IC, lin_loss, NULL, &c, 1e-2f, 400, 1e-3);
    fd_check("linear dbias", c.b, db, c.OC, lin_loss, NULL, &c, 1e-2f, 400, 1e-3);
    free(c.x);
    free(c.w);
    free(c.b);
    free(c.out);
    free(c.R);
    free(dx);
    free(dw);
    free(db);
}

typedef struct {
    int B, K;
    float *z, *p;
    int32_t *y;
} XentCtx;
static double xent_loss(void *p) {
    XentCtx *c = p;
    return xent_forward(c->p, c->z, c->y, c->B, c->K, NULL);
}
static void test_xent(void) {
    XentCtx c = {.B = 4, .K = 5};
    c.z = randv(c.B * c.K, 2);
    c.p = calloc(c.B * c.K, 4);
    int32_t y[4] = {0, 3, 4, 1};
    c.y = y;
    float *dz = calloc(c.B * c.K, 4);
    double L = xent_loss(&c);
    xent_backward(dz, c.p, c.y, c.B, c.K, 1.0f / c.B);
    fd_check("softmax cross-entropy dlogits", c.z, dz, c.B * c.K, xent_loss, NULL, &c, 1e-2f, 400, 1e-3);
    double ref = 0;
    for (int b = 0; b < c.B; b++) {
        double s = 0;
        for (int j = 0; j < c.K; j++) s += exp(c.z[b * c.K + j]);
        ref += log(s) - c.z[b * c.K + y[b]];
    }
    CHECK(fabs(L - ref / c.B) < 1e-5, "cross-entropy value %.6f == log-sum-exp reference %.6f", L, ref / c.B);
    float big[3] = {1000.0f, 0.0f, -1000.0f};
    float pb[3];
    int32_t yb[1] = {1};
    double Lb = xent_forward(pb, big, yb, 1, 3, NULL);
    CHECK(isfinite(Lb) && fabs(Lb - 1000.0) < 1e-3, "cross-entropy is stable for logits of 1000 (%.3f)", Lb);
    free(c.z);
    free(c.p);
    free(dz);
}

/* ---------------------------------------------------------------- whole model */
typedef struct {
    Model *m;
    int B;
    int32_t *y;
} ModelCtx;
static double model_loss_ctx(void *p) {
    ModelCtx *c = p;
    model_forward(c->m, c->B, 1, 1.0f, NULL);
    return model_loss(c->m, c->y, c->B, NULL);
}

static uint64_t model_sig(void *p) {
    ModelCtx *c = p;
    Model *m = c->m;
    uint64_t h = 0;
    for (int i = 0; i < m->nunits; i++) {
        const Unit *u = &m->units[i];
        h = h * 31 + unit_mask_hash(m, u, c->B);
    }
    if (m->cfg.head.kind == HEAD_DENSE)
        h = h * 31 + fd_hash_mask(m->act.buf + m->act.h1, (long)c->B * m->cfg.head.k * m->cfg.head.h);
    return h;
}
static void test_model(BackboneKind bk, int in_c, int H) {
    ModelConfig cfg;
    model_config_defaults(&cfg);
    cfg.in_c = in_c;
    cfg.in_h = H;
    cfg.in_w = H;
    cfg.classes = 4;
    cfg.backbone = bk;
    cfg.width = 0.125f; /* c0 = 4, d = 32 */
    cfg.head.kind = HEAD_DENSE;
    cfg.head.k = 2;
    cfg.head.h = 8;
    cfg.batch = 4;
    Model m;
    if (model_init(&m, &cfg) != ML_OK) {
        CHECK(0, "model_init: %s", ml_last_error());
        return;
    }
    Rng r;
    rng_seed(&r, 7);
    model_init_params(&m, &r);
    /* move batch-norm affine parameters away from their init (gamma = 1, beta = 0), where a
     * BN -> ReLU -> per-channel conv -> BN chain is exactly scale-invariant and some gradients
     * are exactly zero */
    for (int i = 0; i < m.nunits; i++) {
        const Unit *u = &m.units[i];
        for (int ch = 0; ch < u->OC; ch++) {
            m.param[m.params[u->gamma].off + ch] = 1.0f + 0.3f * rng_normal(&r);
            m.param[m.params[u->beta].off + ch] = 0.3f * rng_normal(&r);
        }
    }
    float *x = model_input(&m);
    for (long i = 0; i < (long)in_c * 4 * H * H; i++) x[i] = rng_normal(&r);
    int32_t y[4] = {0, 1, 2, 3};
    ModelCtx c = {.m = &m, .B = 4, .y = y};
    model_loss_ctx(&c);
    model_zero_grad(&m);
    model_backward(&m, y, 4);
    float *g = malloc(sizeof(float) * m.n_param);
    memcpy(g, m.grad, sizeof(float) * m.n_param);
    for (int t = 0; t < m.nparams; t++) {
        char name[128];
        snprintf(name, sizeof name, "model %s %dx%dx%d %s", backbone_name(bk), H, H, in_c, m.params[t].name);
        fd_check(name, m.param + m.params[t].off, g + m.params[t].off, m.params[t].n, model_loss_ctx, model_sig, &c,
                 4e-3f, 30, 1e-2); /* wiring check: float noise through ~10 layers */
    }
    free(g);
    model_free(&m);
}

/* Issue 13 item 11: the out-of-memory message of model_init said "0.0 MiB" (the size was read
 * after model_free cleared the model). A model whose activations cannot be allocated (1024x1024x4
 * inputs, batch 65536: over 1 TiB for the input alone) must fail with ML_ERR_NOMEM and the real
 * size. Run in a child with an address-space limit so that no allocation can succeed by
 * overcommit and then be touched. */
#ifdef __SANITIZE_ADDRESS__
/* ASan reports a too-large allocation instead of returning NULL unless told otherwise */
const char *__asan_default_options(void);
const char *__asan_default_options(void) { return "allocator_may_return_null=1"; }
#endif
static void test_model_oom(void) {
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
#ifndef __SANITIZE_ADDRESS__
        struct rlimit rl = {.rlim_cur = 8UL << 30, .rlim_max = 8UL << 30};
        setrlimit(RLIMIT_AS, &rl);
#endif
        ModelConfig cfg;
        model_config_defaults(&cfg);
        cfg.in_c = 4;
        cfg.in_h = 1024;
        cfg.in_w = 1024;
        cfg.batch = 65536;
        Model m;
        ml_status st = model_init(&m, &cfg);
        const char *msg = ml_last_error();
        const char *p = strstr(msg, "model (");
        double mib = p ? strtod(p + 7, NULL) : 0.0;
        int ok = st == ML_ERR_NOMEM && mib > 1048576.0 && strstr(msg, "MiB") != NULL;
        printf("%s  model_init of a 1024x1024x4 batch-65536 model: ML_ERR_NOMEM with its size: \"%s\"\n",
               ok ? "PASS" : "FAIL", msg);
        fflush(stdout);
        _exit(ok ? 0 : 1);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    CHECK(pid > 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0, "out-of-memory child exited cleanly (status %d)",
          status);
}

/* bias_relu_forward and relu_bias_backward against the separate passes they replace (the same
 * values bit for bit), on a shape that spans several column blocks */
static void test_mlp_epilogues(void) {
    const int B = 37, OC = 600;
    const long n = (long)B * OC;
    float *z = randv(n, 1), *bias = randv(OC, 0.5f), *d = randv(n, 1);
    float *y1 = malloc(sizeof(float) * n), *y2 = malloc(sizeof(float) * n);
    float *d1 = malloc(sizeof(float) * n), *d2 = malloc(sizeof(float) * n);
    float *db1 = calloc(OC, 4), *db2 = calloc(OC, 4), *dw = calloc((long)OC * B, 4), *eye = calloc((long)B * B, 4);
    memcpy(y1, z, sizeof(float) * n);
    for (int b = 0; b < B; b++)
        for (int o = 0; o < OC; o++) y1[(long)b * OC + o] += bias[o];
    relu_forward(y1, y1, n);
    memcpy(y2, z, sizeof(float) * n);
    bias_relu_forward(y2, bias, B, OC);
    CHECK(!memcmp(y1, y2, sizeof(float) * n), "bias_relu_forward == bias add then relu_forward (bit for bit)");
    relu_backward(d1, d, y1, n);
    /* linear_backward's dbias on the masked gradient: identity input so that only dbias matters */
    for (int b = 0; b < B; b++) eye[(long)b * B + b] = 1.0f;
    linear_backward(NULL, dw, db1, d1, eye, NULL, B, B, OC);
    memcpy(d2, d, sizeof(float) * n);
    relu_bias_backward(d2, db2, y2, B, OC);
    CHECK(!memcmp(d1, d2, sizeof(float) * n) && !memcmp(db1, db2, sizeof(float) * OC),
          "relu_bias_backward == relu_backward then linear_backward's dbias (bit for bit)");
    free(z);
    free(bias);
    free(d);
    free(y1);
    free(y2);
    free(d1);
    free(d2);
    free(db1);
    free(db2);
    free(dw);
    free(eye);
}

int main(void) {
    rng_seed(&rng, 12345);
    test_conv3x3(1, 6, 6);
    test_conv3x3(2, 7, 7);
    test_conv3x3(2, 8, 5);
    test_dwconv(1, 6, 6, 3);
    test_dwconv(2, 7, 7, 3);
    test_dwconv(2, 8, 6, 3);
    test_dwconv(2, 8, 8, 3); /* the size-specialised stride-2 kernels */
    test_dwconv(2, 16, 16, 3);
    test_dwconv(2, 14, 14, 3);
    test_dwconv(2, 7, 7, 10);  /* 8 samples at a time: a whole group and a partial one */
    test_dwconv(2, 40, 40, 2); /* wider than the 8-sample kernels: the per-plane kernels */
    test_conv_bn_chunks(6, 3, 32, 32, 32, 1, 1); /* the stem: direct, a chunk per sample */
    test_conv_bn_chunks(5, 3, 8, 24, 6, 1, 2);   /* direct: 3 column vectors, OC not a multiple of 4 */
    test_conv_bn_chunks(5, 4, 16, 8, 9, 1, 3);   /* direct: 1 column vector, a short last chunk */
    test_conv_bn_chunks(4, 1, 28, 28, 32, 1, 1); /* direct: Fashion-MNIST's stem, a partial last vector */
    test_conv_bn_chunks(4, 3, 9, 5, 8, 1, 2);    /* direct: W < 8 */
    test_conv_bn_chunks(3, 2, 7, 300, 5, 1, 2);  /* SGEMM: W beyond the direct kernel's rows */
    test_conv_bn_chunks(5, 8, 12, 12, 16, 2, 2); /* SGEMM: stride 2, C > 4 */
    test_wgrad(6, 3, 32, 32, 32, 1);  /* the stem: direct, 8 rows per block */
    test_wgrad(5, 1, 28, 28, 32, 1);  /* Fashion-MNIST's stem: a partial last vector */
    test_wgrad(3, 3, 13, 16, 6, 1);   /* a short last row block, OC not a multiple of 4 */
    test_wgrad(2, 4, 5, 256, 9, 1);   /* the widest direct rows: one row per block */
    test_wgrad(3, 2, 7, 5, 8, 1);     /* W < 8 */
    test_wgrad(2, 2, 6, 300, 5, 1);   /* SGEMM: W beyond the direct kernel's rows */
    test_wgrad(40, 8, 12, 12, 16, 2); /* SGEMM: stride 2, C > 4, two chunks */
    test_dw_bnin(1, 6, 6, 3);
    test_dw_bnin(2, 4, 4, 3);
    test_dw_bnin(2, 7, 7, 3);
    test_dw_bnin(2, 16, 16, 3);
    test_dw_bnin(2, 32, 32, 3);
    test_dw_bnin(2, 32, 32, 19); /* 8 samples at a time: two whole groups and a partial one */
    test_dw_bnin(2, 7, 7, 11);
    test_dw_bnin(2, 64, 64, 3); /* planes wider than the 8-sample kernels: the per-plane kernels */
    test_pwconv();
    test_bn(0);
    test_bn(1);
    test_relu();
    test_gap();
    test_linear();
    test_mlp_epilogues();
    test_xent();
    test_model(BACKBONE_DW, 1, 5);
    test_model(BACKBONE_DW, 3, 8); /* the direct stem, deferred batch norms */
    test_model(BACKBONE_DW, 1, 7); /* the direct stem with a partial vector of columns */
    test_model(BACKBONE_STD, 3, 6);
    test_model_oom();
    printf("%d failure(s)\n", n_failed);
    return n_failed ? 1 : 0;
}
