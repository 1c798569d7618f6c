#!/usr/bin/env python3
"""Draws what each KV tier costs: bits per cached element against KL and
perplexity change, from the lines `colibri eval` prints.

  ./colibri eval -m models/colibri-tiny --text data/persuasion.txt --kv ... > bench/kv-eval.txt
  python3 bench/kv_tradeoff.py bench/kv-eval.txt --elements 960 --out bench/kv-tradeoff.png

--elements: cached values per token over all layers (layers x (kv_lora_rank +
qk_rope_head_dim)); bits per element = 8 * bytes_per_token / elements.
Needs matplotlib (pip install matplotlib).
"""
import argparse
import re

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

LINE = re.compile(r"^(?:weights=\S+ )?kv=(\S+) (?:mode=\S+ )?bytes_per_token=(\d+) top1=([\d.]+) kl_mean=(\S+) "
                  r"kl_p99=(\S+) (?:max_dlogit=\S+ )?ppl=([\d.]+) dppl=([+-][\d.]+)%$")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("eval_output")
    ap.add_argument("--elements", type=int, required=True, help="cached values per token, all layers")
    ap.add_argument("--out", default="bench/kv-tradeoff.png")
    ap.add_argument("--title", default="colibri-tiny, Persuasion (held out)")
    a = ap.parse_args()
    rows = []
    for line in open(a.eval_output):
        m = LINE.match(line.strip())
        if m:
            name, b, top1, kl, p99, ppl, dppl = m.groups()
            rows.append((name, 8.0 * int(b) / a.elements, float(top1), float(kl), float(p99), float(dppl)))
    if not rows:
        raise SystemExit(f"{a.eval_output}: no `colibri eval` lines")
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4.2))
    for name, bpe, top1, kl, p99, dppl in rows:
        ax1.scatter(bpe, max(kl, 1e-7), s=30)
        ax1.annotate(name, (bpe, max(kl, 1e-7)), textcoords="offset points", xytext=(4, 4), fontsize=8)
        ax2.scatter(bpe, dppl, s=30)
        ax2.annotate(name, (bpe, dppl), textcoords="offset points", xytext=(4, 4), fontsize=8)
    ax1.set_yscale("log")
    ax1.set_xlabel("bits per cached element (scales, norms, RoPE part included)")
    ax1.set_ylabel("mean KL(f32 cache || tier), nats (f32: 0, drawn at 1e-7)")
    ax2.set_xlabel("bits per cached element")
    ax2.set_ylabel("perplexity change vs f32 cache, %")
    ax2.axhline(0, color="grey", lw=0.5)
    for ax in (ax1, ax2):
        ax.grid(alpha=0.3)
    fig.suptitle(a.title)
    fig.tight_layout()
    fig.savefig(a.out, dpi=110)
    print(f"wrote {a.out} ({len(rows)} tiers)")


if __name__ == "__main__":
    main()
