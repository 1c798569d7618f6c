#!/bin/sh
# Every header stands alone (style rule 7): each one, included twice as the
# only lines of a .c file, compiles without a diagnostic; and it opens with a
# comment (its contract).
#   sh tools/check_headers.sh [ROOT...]   default: include src tests/unit tests/fuzz
# A header under ROOT is included by its path relative to ROOT, as the code
# includes it ("kv/codec.h"). CC defaults to cc. Prints each failing header
# with the compiler's message; exits 1 if any failed.
CC=${CC:-cc}
[ $# -gt 0 ] || set -- include src tests/unit tests/fuzz
FLAGS="-std=c11 -D_GNU_SOURCE -Wall -Wextra -Wno-unused-parameter -Wshadow -Werror -fsyntax-only"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
bad=0; n=0
for root in "$@"; do
    for h in $(find "$root" -name '*.h' | sort); do
        rel=${h#"$root"/}
        n=$((n + 1))
        if [ "$(head -c 2 "$h")" != "/*" ]; then
            echo "$h: does not open with a comment stating what the module owns"
            bad=$((bad + 1))
            continue
        fi
        printf '#include "%s"\n#include "%s"\n' "$rel" "$rel" >"$tmp/only.c"
        if ! "$CC" $FLAGS -I"$root" -Iinclude -Isrc -Itests/unit "$tmp/only.c" >"$tmp/msg" 2>&1; then
            echo "$h: does not compile as the only include of a .c file:"
            sed 's/^/    /' "$tmp/msg" | head -n 8
            bad=$((bad + 1))
        fi
    done
done
echo "headers: $n checked, $bad failed"
[ "$bad" -eq 0 ]
