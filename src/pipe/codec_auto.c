/* SPDX-License-Identifier: MIT */
/*
 * compress=auto (see codec_auto.h). Arithmetic on estimates, and the probe
 * (lz4 over a few of the batch's pages): no I/O, no clock.
 */
#include <stdlib.h>
#include <string.h>
#include "codec/codec.h"
#include "mem/zero.h"
#include "pipe/codec_auto.h"

#define PAGE 4096
#define PROBE_OUT_BYTES (GW_AUTO_PROBE_BYTES + 1024)	/* >= lz4's bound of a probe */

#define SAMPLE_EVERY 16			/* slow-link batches between forced samples */

static const enum gw_codec_id candidates[] = { GW_CODEC_LZ4, GW_CODEC_ZSTD };
#define NR_CANDIDATES (sizeof(candidates) / sizeof(candidates[0]))

/*
 * The ratio level costs 1.2-1.6x the fast one: going up at 1.9x leaves it
 * at most 0.84 of the wire time, under the 0.9 that brings it back down
 * (compressing a batch overlaps sending the one before, so up to the whole
 * wire time is hidden). At 3.0 and 0.7 the 1 Gbit/s benchmark, 2 channels
 * on these 2 cores (level 1 at 5 ns/byte against 9.5 of wire), never left
 * level 1: auto 1.70 and 4.02 s, fixed zstd (level 1) 1.71 and 4.01 s; at
 * 1.9 and 0.9 auto ran mostly at level 3: 1.74-1.82 and 3.76-3.93 s.
 */
#define TUNE_UP_HEADROOM 1.9		/* fast-level cost x this under the wire time: ratio level */
#define TUNE_DOWN_SHARE 0.9		/* cost over this share of the wire time: fast level */

/*
 * zstd's level for the coming batches, from the estimates: the ratio level
 * while compressing at the fast level costs under 1/1.9 of the time the
 * link takes for its output (the ratio level's cost then stays under 0.84
 * of it), back to the fast level once compressing costs more than 0.9 of
 * it. On a busy machine the fast level keeps zstd from becoming the
 * bottleneck, which made auto choose lz4 and lose ratio. True when the
 * level changed (the estimates adapt from the next sample).
 */
static bool tune(struct gw_codec_auto *a, double link_ns_per_byte)
{
	double wire_ns = a->est[GW_CODEC_ZSTD].ratio * link_ns_per_byte, cost = a->est[GW_CODEC_ZSTD].ns_per_byte;
	int want = a->zstd_level;

	if (a->zstd_level == GW_AUTO_ZSTD_LEVEL_FAST && cost * TUNE_UP_HEADROOM < wire_ns)
		want = GW_AUTO_ZSTD_LEVEL_RATIO;
	else if (a->zstd_level == GW_AUTO_ZSTD_LEVEL_RATIO && cost > TUNE_DOWN_SHARE * wire_ns)
		want = GW_AUTO_ZSTD_LEVEL_FAST;
	if (want == a->zstd_level)
		return false;
	a->zstd_level = want;
	return true;
}

void gw_codec_auto_init(struct gw_codec_auto *a)
{
	*a = (struct gw_codec_auto){ 0 };
	a->est[GW_CODEC_LZ4].ns_per_byte = 1.3;
	a->est[GW_CODEC_LZ4].ratio = 0.6;
	a->est[GW_CODEC_ZSTD].ns_per_byte = 2.0;
	a->est[GW_CODEC_ZSTD].ratio = 0.5;
	a->zstd_level = GW_AUTO_ZSTD_LEVEL_FAST;
}

void gw_codec_auto_release(struct gw_codec_auto *a)
{
	const struct gw_codec_ops *lz4 = gw_codec_get(GW_CODEC_LZ4);

	if (a->probe_ctx && lz4)
		lz4->ctx_free(a->probe_ctx);
	free(a->probe_buf);
	a->probe_ctx = NULL;
	a->probe_buf = NULL;
}

double gw_codec_auto_link_cost(const struct gw_codec_auto *a, int64_t cap_bps, unsigned nr_channels)
{
	double link = a->link_ns_per_byte;

	if (cap_bps > 0 && 1e9 * nr_channels / (double)cap_bps > link)
		link = 1e9 * nr_channels / (double)cap_bps;
	return link;
}

/* A slow link: codecs may pay (cost above lz4's compression cost). */
static bool link_is_slow(const struct gw_codec_auto *a, double link_ns_per_byte)
{
	return link_ns_per_byte > a->est[GW_CODEC_LZ4].ns_per_byte;
}

/*
 * Whether lz4 is in play: not while zstd, on the estimates of recent
 * batches, compresses faster than the link sends its output and lz4's
 * ratio is no better. The link is then the bottleneck and compressing a
 * batch overlaps sending the one before, so zstd's time on a batch that
 * compresses well (whose own wire time is short) is hidden by the others:
 * lz4 for it, or a forced lz4 sample, only loses ratio (1 batch in 17 on
 * the mix benchmark over 1 Gbit/s, 2 channels: auto 1.8% slower than zstd).
 */
static bool lz4_in_play(const struct gw_codec_auto *a, double link_ns_per_byte)
{
	const struct gw_codec_estimate *z = &a->est[GW_CODEC_ZSTD], *l = &a->est[GW_CODEC_LZ4];

	return z->ns_per_byte >= z->ratio * link_ns_per_byte || l->ratio < z->ratio;
}

/* Forced sample for this batch, or GW_CODEC_AUTO when none. */
static enum gw_codec_id sample_for(const struct gw_codec_auto *a, double link_ns_per_byte, uint64_t batch_no)
{
	enum gw_codec_id id;

	if (batch_no < NR_CANDIDATES)
		return candidates[batch_no];
	if (batch_no % SAMPLE_EVERY)
		return GW_CODEC_AUTO;
	id = candidates[(batch_no / SAMPLE_EVERY) % NR_CANDIDATES];
	return id == GW_CODEC_LZ4 && !lz4_in_play(a, link_ns_per_byte) ? GW_CODEC_AUTO : id;
}

/*
 * The model on a slow link, no sample due: the cheapest of max(compress
 * cost, ratio x link cost) and raw, the ratios scaled by the probe
 * (@probe_ratio < 0: none); raw on a tie.
 */
static enum gw_codec_id model_pick(const struct gw_codec_auto *a, double link_ns_per_byte, double probe_ratio)
{
	enum gw_codec_id best = GW_CODEC_NONE;
	double scale = 1.0, best_cost = link_ns_per_byte;

	if (probe_ratio >= 0)
		scale = probe_ratio / a->est[GW_CODEC_LZ4].ratio;
	for (unsigned i = 0; i < NR_CANDIDATES; i++) {
		enum gw_codec_id id = candidates[i];
		double ratio = a->est[id].ratio * scale;

		if (id == GW_CODEC_LZ4 && !lz4_in_play(a, link_ns_per_byte))
			continue;
		double wire = (ratio < 1.0 ? ratio : 1.0) * link_ns_per_byte;
		double cost = a->est[id].ns_per_byte > wire ? a->est[id].ns_per_byte : wire;

		if (cost < best_cost) {
			best_cost = cost;
			best = id;
		}
	}
	return best;
}

/*
 * lz4's ratio over up to GW_AUTO_PROBE_SLICES data pages spread over the
 * batch: the first data page of each slice of nr / SLICES pages, then, in
 * turn, the next one of each slice that has more, until SLICES pages are
 * taken. A slice of zero pages gives none (the raw stream leaves them out)
 * and its share goes to the slices with data, as the raw stream's pages
 * would, so that a batch with zero runs is still probed over SLICES pages
 * (fewer, and a few random pages send a compressible batch raw). Each page
 * is looked at once at most. Negative when there is no probe (no data page
 * found, no memory, no lz4).
 */
static double probe(struct gw_codec_auto *a, const struct gw_auto_input *in)
{
	const struct gw_codec_ops *lz4 = gw_codec_get(GW_CODEC_LZ4);
	uint64_t next[GW_AUTO_PROBE_SLICES];	/* per slice: the next page to look at */
	uint32_t taken = 0;
	ssize_t got;

	if (!lz4 || !in->page)
		return -1;
	if (!a->probe_buf && !(a->probe_buf = malloc(GW_AUTO_PROBE_BYTES + PROBE_OUT_BYTES)))
		return -1;
	if (!a->probe_ctx && !(a->probe_ctx = lz4->ctx_new(lz4->default_level)))
		return -1;
	for (uint32_t s = 0; s < GW_AUTO_PROBE_SLICES; s++)
		next[s] = (uint64_t)s * in->nr_pages / GW_AUTO_PROBE_SLICES;
	for (bool more = true; more && taken < GW_AUTO_PROBE_SLICES;) {
		more = false;
		for (uint32_t s = 0; s < GW_AUTO_PROBE_SLICES && taken < GW_AUTO_PROBE_SLICES; s++) {
			uint64_t to = (uint64_t)(s + 1) * in->nr_pages / GW_AUTO_PROBE_SLICES;

			while (next[s] < to) {
				const uint8_t *p = in->page(in->arg, (uint32_t)next[s]++);

				if (p && !gw_is_zero(p, PAGE)) {
					memcpy(a->probe_buf + (size_t)taken++ * PAGE, p, PAGE);
					more = true;
					break;
				}
			}
		}
	}
	if (!taken)
		return -1;
	got = lz4->compress(a->probe_ctx, a->probe_buf, (size_t)taken * PAGE, a->probe_buf + GW_AUTO_PROBE_BYTES,
			    PROBE_OUT_BYTES);
	return got > 0 ? (double)got / ((double)taken * PAGE) : -1;
}

struct gw_auto_choice gw_codec_auto_decide(struct gw_codec_auto *a, const struct gw_auto_input *in)
{
	struct gw_auto_choice c = { .codec = GW_CODEC_NONE, .why = GW_AUTO_FAST_LINK, .probe_ratio = -1 };
	double link = in->link_ns_per_byte;

	if (!link_is_slow(a, link))
		return c;	/* no codec is even set up on a fast link */
	c.slow = true;
	c.level_changed = tune(a, link);
	c.codec = sample_for(a, link, a->slow_batches);
	if (c.codec != GW_CODEC_AUTO) {
		c.why = GW_AUTO_SAMPLE;
	} else {
		if (in->nr_pages >= GW_AUTO_PROBE_MIN_PAGES)
			c.probe_ratio = probe(a, in);
		c.why = c.probe_ratio > GW_AUTO_PROBE_INCOMPRESSIBLE ? GW_AUTO_PROBE_RAW : GW_AUTO_MODEL;
		c.codec = c.why == GW_AUTO_PROBE_RAW ? GW_CODEC_NONE : model_pick(a, link, c.probe_ratio);
	}
	c.level = c.codec == GW_CODEC_ZSTD ? a->zstd_level : 0;
	if (c.codec == GW_CODEC_LZ4)
		c.level = gw_codec_get(GW_CODEC_LZ4) ? gw_codec_get(GW_CODEC_LZ4)->default_level : 0;
	return c;
}

/* One compression of @in_bytes into @out_bytes by @id took @ns. */
static void sample_codec(struct gw_codec_auto *a, enum gw_codec_id id, uint64_t ns, size_t in_bytes,
			 size_t out_bytes)
{
	if (!in_bytes || (unsigned)id >= GW_CODEC__COUNT)
		return;
	a->est[id].ns_per_byte = 0.8 * a->est[id].ns_per_byte + 0.2 * ((double)ns / (double)in_bytes);
	a->est[id].ratio = 0.8 * a->est[id].ratio + 0.2 * ((double)out_bytes / (double)in_bytes);
}

void gw_codec_auto_feed(struct gw_codec_auto *a, const struct gw_auto_choice *c, const struct gw_auto_result *r)
{
	if (!r->raw_bytes)
		return;		/* no data: the batch does not count, a sample due stays due */
	if (c->slow)
		a->slow_batches++;
	if (c->codec != GW_CODEC_NONE && r->out_bytes)
		sample_codec(a, c->codec, r->compress_ns, r->raw_bytes, r->out_bytes);
}

/* The kernel's TCP delivery rate: an app-limited sample may only make the link look faster. */
static void sample_tcp(struct gw_codec_auto *a, uint64_t rate_bps, bool app_limited)
{
	double link;

	if (!rate_bps)
		return;
	link = 1e9 / (double)rate_bps;
	if (!a->link_ns_per_byte || !app_limited || link < a->link_ns_per_byte)
		a->link_ns_per_byte = a->link_ns_per_byte ? 0.7 * a->link_ns_per_byte + 0.3 * link : link;
}

/* Where there is no TCP rate (unix:): the time the send waited per wire byte. */
static void sample_wait(struct gw_codec_auto *a, double ns_per_byte)
{
	a->link_ns_per_byte = a->link_ns_per_byte ? 0.8 * a->link_ns_per_byte + 0.2 * ns_per_byte
						  : ns_per_byte;
}

double gw_codec_auto_link_sample(struct gw_codec_auto *a, const struct gw_link_sample *in)
{
	if (in->data_bytes >= GW_AUTO_LINK_SAMPLE_MIN_BYTES) {
		if (in->tcp)
			sample_tcp(a, in->tcp_rate_bps, in->tcp_app_limited);
		else
			sample_wait(a, (double)in->send_ns / (double)in->data_bytes);
	}
	return gw_codec_auto_link_cost(a, in->cap_bps, in->nr_channels);
}
