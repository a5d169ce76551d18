/* stats.h — the statistics of multi-seed comparisons (README "The summary" under "Sweeps"): mean,
 * sample standard deviation, Cohen's d with the pooled standard deviation, Hedges' small-sample
 * correction, and the 95% confidence interval of a difference of means (Welch).
 *
 * Pure functions of their arguments: no allocation, no I/O, no global state. Undefined results
 * (a standard deviation of fewer than two values, an effect size with zero spread) are NaN,
 * never a division by zero.
 *
 * Formulas (group 1 = e.g. the MoE runs, group 2 = the dense baseline):
 *   mean        m = sum x / n
 *   sd          s = sqrt(sum (x - m)^2 / (n - 1))                              (n >= 2)
 *   pooled sd   s_p = sqrt(((n1 - 1) s1^2 + (n2 - 1) s2^2) / (n1 + n2 - 2))
 *   Cohen's d   d = (m1 - m2) / s_p                                            (s_p > 0)
 *   Hedges' g   g = d (1 - 3 / (4 (n1 + n2) - 9))
 *   Welch       se = sqrt(s1^2/n1 + s2^2/n2),
 *               df = se^4 / ((s1^2/n1)^2/(n1 - 1) + (s2^2/n2)^2/(n2 - 1))  (Welch-Satterthwaite)
 *               CI = (m1 - m2) -+ t_{1 - a/2, df} se
 *
 * The Student t quantile is the exact inverse of the t CDF, which is computed from the
 * regularized incomplete beta function, P(T <= t) = 1 - I_{df/(df + t^2)}(df/2, 1/2) / 2 for
 * t >= 0, I evaluated by its continued fraction (modified Lentz; Numerical Recipes 6.4), and
 * inverted by bisection to 1e-12 relative. Any real df > 0 (Welch's df is not an integer). */
#ifndef ML_STATS_H
#define ML_STATS_H

/* Mean of n values (NaN if n < 1). */
double stats_mean(const double *x, int n);
/* Sample standard deviation, divisor n - 1 (NaN if n < 2). */
double stats_sd(const double *x, int n);
/* Pooled standard deviation of two groups given their sds and sizes (NaN if n1 + n2 < 3). */
double stats_pooled_sd(double s1, int n1, double s2, int n2);
/* Cohen's d = (m1 - m2) / s_p (NaN if s_p is NaN or 0). */
double stats_cohen_d(double m1, double s1, int n1, double m2, double s2, int n2);
/* Hedges' g = d (1 - 3 / (4 (n1 + n2) - 9)) (NaN if d is NaN or n1 + n2 < 3). */
double stats_hedges_g(double d, int n1, int n2);

/* Regularized incomplete beta I_x(a, b), a, b > 0, 0 <= x <= 1 (NaN outside). */
double stats_betai(double a, double b, double x);
/* Student t CDF P(T <= t) with df > 0 degrees of freedom (df = INFINITY: standard normal). */
double stats_t_cdf(double t, double df);
/* Student t quantile: the t with P(T <= t) = p, 0 < p < 1, df > 0 (NaN outside). */
double stats_t_quantile(double p, double df);

/* Everything about the difference of two groups of values. */
typedef struct {
    int n1, n2;
    double m1, s1, m2, s2; /* means and sample sds (sd NaN for n < 2) */
    double diff;           /* m1 - m2 */
    double d, g;           /* Cohen's d, Hedges' g (NaN when undefined) */
    double se, df;         /* Welch standard error and degrees of freedom */
    double lo, hi;         /* confidence interval of diff at `level` (NaN when undefined;
                             * [diff, diff] when both groups have zero spread) */
} StatsGap;

/* Fills *out for groups a (n1 values) and b (n2 values) with a two-sided `level` confidence
 * interval (e.g. 0.95). Returns 0, or -1 if a group is empty (then *out holds NaNs). */
int stats_gap(const double *a, int n1, const double *b, int n2, double level, StatsGap *out);

#endif
