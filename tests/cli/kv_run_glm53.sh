#!/bin/sh
# colibri run --kv-file on a GLM-5.3 fixture (tests/oracle_glm53's indexed
# one: KDA and indexed attention layers, with tests/serve/make_v4_test_model.py's
# small tokenizer): the file is a version-3 state file; a second run of the
# same prompt resumes from it at all but the last prompt token, a longer
# prompt with the same start at the whole first prompt, each printing what a
# run without the file prints (greedy; KDA's chunked prefill makes the
# logits depend on where a prefill is cut to rounding, so bitwise logits are
# test_glm53_snapshots' and test_glm53_kvfile's to check); kv verify /
# inspect read it, its snapshot size the one colibri info states; an MLA
# model's run refuses it by its read_version and leaves it as it was.
set -u
PY=${PYTHON:-python3}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail=0
say() { echo "$1"; [ "${1%% *}" = FAIL ] && fail=1; return 0; }
reused() { sed -n 's/^reused \([0-9]*\) of \([0-9]*\) prompt tokens$/\1 \2/p' "$1"; }
"$PY" tests/serve/make_v4_test_model.py tests/oracle_glm53/glm53_indexed "$tmp/m" || exit 1
P="thequickbrownfoxjumpsoverthelazydogthequickbrownfoxjumpsoverthelazydog"
run() { "$COLIBRI" run -m "$tmp/m" -n 8 --temp 0 "$@"; }

run -p "$P" > "$tmp/cold1.out" 2>/dev/null
run -p "${P}again" > "$tmp/cold2.out" 2>/dev/null
run -p "$P" --kv-file "$tmp/a.ckv" > "$tmp/1.out" 2> "$tmp/1.err" || say "FAIL first run: $(cat "$tmp/1.err")"
set -- $(reused "$tmp/1.err"); M=${2:-0}
[ "${1:-x}" = 0 ] && [ "$M" -gt 60 ] && say "ok   first run reused 0 of $M" || say "FAIL first run: $(cat "$tmp/1.err")"
run -p "$P" --kv-file "$tmp/a.ckv" > "$tmp/2.out" 2> "$tmp/2.err"
set -- $(reused "$tmp/2.err")
[ "${1:-x}" = $((M - 1)) ] && say "ok   second run reused $1 of $M" || say "FAIL second run: $(cat "$tmp/2.err")"
run -p "${P}again" --kv-file "$tmp/a.ckv" > "$tmp/3.out" 2> "$tmp/3.err"
set -- $(reused "$tmp/3.err")
[ "${1:-x}" = "$M" ] && say "ok   a longer prompt reused $1" || say "FAIL longer prompt: $(cat "$tmp/3.err")"
cmp -s "$tmp/1.out" "$tmp/cold1.out" && cmp -s "$tmp/2.out" "$tmp/cold1.out" && cmp -s "$tmp/3.out" "$tmp/cold2.out" \
    && say "ok   the resumed runs print the cold runs' text" || say "FAIL resumed text differs from a cold run"
"$COLIBRI" kv verify "$tmp/a.ckv" > "$tmp/v.out" 2>&1 && grep -q "sound" "$tmp/v.out" && say "ok   verify: $(cat "$tmp/v.out")" \
    || say "FAIL verify: $(cat "$tmp/v.out")"
"$COLIBRI" kv inspect "$tmp/a.ckv" | grep -q "^state: .*GLM-5.3, 4 layers" && say "ok   inspect names a state file" \
    || say "FAIL inspect: $("$COLIBRI" kv inspect "$tmp/a.ckv" 2>&1)"
# colibri info states the snapshot size from the config; the file's chunks hold the states' own
snap=$("$COLIBRI" info -m "$tmp/m" 2>/dev/null | sed -n 's/^snapshots: .*(\([0-9]*\) bytes.*/\1/p')
"$COLIBRI" kv inspect "$tmp/a.ckv" | grep -q "tier f32, ${snap:-x}-byte snapshot per chunk" \
    && say "ok   info's snapshot bytes ($snap) are the file's" || say "FAIL info's snapshot bytes: '$snap'"
mla=$tmp/mla; mkdir "$mla"
cp tests/oracle/deepseek_v3_tiny/config.json tests/oracle/deepseek_v3_tiny/model.safetensors tests/tok/tiny/* "$mla/"
cp "$tmp/a.ckv" "$tmp/before.ckv"
"$COLIBRI" run -m "$mla" -p "hello" -n 2 --temp 0 --kv-file "$tmp/a.ckv" > /dev/null 2> "$tmp/4.err"
grep -q "read_version 3" "$tmp/4.err" && cmp -s "$tmp/a.ckv" "$tmp/before.ckv" && say "ok   an MLA run refuses it, untouched" \
    || say "FAIL MLA run on a GLM-5.3 file: $(cat "$tmp/4.err")"
exit $fail
