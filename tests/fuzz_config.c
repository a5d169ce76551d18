/* fuzz_config.c — libFuzzer target for the config file's parser (app/cli/config.c): any bytes as a
 * config file must give settings in their documented ranges and problems that name the file and
 * line, never a crash or a read past the input. Seeds (FUZZ_STANDALONE): the default file, every
 * key with good and bad values, hostile lines. */
#define _GNU_SOURCE

#include "app/cli/config.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "views/layout.h"

#include "fuzz_driver.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > (1 << 20)) return 0;
    UiConfig c;
    ui_config_defaults(&c);
    ui_config_parse(&c, (const char *)data, size, "fuzz"); /* no NUL needed: the length is given */
    const unsigned panels = ((1u << (PANEL_LOG + 1)) - 1) & ~((1u << PANEL_CURVES) - 1);
    if (c.view.theme < 0 || c.view.theme >= THEME_KIND_COUNT || (c.mouse != 0 && c.mouse != 1) ||
        (c.view.hide & ~panels) || (c.view.log_rows != 0 && (c.view.log_rows < 3 || c.view.log_rows > 40)) ||
        (c.view.top_share != 0 && (c.view.top_share < 20 || c.view.top_share > 80)) ||
        (c.view.smoothing != -1.0 && !(c.view.smoothing >= 0 && c.view.smoothing <= 0.999)) ||
        !(c.refresh >= 0.02 && c.refresh <= 2) || c.nproblems < 0)
        abort();
    for (int i = 0; i < c.nproblems && i < CONFIG_PROBLEMS_MAX; i++)
        if (strncmp(c.problem[i], "fuzz:", 5) || !memchr(c.problem[i], 0, sizeof c.problem[i])) abort();
    char buf[1024];
    ui_config_format(&c, buf, sizeof buf);
    return 0;
}

#ifdef FUZZ_STANDALONE
static void fuzz_seeds(void (*run)(const uint8_t *, size_t)) {
    static const char *seeds[] = {
        "# moelab config\ntheme = dark\nmouse = on\nhide = \nlog_rows = 0\ntop_share = 0\nsmoothing = 0.9\nrefresh = 0.1\n",
        "theme = light\r\nmouse=off\r\nhide = log, temperature ,curves\r\nlog_rows = 40\r\ntop_share = 80\r\n",
        "theme = HIGH-CONTRAST # yes\nsmoothing = 0.999\nrefresh = \"2\"\nmouse = 0\nhide = load scalars heatmap\n",
        "theme = sepia\nmouse = maybe\nhide = log, sidebar\nlog_rows = 2\nlog_rows = 7.5\ntop_share = 95\n"
        "smoothing = 1\nsmoothing = nan\nrefresh = 0\nrefresh = 1e999\nrefresh = -0\n= dark\nwords\n\"\n==\n#\n",
        "theme = \"\"\nhide = ,,,\nlog_rows = 0x10\ntop_share = 2e1\nsmoothing = -0\nrefresh = 0.02\nrefresh=inf\n",
    };
    for (size_t i = 0; i < sizeof seeds / sizeof *seeds; i++) run((const uint8_t *)seeds[i], strlen(seeds[i]));
    static char big[3000];
    memset(big, 'x', sizeof big);
    memcpy(big, "theme = ", 8);
    big[sizeof big - 1] = '\n';
    run((const uint8_t *)big, sizeof big);
    const char nul[] = "theme = li\0ght\nmouse = off\n";
    run((const uint8_t *)nul, sizeof nul - 1);
}
#endif
