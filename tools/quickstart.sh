#!/bin/sh
# The README's first command: installs what is missing (as root; otherwise
# prints the apt-get line), builds colibri and generates text with the bundled
# model, models/colibri-tiny.
set -e
cd "$(dirname "$0")/.."
sh tools/deps.sh
make -j"$(nproc)" colibri >/dev/null
./colibri run -p "${1:-It is a truth universally acknowledged, that}" -n 60 --seed 1
