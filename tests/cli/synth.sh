#!/bin/sh
# colibri synth writes a loadable random-weight model in each weight format,
# deterministic for a seed; bench runs on it.
set -eu
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
for f in bf16 q8 q4g64 fp8b mxfp4; do
    "$COLIBRI" synth "$tmp/$f" --preset tiny --layers 2 --experts $f --dense $f 2>/dev/null
    "$COLIBRI" info -m "$tmp/$f" | grep -q "layers:       2 (1 dense, 1 MoE)"
    "$COLIBRI" bench -m "$tmp/$f" -p 8 -n 4 -r 1 | grep -q "tok/s"
done
"$COLIBRI" info -m "$tmp/q8" | grep -q "U8"
"$COLIBRI" info -m "$tmp/fp8b" | grep -q "F8_E4M3"
"$COLIBRI" synth "$tmp/again" --preset tiny --layers 2 --experts q8 --dense q8 2>/dev/null
cmp "$tmp/q8/model-00001-of-00001.safetensors" "$tmp/again/model-00001-of-00001.safetensors"
if "$COLIBRI" synth "$tmp/x" --preset v9 2>"$tmp/err"; then exit 1; fi
grep -q "v9" "$tmp/err"
# a layer count that leaves no MoE layer is refused, nothing written
if "$COLIBRI" synth "$tmp/dense" --preset v3 --layers 3 2>"$tmp/err"; then exit 1; fi
grep -q "no MoE layer" "$tmp/err"
[ ! -e "$tmp/dense" ]
# DSA presets write the indexer tensors with transformers' names (checked to
# load into DeepseekV32ForCausalLM / GlmMoeDsaForCausalLM with no missing or
# unexpected keys); glm5-tiny's shared layer 2 has none
for p in v32-tiny glm5-tiny; do
    "$COLIBRI" synth "$tmp/$p" --preset $p 2>/dev/null
    python3 - "$tmp/$p"/model-00001-of-00001.safetensors "$p" <<'PY'
import json, struct, sys
f = open(sys.argv[1], "rb"); h = json.loads(f.read(struct.unpack("<Q", f.read(8))[0]))
full = [0, 1, 2, 3] if sys.argv[2] == "v32-tiny" else [0, 1, 3]
want = {"wq_b.weight": [256, 96], "wk.weight": [64, 256], "k_norm.weight": [64], "k_norm.bias": [64],
        "weights_proj.weight": [4, 256]}
got = {k: h[k]["shape"] for k in h if ".indexer." in k}
exp = {f"model.layers.{l}.self_attn.indexer.{n}": s for l in full for n, s in want.items()}
assert got == exp, (sorted(got), sorted(exp))
assert h["model.layers.0.self_attn.indexer.weights_proj.weight"]["dtype"] == "F32"
PY
done
# --mtp-layers 1 writes an MTP layer after the last layer under HF's names
# (the ones the loader takes from the deepseek_v3_mtp fixture); bench --mtp
# with forced drafts keeps what it is told and changes no token
"$COLIBRI" synth "$tmp/mtp" --preset tiny --layers 2 --mtp-layers 1 2>/dev/null
"$COLIBRI" info -m "$tmp/mtp" | grep -q "^mtp: *1 layer (model.layers.2 onwards)"
grep -q '"num_nextn_predict_layers":1}$' "$tmp/mtp/config.json"
python3 - "$tmp/mtp"/model-00001-of-00001.safetensors <<'PY'
import json, struct, sys
f = open(sys.argv[1], "rb"); h = json.loads(f.read(struct.unpack("<Q", f.read(8))[0]))
want = {"enorm.weight": [256], "hnorm.weight": [256], "eh_proj.weight": [256, 512], "shared_head.norm.weight": [256],
        "mlp.gate.weight": [8, 256], "self_attn.kv_b_proj.weight": [4 * 64, 128]}
for n, s in want.items():
    assert h["model.layers.2." + n]["shape"] == s, (n, h["model.layers.2." + n])
assert not any(k.startswith("model.layers.3.") for k in h)
PY
cp tests/tok/tiny/* "$tmp/mtp/"
"$COLIBRI" bench -m "$tmp/mtp" --mtp on --draft 3 --mtp-accept 1,1,1 -p 8 -n 40 -r 1 > "$tmp/b1"
grep -q "same tokens: yes" "$tmp/b1" && grep -q "^mtp: 3\.[5-9][0-9]* tokens per decode forward" "$tmp/b1" \
    || { cat "$tmp/b1"; exit 1; }
"$COLIBRI" bench -m "$tmp/mtp" --mtp on --draft 2 --mtp-accept 0 -p 8 -n 40 -r 1 > "$tmp/b0"
grep -q "same tokens: yes" "$tmp/b0" && grep -q "1.00 per verify forward.*kept by position: 0/" "$tmp/b0" \
    || { cat "$tmp/b0"; exit 1; }
if "$COLIBRI" bench -m "$tmp/mtp" --mtp on --mtp-accept 2 -p 8 -n 4 -r 1 2>"$tmp/err"; then exit 1; fi
grep -q -- "--mtp-accept '2'" "$tmp/err"
if "$COLIBRI" synth "$tmp/dsamtp" --preset v32-tiny --mtp-layers 1 2>"$tmp/err"; then exit 1; fi
grep -q "MTP layer for a DSA model" "$tmp/err"
# DeepSeek-V4 presets: listed, and --mtp-layers refused by the preset's name
# before anything is written (a real-shaped V4 layer is gigabytes, too big
# to write here)
if "$COLIBRI" synth "$tmp/x" --preset v9 2>"$tmp/err"; then exit 1; fi
grep -q "v4-flash, v4-pro" "$tmp/err"
"$COLIBRI" synth --help | grep -q "v4-flash|v4-pro"
if "$COLIBRI" synth "$tmp/v4mtp" --preset v4-flash --layers 1 --mtp-layers 1 2>"$tmp/err"; then exit 1; fi
grep -q -- "--mtp-layers: not written for v4-flash" "$tmp/err"
[ ! -e "$tmp/v4mtp" ]
