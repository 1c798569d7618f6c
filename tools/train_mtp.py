#!/usr/bin/env python3
"""Train, export and measure colibri-tiny's multi-token-prediction (MTP) head.

  python3 tools/train_mtp.py train   --ckpt /work/ckpt-mtp --data /work/data --deadline 21:05
  python3 tools/train_mtp.py export  --ckpt /work/ckpt-mtp --out models/colibri-tiny
  python3 tools/train_mtp.py measure --model models/colibri-tiny --data /work/data
  python3 tools/train_mtp.py card    --out models/colibri-tiny   (README section, eval.json)

The head is transformers' DeepSeek-V3 MTP layer (`MtpLayer` inside `MtpModel`,
modeling_layers.py): the draft at position t takes the embedding of token t+1
and the trunk's final hidden state at t (after model.norm),
    x = eh_proj(cat(enorm(embed(tok[t+1])), hnorm(h[t])))
runs one MoE decoder block on x (causal attention over the MTP positions,
position id t+1), then shared_head.norm and the trunk's lm_head, and predicts
token t+2.  Only the MTP layer is trained; the trunk (embedding, 6 layers,
model.norm, lm_head) is frozen and never written: `export` copies the trunk's
tensors from the shipped file unchanged and adds the MTP tensors.

Data: the trunk's final hidden states are computed once (f32 compute from the
shipped bf16 weights, stored f16) for non-overlapping windows [BOS] + 1023
tokens of each training book (CKPT/hidden_*.npy, resumable; with
--precompute-only in one process and --with-precompute in another, training
starts on the windows stored so far), so training runs only the MTP layer.  Loss per position: (1 - w) CE(tok[t+2]) + w CE(softmax of
the trunk's own logits at t+1) with w = --distill: the head is used to guess
the trunk's next-next token, so the trunk's distribution is the target that
matters for acceptance; the text token keeps it anchored.

Initialisation: the decoder block is a copy of the trunk's last layer (router
and its correction bias included), shared_head.norm a copy of model.norm,
enorm/hnorm ones, eh_proj = s/sqrt(2) [I | I] + N(0, 0.02^2) with s the RMS of
the trunk's residual stream entering the last layer, so the block sees inputs
of the scale it was trained on.  Expert balance as in tools/train_tiny.py.

Schedule, checkpoints and threads follow tools/train_tiny.py: the LR schedule
is a function of training time (and of the time to --deadline), the state is
written atomically to CKPT/ckpt.pt every --ckpt-min minutes and at the end,
and a rerun with the same --ckpt resumes from it.

`measure` loads the exported directory with transformers (the trunk, then
MtpModel.from_pretrained) and reports, for the trained and the initialised
head, greedy acceptance of drafts chained k = 1..3 through the MTP layer on
the trunk's own greedy continuations of held-out Persuasion prompts (raw text
and chat-templated), and k = 1 agreement on the held-out text itself.
"""
import argparse
import datetime as dt
import glob
import json
import math
import os
import sys
import time
import types

import numpy as np
import torch
import torch.nn.functional as F

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools"))
from train_tiny import ExpertLoad, deadline_ts, lr_at, save_ckpt  # noqa: E402

BOS_ID = 0
EOS_ID = 1
WIN = 1024  # trunk inputs per stored window: [BOS] + 1023 text tokens
MTP_PREFIX = "model.layers.%d."


# ---------------------------------------------------------------- models
def load_trunk(model_dir, attn="sdpa"):
    from transformers import AutoModelForCausalLM
    m = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32, attn_implementation=attn)
    m.eval()
    for p in m.parameters():
        p.requires_grad_(False)
    return m


def new_mtp(trunk):
    """HF's MtpModel with one layer around the trunk (embedding, lm_head and
    rotary embedding are the trunk's own modules)."""
    from transformers.modeling_layers import MtpModel
    trunk.config.num_mtp_layers = 1
    mtp = MtpModel(trunk, 1)
    mtp.config._attn_implementation = trunk.config._attn_implementation
    return mtp


@torch.no_grad()
def init_mtp(mtp, trunk, seed, probe_ids):
    layer = mtp.layers[0]
    layer.mtp_block.load_state_dict(trunk.model.layers[-1].state_dict())
    layer.enorm.weight.fill_(1.0)
    layer.hnorm.weight.fill_(1.0)
    layer.post_norm.weight.copy_(trunk.model.norm.weight)
    hs = trunk.model(input_ids=probe_ids, output_hidden_states=True).hidden_states
    s = hs[len(trunk.model.layers) - 1].pow(2).mean().sqrt().item()
    H = layer.eh_proj.weight.shape[0]
    g = torch.Generator().manual_seed(seed)
    w = torch.randn(H, 2 * H, generator=g) * 0.02
    eye = torch.eye(H) * (s / math.sqrt(2.0))
    w[:, :H] += eye
    w[:, H:] += eye
    layer.eh_proj.weight.copy_(w)
    return s


def mtp_hidden(mtp, tok_next, h, pos):
    """MTP layer output (after shared_head.norm) for every position at once:
    tok_next [B, T] = tokens t+1, h [B, T, H] = trunk hidden at t, pos [B, T]
    = t+1.  Causal attention over the T positions (sdpa without a mask)."""
    emb = mtp.embed_tokens(tok_next)
    pe = mtp.rotary_emb(emb, position_ids=pos)
    return mtp.layers[0](emb, h, position_embeddings=pe, attention_mask=None, position_ids=pos,
                         past_key_values=None)


# ---------------------------------------------------------------- data
def book_windows(ids):
    """Non-overlapping [BOS] + (WIN-1)-token windows of one token list."""
    n = WIN - 1
    return [np.concatenate([[BOS_ID], ids[i * n:(i + 1) * n]]) for i in range(len(ids) // n)]


def tokenize(tok_path, path):
    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(tok_path)
    return np.array(tok.encode(open(path, encoding="utf-8").read()).ids, dtype=np.int64)


def precompute(trunk, files, tok_path, out_dir, name, bsz=4):
    """Trunk final hidden states for every window of the given books, stored
    f16 in out_dir/hidden_NAME.npy (tokens in tokens_NAME.npy); resumable by
    chunks (progress in hidden_NAME.json, written after the data)."""
    tok_f = os.path.join(out_dir, "tokens_%s.npy" % name)
    hid_f = os.path.join(out_dir, "hidden_%s.npy" % name)
    prog_f = os.path.join(out_dir, "hidden_%s.json" % name)
    if not os.path.exists(tok_f):
        wins = []
        for f in files:
            wins += book_windows(tokenize(tok_path, f))
        np.save(tok_f + ".tmp.npy", np.stack(wins).astype(np.int16))
        os.replace(tok_f + ".tmp.npy", tok_f)
    toks = np.load(tok_f)
    N = len(toks)
    H = trunk.config.hidden_size
    done = json.load(open(prog_f))["done"] if os.path.exists(prog_f) else 0
    if done == 0 and not os.path.exists(hid_f):
        np.lib.format.open_memmap(hid_f, mode="w+", dtype=np.float16, shape=(N, WIN, H)).flush()
    hid = np.lib.format.open_memmap(hid_f, mode="r+")
    t0 = time.time()
    while done < N:
        x = torch.from_numpy(toks[done:done + bsz].astype(np.int64))
        with torch.no_grad():
            h = trunk.model(input_ids=x, use_cache=False).last_hidden_state
        hid[done:done + len(x)] = h.numpy().astype(np.float16)
        hid.flush()
        done += len(x)
        with open(prog_f + ".tmp", "w") as f:
            json.dump({"done": done, "windows": N}, f)
        os.replace(prog_f + ".tmp", prog_f)
        if done % (bsz * 25) == 0 or done == N:
            print("precompute %s: %d/%d windows, %.0f tok/s" %
                  (name, done, N, done * WIN / max(1e-9, time.time() - t0)), flush=True)
    return toks, np.load(hid_f, mmap_mode="r")


def precomputed(out_dir, name):
    """Windows whose hidden states are stored (the progress file is written
    after the data)."""
    f = os.path.join(out_dir, "hidden_%s.json" % name)
    return json.load(open(f))["done"] if os.path.exists(f) else 0


def wait_precomputed(out_dir, name, need_all=True):
    while True:
        tok_f = os.path.join(out_dir, "tokens_%s.npy" % name)
        n = precomputed(out_dir, name)
        if os.path.exists(tok_f) and n > 0:
            toks = np.load(tok_f)
            if n == len(toks) or not need_all:
                return toks, np.load(os.path.join(out_dir, "hidden_%s.npy" % name), mmap_mode="r")
        time.sleep(10)


def batch_tensors(toks, hid, idx):
    """MTP inputs/targets for windows idx: tok_next = s[1:], h = h[:-1],
    pos = 1.., hard target s[t+2] (T-1 of them), teacher hidden h[t+1]."""
    s = torch.from_numpy(toks[idx].astype(np.int64))
    h = torch.from_numpy(np.asarray(hid[idx], dtype=np.float32))
    T = s.shape[1] - 1
    pos = torch.arange(1, T + 1).unsqueeze(0).expand(len(idx), -1)
    return s[:, 1:], h[:, :-1], pos, s[:, 2:], h[:, 1:]


def mtp_loss(mtp, trunk, batch, distill, autocast):
    tok_next, h, pos, target, h_teacher = batch
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
        out = mtp_hidden(mtp, tok_next, h, pos)
        logits = trunk.lm_head(out).float()
    V = logits.shape[-1]
    lp = F.log_softmax(logits, dim=-1)
    ce = F.nll_loss(lp[:, :-1].reshape(-1, V), target.reshape(-1))
    with torch.no_grad():
        teacher_logits = trunk.lm_head(h_teacher)
        teacher = F.softmax(teacher_logits, dim=-1)
        agree = (logits.argmax(-1) == teacher_logits.argmax(-1)).float().mean().item()
    kd = -(teacher * lp).sum(-1).mean() if distill > 0 else torch.zeros(())
    return (1 - distill) * ce + distill * kd, ce, kd, agree


# ---------------------------------------------------------------- train
def cmd_train(a):
    torch.set_num_threads(a.threads)
    torch.set_num_interop_threads(1)
    os.makedirs(a.ckpt, exist_ok=True)
    ck_path = os.path.join(a.ckpt, "ckpt.pt")
    state = torch.load(ck_path, weights_only=False) if os.path.exists(ck_path) else None
    torch.manual_seed(a.seed)
    trunk = load_trunk(a.trunk)
    tok_path = os.path.join(a.trunk, "tokenizer.json")
    files = sorted(glob.glob(os.path.join(a.data, "train", "*.txt")))
    assert files and not any("persuasion" in f for f in files)
    heldout = [os.path.join(a.data, "persuasion.txt")]
    if a.precompute_only:
        precompute(trunk, heldout, tok_path, a.ckpt, "heldout")
        precompute(trunk, files, tok_path, a.ckpt, "train")
        return
    if a.with_precompute:  # another process (--precompute-only) is filling the hidden states
        htoks, hhid = wait_precomputed(a.ckpt, "heldout")
        toks, hid = wait_precomputed(a.ckpt, "train", need_all=False)
    else:
        htoks, hhid = precompute(trunk, heldout, tok_path, a.ckpt, "heldout")
        toks, hid = precompute(trunk, files, tok_path, a.ckpt, "train")
    torch.set_num_threads(a.train_threads)

    mtp = new_mtp(trunk)
    if state is None:
        s = init_mtp(mtp, trunk, a.seed, torch.from_numpy(toks[:2].astype(np.int64)))
        print("new run: eh_proj scale %.3f (RMS entering the trunk's last layer)" % s, flush=True)
    layer = mtp.layers[0]
    params = dict(layer.named_parameters())
    is_router = lambda n: n.endswith("mlp.gate.weight")
    decay = [p for n, p in params.items() if p.dim() >= 2 and "norm" not in n and not is_router(n)]
    no_decay = [p for n, p in params.items() if not (p.dim() >= 2 and "norm" not in n)]
    router = [p for n, p in params.items() if is_router(n)]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": a.wd, "lr_scale": 1.0},
                             {"params": no_decay, "weight_decay": 0.0, "lr_scale": 1.0},
                             {"params": router, "weight_decay": 0.0, "lr_scale": a.router_lr_scale}],
                            lr=a.lr, betas=(0.9, 0.95), eps=1e-8)
    rng = np.random.default_rng(a.seed)
    step, tokens, train_s, budget_s, t_start, hist = 0, 0, 0.0, a.budget_min * 60, time.time(), []
    if state is not None:
        layer.load_state_dict(state["mtp"])
        opt.load_state_dict(state["opt"])
        step, tokens, train_s, budget_s = state["step"], state["tokens"], state["train_s"], state["budget_s"]
        t_start, hist = state["t_start"], state["hist"]
        rng.bit_generator.state = state["np_rng"]
        torch.set_rng_state(state["torch_rng"])
        print("resumed from %s: step %d, %d tokens, %.0f s trained of %.0f s" %
              (ck_path, step, tokens, train_s, budget_s), flush=True)
    layer.train()
    loadmon = ExpertLoad(types.SimpleNamespace(model=types.SimpleNamespace(layers=[layer.mtp_block])),
                         trunk.config.num_experts_per_tok, a.aux_alpha)
    dl = deadline_ts(a.deadline)

    def checkpoint():
        save_ckpt(ck_path, {"mtp": layer.state_dict(), "opt": opt.state_dict(), "step": step, "tokens": tokens,
                            "train_s": train_s, "budget_s": budget_s, "t_start": t_start, "hist": hist,
                            "np_rng": rng.bit_generator.state, "windows": len(toks),
                            "torch_rng": torch.get_rng_state(), "args": vars(a)})
        print("checkpoint step %d -> %s" % (step, ck_path), flush=True)

    def evaluate():
        layer.eval()
        loadmon.enabled = False
        n = min(a.eval_windows, len(htoks))
        ces, agrees = [], []
        with torch.no_grad():
            for w0 in range(0, n, a.batch):
                _, ce, _, ag = mtp_loss(mtp, trunk, batch_tensors(htoks, hhid, np.arange(w0, min(n, w0 + a.batch))),
                                        a.distill, bool(a.bf16))
                ces.append(ce.item())
                agrees.append(ag)
        loadmon.enabled = True
        layer.train()
        rec = {"step": step, "tokens": tokens, "heldout_ce": round(float(np.mean(ces)), 4),
               "heldout_top1_agree": round(float(np.mean(agrees)), 4), "windows": n}
        print(json.dumps(rec), flush=True)
        hist.append(rec)

    if state is None:
        evaluate()
    last_ck = last_ev = time.time()
    t_log, tok_log, acc = time.time(), 0, []
    while True:
        p = train_s / budget_s
        if dl is not None:
            p = max(p, (time.time() - t_start) / max(1.0, dl - t_start))
        if p >= 1.0 or (dl is not None and time.time() >= dl) or (a.max_steps and step >= a.max_steps):
            break
        lr = lr_at(p, a.lr, a.warmup_frac, a.min_lr_frac)
        for g in opt.param_groups:
            g["lr"] = lr * g["lr_scale"]
        t0 = time.time()
        # uniform over the stored windows (all of them once the precompute is done)
        avail = precomputed(a.ckpt, "train") if a.with_precompute else len(toks)
        idx = np.sort(rng.choice(avail, size=a.batch, replace=False))
        batch = batch_tensors(toks, hid, idx)
        loadmon.bsz = len(idx)
        loadmon.aux = []
        loss, ce, kd, agree = mtp_loss(mtp, trunk, batch, a.distill, bool(a.bf16))
        aux = sum(loadmon.aux) if loadmon.aux else torch.zeros(())
        opt.zero_grad(set_to_none=True)
        (loss + aux).backward()
        gn = torch.nn.utils.clip_grad_norm_(layer.parameters(), a.clip)
        opt.step()
        imb = loadmon.update_bias(a.bias_gamma)
        train_s += time.time() - t0
        step += 1
        ntok = batch[0].numel()
        tokens += ntok
        tok_log += ntok
        acc.append((ce.item(), kd.item(), agree))
        if step % a.log_every == 0:
            el = time.time() - t_log
            m = np.mean(acc, axis=0)
            rec = {"step": step, "tokens": tokens, "ce": round(m[0], 4), "kd": round(m[1], 4),
                   "agree": round(m[2], 4), "lr": round(lr, 6), "gnorm": round(float(gn), 3),
                   "tok_s": round(tok_log / el, 1), "train_min": round(train_s / 60, 2), "p": round(p, 4),
                   "max_load": round(imb[0], 2), "last_windows": idx.tolist(), "utc": dt.datetime.now(dt.timezone.utc).strftime("%H:%M:%S")}
            print(json.dumps(rec), flush=True)
            hist.append(rec)
            t_log, tok_log, acc = time.time(), 0, []
        if time.time() - last_ev >= a.eval_min * 60:
            evaluate()
            last_ev = time.time()
        if time.time() - last_ck >= a.ckpt_min * 60:
            checkpoint()
            last_ck = time.time()
    evaluate()
    checkpoint()
    print("done: step %d, tokens %d, train %.1f min" % (step, tokens, train_s / 60), flush=True)


def add_train_args(sp):
    sp.add_argument("--trunk", default=os.path.join(ROOT, "models", "colibri-tiny"))
    sp.add_argument("--data", default=os.path.join(ROOT, "data"))
    sp.add_argument("--ckpt", default="/work/ckpt-mtp")
    sp.add_argument("--threads", type=int, default=2, help="threads for the hidden-state precompute")
    sp.add_argument("--train-threads", type=int, default=1)
    sp.add_argument("--budget-min", type=float, default=60.0, help="training wall time (new runs)")
    sp.add_argument("--deadline", default="", help="UTC HH:MM: stop (and checkpoint) at this time")
    sp.add_argument("--precompute-only", action="store_true", help="only store the trunk's hidden states")
    sp.add_argument("--with-precompute", action="store_true",
                    help="train on the windows stored so far while a --precompute-only process runs")
    sp.add_argument("--max-steps", type=int, default=0, help="stop after N steps (testing resume)")
    sp.add_argument("--batch", type=int, default=4, help="windows of 1023 positions per step")
    sp.add_argument("--distill", type=float, default=0.5, help="weight of the trunk-distribution target")
    sp.add_argument("--lr", type=float, default=1e-3)
    sp.add_argument("--min-lr-frac", type=float, default=0.1)
    sp.add_argument("--warmup-frac", type=float, default=0.03)
    sp.add_argument("--wd", type=float, default=0.1)
    sp.add_argument("--clip", type=float, default=1.0)
    sp.add_argument("--bias-gamma", type=float, default=1e-3)
    sp.add_argument("--aux-alpha", type=float, default=1e-2)
    sp.add_argument("--router-lr-scale", type=float, default=0.1)
    sp.add_argument("--bf16", type=int, default=1, help="bf16 autocast (weights and AdamW stay f32)")
    sp.add_argument("--ckpt-min", type=float, default=4.0)
    sp.add_argument("--eval-min", type=float, default=10.0)
    sp.add_argument("--eval-windows", type=int, default=16)
    sp.add_argument("--log-every", type=int, default=10)
    sp.add_argument("--seed", type=int, default=4321)


# ---------------------------------------------------------------- export
def checkpoint_tensors(layer_state, n_layers, n_experts):
    """MtpLayer state (f32, HF module names) -> DeepSeek-V3 checkpoint names
    model.layers.N.* (N = num_hidden_layers): enorm, hnorm, eh_proj,
    shared_head.norm, the decoder block with experts stored per expert
    (gate_up_proj [E, 2I, H] = gate rows then up rows); bf16, the router's
    e_score_correction_bias F32.  The embedding and lm_head are not copied:
    HF's MtpModel uses the trunk's own and ignores copies."""
    pre = MTP_PREFIX % n_layers
    out = {}
    for k, v in layer_state.items():
        v = v.detach().float()
        if k.startswith("mtp_block."):
            k = k[len("mtp_block."):]
            if k == "mlp.experts.gate_up_proj":
                I = v.shape[1] // 2
                for e in range(n_experts):
                    out[pre + "mlp.experts.%d.gate_proj.weight" % e] = v[e, :I].contiguous()
                    out[pre + "mlp.experts.%d.up_proj.weight" % e] = v[e, I:].contiguous()
                continue
            if k == "mlp.experts.down_proj":
                for e in range(n_experts):
                    out[pre + "mlp.experts.%d.down_proj.weight" % e] = v[e].contiguous()
                continue
        elif k == "post_norm.weight":
            k = "shared_head.norm.weight"
        out[pre + k] = v
    return {k: (v if k.endswith("e_score_correction_bias") else v.to(torch.bfloat16)) for k, v in out.items()}


def check_expert_layout(model_dir, trunk):
    """The split above, applied to the trunk's last layer as HF loaded it,
    must give back the file's tensors bit for bit."""
    from safetensors import safe_open
    L = len(trunk.model.layers) - 1
    mine = checkpoint_tensors({"mtp_block." + k: v for k, v in trunk.model.layers[L].state_dict().items()},
                              L, trunk.config.n_routed_experts)
    with safe_open(os.path.join(model_dir, "model.safetensors"), "pt") as f:
        for k, v in mine.items():
            ref = f.get_tensor(k)
            assert ref.dtype == v.dtype and torch.equal(ref, v), "layout check failed at %s" % k
    return len(mine)


def cmd_export(a):
    from safetensors import safe_open
    from safetensors.torch import save_file
    torch.set_num_threads(a.threads)
    st_path = os.path.join(a.out, "model.safetensors")
    cfg_path = os.path.join(a.out, "config.json")
    cfg = json.load(open(cfg_path))
    n_layers = cfg["num_hidden_layers"]
    pre = MTP_PREFIX % n_layers
    with safe_open(st_path, "pt") as f:
        meta = f.metadata()
        trunk_t = {k: f.get_tensor(k) for k in f.keys() if not k.startswith(pre)}
    trunk = load_trunk(a.out)
    print("expert layout check: %d tensors of layer %d bit-identical" %
          (check_expert_layout(a.out, trunk), n_layers - 1), flush=True)
    st = torch.load(os.path.join(a.ckpt, "ckpt.pt"), weights_only=False, map_location="cpu")
    mtp_t = checkpoint_tensors(st["mtp"], n_layers, cfg["n_routed_experts"])
    probe = torch.randint(5, cfg["vocab_size"], (2, 256), generator=torch.Generator().manual_seed(7))
    probe[:, 0] = BOS_ID
    before = trunk_logits(trunk, probe)
    del trunk
    tmp = st_path + ".tmp"
    save_file({**trunk_t, **mtp_t}, tmp, metadata=meta)
    os.chmod(tmp, 0o644)
    os.replace(tmp, st_path)
    cfg["num_nextn_predict_layers"] = 1
    with open(cfg_path + ".tmp", "w") as f:
        json.dump(cfg, f, indent=2, sort_keys=True)
        f.write("\n")
    os.replace(cfg_path + ".tmp", cfg_path)
    trunk, mtp, report = load_with_mtp(a.out)
    same = torch.equal(before, trunk_logits(trunk, probe))
    print("trunk logits bit-identical to the file before export: %s; load report %s" % (same, json.dumps(report)),
          flush=True)
    assert same and not report["trunk_missing"] and not report["mtp_load_log"]
    for k, v in checkpoint_tensors(mtp.layers[0].state_dict(), n_layers, cfg["n_routed_experts"]).items():
        assert torch.equal(v, mtp_t[k]), "MtpModel.from_pretrained loaded %s differently" % k
    print("HF MtpModel.from_pretrained: all %d MTP tensors loaded as written" % len(mtp_t), flush=True)
    nbytes = sum(v.numel() * v.element_size() for v in mtp_t.values())
    print("wrote %s: %d trunk tensors unchanged + %d MTP tensors (%d bytes of data, %d parameters)" %
          (st_path, len(trunk_t), len(mtp_t), nbytes, sum(v.numel() for v in mtp_t.values())), flush=True)


# ---------------------------------------------------------------- measure
class Silence:
    """Collect transformers' log records (load reports) instead of printing them."""

    def __init__(self):
        import logging
        self.records = []
        self.h = logging.Handler()
        self.h.emit = lambda r: self.records.append(r.getMessage())
        self.log = logging.getLogger("transformers")

    def __enter__(self):
        self.log.addHandler(self.h)
        return self

    def __exit__(self, *exc):
        self.log.removeHandler(self.h)


def load_with_mtp(model_dir):
    """Trunk + HF's MtpModel.from_pretrained.  HF finds DeepSeek-V3's MTP
    tensors through DeepseekV3PreTrainedModel._keys_to_ignore_on_load_unexpected,
    which names layer 61 (the full model's); for this 6-layer model the
    instance's pattern names layer 6 instead.  Returns (trunk, mtp, report)."""
    from transformers import AutoModelForCausalLM
    from transformers.modeling_layers import MtpModel
    with Silence() as s:
        trunk, info = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32, attn_implementation="sdpa",
                                                           output_loading_info=True)
    trunk.eval()
    n = trunk.config.num_hidden_layers
    report = {"trunk_missing": sorted(info["missing_keys"]), "trunk_unexpected": sorted(info["unexpected_keys"]),
              "trunk_mismatched": [str(x) for x in info["mismatched_keys"]]}
    trunk._keys_to_ignore_on_load_unexpected = [r"model\.layers\.%d\..*" % n]
    with Silence() as s:
        mtp = MtpModel.from_pretrained(trunk)
    mtp.eval()
    report["mtp_load_log"] = [m for m in s.records if "missing" in m.lower() or "unexpected" in m.lower()
                              or "not used" in m.lower() or "newly initialized" in m.lower()]
    return trunk, mtp, report


def trunk_logits(trunk, ids):
    with torch.no_grad():
        return trunk(input_ids=ids, use_cache=False).logits


@torch.no_grad()
def chained_drafts(trunk, mtp, seq, first, K):
    """For every t with first <= t+1 and t+1+K < len(seq): the chained drafts
    d_1..d_K after accepting seq[t+1] (d_j guesses seq[t+1+j]), through HF's
    MTP layer with its KV cache: the pass over the real tokens fills the cache,
    each chain step appends one entry, then the cache is cropped back."""
    from transformers import DynamicCache
    layer = mtp.layers[0]
    h = trunk.model(input_ids=seq[None], use_cache=False).last_hidden_state
    cache = DynamicCache(config=mtp.config)
    L = len(seq)
    t0 = max(0, first - 1)

    def step(tok, hid, pos):
        emb = mtp.embed_tokens(tok)
        p = torch.tensor([[pos]]) if isinstance(pos, int) else pos
        pe = mtp.rotary_emb(emb, position_ids=p)
        return layer(emb, hid, position_embeddings=pe, attention_mask=None, position_ids=p, past_key_values=cache)

    if t0 > 0:
        step(seq[None, 1:t0 + 1], h[:, :t0], torch.arange(1, t0 + 1)[None])
    rows = []
    for t in range(t0, L - 1 - K):
        m = step(seq[None, t + 1:t + 2], h[:, t:t + 1], t + 1)
        drafts = []
        for j in range(K):
            d = mtp.shared_head(m).argmax(-1)
            drafts.append(int(d))
            if j + 1 < K:
                m = step(d, m, t + 2 + j)
        if K > 1:
            cache.crop(-(K - 1))  # drop the chain's entries, keep the real tokens'
        rows.append((t, drafts))
    return rows


def acceptance(trunk, mtp, seqs, K):
    """seqs: (ids, first generated index).  The trunk's own greedy tokens of
    the full (batched) forward are the truth; returns per-position counts."""
    cum = np.zeros(K)
    cond_num = np.zeros(K)
    cond_den = np.zeros(K)
    n = 0
    mism = 0
    for seq, first in seqs:
        g = trunk_logits(trunk, seq[None])[0].argmax(-1)
        mism += int((g[first - 1:-1] != seq[first:]).sum())
        for t, drafts in chained_drafts(trunk, mtp, seq, first, K):
            ok = True
            for j, d in enumerate(drafts):
                if ok:
                    cond_den[j] += 1
                    good = d == int(seq[t + 2 + j])
                    cond_num[j] += good
                    ok = good
                cum[j] += ok
            n += 1
    return {"positions": n, "cum": (cum / n).tolist(), "cond": (cond_num / np.maximum(1, cond_den)).tolist(),
            "tokens_per_verify": [1 + float((cum[:k] / n).sum()) for k in range(1, K + 1)],
            "trunk_vs_cached_greedy_mismatches": mism}



@torch.no_grad()
def teacher_forced(trunk, mtp, ids, ctx, windows):
    """k = 1 on text: windows [BOS] + ctx-1 tokens of held-out text; the draft
    at t (from token t+1 and the trunk's hidden at t, all positions at once)
    against the trunk's own greedy token at t+1 and against the text."""
    agree = text = trunk_text = n = 0
    for w in range(windows):
        s = torch.cat([torch.tensor([BOS_ID]), ids[w * (ctx - 1):(w + 1) * (ctx - 1)]])[None]
        h = trunk.model(input_ids=s, use_cache=False).last_hidden_state
        g = trunk.lm_head(h).argmax(-1)
        T = s.shape[1] - 2
        pos = torch.arange(1, T + 1)[None]
        d = mtp.shared_head(mtp_hidden(mtp, s[:, 1:T + 1], h[:, :T], pos)).argmax(-1)
        agree += int((d == g[:, 1:T + 1]).sum())
        text += int((d == s[:, 2:T + 2]).sum())
        trunk_text += int((g[:, 1:T + 1] == s[:, 2:T + 2]).sum())
        n += T
    return {"positions": n, "windows": windows, "ctx": ctx, "draft_eq_trunk_greedy": agree / n,
            "draft_eq_text": text / n, "trunk_greedy_eq_text": trunk_text / n}


@torch.no_grad()
def greedy_seqs(trunk, prompts, new_tokens):
    out = []
    for p in prompts:
        x = torch.tensor([p])
        g = trunk.generate(x, do_sample=False, max_new_tokens=new_tokens, min_new_tokens=0, use_cache=True,
                           eos_token_id=EOS_ID, pad_token_id=2)[0]
        gen = g[len(p):].tolist()
        if EOS_ID in gen:
            gen = gen[:gen.index(EOS_ID) + 1]
        out.append((torch.tensor(p + gen), len(p)))
    return out


@torch.no_grad()
def hf_mtp_consistency(mtp, trunk, seq, first):
    """HF's own MtpModel.forward (one draft from a prefix) against the cached
    step path used for the chained drafts (same draft) and against the
    all-positions path used in training (max |logit difference|)."""
    rows = dict(chained_drafts(trunk, mtp, seq, first, 1))
    h = trunk.model(input_ids=seq[None], use_cache=False).last_hidden_state
    same = n = 0
    dmax = 0.0
    for t in list(rows)[::8]:
        pos = torch.arange(1, t + 2)[None]
        ids, logits, _ = mtp(input_ids=seq[None, 1:t + 2], last_hidden_states=h[:, :t + 1], attention_mask=None,
                             position_ids=pos, mtp_cache=None)
        same += int(ids[0, 0]) == rows[t][0]
        n += 1
        mine = mtp.shared_head(mtp_hidden(mtp, seq[None, 1:t + 2], h[:, :t + 1], pos)[:, -1])
        dmax = max(dmax, (mine - logits[:, -1]).abs().max().item())
    return same, n, dmax


def cmd_measure(a):
    from tokenizers import Tokenizer
    torch.set_num_threads(a.threads)
    trunk, mtp, report = load_with_mtp(a.model)
    tok = Tokenizer.from_file(os.path.join(a.model, "tokenizer.json"))
    held = torch.tensor(tok.encode(open(os.path.join(a.data, "persuasion.txt"), encoding="utf-8").read()).ids)
    offs = [int(o) for o in np.linspace(0, len(held) - 200, a.prompts)]
    raw = [[BOS_ID] + held[o:o + a.prompt_tokens].tolist() for o in offs]
    from transformers import AutoTokenizer
    atok = AutoTokenizer.from_pretrained(a.model)
    chat = []
    for o in offs:
        text = tok.decode(held[o:o + a.prompt_tokens].tolist())
        chat.append(list(atok.apply_chat_template([{"role": "user", "content": text}], add_generation_prompt=True,
                                                  tokenize=True, return_dict=False)))
    want = a.heads.split(",")
    trained = {k: v.clone() for k, v in mtp.layers[0].state_dict().items()}
    heads = {"trained": trained} if "trained" in want else {}
    if "initialised" in want:
        init = new_mtp(trunk)
        init_mtp(init, trunk, a.seed, torch.from_numpy(np.load(os.path.join(a.ckpt, "tokens_train.npy"))[:2]
                                                      .astype(np.int64)))
        heads["initialised"] = {k: (v if k.endswith("e_score_correction_bias") else v.bfloat16().float())
                                for k, v in init.layers[0].state_dict().items()}
        del init
    import transformers
    res = json.load(open(a.json_out)) if os.path.exists(a.json_out) else {}
    res.update({"transformers": transformers.__version__, "torch": torch.__version__, "load": report, "k": a.k,
                "prompts": a.prompts, "prompt_tokens": a.prompt_tokens, "new_tokens": a.new_tokens})
    # the greedy continuations depend on the trunk only: kept next to the results for later runs
    seq_path = a.json_out + ".seqs.json"
    key = [a.prompts, a.prompt_tokens, a.new_tokens]
    cached = json.load(open(seq_path)) if os.path.exists(seq_path) else None
    if cached is not None and cached["key"] == key:
        seqs = {kind: [(torch.tensor(ids), first) for ids, first in v] for kind, v in cached["seqs"].items()}
    else:
        t0 = time.time()
        seqs = {"raw": greedy_seqs(trunk, raw, a.new_tokens), "chat": greedy_seqs(trunk, chat, a.new_tokens)}
        print("greedy continuations: %.0f s" % (time.time() - t0), flush=True)
        with open(seq_path, "w") as f:
            json.dump({"key": key, "seqs": {kind: [(q.tolist(), first) for q, first in v]
                                            for kind, v in seqs.items()}}, f)
    if "trained" in heads:
        same, n, dmax = hf_mtp_consistency(mtp, trunk, *seqs["raw"][0])
        res["hf_mtpmodel_forward_vs_cached_steps"] = {"same": same, "of": n}
        res["hf_mtpmodel_forward_vs_training_path_max_dlogit"] = dmax
        print("HF MtpModel.forward vs cached step path: %d/%d drafts equal; vs training path max |dlogit| %.3g" %
              (same, n, dmax), flush=True)
    for name, st in heads.items():
        mtp.layers[0].load_state_dict(st)
        r = {"text_k1": teacher_forced(trunk, mtp, held, a.ctx, a.windows)}
        print(name, "text k=1", json.dumps(r["text_k1"]), flush=True)
        for kind, sq in seqs.items():
            r[kind] = acceptance(trunk, mtp, sq, a.k)
            print(name, kind, json.dumps(r[kind]), flush=True)
        res[name] = r
    mtp.layers[0].load_state_dict(trained)
    if a.hf_generate and "trained" in heads:
        same = 0
        for seq, first in seqs["raw"][:a.hf_generate]:
            x = seq[None, :first]
            g = trunk.generate(x, do_sample=False, max_new_tokens=len(seq) - first, use_mtp=True, use_cache=True,
                               eos_token_id=EOS_ID, pad_token_id=2)[0]
            same += torch.equal(g[:len(seq)], seq)
        res["hf_generate_use_mtp_equal_to_greedy"] = {"same": same, "of": a.hf_generate}
        print("HF generate(use_mtp=True) == greedy: %d/%d" % (same, a.hf_generate), flush=True)
    with open(a.json_out, "w") as f:
        json.dump(res, f, indent=2)
        f.write("\n")
    print("wrote", a.json_out, flush=True)


CARD_BEGIN = "<!-- MTP head: written by tools/train_mtp.py card -->"
CARD_END = "<!-- end MTP head -->"


def fmt_row(label, r, K):
    cells = ["%.3f / %.3f" % (r["cum"][j], r["cond"][j]) for j in range(K)]
    return "| %s | %d | %s | %s |" % (label, r["positions"], " | ".join(cells),
                                      " / ".join("%.3f" % x for x in r["tokens_per_verify"]))


def cmd_card(a):
    """Model card section + eval.json entry from measure.json and the checkpoint."""
    import hashlib
    m = json.load(open(a.measure))
    st = torch.load(os.path.join(a.ckpt, "ckpt.pt"), weights_only=False, map_location="cpu")
    args = st["args"]
    tr = [h for h in st["hist"] if "ce" in h]
    ev = [h for h in st["hist"] if "heldout_ce" in h]
    last = tr[-5:]
    K = m["k"]
    cfg = json.load(open(os.path.join(a.out, "config.json")))
    n = cfg["num_hidden_layers"]
    from safetensors import safe_open
    with safe_open(os.path.join(a.out, "model.safetensors"), "pt") as f:
        names = [k for k in f.keys() if k.startswith(MTP_PREFIX % n)]
        nparam = sum(int(np.prod(f.get_slice(k).get_shape())) for k in names)
        nbytes = sum(int(np.prod(f.get_slice(k).get_shape())) * (4 if k.endswith("bias") else 2) for k in names)
    files = {}
    for fn in ("config.json", "model.safetensors"):
        pth = os.path.join(a.out, fn)
        files[fn] = (os.path.getsize(pth), hashlib.sha256(open(pth, "rb").read()).hexdigest())
    L = [CARD_BEGIN, "## MTP head (multi-token prediction, `num_nextn_predict_layers: 1`)", ""]
    w = L.append
    w("DeepSeek-V3's MTP module as transformers %s implements it (`MtpLayer` in `MtpModel`, "
      "`modeling_layers.py`), trained for this model with the trunk frozen: the draft at position t is "
      "`lm_head(shared_head.norm(block(eh_proj(cat(enorm(embed(token[t+1])), hnorm(h[t]))))))`, h = the trunk's "
      "final hidden state after `model.norm`, block = one MoE decoder layer (MLA + 16 routed experts, 2 active, "
      "1 shared), attention causal over the MTP positions at position ids t+1; it guesses token t+2." %
      m.get("transformers", "5.18.0"))
    w("")
    w("Tensors: %d under `model.layers.%d.*` (`enorm`, `hnorm`, `eh_proj` [%d, %d], the decoder block with "
      "experts stored per expert, `shared_head.norm`), %d parameters, %d bytes (bf16, the router's "
      "`e_score_correction_bias` F32); `model.safetensors` grows from 46127912 to %d bytes. No copies of the "
      "embedding or lm_head (`embed_tokens`, `shared_head.head` in DeepSeek-V3's own checkpoint): HF's MtpModel "
      "uses the trunk's and ignores copies. The trunk's 325 tensors are copied unchanged (its logits are "
      "bit-identical to the file without the head, checked by `train_mtp.py export`)." %
      (len(names), n, cfg["hidden_size"], 2 * cfg["hidden_size"], nparam, nbytes, files["model.safetensors"][0]))
    w("")
    w("Loading in transformers: `DeepseekV3ForCausalLM.from_pretrained` loads the trunk with no missing keys and "
      "reports the MTP tensors as unexpected, because DeepSeek-V3's MTP pattern "
      "(`_keys_to_ignore_on_load_unexpected = [r\"model\\.layers\\.61.*\"]`) names the full model's layer 61; "
      "`MtpModel.from_pretrained(model)` finds them after `model._keys_to_ignore_on_load_unexpected = "
      "[r\"model\\.layers\\.6\\..*\"]` and loads all %d with nothing missing or unexpected "
      "(`generate(use_mtp=True)` then works: %d of %d greedy continuations identical to plain greedy)." %
      (len(names), m.get("hf_generate_use_mtp_equal_to_greedy", {}).get("same", 0),
       m.get("hf_generate_use_mtp_equal_to_greedy", {}).get("of", 0)))
    w("")
    w("### Training")
    w("")
    if args.get("with_precompute"):
        w("`python3 tools/train_mtp.py train --ckpt CKPT --data data --precompute-only` in one process and "
          "`python3 tools/train_mtp.py train --ckpt CKPT --data data --with-precompute --deadline %s` in another "
          "(training starts on the windows stored so far), then `export`, `measure`, `card`." %
          (args.get("deadline") or "HH:MM"))
    else:
        w("`python3 tools/train_mtp.py train --ckpt CKPT --data data --deadline %s`, then `export`, `measure`, "
          "`card`." % (args.get("deadline") or "HH:MM"))
    w("")
    w("| | |")
    w("|---|---|")
    used = precomputed(a.ckpt, "train")
    books = []
    w0 = 0
    for f in sorted(glob.glob(os.path.join(a.data, "train", "*.txt"))):
        nw = len(tokenize(os.path.join(a.out, "tokenizer.json"), f)) // (WIN - 1)
        if w0 < used:
            books.append("%s%s" % (os.path.basename(f)[:-4], "" if w0 + nw <= used else
                                   " (%d of %d windows)" % (used - w0, nw)))
        w0 += nw
    w("| data | the trunk's final hidden states (f32 compute from the shipped bf16 weights, stored f16) for "
      "non-overlapping [BOS] + 1023-token windows of the training books in file order: %d of the %d windows "
      "were stored when training ended (%s; the precompute was stopped to leave the CPU to training, which saw "
      "fewer positions than these windows hold anyway); each step draws windows uniformly from those stored; "
      "Persuasion held out |" % (used, st["windows"], ", ".join(books)))
    w("| steps | %d (%d windows × 1023 positions per step) |" % (st["step"], args["batch"]))
    w("| positions seen | %d (%.2f passes over the stored windows) |" % (st["tokens"], st["tokens"] / (used * 1023)))
    w("| training wall time | %.1f min on 1 CPU thread, bf16 autocast; the 2-core machine was shared with "
      "other jobs (load average 10–16), so this is far less CPU time than wall time |" % (st["train_s"] / 60))
    w("| loss | (1 − %s) · CE(token t+2) + %s · CE(the trunk's own distribution at t+1): acceptance is agreement "
      "with the trunk, so its distribution is the target that matters; the text token keeps the head anchored |" %
      (args["distill"], args["distill"]))
    if last:
        w("| final train CE (token t+2) | %.4f (mean of the last logged intervals) |" %
          np.mean([h["ce"] for h in last]))
    if ev:
        w("| held-out (Persuasion, %d windows) | CE %.4f → %.4f, top-1 agreement with the trunk %.3f → %.3f "
          "(first → last evaluation) |" % (ev[-1]["windows"], ev[0]["heldout_ce"], ev[-1]["heldout_ce"],
                                          ev[0]["heldout_top1_agree"], ev[-1]["heldout_top1_agree"]))
    w("| optimizer | AdamW β=(0.9, 0.95), weight decay %s, peak LR %s, warmup %s, cosine to %s×peak over the "
      "time budget, grad clip %s, router at %s× LR |" % (args["wd"], args["lr"], args["warmup_frac"],
                                                        args["min_lr_frac"], args["clip"], args["router_lr_scale"]))
    w("| init | decoder block = copy of the trunk's last layer (router and correction bias included), "
      "shared_head.norm = model.norm, enorm/hnorm = 1, eh_proj = s/√2·[I I] + N(0, 0.02²), s = RMS of the "
      "residual stream entering the last layer |")
    w("| expert balance | bias_e += %s·sign(mean load − load_e) after each step, sequence-wise balance loss "
      "α = %s |" % (args["bias_gamma"], args["aux_alpha"]))
    w("")
    w("### Acceptance (HF transformers, exported bf16 weights, f32 compute)")
    w("")
    w("Greedy drafts chained through the one MTP layer (draft j+1 from the embedding of draft j and the layer's "
      "own output hidden state, its KV cache holding the real tokens' entries; `tools/train_mtp.py measure`), "
      "compared with the trunk's own greedy tokens. Each cell: cumulative / conditional acceptance at draft "
      "position j (cumulative = drafts 1..j all equal the trunk's tokens; conditional = draft j equal given "
      "1..j−1 were). Tokens per verify forward at k = 1 / 2 / 3 drafts = 1 + Σ_{j≤k} cumulative_j (greedy, "
      "longest agreeing prefix plus the verify's own token).")
    w("")
    w("Sequences: %d prompts from *Persuasion* (evenly spaced, %d tokens each: raw = [BOS] + the tokens; chat = "
      "the same text as a user message under the chat template with the generation prompt), each continued by the "
      "trunk's greedy decoding for %d tokens (to EOS at most); every generated position t with t+%d inside the "
      "sequence is one draft point." % (m["prompts"], m["prompt_tokens"], m["new_tokens"], K + 1))
    w("")
    w("| head, prompts | draft points | j = 1 | j = 2 | j = 3 | tokens / verify (k = 1 / 2 / 3) |")
    w("|---|---|---|---|---|---|")
    for head in ("trained", "initialised"):
        for kind in ("raw", "chat"):
            w(fmt_row("%s, %s" % (head, kind), m[head][kind], K))
    w("")
    t1, t0 = m["trained"]["text_k1"], m["initialised"]["text_k1"]
    w("On the held-out text itself (teacher forcing, k = 1: the draft from the real token t+1 against the trunk's "
      "greedy token at t+1; %d windows of [BOS] + %d tokens, %d positions): trained %.3f, initialised %.3f "
      "agreement with the trunk; against the text token t+2: trained %.3f (the trunk's own top-1 at t+1: %.3f)." %
      (t1["windows"], t1["ctx"] - 1, t1["positions"], t1["draft_eq_trunk_greedy"], t0["draft_eq_trunk_greedy"],
       t1["draft_eq_text"], t1["trunk_greedy_eq_text"]))
    w("")
    w("Note: `tools/export_tiny.py` writes `model.safetensors` and `config.json` without the head; rerun "
      "`train_mtp.py export` (and `card`) after it.")
    w(CARD_END)
    card_path = os.path.join(a.out, "README.md")
    card = open(card_path, encoding="utf-8").read()
    if CARD_BEGIN in card:
        card = card[:card.index(CARD_BEGIN)] + card[card.index(CARD_END) + len(CARD_END) + 1:]
    anchor = "## Samples"
    card = card.replace(anchor, "\n".join(L) + "\n\n" + anchor, 1)
    for fn, (size, h) in files.items():
        card = "\n".join(("| `%s` | %d | `%s` |" % (fn, size, h)) if line.startswith("| `%s` |" % fn) else line
                         for line in card.split("\n"))
    open(card_path, "w", encoding="utf-8").write(card)
    ev_path = os.path.join(a.out, "eval.json")
    evj = json.load(open(ev_path, encoding="utf-8"))
    for fn, (size, h) in files.items():
        evj["files"][fn] = {"bytes": size, "sha256": h}
    evj["mtp"] = {"tensors": len(names), "parameters": nparam, "bytes": nbytes, "train_steps": st["step"],
                  "train_positions": st["tokens"], "train_wall_s": round(st["train_s"], 1), "measure": m}
    with open(ev_path, "w", encoding="utf-8") as f:
        json.dump(evj, f, ensure_ascii=False, indent=2)
        f.write("\n")
    print("updated", card_path, ev_path)


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    add_train_args(sub.add_parser("train"))
    ex = sub.add_parser("export")
    ex.add_argument("--ckpt", default="/work/ckpt-mtp")
    ex.add_argument("--out", default=os.path.join(ROOT, "models", "colibri-tiny"))
    ex.add_argument("--threads", type=int, default=1)
    me = sub.add_parser("measure")
    me.add_argument("--model", default=os.path.join(ROOT, "models", "colibri-tiny"))
    me.add_argument("--data", default=os.path.join(ROOT, "data"))
    me.add_argument("--ckpt", default="/work/ckpt-mtp", help="for the initialised head (its probe windows)")
    me.add_argument("--seed", type=int, default=4321, help="the training run's --seed (initialised head)")
    me.add_argument("--threads", type=int, default=1)
    me.add_argument("--k", type=int, default=3)
    me.add_argument("--prompts", type=int, default=48)
    me.add_argument("--prompt-tokens", type=int, default=64)
    me.add_argument("--new-tokens", type=int, default=64)
    me.add_argument("--ctx", type=int, default=512)
    me.add_argument("--windows", type=int, default=32)
    me.add_argument("--hf-generate", type=int, default=4, help="prompts checked with generate(use_mtp=True)")
    me.add_argument("--heads", default="trained,initialised")
    me.add_argument("--json-out", default="/work/ckpt-mtp/measure.json")
    ca = sub.add_parser("card")
    ca.add_argument("--measure", default="/work/ckpt-mtp/measure.json")
    ca.add_argument("--ckpt", default="/work/ckpt-mtp")
    ca.add_argument("--data", default=os.path.join(ROOT, "data"))
    ca.add_argument("--out", default=os.path.join(ROOT, "models", "colibri-tiny"))
    a = ap.parse_args()
    {"train": cmd_train, "export": cmd_export, "measure": cmd_measure, "card": cmd_card}[a.cmd](a)


if __name__ == "__main__":
    main()
