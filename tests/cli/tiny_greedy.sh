#!/bin/sh
# The bundled model's greedy continuations equal Hugging Face's
# (models/colibri-tiny/eval.json, written by tools/export_tiny.py with
# transformers): the prompt ids, and the text of 48 greedy tokens (colibri run
# ends its output with a newline).
set -eu
m=models/colibri-tiny
n=$(python3 -c "import json; print(len(json.load(open('$m/eval.json'))['samples']))")
[ "$n" -ge 3 ]
i=0
while [ $i -lt "$n" ]; do
    prompt=$(python3 -c "import json; print(json.load(open('$m/eval.json'))['samples'][$i]['prompt'], end='')")
    want_ids=$(python3 -c "import json; print(json.dumps(json.load(open('$m/eval.json'))['samples'][$i]['prompt_ids']).replace(' ', ''))")
    got_ids=$("$COLIBRI" tokenize -m "$m" --text "$prompt" | tr -d ' \n')
    [ "$got_ids" = "$want_ids" ] || { echo "prompt $i ids: $got_ids vs $want_ids"; exit 1; }
    python3 -c "import json; print(json.load(open('$m/eval.json'))['samples'][$i]['greedy'])" > /tmp/colibri-greedy-want.$$
    "$COLIBRI" run -m "$m" -p "$prompt" -n 48 --temp 0 2>/dev/null > /tmp/colibri-greedy-got.$$
    if ! cmp -s /tmp/colibri-greedy-want.$$ /tmp/colibri-greedy-got.$$; then
        echo "sample $i differs:"; cat /tmp/colibri-greedy-got.$$; echo; echo "HF:"; cat /tmp/colibri-greedy-want.$$
        rm -f /tmp/colibri-greedy-*.$$; exit 1
    fi
    echo "ok   sample $i: $prompt"
    i=$((i + 1))
done
rm -f /tmp/colibri-greedy-*.$$
