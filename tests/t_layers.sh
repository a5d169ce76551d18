#!/usr/bin/env bash
# t_layers.sh — routed layers on the screens, driven through tmux (own server socket): a run with
# `--moe-after 2 --head moe` (synthetic data, --threads 1) at 80x24 shows both layers in the
# all-layers strip, the heatmap / load / routing titles name the selected layer, `]` switches them
# to the other layer (and the strip's marker moves), `[` back; at 120x40 the titles carry the
# whole tag "moe2 (1/2)"; `set tau 0.3 @moe2` overrides moe2's temperature panel only; the browser on the saved session does the same (when the session holds
# per-layer records), and its t-SNE follows the layer; `moelab attach` to a headless two-layer
# run has the same strip, titles and keys; three routed layers at 80x24 give the one-line summary; a run with one
# routed layer has no strip and no tag. Every wait polls capture-pane with a timeout. Prints
# PASS/FAIL lines and "N passed, M failed"; exits 0 only if none failed.
set -u
BIN=${1:?usage: t_layers.sh path/to/moelab}
RUNPID=
cleanup_more() { [ -n "$RUNPID" ] && kill "$RUNPID" 2>/dev/null; }
TMUX_NAME=moelablayers S=lay
. "$(dirname "$0")/tmux_harness.sh"
export LC_ALL=C.UTF-8 # the patterns hold box-drawing characters
# the panel titles on screen, one a line (each top border up to its corner)
titles() { cap | grep -F '┌─' | sed 's/┐/┐\n/g' | grep -F '┌─'; }
# wait_title PATTERN [SECONDS]: polls until a panel title matches
wait_title() {
  local pat=$1 limit=${2:-10} i
  for ((i = 0; i < limit * 10; i++)); do
    titles | grep -Eq -- "$pat" && return 0
    sleep 0.1
  done
  return 1
}
no_title() { ! titles | grep -Eq -- "$1"; }
# the top border of the panel whose title matches $1 (the frame's first row)
title_of() { titles | grep -E -- "$1" | head -1; }
# every layer tag in a title is whole: "· NAME" followed by a space, "(" or the border
tags_whole() { ! titles | grep -Eo '· [^ ]*( |$)' | grep -Evq '^· (moe1|moe2|head) $'; }
start() { # start NAME COLS ROWS COMMAND...
  local name=$1 w=$2 h=$3; shift 3
  "${TM[@]}" kill-session -t "$S" >/dev/null 2>&1
  "${TM[@]}" new-session -d -s "$S" -x "$w" -y "$h" \
    "cd $T && LANG=C.UTF-8 $* ; echo EXITED-$name; sleep 100000"
}

RUN="--dataset synthetic:16x16x3:4:2048 --width 0.25 --batch 32 --experts 4 --hidden 16 --threads 1"

# ---- the live screen, two routed layers (moe2 in the backbone, the head), 80x24
start live 80 24 "$BIN" train $RUN --epochs 6 --moe-after 2 --head moe --session "$T/s1"
check "live: the strip shows moe2, selected" wait_for '^▸ moe2 +load H [0-9.]+ +top-1 +[0-9]+% +dead [0-9]+/4 +drop +[0-9.]+% +(ok|COLLAPSE)' 60
check "live: the strip shows the head" wait_for '^  head +load H [0-9.]+ +top-1 +[0-9]+% +dead [0-9]+/4 +drop' 5
check "live: the heatmap's title names moe2" wait_title 'Class.*· moe2' 30
check "live: the load panel's title names moe2" wait_title 'Expert.*· moe2' 5
check "live: the routing panel's title names moe2" wait_title 'Routing.*· moe2' 5
check "live: the temperature panel's title names moe2" wait_title 'Temperature.*· moe2' 5
check "live: the curves have no layer tag" no_title 'Loss.*· ' 
check "live: layer tags are never cut" tags_whole
cap >"$T/live80.txt"; [ -n "${LAYERS_KEEP:-}" ] && cp "$T/live80.txt" "$LAYERS_KEEP.80"
before=$(title_of 'Class')
keys ']'
check "live: ] switches the heatmap to the head (its title changes)" wait_title 'Class.*· head' 5
after=$(title_of 'Class')
check "live: the heatmap title changed ('$before' -> '$after')" test -n "$after" -a "$before" != "$after"
check "live: ] switches the load panel too" wait_title 'Expert.*· head' 3
check "live: ] switches the routing panel too" wait_title 'Routing.*· head' 3
check "live: ] switches the temperature panel too" wait_title 'Temperature.*· head' 3
check "live: the strip marks the head" wait_for '^▸ head +load H' 5
check "live: and moe2 is still listed" wait_for '^  moe2 +load H' 5
keys '['
check "live: [ goes back to moe2" wait_title 'Class.*· moe2' 5
"${TM[@]}" resize-window -t "$S" -x 120 -y 40
check "live 120x40: the titles carry the whole tag (moe2 (1/2))" wait_for '· moe2 \(1/2\)' 10
check "live 120x40: the strip has both layers" wait_for '^  head +load H' 5
check "live 120x40: layer tags are never cut" tags_whole
cap >"$T/live120.txt"; [ -n "${LAYERS_KEEP:-}" ] && cp "$T/live120.txt" "$LAYERS_KEEP.120"
check "live: the run finishes" wait_for 'FINISHED' 120
keys q
check "live: q exits" wait_for 'EXITED-live' 20

# ---- the browser on the saved session, 80x24
start browse 80 24 "$BIN" browse "$T/s1"
check "browser: the session opens" wait_for 'cursor: epoch 6/6' 20
# (this was an if: without the strip within 5 s the part printed SKIP and passed, so a browser that
# lost the per-layer records passed; the session reader has filled them since branch 'layers')
check "browser: the strip shows moe2, selected" wait_for '^▸ moe2 +load H' 10
check "browser: the strip shows the head" wait_for '^  head +load H' 3
check "browser: the heatmap's title names moe2" wait_title 'Class.*· moe2' 3
keys ']'
check "browser: ] switches the heatmap to the head (its title changes)" wait_title 'Class.*· head' 5
check "browser: the strip marks the head" wait_for '^▸ head +load H' 3
keys Left
check "browser: the cursor moves, the layer stays" wait_for 'cursor: epoch 5/6' 5
check "browser: still the head's heatmap" wait_title 'Class.*· head' 3
check "browser: layer tags are never cut" tags_whole
keys t
check "browser: t-SNE of the head's router input (title names it)" wait_title 'head \(2/2\) · ' 10
check "browser: the head's t-SNE finishes" wait_for 'nearest neighbour in the map: same expert [0-9]+%' 60
keys ']'
check "browser: ] in the t-SNE: moe2's (title)" wait_title 'moe2 \(1/2\) · ' 10
check "browser: moe2's t-SNE finishes" wait_for 'nearest neighbour in the map: same expert [0-9]+%' 60
keys t
keys q
check "browser: q quits" wait_for 'EXITED-browse' 10

# ---- moelab attach to a headless two-layer run: the same strip, titles and keys (80x24)
(cd "$T" && exec "$BIN" train --headless $RUN --epochs 400 --moe-after 2 --head moe --session "$T/hl" >"$T/hl.log" 2>&1) &
RUNPID=$!
for ((i = 0; i < 600; i++)); do
  e=$("$BIN" ctl "$T/hl" status 2>/dev/null | sed -n 's/.* epochs_done=\([0-9]*\).*/\1/p')
  [ -n "$e" ] && [ "$e" -ge 2 ] && break
  sleep 0.1
done
check "attach: the headless run trains (2 epochs)" test -n "$e" -a "${e:-0}" -ge 2
start attach 80 24 "$BIN" attach "$T/hl"
check "attach: the strip shows moe2, selected" wait_for '^▸ moe2 +load H [0-9.]+ +top-1' 20
check "attach: and the head" wait_for '^  head +load H [0-9.]+ +top-1' 5
check "attach: the heatmap's title names moe2" wait_title 'Class.*· moe2' 30
keys ']'
check "attach: ] switches the heatmap to the head" wait_title 'Class.*· head' 5
check "attach: the strip marks the head" wait_for '^▸ head +load H' 5
check "attach: layer tags are never cut" tags_whole
keys q
check "attach: q detaches" wait_for 'EXITED-attach' 10
"$BIN" ctl "$T/hl" quit >/dev/null 2>&1
for ((i = 0; i < 300; i++)); do kill -0 "$RUNPID" 2>/dev/null || break; sleep 0.1; done
RUNPID=

# ---- three routed layers at 80x24: the one-line summary
start three 80 24 "$BIN" train $RUN --epochs 2 --moe-after 1,2 --head moe --no-session
check "three layers at 80x24: a one-line summary naming the layers (or +N layers)" \
  wait_for '^layers +(▸moe1 H [0-9.]+ (ok|COLLAPSE)|.*\+[0-9]+ layers)' 60
check "three layers: every layer named or counted" bash -c "l=\$(${TM[*]} capture-pane -p -t $S | grep -E '^layers '); n=\$(grep -Eo '(moe1|moe2|head) ' <<<\"\$l\" | wc -l); m=\$(grep -Eo '\+[0-9]+ layers' <<<\"\$l\" | grep -Eo '[0-9]+'); [ \$((n + \${m:-0})) -eq 3 ]"
check "three layers: the titles name moe1 (1/3 of them)" wait_title 'Class.*· moe1' 30
keys ']'
check "three layers: ] -> moe2" wait_title 'Class.*· moe2' 5
keys ']'
check "three layers: ] -> head" wait_title 'Class.*· head' 5
check "three layers: the run finishes" wait_for 'FINISHED' 120
keys q
check "three layers: q exits" wait_for 'EXITED-three' 20

# ---- the live screen holds each layer's own class x expert matrix (the worker copies every
# layer's, not only the top level's): after the last evaluation, moe2's rows and the head's rows
# both hold counts, and they differ (120x40: every class row visible)
start mats 120 40 "$BIN" train $RUN --epochs 3 --moe-after 2 --head moe --no-session
check "matrices: the run finishes" wait_for 'FINISHED' 120
# the class rows of the heatmap panel (the first panel on those lines)
rows() { cap | grep -o '│class[0-9]  *[0-9][0-9 ]*' | head -4 | tr -s ' '; }
check "matrices: the heatmap shows moe2" wait_title 'Class.*· moe2' 5
m2=$(rows)
keys ']'
check "matrices: ] -> the head's heatmap" wait_title 'Class.*· head' 5
sleep 0.3
hd=$(rows)
check "matrices: moe2's class rows hold counts ($(echo $m2 | head -c 60))" [ "$(printf '%s\n' "$m2" | grep -c 'class')" -ge 2 ]
check "matrices: the head's class rows hold counts ($(echo $hd | head -c 60))" [ "$(printf '%s\n' "$hd" | grep -c 'class')" -ge 2 ]
check "matrices: the two layers' matrices differ" [ "$m2" != "$hd" ]
keys q
check "matrices: q exits" wait_for 'EXITED-mats' 20

# ---- one layer's temperature: `set tau 0.3 @moe2` reaches moe2's panel only (120x40)
start tau 120 40 "$BIN" train $RUN --epochs 400 --moe-after 2 --head moe --no-session
check "tau: the run trains" wait_for 'RUNNING +epoch' 60
# paused first: epoch lines of a fast run would scroll the command's log line away under load
"${TM[@]}" send-keys -t "$S" -l 'pause'
keys Enter
check "tau: pause" wait_for 'PAUSED' 20
"${TM[@]}" send-keys -t "$S" -l 'set tau 0.3 @moe2'
keys Enter
check "tau: the command lands in the log with its step" wait_for '\[step [0-9]+\] set tau 0.3 @moe2' 20
check "tau: moe2's temperature panel shows the override" wait_title 'Temperature +τ 0.3 +OVERRIDE.*· moe2' 10
keys ']'
check "tau: the head's temperature panel has none" wait_title 'Temperature.*· head' 5
check "tau: (no OVERRIDE in the head's title)" no_title 'Temperature.*OVERRIDE.*· head'
"${TM[@]}" send-keys -t "$S" -l 'set tau 2 @head'
keys Enter
check "tau: set tau 2 @head overrides the head's" wait_title 'Temperature +τ 2 +OVERRIDE.*· head' 10
keys q
sleep 0.5
keys y
check "tau: q y stops the run" wait_for 'EXITED-tau' 30

# ---- one routed layer: the screen of before (no strip, no tag, [ ] scroll)
start one 80 24 "$BIN" train $RUN --epochs 2 --head moe --no-session
check "one layer: the heatmap appears" wait_title 'Class x expert' 60
check "one layer: no strip" bash -c "! grep -Eq '^(▸ |layers )' <<<\"\$(${TM[*]} capture-pane -p -t $S)\""
check "one layer: no layer tag in any title" no_title '· (head|moe)' 
check "one layer: the run finishes" wait_for 'FINISHED' 120
keys q
check "one layer: q exits" wait_for 'EXITED-one' 20

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
