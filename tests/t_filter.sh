#!/usr/bin/env bash
# t_filter.sh — the `/` filters (issue 32), through tmux:
#   1. the browser's session list (three runs: alpha with a linear temperature schedule (the others the default cosine), beta a
#      dense head, gamma seed 7): `/dense` keeps beta only, `/!dense` the two others,
#      `/tau.kind=linear` (a configuration value) alpha only, `/seed=7` gamma only; with `/!dense`
#      `n` moves to the next match (Enter opens gamma) and `N` back (alpha); `--list --filter
#      '!dense'` prints the same two;
#   2. the live screen's log: `/alpha` shows only the lines holding it, with the count in the
#      title; `N` / `n` move the current match; `/!alpha` shows the other lines; `/` alone clears.
# Every wait polls capture-pane; nothing asserts a time.
set -u
BIN=${1:?usage: t_filter.sh path/to/moelab}
TMUX_NAME=moelabfilter
TMUX_UTF8=1
. "$(dirname "$0")/tmux_harness.sh"

RUN="--dataset synthetic:16x16x3:4:1024 --width 0.25 --batch 32 --experts 4 --hidden 16 --threads 1 --collapse-warmup 100000000"
start() {
  "${TM[@]}" kill-session -t "$1" >/dev/null 2>&1
  "${TM[@]}" new-session -d -x "${2%x*}" -y "${2#*x}" -s "$1" \
    "cd '$T' && env LANG=C.UTF-8 LC_ALL=C.UTF-8 XDG_STATE_HOME=$T/state $3; echo MOELAB_EXIT=\$?; exec sleep 100000"
  S=$1
}
gone() { local i; for ((i = 0; i < 30; i++)); do cap | grep -Eq -- "$1" || return 0; sleep 0.1; done; return 1; }
shows() { cap | grep -Eq -- "$1"; }
hides() { ! cap | grep -Eq -- "$1"; }
# filter TEXT: a new filter in the browser (Esc clears the one set, / opens the prompt)
filter() { keys Escape; sleep 0.2; typed "/$1"; keys Enter; }

# ---- 1. the browser
mkdir -p "$T/runs"
"$BIN" train --headless $RUN --epochs 1 --schedule linear --session "$T/runs/alpha" >/dev/null 2>&1
"$BIN" train --headless $RUN --epochs 1 --head dense --session "$T/runs/beta" >/dev/null 2>&1
"$BIN" train --headless $RUN --epochs 1 --seed 7 --session "$T/runs/gamma" >/dev/null 2>&1
start B 120x40 "$BIN browse $T/runs --sort name"
check "browser: the list of three" wait_for 'gamma' 20
filter dense
check "/dense: beta shown" wait_for ' beta ' 5
check "/dense: alpha and gamma hidden" gone ' (alpha|gamma) '
filter '!dense'
check "/!dense: alpha and gamma shown" wait_for ' gamma ' 5
check "/!dense: alpha shown" shows ' alpha '
check "/!dense: beta hidden" gone ' beta '
keys n
keys Enter
check "/!dense, n: the next match is gamma (Enter opens it)" wait_for 'session .*gamma' 10
keys Escape
check "back to the list" wait_for 'Enter open' 10
keys N
keys Enter
check "N: the previous match is alpha (Enter opens it)" wait_for 'session .*alpha' 10
keys Escape
wait_for 'Enter open' 10
filter 'tau.kind=linear'
check "/tau.kind=linear (a configuration value): alpha shown" wait_for ' alpha ' 5
check "/tau.kind=linear: beta and gamma hidden" gone ' (beta|gamma) '
filter 'seed=7'
check "/seed=7: gamma shown" wait_for ' gamma ' 5
check "/seed=7: alpha and beta hidden" gone ' (alpha|beta) '
keys Escape
check "Esc clears the filter: the three again" wait_for ' beta ' 5
keys q
check "browser: quits" wait_for 'MOELAB_EXIT=0' 10
out=$("$BIN" browse "$T/runs" --list --filter '!dense')
listed() { grep -q '^alpha ' <<<"$out" && grep -q '^gamma ' <<<"$out" && ! grep -q '^beta ' <<<"$out"; }
check "--list --filter '!dense': alpha and gamma, not beta" listed

# ---- 2. the live screen's log
start L 120x40 "$BIN train $RUN --epochs 400 --session $T/tui"
check "live screen: running" wait_for 'RUNNING .*step [1-9]' 60
keys Space
check "live screen: paused" wait_for 'PAUSED' 20
for i in 1 2 3; do typed "set alpha 0.0$i"; keys Enter; done
typed "set lr 0.01"
keys Enter
check "the commands are in the log" wait_for '\[step [0-9]+\] set lr 0.01' 20 # the log's line, not the typed text
typed "/alpha"
keys Enter
check "/alpha: the log's title says the filter and its 3 matches" wait_for 'Log /alpha: 3 matches, match 3/3' 5
check "/alpha: the set lr line is hidden" gone 'set lr 0.01'
check "/alpha: the set alpha lines are shown" shows 'set alpha 0.01'
keys N
check "N: the previous match (2/3)" wait_for 'match 2/3' 5
keys n
check "n: the next match (3/3)" wait_for 'match 3/3' 5
typed "/!alpha"
keys Enter
check "/!alpha: the title says the inverted filter" wait_for 'Log /!alpha: [0-9]+ lines without it' 5
check "/!alpha: set lr shown" wait_for 'set lr 0.01' 5
check "/!alpha: no set alpha line" hides 'set alpha 0.0'
typed "/"
keys Enter
check "/ alone clears the filter" gone 'Log /'
check "cleared: the set alpha lines are back" wait_for 'set alpha 0.03' 5
keys q
wait_for 'Quit training\?' 10 && keys y
check "the live screen quits" wait_for 'MOELAB_EXIT=0' 60

echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
