#!/bin/sh
# An MTP layer missing one of its tensors: the model loads without the layer,
# and --mtp on is refused naming the missing tensor (not "the checkpoint
# lacks it"); --mtp auto runs without drafts. The checkpoint is the MTP
# oracle model with one tensor renamed in the safetensors header (same
# length, so the data offsets stay valid).
set -u
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
m=$tmp/model; mkdir "$m"
cp tests/oracle/deepseek_v3_mtp/config.json tests/tok/tiny/* "$m/"
fail=0
say() { echo "$1"; [ "${1%% *}" = FAIL ] && fail=1; return 0; }
for victim in model.layers.2.hnorm.weight model.layers.2.self_attn.kv_a_proj_with_mqa.weight; do
    python3 - tests/oracle/deepseek_v3_mtp/model.safetensors "$m/model.safetensors" "$victim" <<'PY'
import json, struct, sys
src, dst, victim = sys.argv[1:4]
b = open(src, 'rb').read()
n = struct.unpack('<Q', b[:8])[0]
hdr = b[8:8 + n].decode()
old = '"%s"' % victim
assert old in hdr, victim
hdr = hdr.replace(old, '"%sX"' % victim[:-1])
open(dst, 'wb').write(b[:8] + hdr.encode() + b[8 + n:])
PY
    "$COLIBRI" run -m "$m" -p "The license" -n 4 --temp 0 --mtp on > /dev/null 2> "$tmp/e.err"; rc=$?
    [ $rc -eq 1 ] && grep -q "left out at load" "$tmp/e.err" && grep -q "$victim" "$tmp/e.err" \
        && ! grep -q "lacks it" "$tmp/e.err" && say "ok   --mtp on without $victim names it" \
        || say "FAIL --mtp on without $victim: exit $rc: $(cat "$tmp/e.err")"
    "$COLIBRI" run -m "$m" -p "The license" -n 4 --temp 0 --mtp auto > /dev/null 2> "$tmp/a.err" \
        && say "ok   --mtp auto without $victim runs" || say "FAIL --mtp auto: $(cat "$tmp/a.err")"
done
exit $fail
