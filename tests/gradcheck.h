/* gradcheck.h — central finite-difference checks shared by the tests (header-only).
 *
 * fd_check perturbs coordinates of a float tensor by +-eps, re-evaluates a scalar loss computed
 * in double, and compares (L+ - L-) / 2 eps with the analytic gradient. The error of a tensor is
 * max_i |analytic_i - numeric_i| / max(max_i |analytic_i|, floor): the worst coordinate relative
 * to the gradient's scale. A coordinate whose perturbation flips a ReLU or top-k decision (the
 * optional `signature` callback changes) is retried with eps/4 and eps/16, then skipped: finite
 * differences are meaningless across a kink. */
#ifndef ML_GRADCHECK_H
#define ML_GRADCHECK_H

#include <math.h>
#include <stdio.h>
#include <stdint.h>

#include "check.h" /* provides: CHECK, n_failed */

typedef double (*fd_loss_fn)(void *ctx);
typedef uint64_t (*fd_sig_fn)(void *ctx);

static inline uint64_t fd_hash_mask(const float *v, long n) {
    uint64_t h = 1469598103934665603ULL;
    for (long i = 0; i < n; i++) {
        h ^= (uint64_t)(v[i] > 0.0f);
        h *= 1099511628211ULL;
    }
    return h;
}

/* Returns the relative error; prints a PASS/FAIL line against tol. Checks up to `maxn`
 * coordinates spread evenly over the tensor. */
static __attribute__((unused)) double fd_check(const char *name, float *x, const float *analytic, long n, fd_loss_fn f,
                                               fd_sig_fn sig, void *ctx, float eps, int maxn, double tol) {
    double maxerr = 0.0, scale = 0.0;
    long stride = n > maxn ? n / maxn : 1, checked = 0, skipped = 0;
    uint64_t s0 = sig ? sig(ctx) : 0;
    for (long i = 0; i < n; i++) scale = fmax(scale, fabs(analytic[i]));
    for (long i = 0; i < n; i += stride) {
        const float orig = x[i];
        /* try eps, eps/4, eps/16: the first step that crosses no kink is used */
        int done = 0;
        for (int attempt = 0; attempt < 3 && !done; attempt++) {
            const float e = eps / (float)(1 << (2 * attempt));
            x[i] = orig + e;
            double lp = f(ctx);
            uint64_t sp = sig ? sig(ctx) : 0;
            x[i] = orig - e;
            double lm = f(ctx);
            uint64_t sm = sig ? sig(ctx) : 0;
            x[i] = orig;
            if (sig && (sp != s0 || sm != s0)) continue;
            double num = (lp - lm) / ((double)(float)(orig + e) - (double)(float)(orig - e));
            double err = fabs(num - analytic[i]);
            if (err > maxerr) maxerr = err;
            checked++;
            done = 1;
        }
        if (!done) skipped++;
    }
    if (sig) f(ctx); /* restore the forward state */
    double rel = maxerr / fmax(scale, 1e-6);
    int ok = rel < tol && checked > 0;
    printf("%s  gradcheck %-40s rel err %.2e (%ld coords, %ld skipped at kinks, |g|max %.3g)\n", ok ? "PASS" : "FAIL",
           name, rel, checked, skipped, scale);
    if (!ok) n_failed++;
    return rel;
}


#endif
