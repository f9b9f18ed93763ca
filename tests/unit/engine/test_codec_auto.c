/* SPDX-License-Identifier: MIT */
/*
 * Invariant: compress=auto's rule (codec_auto.c) picks, for given estimates
 * (link cost per wire byte, each codec's cost per byte and ratio), a batch
 * number and a probe ratio, the codec the documented model says: none on a
 * fast or unknown link; lz4 then zstd for the first two slow-link batches
 * and one of them every 16th (lz4 only while it is in play: zstd behind
 * the link, or lz4's ratio better); none for an incompressible probe;
 * otherwise the cheapest of max(compress cost, ratio x link cost), none on
 * a tie, lz4 left out while it is not in play.
 * The link cost honours the bandwidth cap per channel; feedback moves the
 * estimates toward the samples. zstd's level rises to the ratio level only
 * with 1.9 times the headroom, falls back once compression takes 0.9 of
 * the wire time, and never flips between the two in between.
 */
#include <math.h>
#include <stdio.h>
#include "pipe/codec_auto.h"
#include "test_util.h"

TEST_DEFINE_FAILURES;

struct pick_case {
	const char *name;
	double link_ns;			/* per wire byte */
	double lz4_ns, lz4_ratio, zstd_ns, zstd_ratio;
	uint64_t batch_no;
	double probe;			/* < 0: none */
	enum gw_codec_id want;
	int sampled;			/* a forced sample: no probe wanted */
};

static const struct pick_case cases[] = {
	/* fast or unknown links: raw, no codec is even considered */
	{ "unknown link (first batch)", 0.0, 1.3, 0.6, 2.0, 0.5, 5, -1, GW_CODEC_NONE, 0 },
	{ "loopback 13 Gbit/s", 0.6, 1.3, 0.6, 2.0, 0.5, 5, 0.3, GW_CODEC_NONE, 0 },
	{ "link exactly lz4's cost", 1.3, 1.3, 0.6, 2.0, 0.5, 5, 0.3, GW_CODEC_NONE, 0 },
	/* sampling on a slow link */
	{ "slow, batch 0 samples lz4", 8.0, 1.3, 0.6, 2.0, 0.5, 0, -1, GW_CODEC_LZ4, 1 },
	{ "slow, batch 1 samples zstd", 8.0, 1.3, 0.6, 2.0, 0.5, 1, -1, GW_CODEC_ZSTD, 1 },
	{ "slow, batch 16 samples zstd", 8.0, 1.3, 0.99, 2.0, 0.99, 16, 0.99, GW_CODEC_ZSTD, 1 },
	{ "slow, batch 32 samples lz4 (zstd behind the link)", 8.0, 1.3, 0.99, 9.0, 0.99, 32, 0.99, GW_CODEC_LZ4, 1 },
	{ "slow, batch 32, zstd keeps up: no lz4 sample", 8.0, 1.3, 0.6, 2.0, 0.5, 32, -1, GW_CODEC_ZSTD, 0 },
	{ "slow, batch 32, lz4's ratio better: sampled", 8.0, 1.3, 0.4, 2.0, 0.5, 32, -1, GW_CODEC_LZ4, 1 },
	/* the model */
	{ "1 Gbit/s, mix data: zstd", 8.0, 1.3, 0.6, 2.0, 0.5, 5, -1, GW_CODEC_ZSTD, 0 },
	{ "2 Gbit/s: lz4 cheaper", 4.0, 1.3, 0.6, 3.0, 0.5, 5, -1, GW_CODEC_LZ4, 0 },
	{ "incompressible probe", 8.0, 1.3, 0.6, 2.0, 0.5, 5, 0.97, GW_CODEC_NONE, 0 },
	/* 2.5 ns/byte: a compressible batch is bound by CPU (lz4), a poor one by the wire (zstd) */
	{ "probe says compressible: lz4", 2.5, 1.3, 0.6, 2.0, 0.5, 5, 0.3, GW_CODEC_LZ4, 0 },
	{ "probe says poor: zstd", 2.5, 1.3, 0.6, 2.0, 0.5, 5, 0.9, GW_CODEC_ZSTD, 0 },
	/* 1 Gbit/s, 2 channels: zstd keeps up on average, so a batch that compresses well stays zstd */
	{ "zstd keeps up, probe says compressible: zstd", 16.0, 2.3, 0.66, 5.0, 0.58, 5, 0.3,
	  GW_CODEC_ZSTD, 0 },
	{ "codecs slower than the link", 3.0, 3.5, 0.5, 4.0, 0.4, 5, -1, GW_CODEC_NONE, 0 },
	{ "ratio over 1 never beats raw", 8.0, 1.3, 1.2, 2.0, 1.1, 5, -1, GW_CODEC_NONE, 0 },
	{ "very slow link, zstd's ratio wins", 80.0, 1.3, 0.6, 2.0, 0.3, 5, -1, GW_CODEC_ZSTD, 0 },
};

static void test_pick(void)
{
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const struct pick_case *c = &cases[i];
		struct gw_codec_auto a;
		enum gw_codec_id got;

		gw_codec_auto_init(&a);
		a.est[GW_CODEC_LZ4].ns_per_byte = c->lz4_ns;
		a.est[GW_CODEC_LZ4].ratio = c->lz4_ratio;
		a.est[GW_CODEC_ZSTD].ns_per_byte = c->zstd_ns;
		a.est[GW_CODEC_ZSTD].ratio = c->zstd_ratio;
		got = gw_codec_auto_pick(&a, c->link_ns, c->batch_no, c->probe);
		TEST_CHECK(got == c->want, "%s: picked %s, want %s", c->name,
			   gw_codec_name(got), gw_codec_name(c->want));
		TEST_CHECK(gw_codec_auto_wants_probe(&a, c->link_ns, c->batch_no) ==
			   (c->link_ns > c->lz4_ns && !c->sampled), "%s: wants_probe", c->name);
	}
}

static void test_link_and_feedback(void)
{
	struct gw_codec_auto a;

	gw_codec_auto_init(&a);
	TEST_CHECK(gw_codec_auto_link_cost(&a, 0, 4) == 0.0, "unknown link, no cap");
	/* 100 MB/s over 2 channels: 20 ns per byte per channel. */
	TEST_CHECK(fabs(gw_codec_auto_link_cost(&a, 100000000, 2) - 20.0) < 1e-9, "cap per channel");
	gw_codec_auto_sample_wait(&a, 8.0);
	TEST_CHECK(a.link_ns_per_byte == 8.0, "first wait sample taken as is");
	gw_codec_auto_sample_wait(&a, 3.0);
	TEST_CHECK(fabs(a.link_ns_per_byte - 7.0) < 1e-9, "smoothed 0.8/0.2: %f", a.link_ns_per_byte);
	TEST_CHECK(gw_codec_auto_link_cost(&a, 100000000, 2) == 20.0, "the cap wins when slower");
	/* An app-limited TCP sample may only make the link look faster. */
	gw_codec_auto_sample_tcp(&a, 50000000, true);	/* 20 ns/byte, slower: ignored */
	TEST_CHECK(fabs(a.link_ns_per_byte - 7.0) < 1e-9, "app-limited slower sample ignored");
	gw_codec_auto_sample_tcp(&a, 1000000000, true);	/* 1 ns/byte, faster: taken */
	TEST_CHECK(a.link_ns_per_byte < 7.0, "app-limited faster sample taken");
	gw_codec_auto_sample_codec(&a, GW_CODEC_LZ4, 10000, 1000, 300);
	TEST_CHECK(fabs(a.est[GW_CODEC_LZ4].ns_per_byte - (0.8 * 1.3 + 0.2 * 10.0)) < 1e-9, "codec cost");
	TEST_CHECK(fabs(a.est[GW_CODEC_LZ4].ratio - (0.8 * 0.6 + 0.2 * 0.3)) < 1e-9, "codec ratio");
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
	struct gw_codec_auto a;

	gw_codec_auto_init(&a);
	for (size_t i = 0; i < sizeof(tune_steps) / sizeof(tune_steps[0]); i++) {
		const struct tune_step *t = &tune_steps[i];
		int before = a.zstd_level;
		bool changed;

		a.est[GW_CODEC_ZSTD].ns_per_byte = t->zstd_ns;
		a.est[GW_CODEC_ZSTD].ratio = t->zstd_ratio;
		changed = gw_codec_auto_tune(&a, t->link_ns);
		TEST_CHECK(a.zstd_level == t->want_level, "%s: level %d, want %d", t->name, a.zstd_level,
			   t->want_level);
		TEST_CHECK(changed == (before != a.zstd_level), "%s: change not reported", t->name);
		TEST_CHECK(gw_codec_auto_level(&a, GW_CODEC_ZSTD, 3) == a.zstd_level &&
			   gw_codec_auto_level(&a, GW_CODEC_LZ4, 1) == 1, "%s: levels per codec", t->name);
	}
}

int main(void)
{
	test_pick();
	test_link_and_feedback();
	test_tune();
	TEST_EXIT();
}
