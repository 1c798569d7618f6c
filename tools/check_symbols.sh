#!/bin/sh
# Every symbol libcolibri.a exports carries a module prefix (style rule 8),
# so a program linking the library meets no `xalloc` or `linear` of ours.
#   sh tools/check_symbols.sh [LIB [ALLOWLIST]]
# LIB defaults to $BUILD/libcolibri.a (BUILD defaults to build), ALLOWLIST to
# tools/symbols_allow.txt: the unprefixed symbols still tolerated, one per
# line (# starts a comment). Fails on an exported symbol that has no allowed
# prefix and is not listed, and on a listed symbol that is no longer exported
# unprefixed (delete its line: the list only shrinks).
lib=${1:-${BUILD:-build}/libcolibri.a}
allow=${2:-$(dirname "$0")/symbols_allow.txt}
# One prefix per module: api colibri_, base base_, cuda cuda_, io io_ (files) and st_
# (safetensors), kv kv_, model model_, mpi mpi_, quant quant_, sample sample_,
# serve serve_, tok tok_.
# (make CUDA=1's own archive, never in libcolibri.a, exports backend_, the
# seam of model/backend.h, and cu_, src/cuda's kernel launchers.)
PREFIXES="colibri_ base_ cuda_ io_ kv_ model_ mpi_ quant_ sample_ serve_ st_ tok_"

[ -f "$lib" ] || { echo "check_symbols: no library at $lib (build it first)"; exit 1; }
[ -f "$allow" ] || { echo "check_symbols: no allowlist at $allow"; exit 1; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
nm -g --defined-only "$lib" >"$tmp/nm" || { echo "check_symbols: nm failed on $lib"; exit 1; }
pat=$(echo "$PREFIXES" | sed 's/ /|/g')
# Names starting with __ belong to the compiler (sanitizer instrumentation
# such as __odr_asan.x); C reserves them, so no code of ours defines one.
awk 'NF == 3 && $3 !~ /^__/ { print $3 }' "$tmp/nm" | sort -u | grep -Ev "^($pat)" >"$tmp/unprefixed"
sed 's/#.*//; s/[[:space:]]//g; /^$/d' "$allow" | sort -u >"$tmp/allowed"
bad=0
for s in $(comm -23 "$tmp/unprefixed" "$tmp/allowed"); do
    echo "$lib: '$s' is exported without a module prefix ($PREFIXES): prefix it or make it static"
    bad=$((bad + 1))
done
for s in $(comm -13 "$tmp/unprefixed" "$tmp/allowed"); do
    echo "$allow: '$s' is no longer exported unprefixed: delete its line"
    bad=$((bad + 1))
done
echo "symbols: $(awk 'NF == 3 && $3 !~ /^__/' "$tmp/nm" | wc -l | tr -d ' ') exported, $(wc -l <"$tmp/unprefixed" | tr -d ' ') unprefixed" \
     "($(wc -l <"$tmp/allowed" | tr -d ' ') allowed), $bad problems"
[ "$bad" -eq 0 ]
