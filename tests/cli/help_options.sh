#!/bin/sh
# Every option that a --help text names exists: each "--name" in
# `colibri --help` and in each subcommand's --help is one of that
# subcommand's own options, or, written after another subcommand's name
# ("bench --mtp-accept"), one of that subcommand's.
set -eu
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
cmds=$("$COLIBRI" --help | awk '/^commands:/ {on = 1; next} on && NF {print $1}')
[ -n "$cmds" ] || { echo "FAIL: colibri --help lists no commands"; exit 1; }
for c in $cmds; do "$COLIBRI" "$c" --help > "$tmp/$c.help" 2>&1 || { echo "FAIL: $c --help: exit $?"; exit 1; }; done
"$COLIBRI" --help > "$tmp/top.help"
python3 - "$tmp" $cmds <<'PY'
import re, sys
d, cmds = sys.argv[1], sys.argv[2:]
text = {c: open(f"{d}/{c}.help").read() for c in cmds}
# an option defined in a help's table: "  -x, --name ARG" or "      --name ARG"
own = {c: set(re.findall(r"^ {2,}(?:-\w, )?(--[a-z0-9][a-z0-9-]*)", t, re.M)) | {"--help"} for c, t in text.items()}
# `colibri --help`: a command's line speaks of that command's options
units = [(c, t) for c, t in text.items()]
for line in open(f"{d}/top.help"):
    w = line.split()
    units.append((w[0] if w and w[0] in own else "COMMAND", line))
own["COMMAND"] = {"--help"}
fail = 0
for c, t in units:
    for m in re.finditer(r"(?:\b([a-z]+) )?(--[a-z0-9][a-z0-9-]*)", t):
        ref, opt = m.group(1), m.group(2)
        where = ref if ref in own and ref != c else c
        if opt not in own[where]:
            print(f"FAIL {c} --help names {opt}, which `colibri {where}` does not have")
            fail = 1
if not fail: print("ok   every option named in %d help texts exists" % (len(text) + 1))
sys.exit(fail)
PY
