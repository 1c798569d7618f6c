#!/usr/bin/env python3
"""Train colibri-tiny: a small HF DeepseekV3ForCausalLM (MLA + MoE) on the CPU.

  python3 tools/train_tiny.py --ckpt /work/ckpt --budget-min 120 --deadline 10:05

Runs single-threaded by default (--threads).  The learning-rate schedule is a
function of *training wall time* (so a run always finishes inside its time
budget): linear warmup over the first --warmup-frac of the budget, then cosine
to --min-lr-frac of the peak.  The last --long-frac of the budget trains on
--long-seq-token windows (same tokens per step) so the model is trained at the
full 1024-token context.  With --deadline (UTC HH:MM) the schedule position
is max(train time / budget, wall time since the first start / time to the
deadline), so the cosine decay and the long phase always finish by then.

Every --ckpt-min minutes (and at the end) the full state (model, AdamW, step,
tokens seen, train time, RNG) is written atomically to CKPT/ckpt.pt; a rerun
with the same --ckpt resumes from it (the budget stored in the checkpoint wins).

Data: data/train/*.txt, tokenized with models/colibri-tiny/tokenizer.json.
Each training sample is one window inside one book: [BOS] + L tokens, loss on
the L text tokens (the same layout as the held-out perplexity: non-overlapping
windows of N tokens, each preceded by BOS).

Expert balance: HF's noaux_tc router has no auxiliary loss, so after every
optimizer step each MoE layer's e_score_correction_bias (an F32 buffer, saved
with the weights) is updated as in DeepSeek-V3:
    bias_e += gamma * sign(mean_load - load_e)
(gamma = --bias-gamma-early for the first --bias-early-frac of the run, so the
router balances within a few dozen steps, then --bias-gamma = 1e-3 as DeepSeek.)
As in DeepSeek-V3 a small complementary sequence-wise balance loss (--aux-alpha)
is added, and the router weights learn at --router-lr-scale x the LR; without
these the 16-expert router collapses onto one expert within ~20 steps.
"""
import argparse
import datetime as dt
import glob
import json
import math
import os
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BOS_ID = 0


def model_config(vocab=8192):
    from transformers import DeepseekV3Config
    return DeepseekV3Config(
        vocab_size=vocab,
        hidden_size=256,
        intermediate_size=768,
        moe_intermediate_size=256,
        num_hidden_layers=6,
        first_k_dense_replace=1,
        num_attention_heads=4,
        num_key_value_heads=4,
        q_lora_rank=128,
        kv_lora_rank=128,
        qk_nope_head_dim=64,
        qk_rope_head_dim=32,
        v_head_dim=64,
        n_routed_experts=16,
        n_shared_experts=1,
        num_experts_per_tok=2,
        n_group=4,
        topk_group=2,
        routed_scaling_factor=2.5,
        norm_topk_prob=True,
        hidden_act="silu",
        max_position_embeddings=1024,
        rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
        rope_interleave=True,
        rms_norm_eps=1e-6,
        tie_word_embeddings=False,
        attention_bias=False,
        attention_dropout=0.0,
        initializer_range=0.02,
        bos_token_id=0,
        eos_token_id=1,
        pad_token_id=2,
        use_cache=True,
        num_nextn_predict_layers=0,  # no MTP weights
    )


def load_tokens(data_dir, tok_path, cache_dir):
    from tokenizers import Tokenizer
    files = sorted(glob.glob(os.path.join(data_dir, "*.txt")))
    assert files and not any("persuasion" in f for f in files)
    cache = os.path.join(cache_dir, "train_tokens.npz")
    if os.path.exists(cache):
        z = np.load(cache)
        if list(z["names"]) == [os.path.basename(f) for f in files]:
            return [z["d%d" % i] for i in range(len(files))]
    tok = Tokenizer.from_file(tok_path)
    docs = [np.array(tok.encode(open(f, encoding="utf-8").read()).ids, dtype=np.int32) for f in files]
    np.savez(cache, names=np.array([os.path.basename(f) for f in files]),
             **{"d%d" % i: d for i, d in enumerate(docs)})
    return docs


def encode_text(tok_path, path):
    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(tok_path)
    return np.array(tok.encode(open(path, encoding="utf-8").read()).ids, dtype=np.int64)


class Sampler:
    def __init__(self, docs, seed):
        self.docs = docs
        lens = np.array([len(d) for d in docs], dtype=np.float64)
        self.p = lens / lens.sum()
        self.rng = np.random.default_rng(seed)

    def batch(self, bsz, seqlen):
        x = np.empty((bsz, seqlen + 1), dtype=np.int64)
        x[:, 0] = BOS_ID
        for b in range(bsz):
            d = self.docs[self.rng.choice(len(self.docs), p=self.p)]
            o = int(self.rng.integers(0, len(d) - seqlen))
            x[b, 1:] = d[o:o + seqlen]
        return torch.from_numpy(x)


def lm_loss(model, x, autocast):
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
        logits = model(input_ids=x[:, :-1], use_cache=False).logits
    return F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), x[:, 1:].reshape(-1))


@torch.no_grad()
def heldout_ppl(model, ids, ctx, max_windows, autocast, bsz=8):
    """Non-overlapping windows of ctx text tokens, each preceded by BOS;
    ppl = exp(mean NLL over every predicted text token)."""
    model.eval()
    nwin = len(ids) // ctx
    if max_windows:
        nwin = min(nwin, max_windows)
    nll = 0.0
    n = 0
    for w0 in range(0, nwin, bsz):
        ws = range(w0, min(nwin, w0 + bsz))
        x = torch.stack([torch.cat([torch.tensor([BOS_ID]), torch.from_numpy(ids[w * ctx:(w + 1) * ctx])])
                         for w in ws])
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
            logits = model(input_ids=x[:, :-1], use_cache=False).logits
        nll += F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), x[:, 1:].reshape(-1),
                               reduction="sum").item()
        n += x[:, 1:].numel()
    model.train()
    return math.exp(nll / n), n


class ExpertLoad:
    """Forward hooks on every MoE router: count the experts chosen per token."""

    def __init__(self, model, k, alpha):
        self.gates = []
        self.counts = []
        self.enabled = True
        self.k = k
        self.alpha = alpha
        self.bsz = 1
        self.aux = []
        for layer in model.model.layers:
            g = getattr(layer.mlp, "gate", None)
            if g is None or not hasattr(g, "e_score_correction_bias"):
                continue
            self.gates.append(g)
            self.counts.append(torch.zeros(g.e_score_correction_bias.numel()))
            g.register_forward_hook(self._hook(len(self.gates) - 1))

    def _hook(self, i):
        def f(mod, inp, out):
            if self.enabled:
                idx = out[2].reshape(-1)
                E = self.counts[i].numel()
                self.counts[i] += torch.bincount(idx, minlength=E).float()
                if self.alpha > 0 and torch.is_grad_enabled():
                    # DeepSeek-V3 complementary sequence-wise balance loss:
                    # alpha * sum_i f_i P_i per sequence, f_i = E/(K*S) * count_i,
                    # P_i = mean_t s_i,t / sum_j s_j,t (sigmoid scores s)
                    sc = out[0].sigmoid().view(self.bsz, -1, E)
                    S = sc.shape[1]
                    Pi = (sc / sc.sum(-1, keepdim=True)).mean(1)
                    oh = torch.zeros(self.bsz * S, E).scatter_(1, out[2].view(-1, self.k), 1.0)
                    fi = oh.view(self.bsz, S, E).sum(1) * (E / (self.k * S))
                    self.aux.append(self.alpha * (fi * Pi).sum(-1).mean())
        return f

    @torch.no_grad()
    def update_bias(self, gamma):
        """DeepSeek-V3 aux-loss-free balancing; returns max/mean load per layer."""
        imb = []
        for g, c in zip(self.gates, self.counts):
            mean = c.mean()
            g.e_score_correction_bias += gamma * torch.sign(mean - c)
            imb.append((c.max() / mean).item() if mean > 0 else 0.0)
            c.zero_()
        return imb


def deadline_ts(hhmm):
    if not hhmm:
        return None
    now = dt.datetime.now(dt.timezone.utc)
    h, m = map(int, hhmm.split(":"))
    t = now.replace(hour=h, minute=m, second=0, microsecond=0)
    return t.timestamp()


def lr_at(p, peak, warm, min_frac):
    if p < warm:
        return peak * max(p / warm, 0.01)
    q = min(1.0, (p - warm) / max(1e-9, 1 - warm))
    return peak * (min_frac + (1 - min_frac) * 0.5 * (1 + math.cos(math.pi * q)))


def save_ckpt(path, state):
    tmp = path + ".tmp"
    torch.save(state, tmp)
    os.replace(tmp, path)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default=os.path.join(ROOT, "data", "train"))
    ap.add_argument("--heldout", default=os.path.join(ROOT, "data", "persuasion.txt"))
    ap.add_argument("--tokenizer", default=os.path.join(ROOT, "models", "colibri-tiny", "tokenizer.json"))
    ap.add_argument("--ckpt", default="/work/ckpt")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--budget-min", type=float, default=120.0, help="training wall time (new runs)")
    ap.add_argument("--deadline", default="", help="UTC HH:MM: stop (and checkpoint) at this time")
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--seq", type=int, default=256)
    ap.add_argument("--long-seq", type=int, default=1024)
    ap.add_argument("--long-frac", type=float, default=0.08)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--min-lr-frac", type=float, default=0.1)
    ap.add_argument("--warmup-frac", type=float, default=0.03)
    ap.add_argument("--wd", type=float, default=0.1)
    ap.add_argument("--clip", type=float, default=1.0)
    ap.add_argument("--bias-gamma", type=float, default=1e-3)
    ap.add_argument("--bias-gamma-early", type=float, default=1e-2,
                    help="gamma during the first --bias-early-frac of the run (fast initial balancing)")
    ap.add_argument("--bias-early-frac", type=float, default=0.15)
    ap.add_argument("--aux-alpha", type=float, default=1e-2,
                    help="DeepSeek-V3 sequence-wise balance loss weight (0 = off)")
    ap.add_argument("--router-lr-scale", type=float, default=0.1)
    ap.add_argument("--bf16", type=int, default=1, help="bf16 autocast (weights and AdamW stay f32)")
    ap.add_argument("--experts-impl", default="grouped_mm")
    ap.add_argument("--attn-impl", default="sdpa")
    ap.add_argument("--ckpt-min", type=float, default=5.0)
    ap.add_argument("--eval-min", type=float, default=15.0)
    ap.add_argument("--eval-windows", type=int, default=24)
    ap.add_argument("--log-every", type=int, default=10)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--bench", type=int, default=0, help="run N steps, print tokens/s, save nothing")
    a = ap.parse_args()

    torch.set_num_threads(a.threads)
    torch.set_num_interop_threads(1)
    from transformers import DeepseekV3ForCausalLM

    os.makedirs(a.ckpt, exist_ok=True)
    ck_path = os.path.join(a.ckpt, "ckpt.pt")
    state = torch.load(ck_path, weights_only=False) if (os.path.exists(ck_path) and not a.bench) else None

    torch.manual_seed(a.seed)
    cfg = model_config()
    cfg._attn_implementation = a.attn_impl
    try:
        cfg._experts_implementation = a.experts_impl
    except Exception:
        pass
    model = DeepseekV3ForCausalLM(cfg)
    model.train()
    nparam = sum(p.numel() for p in model.parameters())
    is_router = lambda n: n.endswith("mlp.gate.weight")
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2 and "norm" not in n and not is_router(n)]
    no_decay = [p for n, p in model.named_parameters() if not (p.dim() >= 2 and "norm" not in n)]
    router = [p for n, p in model.named_parameters() if is_router(n)]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": a.wd, "lr_scale": 1.0},
                             {"params": no_decay, "weight_decay": 0.0, "lr_scale": 1.0},
                             {"params": router, "weight_decay": 0.0, "lr_scale": a.router_lr_scale}],
                            lr=a.lr, betas=(0.9, 0.95), eps=1e-8)
    step = 0
    tokens = 0
    train_s = 0.0
    budget_s = a.budget_min * 60
    t_start = time.time()
    sampler = Sampler(load_tokens(a.data, a.tokenizer, a.ckpt), a.seed)
    hist = []
    if state is not None:
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["opt"])
        step, tokens, train_s, budget_s = state["step"], state["tokens"], state["train_s"], state["budget_s"]
        t_start = state.get("t_start", t_start)
        sampler.rng.bit_generator.state = state["np_rng"]
        torch.set_rng_state(state["torch_rng"])
        hist = state.get("hist", [])
        print("resumed from %s: step %d, %d tokens, %.0f s trained of %.0f s" %
              (ck_path, step, tokens, train_s, budget_s), flush=True)
    else:
        print("new run: %d parameters, budget %.0f s" % (nparam, budget_s), flush=True)
    print(json.dumps({k: v for k, v in cfg.to_dict().items()
                      if k in ("hidden_size", "num_hidden_layers", "n_routed_experts", "vocab_size")}),
          flush=True)

    loadmon = ExpertLoad(model, cfg.num_experts_per_tok, a.aux_alpha)
    held = encode_text(a.tokenizer, a.heldout) if os.path.exists(a.heldout) else None
    dl = deadline_ts(a.deadline)
    tok_per_step = a.batch * a.seq
    last_ck = time.time()
    last_ev = time.time() if state is not None else 0.0
    t_log = time.time()
    tok_log = 0
    loss_acc = 0.0
    n_acc = 0

    def checkpoint():
        save_ckpt(ck_path, {"model": model.state_dict(), "opt": opt.state_dict(), "step": step,
                            "tokens": tokens, "train_s": train_s, "budget_s": budget_s, "t_start": t_start,
                            "np_rng": sampler.rng.bit_generator.state, "torch_rng": torch.get_rng_state(),
                            "hist": hist, "config": cfg.to_dict(), "args": vars(a)})
        print("checkpoint step %d -> %s" % (step, ck_path), flush=True)

    while True:
        p = train_s / budget_s
        if dl is not None and not a.bench:  # the schedule also ends at the deadline
            p = max(p, (time.time() - t_start) / max(1.0, dl - t_start))
        if a.bench and step >= a.bench:
            break
        if not a.bench and (p >= 1.0 or (dl is not None and time.time() >= dl)):
            break
        long_phase = p >= 1.0 - a.long_frac and a.long_seq > a.seq
        seqlen = a.long_seq if long_phase else a.seq
        bsz = max(1, tok_per_step // seqlen)
        lr = lr_at(p, a.lr, a.warmup_frac, a.min_lr_frac)
        for g in opt.param_groups:
            g["lr"] = lr * g.get("lr_scale", 1.0)
        t0 = time.time()
        x = sampler.batch(bsz, seqlen)
        loadmon.bsz = bsz
        loadmon.aux = []
        loss = lm_loss(model, x, bool(a.bf16))
        aux = sum(loadmon.aux) if loadmon.aux else torch.zeros(())
        opt.zero_grad(set_to_none=True)
        (loss + aux).backward()
        gn = torch.nn.utils.clip_grad_norm_(model.parameters(), a.clip)
        opt.step()
        imb = loadmon.update_bias(a.bias_gamma_early if p < a.bias_early_frac else a.bias_gamma)
        dt_s = time.time() - t0
        train_s += dt_s
        step += 1
        tokens += bsz * seqlen
        tok_log += bsz * seqlen
        loss_acc += loss.item()
        n_acc += 1
        if step % a.log_every == 0 or a.bench:
            el = time.time() - t_log
            rec = {"step": step, "tokens": tokens, "loss": round(loss_acc / n_acc, 4),
                   "aux": round(float(aux), 5), "lr": round(lr, 6),
                   "gnorm": round(float(gn), 3), "seq": seqlen, "tok_s": round(tok_log / el, 1),
                   "train_min": round(train_s / 60, 2), "p": round(p, 4),
                   "max_load": [round(v, 2) for v in imb],
                   "utc": dt.datetime.now(dt.timezone.utc).strftime("%H:%M:%S")}
            print(json.dumps(rec), flush=True)
            hist.append(rec)
            t_log = time.time()
            tok_log = 0
            loss_acc = 0.0
            n_acc = 0
        if a.bench:
            continue
        if held is not None and time.time() - last_ev >= a.eval_min * 60:
            loadmon.enabled = False
            ppl, n = heldout_ppl(model, held, 512, a.eval_windows, bool(a.bf16))
            loadmon.enabled = True
            print(json.dumps({"step": step, "heldout_ppl_512": round(ppl, 3), "eval_tokens": n}), flush=True)
            hist.append({"step": step, "tokens": tokens, "heldout_ppl_512": round(ppl, 3), "eval_tokens": n})
            last_ev = time.time()
        if time.time() - last_ck >= a.ckpt_min * 60:
            checkpoint()
            last_ck = time.time()
    if not a.bench:
        checkpoint()
        with torch.no_grad():
            biases = [g.e_score_correction_bias.tolist() for g in loadmon.gates]
        print("final bias range per layer:",
              [(round(min(b), 3), round(max(b), 3)) for b in biases], flush=True)
        print("done: step %d, tokens %d, train %.1f min" % (step, tokens, train_s / 60), flush=True)


if __name__ == "__main__":
    main()
