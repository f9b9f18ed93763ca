/* SPDX-License-Identifier: MIT */
/* compress=auto (see codec_auto.h). Pure arithmetic: no I/O, no clock. */
#include "codec_auto.h"

#define SAMPLE_EVERY 16			/* slow-link batches between forced samples */
#define PROBE_INCOMPRESSIBLE 0.95	/* probe ratio above which a batch goes raw */

static const enum gw_codec_id candidates[] = { GW_CODEC_LZ4, GW_CODEC_ZSTD };
#define NR_CANDIDATES (sizeof(candidates) / sizeof(candidates[0]))

#define TUNE_UP_HEADROOM 3.0		/* fast-level cost x this under the wire time: ratio level */
#define TUNE_DOWN_SHARE 0.7		/* cost over this share of the wire time: fast level */

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

/* Forced sample for this batch, or GW_CODEC_AUTO when none. */
static enum gw_codec_id sample_for(uint64_t batch_no)
{
	if (batch_no < NR_CANDIDATES)
		return candidates[batch_no];
	if (batch_no % SAMPLE_EVERY == 0)
		return candidates[(batch_no / SAMPLE_EVERY) % NR_CANDIDATES];
	return GW_CODEC_AUTO;
}

bool gw_codec_auto_wants_probe(const struct gw_codec_auto *a, double link_ns_per_byte,
			       uint64_t batch_no)
{
	return gw_codec_auto_link_is_slow(a, link_ns_per_byte) && sample_for(batch_no) == GW_CODEC_AUTO;
}

enum gw_codec_id gw_codec_auto_pick(const struct gw_codec_auto *a, double link_ns_per_byte,
				    uint64_t batch_no, double probe_ratio)
{
	enum gw_codec_id best = GW_CODEC_NONE, sample;
	double scale = 1.0, best_cost = link_ns_per_byte;

	if (!gw_codec_auto_link_is_slow(a, link_ns_per_byte))
		return GW_CODEC_NONE;
	sample = sample_for(batch_no);
	if (sample != GW_CODEC_AUTO)
		return sample;
	if (probe_ratio >= 0) {
		if (probe_ratio > PROBE_INCOMPRESSIBLE)
			return GW_CODEC_NONE;
		scale = probe_ratio / a->est[GW_CODEC_LZ4].ratio;
	}
	for (unsigned i = 0; i < NR_CANDIDATES; i++) {
		enum gw_codec_id id = candidates[i];
		double ratio = a->est[id].ratio * scale;
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
