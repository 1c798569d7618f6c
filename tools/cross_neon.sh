#!/bin/sh
# Builds the quant unit tests for aarch64 and runs them under qemu-user: the
# check the NEON kernels (src/quant/*_neon.c) get on an x86-64 machine. It
# checks results, not speed. Not part of `make test` (an emulated test_quant
# takes minutes); run it after changing a NEON kernel or a format:
#     sh tools/cross_neon.sh                  test_quant_mxfp4 and test_quant
#     sh tools/cross_neon.sh test_quant_mxfp4 the named tests only
# Needs (Debian): gcc-aarch64-linux-gnu qemu-user libgomp1-arm64-cross, and
# the arm64 builds of the libraries colibri links (dpkg --add-architecture
# arm64; libcjson-dev:arm64 libpcre2-dev:arm64 libxxhash-dev:arm64
# libmicrohttpd-dev:arm64). Without them it says what is missing and exits 77
# (skipped: nothing was tested). Objects go to build-arm64 (BUILD=...), apart
# from the native build.
set -eu
cd "$(dirname "$0")/.."
CROSS_CC=${CROSS_CC:-aarch64-linux-gnu-gcc}
QEMU=${QEMU:-qemu-aarch64}
SYSROOT=${SYSROOT:-/usr/aarch64-linux-gnu}
BUILD=${BUILD:-build-arm64}
tests=${*:-test_quant_mxfp4 test_quant}
missing=""
command -v "$CROSS_CC" >/dev/null 2>&1 || missing="$missing $CROSS_CC (gcc-aarch64-linux-gnu)"
command -v "$QEMU" >/dev/null 2>&1 || missing="$missing $QEMU (qemu-user)"
[ -e "$SYSROOT/lib/libgomp.so.1" ] || missing="$missing $SYSROOT/lib/libgomp.so.1 (libgomp1-arm64-cross)"
for h in cjson/cJSON.h pcre2.h xxhash.h microhttpd.h; do
    echo "#include <$h>" | "$CROSS_CC" -DPCRE2_CODE_UNIT_WIDTH=8 -E -x c - >/dev/null 2>&1 || missing="$missing $h for arm64"
done
if [ -n "$missing" ]; then
    echo "cross_neon.sh: SKIPPED, nothing tested: missing$missing" >&2
    exit 77
fi
targets=""
for t in $tests; do targets="$targets $BUILD/tests/$t"; done
# ARCH selects the *_neon.c kernels; PORTABLE=1 drops -march=native (x86's)
make -s -j"$(nproc)" BUILD="$BUILD" ARCH=aarch64 PORTABLE=1 CC="$CROSS_CC" $targets
fail=0
for t in $tests; do
    echo "== $t (aarch64, $QEMU)"
    "$QEMU" -L "$SYSROOT" "$BUILD/tests/$t" || fail=1
done
exit $fail
