#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# `make run`: load both drivers and show them doing I/O.
set -euo pipefail
source /tests/lib.sh

banner() { printf '\n===== %s =====\n' "$*"; }

banner "insmod rust_pmem.ko nowait=1"
load_rust_pmem nowait=1
banner "insmod rust_nvme_mq.ko"
insmod $MODDIR/rust_nvme_mq.ko
dmesg | grep -E 'rust_pmem|rust_nvme_mq|rpmem' | tail -n 5
banner "parameters"
grep -H . /sys/module/rust_pmem/parameters/* /sys/module/rust_nvme_mq/parameters/*
banner "block devices"
for d in /sys/block/*; do
    printf '%-10s %8s MiB  hw queues: %s\n' "${d##*/}" $(($(cat "$d/size") / 2048)) "$(ls "$d/mq" 2>/dev/null | wc -l)"
done
for dev in /dev/rpmem0 /dev/rnvme0n1; do
    [[ -b $dev ]] || { echo "($dev not present)"; continue; }
    banner "fio on $dev: 4k random write + crc32c verify, then 4k random read (io_uring)"
    fio --name=demo-verify --filename=$dev --direct=1 --ioengine=io_uring --iodepth=16 --rw=randwrite \
        --bs=4k --size=64m --verify=crc32c --verify_fatal=1 --group_reporting | grep -E 'IOPS|verify|err'
    fio --name=demo-read --filename=$dev --direct=1 --ioengine=io_uring --iodepth=16 --rw=randread \
        --bs=4k --size=64m --runtime=5 --time_based --numjobs=2 --group_reporting | grep -E 'IOPS|ctx|lat \('
done
if [[ -r /sys/kernel/debug/rust_nvme_mq/rnvme0/queues ]]; then
    banner "rust_nvme_mq per-queue counters (debugfs)"
    cat /sys/kernel/debug/rust_nvme_mq/rnvme0/queues
fi
banner "done"
unload_module rust_nvme_mq
unload_module rust_pmem
