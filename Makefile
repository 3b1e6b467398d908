# SPDX-License-Identifier: GPL-2.0
#
# rust-blk: Rust block drivers for persistent memory and multi-queue NVMe.
#
#   make            build rust_pmem.ko and rust_nvme_mq.ko against the project's kernel
#   make run        boot the kernel in QEMU with an NVDIMM and an NVMe, load both drivers, do I/O
#   make test       run the tests (PASS/FAIL per test, then "N passed, N failed")
#   make bench      run the benchmarks (results/bench.json, results/*.png)
#   make kernel     build (or incrementally rebuild) the kernel only
#   make rustfmt    format the drivers; CLIPPY=1 make runs clippy

KDIR ?= $(shell scripts/build-kernel.sh --print-dir 2>/dev/null)
LLVM ?= -19
export PATH := $(HOME)/.cargo/bin:$(PATH)

.PHONY: all modules kernel run test bench rustfmt clean

all: modules

modules:
	@test -n "$(KDIR)" -a -f "$(KDIR)/vmlinux" || { echo "no kernel build yet: run 'make kernel' first"; exit 1; }
	$(MAKE) -C $(KDIR) M=$(CURDIR) LLVM=$(LLVM) modules

kernel:
	scripts/build-kernel.sh

run:
	scripts/run-demo.sh

test:
	scripts/run-tests.sh

bench:
	scripts/run-bench.sh

rustfmt:
	$(MAKE) -C $(KDIR) M=$(CURDIR) LLVM=$(LLVM) rustfmt

clean:
	$(MAKE) -C $(KDIR) M=$(CURDIR) LLVM=$(LLVM) clean
