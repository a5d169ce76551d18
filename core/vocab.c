/* vocab.c — joining and finding the words of a vocabulary table (see vocab.h). */
#include "core/vocab.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

const char *vocab_join(char *buf, size_t n, const char *const *words, const char *sep, const char *last) {
    size_t len = 0;
    if (n == 0) return buf;
    buf[0] = '\0';
    for (int i = 0; words[i]; i++) {
        const char *s = i == 0 ? "" : (!words[i + 1] && last ? last : sep);
        const int w = snprintf(buf + len, n - len, "%s%s", s, words[i]);
        if (w < 0 || (size_t)w >= n - len) break; /* truncated: buf ends where it ran out */
        len += (size_t)w;
    }
    return buf;
}

int vocab_find(const char *const *words, const char *w, int nocase) {
    for (int i = 0; w && words[i]; i++)
        if (nocase ? strcasecmp(words[i], w) == 0 : strcmp(words[i], w) == 0) return i;
    return -1;
}
