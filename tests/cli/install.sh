#!/bin/sh
# make install into a temporary prefix: the shared library with its soname,
# the headers and colibri.pc; a program built with `pkg-config --cflags
# --libs colibri` generates the same greedy text as `colibri run --temp 0`,
# and the shared library does not need libmicrohttpd. Uses the default build
# (build/, build/pic/), whatever flags the outer make had.
set -eu
command -v pkg-config >/dev/null || { echo "skipped: pkg-config missing (make deps installs it)"; exit 77; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL -u MAKEOVERRIDES -u SAN -u OPT -u BUILD -u EXTRA_CFLAGS -u CC -u MPI make -s install PREFIX="$tmp/usr" >"$tmp/make.log" 2>&1 ||
    { tail -20 "$tmp/make.log"; exit 1; }
lib=$tmp/usr/lib
[ -x "$lib/libcolibri.so.0.2.0" ] && [ -L "$lib/libcolibri.so.0" ] && [ -L "$lib/libcolibri.so" ]
objdump -p "$lib/libcolibri.so.0.2.0" | grep -q 'SONAME *libcolibri.so.0'
if objdump -p "$lib/libcolibri.so.0.2.0" | grep -q 'NEEDED *libmicrohttpd'; then echo "the library needs libmicrohttpd"; exit 1; fi
[ -f "$tmp/usr/include/colibri.h" ] && [ -x "$tmp/usr/bin/colibri" ]
export PKG_CONFIG_PATH=$lib/pkgconfig
[ "$(pkg-config --modversion colibri)" = 0.2.0 ]
# shellcheck disable=SC2046
cc -std=c11 -o "$tmp/hello" tests/install/hello.c $(pkg-config --cflags --libs colibri)
p="It is a truth universally acknowledged"
LD_LIBRARY_PATH=$lib "$tmp/hello" models/colibri-tiny "$p" 12 > "$tmp/a"
"$COLIBRI" run -p "$p" -n 12 --temp 0 2>/dev/null > "$tmp/b"
printf '\n' >> "$tmp/a"
cmp "$tmp/a" "$tmp/b"
