// SPDX-License-Identifier: GPL-2.0
/*
 * insn_count: a QEMU TCG plugin that counts the guest instructions executed per translation
 * block, for exact instruction profiles of a guest window (no sampling, no attribution to
 * interrupt-enable points).
 *
 * Arguments: out=PREFIX (dump files PREFIX.0, PREFIX.1, ...), trigger=0xADDR (a guest virtual
 * address, e.g. of __x64_sys_sync). Each time the translation block at the trigger address
 * runs, every block's count since the previous dump is written to the next dump file as
 * "vaddr instructions-per-block executions" lines, and the counts start again from zero.
 *
 * Written against the plugin API's stable calls only, declared here (QEMU's header is not
 * packaged by Debian); the API version is checked by QEMU at load time.
 */
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef uint64_t qemu_plugin_id_t;
struct qemu_plugin_tb;
typedef struct qemu_info_t qemu_info_t;
enum qemu_plugin_cb_flags { QEMU_PLUGIN_CB_NO_REGS };

void qemu_plugin_register_vcpu_tb_trans_cb(qemu_plugin_id_t id,
	void (*cb)(qemu_plugin_id_t, struct qemu_plugin_tb *));
void qemu_plugin_register_vcpu_tb_exec_cb(struct qemu_plugin_tb *tb,
	void (*cb)(unsigned int, void *), enum qemu_plugin_cb_flags flags, void *udata);
size_t qemu_plugin_tb_n_insns(const struct qemu_plugin_tb *tb);
uint64_t qemu_plugin_tb_vaddr(const struct qemu_plugin_tb *tb);

/* QEMU 10.0 accepts API versions 2..4; the calls above are in all of them. */
__attribute__((visibility("default"))) int qemu_plugin_version = 4;

struct block {
	uint64_t vaddr;
	uint64_t insns;
	uint64_t execs;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct block **blocks;
static size_t nblocks, capblocks;
static uint64_t trigger;
static const char *out = "insn-count";
static unsigned int dumps;

static void dump(unsigned int vcpu, void *udata)
{
	char path[4096];
	FILE *f;

	(void)vcpu;
	(void)udata;
	pthread_mutex_lock(&lock);
	snprintf(path, sizeof(path), "%s.%u", out, dumps++);
	f = fopen(path, "w");
	for (size_t i = 0; i < nblocks; i++) {
		struct block *b = blocks[i];

		if (f && b->execs)
			fprintf(f, "%" PRIx64 " %" PRIu64 " %" PRIu64 "\n", b->vaddr, b->insns, b->execs);
		b->execs = 0;
	}
	if (f)
		fclose(f);
	else
		fprintf(stderr, "insn_count: cannot write %s\n", path);
	pthread_mutex_unlock(&lock);
}

static void count(unsigned int vcpu, void *udata)
{
	(void)vcpu;
	__atomic_fetch_add(&((struct block *)udata)->execs, 1, __ATOMIC_RELAXED);
}

static void translated(qemu_plugin_id_t id, struct qemu_plugin_tb *tb)
{
	struct block *b = calloc(1, sizeof(*b));

	(void)id;
	if (!b)
		abort();
	b->vaddr = qemu_plugin_tb_vaddr(tb);
	b->insns = qemu_plugin_tb_n_insns(tb);
	pthread_mutex_lock(&lock);
	if (nblocks == capblocks) {
		capblocks = capblocks ? 2 * capblocks : 65536;
		blocks = realloc(blocks, capblocks * sizeof(*blocks));
		if (!blocks)
			abort();
	}
	blocks[nblocks++] = b;
	pthread_mutex_unlock(&lock);
	if (trigger && b->vaddr == trigger)
		qemu_plugin_register_vcpu_tb_exec_cb(tb, dump, QEMU_PLUGIN_CB_NO_REGS, NULL);
	qemu_plugin_register_vcpu_tb_exec_cb(tb, count, QEMU_PLUGIN_CB_NO_REGS, b);
}

__attribute__((visibility("default")))
int qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t *info, int argc, char **argv)
{
	(void)info;
	for (int i = 0; i < argc; i++) {
		if (!strncmp(argv[i], "out=", 4))
			out = argv[i] + 4;
		else if (!strncmp(argv[i], "trigger=", 8))
			trigger = strtoull(argv[i] + 8, NULL, 0);
		else {
			fprintf(stderr, "insn_count: unknown argument '%s'\n", argv[i]);
			return -1;
		}
	}
	qemu_plugin_register_vcpu_tb_trans_cb(id, translated);
	return 0;
}
