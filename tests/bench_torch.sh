#!/usr/bin/env bash
# bench_torch.sh — moelab vs PyTorch (../shared/anchors/torch_ref.py) side by side, in one run.
# Alternates the two programs ROUNDS times per head so that machine noise hits both alike, and
# prints the medians, the ratio moelab/PyTorch and moelab's fraction of the SGEMM rate.
# usage: tests/bench_torch.sh path/to/moelab [ROUNDS] [THREADS]
set -euo pipefail
BIN=${1:?usage: bench_torch.sh path/to/moelab [ROUNDS] [THREADS]}
ROUNDS=${2:-5}
THREADS=${3:-$(nproc)}
HERE=$(cd "$(dirname "$0")" && pwd)
REF=${TORCH_REF:-$HERE/../../shared/anchors/torch_ref.py}
[ -f "$REF" ] || REF=$HERE/../shared/anchors/torch_ref.py
have_torch=0
if [ -f "$REF" ] && /usr/bin/python3 -c 'import torch' 2>/dev/null; then have_torch=1; fi
[ "$have_torch" = 1 ] || echo "note: PyTorch or torch_ref.py not found (apt-get install python3-torch); moelab only"

median() { sort -g | awk '{a[NR]=$1} END {if (NR%2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2}'; }

declare -A M T S
for head in dense moe; do
  : > "/tmp/mb_$head.$$"; : > "/tmp/tb_$head.$$"; : > "/tmp/sg_$head.$$"
  for r in $(seq "$ROUNDS"); do
    line=$("$BIN" bench --heads "$head" --repeat 1 --steps 20 --threads "$THREADS" | grep '^bench ')
    sed -E 's/.*img_per_s=([0-9.]+).*/\1/' <<<"$line" >> "/tmp/mb_$head.$$"
    sed -E 's/.*sgemm_fraction=([0-9.]+).*/\1/' <<<"$line" >> "/tmp/sg_$head.$$"
    if [ "$have_torch" = 1 ]; then
      /usr/bin/python3 "$REF" --head "$head" --threads "$THREADS" --steps 20 | sed -E 's/.*img\/s=([0-9.]+).*/\1/' >> "/tmp/tb_$head.$$"
    fi
  done
  echo "$head: moelab img/s per round: $(tr '\n' ' ' < "/tmp/mb_$head.$$")"
  [ "$have_torch" = 1 ] && echo "$head: torch  img/s per round: $(tr '\n' ' ' < "/tmp/tb_$head.$$")"
  M[$head]=$(median < "/tmp/mb_$head.$$")
  S[$head]=$(median < "/tmp/sg_$head.$$")
  T[$head]=$([ "$have_torch" = 1 ] && median < "/tmp/tb_$head.$$" || echo 0)
  rm -f "/tmp/mb_$head.$$" "/tmp/tb_$head.$$" "/tmp/sg_$head.$$"
done
printf '\nreference model, batch 128, %s threads, medians of %s alternating rounds\n' "$THREADS" "$ROUNDS"
printf '%-8s %12s %12s %16s %12s\n' head moelab_img/s torch_img/s moelab/torch %SGEMM
for head in dense moe; do
  ratio=$(awk -v a="${M[$head]}" -v b="${T[$head]}" 'BEGIN { if (b > 0) printf "%.2fx", a / b; else print "n/a" }')
  printf '%-8s %12.0f %12.0f %16s %11.1f%%\n' "$head" "${M[$head]}" "${T[$head]}" "$ratio" "$(awk -v s="${S[$head]}" 'BEGIN{print 100*s}')"
done
