#!/usr/bin/env bash
# t_screen80.sh — 80x24 is complete, driven through tmux: on the live screen and in the browser
# every panel that hides rows or columns says so ("+N classes", "+N experts", "+N rows", earlier
# log lines), no panel title or log line ends in a cut number (titles cut at a word with "…";
# "C=128" stays whole or goes whole), "waiting for the first evaluation" is shown whole, the zoom
# key shows the heatmap whole (all 10 classes, no hidden-rows note); the curves' `m` key cycles the
# EMA smoothing shown in the title (0.9 -> 0.99 -> 0 -> 0.6); under NO_COLOR test loss and test
# accuracy have distinct glyphs (● / ○) in the legend and in the plot; the browser list keeps the
# start of a long session name; on the compare screens (2 and 4 runs), the t-SNE view and the collapse
# banner, text that does not fit is dropped in whole segments marked "…" (no number, no parenthesis
# cut), and the 4-run metrics table says which columns it hides; the browser's loss curves mark a
# collapsed run's steps on their time axis. Every wait polls capture-pane with a timeout.
set -u
BIN=${1:?usage: t_screen80.sh path/to/moelab}
TMUX_NAME=moelab80 TMUX_UTF8=1 S=s80
. "$(dirname "$0")/tmux_harness.sh"
start() { # start ENV COMMAND...
  local envs=$1; shift
  "${TM[@]}" kill-session -t "$S" >/dev/null 2>&1
  "${TM[@]}" new-session -d -x 80 -y 24 -s "$S" "cd '$T' && env LANG=C.UTF-8 LC_ALL=C.UTF-8 TERM=screen-256color $envs $*; sleep 1000"
}
# no title (a frame's top line) and no log line ends in a digit cut by the frame
no_cut_numbers() {
  local out; out=$(cap)
  ! grep -E '^[┌└]' <<<"$out" | grep -Eq '[0-9.]─' &&
    ! grep -E '^│(epoch|\[step)' <<<"$out" | grep -Eq '[0-9.]│$'
}
# C=128: E 8, k 2, B 128, cf 4 (C = ceil(cf k B / E) = 128); 10 classes, a slow enough first epoch
RUN="train --dataset synthetic:16x16x3:10:12800 --width 0.25 --batch 128 --experts 8 --k 2 --hidden 16 --cf 4 --epochs 40 --threads 1"

# ---- live screen
start "" "$BIN" $RUN --session live
check "live: the first evaluation is awaited" wait_for 'evaluation \(end of' 20
cap >"$T/wait.txt"
check "live: 'waiting for the first evaluation (end of epoch 1, or \`eval\`)' is shown whole (wrapped)" \
  bash -c "grep -Eq '│ waiting for the first +│' '$T/wait.txt' && grep -Eq '│ evaluation \(end of +│' '$T/wait.txt' && grep -Eq '│ epoch 1, or .eval.\) +│' '$T/wait.txt'"
check "live: the first evaluation arrives" wait_for 'Class x expert.* epoch|\+[0-9]+ classes' 60
sleep 1
out=$(cap)
echo "$out" >"$T/live.txt"
check "live: the class x expert panel says it hides classes (+N classes)" grep -Eq '\+[0-9]+ (classes|cls)' "$T/live.txt"
check "live: the expert load panel says it hides experts (+N experts; N depends on whether a collapse banner takes a row)" grep -Eq '\+[0-9]+ experts' "$T/live.txt"
check "live: the status row ends in … when it drops segments (test acc, tau, lr, elapsed at 80 columns)" \
  bash -c "sed -n 2p '$T/live.txt' | grep -q '…\$'"
check "live: the routing panel says it hides rows (+N rows)" grep -Eq '\+[0-9]+ rows' "$T/live.txt"
check "live: C=128 is never cut to C=12" bash -c "! grep -Eq 'C=12([^8]|$)' '$T/live.txt'"
check "live: no title or log line ends in a cut number" no_cut_numbers
check "live: cut titles end with …" grep -q '…' "$T/live.txt"
# smoothing
check "curves: the title shows ema 0.9 (default)" wait_for 'Loss & accuracy  ema 0.9 ' 3
keys m; check "curves: m -> ema 0.99" wait_for 'Loss & accuracy  ema 0.99 ' 3
keys m; check "curves: m -> ema 0 (raw)" wait_for 'Loss & accuracy  ema 0 ' 3
keys m; check "curves: m -> ema 0.6" wait_for 'Loss & accuracy  ema 0.6 ' 3
# zoom: the heatmap whole
keys Tab; sleep 0.2
for i in 1 2 3 4 5; do cap | grep -q '> Class x expert' && break; keys Tab; sleep 0.2; done
keys z
check "zoom: the heatmap shows all 10 classes" wait_for 'class9' 3
check "zoom: and no hidden-rows note" bash -c "! ${TM[*]} capture-pane -p -t $S | grep -Eq '\+[0-9]+ (classes|cls)'"
keys z
keys q; sleep 0.3; keys y
sleep 1

# ---- NO_COLOR: distinct glyphs for test loss and test accuracy
start "NO_COLOR=1" "$BIN" train --dataset synthetic:16x16x3:4:2048 --width 0.25 --batch 32 --experts 4 --hidden 16 --epochs 30 --threads 1 --no-session
check "NO_COLOR: legend ● loss and ○ acc% (the short legend at 80 columns)" wait_for '● loss +○ acc%' 20
wait_for 'epoch  *4/30' 30 >/dev/null
plot=$(cap | sed -n 5,9p)
check "NO_COLOR: both glyphs in the plot" bash -c "grep -q '●' <<<'$plot' && grep -q '○' <<<'$plot'"
check "NO_COLOR: no colour codes" bash -c "! ${TM[*]} capture-pane -p -e -t $S | grep -Eq $'\e\\\\[([0-9;]*;)?3[0-7]m'"
keys q; sleep 0.3; keys y

# ---- browser at 80x24
mkdir -p "$T/b"
"$BIN" train --headless --dataset synthetic:16x16x3:10:2048 --width 0.25 --batch 32 --experts 8 --hidden 16 --epochs 2 --threads 1 \
  --session "$T/b/a-very-long-session-name-that-does-not-fit-the-column-END" >/dev/null 2>&1
start "" "$BIN" browse b
check "browser list: a long name keeps its start (and its end)" wait_for '^ *a-very-lo.*….*END ' 10
check "browser list: not cut from the left" bash -c "! ${TM[*]} capture-pane -p -t $S | grep -Eq '^ *\.\.'"
check "browser list: the columns that do not fit are named (+dataset,... ▸)" wait_for '\+dataset.* ▸' 3
keys Enter
check "browser session: opens at 80x24" wait_for 'cursor: epoch 2/2' 10
sleep 0.5
cap >"$T/browse.txt"
check "browser session: the class x expert panel says it hides classes" grep -Eq '\+[0-9]+ (classes|cls)' "$T/browse.txt"
check "browser session: the expert load panel says it hides experts" grep -Eq '\+[0-9]+ experts' "$T/browse.txt"
check "browser session: the routing panel says it hides rows" grep -Eq '\+[0-9]+ rows' "$T/browse.txt"
check "browser session: no title or log line ends in a cut number" no_cut_numbers
keys m
check "browser session: m cycles the smoothing" wait_for 'Loss & accuracy  ema 0.99' 3
keys q

# ---- compare (2 runs), compare (4 runs), t-SNE and the collapse banner at 80x24: text that does
# not fit is dropped in whole segments marked "…", never cut inside a number or a parenthesis
mkdir -p "$T/c"
for i in 1 2 3 4; do
  "$BIN" train --headless --dataset synthetic:16x16x3:10:1024 --width 0.25 --batch 32 --experts 8 --hidden 16 --epochs 2 \
    --seed $i --threads 1 --collapse-share 0.05 --collapse-min-steps 10 --session "$T/c/cmp-run-$i" >/dev/null 2>&1 ||
    bad "training cmp-run-$i"
done
row() { sed -n "$1p" "$2"; }
balanced() { local l; l=$(row "$1" "$2"); [ "$(tr -cd '(' <<<"$l" | wc -c)" = "$(tr -cd ')' <<<"$l" | wc -c)" ]; }
start "" "$BIN" browse c
check "compare: the list" wait_for '4 sessions' 10
keys Home; keys m; sleep 0.2; keys m; sleep 0.2; keys c
check "compare (2 runs): opens" wait_for 'moelab compare .* A: cmp-run-1' 10
sleep 0.5
cap >"$T/cmp2.txt"
check "compare (2 runs): the header names A and B, whole" bash -c "sed -n 1p '$T/cmp2.txt' | grep -q 'A: cmp-run-1' && sed -n 1p '$T/cmp2.txt' | grep -q 'B: cmp-run-2'"
check "compare (2 runs): the header marks what it drops (…)" bash -c "sed -n 1p '$T/cmp2.txt' | grep -q '…'"
check "compare (2 runs): no configuration cut inside its parentheses" balanced 1 "$T/cmp2.txt"
check "compare (2 runs): the epoch row is whole or marked" bash -c "sed -n 2p '$T/cmp2.txt' | grep -Eq 'B: finished *\$|…'"
check "compare (2 runs): no title or log line ends in a cut number" no_cut_numbers
keys q
check "compare: back to the list" wait_for 'Enter open' 5
start "" "$BIN" browse c
check "compare (4 runs): the list" wait_for '4 sessions' 10
keys Home; for i in 1 2 3 4; do keys m; sleep 0.2; done; keys c
check "compare (4 runs): opens" wait_for 'moelab compare .* 4 runs' 10
sleep 0.5
cap >"$T/cmp4.txt"
check "compare (4 runs): the run row lists every run or ends in …" \
  bash -c "sed -n 2p '$T/cmp4.txt' | grep -q 'cmp-run-4' || sed -n 2p '$T/cmp4.txt' | grep -q '… *\$'"
check "compare (4 runs): the metrics table says which columns it hides (+N cols ▸)" grep -Eq '\+[0-9]+ cols ▸' "$T/cmp4.txt"
check "compare (4 runs): 4 table rows, each ending in a whole number (loss, 4 decimals)" \
  [ "$(grep -cE '│[●■▲◆] cmp-r… +[0-9]+ +[0-9.]+ +[0-9.]+ +[0-9]+\.[0-9]{4}│' "$T/cmp4.txt")" = 4 ]
check "compare (4 runs): no title ends in a cut number" no_cut_numbers
keys q
start "" "$BIN" browse c
check "t-SNE: the list" wait_for '4 sessions' 10
keys Home; keys Enter
check "session: opens" wait_for 'cursor: epoch 2/2' 10
sleep 0.5
cap >"$T/sess.txt"
# where and when (issue 26): the loss curves mark the collapsed steps (alarm 2 from step 40 of 64) on
# their time axis: a row labelled alarm (or the axis row, in a short panel) with red ━ marks
check "session: the loss curves mark the collapse on their time axis ('alarm' and ━ in the curves panel)" \
  bash -c "grep -Eq '^│ *alarm.*━' '$T/sess.txt'"
if grep -Eq '^ COLLAPSE (training|evaluation|clean router)' "$T/sess.txt"; then
  # the stored step's banner (red): the message of its episode's event, wrapped onto a second row
  # at a word, nothing cut (it ends in its cause's closing parenthesis)
  banner=$(sed -n '3,4p' "$T/sess.txt" | tr '\n' ' ')
  check "banner: whole on two rows, ending in its cause (not cut)" bash -c "grep -Eq '\) *\$' <<<'$banner'"
  check "banner: no parenthesis left open" bash -c "l='$banner'; [ \$(tr -cd '(' <<<\"\$l\" | wc -c) = \$(tr -cd ')' <<<\"\$l\" | wc -c) ]"
else
  bad "banner: the collapse banner is shown (--collapse-share 0.05 flags every run)"
fi
keys t
check "t-SNE: finishes" wait_for 'nearest neighbour in the map: same expert [0-9]+%' 60
sleep 0.3
cap >"$T/tsne.txt"
sub=$(grep 'nearest neighbour' "$T/tsne.txt")
check "t-SNE: the subtitle keeps both agreement figures (same expert N%, same class N%)" \
  grep -Eq 'same expert [0-9]+%, same class [0-9]+%' <<<"$sub"
check "t-SNE: what it drops is marked … and no number is cut" \
  bash -c "grep -Eq 'same class [0-9]+%(; [0-9]+ points(, [0-9.]+ s *│|…)|…)' <<<'$sub'"
keys q

echo "t_screen80: $pass passed, $fail failed"
[ "$fail" = 0 ]
