#!/usr/bin/env bash
# t_schedcol.sh — the browser's schedule column shows the last temperature plan in force (issue
# 32): a run annealed live by a commands file (`at 5 anneal cosine now 0.2`, recorded in the
# session's event log) says `cosine*`, not its launch `const`; one whose temperature was set
# (`set tau 0.5`) after an anneal says `tau=0.5`; an anneal of a backbone layer alone leaves the
# head's column alone; an untouched run keeps its launch schedule. Checked in `browse --list` and
# with `--filter` (which reads the same column).
set -u
BIN=${1:?usage: t_schedcol.sh path/to/moelab}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
pass=0; fail=0
ok()  { echo "PASS  $*"; pass=$((pass + 1)); }
bad() { echo "FAIL  $*"; fail=$((fail + 1)); }
RUN="--headless --dataset synthetic:16x16x3:4:512 --width 0.25 --batch 32 --experts 4 --hidden 16 --epochs 2 --schedule const"
run() { # run NAME [COMMANDS-FILE-LINES...]
  local name=$1; shift
  local extra=()
  if [ $# -gt 0 ]; then printf '%s\n' "$@" > "$T/$name.cmds"; extra=(--commands "$T/$name.cmds"); fi
  if ! "$BIN" train $RUN "${extra[@]}" --session "$T/runs/$name" > "$T/$name.log" 2>&1; then
    bad "training $name failed"; tail -5 "$T/$name.log"
  fi
}
run plain
run annealed 'at 5 anneal cosine now 0.2'
run settau 'at 3 anneal linear now 0.3' 'at 8 set tau 0.5'
run reannealed 'at 3 set tau 0.5' 'at 8 anneal exp now 0.2'
RUN="$RUN --moe-after 3" run layer 'at 3 anneal sigmoid now 0.2 @moe3' 'at 5 anneal exp now 0.3 @head'
RUN="$RUN --moe-after 3" run layeronly 'at 5 anneal sigmoid now 0.2 @moe3'
"$BIN" browse "$T/runs" --list > "$T/list.txt" 2>&1
sched() { awk -v n="$1" '$1 == n {print $5}' "$T/list.txt"; }
check_col() { # check_col NAME WANT
  local got; got=$(sched "$1")
  if [ "$got" = "$2" ]; then ok "$1: schedule column '$got'"; else bad "$1: schedule column '$got', want '$2'"; cat "$T/list.txt"; fi
}
check_col plain const
check_col annealed 'cosine*'
check_col settau 'tau=0.5'
check_col reannealed 'exp*'
check_col layer 'exp*'
check_col layeronly const
"$BIN" browse "$T/runs" --list --filter 'cosine*' > "$T/filter.txt" 2>&1
if grep -q '^annealed ' "$T/filter.txt" && ! grep -q '^plain ' "$T/filter.txt"; then ok "--filter cosine* finds the annealed run only"
else bad "--filter cosine*"; cat "$T/filter.txt"; fi
echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
