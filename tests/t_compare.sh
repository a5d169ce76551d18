#!/usr/bin/env bash
# t_compare.sh — the browser compares 4 marked sessions (tmux, 120x40, NO_COLOR so the runs must
# be told apart by glyph alone): the compare screen names 4 runs; each run's glyph (● ■ ▲ ◆) is in
# the legend and at its evaluation points inside the plot area; the final-metrics table has one row
# per run (4 rows, each with its last epoch and test accuracy as the session recorded them); the 4
# class x expert heatmaps are there; Left moves the common epoch; `l` switches to the loss curves;
# Esc returns to the list. Every wait polls capture-pane with a timeout.
set -u
export LC_ALL=C.UTF-8 # ${line:0:N} counts characters
BIN=${1:?usage: t_compare.sh path/to/moelab}
TMUX_NAME=moelabcmp TMUX_UTF8=1 S=cmp
. "$(dirname "$0")/tmux_harness.sh"
mkdir -p "$T/r"
for i in 1 2 3 4; do
  "$BIN" train --headless --dataset synthetic:16x16x3:4:1024 --width 0.25 --batch 32 --experts 4 --hidden 16 \
    --epochs $((3 + i)) --seed "$i" --lr 0.0$((2 * i)) --threads 1 --session "$T/r/run$i" >"$T/run$i.log" 2>&1 ||
    bad "training run$i: $(tail -2 "$T/run$i.log")"
done
"${TM[@]}" new-session -d -x 120 -y 40 -s "$S" "cd '$T' && env LANG=C.UTF-8 LC_ALL=C.UTF-8 TERM=screen-256color NO_COLOR=1 $BIN browse r; sleep 1000"
check "list: 4 sessions" wait_for '4 sessions' 10
keys Home
for i in 1 2 3 4; do keys m; sleep 0.2; done
check "list: 4 marked (c compares)" wait_for 'marked: 4 \(c compares\)' 3
keys c
check "compare: the screen names 4 runs" wait_for 'moelab compare .* 4 runs' 10
sleep 0.5
cap >"$T/cmp.txt"
glyphs=(● ■ ▲ ◆)
for i in 0 1 2 3; do
  g=${glyphs[$i]}; n=$((i + 1))
  check "legend: $g run$n" grep -q "$g run$n" "$T/cmp.txt"
  # the plot area: the curves panel's rows, left of its legend column
  inplot=$(sed -n 4,19p "$T/cmp.txt" | while IFS= read -r line; do printf '%s\n' "${line:0:38}"; done | grep -o "$g" | wc -l)
  check "plot: run$n's glyph $g marks its evaluations ($inplot points drawn, run has $((3 + n)) epochs)" [ "$inplot" -ge $((3 + n - 1)) ]
done
rows=$(grep -oE '│[●■▲◆] run[1-4] +[0-9]+ +[0-9.]+ +[0-9.]+ +[0-9.]+' "$T/cmp.txt" | wc -l)
check "final-metrics table: 4 rows" [ "$rows" = 4 ]
for n in 1 2 3 4; do
  want=$("$BIN" browse "$T/r" --list 2>/dev/null | awk -v r="run$n" '$1 == r { print $7 }') # last acc (%)
  ep=$((3 + n))
  check "table row run$n: epoch $ep, test accuracy $want as recorded" bash -c "[ -n '$want' ] && grep -Eq '│[●■▲◆] run$n +$ep +$want ' '$T/cmp.txt'"
done
check "heatmaps: one per run" [ "$(grep -oE '[●■▲◆] run[1-4]: Class x expert' "$T/cmp.txt" | wc -l)" = 4 ]
check "cursor: starts at the shortest run's last epoch (4)" grep -q '4 runs  epoch 4' "$T/cmp.txt"
keys Left
check "cursor: Left moves every run to epoch 3" wait_for '4 runs  epoch 3' 3
keys l
check "l: the loss curves" wait_for 'Test loss \(log\)' 3
keys Escape
check "Esc: back to the list" wait_for 'Enter open +m mark' 3

echo "t_compare: $pass passed, $fail failed"
[ "$fail" = 0 ]
