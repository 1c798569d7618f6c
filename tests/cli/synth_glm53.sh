#!/bin/sh
# colibri synth's GLM-5.3 presets: glm53-tiny written in the release's names
# loads (every tensor read, the layer pattern KDA x 3 then indexed) and
# decodes; glm53-flash (real shapes: a layer is gigabytes, too big to write
# here) is listed and refuses --mtp-layers by name before writing anything.
set -e
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$COLIBRI" synth "$tmp/tiny" --preset glm53-tiny --layers 8 > /dev/null 2>&1
"$COLIBRI" info --model "$tmp/tiny" > "$tmp/info" 2>/dev/null
grep -q "family: *glm5_next" "$tmp/info" || { cat "$tmp/info"; exit 1; }
grep -q "GLM-5.3, 6 KDA layers .* 2 MLA layers (rank 64, no RoPE, pooled DSA: kpool 8, top-32" "$tmp/info" \
    || { cat "$tmp/info"; exit 1; }
"$COLIBRI" bench -m "$tmp/tiny" -p 70 -n 4 -r 1 2>/dev/null | grep -q "decode=4 tok"
"$COLIBRI" synth --help | grep -q "glm53-flash|glm53-tiny"
if "$COLIBRI" synth "$tmp/mtp" --preset glm53-flash --layers 1 --mtp-layers 1 2>"$tmp/err"; then exit 1; fi
grep -q -- "--mtp-layers: not written for glm53-flash" "$tmp/err"
[ ! -e "$tmp/mtp" ]
echo "synth glm53 ok"
