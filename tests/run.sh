#!/bin/sh
# run.sh BUILD BUSTED -- runs the C tests and the busted specs, prints each suite's output
# and, as the last line, the summed "N passed, N failed". Exits non-zero on any failure.
# ASAN=1: the Lua specs run with the sanitizer runtime preloaded into luajit.
build="${1:-build}"
busted="${2:-luajit /usr/bin/busted}"
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root" || exit 2
export TOCHA_HOME="$root" TOCHA_BUILD="$root/$build"
export LUA_PATH="$root/lua/?.lua;$root/lua/?/init.lua;$root/tests/lua/?.lua;;"
# Every block a CUDA backend's caching allocator hands out (the GPU's, the mock's, the
# emulator's) is filled with 0xff bytes (docs/cuda.md), so a kernel or a test that reads
# memory nobody wrote sees NaN, not the values a reused block happens to hold.
export TOCHA_CUDA_FILL_UNINITIALIZED=1
log="$(mktemp)"
# what failed, recapped above the last line: a CI log may keep only its tail
recap="$(mktemp)"
trap 'rm -f "$log" "$recap"' EXIT
# ASAN=1, the C test runner (built with the sanitizers; leak checking on): GCC 12's sanitizer
# runtime mistakes a dynamic TLS block for a pre-2.25 glibc one when malloc happens to place
# it at a certain page offset, and LeakSanitizer's tracer then crashes at exit ("Tracer
# caught signal 11", google/sanitizers#1322) -- which depends on the allocation layout, so
# it comes and goes with unrelated changes. Not intercepting __tls_get_addr avoids it.
[ -n "$ASAN" ] && export ASAN_OPTIONS="intercept_tls_get_addr=0"

passed=0
failed=0

# A run of the C test runner: "$1" labels its summary line ("c: N passed, N failed" becomes
# "<label>: ..."), the rest is the command; its counts are added to the totals.
c_suite() {
    label="$1"
    shift
    "$@" 2>&1 | sed "s/^c: /$label: /" | tee "$log"
    pattern=$(printf '%s' "$label" | sed 's/[()]/\\&/g') # the label as an ERE
    line=$(grep -E "^$pattern: [0-9]+ passed, [0-9]+ failed" "$log" | tail -n 1)
    grep -E '^ *FAIL ' "$log" | sed "s/^/$label: /" >> "$recap"
    if [ -z "$line" ]; then
        echo "run.sh: $label crashed or printed no summary" | tee -a "$recap"
        failed=$((failed + 1))
    else
        passed=$((passed + $(echo "$line" | sed -E 's/.*: ([0-9]+) passed.*/\1/')))
        failed=$((failed + $(echo "$line" | sed -E 's/.* ([0-9]+) failed.*/\1/')))
    fi
    # a leak report (or LeakSanitizer failing) comes after the summary line, at exit
    if grep -qE 'ERROR: (Address|Leak)Sanitizer|LeakSanitizer has encountered|runtime error:' "$log"; then
        echo "run.sh: $label: a sanitizer report (above)" | tee -a "$recap"
        failed=$((failed + 1))
    fi
}
mock="$root/$build/tests/libtocha_cuda_mock.so"

# C tests.
c_suite "c" "$build/tests/ctest"

# The device tests (cuda_dev_*) again over the mock CUDA backend: on a machine without a
# GPU they otherwise only check that device calls fail cleanly (tests/c/test_cuda_device.c).
c_suite "c (mock CUDA)" env TOCHA_CUDA_LIB="$mock" TOCHA_CUDA_MOCK_DEVICES=2 TOCHA_CUDA_MOCK_CAPACITY=64M \
    "$build/tests/ctest" cuda_dev

# The device tests that need no refusal or host fallback, over the mock running every op
# through libtocha's CPU kernels (TOCHA_CUDA_MOCK_KERNELS=cpu, tests/c/mock_cuda_cpu.c): the
# golden table, graph mode on the device and capture then take the backend's run() path.
c_suite "c (mock CUDA, CPU kernels)" env TOCHA_CUDA_LIB="$mock" TOCHA_CUDA_MOCK_DEVICES=2 \
    TOCHA_CUDA_MOCK_CAPACITY=64M TOCHA_CUDA_MOCK_KERNELS=cpu \
    "$build/tests/ctest" cuda_dev_conformance cuda_dev_graph cuda_dev_devcheck

# The CUDA emulator (tests/emu, built where the CUDA headers are): the backend's own kernels
# and its cuBLAS / cuDNN / cub calls, compiled for the host, run the device tests; graph
# mode's generated kernels go through the emulator's NVRTC and driver (emu_driver.cc).
emu="$root/$build/tests/libtocha_cuda_emu.so"
if [ -f "$emu" ]; then
    c_suite "c (CUDA emulator)" env TOCHA_CUDA_LIB="$emu" TOCHA_CUDA_EMU_DEVICES=2 TOCHA_CUDA_EMU_CAPACITY=256M \
        TOCHA_NVRTC_LIB="$emu" TOCHA_CUDA_DRIVER_LIB="$emu" TOCHA_NVRTC_CACHE=0 \
        "$build/tests/ctest" cuda_dev cuda_codegen_gpu
    # A GPU before compute capability 8.0: half and TF32 attention on the CUDA-core kernels
    # instead of the tensor-core ones (attention.cu, has_mma).
    c_suite "c (CUDA emulator, 7.5)" env TOCHA_CUDA_LIB="$emu" TOCHA_CUDA_EMU_DEVICES=2 \
        TOCHA_CUDA_EMU_CAPACITY=256M TOCHA_CUDA_EMU_CC=7.5 \
        "$build/tests/ctest" cuda_dev_attention_half cuda_dev_attention_tf32 cuda_dev_conformance_golden
    # Blocks and threads last to first (emu_sched.cc): threads that read what another thread
    # of their block writes with no barrier between see the other value in one of the orders.
    c_suite "c (CUDA emulator, reverse order)" env TOCHA_CUDA_EMU_ORDER=reverse TOCHA_CUDA_LIB="$emu" \
        TOCHA_CUDA_EMU_DEVICES=2 TOCHA_CUDA_EMU_CAPACITY=256M TOCHA_NVRTC_LIB="$emu" TOCHA_CUDA_DRIVER_LIB="$emu" \
        TOCHA_NVRTC_CACHE=0 "$build/tests/ctest" cuda_dev cuda_codegen_gpu
fi

# Host checks of the CUDA backend's index math (tests/cuda_host): one count per program.
for prog in "$build"/tests/cuda_host_*; do
    [ -x "$prog" ] || continue
    "$prog" > "$log" 2>&1
    echo "$(basename "$prog"): $(tail -n 1 "$log")"
    if grep -qE '^[0-9]+ passed, 0 failed' "$log"; then passed=$((passed + 1)); else
        tail -n 20 "$log"; echo "FAIL $prog" | tee -a "$recap"; failed=$((failed + 1)); fi
done

# busted specs (utfTerminal output ends with "N successes / N failures / N errors / N pending"):
# busted_count LABEL adds the counts of the run whose output is in $log.
busted_count() {
    b_line=$(grep -E '[0-9]+ successes? / [0-9]+ failures? / [0-9]+ errors?' "$log" | tail -n 1)
    # each failure's or error's place, test name and first message line
    awk -v label="$1" '/^(Failure|Error) -> /{n = 3; print label ": " $0; next} n > 1 {print "    " $0} {n--}' \
        "$log" >> "$recap"
    if [ -z "$b_line" ]; then
        echo "run.sh: $1 crashed or printed no summary" | tee -a "$recap"
        failed=$((failed + 1))
    else
        s=$(echo "$b_line" | sed -E 's/^([0-9]+) success.*/\1/')
        f=$(echo "$b_line" | sed -E 's/.* ([0-9]+) failures?.*/\1/')
        e=$(echo "$b_line" | sed -E 's/.* ([0-9]+) errors?.*/\1/')
        passed=$((passed + s))
        failed=$((failed + f + e))
    fi
}
if [ -n "$ASAN" ]; then
    export LD_PRELOAD="$(cc -print-file-name=libasan.so) $(cc -print-file-name=libubsan.so)"
    export ASAN_OPTIONS="detect_leaks=0:halt_on_error=1"
fi
$busted --output=plainTerminal tests/lua 2>&1 | tee "$log"
busted_count "busted"
# The CUDA specs again, their children over the CUDA emulator instead of the mock.
if [ -f "$emu" ]; then
    TOCHA_TEST_EMU=1 $busted --output=plainTerminal tests/lua/cuda_tensor_spec.lua tests/lua/cuda_stream_spec.lua \
        tests/lua/jit_cuda_spec.lua tests/lua/nn_cuda_spec.lua 2>&1 | tee "$log"
    busted_count "busted (CUDA emulator)"
    TOCHA_CUDA_EMU_ORDER=reverse TOCHA_TEST_EMU=1 $busted --output=plainTerminal tests/lua/cuda_tensor_spec.lua \
        tests/lua/cuda_stream_spec.lua tests/lua/jit_cuda_spec.lua tests/lua/nn_cuda_spec.lua 2>&1 | tee "$log"
    busted_count "busted (CUDA emulator, reverse order)"
fi
unset LD_PRELOAD

if [ -s "$recap" ]; then
    echo
    echo "what failed (the first 60 lines):"
    head -n 60 "$recap"
fi
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
