/* SPDX-License-Identifier: MIT */
/*
 * The computation of the `compute` guest, shared with the tests that check
 * its result on the host. Integer only (KVM's instruction emulator, which
 * runs guests on nested hosts, has no SSE arithmetic), in blocks: the guest
 * keeps `vec` in %xmm9 for the whole run and `roll` in %xmm8 between blocks
 * (only there: its memory copy is zeroed), and the loop variables in
 * general registers, so that a save/load that lost general registers,
 * memory or XSAVE state ends with another result. Deterministic.
 */
#ifndef GW_COMPUTE_ALGO_H
#define GW_COMPUTE_ALGO_H

#include <stdint.h>
#include "content.h"

#define COMPUTE_WORDS 64
#define COMPUTE_BLOCK_ITERS 256		/* iterations per block (progress published per block) */

struct compute_state {
	uint64_t words[COMPUTE_WORDS];
	uint64_t x;
	uint64_t done;			/* iterations done */
	uint64_t vec[2];		/* guest: in %xmm9 from init to the end */
	uint64_t roll[2];		/* guest: in %xmm8 between blocks */
};

static inline void compute_init(struct compute_state *s, uint64_t seed)
{
	for (unsigned i = 0; i < COMPUTE_WORDS; i++)
		s->words[i] = vmm_mix64(seed + i);
	s->x = seed;
	s->done = 0;
	s->vec[0] = vmm_mix64(seed ^ 0x5555);
	s->vec[1] = vmm_mix64(seed ^ 0xaaaa);
	s->roll[0] = s->roll[1] = 0;
}

/* One block of up to COMPUTE_BLOCK_ITERS iterations (fewer at the end). */
static inline void compute_block(struct compute_state *s, uint64_t iters)
{
	uint64_t x = s->x, done = s->done;

	for (uint64_t i = 0; i < iters; i++, done++) {
		x = vmm_mix64(x + done);
		s->words[x % COMPUTE_WORDS] ^= x;
	}
	s->x = x;
	s->done = done;
	s->roll[0] ^= x;
	s->roll[1] += x;
}

static inline uint64_t compute_result(const struct compute_state *s)
{
	uint64_t h = s->x ^ s->vec[0] ^ vmm_mix64(s->vec[1] ^ s->roll[0] ^ vmm_mix64(s->roll[1]));

	for (unsigned i = 0; i < COMPUTE_WORDS; i++)
		h = vmm_mix64(h ^ s->words[i]);
	return h;
}

/* The whole computation, as the host runs it for reference. */
static inline uint64_t compute_reference(uint64_t seed, uint64_t iters)
{
	struct compute_state s;

	compute_init(&s, seed);
	while (s.done < iters)
		compute_block(&s, iters - s.done < COMPUTE_BLOCK_ITERS ? iters - s.done :
				  COMPUTE_BLOCK_ITERS);
	return compute_result(&s);
}

#endif
