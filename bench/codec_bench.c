/* SPDX-License-Identifier: MIT */
/*
 * codec_bench: compress and decompress speed (MB/s of uncompressed bytes,
 * 1 MB = 10^6 bytes) and ratio for each codec in gw_codecs[] at a few
 * levels, on generated "mix" data (25% zero pages, 25% random pages, 50%
 * text-like pages), compressed in independent chunks the way a channel
 * compresses its batches. One line per codec/level, then one for XBZRLE.
 *
 *   codec_bench [--size BYTES] [--chunk BYTES] [--min-ms MS]
 *
 * Single-threaded; every result is checked against the input once.
 */
#include <errno.h>
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "codec/codec.h"
#include "codec/xbzrle.h"
#include "codec_gen.h"

struct bench_cfg {
	size_t size_bytes;	/* total data */
	size_t chunk_bytes;	/* compressed independently */
	uint64_t min_ns;	/* each direction runs at least this long */
};

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static double mb_per_s(uint64_t bytes, uint64_t ns)
{
	return ns ? (double)bytes * 1e3 / (double)ns : 0.0;
}

/* Levels worth a line: a few from fast to slow, within the codec's range. */
static int bench_levels(const struct gw_codec_ops *ops, int *out)
{
	static const int zstd_l[] = { 1, 3, 9, 19 }, lz4_l[] = { 1, 9 };
	static const int zlib_l[] = { 1, 6, 9 }, isal_l[] = { 0, 1, 2, 3 };
	const int *l;
	int n, i, k = 0;

	switch (ops->id) {
	case GW_CODEC_ZSTD: l = zstd_l; n = 4; break;
	case GW_CODEC_LZ4:  l = lz4_l;  n = 2; break;
	case GW_CODEC_ZLIB: l = zlib_l; n = 3; break;
	case GW_CODEC_ISAL: l = isal_l; n = 4; break;
	default: out[0] = ops->default_level; return 1;
	}
	for (i = 0; i < n; i++)
		if (l[i] >= ops->min_level && l[i] <= ops->max_level)
			out[k++] = l[i];
	return k;
}

static int bench_one(const struct bench_cfg *cfg, const struct gw_codec_ops *ops, int level,
		     const uint8_t *data, uint8_t *comp, size_t *clens, uint8_t *out)
{
	size_t nchunks = (cfg->size_bytes + cfg->chunk_bytes - 1) / cfg->chunk_bytes;
	size_t stride = ops->bound(cfg->chunk_bytes);
	uint64_t t0, c_ns, d_ns, c_bytes = 0, d_bytes = 0, comp_total = 0;
	void *ctx = ops->ctx_new(level);
	size_t i;

	if (!ctx) {
		fprintf(stderr, "%s: ctx_new(%d): %s\n", ops->name, level, strerror(errno));
		return -1;
	}
	t0 = now_ns();
	do {
		for (i = 0, comp_total = 0; i < nchunks; i++) {
			size_t off = i * cfg->chunk_bytes;
			size_t n = cfg->size_bytes - off < cfg->chunk_bytes ?
				   cfg->size_bytes - off : cfg->chunk_bytes;
			ssize_t r = ops->compress(ctx, data + off, n, comp + i * stride, stride);

			if (r < 0) {
				fprintf(stderr, "%s/%d: compress: %zd\n", ops->name, level, r);
				goto err;
			}
			clens[i] = (size_t)r;
			comp_total += (size_t)r;
		}
		c_bytes += cfg->size_bytes;
		c_ns = now_ns() - t0;
	} while (c_ns < cfg->min_ns);

	t0 = now_ns();
	do {
		for (i = 0; i < nchunks; i++) {
			size_t off = i * cfg->chunk_bytes;
			size_t n = cfg->size_bytes - off < cfg->chunk_bytes ?
				   cfg->size_bytes - off : cfg->chunk_bytes;

			if (ops->decompress(ctx, comp + i * stride, clens[i], out + off, n)) {
				fprintf(stderr, "%s/%d: decompress failed\n", ops->name, level);
				goto err;
			}
		}
		d_bytes += cfg->size_bytes;
		d_ns = now_ns() - t0;
	} while (d_ns < cfg->min_ns);

	if (memcmp(out, data, cfg->size_bytes)) {
		fprintf(stderr, "%s/%d: round trip mismatch\n", ops->name, level);
		goto err;
	}
	printf("%-5s level %3d  compress %8.1f MB/s  decompress %8.1f MB/s  ratio %6.2f  (%zu -> %llu bytes)\n",
	       ops->name, level, mb_per_s(c_bytes, c_ns), mb_per_s(d_bytes, d_ns),
	       (double)cfg->size_bytes / (double)(comp_total ? comp_total : 1),
	       cfg->size_bytes, (unsigned long long)comp_total);
	ops->ctx_free(ctx);
	return 0;
err:
	ops->ctx_free(ctx);
	return -1;
}

/* XBZRLE: re-sent text pages with a few sparse small writes each. */
static int bench_xbzrle(const struct bench_cfg *cfg, const uint8_t *data, uint64_t *rng)
{
	size_t npages = cfg->size_bytes / GEN_PAGE_BYTES, i, enc_total = 0;
	uint8_t *new = malloc(cfg->size_bytes);
	uint8_t *page = malloc(GEN_PAGE_BYTES);
	uint64_t t0, e_ns, d_ns, e_bytes = 0, d_bytes = 0;
	ssize_t *lens = calloc(npages, sizeof(*lens));
	uint8_t *encs = malloc(npages * (GEN_PAGE_BYTES + 16));

	if (!new || !page || !lens || !encs)
		return -1;
	memcpy(new, data, npages * GEN_PAGE_BYTES);
	for (i = 0; i < npages; i++) {
		int k;

		for (k = 0; k < 8; k++) {
			size_t at = i * GEN_PAGE_BYTES + gen_rand(rng) % (GEN_PAGE_BYTES - 8);

			gen_random(new + at, 1 + gen_rand(rng) % 8, rng);
		}
	}
	t0 = now_ns();
	do {
		for (i = 0, enc_total = 0; i < npages; i++) {
			size_t off = i * GEN_PAGE_BYTES;

			lens[i] = gw_xbzrle_encode(data + off, new + off, GEN_PAGE_BYTES,
						   encs + i * (GEN_PAGE_BYTES + 16), GEN_PAGE_BYTES);
			/* -ENOSPC would be sent as a normal page. */
			enc_total += lens[i] < 0 ? GEN_PAGE_BYTES : (size_t)lens[i];
		}
		e_bytes += npages * GEN_PAGE_BYTES;
		e_ns = now_ns() - t0;
	} while (e_ns < cfg->min_ns);
	t0 = now_ns();
	do {
		for (i = 0; i < npages; i++) {
			size_t off = i * GEN_PAGE_BYTES;

			if (lens[i] < 0)
				continue;
			memcpy(page, data + off, GEN_PAGE_BYTES);
			if (gw_xbzrle_decode(encs + i * (GEN_PAGE_BYTES + 16), (size_t)lens[i],
					     page, GEN_PAGE_BYTES) ||
			    memcmp(page, new + off, GEN_PAGE_BYTES)) {
				fprintf(stderr, "xbzrle: round trip mismatch\n");
				return -1;
			}
		}
		d_bytes += npages * GEN_PAGE_BYTES;
		d_ns = now_ns() - t0;
	} while (d_ns < cfg->min_ns);
	printf("%-5s 8 writes/pg  encode   %8.1f MB/s  decode     %8.1f MB/s  ratio %6.2f  (%zu -> %zu bytes; decode includes page copy+check)\n",
	       "xbzrle", mb_per_s(e_bytes, e_ns), mb_per_s(d_bytes, d_ns),
	       (double)(npages * GEN_PAGE_BYTES) / (double)(enc_total ? enc_total : 1),
	       npages * GEN_PAGE_BYTES, enc_total);
	free(encs);
	free(lens);
	free(page);
	free(new);
	return 0;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "size", required_argument, NULL, 's' },
		{ "chunk", required_argument, NULL, 'c' },
		{ "min-ms", required_argument, NULL, 'm' },
		{ NULL, 0, NULL, 0 },
	};
	struct bench_cfg cfg = {
		.size_bytes = 4u << 20, .chunk_bytes = 512u << 10, .min_ns = 300000000ull,
	};
	uint8_t *data, *comp, *out;
	size_t *clens, nchunks, stride_max = 0;
	uint64_t rng = 2024;
	int i, opt, rc = 0;

	while ((opt = getopt_long(argc, argv, "s:c:m:", opts, NULL)) != -1) {
		switch (opt) {
		case 's': cfg.size_bytes = strtoull(optarg, NULL, 0); break;
		case 'c': cfg.chunk_bytes = strtoull(optarg, NULL, 0); break;
		case 'm': cfg.min_ns = strtoull(optarg, NULL, 0) * 1000000ull; break;
		default:
			fprintf(stderr, "usage: %s [--size BYTES] [--chunk BYTES] [--min-ms MS]\n",
				argv[0]);
			return 2;
		}
	}
	if (!cfg.size_bytes || !cfg.chunk_bytes) {
		fprintf(stderr, "size and chunk must be > 0\n");
		return 2;
	}
	nchunks = (cfg.size_bytes + cfg.chunk_bytes - 1) / cfg.chunk_bytes;
	for (i = 0; i < GW_CODEC__COUNT; i++)
		if (gw_codecs[i] && gw_codecs[i]->bound(cfg.chunk_bytes) > stride_max)
			stride_max = gw_codecs[i]->bound(cfg.chunk_bytes);
	data = malloc(cfg.size_bytes);
	out = malloc(cfg.size_bytes);
	comp = malloc(nchunks * stride_max);
	clens = calloc(nchunks, sizeof(*clens));
	if (!data || !out || !comp || !clens) {
		fprintf(stderr, "out of memory\n");
		return 1;
	}
	gen_mix(data, cfg.size_bytes, &rng);
	printf("codec_bench: %zu bytes of mix data (25%% zero, 25%% random, 50%% text pages), "
	       "%zu-byte chunks, 1 thread\n", cfg.size_bytes, cfg.chunk_bytes);

	for (i = 0; i < GW_CODEC__COUNT; i++) {
		const struct gw_codec_ops *ops = gw_codec_get((enum gw_codec_id)i);
		int levels[8], n, k;

		if (!ops)
			continue;
		n = bench_levels(ops, levels);
		for (k = 0; k < n; k++)
			if (bench_one(&cfg, ops, levels[k], data, comp, clens, out))
				rc = 1;
	}
	if (cfg.size_bytes >= GEN_PAGE_BYTES && bench_xbzrle(&cfg, data, &rng))
		rc = 1;
	free(clens);
	free(comp);
	free(out);
	free(data);
	return rc;
}
