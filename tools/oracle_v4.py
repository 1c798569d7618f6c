#!/usr/bin/env python3
# oracle_v4.py -- colibri oracle fixtures for DeepSeek-V4 (transformers 5.18.0,
# DeepseekV4ForCausalLM, float32, CPU, one thread, random weights), in the
# format of tools/make_oracle.py (config.json, model.safetensors,
# reference.json, reference.safetensors with logits.<i>).
#
# Each fixture is written to disk first and the references are computed by
# the model transformers loads back from those files (from_pretrained), so
# the reference is transformers reading exactly what colibri reads:
#
#   deepseek_v4_tiny      transformers' spelling (layer_types, mlp_layer_types,
#                         compress_rates, rope_parameters {main, compress}) and
#                         its save_pretrained tensor names; 2 streams, window 8
#                         < T, CSA ratio 4 with index_topk 2 < entries, HCA
#                         ratio 8, two hash layers, sinks, clipping active
#   deepseek_v4_hc4       4 streams, yarn compress rope, o_groups 4, window 6
#   deepseek_v4_official  DeepSeek's spelling (compress_ratios 0/4/128,
#                         num_hash_layers, qk_rope_head_dim, rope_theta +
#                         compress_rope_theta + rope_scaling yarn) and the
#                         official tensor names (embed.weight, layers.N.attn.*,
#                         layers.N.ffn.experts.E.w1, hc_head_fn, ...); window
#                         128 and T = 300 > 256, so both HCA entries and many
#                         CSA entries are in play; config.hf.json is the same
#                         config in transformers' spelling (tests/cli/oracle_v4.sh
#                         runs the fixture with it too)
#
# The shared expert's SwiGLU: transformers clips it (DeepseekV4MLP), DeepSeek's
# code does not; colibri follows DeepSeek. Every fixture scales the shared
# expert so its gate/up pre-activations stay inside swiglu_limit (asserted on
# every forward), while the routed experts' are clipped (counted in the notes).
#
# Robustness: router top-k gaps (score + bias) and indexer top-k gaps among
# the visible entries must exceed 1e-4 on every forward, or the weight seed is
# bumped. Each fixture's notes give max |dlogit| with one part switched off
# (window widened, compression off, indexer selecting all, another hash
# table, sinks zero, clipping off), so each part is shown to matter.
#
# Usage: /work/venv-tf/bin/python tools/oracle_v4.py [--out tests/oracle] [--only NAME ...]

import argparse
import copy
import json
import os
import re
import shutil
import sys

import torch
import torch.nn.functional as F
import transformers
from safetensors import safe_open
from safetensors.torch import save_file
from transformers import DeepseekV4Config, DeepseekV4ForCausalLM
from transformers.models.deepseek_v4 import modeling_deepseek_v4 as mv4

torch.set_num_threads(1)
transformers.logging.set_verbosity_error()

MARGIN_TOL = 1e-4
GAP_MIN = 1e-4
GEN_NEW_TOKENS = 12
PROMPT_LEN = 8
MAX_ATTEMPTS = 40

BASE = dict(vocab_size=96, hidden_size=48, moe_intermediate_size=16, num_hidden_layers=4, num_attention_heads=4,
            head_dim=32, q_lora_rank=16, n_routed_experts=8, num_experts_per_tok=2, n_shared_experts=1,
            routed_scaling_factor=1.5, o_groups=2, o_lora_rank=16, index_n_heads=4, index_head_dim=16, index_topk=2,
            sliding_window=8, hc_mult=2, hc_sinkhorn_iters=20, hc_eps=1e-6, swiglu_limit=1.0,
            rms_norm_eps=1e-6, max_position_embeddings=4096, partial_rotary_factor=0.25,
            layer_types=["sliding_attention", "compressed_sparse_attention", "heavily_compressed_attention",
                         "compressed_sparse_attention"],
            mlp_layer_types=["hash_moe", "hash_moe", "moe", "moe"],
            compress_rates={"compressed_sparse_attention": 4, "heavily_compressed_attention": 8},
            rope_theta=10000.0, compress_rope_theta=40000.0, num_nextn_predict_layers=0)

FIXTURES = {
    "deepseek_v4_tiny": dict(seed=7000, seq_lens=(24, 48), dims={}),
    "deepseek_v4_hc4": dict(seed=7100, seq_lens=(40,), dims=dict(
        hc_mult=4, o_groups=4, sliding_window=6, hc_sinkhorn_iters=7, swiglu_limit=0.8,
        layer_types=["heavily_compressed_attention", "compressed_sparse_attention", "sliding_attention"],
        mlp_layer_types=["hash_moe", "moe", "moe"], num_hidden_layers=3, index_topk=3,
        rope_parameters=dict(rope_type="yarn", factor=4.0, original_max_position_embeddings=16, beta_fast=8.0,
                             beta_slow=1.0))),
    "deepseek_v4_official": dict(seed=7200, seq_lens=(300,), official=True, dims=dict(
        num_hidden_layers=3, sliding_window=128, index_topk=8, index_n_heads=8, vocab_size=64, hidden_size=48,
        layer_types=None, mlp_layer_types=None, compress_rates=None,
        official=dict(compress_ratios=[0, 4, 128], num_hash_layers=1, qk_rope_head_dim=8,
                      rope_scaling=dict(type="yarn", factor=8.0, original_max_position_embeddings=64,
                                        beta_fast=16, beta_slow=1)))),
}


def versions():
    import numpy
    import platform
    import safetensors
    return {"python": platform.python_version(), "torch": torch.__version__, "transformers": transformers.__version__,
            "safetensors": safetensors.__version__, "numpy": numpy.__version__}


def official_config_json(d, cfg):
    """DeepSeek's spelling of the same model."""
    o = d["official"]
    c = {k: v for k, v in d.items() if v is not None and k not in ("official", "partial_rotary_factor")}
    c.update(o)
    c.update(model_type="deepseek_v4", architectures=["DeepseekV4ForCausalLM"], torch_dtype="float32",
             scoring_func="sqrtsoftplus", hidden_act="silu", tie_word_embeddings=False, norm_topk_prob=True)
    return c


def init_weights(model, cfg, g):
    """Non-degenerate random weights: every part moves the output."""
    hid = cfg.hidden_size
    limit = cfg.swiglu_limit
    with torch.no_grad():
        for name, p in model.named_parameters():
            n = name
            if n.endswith("embed_tokens.weight"):
                p.copy_(torch.randn(p.shape, generator=g))
            elif n.endswith("norm.weight"):
                p.copy_(torch.rand(p.shape, generator=g) + 0.5)
            elif n.endswith("sinks"):
                p.copy_(torch.randn(p.shape, generator=g) * 1.5)
            elif n.endswith("position_bias"):
                p.copy_(torch.randn(p.shape, generator=g) * 0.7)
            elif n.endswith(".fn") or n.endswith("hc_fn"):
                p.copy_(torch.randn(p.shape, generator=g) / (p.shape[1] ** 0.5) * 2)
            elif n.endswith(".base") or n.endswith("hc_base"):
                p.copy_(torch.randn(p.shape, generator=g) * 0.5)
            elif n.endswith(".scale") or n.endswith("hc_scale"):
                p.copy_(torch.rand(p.shape, generator=g) + 0.5)
            elif n.endswith("experts.gate_up_proj") or n.endswith("experts.down_proj"):
                p.copy_(torch.randn(p.shape, generator=g) / (p.shape[2] ** 0.5) * 1.5)
            elif "shared_experts" in n:
                # inside the clip limit: DeepSeek and transformers agree there
                p.copy_(torch.randn(p.shape, generator=g) / (p.shape[1] ** 0.5) * 0.1 * limit)
            elif p.ndim == 2:
                p.copy_(torch.randn(p.shape, generator=g) / (p.shape[1] ** 0.5))
            elif p.ndim == 1:
                p.copy_(torch.rand(p.shape, generator=g) + 0.5)
        for mod in model.modules():
            if isinstance(mod, mv4.DeepseekV4TopKRouter):
                mod.e_score_correction_bias.copy_(torch.rand(mod.e_score_correction_bias.shape, generator=g) * 0.3)
            if isinstance(mod, mv4.DeepseekV4HashRouter):
                E, K = cfg.n_routed_experts, cfg.num_experts_per_tok
                t = torch.stack([torch.randperm(E, generator=g)[:K] for _ in range(cfg.vocab_size)])
                mod.tid2eid.copy_(t)


class Probe:
    """Router and indexer top-k gaps, shared-expert range, routed clip count."""

    def __init__(self, model, cfg):
        self.cfg = cfg
        self.hooks = []
        self.router_gap = float("inf")
        self.index_gap = float("inf")
        self.shared_max = 0.0
        self.clipped = 0
        self.total = 0
        for mod in model.modules():
            if isinstance(mod, mv4.DeepseekV4TopKRouter):
                self.hooks.append(mod.register_forward_hook(self.router))
            if isinstance(mod, mv4.DeepseekV4Indexer):
                self.hooks.append(mod.register_forward_hook(self.indexer))
                self.hooks.append(mod.scorer.register_forward_hook(self.scorer))
            if isinstance(mod, mv4.DeepseekV4MLP):
                self.hooks.append(mod.gate_proj.register_forward_hook(self.shared))
                self.hooks.append(mod.up_proj.register_forward_hook(self.shared))
            if isinstance(mod, mv4.DeepseekV4Experts):
                self.hooks.append(mod.register_forward_hook(self.experts))
        self.last_scores = None

    def router(self, mod, args, out):
        x = args[0].reshape(-1, mod.hidden_dim)
        s = mod.score_fn(F.linear(x, mod.weight)) + mod.e_score_correction_bias
        v = s.sort(dim=-1, descending=True).values
        K = mod.top_k
        if K < v.shape[1]:
            self.router_gap = min(self.router_gap, (v[:, K - 1] - v[:, K]).min().item())

    def scorer(self, mod, args, out):
        self.last_scores = out.detach()

    def indexer(self, mod, args, out):
        sc = self.last_scores[0]      # [S, T]
        pos = args[2][0]
        k = mod.index_topk
        for i in range(sc.shape[0]):
            vis = int((pos[i].item() + 1) // mod.compress_rate)
            if vis > k:
                v = sc[i, :vis].sort(descending=True).values
                self.index_gap = min(self.index_gap, (v[k - 1] - v[k]).item())

    def shared(self, mod, args, out):
        self.shared_max = max(self.shared_max, out.abs().max().item())

    def experts(self, mod, args, out):
        x, idx = args[0], args[1]
        for e in idx.unique().tolist():
            rows = (idx == e).any(-1)
            gu = F.linear(x[rows], mod.gate_up_proj[e])
            gate, up = gu.chunk(2, dim=-1)
            self.clipped += int((gate > mod.limit).sum() + (up.abs() > mod.limit).sum())
            self.total += gate.numel() + up.numel()

    def remove(self):
        for h in self.hooks:
            h.remove()


def forward(model, s):
    with torch.no_grad():
        return model(torch.tensor([s]), use_cache=False).logits[0].float().contiguous()


def greedy(model, prompt):
    seq = list(prompt)
    for _ in range(GEN_NEW_TOKENS):
        seq.append(int(forward(model, seq)[-1].argmax()))
    return seq[len(prompt):]


def top2(lg):
    v = lg.topk(2, dim=-1)[0]
    return v[:, 0] - v[:, 1]


def rename_official(k):
    """transformers' saved name -> DeepSeek's."""
    k = {"model.embed_tokens.weight": "embed.weight", "model.norm.weight": "norm.weight",
         "model.hc_head.hc_fn": "hc_head_fn", "model.hc_head.hc_base": "hc_head_base",
         "model.hc_head.hc_scale": "hc_head_scale"}.get(k, k)
    if k.startswith("model.layers."):
        k = k[len("model."):]
    return re.sub(r"\.attn\.norm\.weight$", ".attn.kv_norm.weight", k)


def write_model(model, cfg, spec, d, outdir):
    model.save_pretrained(outdir)
    for extra in ("generation_config.json",):
        p = os.path.join(outdir, extra)
        if os.path.exists(p):
            os.remove(p)
    if spec.get("official"):
        st = os.path.join(outdir, "model.safetensors")
        with safe_open(st, "pt") as f:
            sd = {rename_official(k): f.get_tensor(k) for k in f.keys()}
        save_file(sd, st, metadata={"format": "pt"})
        # transformers' spelling of the same config, for the test that both parse alike
        shutil.copy(os.path.join(outdir, "config.json"), os.path.join(outdir, "config.hf.json"))
        with open(os.path.join(outdir, "config.json"), "w") as f:
            json.dump(dict(sorted(official_config_json(d, cfg).items())), f, indent=2)


def load(outdir):
    m = DeepseekV4ForCausalLM.from_pretrained(outdir, dtype=torch.float32)
    m.eval()
    m.config._attn_implementation = "eager"
    return m


def variant_logits(model, cfg_change, seqs, sd_change=None):
    cfg = copy.deepcopy(model.config)
    for k, v in cfg_change.items():
        setattr(cfg, k, v)
    m2 = DeepseekV4ForCausalLM(cfg)
    sd = model.state_dict()
    if sd_change:
        sd = sd_change(dict(sd))
    m2.load_state_dict(sd, strict=False)
    m2.eval()
    return [forward(m2, s) for s in seqs]


def part_deltas(model, seqs, ref):
    cfg = model.config
    out = {}

    def delta(lgs):
        return max((a - b).abs().max().item() for a, b in zip(lgs, ref))

    out["window_widened_to_T"] = delta(variant_logits(model, dict(sliding_window=4096), seqs))
    out["compression_off_all_sliding"] = delta(variant_logits(
        model, dict(layer_types=["sliding_attention"] * cfg.num_hidden_layers), seqs))
    if "compressed_sparse_attention" in cfg.layer_types:
        out["indexer_selects_all"] = delta(variant_logits(model, dict(index_topk=4096), seqs))
    g = torch.Generator().manual_seed(1)

    def other_table(sd):
        for k in list(sd):
            if k.endswith("tid2eid"):
                E = cfg.n_routed_experts
                sd[k] = torch.stack([torch.randperm(E, generator=g)[:cfg.num_experts_per_tok]
                                     for _ in range(cfg.vocab_size)])
        return sd

    if "hash_moe" in cfg.mlp_layer_types:
        out["hash_table_redrawn"] = delta(variant_logits(model, {}, seqs, other_table))

    def no_sinks(sd):
        for k in list(sd):
            if k.endswith("sinks"):
                sd[k] = torch.full_like(sd[k], -1e30)
        return sd

    out["sinks_off"] = delta(variant_logits(model, {}, seqs, no_sinks))
    out["clipping_off"] = delta(variant_logits(model, dict(swiglu_limit=1e30), seqs))
    return out


def fmt_json(obj):
    s = json.dumps(obj, indent=1, ensure_ascii=True)
    return re.sub(r"\[\s*([-+0-9.eE,\s]+?)\s*\]", lambda m: "[" + ", ".join(x.strip() for x in m.group(1).split(","))
                  + "]", s) + "\n"


def make_fixture(name, spec, outroot):
    d = dict(BASE)
    d.update(spec["dims"])
    outdir = os.path.join(outroot, name)
    if os.path.isdir(outdir):
        shutil.rmtree(outdir)
    os.makedirs(outdir)
    cfg = d_for_hf(d)
    g = torch.Generator().manual_seed(spec["seed"])
    seqs = [torch.randint(0, d["vocab_size"], (n,), generator=g).tolist() for n in spec["seq_lens"]]
    for attempt in range(MAX_ATTEMPTS):
        wseed = spec["seed"] + 1 + attempt
        torch.manual_seed(wseed)
        model = DeepseekV4ForCausalLM(cfg)
        init_weights(model, cfg, torch.Generator().manual_seed(wseed))
        write_model(model, cfg, spec, d, outdir)
        model = load(outdir)
        probe = Probe(model, model.config)
        try:
            logits = [forward(model, s) for s in seqs]
            prompt = seqs[0][:PROMPT_LEN]
            gen = greedy(model, prompt)
            tf = forward(model, prompt + gen)
        finally:
            probe.remove()
        gen_margin = top2(tf[PROMPT_LEN - 1:-1]).min().item()
        ok = (probe.router_gap > GAP_MIN and probe.index_gap > GAP_MIN and gen_margin > 10 * MARGIN_TOL
              and probe.shared_max < model.config.swiglu_limit and probe.clipped > 0)
        print(f"  [{name}] seed {wseed}: router gap {probe.router_gap:.2e}, indexer gap {probe.index_gap:.2e}, "
              f"gen margin {gen_margin:.2e}, shared max {probe.shared_max:.3f}, routed clipped "
              f"{probe.clipped}/{probe.total} -> {'ok' if ok else 'retry'}", flush=True)
        if ok:
            break
    else:
        raise SystemExit(f"{name}: no seed with sufficient margins")
    # the official spelling loads to the same model as the one built in transformers' spelling
    if spec.get("official"):
        ref_model = DeepseekV4ForCausalLM(cfg)
        init_weights(ref_model, cfg, torch.Generator().manual_seed(wseed))
        ref_model.eval()
        assert torch.equal(forward(ref_model, seqs[0]), logits[0]), "official spelling loads another model"
    deltas = part_deltas(model, seqs, logits)
    save_file({f"logits.{i}": lg for i, lg in enumerate(logits)}, os.path.join(outdir, "reference.safetensors"),
              metadata={"format": "pt"})
    ref = {
        "name": name,
        "versions": versions(),
        "margin_tolerance": MARGIN_TOL,
        "sequences": [{"tokens": s, "argmax": lg.argmax(-1).tolist(), "top2_margin": top2(lg).tolist()}
                      for s, lg in zip(seqs, logits)],
        "generation": {"prompt": prompt, "tokens": gen},
        "notes": {
            "generator": "tools/oracle_v4.py (DeepseekV4ForCausalLM.from_pretrained of these files, float32, "
                         "use_cache=False, eager)",
            "min_router_gap": probe.router_gap, "min_indexer_gap": probe.index_gap,
            "shared_expert_max_abs_preact": probe.shared_max, "swiglu_limit": model.config.swiglu_limit,
            "routed_preacts_clipped": f"{probe.clipped}/{probe.total}",
            "max_abs_dlogit_with_part_off": deltas,
        },
    }
    with open(os.path.join(outdir, "reference.json"), "w") as f:
        f.write(fmt_json(ref))
    print(f"  [{name}] part deltas: {deltas}")


def d_for_hf(d):
    """The transformers-spelling dims of a fixture (the official one folded)."""
    h = {k: v for k, v in d.items() if v is not None and k != "official"}
    o = d.get("official")
    if o:
        h["layer_types"] = [{0: "sliding_attention", 4: "compressed_sparse_attention",
                             128: "heavily_compressed_attention"}[r] for r in o["compress_ratios"]]
        h["mlp_layer_types"] = ["hash_moe"] * o["num_hash_layers"] + ["moe"] * (
            d["num_hidden_layers"] - o["num_hash_layers"])
        h["compress_rates"] = {"compressed_sparse_attention": 4, "heavily_compressed_attention": 128}
        h["partial_rotary_factor"] = o["qk_rope_head_dim"] / d["head_dim"]
        ys = dict(o["rope_scaling"])
        ys["rope_type"] = ys.pop("type")
        h["rope_parameters"] = ys
    return DeepseekV4Config(**h)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--out", default="tests/oracle")
    p.add_argument("--only", nargs="*", choices=sorted(FIXTURES))
    a = p.parse_args()
    for name in a.only or sorted(FIXTURES):
        make_fixture(name, FIXTURES[name], a.out)


if __name__ == "__main__":
    main()
