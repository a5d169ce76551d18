#!/usr/bin/env bash
# t_drops.sh — drops per class end to end: a run whose capacity must drop (--cf 0.3, --log-every 1,
# a backbone MoE layer and a moe head) writes /evals/drop_class_expert and each layer's
# /layers/NAME/evals/drop_class_expert; exported as drops_class_expert.csv (and per layer), their
# per-expert sums for each evaluation equal the pairs the step records dropped in that epoch
# (demand - kept in expert_load.csv); `moelab plot` draws drops_class figures; a dropless run's
# counts are all zero and get no figure.
set -u
BIN=${1:?usage: t_drops.sh path/to/moelab}
BIN=$(cd "$(dirname "$BIN")" && pwd)/$(basename "$BIN")
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
cd "$T"
pass=0; fail=0
ok()  { echo "PASS  $*"; pass=$((pass + 1)); }
bad() { echo "FAIL  $*"; fail=$((fail + 1)); }
TRAIN=(train --headless --dataset synthetic:16x16x3:4:512 --width 0.25 --batch 32 --experts 4 --hidden 16 --threads 2 --epochs 2 --log-every 1)

"$BIN" "${TRAIN[@]}" --cf 0.3 --moe-after 2 --session D > D.log 2>&1 || bad "training: $(tail -2 D.log)"
h5dump -H -d /evals/drop_class_expert D/live.h5 > h.txt 2>&1 && grep -q 'DATASPACE  SIMPLE { ( 2, 4, 4 )' h.txt \
  && ok "/evals/drop_class_expert is (2 evaluations, 4 classes, 4 experts)" || bad "/evals/drop_class_expert: $(head -5 h.txt)"
h5dump -H -d /layers/moe2/evals/drop_class_expert D/live.h5 > /dev/null 2>&1 && ok "/layers/moe2/evals/drop_class_expert exists" \
  || bad "no /layers/moe2/evals/drop_class_expert"
"$BIN" export D --csv csv > export.log 2>&1 || bad "export: $(cat export.log)"
for pre in "" layer_moe2_ layer_head_; do
  out=$(/usr/bin/python3 - "csv/${pre}expert_load.csv" "csv/${pre}drops_class_expert.csv" "csv/steps.csv" <<'PY'
import csv, sys
load, drops, steps = sys.argv[1:4]
epoch_of = {int(r["step"]): int(r["epoch"]) for r in csv.DictReader(open(steps))}
want = {}
for r in csv.DictReader(open(load)):
    k = (epoch_of[int(r["step"])], int(r["expert"]))
    want[k] = want.get(k, 0) + int(r["demand_pairs"]) - int(r["kept_pairs"])
got, tot = {}, 0
for r in csv.DictReader(open(drops)):
    ep = int(float(r["epoch"]))
    for key, v in r.items():
        if key.startswith("e") and key.endswith("_dropped"):
            e = int(key[1:-8]); got[(ep, e)] = got.get((ep, e), 0) + int(v)
    tot += int(r["dropped"])
bad = [k for k in want if want[k] != got.get(k)]
print("ok" if not bad and tot > 0 and set(got) == set(want) else "bad", tot, len(want), bad[:3])
PY
)
  [ "${out%% *}" = ok ] && ok "${pre:-top level }drops per class x expert = the step records' demand - kept per epoch and expert ($out)" \
    || bad "${pre:-top level }drops: $out"
done
"$BIN" plot D --out fig --format svg > plot.log 2>&1
[ -s fig/drops_class.svg ] && [ -s fig/drops_class_moe2.svg ] && [ -s fig/drops_class_head.svg ] \
  && ok "plot: drops_class, drops_class_moe2, drops_class_head" || bad "plot: $(ls fig 2>&1 | tr '\n' ' ')"
# dropless (the default evaluation is dropless, training cf <= 0 too): zeros, no figure
"$BIN" "${TRAIN[@]}" --cf 0 --session Z > Z.log 2>&1
"$BIN" export Z --csv zcsv > /dev/null 2>&1
tot=$(awk -F, 'NR > 1 { s += $NF } END { print s + 0 }' zcsv/drops_class_expert.csv 2>/dev/null)
[ "$tot" = 0 ] && ok "--cf 0 (dropless): 0 drops" || bad "--cf 0: $tot drops"
"$BIN" plot Z --out zfig --format svg > /dev/null 2>&1
[ ! -e zfig/drops_class.svg ] && ok "dropless: no drops figure" || bad "dropless: a drops figure"

echo "t_drops: $pass passed, $fail failed"
[ "$fail" = 0 ]
