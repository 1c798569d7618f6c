#!/bin/sh
# colibri kv inspect / verify on the golden KV file (tests/kv/golden_f32.ckv:
# f32, 2 layers, r 32, dr 16, 3 positions of 400 bytes from offset 4096) and
# on damaged copies of it: verify exits 0 only for a sound file and names the
# first bad position; neither command modifies the file.
set -u
C=${COLIBRI:-build/colibri}
G=tests/kv/golden_f32.ckv
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

out=$("$C" kv inspect "$G") || fail "inspect exited $?"
echo "$out" | grep -q "^tier: *f32" || fail "inspect: no tier line: $out"
echo "$out" | grep -q "^tokens: *3 published, 3 sound" || fail "inspect: tokens: $out"
echo "$out" | grep -q "^geometry: *2 layers, r 32, dr 16" || fail "inspect: geometry: $out"
echo "$out" | grep -q "^bytes: *5296 " || fail "inspect: bytes: $out"

out=$("$C" kv verify "$G") || fail "verify of the golden file exited $?: $out"
echo "$out" | grep -q "sound, 3 positions" || fail "verify: $out"

# One byte of position 1 changed: bad from position 1 on, 1 sound.
cp "$G" "$T/flip.ckv"
printf 'Z' | dd of="$T/flip.ckv" bs=1 seek=4600 conv=notrunc 2>/dev/null
cp "$T/flip.ckv" "$T/flip.orig"
if "$C" kv verify "$T/flip.ckv" 2>"$T/err"; then fail "verify accepted a damaged record"; fi
grep -q "position 1 is bad" "$T/err" || fail "verify did not name position 1: $(cat "$T/err")"
grep -q "1 of 3 positions are sound" "$T/err" || fail "verify count: $(cat "$T/err")"
cmp -s "$T/flip.ckv" "$T/flip.orig" || fail "verify modified the file"
"$C" kv inspect "$T/flip.ckv" | grep -q "^problem:.*record 1" || fail "inspect did not report the problem"

# Cut inside position 2: a torn tail.
head -c 5000 "$G" > "$T/torn.ckv"
if "$C" kv verify "$T/torn.ckv" 2>"$T/err"; then fail "verify accepted a torn file"; fi
grep -q "position 2 is bad.*torn tail" "$T/err" || fail "torn: $(cat "$T/err")"

# Not a KV file, and no file at all.
echo "hello" > "$T/text.ckv"
if "$C" kv verify "$T/text.ckv" 2>"$T/err"; then fail "verify accepted a text file"; fi
grep -q "not a colibri KV file" "$T/err" || fail "text: $(cat "$T/err")"
if "$C" kv inspect "$T/missing.ckv" 2>"$T/err"; then fail "inspect of a missing file succeeded"; fi
grep -q "missing.ckv" "$T/err" || fail "missing: $(cat "$T/err")"

# Usage errors exit 2.
"$C" kv frobnicate "$G" 2>/dev/null; [ $? -eq 2 ] || fail "unknown subcommand did not exit 2"
"$C" kv verify 2>/dev/null; [ $? -eq 2 ] || fail "missing FILE did not exit 2"
echo ok
