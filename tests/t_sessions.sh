#!/usr/bin/env bash
# t_sessions.sh — sessions end to end through the moelab binary: live.h5 + checkpoints written,
# status recorded, an interrupted-then-resumed run ends bit-identical to an uninterrupted one
# (h5diff on the final checkpoints), SIGKILL at random moments (mid-training and mid-checkpoint)
# never damages earlier checkpoints and the run resumes, SIGTERM stops cleanly with a final
# checkpoint, replay reproduces the final metrics, export writes CSV, and damaged files give
# clear messages (a live.h5 that crashes or hangs the reader too: export, replay).
set -u
BIN=${1:?usage: t_sessions.sh path/to/moelab}
BIN=$(cd "$(dirname "$BIN")" && pwd)/$(basename "$BIN")
T=$(mktemp -d)
trap 'umount "$T/full" 2> /dev/null; rm -rf "$T"' EXIT
cd "$T"
pass=0; fail=0
ok()  { echo "PASS  $*"; pass=$((pass + 1)); }
bad() { echo "FAIL  $*"; fail=$((fail + 1)); }
check() { local msg=$1; shift; if "$@"; then ok "$msg"; else bad "$msg"; fi; }
# MOELAB_QUICK=1 (the sanitizer build in CI): a shorter run for the kill test
KE=60; [ -n "${MOELAB_QUICK:-}" ] && KE=16
TRAIN=(train --headless --dataset synthetic:16x16x3:4:512 --width 0.25 --batch 32 --experts 4 --hidden 16 --threads 2 --seed 3)

# 1. a finished session
"$BIN" "${TRAIN[@]}" --epochs 3 --session A > A.log 2>&1; rc=$?
check "training with --session A exits 0" [ $rc = 0 ]
check "A/live.h5 and the final checkpoint exist" [ -f A/live.h5 -a -f A/ckpt-48.h5 ]
check "status is finished" grep -q '"finished"' <(h5dump -d /status A/live.h5 2>&1)
check "h5dump reads every dataset of live.h5" h5dump -H A/live.h5 > /dev/null 2>&1
check "weights named like a PyTorch state_dict" grep -q 'head.experts.3.fc1.weight' <(h5dump -H A/ckpt-48.h5)
check "the command line is stored" grep -q 'synthetic:16x16x3:4:512' <(h5dump -a /run/command_line A/live.h5)

# 2. interrupted (quit at step 20, mid-epoch 2) then resumed == uninterrupted
printf 'at 20 quit\n' > quit20
"$BIN" "${TRAIN[@]}" --epochs 3 --session B --commands quit20 > B1.log 2>&1
check "quit at step 20 leaves ckpt-20.h5 and status interrupted" [ -f B/ckpt-20.h5 ]
grep -q '"interrupted"' <(h5dump -d /status B/live.h5 2>&1) && ok "status is interrupted" || bad "status is interrupted"
"$BIN" train --resume B > B2.log 2>&1; rc=$?
check "resume exits 0" [ $rc = 0 ]
check "resume says where it resumed" grep -q 'resumed at step 20' B2.log
check "resumed run writes the final checkpoint" [ -f B/ckpt-48.h5 ]
if h5diff B/ckpt-48.h5 A/ckpt-48.h5 /weights /weights > diff.log 2>&1 && h5diff B/ckpt-48.h5 A/ckpt-48.h5 /optimizer /optimizer >> diff.log 2>&1; then
  ok "interrupted + resumed weights and optimizer state are bit-identical to the uninterrupted run"
else bad "resumed run differs: $(head -5 diff.log)"; fi
check "resumed live.h5 has one row per logged step (no duplicates)" test "$(h5dump -H -d /steps/step B/live.h5 | grep -o 'DATASPACE  SIMPLE { ( [0-9]*' | grep -o '[0-9]*$')" = "$(h5dump -H -d /steps/step A/live.h5 | grep -o 'DATASPACE  SIMPLE { ( [0-9]*' | grep -o '[0-9]*$')"

# 3. SIGKILL at random moments, checkpoints every 3 steps: every checkpoint left is valid and the run resumes
"$BIN" "${TRAIN[@]}" --epochs $KE --session K --ckpt-steps 3 --keep 0 > K.log 2>&1 &
pid=$!
for delay in 0.05 0.13 0.21; do
  # wait for a new checkpoint, then kill a moment later (mid-training or mid-checkpoint)
  n0=$(ls K 2>/dev/null | grep -c 'ckpt-.*h5$')
  for i in $(seq 300); do [ "$(ls K 2>/dev/null | grep -c 'ckpt-.*h5$')" -gt "$n0" ] && break; sleep 0.05; done
  sleep "$delay"
  kill -9 "$pid" 2>/dev/null; wait "$pid" 2>/dev/null
  bad_ckpt=0
  for f in K/ckpt-*.h5; do [ -f "$f" ] && { h5dump -H "$f" > /dev/null 2>&1 || bad_ckpt=1; }; done
  check "after SIGKILL every ckpt-*.h5 opens ($(ls K | grep -c 'ckpt-.*h5$') checkpoints)" [ $bad_ckpt = 0 ]
  grep -q '"finished"' <(h5dump -d /status K/live.h5 2>&1) && bad "the kill came after the run had finished: make the run longer" || true
  "$BIN" train --resume K > K2.log 2>&1 &
  pid=$!
done
wait "$pid"; rc=$?
check "the thrice-killed run resumes and finishes" [ $rc = 0 ]
grep -q '"finished"' <(h5dump -d /status K/live.h5 2>&1) && ok "killed session ends finished" || bad "killed session ends finished: $(tail -3 K2.log)"
"$BIN" "${TRAIN[@]}" --epochs $KE --session U --keep 1 > U.log 2>&1
if h5diff K/ckpt-$((KE * 16)).h5 U/ckpt-$((KE * 16)).h5 /weights /weights > /dev/null 2>&1; then ok "killed three times + resumed == uninterrupted (weights bit-identical)"
else bad "killed + resumed weights differ from the uninterrupted run"; fi

# 4. SIGTERM: clean stop, final checkpoint
"$BIN" "${TRAIN[@]}" --epochs 100000 --session S > S.log 2>&1 &
pid=$!
for i in $(seq 300); do ls S/ckpt-*.h5 > /dev/null 2>&1 && break; sleep 0.1; done
kill -TERM "$pid"; wait "$pid"; rc=$?
check "SIGTERM exits 143 (128 + 15) after stopping cleanly" [ $rc = 143 ]
check "SIGTERM prints the stop" grep -q 'terminated: stopping cleanly' S.log
grep -q '"interrupted"' <(h5dump -d /status S/live.h5 2>&1) && ok "SIGTERM status interrupted" || bad "SIGTERM status interrupted"
stopped=$(grep -o 'interrupted at step [0-9]*' S.log | grep -o '[0-9]*$')
check "SIGTERM left a checkpoint of the step where it stopped (ckpt-${stopped:-?}.h5)" [ -n "$stopped" -a -f "S/ckpt-${stopped:-x}.h5" ]

# 5. replay with commands reproduces the final metrics
printf 'at 5 set tau 0.4\nat 9 anneal cosine now 0.1\nat 12 set alpha 0.05\n' > cmds
"$BIN" "${TRAIN[@]}" --epochs 2 --session R --commands cmds > R.log 2>&1
"$BIN" replay R > replay.log 2>&1; rc=$?
check "replay exits 0 and reports MATCH" grep -q 'final metrics MATCH' replay.log
check "replay recorded 3 commands" grep -q '3 recorded commands' replay.log
if h5diff R/ckpt-32.h5 R-replay/ckpt-32.h5 /weights /weights > /dev/null 2>&1; then ok "replayed weights identical"; else bad "replayed weights differ"; fi

# 6. export
"$BIN" export R --csv csv > /dev/null 2>&1
check "export writes the five CSV files" [ -f csv/steps.csv -a -f csv/expert_load.csv -a -f csv/evals.csv -a -f csv/class_expert.csv -a -f csv/events.csv ]
check "events.csv holds the commands" grep -q 'anneal cosine now 0.1' csv/events.csv
check "class_expert.csv has a header and rows" [ "$(wc -l < csv/class_expert.csv)" -gt 4 ]

# 7. damaged files: clear messages, no crash
mkdir -p D && head -c 3000 A/live.h5 > D/live.h5
"$BIN" replay D > D.log 2>&1; rc=$?
check "replay of a truncated live.h5 fails cleanly (exit $rc)" [ $rc = 1 ]
check "the message names the file" grep -q 'D/live.h5' D.log
# a live.h5 that crashes the HDF5 library (MOELAB_FAULT_SESSION_PROBE: the probing child raises
# SIGSEGV): export and replay say so on one line, exit 1 and write nothing
MOELAB_FAULT_SESSION_PROBE=R/live.h5 "$BIN" export R --csv csvx > X1.out 2> X1.err; rc=$?
check "export of a session that crashes its reader: exit 1 ($rc), one line with the reason, no CSV" \
  bash -c "[ $rc = 1 ] && [ \$(wc -l < X1.err) = 1 ] && grep -q '^moelab export: R/live.h5: reading it crashed the HDF5 library (signal 11): the file is damaged$' X1.err && [ ! -e csvx ]"
ls -d R-replay* > reps.before
MOELAB_FAULT_SESSION_PROBE=R/live.h5 "$BIN" replay R > X2.out 2> X2.err; rc=$?
check "replay of a session that crashes its reader: exit 1 ($rc), one line with the reason, no new session" \
  bash -c "[ $rc = 1 ] && [ \$(wc -l < X2.err) = 1 ] && grep -q '^moelab replay: R/live.h5: reading it crashed the HDF5 library (signal 11): the file is damaged$' X2.err && diff reps.before <(ls -d R-replay*) >/dev/null"
MOELAB_FAULT_SESSION_PROBE=hang:R/live.h5 MOELAB_SESSION_PROBE_TIMEOUT_MS=500 "$BIN" export R --csv csvx > X3.out 2> X3.err; rc=$?
check "export of a session whose reader hangs: exit 1 ($rc) after the timeout, with the reason" \
  bash -c "[ $rc = 1 ] && grep -q '^moelab export: R/live.h5: reading it did not finish in 0.5 s: the file is damaged' X3.err"
"$BIN" train --resume /nonexistent > N.log 2>&1; rc=$?
check "resume of a missing session fails cleanly (exit $rc)" [ $rc = 1 ]
mkdir -p E && cp A/live.h5 E/ && head -c 5000 A/ckpt-48.h5 > E/ckpt-48.h5
"$BIN" train --resume E > E.log 2>&1; rc=$?
check "resume with only a damaged checkpoint fails cleanly (exit $rc)" [ $rc = 1 ]
check "the message names the damaged checkpoint" grep -q 'ckpt-48.h5' E.log
# a FIFO named like the newest checkpoint (issue 13 item 7) is skipped, not opened (it hung forever)
"$BIN" "${TRAIN[@]}" --epochs 2 --session F --commands quit20 > F1.log 2>&1
cp -r F G # interrupted at step 20, for the full-disk resume below
mkfifo F/ckpt-99999.h5
timeout 300 "$BIN" train --resume F > F.log 2>&1; rc=$?
check "resume with a FIFO named ckpt-99999.h5 resumes from ckpt-20.h5 (exit $rc)" [ $rc = 0 ]
check "the FIFO is named as skipped" grep -q 'ckpt-99999.h5 is not a regular file (a FIFO) and was skipped' F.log
# a resume on a full disk (issue 13 item 4) fails, and leaves live.h5 as it was: h5dump (which
# refuses a file flagged "open for writing") and export still read it. Needs root for the mount.
mkdir -p full
if mount -t tmpfs -o size=1M tmpfs full 2> /dev/null; then
  cp -r G full/ && cp quit20 full/
  dd if=/dev/zero of=full/filler bs=4k > /dev/null 2>&1
  sum0=$(md5sum < full/G/live.h5)
  (cd full && "$BIN" train --resume G > ../FULL.log 2>&1); rc=$?
  check "resume on a full tmpfs fails (exit $rc)" [ $rc = 1 ]
  check "the message says there is no space" grep -q 'No space left on device' FULL.log
  check "live.h5 on the full disk is byte-identical after the failed resume" [ "$(md5sum < full/G/live.h5)" = "$sum0" ]
  check "h5dump still opens it" h5dump -H full/G/live.h5 > /dev/null 2>&1
  "$BIN" export full/G --csv fullcsv > /dev/null 2>&1; rc=$?
  check "export still reads it (exit $rc)" [ $rc = 0 ]
  umount full
else
  echo "SKIP  full-disk resume (cannot mount a tmpfs: not root)"
fi
"$BIN" export /nonexistent --csv x > X.log 2>&1; rc=$?
check "export of a missing session fails cleanly" [ $rc = 1 ]

# issue 27 item 6: a checkpoint that cannot be written (a directory of its name) is reported and
# skipped; the later checkpoints and live.h5's rows are still written (same history as a clean run)
CK=(train --headless --dataset synthetic:16x16x3:4:512 --width 0.25 --batch 32 --experts 4 --hidden 16 --threads 1
    --seed 5 --epochs 3 --ckpt-steps 8 --keep 10)
"$BIN" "${CK[@]}" --session CLEAN > CLEAN.log 2>&1
mkdir -p CD/ckpt-16.h5
"$BIN" "${CK[@]}" --session CD > CD.log 2>&1; rc=$?
check "a directory named ckpt-16.h5: the run still exits 0 (rc $rc)" [ $rc = 0 ]
check "the failed checkpoint is reported and said to be skipped" \
  grep -q 'checkpoint at step 16 failed and was skipped: .*ckpt-16.h5: Is a directory' CD.log
check "the later checkpoints are written (24 ... 48)" \
  [ -f CD/ckpt-24.h5 -a -f CD/ckpt-32.h5 -a -f CD/ckpt-40.h5 -a -f CD/ckpt-48.h5 -a -d CD/ckpt-16.h5 ]
check "status finished" grep -q '"finished"' <(h5dump -d /status CD/live.h5 2>&1)
"$BIN" export CLEAN --csv CLEAN.csv > /dev/null 2>&1
"$BIN" export CD --csv CD.csv > /dev/null 2>&1
notime2() { cut -d, -f1-6 "$1"; } # the columns before the timings (evals.csv; steps.csv: before img_per_s)
same_rows() { [ -s "$2" ] && diff <(notime2 "$1") <(notime2 "$2") > /dev/null; } # same_rows CLEAN.csv OTHER.csv
check "live.h5 has every step row of the clean run" same_rows CLEAN.csv/steps.csv CD.csv/steps.csv
check "... and every evaluation row" same_rows CLEAN.csv/evals.csv CD.csv/evals.csv
check "the final checkpoints are identical (h5diff)" h5diff -q CLEAN/ckpt-48.h5 CD/ckpt-48.h5 /trainer
# ... and when the failing one is the final checkpoint: exit 1, said so
mkdir -p CE/ckpt-48.h5
"$BIN" "${CK[@]}" --session CE > CE.log 2>&1; rc=$?
check "the final checkpoint failing: exit 1, 'the final state is not saved'" \
  bash -c "[ $rc = 1 ] && grep -q 'the final state is not saved' CE.log"

# issue 27 item 7: a checkpoint whose name disagrees with its step is refused with a message, and
# the resume takes the newest one that agrees; rows after the checkpoint are said to be dropped
printf 'at 40 quit\n' > q40
"$BIN" "${CK[@]}" --commands q40 --session CR > CR.log 2>&1
cp CR/ckpt-16.h5 CR/ckpt-44.h5
"$BIN" train --resume CR > CR2.log 2>&1; rc=$?
check "ckpt-44.h5 holding step 16 is skipped with a message naming both" \
  grep -q 'ckpt-44.h5 holds step 16, not 44 (copied or renamed?) and was skipped' CR2.log
check "the resume continues from step 40, not 16, and finishes (rc $rc)" \
  bash -c "[ $rc = 0 ] && grep -q 'resumed at step 40' CR2.log && h5dump -d /status CR/live.h5 2>&1 | grep -q '\"finished\"'"
"$BIN" export CR --csv CR.csv > /dev/null 2>&1
check "its history equals the uninterrupted run's" diff <(notime2 CLEAN.csv/evals.csv) <(notime2 CR.csv/evals.csv) > /dev/null
"$BIN" "${CK[@]}" --commands q40 --session CS > CS.log 2>&1
rm CS/ckpt-40.h5
"$BIN" train --resume CS > CS2.log 2>&1
check "a resume from an earlier checkpoint names the rows it drops" \
  grep -q 'resuming at step 32 drops what the run recorded after that checkpoint: [0-9]* step rows' CS2.log

# issue 27 item 10: privacy. The umask decides, as for any Unix tool; --private makes the session
# folder 0700 (checkpoints unreadable to others whatever the umask); the control socket is 0600 always
P=(train --headless --dataset synthetic:16x16x3:4:256 --width 0.25 --batch 32 --experts 4 --hidden 16 --threads 1 --epochs 1)
(umask 022; "$BIN" "${P[@]}" --session PUB > PUB.log 2>&1)
check "umask 022: the session folder is 0755 and live.h5 0644 (the umask decides)" \
  [ "$(stat -c %a PUB)" = 755 -a "$(stat -c %a PUB/live.h5)" = 644 ]
(umask 077; "$BIN" "${P[@]}" --session U77 > U77.log 2>&1)
check "umask 077: folder 0700, live.h5 and checkpoints 0600" \
  [ "$(stat -c %a U77)" = 700 -a "$(stat -c %a U77/live.h5)" = 600 -a "$(stat -c %a U77/ckpt-8.h5)" = 600 ]
(umask 022; "$BIN" "${P[@]}" --private --session PRIV > PRIV.log 2>&1); rc=$?
check "--private under umask 022: exit 0, the session folder is 0700" [ $rc = 0 -a "$(stat -c %a PRIV)" = 700 ]
if command -v setpriv > /dev/null && [ "$(id -u)" = 0 ]; then
  chmod 755 "$T"
  setpriv --reuid=nobody --regid=nogroup --clear-groups "$BIN" export PRIV --csv /tmp/priv-export-$$ > NOB.log 2>&1; rc=$?
  check "another user cannot export a --private run (exit $rc)" [ $rc != 0 -a ! -e /tmp/priv-export-$$/steps.csv ]
  rm -rf /tmp/priv-export-$$
else
  echo "SKIP  another user reading a --private run: needs root and setpriv"
fi
# 8. a session from before --renorm auto (its command line says nothing, its config JSON stores
# renorm 1 = on, the old default) resumes and replays with renormalised gates, as it was trained.
# Made from a k = 1 --renorm on session interrupted at step 20, whose stored command line has
# "--renorm on" overwritten by "--threads 2" (same length; --threads 2 is already there).
K1=("${TRAIN[@]}" --k 1 --epochs 2)
"$BIN" "${K1[@]}" --renorm on --session K1ON > K1ON.log 2>&1
"$BIN" "${K1[@]}" --session K1AUTO > K1AUTO.log 2>&1
"$BIN" "${K1[@]}" --renorm on --session K1OLD --commands quit20 > K1OLD.log 2>&1
if /usr/bin/python3 - K1OLD/live.h5 > patch.log 2>&1 <<'PY'
import h5py, sys
with h5py.File(sys.argv[1], "r+") as f:
    g = f["run"]
    assert '"renorm": 1' in g.attrs["config_json"].decode()
    v = g.attrs["command_line"].decode()
    assert " --renorm on" in v
    g.attrs.modify("command_line", v.replace("--renorm on", "--threads 2").encode())
PY
then
  "$BIN" train --resume K1OLD > K1OLD2.log 2>&1; rc=$?
  check "the old-style k = 1 session resumes" [ $rc = 0 -a -f K1OLD/ckpt-32.h5 ]
  if h5diff K1OLD/ckpt-32.h5 K1ON/ckpt-32.h5 /weights /weights > /dev/null 2>&1; then
    ok "an old session's stored renorm = on is kept on resume (weights equal an uninterrupted --renorm on run's)"
  else bad "the resumed old session's weights differ from --renorm on's"; fi
  h5diff -q K1ON/ckpt-32.h5 K1AUTO/ckpt-32.h5 /weights /weights > /dev/null 2>&1 \
    && bad "k = 1: --renorm on and auto train the same weights" || ok "k = 1: --renorm on and auto train different weights"
  "$BIN" replay K1OLD --session K1REP > K1REP.log 2>&1
  grep -q '"renorm": 1' <(h5dump -a /run/config_json K1REP/live.h5 2>&1) && ok "its replay runs with renorm on (stored 1)" \
    || bad "replay of the old session: $(tail -2 K1REP.log)"
else bad "could not make the old-style session: $(tail -2 patch.log)"; fi
# 9. a session from before the router defaults changed (issue 33: noise 1, alpha 0.01, tau constant
# 1, stored in its config JSON; its command line says nothing) resumes with them: made from a
# session launched with them explicitly, interrupted at step 20, whose command line has them
# overwritten by "--threads 2" (already there) and spaces.
OLDR=(--noise 1 --alpha 0.01 --schedule const)
"$BIN" "${TRAIN[@]}" --epochs 2 "${OLDR[@]}" --session R1ON > R1ON.log 2>&1
"$BIN" "${TRAIN[@]}" --epochs 2 "${OLDR[@]}" --session R1OLD --commands quit20 > R1OLD.log 2>&1
if /usr/bin/python3 - R1OLD/live.h5 > patch2.log 2>&1 <<'PY'
import h5py, sys
with h5py.File(sys.argv[1], "r+") as f:
    g = f["run"]
    v = g.attrs["command_line"].decode()
    old = " --noise 1 --alpha 0.01 --schedule const"
    assert old in v, v
    g.attrs.modify("command_line", v.replace(old, " --threads 2".ljust(len(old))).encode())
PY
then
  "$BIN" train --resume R1OLD > R1OLD2.log 2>&1; rc=$?
  check "the session with the old router defaults resumes" [ $rc = 0 -a -f R1OLD/ckpt-32.h5 ]
  if h5diff R1OLD/ckpt-32.h5 R1ON/ckpt-32.h5 /weights /weights > /dev/null 2>&1; then
    ok "its stored noise, alpha and tau schedule are kept on resume (weights equal the explicit run's)"
  else bad "the resumed old-defaults session's weights differ from the explicit run's"; fi
else bad "could not make the old-defaults session: $(tail -2 patch2.log)"; fi

echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
