#!/usr/bin/env python3
"""Writes a small GLM tokenizer into DIR for the GLM-5.3 serve test: a
byte-level BPE (make_test_model.py's merges) whose added tokens are GLM's
([gMASK], <sop>, <|endoftext|>, the role tokens <|system|> <|user|>
<|assistant|> <|observation|>, and the text-visible <think> </think>
<tool_call> </tool_call> <arg_key> </arg_key> <arg_value> </arg_value>
<tool_response> </tool_response>, special: false as in GLM's own files, so
the server sees them in the reply and a grammar can spell them), ids 0..N-1
for the model's vocab_size N. GLM ends a turn with <|endoftext|>, <|user|>
or <|observation|> (generation_config.json's eos_token_id list).

usage: make_glm_tokenizer.py MODEL_DIR [CHAT_TEMPLATE_FILE]
(with a template: tokenizer_config.json carries it as chat_template, as a
release's does; without: the model ships none)
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_test_model import TEXT, bytes_to_unicode, learn_merges  # noqa: E402

CONTROL = ["[gMASK]", "<sop>", "<|endoftext|>", "<|system|>", "<|user|>", "<|assistant|>", "<|observation|>"]
TEXT_TAGS = ["<think>", "</think>", "<tool_call>", "</tool_call>", "<arg_key>", "</arg_key>", "<arg_value>",
             "</arg_value>", "<tool_response>", "</tool_response>"]


def main():
    out = sys.argv[1]
    n_vocab = json.load(open(os.path.join(out, "config.json")))
    n_vocab = n_vocab.get("text_config", n_vocab)["vocab_size"]
    b2u = bytes_to_unicode()
    added = CONTROL + TEXT_TAGS
    vocab = {s: i for i, s in enumerate(added)}
    for b in range(256):
        vocab[b2u[b]] = len(vocab)
    merges = []
    for a, b in learn_merges(TEXT, n_vocab - len(vocab), b2u):
        if a + b not in vocab:
            vocab[a + b] = len(vocab)
            merges.append(f"{a} {b}")
    letters = "abcdefghijklmnopqrstuvwxyz"
    k = 0
    while len(vocab) < n_vocab:   # ids no merge reaches, so every id the model emits decodes
        vocab.setdefault(b2u[ord(" ")] + letters[k // 26 % 26] + letters[k % 26] + letters[k // 676 % 26], len(vocab))
        k += 1
    assert len(vocab) == n_vocab, (len(vocab), n_vocab)
    tok = {
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": [{"id": i, "content": s, "single_word": False, "lstrip": False, "rstrip": False,
                          "normalized": False, "special": s in CONTROL} for i, s in enumerate(added)],
        "normalizer": None,
        "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True},
        "post_processor": None,
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                  "vocab": vocab, "merges": merges},
    }
    with open(os.path.join(out, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(tok, f, ensure_ascii=False)
    cfg = {"add_bos_token": False, "add_eos_token": False, "eos_token": "<|endoftext|>", "pad_token": "<|endoftext|>"}
    if len(sys.argv) > 2:
        cfg["chat_template"] = open(sys.argv[2], encoding="utf-8").read()
    with open(os.path.join(out, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump(cfg, f, ensure_ascii=False)
    with open(os.path.join(out, "generation_config.json"), "w", encoding="utf-8") as f:
        json.dump({"eos_token_id": [vocab["<|endoftext|>"], vocab["<|user|>"], vocab["<|observation|>"]]}, f)


if __name__ == "__main__":
    main()
