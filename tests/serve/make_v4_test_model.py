#!/usr/bin/env python3
"""Builds a servable DeepSeek-V4 model directory from a tests/oracle_v4
fixture (config.json + model.safetensors, vocab 64 or 96, no tokenizer), or
from a tests/oracle_glm53 one (its text_config's vocab).

A byte-level tokenizer needs 256 byte ids, more than the fixture has, so
DIR/tokenizer.json is a BPE without merges over two special tokens and single
letters and digits, ids 0..N-1 with N = the fixture's vocab: enough to detokenize
every id the model emits. Prompts go to the server as token ids.

usage: make_v4_test_model.py FIXTURE_DIR OUT_DIR
"""
import json
import os
import sys

SPECIALS = ["<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>"]
CHARS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.,;:!?-+=*/()[]{}<>@#$%&~^_|'\"`\\"


def main():
    fixture, out = sys.argv[1], sys.argv[2]
    cfg = json.load(open(os.path.join(fixture, "config.json")))
    n_vocab = cfg.get("text_config", cfg)["vocab_size"]   # GLM-5.3 fixtures nest the text model's
    vocab = {s: i for i, s in enumerate(SPECIALS)}
    for c in CHARS:
        if len(vocab) < n_vocab:
            vocab[c] = len(vocab)
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
                  "vocab": vocab, "merges": []},
    }
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(tok, f, ensure_ascii=False)
    with open(os.path.join(out, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump({"add_bos_token": False, "bos_token": SPECIALS[0], "eos_token": SPECIALS[1]}, f, ensure_ascii=False)
    for name in ("config.json", "model.safetensors"):
        dst = os.path.join(out, name)
        if not os.path.exists(dst):
            os.symlink(os.path.abspath(os.path.join(fixture, name)), dst)


if __name__ == "__main__":
    main()
