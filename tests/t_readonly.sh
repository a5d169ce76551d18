#!/usr/bin/env bash
# t_readonly.sh — `moelab attach --read-only` (issue 32): a viewer with no way to change the run.
#   1. a headless run in the background; `attach --read-only` in tmux says so in its log and on
#      its command line;
#      every kind of command typed there (set, anneal, pause, resume, step, snapshot, eval,
#      on-collapse, quit) and the space key (pause) are refused on the screen with "read-only";
#   2. the run was not changed: still running (not paused), tau still the plan's (constant), no event with
#      origin socket in its event log, and the attacher keeps following (its step advances);
#   3. the socket side: a raw client that says `readonly` gets `set tau 0.3` refused by the run;
#   4. `/` still filters its log (a screen-only key); q detaches (exit 0) and the run goes on.
# Every wait polls capture-pane with a generous limit; nothing asserts a time.
set -u
BIN=${1:?usage: t_readonly.sh path/to/moelab}
TMUX_NAME=moelabro
RUNPID=
cleanup_more() { [ -n "$RUNPID" ] && kill "$RUNPID" 2>/dev/null; }
. "$(dirname "$0")/tmux_harness.sh"

field() { sed -n "s/.* $1=\([^ ]*\).*/\1/p"; }
status_of() { "$BIN" ctl "$T/run" status 2>/dev/null; }
bar_step() { cap | grep -Eo 'step [0-9]+' | head -1 | grep -Eo '[0-9]+'; }

# a slow enough epoch (625 steps) that the log is not scrolled past the refusals by epoch lines
RUN="--dataset synthetic:16x16x3:4:20000 --width 0.25 --batch 32 --experts 4 --hidden 16 --threads 1 --collapse-warmup 100000000"
(cd "$T" && exec nohup "$BIN" train --headless $RUN --epochs 400 --schedule const --session "$T/run" >"$T/run.log" 2>&1) &
RUNPID=$!
for ((i = 0; i < 600; i++)); do
  s=$(status_of | field step)
  [ -n "$s" ] && [ "$s" -ge 10 ] && break
  sleep 0.1
done
check "the headless run trains and listens" test -n "$s" -a "${s:-0}" -ge 10
tau0=$(status_of | field tau)

"${TM[@]}" new-session -d -x 120 -y 40 -s "$S" \
  "cd '$T' && env LANG=C.UTF-8 LC_ALL=C.UTF-8 XDG_STATE_HOME=$T/state $BIN attach --read-only $T/run; echo MOELAB_EXIT=\$?; exec sleep 100000"
check "attach --read-only: the log says so" wait_for 'attached read-only to ' 30
check "attach --read-only: the command line says commands are refused" wait_for 'read-only: commands are refused' 10
wait_for 'RUNNING .*step [1-9]' 30
for cmd in "set tau 0.3" "set lr 0.5" "anneal linear 1 0.1" "pause" "resume" "step 5" "snapshot" "eval" \
  "on-collapse pause" "quit"; do
  typed "$cmd"
  keys Enter
  check "read-only: '$cmd' refused on the screen" wait_for "read-only: '$cmd' refused" 10
done
no_confirm() { ! cap | grep -q 'Stop the run?'; }
check "read-only: quit asked no confirmation (nothing to confirm)" no_confirm
keys Space
check "read-only: space (pause) refused on the screen" wait_for 'read-only: pause \(space\) refused' 10
sleep 1
st=$(status_of)
check "the run is still running (not paused, not stopped)" grep -q 'state=running' <<<"$st"
check "the run's tau is unchanged ($tau0)" test "$(field tau <<<"$st")" = "$tau0"
b1=$(bar_step)
moved=0
for ((i = 0; i < 100; i++)); do
  sleep 0.2
  b2=$(bar_step)
  [ -n "$b1" ] && [ -n "$b2" ] && [ "$b2" -gt "$b1" ] && { moved=1; break; }
done
check "the read-only attacher keeps following (its step $b1 -> ${b2:-?})" test $moved = 1

# the run's side: a client that said `readonly` is refused by the server itself
if command -v python3 >/dev/null 2>&1; then
  out=$(python3 - "$T/run/control.sock" <<'EOF'
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.connect(sys.argv[1])
f = s.makefile("rw")
for line in ("readonly", "set tau 0.3", "pause", "status"):
    f.write(line + "\n"); f.flush()
    print(f.readline().strip())
EOF
)
  echo "$out"
  check "socket: 'readonly' is acknowledged" grep -qx 'ok read-only' <<<"$out"
  check "socket: 'set tau 0.3' and 'pause' refused on a read-only connection" \
    test "$(grep -c '^error: read-only connection' <<<"$out")" = 2
  check "socket: status still answers on a read-only connection" grep -q '^ok step=' <<<"$out"
else
  echo "SKIP  no python3: the raw read-only socket client"
fi
check "the run is still running after the raw client" sh -c "'$BIN' ctl '$T/run' status | grep -q 'state=running'"

typed "/refused"
keys Enter
check "read-only: / still filters the log (it changes nothing in the run)" wait_for 'Log /refused: [0-9]+ match' 10
keys q
check "q detaches: 'detached from'" wait_for 'detached from .* at step [0-9]+' 20
check "q detaches: exit 0" wait_for 'MOELAB_EXIT=0' 20
check "the run goes on after the detach" sh -c "'$BIN' ctl '$T/run' status | grep -q 'state=running'"
"$BIN" ctl "$T/run" quit >/dev/null
wait "$RUNPID"
RUNPID=
"$BIN" export "$T/run" --csv "$T/csv" >/dev/null 2>&1
check "its event log: exactly one command from the socket (ctl's quit), none from the viewer" \
  test "$(grep -c '# socket$' "$T/csv/events.csv")" = 1

echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
