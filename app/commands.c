/* commands.c — parser of the command language (see commands.h). */
#include "commands.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *const command_words[] = {"pause", "resume", "step", "set", "anneal", "snapshot", "eval", "quit", "help", NULL};
const char *const param_words[] = {"tau", "lr", "cf", "alpha", "beta", "noise", "bias-rate", NULL};
const char *const schedule_words[] = {"const", "linear", "cosine", "exp", "sigmoid", "step", NULL};

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

int command_parse(const char *line, TrainerCmd *cmd, char *err, size_t errn) {
    memset(cmd, 0, sizeof *cmd);
    char buf[512];
    if (strlen(line) >= sizeof buf) { snprintf(err, errn, "command too long"); return -1; }
    snprintf(buf, sizeof buf, "%s", line);
    char *tok[MAXTOK];
    int n = tokenize(buf, tok);
    if (n < 0) { snprintf(err, errn, "too many words"); return -1; }
    if (n == 0) { snprintf(err, errn, "empty command"); return -1; }
    for (char *p = tok[0]; *p; p++) *p = (char)tolower((unsigned char)*p);
    const char *w = tok[0];
    if (!strcmp(w, "pause") || !strcmp(w, "resume") || !strcmp(w, "quit") || !strcmp(w, "help") ||
        !strcmp(w, "snapshot") || !strcmp(w, "eval") || !strcmp(w, "exit")) {
        if (n > 1) { snprintf(err, errn, "%s takes no arguments", w); return -1; }
        cmd->kind = !strcmp(w, "pause") ? CMD_PAUSE : !strcmp(w, "resume") ? CMD_RESUME
                  : (!strcmp(w, "quit") || !strcmp(w, "exit")) ? CMD_QUIT : !strcmp(w, "help") ? CMD_HELP
                  : !strcmp(w, "snapshot") ? CMD_SNAPSHOT : CMD_EVAL;
        snprintf(cmd->text, sizeof cmd->text, "%s", !strcmp(w, "exit") ? "quit" : w);
        return 0;
    }
    if (!strcmp(w, "step")) {
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
    if (!strcmp(w, "set")) {
        if (n != 3) { snprintf(err, errn, "usage: set tau|lr|cf|alpha|beta|noise|bias-rate VALUE"); return -1; }
        int p = -1;
        for (int i = 0; param_words[i]; i++) if (!strcmp(tok[1], param_words[i])) p = i;
        if (p < 0) { snprintf(err, errn, "set: unknown parameter '%s' (tau lr cf alpha beta noise bias-rate)", tok[1]); return -1; }
        double v;
        if (parse_num(tok[2], &v)) { snprintf(err, errn, "set %s: '%s' is not a number", tok[1], tok[2]); return -1; }
        if (p == PARAM_TAU && !(v > 0)) { snprintf(err, errn, "set tau: must be > 0"); return -1; }
        if (p == PARAM_LR && !(v > 0)) { snprintf(err, errn, "set lr: must be > 0"); return -1; }
        if (p != PARAM_CF && v < 0) { snprintf(err, errn, "set %s: must be >= 0", tok[1]); return -1; }
        cmd->kind = CMD_SET;
        cmd->param = (CmdParam)p;
        cmd->value = v;
        snprintf(cmd->text, sizeof cmd->text, "set %s %.9g", tok[1], v);
        return 0;
    }
    if (!strcmp(w, "anneal")) {
        if (n < 2) { snprintf(err, errn, "usage: anneal KIND [TAU0|now [TAU1]] [s=S] [c=C] [min=T] [every=N] [gamma=G]"); return -1; }
        TauSchedule *s = &cmd->sched;
        tau_schedule_defaults(s);
        if (tau_parse_kind(tok[1], &s->kind) != ML_OK) {
            snprintf(err, errn, "anneal: unknown schedule '%s' (const linear cosine exp sigmoid step)", tok[1]);
            return -1;
        }
        s->tau0 = 0.0f;     /* continue from the current value */
        s->tau_min = 0.0f;  /* keep the run's floor */
        int pos = 0;
        char norm[256];
        int len = snprintf(norm, sizeof norm, "anneal %s", tau_kind_name(s->kind));
        for (int i = 2; i < n; i++) {
            char *eq = strchr(tok[i], '=');
            double v;
            if (!eq) {
                if (pos == 0 && !strcmp(tok[i], "now")) { pos++; len += snprintf(norm + len, sizeof norm - len, " now"); continue; }
                if (parse_num(tok[i], &v) || !(v > 0) || pos > 1) {
                    snprintf(err, errn, "anneal: '%s' is not a temperature > 0 (or too many values)", tok[i]);
                    return -1;
                }
                if (pos == 0) s->tau0 = (float)v; else s->tau1 = (float)v;
                pos++;
                len += snprintf(norm + len, sizeof norm - len, " %.9g", v);
                continue;
            }
            *eq = '\0';
            const char *key = tok[i], *val = eq + 1;
            if (parse_num(val, &v)) { snprintf(err, errn, "anneal: %s='%s' is not a number", key, val); return -1; }
            if (!strcmp(key, "s")) s->s = (float)v;
            else if (!strcmp(key, "c")) s->c = (float)v;
            else if (!strcmp(key, "min") && v > 0) s->tau_min = (float)v;
            else if (!strcmp(key, "every") && v >= 1 && v == floor(v)) s->step_every = (int)v;
            else if (!strcmp(key, "gamma") && v > 0) s->step_gamma = (float)v;
            else { snprintf(err, errn, "anneal: bad option %s=%s (s= c= min= every= gamma=)", key, val); return -1; }
            len += snprintf(norm + len, sizeof norm - len, " %s=%.9g", key, v);
        }
        cmd->kind = CMD_ANNEAL;
        snprintf(cmd->text, sizeof cmd->text, "%s", norm);
        return 0;
    }
    snprintf(err, errn, "unknown command '%s' (type help)", w);
    return -1;
}

static int cmp_sched(const void *a, const void *b) {
    const ScheduledCmd *x = a, *y = b;
    if (x->step != y->step) return x->step < y->step ? -1 : 1;
    return 0;
}

int command_file_read(const char *path, ScheduledCmd **out, int *n, char *err, size_t errn) {
    *out = NULL;
    *n = 0;
    FILE *f = fopen(path, "r");
    if (!f) { snprintf(err, errn, "%s: cannot open: %s", path, strerror(errno)); return -1; }
    char line[600];
    int cap = 0, lineno = 0;
    ScheduledCmd *v = NULL;
    while (fgets(line, sizeof line, f)) {
        lineno++;
        char *p = line;
        while (isspace((unsigned char)*p)) p++;
        if (!*p || *p == '#') continue;
        long step = 0;
        char *rest = p;
        if (!strncmp(p, "at ", 3)) {
            char *end;
            errno = 0;
            step = strtol(p + 3, &end, 10);
            if (errno || end == p + 3 || step < 0 || !isspace((unsigned char)*end)) {
                snprintf(err, errn, "%s:%d: expected 'at STEP COMMAND'", path, lineno);
                free(v); fclose(f); return -1;
            }
            rest = end;
        }
        TrainerCmd c;
        char e[256];
        if (command_parse(rest, &c, e, sizeof e)) {
            snprintf(err, errn, "%s:%d: %s", path, lineno, e);
            free(v); fclose(f); return -1;
        }
        if (*n == cap) {
            cap = cap ? 2 * cap : 16;
            ScheduledCmd *nv = realloc(v, sizeof *v * cap);
            if (!nv) { snprintf(err, errn, "out of memory"); free(v); fclose(f); return -1; }
            v = nv;
        }
        v[*n].step = step;
        v[*n].cmd = c;
        (*n)++;
    }
    fclose(f);
    /* stable: insertion order kept for equal steps */
    for (int i = 1; i < *n; i++)
        for (int j = i; j > 0 && cmp_sched(&v[j - 1], &v[j]) > 0; j--) { ScheduledCmd t = v[j]; v[j] = v[j - 1]; v[j - 1] = t; }
    *out = v;
    return 0;
}
