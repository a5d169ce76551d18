#!/usr/bin/env bash
# tui_throughput.sh BIN [PAIRS] — training images/s of the reference model with the live screen
# open vs headless, measured in one run: PAIRS interleaved pairs (order alternating, ABBA), both
# inside the same tmux server so the environment is the same, each run 3 epochs of synthetic
# 32x32x3 data; a run's figure is the mean of /evals/img_per_s over epochs 2-3 (training time
# only, evaluation excluded), read from its session with `moelab export`. Prints every pair and
# the median ratio TUI / headless. A measurement script, not a test: it asserts nothing.
set -u
BIN=$(cd "$(dirname "${1:?usage: tui_throughput.sh BIN [PAIRS]}")" && pwd)/$(basename "$1")
PAIRS=${2:-6}
T=$(mktemp -d)
TM=(tmux -L moelabtp -f /dev/null)
trap '"${TM[@]}" kill-server >/dev/null 2>&1; rm -rf "$T"' EXIT
RUN="--dataset synthetic:32x32x3:10:12800 --epochs 3 --threads 2"
one() { # one MODE NAME -> prints img/s
  local mode=$1 name=$2 extra=""
  [ "$mode" = headless ] && extra=--headless
  "${TM[@]}" kill-session -t tp >/dev/null 2>&1
  "${TM[@]}" new-session -d -x 160 -y 50 -s tp "cd '$T' && $BIN train $RUN $extra --session $name > /dev/null 2>&1; touch $name.done"
  while [ ! -e "$T/$name.done" ]; do sleep 0.5; done
  "$BIN" export "$T/$name" --csv "$T/$name.csv" >/dev/null 2>&1
  awk -F, 'NR==1 { for (i = 1; i <= NF; i++) if ($i == "img_per_s") c = i; next }
           $1 >= 2 { s += $c; n++ } END { if (n) printf "%.1f", s / n; else print "nan" }' "$T/$name.csv/evals.csv"
}
ratios=()
for ((p = 1; p <= PAIRS; p++)); do
  if ((p % 2)); then h=$(one headless h$p); u=$(one tui u$p); else u=$(one tui u$p); h=$(one headless h$p); fi
  r=$(awk -v u="$u" -v h="$h" 'BEGIN { printf "%.3f", u / h }')
  ratios+=("$r")
  printf 'pair %d: headless %s img/s  tui %s img/s  ratio %s\n' "$p" "$h" "$u" "$r"
done
printf '%s\n' "${ratios[@]}" | sort -n | awk '{ a[NR] = $1 } END { m = NR % 2 ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2;
  printf "median TUI/headless %.3f over %d pairs (min %.3f, max %.3f)\n", m, NR, a[1], a[NR] }'
