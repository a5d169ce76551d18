#!/usr/bin/env bash
# t_figtitles.sh — figures ready for a paper (issue 32 item 1): every figure kind of `moelab plot`
# (one session with two routed layers and a logged `set tau`, a comparison of two sessions, a
# sweep) drawn at its own width, at one column (--columns 1) and at two (--columns 2); views/fig.c
# measures every title line with cairo's text extents as it draws it, and `moelab plot` reports a
# line outside its panel or over another title (MOELAB_FIG_CHECK=1 prints how many it measured).
# Also: the default title is the configuration in words, not the folder; --title and --label
# replace it; the temperature marks carry no "# origin" tag; a sweep of different head kinds at one
# rho gets no gap_rho figure (a line through different models), only configs.
set -u
BIN=${1:?usage: t_figtitles.sh path/to/moelab}
BIN=$(cd "$(dirname "$BIN")" && pwd)/$(basename "$BIN")
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
cd "$T" || exit 1
pass=0; fail=0
ok()  { echo "PASS  $*"; pass=$((pass + 1)); }
bad() { echo "FAIL  $*"; fail=$((fail + 1)); }
check() { local what=$1; shift; if "$@"; then ok "$what"; else bad "$what"; fi; }
export MOELAB_FIG_CHECK=1

SYN="--dataset synthetic:16x16x3:4:512 --width 0.25 --batch 32 --hidden 16 --experts 4 --threads 1 --no-augment --headless"
printf 'at 10 set tau 0.5\n' > cmds
"$BIN" train $SYN --epochs 2 --moe-after 2 --commands cmds --session a_long_session_folder_name_20261202-031222 > a.log 2>&1 \
  || { bad "training a: $(tail -2 a.log)"; }
"$BIN" train $SYN --epochs 2 --session b > b.log 2>&1 || bad "training b: $(tail -2 b.log)"
"$BIN" sweep $SYN --epochs 1 --vary head=softmoe-sample,moe,dense --seeds 2 --out sw > sw.log 2>&1 || bad "sweep: $(tail -2 sw.log)"

# plot IN... -- OPTIONS: every title measured, none outside its panel
plot_ok() { # NAME OUTDIR INPUT... [-- OPTIONS]
  local name=$1 out=$2; shift 2
  local ins=() opts=()
  while [ $# -gt 0 ] && [ "$1" != "--" ]; do ins+=("$1"); shift; done
  [ $# -gt 0 ] && shift && opts=("$@")
  "$BIN" plot "${ins[@]}" --out "$out" --format pdf,png "${opts[@]}" > "$out.log" 2>&1
  local rc=$? n
  n=$(sed -n 's/^titles    \([0-9]*\) lines, each inside its panel$/\1/p' "$out.log")
  if [ $rc = 0 ] && [ -n "$n" ] && [ "$n" -gt 0 ] && ! grep -q 'do not fit' "$out.log"; then
    ok "$name: $n title lines, each inside its panel ($(ls "$out"/*.pdf | wc -l) figures)"
  else
    bad "$name: rc $rc: $(grep -E 'do not fit|titles|moelab plot' "$out.log" | head -2)"
  fi
}
for cols in "" 1 2; do
  o=(); [ -n "$cols" ] && o=(-- --columns "$cols")
  tag=${cols:-own}
  plot_ok "one session, width $tag" "one-$tag" a_long_session_folder_name_20261202-031222 "${o[@]}"
  plot_ok "two sessions compared, width $tag" "cmp-$tag" a_long_session_folder_name_20261202-031222 b "${o[@]}"
  plot_ok "a sweep, width $tag" "sw-$tag" sw "${o[@]}"
done
# every kind was drawn at least once
for k in curves class_expert expert_load temperature routing expert_load_moe2 temperature_moe2 routing_moe2; do
  check "one session: $k drawn" test -s "one-own/$k.pdf"
done
for k in compare_curves compare_class_expert compare_table; do check "compared: $k drawn" test -s "cmp-own/$k.pdf"; done
check "sweep: configs drawn" test -s sw-own/configs.pdf
check "sweep of three head kinds at one rho: no gap_rho" test ! -e sw-own/gap_rho.pdf
check "sweep: the log says why" grep -q 'gap_rho   not drawn: the configurations are different kinds of head' sw-own.log
check "a width-1 figure is 3.5 in (252 pt) wide" grep -Eq '^Page size: +252(\.0+)? x' <(pdfinfo one-1/expert_load.pdf)
check "a width-2 figure is 7 in (504 pt) wide" grep -Eq '^Page size: +504(\.0+)? x' <(pdfinfo one-2/temperature.pdf)

# the words in the titles
txt() { pdftotext -layout "$1" - 2>/dev/null | tr -s ' \n' ' '; }
check "default title: the configuration in words (moe E=4 k=2 h=16 + moe2)" grep -q 'moe E=4 k=2 h=16 + moe2' <<<"$(txt one-own/curves.pdf)"
check "default title: not the folder name" bash -c "! grep -q a_long_session_folder <<<\"$(txt one-own/curves.pdf)\""
check "temperature marks: the command without its '# file' tag" bash -c "grep -q 'set tau 0.5' <<<\"$(txt one-own/temperature.pdf)\" && ! grep -q '#' <<<\"$(txt one-own/temperature.pdf)\""
"$BIN" plot a_long_session_folder_name_20261202-031222 --out t1 --title "Fig. 3: MoE head" > t1.log 2>&1
check "--title replaces the name" grep -q 'Fig. 3: MoE head' <<<"$(txt t1/curves.pdf)"
"$BIN" plot a_long_session_folder_name_20261202-031222 b --out t2 --label "two layers" --label "head only" > t2.log 2>&1
check "--label names each compared run" bash -c "grep -q 'two layers' <<<\"$(txt t2/compare_curves.pdf)\" && grep -q 'head only' <<<\"$(txt t2/compare_curves.pdf)\""
check "--columns 3 is refused" bash -c "'$BIN' plot b --columns 3 2>&1 | grep -q -- '--columns 3: 1 (3.5 in) or 2 (7 in)'"
check "more --label than sessions is refused" bash -c "'$BIN' plot b --label x --label y 2>&1 | grep -q '2 --label for 1 session'"

echo "t_figtitles: $pass passed, $fail failed"
[ "$fail" = 0 ]
