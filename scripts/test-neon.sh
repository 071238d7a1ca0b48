#!/bin/sh
# Cross-builds the AArch64 NEON kernels with Debian's aarch64-linux-gnu-gcc and runs their
# self-contained test (tests/neon/test_kernels_neon.c) under qemu-user:
#   1. -cpu max        : ARMv8.2+ with the dot product: both integer kernel variants are checked
#   2. -cpu cortex-a53 : ARMv8.0, no dot product: detection must say so, and the fallback
#                        kernels (and everything else the path runs) must not fault
# Files named *_neon.c get -march=armv8.2-a+dotprod+fp16 (as in CMakeLists.txt); the rest is
# built for plain ARMv8.0, so the cortex-a53 run also proves nothing else needs ARMv8.2.
# Needs: gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user (scripts/install-deps.sh).
# Without them it prints SKIP and exits 0, except under CI=true, where it fails.
set -e
cd "$(dirname "$0")/.."

CC=${CROSS_CC:-aarch64-linux-gnu-gcc}
QEMU=${QEMU:-qemu-aarch64}
SYSROOT=${CROSS_SYSROOT:-/usr/aarch64-linux-gnu}
OUT=${NEON_BUILD_DIR:-build-neon}

missing=""
command -v "$CC" >/dev/null 2>&1 || missing="$missing $CC"
command -v "$QEMU" >/dev/null 2>&1 || missing="$missing $QEMU"
if [ -n "$missing" ]; then
    if [ "${CI:-}" = "true" ]; then
        echo "test-neon: FAIL: missing$missing (run scripts/install-deps.sh)" >&2
        exit 1
    fi
    echo "test-neon: SKIP: missing$missing (install gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user)"
    exit 0
fi

CFLAGS="-std=c11 -O2 -Wall -Wextra -Werror -D_GNU_SOURCE -fno-math-errno -Iinclude -Isrc -Itests/support"
NEON_FLAGS="-march=armv8.2-a+dotprod+fp16"
SOURCES="$(ls src/quant/*.c) $(ls src/kernels/*.c | grep -v -e '_avx2\.c$' -e '_avx512\.c$' -e '_avxvnni\.c$')
src/util/error.c src/util/threadpool.c tests/neon/test_kernels_neon.c"

rm -rf "$OUT"
mkdir -p "$OUT/obj"
objs=""
for src in $SOURCES; do
    obj="$OUT/obj/$(echo "$src" | tr / _ | sed 's/\.c$/.o/')"
    flags=""
    case "$src" in *_neon.c) flags="$NEON_FLAGS" ;; esac
    # shellcheck disable=SC2086
    "$CC" $CFLAGS $flags -c "$src" -o "$obj"
    objs="$objs $obj"
done
# shellcheck disable=SC2086
"$CC" -o "$OUT/test_kernels_neon" $objs -lm -lpthread
echo "test-neon: built $OUT/test_kernels_neon with $("$CC" -dumpfullversion)"

status=0
run() {
    cpu=$1
    expect=$2
    echo "test-neon: qemu-aarch64 -cpu $cpu (dot product expected: $expect)"
    if "$QEMU" -cpu "$cpu" -L "$SYSROOT" "$OUT/test_kernels_neon" --expect-dotprod="$expect"; then
        echo "test-neon: -cpu $cpu passed"
    else
        echo "test-neon: -cpu $cpu FAILED" >&2
        status=1
    fi
}
run max yes
if "$QEMU" -cpu help 2>/dev/null | grep -qw cortex-a53; then
    run cortex-a53 no
else
    echo "test-neon: this qemu has no cortex-a53 model; the ARMv8.0 fallback ran only as a direct call"
fi
exit $status
