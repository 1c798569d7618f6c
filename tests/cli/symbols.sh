#!/bin/sh
# libcolibri.a exports only module-prefixed symbols beyond the allowlist
# (tools/check_symbols.sh); and the check itself fails, naming the symbol, on
# an unprefixed export and on a stale allowlist line.
set -eu
sh tools/check_symbols.sh "$BUILD/libcolibri.a"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
printf 'int kv_fine(void) { return 1; }\nint stray_helper(void) { return 2; }\n' >"$tmp/a.c"
${CC:-cc} -c "$tmp/a.c" -o "$tmp/a.o"
ar rcs "$tmp/liba.a" "$tmp/a.o"
printf '# none\n' >"$tmp/empty.txt"
if sh tools/check_symbols.sh "$tmp/liba.a" "$tmp/empty.txt" >"$tmp/out"; then exit 1; fi
grep -q "'stray_helper' is exported without a module prefix" "$tmp/out"
if grep -q kv_fine "$tmp/out"; then exit 1; fi
printf 'stray_helper  # a.c\n' >"$tmp/ok.txt"
sh tools/check_symbols.sh "$tmp/liba.a" "$tmp/ok.txt" >/dev/null
printf 'stray_helper\ngone_symbol\n' >"$tmp/stale.txt"
if sh tools/check_symbols.sh "$tmp/liba.a" "$tmp/stale.txt" >"$tmp/out"; then exit 1; fi
grep -q "'gone_symbol' is no longer exported unprefixed" "$tmp/out"
