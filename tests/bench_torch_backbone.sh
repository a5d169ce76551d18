#!/usr/bin/env bash
# bench_torch_backbone.sh — `moelab bench --model backbone-moe` (and its dense baseline
# backbone-ffn) against the PyTorch twin tests/torch_backbone_moe.py, side by side in one run:
# the two programs alternate ROUNDS times per model so that machine noise hits both alike; prints
# every round, the medians, the ratio moelab/PyTorch and moelab's fraction of the SGEMM rate.
# usage: tests/bench_torch_backbone.sh path/to/moelab [ROUNDS] [THREADS] [STEPS]
set -euo pipefail
BIN=${1:?usage: bench_torch_backbone.sh path/to/moelab [ROUNDS] [THREADS] [STEPS]}
ROUNDS=${2:-5}
THREADS=${3:-$(nproc)}
STEPS=${4:-10}
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/bench_field.sh"
TWIN=$HERE/torch_backbone_moe.py
have_torch=0
if /usr/bin/python3 -c 'import torch' 2>/dev/null; then have_torch=1; fi
[ "$have_torch" = 1 ] || echo "note: PyTorch not found (apt-get install python3-torch); moelab only"

median() { sort -g | awk '{a[NR]=$1} END {if (NR%2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2}'; }
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT

declare -A M P S
MODELS=(backbone-moe backbone-ffn)
for model in "${MODELS[@]}"; do
  flag=; [ "$model" = backbone-ffn ] && flag=--ffn
  : > "$T/m"; : > "$T/t"; : > "$T/s"
  for r in $(seq "$ROUNDS"); do
    line=$("$BIN" bench --model "$model" --repeat 1 --steps "$STEPS" --threads "$THREADS" | grep '^bench ')
    bench_field "$line" img_per_s >> "$T/m" # the training rate (not eval_img_per_s)
    bench_field "$line" sgemm_fraction >> "$T/s"
    if [ "$have_torch" = 1 ]; then
      # shellcheck disable=SC2086
      /usr/bin/python3 "$TWIN" $flag --threads "$THREADS" --steps "$STEPS" | sed -E 's/.*img\/s=([0-9.]+).*/\1/' >> "$T/t"
    fi
  done
  echo "$model: moelab img/s per round: $(tr '\n' ' ' < "$T/m")"
  [ "$have_torch" = 1 ] && echo "$model: torch  img/s per round: $(tr '\n' ' ' < "$T/t")"
  M[$model]=$(median < "$T/m")
  S[$model]=$(median < "$T/s")
  P[$model]=$([ "$have_torch" = 1 ] && median < "$T/t" || echo 0)
done
printf '\n64x64x3 backbone-MoE model (moe-after 2,3, h 32,64, E 8, k 2), batch 128, %s threads, medians of %s alternating rounds\n' \
  "$THREADS" "$ROUNDS"
printf '%-14s %12s %12s %14s %10s\n' model moelab_img/s torch_img/s moelab/torch %SGEMM
for model in "${MODELS[@]}"; do
  ratio=$(awk -v a="${M[$model]}" -v b="${P[$model]}" 'BEGIN { if (b > 0) printf "%.2fx", a / b; else print "n/a" }')
  printf '%-14s %12.1f %12.1f %14s %9.1f%%\n' "$model" "${M[$model]}" "${P[$model]}" "$ratio" \
    "$(awk -v s="${S[$model]}" 'BEGIN{print 100*s}')"
done
