#!/usr/bin/env bash
# bench_dist.sh — one process with N threads against N ranks of one thread (mpirun -np N), side by
# side in one run, for the reference model's heads and the 64x64 backbone-MoE model, plus the N
# ranks with the gradient exchange not overlapped (MOELAB_DIST_NO_OVERLAP=1: what overlap buys).
# The three are alternated ROUNDS times per model so that machine noise hits them alike; printed
# per model: the medians of img/s, the median of the per-round ratios ranks/threads and
# overlap/no-overlap, each one's fraction of the SGEMM rate (the machine's: every rank's measured
# at once, summed), the communication per step (blocked ms, MB sent per rank) and the fraction of
# the exchange hidden behind the backward.
# usage: tests/bench_dist.sh path/to/moelab [ROUNDS] [N] [BATCH]
set -euo pipefail
BIN=${1:?usage: bench_dist.sh path/to/moelab [ROUNDS] [N] [BATCH]}
ROUNDS=${2:-5}
N=${3:-$(nproc)}
BATCH=${4:-128}
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/bench_field.sh"
if ! command -v mpirun > /dev/null 2>&1; then echo "bench_dist: mpirun not installed"; exit 77; fi
MPI=(mpirun --allow-run-as-root --oversubscribe --bind-to core -np "$N")
median() { sort -g | awk '{a[NR]=$1} END {if (NR%2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2}'; }
echo "bench_dist: 1 process x $N threads vs $N ranks x 1 thread (and without overlap), batch $BATCH (global),"
echo "  $ROUNDS alternating rounds, 20 steps each; OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-unset}; load: $(uptime | sed 's/.*load/load/')"
for spec in "moe:--heads moe" "dense:--heads dense" "backbone-moe:--model backbone-moe"; do
  name=${spec%%:*}
  args=${spec#*:}
  t=$(mktemp -d)
  for r in $(seq "$ROUNDS"); do
    # shellcheck disable=SC2086
    a=$("$BIN" bench $args --batch "$BATCH" --repeat 1 --steps 20 --threads "$N" | grep '^bench ')
    # shellcheck disable=SC2086
    b=$("${MPI[@]}" "$BIN" bench $args --batch "$BATCH" --repeat 1 --steps 20 --threads 1 | grep '^bench ')
    # shellcheck disable=SC2086
    c=$(MOELAB_DIST_NO_OVERLAP=1 "${MPI[@]}" -x MOELAB_DIST_NO_OVERLAP "$BIN" bench $args --batch "$BATCH" --repeat 1 \
      --steps 20 --threads 1 | grep '^bench ')
    for k in a b c; do
      line=${!k}
      bench_field "$line" img_per_s >> "$t/$k.ips"
      bench_field "$line" sgemm_fraction >> "$t/$k.sg"
      bench_field "$line" comm_ms >> "$t/$k.comm"
      bench_field "$line" bytes_per_step >> "$t/$k.bytes"
      bench_field "$line" hidden >> "$t/$k.hid"
    done
    awk -v x="$(bench_field "$b" img_per_s)" -v y="$(bench_field "$a" img_per_s)" 'BEGIN { print x / y }' >> "$t/ratio"
    awk -v x="$(bench_field "$b" img_per_s)" -v y="$(bench_field "$c" img_per_s)" 'BEGIN { print x / y }' >> "$t/ovl"
  done
  ms=$(awk -v b="$BATCH" -v i="$(median < "$t/b.ips")" 'BEGIN { printf "%.2f", 1e3 * b / i }')
  printf '%-13s 1x%d threads %6.0f img/s (%4.1f%% SGEMM) | %dx1 ranks %6.0f img/s (%4.1f%% SGEMM) | ranks/threads %.2fx | overlap buys %.2fx (no-overlap %6.0f img/s)\n' \
    "$name" "$N" "$(median < "$t/a.ips")" "$(awk '{print 100*$1}' "$t/a.sg" | median)" "$N" "$(median < "$t/b.ips")" \
    "$(awk '{print 100*$1}' "$t/b.sg" | median)" "$(median < "$t/ratio")" "$(median < "$t/ovl")" "$(median < "$t/c.ips")"
  printf '%-13s   %d ranks: step %s ms, communication %.3f ms/step blocked (no overlap: %.3f), %.2f MB/step sent per rank, %.0f%% of the exchange hidden\n' \
    "" "$N" "$ms" "$(median < "$t/b.comm")" "$(median < "$t/c.comm")" "$(awk '{print $1/1e6}' "$t/b.bytes" | median)" \
    "$(awk '{print 100*$1}' "$t/b.hid" | median)"
  echo "dist model=$name threads_img_per_s=$(median < "$t/a.ips") ranks_img_per_s=$(median < "$t/b.ips") ratio=$(median < "$t/ratio") overlap_ratio=$(median < "$t/ovl") comm_ms=$(median < "$t/b.comm") bytes_per_step=$(median < "$t/b.bytes") hidden=$(median < "$t/b.hid") step_ms=$ms"
  rm -rf "$t"
done
