#!/usr/bin/env python3
"""bench/prefill_e2e_summary.py - tables from bench/prefill_e2e.sh's raw output.

Prefill GFLOP/s counts the weight products only: 2 x the parameters of the
linear layers one token passes through (attention projections, kv_b as the
expanded prefill applies it, the dense MLP or the shared and top-k routed
experts, the router; not the embedding, nor lm_head, which a prefill applies
to its last token), from MODEL_PREFIX<fmt>/config.json. The attention's own
products (scores and value sums, quadratic in the prompt) are stated apart.
Each figure is the median over the rounds with its range."""
import json
import re
import statistics
import sys

PEAK_OF = {"f32": "fp32 FMA", "bf16": "fp32 FMA", "f16": "fp32 FMA", "fp8b": "fp32 FMA",
           "q8": "int8 dot", "q4": "int8 dot", "q4g32": "int8 dot", "q4g64": "int8 dot", "q4g128": "int8 dot"}


def flops_per_token(c, n_prompt):
    h, H = c["hidden_size"], c["num_attention_heads"]
    dn, dr, dv, r = c["qk_nope_head_dim"], c["qk_rope_head_dim"], c["v_head_dim"], c["kv_lora_rank"]
    qr = c.get("q_lora_rank") or 0
    q = h * qr + qr * H * (dn + dr) if qr else h * H * (dn + dr)
    attn = q + h * (r + dr) + r * H * (dn + dv) + H * dv * h
    dense = 3 * h * c["intermediate_size"]
    moe = 3 * h * c["moe_intermediate_size"] * (c["num_experts_per_tok"] + (c.get("n_shared_experts") or 0)) \
        + h * c["n_routed_experts"]
    L, kd = c["num_hidden_layers"], c.get("first_k_dense_replace", 0)
    weights = 2 * (L * attn + kd * dense + (L - kd) * moe)
    # scores over dn + dr and value sums over dv, for the mean causal span
    mean_span = (n_prompt + 1) / 2
    attention = 2 * L * H * (dn + dr + dv) * mean_span
    return weights, attention


def med(xs):
    return statistics.median(xs) if xs else float("nan")


def cell(xs, fmt="%.1f"):
    if not xs:
        return "-"
    return (fmt + " (" + fmt + "-" + fmt + ")") % (med(xs), min(xs), max(xs))


def main():
    raw, pfx = sys.argv[1], sys.argv[2]
    pre = {}    # (threads, build, fmt) -> [tok/s]
    dec = {}
    frac = {}   # (build, fmt) -> [decode % of bound]
    dec0, frac0 = {}, {}    # the same from depth 0
    peaks = {}  # (name, threads) -> [G op/s]
    n_prompt = 512
    machine = ""
    for line in open(raw):
        if line.startswith("machine:"):
            machine = line.split(":", 1)[1].strip()
        m = re.match(r"peak r\d+ \| (fp32 FMA|bf16 dot|int8 dot|amx-int8 tile) \([^)]*\) \| ([\d.]+) \| ([\d.]+) \|",
                     line)
        if m:
            peaks.setdefault((m.group(1), 1), []).append(float(m.group(2)))
            peaks.setdefault((m.group(1), 2), []).append(float(m.group(3)))
            continue
        m = re.match(r"e2e-(\d) (old|new) (\S+) r\d+ model=\S+ prefill=(\d+) tok in \S+ s \(([\d.]+) tok/s\) "
                     r"decode=\d+ tok in \S+ s \(([\d.]+) tok/s\)", line)
        if m:
            t, b, f = int(m.group(1)), m.group(2), m.group(3)
            n_prompt = int(m.group(4))
            pre.setdefault((t, b, f), []).append(float(m.group(5)))
            dec.setdefault((t, b, f), []).append(float(m.group(6)))
            continue
        m = re.match(r"dec0-1 (old|new) (\S+) r\d+ model=\S+ prefill=\d+ tok in \S+ s \([\d.]+ tok/s\) "
                     r"decode=\d+ tok in \S+ s \(([\d.]+) tok/s\)", line)
        if m:
            dec0.setdefault((m.group(1), m.group(2)), []).append(float(m.group(3)))
            continue
        m = re.match(r"(e2e|dec0)-1 (old|new) (\S+) r\d+ read bandwidth ([\d.]+) GB/s.*reaches (\d+)% of it", line)
        if m:
            (frac if m.group(1) == "e2e" else frac0).setdefault((m.group(2), m.group(3)), []).append(float(m.group(5)))
    fmts = []
    for (_, _, f) in pre:
        if f not in fmts:
            fmts.append(f)
    print("Machine: %s.\n" % machine)
    print("### Compute peaks (`colibri bench --peak`, each round), G op/s\n")
    print("| instruction | 1 thread | 2 threads |\n|---|---:|---:|")
    # on a machine with AMX the int8 formats' prefill runs on tiles: their
    # share of the tile unit's peak is printed too
    amx = med(peaks.get(("amx-int8 tile", 1), [])) > 0
    for name in ("fp32 FMA", "bf16 dot", "int8 dot") + (("amx-int8 tile",) if amx else ()):
        print("| %s | %s | %s |" % (name, cell(peaks.get((name, 1), []), "%.0f"), cell(peaks.get((name, 2), []), "%.0f")))
    for t in (1, 2):
        clock = "process CPU time" if t == 1 else "wall clock"
        print("\n### Prefill of %d tokens, %d thread%s (%s): tok/s and GFLOP/s of weight products\n"
              % (n_prompt, t, "s" if t > 1 else "", clock))
        print("| weights | old tok/s | new tok/s | new / old | new GFLOP/s | instruction | of its peak |"
              + (" of AMX-INT8 peak |" if amx else ""))
        print("|---|---:|---:|---:|---:|---|---:|" + ("---:|" if amx else ""))
        for f in fmts:
            cfg = json.load(open(pfx + f + "/config.json"))
            w, a = flops_per_token(cfg, n_prompt)
            o, n = pre.get((t, "old", f), []), pre.get((t, "new", f), [])
            gf = [x * w / 1e9 for x in n]
            pk = med(peaks.get((PEAK_OF.get(f, "fp32 FMA"), t), []))
            tile = ""
            if amx:
                tile = " %.1f%% |" % (100 * med(gf) / med(peaks[("amx-int8 tile", t)])) \
                    if PEAK_OF.get(f) == "int8 dot" else " - |"
            print("| %s | %s | %s | %.2fx | %s | %s | %.0f%% |%s" % (f, cell(o), cell(n), med(n) / med(o), cell(gf, "%.0f"),
                  PEAK_OF.get(f, "?"), 100 * med(gf) / pk, tile))
        print("\n(Weight products: %.0f MFLOP per token; the attention's own products at this length add %.1f MFLOP "
              "per token, %.1f%%.)" % (w / 1e6, a / 1e6, 100 * a / w))
    print("\n### Decode of 32 tokens after the prefill (depth 512), 1 thread (process CPU time): tok/s and % of the "
          "read bound\n")
    print("| weights | old tok/s | new tok/s | new / old | old of bound | new of bound |")
    print("|---|---:|---:|---:|---:|---:|")
    for f in fmts:
        o, n = dec.get((1, "old", f), []), dec.get((1, "new", f), [])
        print("| %s | %s | %s | %.2fx | %s | %s |" % (f, cell(o), cell(n), med(n) / med(o),
              cell(frac.get(("old", f), []), "%.0f%%"), cell(frac.get(("new", f), []), "%.0f%%")))
    print("\n### Decode of 64 tokens from depth 0 (a 1-token prompt), 1 thread (process CPU time)\n")
    print("| weights | old tok/s | new tok/s | new / old | old of bound | new of bound |")
    print("|---|---:|---:|---:|---:|---:|")
    for f in fmts:
        o, n = dec0.get(("old", f), []), dec0.get(("new", f), [])
        if not n:
            continue
        print("| %s | %s | %s | %.2fx | %s | %s |" % (f, cell(o), cell(n), med(n) / med(o),
              cell(frac0.get(("old", f), []), "%.0f%%"), cell(frac0.get(("new", f), []), "%.0f%%")))
    print("\n### 2 threads (wall clock): decode tok/s after the prefill\n")
    print("| weights | old | new | new / old |\n|---|---:|---:|---:|")
    for f in fmts:
        o, n = dec.get((2, "old", f), []), dec.get((2, "new", f), [])
        print("| %s | %s | %s | %.2fx |" % (f, cell(o), cell(n), med(n) / med(o)))


if __name__ == "__main__":
    main()
