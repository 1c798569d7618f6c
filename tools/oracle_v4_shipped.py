#!/usr/bin/env python3
# oracle_v4_shipped.py -- a DeepSeek-V4 oracle fixture stored exactly as the
# official release ships its weights (tests/oracle_v4/deepseek_v4_fp8):
#
#   config.json   DeepSeek's spelling (compress_ratios 0/4/128, num_hash_layers,
#                 qk_rope_head_dim, rope_scaling yarn) with the release's
#                 quantization_config {quant_method fp8, fmt e4m3, scale_fmt
#                 ue8m0, activation_scheme dynamic, weight_block_size [128, 128]}
#                 and expert_dtype "fp4"
#   FP8           attn.wq_a / wq_b / wkv / wo_a / wo_b, attn.indexer.wq_b and
#                 ffn.shared_experts.w1/w2/w3: F8_E4M3 [out, in] + `.scale`
#                 F8_E8M0 [ceil(out/128), ceil(in/128)], DeepSeek's power-of-two
#                 block scales 2^ceil(log2(amax/448))
#   FP4           ffn.experts.E.w1/w2/w3: e2m1 codes two per byte (I8 [out,
#                 in/2], element 2i in the low nibble) + `.scale` F8_E8M0
#                 [out, in/32] (OCP MX block exponent)
#   BF16          embed, head, ffn.gate.weight, the compressors' and indexer's
#                 wkv / wgate / weights_proj (transformers'
#                 DeepseekV4PreTrainedModel._keep_in_fp32_modules: shipped in
#                 BF16 without scales)
#   F32           the modules transformers keeps in f32 (hc_*, attn_sink, ape,
#                 gate.bias, norms), and I64 tid2eid
#
# Dims make partial 128x128 blocks in both directions (hidden 160, q_lora_rank
# 48, wo_b's 160 rows) and o_lora_rank 128, so wo_a's row blocks split exactly
# into its o_groups = 2 groups as on V4-Flash (o_lora_rank 1024). Each FP8
# weight's 128x128 blocks get magnitudes a power of two apart, so every block
# has another scale than its neighbours (a block-grid misreading shows).
#
# Reference: transformers 5.18 cannot run the FP8/FP4 file on the CPU (its
# FP8 path needs a GPU kernel or dequantize=True, and that derives the block
# size from the scale grid, so it mis-reads partial 128-blocks; see
# tools/oracle_shipped.py). So the reference is DeepseekV4ForCausalLM float32
# (from_pretrained of the official names) on the exactly dequantised weights,
# and every dequantisation is checked against transformers' own
# Fp8Dequantize._dequantize_one: the FP4 experts directly, the FP8 weights on
# their codes zero-padded to whole 128x128 blocks (where its grid reading is
# DeepSeek's), cut back to the weight's shape.
#
# Usage: /work/venv-tf/bin/python tools/oracle_v4_shipped.py [--out tests/oracle_v4] [--o-lora-rank R]
#        [--expert-dtype fp4|fp8]   (the options write variants for a manual check of the loader's other paths)
# Deterministic: rerunning produces byte-identical files.

import argparse
import json
import os
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import oracle_v4 as ov4  # noqa: E402
import make_oracle as mo  # noqa: E402
import oracle_shipped as osh  # noqa: E402

torch = ov4.torch
NAME = "deepseek_v4_fp8"
SEED = 7300
SEQ_LENS = (160,)
QC = {"activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8", "scale_fmt": "ue8m0",
      "weight_block_size": [128, 128]}
DIMS = dict(num_hidden_layers=3, vocab_size=64, hidden_size=160, moe_intermediate_size=32, head_dim=64,
            q_lora_rank=48, o_groups=2, o_lora_rank=128, index_n_heads=4, index_head_dim=32, index_topk=4,
            sliding_window=32, layer_types=None, mlp_layer_types=None, compress_rates=None,
            official=dict(compress_ratios=[0, 4, 128], num_hash_layers=1, qk_rope_head_dim=16,
                          rope_scaling=dict(type="yarn", factor=8.0, original_max_position_embeddings=64,
                                            beta_fast=16, beta_slow=1)))

FP8_SUFFIXES = (".attn.wq_a.weight", ".attn.wq_b.weight", ".attn.wkv.weight", ".attn.wo_a.weight",
                ".attn.wo_b.weight", ".attn.indexer.wq_b.weight", ".ffn.shared_experts.w1.weight",
                ".ffn.shared_experts.w2.weight", ".ffn.shared_experts.w3.weight")
F32_MARKS = ("hc_", "attn_sink", ".ape", "gate.bias", "norm.weight")


EXPERT_DTYPE = ["fp4"]


def kind(k):
    if ".ffn.experts." in k and k.endswith(".weight"):
        return EXPERT_DTYPE[0]
    if k.endswith(FP8_SUFFIXES):
        return "fp8"
    if k.endswith("tid2eid"):
        return "int"
    if any(m in k for m in F32_MARKS):
        return "f32"
    return "bf16"


def block_spread(sd):
    """Each 128x128 block of an FP8 weight times 2^((i + 2j) % 3 - 1): random blocks of one matrix would
    otherwise all share a ue8m0 exponent, and a reader taking another block's scale would go unseen."""
    for k in sd:
        if kind(k) == "fp8" and ".ffn.experts." not in k:
            r, c = sd[k].shape
            i = torch.arange(r).div(128, rounding_mode="floor").unsqueeze(1)
            j = torch.arange(c).div(128, rounding_mode="floor").unsqueeze(0)
            sd[k] = (sd[k] * torch.exp2(((i + 2 * j) % 3 - 1).float())).contiguous()


def hf_dequant(q, e):
    return osh.hf_dequantise(q, e)


def encode(sd):
    """(file tensors, exactly dequantised f32 tensors) of the official-name state dict sd."""
    enc, dq, counts = {}, {}, {}
    for k in sorted(sd):
        t = sd[k]
        kd = kind(k)
        counts[kd] = counts.get(kd, 0) + 1
        if kd == "fp4":
            codes, e = osh.mxfp4_quantise(t.float())
            packed = osh.mxfp4_pack(codes)
            e8 = e.view(torch.float8_e8m0fnu)
            w = osh.mxfp4_dequantise(packed, e)
            assert torch.equal(hf_dequant(packed, e8), w), k
            enc[k], enc[k[:-len(".weight")] + ".scale"], dq[k] = packed, e8.contiguous(), w
        elif kd == "fp8":
            q, e, scale = osh.fp8_ue8m0_quantise(t.float())
            w = mo.dequantise_fp8(q, scale)
            r, c = q.shape
            R, C = -(-r // 128) * 128, -(-c // 128) * 128
            qp = torch.zeros(R, C, dtype=torch.float8_e4m3fn)
            qp[:r, :c] = q
            assert torch.equal(hf_dequant(qp, e.view(torch.float8_e8m0fnu))[:r, :c], w), k
            enc[k], enc[k[:-len(".weight")] + ".scale"], dq[k] = q, e.view(torch.float8_e8m0fnu).contiguous(), w
        elif kd == "bf16":
            b = t.to(torch.bfloat16).contiguous()
            enc[k], dq[k] = b, b.float().contiguous()
        else:
            enc[k], dq[k] = t.contiguous(), t.contiguous()
    return enc, dq, counts


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--out", default="tests/oracle_v4")
    p.add_argument("--o-lora-rank", type=int, default=DIMS["o_lora_rank"],
                   help="another o_lora_rank (e.g. 64: wo_a's groups then split inside a 128-row scale block)")
    p.add_argument("--expert-dtype", choices=("fp4", "fp8"), default="fp4",
                   help="fp8: the routed experts stored like the dense FP8 weights (transformers' default)")
    a = p.parse_args()
    EXPERT_DTYPE[0] = a.expert_dtype
    mo.lazy_imports()
    d = dict(ov4.BASE)
    d.update(DIMS)
    d["o_lora_rank"] = a.o_lora_rank
    spec = dict(official=True)
    cfg = ov4.d_for_hf(d)
    outdir = os.path.join(a.out, NAME)
    if os.path.isdir(outdir):
        shutil.rmtree(outdir)
    os.makedirs(outdir)
    g = torch.Generator().manual_seed(SEED)
    seqs = [torch.randint(0, d["vocab_size"], (n,), generator=g).tolist() for n in SEQ_LENS]
    tmp = tempfile.mkdtemp(prefix="oracle_v4_shipped_")
    try:
        for attempt in range(200):
            wseed = SEED + 1 + attempt
            torch.manual_seed(wseed)
            model = ov4.DeepseekV4ForCausalLM(cfg)
            ov4.init_weights(model, cfg, torch.Generator().manual_seed(wseed))
            ov4.write_model(model, cfg, spec, d, tmp)
            st = os.path.join(tmp, "model.safetensors")
            sd = mo.read_safetensors(st)
            block_spread(sd)
            mo.save_file(sd, st, metadata={"format": "pt"})
            float_logits = [ov4.forward(ov4.load(tmp), s) for s in seqs]
            enc, dq, counts = encode(sd)
            mo.save_file(dq, st, metadata={"format": "pt"})
            model = ov4.load(tmp)
            chk = model.model.layers[1].self_attn.o_a_proj.weight
            assert torch.equal(chk, dq["layers.1.attn.wo_a.weight"]), "the reference does not hold the dequantised wo_a"
            probe = ov4.Probe(model, model.config)
            try:
                logits = [ov4.forward(model, s) for s in seqs]
                prompt = seqs[0][:ov4.PROMPT_LEN]
                gen = ov4.greedy(model, prompt)
                tf = ov4.forward(model, prompt + gen)
            finally:
                probe.remove()
            gen_margin = ov4.top2(tf[ov4.PROMPT_LEN - 1:-1]).min().item()
            ok = (probe.router_gap > ov4.GAP_MIN and probe.index_gap > ov4.GAP_MIN
                  and gen_margin > 10 * ov4.MARGIN_TOL and probe.shared_max < model.config.swiglu_limit
                  and probe.clipped > 0)
            print(f"  [{NAME}] seed {wseed}: router gap {probe.router_gap:.2e}, indexer gap {probe.index_gap:.2e}, "
                  f"gen margin {gen_margin:.2e}, shared max {probe.shared_max:.3f}, routed clipped "
                  f"{probe.clipped}/{probe.total} -> {'ok' if ok else 'retry'}", flush=True)
            if ok:
                break
        else:
            raise SystemExit(f"{NAME}: no seed with sufficient margins")
        deltas = ov4.part_deltas(model, seqs, logits)
        deltas["quantisation_vs_float_weights"] = max((x - y).abs().max().item() for x, y in zip(float_logits, logits))
        with open(os.path.join(tmp, "config.json")) as f:
            c = json.load(f)
        c["quantization_config"] = QC
        c["expert_dtype"] = a.expert_dtype
        with open(os.path.join(outdir, "config.json"), "w") as f:
            json.dump(dict(sorted(c.items())), f, indent=2)
        mo.save_file(enc, os.path.join(outdir, "model.safetensors"), metadata={"format": "pt"})
        ov4.save_file({f"logits.{i}": lg for i, lg in enumerate(logits)}, os.path.join(outdir, "reference.safetensors"),
                      metadata={"format": "pt"})
        ref = {
            "name": NAME,
            "versions": ov4.versions(),
            "margin_tolerance": ov4.MARGIN_TOL,
            "sequences": [{"tokens": s, "argmax": lg.argmax(-1).tolist(), "top2_margin": ov4.top2(lg).tolist()}
                          for s, lg in zip(seqs, logits)],
            "generation": {"prompt": prompt, "tokens": gen},
            "notes": {
                "generator": "tools/oracle_v4_shipped.py (DeepseekV4ForCausalLM.from_pretrained, float32, eager, "
                             "use_cache=False, on the exactly dequantised weights of model.safetensors; every "
                             "dequantisation equals transformers' Fp8Dequantize)",
                "stored": "FP8 e4m3 + .scale F8_E8M0 128x128 (attn wq_a wq_b wkv wo_a wo_b, indexer wq_b, shared "
                          "experts); FP4 e2m1 I8 [out, in/2] + .scale F8_E8M0 [out, in/32] (routed experts); BF16 "
                          "(embed, head, gate, compressor / indexer wkv wgate weights_proj); F32 (hc_*, attn_sink, "
                          "ape, gate.bias, norms); I64 tid2eid",
                "tensors_by_kind": counts,
                "weight_seed": wseed,
                "min_router_gap": probe.router_gap, "min_indexer_gap": probe.index_gap,
                "shared_expert_max_abs_preact": probe.shared_max, "swiglu_limit": model.config.swiglu_limit,
                "routed_preacts_clipped": f"{probe.clipped}/{probe.total}",
                "max_abs_dlogit_with_part_off": deltas,
            },
        }
        with open(os.path.join(outdir, "reference.json"), "w") as f:
            f.write(ov4.fmt_json(ref))
        sizes = {fn: os.path.getsize(os.path.join(outdir, fn)) for fn in sorted(os.listdir(outdir))}
        print(f"  [{NAME}] part deltas: {deltas}")
        print(f"  [{NAME}] wrote {outdir}: " + ", ".join(f"{k} {v / 1e3:.0f} kB" for k, v in sizes.items()))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
