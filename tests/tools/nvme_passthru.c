// SPDX-License-Identifier: GPL-2.0
/*
 * nvme_passthru: edge cases of the NVMe admin passthrough ioctls on a controller character
 * device (/dev/nvme<C> or /dev/rnvme<C>), one line per case: "<case> rc=<ioctl result>
 * errno=<name or 0> [details]", so the lines of the C and the Rust driver can be compared.
 *
 * Usage: nvme_passthru DEV        run every case (as root; the last cases drop to uid 65534)
 *        nvme_passthru --unbind DEV UNBIND_FILE BDF
 *                                  open DEV (controller or namespace), write BDF to UNBIND_FILE
 *                                  (unbinding the driver), then try ioctls on the file still
 *                                  open
 *        nvme_passthru --help
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
#include <unistd.h>

#define ID_SIZE 4096

static int fd;

/* "EFAULT" for EFAULT and so on, "0" for success. */
static const char *err_name(int e)
{
	const char *name = e ? strerrorname_np(e) : "0";

	return name ? name : "unknown errno";
}

/* Identify (CNS cns) into buf with data_len len; returns the ioctl result, errno in *err. */
static int identify(unsigned cns, void *buf, unsigned len, int *err)
{
	struct nvme_admin_cmd c = { .opcode = 0x06, .addr = (uintptr_t)buf, .data_len = len,
				    .cdw10 = cns };
	int rc = ioctl(fd, NVME_IOCTL_ADMIN_CMD, &c);

	*err = rc < 0 ? errno : 0;
	return rc;
}

static void report(const char *name, int rc, int err, const char *extra)
{
	printf("%s rc=%d errno=%s%s%s\n", name, rc, err_name(err), *extra ? " " : "", extra);
}

/* Bytes [from, to) of buf that are not zero. */
static size_t nonzero(const unsigned char *buf, size_t from, size_t to)
{
	size_t n = 0;

	for (size_t i = from; i < to; i++)
		n += buf[i] != 0;
	return n;
}

static void case_rc(const char *name, unsigned long req, void *arg)
{
	int rc = ioctl(fd, req, arg);

	report(name, rc, rc < 0 ? errno : 0, "");
}

int main(int argc, char **argv)
{
	static unsigned char ref[ID_SIZE], buf[3 * ID_SIZE];
	char extra[128];
	int rc, err;

	if (argc == 5 && !strcmp(argv[1], "--unbind")) {
		int ufd;

		fd = open(argv[2], O_RDWR);
		if (fd < 0) {
			fprintf(stderr, "%s: open: %s\n", argv[2], strerror(errno));
			return 1;
		}
		ufd = open(argv[3], O_WRONLY);
		if (ufd < 0 || write(ufd, argv[4], strlen(argv[4])) < 0) {
			fprintf(stderr, "%s: %s\n", argv[3], strerror(errno));
			return 1;
		}
		close(ufd);
		case_rc("ioctl_id_after_unbind", NVME_IOCTL_ID, NULL);
		rc = identify(1, buf, ID_SIZE, &err);
		report("identify_after_unbind", rc, err, "");
		case_rc("reset_after_unbind", NVME_IOCTL_RESET, NULL);
		return 0;
	}
	if (argc != 2 || !strcmp(argv[1], "--help")) {
		fprintf(stderr, "usage: %s DEV   (an NVMe controller character device)\n", argv[0]);
		return argc == 2 ? 0 : 2;
	}
	fd = open(argv[1], O_RDWR);
	if (fd < 0) {
		fprintf(stderr, "%s: open: %s\n", argv[1], strerror(errno));
		return 1;
	}

	rc = identify(1, ref, ID_SIZE, &err);
	report("identify_ctrl", rc, err, "");

	/* More data than the controller writes: the rest must come back zero, not old memory. */
	memset(buf, 0xaa, sizeof(buf));
	rc = identify(1, buf, 2 * ID_SIZE, &err);
	snprintf(extra, sizeof(extra), "same=%d tail_nonzero=%zu", !memcmp(buf, ref, ID_SIZE),
		 nonzero(buf, ID_SIZE, 2 * ID_SIZE));
	report("identify_8k", rc, err, extra);
	snprintf(extra, sizeof(extra), "untouched_after=%d", buf[2 * ID_SIZE] == 0xaa);
	report("identify_8k_bounds", rc, err, extra);

	/* A length that is not a multiple of 4 or of the page size. */
	memset(buf, 0xaa, sizeof(buf));
	rc = identify(1, buf, 1001, &err);
	snprintf(extra, sizeof(extra), "same=%d untouched_after=%d", !memcmp(buf, ref, 1001),
		 buf[1001] == 0xaa);
	report("identify_len_1001", rc, err, extra);

	rc = identify(1, buf, 1u << 30, &err);
	report("identify_len_1g", rc, err, "");
	rc = identify(1, buf, 0xffffffffu, &err);
	report("identify_len_4g", rc, err, "");

	rc = identify(1, (void *)8, ID_SIZE, &err);
	report("identify_bad_addr", rc, err, "");
	case_rc("admin_cmd_bad_arg", NVME_IOCTL_ADMIN_CMD, (void *)8);
	case_rc("admin64_cmd_bad_arg", NVME_IOCTL_ADMIN64_CMD, (void *)8);

	{
		struct nvme_admin_cmd c = { .opcode = 0x06, .flags = 1, .addr = (uintptr_t)buf,
					    .data_len = ID_SIZE, .cdw10 = 1 };
		case_rc("flags_set", NVME_IOCTL_ADMIN_CMD, &c);
	}
	{
		/* A reserved admin opcode and a vendor specific one: the controller's status. */
		struct nvme_admin_cmd c = { .opcode = 0x3e };
		rc = ioctl(fd, NVME_IOCTL_ADMIN_CMD, &c);
		snprintf(extra, sizeof(extra), "sc=%#x", rc > 0 ? rc & 0xff : 0);
		report("opcode_reserved", rc > 0 ? 1 : rc, rc < 0 ? errno : 0, extra);
		c.opcode = 0xc1;
		rc = ioctl(fd, NVME_IOCTL_ADMIN_CMD, &c);
		snprintf(extra, sizeof(extra), "sc=%#x", rc > 0 ? rc & 0xff : 0);
		report("opcode_vendor", rc > 0 ? 1 : rc, rc < 0 ? errno : 0, extra);
	}
	{
		/* Get Features, Number of Queues: dword 0 of the completion in `result`. */
		struct nvme_admin_cmd c = { .opcode = 0x0a, .cdw10 = 7, .result = 0xdeadbeef };
		struct nvme_passthru_cmd64 c64 = { .opcode = 0x0a, .cdw10 = 7, .rsvd2 = 0,
						   .result = ~0ull };

		rc = ioctl(fd, NVME_IOCTL_ADMIN_CMD, &c);
		snprintf(extra, sizeof(extra), "result=%#x", c.result);
		report("get_features_7", rc, rc < 0 ? errno : 0, extra);
		rc = ioctl(fd, NVME_IOCTL_ADMIN64_CMD, &c64);
		snprintf(extra, sizeof(extra), "result=%#llx", (unsigned long long)c64.result);
		report("get_features_7_64", rc, rc < 0 ? errno : 0, extra);
	}
	{
		/* Set Features, Number of Queues: managed by the driver, refused for everybody. */
		struct nvme_admin_cmd c = { .opcode = 0x09, .cdw10 = 7, .cdw11 = 0 };
		case_rc("set_features_7", NVME_IOCTL_ADMIN_CMD, &c);
	}
	{
		/* Write direction: the data of Set Features, Timestamp (feature 0x0e) is read from
		 * a bad address. */
		struct nvme_admin_cmd c = { .opcode = 0x09, .cdw10 = 0x0e, .addr = 8,
					    .data_len = 8 };
		case_rc("set_features_bad_addr", NVME_IOCTL_ADMIN_CMD, &c);
	}
	case_rc("ioctl_id", NVME_IOCTL_ID, NULL);
	case_rc("unknown_ioctl", _IO('N', 0x7f), NULL);
	case_rc("rescan", NVME_IOCTL_RESCAN, NULL);

	/* Without privileges: the identify commands stay allowed, the rest is refused. */
	if (setresuid(65534, 65534, 65534)) {
		perror("setresuid");
		return 1;
	}
	rc = identify(1, buf, ID_SIZE, &err);
	snprintf(extra, sizeof(extra), "same=%d", rc == 0 && !memcmp(buf, ref, ID_SIZE));
	report("unpriv_identify_ctrl", rc, err, extra);
	{
		struct nvme_admin_cmd c = { .opcode = 0x02, .addr = (uintptr_t)buf, .data_len = 512,
					    .cdw10 = 0x02 | (127 << 16) };
		case_rc("unpriv_smart_log", NVME_IOCTL_ADMIN_CMD, &c);
	}
	case_rc("unpriv_reset", NVME_IOCTL_RESET, NULL);
	case_rc("unpriv_rescan", NVME_IOCTL_RESCAN, NULL);
	{
		int fd2 = open(argv[1], O_RDWR);

		report("unpriv_open", fd2 < 0 ? -1 : 0, fd2 < 0 ? errno : 0, "");
	}
	return 0;
}
