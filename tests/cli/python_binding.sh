#!/bin/sh
# The Python binding (python/colibri, ctypes over the shared library of
# `make shared`, which `make test` builds first): tests/python/test_binding.py
# checks it against the colibri command and a transformers fixture. Nothing
# is installed: the test puts python/ on its own path.
set -eu
lib=${COLIBRI_LIB:-build/pic/libcolibri.so.0.2.0}
[ -f "$lib" ] || { echo "$lib is missing: run make shared (make test builds it)"; exit 1; }
COLIBRI_LIB=$lib timeout 300 "${PYTHON:-python3}" tests/python/test_binding.py
