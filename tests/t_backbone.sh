#!/usr/bin/env bash
# t_backbone.sh — routed conv-FFN layers in the backbone, end to end:
#   - `--dry-run` of the 64x64 model the README documents prints both layers with their routed
#     FLOPs, nominal rho per layer, and a total rho in [0.35, 0.45];
#   - bad layer options exit non-zero with a one-line message naming the option;
#   - a short headless run with a backbone MoE layer and a moe head trains, and its rho line is
#     the model total (larger than the head's own share).
set -u
BIN=${1:?usage: t_backbone.sh path/to/moelab}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
pass=0; fail=0
ok()  { echo "PASS  $*"; pass=$((pass + 1)); }
bad() { echo "FAIL  $*"; fail=$((fail + 1)); }

DOC=(--dataset synthetic:64x64x3:100:256 --head dense --moe-after 2,3 --moe-hidden 32,64)
out=$("$BIN" train --dry-run --no-session "${DOC[@]}" 2>&1)
total=$(sed -n 's/^rho\/layer .* total \([0-9.]*\)$/\1/p' <<<"$out")
if [ -n "$total" ] && awk -v r="$total" 'BEGIN { exit !(r >= 0.35 && r <= 0.45) }'; then
  ok "documented 64x64 model: total nominal rho $total in [0.35, 0.45]"
else bad "documented 64x64 model: no total rho in [0.35, 0.45]: $(grep '^rho' <<<"$out")"; fi
if grep -q '^moe2.experts (8) .*8388608 .*one expert 4194304' <<<"$out" &&
   grep -q '^moe3.experts (8) .*8388608 .*one expert 4194304' <<<"$out" &&
   grep -qE '^rho/layer +moe2 0\.2[0-9]+ .*moe3 0\.2[0-9]+' <<<"$out"; then
  ok "dry-run lists moe2 and moe3 with their routed FLOPs and per-layer rho"
else bad "dry-run layer lines: $(grep -E '^moe|^rho' <<<"$out")"; fi

refuse() { # what, expected message part, options...
  local what=$1 want=$2; shift 2
  local msg; msg=$("$BIN" train --dry-run --no-session --dataset synthetic:16x16x3:4:256 "$@" 2>&1)
  local rc=$?
  if [ $rc -ne 0 ] && grep -q -- "$want" <<<"$msg" && [ "$(wc -l <<<"$msg")" -le 2 ]; then
    ok "$what refused (rc $rc): $(head -1 <<<"$msg")"
  else bad "$what: rc $rc, message: $msg"; fi
}
refuse "--moe-after 5" "moe-after" --moe-after 5
refuse "--moe-after x" "moe-after" --moe-after x
refuse "--moe-after 1,,2" "moe-after" --moe-after 1,,2
refuse "--moe-after 2,2" "stage 2 has two layers" --moe-after 2,2
refuse "--moe-after 2 --ffn-after 2" "stage 2 has two layers" --moe-after 2 --ffn-after 2
refuse "--moe-hidden 8,16,32 for two layers" "moe-hidden has 3 values" --moe-after 1,2 --moe-hidden 8,16,32
refuse "--moe-k 3 --moe-experts 2" "larger than E" --moe-after 1 --moe-experts 2 --moe-k 3

log=$T/run.log
if "$BIN" train --headless --threads 2 --no-session --dataset synthetic:16x16x3:4:256 --width 0.25 --batch 32 \
     --experts 4 --hidden 16 --moe-after 2 --moe-hidden 16 --epochs 1 > "$log" 2>&1; then
  rho=$(sed -n 's/.* rho \([0-9.]*\) (nominal \([0-9.]*\)).*/\1 \2/p' "$log" | tail -1)
  head_rho=$("$BIN" train --dry-run --no-session --dataset synthetic:16x16x3:4:256 --width 0.25 --batch 32 \
               --experts 4 --hidden 16 | sed -n 's/^rho *\([0-9.]*\) nominal.*/\1/p')
  if [ -n "$rho" ] && awk -v r="$rho" -v h="$head_rho" 'BEGIN { split(r, a, " "); exit !(a[1] > 0 && a[2] > h + 0.05) }'; then
    ok "backbone MoE + moe head trains; realized/nominal rho $rho, above the head-only model's $head_rho"
  else bad "rho line '$rho' vs head-only $head_rho: $(tail -3 "$log")"; fi
else bad "training run failed: $(tail -3 "$log")"; fi
echo "t_backbone: $pass passed, $fail failed"
[ $fail = 0 ]
