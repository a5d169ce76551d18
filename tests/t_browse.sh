#!/usr/bin/env bash
# t_browse.sh — the session browser end to end, driven through tmux (own server socket,
# -L moelabbrowse): the list of sessions with statuses (a truncated and a garbage live.h5 are
# listed as damaged, with the reason, and the browser keeps working); opening a session; the epoch
# scrubber (Left/Right, Home/End, typed epoch) moving the heatmap, load, temperature, status and
# log; the t-SNE view and its colour toggle; comparing two marked sessions; filter and sort;
# resize to "too small" and back; q exits with the terminal restored; browsing a session while it
# trains (the screen follows new evaluations); FILE.h5 opened directly; --list without a terminal.
# Prints PASS/FAIL lines and "N passed, M failed"; exits 0 only if none failed.
set -u
BIN=${1:?usage: t_browse.sh path/to/moelab}
cleanup_more() { [ -n "${LIVE_PID:-}" ] && kill "$LIVE_PID" 2>/dev/null; }
TMUX_NAME=moelabbrowse S=br
. "$(dirname "$0")/tmux_harness.sh"
has()   { LC_ALL=C grep -Eq -- "$1" "$2"; }

# ---- sessions to browse (headless, small)
TR=(train --headless --dataset synthetic:16x16x3:6:1024 --width 0.25 --batch 32 --experts 4 --hidden 16 --threads 2
    --epochs 6 --log-every 4)
cd "$T" || exit 1
printf 'at 50 set tau 0.3\nat 120 anneal exp now 0.05\n' > cmds.txt
"$BIN" "${TR[@]}" --seed 1 --session S/exp-run --schedule exp --tau0 1 --tau1 0.1 --commands cmds.txt > a.log 2>&1 || bad "training exp-run"
"$BIN" "${TR[@]}" --seed 2 --session S/sig-run --schedule sigmoid --tau0 1 --tau1 0.1 > b.log 2>&1 || bad "training sig-run"
"$BIN" "${TR[@]}" --seed 3 --head dense --session S/dense-run > c.log 2>&1 || bad "training dense-run"
mkdir -p S/cut-run S/junk-run S/not-a-session
head -c "$(( $(stat -c %s S/exp-run/live.h5) / 2 ))" S/exp-run/live.h5 > S/cut-run/live.h5
head -c 5000 /dev/urandom > S/junk-run/live.h5
echo hello > S/not-a-session/notes.txt

# ---- without a terminal: the list as text
"$BIN" browse S --list > list.txt 2>&1; rc=$?
check "--list exits 0" [ "$rc" = 0 ]
check "--list shows the three sessions with schedules" bash -c "grep -Eq '^exp-run .*exp\* .*6/6 finished' list.txt && grep -Eq '^sig-run .*sigmoid' list.txt && grep -Eq '^dense-run .*dense' list.txt"
check "--list reports the truncated and the garbage file as damaged, with the reason" bash -c "grep -Eq '^cut-run .*damaged' list.txt && grep -Eq '^junk-run .*damaged' list.txt && grep -Eq 'cannot read: .*cut-run/live.h5' list.txt"
# the alarms column (issue 26): exp-run's collapse / warning / expert death events counted from its event log
evn() { h5dump -d /events "S/$1/live.h5" 2>/dev/null | grep -cE "\"$2 at step [0-9]"; }
want=""; for k in "collapse C" "warning W" "expert death D"; do n=$(evn exp-run "${k% *}"); [ "$n" -gt 0 ] && want="$want${want:+ }$n${k##* }"; done
got=$(grep -E '^exp-run ' list.txt | sed -E 's/.* finished +(.*[^ ]) +[0-9]{4}-[0-9]{2}-[0-9]{2} .*/\1/')
check "--list: an alarms column; exp-run's is its event log's episodes by severity ('$got', want '${want:--}')" \
  bash -c "grep -Eq '^name .* status +alarms +created' list.txt && [ '$got' = '${want:--}' ]"
check "--list: the dense run has no alarm ('-')" grep -Eq '^dense-run .* finished +- +[0-9]{4}-' list.txt
check "--list ignores a folder without live.h5" bash -c "! grep -q not-a-session list.txt"
check "--list counts" has '^5 sessions, 2 unreadable' list.txt
"$BIN" browse S --list --filter sigm > f.txt 2>&1
check "--filter" bash -c "grep -q sig-run f.txt && ! grep -q exp-run f.txt"
"$BIN" browse S --list --sort best --reverse > s.txt 2>&1
check "--sort best --reverse: highest accuracy first" bash -c "awk 'NR>1 && \$6 ~ /^[0-9.]+\$/ {print \$6}' s.txt | sort -rn -c"
"$BIN" browse S/cut-run/live.h5 > d.txt 2>&1; rc=$?
check "a damaged FILE.h5 opened directly: exit 1 and a clear message" bash -c "[ $rc = 1 ] && grep -Eq 'moelab browse: .*cut-run/live.h5' d.txt"
for d in S/exp-run S/exp-run/live.h5; do
  MOELAB_FAULT_SESSION_PROBE=exp-run/live.h5 "$BIN" browse "$d" --list > dc.txt 2>&1; rc=$?
  check "$d opened directly, its reader crashes: exit 1 and one line with the reason" \
    bash -c "[ $rc = 1 ] && [ \$(wc -l < dc.txt) = 1 ] && grep -q '^moelab browse: S/exp-run/live.h5: reading it crashed the HDF5 library (signal 11): the file is damaged$' dc.txt"
done
"$BIN" browse S/nowhere > n.txt 2>&1; rc=$?
check "a missing folder: exit 1 and a message" bash -c "[ $rc = 1 ] && grep -q 'No such file' n.txt"

# a reader that crashes (as libhdf5 1.10 can on some corrupted files) or files with random bytes
# changed: each is an entry with a reason, the list goes on
MOELAB_FAULT_READ_CRASH=sig-run "$BIN" browse S --list > crash.txt 2>&1; rc=$?
check "a reader crash: --list still exits 0" [ "$rc" = 0 ]
check "a reader crash: the entry is damaged with the reason" bash -c "grep -Eq '^sig-run .*damaged' crash.txt && grep -Eq 'reading it crashed the HDF5 library \(signal [0-9]+\)|the reader process failed' crash.txt && grep -Eq '^exp-run .*finished' crash.txt"
mkdir -p C
size=$(stat -c %s S/exp-run/live.h5)
for i in $(seq 1 24); do
  mkdir -p C/c$i
  cp S/exp-run/live.h5 C/c$i/live.h5
  for k in 1 2 3 4 5 6 7 8; do
    pos=$(( (RANDOM * 32768 + RANDOM) % (i % 2 ? 4096 : size) ))
    printf "\\x$(printf %02x $((RANDOM % 256)))" | dd of=C/c$i/live.h5 bs=1 seek="$pos" conv=notrunc status=none
  done
done
timeout 300 "$BIN" browse C --list > corrupt.txt 2>&1; rc=$?
check "24 randomly corrupted copies: --list exits 0 and lists every one" bash -c "[ $rc = 0 ] && grep -q '^24 sessions' corrupt.txt"
check "corrupted copies that cannot be read say why" bash -c "! grep -E '^c[0-9]+ .*damaged' corrupt.txt >/dev/null || grep -q 'cannot read: ' corrupt.txt"

# ---- the screen
start() { # start W H ARGS...
  local w=$1 h=$2; shift 2
  "${TM[@]}" kill-session -t "$S" >/dev/null 2>&1
  "${TM[@]}" new-session -d -x "$w" -y "$h" -s "$S" \
    "cd '$T' && env LANG=C.UTF-8 TERM=xterm-256color $BIN browse $*; echo BROWSE_EXIT=\$?; exec env PS1='shell\$ ' bash --norc --noprofile -i"
}
heat_rows() { cap | grep -E '^.class[0-9]' | cut -c1-40; }

start 120 40 S
check "list: title with counts" wait_for 'moelab browse .* 5 sessions .*2 damaged' 5
check "list: rows with dataset, head, E/k/h, schedule, accuracy, epochs, status" wait_for 'exp-run +synthetic +moe +4/2/16 +exp\* +[0-9.]+ +[0-9.]+ +6/6 +finished' 2
check "list: the damaged entries are listed" wait_for 'junk-run .*damaged' 2
check "list: an alarms column after status" wait_for 'status +alarms' 2
check "list: exp-run's alarms cell is '${want:--}'" wait_for "exp-run .* finished +${want:--}( |\$)" 2
# select the truncated file: the detail line gives the reason; Enter says it cannot open it
keys Home; for i in 1 2 3 4 5; do cap | grep -Eq '^.{0,3}cut-run' && break; done
n=$(cap | grep -En '^ ?.? ?.?(cut-run)' | head -1 | cut -d: -f1)
keys Home
for ((i = 3; i < ${n:-3}; i++)); do keys Down; done
check "list: the damaged entry's reason under the list" wait_for 'cannot read: .*cut-run/live.h5' 3
keys Enter
check "list: Enter on a damaged session gives a message, not a crash" wait_for 'cannot open cut-run' 3
keys Down
check "list: the browser keeps working after it" wait_for 'Enter open +m mark' 3
# filter to one session and open it
keys /; typed exp-run; keys Enter
check "filter: only the matching row" bash -c "wait_for(){ :; }; true"
sleep 0.3
check "filter: exp-run shown, sig-run hidden" bash -c "out=\$(${TM[*]} capture-pane -p -t $S); grep -q 'exp-run' <<<\"\$out\" && ! grep -q 'sig-run' <<<\"\$out\""
keys Enter
check "session: the status bar names the session and the cursor's epoch" wait_for 'cursor: epoch 6/6 +step 192/192' 5
check "session: every panel is there" bash -c "out=\$(${TM[*]} capture-pane -p -t $S); for p in 'Loss & accuracy' 'Temperature @192' 'Class x expert +epoch 6' 'Expert load @192' 'Routing: step 192' 'Log'; do grep -Eq \"\$p\" <<<\"\$out\" || exit 1; done"
check "session: the log marks the cursor at the end" wait_for 'cursor: step 192 \(end of the history\)' 2
check "session: the temperature panel shows the logged anneal" wait_for 'anneal exp 0.3.0.05 @120' 2
h6=$(heat_rows)
keys Left
check "scrubber: Left moves to epoch 5" wait_for 'Class x expert +epoch 5' 3
check "scrubber: status and load follow (step 160)" bash -c "out=\$(${TM[*]} capture-pane -p -t $S); grep -q 'cursor: epoch 5/6  step 160/192' <<<\"\$out\" && grep -q 'Expert load @160' <<<\"\$out\""
keys Home
check "scrubber: Home goes to epoch 1" wait_for 'Class x expert +epoch 1 ' 3
h1=$(heat_rows)
differs() { [ -n "$1" ] && [ "$1" != "$2" ]; }
check "scrubber: the heatmap changes with the epoch" differs "$h1" "$h6"
check "scrubber: epoch 1 is before the set tau override (no OVERRIDE in the temperature title)" bash -c "! ${TM[*]} capture-pane -p -t $S | grep -q 'Temperature @32 .*OVERRIDE'"
typed 3; keys Enter
check "scrubber: a typed epoch number (3)" wait_for 'Class x expert +epoch 3' 3
check "scrubber: at epoch 3 the temperature shows the set tau override from step 50" wait_for 'Temperature @96 .*OVERRIDE @50' 2
check "scrubber: the log shows the command before the cursor" wait_for '\[step 50\] set tau 0.3' 2
keys End
check "scrubber: End goes back to the last epoch" wait_for 'Class x expert +epoch 6' 3
# t-SNE
keys t
check "t-SNE: the view opens and finishes with its figures" wait_for 'nearest neighbour in the map: same expert [0-9]+%, same class [0-9]+%; [0-9]+ points, [0-9.]+ s' 30
check "t-SNE: coloured by expert, legend e0..e3" bash -c "out=\$(${TM[*]} capture-pane -p -t $S); grep -q 'colour = first-choice expert' <<<\"\$out\" && grep -Eq '0 e0 +[0-9]+' <<<\"\$out\""
keys c
check "t-SNE: c colours by class" wait_for 'colour = class' 3
keys Left
check "t-SNE: Left recomputes for epoch 5" wait_for 't-SNE of test features, epoch 5' 5
wait_for 'points, [0-9.]+ s' 30 >/dev/null
keys Escape
check "t-SNE: Esc closes it" wait_for 'Expert load @' 3
keys Escape
check "back to the list with Esc" wait_for 'Enter open +m mark' 3
keys Escape   # clear the filter
check "Esc clears the filter" wait_for 'sig-run' 3
# compare: mark exp-run and sig-run
keys Home
for ((i = 0; i < 8; i++)); do
  line=$(cap | grep -E '^ ?. ?(exp-run|sig-run)' | head -1)
  break
done
mark_row() { # mark_row NAME: select the row of NAME and press m
  local name=$1 i row
  row=$(cap | grep -En "^.{2}$name " | head -1 | cut -d: -f1)
  keys Home
  for ((i = 3; i < row; i++)); do keys Down; done
  sleep 0.2
  keys m
  sleep 0.2
}
mark_row exp-run
mark_row sig-run
check "compare: two marked" wait_for 'marked: 2 \(c compares\)' 3
keys c
check "compare: the screen with both names" wait_for 'moelab compare .*A: (exp|sig)-run.*B: (exp|sig)-run' 5
check "compare: curves overlaid, B - A table, two heatmaps" bash -c "out=\$(${TM[*]} capture-pane -p -t $S); grep -q 'Loss & accuracy  ema 0.9  A vs B' <<<\"\$out\" && grep -Eq 'test acc % +[0-9.]+ +[0-9.]+ +[-+][0-9.]+' <<<\"\$out\" && grep -q 'A: Class x expert  epoch 6' <<<\"\$out\" && grep -q 'B: Class x expert  epoch 6' <<<\"\$out\""
keys Left
check "compare: Left moves both to epoch 5" wait_for 'A vs B at epoch 5 / 5' 3
keys Escape
check "compare: Esc back to the list" wait_for 'Enter open +m mark' 3
# sort and help
keys s
check "sort: s moves the sort marker to the next column" wait_for 'name[^ ]* +dataset' 2
check "sort: the marker is on name" wait_for 'name[▲^]' 2
keys '?'
check "help overlay" wait_for 'Help: moelab browse' 3
keys Escape
check "help closes" bash -c "sleep 0.3; ! ${TM[*]} capture-pane -p -t $S | grep -q 'Help: moelab browse'"
# resize
"${TM[@]}" resize-window -t "$S" -x 70 -y 20 >/dev/null 2>&1
check "resize to 70x20: 'too small'" wait_for 'terminal too small \(need 80x24, have 70x20\)' 3
"${TM[@]}" resize-window -t "$S" -x 80 -y 24 >/dev/null 2>&1
check "resize to 80x24: the list again" wait_for 'Enter open' 3
"${TM[@]}" resize-window -t "$S" -x 120 -y 40 >/dev/null 2>&1
keys q
check "q exits with status 0" wait_for 'BROWSE_EXIT=0' 5
check "the shell has the terminal back" wait_for 'shell\$' 3

# ---- a session whose full read crashes: a message, and the browser lives on
"${TM[@]}" kill-session -t "$S" >/dev/null 2>&1
"${TM[@]}" new-session -d -x 120 -y 40 -s "$S" \
  "cd '$T' && env MOELAB_FAULT_OPEN_CRASH=dense-run LANG=C.UTF-8 TERM=xterm-256color $BIN browse S; echo BROWSE_EXIT=\$?; exec bash --norc --noprofile -i"
check "crash on open: the list first" wait_for 'Enter open' 5
keys /; typed dense-run; keys Enter; sleep 0.3; keys Enter
check "crash on open: a message instead of a crash" wait_for 'cannot open dense-run: .*(crashed the HDF5 library|the reader process failed)' 5
keys Escape; keys q
check "crash on open: q still exits 0" wait_for 'BROWSE_EXIT=0' 5

# ---- a session opened directly as FILE.h5; q quits from it
start 100 30 S/sig-run/live.h5
check "FILE.h5: opens the session directly" wait_for 'cursor: epoch 6/6' 5
keys q
check "FILE.h5: q exits" wait_for 'BROWSE_EXIT=0' 5

# ---- a sweep.h5: its runs, and the configurations' summary under the list
"$BIN" sweep --dataset synthetic:16x16x3:4:256 --width 0.25 --batch 32 --experts 4 --hidden 16 --epochs 1 --threads 1 \
  --vary head=moe,dense --seeds 2 --out W > sweep.log 2>&1 || bad "the sweep for the browser"
start 130 36 W/sweep.h5
check "sweep.h5: the four runs" wait_for 'browse .*sweep.h5 +4 sessions' 5
check "sweep.h5: the summary of both configurations with the gap" bash -c "out=\$(${TM[*]} capture-pane -p -t $S); grep -q 'sweep: 2 configurations x 2 seeds' <<<\"\$out\" && grep -Eq 'head=moe +2/2 +[0-9.]+ \\+- [0-9.]+ .* [-+][0-9.]+ +\\[' <<<\"\$out\" && grep -Eq 'head=dense +2/2' <<<\"\$out\""
check "sweep.h5: each configuration's alarm episodes by severity at the end of its row" \
  bash -c "out=\$(${TM[*]} capture-pane -p -t $S); grep -Eq 'CI pp +alarms *\$' <<<\"\$out\" && grep -Eq 'head=moe +2/2 .*\] +(-|[0-9]+[CWD]( [0-9]+[CWD])*) *\$' <<<\"\$out\" && grep -Eq 'head=dense +2/2 .* +- *\$' <<<\"\$out\""
keys Enter
check "sweep.h5: Enter opens a run" wait_for 'cursor: epoch 1/1' 5
keys q
check "sweep.h5: q goes back to the list" wait_for 'sweep: 2 configurations' 5
keys q
check "sweep.h5: q exits" wait_for 'BROWSE_EXIT=0' 5

# ---- ASCII without a UTF-8 locale, and NO_COLOR
ESC=$'\e'
BRAILLE=$'\xe2[\xa0-\xa3]'
cap_e() { "${TM[@]}" capture-pane -p -e -t "$S" 2>/dev/null; }
"${TM[@]}" kill-session -t "$S" >/dev/null 2>&1
"${TM[@]}" new-session -d -x 100 -y 30 -s "$S" \
  "cd '$T' && env LANG=C LC_ALL=C NO_COLOR=1 TERM=xterm-256color $BIN browse S/exp-run; echo BROWSE_EXIT=\$?; exec bash --norc --noprofile -i"
check "LANG=C: the session opens" wait_for 'cursor: epoch 6/6' 5
cap > ascii.txt; cap_e > ascii_e.txt
check "LANG=C: no braille or box-drawing bytes, ASCII frames" bash -c "! LC_ALL=C grep -q \$'\\xe2' ascii.txt && grep -q '^+- ' ascii.txt"
check "NO_COLOR: no colour escape codes" bash -c "! LC_ALL=C grep -Eq \"$ESC\\[([0-9;]*;)?(3[0-7]|4[0-7]|38;5|48;5)\" ascii_e.txt"
keys q
check "LANG=C: q exits" wait_for 'BROWSE_EXIT=0' 5

# ---- browsing a session while it trains
"$BIN" train --headless --dataset synthetic:16x16x3:6:2048 --width 0.25 --batch 32 --experts 4 --hidden 16 --threads 1 \
  --epochs 200 --log-every 4 --seed 9 --session S/live-run > live.log 2>&1 &
LIVE_PID=$!
for ((i = 0; i < 100; i++)); do grep -q 'epoch   1/200' live.log 2>/dev/null && break; sleep 0.2; done
start 120 40 S --filter live-run
check "live: the list shows the run as running" wait_for 'live-run .* [0-9]+/200 +running' 10
le=$(cap | grep -Eo '[0-9]+/200 +running' | grep -Eo '^[0-9]+')
list_epoch_gt() { local i e; for ((i = 0; i < $2 * 10; i++)); do
  e=$(cap | grep -Eo '[0-9]+/200 +running' | grep -Eo '^[0-9]+'); [ -n "$e" ] && [ "$e" -gt "$1" ] && return 0; sleep 0.1; done; return 1; }
check "live: the list row follows the run's epochs (past ${le:-?})" list_epoch_gt "${le:-1000}" 20
keys q
start 120 40 S/live-run
check "live: opens a running session" wait_for ' RUNNING .*cursor: epoch [0-9]+/200' 10
e1=$(cap | grep -Eo 'cursor: epoch [0-9]+' | grep -Eo '[0-9]+$')
epoch_gt() { # epoch_gt N SECONDS: the cursor's epoch goes past N
  local i e
  for ((i = 0; i < $2 * 10; i++)); do
    e=$(cap | grep -Eo 'cursor: epoch [0-9]+' | grep -Eo '[0-9]+$')
    [ -n "$e" ] && [ "$e" -gt "$1" ] && return 0
    sleep 0.1
  done
  return 1
}
check "live: follows new evaluations (epoch grows past ${e1:-?})" epoch_gt "${e1:-1000}" 30
check "live: the cursor note says it follows" wait_for 'following' 2
keys Home
check "live: Home stops following (epoch 1 stays)" wait_for 'cursor: epoch 1/200' 3
sleep 2.5
check "live: still at epoch 1 after new evaluations" wait_for 'cursor: epoch 1/200' 1
kill "$LIVE_PID" 2>/dev/null; wait "$LIVE_PID" 2>/dev/null; LIVE_PID=
keys q
check "live: q exits" wait_for 'BROWSE_EXIT=0' 5

echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
