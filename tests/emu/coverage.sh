#!/bin/sh
# coverage.sh -- which lines of the CUDA backend (core/cuda) the emulator's test passes run.
#
# Builds the emulator's library again with gcov instrumentation (each .cu file as cu2cc.pl
# rewrote it for the normal build, at -O1 --coverage) in BUILD/emu-coverage, runs over it
# what tests/run.sh runs over the emulator (the device C tests as a 9.0 and as a 7.5 device,
# the CUDA specs with their children over the emulator, and the specs that start emulator
# children themselves: cuda_spec, cuda_emu_spec), and lists the lines of core/cuda that no run reached: a kernel path no
# test exercises is never checked against the CPU, on the emulator or on a GPU.
#
#   sh tests/emu/coverage.sh [BUILD]     (after `make`; BUILD defaults to build)
#
# Writes BUILD/emu-coverage/uncovered.txt ("file:line: source", a line is counted once
# whatever the template instantiations) and prints the count per file. Error returns make
# up much of the list. About ten minutes on two cores; not part of `make test`.
set -e
build=${1:-build}
root=$(pwd)
out="$build/emu-coverage"
emu="$build/tests/libtocha_cuda_emu.so"
[ -f "$emu" ] || { echo "coverage.sh: $emu not found: run make first (it needs the CUDA headers)"; exit 2; }
cuda_inc=${CUDA_HOME:-/usr/local/cuda}/include
mkdir -p "$out"
rm -f "$out"/*.gcda

# Instrumented objects for the kernels' files; cu_runtime (built with the device targets'
# defines) and the emulator's own files stay as they are.
flags="-std=c++17 -O1 -g -fPIC -fvisibility=hidden -pthread -w -Itests/emu -Icore/cuda -Icore -I$cuda_inc --coverage"
for cc in "$build"/tests/emu/cu_*.cc; do
    b=$(basename "$cc" .cc)
    [ "$b" = cu_runtime ] && continue
    [ "$out/$b.o" -nt "$cc" ] && continue
    echo "g++ $flags -include tests/emu/emu_device.h -c $cc -o $out/$b.o"
done | xargs -r -P "$(nproc)" -I{} sh -c "{}"
objs=""
for o in "$build"/tests/emu/*.o; do
    b=$(basename "$o")
    if [ -f "$out/$b" ]; then objs="$objs $out/$b"; else objs="$objs $o"; fi
done
# shellcheck disable=SC2086
g++ -shared -pthread --coverage -Wl,-z,defs -o "$out/libtocha_cuda_emu.so" $objs -lpthread -ldl

# The build seen through links, its emulator library the instrumented one (the CUDA specs
# find it as TOCHA_BUILD/tests/libtocha_cuda_emu.so).
view="$out/build"
rm -rf "$view" && mkdir -p "$view/tests"
for e in "$root/$build"/*; do [ "$(basename "$e")" = tests ] || ln -s "$e" "$view/"; done
for e in "$root/$build"/tests/*; do [ "$(basename "$e")" = libtocha_cuda_emu.so ] || ln -s "$e" "$view/tests/"; done
lib="$root/$out/libtocha_cuda_emu.so"
ln -s "$lib" "$view/tests/libtocha_cuda_emu.so"

log="$out/runs.log"
echo "running the device tests and the CUDA specs over the instrumented emulator (log: $log)"
{
    env TOCHA_CUDA_LIB="$lib" TOCHA_CUDA_EMU_DEVICES=2 TOCHA_CUDA_EMU_CAPACITY=256M TOCHA_NVRTC_LIB="$lib" \
        TOCHA_CUDA_DRIVER_LIB="$lib" TOCHA_NVRTC_CACHE=0 "$build/tests/ctest" cuda_dev cuda_codegen_gpu
    env TOCHA_CUDA_LIB="$lib" TOCHA_CUDA_EMU_DEVICES=2 TOCHA_CUDA_EMU_CAPACITY=256M TOCHA_CUDA_EMU_CC=7.5 \
        "$build/tests/ctest" cuda_dev_attention_half cuda_dev_attention_tf32 cuda_dev_conformance_golden
    env TOCHA_HOME="$root" TOCHA_BUILD="$root/$view" TOCHA_TEST_EMU=1 \
        LUA_PATH="$root/lua/?.lua;$root/lua/?/init.lua;$root/tests/lua/?.lua;;" \
        luajit /usr/bin/busted --output=plainTerminal tests/lua/cuda_tensor_spec.lua tests/lua/cuda_stream_spec.lua \
        tests/lua/jit_cuda_spec.lua tests/lua/nn_cuda_spec.lua tests/lua/cuda_spec.lua tests/lua/cuda_emu_spec.lua
} > "$log" 2>&1 || echo "coverage.sh: a run failed (see $log); the counts below are of what ran"

# Every line's count is the largest gcov reports for it in any file and instantiation
# (the plain listing holds the sum): 0 ("#####") means no run reached it.
for cc in "$build"/tests/emu/cu_*.cc; do
    b=$(basename "$cc" .cc)
    [ -f "$out/$b.gcda" ] && gcov -t -o "$out" "$cc" 2>/dev/null
done | awk '
    / 0:Source:/ { sub(/.* 0:Source:/, ""); file = $0; next }
    file ~ /^core\/cuda\// && /^ *([0-9]+\*?|#####|=====): *[0-9]+:/ {
        c = $0; sub(/:.*/, "", c); gsub(/[ *]/, "", c)
        rest = $0; sub(/^[^:]*: */, "", rest)
        n = rest; sub(/:.*/, "", n)
        src = rest; sub(/^[^:]*:/, "", src); sub(/^[ \t]+/, "", src)
        key = file ":" n
        v = (c == "#####" || c == "=====") ? 0 : c + 0
        if (!(key in best) || v > best[key]) best[key] = v
        text[key] = src
    }
    END { for (k in best) if (best[k] == 0) print k ": " text[k] }' | sort -t: -k1,1 -k2,2n > "$out/uncovered.txt"
echo "lines of core/cuda no run reached, per file ($out/uncovered.txt lists them):"
cut -d: -f1 "$out/uncovered.txt" | sort | uniq -c
