#!/usr/bin/env python3
# oracle_v2.py -- the deepseek_v2 oracle fixtures, built by tools/make_oracle.py
# (`--only deepseek_v2_tiny deepseek_v2_lite_tiny`) with transformers'
# DeepseekV2ForCausalLM. Same files, weights scheme, robustness rules and
# reference format as make_oracle.py's own fixtures (see its header); this
# module differs only where the architecture does:
#
#   router   DeepseekV2TopkRouter: softmax scores, no correction bias,
#            topk_method "group_limited_greedy" (a group's score is its best
#            expert's; top-k within the topk_group best groups) or "greedy"
#            (top-k over all experts); weights = scores * routed_scaling_factor.
#   margins  re-seeded until, for every token of every sequence and of
#            prompt + generation and every MoE layer, the gap at the expert
#            top-k boundary (within the kept groups) and at the group top-k
#            boundary is > 1e-4.
#
# Fixtures:
#   deepseek_v2_tiny       DeepSeek-V2 / V2.5 style: q_lora, group_limited_greedy
#                          (n_group 4 / topk_group 2), routed_scaling 16,
#                          yarn with mscale = mscale_all_dim = 0.707, v5 config
#                          spelling (rope_parameters)
#   deepseek_v2_lite_tiny  V2-Lite style: q_lora_rank null, greedy, routed
#                          scaling 1, 3 layers / 8 experts, config.json
#                          rewritten to the official DeepSeek spelling
#                          (rope_theta + rope_scaling, torch_dtype, plus the
#                          official keys scoring_func, moe_layer_freq,
#                          aux_loss_alpha, seq_aux), checked to reload to
#                          identical logits.

import json
import math
import os
import shutil

V2_BASE = dict(
    vocab_size=512, hidden_size=128, intermediate_size=256, moe_intermediate_size=64,
    num_hidden_layers=4, first_k_dense_replace=1, num_attention_heads=4,
    q_lora_rank=64, kv_lora_rank=32, qk_nope_head_dim=32, qk_rope_head_dim=16, v_head_dim=24,
    n_routed_experts=16, n_group=4, topk_group=2, num_experts_per_tok=4, n_shared_experts=2,
    routed_scaling_factor=16.0, topk_method="group_limited_greedy",
    max_position_embeddings=256, rope_theta=10000.0,
    yarn=dict(factor=4.0, original_max_position_embeddings=64, beta_fast=32.0, beta_slow=1.0,
              mscale=0.707, mscale_all_dim=0.707),
    rms_norm_eps=1e-6, tie_word_embeddings=False,
)

SPECS = {
    "deepseek_v2_tiny": dict(seed=5000, dims=dict(V2_BASE), official=False),
    "deepseek_v2_lite_tiny": dict(seed=6000, official=True,
                                  dims=dict(V2_BASE, q_lora_rank=None, num_hidden_layers=3,
                                            n_routed_experts=8, n_group=1, topk_group=1,
                                            num_experts_per_tok=2, routed_scaling_factor=1.0,
                                            topk_method="greedy", n_shared_experts=1)),
}


def build_config(mo, d):
    from transformers import DeepseekV2Config
    y = d["yarn"]
    return DeepseekV2Config(
        vocab_size=d["vocab_size"], hidden_size=d["hidden_size"],
        intermediate_size=d["intermediate_size"], moe_intermediate_size=d["moe_intermediate_size"],
        num_hidden_layers=d["num_hidden_layers"], first_k_dense_replace=d["first_k_dense_replace"],
        num_attention_heads=d["num_attention_heads"], num_key_value_heads=d["num_attention_heads"],
        q_lora_rank=d["q_lora_rank"], kv_lora_rank=d["kv_lora_rank"],
        qk_nope_head_dim=d["qk_nope_head_dim"], qk_rope_head_dim=d["qk_rope_head_dim"],
        v_head_dim=d["v_head_dim"], n_routed_experts=d["n_routed_experts"], n_group=d["n_group"],
        topk_group=d["topk_group"], num_experts_per_tok=d["num_experts_per_tok"],
        n_shared_experts=d["n_shared_experts"], routed_scaling_factor=d["routed_scaling_factor"],
        topk_method=d["topk_method"], norm_topk_prob=False,
        max_position_embeddings=d["max_position_embeddings"],
        rope_parameters={"rope_type": "yarn", "rope_theta": d["rope_theta"], "factor": y["factor"],
                         "original_max_position_embeddings": y["original_max_position_embeddings"],
                         "beta_fast": y["beta_fast"], "beta_slow": y["beta_slow"],
                         "mscale": y["mscale"], "mscale_all_dim": y["mscale_all_dim"]},
        rms_norm_eps=d["rms_norm_eps"], tie_word_embeddings=d["tie_word_embeddings"],
        attention_bias=False, mlp_bias=False, hidden_act="silu", bos_token_id=0, eos_token_id=1,
    )


def new_model(mo, cfg):
    from transformers import DeepseekV2ForCausalLM
    m = DeepseekV2ForCausalLM._from_config(cfg, attn_implementation="eager",
                                           experts_implementation="eager", dtype=mo.torch.float32)
    return m.eval()


def load_model(mo, path):
    from transformers import DeepseekV2ForCausalLM
    m = DeepseekV2ForCausalLM.from_pretrained(path, attn_implementation="eager",
                                              experts_implementation="eager", dtype=mo.torch.float32)
    return m.eval()


def init_weights(mo, model, seed):
    """make_oracle.init_weights' scheme for the V2 module classes (no correction bias)."""
    from transformers.models.deepseek_v2.modeling_deepseek_v2 import (
        DeepseekV2Experts, DeepseekV2RMSNorm, DeepseekV2TopkRouter)
    torch = mo.torch
    torch.manual_seed(seed)
    with torch.no_grad():
        for name, mod in model.named_modules():
            if any(p.numel() == 0 for p in mod.parameters(recurse=False)):
                continue    # a part sized to nothing (n_shared_experts 0)
            if isinstance(mod, torch.nn.Embedding):
                mod.weight.copy_(torch.randn(mod.weight.shape))
            elif isinstance(mod, torch.nn.Linear):
                assert mod.bias is None
                mod.weight.copy_(torch.randn(mod.weight.shape) * mod.weight.shape[1] ** -0.5)
            elif isinstance(mod, DeepseekV2RMSNorm):
                mod.weight.copy_(torch.rand(mod.weight.shape) + 0.5)
            elif isinstance(mod, DeepseekV2TopkRouter):
                mod.weight.copy_(torch.randn(mod.weight.shape) * mod.weight.shape[1] ** -0.5)
            elif isinstance(mod, DeepseekV2Experts):
                gu, dn = mod.gate_up_proj, mod.down_proj
                gu.copy_(torch.randn(gu.shape) * gu.shape[2] ** -0.5)
                dn.copy_(torch.randn(dn.shape) * dn.shape[2] ** -0.5)


class RouterProbe:
    """Records each DeepseekV2TopkRouter's input; min_margin() recomputes its fp32 math."""

    def __init__(self, mo, model):
        from transformers.models.deepseek_v2.modeling_deepseek_v2 import DeepseekV2TopkRouter
        self.mo, self.inputs, self.handles = mo, [], []
        for _, mod in model.named_modules():
            if isinstance(mod, DeepseekV2TopkRouter):
                self.handles.append(mod.register_forward_hook(self._hook))

    def _hook(self, mod, args, out):
        self.inputs.append((mod, args[0].detach().clone()))

    def remove(self):
        for h in self.handles:
            h.remove()

    def min_margin(self):
        torch, F = self.mo.torch, self.mo.F
        best = math.inf
        for mod, x in self.inputs:
            x = x.reshape(-1, mod.hidden_dim)
            s = F.linear(x.float(), mod.weight.float()).softmax(dim=-1, dtype=torch.float32)
            E, k = mod.num_experts, mod.top_k
            if mod.topk_method == "group_limited_greedy":
                G, kg = mod.num_group, mod.topk_group
                gs = s.view(-1, G, E // G).max(dim=-1).values
                if kg < G:
                    srt = gs.sort(dim=-1, descending=True)[0]
                    best = min(best, (srt[:, kg - 1] - srt[:, kg]).min().item())
                gidx = gs.topk(kg, dim=-1)[1]
                gmask = torch.zeros_like(gs).scatter_(1, gidx, 1)
                emask = gmask.unsqueeze(-1).expand(-1, G, E // G).reshape(-1, E).bool()
                s = s.masked_fill(~emask, float("-inf"))
            else:
                assert mod.topk_method == "greedy", mod.topk_method
            if k < E:   # top-k of every expert has no boundary
                srt = s.sort(dim=-1, descending=True)[0]
                best = min(best, (srt[:, k - 1] - srt[:, k]).min().item())
        return best


def evaluate(mo, model, seqs):
    """make_oracle.evaluate with the V2 router probe."""
    torch = mo.torch
    probe = RouterProbe(mo, model)
    try:
        with torch.no_grad():
            logits, hidden = mo.run_sequences(model, seqs)
            prompt = seqs[0][:mo.PROMPT_LEN]
            gen = mo.greedy_generate(model, prompt)
            probe.inputs.clear()
            full = prompt + gen
            for s in seqs + [full]:
                model(torch.tensor([s]), use_cache=False)
            router_margin = probe.min_margin()
            probe.inputs.clear()
            tf = model(torch.tensor([full]), use_cache=False).logits[0]
    finally:
        probe.remove()
    tf_arg = tf.argmax(-1).tolist()
    # generate() != teacher-forced argmax is a near-tie: margin 0, so the caller retries
    gen_margin = mo.top2(tf[mo.PROMPT_LEN - 1:-1]).min().item() if tf_arg[mo.PROMPT_LEN - 1:-1] == gen else 0.0
    return dict(logits=logits, hidden=hidden, gen=gen, prompt=prompt,
                router_margin=router_margin, gen_margin=gen_margin)


def write_official_config(path):
    """The official DeepSeek-V2 spelling: rope_theta + rope_scaling, torch_dtype, and the
    official config's routing/training keys (which transformers ignores)."""
    with open(path) as f:
        c = json.load(f)
    rp = c.pop("rope_parameters")
    c["rope_theta"] = rp["rope_theta"]
    c["rope_scaling"] = {k: rp[k] for k in ("factor", "original_max_position_embeddings", "beta_fast",
                                            "beta_slow", "mscale", "mscale_all_dim")}
    c["rope_scaling"]["type"] = "yarn"
    c["torch_dtype"] = c.pop("dtype")
    c.update(scoring_func="softmax", moe_layer_freq=1, aux_loss_alpha=0.001, seq_aux=True)
    with open(path, "w") as f:
        json.dump(dict(sorted(c.items())), f, indent=2)
        f.write("\n")


def make_fixture(name, spec, outroot, mo):
    """Writes outroot/name; mo is the make_oracle module (its imports done)."""
    torch = mo.torch
    spec = SPECS.get(name, spec)    # a fixture make_oracle.py defines itself (seed, dims, official)
    d = spec["dims"]
    cfg = build_config(mo, d)
    L = d["num_hidden_layers"]
    outdir = os.path.join(outroot, name)
    if os.path.isdir(outdir):
        shutil.rmtree(outdir)
    os.makedirs(outdir)
    g = torch.Generator().manual_seed(spec["seed"])
    seqs = [torch.randint(0, d["vocab_size"], (n,), generator=g).tolist() for n in mo.SEQ_LENS]
    assert max(mo.SEQ_LENS) > d["yarn"]["original_max_position_embeddings"]
    for attempt in range(mo.MAX_ATTEMPTS):
        wseed = spec["seed"] + 1 + attempt
        torch.manual_seed(wseed)
        model = new_model(mo, cfg)
        init_weights(mo, model, wseed)
        res = evaluate(mo, model, seqs)
        ok = res["router_margin"] > mo.ROUTER_MARGIN_MIN and res["gen_margin"] > 10 * mo.MARGIN_TOL
        print(f"  [{name}] weight seed {wseed}: min router margin {res['router_margin']:.3e}, "
              f"min generation top2 margin {res['gen_margin']:.3e} -> {'ok' if ok else 'retry'}")
        if ok:
            break
    else:
        raise SystemExit(f"{name}: no seed with sufficient margins")

    model.save_pretrained(outdir)
    p = os.path.join(outdir, "generation_config.json")
    if os.path.exists(p):
        os.remove(p)
    cpath = os.path.join(outdir, "config.json")
    stpath = os.path.join(outdir, "model.safetensors")
    if spec.get("official"):
        write_official_config(cpath)
    else:
        mo.patch_config(cpath)
    # the files on disk reproduce the logits bit-exactly
    m2 = load_model(mo, outdir)
    assert m2.config.topk_method == d["topk_method"]
    with torch.no_grad():
        for i, s in enumerate(seqs):
            l2 = m2(torch.tensor([s]), use_cache=False).logits[0]
            assert torch.equal(l2, res["logits"][i]), f"{name}: reload mismatch on seq {i}"
    del m2

    wsd = mo.read_safetensors(stpath)
    keys = sorted(wsd)
    for n in range(L):
        pre = f"model.layers.{n}.mlp."
        if n >= d["first_k_dense_replace"]:
            for e in range(d["n_routed_experts"]):
                for q in ("gate", "up", "down"):
                    assert f"{pre}experts.{e}.{q}_proj.weight" in wsd
            assert wsd[pre + "gate.weight"].dtype == torch.float32
    assert not any("e_score_correction_bias" in k or "gate_up_proj" in k for k in keys)
    assert ("self_attn.q_proj.weight" in " ".join(keys)) == (d["q_lora_rank"] is None)

    ref = {f"logits.{i}": lg.contiguous() for i, lg in enumerate(res["logits"])}
    assert len(res["hidden"]) == L + 1
    for k, h in enumerate(res["hidden"]):
        ref[f"hidden.0.{k}"] = h.contiguous()
    mo.save_file(ref, os.path.join(outdir, "reference.safetensors"))

    seq_entries = [{"tokens": s, "argmax": lg.argmax(-1).tolist(),
                    "top2_margin": [float(x) for x in mo.top2(lg).tolist()]}
                   for s, lg in zip(seqs, res["logits"])]
    notes = {
        "deepseek_v2_tiny": "DeepSeek-V2/V2.5 style (DeepseekV2ForCausalLM): q_lora, softmax router with "
                            "topk_method group_limited_greedy (n_group 4 / topk_group 2, top-4 of 16, max-score "
                            "groups), no correction bias, routed_scaling_factor 16 on unnormalised weights, 2 "
                            "shared experts, yarn factor 4 with mscale = mscale_all_dim = 0.707, v5 config "
                            "spelling (rope_parameters).",
        "deepseek_v2_lite_tiny": "DeepSeek-V2-Lite style (DeepseekV2ForCausalLM): q_lora_rank null "
                                 "(self_attn.q_proj), softmax router with topk_method greedy (top-2 of 8), "
                                 "routed_scaling_factor 1, 1 shared expert, 3 layers; config.json rewritten "
                                 "to the official spelling (rope_theta + rope_scaling{type:yarn}, torch_dtype, "
                                 "scoring_func softmax, moe_layer_freq 1, aux_loss_alpha, seq_aux); HF loads it "
                                 "to identical logits.",
    }.get(name, spec.get("notes", name))
    notes += (" float32, eager attention, eager experts, 1 thread, CPU. Sequence logits from a single "
              "full-sequence forward without cache. Generation: greedy, %d new tokens from the first %d "
              "tokens of sequence 0 (via generate() with KV cache; equals teacher-forced argmax). "
              "Weight seed %d. Min router margin %.3e (expert top-k and group top-k boundaries, every MoE "
              "layer, every token). hidden.0.k as in make_oracle.py's fixtures."
              % (mo.GEN_NEW_TOKENS, mo.PROMPT_LEN, wseed, res["router_margin"]))
    reference = {"name": name, "versions": mo.versions(), "margin_tolerance": mo.MARGIN_TOL,
                 "sequences": seq_entries,
                 "generation": {"prompt": res["prompt"], "tokens": res["gen"]}, "notes": notes}
    with open(os.path.join(outdir, "reference.json"), "w") as f:
        f.write(mo.fmt_json(reference))
    sizes = {fn: os.path.getsize(os.path.join(outdir, fn)) for fn in sorted(os.listdir(outdir))}
    print(f"  [{name}] wrote {outdir}: " + ", ".join(f"{k} {v/1e6:.2f}MB" for k, v in sizes.items())
          + f"; smallest router margin {res['router_margin']:.4e}; {len(keys)} tensors")
