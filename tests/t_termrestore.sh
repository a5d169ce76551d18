#!/usr/bin/env bash
# t_termrestore.sh — the three full-screen subcommands give the terminal back when they die of an
# assertion (app/term/term.c): `moelab browse`, `moelab attach` and the live screen (`moelab
# train`) are made to fail an ML_ASSERT after their first frame ($MOELAB_TEST_ABORT=NAME), or to
# call abort() (NAME:abort, the path of a failed assert()), inside a tmux pane whose shell then
# records `stty -a`. Restored means: the process died of SIGABRT (exit 134), the pane is out of the
# alternate screen (tmux #{alternate_on} = 0), the line discipline is cooked again (icanon, echo,
# icrnl in stty -a) and the assertion's message reached the real stderr. A control case shows the
# check can fail: a browser killed with SIGKILL (no handler can run) leaves the terminal raw and in
# the alternate screen, and the same check must say so.
# Needs tmux (exit 77, reported by ctest as skipped, without it: tests/tmux_harness.sh).
set -u
BIN=${1:?usage: t_termrestore.sh path/to/moelab}
TMUX_NAME=moelabterm
RUNPID=
cleanup_more() { [ -n "$RUNPID" ] && kill "$RUNPID" 2>/dev/null; }
. "$(dirname "$0")/tmux_harness.sh"

# run_case NAME CMD: CMD in a fresh 100x30 pane; when it ends the pane's shell writes its exit
# status and `stty -a` (what CMD left the terminal in) and waits. 0 once that was written.
run_case() {
  local name=$1 cmd=$2 i
  rm -f "$T/$name.rc" "$T/$name.stty"
  "${TM[@]}" new-session -d -x 100 -y 30 -s "$name" \
    "cd '$T' && env LANG=C.UTF-8 LC_ALL=C.UTF-8 XDG_STATE_HOME=$T/state $cmd 2>'$T/$name.err'; echo \$? >'$T/$name.rc.tmp'; stty -a >'$T/$name.stty' 2>&1; mv '$T/$name.rc.tmp' '$T/$name.rc'; exec sleep 100000"
  for ((i = 0; i < 600; i++)); do [ -e "$T/$name.rc" ] && return 0; sleep 0.1; done
  return 1
}
# restored NAME: the pane left the alternate screen and the tty is cooked (icanon echo icrnl)
restored() {
  local alt
  alt=$("${TM[@]}" display-message -p -t "$1" '#{alternate_on}')
  [ "$alt" = 0 ] && grep -Eq '(^| )icanon( |$)' "$T/$1.stty" && grep -Eq '(^| )echo( |$)' "$T/$1.stty" &&
    grep -Eq '(^| )icrnl( |$)' "$T/$1.stty"
}
describe() { echo "alternate_on=$("${TM[@]}" display-message -p -t "$1" '#{alternate_on}') rc=$(cat "$T/$1.rc" 2>/dev/null) stty: $(grep -Eo '(^| )-?(icanon|echo|icrnl)( |$)' "$T/$1.stty" | tr -d '\n') stderr: $(head -c 300 "$T/$1.err")"; }

RUN=(--dataset synthetic:8x8x1:3:96 --width 0.25 --hidden 8 --experts 4 --batch 32 --threads 1)
"$BIN" train --headless "${RUN[@]}" --epochs 1 --session "$T/s" >"$T/train.log" 2>&1 || { echo "FAIL  cannot make a session: $(tail -3 "$T/train.log")"; exit 1; }

# ---- 1. browse: ML_ASSERT and abort()
for mode in browse browse:abort; do
  n=${mode/:/_}
  if ! run_case "$n" "env MOELAB_TEST_ABORT=$mode $BIN browse $T/s"; then bad "$mode: the browser did not end"; continue; fi
  [ "$(cat "$T/$n.rc")" = 134 ] && ok "$mode: died of SIGABRT (exit 134)" || bad "$mode: exit $(cat "$T/$n.rc"), not 134: $(describe "$n")"
  restored "$n" && ok "$mode: terminal restored (out of the alternate screen, icanon echo icrnl)" || bad "$mode: terminal left in screen mode: $(describe "$n")"
done
grep -q 'moelab browse: internal error: .*MOELAB_TEST_ABORT' "$T/browse.err" && ok "browse: the assertion's message on the real stderr" ||
  bad "browse: no assertion message on stderr: $(head -c 300 "$T/browse.err")"

# ---- 2. the control case: SIGKILL leaves the terminal raw, and the check sees it
"${TM[@]}" new-session -d -x 100 -y 30 -s killed \
  "cd '$T' && env LANG=C.UTF-8 LC_ALL=C.UTF-8 $BIN browse $T/s 2>/dev/null; echo \$? >'$T/killed.rc.tmp'; stty -a >'$T/killed.stty' 2>&1; mv '$T/killed.rc.tmp' '$T/killed.rc'; exec sleep 100000"
for ((i = 0; i < 200; i++)); do cap killed | grep -q 'epoch' && break; sleep 0.1; done
pid=$("${TM[@]}" display-message -p -t killed '#{pane_pid}')
bpid=$(pgrep -P "$pid" -f "moelab browse" | head -1)
[ -n "$bpid" ] && kill -KILL "$bpid"
for ((i = 0; i < 100; i++)); do [ -e "$T/killed.rc" ] && break; sleep 0.1; done
if [ -e "$T/killed.rc" ] && ! restored killed; then ok "control: a SIGKILLed browser leaves the terminal raw and the check says so ($(describe killed))"
else bad "control: the check did not see the terminal of a SIGKILLed browser as left raw ($(describe killed))"; fi

# ---- 3. attach to a running run: ML_ASSERT
(cd "$T" && exec "$BIN" train --headless "${RUN[@]}" --epochs 4000 --session "$T/run" >"$T/run.log" 2>&1) &
RUNPID=$!
for ((i = 0; i < 600; i++)); do "$BIN" ctl "$T/run" status >/dev/null 2>&1 && break; sleep 0.1; done
if run_case attach "env MOELAB_TEST_ABORT=attach $BIN attach $T/run"; then
  [ "$(cat "$T/attach.rc")" = 134 ] && ok "attach: died of SIGABRT (exit 134)" || bad "attach: exit $(cat "$T/attach.rc"): $(describe attach)"
  restored attach && ok "attach: terminal restored" || bad "attach: terminal left in screen mode: $(describe attach)"
  grep -q 'moelab attach: internal error: .*MOELAB_TEST_ABORT' "$T/attach.err" && ok "attach: the assertion's message on the real stderr" ||
    bad "attach: no assertion message: $(head -c 300 "$T/attach.err")"
else bad "attach: did not end"; fi
"$BIN" ctl "$T/run" status >/dev/null 2>&1 && ok "attach: the run goes on after its attacher died" || bad "attach: the run stopped"
kill "$RUNPID" 2>/dev/null; wait "$RUNPID" 2>/dev/null; RUNPID=

# ---- 4. the live screen: ML_ASSERT
if run_case train "env MOELAB_TEST_ABORT=train $BIN train ${RUN[*]} --epochs 50 --no-session"; then
  [ "$(cat "$T/train.rc")" = 134 ] && ok "train: died of SIGABRT (exit 134)" || bad "train: exit $(cat "$T/train.rc"): $(describe train)"
  restored train && ok "train: terminal restored" || bad "train: terminal left in screen mode: $(describe train)"
  grep -q 'moelab train: internal error: .*MOELAB_TEST_ABORT' "$T/train.err" && ok "train: the assertion's message on the real stderr" ||
    bad "train: no assertion message: $(head -c 300 "$T/train.err")"
else bad "train: did not end"; fi

echo "t_termrestore: $pass passed, $fail failed"
[ "$fail" = 0 ]
