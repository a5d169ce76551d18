/* vocab.h — helpers for the vocabulary tables (temperature kinds and anneal keys in tau.h,
 * command parameters in params.h, options in app/options.c): every message, help line and
 * completion list is built from a table's words with these, never typed out again. */
#ifndef ML_VOCAB_H
#define ML_VOCAB_H

#include <stddef.h>

/* Writes the NULL-terminated `words` into buf (n bytes, always terminated), `sep` between two
 * words and `last` between the last two (NULL: sep): ("a", "b", "c"), ", ", " or " gives
 * "a, b or c". Returns buf. */
const char *vocab_join(char *buf, size_t n, const char *const *words, const char *sep, const char *last);
/* Index of w in the NULL-terminated words (case-insensitive when nocase), -1 if absent or w is
 * NULL. */
int vocab_find(const char *const *words, const char *w, int nocase);

#endif
