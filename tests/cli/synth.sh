#!/bin/sh
# colibri synth writes a loadable random-weight model in each weight format,
# deterministic for a seed; bench runs on it.
set -eu
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
for f in bf16 q8 q4g64 fp8b; do
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
