#!/bin/sh
# json_schema outputs of colibri-tiny at temperature 1 (string formats, allOf)
# checked by Python's validators: tests/python/test_schema_outputs.py, through
# the Python binding (the shared library of `make shared`, which make test builds).
set -eu
lib=${COLIBRI_LIB:-build/pic/libcolibri.so.0.2.0}
[ -f "$lib" ] || { echo "$lib is missing: run make shared (make test builds it)"; exit 1; }
COLIBRI_LIB=$lib timeout 300 "${PYTHON:-python3}" tests/python/test_schema_outputs.py
