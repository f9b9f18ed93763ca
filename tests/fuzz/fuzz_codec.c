/* SPDX-License-Identifier: MIT */
/*
 * Each codec's bounded decompression (codec/codec_*.c) on hostile data:
 * byte 0 chooses the codec, bytes 1..3 the announced raw size (at most a
 * PAGES frame's, 1024 x 4098 bytes); the output buffer is exactly that big
 * and ends where an inaccessible page begins (the codec libraries are not
 * instrumented: a byte written past the bound of a decompression bomb
 * faults). Decompression returns 0 with exactly the announced size or
 * -EBADMSG; what decompresses, recompresses and decompresses to the same.
 */
#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include "codec/codec.h"
#include "fuzz.h"
#include "wire/wire.h"

#define RAW_MAX (GW_WIRE_MAX_BATCH_PAGES * (GW_WIRE_PAGE_BYTES + 2))

static void *ctx[GW_CODEC__COUNT];
static uint8_t *area;		/* RAW_MAX rounded up to pages, then a PROT_NONE page */
static size_t area_bytes;

/* A buffer of exactly @len bytes whose end touches the guard page. */
static uint8_t *bounded(size_t len)
{
	return area + area_bytes - len;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc, (void)argv;
	fuzz_quiet_log();
	area_bytes = (RAW_MAX + 4095) & ~(size_t)4095;
	area = mmap(NULL, area_bytes + 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	fuzz_check(area != MAP_FAILED && !mprotect(area + area_bytes, 4096, PROT_NONE), "guarded output");
	for (unsigned i = 1; i < GW_CODEC__COUNT; i++) {
		const struct gw_codec_ops *c = gw_codec_get((enum gw_codec_id)i);

		if (c && !c->probe())
			ctx[i] = c->ctx_new(c->default_level);
	}
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	enum gw_codec_id id;
	const struct gw_codec_ops *c;
	size_t raw;
	uint8_t *out, *back, *comp;
	ssize_t n;
	int ret;

	if (size < 4)
		return 0;
	id = (enum gw_codec_id)(1 + data[0] % (GW_CODEC__COUNT - 2));	/* zstd, lz4, zlib, isal */
	c = gw_codec_get(id);
	if (!c || !ctx[id])
		return 0;
	raw = ((size_t)data[1] | (size_t)data[2] << 8 | (size_t)data[3] << 16) % (RAW_MAX + 1);
	if (!raw)
		raw = 1;
	out = bounded(raw);
	ret = c->decompress(ctx[id], data + 4, size - 4, out, raw);
	fuzz_check(ret == 0 || ret == -EBADMSG, "decompress result");
	if (!ret) {
		size_t cap = c->bound(raw);

		comp = malloc(cap);
		back = malloc(raw);
		n = c->compress(ctx[id], out, raw, comp, cap);
		fuzz_check(n > 0, "what decompressed compresses");
		fuzz_check(c->decompress(ctx[id], comp, (size_t)n, back, raw) == 0 && !memcmp(out, back, raw),
			   "and decompresses to the same");
		free(comp);
		free(back);
	}
	return 0;
}
