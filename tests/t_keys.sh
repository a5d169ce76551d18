#!/usr/bin/env bash
# t_keys.sh — whatever a user types on the command line, training survives (issue: Ctrl-R Ctrl-X a
# crashed libreadline 8.2 in callback mode and killed the run; Ctrl-S froze the screen through
# the terminal's flow control; Esc-Enter then invalid UTF-8 froze it in vi mode). Through tmux,
# on the live screen of a training run and on `moelab attach` to a headless one:
#   the crash sequences (Ctrl-R Ctrl-X a, Ctrl-S Ctrl-X a), Esc Enter + 14 bytes of invalid UTF-8,
#   Esc Ctrl-J (vi mode in readline's default map), Ctrl-X Ctrl-V, a numeric argument (Esc 9 9 9),
#   a yank-and-kill loop; then the process is alive, the step counter still moves on the screen,
#   Ctrl-U clears the line and a typed `set tau 0.4` is answered by the run. The cursor keys
#   still edit (Left + BackSpace inside a typed line).
# Every wait polls capture-pane; nothing asserts a time.
set -u
BIN=${1:?usage: t_keys.sh path/to/moelab}
TMUX_NAME=moelabkeys
TMUX_UTF8=1
RUNPID=
cleanup_more() { [ -n "$RUNPID" ] && kill "$RUNPID" 2>/dev/null; }
# shellcheck source=tests/tmux_harness.sh
source "$(dirname "$0")/tmux_harness.sh"

RUN="--dataset synthetic:16x16x3:4:2048 --width 0.25 --batch 32 --experts 4 --hidden 16 --threads 1 --collapse-warmup 100000000"
step_on_screen() { cap | sed -n '2s/.*step *\([0-9][0-9]*\)\/.*/\1/p'; }
# moves: the status bar's step grows within 30 s
moves() {
  local a b i
  a=$(step_on_screen)
  for ((i = 0; i < 300; i++)); do
    b=$(step_on_screen)
    [ -n "$a" ] && [ -n "$b" ] && [ "$b" -gt "$a" ] && return 0
    sleep 0.1
  done
  return 1
}
alive() { kill -0 "$1" 2>/dev/null; }
pid_in_pane() { pgrep -P "$("${TM[@]}" display -p -t "$S" '#{pane_pid}')" -f "$BIN" | head -1; }

hostile_keys() { # $1: what (live / attach)
  local what=$1
  keys C-r C-x a
  keys C-s C-x a
  keys Escape Enter
  "${TM[@]}" send-keys -t "$S" -H c3 28 a0 a1 e2 28 a1 e2 82 28 f0 28 8c bc
  keys Escape C-j
  keys C-x C-v
  keys Escape 9 9 9
  typed "abc"
  for _ in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16; do keys C-y C-y C-u; done
  keys C-a C-k
  check "$what: the screen still moves after the hostile keys (Ctrl-S did not freeze it)" moves
  check "$what: the process is alive" alive "$2"
}

# answered WHAT: `pause` (so that epoch lines stop scrolling the log) and `set tau 0.4` typed on
# the command line are both answered by the run (the live screen logs `[step N] CMD`, attach
# `CMD -> ok step=N CMD`)
answered() {
  typed "pause"
  keys Enter
  check "$1: 'pause' typed after them is answered (PAUSED on the status bar)" wait_for '^ PAUSED ' 30
  typed "set tau 0.4"
  keys Enter
  check "$1: 'set tau 0.4' typed after them is answered" wait_for '(\[step [0-9]+\] set tau 0.4|set tau 0.4 -> ok step=[0-9]+ set tau 0.4) *│' 30
  typed "resume"
  keys Enter
}

# ---- 1. the live screen
S=live
"${TM[@]}" new-session -d -x 120 -y 40 -s live \
  "cd '$T' && env LANG=C.UTF-8 LC_ALL=C.UTF-8 XDG_STATE_HOME=$T/state $BIN train $RUN --epochs 100000 --session $T/live; echo MOELAB_EXIT=\$?; exec env PS1='shell\$ ' bash --norc --noprofile -i"
check "live: the run trains (RUNNING on the status bar)" wait_for 'RUNNING .*step [1-9]' 60
LPID=$(pid_in_pane)
check "live: its pid" test -n "$LPID"
hostile_keys live "$LPID"
keys C-u
typed "set tau 0.3"
keys Left Left BSpace 4
check "live: the cursor keys edit inside the line (Left Left BackSpace 4: set tau 4.3)" wait_for '^moelab> set tau 4\.3 *$' 10
keys C-e C-u
answered live
keys q y
check "live: q y still quits cleanly (exit 0)" wait_for 'MOELAB_EXIT=0' 60

# ---- 2. attach to a headless run
(cd "$T" && exec "$BIN" train --headless $RUN --epochs 100000 --session "$T/run" >"$T/run.log" 2>&1) &
RUNPID=$!
for ((i = 0; i < 600; i++)); do
  "$BIN" ctl "$T/run" status >/dev/null 2>&1 && break
  sleep 0.1
done
S=att
"${TM[@]}" new-session -d -x 120 -y 40 -s att \
  "cd '$T' && env LANG=C.UTF-8 LC_ALL=C.UTF-8 XDG_STATE_HOME=$T/state $BIN attach $T/run; echo MOELAB_EXIT=\$?; exec env PS1='shell\$ ' bash --norc --noprofile -i"
check "attach: attached (RUNNING on the status bar)" wait_for 'RUNNING .*step [1-9]' 60
APID=$(pid_in_pane)
check "attach: its pid" test -n "$APID"
hostile_keys attach "$APID"
check "attach: the headless run is alive" alive "$RUNPID"
keys C-u
answered attach
keys q
check "attach: q detaches (exit 0)" wait_for 'MOELAB_EXIT=0' 30
check "attach: the run goes on after the detach" sh -c "'$BIN' ctl '$T/run' status | grep -q 'state=running'"
"$BIN" ctl "$T/run" quit >/dev/null 2>&1
wait "$RUNPID" 2>/dev/null
check "the headless run stops on ctl quit with status 0" test $? = 0
RUNPID=

echo "t_keys: $pass passed, $fail failed"
[ "$fail" = 0 ]
