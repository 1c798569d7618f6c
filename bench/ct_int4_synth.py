#!/usr/bin/env python3
"""Rewrites a `colibri synth` checkpoint's routed experts as compressed-tensors
int4 (pack-quantized, symmetric, group 32: I32 weight_packed with eight
nibbles, BF16 weight_scale, I64 weight_shape), the layout Kimi K2-Thinking /
K2.5 / K2.6 ship, for load and streaming benchmarks. The codes are random
nibbles and every scale is 2^-7: timing and memory only, not a model.
Standard library only.

    python3 bench/ct_int4_synth.py SRC_DIR DST_DIR
"""
import json
import os
import re
import struct
import sys

EXPERT = re.compile(r"model\.layers\.\d+\.mlp\.experts\.\d+\.(gate|up|down)_proj\.weight$")


def read_header(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        return json.loads(f.read(n)), 8 + n


def main(src, dst):
    os.makedirs(dst, exist_ok=True)
    cfg = json.load(open(os.path.join(src, "config.json")))
    cfg["quantization_config"] = {
        "quant_method": "compressed-tensors", "format": "pack-quantized", "quantization_status": "compressed",
        "config_groups": {"group_0": {"targets": ["Linear"], "input_activations": None, "output_activations": None,
                                      "weights": {"num_bits": 4, "type": "int", "symmetric": True,
                                                  "strategy": "group", "group_size": 32, "dynamic": False,
                                                  "actorder": None, "block_structure": None,
                                                  "observer": "minmax", "observer_kwargs": {}}}},
        "ignore": ["lm_head", "re:.*self_attn.*", "re:.*shared_experts.*", "re:.*mlp\\.(gate|up|down)_proj.*"],
        "kv_cache_scheme": None}
    json.dump(cfg, open(os.path.join(dst, "config.json"), "w"), indent=1)
    shards = sorted(f for f in os.listdir(src) if f.endswith(".safetensors"))
    weight_map = {}
    scale_bf16 = struct.pack("<H", 0x3C00)      # 2^-7
    for shard in shards:
        hdr, base = read_header(os.path.join(src, shard))
        meta = hdr.pop("__metadata__", None)
        out, plan, off = {}, [], 0

        def add(name, dtype, shape, nbytes, how):
            nonlocal off
            out[name] = {"dtype": dtype, "shape": shape, "data_offsets": [off, off + nbytes]}
            plan.append((nbytes, how))
            off += nbytes
            weight_map[name] = shard

        for name, t in sorted(hdr.items(), key=lambda kv: kv[1]["data_offsets"][0]):
            s, e = t["data_offsets"]
            if EXPERT.match(name):
                rows, cols = t["shape"]
                mod = name[:-len(".weight")]
                add(mod + ".weight_packed", "I32", [rows, cols // 8], rows * cols // 2, ("rand",))
                add(mod + ".weight_scale", "BF16", [rows, (cols + 31) // 32], rows * ((cols + 31) // 32) * 2,
                    ("fill", scale_bf16))
                add(mod + ".weight_shape", "I64", [2], 16, ("bytes", struct.pack("<qq", rows, cols)))
            else:
                add(name, t["dtype"], t["shape"], e - s, ("copy", base + s))
        if meta is not None:
            out["__metadata__"] = meta
        h = json.dumps(out).encode()
        h += b" " * (-len(h) % 8)
        with open(os.path.join(src, shard), "rb") as fin, open(os.path.join(dst, shard), "wb") as fo:
            fo.write(struct.pack("<Q", len(h)) + h)
            for nbytes, how in plan:
                if how[0] == "copy":
                    fin.seek(how[1])
                    left = nbytes
                    while left:
                        b = fin.read(min(left, 1 << 24))
                        fo.write(b)
                        left -= len(b)
                elif how[0] == "rand":
                    left = nbytes
                    while left:
                        k = min(left, 1 << 24)
                        fo.write(os.urandom(k))
                        left -= k
                elif how[0] == "fill":
                    fo.write(how[1] * (nbytes // len(how[1])))
                else:
                    fo.write(how[1])
    json.dump({"metadata": {}, "weight_map": weight_map},
              open(os.path.join(dst, "model.safetensors.index.json"), "w"), indent=1)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2])
