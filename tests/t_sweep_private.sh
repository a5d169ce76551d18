#!/usr/bin/env bash
# t_sweep_private.sh — `moelab sweep --private` (issue 41 item 7): under umask 022 everything the
# sweep writes is owner-only, not only its runs' session folders: the sweep folder and logs/ are
# 0700, sweep.h5, summary.csv, runs.csv, sweep.args, sweep.plan and every logs/NAME.log 0600, each
# run's folder 0700 and its files 0600; a sweep folder and logs/ that exist already are made 0700
# and a log left 0644 0600; without --private the umask decides (0755 / 0644), as before.
set -u
BIN=${1:?usage: t_sweep_private.sh path/to/moelab}
BIN=$(cd "$(dirname "$BIN")" && pwd)/$(basename "$BIN")
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
cd "$T" || exit 1
pass=0; fail=0
ok()  { echo "PASS  $*"; pass=$((pass + 1)); }
bad() { echo "FAIL  $*"; fail=$((fail + 1)); }
check() { local what=$1; shift; if "$@"; then ok "$what"; else bad "$what"; fi; }
mode() { stat -c %a "$1" 2>/dev/null || echo missing; }
# every path under DIR (DIR too) that others can read, write or enter: "PATH MODE" lines
open_to_others() { find "$1" \( -perm /o=rwx -o -perm /g=rwx \) -printf '%p %m\n' 2>/dev/null; }
none_open() { [ -d "$1" ] && [ -z "$(open_to_others "$1")" ]; }

umask 022
SW=(--dataset synthetic:16x16x3:4:256 --width 0.25 --batch 32 --experts 4 --hidden 16 --epochs 1 --threads 1
    --vary head=moe,dense --seeds 1)

# 1. a private sweep
"$BIN" sweep "${SW[@]}" --private --out P > P.out 2>&1; rc=$?
check "sweep --private exits 0 (rc $rc)" test "$rc" = 0
check "the sweep folder is 0700 ($(mode P))" test "$(mode P)" = 700
check "logs/ is 0700 ($(mode P/logs))" test "$(mode P/logs)" = 700
for f in sweep.h5 summary.csv runs.csv sweep.args sweep.plan; do
  check "$f is 0600 ($(mode "P/$f"))" test "$(mode "P/$f")" = 600
done
check "every logs/NAME.log is 0600 ($(cd P/logs 2>/dev/null && stat -c '%n %a' ./*.log | tr '\n' ' '))" \
  bash -c "ls P/logs/*.log > /dev/null 2>&1 && [ -z \"\$(find P/logs -name '*.log' ! -perm 600)\" ]"
check "a run's session folder is 0700 ($(mode P/head=moe,seed=1))" test "$(mode P/head=moe,seed=1)" = 700
check "nothing under the sweep folder is open to group or others ($(open_to_others P | head -3 | tr '\n' ' '))" \
  none_open P

# 2. without --private the umask decides (022: readable by others), as before
"$BIN" sweep "${SW[@]}" --out O > O.out 2>&1
check "without --private: the sweep folder follows the umask ($(mode O))" test "$(mode O)" = 755
check "without --private: summary.csv follows the umask ($(mode O/summary.csv))" test "$(mode O/summary.csv)" = 644

# 3. a sweep folder that exists already (made by hand, or by mkdir -p, under umask 022) with a log
#    left readable: --private makes the folders 0700 and the log it appends to 0600
mkdir -p Q/logs && : > "Q/logs/head=moe,seed=1.log" && chmod 644 "Q/logs/head=moe,seed=1.log"
"$BIN" sweep "${SW[@]}" --private --out Q > Q.out 2>&1; rc=$?
check "an existing folder with --private: exits 0 (rc $rc)" test "$rc" = 0
check "an existing folder: now 0700 ($(mode Q))" test "$(mode Q)" = 700
check "an existing logs/: now 0700 ($(mode Q/logs))" test "$(mode Q/logs)" = 700
check "an existing log: now 0600 ($(mode "Q/logs/head=moe,seed=1.log"))" test "$(mode "Q/logs/head=moe,seed=1.log")" = 600
check "nothing under it open to group or others ($(open_to_others Q | head -3 | tr '\n' ' '))" none_open Q

echo "t_sweep_private: $pass passed, $fail failed"
[ "$fail" = 0 ]
