#!/usr/bin/env python3
# oracle_shipped.py -- oracle fixtures whose weights are stored the way the
# labs ship 4-bit models, for colibri's loaders of those encodings
# (src/model/shipped.h). Uses tools/make_oracle.py's model, initialisation,
# margin checks and reference format; writes tests/oracle_shipped/<name>/:
#
#   deepseek_v3_mxfp4  DeepSeek-V4's encodings on a V3-family model: routed
#                      experts as FP4 e2m1 codes, two per byte (I8 [out,
#                      in/2], element 2i in the low nibble) with `.scale`
#                      F8_E8M0 [out, in/32] (the OCP MX block exponent);
#                      every other Linear except mlp.gate / lm_head as
#                      F8_E4M3 with `.scale` F8_E8M0 [ceil(out/128),
#                      ceil(in/128)] (power-of-two block scales, ue8m0);
#                      quantization_config {quant_method fp8, scale_fmt
#                      ue8m0, weight_block_size [128, 128]}, expert_dtype fp4.
#   kimi_k2_int4       Kimi K2's encoding: routed experts as compressed-tensors
#                      pack-quantized int4 (weight_packed I32 [out, in/8],
#                      element 8g+j in bits 4j of word g holding q+8;
#                      weight_scale BF16 [out, in/32]; weight_shape I64 [2]),
#                      the rest F32; quantization_config as Kimi-K2-Thinking
#                      ships it (group 32, symmetric, ignore list);
#                      model_type kimi_k2.
#
# References: transformers 5.18 cannot run either file on the CPU (its FP8 /
# FP4 path needs a GPU kernel or dequantize=True, which derives the block size
# from the scale grid and so mis-reads partial 128x128 blocks; the
# compressed-tensors integration needs that package). So, as for
# deepseek_v3_fp8, the reference is HF float32 on the exactly dequantised
# weights, and the dequantisation is checked against the libraries' own
# code: the FP4 experts against transformers' Fp8Dequantize (the op its
# dequantizing load runs), and, when CT_HELPERS names compressed-tensors'
# compressors/pack_quantized/helpers.py, the int4 packing against its
# pack_to_int32 / unpack_from_int32.
#
# Usage: python3 tools/oracle_shipped.py [--out tests/oracle_shipped] [--only NAME]
# Deterministic: rerunning produces byte-identical files.

import argparse
import importlib.util
import json
import os
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_oracle as mo  # noqa: E402

FIXTURES = {
    "deepseek_v3_mxfp4": dict(seed=7000, kind="mxfp4", dims=mo.variant()),
    "kimi_k2_int4": dict(seed=7100, kind="ct_int4",
                         dims=mo.variant(n_group=1, topk_group=1, rope_theta=50000.0,
                                         routed_scaling_factor=2.827,
                                         yarn=dict(beta_fast=1.0, beta_slow=1.0))),
}

E2M1 = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0)

KIMI_QC = {
    "config_groups": {"group_0": {
        "input_activations": None, "output_activations": None, "targets": ["Linear"],
        "weights": {"actorder": None, "block_structure": None, "dynamic": False, "group_size": 32,
                    "num_bits": 4, "observer": "minmax", "observer_kwargs": {}, "strategy": "group",
                    "symmetric": True, "type": "int"}}},
    "format": "pack-quantized",
    "ignore": ["lm_head", "re:.*self_attn.*", "re:.*shared_experts.*", "re:.*mlp\\.(gate|up|gate_up|down)_proj.*"],
    "kv_cache_scheme": None, "quant_method": "compressed-tensors", "quantization_status": "compressed",
}


def is_routed_expert(k):
    return ".mlp.experts." in k and k.endswith(".weight")


# ---------------------------------------------------------------- MXFP4

def mxfp4_quantise(w):
    """OCP MX v1.0: X = 2^(floor(log2 amax) - 2) per 32 columns, values rounded to the
    nearest e2m1 (ties to the even code), saturating at 6. Returns (codes uint8 [out, in],
    e8m0 uint8 [out, in/32])."""
    torch = mo.torch
    out_f, in_f = w.shape
    b = w.reshape(out_f, in_f // 32, 32).double()
    amax = b.abs().amax(-1)
    e = torch.where(amax > 0, torch.floor(torch.log2(amax)) - 2 + 127, torch.zeros_like(amax)).clamp(0, 254)
    v = b / torch.exp2(e - 127).unsqueeze(-1)
    a = v.abs()
    # the e2m1 grid's midpoints: ties go to the even code (0, 2, 4, 6)
    m = torch.zeros_like(a, dtype=torch.int64)
    for code, (lo, incl) in enumerate([(0.25, False), (0.75, True), (1.25, False), (1.75, True),
                                       (2.5, False), (3.5, True), (5.0, False)], start=1):
        m = torch.where(a >= lo if incl else a > lo, torch.full_like(m, code), m)
    codes = m | (torch.signbit(v).to(torch.int64) << 3)
    return codes.reshape(out_f, in_f).to(torch.uint8), e.to(torch.uint8)


def mxfp4_pack(codes):
    c = codes.to(mo.torch.int32)
    return (c[:, 0::2] | (c[:, 1::2] << 4)).to(mo.torch.uint8).view(mo.torch.int8).contiguous()


def mxfp4_dequantise(packed, e):
    """Our own reading: element 2i in the low nibble, value E2M1[code] * 2^(e - 127)."""
    torch = mo.torch
    u = packed.view(torch.uint8).to(torch.int64)
    lut = torch.tensor(E2M1, dtype=torch.float32)
    vals = torch.stack([lut[u & 0xF], lut[u >> 4]], dim=-1).reshape(u.shape[0], -1)
    sc = torch.exp2(e.to(torch.float32) - 127).repeat_interleave(32, dim=1)
    return (vals * sc).contiguous()


def hf_dequantise(packed, e8m0):
    """transformers' own FP8/FP4 dequantizer (what FineGrainedFP8 dequantize=True runs)."""
    from transformers.integrations.finegrained_fp8 import Fp8Dequantize
    op = Fp8Dequantize.__new__(Fp8Dequantize)
    return op._dequantize_one(packed, e8m0, output_dtype=mo.torch.float32).float().contiguous()


def fp8_ue8m0_quantise(w, block=128):
    """DeepSeek's ue8m0 block fp8: scale = 2^ceil(log2(amax/448)) per 128x128 block."""
    torch = mo.torch
    out_f, in_f = w.shape
    nb_o, nb_i = -(-out_f // block), -(-in_f // block)
    pad = torch.zeros(nb_o * block, nb_i * block, dtype=torch.float32)
    pad[:out_f, :in_f] = w
    amax = pad.view(nb_o, block, nb_i, block).abs().amax(dim=(1, 3)).double().clamp(min=1e-30)
    e = (torch.ceil(torch.log2(amax / 448.0)) + 127).clamp(1, 254)
    scale = torch.exp2(e - 127).float()
    sc_full = scale.repeat_interleave(block, 0).repeat_interleave(block, 1)[:out_f, :in_f]
    q = (w / sc_full).clamp(-448.0, 448.0).to(torch.float8_e4m3fn)
    return q.contiguous(), e.to(torch.uint8).contiguous(), scale.contiguous()


# ---------------------------------------------------------- compressed-tensors

def ct_quantise(w):
    """Symmetric int4 per 32 columns: s = bf16(amax / 7.5), q = clamp(round(w / s), -8, 7)."""
    torch = mo.torch
    out_f, in_f = w.shape
    b = w.reshape(out_f, in_f // 32, 32)
    s = (b.abs().amax(-1) / 7.5).to(torch.bfloat16)
    sf = s.float().clamp(min=1e-30)
    q = torch.round(b / sf.unsqueeze(-1)).clamp(-8, 7).to(torch.int8).reshape(out_f, in_f)
    return q, s


def ct_pack(q):
    """Element 8g+j of a row in bits 4j..4j+3 of int32 word g, holding q + 8."""
    torch = mo.torch
    u = (q.to(torch.int64) + 8).reshape(q.shape[0], -1, 8)
    word = torch.zeros(u.shape[:2], dtype=torch.int64)
    for j in range(8):
        word |= u[:, :, j] << (4 * j)
    word = torch.where(word >= 2 ** 31, word - 2 ** 32, word)
    return word.to(torch.int32).contiguous()


def ct_dequantise(packed, s):
    torch = mo.torch
    w = packed.to(torch.int64) & 0xFFFFFFFF
    nib = torch.stack([(w >> (4 * j)) & 0xF for j in range(8)], dim=-1).reshape(packed.shape[0], -1)
    return ((nib - 8).float() * s.float().repeat_interleave(32, dim=1)).contiguous()


def ct_helpers():
    path = os.environ.get("CT_HELPERS")
    if not path:
        return None
    spec = importlib.util.spec_from_file_location("ct_pack_helpers", path)
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    return m


# ---------------------------------------------------------------- encoders

def encode(kind, sd):
    """(file tensors, dequantised tensors) of the f32 state dict sd."""
    torch = mo.torch
    enc, dq = {}, {}
    ct = ct_helpers() if kind == "ct_int4" else None
    for k in sorted(sd):
        t = sd[k].float().contiguous()
        if kind == "mxfp4" and is_routed_expert(k):
            codes, e = mxfp4_quantise(t)
            packed = mxfp4_pack(codes)
            e8 = e.view(torch.float8_e8m0fnu)
            w = mxfp4_dequantise(packed, e)
            assert torch.equal(hf_dequantise(packed, e8), w), k
            assert torch.equal(hf_dequantise(packed, e), w), k          # U8 exponents read alike
            enc[k] = packed
            enc[k[:-len(".weight")] + ".scale"] = e8.contiguous()
            dq[k] = w
        elif kind == "mxfp4" and mo.is_fp8_target(k, t):
            q, e, scale = fp8_ue8m0_quantise(t)
            w = mo.dequantise_fp8(q, scale)
            r, c = t.shape
            if r % 128 == 0 and c % 128 == 0:      # grids transformers' dequantizer reads right
                assert torch.equal(hf_dequantise(q, e.view(torch.float8_e8m0fnu)), w), k
            enc[k] = q
            enc[k[:-len(".weight")] + ".scale"] = e.view(torch.float8_e8m0fnu).contiguous()
            dq[k] = w
        elif kind == "ct_int4" and is_routed_expert(k):
            q, s = ct_quantise(t)
            packed = ct_pack(q)
            if ct is not None:
                assert torch.equal(ct.pack_to_int32(q, 4), packed), k
                assert torch.equal(ct.unpack_from_int32(packed, 4, torch.Size(t.shape)), q), k
            m = k[:-len(".weight")]
            enc[m + ".weight_packed"] = packed
            enc[m + ".weight_scale"] = s.contiguous()
            enc[m + ".weight_shape"] = torch.tensor(list(t.shape), dtype=torch.int64)
            dq[k] = ct_dequantise(packed, s)
            assert torch.equal(dq[k], (q.float() * s.float().repeat_interleave(32, dim=1))), k
        else:
            enc[k] = sd[k].contiguous()
            dq[k] = sd[k].contiguous()
    return enc, dq


def make_fixture(name, spec, outroot):
    torch = mo.torch
    d = spec["dims"]
    cfg = mo.build_config(d)
    outdir = os.path.join(outroot, name)
    if os.path.isdir(outdir):
        shutil.rmtree(outdir)
    os.makedirs(outdir)
    g = torch.Generator().manual_seed(spec["seed"])
    seqs = [torch.randint(0, d["vocab_size"], (n,), generator=g).tolist() for n in mo.SEQ_LENS]
    tmp = tempfile.mkdtemp(prefix="oracle_shipped_")
    try:
        for attempt in range(mo.MAX_ATTEMPTS):
            wseed = spec["seed"] + 1 + attempt
            torch.manual_seed(wseed)
            model = mo.new_model(cfg)
            mo.init_weights(model, wseed)
            raw = os.path.join(tmp, "raw")
            model.save_pretrained(raw)
            sd = mo.read_safetensors(os.path.join(raw, "model.safetensors"))
            enc, dq = encode(spec["kind"], sd)
            mo.save_file(dq, os.path.join(raw, "model.safetensors"), metadata={"format": "pt"})
            model = mo.load_model(raw)
            chk = model.model.layers[1].mlp.experts.gate_up_proj[3, :d["moe_intermediate_size"]]
            assert torch.equal(chk, dq["model.layers.1.mlp.experts.3.gate_proj.weight"])
            res = mo.evaluate(model, seqs)
            ok = res["router_margin"] > mo.ROUTER_MARGIN_MIN and res["gen_margin"] > 10 * mo.MARGIN_TOL
            print(f"  [{name}] weight seed {wseed}: min router margin {res['router_margin']:.3e}, "
                  f"min generation top2 margin {res['gen_margin']:.3e} -> {'ok' if ok else 'retry'}")
            if ok:
                break
        else:
            raise SystemExit(f"{name}: no seed with sufficient margins")

        shutil.copy(os.path.join(raw, "config.json"), os.path.join(outdir, "config.json"))
        cpath = os.path.join(outdir, "config.json")
        if spec["kind"] == "mxfp4":
            mo.patch_config(cpath, expert_dtype="fp4", quantization_config={
                "quant_method": "fp8", "fmt": "e4m3", "scale_fmt": "ue8m0", "activation_scheme": "dynamic",
                "weight_block_size": [128, 128]})
        else:
            mo.patch_config(cpath, model_type="kimi_k2", quantization_config=KIMI_QC)
        mo.save_file(enc, os.path.join(outdir, "model.safetensors"), metadata={"format": "pt"})

        ref = {f"logits.{i}": lg.contiguous() for i, lg in enumerate(res["logits"])}
        for k, h in enumerate(res["hidden"]):
            ref[f"hidden.0.{k}"] = h.contiguous()
        mo.save_file(ref, os.path.join(outdir, "reference.safetensors"))
        L = d["num_hidden_layers"]
        seq_entries = [{"tokens": s, "argmax": lg.argmax(-1).tolist(),
                        "top2_margin": [float(x) for x in mo.top2(lg).tolist()]}
                       for s, lg in zip(seqs, res["logits"])]
        notes = {
            "mxfp4": "DeepSeek-V4's shipped encodings on a DeepSeek-V3 model: routed experts FP4 e2m1 (I8 "
                     "[out, in/2], element 2i in the low nibble) with .scale F8_E8M0 [out, in/32] (OCP MX "
                     "block exponent); dense Linears F8_E4M3 with .scale F8_E8M0 128x128 power-of-two block "
                     "scales. Expected outputs are HF float32 on the exactly dequantised weights (the FP4 "
                     "dequantisation equals transformers' Fp8Dequantize on every expert).",
            "ct_int4": "Kimi K2's shipped encoding: routed experts compressed-tensors pack-quantized int4 "
                       "(weight_packed I32, weight_scale BF16 per 32 columns, weight_shape I64), symmetric, "
                       "the rest F32 (ignore list as Kimi-K2-Thinking's); model_type kimi_k2. Expected outputs "
                       "are HF float32 (model_type deepseek_v3) on the exactly dequantised weights.",
        }[spec["kind"]]
        notes += (" float32, eager attention, eager experts, 1 thread, CPU. Weight seed %d. Min router "
                  "margin %.3e. hidden.0.k as in tests/oracle." % (wseed, res["router_margin"]))
        reference = {"name": name, "versions": mo.versions(), "margin_tolerance": mo.MARGIN_TOL,
                     "sequences": seq_entries, "generation": {"prompt": res["prompt"], "tokens": res["gen"]},
                     "notes": notes}
        assert len(res["hidden"]) == L + 1
        with open(os.path.join(outdir, "reference.json"), "w") as f:
            f.write(mo.fmt_json(reference))
        sizes = {fn: os.path.getsize(os.path.join(outdir, fn)) for fn in sorted(os.listdir(outdir))}
        print(f"  [{name}] wrote {outdir}: " + ", ".join(f"{k} {v/1e6:.2f}MB" for k, v in sizes.items()))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main():
    p = argparse.ArgumentParser(description="oracle fixtures with weights stored as shipped (4-bit experts)")
    p.add_argument("--out", default="tests/oracle_shipped")
    p.add_argument("--only", nargs="*", choices=sorted(FIXTURES))
    args = p.parse_args()
    mo.lazy_imports()
    print("versions:", json.dumps(mo.versions()))
    os.makedirs(args.out, exist_ok=True)
    for n in args.only or list(FIXTURES):
        print(f"fixture {n}")
        make_fixture(n, FIXTURES[n], args.out)


if __name__ == "__main__":
    main()
