# cifar-ae — a C++/CUDA toolkit: CIFAR-10 → convolutional autoencoder → RBF SVM.
#
#   make                 build every tool into build/bin/ (CUDA too when nvcc is found)
#   make test            unit + CLI tests (installs missing Debian packages first)
#   make pipeline        data → model → features → svm → eval → report (pipelines/pipeline.mk)
#   make test-gpu        CUDA kernels against their CPU twins (skips without a GPU)
#   make test-asan       the suites under AddressSanitizer + UBSan
#   make install         tools, man pages, bash completion, Lmod modulefile (PREFIX=, DESTDIR=)
#   make bench-cpu / bench-gpu / bench-io / fuzz / uninstall / deps / clean
#
# Sources are discovered by folder, so adding a layer or a tool adds no Makefile line. The
# layers are static libraries linked in layer order (docs/ARCHITECTURE.md):
#   common/*.cpp                         → build/lib/libcae_common.a  (model-agnostic)
#   kernels/ae/**/*.{cpp,cu}             → build/lib/libcae_ae.a      (the autoencoder)
#   kernels/svm/**/*.{cpp,cu}            → build/lib/libcae_svm.a     (the SVM)
#   tools/*.cpp                          → build/bin/<name>
#   tests/unit/*.cpp                     → build/tests/unit_tests (GoogleTest)
#   tests/gpu/{,support/}*.cu            → build/tests/gpu_tests
#   tests/support/*.cpp                  → linked into both test binaries
# A layer's sources see only the include roots of the layers below it (build/include/LAYER),
# so an upward or sideways #include fails to compile.

SHELL := /bin/bash
.DEFAULT_GOAL := all
.DELETE_ON_ERROR:

VERSION  := 0.1.0
BUILD    ?= build
PREFIX   ?= /usr/local
DESTDIR  ?=
PYTHON   ?= /usr/bin/python3

# ---- toolchain ---------------------------------------------------------------------------
CXX      ?= g++
ifeq ($(CXX),c++)
CXX      := g++
endif
# x86-64-v3 (AVX2/FMA) runs on this machine, CI and the lent GPU hosts alike; override for others.
CPU_ARCH ?= -march=x86-64-v3 -mtune=generic
OPT      ?= -O3
CXXFLAGS ?= $(OPT) $(CPU_ARCH) -g1
CXXFLAGS += -std=c++17 -Wall -Wextra -Wpedantic -Wshadow -fopenmp -MMD -MP
CPPFLAGS += -DCIFARAE_VERSION=\"$(VERSION)\"

# PREBUILT=1 compiles and links nothing, so it asks pkg-config nothing (each probe is a
# process started on every make, `make pipeline` included).
ifneq ($(PREBUILT),1)
HDF5_CFLAGS := $(shell pkg-config --cflags hdf5 2>/dev/null || echo -I/usr/include/hdf5/serial)
HDF5_LIBS   := $(shell pkg-config --libs hdf5 2>/dev/null || echo -L/usr/lib/x86_64-linux-gnu/hdf5/serial -lhdf5)
endif
CPPFLAGS += $(HDF5_CFLAGS)
# $ORIGIN/../lib lets a build folder carry its own shared libraries (make gpu-bundle).
LDFLAGS  += -Wl,-rpath,'$$ORIGIN/../lib'
# libgomp is linked statically: it takes OMP_WAIT_POLICY only from the environment, when it
# initialises, and a static copy initialises after common/blas_runtime.cpp's constructor
# has set it — so no tool re-executes itself to set it (docs/INSTALL.md, "OpenMP").
OPENMP_LIBS ?= -Wl,-Bstatic -lgomp -Wl,-Bdynamic
LDLIBS   += $(HDF5_LIBS) -larchive -ldeflate -lcrypto -lpng -ljpeg -lopenblas $(OPENMP_LIBS) -lm -lpthread -ldl

ifeq ($(SANITIZE),1)
CXXFLAGS += -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
LDFLAGS  += -fsanitize=address,undefined
endif

# ---- CUDA (optional) ---------------------------------------------------------------------
# GPU=0 forces a CPU-only build. Without nvcc everything still builds and --device gpu
# fails with a clear message.
GPU ?= 1
# PREBUILT=1 only needs to know whether nvcc exists (test-gpu), so it looks along PATH with
# $(wildcard) and starts no process; it compiles nothing, so the toolkit checks below are skipped.
ifeq ($(origin NVCC),undefined)
ifeq ($(PREBUILT),1)
NVCC := $(firstword $(wildcard $(addsuffix /nvcc,$(subst :, ,$(PATH))) /usr/local/cuda/bin/nvcc))
else
NVCC := $(shell command -v nvcc 2>/dev/null || { test -x /usr/local/cuda/bin/nvcc && echo /usr/local/cuda/bin/nvcc; })
endif
endif
ifeq ($(GPU),0)
NVCC :=
endif
ifeq ($(SANITIZE),1)
NVCC :=
endif
CUDA_ARCH ?= -gencode arch=compute_90,code=sm_90 -gencode arch=compute_90,code=compute_90
# The warpgroup-MMA kernels (kernels/ae/cuda/*_wgmma.cu) use sm_90a instructions, which
# exist only as sm_90a code: those files are built for it alone, and the backend offers
# their kernels only on devices of compute capability 9.0.
WGMMA_ARCH ?= -gencode arch=compute_90a,code=sm_90a
# nvcc on PATH is often a wrapper script or a symlink (/usr/local/bin/nvcc), so the
# toolkit's folder is asked of nvcc itself rather than guessed from where nvcc was found.
# A toolkit without its runtime headers or library gives a CPU-only build, not a broken one.
ifneq ($(if $(filter 1,$(PREBUILT)),,$(NVCC)),)
ifeq ($(origin CUDA_HOME),undefined)
CUDA_HOME := $(patsubst %/bin,%,$(shell $(NVCC) --dryrun -c -x cu /dev/null -o /dev/null 2>&1 | \
                 sed -n 's|^\#\$$ _HERE_=||p' | head -n 1))
endif
ifeq ($(wildcard $(CUDA_HOME)/include/cuda_runtime_api.h),)
$(warning CUDA: no cuda_runtime_api.h under '$(CUDA_HOME)/include' (nvcc: $(NVCC)); building CPU-only — set CUDA_HOME= to the toolkit folder)
NVCC :=
else ifneq ($(words $(wildcard $(CUDA_HOME)/lib64/libcudart.so $(CUDA_HOME)/lib64/libcublas.so)),2)
$(warning CUDA: no libcudart.so/libcublas.so under '$(CUDA_HOME)/lib64' (nvcc: $(NVCC)); building CPU-only — set CUDA_HOME= to the toolkit folder)
NVCC :=
endif
endif
ifneq ($(NVCC),)
CPPFLAGS   += -DCIFARAE_WITH_CUDA -I$(CUDA_HOME)/include
NVCCFLAGS  ?= -O3 -lineinfo
NVCCFLAGS  += -std=c++17 $(CUDA_ARCH) $(HDF5_CFLAGS) -DCIFARAE_WITH_CUDA -DCIFARAE_VERSION=\"$(VERSION)\" \
              -Xcompiler -fopenmp,-Wall -MMD -MP --expt-relaxed-constexpr
# cuBLAS is not linked: the GPU SVM loads it when it first needs it (common/cublas_runtime.h);
# the run path lets dlopen find it where the linker would have.
LDLIBS     += -L$(CUDA_HOME)/lib64 -lcudart -Wl,-rpath,$(CUDA_HOME)/lib64
endif

# libsvm: the tools that read or write libsvm's model files through it (svm-fit --export-libsvm,
# svm-eval --model FILE.libsvm, classify through the same model loader) and the unit tests (the
# reference the SVM is checked against).
LIBSVM_LIBS := -lsvm
LIBSVM_TOOLS := svm-fit svm-eval classify

# ---- sources and layers -------------------------------------------------------------------
LAYERS := common ae svm
common_DIRS := common
ae_DIRS     := kernels/ae
svm_DIRS    := kernels/svm
# What each layer may include (itself and the layers below it); tools and tests see all.
common_SEES := common
ae_SEES     := common kernels/ae
svm_SEES    := common kernels/svm
# One find for every layer (a process per layer and extension was a cost on every make on a
# loaded machine: docs/DECISIONS.md, "The report's start-up and Make's own time"); each layer
# takes its folders' .cpp files, then their .cu files, each group in sort(1)'s order.
# PREBUILT=1 builds no layer, so it lists none.
LAYER_TREE_SRCS := $(if $(filter 1,$(PREBUILT)),,$(shell find $(foreach L,$(LAYERS),$($(L)_DIRS)) -name '*.cpp' -o -name '*.cu' | sort))
layer_srcs = $(filter $(addsuffix /%.cpp,$($(1)_DIRS)),$(LAYER_TREE_SRCS)) \
             $(if $(NVCC),$(filter $(addsuffix /%.cu,$($(1)_DIRS)),$(LAYER_TREE_SRCS)))
$(foreach L,$(LAYERS),$(eval $(L)_SRCS := $(call layer_srcs,$(L))))
$(foreach L,$(LAYERS),$(eval $(L)_OBJS := $(patsubst %,$(BUILD)/obj/%.o,$(basename $($(L)_SRCS)))))
$(foreach L,$(LAYERS),$(eval $(L)_LIB := $(BUILD)/lib/libcae_$(L).a))
# Link order: a layer before the layers it uses.
LIBS_IN_ORDER := $(ae_LIB) $(svm_LIB) $(common_LIB)
TOOL_SRCS   := $(wildcard tools/*.cpp)
UNIT_SRCS   := $(wildcard tests/unit/*.cpp)
GPU_TEST_SRCS := $(if $(NVCC),$(wildcard tests/gpu/*.cu tests/gpu/support/*.cu))
# Code only tests call (reference layers, whole-batch CPU layers): in both test binaries.
TEST_SUPPORT_OBJS := $(patsubst %.cpp,$(BUILD)/obj/%.o,$(wildcard tests/support/*.cpp))
FUZZ_SRCS   := $(wildcard tests/fuzz/*.cpp)
TOOLS     := $(TOOL_SRCS:tools/%.cpp=$(BUILD)/bin/%) $(if $(wildcard tools/report.py),$(BUILD)/bin/report)
# Keep the tools' object files: tools/NAME.o are intermediates of a pattern chain, which
# Make would otherwise delete after linking and so recompile on every build. Named, not a
# bare `.SECONDARY:` — that makes *every* target secondary, so a missing stamp file (the
# pipeline's parameter stamps) or a FORCE'd one (git-describe.txt) no longer triggers a rebuild.
.SECONDARY: $(TOOL_SRCS:tools/%.cpp=$(BUILD)/obj/tools/%.o)
UNIT_BIN  := $(BUILD)/tests/unit_tests
# Dev binaries the tests run (tests/dev/NAME.cpp → build/tests/NAME with _ as -).
DEV_BINS  := $(patsubst tests/dev/%.cpp,$(BUILD)/tests/%,$(subst _,-,$(wildcard tests/dev/*.cpp)))
GPU_TEST_BIN := $(BUILD)/tests/gpu_tests
DEPS_STAMP := $(BUILD)/.deps-ok
BUILT_FIRST := all
# PREBUILT=1: only run what $(BUILD) already holds, building and installing nothing — for a
# host that runs binaries built elsewhere (the lent GPU machines have no -dev packages and
# no network): make test-gpu PREBUILT=1, make pipeline PREBUILT=1 BUILD=...
ifeq ($(PREBUILT),1)
DEPS_STAMP :=
BUILT_FIRST :=
endif
# INSTALL_DEPS=0: the dependencies come from elsewhere (Spack, a container's own packages):
# no apt-get.
ifeq ($(INSTALL_DEPS),0)
DEPS_STAMP :=
endif

.PHONY: all deps test test-unit test-cli test-gpu test-asan test-slurm bench bench-cpu bench-gpu bench-pipeline bench-io fuzz \
        install uninstall man clean gpu-bundle help

all: $(TOOLS) $(DEV_BINS)

help:
	@sed -n '3,11p' Makefile

# ---- dependencies ------------------------------------------------------------------------
# Installs missing Debian packages (apt-get; sudo only when not root). Re-checked when the
# package list changes.
deps: $(DEPS_STAMP)
ifneq ($(DEPS_STAMP),)
$(DEPS_STAMP): tools/install-deps.sh
	@bash tools/install-deps.sh
	@mkdir -p $(@D) && touch $@
endif

# ---- build -------------------------------------------------------------------------------
# build/include/LAYER holds links to exactly the folders that layer may include from.
INCLUDE_ROOT = $(BUILD)/include/$(1)
define include_root_rule
$(call INCLUDE_ROOT,$(1))/.made: Makefile
	@rm -rf $$(@D) && mkdir -p $$(@D)
	@for d in $$($(1)_SEES); do mkdir -p $$(@D)/$$$$(dirname $$$$d) && ln -s $$(CURDIR)/$$$$d $$(@D)/$$$$d; done
	@touch $$@
endef
$(foreach L,$(LAYERS),$(eval $(call include_root_rule,$(L))))
# Which layer an object belongs to, from its source folder (tools and tests: the whole tree).
layer_of = $(firstword $(foreach L,$(LAYERS),$(if $(filter $($(L)_DIRS)/%,$(1)),$(L))))
layer_includes = $(if $(call layer_of,$(1)),-I$(call INCLUDE_ROOT,$(call layer_of,$(1))),-I.)
layer_stamp = $(if $(call layer_of,$(1)),$(call INCLUDE_ROOT,$(call layer_of,$(1)))/.made)

ifneq ($(PREBUILT),1)
.SECONDEXPANSION:
$(BUILD)/obj/%.o: %.cpp | $(DEPS_STAMP) $$(call layer_stamp,$$*.cpp)
	@mkdir -p $(@D)
	$(CXX) $(call layer_includes,$<) $(CPPFLAGS) $(CXXFLAGS) -c $< -o $@

$(BUILD)/obj/%.o: %.cu | $(DEPS_STAMP) $$(call layer_stamp,$$*.cu)
	@mkdir -p $(@D)
	$(NVCC) $(call layer_includes,$<) $(NVCCFLAGS) -c $< -o $@
$(BUILD)/obj/kernels/ae/cuda/conv_wgmma.o $(BUILD)/obj/kernels/ae/cuda/wgrad_wgmma.o: override CUDA_ARCH := $(WGMMA_ARCH)

# The version string carries `git describe`; only this object is rebuilt when it changes.
GIT_DESCRIBE := $(shell git describe --always --dirty --tags 2>/dev/null || echo unknown)
$(BUILD)/obj/common/version.o: CPPFLAGS += -DCIFARAE_GIT_DESCRIBE=\"$(GIT_DESCRIBE)\"
$(BUILD)/obj/common/version.o: $(BUILD)/git-describe.txt
$(BUILD)/git-describe.txt: FORCE
	@mkdir -p $(@D); echo '$(GIT_DESCRIBE)' | cmp -s - $@ || echo '$(GIT_DESCRIBE)' > $@
FORCE:

$(foreach L,$(LAYERS),$(eval $($(L)_LIB): $($(L)_OBJS) ; @mkdir -p $$(@D) && rm -f $$@ && ar rcs $$@ $$^))

$(LIBSVM_TOOLS:%=$(BUILD)/bin/%): TOOL_LIBS := $(LIBSVM_LIBS)
$(BUILD)/bin/%: $(BUILD)/obj/tools/%.o $(LIBS_IN_ORDER)
	@mkdir -p $(@D)
	$(CXX) $(LDFLAGS) $< $(LIBS_IN_ORDER) $(LDLIBS) $(TOOL_LIBS) -o $@

# report is a Python package (tools/report.py + tools/report_lib/) packed into one executable
# zip, so it installs and runs as one file like the C++ tools. Like version.o it carries
# `git describe` from build time (report_lib/git-describe.txt): an installed copy has no
# repository around it to ask. The bytecode goes in beside the sources: zipimport cannot
# cache what it compiles, so without it every run compiles the package (docs/DECISIONS.md,
# "The report's start-up and Make's own time").
REPORT_SRCS := tools/report.py $(wildcard tools/report_lib/*.py)
$(BUILD)/bin/report: $(REPORT_SRCS) $(BUILD)/git-describe.txt
	@mkdir -p $(@D)
	@rm -rf $@.zipdir && mkdir -p $@.zipdir/report_lib
	cp tools/report.py $@.zipdir/__main__.py && cp tools/report_lib/*.py $@.zipdir/report_lib/
	cp $(BUILD)/git-describe.txt $@.zipdir/report_lib/git-describe.txt
	$(PYTHON) -m compileall -q -b --invalidation-mode unchecked-hash $@.zipdir
	$(PYTHON) -m zipapp $@.zipdir -p /usr/bin/python3 -o $@ && chmod 755 $@
	@rm -rf $@.zipdir

$(UNIT_BIN): $(UNIT_SRCS:%.cpp=$(BUILD)/obj/%.o) $(TEST_SUPPORT_OBJS) $(LIBS_IN_ORDER)
	@mkdir -p $(@D)
	$(CXX) $(LDFLAGS) $(filter %.o,$^) $(LIBS_IN_ORDER) $(LDLIBS) $(LIBSVM_LIBS) -lgtest -lgtest_main -o $@

$(BUILD)/tests/ae-dump-gradients: $(BUILD)/obj/tests/dev/ae_dump_gradients.o $(BUILD)/obj/tests/support/cpu_gradient.o \
                                  $(LIBS_IN_ORDER)
	@mkdir -p $(@D)
	$(CXX) $(LDFLAGS) $(filter %.o,$^) $(LIBS_IN_ORDER) $(LDLIBS) -o $@

$(GPU_TEST_BIN): $(GPU_TEST_SRCS:%.cu=$(BUILD)/obj/%.o) $(TEST_SUPPORT_OBJS) $(LIBS_IN_ORDER)
	@mkdir -p $(@D)
	$(CXX) $(LDFLAGS) $(filter %.o,$^) $(LIBS_IN_ORDER) $(LDLIBS) -lgtest -lgtest_main -o $@

-include $(shell find $(BUILD)/obj -name '*.d' 2>/dev/null)
endif

# ---- tests -------------------------------------------------------------------------------
# tests/run-all.sh prints one closing line "N passed, N failed, N skipped". TEST_BATS: the
# bats files to run (default: every one).
TEST_BATS ?=
test: all $(UNIT_BIN)
	@BUILD=$(BUILD) PYTHON=$(PYTHON) bash tests/run-all.sh $(TEST_BATS)

test-unit: $(UNIT_BIN)
	$(UNIT_BIN)

test-cli: all
	@BUILD=$(BUILD) PYTHON=$(PYTHON) bash tests/run-all.sh --only-bats

# A throwaway single-node Slurm (slurm-wlm + munge, from make deps) under a temporary
# folder, the cluster tests against it, the daemons stopped by their pids (tests/slurm/).
test-slurm: all
	@BUILD=$(BUILD) PYTHON=$(PYTHON) bash tests/slurm/run.sh

# CIFAR10_DIR (a folder or the .tar.gz, as for make data; default: the archive make data
# downloaded) gives the real-feature SVM parity check its images. Without nvcc a build
# made elsewhere still runs here (PREBUILT=1 on a GPU host with only the driver).
GPU_TEST_ENV = BUILD=$(BUILD) PYTHON=$(PYTHON) CIFAR10_DIR=$(or $(strip $(CIFAR10_DIR)),$(CIFAR10_TGZ))
ifneq ($(NVCC),)
test-gpu: $(if $(BUILT_FIRST),all $(GPU_TEST_BIN))
	@$(GPU_TEST_ENV) bash tests/run-gpu.sh
else
test-gpu:
	@if [ -x $(GPU_TEST_BIN) ]; then $(GPU_TEST_ENV) bash tests/run-gpu.sh; \
	 else echo "test-gpu: skipped: this build has no CUDA (nvcc not found) and no $(GPU_TEST_BIN)"; fi
endif

# Sanitizer reports go to files (log_path), not stderr: a test expecting one clean error
# line still sees one, and no report is lost — reliability.bats and kills.bats check for new
# reports after every case, and this target fails when any report was written during the
# run. Why each option is set: docs/RELIABILITY.md, "Sanitizers".
# The sanitized run leaves out the bats files that test Python and packaging (report,
# report_browser, install: ~3 min under the sanitizers on 2 cores) and Make's chaining
# (pipeline: ~4 min; its tool calls — resume after SIGUSR1 included — run sanitized in
# ae, svm, svm_preempt and kills): the C++ they reach runs sanitized in the other files.
ASAN_BATS := $(filter-out tests/bats/report.bats tests/bats/report_browser.bats tests/bats/install.bats tests/bats/pipeline.bats,\
               $(sort $(wildcard tests/bats/*.bats)))
SANITIZER_LOG_DIR := $(CURDIR)/build-asan/sanitizer-logs
SANITIZER_ENV := SANITIZER_LOG_DIR=$(SANITIZER_LOG_DIR) \
  ASAN_OPTIONS=log_path=$(SANITIZER_LOG_DIR)/asan:exitcode=86:suppressions=$(CURDIR)/tests/fuzz/asan.supp:allocator_may_return_null=1:detect_leaks=1 \
  LSAN_OPTIONS=suppressions=$(CURDIR)/tests/fuzz/lsan.supp \
  UBSAN_OPTIONS=log_path=$(SANITIZER_LOG_DIR)/ubsan:exitcode=87:print_stacktrace=1:halt_on_error=1
test-asan:
	@rm -rf $(SANITIZER_LOG_DIR) && mkdir -p $(SANITIZER_LOG_DIR) && chmod 1777 $(SANITIZER_LOG_DIR)
	@$(SANITIZER_ENV) $(MAKE) BUILD=build-asan SANITIZE=1 OPT=-O1 TEST_BATS="$(ASAN_BATS)" test; rc=$$?; \
	  if [ -n "$$(ls -A $(SANITIZER_LOG_DIR))" ]; then \
	    echo "test-asan: sanitizer reports in $(SANITIZER_LOG_DIR):"; head -n 40 $(SANITIZER_LOG_DIR)/*; exit 1; fi; \
	  echo "test-asan: no sanitizer reports"; exit $$rc

# ---- benchmarks, fuzzing -----------------------------------------------------------------
bench: bench-cpu
bench-cpu: all
	@BUILD=$(BUILD) PYTHON=$(PYTHON) bash bench/bench-cpu.sh
bench-gpu: $(BUILT_FIRST)
	@BUILD=$(BUILD) bash bench/bench-gpu.sh
# The whole pipeline stage by stage (start-up, read, hash, compute, write); DEVICE=cpu runs
# a small CPU subset (bench/bench-pipeline.sh).
bench-pipeline: $(BUILT_FIRST)
	@BUILD=$(BUILD) PYTHON=$(PYTHON) DEVICE=$(if $(filter command line environment,$(origin DEVICE)),$(DEVICE),gpu) bash bench/bench-pipeline.sh

# The pipeline's file I/O alone on full-size synthetic files (bench/io_bench.cpp, built like
# a tool from the layers' libraries; IO_BENCH_DIR= keeps the files).
IO_BENCH_BIN := $(BUILD)/bench/io_bench
.SECONDARY: $(BUILD)/obj/bench/io_bench.o
ifneq ($(PREBUILT),1)
$(IO_BENCH_BIN): $(BUILD)/obj/bench/io_bench.o $(LIBS_IN_ORDER)
	@mkdir -p $(@D)
	$(CXX) $(LDFLAGS) $< $(LIBS_IN_ORDER) $(LDLIBS) -o $@
endif
bench-io: $(if $(BUILT_FIRST),$(IO_BENCH_BIN))
	@BUILD=$(BUILD) bash bench/io_bench.sh

# Needs clang + libFuzzer (tests/fuzz/run.sh installs them with apt-get); seeds come from
# the tools of $(BUILD). FUZZ_SECONDS per target (60).
fuzz: all
	@BUILD=build-fuzz TOOLS_BUILD=$(BUILD) PYTHON=$(PYTHON) bash tests/fuzz/run.sh

# Copies the shared libraries a build needs beside it (build/lib), for machines that have
# CUDA but not HDF5/OpenBLAS/libsvm (the binaries' rpath is $ORIGIN/../lib).
gpu-bundle: all $(if $(NVCC),$(GPU_TEST_BIN)) $(UNIT_BIN)
	@bash tools/bundle-libs.sh $(BUILD)

# ---- install -----------------------------------------------------------------------------
# make install PREFIX=... [DESTDIR=...]: the tools (report as its one-file zip), a man page
# per tool (help2man, from the tool's --help), the bash completion (generated from the
# --help too, so it cannot miss an option) and a relocatable Lmod modulefile; make
# uninstall removes exactly those files. Spack and Apptainer recipes: tools/dist/,
# docs/INSTALL.md.
BINDIR        := $(PREFIX)/bin
MANDIR        := $(PREFIX)/share/man/man1
COMPLETIONDIR := $(PREFIX)/share/bash-completion/completions
MODULEDIR     := $(PREFIX)/share/modulefiles/cifar-ae
HELP2MAN      ?= help2man
TOOL_NAMES    := $(notdir $(TOOLS))
MAN_PAGES     := $(TOOL_NAMES:%=$(BUILD)/share/man/man1/%.1)
COMPLETION    := $(BUILD)/share/bash-completion/cifar-ae
MODULEFILE    := $(BUILD)/share/modulefiles/cifar-ae/$(VERSION).lua
INSTALLED     := $(TOOL_NAMES:%=$(BINDIR)/%) $(TOOL_NAMES:%=$(MANDIR)/%.1) $(COMPLETIONDIR)/cifar-ae \
                 $(TOOL_NAMES:%=$(COMPLETIONDIR)/%) $(MODULEDIR)/$(VERSION).lua

man: $(MAN_PAGES)
# The page's NAME line is the tool's purpose, the text after "TOOL — " in its --help; the
# dash becomes roff's \(em so the page renders in any locale.
$(BUILD)/share/man/man1/%.1: $(BUILD)/bin/%
	@command -v $(HELP2MAN) >/dev/null || { echo "man pages: '$(HELP2MAN)' not found: install Debian's help2man (apt-get install help2man) or give HELP2MAN=/path/to/help2man" >&2; exit 1; }
	@mkdir -p $(@D)
	$(HELP2MAN) --locale=C.UTF-8 --no-info --no-discard-stderr --name="$$($< --help | sed -n 's/^$* — //p' | head -n 1)" \
	  -o $@.tmp $< && sed -i 's/—/\\(em/g' $@.tmp && mv $@.tmp $@

$(COMPLETION): tools/dist/bash-completion.sh $(TOOLS)
	@mkdir -p $(@D)
	bash tools/dist/bash-completion.sh $(TOOLS) > $@.tmp && mv $@.tmp $@

$(MODULEFILE): tools/dist/modulefile.lua.in Makefile
	@mkdir -p $(@D)
	sed -e 's/@VERSION@/$(VERSION)/g' -e 's/@TOOLS@/$(TOOL_NAMES)/g' $< > $@.tmp && mv $@.tmp $@

install: all $(MAN_PAGES) $(COMPLETION) $(MODULEFILE)
	install -d "$(DESTDIR)$(BINDIR)" "$(DESTDIR)$(MANDIR)" "$(DESTDIR)$(COMPLETIONDIR)" "$(DESTDIR)$(MODULEDIR)"
	install -m 755 $(TOOLS) "$(DESTDIR)$(BINDIR)/"
	install -m 644 $(MAN_PAGES) "$(DESTDIR)$(MANDIR)/"
	install -m 644 $(COMPLETION) "$(DESTDIR)$(COMPLETIONDIR)/cifar-ae"
	@# bash-completion loads a command's completion from a file of the command's name.
	for t in $(TOOL_NAMES); do ln -sfn cifar-ae "$(DESTDIR)$(COMPLETIONDIR)/$$t"; done
	install -m 644 $(MODULEFILE) "$(DESTDIR)$(MODULEDIR)/$(VERSION).lua"

# Only the folder that is the toolkit's own is removed; shared ones (bin, man1) stay.
uninstall:
	rm -f $(foreach f,$(INSTALLED),"$(DESTDIR)$(f)")
	@if [ -d "$(DESTDIR)$(MODULEDIR)" ]; then rmdir --ignore-fail-on-non-empty "$(DESTDIR)$(MODULEDIR)"; fi

clean:
	rm -rf $(BUILD) build-asan build-fuzz

include pipelines/pipeline.mk
