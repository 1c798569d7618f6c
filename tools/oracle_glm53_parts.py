#!/usr/bin/env python3
# oracle_glm53_parts.py -- fixtures for GLM-5.3's KDA (Kimi Delta Attention)
# layer, transformers 5.18.0 models/glm5_next/ (Glm5NextTextLinearAttention
# and its torch fallbacks causal_conv1d_fn / causal_conv1d_update /
# chunk_kimi_delta_attention / recurrent_kimi_delta_attention), float32,
# CPU, one thread, fixed seeds, random weights, written to
# tests/parts/glm53/kda.safetensors and checked by tests/unit/test_glm53_parts.c.
#
# Two layers: "b" with the bounded forget gate (linear_lower_bound -5) and "u"
# unbounded (softplus). For each: the layer's weights, its input x (T rows),
# every stage of the stateless prefill (projections, convolution, gates,
# chunked core, final recurrent state, gated norm, output), the recurrent
# fallback's core over the same inputs from a zero state, and the layer run
# through transformers' own cache in three pieces (a prefill of T1 rows, a
# multi-row continuation of T2 rows, then one row at a time), whose output
# rows must match the stateless ones (asserted here).
#
# pool_index.safetensors: Glm5NextTextIndexer (the pooled DSA selection) on
# random inputs with kpool 4 / topk 8 with and without the tail rule, and kpool
# 3 / topk 6 with it (T = 40: 10 and 13 pools, 2 selected): its LayerNorm'd keys,
# gate scores, q, head weights, pool keys, pool scores and the selected
# positions per row (I64, -1 padded); a weight seed is kept only where no
# query's top-k has a gap under 1e-4, and a prefix run's last row must select
# what the full run's row does (asserted).
#
# The notes (metadata "notes" and NOTES.md) say by how much each feature moves
# the layer's output: the feature switched off against the output as stored.
# Run: HF_HUB_OFFLINE=1 /work/venv-tf/bin/python tools/oracle_glm53_parts.py [outdir]

import json
import os
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch
import transformers
from transformers.cache_utils import DynamicCache
from transformers.models.glm5_next import modeling_glm5_next as mg
from transformers.models.glm5_next.configuration_glm5_next import Glm5NextTextConfig

torch.set_num_threads(1)
torch.use_deterministic_algorithms(True)

OUT = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "tests", "parts", "glm53")

T, T1, T2 = 80, 37, 30  # 80 rows: a full 64-row chunk and a partial one


def versions():
    import safetensors
    return {"torch": torch.__version__, "transformers": transformers.__version__,
            "safetensors": safetensors.__version__}


def maxdiff(a, b):
    return float((a.float() - b.float()).abs().max())


DTYPES = {torch.float32: "F32", torch.int64: "I64"}


def save_sorted(tensors, path, metadata):
    """A safetensors file with its header in sorted key order, so that a rerun
    writes the same bytes."""
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


def config(lower_bound):
    cfg = Glm5NextTextConfig(vocab_size=64, hidden_size=32, intermediate_size=48, moe_intermediate_size=16,
                             num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=2,
                             kv_lora_rank=16, q_lora_rank=24, qk_nope_head_dim=16, v_head_dim=16,
                             n_routed_experts=4, num_experts_per_tok=2, index_topk=4, index_kpool=2,
                             index_head_dim=8, index_n_heads=2, linear_head_dim=16, linear_num_heads=3,
                             linear_conv_kernel_dim=4, linear_lower_bound=lower_bound, rms_norm_eps=1e-5,
                             layer_types=["linear_attention"], mlp_layer_types=["dense"])
    cfg._attn_implementation = "eager"
    return cfg


def build(cfg, seed):
    g = torch.Generator().manual_seed(seed)
    layer = mg.Glm5NextTextLinearAttention(cfg, 0).float().eval()
    with torch.no_grad():
        for name, p in sorted(layer.named_parameters()):
            if name.endswith("A_log"):
                p.copy_(torch.randn(p.shape, generator=g) * 0.5)
            elif name.endswith("dt_bias"):
                p.copy_(torch.randn(p.shape, generator=g) * 0.5)
            elif name.endswith("o_norm.weight"):
                p.copy_(1.0 + torch.randn(p.shape, generator=g) * 0.1)
            elif name.startswith("conv1d"):
                p.copy_(torch.randn(p.shape, generator=g) * 0.5)
            else:
                p.copy_(torch.randn(p.shape, generator=g) / (p.shape[-1] ** 0.5))
    return layer


def run_cached(layer, cfg, x):
    """The layer through transformers' cache: T1 rows, T2 rows, then one at a time."""
    cache = DynamicCache(config=cfg)
    outs, pos = [], 0
    for n in [T1, T2] + [1] * (T - T1 - T2):
        outs.append(layer(x[:, pos:pos + n], cache_params=cache))
        pos += n
    return torch.cat(outs, dim=1)


def stages(layer, x):
    """Every stage of the stateless prefill, with transformers' own functions."""
    H, D, K = layer.num_heads, layer.head_dim, layer.conv_kernel_size
    t = {}
    raw = torch.cat([layer.q_proj(x), layer.k_proj(x), layer.v_proj(x)], dim=-1)
    conv = mg.causal_conv1d_fn(raw.transpose(1, 2), weight=layer.conv1d.weight.squeeze(1), bias=None,
                               activation="silu").transpose(1, 2)
    q, k, v = torch.split(conv, [H * D] * 3, dim=-1)
    shape = (1, T, H, D)
    fproj = layer.forget_gate.f_b_proj(layer.forget_gate.f_a_proj(x))
    gk = layer.forget_gate(x)
    blog = layer.b_proj(x)
    beta = torch.sigmoid(blog)
    core, state = mg.chunk_kimi_delta_attention(q.view(shape), k.view(shape), v.view(shape), g=gk, beta=beta,
                                                initial_state=None, output_final_state=True,
                                                use_qk_l2norm_in_kernel=True)
    rcore, rstate = mg.recurrent_kimi_delta_attention(q.view(shape), k.view(shape), v.view(shape), g=gk, beta=beta,
                                                      initial_state=None, output_final_state=True,
                                                      use_qk_l2norm_in_kernel=True)
    gate = layer.g_b_proj(layer.g_a_proj(x))
    normed = layer.o_norm(core, gate.view(shape)).reshape(1, T, -1)
    y = layer.o_proj(normed)
    t.update(qkv_raw=raw, conv=conv, fproj=fproj, g=gk.reshape(1, T, -1), blog=blog, beta=beta, core=core.reshape(1, T, -1),
             state=state, rcore=rcore.reshape(1, T, -1), rstate=rstate, gate=gate, normed=normed, y=y)
    return t


def kda_fixture():
    tensors, notes = {}, {}
    meta = {"T": T, "T1": T1, "T2": T2, "hidden": 32, "heads": 3, "head_dim": 16, "conv": 4, "chunk": 64,
            "norm_eps": 1e-5}
    for tag, lb, seed in (("b", -5.0, 1), ("u", None, 2)):
        cfg = config(lb)
        layer = build(cfg, seed)
        x = torch.randn(1, T, 32, generator=torch.Generator().manual_seed(100 + seed))
        with torch.no_grad():
            y = layer(x)
            st = stages(layer, x)
            assert maxdiff(st["y"], y) == 0.0, "stages differ from the module"
            yc = run_cached(layer, cfg, x)
            d = maxdiff(yc, y)
            assert d < 1e-5, f"{tag}: cached {d}"
            notes[f"{tag}: cached (prefill {T1}, continuation {T2}, then single rows) vs stateless"] = f"{d:.3g}"
            notes[f"{tag}: chunked vs recurrent core (torch)"] = f"{maxdiff(st['core'], st['rcore']):.3g}"
            # feature switches: each against the stored output
            other = build(config(None if lb is not None else -5.0), seed)
            notes[f"{tag}: forget gate {'softplus' if lb is not None else 'bounded -5'} instead"] = \
                f"{maxdiff(other(x), y):.3g}"
            saved = layer.conv1d.weight.clone()
            layer.conv1d.weight.zero_()
            layer.conv1d.weight[:, 0, -1] = 1.0
            notes[f"{tag}: convolution taps replaced by identity (silu kept)"] = f"{maxdiff(layer(x), y):.3g}"
            layer.conv1d.weight.copy_(saved)
            saved = layer.g_b_proj.weight.clone()
            layer.g_b_proj.weight.zero_()
            notes[f"{tag}: output gate constant 0.5"] = f"{maxdiff(layer(x), y):.3g}"
            layer.g_b_proj.weight.copy_(saved)
            ycut = torch.cat([layer(x[:, :T1]), layer(x[:, T1:])], dim=1)
            notes[f"{tag}: state dropped after {T1} rows"] = f"{maxdiff(ycut, y):.3g}"
        p = tag + "."
        tensors[p + "x"] = x[0]
        tensors[p + "y_cached"] = yc[0]
        for k, v in st.items():
            tensors[p + k] = v[0]
        for name, w in layer.named_parameters():
            tensors[p + "w." + name] = w.detach().clone()
        meta[p + "lower_bound"] = "none" if lb is None else lb
    write("kda.safetensors", tensors, meta, notes)


NOTES = []


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


def write_notes():
    with open(os.path.join(OUT, "NOTES.md"), "w") as f:
        f.write("# GLM-5.3 part fixtures\n\nWritten by tools/oracle_glm53_parts.py (" +
                ", ".join(f"{k} {v}" for k, v in sorted(versions().items())) +
                "), checked by tests/unit/test_glm53_parts.c. Each note compares the part's output with a\n"
                "feature switched off against its output as stored (max |diff|, or how many selections\n"
                "change), so a part that ignored the feature would miss the fixture by about that much.\n" +
                "".join(NOTES))


# ---------------------------------------------------------------- pooled indexer

PT, GAP_MIN = 40, 1e-4


def pool_config(kpool, topk, tail):
    cfg = config(-5.0)
    cfg.index_kpool, cfg.index_topk, cfg.index_kpool_always_select_tail = kpool, topk, tail
    cfg.index_n_heads, cfg.index_head_dim = 8, 16
    return cfg


def run_indexer(ix, x, qr):
    T = x.shape[1]
    return ix(hidden_states=x, q_resid=qr, attention_mask=torch.ones(1, T, dtype=torch.bool), past_key_values=None)


def selection_sets(idx):
    return [sorted(set(v for v in row.tolist() if v >= 0)) for row in idx[0]]


def pool_fixture():
    tensors, notes = {}, {}
    meta = {"T": PT, "hidden": 32, "q_lora_rank": 24, "heads": 8, "head_dim": 16}
    for tag, kpool, topk, tail in (("t4", 4, 8, True), ("n4", 4, 8, False), ("t3", 3, 6, True)):
        for attempt in range(50):
            seed = 300 + attempt
            g = torch.Generator().manual_seed(seed)
            cfg = pool_config(kpool, topk, tail)
            ix = mg.Glm5NextTextIndexer(cfg, 0).float().eval()
            with torch.no_grad():
                for name, p in sorted(ix.named_parameters()):
                    if name.startswith("k_norm"):
                        p.copy_((1.0 if name.endswith("weight") else 0.0) + torch.randn(p.shape, generator=g) * 0.1)
                    elif name == "index_kpool_compress_ape":
                        p.copy_(torch.randn(p.shape, generator=g))
                    else:
                        p.copy_(torch.randn(p.shape, generator=g) / (p.shape[-1] ** 0.5))
                x = torch.randn(1, PT, 32, generator=g)
                qr = torch.randn(1, PT, 24, generator=g)
                idx = run_indexer(ix, x, qr)
                k = ix.k_norm(ix.wk(x))
                gate = torch.nn.functional.linear(x, ix.index_kpool_compress_gate)
                q = ix.wq_b(qr).view(1, PT, 8, 16)
                w = ix.weights_proj(x) * 8 ** -0.5
                packed = torch.cat([k, gate, torch.ones(1, PT, 1)], dim=-1)
                pkeys, pidx, pvalid = ix.get_pooled_states(packed)
                sc = torch.relu(torch.einsum("bthd,bpd->bthp", q, pkeys) * 16 ** -0.5)
                scores = torch.einsum("bth,bthp->btp", w, sc)[0]
            # the selection must not hang on a near tie
            gap = float("inf")
            for t in range(PT):
                vis = (t + 1) // kpool
                want = min(topk // kpool, vis)
                if 0 < want < vis:
                    v = scores[t, :vis].sort(descending=True).values
                    gap = min(gap, (v[want - 1] - v[want]).item())
            if gap > GAP_MIN:
                break
        else:
            raise SystemExit(f"{tag}: no seed without near ties")
        # a query's selection depends on no later position: the selection of a
        # prefix's last row equals the full run's row (what a decode computes)
        full = selection_sets(idx)
        with torch.no_grad():
            for t in (0, kpool - 1, kpool, 2 * kpool + 1, PT // 2, PT - 1):
                pre = selection_sets(run_indexer(ix, x[:, :t + 1], qr[:, :t + 1]))[-1]
                assert pre == full[t], f"{tag}: prefix {t}: {pre} vs {full[t]}"
        width = idx.shape[-1]
        sel = torch.full((PT, width), -1, dtype=torch.int64)
        for t, row in enumerate(full):
            sel[t, :len(row)] = torch.tensor(row, dtype=torch.int64)
        p = tag + "."
        tensors.update({p + "x": x[0], p + "q_resid": qr[0], p + "k": k[0], p + "gate": gate[0],
                        p + "q": q[0].reshape(PT, -1), p + "w": w[0], p + "pool_keys": pkeys[0],
                        p + "scores": scores, p + "sel": sel})
        for name, prm in ix.named_parameters():
            tensors[p + "w." + name] = prm.detach().clone()
        meta[p + "kpool"], meta[p + "topk"], meta[p + "tail"] = kpool, topk, int(tail)
        notes[f"{tag}: kpool {kpool}, topk {topk}, tail {tail}: min top-k gap (seed {seed})"] = f"{gap:.3g}"
        # how much the pooling's parts matter: rows whose selection changes
        with torch.no_grad():
            saved = ix.index_kpool_compress_ape.clone()
            ix.index_kpool_compress_ape.zero_()
            d_ape = sum(a != b for a, b in zip(selection_sets(run_indexer(ix, x, qr)), full))
            ix.index_kpool_compress_ape.copy_(saved)
            saved = ix.index_kpool_compress_gate.clone()
            ix.index_kpool_compress_gate.zero_()
            d_gate = sum(a != b for a, b in zip(selection_sets(run_indexer(ix, x, qr)), full))
            ix.index_kpool_compress_gate.copy_(saved)
            ix.index_kpool_always_select_tail = not tail
            d_tail = sum(a != b for a, b in zip(selection_sets(run_indexer(ix, x, qr)), full))
            ix.index_kpool_always_select_tail = tail
        notes[f"{tag}: rows whose selection changes with ape zero"] = f"{d_ape}/{PT}"
        notes[f"{tag}: rows whose selection changes with the gate zero (plain mean)"] = f"{d_gate}/{PT}"
        notes[f"{tag}: rows whose selection changes with the tail rule flipped"] = f"{d_tail}/{PT}"
    write("pool_index.safetensors", tensors, meta, notes)


if __name__ == "__main__":
    kda_fixture()
    pool_fixture()
    write_notes()
