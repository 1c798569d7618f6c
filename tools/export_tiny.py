#!/usr/bin/env python3
"""Export a colibri-tiny training checkpoint to models/colibri-tiny/ (HF layout).

  python3 tools/export_tiny.py --ckpt /work/ckpt/ckpt.pt --out models/colibri-tiny

Writes config.json, model.safetensors (bf16; e_score_correction_bias kept F32),
generation_config.json, keeps tokenizer.json/tokenizer_config.json, measures
the held-out perplexity with HF (f32 checkpoint and the exported bf16 file,
method of tools/hf_ppl.py), generates sample continuations, and writes
README.md (the model card) and eval.json (numbers + greedy token ids for
engine tests).
"""
import argparse
import datetime as dt
import hashlib
import json
import math
import os
import subprocess
import sys
import time

import torch
import torch.nn.functional as F

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools"))

PROMPTS = [
    "It is a truth universally acknowledged, that",
    "Call me Ishmael. Some years ago",
    "\"My dear Watson,\" said Holmes,",
]


def sha256_file(p):
    h = hashlib.sha256()
    with open(p, "rb") as f:
        for b in iter(lambda: f.read(1 << 20), b""):
            h.update(b)
    return h.hexdigest()


MAX_WINDOWS = 0  # testing only


def ppl_windows(model, ids, N, bos=0, bsz=4):
    """tools/hf_ppl.py method: non-overlapping N-token windows, each run as
    [BOS] + window[:-1], all N window tokens scored, f32 log-softmax."""
    nwin = len(ids) // N
    if MAX_WINDOWS:
        nwin = min(nwin, MAX_WINDOWS)
    nll = 0.0
    n = 0
    with torch.no_grad():
        for w0 in range(0, nwin, bsz):
            ws = list(range(w0, min(nwin, w0 + bsz)))
            win = torch.stack([ids[w * N:(w + 1) * N] for w in ws])
            x = torch.cat([torch.full((len(ws), 1), bos, dtype=torch.long), win[:, :-1]], dim=1)
            lp = F.log_softmax(model(input_ids=x, use_cache=False).logits.float(), dim=-1)
            nll -= lp.gather(-1, win.unsqueeze(-1)).sum().item()
            n += win.numel()
    return math.exp(nll / n), n, nwin


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ckpt", default="/work/ckpt/ckpt.pt")
    ap.add_argument("--out", default=os.path.join(ROOT, "models", "colibri-tiny"))
    ap.add_argument("--data", default=os.path.join(ROOT, "data"))
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--skip-f32-ppl", action="store_true")
    ap.add_argument("--new-tokens", type=int, default=48)
    ap.add_argument("--note", action="append", default=[], help="extra line(s) for the card's training section")
    ap.add_argument("--max-windows", type=int, default=0, help="testing only: limit the ppl windows")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    global MAX_WINDOWS
    MAX_WINDOWS = a.max_windows

    import transformers
    from tokenizers import Tokenizer
    from transformers import AutoModelForCausalLM, DeepseekV3ForCausalLM, GenerationConfig
    from train_tiny import model_config
    import corpus

    t_begin = time.time()
    st = torch.load(a.ckpt, weights_only=False, map_location="cpu")
    cfg = model_config()
    cfg._attn_implementation = "eager"
    model = DeepseekV3ForCausalLM(cfg)
    model.load_state_dict(st["model"])
    model.eval()
    nparam = sum(p.numel() for p in model.parameters())
    n_moe = cfg.num_hidden_layers - cfg.first_k_dense_replace
    per_expert = 3 * cfg.hidden_size * cfg.moe_intermediate_size
    active = nparam - n_moe * (cfg.n_routed_experts - cfg.num_experts_per_tok) * per_expert

    tok = Tokenizer.from_file(os.path.join(a.out, "tokenizer.json"))
    held_path = os.path.join(a.data, "persuasion.txt")
    held = torch.tensor(tok.encode(open(held_path, encoding="utf-8").read()).ids, dtype=torch.long)

    res = {"transformers": transformers.__version__, "torch": torch.__version__}
    if not a.skip_f32_ppl:
        p, n, w = ppl_windows(model, held, 512)
        res["ppl512_f32_checkpoint"] = p
        print("f32 checkpoint ppl@512 %.4f (%d tokens)" % (p, n), flush=True)

    # ---- save bf16, bias stays F32
    os.makedirs(a.out, exist_ok=True)
    biases = {n: b.detach().clone().float() for n, b in model.named_buffers() if n.endswith("e_score_correction_bias")}
    mb = model.to(torch.bfloat16)
    for n, b in biases.items():
        mod = mb.get_submodule(n.rsplit(".", 1)[0])
        mod.e_score_correction_bias = b
    mb.config.architectures = ["DeepseekV3ForCausalLM"]
    for k in ("_experts_implementation",):
        if hasattr(mb.config, k):
            try:
                delattr(mb.config, k)
            except Exception:
                pass
    mb.save_pretrained(a.out, safe_serialization=True)
    gen = GenerationConfig(bos_token_id=0, eos_token_id=1, pad_token_id=2, do_sample=True,
                           temperature=0.8, top_p=0.95, max_new_tokens=128)
    gen.save_pretrained(a.out)
    del model, mb

    from safetensors import safe_open
    with safe_open(os.path.join(a.out, "model.safetensors"), "pt") as f:
        keys = list(f.keys())
        dts = {}
        for k in keys:
            dts.setdefault(str(f.get_slice(k).get_dtype()), []).append(k)
    assert all(k.endswith("e_score_correction_bias") for k in dts.get("F32", [])), dts.get("F32")
    assert len(dts.get("F32", [])) == n_moe, dts.keys()
    res["safetensors_tensors"] = len(keys)
    res["safetensors_dtypes"] = {k: len(v) for k, v in dts.items()}
    print("safetensors:", res["safetensors_dtypes"], "e.g.", [k for k in keys if "experts.0." in k][:3], flush=True)

    # ---- reload exported model in HF, ppl (bf16 weights, f32 compute), samples
    m2 = AutoModelForCausalLM.from_pretrained(a.out, dtype=torch.float32, attn_implementation="eager")
    m2.eval()
    p, n, w = ppl_windows(m2, held, 512)
    res.update({"ppl512": p, "ppl512_scored_tokens": n, "ppl512_windows": w, "heldout_tokens": len(held)})
    print("exported bf16 ppl@512 %.4f (%d windows)" % (p, w), flush=True)
    p1, n1, w1 = ppl_windows(m2, held, 1024, bsz=2)
    res.update({"ppl1024": p1, "ppl1024_windows": w1})
    print("exported bf16 ppl@1024 %.4f" % p1, flush=True)

    samples = []
    for i, prompt in enumerate(PROMPTS):
        ids = torch.tensor([[0] + tok.encode(prompt).ids])
        with torch.no_grad():
            g = m2.generate(ids, do_sample=False, max_new_tokens=a.new_tokens, use_cache=True)
            torch.manual_seed(1000 + i)
            s = m2.generate(ids, do_sample=True, temperature=0.8, top_p=0.95, top_k=0,
                            max_new_tokens=a.new_tokens, use_cache=True)
        gi = g[0, ids.shape[1]:].tolist()
        si = s[0, ids.shape[1]:].tolist()
        samples.append({"prompt": prompt, "prompt_ids": ids[0].tolist(),
                        "greedy_ids": gi, "greedy": tok.decode(gi, skip_special_tokens=False),
                        "sampled": tok.decode(si, skip_special_tokens=False)})
        print("PROMPT %r\n  greedy : %r\n  sampled: %r" % (prompt, samples[-1]["greedy"], samples[-1]["sampled"]),
              flush=True)
    res["samples"] = samples

    # ---- training figures from the checkpoint
    hist = st.get("hist", [])
    tr = [h for h in hist if "loss" in h]
    ev = [h for h in hist if "heldout_ppl_512" in h]
    last = tr[-5:]
    res["train"] = {
        "steps": st["step"], "tokens_seen": st["tokens"], "train_wall_s": round(st["train_s"], 1),
        "final_train_loss_avg_last_50_steps": (sum(h["loss"] for h in last) / len(last)) if last else None,
        "tok_per_s_median": sorted(h["tok_s"] for h in tr)[len(tr) // 2] if tr else None,
        "args": st.get("args"), "heldout_evals": ev[-6:],
    }
    res["parameters"] = nparam
    res["active_parameters_per_token"] = active

    corpus_rows = []
    for rel in sorted(corpus.EXPECTED):
        pth = os.path.join(a.data, rel)
        corpus_rows.append((rel, os.path.getsize(pth), sha256_file(pth), corpus.EXPECTED[rel]))
    res["train_tokens"] = sum(len(tok.encode(open(os.path.join(a.data, r[0]), encoding="utf-8").read()).ids)
                              for r in corpus_rows if r[0].startswith("train/"))
    res["corpus"] = [{"file": r[0], "bytes": r[1], "sha256": r[2]} for r in corpus_rows]
    files = {}
    for fn in ("config.json", "model.safetensors", "generation_config.json", "tokenizer.json", "tokenizer_config.json"):
        files[fn] = (os.path.getsize(os.path.join(a.out, fn)), sha256_file(os.path.join(a.out, fn)))
    res["files"] = {k: {"bytes": v[0], "sha256": v[1]} for k, v in files.items()}
    with open(os.path.join(a.out, "eval.json"), "w", encoding="utf-8") as f:
        json.dump(res, f, ensure_ascii=False, indent=2)
        f.write("\n")
    res["notes"] = a.note
    write_card(a.out, cfg, res, corpus_rows, files, tok)
    print("export done in %.0f s" % (time.time() - t_begin), flush=True)


def write_card(out, cfg, res, corpus_rows, files, tok):
    tr = res["train"]
    args = tr.get("args") or {}
    ntrain = sum(r[1] for r in corpus_rows if r[0].startswith("train/"))
    L = []
    w = L.append
    w("# colibri-tiny")
    w("")
    w("A %.1fM-parameter model in the real **DeepSeek-V3 architecture** (MLA + MoE with "
      "group-limited sigmoid routing, `DeepseekV3ForCausalLM`), trained from scratch on the CPU "
      "on ~6 MB of public-domain English books, so that colibri has a default model whose output "
      "reads as text and whose perplexity gives every KV-tier / weight-format quality number a meaning. "
      "It is a toy: it writes 19th-century-novel-flavoured English, not facts." % (res["parameters"] / 1e6))
    w("")
    w("Built by `tools/corpus.py` → `tools/train_tokenizer.py` → `tools/train_tiny.py` → "
      "`tools/export_tiny.py` (torch %s, transformers %s)." % (res["torch"], res["transformers"]))
    w("")
    w('## What text it expects')
    w('')
    w('It learned from Project Gutenberg plain text: prose hard-wrapped at about 70 columns (a newline inside every paragraph, a blank line between paragraphs), and it writes the same way. Prose with one line per paragraph (most web pages, Markdown, chat) is unlike anything it saw, and its perplexity on such text is several times higher. Measured with `colibri eval -m models/colibri-tiny --text FILE --ctx 256 --max-windows 8 --kv f32` on the first 400 lines of `/usr/share/common-licenses/GPL-3` (Debian): ppl 307 as distributed (wrapped at 73 columns at most), 1822 with each paragraph joined into one line, 313 after that is wrapped again with `fold -s -w 70`. Wrap text before evaluating or prompting with it:')
    w('')
    w("    fold -s -w 70 in.txt | sed 's/ *$//' > wrapped.txt")
    w('')
    w('`tests/cli/model_card.sh` checks these three cases.')
    w('')
    w('## Held-out text and `eval.json`')
    w('')
    w("`data/` is not in the repository. `python3 tools/corpus.py --out data` rebuilds it from Debian bookworm packages (`apt-get download`, so it needs network access to a Debian mirror): the training books under `data/train/` and the held-out `data/persuasion.txt` (Jane Austen's *Persuasion*, from the same package as five of the training novels, never written into `data/train/`), each checked against the sha256 in the corpus table below. The perplexities below are measured on that file; `eval.json` holds them, with the corpus and file hashes and the samples' greedy token ids, as written by `tools/export_tiny.py`, plus the MTP head's entry written by `tools/train_mtp.py card`.")
    w("")
    w("## Held-out perplexity (Jane Austen, *Persuasion* — never trained on)")
    w("")
    w("| measured by | ctx | windows | scored tokens | perplexity |")
    w("|---|---|---|---|---|")
    w("| HF transformers, exported bf16 weights, f32 compute | 512 | %d | %d | **%.4f** |" %
      (res["ppl512_windows"], res["ppl512_scored_tokens"], res["ppl512"]))
    if "ppl512_f32_checkpoint" in res:
        w("| HF transformers, f32 training checkpoint | 512 | %d | %d | %.4f |" %
          (res["ppl512_windows"], res["ppl512_scored_tokens"], res["ppl512_f32_checkpoint"]))
    w("| HF transformers, exported bf16 weights, f32 compute | 1024 | %d | %d | %.4f |" %
      (res["ppl1024_windows"], res["ppl1024_windows"] * 1024, res["ppl1024"]))
    w("| colibri | 512 | | | (to be filled in by the engine) |")
    w("")
    w("Method (`tools/hf_ppl.py --model models/colibri-tiny --text data/persuasion.txt --ctx 512`):")
    w("1. `ids` = `tokenizer.json` encoding of the whole UTF-8 file (%d tokens), no special tokens added." %
      res["heldout_tokens"])
    w("2. Non-overlapping windows of N = 512 tokens: window w = ids[w·N : (w+1)·N] for "
      "w = 0 … ⌊len/N⌋−1; the shorter tail is dropped.")
    w("3. Each window is an independent sequence of N inputs `[BOS=0] + window[0:N−1]` at positions "
      "0…N−1 (no KV carried across windows); the logits at position i predict window[i], so all N "
      "tokens of every window are scored (window[0] from BOS alone).")
    w("4. ppl = exp(Σ −log softmax(logits)[target] / number of scored tokens), log-softmax in f32.")
    w("")
    w("## Architecture (`config.json`)")
    w("")
    w("| field | value |")
    w("|---|---|")
    for k in ("vocab_size", "hidden_size", "num_hidden_layers", "first_k_dense_replace", "intermediate_size",
              "num_attention_heads", "num_key_value_heads", "q_lora_rank", "kv_lora_rank", "qk_nope_head_dim",
              "qk_rope_head_dim", "v_head_dim", "n_routed_experts", "num_experts_per_tok", "n_shared_experts",
              "moe_intermediate_size", "n_group", "topk_group", "routed_scaling_factor", "norm_topk_prob",
              "max_position_embeddings", "rope_interleave", "rms_norm_eps", "tie_word_embeddings"):
        w("| %s | %s |" % (k, json.dumps(getattr(cfg, k))))
    w("| rope_parameters | %s |" % json.dumps(cfg.rope_parameters))
    w("")
    w("Parameters: %d total (%.2fM), about %d active per token (2 of %d routed experts plus the shared "
             "one). `model.safetensors`: %d tensors, all bf16 except the %d `mlp.gate.e_score_correction_bias` "
             "vectors (F32, as in DeepSeek's checkpoints); experts stored per expert "
             "(`mlp.experts.N.{gate,up,down}_proj.weight`)." %
             (res["parameters"], res["parameters"] / 1e6, res["active_parameters_per_token"],
              cfg.n_routed_experts, res["safetensors_tensors"], res["safetensors_dtypes"].get("F32", 0)))
    w("")
    w("## Tokenizer")
    w("")
    w("Byte-level BPE, 8192 ids including 5 added tokens (7931 merges), trained with the PyPI `tokenizers` "
      "library on the training books only. Pre-tokenizer exactly DeepSeek-V3's: Sequence of three "
      "`Split(Isolated)` (`\\p{N}{1,3}`, the CJK/kana class, the DeepSeek word regex) then "
      "`ByteLevel(add_prefix_space=false, use_regex=false)`; no normalizer; ByteLevel decoder and "
      "post-processor. Added tokens: 0 `<｜begin▁of▁sentence｜>` (BOS), 1 `<｜end▁of▁sentence｜>` (EOS), "
      "2 `<｜▁pad▁｜>` (pad), 3 `<｜User｜>`, 4 `<｜Assistant｜>` (full-width ｜ U+FF5C, ▁ U+2581). "
      "`tokenizer_config.json` is DeepSeek's schema (`LlamaTokenizerFast`, add_bos_token=true, "
      "add_eos_token=false, DeepSeek-V3 chat template without tools). The training corpus is "
      "%d bytes → %d tokens (%.2f bytes/token)." % (ntrain, res["train_tokens"], ntrain / res["train_tokens"]))
    w("")
    w("Note for transformers 5.x: like the real DeepSeek-V3 files, `add_bos_token` lives only in "
      "`tokenizer_config.json`, which transformers 5 ignores when `tokenizer.json` exists; load with "
      "`AutoTokenizer.from_pretrained(path, add_bos_token=True)` (or prepend id 0) to get the BOS that "
      "DeepSeek models expect. colibri prepends BOS from `add_bos_token`.")
    w("")
    w("## Training")
    w("")
    w("| | |")
    w("|---|---|")
    w("| steps | %d |" % tr["steps"])
    w("| tokens seen | %d (%.2f passes over the %d-token training text) |" %
      (tr["tokens_seen"], tr["tokens_seen"] / res["train_tokens"], res["train_tokens"]))
    w("| training wall time | %.1f min on 1 CPU thread (AMD EPYC, torch bf16 autocast) |" % (tr["train_wall_s"] / 60))
    w("| throughput | ~%s tokens/s (median of logged intervals) |" % tr["tok_per_s_median"])
    if tr["final_train_loss_avg_last_50_steps"] is not None:
        w("| final train loss | %.4f (mean of the last logged intervals, nats/token) |" %
          tr["final_train_loss_avg_last_50_steps"])
    w("| optimizer | AdamW β=(0.9, 0.95), weight decay %s (matrices), peak LR %s, warmup %s of the run, "
      "cosine to %s×peak, grad clip %s |" % (args.get("wd"), args.get("lr"), args.get("warmup_frac"),
                                           args.get("min_lr_frac"), args.get("clip")))
    w("| batch | %s windows × %s tokens (each window = [BOS] + tokens from one book, random offset); the last "
      "%s of the run at %s tokens with the same tokens per step |" %
      (args.get("batch"), args.get("seq"), args.get("long_frac"), args.get("long_seq")))
    w("| expert balance | DeepSeek-V3 style: after each step bias_e += γ·sign(mean load − load_e) "
      "(γ = %s for the first %s of the run, then %s), plus the complementary sequence-wise balance loss "
      "(α = %s) and router weights at %s× the LR |" %
      (args.get("bias_gamma_early"), args.get("bias_early_frac"), args.get("bias_gamma"),
       args.get("aux_alpha"), args.get("router_lr_scale")))
    for note in res.get("notes", []):
        w("")
        w(note)
    w("")
    w("## Samples (HF `generate`, prompt preceded by BOS, %s new tokens)" % "48")
    w("")
    for s in res["samples"]:
        w("**Prompt:** %s" % json.dumps(s["prompt"], ensure_ascii=False))
        w("")
        w("- greedy: %s" % json.dumps(s["prompt"] + s["greedy"], ensure_ascii=False))
        w("- sampled (temperature 0.8, top-p 0.95, seed %d): %s" %
          (1000 + res["samples"].index(s), json.dumps(s["prompt"] + s["sampled"], ensure_ascii=False)))
        w("")
    w("Greedy token ids are in `eval.json` (for engine tests).")
    w("")
    w("## Corpus (`python3 tools/corpus.py` rebuilds and checks it)")
    w("")
    w("From Debian bookworm packages (`apt-get download` + `dpkg -x`, no install): r-cran-janeaustenr "
      "(R lazy-load DB `Rdata.rdb`), golang-github-colinmarc-hdfs-dev (`testdata/mobydick.txt`), "
      "golang-github-pierrec-lz4-dev (`testdata/pg1661.txt`, `testdata/Mark.Twain-Tom.Sawyer.txt`), "
      "golang-github-andybalholm-brotli-dev (`testdata/Isaac.Newton-Opticks.txt`). Gutenberg header and "
      "footer cut, BOM and CR removed, trailing spaces stripped.")
    w("")
    w("| file | bytes | sha256 |")
    w("|---|---|---|")
    for rel, size, h, _ in corpus_rows:
        w("| `%s`%s | %d | `%s` |" % (rel, " (held out)" if not rel.startswith("train/") else "", size, h))
    w("")
    w("## Files")
    w("")
    w("| file | bytes | sha256 |")
    w("|---|---|---|")
    for fn, (size, h) in files.items():
        w("| `%s` | %d | `%s` |" % (fn, size, h))
    w("")
    w("License: the training texts are public domain; the weights and tokenizer are released with colibri.")
    with open(os.path.join(out, "README.md"), "w", encoding="utf-8") as f:
        f.write("\n".join(L) + "\n")


if __name__ == "__main__":
    main()
