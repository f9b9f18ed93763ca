/* SPDX-License-Identifier: MIT */
/*
 * Invariant: the postcopy push order hands out every page to push exactly
 * once, in batches of one region each, zero pages (free pages) never mixed
 * with the others; after a request for page p of a block, the next batches
 * continue right after p (locality), several streams are served in turn,
 * and a request far from every stream starts a new one; pages taken by
 * the request path are not pushed again.
 */
#include <stdint.h>
#include <string.h>
#include "postcopy/pick.h"
#include "test_util.h"

TEST_DEFINE_FAILURES;

#define REGION 128u

static unsigned mask_count(const struct gw_batch *b)
{
	unsigned n = 0;

	for (unsigned w = 0; w < GW_BATCH_MASK_WORDS; w++)
		n += (unsigned)__builtin_popcountll(b->mask[w]);
	return n;
}

static bool mask_has(const struct gw_batch *b, uint64_t page)
{
	uint64_t off = page - b->first_page;

	return page >= b->first_page && off < b->nr_pages && (b->mask[off / 64] >> (off % 64) & 1);
}

/* Every page exactly once; zero pages only in discard batches. */
static void test_all_once(void)
{
	struct gw_bitmap todo[2], zero[2], seen[2];
	uint64_t pages[2] = { 10000, 777 }, want = 0, got = 0;
	struct gw_pc_pick p;
	struct gw_batch b;

	for (unsigned i = 0; i < 2; i++) {
		TEST_ASSERT(!gw_bitmap_init(&todo[i], pages[i]) && !gw_bitmap_init(&zero[i], pages[i]) &&
			    !gw_bitmap_init(&seen[i], pages[i]), "bitmaps");
		for (uint64_t q = 0; q < pages[i]; q++) {
			if (q % 3 == 0 || q % 7 == 1) {
				gw_bitmap_set(&todo[i], q);
				want++;
			}
			if (q % 7 == 1)
				gw_bitmap_set(&zero[i], q);
		}
	}
	gw_pc_pick_init(&p, 2, todo, zero, REGION);
	TEST_CHECK(p.left_pages == want, "left %llu, want %llu", (unsigned long long)p.left_pages,
		   (unsigned long long)want);
	gw_pc_pick_hint(&p, 0, 5000);
	gw_pc_pick_hint(&p, 1, 700);
	TEST_CHECK(gw_pc_pick_take(&p, 0, 3000), "page 3000 was to push");
	TEST_CHECK(!gw_pc_pick_take(&p, 0, 3000), "taken once only");
	gw_bitmap_set(&seen[0], 3000);
	got++;
	while (gw_pc_pick_next(&p, &b)) {
		TEST_ASSERT(b.block < 2 && b.nr_pages <= REGION && b.first_page % REGION == 0, "batch shape");
		TEST_CHECK(mask_count(&b) > 0, "no empty batch");
		for (uint64_t q = b.first_page; q < b.first_page + b.nr_pages; q++) {
			if (!mask_has(&b, q))
				continue;
			TEST_CHECK(!gw_bitmap_test(&seen[b.block], q), "page %llu of block %u twice",
				   (unsigned long long)q, b.block);
			TEST_CHECK(gw_bitmap_test(&zero[b.block], q) == b.discard,
				   "page %llu: zero page in a normal batch or the reverse", (unsigned long long)q);
			gw_bitmap_set(&seen[b.block], q);
			got++;
		}
	}
	TEST_CHECK(got == want, "pushed %llu of %llu", (unsigned long long)got, (unsigned long long)want);
	TEST_CHECK(p.left_pages == 0, "nothing left");
	for (unsigned i = 0; i < 2; i++) {
		TEST_CHECK(gw_bitmap_weight(&todo[i]) == 0, "todo empty");
		gw_bitmap_free(&todo[i]);
		gw_bitmap_free(&zero[i]);
		gw_bitmap_free(&seen[i]);
	}
}

/* Locality: batches follow the requests, two streams in turn, then the sweep. */
static void test_locality(void)
{
	struct gw_bitmap todo;
	struct gw_pc_pick p;
	struct gw_batch b;

	TEST_ASSERT(!gw_bitmap_init(&todo, 100000), "bitmap");
	gw_bitmap_set_all(&todo);
	gw_pc_pick_init(&p, 1, &todo, NULL, REGION);
	TEST_CHECK(gw_pc_pick_next(&p, &b) && b.first_page == 0, "no request: the sweep from page 0");
	gw_pc_pick_hint(&p, 0, 50000);
	TEST_CHECK(gw_pc_pick_next(&p, &b) && mask_has(&b, 50001), "after a request for 50000: 50001 next");
	TEST_CHECK(gw_pc_pick_next(&p, &b) && b.first_page == 50048,
		   "then the next region, got %llu", (unsigned long long)b.first_page);
	gw_pc_pick_hint(&p, 0, 80000);	/* far away: a second stream */
	TEST_CHECK(gw_pc_pick_next(&p, &b) && b.first_page == 80000 / REGION * REGION, "second stream served");
	TEST_CHECK(gw_pc_pick_next(&p, &b) && b.first_page == 50048 + REGION,
		   "first stream again, in turn");
	TEST_CHECK(gw_pc_pick_next(&p, &b) && b.first_page == 80000 / REGION * REGION + REGION,
		   "second stream again");
	gw_pc_pick_hint(&p, 0, 50900);	/* near the first stream: moves it */
	TEST_CHECK(gw_pc_pick_next(&p, &b) && mask_has(&b, 50901), "a request near a stream moves it");
	for (unsigned i = 0; i < GW_PC_STREAMS + 2; i++)
		gw_pc_pick_hint(&p, 0, 10000ull * i + 5);	/* more requests than streams: LRU replaced */
	TEST_CHECK(gw_pc_pick_next(&p, &b), "still pages to push");
	gw_pc_pick_reset(&p);
	TEST_CHECK(p.left_pages == gw_bitmap_weight(&todo), "reset recounts what is left");
	gw_bitmap_free(&todo);
}

int main(void)
{
	test_all_once();
	test_locality();
	TEST_EXIT();
}
