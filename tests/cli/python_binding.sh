#!/bin/sh
# The Python binding (python/colibri, ctypes over the shared library of
# `make shared`, which `make test` builds first): tests/python/test_binding.py
# checks it against the colibri command and a transformers fixture. Nothing
# is installed: the test puts python/ on its own path.
set -eu
lib=${COLIBRI_LIB:-build/pic/libcolibri.so.0.2.0}
[ -f "$lib" ] || { echo "$lib is missing: run make shared (make test builds it)"; exit 1; }

# First, the ctypes mirrors of the public structs must be exactly the C ones: a field
# missing at the end makes the library read past the Python object.
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
cat > "$tmp/sizes.c" <<'C'
#include <stdio.h>
#include "colibri.h"
int main(void)
{
    printf("Err %zu\nModelOpts %zu\nSessionOpts %zu\nSamplerOpts %zu\nGenOpts %zu\nGenStep %zu\n",
           sizeof(struct colibri_err), sizeof(struct colibri_model_opts), sizeof(struct colibri_session_opts),
           sizeof(struct colibri_sampler_opts), sizeof(struct colibri_gen_opts), sizeof(struct colibri_gen_step));
    return 0;
}
C
${CC:-cc} -Iinclude -o "$tmp/sizes" "$tmp/sizes.c"
"$tmp/sizes" > "$tmp/c.txt"
PYTHONPATH=python "${PYTHON:-python3}" - "$tmp/c.txt" <<'PY'
import ctypes, sys
from colibri import _ffi
bad = 0
for line in open(sys.argv[1]):
    name, size = line.split()
    got = ctypes.sizeof(getattr(_ffi, name))
    if got != int(size):
        print(f"FAIL python/colibri/_ffi.py {name}: {got} bytes, the C struct has {size}")
        bad = 1
    else:
        print(f"ok   {name} is {got} bytes, as in colibri.h")
sys.exit(bad)
PY

COLIBRI_LIB=$lib timeout 300 "${PYTHON:-python3}" tests/python/test_binding.py
