#!/bin/sh
# The bundled model's card says what text the model expects and how to wrap
# other text, and what it says holds: on the same prose, hard-wrapped text
# scores a perplexity several times lower than one line per paragraph, and
# `fold -s -w 70` (the card's recipe) brings the unwrapped text back.
set -eu
m=models/colibri-tiny card=$m/README.md src=/usr/share/common-licenses/GPL-3
for want in "## What text it expects" "hard-wrapped at about 70 columns" "fold -s -w 70 in.txt" \
            "python3 tools/corpus.py --out data" "data/persuasion.txt"; do
    grep -qF -- "$want" "$card" || { echo "FAIL: $card does not say '$want'"; exit 1; }
done
[ -r "$src" ] || { echo "skip: no $src for the wrapping check"; exit 0; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
sed -n 1,400p "$src" > "$tmp/wrapped.txt"
awk 'BEGIN { RS = ""; ORS = "\n\n" } { gsub(/\n[ \t]*/, " "); print }' "$tmp/wrapped.txt" > "$tmp/unwrapped.txt"
fold -s -w 70 "$tmp/unwrapped.txt" | sed 's/ *$//' > "$tmp/refolded.txt"
ppl() { "$COLIBRI" eval -m "$m" --text "$tmp/$1.txt" --ctx 256 --max-windows 8 --kv f32 2>/dev/null |
        sed -n 's/.* ppl=\([0-9.]*\).*/\1/p'; }
w=$(ppl wrapped) u=$(ppl unwrapped) f=$(ppl refolded)
echo "ppl: wrapped $w, unwrapped $u, refolded $f"
awk -v w="$w" -v u="$u" -v f="$f" 'BEGIN { exit !(w > 0 && u > 4 * w && f < 1.25 * w) }' ||
    { echo "FAIL: the card's claim does not hold"; exit 1; }
echo "ok   model card: wrapping stated and measured"
