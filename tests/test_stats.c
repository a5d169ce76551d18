/* test_stats.c — core/stats.c against values worked out by hand (and cross-checked with
 * scipy.stats 1.10: t.ppf, t.cdf):
 *
 * Two groups a = {1, 2, 3}, b = {4, 5, 6, 7}:
 *   m1 = 6/3 = 2                      m2 = 22/4 = 5.5
 *   s1^2 = (1 + 0 + 1)/2 = 1          s2^2 = (2.25 + 0.25 + 0.25 + 2.25)/3 = 5/3
 *   s1 = 1                            s2 = sqrt(5/3) = 1.2909944487358056
 *   pooled s_p^2 = (2*1 + 3*5/3)/(3 + 4 - 2) = 7/5 = 1.4,  s_p = 1.1832159566199232
 *   Cohen's d = (2 - 5.5)/1.1832159566199232 = -2.958039891549808
 *   Hedges' g = d (1 - 3/(4*7 - 9)) = d * 16/19 = -2.4909809613051013
 *   Welch: v1 = 1/3, v2 = (5/3)/4 = 5/12, se^2 = 3/4, se = 0.8660254037844386
 *          df = (3/4)^2 / ((1/3)^2/2 + (5/12)^2/3) = 0.5625 / (1/18 + 25/432) = 0.5625 / (49/432)
 *             = 243/49 = 4.959183673469388
 *          t_{0.975, 243/49} = 2.576958449135153
 *          CI = -3.5 -+ 2.576958449135153 * 0.8660254037844386 = [-5.7317114814479915, -1.2682885185520085]
 * t quantiles at 0.975: df 1 12.706204736432095, 2 4.302652729911275, 5 2.5705818366147395,
 *   10 2.2281388519649385, 30 2.0422724563012373, 1e6 1.9599663568141066, 0.5 164.55767352096103;
 *   at 0.9, df 5: 1.4758840487820273. t CDF at 1.5: df 1 0.8128329581890013 (= 1/2 + atan(1.5)/pi),
 *   df 5 0.9030481598787634. */
#include "core/stats.h"

#include <math.h>
#include <stdio.h>

static int failures = 0, checks = 0;

static void check_near(const char *what, double got, double want, double tol) {
    checks++;
    const int ok = fabs(got - want) <= tol * fmax(1.0, fabs(want));
    if (!ok) failures++;
    printf("%s  %-44s got %.15g want %.15g\n", ok ? "PASS" : "FAIL", what, got, want);
}

static void is_nan(const char *what, double got) {
    checks++;
    if (!isnan(got)) failures++;
    printf("%s  %-44s got %g (want NaN)\n", isnan(got) ? "PASS" : "FAIL", what, got);
}

int main(void) {
    const double a[] = {1, 2, 3}, b[] = {4, 5, 6, 7};
    check_near("mean {1,2,3}", stats_mean(a, 3), 2.0, 1e-15);
    check_near("mean {4,5,6,7}", stats_mean(b, 4), 5.5, 1e-15);
    check_near("sd {1,2,3}", stats_sd(a, 3), 1.0, 1e-15);
    check_near("sd {4,5,6,7}", stats_sd(b, 4), 1.2909944487358056, 1e-14);
    check_near("pooled sd", stats_pooled_sd(1.0, 3, sqrt(5.0 / 3.0), 4), 1.1832159566199232, 1e-14);
    const double d = stats_cohen_d(2.0, 1.0, 3, 5.5, sqrt(5.0 / 3.0), 4);
    check_near("Cohen's d", d, -2.958039891549808, 1e-13);
    check_near("Hedges' g", stats_hedges_g(d, 3, 4), -2.4909809613051013, 1e-13);

    StatsGap gp;
    int r = stats_gap(a, 3, b, 4, 0.95, &gp);
    checks++;
    if (r != 0) failures++;
    printf("%s  stats_gap returns 0\n", r == 0 ? "PASS" : "FAIL");
    check_near("gap diff", gp.diff, -3.5, 1e-15);
    check_near("gap d", gp.d, -2.958039891549808, 1e-13);
    check_near("gap g", gp.g, -2.4909809613051013, 1e-13);
    check_near("Welch se", gp.se, 0.8660254037844386, 1e-14);
    check_near("Welch df = 243/49", gp.df, 243.0 / 49.0, 1e-13);
    check_near("95% CI low", gp.lo, -5.7317114814479915, 1e-9);
    check_near("95% CI high", gp.hi, -1.2682885185520085, 1e-9);
    /* swapping the groups flips the signs */
    stats_gap(b, 4, a, 3, 0.95, &gp);
    check_near("swapped d", gp.d, 2.958039891549808, 1e-13);
    check_near("swapped CI low", gp.lo, 1.2682885185520085, 1e-9);

    check_near("t quantile 0.975 df 1", stats_t_quantile(0.975, 1), 12.706204736432095, 1e-9);
    check_near("t quantile 0.975 df 2", stats_t_quantile(0.975, 2), 4.302652729911275, 1e-9);
    check_near("t quantile 0.975 df 5 = 2.570582", stats_t_quantile(0.975, 5), 2.5705818366147395, 1e-9);
    check_near("t quantile 0.975 df 10", stats_t_quantile(0.975, 10), 2.2281388519649385, 1e-9);
    check_near("t quantile 0.975 df 30", stats_t_quantile(0.975, 30), 2.0422724563012373, 1e-9);
    check_near("t quantile 0.975 df 243/49", stats_t_quantile(0.975, 243.0 / 49.0), 2.576958449135153, 1e-9);
    check_near("t quantile 0.975 df 0.5", stats_t_quantile(0.975, 0.5), 164.55767352096103, 1e-8);
    check_near("t quantile 0.975 df 1e6", stats_t_quantile(0.975, 1e6), 1.9599663568141066, 1e-9);
    check_near("t quantile 0.975 df inf (normal)", stats_t_quantile(0.975, INFINITY), 1.959963984540054, 1e-9);
    check_near("t quantile 0.9 df 5", stats_t_quantile(0.9, 5), 1.4758840487820273, 1e-9);
    check_near("t quantile 0.025 df 5 (symmetry)", stats_t_quantile(0.025, 5), -2.5705818366147395, 1e-9);
    check_near("t quantile 0.5", stats_t_quantile(0.5, 7), 0.0, 1e-15);
    check_near("t cdf 1.5 df 1 (Cauchy)", stats_t_cdf(1.5, 1), 0.5 + atan(1.5) / M_PI, 1e-12);
    check_near("t cdf 1.5 df 5", stats_t_cdf(1.5, 5), 0.9030481598787634, 1e-12);
    check_near("t cdf -1.5 df 5", stats_t_cdf(-1.5, 5), 1 - 0.9030481598787634, 1e-12);
    check_near("t cdf 0", stats_t_cdf(0, 3), 0.5, 1e-15);
    check_near("betai(2, 3, 0.4) = 0.5248", stats_betai(2, 3, 0.4), 0.5248, 1e-12); /* 1 - sum_{j<2} C(4,j) .4^j .6^(4-j) */
    check_near("quantile inverts cdf (df 3.7, p 0.99)", stats_t_cdf(stats_t_quantile(0.99, 3.7), 3.7), 0.99, 1e-11);

    /* undefined cases are NaN, never a division by zero */
    is_nan("mean of nothing", stats_mean(a, 0));
    is_nan("sd of one value", stats_sd(a, 1));
    is_nan("d with zero spread", stats_cohen_d(1, 0, 3, 1, 0, 3));
    is_nan("g of NaN d", stats_hedges_g(NAN, 3, 3));
    is_nan("t quantile p = 1", stats_t_quantile(1.0, 5));
    is_nan("t quantile df = 0", stats_t_quantile(0.9, 0));
    const double one[] = {0.8}, same[] = {0.5, 0.5};
    stats_gap(one, 1, b, 4, 0.95, &gp);
    is_nan("CI with a group of one", gp.lo);
    check_near("d with a group of one uses the other's spread", gp.d, (0.8 - 5.5) / sqrt(5.0 / 3.0), 1e-13);
    stats_gap(same, 2, same, 2, 0.95, &gp);
    check_near("no spread: CI is [diff, diff]", gp.hi - gp.lo, 0.0, 0.0);
    is_nan("no spread: d undefined", gp.d);

    printf("%d passed, %d failed\n", checks - failures, failures);
    return failures ? 1 : 0;
}
