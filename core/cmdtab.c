/* cmdtab.c — the table of the command language's words (see cmdtab.h). */
#include "cmdtab.h"

#include <stdio.h>
#include <string.h>

#include "params.h"
#include "tau.h"
#include "vocab.h"

#define ROW_(kind, name, args, help, rule, layer, file) [kind] = {name, args, help, rule, layer, file},
const CmdInfo cmd_table[CMD_KIND_COUNT] = {CMD_ROWS(ROW_)};
#define NAME_(kind, name, args, help, rule, layer, file) name,
const char *const cmd_words[] = {CMD_ROWS(NAME_) NULL};
_Static_assert(sizeof cmd_words / sizeof cmd_words[0] == CMD_KIND_COUNT + 1, "CMD_ROWS: one row per CmdKind");
#define RULE_1(name) name,
#define RULE_0(name)
#define RULE_(kind, name, args, help, rule, layer, file) RULE_##rule(name)
const char *const cmd_rule_words[] = {"pause", "off", CMD_ROWS(RULE_) NULL};

int cmd_find(const char *word) {
    if (!strcmp(word, "exit")) return CMD_QUIT;
    for (int k = 0; k < CMD_KIND_COUNT; k++)
        if (!strcmp(word, cmd_table[k].name)) return k;
    return -1;
}

const char *cmd_usage(int kind, char *buf, size_t n) {
    if (kind < 0 || kind >= CMD_KIND_COUNT) {
        snprintf(buf, n, "?");
        return buf;
    }
    const CmdInfo *c = &cmd_table[kind];
    char words[256];
    const char *args = c->args;
    if (kind == CMD_SET) {
        snprintf(buf, n, "set %s VALUE", vocab_join(words, sizeof words, cmd_param_words, "|", NULL));
    } else if (kind == CMD_ANNEAL) {
        const char *keys = strstr(args, "[KEY=V ...]");
        snprintf(buf, n, "%s %.*s%s", c->name, keys ? (int)(keys - args) : (int)strlen(args), args,
                 keys ? tau_key_usage(words, sizeof words) : "");
    } else {
        snprintf(buf, n, "%s%s%s", c->name, *args ? " " : "", args);
    }
    return buf;
}
