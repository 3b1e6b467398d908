#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# rust_nvme_mq vs the C nvme driver on the same QEMU NVMe, alternated for a few rounds.
# fio 4k randread (and randwrite), io_uring, iodepth 32, one job per CPU, 5 s each.
. /tests/lib.sh
ROUNDS=${ROUNDS:-3}
NCPU=$(nproc)
run_fio() { # DEV RW
    fio --name=b --filename=$1 --direct=1 --ioengine=io_uring --iodepth=32 --rw=$2 --bs=4k \
        --numjobs=$NCPU --cpus_allowed=0-$((NCPU - 1)) --cpus_allowed_policy=split --size=200m \
        --time_based --runtime=5 --group_reporting --output-format=terse >/tmp/b.out 2>&1 || { cat /tmp/b.out; return 1; }
    # terse v3: field 8 read IOPS, field 49 write IOPS
    if [[ $2 == randread ]]; then cut -d';' -f8 /tmp/b.out; else cut -d';' -f49 /tmp/b.out; fi
}
for r in $(seq $ROUNDS); do
    insmod $MODDIR/rust_nvme_mq.ko; wait_dev /dev/rnvme0n1
    echo "round $r rust randread $(run_fio /dev/rnvme0n1 randread) randwrite $(run_fio /dev/rnvme0n1 randwrite)"
    cat /sys/kernel/debug/rust_nvme_mq/rnvme0/queues
    unload_module rust_nvme_mq
    modprobe nvme; wait_dev /dev/nvme0n1
    echo "round $r C    randread $(run_fio /dev/nvme0n1 randread) randwrite $(run_fio /dev/nvme0n1 randwrite)"
    unload_module nvme
done
kernel_clean && echo "kernel clean"
