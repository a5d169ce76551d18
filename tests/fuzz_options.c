/* fuzz_options.c — libFuzzer target for the training option parser (app/cli/options.c): the input,
 * split at newlines into at most 30 arguments after `train`, goes through app_options_parse (every
 * number, choice, string and the comma lists of --moe-after, --ffn-after, --moe-hidden,
 * --moe-experts, --moe-k). When it parses, the backbone-layer lists also go through model_init on
 * a tiny model (hidden widths capped), which checks stages, list lengths and k <= E. Any input must
 * give options or a message, never a crash or a read past an argument. Seeds (FUZZ_STANDALONE):
 * valid and hostile lists. Run with -close_fd_mask=2 to silence the parser's messages. */
#define _GNU_SOURCE

#include "app/cli/options.h"
/* options.c parses --on-collapse with the command language parser */
#include "app/cli/commands.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_driver.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > 4096) return 0;
    char *text = malloc(size + 1);
    if (!text) return 0;
    memcpy(text, data, size);
    text[size] = 0;
    char *argv[32];
    int argc = 0;
    argv[argc++] = "train";
    for (char *p = text, *next; p && argc < 31; p = next) {
        next = strchr(p, '\n');
        if (next) *next++ = 0;
        argv[argc++] = p;
    }
    argv[argc] = NULL;
    AppOptions *o = malloc(sizeof *o);
    if (o) {
        app_options_defaults(o);
        if (app_options_parse(o, argc, argv, "train") == 0) {
            ModelConfig mc;
            model_config_defaults(&mc);
            const ModelConfig *pc = &o->train.model;
            mc.in_h = mc.in_w = 8;
            mc.width = 0.125f;
            mc.batch = 2;
            mc.head.kind = HEAD_DENSE;
            mc.head.h = 4;
            mc.head.E = pc->head.E;
            mc.head.k = pc->head.k;
            mc.moe_n = pc->moe_n, mc.ffn_n = pc->ffn_n, mc.bb_nh = pc->bb_nh, mc.bb_nE = pc->bb_nE,
            mc.bb_nk = pc->bb_nk;
            memcpy(mc.moe_after, pc->moe_after, sizeof mc.moe_after);
            memcpy(mc.ffn_after, pc->ffn_after, sizeof mc.ffn_after);
            memcpy(mc.bb_E, pc->bb_E, sizeof mc.bb_E);
            memcpy(mc.bb_k, pc->bb_k, sizeof mc.bb_k);
            for (int i = 0; i < MODEL_MAX_BBL; i++)
                mc.bb_hidden[i] = pc->bb_hidden[i] > 0 ? 1 + pc->bb_hidden[i] % 8 : 0;
            Model m;
            if (model_init(&m, &mc) == ML_OK) model_free(&m);
        }
        free(o);
    }
    free(text);
    return 0;
}

#ifdef FUZZ_STANDALONE
static void fuzz_seeds(void (*run)(const uint8_t *, size_t)) {
    static const char *seeds[] = {
        "--moe-after\n2,3\n--moe-hidden\n32,64\n--head\ndense",
        "--moe-after=0,1,2,3\n--moe-experts\n2,3,4,64\n--moe-k\n1,2,3,64",
        "--ffn-after\n1\n--moe-after\n1\n--moe-hidden\n8",
        "--moe-after\n,,\n--moe-hidden\n1,2,3,4,5\n--moe-k\n0",
        "--moe-after\n99999999999999999999\n--ffn-after\n-0\n--moe-hidden\n1e9",
        "--moe-after\n3,2,1,0\n--ffn-after\n0\n--moe-k\n2,2,2,2\n--experts\n1",
        "--batch\n2\n--k\n9\n--dataset\n\n--session",
    };
    for (size_t i = 0; i < sizeof seeds / sizeof *seeds; i++) run((const uint8_t *)seeds[i], strlen(seeds[i]));
}
#endif
