#!/usr/bin/env bash
# t_killresume.sh — SIGKILL at random moments, then resume, until the run finishes: in every
# trial the final weights and optimiser state, /steps and /evals (every deterministic column) and
# the applied commands equal an uninterrupted run's (no gap, no duplicate row). Kills land in
# training, in checkpoint writes and in the resume itself. The commands file puts commands exactly
# on checkpoint steps (the case a checkpoint written before its step's commands would lose).
#   tests/t_killresume.sh path/to/moelab [TRIALS]
set -u
BIN=${1:?usage: t_killresume.sh path/to/moelab [TRIALS]}
BIN=$(cd "$(dirname "$BIN")" && pwd)/$(basename "$BIN")
TRIALS=${2:-20}
[ -n "${MOELAB_QUICK:-}" ] && [ -z "${2:-}" ] && TRIALS=5
T=$(mktemp -d)
[ -n "${KEEP:-}" ] || trap 'rm -rf "$T"' EXIT; echo "INFO in $T"
cd "$T"
pass=0; fail=0
ok()  { echo "PASS  $*"; pass=$((pass + 1)); }
bad() { echo "FAIL  $*"; fail=$((fail + 1)); }

EPOCHS=24; [ -n "${MOELAB_QUICK:-}" ] && EPOCHS=10
cat > cmds <<'EOF'
at 14 set lr 0.02
at 21 anneal exp now 0.1
at 42 set tau 0.5
at 63 set cf 1.5
at 70 eval
at 84 anneal cosine now 0.2
EOF
RUN=(train --headless --dataset synthetic:16x16x3:4:512 --width 0.25 --batch 32 --experts 4 --hidden 16 --threads 1
     --seed 9 --epochs $EPOCHS --ckpt-steps 7 --keep 2 --commands cmds)

final_ckpt() { echo "$1/ckpt-$(ls "$1" | sed -n 's/^ckpt-\([0-9]*\)\.h5$/\1/p' | sort -n | tail -1).h5"; }
weights() { h5dump -A 0 -g /weights -g /optimizer -g /rng -g /schedule "$(final_ckpt "$1")" | tail -n +2 | sha256sum | cut -c1-16; }
# the history columns that do not depend on the clock
history() {
  local d
  for d in /steps/step /steps/loss /steps/acc /steps/lr /steps/tau /steps/capacity /steps/kept /evals/step /evals/test_loss /evals/test_acc; do
    h5dump -A 0 -d $d "$1/live.h5" | tail -n +2
  done | sha256sum | cut -c1-16
}
events() { h5dump -d /events "$1/live.h5" | grep -o '"[a-z][^"]*"' | grep -E '^"(set|anneal|eval)' | tr '\n' ' '; }
status() { h5dump -d /status "$1/live.h5" 2>/dev/null | grep -o '"[a-z]*"' | tail -1; }

"$BIN" "${RUN[@]}" --session A > A.log 2>&1 || { bad "the uninterrupted run failed: $(tail -2 A.log)"; echo "t_killresume: $pass passed, $fail failed"; exit 1; }
WA=$(weights A); HA=$(history A); EA=$(events A)
rows=$(h5dump -H -d /steps/step A/live.h5 | grep -o 'DATASPACE  SIMPLE { ( [0-9]*' | grep -o '[0-9]*$')
echo "INFO uninterrupted: weights $WA, history $HA ($rows step rows), commands: $EA"
# how long the whole run takes, to spread the kills over it
t0=$(date +%s%N); "$BIN" "${RUN[@]}" --session A2 > /dev/null 2>&1; t1=$(date +%s%N)
run_ms=$(( (t1 - t0) / 1000000 )); [ $run_ms -lt 200 ] && run_ms=200
echo "INFO one run takes ${run_ms} ms"

RANDOM=4242
resumed=0 same_w=0 same_h=0 kills=0
for trial in $(seq "$TRIALS"); do
  S=K$trial
  "$BIN" "${RUN[@]}" --session $S > $S.log 2>&1 &
  pid=$!
  sleep "$(awk -v r=$RANDOM -v ms=$run_ms 'BEGIN { printf "%.3f", (r % 1000) / 1000.0 * ms / 1000.0 * 0.9 }')"
  kill -9 $pid 2>/dev/null && kills=$((kills + 1)); wait $pid 2>/dev/null
  done_ok=0
  for attempt in 1 2 3 4 5 6; do
    [ -d $S ] || { "$BIN" "${RUN[@]}" --session $S >> $S.log 2>&1; done_ok=$?; [ $done_ok = 0 ] && done_ok=1 && break; continue; }
    if [ -z "$(ls $S/ckpt-*.h5 2>/dev/null)" ]; then
      # killed before the first checkpoint: nothing to resume, start again in a new folder
      rm -rf $S; "$BIN" "${RUN[@]}" --session $S >> $S.log 2>&1 && { done_ok=1; break; }; continue
    fi
    "$BIN" train --resume $S >> $S.log 2>&1 &
    pid=$!
    if [ $attempt -le 2 ] && [ $((RANDOM % 2)) = 0 ]; then
      # kill the resume too, early (while it restores) or later
      sleep "$(awk -v r=$RANDOM -v ms=$run_ms 'BEGIN { printf "%.3f", (r % 1000) / 1000.0 * ms / 1000.0 * 0.5 }')"
      kill -9 $pid 2>/dev/null && kills=$((kills + 1))
    fi
    if wait $pid && [ "$(status $S)" = '"finished"' ]; then done_ok=1; break; fi
  done
  if [ $done_ok != 1 ] || [ "$(status $S)" != '"finished"' ]; then bad "trial $trial: did not finish after the kills: $(tail -3 $S.log)"
    echo "  its warnings: $(grep -E 'failed|warning|cannot|error' $S.log | grep -v 'collapse warning\|WARNING' | head -5)"
    [ -n "${KEEP:-}" ] || cp -r $S "${TMPDIR:-/tmp}/t_killresume-$S-$$" 2>/dev/null; continue; fi
  resumed=$((resumed + 1))
  w=$(weights $S); h=$(history $S); e=$(events $S)
  [ "$w" = "$WA" ] && same_w=$((same_w + 1)) || bad "trial $trial: final weights $w, uninterrupted $WA"
  if [ "$h" = "$HA" ] && [ "$e" = "$EA" ]; then same_h=$((same_h + 1))
  else bad "trial $trial: history $h vs $HA, commands '$e' vs '$EA'"; fi
done
echo "INFO kill/resume: $TRIALS trials, $kills kills, $resumed resumed to the end, $same_w identical weights, $same_h identical history"
[ $resumed = "$TRIALS" ] && ok "all $TRIALS trials resumed to the end ($kills SIGKILLs)" || bad "$resumed of $TRIALS trials resumed"
[ $same_w = "$TRIALS" ] && ok "final weights, optimiser and schedule equal the uninterrupted run's in every trial" || bad "weights equal in $same_w of $TRIALS"
[ $same_h = "$TRIALS" ] && ok "/steps, /evals and the applied commands equal the uninterrupted run's in every trial (no gaps, no duplicates)" || bad "history equal in $same_h of $TRIALS"

# a command scheduled exactly at a checkpoint step, with the crash right after that checkpoint:
# keep only ckpt-21 (as if killed as it appeared) and resume
"$BIN" "${RUN[@]}" --keep 0 --session C > C.log 2>&1
for f in C/ckpt-*.h5; do [ "$f" = C/ckpt-21.h5 ] || rm -f "$f"; done
if [ -f C/ckpt-21.h5 ]; then
  "$BIN" train --resume C > C2.log 2>&1
  [ "$(weights C)" = "$WA" ] && [ "$(history C)" = "$HA" ] && [ "$(events C)" = "$EA" ] \
    && ok "resume from ckpt-21 (with 'at 21 anneal' due there) reproduces the uninterrupted run" \
    || bad "resume from ckpt-21 differs: $(grep -c . C2.log) log lines; events '$(events C)'"
else bad "no ckpt-21.h5 was written"; fi
"$BIN" replay C --session C-replay > R.log 2>&1; rc=$?
[ $rc = 0 ] && grep -q 'final metrics MATCH' R.log && ok "replay of the resumed session: MATCH" || bad "replay: rc $rc, $(tail -1 R.log)"
[ "$(weights C-replay)" = "$WA" ] && ok "replay's final weights equal the uninterrupted run's" || bad "replay's weights differ"

# a backbone-MoE session (a routed layer after stage 2 and the moe head) with per-layer commands:
# a resume from a middle checkpoint, and kills at random moments, give the uninterrupted run's
# weights, per-layer state (/backbone: collapse windows, epoch sums, temperature plans) and
# per-layer history; replay of its commands (with @layer suffixes) reports MATCH
cat > bcmds <<'EOF'
at 10 set tau 0.3 @moe2
at 17 anneal exp now 0.1 @head
at 24 set cf 2 @moe2
at 30 set alpha 0.05
EOF
BEP=6; [ -n "${MOELAB_QUICK:-}" ] && BEP=4
RUNB=(train --headless --dataset synthetic:16x16x3:4:512 --width 0.25 --batch 32 --experts 4 --hidden 16 --threads 1
      --seed 5 --epochs $BEP --ckpt-steps 8 --keep 0 --moe-after 2 --moe-hidden 8 --commands bcmds --route-window 8)
bweights() { h5dump -A 0 -g /weights -g /optimizer -g /rng -g /schedule -g /backbone -g /trainer "$(final_ckpt "$1")" | tail -n +2 | sha256sum | cut -c1-16; }
bhistory() {
  local d
  for d in /steps/step /steps/loss /steps/tau /evals/test_acc /layers/moe2/steps/tau /layers/moe2/steps/kept \
           /layers/moe2/steps/capacity /layers/moe2/steps/collapsed /layers/head/steps/tau /layers/moe2/evals/mutual_info \
           /layers/moe2/evals/class_expert /layers/head/evals/class_expert; do
    h5dump -A 0 -d $d "$1/live.h5" | tail -n +2
  done | sha256sum | cut -c1-16
}
"$BIN" "${RUNB[@]}" --session B > B.log 2>&1 || bad "the backbone-MoE run failed: $(tail -2 B.log)"
WB=$(bweights B); HB=$(bhistory B)
grep -q "set tau 0.3 @moe2" B.log && ok "the backbone run applied 'set tau 0.3 @moe2'" || bad "no 'set tau 0.3 @moe2' in the log"
h5dump -d /events B/live.h5 | grep -q 'set tau 0.3 @moe2' && ok "'set tau 0.3 @moe2' is in the event log" || bad "event log lacks the @moe2 command"
cp -r B BM; mid=$(ls BM | sed -n 's/^ckpt-\([0-9]*\)\.h5$/\1/p' | sort -n | sed -n 3p)
for f in BM/ckpt-*.h5; do n=${f#BM/ckpt-}; n=${n%.h5}; [ "$n" -gt "$mid" ] && rm -f "$f"; done
"$BIN" train --resume BM > BM.log 2>&1
[ "$(bweights BM)" = "$WB" ] && [ "$(bhistory BM)" = "$HB" ] \
  && ok "backbone-MoE resume from ckpt-$mid: weights, per-layer state and per-layer history equal the uninterrupted run's" \
  || bad "backbone-MoE resume from ckpt-$mid differs (weights $(bweights BM) vs $WB, history $(bhistory BM) vs $HB)"
t0=$(date +%s%N); "$BIN" "${RUNB[@]}" --session B2 > /dev/null 2>&1; t1=$(date +%s%N)
bms=$(( (t1 - t0) / 1000000 )); [ $bms -lt 200 ] && bms=200
bok=0; BT=3
for trial in $(seq $BT); do
  S=BK$trial
  "$BIN" "${RUNB[@]}" --session $S > $S.log 2>&1 &
  pid=$!
  sleep "$(awk -v r=$RANDOM -v ms=$bms 'BEGIN { printf "%.3f", (0.3 + (r % 1000) / 1000.0 * 0.6) * ms / 1000.0 }')"
  kill -9 $pid 2>/dev/null; wait $pid 2>/dev/null
  how="killed at $(status $S), ckpts: $(ls $S | grep -c '^ckpt-')"; rc=0
  if [ -z "$(ls $S/ckpt-*.h5 2>/dev/null)" ]; then rm -rf $S; how="$how; rerun"; "$BIN" "${RUNB[@]}" --session $S >> $S.log 2>&1; rc=$?
  elif [ "$(status $S)" != '"finished"' ]; then how="$how; resumed"; echo "---- resume" >> $S.log; "$BIN" train --resume $S >> $S.log 2>&1; rc=$?; fi
  if [ $rc = 0 ] && [ "$(bweights $S)" = "$WB" ] && [ "$(bhistory $S)" = "$HB" ]; then bok=$((bok + 1))
  else # what a rare failure needs to be understood: how the trial went, its exit status, the log
    echo "INFO backbone trial $trial differs ($how, exit status $rc; weights $(bweights $S) vs $WB, history $(bhistory $S) vs $HB); its log:"
    sed 's/^/INFO   /' $S.log | tail -n 40
  fi
done
[ $bok = $BT ] && ok "backbone-MoE kill/resume: $BT of $BT trials equal the uninterrupted run" || bad "backbone-MoE kill/resume: $bok of $BT equal"
"$BIN" replay B --session B-replay > BR.log 2>&1; rc=$?
[ $rc = 0 ] && grep -q 'final metrics MATCH' BR.log && ok "replay of the session with @layer commands: MATCH" || bad "replay of B: rc $rc, $(tail -1 BR.log)"

echo "t_killresume: $pass passed, $fail failed"
[ $fail = 0 ]
