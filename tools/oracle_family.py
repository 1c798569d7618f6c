#!/usr/bin/env python3
# oracle_family.py -- the fixtures of the DeepSeek-V3 family's 2026 members and
# of the yarn / shared-expert fields older fixtures leave at their defaults,
# built by tools/make_oracle.py (`--only NAME ...`, builder "oracle_family")
# with each family's own transformers class. Same files, robustness rules and
# reference format as make_oracle.py's fixtures (see its header), smaller
# models (hundreds of KB); every fixture is a difference that changes the
# logits:
#
#   mistral4_tiny        Mistral4ForCausalLM: rope_interleave false (half-split
#                        RoPE), the Llama-4 query scale (llama_4_scaling_beta
#                        0.1 over original_max_position_embeddings 16: positions
#                        16.. of the 90-token sequence scale the query), the
#                        softmax router with top-2-sum groups (n_group 2 /
#                        topk_group 1), norm_topk_prob, fused expert tensors
#                        (transformers saves mistral4's experts as
#                        mlp.experts.gate_up_proj / down_proj).
#   mistral4_ilv_tiny    Mistral4ForCausalLM, the other choices: interleaved RoPE,
#                        one group, norm_topk_prob false, per-expert tensors.
#   glm4_moe_lite_tiny   Glm4MoeLiteForCausalLM: mlp_layer_types dense, sparse,
#                        dense, sparse (a dense layer between MoE layers),
#                        sigmoid router with correction bias, rms_norm_eps 1e-5.
#   kimi_k25_tiny        Kimi_K25ForConditionalGeneration: text_config
#                        model_type kimi_k2 (a DeepSeek-V3 text model), a tiny
#                        vision tower and projector whose tensors are in the
#                        file; the text tensors under language_model.model.* and
#                        language_model.lm_head.weight (the names the published
#                        checkpoints use; transformers renames them on load).
#   yarn_notrunc_tiny    DeepseekV3: rope_parameters.truncate false, the
#                        correction range 1.31..2.81 (rounded: 1..3).
#   yarn_attnfactor_tiny DeepseekV3: rope_parameters.attention_factor 1.3.
#   v3_noshared_tiny     DeepseekV3: n_shared_experts 0 (transformers saves
#                        zero-element shared-expert tensors).
#
# Router margins: every MoE layer's router input is recorded and the margins
# at the group top-k and expert top-k boundaries recomputed with the router's
# own arithmetic (sigmoid + bias with top-2-sum groups; Mistral 4's softmax
# with top-2-sum groups); seeds are retried until every margin is > 1e-4.

import json
import math
import os
import shutil

TINY = dict(
    vocab_size=128, hidden_size=64, intermediate_size=96, moe_intermediate_size=16,
    num_hidden_layers=3, num_attention_heads=2, num_key_value_heads=2,
    q_lora_rank=32, kv_lora_rank=16, qk_nope_head_dim=16, qk_rope_head_dim=8, v_head_dim=12,
    n_routed_experts=8, n_group=2, topk_group=1, num_experts_per_tok=2, n_shared_experts=1,
    max_position_embeddings=256, tie_word_embeddings=False, attention_bias=False, hidden_act="silu",
    bos_token_id=None, eos_token_id=None, pad_token_id=None,
)
V3_YARN = {"rope_type": "yarn", "rope_theta": 10000.0, "factor": 4.0, "original_max_position_embeddings": 32,
           "beta_fast": 32.0, "beta_slow": 1.0, "mscale": 1.0, "mscale_all_dim": 1.0}


def _v3(**kw):
    d = dict(TINY, first_k_dense_replace=1, routed_scaling_factor=2.5, norm_topk_prob=True, rms_norm_eps=1e-6,
             rope_interleave=True, num_nextn_predict_layers=0, rope_parameters=dict(V3_YARN))
    for k, v in kw.items():
        if k == "rope":
            d["rope_parameters"].update(v)
        else:
            d[k] = v
    return d


FIXTURES = {
    "mistral4_tiny": dict(seed=7100, cls="Mistral4ForCausalLM", cfg="Mistral4Config", router="softmax_top2",
                          kw=dict(TINY, first_k_dense_replace=1, routed_scaling_factor=1.5, norm_topk_prob=True,
                                  rms_norm_eps=1e-6, rope_interleave=False,
                                  rope_parameters={"type": "yarn", "rope_theta": 10000.0, "factor": 4.0,
                                                   "original_max_position_embeddings": 16,
                                                   "max_position_embeddings": 256, "beta_fast": 32.0,
                                                   "beta_slow": 1.0, "mscale": 1.0, "mscale_all_dim": 1.0,
                                                   "llama_4_scaling_beta": 0.1})),
    "mistral4_ilv_tiny": dict(seed=7700, cls="Mistral4ForCausalLM", cfg="Mistral4Config", router="softmax_top2",
                              per_expert=True,
                              kw=dict(TINY, first_k_dense_replace=0, n_group=1, topk_group=1,
                                      routed_scaling_factor=1.0, norm_topk_prob=False, rms_norm_eps=1e-6,
                                      rope_interleave=True,
                                      rope_parameters={"type": "yarn", "rope_theta": 10000.0, "factor": 4.0,
                                                       "original_max_position_embeddings": 32,
                                                       "max_position_embeddings": 256, "beta_fast": 32.0,
                                                       "beta_slow": 1.0, "mscale": 1.0, "mscale_all_dim": 1.0,
                                                       "llama_4_scaling_beta": 0.2})),
    "glm4_moe_lite_tiny": dict(seed=7200, cls="Glm4MoeLiteForCausalLM", cfg="Glm4MoeLiteConfig", router="sigmoid",
                               kw=dict(TINY, num_hidden_layers=4, mlp_layer_types=["dense", "sparse", "dense", "sparse"],
                                       routed_scaling_factor=1.8, norm_topk_prob=True, rms_norm_eps=1e-5,
                                       rope_interleave=True,
                                       rope_parameters={"rope_type": "default", "rope_theta": 10000.0})),
    "kimi_k25_tiny": dict(seed=7300, cls="Kimi_K25ForConditionalGeneration", cfg="Kimi_K25Config", router="sigmoid",
                          kw=dict(text_config=dict(_v3(n_group=1, topk_group=1, routed_scaling_factor=2.827,
                                                       rope=dict(rope_theta=50000.0, beta_fast=1.0, beta_slow=1.0)),
                                                   model_type="kimi_k2"),
                                  vision_config=dict(patch_size=4, pos_emb_height=4, pos_emb_width=4, pos_emb_time=2,
                                                     num_attention_heads=2, num_hidden_layers=1, hidden_size=16,
                                                     intermediate_size=32),
                                  projection_hidden_size=16, tie_word_embeddings=False,
                                  image_token_id=120, video_token_id=121, vision_start_token_id=122,
                                  vision_end_token_id=123)),
    "yarn_notrunc_tiny": dict(seed=7400, cls="DeepseekV3ForCausalLM", cfg="DeepseekV3Config", router="sigmoid",
                              kw=_v3(max_position_embeddings=16384,
                                     rope=dict(truncate=False, original_max_position_embeddings=4096))),
    "yarn_attnfactor_tiny": dict(seed=7500, cls="DeepseekV3ForCausalLM", cfg="DeepseekV3Config", router="sigmoid",
                                 kw=_v3(rope=dict(attention_factor=1.3))),
    "v3_noshared_tiny": dict(seed=7600, cls="DeepseekV3ForCausalLM", cfg="DeepseekV3Config", router="sigmoid",
                             kw=_v3(n_shared_experts=0)),
}


def build(mo, spec):
    import transformers
    cfg = getattr(transformers, spec["cfg"])(**json.loads(json.dumps(spec["kw"])))
    return cfg


def new_model(mo, spec, cfg):
    import transformers
    m = getattr(transformers, spec["cls"])._from_config(cfg, attn_implementation="eager",
                                                         experts_implementation="eager", dtype=mo.torch.float32)
    return m.eval()


def load_model(mo, spec, path):
    import transformers
    m = getattr(transformers, spec["cls"]).from_pretrained(path, attn_implementation="eager",
                                                           experts_implementation="eager", dtype=mo.torch.float32)
    return m.eval()


def init_weights(mo, model, seed):
    """make_oracle.init_weights' scheme, by module kind (class-name suffix)."""
    torch = mo.torch
    torch.manual_seed(seed)
    with torch.no_grad():
        for name, mod in model.named_modules():
            kind = type(mod).__name__
            if any(p.numel() == 0 for p in mod.parameters(recurse=False)):
                continue    # a part sized to nothing (n_shared_experts 0)
            if isinstance(mod, torch.nn.Embedding):
                mod.weight.copy_(torch.randn(mod.weight.shape))
            elif isinstance(mod, torch.nn.Linear):
                mod.weight.copy_(torch.randn(mod.weight.shape) * mod.weight.shape[1] ** -0.5)
                if mod.bias is not None:
                    mod.bias.copy_(torch.randn(mod.bias.shape) * 0.02)
            elif kind.endswith("RMSNorm"):
                mod.weight.copy_(torch.rand(mod.weight.shape) + 0.5)
            elif kind.endswith("TopkRouter"):
                mod.weight.copy_(torch.randn(mod.weight.shape) * mod.weight.shape[1] ** -0.5)
                if hasattr(mod, "e_score_correction_bias"):
                    mod.e_score_correction_bias.copy_(torch.rand(mod.e_score_correction_bias.shape) * 0.3)
            elif kind.endswith("Experts") and hasattr(mod, "gate_up_proj"):
                gu, dn = mod.gate_up_proj, mod.down_proj
                gu.copy_(torch.randn(gu.shape) * gu.shape[2] ** -0.5)
                dn.copy_(torch.randn(dn.shape) * dn.shape[2] ** -0.5)


class RouterProbe:
    """Records each router's input; min_margin() recomputes its f32 routing."""

    def __init__(self, mo, model, kind):
        self.mo, self.kind, self.inputs, self.handles = mo, kind, [], []
        for _, mod in model.named_modules():
            if type(mod).__name__.endswith("TopkRouter"):
                self.handles.append(mod.register_forward_hook(self._hook))
        assert self.handles, "no router found"

    def _hook(self, mod, args, out):
        self.inputs.append((mod, args[0].detach().clone()))

    def remove(self):
        for h in self.handles:
            h.remove()

    def min_margin(self):
        torch, F = self.mo.torch, self.mo.F
        best = math.inf
        for mod, x in self.inputs:
            x = x.reshape(-1, mod.weight.shape[1])
            lg = F.linear(x.float(), mod.weight.float())
            E = mod.weight.shape[0]
            G, kg, k = mod.n_group if hasattr(mod, "n_group") else mod.num_group, mod.topk_group, mod.top_k
            if self.kind == "sigmoid":
                s = lg.sigmoid() + mod.e_score_correction_bias
            else:
                s = lg.softmax(-1)
            gs = s.view(-1, G, E // G).topk(2, dim=-1)[0].sum(-1)
            if kg < G:
                srt = gs.sort(dim=-1, descending=True)[0]
                best = min(best, (srt[:, kg - 1] - srt[:, kg]).min().item())
            gidx = gs.topk(kg, dim=-1)[1]
            gmask = torch.zeros_like(gs).scatter_(1, gidx, 1)
            emask = gmask.unsqueeze(-1).expand(-1, G, E // G).reshape(-1, E).bool()
            srt = s.masked_fill(~emask, float("-inf")).sort(dim=-1, descending=True)[0]
            best = min(best, (srt[:, k - 1] - srt[:, k]).min().item())
        return best


def evaluate(mo, model, seqs, kind):
    torch = mo.torch
    probe = RouterProbe(mo, model, kind)
    try:
        with torch.no_grad():
            logits = [model(torch.tensor([s]), use_cache=False).logits[0].float().contiguous() for s in seqs]
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
    assert tf_arg[mo.PROMPT_LEN - 1:-1] == gen, ("generate != teacher-forced argmax", gen, tf_arg)
    gen_margin = mo.top2(tf[mo.PROMPT_LEN - 1:-1]).min().item()
    return dict(logits=logits, gen=gen, prompt=prompt, router_margin=router_margin, gen_margin=gen_margin)


def rename_kimi(mo, stpath):
    """The published Kimi K2.5 names: save_pretrained reverts transformers'
    load-time renames, but also turns the language model's "layers" into
    "blocks" (the vision tower's rename applied backwards) and leaves the
    projector's pre_norm under "model."; the reload check below shows that
    transformers loads these names to the same logits."""
    sd = mo.read_safetensors(stpath)
    out = {}
    for k, t in sd.items():
        for a, b in (("model.language_model.", "language_model.model."), ("lm_head.", "language_model.lm_head."),
                     ("language_model.model.blocks.", "language_model.model.layers."),
                     ("model.mm_projector.", "mm_projector.")):
            if k.startswith(a):
                k = b + k[len(a):]
        assert k not in out, k
        out[k] = t.contiguous()
    mo.save_file(out, stpath, metadata={"format": "pt"})


def split_experts(mo, stpath, inter):
    """Fused experts -> per-expert tensors (mlp.experts.E.{gate,up,down}_proj.weight): gate rows first."""
    sd = mo.read_safetensors(stpath)
    out = {}
    for k, t in sd.items():
        if k.endswith("mlp.experts.gate_up_proj"):
            pre = k[:-len("gate_up_proj")]
            for e in range(t.shape[0]):
                out[f"{pre}{e}.gate_proj.weight"] = t[e, :inter].contiguous()
                out[f"{pre}{e}.up_proj.weight"] = t[e, inter:].contiguous()
        elif k.endswith("mlp.experts.down_proj"):
            pre = k[:-len("down_proj")]
            for e in range(t.shape[0]):
                out[f"{pre}{e}.down_proj.weight"] = t[e].contiguous()
        else:
            out[k] = t.contiguous()
    mo.save_file(out, stpath, metadata={"format": "pt"})


NOTES = {
    "mistral4_ilv_tiny": "Mistral Small 4 style (Mistral4ForCausalLM) with the other choices: rope_interleave true, "
                         "llama_4_scaling_beta 0.2 over original_max_position_embeddings 32, one expert group "
                         "(plain softmax top-2 of 8), norm_topk_prob false, routed_scaling_factor 1, every layer MoE "
                         "(first_k_dense_replace 0); the experts written per expert "
                         "(mlp.experts.E.{gate,up,down}_proj.weight, split from the fused tensors transformers "
                         "saved and reloaded to identical logits; transformers has no per-expert conversion for "
                         "mistral4, so these files are colibri's test of that layout).",
    "mistral4_tiny": "Mistral Small 4 style (Mistral4ForCausalLM): rope_interleave false (half-split RoPE, "
                     "rotate_half), llama_4_scaling_beta 0.1 with original_max_position_embeddings 16 (the query "
                     "times 1 + 0.1 log(1 + floor(pos / 16))), yarn factor 4, softmax router with top-2-sum groups "
                     "(n_group 2, topk_group 1, top-2 of 8), norm_topk_prob, routed_scaling_factor 1.5, 1 shared "
                     "expert, fused expert tensors (mlp.experts.gate_up_proj [E, 2I, H], down_proj [E, H, I]).",
    "glm4_moe_lite_tiny": "GLM-4.7-Flash style (Glm4MoeLiteForCausalLM): mlp_layer_types dense, sparse, dense, "
                          "sparse; sigmoid router with correction bias (n_group 2 / topk_group 1), routed scaling "
                          "1.8, rms_norm_eps 1e-5, default RoPE.",
    "kimi_k25_tiny": "Kimi K2.5 style (Kimi_K25ForConditionalGeneration): text_config model_type kimi_k2 "
                     "(DeepSeek-V3 text model: one group, rope_theta 50000, beta_fast = beta_slow = 1, routed "
                     "scaling 2.827), a one-layer vision tower and projector in the file (vision_tower.*, "
                     "mm_projector.*), the language model under language_model.model.* and "
                     "language_model.lm_head.weight (the published names; transformers renames them on load, "
                     "checked to reload to identical logits). Text-only inputs.",
    "yarn_notrunc_tiny": "DeepSeek-V3 tiny with rope_parameters.truncate false (yarn's correction range not "
                         "rounded: original_max_position_embeddings 4096 puts it at 1.31..2.81 of the 4 frequencies, "
                         "rounded 1..3).",
    "yarn_attnfactor_tiny": "DeepSeek-V3 tiny with rope_parameters.attention_factor 1.3 (cos and sin times 1.3 "
                            "instead of the mscale ratio; the softmax scale still takes mscale_all_dim).",
    "v3_noshared_tiny": "DeepSeek-V3 tiny with n_shared_experts 0: transformers saves the shared experts as "
                        "zero-element tensors ([0, 64], [64, 0]).",
}


def make_fixture(name, spec, outroot, mo):
    torch = mo.torch
    spec = FIXTURES[name]
    cfg = build(mo, spec)
    text = cfg.get_text_config()
    V = text.vocab_size
    outdir = os.path.join(outroot, name)
    if os.path.isdir(outdir):
        shutil.rmtree(outdir)
    os.makedirs(outdir)
    g = torch.Generator().manual_seed(spec["seed"])
    seqs = [torch.randint(0, 120, (n,), generator=g).tolist() for n in mo.SEQ_LENS]
    for attempt in range(mo.MAX_ATTEMPTS):
        wseed = spec["seed"] + 1 + attempt
        torch.manual_seed(wseed)
        model = new_model(mo, spec, cfg)
        init_weights(mo, model, wseed)
        res = evaluate(mo, model, seqs, spec["router"])
        ok = res["router_margin"] > mo.ROUTER_MARGIN_MIN and res["gen_margin"] > 10 * mo.MARGIN_TOL
        print(f"  [{name}] weight seed {wseed}: min router margin {res['router_margin']:.3e}, "
              f"min generation top2 margin {res['gen_margin']:.3e} -> {'ok' if ok else 'retry'}")
        if ok:
            break
    else:
        raise SystemExit(f"{name}: no seed with sufficient margins")

    model.save_pretrained(outdir)
    for extra in ("generation_config.json",):
        p = os.path.join(outdir, extra)
        if os.path.exists(p):
            os.remove(p)
    cpath = os.path.join(outdir, "config.json")
    stpath = os.path.join(outdir, "model.safetensors")
    mo.patch_config(cpath)
    wsd = mo.read_safetensors(stpath)
    if name == "kimi_k25_tiny":
        rename_kimi(mo, stpath)
        wsd = mo.read_safetensors(stpath)
        assert all(k.startswith(("language_model.model.layers.", "vision_tower.", "mm_projector.")) or
                   k in ("language_model.model.embed_tokens.weight", "language_model.model.norm.weight",
                         "language_model.lm_head.weight") for k in wsd), sorted(wsd)
        assert "language_model.lm_head.weight" in wsd and "language_model.model.embed_tokens.weight" in wsd
        assert any(k.startswith("vision_tower.") for k in wsd) and any(k.startswith("mm_projector.") for k in wsd), \
            sorted(wsd)[:8]
        # Kimi_K25Config reads text_config.model_type kimi_k2 as deepseek_v3 and
        # saves the latter; the published configs say kimi_k2
        with open(cpath) as f:
            c = json.load(f)
        assert c["text_config"]["model_type"] == "deepseek_v3"
        c["text_config"]["model_type"] = "kimi_k2"
        with open(cpath, "w") as f:
            json.dump(dict(sorted(c.items())), f, indent=2)
            f.write("\n")
    if name == "mistral4_tiny":
        assert "model.layers.1.mlp.experts.gate_up_proj" in wsd, "mistral4 experts not fused"
    if spec.get("per_expert"):
        # reload check first (transformers reads mistral4's fused tensors only), then the per-expert names
        m2 = load_model(mo, spec, outdir)
        with torch.no_grad():
            for i, s in enumerate(seqs):
                assert torch.equal(m2(torch.tensor([s]), use_cache=False).logits[0], res["logits"][i])
        del m2
        split_experts(mo, stpath, spec["kw"]["moe_intermediate_size"])
        wsd = mo.read_safetensors(stpath)
        assert not any("gate_up_proj" in k for k in wsd) and "model.layers.0.mlp.experts.7.down_proj.weight" in wsd
    if name == "v3_noshared_tiny":
        z = [k for k, t in wsd.items() if t.numel() == 0]
        assert z and all("shared_experts" in k for k in z), z
    with open(cpath) as f:
        c = json.load(f)
    rp = c.get("text_config", c).get("rope_parameters", {})
    if name == "yarn_notrunc_tiny":
        assert rp.get("truncate") is False, rp
    if name == "yarn_attnfactor_tiny":
        assert rp.get("attention_factor") == 1.3, rp

    # the files on disk reproduce the logits bit-exactly
    m2 = load_model(mo, spec, outdir) if not spec.get("per_expert") else None
    with torch.no_grad():
        for i, s in enumerate(seqs if m2 is not None else []):
            l2 = m2(torch.tensor([s]), use_cache=False).logits[0]
            assert torch.equal(l2, res["logits"][i]), f"{name}: reload mismatch on seq {i}"
    del m2

    ref = {f"logits.{i}": lg.contiguous() for i, lg in enumerate(res["logits"])}
    assert all(lg.shape[1] == V for lg in res["logits"])
    mo.save_file(ref, os.path.join(outdir, "reference.safetensors"))
    seq_entries = [{"tokens": s, "argmax": lg.argmax(-1).tolist(),
                    "top2_margin": [float(x) for x in mo.top2(lg).tolist()]}
                   for s, lg in zip(seqs, res["logits"])]
    notes = NOTES[name] + (
        " float32, eager attention, eager experts, 1 thread, CPU. Sequence logits from a single full-sequence "
        "forward without cache. Generation: greedy, %d new tokens from the first %d tokens of sequence 0 (via "
        "generate() with KV cache; equals teacher-forced argmax). Weight seed %d. Min router margin %.3e "
        "(group and expert top-k boundaries, every MoE layer, every token). Written by tools/oracle_family.py."
        % (mo.GEN_NEW_TOKENS, mo.PROMPT_LEN, wseed, res["router_margin"]))
    reference = {"name": name, "versions": mo.versions(), "margin_tolerance": mo.MARGIN_TOL,
                 "sequences": seq_entries, "generation": {"prompt": res["prompt"], "tokens": res["gen"]},
                 "notes": notes}
    with open(os.path.join(outdir, "reference.json"), "w") as f:
        f.write(mo.fmt_json(reference))
    sizes = {fn: os.path.getsize(os.path.join(outdir, fn)) for fn in sorted(os.listdir(outdir))}
    print(f"  [{name}] wrote {outdir}: " + ", ".join(f"{k} {v/1e3:.0f}KB" for k, v in sizes.items())
          + f"; {len(wsd)} tensors")
