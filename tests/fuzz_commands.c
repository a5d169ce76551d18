/* fuzz_commands.c — libFuzzer target for the command language: command-file text
 * (command_text_parse: lines of any length, comments, `at STEP`, every command and its
 * arguments) and each line through command_parse, as the live screen's command line takes it.
 * Any input must give a parsed list or a message, never a crash, a hang or a read past the
 * input. Seeds (FUZZ_STANDALONE): a file using every command, long comment lines, hostile values. */
#define _GNU_SOURCE

#include "app/cli/commands.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_driver.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > (1 << 20)) return 0;
    char *text = malloc(size + 1);
    if (!text) return 0;
    memcpy(text, data, size);
    text[size] = 0; /* a command file is text: the loader refuses a NUL byte */
    ScheduledCmd *v = NULL;
    int n = 0;
    char err[1200];
    if (command_text_parse(text, "fuzz", &v, &n, err, sizeof err) == 0) {
        for (int i = 1; i < n; i++)
            if (v[i].step < v[i - 1].step) abort(); /* must come back sorted */
        free(v);
    }
    /* each line as typed on the command line */
    for (char *line = text, *next; line && *line; line = next) {
        next = strchr(line, '\n');
        if (next) *next++ = 0;
        TrainerCmd c;
        command_parse(line, &c, err, sizeof err);
    }
    free(text);
    return 0;
}

#ifdef FUZZ_STANDALONE
static void fuzz_seeds(void (*run)(const uint8_t *, size_t)) {
    static const char *seeds[] = {
        "at 0 set tau 0.5\nat 10 anneal sigmoid now 0.05 s=12 c=0.4\nat 20 eval\nat 30 snapshot\nat 40 quit\n",
        "pause\nresume\nstep 5\nhelp\nset lr 0.01\nset cf -1\nset alpha 0.02\nset beta 0\nset noise 0\nset bias-rate 0.1\n",
        "at 5 anneal cosine-restart 1 0.1 every=10 gamma=2 min=0.01\nat 3 anneal step now 0.2 every=4 gamma=0.5\n",
        "# comment\n\n   \nat 99999999999999999999 set tau 1\nat -1 quit\nat 1e3 eval\nset tau nan\nset tau 1e-40\nset lr inf\n",
        "anneal exp now 0.1 every=1e12\nanneal linear 0 0\nanneal bogus\nset\nset x 1\nstep -3\nstep 99999999999999999999\n",
        "at 0 on-collapse set tau 2; set alpha 0.05\nat 1 on-collapse pause\nat 2 On-Collapse off\nat 3 on-collapse\n"
        "at 4 on-collapse ;;\nat 5 on-collapse quit\nat 6 on-collapse set tau 2;on-collapse pause\nat 7 on-collapse eval; snapshot\n",
        "at 0 set tau 0.3 @moe2\nat 1 anneal exp now 0.05 @head\nset cf 2 @MOE0\nset lr 0.1 @moe2\nset tau 1 @\n"
        "set tau 1 @@x\npause @moe2\nset tau @moe2\n@moe2\nset noise 0 @aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\n"
        "at 2 on-collapse set tau 2 @moe3; set alpha 0.05 @head\nanneal linear 1 0.1 @moe1 # socket\n",
    };
    for (size_t i = 0; i < sizeof seeds / sizeof *seeds; i++) run((const uint8_t *)seeds[i], strlen(seeds[i]));
    char big[2000];
    memset(big, 'x', sizeof big);
    big[0] = '#';
    big[sizeof big - 6] = ' ';
    memcpy(big + sizeof big - 5, "quit", 4);
    big[sizeof big - 1] = '\n';
    run((const uint8_t *)big, sizeof big);
    memcpy(big, "at 1 ", 5);
    run((const uint8_t *)big, sizeof big);
}
#endif
