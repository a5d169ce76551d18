#!/usr/bin/env bash
# t_install.sh — `cmake --install` puts moelab, moelab.1, the bash completion and the docs
# (share/doc/moelab) in their usual places under a prefix; the man page (generated from the option
# table at build time) renders with
# man(1) and lists every option of `moelab train --help`; the completion, sourced into bash,
# registers _moelab for moelab and offers subcommands, options and choice values.
set -u
BIN=${1:?usage: t_install.sh path/to/moelab}
BUILD=$(cd "$(dirname "$BIN")" && pwd)
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
pass=0; fail=0
ok()  { echo "PASS  $*"; pass=$((pass + 1)); }
bad() { echo "FAIL  $*"; fail=$((fail + 1)); }

if cmake --install "$BUILD" --prefix "$T/p" >"$T/install.log" 2>&1; then ok "cmake --install --prefix"; else bad "cmake --install: $(tail -3 "$T/install.log")"; fi
for f in bin/moelab share/man/man1/moelab.1 share/bash-completion/completions/moelab; do
  [ -s "$T/p/$f" ] && ok "installed $f" || bad "missing $f after install ($(cd "$T/p" 2>/dev/null && find . -type f | head))"
done
"$T/p/bin/moelab" --version | grep -q '^moelab [0-9]' && ok "the installed moelab runs" || bad "installed moelab --version"
# the docs next to the man page, with the repository's relative paths (their links work there)
for f in README.md sessions/README.md tests/README.md tests/RESULTS.md core/README.md datasets/README.md views/README.md; do
  cmp -s "$T/p/share/doc/moelab/$f" "$(dirname "$0")/../$f" && ok "installed share/doc/moelab/$f" || bad "share/doc/moelab/$f missing or not the repository's"
done

# the man page renders and holds every option --help lists
MAN="$T/p/share/man/man1/moelab.1"
if command -v man >/dev/null; then page=$(cd "$T/p/share/man/man1" && MANWIDTH=100 man ./moelab.1 2>"$T/man.err" | col -b)
else page=$(nroff -man "$MAN" 2>"$T/man.err" | col -b); fi
grep -q "^NAME" <<<"$page" && grep -q "moelab - a workbench" <<<"$page" && ok "man ./moelab.1 renders ($(wc -l <<<"$page") lines)" || bad "man page: $(head -5 <<<"$page") $(cat "$T/man.err")"
[ ! -s "$T/man.err" ] && ok "man page renders without warnings" || bad "man warnings: $(head -3 "$T/man.err")"
missing=
for o in $("$BIN" train --help | grep -oE '^  --[a-z0-9-]+' | tr -d ' '); do
  grep -qE -- "^ +$o( |$)" <<<"$page" || missing="$missing $o"
done
n=$("$BIN" train --help | grep -cE '^  --')
[ -z "$missing" ] && [ "$n" -gt 40 ] && ok "the man page lists all $n options of train --help" || bad "options missing from the man page:$missing"
for c in train bench data replay export browse sweep; do
  grep -qE "^ +$c " <<<"$page" || grep -qE "^ +$c$" <<<"$page" || bad "subcommand $c not in COMMANDS"
done
grep -q "MOELAB_SESSIONS" <<<"$page" && ok "ENVIRONMENT names MOELAB_SESSIONS" || bad "no MOELAB_SESSIONS in the man page"
see=$(sed -n '/^SEE ALSO/,/^[A-Z]/p' <<<"$page" | tr -s ' \n' '  ')
miss=; for d in share/doc/moelab README.md sessions/README.md tests/README.md; do grep -qF "$d" <<<"$see" || miss="$miss $d"; done
[ -z "$miss" ] && ok "SEE ALSO names the installed docs" || bad "SEE ALSO lacks:$miss ($see)"
grep -q -- "--tsne-samples N" <<<"$page" && grep -q "(512)" <<<"$page" && ok "option text with defaults (--tsne-samples N ... (512))" || bad "defaults missing"

# bash completion: source it, then call the function as bash would
COMP="$T/p/share/bash-completion/completions/moelab"
comp() { # comp WORDS... -> the completions of the last word
  bash -c 'source "$1"; shift; complete -p moelab; COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); _moelab; printf "%s\n" "${COMPREPLY[@]}"' _ "$COMP" "$@" 2>&1
}
out=$(comp "$BIN" "")
grep -q "complete -o filenames -F _moelab moelab" <<<"$out" && ok "complete -p moelab: -F _moelab" || bad "complete -p: $out"
miss=; for c in train bench data replay export browse sweep; do grep -qx "$c" <<<"$out" || miss="$miss $c"; done
[ -z "$miss" ] && ok "moelab <TAB> offers the subcommands" || bad "subcommands missing:$miss ($out)"
out=$(comp "$BIN" br); [ "$(grep -cx browse <<<"$out")" = 1 ] && ! grep -qx train <<<"$out" && ok "moelab br<TAB> -> browse" || bad "br: $out"
out=$(comp "$BIN" train --sch); grep -qx -- "--schedule" <<<"$out" && ok "train --sch<TAB> -> --schedule" || bad "train --sch: $out"
out=$(comp "$BIN" train --tsne); grep -qx -- "--tsne-samples" <<<"$out" && ok "train --tsne<TAB> -> --tsne-samples" || bad "--tsne: $out"
out=$(comp "$BIN" train --head ""); miss=; for h in dense moe softmoe-batch softmoe-sample; do grep -qx "$h" <<<"$out" || miss="$miss $h"; done
[ -z "$miss" ] && ok "train --head <TAB> offers the heads" || bad "--head values missing:$miss"
out=$(comp "$BIN" train --schedule si); grep -qx sigmoid <<<"$out" && ok "train --schedule si<TAB> -> sigmoid" || bad "--schedule si: $out"
out=$(comp "$BIN" browse --l); grep -qx -- "--list" <<<"$out" && ok "browse --l<TAB> -> --list (from browse --help)" || bad "browse --l: $out"
out=$(comp "$BIN" sweep --va); grep -qx -- "--vary" <<<"$out" && ok "sweep --va<TAB> -> --vary" || bad "sweep --va: $out"
out=$(comp "$BIN" sweep --wid); grep -qx -- "--width" <<<"$out" && ok "sweep --wid<TAB> -> --width (a train option)" || bad "sweep --wid: $out"
out=$(comp "$BIN" data ""); grep -qx info <<<"$out" && grep -qx import <<<"$out" && ok "data <TAB> -> info import" || bad "data: $out"

echo "t_install: $pass passed, $fail failed"
[ "$fail" = 0 ]
