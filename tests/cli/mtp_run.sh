#!/bin/sh
# colibri run --mtp on the MTP oracle model with the tiny tokenizer: greedy and
# seeded sampling print the same text with --mtp off, on (--draft 1..3) and
# auto; on prints the drafts line, off does not; --kv-file with --mtp saves
# the same file contents as without; bad --mtp values and --mtp on for a model
# without an MTP layer are refused by name; colibri info shows the layer.
set -u
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
m=$tmp/model; mkdir "$m"
cp tests/oracle/deepseek_v3_mtp/config.json tests/oracle/deepseek_v3_mtp/model.safetensors tests/tok/tiny/* "$m/"
t=$tmp/tiny; mkdir "$t"
cp tests/oracle/deepseek_v3_tiny/config.json tests/oracle/deepseek_v3_tiny/model.safetensors tests/tok/tiny/* "$t/"
fail=0
say() { echo "$1"; [ "${1%% *}" = FAIL ] && fail=1; return 0; }
P="The license of this package"
for args in "--temp 0" "--temp 0.9 --seed 7"; do
    "$COLIBRI" run -m "$m" -p "$P" -n 120 $args --no-display-prompt > "$tmp/off.out" 2> "$tmp/off.err" \
        || say "FAIL off ($args): $(cat "$tmp/off.err")"
    grep -q '^mtp:' "$tmp/off.err" && say "FAIL off printed a drafts line"
    for mode in "on --draft 1" "on --draft 2" "on --draft 3" "auto"; do
        "$COLIBRI" run -m "$m" -p "$P" -n 120 $args --no-display-prompt --mtp $mode > "$tmp/on.out" 2> "$tmp/on.err" \
            || say "FAIL --mtp $mode ($args): $(cat "$tmp/on.err")"
        cmp -s "$tmp/off.out" "$tmp/on.out" && say "ok   --mtp $mode ($args): same text" \
            || say "FAIL --mtp $mode ($args): the text differs"
        grep -q '^mtp: [0-9.]* tokens per decode forward' "$tmp/on.err" && say "ok   --mtp $mode: drafts line" \
            || say "FAIL --mtp $mode: no drafts line: $(cat "$tmp/on.err")"
    done
done
"$COLIBRI" run -m "$m" -p "$P" -n 20 --temp 0 --kv-file "$tmp/a.ckv" > "$tmp/a.out" 2>/dev/null
"$COLIBRI" run -m "$m" -p "$P" -n 20 --temp 0 --mtp on --draft 3 --kv-file "$tmp/b.ckv" > "$tmp/b.out" 2>/dev/null
"$COLIBRI" kv inspect "$tmp/a.ckv" | grep '^tokens' > "$tmp/a.kv"
"$COLIBRI" kv inspect "$tmp/b.ckv" | grep '^tokens' > "$tmp/b.kv"
cmp -s "$tmp/a.out" "$tmp/b.out" && cmp -s "$tmp/a.kv" "$tmp/b.kv" && say "ok   --kv-file: same text and positions" \
    || say "FAIL --kv-file with --mtp: $(cat "$tmp/a.kv") vs $(cat "$tmp/b.kv")"
"$COLIBRI" run -m "$m" -p "$P" -n 20 --temp 0 --mtp on --draft 3 --kv-file "$tmp/b.ckv" > "$tmp/c.out" 2>"$tmp/c.err"
cmp -s "$tmp/a.out" "$tmp/c.out" && say "ok   --kv-file reused with --mtp: same text" \
    || say "FAIL --kv-file reused with --mtp: $(cat "$tmp/c.err")"
"$COLIBRI" run -m "$m" -p "$P" -n 4 --mtp sometimes > /dev/null 2> "$tmp/e.err"; rc=$?
[ $rc -eq 2 ] && grep -q -- "--mtp: 'sometimes' is not on, off or auto" "$tmp/e.err" && say "ok   bad --mtp refused" \
    || say "FAIL bad --mtp: exit $rc: $(cat "$tmp/e.err")"
"$COLIBRI" run -m "$t" -p "$P" -n 4 --mtp on > /dev/null 2> "$tmp/e.err"; rc=$?
[ $rc -eq 1 ] && grep -q "MTP layer" "$tmp/e.err" && say "ok   --mtp on without an MTP layer refused" \
    || say "FAIL --mtp on without MTP: exit $rc: $(cat "$tmp/e.err")"
"$COLIBRI" run -m "$t" -p "$P" -n 4 --temp 0 --mtp auto > /dev/null 2> "$tmp/e.err" \
    && say "ok   --mtp auto without an MTP layer runs without drafts" || say "FAIL --mtp auto: $(cat "$tmp/e.err")"
"$COLIBRI" info -m "$m" | grep -q '^mtp: *1 layer (model.layers.2 onwards)' && say "ok   info shows the MTP layer" \
    || say "FAIL info: $("$COLIBRI" info -m "$m")"
exit $fail
