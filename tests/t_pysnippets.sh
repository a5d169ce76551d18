#!/usr/bin/env bash
# t_pysnippets.sh — the Python blocks of sessions/README.md (the file-format doc) run as written:
# "Loading a checkpoint into PyTorch" (Debian python3-torch + python3-h5py at /usr/bin/python3)
# rebuilds the model of checkpoints at widths 0.25, 0.5 and 1 (moe, a dense head, softmoe-batch,
# moe with an evaluation capacity: --eval-cf 1 with gate priority, --eval-cf 0.5, and a run
# annealed linearly to tau 0.2) from config_json, loads /weights and /buffers, takes the
# temperature from the checkpoint, and must reproduce the test accuracy moelab recorded for that
# evaluation (within 2 of 1000 images: float rounding can flip a near-tie); its tau_value must give
# the /steps/tau column of runs with every schedule kind, an anneal and a set tau (the tau of a
# step row is the plan at the step before it); "Reading a session with h5py" runs on a finished
# session (same accuracy) and on a session still in its first epoch (no evaluation yet). Skipped
# with a message when the Python modules or Fashion-MNIST are missing.
set -u
BIN=${1:?usage: t_pysnippets.sh path/to/moelab}
SRC=${MOELAB_SRC:-$(cd "$(dirname "$0")/.." && pwd)}
PY=/usr/bin/python3
FM=/usr/share/datasets/fashion-mnist
T=$(mktemp -d)
trainer=
trap '[ -n "$trainer" ] && kill -CONT "$trainer" 2>/dev/null && kill "$trainer" 2>/dev/null; wait 2>/dev/null; rm -rf "$T"' EXIT
pass=0; fail=0
ok()  { echo "PASS  $*"; pass=$((pass + 1)); }
bad() { echo "FAIL  $*"; fail=$((fail + 1)); }
if ! [ -x "$PY" ] || ! "$PY" -c 'import h5py, numpy' 2>/dev/null; then
  echo "SKIP  $PY with h5py and numpy is not installed (Debian: python3-h5py)"; exit 77
fi
have_torch=1; "$PY" -c 'import torch' 2>/dev/null || { have_torch=0; echo "SKIP  (PyTorch part) python3-torch is not installed"; }

# the python block after a heading of sessions/README.md
DOC="$SRC/sessions/README.md"
block() { awk -v h="$1" 'index($0, h) == 1 {f = 1; next} f && /^```python/ {p = 1; next} p && /^```/ {exit} p' "$DOC"; }
block "## Reading a session with h5py" >"$T/read.py"
block "## Loading a checkpoint into PyTorch" >"$T/load.py"
[ -s "$T/read.py" ] && ok "sessions/README.md h5py block found ($(wc -l <"$T/read.py") lines)" || bad "no h5py block in $DOC"
[ -s "$T/load.py" ] && ok "sessions/README.md PyTorch block found ($(wc -l <"$T/load.py") lines)" || bad "no PyTorch block in $DOC"

if [ -d "$FM" ]; then
  # a 2048 / 1000 image subset of Fashion-MNIST as an IDX folder (the full set trains too long for ctest)
  "$PY" - "$FM" "$T/fashion-mnist" <<'PYEOF' || bad "making the Fashion-MNIST subset"
import gzip, os, sys
src, dst = sys.argv[1:3]; os.makedirs(dst)
for name, n in (("train-images-idx3-ubyte", 2048), ("train-labels-idx1-ubyte", 2048),
                ("t10k-images-idx3-ubyte", 1000), ("t10k-labels-idx1-ubyte", 1000)):
    p = os.path.join(src, name); b = (gzip.open(p + ".gz") if os.path.exists(p + ".gz") else open(p, "rb")).read()
    hdr, per = (16, 784) if "images" in name else (8, 1)
    open(os.path.join(dst, name), "wb").write(b[:4] + n.to_bytes(4, "big") + b[8:hdr] + b[hdr:hdr + n * per])
PYEOF
  i=0
  for args in "--width 0.25" "--width 0.5" "--width 1" "--width 0.5 --head dense" "--width 0.25 --backbone std --bias-mode logits --k 1" \
    "--width 0.25 --head softmoe-batch" "--width 0.25 --eval-cf 1 --priority gate" "--width 0.25 --eval-cf 0.5" \
    "--width 0.25 --schedule linear --tau1 0.2"; do
    i=$((i + 1)); s="$T/s$i"
    if ! "$BIN" train --headless --dataset "$T/fashion-mnist" --epochs 2 --hidden 32 --lr 0.1 --threads 1 --session "$s" $args >"$T/train$i.log" 2>&1; then
      bad "train $args: $(tail -2 "$T/train$i.log")"; continue
    fi
    ck=$(ls "$s"/ckpt-*.h5 | sort -V | tail -1)
    if [ "$have_torch" = 1 ]; then
      out=$("$PY" "$T/load.py" "$ck" "$T/fashion-mnist" 2>&1)
      read -r pt ml tau < <(sed -nE 's/^PyTorch test accuracy ([0-9.]+), moelab ([0-9.]+) \(tau ([0-9.e+-]+)\)$/\1 \2 \3/p' <<<"$out")
      want_tau=0.3; case "$args" in *"--tau1 0.2"*) want_tau=0.2 ;; esac # the default anneal ends at 0.3
      if [ -n "${pt:-}" ] && awk -v a="$pt" -v b="$ml" -v t="$tau" -v w="$want_tau" \
           'BEGIN { d = a - b; if (d < 0) d = -d; e = t - w; if (e < 0) e = -e; exit !(d <= 0.0021 && b > 0.15 && e < 1e-6) }'; then
        ok "PyTorch loader, $args: $out"
      else bad "PyTorch loader, $args: $out"; fi
      # for the record: what loading /weights alone gives
      if [ "$i" = 1 ]; then
        sed 's/for g in ("weights", "buffers")/for g in ("weights",)/; /assert not unexpected/d' "$T/load.py" >"$T/load_nobuf.py"
        echo "note  without /buffers: $("$PY" "$T/load_nobuf.py" "$ck" "$T/fashion-mnist" 2>&1)"
      fi
    fi
    if [ "$i" = 1 ]; then
      out=$("$PY" "$T/read.py" "$s/live.h5" 2>&1); rc=$?
      acc=$("$PY" -c "import h5py,sys; print(f\"{h5py.File(sys.argv[1])['evals/test_acc'][-1]:.4f}\")" "$s/live.h5")
      if [ $rc = 0 ] && grep -q "epoch 2: test accuracy $acc (a fraction)" <<<"$out" && [ "$(grep -c ' 0\.[0-9][0-9] ' <<<"$out")" -ge 10 ]; then
        ok "h5py block on a finished session: epoch 2, accuracy $acc, 10 class rows"
      else bad "h5py block on a finished session (rc $rc, want accuracy $acc): $out"; fi
    fi
  done
else
  echo "SKIP  (checkpoint part) $FM is missing (Debian: dataset-fashion-mnist)"
fi

# the h5py block before the first evaluation: a run with a long first epoch, read while it trains
"$BIN" train --headless --dataset synthetic:32x32x3:10:30000 --epochs 1 --threads 1 --log-every 1 --session "$T/live" >"$T/live.log" 2>&1 &
trainer=$!
got=
for _ in $(seq 1 600); do
  if [ -f "$T/live/live.h5" ] && out=$("$PY" "$T/read.py" "$T/live/live.h5" 2>&1) && grep -q '^step ' <<<"$out"; then got=1; break; fi
  kill -0 "$trainer" 2>/dev/null || break
  sleep 0.2
done
kill -STOP "$trainer" 2>/dev/null
if [ -n "$got" ] && grep -q "no evaluation yet" <<<"$out"; then ok "h5py block while the first epoch trains: $(tr '\n' ' ' <<<"$out")"
elif [ -n "$got" ]; then bad "the run evaluated before the h5py block could read it (machine too fast?): $out"
else bad "h5py block never read the running session: ${out:-}"; fi
kill -CONT "$trainer" 2>/dev/null; kill "$trainer" 2>/dev/null; wait "$trainer" 2>/dev/null; trainer=

# the per-layer block on a backbone-MoE session (moe2 and head) and on the version-1 fixture
block "### Per-layer data with h5py" >"$T/layers.py"
if [ -s "$T/layers.py" ]; then
  "$BIN" train --headless --dataset synthetic:16x16x3:4:512 --width 0.25 --batch 64 --hidden 16 --head moe --log-every 2 --moe-after 2 --moe-hidden 8 \
    --epochs 1 --threads 1 --schedule const --session "$T/bb" >"$T/bb.log" 2>&1 || bad "backbone-MoE run: $(tail -2 "$T/bb.log")"
  out=$("$PY" "$T/layers.py" "$T/bb/live.h5" 2>&1); rc=$?
  if [ $rc = 0 ] && grep -q '^moe2: stage 2, E 8, k 2, tau 1, last kept load ' <<<"$out" && grep -q '^head: stage -1, E 8' <<<"$out" \
     && [ "$(grep -c 'I(class;expert) [0-9.]* nats, test first share' <<<"$out")" = 2 ]; then
    ok "per-layer h5py block: $(tr '\n' ' ' <<<"$out" | cut -c1-160)"
  else bad "per-layer h5py block (rc $rc): $out"; fi
  out=$("$PY" "$T/layers.py" "$SRC/tests/fixtures/v1-moe/live.h5" 2>&1)
  grep -q 'a version-1 session' <<<"$out" && ok "per-layer block on the version-1 fixture: $out" || bad "per-layer block on v1: $out"
else bad "no per-layer h5py block in $DOC"; fi

# the loader's temperature: tau_value / checkpoint_tau against the trainer's own /steps/tau, every
# schedule kind at launch, an anneal (the replacement schedule) and a set tau (the override)
if [ "$have_torch" = 1 ]; then
  printf 'at 9 anneal exp now 0.3\n' >"$T/anneal.txt"; printf 'at 9 set tau 0.37\n' >"$T/settau.txt"
  # train every case, then check them all in one Python process (one import of torch, not 12)
  i=0; cases=(); : >"$T/taucases.txt"
  for args in "--schedule linear" "--schedule cosine --tau1 0.05" "--schedule exp" "--schedule sigmoid --sigmoid-s 12 --sigmoid-c 0.4" \
    "--schedule step" "--schedule step --tau-every 5 --tau-gamma 0.7" "--schedule cosine-restart --tau-every 4 --tau-gamma 2" \
    "--schedule cosine-restart --tau-every 6" "--schedule linear --tau1 0.001 --tau-min 0.05" "--schedule exp --tau-epochs 1" \
    "--commands $T/anneal.txt" "--commands $T/settau.txt"; do
    i=$((i + 1)); s="$T/tau$i"; cases[$i]="$args"
    if ! "$BIN" train --headless --dataset synthetic:8x8x1:4:512 --width 0.25 --hidden 8 --batch 32 --epochs 2 --log-every 1 \
         --threads 1 --tsne-samples 0 --session "$s" $args >"$T/tau$i.log" 2>&1; then
      bad "train $args: $(tail -2 "$T/tau$i.log")"; continue
    fi
    echo "$i $(ls "$s"/ckpt-*.h5 | sort -V | tail -1) $s/live.h5" >>"$T/taucases.txt"
  done
  (cd "$T" && "$PY" - "$T/taucases.txt" <<'PYEOF' >"$T/tau.out" 2>&1)
import sys, h5py, numpy as np
import load
for line in open(sys.argv[1]):
    i, ck, live = line.split()
    try:
        with h5py.File(ck, "r") as f, h5py.File(live, "r") as g:
            sch = f["schedule"]; base, repl = sch["tau_base"][()], sch["tau_repl"][()]
            has_repl, has_ovr = int(sch["tau_has_replacement"][()]), int(sch["tau_has_override"][()])
            ovr_step = int(sch["tau_override_step"][()])
            steps, taus = g["steps/step"][:], g["steps/tau"][:]
            bad = 0
            for s, t in zip(steps, taus):
                p = int(s) - 1                       # the row of step s holds the tau its step was run with
                if has_ovr and p >= ovr_step: want = float(sch["tau_override"][()])
                elif has_repl and p >= int(repl["start"]): want = load.tau_value(repl, p)
                else: want = load.tau_value(base, p)
                if np.float32(want) != np.float32(t):
                    bad += 1; print(f"case {i}: step {s}: tau_value {want!r}, moelab {float(t)!r}")
            ct = load.checkpoint_tau(f)
            print(f"case {i}: rows {len(steps)} differ {bad} checkpoint_tau {ct:.6g} at step {int(f.attrs['step'])}")
    except Exception as e:
        print(f"case {i}: error {e!r}")
PYEOF
  for i in "${!cases[@]}"; do
    args=${cases[$i]}
    grep -q "^$i " "$T/taucases.txt" || continue # its training failed (reported above)
    out=$(grep "^case $i: " "$T/tau.out" | sed "s/^case $i: //")
    if grep -q "^rows [0-9]* differ 0 " <<<"$out"; then ok "tau_value, $args: $(tail -1 <<<"$out")"
    else bad "tau_value, $args: $(head -5 <<<"${out:-$(tail -5 "$T/tau.out")}")"; fi
    case "$args" in
      *settau*) grep -q "checkpoint_tau 0.37 " <<<"$out" && ok "checkpoint_tau after set tau: 0.37" || bad "checkpoint_tau after set tau: $out" ;;
      *anneal*) grep -q "checkpoint_tau 0.3 " <<<"$out" && ok "checkpoint_tau at the end of an anneal to 0.3" || bad "checkpoint_tau after anneal: $out" ;;
    esac
  done
fi

echo "t_pysnippets: $pass passed, $fail failed"
[ "$fail" = 0 ]
