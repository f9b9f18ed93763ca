/* SPDX-License-Identifier: MIT */
/*
 * Invariant: compress=auto's one decision per batch (gw_codec_auto_decide)
 * gives, for given estimates (link cost per wire byte, each codec's cost
 * per byte and ratio), the sampling clock and the batch's pages, the codec
 * the documented model says: none on a fast or unknown link; lz4 then zstd
 * for the first two slow-link batches with data and one of them every
 * 16th (lz4 only while it is in play: zstd behind the link, or lz4's ratio
 * better); otherwise a probe (lz4 over data pages spread over the batch,
 * zero pages passed over; none for batches under 16 pages), none for an
 * incompressible probe, else the cheapest of max(compress cost, ratio x
 * link cost) with the ratios scaled by the probe, none on a tie, lz4 left
 * out while it is not in play. The choice names why, and the level (zstd's
 * own, lz4's default). Feeding a batch back moves the sampling clock only
 * when it had data on a slow link, and the estimates toward the
 * compression's sample. The link's cost honours the bandwidth cap per
 * channel and moves toward the sends fed (TCP rate, app-limited ones only
 * when faster; else the wait per byte; small sends not at all). zstd's
 * level rises to the ratio level only with 1.9 times the headroom, falls
 * back once compression takes 0.9 of the wire time, and never flips
 * between the two in between.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "codec/codec.h"
#include "pipe/codec_auto.h"
#include "test_util.h"

TEST_DEFINE_FAILURES;

#define PAGE 4096
#define BATCH_PAGES 32

/* What the batch's pages hold. */
enum content {
	SMALL,			/* 8 text pages: under the probe's minimum, never probed */
	TEXT,			/* compressible (lz4 ~0.05) */
	POOR,			/* 3600 random bytes and zeros a page (lz4 ~0.89), the even pages (each slice's first) all zero */
	RANDOM,			/* incompressible */
	ZEROS,			/* all zero: the probe finds no data page */
	HALF,			/* the first 28 pages zero, then 4 random ones: the probe takes all 4 */
};

static uint8_t pages[BATCH_PAGES * PAGE];

static const uint8_t *page_at(const void *arg, uint32_t i)
{
	(void)arg;
	return i < BATCH_PAGES ? pages + (size_t)i * PAGE : NULL;
}

/* Fill the batch with @c; the input for it at @link_ns. */
static struct gw_auto_input batch(enum content c, double link_ns)
{
	uint64_t x = 0x9e3779b97f4a7c15ull;

	memset(pages, 0, sizeof(pages));
	for (size_t i = 0; i < sizeof(pages); i++) {
		size_t in_page = i % PAGE, page = i / PAGE;

		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		if (c == TEXT || c == SMALL)
			pages[i] = (uint8_t)"the quick brown fox jumps over the lazy dog "[(i / 3) % 44];
		else if (c == RANDOM || (c == POOR && page % 2 == 1 && in_page < 3600) || (c == HALF && page >= 28))
			pages[i] = (uint8_t)x;
	}
	return (struct gw_auto_input){ .link_ns_per_byte = link_ns, .nr_pages = c == SMALL ? 8 : BATCH_PAGES,
				       .page = page_at };
}

struct pick_case {
	const char *name;
	double link_ns;			/* per wire byte */
	double lz4_ns, lz4_ratio, zstd_ns, zstd_ratio;
	uint64_t batch_no;		/* the sampling clock: slow-link batches with data so far */
	enum content content;
	enum gw_codec_id want;
	enum gw_auto_why why;
};

static const struct pick_case cases[] = {
	/* fast or unknown links: raw, no codec is even considered */
	{ "unknown link (first batch)", 0.0, 1.3, 0.6, 2.0, 0.5, 5, TEXT, GW_CODEC_NONE, GW_AUTO_FAST_LINK },
	{ "loopback 13 Gbit/s", 0.6, 1.3, 0.6, 2.0, 0.5, 5, TEXT, GW_CODEC_NONE, GW_AUTO_FAST_LINK },
	{ "link exactly lz4's cost", 1.3, 1.3, 0.6, 2.0, 0.5, 5, TEXT, GW_CODEC_NONE, GW_AUTO_FAST_LINK },
	/* sampling on a slow link: whatever the pages */
	{ "slow, batch 0 samples lz4", 8.0, 1.3, 0.6, 2.0, 0.5, 0, RANDOM, GW_CODEC_LZ4, GW_AUTO_SAMPLE },
	{ "slow, batch 1 samples zstd", 8.0, 1.3, 0.6, 2.0, 0.5, 1, RANDOM, GW_CODEC_ZSTD, GW_AUTO_SAMPLE },
	{ "slow, batch 16 samples zstd", 8.0, 1.3, 0.99, 2.0, 0.99, 16, RANDOM, GW_CODEC_ZSTD, GW_AUTO_SAMPLE },
	{ "slow, batch 32 samples lz4 (zstd behind the link)", 8.0, 1.3, 0.99, 9.0, 0.99, 32, RANDOM, GW_CODEC_LZ4,
	  GW_AUTO_SAMPLE },
	{ "slow, batch 32, zstd keeps up: no lz4 sample", 8.0, 1.3, 0.6, 2.0, 0.5, 32, SMALL, GW_CODEC_ZSTD,
	  GW_AUTO_MODEL },
	{ "slow, batch 32, lz4's ratio better: sampled", 8.0, 1.3, 0.4, 2.0, 0.5, 32, SMALL, GW_CODEC_LZ4,
	  GW_AUTO_SAMPLE },
	/* the model, no probe (a small batch) */
	{ "1 Gbit/s, mix data: zstd", 8.0, 1.3, 0.6, 2.0, 0.5, 5, SMALL, GW_CODEC_ZSTD, GW_AUTO_MODEL },
	{ "2 Gbit/s: lz4 cheaper", 4.0, 1.3, 0.6, 3.0, 0.5, 5, SMALL, GW_CODEC_LZ4, GW_AUTO_MODEL },
	{ "codecs slower than the link", 3.0, 3.5, 0.5, 4.0, 0.4, 5, SMALL, GW_CODEC_NONE, GW_AUTO_FAST_LINK },
	{ "ratio over 1 never beats raw", 8.0, 1.3, 1.2, 2.0, 1.1, 5, SMALL, GW_CODEC_NONE, GW_AUTO_MODEL },
	{ "very slow link, zstd's ratio wins", 80.0, 1.3, 0.6, 2.0, 0.3, 5, SMALL, GW_CODEC_ZSTD, GW_AUTO_MODEL },
	/* the probe */
	{ "incompressible probe", 8.0, 1.3, 0.6, 2.0, 0.5, 5, RANDOM, GW_CODEC_NONE, GW_AUTO_PROBE_RAW },
	/* 2.5 ns/byte: a compressible batch is bound by CPU (lz4), a poor one by the wire (zstd) */
	{ "probe says compressible: lz4", 2.5, 1.3, 0.6, 2.0, 0.5, 5, TEXT, GW_CODEC_LZ4, GW_AUTO_MODEL },
	{ "probe says poor (zero pages passed over): zstd", 2.5, 1.3, 0.6, 2.0, 0.5, 5, POOR, GW_CODEC_ZSTD,
	  GW_AUTO_MODEL },
	{ "all zero: no probe, the model", 2.5, 1.3, 0.6, 2.0, 0.5, 5, ZEROS, GW_CODEC_LZ4, GW_AUTO_MODEL },
	{ "data only at the end: probed there, incompressible", 8.0, 1.3, 0.6, 2.0, 0.5, 5, HALF, GW_CODEC_NONE,
	  GW_AUTO_PROBE_RAW },
	/* 1 Gbit/s, 2 channels: zstd keeps up on average, so a batch that compresses well stays zstd */
	{ "zstd keeps up, probe says compressible: zstd", 16.0, 2.3, 0.66, 5.0, 0.58, 5, TEXT,
	  GW_CODEC_ZSTD, GW_AUTO_MODEL },
};

static void set_estimates(struct gw_codec_auto *a, double lz4_ns, double lz4_ratio, double zstd_ns,
			  double zstd_ratio)
{
	a->est[GW_CODEC_LZ4].ns_per_byte = lz4_ns;
	a->est[GW_CODEC_LZ4].ratio = lz4_ratio;
	a->est[GW_CODEC_ZSTD].ns_per_byte = zstd_ns;
	a->est[GW_CODEC_ZSTD].ratio = zstd_ratio;
}

static void test_decide(void)
{
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const struct pick_case *c = &cases[i];
		struct gw_auto_input in = batch(c->content, c->link_ns);
		bool probed_ok;
		struct gw_codec_auto a;
		struct gw_auto_choice got;

		gw_codec_auto_init(&a);
		set_estimates(&a, c->lz4_ns, c->lz4_ratio, c->zstd_ns, c->zstd_ratio);
		a.slow_batches = c->batch_no;
		got = gw_codec_auto_decide(&a, &in);
		TEST_CHECK(got.codec == c->want && got.why == c->why, "%s: picked %s (why %d), want %s (why %d)",
			   c->name, gw_codec_name(got.codec), got.why, gw_codec_name(c->want), c->why);
		TEST_CHECK(got.slow == (c->why != GW_AUTO_FAST_LINK), "%s: slow", c->name);
		/* A probe exactly where the rule looks at one, and it says what the pages are. */
		probed_ok = got.why == GW_AUTO_FAST_LINK || got.why == GW_AUTO_SAMPLE || c->content == SMALL ||
			    c->content == ZEROS ? got.probe_ratio < 0 :
			    c->content == TEXT ? got.probe_ratio >= 0 && got.probe_ratio < 0.2 :
			    c->content == POOR ? got.probe_ratio > 0.8 && got.probe_ratio <= 0.95 :
			    got.probe_ratio > 0.95;
		TEST_CHECK(probed_ok, "%s: probe ratio %.3f", c->name, got.probe_ratio);
		TEST_CHECK(got.codec != GW_CODEC_ZSTD || got.level == a.zstd_level, "%s: zstd's level", c->name);
		TEST_CHECK(got.codec != GW_CODEC_LZ4 || got.level == gw_codec_get(GW_CODEC_LZ4)->default_level,
			   "%s: lz4's level %d", c->name, got.level);
		gw_codec_auto_release(&a);
	}
}

/* The sampling clock counts slow-link batches that had data; feedback moves the estimates. */
static void test_feed(void)
{
	struct gw_auto_input in = batch(RANDOM, 8.0);
	struct gw_auto_result data = { .raw_bytes = 100000, .out_bytes = 30000, .compress_ns = 1000000 };
	struct gw_auto_result empty = { 0 };
	struct gw_codec_auto a;
	struct gw_auto_choice c;

	gw_codec_auto_init(&a);
	c = gw_codec_auto_decide(&a, &in);
	TEST_CHECK(c.codec == GW_CODEC_LZ4 && c.why == GW_AUTO_SAMPLE, "first slow batch samples lz4");
	gw_codec_auto_feed(&a, &c, &empty);
	TEST_CHECK(a.slow_batches == 0 && a.est[GW_CODEC_LZ4].ns_per_byte == 1.3, "an all-zero batch does not count");
	c = gw_codec_auto_decide(&a, &in);
	TEST_CHECK(c.codec == GW_CODEC_LZ4, "the sample stays due");
	gw_codec_auto_feed(&a, &c, &data);
	TEST_CHECK(a.slow_batches == 1, "a batch with data counts");
	TEST_CHECK(fabs(a.est[GW_CODEC_LZ4].ns_per_byte - (0.8 * 1.3 + 0.2 * 10.0)) < 1e-9, "codec cost");
	TEST_CHECK(fabs(a.est[GW_CODEC_LZ4].ratio - (0.8 * 0.6 + 0.2 * 0.3)) < 1e-9, "codec ratio");
	c = gw_codec_auto_decide(&a, &in);
	TEST_CHECK(c.codec == GW_CODEC_ZSTD && c.why == GW_AUTO_SAMPLE, "then zstd");
	gw_codec_auto_feed(&a, &c, &data);
	c = gw_codec_auto_decide(&a, &in);
	TEST_CHECK(c.why == GW_AUTO_PROBE_RAW && c.codec == GW_CODEC_NONE, "then the probe: random is raw");
	gw_codec_auto_feed(&a, &c, &data);
	TEST_CHECK(a.slow_batches == 3, "raw batches count too");
	in.link_ns_per_byte = 0.5;
	c = gw_codec_auto_decide(&a, &in);
	gw_codec_auto_feed(&a, &c, &data);
	TEST_CHECK(c.why == GW_AUTO_FAST_LINK && a.slow_batches == 3, "fast-link batches do not");
	gw_codec_auto_release(&a);
	gw_codec_auto_release(&a);	/* twice is fine */
}

static void test_link(void)
{
	struct gw_link_sample big = { .data_bytes = 1 << 20, .nr_channels = 2 }, small = big;
	struct gw_codec_auto a;

	gw_codec_auto_init(&a);
	TEST_CHECK(gw_codec_auto_link_cost(&a, 0, 4) == 0.0, "unknown link, no cap");
	/* 100 MB/s over 2 channels: 20 ns per byte per channel. */
	TEST_CHECK(fabs(gw_codec_auto_link_cost(&a, 100000000, 2) - 20.0) < 1e-9, "cap per channel");
	small.data_bytes = GW_AUTO_LINK_SAMPLE_MIN_BYTES - 1;
	small.send_ns = 100 * small.data_bytes;
	TEST_CHECK(gw_codec_auto_link_sample(&a, &small) == 0.0, "a small send says nothing");
	big.send_ns = 8 * big.data_bytes;
	TEST_CHECK(gw_codec_auto_link_sample(&a, &big) == 8.0, "first wait sample taken as is");
	big.send_ns = 3 * big.data_bytes;
	TEST_CHECK(fabs(gw_codec_auto_link_sample(&a, &big) - 7.0) < 1e-9, "smoothed 0.8/0.2: %f",
		   a.link_ns_per_byte);
	big.cap_bps = 100000000;
	big.data_bytes = 0;
	TEST_CHECK(gw_codec_auto_link_sample(&a, &big) == 20.0, "the cap wins when slower");
	/* An app-limited TCP sample may only make the link look faster. */
	big = (struct gw_link_sample){ .data_bytes = 1 << 20, .nr_channels = 2, .tcp = true,
				       .tcp_rate_bps = 50000000, .tcp_app_limited = true };	/* 20 ns/byte */
	TEST_CHECK(fabs(gw_codec_auto_link_sample(&a, &big) - 7.0) < 1e-9, "app-limited slower sample ignored");
	big.tcp_rate_bps = 1000000000;	/* 1 ns/byte, faster: taken */
	TEST_CHECK(gw_codec_auto_link_sample(&a, &big) < 7.0, "app-limited faster sample taken");
	big.tcp_rate_bps = 50000000;
	big.tcp_app_limited = false;
	TEST_CHECK(gw_codec_auto_link_sample(&a, &big) > 7.0, "a rate not app-limited is taken");
}

struct tune_step {
	const char *name;
	double link_ns, zstd_ns, zstd_ratio;
	int want_level;
};

/* One auto, driven through these estimates in order. */
static const struct tune_step tune_steps[] = {
	{ "starts at the fast level", 0.0, 2.0, 0.5, GW_AUTO_ZSTD_LEVEL_FAST },
	{ "10 Gbit/s link: no headroom", 1.6, 2.0, 0.58, GW_AUTO_ZSTD_LEVEL_FAST },
	{ "1 Gbit/s, 2 channels: 9.3 ns wire, 2 ns cost", 16.0, 2.0, 0.58, GW_AUTO_ZSTD_LEVEL_RATIO },
	{ "ratio level costs 3 ns: stays", 16.0, 3.0, 0.58, GW_AUTO_ZSTD_LEVEL_RATIO },
	{ "ratio level at 8 ns, under 0.9 of 9.3: stays", 16.0, 8.0, 0.58, GW_AUTO_ZSTD_LEVEL_RATIO },
	{ "busy CPU: 8.5 ns, over 0.9 of 9.3", 16.0, 8.5, 0.58, GW_AUTO_ZSTD_LEVEL_FAST },
	{ "fast level at 5 ns: not 1.9x under 9.3, stays", 16.0, 5.0, 0.58, GW_AUTO_ZSTD_LEVEL_FAST },
	{ "headroom again", 16.0, 2.5, 0.58, GW_AUTO_ZSTD_LEVEL_RATIO },
};

static void test_tune(void)
{
	struct gw_auto_input in = batch(SMALL, 0);
	struct gw_codec_auto a;

	gw_codec_auto_init(&a);
	a.slow_batches = 5;	/* no sample due: the model picks */
	for (size_t i = 0; i < sizeof(tune_steps) / sizeof(tune_steps[0]); i++) {
		const struct tune_step *t = &tune_steps[i];
		int before = a.zstd_level;
		struct gw_auto_choice c;

		a.est[GW_CODEC_ZSTD].ns_per_byte = t->zstd_ns;
		a.est[GW_CODEC_ZSTD].ratio = t->zstd_ratio;
		in.link_ns_per_byte = t->link_ns;
		c = gw_codec_auto_decide(&a, &in);
		TEST_CHECK(a.zstd_level == t->want_level, "%s: level %d, want %d", t->name, a.zstd_level,
			   t->want_level);
		TEST_CHECK(c.level_changed == (before != a.zstd_level), "%s: change not reported", t->name);
		TEST_CHECK(c.codec != GW_CODEC_ZSTD || c.level == a.zstd_level, "%s: the choice's level", t->name);
	}
	gw_codec_auto_release(&a);
}

int main(void)
{
	test_decide();
	test_feed();
	test_link();
	test_tune();
	TEST_EXIT();
}
