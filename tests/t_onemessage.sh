#!/usr/bin/env bash
# t_onemessage.sh — one episode, one message, everywhere (issue #40 item 3): for a red collapse
# (a biased router: the training view), a yellow death (an expert starved by its utility bias) and
# a yellow clean-router warning (noise hides the collapse), a headless run paused by its commands
# file just after the alarm; then the event's message (the headless line) must be, word for word,
# the start of: live.h5's event (export), `moelab ctl status`, the banner of `moelab attach`, and
# the banner of `moelab browse` on the finished session; where the banner or ctl show the current
# value it follows as " (now X% to eN)". Every wait polls; nothing asserts a time.
set -u
BIN=${1:?usage: t_onemessage.sh path/to/moelab}
TMUX_NAME=moelabonemsg
TMUX_UTF8=1
RUNPID=
cleanup_more() { [ -n "$RUNPID" ] && kill "$RUNPID" 2>/dev/null; }
# shellcheck source=tests/tmux_harness.sh
source "$(dirname "$0")/tmux_harness.sh"

SYN="--dataset synthetic:16x16x3:4:4096 --width 0.25 --batch 32 --hidden 32 --threads 1 --no-augment --schedule const --epochs 2"
# the banner's text, both rows joined (a long message wraps at a word onto its second row)
banner() { cap "$1" | sed -n '3,4p' | sed 's/^ *//; s/ *$//' | tr '\n' ' ' | sed 's/  */ /g'; }
# same_start A B: B starts with A (spaces squeezed; the screen may cut the end of a long message)
same_start() {
  local a b
  a=$(printf '%s' "$1" | tr -s ' ' | cut -c1-70)
  b=$(printf '%s' "$2" | tr -s ' ')
  [ -n "$a" ] && [ "${b#"$a"}" != "$b" ]
}

one_case() { # NAME PAUSE-STEP KIND-REGEX OPTIONS...
  local name=$1 at=$2 kind=$3; shift 3
  local dir="$T/$name" i msg
  printf 'at %s pause\n' "$at" > "$T/$name.cmd"
  (cd "$T" && exec "$BIN" train --headless $SYN "$@" --commands "$T/$name.cmd" --session "$dir" >"$T/$name.log" 2>&1) &
  RUNPID=$!
  for ((i = 0; i < 600; i++)); do
    "$BIN" ctl "$dir" status 2>/dev/null | grep -q 'state=paused' && break
    sleep 0.1
  done
  check "$name: the run pauses at step $at" sh -c "'$BIN' ctl '$dir' status | grep -q 'step=$at .*state=paused'"
  # ctl status: THE message of the most severe open item, and " (now ...)" when its value moved
  local status msg
  status=$("$BIN" ctl "$dir" status | sed 's/.* -- //')
  msg=$(printf '%s' "$status" | sed 's/ (now [0-9]*% to e[0-9]*)$//')
  check "$name: ctl status carries an alarm message of kind $kind ($status)" sh -c "printf '%s' \"\$1\" | grep -Eq '^($kind) '" _ "$msg"
  check "$name: ... which is word for word the message of a headless alarm line (the event's)" \
    sh -c "grep -E '^\[step [0-9]+\] (collapse|warning|expert death) at step' \"\$1\" | sed 's/^[^)]*): //' | grep -qxF -- \"\$2\"" _ "$T/$name.log" "$msg"
  S=$name
  "${TM[@]}" new-session -d -x 160 -y 40 -s "$name" \
    "cd '$T' && env LANG=C.UTF-8 LC_ALL=C.UTF-8 XDG_STATE_HOME=$T/state $BIN attach $dir; echo MOELAB_EXIT=\$?; exec bash --norc --noprofile -i"
  wait_for 'PAUSED' 30
  check "$name: attach's banner says the same message" same_start "$msg" "$(banner "$name")"
  keys q
  wait_for 'MOELAB_EXIT=' 30
  "$BIN" ctl "$dir" resume >/dev/null
  wait "$RUNPID"
  RUNPID=
  rm -rf "$T/$name.csv"
  "$BIN" export "$dir" --csv "$T/$name.csv" >/dev/null 2>&1
  check "$name: live.h5's event carries the same message" grep -qF -- "$msg" "$T/$name.csv/events.csv"
  # the browser opens at the last step: each case's episode is still open there (the same message)
  S=${name}b
  "${TM[@]}" new-session -d -x 160 -y 40 -s "$S" \
    "cd '$T' && env LANG=C.UTF-8 LC_ALL=C.UTF-8 XDG_STATE_HOME=$T/state $BIN browse $dir; echo MOELAB_EXIT=\$?; exec bash --norc --noprofile -i"
  wait_for 'COLLAPSE|WARNING|EXPERT' 30
  check "$name: the browser's banner at the last step is the same event message, not a text of its own" same_start "$msg" "$(banner "$S")"
  keys q
}

one_case collapse 160 'COLLAPSE' --noise 0 --alpha 0 --bias-mode select --bias-rate 0 --init-bias e3=10
one_case death 140 'EXPERT DEATH' --noise 0.5 --alpha 0.01 --bias-mode select --bias-rate 0.01 --init-bias e5=-30
one_case warning 150 'COLLAPSE|WARNING' --noise 2 --alpha 0.01 --bias-mode select --bias-rate 0 --init-bias e3=3

echo "t_onemessage: $pass passed, $fail failed"
[ "$fail" = 0 ]
