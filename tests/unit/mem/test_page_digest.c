/* SPDX-License-Identifier: MIT */
/*
 * Invariant: the postcopy page digest is a function of the RAM bytes only:
 * the same whatever the order pages are added in and however they are
 * split among accumulators; equal to gw_page_digest_ram over the same RAM
 * (memfd or anonymous, 1 or 3 threads, holes or zero pages alike); pages
 * counted as zero drop out; a changed byte, a page moved to another index
 * or another block, or a page added twice changes it.
 */
#include <stdbool.h>
#include <stdint.h>
#include <sys/mman.h>
#include <unistd.h>
#include "mem/page_digest.h"
#include "test_util.h"

TEST_DEFINE_FAILURES;

#define PAGE 4096u
#define NR_PAGES 1000u

static bool eq(const struct gw_page_digest *a, const struct gw_page_digest *b)
{
	return a->lo == b->lo && a->hi == b->hi;
}

static uint8_t *ram_memfd(int *fd)
{
	uint8_t *p;

	*fd = memfd_create("page-digest", MFD_CLOEXEC);
	TEST_ASSERT(*fd >= 0 && ftruncate(*fd, (off_t)NR_PAGES * PAGE) == 0, "memfd");
	p = mmap(NULL, (size_t)NR_PAGES * PAGE, PROT_READ | PROT_WRITE, MAP_SHARED, *fd, 0);
	TEST_ASSERT(p != MAP_FAILED, "mmap");
	return p;
}

int main(void)
{
	struct gw_ram_block blk = { 0 };
	struct gw_vm_info vm = { .size = sizeof(vm), .nr_blocks = 1, .blocks = &blk, .kvm_vm_fd = -1 };
	struct gw_page_digest fwd = { 0 }, back = { 0 }, part[3] = { { 0 } }, whole = { 0 }, d;
	struct gw_bitmap as_zero;
	uint8_t *anon, *mem;
	int fd;

	mem = ram_memfd(&fd);
	anon = mmap(NULL, (size_t)NR_PAGES * PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	TEST_ASSERT(anon != MAP_FAILED, "mmap");
	/* Every third page holds data; page 500 is written with zeros (populated, zero). */
	for (unsigned p = 0; p < NR_PAGES; p += 3)
		for (unsigned k = 0; k < PAGE; k++)
			mem[(size_t)p * PAGE + k] = anon[(size_t)p * PAGE + k] = (uint8_t)(p * 7 + k + 1);
	memset(mem + 500ull * PAGE, 0, PAGE);
	memset(anon + 500ull * PAGE, 0, PAGE);

	for (unsigned p = 0; p < NR_PAGES; p++) {
		gw_page_digest_add(&fwd, 0, p, mem + (size_t)p * PAGE);
		gw_page_digest_add(&back, 0, NR_PAGES - 1 - p, mem + (size_t)(NR_PAGES - 1 - p) * PAGE);
		gw_page_digest_add(&part[p % 3], 0, p, mem + (size_t)p * PAGE);
	}
	for (unsigned i = 0; i < 3; i++)
		gw_page_digest_merge(&whole, &part[i]);
	TEST_CHECK(eq(&fwd, &back), "order of pages does not matter");
	TEST_CHECK(eq(&fwd, &whole), "split among accumulators and merged: the same");

	snprintf(vm.blocks[0].name, sizeof(vm.blocks[0].name), "ram0");
	vm.blocks[0].size_bytes = (uint64_t)NR_PAGES * PAGE;
	vm.blocks[0].page_size_bytes = PAGE;
	for (unsigned threads = 1; threads <= 3; threads += 2) {
		vm.blocks[0].host = mem;
		vm.blocks[0].fd = fd;
		TEST_ASSERT(gw_page_digest_ram(&vm, threads, NULL, &d) == 0, "digest memfd");
		TEST_CHECK(eq(&d, &fwd), "memfd RAM, %u threads: equal to the page sum", threads);
		vm.blocks[0].host = anon;
		vm.blocks[0].fd = -1;
		TEST_ASSERT(gw_page_digest_ram(&vm, threads, NULL, &d) == 0, "digest anonymous");
		TEST_CHECK(eq(&d, &fwd), "anonymous RAM, %u threads: equal", threads);
	}

	/* Pages counted as zero drop out. */
	TEST_ASSERT(gw_bitmap_init(&as_zero, NR_PAGES) == 0, "bitmap");
	gw_bitmap_set(&as_zero, 3);
	gw_bitmap_set(&as_zero, 4);	/* a zero page anyway */
	vm.blocks[0].host = mem;
	vm.blocks[0].fd = fd;
	TEST_ASSERT(gw_page_digest_ram(&vm, 2, &as_zero, &d) == 0, "digest except");
	fwd = (struct gw_page_digest){ 0 };
	for (unsigned p = 0; p < NR_PAGES; p++)
		if (p != 3)
			gw_page_digest_add(&fwd, 0, p, mem + (size_t)p * PAGE);
	TEST_CHECK(eq(&d, &fwd), "pages counted as zero drop out");

	/* Changes that must show. */
	whole = (struct gw_page_digest){ 0 };
	gw_page_digest_add(&whole, 0, 6, mem + 6ull * PAGE);
	d = (struct gw_page_digest){ 0 };
	gw_page_digest_add(&d, 0, 7, mem + 6ull * PAGE);
	TEST_CHECK(!eq(&d, &whole), "the same page at another index differs");
	d = (struct gw_page_digest){ 0 };
	gw_page_digest_add(&d, 1, 6, mem + 6ull * PAGE);
	TEST_CHECK(!eq(&d, &whole), "the same page in another block differs");
	d = whole;
	gw_page_digest_add(&d, 0, 6, mem + 6ull * PAGE);
	TEST_CHECK(!eq(&d, &whole), "a page added twice differs");
	mem[6ull * PAGE + 4095] ^= 1;
	d = (struct gw_page_digest){ 0 };
	gw_page_digest_add(&d, 0, 6, mem + 6ull * PAGE);
	TEST_CHECK(!eq(&d, &whole), "one bit flipped differs");
	gw_bitmap_free(&as_zero);
	TEST_EXIT();
}
