#!/usr/bin/env python3
"""Builds a servable model directory for the server tests from an oracle
fixture (config.json + model.safetensors, vocab 512, no tokenizer).

Writes DIR/tokenizer.json: a byte-level BPE with the DeepSeek-V3 special
tokens (so the chat template is DeepSeek-V3's) and merges learned here from a
small fixed text, ids 0..N-1 with N <= the fixture's vocab, so every id the
tokenizer produces is one the model accepts. The model is random; the tests
check the server's behaviour, not the text.

usage: make_test_model.py FIXTURE_DIR OUT_DIR [MAX_POSITION_EMBEDDINGS]
(given: config.json is a copy with that context instead of a link)
"""
import json
import os
import sys
from collections import Counter

SPECIALS = ["<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>", "<｜User｜>", "<｜Assistant｜>"]

TEXT = """The quick brown fox jumps over the lazy dog. Hello, world! This is a small text for
a small tokenizer: the server tests send prompts such as "Say hello", "Count to five",
"Write a haiku about the sea" and "What is the capital of France?". One two three four five
six seven eight nine ten. Once upon a time there was a colibri that served tokens over HTTP."""


def bytes_to_unicode():
    """GPT-2's reversible byte -> printable character map (ByteLevel)."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + \
        list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, map(chr, cs)))


def learn_merges(text, n_merges, b2u):
    words = []
    for i, w in enumerate(text.split()):
        words.append([b2u[b] for b in ((" " if i else "") + w).encode()])
    merges = []
    for _ in range(n_merges):
        pairs = Counter()
        for w in words:
            for a, b in zip(w, w[1:]):
                pairs[(a, b)] += 1
        if not pairs:
            break
        (a, b), _ = max(pairs.items(), key=lambda kv: (kv[1], kv[0]))
        merges.append((a, b))
        new = []
        for w in words:
            out, i = [], 0
            while i < len(w):
                if i + 1 < len(w) and w[i] == a and w[i + 1] == b:
                    out.append(a + b)
                    i += 2
                else:
                    out.append(w[i])
                    i += 1
            new.append(out)
        words = new
    return merges


def main():
    fixture, out = sys.argv[1], sys.argv[2]     # [max_position_embeddings]
    cfg = json.load(open(os.path.join(fixture, "config.json")))
    n_vocab = cfg["vocab_size"]
    b2u = bytes_to_unicode()
    vocab = {s: i for i, s in enumerate(SPECIALS)}
    for b in range(256):
        vocab[b2u[b]] = len(vocab)
    merges = []
    for a, b in learn_merges(TEXT, n_vocab - len(vocab), b2u):
        if a + b not in vocab:
            vocab[a + b] = len(vocab)
            merges.append(f"{a} {b}")
    # Fill the rest of the model's ids with pieces no merge reaches, so every id
    # the model can emit decodes.
    letters = "abcdefghijklmnopqrstuvwxyz"
    k = 0
    while len(vocab) < n_vocab:
        piece = b2u[ord(" ")] + letters[k // 26 % 26] + letters[k % 26] + letters[k // 676 % 26]
        vocab.setdefault(piece, len(vocab))
        k += 1
    assert len(vocab) == n_vocab, (len(vocab), n_vocab)
    tok = {
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": [{"id": i, "content": s, "single_word": False, "lstrip": False, "rstrip": False,
                          "normalized": False, "special": True} for i, s in enumerate(SPECIALS)],
        "normalizer": None,
        "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True},
        "post_processor": None,
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                  "vocab": vocab, "merges": merges},
    }
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(tok, f, ensure_ascii=False)
    with open(os.path.join(out, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump({"add_bos_token": True, "add_eos_token": False, "bos_token": SPECIALS[0],
                   "eos_token": SPECIALS[1]}, f, ensure_ascii=False)
    if len(sys.argv) > 3:   # a longer context (the weights do not care): for prompts holding long tool lists
        cfg["max_position_embeddings"] = int(sys.argv[3])
        with open(os.path.join(out, "config.json"), "w", encoding="utf-8") as f:
            json.dump(cfg, f, indent=2)
    for name in ("config.json", "model.safetensors"):
        dst = os.path.join(out, name)
        if not os.path.exists(dst):
            os.symlink(os.path.abspath(os.path.join(fixture, name)), dst)


if __name__ == "__main__":
    main()
