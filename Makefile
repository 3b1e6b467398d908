# SPDX-License-Identifier: GPL-2.0
#
# rust-blk: Rust block drivers for persistent memory and multi-queue NVMe.
#
#   make            build rust_pmem.ko and rust_nvme_mq.ko against the project's kernel
#   make run        boot the kernel in QEMU with an NVDIMM and an NVMe, load both drivers, do I/O
#   make test       run the tests (PASS/FAIL per test, then "N passed, N failed")
#   make test-debug the same, building the debug kernel first if needed (lockdep, KASAN,
#                   DMA-API debugging, IOMMU) so that the debug-kernel suites run too
#   make bench      run the benchmarks (results/bench.json, results/*.png)
#   make kernel     build (or incrementally rebuild) the kernel only
#   make rustfmt    format the drivers (rustfmtcheck: check only); CLIPPY=1 make runs clippy
#                   (from the environment or the command line: passed on to Kbuild, which
#                   only honours it as a command-line variable)

KDIR ?= $(shell scripts/build-kernel.sh --print-dir 2>/dev/null)
LLVM ?= $(shell sed -n "s/^RBLK_LLVM=//p" scripts/lib.sh)
export PATH := $(HOME)/.cargo/bin:$(PATH)

.PHONY: all modules kernel run test test-debug bench rustfmt rustfmtcheck clean

# Kbuild's rustfmt target does not take M=, so format the drivers with the kernel's settings.
RUSTFMT_ARGS = --edition 2021 --config-path $(KDIR)/source/.rustfmt.toml rust_pmem.rs rust_nvme_mq.rs \
	$(wildcard rust_nvme_mq/*.rs) $(wildcard tests/modules/*.rs)

all: modules

modules:
	@test -n "$(KDIR)" -a -f "$(KDIR)/vmlinux" || { echo "no kernel build yet: run 'make kernel' first"; exit 1; }
	$(MAKE) -C $(KDIR) M=$(CURDIR) LLVM=$(LLVM) $(if $(CLIPPY),CLIPPY=$(CLIPPY)) modules

kernel:
	scripts/build-kernel.sh

run:
	scripts/run-demo.sh

test:
	scripts/run-tests.sh

test-debug:
	scripts/run-tests.sh --debug

bench:
	scripts/run-bench.sh

rustfmt:
	rustfmt $(RUSTFMT_ARGS)

rustfmtcheck:
	rustfmt --check $(RUSTFMT_ARGS)

clean:
	$(MAKE) -C $(KDIR) M=$(CURDIR) LLVM=$(LLVM) clean
