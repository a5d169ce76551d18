#!/usr/bin/env bash
# t_probe.sh — `moelab probe batch` end to end: a short moe session changes by float rounding only
# across batch make-ups (exit 0, 0 predictions and first choices changed), a softmoe-batch session
# depends on its batch mates (exit 3, the size of the change printed), --epoch picks the
# checkpoint of an epoch, and a missing checkpoint or session is a clear error (exit 1).
set -u
BIN=${1:?usage: t_probe.sh path/to/moelab}
BIN=$(cd "$(dirname "$BIN")" && pwd)/$(basename "$BIN")
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
cd "$T"
pass=0; fail=0
ok()  { echo "PASS  $*"; pass=$((pass + 1)); }
bad() { echo "FAIL  $*"; fail=$((fail + 1)); }
TRAIN=(train --headless --dataset synthetic:16x16x3:4:512 --width 0.25 --batch 32 --experts 4 --hidden 16 --threads 2 --epochs 2)

for h in moe softmoe-batch; do
  "$BIN" "${TRAIN[@]}" --head $h --session $h > $h.log 2>&1 || bad "training $h: $(tail -2 $h.log)"
done
"$BIN" probe batch moe > p1.txt 2>&1; rc=$?
if [ $rc = 0 ] && grep -q "ckpt-32.h5, head moe" p1.txt && grep -q "no change beyond float rounding: 0 predictions, 0 first choices" p1.txt \
   && [ "$(grep -cE '^(shuffled|sorted by class|single-class) ' p1.txt)" = 3 ]; then
  ok "moe: no change beyond rounding (exit 0): $(grep reading p1.txt)"
else bad "moe probe: rc $rc: $(cat p1.txt)"; fi
"$BIN" probe batch softmoe-batch > p2.txt 2>&1; rc=$?
if [ $rc = 3 ] && grep -q "depends on batch mates: max |dlogit| [0-9.e-]*" p2.txt; then
  ok "softmoe-batch: depends on batch mates (exit 3): $(grep reading p2.txt)"
else bad "softmoe-batch probe: rc $rc: $(cat p2.txt)"; fi
"$BIN" probe batch moe --epoch 1 > p3.txt 2>&1; rc=$?
[ $rc = 0 ] && grep -q "ckpt-16.h5" p3.txt && ok "--epoch 1: ckpt-16.h5" || bad "--epoch 1: rc $rc: $(head -2 p3.txt)"
"$BIN" probe batch moe --epoch 9 > p4.txt 2>&1; rc=$?
[ $rc = 1 ] && grep -q "no checkpoint of epoch 9" p4.txt && ok "--epoch 9: $(cat p4.txt)" || bad "--epoch 9: rc $rc: $(cat p4.txt)"
"$BIN" probe batch nonexistent > p5.txt 2>&1; rc=$?
[ $rc = 1 ] && ok "a missing session: exit 1: $(head -1 p5.txt)" || bad "missing session: rc $rc: $(cat p5.txt)"
"$BIN" probe > p6.txt 2>&1; rc=$?
[ $rc = 2 ] && grep -q "usage: moelab probe batch" p6.txt && ok "no arguments: usage, exit 2" || bad "no arguments: rc $rc"

echo "t_probe: $pass passed, $fail failed"
[ "$fail" = 0 ]
