// SPDX-License-Identifier: GPL-2.0
/*
 * odd_dio DEVICE MISALIGN NVEC: O_DIRECT pwritev of NVEC vectors of 512 bytes each, every
 * vector at MISALIGN bytes past a page boundary in its own page, at device offset 1 MiB; then
 * preadv into buffers misaligned the same way (other pages) and compare.
 * Prints "ok" or the errno name of the failed call ("write EINVAL") and exits 0 on success,
 * 1 on an I/O error, 3 on a data mismatch, 2 on usage errors.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#define PAGE 4096
#define VEC 512
#define OFFSET (1 << 20)

static struct iovec *vectors(char *area, long misalign, int nvec)
{
	struct iovec *iov = calloc(nvec, sizeof(*iov));
	int i;

	if (!iov)
		exit(2);
	for (i = 0; i < nvec; i++) {
		iov[i].iov_base = area + (long)i * PAGE + misalign;
		iov[i].iov_len = VEC;
	}
	return iov;
}

int main(int argc, char **argv)
{
	struct iovec *wr, *rd;
	char *wbuf, *rbuf;
	long misalign;
	int nvec, fd, i;
	ssize_t n;

	if (argc != 4) {
		fprintf(stderr, "usage: %s DEVICE MISALIGN NVEC\n", argv[0]);
		return 2;
	}
	misalign = atol(argv[2]);
	nvec = atoi(argv[3]);
	if (misalign < 0 || misalign > PAGE - VEC || nvec < 1 || nvec > 1024) {
		fprintf(stderr, "MISALIGN must be 0..%d, NVEC 1..1024\n", PAGE - VEC);
		return 2;
	}
	fd = open(argv[1], O_RDWR | O_DIRECT);
	if (fd < 0) {
		fprintf(stderr, "open %s: %s\n", argv[1], strerror(errno));
		return 2;
	}
	if (posix_memalign((void **)&wbuf, PAGE, (size_t)nvec * PAGE) ||
	    posix_memalign((void **)&rbuf, PAGE, (size_t)nvec * PAGE))
		return 2;
	srand(getpid());
	for (i = 0; i < nvec * PAGE; i++)
		wbuf[i] = rand();
	memset(rbuf, 0, (size_t)nvec * PAGE);
	wr = vectors(wbuf, misalign, nvec);
	rd = vectors(rbuf, misalign, nvec);
	n = pwritev(fd, wr, nvec, OFFSET);
	if (n != (ssize_t)nvec * VEC) {
		printf("write %s\n", n < 0 ? strerrorname_np(errno) : "short");
		return 1;
	}
	n = preadv(fd, rd, nvec, OFFSET);
	if (n != (ssize_t)nvec * VEC) {
		printf("read %s\n", n < 0 ? strerrorname_np(errno) : "short");
		return 1;
	}
	for (i = 0; i < nvec; i++) {
		if (memcmp(wr[i].iov_base, rd[i].iov_base, VEC)) {
			printf("mismatch in vector %d\n", i);
			return 3;
		}
	}
	printf("ok\n");
	return 0;
}
