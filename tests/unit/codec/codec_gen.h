/* SPDX-License-Identifier: MIT */
/*
 * Deterministic page content for codec tests and bench/codec_bench.c:
 * zero pages, random pages, text-like pages from a word list, and "mix"
 * buffers (25% zero, 25% random, 50% text). Header-only, static functions.
 */
#ifndef GW_CODEC_GEN_H
#define GW_CODEC_GEN_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define GEN_PAGE_BYTES	4096

/* splitmix64: tiny, good enough for test data, and reproducible. */
static inline uint64_t gen_rand(uint64_t *state)
{
	uint64_t z = (*state += 0x9E3779B97F4A7C15ull);

	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	return z ^ (z >> 31);
}

static inline void gen_random(uint8_t *dst, size_t len, uint64_t *state)
{
	size_t i;

	for (i = 0; i + 8 <= len; i += 8) {
		uint64_t v = gen_rand(state);

		memcpy(dst + i, &v, 8);
	}
	for (; i < len; i++)
		dst[i] = (uint8_t)gen_rand(state);
}

static const char *const gen_words[] = {
	"the", "of", "and", "to", "in", "is", "page", "memory", "guest", "kernel",
	"migration", "dirty", "bitmap", "vcpu", "return", "struct", "int", "void",
	"if", "else", "for", "while", "static", "const", "unsigned", "long",
	"0x7f3a", "error", "buffer", "channel", "socket", "round", "downtime",
	"{", "}", "(", ");", "=", "==", "->", "NULL", "size_t", "uint64_t",
	"printk", "mutex_lock", "spin_unlock", "list_for_each", "GFP_KERNEL",
};

/* Text-like bytes: words separated by spaces, a newline now and then. */
static inline void gen_text(uint8_t *dst, size_t len, uint64_t *state)
{
	const size_t nwords = sizeof(gen_words) / sizeof(gen_words[0]);
	size_t i = 0;

	while (i < len) {
		uint64_t r = gen_rand(state);
		const char *w = gen_words[r % nwords];
		size_t wl = strlen(w);

		if (wl > len - i)
			wl = len - i;
		memcpy(dst + i, w, wl);
		i += wl;
		if (i < len)
			dst[i++] = (r >> 32) % 12 == 0 ? '\n' : ' ';
	}
}

/* Per page: 25% zero, 25% random, 50% text (a partial last page too). */
static inline void gen_mix(uint8_t *dst, size_t len, uint64_t *state)
{
	size_t off;

	for (off = 0; off < len; off += GEN_PAGE_BYTES) {
		size_t n = len - off < GEN_PAGE_BYTES ? len - off : GEN_PAGE_BYTES;

		switch (gen_rand(state) % 4) {
		case 0: memset(dst + off, 0, n); break;
		case 1: gen_random(dst + off, n, state); break;
		default: gen_text(dst + off, n, state); break;
		}
	}
}

#endif
