#!/usr/bin/env bash
# t_dropsview.sh — the browser's drops view (issue 29 item 3): in a session whose capacity must drop
# (--cf 0.3), `d` turns the class x expert panel from the test first choices into the training
# pairs dropped by capacity per class x expert; the cells show the counts of /evals/drop_class_expert
# at the cursor's epoch (checked against h5py for epochs 2 and 1), the legend the epoch's total, and
# `d` again goes back. A soft head drops nothing: its cells and total are 0. 120x40, the panel zoomed (z).
BIN=${1:?usage: t_dropsview.sh path/to/moelab}
TMUX_NAME=moelab-dropsview
. "$(dirname "$0")/tmux_harness.sh"
cd "$T" || exit 1
TRAIN=(train --headless --dataset synthetic:16x16x3:4:512 --width 0.25 --batch 32 --experts 4 --hidden 16 --threads 1 --epochs 2)
"$BIN" "${TRAIN[@]}" --cf 0.3 --session D > D.log 2>&1 || bad "training: $(tail -2 D.log)"

# the counts of the last and the first evaluation, one line per class: "NAME c0 c1 c2 c3"
rows() {
  /usr/bin/python3 - "$1" <<'PY'
import h5py, sys
with h5py.File("D/live.h5", "r") as f:
    d = f["evals/drop_class_expert"][int(sys.argv[1])]
    names = [n.decode() if isinstance(n, bytes) else str(n) for n in f["run/class_names"][:]]
    for k, row in enumerate(d):
        print(names[k], " ".join(str(int(v)) for v in row), int(d.sum()))
PY
}
"${TM[@]}" new-session -d -s "$S" -x 120 -y 40 "'$BIN' browse '$T/D'; echo EXITED; sleep 60"
check "browser: the session opens" wait_for 'Class x expert' 15
keys z # the focused panel (class x expert) zoomed: its title and legend whole
check "z: the class x expert panel zoomed" wait_for 'Class x expert +epoch 2 \(test\)' 5
keys d
check "d: the panel shows the drops" wait_for 'Drops per class x expert +epoch 2 \(train, capacity\)' 5
check_rows() { # EPOCH_ROW: every class row shows its counts in order, the legend the total
  local want ok=1 total=0 name c0 c1 c2 c3 t
  while read -r name c0 c1 c2 c3 t; do
    total=$t
    cap | grep -Eq "$name +$c0 +$c1 +$c2 +$c3( |$)" || { ok=0; echo "      missing row: $name $c0 $c1 $c2 $c3"; }
  done < <(rows "$1")
  cap | grep -q "$total training pairs dropped in the epoch" || { ok=0; echo "      no total $total"; }
  [ $ok = 1 ]
}
check "d: epoch 2's counts as h5py reads them, and the total" check_rows 1
keys Left
check "Left: epoch 1's drops" wait_for 'Drops per class x expert +epoch 1' 5
check "d: epoch 1's counts as h5py reads them" check_rows 0
keys d
check "d again: back to the test first choices" wait_for 'Class x expert +epoch 1 \(test\)' 5
keys q; keys q
check "q q: the browser quits" wait_for 'EXITED' 10
"${TM[@]}" kill-session -t "$S" 2>/dev/null

"$BIN" "${TRAIN[@]}" --head softmoe-sample --session S > S.log 2>&1 || bad "training softmoe: $(tail -2 S.log)"
"${TM[@]}" new-session -d -s "$S" -x 120 -y 40 "'$BIN' browse '$T/S'; echo EXITED; sleep 60"
check "soft head: the session opens" wait_for 'Class x expert' 15
keys z
keys d
check "soft head (nothing to drop): d shows zeros and a total of 0" wait_for '^.0 training pairs dropped in the epoch' 5
check "soft head: every cell 0" test "$(cap | grep -Ec '^.class[0-3] +0 +0 +0 +0 ')" = 4
keys q; keys q
echo "t_dropsview: $pass passed, $fail failed"
[ "$fail" = 0 ]
