#!/bin/sh
# Every header of include/, src/, tests/unit/ and tests/fuzz/ compiles as the
# only include of a .c file (tools/check_headers.sh); and the check fails,
# naming the header, on one that needs an include it lacks or has no opening
# comment.
set -eu
sh tools/check_headers.sh
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/root/mod"
printf '/* mod/frag.h - a fragment. */\nsize_t frag_len(const char *s);\n' >"$tmp/root/mod/frag.h"
printf '#include <stddef.h>\nsize_t bare(void);\n' >"$tmp/root/mod/bare.h"
printf '/* mod/fine.h - fine. */\n#ifndef FINE_H\n#define FINE_H\n#include <stddef.h>\nsize_t fine(void);\n#endif\n' \
    >"$tmp/root/mod/fine.h"
if sh tools/check_headers.sh "$tmp/root" >"$tmp/out"; then exit 1; fi
grep -q "mod/frag.h: does not compile" "$tmp/out"
grep -q "mod/bare.h: does not open with a comment" "$tmp/out"
if grep -q "mod/fine.h" "$tmp/out"; then exit 1; fi
grep -q "headers: 3 checked, 2 failed" "$tmp/out"
