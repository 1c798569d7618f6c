# oracle_dsa.py -- the DeepSeek Sparse Attention fixtures of make_oracle.py.
#
# Tiny random DeepSeek-V3.2 (model_type deepseek_v32, DeepseekV32ForCausalLM)
# and GLM-5 (glm_moe_dsa, GlmMoeDsaForCausalLM) models, run by transformers as
# the other fixtures are (float32, eager attention and experts, one thread) and
# written in the same layout (config.json, model.safetensors, reference.json,
# reference.safetensors; see make_oracle.py). Registered in make_oracle.py
# (builder "oracle_dsa"); run with `python3 tools/make_oracle.py --only
# deepseek_v32_tiny deepseek_v32_dense_tiny glm5_tiny` (the dense control
# reuses deepseek_v32_tiny's weight seed, so it comes after it).
#
#   deepseek_v32_tiny        index_topk 16 < every sequence (24, 48, 90) and
#                            prompt + generation (28): the selection changes
#                            the output; yarn RoPE, half-split indexer RoPE
#   deepseek_v32_dense_tiny  the same weights and sequences with index_topk 256
#                            >= T: every causal row is selected (the dense
#                            control); its notes give max |logit difference|
#                            against deepseek_v32_tiny, which must exceed 1
#   glm5_tiny                indexer_types full/shared/shared/full (shared
#                            layers reuse the last full layer's top-k),
#                            interleaved indexer RoPE, default RoPE (theta
#                            1e6), one expert group, rms eps 1e-5 (latent
#                            norms 1e-6), dn != dv
#
# Margins: besides the router margins, every full indexer's top-k boundary must
# have a relative gap (s_k - s_k+1) / max(|s_k|, |s_k+1|) > 1e-4 on every
# query row that has more causal keys than index_topk, over every sequence and
# prompt + generation; otherwise the weight seed is bumped. The scores are
# recomputed from the indexer's inputs and checked to give the module's own
# selection.

import json
import math
import os
import shutil
import tempfile

INDEX_MARGIN_MIN = 1e-4
DENSE_CONTROL_MIN_DIFF = 1.0


DSA_BASE = dict(
    vocab_size=512, hidden_size=128, intermediate_size=256, moe_intermediate_size=64,
    num_hidden_layers=4, first_k_dense_replace=1, num_attention_heads=4, num_key_value_heads=4,
    q_lora_rank=64, kv_lora_rank=32, qk_nope_head_dim=32, qk_rope_head_dim=16, v_head_dim=24,
    n_routed_experts=16, n_group=4, topk_group=2, num_experts_per_tok=4, n_shared_experts=1,
    routed_scaling_factor=2.5, norm_topk_prob=True, max_position_embeddings=256,
    rms_norm_eps=1e-6, tie_word_embeddings=False,
    index_n_heads=8, index_head_dim=32, index_topk=16,
)

V32_ROPE = {"rope_type": "yarn", "rope_theta": 10000.0, "factor": 4.0,
            "original_max_position_embeddings": 64, "beta_fast": 32.0, "beta_slow": 1.0,
            "mscale": 1.0, "mscale_all_dim": 1.0}


def _dims(**kw):
    d = dict(DSA_BASE)
    d.update(kw)
    return d


FIXTURES = {
    "deepseek_v32_tiny": dict(seed=5000, arch="v32", dims=_dims(), rope=V32_ROPE),
    "deepseek_v32_dense_tiny": dict(seed=5000, arch="v32", dims=_dims(index_topk=256), rope=V32_ROPE,
                                    control_of="deepseek_v32_tiny"),
    "glm5_tiny": dict(seed=6000, arch="glm5",
                      dims=_dims(n_group=1, topk_group=1, rms_norm_eps=1e-5, qk_nope_head_dim=40,
                                 v_head_dim=48, routed_scaling_factor=2.5,
                                 indexer_types=["full", "shared", "shared", "full"]),
                      rope={"rope_type": "default", "rope_theta": 1000000.0}),
}


def _classes(arch):
    if arch == "v32":
        from transformers import DeepseekV32Config as C, DeepseekV32ForCausalLM as M
        from transformers.models.deepseek_v32 import modeling_deepseek_v32 as mm
        return C, M, mm.DeepseekV32RMSNorm, mm.DeepseekV32TopkRouter, mm.DeepseekV32Experts, mm.DeepseekV32Indexer
    from transformers import GlmMoeDsaConfig as C, GlmMoeDsaForCausalLM as M
    from transformers.models.glm_moe_dsa import modeling_glm_moe_dsa as mm
    return C, M, mm.GlmMoeDsaRMSNorm, mm.GlmMoeDsaTopkRouter, mm.GlmMoeDsaExperts, mm.GlmMoeDsaIndexer


def _config(spec):
    d = spec["dims"]
    C = _classes(spec["arch"])[0]
    kw = {k: v for k, v in d.items() if k != "indexer_types"}
    if "indexer_types" in d:
        kw["indexer_types"] = list(d["indexer_types"])
    return C(**kw, rope_parameters=dict(spec["rope"]), num_nextn_predict_layers=0,
             attention_bias=False, hidden_act="silu", bos_token_id=0, eos_token_id=1)


def _init_weights(model, seed, arch):
    """make_oracle's re-initialisation, plus the indexer's LayerNorm (weight U[0.5,1.5], bias N(0,0.1))."""
    import torch
    _, _, RMSNorm, Router, Experts, _ = _classes(arch)
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
            elif isinstance(mod, torch.nn.LayerNorm):
                mod.weight.copy_(torch.rand(mod.weight.shape) + 0.5)
                mod.bias.copy_(torch.randn(mod.bias.shape) * 0.1)
            elif isinstance(mod, RMSNorm):
                mod.weight.copy_(torch.rand(mod.weight.shape) + 0.5)
            elif isinstance(mod, Router):
                mod.weight.copy_(torch.randn(mod.weight.shape) * mod.weight.shape[1] ** -0.5)
                mod.e_score_correction_bias.copy_(torch.rand(mod.e_score_correction_bias.shape) * 0.3)
            elif isinstance(mod, Experts):
                gu, dn = mod.gate_up_proj, mod.down_proj
                gu.copy_(torch.randn(gu.shape) * gu.shape[2] ** -0.5)
                dn.copy_(torch.randn(dn.shape) * dn.shape[2] ** -0.5)


class IndexProbe:
    """Records every indexer call and measures its top-k boundary gap."""

    def __init__(self, model, indexer_cls, arch):
        import torch
        self.torch = torch
        self.arch = arch
        self.calls = []
        self.handles = [m.register_forward_hook(self._hook, with_kwargs=True)
                        for m in model.modules() if isinstance(m, indexer_cls)]

    def _hook(self, mod, args, kwargs, out):
        a = list(args) + [kwargs.get(k) for k in ("hidden_states", "q_resid", "position_embeddings",
                                                 "attention_mask") if k in kwargs]
        hs, qr, (cos, sin), mask = a[0], a[1], a[2], a[3]
        keys = kwargs.get("past_key_values")
        if keys is not None:
            kall = keys.layers[mod.layer_idx].indexer_keys
        else:
            kall = None
        self.calls.append((mod, hs.detach().clone(), qr.detach().clone(), cos.detach().clone(),
                           sin.detach().clone(), mask.detach().clone(),
                           None if kall is None else kall.detach().clone(), out.detach().clone()))

    def remove(self):
        for h in self.handles:
            h.remove()

    def _rope(self, x, cos, sin):
        torch = self.torch
        cos, sin = cos.unsqueeze(2), sin.unsqueeze(2)
        if self.arch == "v32":
            h = x.shape[-1] // 2
            rot = torch.cat((-x[..., h:], x[..., :h]), dim=-1)
            return x * cos + rot * sin
        c, s = cos[..., : cos.shape[-1] // 2], sin[..., : sin.shape[-1] // 2]
        x1, x2 = x[..., 0::2], x[..., 1::2]
        return torch.cat([x1 * c - x2 * s, x2 * c + x1 * s], dim=-1)

    def min_margin(self):
        """Smallest relative gap at the top-k boundary over the rows that have one."""
        torch = self.torch
        best = math.inf
        for mod, hs, qr, cos, sin, mask, kall, sel in self.calls:
            B, S, _ = hs.shape
            dr = mod.qk_rope_head_dim
            q = mod.wq_b(qr).view(B, S, mod.n_heads, mod.head_dim)
            q = torch.cat([self._rope(q[..., :dr], cos, sin), q[..., dr:]], dim=-1)
            k = mod.k_norm(mod.wk(hs)).unsqueeze(2)
            k = torch.cat([self._rope(k[..., :dr], cos, sin), k[..., dr:]], dim=-1).squeeze(2)
            if kall is not None:
                assert torch.equal(kall[:, -S:], k), "indexer key recompute differs"
                k = kall
            sc = torch.relu(torch.matmul(q.float(), k.transpose(-1, -2).float().unsqueeze(1)) * mod.softmax_scale)
            w = mod.weights_proj(hs.float()).float() * mod.n_heads ** -0.5
            score = torch.matmul(w.unsqueeze(-2), sc).squeeze(-2)[0]       # [S, T]
            m = mask[0] if mask.dim() == 3 else mask[0, 0]
            allowed = (m == 0) if m.dtype != torch.bool else m
            T = score.shape[-1]
            kk = min(mod.index_topk, T)
            for s in range(S):
                v = score[s][allowed[s]]
                n = v.numel()
                chosen = set(sel[0, s].tolist())
                if n <= kk:
                    assert set(torch.nonzero(allowed[s]).flatten().tolist()) <= chosen, "causal rows not all chosen"
                    continue
                srt, idx = v.sort(descending=True)
                pos = torch.nonzero(allowed[s]).flatten()[idx[:kk]].tolist()
                a, b = srt[kk - 1].item(), srt[kk].item()
                gap = (a - b) / max(abs(a), abs(b), 1e-30)
                assert set(pos) == chosen or gap < INDEX_MARGIN_MIN, ("recomputed top-k differs", gap, S, s)
                best = min(best, gap)
        return best


def evaluate(mo, model, seqs, spec):
    """make_oracle.evaluate plus the indexer margin over the same forwards."""
    import torch
    _, _, _, Router, _, Indexer = _classes(spec["arch"])
    probe = IndexProbe(model, Indexer, spec["arch"])
    saved = mo.RouterProbe.__init__

    def router_init(self, m):   # make_oracle's probe on this family's router class
        self.inputs, self.handles = [], [x.register_forward_hook(self._hook)
                                         for x in m.modules() if isinstance(x, Router)]
    mo.RouterProbe.__init__ = router_init
    try:
        res = mo.evaluate(model, seqs)
    finally:
        mo.RouterProbe.__init__ = saved
    try:
        probe.calls.clear()
        with torch.no_grad():
            for s in seqs + [res["prompt"] + res["gen"]]:
                model(torch.tensor([s]), use_cache=False)
            gen_probe_start = len(probe.calls)
            mo.greedy_generate(model, res["prompt"])   # the decode steps' selections, over cached keys
        assert len(probe.calls) > gen_probe_start
        res["index_margin"] = probe.min_margin()
    finally:
        probe.remove()
    return res


def _dense_control_diff(mo, spec, outroot):
    """max |logits - logits of the sparse fixture| (the same weights and sequences)."""
    from safetensors import safe_open
    base = os.path.join(outroot, spec["control_of"], "reference.safetensors")
    with safe_open(base, "pt") as f:
        return {k: f.get_tensor(k) for k in f.keys() if k.startswith("logits.")}


def make_fixture(name, _entry, outroot, mo):
    """make_oracle's builder hook: mo is the make_oracle module (helpers, constants)."""
    import torch
    spec = FIXTURES.get(name, _entry)   # or one make_oracle.py defines itself (seed, arch, dims, rope)
    d = spec["dims"]
    _, M, _, _, _, _ = _classes(spec["arch"])
    cfg = _config(spec)
    L = d["num_hidden_layers"]
    outdir = os.path.join(outroot, name)
    if spec.get("control_of") and not os.path.isdir(os.path.join(outroot, spec["control_of"])):
        raise SystemExit(f"{name}: make {spec['control_of']} first (the control compares with it)")
    if os.path.isdir(outdir):
        shutil.rmtree(outdir)
    os.makedirs(outdir)
    g = torch.Generator().manual_seed(spec["seed"])
    seqs = [torch.randint(0, d["vocab_size"], (n,), generator=g).tolist() for n in mo.SEQ_LENS]
    assert min(mo.SEQ_LENS) > DSA_BASE["index_topk"] and mo.PROMPT_LEN + mo.GEN_NEW_TOKENS > DSA_BASE["index_topk"]

    def build(wseed):
        torch.manual_seed(wseed)
        m = M._from_config(cfg, attn_implementation="eager", experts_implementation="eager",
                           dtype=torch.float32).eval()
        _init_weights(m, wseed, spec["arch"])
        return m

    fixed = None
    if spec.get("control_of"):
        with open(os.path.join(outroot, spec["control_of"], "reference.json")) as f:
            fixed = json.load(f)["weight_seed"]
    for attempt in range(mo.MAX_ATTEMPTS if fixed is None else 1):
        wseed = fixed if fixed is not None else spec["seed"] + 1 + attempt
        model = build(wseed)
        res = evaluate(mo, model, seqs, spec)
        ok = (res["router_margin"] > mo.ROUTER_MARGIN_MIN and res["gen_margin"] > 10 * mo.MARGIN_TOL and
              res["index_margin"] > INDEX_MARGIN_MIN)
        print(f"  [{name}] weight seed {wseed}: router margin {res['router_margin']:.3e}, top-k margin "
              f"{res['index_margin']:.3e}, generation top2 margin {res['gen_margin']:.3e} -> "
              f"{'ok' if ok else 'retry'}")
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
    mo.patch_config(cpath)
    m2 = M.from_pretrained(outdir, attn_implementation="eager", experts_implementation="eager",
                           dtype=torch.float32).eval()
    with torch.no_grad():
        for i, s in enumerate(seqs):
            l2 = m2(torch.tensor([s]), use_cache=False).logits[0]
            assert torch.equal(l2, res["logits"][i]), f"{name}: reload mismatch on seq {i}"
    del m2
    wsd = mo.read_safetensors(stpath)
    keys = sorted(wsd)
    types = d.get("indexer_types", ["full"] * L)
    for n in range(L):
        pre = f"model.layers.{n}.self_attn.indexer."
        has = [k for k in keys if k.startswith(pre)]
        want = sorted(pre + x for x in ("k_norm.bias", "k_norm.weight", "weights_proj.weight", "wk.weight",
                                        "wq_b.weight")) if types[n] == "full" else []
        assert has == want, (n, has)
        if n >= d["first_k_dense_replace"]:
            assert f"model.layers.{n}.mlp.experts.0.gate_proj.weight" in wsd
    assert not any("gate_up_proj" in k for k in keys)

    ref = {f"logits.{i}": lg.contiguous() for i, lg in enumerate(res["logits"])}
    assert len(res["hidden"]) == L + 1
    for k, h in enumerate(res["hidden"]):
        ref[f"hidden.0.{k}"] = h.contiguous()
    mo.save_file(ref, os.path.join(outdir, "reference.safetensors"))

    seq_entries = [{"tokens": s, "argmax": lg.argmax(-1).tolist(),
                    "top2_margin": [float(x) for x in mo.top2(lg).tolist()]}
                   for s, lg in zip(seqs, res["logits"])]
    arch_note = {
        "v32": "DeepSeek-V3.2 style (DeepseekV32ForCausalLM): every layer has a DSA lightning indexer "
               "(index_n_heads %d, index_head_dim %d, half-split RoPE on its first %d dims), q_lora, yarn "
               "factor 4, n_group 4 / topk_group 2, 1 shared expert." % (d["index_n_heads"], d["index_head_dim"],
                                                                       d["qk_rope_head_dim"]),
        "glm5": "GLM-5 style (GlmMoeDsaForCausalLM, model_type glm_moe_dsa): indexer_types %s (a shared layer "
                "has no indexer tensors and reuses the last full layer's top-k), interleaved indexer RoPE, "
                "default RoPE theta 1e6, n_group = topk_group = 1, rms_norm_eps 1e-5 (latent norms 1e-6), "
                "dn %d != dv %d." % ("/".join(types), d["qk_nope_head_dim"], d["v_head_dim"]),
    }[spec["arch"]]
    notes = arch_note + (" index_topk %d; sequence lengths %s, prompt + generation %d. " % (
        d["index_topk"], list(mo.SEQ_LENS), mo.PROMPT_LEN + mo.GEN_NEW_TOKENS))
    if math.isfinite(res["index_margin"]):
        notes += ("Smallest relative top-k boundary gap %.3e (recomputed index scores, every row with more causal "
                  "keys than index_topk, prefill and decode). " % res["index_margin"])
    if not spec.get("control_of"):
        Indexer = _classes(spec["arch"])[5]
        idx = [m for m in model.modules() if isinstance(m, Indexer)]
        for m in idx:
            m.index_topk = 1 << 30
        with torch.no_grad():
            diff = max((model(torch.tensor([s]), use_cache=False).logits[0] - res["logits"][i]).abs().max().item()
                       for i, s in enumerate(seqs))
        for m in idx:
            m.index_topk = d["index_topk"]
        assert diff > DENSE_CONTROL_MIN_DIFF, f"{name}: topk >= T changes the logits by only {diff}"
        notes += ("The same weights with index_topk >= T (every causal row selected) give logits differing by "
                  "up to %.3f (> %g): the selection changes the output. " % (diff, DENSE_CONTROL_MIN_DIFF))
    else:
        other = _dense_control_diff(mo, spec, outroot)
        diff = max((res["logits"][i] - other[f"logits.{i}"]).abs().max().item() for i in range(len(seqs)))
        assert diff > DENSE_CONTROL_MIN_DIFF, f"{name}: dense control differs by only {diff}"
        notes += ("Dense control: the weights (seed %d) and sequences of %s with index_topk >= T, so every causal "
                  "row is selected; max |logit difference| against %s is %.3f (> %g: the selection changes "
                  "the output). " % (wseed, spec["control_of"], spec["control_of"], diff, DENSE_CONTROL_MIN_DIFF))
    notes += ("float32, eager attention, eager experts, 1 thread, CPU. Sequence logits from a single full-sequence "
              "forward without cache. Generation: greedy, %d new tokens from the first %d tokens of sequence 0 "
              "(generate() with KV cache, equals teacher-forced argmax). Weight seed %d. Min router margin %.3e. "
              "hidden.0.0 = embeddings, hidden.0.k = after layer k-1, hidden.0.%d after the final norm."
              % (mo.GEN_NEW_TOKENS, mo.PROMPT_LEN, wseed, res["router_margin"], L))
    reference = {
        "name": name, "versions": mo.versions(), "margin_tolerance": mo.MARGIN_TOL,
        "sequences": seq_entries, "generation": {"prompt": res["prompt"], "tokens": res["gen"]},
        "weight_seed": wseed, "notes": notes,
    }
    with open(os.path.join(outdir, "reference.json"), "w") as f:
        f.write(mo.fmt_json(reference))
    sizes = {fn: os.path.getsize(os.path.join(outdir, fn)) for fn in sorted(os.listdir(outdir))}
    print(f"  [{name}] wrote {outdir}: " + ", ".join(f"{k} {v/1e6:.2f}MB" for k, v in sizes.items()))
    return dict(name=name)

