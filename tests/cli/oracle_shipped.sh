#!/bin/sh
# The fixtures stored as the labs ship 4-bit models (tests/oracle_shipped,
# written by tools/oracle_shipped.py): DeepSeek-V4's FP4 experts + e8m0
# scales and FP8 dense weights with e8m0 block scales, Kimi K2's
# compressed-tensors int4 experts. Loaded without changing a value, they give
# HF's float32 outputs on the exactly dequantised weights when every product
# runs in f32 (gated); as shipped (mxfp4 / q4g32 experts on int8 activations)
# they run end to end, with the experts kept at 4.25 / 5 bits per weight. A
# missing companion tensor or an unimplemented quantization_config is refused
# by name.
set -eu
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
mx=tests/oracle_shipped/deepseek_v3_mxfp4
ct=tests/oracle_shipped/kimi_k2_int4
"$COLIBRI" oracle --experts f32 --dense f32 "$mx" "$ct"
out=$("$COLIBRI" oracle --no-gate "$mx" "$ct"); echo "as shipped: $out"
[ "$(echo "$out" | grep -c ' tf=')" -eq 2 ]
# routed experts as loaded: 3 MoE layers x 16 experts x 3 matrices of 64 x 128
# weights, in mxfp4 (17/32 byte per weight) 0.60 MiB; in q4g32 0.89 MiB (5/8
# byte per weight, and down_proj's 64 columns padded to a 128-column block)
"$COLIBRI" info -m "$mx" | grep -q "of which routed experts 0.6 (resident store)"
"$COLIBRI" info -m "$ct" | grep -q "of which routed experts 0.9 (resident store)"
# MXFP4 and e8m0-scaled FP8 convert through their exact values (into f32:
# the same logits as HF); compressed-tensors int4 is refused by name, not done wrong
"$COLIBRI" convert "$mx" "$tmp/c" --experts f32 --dense f32 >/dev/null 2>&1
cp "$mx"/reference.* "$tmp/c/"
"$COLIBRI" oracle "$tmp/c" | grep ' tf=162/162 gen=20/20 '
rm -rf "$tmp/c"
if "$COLIBRI" convert "$ct" "$tmp/c" --experts q4g64 2>"$tmp/err"; then echo "converted $ct"; exit 1; fi
grep -q "as shipped (MXFP4 without its scales, or compressed-tensors int4)" "$tmp/err" || { cat "$tmp/err"; exit 1; }
# a shipped tensor renamed away, or another quantization_config: refused by name
edit() {   # edit DIR OLD NEW: a copy of DIR with OLD replaced by NEW (same length) in the file header
    rm -rf "$tmp/x"; cp -r "$1" "$tmp/x"
    python3 - "$tmp/x/model.safetensors" "$2" "$3" <<'PY'
import struct, sys
p, old, new = sys.argv[1], sys.argv[2].encode(), sys.argv[3].encode()
b = bytearray(open(p, "rb").read()); n = struct.unpack("<Q", b[:8])[0]
h = bytes(b[8:8 + n]); assert len(old) == len(new) and old in h
b[8:8 + n] = h.replace(old, new, 1); open(p, "wb").write(b)
PY
}
edit "$mx" "layers.2.mlp.experts.5.up_proj.scale" "layers.2.mlp.experts.5.up_proj.scalx"
if "$COLIBRI" oracle "$tmp/x" 2>"$tmp/err"; then exit 1; fi
grep -q "experts.5.up_proj.weight' is I8 MXFP4 codes but its scales" "$tmp/err" || { cat "$tmp/err"; exit 1; }
edit "$ct" "layers.3.mlp.experts.9.down_proj.weight_scale" "layers.3.mlp.experts.9.down_proj.weight_scalx"
if "$COLIBRI" oracle "$tmp/x" 2>"$tmp/err"; then exit 1; fi
grep -q "experts.9.down_proj.weight_scale' is missing" "$tmp/err" || { cat "$tmp/err"; exit 1; }
rm -rf "$tmp/x"; cp -r "$ct" "$tmp/x"
sed -i 's/"num_bits": 4/"num_bits": 8/' "$tmp/x/config.json"
if "$COLIBRI" info -m "$tmp/x" 2>"$tmp/err"; then exit 1; fi
grep -q "num_bits 8 is not implemented" "$tmp/err" || { cat "$tmp/err"; exit 1; }
sed -i 's/"quant_method": "compressed-tensors"/"quant_method": "awq"/' "$tmp/x/config.json"
if "$COLIBRI" info -m "$tmp/x" 2>"$tmp/err"; then exit 1; fi
grep -q "quant_method 'awq' is not implemented" "$tmp/err" || { cat "$tmp/err"; exit 1; }
