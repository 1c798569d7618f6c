#!/bin/sh
# GLM-5.3's MTP layer (model.language_model.layers.L.*, which transformers
# skips on load) is recognised and not loaded: a synth glm53-tiny with such a
# layer added in a shard of its own (num_nextn_predict_layers 1) loads and
# runs, and --mtp on is refused naming glm5_next's MTP layer as not
# implemented (not as missing).
set -u
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
m=$tmp/m
"$COLIBRI" synth "$m" --preset glm53-tiny --layers 4 >/dev/null 2>&1 || { echo "FAIL synth"; exit 1; }
python3 tests/serve/make_glm_tokenizer.py "$m" || exit 1
python3 - "$m" <<'EOF2' || exit 1
import json, struct, sys
d = sys.argv[1]
cfg = json.load(open(f"{d}/config.json"))
cfg["num_nextn_predict_layers"] = 1
json.dump(cfg, open(f"{d}/config.json", "w"))
hid, L = cfg["hidden_size"], cfg["num_hidden_layers"]
pre = f"model.language_model.layers.{L}."
shapes = {pre + "eh_proj.weight": [hid, 2 * hid], pre + "enorm.weight": [hid], pre + "hnorm.weight": [hid],
          pre + "shared_head.norm.weight": [hid]}
hdr, off = {}, 0
for k, s in shapes.items():
    n = 4 * (s[0] * (s[1] if len(s) > 1 else 1))
    hdr[k] = {"dtype": "F32", "shape": s, "data_offsets": [off, off + n]}
    off += n
h = json.dumps(hdr).encode()
h += b" " * (-len(h) % 8)
with open(f"{d}/mtp.safetensors", "wb") as f:
    f.write(struct.pack("<Q", len(h)) + h + struct.pack("<f", 1.0) * (off // 4))
idx = json.load(open(f"{d}/model.safetensors.index.json"))
idx["weight_map"].update({k: "mtp.safetensors" for k in shapes})
json.dump(idx, open(f"{d}/model.safetensors.index.json", "w"))
EOF2
"$COLIBRI" run -m "$m" -p Hi --chat -n 2 --temp 0 >/dev/null 2>"$tmp/off" || { echo "FAIL: no --mtp: $(cat "$tmp/off")"; exit 1; }
grep -q "layers 4..4 (4 tensors): MTP layer, not loaded" "$tmp/off" || { echo "FAIL: MTP layer not named: $(cat "$tmp/off")"; exit 1; }
if "$COLIBRI" run -m "$m" -p Hi --chat -n 2 --temp 0 --mtp on >/dev/null 2>"$tmp/on"; then
    echo "FAIL: --mtp on accepted"; exit 1
fi
grep -q "drafting with glm5_next's MTP layer (model.language_model.layers.4.\*, 4 tensors) is not implemented" "$tmp/on" \
    || { echo "FAIL: --mtp on: unexpected message: $(cat "$tmp/on")"; exit 1; }
echo "ok   glm5_next MTP layer recognised, --mtp refused by name"
