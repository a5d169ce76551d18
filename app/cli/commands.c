/* commands.c — parser of the command language (see commands.h). */
#include "app/cli/commands.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>
#include <sys/stat.h>
#include <fcntl.h>

#include "core/cmdtab.h"
#include "core/vocab.h"

#include <stddef.h>

/* The names of the commands whose row has `flag` set, "a, b, c" (cmd_table). */
static const char *words_with(char *buf, size_t n, size_t flag_off) {
    size_t len = 0;
    buf[0] = '\0';
    for (int k = 0; k < CMD_KIND_COUNT && len < n; k++)
        if (*(const int *)((const char *)&cmd_table[k] + flag_off))
            len += (size_t)snprintf(buf + len, n - len, "%s%s", len ? ", " : "", cmd_table[k].name);
    return buf;
}

#define MAXTOK 12

static int tokenize(char *s, char **tok) {
    int n = 0;
    for (char *save = NULL, *p = strtok_r(s, " \t\r\n", &save); p; p = strtok_r(NULL, " \t\r\n", &save)) {
        if (n == MAXTOK) return -1;
        tok[n++] = p;
    }
    return n;
}

static int parse_num(const char *s, double *v) {
    char *end;
    errno = 0;
    *v = strtod(s, &end);
    return (errno || end == s || *end || !isfinite(*v)) ? -1 : 0;
}

int command_rule_parse(const char *text, TrainerCmd *out, int max, char *err, size_t errn) {
    int n = 0;
    const char *p = text;
    for (;;) {
        const char *semi = strchr(p, ';');
        const size_t len = semi ? (size_t)(semi - p) : strlen(p);
        char part[512];
        if (len >= sizeof part) {
            snprintf(err, errn, "on-collapse: a command is too long");
            return -1;
        }
        memcpy(part, p, len);
        part[len] = 0;
        TrainerCmd c;
        char e2[400];
        if (command_parse(part, &c, e2, sizeof e2)) {
            snprintf(err, errn, "on-collapse: %s", e2);
            return -1;
        }
        if (!cmd_table[c.kind].rule) {
            char rw[128];
            snprintf(err, errn, "on-collapse: '%s' cannot be part of a rule (%s; or 'pause' alone)", c.text,
                     words_with(rw, sizeof rw, offsetof(CmdInfo, rule)));
            return -1;
        }
        if (n == max) {
            snprintf(err, errn, "on-collapse: more than %d commands", max);
            return -1;
        }
        c.origin = CMD_FROM_RULE;
        out[n++] = c;
        if (!semi) break;
        p = semi + 1;
    }
    return n;
}

/* `on-collapse pause | off | COMMAND[; COMMAND...]`: the rest of the line is the rule. */
static int parse_on_collapse(const char *rest, TrainerCmd *cmd, char *err, size_t errn) {
    while (*rest == ' ' || *rest == '\t') rest++;
    char r[512];
    snprintf(r, sizeof r, "%s", rest);
    size_t l = strlen(r);
    while (l > 0 && (r[l - 1] == ' ' || r[l - 1] == '\t' || r[l - 1] == '\r' || r[l - 1] == '\n')) r[--l] = 0;
    if (!r[0]) {
        char rw[128];
        snprintf(err, errn, "usage: on-collapse %s (%s)", cmd_table[CMD_ON_COLLAPSE].args,
                 words_with(rw, sizeof rw, offsetof(CmdInfo, rule)));
        return -1;
    }
    cmd->kind = CMD_ON_COLLAPSE;
    if (!strcasecmp(r, "pause") || !strcasecmp(r, "off")) {
        snprintf(cmd->rule, sizeof cmd->rule, "%s", !strcasecmp(r, "pause") ? "pause" : "off");
    } else {
        TrainerCmd parts[8];
        const int n = command_rule_parse(r, parts, 8, err, errn);
        if (n < 0) return -1;
        size_t o = 0;
        for (int i = 0; i < n; i++) {
            const int w = snprintf(cmd->rule + o, sizeof cmd->rule - o, "%s%s", i ? "; " : "", parts[i].text);
            if (w < 0 || o + (size_t)w >= sizeof cmd->rule) {
                snprintf(err, errn, "on-collapse: the rule is too long (at most %zu characters)", sizeof cmd->rule - 1);
                return -1;
            }
            o += (size_t)w;
        }
    }
    snprintf(cmd->text, sizeof cmd->text, "on-collapse %s", cmd->rule);
    return 0;
}

static int command_parse_words(const char *w, char **tok, int n, TrainerCmd *cmd, char *err, size_t errn);

int command_parse(const char *line, TrainerCmd *cmd, char *err, size_t errn) {
    memset(cmd, 0, sizeof *cmd);
    {
        const char *p = line;
        while (*p == ' ' || *p == '\t') p++;
        if (!strncasecmp(p, "on-collapse", 11) && (p[11] == 0 || p[11] == ' ' || p[11] == '\t'))
            return parse_on_collapse(p + 11, cmd, err, errn);
    }
    char buf[512];
    if (strlen(line) >= sizeof buf) {
        snprintf(err, errn, "command too long");
        return -1;
    }
    snprintf(buf, sizeof buf, "%s", line);
    char *hash = strchr(buf, '#'); /* a trailing comment (the event log's "# socket" origin) */
    if (hash) *hash = '\0';
    char *tok[MAXTOK];
    int n = tokenize(buf, tok);
    if (n < 0) {
        snprintf(err, errn, "too many words");
        return -1;
    }
    if (n == 0) {
        snprintf(err, errn, "empty command");
        return -1;
    }
    for (char *p = tok[0]; *p; p++) *p = (char)tolower((unsigned char)*p);
    const char *w = tok[0];
    /* a routing knob or anneal for one routed layer: a last word "@moe2" / "@head" (the trainer
     * checks that the run has it) */
    char layer[REC_LAYER_NAME] = "";
    if (n >= 2 && tok[n - 1][0] == '@') {
        const char *nm = tok[n - 1] + 1;
        size_t len = strlen(nm);
        int ok = len > 0 && len < sizeof layer;
        for (size_t i = 0; ok && i < len; i++) ok = isalnum((unsigned char)nm[i]) || nm[i] == '_' || nm[i] == '-';
        const int k = cmd_find(w);
        if (k < 0 || !cmd_table[k].layer) {
            char lw[128];
            words_with(lw, sizeof lw, offsetof(CmdInfo, layer));
            char *comma = strrchr(lw, ','); /* "set, anneal" -> "set and anneal" */
            if (comma && strlen(lw) + 4 < sizeof lw) {
                memmove(comma + 4, comma + 1, strlen(comma + 1) + 1);
                memcpy(comma, " and", 4);
            }
            snprintf(err, errn, "%s: only %s take an @layer suffix", w, lw);
            return -1;
        }
        if (!ok) {
            snprintf(err, errn, "%s: '%.40s' is not a layer suffix (e.g. @moe2, @head)", w, tok[n - 1]);
            return -1;
        }
        for (size_t i = 0; i < len; i++) layer[i] = (char)tolower((unsigned char)nm[i]);
        layer[len] = 0;
        n--;
    }
    int rc = command_parse_words(w, tok, n, cmd, err, errn);
    if (rc == 0 && layer[0]) {
        if (cmd->kind == CMD_SET && cmd->param == PARAM_LR) {
            snprintf(err, errn, "set lr: the learning rate is the whole model's (no @layer)");
            return -1;
        }
        snprintf(cmd->layer, sizeof cmd->layer, "%s", layer);
        const size_t tl = strlen(cmd->text);
        if (tl + 2 + strlen(layer) >= sizeof cmd->text) {
            snprintf(err, errn, "command too long");
            return -1;
        }
        snprintf(cmd->text + tl, sizeof cmd->text - tl, " @%s", layer);
    }
    return rc;
}

/* The words of one command (tok[0..n), the @layer suffix removed) into *cmd. */
static int command_parse_words(const char *w, char **tok, int n, TrainerCmd *cmd, char *err, size_t errn) {
    const int kind = cmd_find(w);
    if (kind < 0 || kind == CMD_ON_COLLAPSE) { /* on-collapse: command_parse took it before tokenising */
        snprintf(err, errn, "unknown command '%s' (type help)", w);
        return -1;
    }
    if (!cmd_table[kind].args[0]) { /* a word alone */
        if (n > 1) {
            snprintf(err, errn, "%s takes no arguments", w);
            return -1;
        }
        cmd->kind = (CmdKind)kind;
        snprintf(cmd->text, sizeof cmd->text, "%s", cmd_table[kind].name);
        return 0;
    }
    if (kind == CMD_STEP) {
        double v = 1;
        if (n > 2 || (n == 2 && (parse_num(tok[1], &v) || v < 1 || v > 1e9 || v != floor(v)))) {
            snprintf(err, errn, "usage: step [N] with N a whole number >= 1");
            return -1;
        }
        cmd->kind = CMD_STEP;
        cmd->n = (long)v;
        snprintf(cmd->text, sizeof cmd->text, "step %ld", cmd->n);
        return 0;
    }
    if (kind == CMD_SET) {
        char words[256], why[64];
        if (n != 3) {
            snprintf(err, errn, "usage: set %s VALUE", vocab_join(words, sizeof words, cmd_param_words, "|", NULL));
            return -1;
        }
        CmdParam p;
        if (cmd_param_parse(tok[1], &p)) {
            snprintf(err, errn, "set: unknown parameter '%s' (%s)", tok[1],
                     vocab_join(words, sizeof words, cmd_param_words, " ", NULL));
            return -1;
        }
        double v;
        if (parse_num(tok[2], &v)) {
            snprintf(err, errn, "set %s: '%s' is not a number", tok[1], tok[2]);
            return -1;
        }
        /* the lower end here, the whole range when the trainer applies it (core/params.h) */
        if (!cmd_param_lower_ok(p, v, why, sizeof why)) {
            snprintf(err, errn, "set %s: %s", tok[1], why);
            return -1;
        }
        cmd->kind = CMD_SET;
        cmd->param = p;
        cmd->value = v;
        snprintf(cmd->text, sizeof cmd->text, "set %s %.9g", tok[1], v);
        return 0;
    }
    if (kind == CMD_ANNEAL) {
        char words[256];
        if (n < 2) {
            snprintf(err, errn, "usage: anneal KIND [TAU0|now [TAU1]] %s", tau_key_usage(words, sizeof words));
            return -1;
        }
        TauSchedule *s = &cmd->sched;
        tau_schedule_defaults(s);
        if (tau_parse_kind(tok[1], &s->kind) != ML_OK) {
            snprintf(err, errn, "anneal: unknown schedule '%s' (%s)", tok[1],
                     vocab_join(words, sizeof words, tau_kind_names, " ", NULL));
            return -1;
        }
        s->tau0 = 0.0f;    /* continue from the current value */
        s->tau_min = 0.0f; /* keep the run's floor */
        int pos = 0;
        char norm[256];
        int len = snprintf(norm, sizeof norm, "anneal %s", tau_kind_name(s->kind));
        for (int i = 2; i < n; i++) {
            char *eq = strchr(tok[i], '=');
            double v;
            if (!eq) {
                if (pos == 0 && !strcmp(tok[i], "now")) {
                    pos++;
                    len += snprintf(norm + len, sizeof norm - len, " now");
                    continue;
                }
                if (parse_num(tok[i], &v) || !(v > 0) || pos > 1) {
                    snprintf(err, errn, "anneal: '%s' is not a temperature > 0 (or too many values)", tok[i]);
                    return -1;
                }
                if (pos == 0) s->tau0 = (float)v;
                else s->tau1 = (float)v;
                pos++;
                len += snprintf(norm + len, sizeof norm - len, " %.9g", v);
                continue;
            }
            *eq = '\0';
            const char *key = tok[i], *val = eq + 1;
            if (parse_num(val, &v)) {
                snprintf(err, errn, "anneal: %s='%s' is not a number", key, val);
                return -1;
            }
            const int k = tau_key_find(key);
            if (k >= 0 && tau_key_ok((TauKey)k, v)) tau_key_set(s, (TauKey)k, v);
            else {
                int wl = 0;
                for (int j = 0; j < TAU_KEY_COUNT && wl < (int)sizeof words; j++)
                    wl += snprintf(words + wl, sizeof words - wl, "%s%s=", j ? " " : "", tau_key_info((TauKey)j)->key);
                snprintf(err, errn, "anneal: bad option %s=%s (%s)", key, val, words);
                return -1;
            }
            len += snprintf(norm + len, sizeof norm - len, " %s=%.9g", key, v);
        }
        cmd->kind = CMD_ANNEAL;
        snprintf(cmd->text, sizeof cmd->text, "%s", norm);
        return 0;
    }
    snprintf(err, errn, "unknown command '%s' (type help)", w);
    return -1;
}

/* Stable order by step: (step, original index) pairs, O(n log n) even for a file in reverse order. */
typedef struct {
    long step;
    int idx;
} SchedKey;

static int cmp_key(const void *a, const void *b) {
    const SchedKey *x = a, *y = b;
    if (x->step != y->step) return x->step < y->step ? -1 : 1;
    return (x->idx > y->idx) - (x->idx < y->idx);
}

static int sort_sched(ScheduledCmd *v, int n) {
    if (n < 2) return 0;
    SchedKey *k = malloc(sizeof *k * (size_t)(n > 0 ? n : 1));
    ScheduledCmd *tmp = malloc(sizeof *tmp * (size_t)(n > 0 ? n : 1));
    if (!k || !tmp) {
        free(k);
        free(tmp);
        return -1;
    }
    for (int i = 0; i < n; i++) {
        k[i].step = v[i].step;
        k[i].idx = i;
    }
    qsort(k, (size_t)n, sizeof *k, cmp_key);
    for (int i = 0; i < n; i++) tmp[i] = v[k[i].idx];
    memcpy(v, tmp, sizeof *v * (size_t)n);
    free(k);
    free(tmp);
    return 0;
}

int command_text_parse(const char *text, const char *name, ScheduledCmd **out, int *n, char *err, size_t errn) {
    *out = NULL;
    *n = 0;
    int cap = 0, lineno = 0;
    ScheduledCmd *v = NULL;
    const char *line = text;
    while (*line) {
        /* one whole line, whatever its length (a comment is never split into a command) */
        const char *eol = strchr(line, '\n');
        const size_t len = eol ? (size_t)(eol - line) : strlen(line);
        lineno++;
        const char *p = line;
        line = eol ? eol + 1 : line + len;
        while (p < line && isspace((unsigned char)*p)) p++;
        if (p >= line || *p == '#') continue;
        const size_t rest_len = (size_t)((eol ? eol : line) - p);
        if (rest_len > 400) {
            snprintf(err, errn, "%s:%d: a command line of %zu characters (at most 400; comments may be longer)", name,
                     lineno, rest_len);
            free(v);
            return -1;
        }
        char buf[512];
        memcpy(buf, p, rest_len);
        buf[rest_len] = 0;
        long step = 0;
        char *rest = buf;
        if (!strncmp(buf, "at ", 3)) {
            char *end;
            errno = 0;
            step = strtol(buf + 3, &end, 10);
            if (errno || end == buf + 3 || step < 0 || !isspace((unsigned char)*end)) {
                snprintf(err, errn, "%s:%d: expected 'at STEP COMMAND'", name, lineno);
                free(v);
                return -1;
            }
            rest = end;
        }
        TrainerCmd c;
        char e[256];
        if (command_parse(rest, &c, e, sizeof e)) {
            snprintf(err, errn, "%s:%d: %s", name, lineno, e);
            free(v);
            return -1;
        }
        if (*n == cap) {
            if (cap > (1 << 24)) {
                snprintf(err, errn, "%s: more than 16M commands", name);
                free(v);
                return -1;
            }
            cap = cap ? 2 * cap : 16;
            ScheduledCmd *nv = realloc(v, sizeof *v * cap);
            if (!nv) {
                snprintf(err, errn, "out of memory");
                free(v);
                return -1;
            }
            v = nv;
        }
        v[*n].step = step;
        v[*n].cmd = c;
        (*n)++;
    }
    if (sort_sched(v, *n)) {
        snprintf(err, errn, "out of memory");
        free(v);
        *n = 0;
        return -1;
    }
    *out = v;
    return 0;
}

int command_file_load(const char *path, char **text, char *err, size_t errn) {
    *text = NULL;
    const int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        snprintf(err, errn, "%s: cannot open: %s", path, strerror(errno));
        return -1;
    }
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        snprintf(err, errn, "%s: not a regular file (a command file holds 'at STEP COMMAND' lines)", path);
        close(fd);
        return -1;
    }
    if (sb.st_size > (64 << 20)) {
        snprintf(err, errn, "%s: %lld bytes, more than a command file may hold (64 MiB)", path, (long long)sb.st_size);
        close(fd);
        return -1;
    }
    char *buf = malloc((size_t)sb.st_size + 1);
    size_t got = 0;
    while (buf && got < (size_t)sb.st_size) {
        const ssize_t r = read(fd, buf + got, (size_t)sb.st_size - got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        got += (size_t)r;
    }
    close(fd);
    if (!buf) {
        snprintf(err, errn, "out of memory");
        return -1;
    }
    buf[got] = 0;
    if (strlen(buf) != got) {
        snprintf(err, errn, "%s: contains a NUL byte (not a text file)", path);
        free(buf);
        return -1;
    }
    *text = buf;
    return 0;
}

int command_file_read(const char *path, ScheduledCmd **out, int *n, char *err, size_t errn) {
    char *text;
    *out = NULL;
    *n = 0;
    if (command_file_load(path, &text, err, errn)) return -1;
    const int rc = command_text_parse(text, path, out, n, err, errn);
    free(text);
    return rc;
}
