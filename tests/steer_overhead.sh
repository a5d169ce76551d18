#!/usr/bin/env bash
# steer_overhead.sh — what an open `moelab attach` costs a training run: one headless run of the
# reference model (synthetic 32x32x3) and alternating rounds of SECONDS without and with one
# attacher (in a private tmux server, 120x40), ROUNDS pairs. The run's own step records
# (/steps/img_per_s, read back with `moelab export`) inside each round, first 2 s after a switch
# skipped, give the round's median images/s; prints every round, the medians and the ratio.
# Not part of ctest (it measures time). Usage: [MODEL="train options"] bash tests/steer_overhead.sh build/moelab
# [ROUNDS] [SECONDS] [THREADS]
set -u
BIN=${1:?usage: steer_overhead.sh path/to/moelab [ROUNDS] [SECONDS] [THREADS]}
ROUNDS=${2:-6}
SEC=${3:-20}
THREADS=${4:-2}
BIN=$(cd "$(dirname "$BIN")" && pwd)/$(basename "$BIN")
T=$(mktemp -d)
TM=(tmux -L steer-$$ -f /dev/null)
cleanup() {
  "${TM[@]}" kill-server >/dev/null 2>&1
  [ -n "${PID:-}" ] && kill "$PID" 2>/dev/null
  rm -rf "$T"
}
trap cleanup EXIT
MODEL=${MODEL:---dataset synthetic:32x32x3:10:50000} # the reference model; e.g. MODEL="--dataset ... --width 0.5"
"$BIN" train --headless $MODEL --epochs 1000 --threads "$THREADS" --log-every 5 \
  --session "$T/run" >"$T/run.log" 2>&1 &
PID=$!
for ((i = 0; i < 600; i++)); do "$BIN" ctl "$T/run" status >/dev/null 2>&1 && break; sleep 0.1; done
sleep 5 # warm-up
"${TM[@]}" new-session -d -s keep "sleep 100000"
: >"$T/rounds"
for ((r = 1; r <= ROUNDS; r++)); do
  a=$(date +%s.%N)
  sleep "$SEC"
  b=$(date +%s.%N)
  "${TM[@]}" new-session -d -x 120 -y 40 -s att "env LANG=C.UTF-8 $BIN attach $T/run"
  sleep "$SEC"
  c=$(date +%s.%N)
  "${TM[@]}" send-keys -t att q
  sleep 1
  "${TM[@]}" kill-session -t att >/dev/null 2>&1
  echo "$r $a $b $c" >>"$T/rounds"
done
"$BIN" ctl "$T/run" quit >/dev/null
wait "$PID"
PID=
"$BIN" export "$T/run" --csv "$T/csv" >/dev/null
python3 - "$T/csv/steps.csv" "$T/rounds" <<'EOF'
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1])))
wt = "wall_time_unix_s" if rows and "wall_time_unix_s" in rows[0] else "wall_time"  # export names units since #18
pts = [(float(r[wt]), float(r["img_per_s"])) for r in rows]
def med(lo, hi):
    v = [x for t, x in pts if lo + 2 <= t <= hi]
    return statistics.median(v) if v else float("nan"), len(v)
none, one, ratios = [], [], []
for line in open(sys.argv[2]):
    r, a, b, c = line.split(); a, b, c = float(a), float(b), float(c)
    m0, n0 = med(a, b); m1, n1 = med(b, c)
    none.append(m0); one.append(m1); ratios.append(m1 / m0)
    print(f"round {r}: no attacher {m0:8.1f} img/s ({n0} records)   one attacher {m1:8.1f} img/s ({n1} records)   ratio {m1 / m0:.3f}")
print(f"median img/s: no attacher {statistics.median(none):.1f}, one attacher {statistics.median(one):.1f}; "
      f"median of the round ratios {statistics.median(ratios):.3f} (min {min(ratios):.3f}, max {max(ratios):.3f}); "
      f"ratio of the medians {statistics.median(one) / statistics.median(none):.3f}")
EOF
