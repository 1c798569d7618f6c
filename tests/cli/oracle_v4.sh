#!/bin/sh
# DeepSeek-V4 (tests/oracle_v4, tools/oracle_v4.py): every fixture exact
# against transformers under colibri oracle's gate (decode = prefill
# included), and what is not implemented for V4 refused by name.
set -e
float=$(ls -d tests/oracle_v4/*/ | grep -v _fp8/)
out=$("$COLIBRI" oracle $float)
echo "$out"
n=$(echo "$float" | wc -l)
[ "$(echo "$out" | grep -c ' tf=')" -eq "$n" ]
# stored as the official release ships it: the dense FP8 read as stored
# (fp8b, wo_a split by its 128-row scale blocks), the FP4 experts in f32 so
# every product is exact; as shipped (mxfp4 on int8 activations) it runs
q=tests/oracle_v4/deepseek_v4_fp8
"$COLIBRI" oracle --experts f32 "$q" | tee /dev/stderr | grep -q ' tf=160/160 gen=12/12 '
"$COLIBRI" oracle --no-gate "$q" | grep ' tf='

fix=tests/oracle_v4/deepseek_v4_tiny
refused() {   # refused WHAT PATTERN ARGS...: the command fails naming PATTERN
    what=$1 pat=$2
    shift 2
    if err=$("$@" 2>&1); then echo "FAIL: $what accepted"; exit 1; fi
    echo "$err" | grep -q "$pat" || { echo "FAIL: $what: unexpected message: $err"; exit 1; }
}
refused "--kv-rope bf16 on int8r" "RoPE precision bf16" "$COLIBRI" oracle --kv int8r --kv-rope bf16 "$fix"
refused "--device" "not wired to the device" "$COLIBRI" oracle --device host "$fix"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
edit() {   # edit DIR PYTHON-EXPR-ON-c: a copy of the fixture with config.json changed
    mkdir -p "$1"
    cp "$fix"/* "$1"/
    python3 -c "import json,sys; c=json.load(open(sys.argv[1])); $2; json.dump(c, open(sys.argv[1],'w'))" "$1/config.json"
}
edit "$tmp/unknown" "c['some_new_field']=1"
refused "an unknown field" "some_new_field" "$COLIBRI" oracle "$tmp/unknown"
edit "$tmp/quant" "c['quantization_config']={'quant_method':'fp8'}"
refused "quantization_config" "quantization_config" "$COLIBRI" oracle "$tmp/quant"
edit "$tmp/score" "c['scoring_func']='sigmoid'"
refused "scoring_func sigmoid" "scoring_func" "$COLIBRI" oracle "$tmp/score"
edit "$tmp/types" "c['layer_types'][1]='full_attention'"
refused "an unknown layer type" "layer_types\[1\]" "$COLIBRI" oracle "$tmp/types"
echo "refusals ok"

# KV tiers on the window and the compressed entries: prefill = decode still
# exact, the logits within each tier's bound of transformers' f32 (the
# random-weight fixtures' rows are 32 values, the tiers' worst case)
tiers() {   # tiers TIER MAX_DLOGIT
    out=$("$COLIBRI" oracle --no-gate --kv "$1" $float)
    echo "$out"
    [ "$(echo "$out" | grep -c ' decode_dlogit=0$')" -eq "$n" ] || { echo "FAIL: --kv $1: decode differs from prefill"; exit 1; }
    echo "$out" | awk -v m="$2" -v t="$1" '{ for (i = 1; i <= NF; i++) if ($i ~ /^max_dlogit=/) { split($i, a, "=");
        if (a[2] + 0 > m + 0) { print "FAIL: --kv " t ": " $1 " max_dlogit " a[2] " over " m; bad = 1 } } } END { exit bad }'
}
tiers bf16 0.1
tiers int8r 1.0

# the release layout: a scale of another dtype or shape, a missing scale, a
# tensor stored against the config, another expert_dtype or quantization
# field, all refused by name; power-of-two scales in an F32 container
# (dsv4-flash-base) read alike, any other F32 scale refused
st_edit() {   # st_edit DIR PYTHON: a copy of $q in DIR, PYTHON run on the header h (dict) and data d (name -> bytes)
    rm -rf "$1"; mkdir -p "$1"; cp "$q"/* "$1"/
    python3 - "$1/model.safetensors" "$2" <<'PY'
import json, struct, sys
p = sys.argv[1]
b = open(p, "rb").read(); n = struct.unpack("<Q", b[:8])[0]; h = json.loads(b[8:8 + n])
meta = h.pop("__metadata__", None)
d = {k: b[8 + n + v["data_offsets"][0]:8 + n + v["data_offsets"][1]] for k, v in h.items()}
exec(sys.argv[2])
out, off = {}, 0
for k in sorted(h):
    out[k] = dict(h[k], data_offsets=[off, off + len(d[k])]); off += len(d[k])
if meta: out["__metadata__"] = meta
hj = json.dumps(out).encode(); hj += b" " * (-len(hj) % 8)
open(p, "wb").write(struct.pack("<Q", len(hj)) + hj + b"".join(d[k] for k in sorted(h)))
PY
}
qref() {   # qref WHAT PATTERN PYTHON
    st_edit "$tmp/q" "$3"
    refused "$1" "$2" "$COLIBRI" oracle --experts f32 "$tmp/q"
}
W=layers.1.attn.wo_b
qref "a scale of another dtype" "$W.weight' is F8_E4M3 but its block scales '$W.scale' are of another dtype (I8" \
    "h['$W.scale']['dtype'] = 'I8'"
qref "a scale of another shape" "'$W.scale' are of the wrong shape (F8_E8M0 \[4, 1\])" \
    "h['$W.scale']['shape'] = [4, 1]"
qref "a missing scale" "$W.weight' is F8_E4M3 but its block scales '$W.scale' are missing" \
    "del h['$W.scale']; del d['$W.scale']"
qref "an FP8 weight stored in BF16" "layers.0.attn.wkv.weight' is BF16 \[64, 80\]; as FP8 with block scales it needs F8_E4M3" \
    "h['layers.0.attn.wkv.weight'].update(dtype='BF16', shape=[64, 80])"
qref "an FP4 expert stored in FP8" "experts.3.w2.weight' is F8_E4M3, but expert_dtype 'fp4'" \
    "h['layers.2.ffn.experts.3.w2.weight']['dtype'] = 'F8_E4M3'"
qref "a float tensor stored in FP8" "head.weight' is F8_E4M3, but DeepSeek-V4's release layout" \
    "h['head.weight'].update(dtype='F8_E4M3', shape=[64, 320])"
for k in expert_dtype quant; do
    case $k in
    expert_dtype) e="c['expert_dtype']='nvfp4'" p="expert_dtype 'nvfp4'" ;;
    quant) e="c['quantization_config']['modules_to_not_convert']=['head']" p="quantization_config.modules_to_not_convert" ;;
    esac
    st_edit "$tmp/q" ""
    python3 -c "import json,sys; c=json.load(open(sys.argv[1])); $e; json.dump(c, open(sys.argv[1],'w'))" "$tmp/q/config.json"
    refused "$k" "$p" "$COLIBRI" oracle --experts f32 "$tmp/q"
done
st_edit "$tmp/q" "import struct as s
for k in [k for k in h if k.endswith('.scale')]:
    d[k] = b''.join(s.pack('<f', 2.0 ** (e - 127)) for e in d[k]); h[k]['dtype'] = 'F32'"
"$COLIBRI" oracle --experts f32 "$tmp/q" | grep ' tf=160/160 gen=12/12 '
st_edit "$tmp/q" "import struct as s
for k in [k for k in h if k.endswith('.scale')]:
    d[k] = b''.join(s.pack('<f', 2.0 ** (e - 127)) for e in d[k]); h[k]['dtype'] = 'F32'
d['$W.scale'] = d['$W.scale'][:4] + s.pack('<f', 0.75) + d['$W.scale'][8:]"
refused "an F32 scale not a power of two" "tensor '$W.scale' (the scales of '$W.weight'): value 1 is 0.75" \
    "$COLIBRI" oracle --experts f32 "$tmp/q"
echo "release layout refusals ok"

# convert from the release: exactly dequantized, then encoded (f32: the same
# logits; q4g64 experts: runs), the quantization_config dropped with them
rm -rf "$tmp/c"
"$COLIBRI" convert "$q" "$tmp/c" --experts f32 --dense f32 >/dev/null 2>&1
cp "$q"/reference.* "$tmp/c/"
"$COLIBRI" oracle "$tmp/c" | grep ' tf=160/160 gen=12/12 '
! grep -q quantization_config "$tmp/c/config.json"
rm -rf "$tmp/c"
"$COLIBRI" convert "$q" "$tmp/c" --experts q4g64 >/dev/null 2>&1
"$COLIBRI" info -m "$tmp/c" | grep -q "U8 432.0 KiB"
echo "convert ok"

# the official fixture with its config in transformers' spelling: the same model
off=tests/oracle_v4/deepseek_v4_official
mkdir -p "$tmp/hf"
cp "$off"/* "$tmp/hf/"
cp "$off/config.hf.json" "$tmp/hf/config.json"
"$COLIBRI" oracle "$tmp/hf" | grep ' tf=300/300 gen=12/12 '

