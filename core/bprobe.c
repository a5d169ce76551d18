/* bprobe.c — the batch-composition probe (bprobe.h). */
#include "bprobe.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/rng.h"

static const char *const bp_names[BP_MAKEUPS] = {"file order", "shuffled", "sorted by class", "single-class"};

/* mean cross-entropy and accuracy of logits (n, C) against labels; predictions into pred */
static void bp_score(const float *z, const int32_t *labels, int n, int C, int *pred, double *acc, double *loss) {
    double L = 0.0;
    long ok = 0;
    for (int i = 0; i < n; i++) {
        const float *zi = z + (size_t)i * C;
        int a = 0;
        double mx = zi[0];
        for (int c = 1; c < C; c++)
            if (zi[c] > zi[a]) a = c, mx = zi[c];
        double s = 0.0;
        for (int c = 0; c < C; c++) s += exp((double)zi[c] - mx);
        L += mx + log(s) - zi[labels[i]];
        pred[i] = a;
        ok += a == labels[i];
    }
    *acc = n ? (double)ok / n : NAN;
    *loss = n ? L / n : NAN;
}

ml_status batch_probe_run(Trainer *t, uint64_t seed, BatchProbe *out) {
    memset(out, 0, sizeof *out);
    const int n = t->src.n_test, C = t->src.classes, B = t->cfg.model.batch;
    const int nl = trainer_nlayers(t);
    out->n_test = n;
    out->classes = C;
    out->batch = B;
    out->nlayers = nl < BP_MAX_LAYERS ? nl : BP_MAX_LAYERS;
    for (int l = 0; l < out->nlayers; l++) snprintf(out->layer[l], sizeof out->layer[l], "%s", trainer_layer_name(t, l));
    const size_t nz = (size_t)n * C, nf = (size_t)n * (nl > 0 ? nl : 1);
    float *z0 = malloc(nz * sizeof(float)), *z = malloc(nz * sizeof(float));
    int *f0 = malloc(nf * sizeof(int)), *f = malloc(nf * sizeof(int));
    int *p0 = malloc((size_t)n * sizeof(int)), *p = malloc((size_t)n * sizeof(int));
    int *idx = malloc((size_t)n * sizeof(int)), *bs = malloc(((size_t)n + 2) * sizeof(int));
    int32_t *lab = malloc((size_t)n * sizeof(int32_t));
    int *cnt = calloc((size_t)C + 1, sizeof(int));
    ml_status st = ML_OK;
    if (!z0 || !z || !f0 || !f || !p0 || !p || !idx || !bs || !lab || !cnt) st = ml_fail(ML_ERR_NOMEM, "probe: out of memory");
    for (int k = 0; st == ML_OK && k < BP_MAKEUPS; k++) {
        BatchProbeRow *r = &out->row[k];
        r->name = bp_names[k];
        int nb = 0;
        if (k == BP_FILE || k == BP_SHUFFLED || k == BP_SORTED) {
            for (int i = 0; i < n; i++) idx[i] = i;
            if (k == BP_SHUFFLED) {
                Rng g;
                rng_seed(&g, seed);
                for (int i = n - 1; i > 0; i--) {
                    const int j = (int)(rng_u64(&g) % (uint64_t)(i + 1));
                    const int x = idx[i];
                    idx[i] = idx[j];
                    idx[j] = x;
                }
            } else if (k == BP_SORTED) { /* counting sort by label: stable */
                memset(cnt, 0, ((size_t)C + 1) * sizeof(int));
                for (int i = 0; i < n; i++) cnt[lab[i] + 1]++;
                for (int c = 0; c < C; c++) cnt[c + 1] += cnt[c];
                for (int i = 0; i < n; i++) idx[cnt[lab[i]]++] = i;
            }
            for (int s0 = 0; s0 < n; s0 += B) bs[nb++] = s0;
            bs[nb] = n;
        } else { /* single-class batches: each class's run cut at B */
            memset(cnt, 0, ((size_t)C + 1) * sizeof(int));
            for (int i = 0; i < n; i++) cnt[lab[i] + 1]++;
            for (int c = 0; c < C; c++) cnt[c + 1] += cnt[c];
            int *start = malloc(((size_t)C + 1) * sizeof(int));
            if (!start) {
                st = ml_fail(ML_ERR_NOMEM, "probe: out of memory");
                break;
            }
            memcpy(start, cnt, ((size_t)C + 1) * sizeof(int));
            for (int i = 0; i < n; i++) idx[cnt[lab[i]]++] = i;
            for (int c = 0; c < C; c++)
                for (int s0 = start[c]; s0 < start[c + 1]; s0 += B) bs[nb++] = s0;
            bs[nb] = n;
            free(start);
        }
        r->batches = nb;
        float *zk = k == BP_FILE ? z0 : z;
        int *fk = k == BP_FILE ? f0 : f, *pk = k == BP_FILE ? p0 : p;
        st = trainer_eval_batches(t, idx, bs, nb, zk, nl > 0 ? fk : NULL, k == BP_FILE ? lab : NULL);
        if (st != ML_OK) break;
        if (k == BP_FILE)
            for (int c = 0; c < n; c++)
                if (lab[c] < 0 || lab[c] >= C) {
                    st = ml_fail(ML_ERR_FORMAT, "probe: test label %d of image %d is not in 0..%d", lab[c], c, C - 1);
                    break;
                }
        if (st != ML_OK) break;
        bp_score(zk, lab, n, C, pk, &r->acc, &r->loss);
        if (k == BP_FILE) {
            for (size_t i = 0; i < nz; i++)
                if (fabs(zk[i]) > out->max_abs_logit) out->max_abs_logit = fabs(zk[i]);
            continue;
        }
        for (int i = 0; i < n; i++) {
            r->pred_changed += pk[i] != p0[i];
            r->logits_changed += memcmp(zk + (size_t)i * C, z0 + (size_t)i * C, sizeof(float) * C) != 0;
            for (int c = 0; c < C; c++) {
                const double d = fabs((double)zk[(size_t)i * C + c] - z0[(size_t)i * C + c]);
                if (d > r->max_dlogit || isnan(d)) r->max_dlogit = isnan(d) ? INFINITY : d;
            }
        }
        for (int l = 0; l < out->nlayers; l++)
            for (int i = 0; i < n; i++) r->route_changed[l] += fk[(size_t)l * n + i] != f0[(size_t)l * n + i];
    }
    free(z0);
    free(z);
    free(f0);
    free(f);
    free(p0);
    free(p);
    free(idx);
    free(bs);
    free(lab);
    free(cnt);
    return st;
}

double batch_probe_max_dlogit(const BatchProbe *p) {
    double m = 0.0;
    for (int k = 1; k < BP_MAKEUPS; k++)
        if (p->row[k].max_dlogit > m) m = p->row[k].max_dlogit;
    return m;
}

int batch_probe_any_change(const BatchProbe *p) {
    for (int k = 1; k < BP_MAKEUPS; k++) {
        const BatchProbeRow *r = &p->row[k];
        if (r->pred_changed || r->logits_changed || r->max_dlogit > 0) return 1;
        for (int l = 0; l < p->nlayers; l++)
            if (r->route_changed[l]) return 1;
    }
    return 0;
}

int batch_probe_depends(const BatchProbe *p) {
    const double bound = BP_ROUNDING * (p->max_abs_logit > 1.0 ? p->max_abs_logit : 1.0);
    for (int k = 1; k < BP_MAKEUPS; k++) {
        const BatchProbeRow *r = &p->row[k];
        if (r->pred_changed || !(r->max_dlogit <= bound)) return 1;
        for (int l = 0; l < p->nlayers; l++)
            if (r->route_changed[l]) return 1;
    }
    return 0;
}
