// SPDX-License-Identifier: GPL-2.0
/*
 * nvme_uring: NVMe io_uring passthrough (NVME_URING_CMD_IO and NVME_URING_CMD_IO_VEC) on a
 * generic namespace device, one command at a time through the raw io_uring system calls:
 * good commands with their data read back, and bad input, each printed as one line
 *
 *   CASE res=RESULT            (RESULT: the CQE's result, an errno name or the NVMe status)
 *   CASE_data ok|differs       (the data a read brought, or what the region holds after)
 *
 * so that the answers of two drivers can be compared line by line.
 *
 * Usage: nvme_uring DEV NSID LBA [--iopoll] [--no-data-read]
 *   DEV   the generic device (/dev/ng0n1, /dev/rng0n1)
 *   LBA   first block of the 64 KiB the commands may write
 *   --iopoll        set the ring up with IORING_SETUP_IOPOLL (polled completions)
 *   --no-data-read  also send a read without a data buffer (only where the driver refuses
 *                   it: the C driver sends it, and the controller writes to bus address 0)
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/io_uring.h>
#include <linux/nvme_ioctl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#define NVME_READ 0x02
#define NVME_WRITE 0x01
#define SQE_SIZE 128
#define CQE_SIZE 32

struct ring {
	int fd;
	unsigned *sq_head, *sq_tail, *sq_mask, *sq_array;
	unsigned *cq_head, *cq_tail, *cq_mask;
	char *sqes, *cqes;
};

static void die(const char *what)
{
	fprintf(stderr, "nvme_uring: %s: %s\n", what, strerror(errno));
	exit(2);
}

static int ring_setup(struct ring *r, unsigned flags)
{
	struct io_uring_params p;
	char *sq, *cq;

	memset(&p, 0, sizeof(p));
	p.flags = flags;
	r->fd = syscall(__NR_io_uring_setup, 4, &p);
	if (r->fd < 0)
		return -errno;
	sq = mmap(NULL, p.sq_off.array + p.sq_entries * sizeof(unsigned), PROT_READ | PROT_WRITE,
		  MAP_SHARED | MAP_POPULATE, r->fd, IORING_OFF_SQ_RING);
	cq = mmap(NULL, p.cq_off.cqes + p.cq_entries * CQE_SIZE, PROT_READ | PROT_WRITE,
		  MAP_SHARED | MAP_POPULATE, r->fd, IORING_OFF_CQ_RING);
	r->sqes = mmap(NULL, p.sq_entries * SQE_SIZE, PROT_READ | PROT_WRITE,
		       MAP_SHARED | MAP_POPULATE, r->fd, IORING_OFF_SQES);
	if (sq == MAP_FAILED || cq == MAP_FAILED || r->sqes == MAP_FAILED)
		die("mmap of the rings");
	r->sq_head = (unsigned *)(sq + p.sq_off.head);
	r->sq_tail = (unsigned *)(sq + p.sq_off.tail);
	r->sq_mask = (unsigned *)(sq + p.sq_off.ring_mask);
	r->sq_array = (unsigned *)(sq + p.sq_off.array);
	r->cq_head = (unsigned *)(cq + p.cq_off.head);
	r->cq_tail = (unsigned *)(cq + p.cq_off.tail);
	r->cq_mask = (unsigned *)(cq + p.cq_off.ring_mask);
	r->cqes = cq + p.cq_off.cqes;
	return 0;
}

/* Submit one command and wait for its completion; returns the CQE's result. */
static int submit(struct ring *r, int dev, unsigned op, const struct nvme_uring_cmd *c,
		  unsigned long long *res2)
{
	unsigned tail = *r->sq_tail, idx = tail & *r->sq_mask, head;
	struct io_uring_sqe *sqe = (void *)(r->sqes + idx * SQE_SIZE);
	char *cqe;
	int res;

	memset(sqe, 0, SQE_SIZE);
	sqe->opcode = IORING_OP_URING_CMD;
	sqe->fd = dev;
	sqe->cmd_op = op;
	memcpy(sqe->cmd, c, sizeof(*c));
	r->sq_array[idx] = idx;
	__atomic_store_n(r->sq_tail, tail + 1, __ATOMIC_RELEASE);
	if (syscall(__NR_io_uring_enter, r->fd, 1, 1, IORING_ENTER_GETEVENTS, NULL, 0) < 0)
		die("io_uring_enter");
	head = *r->cq_head;
	while (head == __atomic_load_n(r->cq_tail, __ATOMIC_ACQUIRE))
		if (syscall(__NR_io_uring_enter, r->fd, 0, 1, IORING_ENTER_GETEVENTS, NULL, 0) < 0)
			die("io_uring_enter (wait)");
	cqe = r->cqes + (head & *r->cq_mask) * CQE_SIZE;
	res = ((struct io_uring_cqe *)cqe)->res;
	if (res2)
		*res2 = ((struct io_uring_cqe *)cqe)->big_cqe[0];
	__atomic_store_n(r->cq_head, head + 1, __ATOMIC_RELEASE);
	return res;
}

static const char *errname(int e)
{
	switch (e) {
	case EINVAL: return "EINVAL";
	case EFAULT: return "EFAULT";
	case EACCES: return "EACCES";
	case EPERM: return "EPERM";
	case ENOTTY: return "ENOTTY";
	case EOPNOTSUPP: return "EOPNOTSUPP";
	case ENODEV: return "ENODEV";
	case EIO: return "EIO";
	case EAGAIN: return "EAGAIN";
	case ECANCELED: return "ECANCELED";
	default: return "other";
	}
}

static void report(const char *name, int res)
{
	if (res < 0)
		printf("%s res=%s\n", name, errname(-res));
	else if (res == 0)
		printf("%s res=0\n", name);
	else
		printf("%s res=sc=0x%x\n", name, res & 0x7ff);
	fflush(stdout);
}

static struct nvme_uring_cmd io(unsigned char opcode, unsigned nsid, uint64_t slba,
				unsigned blocks, void *addr, unsigned len)
{
	struct nvme_uring_cmd c;

	memset(&c, 0, sizeof(c));
	c.opcode = opcode;
	c.nsid = nsid;
	c.addr = (uintptr_t)addr;
	c.data_len = len;
	c.cdw10 = (uint32_t)slba;
	c.cdw11 = (uint32_t)(slba >> 32);
	c.cdw12 = blocks - 1;
	return c;
}

static void fill(unsigned char *p, size_t len, unsigned seed)
{
	for (size_t i = 0; i < len; i++)
		p[i] = (unsigned char)(i * 7 + seed * 13 + (i >> 8));
}

int main(int argc, char **argv)
{
	struct ring r, r64;
	unsigned nsid, bs, blocks;
	unsigned long long lba, res2 = 0, nlba;
	int dev, iopoll = 0, no_data_read = 0, ret;
	unsigned char *buf, *back, *want, *big;
	struct nvme_uring_cmd c;
	struct iovec iov[3];

	if (argc < 4) {
		fprintf(stderr, "usage: %s DEV NSID LBA [--iopoll] [--no-data-read]\n", argv[0]);
		return 2;
	}
	nsid = strtoul(argv[2], NULL, 0);
	lba = strtoull(argv[3], NULL, 0);
	for (int i = 4; i < argc; i++) {
		if (!strcmp(argv[i], "--iopoll"))
			iopoll = 1;
		else if (!strcmp(argv[i], "--no-data-read"))
			no_data_read = 1;
	}
	dev = open(argv[1], O_RDWR);
	if (dev < 0)
		die(argv[1]);
	bs = 512;
	{
		/* The block size and capacity, from the namespace's Identify data. */
		struct nvme_admin_cmd id;
		unsigned char *ns = aligned_alloc(4096, 4096);

		memset(&id, 0, sizeof(id));
		id.opcode = 0x06;
		id.nsid = nsid;
		id.addr = (uintptr_t)ns;
		id.data_len = 4096;
		if (ioctl(dev, NVME_IOCTL_ADMIN_CMD, &id))
			die("Identify Namespace");
		bs = 1u << ns[128 + 4 * (ns[26] & 0xf) + 2];
		memcpy(&nlba, ns, 8);
	}
	blocks = 8192 / bs;
	buf = aligned_alloc(4096, 65536);
	back = aligned_alloc(4096, 65536);
	want = aligned_alloc(4096, 65536);
	big = aligned_alloc(4096, 65536);
	if (ring_setup(&r, IORING_SETUP_SQE128 | IORING_SETUP_CQE32 |
			   (iopoll ? IORING_SETUP_IOPOLL : 0)))
		die("io_uring_setup");

	/* 8 KiB written, then read back. */
	fill(want, 8192, 1);
	memcpy(buf, want, 8192);
	c = io(NVME_WRITE, nsid, lba, blocks, buf, 8192);
	report("write", submit(&r, dev, NVME_URING_CMD_IO, &c, &res2));
	memset(back, 0, 8192);
	c = io(NVME_READ, nsid, lba, blocks, back, 8192);
	report("read", submit(&r, dev, NVME_URING_CMD_IO, &c, &res2));
	printf("read_data %s\n", memcmp(back, want, 8192) ? "differs" : "ok");

	/* Three vectors of odd sizes at odd dword offsets, written, then read in others. */
	fill(want + 8192, 4096, 2);
	memcpy(buf + 8192 + 4, want + 8192, 1000);
	memcpy(buf + 16384 + 12, want + 8192 + 1000, 2096);
	memcpy(buf + 24576 + 40, want + 8192 + 3096, 1000);
	iov[0] = (struct iovec){ buf + 8192 + 4, 1000 };
	iov[1] = (struct iovec){ buf + 16384 + 12, 2096 };
	iov[2] = (struct iovec){ buf + 24576 + 40, 1000 };
	c = io(NVME_WRITE, nsid, lba + blocks, 4096 / bs, iov, 3);
	report("vec_write", submit(&r, dev, NVME_URING_CMD_IO_VEC, &c, &res2));
	memset(back, 0, 65536);
	iov[0] = (struct iovec){ back + 8, 2048 };
	iov[1] = (struct iovec){ back + 8192 + 4, 1024 };
	iov[2] = (struct iovec){ back + 16384 + 100, 1024 };
	c = io(NVME_READ, nsid, lba + blocks, 4096 / bs, iov, 3);
	report("vec_read", submit(&r, dev, NVME_URING_CMD_IO_VEC, &c, &res2));
	printf("vec_read_data %s\n",
	       memcmp(back + 8, want + 8192, 2048) || memcmp(back + 8192 + 4, want + 10240, 1024) ||
	       memcmp(back + 16384 + 100, want + 11264, 1024) ? "differs" : "ok");

	/* A buffer at an odd byte address (not dword aligned): copied by the block layer. */
	memset(back, 0, 65536);
	c = io(NVME_READ, nsid, lba, blocks, back + 1, 8192);
	report("unaligned_read", submit(&r, dev, NVME_URING_CMD_IO, &c, &res2));
	printf("unaligned_read_data %s\n", memcmp(back + 1, want, 8192) ? "differs" : "ok");

	/* Bad input; none of it may change the 12 KiB written above. */
	fill(buf, 16384, 9);
	c = io(NVME_WRITE, nsid + 1, lba, blocks, buf, 8192);
	report("wrong_nsid", submit(&r, dev, NVME_URING_CMD_IO, &c, &res2));
	c = io(NVME_WRITE, nsid, lba, blocks, buf, 8192);
	c.flags = 1;
	report("flags", submit(&r, dev, NVME_URING_CMD_IO, &c, &res2));
	c = io(NVME_WRITE, nsid, lba, blocks, buf, 8192);
	c.metadata = (uintptr_t)back;
	c.metadata_len = 64;
	report("metadata", submit(&r, dev, NVME_URING_CMD_IO, &c, &res2));
	c = io(NVME_WRITE, nsid, lba, blocks, buf, 4096);
	report("short_buffer_write", submit(&r, dev, NVME_URING_CMD_IO, &c, &res2));
	/*
	 * A buffer longer than the blocks: refused or not depending on how the controller sees
	 * the SGL (QEMU refuses several descriptors, takes one long one, which is what an IOMMU
	 * merging the pages gives): its first 8 KiB are what the region holds, so either way
	 * the region stays the same.
	 */
	memcpy(big, want, 8192);
	fill(big + 8192, 8192, 5);
	c = io(NVME_WRITE, nsid, lba, blocks, big, 16384);
	report("long_buffer_write", submit(&r, dev, NVME_URING_CMD_IO, &c, &res2));
	c = io(NVME_WRITE, nsid, lba, blocks, (void *)8, 8192);
	report("bad_address_write", submit(&r, dev, NVME_URING_CMD_IO, &c, &res2));
	iov[0] = (struct iovec){ (void *)8, 8192 };
	c = io(NVME_WRITE, nsid, lba, blocks, iov, 1);
	report("bad_vector_write", submit(&r, dev, NVME_URING_CMD_IO_VEC, &c, &res2));
	c = io(NVME_WRITE, nsid, lba, blocks, (void *)8, 1);
	report("bad_vector_array", submit(&r, dev, NVME_URING_CMD_IO_VEC, &c, &res2));
	c = io(NVME_WRITE, nsid, lba, blocks, buf, 8192);
	report("bad_cmd_op", submit(&r, dev, NVME_URING_CMD_IO + 0x100, &c, &res2));
	c = io(NVME_READ, nsid, nlba, 1, back, bs);
	report("lba_out_of_range", submit(&r, dev, NVME_URING_CMD_IO, &c, &res2));
	/*
	 * 8 MiB, more than either driver transfers at once, all of it mapped (so that the answer
	 * is the length check's, not a fault somewhere past the queue's limit).
	 */
	{
		unsigned char *huge = aligned_alloc(4096, 8 << 20);

		if (!huge)
			die("allocating 8 MiB");
		memset(huge, 0, 8 << 20);
		c = io(NVME_READ, nsid, lba, blocks, huge, 8 << 20);
		report("too_long", submit(&r, dev, NVME_URING_CMD_IO, &c, &res2));
		free(huge);
	}
	if (no_data_read) {
		c = io(NVME_READ, nsid, lba, blocks, NULL, 0);
		report("read_no_data", submit(&r, dev, NVME_URING_CMD_IO, &c, &res2));
	}
	/* Rings without 128-byte SQEs and 32-byte CQEs cannot carry the command. */
	if (ring_setup(&r64, iopoll ? IORING_SETUP_IOPOLL : 0))
		die("io_uring_setup (64-byte SQEs)");
	{
		unsigned tail = *r64.sq_tail, idx = tail & *r64.sq_mask, head;
		struct io_uring_sqe *sqe = (void *)(r64.sqes + idx * 64);

		memset(sqe, 0, 64);
		sqe->opcode = IORING_OP_URING_CMD;
		sqe->fd = dev;
		sqe->cmd_op = NVME_URING_CMD_IO;
		r64.sq_array[idx] = idx;
		__atomic_store_n(r64.sq_tail, tail + 1, __ATOMIC_RELEASE);
		if (syscall(__NR_io_uring_enter, r64.fd, 1, 1, IORING_ENTER_GETEVENTS, NULL, 0) < 0)
			die("io_uring_enter");
		head = *r64.cq_head;
		ret = ((struct io_uring_cqe *)(r64.cqes + (head & *r64.cq_mask) * 16))->res;
		__atomic_store_n(r64.cq_head, head + 1, __ATOMIC_RELEASE);
		report("small_sqe", ret);
	}
	memset(back, 0, 65536);
	c = io(NVME_READ, nsid, lba, 12288 / bs, back, 12288);
	ret = submit(&r, dev, NVME_URING_CMD_IO, &c, &res2);
	printf("after_bad_data %s\n", ret || memcmp(back, want, 12288) ? "differs" : "ok");

	/* Unprivileged: the same read after dropping root (the ring and file stay open). */
	if (setresgid(65534, 65534, 65534) || setresuid(65534, 65534, 65534))
		die("dropping root");
	c = io(NVME_READ, nsid, lba, blocks, back, 8192);
	report("unpriv_read", submit(&r, dev, NVME_URING_CMD_IO, &c, &res2));
	c = io(NVME_WRITE, nsid, lba, blocks, buf, 8192);
	report("unpriv_write", submit(&r, dev, NVME_URING_CMD_IO, &c, &res2));
	return 0;
}
