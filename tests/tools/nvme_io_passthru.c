// SPDX-License-Identifier: GPL-2.0
/*
 * I/O command passthrough (NVME_IOCTL_IO_CMD, NVME_IOCTL_IO64_CMD) edge cases on an NVMe
 * namespace block device, one line per case: "name rc=N errno=E [extra]". Run as root; the
 * last cases drop privileges. Works the LBAs from START on (8 blocks of 512 bytes or one of
 * 4096, whatever the block size is: 4 KiB per command).
 *
 * usage: nvme_io_passthru NSDEV NSID START_LBA
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <linux/nvme_ioctl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#define LEN 4096

static int fd;
static unsigned nsid, lba_size;
static unsigned long long start;

/* "EFAULT" for EFAULT and so on, "0" for success. */
static const char *err_name(int e)
{
	const char *name = e ? strerrorname_np(e) : "0";

	return name ? name : "unknown errno";
}

static void report(const char *name, int rc, int err, const char *extra)
{
	printf("%s rc=%d errno=%s%s%s\n", name, rc, err_name(err), *extra ? " " : "", extra);
}

/* A read (opcode 2) or write (1) of LEN bytes at LBA lba. */
static struct nvme_passthru_cmd rw(unsigned char opcode, unsigned long long lba, void *buf)
{
	struct nvme_passthru_cmd c = {
		.opcode = opcode, .nsid = nsid, .addr = (uintptr_t)buf, .data_len = LEN,
		.cdw10 = (uint32_t)lba, .cdw11 = (uint32_t)(lba >> 32),
		.cdw12 = LEN / lba_size - 1,
	};
	return c;
}

static void run(const char *name, unsigned long req, void *arg, const char *extra)
{
	int rc = ioctl(fd, req, arg);

	report(name, rc, rc < 0 ? errno : 0, extra);
}

int main(int argc, char **argv)
{
	static unsigned char pattern[LEN] __attribute__((aligned(4096)));
	static unsigned char buf[2 * LEN] __attribute__((aligned(4096)));
	unsigned long long bytes;
	char extra[64];
	int rc;

	if (argc != 4) {
		fprintf(stderr, "usage: %s NSDEV NSID START_LBA\n", argv[0]);
		return 2;
	}
	nsid = strtoul(argv[2], NULL, 0);
	start = strtoull(argv[3], NULL, 0);
	fd = open(argv[1], O_RDWR);
	if (fd < 0 || ioctl(fd, BLKSSZGET, &lba_size) || ioctl(fd, BLKGETSIZE64, &bytes)) {
		perror(argv[1]);
		return 1;
	}
	for (int i = 0; i < LEN; i++)
		pattern[i] = (unsigned char)(i * 7 + 3);

	{
		struct nvme_passthru_cmd c = rw(1, start, pattern);

		run("write", NVME_IOCTL_IO_CMD, &c, "");
	}
	{
		struct nvme_passthru_cmd c = rw(2, start, buf);

		memset(buf, 0xaa, sizeof(buf));
		rc = ioctl(fd, NVME_IOCTL_IO_CMD, &c);
		snprintf(extra, sizeof(extra), "same=%d untouched_after=%d",
			 !memcmp(buf, pattern, LEN), buf[LEN] == 0xaa && buf[2 * LEN - 1] == 0xaa);
		report("read", rc, rc < 0 ? errno : 0, extra);
	}
	{
		struct nvme_passthru_cmd64 c = { .opcode = 2, .nsid = nsid, .addr = (uintptr_t)buf,
						 .data_len = LEN, .cdw10 = (uint32_t)start,
						 .cdw11 = (uint32_t)(start >> 32),
						 .cdw12 = LEN / lba_size - 1 };

		memset(buf, 0, sizeof(buf));
		rc = ioctl(fd, NVME_IOCTL_IO64_CMD, &c);
		snprintf(extra, sizeof(extra), "same=%d", !memcmp(buf, pattern, LEN));
		report("read64", rc, rc < 0 ? errno : 0, extra);
	}
	{
		struct nvme_passthru_cmd c = { .opcode = 0, .nsid = nsid };

		run("flush", NVME_IOCTL_IO_CMD, &c, "");
	}
	{
		/* Past the end of the namespace: the controller's LBA Out of Range status. */
		struct nvme_passthru_cmd c = rw(2, bytes / lba_size, buf);

		rc = ioctl(fd, NVME_IOCTL_IO_CMD, &c);
		snprintf(extra, sizeof(extra), "sc=0x%x", rc > 0 ? rc & 0xff : 0);
		report("lba_out_of_range", rc, rc < 0 ? errno : 0, extra);
	}
	{
		struct nvme_passthru_cmd c = { .opcode = 0x7e, .nsid = nsid };

		rc = ioctl(fd, NVME_IOCTL_IO_CMD, &c);
		snprintf(extra, sizeof(extra), "sc=0x%x", rc > 0 ? rc & 0xff : 0);
		report("opcode_reserved", rc, rc < 0 ? errno : 0, extra);
	}
	{
		struct nvme_passthru_cmd c = rw(2, start, (void *)8);

		run("bad_addr", NVME_IOCTL_IO_CMD, &c, "");
	}
	{
		struct nvme_passthru_cmd c = rw(1, start, (void *)8);

		run("write_bad_addr", NVME_IOCTL_IO_CMD, &c, "");
	}
	run("bad_arg", NVME_IOCTL_IO_CMD, (void *)8, "");
	{
		struct nvme_passthru_cmd c = rw(2, start, buf);

		c.flags = 1;
		run("flags_set", NVME_IOCTL_IO_CMD, &c, "");
	}
	/* The cases below the C driver passes on to the controller (or maps the buffer for);
	 * rust_nvme_mq refuses them. */
	{
		/* 8 blocks read into a 512-byte buffer. */
		struct nvme_passthru_cmd c = rw(2, start, buf);

		c.data_len = 512;
		run("len_short", NVME_IOCTL_IO_CMD, &c, "");
	}
	{
		struct nvme_passthru_cmd c = rw(2, start, buf);

		c.data_len = 1u << 30;
		c.cdw12 = (1u << 30) / lba_size - 1;
		run("len_1g", NVME_IOCTL_IO_CMD, &c, "");
	}
	{
		struct nvme_passthru_cmd c = rw(2, start, buf);

		c.nsid = nsid + 1;
		run("other_nsid", NVME_IOCTL_IO_CMD, &c, "");
	}
	{
		struct nvme_passthru_cmd c = rw(2, start, buf);

		c.metadata = (uintptr_t)(buf + LEN);
		c.metadata_len = 8;
		run("metadata", NVME_IOCTL_IO_CMD, &c, "");
	}
	if (setresuid(65534, 65534, 65534)) {
		perror("setresuid");
		return 1;
	}
	{
		struct nvme_passthru_cmd c = rw(2, start, buf);

		run("unpriv_read", NVME_IOCTL_IO_CMD, &c, "");
	}
	return 0;
}
