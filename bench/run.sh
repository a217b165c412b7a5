#!/bin/sh
# run.sh BUILD -- `make bench`: installs PyTorch (Debian python3-torch) when missing, builds
# the OpenBLAS peak program, then runs bench/run.lua.
set -e
build="${1:-build}"
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
TOCHA_EXTRA_DEPS="python3-torch" sh .ci/deps.sh
mkdir -p "$build/bench"
blas_inc=$(ls -d /usr/include/*/openblas-pthread 2>/dev/null | head -n 1)
cc -O2 ${blas_inc:+-I$blas_inc} bench/sgemm_peak.c -o "$build/bench/sgemm_peak" -lopenblas
luajit bench/run.lua "$build"
