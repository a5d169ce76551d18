#!/usr/bin/env bash
# t_rankdeath.sh — a rank that dies before the first checkpoint (issue #40 item 6): a 2-rank run
# pauses at step 20 (a --commands file), rank 1 gets SIGKILL; rank 0 says which rank died and at
# which step (stderr, the event log, status failed), `--resume` says there is nothing to continue
# from and gives the command that starts it again, and that command (run, with `moelab ctl DIR
# resume` at its pause) finishes. A one-process run killed before its first checkpoint: the
# browser's list and `attach` give the same advice, not `--resume`.
# Needs mpirun and a moelab built with MPI; exits 77 (ctest: skipped) without them.
set -u
BIN=${1:?usage: t_rankdeath.sh path/to/moelab}
if ! command -v mpirun > /dev/null 2>&1; then
  echo "SKIP  mpirun not installed (apt-get install openmpi-bin libopenmpi-dev)"
  exit 77
elif ! "$BIN" sweep --help | grep -q 'built with MPI'; then
  echo "SKIP  this moelab was built without MPI (install libopenmpi-dev and reconfigure)"
  exit 77
fi
BIN=$(cd "$(dirname "$BIN")" && pwd)/$(basename "$BIN")
T=$(mktemp -d)
trap 'pkill -KILL -f "moelab.*$T" 2>/dev/null; [ -n "${KEEP:-}" ] || rm -rf "$T"' EXIT
cd "$T"
pass=0; fail=0
ok()  { echo "PASS  $*"; pass=$((pass + 1)); }
bad() { echo "FAIL  $*"; fail=$((fail + 1)); }
check() { local msg=$1; shift; if "$@"; then ok "$msg"; else bad "$msg"; fi; }
wait_file() { # wait_file FILE REGEX SECONDS
  local i
  for ((i = 0; i < $3 * 10; i++)); do grep -Eq "$2" "$1" 2> /dev/null && return 0; sleep 0.1; done
  return 1
}
export OMPI_MCA_btl_vader_single_copy_mechanism=none # containers without CMA (ptrace) permission
COMMON=(--dataset synthetic:16x16x3:4:2048 --width 0.25 --batch 32 --hidden 32 --threads 1 --epochs 2)
printf 'at 20 pause\n' > pause.txt

# 1. rank 1 dies at step 20, before the first checkpoint (end of epoch 1, step 64)
timeout 120 mpirun --allow-run-as-root --oversubscribe -np 2 "$BIN" train --headless --session "$T/r" \
  "${COMMON[@]}" --commands pause.txt > r.out 2> r.err &
JOB=$!
check "the 2-rank run pauses at step 20" wait_file r.out '^\[step 20\] paused' 60
rank1=""
for p in $(pgrep -f "moelab train --headless --session $T/r "); do
  [ "$(tr '\0' '\n' < /proc/$p/environ 2> /dev/null | grep -c '^OMPI_COMM_WORLD_RANK=1$')" = 1 ] && rank1=$p
done
check "rank 1's process found (pid '$rank1')" test -n "$rank1"
[ -n "$rank1" ] && kill -9 "$rank1"
wait "$JOB"
check "the job ends (rc $?, not the timeout's 124)" test "$?" != 124
check "rank 0 says which rank died and at which step" \
  grep -q "^moelab train: rank 1 (pid $rank1 on .*) died at step 20: the job ends; no checkpoint was written: start it again with \`rm $T/r/live.h5 && mpirun -np 2 moelab train --headless --session $T/r " r.err
check "no checkpoint was written" bash -c "! ls '$T'/r/ckpt-*.h5 2> /dev/null"
"$BIN" export "$T/r" --csv r-csv > /dev/null 2>&1
check "the event log records the death at step 20" \
  grep -q "^20,[0-9.]*,rank 1 (pid $rank1 on .*) died at step 20: the job ends; no checkpoint was written" r-csv/events.csv
"$BIN" browse --list "$T" > list.txt 2>&1
check "the browser lists the session as failed" grep -Eq '^r +.* failed ' list.txt
"$BIN" train --resume "$T/r" > res.out 2> res.err
check "--resume refuses (exit 1)" test "$?" = 1
check "--resume says there is nothing to continue from and how to start it again" \
  grep -q "^moelab train: --resume $T/r: nothing to continue from: no checkpoint was written: start it again with \`rm $T/r/live.h5 && mpirun -np 2 moelab train --headless --session $T/r .*--commands pause.txt\`$" res.err
# the advice is true: run it (its --commands file pauses it at step 20 again: resume it there)
cmd=$(sed -n 's/.*start it again with `\(.*\)`$/\1/p' res.err)
cmd=${cmd/mpirun -np 2 moelab/timeout 120 mpirun --allow-run-as-root --oversubscribe -np 2 $BIN}
bash -c "$cmd" > again.out 2>&1 &
JOB=$!
check "the advised command starts the run again (it pauses at step 20)" wait_file again.out '^\[step 20\] paused' 60
"$BIN" ctl "$T/r" resume > /dev/null 2>&1
wait "$JOB"
check "the advised command finishes the run (exit $?)" grep -q "^session   $T/r: finished at step 128" again.out

# 2. one process killed before its first checkpoint (--ckpt-every 0: only at the end)
"$BIN" train --headless --session "$T/k" "${COMMON[@]}" --epochs 50 --ckpt-every 0 > k.out 2>&1 &
JOB=$!
check "the one-process run trains" wait_file k.out '^epoch +1/50' 60
kill -9 "$JOB"
wait "$JOB" 2> /dev/null
"$BIN" browse --list "$T" > list2.txt 2>&1
check "the browser's note: no checkpoint, start it again (not --resume)" \
  grep -q "no checkpoint was written: start it again with \`rm $T/k/live.h5 && moelab train --headless --session $T/k " list2.txt
check "the browser gives no --resume advice for it" bash -c "! grep -q -- '--resume $T/k' '$T/list2.txt'"
"$BIN" attach "$T/k" < /dev/null > att.out 2>&1
check "attach gives the same advice" grep -q "no checkpoint was written: start it again with \`rm $T/k/live.h5 && moelab train " att.out

echo "t_rankdeath: $pass passed, $fail failed"
[ "$fail" = 0 ]
