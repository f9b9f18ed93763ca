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
 * data pages taken evenly across the batch (GW_AUTO_PROBE_BYTES in all;
 * zero pages are passed over, as the batch sends no data for them, and a
 * run of them gives its share of the probe to the parts with data); a probe ratio above 0.95 sends raw, otherwise both codecs'
 * ratios are scaled by probe / lz4's ratio estimate. Pages spread over the
 * batch, not its first ones: guest RAM mixes page kinds, and two random pages at a
 * batch's start sent a ninth of the mix benchmark's batches raw (auto's
 * ratio 1.54 where zstd alone made 1.71); with 4 pages, 1 batch in 60 of
 * mix (a third of its data pages random) still went raw, with 8 pages 1 in
 * 400.
 *
 * One call per batch decides (gw_codec_auto_decide: the codec and its
 * level, the sampling and the probe inside), one feeds its outcome back
 * (gw_codec_auto_feed), and the send side feeds the link's cost
 * (gw_codec_auto_link_sample). Threads: one struct gw_codec_auto per
 * channel, owned by its prep thread; the link's estimate is another, owned
 * by the send thread, which publishes the cost it returns.
 */
#ifndef GW_CODEC_AUTO_H
#define GW_CODEC_AUTO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <godwit/params.h>

#define GW_AUTO_PROBE_SLICES 8		/* pages in a probe, spread over the batch */
#define GW_AUTO_PROBE_BYTES (GW_AUTO_PROBE_SLICES * 4096)
#define GW_AUTO_PROBE_MIN_PAGES (2 * GW_AUTO_PROBE_SLICES)	/* smaller batches are not probed */
#define GW_AUTO_PROBE_INCOMPRESSIBLE 0.95	/* probe ratio above which a batch goes raw */
#define GW_AUTO_LINK_SAMPLE_MIN_BYTES 65536	/* smaller sends say nothing about the link */
/*
 * zstd's levels: GW_AUTO_ZSTD_LEVEL_FAST (1) or, while the CPU has
 * headroom, GW_AUTO_ZSTD_LEVEL_RATIO (3: on mix data ~4% more ratio for
 * 1.2-1.6x the time); lz4 at its default. The destination decodes any level.
 */
#define GW_AUTO_ZSTD_LEVEL_FAST 1
#define GW_AUTO_ZSTD_LEVEL_RATIO 3

struct gw_codec_estimate {
	double ns_per_byte;		/* compression cost per raw byte, smoothed */
	double ratio;			/* output / input, smoothed */
};

struct gw_codec_auto {
	struct gw_codec_estimate est[GW_CODEC__COUNT];	/* lz4 and zstd are used */
	double link_ns_per_byte;	/* measured cost per wire byte, 0 = unknown */
	int zstd_level;			/* GW_AUTO_ZSTD_LEVEL_FAST or _RATIO */
	uint64_t slow_batches;		/* batches with data decided on a slow link (the sampling's clock) */
	void *probe_ctx;		/* lz4 for the probe, made on the first one; NULL = none yet */
	uint8_t *probe_buf;		/* the probe's pages, then its output; NULL = none yet */
};

/* Why a batch got its codec (the codec_auto log line counts them). */
enum gw_auto_why {
	GW_AUTO_FAST_LINK = 1,		/* raw: the link is no slower than lz4 (or unknown) */
	GW_AUTO_SAMPLE,			/* a forced sample of lz4 or zstd */
	GW_AUTO_PROBE_RAW,		/* raw: the probe said incompressible */
	GW_AUTO_MODEL,			/* the model's cheapest (raw when no codec is cheaper) */
};

/*
 * One batch, as the decision sees it. The probe reads up to
 * GW_AUTO_PROBE_SLICES of its pages, where they lie, through @page.
 */
struct gw_auto_input {
	double link_ns_per_byte;	/* the link's cost per wire byte for this channel (gw_codec_auto_link_cost); 0 = unknown */
	uint32_t nr_pages;		/* pages the batch sends, zero ones included */
	/* Page @i (< nr_pages, in the batch's order) as it lies; NULL = not readable (passed over). */
	const uint8_t *(*page)(const void *arg, uint32_t i);
	const void *arg;
};

struct gw_auto_choice {
	enum gw_codec_id codec;		/* GW_CODEC_NONE (raw), GW_CODEC_LZ4 or GW_CODEC_ZSTD */
	int level;			/* the codec's level (a context at another level must be made anew) */
	enum gw_auto_why why;
	bool slow;			/* decided on a slow link: the batch counts for the sampling (gw_codec_auto_feed) */
	bool level_changed;		/* zstd's level moved with this batch */
	double probe_ratio;		/* lz4's ratio over the probe; negative = no probe taken */
};

/* What became of a decided batch. */
struct gw_auto_result {
	size_t raw_bytes;		/* the batch's data before compression; 0 = it had none (all zero) */
	size_t out_bytes;		/* the codec's output; 0 = not compressed, or the codec failed */
	uint64_t compress_ns;		/* the compression's time */
};

/* Priors until measured (bench/codec_bench on mix data, one core). Holds nothing yet. */
void gw_codec_auto_init(struct gw_codec_auto *a);
/* What the probe made (gw_codec_auto_init again after). */
void gw_codec_auto_release(struct gw_codec_auto *a);

/*
 * The codec for one batch: raw on a fast or unknown link; on a slow one a
 * forced sample, or the model's cheapest for the batch's probe (taken here
 * when the rule wants one: lz4 over pages spread over it), zstd's level
 * moved with the headroom first (see the top). Never fails: a probe that
 * cannot be made (out of memory) is left out.
 */
struct gw_auto_choice gw_codec_auto_decide(struct gw_codec_auto *a, const struct gw_auto_input *in);
/* The batch decided by @c was built (and compressed with c->codec): estimates and sampling move on. */
void gw_codec_auto_feed(struct gw_codec_auto *a, const struct gw_auto_choice *c, const struct gw_auto_result *r);

/* The link's cost per wire byte, or what max-bandwidth (@cap_bps) allows per channel if higher. */
double gw_codec_auto_link_cost(const struct gw_codec_auto *a, int64_t cap_bps, unsigned nr_channels);

/* One send of the data path, for the link's estimate. */
struct gw_link_sample {
	size_t data_bytes;		/* the frame's data; under GW_AUTO_LINK_SAMPLE_MIN_BYTES: no sample */
	uint64_t send_ns;		/* how long the send took */
	bool tcp;			/* the kernel's TCP delivery rate below is known */
	uint64_t tcp_rate_bps;		/* tcpi_delivery_rate */
	bool tcp_app_limited;		/* the rate is a lower bound: it may only make the link look faster */
	int64_t cap_bps;		/* max-bandwidth, 0 = none */
	unsigned nr_channels;		/* the cap is shared by them */
};
/*
 * Feed one send (the TCP rate where there is one, else the time the send
 * waited per byte) and return the link's cost per wire byte for the
 * decisions (gw_codec_auto_link_cost).
 */
double gw_codec_auto_link_sample(struct gw_codec_auto *a, const struct gw_link_sample *in);

#endif
