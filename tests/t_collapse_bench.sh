#!/usr/bin/env bash
# t_collapse_bench.sh — ctest's quick subset of the collapse alarm's scenario benchmark: the
# synthetic scenarios of tests/collapse_bench.sh (every kind of event, healthy references included)
# and fm-old-default-2ep (an idle router on Fashion-MNIST whose evaluation share hovers near the
# threshold: no red; skipped without dataset-fashion-mnist); the other Fashion-MNIST ones run with
# `bash tests/collapse_bench.sh build/moelab full`. Fails on any false alarm or missed event.
BIN=${1:?usage: t_collapse_bench.sh path/to/moelab}
HERE=$(cd "$(dirname "$0")" && pwd)
THREADS=1 bash "$HERE/collapse_bench.sh" "$BIN" quick | tee /dev/stderr | tail -1 |
  awk '{print} {exit !($6 == 0 && $8 == 0 && $2 > 0)}'
