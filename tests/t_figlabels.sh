#!/usr/bin/env bash
# t_figlabels.sh — comparison figures name each run by what differs (issue #40 item 7): three tiny
# runs that differ in width, seed and dataset are plotted together, and the legend of
# compare_curves.svg, read from the SVG's text side channel (views/fig.h: cairo draws glyph
# outlines, so every SVG also carries its words in <metadata>, each with its role), must be
# exactly the differing options in the stable order (width, seed, the dataset last), while the
# subtitle holds what all runs share and none of what differs. Also: the same words are drawn
# (pdftotext of the PDF), the heatmaps' titles and final_metrics.csv use them, runs that differ in
# nothing keep their folder names, two runs of one configuration among others get their folder
# after the label, --label still wins; the sweep configs figure's legend box lies outside every
# plot area (it covered the moe CI whisker).
set -u
BIN=${1:?usage: t_figlabels.sh path/to/moelab}
BIN=$(cd "$(dirname "$BIN")" && pwd)/$(basename "$BIN")
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
cd "$T" || exit 1
pass=0; fail=0
ok()  { echo "PASS  $*"; pass=$((pass + 1)); }
bad() { echo "FAIL  $*"; fail=$((fail + 1)); }
check() { local what=$1; shift; if "$@"; then ok "$what"; else bad "$what"; fi; }
have() { command -v "$1" > /dev/null 2>&1; }

if ! have xmllint; then
  echo "SKIP  xmllint (libxml2-utils) not installed: the SVG's words cannot be read"
  echo "t_figlabels: 0 passed, 0 failed"
  exit 0
fi

# the words of role ROLE in an SVG, one per line, in drawing order
words() { # SVG ROLE
  xmllint --xpath "//*[local-name()='figure']/*[local-name()='text'][@role='$2']" "$1" 2>/dev/null |
    sed -e 's/<[^>]*role="[^"]*">//g' -e 's#</[^>]*>#\n#g' | sed -e '/^$/d' \
      -e 's/&amp;/\&/g; s/&lt;/</g; s/&gt;/>/g; s/&quot;/"/g'
}
# WANT (lines) equals the words of ROLE in SVG
same_words() { # SVG ROLE WANT
  local got; got=$(words "$1" "$2")
  [ "$got" = "$3" ] || { printf 'want:\n%s\ngot:\n%s\n' "$3" "$got"; return 1; }
}

C=(--epochs 1 --hidden 16 --experts 4 --batch 32 --threads 1 --headless --no-augment)
D1=synthetic:8x8x1:4:256; D3=synthetic:8x8x3:4:256
"$BIN" train "${C[@]}" --dataset "$D1" --width 0.25 --seed 1 --session r1 > r1.log 2>&1 || bad "training r1: $(tail -1 r1.log)"
"$BIN" train "${C[@]}" --dataset "$D1" --width 0.5 --seed 1 --session r2 > r2.log 2>&1 || bad "training r2: $(tail -1 r2.log)"
"$BIN" train "${C[@]}" --dataset "$D3" --width 0.25 --seed 2 --session r3 > r3.log 2>&1 || bad "training r3: $(tail -1 r3.log)"

"$BIN" plot r1 r2 r3 --format svg,pdf --out cmp > cmp.log 2>&1
check "moelab plot r1 r2 r3 exits 0 ($(tail -1 cmp.log))" grep -q '^[0-9]* files in cmp$' cmp.log
check "compare_curves.svg: well-formed XML with its side channel" \
  bash -c "xmllint --noout cmp/compare_curves.svg && grep -q 'urn:moelab:figure' cmp/compare_curves.svg"
L1="width 0.25 seed 1 $D1"; L2="width 0.5 seed 1 $D1"; L3="width 0.25 seed 2 $D3"
check "the legend names exactly what differs: width, seed, dataset" \
  same_words cmp/compare_curves.svg legend "$L1"$'\n'"$L2"$'\n'"$L3"
sub=$(words cmp/compare_curves.svg title | head -1)
check "the subtitle is what all runs share ($sub)" \
  [ "$sub" = "all runs: moe experts 4 k 2 hidden 16 backbone dw epochs 1" ]
# every LABEL in the text T (a title may wrap onto two lines: the lines joined by a space)
has_all() { # T LABEL...
  local t=$1 l; shift
  for l; do grep -qF -- "$l" <<<"$t" || { echo "missing: $l"; return 1; }; done
}
check "compare_class_expert.svg: each heatmap titled by its run's differences" \
  has_all "$(words cmp/compare_class_expert.svg title | tr '\n' ' ')" "$L1" "$L2" "$L3"
check "final_metrics.csv: the run column is the same labels" \
  [ "$(cut -d, -f1 cmp/final_metrics.csv | tail -n +2)" = "$L1"$'\n'"$L2"$'\n'"$L3" ]
if have pdftotext; then
  check "compare_curves.pdf draws the same words" \
    has_all "$(pdftotext -raw cmp/compare_curves.pdf - 2>/dev/null | tr '\n' ' ')" "$L1" "$L2" "$L3"
else
  echo "SKIP  pdftotext (poppler-utils) not installed: the PDF's words not read"
fi

# runs that differ in nothing (a copy): their folders; two alike among others: the folder after
cp -r r1 r1b
"$BIN" plot r1 r1b --format svg --out same > same.log 2>&1
check "two runs of one configuration: labelled by their folders" same_words same/compare_curves.svg legend $'r1\nr1b'
"$BIN" plot r1 r1b r2 --format svg --out dup > dup.log 2>&1
check "two alike and one other: the label, then the folder for the alike" \
  same_words dup/compare_curves.svg legend $'width 0.25 (r1)\nwidth 0.25 (r1b)\nwidth 0.5'
"$BIN" plot r1 r2 --format svg --out lab --label narrow --label wide > lab.log 2>&1
check "--label still names each run" same_words lab/compare_curves.svg legend $'narrow\nwide'

# the sweep configs figure: its legend outside every plot area
"$BIN" sweep --dataset synthetic:8x8x1:4:128 --width 0.25 --batch 32 --experts 4 --hidden 16 --epochs 1 --threads 1 \
  --vary head=moe,dense --seeds 2 --out W > sw.log 2>&1 || bad "sweep: $(tail -1 sw.log)"
"$BIN" plot W --format svg --out Wf > wplot.log 2>&1
# every legend box against every plot box: no overlap (points)
legend_outside() { # SVG
  xmllint --xpath "//*[local-name()='box']" "$1" 2>/dev/null | tr '<' '\n' | sed -n 's/.*role="\([a-z]*\)" x="\([-0-9.]*\)" y="\([-0-9.]*\)" w="\([0-9.]*\)" h="\([0-9.]*\)".*/\1 \2 \3 \4 \5/p' |
    awk 'BEGIN { np = 0; nl = 0 }
         $1 == "plot" { px[np] = $2; py[np] = $3; pw[np] = $4; ph[np] = $5; np++ }
         $1 == "legend" { lx[nl] = $2; ly[nl] = $3; lw[nl] = $4; lh[nl] = $5; nl++ }
         END { if (!np || !nl) exit 1
               for (i = 0; i < nl; i++) for (j = 0; j < np; j++)
                 if (lx[i] < px[j] + pw[j] && lx[i] + lw[i] > px[j] && ly[i] < py[j] + ph[j] && ly[i] + lh[i] > py[j]) {
                   printf "legend %g,%g %gx%g over plot %g,%g %gx%g\n", lx[i], ly[i], lw[i], lh[i], px[j], py[j], pw[j], ph[j]; exit 1 } }'
}
check "sweep configs.svg: the legend names the head (moe)" same_words Wf/configs.svg legend moe
check "sweep configs.svg: its legend box lies outside the plot area" legend_outside Wf/configs.svg

echo "t_figlabels: $pass passed, $fail failed"
[ "$fail" = 0 ]
