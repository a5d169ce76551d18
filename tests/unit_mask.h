/* unit_mask.h — the ReLU mask hash of a backbone unit's output for the finite-difference model
 * checks of test_layers.c and test_moeconv.c (a step of the check is valid only while no ReLU
 * flips: gradcheck.h). Include after core/model.h and gradcheck.h. */
#ifndef ML_TEST_UNIT_MASK_H
#define ML_TEST_UNIT_MASK_H

#include <stdint.h>
#include <stdlib.h>

/* the ReLU mask of a unit's output; a deferred output (model.h: the next unit applies the batch
 * norm + ReLU itself) is not materialised, so its mask is z a + b > 0 */
static uint64_t unit_mask_hash(const Model *m, const Unit *u, int B) {
    const long per = (long)B * u->Ho * u->Wo, n = per * u->OC;
    if (!u->defer) return fd_hash_mask(m->act.buf + u->out, n);
    const float *z = m->act.buf + u->z, *a = m->act.buf + u->coef;
    float *t = malloc(sizeof(float) * n);
    for (int ch = 0; ch < u->OC; ch++)
        for (long i = 0; i < per; i++) t[ch * per + i] = z[ch * per + i] * a[ch] + a[u->OC + ch];
    const uint64_t h = fd_hash_mask(t, n);
    free(t);
    return h;
}

#endif
