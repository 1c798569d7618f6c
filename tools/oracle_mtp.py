#!/usr/bin/env python3
# oracle_mtp.py -- the MTP fixture of tools/make_oracle.py (registered there
# with builder "oracle_mtp"; run with `make_oracle.py --only deepseek_v3_mtp`).
#
# A tiny random DeepSeek-V3 model with num_nextn_predict_layers 1. The main
# model is built, initialised and margin-checked as make_oracle.py does for
# the other fixtures; the MTP layer is transformers' own MtpLayer (inside
# MtpModel, modeling_layers.py), initialised the same way. The checkpoint
# holds the MTP layer under the names DeepSeek-V3 ships it with, at layer
# index L = num_hidden_layers:
#
#   model.layers.L.enorm.weight, .hnorm.weight, .eh_proj.weight [hid, 2 hid]
#   model.layers.L.{input_layernorm, self_attn.*, post_attention_layernorm,
#                   mlp.gate.*, mlp.experts.E.*, mlp.shared_experts.*}
#   model.layers.L.shared_head.norm.weight
#   model.layers.L.shared_head.head.weight   (a copy of lm_head.weight)
#   model.layers.L.embed_tokens.weight       (a copy of model.embed_tokens.weight)
#
# and the references are computed from the files on disk: the main model with
# from_pretrained, the MTP model with MtpModel.from_pretrained (the loader
# generate(use_mtp=True) uses), after checking that it loaded exactly the
# tensors written.
#
# Extra outputs (besides make_oracle.py's logits.<i> and hidden.0.<k>):
#   reference.safetensors  mtp_logits.<i> F32 [S_i - 1, vocab]: row t is the
#                          MTP draft from (main final hidden state at t, after
#                          model.norm; embedding of token t+1), RoPE position
#                          t+1, attending to rows 0..t: HF's logits for the
#                          token at t+2.
#                          final_hidden.<i> F32 [S_i, hidden]: the main model's
#                          last_hidden_state (after model.norm).
#   reference.json         per sequence also "mtp_argmax", "mtp_top2_margin";
#                          "generation_mtp": generate(use_mtp=True) greedy,
#                          which must equal "generation".
# Router margins: the MTP layer's router is probed like the main model's and
# must clear the same margin on every sequence.

import os
import shutil
import tempfile

import make_oracle as mo


def mtp_checkpoint_tensors(mtp_sd, L, embed, lm_head):
    """MtpModel state dict (one layer) -> checkpoint tensors under model.layers.L."""
    out = {}
    p = f"model.layers.{L}."
    for k, t in mtp_sd.items():
        if not k.startswith("layers.0."):
            continue  # embed_tokens / shared_head: the main model's
        k = k[len("layers.0."):]
        if k == "post_norm.weight":
            out[p + "shared_head.norm.weight"] = t
        elif k.startswith("mtp_block.mlp.experts."):
            which = k.rsplit(".", 1)[1]
            E = t.shape[0]
            for e in range(E):
                if which == "gate_up_proj":
                    inter = t.shape[1] // 2
                    out[f"{p}mlp.experts.{e}.gate_proj.weight"] = t[e, :inter]
                    out[f"{p}mlp.experts.{e}.up_proj.weight"] = t[e, inter:]
                else:
                    out[f"{p}mlp.experts.{e}.down_proj.weight"] = t[e]
        elif k.startswith("mtp_block."):
            out[p + k[len("mtp_block."):]] = t
        else:
            out[p + k] = t
    out[p + "shared_head.head.weight"] = lm_head
    out[p + "embed_tokens.weight"] = embed
    return {k: v.contiguous().clone() for k, v in out.items()}


def mtp_full_logits(mtp, ids, final_hidden):
    """HF MtpModel's first layer over a whole sequence at once: rows t = 0..S-2
    take (final_hidden[t], ids[t+1]) at position t+1 (MtpModel.forward's steps
    with an empty MtpCache, without its last-row slicing)."""
    from transformers.cache_utils import MtpCache
    torch = mo.torch
    S = len(ids)
    inp = torch.tensor([ids[1:]])
    pos = torch.arange(1, S).unsqueeze(0)
    cache = MtpCache(config=mtp.config)
    emb = mtp.embed_tokens(inp)
    pe = mtp.rotary_emb(emb, position_ids=pos)
    masks = mtp.create_masks_for_mtp_layer(0, emb, cache, pos)
    out = mtp.layers[0](emb, final_hidden[:, :S - 1], position_embeddings=pe, position_ids=pos,
                        past_key_values=cache, **masks)
    return mtp._project_to_logits(out)[0].float().contiguous()


def mtp_incremental_check(mtp, ids, final_hidden, full, split):
    """MtpModel.forward as generate() calls it (a first call over rows
    0..split-1, then one row at a time with the cache) reproduces each row's
    full-sequence logits."""
    from transformers.cache_utils import MtpCache
    torch = mo.torch
    S = len(ids)
    cache = MtpCache(config=mtp.config)
    spans = [(0, split)] + [(t, t + 1) for t in range(split, S - 1)]
    for a, b in spans:
        inp = torch.tensor([ids[a + 1:b + 1]])
        pos = torch.arange(a + 1, b + 1).unsqueeze(0)
        _, lg, _ = mtp(input_ids=inp, last_hidden_states=final_hidden[:, a:b], attention_mask=None,
                       position_ids=pos, mtp_cache=cache)
        d = (lg[0, -1].float() - full[b - 1]).abs().max().item()
        assert d < 1e-4, ("incremental MTP logits differ from the full-sequence ones", b - 1, d)


def make_fixture(name, spec, outroot, make_oracle_module=None):
    global mo
    if make_oracle_module is not None:
        mo = make_oracle_module   # the running make_oracle (its imports done)
    if not hasattr(mo, "torch"):
        mo.lazy_imports()
    torch = mo.torch
    from transformers.modeling_layers import MtpModel
    d = spec["dims"]
    L = d["num_hidden_layers"]
    cfg = mo.build_config(d)
    cfg.num_nextn_predict_layers = 1
    outdir = os.path.join(outroot, name)
    if os.path.isdir(outdir):
        shutil.rmtree(outdir)
    os.makedirs(outdir)
    g = torch.Generator().manual_seed(spec["seed"])
    seqs = [torch.randint(0, d["vocab_size"], (n,), generator=g).tolist() for n in mo.SEQ_LENS]

    tmp = tempfile.mkdtemp(prefix="oracle_mtp_")
    try:
        for attempt in range(mo.MAX_ATTEMPTS):
            wseed = spec["seed"] + 1 + attempt
            torch.manual_seed(wseed)
            model = mo.new_model(cfg)
            mo.init_weights(model, wseed)
            mtp = MtpModel(model, 1).eval()
            init_mtp_weights(mtp, wseed + 7919)
            res = mo.evaluate(model, seqs)
            with torch.no_grad():
                probe = mo.RouterProbe(mtp)
                try:
                    for s in seqs:
                        h = model(torch.tensor([s]), use_cache=False, output_hidden_states=True).hidden_states[-1]
                        mtp_full_logits(mtp, s, h)
                    mtp_margin = probe.min_margin()
                finally:
                    probe.remove()
            ok = (res["router_margin"] > mo.ROUTER_MARGIN_MIN and mtp_margin > mo.ROUTER_MARGIN_MIN
                  and res["gen_margin"] > 10 * mo.MARGIN_TOL)
            print(f"  [{name}] weight seed {wseed}: min router margin {res['router_margin']:.3e} (MTP layer "
                  f"{mtp_margin:.3e}), min generation top2 margin {res['gen_margin']:.3e} -> "
                  f"{'ok' if ok else 'retry'}")
            if ok:
                break
        else:
            raise SystemExit(f"{name}: no seed with sufficient margins")

        # ---- config.json + model.safetensors (main weights + the MTP layer)
        model.save_pretrained(outdir)
        gpath = os.path.join(outdir, "generation_config.json")
        if os.path.exists(gpath):
            os.remove(gpath)
        cpath = os.path.join(outdir, "config.json")
        stpath = os.path.join(outdir, "model.safetensors")
        mo.patch_config(cpath)
        sd = mo.read_safetensors(stpath)
        extra = mtp_checkpoint_tensors(mtp.state_dict(), L, sd["model.embed_tokens.weight"], sd["lm_head.weight"])
        assert not set(extra) & set(sd)
        sd.update(extra)
        mo.save_file(dict(sorted(sd.items())), stpath, metadata={"format": "pt"})

        # ---- the references, from the files: HF's loaders
        m2 = mo.load_model(outdir)
        assert m2.config.num_mtp_layers == 1
        # DeepseekV3ForCausalLM names only V3's layer 61 as its MTP layer; this
        # checkpoint's is layer L
        m2._keys_to_ignore_on_load_unexpected = [rf"model\.layers\.{L}.*"]
        mtp2 = MtpModel.from_pretrained(m2).eval()
        want = mtp.state_dict()
        got = mtp2.state_dict()
        for k, t in want.items():
            if k.startswith("layers."):
                assert torch.equal(got[k], t), f"MtpModel.from_pretrained loaded {k} differently"
        assert mtp2.shared_head.weight is m2.lm_head.weight
        ref = {}
        seq_entries = []
        with torch.no_grad():
            for i, s in enumerate(seqs):
                out = m2(torch.tensor([s]), use_cache=False, output_hidden_states=True)
                lg = out.logits[0].float().contiguous()
                assert torch.equal(lg, res["logits"][i]), f"{name}: reload mismatch on seq {i}"
                h = out.hidden_states[-1]
                ml = mtp_full_logits(mtp2, s, h)
                if i == 0:
                    mtp_incremental_check(mtp2, s, h, ml, split=8)
                ref[f"logits.{i}"] = lg
                ref[f"final_hidden.{i}"] = h[0].float().contiguous()
                ref[f"mtp_logits.{i}"] = ml
                seq_entries.append({
                    "tokens": s,
                    "argmax": lg.argmax(-1).tolist(),
                    "top2_margin": [float(x) for x in mo.top2(lg).tolist()],
                    "mtp_argmax": ml.argmax(-1).tolist(),
                    "mtp_top2_margin": [float(x) for x in mo.top2(ml).tolist()],
                })
            for k, hk in enumerate(res["hidden"]):
                ref[f"hidden.0.{k}"] = hk.contiguous()
            gc = mo.GenerationConfig(do_sample=False, max_new_tokens=mo.GEN_NEW_TOKENS, min_new_tokens=0,
                                     eos_token_id=None, pad_token_id=0, bos_token_id=0, num_beams=1, use_mtp=True)
            m2.generation_config = gc
            ids = torch.tensor([res["prompt"]])
            gen_mtp = m2.generate(ids, generation_config=gc, attention_mask=torch.ones_like(ids))
            gen_mtp = gen_mtp[0, len(res["prompt"]):].tolist()
        assert gen_mtp == res["gen"], ("generate(use_mtp=True) differs from greedy", gen_mtp, res["gen"])
        mo.save_file(ref, os.path.join(outdir, "reference.safetensors"))

        notes = ("DeepSeek-V3 style tiny model (q_lora, 2 shared experts, n_group 4 / topk_group 2, yarn) with "
                 "num_nextn_predict_layers 1: the MTP layer is model.layers.%d.* (enorm, hnorm, eh_proj, a MoE "
                 "decoder block, shared_head.norm, copies of lm_head as shared_head.head and of the embedding). "
                 "References from HF's loaders on these files (MtpModel.from_pretrained with the main model's "
                 "unexpected-key pattern pointed at layer %d). mtp_logits.<i> row t: eh_proj(cat(enorm(embed(token "
                 "t+1)), hnorm(final_hidden[t]))) -> decoder block at position t+1 over rows 0..t -> "
                 "shared_head.norm -> lm_head. Incremental MtpModel.forward with an MtpCache reproduces the rows "
                 "(checked, < 1e-4); generate(use_mtp=True) equals plain greedy (checked). float32, eager "
                 "attention, eager experts, 1 thread, CPU. Weight seed %d (MTP layer: %d). Min router margin "
                 "%.3e (MTP layer %.3e)." % (L, L, wseed, wseed + 7919, res["router_margin"], mtp_margin))
        reference = {
            "name": name,
            "versions": mo.versions(),
            "margin_tolerance": mo.MARGIN_TOL,
            "mtp_layer": L,
            "sequences": seq_entries,
            "generation": {"prompt": res["prompt"], "tokens": res["gen"]},
            "generation_mtp": {"prompt": res["prompt"], "tokens": gen_mtp},
            "notes": notes,
        }
        with open(os.path.join(outdir, "reference.json"), "w") as f:
            f.write(mo.fmt_json(reference))
        sizes = {fn: os.path.getsize(os.path.join(outdir, fn)) for fn in sorted(os.listdir(outdir))}
        print(f"  [{name}] wrote {outdir}: " + ", ".join(f"{k} {v/1e6:.2f}MB" for k, v in sizes.items()))
        print(f"  [{name}] min MTP top2 margin "
              f"{min(min(e['mtp_top2_margin']) for e in seq_entries):.3e}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def init_mtp_weights(mtp, seed):
    """make_oracle.init_weights' distributions for the MTP layer's own weights
    (the embedding and head are the main model's and stay as they are)."""
    torch = mo.torch
    from transformers.models.deepseek_v3.modeling_deepseek_v3 import (
        DeepseekV3Experts, DeepseekV3RMSNorm, DeepseekV3TopkRouter)
    torch.manual_seed(seed)
    with torch.no_grad():
        for mod in mtp.layers.modules():
            if isinstance(mod, torch.nn.Linear):
                mod.weight.copy_(torch.randn(mod.weight.shape) * mod.weight.shape[1] ** -0.5)
            elif isinstance(mod, DeepseekV3RMSNorm):
                mod.weight.copy_(torch.rand(mod.weight.shape) + 0.5)
            elif isinstance(mod, DeepseekV3TopkRouter):
                mod.weight.copy_(torch.randn(mod.weight.shape) * mod.weight.shape[1] ** -0.5)
                mod.e_score_correction_bias.copy_(torch.rand(mod.e_score_correction_bias.shape) * 0.3)
            elif isinstance(mod, DeepseekV3Experts):
                gu, dn = mod.gate_up_proj, mod.down_proj
                gu.copy_(torch.randn(gu.shape) * gu.shape[2] ** -0.5)
                dn.copy_(torch.randn(dn.shape) * dn.shape[2] ** -0.5)
