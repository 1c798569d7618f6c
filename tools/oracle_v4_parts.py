#!/usr/bin/env python3
# oracle_v4_parts.py -- fixtures for DeepSeek-V4's self-contained parts, each
# transformers module run alone (transformers 5.18.0, models/deepseek_v4/,
# float32, CPU, one thread, fixed seeds, random weights) and written to
# tests/parts/v4/<part>.safetensors (inputs, weights, outputs; the
# scalars the C side needs in the file's __metadata__). Checked by
# tests/unit/test_v4_parts.c.
#
#   hyper.safetensors     DeepseekV4HyperConnection (2 and 4 streams) and
#                         DeepseekV4HyperHead; the post mix is
#                         DeepseekV4DecoderLayer's expression on a random
#                         block output.
#   router.safetensors    DeepseekV4TopKRouter (sqrtsoftplus, correction bias,
#                         routed scaling) and DeepseekV4HashRouter (a random
#                         tid2eid table).
#   compress.safetensors  DeepseekV4HCACompressor and DeepseekV4CSACompressor
#                         with its DeepseekV4Indexer, stateless (a prefill
#                         from position 0), and the CSA compressor again
#                         through transformers' own cache in chunks (prefill
#                         then one token at a time), whose running entries
#                         must equal the stateless ones.
#   swiglu.safetensors    DeepseekV4Experts (routed experts, clipped SwiGLU).
#   rope.safetensors      DeepseekV4RotaryEmbedding's main and compress
#                         frequencies and scaling for three configs.
#   attention.safetensors DeepseekV4Attention of a sliding, a CSA and an HCA
#                         layer: its q_b_proj / kv_proj outputs, compressed
#                         entries and selection, the compressor and indexer
#                         weights, and its output; each layer is also run
#                         through transformers' cache token by token, which
#                         must match the stateless prefill (asserted).
#
# Every fixture notes in its metadata ("notes"), and NOTES.md for all of them,
# by how much each feature moves the output (the output with the feature
# switched off against with it on), so a fixture shows the feature matters. Run: /work/venv-tf/bin/python
# tools/oracle_v4_parts.py [outdir]. The shared expert's clipping (transformers
# clips DeepseekV4MLP, DeepSeek's inference code does not) is not exercised.

import json
import os
import sys

import torch
import torch.nn.functional as F
import transformers
from transformers.models.deepseek_v4 import modeling_deepseek_v4 as mv4
from transformers.models.deepseek_v4.configuration_deepseek_v4 import DeepseekV4Config

torch.set_num_threads(1)
torch.use_deterministic_algorithms(True)

OUT = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "tests", "parts", "v4")


def versions():
    import safetensors
    return {"torch": torch.__version__, "transformers": transformers.__version__,
            "safetensors": safetensors.__version__}


def gen(seed):
    return torch.Generator().manual_seed(seed)


def randn(g, *shape, std=1.0):
    return torch.randn(*shape, generator=g, dtype=torch.float32) * std


def maxdiff(a, b):
    return float((a.float() - b.float()).abs().max())


DTYPES = {torch.float32: "F32", torch.int64: "I64"}


def save_sorted(tensors, path, metadata):
    """A safetensors file with its header in sorted key order, so that a rerun
    writes the same bytes (safetensors' own writer orders the metadata by
    hash)."""
    header, blobs, off = {"__metadata__": dict(sorted(metadata.items()))}, [], 0
    for k in sorted(tensors):
        v = tensors[k].detach().contiguous()
        b = v.numpy().tobytes()
        header[k] = {"dtype": DTYPES[v.dtype], "shape": list(v.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(len(h).to_bytes(8, "little") + h + b"".join(blobs))


def write(name, tensors, meta, notes):
    meta = {k: str(v) for k, v in meta.items()}
    meta["notes"] = json.dumps(notes, sort_keys=True)
    meta["versions"] = json.dumps(versions(), sort_keys=True)
    os.makedirs(OUT, exist_ok=True)
    path = os.path.join(OUT, name)
    save_sorted(tensors, path, meta)
    print(f"{path}: {os.path.getsize(path)} bytes")
    NOTES.append(f"\n## {name}\n\n" + "".join(f"- {k}: {v}\n" for k, v in sorted(notes.items())))
    for k, v in sorted(notes.items()):
        print(f"  {k}: {v}")


NOTES = []


def write_notes():
    head = ("# DeepSeek-V4 part fixtures\n\nWritten by tools/oracle_v4_parts.py (" +
            ", ".join(f"{k} {v}" for k, v in sorted(versions().items())) +
            "), checked by tests/unit/test_v4_parts.c. Each note compares the module's output with\n"
            "a feature switched off (in parentheses) against its output as stored, so a part that\n"
            "ignored the feature would miss the fixture by about that much; the C side lands within\n"
            "~2e-6 of every stored output.\n")
    with open(os.path.join(OUT, "NOTES.md"), "w") as f:
        f.write(head + "".join(NOTES))


def config(**kw):
    base = dict(vocab_size=64, hidden_size=32, moe_intermediate_size=16, num_hidden_layers=2,
                num_attention_heads=4, head_dim=32, q_lora_rank=24, qk_rope_head_dim=8,
                num_experts_per_tok=4, n_routed_experts=16, routed_scaling_factor=1.5,
                compress_rates={"compressed_sparse_attention": 4, "heavily_compressed_attention": 8},
                layer_types=["compressed_sparse_attention", "heavily_compressed_attention"],
                mlp_layer_types=["hash_moe", "moe"], hc_mult=4, hc_sinkhorn_iters=20, hc_eps=1e-6,
                sliding_window=6, o_groups=2, o_lora_rank=12, index_n_heads=4, index_head_dim=16,
                index_topk=3, rms_norm_eps=1e-6, rope_theta=10000.0, compress_rope_theta=160000.0,
                rope_parameters={"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 16,
                                 "beta_fast": 32, "beta_slow": 1},
                max_position_embeddings=64, swiglu_limit=2.0)
    base.update(kw)
    cfg = DeepseekV4Config(**base)
    cfg._attn_implementation = "eager"
    return cfg


# ---------------------------------------------------------------- hyper

def hyper_fixture():
    t, meta, notes = {}, {}, {}
    T = 5
    for n in (2, 4):
        # 4 streams at V4's hc_eps; 2 streams at an eps large enough that its
        # every use (pre, comb, each Sinkhorn sum) shows in f32
        eps = 1e-6 if n == 4 else 0.05
        cfg = config(hc_mult=n, hc_eps=eps)
        meta[f"hc{n}_eps"] = repr(eps)
        g = gen(100 + n)
        hc = mv4.DeepseekV4HyperConnection(cfg)
        D = cfg.hidden_size
        with torch.no_grad():
            hc.fn.copy_(randn(g, *hc.fn.shape, std=0.3))
            hc.base.copy_(randn(g, *hc.base.shape, std=0.5))
            hc.scale.copy_(torch.tensor([0.8, 1.3, 2.0]))
        x = randn(g, T, n, D)
        y = randn(g, T, D)
        with torch.no_grad():
            post, comb, collapsed = hc(x.unsqueeze(0))
            # DeepseekV4DecoderLayer's residual mix, on a random block output
            out = post.unsqueeze(-1) * y.unsqueeze(0).unsqueeze(-2) + torch.matmul(comb.transpose(-1, -2), x.unsqueeze(0))
            # feature switches: one Sinkhorn iteration; comb with no Sinkhorn at all
            hc1 = mv4.DeepseekV4HyperConnection(cfg)
            hc1.load_state_dict(hc.state_dict())
            hc1.hc_sinkhorn_iters = 1
            _, comb1, _ = hc1(x.unsqueeze(0))
            hcb = mv4.DeepseekV4HyperConnection(cfg)
            hcb.load_state_dict(hc.state_dict())
            hcb.base.zero_()
            postb, combb, collb = hcb(x.unsqueeze(0))
        p = f"hc{n}."
        t.update({p + "x": x, p + "y": y, p + "fn": hc.fn, p + "base": hc.base, p + "scale": hc.scale,
                  p + "post": post[0], p + "comb": comb[0], p + "collapsed": collapsed[0], p + "out": out[0]})
        notes[f"hc{n}: max|comb(20 iters) - comb(1 iter)|"] = maxdiff(comb, comb1)
        notes[f"hc{n}: max|comb row sum - 1| at 20 iters"] = float((comb.sum(-1) - 1).abs().max())
        notes[f"hc{n}: max|collapsed - collapsed(base 0)|"] = maxdiff(collapsed, collb)
        notes[f"hc{n}: max|post - post(base 0)|"] = maxdiff(post, postb)
        with torch.no_grad():
            hce = mv4.DeepseekV4HyperConnection(cfg)
            hce.load_state_dict(hc.state_dict())
            hce.hc_eps = 0.0
            _, combe, colle = hce(x.unsqueeze(0))
        notes[f"hc{n} (hc_eps {eps:g}): max|comb - comb(hc_eps 0)|"] = maxdiff(comb, combe)

        head = mv4.DeepseekV4HyperHead(cfg)
        with torch.no_grad():
            head.hc_fn.copy_(randn(g, *head.hc_fn.shape, std=0.3))
            head.hc_base.copy_(randn(g, n, std=0.5))
            head.hc_scale.copy_(torch.tensor([1.7]))
            hout = head(x.unsqueeze(0))
            plain = x.sum(dim=1)
        p = f"head{n}."
        t.update({p + "fn": head.hc_fn, p + "base": head.hc_base, p + "scale": head.hc_scale, p + "out": hout[0]})
        notes[f"head{n}: max|out - plain stream sum|"] = maxdiff(hout[0], plain)
    cfg = config()
    meta.update(T=T, hidden=cfg.hidden_size, sinkhorn_iters=cfg.hc_sinkhorn_iters,
                norm_eps=repr(cfg.rms_norm_eps))
    write("hyper.safetensors", t, meta, notes)


# ---------------------------------------------------------------- routers

def router_fixture():
    cfg = config()
    g = gen(200)
    T, E, K, D = 7, cfg.n_routed_experts, cfg.num_experts_per_tok, cfg.hidden_size
    t, notes = {}, {}
    r = mv4.DeepseekV4TopKRouter(cfg)
    with torch.no_grad():
        r.weight.copy_(randn(g, E, D, std=0.3))
        r.e_score_correction_bias.copy_(randn(g, E, std=0.4))
    x = randn(g, T, D)
    with torch.no_grad():
        logits, w, idx = r(x)
        r0 = mv4.DeepseekV4TopKRouter(cfg)
        r0.load_state_dict(r.state_dict())
        r0.e_score_correction_bias.zero_()
        _, w0, idx0 = r0(x)
    changed = sum(set(a.tolist()) != set(b.tolist()) for a, b in zip(idx, idx0))
    notes["topk: tokens whose expert set changes with the bias zeroed"] = f"{changed} of {T}"
    notes["topk: sum of weights (routed_scaling_factor)"] = float(w.sum(-1).mean())
    # margin between the k-th and (k+1)-th biased score, so the selection is unambiguous
    sc = torch.sqrt(F.softplus(logits)) + r.e_score_correction_bias
    srt = sc.sort(-1, descending=True).values
    notes["topk: min gap at the k-th biased score"] = float((srt[:, K - 1] - srt[:, K]).min())
    assert float((srt[:, K - 1] - srt[:, K]).min()) > 1e-4
    t.update({"topk.logits": logits, "topk.bias": r.e_score_correction_bias, "topk.idx": idx.to(torch.int64),
              "topk.weight": w})

    h = mv4.DeepseekV4HashRouter(cfg)
    with torch.no_grad():
        h.weight.copy_(randn(g, E, D, std=0.3))
        h.tid2eid.copy_(torch.stack([torch.randperm(E, generator=g)[:K] for _ in range(cfg.vocab_size)]))
    ids = torch.randint(0, cfg.vocab_size, (T,), generator=g)
    with torch.no_grad():
        hl, hw, hidx = h(x, ids)
    t.update({"hash.logits": hl, "hash.tid2eid": h.tid2eid, "hash.ids": ids.to(torch.int64),
              "hash.idx": hidx.to(torch.int64), "hash.weight": hw})
    # the score function alone over softplus' threshold (20) and beyond exp's f32 range
    v = torch.tensor([-30.0, -5.0, 0.0, 5.0, 19.5, 20.5, 50.0, 100.0])
    t["sqrtsoftplus.in"], t["sqrtsoftplus.out"] = v, mv4.ACT2FN["sqrtsoftplus"](v)
    write("router.safetensors", t, dict(T=T, experts=E, k=K, vocab=cfg.vocab_size,
                                        routed_scaling=repr(cfg.routed_scaling_factor)), notes)


# ---------------------------------------------------------------- routed experts' clipped SwiGLU

def swiglu_fixture():
    cfg = config(n_routed_experts=3, num_experts_per_tok=2, moe_intermediate_size=8)
    g = gen(250)
    T, D, I, E = 6, cfg.hidden_size, cfg.moe_intermediate_size, cfg.n_routed_experts
    ex = mv4.DeepseekV4Experts(cfg)
    with torch.no_grad():
        ex.gate_up_proj.copy_(randn(g, E, 2 * I, D, std=0.5))
        ex.down_proj.copy_(randn(g, E, D, I, std=0.3))
    x = randn(g, T, D)
    idx = torch.stack([torch.randperm(E, generator=g)[:2] for _ in range(T)])
    w = torch.rand(T, 2, generator=g) + 0.25
    with torch.no_grad():
        out = ex(x, idx, w)
        gu = torch.einsum("eod,td->teo", ex.gate_up_proj, x)
        ex.limit = 1e30
        out_free = ex(x, idx, w)
    gate, up = gu[..., :I], gu[..., I:]
    notes = {"swiglu: gate values above the limit": int((gate > cfg.swiglu_limit).sum()),
             "swiglu: up values outside +-limit": int((up.abs() > cfg.swiglu_limit).sum()),
             "swiglu: gate values below -limit (left alone)": int((gate < -cfg.swiglu_limit).sum()),
             "swiglu: of gate/up values (T x E x I each)": int(gate.numel()),
             "swiglu: max|out - out(no clipping)|": maxdiff(out, out_free)}
    write("swiglu.safetensors", {"x": x, "gate_up": ex.gate_up_proj, "down": ex.down_proj,
                                 "idx": idx.to(torch.int64), "weight": w, "out": out},
          dict(T=T, hidden=D, inter=I, experts=E, k=2, limit=repr(cfg.swiglu_limit)), notes)


# ---------------------------------------------------------------- compressors + indexer

def rope_of(module, kind="compress"):
    rot = module.rotary_emb
    return getattr(rot, f"{kind}_inv_freq"), float(getattr(rot, f"{kind}_attention_scaling"))


def fill_compressor(m, g, hd_width):
    with torch.no_grad():
        m.kv_proj.weight.copy_(randn(g, *m.kv_proj.weight.shape, std=0.3))
        m.gate_proj.weight.copy_(randn(g, *m.gate_proj.weight.shape, std=0.5))
        m.position_bias.copy_(randn(g, *m.position_bias.shape, std=1.0))
        m.kv_norm.weight.copy_(1.0 + randn(g, *m.kv_norm.weight.shape, std=0.3))


def compress_fixture():
    cfg = config()
    g = gen(300)
    T, D = 27, cfg.hidden_size
    t, notes = {}, {}
    x = randn(g, 1, T, D)
    q_res = randn(g, 1, T, cfg.q_lora_rank)
    pos = torch.arange(T).unsqueeze(0)
    t["x"], t["q_residual"] = x[0], q_res[0]

    hca = mv4.DeepseekV4HCACompressor(cfg)
    fill_compressor(hca, g, cfg.head_dim)
    with torch.no_grad():
        hkv, hbias = hca(x, q_res, pos, None, 1)
        hca0 = mv4.DeepseekV4HCACompressor(cfg)
        hca0.load_state_dict(hca.state_dict())
        hca0.position_bias.zero_()
        hkv0, _ = hca0(x, q_res, pos, None, 1)
    inv, sc = rope_of(hca)
    t.update({"hca.kv_proj": hca.kv_proj.weight, "hca.gate_proj": hca.gate_proj.weight,
              "hca.position_bias": hca.position_bias, "hca.kv_norm": hca.kv_norm.weight,
              "hca.entries": hkv[0, 0], "rope.inv_freq": inv, "rope.scale": torch.tensor([sc])})
    notes["hca: entries"] = int(hkv.shape[2])
    notes["hca: max|entries - entries(position_bias 0)|"] = maxdiff(hkv, hkv0)

    csa = mv4.DeepseekV4CSACompressor(cfg)
    fill_compressor(csa, g, cfg.head_dim)
    ix = csa.indexer
    fill_compressor(ix, g, cfg.index_head_dim)
    with torch.no_grad():
        ix.q_b_proj.weight.copy_(randn(g, *ix.q_b_proj.weight.shape, std=0.3))
        ix.scorer.weights_proj.weight.copy_(randn(g, *ix.scorer.weights_proj.weight.shape, std=0.3))
    cap = {}

    def scorer_hook(mod, args, out):
        cap["q"], cap["keys"] = args[0].detach().clone(), args[1].detach().clone()
        cap["scores"] = out.detach().clone()

    def indexer_hook(mod, args, out):
        cap["topk"] = out.detach().clone()

    h1 = ix.scorer.register_forward_hook(scorer_hook)
    h2 = ix.register_forward_hook(indexer_hook)
    with torch.no_grad():
        ckv, cbias = csa(x, q_res, pos, None, 0)
    h1.remove(); h2.remove()
    t.update({"csa.kv_proj": csa.kv_proj.weight, "csa.gate_proj": csa.gate_proj.weight,
              "csa.position_bias": csa.position_bias, "csa.kv_norm": csa.kv_norm.weight,
              "csa.entries": ckv[0, 0], "csa.visible": torch.isfinite(cbias[0, 0]).to(torch.int64),
              "ix.kv_proj": ix.kv_proj.weight, "ix.gate_proj": ix.gate_proj.weight,
              "ix.position_bias": ix.position_bias, "ix.kv_norm": ix.kv_norm.weight,
              "ix.q_b_proj": ix.q_b_proj.weight, "ix.weights_proj": ix.scorer.weights_proj.weight,
              "ix.keys": cap["keys"][0], "ix.scores": cap["scores"][0], "ix.topk": cap["topk"][0].to(torch.int64)})
    # the overlap's share: entries with the previous block's Ca slots forced out
    with torch.no_grad():
        ref = []
        R, hd = csa.compress_rate, csa.head_dim
        U = (T // R) * R
        kv = csa.kv_proj(x)[0, :U].view(-1, R, 2 * hd)
        gt = csa.gate_proj(x)[0, :U].view(-1, R, 2 * hd) + csa.position_bias
        p = gt[..., hd:].softmax(dim=1)
        no_overlap = csa.kv_norm((kv[..., hd:] * p).sum(1))
    notes["csa: entries"] = int(ckv.shape[2])
    notes["csa: max|entry[1:] - entry[1:](no Ca overlap, before rope)|"] = maxdiff(ckv[0, 0, 1:, :-cfg.qk_rope_head_dim], no_overlap[1:, :-cfg.qk_rope_head_dim])
    vis = (pos[0] + 1) // R
    sel_counts = [int((cap["topk"][0, i] >= 0).sum()) for i in range(T)]
    notes["indexer: selected per query (topk %d)" % cfg.index_topk] = sel_counts
    notes["indexer: visible per query"] = vis.tolist()
    # the selection must be unambiguous: a gap at the k-th visible score
    sc_ = cap["scores"][0]
    gaps = []
    for i in range(T):
        v = int(vis[i])
        if v > cfg.index_topk:
            srt = sc_[i, :v].sort(descending=True).values
            gaps.append(float(srt[cfg.index_topk - 1] - srt[cfg.index_topk]))
    notes["indexer: min gap at the k-th score where visible > topk"] = min(gaps)
    assert gaps and min(gaps) > 1e-4, gaps

    # the same CSA compressor through transformers' cache: 6 tokens, then one at a time
    from transformers.cache_utils import DynamicCache
    cache = DynamicCache(config=cfg)
    chunks = [(0, 6)] + [(i, i + 1) for i in range(6, T)]
    with torch.no_grad():
        for a, b in chunks:
            csa(x[:, a:b], q_res[:, a:b], pos[:, a:b], cache, 0)
    layer = cache.layers[0]
    t["csa.entries_cached"] = layer.compressed_kv["compressor"][0]
    t["ix.keys_cached"] = layer.compressed_kv["indexer"][0]
    notes["csa: max|cached entries - stateless entries|"] = maxdiff(layer.compressed_kv["compressor"][0], ckv[0, 0])
    notes["indexer: max|cached keys - stateless keys|"] = maxdiff(layer.compressed_kv["indexer"][0], cap["keys"][0])
    meta = dict(T=T, hidden=D, head_dim=cfg.head_dim, index_head_dim=cfg.index_head_dim,
                index_n_heads=cfg.index_n_heads, index_topk=cfg.index_topk, q_lora_rank=cfg.q_lora_rank,
                csa_ratio=cfg.compress_rates["compressed_sparse_attention"],
                hca_ratio=cfg.compress_rates["heavily_compressed_attention"],
                rope_dims=cfg.qk_rope_head_dim, norm_eps=repr(cfg.rms_norm_eps))
    write("compress.safetensors", t, meta, notes)


# ---------------------------------------------------------------- rope frequencies

def rope_fixture():
    """DeepseekV4RotaryEmbedding's two ropes for three configs: the tiny one of
    these fixtures, V4-Flash's (qk_rope_head_dim 64, compress yarn factor 16
    over 65536), and a nested rope_parameters whose yarn compress rope has no
    attention_factor (so yarn's mscale formula gives the scaling)."""
    yarn16 = {"rope_type": "yarn", "factor": 16.0, "original_max_position_embeddings": 65536,
              "beta_fast": 32, "beta_slow": 1}
    cases = {
        "tiny": config(),
        "flash": DeepseekV4Config(num_hidden_layers=2, rope_parameters=dict(yarn16)),
        "nested": DeepseekV4Config(num_hidden_layers=2, rope_parameters={
            "main": {"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.125},
            "compress": dict(yarn16, rope_theta=160000.0, partial_rotary_factor=0.125, mscale=1.0,
                             mscale_all_dim=0.5)}),
    }
    t, meta, notes = {}, {}, {}
    for name, cfg in cases.items():
        rot = mv4.DeepseekV4RotaryEmbedding(cfg)
        for kind in ("main", "compress"):
            rp = cfg.rope_parameters[kind]
            p = f"{name}.{kind}."
            t[p + "inv_freq"] = getattr(rot, f"{kind}_inv_freq")
            t[p + "scale"] = torch.tensor([float(getattr(rot, f"{kind}_attention_scaling"))])
            meta[p + "theta"] = repr(float(rp["rope_theta"]))
            meta[p + "dr"] = cfg.qk_rope_head_dim
            meta[p + "yarn"] = int(rp["rope_type"] == "yarn")
            for k in ("factor", "original_max_position_embeddings", "beta_fast", "beta_slow", "attention_factor",
                      "mscale", "mscale_all_dim"):
                if k in rp and rp[k] is not None:
                    meta[p + k] = repr(float(rp[k]))
        notes[f"{name}: compress scaling"] = float(rot.compress_attention_scaling)
        plain = 1.0 / (float(cfg.rope_parameters["compress"]["rope_theta"]) **
                       (torch.arange(0, cfg.qk_rope_head_dim, 2).float() / cfg.qk_rope_head_dim))
        notes[f"{name}: max ratio default / compress inv_freq at compress theta"] = float(
            (plain / rot.compress_inv_freq).max())
    write("rope.safetensors", t, meta, notes)


# ---------------------------------------------------------------- attention core

ATTN_TYPES = ["sliding_attention", "compressed_sparse_attention", "heavily_compressed_attention"]


def decode_through_cache(at, kind, x, rot):
    """The attention's output with transformers' cache: 10 tokens, then one at a
    time (a one-layer config of this kind, so the mask reads this layer's cache)."""
    from transformers.cache_utils import DynamicCache
    from transformers.masking_utils import create_sliding_window_causal_mask
    cfg1 = config(num_hidden_layers=1, layer_types=[kind], mlp_layer_types=["moe"])
    m1 = mv4.DeepseekV4Attention(cfg1, 0)
    m1.load_state_dict(at.state_dict())
    cache, T, outs = DynamicCache(config=cfg1), x.shape[1], []
    with torch.no_grad():
        for a, b in [(0, 10)] + [(i, i + 1) for i in range(10, T)]:
            p = torch.arange(a, b).unsqueeze(0)
            pe = {k: rot(x, position_ids=p, layer_type=k) for k in ("main", "compress")}
            mask = create_sliding_window_causal_mask(config=cfg1, inputs_embeds=x[:, a:b], attention_mask=None,
                                                     past_key_values=cache, position_ids=p)
            outs.append(m1(x[:, a:b], pe, p, mask, cache)[0])
    return torch.cat(outs, dim=1)


def attention_fixture():
    cfg = config(num_hidden_layers=3, layer_types=ATTN_TYPES, mlp_layer_types=["moe"] * 3)
    g = gen(400)
    T, D = 27, cfg.hidden_size
    t, notes = {}, {}
    x = randn(g, 1, T, D)
    pos = torch.arange(T).unsqueeze(0)
    rot = mv4.DeepseekV4RotaryEmbedding(cfg)
    pe = {k: rot(x, position_ids=pos, layer_type=k) for k in ("main", "compress")}
    from transformers.masking_utils import create_sliding_window_causal_mask
    mask = create_sliding_window_causal_mask(config=cfg, inputs_embeds=x, attention_mask=None,
                                             past_key_values=None, position_ids=pos)
    t["x"] = x[0]
    for li, kind in enumerate(ATTN_TYPES):
        torch.manual_seed(500 + li)
        at = mv4.DeepseekV4Attention(cfg, li)
        with torch.no_grad():
            for name, prm in at.named_parameters():
                if name.endswith("norm.weight"):
                    prm.copy_(1.0 + randn(g, *prm.shape, std=0.3))
                elif name.endswith("position_bias"):
                    prm.copy_(randn(g, *prm.shape, std=1.0))
                elif name == "sinks":
                    prm.copy_(randn(g, *prm.shape, std=1.0) + 1.0)
                else:
                    prm.copy_(randn(g, *prm.shape, std=0.3))
        cap = {}
        hooks = [at.q_b_proj.register_forward_hook(lambda m, a, o: cap.__setitem__("q", o.detach().clone())),
                 at.q_a_norm.register_forward_hook(lambda m, a, o: cap.__setitem__("q_res", o.detach().clone())),
                 at.kv_proj.register_forward_hook(lambda m, a, o: cap.__setitem__("kv", o.detach().clone()))]
        if at.compressor is not None:
            hooks.append(at.compressor.register_forward_hook(
                lambda m, a, o: cap.__setitem__("comp", (o[0].detach().clone(), o[1].detach().clone()))))
        with torch.no_grad():
            out, _ = at(x, pe, pos, mask, None)
            # feature switches: sinks off; no compressed entries; the window as wide as T
            s0 = mv4.DeepseekV4Attention(cfg, li)
            s0.load_state_dict(at.state_dict())
            s0.sinks.zero_()
            out_sink0, _ = s0(x, pe, pos, mask, None)
            s0.sinks.fill_(-1e30)
            out_nosink, _ = s0(x, pe, pos, mask, None)
            full = create_sliding_window_causal_mask(config=config(num_hidden_layers=3, layer_types=ATTN_TYPES,
                                                                   mlp_layer_types=["moe"] * 3, sliding_window=64),
                                                     inputs_embeds=x, attention_mask=None, past_key_values=None,
                                                     position_ids=pos)
            out_full, _ = at(x, pe, pos, full, None)
        for h in hooks:
            h.remove()
        dec = decode_through_cache(at, kind, x, rot)
        assert maxdiff(dec, out) < 1e-4
        p = f"{kind}."
        kind_rope = "main" if kind == "sliding_attention" else "compress"
        t.update({p + "q": cap["q"][0], p + "kv": cap["kv"][0], p + "kv_norm": at.kv_norm.weight,
                  p + "sinks": at.sinks, p + "o_a": at.o_a_proj.weight, p + "o_b": at.o_b_proj.weight,
                  p + "out": out[0], p + "inv_freq": getattr(rot, f"{kind_rope}_inv_freq"),
                  p + "rope_scale": torch.tensor([float(getattr(rot, f"{kind_rope}_attention_scaling"))])})
        notes[p + "max|decode through HF's cache (10 tokens, then 1 by 1) - out|"] = maxdiff(dec, out)
        notes[p + "max|out - out(sinks zeroed)|"] = maxdiff(out, out_sink0)
        notes[p + "max|out - out(no sink slot)|"] = maxdiff(out, out_nosink)
        notes[p + "max|out - out(window 64 >= T)|"] = maxdiff(out, out_full)
        if "comp" in cap:
            ckv, cb = cap["comp"]
            # the compressor's (and indexer's) weights, for the chained check
            cm = at.compressor
            t.update({p + "c.kv_proj": cm.kv_proj.weight, p + "c.gate_proj": cm.gate_proj.weight,
                      p + "c.position_bias": cm.position_bias, p + "c.kv_norm": cm.kv_norm.weight})
            t[p + "q_residual"] = cap["q_res"][0]
            if kind == "compressed_sparse_attention":
                ix = cm.indexer
                t.update({p + "ix.kv_proj": ix.kv_proj.weight, p + "ix.gate_proj": ix.gate_proj.weight,
                          p + "ix.position_bias": ix.position_bias, p + "ix.kv_norm": ix.kv_norm.weight,
                          p + "ix.q_b_proj": ix.q_b_proj.weight, p + "ix.weights_proj": ix.scorer.weights_proj.weight})
            t[p + "entries"] = ckv[0, 0]
            t[p + "visible"] = torch.isfinite(cb[0, 0]).to(torch.int64)
            with torch.no_grad():
                nc = mv4.DeepseekV4Attention(cfg, li)
                nc.load_state_dict(at.state_dict())
                nc.compressor = None
                out_nc, _ = nc(x, pe, pos, mask, None)
            notes[p + "max|out - out(no compressed entries)|"] = maxdiff(out, out_nc)
            if kind == "compressed_sparse_attention":
                with torch.no_grad():
                    al = mv4.DeepseekV4Attention(cfg, li)
                    al.load_state_dict(at.state_dict())
                    al.compressor.indexer.index_topk = 1 << 20
                    out_all, _ = al(x, pe, pos, mask, None)
                notes[p + "max|out - out(every visible entry, no indexer top-k)|"] = maxdiff(out, out_all)
    meta = dict(T=T, hidden=D, heads=cfg.num_attention_heads, head_dim=cfg.head_dim, window=cfg.sliding_window,
                o_groups=cfg.o_groups, o_lora_rank=cfg.o_lora_rank, rope_dims=cfg.qk_rope_head_dim,
                norm_eps=repr(cfg.rms_norm_eps), q_lora_rank=cfg.q_lora_rank, index_n_heads=cfg.index_n_heads,
                index_head_dim=cfg.index_head_dim, index_topk=cfg.index_topk,
                csa_ratio=cfg.compress_rates["compressed_sparse_attention"],
                hca_ratio=cfg.compress_rates["heavily_compressed_attention"])
    write("attention.safetensors", t, meta, notes)


if __name__ == "__main__":
    hyper_fixture()
    router_fixture()
    swiglu_fixture()
    rope_fixture()
    compress_fixture()
    attention_fixture()
    write_notes()
