/* SPDX-License-Identifier: MIT */
/*
 * Invariant: gw_ram_digest() depends only on the RAM bytes and layout:
 * equal for 1, 2 and 3 threads; equal for a populated all-zero block and a
 * never-touched one, and for memfd vs anonymous memory with the same bytes;
 * different after flipping any single byte (first, last, inside a hole,
 * across chunk and group boundaries); different for a different layout
 * (block split, renamed, resized) even when the bytes are the same.
 */
#include <stdbool.h>
#include <stdint.h>
#include <time.h>
#include <sys/mman.h>
#include <unistd.h>
#include "mem/digest.h"
#include "test_util.h"

TEST_DEFINE_FAILURES;

#define PAGE 4096ull
/* Three 64 MiB groups, the last one partial with a partial final chunk. */
#define BIG_BYTES ((128ull << 20) + (3ull << 20) + 3 * PAGE)

static uint64_t rng_state = 777;
static uint64_t rnd(void)
{
	uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static void add_block(struct gw_vm_info *vm, const char *name, uint64_t bytes, bool memfd)
{
	struct gw_ram_block *b = &vm->blocks[vm->nr_blocks++];
	int fd = -1;

	memset(b, 0, sizeof(*b));
	snprintf(b->name, sizeof(b->name), "%s", name);
	if (memfd) {
		fd = memfd_create(name, MFD_CLOEXEC);
		TEST_ASSERT(fd >= 0, "memfd_create");
		TEST_ASSERT(ftruncate(fd, (off_t)bytes) == 0, "ftruncate");
		b->host = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	} else {
		b->host = mmap(NULL, bytes, PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	}
	TEST_ASSERT(b->host != MAP_FAILED, "mmap");
	b->size_bytes = bytes;
	b->page_size_bytes = PAGE;
	b->fd = fd;
}

static void free_vm(struct gw_vm_info *vm)
{
	for (unsigned i = 0; i < vm->nr_blocks; i++) {
		munmap(vm->blocks[i].host, vm->blocks[i].size_bytes);
		if (vm->blocks[i].fd >= 0)
			close(vm->blocks[i].fd);
	}
	vm->nr_blocks = 0;
}

static struct gw_digest digest(const struct gw_vm_info *vm, unsigned threads)
{
	struct gw_digest d;
	int ret = gw_ram_digest(vm, threads, &d);

	TEST_ASSERT(ret == 0, "gw_ram_digest: %d", ret);
	return d;
}

static bool same(struct gw_digest a, struct gw_digest b)
{
	return a.lo == b.lo && a.hi == b.hi;
}

/* Random data in some regions, zero-written pages in others, holes elsewhere. */
static void fill_pattern(uint8_t *p, uint64_t bytes)
{
	for (uint64_t off = 0; off < bytes; off += 1ull << 20) {
		uint64_t kind = (off >> 20) % 4;
		uint64_t len = bytes - off < (1ull << 20) ? bytes - off : (1ull << 20);

		if (kind == 0) {
			for (uint64_t i = 0; i < len; i += 8)
				*(uint64_t *)(p + off + i) = rnd();
		} else if (kind == 1) {
			memset(p + off, 0, len);	/* populated zeros */
		} else if (kind == 2) {
			p[off + len / 2] = 0x42;	/* one page of data */
		}					/* kind 3: hole */
	}
}

int main(void)
{
	static struct gw_ram_block ablk[GW_MAX_RAM_BLOCKS], bblk[GW_MAX_RAM_BLOCKS];
	struct gw_vm_info a = { .size = sizeof(a), .blocks = ablk, .kvm_vm_fd = -1 },
			  b = { .size = sizeof(b), .blocks = bblk, .kvm_vm_fd = -1 };
	struct gw_digest d1, d2, d3, dz, dh, d;
	static const uint64_t flips[] = {
		0, BIG_BYTES - 1, (3ull << 20) + 12345 /* hole */,
		(256ull << 10) - 1, 256ull << 10, (64ull << 20) - 1, 64ull << 20,
		(128ull << 20) + (3ull << 20) + 1,
	};
	uint8_t *host;
	uint64_t t0;

	/* 1, 2, 3 threads. */
	add_block(&a, "ram0", BIG_BYTES, true);
	host = a.blocks[0].host;
	fill_pattern(host, BIG_BYTES);
	d1 = digest(&a, 1);
	d2 = digest(&a, 2);
	d3 = digest(&a, 3);
	TEST_CHECK(same(d1, d2) && same(d1, d3), "thread count changes the digest");

	/* The same bytes in anonymous memory give the same digest. */
	add_block(&b, "ram0", BIG_BYTES, false);
	memcpy(b.blocks[0].host, host, BIG_BYTES);
	TEST_CHECK(same(digest(&b, 2), d1), "memfd vs anonymous");
	free_vm(&b);

	/* A single flipped byte anywhere changes it; restoring restores it. */
	for (unsigned i = 0; i < sizeof(flips) / sizeof(flips[0]); i++) {
		uint8_t old = host[flips[i]];

		host[flips[i]] ^= 0x01;
		d = digest(&a, 2);
		TEST_CHECK(!same(d, d1), "flip at %lu not seen", (unsigned long)flips[i]);
		host[flips[i]] = old;
		TEST_CHECK(same(digest(&a, 1), d1), "restore at %lu", (unsigned long)flips[i]);
	}
	free_vm(&a);

	/* Populated zeros == hole (memfd and anonymous), and fast on holes. */
	add_block(&a, "ram0", BIG_BYTES, true);
	t0 = (uint64_t)clock();
	dh = digest(&a, 1);
	printf("hole digest of %lu MiB: %.1f ms CPU\n", (unsigned long)(BIG_BYTES >> 20),
	       (double)((uint64_t)clock() - t0) * 1e3 / CLOCKS_PER_SEC);
	memset(a.blocks[0].host, 0, BIG_BYTES);
	dz = digest(&a, 2);
	TEST_CHECK(same(dh, dz), "populated zero differs from hole");
	add_block(&b, "ram0", BIG_BYTES, false);
	TEST_CHECK(same(digest(&b, 1), dh), "anonymous hole differs from memfd hole");
	free_vm(&b);
	free_vm(&a);

	/* Layouts: same bytes, one 2 MiB block vs two 1 MiB blocks, names, sizes. */
	add_block(&a, "ram0", 2ull << 20, true);
	memset(a.blocks[0].host, 0x33, 2ull << 20);
	add_block(&b, "ram0", 1ull << 20, true);
	add_block(&b, "ram1", 1ull << 20, true);
	memset(b.blocks[0].host, 0x33, 1ull << 20);
	memset(b.blocks[1].host, 0x33, 1ull << 20);
	TEST_CHECK(!same(digest(&a, 1), digest(&b, 1)), "split layout not seen");
	snprintf(a.blocks[0].name, sizeof(a.blocks[0].name), "ramX");
	d = digest(&a, 1);
	snprintf(a.blocks[0].name, sizeof(a.blocks[0].name), "ram0");
	TEST_CHECK(!same(digest(&a, 1), d), "block name not seen");
	free_vm(&a);
	free_vm(&b);
	add_block(&a, "ram0", 2ull << 20, true);
	add_block(&b, "ram0", 4ull << 20, true);
	TEST_CHECK(!same(digest(&a, 1), digest(&b, 1)), "empty blocks of different sizes");
	free_vm(&a);
	free_vm(&b);
	TEST_EXIT();
}
