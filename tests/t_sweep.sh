#!/usr/bin/env bash
# t_sweep.sh — `moelab sweep` end to end on synthetic data: the run grid and seeding (session
# names, seeds, stored command lines), the summary table and CSV (n per configuration, the gap
# row with Cohen's d and Hedges' g consistent with each other and with the means), sweep.h5,
# resume (a rerun skips every finished run; an interrupted run continues from its checkpoint and
# ends as if never interrupted), shard + --collect == one process and --jobs 2 == --jobs 1
# (`mpirun -np 2` == no MPI is t_sweep_mpi.sh). Bad usage exits 2.
set -u
BIN=${1:?usage: t_sweep.sh path/to/moelab}
BIN=$(cd "$(dirname "$BIN")" && pwd)/$(basename "$BIN")
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
cd "$T"
pass=0; fail=0
ok()  { echo "PASS  $*"; pass=$((pass + 1)); }
bad() { echo "FAIL  $*"; fail=$((fail + 1)); }
check() { local msg=$1; shift; if "$@"; then ok "$msg"; else bad "$msg"; fi; }
# every column but the last (`seconds`: timing) of a CSV
notime() { sed 's/,[^,]*$//' "$1"; }
same_csv() { diff <(notime "$1") <(notime "$2") > /dev/null; }
# column NAME of the summary.csv row whose config is ROW (single-axis sweeps: no quoted commas)
col() { awk -F, -v row="$2" -v name="$3" 'NR == 1 { for (i = 1; i <= NF; i++) c[$i] = i; next } $1 == row { print $c[name] }' "$1"; }

BASE=(--dataset synthetic:16x16x3:4:256 --width 0.25 --batch 32 --experts 4 --hidden 16 --epochs 1 --threads 1)
S=("${BASE[@]}" --vary head=moe,dense --seeds 2)
NAMES="head=dense,seed=1 head=dense,seed=2 head=moe,seed=1 head=moe,seed=2"
folders() { (cd "$1" && ls -d head=* 2>/dev/null | sort | tr '\n' ' ' | sed 's/ $//'); }

# 1. one sweep: grid, seeds, table, CSV, HDF5
"$BIN" sweep "${S[@]}" --out A > A.log 2>&1; rc=$?
check "sweep exits 0" [ $rc = 0 ]
check "4 session folders named by configuration and seed ($(folders A))" [ "$(folders A)" = "$NAMES" ]
for n in $NAMES; do
  seed=${n##*seed=}; head=${n%%,*}; head=${head#head=}
  check "$n: status finished" grep -q '"finished"' <(h5dump -d /status "A/$n/live.h5" 2>&1)
  check "$n: /run@seed is $seed" grep -q "(0): $seed\$" <(h5dump -a /run/seed "A/$n/live.h5" 2>&1)
  check "$n: trained with --head $head --seed $seed" grep -q -- "--head $head --seed $seed --session A/$n" <(h5dump -a /run/command_line "A/$n/live.h5" 2>&1)
done
check "runs are started in grid order, seed 1 of every configuration first" \
  test "$(grep -o '^\[[0-9]/4\] [^:]*: started' A.log | tr '\n' ' ')" = "[1/4] head=moe,seed=1: started [2/4] head=dense,seed=1: started [3/4] head=moe,seed=2: started [4/4] head=dense,seed=2: started "
check "the table has a head=moe row with n = 2, a gap, a CI, d and g" \
  grep -Eq '^head=moe +2 +[0-9.]+ .* [0-9.]+ +[-+][0-9.]+ +\[[-+][0-9.]+, [-+][0-9.]+\] +[-+][0-9.]+ +[-+][0-9.]+$' A.log
check "the table has a head=dense row with n = 2 and no gap" grep -Eq '^head=dense +2 +[0-9.]+ .*[0-9]$' A.log
check "summary.csv, runs.csv and sweep.h5 are written" [ -f A/summary.csv -a -f A/runs.csv -a -f A/sweep.h5 ]
check "summary.csv: n = 2 for both configurations" [ "$(col A/summary.csv head=moe n)$(col A/summary.csv head=dense n)" = 22 ]
check "summary.csv: head=moe is compared with head=dense" [ "$(col A/summary.csv head=moe baseline)" = head=dense ]
d=$(col A/summary.csv head=moe cohen_d); g=$(col A/summary.csv head=moe hedges_g)
check "summary.csv: the gap row has Cohen's d ($d) and Hedges' g ($g)" [ -n "$d" -a -n "$g" ]
check "Hedges' g = d (1 - 3/(4*4 - 9)) = 4d/7" awk -v d="$d" -v g="$g" 'BEGIN { exit !(d != "" && (g - 4 * d / 7) ^ 2 < 1e-16) }'
gap=$(col A/summary.csv head=moe gap); m1=$(col A/summary.csv head=moe final_mean); m2=$(col A/summary.csv head=dense final_mean)
lo=$(col A/summary.csv head=moe gap_ci_lo); hi=$(col A/summary.csv head=moe gap_ci_hi)
check "gap = mean(moe) - mean(dense) and lies in its CI [$lo, $hi]" \
  awk -v a="$gap" -v m1="$m1" -v m2="$m2" -v lo="$lo" -v hi="$hi" 'BEGIN { exit !((a - (m1 - m2)) ^ 2 < 1e-16 && lo < a && a < hi) }'
check "summary.csv: the dense row has no gap" [ -z "$(col A/summary.csv head=dense gap)" -a -z "$(col A/summary.csv head=dense cohen_d)" ]
check "runs.csv: 4 finished runs" [ "$(grep -c ',finished,' A/runs.csv)" = 4 ]
# the alarm episodes by severity (issue 26): runs.csv has each run's counts of its event log's collapse,
# warning and expert death events (h5dump of /events counted here), sweep.h5 the columns, the routing
# table an "alarms" column
# (column NAME of the row of run RUN, counted from the end: the quoted run name holds a comma)
rcol() { awk -F, -v name="$2" -v run="$3" 'NR == 1 { for (i = 1; i <= NF; i++) e[$i] = NF - i; next } index($0, "\"" run "\"") { print $(NF - e[name]) }' "$1"; }
evn() { h5dump -d /events "A/$1/live.h5" 2>/dev/null | grep -cE "\"$2 at step [0-9]"; }
agree=1; seen=""
for n in $NAMES; do
  c=$(rcol A/runs.csv collapse_episodes "$n"); w=$(rcol A/runs.csv warning_episodes "$n"); x=$(rcol A/runs.csv expert_deaths "$n")
  seen="$seen $n:$c/$w/$x"
  [ -n "$c" -a -n "$w" -a -n "$x" ] && [ "$c" = "$(evn "$n" collapse)" -a "$w" = "$(evn "$n" warning)" -a "$x" = "$(evn "$n" 'expert death')" ] || agree=0
done
check "runs.csv: collapse_episodes, warning_episodes, expert_deaths equal each event log's counts ($seen)" [ $agree = 1 ]
check "runs.csv: the new columns come before seconds" grep -q 'collapse_episodes,warning_episodes,expert_deaths,seconds$' A/runs.csv
check "the routing table has an alarms column (C/W/D counts or -)" \
  bash -c "grep -Eq '^routing .* alarms ' A.log && grep -Eq '^head=moe .* (-|([0-9]+[CWD] ?)+) +' A.log"
h5dump -H A/sweep.h5 > h5.txt 2>&1
check "sweep.h5: /runs/warning_episodes and /runs/expert_deaths" [ "$(grep -cE 'DATASET "(warning_episodes|expert_deaths)"' h5.txt)" = 2 ]
check "sweep.h5: format_version 1, per-configuration and per-run columns" grep -q 'format_version' h5.txt
check "sweep.h5: Cohen's d, Hedges' g and the CI" [ "$(grep -cE 'DATASET "(cohen_d|hedges_g|gap_ci_lo|gap_ci_hi|final_acc)"' h5.txt)" = 5 ]
"$BIN" browse A/sweep.h5 --list > browse.log 2>&1; rc=$?
runs=$(grep -cE ' finished ' browse.log)
check "browse sweep.h5 --list: every run of the sweep, finished" bash -c "[ $rc = 0 ] && [ $runs -ge 2 ] && grep -Eq '^[0-9]+ sessions, 0 unreadable' browse.log"
"$BIN" sweep --show A > show.log 2>&1
check "--show A prints the stored table" diff <(grep -E '^head=' A.log) <(grep -E '^head=' show.log)
check "sweep.args records the grid" grep -q -- '--vary head=moe,dense --seeds 2' A/sweep.args

# 2. resume: a rerun skips every finished run and creates nothing
before=$(ls -R A | md5sum); cp A/summary.csv A1.csv
"$BIN" sweep "${S[@]}" --out A > A2.log 2>&1; rc=$?
check "rerun exits 0" [ $rc = 0 ]
check "rerun says it skipped all 4 runs" grep -q '4 runs: 0 run, 4 skipped' A2.log
check "rerun starts nothing" [ "$(grep -c 'started' A2.log)" = 0 ]
check "rerun creates no session folders or files" [ "$(ls -R A | md5sum)" = "$before" ]
check "rerun gives the same summary" same_csv A1.csv A/summary.csv
# a rerun with 2 of 4 runs to do: its ETA counts those 2, not the 2 skipped as finished
cp -r A A3; rm -rf "A3/head=moe,seed=2" "A3/head=dense,seed=2"
"$BIN" sweep "${S[@]}" --jobs 1 --out A3 > A3.log 2>&1
check "a partial rerun's ETA counts only the runs it has to do ('1 run left' after the first)" \
  bash -c "grep -q '2 skipped' A3.log && grep -q 'finished in .*(sweep ETA [0-9ms]*, 1 run left)' A3.log && ! grep -q 'runs left' A3.log"

# 3. shards 0/2 and 1/2, then --collect == the single run
"$BIN" sweep "${S[@]}" --out B --shard 0/2 > B0.log 2>&1
check "shard 0/2 runs runs 1 and 3 only" [ "$(folders B)" = "head=moe,seed=1 head=moe,seed=2" ]
check "shard 0/2 points to --collect" grep -q -- '--collect B' B0.log
"$BIN" sweep "${S[@]}" --out B --shard 1/2 > B1.log 2>&1
"$BIN" sweep --collect B > Bc.log 2>&1; rc=$?
check "--collect exits 0 with every run present" [ $rc = 0 ]
check "shards + --collect: summary.csv equals the single run's (but timing)" same_csv A/summary.csv B/summary.csv
check "shards + --collect: runs.csv equals the single run's (but timing)" same_csv A/runs.csv B/runs.csv

# 3b. a run whose live.h5 crashes the HDF5 library (MOELAB_FAULT_SESSION_PROBE: the probing child
#     raises SIGSEGV): --collect reports it unreadable with the reason and summarises the others;
#     a rerun of the sweep leaves it alone
cp -r B BD
MOELAB_FAULT_SESSION_PROBE='head=moe,seed=2' "$BIN" sweep --collect BD > BDc.log 2>&1; rc=$?
check "damaged run: --collect exits 1 (a run is not finished), no crash (exit $rc)" [ $rc = 1 ]
check "damaged run: its reason on one line" \
  grep -q '^moelab sweep: BD/head=moe,seed=2: unreadable: BD/head=moe,seed=2/live.h5: reading it crashed the HDF5 library (signal 11): the file is damaged$' BDc.log
check "damaged run: runs.csv marks it unreadable, the 3 others finished" \
  bash -c "grep -q ',unreadable,' BD/runs.csv && [ \$(grep -c ',finished,' BD/runs.csv) = 3 ]"
check "damaged run: the summary still comes out (head=moe 1/2, head=dense 2)" \
  bash -c "grep -Eq '^head=moe +1/2 ' BDc.log && grep -Eq '^head=dense +2 ' BDc.log && [ '$(col BD/summary.csv head=dense n)' = 2 ]"
MOELAB_FAULT_SESSION_PROBE='head=moe,seed=2' "$BIN" sweep "${S[@]}" --out BD > BDr.log 2>&1; rc=$?
check "damaged run: a rerun skips the others, refuses it with the reason, exits 1 (exit $rc)" \
  bash -c "[ $rc = 1 ] && grep -q '3 skipped (finished before), 1 failed' BDr.log && grep -q 'seed=2/live.h5: reading it crashed the HDF5 library (signal 11): the file is damaged (remove it' BDr.log"
check "damaged run: its folder is left as it was" [ -f BD/head=moe,seed=2/live.h5 ]

# 3b. --seed-from: the same grid with seeds 2..3; seed 2 is the same run as A's seed 2
"$BIN" sweep "${S[@]}" --seed-from 2 --out SF > SF.log 2>&1; rc=$?
check "--seed-from 2 exits 0" [ $rc = 0 ]
check "--seed-from 2 --seeds 2: folders for seeds 2 and 3 ($(folders SF))" \
    [ "$(folders SF)" = "head=dense,seed=2 head=dense,seed=3 head=moe,seed=2 head=moe,seed=3" ]
check "sweep.args records --seed-from 2" grep -q -- '--seeds 2 --seed-from 2' SF/sweep.args
# the final accuracy of run NAME in a runs.csv (its name column is quoted: it holds commas)
run_acc() { grep -F "\"$2\"" "$1" | sed 's/^[0-9]*,"[^"]*",//' | cut -d, -f5; }
fa=$(run_acc A/runs.csv head=moe,seed=2)
fs=$(run_acc SF/runs.csv head=moe,seed=2)
check "seed 2 gives the same final accuracy in both sweeps ($fa, $fs)" [ -n "$fa" -a "$fa" = "$fs" ]
"$BIN" sweep "${S[@]}" --seed-from 0 --out SF0 > SF0.log 2>&1; rc=$?
check "--seed-from 0 is refused with exit 2" [ $rc = 2 ]
# 3b'. --agree: a sweep against itself agrees; against its rerun the exit status follows the outcome
"$BIN" sweep --agree A A > AG0.log 2>&1; rc=$?
check "--agree A A exits 0 and says agree" bash -c "[ $rc = 0 ] && grep -q '^-> agree' AG0.log"
check "--agree names both sweeps and their seeds" grep -q '^agree     A A (seeds 1-2) vs B A (seeds 1-2): 2 configurations matched, 1 with a gap in both' AG0.log
check "--agree lists the gap with its sign in both" grep -Eq '^head=moe +[-+][0-9.]+ \[.*\] +[-+][0-9.]+ \[.*\] +[-+0]/[-+0]' AG0.log
"$BIN" sweep --agree A SF > AG1.log 2>&1; rc=$?
out=$(grep -c '^-> agree' AG1.log)
check "--agree A SF: exit $rc matches its outcome line" [ \( $rc = 0 -a "$out" = 1 \) -o \( $rc = 1 -a "$(grep -c '^-> disagree' AG1.log)" = 1 \) ]
check "--agree A SF: seeds 1-2 vs 2-3" grep -q '(seeds 1-2) vs B SF (seeds 2-3)' AG1.log
"$BIN" sweep --agree A NOPE > AG2.log 2>&1; rc=$?
check "--agree with a missing folder exits 2 with a message" bash -c "[ $rc = 2 ] && grep -q 'NOPE' AG2.log"
"$BIN" sweep --agree A SF --seeds 2 > AG3.log 2>&1; rc=$?
check "--agree with other options exits 2" bash -c "[ $rc = 2 ] && grep -q 'two sweep folders' AG3.log"
# a damaged sweep.h5 (truncated to half, or not HDF5 at all): a message naming it, no crash
head -c $(( $(stat -c %s A/sweep.h5) / 2 )) A/sweep.h5 > half.h5
printf 'not an hdf5 file\n' > junk.h5
for f in half.h5 junk.h5; do
  "$BIN" sweep --agree A $f > AG4.log 2>&1; rc=$?
  check "--agree A $f: exit 2 with a message naming it" bash -c "[ $rc = 2 ] && grep -q '$f' AG4.log && ! grep -qi 'sanitizer\|segmentation' AG4.log"
  "$BIN" sweep --show $f > SH4.log 2>&1; rc=$?
  check "--show $f: exit 1 with a message naming it" bash -c "[ $rc = 1 ] && grep -q '$f' SH4.log && ! grep -qi 'sanitizer\|segmentation' SH4.log"
done
# issue 27 item 3: single flipped bits anywhere in sweep.h5: --show refuses the file (exit 1, a
# message) or prints exactly the stored table; never other numbers with exit 0
"$BIN" sweep --show A > SHOW0.log 2>&1
refused=0; same=0; silent=0
for seed in $(seq 1 30); do
  python3 -c '
import random, sys
src, dst, seed = sys.argv[1], sys.argv[2], int(sys.argv[3])
b = bytearray(open(src, "rb").read()); r = random.Random(seed)
i = r.randrange(len(b)); b[i] ^= 1 << r.randrange(8); open(dst, "wb").write(b)' A/sweep.h5 flip.h5 "$seed"
  timeout 60 "$BIN" sweep --show flip.h5 > FLIP.log 2>&1; rc=$?
  if [ $rc != 0 ]; then refused=$((refused + 1))
  elif diff <(grep -v 'flip.h5\|sweep.h5' SHOW0.log) <(grep -v 'flip.h5\|sweep.h5' FLIP.log) > /dev/null; then same=$((same + 1))
  else silent=$((silent + 1)); echo "flip seed $seed changed the table:"; diff SHOW0.log FLIP.log | head -5; fi
done
check "30 single-bit flips in sweep.h5: $refused refused, $same printed the stored table, $silent printed other numbers (want 0)" [ $silent = 0 ]
"$BIN" sweep --show A 2>&1 | grep -q 'no checksums' && bad "a new sweep.h5 says it has no checksums" || ok "a new sweep.h5 has checksums (no note)"

# a FIFO named sweep.h5 (issue 27): refused at once, never opened (opening one blocks forever)
mkdir -p FIFO && mkfifo FIFO/sweep.h5
timeout 10 "$BIN" sweep --show FIFO > SH5.log 2>&1; rc=$?
check "--show on a FIFO sweep.h5: exit 1 at once (not a hang: rc $rc) naming it" \
  bash -c "[ $rc = 1 ] && grep -q 'FIFO/sweep.h5: not a regular file (a FIFO)' SH5.log"
timeout 10 "$BIN" sweep --agree A FIFO > SH6.log 2>&1; rc=$?
check "--agree A FIFO: exit 2 at once (rc $rc)" bash -c "[ $rc = 2 ] && grep -q 'not a regular file' SH6.log"

# 3c. backbone MoE layers against their matched dense layers (the imagenet-topk form): the routing
# axis is moe-after, its --with ffn-after the baseline; list values take + ("2+3")
# (the old router, noise 1 and alpha 0.01: its near-uniform routing keeps cf = 1/k from dropping, so
# realized rho is equal across k after one tiny epoch; a deciding router's would not be yet)
BB=(--dataset synthetic:16x16x3:4:256 --width 0.25 --batch 32 --experts 4 --moe-hidden 16 --epochs 1 --threads 1
    --noise 1 --alpha 0.01 --schedule const
    --head dense --k 1 --vary moe-k=1,2 --with cf=0,0.5 --vary moe-after=2+3,none --with ffn-after=none,2+3 --seeds 2)
"$BIN" sweep "${BB[@]}" --out BBS > BBS.log 2>&1; rc=$?
check "backbone sweep exits 0" [ $rc = 0 ]
check "backbone sweep: 8 session folders" [ "$(ls -d BBS/moe-k=* | wc -l)" = 8 ]
check "a run trained with --moe-after 2+3 --ffn-after none" \
    grep -q -- '--moe-k 1 --cf 0 --moe-after 2+3 --ffn-after none' BBS/logs/moe-k=1,cf=0,moe-after=2+3,ffn-after=none,seed=1.log
bl=$(grep -F '"moe-k=2,cf=0.5,moe-after=2+3,ffn-after=none",' BBS/summary.csv | grep -o '"moe-k=2,cf=0.5,moe-after=none,ffn-after=2+3"')
check "summary.csv: the MoE-layer row is compared with the dense-layer row of the same k" [ -n "$bl" ]
check "summary.csv: MoE-layer rows are kind moe-backbone, dense-layer rows dense" \
    bash -c "[ \$(grep -c ',moe-backbone,' BBS/summary.csv) = 2 ] && [ \$(grep -c ',dense,' BBS/summary.csv) = 2 ]"
check "the verdict block is claim 2's, with realized rho per k" \
    bash -c "grep -q '^claim 2' BBS.log && [ \$(grep -cE '^ +k=[12] +cf .* rho realized [0-9.]+' BBS.log) = 2 ]"
check "one kept pair per sample at every k: realized rho equal across k" grep -q 'realized rho equal within' BBS.log
"$BIN" sweep --preset imagenet-topk --out IT --dry-run > IT.log 2>&1; rc=$?
check "imagenet-topk: 6 configurations x 2 seeds at 64x64 (dry run)" \
    bash -c "[ $rc = 0 ] && grep -q '6 configurations x 2 seeds = 12 runs' IT.log && grep -q 'synthetic:64x64x3:100' IT.log"
# a preset's option the user gives too is recorded once, the user's (was `--epochs 3 --epochs 1`)
"$BIN" sweep --preset temperature --epochs 1 --out TE --dry-run > TE.log 2>&1; rc=$?
check "a preset option given again (--epochs 1): every run's command holds it once, the user's value" \
    bash -c "[ $rc = 0 ] && [ \$(grep -c '^\[[0-9]*/[0-9]*\].* moelab train ' TE.log) -gt 0 ] &&
             ! grep '^\[[0-9]*/[0-9]*\].* moelab train ' TE.log | grep -v -- ' --epochs 1 ' | grep -q . &&
             ! grep -E -- '--epochs [0-9]+ .*--epochs' TE.log"
"$BIN" train --dataset synthetic:16x16x3:4:256 --moe-after none --ffn-after 2+3 --dry-run > none.log 2>&1; rc=$?
check "--moe-after none --ffn-after 2+3 is a valid model" [ $rc = 0 ]
"$BIN" train --dataset synthetic:16x16x3:4:256 --moe-after 2+ --dry-run > bad.log 2>&1; rc=$?
check "--moe-after 2+ is refused with exit 2" [ $rc = 2 ]

# 4. --jobs 2
"$BIN" sweep "${S[@]}" --out J --jobs 2 > J.log 2>&1; rc=$?
check "--jobs 2 exits 0" [ $rc = 0 ]
check "--jobs 2: summary.csv equals --jobs 1's (but timing)" same_csv A/summary.csv J/summary.csv
want=$(( $(nproc) / 2 )); [ $want -lt 1 ] && want=1
"$BIN" sweep --dataset synthetic --vary head=moe,dense --seeds 1 --jobs 2 --out X --dry-run > X.log 2>&1
check "--jobs 2 gives each run $want thread(s) of $(nproc)" grep -q -- "--threads $want --session X/head=moe,seed=1" X.log
check "--dry-run runs nothing" [ ! -e X ]

# 5. mpirun -np 2 == no MPI: tests/t_sweep_mpi.sh (skipped there when mpirun or MPI is missing)

# 6. an interrupted run continues from its checkpoint and ends as if never interrupted
printf 'at 5 quit\n' > quit5
Q=("${BASE[@]}" --epochs 2 --vary head=moe --seeds 1)
"$BIN" sweep "${Q[@]}" --commands quit5 --out Q > Q1.log 2>&1; rc=$?
check "a run stopped by 'quit' leaves the sweep unfinished (exit 1)" [ $rc = 1 ]
check "it is reported interrupted with its checkpoint" grep -q 'interrupted, checkpoint ckpt-5.h5' Q1.log
"$BIN" sweep "${Q[@]}" --commands quit5 --out Q > Q2.log 2>&1; rc=$?
check "the rerun exits 0" [ $rc = 0 ]
check "the rerun resumes it from its checkpoint" grep -q 'resuming from its checkpoint' Q2.log
"$BIN" sweep "${Q[@]}" --out Q0 > Q0.log 2>&1
check "resumed final accuracy equals an uninterrupted run's" \
  [ "$(col Q/summary.csv head=moe final_mean)" = "$(col Q0/summary.csv head=moe final_mean)" -a -n "$(col Q0/summary.csv head=moe final_mean)" ]

# 7. bad usage and conflicts
"$BIN" sweep "${BASE[@]}" --vary seed=1,2 --out Y > /dev/null 2>&1; check "--vary seed is refused (exit 2)" [ $? = 2 ]
"$BIN" sweep "${BASE[@]}" --vary head=moe,bogus --out Y > /dev/null 2>&1; check "an invalid configuration is refused (exit 2)" [ $? = 2 ]
"$BIN" sweep "${BASE[@]}" --vary head=moe --session x --out Y > /dev/null 2>&1; check "--session is refused (exit 2)" [ $? = 2 ]
"$BIN" sweep --vary head=moe > /dev/null 2>&1; check "--out is required (exit 2)" [ $? = 2 ]
check "nothing was created by refused sweeps" [ ! -e Y ]
"$BIN" sweep --collect Q0/head=moe,seed=1 > coll.log 2>&1; rc=$?
check "--collect of a folder that is no sweep fails (exit 1)" [ $rc = 1 ]
check "... with a message naming sweep.args" grep -q 'sweep.args' coll.log
cp -r A C; ls -lR --time-style=full-iso C > C.before
"$BIN" sweep "${BASE[@]}" --epochs 2 --vary head=moe,dense --seeds 2 --out C > C.log 2>&1; rc=$?
check "a folder holding another configuration is refused (exit 1)" [ $rc = 1 ]
check "... with a message" grep -q 'holds another configuration' C.log
check "... and nothing in it changes" diff C.before <(ls -lR --time-style=full-iso C)

# 8. presets expand to the paper's grids
"$BIN" sweep --preset topk-rho --out P --dry-run > P.log 2>&1
check "topk-rho: k 1,2,4 x moe,dense x 4 seeds = 24 runs" grep -q '6 configurations x 4 seeds = 24 runs' P.log
check "topk-rho: cf per k (k=1 dropless, 1/k otherwise) goes with k" grep -q -- '--k 4 --cf 0.25 --head moe --seed 2' P.log
"$BIN" sweep --preset hidden-size --budget paper --out P --dry-run > P2.log 2>&1
check "hidden-size --budget paper: 7 hidden per backbone x 2 heads x 5 seeds" grep -q '28 configurations x 5 seeds = 140 runs' P2.log
check "hidden-size: h goes with the backbone" grep -q -- '--hidden 8192 --backbone std --head dense --seed 5' P2.log
"$BIN" sweep --preset temperature --out P --dry-run > P3.log 2>&1
check "temperature: 4 schedules x moe,dense x 4 seeds, the dense baseline trained once per seed" \
  grep -q '8 configurations x 4 seeds = 32 runs .*(20 trained: 3 configurations share' P3.log
check "temperature: k 1, linear to 0.3" grep -q -- '--k 1 .*--schedule linear --tau1 0.3 --head moe --seed 1' P3.log
"$BIN" sweep --preset temperature --budget nope --out P --dry-run > /dev/null 2>&1
check "--budget takes quick, medium or paper" [ $? = 2 ]

# 8b. topk-rho on synthetic data: the verdict block prints the realized rho of each k, equal within 5%
"$BIN" sweep --preset topk-rho "${BASE[@]}" --seeds 1 --out K > K.log 2>&1; rc=$?
check "topk-rho: the sweep exits 0" [ $rc = 0 ]
check "topk-rho: the verdict names claim 2 and prints k = 1, 2, 4 with their realized rho" \
  [ "$(grep -cE '^ +k=[124] +cf [0-9.]+ +rho realized [0-9.]+' K.log)" = 3 -a -n "$(grep '^claim 2 ' K.log)" ]
spread=$(sed -n 's/.*realized rho equal within \([0-9.]*\)% across k.*/\1/p' K.log)
check "topk-rho: realized rho equal within 5% across k (measured ${spread:-?}%)" \
  awk -v s="$spread" 'BEGIN { exit !(s != "" && s + 0 <= 5) }'
check "topk-rho: one seed is inconclusive" grep -q '^-> inconclusive' K.log

# 8c. softmoe on synthetic data: the summary probes each head's batch dependence (claim 3's mechanism)
"$BIN" sweep --preset softmoe "${BASE[@]}" --seeds 1 --out SM > SM.log 2>&1; rc=$?
check "softmoe: the sweep exits 0" [ $rc = 0 ]
check "softmoe: the summary has the batch-composition probe" grep -q 'batch-composition probe (moelab probe batch' SM.log
check "softmoe: softmoe-sample, moe and dense change only by rounding" \
  [ "$(grep -cE '^ +(softmoe-sample|moe|dense) +seed 1: no change beyond float rounding' SM.log)" = 3 ]
check "softmoe: softmoe-batch depends on its batch mates, the size printed" \
  grep -qE '^ +softmoe-batch +seed 1: depends on batch mates: max \|dlogit\| [0-9.e-]+' SM.log
grep -E '^ +(softmoe|moe|dense)[a-z-]* +seed 1:' SM.log | sed 's/^ */INFO  probe: /'

# 8d. budgets: medium expands to its own folder and grid; medium and paper print an estimated wall
#     time from a calibration (--estimate: only that); paper asks on a terminal (no: nothing started), and
#     starts without one
"$BIN" sweep --preset softmoe --budget medium --estimate > BM.log 2>&1; rc=$?
check "medium --estimate exits 0" [ $rc = 0 ]
check "medium: (medium), sweeps/softmoe-medium, w 1, 5 seeds" \
  grep -q 'preset softmoe (medium): 4 configurations x 5 seeds = 20 runs in sweeps/softmoe-medium' BM.log
check "medium: the calibration's estimate" grep -qE '^budget    estimated wall time [0-9]+[hm] [0-9]+[ms] for 20 runs at 1 at once' BM.log
check "medium: each configuration timed" [ "$(grep -cE '^budget    head=[a-z-]+ +[0-9.]+ s/step' BM.log)" = 4 ]
check "medium: --estimate writes nothing" [ ! -e sweeps/softmoe-medium ]
"$BIN" sweep --preset softmoe --budget paper "${BASE[@]}" --seeds 1 --out BP > BP.log 2>&1 < /dev/null; rc=$?
check "paper without a terminal: starts after the estimate (exit $rc)" \
  grep -q 'no terminal: starting without confirmation' BP.log
check "paper: the estimate comes first" grep -qE '^budget    estimated wall time .* for 4 runs' BP.log
if command -v script > /dev/null; then
  printf 'n\n' | script -qec "'$BIN' sweep --preset softmoe --budget paper ${BASE[*]} --seeds 1 --out BQ" /dev/null > BQ.log 2>&1
  check "paper on a terminal: asks, 'n' starts nothing" grep -q 'start the sweep? \[y/N\]' BQ.log
  check "paper on a terminal: not started, no session" [ -z "$(ls -d BQ/*seed=* 2>/dev/null)" ]
  grep -q 'not started' BQ.log || bad "paper on a terminal: no 'not started' line: $(tail -3 BQ.log)"
else echo "SKIP  script(1) not installed: the terminal question is not checked"; fi

# 9. a configuration is trained once: dense ignores the noise axis, so its two noise values share
#    one set of seeds (6 runs trained for 8 summary rows), and both dense rows show the same runs
"$BIN" sweep "${BASE[@]}" --vary noise=0,0.3 --vary head=moe,dense --seeds 2 --out D > D.log 2>&1; rc=$?
nd=$(ls -d D/*seed=* | wc -l); ndense=$(ls -d D/*head=dense*seed=* | wc -l); started=$(grep -c ': started' D.log)
check "dedup: sweep exits 0" [ $rc = 0 ]
check "dedup: 6 session folders, 2 of them dense ($nd, $ndense)" [ "$nd" = 6 -a "$ndense" = 2 ]
check "dedup: 6 runs started, not 8 ($started)" [ "$started" = 6 ]
check "dedup: the plan says so" grep -q '(6 trained: 1 configuration shares another' D.log
# (the quoted labels hold a comma: both rows split the same way)
c1=$(grep '^"noise=0,head=dense"' D/summary.csv | cut -d, -f5-11)
c2=$(grep '^"noise=0.3,head=dense"' D/summary.csv | cut -d, -f5-11)
check "dedup: both dense rows have n = 2 and the same accuracies" [ -n "$c1" -a "$c1" = "$c2" ]
check "dedup: each moe row is compared with its dense row (a gap and its CI)" \
  [ "$(grep -cE '^noise=0(.3)?,head=moe +2 .*\[[-+][0-9.]+, [-+][0-9.]+\]' D.log)" = 2 ]

echo "$pass passed, $fail failed"
[ $fail = 0 ]
