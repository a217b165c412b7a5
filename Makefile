# tocha -- one Makefile, no configure step.
# Floating point: -fno-math-errno -fno-trapping-math let loops with sqrt and the
# branch-free exp/tanh (core/scalar_math.h) vectorise; tocha never reads errno or FP flags.
#
#   make            libtocha, the ffi cdef, the `tocha` executable (+ CUDA backend if nvcc)
#   make test       installs missing Debian packages, builds, runs C tests + busted specs;
#                   last line: "N passed, N failed"
#   make demo       the main job (see README)
#   make bench      side-by-side benchmarks against PyTorch -> bench/RESULTS.md
#   make bench-gpu  GPU training benchmark (ResNet-50, GPT-2, LSTM LM) against PyTorch 2.x ->
#                   the GPU section of bench/RESULTS.md (bench/gpu/README.md); fails without a GPU
#   make bench-gpu-tiny  the same suite at small sizes on the CPU: both sides train, counts match
#   make asan       the test suite under AddressSanitizer + UBSan
#   make deps       install the Debian packages (apt-get, no questions)
#   make lint       cppcheck + the no-abort/exit/assert grep over core/

CC       ?= cc
BUILD    ?= build
OPT      ?= -O3
SAN      ?=
CFLAGS   += -std=c11 $(OPT) -g -fPIC -Wall -Wextra -Wno-unused-parameter -Wno-missing-field-initializers \
            -fno-math-errno -fno-trapping-math -D_GNU_SOURCE -pthread $(SAN)
BLAS_INC := $(firstword $(wildcard /usr/include/x86_64-linux-gnu/openblas-pthread /usr/include/aarch64-linux-gnu/openblas-pthread /usr/include/openblas))
CPPFLAGS += -Icore $(if $(BLAS_INC),-I$(BLAS_INC)) -DTC_HAVE_OPENBLAS
LDLIBS   += -lopenblas -lz -lm -lpthread -ldl
LUAJIT_CFLAGS := $(shell pkg-config --cflags luajit 2>/dev/null || echo -I/usr/include/luajit-2.1)
LUAJIT_LIBS   := $(shell pkg-config --libs luajit 2>/dev/null || echo -lluajit-5.1)
LUAJIT   ?= luajit
BUSTED   ?= $(LUAJIT) /usr/bin/busted

# CUDA: compiled whenever nvcc is found (CUDA_HOME, else /usr/local/cuda, else PATH).
CUDA_HOME ?= $(firstword $(wildcard /usr/local/cuda))
NVCC      ?= $(firstword $(wildcard $(CUDA_HOME)/bin/nvcc) $(shell command -v nvcc 2>/dev/null))
# GPU targets: machine code for each compute capability in CUDA_SASS (90: the H100 / H200 the
# benchmarks run on) and PTX for CUDA_PTX (75, the oldest CUDA 13 compiles for), which the
# driver compiles once for any other GPU from Turing on and caches (~/.nv/ComputeCache).
# Machine code for your own GPU skips that first-run compile: make CUDA_SASS="86 90".
CUDA_SASS ?= 90
CUDA_PTX  ?= 75
CUDA_TARGETS := $(foreach a,$(CUDA_SASS),-gencode arch=compute_$(a),code=sm_$(a)) \
                -gencode arch=compute_$(CUDA_PTX),code=compute_$(CUDA_PTX)
# runtime.cu names them when a device has no code here (cu_device_runs_kernels).
CUDA_BUILT := -DTC_CUDA_SASS='"$(strip $(CUDA_SASS))"' -DTC_CUDA_PTX=$(CUDA_PTX)
NVCCFLAGS ?= -O3 -std=c++17 -Xcompiler -fPIC $(CUDA_TARGETS) -Icore

CORE_SRC  := $(wildcard core/*.c core/cpu/*.c core/autograd/*.c core/data/*.c core/graph/*.c)
CORE_OBJ  := $(CORE_SRC:%.c=$(BUILD)/%.o)
CUDA_SRC  := $(wildcard core/cuda/*.cu)
CUDA_CSRC := $(wildcard core/cuda/*.c)
CUDA_OBJ  := $(CUDA_SRC:%.cu=$(BUILD)/%.o) $(CUDA_CSRC:%.c=$(BUILD)/%.o)
EMBED_SRC := bindings/embed.c
CTEST_SRC := $(wildcard tests/c/test_*.c) tests/c/gradcheck.c

LIB       := $(BUILD)/libtocha.so
EMBEDLIB  := $(BUILD)/libtocha_embed.so
CDEF      := $(BUILD)/tocha_cdef.h
EXE       := $(BUILD)/tocha
EMBEDHOST := $(BUILD)/embed_host
CTESTS    := $(BUILD)/tests/ctest
CUDALIB   := $(if $(NVCC),$(BUILD)/libtocha_cuda.so)
MOCKLIB   := $(BUILD)/tests/libtocha_cuda_mock.so

.PHONY: all test demo bench bench-gpu bench-gpu-tiny asan deps lint format clean check-c check-lua cuda FORCE
all: $(LIB) $(CDEF) $(EMBEDLIB) $(EXE) $(EMBEDHOST) $(CUDALIB)

$(BUILD)/%.o: %.c $(wildcard core/*.h) core/ops.def $(wildcard core/autograd/*.h core/data/*.h core/graph/*.h) Makefile
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) -c $< -o $@

# -z nodelete: the CPU thread pool's workers sleep inside libtocha for the life of the
# process; LuaJIT dlcloses ffi.load'ed libraries at exit, and unmapping the code and the
# futex they wait on under them made glibc abort ("The futex facility returned an
# unexpected error code"). Kept mapped, the process simply exits.
$(LIB): $(CORE_OBJ)
	$(CC) $(CFLAGS) -shared -Wl,-soname,libtocha.so -Wl,-z,nodelete -o $@ $^ $(LDLIBS)

# The LuaJIT ffi.cdef text, generated from the public header (never written by hand).
$(CDEF): $(wildcard core/tocha*.h) core/ops.def bindings/gen_cdef.sh
	@mkdir -p $(BUILD)
	sh bindings/gen_cdef.sh "$(CC)" core/tocha.h > $@.tmp && mv $@.tmp $@

$(BUILD)/bindings/%.o: bindings/%.c bindings/tocha_embed.h core/tocha.h
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) -Ibindings $(LUAJIT_CFLAGS) $(CFLAGS) -c $< -o $@

$(EMBEDLIB): $(BUILD)/bindings/embed.o $(LIB)
	$(CC) $(CFLAGS) -shared -Wl,-soname,libtocha_embed.so -o $@ $< -L$(BUILD) -ltocha $(LUAJIT_LIBS) \
	    -Wl,-rpath,'$$ORIGIN' $(LDLIBS)

$(EXE): $(BUILD)/bindings/main.o $(BUILD)/bindings/repl.o $(EMBEDLIB) $(LIB)
	$(CC) $(CFLAGS) -o $@ $(BUILD)/bindings/main.o $(BUILD)/bindings/repl.o -L$(BUILD) -ltocha_embed -ltocha \
	    $(LUAJIT_LIBS) -ledit -Wl,-rpath,'$$ORIGIN' -Wl,-E $(LDLIBS)

# The example host program (examples/embed_host.c): links only the embedding API.
$(EMBEDHOST): examples/embed_host.c bindings/tocha_embed.h core/tocha.h $(EMBEDLIB) $(LIB)
	$(CC) $(CPPFLAGS) -Ibindings $(CFLAGS) -o $@ $< -L$(BUILD) -ltocha_embed -ltocha -Wl,-rpath,'$$ORIGIN' $(LDLIBS)

# ---- CUDA backend (its own shared object, dlopen'ed at run time) ----------------------
# The targets and flags the backend was last built with: a change (make CUDA_SASS=...)
# rewrites this file, and everything built from core/cuda is built again.
CUDA_STAMP := $(BUILD)/cuda_targets
$(CUDA_STAMP): FORCE
	@mkdir -p $(dir $@)
	@echo 'sass=$(CUDA_SASS) ptx=$(CUDA_PTX) $(NVCC) $(NVCCFLAGS)' | cmp -s - $@ \
	    || echo 'sass=$(CUDA_SASS) ptx=$(CUDA_PTX) $(NVCC) $(NVCCFLAGS)' > $@
FORCE:
$(BUILD)/core/cuda/%.o: core/cuda/%.cu core/ops.def core/scalar_math.h core/tocha.h $(wildcard core/cuda/*.h) $(CUDA_STAMP)
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCCFLAGS) $(CUDA_FILE_FLAGS) -c $< -o $@
# Flags of single files, apart from NVCCFLAGS so that `make NVCCFLAGS=...` keeps them.
$(BUILD)/core/cuda/runtime.o: CUDA_FILE_FLAGS = $(CUDA_BUILT)
# No fused multiply-add contraction in the elementwise kernels and the optimizer steps: the
# CPU computes a*b+c with two roundings, and the conformance tests compare the two bit for bit.
$(BUILD)/core/cuda/ew.o $(BUILD)/core/cuda/optim.o: CUDA_FILE_FLAGS = -fmad=false
# The tensor-core attention (mma.sync needs compute capability 8.0) also as PTX for 8.0, so a
# GPU from Ampere on that has no machine code here (an A100, say) compiles the tensor-core
# kernels, not mma.h's shuffled product that CUDA_PTX's older target gets.
$(BUILD)/core/cuda/attention_tc.o: CUDA_FILE_FLAGS = $(if $(filter 80,$(CUDA_PTX)),,-gencode arch=compute_80,code=compute_80)
# Plain C parts of the backend (the caching allocator): nvcc hands them to the host compiler.
$(BUILD)/core/cuda/%.o: core/cuda/%.c core/tocha.h $(wildcard core/cuda/*.h) $(CUDA_STAMP)
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCCFLAGS) -c $< -o $@

# The CUDA runtime is linked statically: the .so then loads without libcudart.so on the
# library path, and a machine without a driver gets "no CUDA driver", not a dlopen failure.
# cuBLAS and cuDNN (matmul, conv: blas.cu, dnn.cu) are shared libraries found through the
# toolkit's lib64 (rpath), so the toolkit's copies load without LD_LIBRARY_PATH.
CUDA_LIBS ?= -L$(CUDA_HOME)/lib64 -lcublas -lcublasLt -lcudnn -Xlinker -rpath -Xlinker $(CUDA_HOME)/lib64
$(BUILD)/libtocha_cuda.so: $(CUDA_OBJ)
	$(NVCC) $(NVCCFLAGS) -shared -o $@ $^ -cudart static $(CUDA_LIBS)

$(BUILD)/core/cuda_loader.o: core/cuda/cuda_api.h

cuda: $(CUDALIB)

# ---- tests -------------------------------------------------------------------------------
# The caching allocator's source is compiled into the test binary too (test_cuda_alloc.c
# drives it over a fake device); it is not part of libtocha.
$(CTESTS): $(CTEST_SRC) $(wildcard tests/c/*.h) $(LIB) core/cuda/cache_alloc.c core/cuda/cache_alloc.h
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) -Itests/c $(CFLAGS) -o $@ $(CTEST_SRC) core/cuda/cache_alloc.c -L$(BUILD) -ltocha \
	    -Wl,-rpath,'$$ORIGIN/..' $(LDLIBS)
# test_cuda.c checks the backend `make` built here (or, without nvcc, that none is found).
$(CTESTS): private CPPFLAGS += -DTC_TEST_CUDA_BUILT=$(if $(CUDALIB),1,0)
$(CTESTS): $(CUDALIB) $(MOCKLIB) core/cuda/cuda_api.h

# Host checks of the CUDA backend's index math, no GPU needed (tests/cuda_host): the cuBLAS
# call plans and pooling elements (C++, headers shared with the .cu files), and, where nvcc
# is found, the reduce/index/sort kernels' element code emulated on the host (each includes
# core/cuda/<name>.cu, so it is rebuilt when that changes). Each prints
# "N passed, N failed"; tests/run.sh runs every $(BUILD)/tests/cuda_host_* it finds.
CUDAHOST := $(BUILD)/tests/cuda_host_plan $(if $(NVCC),$(BUILD)/tests/cuda_host_reduce $(BUILD)/tests/cuda_host_index \
            $(BUILD)/tests/cuda_host_sort)
$(BUILD)/tests/cuda_host_plan: tests/cuda_host/test_cuda_plan.cpp tests/cuda_host/host_check.h core/cuda/blas_plan.h core/cuda/pool_geom.h core/tocha.h $(LIB)
	@mkdir -p $(dir $@)
	$(CXX) -std=c++17 -O1 -g -Wall -Wextra $(SAN) -Icore $< -L$(BUILD) -ltocha -Wl,-rpath,'$$ORIGIN/..' -o $@
$(BUILD)/tests/cuda_host_%: tests/cuda_host/test_cured_%.cu core/cuda/%.cu tests/cuda_host/host_check.h $(wildcard core/cuda/*.h) core/tocha.h $(LIB)
	@mkdir -p $(dir $@)
	$(NVCC) -std=c++17 -arch=sm_90 -Icore $< -L$(BUILD) -ltocha -Xlinker -rpath,'$$ORIGIN/..' -o $@
$(CTESTS): $(CUDAHOST)

# The CUDA emulator (tests/emu, emu.h): the backend's own sources built with g++ against a
# fake CUDA runtime, cuBLAS, cub and cuDNN over host memory, so its kernels, launches and
# library calls run without a GPU (TOCHA_CUDA_LIB=$(BUILD)/tests/libtocha_cuda_emu.so).
# It needs the CUDA headers, not nvcc: `make asan` builds it too, under the sanitizers.
CUDA_INC := $(if $(wildcard $(CUDA_HOME)/include/cudnn.h),$(CUDA_HOME)/include)
EMULIB   := $(if $(CUDA_INC),$(BUILD)/tests/libtocha_cuda_emu.so)
EMU_SRC  := $(filter-out tests/emu/test_%,$(wildcard tests/emu/*.cc))
EMU_OBJ  := $(CUDA_SRC:core/cuda/%.cu=$(BUILD)/tests/emu/cu_%.o) $(EMU_SRC:tests/emu/%.cc=$(BUILD)/tests/emu/%.o) \
            $(BUILD)/tests/emu/cache_alloc.o
EMU_CXXFLAGS := -std=c++17 -O2 -g -fPIC -fvisibility=hidden -pthread -Wall -Wno-unused-parameter \
                -Wno-unused-function -Wno-unused-variable -Wno-unknown-pragmas $(SAN) -Itests/emu -Icore/cuda -Icore -I$(CUDA_INC)
$(BUILD)/tests/emu/cu_%.cc: core/cuda/%.cu tests/emu/cu2cc.pl
	@mkdir -p $(dir $@)
	perl tests/emu/cu2cc.pl $< $@
$(BUILD)/tests/emu/cu_%.o: $(BUILD)/tests/emu/cu_%.cc tests/emu/emu.h tests/emu/emu_device.h tests/emu/emu_launch.h \
                           $(wildcard tests/emu/cub/*) $(wildcard core/cuda/*.h) \
                           core/ops.def core/scalar_math.h core/tocha.h core/philox.h
	$(CXX) $(EMU_CXXFLAGS) -include tests/emu/emu_device.h -c $< -o $@
$(BUILD)/tests/emu/%.o: tests/emu/%.cc $(wildcard tests/emu/*.h)
	@mkdir -p $(dir $@)
	$(CXX) $(EMU_CXXFLAGS) -c $< -o $@
# The emulated devices have code only where a build with these targets would (TOCHA_CUDA_EMU_CC).
$(BUILD)/tests/emu/cu_runtime.o $(BUILD)/tests/emu/emu_runtime.o: EMU_CXXFLAGS += $(CUDA_BUILT)
$(BUILD)/tests/emu/cu_runtime.o $(BUILD)/tests/emu/emu_runtime.o: $(CUDA_STAMP)
# NVRTC's stand-in builds kernel modules at run time with this compiler, these headers and
# the same sanitizers (emu_driver.cc).
$(BUILD)/tests/emu/emu_driver.o: EMU_CXXFLAGS += -DEMU_MODULE_CXX='"$(CXX)"' -DEMU_MODULE_SAN='"$(SAN)"' \
    -DEMU_MODULE_EMU_DIR='"$(abspath tests/emu)"' -DEMU_MODULE_CUDA_INC='"$(abspath $(CUDA_INC))"'
# The real cuDNN beside these headers gives its opinion on every descriptor (emu_cudnn_real.cc).
EMU_REAL_CUDNN := -DEMU_REAL_CUDNN='"$(abspath $(CUDA_HOME))/lib64/libcudnn.so.9"'
$(BUILD)/tests/emu/emu_cudnn_real.o: EMU_CXXFLAGS += $(EMU_REAL_CUDNN)
$(BUILD)/tests/emu/cache_alloc.o: core/cuda/cache_alloc.c core/cuda/cache_alloc.h
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) -fvisibility=hidden -c $< -o $@
$(BUILD)/tests/libtocha_cuda_emu.so: $(EMU_OBJ)
	$(CXX) $(EMU_CXXFLAGS) -shared -Wl,-z,defs -o $@ $^ -lpthread -ldl
$(CTESTS): $(EMULIB)
# The fakes' own unit tests (against naive references, with stub runtimes of their own);
# named cuda_host_* so tests/run.sh runs them with the other host programs.
EMUTESTS := $(if $(CUDA_INC),$(BUILD)/tests/cuda_host_emu_blas $(BUILD)/tests/cuda_host_emu_cudnn \
                              $(BUILD)/tests/cuda_host_emu_driver)
$(BUILD)/tests/cuda_host_emu_blas: tests/emu/test_emu_blas.cc tests/emu/emu_cublas.cc tests/cuda_host/host_check.h $(wildcard tests/emu/*.h tests/emu/cub/*)
	@mkdir -p $(dir $@)
	$(CXX) $(EMU_CXXFLAGS) -fvisibility=default -o $@ $(filter %.cc,$^)
$(BUILD)/tests/cuda_host_emu_cudnn: tests/emu/test_emu_cudnn.cc tests/emu/test_emu_cudnn_rnn.cc $(filter tests/emu/emu_cudnn%,$(EMU_SRC)) \
                                    $(wildcard tests/emu/*.h)
	@mkdir -p $(dir $@)
	$(CXX) $(EMU_CXXFLAGS) $(EMU_REAL_CUDNN) -fvisibility=default -Wno-deprecated-declarations -o $@ $(filter %.cc,$^) -ldl
# (this one loads the emulator's library, beside it, as tocha does)
$(BUILD)/tests/cuda_host_emu_driver: tests/emu/test_emu_driver.cc tests/cuda_host/host_check.h $(EMULIB)
	@mkdir -p $(dir $@)
	$(CXX) $(EMU_CXXFLAGS) -fvisibility=default -o $@ tests/emu/test_emu_driver.cc -ldl
$(CTESTS): $(EMUTESTS)
.PRECIOUS: $(BUILD)/tests/emu/cu_%.cc

# The mock CUDA backend (tests/c/mock_cuda.c): the whole tc_cuda_api table over host memory
# and the same caching allocator, built with the C compiler on every machine. Point
# TOCHA_CUDA_LIB at it to run CUDA code paths without a GPU (docs/cuda.md).
# It links libtocha.so (tests/c/mock_cuda_cpu.c runs ops through its CPU kernels, opt-in); the
# soname makes the dynamic linker reuse the libtocha that loads the mock.
$(MOCKLIB): tests/c/mock_cuda.c tests/c/mock_cuda_ops.c tests/c/mock_cuda_cpu.c tests/c/mock_cuda_rand.c \
            tests/c/mock_cuda_hold.c tests/c/mock_cuda.h \
            core/cuda/cache_alloc.c core/cuda/cache_alloc.h core/cuda/cu_elem.h core/philox.h \
            core/cuda/cuda_api.h core/tocha.h core/internal.h core/ops.def core/scalar_math.h $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) -fvisibility=hidden -shared -o $@ tests/c/mock_cuda.c tests/c/mock_cuda_ops.c \
	      tests/c/mock_cuda_cpu.c tests/c/mock_cuda_rand.c tests/c/mock_cuda_hold.c core/cuda/cache_alloc.c -L$(BUILD) -ltocha -Wl,-rpath,'$$ORIGIN/..' -lm -lpthread

deps:
	@sh .ci/deps.sh

# `make test` installs what is missing, builds, runs everything and sums the counts.
# The build runs in parallel: the CUDA backend and its host tests are several minutes of nvcc.
test: deps
	@$(MAKE) --no-print-directory -j$$(nproc) all $(CTESTS)
	@sh tests/run.sh "$(BUILD)" "$(BUSTED)"

asan:
	@$(MAKE) --no-print-directory deps
	@$(MAKE) --no-print-directory BUILD=build-asan OPT=-O1 SAN="-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined" \
	    NVCC= all build-asan/tests/ctest
	@ASAN=1 sh tests/run.sh build-asan "$(BUSTED)"

demo: deps
	@$(MAKE) --no-print-directory all
	$(EXE) examples/demo.lua

bench: deps
	@$(MAKE) --no-print-directory all
	@sh bench/run.sh "$(BUILD)"

# BENCH_GPU_ARGS: run.lua's options, e.g. "--models resnet50 --out /path/gpu_resnet50.md".
# No `deps` here: the GPU machine reaches no package archive (shared/device/README.md).
bench-gpu:
	@nvidia-smi -L 2>/dev/null | grep -q GPU || { echo "make bench-gpu: no NVIDIA GPU here (nvidia-smi is missing or lists none). Run it on a GPU machine as bench/gpu/README.md says; make bench-gpu-tiny checks the suite on the CPU."; exit 2; }
	@$(MAKE) --no-print-directory all
	@$(LUAJIT) bench/gpu/run.lua "$(BUILD)" $(BENCH_GPU_ARGS)

bench-gpu-tiny:
	@TOCHA_EXTRA_DEPS="python3-torch" sh .ci/deps.sh
	@$(MAKE) --no-print-directory all
	@$(LUAJIT) bench/gpu/run.lua "$(BUILD)" --tiny $(BENCH_GPU_ARGS)

lint:
	@! grep -rnE '\b(abort|exit)\s*\(|\bassert\s*\(|longjmp' core --include='*.c' --include='*.h' --include='*.cu' \
	    || (echo "lint: abort/exit/assert/longjmp found in core/"; false)
	@# ops.def formulas are instantiated for bool too, where cppcheck flags a < 0 style tests
	cppcheck --quiet --error-exitcode=1 --enable=warning --suppress=compareBoolExpressionWithInt:core/ops.def -Icore core bindings

format:
	clang-format -i core/*.c core/*.h core/cpu/*.c core/autograd/*.[ch] core/graph/*.[ch] bindings/*.c bindings/*.h tests/c/*.c tests/c/*.h

clean:
	rm -rf build build-asan
