#!/bin/sh
# The source lint (tools/lint.py: file length, mutable static state outside
# tools/lint_allow.txt, getenv outside src/cli/) passes on the tree; and it
# fails, naming file and rule, on each planted violation, passes what is
# allowed, and fails on an allowlist line that matches nothing.
set -eu
python3 tools/lint.py
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/src/mod" "$tmp/src/cli" "$tmp/tools"
awk 'BEGIN { for (i = 0; i < 1001; i++) print "int f" i "(void);" }' >"$tmp/src/mod/long.c"
cat >"$tmp/src/mod/state.c" <<'C'
/* "static int in_a_string;" and getenv("X") in a comment do not count */
#include <stdlib.h>
static const char *const names[] = { "a", "b" };
static const struct { const char *name; int v; } table[] = { { "x", 1 } };
struct pair { int a, b; };
typedef struct { int n; } counted;
int mod_f(int x);
static void (*hook)(int);
static const char *last_name;
int total = 3;
static int work(void)
{
    static int calls;
    static const int limit = 4;
    const char *h = getenv("HOME");
    return calls++ < limit && h && names[0] && table[0].v;
}
C
printf '#include <stdlib.h>\nconst char *cli_home(void) { return getenv("HOME"); }\n' >"$tmp/src/cli/env.c"
: >"$tmp/tools/lint_allow.txt"
if python3 tools/lint.py "$tmp" >"$tmp/out"; then echo "planted violations passed"; exit 1; fi
cat "$tmp/out"
want() { grep -q "$1" "$tmp/out" || { echo "not reported: $1"; exit 1; }; }
want "src/mod/long.c: 1001 lines, over the limit of 1000"
want "src/mod/state.c:8: 'hook' is mutable"
want "src/mod/state.c:9: 'last_name' is mutable"
want "src/mod/state.c:10: 'total' is mutable"
want "src/mod/state.c:13: 'calls' is mutable"
want "src/mod/state.c:15: getenv() outside src/cli/"
want "lint: 3 files checked, 6 violations"
if grep -qE "'(names|table|pair|counted|limit|mod_f|in_a_string)'|cli/env.c|state.c:[12]:" "$tmp/out"; then
    echo "reported what is allowed"; exit 1
fi
printf 'length src/mod/long.c\nstate src/mod/state.c hook\nstate src/mod/state.c last_name\nstate src/mod/state.c total\nstate src/mod/state.c calls\ngetenv src/mod/state.c\n' \
    >"$tmp/tools/lint_allow.txt"
python3 tools/lint.py "$tmp" >"$tmp/out" || { cat "$tmp/out"; exit 1; }
echo "state src/mod/gone.c old  # removed" >>"$tmp/tools/lint_allow.txt"
if python3 tools/lint.py "$tmp" >"$tmp/out"; then echo "stale allowlist line passed"; exit 1; fi
want "'state src/mod/gone.c old' matches nothing"
