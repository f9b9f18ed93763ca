/* SPDX-License-Identifier: MIT */
/*
 * Invariant (every backend of gw_dirty_backends[] whose probe accepts plain
 * process memory): after start(), every page written is reported by some
 * collect() that begins after the write; an untouched page is never
 * reported; a page only read is never reported, except that the first read
 * of a hole of a fd-backed block may be reported once (uffd-wp protects only
 * the runs allocated in the file: the read allocates the page and maps it
 * unprotected; see dirty_uffd_wp.c); tracking re-arms, so a page written
 * once is reported once and written again is reported again; collect_last
 * (the switchover's harvest) reports exactly the pages written, split over
 * threads, and re-arms nothing (asked twice, it says the same). Covers a memfd
 * MAP_SHARED block (partly populated before start) and an anonymous block,
 * including pages first populated by a write after start().
 */
#include <pthread.h>
#include <stdbool.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/mman.h>
#include <unistd.h>
#include "mem/dirty.h"
#include "test_util.h"

TEST_DEFINE_FAILURES;

#define PAGE 4096ull
#define MEMFD_BYTES (64ull << 20)
#define ANON_BYTES (32ull << 20)
#define NR_WRITES 20000

struct write_op {
	unsigned block;
	uint64_t page;
};

struct writer {
	struct gw_vm_info *vm;
	struct write_op *ops;		/* set at creation */
	unsigned nr_ops;
	struct write_op *reads;		/* pages only read */
	unsigned nr_reads;
	atomic_uint done;		/* ops[0..done) are written (release) */
};

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint64_t rnd(void)
{
	uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static void *writer_main(void *arg)
{
	struct writer *w = arg;

	for (unsigned i = 0; i < w->nr_ops; i++) {
		const struct write_op *op = &w->ops[i];
		volatile uint8_t *p = (uint8_t *)w->vm->blocks[op->block].host + op->page * PAGE;

		p[(i * 61) % PAGE] = (uint8_t)(i | 1);
		atomic_store_explicit(&w->done, i + 1, memory_order_release);
		if (i < w->nr_reads) {
			const struct write_op *r = &w->reads[i];
			volatile uint8_t *q = (uint8_t *)w->vm->blocks[r->block].host + r->page * PAGE;

			(void)q[0];
		}
		if (i % 512 == 0)
			usleep(100);
	}
	return NULL;
}

static void run_backend(const struct gw_dirty_ops *ops, struct gw_vm_info *vm)
{
	struct gw_bitmap written[2], seen[2], got[2], read_seen;
	struct writer w = { .vm = vm };
	struct gw_dirty d = { 0 };
	unsigned nr_collects = 0;
	pthread_t th;
	ssize_t n;
	int ret;

	for (unsigned b = 0; b < 2; b++) {
		uint64_t pages = vm->blocks[b].size_bytes / PAGE;

		TEST_ASSERT(gw_bitmap_init(&written[b], pages) == 0, "bitmap");
		TEST_ASSERT(gw_bitmap_init(&seen[b], pages) == 0, "bitmap");
		TEST_ASSERT(gw_bitmap_init(&got[b], pages) == 0, "bitmap");
	}
	TEST_ASSERT(gw_bitmap_init(&read_seen, vm->blocks[0].size_bytes / PAGE) == 0, "bitmap");
	w.ops = calloc(NR_WRITES, sizeof(*w.ops));
	w.reads = calloc(NR_WRITES, sizeof(*w.reads));
	TEST_ASSERT(w.ops && w.reads, "calloc");
	for (unsigned i = 0; i < NR_WRITES; i++) {
		struct write_op op;

		op.block = rnd() % 2;
		op.page = rnd() % (vm->blocks[op.block].size_bytes / PAGE);
		/* Reads land on odd pages, writes on even pages: never the same page. */
		op.page &= ~1ull;
		w.ops[w.nr_ops++] = op;
		gw_bitmap_set(&written[op.block], op.page);
		op.page |= 1;
		w.reads[w.nr_reads++] = op;
	}

	d.ops = ops;
	d.vm = vm;
	ret = ops->start(&d);
	TEST_ASSERT(ret == 0, "%s start: %d", ops->name, ret);
	/* Nothing was written since start. */
	n = ops->collect(&d, got);
	TEST_CHECK(n == 0, "%s: %zd pages reported before any write", ops->name, n);

	TEST_ASSERT(pthread_create(&th, NULL, writer_main, &w) == 0, "pthread_create");
	for (;;) {
		unsigned done_before = atomic_load_explicit(&w.done, memory_order_acquire);

		for (unsigned b = 0; b < 2; b++)
			gw_bitmap_zero(&got[b]);
		n = ops->collect(&d, got);
		TEST_ASSERT(n >= 0, "%s collect: %zd", ops->name, n);
		nr_collects++;
		for (unsigned b = 0; b < 2; b++) {
			uint64_t weight = gw_bitmap_weight(&got[b]);

			/* Reported but never written: only a first read of a memfd hole, once. */
			for (uint64_t p = gw_bitmap_next_set(&got[b], 0); p < got[b].nr_bits;
			     p = gw_bitmap_next_set(&got[b], p + 1)) {
				bool read_of_hole = b == 0 && (p & 1) &&
						    p >= vm->blocks[0].size_bytes / PAGE / 2 &&
						    !gw_bitmap_test(&read_seen, p);

				if (read_of_hole) {
					gw_bitmap_set(&read_seen, p);
					continue;
				}
				TEST_CHECK(gw_bitmap_test(&written[b], p),
					   "%s: block %u page %lu reported, never written",
					   ops->name, b, (unsigned long)p);
			}
			(void)weight;
			gw_bitmap_or(&seen[b], &got[b]);
		}
		/* Every write completed before this collect began is reported by now. */
		for (unsigned i = 0; i < done_before; i++)
			TEST_CHECK(gw_bitmap_test(&seen[w.ops[i].block], w.ops[i].page),
				   "%s: write %u (block %u page %lu) not reported after %u collects",
				   ops->name, i, w.ops[i].block, (unsigned long)w.ops[i].page,
				   nr_collects);
		if (done_before == w.nr_ops)
			break;
		usleep(500);
	}
	pthread_join(th, NULL);
	for (unsigned b = 0; b < 2; b++) {
		gw_bitmap_or(&written[b], b == 0 ? &read_seen : &written[b]);
		TEST_CHECK(gw_bitmap_weight(&seen[b]) == gw_bitmap_weight(&written[b]),
			   "%s block %u: %lu reported, %lu written (or first read of a hole)", ops->name, b,
			   (unsigned long)gw_bitmap_weight(&seen[b]),
			   (unsigned long)gw_bitmap_weight(&written[b]));
	}

	/* More runs than one PAGEMAP_SCAN vector holds: every even page of block 0. */
	for (uint64_t pg = 0; pg < vm->blocks[0].size_bytes / PAGE; pg += 2) {
		((volatile uint8_t *)vm->blocks[0].host)[pg * PAGE] = 0x77;
		gw_bitmap_set(&written[0], pg);
	}
	for (unsigned b = 0; b < 2; b++)
		gw_bitmap_zero(&got[b]);
	n = ops->collect(&d, got);
	TEST_CHECK(n == (ssize_t)(vm->blocks[0].size_bytes / PAGE / 2) &&
		   gw_bitmap_weight(&got[0]) == (uint64_t)n && gw_bitmap_weight(&got[1]) == 0,
		   "%s: %zd pages reported for %lu even pages", ops->name, n,
		   (unsigned long)(vm->blocks[0].size_bytes / PAGE / 2));
	for (uint64_t pg = 0; pg < got[0].nr_bits; pg++)
		if (gw_bitmap_test(&got[0], pg) != !(pg & 1)) {
			TEST_CHECK(0, "%s: page %lu wrongly %s", ops->name, (unsigned long)pg,
				   pg & 1 ? "reported" : "missed");
			break;
		}

	/* Re-armed: quiet now; one write, exactly one page, once. */
	for (unsigned b = 0; b < 2; b++)
		gw_bitmap_zero(&got[b]);
	n = ops->collect(&d, got);
	TEST_CHECK(n == 0, "%s: %zd pages reported with no writes", ops->name, n);
	((volatile uint8_t *)vm->blocks[1].host)[5 * PAGE + 7] = 0x5a;
	n = ops->collect(&d, got);
	TEST_CHECK(n == 1 && gw_bitmap_test(&got[1], 5),
		   "%s: rewrite of block 1 page 5: %zd pages", ops->name, n);
	n = ops->collect(&d, got);
	TEST_CHECK(n == 0, "%s: %zd pages reported twice", ops->name, n);
	printf("%s: %u writes, %u collects concurrent with them\n", ops->name, w.nr_ops,
	       nr_collects);

	/* The last harvest: every third page of block 0, two of block 1, exactly; no re-arming. */
	if (ops->collect_last) {
		uint64_t want = 0;

		for (uint64_t pg = 0; pg < vm->blocks[0].size_bytes / PAGE; pg += 3, want++)
			((volatile uint8_t *)vm->blocks[0].host)[pg * PAGE + 1] = 0x3c;
		((volatile uint8_t *)vm->blocks[1].host)[9 * PAGE] = 1;
		((volatile uint8_t *)vm->blocks[1].host)[4000 * PAGE] = 1;	/* a hole until now */
		for (int k = 0; k < 2; k++) {
			for (unsigned b = 0; b < 2; b++)
				gw_bitmap_zero(&got[b]);
			n = ops->collect_last(&d, got);
			TEST_CHECK(n == (ssize_t)want + 2 && gw_bitmap_test(&got[1], 9) && gw_bitmap_test(&got[1], 4000),
				   "%s: collect_last %d reported %zd pages, want %llu", ops->name, k, n,
				   (unsigned long long)want + 2);
			for (uint64_t pg = 0; pg < got[0].nr_bits; pg++)
				if (gw_bitmap_test(&got[0], pg) != (pg % 3 == 0)) {
					TEST_CHECK(0, "%s: collect_last: page %lu wrongly %s", ops->name,
						   (unsigned long)pg, pg % 3 ? "reported" : "missed");
					break;
				}
		}
	}

	ops->stop(&d);
	TEST_CHECK(d.priv == NULL || ops->stop != NULL, "stop");
	gw_bitmap_free(&read_seen);
	for (unsigned b = 0; b < 2; b++) {
		gw_bitmap_free(&written[b]);
		gw_bitmap_free(&seen[b]);
		gw_bitmap_free(&got[b]);
	}
	free(w.ops);
	free(w.reads);
}

int main(void)
{
	struct gw_ram_block blk[2] = { 0 };
	struct gw_vm_info vm = { .size = sizeof(vm), .nr_blocks = 2, .blocks = blk, .kvm_vm_fd = -1, .nr_vcpus = 1 };
	unsigned nr_run = 0;
	int fd;

	fd = memfd_create("test-dirty", MFD_CLOEXEC);
	TEST_ASSERT(fd >= 0, "memfd_create");
	TEST_ASSERT(ftruncate(fd, MEMFD_BYTES) == 0, "ftruncate");
	strcpy(vm.blocks[0].name, "ram0");
	vm.blocks[0].host = mmap(NULL, MEMFD_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	TEST_ASSERT(vm.blocks[0].host != MAP_FAILED, "mmap memfd");
	vm.blocks[0].size_bytes = MEMFD_BYTES;
	vm.blocks[0].page_size_bytes = PAGE;
	vm.blocks[0].fd = fd;
	strcpy(vm.blocks[1].name, "ram1");
	vm.blocks[1].host = mmap(NULL, ANON_BYTES, PROT_READ | PROT_WRITE,
				 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	TEST_ASSERT(vm.blocks[1].host != MAP_FAILED, "mmap anon");
	vm.blocks[1].size_bytes = ANON_BYTES;
	vm.blocks[1].page_size_bytes = PAGE;
	vm.blocks[1].fd = -1;
	/* THP would populate 2 MiB at a time: keep the anonymous block at 4 KiB. */
	madvise(vm.blocks[1].host, ANON_BYTES, MADV_NOHUGEPAGE);
	/* First halves populated before start, second halves left as holes. */
	memset(vm.blocks[0].host, 0x11, MEMFD_BYTES / 2);
	memset(vm.blocks[1].host, 0x22, ANON_BYTES / 2);

	for (unsigned i = 0; gw_dirty_backends[i]; i++) {
		const struct gw_dirty_ops *ops = gw_dirty_backends[i];
		int ret = ops->probe(&vm);

		if (ret < 0) {
			printf("%s: probe says %d (%s): skipped\n", ops->name, ret, strerror(-ret));
			continue;
		}
		run_backend(ops, &vm);
		nr_run++;
	}
	if (!nr_run)
		test_skip("no dirty backend usable here");
	TEST_EXIT();
}
