#!/bin/sh
# compressed-tensors int4 experts streamed under --ram: each expert's packed
# codes and bf16 scales are read into its slot and repacked there into q4g32,
# and the logits are bit for bit the resident model's (oracle --digest hashes
# every logit) at every budget. The fixture (tests/oracle_shipped/kimi_k2_int4)
# is rewritten with each expert's tensors side by side, as a real checkpoint
# lays them out: in its own layout (by dtype) an expert's codes and scales
# are close enough to be read as one range spanning other experts, so a slot
# would not fit under the model's own size.
set -eu
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
src=tests/oracle_shipped/kimi_k2_int4
mkdir "$tmp/m"
cp "$src"/config.json "$src"/reference.json "$src"/reference.safetensors "$tmp/m/"
python3 - "$src/model.safetensors" "$tmp/m/model.safetensors" <<'PY'
import json, re, struct, sys
b = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", b[:8])[0]
h = json.loads(b[8:8 + n])
meta = h.pop("__metadata__", None)
def key(name):   # non-expert tensors first, then expert by expert
    m = re.match(r"model\.layers\.(\d+)\.mlp\.experts\.(\d+)\.", name)
    return (1, int(m.group(1)), int(m.group(2)), name) if m else (0, 0, 0, name)
out, blobs, off = {}, [], 0
for name in sorted(h, key=key):
    s, e = h[name]["data_offsets"]
    pad = -off % 64
    blobs.append(b"\0" * pad + b[8 + n + s:8 + n + e])
    off += pad
    out[name] = dict(h[name], data_offsets=[off, off + e - s])
    off += e - s
if meta is not None: out["__metadata__"] = meta
hdr = json.dumps(out).encode()
hdr += b" " * (-len(hdr) % 8)
open(sys.argv[2], "wb").write(struct.pack("<Q", len(hdr)) + hdr + b"".join(blobs))
PY
ref=$("$COLIBRI" oracle --no-gate --digest "$tmp/m")
echo "resident: $ref"
[ "$ref" = "$("$COLIBRI" oracle --no-gate --digest "$src")" ]   # the layout changes nothing
# 2.2 MiB of other weights; slots of 40 KiB (16 KiB read, the q4g32 copy
# beside it), 0.9 MiB of experts resident: from 4 slots to 21 of 48
for r in 2.4M 2.6M 2.8M 3.0M; do
    got=$("$COLIBRI" oracle --no-gate --digest --ram $r --state-dir none "$tmp/m" 2>"$tmp/err")
    grep -q "routed experts streamed: a cache of" "$tmp/err" || { cat "$tmp/err"; exit 1; }
    echo "--ram $r: $(grep -o 'a cache of [0-9]* experts' "$tmp/err")"
    [ "$got" = "$ref" ] || { echo "--ram $r: $got"; exit 1; }
done

# Kimi K2.5 / K2.6 name the same experts under the family's tensor_prefix
# (language_model.); the streamed store must find them there too, and a
# resident load repacks them after the store is chosen.
mkdir "$tmp/k25"
cp "$tmp/m/reference.json" "$tmp/m/reference.safetensors" "$tmp/k25/"
python3 - "$tmp/m" tests/oracle/kimi_k25_tiny/config.json "$tmp/k25" <<'PY'
import json, struct, sys
src, wrap, dst = sys.argv[1:]
text = json.load(open(src + "/config.json"))
qc = text.pop("quantization_config")
# exact names in the ignore list are whole module names, the prefix included
qc["ignore"] = [i if i.startswith("re:") else "language_model." + i for i in qc["ignore"]]
top = {k: v for k, v in json.load(open(wrap)).items() if k != "text_config"}
top.update(text_config=text, quantization_config=qc)
json.dump(top, open(dst + "/config.json", "w"), indent=1)
b = open(src + "/model.safetensors", "rb").read()
n = struct.unpack("<Q", b[:8])[0]
h = json.loads(b[8:8 + n])
h = {(k if k == "__metadata__" else "language_model." + k): v for k, v in h.items()}
hdr = json.dumps(h).encode()
hdr += b" " * (-len(hdr) % 8)
open(dst + "/model.safetensors", "wb").write(struct.pack("<Q", len(hdr)) + hdr + b[8 + n:])
PY
k25=$("$COLIBRI" oracle --no-gate --digest "$tmp/k25")
echo "kimi_k25 resident: $k25"
[ "${k25#* digest=}" = "${ref#* digest=}" ] || { echo "K2.5 layout changed the logits"; exit 1; }
got=$("$COLIBRI" oracle --no-gate --digest --ram 2.6M --state-dir none "$tmp/k25" 2>"$tmp/err") || { cat "$tmp/err"; exit 1; }
grep -q "routed experts streamed: a cache of" "$tmp/err" || { cat "$tmp/err"; exit 1; }
[ "$got" = "$k25" ] || { echo "kimi_k25 --ram 2.6M: $got"; exit 1; }
echo "kimi_k25 --ram 2.6M: same digest"
