/* SPDX-License-Identifier: MIT */
/*
 * Invariant: the XBZRLE cache holds at most max(1, cache_bytes / page_size)
 * pages; get() returns NULL on a miss and otherwise exactly the bytes last
 * put() for that key; put() of the pointer get() returned is fine; within
 * a 2-way set the least recently used page is the one evicted.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "codec/xbzrle.h"
#include "test_util.h"

TEST_DEFINE_FAILURES;

#define PAGE	4096

static void fill_for(uint8_t *p, uint64_t key, uint32_t gen)
{
	size_t i;

	for (i = 0; i < PAGE; i += 8) {
		uint64_t v = key * 1000003u + gen + i;

		memcpy(p + i, &v, 8);
	}
}

static int holds(struct gw_xbzrle_cache *c, uint64_t key, uint32_t gen)
{
	uint8_t want[PAGE];
	uint8_t *got = gw_xbzrle_cache_get(c, key);

	if (!got)
		return 0;
	fill_for(want, key, gen);
	TEST_CHECK(memcmp(got, want, PAGE) == 0, "key %llu: wrong content",
		   (unsigned long long)key);
	return 1;
}

int main(void)
{
	struct gw_xbzrle_cache *c;
	uint8_t page[PAGE];
	uint64_t k;
	size_t found;

	errno = 0;
	TEST_CHECK(gw_xbzrle_cache_new(PAGE, 0) == NULL && errno == EINVAL, "page_size 0");
	gw_xbzrle_cache_free(NULL);

	/* Smaller than one page: one slot. */
	c = gw_xbzrle_cache_new(100, PAGE);
	TEST_ASSERT(c, "cache_new(100)");
	TEST_CHECK(gw_xbzrle_cache_get(c, 1) == NULL, "empty cache hit");
	fill_for(page, 1, 0);
	TEST_CHECK(gw_xbzrle_cache_put(c, 1, page) == 0, "put");
	TEST_CHECK(holds(c, 1, 0), "key 1 missing");
	fill_for(page, 2, 0);
	gw_xbzrle_cache_put(c, 2, page);
	TEST_CHECK(!holds(c, 1, 0) && holds(c, 2, 0), "one slot: 1 evicted by 2");
	gw_xbzrle_cache_free(c);

	/* Two slots = one 2-way set: LRU eviction. */
	c = gw_xbzrle_cache_new(2 * PAGE, PAGE);
	TEST_ASSERT(c, "cache_new(2 pages)");
	for (k = 1; k <= 2; k++) {
		fill_for(page, k, 0);
		gw_xbzrle_cache_put(c, k, page);
	}
	TEST_CHECK(holds(c, 1, 0) && holds(c, 2, 0), "both fit");
	TEST_CHECK(holds(c, 1, 0), "touch 1");
	fill_for(page, 3, 0);
	gw_xbzrle_cache_put(c, 3, page);
	TEST_CHECK(holds(c, 1, 0) && holds(c, 3, 0) && !holds(c, 2, 0), "LRU (2) evicted");
	/* Update in place through the pointer get() returned. */
	{
		uint8_t *p = gw_xbzrle_cache_get(c, 3);

		TEST_ASSERT(p, "get 3");
		fill_for(p, 3, 7);
		TEST_CHECK(gw_xbzrle_cache_put(c, 3, p) == 0, "aliased put");
		TEST_CHECK(holds(c, 3, 7) && holds(c, 1, 0), "aliased put kept content");
	}
	gw_xbzrle_cache_free(c);

	/* Many keys through 64 slots: bounded, and every hit is correct. */
	c = gw_xbzrle_cache_new(64 * PAGE + PAGE / 2, PAGE);
	TEST_ASSERT(c, "cache_new(64 pages)");
	for (k = 0; k < 10000; k++) {
		fill_for(page, k, (uint32_t)(k % 3));
		gw_xbzrle_cache_put(c, k, page);
		TEST_CHECK(holds(c, k, (uint32_t)(k % 3)), "just put %llu",
			   (unsigned long long)k);
	}
	for (found = 0, k = 0; k < 10000; k++)
		found += holds(c, k, (uint32_t)(k % 3));
	TEST_CHECK(found <= 64 && found >= 32, "%zu pages held by 64 slots", found);
	printf("64 slots hold %zu of the last keys\n", found);
	gw_xbzrle_cache_free(c);

	/* A large bound costs address space, not memory, until used. */
	c = gw_xbzrle_cache_new((size_t)8 << 30, PAGE);
	TEST_ASSERT(c, "cache_new(8 GiB)");
	fill_for(page, 5, 0);
	gw_xbzrle_cache_put(c, 5, page);
	TEST_CHECK(holds(c, 5, 0), "8 GiB cache");
	gw_xbzrle_cache_free(c);
	TEST_EXIT();
}
