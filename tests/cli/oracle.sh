#!/bin/sh
# Every oracle fixture must be exact against Hugging Face (colibri oracle's gate).
set -e
out=$("$COLIBRI" oracle tests/oracle/*)
echo "$out"
n=$(ls -d tests/oracle/*/ | wc -l)
[ "$(echo "$out" | grep -c ' tf=')" -eq "$n" ]
