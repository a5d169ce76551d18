#!/usr/bin/env bash
# collapse_bench.sh — the collapse alarm on labelled scenarios: short deterministic runs whose
# outcome is known by construction (a biased or starved expert, noise that hides a collapse, a
# distribution shift, healthy references), each with what must fire, in which step window, and
# what must not. Prints one row per scenario and the totals:
#   scenarios N  true T  false F  missed M  late L
# true: an expected event fired in its window; late: it fired after the window; missed: it never
# fired; false: an event fired that the scenario does not expect (nor allow). Exits 1 when F + M > 0.
# usage: tests/collapse_bench.sh path/to/moelab [quick|full] [NAME...]
#   quick (ctest): the synthetic scenarios and one Fashion-MNIST scenario (fm-old-default-2ep, about
#   2 minutes); full: everything, Fashion-MNIST included.
# Events are read from the headless lines "[step S] KIND at step S (...): MESSAGE" (the event log's
# text). A forecast is scored where a scenario names one: the first forecast the run made, against
# the step the view actually crossed (from live.h5's forecast column).
set -uo pipefail
BIN=$(readlink -f "${1:?usage: collapse_bench.sh path/to/moelab [quick|full] [NAME...]}")
MODE=${2:-full}
shift $(($# >= 2 ? 2 : $#))
ONLY=" $* "
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
cd "$T" || exit 1
FM=/usr/share/datasets/fashion-mnist
have_fm=0
[ -r "$FM/train-images-idx3-ubyte.gz" ] || [ -r "$FM/train-images-idx3-ubyte" ] && have_fm=1
THREADS=${THREADS:-$(nproc)}

# name|data(fm or syn)|options|expect|allow
#   expect: space-separated KIND[@LAYER]:LO-HI (the event must fire with its step in [LO, HI])
#   allow:  KIND[@LAYER] that may fire without counting as false (say why in the table of tests/README.md)
#   KIND: collapse-train collapse-clean collapse-eval warning (clean router) idle (router idle) death death-red revival
S=()
# -- synthetic scenarios (quick): 16x16x3, 4 classes, 4096 images, batch 32 -> 128 steps an epoch
# the router settings of the scenarios' construction (before issue 33 changed the defaults): noise
# 1, alpha 0.01 and a constant tau unless a scenario says otherwise
OLD="--noise 1 --alpha 0.01 --schedule const"
SYN="--dataset synthetic:16x16x3:4:4096 --width 0.25 --batch 32 --hidden 32 --threads 1 --no-augment $OLD"
BAL="--bias-mode select --bias-rate 0.01" # the utility bias keeps the routing balanced (DeepSeek style)
S+=("syn-healthy|syn|$SYN --epochs 3 --seed 3 $BAL||idle")
S+=("syn-idle|syn|$SYN --epochs 2 --noise 3 --lr 0.001|idle:100-160|warning collapse-eval")
S+=("syn-learning|syn|$SYN --epochs 3 --noise 0 $BAL||")
S+=("syn-biased|syn|$SYN --epochs 2 --noise 0 --alpha 0 --bias-mode select --bias-rate 0 --init-bias e3=10|collapse-train:100-160 collapse-clean:100-160 collapse-eval:100-260|death death-red")
S+=("syn-hidden-noise2|syn|$SYN --epochs 2 --noise 2 --bias-mode select --bias-rate 0 --init-bias e3=3|warning:100-160 collapse-eval:100-160|death")
S+=("syn-death|syn|$SYN --epochs 3 --noise 0.5 $BAL --init-bias e5=-30|death:100-130|")
S+=("syn-revival|syn|$SYN --epochs 4 --noise 0.5 $BAL --init-bias e5=-30 --commands revive.txt|death:100-130 revival:200-240|")
S+=("syn-softmoe-sample-uniform|syn|$SYN --epochs 2 --head softmoe-sample||")
S+=("syn-softmoe-sample-concentrated|syn|$SYN --epochs 2 --head softmoe-sample --bias-mode logits --bias-rate 0 --init-bias e2=8|collapse-train:100-160 collapse-eval:100-260|death death-red")
S+=("syn-softmoe-batch|syn|$SYN --epochs 2 --head softmoe-batch||")
S+=("syn-backbone-layer|syn|$SYN --epochs 2 --moe-after 2 $BAL --init-bias moe2:e3=20|collapse-train@moe2:100-160 collapse-clean@moe2:100-160 collapse-eval@moe2:100-260|death@moe2 death-red@moe2 idle@head")
S+=("syn-k1-biased|syn|$SYN --epochs 2 --k 1 --noise 0 --alpha 0 --bias-mode select --bias-rate 0 --init-bias e1=10|collapse-train:100-160 collapse-clean:100-160 collapse-eval:100-260|death death-red")
S+=("syn-k1-healthy|syn|$SYN --epochs 3 --k 1 --seed 2 $BAL||idle")
S+=("readme-eval-only|syn|--dataset synthetic:32x32x3:10:768 --epochs 2 --seed 5 $OLD --threads 1|collapse-eval:6-6|")
# -- Fashion-MNIST scenarios (full; data fmq: in the quick subset too). fm-old-default-2ep's
# evaluation share hovers near the threshold with an idle router: it must not flip red
S+=("fm-default-2ep|fm|--epochs 2 --threads $THREADS||")
S+=("fm-old-default-2ep|fmq|--epochs 2 $OLD --threads $THREADS||warning idle")
S+=("fm-sigmoid-2ep|fm|--epochs 2 $OLD --schedule sigmoid --tau1 0.3 --threads $THREADS||warning idle")
S+=("fm-biased-1ep|fm|--epochs 1 --width 0.5 $OLD --noise 0 --alpha 0 --bias-mode select --bias-rate 0 --init-bias e3=10 --threads $THREADS|collapse-train:120-150 collapse-clean:120-150 collapse-eval:120-468|death death-red")
S+=("fm-death-1ep|fm|--epochs 1 --width 0.5 $OLD --bias-mode logits --bias-rate 0 --init-bias e6=-30 --threads $THREADS|death:120-130|warning idle")

printf 'at 200 set noise 10\nat 300 set noise 0.5\n' > revive.txt
N=0 TT=0 F=0 M=0 L=0
printf '%-32s %-58s %-44s %s\n' scenario expected fired verdict
for row in "${S[@]}"; do
  IFS='|' read -r name data opts expect allow <<<"$row"
  [ "$ONLY" != "  " ] && [[ "$ONLY" != *" $name "* ]] && continue
  [ "$MODE" = quick ] && [ "$data" = fm ] && continue
  if [ "${data#fm}" != "$data" ] && [ $have_fm = 0 ]; then
    printf '%-32s skipped: Fashion-MNIST is not installed (apt-get install dataset-fashion-mnist)\n' "$name"
    continue
  fi
  N=$((N + 1))
  t0=$(date +%s.%N)
  # shellcheck disable=SC2086
  "$BIN" train --headless $opts --session "$name" > "$name.log" 2>&1
  rc=$?
  secs=$(echo "$(date +%s.%N) - $t0" | bc)
  # the fired events: KIND[@LAYER] STEP SEVERITY
  grep -E '^\[step [0-9]+\] (collapse|warning|expert death|expert revival) at step' "$name.log" |
    awk '{
      step = $2; sub(/\]/, "", step)
      line = $0; kind = ""
      if (line ~ /\] expert revival/) kind = "revival"
      else if (line ~ /\] expert death/) kind = (line ~ /COLLAPSE: EXPERT DEATH/) ? "death-red" : "death"
      else if (line ~ /\(idle router/) kind = "idle"
      else if (line ~ /\] warning at/) kind = "warning"
      else if (line ~ /\(training view/) kind = "collapse-train"
      else if (line ~ /\(clean router view/) kind = "collapse-clean"
      else if (line ~ /\(evaluation view/) kind = "collapse-eval"
      layer = ""
      if (match(line, /(COLLAPSE|WARNING|DEATH|REVIVAL)(: EXPERT DEATH)? (moe[0-3]|head) /)) {
        w = substr(line, RSTART, RLENGTH); n = split(w, p, " "); layer = "@" p[n]
      }
      sev = (line ~ /: COLLAPSE/) ? "red" : (kind == "revival" ? "info" : "yellow")
      print kind layer, step, sev
    }' > "$name.ev"
  fired="" verdict="" f=0 m=0 l=0 t=0
  while read -r k s sev; do fired+="$k:$s($sev) "; done < "$name.ev"
  # every expectation: the first matching event
  for ex in $expect; do
    kind=${ex%%:*} win=${ex#*:}; lo=${win%-*} hi=${win#*-}
    s=$(awk -v k="$kind" '$1 == k {print $2; exit}' "$name.ev")
    if [ -z "$s" ]; then m=$((m + 1)); verdict+="MISSED $kind; "
    elif [ "$s" -gt "$hi" ]; then l=$((l + 1)); t=$((t + 1)); verdict+="LATE $kind ($s > $hi); "
    elif [ "$s" -lt "$lo" ]; then f=$((f + 1)); verdict+="EARLY $kind ($s < $lo); "
    else t=$((t + 1)); fi
  done
  # every fired event is expected or allowed (a kind expected once may fire again: later episodes)
  while read -r k s sev; do
    ok=0
    for ex in $expect; do [ "${ex%%:*}" = "$k" ] && ok=1; done
    for al in $allow; do [ "$al" = "$k" ] && ok=1; done
    [ "$rc" != 0 ] && ok=0
    if [ $ok = 0 ]; then f=$((f + 1)); verdict+="FALSE $k at $s; "; fi
  done < "$name.ev"
  [ "$rc" != 0 ] && { f=$((f + 1)); verdict+="run failed (exit $rc); "; }
  [ -z "$verdict" ] && verdict="ok"
  TT=$((TT + t)) F=$((F + f)) M=$((M + m)) L=$((L + l))
  printf '%-32s %-58s %-44s %s (%.0f s)\n' "$name" "${expect:-nothing}${allow:+ (may: $allow)}" "${fired:-nothing}" "$verdict" "$secs"
  # the forecast: the first one the run made, and when the clean view crossed
  if command -v h5dump >/dev/null && [ -f "$name/live.h5" ] && [[ "$expect" == *collapse-clean* || "$expect" == *warning* ]]; then
    h5dump -d /steps/step -d /steps/forecast -y -w 0 "$name/live.h5" 2>/dev/null |
      awk '/DATASET "\/steps\/step"/ {m = 1; next} /DATASET "\/steps\/forecast"/ {m = 2; next}
           m && /DATA/ {d = m; next} d && /^ *[-0-9]/ {gsub(/,/, " "); for (i = 1; i <= NF; i++) v[d, ++n[d]] = $i}
           END {for (i = 1; i <= n[1]; i++) if (v[2, i] >= 0) {printf "  forecast: at step %d, ~%d steps -> step %d\n", v[1, i], v[2, i], v[1, i] + v[2, i]; exit}}'
  fi
done
echo "scenarios $N  true $TT  false $F  missed $M  late $L"
[ $((F + M)) = 0 ]
