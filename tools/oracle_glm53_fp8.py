#!/usr/bin/env python3
# oracle_glm53_fp8.py -- a GLM-5.3 oracle fixture stored as GLM's FP8 releases
# store their weights (tests/oracle_glm53/glm53_fp8), with transformers'
# dequantizing FP8 load as the reference:
#
#   config.json   Glm5NextConfig with quantization_config {quant_method fp8,
#                 fmt e4m3, activation_scheme dynamic, weight_block_size
#                 [128, 128], modules_to_not_convert [model.visual, lm_head]}
#   FP8           every module transformers' fine-grained FP8 integration
#                 converts (replace_with_fp8_linear: each nn.Linear of the text
#                 model, the routed experts): `<m>.weight` F8_E4M3 [out, in] +
#                 `<m>.weight_scale_inv` F32 [ceil(out/128), ceil(in/128)], the
#                 per-block amax / 448 (the routed experts per expert, in the
#                 checkpoint's per-expert names)
#   F32           everything else as save_pretrained gives it: embedding,
#                 lm_head, norms, router (a Parameter, not a Linear), hyper-
#                 connection mixers, KDA conv1d / dt_bias / A_log, the indexer's
#                 pool bias and gate (Parameters), the vision tower
#
# glm53_indexed's layers (KDA / indexed full / indexed shared / KDA, dense and
# MoE MLPs), with hidden_size 128 and intermediate_size 256 so the dense MLP's
# weights have two 128-blocks along one side (rows of gate/up, columns of down)
# and each block gets its own scale; every other dimension is below 128 (one
# partial block). Dimensions are whole blocks or below one, where transformers'
# Fp8Dequantize (which derives the block size from the scale grid) reads the
# grid as written.
#
# Reference: Glm5NextForConditionalGeneration.from_pretrained of these files on
# the CPU, where transformers dequantizes FP8 at load (needs accelerate on the
# path: PYTHONPATH=DIR with `pip install --target DIR --no-deps accelerate`).
# Every loaded weight is checked to equal its codes times their block scales
# (the routed experts in the merged gate_up_proj / down_proj the load builds).
#
# Usage: PYTHONPATH=/tmp/acc HF_HUB_OFFLINE=1 /work/venv-tf/bin/python tools/oracle_glm53_fp8.py [--out tests/oracle_glm53]
# Deterministic: rerunning produces byte-identical files.

import argparse
import json
import math
import os
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import oracle_glm53 as og  # noqa: E402

torch = og.torch
mg = og.mg
from safetensors import safe_open  # noqa: E402
from safetensors.torch import save_file  # noqa: E402

NAME = "glm53_fp8"
SEED = 5600
SEQ_LENS = (60, 24)
QC = {"quant_method": "fp8", "fmt": "e4m3", "activation_scheme": "dynamic", "weight_block_size": [128, 128],
      "modules_to_not_convert": ["model.visual", "lm_head"]}
TEXT = dict(og.FIXTURES["glm53_indexed"]["text"], hidden_size=128, intermediate_size=256)
E4M3_MAX = 448.0


def quantize(w):
    """128x128 blocks: codes e4m3 of w / s, s = the block's amax / 448 (F32)."""
    r, c = w.shape
    br, bc = math.ceil(r / 128), math.ceil(c / 128)
    s = torch.zeros(br, bc)
    for i in range(br):
        for j in range(bc):
            blk = w[i * 128:(i + 1) * 128, j * 128:(j + 1) * 128]
            s[i, j] = max(blk.abs().max().item(), 1e-12) / E4M3_MAX
    sfull = s.repeat_interleave(128, 0)[:r].repeat_interleave(128, 1)[:, :c]
    q = (w / sfull).clamp(-E4M3_MAX, E4M3_MAX).to(torch.float8_e4m3fn)
    return q, s, q.float() * sfull


def write_in_name_order(tensors, path):
    """A safetensors file with the tensors in name order, so each
    weight_scale_inv lies right after its weight (save_file groups them by
    dtype: an expert's F32 scales would sit apart from its F8 codes, and a
    streamed expert's byte ranges of this tiny file would span the gap)."""
    dt = {torch.float32: "F32", torch.float8_e4m3fn: "F8_E4M3", torch.bfloat16: "BF16", torch.int64: "I64"}
    hdr, blobs, off = {"__metadata__": {"format": "pt"}}, [], 0
    for k in sorted(tensors):
        t = tensors[k].contiguous()
        b = t.view(torch.uint8).numpy().tobytes() if t.numel() else b""
        hdr[k] = {"dtype": dt[t.dtype], "shape": list(t.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(hdr, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(len(h).to_bytes(8, "little") + h)
        for b in blobs:
            f.write(b)


def converted_prefixes(model):
    """The modules transformers' FP8 integration turns into FP8Linear /
    FP8Experts for QC's modules_to_not_convert (its own selection)."""
    from transformers.integrations.finegrained_fp8 import FP8Experts, FP8Linear, replace_with_fp8_linear
    from transformers.utils.quantization_config import FineGrainedFP8Config
    qc = FineGrainedFP8Config(weight_block_size=tuple(QC["weight_block_size"]),
                              modules_to_not_convert=QC["modules_to_not_convert"])
    with torch.device("meta"):
        m = mg.Glm5NextForConditionalGeneration(model.config)
    replace_with_fp8_linear(m, modules_to_not_convert=QC["modules_to_not_convert"], quantization_config=qc,
                            pre_quantized=True)
    lin = {n for n, mod in m.named_modules() if isinstance(mod, FP8Linear)}
    exp = {n for n, mod in m.named_modules() if isinstance(mod, FP8Experts)}
    return lin, exp


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--out", default="tests/oracle_glm53")
    a = p.parse_args()
    outdir = os.path.join(a.out, NAME)
    if os.path.isdir(outdir):
        shutil.rmtree(outdir)
    os.makedirs(outdir)
    text = dict(og.TEXT)
    text.update(TEXT)
    cfg = og.make_config(text)
    g = torch.Generator().manual_seed(SEED)
    seqs = [torch.randint(1, text["vocab_size"], (n,), generator=g).tolist() for n in SEQ_LENS]
    for attempt in range(og.MAX_ATTEMPTS):
        wseed = SEED + 1 + attempt
        torch.manual_seed(wseed)
        model = mg.Glm5NextForConditionalGeneration(cfg)
        og.init_weights(model, torch.Generator().manual_seed(wseed))
        lin, exp = converted_prefixes(model)
        with tempfile.TemporaryDirectory() as tmp:
            model.save_pretrained(tmp)
            with safe_open(os.path.join(tmp, "model.safetensors"), "pt") as f:
                sd = {k: f.get_tensor(k) for k in f.keys()}
            for name in ("config.json",):
                shutil.copy(os.path.join(tmp, name), os.path.join(outdir, name))
        out, want, n_fp8 = {}, {}, 0
        for k, v in sd.items():
            mod = k[:-len(".weight")] if k.endswith(".weight") else None
            ex = mod and any(mod.startswith(e + ".") and mod.count(".") == e.count(".") + 2 for e in exp)
            if mod and (mod in lin or ex) and v.dim() == 2:
                q, s, deq = quantize(v.float())
                out[k], out[mod + ".weight_scale_inv"] = q, s.contiguous()
                want[k] = deq
                n_fp8 += 1
            else:
                out[k] = v.contiguous()
        write_in_name_order(out, os.path.join(outdir, "model.safetensors"))
        c = json.load(open(os.path.join(outdir, "config.json")))
        c["quantization_config"] = QC
        with open(os.path.join(outdir, "config.json"), "w") as f:
            json.dump(c, f, indent=2, sort_keys=True)
            f.write("\n")
        model = og.load(outdir)
        # the dequantizing load gives the codes times their block scales (experts merged: checked by value)
        got = dict(model.state_dict())
        for k, w in want.items():
            if k in got:
                assert torch.equal(got[k].float(), w), k
        n_checked = sum(k in got for k in want)
        for e in exp:   # the per-expert weights, merged by the load into gate_up_proj / down_proj
            E = got[e + ".gate_up_proj"].shape[0]
            for i in range(E):
                pe = f"{e}.{i}."
                gu = torch.cat([want[pe + "gate_proj.weight"], want[pe + "up_proj.weight"]])
                assert torch.equal(got[e + ".gate_up_proj"][i].float(), gu), pe
                assert torch.equal(got[e + ".down_proj"][i].float(), want[pe + "down_proj.weight"]), pe
                n_checked += 3
        assert n_checked == len(want), (n_checked, len(want))
        probe = og.Probe(model)
        try:
            logits = [og.forward(model, s) for s in seqs]
            prompt = seqs[0][:og.PROMPT_LEN]
            gen = og.greedy(model, prompt)
            tf = og.forward(model, prompt + gen)
        finally:
            probe.remove()
        gen_margin = og.top2(tf[og.PROMPT_LEN - 1:-1]).min().item()
        hf_dec = (og.hf_decode(model, seqs[0]) - logits[0]).abs().max().item()
        ok = (probe.router_gap > og.GAP_MIN and gen_margin > 10 * og.MARGIN_TOL and probe.clipped > 0
              and hf_dec < og.MARGIN_TOL / 4 and probe.index_gap > og.GAP_MIN)
        print(f"  [{NAME}] seed {wseed}: {n_fp8} FP8 weights (each checked after the load), router gap "
              f"{probe.router_gap:.2e}, pool gap {probe.index_gap:.2e}, gen margin {gen_margin:.2e}, decode vs "
              f"prefill {hf_dec:.2e} -> {'ok' if ok else 'retry'}", flush=True)
        if ok:
            break
    else:
        raise SystemExit(f"{NAME}: no seed with sufficient margins")
    save_file({f"logits.{i}": lg for i, lg in enumerate(logits)}, os.path.join(outdir, "reference.safetensors"),
              metadata={"format": "pt"})
    ref = {
        "name": NAME,
        "versions": og.versions(),
        "margin_tolerance": og.MARGIN_TOL,
        "sequences": [{"tokens": s, "argmax": lg.argmax(-1).tolist(), "top2_margin": og.top2(lg).tolist()}
                      for s, lg in zip(seqs, logits)],
        "generation": {"prompt": prompt, "tokens": gen},
        "notes": {
            "generator": "tools/oracle_glm53_fp8.py (Glm5NextForConditionalGeneration.from_pretrained of these "
                         "files: transformers' FP8 load, dequantized on the CPU; float32, use_cache=False, eager)",
            "fp8_weights": n_fp8, "fp8_modules": sorted(lin) + sorted(exp),
            "min_router_gap": probe.router_gap, "min_pool_topk_gap": probe.index_gap,
            "transformers_decode_vs_prefill_max_dlogit": hf_dec,
        },
    }
    with open(os.path.join(outdir, "reference.json"), "w") as f:
        f.write(og.fmt_json(ref))


if __name__ == "__main__":
    main()
