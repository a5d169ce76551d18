#!/usr/bin/env bash
# t_mouse.sh — the mouse (issue 32), driven through tmux with SGR (1006) mouse reports typed into
# the pane (tmux's own mouse off, so the bytes reach moelab as a terminal would send them):
#   1. the live screen at 120x40: a click on the temperature panel's title focuses it (the `>`
#      marker moves), a double click on the heatmap zooms it (the other panels go) and another
#      unzooms, the wheel over the log scrolls it back 3 lines ("Log (3 lines back"), wheel down
#      returns; the terminal's mouse modes (tmux's flags) are on while it runs and off after it;
#      at 80x24 a click focuses the log; `--no-mouse`: a click changes nothing, and a resume
#      with `--no-mouse` asks for no reports either;
#   2. `moelab attach`: a click focuses a panel;
#   3. the browser: the wheel moves the list cursor (Enter then opens the second run), a click on
#      a list entry opens that run, a click on the first cell of the status bar's progress bar
#      (the epoch scrubber) moves the cursor to epoch 1; under TERM=xterm-256color (where curses
#      decodes the reports itself) a click opens a run too.
# Every wait polls capture-pane; nothing asserts a time.
set -u
BIN=${1:?usage: t_mouse.sh path/to/moelab}
TMUX_NAME=moelabmouse
TMUX_UTF8=1
RUNPID=
cleanup_more() { [ -n "$RUNPID" ] && kill "$RUNPID" 2>/dev/null; }
. "$(dirname "$0")/tmux_harness.sh"

RUN="--dataset synthetic:16x16x3:4:2048 --width 0.25 --batch 32 --experts 4 --hidden 16 --threads 1 --collapse-warmup 100000000"
# start NAME WxH CMD: a terminal running CMD in $T (the shell stays after it exits)
start() {
  "${TM[@]}" kill-session -t "$1" >/dev/null 2>&1
  "${TM[@]}" new-session -d -x "${2%x*}" -y "${2#*x}" -s "$1" \
    "cd '$T' && env LANG=C.UTF-8 LC_ALL=C.UTF-8 XDG_STATE_HOME=$T/state $3; echo MOELAB_EXIT=\$?; exec sleep 100000"
  "${TM[@]}" set -g mouse off
  S=$1
}
# pos TEXT [N]: "COL ROW" (1-based cells) of the N-th (default 1st) line holding TEXT on the screen
pos() {
  cap | python3 -c '
import sys
text, n = sys.argv[1], int(sys.argv[2])
for row, line in enumerate(sys.stdin.read().split("\n"), 1):
    i = line.find(text)
    if i >= 0:
        n -= 1
        if n == 0:
            print(i + 1, row); break' "$1" "${2:-1}"
}
# click COL ROW / dclick COL ROW / wheel up|down COL ROW: SGR reports (press and release)
click() { typed $'\e[<0;'"$1;$2M"; typed $'\e[<0;'"$1;$2m"; }
dclick() { click "$1" "$2"; click "$1" "$2"; }
wheel() { local b=64; [ "$1" = down ] && b=65; typed $'\e[<'"$b;$2;$3M"; }
focused() { cap | grep -q -- "─ > $1"; }
not_focused() { ! focused "$1"; }
wait_focus() { local i; for ((i = 0; i < 50; i++)); do focused "$1" && return 0; sleep 0.1; done; return 1; }
no_text() { local i; for ((i = 0; i < 30; i++)); do cap | grep -q -- "$1" || return 0; sleep 0.1; done; return 1; }

# ---- 1. the live screen
start L 120x40 "$BIN train $RUN --epochs 400 --session $T/tui"
check "live screen: running" wait_for 'RUNNING .*step [1-9]' 60
keys Space # paused: the log stays where it is
check "live screen: paused" wait_for 'PAUSED' 20
sgr() { "${TM[@]}" display -p -t "$S" '#{mouse_sgr_flag}#{mouse_standard_flag}'; }
check "the live screen asks the terminal for mouse reports in SGR form (tmux: $(sgr))" test "$(sgr)" = 11
check "the curves panel has the focus at first" focused 'Loss'
read -r c r < <(pos 'Temperature')
click "$c" "$r"
check "a click on the temperature panel focuses it" wait_focus 'Temperature'
check "... and the curves panel lost the focus" not_focused 'Loss' 
read -r c r < <(pos 'Class x expert')
dclick "$c" "$r"
check "a double click on the heatmap focuses and zooms it" wait_focus 'Class x expert'
check "zoomed: the temperature panel is gone" no_text 'Temperature  τ'
read -r c r < <(pos 'Class x expert')
dclick "$c" "$r"
check "another double click unzooms" wait_for 'Temperature' 5
for i in 1 2 3 4 5 6 7 8; do typed "set alpha 0.0$i"; keys Enter; done # log lines to scroll through
wait_for 'set alpha 0.08' 20
read -r c r < <(pos 'Log')
wheel up $((c + 2)) $((r + 2))
check "the wheel over the log focuses it and scrolls it back 3 lines" wait_for 'Log \(3 lines back' 5
check "... the log has the focus" focused 'Log'
wheel down $((c + 2)) $((r + 2))
check "wheel down returns to the newest line" no_text 'lines back'
keys q
wait_for 'Quit training\?' 10 && keys y
check "the live screen quits" wait_for 'MOELAB_EXIT=0' 60
check "after it the mouse reports are off again (tmux: $(sgr))" test "$(sgr)" = 00

start M 80x24 "$BIN train $RUN --epochs 400 --session $T/tui80"
check "80x24: running" wait_for 'RUNNING .*step [1-9]' 60
keys Space
read -r c r < <(pos 'Log')
click "$c" "$r"
check "80x24: a click on the log focuses it" wait_focus 'Log'
keys q
wait_for 'Quit training\?' 10 && keys y
wait_for 'MOELAB_EXIT=0' 60

start N 120x40 "$BIN train $RUN --epochs 400 --session $T/nomouse --no-mouse"
check "--no-mouse: running" wait_for 'RUNNING .*step [1-9]' 60
keys Space
read -r c r < <(pos 'Temperature')
click "$c" "$r"
sleep 1
check "--no-mouse: a click does not move the focus" focused 'Loss'
check "--no-mouse: no mouse reports asked for (tmux: $(sgr))" test "$(sgr)" = 00
keys C-u # (the report's bytes went to the command line, as any unknown escape sequence does)
keys q
wait_for 'Quit training\?' 10 && keys y
check "--no-mouse: quits" wait_for 'MOELAB_EXIT=0' 60
start R 120x40 "$BIN train --resume $T/nomouse --no-mouse"
check "--resume DIR --no-mouse: accepted, the resumed screen runs" wait_for 'RUNNING .*step [1-9]' 60
check "--resume DIR --no-mouse: no mouse reports asked for (tmux: $(sgr))" test "$(sgr)" = 00
keys q
wait_for 'Quit training\?' 10 && keys y
check "--resume --no-mouse: quits" wait_for 'MOELAB_EXIT=0' 60
"$BIN" export "$T/nomouse" --csv "$T/nmcsv" >/dev/null 2>&1
check "--no-mouse is not in the session's stored command line (launch-time only)" \
  sh -c "grep -q -- '--epochs' '$T/nmcsv/config.csv' && ! grep -q -- '--no-mouse' '$T/nmcsv/config.csv'"

# ---- 2. attach
(cd "$T" && exec "$BIN" train --headless $RUN --epochs 4000 --session "$T/run" >"$T/run.log" 2>&1) &
RUNPID=$!
for ((i = 0; i < 600; i++)); do "$BIN" ctl "$T/run" status >/dev/null 2>&1 && break; sleep 0.1; done
start A 120x40 "$BIN attach $T/run"
check "attach: attached" wait_for 'attached to ' 30
read -r c r < <(pos 'Expert load')
click "$c" "$r"
check "attach: a click on the load panel focuses it" wait_focus 'Expert load'
keys q
check "attach: q detaches" wait_for 'MOELAB_EXIT=0' 20
"$BIN" ctl "$T/run" quit >/dev/null
wait "$RUNPID"
RUNPID=

# ---- 3. the browser
mkdir -p "$T/runs"
"$BIN" train --headless $RUN --epochs 3 --session "$T/runs/alpha" >/dev/null 2>&1
"$BIN" train --headless $RUN --epochs 3 --session "$T/runs/beta" >/dev/null 2>&1
start B 120x40 "$BIN browse $T/runs --sort name"
check "browser: the list" wait_for 'beta' 20
wheel down 10 4
keys Enter
check "browser: wheel down moves the cursor (Enter opens the second run, beta)" wait_for 'session .*beta' 20
keys Escape
check "browser: back to the list" wait_for 'Enter open' 20
read -r c r < <(pos 'alpha')
click "$c" "$r"
check "browser: a click on a list entry opens it (alpha)" wait_for 'session .*alpha' 20
check "browser: the cursor starts on the newest evaluation (epoch 3)" wait_for 'cursor: epoch 3/3' 10
# the progress bar starts after the first '[' of the status bar's second row
read -r c r < <(cap | python3 -c '
import sys
for row, line in enumerate(sys.stdin.read().split("\n"), 1):
    if "cursor: epoch" in line:
        print(line.find("[") + 2, row); break')
click "$c" "$r"
check "browser: a click on the scrubber's first cell moves the cursor to epoch 1" wait_for 'cursor: epoch 1/3' 10
keys q
keys q
check "browser: quits" wait_for 'MOELAB_EXIT=0' 20
# TERM=xterm-256color: curses knows the SGR report (kmous) and decodes it itself (KEY_MOUSE)
start X 120x40 "env TERM=xterm-256color $BIN browse $T/runs --sort name"
check "browser, TERM=xterm-256color: the list" wait_for 'beta' 20
read -r c r < <(pos 'beta')
click "$c" "$r"
check "browser, TERM=xterm-256color: a click on a list entry opens it (beta)" wait_for 'session .*beta' 20
keys q
keys q
check "browser, TERM=xterm-256color: quits" wait_for 'MOELAB_EXIT=0' 20

echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
