#!/usr/bin/env bash
# t_collapse.sh — acting on a collapse, end to end on synthetic data. A "deliberately collapsing"
# run: --collapse-share 0.05 makes any routing collapsed, so the flag fires as soon as the window
# judges (--collapse-min-steps 10: at step 10).
#   headless --on-collapse "set tau 2": applied once at step 10, logged as "rule: set tau 2" in
#     the event log next to the collapse event; replay MATCHes and applies it once;
#   headless --on-collapse pause: the run stops at step 10 with a checkpoint and a message,
#     status interrupted; --resume continues to the end without pausing again;
#   bad rules are refused at launch; --help documents the thresholds;
#   live screen (tmux) --on-collapse pause: status PAUSED (collapse), the banner says why, the
#     step counter stands still, `resume` continues; the live `on-collapse set tau 2` command.
set -u
BIN=${1:?usage: t_collapse.sh path/to/moelab}
BIN=$(cd "$(dirname "$BIN")" && pwd)/$(basename "$BIN")
T=$(mktemp -d)
TM=(tmux -L moelabcollapse-$$ -f /dev/null)
cleanup() { "${TM[@]}" kill-server >/dev/null 2>&1; rm -rf "$T"; }
trap cleanup EXIT
cd "$T"
pass=0; fail=0
ok()  { echo "PASS  $*"; pass=$((pass + 1)); }
bad() { echo "FAIL  $*"; fail=$((fail + 1)); }
check() { local what=$1; shift; if "$@"; then ok "$what"; else bad "$what"; fi; }
events() { h5dump -d /events "$1/live.h5" 2>/dev/null; }

RUN=(--dataset synthetic:16x16x3:4:512 --width 0.25 --batch 32 --experts 4 --hidden 16 --epochs 2 --threads 1
     --collapse-share 0.05 --collapse-min-steps 10 --collapse-warmup 0 --collapse-confirm 1)

# 1. a rule of commands, headless
"$BIN" train --headless "${RUN[@]}" --on-collapse "set tau 2" --session R > R.log 2>&1; rc=$?
check "rule: run exits 0" [ $rc = 0 ]
check "rule: the collapse is reported at step 10" grep -q '^\[step 10\] collapse at step 10 (' R.log
check "rule: applied once, at step 10, as coming from the rule" \
  [ "$(grep -c 'rule: set tau 2' R.log)" = 1 -a -n "$(grep '^\[step 10\] rule: set tau 2$' R.log)" ]
check "rule: the event log holds the collapse and the rule's command" \
  [ "$(events R | grep -c '"rule: set tau 2"')" = 1 -a "$(events R | grep -c '"collapse at step 10 (')" -ge 1 ]
check "rule: the routing line shows the epoch-mean tau after it (2)" grep -q 'tau 2  aux' R.log
"$BIN" replay R --session R2 > RP.log 2>&1; rc=$?
check "rule: replay MATCHes (exit $rc)" grep -q 'final metrics MATCH' RP.log
check "rule: replay applies the rule's command once" [ "$(events R2 | grep -c '"rule: set tau 2"')" = 1 ]

# 2. pause, headless: stop at the flagged step, resumable
"$BIN" train --headless "${RUN[@]}" --on-collapse pause --session P > P.log 2>&1; rc=$?
check "pause: exit 0 and the message names the step" bash -c "[ $rc = 0 ] && grep -q 'on-collapse pause at step 10' P.log"
check "pause: the session ends interrupted at step 10" grep -q 'interrupted at step 10' P.log
check "pause: a checkpoint at the flagged step" [ -f P/ckpt-10.h5 ]
"$BIN" train --headless --resume P > P2.log 2>&1; rc=$?
check "pause: --resume finishes the run without pausing again (exit $rc)" \
  bash -c "[ $rc = 0 ] && grep -q 'finished at step 32' P2.log && ! grep -q 'on-collapse pause' P2.log"

# 3. bad rules, documented thresholds
"$BIN" train --on-collapse quit --dry-run --dataset synthetic > B.log 2>&1; rc=$?
check "a rule with quit is refused (exit $rc)" bash -c "[ $rc = 2 ] && grep -q 'cannot be part of a rule' B.log"
"$BIN" train --on-collapse "set frob 1" --dry-run --dataset synthetic > B.log 2>&1; rc=$?
check "a rule with a bad command is refused (exit $rc)" bash -c "[ $rc = 2 ] && grep -q \"unknown parameter 'frob'\" B.log"
"$BIN" train --help > H.log 2>&1
for o in route-window collapse-min-steps collapse-entropy collapse-share collapse-dead on-collapse; do
  check "--help documents --$o" grep -q -- "--$o" H.log
done

# 4. the live screen
if ! command -v tmux >/dev/null 2>&1; then
  echo "SKIP: tmux is not installed: the live-screen part did not run"
else
  S=c
  cap() { "${TM[@]}" capture-pane -p -t "$S" 2>/dev/null; }
  wait_for() {
    local pat=$1 limit=${2:-10} i
    for ((i = 0; i < limit * 10; i++)); do
      cap | grep -Eq -- "$pat" && return 0
      sleep 0.1
    done
    return 1
  }
  "${TM[@]}" new-session -d -s keepalive "sleep 100000" >/dev/null 2>&1
  "${TM[@]}" new-session -d -x 120 -y 40 -s "$S" \
    "cd '$T' && env XDG_STATE_HOME=$T/state TERM=xterm-256color $BIN train ${RUN[*]} --epochs 20 --on-collapse pause --session L; echo MOELAB_EXIT=\$?; exec bash --norc --noprofile -i"
  check "tmux: status PAUSED (collapse)" wait_for 'PAUSED \(collapse\)' 60
  check "tmux: the banner says the rule paused it at step 10" wait_for 'PAUSED by --on-collapse at step 10: COLLAPSE training: [0-9]+% of first choices to e[0-9]' 5
  s1=$(cap | sed -n 2p | grep -Eo 'step +[0-9]+' | head -1 | grep -Eo '[0-9]+')
  sleep 1.5
  s2=$(cap | sed -n 2p | grep -Eo 'step +[0-9]+' | head -1 | grep -Eo '[0-9]+')
  check "tmux: the run waits at step 10 ($s1, $s2)" [ "${s1:-x}" = 10 -a "${s2:-y}" = 10 ]
  "${TM[@]}" send-keys -t "$S" -l "on-collapse set tau 2"; "${TM[@]}" send-keys -t "$S" Enter
  # the log's line ([step 10] ...), not the typed text still on the command line before Enter
  check "tmux: the live on-collapse command is applied" wait_for '\[step 10\] on-collapse set tau 2' 10
  "${TM[@]}" send-keys -t "$S" -l "resume"; "${TM[@]}" send-keys -t "$S" Enter
  check "tmux: resume continues (RUNNING)" wait_for '^ RUNNING ' 15
  "${TM[@]}" send-keys -t "$S" q
  if wait_for 'Quit training\?' 5; then "${TM[@]}" send-keys -t "$S" y; fi
  check "tmux: q + y exits" wait_for 'MOELAB_EXIT=' 30
  check "tmux: the event log has the rule's pause and the live rule" \
    [ "$(events L | grep -c '"rule: pause (on-collapse at step 10')" = 1 -a "$(events L | grep -cE '"on-collapse set tau 2( *# screen)?"')" = 1 ]
fi

# 5. the banner at 80x24 and 120x40: severity, view, expert and share whole; the same numbers as the log.
#    A commands file pauses the run at step 12, two steps after the collapse (step 10) and before
#    the first epoch line (step 16): what the screen shows then does not depend on how fast the run
#    went or when the capture came (a pause typed after the banner came at any later step, and the
#    epoch lines had scrolled the event out of the 6-row log panel).
has_share() { [ -n "$1" ] && grep -qF -- "$1" <<<"$2"; } # has_share SHARE TEXT: SHARE found in TEXT
if command -v tmux >/dev/null 2>&1; then
  printf 'at 12 pause\n' > pause12.txt
  for size in 80x24 120x40; do
    S=b$size
    W=${size%x*}; H=${size#*x}
    rm -rf "B$size"
    "${TM[@]}" new-session -d -x "$W" -y "$H" -s "$S" \
      "cd '$T' && env XDG_STATE_HOME=$T/state TERM=xterm-256color $BIN train ${RUN[*]} --epochs 20 --commands pause12.txt --session B$size; echo MOELAB_EXIT=\$?; exec bash --norc --noprofile -i"
    check "tmux $size: a red collapse banner appears" wait_for '^ COLLAPSE training: [0-9]+% of first choices to e[0-9]' 60
    check "tmux $size: the commands file pauses the run at step 12" wait_for 'PAUSED +epoch 1/20 +step +12/' 10
    [ "$W" -ge 120 ] && wait_for '\[step 12\] pause' 5 # the log panel's last line: the frame is whole
    cap > "cap$size.txt"
    banner=$(sed -n '3,4p' "cap$size.txt" | tr '\n' ' ')
    bshare=$(echo "$banner" | grep -Eo '[0-9]+% of first choices to e[0-9]+' | head -1)
    check "tmux $size: the banner keeps the view, the expert and the share ($bshare)" \
      has_share "$bshare" "$(grep -o 'COLLAPSE training: .*' <<<"$banner")"
    if [ "$W" -ge 120 ]; then
      # the training view's event line in the log panel (the clean router's event follows it)
      lshare=$(grep -E 'collapse at step 10 \(training view' "cap$size.txt" | grep -Eo '[0-9]+% of first choices to e[0-9]+' | tail -1)
      check "tmux $size: the log panel shows the same share and expert ($lshare)" [ -n "$lshare" -a "$lshare" = "$bshare" ]
    fi
    "${TM[@]}" send-keys -t "$S" q
    if wait_for 'Quit training\?' 5; then "${TM[@]}" send-keys -t "$S" y; fi
    check "tmux $size: q + y exits" wait_for 'MOELAB_EXIT=' 30
    # the message in the banner is the one in the event log (live.h5 is read once the run is
    # over: h5dump cannot open it while the run writes it): the training view's latest alarm
    msg=$(events "B$size" | grep -Eo 'COLLAPSE training:[^"]*' | tail -1)
    check "tmux $size: banner and log carry the same numbers (\"$bshare\" in \"${msg:0:80}\")" has_share "$bshare" "$msg"
    "${TM[@]}" kill-session -t "$S" 2>/dev/null
  done
fi

# 6. an expert driven to death and brought back, on the live screen (120x40): the death event, the
#    dead mark in the load panel, then the revival event and the mark gone
if command -v tmux >/dev/null 2>&1; then
  S=death
  printf 'at 150 pause\nat 200 set noise 10\nat 270 pause\n' > death_cmds.txt
  rm -rf D
  "${TM[@]}" new-session -d -x 120 -y 40 -s "$S" \
    "cd '$T' && env XDG_STATE_HOME=$T/state TERM=xterm-256color $BIN train --dataset synthetic:16x16x3:4:4096 --width 0.25 --batch 32 --hidden 32 --threads 1 --no-augment --epochs 4 --noise 0.5 --bias-mode select --bias-rate 0.01 --init-bias e5=-30 --commands death_cmds.txt --session D; echo MOELAB_EXIT=\$?; exec bash --norc --noprofile -i"
  check "death: the run pauses at step 150" wait_for 'PAUSED' 60
  check "death: a yellow EXPERT DEATH banner names e5" wait_for '^ EXPERT DEATH e5: no kept pair for 100 steps' 5
  wait_for '\[step 150\] pause' 5 # the log panel's last line: the paused frame is drawn whole
  cap > death1.txt
  check "death: the log has the death event, its numbers named" grep -q 'expert death at step [0-9]* (e5; deaths so far 1, dead now 1 of 8)' death1.txt
  check "death: the load panel marks e5 dead" grep -Eq 'e5 ?(✗|x)' death1.txt
  "${TM[@]}" send-keys -t "$S" -l "resume"; "${TM[@]}" send-keys -t "$S" Enter
  check "death: paused again at step 270" wait_for 'step +270/' 60
  wait_for '\[step 270\] pause' 5 # the status line is drawn first, the log panel's last line last
  cap > death2.txt
  check "death: the log has the revival event" grep -q 'expert revival at step [0-9]* (e5)' death2.txt
  check "death: the load panel no longer marks e5" bash -c "! grep -Eq 'e5 ?(✗|x) ' death2.txt"
  check "death: the banner is gone" bash -c "! grep -q 'EXPERT DEATH e5' <(sed -n 3,4p death2.txt)"
  "${TM[@]}" send-keys -t "$S" -l "resume"; "${TM[@]}" send-keys -t "$S" Enter
  sleep 1
  "${TM[@]}" send-keys -t "$S" q
  if wait_for 'Quit training\?' 5; then "${TM[@]}" send-keys -t "$S" y; fi
  check "death: q + y exits" wait_for 'MOELAB_EXIT=' 30 # live.h5 is closed: h5dump can open it
  "${TM[@]}" kill-session -t "$S" 2>/dev/null
  check "death: live.h5's events hold the death and the revival" \
    [ "$(events D | grep -cE '"expert (death|revival) at step')" -ge 2 ]
fi

echo "$pass passed, $fail failed"
[ $fail = 0 ]
