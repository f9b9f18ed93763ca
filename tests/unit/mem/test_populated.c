/* SPDX-License-Identifier: MIT */
/*
 * Invariant: gw_populated_scan() reports exactly the pages that were
 * written, at page granularity, for a memfd block (SEEK_DATA, also with a
 * non-zero fd_offset_bytes) and for an anonymous block (PAGEMAP_SCAN or
 * pagemap); a page written with zeros counts as populated, a page never
 * touched does not. A file with no hole at all (the fast path that skips
 * SEEK_HOLE) reports every page of the block.
 */
#include <stdint.h>
#include <sys/mman.h>
#include <unistd.h>
#include "mem/populated.h"
#include "test_util.h"

TEST_DEFINE_FAILURES;

#define PAGE 4096ull
#define BLOCK_BYTES (16ull << 20)
#define NR_PAGES (BLOCK_BYTES / PAGE)

static uint64_t rng_state = 12345;
static uint64_t rnd(void)
{
	uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* Write a pseudo-random set of pages (some with zeros), mark them in @want. */
static void write_pages(uint8_t *host, struct gw_bitmap *want)
{
	for (unsigned i = 0; i < 700; i++) {
		uint64_t p = rnd() % NR_PAGES;

		if (i % 3 == 0)
			memset(host + p * PAGE, 0, PAGE);
		else
			host[p * PAGE + rnd() % PAGE] = 0xab;
		gw_bitmap_set(want, p);
	}
	/* A run, and the first and last pages. */
	memset(host + 100 * PAGE, 1, 37 * PAGE);
	gw_bitmap_set_range(want, 100, 37);
	host[0] = 1;
	gw_bitmap_set(want, 0);
	host[BLOCK_BYTES - 1] = 1;
	gw_bitmap_set(want, NR_PAGES - 1);
}

static void check_block(const struct gw_ram_block *b, const struct gw_bitmap *want,
			const char *what)
{
	struct gw_bitmap got;
	const char *method = NULL;
	ssize_t n;
	unsigned bad = 0;

	TEST_ASSERT(gw_bitmap_init(&got, NR_PAGES) == 0, "bitmap");
	n = gw_populated_scan(b, &got, &method);
	TEST_ASSERT(n >= 0, "%s: scan: %zd", what, n);
	printf("%s: method %s, %zd pages populated, %lu written\n", what, method, n,
	       (unsigned long)gw_bitmap_weight(want));
	TEST_CHECK(strcmp(method, "all") != 0, "%s: fell back to all pages", what);
	TEST_CHECK((uint64_t)n == gw_bitmap_weight(want), "%s: count %zd", what, n);
	for (uint64_t p = 0; p < NR_PAGES; p++) {
		if (gw_bitmap_test(&got, p) != gw_bitmap_test(want, p) && bad++ < 5)
			TEST_CHECK(0, "%s: page %lu: populated %d, written %d", what,
				   (unsigned long)p, gw_bitmap_test(&got, p),
				   gw_bitmap_test(want, p));
	}
	TEST_CHECK(bad == 0, "%s: %u pages differ", what, bad);
	gw_bitmap_free(&got);
}

int main(void)
{
	struct gw_ram_block b = { .name = "ram0", .page_size_bytes = PAGE };
	struct gw_bitmap want;
	uint64_t off = 1ull << 20;
	uint8_t *host;
	int fd;

	TEST_ASSERT(gw_bitmap_init(&want, NR_PAGES) == 0, "bitmap");

	/* memfd block at offset 1 MiB of the file; pages before it are data too. */
	fd = memfd_create("test-populated", MFD_CLOEXEC);
	TEST_ASSERT(fd >= 0, "memfd_create");
	TEST_ASSERT(ftruncate(fd, off + BLOCK_BYTES + off) == 0, "ftruncate");
	TEST_ASSERT(pwrite(fd, "x", 1, off - 1) == 1, "pwrite before the block");
	TEST_ASSERT(pwrite(fd, "x", 1, off + BLOCK_BYTES) == 1, "pwrite after the block");
	host = mmap(NULL, BLOCK_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, fd, (off_t)off);
	TEST_ASSERT(host != MAP_FAILED, "mmap");
	b.host = host;
	b.size_bytes = BLOCK_BYTES;
	b.fd = fd;
	b.fd_offset_bytes = off;
	check_block(&b, &want, "memfd empty");
	write_pages(host, &want);
	check_block(&b, &want, "memfd");
	/* Every page of the file written: no hole left, one run. */
	for (uint64_t o = 0; o < off + BLOCK_BYTES + off; o += PAGE)
		TEST_ASSERT(pwrite(fd, "y", 1, (off_t)o) == 1, "pwrite the whole file");
	gw_bitmap_set_all(&want);
	check_block(&b, &want, "memfd without holes");
	munmap(host, BLOCK_BYTES);
	close(fd);

	/* Anonymous block, THP off so that a write populates one page. */
	gw_bitmap_zero(&want);
	host = mmap(NULL, BLOCK_BYTES, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	TEST_ASSERT(host != MAP_FAILED, "mmap anon");
	madvise(host, BLOCK_BYTES, MADV_NOHUGEPAGE);
	b.host = host;
	b.fd = -1;
	b.fd_offset_bytes = 0;
	check_block(&b, &want, "anon empty");
	write_pages(host, &want);
	check_block(&b, &want, "anon");
	munmap(host, BLOCK_BYTES);

	gw_bitmap_free(&want);
	TEST_EXIT();
}
