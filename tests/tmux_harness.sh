# tmux_harness.sh — sourced by the tests that drive moelab through tmux (t_tui, t_browse,
# t_compare, t_screen80, t_layers, t_layercmd, t_mouse, t_readonly, t_termrestore, t_screenalarm): it skips the test when tmux is missing (exit 77,
# which ctest reports as skipped), makes BIN
# absolute, creates the temp folder T, starts a private tmux server (one per run, so concurrent
# runs never meet) with a session that lives as long as the test (killing the test's session
# never takes the server down, so the next new-session cannot race a server that is exiting),
# cleans up at exit, and gives the PASS/FAIL counting and the capture-pane polling.
#
# Set before sourcing: BIN (the binary, any path) and TMUX_NAME (the server's socket name part).
# Optional: S (the test's tmux session, default "t"), TMUX_UTF8=1 (tmux -u), WAIT_FLOOR (the
# least seconds wait_for waits, default 0) and a function cleanup_more (run first at exit).
#
#   ok WHAT / bad WHAT / check WHAT CMD...   count a result (check: CMD's exit status)
#   cap [SESSION] / keys ARGS... / typed TEXT capture-pane of $S (or SESSION) / send-keys / send-keys -l
#   wait_for REGEX [SECONDS]                 polls cap until grep -E finds REGEX (10 s default)
if ! command -v tmux >/dev/null 2>&1; then
  echo "SKIP: tmux is not installed (apt-get install tmux); $(basename "$0") did not run"
  exit 77 # ctest: skipped (SKIP_RETURN_CODE)
fi
BIN=$(cd "$(dirname "$BIN")" && pwd)/$(basename "$BIN")
T=$(mktemp -d)
S=${S:-t}
if [ "${TMUX_UTF8:-0}" = 1 ]; then TM=(tmux -u -L "$TMUX_NAME-$$" -f /dev/null)
else TM=(tmux -L "$TMUX_NAME-$$" -f /dev/null); fi
cleanup() {
  declare -F cleanup_more >/dev/null && cleanup_more
  "${TM[@]}" kill-server >/dev/null 2>&1
  rm -rf "$T"
}
trap cleanup EXIT
"${TM[@]}" kill-server >/dev/null 2>&1
"${TM[@]}" new-session -d -s keepalive "sleep 100000" >/dev/null 2>&1

pass=0; fail=0
ok()  { echo "PASS  $*"; pass=$((pass + 1)); }
bad() { echo "FAIL  $*"; fail=$((fail + 1)); }
check() { local what=$1; shift; if "$@"; then ok "$what"; else bad "$what"; fi; }

cap() { "${TM[@]}" capture-pane -p -t "${1:-$S}" 2>/dev/null; }
keys() { "${TM[@]}" send-keys -t "$S" "$@"; }
typed() { "${TM[@]}" send-keys -t "$S" -l "$1"; }
wait_for() {
  local pat=$1 limit=${2:-10} i
  ((limit < ${WAIT_FLOOR:-0})) && limit=$WAIT_FLOOR
  for ((i = 0; i < limit * 10; i++)); do
    cap | grep -Eq -- "$pat" && return 0
    sleep 0.1
  done
  return 1
}
