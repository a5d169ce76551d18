#!/usr/bin/env bash
# t_control.sh — the control socket of a headless run, without a terminal:
#   - control.sock is a 0600 socket while the run trains and is gone after it;
#   - `moelab ctl` status / set / pause / resume / a refused command / usage / no run: exit 0/1/2/3,
#     the commands in the event log with origin `socket`, and `moelab replay` MATCH;
#   - another user (nobody, via setpriv) is refused: by the kernel while the socket is 0600, and by
#     the server's SO_PEERCRED check (logged in the run's output) when the socket is opened to all;
#   - 1 MiB without a newline, random bytes, a half line, and a burst of 1,000 lines (half of them
#     valid): the run keeps training, every valid command is answered `ok` and logged, nothing
#     else is applied;
#   - a stale control.sock left by a killed run is replaced; a regular file of that name is not;
#   - headless SIGINT / SIGTERM end with 130 / 143 after the final checkpoint.
# Every wait polls with a generous limit (the machine may be loaded); nothing asserts a time.
set -u
BIN=${1:?usage: t_control.sh path/to/moelab}
BIN=$(cd "$(dirname "$BIN")" && pwd)/$(basename "$BIN")
T=$(mktemp -d)
chmod 0755 "$T" # another user must be able to reach the socket's folder for the refusal test
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done
  rm -rf "$T"
}
trap cleanup EXIT
pass=0
fail=0
ok() { echo "PASS  $*"; pass=$((pass + 1)); }
bad() { echo "FAIL  $*"; fail=$((fail + 1)); }
check() { local what=$1; shift; if "$@"; then ok "$what"; else bad "$what"; fi; }

RUN="--headless --dataset synthetic:16x16x3:4:2048 --width 0.25 --batch 32 --experts 4 --hidden 16 --threads 1"
# start NAME EPOCHS: a headless run in the background, output in $T/NAME.log, pid in $T/NAME.pid
start() {
  (cd "$T" && exec "$BIN" train $RUN --epochs "$2" --session "$T/$1" >"$T/$1.log" 2>&1) &
  echo $! >"$T/$1.pid"
  PIDS+=($!)
}
# wait_sock DIR: until `moelab ctl DIR status` answers (60 s)
wait_sock() {
  local i
  for ((i = 0; i < 600; i++)); do
    "$BIN" ctl "$1" status >/dev/null 2>&1 && return 0
    sleep 0.1
  done
  return 1
}
field() { sed -n "s/.* $1=\([^ ]*\).*/\1/p"; } # field NAME < status line
wait_pid() {                                   # wait_pid PID SECONDS: exit status, or 255 on timeout
  local i
  for ((i = 0; i < $2 * 10; i++)); do
    kill -0 "$1" 2>/dev/null || { wait "$1"; return $?; }
    sleep 0.1
  done
  return 255
}

# ---- 1. ctl against a headless run
start a 400
check "the socket answers" wait_sock "$T/a"
check "control.sock is a socket, mode 0600" test "$(stat -c '%F %a' "$T/a/control.sock")" = "socket 600"
st=$("$BIN" ctl "$T/a" status)
check "status: ok step=N ... state=running" grep -Eq '^ok step=[0-9]+ total=[0-9]+ .*state=running' <<<"$st"
# epochs counted as the screen counts them (issue 32): epoch = the one in progress, epochs_done the
# completed ones, so epoch = epochs_done + 1 while the run trains
ep=$(field epoch <<<"$st"); done_=$(field epochs_done <<<"$st")
check "status: epoch $ep is the one in progress (epochs_done $done_ + 1)" test -n "$ep" -a "$ep" = "$(( ${done_:-0} + 1 ))"
out=$("$BIN" ctl "$T/a" set tau 0.3)
rc=$?
check "set tau 0.3: exit 0, reply 'ok step=N set tau 0.3'" test $rc = 0 -a -n "$(grep -E '^ok step=[0-9]+ set tau 0.3$' <<<"$out")"
check "status: the collapse flag and the routed layer (the head) with its own tau" \
  bash -c "for i in \$(seq 50); do '$BIN' ctl '$T/a' status | grep -Eq ' collapsed=[01] .* layers=head tau@head=0.3 collapsed@head=[01]( -- .*)?\$' && exit 0; sleep 0.1; done; exit 1"
"$BIN" ctl "$T/a" set cf banana >"$T/o" 2>&1
check "a refused command: exit 1, 'error: ...'" test $? = 1 -a -n "$(grep '^error: ' "$T/o")"
"$BIN" ctl "$T/a" >/dev/null 2>&1
check "usage: exit 2" test $? = 2
"$BIN" ctl "$T/nosuch" status >/dev/null 2>&1
check "no such session: exit 3" test $? = 3
out=$("$BIN" ctl "$T/a" pause)
check "pause: ok" grep -Eq '^ok step=[0-9]+ pause$' <<<"$out"
s1=$("$BIN" ctl "$T/a" status | field step)
sleep 1.5
st=$("$BIN" ctl "$T/a" status)
check "paused: the step does not move, state=paused" test "$(field step <<<"$st")" = "$s1" -a "$(field state <<<"$st")" = paused
check "paused: tau is 0.3" test "$(field tau <<<"$st")" = 0.3
"$BIN" ctl "$T/a" resume >/dev/null
moved=0
for ((i = 0; i < 300; i++)); do
  s2=$("$BIN" ctl "$T/a" status | field step)
  [ -n "$s2" ] && [ "$s2" -gt "$s1" ] && { moved=1; break; }
  sleep 0.1
done
check "resume: training goes on" test $moved = 1

# ---- 2. another user: the kernel refuses a 0600 socket, the server refuses a peer of another uid
if command -v setpriv >/dev/null && [ "$(id -u)" = 0 ]; then
  AS_NOBODY=(setpriv --reuid=nobody --regid=nogroup --clear-groups)
  "${AS_NOBODY[@]}" "$BIN" ctl "$T/a" status >"$T/o" 2>&1
  check "nobody, socket 0600: refused (exit 1, permission denied)" test $? = 1 -a -n "$(grep 'permission denied' "$T/o")"
  chmod 0666 "$T/a/control.sock" # as if the socket's mode were lost: the uid checks must still hold
  "${AS_NOBODY[@]}" "$BIN" ctl "$T/a" set tau 5 >"$T/o" 2>&1
  rc=$?
  check "nobody, socket 0666: ctl sees the listener is root's and sends nothing (exit 1)" \
    test $rc = 1 -a -n "$(grep 'the process listening there runs as uid 0 (root), not as you (uid 65534' "$T/o")"
  # a client that skips that check (raw socket): the server's own SO_PEERCRED check refuses it
  "${AS_NOBODY[@]}" /usr/bin/python3 -c '
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM); s.connect(sys.argv[1]); s.settimeout(30)
try: s.sendall(b"set tau 5\n")
except OSError: pass
buf = b""
while True:
    try: d = s.recv(4096)
    except OSError: d = b""
    if not d: break
    buf += d
print(buf.decode().strip())' "$T/a/control.sock" >"$T/o" 2>&1
  check "nobody, raw client, socket 0666: the server refuses ('error: permission denied')" grep -q '^error: permission denied' "$T/o"
  check "the refusal is in the run's log (uid 65534)" grep -q 'refused a connection from uid 65534' "$T/a.log"
  check "tau is still 0.3" test "$("$BIN" ctl "$T/a" status | field tau)" = 0.3
  chmod 0600 "$T/a/control.sock"
else
  echo "SKIP  another user: needs root and setpriv"
fi

# ---- 3. hostile input: 1 MiB without newline, random bytes, a half line, a 1,000-line burst
s1=$("$BIN" ctl "$T/a" status | field step)
python3 - "$T/a/control.sock" "$T" <<'EOF' >"$T/hostile.txt"
import os, random, socket, sys
path, tdir = sys.argv[1], sys.argv[2]
def conn():
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM); s.connect(path); s.settimeout(120); return s
def lines(s):
    buf = b""
    while True:
        try: d = s.recv(65536)
        except (ConnectionResetError, socket.timeout): d = b""
        if not d: break
        buf += d
    return buf.decode("utf-8", "replace").splitlines()
# 1 MiB without a newline: an error, then the server closes
s = conn()
try: s.sendall(b"x" * (1 << 20))
except (BrokenPipeError, ConnectionResetError): pass
r = lines(s); print("long", len(r), r[0] if r else "")
# random bytes (newlines included): only errors
random.seed(7)
s = conn(); data = bytes(random.getrandbits(8) for _ in range(65536))
s.sendall(data); s.shutdown(socket.SHUT_WR)
r = lines(s); print("random", len(r), sum(1 for x in r if x.startswith("error:")), sum(1 for x in r if x.startswith("ok")))
# a half line then end of file: never applied
s = conn(); s.sendall(b"set tau 9"); s.shutdown(socket.SHUT_WR)
r = lines(s); print("half", len(r), r[0] if r else "")
# 1,000 lines at once: 500 valid `set alpha`, 500 invalid
burst = []
for i in range(1000):
    burst.append(("set alpha %.6f" % (0.001 + i * 1e-5)) if i % 2 == 0 else random.choice(
        ["set alpha -1", "set nosuch 1", "pause now", "\x01\x02", "anneal bogus", "set tau", "step -1", "x" * 100]))
s = conn(); s.sendall(("\n".join(burst) + "\n").encode()); s.shutdown(socket.SHUT_WR)
r = lines(s)
oks = [x for x in r if x.startswith("ok step=")]
print("burst", len(r), len(oks), sum(1 for x in r if x.startswith("error:")))
open(os.path.join(tdir, "burst_ok.txt"), "w").write("\n".join(oks) + "\n")
EOF
cat "$T/hostile.txt"
check "1 MiB without newline: 'error: line longer than 4096 bytes', closed" grep -Eq '^long 1 error: line longer than 4096 bytes' "$T/hostile.txt"
check "random bytes: errors only, no ok" grep -Eq '^random [1-9][0-9]* [1-9][0-9]* 0$' "$T/hostile.txt"
check "half line: 'error: incomplete line'" grep -Eq '^half 1 error: incomplete line' "$T/hostile.txt"
check "burst: 1000 replies, 500 ok, 500 errors" grep -Eq '^burst 1000 500 500$' "$T/hostile.txt"
st=$("$BIN" ctl "$T/a" status)
check "after all that the run trains on" test "$(field step <<<"$st")" -gt "$s1" -a "$(field state <<<"$st")" = running
"$BIN" ctl "$T/a" quit >/dev/null
wait_pid "$(cat "$T/a.pid")" 300
check "quit through the socket: the run stops, exit 0" test $? = 0
check "control.sock is removed at exit" test ! -e "$T/a/control.sock"
"$BIN" export "$T/a" --csv "$T/a-csv" >/dev/null
ns=$(grep -c '  # socket$' "$T/a-csv/events.csv")
check "event log: exactly the 500 + 4 valid socket commands (set tau, pause, resume, 500 set alpha, quit)" test "$ns" = 504
check "no invalid command reached the event log" test -z "$(grep -E 'set alpha -1|nosuch|bogus|tau 9|tau 5' "$T/a-csv/events.csv")"
check "ctl on a finished run: exit 3" sh -c "'$BIN' ctl '$T/a' status >/dev/null 2>&1; test \$? = 3"
"$BIN" replay "$T/a" >"$T/replay.txt" 2>&1
check "replay of the steered session: MATCH" grep -q 'final metrics MATCH' "$T/replay.txt"

# ---- 4. a stale socket is replaced; a regular file of that name is left alone
mkdir -p "$T/b"
python3 -c "import socket,sys; s=socket.socket(socket.AF_UNIX); s.bind(sys.argv[1])" "$T/b/control.sock"
start b 400
check "stale control.sock: the run listens again" wait_sock "$T/b"
check "the replacement is logged" grep -q 'replaced the stale' "$T/b.log"
kill -INT "$(cat "$T/b.pid")"
wait_pid "$(cat "$T/b.pid")" 300
rc=$?
check "headless SIGINT: exit 130" test $rc = 130
check "SIGINT: the final checkpoint was written" sh -c "grep -q 'interrupt: stopping cleanly' '$T/b.log' && ls '$T/b'/ckpt-*.h5 >/dev/null"
last=$(sed -n 's/^\[step \([0-9]*\)\] interrupt: stopping cleanly$/\1/p' "$T/b.log" | tail -1)
check "SIGINT: a checkpoint at the stop step ($last)" test -n "$last" -a -e "$T/b/ckpt-$last.h5"
mkdir -p "$T/c"
echo "not a socket" >"$T/c/control.sock"
start c 400
for ((i = 0; i < 600; i++)); do grep -q 'is not a socket' "$T/c.log" && break; sleep 0.1; done
check "a regular file named control.sock: warned, not replaced" sh -c "grep -q 'is not a socket' '$T/c.log' && test -f '$T/c/control.sock' && grep -q 'not a socket' '$T/c/control.sock'"
for ((i = 0; i < 600; i++)); do grep -q '^epoch ' "$T/c.log" && break; sleep 0.1; done
kill -TERM "$(cat "$T/c.pid")"
wait_pid "$(cat "$T/c.pid")" 300
check "headless SIGTERM: exit 143" test $? = 143
check "SIGTERM: status interrupted in live.h5" sh -c "'$BIN' browse --list '$T' 2>/dev/null | grep -E '^ *c ' | grep -q interrupted"

# ---- 6. (issue 27) idle and stalled clients cannot lock the owner out: 20 connections that send
# nothing, then 20 that never finish a line; `ctl status` still answers within 2 s each time
start d 400
check "run d: the socket answers" wait_sock "$T/d"
for kind in idle half; do
  rm -f "$T/hold.ready"
  python3 - "$T/d/control.sock" "$kind" "$T/hold.ready" <<'EOF' &
import socket, sys, time
path, kind, ready = sys.argv[1:4]
held = []
for i in range(20):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM); s.connect(path)
    if kind == "half": s.sendall(b"set tau 0.")
    held.append(s)
    time.sleep(0.02)
open(ready, "w").write("20\n")
time.sleep(30)
EOF
  hold=$!
  PIDS+=($hold)
  for ((i = 0; i < 300; i++)); do [ -e "$T/hold.ready" ] && break; sleep 0.1; done
  t0=$(date +%s%N)
  st=$(timeout 10 "$BIN" ctl "$T/d" status 2>&1)
  ms=$(( ($(date +%s%N) - t0) / 1000000 ))
  check "20 $kind clients held open: ctl status answers ok within 2 s (${ms} ms)" \
    test -n "$(grep -E '^ok step=' <<<"$st")" -a "$ms" -lt 2000
  kill "$hold" 2>/dev/null; wait "$hold" 2>/dev/null
done
check "the run logged making room for new connections" grep -q 'closed the one idle for' "$T/d.log"
# (issue 41 item 8) a reconnect flood: 3000 connections one after another, each beyond 16 closing
# the one idle longest, printed one line each (11,235 lines in 12 s); now at most one line per 10 s,
# and the next line counts the others
flood() {
  python3 - "$T/d/control.sock" "$1" <<'EOF'
import socket, sys, time
path, n = sys.argv[1], int(sys.argv[2]); held = []
for i in range(n):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM); s.connect(path); held.append(s)
    if len(held) > 40: held.pop(0).close()
time.sleep(1)
EOF
}
n0=$(grep -c 'closed the one idle for' "$T/d.log")
flood 3000
n1=$(grep -c 'closed the one idle for' "$T/d.log")
check "a flood of 3000 reconnections: at most 2 'closed the one idle' lines ($((n1 - n0)))" test $((n1 - n0)) -le 2
sleep 10.5
flood 20
check "10 s later the next line counts the ones not printed ($(grep -o 'and [0-9]* more in the last [0-9]* s' "$T/d.log" | tail -1))" \
  grep -Eq 'closed the one idle for .*\(and [0-9]{3,} more in the last [0-9]+ s' "$T/d.log"
# a lone half line is closed after CONTROL_PARTIAL_SEC (10 s) with a message
python3 - "$T/d/control.sock" >"$T/partial.txt" <<'EOF'
import socket, sys, time
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM); s.connect(sys.argv[1]); s.settimeout(60)
t0 = time.time(); s.sendall(b"set tau 0.")
buf = b""
while True:
    d = s.recv(4096)
    if not d: break
    buf += d
print("%.0f %s" % (time.time() - t0, buf.decode().strip()))
EOF
check "an incomplete line is dropped after ~10 s: '$(cat "$T/partial.txt")'" \
  grep -Eq '^(9|1[0-9]) error: incomplete line: no newline within 10 s' "$T/partial.txt"
"$BIN" ctl "$T/d" quit >/dev/null
wait_pid "$(cat "$T/d.pid")" 300

# ---- 7. (issue 27) a pause from a --commands file in a headless run says how to go on
printf 'at 2 pause\n' >"$T/pause.cmds"
(cd "$T" && exec "$BIN" train $RUN --epochs 1 --commands "$T/pause.cmds" --session "$T/e" >"$T/e.log" 2>&1) &
echo $! >"$T/e.pid"
PIDS+=($!)
for ((i = 0; i < 600; i++)); do grep -q 'paused: the run waits' "$T/e.log" && break; sleep 0.1; done
check "headless pause from a commands file: '[step 2] paused: ... moelab ctl DIR resume'" \
  grep -qF "[step 2] paused: the run waits; continue with \`moelab ctl $T/e resume\`" "$T/e.log"
"$BIN" ctl "$T/e" resume >/dev/null
wait_pid "$(cat "$T/e.pid")" 300
check "after ctl resume the paused run finishes (exit 0)" test $? = 0

# ---- 8. (issue 27) ctl and attach talk only to a listener of their own uid (SO_PEERCRED)
if command -v setpriv >/dev/null && [ "$(id -u)" = 0 ]; then
  mkdir -p "$T/f" && chown nobody "$T/f"
  rm -f "$T/f/ready"
  touch "$T/f/live.h5" # attach takes the folder for a session (it never reads it: the uid check comes first)
  # /usr/bin/python3: nobody cannot run a python3 from root's home (pyenv shims)
  setpriv --reuid=nobody --regid=nogroup --clear-groups /usr/bin/python3 - "$T/f/control.sock" "$T/f/got" "$T/f/ready" <<'EOF' &
import os, socket, sys, time
path, got, ready = sys.argv[1:4]
os.umask(0)
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM); s.bind(path); s.listen(8)
open(got, "wb").close()
os.close(os.open(ready, os.O_CREAT | os.O_WRONLY, 0o644))
s.settimeout(0.5)
end = time.time() + 30
while time.time() < end:
    try: c, _ = s.accept()
    except socket.timeout: continue
    c.settimeout(1)
    try: d = c.recv(4096)
    except socket.timeout: d = b""
    open(got, "ab").write(d)
    try: c.sendall(b"ok step=1 total=1 epoch=1 epochs=1 state=running (a fake)\n")
    except OSError: pass  # the client checked our uid and hung up
    c.close()
EOF
  fake=$!
  PIDS+=($fake)
  for ((i = 0; i < 300; i++)); do [ -e "$T/f/ready" ] && break; sleep 0.1; done
  "$BIN" ctl "$T/f" status >"$T/o" 2>&1
  rc=$?
  check "ctl to a socket served by uid nobody: exit 1, says whose it is" \
    test $rc = 1 -a -n "$(grep 'the process listening there runs as uid 65534 (nobody), not as you' "$T/o")"
  "$BIN" attach "$T/f" >"$T/o2" 2>&1 </dev/null
  rc=$?
  check "attach to it: exit 1, says whose it is" test $rc = 1 -a -n "$(grep 'runs as uid 65534' "$T/o2")"
  check "the foreign listener ran and was sent nothing" test -e "$T/f/got" -a ! -s "$T/f/got"
  kill "$fake" 2>/dev/null; wait "$fake" 2>/dev/null
else
  echo "SKIP  a foreign listener: needs root and setpriv"
fi

# ---- 5. a sweep's progress lines carry its ETA
"$BIN" sweep $RUN --dataset synthetic:16x16x3:4:512 --epochs 1 --vary head=moe,dense --seeds 2 --out "$T/sw" >"$T/sw.txt" 2>&1
check "sweep progress lines: 'finished in ... (sweep ETA Ns, 3 runs left)'" grep -Eq 'finished in .*\(sweep ETA [0-9hms]+, 3 runs left\)$' "$T/sw.txt"
check "the sweep wrote sweep.plan for attach's ETA: trains 4, jobs 1" \
  sh -c "grep -qx 'trains 4' '$T/sw/sweep.plan' && grep -qx 'jobs 1' '$T/sw/sweep.plan'"

echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
