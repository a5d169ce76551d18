#!/usr/bin/env bash
# t_extend.sh — `moelab train --resume DIR --epochs N` extends a run (issue 32): a finished 2-epoch
# run extended to 3 has 3 epochs of history (evaluations, steps to 48) and its status is finished;
# the learning-rate cosine and the linear temperature schedule end at the new end (both jump back
# up after the resume step); the extension is an event and /run says 3 epochs; a plain resume
# afterwards reads the new length; `moelab replay` reproduces the extended run (MATCH); an
# interrupted run extended (and replayed) too; fewer epochs than done are refused, nothing changed,
# with a message that says so and no 'extending' line first (issue 41 item 8);
# a quit that a plain resume went on from does not stop the replay, one never resumed does.
set -u
BIN=${1:?usage: t_extend.sh path/to/moelab}
BIN=$(cd "$(dirname "$BIN")" && pwd)/$(basename "$BIN")
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
cd "$T" || exit 1
pass=0; fail=0
ok()  { echo "PASS  $*"; pass=$((pass + 1)); }
bad() { echo "FAIL  $*"; fail=$((fail + 1)); }
check() { local what=$1; shift; if "$@"; then ok "$what"; else bad "$what"; fi; }
RUN="--headless --dataset synthetic:16x16x3:4:512 --width 0.25 --batch 32 --experts 4 --hidden 16 --log-every 1"
col() { # col FILE NAME STEP: the value of column NAME in the row of STEP
  awk -F, -v n="$2" -v s="$3" 'NR == 1 {for (i = 1; i <= NF; i++) if ($i == n) c = i; next} $1 == s {print $c}' "$1"
}
lt() { [ -n "$1" ] && [ -n "$2" ] && awk -v a="$1" -v b="$2" 'BEGIN {exit !(a < b)}'; }

# ---- 1. a finished 2-epoch run (16 steps an epoch), extended to 3
"$BIN" train $RUN --epochs 2 --schedule linear --tau1 0.2 --session r > a.log 2>&1 || bad "the 2-epoch run failed"
"$BIN" export r --csv before > /dev/null 2>&1
"$BIN" train --resume r --epochs 3 --headless > b.log 2>&1; rc=$?
check "--resume r --epochs 3: exit 0 ($rc)" test "$rc" = 0
check "  ... says it extends from 2 to 3 epochs" grep -q 'extending the run from 2 to 3 epochs' b.log
"$BIN" export r --csv after > /dev/null 2>&1
check "3 epochs of history: 3 evaluations" test "$(tail -n +2 after/evals.csv | wc -l)" = 3
check "  ... the last at step 48" test "$(tail -1 after/evals.csv | cut -d, -f1,2)" = "3,48"
check "  ... step rows up to 48" test "$(tail -1 after/steps.csv | cut -d, -f1)" = 48
"$BIN" browse . --list > list.txt 2>&1
check "status finished, epochs 3/3 in the browser" grep -Eq '^r .* 3/3 finished' list.txt
lr32=$(col before/steps.csv lr 32); lr34=$(col after/steps.csv lr 34)
check "the lr cosine ends at the new end: lr $lr32 at step 32 (old end), $lr34 at 34" lt "$lr32" 0.002
check "  ... lr at step 34 back up (> 0.005)" lt 0.005 "$lr34"
tau32=$(col before/steps.csv tau 32); tau34=$(col after/steps.csv tau 34); tau48=$(col after/steps.csv tau 48)
check "the linear tau schedule ends at the new end: tau $tau32 at 32, $tau34 at 34, $tau48 at 48" \
  bash -c "[ -n '$tau32' ] && [ -n '$tau34' ] && [ -n '$tau48' ] && awk -v a='$tau32' -v b='$tau34' -v c='$tau48' 'BEGIN {exit !(a < 0.25 && b > 0.4 && c < 0.25)}'"
check "the extension is an event at step 32" grep -q '^32,.*,extend --epochs 3 (was 2)' after/events.csv
check "/run says 3 epochs, 48 steps" bash -c "h5dump -a /run/epochs r/live.h5 | grep -q '(0): 3' && h5dump -a /run/total_steps r/live.h5 | grep -q '(0): 48'"
"$BIN" replay r > replay.log 2>&1; rc=$?
check "replay reproduces the extended run: MATCH, exit 0 ($rc)" bash -c "[ $rc = 0 ] && grep -q 'final metrics MATCH' replay.log"
check "  ... the replay has 3 evaluations too" grep -q 'replayed: step 48, 3 evals' replay.log
"$BIN" train --resume r --headless > c.log 2>&1; rc=$?
check "a plain resume afterwards reads 3 epochs (exit $rc)" bash -c "[ $rc = 0 ] && grep -q '3 epochs x 16 steps' c.log"

# ---- 2. fewer epochs than done: refused, nothing changed
cp r/live.h5 live.before
"$BIN" train --resume r --epochs 2 --headless > d.log 2>&1; rc=$?
check "--epochs 2 on a 3-epoch run: refused (exit $rc)" test "$rc" != 0
# issue 41 item 8: the refusal says why and what to give, and nothing says it extends first
check "  ... 'r ran 3 epochs: --epochs 2 would shorten it; give 3 or more'" \
  grep -q 'r ran 3 epochs: --epochs 2 would shorten it; give 3 or more' d.log
check "  ... no 'extending' line before the refusal" bash -c "! grep -q -i 'extending' d.log"
check "  ... live.h5 unchanged" cmp -s live.before r/live.h5
"$BIN" train --resume r --epochs 0 --headless > e.log 2>&1; rc=$?
check "--epochs 0: usage error (exit $rc)" test "$rc" = 2
"$BIN" train --resume r --epochs 3 --lr 0.1 > f.log 2>&1; rc=$?
check "--resume with --epochs and another option: refused (exit $rc)" test "$rc" = 2

# ---- 3. an interrupted run (quit at step 20) extended to 3 epochs, and replayed
printf 'at 20 quit\n' > quit.txt
"$BIN" train $RUN --epochs 2 --commands quit.txt --session q > g.log 2>&1
"$BIN" train --resume q --epochs 3 --headless > h.log 2>&1; rc=$?
"$BIN" browse . --list > list2.txt 2>&1
check "an interrupted run extended: exit 0, finished 3/3 ($rc)" bash -c "[ $rc = 0 ] && grep -Eq '^q .* 3/3 finished' list2.txt"
"$BIN" replay q > replay2.log 2>&1; rc=$?
check "  ... and its replay MATCHes (exit $rc)" bash -c "[ $rc = 0 ] && grep -q 'final metrics MATCH' replay2.log"

# ---- 4. a quit, then a plain --resume to the end: the replay goes on past the quit (it stopped
# only that process) and MATCHes; a quit never resumed stops the replay where the run stopped
"$BIN" train $RUN --epochs 2 --commands quit.txt --session p > i.log 2>&1
"$BIN" train --resume p --headless > j.log 2>&1
"$BIN" replay p > replay3.log 2>&1; rc=$?
check "quit then resumed: the replay MATCHes (exit $rc)" bash -c "[ $rc = 0 ] && grep -q 'final metrics MATCH' replay3.log"
check "  ... and trains to the end (step 32)" grep -q 'replayed: step 32, 2 evals' replay3.log
"$BIN" train $RUN --epochs 2 --commands quit.txt --session s > k.log 2>&1
"$BIN" replay s > replay4.log 2>&1; rc=$?
check "quit, never resumed: the replay stops at step 20 too and MATCHes (exit $rc)" \
  bash -c "[ $rc = 0 ] && grep -q 'replayed: step 20, 1 evals' replay4.log && grep -q 'final metrics MATCH' replay4.log"

echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
