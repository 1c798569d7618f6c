#!/bin/sh
# colibri synth's GLM-5.3 presets: glm53-tiny written in the release's names
# loads (every tensor read, the layer pattern KDA x 3 then indexed) and
# decodes, in bf16 and as the FP8 release (--experts fp8b --dense fp8b);
# glm53 and glm53-flash (real shapes: a layer is gigabytes, too big to write
# here) are listed and refuse --mtp-layers by name before writing anything.
set -e
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$COLIBRI" synth "$tmp/tiny" --preset glm53-tiny --layers 8 > /dev/null 2>&1
"$COLIBRI" info --model "$tmp/tiny" > "$tmp/info" 2>/dev/null
grep -q "family: *glm5_next" "$tmp/info" || { cat "$tmp/info"; exit 1; }
grep -q "GLM-5.3, 6 KDA layers .* 2 MLA layers (rank 64, no RoPE, pooled DSA: kpool 8, top-32" "$tmp/info" \
    || { cat "$tmp/info"; exit 1; }
"$COLIBRI" bench -m "$tmp/tiny" -p 70 -n 4 -r 1 2>/dev/null | grep -q "decode=4 tok"
"$COLIBRI" synth --help | grep -q "glm53|glm53-flash|glm53-tiny"
for p in glm53 glm53-flash; do
    if "$COLIBRI" synth "$tmp/mtp" --preset $p --layers 1 --mtp-layers 1 2>"$tmp/err"; then exit 1; fi
    grep -q -- "--mtp-layers: not written for $p" "$tmp/err"
    [ ! -e "$tmp/mtp" ]
done
# the FP8 release's encoding when asked: every Linear the release quantizes as F8_E4M3 +
# weight_scale_inv (the embedding and lm_head not), quantization_config declared; it loads and decodes
"$COLIBRI" synth "$tmp/fp8" --preset glm53-tiny --layers 4 --experts fp8b --dense fp8b > /dev/null 2>&1
python3 - "$tmp/fp8" <<'PYEOF'
import glob, json, struct, sys
d = sys.argv[1]
qc = json.load(open(d + "/config.json"))["quantization_config"]
assert qc["quant_method"] == "fp8" and qc["weight_block_size"] == [128, 128] and qc["fmt"] == "e4m3", qc
h = {}
for f in glob.glob(d + "/*.safetensors"):
    with open(f, "rb") as fh:
        h.update(json.loads(fh.read(struct.unpack("<Q", fh.read(8))[0])))
for k in ("model.language_model.layers.0.self_attn.q_proj.weight", "model.language_model.layers.3.self_attn.kv_b_proj.weight",
          "model.language_model.layers.3.mlp.experts.5.down_proj.weight", "model.language_model.layers.0.mlp.gate_proj.weight"):
    assert h[k]["dtype"] == "F8_E4M3" and h[k[:-len("weight")] + "weight_scale_inv"]["dtype"] == "F32", k
for k in ("lm_head.weight", "model.language_model.embed_tokens.weight"):
    assert h[k]["dtype"] == "BF16", k
PYEOF
"$COLIBRI" bench -m "$tmp/fp8" -p 70 -n 4 -r 1 2>/dev/null | grep -q "decode=4 tok"
# colibri's own packed formats (glm53-flash's default mxfp4 experts; convert writes
# the same): the format is keyed by the tensor's full name, model.language_model. included
"$COLIBRI" synth "$tmp/mx" --preset glm53-tiny --layers 4 --experts mxfp4 --dense q8 > /dev/null 2>&1
"$COLIBRI" bench -m "$tmp/mx" -p 70 -n 4 -r 1 2>"$tmp/err" | grep -q "decode=4 tok" || { cat "$tmp/err"; exit 1; }
echo "synth glm53 ok"
