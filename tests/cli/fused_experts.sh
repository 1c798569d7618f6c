#!/bin/sh
# transformers v5's fused expert layout (mlp.experts.gate_up_proj [E, 2I, hid],
# mlp.experts.down_proj [E, hid, I]) loads to the same model: the oracle
# fixture repacked that way (pure Python, no torch) passes the same gates.
set -eu
src=tests/oracle/deepseek_v3_tiny
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
cp "$src/config.json" "$src"/reference.* "$tmp/"
python3 - "$src/model.safetensors" "$tmp/model.safetensors" <<'PY'
import json, re, struct, sys
src, dst = sys.argv[1], sys.argv[2]
raw = open(src, "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
hdr = json.loads(raw[8:8 + n])
data = raw[8 + n:]
meta = hdr.pop("__metadata__", None)
def get(name):
    b, e = hdr[name]["data_offsets"]
    return data[b:e]
out, blobs = {}, []
def put(name, dtype, shape, blob):
    off = sum(len(x) for x in blobs)
    out[name] = {"dtype": dtype, "shape": shape, "data_offsets": [off, off + len(blob)]}
    blobs.append(blob)
layers = {}
for name in hdr:
    m = re.match(r"(model\.layers\.\d+\.mlp)\.experts\.(\d+)\.(gate|up|down)_proj\.weight$", name)
    if m:
        layers.setdefault(m.group(1), set()).add(int(m.group(2)))
for name in sorted(hdr):
    if re.search(r"\.mlp\.experts\.\d+\.", name):
        continue
    put(name, hdr[name]["dtype"], hdr[name]["shape"], get(name))
for p, ex in sorted(layers.items()):
    E = len(ex)
    I, hid = hdr[f"{p}.experts.0.gate_proj.weight"]["shape"]
    gu = b"".join(get(f"{p}.experts.{e}.gate_proj.weight") + get(f"{p}.experts.{e}.up_proj.weight") for e in range(E))
    dn = b"".join(get(f"{p}.experts.{e}.down_proj.weight") for e in range(E))
    put(f"{p}.experts.gate_up_proj", "F32", [E, 2 * I, hid], gu)
    put(f"{p}.experts.down_proj", "F32", [E, hid, I], dn)
if meta:
    out["__metadata__"] = meta
h = json.dumps(out).encode()
h += b" " * (-len(h) % 8)
with open(dst, "wb") as f:
    f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))
PY
if grep -q "experts.0.gate_proj" "$tmp/model.safetensors"; then echo "repack kept per-expert names"; exit 1; fi
a=$("$COLIBRI" oracle "$tmp")
b=$("$COLIBRI" oracle "$src")
echo "fused:      $a"; echo "per-expert: $b"
[ "$a" = "$b" ]
