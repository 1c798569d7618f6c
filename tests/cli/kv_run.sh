#!/bin/sh
# colibri run / chat --kv-file on the oracle model with the tiny tokenizer:
# the first run creates the file (the prompt and every generated token but
# the last), the second reuses all but the last prompt
# token and (greedy, f32) prints the same text; a longer prompt with the same
# start reuses part of it; the f32 file opened with --kv tq4 is reused and
# rewritten in tq4; then --kv bf16 is refused without touching the file; chat
# reuses a file too; a per-layer layout (version 2 file) is reused by the same
# layout and refused, naming layer and part, by another.
set -u
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
m=$tmp/model; mkdir "$m"
cp tests/oracle/deepseek_v3_tiny/config.json tests/oracle/deepseek_v3_tiny/model.safetensors tests/tok/tiny/* "$m/"
fail=0
say() { echo "$1"; [ "${1%% *}" = FAIL ] && fail=1; return 0; }
reused() { sed -n 's/^reused \([0-9]*\) of \([0-9]*\) prompt tokens$/\1 \2/p' "$1"; }

P="The license of this package"
"$COLIBRI" run -m "$m" -p "$P" -n 8 --temp 0 --kv-file "$tmp/a.ckv" > "$tmp/1.out" 2> "$tmp/1.err"; rc=$?
[ $rc -eq 0 ] && say "ok   first run" || say "FAIL first run exit $rc: $(cat "$tmp/1.err")"
set -- $(reused "$tmp/1.err")
[ "${1:-x}" = 0 ] && [ "${2:-0}" -gt 1 ] && say "ok   first run reused 0 of $2" || say "FAIL first run: $(cat "$tmp/1.err")"
M=${2:-0}
"$COLIBRI" kv verify "$tmp/a.ckv" > "$tmp/v.out" 2>&1 && say "ok   file sound: $(cat "$tmp/v.out")" \
    || say "FAIL verify: $(cat "$tmp/v.out")"
# the token that ends a generation is not fed, so the file holds the prompt
# and every generated token but the last
N=$(sed -n 's/.*decode \([0-9]*\) tok.*/\1/p' "$tmp/1.err")
pub=$("$COLIBRI" kv inspect "$tmp/a.ckv" | sed -n 's/^tokens: *\([0-9]*\) published.*/\1/p')
[ -n "$N" ] && [ "${pub:-x}" = $((M + N - 1)) ] && say "ok   file holds $M prompt + $N - 1 generated tokens" \
    || say "FAIL file holds ${pub:-?} tokens, want $M prompt + ${N:-?} - 1 generated"

"$COLIBRI" run -m "$m" -p "$P" -n 8 --temp 0 --kv-file "$tmp/a.ckv" > "$tmp/2.out" 2> "$tmp/2.err"
set -- $(reused "$tmp/2.err")
[ "${1:-x}" = $((M - 1)) ] && [ "${2:-x}" = "$M" ] && say "ok   second run reused $1 of $2" \
    || say "FAIL second run: $(cat "$tmp/2.err")"
cmp -s "$tmp/1.out" "$tmp/2.out" && say "ok   same text after the restore" || say "FAIL text differs after the restore"

"$COLIBRI" run -m "$m" -p "$P is free to use" -n 4 --temp 0 --kv-file "$tmp/a.ckv" > /dev/null 2> "$tmp/3.err"
set -- $(reused "$tmp/3.err")
[ "${1:-0}" -ge $((M - 1)) ] && [ "${2:-0}" -gt "$M" ] && say "ok   longer prompt reused $1 of $2" \
    || say "FAIL longer prompt: $(cat "$tmp/3.err")"

"$COLIBRI" run -m "$m" -p "$P" -n 2 --temp 0 --kv tq4 --kv-file "$tmp/a.ckv" > /dev/null 2> "$tmp/5.err"
set -- $(reused "$tmp/5.err")
[ "${1:-x}" = $((M - 1)) ] && say "ok   f32 file reused by --kv tq4" || say "FAIL upgrade: $(cat "$tmp/5.err")"
"$COLIBRI" kv inspect "$tmp/a.ckv" | grep -q "^tier: *tq4" && say "ok   file rewritten in tq4" \
    || say "FAIL not rewritten: $("$COLIBRI" kv inspect "$tmp/a.ckv" 2>&1)"
[ ! -e "$tmp/a.ckv.tmp" ] && say "ok   no temporary file left" || say "FAIL a.ckv.tmp left behind"

cp "$tmp/a.ckv" "$tmp/before.ckv"
"$COLIBRI" run -m "$m" -p "$P" -n 2 --temp 0 --kv bf16 --kv-file "$tmp/a.ckv" > /dev/null 2> "$tmp/4.err"; rc=$?
[ $rc -eq 0 ] && grep -q "saved with --kv tq4; run with --kv tq4 to reuse it" "$tmp/4.err" \
    && say "ok   other tier refused" || say "FAIL other tier: exit $rc: $(cat "$tmp/4.err")"
grep -q "^reused 0 of" "$tmp/4.err" && say "ok   refused file: started fresh" || say "FAIL refused: $(cat "$tmp/4.err")"
cmp -s "$tmp/a.ckv" "$tmp/before.ckv" && say "ok   refused file untouched" || say "FAIL the refused file changed"
printf 'hello there\n' | "$COLIBRI" chat -m "$m" -n 4 --temp 0 --kv-file "$tmp/c.ckv" > /dev/null 2> "$tmp/c1.err"
printf 'hello there\n' | "$COLIBRI" chat -m "$m" -n 4 --temp 0 --kv-file "$tmp/c.ckv" > /dev/null 2> "$tmp/c2.err"
set -- $(reused "$tmp/c2.err")
[ "${1:-0}" -gt 0 ] && say "ok   chat reused $1 of $2" || say "FAIL chat: $(cat "$tmp/c1.err" "$tmp/c2.err")"
"$COLIBRI" run -m "$m" -p "$P" -n 6 --temp 0 --kv int8r@1:rope=f32 --kv-file "$tmp/p.ckv" > "$tmp/p1.out" 2> "$tmp/p1.err"
"$COLIBRI" run -m "$m" -p "$P" -n 6 --temp 0 --kv int8r@1:rope=f32 --kv-file "$tmp/p.ckv" > "$tmp/p2.out" 2> "$tmp/p2.err"
set -- $(reused "$tmp/p2.err")
[ "${1:-0}" -gt 0 ] && cmp -s "$tmp/p1.out" "$tmp/p2.out" && say "ok   per-layer file reused $1 of $2, same text" \
    || say "FAIL per-layer reuse: $(cat "$tmp/p1.err" "$tmp/p2.err")"
"$COLIBRI" kv inspect "$tmp/p.ckv" | grep -q "^layout: *--kv int8r@1:rope=f32$" && say "ok   inspect names the layout" \
    || say "FAIL inspect: $("$COLIBRI" kv inspect "$tmp/p.ckv" 2>&1)"
cp "$tmp/p.ckv" "$tmp/pbefore.ckv"
"$COLIBRI" run -m "$m" -p "$P" -n 2 --temp 0 --kv int8r --kv-file "$tmp/p.ckv" > /dev/null 2> "$tmp/p3.err"
grep -q "layer 1 rope part: saved as f32, this session has int8; saved with --kv int8r@1:rope=f32; run with --kv int8r@1:rope=f32 to reuse it" "$tmp/p3.err" \
    && cmp -s "$tmp/p.ckv" "$tmp/pbefore.ckv" && say "ok   other layout refused by layer and part, file untouched" \
    || say "FAIL other layout: $(cat "$tmp/p3.err")"
exit $fail
