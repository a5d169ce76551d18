#!/usr/bin/env bash
# t_dist.sh — one run on two ranks (`mpirun -np 2 moelab train`, issue 30):
#   1. the gradient: with --sync-bn, no selection noise, no augmentation, dropless routing and no
#      L_aux (a per-rank loss by design), the mean gradient of the first step on 2 ranks equals the
#      1-rank gradient of the same global batch within 1e-5 of its largest entry (max difference
#      printed), with the exchange cut into 64-float buckets so that many start during the backward;
#      without --sync-bn it differs (per-rank batch statistics; printed); on 3 ranks the same, and
#      both exchanges (allgather, reduce-scatter + allgather) end with the same weights;
#   2. two N = 2 runs end bit-identical (weights, optimizer, streams, every rank's streams, history;
#      MOELAB_QUICK: one run of 8 epochs, which section 3 holds the resumed runs to);
#   3. SIGTERM to mpirun mid-run, then `mpirun -np 2 moelab train --resume`: weights and history equal
#      the uninterrupted run; the same after SIGKILL of rank 1 (the job goes down, nothing is lost);
#   4. a resume or replay on another number of ranks is refused with the command that works;
#      a --batch the ranks do not divide is refused; neither hangs;
#   5. `moelab ctl` steers an N = 2 run (set, pause while the other rank sleeps, resume, quit) and so
#      does `moelab attach` in tmux (a `set` typed there), the commands are logged once, and
#      `mpirun -np 2 moelab replay` MATCHes.
# Needs mpirun, h5dump and a moelab built with MPI; exits 77 (ctest: skipped) without them.
set -u
BIN=${1:?usage: t_dist.sh path/to/moelab}
if ! command -v mpirun > /dev/null 2>&1; then
  echo "SKIP  mpirun not installed (apt-get install openmpi-bin libopenmpi-dev)"
  exit 77
elif ! "$BIN" sweep --help | grep -q 'built with MPI'; then
  echo "SKIP  this moelab was built without MPI (install libopenmpi-dev and reconfigure)"
  exit 77
elif ! command -v h5dump > /dev/null 2>&1; then
  echo "SKIP  h5dump not installed (apt-get install hdf5-tools)"
  exit 77
fi
BIN=$(cd "$(dirname "$BIN")" && pwd)/$(basename "$BIN")
T=$(mktemp -d)
trap 'pkill -KILL -f "moelab.*$T" 2>/dev/null; [ -n "${KEEP:-}" ] || rm -rf "$T"' EXIT
cd "$T"
pass=0; fail=0
ok()  { echo "PASS  $*"; pass=$((pass + 1)); }
bad() { echo "FAIL  $*"; fail=$((fail + 1)); }
check() { local msg=$1; shift; if "$@"; then ok "$msg"; else bad "$msg"; fi; }
MPI=(timeout 300 mpirun --allow-run-as-root --oversubscribe)
export OMPI_MCA_btl_vader_single_copy_mechanism=none # containers without CMA (ptrace) permission
# under AddressSanitizer: Open MPI's own start-up allocations (in components it unloads at
# MPI_Finalize) are reported as leaks; memory errors and UB are still caught; moelab's own leaks
# are checked by the one-process tests, which run the same trainer code
[ -n "${ASAN_OPTIONS:-}" ] && export ASAN_OPTIONS="$ASAN_OPTIONS:detect_leaks=0"

final_ckpt() { echo "$1/ckpt-$(ls "$1" | sed -n 's/^ckpt-\([0-9]*\)\.h5$/\1/p' | sort -n | tail -1).h5"; }
weights() { h5dump -A 0 -g /weights -g /buffers -g /optimizer -g /rng -g /dist -g /schedule -g /trainer "$(final_ckpt "$1")" | tail -n +2 | sha256sum | cut -c1-16; }
history() {
  local d
  for d in /steps/step /steps/loss /steps/acc /steps/tau /steps/kept /steps/capacity /evals/step /evals/test_loss \
           /evals/test_acc /evals/class_expert; do
    h5dump -A 0 -d $d "$1/live.h5" | tail -n +2
  done | sha256sum | cut -c1-16
}
field() { sed -n "s/.* $1=\([^ ]*\).*/\1/p"; }
# wait until the run in DIR has finished N epochs (its control socket says so), up to 60 s
wait_epochs() {
  local i e
  for ((i = 0; i < 600; i++)); do
    e=$("$BIN" ctl "$1" status 2>/dev/null | field epochs_done)
    [ -n "$e" ] && [ "$e" -ge "$2" ] && return 0
    sleep 0.1
  done
  return 1
}
# the largest |a - b| over the largest |a| of two raw float32 files
graddiff() {
  python3 - "$1" "$2" << 'EOF'
import struct, sys
a = open(sys.argv[1], 'rb').read(); b = open(sys.argv[2], 'rb').read()
if len(a) != len(b) or not a: print("nan"); sys.exit()
n = len(a) // 4
x = struct.unpack('%df' % n, a); y = struct.unpack('%df' % n, b)
print("%.3e" % (max(abs(p - q) for p, q in zip(x, y)) / max(abs(p) for p in x)))
EOF
}

# ---- 1. the gradient of a step: 2 ranks = 1 rank with --sync-bn
G=(train --headless --dataset synthetic:16x16x3:4:512 --width 0.25 --batch 32 --experts 4 --hidden 16 --threads 1
   --epochs 1 --no-session --noise 0 --no-augment --cf 0 --alpha 0)
for n in 1 2; do
  MOELAB_DIST_BUCKET=64 MOELAB_DIST_GRAD_DUMP=$T/g$n.bin "${MPI[@]}" -np $n "$BIN" "${G[@]}" --sync-bn > g$n.log 2>&1 \
    || bad "gradient run on $n rank(s) failed: $(tail -3 g$n.log)"
done
MOELAB_DIST_BUCKET=64 MOELAB_DIST_GRAD_DUMP=$T/g2n.bin "${MPI[@]}" -np 2 "$BIN" "${G[@]}" > g2n.log 2>&1
d=$(graddiff g1.bin g2.bin); dn=$(graddiff g1.bin g2n.bin)
echo "INFO  first step's mean gradient, 2 ranks vs 1: max |difference| / max |gradient| = $d with --sync-bn, $dn without"
check "with --sync-bn the 2-rank gradient equals the 1-rank one within 1e-5 ($d)" awk -v d="$d" 'BEGIN { exit !(d == d + 0 && d < 1e-5) }'
check "without --sync-bn it does not (per-rank batch statistics: $dn)" awk -v d="$dn" 'BEGIN { exit !(d == d + 0 && d > 1e-3) }'
D=(--dataset synthetic:16x16x3:4:256 --width 0.25 --batch 32 --experts 4 --hidden 16 --threads 1 --epochs 1 --no-session)
MOELAB_DIST_BUCKET=64 MOELAB_DIST_GRAD_DUMP=$T/b1.bin "${MPI[@]}" -np 1 "$BIN" train --headless "${D[@]}" --moe-after 0,2 --head dense --noise 0 --no-augment --cf 0 --sync-bn > b1.log 2>&1
MOELAB_DIST_BUCKET=64 MOELAB_DIST_GRAD_DUMP=$T/b2.bin "${MPI[@]}" -np 2 "$BIN" train --headless "${D[@]}" --moe-after 0,2 --head dense --noise 0 --no-augment --cf 0 --sync-bn --alpha 0 > b2.log 2>&1
MOELAB_DIST_BUCKET=64 MOELAB_DIST_GRAD_DUMP=$T/b1.bin "${MPI[@]}" -np 1 "$BIN" train --headless "${D[@]}" --moe-after 0,2 --head dense --noise 0 --no-augment --cf 0 --sync-bn --alpha 0 > b1.log 2>&1
d=$(graddiff b1.bin b2.bin)
check "the same for routed layers in the backbone (--moe-after 0,2, dense head): $d" awk -v d="$d" 'BEGIN { exit !(d == d + 0 && d < 1e-5) }'

# three ranks: the two exchanges (allgather of whole buckets; our reduce-scatter + allgather, the
# default above 2 ranks) add in the same order, so they give the same bits; and the gradient
# equals 1 rank's there too
G3=(train --headless --dataset synthetic:16x16x3:4:360 --width 0.25 --batch 36 --experts 4 --hidden 16 --threads 1
    --epochs 1 --noise 0 --no-augment --cf 0 --alpha 0 --sync-bn)
for algo in allgather rsag; do
  MOELAB_DIST_ALGO=$algo MOELAB_DIST_BUCKET=100 MOELAB_DIST_GRAD_DUMP=$T/g3$algo.bin "${MPI[@]}" -np 3 \
    -x MOELAB_DIST_ALGO -x MOELAB_DIST_BUCKET -x MOELAB_DIST_GRAD_DUMP "$BIN" "${G3[@]}" --session R$algo > R$algo.log 2>&1 \
    || bad "3 ranks, $algo: $(tail -3 R$algo.log)"
done
MOELAB_DIST_GRAD_DUMP=$T/g31.bin "${MPI[@]}" -np 1 "$BIN" "${G3[@]}" --no-session > g31.log 2>&1
check "3 ranks: the allgather and the reduce-scatter exchanges end with the same weights" \
  test "$(weights Rallgather)" = "$(weights Rrsag)"
d=$(graddiff g31.bin g3rsag.bin)
check "3 ranks (reduce-scatter, 100-float buckets): the gradient equals 1 rank's within 1e-5 ($d)" \
  awk -v d="$d" 'BEGIN { exit !(d == d + 0 && d < 1e-5) }'

# ---- 2. two N = 2 runs: the same bits
# MOELAB_QUICK (the sanitizer build): 8 epochs (still long enough to be stopped at epoch 3 and 4)
# and no second uninterrupted run (section 3's resumed runs equal this one bit for bit anyway)
EP=30; [ -n "${MOELAB_QUICK:-}" ] && EP=8
RUN=(train --headless --dataset synthetic:16x16x3:4:2048 --width 0.25 --batch 32 --experts 4 --hidden 16 --threads 1
     --epochs $EP --ckpt-steps 50)
"${MPI[@]}" -np 2 "$BIN" "${RUN[@]}" --session A > A.log 2>&1 || bad "N = 2 run A failed: $(tail -3 A.log)"
WA=$(weights A); HA=$(history A)
if [ -z "${MOELAB_QUICK:-}" ]; then
  "${MPI[@]}" -np 2 "$BIN" "${RUN[@]}" --session A2 > A2.log 2>&1 || bad "N = 2 run A2 failed: $(tail -3 A2.log)"
  check "two N = 2 runs: the same final weights, optimizer and streams ($WA)" test "$(weights A2)" = "$WA"
  check "two N = 2 runs: the same history ($HA)" test "$(history A2)" = "$HA"
else
  echo "NOTE  MOELAB_QUICK: one uninterrupted run of $EP epochs (the resumed runs below are held to it)"
fi
check "the epoch line says the ranks and the communication" grep -Eq '^  ranks +2 ranks +communication [0-9.]+ ms/step' A.log
check "the session stores its ranks (config_json \"ranks\": 2)" sh -c "h5dump -a /run/config_json A/live.h5 | grep -q '\\\\\"ranks\\\\\": 2\\|\"ranks\": 2'"
check "every rank's streams are in the checkpoint (/dist/rank_rngs 2 x 8)" sh -c "h5dump -H -d /dist/rank_rngs '$(final_ckpt A)' | grep -q '( 2, 8 )'"

# ---- 3. interrupted and resumed: nothing lost
"${MPI[@]}" -np 2 "$BIN" "${RUN[@]}" --session B > B.log 2>&1 &
MP=$!
wait_epochs B 3 || bad "run B did not reach epoch 3"
kill -TERM $MP
wait $MP; rc=$?
# Open MPI's mpirun may exit at once on SIGTERM: the ranks (signalled by it, or by the kernel when
# it is gone) stop together at the next boundary after their final checkpoint; wait for them
for ((i = 0; i < 300; i++)); do pgrep -f "moelab train --headless .*--session B" > /dev/null || break; sleep 0.1; done
st=$(h5dump -d /status B/live.h5 2>/dev/null | grep -o '"[a-z]*"' | tail -1)
left=$(pgrep -f "moelab train --headless .*--session B" | wc -l)
check "SIGTERM to mpirun: every rank stops (mpirun exit $rc, $left left), the session says $st" \
  sh -c "test $rc != 0 && test $left = 0 && test '$st' = '\"interrupted\"'"
"${MPI[@]}" -np 2 "$BIN" train --resume "$T/B" > B2.log 2>&1 || bad "resume of B failed: $(tail -3 B2.log)"
check "SIGTERM + resume on 2 ranks: the final weights equal the uninterrupted run's" test "$(weights B)" = "$WA"
check "SIGTERM + resume on 2 ranks: the history equals the uninterrupted run's" test "$(history B)" = "$HA"

"${MPI[@]}" -np 2 "$BIN" "${RUN[@]}" --session K > K.log 2>&1 &
MP=$!
wait_epochs K 4 || bad "run K did not reach epoch 4"
R1=$(pgrep -f "moelab train --headless .*--session K" | sort -n | tail -1)
kill -KILL "$R1"
wait $MP; rc=$?
for ((i = 0; i < 300; i++)); do pgrep -f "moelab train --headless .*--session K" > /dev/null || break; sleep 0.1; done
left=$(pgrep -f "moelab train --headless .*--session K" | wc -l)
check "SIGKILL of rank 1 takes the job down (mpirun exit $rc, $left ranks left)" sh -c "test $rc -ne 0 && test $left = 0"
"${MPI[@]}" -np 2 "$BIN" train --resume "$T/K" > K2.log 2>&1 || bad "resume of K failed: $(tail -3 K2.log)"
check "rank 1 killed + resume: the final weights equal the uninterrupted run's" test "$(weights K)" = "$WA"
check "rank 1 killed + resume: the history equals the uninterrupted run's" test "$(history K)" = "$HA"

# ---- 4. what is refused
cp -r A C
timeout 60 "$BIN" train --resume "$T/C" --epochs $((EP + 1)) > C1.log 2>&1; rc=$?
check "a 2-rank session resumed on 1 process: refused (exit 1) with the command that works" \
  sh -c "test $rc = 1 && grep -q 'trained on 2 ranks, this is 1: resume it with .mpirun -np 2 moelab train --resume' C1.log"
"${MPI[@]}" -np 3 "$BIN" train --resume "$T/C" --epochs $((EP + 1)) > C3.log 2>&1; rc=$?
check "... and on 3 ranks: refused, no hang (mpirun exit $rc)" sh -c "test $rc != 0 && test $rc != 124 && grep -q 'trained on 2 ranks, this is 3' C3.log"
"$BIN" train --headless --dataset synthetic:16x16x3:4:256 --width 0.25 --batch 32 --threads 1 --epochs 1 --session S1 > S1.log 2>&1
"${MPI[@]}" -np 2 "$BIN" train --resume "$T/S1" --epochs 2 > S1b.log 2>&1; rc=$?
check "a 1-process session resumed on 2 ranks: refused (mpirun exit $rc)" sh -c "test $rc != 0 && test $rc != 124 && grep -q 'trained on 1 process, this is 2' S1b.log"
"${MPI[@]}" -np 2 "$BIN" train --headless --dataset synthetic:16x16x3:4:256 --batch 33 --threads 1 --epochs 1 --no-session > odd.log 2>&1; rc=$?
check "--batch 33 on 2 ranks: refused (mpirun exit $rc) with a batch that works" \
  sh -c "test $rc != 0 && test $rc != 124 && grep -q 'batch 33 is the global batch, split evenly over the 2 ranks.*try --batch 34' odd.log"

# ---- 5. steered through the control socket, then replayed
"${MPI[@]}" -np 2 "$BIN" train --headless --dataset synthetic:16x16x3:4:2048 --width 0.25 --batch 32 --experts 4 \
  --hidden 16 --threads 1 --epochs 400 --session P > P.log 2>&1 &
MP=$!
wait_epochs P 2 || bad "run P did not reach epoch 2"
out=$("$BIN" ctl P set tau 0.3 2>&1)
check "ctl set tau 0.3 to an N = 2 run: ok" grep -Eq '^ok step=[0-9]+ set tau 0.3$' <<< "$out"
check "ctl pause: ok" sh -c "'$BIN' ctl P pause | grep -q '^ok step='"
s1=$("$BIN" ctl P status | field step); sleep 1; s2=$("$BIN" ctl P status | field step)
check "paused: the step stays ($s1 = $s2) and status says paused" sh -c "test -n '$s1' && test '$s1' = '$s2' && '$BIN' ctl P status | grep -q 'state=paused'"
R1=$(pgrep -f "moelab train --headless .*--session P" | sort -n | tail -1)
ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat" 2>/dev/null; }
c0=$(ticks "$R1"); sleep 2; c1=$(ticks "$R1")
cpu=$(awk -v a="${c0:-0}" -v b="${c1:-0}" -v hz="$(getconf CLK_TCK)" 'BEGIN { printf "%.0f", 100 * (b - a) / hz / 2 }')
check "rank 1 sleeps while the run is paused (${cpu}% of a core over 2 s, not a spinning broadcast)" test "${cpu:-100}" -lt 50
if command -v tmux > /dev/null 2>&1; then # `moelab attach` to the N = 2 run, typed as a person does
  TM=(tmux -L moelabdist-$$ -f /dev/null)
  "${TM[@]}" new-session -d -x 120 -y 40 -s at "cd '$T' && env LANG=C.UTF-8 LC_ALL=C.UTF-8 '$BIN' attach '$T/P'; sleep 100"
  seen=0
  for ((i = 0; i < 300; i++)); do "${TM[@]}" capture-pane -p -t at 2>/dev/null | grep -q 'attached' && { seen=1; break; }; sleep 0.1; done
  check "moelab attach to the N = 2 run: attached" test $seen = 1
  "${TM[@]}" send-keys -t at -l "set beta 0.002"
  "${TM[@]}" send-keys -t at Enter
  seen=0
  for ((i = 0; i < 300; i++)); do
    "${TM[@]}" capture-pane -p -t at 2>/dev/null | grep -Eq 'set beta 0.002 -> ok step=[0-9]+ set beta 0.002' && { seen=1; break; }
    sleep 0.1
  done
  check "set beta 0.002 typed in attach: rank 0's reply (every rank applies it at that boundary)" test $seen = 1
  "${TM[@]}" send-keys -t at q
  "${TM[@]}" kill-server > /dev/null 2>&1
else
  echo "SKIP  moelab attach to the N = 2 run: tmux not installed"
fi
check "ctl resume: ok" sh -c "'$BIN' ctl P resume | grep -q '^ok step='"
wait_epochs P 4 || bad "run P did not go on after resume"
check "ctl set alpha 0.02: ok" sh -c "'$BIN' ctl P set alpha 0.02 | grep -q '^ok step='"
check "ctl quit: ok" sh -c "'$BIN' ctl P quit | grep -q '^ok step='"
wait $MP; rc=$?
check "the N = 2 run ends after quit (mpirun exit $rc)" test "$rc" = 0
check "the commands are logged once each" sh -c "test \$(grep -c '^\[step [0-9]*\] set tau 0.3' P.log) = 1 && test \$(grep -c '^\[step [0-9]*\] pause' P.log) = 1"
"${MPI[@]}" -np 2 "$BIN" replay "$T/P" > PR.log 2>&1
check "mpirun -np 2 moelab replay of the steered session: MATCH" grep -q 'final metrics MATCH' PR.log
timeout 60 "$BIN" replay "$T/P" --session "$T/P1" > PR1.log 2>&1; rc=$?
check "replay on 1 process: refused (exit $rc) with the command that works" \
  sh -c "test $rc = 1 && grep -q 'replay it with .mpirun -np 2 moelab replay' PR1.log"

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
