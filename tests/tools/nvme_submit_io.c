// SPDX-License-Identifier: GPL-2.0
/*
 * NVME_IOCTL_SUBMIT_IO and NVME_IOCTL_IO64_CMD_VEC on an NVMe namespace block device (512-byte
 * blocks), one line per case: "name rc=N errno=E [extra]" (extra: "sc=0x.." for an NVMe status,
 * "data=ok|mismatch" for a read compared with what was written). Works the 4 KiB from
 * START_LBA on, plus 512 KiB from START_LBA + 8 for the largest transfer. Run as root; the
 * last cases drop privileges.
 *
 * usage: nvme_submit_io NSDEV NSID START_LBA CAPACITY_BLOCKS
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/nvme_ioctl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/uio.h>
#include <unistd.h>

#define BLK 512
#define LEN 4096
#define BIG (512 * 1024)
#define PAGE 4096

static int fd;
static unsigned nsid;
static unsigned long long start, capacity;

static const char *err_name(int e)
{
	const char *name = e ? strerrorname_np(e) : "0";

	return name ? name : "unknown errno";
}

static int report(const char *name, int rc, const char *extra)
{
	int err = rc < 0 ? errno : 0;

	if (rc > 0)
		printf("%s rc=%d errno=0 sc=0x%x%s%s\n", name, rc, rc & 0x7ff, *extra ? " " : "", extra);
	else
		printf("%s rc=%d errno=%s%s%s\n", name, rc, err_name(err), *extra ? " " : "", extra);
	return rc;
}

/* SUBMIT_IO of opcode with nblocks blocks at lba, data at buf. */
static int submit(const char *name, unsigned char opcode, unsigned long long lba,
		  unsigned nblocks, void *buf, unsigned char flags, const char *extra)
{
	struct nvme_user_io io = {
		.opcode = opcode, .flags = flags, .nblocks = nblocks - 1,
		.addr = (uintptr_t)buf, .slba = lba,
	};

	return report(name, ioctl(fd, NVME_IOCTL_SUBMIT_IO, &io), extra);
}

/* IO64_CMD_VEC of opcode for nblocks blocks at lba, data in the n vectors at iov. */
static int vec(const char *name, unsigned char opcode, unsigned long long lba, unsigned nblocks,
	       const void *iov, unsigned n)
{
	struct nvme_passthru_cmd64 c = {
		.opcode = opcode, .nsid = nsid, .addr = (uintptr_t)iov, .data_len = n,
		.cdw10 = (uint32_t)lba, .cdw11 = (uint32_t)(lba >> 32), .cdw12 = nblocks - 1,
	};

	return report(name, ioctl(fd, NVME_IOCTL_IO64_CMD_VEC, &c), "");
}

static char *area(size_t len)
{
	char *p;

	if (posix_memalign((void **)&p, PAGE, len + PAGE))
		exit(2);
	memset(p, 0, len + PAGE);
	return p;
}

static void fill(char *p, size_t len)
{
	size_t i;

	for (i = 0; i < len; i++)
		p[i] = rand();
}

/* Read LEN bytes at start with SUBMIT_IO into a buffer at page offset 8 and compare. */
static void check(const char *name, const char *want)
{
	char *r = area(LEN) + 8;

	submit(name, 2, start, LEN / BLK, r, 0, "");
	printf("%s_data %s\n", name, memcmp(r, want, LEN) ? "mismatch" : "ok");
}

int main(int argc, char **argv)
{
	char *w, *big, *junk, *v1, *v2, *v3;
	struct iovec wv[3], rv[3];
	char *r1, *r2, *r3;

	if (argc != 5) {
		fprintf(stderr, "usage: %s NSDEV NSID START_LBA CAPACITY_BLOCKS\n", argv[0]);
		return 2;
	}
	fd = open(argv[1], O_RDWR);
	if (fd < 0) {
		perror(argv[1]);
		return 2;
	}
	nsid = strtoul(argv[2], NULL, 0);
	start = strtoull(argv[3], NULL, 0);
	capacity = strtoull(argv[4], NULL, 0);
	srand(getpid());

	/* SUBMIT_IO: a buffer at a dword offset (mapped, not page aligned), read back. */
	w = area(LEN) + 4;
	fill(w, LEN);
	submit("submit_write", 1, start, LEN / BLK, w, 0, "");
	check("submit_read", w);
	/* The largest transfer (512 KiB, MDTS on QEMU), and one block more than that. */
	big = area(BIG + BLK);
	submit("submit_read_512k", 2, start + 8, BIG / BLK, big, 0, "");
	junk = area(BIG + BLK);
	fill(junk, BIG + BLK);
	submit("submit_write_too_big", 1, start, BIG / BLK + 1, junk, 0, "");
	/* Bad input: flags, an opcode that is not read/write/compare, a bad address. */
	submit("submit_flags", 1, start, LEN / BLK, junk, 1, "");
	submit("submit_opcode_flush", 0, start, LEN / BLK, junk, 0, "");
	submit("submit_bad_addr", 1, start, LEN / BLK, (void *)16, 0, "");
	submit("submit_lba_out_of_range", 1, capacity, 1, junk, 0, "");
	check("after_bad_submit", w);

	/* IO64_CMD_VEC: three vectors of odd sizes at odd dword offsets, 4 KiB in all. */
	v1 = area(PAGE) + 4;
	v2 = area(2 * PAGE) + 1028;
	v3 = area(PAGE);
	fill(w, LEN);
	memcpy(v1, w, 512);
	memcpy(v2, w + 512, 1536);
	memcpy(v3, w + 2048, 2048);
	wv[0] = (struct iovec){ v1, 512 };
	wv[1] = (struct iovec){ v2, 1536 };
	wv[2] = (struct iovec){ v3, 2048 };
	vec("vec_write", 1, start, LEN / BLK, wv, 3);
	r1 = area(PAGE) + 12;
	r2 = area(2 * PAGE) + 2052;
	r3 = area(PAGE) + 8;
	rv[0] = (struct iovec){ r1, 1024 };
	rv[1] = (struct iovec){ r2, 2560 };
	rv[2] = (struct iovec){ r3, 512 };
	vec("vec_read", 2, start, LEN / BLK, rv, 3);
	printf("vec_read_data %s\n",
	       memcmp(r1, w, 1024) || memcmp(r2, w + 1024, 2560) || memcmp(r3, w + 3584, 512) ?
	       "mismatch" : "ok");
	check("submit_read_after_vec", w);
	/* Bad input: the command names more blocks than the vectors hold, a bad vector array,
	 * a bad buffer in a vector, no vectors. */
	vec("vec_short", 1, start, 2 * LEN / BLK, wv, 3);
	vec("vec_bad_iov", 1, start, LEN / BLK, (void *)16, 3);
	wv[1].iov_base = (void *)16;
	vec("vec_bad_buffer", 1, start, LEN / BLK, wv, 3);
	vec("vec_none", 2, start, LEN / BLK, rv, 0);
	check("after_bad_vec", w);

	/* Unprivileged. */
	if (setgid(65534) || setuid(65534)) {
		perror("dropping privileges");
		return 2;
	}
	submit("unpriv_submit_read", 2, start, LEN / BLK, big, 0, "");
	vec("unpriv_vec_read", 2, start, LEN / BLK, rv, 3);
	return 0;
}
