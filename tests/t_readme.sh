#!/usr/bin/env bash
# t_readme.sh — the docs against the tables they document, as the binary prints them (README.md,
# the user guide, and sessions/README.md, the file formats):
#   - the Training options table and `moelab train --help` name the same options (both ways), and
#     every default the table gives is the one --help prints;
#   - Temperature schedules lists the kinds of --schedule, in order, with the anneal keys each
#     reads, and the anneal keys with the option of each; the checkpoint format (sessions/README.md)
#     numbers the kinds in enum order;
#   - The command language lists every `set` parameter and no other, and its anneal line the keys;
#     its table names every command of the command table (core/cmdrows.h, as the man page's
#     COMMAND LANGUAGE section prints it) and no other;
#   - README.md is under 1,000 lines with a table of contents; no doc points to DESIGN.md (it is not
#     in the repository); every relative link of the docs names a file and a heading that exist.
# Each check prints PASS/FAIL with what differs; exits 0 only if none failed.
set -u
BIN=${1:?usage: t_readme.sh path/to/moelab}
SRC=${MOELAB_SRC:-$(cd "$(dirname "$0")/.." && pwd)}
HELP=$("$BIN" train --help) || { echo "FAIL  moelab train --help exited non-zero"; exit 1; }
MAN=$("$BIN" --man) || { echo "FAIL  moelab --man exited non-zero"; exit 1; }
MAN="$MAN" HELP="$HELP" python3 - "$SRC/README.md" "$SRC/sessions/README.md" <<'PY'
import os, re, sys

readme = open(sys.argv[1], encoding="utf-8").read().split("\n")
formats = open(sys.argv[2], encoding="utf-8").read().split("\n")   # sessions/README.md
help_lines = os.environ["HELP"].split("\n")
fails = 0
def check(ok, what, detail=""):
    global fails
    print(("PASS  " if ok else "FAIL  ") + what + ("" if ok or not detail else ": " + detail))
    fails += 0 if ok else 1

# ---- --help: one entry per option, continuation lines joined
opts = {}   # name -> joined text after the name and metavar
order = []
cur = None
for line in help_lines:
    m = re.match(r"^  --([a-z0-9-]+)(.*)$", line)
    if m:
        cur = m.group(1)
        order.append(cur)
        opts[cur] = m.group(2).strip()
    elif cur and re.match(r"^ {5,}\S", line):
        opts[cur] += " " + line.strip()
    else:
        cur = None
check(len(opts) > 40, "--help lists %d options" % len(opts))

def section(title):
    """Lines of the README section whose heading is `title`, up to the next heading."""
    out, on = [], False
    for line in readme:
        if re.match(r"^#+ ", line):
            if on: break
            on = line.lstrip("#").strip() == title
            continue
        if on: out.append(line)
    check(bool(out), "README has a section '%s'" % title)
    return out

def cells(row):
    return [c.strip() for c in re.split(r"(?<!\\)\|", row.strip())[1:-1]]

def plain(cell):
    return cell.replace("`", "").replace("\\|", "|").strip()

# ---- Training options: names both ways, defaults
rows = [cells(l) for l in section("Training options (`moelab train --help`)") if l.startswith("| `--")]
readme_opts = []
for r in rows:
    names = re.findall(r"`--([a-z0-9-]+)", r[0])
    readme_opts += names
    if len(r) < 2 or not plain(r[1]): continue
    dflts = [d.strip() for d in plain(r[1]).split(", ")] if len(names) > 1 else [plain(r[1])]
    if len(dflts) != len(names) and len(dflts) != 1:
        check(False, "README row %s: %d defaults for %d options" % (r[0], len(dflts), len(names)))
        continue
    for name, d in zip(names, dflts):
        text = opts.get(name, "")
        check(text.endswith("(" + d + ")"), "--%s: README default '%s' is the --help default" % (name, d),
              "--help says: " + text[-60:])
missing = [o for o in order if o not in readme_opts]
extra = [o for o in readme_opts if o not in opts]
check(not missing, "every option of --help is in README's Training options table", "missing " + " ".join(missing))
check(not extra, "every option of README's Training options table is in --help", "not in --help: " + " ".join(extra))
dup = sorted(set(o for o in readme_opts if readme_opts.count(o) > 1))
check(not dup, "README lists each option once", " ".join(dup))

# ---- schedule kinds with their keys, anneal keys with their options
sched = opts.get("schedule", "")
m = re.search(r"reads: (.*) \([a-z-]+\)$", sched)
check(bool(m), "--help lists the schedule kinds", sched)
kinds = []  # (name, [keys])
for part in (m.group(1).split(" | ") if m else []):
    km = re.match(r"^([a-z0-9-]+)(?: \((.*)\))?$", part.strip())
    kinds.append((km.group(1), (km.group(2) or "").split()) if km else (part, []))
sec = section("Temperature schedules")
krows = [cells(l) for l in sec if re.match(r"^\| `[a-z0-9-]+` \|", l)]
check([r[0].strip("`") for r in krows] == [k for k, _ in kinds],
      "README's schedule table lists the kinds of --schedule in order",
      "README %s, --help %s" % ([r[0] for r in krows], [k for k, _ in kinds]))
for (k, keys), r in zip(kinds, krows):
    check(sorted(re.findall(r"`([a-z]+=)`", r[1])) == sorted(keys), "%s reads %s" % (k, " ".join(keys) or "no key"),
          "README says " + r[1])
cmds = opts.get("commands", "")
keys = re.findall(r"\[([a-z]+)=[A-Z]+\]", cmds)
check(len(keys) >= 5, "--help lists the anneal keys (%s)" % " ".join(keys))
arows = [cells(l) for l in sec if re.match(r"^\| `[a-z]+=[A-Z]+` \|", l)]
check([re.match(r"`([a-z]+)=", r[0]).group(1) for r in arows] == keys, "README's anneal key table lists the keys in order",
      "README %s" % [r[0] for r in arows])
key_opt = {}
for name, text in opts.items():
    km = re.search(r"as ([a-z]+)= in anneal", text)
    if km: key_opt[km.group(1)] = name
for r in arows:
    key = re.match(r"`([a-z]+)=", r[0]).group(1)
    check(r[1].strip("`") == "--" + key_opt.get(key, "?"), "%s= is set at launch by --%s" % (key, key_opt.get(key, "?")),
          "README says " + r[1])
# the checkpoint format (sessions/README.md) numbers the kinds
km = re.search(r"`kind` i4 \(([^)]*)\)", "\n".join(l for l in formats if "/schedule/tau_base" in l))
want = ", ".join("%d %s" % (i, k) for i, (k, _) in enumerate(kinds))
check(bool(km) and km.group(1) == want, "the checkpoint format numbers the kinds: " + want, km.group(1) if km else "not found")

# ---- the command language: set parameters and the anneal line
pm = re.search(r"set ([a-z|-]+) V", cmds)
params = pm.group(1).split("|") if pm else []
check(len(params) >= 5, "--help lists the set parameters (%s)" % " ".join(params))
sec = section("The command language")
readme_params = re.findall(r"`set ([a-z-]+) V`", "\n".join(sec))
check(readme_params == params, "The command language lists every set parameter in order, no other",
      "README %s, --help %s" % (readme_params, params))
aline = [l for l in sec if l.startswith("| `anneal KIND")]
check(len(aline) == 1 and re.findall(r"\[([a-z]+)=[A-Z]+\]", aline[0]) == keys,
      "The command language's anneal line has the keys of the table", aline[0] if aline else "no anneal row")

# ---- the docs as a whole: the user guide's size and contents, links that resolve
check(len(readme) < 1000, "README.md is under 1,000 lines (%d)" % len(readme))
check(any(re.match(r"^#+ Contents", l) for l in readme), "README.md has a table of contents")
root = os.path.dirname(os.path.abspath(sys.argv[1]))
docs = ["README.md", "sessions/README.md", "tests/README.md", "tests/RESULTS.md", "core/README.md",
        "datasets/README.md", "views/README.md"]
def slug(h):   # GitHub's heading anchors
    h = re.sub(r"[\\`*<>]", "", h.strip().lower())
    return re.sub(r"[^\w\- ]", "", h).replace(" ", "-")
anchors, texts = {}, {}
for d in docs:
    path = os.path.join(root, d)
    check(os.path.isfile(path), "%s exists" % d)
    if not os.path.isfile(path): continue
    texts[d] = open(path, encoding="utf-8").read()
    fence, heads = False, set()
    for l in texts[d].split("\n"):
        if l.startswith("```"): fence = not fence
        m = None if fence else re.match(r"^#+ (.*)$", l)
        if m: heads.add(slug(m.group(1)))
    anchors[d] = heads
for d, text in texts.items():
    check("DESIGN.md" not in text, "%s does not point to DESIGN.md (not in the repository)" % d)
    bad_links = []
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"^[a-z]+:", target): continue
        f, _, frag = target.partition("#")
        tf = os.path.normpath(os.path.join(os.path.dirname(d), f)) if f else d
        if not os.path.exists(os.path.join(root, tf)): bad_links.append(target); continue
        if frag and tf in anchors and frag not in anchors[tf]: bad_links.append(target)
    check(not bad_links, "every relative link of %s resolves" % d, " ".join(bad_links))
# ---- the command language: every command of the table (the man page's section) and no other
man = os.environ["MAN"].split("\n")
ms = man.index(".SH COMMAND LANGUAGE") if ".SH COMMAND LANGUAGE" in man else -1
me = next((i for i in range(ms + 1, len(man)) if man[i].startswith(".SH ")), len(man))
man_words = [re.match(r"\\fB([a-z]+(?:\\-[a-z]+)*)", man[i + 1]).group(1).replace("\\-", "-")
             for i in range(ms + 1, me - 1) if man[i] == ".TP" and re.match(r"\\fB[a-z]", man[i + 1])]
check(ms >= 0 and len(man_words) >= 8, "moelab --man has a COMMAND LANGUAGE section (%s)" % " ".join(man_words))
readme_words = set()
for l in sec:
    if l.startswith("| `") and not l.startswith("| command"):
        for c in re.findall(r"`([a-z-]+)[^`]*`", l.split(" | ")[0]):
            readme_words.add(c)
check(readme_words == set(man_words), "The command language's table names every command of the table, no other",
      "README only %s, table only %s" % (sorted(readme_words - set(man_words)), sorted(set(man_words) - readme_words)))

print("t_readme: %d failed" % fails)
sys.exit(1 if fails else 0)
PY
