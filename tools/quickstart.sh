#!/bin/sh
# The README's first command: installs what is missing (as root; otherwise
# prints the apt-get line), builds colibri and generates text with the bundled
# model, models/colibri-tiny. Says what it is doing at each step.
set -e
cd "$(dirname "$0")/.."
echo "quickstart: checking the Debian packages colibri needs (tools/deps.sh)" >&2
sh tools/deps.sh
echo "quickstart: building ./colibri (make, $(nproc) jobs; a minute or so the first time)" >&2
make -j"$(nproc)" colibri >/dev/null
echo "quickstart: generating 60 tokens with models/colibri-tiny (colibri run --display-prompt)" >&2
./colibri run -p "${1:-It is a truth universally acknowledged, that}" -n 60 --seed 1 --display-prompt
echo "quickstart: next, \`make deps test\` installs what the tests need (build/venv) and runs them" >&2
