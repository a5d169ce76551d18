#!/usr/bin/env bash
# t_tui.sh — the live screen end to end, driven through tmux (own server socket, -L moelabtest):
# the status bar and every panel appear with real numbers; pause/resume stop and restart the step
# counter; `set tau 0.3` lands in the log with its step and marks an override in the temperature
# panel; `anneal`, a bad command, tab completion, the help overlay (Esc / ? / q close it); resize
# to 70x20 ("too small"), 80x24 and back; `q` + `y` exits and gives the shell its terminal back;
# the history file; Ctrl-C and SIGTERM; a dense head; a NaN loss pausing the run; TERM=xterm
# (8 colours, no 256-colour codes), NO_COLOR=1 (no colour codes at all) and LANG=C (ASCII: no
# braille). Every wait polls capture-pane with a timeout. Prints PASS/FAIL lines and
# "N passed, M failed"; exits 0 only if none failed (or, with a message, if tmux is missing).
set -u
BIN=${1:?usage: t_tui.sh path/to/moelab}
# wait_for waits at least 10 s whatever its SECONDS says (a pattern that shows returns at once;
# under ctest -j2 next to heavy tests a 2-3 s limit failed now and then)
TMUX_NAME=moelabtest S=tui WAIT_FLOOR=10
. "$(dirname "$0")/tmux_harness.sh"
has()   { LC_ALL=C grep -Eq -- "$1" "$2"; }    # has REGEX FILE
lacks() { ! LC_ALL=C grep -Eq -- "$1" "$2"; }  # lacks REGEX FILE

ESC=$'\e'
BRAILLE=$'\xe2[\xa0-\xa3]'                              # UTF-8 lead bytes of U+2800..U+28FF
COLOR8="$ESC\\[([0-9;]*;)?(3[0-7]|4[0-7])(;[0-9;]*)?m"   # SGR 30-37 / 40-47
COLOR256="$ESC\\[([0-9;]*;)?(38|48);5;[0-9]+"            # SGR 38;5;N / 48;5;N

RUN="--dataset synthetic:16x16x3:4:2048 --width 0.25 --batch 32 --experts 4 --hidden 16 --epochs 50"

cap_e() { "${TM[@]}" capture-pane -p -e -t "$S" 2>/dev/null; }
# wait_gone PATTERN [SECONDS]
wait_gone() {
  local pat=$1 limit=${2:-5} i
  for ((i = 0; i < limit * 10; i++)); do
    cap | grep -Eq -- "$pat" || return 0
    sleep 0.1
  done
  return 1
}
status_step() { cap | sed -n 2p | grep -Eo 'step [0-9]+' | head -1 | grep -Eo '[0-9]+'; }
# start W H ENV... : moelab in a fresh session (extra options in $EXTRA); the shell stays after it exits
start() {
  local w=$1 h=$2; shift 2
  "${TM[@]}" kill-session -t "$S" >/dev/null 2>&1
  "${TM[@]}" new-session -d -x "$w" -y "$h" -s "$S" \
    "cd '$T' && env XDG_STATE_HOME=$T/state $* $BIN train $RUN ${EXTRA:-}; echo MOELAB_EXIT=\$?; exec env PS1='shell\$ ' bash --norc --noprofile -i"
}
# quits from any state: q, then y if asked
quit_tui() {
  keys q
  if wait_for 'Quit training\?' 3; then keys y; fi
  wait_for 'MOELAB_EXIT=' 15
}

# ---- 1. the main session at 120x40 (UTF-8 locale: C.UTF-8 ships with every Debian libc)
UTF8="LANG=C.UTF-8 LC_ALL=C.UTF-8"
start 120 40 TERM=xterm-256color $UTF8
if ! wait_for '(RUNNING|PAUSED|FINISHED) +epoch [0-9]+/50 +step [0-9]+/3200' 30; then
  bad "status bar did not appear; screen:"; cap | head -20
  echo "$pass passed, $((fail + 1)) failed"; exit 1
fi
ok "status bar with epoch/step"
check "panels show real numbers after the first evaluation" wait_for 'I\(class;expert\) [0-9.]+ nats' 20
keys Space
check "space pauses (status PAUSED)" wait_for '^ PAUSED ' 5
for title in 'Loss & accuracy' 'Temperature' 'Class x expert' 'Expert load' 'Routing' 'Log'; do
  check "panel '$title' present" wait_for "$title" 2
done
check "status bar shows dataset and model" wait_for 'synthetic 16x16x3.*moe E=4 k=2 h=16' 2
check "status bar shows images/s and ETA" wait_for 'img/s +ETA' 2
check "routing scalars have values" wait_for 'load H +[0-9.]+' 2
check "heatmap rows are labelled with class names" wait_for 'class0 ' 2
cap_e > "$T/main.ansi"
check "256-colour codes on xterm-256color" has "$COLOR256" "$T/main.ansi"
check "braille curves with a UTF-8 locale" has "$BRAILLE" "$T/main.ansi"
s1=$(status_step); sleep 1.0; s2=$(status_step)
check "paused: the step counter stands still ($s1 -> $s2)" test -n "$s1" -a "$s1" = "$s2"
keys Space
check "space resumes (status RUNNING)" wait_for '^ RUNNING ' 5
sleep 0.5; s3=$(status_step)
check "resumed: the step counter moves ($s2 -> $s3)" test -n "$s3" -a "${s3:-0}" -gt "${s2:-0}"
keys Space
wait_for '^ PAUSED ' 5
s4=$(status_step)
typed 'step 5'; keys Enter
check "step 5 while paused runs exactly 5 steps" wait_for "^ PAUSED +epoch [0-9]+/50 +step $((s4 + 5))/3200" 5
typed 'set tau 0.3'; keys Enter
check "set tau 0.3 lands in the log with its step" wait_for '\[step [0-9]+\] set tau 0\.3' 5
check "temperature panel marks the override" wait_for 'OVERRIDE' 3
typed 'anneal exp now 0.05'; keys Enter
check "anneal lands in the log" wait_for '\[step [0-9]+\] anneal exp now 0\.05' 5
check "temperature panel shows the new schedule" wait_for 'annealed exp @[0-9]+' 3
typed 'frobnicate 3'; keys Enter
check "a bad command gives an error line" wait_for "error: unknown command 'frobnicate'" 3
typed 'set tau -1'; keys Enter
check "a bad value gives an error line" wait_for 'error: set tau: must be > 0' 3
typed 'set '; keys Tab
check "tab completion lists parameter names (in its popup, t_complete)" wait_for '[0-9]+ completions' 3
check "  ... alpha to tau" wait_for 'alpha +beta +bias-rate +cf +lr +noise +tau' 3
keys C-u
typed 'anneal cos'; keys Tab
check "tab completion completes schedule names" wait_for 'moelab> anneal cosine' 3
keys C-u
keys '?'
check "? shows the help overlay" wait_for 'Help: keys and commands' 3
keys Escape
check "Esc closes the help" wait_gone 'Help: keys and commands' 3
keys '?'; wait_for 'Help: keys and commands' 3; keys '?'
check "? closes the help" wait_gone 'Help: keys and commands' 3
keys '?'; wait_for 'Help: keys and commands' 3; keys q
check "q closes the help (without quitting)" wait_gone 'Help: keys and commands' 3
check "  ... and does not ask to quit" wait_gone 'Quit training\?' 1
keys Tab
check "tab moves the focus" wait_for '> Temperature' 3
keys z
check "z zooms the focused panel" wait_gone 'Class x expert' 3
keys z
check "z again restores the layout" wait_for 'Class x expert' 3
"${TM[@]}" resize-window -t "$S" -x 70 -y 20
check "70x20: terminal too small notice" wait_for 'terminal too small \(need 80x24, have 70x20\)' 5
"${TM[@]}" resize-window -t "$S" -x 80 -y 24
check "80x24: panels again" wait_for 'Expert load' 5
check "80x24: no notice" wait_gone 'terminal too small' 2
"${TM[@]}" resize-window -t "$S" -x 120 -y 40
check "120x40: panels again" wait_for 'Class x expert' 5
check "120x40: status bar intact" wait_for '^ PAUSED +epoch' 3
keys q
check "q asks to confirm while training" wait_for 'Quit training\? .*\(y/n\)' 3
keys n
check "n cancels" wait_gone 'Quit training\?' 3
keys q
wait_for 'Quit training\?' 3
keys y
check "q + y exits (exit status 0)" wait_for 'MOELAB_EXIT=0' 15
check "a final summary is printed" wait_for 'moelab: training interrupted at step [0-9]+/3200' 2
typed 'echo READY-$((6*7))'; keys Enter
check "the shell has the terminal back" wait_for '^shell\$ echo READY-\$\(\(6\*7\)\)' 3
check "  ... and runs commands" wait_for '^READY-42' 3
check "history saved under XDG_STATE_HOME" grep -qx 'set tau 0.3' "$T/state/moelab/history"

# ---- 2. Ctrl-C: clean stop, terminal restored, exit status 130
start 100 30 TERM=xterm-256color
if wait_for '(RUNNING|PAUSED) +epoch' 30; then
  keys C-c
  check "Ctrl-C stops the run (exit status 130)" wait_for 'MOELAB_EXIT=130' 15
  check "Ctrl-C: summary says interrupted" wait_for 'moelab: training interrupted' 2
else bad "Ctrl-C run did not start"; fi

# ---- 2b. SIGTERM: the same clean stop, exit status 143
start 100 30 TERM=xterm-256color
if wait_for '(RUNNING|PAUSED) +epoch' 30; then
  spid=$("${TM[@]}" display -p -t "$S" '#{pane_pid}')
  mpid=$(pgrep -P "$spid" -f "$BIN" | head -1)
  [ -n "$mpid" ] && kill -TERM "$mpid"
  check "SIGTERM stops the run (exit status 143)" wait_for 'MOELAB_EXIT=143' 15
else bad "SIGTERM run did not start"; fi

# ---- 2c. a dense head: curves, status, log and a note instead of the routing panels
EXTRA="--head dense" start 100 30 TERM=xterm-256color
if wait_for '(RUNNING|PAUSED|FINISHED) +epoch' 30; then
  keys Space
  check "dense head: note instead of routing panels" wait_for 'Dense head: no router' 5
  check "dense head: training scalars" wait_for 'Training \(dense head\)' 2
  check "dense head: no temperature or load panels" wait_gone 'Temperature|Expert load|Class x expert' 2
  typed 'set tau 0.3'; keys Enter
  check "dense head: set tau is refused with a clear error" wait_for 'error: set tau 0\.3: set: the dense head has no routing parameters' 5
else bad "dense run did not start"; fi
check "dense head: q exits" quit_tui

# ---- 3. a NaN loss pauses the run and says so
"${TM[@]}" kill-session -t "$S" >/dev/null 2>&1
"${TM[@]}" new-session -d -x 100 -y 30 -s "$S" \
  "cd '$T' && env XDG_STATE_HOME=$T/state TERM=xterm-256color $BIN train $RUN --lr 50; echo MOELAB_EXIT=\$?; exec bash --norc --noprofile -i"
check "NaN loss: status PAUSED (NaN)" wait_for 'PAUSED \(NaN\)' 30
check "NaN loss: banner and log explain it" wait_for 'NaN/inf loss at step [0-9]+: training paused' 2
check "NaN loss: q + y still exits cleanly" quit_tui

# ---- 4. TERM=xterm: 8 colours, no 256-colour codes
start 120 40 TERM=xterm
if wait_for '(RUNNING|PAUSED|FINISHED) +epoch' 30 && wait_for 'load H +[0-9.]+' 10; then
  cap_e > "$T/xterm.ansi"
  check "TERM=xterm: colours used" has "$COLOR8" "$T/xterm.ansi"
  check "TERM=xterm: no 256-colour codes" lacks "$COLOR256" "$T/xterm.ansi"
  check "TERM=xterm: panels present" wait_for 'Temperature' 1
else bad "TERM=xterm run did not start"; fi
check "TERM=xterm: q exits" quit_tui

# ---- 5. NO_COLOR=1: attributes only, no colour codes at all
start 120 40 TERM=xterm-256color NO_COLOR=1
if wait_for '(RUNNING|PAUSED|FINISHED) +epoch' 30 && wait_for 'load H +[0-9.]+' 10; then
  cap_e > "$T/nocolor.ansi"
  check "NO_COLOR: no 8-colour codes" lacks "$COLOR8" "$T/nocolor.ansi"
  check "NO_COLOR: no 256-colour codes" lacks "$COLOR256" "$T/nocolor.ansi"
  check "NO_COLOR: attributes still mark things (bold/reverse)" has "$ESC\\[([0-9;]*;)?(1|7)(;[0-9;]*)?m" "$T/nocolor.ansi"
  check "NO_COLOR: panels present" wait_for 'Expert load' 1
else bad "NO_COLOR run did not start"; fi
check "NO_COLOR: q exits" quit_tui

# ---- 6. LANG=C: ASCII only (no braille, no block glyphs)
# (no alarm judgement in this run: its events would push the history line out of the log panel)
EXTRA="--collapse-warmup 1000000" start 120 40 TERM=xterm-256color LANG=C LC_ALL=C XDG_STATE_HOME=/proc/moelab-no-such-dir
if wait_for '(RUNNING|PAUSED|FINISHED) +epoch' 30 && wait_for 'load H +[0-9.]+' 10; then
  cap > "$T/ascii.txt"
  check "LANG=C: no braille characters" lacks "$BRAILLE" "$T/ascii.txt"
  check "LANG=C: plain ASCII screen" lacks '[^ -~]' "$T/ascii.txt"
  check "LANG=C: ASCII frames and curves" grep -q '^+- ' "$T/ascii.txt"
  check "unwritable history directory: only a log line" wait_for 'history: cannot create the directory of /proc/moelab-no-such-dir' 10
else bad "LANG=C run did not start"; fi
check "LANG=C: q exits" quit_tui

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
