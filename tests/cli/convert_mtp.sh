#!/bin/sh
# colibri convert --mtp FMT writes the MTP layer's matrices (eh_proj,
# attention, experts) in FMT while the trunk takes --dense/--experts: with
# --mtp q8 a q4 conversion of colibri-tiny (MTP layer 6) loads without the
# "below 8 bits" warning, and its shard metadata says q8 for layer 6 and q4
# for layer 5; without --mtp the layer follows the roles (and is warned about).
set -eu
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
src=models/colibri-tiny
"$COLIBRI" convert "$src" "$tmp/keep" --dense q4g64 --experts q4g64 --mtp q8 >/dev/null 2>&1
"$COLIBRI" convert "$src" "$tmp/plain" --dense q4g64 --experts q4g64 >/dev/null 2>&1
fmt() {  # fmt DIR TENSOR: the colibri.fmt metadata of TENSOR in DIR's shards
    python3 - "$@" <<'PY'
import glob, json, struct, sys
d, name = sys.argv[1], sys.argv[2]
for p in glob.glob(d + "/*.safetensors"):
    with open(p, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        meta = json.loads(f.read(n)).get("__metadata__", {})
    if "colibri.fmt." + name in meta: print(meta["colibri.fmt." + name]); break
else: print("as-stored")
PY
}
fail=0
want() {  # want DIR TENSOR FMT
    got=$(fmt "$1" "$2")
    if [ "$got" = "$3" ]; then echo "ok   $(basename "$1") $2: $got"; else echo "FAIL $(basename "$1") $2: $got (want $3)"; fail=1; fi
}
want "$tmp/keep" model.layers.6.eh_proj.weight q8
want "$tmp/keep" model.layers.6.self_attn.q_a_proj.weight q8
want "$tmp/keep" model.layers.6.mlp.experts.0.gate_proj.weight q8
want "$tmp/keep" model.layers.6.mlp.shared_experts.down_proj.weight q8
want "$tmp/keep" model.layers.5.self_attn.q_a_proj.weight q4g64
want "$tmp/keep" model.layers.5.mlp.experts.0.gate_proj.weight q4g64
want "$tmp/plain" model.layers.6.mlp.experts.0.gate_proj.weight q4g64
want "$tmp/plain" model.layers.6.eh_proj.weight as-stored
info() { "$COLIBRI" info -m "$1" 2>&1; }
if info "$tmp/keep" | grep -q "below 8 bits"; then echo "FAIL keep: still warned"; fail=1; else echo "ok   keep: no MTP warning"; fi
if info "$tmp/plain" | grep -q "below 8 bits"; then echo "ok   plain: MTP warning"; else echo "FAIL plain: not warned"; fail=1; fi
# an unknown --mtp format is refused by name
if out=$("$COLIBRI" convert "$src" "$tmp/bad" --mtp q7 2>&1); then echo "FAIL --mtp q7 accepted"; fail=1
else case "$out" in *"--mtp: unknown weight format 'q7'"*) echo "ok   $out" ;; *) echo "FAIL: $out"; fail=1 ;; esac; fi
exit $fail
