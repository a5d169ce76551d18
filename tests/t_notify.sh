#!/usr/bin/env bash
# t_notify.sh — alerts (`--notify CMD`, issue 32 item 6):
#   a forced collapse (a router biased to one expert) runs the command once per event kind and
#   episode onset, with MOELAB_EVENT, MOELAB_SESSION, MOELAB_STEP and MOELAB_TEXT set, and once more
#   with MOELAB_EVENT=finished; the outcome of each is in the session's event log;
#   a command that hangs is killed after --notify-timeout and the run still finishes in time;
#   the command is not stored in the session (a resume does not run it, the stored command line
#   does not hold it), --notify with --resume is this process's only, and a failing command's exit
#   status is logged;
#   (issue 41 item 6) the command's output goes to SESSION/notify.log, not moelab's stdout/stderr; it
#   holds no descriptor but 0-2; a background child of it does not keep `moelab train | cat` open;
#   SIGTERM/SIGINT end a finished run's wait for its notification (the command killed, logged).
#   (issue 40 item 4) two experts dying at one step are two alerts; the finished alert carries the
#   run's final step, not the latest step record's.
set -u
BIN=${1:?usage: t_notify.sh path/to/moelab}
BIN=$(cd "$(dirname "$BIN")" && pwd)/$(basename "$BIN")
SRC=${MOELAB_SRC:-$(cd "$(dirname "$0")/.." && pwd)}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
cd "$T" || exit 1
pass=0; fail=0
ok()  { echo "PASS  $*"; pass=$((pass + 1)); }
bad() { echo "FAIL  $*"; fail=$((fail + 1)); }
check() { local what=$1; shift; if "$@"; then ok "$what"; else bad "$what"; fi; }

SYN="--dataset synthetic:16x16x3:4:4096 --width 0.25 --batch 32 --hidden 32 --threads 1 --no-augment"
# the collapse scenario of the benchmark (syn-biased): red at steps 100-160
BIASED="$SYN --epochs 2 --noise 0 --alpha 0 --bias-mode select --bias-rate 0 --init-bias e3=10"

# 1. a forced collapse: each notification appends its environment as one line to a file
cat > note.sh <<'EOF'
#!/bin/sh
printf '%s|%s|%s|%s\n' "$MOELAB_EVENT" "$MOELAB_SESSION" "$MOELAB_STEP" "$MOELAB_TEXT" >> "$NOTES"
EOF
chmod +x note.sh
export NOTES="$T/notes.txt"
"$BIN" train --headless $BIASED --session s1 --notify "$T/note.sh" > s1.out 2>&1
rc=$?
check "forced collapse: the run finishes (exit $rc)" test "$rc" = 0
ncol=$(grep -c '^collapse|' notes.txt 2>/dev/null || echo 0)
check "collapse notified once ($ncol lines)" test "$ncol" = 1
check "finished notified once" test "$(grep -c '^finished|' notes.txt)" = 1
line=$(grep '^collapse|' notes.txt | head -1)
IFS='|' read -r ev sess step text <<< "$line"
check "MOELAB_SESSION is the session folder ($sess)" test "$sess" = "s1"
check "MOELAB_STEP is the onset step, 100-160 ($step)" test "${step:-0}" -ge 100 -a "${step:-0}" -le 160
case "$text" in "collapse at step $step"*) ok "MOELAB_TEXT is the event's line";; *) bad "MOELAB_TEXT: '$text'";; esac
# every notification kind appears at most once per step (an expert death: once per expert)
dups=$(grep -v '^expert-death|' notes.txt | cut -d'|' -f1,3 | sort | uniq -d | wc -l)
check "no kind notified twice at one step" test "$dups" = 0
# the outcomes are in the event log and in the output
check "the event log holds 'notify collapse: sent (exit 0'" \
  sh -c "h5dump -d /events s1/live.h5 | grep -q 'notify collapse: sent (exit 0'"
check "the stored command line holds no --notify" sh -c "! h5dump -a /run/command_line s1/live.h5 | grep -q notify"

# 1b. issue 40 item 4: two experts starved to death at the same step (the utility bias of e0 and
#     e4 at -30 on the logits, never updated) are two alerts; the finished alert carries the step
#     the run ended at (256 = 2 x 128), not that of the latest step record (250)
DEATH2="$SYN --epochs 2 --bias-mode logits --bias-rate 0 --init-bias e0=-30,e4=-30"
: > notes.txt
"$BIN" train --headless $DEATH2 --session s1b --notify "$T/note.sh" > s1b.out 2>&1
rc=$?
check "two deaths: the run finishes (exit $rc)" test "$rc" = 0
d0=$(sed -n 's/^\[step \([0-9]*\)\] expert death at step [0-9]* (e0;.*/\1/p' s1b.out | head -1)
d4=$(sed -n 's/^\[step \([0-9]*\)\] expert death at step [0-9]* (e4;.*/\1/p' s1b.out | head -1)
check "two deaths: e0 and e4 die at the same step (e0 at '$d0', e4 at '$d4')" test -n "$d0" -a "$d0" = "$d4"
check "two deaths: two expert-death alerts ($(grep -c '^expert-death|' notes.txt))" \
  test "$(grep -c '^expert-death|' notes.txt)" = 2
check "two deaths: one alert names e0 at that step" grep -q "^expert-death|s1b|$d0|expert death at step $d0 (e0;" notes.txt
check "two deaths: the other names e4 at that step" grep -q "^expert-death|s1b|$d0|expert death at step $d0 (e4;" notes.txt
check "two deaths: the event log says both were sent ($(h5dump -d /events s1b/live.h5 2>/dev/null | grep -c 'notify expert-death: sent'))" \
  test "$(h5dump -d /events s1b/live.h5 2>/dev/null | grep -c 'notify expert-death: sent')" = 2
fin=$(sed -n 's/^session   s1b: finished at step \([0-9]*\)$/\1/p' s1b.out)
check "finished: the run ended at step 256 ('$fin')" test "$fin" = 256
check "finished: MOELAB_STEP is the final step ($(grep '^finished|' notes.txt | cut -d'|' -f3))" \
  test "$(grep '^finished|' notes.txt | cut -d'|' -f3)" = "$fin"

# 2. a command that hangs is killed after its timeout; the run is not held up by more than it
start=$(date +%s)
"$BIN" train --headless $SYN --epochs 1 --session s2 --notify 'sleep 600' --notify-timeout 2 > s2.out 2>&1
rc=$?
took=$(( $(date +%s) - start ))
check "hanging command: the run finishes (exit $rc)" test "$rc" = 0
check "hanging command: killed after --notify-timeout" grep -q 'notify finished: killed after 2 s' s2.out
check "hanging command: no sleep left behind" sh -c "! pgrep -f '^sleep 600$' >/dev/null"
echo "      (the run with the hanging command took ${took}s)"

# 3. a failing command's exit status is logged
"$BIN" train --headless $SYN --epochs 1 --session s3 --notify 'exit 3' > s3.out 2>&1
check "failing command: exit status logged" grep -q 'notify finished: the command failed (exit 3' s3.out

# 4. resume: the session does not carry the command; --notify with --resume is allowed and is the
#    resuming process's own
"$BIN" train --headless $SYN --epochs 2 --session s4 --notify "$T/note.sh" > s4.out 2>&1 &
pid=$!
for _ in $(seq 200); do [ -f s4/ckpt-128.h5 ] && break; sleep 0.1; done
kill -INT $pid; wait $pid
: > notes.txt
"$BIN" train --headless --resume s4 > s4r.out 2>&1
check "resume without --notify: nothing runs" test ! -s notes.txt
# a finished run cannot be resumed; start a run, interrupt it, resume it with --notify
"$BIN" train --headless $SYN --epochs 2 --session s5 > s5.out 2>&1 &
pid=$!
for _ in $(seq 200); do [ -f s5/ckpt-128.h5 ] && break; sleep 0.1; done
kill -INT $pid; wait $pid
"$BIN" train --headless --resume s5 --notify "$T/note.sh" > s5r.out 2>&1
check "resume with --notify: the finished run notified" grep -q '^finished|s5|' notes.txt
check "--notify with another option and --resume is still refused" \
  sh -c "! '$BIN' train --resume s5 --notify true --lr 0.1 2>/dev/null"

# 5. issue 41 item 6: the command's descriptors and output, and a signal while the run waits
"$BIN" train --headless $SYN --epochs 1 --session s6 \
  --notify 'ls -l /proc/$$/fd; echo "out-$MOELAB_EVENT"; echo "err-$MOELAB_EVENT" >&2' > s6.out 2>&1
check "output: the command's stdout goes to SESSION/notify.log" grep -q '^out-finished$' s6/notify.log
check "output: and its stderr" grep -q '^err-finished$' s6/notify.log
check "output: a header line names the notification" grep -q '^--- notify finished, step ' s6/notify.log
check "output: none of it on moelab's own stdout/stderr" sh -c "! grep -q -e out-finished -e err-finished s6.out"
check "output: notify.log is owner-only" test "$(stat -c %a s6/notify.log 2>/dev/null)" = 600
check "descriptors: the command holds 0, 1 and 2 only ($(grep -c ' -> ' s6/notify.log 2>/dev/null))" \
  test "$(grep -c ' -> ' s6/notify.log 2>/dev/null)" = 3
check "descriptors: neither live.h5 nor the lock nor a socket" \
  sh -c "[ -s s6/notify.log ] && ! grep -Eq 'live\.h5|\.lock|socket:' s6/notify.log"
# a command that leaves a background child: `moelab train | cat` still ends with the run
start=$(date +%s)
"$BIN" train --headless $SYN --epochs 1 --session s7 --notify 'sleep 25 &' 2>&1 | cat > s7.out
took=$(( $(date +%s) - start ))
check "a background child of the command does not hold moelab's output open ('| cat' took ${took}s)" test "$took" -lt 15
# SIGTERM / SIGINT while a finished run waits for its notification: the wait ends, the command is
# killed, the log says so, the session is closed (before: ignored until --notify-timeout)
for sig in TERM INT; do
  "$BIN" train --headless $SYN --epochs 1 --session "s8$sig" --notify 'exec sleep 617' --notify-timeout 60 \
    > "s8$sig.out" 2>&1 &
  pid=$!
  for _ in $(seq 300); do pgrep -f '^sleep 617$' > /dev/null && break; sleep 0.1; done
  sleep 0.3
  start=$(date +%s)
  kill -$sig $pid; wait $pid
  took=$(( $(date +%s) - start ))
  check "SIG$sig while the run waits for its notification: it ends at once (${took}s; --notify-timeout 60)" \
    test "$took" -lt 10
  check "SIG$sig: the command killed (no sleep 617 left)" sh -c "! pgrep -f '^sleep 617\$' > /dev/null"
  check "SIG$sig: said in the output" grep -q "notify finished: killed after .* (SIG$sig while the run waited for it)" "s8$sig.out"
  check "SIG$sig: and in the event log" sh -c "h5dump -d /events s8$sig/live.h5 | grep -q 'SIG$sig while the run waited'"
  check "SIG$sig: the session is closed, finished" sh -c "h5dump -d /status s8$sig/live.h5 | grep -q finished"
done

# the README's webhook example, with curl replaced by a file, on a session path with a quote, a
# double quote and a backslash: the JSON it sends parses and holds the path unchanged
HOOKCMD=$(/usr/bin/python3 - "$SRC/README.md" <<'PY'
import re, sys
t = open(sys.argv[1]).read()
i = t.index("# a chat webhook")
cmd = t[t.index("'", i) + 1 : t.index("\"$HOOK_URL\"'", i) + len("\"$HOOK_URL\"")]
print(re.sub(r'curl .*"\$HOOK_URL"', 'cat > "$HOOKOUT"', cmd, flags=re.S))
PY
)
if command -v jq > /dev/null && [ -n "$HOOKCMD" ]; then
  QS="q'uo\"te\\s"
  HOOKOUT="$T/hook.json" "$BIN" train --headless $SYN --epochs 1 --session "$QS" --notify "$HOOKCMD" > s9.out 2>&1
  check "the README's webhook command: valid JSON with the session path in it (a quote in the path)" \
    /usr/bin/python3 -c 'import json, sys; d = json.load(open(sys.argv[1])); sys.exit(d["text"] != sys.argv[2] + ": the run finished")' \
    "$T/hook.json" "$QS"
else
  echo "SKIP  the README's webhook command (no jq, or the example not found)"
fi

echo "t_notify: $pass passed, $fail failed"
[ "$fail" = 0 ]
