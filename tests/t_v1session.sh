#!/usr/bin/env bash
# t_v1session.sh — a session written in format_version 1 (tests/fixtures/v1-moe, made by moelab
# before format 2; see its README) still works: it is listed and loaded by the browser's data
# loader (moelab browse --list, moelab plot), exported as CSV, and resumed to the end with a result
# bit-identical to an uninterrupted run of its command line by this moelab. A file of a newer
# format_version gets a clear message (live.h5 and checkpoint). Without an alarm column its collapsed
# step rows are collapse spans (figure legends) and its collapse event is counted (browser list).
#   tests/t_v1session.sh path/to/moelab
set -u
BIN=${1:?usage: t_v1session.sh path/to/moelab}
BIN=$(cd "$(dirname "$BIN")" && pwd)/$(basename "$BIN")
FIX=$(cd "$(dirname "$0")" && pwd)/fixtures/v1-moe
T=$(mktemp -d)
[ -n "${KEEP:-}" ] || trap 'rm -rf "$T"' EXIT
cd "$T"
pass=0; fail=0
ok()  { echo "PASS  $*"; pass=$((pass + 1)); }
bad() { echo "FAIL  $*"; fail=$((fail + 1)); }
PY=/usr/bin/python3

mkdir runs && cp -r "$FIX" runs/v1
[ "$($PY -c 'import h5py,sys; print(h5py.File(sys.argv[1],"r").attrs["format_version"])' runs/v1/live.h5)" = 1 ] \
  && ok "the fixture is a version-1 session" || bad "the fixture is not format_version 1"
"$BIN" browse runs --list > list.txt 2>&1; rc=$?
[ $rc = 0 ] && grep -q 'v1' list.txt && grep -q 'interrupted' list.txt && ok "browse --list shows it (interrupted)" \
  || bad "browse --list: rc $rc: $(head -3 list.txt)"
"$BIN" plot runs/v1 --out fig > plot.txt 2>&1; rc=$?
[ $rc = 0 ] && [ -n "$(ls fig 2>/dev/null)" ] && ok "plot loads its history (browser data loader): $(ls fig | wc -l) figures" \
  || bad "plot of the v1 session: rc $rc: $(tail -2 plot.txt)"
# where and when (issue 26): no alarm column in a version-1 file, so its collapsed step row is a red
# (collapse) span: the figures' legend says collapse and the browser's alarms column counts its collapse
# event
if command -v pdftotext > /dev/null 2>&1; then
  pdftotext fig/expert_load.pdf - 2>/dev/null | grep -q 'collapse' && pdftotext fig/temperature.pdf - 2>/dev/null | grep -q 'collapse' &&
    ! pdftotext fig/expert_load.pdf - 2>/dev/null | grep -q 'warning' \
    && ok "plot: its collapsed step row is shaded as a collapse (legend)" || bad "plot: no collapse in the legends of the v1 figures"
fi
grep -Eq '^v1 .* interrupted +1C ' list.txt && ok "browse --list: alarms 1C (its collapse event)" \
  || bad "browse --list: alarms of the v1 session: $(grep '^v1 ' list.txt)"
"$BIN" export runs/v1 --csv csv > export.txt 2>&1; rc=$?
[ $rc = 0 ] && [ "$(wc -l < csv/evals.csv)" = 2 ] && [ "$(wc -l < csv/class_expert.csv)" = 5 ] && ! ls csv/layer_* >/dev/null 2>&1 \
  && ok "export: evals.csv (1 evaluation), class_expert.csv, no per-layer files" || bad "export: rc $rc: $(tail -2 export.txt); $(ls csv)"

# resume to the end == an uninterrupted run of the same command line (without the quit at step 12)
cp -r "$FIX" R
echo 'at 3 set tau 0.5' > cmds
"$BIN" train --resume R > R.log 2>&1; rc=$?
[ $rc = 0 ] && grep -q 'finished at step 16' R.log && ok "the v1 session resumes to the end" || bad "resume: rc $rc: $(tail -2 R.log)"
"$BIN" train --dataset synthetic:8x8x3:4:256 --head moe --epochs 2 --threads 1 --session U --headless --width 0.25 \
  --batch 32 --tsne-samples 32 --hidden 16 --experts 4 --seed 3 --commands cmds --keep 0 --ckpt-steps 12 > U.log 2>&1
w() { h5dump -A 0 -g /weights -g /optimizer -g /rng -g /schedule "$1"/ckpt-$2.h5 | tail -n +2 | sha256sum | cut -c1-16; }
hist() { for d in /steps/step /steps/loss /steps/tau /steps/kept /evals/test_acc /evals/class_expert; do h5dump -A 0 -d $d "$1/live.h5" | tail -n +2; done | sha256sum | cut -c1-16; }
# bit-identity needs the fixture's arithmetic: a Release build reproduces its step-12 weights; a
# Debug / sanitizer build computes other roundings from step 1, so only the resume is checked there
if [ "$(w U 12)" = "$(w "$FIX" 12)" ]; then
  [ -f R/ckpt-16.h5 ] && [ "$(w R 16)" = "$(w U 16)" ] && ok "resumed weights, optimiser, RNG and schedule equal the uninterrupted run's ($(w U 16))" \
    || bad "resumed weights $(w R 16 2>/dev/null) vs uninterrupted $(w U 16 2>/dev/null)"
  [ "$(hist R)" = "$(hist U)" ] && ok "resumed /steps and /evals equal the uninterrupted run's" || bad "history $(hist R) vs $(hist U)"
else
  echo "INFO this build's step-12 weights differ from the fixture's (another build type: Debug / sanitizers): the final weights are not compared"
  [ -f R/ckpt-16.h5 ] && ok "the resumed session wrote its final checkpoint" || bad "no R/ckpt-16.h5"
fi
v=$($PY -c 'import h5py,sys; print(h5py.File(sys.argv[1],"r").attrs["format_version"], "layers" in h5py.File(sys.argv[1],"r"))' R/live.h5)
[ "$v" = "1 False" ] && ok "the appended live.h5 stays version 1 (no /layers)" || bad "appended live.h5: $v"
"$BIN" plot R --out fig2 > plot2.txt 2>&1 && ok "the resumed v1 session loads" || bad "plot of the resumed session: $(tail -1 plot2.txt)"

# a newer format_version: a clear message, nothing written
cp -r "$FIX" N
$PY -c 'import h5py,sys; f=h5py.File(sys.argv[1],"r+"); f.attrs["format_version"]=99' N/live.h5
"$BIN" export N --csv ncsv > n.txt 2>&1; rc=$?
[ $rc != 0 ] && grep -q 'format_version 99, this moelab reads 1..3 (written by a newer moelab' n.txt \
  && ok "live.h5 of format_version 99: $(head -1 n.txt)" || bad "format 99 live.h5: rc $rc: $(cat n.txt)"
"$BIN" browse N --list > n2.txt 2>&1
grep -q 'format_version 99' n2.txt && ok "browse names the version" || bad "browse of format 99: $(head -2 n2.txt)"
cp -r "$FIX" NC
$PY -c 'import h5py,sys; f=h5py.File(sys.argv[1],"r+"); f.attrs["format_version"]=99' NC/ckpt-12.h5
"$BIN" train --resume NC > nc.txt 2>&1; rc=$?
[ $rc != 0 ] && grep -q 'format_version 99' nc.txt && ok "a checkpoint of format_version 99 is refused: $(grep -m1 format_version nc.txt)" \
  || bad "format 99 checkpoint: rc $rc: $(tail -2 nc.txt)"
grep -q 'ckpt-12.h5 is a newer format and was skipped' nc.txt && ! grep -q 'ckpt-12.h5 is damaged' nc.txt \
  && ok "it is reported as a newer format, not as damage" \
  || bad "format 99 checkpoint: rc $rc: $(tail -2 nc.txt)"

echo "t_v1session: $pass passed, $fail failed"
[ $fail = 0 ]
