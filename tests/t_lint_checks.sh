#!/usr/bin/env bash
# t_lint_checks.sh — a lint of the shell tests: no condition outside its assertion. The tests
# count results with `check WHAT CMD...` (PASS when CMD exits 0), `ok WHAT` and `bad WHAT`; those
# functions always return 0, so a condition chained after one is never checked:
#   check "exit 2 and a message" [ $rc = 2 ] && grep -q msg log   # the grep runs, nobody looks
#   check "A" ...; grep -q x log                                    # the same with ';'
#   cond && ok "x"                                                  # cannot fail: no '|| bad'
#   ok "x" && cond / bad "x" && cond / check ... | cmd              # the same, other forms
# Flagged, per statement at the top level of a line (quotes, $( ), ${ }, backticks, comments and
# here-documents are skipped, `\`-continued and multi-line quoted lines are joined):
#   1. an assertion (check, ok, bad, or a function of the file that calls one: expect, refuse, ...)
#      followed by `&&`, `||` or `|`, except the idioms `cond && ok W || bad W` and
#      `cond && bad W || ok W`;
#   2. an assertion followed by `;` and then a bare condition ([, [[, test, grep, diff, cmp, !) on
#      the same line;
#   3. `cond && ok W` (or `cond || ok W`) without the `|| bad W` that makes it able to fail.
# A condition before an assertion (`have xmllint && check ...`, `cmd || bad "..."`) is a guard,
# not flagged. The fix is to put the whole condition inside: `check W bash -c '[ ... ] && grep ...'`
# or a small function.
# Usage: t_lint_checks.sh [path/to/moelab]      lints tests/*.sh (the argument is ignored: ctest)
#        t_lint_checks.sh --files FILE...       lints the given files, exit 1 if one is flagged
# Without --files it first checks itself on planted lines (each bad form must be flagged, each
# good form must not).
set -u
HERE=$(cd "$(dirname "$0")" && pwd)

# the scanner: prints FILE:LINE: REASON: TEXT for every flagged statement
read -r -d '' LINT_AWK <<'AWK'
function reset_file() { buf = ""; bufline = 0; nhd = 0; hdi = 0; }
# scan(s): split s into top-level statements; sets nseg, segw[i] (first word, keywords stripped),
# segop[i] (the operator after it: && || | ; & or "" at the end), segtext[i]; returns 1 when s is
# complete (no open quote or parenthesis, no trailing \ or operator); collects here-doc words
function scan(s,   i, c, n, d, st, cur, sep, nxt, w, k, word, q) {
  n = length(s); d = 0; nseg = 0; cur = ""; nhdnew = 0
  for (i = 1; i <= n; i++) {
    c = substr(s, i, 1); nxt = substr(s, i + 1, 1)
    top = (d == 0) ? "" : stk[d]
    if (top == "s") { if (c == "'") d--; cur = cur c; continue }
    if (c == "\\") { cur = cur c nxt; i++; continue }
    if (top == "d") {
      if (c == "\"") d--
      else if (c == "$" && nxt == "(") { stk[++d] = "c"; cur = cur c; c = nxt; i++ }
      else if (c == "$" && nxt == "{") { stk[++d] = "v"; cur = cur c; c = nxt; i++ }
      else if (c == "`") stk[++d] = "b"
      cur = cur c; continue
    }
    # plain context: the top level, $( ), ( ) inside it, ${ }, backticks, (( ))
    if (c == "'") { stk[++d] = "s"; cur = cur c; continue }
    if (c == "\"") { stk[++d] = "d"; cur = cur c; continue }
    if (c == "`") { if (top == "b") d--; else stk[++d] = "b"; cur = cur c; continue }
    if (c == "$" && nxt == "(") { stk[++d] = "c"; cur = cur c nxt; i++; continue }
    if (c == "$" && nxt == "{") { stk[++d] = "v"; cur = cur c nxt; i++; continue }
    if ((c == "<" || c == ">") && nxt == "(") { stk[++d] = "c"; cur = cur c nxt; i++; continue }
    if (top == "v") { if (c == "}") d--; cur = cur c; continue }
    if (c == "#" && (i == 1 || substr(s, i - 1, 1) ~ /[ \t;&|(]/ || substr(s, i - 1, 1) == "\n")) {
      while (i <= n && substr(s, i, 1) != "\n") i++
      i--; continue
    }
    if (c == "<" && nxt == "<") {
      if (substr(s, i + 2, 1) == "<") { cur = cur "<<<"; i += 2; continue }
      k = i + 2; if (substr(s, k, 1) == "-") k++
      while (substr(s, k, 1) ~ /[ \t]/) k++
      word = ""
      while (k <= n && substr(s, k, 1) !~ /[ \t;&|<>()\n]/) { word = word substr(s, k, 1); k++ }
      gsub(/['"\\]/, "", word)
      if (word != "") hdnew[++nhdnew] = word
      cur = cur substr(s, i, k - i); i = k - 1; continue
    }
    if (top == "k") { if (c == "]" && nxt == "]") { d--; cur = cur c; c = nxt; i++ } cur = cur c; continue }
    if (c == "[" && nxt == "[" && (i == 1 || substr(s, i - 1, 1) ~ /[ \t\n;&|(!]/)) { stk[++d] = "k"; cur = cur c nxt; i++; continue }
    if (top == "c" || top == "p" || top == "a" || top == "b") {
      if (c == "(") stk[++d] = "p"
      else if (c == ")" && (top == "c" || top == "p")) d--
      else if (c == ")" && top == "a" && nxt == ")") { d--; cur = cur c; c = nxt; i++ }
      cur = cur c; continue
    }
    # the top level
    if (c == "(" && nxt == "(") { stk[++d] = "a"; cur = cur c nxt; i++; continue }
    sep = ""
    if (c == "&" && nxt == "&") { sep = "&&"; i++ }
    else if (c == "|" && nxt == "|") { sep = "||"; i++ }
    else if (c == "|") { sep = "|"; if (nxt == "&") i++ }
    else if (c == ";") { sep = ";"; if (nxt == ";") i++ }
    else if (c == "&" && substr(s, i - 1, 1) !~ /[<>]/ && nxt != ">") sep = "&"
    else if (c == "\n") sep = "nl"
    else if (c == "(" || c == ")") sep = c
    if (sep != "") { addseg(cur, sep); cur = ""; continue }
    cur = cur c
  }
  addseg(cur, "")
  if (d > 0) return 0
  if (s ~ /\\$/) return 0
  if (s ~ /(&&|\|\||\|)[ \t]*$/) return 0
  return 1
}
function addseg(t, op,   w, a, m, j) {
  w = t
  sub(/^[ \t\n]+/, "", w)
  # strip the keywords and grouping that can start a statement
  while (w ~ /^(if|then|else|elif|do|while|until|time|!|\{|\})([ \t\n]|$)/) {
    sub(/^[^ \t\n]+[ \t\n]*/, "", w)
  }
  if ((op == "" || op == "nl") && t !~ /[^ \t\n]/) return
  m = split(w, a, /[ \t\n]+/)
  nseg++; segw[nseg] = (m > 0) ? a[1] : ""; segop[nseg] = op; segtext[nseg] = t
}
function isassert(w) { return (w in asserts) }
function iscond(w) { return w ~ /^(\[|\[\[|test|grep|diff|cmp|!)$/ }
function flag(why,   t) {
  t = logical; gsub(/\n[ \t]*/, " ", t); gsub(/^[ \t]+/, "", t)
  printf "%s:%d: %s: %s\n", FILENAME, bufline, why, substr(t, 1, 160)
  nflag++
}
function judge(   i, w, op, prevop) {
  for (i = 1; i <= nseg; i++) {
    w = segw[i]; op = segop[i]; prevop = (i > 1) ? segop[i - 1] : ""
    if (!isassert(w)) continue
    if (op == "&&" || op == "|" || op == "||") {
      if (op == "||" && ((w == "ok" && segw[i + 1] == "bad") || (w == "bad" && segw[i + 1] == "ok")) && prevop == "&&")
        ;  # cond && ok W || bad W  /  cond && bad W || ok W
      else if (op == "||" && segw[i + 1] ~ /^(true|:)$/ && segop[i + 1] !~ /^(&&|\|\||\|)$/)
        ;  # ... || true
      else { flag(w " followed by '" op "': the condition after it is not checked"); continue }
    }
    if (op == ";" && i < nseg && iscond(segw[i + 1])) {
      flag(w " followed by '; " segw[i + 1] "': that condition is not checked"); continue
    }
    if (w == "ok" && prevop == "&&" && !(op == "||" && segw[i + 1] == "bad"))
      { flag("'&& ok' without '|| bad': it cannot fail"); continue }
    if (w == "ok" && prevop == "||" && !(i > 2 && segw[i - 1] == "bad" && segop[i - 2] == "&&"))
      { flag("'|| ok' without '&& bad' before it: it cannot fail"); continue }
  }
}
# pass 1: the assertion functions of the file (check, ok, bad, and any function calling one)
FNR == 1 && pass == 1 { delete asserts; asserts["check"]; asserts["ok"]; asserts["bad"]; fn = ""; fnbody = "" }
pass == 1 {
  if (match($0, /^[ \t]*[A-Za-z_][A-Za-z_0-9]*[ \t]*\(\)[ \t]*\{/)) {
    fn = $0; sub(/^[ \t]*/, "", fn); sub(/[ \t]*\(.*/, "", fn); fnbody = ""; fnind = $0; sub(/[^ \t].*/, "", fnind)
  }
  if (fn != "") {
    fnbody = fnbody "\n" $0
    if ($0 ~ /\}[ \t]*(#.*)?$/ && ($0 ~ /^[ \t]*[A-Za-z_][A-Za-z_0-9]*[ \t]*\(\)[ \t]*\{.*\}/ || $0 ~ ("^" fnind "\\}"))) {
      if (fnbody ~ /(^|[;&|{(\n]|then|else|do)[ \t]*(ok|bad|check)[ \t]/ && fn !~ /^(ok|bad|check|cleanup|cleanup_more)$/)
        asserts[fn]
      fn = ""
    }
  }
  fnames[FILENAME] = 1
  for (a in asserts) A[FILENAME, a] = 1
  next
}
# pass 2: scan
FNR == 1 { reset_file(); delete asserts; for (k in A) { split(k, kp, SUBSEP); if (kp[1] == FILENAME) asserts[kp[2]] } }
{
  if (hdi > 0) {
    l = $0; sub(/^\t+/, "", l)
    if (l == hd[hdi]) { hdi++; if (hdi > nhd) { hdi = 0; nhd = 0 } }
    next
  }
  if (buf == "") { buf = $0; bufline = FNR } else buf = buf "\n" $0
  if (!scan(buf)) next
  logical = buf
  judge()
  buf = ""
  if (nhdnew > 0) { nhd = 0; for (j = 1; j <= nhdnew; j++) hd[++nhd] = hdnew[j]; hdi = 1 }
}
END { exit(nflag > 0) }
AWK

# awk takes pass=N between the files as an assignment: both passes read every file
lint() { awk "$LINT_AWK" pass=1 "$@" pass=2 "$@"; }

if [ "${1:-}" = --files ]; then shift; lint "$@"; exit; fi

pass=0; fail=0
ok()  { echo "PASS  $*"; pass=$((pass + 1)); }
bad() { echo "FAIL  $*"; fail=$((fail + 1)); }
check() { local what=$1; shift; if "$@"; then ok "$what"; else bad "$what"; fi; }

# the lint on planted lines: every line marked BAD flagged, none of the others
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
# the planted lines live in tests/fixtures/lint/planted.txt (not a .sh: no lint of the suite
# takes them for tests); its two comment lines at the top are not shell
sed 1,2d "$(dirname "$0")/fixtures/lint/planted.txt" > "$T/planted.sh"
# a planted line's number is its statement's first line (a \-continued line counts from the first)
want=$(awk '{ if (!cont) start = NR; cont = /\\$/ } /# BAD$/ { printf "%d ", start }' "$T/planted.sh")
out=$(lint "$T/planted.sh"); rc=$?
echo "$out" | sed 's/^/  lint: /'
got=$(echo "$out" | sed -n 's/^[^:]*:\([0-9]*\):.*/\1/p' | tr '\n' ' ')
if [ "$got" = "$want" ]; then ok "the lint flags exactly the planted bad lines ($want)"
else bad "the lint on planted lines: flagged lines '$got', planted '$want'"; fi
check "the lint exits 1 when it flags a line (exit $rc)" [ "$rc" = 1 ]
printf 'check "fine" [ -f x ]\n' > "$T/good.sh"
lint "$T/good.sh" > /dev/null; rc=$?
check "the lint exits 0 on a clean file (exit $rc)" [ "$rc" = 0 ]

# the shell tests of this folder
out=$(lint "$HERE"/*.sh); rc=$?
if [ "$rc" = 0 ]; then ok "no shell test in tests/ has a condition outside its check ($(ls "$HERE"/*.sh | wc -l) files)"
else bad "conditions outside their check (fix: put the whole condition inside the check):"; echo "$out" | sed 's/^/  /'; fi

echo "$pass passed, $fail failed"
[ $fail = 0 ]
