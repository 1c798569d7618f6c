#!/bin/sh
# colibri tokenize refuses bad input with a message and a non-zero exit (never
# a signal), and replaces invalid UTF-8 by U+FFFD with a warning.
set -u
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail=0
expect_fail() {  # expect_fail NAME SUBSTRING ARGS...: must exit 1..127 and print SUBSTRING
    name=$1; want=$2; shift 2
    out=$("$COLIBRI" tokenize "$@" 2>&1); rc=$?
    if [ $rc -eq 0 ] || [ $rc -ge 128 ]; then echo "FAIL $name: exit $rc"; fail=1; return; fi
    case "$out" in *"$want"*) echo "ok   $name: $out" ;; *) echo "FAIL $name: '$out' lacks '$want'"; fail=1 ;; esac
}
small=tests/tok/small
expect_fail missing_dir "tokenizer.json" --tokenizer "$tmp/nowhere" --text hi
# An empty text is [BOS] with add_bos_token (Hugging Face's answer), [] without
# special tokens; empty ids to decode are refused.
: > "$tmp/empty.txt"
expect_ids() {  # expect_ids NAME IDS ARGS...: must exit 0 and print exactly IDS
    name=$1; want=$2; shift 2
    out=$("$COLIBRI" tokenize "$@" 2>&1); rc=$?
    if [ $rc -eq 0 ] && [ "$out" = "$want" ]; then echo "ok   $name: $out"; else echo "FAIL $name: exit $rc, '$out' is not '$want'"; fail=1; fi
}
bos=$(python3 -c "import json; v = json.load(open('$small/tokenizer.json'))['added_tokens']; print([t['id'] for t in v if t['content'] == '<|bos|>'][0])")
expect_ids empty_text "[$bos]" --tokenizer $small --text ""
expect_ids empty_file "[$bos]" --tokenizer $small --file "$tmp/empty.txt"
expect_ids empty_no_special "[]" --tokenizer $small --text "" --no-special
expect_fail empty_decode "empty" --tokenizer $small --decode --text ""
expect_fail missing_file "nofile.txt" --tokenizer $small --file "$tmp/nofile.txt"
expect_fail no_text "exactly one" --tokenizer $small
expect_fail bad_ids "JSON array" --tokenizer $small --decode --text "[1, x]"
expect_fail id_range "not in the vocabulary" --tokenizer $small --decode --text "[1, 99999999]"
mkdir "$tmp/frac" "$tmp/fracadd"
python3 - "$tmp" <<'PY'
import json, sys
t = json.load(open("tests/tok/small/tokenizer.json"))
k = next(iter(t["model"]["vocab"]))
t["model"]["vocab"][k] = 1.5
json.dump(t, open(sys.argv[1] + "/frac/tokenizer.json", "w"))
t = json.load(open("tests/tok/small/tokenizer.json"))
t["added_tokens"][0]["id"] = 2.5
json.dump(t, open(sys.argv[1] + "/fracadd/tokenizer.json", "w"))
PY
expect_fail fractional_vocab_id "not a valid id" --tokenizer "$tmp/frac" --text hi
expect_fail fractional_added_id "integer id" --tokenizer "$tmp/fracadd" --text hi
mkdir "$tmp/wp" "$tmp/ws"
python3 - "$tmp" <<'PY'
import json, sys
t = json.load(open("tests/tok/small/tokenizer.json"))
t["model"]["type"] = "WordPiece"
json.dump(t, open(sys.argv[1] + "/wp/tokenizer.json", "w"))
t = json.load(open("tests/tok/small/tokenizer.json"))
t["pre_tokenizer"]["pretokenizers"][0] = {"type": "Metaspace", "replacement": "_"}
json.dump(t, open(sys.argv[1] + "/ws/tokenizer.json", "w"))
PY
expect_fail model_type "'WordPiece'" --tokenizer "$tmp/wp" --text hi
expect_fail pretok_type "'Metaspace'" --tokenizer "$tmp/ws" --text hi

# Invalid UTF-8: a warning, and the ids of the same text with U+FFFD.
printf 'caf\303 ok \377\376 end' > "$tmp/bad.txt"
printf 'caf\357\277\275 ok \357\277\275\357\277\275 end' > "$tmp/fixed.txt"
"$COLIBRI" tokenize --tokenizer $small --file "$tmp/bad.txt" > "$tmp/bad.ids" 2> "$tmp/bad.err" || { echo "FAIL invalid utf8: exit"; fail=1; }
"$COLIBRI" tokenize --tokenizer $small --file "$tmp/fixed.txt" > "$tmp/fixed.ids" 2>/dev/null
grep -q "3 invalid UTF-8 sequences replaced by U+FFFD" "$tmp/bad.err" || { echo "FAIL warning: $(cat "$tmp/bad.err")"; fail=1; }
cmp -s "$tmp/bad.ids" "$tmp/fixed.ids" || { echo "FAIL invalid utf8 ids differ"; fail=1; }
exit $fail
