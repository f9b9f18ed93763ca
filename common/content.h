/* SPDX-License-Identifier: MIT */
/*
 * Deterministic page content shared by every backend and by the guests:
 * the mixers behind --fill, the page the verify workload writes for
 * (page index, generation), and what the dirty workload leaves in a page.
 * Freestanding (stdint only) so that the tiny guests in guests/ compute
 * exactly what the host checks. It sits in common/ with the guest ABI:
 * guests/ and vmm/ both include it from there.
 */
#ifndef GW_VMM_CONTENT_H
#define GW_VMM_CONTENT_H

#include <stdint.h>

#define VMM_PAGE_BYTES 4096u		/* == GW_PAGE_BYTES (checked in vmm/fill.c) */

/* Small, fast, deterministic mixer (splitmix64's finaliser). */
static inline uint64_t vmm_mix64(uint64_t z)
{
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* wyrand: 8 bytes per call, passes BigCrush, a single 64x64->128 multiply. */
static inline uint64_t vmm_wyrand(uint64_t *s)
{
	__uint128_t t;

	*s += 0xa0761d6478bd642full;
	t = (__uint128_t)*s * (*s ^ 0xe7037ed1a0b428dbull);
	return (uint64_t)(t >> 64) ^ (uint64_t)t;
}

/* The value every word k >= 2 of a verify page is derived from. */
static inline uint64_t vmm_verify_seed(uint64_t page, uint64_t gen)
{
	return vmm_mix64(page * 0x9e3779b97f4a7c15ull ^ vmm_mix64(gen + 0x1234567));
}

/* Word @k (>= 2) of the verify page whose vmm_verify_seed() is @seed. */
static inline uint64_t vmm_verify_word(uint64_t seed, unsigned k)
{
	return seed ^ (k * 0xd6e8feb86659fd93ull);
}

/*
 * The verify page for (@page, @gen), VMM_PAGE_BYTES, 8-byte aligned: word 0
 * the page index, word 1 the generation, every other word k derived from
 * both and distinct. Generation 0 means "never written by the workload"
 * (the page holds its --fill content instead).
 */
static inline void vmm_verify_page(uint64_t page, uint64_t gen, uint64_t *out)
{
	uint64_t x = vmm_verify_seed(page, gen);

	out[0] = page;
	out[1] = gen;
	for (unsigned k = 2; k < VMM_PAGE_BYTES / 8; k++)
		out[k] = vmm_verify_word(x, k);
}

/*
 * The dirty workload's page at slice offset @off once generations 1..@gen
 * wrote it (gen 0: never written, @out untouched). Every write stores
 * v = gen << 20 ^ off: pattern=page writes the whole page, word k =
 * v + k * @page_step (the soft VM steps by 1, the KVM guest by 0), so
 * the last generation decides it all; pattern=byte writes the one word
 * 8 * (gen % 64) + 1, so each of those 64 words holds the last generation
 * <= @gen of its residue and every other word keeps what @out holds on
 * entry (the --fill content).
 */
static inline void vmm_dirty_page(uint64_t off, uint64_t gen, int whole, uint64_t page_step,
				  uint64_t *out)
{
	if (!gen)
		return;
	if (whole) {
		for (unsigned k = 0; k < VMM_PAGE_BYTES / 8; k++)
			out[k] = (gen << 20 ^ off) + k * page_step;
		return;
	}
	for (uint64_t r = 0; r < 64; r++) {
		uint64_t g = gen - (gen % 64 + 64 - r) % 64;	/* the last g <= gen with g % 64 == r */

		if (g >= 1 && g <= gen)
			out[(g * 8 + 1) % (VMM_PAGE_BYTES / 8)] = g << 20 ^ off;
	}
}

#endif
