#!/usr/bin/env bash
# t_inputs.sh — what a user types is never silently cut or misread (issue 13 items 8, 9, 11):
# a 5,000-character command line and a 600-character session path are kept whole (resume runs
# the stored configuration to its end), a 700-character comment line never executes its tail,
# `set tau 1e-40` and `anneal ... every=1e12` are refused with a message, a 50,000-line command
# file in reverse step order is read, `--commands DIR` is refused, a resume needs no command file
# (the session stores its commands), `--resume` with other options or an empty name is refused,
# and a run whose session cannot be written (a full tmpfs) ends "with write errors", exit 1.
set -u
BIN=${1:?usage: t_inputs.sh path/to/moelab}
BIN=$(cd "$(dirname "$BIN")" && pwd)/$(basename "$BIN")
T=$(mktemp -d)
cleanup() { mountpoint -q "$T/full" 2>/dev/null && umount "$T/full"; rm -rf "$T"; }
trap cleanup EXIT
cd "$T"
pass=0; fail=0
ok()  { echo "PASS  $*"; pass=$((pass + 1)); }
bad() { echo "FAIL  $*"; fail=$((fail + 1)); }
check() { local msg=$1; shift; if "$@"; then ok "$msg"; else bad "$msg"; fi; }
RUN=(train --headless --dataset synthetic:16x16x3:4:512 --width 0.25 --batch 32 --experts 4 --hidden 16 --threads 1 --seed 2)
status() { h5dump -d /status "$1/live.h5" 2>/dev/null | grep -o '"[a-z]*"' | tail -1; }
last_step() { h5dump -a /run/command_line "$1/live.h5" > /dev/null 2>&1; ls "$1" | sed -n 's/^ckpt-\([0-9]*\)\.h5$/\1/p' | sort -n | tail -1; }

# 1. a 5,000-character command line: stored whole, the final --epochs 2 is what resume runs
pad=(); for i in $(seq 560); do pad+=(--seed 2); done
printf 'at 5 quit\n' > quit5
"$BIN" "${RUN[@]}" "${pad[@]}" --commands quit5 --session L --epochs 2 > L.log 2>&1
len=$(h5dump -a /run/command_line L/live.h5 | grep -o '"train.*"' | wc -c)
check "a 5,000-character command line is stored whole ($len characters)" [ "$len" -gt 5000 ]
rm quit5
"$BIN" train --resume L > L2.log 2>&1; rc=$?
check "resume (its --commands file deleted: the session stores its commands) exits 0" [ $rc = 0 ]
check "resume runs the stored --epochs 2 to its end (ckpt-32.h5, status finished)" [ "$(last_step L)" = 32 -a "$(status L)" = '"finished"' ]

# 2. a 600-character session path is used whole; 5,000 characters are refused, not cut
long=$(printf 'd%.0s/' $(seq 300))
"$BIN" "${RUN[@]}" --epochs 1 --session "$long/S" > P.log 2>&1; rc=$?
check "a 600-character --session path works (rc $rc)" [ $rc = 0 -a -f "$long/S/live.h5" ]
"$BIN" train --resume "$long/S" > P2.log 2>&1
check "and resumes by that path" grep -q 'finished' P2.log
huge=$(printf 'x%.0s' $(seq 5000))
"$BIN" "${RUN[@]}" --epochs 1 --session "$huge" > H.log 2>&1; rc=$?
check "a 5,000-character --session is refused with a message (rc $rc)" [ $rc = 2 ]
check "  ... naming the limit" grep -q 'session: 5000 characters, at most' H.log

# 3. a long comment line never executes its tail
{ printf '# '; printf 'x%.0s' $(seq 700); printf ' quit\n'; printf '# %0700d set lr 99\n' 0; printf 'at 3 set tau 0.5\n'; } > longcomment
"$BIN" "${RUN[@]}" --epochs 1 --commands longcomment --session C > C.log 2>&1; rc=$?
check "700-character comment lines: the run finishes (no quit, no set lr 99)" [ $rc = 0 -a "$(status C)" = '"finished"' ]
check "  ... and the real command after them applies" grep -q '\[step 3\] set tau 0.5' C.log
check "  ... nothing else was applied" bash -c "! grep -q 'set lr\|quit' C.log"

# 4. values that would NaN the run or never be honoured are refused at parse time
printf 'at 2 set tau 1e-40\nat 3 anneal exp now 1e-30\n' > tiny
"$BIN" "${RUN[@]}" --epochs 1 --commands tiny --no-session > tiny.log 2>&1; rc=$?
check "set tau 1e-40 is refused when applied: $(grep -m1 'set tau' tiny.log)" grep -q 'error: set tau 1e-40: .*\[1e-06, 1e+06\]' tiny.log
check "  ... so is anneal to 1e-30: $(grep -m1 'anneal' tiny.log)" grep -q 'error: anneal' tiny.log
check "  ... and the run finishes with finite losses (rc $rc)" bash -c "[ $rc = 0 ] && ! grep -qi 'nan' tiny.log"
printf 'at 2 anneal step now 0.1 every=1e12\n' > every
"$BIN" "${RUN[@]}" --epochs 1 --commands every --no-session > every.log 2>&1; rc=$?
check "anneal every=1e12 is refused (rc $rc): $(head -1 every.log)" [ $rc = 2 ]

# 5. a 50,000-line command file in reverse step order (steps the run never reaches)
seq 50000 -1 1 | awk '{ printf "at %d set lr 0.01\n", $1 + 1000000 }' > reverse
"$BIN" "${RUN[@]}" --epochs 1 --commands reverse --no-session > rev.log 2>&1; rc=$?
check "a 50,000-line command file in reverse order is read and the run finishes (rc $rc)" [ $rc = 0 ]

# 6. --commands DIR
mkdir cdir
"$BIN" "${RUN[@]}" --epochs 1 --commands cdir --no-session > cdir.log 2>&1; rc=$?
check "--commands DIR is refused (rc $rc): $(head -1 cdir.log)" [ $rc = 2 ]
check "  ... as not a regular file" grep -q 'not a regular file' cdir.log

# 7. --resume with other options, or an empty folder name
"$BIN" train --resume C --lr 0.5 > r1.log 2>&1; rc=$?
check "--resume with --lr is refused (rc $rc; --epochs N extends the run: t_extend)" [ $rc = 2 ]
check "  ... saying why" grep -q 'cannot be combined' r1.log
"$BIN" train --resume '' > r2.log 2>&1; rc=$?
check "--resume '' is refused (rc $rc), no new run started" [ $rc = 2 -a ! -d sessions ]

# 8. one writer per session: a resume while the run trains, and two resumes at once, are refused
"$BIN" "${RUN[@]}" --epochs 400 --session W > W.log 2>&1 &
pid=$!
for i in $(seq 200); do [ -f W/live.h5 ] && break; sleep 0.05; done
"$BIN" train --resume W > W2.log 2>&1; rc=$?
check "resume while the run trains: refused, exit 1 (rc $rc)" [ $rc = 1 ]
check "  ... naming the holder: $(head -1 W2.log)" grep -q "in use by PID $pid" W2.log
kill -TERM $pid; wait $pid
"$BIN" train --resume W > W3.log 2>&1 &
pid=$!
for i in $(seq 100); do grep -q 'resumed at step' W3.log 2>/dev/null && break; sleep 0.05; done
"$BIN" train --resume W > W4.log 2>&1; rc=$?
check "a second resume while the first runs: refused (rc $rc)" bash -c "[ $rc = 1 ] && grep -q 'in use by PID' W4.log"
kill -TERM $pid; wait $pid
check "live.h5 is intact after both (h5dump reads it, status interrupted)" bash -c "h5dump -H W/live.h5 > /dev/null && [ \"\$(h5dump -d /status W/live.h5 | grep -o '\"[a-z]*\"' | tail -1)\" = '\"interrupted\"' ]"

# 9. a full disk: the run ends "with write errors", exit 1 (needs root to mount a tmpfs)
mkdir full
if mount -t tmpfs -o size=4m tmpfs full 2>/dev/null; then
  "$BIN" "${RUN[@]}" --epochs 10 --ckpt-steps 2 --keep 0 --session full/S > F.log 2>&1; rc=$?
  check "a full tmpfs: exit 1 (rc $rc)" [ $rc = 1 ]
  check "  ... 'with write errors' on stderr" grep -q 'with write errors' F.log
  umount full
else
  echo "SKIP  full disk: cannot mount a tmpfs here"
fi

echo "t_inputs: $pass passed, $fail failed"
[ $fail = 0 ]
