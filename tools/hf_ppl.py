#!/usr/bin/env python3
"""Held-out perplexity of a DeepSeek-V3-layout model with Hugging Face transformers.

  python3 tools/hf_ppl.py --model models/colibri-tiny --text data/persuasion.txt --ctx 512

Method (the C engine replicates it exactly):
  1. ids = tokenizer.json encoding of the whole file, read as UTF-8, with no
     special tokens added (the `tokenizers` library's Tokenizer.encode(text).ids).
  2. Split ids into non-overlapping windows of N = --ctx tokens:
     window w = ids[w*N : (w+1)*N], w = 0 .. floor(len/N)-1; the tail shorter
     than N is dropped.
  3. Each window is run as its own sequence of N tokens, [BOS=0] + window[0:N-1]
     (positions 0..N-1), no KV carried between windows.  The logits at
     position i predict window[i], so all N tokens of the window are scored
     (window[0] from BOS alone).
  4. ppl = exp( sum of -log softmax(logits)[target] over all scored tokens
                / number of scored tokens ),  log-softmax in float32.
The model runs with its weights in --dtype (default: as stored, i.e. bf16 for
models/colibri-tiny) and f32 activations unless --dtype bf16 is given;
attention is "eager", single thread.
"""
import argparse
import json
import math
import os
import time

import torch
import torch.nn.functional as F


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--text", required=True)
    ap.add_argument("--ctx", type=int, default=512)
    ap.add_argument("--dtype", default="float32", choices=["float32", "bfloat16", "stored"],
                    help="compute dtype: float32 (bf16 weights upcast), bfloat16, or as stored")
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--max-windows", type=int, default=0)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--json", default="", help="also write the result here")
    a = ap.parse_args()

    torch.set_num_threads(a.threads)
    from tokenizers import Tokenizer
    from transformers import AutoModelForCausalLM

    kw = {"attn_implementation": "eager"}
    if a.dtype != "stored":
        kw["dtype"] = getattr(torch, a.dtype)
    model = AutoModelForCausalLM.from_pretrained(a.model, **kw)
    model.eval()
    tok = Tokenizer.from_file(os.path.join(a.model, "tokenizer.json"))
    bos = model.config.bos_token_id if model.config.bos_token_id is not None else 0
    text = open(a.text, encoding="utf-8").read()
    ids = torch.tensor(tok.encode(text).ids, dtype=torch.long)
    N = a.ctx
    nwin = len(ids) // N
    if a.max_windows:
        nwin = min(nwin, a.max_windows)
    nll = 0.0
    n = 0
    t0 = time.time()
    with torch.no_grad():
        for w0 in range(0, nwin, a.batch):
            ws = list(range(w0, min(nwin, w0 + a.batch)))
            win = torch.stack([ids[w * N:(w + 1) * N] for w in ws])
            x = torch.cat([torch.full((len(ws), 1), bos, dtype=torch.long), win[:, :-1]], dim=1)
            logits = model(input_ids=x, use_cache=False).logits.float()
            lp = F.log_softmax(logits, dim=-1)
            nll -= lp.gather(-1, win.unsqueeze(-1)).sum().item()
            n += win.numel()
    ppl = math.exp(nll / n)
    res = {"model": a.model, "text": os.path.basename(a.text), "text_tokens": len(ids), "ctx": N,
           "windows": nwin, "scored_tokens": n, "mean_nll": nll / n, "ppl": ppl,
           "dtype": a.dtype, "seconds": round(time.time() - t0, 1)}
    print(json.dumps(res))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f, indent=2)


if __name__ == "__main__":
    main()
