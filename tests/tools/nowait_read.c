// SPDX-License-Identifier: GPL-2.0
/*
 * nowait_read DEVICE: one 4 KiB O_DIRECT preadv2(RWF_NOWAIT) at offset 0.
 * Prints "ok" or the errno name and exits 0 on success, 1 on failure, 2 on usage errors.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#define BLOCK 4096

int main(int argc, char **argv)
{
	struct iovec iov;
	void *buf;
	ssize_t n;
	int fd;

	if (argc != 2) {
		fprintf(stderr, "usage: %s DEVICE\n", argv[0]);
		return 2;
	}
	fd = open(argv[1], O_RDONLY | O_DIRECT);
	if (fd < 0) {
		fprintf(stderr, "open %s: %s\n", argv[1], strerror(errno));
		return 2;
	}
	if (posix_memalign(&buf, BLOCK, BLOCK))
		return 2;
	iov.iov_base = buf;
	iov.iov_len = BLOCK;
	n = preadv2(fd, &iov, 1, 0, RWF_NOWAIT);
	if (n < 0) {
		printf("%s\n", strerrorname_np(errno));
		return 1;
	}
	printf("ok %zd\n", n);
	return 0;
}
