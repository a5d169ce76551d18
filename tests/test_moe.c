/* test_moe.c — MoE head, temperature schedules and routing statistics.
 *
 * Finite-difference gradient checks of every MoE head (central differences on the float forward,
 * loss accumulated in double), routing invariants over many random batches (capacity, k-major
 * priority, batch/gate order, dropped pairs, ties, determinism, batch independence at eval, the
 * bias update), schedule formulas, the collapse flag, mutual information and rho.
 * Plain main: prints one line per check, returns 0 if all pass, 1 otherwise. */
#include "core/moe.h"
#include "core/rng.h"
#include "core/routestats.h"
#include "core/tau.h"

#include <math.h>
#include <omp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

static void fill_uniform(float *a, size_t n, float lo, float hi, Rng *r) {
    for (size_t i = 0; i < n; i++) a[i] = lo + (hi - lo) * rng_uniform(r);
}

// ---------------------------------------------------------------- a head with its parameters

typedef struct {
    MoeConfig cfg;
    MoeHead m;
    int Bmax;
    size_t np;
    float *pbuf, *gbuf; // (np) parameters and gradients
    MoeParams p, g;
} Bench;

// Parameters scaled so that no ReLU pre-activation is near zero: |W1 x| <= d * (0.24 / d) * max|x|
// is far below |b1| >= 0.5 for |x| <= 1 (also for softmoe-batch slot inputs, convex mixtures of x).
static void bench_init(Bench *t, const MoeConfig *c, int Bmax, uint64_t seed) {
    memset(t, 0, sizeof *t);
    t->cfg = *c;
    t->Bmax = Bmax;
    ml_status st = moe_init(&t->m, c, Bmax);
    if (st != ML_OK) {
        printf("FAIL: moe_init: %s\n", ml_last_error());
        exit(1);
    }
    t->np = moe_param_count(c, Bmax);
    t->pbuf = calloc(t->np, sizeof(float));
    t->gbuf = calloc(t->np, sizeof(float));
    moe_params_point(&t->p, t->pbuf, c, Bmax);
    moe_params_point(&t->g, t->gbuf, c, Bmax);
    Rng r;
    rng_seed(&r, seed);
    size_t S = (size_t)t->m.S, d = (size_t)c->d, h = (size_t)c->h, E = (size_t)c->E;
    fill_uniform(t->p.router, S * d, -0.5f, 0.5f, &r);
    fill_uniform(t->p.w1, E * h * d, -0.24f / (float)d, 0.24f / (float)d, &r);
    for (size_t i = 0; i < E * h; i++) t->p.b1[i] = (rng_below(&r, 2) ? 1.0f : -1.0f) * (0.5f + 0.5f * rng_uniform(&r));
    fill_uniform(t->p.w2, E * d * h, -0.3f, 0.3f, &r);
    fill_uniform(t->p.b2, E * d, -0.3f, 0.3f, &r);
}

static void bench_free(Bench *t) {
    moe_free(&t->m);
    free(t->pbuf);
    free(t->gbuf);
}

// ---------------------------------------------------------------- finite differences

// L = sum(y * R) + alpha * L_aux + beta * L_z, in double.
static double fd_loss(Bench *t, float *y, const float *x, const float *R, int B, float tau) {
    moe_forward(&t->m, y, x, &t->p, B, tau, 1, NULL);
    double L = 0.0;
    for (size_t i = 0; i < (size_t)B * t->cfg.d; i++) L += (double)y[i] * R[i];
    return L + t->cfg.alpha * t->m.stats.l_aux + t->cfg.beta * t->m.stats.l_z;
}

// Checks `n_coords` random coordinates of tensor v (n) against the analytic gradient an (n).
static void fd_tensor(Bench *t, const char *label, const char *name, float *v, const float *an, size_t n, float *y,
                      const float *x, const float *R, int B, float tau, Rng *r) {
    const int n_coords = 20;
    const float eps = 0.1f;
    double worst = 0.0, gmax = 0.0;
    for (size_t i = 0; i < n; i++)
        if (fabs(an[i]) > gmax) gmax = fabs(an[i]);
    int bad = 0;
    for (int q = 0; q < n_coords; q++) {
        size_t i = rng_below(r, (uint32_t)n);
        float v0 = v[i];
        v[i] = v0 + eps;
        double lp = fd_loss(t, y, x, R, B, tau);
        v[i] = v0 - eps;
        double lm = fd_loss(t, y, x, R, B, tau);
        v[i] = v0 + 0.5f * eps;
        double lp2 = fd_loss(t, y, x, R, B, tau);
        v[i] = v0 - 0.5f * eps;
        double lm2 = fd_loss(t, y, x, R, B, tau);
        v[i] = v0;
        // Richardson: cancels the eps^2 term of the central difference
        double d1 = (lp - lm) / (2.0 * eps), d2 = (lp2 - lm2) / (double)eps;
        double fd = (4.0 * d2 - d1) / 3.0;
        double err = fabs(fd - an[i]) / fmax(fmax(fabs(fd), fabs(an[i])), 0.1 * gmax + 1e-6);
        if (err > worst) worst = err;
        bad += err > 1e-3;
    }
    check(bad == 0 && gmax > 0.0, "%s: d%s finite differences (%d coords, worst rel err %.2e, max |g| %.3g)", label,
          name, n_coords, worst, gmax);
}

// Full gradient check of one configuration. prepare: bias values etc. are set by the caller on
// t->m before the call. The first forward (noise on, train capacity) fixes the selection.
static void fd_check(const char *label, const MoeConfig *c, int B, float tau, const float *bias, uint64_t seed) {
    Bench t;
    bench_init(&t, c, B, seed);
    if (bias) memcpy(t.m.bias, bias, (size_t)c->E * sizeof(float));
    Rng r;
    rng_seed(&r, seed ^ 0x5eed);
    size_t nx = (size_t)B * c->d;
    float *x = malloc(nx * sizeof(float)), *y = malloc(nx * sizeof(float));
    float *R = malloc(nx * sizeof(float)), *dx = malloc(nx * sizeof(float));
    fill_uniform(x, nx, -1.0f, 1.0f, &r);
    fill_uniform(R, nx, -1.0f, 1.0f, &r);
    moe_forward(&t.m, y, x, &t.p, B, tau, 1, &r); // selects with Gumbel noise
    if (c->kind == HEAD_MOE)
        check(t.m.stats.drop_frac > 0.0 && t.m.stats.drop_frac < 1.0, "%s: capacity drops some pairs (%.2f)", label,
              t.m.stats.drop_frac);
    t.m.freeze_selection = 1;
    fd_loss(&t, y, x, R, B, tau);
    // gradients accumulate: start from a constant and subtract it; dx is overwritten; the
    // experts' gradients are written whole (moe.h), so the constant must be gone from them
    const float g0 = 0.25f;
    for (size_t i = 0; i < t.np; i++) t.gbuf[i] = g0;
    for (size_t i = 0; i < nx; i++) dx[i] = NAN;
    moe_backward(&t.m, dx, &t.g, R, x, &t.p, B);
    size_t S = (size_t)t.m.S, d = (size_t)c->d, h = (size_t)c->h, E = (size_t)c->E;
    char *written = calloc(t.np, 1);
    {
        const float *ex[4] = {t.g.w1, t.g.b1, t.g.w2, t.g.b2};
        const size_t en[4] = {E * h * d, E * h, E * d * h, E * d};
        for (int q = 0; q < 4; q++) memset(written + (ex[q] - t.gbuf), 1, en[q]);
    }
    for (size_t i = 0; i < t.np; i++)
        if (!written[i]) t.gbuf[i] -= g0;
    free(written);
    fd_tensor(&t, label, "x", x, dx, nx, y, x, R, B, tau, &r);
    fd_tensor(&t, label, "router", t.p.router, t.g.router, S * d, y, x, R, B, tau, &r);
    fd_tensor(&t, label, "w1", t.p.w1, t.g.w1, E * h * d, y, x, R, B, tau, &r);
    fd_tensor(&t, label, "b1", t.p.b1, t.g.b1, E * h, y, x, R, B, tau, &r);
    fd_tensor(&t, label, "w2", t.p.w2, t.g.w2, E * d * h, y, x, R, B, tau, &r);
    fd_tensor(&t, label, "b2", t.p.b2, t.g.b2, E * d, y, x, R, B, tau, &r);
    free(x);
    free(y);
    free(R);
    free(dx);
    bench_free(&t);
}

// Directional derivative of L over ALL tensors at once (x and every parameter) along a random
// direction, at a size where the OpenMP paths run: checks the whole backward in one number.
static void dir_check(const char *label, const MoeConfig *c, int B, float tau, uint64_t seed) {
    Bench t;
    bench_init(&t, c, B, seed);
    Rng r;
    rng_seed(&r, seed ^ 0xd1ec);
    size_t nx = (size_t)B * c->d;
    float *x = malloc(nx * sizeof(float)), *y = malloc(nx * sizeof(float)), *R = malloc(nx * sizeof(float));
    float *dx = malloc(nx * sizeof(float)), *vx = malloc(nx * sizeof(float)), *vp = malloc(t.np * sizeof(float));
    float *x0 = malloc(nx * sizeof(float)), *p0 = malloc(t.np * sizeof(float));
    fill_uniform(x, nx, -1.0f, 1.0f, &r);
    fill_uniform(R, nx, -1.0f, 1.0f, &r);
    fill_uniform(vx, nx, -1.0f, 1.0f, &r);
    fill_uniform(vp, t.np, -1.0f, 1.0f, &r);
    moe_forward(&t.m, y, x, &t.p, B, tau, 1, &r);
    t.m.freeze_selection = 1;
    fd_loss(&t, y, x, R, B, tau);
    moe_backward(&t.m, dx, &t.g, R, x, &t.p, B);
    double an = 0.0;
    for (size_t i = 0; i < nx; i++) an += (double)dx[i] * vx[i];
    for (size_t i = 0; i < t.np; i++) an += (double)t.gbuf[i] * vp[i];
    memcpy(x0, x, nx * sizeof(float));
    memcpy(p0, t.pbuf, t.np * sizeof(float));
    double L[4];
    const double steps[4] = {4e-3, -4e-3, 2e-3, -2e-3};
    for (int q = 0; q < 4; q++) {
        for (size_t i = 0; i < nx; i++) x[i] = x0[i] + (float)steps[q] * vx[i];
        for (size_t i = 0; i < t.np; i++) t.pbuf[i] = p0[i] + (float)steps[q] * vp[i];
        L[q] = fd_loss(&t, y, x, R, B, tau);
    }
    double d1 = (L[0] - L[1]) / 8e-3, d2 = (L[2] - L[3]) / 4e-3, fd = (4.0 * d2 - d1) / 3.0;
    double err = fabs(fd - an) / fmax(fabs(an), 1e-12);
    check(err < 1e-3, "%s (B %d, d %d, h %d): directional derivative over all tensors, rel err %.2e", label, B, c->d,
          c->h, err);
    free(x);
    free(y);
    free(R);
    free(dx);
    free(vx);
    free(vp);
    free(x0);
    free(p0);
    bench_free(&t);
}

static void test_gradients(void) {
    MoeConfig c;
    moe_config_defaults(&c);
    c.d = 8;
    c.h = 16;
    c.E = 4;
    c.k = 2;
    c.cf = 0.5f;
    c.alpha = 0.3f;
    c.beta = 0.2f;
    float bias[4] = {0.3f, -0.2f, 0.1f, -0.4f};

    c.renorm = 1;
    c.bias_mode = BIAS_LOGITS;
    c.priority = PRIORITY_GATE;
    fd_check("moe renorm bias=logits prio=gate", &c, 12, 0.7f, bias, 11);

    c.renorm = 0;
    c.bias_mode = BIAS_SELECT;
    c.priority = PRIORITY_BATCH;
    c.cf = 0.75f;
    fd_check("moe no-renorm bias=select", &c, 12, 1.3f, bias, 12);

    c.renorm = 1;
    c.k = 3;
    c.bias_mode = BIAS_LOGITS;
    fd_check("moe k=3 renorm bias=logits", &c, 10, 0.9f, bias, 13);

    /* k = 1 under --renorm auto: the gate is the softmax probability p_e, whose gradient reaches
     * the router through the softmax (the path a renormalised k = 1 gate does not have) */
    c.renorm = MOE_RENORM_AUTO;
    c.k = 1;
    c.cf = 0.75f;
    fd_check("moe k=1 renorm=auto (softmax gate) bias=logits", &c, 12, 0.9f, bias, 15);
    c.alpha = 0.0f;
    c.beta = 0.0f;
    fd_check("moe k=1 renorm=auto, task loss only", &c, 12, 1.1f, bias, 16);
    c.alpha = 0.3f;
    c.beta = 0.2f;
    c.cf = 0.5f;
    c.renorm = 1;

    c.k = 2;
    c.kind = HEAD_SOFTMOE_SAMPLE;
    fd_check("softmoe-sample bias=logits", &c, 10, 0.8f, bias, 14);

    c.kind = HEAD_SOFTMOE_BATCH;
    c.bias_mode = BIAS_NONE;
    fd_check("softmoe-batch", &c, 10, 0.9f, NULL, 15);

    // odd hidden width (issue 13 item 10): E*h = 12 floats, not a multiple of the 16-float
    // tensor alignment, so b1, w2 and b2 sit after padding in the flat parameter buffer
    MoeConfig odd = c;
    odd.h = 3;
    odd.cf = 0.5f;
    odd.kind = HEAD_MOE;
    odd.bias_mode = BIAS_LOGITS;
    odd.priority = PRIORITY_GATE;
    fd_check("moe h=3", &odd, 12, 0.7f, bias, 21);
    odd.kind = HEAD_SOFTMOE_SAMPLE;
    fd_check("softmoe-sample h=3", &odd, 10, 0.8f, bias, 22);
    odd.kind = HEAD_SOFTMOE_BATCH;
    odd.bias_mode = BIAS_NONE;
    fd_check("softmoe-batch h=3", &odd, 10, 0.9f, NULL, 23);
    odd.E = 3; // router 3 x 8 = 24 floats: w1 starts after padding too
    odd.k = 2;
    odd.h = 15;
    odd.cf = 1.0f;
    odd.kind = HEAD_MOE;
    dir_check("moe E=3 h=15", &odd, 24, 1.0f, 24);
    odd.kind = HEAD_SOFTMOE_SAMPLE;
    dir_check("softmoe-sample E=3 h=15", &odd, 24, 1.0f, 25);
    odd.kind = HEAD_SOFTMOE_BATCH;
    dir_check("softmoe-batch E=3 h=15", &odd, 24, 1.0f, 26);

    MoeConfig big = c;
    big.d = 128;
    big.h = 512;
    big.E = 4;
    big.k = 2;
    big.cf = 1.0f;
    big.kind = HEAD_MOE;
    big.bias_mode = BIAS_NONE;
    dir_check("moe large", &big, 96, 1.0f, 16);
    big.kind = HEAD_SOFTMOE_SAMPLE;
    dir_check("softmoe-sample large", &big, 96, 1.0f, 17);
    big.kind = HEAD_SOFTMOE_BATCH;
    dir_check("softmoe-batch large", &big, 96, 1.0f, 18);
}

// ---------------------------------------------------------------- routing invariants

// Reference y of one sample in double from the head's selection and keep mask.
static double ref_max_err(Bench *t, const float *y, const float *x, int B, float tau, int *n_empty_exact) {
    const MoeConfig *c = &t->cfg;
    int E = c->E, k = c->k, d = c->d, h = c->h;
    double worst = 0.0;
    *n_empty_exact = 0;
    for (int b = 0; b < B; b++) {
        const float *xb = x + (size_t)b * d;
        double z[MOE_MAX_EXPERTS], pr[MOE_MAX_EXPERTS], mx = -1e300, s = 0.0;
        for (int e = 0; e < E; e++) {
            z[e] = 0.0;
            for (int i = 0; i < d; i++) z[e] += (double)t->p.router[(size_t)e * d + i] * xb[i];
            z[e] = (z[e] + (c->bias_mode == BIAS_LOGITS ? t->m.bias[e] : 0.0)) / tau;
            mx = fmax(mx, z[e]);
        }
        for (int e = 0; e < E; e++) s += pr[e] = exp(z[e] - mx);
        for (int e = 0; e < E; e++) pr[e] /= s;
        const int *sel = t->m.sel + (size_t)b * k;
        double gs = 0.0;
        for (int r = 0; r < k; r++) gs += pr[sel[r]];
        double out[256];
        for (int i = 0; i < d; i++) out[i] = xb[i];
        int nk = 0;
        for (int r = 0; r < k; r++) {
            if (t->m.row[(size_t)b * k + r] < 0) continue;
            nk++;
            int e = sel[r];
            double g = c->renorm ? pr[e] / gs : pr[e];
            double hid[1024];
            for (int j = 0; j < h; j++) {
                double a = t->p.b1[(size_t)e * h + j];
                for (int i = 0; i < d; i++) a += (double)t->p.w1[((size_t)e * h + j) * d + i] * xb[i];
                hid[j] = a > 0.0 ? a : 0.0;
            }
            for (int i = 0; i < d; i++) {
                double a = t->p.b2[(size_t)e * d + i];
                for (int j = 0; j < h; j++) a += (double)t->p.w2[((size_t)e * d + i) * h + j] * hid[j];
                out[i] += g * a;
            }
        }
        if (nk == 0 && memcmp(y + (size_t)b * d, xb, (size_t)d * sizeof(float)) == 0) (*n_empty_exact)++;
        for (int i = 0; i < d; i++) worst = fmax(worst, fabs(out[i] - y[(size_t)b * d + i]) / (1.0 + fabs(out[i])));
    }
    return worst;
}

// Independent capacity assignment from the head's selection and gates: returns the number of
// pairs whose keep decision differs from the head's.
static int ref_capacity_mismatch(Bench *t, int B, int C) {
    const MoeConfig *c = &t->cfg;
    int E = c->E, k = c->k, bad = 0;
    int order[1024];
    for (int i = 0; i < B; i++) order[i] = i;
    if (c->priority == PRIORITY_GATE) { // insertion sort: descending key, ties by index
        for (int i = 1; i < B; i++) {
            int v = order[i], j = i;
            float kv = t->m.p[(size_t)v * E + t->m.sel[(size_t)v * k]];
            while (j > 0) {
                int u = order[j - 1];
                float ku = t->m.p[(size_t)u * E + t->m.sel[(size_t)u * k]];
                if (ku > kv || (ku == kv && u < v)) break;
                order[j] = u;
                j--;
            }
            order[j] = v;
        }
    }
    int used[MOE_MAX_EXPERTS] = {0};
    for (int r = 0; r < k; r++)
        for (int i = 0; i < B; i++) {
            int b = order[i], e = t->m.sel[(size_t)b * k + r];
            int keep = used[e] < C;
            used[e] += keep;
            bad += keep != (t->m.row[(size_t)b * k + r] >= 0);
        }
    return bad;
}

static void test_invariants(void) {
    const int Es[] = {4, 8}, ks[] = {1, 2, 3};
    const float cfs[] = {0.5f, 1.0f, 1.25f};
    int runs = 0, over_cap = 0, kmajor = 0, cap_mismatch = 0, dup = 0, empty_total = 0, empty_exact = 0;
    double worst = 0.0;
    long dropped_pairs = 0;
    for (int ie = 0; ie < 2; ie++)
        for (int ik = 0; ik < 3; ik++)
            for (int ic = 0; ic < 3; ic++)
                for (int prio = 0; prio < 2; prio++)
                    for (int seed = 0; seed < 6; seed++) {
                        MoeConfig c;
                        moe_config_defaults(&c);
                        c.d = 12;
                        c.h = 10;
                        c.E = Es[ie];
                        c.k = ks[ik];
                        c.cf = cfs[ic];
                        c.priority = prio ? PRIORITY_GATE : PRIORITY_BATCH;
                        c.renorm = seed & 1;
                        c.bias_mode = seed % 3 == 2 ? BIAS_LOGITS : BIAS_NONE;
                        int B = 16 + 7 * seed;
                        Bench t;
                        bench_init(&t, &c, B, 100 + (uint64_t)seed);
                        Rng r;
                        rng_seed(&r, 1000 + (uint64_t)runs);
                        for (int e = 0; e < c.E; e++) t.m.bias[e] = 0.2f * (rng_uniform(&r) - 0.5f);
                        float *x = malloc((size_t)B * c.d * sizeof(float));
                        float *y = malloc((size_t)B * c.d * sizeof(float));
                        fill_uniform(x, (size_t)B * c.d, -1.0f, 1.0f, &r);
                        moe_forward(&t.m, y, x, &t.p, B, 0.8f, 1, &r);
                        runs++;
                        int C = t.m.stats.capacity;
                        int cnt[MOE_MAX_EXPERTS] = {0};
                        for (int b = 0; b < B; b++) {
                            uint64_t seen = 0;
                            for (int q = 0; q < c.k; q++) {
                                int e = t.m.sel[(size_t)b * c.k + q];
                                dup += (seen >> e) & 1;
                                seen |= (uint64_t)1 << e;
                                if (t.m.row[(size_t)b * c.k + q] >= 0) cnt[e]++;
                                else dropped_pairs++;
                            }
                        }
                        for (int e = 0; e < c.E; e++) over_cap += cnt[e] > C || cnt[e] != t.m.stats.kept[e];
                        // k-major: a kept rank-r pair of e implies every lower-rank pair of e is kept
                        for (int e = 0; e < c.E; e++) {
                            int lowest_dropped = c.k, highest_kept = -1;
                            for (int b = 0; b < B; b++)
                                for (int q = 0; q < c.k; q++) {
                                    if (t.m.sel[(size_t)b * c.k + q] != e) continue;
                                    if (t.m.row[(size_t)b * c.k + q] >= 0)
                                        highest_kept = q > highest_kept ? q : highest_kept;
                                    else lowest_dropped = q < lowest_dropped ? q : lowest_dropped;
                                }
                            kmajor += highest_kept > lowest_dropped;
                        }
                        cap_mismatch += ref_capacity_mismatch(&t, B, C);
                        int ne = 0;
                        worst = fmax(worst, ref_max_err(&t, y, x, B, 0.8f, &ne));
                        empty_exact += ne;
                        empty_total += (int)lround(t.m.stats.no_expert_frac * B);
                        free(x);
                        free(y);
                        bench_free(&t);
                    }
    { // one large batch so that the parallel gather / expert / scatter paths run
        MoeConfig c;
        moe_config_defaults(&c);
        c.d = 128;
        c.h = 512;
        c.E = 4;
        c.k = 2;
        c.cf = 1.0f;
        int B = 96;
        Bench t;
        bench_init(&t, &c, B, 99);
        Rng r;
        rng_seed(&r, 4242);
        float *x = malloc((size_t)B * c.d * sizeof(float)), *y = malloc((size_t)B * c.d * sizeof(float));
        fill_uniform(x, (size_t)B * c.d, -1.0f, 1.0f, &r);
        moe_forward(&t.m, y, x, &t.p, B, 0.8f, 1, &r);
        int ne = 0;
        worst = fmax(worst, ref_max_err(&t, y, x, B, 0.8f, &ne));
        empty_exact += ne;
        empty_total += (int)lround(t.m.stats.no_expert_frac * B);
        cap_mismatch += ref_capacity_mismatch(&t, B, t.m.stats.capacity);
        runs++;
        free(x);
        free(y);
        bench_free(&t);
    }
    check(dropped_pairs > 0, "invariants: %d random batches, %ld dropped pairs", runs, dropped_pairs);
    check(dup == 0, "invariants: the k selected experts of a sample are distinct");
    check(over_cap == 0, "invariants: no expert receives more than C pairs; kept counts match");
    check(kmajor == 0, "invariants: every first choice is served before any second choice (per expert)");
    check(cap_mismatch == 0, "invariants: keep mask equals an independent k-major / batch-or-gate order fill");
    check(worst < 1e-4, "invariants: y equals a by-hand reference from kept pairs only (worst %.2e)", worst);
    check(empty_total > 0 && empty_exact == empty_total,
          "invariants: samples with all pairs dropped have y == x exactly (%d of %d)", empty_exact, empty_total);
}

// Strongly skewed router with exact ties: identical router rows for experts 0 and 1.
static void test_ties_and_full_drop(void) {
    MoeConfig c;
    moe_config_defaults(&c);
    c.d = 6;
    c.h = 8;
    c.E = 4;
    c.k = 2;
    c.cf = 0.5f;
    c.noise = 0.0f;
    int B = 16;
    Bench t;
    bench_init(&t, &c, B, 7);
    for (int i = 0; i < c.d; i++) {
        t.p.router[0 * c.d + i] = 1.0f;
        t.p.router[1 * c.d + i] = 1.0f;
        t.p.router[2 * c.d + i] = -1.0f;
        t.p.router[3 * c.d + i] = -1.0f;
    }
    Rng r;
    rng_seed(&r, 3);
    float x[16 * 6], y[16 * 6];
    fill_uniform(x, (size_t)B * c.d, 0.5f, 1.0f, &r);
    moe_forward(&t.m, y, x, &t.p, B, 1.0f, 1, &r);
    int ties_ok = 1, full = 0, exact = 1;
    for (int b = 0; b < B; b++) {
        ties_ok &= t.m.sel[b * 2] == 0 && t.m.sel[b * 2 + 1] == 1;
        if (t.m.row[b * 2] < 0 && t.m.row[b * 2 + 1] < 0) {
            full++;
            exact &= memcmp(y + b * c.d, x + b * c.d, (size_t)c.d * sizeof(float)) == 0;
        }
    }
    check(ties_ok, "ties: equal logits of experts 0 and 1 select 0 first, then 1");
    check(t.m.stats.capacity == 4 && full == B - 4 && exact,
          "capacity C = 4: %d of %d samples fully dropped, all with y == x bitwise", full, B);
    check(fabs(t.m.stats.no_expert_frac - (double)(B - 4) / B) < 1e-12, "stats: no-expert fraction %.3f",
          t.m.stats.no_expert_frac);
    // all-equal logits: top-k is 0..k-1 in index order
    memset(t.p.router, 0, (size_t)c.E * c.d * sizeof(float));
    c.k = 3;
    bench_free(&t);
    bench_init(&t, &c, B, 8);
    memset(t.p.router, 0, (size_t)c.E * c.d * sizeof(float));
    moe_forward(&t.m, y, x, &t.p, B, 1.0f, 0, NULL);
    int idx_ok = 1;
    for (int b = 0; b < B; b++)
        for (int q = 0; q < 3; q++) idx_ok &= t.m.sel[b * 3 + q] == q;
    check(idx_ok, "ties: all-equal logits select experts 0, 1, 2 in index order");
    bench_free(&t);
}

static void test_determinism(void) {
    MoeConfig c;
    moe_config_defaults(&c);
    c.d = 16;
    c.h = 24;
    c.E = 8;
    c.k = 2;
    int B = 40;
    Bench t;
    Rng r1, r2, rx;
    rng_seed(&rx, 9);
    float *x = malloc((size_t)B * c.d * sizeof(float)), *y1 = malloc((size_t)B * c.d * sizeof(float));
    float *y2 = malloc((size_t)B * c.d * sizeof(float));
    int *sel1 = malloc((size_t)B * c.k * sizeof(int));
    fill_uniform(x, (size_t)B * c.d, -1.0f, 1.0f, &rx);

    c.noise = 0.0f;
    bench_init(&t, &c, B, 21);
    rng_seed(&r1, 1);
    rng_seed(&r2, 2);
    moe_forward(&t.m, y1, x, &t.p, B, 0.5f, 1, &r1);
    memcpy(sel1, t.m.sel, (size_t)B * c.k * sizeof(int));
    moe_forward(&t.m, y2, x, &t.p, B, 0.5f, 1, &r2);
    check(memcmp(sel1, t.m.sel, (size_t)B * c.k * sizeof(int)) == 0 &&
              memcmp(y1, y2, (size_t)B * c.d * sizeof(float)) == 0,
          "noise = 0: training selection and output do not depend on the rng");
    bench_free(&t);

    c.noise = 1.0f;
    bench_init(&t, &c, B, 21);
    moe_forward(&t.m, y1, x, &t.p, B, 0.5f, 1, &r1);
    memcpy(sel1, t.m.sel, (size_t)B * c.k * sizeof(int));
    moe_forward(&t.m, y2, x, &t.p, B, 0.5f, 1, &r2);
    check(memcmp(sel1, t.m.sel, (size_t)B * c.k * sizeof(int)) != 0,
          "noise = 1: different rng streams give different selections");
    // same rng state twice: bitwise identical forward and backward
    Rng a, b;
    rng_seed(&a, 77);
    b = a;
    float *dx1 = malloc((size_t)B * c.d * sizeof(float)), *dx2 = malloc((size_t)B * c.d * sizeof(float));
    float *g1 = malloc(t.np * sizeof(float));
    memset(t.gbuf, 0, t.np * sizeof(float));
    moe_forward(&t.m, y1, x, &t.p, B, 0.5f, 1, &a);
    moe_backward(&t.m, dx1, &t.g, x, x, &t.p, B);
    memcpy(g1, t.gbuf, t.np * sizeof(float));
    memset(t.gbuf, 0, t.np * sizeof(float));
    moe_forward(&t.m, y2, x, &t.p, B, 0.5f, 1, &b);
    moe_backward(&t.m, dx2, &t.g, x, x, &t.p, B);
    check(memcmp(y1, y2, (size_t)B * c.d * sizeof(float)) == 0 &&
              memcmp(dx1, dx2, (size_t)B * c.d * sizeof(float)) == 0 && memcmp(g1, t.gbuf, t.np * sizeof(float)) == 0,
          "same seed: forward and backward are bitwise reproducible");
    // eval has no noise: rng may be NULL and the selection is the deterministic top-k
    moe_forward(&t.m, y1, x, &t.p, B, 0.5f, 0, NULL);
    int det = 1;
    for (int bb = 0; bb < B; bb++) {
        const float *zb = t.m.z + (size_t)bb * c.E;
        int s0 = t.m.sel[bb * 2];
        for (int e = 0; e < c.E; e++) det &= zb[e] <= zb[s0];
    }
    check(det && t.m.stats.dropless && t.m.stats.drop_frac == 0.0,
          "eval: no noise (first choice = argmax logit) and dropless by default");
    free(dx1);
    free(dx2);
    free(g1);
    free(x);
    free(y1);
    free(y2);
    free(sel1);
    bench_free(&t);
}

// The experts run side by side (ml_par_items), each on one thread with single-threaded BLAS: the
// head's forward and backward are the same bits at 1 and at 3 threads, with products big enough
// (40 x 256 x 64) that OpenBLAS would thread them if it were called from one thread.
static void par_count_(void *ctx, int i) {
    int *seen = ctx;
#pragma omp atomic
    seen[i]++;
}

static void test_experts_side_by_side(void) {
    MoeConfig c;
    moe_config_defaults(&c);
    c.d = 64;
    c.h = 256;
    c.E = 8;
    c.k = 2;
    const int B = 160;
    Bench t;
    bench_init(&t, &c, B, 41);
    Rng rx;
    rng_seed(&rx, 4);
    const size_t nx = (size_t)B * c.d;
    float *x = malloc(nx * sizeof(float)), *dy = malloc(nx * sizeof(float));
    float *y[2], *dx[2], *g[2];
    fill_uniform(x, nx, -1.0f, 1.0f, &rx);
    fill_uniform(dy, nx, -1.0f, 1.0f, &rx);
    const int saved = omp_get_max_threads();
    for (int r = 0; r < 2; r++) {
        omp_set_num_threads(r == 0 ? 1 : 3);
        y[r] = malloc(nx * sizeof(float));
        dx[r] = malloc(nx * sizeof(float));
        g[r] = malloc(t.np * sizeof(float));
        Rng a;
        rng_seed(&a, 12);
        memset(t.gbuf, 0, t.np * sizeof(float));
        moe_forward(&t.m, y[r], x, &t.p, B, 0.7f, 1, &a);
        moe_backward(&t.m, dx[r], &t.g, dy, x, &t.p, B);
        memcpy(g[r], t.gbuf, t.np * sizeof(float));
    }
    omp_set_num_threads(3);
    int rows = 0, most = 0;
    for (int e = 0; e < c.E; e++) {
        const int n = t.m.off[e + 1] - t.m.off[e];
        rows += n;
        most = n > most ? n : most;
    }
    check(ml_par_items_worth(c.E) && rows > 0 && most * c.h * c.d >= 262144,
          "side by side at 3 threads: %d experts, %d rows (largest %d)", c.E, rows, most);
    check(memcmp(y[0], y[1], nx * sizeof(float)) == 0 && memcmp(dx[0], dx[1], nx * sizeof(float)) == 0 &&
              memcmp(g[0], g[1], t.np * sizeof(float)) == 0,
          "experts side by side: forward, input and parameter gradients equal bit for bit at 1 and 3 threads");
    int seen[37] = {0}, order[37], once = 1;
    for (int i = 0; i < 37; i++) order[i] = 36 - i;
    ml_par_items(37, order, par_count_, seen);
    for (int i = 0; i < 37; i++) once &= seen[i] == 1;
    ml_par_items(37, NULL, par_count_, seen);
    for (int i = 0; i < 37; i++) once &= seen[i] == 2;
    check(once, "ml_par_items runs every item exactly once, with and without an order");
    omp_set_num_threads(1);
    check(!ml_par_items_worth(c.E), "one thread: the experts run one after the other");
    omp_set_num_threads(saved);
    for (int r = 0; r < 2; r++) {
        free(y[r]);
        free(dx[r]);
        free(g[r]);
    }
    free(x);
    free(dy);
    bench_free(&t);
}

// Evaluation output of one sample alone vs inside a batch.
static double batch_dependence(HeadKind kind) {
    MoeConfig c;
    moe_config_defaults(&c);
    c.kind = kind;
    c.d = 16;
    c.h = 32;
    c.E = 4;
    c.k = 2;
    int B = 24;
    Bench t;
    bench_init(&t, &c, B, 31);
    Rng r;
    rng_seed(&r, 5);
    float *x = malloc((size_t)B * c.d * sizeof(float)), *y = malloc((size_t)B * c.d * sizeof(float));
    float y1[16];
    fill_uniform(x, (size_t)B * c.d, -1.0f, 1.0f, &r);
    moe_forward(&t.m, y, x, &t.p, B, 0.7f, 0, NULL);
    double worst = 0.0;
    for (int b = 0; b < B; b += 5) {
        moe_forward(&t.m, y1, x + (size_t)b * c.d, &t.p, 1, 0.7f, 0, NULL);
        for (int i = 0; i < c.d; i++) worst = fmax(worst, fabs(y1[i] - y[(size_t)b * c.d + i]));
    }
    free(x);
    free(y);
    bench_free(&t);
    return worst;
}

// k = 1 with renormalised gates (--renorm on): every kept gate is p_e / p_e = 1, so the task loss
// gives the router no gradient (0 up to the rounding of p_e / p_e; only L_aux and L_z reach it);
// without renormalisation (off, and auto at k = 1, the default) the gate is the softmax value and
// the router learns from the task (Switch's top-1): auto and off give the same bits at k = 1.
// At k = 2, auto renormalises: the same bits as on. moe_k1_blind_router is what the trainer's
// launch note tests.
static void k1_router_grads(int k, int renorm, float *gout, size_t ngout, double *gmax, double *w1max, int *blind) {
    MoeConfig c;
    moe_config_defaults(&c);
    c.d = 32;
    c.h = 64;
    c.E = 4;
    c.k = k;
    c.cf = 0.0f; /* dropless */
    c.alpha = 0.0f;
    c.beta = 0.0f;
    c.renorm = renorm;
    const int B = 48;
    Bench t;
    bench_init(&t, &c, B, 77);
    Rng r;
    rng_seed(&r, 5);
    const size_t nx = (size_t)B * c.d;
    float *x = malloc(nx * sizeof(float)), *y = malloc(nx * sizeof(float)), *dy = malloc(nx * sizeof(float)),
          *dx = malloc(nx * sizeof(float));
    fill_uniform(x, nx, -1.0f, 1.0f, &r);
    fill_uniform(dy, nx, -1.0f, 1.0f, &r);
    memset(t.gbuf, 0, t.np * sizeof(float));
    moe_forward(&t.m, y, x, &t.p, B, 0.7f, 1, &r);
    moe_backward(&t.m, dx, &t.g, dy, x, &t.p, B);
    *gmax = 0.0;
    *w1max = 0.0;
    for (int i = 0; i < c.E * c.d; i++) *gmax = fmax(*gmax, fabs(t.g.router[i]));
    for (size_t i = 0; i < (size_t)c.E * c.h * c.d; i++) *w1max = fmax(*w1max, fabs(t.g.w1[i]));
    /* every gradient, then the output and dx: the bits compared across settings */
    size_t n = 0;
    for (size_t i = 0; i < t.np && n < ngout; i++) gout[n++] = t.gbuf[i];
    for (size_t i = 0; i < nx && n < ngout; i++) gout[n++] = y[i];
    for (size_t i = 0; i < nx && n < ngout; i++) gout[n++] = dx[i];
    *blind = moe_k1_blind_router(&c);
    free(x);
    free(y);
    free(dy);
    free(dx);
    bench_free(&t);
}

static void test_k1_renorm_router(void) {
    enum { NG = 1 << 20 };
    float *g_on = calloc(NG, sizeof(float)), *g_off = calloc(NG, sizeof(float)), *g_auto = calloc(NG, sizeof(float));
    double gmax, w1, gmax_off, gmax_auto;
    int blind, blind_off, blind_auto;
    k1_router_grads(1, MOE_RENORM_ON, g_on, NG, &gmax, &w1, &blind);
    check(gmax < 1e-5 && w1 > 0.1 && blind,
          "k = 1, --renorm on, no L_aux / L_z: the router's gradient is 0 up to rounding (max |g| %.3g; the experts' "
          "is not: %.3g)",
          gmax, w1);
    k1_router_grads(1, MOE_RENORM_OFF, g_off, NG, &gmax_off, &w1, &blind_off);
    check(gmax_off > 1e-4 && !blind_off, "k = 1, --renorm off: the task loss reaches the router (max |g| %.3g)",
          gmax_off);
    k1_router_grads(1, MOE_RENORM_AUTO, g_auto, NG, &gmax_auto, &w1, &blind_auto);
    check(gmax_auto > 1e-4 && !blind_auto,
          "k = 1, --renorm auto (the default): the task loss reaches the router (max |g| %.3g)", gmax_auto);
    check(!memcmp(g_auto, g_off, NG * sizeof(float)),
          "k = 1: auto gives the same bits as off (gradients, output, dx)");
    k1_router_grads(2, MOE_RENORM_ON, g_on, NG, &gmax, &w1, &blind);
    k1_router_grads(2, MOE_RENORM_AUTO, g_auto, NG, &gmax_auto, &w1, &blind_auto);
    check(!memcmp(g_auto, g_on, NG * sizeof(float)) && gmax > 1e-4 && !blind && !blind_auto,
          "k = 2: auto gives the same bits as on (gradients, output, dx; router max |g| %.3g)", gmax);
    k1_router_grads(3, MOE_RENORM_ON, g_on, NG, &gmax, &w1, &blind);
    k1_router_grads(3, MOE_RENORM_AUTO, g_auto, NG, &gmax_auto, &w1, &blind_auto);
    check(!memcmp(g_auto, g_on, NG * sizeof(float)), "k = 3: auto gives the same bits as on");
    free(g_on);
    free(g_off);
    free(g_auto);
    {
        MoeConfig c;
        moe_config_defaults(&c);
        check(c.renorm == MOE_RENORM_AUTO && moe_renorm_on(&c), "defaults: renorm auto, on at k = 2");
        c.k = 1;
        check(!moe_renorm_on(&c), "auto at k = 1: off");
        int v = -1;
        check(moe_parse_renorm("auto", &v) == ML_OK && v == MOE_RENORM_AUTO && moe_parse_renorm("on", &v) == ML_OK &&
                  v == MOE_RENORM_ON && moe_parse_renorm("off", &v) == ML_OK && v == MOE_RENORM_OFF &&
                  moe_parse_renorm("yes", &v) == ML_ERR_ARG && v == MOE_RENORM_OFF,
              "moe_parse_renorm: auto, on, off; another word is an error");
    }
    MoeConfig c;
    moe_config_defaults(&c);
    c.k = 2;
    check(!moe_k1_blind_router(&c), "k = 2 with renormalised gates: not blind (g1 / (g1 + g2) has a gradient)");
    c.k = 1;
    c.kind = HEAD_SOFTMOE_SAMPLE;
    check(!moe_k1_blind_router(&c), "softmoe-sample at k = 1: not blind (no top-k gates)");
}

static void test_batch_independence(void) {
    double a = batch_dependence(HEAD_MOE), b = batch_dependence(HEAD_SOFTMOE_SAMPLE);
    double s = batch_dependence(HEAD_SOFTMOE_BATCH);
    check(a < 1e-5, "eval moe: a sample's output does not depend on its batch mates (%.2e)", a);
    check(b < 1e-5, "eval softmoe-sample: no dependence on batch mates (%.2e)", b);
    check(s > 1e-3, "eval softmoe-batch: output DOES depend on batch mates (%.2e)", s);
}

static void test_bias_update(void) {
    MoeConfig c;
    moe_config_defaults(&c);
    c.d = 16;
    c.h = 8;
    c.E = 8;
    c.k = 2;
    c.noise = 0.0f;
    c.cf = 1.25f;
    c.bias_mode = BIAS_SELECT;
    c.bias_rate = 0.05f;
    int B = 64;
    Bench t;
    bench_init(&t, &c, B, 41);
    Rng r;
    rng_seed(&r, 6);
    float *x = malloc((size_t)B * c.d * sizeof(float)), *y = malloc((size_t)B * c.d * sizeof(float));
    // skew: experts 0 and 1 get a large positive logit on positive inputs
    for (int i = 0; i < c.d; i++) {
        t.p.router[0 * c.d + i] += 0.5f;
        t.p.router[1 * c.d + i] += 0.4f;
    }
    double h0 = 0.0, v0 = 0.0, h1 = 0.0, v1 = 0.0;
    for (int step = 0; step < 60; step++) {
        fill_uniform(x, (size_t)B * c.d, 0.0f, 1.0f, &r);
        moe_forward(&t.m, y, x, &t.p, B, 1.0f, 1, &r);
        if (step == 0) {
            h0 = t.m.stats.load_entropy;
            v0 = t.m.stats.maxvio;
        }
        h1 = t.m.stats.load_entropy;
        v1 = t.m.stats.maxvio;
        moe_update_bias(&t.m);
    }
    check(h1 > h0 + 0.1 && v1 < v0, "bias update: load entropy %.3f -> %.3f, MaxVio %.3f -> %.3f", h0, h1, v0, v1);
    check(t.m.bias[0] < 0.0f && fabsf(t.m.bias[0] - t.m.stats.bias[0]) <= c.bias_rate * 1.0001f,
          "bias update: the overloaded expert's bias went down (%.3f); stats hold the bias used", (double)t.m.bias[0]);
    // no-op when disabled
    float before[MOE_MAX_EXPERTS];
    memcpy(before, t.m.bias, sizeof before);
    t.m.cfg.bias_mode = BIAS_NONE;
    moe_update_bias(&t.m);
    check(memcmp(before, t.m.bias, sizeof before) == 0, "bias update: no-op with bias mode none");
    free(x);
    free(y);
    bench_free(&t);
}

static void test_config_and_stats(void) {
    MoeConfig c;
    moe_config_defaults(&c);
    MoeHead m;
    c.E = 65;
    check(moe_init(&m, &c, 8) == ML_ERR_ARG, "moe_init rejects E = 65 (%s)", ml_last_error());
    c.E = 4;
    c.k = 5;
    check(moe_init(&m, &c, 8) == ML_ERR_ARG, "moe_init rejects k > E (%s)", ml_last_error());
    c.k = 2;
    c.kind = HEAD_DENSE;
    check(moe_init(&m, &c, 8) == ML_ERR_ARG && moe_param_count(&c, 8) == 0, "dense head: not an moe head");
    moe_config_defaults(&c);
    check(moe_param_count(&c, 128) == (size_t)8 * 256 + 2 * (size_t)8 * 1024 * 256 + 8 * 1024 + 8 * 256,
          "param count of the reference head");
    c.kind = HEAD_SOFTMOE_BATCH;
    check(moe_slots(&c, 128) == 32 &&
              moe_param_count(&c, 128) == (size_t)256 * 256 + 2 * (size_t)8 * 1024 * 256 + 8 * 1024 + 8 * 256,
          "softmoe-batch: P = ceil(k B / E) = 32 slot embeddings per expert");
    // tensors start on 16-float boundaries: h = 3, E = 3, d = 8 pads router 24 -> 32, w1 72 -> 80,
    // b1 9 -> 16, w2 72 -> 80, b2 24 -> 32
    {
        MoeConfig o;
        moe_config_defaults(&o);
        o.d = 8;
        o.E = 3;
        o.h = 3;
        MoeParams pp;
        float base[1];
        moe_params_point(&pp, base, &o, 8);
        check(moe_param_count(&o, 8) == 32 + 80 + 16 + 80 + 32 && pp.w1 - pp.router == 32 && pp.b1 - pp.w1 == 80 &&
                  pp.w2 - pp.b1 == 16 && pp.b2 - pp.w2 == 80,
              "h = 3, E = 3, d = 8: every MoE tensor starts on a 16-float boundary (count %zu)",
              moe_param_count(&o, 8));
    }
    HeadKind hk;
    check(moe_parse_head("softmoe-sample", &hk) == ML_OK && hk == HEAD_SOFTMOE_SAMPLE &&
              moe_parse_head("bogus", &hk) == ML_ERR_ARG,
          "head names parse");

    // statistics on a small batch: sums and ranges
    moe_config_defaults(&c);
    c.d = 8;
    c.h = 8;
    c.E = 4;
    c.k = 2;
    c.cf = 1.0f;
    int B = 20;
    Bench t;
    bench_init(&t, &c, B, 51);
    Rng r;
    rng_seed(&r, 8);
    float x[20 * 8], y[20 * 8];
    fill_uniform(x, (size_t)B * c.d, -1.0f, 1.0f, &r);
    moe_forward(&t.m, y, x, &t.p, B, 1.0f, 1, &r);
    const MoeStepStats *st = &t.m.stats;
    int dsum = 0, ksum = 0;
    double gsum = 0.0;
    for (int e = 0; e < c.E; e++) {
        dsum += st->demand[e];
        ksum += st->kept[e];
        gsum += st->mean_gate[e];
    }
    check(st->capacity == 10 && dsum == B * c.k && fabs(ksum - st->pairs_per_sample * B) < 1e-9 &&
              fabs(st->drop_frac - (double)(dsum - ksum) / dsum) < 1e-12,
          "stats: C = 10, demand sums to B k, kept / B = pairs per sample, drop fraction");
    check(fabs(gsum - 1.0) < 1e-5 && st->gate_entropy > 0.0 && st->gate_entropy <= 1.0 + 1e-9 &&
              st->load_entropy > 0.0 && st->load_entropy <= 1.0 + 1e-9 && st->maxvio >= 0.0,
          "stats: mean gates sum to 1, entropies in (0, 1], MaxVio >= 0");
    /* gate_margin: the mean of (largest - second largest gate) over the batch, by hand; a tie is
     * 0 and one expert taking everything is 1 */
    double margin = 0.0;
    for (int b = 0; b < B; b++) {
        double g[4] = {0}, tmp;
        for (int e = 0; e < c.E; e++) g[e] = t.m.p[(size_t)b * c.E + e];
        for (int i = 0; i < 2; i++)
            for (int j = i + 1; j < c.E; j++)
                if (g[j] > g[i]) tmp = g[i], g[i] = g[j], g[j] = tmp;
        margin += g[0] - g[1];
    }
    check(fabs(st->gate_margin - margin / B) < 1e-12 && st->gate_margin > 0.0 && st->gate_margin < 1.0,
          "stats: gate margin %.4f = mean of the top two gates' difference", st->gate_margin);
    double conf = 0.0;
    int nkept = 0;
    for (int b = 0; b < B * c.k; b++)
        if (t.m.row[b] >= 0) {
            conf += t.m.gate[b];
            nkept++;
        }
    check(nkept == ksum && fabs(st->confidence - conf / nkept) < 1e-6, "stats: router confidence %.4f = mean kept gate",
          st->confidence);
    int fc_ok = 1;
    for (int b = 0; b < B; b++) fc_ok &= t.m.first_choice[b] == t.m.sel[b * c.k];
    check(fc_ok, "first_choice = rank-0 selection");
    // capacity with cf = 1.25, k = 2, B = 128, E = 8: ceil(40) = 40, and cf = 0.3, B = 40: exactly 3
    MoeConfig c2 = c;
    c2.E = 8;
    c2.cf = 0.3f;
    c2.k = 2;
    Bench t2;
    bench_init(&t2, &c2, 40, 52);
    float x2[40 * 8], y2[40 * 8];
    fill_uniform(x2, 40 * 8, -1.0f, 1.0f, &r);
    moe_forward(&t2.m, y2, x2, &t2.p, 40, 1.0f, 1, &r);
    check(t2.m.stats.capacity == 3, "capacity ceil(0.3 * 2 * 40 / 8) = 3 despite float cf (got %d)",
          t2.m.stats.capacity);
    // freeze_selection: a second noisy forward keeps the selection and keep mask
    int sel0[80], row0[80];
    memcpy(sel0, t2.m.sel, sizeof sel0);
    memcpy(row0, t2.m.row, sizeof row0);
    t2.m.freeze_selection = 1;
    Rng r2;
    rng_seed(&r2, 999);
    moe_forward(&t2.m, y2, x2, &t2.p, 40, 0.5f, 1, &r2);
    int same = memcmp(sel0, t2.m.sel, sizeof sel0) == 0 && memcmp(row0, t2.m.row, sizeof row0) == 0;
    t2.m.freeze_selection = 0;
    moe_forward(&t2.m, y2, x2, &t2.p, 40, 0.5f, 1, &r2);
    check(same && memcmp(sel0, t2.m.sel, sizeof sel0) != 0,
          "freeze_selection keeps selection and keep mask; unfrozen it changes");
    // evaluation capacity when set
    t2.m.cfg.eval_cf = 0.5f;
    moe_forward(&t2.m, y2, x2, &t2.p, 40, 1.0f, 0, NULL);
    check(t2.m.stats.capacity == 5 && !t2.m.stats.dropless, "eval_cf = 0.5 sets the evaluation capacity (C = %d)",
          t2.m.stats.capacity);
    bench_free(&t2);
    bench_free(&t);

    // soft heads: argmax counts, mean weights sum to 1, expert calls per sample
    for (int kind = HEAD_SOFTMOE_BATCH; kind <= HEAD_SOFTMOE_SAMPLE; kind++) {
        c.kind = (HeadKind)kind;
        bench_init(&t, &c, B, 53);
        moe_forward(&t.m, y, x, &t.p, B, 1.0f, 1, &r);
        st = &t.m.stats;
        int ds = 0, am = 1;
        double ms = 0.0;
        for (int e = 0; e < c.E; e++) {
            ds += st->demand[e];
            ms += st->mean_gate[e];
            am &= st->demand[e] == st->kept[e];
        }
        double pps = kind == HEAD_SOFTMOE_SAMPLE ? c.E : (double)c.E * t.m.P / B;
        check(ds == B && am && fabs(ms - 1.0) < 1e-5 && st->drop_frac == 0.0 &&
                  fabs(st->pairs_per_sample - pps) < 1e-12 && st->confidence >= 1.0 / c.E - 1e-6 &&
                  st->confidence <= 1.0 + 1e-6,
              "%s stats: argmax counts sum to B, mean weights sum to 1, %.2f expert calls per sample",
              moe_head_name((HeadKind)kind), st->pairs_per_sample);
        bench_free(&t);
    }
}

// ---------------------------------------------------------------- temperature schedules


static void test_tau(void) {
    TauSchedule s;
    tau_schedule_defaults(&s);
    s.tau0 = 2.0f;
    s.tau1 = 0.5f;
    s.tau_min = 0.01f;
    s.start = 0;
    s.total = 1000;
    const double a = 2.0, b = 0.5;

    s.kind = TAU_CONST;
    check(tau_value(&s, 0) == 2.0f && tau_value(&s, 700) == 2.0f, "tau const");
    s.kind = TAU_LINEAR;
    check(near(tau_value(&s, 0), a, 1e-6) && near(tau_value(&s, 500), (a + b) / 2, 1e-6) &&
              near(tau_value(&s, 1000), b, 1e-6) && near(tau_value(&s, 250), a + (b - a) * 0.25, 1e-6) &&
              near(tau_value(&s, 5000), b, 1e-6) && near(tau_value(&s, -10), a, 1e-6),
          "tau linear: endpoints, midpoint, quarter, clamped progress");
    s.kind = TAU_COSINE;
    check(near(tau_value(&s, 0), a, 1e-6) && near(tau_value(&s, 500), (a + b) / 2, 1e-6) &&
              near(tau_value(&s, 1000), b, 1e-6) &&
              near(tau_value(&s, 250), b + (a - b) * (1 + cos(3.14159265358979323846 * 0.25)) / 2, 1e-6),
          "tau cosine: endpoints, midpoint, quarter");
    s.kind = TAU_EXP;
    check(near(tau_value(&s, 0), a, 1e-6) && near(tau_value(&s, 500), sqrt(a * b), 1e-6) &&
              near(tau_value(&s, 1000), b, 1e-6),
          "tau exp: endpoints and midpoint sqrt(tau0 tau1) = %.4f", (double)tau_value(&s, 500));
    s.kind = TAU_SIGMOID;
    s.s = 12.0f;
    s.c = 0.3f;
    check(near(tau_value(&s, 300), (a + b) / 2, 1e-6) &&
              near(tau_value(&s, 0), b + (a - b) / (1 + exp(12.0 * (0 - 0.3))), 1e-6) &&
              near(tau_value(&s, 1000), b + (a - b) / (1 + exp(12.0 * 0.7)), 1e-6) &&
              tau_value(&s, 100) > tau_value(&s, 500),
          "tau sigmoid: value at c is the mean, endpoints follow the formula, decreasing");
    s.kind = TAU_STEP;
    s.tau0 = 1.0f;
    s.tau1 = 0.125f;
    s.step_every = 250;
    s.step_gamma = 0.0f;
    check(tau_value(&s, 0) == 1.0f && tau_value(&s, 249) == 1.0f && near(tau_value(&s, 250), 0.5, 1e-6) &&
              near(tau_value(&s, 600), 0.25, 1e-6) && tau_value(&s, 750) == 0.125f && tau_value(&s, 1000) == 0.125f &&
              tau_value(&s, 9999) == 0.125f,
          "tau step (auto gamma): 4 levels 1, 0.5, 0.25, 0.125 ending at tau1");
    s.step_gamma = 0.9f;
    s.step_every = 100;
    check(near(tau_value(&s, 199), 0.9, 1e-6) && near(tau_value(&s, 350), 0.729, 1e-6),
          "tau step (gamma 0.9 every 100): tau0 gamma^floor(t / 100)");
    s.kind = TAU_COSINE_RESTART;
    s.tau0 = 2.0f;
    s.tau1 = 0.5f;
    s.step_every = 0;
    s.step_gamma = 0.0f;
    const double pi = 3.14159265358979323846;
    check(
        tau_value(&s, 0) == 2.0f && near(tau_value(&s, 125), (a + b) / 2, 1e-6) && tau_value(&s, 250) == 0.5f &&
            near(tau_value(&s, 251), b + (a - b) * (1 + cos(pi / 250)) / 2, 1e-6) && tau_value(&s, 251) > 1.99f &&
            near(tau_value(&s, 375), (a + b) / 2, 1e-6) && tau_value(&s, 500) == 0.5f && tau_value(&s, 1000) == 0.5f &&
            tau_value(&s, 5000) == 0.5f && tau_value(&s, -5) == 2.0f,
        "tau cosine-restart (default: four cycles of 250): tau0 at the start, tau1 at each cycle's end and at the end, "
        "restart at 251 (%.4f)",
        (double)tau_value(&s, 251));
    s.step_every = 100;
    s.step_gamma = 2.0f;
    check(
        tau_value(&s, 100) == 0.5f && near(tau_value(&s, 101), b + (a - b) * (1 + cos(pi / 200)) / 2, 1e-6) &&
            near(tau_value(&s, 200), (a + b) / 2, 1e-6) && tau_value(&s, 300) == 0.5f &&
            near(tau_value(&s, 500), (a + b) / 2, 1e-6) && tau_value(&s, 700) == 0.5f &&
            near(tau_value(&s, 1000), b + (a - b) * (1 + cos(pi * 300.0 / 800.0)) / 2, 1e-6),
        "tau cosine-restart (every 100, gamma 2): cycles 100, 200, 400, 800 end at 100, 300, 700; mid-cycle at the end");
    s.step_gamma = 0.5f;
    check(tau_validate(&s) == ML_ERR_ARG && tau_parse_kind("cosine-restart", &(TauKind){0}) == ML_OK,
          "tau cosine-restart: gamma < 1 rejected (%s); the name parses", ml_last_error());
    s.start = 400;
    s.step_every = 0;
    s.step_gamma = 0.0f;
    check(tau_value(&s, 400) == 2.0f && tau_value(&s, 550) == 0.5f && tau_value(&s, 551) > 1.99f &&
              tau_value(&s, 1000) == 0.5f,
          "tau cosine-restart from start 400: four cycles of 150");
    s.start = 0;
    s.kind = TAU_EXP;
    s.tau0 = 1.0f;
    s.tau1 = 0.001f;
    s.tau_min = 0.05f;
    check(tau_value(&s, 1000) == 0.05f && tau_value(&s, 0) == 1.0f, "tau clamped at tau_min");

    TauKind kd;
    check(tau_parse_kind("Sigmoid", &kd) == ML_OK && kd == TAU_SIGMOID && tau_parse_kind("zig", &kd) == ML_ERR_ARG &&
              strcmp(tau_kind_name(TAU_EXP), "exp") == 0,
          "tau kind names parse (bad name rejected: %s)", ml_last_error());

    // plan: override, then anneal from the current step to the end
    TauSchedule base;
    tau_schedule_defaults(&base);
    base.kind = TAU_LINEAR;
    base.tau0 = 1.0f;
    base.tau1 = 0.2f;
    base.total = 1000;
    TauPlan plan;
    tau_plan_init(&plan, &base);
    check(near(tau_plan_value(&plan, 500), 0.6, 1e-6), "plan: follows the base schedule");
    check(tau_plan_set(&plan, 300, 0.0f) == ML_ERR_ARG && tau_plan_set(&plan, 300, NAN) == ML_ERR_ARG,
          "plan: set tau rejects 0 and NaN");
    tau_plan_set(&plan, 300, 0.33f);
    check(tau_plan_value(&plan, 300) == 0.33f && tau_plan_value(&plan, 900) == 0.33f &&
              near(tau_plan_scheduled(&plan, 500), 0.6, 1e-6),
          "plan: override holds from then on; the planned curve is unchanged");
    TauSchedule an;
    tau_schedule_defaults(&an);
    an.kind = TAU_EXP;
    an.tau0 = 0.0f; // continue from the value in effect
    an.tau1 = 0.01f;
    check(tau_plan_anneal(&plan, 400, &an) == ML_OK, "plan: anneal accepted");
    check(tau_plan_value(&plan, 400) == 0.33f && near(tau_plan_value(&plan, 700), sqrt(0.33 * 0.01), 1e-5) &&
              near(tau_plan_value(&plan, 1000), 0.01, 1e-6) && near(tau_plan_value(&plan, 200), 0.84, 1e-6),
          "plan: anneal starts at the current value, runs to the end, base before it");
    tau_plan_set(&plan, 800, 0.7f);
    an.tau0 = 0.5f;
    an.kind = TAU_LINEAR;
    an.tau1 = 0.1f;
    tau_plan_anneal(&plan, 800, &an);
    check(!plan.has_override && near(tau_plan_value(&plan, 900), 0.3, 1e-6), "plan: a new anneal clears the override");
}

// ---------------------------------------------------------------- routing statistics over time

static void test_routestats(void) {
    RouteWinConfig rc;
    routewin_defaults(&rc);
    rc.window = 20;
    RouteWin w;
    ml_status st = routewin_init(&w, &rc, 8);
    check(st == ML_OK, "routewin_init");
    MoeStepStats s;
    memset(&s, 0, sizeof s);
    s.E = 8;
    s.kept[0] = 256;
    s.first_share = 1.0;
    int reason = 0;
    for (int i = 0; i < 19; i++) routewin_push(&w, &s);
    check(routewin_dead_count(&w, NULL) == 0, "routewin: no dead experts before the window is full");
    routewin_push(&w, &s);
    int dead[8];
    int nd = routewin_dead_count(&w, dead);
    check(nd == 7 && !dead[0] && dead[7], "routewin: collapsed stream has 7 dead experts");
    int col = routewin_collapsed(&w, &reason);
    check(col && reason == (COLLAPSE_ENTROPY | COLLAPSE_SHARE | COLLAPSE_DEAD),
          "routewin: collapse flagged on all load on one expert (%s)", routewin_reason_text(reason));
    // balanced stream pushes the collapsed steps out of the window
    for (int e = 0; e < 8; e++) s.kept[e] = 32;
    s.first_share = 0.125;
    for (int i = 0; i < 20; i++) routewin_push(&w, &s);
    col = routewin_collapsed(&w, &reason);
    check(!col && reason == 0 && routewin_dead_count(&w, NULL) == 0 && near(routewin_load_entropy(&w), 1.0, 1e-12),
          "routewin: balanced stream is not collapsed, no dead experts, entropy 1");
    // every step sends the whole batch to one expert pair, a different pair each step: the
    // summed counts look balanced, the per-step entropy (log 2 / log 8 = 1/3) is collapsed
    for (int i = 0; i < 20; i++) {
        memset(s.kept, 0, sizeof s.kept);
        s.kept[i % 8] = 40;
        s.kept[(i + 1) % 8] = 40;
        routewin_push(&w, &s);
    }
    col = routewin_collapsed(&w, &reason);
    check(col && (reason & COLLAPSE_ENTROPY) && near(routewin_load_entropy(&w), log(2.0) / log(8.0), 1e-12) &&
              routewin_dead_count(&w, NULL) == 0,
          "routewin: a rotating expert pair is collapsed (per-step entropy %.3f) though no expert is dead",
          routewin_load_entropy(&w));
    // one expert is every sample's first choice, second choices spread: kept load stays
    // balanced (capacity), the first-choice share flags it
    for (int e = 0; e < 8; e++) s.kept[e] = 32;
    s.first_share = 1.0;
    for (int i = 0; i < 20; i++) routewin_push(&w, &s);
    col = routewin_collapsed(&w, &reason);
    check(col && reason == COLLAPSE_SHARE, "routewin: a fixed first choice with balanced kept load is collapsed (%s)",
          routewin_reason_text(reason));
    s.first_share = 0.125;
    for (int i = 0; i < 20; i++) routewin_push(&w, &s);
    // one expert silent for the whole window: dead, but 1 of 8 is not collapse
    s.kept[3] = 0;
    for (int i = 0; i < 20; i++) routewin_push(&w, &s);
    col = routewin_collapsed(&w, &reason);
    check(routewin_dead_count(&w, dead) == 1 && dead[3] && !col, "routewin: one dead expert, not collapsed");
    // half the experts silent: collapse by the dead criterion
    s.kept[0] = s.kept[1] = s.kept[2] = 0;
    for (int i = 0; i < 20; i++) routewin_push(&w, &s);
    col = routewin_collapsed(&w, &reason);
    check(col && (reason & COLLAPSE_DEAD) && !(reason & COLLAPSE_ENTROPY), "routewin: 4 of 8 dead -> collapse (%s)",
          routewin_reason_text(reason));
    routewin_free(&w);

    // class x expert mutual information (nats)
    enum { K = 10, E = 8 };
    int counts[K * E];
    memset(counts, 0, sizeof counts);
    int32_t labels[K * 5];
    int fc[K * 5];
    for (int i = 0; i < K * 5; i++) {
        labels[i] = i % K;
        fc[i] = i % K < E ? i % K : -1; // classes 8, 9 have no valid expert: skipped
    }
    classexp_add(counts, labels, fc, K * 5, E);
    int total = 0;
    for (int i = 0; i < K * E; i++) total += counts[i];
    check(total == E * 5 && counts[3 * E + 3] == 5, "classexp_add: diagonal counts, invalid expert skipped");
    double mi = classexp_mutual_info(counts, K, E);
    check(near(mi, log(8.0), 1e-12), "mutual information of a diagonal 10 x 8 matrix = log(8) = %.6f (%.6f)", log(8.0),
          mi);
    for (int i = 0; i < K * E; i++) counts[i] = 7;
    mi = classexp_mutual_info(counts, K, E);
    check(fabs(mi) < 1e-12, "mutual information of a uniform matrix = 0 (%.2e)", mi);
    check(classexp_mutual_info(counts, K, E) >= 0.0 && classexp_mutual_info(counts, 0, E) == 0.0,
          "mutual information edge cases");
}

static void test_rho(void) {
    MoeConfig c;
    moe_config_defaults(&c);
    double rho = moe_rho_nominal(&c, 5173248.0, 5120.0, 128);
    check(moe_router_flops(&c, 128) == 4096.0 && moe_expert_flops(&c) == 1048576.0,
          "flops: router 4,096 and one expert 1,048,576");
    check(fabs(rho - 0.288) < 0.0005, "rho nominal of the reference model = %.4f (0.288)", rho);
    double rr = moe_rho_realized(&c, 5173248.0, 5120.0, 128, 1.5);
    check(rr < rho && rr > 0.0, "rho realized with 1.5 kept pairs per sample = %.4f < nominal", rr);
    c.kind = HEAD_SOFTMOE_SAMPLE;
    check(moe_rho_nominal(&c, 5173248.0, 5120.0, 128) > rho, "rho softmoe-sample counts all E experts");
    c.kind = HEAD_DENSE;
    check(moe_rho_nominal(&c, 5173248.0, 5120.0, 128) == 0.0, "rho dense = 0");
}

static void test_rng(void) {
    Rng a, b;
    rng_seed(&a, 42);
    rng_seed(&b, 42);
    int same = 1;
    for (int i = 0; i < 100; i++) same &= rng_u64(&a) == rng_u64(&b);
    check(same, "rng: same seed, same stream");
    double mu = 0.0, var = 0.0, gm = 0.0;
    int inside = 1, hist[7] = {0};
    const int n = 200000;
    for (int i = 0; i < n; i++) {
        float u = rng_uniform(&a);
        inside &= u > 0.0f && u < 1.0f;
        double z = rng_normal(&a);
        mu += z;
        var += z * z;
        gm += rng_gumbel(&a);
        hist[rng_below(&a, 7)]++;
    }
    mu /= n;
    var = var / n - mu * mu;
    gm /= n;
    int flat = 1;
    for (int i = 0; i < 7; i++) flat &= fabs(hist[i] - n / 7.0) < 5.0 * sqrt(n / 7.0);
    check(inside, "rng: uniform in (0, 1)");
    check(fabs(mu) < 0.01 && fabs(var - 1.0) < 0.02, "rng: normal mean %.4f var %.4f", mu, var);
    check(fabs(gm - 0.5772156649) < 0.01, "rng: Gumbel mean %.4f (Euler-Mascheroni 0.5772)", gm);
    check(flat && rng_below(&a, 1) == 0, "rng: rng_below(7) uniform");
}

// Entropy / log E of counts, experts with count 0 and largest share: the test's own formulas.
static void count_stats(const int *cnt, int E, int B, double *h, int *dead, double *share) {
    double s = 0.0;
    int mx = 0;
    *dead = 0;
    for (int e = 0; e < E; e++) {
        if (cnt[e] > 0) s -= (double)cnt[e] / B * log((double)cnt[e] / B);
        if (cnt[e] > mx) mx = cnt[e];
        *dead += cnt[e] == 0;
    }
    *h = E > 1 ? s / log((double)E) : 1.0;
    *share = (double)mx / B;
}

// The clean-router statistics see a collapsed router that the selection noise hides; without
// noise they are the noisy ones; for the soft heads they equal the published ones.
static void test_clean_router(void) {
    MoeConfig c;
    moe_config_defaults(&c);
    c.d = 6;
    c.h = 8;
    c.E = 8;
    c.k = 2;
    c.noise = 4.0f; // noise much larger than the logit gap
    const int B = 64;
    Bench t;
    bench_init(&t, &c, B, 11);
    // every sample's logits favour expert 3 by 0.5
    memset(t.p.router, 0, (size_t)c.E * c.d * sizeof(float));
    for (int i = 0; i < c.d; i++) t.p.router[3 * c.d + i] = 0.5f / c.d / 0.75f;
    Rng r;
    rng_seed(&r, 5);
    float x[64 * 6], y[64 * 6];
    fill_uniform(x, (size_t)B * c.d, 0.5f, 1.0f, &r);
    moe_forward(&t.m, y, x, &t.p, B, 1.0f, 1, &r);
    const MoeStepStats *st = &t.m.stats;
    check(st->clean_first_share == 1.0 && st->first_share < 0.6,
          "clean router: all first choices on one expert (%.2f) while the noisy selection spreads them (%.2f)",
          st->clean_first_share, st->first_share);
    check(st->clean_load_entropy == 0.0 && st->clean_dead == c.E - 1 && st->first_agree < 0.5 && st->load_entropy > 0.8,
          "clean router collapsed under noise 4: clean load entropy %.3f (noisy load %.3f), clean dead %d/%d, "
          "first choices agree %.2f",
          st->clean_load_entropy, st->load_entropy, st->clean_dead, c.E, st->first_agree);
    bench_free(&t);

    // noise 0, random router, k = 1 dropless: the clean statistics are the noisy ones
    c.noise = 0.0f;
    c.k = 1;
    c.cf = 0.0f;
    bench_init(&t, &c, B, 12);
    moe_forward(&t.m, y, x, &t.p, B, 1.0f, 1, &r);
    int cnt[MOE_MAX_EXPERTS] = {0}, dead = 0;
    for (int b = 0; b < B; b++) cnt[t.m.first_choice[b]]++;
    double h = 0.0, share = 0.0;
    count_stats(cnt, c.E, B, &h, &dead, &share);
    check(st->first_agree == 1.0 && st->clean_first_share == st->first_share &&
              st->clean_load_entropy == st->load_entropy && fabs(st->clean_load_entropy - h) < 1e-12 &&
              st->clean_dead == dead && share == st->first_share && h > 0.3 && h < 1.0,
          "noise 0: first choices agree (%.2f), clean = noisy: share %.3f = %.3f, load entropy %.4f = %.4f, "
          "dead %d = %d",
          st->first_agree, st->clean_first_share, st->first_share, st->clean_load_entropy, st->load_entropy,
          st->clean_dead, dead);
    bench_free(&t);

    // the soft heads have no noise: clean = published (first choice = largest weight)
    const HeadKind soft[2] = {HEAD_SOFTMOE_SAMPLE, HEAD_SOFTMOE_BATCH};
    for (int i = 0; i < 2; i++) {
        c.kind = soft[i];
        c.k = 2;
        c.noise = 1.0f;
        bench_init(&t, &c, B, 13);
        moe_forward(&t.m, y, x, &t.p, B, 1.0f, 1, &r);
        memset(cnt, 0, sizeof cnt);
        for (int b = 0; b < B; b++) cnt[t.m.first_choice[b]]++;
        count_stats(cnt, c.E, B, &h, &dead, &share);
        check(st->first_agree == 1.0 && st->clean_first_share == st->first_share &&
                  st->clean_load_entropy == st->load_entropy && st->clean_dead == dead,
              "%s: clean statistics = published (share %.3f, load entropy %.4f, dead %d, agree %.2f)",
              moe_head_name(c.kind), st->clean_first_share, st->clean_load_entropy, st->clean_dead, st->first_agree);
        bench_free(&t);
    }
}

int main(void) {
    test_rng();
    test_config_and_stats();
    test_gradients();
    test_invariants();
    test_ties_and_full_drop();
    test_determinism();
    test_experts_side_by_side();
    test_k1_renorm_router();
    test_batch_independence();
    test_bias_update();
    test_tau();
    test_routestats();
    test_rho();
    test_clean_router();
    printf("%d passed, %d failed\n", n_checks - n_failed, n_failed);
    return n_failed ? 1 : 0;
}
