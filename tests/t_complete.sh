#!/usr/bin/env bash
# t_complete.sh — completion (issue 32): the bash completion offers the preset names after
# `sweep --preset` and the budgets after `--budget` (never file names), also typed into an
# interactive bash in tmux; in the live screen, Tab's list of matches shows in a popup above the
# command line, the next key closes it, and nothing of it lands in the Log panel.
set -u
BIN=${1:?usage: t_complete.sh path/to/moelab}
TMUX_NAME=moelabcomplete S=cmp WAIT_FLOOR=10
. "$(dirname "$0")/tmux_harness.sh"

# ---- 1. the generated bash completion, called as bash calls it
"$BIN" --bash-completion > "$T/moelab.bash"
touch "$T/temperature.txt" "$T/topfile"   # file names that must not be offered
comp() { # comp WORD... : COMPREPLY for the last word, one line
  (cd "$T" && . "$T/moelab.bash" && COMP_WORDS=("$@") && COMP_CWORD=$(($# - 1)) && _moelab && echo "${COMPREPLY[*]}")
}
got=$(comp moelab sweep --preset "")
want="hidden-size topk-rho imagenet-topk softmoe temperature backbone"
check "sweep --preset <TAB> lists the presets ($got)" test "$got" = "$want"
got=$(comp moelab sweep --preset t)
check "sweep --preset t<TAB>: topk-rho temperature ($got)" test "$got" = "topk-rho temperature"
got=$(comp moelab sweep --budget "")
check "sweep --budget <TAB>: quick medium paper ($got)" test "$got" = "quick medium paper"
got=$(comp moelab --preset te)
check "--preset te<TAB> before the subcommand: temperature ($got)" test "$got" = "temperature"

# ---- 2. the same in an interactive bash (readline) in tmux
"${TM[@]}" new-session -d -x 120 -y 30 -s "$S" \
  "cd '$T' && exec env PS1='sh\$ ' PATH='$(dirname "$BIN")':\$PATH bash --norc --noprofile -i"
wait_for 'sh\$' 10
typed ". '$T/moelab.bash'"; keys Enter
typed 'moelab sweep --preset tem'; keys Tab
check "readline in bash completes 'sweep --preset tem' to temperature" wait_for 'sh\$ moelab sweep --preset temperature$' 5
keys C-u
"${TM[@]}" kill-session -t "$S" >/dev/null 2>&1

# ---- 3. the live screen: the match list in a popup, not in the log
RUN="--dataset synthetic:16x16x3:4:2048 --width 0.25 --batch 32 --experts 4 --hidden 16 --epochs 50"
"${TM[@]}" new-session -d -x 120 -y 40 -s "$S" \
  "cd '$T' && env XDG_STATE_HOME=$T/state TERM=xterm-256color LANG=C.UTF-8 LC_ALL=C.UTF-8 $BIN train $RUN; echo MOELAB_EXIT=\$?; sleep 100"
if ! wait_for '(RUNNING|PAUSED) +epoch' 30; then
  bad "the live screen did not start"; cap | head -20; echo "$pass passed, $fail failed"; exit 1
fi
keys Space
wait_for '^ PAUSED ' 10
wait_for '\[step [0-9]+\] pause' 10
typed 'set '; keys Tab
check "Tab opens the popup with its count" wait_for '[0-9]+ completions' 5
cap > "$T/popup.txt"
check "the popup lists parameter names" grep -Eq 'alpha +beta +bias-rate +cf +lr +noise +tau' "$T/popup.txt"
row=$(grep -n 'completions' "$T/popup.txt" | head -1 | cut -d: -f1)
cmdrow=$(grep -n 'moelab> set' "$T/popup.txt" | head -1 | cut -d: -f1)
check "the popup sits just above the command line (rows $row..$cmdrow)" test -n "$row" -a -n "$cmdrow" -a "$((cmdrow - row))" -le 4 -a "$((cmdrow - row))" -ge 3
typed 't'
if wait_for 'moelab> set t$' 5 && ! cap | grep -q 'completions'; then ok "the next key closes the popup, nothing in the log"
else bad "the popup is still there after a key"; cap | tail -12; fi
check "the log's newest line (the pause) is still there" wait_for '\[step [0-9]+\] pause' 5
keys Tab
check "Tab on one match completes it (no popup)" wait_for 'moelab> set tau$' 5
check "  ... and no popup" test "$(cap | grep -c 'completions')" = 0
keys C-u
typed 'anneal '; keys Tab
check "anneal <TAB>: schedule names in the popup" wait_for 'const +cosine +cosine-restart +exp +linear' 5
keys C-u
sleep 0.5
check "no completion line in the screen after the keys" test "$(cap | grep -c 'completions')" = 0
keys q; wait_for 'Quit training\?' 5 && keys y
check "moelab exits" wait_for 'MOELAB_EXIT=0' 20

echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
