#!/usr/bin/env bash
# t_profile.sh — `moelab bench --profile` and `--scaling`: for each head (and for the backbone-MoE
# model of `--model backbone-moe`, whose routed layers get their own rows), the per-layer table has a
# row for every layer, its printed rows add up to its "sum of rows", and the sum of rows is the
# step's wall time within 10% (a consistency check of the accounting: every part of a step is in
# some row, none twice; no absolute time is asserted). The bench line carries the evaluation rate
# and --scaling prints a 1-thread rate and a speed-up.
set -u
. "$(cd "$(dirname "$0")" && pwd)/bench_field.sh"
BIN=${1:?usage: t_profile.sh path/to/moelab}
pass=0; fail=0
ok()  { echo "PASS  $*"; pass=$((pass + 1)); }
bad() { echo "FAIL  $*"; fail=$((fail + 1)); }
# MOELAB_QUICK (sanitizer builds): a narrower, smaller-batch model
small=()
[ -n "${MOELAB_QUICK:-}" ] && small=(--width 0.25 --batch 16)
out=$("$BIN" bench --profile --scaling --threads 1 --steps 3 --repeat 1 --heads dense,moe "${small[@]}" 2>&1)
rc=$?
[ "$rc" = 0 ] && ok "bench --profile --scaling exits 0" || bad "bench --profile exit $rc: $(head -c 400 <<<"$out")"

for head in dense moe; do
  table=$(awk -v h="$head" '$0 ~ "^profile, " h " head" {on=1; next} on && /^profile head=/ {exit} on' <<<"$out")
  for layer in stem block1.dw block1.pw block2.dw block2.pw block3.dw block3.pw pool head classifier loss+update; do
    if grep -q "^  $layer " <<<"$table"; then ok "$head: profile row $layer"; else bad "$head: no profile row $layer"; fi
  done
  # the printed totals (column 4) of the layer rows against the printed sum of rows
  chk=$(awk '/^  (sum of rows|step|layer) / {if ($1 == "sum") s = $4; next} /^  [a-z]/ {t += $4; n++}
             END {d = t - s; if (d < 0) d = -d; printf "%d %.2f %.2f %s", n, t, s, (n >= 11 && d <= 0.01 * n + 0.01) ? "ok" : "bad"}' <<<"$table")
  [ "${chk##* }" = ok ] && ok "$head: the rows add up to the sum of rows ($chk)" || bad "$head: rows vs sum of rows: $chk"
  line=$(grep "^profile head=$head " <<<"$out")
  rows=$(sed -E 's/.*rows_ms=([0-9.]+).*/\1/' <<<"$line")
  step=$(sed -E 's/.*step_ms=([0-9.]+).*/\1/' <<<"$line")
  gemm=$(sed -E 's/.*gemm_ms=([0-9.]+).*/\1/' <<<"$line")
  if [ -n "$line" ] && awk -v r="$rows" -v s="$step" 'BEGIN {exit !(s > 0 && r / s >= 0.9 && r / s <= 1.1)}'; then
    ok "$head: per-layer times add up to the step time within 10% ($rows vs $step ms)"
  else bad "$head: per-layer sum $rows ms vs step $step ms (line: $line)"; fi
  if awk -v g="$gemm" -v r="$rows" 'BEGIN {exit !(g > 0 && g < r)}'; then ok "$head: GEMM time in (0, step) ($gemm ms)"
  else bad "$head: GEMM time $gemm ms of $rows"; fi
  b=$(grep "^bench head=$head " <<<"$out")
  if grep -Eq 'eval_img_per_s=[0-9]*[1-9][0-9]*\.' <<<"$b" && grep -q 'eval_ratio=' <<<"$b"; then ok "$head: evaluation rate printed"
  else bad "$head: no evaluation rate in: $b"; fi
  # the benchmark scripts read the training rate with bench_field: the train/s column, not the eval rate
  # (the column is the rate rounded to an integer, the bench line has it to 0.1: 615.46 is 615 and 615.5)
  tr=$(bench_field "$b" img_per_s); er=$(bench_field "$b" eval_img_per_s)
  col=$(awk -v h="$head" '$1 == h && $2 ~ /^[0-9]+$/ {print $2; exit}' <<<"$out")
  if [ -n "$tr" ] && [ -n "$col" ] && awk -v a="$tr" -v c="$col" -v e="$er" 'BEGIN {d = a - c; exit !(d <= 0.55 && d >= -0.55 && a != e)}'; then
    ok "$head: bench_field img_per_s is the training rate ($tr = train/s $col; eval $er)"
  else bad "$head: bench_field img_per_s '$tr' vs train/s '$col' (eval '$er')"; fi
  if grep -Eq "^scaling head=$head threads=1 img_per_s_1=[0-9.]+ img_per_s_n=[0-9.]+ speedup=[0-9.]+" <<<"$out"; then
    ok "$head: --scaling prints the speed-up"
  else bad "$head: no scaling line"; fi
done

# the backbone-MoE model (`--model backbone-moe`): a row for each routed layer after its stage,
# the rows add up, and the bench line has the evaluation rate
out=$("$BIN" bench --model backbone-moe --profile --threads 1 --steps 2 --repeat 1 "${small[@]}" 2>&1)
rc=$?
[ "$rc" = 0 ] && ok "bench --model backbone-moe --profile exits 0" || bad "backbone-moe profile exit $rc: $(head -c 400 <<<"$out")"
table=$(awk '/^profile, backbone-moe model/ {on=1; next} on && /^profile model=/ {exit} on' <<<"$out")
order=$(awk '/^  [a-z]/ && !/^  (layer|sum of rows|step) / {printf "%s ", $1}' <<<"$table")
want="stem block1.dw block1.pw block2.dw block2.pw moe2 block3.dw block3.pw moe3 pool head classifier loss+update "
[ "$order" = "$want" ] && ok "backbone-moe: profile rows in network order ($order)" || bad "backbone-moe rows: '$order', want '$want'"
chk=$(awk '/^  (sum of rows|step|layer) / {if ($1 == "sum") s = $4; next} /^  [a-z]/ {t += $4; n++}
           END {d = t - s; if (d < 0) d = -d; printf "%d %.2f %.2f %s", n, t, s, (n >= 13 && d <= 0.01 * n + 0.01) ? "ok" : "bad"}' <<<"$table")
[ "${chk##* }" = ok ] && ok "backbone-moe: the rows add up to the sum of rows ($chk)" || bad "backbone-moe: rows vs sum of rows: $chk"
line=$(grep "^profile model=backbone-moe " <<<"$out")
rows=$(sed -E 's/.*rows_ms=([0-9.]+).*/\1/' <<<"$line")
step=$(sed -E 's/.*step_ms=([0-9.]+).*/\1/' <<<"$line")
gemm=$(sed -E 's/.*gemm_ms=([0-9.]+).*/\1/' <<<"$line")
if [ -n "$line" ] && awk -v r="$rows" -v s="$step" 'BEGIN {exit !(s > 0 && r / s >= 0.9 && r / s <= 1.1)}'; then
  ok "backbone-moe: per-layer times add up to the step time within 10% ($rows vs $step ms)"
else bad "backbone-moe: per-layer sum $rows ms vs step $step ms (line: $line)"; fi
if awk -v g="$gemm" -v r="$rows" 'BEGIN {exit !(g > 0 && g < r)}'; then ok "backbone-moe: GEMM time in (0, step) ($gemm ms)"
else bad "backbone-moe: GEMM time $gemm ms of $rows"; fi
for layer in moe2 moe3; do
  if awk -v l="$layer" '$1 == l {exit !($4 > 0)} END {}' <<<"$table" && grep -q "^  $layer " <<<"$table"; then
    ok "backbone-moe: $layer row has time"
  else bad "backbone-moe: $layer row missing or zero"; fi
done
b=$(grep "^bench model=backbone-moe " <<<"$out")
tr=$(bench_field "$b" img_per_s); er=$(bench_field "$b" eval_img_per_s)
if [ -n "$tr" ] && [ -n "$er" ] && [ "$tr" != "$er" ]; then ok "backbone-moe: training ($tr) and evaluation ($er) rates printed"
else bad "backbone-moe: rates in: $b"; fi

echo "t_profile: $pass passed, $fail failed"
[ "$fail" = 0 ]
