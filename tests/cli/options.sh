#!/bin/sh
# The options layer as llama.cpp and vLLM users type it: --opt=value, the
# long aliases, -n -1, range errors in integers, --version; tokenize with the
# bundled model by default and -p for its text.
set -eu
t=${TMPDIR:-/tmp}/options.$$; trap 'rm -f "$t" "$t".*' EXIT
"$COLIBRI" run -p "It is a truth" -n 6 --temp 0 > "$t.a" 2>/dev/null
"$COLIBRI" run -p "It is a truth" --n-predict=6 --temp=0 > "$t.b" 2>/dev/null
"$COLIBRI" run -p "It is a truth" --max-tokens 6 --temperature=0 > "$t.c" 2>/dev/null
cmp "$t.a" "$t.b"; cmp "$t.a" "$t.c"
"$COLIBRI" run -p "It is a truth" -n -1 --ctx-size 24 --temp 0 2>"$t.e" >/dev/null
grep -q "stopped by context" "$t.e"
if "$COLIBRI" run -p hi -n 0 2>"$t.e"; then exit 1; fi
grep -q -- "-1 for no limit" "$t.e"
if "$COLIBRI" run -p hi --chat=yes 2>"$t.e"; then exit 1; fi
grep -q "'--chat' takes no value" "$t.e"
if "$COLIBRI" run -p hi --ctx 99999999 2>"$t.e"; then exit 1; fi
grep -q "out of range \[0, 16777216\]" "$t.e"
if "$COLIBRI" run -p hi --ctx-sizes 9 2>"$t.e"; then exit 1; fi
grep -q "unknown option '--ctx-sizes'" "$t.e"
v=$("$COLIBRI" --version)
echo "$v" | grep -Eq '^colibri [0-9]+\.[0-9]+\.[0-9]+ \(commit ([0-9a-f]+|unknown)\)$'
echo "$v" | grep -Eq '^kernels: (amx|avx512vbmi|avx512|avx2|neon|scalar) on this CPU$'
[ "$("$COLIBRI" tokenize -p "Hello world")" = "$("$COLIBRI" tokenize -m models/colibri-tiny --text "Hello world")" ]
# --display-prompt prints the prompt, then exactly what a plain run prints
"$COLIBRI" run -p "It is a truth" -n 6 --temp 0 --display-prompt > "$t.d" 2>/dev/null
printf 'It is a truth' | cat - "$t.a" | cmp - "$t.d"
"$COLIBRI" run -p "It is a truth" -n 6 --temp 0 --no-display-prompt > "$t.e2" 2>/dev/null
cmp "$t.a" "$t.e2"
# serve's aliases reach its own options (refused values name the canonical option, nothing starts)
for a in "-np 0" "--parallel=0" "--parallel 0"; do
    # shellcheck disable=SC2086
    if "$COLIBRI" serve $a 2>"$t.e"; then exit 1; fi
    grep -q -- "--slots: 0 is out of range \[1, 64\]" "$t.e"
done
for a in "-c -5" "--ctx-size=-5"; do
    # shellcheck disable=SC2086
    if "$COLIBRI" serve $a 2>"$t.e"; then exit 1; fi
    grep -q -- "--ctx: -5 is out of range" "$t.e"
done
# llama-server habits: meaningless switches pass with a note naming them, -ngl is refused naming --device
"$COLIBRI" run -p "It is a truth" -n 6 --temp 0 --jinja -fa on -cb > "$t.h" 2>"$t.e"
cmp "$t.a" "$t.h"
grep -q "note: --jinja ignored" "$t.e" && grep -q "note: -fa ignored" "$t.e" && grep -q "note: -cb ignored" "$t.e"
for a in "-ngl 99" "--n-gpu-layers=99"; do
    # shellcheck disable=SC2086
    if "$COLIBRI" run -p hi $a 2>"$t.e"; then exit 1; fi
    grep -q -- "--device cuda" "$t.e"
done
if "$COLIBRI" serve --chat-template chatml --port 0 2>"$t.e"; then exit 1; fi
grep -q "not a built-in name like llama.cpp's chatml" "$t.e"
if "$COLIBRI" serve --temp 3 2>"$t.e"; then exit 1; fi
grep -q -- "--temp: 3 is out of range" "$t.e"
# colibri info reads only the headers: well under the model's size in memory, and quick
python3 - "$COLIBRI" <<'PY'
import os, subprocess, sys, time
def peak(args):   # peak RSS of one run, in bytes (a fresh interpreter per run, so the maxima do not mix)
    code = ("import resource, subprocess, sys; subprocess.run(sys.argv[1:], check=True, stdout=subprocess.DEVNULL); "
            "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024)")
    return int(subprocess.run([sys.executable, "-c", code] + args, check=True, capture_output=True, text=True).stdout)
base = peak([sys.argv[1], "--version"])
t0 = time.time()
rss = peak([sys.argv[1], "info", "-m", "models/colibri-tiny"])
dt = time.time() - t0
size = os.path.getsize("models/colibri-tiny/model.safetensors")
assert rss - base < size / 2, f"info peaked {rss - base} bytes above the binary's own for a {size}-byte model"
assert dt < 5, f"info took {dt:.1f} s"
PY
