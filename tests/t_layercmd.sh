#!/usr/bin/env bash
# t_layercmd.sh — the @layer suffix on the live screen (tmux, own server socket): a run with a
# routed layer after stage 2 and the moe head; Tab after `@` completes the run's layer names,
# `set tau 0.3 @moe2` lands in the log with its suffix, an unknown layer is refused naming the
# valid ones, and the session's event log keeps the suffix. Every wait polls capture-pane.
set -u
BIN=${1:?usage: t_layercmd.sh path/to/moelab}
TMUX_NAME=moelablayer S=lay
. "$(dirname "$0")/tmux_harness.sh"
"${TM[@]}" new-session -d -s "$S" -x 120 -y 40 \
  "cd $T && XDG_STATE_HOME=$T/state $BIN train --dataset synthetic:16x16x3:4:2048 --width 0.25 --batch 32 --experts 4 --hidden 16 --epochs 50 --head moe --moe-after 2 --moe-hidden 8 --threads 1 --session $T/run; sleep 30"
check "the live screen starts" wait_for 'step [0-9]+/' 60
typed 'pause'; keys Enter
wait_for 'PAUSED' 20
typed 'set tau 0.3 @m'; keys Tab
check "Tab after @ completes the layer name" wait_for 'moelab> set tau 0\.3 @moe2' 10
keys C-u
typed 'set cf 2 @'; keys Tab; keys Tab
check "Tab after @ lists the run's layers (in the completion popup)" wait_for '2 completions' 10
check "  ... head and moe2" wait_for 'head +moe2' 10
keys C-u
typed 'set tau 0.3 @moe2'; keys Enter
check "set tau 0.3 @moe2 lands in the log" wait_for '\[step [0-9]+\] set tau 0\.3 @moe2' 10
typed 'set tau 0.3 @moe3'; keys Enter
check "an unknown layer is refused naming the valid ones" wait_for "no routed layer 'moe3' in this run \(routed layers: @moe2, @head\)" 10
typed 'quit'; keys Enter
check "quit ends the run" wait_for 'interrupted at step' 120
h5dump -d /events "$T/run/live.h5" 2>/dev/null | grep -q 'set tau 0.3 @moe2  # screen' \
  && ok "the event log keeps the suffix and the origin" || bad "event log: $(h5dump -d /events "$T/run/live.h5" 2>&1 | grep -o '"set[^"]*"' | head -3)"
echo "t_layercmd: $pass passed, $fail failed"
[ $fail = 0 ]
