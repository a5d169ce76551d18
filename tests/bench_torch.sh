#!/usr/bin/env bash
# bench_torch.sh — moelab vs PyTorch (../shared/anchors/torch_ref.py) side by side, in one run.
# Alternates the two programs ROUNDS times per head so that machine noise hits both alike, and
# prints per head the medians, the median of the per-round ratios moelab/PyTorch, the spread
# (min-max, range/median) of the rounds of each program and moelab's fraction of the SGEMM rate.
# usage: tests/bench_torch.sh path/to/moelab [ROUNDS] [THREADS]
set -euo pipefail
BIN=${1:?usage: bench_torch.sh path/to/moelab [ROUNDS] [THREADS]}
ROUNDS=${2:-5}
THREADS=${3:-$(nproc)}
HERE=$(cd "$(dirname "$0")" && pwd)
REF=${TORCH_REF:-$HERE/../../shared/anchors/torch_ref.py}
. "$HERE/bench_field.sh"
[ -f "$REF" ] || REF=$HERE/../shared/anchors/torch_ref.py
[ -f "$REF" ] || REF=/work/shared/anchors/torch_ref.py
have_torch=0
if [ -f "$REF" ] && /usr/bin/python3 -c 'import torch' 2>/dev/null; then have_torch=1; fi
[ "$have_torch" = 1 ] || echo "note: PyTorch or torch_ref.py not found (apt-get install python3-torch); moelab only"

median() { sort -g | awk '{a[NR]=$1} END {if (NR%2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2}'; }
# min max and (max - min) / median of a column of numbers, as "min-max (spread%)"
spread() { sort -g | awk '{a[NR]=$1} END {m = (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2;
  printf "%.0f-%.0f (%.0f%%)", a[1], a[NR], (m > 0 ? 100*(a[NR]-a[1])/m : 0)}'; }

echo "moelab vs PyTorch: $ROUNDS alternating rounds per head, $THREADS threads, 20 training steps per round; load: $(uptime | sed 's/.*load/load/')"
declare -A M T S R MS TS
for head in dense moe; do
  mb=$(mktemp); tb=$(mktemp); sg=$(mktemp); rt=$(mktemp)
  for r in $(seq "$ROUNDS"); do
    line=$("$BIN" bench --heads "$head" --repeat 1 --steps 20 --threads "$THREADS" | grep '^bench ')
    mi=$(bench_field "$line" img_per_s) # the training rate (not eval_img_per_s)
    echo "$mi" >> "$mb"
    bench_field "$line" sgemm_fraction >> "$sg"
    if [ "$have_torch" = 1 ]; then
      ti=$(/usr/bin/python3 "$REF" --head "$head" --threads "$THREADS" --steps 20 | sed -E 's/.*img\/s=([0-9.]+).*/\1/')
      echo "$ti" >> "$tb"
      awk -v a="$mi" -v b="$ti" 'BEGIN {if (b > 0) print a / b}' >> "$rt"
    fi
  done
  echo "$head: moelab img/s per round: $(tr '\n' ' ' < "$mb")"
  if [ "$have_torch" = 1 ]; then
    echo "$head: torch  img/s per round: $(tr '\n' ' ' < "$tb")"
    echo "$head: ratio per round (moelab/torch, same round): $(awk '{printf "%.2f ", $1}' "$rt")"
  fi
  M[$head]=$(median < "$mb")
  S[$head]=$(median < "$sg")
  MS[$head]=$(spread < "$mb")
  T[$head]=$([ "$have_torch" = 1 ] && median < "$tb" || echo 0)
  TS[$head]=$([ "$have_torch" = 1 ] && spread < "$tb" || echo n/a)
  R[$head]=$([ "$have_torch" = 1 ] && median < "$rt" || echo 0)
  rm -f "$mb" "$tb" "$sg" "$rt"
done
printf '\nreference model, batch 128, %s threads, medians of %s alternating rounds; load after: %s\n' "$THREADS" "$ROUNDS" "$(uptime | sed 's/.*load average: //')"
printf 'ratio = median over rounds of moelab/torch measured in the same round; spread = min-max (range/median)\n'
printf '%-6s %9s %20s %9s %20s %13s %8s\n' head moelab moelab_spread torch torch_spread median_ratio %SGEMM
for head in dense moe; do
  ratio=$(awk -v a="${R[$head]}" 'BEGIN { if (a > 0) printf "%.2fx", a; else print "n/a" }')
  printf '%-6s %9.0f %20s %9.0f %20s %13s %7.1f%%\n' "$head" "${M[$head]}" "${MS[$head]}" "${T[$head]}" "${TS[$head]}" \
    "$ratio" "$(awk -v s="${S[$head]}" 'BEGIN{print 100*s}')"
done
echo "targets (issue 16): median ratio >= 2.5x and >= 45% of SGEMM for both heads"
