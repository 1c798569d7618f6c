# colibri build. `make` builds ./colibri, `make test` runs every test
# (`make deps` first installs what they need), `make test-full` runs them with
# their exhaustive sweeps, `make check` runs the tests under AddressSanitizer +
# UBSan, `make lint` checks the house rules of tools/lint.py. Each rule prints
# one line (CC src/x.c); V=1 prints the commands instead.
# PORTABLE=1 builds for baseline x86-64 (the ISA kernels are still compiled with
# their own flags and chosen at run time from CPUID).
# MPI=1 builds expert parallelism over MPI (src/mpi/*_mpi.c, Open MPI's
# libopenmpi-dev) into build/mpi by default; without it src/mpi/off.c
# refuses --mpi by name.
# CUDA=1 also builds the CUDA backend (src/cuda: the kernels with nvcc, the host
# glue with $(CC)) into $(BUILD)/cuda, with `make test-cuda` and the GPU
# benchmark, and (cuda-forward) $(BUILD)/cuda/colibri for --device cuda; the
# CPU objects and ./colibri are the CPU build's, shared with it. Without it
# only src/cuda's plain C files (CUDA_HOST_SRC: the replay test device) are
# compiled, into libcolibri.a, and the build is the CPU one, object for object.

CC       ?= cc
V        ?= 0
ifeq ($(V),1)
  Q   :=
  say := @:
else
  Q   := @
  say := @printf '  %-5s %s\n'
endif
PORTABLE ?= 0
MPI      ?= 0
CUDA     ?= 0
ifeq ($(MPI),1)
  BUILD  ?= build/mpi
endif
BUILD    ?= build
SAN      ?=

ARCH := $(shell uname -m)
ifeq ($(PORTABLE),1)
  MARCH :=
else
  MARCH := -march=native
endif

CFLAGS_BASE := -std=c11 -D_GNU_SOURCE -Wall -Wextra -Wno-unused-parameter \
               -Wshadow -Wno-sign-compare -Wno-missing-field-initializers -Wno-format-truncation -g -fopenmp -Iinclude -Isrc
OPT      ?= -O2
CFLAGS   := $(CFLAGS_BASE) $(OPT) $(MARCH) $(SAN) $(EXTRA_CFLAGS)
LDFLAGS  := -fopenmp $(SAN)
LDLIBS   := -lcjson -lpcre2-8 -lxxhash -lmicrohttpd -lm -lpthread

# Per-ISA kernel files carry their own target flags (see quant/ and kv/).
ISA_AVX2   := -mavx2 -mfma -mf16c
ISA_AVX512 := -mavx2 -mfma -mf16c -mavx512f -mavx512bw -mavx512vl -mavx512dq \
              -mavx512vnni -mavx512bf16 -mamx-tile -mamx-int8 -mamx-bf16

LIB_EXCLUDE ?=
ifeq ($(MPI),1)
  ifeq ($(shell command -v mpicc),)
    $(error MPI=1: mpicc not found (apt-get install libopenmpi-dev openmpi-bin))
  endif
  MPI_EXCLUDE := src/mpi/off.c
  CFLAGS  += $(shell mpicc --showme:compile)
  LDLIBS  += $(shell mpicc --showme:link)
else
  MPI_EXCLUDE := $(wildcard src/mpi/*_mpi.c)
endif
# src/cuda's C files that need no CUDA runtime (the replay device, the KV rows
# on a device, the drivers by name) are in every build; the CUDA backend's
# host glue goes into its own archive (CUDA=1 below), never into libcolibri.a
CUDA_HOST_SRC := src/cuda/replay_dev.c src/cuda/cu_kv.c src/cuda/devices.c
LIB_SRC_ALL := $(filter-out src/cli/% $(filter-out $(CUDA_HOST_SRC),$(wildcard src/cuda/*.c)) $(LIB_EXCLUDE) \
                 $(MPI_EXCLUDE),$(wildcard src/*/*.c))
ifeq ($(ARCH),x86_64)
  LIB_SRC := $(filter-out %_neon.c,$(LIB_SRC_ALL))
else ifeq ($(ARCH),aarch64)
  LIB_SRC := $(filter-out %_avx2.c %_avx512.c,$(LIB_SRC_ALL))
else
  LIB_SRC := $(filter-out %_avx2.c %_avx512.c %_neon.c,$(LIB_SRC_ALL))
endif
CLI_SRC  := $(wildcard src/cli/*.c)
TEST_SRC := $(wildcard tests/unit/test_*.c)
# Test-only code (the fault-injecting file layer) linked into the test
# programs, never into libcolibri.a.
TESTLIB_SRC := $(filter-out tests/unit/test_%.c,$(wildcard tests/unit/*.c))

LIB_OBJ  := $(LIB_SRC:%.c=$(BUILD)/%.o)
CLI_OBJ  := $(CLI_SRC:%.c=$(BUILD)/%.o)
TEST_BIN := $(TEST_SRC:tests/unit/%.c=$(BUILD)/tests/%)
LIB      := $(BUILD)/libcolibri.a
TESTLIB_OBJ := $(TESTLIB_SRC:%.c=$(BUILD)/%.o)
TESTLIB  := $(BUILD)/tests/libtesthelp.a

.PHONY: all test test-full test-deps test-clients check clean demo deps lint bench fuzz FORCE shared install test-cuda cuda-tests \
        bench-cuda cuda-forward test-cuda-forward
all: colibri

colibri: $(BUILD)/colibri
	@if [ "$(BUILD)" = build ]; then cp $(BUILD)/colibri colibri; fi

$(BUILD)/colibri: $(CLI_OBJ) $(LIB)
	$(say) LD $@
	$(Q)$(CC) $(LDFLAGS) -o $@ $(CLI_OBJ) $(LIB) $(LDLIBS)

$(LIB): $(LIB_OBJ)
	$(say) AR $@
	@rm -f $@
	$(Q)ar rcs $@ $^

$(BUILD)/%_avx2.o: %_avx2.c
	@mkdir -p $(dir $@)
	$(say) CC $<
	$(Q)$(CC) $(CFLAGS) $(ISA_AVX2) -MMD -MP -c $< -o $@

$(BUILD)/%_avx512.o: %_avx512.c
	@mkdir -p $(dir $@)
	$(say) CC $<
	$(Q)$(CC) $(CFLAGS) $(ISA_AVX512) -MMD -MP -c $< -o $@

# colibri --version names the commit and the flags it was built with.
COMMIT := $(shell git rev-parse --short HEAD 2>/dev/null || echo unknown)
$(BUILD)/src/cli/main.o: EXTRA_DEFS = -DCOLIBRI_COMMIT='"$(COMMIT)"' -DCOLIBRI_BUILD_FLAGS='"$(CC) $(OPT) $(MARCH) $(SAN)"'

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(say) CC $<
	$(Q)$(CC) $(CFLAGS) $(EXTRA_DEFS) -MMD -MP -c $< -o $@

# Generated into $(BUILD)/gen for the server (src/serve/page.c): the chat page
# as a C array, and the build's description (rewritten only when it changes,
# so that nothing rebuilds needlessly).
$(BUILD)/gen/chat_page.h: src/serve/chat_page.html tools/embed.sh
	@mkdir -p $(dir $@)
	$(say) GEN $@
	$(Q)sh tools/embed.sh serve_chat_page $< >$@.tmp && mv $@.tmp $@
$(BUILD)/gen/build_info.h: FORCE
	@mkdir -p $(dir $@)
	@sh tools/build_info.sh "$(CC)" "$(OPT) $(MARCH)" >$@.tmp && { cmp -s $@.tmp $@ || mv $@.tmp $@; }; rm -f $@.tmp
$(BUILD)/src/serve/page.o: $(BUILD)/gen/build_info.h $(BUILD)/gen/chat_page.h
$(BUILD)/src/serve/page.o: CFLAGS += -I$(BUILD)/gen
FORCE:

$(TESTLIB): $(TESTLIB_OBJ)
	$(say) AR $@
	@rm -f $@
	$(Q)ar rcs $@ $^

$(BUILD)/tests/%: tests/unit/%.c $(TESTLIB) $(LIB)
	@mkdir -p $(dir $@)
	$(say) CC $<
	$(Q)$(CC) $(CFLAGS) -Itests/unit -o $@ $< $(TESTLIB) $(LIB) $(LDFLAGS) $(LDLIBS)

# the CPU replay of the CUDA kernels reads their shared arithmetic (headers)
$(BUILD)/tests/test_cuda_host: $(wildcard src/cuda/*.h) tests/unit/cuda_check.h

tests: $(TEST_BIN)

# The tests run in parallel, TEST_JOBS at a time (default: one per CPU); the
# Python packages some need come from build/venv (`make deps`), and a test
# whose packages are missing says so and counts as skipped. test-full adds
# the exhaustive sweeps (COLIBRI_TEST_FULL=1) that test keeps to
# representative shapes.
# What they need is built first, one job per CPU unless make was given -j.
TEST_DEPS := $(BUILD)/colibri $(TEST_BIN) $(BUILD)/bench/matvec $(BUILD)/bench/attn $(BUILD)/bench/restore
TEST_BUILD = @$(MAKE) --no-print-directory $(if $(filter -j%,$(MAKEFLAGS)),,-j$(shell nproc)) test-deps
# and the shared library (tests/cli/install.sh, tests/cli/python_binding.sh),
# built as a plain `make shared` would build it, before any test starts so
# that no two tests build it at once
test-deps: $(TEST_DEPS)
	@env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL -u MAKEOVERRIDES -u SAN -u OPT -u BUILD -u EXTRA_CFLAGS -u CC -u MPI \
	    $(MAKE) -s -j$(shell nproc) shared
test:
	$(TEST_BUILD)
	@BUILD=$(BUILD) sh tests/run.sh
test-full:
	$(TEST_BUILD)
	@COLIBRI_TEST_FULL=1 BUILD=$(BUILD) sh tests/run.sh

lint:
	@python3 tools/lint.py

# langchain-openai, and the anthropic and openai clients on /v1/messages and /v1/responses,
# against the server on colibri-tiny (tests/clients): not part of
# `test`, as it needs the packages of tests/clients/requirements.txt (installed by
# .ci/run into build/venv-clients; PYTHON names the interpreter that has them).
CLIENTS_PYTHON ?= $(BUILD)/venv-clients/bin/python3
test-clients: $(BUILD)/colibri
	@COLIBRI=$(BUILD)/colibri PYTHON=$(CLIENTS_PYTHON) sh tests/clients/langchain.sh
	@COLIBRI=$(BUILD)/colibri PYTHON=$(CLIENTS_PYTHON) sh tests/clients/agents.sh

# Kernel benchmark programs (bench/*.c), not run by test.
bench: $(BUILD)/bench/v4_kv_kl $(BUILD)/bench/v4_attn_kern $(BUILD)/bench/matvec $(BUILD)/bench/attn $(BUILD)/bench/restore $(BUILD)/bench/gemm $(BUILD)/bench/grammar $(BUILD)/bench/mtp_window $(BUILD)/bench/dequant $(BUILD)/bench/ct_repack

$(BUILD)/bench/%: bench/%.c $(BUILD)/src/cli/opts.o $(LIB)
	@mkdir -p $(dir $@)
	$(say) CC $<
	$(Q)$(CC) $(CFLAGS) -o $@ $< $(BUILD)/src/cli/opts.o $(LIB) $(LDFLAGS) $(LDLIBS)

# gcc leaves float-cast-overflow out of `undefined` (an out-of-range double to
# int conversion is undefined behaviour all the same); float-divide-by-zero
# stays out: IEEE division by zero is how the kernels get their infinities.
# Every report fails the test that triggered it.
CHECK_SAN := -fsanitize=address,undefined,float-cast-overflow \
             -fno-sanitize-recover=undefined,float-cast-overflow -fno-omit-frame-pointer
# Installing: the shared library (position-independent objects in build/pic, build/mpi-pic with MPI=1;
# everything but the server, so linking it needs no libmicrohttpd), the static
# archive, the headers, colibri.pc and the colibri command.
#   make install PREFIX=/usr/local [DESTDIR=...]
PREFIX  ?= /usr/local
LIBDIR  ?= $(PREFIX)/lib
INCDIR  ?= $(PREFIX)/include
VERSION := 0.2.0
SOVER   := 0
CORE_OBJ := $(filter-out $(BUILD)/src/serve/%,$(LIB_OBJ))
SO      := $(BUILD)/libcolibri.so.$(VERSION)
LIBS_CORE := -lcjson -lpcre2-8 -lxxhash -lm -lpthread
# an MPI build's library links Open MPI and keeps its objects apart
PIC_BUILD := build/pic
ifeq ($(MPI),1)
  LIBS_CORE += $(shell mpicc --showme:link)
  PIC_BUILD := build/mpi-pic
endif

$(SO): $(CORE_OBJ)
	$(say) LD $@
	$(Q)$(CC) -shared -fopenmp -Wl,-soname,libcolibri.so.$(SOVER) -o $@ $^ $(LIBS_CORE)

shared:
	$(MAKE) BUILD=$(PIC_BUILD) EXTRA_CFLAGS=-fPIC $(PIC_BUILD)/libcolibri.so.$(VERSION)

install: all shared
	install -d $(DESTDIR)$(LIBDIR)/pkgconfig $(DESTDIR)$(INCDIR) $(DESTDIR)$(PREFIX)/bin
	install -m 644 include/colibri.h include/colibri_dev.h $(DESTDIR)$(INCDIR)/
	install -m 755 $(PIC_BUILD)/libcolibri.so.$(VERSION) $(DESTDIR)$(LIBDIR)/
	ln -sf libcolibri.so.$(VERSION) $(DESTDIR)$(LIBDIR)/libcolibri.so.$(SOVER)
	ln -sf libcolibri.so.$(SOVER) $(DESTDIR)$(LIBDIR)/libcolibri.so
	install -m 644 $(BUILD)/libcolibri.a $(DESTDIR)$(LIBDIR)/
	install -m 755 $(BUILD)/colibri $(DESTDIR)$(PREFIX)/bin/
	printf 'prefix=%s\nlibdir=%s\nincludedir=%s\n\nName: colibri\nDescription: %s\nVersion: %s\nLibs: -L$${libdir} -lcolibri -fopenmp\nLibs.private: %s\nCflags: -I$${includedir}\n' \
	    '$(PREFIX)' '$(LIBDIR)' '$(INCDIR)' 'inference engine for DeepSeek-V3-family MoE models' '$(VERSION)' \
	    '$(LIBS_CORE)' > $(DESTDIR)$(LIBDIR)/pkgconfig/colibri.pc

# The CUDA backend (CUDA=1). The kernels are built for Hopper (sm_90: the
# H100/H200) plus its PTX, which newer GPUs compile at load; CUDA_ARCH names
# others. NVCC, CUDA_HOME (its headers) and CUDA_LIBDIR (libcudart_static.a)
# default to nvcc on PATH, its parent directory and that one's lib64. The test and the benchmark link only base/, quant/ and kv/ (the
# core archive, of the CPU build's objects) besides the backend, so a machine
# without colibri's other dependencies (cJSON, PCRE2, libmicrohttpd) can build
# and run them:
# `make CUDA=1 cuda-tests bench-cuda`. `make test-cuda` runs the test: it
# exits 77 (and make fails) saying the tests were NOT run when there is no GPU.
ifeq ($(CUDA),1)
  NVCC      ?= $(or $(shell command -v nvcc),/usr/local/cuda/bin/nvcc)
  ifeq ($(wildcard $(NVCC)),)
    $(error CUDA=1: nvcc not found (set NVCC=/path/to/nvcc or put it on PATH))
  endif
  CUDA_HOME ?= $(patsubst %/bin/,%,$(dir $(NVCC)))
  CUDA_LIBDIR ?= $(CUDA_HOME)/lib64
  CUDA_ARCH ?= -gencode arch=compute_90,code=sm_90 -gencode arch=compute_90,code=compute_90
  NVCCFLAGS := -std=c++17 -O3 -g -lineinfo $(CUDA_ARCH) -Iinclude -Isrc -Werror all-warnings \
               -Xcompiler -Wall,-Wextra,-Wno-unused-parameter,-Werror -Xptxas -warn-spills
  CUDA_LDLIBS := -L$(CUDA_LIBDIR) -lcudart_static -ldl -lrt -lpthread -lstdc++ -lm
  CUDA_BUILD  := $(BUILD)/cuda
  CUDA_CU_OBJ := $(patsubst %.cu,$(CUDA_BUILD)/%.o,$(wildcard src/cuda/*.cu))
  CUDA_C_OBJ  := $(patsubst %.c,$(CUDA_BUILD)/%.o,$(filter-out $(CUDA_HOST_SRC),$(wildcard src/cuda/*.c)))
  CUDA_LIB    := $(CUDA_BUILD)/libcolibri_cuda.a
  CORE_SRC    := $(filter-out src/kv/persist%,\
                   $(filter src/base/% src/quant/% src/kv/%,$(LIB_SRC))) src/model/norm.c src/model/rope.c \
                   src/cuda/cu_kv.c
  CORE_LIB    := $(CUDA_BUILD)/libcolibri_core.a
  CUDA_TEST   := $(CUDA_BUILD)/tests/test_cuda
  CUDA_BENCH  := $(CUDA_BUILD)/bench/cuda_bench
  # colibri and the device decode test with the backend linked in whole, so
  # that --device cuda finds backend_cuda_ops (cuda/devices.c)
  CUDA_CLI    := $(CUDA_BUILD)/colibri
  CUDA_FWD_TEST := $(CUDA_BUILD)/tests/test_forward_dev
  CUDA_WHOLE  := -Wl,--whole-archive $(CUDA_LIB) -Wl,--no-whole-archive
all: $(CUDA_TEST) $(CUDA_BENCH) $(CUDA_CLI) $(CUDA_FWD_TEST)

$(CUDA_BUILD)/src/cuda/%.o: src/cuda/%.cu $(wildcard src/cuda/*.h)
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCCFLAGS) -c $< -o $@
$(CUDA_BUILD)/src/cuda/%.o: src/cuda/%.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -I$(CUDA_HOME)/include -MMD -MP -c $< -o $@
$(CUDA_LIB): $(CUDA_CU_OBJ) $(CUDA_C_OBJ)
	@rm -f $@
	ar rcs $@ $^
$(CORE_LIB): $(CORE_SRC:%.c=$(BUILD)/%.o)
	@mkdir -p $(dir $@)
	@rm -f $@
	ar rcs $@ $^
$(CUDA_TEST): tests/cuda/test_cuda.c tests/unit/cuda_check.h tests/unit/check.h $(CUDA_LIB) $(CORE_LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -I$(CUDA_HOME)/include -Itests/unit -o $@ $< $(CUDA_LIB) $(CORE_LIB) $(LDFLAGS) $(CUDA_LDLIBS)
$(CUDA_BENCH): bench/cuda_bench.c $(CUDA_LIB) $(CORE_LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -I$(CUDA_HOME)/include -o $@ $< $(CUDA_LIB) $(CORE_LIB) $(LDFLAGS) $(CUDA_LDLIBS)
$(CUDA_CLI): $(CLI_OBJ) $(CUDA_LIB) $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $(CLI_OBJ) $(CUDA_WHOLE) $(LIB) $(LDLIBS) $(CUDA_LDLIBS)
$(CUDA_FWD_TEST): tests/unit/test_forward_dev.c tests/unit/check.h $(CUDA_LIB) $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Itests/unit -o $@ $< $(CUDA_WHOLE) $(LIB) $(LDFLAGS) $(LDLIBS) $(CUDA_LDLIBS)
cuda-tests: $(CUDA_TEST)
# the whole-model decode on the GPU: these link libcolibri.a (cJSON, PCRE2,
# libmicrohttpd), unlike the kernel test
cuda-forward: $(CUDA_CLI) $(CUDA_FWD_TEST)
bench-cuda: $(CUDA_BENCH)
test-cuda: $(CUDA_TEST)
	@$(CUDA_TEST)
test-cuda-forward: $(CUDA_CLI) $(CUDA_FWD_TEST)
	@CUDA_BUILD=$(CUDA_BUILD) sh tests/cuda/forward_dev.sh
-include $(CUDA_C_OBJ:.o=.d)
else
cuda-tests cuda-forward bench-cuda test-cuda test-cuda-forward:
	@echo "$@: build with CUDA=1 (make CUDA=1 $@)"; exit 2
endif

check:
	@$(MAKE) --no-print-directory BUILD=build/san OPT=-O1 SAN="$(CHECK_SAN)" test

# libFuzzer harnesses (tests/fuzz/fuzz_*.c), built with clang into build/fuzz/
# (sh tools/deps.sh --fuzz installs clang). Run them with tools/fuzz.sh.
FUZZ_CC      ?= clang
FUZZ_SAN     := -fsanitize=address,undefined,float-cast-overflow \
                -fno-sanitize-recover=undefined,float-cast-overflow -fno-omit-frame-pointer
# the CPU-feature probe uses a feature name clang 14 lacks; no harness needs it.
# -Wno-pass-failed: at -O1 with the sanitizers clang does not vectorize the
# omp simd loops, and says so for each; that is expected in this build
FUZZ_EXCLUDE := src/quant/dispatch.c
FUZZ_TARGETS := $(patsubst tests/fuzz/fuzz_%.c,fuzz_%,$(wildcard tests/fuzz/fuzz_*.c))
fuzz:
	$(MAKE) BUILD=build/fuzz CC=$(FUZZ_CC) OPT="-O1 -gline-tables-only" LIB_EXCLUDE="$(FUZZ_EXCLUDE)" \
	    SAN="$(FUZZ_SAN) -fsanitize=fuzzer-no-link" EXTRA_CFLAGS="-Wno-unknown-warning-option -Wno-pass-failed" \
	    $(FUZZ_TARGETS:%=build/fuzz/%)

$(BUILD)/fuzz_%: tests/fuzz/fuzz_%.c tests/fuzz/fuzz_util.h $(LIB)
	$(say) CC $<
	$(Q)$(CC) $(CFLAGS) -fsanitize=fuzzer -o $@ $< $(LIB) $(LDFLAGS) $(LDLIBS)

# the Debian packages the tests use, and their Python packages in build/venv
deps:
	@sh tools/deps.sh --test

demo:
	@sh tools/quickstart.sh

clean:
	rm -rf build colibri

-include $(LIB_OBJ:.o=.d) $(CLI_OBJ:.o=.d) $(TESTLIB_OBJ:.o=.d)
