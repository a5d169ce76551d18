#!/usr/bin/env bash
# t_screenalarm.sh — the live screen's numbers that must stay in view (issue #40 item 5), driven
# through tmux on runs paused at a known step by a commands file (the screen stands still):
#   80x24, a collapse onto e13 of 16 experts (a 2-row banner): the status bar shows the latest test
#     accuracy; the curves' alarm row is a row of its own (no step-axis label in it, the axis on the
#     next row); the class x expert header and the expert load rows show e13, the banner's expert,
#     although only 7-8 of the 16 fit (they scroll to it), and say what they hide on the left/above;
#   120x40: the routing panel's forecast line is whole (its step count, or its verdict, not cut to
#     "…"; the trainer's "clean share 0.27, rising: threshold in ~583 steps" is 49 cells in a 38-cell
#     panel);
#   2 ranks (mpirun; SKIP without it or without MPI): the browser's load panel compares the demand
#     summed over the ranks with the ranks' total capacity: its title says C=2x16, and no demand
#     number is painted in another colour than the others (cf 2: every summed demand is under
#     2 x 16 and over 16, so a per-rank capacity paints some red).
set -u
BIN=${1:?usage: t_screenalarm.sh path/to/moelab}
TMUX_NAME=moelabalarm TMUX_UTF8=1 S=al
. "$(dirname "$0")/tmux_harness.sh"
start() { # start COLS ROWS COMMAND...
  local c=$1 r=$2; shift 2
  "${TM[@]}" kill-session -t "$S" >/dev/null 2>&1
  "${TM[@]}" new-session -d -x "$c" -y "$r" -s "$S" "cd '$T' && env LANG=C.UTF-8 LC_ALL=C.UTF-8 TERM=screen-256color $*; sleep 1000"
}
printf 'at 300 pause\n' >"$T/p300.txt"
DATA="--dataset synthetic:16x16x3:4:4096 --width 0.25 --batch 32 --hidden 16 --k 2 --no-augment --epochs 20 --threads 1"

# ---- 80x24: a collapse onto e13 of 16 experts, paused at step 300
start 80 24 "$BIN" train --no-session --commands p300.txt $DATA --experts 16 --noise 0 --alpha 0 --bias-mode select \
  --bias-rate 0 --init-bias e13=10
check "80x24: the run pauses at step 300" wait_for 'PAUSED .*step 300/' 60
sleep 0.5
cap >"$T/a80.txt"
# the banner's expert: e13 (the biased one) now; the message may name where the episode began first
# and then "(now ... to eN)"
banner=$(sed -n 3,4p "$T/a80.txt" | tr '\n' ' ')
check "80x24: the banner (rows 3-4) names e13: '$banner'" bash -c "grep -Eq 'COLLAPSE .*to e13([^0-9]|\$)' <<<'$banner'"
check "80x24: the status bar shows the latest test accuracy" bash -c "sed -n 2p '$T/a80.txt' | grep -Eq 'test acc [0-9]+\.[0-9]{2}%'"
# the curves panel is the first of its row: its cells are the text between the first two │
first_panel() { awk -F'│' '{print $2}'; }
alarm_row=$(grep -E '^│ *alarm' "$T/a80.txt" | head -1 | first_panel)
axis_row=$(grep -A1 -E '^│ *alarm' "$T/a80.txt" | sed -n 2p | first_panel)
check "80x24: the curves' alarm row has its marks and no step-axis label: '$alarm_row'" \
  bash -c "grep -q '━' <<<'$alarm_row' && ! grep -q '[0-9]' <<<'$alarm_row'"
check "80x24: the step axis on the row under the alarm row: '$axis_row'" bash -c "grep -Eq '^ +0 +[0-9]+' <<<'$axis_row'"
# the class x expert panel is the first of the second panel row: its header row is the line after
# its title; 2-cell columns label experts by number ("13")
heat=$(grep -A1 'Class x expert' "$T/a80.txt" | sed -n 2p | first_panel)
check "80x24: the class x expert header shows e13's column (scrolled to it): '$heat'" bash -c "grep -Eq '(^| )13([^0-9]|\$)' <<<'$heat'"
check "80x24: and says what it hides on the left" grep -Eq '[0-9]+ left' "$T/a80.txt"
check "80x24: the expert load panel shows e13's row (scrolled to it)" grep -Eq '^│[^│]*││e13 ' "$T/a80.txt"
check "80x24: and says how many experts are above" grep -Eq '[0-9]+ above' "$T/a80.txt"
keys q; sleep 0.3; keys y

# ---- 120x40: the forecast line whole (the old router: the clean share drifts, a forecast in steps)
start 120 40 "$BIN" train --no-session --commands p300.txt $DATA --experts 8 --alpha 0.01
check "120x40: the run pauses at step 300" wait_for 'PAUSED .*step 300/' 60
sleep 0.5
cap >"$T/b120.txt"
fc=$(grep -A1 'Routing: step' "$T/b120.txt" | sed -n 2p | awk -F'││' '{print $NF}' | sed 's/│ *$//; s/ *$//')
echo "      (forecast line: '$fc')"
check "120x40: the routing panel's first line is a forecast: '$fc'" bash -c "grep -Eq '^(clean|gate)' <<<'$fc'"
check "120x40: the forecast is whole: a step count or a verdict, not cut ('$fc')" \
  bash -c "! grep -q '…' <<<'$fc' && grep -Eq '~[0-9]+ steps\$|over( threshold| the threshold)?\$|no crossing( ahead)?\$|(↓|=)\$' <<<'$fc'"
keys q; sleep 0.3; keys y

# ---- 2 ranks: the load panel's capacity is the ranks' total
if ! command -v mpirun >/dev/null 2>&1; then
  echo "SKIP  2 ranks: mpirun not installed (apt-get install openmpi-bin libopenmpi-dev)"
elif ! "$BIN" sweep --help | grep -q 'built with MPI'; then
  echo "SKIP  2 ranks: this moelab was built without MPI"
else
  export OMPI_MCA_btl_vader_single_copy_mechanism=none
  [ -n "${ASAN_OPTIONS:-}" ] && export ASAN_OPTIONS="$ASAN_OPTIONS:detect_leaks=0"
  # B 64 on 2 ranks, E 8, k 2, cf 2: C = ceil(2 * 2 * 32 / 8) = 16 per rank, 32 for both
  (cd "$T" && timeout 300 mpirun --allow-run-as-root --oversubscribe -n 2 "$BIN" train --headless --session d2 \
    --dataset synthetic:16x16x3:4:2048 --width 0.25 --batch 64 --hidden 16 --experts 8 --k 2 --cf 2 --epochs 2 \
    --threads 1 >"$T/d2.log" 2>&1)
  check "2 ranks: the run finished" grep -q 'finished at step 64' "$T/d2.log"
  start 120 40 "$BIN" browse d2
  check "2 ranks: the browser opens the session" wait_for 'cursor: epoch 2/2' 15
  sleep 0.5
  cap >"$T/d2.txt"
  "${TM[@]}" capture-pane -e -p -t "$S" >"$T/d2.ans"
  check "2 ranks: the load panel's title gives the ranks' capacity (C=2x16)" grep -q 'Expert load @64 C=2x16 ' "$T/d2.txt"
  # the attributes (foreground, background, bold) of each load row's demand number, one line per
  # row: an SGR state machine over capture-pane -e (tmux writes only the changes)
  demand_sgr() {
    perl -CSD -Mutf8 -ne '
      chomp;
      my ($fg, $bg, $bold, @cells) = ("", "", 0);
      while (/\G(?:\e\[([0-9;]*)m|(.))/gcs) {
        if (defined $1) {
          my @p = split /;/, ($1 eq "" ? "0" : $1);
          while (@p) {
            my $c = shift @p;
            if ($c == 0) { ($fg, $bg, $bold) = ("", "", 0) }
            elsif ($c == 1) { $bold = 1 } elsif ($c == 22) { $bold = 0 }
            elsif ($c == 39) { $fg = "" } elsif ($c == 49) { $bg = "" }
            elsif ($c == 38 || $c == 48) { my $v = join ";", splice(@p, 0, $p[0] == 5 ? 2 : 4); $c == 38 ? ($fg = $v) : ($bg = $v) }
            elsif (($c >= 30 && $c <= 37) || ($c >= 90 && $c <= 97)) { $fg = $c }
            elsif (($c >= 40 && $c <= 47) || ($c >= 100 && $c <= 107)) { $bg = $c }
          }
        } else { push @cells, [$2, "fg=$fg bg=$bg bold=$bold"] }
      }
      my $s = join "", map { $_->[0] } @cells;
      my $p = index($s, "││e"); next if $p < 0;   # the load panel: the second of its row
      my $q = index($s, "││", $p + 2); next if $q < 0; # its right frame, before the routing panel
      substr($s, $p + 2, $q - $p - 2) =~ /(\d+)\s*$/ or next;
      print $cells[$p + 2 + $-[1]][1], "\n";
    ' "$T/d2.ans"
  }
  codes=$(demand_sgr | sort -u | wc -l)
  rows=$(demand_sgr | wc -l)
  echo "      (load rows: $rows, distinct demand colours: $codes)"
  check "2 ranks: 8 expert rows read from the load panel" [ "$rows" = 8 ]
  check "2 ranks: every demand number in the same colour (none over 2 x 16)" [ "$codes" = 1 ]
  keys q
fi

echo "t_screenalarm: $pass passed, $fail failed"
[ "$fail" = 0 ]
