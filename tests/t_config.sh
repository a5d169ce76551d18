#!/usr/bin/env bash
# t_config.sh — the config file (issue 32 item 4), through tmux: with no file the live screen is
# the dark theme; `theme = light` changes the colour codes on the screen (capture-pane -e) and
# `hide = log` takes the Log panel away; high-contrast has its own codes; NO_COLOR still wins over
# a theme; a bad line is reported with FILE:LINE in the Log panel and the rest of the file
# applies; `moelab config --init` writes a commented default that parses clean, refuses to
# overwrite without --force; `moelab config` shows the settings and exits 1 on a bad file.
set -u
BIN=${1:?usage: t_config.sh path/to/moelab}
TMUX_NAME=moelabconfig S=cfg WAIT_FLOOR=10 TMUX_UTF8=1
. "$(dirname "$0")/tmux_harness.sh"
ESC=$'\e'
RUN="--dataset synthetic:16x16x3:4:2048 --width 0.25 --batch 32 --experts 4 --hidden 16 --epochs 50"
export XDG_CONFIG_HOME="$T/xdg"
CFG="$XDG_CONFIG_HOME/moelab/config"
cap_e() { "${TM[@]}" capture-pane -p -e -t "$S" 2>/dev/null; }
# live NAME ENV... : the live screen at 120x40 in xterm-256color, paused, its screen (with escape
# codes) into $T/NAME.ansi and as text into $T/NAME.txt, then quit
live() {
  local name=$1; shift
  "${TM[@]}" kill-session -t "$S" >/dev/null 2>&1
  "${TM[@]}" new-session -d -x 120 -y 40 -s "$S" \
    "cd '$T' && env XDG_CONFIG_HOME='$XDG_CONFIG_HOME' XDG_STATE_HOME='$T/state' TERM=xterm-256color LANG=C.UTF-8 LC_ALL=C.UTF-8 $* $BIN train $RUN 2>'$T/$name.err'; echo MOELAB_EXIT=\$?; sleep 100"
  if ! wait_for '(RUNNING|PAUSED) +epoch' 30; then bad "$name: the live screen did not start"; cap | head; return; fi
  keys Space
  wait_for '^ PAUSED ' 10
  sleep 0.5
  cap_e > "$T/$name.ansi"
  cap > "$T/$name.txt"
  keys q; wait_for 'Quit training\?' 5 && keys y
  wait_for 'MOELAB_EXIT=' 20
}
has()   { LC_ALL=C grep -Eq -- "$1" "$2"; }
lacks() { ! LC_ALL=C grep -Eq -- "$1" "$2"; }
DARK_TITLE="$ESC\\[([0-9;]*;)?38;5;81m"   # dark: panel titles in colour 81
LIGHT_TITLE="$ESC\\[([0-9;]*;)?38;5;25m"  # light: in 25 (dark blue)
HC_STATUS="$ESC\\[([0-9;]*;)?48;5;231m"   # high-contrast: the status bar black on white
ANY_COLOR="$ESC\\[([0-9;]*;)?(3[0-7]|4[0-7]|38;5|48;5)(;[0-9;]*)?m"   # SGR 30-37, 40-47, 256 colours

# ---- 1. no config file: the defaults
live none
check "no file: dark titles (38;5;81)" has "$DARK_TITLE" "$T/none.ansi"
check "no file: the Log panel is there" has '(q|─) Log ' "$T/none.txt"
check "no file: the Temperature panel is there" has '(q|─) Temperature' "$T/none.txt"
check "no file: nothing on stderr about a config" test ! -s "$T/none.err"

# ---- 2. theme = light, hide = log
mkdir -p "$(dirname "$CFG")"
printf '# mine\ntheme = light\nhide = log   # no log\n' > "$CFG"
live light
check "theme = light: light titles (38;5;25)" has "$LIGHT_TITLE" "$T/light.ansi"
check "theme = light: no dark title colour" lacks "$DARK_TITLE" "$T/light.ansi"
check "hide = log: no Log panel" lacks '(q|─) Log ' "$T/light.txt"
check "hide = log: the other panels are there" has 'Loss & accuracy' "$T/light.txt"
check "hide = log: the panels take its rows (their bottom border on row 39, over the command line)" \
  bash -c "sed -n 39p '$T/light.txt' | grep -Eq '^(mq|└)'"

# ---- 3. high-contrast
printf 'theme = high-contrast\n' > "$CFG"
live hc
check "theme = high-contrast: status bar on white (48;5;231)" has "$HC_STATUS" "$T/hc.ansi"
check "theme = high-contrast: not the light titles" lacks "$LIGHT_TITLE" "$T/hc.ansi"

# ---- 4. NO_COLOR wins over the theme
printf 'theme = light\n' > "$CFG"
live nocolor NO_COLOR=1
check "NO_COLOR=1 with theme = light: no colour codes at all" lacks "$ANY_COLOR" "$T/nocolor.ansi"
check "NO_COLOR=1: the screen is there" has 'Loss & accuracy' "$T/nocolor.txt"

# ---- 5. a bad line: reported with FILE:LINE, the rest applies
printf 'theme = light\ncolour = red\nhide = temperature\n' > "$CFG"
live badline
check "a bad line: FILE:LINE in the Log panel" has "config .*config:2: unknown key 'colour'" "$T/badline.txt"
check "a bad line: also on stderr" has "moelab train: config .*/moelab/config:2: unknown key 'colour'" "$T/badline.err"
check "a bad line: the lines after it apply (no temperature panel)" lacks '(q|─) Temperature' "$T/badline.txt"
check "a bad line: the lines before it apply (light)" has "$LIGHT_TITLE" "$T/badline.ansi"

# ---- 6. moelab config
rm -f "$CFG"
"$BIN" config > "$T/show0.txt" 2>&1; rc=$?
check "config without a file: exit 0, the defaults" bash -c "[ $rc = 0 ] && grep -q '^theme = dark' '$T/show0.txt' && grep -q 'none: the defaults' '$T/show0.txt'"
"$BIN" config --init > "$T/init.txt" 2>&1; rc=$?
check "config --init writes the file (exit $rc)" bash -c "[ $rc = 0 ] && [ -s '$CFG' ]"
check "  ... commented, every key" bash -c "[ \$(grep -c '^# ' '$CFG') -ge 10 ] && for k in theme mouse hide log_rows top_share smoothing refresh; do grep -q \"^\$k = \" '$CFG' || exit 1; done"
"$BIN" config > "$T/show1.txt" 2>&1; rc=$?
check "  ... and parses clean (exit $rc)" bash -c "[ $rc = 0 ] && ! grep -q 'config:' '$T/show1.txt'"
echo 'theme = light' >> "$CFG"
"$BIN" config --init > "$T/init2.txt" 2>&1; rc=$?
check "config --init again: refused, exit 1, file kept" bash -c "[ $rc = 1 ] && grep -q 'exists' '$T/init2.txt' && tail -1 '$CFG' | grep -q light"
"$BIN" config --init --force > "$T/init3.txt" 2>&1; rc=$?
check "config --init --force: overwritten" bash -c "[ $rc = 0 ] && ! tail -1 '$CFG' | grep -q 'theme = light'"
printf 'theme = sepia\nrefresh = 0.3\n' > "$CFG"
"$BIN" config > "$T/show2.txt" 2>&1; rc=$?
check "config on a bad file: exit 1, FILE:LINE, the good line in force" \
  bash -c "[ $rc = 1 ] && grep -q \"config:1: theme 'sepia'\" '$T/show2.txt' && grep -q '^refresh = 0.3' '$T/show2.txt'"
"$BIN" config --force > /dev/null 2>&1; rc=$?
check "config --force without --init: usage error (exit $rc)" test "$rc" = 2
check "config --path" test "$("$BIN" config --path)" = "$CFG"

# ---- 7. not a regular file at the config path (issue 41 item 4): a FIFO with no writer hung
#      `config`, `browse` and the live screen in open(); now refused at once, the defaults apply
rm -f "$CFG"; mkfifo "$CFG"
timeout 10 "$BIN" config > "$T/fifo.txt" 2>&1; rc=$?
check "config on a FIFO: exit 1 at once (not a hang: rc $rc)" test "$rc" = 1
check "config on a FIFO: named as not a regular file" grep -q 'config: not a regular file (a FIFO)' "$T/fifo.txt"
check "config on a FIFO: the defaults" grep -q '^theme = dark' "$T/fifo.txt"
live fifo
check "live screen with a FIFO config: it starts, the reason on stderr" \
  has "moelab train: config .*/moelab/config: not a regular file \(a FIFO\)" "$T/fifo.err"
mkdir -p "$T/nosessions"
"${TM[@]}" kill-session -t "$S" >/dev/null 2>&1
"${TM[@]}" new-session -d -x 120 -y 40 -s "$S" \
  "cd '$T' && env XDG_CONFIG_HOME='$XDG_CONFIG_HOME' TERM=xterm-256color $BIN browse '$T/nosessions' 2>'$T/fifob.err'; echo MOELAB_EXIT=\$?; sleep 100"
if wait_for 'q quit|No sessions|no sessions|0 sessions' 15; then ok "browse with a FIFO config: the screen opens"; else bad "browse with a FIFO config: no screen"; cap | head -5; fi
keys q; wait_for 'MOELAB_EXIT=' 10
check "browse with a FIFO config: the reason on stderr" has 'not a regular file \(a FIFO\)' "$T/fifob.err"
rm -f "$CFG"; mkdir "$CFG"
timeout 10 "$BIN" config > "$T/dir.txt" 2>&1; rc=$?
check "config on a directory: exit 1 naming it (rc $rc)" \
  bash -c "[ $rc = 1 ] && grep -q 'config: not a regular file (a directory)' '$T/dir.txt'"
rmdir "$CFG"
check "without XDG_CONFIG_HOME: ~/.config/moelab/config" test "$(env -u XDG_CONFIG_HOME HOME=/h "$BIN" config --path)" = /h/.config/moelab/config

echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
