/* stats.c — see stats.h for the formulas. The incomplete beta continued fraction follows
 * Numerical Recipes (3rd ed.) 6.4 with the modified Lentz method; the t quantile inverts the
 * t CDF by bisection on the upper tail (monotone, so it always converges). */
#include "stats.h"

#include <float.h>
#include <math.h>

double stats_mean(const double *x, int n) {
    if (n < 1) return NAN;
    double s = 0;
    for (int i = 0; i < n; i++) s += x[i];
    return s / n;
}

double stats_sd(const double *x, int n) {
    if (n < 2) return NAN;
    const double m = stats_mean(x, n);
    double ss = 0;
    for (int i = 0; i < n; i++) ss += (x[i] - m) * (x[i] - m);
    return sqrt(ss / (n - 1));
}

double stats_pooled_sd(double s1, int n1, double s2, int n2) {
    if (n1 < 1 || n2 < 1 || n1 + n2 < 3) return NAN;
    const double a = n1 > 1 ? (n1 - 1) * s1 * s1 : 0.0, b = n2 > 1 ? (n2 - 1) * s2 * s2 : 0.0;
    return sqrt((a + b) / (n1 + n2 - 2));
}

double stats_cohen_d(double m1, double s1, int n1, double m2, double s2, int n2) {
    const double sp = stats_pooled_sd(s1, n1, s2, n2);
    if (!(sp > 0) || !isfinite(sp)) return NAN;
    return (m1 - m2) / sp;
}

double stats_hedges_g(double d, int n1, int n2) {
    if (isnan(d) || n1 + n2 < 3) return NAN;
    return d * (1.0 - 3.0 / (4.0 * (n1 + n2) - 9.0));
}

/* Continued fraction of I_x(a, b) (converges fast for x < (a + 1) / (a + b + 2)). */
static double betacf(double a, double b, double x) {
    const double tiny = DBL_MIN / DBL_EPSILON, eps = 1e-15;
    const double qab = a + b, qap = a + 1.0, qam = a - 1.0;
    double c = 1.0, d = 1.0 - qab * x / qap;
    if (fabs(d) < tiny) d = tiny;
    d = 1.0 / d;
    double h = d;
    for (int m = 1; m <= 100000; m++) {
        const int m2 = 2 * m;
        double aa = m * (b - m) * x / ((qam + m2) * (a + m2));
        d = 1.0 + aa * d;
        if (fabs(d) < tiny) d = tiny;
        c = 1.0 + aa / c;
        if (fabs(c) < tiny) c = tiny;
        d = 1.0 / d;
        h *= d * c;
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2));
        d = 1.0 + aa * d;
        if (fabs(d) < tiny) d = tiny;
        c = 1.0 + aa / c;
        if (fabs(c) < tiny) c = tiny;
        d = 1.0 / d;
        const double del = d * c;
        h *= del;
        if (fabs(del - 1.0) <= eps) break;
    }
    return h;
}

double stats_betai(double a, double b, double x) {
    if (!(a > 0) || !(b > 0) || !(x >= 0) || !(x <= 1)) return NAN;
    if (x == 0 || x == 1) return x;
    const double lbt = lgamma(a + b) - lgamma(a) - lgamma(b) + a * log(x) + b * log1p(-x);
    const double bt = exp(lbt);
    if (x < (a + 1.0) / (a + b + 2.0)) return bt * betacf(a, b, x) / a;
    return 1.0 - bt * betacf(b, a, 1.0 - x) / b;
}

/* P(T > t) for t >= 0. */
static double t_upper(double t, double df) {
    if (isinf(df)) return 0.5 * erfc(t / sqrt(2.0));
    if (isinf(t)) return 0.0;
    /* x = df / (df + t^2), written so that it does not round to 1 for small t */
    const double x = 1.0 / (1.0 + (t / df) * t);
    return 0.5 * stats_betai(0.5 * df, 0.5, x);
}

double stats_t_cdf(double t, double df) {
    if (isnan(t) || !(df > 0)) return NAN;
    const double u = t_upper(fabs(t), df);
    return t >= 0 ? 1.0 - u : u;
}

double stats_t_quantile(double p, double df) {
    if (!(p > 0) || !(p < 1) || !(df > 0)) return NAN;
    if (p == 0.5) return 0.0;
    if (p < 0.5) return -stats_t_quantile(1.0 - p, df);
    const double tail = 1.0 - p; /* find t > 0 with P(T > t) = tail */
    double lo = 0.0, hi = 1.0;
    while (t_upper(hi, df) > tail) {
        lo = hi;
        hi *= 2.0;
        if (hi > 1e300) return INFINITY;
    }
    for (int i = 0; i < 2000 && hi - lo > 1e-13 * hi; i++) {
        const double mid = 0.5 * (lo + hi);
        if (t_upper(mid, df) > tail) lo = mid;
        else hi = mid;
    }
    return 0.5 * (lo + hi);
}

int stats_gap(const double *a, int n1, const double *b, int n2, double level, StatsGap *out) {
    out->n1 = n1;
    out->n2 = n2;
    out->m1 = stats_mean(a, n1);
    out->s1 = stats_sd(a, n1);
    out->m2 = stats_mean(b, n2);
    out->s2 = stats_sd(b, n2);
    out->diff = out->m1 - out->m2;
    out->d = stats_cohen_d(out->m1, out->s1, n1, out->m2, out->s2, n2);
    out->g = stats_hedges_g(out->d, n1, n2);
    out->se = out->df = out->lo = out->hi = NAN;
    if (n1 < 1 || n2 < 1) return -1;
    if (n1 < 2 || n2 < 2 || !(level > 0 && level < 1)) return 0;
    const double v1 = out->s1 * out->s1 / n1, v2 = out->s2 * out->s2 / n2;
    out->se = sqrt(v1 + v2);
    if (out->se == 0) { /* no spread at all: the difference is exact */
        out->lo = out->hi = out->diff;
        return 0;
    }
    out->df = (v1 + v2) * (v1 + v2) / (v1 * v1 / (n1 - 1) + v2 * v2 / (n2 - 1));
    const double t = stats_t_quantile(0.5 + 0.5 * level, out->df);
    out->lo = out->diff - t * out->se;
    out->hi = out->diff + t * out->se;
    return 0;
}
