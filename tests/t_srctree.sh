#!/usr/bin/env bash
# t_srctree.sh — runs do not land in the source tree: the README's quick start (`./build/moelab`
# from the repository root, here headless on a tiny synthetic set) writes its session under
# runs/, which .gitignore lists, so `git status` is the same before and after; `moelab browse`
# lists the same place by default; $MOELAB_SESSIONS moves both.
set -u
BIN=${1:?usage: t_srctree.sh path/to/moelab}
SRC=${MOELAB_SRC:?MOELAB_SRC is the source tree}
BIN=$(cd "$(dirname "$BIN")" && pwd)/$(basename "$BIN")
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
pass=0; fail=0
ok()  { echo "PASS  $*"; pass=$((pass + 1)); }
bad() { echo "FAIL  $*"; fail=$((fail + 1)); }
RUN=(train --headless --dataset synthetic:8x8x1:3:96 --width 0.25 --hidden 8 --experts 4 --epochs 1 --batch 32 --threads 1)

# 1. $MOELAB_SESSIONS: train and browse both use it
( cd "$T" && MOELAB_SESSIONS="$T/store" "$BIN" "${RUN[@]}" >"$T/a.log" 2>&1 ) || bad "train with MOELAB_SESSIONS: $(tail -3 "$T/a.log")"
n=$(ls -d "$T"/store/synthetic-moe-*/ 2>/dev/null | wc -l)
[ "$n" = 1 ] && ok "MOELAB_SESSIONS=\$T/store: the session is under it" || bad "MOELAB_SESSIONS: $n sessions under store/ ($(ls -R "$T" | head))"
[ -e "$T/runs" ] && bad "runs/ created although MOELAB_SESSIONS was set" || ok "no runs/ with MOELAB_SESSIONS"
out=$(cd / && MOELAB_SESSIONS="$T/store" "$BIN" browse --list 2>&1)
grep -q "synthetic-moe-" <<<"$out" && ok "browse --list defaults to \$MOELAB_SESSIONS" || bad "browse --list with MOELAB_SESSIONS: $out"

# 2. default: runs/ under the current directory
( cd "$T" && env -u MOELAB_SESSIONS "$BIN" "${RUN[@]}" >"$T/b.log" 2>&1 ) || bad "train: $(tail -3 "$T/b.log")"
n=$(ls -d "$T"/runs/synthetic-moe-*/ 2>/dev/null | wc -l)
[ "$n" = 1 ] && ok "default session root is runs/ of the current directory" || bad "default root: $n sessions under runs/"
out=$(cd "$T" && env -u MOELAB_SESSIONS "$BIN" browse --list 2>&1)
grep -q "synthetic-moe-" <<<"$out" && ok "browse --list defaults to runs/" || bad "browse --list: $out"

# 3. the quick start from the repository root leaves git status unchanged
if command -v git >/dev/null && git -C "$SRC" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  before=$(git -C "$SRC" status --porcelain)
  ls -d "$SRC"/runs/*/ >"$T/runs.before" 2>/dev/null
  ( cd "$SRC" && env -u MOELAB_SESSIONS "$BIN" "${RUN[@]}" >"$T/c.log" 2>&1 ) || bad "train in the source tree: $(tail -3 "$T/c.log")"
  ls -d "$SRC"/runs/*/ >"$T/runs.after" 2>/dev/null
  new=$(comm -13 <(sort "$T/runs.before") <(sort "$T/runs.after"))
  after=$(git -C "$SRC" status --porcelain)
  [ -n "$new" ] && ok "quick start in the source root wrote $new" || bad "no new session under $SRC/runs"
  [ -z "$(ls -d "$SRC"/sessions/*-moe-* 2>/dev/null)" ] && ok "nothing under the source's sessions/" || bad "a run landed in sessions/"
  [ "$before" = "$after" ] && ok "git status unchanged by the run" || bad "git status changed: $(diff <(echo "$before") <(echo "$after"))"
  for d in $new; do rm -rf "$d"; done
  rmdir "$SRC/runs" 2>/dev/null
else
  echo "SKIP  $SRC is not a git work tree"
fi

echo "t_srctree: $pass passed, $fail failed"
[ "$fail" = 0 ]
