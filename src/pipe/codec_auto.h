/* SPDX-License-Identifier: MIT */
/*
 * compress=auto: the choice among none, lz4 and zstd for each batch, as a
 * function of estimates. Compressing batch k+1 overlaps the socket draining
 * batch k, so a codec costs max(compress ns/byte, ratio x link ns/byte) per
 * raw byte, against the link's ns/byte for sending raw; the cheapest wins
 * (none unless a codec is strictly cheaper).
 *
 * Sampling, so that the estimates stay true: a link no slower than lz4's
 * compression cost (or unknown: 0) sends raw, so the first batch always
 * goes raw and measures the link and no codec is set up on a fast link.
 * On a slow link the first two batches try lz4 then zstd, and every 16th
 * tries one of them in turn, whatever the model says, except lz4 while it
 * cannot be picked (zstd keeps up with the link, at no worse a ratio).
 * Other slow-link batches look at a probe: lz4 over GW_AUTO_PROBE_SLICES
 * pages taken evenly across the batch (GW_AUTO_PROBE_BYTES in all); a
 * probe ratio above 0.95 sends raw, otherwise both codecs' ratios are
 * scaled by probe / lz4's ratio estimate. Pages spread over the batch, not
 * its first ones: guest RAM mixes page kinds, and two random pages at a
 * batch's start sent a ninth of the mix benchmark's batches raw (auto's
 * ratio 1.54 where zstd alone made 1.71); with 4 pages, 1 batch in 60 of
 * mix (a third of its data pages random) still went raw, with 8 pages 1 in
 * 400.
 *
 * Threads: one struct gw_codec_auto per channel, owned by its thread.
 */
#ifndef GW_CODEC_AUTO_H
#define GW_CODEC_AUTO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <godwit/params.h>

#define GW_AUTO_PROBE_SLICES 8		/* pages in a probe, spread over the batch */
#define GW_AUTO_PROBE_BYTES (GW_AUTO_PROBE_SLICES * 4096)	/* probed batches are at least twice this */
#define GW_AUTO_PROBE_INCOMPRESSIBLE 0.95	/* probe ratio above which a batch goes raw */

struct gw_codec_estimate {
	double ns_per_byte;		/* compression cost per raw byte, smoothed */
	double ratio;			/* output / input, smoothed */
};

struct gw_codec_auto {
	struct gw_codec_estimate est[GW_CODEC__COUNT];	/* lz4 and zstd are used */
	double link_ns_per_byte;	/* measured cost per wire byte, 0 = unknown */
	int zstd_level;			/* GW_AUTO_ZSTD_LEVEL_FAST or _RATIO (gw_codec_auto_tune) */
	uint64_t slow_batches;		/* batches seen on a slow link */
};

/*
 * The level auto compresses @id at: zstd at GW_AUTO_ZSTD_LEVEL_FAST (1) or,
 * while the CPU has headroom, GW_AUTO_ZSTD_LEVEL_RATIO (3: on mix data ~4%
 * more ratio for 1.2-1.6x the time); others at their default. The
 * destination decodes any level.
 */
#define GW_AUTO_ZSTD_LEVEL_FAST 1
#define GW_AUTO_ZSTD_LEVEL_RATIO 3
int gw_codec_auto_level(const struct gw_codec_auto *a, enum gw_codec_id id, int default_level);
/*
 * zstd's level for the coming batches, from the estimates: the ratio level
 * while compressing at the fast level costs under 1/1.9 of the time the
 * link takes for its output (the ratio level's cost then stays under 0.84
 * of it), back to the fast level once compressing costs more than 0.9 of
 * it. On a busy machine the fast level keeps zstd from becoming the
 * bottleneck, which made auto choose lz4 and lose ratio. True when the level changed
 * (the caller makes a new context; the estimates adapt from the next sample).
 */
bool gw_codec_auto_tune(struct gw_codec_auto *a, double link_ns_per_byte);

/* Priors until measured (bench/codec_bench on mix data, one core). */
void gw_codec_auto_init(struct gw_codec_auto *a);

/* The link's cost per wire byte, or what max-bandwidth allows per channel if higher. */
double gw_codec_auto_link_cost(const struct gw_codec_auto *a, int64_t cap_bps, unsigned nr_channels);
/* A slow link: codecs may pay (cost above lz4's compression cost). */
bool gw_codec_auto_link_is_slow(const struct gw_codec_auto *a, double link_ns_per_byte);

/*
 * The rule, pure. @batch_no numbers the batches seen on a slow link (0,
 * 1, ...); @probe_ratio is lz4's ratio over the batch's probe (pages
 * spread over it), or negative when no probe was taken.
 */
enum gw_codec_id gw_codec_auto_pick(const struct gw_codec_auto *a, double link_ns_per_byte,
				    uint64_t batch_no, double probe_ratio);
/* Whether gw_codec_auto_pick will look at a probe for batch @batch_no. */
bool gw_codec_auto_wants_probe(const struct gw_codec_auto *a, double link_ns_per_byte,
			       uint64_t batch_no);

/* Feedback: one compression of @in_bytes into @out_bytes by @id took @ns. */
void gw_codec_auto_sample_codec(struct gw_codec_auto *a, enum gw_codec_id id, uint64_t ns,
				size_t in_bytes, size_t out_bytes);
/*
 * Feedback from a send of at least 64 KiB: the kernel's TCP delivery rate
 * (an app-limited sample is a lower bound of the rate: it may only make
 * the link look faster), or where there is none (unix:), the time the send
 * waited per wire byte.
 */
void gw_codec_auto_sample_tcp(struct gw_codec_auto *a, uint64_t rate_bps, bool app_limited);
void gw_codec_auto_sample_wait(struct gw_codec_auto *a, double ns_per_byte);

#endif
