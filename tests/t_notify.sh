#!/usr/bin/env bash
# t_notify.sh — alerts (`--notify CMD`, issue 32 item 6):
#   a forced collapse (a router biased to one expert) runs the command once per event kind and
#   episode onset, with MOELAB_EVENT, MOELAB_SESSION, MOELAB_STEP and MOELAB_TEXT set, and once more
#   with MOELAB_EVENT=finished; the outcome of each is in the session's event log;
#   a command that hangs is killed after --notify-timeout and the run still finishes in time;
#   the command is not stored in the session (a resume does not run it, the stored command line
#   does not hold it), --notify with --resume is this process's only, and a failing command's exit
#   status is logged.
set -u
BIN=${1:?usage: t_notify.sh path/to/moelab}
BIN=$(cd "$(dirname "$BIN")" && pwd)/$(basename "$BIN")
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
# every notification kind appears at most once per step
dups=$(cut -d'|' -f1,3 notes.txt | sort | uniq -d | wc -l)
check "no kind notified twice at one step" test "$dups" = 0
# the outcomes are in the event log and in the output
check "the event log holds 'notify collapse: sent (exit 0'" \
  sh -c "h5dump -d /events s1/live.h5 | grep -q 'notify collapse: sent (exit 0'"
check "the stored command line holds no --notify" sh -c "! h5dump -a /run/command_line s1/live.h5 | grep -q notify"

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

echo "t_notify: $pass passed, $fail failed"
[ "$fail" = 0 ]
