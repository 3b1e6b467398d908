// SPDX-License-Identifier: GPL-2.0
/*
 * dax_file: file checks for the DAX tests.
 *
 *   dax_file statx FILE             exit 0 if statx reports STATX_ATTR_DAX for FILE, 1 if not
 *   dax_file fiemap FILE            print the byte offset of FILE's first extent on its disk
 *   dax_file write FILE BYTES SEED  create FILE of BYTES bytes, fill it through a shared mmap
 *                                   with a pattern derived from SEED, msync(MS_SYNC)
 *   dax_file check FILE BYTES SEED  read FILE through a mmap, exit 1 at the first byte that
 *                                   differs from the pattern (naming its offset)
 *   dax_file mapsync FILE           map FILE's first page with MAP_SHARED_VALIDATE | MAP_SYNC
 *                                   and store its first word back through the mapping (a
 *                                   write fault, which MAP_SYNC makes commit the metadata);
 *                                   exit 0 if the kernel granted the mapping, 1 if not
 *
 * Usage errors exit 2, system call failures 1 with the call and errno.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/fiemap.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#ifndef MAP_SHARED_VALIDATE
#define MAP_SHARED_VALIDATE 0x03
#endif
#ifndef MAP_SYNC
#define MAP_SYNC 0x080000
#endif
#ifndef STATX_ATTR_DAX
#define STATX_ATTR_DAX 0x00200000
#endif

static int die(const char *what, const char *file)
{
	fprintf(stderr, "%s %s: %s\n", what, file, strerror(errno));
	return 1;
}

/* The pattern: a 64-bit word per 8 bytes, from the word's offset and the seed. */
static uint64_t word(uint64_t seed, uint64_t off)
{
	uint64_t x = seed * 0x9e3779b97f4a7c15ULL ^ off;

	x ^= x >> 31;
	x *= 0xbf58476d1ce4e5b9ULL;
	return x ^ (x >> 29);
}

static int do_statx(const char *file)
{
	struct statx stx;

	if (statx(AT_FDCWD, file, 0, STATX_BASIC_STATS, &stx))
		return die("statx", file);
	if (!(stx.stx_attributes_mask & STATX_ATTR_DAX)) {
		printf("statx does not report the DAX attribute\n");
		return 1;
	}
	if (!(stx.stx_attributes & STATX_ATTR_DAX)) {
		printf("no DAX\n");
		return 1;
	}
	printf("dax\n");
	return 0;
}

static int do_fiemap(const char *file)
{
	struct {
		struct fiemap fm;
		struct fiemap_extent ext[1];
	} f;
	int fd;

	fd = open(file, O_RDONLY);
	if (fd < 0)
		return die("open", file);
	memset(&f, 0, sizeof(f));
	f.fm.fm_length = ~0ULL;
	f.fm.fm_flags = FIEMAP_FLAG_SYNC;
	f.fm.fm_extent_count = 1;
	if (ioctl(fd, FS_IOC_FIEMAP, &f.fm))
		return die("FS_IOC_FIEMAP", file);
	if (f.fm.fm_mapped_extents != 1) {
		fprintf(stderr, "%s has no extent\n", file);
		return 1;
	}
	printf("%llu\n", (unsigned long long)f.fm.fm_extents[0].fe_physical);
	close(fd);
	return 0;
}

static int do_map(const char *file, size_t bytes, uint64_t seed, int write)
{
	uint64_t *p;
	size_t i;
	int fd;

	fd = open(file, write ? O_RDWR | O_CREAT | O_TRUNC : O_RDONLY, 0644);
	if (fd < 0)
		return die("open", file);
	if (write && ftruncate(fd, bytes))
		return die("ftruncate", file);
	p = mmap(NULL, bytes, write ? PROT_READ | PROT_WRITE : PROT_READ, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED)
		return die("mmap", file);
	for (i = 0; i < bytes / 8; i++) {
		if (write) {
			p[i] = word(seed, i * 8);
		} else if (p[i] != word(seed, i * 8)) {
			printf("mismatch at byte %zu: %#llx, want %#llx\n", i * 8,
			       (unsigned long long)p[i], (unsigned long long)word(seed, i * 8));
			return 1;
		}
	}
	if (write && msync(p, bytes, MS_SYNC))
		return die("msync", file);
	if (munmap(p, bytes))
		return die("munmap", file);
	if (close(fd))
		return die("close", file);
	printf("ok\n");
	return 0;
}

static int do_mapsync(const char *file)
{
	volatile uint64_t *p;
	int fd = open(file, O_RDWR);

	if (fd < 0)
		return die("open", file);
	p = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED_VALIDATE | MAP_SYNC, fd, 0);
	if (p == MAP_FAILED) {
		printf("mmap MAP_SYNC %s: %s\n", file, strerror(errno));
		close(fd);
		return 1;
	}
	p[0] = p[0];
	munmap((void *)p, 4096);
	close(fd);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 3 && !strcmp(argv[1], "statx"))
		return do_statx(argv[2]);
	if (argc == 3 && !strcmp(argv[1], "fiemap"))
		return do_fiemap(argv[2]);
	if (argc == 3 && !strcmp(argv[1], "mapsync"))
		return do_mapsync(argv[2]);
	if (argc == 5 && (!strcmp(argv[1], "write") || !strcmp(argv[1], "check"))) {
		size_t bytes = strtoull(argv[3], NULL, 0);
		uint64_t seed = strtoull(argv[4], NULL, 0);

		if (!bytes || bytes % 8) {
			fprintf(stderr, "BYTES must be a positive multiple of 8\n");
			return 2;
		}
		return do_map(argv[2], bytes, seed, argv[1][0] == 'w');
	}
	fprintf(stderr, "usage: %s statx|fiemap|mapsync FILE | write|check FILE BYTES SEED\n", argv[0]);
	return 2;
}
