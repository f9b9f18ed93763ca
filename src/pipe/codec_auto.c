/* SPDX-License-Identifier: MIT */
/* compress=auto (see codec_auto.h). Pure arithmetic: no I/O, no clock. */
#include "pipe/codec_auto.h"

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

int gw_codec_auto_level(const struct gw_codec_auto *a, enum gw_codec_id id, int default_level)
{
	return id == GW_CODEC_ZSTD ? a->zstd_level : default_level;
}

bool gw_codec_auto_tune(struct gw_codec_auto *a, double link_ns_per_byte)
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

double gw_codec_auto_link_cost(const struct gw_codec_auto *a, int64_t cap_bps, unsigned nr_channels)
{
	double link = a->link_ns_per_byte;

	if (cap_bps > 0 && 1e9 * nr_channels / (double)cap_bps > link)
		link = 1e9 * nr_channels / (double)cap_bps;
	return link;
}

bool gw_codec_auto_link_is_slow(const struct gw_codec_auto *a, double link_ns_per_byte)
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

bool gw_codec_auto_wants_probe(const struct gw_codec_auto *a, double link_ns_per_byte,
			       uint64_t batch_no)
{
	return gw_codec_auto_link_is_slow(a, link_ns_per_byte) &&
	       sample_for(a, link_ns_per_byte, batch_no) == GW_CODEC_AUTO;
}

enum gw_codec_id gw_codec_auto_pick(const struct gw_codec_auto *a, double link_ns_per_byte,
				    uint64_t batch_no, double probe_ratio)
{
	enum gw_codec_id best = GW_CODEC_NONE, sample;
	double scale = 1.0, best_cost = link_ns_per_byte;

	if (!gw_codec_auto_link_is_slow(a, link_ns_per_byte))
		return GW_CODEC_NONE;
	sample = sample_for(a, link_ns_per_byte, batch_no);
	if (sample != GW_CODEC_AUTO)
		return sample;
	if (probe_ratio >= 0) {
		if (probe_ratio > GW_AUTO_PROBE_INCOMPRESSIBLE)
			return GW_CODEC_NONE;
		scale = probe_ratio / a->est[GW_CODEC_LZ4].ratio;
	}
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

void gw_codec_auto_sample_codec(struct gw_codec_auto *a, enum gw_codec_id id, uint64_t ns,
				size_t in_bytes, size_t out_bytes)
{
	if (!in_bytes || (unsigned)id >= GW_CODEC__COUNT)
		return;
	a->est[id].ns_per_byte = 0.8 * a->est[id].ns_per_byte + 0.2 * ((double)ns / (double)in_bytes);
	a->est[id].ratio = 0.8 * a->est[id].ratio + 0.2 * ((double)out_bytes / (double)in_bytes);
}

void gw_codec_auto_sample_tcp(struct gw_codec_auto *a, uint64_t rate_bps, bool app_limited)
{
	double link;

	if (!rate_bps)
		return;
	link = 1e9 / (double)rate_bps;
	if (!a->link_ns_per_byte || !app_limited || link < a->link_ns_per_byte)
		a->link_ns_per_byte = a->link_ns_per_byte ? 0.7 * a->link_ns_per_byte + 0.3 * link : link;
}

void gw_codec_auto_sample_wait(struct gw_codec_auto *a, double ns_per_byte)
{
	a->link_ns_per_byte = a->link_ns_per_byte ? 0.8 * a->link_ns_per_byte + 0.2 * ns_per_byte
						  : ns_per_byte;
}
