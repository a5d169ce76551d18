#!/usr/bin/env bash
# t_extendfault.sh — a refused `--resume S --epochs N` leaves S resumable (issue 41, item 2). An
# interrupted 2-epoch session (quit at step 12 of 16) is extended to 3 epochs, refused at each step
# of the resume in turn: no room for the copy (RLIMIT_FSIZE), and MOELAB_FAULT_RESUME at restore
# (checkpoint read), extend (trainer extended, nothing written), copy (live.h5.resume made), apply
# (rows cut and /run extended in the copy), rename (the copy not moved into place), events (live.h5
# extended, no event, no checkpoint) and ckpt (events written, the extension's checkpoint refused).
# After each: the refusal is reported (exit 1); before the rename live.h5 is byte-identical and
# /run still says 2 epochs, with no live.h5.resume left; then a plain resume of a copy ends as the
# run it continues (the 2-epoch run, or the extended one when live.h5 already took the extension),
# and the extension retried ends with the weights, optimiser, RNG and schedule of an extension never
# refused, 3 evaluations, /run 3 epochs; its replay MATCHes.
#   tests/t_extendfault.sh path/to/moelab
set -u
BIN=${1:?usage: t_extendfault.sh path/to/moelab}
BIN=$(cd "$(dirname "$BIN")" && pwd)/$(basename "$BIN")
T=$(mktemp -d)
[ -n "${KEEP:-}" ] || trap 'rm -rf "$T"' EXIT
cd "$T" || exit 1
pass=0; fail=0
ok()  { echo "PASS  $*"; pass=$((pass + 1)); }
bad() { echo "FAIL  $*"; fail=$((fail + 1)); }
check() { local what=$1; shift; if "$@"; then ok "$what"; else bad "$what"; fi; }
RUN="--headless --dataset synthetic:8x8x1:4:256 --width 0.25 --batch 32 --experts 4 --hidden 16 --threads 1
  --log-every 1 --tsne-samples 16 --keep 0 --epochs 2"
# the weights, optimiser, RNG and schedule of checkpoint STEP of session DIR
w() { [ -f "$1/ckpt-$2.h5" ] && h5dump -A 0 -g /weights -g /optimizer -g /rng -g /schedule "$1/ckpt-$2.h5" | tail -n +2 | sha256sum | cut -c1-16; }
attr() { h5dump -a "/run/$2" "$1/live.h5" 2>/dev/null | sed -n 's/^ *(0): *//p' | head -1; }
nevals() { h5ls "$1/live.h5/evals/epoch" 2>/dev/null | grep -o '{[0-9]*' | tr -d '{'; }
same() { [ -n "$1" ] && [ "$1" = "$2" ]; }
export -f same

printf 'at 12 quit\n' > quit.txt
"$BIN" train $RUN --commands quit.txt --session base > base.log 2>&1
check "the base session: interrupted at step 12 with ckpt-12.h5" test -f base/ckpt-12.h5
# the references: the 2-epoch run continued, and the extension to 3 epochs never refused
cp -r base plain && "$BIN" train --resume plain --headless > plain.log 2>&1
cp -r base ext && "$BIN" train --resume ext --epochs 3 --headless > ext.log 2>&1
W2=$(w plain 16); W3=$(w ext 24)
check "references: the continued run ends at step 16, the extended one at 24 ($W2, $W3)" \
  bash -c "[ -n '$W2' ] && [ -n '$W3' ] && [ '$W2' != '$W3' ]"

# refuse FAULT (a MOELAB_FAULT_RESUME stage, or 'room' for a file size limit below the copy's need)
for FAULT in room restore extend copy apply rename events ckpt; do
  S=s-$FAULT
  cp -r base "$S"
  if [ $FAULT = room ]; then
    (ulimit -f 2048; "$BIN" train --resume "$S" --epochs 3 --headless) > "$S.log" 2>&1; rc=$?
  else
    MOELAB_FAULT_RESUME=$FAULT "$BIN" train --resume "$S" --epochs 3 --headless > "$S.log" 2>&1; rc=$?
  fi
  check "$FAULT: the refused extension exits 1 with a message ($(grep -m1 -o 'MOELAB_FAULT_RESUME=[a-z]*\|file size limit' "$S.log"))" \
    bash -c "[ $rc = 1 ] && grep -Eq 'MOELAB_FAULT_RESUME=$FAULT|file size limit' '$S.log'"
  case $FAULT in
    events|ckpt) took=1 ;; # live.h5 took the extension before the refusal
    *) took=0 ;;
  esac
  if [ $took = 0 ]; then
    check "$FAULT: live.h5 byte-identical, /run epochs $(attr "$S" epochs), no live.h5.resume left" \
      bash -c "cmp -s base/live.h5 '$S/live.h5' && [ '$(attr "$S" epochs)' = 2 ] && [ ! -e '$S/live.h5.resume' ]"
  else
    check "$FAULT: live.h5 took the extension (/run epochs $(attr "$S" epochs)), ckpt-12.h5 still of the 2-epoch run" \
      bash -c "[ '$(attr "$S" epochs)' = 3 ] && [ -f '$S/ckpt-12.h5' ] && [ ! -e '$S/live.h5.resume' ]"
  fi
  # a plain resume of a copy: the run S is (2 epochs, or 3 when live.h5 took the extension)
  cp -r "$S" "$S-p"
  "$BIN" train --resume "$S-p" --headless > "$S-p.log" 2>&1; rc=$?
  if [ $took = 0 ]; then
    check "$FAULT: a plain resume afterwards ends as the 2-epoch run (exit $rc, $(w "$S-p" 16))" \
      bash -c "[ $rc = 0 ] && same '$(w "$S-p" 16)' '$W2' && [ ! -e '$S-p/ckpt-24.h5' ]"
  else
    check "$FAULT: a plain resume afterwards completes the extension (exit $rc, $(w "$S-p" 24))" \
      bash -c "[ $rc = 0 ] && same '$(w "$S-p" 24)' '$W3' && grep -q 'the extension to 3 epochs stopped before its checkpoint' '$S-p.log'"
  fi
  # the extension retried
  "$BIN" train --resume "$S" --epochs 3 --headless > "$S-r.log" 2>&1; rc=$?
  check "$FAULT: the extension retried ends as one never refused (exit $rc, $(w "$S" 24), $(nevals "$S") evaluations, /run epochs $(attr "$S" epochs))" \
    bash -c "[ $rc = 0 ] && same '$(w "$S" 24)' '$W3' && [ '$(nevals "$S")' = 3 ] && [ '$(attr "$S" epochs)' = 3 ] && [ '$(attr "$S" total_steps)' = 24 ]"
  "$BIN" replay "$S" > "$S-replay.log" 2>&1; rc=$?
  check "$FAULT: its replay MATCHes (exit $rc)" bash -c "[ $rc = 0 ] && grep -q 'final metrics MATCH' '$S-replay.log'"
done

echo "t_extendfault: $pass passed, $fail failed"
[ $fail = 0 ]
