#!/bin/sh
# colibri run / chat on a tiny random-weight model (tests/oracle/deepseek_v3_tiny)
# with a 400-id tokenizer in the DeepSeek-V3 schema (tests/tok/tiny): streams
# text, ends with the tokens/s line, same seed = same text, the chat reuses its
# cache between turns, and bad input is refused with a message.
set -u
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
m=$tmp/model; mkdir "$m"
cp tests/oracle/deepseek_v3_tiny/config.json tests/oracle/deepseek_v3_tiny/model.safetensors tests/tok/tiny/* "$m/"
fail=0
say() { echo "$1"; [ "${1%% *}" = FAIL ] && fail=1; return 0; }

"$COLIBRI" run -m "$m" -p "The license" -n 16 --seed 7 > "$tmp/a.out" 2> "$tmp/a.err"; rc=$?
[ $rc -eq 0 ] && say "ok   run exit 0" || say "FAIL run exit $rc: $(cat "$tmp/a.err")"
tail -n 1 "$tmp/a.err" | grep -Eq '^prefill [0-9]+ tok .*tok/s\), decode [0-9]+ tok .*tok/s\)' \
    && say "ok   tokens/s line" || say "FAIL no tokens/s line: $(cat "$tmp/a.err")"
[ -s "$tmp/a.out" ] && say "ok   text streamed" || say "FAIL no text"
"$COLIBRI" run -m "$m" -p "The license" -n 16 --seed 7 > "$tmp/b.out" 2>/dev/null
cmp -s "$tmp/a.out" "$tmp/b.out" && say "ok   same seed, same text" || say "FAIL same seed gave other text"
"$COLIBRI" run -m "$m" -p "The license" -n 16 --seed 8 > "$tmp/c.out" 2>/dev/null
cmp -s "$tmp/a.out" "$tmp/c.out" && say "FAIL another seed gave the same text" || say "ok   another seed, other text"
"$COLIBRI" run -m "$m" -p "Hi" --chat --system "Be brief." -n 4 --temp 0 > /dev/null 2> "$tmp/chat1.err" \
    && say "ok   --chat --system" || say "FAIL --chat: $(cat "$tmp/chat1.err")"

expect_fail() {  # expect_fail NAME SUBSTRING ARGS...
    name=$1; want=$2; shift 2
    out=$("$COLIBRI" "$@" 2>&1 >/dev/null); rc=$?
    if [ $rc -eq 0 ] || [ $rc -ge 128 ]; then say "FAIL $name: exit $rc"; return; fi
    case "$out" in *"$want"*) say "ok   $name: $out" ;; *) say "FAIL $name: '$out' lacks '$want'" ;; esac
}
expect_fail empty_prompt "empty" run -m "$m" -p ""
expect_fail no_model "nowhere: cannot open the model directory" run -m "$tmp/nowhere" -p hi
long=$(python3 -c 'print("word " * 300)')
n=$("$COLIBRI" tokenize -m "$m" --text "$long" | python3 -c 'import json,sys; print(len(json.load(sys.stdin)))')
expect_fail too_long "prompt is $n tokens but the context holds 64" run -m "$m" -p "$long" --ctx 64

printf 'caf\303 \377' > "$tmp/bad.txt"
"$COLIBRI" run -m "$m" -f "$tmp/bad.txt" -n 2 > /dev/null 2> "$tmp/bad.err" && grep -q "U+FFFD" "$tmp/bad.err" \
    && say "ok   invalid UTF-8 replaced with a warning" || say "FAIL invalid UTF-8: $(cat "$tmp/bad.err")"

# chat: the second turn finds the first turn in the cache
printf 'Hello there\nAnd again\n' | "$COLIBRI" chat -m "$m" -n 6 --temp 0 > "$tmp/chat.out" 2> "$tmp/chat.err"; rc=$?
[ $rc -eq 0 ] && say "ok   chat exit 0" || say "FAIL chat exit $rc: $(cat "$tmp/chat.err")"
[ "$(grep -c '^prefill' "$tmp/chat.err")" -eq 2 ] && say "ok   two replies" || say "FAIL replies: $(cat "$tmp/chat.err")"
cached=$(grep '^prefill' "$tmp/chat.err" | sed -n '2s/.*(\([0-9]*\) cached).*/\1/p')
[ "${cached:-0}" -gt 10 ] && say "ok   turn 2 reused $cached cached tokens" || say "FAIL turn 2 cached ${cached:-?}"
exit $fail
