/* plot.h — `moelab plot`: paper figures (PDF, SVG, PNG) of a session, of several sessions side by
 * side, or of a sweep (app/plot.c; the drawing is views/figs.c). */
#ifndef ML_APP_PLOT_H
#define ML_APP_PLOT_H

#include <stddef.h>

#define PLOT_MAX_RUNS 8

/* Bits of the formats to write (1 << FigFormat). */
#define PLOT_PDF 1u
#define PLOT_SVG 2u
#define PLOT_PNG 4u

/* Writes the figures of the n inputs (one session or sweep: its figures; 2..8 sessions: the
 * comparison figures) into outdir (NULL: the default, see plot_default_out), for each format in
 * `formats`, at evaluation epoch `epoch` (< 0: the last evaluation). verbose: print one line per
 * file to stdout. Returns 0 on success, 1 on a run-time failure (a missing or damaged input, a
 * write error), 2 on bad usage (epoch out of range, too many inputs); the message is in msg
 * (also on success: "N figures in DIR"). Safe to call from the browser (prints nothing when not
 * verbose). */
int plot_run(const char *const *inputs, int n, const char *outdir, unsigned formats, int epoch, int verbose, char *msg,
             size_t msgn);

/* The default output folder: INPUT/figures for one session or sweep folder (the folder of a
 * given .h5 file), figures-compare under the current directory for several sessions. */
void plot_default_out(const char *const *inputs, int n, char *out, size_t outn);

int cmd_plot(int argc, char **argv);

#endif
