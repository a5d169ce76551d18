#!/usr/bin/env bash
# t_plot.sh — `moelab plot` end to end: a real training session (Fashion-MNIST, 1 epoch at width
# 0.25 with a `set tau` command; synthetic data when the dataset is missing or MOELAB_QUICK is
# set), a small sweep (backbone x hidden x head, 2 seeds) and a comparison of 3 sessions, each in
# all three formats. Every file is checked: pdfinfo parses the PDF and pdffonts shows its fonts
# embedded, xmllint and rsvg-convert parse the SVG, libpng decodes the PNG (tests/test_fig.c
# --png: 8-bit RGB, pHYs 300 dpi, 3.5 or 7 in wide, not blank). final_metrics.csv has a row per
# session. Bad input (missing session, damaged file, a file that crashes the reader, epoch out of range, bad options) gives a
# one-line message and exit 1 or 2. Tools that are missing are skipped with a message.
set -u
BIN=${1:?usage: t_plot.sh path/to/moelab}
BIN=$(cd "$(dirname "$BIN")" && pwd)/$(basename "$BIN")
TEST_FIG=$(dirname "$BIN")/test_fig
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
cd "$T"
pass=0; fail=0
ok()  { echo "PASS  $*"; pass=$((pass + 1)); }
bad() { echo "FAIL  $*"; fail=$((fail + 1)); }
check() { local msg=$1; shift; if "$@"; then ok "$msg"; else bad "$msg"; fi; }
have() { command -v "$1" > /dev/null 2>&1; }

# Every figure NAME in DIR in every format is a valid file.
valid_figs() { # DIR NAME...
  local dir=$1; shift
  local pngs=()
  for n in "$@"; do
    local f=$dir/$n
    check "$n.pdf, .svg, .png written" [ -s "$f.pdf" -a -s "$f.svg" -a -s "$f.png" ]
    if have pdfinfo; then
      check "$n.pdf: pdfinfo parses it, one page 252 or 504 pt wide" \
        grep -Eq '^Page size: +(252|504)(\.[0-9]+)? x [0-9.]+ pts' <(pdfinfo "$f.pdf" 2>&1)
      check "$n.pdf: every font embedded" \
        awk 'NR > 2 { n++; if ($(NF-4) != "yes") bad = 1 } END { exit !(n > 0 && !bad) }' <(pdffonts "$f.pdf" 2>&1)
    fi
    have xmllint && check "$n.svg: well-formed XML (xmllint)" xmllint --noout "$f.svg"
    have rsvg-convert && check "$n.svg: rsvg-convert renders it" rsvg-convert -o "$f.svg.png" "$f.svg"
    pngs+=("$f.png")
  done
  if [ -x "$TEST_FIG" ]; then
    "$TEST_FIG" --png "${pngs[@]}" > png.log 2>&1; local rc=$?
    check "libpng decodes the ${#pngs[@]} PNGs: RGB, 300 dpi, 3.5/7 in ($(grep -c '^ok' png.log) checks)" [ $rc = 0 ]
    [ $rc = 0 ] || grep FAIL png.log
  else
    echo "SKIP  PNG decoding: $TEST_FIG not built"
  fi
}
have pdfinfo || echo "SKIP  pdfinfo/pdffonts (poppler-utils) not installed: PDFs not parsed"
have xmllint || echo "SKIP  xmllint (libxml2-utils) not installed"
have rsvg-convert || echo "SKIP  rsvg-convert (librsvg2-bin) not installed"

# 1. one session
FM=/usr/share/datasets/fashion-mnist
if [ -z "${MOELAB_QUICK:-}" ] && [ -d "$FM" ]; then
  DATA=(--dataset fashion-mnist); AT=100
else
  echo "NOTE  synthetic data (MOELAB_QUICK or no $FM)"
  DATA=(--dataset synthetic:28x28x1:10:2000); AT=5
fi
printf 'at %d set tau 0.5\n' "$AT" > cmds
"$BIN" train --headless "${DATA[@]}" --width 0.25 --hidden 64 --epochs 1 --threads 1 --log-every 5 \
  --commands cmds --session S > train.log 2>&1
check "a 1-epoch session trains" grep -q 'finished' train.log
"$BIN" plot S --format all > plot.log 2>&1; rc=$?
check "moelab plot S --format all exits 0" [ $rc = 0 ]
SESSION_FIGS="curves class_expert expert_load temperature routing tsne_expert tsne_class"
valid_figs S/figures $SESSION_FIGS
# drops_class (3 formats) only when the run's capacity dropped pairs (cf 1.25 usually does)
nd=0; [ -e S/figures/drops_class.pdf ] && nd=3
check "$((21 + nd)) files reported (21, and 3 drops_class files when capacity dropped)" grep -q "^$((21 + nd)) files in S/figures$" plot.log
have pdftotext && check "the temperature figure lists the set tau command" \
  grep -q 'set tau 0.5' <(pdftotext S/figures/temperature.pdf - 2>/dev/null)
# where and when (issue 26): the expert load and temperature figures shade the alarm's spans and name
# each kind in their legend exactly when the session's step rows hold it (/steps/alarm: 2 collapse, 1
# warning or expert death)
levels() { h5dump -y -w 0 -d /steps/alarm "$1" 2>/dev/null | awk '/DATA \{/ { d++; next } d == 1 && /\}/ { exit } d == 1' |
  tr -s ', ' '\n\n' | grep -E '^[0-9]+$' | sort -u | tr '\n' ' '; }
legend_ok() { # PDF LEVELS: "collapse" in the legend iff 2 is among the levels, "warning / expert death" iff 1
  local txt; txt=$(pdftotext "$1" - 2>/dev/null | tr '\n' ' ')
  local c=0 w=0; grep -q 'collapse' <<<"$txt" && c=1; grep -q 'warning / expert death' <<<"$txt" && w=1
  [ "$c" = "$(grep -qw 2 <<<"$2" && echo 1 || echo 0)" ] && [ "$w" = "$(grep -qw 1 <<<"$2" && echo 1 || echo 0)" ]
}
if have pdftotext && have h5dump; then
  lv=$(levels S/live.h5)
  check "S/live.h5 has an alarm column (levels: ${lv:-none})" [ -n "$lv" ]
  for f in expert_load temperature; do
    check "$f.pdf: its legend names the alarm kinds the step rows hold (levels $lv)" legend_ok "S/figures/$f.pdf" "$lv"
  done
fi
"$BIN" plot S --format png --epoch 1 --out E1 > e1.log 2>&1
check "--epoch 1 --out E1 --format png: only PNGs, in E1" [ -s E1/class_expert.png -a ! -e E1/curves.pdf ]

# 1a. a small router that collapses (synthetic, 6 epochs, exp schedule to tau 0.1): its alarm spans
# are shaded, and the legend says so
mkdir -p AC
"$BIN" train --headless --dataset synthetic:16x16x3:6:1024 --width 0.25 --batch 32 --experts 4 --hidden 16 --threads 1 \
  --epochs 6 --log-every 4 --seed 1 --schedule exp --tau0 1 --tau1 0.1 --session AC/C > trainc.log 2>&1
"$BIN" plot AC/C --format pdf --out AC/figures > plotc.log 2>&1; rc=$?
check "moelab plot of the collapsing run exits 0" [ $rc = 0 ]
if have pdftotext && have h5dump; then
  lv=$(levels AC/C/live.h5)
  check "the collapsing run's step rows hold a collapse (levels: $lv)" grep -qw 2 <<<"$lv"
  for f in expert_load temperature; do
    check "AC $f.pdf: the legend names the alarm kinds the step rows hold (levels $lv)" legend_ok "AC/figures/$f.pdf" "$lv"
  done
fi

# 1b. two routed layers (a backbone MoE layer after stage 2 and the moe head): the primary layer's
# figures as before, and each layer's routing figures named by the layer, titled with it, each
# following its own temperature plan (a `set tau 0.5 @moe2` marks moe2's figure only)
# (in a folder of its own: the browser checks below list the sessions of .)
printf 'at 3 set tau 0.5 @moe2\n' > cmds2
mkdir -p LL
"$BIN" train --headless --dataset synthetic:16x16x3:4:256 --width 0.25 --batch 32 --experts 4 --hidden 16 --epochs 2 \
  --threads 1 --log-every 2 --moe-after 2 --head moe --commands cmds2 --session LL/L > trainl.log 2>&1
check "a two-layer session trains" grep -q 'finished' trainl.log
"$BIN" plot LL/L --format all --out L/figures > plotl.log 2>&1; rc=$?
check "moelab plot L (two routed layers) exits 0" [ $rc = 0 ]
LAYER_FIGS="class_expert expert_load temperature routing tsne_expert tsne_class"
valid_figs L/figures $SESSION_FIGS
for l in moe2 head; do valid_figs L/figures $(for f in $LAYER_FIGS; do printf '%s_%s ' "$f" "$l"; done); done
nd=$(ls L/figures/drops_class*.pdf 2>/dev/null | wc -l)
check "7 + 2 x 6 figures (and $nd drops_class figures) in 3 formats reported" grep -q "^$((57 + 3 * nd)) files in L/figures$" plotl.log
if have pdftotext; then
  # (the title names the run by its configuration and may wrap onto two lines)
  check "class_expert_moe2's title names moe2" grep -q 'moe E=4 k=2 h=16 + moe2 .* · moe2: test set' <(pdftotext L/figures/class_expert_moe2.pdf - 2>/dev/null | tr '\n' ' ')
  check "class_expert_head's title names the head" grep -q 'moe E=4 k=2 h=16 + moe2 .* · head: test set' <(pdftotext L/figures/class_expert_head.pdf - 2>/dev/null | tr '\n' ' ')
  check "moe2's temperature figure marks its set tau @moe2" \
    grep -q 'set tau 0.5 @moe2' <(pdftotext L/figures/temperature_moe2.pdf - 2>/dev/null)
  check "the head's temperature figure does not" \
    bash -c "! pdftotext L/figures/temperature_head.pdf - 2>/dev/null | grep -q 'set tau 0.5'"
  check "nor does the primary layer's (the head's) temperature figure" \
    bash -c "! pdftotext L/figures/temperature.pdf - 2>/dev/null | grep -q 'set tau 0.5'"
fi

# 2. a sweep
"$BIN" sweep --dataset synthetic:16x16x3:4:256 --width 0.25 --batch 32 --experts 4 --epochs 1 --threads 1 \
  --vary backbone=dw,std --vary hidden=16,32 --vary head=moe,dense --seeds 2 --out W > sweep.log 2>&1
check "a 16-run sweep finishes" [ -s W/sweep.h5 ]
"$BIN" plot W --format all > wplot.log 2>&1; rc=$?
check "moelab plot W (a sweep folder) exits 0" [ $rc = 0 ]
valid_figs W/figures gap_rho configs
check "a hidden x head sweep gets the claim-1 verdict block in verdict.txt" \
  grep -Eq '(supports|contradicts|inconclusive)' W/figures/verdict.txt
if have pdftotext; then
  check "the configs figure's title carries the same verdict" \
    [ "$(pdftotext W/figures/configs.pdf - | tr '\n' ' ' | grep -oE 'verdict: [a-z]+' | head -1)" = \
      "verdict: $(grep -oE '(supports|contradicts|inconclusive)' W/figures/verdict.txt | tail -1)" ]
fi
"$BIN" plot W/sweep.h5 --format svg --out W2 > w2.log 2>&1
check "moelab plot W/sweep.h5 works too" [ -s W2/gap_rho.svg ]
if have pdftotext; then
  check "gap_rho labels both backbones" [ "$(pdftotext W/figures/gap_rho.pdf - | grep -cE 'backbone (dw|std)')" = 2 ]
  # every configuration has finished runs, so a realized rho: the x axis says it uses it
  check "gap_rho: x is the realized rho (axis label)" bash -c "pdftotext W/figures/gap_rho.pdf - | tr '\n' ' ' | grep -q 'FLOPs, realized'"
fi

# 3. comparing sessions
R1="W/backbone=dw,hidden=16,head=moe,seed=1"; R2="W/backbone=dw,hidden=16,head=dense,seed=1"
"$BIN" plot S "$R1" "$R2" --format all --out C > cplot.log 2>&1; rc=$?
check "moelab plot S R1 R2 (compare) exits 0" [ $rc = 0 ]
valid_figs C compare_curves compare_class_expert compare_table
check "final_metrics.csv: a header and 3 rows" [ "$(python3 -c 'import csv,sys; print(len(list(csv.DictReader(open(sys.argv[1])))))' C/final_metrics.csv)" = 3 ]
check "final_metrics.csv: the dense run has head dense and a test accuracy" \
  python3 -c 'import csv,sys; r=list(csv.DictReader(open(sys.argv[1]))); d=[x for x in r if x["head"]=="dense"]; sys.exit(not (len(d)==1 and 0<float(d[0]["test_acc"])<=1))' C/final_metrics.csv

# 4. bad input
expect() { # WANT_RC PATTERN ARGS...: exit status and a one-line message matching PATTERN
  local want=$1 pat=$2; shift 2
  "$BIN" plot "$@" > bad.out 2> bad.err; local rc=$?
  check "plot $* -> exit $want ($rc), a message with '$pat': $(head -1 bad.err | head -c 120)" \
    [ $rc = "$want" -a "$(grep -c -- "$pat" bad.err)" -ge 1 ]
}
expect 1 "no such session" nosuch
mkdir D; cp S/live.h5 D/live.h5; truncate -s 4000 D/live.h5
expect 1 "D" D
mkdir G; head -c 3000 /dev/urandom > G/live.h5
expect 1 "G" G
# a session whose live.h5 crashes the HDF5 library (MOELAB_FAULT_SESSION_PROBE: the probing child
# raises SIGSEGV): one line with the reason, exit 1, no figure; the same for one run of a comparison
MOELAB_FAULT_SESSION_PROBE=S/live.h5 "$BIN" plot S --format svg --out CR > bad.out 2> bad.err; rc=$?
check "plot of a session that crashes its reader: exit 1 ($rc), one line with the reason, no figure" \
  bash -c "[ $rc = 1 ] && [ \$(wc -l < bad.err) = 1 ] && grep -q '^moelab plot: S/live.h5: reading it crashed the HDF5 library (signal 11): the file is damaged$' bad.err && ! ls CR/*.svg >/dev/null 2>&1"
MOELAB_FAULT_SESSION_PROBE="$R2/live.h5" "$BIN" plot S "$R1" "$R2" --format svg --out CR2 > bad.out 2> bad.err; rc=$?
check "plot comparison with a run that crashes its reader: exit 1 ($rc), the reason names it" \
  bash -c "[ $rc = 1 ] && grep -q 'seed=1/live.h5: reading it crashed the HDF5 library (signal 11)' bad.err"
expect 2 "evaluations at epochs 1..1" S --epoch 7
expect 2 "epoch" S --epoch -1
expect 2 "format" S --format gif
expect 2 "unknown option" S --bogus
expect 2 "at most 8" S S S S S S S S S
expect 2 "sweep" W S
expect 2 "sweep" W --epoch 1
expect 2 "give a session" 
check "moelab help lists plot" grep -q '^  plot ' <("$BIN" help)
check "moelab plot --help exits 0 and names the figures" grep -q 'gap_rho' <("$BIN" plot --help)

# 5. the browser's `p` key (tmux on a private socket)
if have tmux; then
  TM=(tmux -L moelabplot-$$ -f /dev/null)
  trap '"${TM[@]}" kill-server >/dev/null 2>&1; rm -rf "$T"' EXIT
  "${TM[@]}" new-session -d -s keepalive "sleep 100000" >/dev/null 2>&1
  cap() { "${TM[@]}" capture-pane -p -t br 2>/dev/null; }
  wait_for() { local i; for ((i = 0; i < ${2:-20} * 10; i++)); do cap | grep -Eq -- "$1" && return 0; sleep 0.1; done; return 1; }
  browse() { "${TM[@]}" kill-session -t br >/dev/null 2>&1
    "${TM[@]}" new-session -d -x 120 -y 40 -s br "cd '$T' && env LANG=C.UTF-8 TERM=xterm-256color $BIN browse $*; sleep 100000"; }
  mkdir -p L; cp -r "$R1" L/a; cp -r "$R2" L/b; cp -r S L/s; rm -rf L/s/figures
  browse L/s
  check "browser: the session opens" wait_for 'Class x expert' 20
  "${TM[@]}" send-keys -t br p
  check "browser: p says where the figures went" wait_for 'figures written: [0-9]+ files in L/s/figures' 60
  check "browser: p wrote the session's PDFs and PNGs" [ -s L/s/figures/curves.pdf -a -s L/s/figures/class_expert.png -a ! -e L/s/figures/curves.svg ]
  browse L
  check "browser: the list" wait_for 'Enter open' 20
  "${TM[@]}" send-keys -t br g; "${TM[@]}" send-keys -t br m; "${TM[@]}" send-keys -t br m
  "${TM[@]}" send-keys -t br c
  check "browser: two sessions compared" wait_for 'p figures' 20
  "${TM[@]}" send-keys -t br p
  check "browser: p on the compare screen writes the comparison" wait_for 'figures written: [0-9]+ files in figures-compare' 60
  check "browser: compare_curves.pdf and final_metrics.csv with 2 rows" \
    [ -s figures-compare/compare_curves.pdf -a "$(wc -l < figures-compare/final_metrics.csv)" = 3 ]
  # the 3..8-run compare screen: p writes the multi-run figures of all three
  rm -rf figures-compare
  browse L
  check "browser: the list (again)" wait_for 'Enter open' 20
  "${TM[@]}" send-keys -t br g; for i in 1 2 3; do "${TM[@]}" send-keys -t br m; done
  "${TM[@]}" send-keys -t br c
  check "browser: three sessions compared (the 3-8 screen offers p)" wait_for 'compare .* 3 runs' 20
  check "browser: its hint row names p" wait_for 'p figures' 5
  "${TM[@]}" send-keys -t br p
  check "browser: p on the 3-run compare writes the comparison" wait_for 'figures written: [0-9]+ files in figures-compare' 60
  check "browser: compare_curves.pdf, compare_class_expert.png and final_metrics.csv with 3 rows" \
    [ -s figures-compare/compare_curves.pdf -a -s figures-compare/compare_class_expert.png -a "$(wc -l < figures-compare/final_metrics.csv)" = 4 ]
else
  echo "SKIP  tmux not installed: the browser's p key is not tested"
fi

echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
