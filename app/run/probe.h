/* probe.h — `moelab probe batch SESSION [--epoch N]` (app/probe.c): the batch-composition probe
 * (core/bprobe.h) on a saved session's checkpoint. */
#ifndef ML_APP_PROBE_H
#define ML_APP_PROBE_H

#include <stdio.h>

#include "core/bprobe.h"

/* Loads the session in dir (its stored command line and renorm, its dataset) and the checkpoint of
 * epoch `epoch` (<= 0: the newest valid one), runs the probe (shuffle seed 1) into *out, and
 * names the checkpoint in ckpt (n bytes; may be NULL) and the head in head (24 bytes; may be NULL).
 * 0, or 1 with a message in ml_last_error(). */
int probe_batch_session(const char *dir, int epoch, BatchProbe *out, char *ckpt, size_t n, char *head);
/* The probe's table and its one-line reading, as `moelab probe batch` prints them. */
void probe_batch_print(const BatchProbe *p, FILE *o);
/* The one-line reading: "no change beyond float rounding (...)" or "depends on batch mates (...)". */
void probe_batch_summary(const BatchProbe *p, char *buf, size_t n);

int cmd_probe(int argc, char **argv);

#endif
