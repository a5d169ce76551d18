#!/usr/bin/env bash
# t_oldsessions.sh — a session of every earlier format works with this moelab (issue 41, item 3):
# each fixture of tests/fixtures (a session written by an older moelab, interrupted at step 12 of
# 16 with ckpt-12.h5; tests/README.md says which commit wrote it and how to make it again) is
# checked to be the format it stands for (format_version, and the optional columns its writer did
# not have are absent), then listed by `browse --list`, plotted (the browser's data loader),
# exported as CSV, resumed to the end (exit 0; the appended live.h5 keeps its format_version and
# does not get the columns it lacked; the resumed session plots and exports to step 16), its
# weights equal an uninterrupted run of its command line by this moelab when this build reproduces
# the fixture's step-12 weights (a Release build; else only the resume is checked), and replayed
# (MATCH when the arithmetic reproduces, else the replay still runs to the end).
#   tests/t_oldsessions.sh path/to/moelab
set -u
BIN=${1:?usage: t_oldsessions.sh path/to/moelab}
BIN=$(cd "$(dirname "$BIN")" && pwd)/$(basename "$BIN")
FIXD=$(cd "$(dirname "$0")" && pwd)/fixtures
T=$(mktemp -d)
[ -n "${KEEP:-}" ] || trap 'rm -rf "$T"' EXIT
cd "$T" || exit 1
pass=0; fail=0
ok()  { echo "PASS  $*"; pass=$((pass + 1)); }
bad() { echo "FAIL  $*"; fail=$((fail + 1)); }
check() { local what=$1; shift; if "$@"; then ok "$what"; else bad "$what"; fi; }
fv() { h5dump -a /format_version "$1" 2>/dev/null | sed -n 's/^ *(0): *//p' | head -1; }
has() { h5ls "$1$2" > /dev/null 2>&1; } # has FILE /PATH: the dataset or group exists
lacks_all() { local f=$1; shift; for p in "$@"; do if has "$f" "$p"; then return 1; fi; done; return 0; }
w() { [ -f "$1/ckpt-$2.h5" ] && h5dump -A 0 -g /weights -g /optimizer -g /rng -g /schedule "$1/ckpt-$2.h5" | tail -n +2 | sha256sum | cut -c1-16; }
same() { [ -n "$1" ] && [ "$1" = "$2" ]; }
last_step() { tail -1 "$1" | cut -d, -f1; }
rows() { wc -l < "$1"; }

# fixture  format_version  what its writer did not have (absent in live.h5)  per-layer CSV files
FIXTURES="
v1-moe       1 /layers:/steps/alarm:/steps/gate_margin:/evals/drop_class_expert                                    0
v2-layers    2 /steps/alarm:/layers/head/steps/alarm:/layers/head/steps/gate_margin:/evals/drop_class_expert:/layers/head/evals/drop_class_expert 1
v3-nomargin  3 /steps/gate_margin:/layers/head/steps/gate_margin                                                   1
"
while read -r F V ABSENT LAYERS; do
  [ -n "$F" ] || continue
  if [ ! -f "$FIXD/$F/live.h5" ]; then bad "$F: fixture missing ($FIXD/$F)"; continue; fi
  IFS=: read -r -a absent <<< "$ABSENT"
  mkdir -p "runs-$F" && cp -r "$FIXD/$F" "runs-$F/$F"
  S=runs-$F/$F
  check "$F: format_version $V (it is $(fv "$S/live.h5")), checkpoint too" \
    bash -c "[ '$(fv "$S/live.h5")' = $V ] && [ '$(fv "$S/ckpt-12.h5")' = $V ]"
  check "$F: lacks what its writer did not have (${absent[*]})" lacks_all "$S/live.h5" "${absent[@]}"

  "$BIN" browse "runs-$F" --list > "$F-list.txt" 2>&1; rc=$?
  check "$F: browse --list shows it, interrupted (exit $rc)" \
    bash -c "[ $rc = 0 ] && grep -Eq '^$F .* interrupted' '$F-list.txt' && ! grep -qi 'damaged\|missing' '$F-list.txt'"
  "$BIN" plot "$S" --out "$F-fig" > "$F-plot.txt" 2>&1; rc=$?
  check "$F: plot loads its history ($(ls "$F-fig" 2>/dev/null | wc -l) figures; exit $rc: $(tail -1 "$F-plot.txt"))" \
    bash -c "[ $rc = 0 ] && [ -n \"\$(ls '$F-fig' 2>/dev/null)\" ]"
  "$BIN" export "$S" --csv "$F-csv" > "$F-export.txt" 2>&1; rc=$?
  nl=$(ls "$F-csv"/layer_* 2>/dev/null | wc -l)
  lastfix=$(h5dump -d /steps/step -A 0 "$S/live.h5" | grep -o '[0-9]*$' | tail -1)
  check "$F: export: 1 evaluation, steps to $lastfix, per-layer files $nl (exit $rc: $(tail -1 "$F-export.txt"))" \
    bash -c "[ $rc = 0 ] && [ '$(rows "$F-csv/evals.csv" 2>/dev/null)' = 2 ] && [ '$(last_step "$F-csv/steps.csv" 2>/dev/null)' = '$lastfix' ] &&
             { [ $LAYERS = 1 -a $nl -gt 0 ] || [ $LAYERS = 0 -a $nl = 0 ]; }"

  # resume to the end
  R=R-$F
  cp -r "$FIXD/$F" "$R"
  "$BIN" train --resume "$R" --headless > "$R.log" 2>&1; rc=$?
  check "$F: resumes to the end (exit $rc: $(tail -1 "$R.log"))" \
    bash -c "[ $rc = 0 ] && grep -q 'finished at step 16' '$R.log' && [ -f '$R/ckpt-16.h5' ]"
  check "$F: the appended live.h5 stays format $V ($(fv "$R/live.h5"))" test "$(fv "$R/live.h5")" = "$V"
  check "$F: ... and lacks what it lacked" lacks_all "$R/live.h5" "${absent[@]}"
  "$BIN" plot "$R" --out "$R-fig" > "$R-plot.txt" 2>&1; rc=$?
  "$BIN" export "$R" --csv "$R-csv" > "$R-export.txt" 2>&1; rc2=$?
  check "$F: the resumed session plots and exports (2 evaluations, steps to $(last_step "$R-csv/steps.csv" 2>/dev/null); exit $rc, $rc2)" \
    bash -c "[ $rc = 0 ] && [ $rc2 = 0 ] && [ '$(rows "$R-csv/evals.csv" 2>/dev/null)' = 3 ] && [ '$(last_step "$R-csv/steps.csv" 2>/dev/null)' -ge '$lastfix' ]"

  # an uninterrupted run of its command line (its commands.txt, as stored in /run@commands, without the quit at 12)
  line=$(h5dump -a /run/command_line "$FIXD/$F/live.h5" | sed -n 's/^ *(0): "\(.*\)"$/\1/p')
  grep -v quit "$FIXD/$F/commands.txt" > "$F.cmd"
  args=$(echo "$line" | sed -e 's/^train //' -e 's/--session [^ ]*/--session U-'"$F"'/' -e 's|--commands [^ ]*|--commands '"$F.cmd"'|' \
  -e 's/--keep [^ ]*/--keep 0 --ckpt-steps 12/')
  # shellcheck disable=SC2086
  "$BIN" train $args > "U-$F.log" 2>&1
  "$BIN" export "U-$F" --csv "U-$F-csv" > /dev/null 2>&1
  check "$F: the resumed session's step rows are the uninterrupted run's ($(cut -d, -f1 "$R-csv/steps.csv" 2>/dev/null | tail -n +2 | tr '\n' ' '))" \
    bash -c "[ -s '$R-csv/steps.csv' ] && cmp -s <(cut -d, -f1 '$R-csv/steps.csv') <(cut -d, -f1 'U-$F-csv/steps.csv')"
  "$BIN" replay "$R" > "$R-replay.log" 2>&1; rc=$?
  if same "$(w "U-$F" 12)" "$(w "$FIXD/$F" 12)"; then
    check "$F: resumed weights, optimiser, RNG and schedule equal the uninterrupted run's ($(w "U-$F" 16))" \
      same "$(w "$R" 16)" "$(w "U-$F" 16)"
    check "$F: its replay MATCHes (exit $rc)" bash -c "[ $rc = 0 ] && grep -q 'final metrics MATCH' '$R-replay.log'"
  else
    echo "INFO $F: this build's step-12 weights differ from the fixture's (another build type or arithmetic): weights not compared"
    check "$F: its replay runs to the end (exit $rc)" bash -c "[ $rc -le 1 ] && grep -q 'replayed: step [0-9]*, 2 evals' '$R-replay.log'"
  fi
done <<< "$FIXTURES"

echo "t_oldsessions: $pass passed, $fail failed"
[ $fail = 0 ]
