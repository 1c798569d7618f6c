#!/bin/sh
# The loader names checkpoint tensors nothing consumed: a tensor the config
# does not describe (an indexer under a V3 model_type, a correction bias under
# deepseek_v2, a layer past num_hidden_layers) fails the load naming it. The
# MTP layers (num_hidden_layers .. + num_nextn_predict_layers - 1) are accepted
# and logged once. A DSA model_type without its indexer tensors is refused
# naming the missing indexer tensor. Checkpoints are the oracle fixture with tensors added (pure Python).
set -u
src=tests/oracle/deepseek_v3_tiny
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail=0

# mk NAME TENSOR...: $tmp/NAME = the fixture plus F32 [4] tensors of these names
mk() {
    d="$tmp/$1"; shift
    mkdir -p "$d"; cp "$src/config.json" "$src"/reference.* "$d/"
    python3 - "$src/model.safetensors" "$d/model.safetensors" "$@" <<'PY'
import json, struct, sys
src, dst, extra = sys.argv[1], sys.argv[2], sys.argv[3:]
raw = open(src, "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
hdr = json.loads(raw[8:8 + n])
data = raw[8 + n:]
for name in extra:
    hdr[name] = {"dtype": "F32", "shape": [4], "data_offsets": [len(data), len(data) + 16]}
    data += struct.pack("<4f", 1, 2, 3, 4)
h = json.dumps(hdr).encode()
h += b" " * (-len(h) % 8)
open(dst, "wb").write(struct.pack("<Q", len(h)) + h + data)
PY
}
# cfg NAME SED: edit $tmp/NAME/config.json
cfg() { sed -i "$2" "$tmp/$1/config.json"; }
# refused NAME SUBSTRING: loading $tmp/NAME fails (no signal) with SUBSTRING in the message
refused() {
    out=$("$COLIBRI" oracle "$tmp/$1" 2>&1); rc=$?
    if [ $rc -eq 0 ] || [ $rc -ge 128 ]; then echo "FAIL $1: exit $rc: $out"; fail=1; return; fi
    case "$out" in *"$2"*) echo "ok   $1: $out" ;; *) echo "FAIL $1: '$out' lacks '$2'"; fail=1 ;; esac
}

mk indexer model.layers.1.self_attn.indexer.wk.weight
refused indexer "tensor 'model.layers.1.self_attn.indexer.wk.weight' is not used by model_type deepseek_v3"

mk toplevel model.extra_head.weight
refused toplevel "tensor 'model.extra_head.weight' is not used"

# layer 4 = num_hidden_layers: an MTP layer only when the config says so
mk nomtp model.layers.4.eh_proj.weight model.layers.4.enorm.weight
refused nomtp "tensor 'model.layers.4.e"

mk mtp model.layers.4.eh_proj.weight model.layers.4.enorm.weight
cfg mtp 's/"num_nextn_predict_layers": *0/"num_nextn_predict_layers": 1/'
out=$("$COLIBRI" oracle "$tmp/mtp" 2>&1); rc=$?
if [ $rc -eq 0 ] && [ "$(echo "$out" | grep -c 'MTP layer, not loaded')" -eq 1 ] &&
   echo "$out" | grep -q 'layers 4..4 (2 tensors): MTP layer, not loaded' && echo "$out" | grep -q ' tf='; then
    echo "ok   mtp: $out"
else
    echo "FAIL mtp: exit $rc: $out"; fail=1
fi

mk pastmtp model.layers.5.eh_proj.weight
cfg pastmtp 's/"num_nextn_predict_layers": *0/"num_nextn_predict_layers": 1/'
refused pastmtp "tensor 'model.layers.5.eh_proj.weight' is not used"

# a V3 checkpoint labelled deepseek_v2: its correction biases have no reader
mk v2label
cfg v2label 's/"deepseek_v3"/"deepseek_v2"/; s/"norm_topk_prob": *true/"norm_topk_prob": false/'
refused v2label "mlp.gate.e_score_correction_bias' is not used by model_type deepseek_v2"

# a V3 checkpoint labelled with a DSA model_type has no indexer: refused naming
# its missing tensor
mk v32label
cfg v32label 's/"deepseek_v3"/"deepseek_v32"/'
refused v32label "indexer"
mk glmlabel
cfg glmlabel 's/"deepseek_v3"/"glm_moe_dsa"/'
refused glmlabel "indexer"

# the unmodified fixture still loads (the crafted copies differ only as above)
mk plain
"$COLIBRI" oracle "$tmp/plain" >/dev/null 2>&1 || { echo "FAIL plain copy"; fail=1; }
exit $fail
